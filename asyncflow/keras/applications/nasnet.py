"""`tf.keras.applications.nasnet`: NASNet-A (Zoph et al. 2018), Mobile and Large.

Cells are built under Keras' name scopes (normal_A_block_N, reduction_A_block_N, ...),
as Keras builds them, so op names match; NASNet is channels_last only (with
channels_first configured, it is built channels_last, with a warning, as in Keras).
"""

from __future__ import annotations

from asyncflow import tf_logging
from asyncflow.keras import backend, backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/nasnet/"
NASNET_MOBILE_WEIGHT_PATH = BASE_WEIGHTS_PATH + "NASNet-mobile.h5"
NASNET_MOBILE_WEIGHT_PATH_NO_TOP = BASE_WEIGHTS_PATH + "NASNet-mobile-no-top.h5"
NASNET_LARGE_WEIGHT_PATH = BASE_WEIGHTS_PATH + "NASNet-large.h5"
NASNET_LARGE_WEIGHT_PATH_NO_TOP = BASE_WEIGHTS_PATH + "NASNet-large-no-top.h5"

# default_size -> ((file, url, hash) with top, without top)
_WEIGHTS = {
    224: (
        ("nasnet_mobile.h5", NASNET_MOBILE_WEIGHT_PATH, "020fb642bf7360b370c678b08e0adf61"),
        (
            "nasnet_mobile_no_top.h5",
            NASNET_MOBILE_WEIGHT_PATH_NO_TOP,
            "1ed92395b5b598bdda52abe5c0dbfd63",
        ),
    ),
    331: (
        ("nasnet_large.h5", NASNET_LARGE_WEIGHT_PATH, "11577c9a518f0070763c2b964a382f17"),
        (
            "nasnet_large_no_top.h5",
            NASNET_LARGE_WEIGHT_PATH_NO_TOP,
            "d81d89dc07e6e56530c4e77faddd61b5",
        ),
    ),
}

__all__ = ["NASNetLarge", "NASNetMobile", "decode_predictions", "preprocess_input"]


def _bn(x, name):
    return layers.BatchNormalization(axis=-1, momentum=0.9997, epsilon=1e-3, name=name)(x)


def _conv1x1(x, filters, name, strides=(1, 1)):
    return layers.Conv2D(
        filters, (1, 1), strides=strides, padding="same", use_bias=False, name=name,
        kernel_initializer="he_normal",
    )(x)  # fmt: skip


def NASNet(  # noqa: N802 - Keras' name
    input_shape=None,
    penultimate_filters=4032,
    num_blocks=6,
    stem_block_filters=96,
    skip_reduction=True,
    filter_multiplier=2,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    default_size=None,
    classifier_activation="softmax",
):
    """A NASNet-A: a stem, then `num_blocks` normal cells per stage with reduction
    cells between stages.

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape`, `penultimate_filters`, or
        ImageNet weights for other than NASNetMobile/NASNetLarge.
    """
    _common.check_weights(weights, include_top, classes)
    if isinstance(input_shape, tuple) and None in input_shape and weights == "imagenet":
        raise ValueError(
            "When specifying the input shape of a NASNet and loading `ImageNet` weights, the "
            "input_shape argument must be static (no None entries). Got: `input_shape="
            + str(input_shape)
            + "`."
        )
    if default_size is None:
        default_size = 331
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    old_data_format = None
    if backend_config.image_data_format() != "channels_last":
        tf_logging.warning(
            "The NASNet family of models is only available for the input data format "
            '"channels_last" (width, height, channels). However your settings specify the '
            'default data format "channels_first" (channels, width, height). You should set '
            '`image_data_format="channels_last"` in your TF-Keras config located at '
            "~/.keras/keras.json. The model being "
            'returned right now will expect inputs to follow the "channels_last" data format.'
        )
        backend_config.set_image_data_format("channels_last")
        old_data_format = "channels_first"
    model = _build(
        input_shape, input_tensor, penultimate_filters, num_blocks, stem_block_filters,
        skip_reduction, filter_multiplier, include_top, weights, pooling, classes,
        classifier_activation,
    )  # fmt: skip
    if weights == "imagenet":
        if default_size not in _WEIGHTS:
            raise ValueError(
                "ImageNet weights can only be loaded with NASNetLarge or NASNetMobile"
            )
        fname, url, file_hash = _WEIGHTS[default_size][0 if include_top else 1]
        _common.load(model, weights, fname, file_hash=file_hash, url=url)
    else:
        _common.load(model, weights)
    # Restored only after a successful build: Keras leaves channels_last set when
    # building fails.
    if old_data_format:
        backend_config.set_image_data_format(old_data_format)
    return model


def _build(
    input_shape, input_tensor, penultimate_filters, num_blocks, stem_block_filters,
    skip_reduction, filter_multiplier, include_top, weights, pooling, classes,
    classifier_activation,
):  # fmt: skip
    img_input = _common.image_input(input_tensor, input_shape)
    if penultimate_filters % (24 * (filter_multiplier**2)) != 0:
        raise ValueError(
            "For NASNet-A models, the `penultimate_filters` must be a multiple of 24 * "
            f"(`filter_multiplier` ** 2). Current value: {int(penultimate_filters)}"
        )
    filters = penultimate_filters // 24
    x = layers.Conv2D(
        stem_block_filters, (3, 3), strides=(2, 2), padding="valid", use_bias=False,
        name="stem_conv1", kernel_initializer="he_normal",
    )(img_input)  # fmt: skip
    x = _bn(x, "stem_bn1")
    p = None
    x, p = _reduction_a_cell(x, p, filters // (filter_multiplier**2), block_id="stem_1")
    x, p = _reduction_a_cell(x, p, filters // filter_multiplier, block_id="stem_2")
    for stage in range(3):
        width = filters * filter_multiplier**stage
        if stage:
            x, p0 = _reduction_a_cell(x, p, width, block_id=f"reduce_{stage * num_blocks}")
            p = p if skip_reduction else p0
        for i in range(num_blocks):
            block = stage * num_blocks + i + (1 if stage else 0)
            x, p = _normal_a_cell(x, p, width, block_id=str(block))
    x = layers.Activation("relu")(x)
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights)
    else:
        x = _common.pool(x, pooling)
    return _common.make_model(img_input, input_tensor, x, "NASNet")


def _separable_conv_block(ip, filters, kernel_size=(3, 3), strides=(1, 1), block_id=None):
    """ReLU, separable conv (strided ones padded by correct_pad), BN, twice."""
    with backend.name_scope(f"separable_conv_block_{block_id}"):
        x = layers.Activation("relu")(ip)
        if strides == (2, 2):
            x = layers.ZeroPadding2D(
                padding=imagenet_utils.correct_pad(x, kernel_size),
                name=f"separable_conv_1_pad_{block_id}",
            )(x)
            conv_pad = "valid"
        else:
            conv_pad = "same"
        x = layers.SeparableConv2D(
            filters, kernel_size, strides=strides, name=f"separable_conv_1_{block_id}",
            padding=conv_pad, use_bias=False, kernel_initializer="he_normal",
        )(x)  # fmt: skip
        x = _bn(x, f"separable_conv_1_bn_{block_id}")
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(
            filters, kernel_size, name=f"separable_conv_2_{block_id}", padding="same",
            use_bias=False, kernel_initializer="he_normal",
        )(x)  # fmt: skip
        x = _bn(x, f"separable_conv_2_bn_{block_id}")
    return x


def _adjust_block(p, ip, filters, block_id=None):
    """The previous cell's output `p` made to fit `ip`: halved in resolution (two
    offset average-pooled 1x1 convolutions) or projected to `filters` channels."""
    ip_shape = backend.int_shape(ip)
    p_shape = backend.int_shape(p) if p is not None else None
    with backend.name_scope("adjust_block"):
        if p is None:
            p = ip
        elif p_shape[-2] != ip_shape[-2]:
            with backend.name_scope(f"adjust_reduction_block_{block_id}"):
                p = layers.Activation("relu", name=f"adjust_relu_1_{block_id}")(p)
                p1 = layers.AveragePooling2D(
                    (1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_1_{block_id}"
                )(p)
                p1 = _conv1x1(p1, filters // 2, f"adjust_conv_1_{block_id}")
                p2 = layers.ZeroPadding2D(padding=((0, 1), (0, 1)))(p)
                p2 = layers.Cropping2D(cropping=((1, 0), (1, 0)))(p2)
                p2 = layers.AveragePooling2D(
                    (1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_2_{block_id}"
                )(p2)
                p2 = _conv1x1(p2, filters // 2, f"adjust_conv_2_{block_id}")
                p = layers.concatenate([p1, p2], axis=-1)
                p = _bn(p, f"adjust_bn_{block_id}")
        elif p_shape[-1] != filters:
            with backend.name_scope(f"adjust_projection_block_{block_id}"):
                p = layers.Activation("relu")(p)
                p = _conv1x1(p, filters, f"adjust_conv_projection_{block_id}")
                p = _bn(p, f"adjust_bn_{block_id}")
    return p


def _avg3(x, strides, padding, name):
    return layers.AveragePooling2D((3, 3), strides=strides, padding=padding, name=name)(x)


def _normal_a_cell(ip, p, filters, block_id=None):
    """A normal cell: five pairs of operations on this and the previous cell's output,
    summed, all concatenated with `p`."""
    with backend.name_scope(f"normal_A_block_{block_id}"):
        p = _adjust_block(p, ip, filters, block_id)
        h = layers.Activation("relu")(ip)
        h = _conv1x1(h, filters, f"normal_conv_1_{block_id}")
        h = _bn(h, f"normal_bn_1_{block_id}")
        with backend.name_scope("block_1"):
            x1_1 = _separable_conv_block(h, filters, (5, 5), block_id=f"normal_left1_{block_id}")
            x1_2 = _separable_conv_block(p, filters, block_id=f"normal_right1_{block_id}")
            x1 = layers.add([x1_1, x1_2], name=f"normal_add_1_{block_id}")
        with backend.name_scope("block_2"):
            x2_1 = _separable_conv_block(p, filters, (5, 5), block_id=f"normal_left2_{block_id}")
            x2_2 = _separable_conv_block(p, filters, (3, 3), block_id=f"normal_right2_{block_id}")
            x2 = layers.add([x2_1, x2_2], name=f"normal_add_2_{block_id}")
        with backend.name_scope("block_3"):
            x3 = _avg3(h, (1, 1), "same", f"normal_left3_{block_id}")
            x3 = layers.add([x3, p], name=f"normal_add_3_{block_id}")
        with backend.name_scope("block_4"):
            x4_1 = _avg3(p, (1, 1), "same", f"normal_left4_{block_id}")
            x4_2 = _avg3(p, (1, 1), "same", f"normal_right4_{block_id}")
            x4 = layers.add([x4_1, x4_2], name=f"normal_add_4_{block_id}")
        with backend.name_scope("block_5"):
            x5 = _separable_conv_block(h, filters, block_id=f"normal_left5_{block_id}")
            x5 = layers.add([x5, h], name=f"normal_add_5_{block_id}")
        x = layers.concatenate([p, x1, x2, x3, x4, x5], axis=-1, name=f"normal_concat_{block_id}")
    return x, ip


def _reduction_a_cell(ip, p, filters, block_id=None):
    """A reduction cell: like a normal cell, with strided operations halving the
    resolution."""
    with backend.name_scope(f"reduction_A_block_{block_id}"):
        p = _adjust_block(p, ip, filters, block_id)
        h = layers.Activation("relu")(ip)
        h = _conv1x1(h, filters, f"reduction_conv_1_{block_id}")
        h = _bn(h, f"reduction_bn_1_{block_id}")
        h3 = layers.ZeroPadding2D(
            padding=imagenet_utils.correct_pad(h, 3), name=f"reduction_pad_1_{block_id}"
        )(h)
        with backend.name_scope("block_1"):
            x1_1 = _separable_conv_block(
                h, filters, (5, 5), strides=(2, 2), block_id=f"reduction_left1_{block_id}"
            )
            x1_2 = _separable_conv_block(
                p, filters, (7, 7), strides=(2, 2), block_id=f"reduction_right1_{block_id}"
            )
            x1 = layers.add([x1_1, x1_2], name=f"reduction_add_1_{block_id}")
        with backend.name_scope("block_2"):
            x2_1 = layers.MaxPooling2D(
                (3, 3), strides=(2, 2), padding="valid", name=f"reduction_left2_{block_id}"
            )(h3)
            x2_2 = _separable_conv_block(
                p, filters, (7, 7), strides=(2, 2), block_id=f"reduction_right2_{block_id}"
            )
            x2 = layers.add([x2_1, x2_2], name=f"reduction_add_2_{block_id}")
        with backend.name_scope("block_3"):
            x3_1 = _avg3(h3, (2, 2), "valid", f"reduction_left3_{block_id}")
            x3_2 = _separable_conv_block(
                p, filters, (5, 5), strides=(2, 2), block_id=f"reduction_right3_{block_id}"
            )
            x3 = layers.add([x3_1, x3_2], name=f"reduction_add3_{block_id}")
        with backend.name_scope("block_4"):
            x4 = _avg3(x1, (1, 1), "same", f"reduction_left4_{block_id}")
            x4 = layers.add([x2, x4])
        with backend.name_scope("block_5"):
            x5_1 = _separable_conv_block(
                x1, filters, (3, 3), block_id=f"reduction_left4_{block_id}"
            )
            x5_2 = layers.MaxPooling2D(
                (3, 3), strides=(2, 2), padding="valid", name=f"reduction_right5_{block_id}"
            )(h3)
            x5 = layers.add([x5_1, x5_2], name=f"reduction_add4_{block_id}")
        x = layers.concatenate([x2, x3, x4, x5], axis=-1, name=f"reduction_concat_{block_id}")
        return x, ip


def NASNetMobile(  # noqa: N802 - Keras' name
    input_shape=None,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """NASNet-A Mobile (4 @ 1056); input 224x224 by default.

    Raises:
      ValueError: see `NASNet`.
    """
    return NASNet(
        input_shape, penultimate_filters=1056, num_blocks=4, stem_block_filters=32,
        skip_reduction=False, filter_multiplier=2, include_top=include_top, weights=weights,
        input_tensor=input_tensor, pooling=pooling, classes=classes, default_size=224,
        classifier_activation=classifier_activation,
    )  # fmt: skip


def NASNetLarge(  # noqa: N802 - Keras' name
    input_shape=None,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """NASNet-A Large (6 @ 4032); input 331x331 by default.

    Raises:
      ValueError: see `NASNet`.
    """
    return NASNet(
        input_shape, penultimate_filters=4032, num_blocks=6, stem_block_filters=96,
        skip_reduction=True, filter_multiplier=2, include_top=include_top, weights=weights,
        input_tensor=input_tensor, pooling=pooling, classes=classes, default_size=331,
        classifier_activation=classifier_activation,
    )  # fmt: skip


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
