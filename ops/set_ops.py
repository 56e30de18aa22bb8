"""TF's set operations: DenseToDenseSetOperation, DenseToSparseSetOperation,
SparseToSparseSetOperation and SetSize, behind `tf.sets` (and the `*_at_k` metrics).

A set is the last dimension of its input: a dense row, or the values of a SparseTensor
sharing every index but the last.  An operation's result is a SparseTensor of each
group's set, sorted, its last dimension the largest set.  TF1's losses use the dense
one when they check that weights broadcast to the losses (`weights_broadcast_ops`).

With `validate_indices` (TF's default) a sparse input's indices must be in bounds,
sorted and unique, with TF's messages; the group dimensions of the two inputs must be
equal ("Mismatched shapes").
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_SET_TYPES = TypeConstraint(["int8", "int16", "int32", "int64", "uint8", "uint16", "string"])
_OPERATIONS = ("a-b", "b-a", "intersection", "union")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _dims(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


# -- shape functions ------------------------------------------------------------------


def _rank_of_sparse(shape_tensor) -> int | None:
    s = shape_tensor.shape
    return s.dims[0] if s.ndims == 1 else None


def _result_shapes(rank):
    return [
        tensor_shape.TensorShape([None, rank]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([rank]),
    ]


def _check_ranks(a, b):
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimension must be {a} but is {b}")
    return a if a is not None else b


def _dense_rank(t) -> int | None:
    n = t.shape.ndims
    if n is not None and n < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {n}")
    return n


def _set_operation_shape(op):
    a, b = (t.shape for t in op.inputs)
    rank = _check_ranks(_dense_rank(op.inputs[0]), _dense_rank(op.inputs[1]))
    if a.ndims is not None and b.ndims is not None and a.ndims != b.ndims:
        raise ValueError(f"Shape must be rank {a.ndims} but is rank {b.ndims}")
    return _result_shapes(rank)


def _dense_to_sparse_shape(op):
    rank = _check_ranks(_dense_rank(op.inputs[0]), _rank_of_sparse(op.inputs[3]))
    return _result_shapes(rank)


def _sparse_to_sparse_shape(op):
    rank = _check_ranks(_rank_of_sparse(op.inputs[2]), _rank_of_sparse(op.inputs[5]))
    if rank is not None and rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {rank}")
    return _result_shapes(rank)


_ATTRS = {"set_operation": REQUIRED, "validate_indices": True, "T": _SET_TYPES}
_OUT = ["result_indices: int64", "result_values: T", "result_shape: int64"]
_SPARSE_1 = ["set1_indices: int64", "set1_values: T", "set1_shape: int64"]
_SPARSE_2 = ["set2_indices: int64", "set2_values: T", "set2_shape: int64"]

DenseToDenseSetOperation = register_op(
    "DenseToDenseSetOperation",
    inputs=["set1: T", "set2: T"],
    outputs=_OUT,
    attrs=dict(_ATTRS),
    shape_fn=_set_operation_shape,
)
DenseToSparseSetOperation = register_op(
    "DenseToSparseSetOperation",
    inputs=["set1: T", *_SPARSE_2],
    outputs=_OUT,
    attrs=dict(_ATTRS),
    shape_fn=_dense_to_sparse_shape,
)
SparseToSparseSetOperation = register_op(
    "SparseToSparseSetOperation",
    inputs=[*_SPARSE_1, *_SPARSE_2],
    outputs=_OUT,
    attrs=dict(_ATTRS),
    shape_fn=_sparse_to_sparse_shape,
)
SetSize = register_op(
    "SetSize",
    inputs=["set_indices: int64", "set_values: T", "set_shape: int64"],
    outputs=["size: int32"],
    attrs={"validate_indices": True, "T": _SET_TYPES},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],  # (as TF's: unknown)
)
for _name in (
    "DenseToDenseSetOperation", "DenseToSparseSetOperation", "SparseToSparseSetOperation",
    "SetSize",
):  # fmt: skip
    NotDifferentiable(_name)  # (as TF's sets_impl)


# -- the sets of each group -----------------------------------------------------------


def _dense_groups(a: np.ndarray):
    """(group shape, [set of each group in row-major order])."""
    if a.ndim < 2:
        raise _invalid(f"Invalid rank {a.ndim}: set inputs must have rank >= 2.")
    groups = a.shape[:-1]
    n = math.prod(groups)  # (explicit rows: a -1 cannot stand beside an empty set)
    rows = a.reshape(n, a.shape[-1])
    return groups, [set(r.tolist()) for r in rows]


def _check_sparse(indices, values, shape, validate):
    if indices.ndim != 2 or values.ndim != 1 or shape.ndim != 1:
        raise _invalid(
            f"Invalid sparse tensor: indices {_dims(indices.shape)}, values "
            f"{_dims(values.shape)}, shape {_dims(shape.shape)}"
        )
    if indices.shape[0] != values.shape[0] or indices.shape[1] != shape.shape[0]:
        raise _invalid(
            f"Invalid sparse tensor: {indices.shape[0]} indices of rank {indices.shape[1]}, "
            f"{values.shape[0]} values, shape of rank {shape.shape[0]}"
        )
    if shape.shape[0] < 2:
        raise _invalid(f"Invalid rank {shape.shape[0]}: set inputs must have rank >= 2.")
    if (shape < 0).any() or math.prod(int(d) for d in shape[:-1]) > 1 << 31:
        raise _invalid(f"Invalid shape {_dims(shape)}")
    if not validate:
        return
    for i, idx in enumerate(indices):
        if (idx < 0).any() or (idx >= shape).any():
            raise _invalid(
                f"indices[{i}] = {_dims(idx)} is out of bounds: need 0 <= index < {_dims(shape)}"
            )
        if i:
            prev = tuple(indices[i - 1])
            if tuple(idx) == prev:
                raise _invalid(f"indices[{i}] = {_dims(idx)} is repeated")
            if tuple(idx) < prev:
                raise _invalid(
                    f"indices[{i}] = {_dims(idx)} is out of order. Many sparse ops require "
                    "sorted indices.\n    Use `tf.sparse.reorder` to create a correctly "
                    "ordered copy.\n\n"
                )


def _sparse_groups(indices, values, shape, validate):
    indices = np.asarray(indices, np.int64)
    values, shape = np.asarray(values), np.asarray(shape, np.int64)
    _check_sparse(indices, values, shape, validate)
    groups = tuple(int(d) for d in shape[:-1])
    sets = [set() for _ in range(math.prod(groups))]
    if indices.shape[0]:
        flat = np.ravel_multi_index(tuple(indices[:, :-1].T), groups, mode="clip")
        for g, v in zip(flat.tolist(), values.tolist()):
            sets[g].add(v)
    return groups, sets


def _combine(operation: str, a: set, b: set) -> set:
    if operation == "a-b":
        return a - b
    if operation == "b-a":
        return b - a
    if operation == "intersection":
        return a & b
    return a | b


def _operation(ctx) -> str:
    operation = ctx.attrs["set_operation"]
    if isinstance(operation, bytes):
        operation = operation.decode()
    if operation not in _OPERATIONS:
        raise _invalid(f"Invalid set_operation {operation}.")
    return operation


def _result(operation, groups_a, sets_a, groups_b, sets_b, dtype):
    if tuple(groups_a) != tuple(groups_b):
        raise _invalid(f"Mismatched shapes {_dims(groups_a)} vs {_dims(groups_b)}")
    results = [sorted(_combine(operation, a, b)) for a, b in zip(sets_a, sets_b)]
    width = max((len(r) for r in results), default=0)
    indices, values = [], []
    for index, row in zip(np.ndindex(*groups_a), results):
        for j, v in enumerate(row):
            indices.append((*index, j))
            values.append(v)
    rank = len(groups_a) + 1
    dtype = object if dtype.kind in "OSU" else dtype
    return (
        np.array(indices, np.int64).reshape(-1, rank),
        np.array(values, dtype=dtype).reshape(-1),
        np.array([*groups_a, width], np.int64),
    )


@DenseToDenseSetOperation.kernel("CPU")  # (TF has no GPU kernel either)
async def _dense_to_dense(ctx, set1, set2):
    operation = _operation(ctx)
    a, b = np.asarray(set1), np.asarray(set2)
    if a.ndim >= 2 and b.ndim >= 2 and a.shape[:-1] != b.shape[:-1]:
        raise _invalid(
            f"Shapes {list(a.shape)} vs {list(b.shape)} do not match in the group dimensions."
        )
    ga, sa = _dense_groups(a)
    gb, sb = _dense_groups(b)
    return await ctx.device.compute(_result, operation, ga, sa, gb, sb, a.dtype)


@DenseToSparseSetOperation.kernel("CPU")
async def _dense_to_sparse(ctx, set1, indices2, values2, shape2):
    operation = _operation(ctx)
    a = np.asarray(set1)
    ga, sa = _dense_groups(a)
    gb, sb = _sparse_groups(indices2, values2, shape2, ctx.attrs["validate_indices"])
    return await ctx.device.compute(_result, operation, ga, sa, gb, sb, a.dtype)


@SparseToSparseSetOperation.kernel("CPU")
async def _sparse_to_sparse(ctx, indices1, values1, shape1, indices2, values2, shape2):
    operation = _operation(ctx)
    validate = ctx.attrs["validate_indices"]
    ga, sa = _sparse_groups(indices1, values1, shape1, validate)
    gb, sb = _sparse_groups(indices2, values2, shape2, validate)
    dtype = np.asarray(values1).dtype
    return await ctx.device.compute(_result, operation, ga, sa, gb, sb, dtype)


@SetSize.kernel("CPU")
async def _set_size(ctx, indices, values, shape):
    groups, sets = _sparse_groups(indices, values, shape, ctx.attrs["validate_indices"])
    return np.array([len(s) for s in sets], np.int32).reshape(groups)
