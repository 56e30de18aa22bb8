"""`tf.keras.applications.resnet_rs`: ResNet-RS 50 to 420 (Bello et al. 2021), built as
TF 2.21's tf_keras builds them in TF1 graph mode: the stem is named by a graph-wide
counter ("stem_1"), stride-2 convolutions pad explicitly (unnamed ZeroPadding2D layers),
and each block's sum is an unnamed Add, so layer lists and Keras' ImageNet weight files
match.

`weights='imagenet'` picks the largest input size Keras published weights for (e.g.
'imagenet-i160' for ResNetRS50); a size can be asked for as 'imagenet-i<size>'. Like TF,
a block's residual dropout rate is its `survival_probability`.
"""

from __future__ import annotations

import sys

from asyncflow import gfile
from asyncflow.keras import backend
from asyncflow.keras import layers as L
from asyncflow.keras.applications import _common_v2 as common
from asyncflow.keras.applications.efficientnet import conv_kernel_initializer
from asyncflow.keras.training import Model

__all__ = [
    "ResNetRS50",
    "ResNetRS101",
    "ResNetRS152",
    "ResNetRS200",
    "ResNetRS270",
    "ResNetRS350",
    "ResNetRS420",
    "preprocess_input",
    "decode_predictions",
]

BASE_WEIGHTS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/resnet_rs/"
# md5 of Keras' published files.
WEIGHT_HASHES = {
    "resnet-rs-101-i160.h5": "544b3434d00efc199d66e9058c7f3379",
    "resnet-rs-101-i160_notop.h5": "82d5b90c5ce9d710da639d6216d0f979",
    "resnet-rs-101-i192.h5": "eb285be29ab42cf4835ff20a5e3b5d23",
    "resnet-rs-101-i192_notop.h5": "f9a0f6b85faa9c3db2b6e233c4eebb5b",
    "resnet-rs-152-i192.h5": "8d72a301ed8a6f11a47c4ced4396e338",
    "resnet-rs-152-i192_notop.h5": "5fbf7ac2155cb4d5a6180ee9e3aa8704",
    "resnet-rs-152-i224.h5": "31a46a92ab21b84193d0d71dd8c3d03b",
    "resnet-rs-152-i224_notop.h5": "dc8b2cba2005552eafa3167f00dc2133",
    "resnet-rs-152-i256.h5": "ba6271b99bdeb4e7a9b15c05964ef4ad",
    "resnet-rs-152-i256_notop.h5": "fa79794252dbe47c89130f65349d654a",
    "resnet-rs-200-i256.h5": "a76930b741884e09ce90fa7450747d5f",
    "resnet-rs-200-i256_notop.h5": "bbdb3994718dfc0d1cd45d7eff3f3d9c",
    "resnet-rs-270-i256.h5": "20d575825ba26176b03cb51012a367a8",
    "resnet-rs-270-i256_notop.h5": "2c42ecb22e35f3e23d2f70babce0a2aa",
    "resnet-rs-350-i256.h5": "f4a039dc3c421321b7fc240494574a68",
    "resnet-rs-350-i256_notop.h5": "6e44b55025bbdff8f51692a023143d66",
    "resnet-rs-350-i320.h5": "7ccb858cc738305e8ceb3c0140bee393",
    "resnet-rs-350-i320_notop.h5": "ab0c1f9079d2f85a9facbd2c88aa6079",
    "resnet-rs-420-i320.h5": "ae0eb9bed39e64fc8d7e0db4018dc7e8",
    "resnet-rs-420-i320_notop.h5": "fe6217c32be8305b1889657172b98884",
    "resnet-rs-50-i160.h5": "69d9d925319f00a8bdd4af23c04e4102",
    "resnet-rs-50-i160_notop.h5": "90daa68cd26c95aa6c5d25451e095529",
}
DEPTH_TO_WEIGHT_VARIANTS = {
    50: [160],
    101: [160, 192],
    152: [192, 224, 256],
    200: [256],
    270: [256],
    350: [256, 320],
    420: [320],
}
# Repeats of the four block groups (64, 128, 256 and 512 filters) by depth.
_REPEATS = {
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
    270: (4, 29, 53, 4),
    350: (4, 36, 72, 4),
    420: (4, 44, 87, 4),
}
BLOCK_ARGS = {
    depth: [
        {"input_filters": f, "num_repeats": r}
        for f, r in zip((64, 128, 256, 512), repeats, strict=True)
    ]
    for depth, repeats in _REPEATS.items()
}


def _bn_axis() -> int:
    return 3 if backend.image_data_format() == "channels_last" else 1


def _bn(x, name, momentum, epsilon):
    return L.BatchNormalization(axis=_bn_axis(), momentum=momentum, epsilon=epsilon, name=name)(x)


def _conv(x, filters, kernel_size, strides, name):
    """A convolution whose stride-2 padding is explicit (and input-size independent)."""
    if strides > 1:
        total = kernel_size - 1
        begin, end = total // 2, total - total // 2
        x = L.ZeroPadding2D(padding=((begin, end), (begin, end)))(x)
    return L.Conv2D(
        filters=filters,
        kernel_size=kernel_size,
        strides=strides,
        padding="same" if strides == 1 else "valid",
        use_bias=False,
        kernel_initializer=conv_kernel_initializer(),
        name=name,
    )(x)


def _stem(x, momentum, epsilon, activation):
    name = f"stem_{backend.get_uid('stem_')}"
    for i, (filters, strides) in enumerate(((32, 2), (32, 1), (64, 1), (64, 2)), start=1):
        x = _conv(x, filters, 3, strides, f"{name}_stem_conv_{i}")
        x = _bn(x, f"{name}_stem_batch_norm_{i}", momentum, epsilon)
        x = L.Activation(activation, name=f"{name}_stem_act_{i}")(x)
    return x


def _squeeze_excite(inputs, in_filters, se_ratio, name):
    x = L.GlobalAveragePooling2D(name=name + "_se_squeeze")(inputs)
    channels = x.shape[-1]
    se_shape = (channels, 1, 1) if _bn_axis() == 1 else (1, 1, channels)
    x = L.Reshape(se_shape, name=name + "_se_reshape")(x)
    for filters, activation, suffix in (
        (max(1, int(in_filters * 4 * se_ratio)), "relu", "_se_reduce"),
        (4 * in_filters, "sigmoid", "_se_expand"),
    ):
        x = L.Conv2D(
            filters=filters, kernel_size=[1, 1], strides=[1, 1],
            kernel_initializer=conv_kernel_initializer(), padding="same", use_bias=True,
            activation=activation, name=name + suffix,
        )(x)  # fmt: skip
    return L.multiply([inputs, x], name=name + "_se_excite")


def _bottleneck(inputs, filters, strides, use_projection, settings, name):
    momentum, epsilon, activation, se_ratio, survival_probability = settings
    shortcut = inputs
    if use_projection:
        if strides == 2:
            shortcut = L.AveragePooling2D(
                pool_size=(2, 2), strides=(2, 2), padding="same",
                name=name + "_projection_pooling",
            )(inputs)  # fmt: skip
            shortcut = _conv(shortcut, filters * 4, 1, 1, name + "_projection_conv")
        else:
            shortcut = _conv(inputs, filters * 4, 1, strides, name + "_projection_conv")
        shortcut = _bn(shortcut, name + "_projection_batch_norm", momentum, epsilon)
    x = _conv(inputs, filters, 1, 1, name + "_conv_1")
    # (TF's name lacks the underscore here)
    x = _bn(x, name + "batch_norm_1", momentum, epsilon)
    x = L.Activation(activation, name=name + "_act_1")(x)
    x = _conv(x, filters, 3, strides, name + "_conv_2")
    x = _bn(x, name + "_batch_norm_2", momentum, epsilon)
    x = L.Activation(activation, name=name + "_act_2")(x)
    x = _conv(x, filters * 4, 1, 1, name + "_conv_3")
    x = _bn(x, name + "_batch_norm_3", momentum, epsilon)
    if 0 < se_ratio < 1:
        x = _squeeze_excite(x, filters, se_ratio, name + "_se")
    if survival_probability:
        x = L.Dropout(survival_probability, noise_shape=(None, 1, 1, 1), name=name + "_drop")(x)
    x = L.Add()([x, shortcut])
    return L.Activation(activation, name=name + "_output_act")(x)


def _weights_variant(weights, depth):
    """'imagenet' made the largest published size's variant; checked.

    Raises:
      ValueError: another `weights` value.
    """
    allowed = [f"imagenet-i{size}" for size in DEPTH_TO_WEIGHT_VARIANTS[depth]]
    if weights == "imagenet":
        weights = f"imagenet-i{max(DEPTH_TO_WEIGHT_VARIANTS[depth])}"
    if not (weights in {*allowed, None} or gfile.Exists(weights)):
        raise ValueError(
            "The `weights` argument should be either `None` (random initialization), "
            "`'imagenet'` (pre-training on ImageNet, with highest available input shape), or "
            f"the path to the weights file to be loaded. For ResNetRS{depth} the following "
            f"weight variants are available {allowed} (default=highest). Received "
            f"weights={weights}"
        )
    return weights, allowed


def ResNetRS(  # noqa: N802 - Keras' name
    depth,
    input_shape=None,
    bn_momentum=0.0,
    bn_epsilon=1e-5,
    activation="relu",
    se_ratio=0.25,
    dropout_rate=0.25,
    drop_connect_rate=0.2,
    include_top=True,
    block_args=None,
    model_name="resnet-rs",
    pooling=None,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
):
    """A ResNet-RS of `depth`; see ResNetRS50.

    Raises:
      ValueError: as ResNetRS50.
    """
    weights, allowed = _weights_variant(weights, depth)
    if weights in allowed and include_top and classes != 1000:
        raise ValueError(
            f"If using `weights` as `'imagenet'` or any of {allowed} with `include_top` as "
            f"true, `classes` should be 1000. Received classes={classes}"
        )
    input_shape = common.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = common.image_input(input_tensor, input_shape)
    bn_axis = _bn_axis()
    x = img_input
    if include_preprocessing:
        x = L.Rescaling(scale=1.0 / 255)(x)
        if input_shape[bn_axis - 1] == 3:
            x = L.Normalization(
                mean=[0.485, 0.456, 0.406], variance=[0.229**2, 0.224**2, 0.225**2], axis=bn_axis
            )(x)
    x = _stem(x, bn_momentum, bn_epsilon, activation)
    block_args = BLOCK_ARGS[depth] if block_args is None else block_args
    for i, args in enumerate(block_args):
        survival = drop_connect_rate * float(i + 2) / (len(block_args) + 1)
        settings = (bn_momentum, bn_epsilon, activation, se_ratio, survival)
        name = f"BlockGroup{i + 2}_"
        filters = args["input_filters"]
        x = _bottleneck(x, filters, 1 if i == 0 else 2, True, settings, name + "_block_0_")
        for j in range(1, args["num_repeats"]):
            x = _bottleneck(x, filters, 1, False, settings, name + f"_block_{j}_")
    if include_top:
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = L.Dropout(dropout_rate, name="top_dropout")(x)
        common.validate_activation(classifier_activation, weights)
        x = L.Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = L.GlobalMaxPooling2D(name="max_pool")(x)
    model = Model(common.model_inputs(input_tensor, img_input), x, name=model_name)

    if weights in allowed:
        file_name = f"{model_name}-{weights.split('-')[-1]}{'' if include_top else '_notop'}.h5"
        common.load_weights(model, file_name, BASE_WEIGHTS_URL, WEIGHT_HASHES[file_name])
    elif weights is not None:
        model.load_weights(weights)
    return model


# (depth, drop_connect_rate, dropout_rate, recursion limit TF raises to) of each model.
_VARIANTS = {
    "ResNetRS50": (50, 0.0, 0.25, None),
    "ResNetRS101": (101, 0.0, 0.25, None),
    "ResNetRS152": (152, 0.0, 0.25, None),
    "ResNetRS200": (200, 0.1, 0.25, None),
    "ResNetRS270": (270, 0.1, 0.25, 1300),
    "ResNetRS350": (350, 0.1, 0.4, 1500),
    "ResNetRS420": (420, 0.1, 0.4, 1800),
}


def _variant(public):
    depth, drop_connect_rate, dropout_rate, recursion = _VARIANTS[public]

    def build(
        include_top=True,
        weights="imagenet",
        classes=1000,
        input_shape=None,
        input_tensor=None,
        pooling=None,
        classifier_activation="softmax",
        include_preprocessing=True,
    ):
        if recursion is not None and sys.getrecursionlimit() < recursion:
            sys.setrecursionlimit(recursion)
        return ResNetRS(
            depth=depth, include_top=include_top, drop_connect_rate=drop_connect_rate,
            dropout_rate=dropout_rate, weights=weights, classes=classes,
            input_shape=input_shape, input_tensor=input_tensor, pooling=pooling,
            classifier_activation=classifier_activation, model_name=f"resnet-rs-{depth}",
            include_preprocessing=include_preprocessing,
        )  # fmt: skip

    build.__name__ = build.__qualname__ = public
    build.__doc__ = f"""{public}; `weights='imagenet'` (or 'imagenet-i<size>') loads Keras'
    ImageNet weights from its cache (fetched once). Inputs are pixels in [0, 255].

    Raises:
      ValueError: bad `weights` (sizes: {DEPTH_TO_WEIGHT_VARIANTS[depth]}), `classes` other
        than 1000 with ImageNet's top, a bad `input_shape`, or a classifier activation
        other than softmax with weights.
    """
    return build


ResNetRS50 = _variant("ResNetRS50")
ResNetRS101 = _variant("ResNetRS101")
ResNetRS152 = _variant("ResNetRS152")
ResNetRS200 = _variant("ResNetRS200")
ResNetRS270 = _variant("ResNetRS270")
ResNetRS350 = _variant("ResNetRS350")
ResNetRS420 = _variant("ResNetRS420")


def preprocess_input(x, data_format=None):
    """`x` unchanged: the models rescale their inputs themselves."""
    return x


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`."""
    return common.decode_predictions(preds, top=top)
