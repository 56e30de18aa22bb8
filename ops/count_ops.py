"""TF's DenseCountSparseOutput and SparseCountSparseOutput, behind `tf.sparse.bincount`:
per row of a 1-D or 2-D input (dense, or a SparseTensor's values by row), the count
(or weight sum, or 1 with `binary_output`) of each non-negative value, as a SparseTensor
[batch, num_bins] (or [num_bins] for 1-D input) sorted by row then value.

num_bins is `maxlength` when set (>= 0; larger values are dropped), else
max(largest value + 1, minlength), the largest taken over the whole input (0 for an
empty one), as TF's kernels.

Invariant: kernels return new arrays; not differentiable (TF registers no gradient).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ragged import is_ragged
from asyncflow.registry import INDEX, REQUIRED, NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = ["sparse_bincount"]

_OUT_T = TypeConstraint(["int32", "int64", "float32", "float64"])
_MAX_BINS = 1 << 31


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _dims(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _out_shapes(rank):
    return [
        tensor_shape.TensorShape([None, rank]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([rank]),
    ]


def _dense_shape_fn(op):
    values, weights = (t.shape for t in op.inputs)
    empty = weights.is_fully_defined() and weights.num_elements() == 0  # (no weights)
    if values.ndims is not None and weights.ndims is not None and not empty:
        if values.ndims != weights.ndims:
            raise ValueError(
                f"Shapes must be equal rank, but are {weights.ndims} and {values.ndims}"
            )
    return _out_shapes(values.ndims)


def _sparse_shape_fn(op):
    s = op.inputs[2].shape
    return _out_shapes(s.dims[0] if s.ndims == 1 else None)


_ATTRS = {
    "T": INDEX,
    "minlength": -1,
    "maxlength": -1,
    "binary_output": REQUIRED,
    "output_type": _OUT_T,
}
_OUTPUTS = ["output_indices: int64", "output_values: output_type", "output_dense_shape: int64"]
DenseCountSparseOutput = register_op(
    "DenseCountSparseOutput",
    inputs=["values: T", "weights: output_type"],
    outputs=_OUTPUTS,
    attrs=dict(_ATTRS),
    shape_fn=_dense_shape_fn,
)
SparseCountSparseOutput = register_op(
    "SparseCountSparseOutput",
    inputs=["indices: int64", "values: T", "dense_shape: int64", "weights: output_type"],
    outputs=_OUTPUTS,
    attrs=dict(_ATTRS),
    shape_fn=_sparse_shape_fn,
)
NotDifferentiable("DenseCountSparseOutput")
NotDifferentiable("SparseCountSparseOutput")


def _count(rows, values, weights, batch, rank, attrs, out_dtype):
    """(indices, values, shape) of the per-row counts; `rows` each value's row."""
    if values.size and values.min() < 0:
        raise _invalid("Input values must all be non-negative")
    maxlength, minlength = attrs["maxlength"], attrs["minlength"]
    keep = values < maxlength if maxlength >= 0 else np.ones(values.shape, bool)
    rows, values = rows[keep], values[keep].astype(np.int64)
    w = weights[keep] if weights is not None else None
    if maxlength >= 0:
        bins = maxlength
    else:
        bins = max(int(values.max()) + 1 if values.size else 1, minlength)
    if bins > _MAX_BINS:
        raise _invalid(f"too many bins: {bins}")
    key = rows.astype(np.int64) * bins + values
    uniq, inverse = np.unique(key, return_inverse=True)
    if attrs["binary_output"]:
        out = np.ones(uniq.shape, out_dtype)
    elif w is None:
        out = np.bincount(inverse, minlength=len(uniq)).astype(out_dtype)
    else:
        out = np.zeros(uniq.shape, out_dtype)  # (summed in value order, as TF)
        np.add.at(out, inverse, w.astype(out_dtype))
    r, v = np.divmod(uniq, bins) if bins else (uniq, uniq)
    if rank == 1:
        return v.reshape(-1, 1).astype(np.int64), out, np.array([bins], np.int64)
    indices = np.stack([r, v], 1).astype(np.int64).reshape(-1, 2)
    return indices, out, np.array([batch, bins], np.int64)


def _weights(weights, shape):
    w = np.asarray(weights)
    if w.size == 0:
        return None
    if w.shape != tuple(shape):
        raise _invalid(
            f"Weights and data must have the same shape. Weight shape: {_dims(w.shape)}; "
            f"data shape: {_dims(shape)}"
        )
    return w.reshape(-1)


@DenseCountSparseOutput.kernel("CPU")
async def _dense_count(ctx, values, weights):
    values = np.asarray(values)
    if values.ndim not in (1, 2):
        raise _invalid(f"Input must be a 1 or 2-dimensional tensor. Got: {_dims(values.shape)}")
    w = _weights(weights, values.shape)
    batch = values.shape[0] if values.ndim == 2 else 1
    rows = (
        np.repeat(np.arange(batch), values.shape[-1])
        if values.ndim == 2
        else np.zeros(values.size, np.int64)
    )
    out_dtype = ctx.attrs["output_type"].as_numpy_dtype
    return await ctx.device.compute(
        _count, rows, values.reshape(-1), w, batch, values.ndim, ctx.attrs, np.dtype(out_dtype)
    )


@SparseCountSparseOutput.kernel("CPU")
async def _sparse_count(ctx, indices, values, dense_shape, weights):
    indices, values = np.asarray(indices, np.int64), np.asarray(values)
    shape = np.asarray(dense_shape, np.int64)
    rank = shape.shape[0] if shape.ndim == 1 else 0
    if rank not in (1, 2):
        raise _invalid(f"Input must be a 1 or 2-dimensional tensor. Got: {_dims(shape)}")
    if indices.ndim != 2 or indices.shape != (values.shape[0], rank):
        raise _invalid(
            f"Invalid sparse tensor: indices {_dims(indices.shape)}, values "
            f"{_dims(values.shape)}, shape {_dims(shape)}"
        )
    w = _weights(weights, values.shape)
    batch = int(shape[0]) if rank == 2 else 1
    rows = indices[:, 0] if rank == 2 else np.zeros(values.size, np.int64)
    out_dtype = ctx.attrs["output_type"].as_numpy_dtype
    return await ctx.device.compute(
        _count, rows, values, w, batch, rank, ctx.attrs, np.dtype(out_dtype)
    )


def sparse_bincount(values, weights=None, axis=0, minlength=None, maxlength=None,
                    binary_output=False, name=None):  # fmt: skip
    """`tf.sparse.bincount`: counts of each value as a SparseTensor (axis 0: over the
    whole input, flattened; axis -1: per row of a 2-D input or RaggedTensor).

    Raises:
      ValueError: axis other than 0 or -1, or both weights and binary_output.
      InvalidArgumentError: at run time, for negative values or weights of another shape.
    """
    if weights is not None and binary_output:
        raise ValueError(
            "Arguments `binary_output` and `weights` are mutually exclusive. Please "
            "specify only one."
        )
    axis = 0 if axis is None else axis
    if axis not in (0, -1):
        raise ValueError(
            f"Unsupported value for argument axis={axis}. Only 0 and -1 are currently supported."
        )
    attrs = {
        "minlength": -1 if minlength is None else int(minlength),
        "maxlength": -1 if maxlength is None else int(maxlength),
        "binary_output": bool(binary_output),
    }
    with ops.name_scope(name, "count", [values, weights]):
        if isinstance(values, SparseTensorValue):
            values = SparseTensor.from_value(values)
        if isinstance(weights, SparseTensorValue):
            weights = SparseTensor.from_value(weights)
        splits = None
        if is_ragged(values):  # RaggedCountSparseOutput: each row its own counts
            if is_ragged(weights):
                weights = weights.flat_values
            splits = values.row_splits if axis == -1 else None
            values = values.flat_values
        if not isinstance(values, SparseTensor):
            values = ops.convert_to_tensor(values, name="values")
        if axis == 0:
            if isinstance(values, SparseTensor):
                if weights is not None:
                    weights = weights.values if isinstance(weights, SparseTensor) else weights
                values = values.values
            else:
                if weights is not None:
                    weights = ops.apply_op("Reshape", [weights, [-1]]).outputs[0]
                values = ops.apply_op("Reshape", [values, [-1]]).outputs[0]
        dtype = values.dtype
        if weights is None:
            weights = ops.convert_to_tensor(np.zeros(0, dtype.as_numpy_dtype), dtype)
        elif isinstance(weights, SparseTensor):
            weights = weights.values
        else:
            weights = ops.convert_to_tensor(weights)
        attrs["output_type"] = weights.dtype
        if splits is not None:
            splits = ops.apply_op("Cast", [splits], {"DstT": dtypes.int64}).outputs[0]
            out = ops.apply_op("RaggedCountSparseOutput", [splits, values, weights], attrs).outputs
        elif isinstance(values, SparseTensor):
            out = ops.apply_op(
                "SparseCountSparseOutput",
                [values.indices, values.values, values.dense_shape, weights], attrs,
            ).outputs  # fmt: skip
        else:
            out = ops.apply_op("DenseCountSparseOutput", [values, weights], attrs).outputs
        return SparseTensor(*out)
