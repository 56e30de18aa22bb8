"""`tf.keras.constraints`: projections applied to a weight after each optimizer update
(MaxNorm, NonNeg, UnitNorm, MinMaxNorm), and `get` by name."""

from __future__ import annotations

from asyncflow.keras import backend_math as K
from asyncflow.keras.backend_config import epsilon, floatx
from asyncflow.keras.serialization import deserialize_keras_object, serialize_keras_object

__all__ = [
    "Constraint",
    "MaxNorm",
    "NonNeg",
    "UnitNorm",
    "MinMaxNorm",
    "max_norm",
    "non_neg",
    "unit_norm",
    "min_max_norm",
    "get",
    "serialize",
    "deserialize",
]


class Constraint:
    """Base class: the identity."""

    def __call__(self, w):
        return w

    def get_config(self) -> dict:
        return {}


class MaxNorm(Constraint):
    """Rescales each slice along `axis` whose L2 norm exceeds `max_value`."""

    def __init__(self, max_value=2, axis=0):
        self.max_value, self.axis = max_value, axis

    def __call__(self, w):
        norms = K.sqrt(K.sum(K.square(w), axis=self.axis, keepdims=True))
        desired = K.clip(norms, 0, self.max_value)
        return w * (desired / (epsilon() + norms))

    def get_config(self) -> dict:
        return {"max_value": self.max_value, "axis": self.axis}


class NonNeg(Constraint):
    """Zeroes negative weights."""

    def __call__(self, w):
        return w * K.cast(K.greater_equal(w, 0.0), floatx())


class UnitNorm(Constraint):
    """Scales each slice along `axis` to unit L2 norm."""

    def __init__(self, axis=0):
        self.axis = axis

    def __call__(self, w):
        return w / (epsilon() + K.sqrt(K.sum(K.square(w), axis=self.axis, keepdims=True)))

    def get_config(self) -> dict:
        return {"axis": self.axis}


class MinMaxNorm(Constraint):
    """Moves each slice's L2 norm into [min_value, max_value] at speed `rate`."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value, self.max_value, self.rate, self.axis = min_value, max_value, rate, axis

    def __call__(self, w):
        norms = K.sqrt(K.sum(K.square(w), axis=self.axis, keepdims=True))
        desired = (
            self.rate * K.clip(norms, self.min_value, self.max_value) + (1 - self.rate) * norms
        )
        return w * (desired / (epsilon() + norms))

    def get_config(self) -> dict:
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate,
                "axis": self.axis}  # fmt: skip


max_norm = MaxNorm
non_neg = NonNeg
unit_norm = UnitNorm
min_max_norm = MinMaxNorm
_BY_NAME = {"max_norm": MaxNorm, "maxnorm": MaxNorm, "non_neg": NonNeg, "nonneg": NonNeg,
            "unit_norm": UnitNorm, "unitnorm": UnitNorm, "min_max_norm": MinMaxNorm,
            "minmaxnorm": MinMaxNorm}  # fmt: skip


def get(identifier):
    """A constraint from a name or a callable (None stays None).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if identifier is None or (callable(identifier) and not isinstance(identifier, str)):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier.lower() not in _BY_NAME:
            return deserialize(identifier)
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"Could not interpret constraint identifier: {identifier}")


_CLASSES = {c.__name__: c for c in (Constraint, MaxNorm, NonNeg, UnitNorm, MinMaxNorm)}
_CLASSES.update(_BY_NAME)


def serialize(constraint):
    """`{"class_name": ..., "config": ...}` of a constraint."""
    return serialize_keras_object(constraint)


def deserialize(config, custom_objects=None):
    """The constraint a serialized config (or name) describes.

    Raises:
      ValueError: an unknown class name.
    """
    return deserialize_keras_object(config, _CLASSES, custom_objects, "constraint")
