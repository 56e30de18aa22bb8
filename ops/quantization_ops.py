"""TF's float <-> quantized conversions: QuantizeV2 and Dequantize (modes MIN_COMBINED,
MIN_FIRST, SCALED; per tensor or along an axis) and QuantizedConcat.  TF registers no
gradient for any of them, so tf.gradients through them raises LookupError here too.

Invariants:
- Every float step is float32 in TF's order of operations, with float64 only where TF's
  C++ goes through double, and subnormal results flushed to zero as TF's CPU threads do,
  so the results are TF's bits.
- A quantized tensor (qint8, quint8, qint16, quint16, qint32) is a NumPy one-field record
  of its storage integer (dtypes.py); kernels compute on the integer and return a new
  array viewed as the record type.
"""

from __future__ import annotations

import collections

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.fake_quant_ops import (
    _F32,
    _invalid,
    _merge_dim,
    _round_away,
    _shape_str,
    _with_rank,
    _with_rank_at_least,
)
from asyncflow.ops.math_helpers import _quiet
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = ["quantize", "quantize_v2", "dequantize", "quantized_concat"]

_QUANT_TYPES = TypeConstraint(["qint8", "quint8", "qint32", "qint16", "quint16"])

# -- QuantizeV2 / Dequantize -------------------------------------------------------------

_MODES = ("MIN_COMBINED", "MIN_FIRST", "SCALED")


def _storage(dt: dtypes.DType) -> np.dtype:
    """The integer a quantized dtype stores (qint8: int8)."""
    record = np.dtype(dt.as_numpy_dtype)
    return record.fields[record.names[0]][0]


def _plain(x):
    """A quantized record array as its integer field (a plain integer array as is)."""
    names = getattr(x.dtype, "names", None)
    return x.view(x.dtype.fields[names[0]][0]) if names else x


def _attr_str(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _check_mode(ctx) -> str:
    mode = _attr_str(ctx.attrs["mode"])
    if mode not in _MODES:
        raise _invalid(
            f"Mode string must be 'MIN_COMBINED', 'MIN_FIRST', or 'SCALED', is '{mode}'"
        )
    return mode


def _minmax_shape(op, axis: int):
    """TF's QuantizeV2 / Dequantize shape function: min and max are scalars (a vector
    of the input's axis dimension with an axis)."""
    if axis < -1:
        raise ValueError(f"axis should be at least -1, got {axis}")
    rank = 0 if axis == -1 else 1
    lo = _with_rank(op.inputs[1].shape, rank)
    _with_rank(op.inputs[2].shape, rank)
    if axis != -1:
        x = _with_rank_at_least(op.inputs[0].shape, axis + 1)
        depth = _merge_dim(lo[0], op.inputs[2].shape[0])
        if x.ndims is not None:
            depth = _merge_dim(depth, x[axis])
        lo = tensor_shape.TensorShape([depth])
    return lo


def _check_choice(op, attr: str, choices) -> None:
    """TF's build-time check of a string attr with allowed values."""
    value = _attr_str(op._attr(attr))
    if value not in choices:
        allowed = ", ".join(f'"{c}"' for c in choices)
        raise ValueError(
            f"Attr '{attr}' of '{op.type}' Op passed string '{value}' not in: {allowed}."
        )


def _quantize_shape(op):
    _check_choice(op, "mode", _MODES)
    _check_choice(op, "round_mode", ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"))
    minmax = _minmax_shape(op, int(op._attr("axis")))
    return [op.inputs[0].shape, minmax, minmax]


def _adjusted_range(lo, hi, ensure_minimum_range):
    """QuantizeV2's range: it holds 0, and is at least a small epsilon wide."""
    if hi < lo:
        raise _invalid("input_max_range must be larger than input_min_range.")
    lo32 = min(_F32(0), lo)
    eps = max(_F32(1), max(abs(lo), abs(hi))) * _F32(ensure_minimum_range)
    hi32 = max(_F32(0), max(hi, _F32(lo32 + eps)))
    return lo32, hi32


def _limits(dt: dtypes.DType) -> tuple[int, int]:
    info = np.iinfo(_storage(dt))
    return int(info.min), int(info.max)


def _f2q_min_first(x, lo, hi, dt):
    """FloatToQuantizedStruct + QUANTIZE_WITH_EIGEN (MIN_FIRST): the range's minimum
    is rounded before it is subtracted."""
    low, high = _limits(dt)
    bits = np.dtype(_storage(dt)).itemsize * 8
    steps = float(1 << bits)
    scale = _F32((steps - 1.0) / float(_F32(hi - lo))) if hi != lo else _F32(0)
    min_scaled = _round_away(np, np.asarray(_F32(lo * scale)))[()]
    lower = max(_F32(low), _F32(-2.147483648e09))
    upper = min(_F32(high), _F32(2.147483520e09))
    q = _round_away(np, x * scale) - _F32(min_scaled - _F32(low))
    q = np.minimum(np.maximum(q, lower), upper)
    return q.astype(np.int32)


def _q2f_min_first(q, lo, hi, dt):
    """QuantizedToFloatStruct + DEQUANTIZE_WITH_EIGEN (MIN_FIRST)."""
    low, _ = _limits(dt)
    bits = np.dtype(_storage(dt)).itemsize * 8
    steps = float(1 << bits)
    scale = _F32(float(_F32(hi - lo)) / (steps - 1.0))
    if hi == lo:
        min_rounded = _F32(lo)
    else:
        min_rounded = _F32(_round_away(np, np.asarray(_F32(lo / scale)))[()] * scale)
    offset = _F32(min_rounded - _F32(_F32(low) * scale))
    return offset + q.astype(_F32) * scale


def _quantize_slice(x, lo, hi, dt, mode, round_mode, narrow, ensure):
    """One slice (the whole tensor without an axis): (integers, output min, output max)."""
    low, high = _limits(dt)
    signed = low < 0
    in_lo, in_hi = _F32(lo), _F32(hi)
    lo, hi = _adjusted_range(in_lo, in_hi, ensure)
    if mode == "MIN_FIRST":
        return _f2q_min_first(x, lo, hi, dt), lo, hi
    if mode == "MIN_COMBINED":
        scale = _F32((float(high) - float(low)) / float(_F32(hi - lo)))
        v = (np.maximum(np.minimum(x, hi), lo) - lo) * scale
        if signed:
            half = _F32((float(high) - float(low) + 1) / 2.0)
            return _round_away(np, v - half), lo, hi
        return np.trunc(v + _F32(0.5)), lo, hi
    # SCALED: symmetric around zero, one scale for the side that needs the smaller one
    qmin, qmax = low + (1 if narrow else 0), high
    big = _F32(np.finfo(np.float32).max)
    from_min = _F32(qmin) / lo if _F32(qmin) * lo > 0 else big
    from_max = _F32(qmax) / hi if _F32(qmax) * hi > 0 else big
    scale = min(from_min, from_max)
    lo, hi = _F32(_F32(qmin) / scale), _F32(_F32(qmax) / scale)
    v = np.maximum(np.minimum(x, hi), lo) * scale
    v = np.rint(v) if round_mode == "HALF_TO_EVEN" else _round_away(np, v)
    return v, lo, hi


def _to_int(v: np.ndarray, dt) -> np.ndarray:
    """Eigen's float -> integer cast: truncation of what is in range; out of range (only
    qint32's top MIN_COMBINED value, 2^31) is INT_MIN, as x86 converts it."""
    low, high = _limits(dt)
    if v.dtype.kind == "f":
        v = np.where((v >= low) & (v <= high), v, low).astype(np.int64)
    return v.astype(_storage(dt))


def _slices(shape, axis: int):
    """Index tuples of each slice along `axis` (one slice, the whole array, for -1)."""
    if axis == -1:
        return [(...,)]
    return [(slice(None),) * axis + (i,) for i in range(shape[axis])]


def _check_axis_ranges(x, lo, hi, axis):
    if axis > -1:
        if x.ndim <= axis:
            raise _invalid(
                "Axis is on a zero-based index, so its value must always be less than number "
                f"of input's dims, but given axis value was {axis} and input's dims was {x.ndim}"
            )
        n = x.shape[axis]
        for name, v in (("min_range", lo), ("max_range", hi)):
            if v.ndim != 1:
                raise _invalid(
                    f"If axis is specified, {name} must be a 1-D tensor whose size matches "
                    f"the axis dimension of the input and output tensors, but {name} dims "
                    f"are {v.ndim}"
                )
            if v.shape[0] != n:
                raise _invalid(
                    f"If axis is specified, {name} must be a 1-D tensor whose size matches "
                    f"the axis dimension of the input and output tensors, but {name} is a "
                    f"1-D tensor of size {v.shape[0]} and input's axis dimension is of size {n}"
                )
    else:
        for name, v in (("min_range", lo), ("max_range", hi)):
            if v.size != 1:
                raise _invalid(
                    f"If axis is not specified, {name} must contain a single float element, "
                    f"but it contains {v.size} elements"
                )


QuantizeV2 = register_op(
    "QuantizeV2",
    inputs=["input: float32", "min_range: float32", "max_range: float32"],
    outputs=["output: T", "output_min: float32", "output_max: float32"],
    attrs={
        "T": _QUANT_TYPES,
        "mode": "MIN_COMBINED",
        "round_mode": "HALF_AWAY_FROM_ZERO",
        "narrow_range": False,
        "axis": -1,
        "ensure_minimum_range": 0.01,
    },
    shape_fn=_quantize_shape,
)


def _quantize(x, lo, hi, dt, mode, round_mode, narrow, axis, ensure):
    out = np.empty(x.shape, _storage(dt))
    out_lo = np.empty(lo.shape if axis > -1 else (), _F32)
    out_hi = np.empty_like(out_lo)
    los, his = lo.reshape(-1), hi.reshape(-1)
    for i, index in enumerate(_slices(x.shape, axis)):
        q, a, b = _quantize_slice(x[index], los[i], his[i], dt, mode, round_mode, narrow, ensure)
        out[index] = _to_int(q, dt)
        out_lo.reshape(-1)[i], out_hi.reshape(-1)[i] = a, b
    return out.view(dt.as_numpy_dtype), out_lo, out_hi


@QuantizeV2.kernel("CPU")
async def _quantize_v2(ctx, x, lo, hi):
    a = ctx.attrs
    mode = _check_mode(ctx)
    round_mode = _attr_str(a["round_mode"])
    if round_mode not in ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"):
        raise _invalid(
            f"Round mode string must be 'HALF_AWAY_FROM_ZERO' or 'HALF_TO_EVEN', is '{round_mode}'"
        )
    if round_mode == "HALF_TO_EVEN" and mode != "SCALED":
        raise _invalid(
            f"Round mode 'HALF_TO_EVEN' only supported for mode 'SCALED', but mode is '{mode}'."
        )
    x, lo, hi = (np.asarray(v, _F32) for v in (x, lo, hi))
    axis = int(a["axis"])
    _check_axis_ranges(x, lo, hi, axis)
    if axis > -1 and x.shape[axis] != 1 and mode == "MIN_FIRST":
        raise errors.UnimplementedError(
            None, None, "MIN_FIRST mode is not implemented for Quantize with axis != -1."
        )
    dt = dtypes.as_dtype(a["T"])
    args = (x, lo, hi, dt, mode, round_mode, bool(a["narrow_range"]), axis)
    return await ctx.compute(_quiet, np, _quantize, *args, float(a["ensure_minimum_range"]))


def _dequantize_shape(op):
    _check_choice(op, "mode", _MODES)
    _minmax_shape(op, int(op._attr("axis")))
    return [op.inputs[0].shape]


Dequantize = register_op(
    "Dequantize",
    inputs=["input: T", "min_range: float32", "max_range: float32"],
    outputs=["output: dtype"],
    attrs={
        "T": _QUANT_TYPES,
        "mode": "MIN_COMBINED",
        "narrow_range": False,
        "axis": -1,
        "dtype": TypeConstraint(["bfloat16", "float32"], default="float32"),
    },
    shape_fn=_dequantize_shape,
)


_TINY = np.finfo(np.float32).tiny


def _ftz(v):
    """TF's CPU threads flush subnormal floats to zero (and read them as zero)."""
    return np.where(np.abs(v) < _TINY, np.copysign(_F32(0), v), v).astype(_F32)


def _dequantize_slice(q, lo, hi, dt, mode, narrow):
    low, high = _limits(dt)
    lo, hi = _F32(lo), _F32(hi)
    if mode == "MIN_FIRST":
        return _q2f_min_first(q, lo, hi, dt)
    if mode == "MIN_COMBINED":
        half = _F32(0) if low == 0 else _F32((_F32(high) - _F32(low) + _F32(1)) / _F32(2))
        scale = _F32(_F32(hi - lo) / _F32(_F32(high) - _F32(low)))
        return (q.astype(_F32) + half) * scale + lo
    qmin = low + (1 if narrow else 0)
    if low == 0:
        scale = _F32(hi / _F32(high))
    else:
        scale = max(_F32(lo / _F32(qmin)), _F32(hi / _F32(high)))
    return q.astype(_F32) * _ftz(scale)


def _dequantize(q, lo, hi, dt, mode, narrow, axis, out_dtype):
    out = np.empty(q.shape, _F32)
    los, his = lo.reshape(-1), hi.reshape(-1)
    for i, index in enumerate(_slices(q.shape, axis)):
        out[index] = _ftz(
            _dequantize_slice(q[index], _ftz(los[i]), _ftz(his[i]), dt, mode, narrow)
        )
    return out if out_dtype == dtypes.float32 else out.astype(out_dtype.as_numpy_dtype)


@Dequantize.kernel("CPU")
async def _dequantize_kernel(ctx, q, lo, hi):
    a = ctx.attrs
    mode = _check_mode(ctx)
    out_dtype = dtypes.as_dtype(a["dtype"])
    if out_dtype == dtypes.bfloat16 and mode != "MIN_COMBINED":
        raise _invalid(
            f"When output type is bfloat16, Mode string must be 'MIN_COMBINED', is '{mode}'"
        )
    q = _plain(np.asarray(q))
    lo, hi = np.asarray(lo, _F32), np.asarray(hi, _F32)
    axis = int(a["axis"])
    if axis >= q.ndim:
        raise _invalid(f"Axis must be less than input dimension({q.ndim}), got {axis}")
    n = 1 if axis == -1 else q.shape[axis]
    for name, v in (("input_min_tensor", lo), ("input_max_tensor", hi)):
        if v.size != n:
            raise _invalid(
                f"{name} must have as many elements as input on the dequantization axis "
                f"({axis}), got {v.size}, expected {n}"
            )
    if axis > -1 and mode == "MIN_FIRST":
        raise errors.UnimplementedError(
            None, None, "MIN_FIRST mode is not implemented for Dequantize with axis != -1."
        )
    dt = dtypes.as_dtype(a["T"])
    args = (q, lo, hi, dt, mode, bool(a["narrow_range"]), axis, out_dtype)
    return await ctx.compute(_quiet, np, _dequantize, *args)


# TF registers no gradient for QuantizeV2, Dequantize, QuantizedConcat (tf.gradients
# through them raises LookupError there, so here too).


def _concat_shape(op):
    n = (len(op.inputs) - 1) // 3
    values = op.inputs[1 : 1 + n]
    for t in op.inputs[1 + n :]:
        _with_rank(t.shape, 0)
    out = _concat_value_shape(op.inputs[0], values)
    scalar = tensor_shape.TensorShape([])
    return [out, scalar, scalar]


def _concat_value_shape(dim_t, values):
    dim = ops.constant_value(dim_t)
    ranks = {v.shape.ndims for v in values if v.shape.ndims is not None}
    if len(ranks) > 1:
        raise ValueError(f"Shape must be rank {min(ranks)} but is rank {max(ranks)}")
    if dim is None or not ranks:
        rank = ranks.pop() if ranks else None
        return (
            tensor_shape.unknown_shape(rank=rank)
            if rank is not None
            else tensor_shape.unknown_shape()
        )
    rank = ranks.pop()
    axis = int(dim)
    if not -rank <= axis < rank:
        raise ValueError(f"Expected concat_dim in range [{-rank}, {rank}), but got {axis}")
    axis %= rank
    dims = [None] * rank
    total = 0
    for v in values:
        if v.shape.ndims is None:
            total = None
            continue
        for k in range(rank):
            if k == axis:
                d = v.shape[k].value
                total = None if total is None or d is None else total + d
            else:
                dims[k] = _merge_dim(dims[k], v.shape[k]).value
    dims[axis] = total
    return tensor_shape.TensorShape(dims)


QuantizedConcat = register_op(
    "QuantizedConcat",
    inputs=[
        "concat_dim: int32",
        "values: N * T",
        "input_mins: N * float32",
        "input_maxes: N * float32",
    ],
    outputs=["output: T", "output_min: float32", "output_max: float32"],
    attrs={"N": REQUIRED, "T": TypeConstraint(None)},
    shape_fn=_concat_shape,
)


def _requantize(q, lo, hi, out_lo, out_hi, dt):
    """One input in the output's range: RequantizeCopier (memcpy when the ranges match,
    else dequantize and quantize again, MIN_FIRST's arithmetic)."""
    if lo == out_lo and hi == out_hi:
        return q.copy()
    return _f2q_min_first(_q2f_min_first(q, lo, hi, dt), out_lo, out_hi, dt)


def _quantized_concat(axis, values, los, his, dt):
    overall_lo = min([_F32(np.finfo(np.float32).max), *los])
    overall_hi = max([_F32(np.finfo(np.float32).min), *his])
    overall_lo = min(_F32(0), overall_lo)
    if _limits(dt)[0] < 0:  # signed: a range symmetric around zero
        largest = max(abs(overall_lo), abs(overall_hi))
        out_lo, out_hi = _F32(-largest), _F32(largest)
    else:
        out_lo, out_hi = overall_lo, overall_hi
    parts = [
        _to_int(_requantize(_plain(v), lo, hi, out_lo, out_hi, dt), dt)
        for v, lo, hi in zip(values, los, his)
    ]
    out = np.concatenate(parts, axis=axis)
    return out.view(dt.as_numpy_dtype), np.asarray(out_lo, _F32), np.asarray(out_hi, _F32)


@QuantizedConcat.kernel("CPU")
async def _quantized_concat_kernel(ctx, concat_dim, *args):
    n = int(ctx.attrs["N"])
    values = [np.asarray(v) for v in args[:n]]
    mins, maxes = args[n : 2 * n], args[2 * n :]
    concat_dim = np.asarray(concat_dim)
    if concat_dim.ndim != 0:
        raise _invalid(
            "Concat dim tensor should be a scalar integer, but got shape "
            + _shape_str(concat_dim.shape)
        )
    for name, ranges in (("input_mins", mins), ("input_maxes", maxes)):
        for i, v in enumerate(ranges):
            if np.ndim(v) != 0:
                raise _invalid(
                    f"{name}[{i}] must be a scalar, but got shape {_shape_str(np.shape(v))}"
                )
    rank = values[0].ndim
    axis = int(concat_dim)
    if not 0 <= axis < max(rank, 1):
        raise _invalid(f"ConcatOp : Concat dim is out of range: {axis} vs. {rank}")
    for i, v in enumerate(values[1:], 1):
        if v.ndim != rank:
            raise _invalid(
                "ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{_shape_str(values[0].shape)} vs. shape[{i}] = {_shape_str(v.shape)}"
            )
        for k in range(rank):
            if k != axis and v.shape[k] != values[0].shape[k]:
                raise _invalid(
                    "ConcatOp : Dimensions of inputs should match: shape[0] = "
                    f"{_shape_str(values[0].shape)} vs. shape[{i}] = {_shape_str(v.shape)}"
                )
    dt = ctx.op.outputs[0].dtype.base_dtype
    if dt not in (dtypes.quint8, dtypes.qint32):  # (TF's only QuantizedConcat kernels)
        raise _invalid(
            "No OpKernel was registered to support Op 'QuantizedConcat' with these attrs: "
            f"[T=DT_{dt.name.upper()}, N={n}]"
        )
    los = [_F32(np.asarray(v).reshape(())) for v in mins]
    his = [_F32(np.asarray(v).reshape(())) for v in maxes]
    return await ctx.compute(_quiet, np, _quantized_concat, axis, values, los, his, dt)


# -- builders ------------------------------------------------------------------------------


def _axis_attr(input, axis) -> int:  # noqa: A002
    if axis is None:
        return -1
    axis = int(axis)
    if axis < 0:
        rank = ops.convert_to_tensor(input).shape.ndims
        if rank is None:
            raise ValueError("input should have known rank to use negative axis.")
        axis %= rank
    return axis


def quantize_v2(
    input,  # noqa: A002
    min_range,
    max_range,
    T,  # noqa: N803 - TF's name
    mode="MIN_COMBINED",
    name=None,
    round_mode="HALF_AWAY_FROM_ZERO",
    narrow_range=False,
    axis=None,
    ensure_minimum_range=0.01,
):
    """`tf.quantize_v2` (op QuantizeV2): float input to quantized type T; returns
    (output, output_min, output_max), the range actually used.

    Raises:
      InvalidArgumentError (at run time): max_range < min_range, an unknown mode or
        round mode, HALF_TO_EVEN without SCALED, min/max not matching the axis.
      UnimplementedError (at run time): MIN_FIRST along an axis.
    """
    input = ops.convert_to_tensor(input, dtypes.float32, name="input")  # noqa: A001
    attrs = {
        "T": dtypes.as_dtype(T),
        "mode": mode,
        "round_mode": round_mode,
        "narrow_range": bool(narrow_range),
        "axis": _axis_attr(input, axis),
        "ensure_minimum_range": float(ensure_minimum_range),
    }
    op = ops.apply_op("QuantizeV2", [input, min_range, max_range], attrs, name=name)
    return _QuantizeV2Outputs(*op.outputs)


def quantize(
    input,  # noqa: A002
    min_range,
    max_range,
    T,  # noqa: N803 - TF's name
    mode="MIN_COMBINED",
    round_mode="HALF_AWAY_FROM_ZERO",
    name=None,
    narrow_range=False,
    axis=None,
    ensure_minimum_range=0.01,
):
    """`tf.quantization.quantize`: quantize_v2 with TF2's argument order."""
    return quantize_v2(
        input, min_range, max_range, T, mode=mode, name=name, round_mode=round_mode,
        narrow_range=narrow_range, axis=axis, ensure_minimum_range=ensure_minimum_range,
    )  # fmt: skip


def dequantize(
    input,  # noqa: A002
    min_range,
    max_range,
    mode="MIN_COMBINED",
    name=None,
    axis=None,
    narrow_range=False,
    dtype=dtypes.float32,
):
    """`tf.quantization.dequantize` (op Dequantize): a quantized tensor back to float32
    (or bfloat16, MIN_COMBINED only) in the range [min_range, max_range].

    Raises:
      InvalidArgumentError (at run time): an unknown mode, bfloat16 with another mode,
        min/max not matching the axis.
      UnimplementedError (at run time): MIN_FIRST along an axis.
    """
    input = ops.convert_to_tensor(input, name="input")  # noqa: A001
    attrs = {
        "mode": mode,
        "narrow_range": bool(narrow_range),
        "axis": _axis_attr(input, axis),
        "dtype": dtypes.as_dtype(dtype),
    }
    return ops.apply_op("Dequantize", [input, min_range, max_range], attrs, name=name).outputs[0]


def quantized_concat(concat_dim, values, input_mins, input_maxes, name=None):
    """`tf.quantization.quantized_concat`: quantized tensors concatenated after being
    requantized to one range (symmetric for signed types); returns (output, output_min,
    output_max)."""
    op = ops.apply_op(
        "QuantizedConcat",
        [concat_dim, list(values), list(input_mins), list(input_maxes)],
        {"N": len(values)},
        name=name,
    )
    return _QuantizedConcatOutputs(*op.outputs)


_QuantizeV2Outputs = collections.namedtuple("QuantizeV2", ["output", "output_min", "output_max"])
_QuantizedConcatOutputs = collections.namedtuple(
    "QuantizedConcat", ["output", "output_min", "output_max"]
)
