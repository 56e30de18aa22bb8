"""`tf.keras.applications.mobilenet_v2`: MobileNetV2 (Sandler et al. 2018): inverted
residual blocks (1x1 expansion, 3x3 depthwise, linear 1x1 projection) with ReLU6."""

from __future__ import annotations

from asyncflow import tf_logging
from asyncflow.keras import backend, backend_config, layers, utils
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"

_SIZES = [96, 128, 160, 192, 224]
# (filters, stride, expansion) of inverted residual blocks 0..16.
_BLOCKS = (
    (16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6),
    (64, 1, 6), (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6),
    (160, 1, 6), (160, 1, 6), (320, 1, 6),
)  # fmt: skip

__all__ = ["MobileNetV2", "decode_predictions", "preprocess_input"]


def _square_default(rows, cols):
    return rows if rows == cols and rows in _SIZES else 224


def _check_input_tensor(input_tensor, input_shape):
    """Raises:
    ValueError: `input_tensor` is no Keras tensor, or its width is not input_shape's.
    """
    try:
        is_keras = backend.is_keras_tensor(input_tensor)
    except ValueError:
        try:
            is_keras = backend.is_keras_tensor(utils.get_source_inputs(input_tensor))
        except ValueError:
            raise ValueError(
                f"input_tensor: {input_tensor}is not type input_tensor. Received "
                f"`type(input_tensor)={type(input_tensor)}`"
            ) from None
    if not is_keras:
        raise ValueError(
            f"input_tensor is not a TF-Keras tensor; Received `input_tensor={input_tensor}`"
        )
    if backend_config.image_data_format() == "channels_first":
        if backend.int_shape(input_tensor)[1] != input_shape[1]:
            raise ValueError(
                "input_shape[1] must equal shape(input_tensor)[1] when `image_data_format` "
                f"is `channels_first`; Received `input_tensor.shape={input_tensor.shape}`, "
                f"`input_shape={input_shape}`"
            )
    elif backend.int_shape(input_tensor)[2] != input_shape[1]:
        raise ValueError(
            "input_tensor.shape[2] must equal input_shape[1]; Received "
            f"`input_tensor.shape={input_tensor.shape}`, `input_shape={input_shape}`"
        )


def _default_size(input_shape, input_tensor):
    channels_first = backend_config.image_data_format() == "channels_first"
    if input_shape is not None and input_tensor is not None:
        _check_input_tensor(input_tensor, input_shape)
    if input_shape is None and input_tensor is not None:
        try:
            is_keras = backend.is_keras_tensor(input_tensor)
        except ValueError:
            raise ValueError(
                f"input_tensor must be a valid TF-Keras tensor type; Received {input_tensor} "
                f"of type {type(input_tensor)}"
            ) from None
        if not is_keras:
            return 224
        shape = backend.int_shape(input_tensor)
        return _square_default(*(shape[2:4] if channels_first else shape[1:3]))
    if input_shape is None:
        return 224
    return _square_default(*(input_shape[1:3] if channels_first else input_shape[0:2]))


def MobileNetV2(  # noqa: N802 - Keras' name
    input_shape=None,
    alpha=1.0,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    **kwargs,
):
    """MobileNetV2; input 224x224 by default (96, 128, 160, 192 also have weights).

    Raises:
      ValueError: unknown keyword arguments; bad `weights`, `classes`, `input_shape`,
        `input_tensor`; with ImageNet weights, `alpha` not one of 0.35, 0.5, 0.75, 1.0,
        1.3, 1.4.
    """
    kwargs.pop("layers", None)
    if kwargs:
        raise ValueError(f"Unknown argument(s): {kwargs}")
    _common.check_weights(
        weights, include_top, classes,
        _common.WEIGHTS_ERROR + f"  Received `weights={weights}`",
        _common.CLASSES_ERROR + f". Received `classes={classes}`",
    )  # fmt: skip
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=_default_size(input_shape, input_tensor),
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if backend_config.image_data_format() == "channels_last":
        rows, cols = input_shape[0], input_shape[1]
    else:
        rows, cols = input_shape[1], input_shape[2]
    if weights == "imagenet":
        if alpha not in [0.35, 0.5, 0.75, 1.0, 1.3, 1.4]:
            raise ValueError(
                "If imagenet weights are being loaded, alpha must be one of `0.35`, `0.50`, "
                f"`0.75`, `1.0`, `1.3` or `1.4` only; Received `alpha={alpha}`"
            )
        if rows != cols or rows not in _SIZES:
            rows = 224
            tf_logging.warning(
                "`input_shape` is undefined or non-square, or `rows` is not in [96, 128, 160, "
                "192, 224]. Weights for input shape (224, 224) will be loaded as the default."
            )
    img_input = _common.image_input(input_tensor, input_shape)
    x = _features(img_input, alpha)
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights)
    else:
        x = _common.pool(x, pooling)
    model = _common.make_model(img_input, input_tensor, x, f"mobilenetv2_{alpha:0.2f}_{rows}")
    if weights == "imagenet":
        top = "" if include_top else "_no_top"
        fname = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{float(alpha)}_{rows}{top}.h5"
        return _common.load(model, weights, fname, url=BASE_WEIGHT_PATH + fname)
    return _common.load(model, weights)


def _bn(x, name):
    return layers.BatchNormalization(
        axis=_common.channel_axis(-1), epsilon=1e-3, momentum=0.999, name=name
    )(x)


def _features(img_input, alpha):
    first_block_filters = _make_divisible(32 * alpha, 8)
    x = layers.Conv2D(
        first_block_filters, kernel_size=3, strides=(2, 2), padding="same", use_bias=False,
        name="Conv1",
    )(img_input)  # fmt: skip
    x = _bn(x, "bn_Conv1")
    x = layers.ReLU(6.0, name="Conv1_relu")(x)
    for block_id, (filters, stride, expansion) in enumerate(_BLOCKS):
        x = _inverted_res_block(
            x, filters=filters, alpha=alpha, stride=stride, expansion=expansion,
            block_id=block_id,
        )  # fmt: skip
    # No narrowing of the last convolution below alpha 1 (as in the paper).
    last_block_filters = _make_divisible(1280 * alpha, 8) if alpha > 1.0 else 1280
    x = layers.Conv2D(last_block_filters, kernel_size=1, use_bias=False, name="Conv_1")(x)
    x = _bn(x, "Conv_1_bn")
    return layers.ReLU(6.0, name="out_relu")(x)


def _inverted_res_block(inputs, expansion, stride, alpha, filters, block_id):
    """Expansion (except block 0), depthwise 3x3 (strided ones padded by correct_pad and
    'valid'), linear projection; a residual Add when shapes allow."""
    in_channels = backend.int_shape(inputs)[_common.channel_axis(-1)]
    pointwise_filters = _make_divisible(int(filters * alpha), 8)
    x = inputs
    prefix = f"block_{block_id}_"
    if block_id:
        x = layers.Conv2D(
            expansion * in_channels, kernel_size=1, padding="same", use_bias=False,
            activation=None, name=prefix + "expand",
        )(x)  # fmt: skip
        x = _bn(x, prefix + "expand_BN")
        x = layers.ReLU(6.0, name=prefix + "expand_relu")(x)
    else:
        prefix = "expanded_conv_"
    if stride == 2:
        x = layers.ZeroPadding2D(padding=imagenet_utils.correct_pad(x, 3), name=prefix + "pad")(x)
    x = layers.DepthwiseConv2D(
        kernel_size=3, strides=stride, activation=None, use_bias=False,
        padding="same" if stride == 1 else "valid", name=prefix + "depthwise",
    )(x)  # fmt: skip
    x = _bn(x, prefix + "depthwise_BN")
    x = layers.ReLU(6.0, name=prefix + "depthwise_relu")(x)
    x = layers.Conv2D(
        pointwise_filters, kernel_size=1, padding="same", use_bias=False, activation=None,
        name=prefix + "project",
    )(x)  # fmt: skip
    x = _bn(x, prefix + "project_BN")
    if in_channels == pointwise_filters and stride == 1:
        return layers.Add(name=prefix + "add")([inputs, x])
    return x


def _make_divisible(v, divisor, min_value=None):
    """`v` rounded to the nearest multiple of `divisor` (at least `min_value`), never
    more than 10% below `v`."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


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
