"""`tf.keras.applications.vgg16`: VGG16 (Simonyan & Zisserman 2014), and the builder
VGG19 shares (vgg19.py): blocks of 3x3 convolutions and 2x2 max pooling, then two
4096-unit dense layers."""

from __future__ import annotations

from asyncflow.keras import backend_config, layers
from asyncflow.keras.applications import _common, imagenet_utils

WEIGHTS_PATH = (
    "https://storage.googleapis.com/tensorflow/keras-applications/vgg16/"
    "vgg16_weights_tf_dim_ordering_tf_kernels.h5"
)
WEIGHTS_PATH_NO_TOP = (
    "https://storage.googleapis.com/tensorflow/keras-applications/vgg16/"
    "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
)

__all__ = ["VGG16", "decode_predictions", "preprocess_input"]


def build_vgg(
    name, convs, hashes, errors, include_top, weights, input_tensor, input_shape, pooling,
    classes, classifier_activation,
):  # fmt: skip
    """A VGG with `convs[i]` convolutions in block i + 1; `hashes` are the (top, no
    top) weight file hashes, `errors` the (weights, classes) argument error texts."""
    _common.check_weights(weights, include_top, classes, *errors)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend_config.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    img_input = _common.image_input(input_tensor, input_shape)
    x = img_input
    for block, (filters, n) in enumerate(zip((64, 128, 256, 512, 512), convs), start=1):
        for i in range(1, n + 1):
            x = layers.Conv2D(
                filters, (3, 3), activation="relu", padding="same", name=f"block{block}_conv{i}"
            )(x)
        x = layers.MaxPooling2D((2, 2), strides=(2, 2), name=f"block{block}_pool")(x)
    if include_top:
        x = layers.Flatten(name="flatten")(x)
        x = layers.Dense(4096, activation="relu", name="fc1")(x)
        x = layers.Dense(4096, activation="relu", name="fc2")(x)
        imagenet_utils.validate_activation(classifier_activation, weights)
        x = layers.Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = _common.pool(x, pooling)
    model = _common.make_model(img_input, input_tensor, x, name)
    suffix = "" if include_top else "_notop"
    fname = f"{name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5"
    return _common.load(model, weights, fname, name, hashes[0 if include_top else 1])


def VGG16(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """VGG16; input 224x224 by default (at least 32x32 without the top).

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape` or `classifier_activation`.
    """
    errors = (
        _common.WEIGHTS_ERROR + f"  Received: weights={weights}",
        _common.CLASSES_ERROR + f".  Received `classes={classes}`",
    )
    return build_vgg(
        "vgg16", (2, 2, 3, 3, 3),
        ("64373286793e3c8b2b4e3219cbf3544b", "6d6bbae143d832006294945121d1f1fc"), errors,
        include_top, weights, input_tensor, input_shape, pooling, classes,
        classifier_activation,
    )  # fmt: skip


def preprocess_input(x, data_format=None):
    """ImageNet "caffe" preprocessing: RGB to BGR, then minus each channel's mean.

    Raises:
      ValueError: unknown `data_format`.
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds, top=5):
    """See `imagenet_utils.decode_predictions`.

    Raises:
      ValueError: `preds` is not of shape (samples, 1000).
    """
    return imagenet_utils.decode_predictions(preds, top=top)
