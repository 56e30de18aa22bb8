"""`tf.keras.applications.mobilenet_v3`: MobileNetV3Small and MobileNetV3Large
(Howard et al. 2019), built as TF 2.21's tf_keras builds them in TF1 graph mode: the
same layers, names and order (hard-swish's `x + 3` and `* 1/6` are op layers), so
Keras' ImageNet weight files load by layer order.
"""

from __future__ import annotations

from asyncflow import gfile, tf_logging
from asyncflow.keras import backend
from asyncflow.keras import layers as L
from asyncflow.keras.applications import _common_v2 as common
from asyncflow.keras.training import Model

__all__ = ["MobileNetV3Small", "MobileNetV3Large", "preprocess_input", "decode_predictions"]

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/"
# (with top, without top) md5 of Keras' published files.
WEIGHTS_HASHES = {
    "large_224_0.75_float": (
        "765b44a33ad4005b3ac83185abf1d0eb",
        "40af19a13ebea4e2ee0c676887f69a2e",
    ),
    "large_224_1.0_float": (
        "59e551e166be033d707958cf9e29a6a7",
        "07fb09a5933dd0c8eaafa16978110389",
    ),
    "large_minimalistic_224_1.0_float": (
        "675e7b876c45c57e9e63e6d90a36599c",
        "ec5221f64a2f6d1ef965a614bdae7973",
    ),
    "small_224_0.75_float": (
        "cb65d4e5be93758266aa0a7f2c6708b7",
        "ebdb5cc8e0b497cd13a7c275d475c819",
    ),
    "small_224_1.0_float": (
        "8768d4c2e7dee89b9d02b2d03d65d862",
        "d3e8ec802a04aa4fc771ee12a9a9b836",
    ),
    "small_minimalistic_224_1.0_float": (
        "99cd97fb2fcdad2bf028eb838de69e37",
        "cde8136e733e811080d9fcd8a252f7e4",
    ),
}

# (expansion, filters, kernel (None: the model's), stride, squeeze-excite, activation
# (None: the model's)) of each inverted residual block.
_SMALL = [
    (1, 16, 3, 2, True, "relu"),
    (72.0 / 16, 24, 3, 2, False, "relu"),
    (88.0 / 24, 24, 3, 1, False, "relu"),
    (4, 40, None, 2, True, None),
    (6, 40, None, 1, True, None),
    (6, 40, None, 1, True, None),
    (3, 48, None, 1, True, None),
    (3, 48, None, 1, True, None),
    (6, 96, None, 2, True, None),
    (6, 96, None, 1, True, None),
    (6, 96, None, 1, True, None),
]
_LARGE = [
    (1, 16, 3, 1, False, "relu"),
    (4, 24, 3, 2, False, "relu"),
    (3, 24, 3, 1, False, "relu"),
    (3, 40, None, 2, True, "relu"),
    (3, 40, None, 1, True, "relu"),
    (3, 40, None, 1, True, "relu"),
    (6, 80, 3, 2, False, None),
    (2.5, 80, 3, 1, False, None),
    (2.3, 80, 3, 1, False, None),
    (2.3, 80, 3, 1, False, None),
    (6, 112, 3, 1, True, None),
    (6, 112, 3, 1, True, None),
    (6, 160, None, 2, True, None),
    (6, 160, None, 1, True, None),
    (6, 160, None, 1, True, None),
]


def _relu(x):
    return L.ReLU()(x)


def _hard_sigmoid(x):
    x = common.op_layer("add", lambda t: t + 3.0, x)
    x = L.ReLU(6.0)(x)
    return common.op_layer("mul", lambda t: t * (1.0 / 6.0), x)


def _hard_swish(x):
    return L.Multiply()([x, _hard_sigmoid(x)])


def _depth(v, divisor=8, min_value=None) -> int:
    """`v` rounded to a multiple of `divisor`, never more than 10% below it."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _bn(x, name, axis):
    return L.BatchNormalization(axis=axis, epsilon=1e-3, momentum=0.999, name=name)(x)


def _se_block(inputs, filters, se_ratio, prefix):
    x = L.GlobalAveragePooling2D(keepdims=True, name=prefix + "squeeze_excite/AvgPool")(inputs)
    x = L.Conv2D(
        _depth(filters * se_ratio), 1, padding="same", name=prefix + "squeeze_excite/Conv"
    )(x)
    x = L.ReLU(name=prefix + "squeeze_excite/Relu")(x)
    x = L.Conv2D(filters, 1, padding="same", name=prefix + "squeeze_excite/Conv_1")(x)
    x = _hard_sigmoid(x)
    return L.Multiply(name=prefix + "squeeze_excite/Mul")([inputs, x])


def _inverted_res_block(x, expansion, filters, kernel, stride, se_ratio, activation, block_id):
    axis = 1 if backend.image_data_format() == "channels_first" else -1
    shortcut = x
    infilters = backend.int_shape(x)[axis]
    prefix = "expanded_conv/"
    if block_id:
        prefix = f"expanded_conv_{block_id}/"
        x = L.Conv2D(
            _depth(infilters * expansion),
            1,
            padding="same",
            use_bias=False,
            name=prefix + "expand",
        )(x)
        x = activation(_bn(x, prefix + "expand/BatchNorm", axis))
    if stride == 2:
        pad = common.correct_pad(x, kernel)
        x = L.ZeroPadding2D(padding=pad, name=prefix + "depthwise/pad")(x)
    x = L.DepthwiseConv2D(
        kernel,
        strides=stride,
        padding="same" if stride == 1 else "valid",
        use_bias=False,
        name=prefix + "depthwise",
    )(x)
    x = activation(_bn(x, prefix + "depthwise/BatchNorm", axis))
    if se_ratio:
        x = _se_block(x, _depth(infilters * expansion), se_ratio, prefix)
    x = L.Conv2D(filters, 1, padding="same", use_bias=False, name=prefix + "project")(x)
    x = _bn(x, prefix + "project/BatchNorm", axis)
    if stride == 1 and infilters == filters:
        x = L.Add(name=prefix + "Add")([shortcut, x])
    return x


def _check_input_tensor(input_tensor, input_shape) -> None:
    try:
        is_keras = backend.is_keras_tensor(input_tensor)
    except ValueError:
        raise ValueError(
            "input_tensor: ",
            input_tensor,
            f"is not type input_tensor.  Received type(input_tensor)={type(input_tensor)}",
        ) from None
    if not is_keras:
        raise ValueError("input_tensor specified: ", input_tensor, "is not a keras tensor")
    shape = backend.int_shape(input_tensor)
    if backend.image_data_format() == "channels_first":
        if shape[1] != input_shape[1]:
            raise ValueError(
                "When backend.image_data_format()=channels_first, input_shape[1] must equal "
                f"backend.int_shape(input_tensor)[1].  Received input_shape={input_shape}, "
                f"backend.int_shape(input_tensor)={shape}"
            )
    elif shape[2] != input_shape[1]:
        raise ValueError(
            "input_shape[1] must equal backend.int_shape(input_tensor)[2].  Received "
            f"input_shape={input_shape}, backend.int_shape(input_tensor)={shape}"
        )


def _resolve_shape(input_shape, input_tensor):
    first = backend.image_data_format() == "channels_first"
    if input_shape is not None and input_tensor is not None:
        _check_input_tensor(input_tensor, input_shape)
    if input_shape is None and input_tensor is not None:
        try:
            is_keras = backend.is_keras_tensor(input_tensor)
        except ValueError:
            raise ValueError(
                "input_tensor: ",
                input_tensor,
                "is type: ",
                type(input_tensor),
                "which is not a valid type",
            ) from None
        if is_keras:
            # TF swaps rows and columns here; kept, since it decides the layer shapes.
            shape = backend.int_shape(input_tensor)
            rows, cols = (shape[2], shape[3]) if first else (shape[1], shape[2])
            input_shape = (3, cols, rows) if first else (cols, rows, 3)
    if input_shape is None:
        input_shape = (3, None, None) if first else (None, None, 3)
    return input_shape


def MobileNetV3(  # noqa: N802 - Keras' name
    blocks,
    last_point_ch,
    input_shape=None,
    alpha=1.0,
    model_type="large",
    minimalistic=False,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    pooling=None,
    dropout_rate=0.2,
    classifier_activation="softmax",
    include_preprocessing=True,
):
    if not (weights in {"imagenet", None} or gfile.Exists(weights)):
        raise ValueError(
            "The `weights` argument should be either `None` (random initialization), "
            "`imagenet` (pre-training on ImageNet), or the path to the weights file to be "
            f"loaded.  Received weights={weights}"
        )
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(
            'If using `weights` as `"imagenet"` with `include_top` as true, `classes` '
            f"should be 1000.  Received classes={classes}"
        )
    input_shape = _resolve_shape(input_shape, input_tensor)
    first = backend.image_data_format() == "channels_first"
    rows, cols = (input_shape[1], input_shape[2]) if first else (input_shape[0], input_shape[1])
    if rows and cols and (rows < 32 or cols < 32):
        raise ValueError(
            f"Input size must be at least 32x32; Received `input_shape={input_shape}`"
        )
    if weights == "imagenet":
        if (not minimalistic and alpha not in [0.75, 1.0]) or (minimalistic and alpha != 1.0):
            raise ValueError(
                "If imagenet weights are being loaded, alpha can be one of `0.75`, `1.0` for "
                "non minimalistic or `1.0` for minimalistic only."
            )
        if rows != cols or rows != 224:
            tf_logging.warning(
                "`input_shape` is undefined or non-square, or `rows` is not 224. Weights for "
                "input shape (224, 224) will be loaded as the default."
            )
    img_input = common.image_input(input_tensor, input_shape)
    axis = 1 if first else -1
    if minimalistic:
        kernel, activation, se_ratio = 3, _relu, None
    else:
        kernel, activation, se_ratio = 5, _hard_swish, 0.25

    x = img_input
    if include_preprocessing:
        x = L.Rescaling(scale=1.0 / 127.5, offset=-1.0)(x)
    x = L.Conv2D(16, 3, strides=(2, 2), padding="same", use_bias=False, name="Conv")(x)
    x = activation(_bn(x, "Conv/BatchNorm", axis))
    for block_id, (expansion, filters, k, stride, se, act) in enumerate(blocks):
        x = _inverted_res_block(
            x,
            expansion,
            _depth(filters * alpha),
            kernel if k is None else k,
            stride,
            se_ratio if se else None,
            _relu if act == "relu" else activation,
            block_id,
        )
    last_conv_ch = _depth(backend.int_shape(x)[axis] * 6)
    if alpha > 1.0:
        last_point_ch = _depth(last_point_ch * alpha)
    x = L.Conv2D(last_conv_ch, 1, padding="same", use_bias=False, name="Conv_1")(x)
    x = activation(_bn(x, "Conv_1/BatchNorm", axis))
    if include_top:
        x = L.GlobalAveragePooling2D(keepdims=True)(x)
        x = L.Conv2D(last_point_ch, 1, padding="same", use_bias=True, name="Conv_2")(x)
        x = activation(x)
        if dropout_rate > 0:
            x = L.Dropout(dropout_rate)(x)
        x = L.Conv2D(classes, 1, padding="same", name="Logits")(x)
        x = L.Flatten()(x)
        common.validate_activation(classifier_activation, weights)
        x = L.Activation(activation=classifier_activation, name="Predictions")(x)
    elif pooling == "avg":
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = L.GlobalMaxPooling2D(name="max_pool")(x)
    model = Model(common.model_inputs(input_tensor, img_input), x, name="MobilenetV3" + model_type)

    if weights == "imagenet":
        key = "{}{}_224_{}_float".format(
            model_type, "_minimalistic" if minimalistic else "", str(alpha)
        )
        suffix = ".h5" if include_top else "_no_top_v2.h5"
        file_hash = WEIGHTS_HASHES[key][0 if include_top else 1]
        common.load_weights(
            model, "weights_mobilenet_v3_" + key + suffix, BASE_WEIGHT_PATH, file_hash
        )
    elif weights is not None:
        model.load_weights(weights)
    return model


def MobileNetV3Small(  # noqa: N802 - Keras' name
    input_shape=None,
    alpha=1.0,
    minimalistic=False,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    pooling=None,
    dropout_rate=0.2,
    classifier_activation="softmax",
    include_preprocessing=True,
):
    """MobileNetV3Small; `weights='imagenet'` loads Keras' ImageNet weights from its cache
    (fetched once), for alpha 0.75 or 1.0 (1.0 only when minimalistic).

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape`, `input_tensor`, `alpha` for the
        ImageNet weights, or a classifier activation other than softmax with weights.
    """
    return MobileNetV3(
        _SMALL, 1024, input_shape, alpha, "small", minimalistic, include_top, weights,
        input_tensor, classes, pooling, dropout_rate, classifier_activation,
        include_preprocessing,
    )  # fmt: skip


def MobileNetV3Large(  # noqa: N802 - Keras' name
    input_shape=None,
    alpha=1.0,
    minimalistic=False,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    pooling=None,
    dropout_rate=0.2,
    classifier_activation="softmax",
    include_preprocessing=True,
):
    """MobileNetV3Large; see MobileNetV3Small.

    Raises:
      ValueError: as MobileNetV3Small.
    """
    return MobileNetV3(
        _LARGE, 1280, input_shape, alpha, "large", minimalistic, include_top, weights,
        input_tensor, classes, pooling, dropout_rate, classifier_activation,
        include_preprocessing,
    )  # fmt: skip


def preprocess_input(x, data_format=None):
    """`x` unchanged: the models rescale their inputs themselves."""
    return x


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`."""
    return common.decode_predictions(preds, top=top)
