"""`tf.keras.applications.xception`: Xception (Chollet 2017): depthwise separable
convolutions with residual connections (the entry flow's 1x1 strided shortcuts are
unnamed, as in Keras)."""

from __future__ import annotations

from asyncflow.keras import backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

TF_WEIGHTS_PATH = (
    "https://storage.googleapis.com/tensorflow/keras-applications/xception/"
    "xception_weights_tf_dim_ordering_tf_kernels.h5"
)
TF_WEIGHTS_PATH_NO_TOP = (
    "https://storage.googleapis.com/tensorflow/keras-applications/xception/"
    "xception_weights_tf_dim_ordering_tf_kernels_notop.h5"
)

__all__ = ["Xception", "decode_predictions", "preprocess_input"]


def _bn(x, name=None):
    return layers.BatchNormalization(axis=_common.channel_axis(-1), name=name)(x)


def _sepconv_bn(x, filters, name):
    x = layers.SeparableConv2D(filters, (3, 3), padding="same", use_bias=False, name=name)(x)
    return _bn(x, name + "_bn")


def _shortcut(x, filters):
    residual = layers.Conv2D(filters, (1, 1), strides=(2, 2), padding="same", use_bias=False)(x)
    return _bn(residual)


def _entry_block(x, block, filters, first_relu=True):
    """Two separable convolutions and a strided max pool beside a strided 1x1
    shortcut."""
    prefix = f"block{block}"
    residual = _shortcut(x, filters[-1])
    if first_relu:
        x = layers.Activation("relu", name=prefix + "_sepconv1_act")(x)
    x = _sepconv_bn(x, filters[0], prefix + "_sepconv1")
    x = layers.Activation("relu", name=prefix + "_sepconv2_act")(x)
    x = _sepconv_bn(x, filters[1], prefix + "_sepconv2")
    x = layers.MaxPooling2D((3, 3), strides=(2, 2), padding="same", name=prefix + "_pool")(x)
    return layers.add([x, residual])


def _features(img_input):
    x = layers.Conv2D(32, (3, 3), strides=(2, 2), use_bias=False, name="block1_conv1")(img_input)
    x = _bn(x, "block1_conv1_bn")
    x = layers.Activation("relu", name="block1_conv1_act")(x)
    x = layers.Conv2D(64, (3, 3), use_bias=False, name="block1_conv2")(x)
    x = _bn(x, "block1_conv2_bn")
    x = layers.Activation("relu", name="block1_conv2_act")(x)
    x = _entry_block(x, 2, (128, 128), first_relu=False)
    x = _entry_block(x, 3, (256, 256))
    x = _entry_block(x, 4, (728, 728))
    for i in range(8):
        residual = x
        prefix = "block" + str(i + 5)
        for j in (1, 2, 3):
            x = layers.Activation("relu", name=f"{prefix}_sepconv{j}_act")(x)
            x = _sepconv_bn(x, 728, f"{prefix}_sepconv{j}")
        x = layers.add([x, residual])
    x = _entry_block(x, 13, (728, 1024))
    x = _sepconv_bn(x, 1536, "block14_sepconv1")
    x = layers.Activation("relu", name="block14_sepconv1_act")(x)
    x = _sepconv_bn(x, 2048, "block14_sepconv2")
    return layers.Activation("relu", name="block14_sepconv2_act")(x)


def Xception(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """Xception; input 299x299 by default, at least 71x71.

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape` or `classifier_activation`.
    """
    _common.check_weights(weights, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=299,
        min_size=71,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = _common.image_input(input_tensor, input_shape)
    x = _features(img_input)
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights, "avg_pool")
    else:
        x = _common.pool(x, pooling)
    model = _common.make_model(img_input, input_tensor, x, "xception")
    if include_top:
        fname = "xception_weights_tf_dim_ordering_tf_kernels.h5"
        file_hash = "0a58e3b7378bc2990ea3b43d5981f1f6"
    else:
        fname = "xception_weights_tf_dim_ordering_tf_kernels_notop.h5"
        file_hash = "b0042744bf5b25fce3cb969f33bebb97"
    return _common.load(model, weights, fname, "xception", file_hash)


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
