"""`tf.keras.applications.inception_v3`: Inception-v3 (Szegedy et al. 2015).

Its convolutions (conv + BN without scale + ReLU) are unnamed, so their names come from
Keras' per-graph counters (conv2d_N, batch_normalization_N), as in Keras; the mixing
concatenations are named mixed0..mixed10.
"""

from __future__ import annotations

from asyncflow.keras import backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

WEIGHTS_PATH = (
    "https://storage.googleapis.com/tensorflow/keras-applications/inception_v3/"
    "inception_v3_weights_tf_dim_ordering_tf_kernels.h5"
)
WEIGHTS_PATH_NO_TOP = (
    "https://storage.googleapis.com/tensorflow/keras-applications/inception_v3/"
    "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5"
)

__all__ = ["InceptionV3", "decode_predictions", "preprocess_input"]


def conv2d_bn(x, filters, num_row, num_col, padding="same", strides=(1, 1), name=None):
    """Convolution (no bias), batch normalization without scale, ReLU."""
    bn_name = None if name is None else name + "_bn"
    conv_name = None if name is None else name + "_conv"
    x = layers.Conv2D(
        filters, (num_row, num_col), strides=strides, padding=padding, use_bias=False,
        name=conv_name,
    )(x)  # fmt: skip
    x = layers.BatchNormalization(axis=_common.channel_axis(), scale=False, name=bn_name)(x)
    return layers.Activation("relu", name=name)(x)


def _pool_branch(x, filters):
    branch = layers.AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x)
    return conv2d_bn(branch, filters, 1, 1)


def _block_35(x, pool_filters, axis, name):
    """The 35x35 module: 1x1, 5x5, double 3x3 and pooled branches."""
    branch1x1 = conv2d_bn(x, 64, 1, 1)
    branch5x5 = conv2d_bn(x, 48, 1, 1)
    branch5x5 = conv2d_bn(branch5x5, 64, 5, 5)
    branch3x3dbl = conv2d_bn(x, 64, 1, 1)
    branch3x3dbl = conv2d_bn(branch3x3dbl, 96, 3, 3)
    branch3x3dbl = conv2d_bn(branch3x3dbl, 96, 3, 3)
    branch_pool = _pool_branch(x, pool_filters)
    return layers.concatenate(
        [branch1x1, branch5x5, branch3x3dbl, branch_pool], axis=axis, name=name
    )


def _block_17(x, width, axis, name):
    """The 17x17 module: factorized 7x7 convolutions of `width` inner channels."""
    branch1x1 = conv2d_bn(x, 192, 1, 1)
    branch7x7 = conv2d_bn(x, width, 1, 1)
    branch7x7 = conv2d_bn(branch7x7, width, 1, 7)
    branch7x7 = conv2d_bn(branch7x7, 192, 7, 1)
    branch7x7dbl = conv2d_bn(x, width, 1, 1)
    branch7x7dbl = conv2d_bn(branch7x7dbl, width, 7, 1)
    branch7x7dbl = conv2d_bn(branch7x7dbl, width, 1, 7)
    branch7x7dbl = conv2d_bn(branch7x7dbl, width, 7, 1)
    branch7x7dbl = conv2d_bn(branch7x7dbl, 192, 1, 7)
    branch_pool = _pool_branch(x, 192)
    return layers.concatenate(
        [branch1x1, branch7x7, branch7x7dbl, branch_pool], axis=axis, name=name
    )


def _block_8(x, i, axis):
    """The 8x8 module with expanded (1x3 beside 3x1) filter banks."""
    branch1x1 = conv2d_bn(x, 320, 1, 1)
    branch3x3 = conv2d_bn(x, 384, 1, 1)
    branch3x3_1 = conv2d_bn(branch3x3, 384, 1, 3)
    branch3x3_2 = conv2d_bn(branch3x3, 384, 3, 1)
    branch3x3 = layers.concatenate([branch3x3_1, branch3x3_2], axis=axis, name=f"mixed9_{i}")
    branch3x3dbl = conv2d_bn(x, 448, 1, 1)
    branch3x3dbl = conv2d_bn(branch3x3dbl, 384, 3, 3)
    branch3x3dbl_1 = conv2d_bn(branch3x3dbl, 384, 1, 3)
    branch3x3dbl_2 = conv2d_bn(branch3x3dbl, 384, 3, 1)
    branch3x3dbl = layers.concatenate([branch3x3dbl_1, branch3x3dbl_2], axis=axis)
    branch_pool = _pool_branch(x, 192)
    return layers.concatenate(
        [branch1x1, branch3x3, branch3x3dbl, branch_pool], axis=axis, name=f"mixed{9 + i}"
    )


def _features(img_input, axis):
    x = conv2d_bn(img_input, 32, 3, 3, strides=(2, 2), padding="valid")
    x = conv2d_bn(x, 32, 3, 3, padding="valid")
    x = conv2d_bn(x, 64, 3, 3)
    x = layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = conv2d_bn(x, 80, 1, 1, padding="valid")
    x = conv2d_bn(x, 192, 3, 3, padding="valid")
    x = layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = _block_35(x, 32, axis, "mixed0")
    x = _block_35(x, 64, axis, "mixed1")
    x = _block_35(x, 64, axis, "mixed2")
    # Reduction to 17x17.
    branch3x3 = conv2d_bn(x, 384, 3, 3, strides=(2, 2), padding="valid")
    branch3x3dbl = conv2d_bn(x, 64, 1, 1)
    branch3x3dbl = conv2d_bn(branch3x3dbl, 96, 3, 3)
    branch3x3dbl = conv2d_bn(branch3x3dbl, 96, 3, 3, strides=(2, 2), padding="valid")
    branch_pool = layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = layers.concatenate([branch3x3, branch3x3dbl, branch_pool], axis=axis, name="mixed3")
    x = _block_17(x, 128, axis, "mixed4")
    x = _block_17(x, 160, axis, "mixed5")
    x = _block_17(x, 160, axis, "mixed6")
    x = _block_17(x, 192, axis, "mixed7")
    # Reduction to 8x8.
    branch3x3 = conv2d_bn(x, 192, 1, 1)
    branch3x3 = conv2d_bn(branch3x3, 320, 3, 3, strides=(2, 2), padding="valid")
    branch7x7x3 = conv2d_bn(x, 192, 1, 1)
    branch7x7x3 = conv2d_bn(branch7x7x3, 192, 1, 7)
    branch7x7x3 = conv2d_bn(branch7x7x3, 192, 7, 1)
    branch7x7x3 = conv2d_bn(branch7x7x3, 192, 3, 3, strides=(2, 2), padding="valid")
    branch_pool = layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = layers.concatenate([branch3x3, branch7x7x3, branch_pool], axis=axis, name="mixed8")
    for i in range(2):
        x = _block_8(x, i, axis)
    return x


def InceptionV3(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """Inception-v3; input 299x299 by default, at least 75x75.

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape` or `classifier_activation`.
    """
    _common.check_weights(
        weights, include_top, classes,
        _common.WEIGHTS_ERROR[:-1] + f"; Received: weights={weights}",
        _common.CLASSES_ERROR + f"; Received classes={classes}",
    )  # fmt: skip
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=299,
        min_size=75,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = _common.image_input(input_tensor, input_shape)
    x = _features(img_input, _common.channel_axis())
    if include_top:
        x = _common.classifier(x, classes, classifier_activation, weights, "avg_pool")
    else:
        x = _common.pool(x, pooling)
    model = _common.make_model(img_input, input_tensor, x, "inception_v3")
    if include_top:
        fname, file_hash = (
            "inception_v3_weights_tf_dim_ordering_tf_kernels.h5",
            "9a0d58056eeedaa3f26cb7ebd46da564",
        )
    else:
        fname, file_hash = (
            "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "bcbd6486424b2319ff4ef7d526e38f63",
        )
    return _common.load(model, weights, fname, "inception_v3", file_hash)


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
