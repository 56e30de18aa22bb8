"""`tf.keras.applications.resnet_v2`: ResNet50V2/101V2/152V2 (He et al. 2016,
pre-activation), on resnet's `ResNet` with `stack2`; inputs scaled to [-1, 1]."""

from __future__ import annotations

from asyncflow.keras.applications import imagenet_utils, resnet

__all__ = ["ResNet50V2", "ResNet101V2", "ResNet152V2", "decode_predictions", "preprocess_input"]


def _v2_stacks(blocks):
    def stack_fn(x):
        x = resnet.stack2(x, 64, blocks[0], name="conv2")
        x = resnet.stack2(x, 128, blocks[1], name="conv3")
        x = resnet.stack2(x, 256, blocks[2], name="conv4")
        return resnet.stack2(x, 512, blocks[3], stride1=1, name="conv5")

    return stack_fn


def _v2(blocks, model_name, include_top, weights, input_tensor, input_shape, pooling,
        classes, classifier_activation):  # fmt: skip
    return resnet.ResNet(
        _v2_stacks(blocks), True, True, model_name, include_top, weights, input_tensor,
        input_shape, pooling, classes, classifier_activation=classifier_activation,
    )  # fmt: skip


def ResNet50V2(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """ResNet50V2 (3, 4, 6, 3 pre-activation blocks); input 224x224 by default.

    Raises:
      ValueError: see `resnet.ResNet`.
    """
    return _v2((3, 4, 6, 3), "resnet50v2", include_top, weights, input_tensor, input_shape,
               pooling, classes, classifier_activation)  # fmt: skip


def ResNet101V2(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """ResNet101V2 (3, 4, 23, 3 pre-activation blocks).

    Raises:
      ValueError: see `resnet.ResNet`.
    """
    return _v2((3, 4, 23, 3), "resnet101v2", include_top, weights, input_tensor,
               input_shape, pooling, classes, classifier_activation)  # fmt: skip


def ResNet152V2(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """ResNet152V2 (3, 8, 36, 3 pre-activation blocks).

    Raises:
      ValueError: see `resnet.ResNet`.
    """
    return _v2((3, 8, 36, 3), "resnet152v2", include_top, weights, input_tensor,
               input_shape, pooling, classes, classifier_activation)  # fmt: skip


def preprocess_input(x, data_format=None):
    """ImageNet "tf" preprocessing: pixels scaled to [-1, 1].

    Raises:
      ValueError: unknown `data_format`.
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`.

    Raises:
      ValueError: `preds` is not of shape (samples, 1000).
    """
    return imagenet_utils.decode_predictions(preds, top=top)
