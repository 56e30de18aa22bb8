"""`tf.keras.regularizers`: asyncflow's Keras-style regularizers (L1, L2, L1L2, l1, l2,
l1_l2) plus `get` by name ('l1', 'l2', 'l1_l2' with Keras' default factor 0.01)."""

from __future__ import annotations

from asyncflow.keras.serialization import (
    deserialize_keras_object,
    get_custom_objects,
    serialize_keras_object,
)
from asyncflow.keras.utils import unknown_object
from asyncflow.regularizers import L1, L1L2, L2, Regularizer, l1, l1_l2, l2

__all__ = [
    "Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize",
]  # fmt: skip

_BY_NAME = {"l1": L1, "l2": L2, "l1_l2": L1L2, "l1l2": L1L2}
_CLASSES = {"L1": L1, "L2": L2, "L1L2": L1L2, **_BY_NAME}


def get(identifier):
    """A regularizer from a name or a callable (None stays None).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if identifier is None or (callable(identifier) and not isinstance(identifier, str)):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str) and identifier in get_custom_objects():
        return deserialize(identifier)
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        cls = _BY_NAME[identifier.lower()]
        return cls(l1=0.01, l2=0.01) if cls is L1L2 else cls()
    if isinstance(identifier, str):
        raise unknown_object("regularizer", identifier)
    raise ValueError(f"Could not interpret regularizer identifier: {identifier}")


def serialize(regularizer, use_legacy_format=False):
    """`{"class_name": ..., "config": ...}` of a regularizer."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(regularizer)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The regularizer a serialized config (or name) describes.

    Raises:
      ValueError: an unknown class name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(config, _CLASSES, custom_objects, "regularizer")
