"""`tf.keras.constraints`: projections applied to a weight after each optimizer update
(MaxNorm, NonNeg, UnitNorm, MinMaxNorm, RadialConstraint), and `get` by name."""

from __future__ import annotations

import numpy as np

from asyncflow.keras import backend_math as K
from asyncflow.keras.backend_config import epsilon, floatx
from asyncflow.keras.serialization import deserialize_keras_object, serialize_keras_object

__all__ = [
    "Constraint",
    "MaxNorm",
    "NonNeg",
    "UnitNorm",
    "MinMaxNorm",
    "RadialConstraint",
    "max_norm",
    "non_neg",
    "unit_norm",
    "min_max_norm",
    "radial_constraint",
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


class RadialConstraint(Constraint):
    """Makes each [rows, cols] kernel of a (rows, cols, in, out) Conv2D weight constant on
    square rings around its centre.

    The values are the ones TF 2.21 produces (which differ from its docstring): with
    s = rows // 2, the centre (one cell, or the 2x2 block of an even kernel) takes
    k[s-1, s-1]; ring r >= 1 takes k[s-1+r, s-1+r] (odd rows) or k[s+r, s+r] (even).

    Raises:
      ValueError: a weight whose rank is not 4.
    """

    def __call__(self, w):
        shape = w.shape
        if shape.rank is None or shape.rank != 4:
            raise ValueError(
                f"The weight tensor must have rank 4. Received weight tensor with shape: {shape}"
            )
        rows, cols, channels, kernels = shape.as_list()
        source = _radial_sources(rows)
        flat = K.reshape(w, [rows * cols, channels * kernels])
        picked = K.gather(flat, source.ravel())
        return K.reshape(picked, [rows, cols, channels, kernels])


def _radial_sources(n: int) -> np.ndarray:
    """For each cell of an n x n kernel, the flat index (in the kernel) of its value."""
    s = n // 2
    i = np.arange(n)
    if n % 2:
        ring_of = np.abs(i - s)
        diagonal = s - 1 + np.arange(s + 1)
    else:
        # The centre is the 2x2 block s-1, s: both are ring 0.
        ring_of = np.where(i < s, s - 1 - i, i - s)
        diagonal = np.concatenate([[s - 1], s + np.arange(1, s)])
    ring = np.maximum(ring_of[:, None], ring_of[None, :])
    return (diagonal * n + diagonal)[ring]


max_norm = MaxNorm
non_neg = NonNeg
unit_norm = UnitNorm
min_max_norm = MinMaxNorm
radial_constraint = RadialConstraint
_BY_NAME = {"max_norm": MaxNorm, "maxnorm": MaxNorm, "non_neg": NonNeg, "nonneg": NonNeg,
            "unit_norm": UnitNorm, "unitnorm": UnitNorm, "min_max_norm": MinMaxNorm,
            "minmaxnorm": MinMaxNorm, "radial_constraint": RadialConstraint}  # fmt: skip


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


_CLASSES = {
    c.__name__: c for c in (Constraint, MaxNorm, NonNeg, UnitNorm, MinMaxNorm, RadialConstraint)
}
_CLASSES.update(_BY_NAME)


def serialize(constraint, use_legacy_format=False):
    """`{"class_name": ..., "config": ...}` of a constraint."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(constraint)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The constraint a serialized config (or name) describes.

    Raises:
      ValueError: an unknown class name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(config, _CLASSES, custom_objects, "constraint")
