"""`tf.keras.applications.mobilenet`: MobileNet v1 (Howard et al. 2017): depthwise
separable convolutions with ReLU6, widths scaled by `alpha`."""

from __future__ import annotations

from asyncflow import tf_logging
from asyncflow.keras import backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet/"

_ALPHA_TEXT = {1.0: "1_0", 0.75: "7_5", 0.5: "5_0"}
# (pointwise filters, strides) of depthwise blocks 1..13.
_BLOCKS = (
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1),
    (512, 1), (512, 1), (1024, 2), (1024, 1),
)  # fmt: skip

__all__ = ["MobileNet", "decode_predictions", "preprocess_input"]


def _rows_cols(input_shape):
    if backend_config.image_data_format() == "channels_first":
        return input_shape[1], input_shape[2]
    return input_shape[0], input_shape[1]


def _check_imagenet(depth_multiplier, alpha, rows, cols):
    if depth_multiplier != 1:
        raise ValueError(
            "If imagenet weights are being loaded, depth multiplier must be 1.  "
            f"Received depth_multiplier={depth_multiplier}"
        )
    if alpha not in [0.25, 0.5, 0.75, 1.0]:
        raise ValueError(
            "If imagenet weights are being loaded, alpha can be one of`0.25`, `0.50`, "
            f"`0.75` or `1.0` only.  Received alpha={alpha}"
        )
    if rows != cols or rows not in [128, 160, 192, 224]:
        tf_logging.warning(
            "`input_shape` is undefined or non-square, or `rows` is not in [128, 160, 192, "
            "224]. Weights for input shape (224, 224) will be loaded as the default."
        )
        return 224
    return rows


def MobileNet(  # noqa: N802 - Keras' name
    input_shape=None,
    alpha=1.0,
    depth_multiplier=1,
    dropout=1e-3,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    **kwargs,
):
    """MobileNet; input 224x224 by default (128, 160 and 192 also have weights).

    Raises:
      ValueError: unknown keyword arguments; bad `weights`, `classes`, `input_shape`;
        with ImageNet weights, `depth_multiplier` other than 1 or `alpha` not one of
        0.25, 0.5, 0.75, 1.0.
    """
    kwargs.pop("layers", None)
    if kwargs:
        raise ValueError(f"Unknown argument(s): {(kwargs,)}")
    _common.check_weights(
        weights, include_top, classes,
        _common.WEIGHTS_ERROR + f"  Received weights={weights}",
        _common.CLASSES_ERROR + f".  Received classes={classes}",
    )  # fmt: skip
    default_size = 224
    if input_shape is not None:
        rows, cols = _rows_cols(input_shape)
        if rows == cols and rows in [128, 160, 192, 224]:
            default_size = rows
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    rows, cols = _rows_cols(input_shape)
    if weights == "imagenet":
        rows = _check_imagenet(depth_multiplier, alpha, rows, cols)
    img_input = _common.image_input(input_tensor, input_shape)
    x = _conv_block(img_input, 32, alpha, strides=(2, 2))
    for block_id, (filters, stride) in enumerate(_BLOCKS, start=1):
        x = _depthwise_conv_block(
            x, filters, alpha, depth_multiplier, strides=(stride, stride), block_id=block_id
        )
    if include_top:
        x = layers.GlobalAveragePooling2D(keepdims=True)(x)
        x = layers.Dropout(dropout, name="dropout")(x)
        x = layers.Conv2D(classes, (1, 1), padding="same", name="conv_preds")(x)
        x = layers.Reshape((classes,), name="reshape_2")(x)
        imagenet_utils.validate_activation(classifier_activation, weights)
        x = layers.Activation(activation=classifier_activation, name="predictions")(x)
    else:
        x = _common.pool(x, pooling)
    model = _common.make_model(img_input, input_tensor, x, f"mobilenet_{alpha:0.2f}_{rows}")
    if weights == "imagenet":
        alpha_text = _ALPHA_TEXT.get(alpha, "2_5")
        top = "" if include_top else "_no_top"
        fname = f"mobilenet_{alpha_text}_{int(rows)}_tf{top}.h5"
        return _common.load(model, weights, fname, url=BASE_WEIGHT_PATH + fname)
    return _common.load(model, weights)


def _conv_block(inputs, filters, alpha, kernel=(3, 3), strides=(1, 1)):
    """The first convolution, batch normalization and ReLU6."""
    filters = int(filters * alpha)
    x = layers.Conv2D(
        filters, kernel, padding="same", use_bias=False, strides=strides, name="conv1"
    )(inputs)
    x = layers.BatchNormalization(axis=_common.channel_axis(-1), name="conv1_bn")(x)
    return layers.ReLU(6.0, name="conv1_relu")(x)


def _depthwise_conv_block(
    inputs, pointwise_conv_filters, alpha, depth_multiplier=1, strides=(1, 1), block_id=1
):
    """A 3x3 depthwise convolution then a 1x1 pointwise one, each with BN and ReLU6.  A
    strided one pads bottom/right only and convolves 'valid', as Keras' weights expect."""
    axis = _common.channel_axis(-1)
    pointwise_conv_filters = int(pointwise_conv_filters * alpha)
    if strides == (1, 1):
        x = inputs
    else:
        x = layers.ZeroPadding2D(((0, 1), (0, 1)), name=f"conv_pad_{block_id}")(inputs)
    x = layers.DepthwiseConv2D(
        (3, 3),
        padding="same" if strides == (1, 1) else "valid",
        depth_multiplier=depth_multiplier,
        strides=strides,
        use_bias=False,
        name=f"conv_dw_{block_id}",
    )(x)
    x = layers.BatchNormalization(axis=axis, name=f"conv_dw_{block_id}_bn")(x)
    x = layers.ReLU(6.0, name=f"conv_dw_{block_id}_relu")(x)
    x = layers.Conv2D(
        pointwise_conv_filters, (1, 1), padding="same", use_bias=False, strides=(1, 1),
        name=f"conv_pw_{block_id}",
    )(x)  # fmt: skip
    x = layers.BatchNormalization(axis=axis, name=f"conv_pw_{block_id}_bn")(x)
    return layers.ReLU(6.0, name=f"conv_pw_{block_id}_relu")(x)


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
