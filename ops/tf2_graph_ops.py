"""Ops TF 2.x's Python writes into graphs (tf.function bodies, SavedModels) where TF1's
wrote others: RaggedTensorToTensor (`RaggedTensor.to_tensor`), DenseBincount
(`tf.math.bincount`, and ragged tensors built from value row ids) and RaggedBincount
(bincount of a RaggedTensor: Keras' TextVectorization in count / tf_idf mode).  asyncflow's own
builders do not make them; these kernels run the graphs TF 2.x wrote, with TF's
results and errors.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_I32_I64 = TypeConstraint([dtypes.int32, dtypes.int64])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- RaggedTensorToTensor -----------------------------------------------------------------


def _to_tensor_shape(op):
    ragged_rank = op._attr("num_row_partition_tensors")
    types = [t.decode() if isinstance(t, bytes) else t for t in op._attr("row_partition_types")]
    if types and types[0] == "FIRST_DIM_SIZE":
        ragged_rank -= 1
    values = op.inputs[1].shape
    inner = values[1:] if values.ndims is not None else None
    rank = None if inner is None else 1 + ragged_rank + inner.ndims
    # The rows: the first partition's (row splits: one more than rows), as TF infers.
    first = op.inputs[3].shape
    nrows = None
    if types and types[0] == "ROW_SPLITS" and first.ndims == 1 and first[0].value is not None:
        nrows = first[0].value - 1
    want = ops.constant_value(op.inputs[0])
    if want is not None and np.ndim(want) == 1:
        dims = [None if int(d) < 0 else int(d) for d in want]
        if dims and dims[0] is None:
            dims[0] = nrows
        if inner is not None and len(dims) == rank:  # (the values' inner dimensions)
            dims[1 + ragged_rank :] = [
                d if d is not None else v for d, v in zip(dims[1 + ragged_rank :], inner.as_list())
            ]
        return [tensor_shape.TensorShape(dims)]
    if rank is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape([nrows] + [None] * ragged_rank).concatenate(inner)]


RaggedTensorToTensor = register_op(
    "RaggedTensorToTensor",
    inputs=[
        "shape: Tshape",
        "values: T",
        "default_value: T",
        "row_partition_tensors: num_row_partition_tensors * Tindex",
    ],
    outputs=["result: T"],
    attrs={
        "T": ANY,
        "Tindex": _I32_I64,
        "Tshape": _I32_I64,
        "num_row_partition_tensors": 1,
        "row_partition_types": REQUIRED,
    },
    shape_fn=_to_tensor_shape,
)
# (its gradient: ops/ragged_ops.py, beside the other ragged ops')


def _splits_from_rowids(rowids: np.ndarray, nrows: int) -> np.ndarray:
    if rowids.size and (rowids[0] < 0 or np.any(np.diff(rowids) < 0)):
        raise _invalid("value_rowids must be sorted and non-negative")
    if rowids.size and rowids[-1] >= nrows:
        raise _invalid(f"value_rowids[-1] = {rowids[-1]} must be less than nrows = {nrows}")
    counts = np.bincount(rowids, minlength=nrows) if rowids.size else np.zeros(nrows, np.int64)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _row_splits(types: list[str], partitions, n_values: int) -> list[np.ndarray]:
    """Each ragged dimension's row splits, outermost first (TF's partition encodings)."""
    parts = [np.asarray(p).astype(np.int64).reshape(-1) for p in partitions]
    if types and types[0] == "FIRST_DIM_SIZE":
        if len(parts) < 2 or any(t != "VALUE_ROWIDS" for t in types[1:]):
            raise _invalid(f"Unsupported row_partition_types: {types}")
        nrows = int(parts[0][0]) if parts[0].size else 0
        splits = []
        for rowids in parts[1:]:
            s = _splits_from_rowids(rowids, nrows)
            splits.append(s)
            nrows = int(rowids.size)
        return splits
    if any(t != "ROW_SPLITS" for t in types):
        raise _invalid(f"Unsupported row_partition_types: {types}")
    for s in parts:
        if s.size == 0 or s[0] != 0 or np.any(np.diff(s) < 0):
            raise _invalid("Invalid row_splits: must start with 0 and be non-decreasing")
    return parts


@RaggedTensorToTensor.kernel("CPU")
async def _ragged_to_tensor(ctx, shape, values, default_value, *partitions):
    types = [t.decode() if isinstance(t, bytes) else t for t in ctx.attrs["row_partition_types"]]
    values = np.asarray(values)
    splits = _row_splits(types, partitions, values.shape[0] if values.ndim else 0)
    for outer, inner in zip(splits, splits[1:]):
        if outer[-1] != inner.size - 1:
            raise _invalid("Row splits do not match the number of rows in the next dimension")
    if splits[-1][-1] != values.shape[0]:
        raise _invalid(
            f"Invalid row_splits: the last split ({splits[-1][-1]}) must equal the number "
            f"of values ({values.shape[0]})"
        )
    inner = list(values.shape[1:])
    # Each value's index at every level: (row, position in row, ...), innermost first.
    n = values.shape[0]
    index = [np.arange(n, dtype=np.int64)]
    lengths = []
    for s in reversed(splits):
        child = index[0]
        parent = np.searchsorted(s, child, side="right") - 1
        index[0] = child - s[parent]
        index.insert(0, parent)
        lengths.insert(0, int(np.max(np.diff(s))) if s.size > 1 else 0)
    natural = [splits[0].size - 1, *lengths, *inner]
    want = np.asarray(shape).reshape(-1) if np.ndim(shape) else None
    if want is not None and want.size not in (0, len(natural)):
        raise _invalid(
            f"shape ({list(want)}) must have rank {len(natural)} (the ragged tensor's)"
        )
    out_shape = (
        natural
        if want is None or want.size == 0
        else [natural[i] if int(d) < 0 else int(d) for i, d in enumerate(want)]
    )
    if out_shape[1 + len(lengths) :] != inner:
        raise _invalid(
            f"The inner dimensions of shape {out_shape} must match the values' {inner}"
        )
    default = np.asarray(default_value, dtype=values.dtype)
    try:
        result = np.empty(out_shape, dtype=values.dtype)
        result[...] = np.broadcast_to(default, out_shape[len(out_shape) - default.ndim :])
    except ValueError:
        raise _invalid(
            f"default_value of shape {list(default.shape)} does not broadcast to the inner "
            f"shape {inner}"
        ) from None
    keep = np.ones(n, dtype=bool)
    for level, idx in enumerate(index):
        keep &= idx < out_shape[level]
    result[tuple(idx[keep] for idx in index)] = values[keep]
    return result


# -- DenseBincount -------------------------------------------------------------------------


def _bincount_shape(op):
    x = op.inputs[0].shape
    size = ops.constant_value(op.inputs[1])
    n = int(size) if size is not None else None
    if x.ndims == 2:
        return [tensor_shape.TensorShape([x[0].value, n])]
    return [tensor_shape.TensorShape([n])]


DenseBincount = register_op(
    "DenseBincount",
    inputs=["input: Tidx", "size: Tidx", "weights: T"],
    outputs=["output: T"],
    attrs={
        "Tidx": _I32_I64,
        "T": TypeConstraint([dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]),
        "binary_output": False,
    },
    shape_fn=_bincount_shape,
)
# (DenseBincount has no gradient in TF: LookupError.)


@DenseBincount.kernel("CPU")
async def _dense_bincount(ctx, arr, size, weights):
    arr = np.asarray(arr)
    size = int(size)
    weights = np.asarray(weights)
    dt = ctx.attrs["T"].as_numpy_dtype
    if size < 0:
        raise _invalid(f"size ({size}) must be non-negative")
    if arr.ndim not in (1, 2):
        raise _invalid(f"Input must be a 1 or 2-dimensional tensor, got {list(arr.shape)}")
    if arr.size and arr.min() < 0:
        raise _invalid("Input arr must be non-negative!")
    if weights.size and weights.shape != arr.shape:
        raise _invalid(
            f"Input arr and weights must have the same shape: {list(arr.shape)} vs "
            f"{list(weights.shape)}"
        )
    nrows = arr.shape[0] if arr.ndim == 2 else 1
    rows = np.repeat(np.arange(nrows), arr.size // nrows if nrows else 0)
    out = _row_counts(rows, arr.reshape(-1), nrows, size, weights, ctx.attrs, dt)
    return out if arr.ndim == 2 else out[0]


def _row_counts(rows, values, nrows: int, size: int, weights, attrs, dt) -> np.ndarray:
    """[nrows, size]: per row, the count (or weight sum, or 1 with binary_output) of each
    value below `size`; `rows` is each value's row (values at or above size: ignored)."""
    inside = values < size
    out = np.zeros((nrows, size), dtype=dt)
    if attrs["binary_output"]:
        out[rows[inside], values[inside]] = 1
    else:
        w = 1 if not weights.size else weights.reshape(-1)[inside].astype(dt)
        np.add.at(out, (rows[inside], values[inside]), w)
    return out


# -- RaggedBincount ------------------------------------------------------------------------


RaggedBincount = register_op(
    "RaggedBincount",
    inputs=["splits: int64", "values: Tidx", "size: Tidx", "weights: T"],
    outputs=["output: T"],
    attrs={
        "Tidx": _I32_I64,
        "T": TypeConstraint([dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]),
        "binary_output": False,
    },
    shape_fn=lambda op: [
        tensor_shape.TensorShape(
            [
                None if op.inputs[0].shape[0].value is None else op.inputs[0].shape[0].value - 1,
                None if ops.constant_value(op.inputs[2]) is None
                else int(ops.constant_value(op.inputs[2])),
            ]
        )
    ],  # fmt: skip
)
NotDifferentiable("RaggedBincount")


@RaggedBincount.kernel("CPU")
async def _ragged_bincount(ctx, splits, values, size, weights):
    splits = np.asarray(splits, np.int64).reshape(-1)
    values = np.asarray(values).reshape(-1)
    weights = np.asarray(weights)
    size = int(size)
    dt = ctx.attrs["T"].as_numpy_dtype
    if size < 0:
        raise _invalid(f"size ({size}) must be non-negative")
    bad = splits.size == 0 or splits[0] != 0 or splits[-1] != values.size
    if bad or np.any(np.diff(splits) < 0):
        raise _invalid("Splits must start with 0, not decrease, and end with the number of values")
    if values.size and values.min() < 0:
        raise _invalid("Input must be non-negative")
    if weights.size and weights.reshape(-1).size != values.size:
        raise _invalid(
            f"Weights and values must have the same shape. Weight shape: "
            f"{list(weights.shape)}; values shape: {list(values.shape)}"
        )
    rows = np.repeat(np.arange(splits.size - 1), np.diff(splits))
    return _row_counts(rows, values, splits.size - 1, size, weights, ctx.attrs, dt)
