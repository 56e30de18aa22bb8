"""KL divergence between distributions: a registry keyed by the pair of classes.

`kl_divergence(a, b)` uses the registered function whose pair of classes is nearest to
`(type(a), type(b))` along their MROs (sum of the two distances), as TF chooses.
"""

from __future__ import annotations

import inspect

from asyncflow.distributions import _ops as ops
from asyncflow.graph import control_dependencies, name_scope

__all__ = ["RegisterKL", "cross_entropy", "kl_divergence"]

_DIVERGENCES: dict = {}


def _registered_kl(type_a, type_b):
    kl_fn = None
    best = None
    for to_a, parent_a in enumerate(inspect.getmro(type_a)):
        for to_b, parent_b in enumerate(inspect.getmro(type_b)):
            candidate = _DIVERGENCES.get((parent_a, parent_b))
            if candidate is not None and (kl_fn is None or to_a + to_b < best):
                best = to_a + to_b
                kl_fn = candidate
    return kl_fn


def kl_divergence(distribution_a, distribution_b, allow_nan_stats=True, name=None):
    """KL(distribution_a || distribution_b), batchwise.

    Raises:
      NotImplementedError: if no KL is registered for the two classes (or their parents).
      InvalidArgumentError: at run time, with `allow_nan_stats=False`, if a value is NaN.
    """
    kl_fn = _registered_kl(type(distribution_a), type(distribution_b))
    if kl_fn is None:
        raise NotImplementedError(
            "No KL(distribution_a || distribution_b) registered for distribution_a "
            f"type {type(distribution_a).__name__} and distribution_b "
            f"type {type(distribution_b).__name__}"
        )
    with name_scope("KullbackLeibler"):
        kl_t = kl_fn(distribution_a, distribution_b, name=name)
        if allow_nan_stats:
            return kl_t
        kl_t = ops.identity(kl_t, name="kl")
        check = ops.Assert(
            ops.logical_not(ops.reduce_any(ops.is_nan(kl_t))),
            [
                f"KL calculation between {distribution_a.name} and {distribution_b.name} "
                "returned NaN values (and was called with allow_nan_stats=False). Values:",
                kl_t,
            ],
        )
        with control_dependencies([check]):
            return ops.identity(kl_t, name="checked_kl")


def cross_entropy(ref, other, allow_nan_stats=True, name=None):
    """H[ref, other] = entropy(ref) + KL(ref || other)."""
    with name_scope(name, "cross_entropy"):
        return ref.entropy() + kl_divergence(ref, other, allow_nan_stats=allow_nan_stats)


class RegisterKL:
    """Decorator registering `kl_fn(a, b, name=None)` for a pair of distribution classes.

    Raises:
      TypeError: if the decorated object is not callable.
      ValueError: if the pair is already registered.
    """

    def __init__(self, dist_cls_a, dist_cls_b):
        self._key = (dist_cls_a, dist_cls_b)

    def __call__(self, kl_fn):
        if not callable(kl_fn):
            raise TypeError(f"kl_fn must be callable, received: {kl_fn}")
        if self._key in _DIVERGENCES:
            a, b = self._key
            raise ValueError(
                f"KL({a.__name__} || {b.__name__}) has already been registered to: "
                f"{_DIVERGENCES[self._key]}"
            )
        _DIVERGENCES[self._key] = kl_fn
        return kl_fn
