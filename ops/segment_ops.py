"""Segment reductions: Segment{Sum,Mean,Max,Min,Prod} (sorted ids), UnsortedSegment
{Max,Min,Prod} (UnsortedSegmentSum lives in gradient_ops) and TF's compositions
`unsorted_segment_mean` / `unsorted_segment_sqrt_n`.

Empty segments: the sorted ops give 0 (1 for Prod); the unsorted ones give the
reduction's identity (the lowest finite value for Max, the highest for Min, 1 for Prod).
Unsorted ops drop negative ids, as TF's kernels do.  The Prod gradients are TF's: a
zero's share is the product of the rest of its segment, and a segment with two or more
zeros passes no gradient.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import INDEX, NUMERIC, REAL, register_op

__all__ = [
    "segment_sum",
    "segment_mean",
    "segment_max",
    "segment_min",
    "segment_prod",
    "unsorted_segment_max",
    "unsorted_segment_min",
    "unsorted_segment_prod",
    "unsorted_segment_mean",
    "unsorted_segment_sqrt_n",
]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


_UFUNCS = {"Sum": np.add, "Prod": np.multiply, "Max": np.maximum, "Min": np.minimum}


def _identity(kind: str, dtype):
    dt = dtypes.as_dtype(dtype)
    if kind == "Sum" or kind == "Mean":
        return 0
    if kind == "Prod":
        return 1
    info = np.finfo(dt.as_numpy_dtype) if dt.is_floating else np.iinfo(dt.as_numpy_dtype)
    return info.min if kind == "Max" else info.max  # TF: the lowest/highest finite value


def _reduce(kind, data, ids, n):
    """out[k] = reduction of data rows whose id is k (ids 1-D, already validated)."""
    acc_dt = data.dtype
    out = np.full((n,) + data.shape[1:], _identity(kind, acc_dt), dtype=acc_dt)
    if kind == "Mean":
        np.add.at(out, ids, data)
        counts = np.bincount(ids, minlength=n).reshape((n,) + (1,) * (data.ndim - 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            out = (out / np.maximum(counts, 1)).astype(acc_dt)
        return out
    if kind in ("Max", "Min") and data.dtype.kind in "fc" and np.isnan(data).any():
        return _extreme_after_nan(kind, data, ids, out)
    _UFUNCS[kind].at(out, ids, data)
    return out


def _extreme_after_nan(kind, data, ids, out):
    """TF's kernels fold each segment in row order as acc = (x < acc) ? acc : x (Max;
    > for Min), which a NaN defeats both ways: a NaN takes over, and the next value
    replaces it.  So each column's result is the extreme of the values after its last
    NaN, or NaN when that NaN is the segment's last value."""
    n_rows = data.shape[0]
    flat = data.reshape(n_rows, -1)
    cols = np.broadcast_to(np.arange(flat.shape[1]), flat.shape)
    rows = np.broadcast_to(np.arange(n_rows)[:, None], flat.shape)
    seg = np.broadcast_to(ids[:, None], flat.shape)
    last_nan = np.full((out.shape[0], flat.shape[1]), -1)
    nan = np.isnan(flat)
    np.maximum.at(last_nan, (seg[nan], cols[nan]), rows[nan])
    keep = rows > last_nan[seg, cols]
    res = out.reshape(out.shape[0], -1)
    _UFUNCS[kind].at(res, (seg[keep], cols[keep]), flat[keep])
    last_row = np.full(out.shape[0], -1)
    np.maximum.at(last_row, ids, np.arange(n_rows))
    res[(last_nan >= 0) & (last_nan == last_row[:, None])] = np.nan
    return res.reshape(out.shape)


# -- sorted segment ops -------------------------------------------------------------------


def _sorted_shape(op):
    # (A length that differs from data's first dimension fails when run, as in TF.)
    # The segment count stays unknown even for constant ids, as TF's shape function has it.
    data, _ = op.inputs[0].shape.with_rank_at_least(1), op.inputs[1].shape.with_rank(1)
    return [tensor_shape.TensorShape([None]).concatenate(data[1:])]


def _sorted_op(kind: str, allowed):
    op_type = f"Segment{kind}"
    op_def = register_op(
        op_type,
        inputs=["data: T", "segment_ids: Tindices"],
        outputs=["output: T"],
        attrs={"T": allowed, "Tindices": INDEX},
        shape_fn=_sorted_shape,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, data, ids):
        data, ids = np.asarray(data), np.asarray(ids).astype(np.int64)
        if ids.ndim != 1 or data.ndim < 1 or ids.shape[0] != data.shape[0]:
            raise _invalid("segment_ids should be the same size as dimension 0 of input.")
        n = int(ids[-1]) + 1 if ids.size else 0
        if ids.size > 1 and bool((np.diff(ids) < 0).any()):
            raise _invalid("segment ids are not increasing")
        if ids.size and int(ids[0]) < 0:
            raise _invalid(
                f"Segment id {int(ids[0])} out of range [0, {n}), possibly because "
                "'segment_ids' input is not sorted."
            )
        out = _reduce(kind, data, ids, n)
        if kind != "Prod":  # TF: an empty segment is 0 (1 for a product)
            present = np.zeros(n, bool)
            present[ids] = True
            out[~present] = 0
        return out

    _kernel.__name__ = _kernel.__qualname__ = f"_segment_{kind.lower()}_kernel"
    return op_def


SegmentSum = _sorted_op("Sum", NUMERIC)
SegmentMean = _sorted_op("Mean", NUMERIC)
SegmentMax = _sorted_op("Max", REAL)
SegmentMin = _sorted_op("Min", REAL)
SegmentProd = _sorted_op("Prod", NUMERIC)


# -- unsorted segment ops -----------------------------------------------------------------


def _unsorted_shape(op):
    data, ids = op.inputs[0].shape, op.inputs[1].shape
    n = ops.constant_value(op.inputs[2])
    n = None if n is None else int(n)
    if data.ndims is None or ids.ndims is None:
        return [tensor_shape.unknown_shape()]
    data[: ids.ndims].merge_with(ids)
    return [tensor_shape.TensorShape([n]).concatenate(data[ids.ndims :])]


def _unsorted_op(kind: str, allowed):
    op_type = f"UnsortedSegment{kind}"
    op_def = register_op(
        op_type,
        inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
        outputs=["output: T"],
        attrs={"T": allowed, "Tindices": INDEX, "Tnumsegments": INDEX},
        shape_fn=_unsorted_shape,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, data, ids, num):
        data, ids, n = np.asarray(data), np.asarray(ids).astype(np.int64), int(num)
        if data.shape[: ids.ndim] != ids.shape:
            raise _invalid("data.shape = must start with segment_ids.shape")
        if n < 0:
            raise _invalid(f"Input num_segments == {n} must not be negative.")
        flat_ids = ids.reshape(-1)
        rows = data.reshape((flat_ids.size,) + data.shape[ids.ndim :])
        bad = np.flatnonzero(flat_ids >= n)
        if bad.size:
            i = int(bad[0])
            raise _invalid(f"segment_ids[{i}] = {flat_ids[i]} is out of range [0, {n})")
        keep = flat_ids >= 0  # TF drops negative ids
        return _reduce(kind, rows[keep], flat_ids[keep], n)

    _kernel.__name__ = _kernel.__qualname__ = f"_unsorted_segment_{kind.lower()}_kernel"
    return op_def


UnsortedSegmentMax = _unsorted_op("Max", REAL)
UnsortedSegmentMin = _unsorted_op("Min", REAL)
UnsortedSegmentProd = _unsorted_op("Prod", NUMERIC)


# -- gradients (TF's math_grad.py) -------------------------------------------------------------


def _gather(params, indices):
    return _g.apply("GatherV2", params, indices, _g.constant(0))


@SegmentSum.gradient
def _segment_sum_grad(op, grad):
    return [_gather(ops.convert_to_tensor(grad), op.inputs[1]), None]


@SegmentMean.gradient
def _segment_mean_grad(op, grad):
    data, ids = op.inputs
    ones = _g.apply("Fill", _g.apply("ExpandDims", _g.apply("Size", ids), _g.constant(0)),
                    _g.constant(1, data.dtype))  # fmt: skip
    counts = _g.apply("SegmentSum", ones, ids)
    rank = _g.apply("Rank", data)
    tail = _g.apply("Fill", _g.apply("ExpandDims", _g.apply("Sub", rank, _g.constant(1)),
                                     _g.constant(0)), _g.constant(1))  # fmt: skip
    counts = _g.reshape(counts, _g.concat([_g.constant([-1]), tail], 0))
    scaled = _g.apply("RealDiv", ops.convert_to_tensor(grad), counts)
    return [_gather(scaled, ids), None]


def _min_or_max_grad(op, grad):
    """The gradient goes to the inputs equal to their segment's result, split evenly
    among ties (TF's _SegmentMinOrMaxGrad / _UnsortedSegmentMinOrMaxGrad)."""
    data, ids = op.inputs[0], op.inputs[1]
    unsorted = len(op.inputs) == 3
    grad = ops.convert_to_tensor(grad)
    safe_ids = _g.apply("Maximum", ids, _g.zeros_like(ids)) if unsorted else ids
    picked = _g.apply("GatherV2", op.outputs[0], safe_ids, _g.constant(0))
    hit = _g.apply("Equal", data, picked)
    if unsorted:
        valid = _g.apply("GreaterEqual", ids, _g.zeros_like(ids))
        shape = _g.concat([_g.shape(ids), _g.apply("Fill", _g.apply("ExpandDims", _g.apply(
            "Sub", _g.apply("Rank", data), _g.apply("Rank", ids)), _g.constant(0)),
            _g.constant(1))], 0)  # fmt: skip
        hit = _g.apply("LogicalAnd", hit, _g.reshape(valid, shape))
    hits = _g.cast(hit, grad.dtype)
    if unsorted:
        ties = _g.apply("UnsortedSegmentSum", hits, safe_ids, op.inputs[2])
    else:
        ties = _g.apply("SegmentSum", hits, ids)
    share = _g.apply("RealDiv", grad, _g.apply("Maximum", ties, _g.ones_like(ties)))
    dx = _g.mul(_g.apply("GatherV2", share, safe_ids, _g.constant(0)), hits)
    return [dx, None] + ([None] if unsorted else [])


def _prod_grad(op, grad):
    """d prod / d x_i: the product of the segment's other entries (TF's _SegmentProdGrad
    and _UnsortedSegmentProdGrad): output / x_i, or for a zero x_i the product of the
    segment's non-zero entries; 0 throughout a segment with two or more zeros."""
    data, ids = op.inputs[0], op.inputs[1]
    unsorted = len(op.inputs) == 3
    grad = ops.convert_to_tensor(grad)
    seg = (lambda x, name: _g.apply(f"UnsortedSegment{name}", x, ids, op.inputs[2])) if (
        unsorted) else (lambda x, name: _g.apply(f"Segment{name}", x, ids))  # fmt: skip
    is_zero = _g.apply("Equal", data, _g.zeros_like(data))
    num_zeros = seg(_g.cast(is_zero, dtypes.int32), "Sum")
    grad = _g.apply("SelectV2", _g.apply("Greater", num_zeros, _g.constant(1)),
                    _g.zeros_like(grad), grad)  # fmt: skip
    non_zero = _g.apply("SelectV2", is_zero, _g.ones_like(data), data)
    non_zero_prod = seg(non_zero, "Prod")
    safe_ids = _g.apply("Maximum", ids, _g.zeros_like(ids)) if unsorted else ids
    others = _g.apply("SelectV2", is_zero, _gather(non_zero_prod, safe_ids),
                      _g.apply("RealDiv", _gather(op.outputs[0], safe_ids), non_zero))  # fmt: skip
    dx = _g.mul(_gather(grad, safe_ids), others)
    if unsorted:  # rows with a negative id took no part
        valid = _g.cast(_g.apply("GreaterEqual", ids, _g.zeros_like(ids)), dx.dtype)
        shape = _g.concat([_g.shape(ids), _g.apply("Fill", _g.apply("ExpandDims", _g.apply(
            "Sub", _g.apply("Rank", data), _g.apply("Rank", ids)), _g.constant(0)),
            _g.constant(1))], 0)  # fmt: skip
        dx = _g.mul(dx, _g.reshape(valid, shape))
    return [dx, None] + ([None] if unsorted else [])


SegmentProd.gradient(_prod_grad)
UnsortedSegmentProd.gradient(_prod_grad)
SegmentMax.gradient(_min_or_max_grad)
SegmentMin.gradient(_min_or_max_grad)
UnsortedSegmentMax.gradient(_min_or_max_grad)
UnsortedSegmentMin.gradient(_min_or_max_grad)


# -- builders ----------------------------------------------------------------------------------


def _sorted_builder(kind: str):
    def builder(data, segment_ids, name=None):
        return ops.apply_op(f"Segment{kind}", [data, segment_ids], name=name).outputs[0]

    builder.__doc__ = f"""The {kind.lower()} of each segment of `data`'s rows; `segment_ids`
    sorted (op Segment{kind}); an empty segment gives 0.

    Raises (when run): InvalidArgumentError for ids that are negative or not sorted."""
    return _dispatch.add_dispatch_support(builder)


def _unsorted_builder(kind: str):
    def builder(data, segment_ids, num_segments, name=None):
        if _ragged.is_ragged(data):
            return _ragged.unsorted_segment(kind, data, segment_ids, num_segments, name)
        return ops.apply_op(
            f"UnsortedSegment{kind}", [data, segment_ids, num_segments], name=name
        ).outputs[0]

    builder.__doc__ = f"""The {kind.lower()} of the rows of `data` with each id (op
    UnsortedSegment{kind}); negative ids are dropped.

    Raises (when run): InvalidArgumentError for an id >= num_segments."""
    return _dispatch.add_dispatch_support(builder)


segment_sum = _sorted_builder("Sum")
segment_mean = _sorted_builder("Mean")
segment_max = _sorted_builder("Max")
segment_min = _sorted_builder("Min")
segment_prod = _sorted_builder("Prod")
unsorted_segment_max = _unsorted_builder("Max")
unsorted_segment_min = _unsorted_builder("Min")
unsorted_segment_prod = _unsorted_builder("Prod")


def _segment_counts(data, segment_ids, num_segments):
    ones = _g.apply("OnesLike", segment_ids)
    counts = _g.apply("UnsortedSegmentSum", _g.cast(ones, data.dtype), segment_ids, num_segments)
    rank = _g.apply("Rank", data)
    tail = _g.apply("Fill", _g.apply("ExpandDims", _g.apply("Sub", rank, _g.apply(
        "Rank", segment_ids)), _g.constant(0)), _g.constant(1))  # fmt: skip
    shape = _g.concat([_g.apply("ExpandDims", _g.cast(num_segments, dtypes.int32),
                                _g.constant(0)), tail], 0)  # fmt: skip
    return _g.apply("Maximum", _g.reshape(counts, shape), _g.ones_like(_g.reshape(counts, shape)))


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """The mean of the rows of `data` with each id (TF's composition: sum / count)."""
    if _ragged.is_ragged(data):
        return _ragged.unsorted_segment("Mean", data, segment_ids, num_segments, name)
    with ops.name_scope(name, "UnsortedSegmentMean"):
        data = ops.convert_to_tensor(data)
        segment_ids = ops.convert_to_tensor(segment_ids)
        num_segments = ops.convert_to_tensor(num_segments)
        total = _g.apply("UnsortedSegmentSum", data, segment_ids, num_segments)
        counts = _segment_counts(data, segment_ids, num_segments)
        if data.dtype.is_integer:  # TF's `/` (truediv): integers divide in float64
            total, counts = _g.cast(total, dtypes.float64), _g.cast(counts, dtypes.float64)
        return _truediv(total, counts)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """The sum of the rows of `data` with each id over the square root of their count."""
    with ops.name_scope(name, "UnsortedSegmentSqrtN"):
        data = ops.convert_to_tensor(data)
        segment_ids = ops.convert_to_tensor(segment_ids)
        num_segments = ops.convert_to_tensor(num_segments)
        total = _g.apply("UnsortedSegmentSum", data, segment_ids, num_segments)
        counts = _segment_counts(data, segment_ids, num_segments)
        return _truediv(total, _g.apply("Sqrt", counts))


def _truediv(total, counts):
    # TF's `/`: an op named truediv, with the sum's shape (TF knows it by evaluating the
    # counts' constant shape)
    out = ops.apply_op("RealDiv", [total, counts], name="truediv").outputs[0]
    out.set_shape(total.shape)
    return out
