"""Top-level raw ops of tf.compat.v1 with no family of their own.

- CheckPinned (`check_pinned`): whether a tensor sits in host memory pinned for a GPU.
  asyncflow's CPU tensors are plain host memory, never pinned, so running it fails with
  InvalidArgumentError("not pinned"), as TF's CPU kernel does.
- RaggedFillEmptyRows / RaggedFillEmptyRowsGrad (`ragged_fill_empty_rows`,
  `ragged_fill_empty_rows_grad`): see their note below.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__ = ["check_pinned", "ragged_fill_empty_rows", "ragged_fill_empty_rows_grad"]

CheckPinned = register_op(
    "CheckPinned",
    inputs=["tensor: T"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)
# (TF registers no gradient: tf.gradients through it raises LookupError, as there)


@CheckPinned.kernel("CPU")
async def _check_pinned(ctx, tensor):
    del tensor
    raise errors.InvalidArgumentError(None, None, "not pinned")


def check_pinned(tensor, name=None):
    """`tf.compat.v1.check_pinned(tensor)`: the tensor, when run from pinned host memory.

    Raises (when run):
      InvalidArgumentError: "not pinned" (asyncflow's host tensors never are).
    """
    return ops.apply_op("CheckPinned", [tensor], name=name or "CheckPinned").outputs[0]


# -- RaggedFillEmptyRows / RaggedFillEmptyRowsGrad ---------------------------------------------
#
# A ragged tensor's values with their row ids (`value_rowids`, one per value, rows
# [0, nrows)): every row without a value gets one `default_value`.  The outputs, as TF's
# kernel: the new row ids and values, rows in order and each row's values in their
# input order; `empty_row_indicator` per row; `reverse_index_map[i]`, where value i went.
# The gradient sends each value's incoming gradient back through reverse_index_map and
# sums the filled places' into default_value's (RaggedFillEmptyRowsGrad).


RaggedFillEmptyRows = register_op(
    "RaggedFillEmptyRows",
    inputs=["value_rowids: int64", "values: T", "nrows: int64", "default_value: T"],
    outputs=["output_value_rowids: int64", "output_values: T", "empty_row_indicator: bool",
             "reverse_index_map: int64"],
    attrs={"T": ANY},
    shape_fn=lambda op: [tensor_shape.TensorShape([None])] * 3 + [op.inputs[0].shape],
)  # fmt: skip

RaggedFillEmptyRowsGrad = register_op(
    "RaggedFillEmptyRowsGrad",
    inputs=["reverse_index_map: int64", "grad_values: T"],
    outputs=["d_values: T", "d_default_value: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape, tensor_shape.TensorShape([])],
)
NotDifferentiable("RaggedFillEmptyRowsGrad")


def _fill_empty_rows(rowids, values, nrows, default):
    n = len(rowids)
    for i, r in enumerate(rowids):
        if r < 0:
            raise errors.InvalidArgumentError(None, None, f"indices({i}, 0) is invalid: {r} < 0")
        if r >= nrows:
            raise errors.InvalidArgumentError(
                None, None, f"indices({i}, 0) is invalid: {r} >= {nrows}"
            )
    counts = np.bincount(rowids, minlength=nrows) if n else np.zeros(nrows, np.int64)
    empty = counts == 0
    sizes = counts + empty
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    order = np.argsort(rowids, kind="stable")
    sorted_rows = rowids[order]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if nrows else starts
    rank = np.arange(n, dtype=np.int64) - first[sorted_rows] if n else np.zeros(0, np.int64)
    reverse = np.empty(n, np.int64)
    reverse[order] = starts[sorted_rows] + rank
    total = int(sizes.sum())
    out_rows = np.repeat(np.arange(nrows, dtype=np.int64), sizes)
    out_values = np.empty((total, *values.shape[1:]), values.dtype)
    out_values[reverse] = values
    out_values[starts[empty]] = default
    return out_rows, out_values, empty, reverse


@RaggedFillEmptyRows.kernel("CPU")
async def _ragged_fill_empty_rows(ctx, value_rowids, values, nrows, default_value):
    rowids = np.asarray(value_rowids, np.int64).reshape(-1)
    values = np.asarray(values)
    if values.ndim != 1 or len(values) != len(rowids):
        raise errors.InvalidArgumentError(
            None, None, "values must be a vector of the same length as value_rowids"
        )
    if np.ndim(nrows) != 0 or np.ndim(default_value) != 0:
        raise errors.InvalidArgumentError(None, None, "nrows and default_value must be scalars")
    out = await ctx.device.compute(
        _fill_empty_rows, rowids, values, int(nrows), np.asarray(default_value)
    )
    return tuple(out)


@RaggedFillEmptyRows.gradient
def _ragged_fill_empty_rows_grad(op, *grads):
    if grads[1] is None:
        return [None] * 4
    d_values, d_default = ops.apply_op(
        "RaggedFillEmptyRowsGrad", [op.outputs[3], grads[1]]
    ).outputs
    return [None, d_values, None, d_default]


@RaggedFillEmptyRowsGrad.kernel("CPU")
async def _ragged_fill_empty_rows_grad_kernel(ctx, reverse_index_map, grad_values):
    reverse = np.asarray(reverse_index_map, np.int64)
    grad = np.asarray(grad_values)
    if reverse.size and (reverse.min() < 0 or reverse.max() >= len(grad)):
        raise errors.InvalidArgumentError(
            None, None, "reverse_index_map holds a position outside grad_values"
        )
    d_values = grad[reverse]
    rest = np.ones(len(grad), bool)
    rest[reverse] = False
    return d_values, np.asarray(grad[rest].sum(), grad.dtype)


def ragged_fill_empty_rows(value_rowids, values, nrows, default_value, name=None):
    """`tf.ragged_fill_empty_rows` (the raw op): see the note above.

    Raises (when run):
      InvalidArgumentError: a row id outside [0, nrows) (TF's message), or values not a
        vector as long as value_rowids.
    """
    return ops.apply_op(
        "RaggedFillEmptyRows", [value_rowids, values, nrows, default_value],
        name=name or "RaggedFillEmptyRows",
    ).outputs  # fmt: skip


def ragged_fill_empty_rows_grad(reverse_index_map, grad_values, name=None):
    """`tf.ragged_fill_empty_rows_grad` (the raw op): (d_values, d_default_value)."""
    return ops.apply_op(
        "RaggedFillEmptyRowsGrad", [reverse_index_map, grad_values],
        name=name or "RaggedFillEmptyRowsGrad",
    ).outputs  # fmt: skip
