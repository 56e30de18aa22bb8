"""Weight regularizers: `tf.contrib.layers`-style factories (l1_regularizer,
l2_regularizer, l1_l2_regularizer, sum_regularizer, apply_regularization) and Keras-style
callables (`l1`, `l2`, `l1_l2`, classes L1, L2, L1L2).

A regularizer is `fn(weights) -> scalar Tensor | None`; pass it as `regularizer=` to
`get_variable` or as `kernel_regularizer=` to a layer, and the loss lands in
GraphKeys.REGULARIZATION_LOSSES.  Note the two families differ as TF's do:
contrib's l2 is scale * sum(w ** 2) / 2 (`l2_loss`), Keras' l2 is l2 * sum(w ** 2).
"""

from __future__ import annotations

import numbers

import numpy as np

from asyncflow import graph as ops
from asyncflow.graph import GraphKeys
from asyncflow.ops import math_ops, nn_impl, reduction_ops

__all__ = [
    "l1_regularizer",
    "l2_regularizer",
    "l1_l2_regularizer",
    "sum_regularizer",
    "apply_regularization",
    "Regularizer",
    "L1",
    "L2",
    "L1L2",
    "l1",
    "l2",
    "l1_l2",
]


def _check_scale(scale) -> float:
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"scale cannot be an integer: {scale}")
    if not isinstance(scale, numbers.Real):
        raise ValueError(f"scale must be a float, got {scale!r}")
    if scale < 0.0:
        raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale}")
    return float(scale)


def l1_regularizer(scale, scope=None):
    """scale * sum(|w|); a scale of 0 gives a regularizer returning None.

    Raises:
      ValueError: an integer, negative or non-numeric scale.
    """
    scale = _check_scale(scale)
    if scale == 0.0:
        return lambda _: None

    def l1(weights):
        with ops.name_scope(scope, "l1_regularizer", [weights]) as name:
            weights = ops.convert_to_tensor(weights)
            s = ops.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(s, reduction_ops.reduce_sum(math_ops.abs(weights)),
                                     name=name)  # fmt: skip

    return l1


def l2_regularizer(scale, scope=None):
    """scale * sum(w ** 2) / 2 (TF's l2_loss); a scale of 0 gives None.

    Raises:
      ValueError: an integer, negative or non-numeric scale.
    """
    scale = _check_scale(scale)
    if scale == 0.0:
        return lambda _: None

    def l2(weights):
        with ops.name_scope(scope, "l2_regularizer", [weights]) as name:
            weights = ops.convert_to_tensor(weights)
            s = ops.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(s, nn_impl.l2_loss(weights), name=name)

    return l2


def sum_regularizer(regularizer_list, scope=None):
    """The sum of several regularizers (those returning None are skipped)."""
    regularizer_list = [r for r in regularizer_list if r]
    if not regularizer_list:
        return lambda _: None

    def total(weights):
        with ops.name_scope(scope, "sum_regularizer", [weights]) as name:
            losses = [r(weights) for r in regularizer_list]
            losses = [x for x in losses if x is not None]
            return math_ops.add_n(losses, name=name) if losses else None

    return total


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
    """l1_regularizer(scale_l1) + l2_regularizer(scale_l2).

    Raises:
      ValueError: a bad scale.
    """
    if isinstance(scale_l1, numbers.Integral):
        scale_l1 = float(scale_l1)
    if isinstance(scale_l2, numbers.Integral):
        scale_l2 = float(scale_l2)
    return sum_regularizer(
        [l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope or "l1_l2_regularizer"
    )


def apply_regularization(regularizer, weights_list=None):
    """Sum of `regularizer(w)` over `weights_list` (default: GraphKeys.WEIGHTS), added
    to REGULARIZATION_LOSSES.

    Raises:
      ValueError: no weights to regularize.
    """
    if not weights_list:
        weights_list = ops.get_collection(GraphKeys.WEIGHTS)
    if not weights_list:
        raise ValueError("No weights to regularize.")
    with ops.name_scope("get_regularization_penalty", values=weights_list) as scope:
        penalties = [regularizer(w) for w in weights_list]
        penalties = [p for p in penalties if p is not None]
        for p in penalties:
            ops.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, p)
        if not penalties:
            from asyncflow.ops import array_ops

            return array_ops.constant(0.0)
        return math_ops.add_n(penalties, name=scope)


def _f32(value) -> float:
    return float(np.float32(value))


class Regularizer:
    """Keras-style regularizer base: `__call__(x) -> scalar Tensor`."""

    def __call__(self, x):
        return 0.0

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class L1L2(Regularizer):
    """l1 * sum(|x|) + l2 * sum(x ** 2) (Keras' regularizers.L1L2)."""

    def __init__(self, l1=0.0, l2=0.0):  # noqa: E741 - Keras' names
        self.l1 = float(l1)
        self.l2 = float(l2)

    def __call__(self, x):
        x = ops.convert_to_tensor(x)
        total = None
        if self.l1:
            total = self.l1 * reduction_ops.reduce_sum(math_ops.abs(x))
        if self.l2:
            term = self.l2 * reduction_ops.reduce_sum(math_ops.square(x))
            total = term if total is None else total + term
        if total is None:
            return ops.convert_to_tensor(0.0, dtype=x.dtype)
        return total

    def get_config(self):
        # Keras keeps the factors as floatx (float32) values; its configs show them so.
        return {"l1": _f32(self.l1), "l2": _f32(self.l2)}


class L1(L1L2):
    """l1 * sum(|x|); `l` is TF1's name for `l1`."""

    def __init__(self, l1=0.01, **kwargs):
        super().__init__(l1=_penalty(l1, kwargs))

    def get_config(self):
        return {"l1": _f32(self.l1)}


class L2(L1L2):
    """l2 * sum(x ** 2); `l` is TF1's name for `l2`."""

    def __init__(self, l2=0.01, **kwargs):
        super().__init__(l2=_penalty(l2, kwargs))

    def get_config(self):
        return {"l2": _f32(self.l2)}


def _penalty(value, kwargs):
    value = kwargs.pop("l", value)
    if kwargs:
        raise TypeError(f"Argument(s) not recognized: {kwargs}")
    return 0.01 if value is None else value


l1 = L1  # (as Keras': the functions are the classes)
l2 = L2


def l1_l2(l1=0.01, l2=0.01):  # noqa: F811 - Keras' names shadow the functions above
    """Keras' `regularizers.l1_l2(l1, l2)`."""
    return L1L2(l1=l1, l2=l2)
