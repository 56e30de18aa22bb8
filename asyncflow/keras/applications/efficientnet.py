"""`tf.keras.applications.efficientnet`: EfficientNetB0-B7 (Tan & Le 2019), built as TF
2.21's tf_keras builds them in TF1 graph mode (layer names and order, weights), so
Keras' ImageNet weight files load by layer order.

The models take pixels in [0, 255]: a Rescaling and a Normalization layer (whose
statistics are weights, filled by the ImageNet file) come first. With ImageNet weights,
TF then multiplies by 1/sqrt(std) of ImageNet's channels -- not 1/std -- and the
weights were trained that way, so it is kept.
"""

from __future__ import annotations

import copy
import math

from asyncflow.keras import backend
from asyncflow.keras import initializers as _init
from asyncflow.keras import layers as L
from asyncflow.keras.applications import _common_v2 as common
from asyncflow.keras.training import Model
from asyncflow.ops import array_ops, math_ops

__all__ = [f"EfficientNetB{i}" for i in range(8)] + ["preprocess_input", "decode_predictions"]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/keras-applications/"
# (with top, without top) md5 of Keras' published files.
WEIGHTS_HASHES = {
    "b0": ("902e53a9f72be733fc0bcb005b3ebbac", "50bc09e76180e00e4465e1a485ddc09d"),
    "b1": ("1d254153d4ab51201f1646940f018540", "74c4e6b3e1f6a1eea24c589628592432"),
    "b2": ("b15cce36ff4dcbd00b6dd88e7857a6ad", "111f8e2ac8aa800a7a99e3239f7bfb39"),
    "b3": ("ffd1fdc53d0ce67064dc6a9c7960ede0", "af6d107764bb5b1abb91932881670226"),
    "b4": ("18c95ad55216b8f92d7e70b3a046e2fc", "ebc24e6d6c33eaebbd558eafbeedf1ba"),
    "b5": ("ace28f2a6363774853a83a0b21b9421a", "38879255a25d3c92d5e44e04ae6cec6f"),
    "b6": ("165f6e37dce68623721b423839de8be5", "9ecce42647a20130c1f39a5d4cb75743"),
    "b7": ("8c03f828fec3ef71311cd463b6759d99", "cbcfe4450ddf6f3ad90b1b398090fe4a"),
}

# (kernel_size, repeats, filters_in, filters_out, expand_ratio, strides) of each stage;
# every block squeezes and excites at 0.25 and keeps its identity skip.
_STAGES = [
    (3, 1, 32, 16, 1, 1),
    (3, 2, 16, 24, 6, 2),
    (5, 2, 24, 40, 6, 2),
    (3, 3, 40, 80, 6, 2),
    (5, 3, 80, 112, 6, 1),
    (5, 4, 112, 192, 6, 2),
    (3, 1, 192, 320, 6, 1),
]
DEFAULT_BLOCKS_ARGS = [
    dict(
        kernel_size=k,
        repeats=r,
        filters_in=fi,
        filters_out=fo,
        expand_ratio=e,
        id_skip=True,
        strides=s,
        se_ratio=0.25,
    )  # fmt: skip
    for k, r, fi, fo, e, s in _STAGES
]

IMAGENET_STDDEV_RGB = [0.229, 0.224, 0.225]


def conv_kernel_initializer():
    return _init.VarianceScaling(scale=2.0, mode="fan_out", distribution="truncated_normal")


def dense_kernel_initializer():
    return _init.VarianceScaling(scale=1.0 / 3.0, mode="fan_out", distribution="uniform")


def round_filters(filters, width, divisor=8) -> int:
    """`filters * width` rounded to a multiple of `divisor`, not 10% below it."""
    filters *= width
    new = max(divisor, int(filters + divisor / 2) // divisor * divisor)
    return int(new + divisor if new < 0.9 * filters else new)


def _conv(filters, kernel, name, **kwargs):
    return L.Conv2D(
        filters, kernel, padding="same", kernel_initializer=conv_kernel_initializer(),
        name=name, **kwargs,
    )  # fmt: skip


def _squeeze_excite(x, filters, filters_se, activation, name, bn_axis):
    se = L.GlobalAveragePooling2D(name=name + "se_squeeze")(x)
    se_shape = (filters, 1, 1) if bn_axis == 1 else (1, 1, filters)
    se = L.Reshape(se_shape, name=name + "se_reshape")(se)
    se = _conv(filters_se, 1, name + "se_reduce", activation=activation)(se)
    se = _conv(filters, 1, name + "se_expand", activation="sigmoid")(se)
    return L.multiply([x, se], name=name + "se_excite")


def block(
    inputs,
    activation="swish",
    drop_rate=0.0,
    name="",
    filters_in=32,
    filters_out=16,
    kernel_size=3,
    strides=1,
    expand_ratio=1,
    se_ratio=0.0,
    id_skip=True,
):
    """One mobile inverted bottleneck: expand, depthwise, squeeze-excite, project."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = _conv(filters, 1, name + "expand_conv", use_bias=False)(x)
        x = L.BatchNormalization(axis=bn_axis, name=name + "expand_bn")(x)
        x = L.Activation(activation, name=name + "expand_activation")(x)
    padding = "same"
    if strides == 2:
        pad = common.correct_pad(x, kernel_size)
        x = L.ZeroPadding2D(padding=pad, name=name + "dwconv_pad")(x)
        padding = "valid"
    x = L.DepthwiseConv2D(
        kernel_size,
        strides=strides,
        padding=padding,
        use_bias=False,
        depthwise_initializer=conv_kernel_initializer(),
        name=name + "dwconv",
    )(x)
    x = L.BatchNormalization(axis=bn_axis, name=name + "bn")(x)
    x = L.Activation(activation, name=name + "activation")(x)
    if 0 < se_ratio <= 1:
        filters_se = max(1, int(filters_in * se_ratio))
        x = _squeeze_excite(x, filters, filters_se, activation, name, bn_axis)
    x = _conv(filters_out, 1, name + "project_conv", use_bias=False)(x)
    x = L.BatchNormalization(axis=bn_axis, name=name + "project_bn")(x)
    if id_skip and strides == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = L.Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=name + "drop")(x)
        x = L.add([x, inputs], name=name + "add")
    return x


def _imagenet_scale(x):
    """The 1/sqrt(std) multiply TF applies with ImageNet weights (an op layer, as TF1's
    Keras wraps `tf.math.multiply` on a Keras tensor)."""
    first = backend.image_data_format() == "channels_first"
    shape = [1, 3, 1, 1] if first else [1, 1, 1, 3]
    scale = [1.0 / math.sqrt(s) for s in IMAGENET_STDDEV_RGB]
    return common.op_layer(
        "Mul", lambda t: math_ops.multiply(t, array_ops.reshape(scale, shape)), x
    )


def _classifier(x, include_top, pooling, dropout_rate, classes, classifier_activation, weights):
    if include_top:
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = L.Dropout(dropout_rate, name="top_dropout")(x)
        common.validate_activation(classifier_activation, weights)
        return L.Dense(
            classes,
            activation=classifier_activation,
            kernel_initializer=dense_kernel_initializer(),
            name="predictions",
        )(x)
    if pooling == "avg":
        return L.GlobalAveragePooling2D(name="avg_pool")(x)
    if pooling == "max":
        return L.GlobalMaxPooling2D(name="max_pool")(x)
    return x


def EfficientNet(  # noqa: N802 - Keras' name
    width_coefficient,
    depth_coefficient,
    default_size,
    dropout_rate=0.2,
    drop_connect_rate=0.2,
    depth_divisor=8,
    activation="swish",
    blocks_args="default",
    model_name="efficientnet",
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """An EfficientNet scaled by width and depth; see EfficientNetB0.

    Raises:
      ValueError: as EfficientNetB0.
    """
    if blocks_args == "default":
        blocks_args = DEFAULT_BLOCKS_ARGS
    common.check_weights(weights, include_top, classes)
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

    x = L.Rescaling(1.0 / 255.0)(img_input)
    x = L.Normalization(axis=bn_axis)(x)
    if weights == "imagenet":
        x = _imagenet_scale(x)
    x = L.ZeroPadding2D(padding=common.correct_pad(x, 3), name="stem_conv_pad")(x)
    x = L.Conv2D(
        round_filters(32, width_coefficient, depth_divisor),
        3,
        strides=2,
        padding="valid",
        use_bias=False,
        kernel_initializer=conv_kernel_initializer(),
        name="stem_conv",
    )(x)
    x = L.BatchNormalization(axis=bn_axis, name="stem_bn")(x)
    x = L.Activation(activation, name="stem_activation")(x)

    def repeats_of(args):
        return int(math.ceil(depth_coefficient * args["repeats"]))

    blocks_args = copy.deepcopy(blocks_args)
    total = float(sum(repeats_of(args) for args in blocks_args))
    b = 0
    for i, args in enumerate(blocks_args):
        args["filters_in"] = round_filters(args["filters_in"], width_coefficient, depth_divisor)
        args["filters_out"] = round_filters(args["filters_out"], width_coefficient, depth_divisor)
        for j in range(repeats_of(args)):
            if j > 0:
                args["strides"] = 1
                args["filters_in"] = args["filters_out"]
            kwargs = {k: v for k, v in args.items() if k != "repeats"}
            x = block(
                x, activation, drop_connect_rate * b / total, name=f"block{i + 1}{chr(j + 97)}_",
                **kwargs,
            )  # fmt: skip
            b += 1
    x = L.Conv2D(
        round_filters(1280, width_coefficient, depth_divisor),
        1,
        padding="same",
        use_bias=False,
        kernel_initializer=conv_kernel_initializer(),
        name="top_conv",
    )(x)
    x = L.BatchNormalization(axis=bn_axis, name="top_bn")(x)
    x = L.Activation(activation, name="top_activation")(x)
    x = _classifier(x, include_top, pooling, dropout_rate, classes, classifier_activation, weights)
    model = Model(common.model_inputs(input_tensor, img_input), x, name=model_name)

    if weights == "imagenet":
        suffix = ".h5" if include_top else "_notop.h5"
        file_hash = WEIGHTS_HASHES[model_name[-2:]][0 if include_top else 1]
        common.load_weights(model, model_name + suffix, BASE_WEIGHTS_PATH, file_hash)
    elif weights is not None:
        model.load_weights(weights)
    return model


# (width, depth, default size, dropout) of B0..B7.
_SCALES = [
    (1.0, 1.0, 224, 0.2),
    (1.0, 1.1, 240, 0.2),
    (1.1, 1.2, 260, 0.3),
    (1.2, 1.4, 300, 0.3),
    (1.4, 1.8, 380, 0.4),
    (1.6, 2.2, 456, 0.4),
    (1.8, 2.6, 528, 0.5),
    (2.0, 3.1, 600, 0.5),
]


def _variant(index):
    width, depth, size, dropout = _SCALES[index]

    def build(
        include_top=True,
        weights="imagenet",
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        **kwargs,
    ):
        return EfficientNet(
            width, depth, size, dropout, model_name=f"efficientnetb{index}",
            include_top=include_top, weights=weights, input_tensor=input_tensor,
            input_shape=input_shape, pooling=pooling, classes=classes,
            classifier_activation=classifier_activation, **kwargs,
        )  # fmt: skip

    build.__name__ = build.__qualname__ = f"EfficientNetB{index}"
    build.__doc__ = f"""EfficientNetB{index} (default input {size}x{size}); `weights='imagenet'`
    loads Keras' ImageNet weights from its cache (fetched once). Inputs are pixels in
    [0, 255].

    Raises:
      ValueError: bad `weights`, `classes` other than 1000 with ImageNet's top, a bad
        `input_shape`, or a classifier activation other than softmax with weights.
    """
    return build


EfficientNetB0 = _variant(0)
EfficientNetB1 = _variant(1)
EfficientNetB2 = _variant(2)
EfficientNetB3 = _variant(3)
EfficientNetB4 = _variant(4)
EfficientNetB5 = _variant(5)
EfficientNetB6 = _variant(6)
EfficientNetB7 = _variant(7)


def preprocess_input(x, data_format=None):
    """`x` unchanged: the models rescale their inputs themselves."""
    return x


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`."""
    return common.decode_predictions(preds, top=top)
