"""What the newer `tf.keras.applications` families share: argument checks, input-shape
resolution, stride-2 padding, the ImageNet weights download, `decode_predictions`, and
the op layers TF1's Keras wraps around plain tensor arithmetic on Keras tensors.

The input-shape, padding, activation and decoding helpers are `imagenet_utils`' own,
re-exported here for the families' modules.

An op layer is named `tf_op_layer_<op name>`, the op name made unique in the graph's
top-level scope, because that is the name TF1-mode Keras gives the layer it wraps around
`x + 3.0` (and it shows in `model.layers` and in saved weight files' layer lists).
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.keras.applications import _common
from asyncflow.keras.applications._common import image_input
from asyncflow.keras.applications.imagenet_utils import (
    correct_pad,
    decode_predictions,
    obtain_input_shape,
    validate_activation,
)
from asyncflow.keras.data_utils import get_file
from asyncflow.keras.engine import Layer
from asyncflow.keras.utils_more import get_source_inputs

__all__ = [
    "check_weights",
    "image_input",
    "correct_pad",
    "decode_predictions",
    "load_weights",
    "obtain_input_shape",
    "op_layer",
    "validate_activation",
]


def check_weights(weights, include_top, classes, quote='"imagenet"') -> None:
    """`_common.check_weights` with the families' own quoting of 'imagenet'.

    Raises:
      ValueError: another `weights` value, or `classes` other than 1000 with
        ImageNet's top.
    """
    _common.check_weights(
        weights,
        include_top,
        classes,
        classes_error=(
            f"If using `weights` as `{quote}` with `include_top` as true, `classes` should be 1000"
        ),
    )


def model_inputs(input_tensor, img_input):
    return img_input if input_tensor is None else get_source_inputs(input_tensor)


def load_weights(model, file_name, base_url, file_hash) -> None:
    """Fetch `base_url + file_name` into Keras' cache (~/.keras/models), checked
    against `file_hash`, and load it into `model` by layer order."""
    path = get_file(file_name, base_url + file_name, cache_subdir="models", file_hash=file_hash)
    model.load_weights(path)


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
