"""The raw ops TF's ragged API writes into graphs: RaggedRange (`tf.ragged.range`, and
row slicing), RaggedGather (`tf.gather` on a RaggedTensor), RaggedTensorToSparse
(`RaggedTensor.to_sparse`), RaggedCross (`tf.ragged.cross`, `cross_hashed`),
RaggedCountSparseOutput (`tf.sparse.bincount` of a RaggedTensor) and the variant
encoding `tf.map_fn` uses for ragged elements (RaggedTensorToVariant,
RaggedTensorFromVariant, RaggedTensorToVariantGradient); also the gradient of
RaggedTensorToTensor (its op lives in tf2_graph_ops).

A ragged value is its nested row splits (outermost first) and its dense flat values.
A variant tensor here is an object array whose elements are `RaggedComponents`
(TF's RaggedTensorVariant: one ragged value's splits and values): graphs TF wrote with
these ops import and run, though the variant itself is never serialized.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import count_ops, sparse_cross_ops
from asyncflow.ops import tf2_graph_ops as _tf2_graph_ops  # noqa: F401 - RaggedTensorToTensor
from asyncflow.registry import (
    ANY,
    REQUIRED,
    NotDifferentiable,
    RegisterGradient,
    TypeConstraint,
    register_op,
)

__all__: list[str] = []

_SPLITS = TypeConstraint([dtypes.int32, dtypes.int64], default=dtypes.int64)
_FEATURES = TypeConstraint([dtypes.int64, dtypes.string], is_list=True)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _type_name(dtype) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double"."""
    name = dtypes.as_dtype(dtype).name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


def _check_splits(splits: list[np.ndarray], nvals: int) -> None:
    """TF's ragged kernels' split checks: each level starts at 0, never decreases, and
    ends at the next level's row count (the values' at the last)."""
    for i, s in enumerate(splits):
        if s.size == 0:
            raise _invalid("ragged splits may not be empty.")
        if s[0] != 0:
            raise _invalid("First value of ragged splits must be 0.")
        if np.any(np.diff(s) < 0):
            raise _invalid("Ragged splits should be non decreasing.")
        inner = splits[i + 1].size - 1 if i + 1 < len(splits) else nvals
        if s[-1] != inner:
            raise _invalid(
                "Final value of ragged splits must match the length the corresponding "
                "ragged values."
            )


def _outputs(values: list):
    """A kernel's outputs: one array alone (a list output of no tensors leaves one)."""
    return values[0] if len(values) == 1 else values


def _vec(n=None) -> tensor_shape.TensorShape:
    return tensor_shape.TensorShape([n])


# -- RaggedRange ------------------------------------------------------------------------------


def _range_shape(op):
    shapes = [t.shape for t in op.inputs]
    size = None
    for s in shapes:
        s.with_rank_at_most(1)
        if s.ndims == 1 and s[0].value is not None:
            if size is not None and size != s[0].value:
                raise ValueError(f"Dimensions must be equal, but are {s[0].value} and {size}")
            size = s[0].value
    if size is None and all(s.ndims == 0 for s in shapes):
        size = 1
    return [_vec(None if size is None else size + 1), _vec()]


RaggedRange = register_op(
    "RaggedRange",
    inputs=["starts: T", "limits: T", "deltas: T"],
    outputs=["rt_nested_splits: Tsplits", "rt_dense_values: T"],
    attrs={
        "T": TypeConstraint(
            [dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64],
            default=dtypes.int32,
        ),
        "Tsplits": _SPLITS,
    },
    shape_fn=_range_shape,
)
NotDifferentiable("RaggedRange")


@RaggedRange.kernel("CPU")
async def _ragged_range(ctx, starts, limits, deltas):
    args = [np.asarray(a) for a in (starts, limits, deltas)]
    for name, a in zip(("starts", "limits", "deltas"), args):
        if a.ndim > 1:
            raise _invalid(f"{name} must be a scalar or vector")
    sizes = {a.size for a in args if a.ndim == 1}
    if len(sizes) > 1:
        raise _invalid("starts, limits, and deltas must have the same shape")
    n = sizes.pop() if sizes else 1
    starts, limits, deltas = (np.broadcast_to(a.reshape(-1), (n,)) for a in args)
    if np.any(deltas == 0):
        raise _invalid("Requires delta != 0")
    forward = (deltas > 0) & (limits > starts)
    backward = (deltas < 0) & (limits < starts)
    with np.errstate(all="ignore"):
        if starts.dtype.kind == "f":
            span = np.ceil(np.abs((limits - starts) / deltas))
        else:  # (integer ceil of |limit - start| / |delta|, as TF computes it)
            d = np.abs(deltas.astype(np.int64))
            span = (np.abs(limits.astype(np.int64) - starts.astype(np.int64)) + d - 1) // d
    counts = np.where(forward | backward, span, 0).astype(np.int64)
    split_np = ctx.attrs["Tsplits"].as_numpy_dtype
    splits = np.concatenate([[0], np.cumsum(counts)]).astype(split_np)
    row = np.repeat(np.arange(n), counts)
    within = np.arange(row.size) - np.repeat(splits[:-1].astype(np.int64), counts)
    values = (starts[row] + within.astype(starts.dtype) * deltas[row]).astype(starts.dtype)
    return splits, values


# -- RaggedGather -----------------------------------------------------------------------------


def _gather_shape(op):
    n_out = op._attr("OUTPUT_RAGGED_RANK")
    values = op.inputs[-2].shape
    return [_vec()] * n_out + [tensor_shape.TensorShape([None]).concatenate(values[1:])]


RaggedGather = register_op(
    "RaggedGather",
    inputs=[
        "params_nested_splits: PARAMS_RAGGED_RANK * Tsplits",
        "params_dense_values: Tvalues",
        "indices: Tindices",
    ],
    outputs=["output_nested_splits: OUTPUT_RAGGED_RANK * Tsplits", "output_dense_values: Tvalues"],
    attrs={
        "Tvalues": ANY,
        "Tindices": TypeConstraint([dtypes.int32, dtypes.int64]),
        "Tsplits": _SPLITS,
        "PARAMS_RAGGED_RANK": REQUIRED,
        "OUTPUT_RAGGED_RANK": REQUIRED,
    },
    shape_fn=_gather_shape,
)


def _gather_rows(splits: list[np.ndarray], rows: np.ndarray):
    """(new splits per level, positions into the values) of `rows` of a ragged value."""
    out = []
    for s in splits:
        starts, ends = s[rows], s[rows + 1]
        counts = ends - starts
        out.append(np.concatenate([[0], np.cumsum(counts)]).astype(s.dtype))
        first = np.repeat(out[-1][:-1].astype(np.int64), counts)
        rows = np.repeat(starts.astype(np.int64), counts) + np.arange(counts.sum()) - first
    return out, rows


@RaggedGather.kernel("CPU")
async def _ragged_gather(ctx, *args):
    splits = [np.asarray(s) for s in args[:-2]]
    values, indices = np.asarray(args[-2]), np.asarray(args[-1])
    out_rank = ctx.attrs["OUTPUT_RAGGED_RANK"]
    if indices.ndim + len(splits) - 1 != out_rank:
        raise _invalid(
            "Invalid OUTPUT_RAGGED_RANK: expected indices.rank + params.ragged_rank - 1 = "
            f"{indices.ndim + len(splits) - 1}, got {out_rank}"
        )
    if values.ndim == 0:
        raise _invalid("params.rank must be nonzero")
    nrows = splits[0].size - 1
    flat = indices.reshape(-1).astype(np.int64)
    for i, x in enumerate(flat.tolist()):
        if not 0 <= x < nrows:
            raise _invalid(f"indices[{i}] = {x} is not in [0, {nrows})")
    new, positions = _gather_rows(splits, flat)
    split_np = splits[0].dtype
    outer = []  # indices' own dimensions become uniform partitions (row-major)
    n = flat.size
    for d in reversed(indices.shape[1:]):
        n //= d if d else 1
        outer.insert(0, np.arange(0, n * d + 1, d if d else 1, dtype=split_np)[: n + 1])
    return _outputs([*outer, *new, values[positions]])


@RaggedGather.gradient
def _ragged_gather_grad(op, *grads):
    """Each output value's gradient goes to the params value it came from."""
    n_splits = op._attr("PARAMS_RAGGED_RANK")
    splits, values, indices = op.inputs[:n_splits], op.inputs[n_splits], op.inputs[-1]
    d_values = grads[-1]
    zero, one = (ops.convert_to_tensor(x, dtypes.int64) for x in (0, 1))
    nvals = ops.apply_op("Shape", [values], {"out_type": dtypes.int64}).outputs[0][0]
    positions = ops.apply_op("Range", [zero, nvals, one]).outputs[0]
    picked = ops.apply_op(
        "RaggedGather",
        [list(splits), positions, indices],
        {"OUTPUT_RAGGED_RANK": op._attr("OUTPUT_RAGGED_RANK")},
    ).outputs[-1]
    grad = ops.apply_op("UnsortedSegmentSum", [d_values, picked, nvals]).outputs[0]
    return [None] * n_splits + [grad, None]


# -- RaggedTensorToSparse ---------------------------------------------------------------------


def _to_sparse_shape(op):
    values = op.inputs[-1].shape
    rank = None if values.ndims is None else values.ndims + len(op.inputs) - 1
    n = values.num_elements() if values.ndims is not None else None
    return [tensor_shape.TensorShape([n, rank]), _vec(n), _vec(rank)]


RaggedTensorToSparse = register_op(
    "RaggedTensorToSparse",
    inputs=["rt_nested_splits: RAGGED_RANK * Tsplits", "rt_dense_values: T"],
    outputs=["sparse_indices: int64", "sparse_values: T", "sparse_dense_shape: int64"],
    attrs={"RAGGED_RANK": REQUIRED, "T": ANY, "Tsplits": _SPLITS},
    shape_fn=_to_sparse_shape,
)


def _value_index(splits: list[np.ndarray], n: int) -> list[np.ndarray]:
    """Each of `n` values' index at every ragged level: [row, position, ...]."""
    index = [np.arange(n, dtype=np.int64)]
    for s in reversed(splits):
        child = index[0]
        parent = np.searchsorted(s, child, side="right") - 1
        index[0] = child - s[parent]
        index.insert(0, parent)
    return index


@RaggedTensorToSparse.kernel("CPU")
async def _ragged_to_sparse(ctx, *args):
    splits = [np.asarray(s).astype(np.int64) for s in args[:-1]]
    values = np.asarray(args[-1])
    if values.ndim == 0:
        raise _invalid("rt_dense_values must have rank at least 1")
    _check_splits(splits, values.shape[0])
    index = _value_index(splits, values.shape[0])
    inner = list(values.shape[1:])
    widths = [int(np.max(np.diff(s), initial=0)) for s in splits]
    shape = np.array([splits[0].size - 1, *widths, *inner], np.int64)
    cols = np.stack(index, axis=1) if index else np.zeros((0, 0), np.int64)
    if inner:  # every inner position of each value is one sparse value
        m = int(np.prod(inner))
        inner_idx = np.stack(np.unravel_index(np.arange(m), inner), axis=1)
        cols = np.concatenate(
            [np.repeat(cols, m, axis=0), np.tile(inner_idx, (values.shape[0], 1))], axis=1
        )
    return cols.astype(np.int64).reshape(-1, shape.size), values.reshape(-1), shape


@RaggedTensorToSparse.gradient
def _ragged_to_sparse_grad(op, unused_indices_grad, values_grad, unused_shape_grad):
    values = op.inputs[-1]
    shape = ops.apply_op("Shape", [values]).outputs[0]
    grad = ops.apply_op("Reshape", [values_grad, shape]).outputs[0]
    return [None] * (len(op.inputs) - 1) + [grad]


# -- RaggedTensorToTensor's gradient ----------------------------------------------------------


@RegisterGradient("RaggedTensorToTensor")
def _ragged_to_tensor_grad(op, grad):
    """Values: the gradient at each value's place in the result (none where the result
    cropped it); default_value: the gradient summed over the padded places."""
    shape, values, default = op.inputs[:3]
    partitions = list(op.inputs[3:])
    i64 = dtypes.int64
    nvals = ops.apply_op("Shape", [values], {"out_type": i64}).outputs[0][0]
    zero, one, minus = (ops.convert_to_tensor(x, i64) for x in (0, 1, -1))
    positions = ops.apply_op("Range", [zero, nvals, one]).outputs[0]
    outer_rank = len(partitions) + 1
    types = op._attr("row_partition_types")
    if types and (types[0] in ("FIRST_DIM_SIZE", b"FIRST_DIM_SIZE")):
        outer_rank -= 1
    outer_shape = shape
    if shape.shape.ndims != 0:
        outer_shape = shape[:outer_rank]
    attrs = {k: op._attr(k) for k in ("num_row_partition_tensors", "row_partition_types")}
    where = ops.apply_op(
        "RaggedTensorToTensor", [outer_shape, positions, minus, partitions], attrs
    ).outputs[0]
    where = ops.apply_op("Reshape", [where, ops.convert_to_tensor([-1], dtypes.int32)]).outputs[0]
    inner = ops.apply_op("Shape", [values]).outputs[0][1:]
    flat_shape = ops.apply_op(
        "ConcatV2",
        [
            [ops.convert_to_tensor([-1], dtypes.int32), inner],
            ops.convert_to_tensor(0, dtypes.int32),
        ],
    ).outputs[0]
    flat_grad = ops.apply_op("Reshape", [grad, flat_shape]).outputs[0]
    padded = ops.apply_op("Less", [where, zero]).outputs[0]
    ids = ops.apply_op("SelectV2", [padded, nvals, where]).outputs[0]
    summed = ops.apply_op("UnsortedSegmentSum", [flat_grad, ids, nvals + 1]).outputs[0]
    d_values = summed[:-1]
    d_default = summed[-1]
    default_rank = default.shape.ndims
    inner_rank = values.shape.ndims - 1 if values.shape.ndims is not None else None
    if default_rank is not None and inner_rank is not None and default_rank < inner_rank:
        axes = ops.convert_to_tensor(list(range(inner_rank - default_rank)), dtypes.int32)
        d_default = ops.apply_op("Sum", [d_default, axes]).outputs[0]
    if default_rank is not None and inner_rank is not None and default_rank == inner_rank:
        # (a default broadcast along some inner dims: those sum too)
        d_default = _sum_to_shape(d_default, default)
    return [None, d_values, d_default] + [None] * len(partitions)


def _sum_to_shape(grad, like):
    g_shape = ops.apply_op("Shape", [grad]).outputs[0]
    l_shape = ops.apply_op("Shape", [like]).outputs[0]
    _, axes = ops.apply_op("BroadcastGradientArgs", [g_shape, l_shape]).outputs
    summed = ops.apply_op("Sum", [grad, axes], {"keep_dims": True}).outputs[0]
    return ops.apply_op("Reshape", [summed, l_shape]).outputs[0]


# -- RaggedCross ------------------------------------------------------------------------------


RaggedCross = register_op(
    "RaggedCross",
    inputs=[
        "ragged_values: ragged_values_types",
        "ragged_row_splits: ragged_splits_types",
        "sparse_indices: Nsparse * int64",
        "sparse_values: sparse_values_types",
        "sparse_shape: Nsparse * int64",
        "dense_inputs: dense_types",
    ],
    outputs=["output_values: out_values_type", "output_row_splits: out_row_splits_type"],
    attrs={
        "Nsparse": REQUIRED,
        "input_order": REQUIRED,
        "hashed_output": REQUIRED,
        "num_buckets": REQUIRED,
        "hash_key": REQUIRED,
        "ragged_values_types": _FEATURES,
        "ragged_splits_types": TypeConstraint([dtypes.int32, dtypes.int64], is_list=True),
        "sparse_values_types": _FEATURES,
        "dense_types": _FEATURES,
        "out_values_type": TypeConstraint([dtypes.int64, dtypes.string]),
        "out_row_splits_type": TypeConstraint([dtypes.int32, dtypes.int64]),
    },
    shape_fn=lambda op: [_vec(), _vec(_cross_rows(op))],
)
NotDifferentiable("RaggedCross")


def _cross_rows(op):
    """The result's row splits' length where an input's row count is known."""
    nr = len(op._attr("ragged_values_types"))
    ns = op._attr("Nsparse")
    nd = len(op._attr("dense_types"))
    for s in op.inputs[nr : 2 * nr]:
        if s.shape.ndims == 1 and s.shape[0].value is not None:
            return s.shape[0].value
    for d in op.inputs[2 * nr + 3 * ns : 2 * nr + 3 * ns + nd]:
        if d.shape.ndims and d.shape[0].value is not None:
            return d.shape[0].value + 1
    return None


def _ragged_as_sparse(values: np.ndarray, splits: np.ndarray):
    """A 2-D ragged feature as SparseCross reads one: (indices, values, shape)."""
    splits = splits.astype(np.int64)
    _check_splits([splits], values.shape[0])
    rows = np.repeat(np.arange(splits.size - 1), np.diff(splits))
    cols = np.arange(values.shape[0]) - np.repeat(splits[:-1], np.diff(splits))
    width = int(np.max(np.diff(splits), initial=0))
    return np.stack([rows, cols], 1).reshape(-1, 2), values, np.array([splits.size - 1, width])


@RaggedCross.kernel("CPU")
async def _ragged_cross(ctx, *args):
    a = ctx.attrs
    nr, ns, nd = len(a["ragged_values_types"]), a["Nsparse"], len(a["dense_types"])
    order = a["input_order"]
    order = order.decode() if isinstance(order, bytes) else order
    r_vals, r_splits = args[:nr], args[nr : 2 * nr]
    pos = 2 * nr
    s_ind, s_vals, s_shape = (
        args[pos : pos + ns],
        args[pos + ns : pos + 2 * ns],
        args[pos + 2 * ns : pos + 3 * ns],
    )
    dense = [np.asarray(d) for d in args[pos + 3 * ns : pos + 3 * ns + nd]]
    ragged = iter(
        _ragged_as_sparse(np.asarray(v), np.asarray(s)) for v, s in zip(r_vals, r_splits)
    )
    sparse = iter(
        (np.asarray(i), np.asarray(v), np.asarray(s)) for i, v, s in zip(s_ind, s_vals, s_shape)
    )
    dense_it = iter(dense)
    # Every input as a sparse column, in the caller's order (`input_order`: R, S, D).
    indices, values, shapes = [], [], []
    for kind in order:
        if kind == "D":
            d = next(dense_it)
            n, w = d.shape[0], d.shape[1] if d.ndim > 1 else 1
            rows = np.repeat(np.arange(n), w)
            cols = np.tile(np.arange(w), n)
            part = (np.stack([rows, cols], 1).reshape(-1, 2), d.reshape(-1), np.array([n, w]))
        else:
            part = next(ragged if kind == "R" else sparse)
        indices.append(part[0].astype(np.int64))
        values.append(part[1])
        shapes.append(part[2].astype(np.int64))
    batches = {int(s[0]) for s in shapes}
    if len(batches) > 1:
        raise _invalid("Expected all inputs to have the same number of rows (batch size)")
    parts = (indices, values, shapes, [])
    if a["hashed_output"]:
        key, nb = int(a["hash_key"]) & sparse_cross_ops._M, int(a["num_buckets"])
        fns = [sparse_cross_ops._v1_feature] * len(values)
        result = await ctx.compute(sparse_cross_ops._hashed_cross, parts, fns, key, nb)
    else:
        result = await ctx.compute(sparse_cross_ops._string_cross, parts, b"_X_")
    out_indices, out_values, out_shape = result
    batch = batches.pop() if batches else 0
    counts = (
        np.bincount(out_indices[:, 0], minlength=batch)
        if len(out_indices)
        else np.zeros(batch, np.int64)
    )
    split_np = a["out_row_splits_type"].as_numpy_dtype
    return out_values, np.concatenate([[0], np.cumsum(counts)]).astype(split_np)


# -- RaggedCountSparseOutput ------------------------------------------------------------------


RaggedCountSparseOutput = register_op(
    "RaggedCountSparseOutput",
    inputs=["splits: int64", "values: T", "weights: output_type"],
    outputs=["output_indices: int64", "output_values: output_type", "output_dense_shape: int64"],
    attrs={
        "T": TypeConstraint([dtypes.int32, dtypes.int64]),
        "minlength": -1,
        "maxlength": -1,
        "binary_output": REQUIRED,
        "output_type": TypeConstraint(
            [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]
        ),
    },
    shape_fn=lambda op: [tensor_shape.TensorShape([None, 2]), _vec(), _vec(2)],
)
NotDifferentiable("RaggedCountSparseOutput")


@RaggedCountSparseOutput.kernel("CPU")
async def _ragged_count(ctx, splits, values, weights):
    splits, values = np.asarray(splits, np.int64).reshape(-1), np.asarray(values).reshape(-1)
    if splits.size and splits[0] != 0:
        raise _invalid(f"Splits must start with 0, not with {splits[0]}")
    if splits.size and splits[-1] != values.size:
        raise _invalid(
            f"Splits must end with the number of values, got {splits[-1]} instead of {values.size}"
        )
    w = count_ops._weights(weights, values.shape)
    batch = splits.size - 1
    rows = np.repeat(np.arange(batch), np.diff(splits))
    out_dtype = np.dtype(ctx.attrs["output_type"].as_numpy_dtype)
    return await ctx.device.compute(
        count_ops._count, rows, values, w, batch, 2, ctx.attrs, out_dtype
    )


# -- the variant encoding ---------------------------------------------------------------------


class RaggedComponents:
    """One encoded ragged value (TF's RaggedTensorVariant): its row splits, outermost
    first, and its flat values.  Held, never copied, by a variant tensor."""

    __slots__ = ("splits", "values")

    def __init__(self, splits, values):
        self.splits = tuple(splits)
        self.values = values

    def __repr__(self) -> str:
        return f"RaggedComponents(splits={list(self.splits)}, values={self.values!r})"


def _to_variant_shape(op):
    if not op._attr("batched_input"):
        return [tensor_shape.TensorShape([])]
    if op._attr("RAGGED_RANK") == 0:
        return [tensor_shape.TensorShape([None])]
    n = op.inputs[0].shape[0].value
    return [_vec(None if n is None else n - 1)]


RaggedTensorToVariant = register_op(
    "RaggedTensorToVariant",
    inputs=["rt_nested_splits: RAGGED_RANK * Tsplits", "rt_dense_values: Tvalues"],
    outputs=["encoded_ragged: variant"],
    attrs={"RAGGED_RANK": REQUIRED, "Tvalues": ANY, "Tsplits": _SPLITS, "batched_input": REQUIRED},
    shape_fn=_to_variant_shape,
)


def _variant_array(items: list, shape) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items if items else []
    return out.reshape(shape)


@RaggedTensorToVariant.kernel("CPU")
async def _ragged_to_variant(ctx, *args):
    splits = [np.asarray(s) for s in args[:-1]]
    values = np.asarray(args[-1])
    if not ctx.attrs["batched_input"]:
        if values.ndim == 0:
            raise _invalid("rt_dense_values must have rank at least 1")
        return _variant_array([RaggedComponents(splits, values)], ())
    if not splits:  # each row of the values is one element
        if values.ndim == 0:
            raise _invalid("rt_dense_values must have rank at least 1")
        return _variant_array([RaggedComponents([], v) for v in values], (values.shape[0],))
    _check_splits(splits, values.shape[0])
    items = []
    for row in range(splits[0].size - 1):
        if splits[1:]:
            lo, hi = splits[0][row], splits[0][row + 1]
            inner, positions = _slice_rows(splits[1:], int(lo), int(hi))
            items.append(RaggedComponents(inner, values[positions]))
        else:
            items.append(RaggedComponents([], values[splits[0][row] : splits[0][row + 1]]))
    return _variant_array(items, (len(items),))


def _slice_rows(splits: list[np.ndarray], lo: int, hi: int):
    """(splits, value positions) of rows lo:hi of a ragged value."""
    out = []
    for s in splits:
        part = s[lo : hi + 1]
        out.append((part - part[0]).astype(s.dtype))
        lo, hi = int(part[0]), int(part[-1])
    return out, np.arange(lo, hi)


@RaggedTensorToVariant.gradient
def _ragged_to_variant_grad(op, encoded_grad):
    n = op._attr("RAGGED_RANK")
    splits = op.inputs[0] if n else ops.convert_to_tensor(np.zeros([0], np.int64))
    values = op.inputs[-1]
    shape = ops.apply_op("Shape", [values]).outputs[0]
    grad = ops.apply_op(
        "RaggedTensorToVariantGradient",
        [encoded_grad, splits, shape],
        {"Tvalues": values.dtype},
    ).outputs[0]
    return [None] * n + [grad]


RaggedTensorFromVariant = register_op(
    "RaggedTensorFromVariant",
    inputs=["encoded_ragged: variant"],
    outputs=["output_nested_splits: output_ragged_rank * Tsplits", "output_dense_values: Tvalues"],
    attrs={
        "input_ragged_rank": REQUIRED,
        "output_ragged_rank": REQUIRED,
        "Tvalues": ANY,
        "Tsplits": _SPLITS,
    },
    shape_fn=lambda op: [_vec()] * op._attr("output_ragged_rank") + [tensor_shape.unknown_shape()],
)


def _decode_one(item, dtype, want_rank: int) -> RaggedComponents:
    if not isinstance(item, RaggedComponents):
        raise _invalid("Input Tensor does not hold a RaggedTensorVariant")
    got = dtypes.string if item.values.dtype == object else dtypes.as_dtype(item.values.dtype)
    if got != dtype:
        raise _invalid(
            f"Expected values Tensor dtype: {_type_name(dtype)}, found: {_type_name(got)}"
        )
    if len(item.splits) != want_rank:
        raise _invalid(
            f"Encoded input RaggedTensorVariant has ragged_rank={len(item.splits)}.  Expected "
            f"ragged_rank={want_rank}."
        )
    return item


@RaggedTensorFromVariant.kernel("CPU")
async def _ragged_from_variant(ctx, encoded):
    a = ctx.attrs
    encoded = np.asarray(encoded, dtype=object)
    out_rank, in_rank = a["output_ragged_rank"], a["input_ragged_rank"]
    if in_rank == -1:
        in_rank = out_rank - encoded.ndim
    if in_rank + encoded.ndim != out_rank:
        raise _invalid(
            "output_ragged_rank must be equal to input_ragged_rank + encoded_ragged.dims(); "
            f"output_ragged_rank: {out_rank}, input_ragged_rank: {in_rank}, "
            f"encoded_ragged.dims(): {encoded.ndim}"
        )
    split_np = a["Tsplits"].as_numpy_dtype
    items = [_decode_one(x, a["Tvalues"], in_rank) for x in encoded.reshape(-1).tolist()]
    if encoded.ndim == 0:
        return _outputs([*(s.astype(split_np) for s in items[0].splits), items[0].values])
    # The encoded tensor's dimensions become the outer partitions: all uniform but the
    # last, whose rows are the elements (each element's own rows, concatenated).
    outer = _uniform_levels(encoded.shape, split_np)
    row_counts = [len(x.splits[0]) - 1 if x.splits else len(x.values) for x in items]
    levels = [np.concatenate([[0], np.cumsum(row_counts)]).astype(split_np)]
    for k in range(in_rank):
        pieces, offset = [np.zeros(1, split_np)], 0
        for x in items:
            s = np.asarray(x.splits[k], np.int64)
            pieces.append((s[1:] + offset).astype(split_np))
            offset += int(s[-1])
        levels.append(np.concatenate(pieces))
    if items:
        values = np.concatenate([np.asarray(x.values) for x in items])
    else:
        values = np.zeros([0], a["Tvalues"].as_numpy_dtype)
    return _outputs([*outer, *levels, values])


def _uniform_levels(shape, split_np) -> list[np.ndarray]:
    """Splits of the encoded tensor's leading dimensions (all but the last): uniform."""
    out, rows = [], 1
    for d in shape[:-1]:
        out.append(np.arange(rows + 1, dtype=np.int64).astype(split_np) * d)
        rows *= d
    return out


@RaggedTensorFromVariant.gradient
def _ragged_from_variant_grad(op, *grads):
    n = op._attr("output_ragged_rank")
    splits = list(op.outputs[:n])
    in_rank = op._attr("input_ragged_rank")
    encoded = op.inputs[0]
    batched = encoded.shape.ndims != 0 if encoded.shape.ndims is not None else in_rank != n
    grad = grads[-1]
    if grad is None:
        return [None]
    return [
        ops.apply_op(
            "RaggedTensorToVariant",
            [splits, grad],
            {"RAGGED_RANK": n, "batched_input": bool(batched)},
        ).outputs[0]
    ]


RaggedTensorToVariantGradient = register_op(
    "RaggedTensorToVariantGradient",
    inputs=["encoded_ragged_grad: variant", "row_splits: Tsplits", "dense_values_shape: int32"],
    outputs=["dense_values_grad: Tvalues"],
    attrs={"Tvalues": ANY, "Tsplits": _SPLITS},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("RaggedTensorToVariantGradient")


@RaggedTensorToVariantGradient.kernel("CPU")
async def _ragged_to_variant_gradient(ctx, encoded_grad, row_splits, dense_values_shape):
    encoded = np.asarray(encoded_grad, dtype=object).reshape(-1)
    shape = [int(d) for d in np.asarray(dense_values_shape).reshape(-1)]
    dt = ctx.attrs["Tvalues"].as_numpy_dtype
    out = np.zeros(shape, dt)
    splits = np.asarray(row_splits, np.int64).reshape(-1)
    pieces = [x.values if isinstance(x, RaggedComponents) else x for x in encoded.tolist()]
    if pieces and all(p is not None for p in pieces):
        # (the elements' values, in order, are the flat values: each a run of them)
        whole = np.concatenate([np.asarray(p, dt).reshape(-1, *shape[1:]) for p in pieces])
        if whole.shape == tuple(shape):
            return whole
    for i, p in enumerate(pieces):
        if p is None:
            continue
        p = np.asarray(p, dt)
        start = int(splits[i]) if i < splits.size else 0
        out[start : start + p.shape[0]] = p
    return out
