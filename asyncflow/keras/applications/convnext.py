"""`tf.keras.applications.convnext`: ConvNeXt Tiny/Small/Base/Large/XLarge (Liu et al.
2022), built as TF 2.21's tf_keras builds them in TF1 graph mode: the stem and the
three downsampling steps are nested Sequential models, each block's residual sum an op
layer, so weight names and Keras' ImageNet weight files match.

The models take pixels in [0, 255] and normalise them with ImageNet's statistics
themselves (when `include_preprocessing` and the input has 3 channels).
"""

from __future__ import annotations

import numpy as np

from asyncflow.keras import backend
from asyncflow.keras import initializers as _init
from asyncflow.keras import layers as L
from asyncflow.keras.applications import _common_v2 as common
from asyncflow.keras.engine import Layer
from asyncflow.keras.layers import _training, smart_cond
from asyncflow.keras.training import Model, Sequential
from asyncflow.ops import array_ops, math_ops, random_ops

__all__ = [
    "ConvNeXtTiny",
    "ConvNeXtSmall",
    "ConvNeXtBase",
    "ConvNeXtLarge",
    "ConvNeXtXLarge",
    "LayerScale",
    "StochasticDepth",
    "preprocess_input",
    "decode_predictions",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/convnext/"
# (with top, without top) sha256 of Keras' published files.
WEIGHTS_HASHES = {
    "convnext_tiny": (
        "8ae6e78ce2933352b1ef4008e6dd2f17bc40771563877d156bc6426c7cf503ff",
        "d547c096cabd03329d7be5562c5e14798aa39ed24b474157cef5e85ab9e49ef1",
    ),
    "convnext_small": (
        "ce1277d8f1ee5a0ef0e171469089c18f5233860ceaf9b168049cb9263fd7483c",
        "6fc8009faa2f00c1c1dfce59feea9b0745eb260a7dd11bee65c8e20843da6eab",
    ),
    "convnext_base": (
        "52cbb006d3dadd03f6e095a8ca1aca47aecdd75acb4bc74bce1f5c695d0086e6",
        "40a20c5548a5e9202f69735ecc06c990e6b7c9d2de39f0361e27baeb24cb7c45",
    ),
    "convnext_large": (
        "070c5ed9ed289581e477741d3b34beffa920db8cf590899d6d2c67fba2a198a6",
        "96f02b6f0753d4f543261bc9d09bed650f24dd6bc02ddde3066135b63d23a1cd",
    ),
    "convnext_xlarge": (
        "c1f5ccab661354fc3a79a10fa99af82f0fbf10ec65cb894a3ae0815f17a889ee",
        "de3f8a54174130e0cecdc71583354753d557fcf1f4487331558e2a16ba0cfe05",
    ),
}

MODEL_CONFIGS = {
    "tiny": {"depths": [3, 3, 9, 3], "projection_dims": [96, 192, 384, 768]},
    "small": {"depths": [3, 3, 27, 3], "projection_dims": [96, 192, 384, 768]},
    "base": {"depths": [3, 3, 27, 3], "projection_dims": [128, 256, 512, 1024]},
    "large": {"depths": [3, 3, 27, 3], "projection_dims": [192, 384, 768, 1536]},
    "xlarge": {"depths": [3, 3, 27, 3], "projection_dims": [256, 512, 1024, 2048]},
}


class StochasticDepth(Layer):
    """In training, drops each example's residual branch with probability
    `drop_path_rate` (scaling kept ones by 1/keep); the identity otherwise."""

    def __init__(self, drop_path_rate, **kwargs):
        super().__init__(**kwargs)
        self.drop_path_rate = drop_path_rate

    def call(self, x, training=None):
        def dropped():
            keep = 1 - self.drop_path_rate
            shape = array_ops.concat(
                [array_ops.shape(x)[:1], array_ops.ones([x.shape.ndims - 1], "int32")], 0
            )
            mask = math_ops.floor(keep + random_ops.random_uniform(shape, 0, 1))
            return (x / keep) * mask

        return smart_cond(_training(training), dropped, lambda: x)

    def get_config(self) -> dict:
        return {**super().get_config(), "drop_path_rate": self.drop_path_rate}


class LayerScale(Layer):
    """Multiplies by a learned per-channel `gamma` (initially `init_values`)."""

    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.init_values = init_values
        self.projection_dim = projection_dim

    def build(self, input_shape) -> None:
        self.gamma = self.add_weight(
            name="gamma",
            shape=(self.projection_dim,),
            initializer=_init.Constant(self.init_values),
            trainable=True,
        )
        self.built = True

    def call(self, x):
        return x * self.gamma

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"init_values": self.init_values, "projection_dim": self.projection_dim})
        return config


def ConvNeXtBlock(  # noqa: N802 - Keras' name
    projection_dim, drop_path_rate=0.0, layer_scale_init_value=1e-6, name=None
):
    """depthwise 7x7, LayerNorm, Dense x4 + GELU, Dense back, layer scale, residual."""
    if name is None:
        name = "prestem" + str(backend.get_uid("prestem"))

    def apply(inputs):
        x = L.Conv2D(
            projection_dim, 7, padding="same", groups=projection_dim,
            name=name + "_depthwise_conv",
        )(inputs)  # fmt: skip
        x = L.LayerNormalization(epsilon=1e-6, name=name + "_layernorm")(x)
        x = L.Dense(4 * projection_dim, name=name + "_pointwise_conv_1")(x)
        x = L.Activation("gelu", name=name + "_gelu")(x)
        x = L.Dense(projection_dim, name=name + "_pointwise_conv_2")(x)
        if layer_scale_init_value is not None:
            x = LayerScale(layer_scale_init_value, projection_dim, name=name + "_layer_scale")(x)
        if drop_path_rate:
            x = StochasticDepth(drop_path_rate, name=name + "_stochastic_depth")(x)
        else:
            x = L.Activation("linear", name=name + "_identity")(x)
        return common.op_layer("add", lambda pair: pair[0] + pair[1], [inputs, x])

    return apply


def _pre_stem(x, name):
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    variance = [(0.229 * 255) ** 2, (0.224 * 255) ** 2, (0.225 * 255) ** 2]
    return L.Normalization(mean=mean, variance=variance, name=name + "_prestem_normalization")(x)


def _head(x, classes, classifier_activation, name):
    x = L.GlobalAveragePooling2D(name=name + "_head_gap")(x)
    x = L.LayerNormalization(epsilon=1e-6, name=name + "_head_layernorm")(x)
    return L.Dense(classes, activation=classifier_activation, name=name + "_head_dense")(x)


def _downsampling(projection_dims, name):
    stem = Sequential(
        [
            L.Conv2D(projection_dims[0], 4, strides=4, name=name + "_stem_conv"),
            L.LayerNormalization(epsilon=1e-6, name=name + "_stem_layernorm"),
        ],
        name=name + "_stem",
    )
    steps = [stem]
    for i in range(3):
        steps.append(
            Sequential(
                [
                    L.LayerNormalization(epsilon=1e-6, name=f"{name}_downsampling_layernorm_{i}"),
                    L.Conv2D(
                        projection_dims[i + 1],
                        2,
                        strides=2,
                        name=f"{name}_downsampling_conv_{i}",
                    ),
                ],
                name=f"{name}_downsampling_block_{i}",
            )  # fmt: skip
        )
    return steps


def ConvNeXt(  # noqa: N802 - Keras' name
    depths,
    projection_dims,
    drop_path_rate=0.0,
    layer_scale_init_value=1e-6,
    default_size=224,
    model_name="convnext",
    include_preprocessing=True,
    include_top=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """A ConvNeXt of the given stage depths and widths; see ConvNeXtTiny.

    Raises:
      ValueError: as ConvNeXtTiny.
    """
    common.check_weights(weights, include_top, classes, quote="'imagenet'")
    input_shape = common.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = common.image_input(input_tensor, input_shape)
    inputs = img_input
    if input_tensor is not None:
        inputs = common.model_inputs(input_tensor, img_input)[0]
    x = inputs
    if include_preprocessing:
        channel_axis = 3 if backend.image_data_format() == "channels_last" else 1
        if input_shape[channel_axis - 1] == 3:
            x = _pre_stem(x, model_name)
    steps = _downsampling(projection_dims, model_name)
    rates = [float(r) for r in np.linspace(0.0, drop_path_rate, sum(depths))]
    cur = 0
    for i in range(4):
        x = steps[i](x)
        for j in range(depths[i]):
            x = ConvNeXtBlock(
                projection_dim=projection_dims[i],
                drop_path_rate=rates[cur + j],
                layer_scale_init_value=layer_scale_init_value,
                name=f"{model_name}_stage_{i}_block_{j}",
            )(x)
        cur += depths[i]
    if include_top:
        common.validate_activation(classifier_activation, weights)
        x = _head(x, classes, classifier_activation, model_name)
    else:
        if pooling == "avg":
            x = L.GlobalAveragePooling2D()(x)
        elif pooling == "max":
            x = L.GlobalMaxPooling2D()(x)
        x = L.LayerNormalization(epsilon=1e-6)(x)
    model = Model(inputs=inputs, outputs=x, name=model_name)

    if weights == "imagenet":
        suffix = ".h5" if include_top else "_notop.h5"
        file_hash = WEIGHTS_HASHES[model_name][0 if include_top else 1]
        common.load_weights(model, model_name + suffix, BASE_WEIGHTS_PATH, file_hash)
    elif weights is not None:
        model.load_weights(weights)
    return model


def _variant(size, model_name):
    config = MODEL_CONFIGS[size]

    def build(
        model_name=model_name,
        include_top=True,
        include_preprocessing=True,
        weights="imagenet",
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
    ):
        return ConvNeXt(
            depths=config["depths"],
            projection_dims=config["projection_dims"],
            drop_path_rate=0.0,
            layer_scale_init_value=1e-6,
            default_size=224,
            model_name=model_name,
            include_top=include_top,
            include_preprocessing=include_preprocessing,
            weights=weights,
            input_tensor=input_tensor,
            input_shape=input_shape,
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
        )

    build.__doc__ = f"""ConvNeXt-{size} (default input 224x224); `weights='imagenet'` loads
    Keras' ImageNet weights from its cache (fetched once). Inputs are pixels in [0, 255].

    Raises:
      ValueError: bad `weights`, `classes` other than 1000 with ImageNet's top, a bad
        `input_shape`, or a classifier activation other than softmax with weights.
    """
    return build


ConvNeXtTiny = _variant("tiny", "convnext_tiny")
ConvNeXtSmall = _variant("small", "convnext_small")
ConvNeXtBase = _variant("base", "convnext_base")
ConvNeXtLarge = _variant("large", "convnext_large")
ConvNeXtXLarge = _variant("xlarge", "convnext_xlarge")
for _fn, _name in (
    (ConvNeXtTiny, "ConvNeXtTiny"),
    (ConvNeXtSmall, "ConvNeXtSmall"),
    (ConvNeXtBase, "ConvNeXtBase"),
    (ConvNeXtLarge, "ConvNeXtLarge"),
    (ConvNeXtXLarge, "ConvNeXtXLarge"),
):
    _fn.__name__ = _fn.__qualname__ = _name


def preprocess_input(x, data_format=None):
    """`x` unchanged: the models normalise their inputs themselves."""
    return x


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`."""
    return common.decode_predictions(preds, top=top)
