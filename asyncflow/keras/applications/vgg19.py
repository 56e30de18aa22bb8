"""`tf.keras.applications.vgg19`: VGG19 (Simonyan & Zisserman 2014), vgg16's builder
with four convolutions in blocks 3 to 5."""

from __future__ import annotations

from asyncflow.keras.applications import _common, imagenet_utils, vgg16

WEIGHTS_PATH = (
    "https://storage.googleapis.com/tensorflow/keras-applications/vgg19/"
    "vgg19_weights_tf_dim_ordering_tf_kernels.h5"
)
WEIGHTS_PATH_NO_TOP = (
    "https://storage.googleapis.com/tensorflow/keras-applications/vgg19/"
    "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5"
)

__all__ = ["VGG19", "decode_predictions", "preprocess_input"]


def VGG19(  # noqa: N802 - Keras' name
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
):
    """VGG19; input 224x224 by default (at least 32x32 without the top).

    Raises:
      ValueError: bad `weights`, `classes`, `input_shape` or `classifier_activation`.
    """
    errors = (
        _common.WEIGHTS_ERROR + f"  Received: `weights={weights}.`",
        _common.CLASSES_ERROR + f".  Received: `classes={classes}.`",
    )
    return vgg16.build_vgg(
        "vgg19", (2, 2, 4, 4, 4),
        ("cbe5617147190e668d6c5d5026f83318", "253f8cb515780f3b799900260a226db6"), errors,
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
