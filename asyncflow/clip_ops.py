"""Clipping by value and by norm (TF1's clip_ops), for gradients before `apply_gradients`.

Built from existing ops with TF's formulas; IndexedSlices (sparse gradients) are
clipped on their values and keep their indices.  A global norm that is inf or NaN
makes every clipped value NaN, as in TF, so a diverged step is visible.
"""

from __future__ import annotations

from collections.abc import Sequence

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, ragged_functions
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, math_ops, reduction_ops, slicing_ops
from asyncflow.ops.control_flow_ordering import _take_scope_name

__all__ = [
    "clip_by_value",
    "clip_by_norm",
    "global_norm",
    "clip_by_global_norm",
    "clip_by_average_norm",
]


def _values(t, name: str):
    return ops.convert_to_tensor(t.values if isinstance(t, IndexedSlices) else t, name=name)


def _rewrap(t, clipped):
    if isinstance(t, IndexedSlices):
        return IndexedSlices(clipped, t.indices, t.dense_shape)
    return clipped


@ragged_functions.dispatch_unary
def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """min(max(t, clip_value_min), clip_value_max), element-wise.

    Raises:
      ValueError: the bounds would broadcast `t` to a larger shape.
    """
    with ops.name_scope(name, "clip_by_value") as scope:
        values = _values(t, "t")
        t_min = math_ops.minimum(values, clip_value_max)
        if not values.shape.is_compatible_with(t_min.shape):
            raise ValueError(f"Shapes {values.shape} and {t_min.shape} are incompatible")
        t_max = math_ops.maximum(t_min, clip_value_min, name=scope)
        if not values.shape.is_compatible_with(t_max.shape):
            raise ValueError(f"Shapes {values.shape} and {t_max.shape} are incompatible")
        return _rewrap(t, t_max)


@_dispatch.add_dispatch_support
def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(l2norm(t, axes), clip_norm): rescaled when its L2 norm is larger."""
    with ops.name_scope(name, "clip_by_norm") as scope:
        values = _values(t, "t")
        l2sum = reduction_ops.reduce_sum(values * values, axes, keepdims=True)
        pred = math_ops.greater(l2sum, 0)
        l2sum_safe = slicing_ops.where(pred, l2sum, array_ops.ones_like(l2sum))
        l2norm = slicing_ops.where(pred, math_ops.sqrt(l2sum_safe), l2sum)
        intermediate = values * clip_norm
        clipped = array_ops.identity(intermediate / math_ops.maximum(l2norm, clip_norm))
        _take_scope_name(clipped.op, scope)  # TF's name=scope: the op is "clip_by_norm"
        return _rewrap(t, clipped)


def _check_sequence(t_list) -> None:
    if not isinstance(t_list, Sequence) or isinstance(t_list, (str, bytes)):
        raise TypeError("t_list should be a sequence")


def global_norm(t_list, name=None):
    """sqrt(sum of squares of every element of every tensor); None entries are ignored.

    Raises:
      TypeError: `t_list` is not a sequence.
    """
    _check_sequence(t_list)
    t_list = list(t_list)
    with ops.name_scope(name, "global_norm"):
        values = [_values(t, f"t_{i}") if t is not None else None for i, t in enumerate(t_list)]
        squares = [reduction_ops.reduce_sum(math_ops.square(v)) for v in values if v is not None]
        if not squares:
            return ops.convert_to_tensor(0.0, name="global_norm")
        total = reduction_ops.reduce_sum(array_ops.stack(squares))
        return math_ops.sqrt(total, name="global_norm")


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scale every tensor by clip_norm / max(global_norm, clip_norm); returns (list, norm).

    Raises:
      TypeError: `t_list` is not a sequence.
    """
    _check_sequence(t_list)
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    with ops.name_scope(name, "clip_by_global_norm") as scope:
        one = ops.convert_to_tensor(1.0, dtype=use_norm.dtype)
        scale_for_finite = clip_norm * math_ops.minimum(1.0 / use_norm, one / clip_norm)
        scale = scale_for_finite + (use_norm - use_norm)  # NaN when the norm is inf/NaN
        clipped = []
        for i, t in enumerate(t_list):
            if t is None:
                clipped.append(None)
                continue
            v = _values(t, f"t_{i}")
            with ops.colocate_with(v.op):
                c = array_ops.identity(
                    v * math_ops.cast(scale, v.dtype),
                    name=f"{scope}_{i}",  # TF's ".../_0"
                )
            clipped.append(_rewrap(t, c))
    return clipped, use_norm


def clip_by_average_norm(t, clip_norm, name=None):
    """t * clip_norm / max(l2norm(t) / size(t), clip_norm) (TF1, deprecated there)."""
    with ops.name_scope(name, "clip_by_average_norm") as scope:
        t = ops.convert_to_tensor(t, name="t")
        n_element = math_ops.cast(array_ops.size(t), dtypes.float32)
        l2norm_inv = math_ops.rsqrt(reduction_ops.reduce_sum(t * t))
        one = ops.convert_to_tensor(1.0, dtype=t.dtype)
        clipped = array_ops.identity(
            t * clip_norm * math_ops.minimum(l2norm_inv * n_element, one / clip_norm)
        )
        _take_scope_name(clipped.op, scope)
        return clipped
