"""More TF1 top-level math built from existing ops (so they differentiate through
them): lbeta, is_non_decreasing, is_strictly_increasing, accumulate_n,
histogram_fixed_width_bins, sort, argsort, repeat.

sort/argsort are TF's: top_k over the last axis (the axis moved there and back), of
the values for DESCENDING and of their negation (bitwise complement for integers) for
ASCENDING, so equal values keep their order.  repeat gathers with indices found by
searchsorted over the cumulative repeats, so repeats may be a tensor.
"""

from __future__ import annotations

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    gradient_ops,
    linalg_ops,
    math_ops,
    nn_impl,
    reduction_ops,
    special_math_ops,
)

__all__ = [
    "lbeta",
    "is_non_decreasing",
    "is_strictly_increasing",
    "accumulate_n",
    "histogram_fixed_width_bins",
    "sort",
    "argsort",
    "repeat",
]


def _t(x, name="x", dtype=None):
    return ops.convert_to_tensor(x, name=name, dtype=dtype)


def lbeta(x, name=None):
    """log B(x) over the last axis: sum(lgamma(x)) - lgamma(sum(x))."""
    with ops.name_scope(name, "lbeta", [x]):
        x = _t(x)
        log_prod = reduction_ops.reduce_sum(special_math_ops.lgamma(x), [-1])
        return log_prod - special_math_ops.lgamma(reduction_ops.reduce_sum(x, [-1]))


def _diffs(x):
    flat = array_ops.reshape(x, [-1])
    return flat[1:] - flat[:-1]


def _monotonic(x, strict: bool, name, default_name):
    with ops.name_scope(name, default_name, [x]):
        x = _t(x)
        if not (x.dtype.is_floating or x.dtype.is_integer or x.dtype.is_complex):
            raise TypeError(f"Expected x to be numeric, found {x.dtype}")
        d = _diffs(x)
        zero = array_ops.zeros_like(d)
        cmp = math_ops.less(zero, d) if strict else math_ops.less_equal(zero, d)
        return reduction_ops.reduce_all(cmp)


def is_non_decreasing(x, name=None):
    """True when x (flattened) never decreases; True for fewer than 2 elements.

    Raises:
      TypeError: x is not numeric.
    """
    return _monotonic(x, False, name, "is_non_decreasing")


def is_strictly_increasing(x, name=None):
    """True when x (flattened) always increases; True for fewer than 2 elements.

    Raises:
      TypeError: x is not numeric.
    """
    return _monotonic(x, True, name, "is_strictly_increasing")


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """The element-wise sum of `inputs` (TF1's accumulate_n: add_n after its checks).

    Raises:
      ValueError: inputs empty or not all tensors, or their shapes/dtypes differ, or
        `shape` / `tensor_dtype` contradict them.
    """
    if not inputs or not isinstance(inputs, list | tuple):
        raise ValueError(
            "inputs must be a list of at least one Tensor with the same dtype and shape"
        )
    inputs = [_t(v, f"input_{i}") for i, v in enumerate(inputs)]
    if len({v.dtype.base_dtype for v in inputs}) != 1:
        raise ValueError(
            "inputs must be a list of at least one Tensor with the same dtype and shape"
        )
    shape = tensor_shape.as_shape(shape) if shape is not None else None
    merged = inputs[0].shape
    for v in inputs[1:]:
        if not merged.is_compatible_with(v.shape):
            raise ValueError(
                "inputs must be a list of at least one Tensor with the same dtype and shape"
            )
        merged = merged.merge_with(v.shape)
    if shape is not None and not shape.is_compatible_with(merged):
        raise ValueError(f"Shape {shape} is incompatible with the inputs' shape {merged}")
    if tensor_dtype is not None and dtypes.as_dtype(tensor_dtype) != inputs[0].dtype.base_dtype:
        raise ValueError(f"tensor_dtype {tensor_dtype} does not match the inputs' dtype")
    if len(inputs) == 1 and name is None:
        return inputs[0]
    return math_ops.add_n(inputs, name=name)


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """The bin index (0..nbins-1, edges clamped) of each of `values` over value_range."""
    with ops.name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        values = _t(values, "values")
        shape = array_ops.shape(values)
        flat = array_ops.reshape(values, [-1])
        rng = _t(value_range, "value_range", flat.dtype)
        nb = cast_ops.cast(_t(nbins, "nbins", dtypes.int32), flat.dtype)
        scaled = math_ops.truediv(flat - rng[0], rng[1] - rng[0], name="scaled_values")
        idx = math_ops.floor(nb * scaled, name="indices")
        idx = math_ops.minimum(math_ops.maximum(idx, array_ops.zeros_like(idx)), nb - 1)
        return array_ops.reshape(cast_ops.cast(idx, dtype), shape)


def _sort_keys(values, direction):
    if direction == "DESCENDING":
        return values
    if values.dtype.is_integer:
        return (
            -values - 1
            if not values.dtype.is_unsigned
            else math_ops.subtract(values.dtype.max, values)
        )
    return -values


def _along_last(values, axis, fn):
    """fn(values with `axis` moved last), with the result's last axis moved back."""
    rank = values.shape.ndims
    if rank is None:
        raise ValueError("sort and argsort need a tensor of known rank")
    if rank == 0:
        raise ValueError("sort and argsort need a tensor of rank 1 or more")
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of bounds for a tensor of rank {rank}")
    axis %= rank
    if axis == rank - 1:
        return fn(values)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return array_ops.transpose(fn(array_ops.transpose(values, perm)), perm)


def _check_direction(direction):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(
            "Argument `direction` should be one of ASCENDING, DESCENDING. "
            f"Received: direction={direction}"
        )


@_dispatch.add_dispatch_support
def sort(values, axis=-1, direction="ASCENDING", name=None):
    """`values` sorted along `axis` (differentiable through TopKV2).

    Raises:
      ValueError: an unknown direction, or an axis outside the rank.
    """
    _check_direction(direction)
    with ops.name_scope(name, "sort", [values]):
        values = _t(values, "values")

        def fn(v):
            n = array_ops.shape(v)[-1]
            top, _ = nn_impl.top_k(_sort_keys(v, direction), n)
            return _sort_keys(top, direction) if direction == "ASCENDING" else top

        return _along_last(values, axis, fn)


@_dispatch.add_dispatch_support
def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """int32 indices that sort `values` along `axis` (equal values keep their order).

    Raises:
      ValueError: an unknown direction, or an axis outside the rank.
    """
    del stable  # top_k keeps equal keys in index order: always stable
    _check_direction(direction)
    with ops.name_scope(name, "argsort", [values]):
        values = _t(values, "values")

        def fn(v):
            _, idx = nn_impl.top_k(_sort_keys(v, direction), array_ops.shape(v)[-1])
            return idx

        return _along_last(values, axis, fn)


def repeat(input, repeats, axis=None, name=None):  # noqa: A002 - TF's name
    """Each element of `input` along `axis` (flattened when None) repeated `repeats`
    times (a scalar, or one count per element).

    Raises:
      InvalidArgumentError: (when run) repeats of the wrong length.
    """
    with ops.name_scope(name, "Repeat", [input, repeats]):
        data = _t(input, "input")
        if axis is None:
            data, axis = array_ops.reshape(data, [-1]), 0
        reps = _t(repeats, "repeats", dtypes.int32)
        n = array_ops.shape(data)[axis]
        reps = reps * array_ops.ones([n], dtypes.int32) if reps.shape.ndims == 0 else reps
        ends = gradient_ops.cumsum(reps)
        positions = reduction_ops.range(0, reduction_ops.reduce_sum(reps), dtype=dtypes.int32)
        idx = linalg_ops.searchsorted(ends, positions, side="right")
        return array_ops.gather(data, idx, axis=axis)
