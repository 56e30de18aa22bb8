"""What the newer `tf.keras.applications` families share: argument checks, input-shape
resolution, stride-2 padding, the ImageNet weights download, `decode_predictions`, and
the op layers TF1's Keras wraps around plain tensor arithmetic on Keras tensors.

These are private stand-ins for `imagenet_utils`' helpers (built in parallel in
another branch) so that these families do not depend on it before the merge.

An op layer is named `tf_op_layer_<op name>`, the op name made unique in the graph's
top-level scope, because that is the name TF1-mode Keras gives the layer it wraps around
`x + 3.0` (and it shows in `model.layers` and in saved weight files' layer lists).
"""

from __future__ import annotations

import json
import warnings

from asyncflow import gfile
from asyncflow import graph as ops
from asyncflow.keras import activations, backend
from asyncflow.keras.data_utils import get_file
from asyncflow.keras.engine import Input, Layer
from asyncflow.keras.utils_more import get_source_inputs

__all__ = [
    "check_weights",
    "correct_pad",
    "decode_predictions",
    "load_weights",
    "obtain_input_shape",
    "op_layer",
    "validate_activation",
]

CLASS_INDEX_PATH = (
    "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json"
)
_CLASS_INDEX = None


def check_weights(weights, include_top, classes, quote='"imagenet"') -> None:
    """TF's two checks of `weights` (None, 'imagenet' or an existing file) and of
    `classes` with ImageNet's classifier. The families quote 'imagenet' differently.

    Raises:
      ValueError: another `weights` value, or `classes` other than 1000 with
        ImageNet's top.
    """
    if not (weights in {"imagenet", None} or gfile.Exists(weights)):
        raise ValueError(
            "The `weights` argument should be either `None` (random initialization), "
            "`imagenet` (pre-training on ImageNet), or the path to the weights file to be "
            "loaded."
        )
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(
            f"If using `weights` as `{quote}` with `include_top` as true, `classes` should be 1000"
        )


def _default_shape(input_shape, default_size, data_format, weights) -> tuple:
    if weights != "imagenet" and input_shape and len(input_shape) == 3:
        channels = input_shape[0] if data_format == "channels_first" else input_shape[-1]
        if channels not in {1, 3}:
            warnings.warn(
                "This model usually expects 1 or 3 input channels. However, it was passed "
                f"an input_shape with {channels} input channels.",
                stacklevel=3,
            )
    else:
        channels = 3
    if data_format == "channels_first":
        return (channels, default_size, default_size)
    return (default_size, default_size, channels)


def obtain_input_shape(
    input_shape, default_size, min_size, data_format, require_flatten, weights=None
) -> tuple:
    """The model's input shape (without batch): `input_shape` checked, or the default.

    Raises:
      ValueError: a shape other than the default with ImageNet's top, not 3 dimensions,
        not 3 channels with ImageNet weights, smaller than `min_size`, or unknown sizes
        with a top.
    """
    default_shape = _default_shape(input_shape, default_size, data_format, weights)
    if weights == "imagenet" and require_flatten:
        if input_shape is not None and input_shape != default_shape:
            raise ValueError(
                "When setting `include_top=True` and loading `imagenet` weights, "
                f"`input_shape` should be {default_shape}.  Received: input_shape={input_shape}"
            )
        return default_shape
    if input_shape:
        if len(input_shape) != 3:
            raise ValueError("`input_shape` must be a tuple of three integers.")
        first = data_format == "channels_first"
        channels = input_shape[0] if first else input_shape[-1]
        if channels != 3 and weights == "imagenet":
            raise ValueError(
                f"The input must have 3 channels; Received `input_shape={input_shape}`"
            )
        sizes = input_shape[1:] if first else input_shape[:2]
        if any(s is not None and s < min_size for s in sizes):
            raise ValueError(
                f"Input size must be at least {min_size}x{min_size}; Received: "
                f"input_shape={input_shape}"
            )
    elif require_flatten:
        input_shape = default_shape
    else:
        input_shape = (3, None, None) if data_format == "channels_first" else (None, None, 3)
    if require_flatten and None in input_shape:
        raise ValueError(
            "If `include_top` is True, you should specify a static `input_shape`. "
            f"Received: input_shape={input_shape}"
        )
    return input_shape


def image_input(input_tensor, input_shape):
    """The model's image input: a new Input, or `input_tensor` (wrapped in one when no
    Keras layer made it)."""
    if input_tensor is None:
        return Input(shape=input_shape)
    if not backend.is_keras_tensor(input_tensor):
        return Input(tensor=input_tensor, shape=input_shape)
    return input_tensor


def model_inputs(input_tensor, img_input):
    return img_input if input_tensor is None else get_source_inputs(input_tensor)


def correct_pad(inputs, kernel_size) -> tuple:
    """((top, bottom), (left, right)) zero padding that makes a stride-2 'valid'
    convolution see the same windows as TF's 'same' one would on even sizes."""
    first = backend.image_data_format() == "channels_first"
    rows, cols = backend.int_shape(inputs)[2:4] if first else backend.int_shape(inputs)[1:3]
    if isinstance(kernel_size, int):
        kernel_size = (kernel_size, kernel_size)
    adjust = (1, 1) if rows is None else (1 - rows % 2, 1 - cols % 2)
    half = (kernel_size[0] // 2, kernel_size[1] // 2)
    return ((half[0] - adjust[0], half[0]), (half[1] - adjust[1], half[1]))


def validate_activation(classifier_activation, weights) -> None:
    """Pretrained classifiers end in softmax or nothing.

    Raises:
      ValueError: another activation with pretrained weights.
    """
    if weights is None:
        return
    fn = activations.get(classifier_activation)
    if fn not in {activations.get("softmax"), activations.get(None)}:
        raise ValueError(
            "Only `None` and `softmax` activations are allowed for the "
            "`classifier_activation` argument when using pretrained weights, with "
            f"`include_top=True`; Received: classifier_activation={fn}"
        )


def load_weights(model, file_name, base_url, file_hash) -> None:
    """Fetch `base_url + file_name` into Keras' cache (~/.keras/models), checked
    against `file_hash`, and load it into `model` by layer order."""
    path = get_file(file_name, base_url + file_name, cache_subdir="models", file_hash=file_hash)
    model.load_weights(path)


def decode_predictions(preds, top=5) -> list:
    """The `top` ImageNet classes of each row of `preds`: (class id, name, score),
    best first.

    Raises:
      ValueError: `preds` not of shape (samples, 1000).
    """
    global _CLASS_INDEX
    if len(preds.shape) != 2 or preds.shape[1] != 1000:
        raise ValueError(
            "`decode_predictions` expects a batch of predictions (i.e. a 2D array of shape "
            f"(samples, 1000)). Found array with shape: {preds.shape}"
        )
    if _CLASS_INDEX is None:
        path = get_file(
            "imagenet_class_index.json",
            CLASS_INDEX_PATH,
            cache_subdir="models",
            file_hash="c2c37ea517e94d9795004a39431a14cb",
        )
        with open(path) as f:
            _CLASS_INDEX = json.load(f)
    results = []
    for pred in preds:
        best = pred.argsort()[-top:][::-1]
        rows = [tuple(_CLASS_INDEX[str(i)]) + (pred[i],) for i in best]
        rows.sort(key=lambda row: row[2], reverse=True)
        results.append(rows)
    return results


class TensorFlowOpLayer(Layer):
    """Tensor arithmetic on Keras tensors made into a layer, as TF1's Keras does."""

    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self._fn = fn

    def call(self, inputs):
        return self._fn(inputs)


def op_layer(op_name: str, fn, inputs):
    """`fn(inputs)` as a layer named after the op TF would have made (`op_name`)."""
    unique = ops.get_default_graph().unique_name(op_name)
    return TensorFlowOpLayer(fn, name="tf_op_layer_" + unique)(inputs)
