"""Keras' global settings (floatx, epsilon, image data format) and the record of which
Keras layer call made each graph tensor (its "Keras history")."""

from __future__ import annotations

import weakref

from asyncflow import graph as ops
from asyncflow import variables as _variables

__all__ = [
    "floatx",
    "set_floatx",
    "epsilon",
    "set_epsilon",
    "image_data_format",
    "set_image_data_format",
    "is_keras_tensor",
]

_CONFIG = {"floatx": "float32", "epsilon": 1e-7, "image_data_format": "channels_last"}
# tensor -> (layer, node index, tensor index): which Keras layer call made the tensor
HISTORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def floatx() -> str:
    return _CONFIG["floatx"]


def set_floatx(value: str) -> None:
    """Raises: ValueError for a dtype name other than float16/32/64."""
    if value not in ("float16", "float32", "float64"):
        raise ValueError(
            f"Unknown `floatx` value: {value}. Expected one of {{'float16', 'float32', 'float64'}}"
        )
    _CONFIG["floatx"] = str(value)


def epsilon() -> float:
    return _CONFIG["epsilon"]


def set_epsilon(value: float) -> None:
    _CONFIG["epsilon"] = value


def image_data_format() -> str:
    return _CONFIG["image_data_format"]


def set_image_data_format(data_format: str) -> None:
    """Raises: ValueError for a format other than channels_last/channels_first."""
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"Unknown data_format: {data_format}")
    _CONFIG["image_data_format"] = str(data_format)


def keras_history(tensor):
    """(layer, node index, tensor index) of the Keras layer call that made `tensor`, or
    None."""
    try:
        return HISTORY.get(tensor)
    except TypeError:
        return None


def is_keras_tensor(x) -> bool:
    """Whether a Keras layer made `x`.

    Raises:
      ValueError: `x` is not a tensor or variable.
    """
    if not (isinstance(x, (ops.Tensor, _variables.Variable)) or ops.is_tensor(x)):
        raise ValueError(
            "Unexpectedly found an instance of type `" + str(type(x)) + "`. "
            "Expected a symbolic tensor instance."
        )
    return keras_history(x) is not None
