"""Sparse math: SparseReduceSum/Max (dense and *Sparse outputs), SparseSoftmax,
SparseSparseMaximum/Minimum, SparseSplit, SparseSegmentSum/Mean/SqrtN and
SparseDenseCwiseMul/Div/Add (SparseTensor's `*` and `/`), with TF's gradients and TF1
builders.

Reductions and the element-wise ops follow TF's CPU kernels: sums count only the
stored values (implicit zeros add nothing); max reduces the stored values only, and a
group with none gives 0 in the dense output and no entry in the sparse one; maximum and
minimum of two SparseTensors take the union of their indices with implicit zeros.
SparseSparseMaximum/Minimum have no gradient (TF raises NotImplementedError too).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops import math_ops  # noqa: F401 - the dense `*` overload wrapped below
from asyncflow.ops.segment_ops import _extreme_after_nan
from asyncflow.ops.sparse_ops import (
    _check_sparse,
    _invalid,
    _linear,
    _matching,
    _merge,
    _np,
    _order,
    _sp,
)
from asyncflow.registry import ANY, FLOATING, INDEX, NUMERIC, REAL, NotDifferentiable, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "sparse_reduce_sum",
    "sparse_reduce_sum_sparse",
    "sparse_reduce_max",
    "sparse_reduce_max_sparse",
    "sparse_softmax",
    "sparse_maximum",
    "sparse_minimum",
    "sparse_split",
    "sparse_segment_sum",
    "sparse_segment_mean",
    "sparse_segment_sqrt_n",
]


# -- reductions ---------------------------------------------------------------------------


def _axes(axes, rank):
    axes = np.asarray(axes, np.int64).reshape(-1)
    if ((axes < -rank) | (axes >= rank)).any():
        raise _invalid(
            f"Invalid reduction dimension {int(axes[0])}, for input with {rank} dimensions."
        )
    return sorted(set(int(a) % rank for a in axes))


def _groups(indices, values, shape, axes_in, keep_dims):
    """(kept-dims shape, output shape, group id of each entry, group keys in order)."""
    rank = shape.size
    axes = _axes(axes_in, rank) if np.size(axes_in) else list(range(rank))
    kept = [d for d in range(rank) if d not in axes]
    kept_shape = np.where(np.isin(np.arange(rank), axes), 1, shape)
    out_shape = kept_shape if keep_dims else shape[kept]
    sub = indices[:, kept]
    lin = _linear(sub, shape[kept])
    keys, group = np.unique(lin, return_inverse=True)
    return kept_shape, out_shape, kept, group.reshape(-1), keys


def _reduce(indices, values, shape, axes, keep_dims, kind):
    _check_sparse(indices, values, shape)
    kept_shape, out_shape, kept, group, keys = _groups(indices, values, shape, axes, keep_dims)
    if kind == "sum":
        red = np.zeros(len(keys), values.dtype)
        np.add.at(red, group, values)
    else:
        red = np.full(
            len(keys),
            -np.inf if values.dtype.kind == "f" else np.iinfo(values.dtype).min,
            values.dtype,
        )
        if values.dtype.kind == "f" and np.isnan(values).any():
            # TF folds each group in its reordered order (kept dims, then reduced ones),
            # where a NaN gives way to the next value: segment ops' rule.
            dims = kept + [d for d in range(shape.size) if d not in kept]
            order = np.lexsort([indices[:, d] for d in reversed(dims)])
            return (
                out_shape,
                kept,
                keys,
                _extreme_after_nan("Max", values[order], group[order], red),
            )
        np.maximum.at(red, group, values)
    return out_shape, kept, keys, red


def _reduce_op(op_type, kind, sparse_out):
    outputs = (
        ["output_indices: int64", "output_values: T", "output_shape: int64"]
        if sparse_out
        else ["output: T"]
    )
    op_def = register_op(
        op_type,
        inputs=[
            "input_indices: int64",
            "input_values: T",
            "input_shape: int64",
            "reduction_axes: int32",
        ],
        outputs=outputs,
        attrs={"keep_dims": False, "T": NUMERIC if kind == "sum" else REAL},
        shape_fn=(
            lambda op: [
                tensor_shape.TensorShape([None, None]),
                tensor_shape.TensorShape([None]),
                tensor_shape.TensorShape([None]),
            ]
        )
        if sparse_out
        else (lambda op: [tensor_shape.unknown_shape()]),
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, indices, values, shape, axes):
        indices, values, shape = _np(indices), _np(values), _np(shape)
        keep = ctx.attrs["keep_dims"]
        out_shape, kept, keys, red = _reduce(indices, values, shape, _np(axes), keep, kind)
        sub_shape = shape[kept]
        coords = (
            np.stack(np.unravel_index(keys, sub_shape), 1)
            if len(kept)
            else (np.zeros((len(keys), 0), np.int64))
        )
        if keep:
            full = np.zeros((len(keys), shape.size), np.int64)
            full[:, kept] = coords
            coords = full
        if sparse_out:
            return coords.astype(np.int64), red, out_shape.astype(np.int64)
        out = np.zeros(tuple(int(d) for d in out_shape), values.dtype)
        if out.ndim == 0:
            return np.asarray(red[0] if len(red) else 0, values.dtype)
        out[tuple(coords.T)] = red
        return out

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


SparseReduceSum = _reduce_op("SparseReduceSum", "sum", False)
SparseReduceSumSparse = _reduce_op("SparseReduceSumSparse", "sum", True)
SparseReduceMax = _reduce_op("SparseReduceMax", "max", False)
SparseReduceMaxSparse = _reduce_op("SparseReduceMaxSparse", "max", True)
# (SparseReduceSumSparse, SparseReduceMax and SparseReduceMaxSparse have no gradient in
# TF: tf.gradients through them raises LookupError.)


def _kept_dims_gather(indices, shape, axes, grad_kept):
    """grad_kept [kept dims, reduced dims as 1] read at each entry's reduced position."""
    kept_shape = _g.apply("Shape", grad_kept, out_type=dtypes.int64)
    scale = _g.apply("FloorDiv", shape, kept_shape)
    return _g.apply("GatherNd", grad_kept, _g.apply("FloorDiv", indices, scale))


@SparseReduceSum.gradient
def _sparse_reduce_sum_grad(op, grad):
    indices, values, shape, axes = op.inputs
    kept = ops.apply_op(
        "SparseReduceSum", [indices, _g.ones_like(values), shape, axes], {"keep_dims": True}
    ).outputs[0]
    grad_kept = _g.apply("Reshape", grad, _g.apply("Shape", kept))
    return [None, _kept_dims_gather(indices, shape, axes, grad_kept), None, None]


def _reduce_builder(op_type, sparse_out):
    def builder(
        sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None, name=None
    ):
        if reduction_axes is not None:
            if axis is not None:
                raise ValueError("Cannot specify both 'axis' and 'reduction_axes'.")
            axis = reduction_axes
        if keep_dims is not None:
            if keepdims is not None:
                raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'.")
            keepdims = keep_dims
        sp = _sp(sp_input)
        axes = [] if axis is None else axis
        axes_t = ops.convert_to_tensor(
            np.asarray(axes, np.int32).reshape(-1) if not isinstance(axes, ops.Tensor) else axes,
            dtype=dtypes.int32,
            name="reduction_axes",
        )
        attrs = {"keep_dims": bool(keepdims)}
        op = ops.apply_op(
            op_type, [sp.indices, sp.values, sp.dense_shape, axes_t], attrs, name=name
        )
        if sparse_out:
            return SparseTensor(*op.outputs)
        out = op.outputs[0]
        static = ops.constant_value(sp.dense_shape)
        if static is not None and not isinstance(axes, ops.Tensor):
            rank = len(static)
            red = (
                set(range(rank))
                if np.size(axes) == 0
                else {int(a) % rank for a in np.reshape(axes, -1)}
            )
            dims = [1 if d in red else int(s) for d, s in enumerate(static)]
            out.set_shape(dims if keepdims else [s for d, s in enumerate(dims) if d not in red])
        return out

    kind = "sum" if "Sum" in op_type else "max"
    builder.__doc__ = f"""The {kind} of a SparseTensor's stored values over `axis` (all when
    None){" as a SparseTensor" if sparse_out else ", dense"} (op {op_type}).

    Raises:
      TypeError: sp_input is not a SparseTensor.
      InvalidArgumentError: (when run) an axis outside the rank.
    """
    return builder


sparse_reduce_sum = _reduce_builder("SparseReduceSum", False)
sparse_reduce_sum_sparse = _reduce_builder("SparseReduceSumSparse", True)
sparse_reduce_max = _reduce_builder("SparseReduceMax", False)
sparse_reduce_max_sparse = _reduce_builder("SparseReduceMaxSparse", True)
for _n in (
    "sparse_reduce_sum",
    "sparse_reduce_sum_sparse",
    "sparse_reduce_max",
    "sparse_reduce_max_sparse",
):
    globals()[_n].__name__ = globals()[_n].__qualname__ = _n


# -- SparseSoftmax --------------------------------------------------------------------------

SparseSoftmax = register_op(
    "SparseSoftmax",
    inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64"],
    outputs=["output: T"],
    attrs={"T": FLOATING},
    shape_fn=lambda op: [op.inputs[1].shape],
)


@SparseSoftmax.kernel("CPU")
async def _sparse_softmax(ctx, indices, values, shape):
    indices, values, shape = _np(indices), _np(values), _np(shape)
    if shape.size < 2:
        raise _invalid(
            f"Input should have rank >= 2, but received shape: [{','.join(map(str, shape))}]"
        )
    _check_sparse(indices, values, shape)
    lin = _linear(indices[:, :-1], shape[:-1])
    keys, group = np.unique(lin, return_inverse=True)
    group = group.reshape(-1)
    mx = np.full(len(keys), -np.inf, values.dtype)
    np.maximum.at(mx, group, values)
    e = np.exp(values - mx[group])
    tot = np.zeros(len(keys), values.dtype)
    np.add.at(tot, group, e)
    return (e / tot[group]).astype(values.dtype)


@SparseSoftmax.gradient
def _sparse_softmax_grad(op, grad):
    indices, _, shape = op.inputs
    y = op.outputs[0]
    rank = _g.apply("Size", shape, out_type=dtypes.int32)
    last = _g.apply("Sub", rank, _g.constant(1, dtypes.int32))
    s = ops.apply_op(
        "SparseReduceSum",
        [indices, _g.apply("Mul", grad, y), shape, _g.apply("Reshape", last, [1])],
        {"keep_dims": True},
    ).outputs[0]
    per_entry = _kept_dims_gather(indices, shape, None, s)
    return [None, _g.apply("Mul", _g.apply("Sub", grad, per_entry), y), None]


def sparse_softmax(sp_input, name=None) -> SparseTensor:
    """Softmax over the stored values of each innermost row (implicit entries count as
    absent, not zero); the result keeps sp_input's indices.

    Raises:
      TypeError: sp_input is not a SparseTensor.
      InvalidArgumentError: (when run) rank below 2.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseSoftmax", [sp.indices, sp.values]) as scope:
        out = ops.apply_op(
            "SparseSoftmax", [sp.indices, sp.values, sp.dense_shape], name=scope
        ).outputs[0]
        return SparseTensor(sp.indices, out, sp.dense_shape)


# -- SparseSparseMaximum / Minimum --------------------------------------------------------


def _sparse_sparse(op_type, fn):
    op_def = register_op(
        op_type,
        inputs=[
            "a_indices: int64",
            "a_values: T",
            "a_shape: int64",
            "b_indices: int64",
            "b_values: T",
            "b_shape: int64",
        ],
        outputs=["output_indices: int64", "output_values: T"],
        attrs={"T": REAL},
        shape_fn=lambda op: [
            tensor_shape.TensorShape([None, None]),
            tensor_shape.TensorShape([None]),
        ],
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, a_idx, a_val, a_shape, b_idx, b_val, b_shape):
        a_idx, a_val, a_shape = _np(a_idx), _np(a_val), _np(a_shape)
        b_idx, b_val, b_shape = _np(b_idx), _np(b_val), _np(b_shape)
        if not np.array_equal(a_shape, b_shape):
            raise _invalid(
                "Operands' shapes do not match: got "
                f"[{','.join(map(str, a_shape))}] and [{','.join(map(str, b_shape))}]"
            )
        _check_sparse(a_idx, a_val, a_shape)
        _check_sparse(b_idx, b_val, b_shape)
        pa, pb = _order(a_idx), _order(b_idx)
        idx, from_a, from_b = _merge(a_idx[pa], b_idx[pb], a_shape)
        av = np.where(from_a >= 0, a_val[pa][np.maximum(from_a, 0)] if len(a_val) else 0, 0)
        bv = np.where(from_b >= 0, b_val[pb][np.maximum(from_b, 0)] if len(b_val) else 0, 0)
        return idx.astype(np.int64), fn(av, bv).astype(a_val.dtype)

    @op_def.gradient
    def _no_grad(op, *grads):
        raise NotImplementedError(f"Gradient for {op_type} is not implemented.")

    return op_def


SparseSparseMaximum = _sparse_sparse("SparseSparseMaximum", np.maximum)
SparseSparseMinimum = _sparse_sparse("SparseSparseMinimum", np.minimum)


def _sparse_sparse_builder(op_type):
    def builder(sp_a, sp_b, name=None) -> SparseTensor:
        a, b = _sp(sp_a, "sp_a"), _sp(sp_b, "sp_b")
        with ops.name_scope(name, op_type, [a.indices, b.indices]) as scope:
            b_vals = _matching(b.values, a.dtype, op_type, "b_values", "a_values")
            idx, vals = ops.apply_op(
                op_type,
                [a.indices, a.values, a.dense_shape, b.indices, b_vals, b.dense_shape],
                name=scope,
            ).outputs
            return SparseTensor(idx, vals, a.dense_shape)

    builder.__doc__ = f"""Element-wise {op_type[12:].lower()} of two SparseTensors of one
    shape over the union of their indices (implicit zeros take part).

    Raises:
      TypeError: an operand is not a SparseTensor.
      InvalidArgumentError: (when run) the shapes differ.
    """
    return builder


sparse_maximum = _sparse_sparse_builder("SparseSparseMaximum")
sparse_minimum = _sparse_sparse_builder("SparseSparseMinimum")
sparse_maximum.__name__ = sparse_maximum.__qualname__ = "sparse_maximum"
sparse_minimum.__name__ = sparse_minimum.__qualname__ = "sparse_minimum"


# -- SparseSplit ----------------------------------------------------------------------------

SparseSplit = register_op(
    "SparseSplit",
    inputs=["split_dim: int64", "indices: int64", "values: T", "shape: int64"],
    outputs=[
        "output_indices: num_split * int64",
        "output_values: num_split * T",
        "output_shape: num_split * int64",
    ],
    attrs={"num_split": 1, "T": ANY},
    shape_fn=lambda op: (
        [tensor_shape.TensorShape([None, None])] * op.get_attr("num_split")
        + [tensor_shape.TensorShape([None])] * op.get_attr("num_split")
        + [op.inputs[3].shape] * op.get_attr("num_split")
    ),
)
# (SparseSplit has no gradient in TF: LookupError.)


@SparseSplit.kernel("CPU")
async def _sparse_split(ctx, split_dim, indices, values, shape):
    indices, values, shape = _np(indices), _np(values), _np(shape)
    n = ctx.attrs["num_split"]
    dim = int(_np(split_dim))
    rank = shape.size
    if not -rank <= dim < rank:
        raise _invalid(f"Split dimension must be in range [{-rank}, {rank}), got {dim}")
    dim %= rank
    if n > shape[dim]:
        raise _invalid(f"Split dimension size {shape[dim]} is smaller than num_split {n}")
    _check_sparse(indices, values, shape)
    base, extra = divmod(int(shape[dim]), n)
    sizes = [base + (1 if k < extra else 0) for k in range(n)]
    starts = np.cumsum([0, *sizes[:-1]])
    out_idx, out_val, out_shape = [], [], []
    for start, size in zip(starts, sizes):
        keep = (indices[:, dim] >= start) & (indices[:, dim] < start + size)
        idx = indices[keep].copy()
        idx[:, dim] -= start
        s = shape.copy()
        s[dim] = size
        out_idx.append(idx.astype(np.int64))
        out_val.append(values[keep])
        out_shape.append(s.astype(np.int64))
    return (*out_idx, *out_val, *out_shape)


def sparse_split(
    keyword_required=None, sp_input=None, num_split=None, axis=None, name=None, split_dim=None
):
    """`num_split` SparseTensors along `axis` (the first dim % num_split parts one larger).

    Raises:
      ValueError: a positional argument, both axis and split_dim, or no num_split.
      TypeError: sp_input is not a SparseTensor.
    """
    if keyword_required is not None:
        raise ValueError("Keyword arguments are required for this function.")
    if split_dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'split_dim'.")
        axis = split_dim
    if num_split is None or axis is None:
        raise ValueError("sp_input, num_split and axis are required")
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseSplit", [sp.indices]) as scope:
        d = ops.convert_to_tensor(axis, dtype=dtypes.int64, name="split_dim")
        out = ops.apply_op(
            "SparseSplit",
            [d, sp.indices, sp.values, sp.dense_shape],
            {"num_split": int(num_split)},
            name=scope,
        ).outputs
        n = int(num_split)
        return [SparseTensor(out[k], out[n + k], out[2 * n + k]) for k in range(n)]


# -- SparseSegmentSum / Mean / SqrtN (and ...WithNumSegments) ------------------------------


def _segment_shape(op):
    data, indices, seg = (t.shape for t in op.inputs[:3])
    if indices.ndims == 1 and seg.ndims == 1:
        a, b = indices[0].value, seg[0].value
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"Dimension 0 in both shapes must be equal, but are {a} and {b}. "
                f"Shapes are [{a}] and [{b}]."
            )
    if data.ndims is None:
        return [tensor_shape.unknown_shape()]
    n = None
    if len(op.inputs) == 4:
        value = ops.constant_value(op.inputs[3])
        n = None if value is None else int(value)
    return [tensor_shape.TensorShape([n]).concatenate(data[1:])]


def _segment_rows(data, indices, seg, mode, num_segments):
    """The kernel's reduction, with TF's checks; num_segments None: the last id + 1."""
    if indices.shape != seg.shape:
        raise _invalid("segment_ids and indices should have same size.")
    n = num_segments if num_segments is not None else (int(seg[-1]) + 1 if len(seg) else 0)
    if len(seg) and (np.diff(seg) < 0).any():
        raise _invalid("segment ids are not increasing")
    if len(seg) and seg[0] < 0:
        raise _invalid(
            f"Segment id {int(seg[0])} out of range [0, {n}), possibly because "
            "'segment_ids' input is not sorted."
        )
    if len(seg) and seg[-1] >= n:
        raise _invalid("segment ids must be < num_segments")
    if len(indices) and ((indices < 0).any() or (indices >= data.shape[0]).any()):
        bad = int(np.flatnonzero((indices < 0) | (indices >= data.shape[0]))[0])
        raise _invalid(f"Bad: indices[{bad}] == {indices[bad]} out of range [0, {data.shape[0]})")
    out = np.zeros((n, *data.shape[1:]), data.dtype)
    np.add.at(out, seg, data[indices])
    if mode != "sum":
        counts = np.bincount(seg, minlength=n).astype(data.dtype)
        div = counts if mode == "mean" else np.sqrt(counts)
        div = np.where(counts == 0, 1, div).reshape(-1, *[1] * (data.ndim - 1))
        out = out / div
    return out.astype(data.dtype)


def _segment_op(op_type, mode, with_num_segments=False):
    inputs = ["data: T", "indices: Tidx", "segment_ids: Tsegmentids"]
    attrs = {"T": REAL if mode == "sum" else FLOATING, "Tidx": INDEX, "Tsegmentids": INDEX}
    if with_num_segments:
        inputs.append("num_segments: Tnumsegments")
        attrs["Tnumsegments"] = INDEX
    op_def = register_op(
        op_type, inputs=inputs, outputs=["output: T"], attrs=attrs, shape_fn=_segment_shape
    )

    @op_def.kernel("CPU", host_memory=("num_segments",) if with_num_segments else ())
    async def _kernel(ctx, data, indices, seg, *num_segments):
        data, indices, seg = _np(data), _np(indices).reshape(-1), _np(seg).reshape(-1)
        n = int(num_segments[0]) if num_segments else None
        return _segment_rows(data, indices, seg, mode, n)

    @op_def.gradient
    def _grad(op, grad):
        data, indices, seg = op.inputs[:3]
        picked = _g.apply("GatherV2", grad, seg, 0)
        if mode != "sum":
            ones = _g.apply("Cast", _g.ones_like(seg), DstT=data.dtype.base_dtype)
            n = _g.apply("Shape", grad, out_type=seg.dtype.base_dtype)[0]
            counts = _g.apply("UnsortedSegmentSum", ones, seg, n)
            if mode == "sqrt_n":
                counts = _g.apply("Sqrt", counts)
            per = _g.apply(
                "GatherV2", _g.apply("Maximum", counts, _g.constant(1, counts.dtype)), seg, 0
            )
            rank_rest = data.shape.ndims - 1 if data.shape.ndims is not None else 0
            per = _g.apply("Reshape", per, [-1] + [1] * rank_rest)
            picked = _g.apply("RealDiv", picked, per)
        dim0 = _g.apply("Shape", data, out_type=indices.dtype.base_dtype)[0]
        grads = [_g.apply("UnsortedSegmentSum", picked, indices, dim0), None, None]
        return grads + [None] * (len(op.inputs) - 3)

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


SparseSegmentSum = _segment_op("SparseSegmentSum", "sum")
SparseSegmentMean = _segment_op("SparseSegmentMean", "mean")
SparseSegmentSqrtN = _segment_op("SparseSegmentSqrtN", "sqrt_n")
SparseSegmentSumWithNumSegments = _segment_op("SparseSegmentSumWithNumSegments", "sum", True)
SparseSegmentMeanWithNumSegments = _segment_op("SparseSegmentMeanWithNumSegments", "mean", True)
SparseSegmentSqrtNWithNumSegments = _segment_op(
    "SparseSegmentSqrtNWithNumSegments", "sqrt_n", True
)


def _segment_builder(op_type, fn_name):
    def builder(data, indices, segment_ids, name=None, num_segments=None, sparse_gradient=False):
        # sparse_gradient: TF then returns data's gradient as IndexedSlices; the values
        # are the same dense ones here.
        del sparse_gradient
        inputs = [data, indices, segment_ids]
        if num_segments is not None:  # the op (and so TF's default name) WithNumSegments
            with ops.name_scope(name, f"{op_type}WithNumSegments", inputs) as scope:
                inputs.append(num_segments)
                return ops.apply_op(f"{op_type}WithNumSegments", inputs, name=scope).outputs[0]
        with ops.name_scope(name, op_type, inputs) as scope:
            return ops.apply_op(op_type, inputs, name=scope).outputs[0]

    builder.__name__ = builder.__qualname__ = fn_name
    builder.__doc__ = f"""Segments of rows `data[indices]` by sorted `segment_ids`
    ({fn_name[15:]}; op {op_type}, or {op_type}WithNumSegments given `num_segments`:
    that many output rows).

    Raises:
      ValueError: indices and segment_ids of different static lengths.
      InvalidArgumentError: (when run) ids not sorted or negative, an id not below
        num_segments, sizes that differ, an index out of range.
    """
    return builder


sparse_segment_sum = _segment_builder("SparseSegmentSum", "sparse_segment_sum")
sparse_segment_mean = _segment_builder("SparseSegmentMean", "sparse_segment_mean")
sparse_segment_sqrt_n = _segment_builder("SparseSegmentSqrtN", "sparse_segment_sqrt_n")


# -- SparseDenseCwiseMul / Div / Add: SparseTensor's `*` and `/` ----------------------------


def _cwise_kernel(fn):
    async def kernel(ctx, indices, values, shape, dense):
        indices, values, shape, dense = _np(indices), _np(values), _np(shape), _np(dense)
        _check_sparse(indices, values, shape)
        # The dense operand broadcasts to the sparse shape, never the other way.
        lead = len(shape) - dense.ndim
        if lead < 0 or any(d not in (1, s) for d, s in zip(dense.shape, shape[lead:])):
            raise _invalid(
                "SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible "
                f"shapes: [{','.join(map(str, shape))}] vs. "
                f"[{','.join(map(str, dense.shape))}]"
            )
        at = tuple(
            np.zeros(len(indices), np.int64) if d == 1 else indices[:, lead + k]
            for k, d in enumerate(dense.shape)
        )
        with np.errstate(all="ignore"):
            return fn(values, dense[at]).astype(values.dtype)

    return kernel


def _cwise_op(op_type, fn):
    op_def = register_op(
        op_type,
        inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64", "dense: T"],
        outputs=["output: T"],
        attrs={"T": NUMERIC},
        shape_fn=lambda op: [tensor_shape.TensorShape([op.inputs[1].shape[0].value])],
    )
    op_def.kernel("CPU", host_memory=("sp_shape",))(_cwise_kernel(fn))
    return op_def


SparseDenseCwiseMul = _cwise_op("SparseDenseCwiseMul", np.multiply)
SparseDenseCwiseDiv = _cwise_op("SparseDenseCwiseDiv", np.true_divide)
SparseDenseCwiseAdd = _cwise_op("SparseDenseCwiseAdd", np.add)
NotDifferentiable("SparseDenseCwiseAdd")  # (as TF)


def _cwise_grad(op, grad):
    """d values and d dense of values * dense[at] (or / dense[at]): dense's share summed
    over the positions it was broadcast to."""
    indices, values, shape, dense = op.inputs
    dense_full = _g.apply("BroadcastTo", dense, shape)
    picked = _g.apply("GatherNd", dense_full, indices)
    if op.type == "SparseDenseCwiseMul":
        d_values, d_picked = grad * picked, grad * values
    else:
        d_values = _g.apply("RealDiv", grad, picked)
        d_picked = -grad * _g.apply("RealDiv", values, _g.apply("Square", picked))
    d_full = _g.apply("ScatterNd", indices, d_picked, shape)
    dense_shape = _g.shape(dense, dtypes.int64)
    _, axes = ops.apply_op("BroadcastGradientArgs", [shape, dense_shape]).outputs
    d_dense = _g.reshape(_g.apply("Sum", d_full, axes), dense_shape)
    return [None, d_values, None, d_dense]


SparseDenseCwiseMul.gradient(_cwise_grad)
SparseDenseCwiseDiv.gradient(_cwise_grad)


def _cwise_operator(op_type, scope, true_div=False):
    def operator(sp_x, y):
        with ops.name_scope(None, scope, [sp_x.indices, sp_x.values, y]) as name:
            y = ops.convert_to_tensor(y, dtype=sp_x.dtype, name="y")
            values = sp_x.values
            if true_div and values.dtype.is_integer:  # TF's truediv: through floats
                wide = dtypes.float32 if values.dtype.size <= 2 else dtypes.float64
                values, y = _g.cast(values, wide), _g.cast(y, wide)
            out = ops.apply_op(
                op_type, [sp_x.indices, values, sp_x.dense_shape, y], name=name
            ).outputs[0]
            return SparseTensor(sp_x.indices, out, sp_x.dense_shape)

    operator.__name__ = operator.__qualname__ = f"__{scope}__"
    return operator


# TF overrides these operators of SparseTensor the same way (math_ops), and a dense
# tensor times a SparseTensor is the SparseTensor's product too.
SparseTensor.__mul__ = _cwise_operator("SparseDenseCwiseMul", "mul")
_dense_multiply = ops._overload("multiply")


def _multiply_dispatch(x, y):
    if isinstance(y, SparseTensor):
        return SparseTensor.__mul__(y, x)
    return _dense_multiply(x, y)


ops.register_overload("multiply", _multiply_dispatch)
SparseTensor.__div__ = _cwise_operator("SparseDenseCwiseDiv", "div")
SparseTensor.__truediv__ = _cwise_operator("SparseDenseCwiseDiv", "truediv", true_div=True)
