"""The steps every `keras.applications` model constructor shares: checking `weights`
and `classes`, making the image input, the classifier top or feature pooling, and
loading weights (ImageNet files through `keras.utils.get_file`, or a given path).

Keras words the argument errors slightly differently per model; each constructor passes
its own texts.
"""

from __future__ import annotations

from asyncflow import gfile
from asyncflow.keras import backend, backend_config, data_utils, layers, training, utils
from asyncflow.keras.applications import imagenet_utils

BASE_URL = "https://storage.googleapis.com/tensorflow/keras-applications/"

WEIGHTS_ERROR = (
    "The `weights` argument should be either `None` (random initialization), `imagenet` "
    "(pre-training on ImageNet), or the path to the weights file to be loaded."
)
CLASSES_ERROR = (
    'If using `weights` as `"imagenet"` with `include_top` as true, `classes` should be 1000'
)


def check_weights(weights, include_top, classes, weights_error=None, classes_error=None):
    """Raises:
    ValueError: `weights` is neither None, 'imagenet' nor an existing file, or ImageNet
      weights with a top of other than 1000 classes.
    """
    if not (weights in {"imagenet", None} or gfile.exists(weights)):
        raise ValueError(weights_error or WEIGHTS_ERROR)
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(classes_error or CLASSES_ERROR)


def channel_axis(last=3) -> int:
    """The channel axis of 4-D images: `last` (3 or -1, as each model writes it) for
    channels_last, else 1."""
    return last if backend_config.image_data_format() == "channels_last" else 1


def image_input(input_tensor, input_shape):
    """The model's image tensor: a new Input, an Input wrapping a plain tensor, or the
    given Keras tensor."""
    if input_tensor is None:
        return layers.Input(shape=input_shape)
    if not backend.is_keras_tensor(input_tensor):
        return layers.Input(tensor=input_tensor, shape=input_shape)
    return input_tensor


def classifier(x, classes, classifier_activation, weights, pool_name=None):
    """Global average pooling then the 'predictions' Dense layer."""
    x = layers.GlobalAveragePooling2D(name=pool_name)(x)
    imagenet_utils.validate_activation(classifier_activation, weights)
    return layers.Dense(classes, activation=classifier_activation, name="predictions")(x)


def pool(x, pooling, avg_name=None, max_name=None):
    """The features pooled as `pooling` ('avg', 'max') asks; any other value keeps the
    4-D feature map, as Keras does."""
    if pooling == "avg":
        return layers.GlobalAveragePooling2D(name=avg_name)(x)
    if pooling == "max":
        return layers.GlobalMaxPooling2D(name=max_name)(x)
    return x


def make_model(img_input, input_tensor, x, name):
    """The functional Model from the image input (or the sources of `input_tensor`)."""
    inputs = img_input if input_tensor is None else utils.get_source_inputs(input_tensor)
    return training.Model(inputs, x, name=name)


def load(model, weights, fname=None, subdir=None, file_hash=None, url=None):
    """Loads ImageNet weights (file `fname` under BASE_URL + subdir, or `url`) through
    Keras' cache, or the weights file at path `weights`."""
    if weights == "imagenet":
        origin = url or BASE_URL + subdir + "/" + fname
        path = data_utils.get_file(fname, origin, cache_subdir="models", file_hash=file_hash)
        model.load_weights(path)
    elif weights is not None:
        model.load_weights(weights)
    return model
