"""`af.sets`: TF1's `tf.sets` (set_intersection, set_union, set_difference, set_size and
their short names), over the set ops of ops/set_ops.py.

A set is the last dimension of a dense Tensor or of a SparseTensor; results are
SparseTensors.  As TF, a (SparseTensor, Tensor) pair is flipped to (Tensor,
SparseTensor), `a - b` becoming `b - a`, since the ops take a dense first input only.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = [
    "difference",
    "intersection",
    "set_difference",
    "set_intersection",
    "set_size",
    "set_union",
    "size",
    "union",
]

_VALID_DTYPES = frozenset(
    dtypes.as_dtype(d) for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "string")
)


def _convert(x, name):
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if isinstance(x, SparseTensor):
        return x
    return ops.convert_to_tensor(x, name=name)


def _convert_pair(a, b):
    a = _convert(a, "a")
    if a.dtype.base_dtype not in _VALID_DTYPES:
        raise TypeError(
            f"'a' has invalid dtype `{a.dtype}` not in supported dtypes: "
            f"`{sorted(d.name for d in _VALID_DTYPES)}`."
        )
    b = _convert(b, "b")
    if b.dtype.base_dtype != a.dtype.base_dtype:
        raise TypeError(f"Types don't match, {a.dtype} vs {b.dtype}.")
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        return b, a, True
    return a, b, False


def _set_operation(a, b, operation, validate_indices):
    attrs = {"set_operation": operation, "validate_indices": bool(validate_indices)}
    if isinstance(a, SparseTensor):
        out = ops.apply_op(
            "SparseToSparseSetOperation",
            [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape],
            attrs,
        ).outputs
    elif isinstance(b, SparseTensor):
        out = ops.apply_op(
            "DenseToSparseSetOperation", [a, b.indices, b.values, b.dense_shape], attrs
        ).outputs
    else:
        out = ops.apply_op("DenseToDenseSetOperation", [a, b], attrs).outputs
    return SparseTensor(*out)


def set_intersection(a, b, validate_indices=True):
    """The intersection of the sets in the last dimension of `a` and `b` (a SparseTensor).

    Raises:
      TypeError: for a dtype sets cannot hold, or `a` and `b` of different dtypes.
      InvalidArgumentError: at run time, for group dimensions that differ, or (with
        validate_indices) sparse indices out of bounds, order or repeated.
    """
    a, b, _ = _convert_pair(a, b)
    return _set_operation(a, b, "intersection", validate_indices)


def set_union(a, b, validate_indices=True):
    """The union of the sets in the last dimension of `a` and `b` (see set_intersection)."""
    a, b, _ = _convert_pair(a, b)
    return _set_operation(a, b, "union", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True):
    """`a - b` (or `b - a`) of the sets in the last dimension (see set_intersection)."""
    a, b, flipped = _convert_pair(a, b)
    if flipped:
        aminusb = not aminusb
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)


def set_size(a, validate_indices=True):
    """The number of unique elements of each set of SparseTensor `a` (int32).

    Raises:
      TypeError: `a` is not a SparseTensor, or of a dtype sets cannot hold.
    """
    a = _convert(a, "a")
    if not isinstance(a, SparseTensor):
        raise TypeError(f"Expected `SparseTensor`, got {a}.")
    if a.values.dtype.base_dtype not in _VALID_DTYPES:
        raise TypeError(f"Invalid dtype `{a.values.dtype}`.")
    return ops.apply_op(
        "SetSize", [a.indices, a.values, a.dense_shape],
        {"validate_indices": bool(validate_indices)},
    ).outputs[0]  # fmt: skip


intersection = set_intersection
union = set_union
difference = set_difference
size = set_size
