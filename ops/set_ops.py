"""TF's set operations on dense sets: DenseToDenseSetOperation (the sets are the last
dimension of each input; the result a SparseTensor of each row's set, sorted, padded to
the largest).  TF1's losses use it when they check that weights broadcast to the
losses (`weights_broadcast_ops`), so a GraphDef TF wrote for such a loss has it.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_SET_TYPES = TypeConstraint(["int8", "int16", "int32", "int64", "uint8", "uint16", "string"])
_OPERATIONS = ("a-b", "b-a", "intersection", "union")


def _set_operation_shape(op):
    a, b = (t.shape for t in op.inputs)
    rank = None
    for s in (a, b):
        if s.ndims is not None:
            if s.ndims < 2:
                raise ValueError(f"Shape must be at least rank 2 but is rank {s.ndims}")
            rank = s.ndims
    if a.ndims is not None and b.ndims is not None and a.ndims != b.ndims:
        raise ValueError(f"Shape must be rank {a.ndims} but is rank {b.ndims}")
    return [
        tensor_shape.TensorShape([None, rank]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([rank]),
    ]


DenseToDenseSetOperation = register_op(
    "DenseToDenseSetOperation",
    inputs=["set1: T", "set2: T"],
    outputs=["result_indices: int64", "result_values: T", "result_shape: int64"],
    attrs={"set_operation": REQUIRED, "validate_indices": True, "T": _SET_TYPES},
    shape_fn=_set_operation_shape,
)
NotDifferentiable("DenseToDenseSetOperation")  # (as TF's sets_impl)


def _combine(operation: str, a: set, b: set) -> set:
    if operation == "a-b":
        return a - b
    if operation == "b-a":
        return b - a
    if operation == "intersection":
        return a & b
    return a | b


@DenseToDenseSetOperation.kernel("CPU")  # (TF has no GPU kernel either)
async def _dense_to_dense(ctx, set1, set2):
    operation = ctx.attrs["set_operation"]
    if isinstance(operation, bytes):
        operation = operation.decode()
    if operation not in _OPERATIONS:
        raise errors.InvalidArgumentError(None, None, f"Invalid set_operation {operation}.")
    a, b = np.asarray(set1), np.asarray(set2)
    for s in (a, b):
        if s.ndim < 2:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid rank {s.ndim}: set inputs must have rank >= 2."
            )
    if a.shape[:-1] != b.shape[:-1]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shapes {list(a.shape)} vs {list(b.shape)} do not match in the group dimensions.",
        )
    groups = a.shape[:-1]
    n = math.prod(groups)  # (explicit rows: a -1 cannot stand beside an empty set)
    rows_a, rows_b = a.reshape(n, a.shape[-1]), b.reshape(n, b.shape[-1])
    results = [
        sorted(_combine(operation, set(ra.tolist()), set(rb.tolist())))
        for ra, rb in zip(rows_a, rows_b)
    ]
    width = max((len(r) for r in results), default=0)
    indices, values = [], []
    for index, row in zip(np.ndindex(*groups), results):
        for j, v in enumerate(row):
            indices.append((*index, j))
            values.append(v)
    rank = len(groups) + 1
    dtype = object if a.dtype.kind in "OSU" else a.dtype
    return (
        np.array(indices, np.int64).reshape(-1, rank),
        np.array(values, dtype=dtype).reshape(-1),
        np.array([*groups, width], np.int64),
    )
