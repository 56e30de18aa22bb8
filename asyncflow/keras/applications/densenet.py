"""`tf.keras.applications.densenet`: DenseNet121/169/201 (Huang et al. 2017): dense
blocks (each conv block's output concatenated to its input) joined by transition
blocks that halve the channels and the resolution."""

from __future__ import annotations

from asyncflow.keras import backend, backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/densenet/"

_EPS = 1.001e-5
# blocks -> (model name, (top, no top) weight file hashes)
_MODELS = {
    (6, 12, 24, 16): (
        "densenet121",
        ("9d60b8095a5708f2dcce2bca79d332c7", "30ee3e1110167f948a6b9946edeeb738"),
    ),
    (6, 12, 32, 32): (
        "densenet169",
        ("d699b8f76981ab1b30698df4c175e90b", "b8c4d4c20dd625c148057b9ff1c1176b"),
    ),
    (6, 12, 48, 32): (
        "densenet201",
        ("1ceb130c1ea1b78c3bf6114dbdfd8807", "c13680b51ded0fb44dff2d8f86ac8bb1"),
    ),
}

__all__ = ["DenseNet121", "DenseNet169", "DenseNet201", "decode_predictions", "preprocess_input"]


def _bn(x, name):
    return layers.BatchNormalization(axis=_common.channel_axis(), epsilon=_EPS, name=name)(x)


def dense_block(x, blocks, name):
    """`blocks` conv blocks, each adding 32 channels."""
    for i in range(blocks):
        x = conv_block(x, 32, name=name + "_block" + str(i + 1))
    return x


def transition_block(x, reduction, name):
    """BN, ReLU, a 1x1 convolution to `reduction` of the channels, 2x2 average pool."""
    x = _bn(x, name + "_bn")
    x = layers.Activation("relu", name=name + "_relu")(x)
    filters = int(backend.int_shape(x)[_common.channel_axis()] * reduction)
    x = layers.Conv2D(filters, 1, use_bias=False, name=name + "_conv")(x)
    return layers.AveragePooling2D(2, strides=2, name=name + "_pool")(x)


def conv_block(x, growth_rate, name):
    """BN-ReLU-1x1 conv (4 * growth_rate) then BN-ReLU-3x3 conv (growth_rate),
    concatenated to x."""
    x1 = _bn(x, name + "_0_bn")
    x1 = layers.Activation("relu", name=name + "_0_relu")(x1)
    x1 = layers.Conv2D(4 * growth_rate, 1, use_bias=False, name=name + "_1_conv")(x1)
    x1 = _bn(x1, name + "_1_bn")
    x1 = layers.Activation("relu", name=name + "_1_relu")(x1)
    x1 = layers.Conv2D(growth_rate, 3, padding="same", use_bias=False, name=name + "_2_conv")(x1)
    return layers.Concatenate(axis=_common.channel_axis(), name=name + "_concat")([x, x1])


def DenseNet(  # noqa: N802 - Keras' name
    blocks,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """A DenseNet with `blocks[i]` conv blocks in dense block i; input 224x224 by
    default, at least 32x32.

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape` or `classifier_activation`.
      UnboundLocalError: `weights='imagenet'` with `blocks` other than the lists of
        DenseNet121/169/201 (Keras' own failure: it has no weights file to load).
    """
    _common.check_weights(weights, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    known = _MODELS.get(tuple(blocks)) if isinstance(blocks, list) else None
    if weights == "imagenet" and known is None:
        # Keras has ImageNet files for its three block lists only (a list, compared with
        # ==): it fails on the path it never set, UnboundLocalError, after building the
        # model; here before, to spare the build, once the checks the build makes passed.
        if include_top:
            imagenet_utils.validate_activation(classifier_activation, weights)
        raise UnboundLocalError(
            "cannot access local variable 'weights_path' where it is not associated "
            f"with a value (DenseNet has no ImageNet weights for blocks={blocks!r})"
        )
    img_input = _common.image_input(input_tensor, input_shape)
    x = layers.ZeroPadding2D(padding=((3, 3), (3, 3)))(img_input)
    x = layers.Conv2D(64, 7, strides=2, use_bias=False, name="conv1/conv")(x)
    x = _bn(x, "conv1/bn")
    x = layers.Activation("relu", name="conv1/relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)))(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1")(x)
    for stage in range(4):
        x = dense_block(x, blocks[stage], name=f"conv{stage + 2}")
        if stage < 3:
            x = transition_block(x, 0.5, name=f"pool{stage + 2}")
    x = _bn(x, "bn")
    x = layers.Activation("relu", name="relu")(x)
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights, "avg_pool")
    else:
        x = _common.pool(x, pooling, "avg_pool", "max_pool")
    model = _common.make_model(img_input, input_tensor, x, known[0] if known else "densenet")
    if weights == "imagenet":
        suffix = "" if include_top else "_notop"
        fname = f"{known[0]}_weights_tf_dim_ordering_tf_kernels{suffix}.h5"
        file_hash = known[1][0 if include_top else 1]
        return _common.load(model, weights, fname, "densenet", file_hash)
    _common.load(model, weights)
    return model


def DenseNet121(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """DenseNet121 (6, 12, 24, 16 conv blocks).

    Raises:
      ValueError: see `DenseNet`.
    """
    return DenseNet([6, 12, 24, 16], include_top, weights, input_tensor, input_shape,
                    pooling, classes, classifier_activation)  # fmt: skip


def DenseNet169(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """DenseNet169 (6, 12, 32, 32 conv blocks).

    Raises:
      ValueError: see `DenseNet`.
    """
    return DenseNet([6, 12, 32, 32], include_top, weights, input_tensor, input_shape,
                    pooling, classes, classifier_activation)  # fmt: skip


def DenseNet201(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """DenseNet201 (6, 12, 48, 32 conv blocks).

    Raises:
      ValueError: see `DenseNet`.
    """
    return DenseNet([6, 12, 48, 32], include_top, weights, input_tensor, input_shape,
                    pooling, classes, classifier_activation)  # fmt: skip


def preprocess_input(x, data_format=None):
    """ImageNet "torch" preprocessing: pixels scaled to [0, 1], then normalized per
    channel.

    Raises:
      ValueError: unknown `data_format`.
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="torch")


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`.

    Raises:
      ValueError: `preds` is not of shape (samples, 1000).
    """
    return imagenet_utils.decode_predictions(preds, top=top)
