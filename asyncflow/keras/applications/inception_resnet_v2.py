"""`tf.keras.applications.inception_resnet_v2`: Inception-ResNet-v2 (Szegedy et al.
2016): Inception modules whose output, scaled, is added to their input
(`CustomScaleLayer`)."""

from __future__ import annotations

from asyncflow.keras import backend, backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHT_URL = (
    "https://storage.googleapis.com/tensorflow/keras-applications/inception_resnet_v2/"
)

__all__ = ["InceptionResNetV2", "decode_predictions", "preprocess_input"]


class CustomScaleLayer(layers.Layer):
    """`inputs[0] + inputs[1] * scale`: the residual sum of an Inception-ResNet block."""

    def __init__(self, scale, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def get_config(self):
        config = super().get_config()
        config.update({"scale": self.scale})
        return config

    def call(self, inputs):
        return inputs[0] + inputs[1] * self.scale


def conv2d_bn(
    x, filters, kernel_size, strides=1, padding="same", activation="relu", use_bias=False,
    name=None,
):  # fmt: skip
    """Convolution, then (without bias) batch normalization without scale, then
    `activation`."""
    x = layers.Conv2D(
        filters, kernel_size, strides=strides, padding=padding, use_bias=use_bias, name=name
    )(x)
    if not use_bias:
        bn_name = None if name is None else name + "_bn"
        x = layers.BatchNormalization(axis=_common.channel_axis(), scale=False, name=bn_name)(x)
    if activation is not None:
        ac_name = None if name is None else name + "_ac"
        x = layers.Activation(activation, name=ac_name)(x)
    return x


def inception_resnet_block(x, scale, block_type, block_idx, activation="relu"):
    """An Inception-ResNet block ('block35', 'block17' or 'block8'): branches mixed by a
    1x1 convolution to x's width, added to x scaled by `scale`.

    Raises:
      ValueError: unknown `block_type`.
    """
    if block_type == "block35":
        branch_0 = conv2d_bn(x, 32, 1)
        branch_1 = conv2d_bn(x, 32, 1)
        branch_1 = conv2d_bn(branch_1, 32, 3)
        branch_2 = conv2d_bn(x, 32, 1)
        branch_2 = conv2d_bn(branch_2, 48, 3)
        branch_2 = conv2d_bn(branch_2, 64, 3)
        branches = [branch_0, branch_1, branch_2]
    elif block_type in ("block17", "block8"):
        wide = block_type == "block17"
        branch_0 = conv2d_bn(x, 192, 1)
        branch_1 = conv2d_bn(x, 128 if wide else 192, 1)
        branch_1 = conv2d_bn(branch_1, 160 if wide else 224, [1, 7] if wide else [1, 3])
        branch_1 = conv2d_bn(branch_1, 192 if wide else 256, [7, 1] if wide else [3, 1])
        branches = [branch_0, branch_1]
    else:
        raise ValueError(
            'Unknown Inception-ResNet block type. Expects "block35", "block17" or "block8", '
            "but got: " + str(block_type)
        )
    block_name = block_type + "_" + str(block_idx)
    axis = _common.channel_axis()
    mixed = layers.Concatenate(axis=axis, name=block_name + "_mixed")(branches)
    up = conv2d_bn(
        mixed, backend.int_shape(x)[axis], 1, activation=None, use_bias=True,
        name=block_name + "_conv",
    )  # fmt: skip
    x = CustomScaleLayer(scale)([x, up])
    if activation is not None:
        x = layers.Activation(activation, name=block_name + "_ac")(x)
    return x


def _features(img_input):
    axis = _common.channel_axis()
    x = conv2d_bn(img_input, 32, 3, strides=2, padding="valid")
    x = conv2d_bn(x, 32, 3, padding="valid")
    x = conv2d_bn(x, 64, 3)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = conv2d_bn(x, 80, 1, padding="valid")
    x = conv2d_bn(x, 192, 3, padding="valid")
    x = layers.MaxPooling2D(3, strides=2)(x)
    branch_0 = conv2d_bn(x, 96, 1)
    branch_1 = conv2d_bn(x, 48, 1)
    branch_1 = conv2d_bn(branch_1, 64, 5)
    branch_2 = conv2d_bn(x, 64, 1)
    branch_2 = conv2d_bn(branch_2, 96, 3)
    branch_2 = conv2d_bn(branch_2, 96, 3)
    branch_pool = layers.AveragePooling2D(3, strides=1, padding="same")(x)
    branch_pool = conv2d_bn(branch_pool, 64, 1)
    branches = [branch_0, branch_1, branch_2, branch_pool]
    x = layers.Concatenate(axis=axis, name="mixed_5b")(branches)
    for block_idx in range(1, 11):
        x = inception_resnet_block(x, scale=0.17, block_type="block35", block_idx=block_idx)
    branch_0 = conv2d_bn(x, 384, 3, strides=2, padding="valid")
    branch_1 = conv2d_bn(x, 256, 1)
    branch_1 = conv2d_bn(branch_1, 256, 3)
    branch_1 = conv2d_bn(branch_1, 384, 3, strides=2, padding="valid")
    branch_pool = layers.MaxPooling2D(3, strides=2, padding="valid")(x)
    x = layers.Concatenate(axis=axis, name="mixed_6a")([branch_0, branch_1, branch_pool])
    for block_idx in range(1, 21):
        x = inception_resnet_block(x, scale=0.1, block_type="block17", block_idx=block_idx)
    branch_0 = conv2d_bn(x, 256, 1)
    branch_0 = conv2d_bn(branch_0, 384, 3, strides=2, padding="valid")
    branch_1 = conv2d_bn(x, 256, 1)
    branch_1 = conv2d_bn(branch_1, 288, 3, strides=2, padding="valid")
    branch_2 = conv2d_bn(x, 256, 1)
    branch_2 = conv2d_bn(branch_2, 288, 3)
    branch_2 = conv2d_bn(branch_2, 320, 3, strides=2, padding="valid")
    branch_pool = layers.MaxPooling2D(3, strides=2, padding="valid")(x)
    branches = [branch_0, branch_1, branch_2, branch_pool]
    x = layers.Concatenate(axis=axis, name="mixed_7a")(branches)
    for block_idx in range(1, 10):
        x = inception_resnet_block(x, scale=0.2, block_type="block8", block_idx=block_idx)
    x = inception_resnet_block(x, scale=1.0, activation=None, block_type="block8", block_idx=10)
    return conv2d_bn(x, 1536, 1, name="conv_7b")


def InceptionResNetV2(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    **kwargs,
):
    """Inception-ResNet-v2; input 299x299 by default, at least 75x75.

    Raises:
      ValueError: unknown keyword arguments, bad `weights`, `classes`, `input_shape` or
        `classifier_activation`.
    """
    kwargs.pop("layers", None)
    if kwargs:
        raise ValueError(f"Unknown argument(s): {kwargs}")
    _common.check_weights(weights, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=299,
        min_size=75,
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
    model = _common.make_model(img_input, input_tensor, x, "inception_resnet_v2")
    if include_top:
        fname = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels.h5"
        file_hash = "e693bd0210a403b3192acc6073ad2e96"
    else:
        fname = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels_notop.h5"
        file_hash = "d19885ff4a710c122648d3b5c3b684e4"
    return _common.load(model, weights, fname, "inception_resnet_v2", file_hash)


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
