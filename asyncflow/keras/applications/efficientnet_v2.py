"""`tf.keras.applications.efficientnet_v2`: EfficientNetV2 B0-B3, S, M and L (Tan & Le
2021), built as TF 2.21's tf_keras builds them in TF1 graph mode (layer names and order,
weights), so Keras' ImageNet weight files load by layer order.

Early stages use fused blocks (one full convolution instead of expand + depthwise).
The models take pixels in [0, 255]: B0-B3 normalise with ImageNet's statistics, S/M/L
rescale to [-1, 1] (when `include_preprocessing`). Like TF, a block's residual dropout
rate is its `survival_probability` (it grows with depth from 0).
"""

from __future__ import annotations

import copy
import math

from asyncflow import gfile
from asyncflow.keras import backend
from asyncflow.keras import initializers as _init
from asyncflow.keras import layers as L
from asyncflow.keras.applications import _common_v2 as common
from asyncflow.keras.applications.efficientnet import (
    conv_kernel_initializer,
    dense_kernel_initializer,
)
from asyncflow.keras.training import Model

__all__ = [
    "EfficientNetV2B0",
    "EfficientNetV2B1",
    "EfficientNetV2B2",
    "EfficientNetV2B3",
    "EfficientNetV2S",
    "EfficientNetV2M",
    "EfficientNetV2L",
    "preprocess_input",
    "decode_predictions",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/"
# (with top, without top) md5 of Keras' published files, by the model name's last 2 chars.
WEIGHTS_HASHES = {
    "b0": ("21ecbf6da12460d5c40bb2f29ceb2188", "893217f2bb855e2983157299931e43ff"),
    "b1": ("069f0534ff22adf035c89e2d9547a9dc", "0e80663031ca32d657f9caa404b6ec37"),
    "b2": ("424e49f28180edbde1e94797771950a7", "1dfe2e7a5d45b6632553a8961ea609eb"),
    "b3": ("1f1fc43bd98a6e4fd8fdfd551e02c7a0", "f6abf7b5849ac99a89b50dd3fd532856"),
    "-s": ("e1d88a8495beba45748fedd0cecbe016", "af0682fb74e8c54910f2d4393339c070"),
    "-m": ("a3bf6aa3276309f4fc6a34aa114c95cd", "1b8dc055df72dde80d614482840fe342"),
    "-l": ("27e6d408b53c7ebc868fefa357689935", "b0b66b5c863aef5b46e8608fe1711615"),
}

_KEYS = (
    "kernel_size", "num_repeat", "input_filters", "output_filters", "expand_ratio",
    "se_ratio", "strides", "conv_type",
)  # fmt: skip
# conv_type 1 is a fused block, 0 a depthwise one.
_B = [
    (3, 1, 32, 16, 1, 0, 1, 1),
    (3, 2, 16, 32, 4, 0, 2, 1),
    (3, 2, 32, 48, 4, 0, 2, 1),
    (3, 3, 48, 96, 4, 0.25, 2, 0),
    (3, 5, 96, 112, 6, 0.25, 1, 0),
    (3, 8, 112, 192, 6, 0.25, 2, 0),
]
_S = [
    (3, 2, 24, 24, 1, 0.0, 1, 1),
    (3, 4, 24, 48, 4, 0.0, 2, 1),
    (3, 4, 48, 64, 4, 0, 2, 1),
    (3, 6, 64, 128, 4, 0.25, 2, 0),
    (3, 9, 128, 160, 6, 0.25, 1, 0),
    (3, 15, 160, 256, 6, 0.25, 2, 0),
]
_M = [
    (3, 3, 24, 24, 1, 0, 1, 1),
    (3, 5, 24, 48, 4, 0, 2, 1),
    (3, 5, 48, 80, 4, 0, 2, 1),
    (3, 7, 80, 160, 4, 0.25, 2, 0),
    (3, 14, 160, 176, 6, 0.25, 1, 0),
    (3, 18, 176, 304, 6, 0.25, 2, 0),
    (3, 5, 304, 512, 6, 0.25, 1, 0),
]
_L = [
    (3, 4, 32, 32, 1, 0, 1, 1),
    (3, 7, 32, 64, 4, 0, 2, 1),
    (3, 7, 64, 96, 4, 0, 2, 1),
    (3, 10, 96, 192, 4, 0.25, 2, 0),
    (3, 19, 192, 224, 6, 0.25, 1, 0),
    (3, 25, 224, 384, 6, 0.25, 2, 0),
    (3, 7, 384, 640, 6, 0.25, 1, 0),
]
DEFAULT_BLOCKS_ARGS = {
    name: [dict(zip(_KEYS, row, strict=True)) for row in rows]
    for name, rows in (
        ("efficientnetv2-s", _S),
        ("efficientnetv2-m", _M),
        ("efficientnetv2-l", _L),
        ("efficientnetv2-b0", _B),
        ("efficientnetv2-b1", _B),
        ("efficientnetv2-b2", _B),
        ("efficientnetv2-b3", _B),
    )
}


def round_filters(filters, width_coefficient, min_depth, depth_divisor) -> int:
    """`filters * width_coefficient` rounded to a multiple of `depth_divisor`."""
    filters *= width_coefficient
    minimum = min_depth or depth_divisor
    return int(max(minimum, int(filters + depth_divisor / 2) // depth_divisor * depth_divisor))


def round_repeats(repeats, depth_coefficient) -> int:
    return int(math.ceil(depth_coefficient * repeats))


def _bn(x, name, bn_axis, momentum):
    return L.BatchNormalization(axis=bn_axis, momentum=momentum, name=name)(x)


def _conv(filters, kernel, name, strides=1, **kwargs):
    return L.Conv2D(
        filters, kernel, strides=strides, kernel_initializer=conv_kernel_initializer(),
        padding="same", use_bias=False, name=name, **kwargs,
    )  # fmt: skip


def _squeeze_excite(x, filters, filters_se, activation, name, bn_axis):
    se = L.GlobalAveragePooling2D(name=name + "se_squeeze")(x)
    se = L.Reshape((filters, 1, 1) if bn_axis == 1 else (1, 1, filters), name=name + "se_reshape")(
        se
    )
    se = L.Conv2D(
        filters_se, 1, padding="same", activation=activation,
        kernel_initializer=conv_kernel_initializer(), name=name + "se_reduce",
    )(se)  # fmt: skip
    se = L.Conv2D(
        filters, 1, padding="same", activation="sigmoid",
        kernel_initializer=conv_kernel_initializer(), name=name + "se_expand",
    )(se)  # fmt: skip
    return L.multiply([x, se], name=name + "se_excite")


def _residual(x, inputs, strides, input_filters, output_filters, survival_probability, name):
    if strides == 1 and input_filters == output_filters:
        if survival_probability:
            x = L.Dropout(survival_probability, noise_shape=(None, 1, 1, 1), name=name + "drop")(x)
        x = L.add([x, inputs], name=name + "add")
    return x


def MBConvBlock(  # noqa: N802 - Keras' name
    input_filters,
    output_filters,
    expand_ratio=1,
    kernel_size=3,
    strides=1,
    se_ratio=0.0,
    bn_momentum=0.9,
    activation="swish",
    survival_probability=0.8,
    name=None,
):
    """Expand 1x1, depthwise, squeeze-excite, project 1x1 (+ residual)."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    if name is None:
        name = backend.get_uid("block0")

    def apply(inputs):
        filters = input_filters * expand_ratio
        x = inputs
        if expand_ratio != 1:
            x = _conv(filters, 1, name + "expand_conv")(x)
            x = _bn(x, name + "expand_bn", bn_axis, bn_momentum)
            x = L.Activation(activation, name=name + "expand_activation")(x)
        x = L.DepthwiseConv2D(
            kernel_size, strides=strides, depthwise_initializer=conv_kernel_initializer(),
            padding="same", use_bias=False, name=name + "dwconv2",
        )(x)  # fmt: skip
        x = _bn(x, name + "bn", bn_axis, bn_momentum)
        x = L.Activation(activation, name=name + "activation")(x)
        if 0 < se_ratio <= 1:
            filters_se = max(1, int(input_filters * se_ratio))
            x = _squeeze_excite(x, filters, filters_se, activation, name, bn_axis)
        x = _conv(output_filters, 1, name + "project_conv")(x)
        x = _bn(x, name + "project_bn", bn_axis, bn_momentum)
        return _residual(
            x, inputs, strides, input_filters, output_filters, survival_probability, name
        )

    return apply


def FusedMBConvBlock(  # noqa: N802 - Keras' name
    input_filters,
    output_filters,
    expand_ratio=1,
    kernel_size=3,
    strides=1,
    se_ratio=0.0,
    bn_momentum=0.9,
    activation="swish",
    survival_probability=0.8,
    name=None,
):
    """One full kxk convolution (expanding), squeeze-excite, project 1x1 (+ residual);
    without expansion the projection is the kxk convolution itself."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    if name is None:
        name = backend.get_uid("block0")

    def apply(inputs):
        filters = input_filters * expand_ratio
        x = inputs
        if expand_ratio != 1:
            x = _conv(filters, kernel_size, name + "expand_conv", strides=strides)(x)
            x = _bn(x, name + "expand_bn", bn_axis, bn_momentum)
            x = L.Activation(activation=activation, name=name + "expand_activation")(x)
        if 0 < se_ratio <= 1:
            filters_se = max(1, int(input_filters * se_ratio))
            x = _squeeze_excite(x, filters, filters_se, activation, name, bn_axis)
        expanded = expand_ratio != 1
        x = _conv(
            output_filters, 1 if expanded else kernel_size, name + "project_conv",
            strides=1 if expanded else strides,
        )(x)  # fmt: skip
        x = _bn(x, name + "project_bn", bn_axis, bn_momentum)
        if not expanded:
            x = L.Activation(activation=activation, name=name + "project_activation")(x)
        return _residual(
            x, inputs, strides, input_filters, output_filters, survival_probability, name
        )

    return apply


def _preprocess(x, model_name, num_channels, bn_axis):
    if model_name.split("-")[-1].startswith("b") and num_channels == 3:
        x = L.Rescaling(scale=1.0 / 255)(x)
        return L.Normalization(
            mean=[0.485, 0.456, 0.406],
            variance=[0.229**2, 0.224**2, 0.225**2],
            axis=bn_axis,
        )(x)
    return L.Rescaling(scale=1.0 / 128.0, offset=-1)(x)


def _check_weights(weights, include_top, classes) -> None:
    if not (weights in {"imagenet", None} or gfile.Exists(weights)):
        raise ValueError(
            "The `weights` argument should be either `None` (random initialization), "
            "`imagenet` (pre-training on ImageNet), or the path to the weights file to be "
            f"loaded.Received: weights={weights}"
        )
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(
            "If using `weights` as `'imagenet'` with `include_top` as true, `classes` should "
            f"be 1000Received: classes={classes}"
        )


def EfficientNetV2(  # noqa: N802 - Keras' name
    width_coefficient,
    depth_coefficient,
    default_size,
    dropout_rate=0.2,
    drop_connect_rate=0.2,
    depth_divisor=8,
    min_depth=8,
    bn_momentum=0.9,
    activation="swish",
    blocks_args="default",
    model_name="efficientnetv2",
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
):
    """An EfficientNetV2; see EfficientNetV2B0.

    Raises:
      ValueError: as EfficientNetV2B0.
    """
    if blocks_args == "default":
        blocks_args = DEFAULT_BLOCKS_ARGS[model_name]
    _check_weights(weights, include_top, classes)
    input_shape = common.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = common.image_input(input_tensor, input_shape)
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1

    def rounded(filters):
        return round_filters(filters, width_coefficient, min_depth, depth_divisor)

    x = img_input
    if include_preprocessing:
        x = _preprocess(x, model_name, input_shape[bn_axis - 1], bn_axis)
    x = _conv(rounded(blocks_args[0]["input_filters"]), 3, "stem_conv", strides=2)(x)
    x = _bn(x, "stem_bn", bn_axis, bn_momentum)
    x = L.Activation(activation, name="stem_activation")(x)

    blocks_args = copy.deepcopy(blocks_args)
    b = 0
    total = float(sum(args["num_repeat"] for args in blocks_args))
    for i, args in enumerate(blocks_args):
        args["input_filters"] = rounded(args["input_filters"])
        args["output_filters"] = rounded(args["output_filters"])
        block = {0: MBConvBlock, 1: FusedMBConvBlock}[args.pop("conv_type")]
        for j in range(round_repeats(args.pop("num_repeat"), depth_coefficient)):
            if j > 0:
                args["strides"] = 1
                args["input_filters"] = args["output_filters"]
            x = block(
                activation=activation,
                bn_momentum=bn_momentum,
                survival_probability=drop_connect_rate * b / total,
                name=f"block{i + 1}{chr(j + 97)}_",
                **args,
            )(x)
            b += 1

    x = _conv(rounded(1280), 1, "top_conv")(x)
    x = _bn(x, "top_bn", bn_axis, bn_momentum)
    x = L.Activation(activation=activation, name="top_activation")(x)
    if include_top:
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = L.Dropout(dropout_rate, name="top_dropout")(x)
        common.validate_activation(classifier_activation, weights)
        x = L.Dense(
            classes,
            activation=classifier_activation,
            kernel_initializer=dense_kernel_initializer(),
            bias_initializer=_init.Constant(0),
            name="predictions",
        )(x)
    elif pooling == "avg":
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = L.GlobalMaxPooling2D(name="max_pool")(x)
    model = Model(common.model_inputs(input_tensor, img_input), x, name=model_name)

    if weights == "imagenet":
        suffix = ".h5" if include_top else "_notop.h5"
        file_hash = WEIGHTS_HASHES[model_name[-2:]][0 if include_top else 1]
        common.load_weights(model, model_name + suffix, BASE_WEIGHTS_PATH, file_hash)
    elif weights is not None:
        model.load_weights(weights)
    return model


def _variant(public, model_name, width, depth, size):
    def build(
        include_top=True,
        weights="imagenet",
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        include_preprocessing=True,
    ):
        return EfficientNetV2(
            width_coefficient=width,
            depth_coefficient=depth,
            default_size=size,
            model_name=model_name,
            include_top=include_top,
            weights=weights,
            input_tensor=input_tensor,
            input_shape=input_shape,
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
            include_preprocessing=include_preprocessing,
        )

    build.__name__ = build.__qualname__ = public
    build.__doc__ = f"""{public} (default input {size}x{size}); `weights='imagenet'` loads
    Keras' ImageNet weights from its cache (fetched once). Inputs are pixels in [0, 255].

    Raises:
      ValueError: bad `weights`, `classes` other than 1000 with ImageNet's top, a bad
        `input_shape`, or a classifier activation other than softmax with weights.
    """
    return build


EfficientNetV2B0 = _variant("EfficientNetV2B0", "efficientnetv2-b0", 1.0, 1.0, 224)
EfficientNetV2B1 = _variant("EfficientNetV2B1", "efficientnetv2-b1", 1.0, 1.1, 240)
EfficientNetV2B2 = _variant("EfficientNetV2B2", "efficientnetv2-b2", 1.1, 1.2, 260)
EfficientNetV2B3 = _variant("EfficientNetV2B3", "efficientnetv2-b3", 1.2, 1.4, 300)
EfficientNetV2S = _variant("EfficientNetV2S", "efficientnetv2-s", 1.0, 1.0, 384)
EfficientNetV2M = _variant("EfficientNetV2M", "efficientnetv2-m", 1.0, 1.0, 480)
EfficientNetV2L = _variant("EfficientNetV2L", "efficientnetv2-l", 1.0, 1.0, 480)


def preprocess_input(x, data_format=None):
    """`x` unchanged: the models rescale their inputs themselves."""
    return x


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`."""
    return common.decode_predictions(preds, top=top)
