"""TF's uniform-quantized ops (`tf.raw_ops.UniformQuantize`, ...Dequantize, ...Requantize,
UniformQuantizedAdd, ...ClipByValue, ...Dot, ...DotHybrid, ...Convolution,
...ConvolutionHybrid), as TF 2.21's CPU kernels compute them.  A tensor is stored as
integer codes with a scale and a zero point, either one pair for the whole tensor
(quantization_axis -1, scalar scales) or one per index of quantization_axis (vectors as
long as that dimension).

Arithmetic, measured against TF on random inputs:
- quantize: the float32 product x * (1 / scale), plus 0.5 in float32, floored (so ties
  go up, and large values round as float32 does); a value beyond int32 (or NaN) becomes
  int32's lowest, then the zero point is added (wrapping) and the result clamped to
  [quantization_min_val, quantization_max_val] as max(min_val, min(max_val, v)).
- dequantize: (code - zero_point) in float32 times the scale.
- requantize (also each operand of Add, and the Dot's int32 sums): (code - zero_point)
  times the double input_scale / output_scale, plus 0.5, floored, plus the output zero
  point, clamped to the output's range.
- DotHybrid quantizes each row of its float lhs to int8 on its own (asymmetric: the range
  holds 0, the zero point taken from whichever end gives the smaller error, rounded half
  away from zero, in double), sums in int32, and gives float32(sum * row scale) * rhs scale;
  ConvolutionHybrid does the same with each batch element of its lhs.
- Convolution: XLA's general convolution of the codes less their zero points, in int32,
  requantized as the Dot's sums (lhs scale * rhs scale / output scale, in double).
TF registers no gradient for any of them; UniformRequantize runs only qint32 -> qint8 and
qint8 -> qint8 on a CPU (TF's "No OpKernel was registered" InvalidArgumentError otherwise).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import quantized_nn_ops as _qnn
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_F32 = np.float32
_I32 = np.iinfo(np.int32)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _axis_params(scales, zero_points, axis: int, shape) -> tuple[np.ndarray, np.ndarray]:
    """The scales and zero points checked as TF checks them for a tensor of `shape`,
    shaped to broadcast against it (per-axis: along `axis`)."""
    s = np.asarray(scales, _F32)
    z = np.asarray(zero_points, np.int32)
    if axis < -1:
        raise _invalid(f"quantization_axis must be >= -1, given: {axis}")
    if axis >= len(shape):
        raise _invalid(
            f"quantization_axis must be -1 or in range [0, input.rank), but given {axis}"
        )
    if s.shape != z.shape:
        raise _invalid(
            f"scales and zero_points shape must be same, but given scales shape {_dims(s.shape)} "
            f"and zero_points shape {_dims(z.shape)}"
        )
    if axis == -1:
        if s.ndim != 0:
            raise _invalid(
                "If quantization_axis is -1, scales and zero_points must be scalar tensors, but "
                f"given scales shape {_dims(s.shape)} and zero_points shape {_dims(z.shape)}"
            )
        return s, z
    if s.ndim != 1 or s.shape[0] != shape[axis]:
        raise _invalid(
            "If quantization_axis is not -1, scales and zero_points must be a tensor of rank 1 "
            "and the size must be equal to the input.dim_size(quantization_axis), but given "
            f"quantization_axis {axis}, scales shape {_dims(s.shape)} and zero_points shape "
            f"{_dims(z.shape)}"
        )
    along = [1] * len(shape)
    along[axis] = shape[axis]
    return s.reshape(along), z.reshape(along)


def _clamp(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.maximum(lo, np.minimum(hi, v))  # (TF's order when lo > hi: lo wins)


def _to_int32(v: np.ndarray) -> np.ndarray:
    """A float -> int32 conversion as x86 does it: out of range or NaN gives the lowest."""
    bad = ~np.isfinite(v) | (v < _I32.min) | (v >= 2.0**31)
    return np.where(bad, _I32.min, np.where(bad, 0, v)).astype(np.int64)


def _wrap32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64).astype(np.int32).astype(np.int64)


def _quantize(x: np.ndarray, s: np.ndarray, z: np.ndarray, lo: int, hi: int) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = (_F32(1) / s).astype(_F32)
        v = np.floor((x.astype(_F32) * inv).astype(_F32) + _F32(0.5))
    return _clamp(_wrap32(_to_int32(v) + z.astype(np.int64)), lo, hi)


def _requantize(codes, s_in, z_in, s_out, z_out, lo: int, hi: int) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = s_in.astype(np.float64) / s_out.astype(np.float64)
        v = np.floor((codes.astype(np.int64) - z_in) * ratio + 0.5)
    return _clamp(_to_int32(v) + z_out.astype(np.int64), lo, hi)


def _same_shape(op):
    return [op.inputs[0].shape]


def _register(name, inputs, outputs, attrs, shape_fn=_same_shape):
    # (no gradient, nor a NotDifferentiable mark: TF 2.21 registers neither)
    return register_op(name, inputs=inputs, outputs=outputs, attrs=attrs, shape_fn=shape_fn)


def _qattrs(prefix: str = "") -> dict:
    return {
        f"{prefix}quantization_axis": -1,
        f"{prefix}quantization_min_val": REQUIRED,
        f"{prefix}quantization_max_val": REQUIRED,
    }


def _range(attrs, prefix: str = "") -> tuple[int, int]:
    return int(attrs[f"{prefix}quantization_min_val"]), int(attrs[f"{prefix}quantization_max_val"])


# -- UniformQuantize, UniformDequantize, UniformRequantize -------------------------------------

UniformQuantize = _register(
    "UniformQuantize",
    ["input: Tin", "scales: float32", "zero_points: int32"],
    ["output: Tout"],
    {"Tin": TypeConstraint(["float32"]), "Tout": TypeConstraint(["qint8", "quint8", "qint32"]),
     **_qattrs()},
)  # fmt: skip


@UniformQuantize.kernel("CPU")
async def _uniform_quantize(ctx, x, scales, zero_points):
    x = np.asarray(x, _F32)
    s, z = _axis_params(scales, zero_points, ctx.attrs["quantization_axis"], x.shape)
    out = _quantize(x, s, z, *_range(ctx.attrs))
    return _qnn._as_quantized(out, ctx.attrs["Tout"])


UniformDequantize = _register(
    "UniformDequantize",
    ["input: Tin", "scales: float32", "zero_points: int32"],
    ["output: Tout"],
    {"Tin": TypeConstraint(["qint8", "quint8", "qint32"]), "Tout": TypeConstraint(["float32"]),
     **_qattrs()},
)  # fmt: skip


@UniformDequantize.kernel("CPU")
async def _uniform_dequantize(ctx, x, scales, zero_points):
    codes = _qnn._codes(x, ctx.attrs["Tin"]).astype(np.int64)
    s, z = _axis_params(scales, zero_points, ctx.attrs["quantization_axis"], codes.shape)
    return (_wrap32(codes - z).astype(_F32) * s).astype(_F32)


UniformRequantize = _register(
    "UniformRequantize",
    ["input: Tin", "input_scales: float32", "input_zero_points: int32",
     "output_scales: float32", "output_zero_points: int32"],
    ["output: Tout"],
    {"Tin": TypeConstraint(["qint8", "qint32"]), "Tout": TypeConstraint(["qint8", "qint32"]),
     **_qattrs("input_"), **_qattrs("output_")},
)  # fmt: skip


@UniformRequantize.kernel("CPU")
async def _uniform_requantize(ctx, x, s_in, z_in, s_out, z_out):
    a = ctx.attrs
    tin, tout = a["Tin"], a["Tout"]
    if tout != dtypes.qint8:  # (TF's CPU kernels: qint32 or qint8 to qint8 only)
        raise _qnn._no_kernel(ctx.op.type, {"Tin": tin, "Tout": tout}, ctx.op.name)
    codes = _qnn._codes(x, tin)
    ax_in, ax_out = a["input_quantization_axis"], a["output_quantization_axis"]
    si, zi = _axis_params(s_in, z_in, ax_in, codes.shape)
    so, zo = _axis_params(s_out, z_out, ax_out, codes.shape)
    if ax_in != -1 and ax_out != -1 and ax_in != ax_out:
        raise _invalid(
            "If input and output is both per-axis quantized, the quantization axis must be same."
        )
    out = _requantize(codes, si, zi, so, zo, *_range(a, "output_"))
    return _qnn._as_quantized(out, tout)


# -- UniformQuantizedAdd, UniformQuantizedClipByValue ------------------------------------------


def _add_shape(op):
    return [tensor_shape.broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)]


def _operand_params(scales, zero_points, axis, shape, out_rank):
    """An operand's parameters, shaped to broadcast against the output (its axis counted
    from the output's trailing dims, as TF aligns them)."""
    s, z = _axis_params(scales, zero_points, axis, shape)
    lead = [1] * (out_rank - len(shape))
    return s.reshape(lead + list(s.shape)), z.reshape(lead + list(z.shape))


UniformQuantizedAdd = _register(
    "UniformQuantizedAdd",
    ["lhs: T", "rhs: T", "lhs_scales: float32", "lhs_zero_points: int32",
     "rhs_scales: float32", "rhs_zero_points: int32", "output_scales: float32",
     "output_zero_points: int32"],
    ["output: T"],
    {**_qattrs("lhs_"), **_qattrs("rhs_"), **_qattrs("output_"), "T": TypeConstraint(["qint32"])},
    shape_fn=_add_shape,
)  # fmt: skip


@UniformQuantizedAdd.kernel("CPU")
async def _uniform_quantized_add(ctx, lhs, rhs, ls, lz, rs, rz, os_, oz):
    a = ctx.attrs
    lc, rc = _qnn._codes(lhs, dtypes.qint32), _qnn._codes(rhs, dtypes.qint32)
    try:
        shape = np.broadcast_shapes(lc.shape, rc.shape)
    except ValueError:
        shapes = f"{_dims(lc.shape)}{_dims(rc.shape)}"
        raise _invalid(f"Cannot Add tensors of shapes: {shapes}") from None
    rank = len(shape)
    ls, lz = _operand_params(ls, lz, a["lhs_quantization_axis"], lc.shape, rank)
    rs, rz = _operand_params(rs, rz, a["rhs_quantization_axis"], rc.shape, rank)
    o_axis = a["output_quantization_axis"]
    os_, oz = _axis_params(os_, oz, o_axis, shape)
    for side, code in (("lhs", lc), ("rhs", rc)):
        axis = a[f"{side}_quantization_axis"]
        if axis != -1 and o_axis != -1 and axis + rank - code.ndim != o_axis:
            raise _invalid(
                f"If {side} and output is both per-axis quantized, the quantization axis must "
                "match."
            )
    lo, hi = _range(a, "output_")
    zero = np.zeros_like(oz)
    parts = _requantize(lc, ls, lz, os_, zero, _I32.min, _I32.max) + _requantize(
        rc, rs, rz, os_, zero, _I32.min, _I32.max
    )
    out = _clamp(_wrap32(parts + oz), lo, hi)
    return _qnn._as_quantized(np.broadcast_to(out, shape), dtypes.qint32)


UniformQuantizedClipByValue = _register(
    "UniformQuantizedClipByValue",
    ["operand: T", "min: T", "max: T", "scales: float32", "zero_points: int32"],
    ["output: T"],
    {"T": TypeConstraint(["qint32"]), **_qattrs()},
)


@UniformQuantizedClipByValue.kernel("CPU")
async def _uniform_quantized_clip_by_value(ctx, operand, lo, hi, scales, zero_points):
    codes = _qnn._codes(operand, dtypes.qint32).astype(np.int64)
    lo, hi = (_qnn._codes(v, dtypes.qint32).astype(np.int64) for v in (lo, hi))
    s = np.asarray(scales)
    for what, bound in (("min", lo), ("max", hi)):
        if bound.shape != s.shape:
            raise _invalid(
                f"Input {what} shape must be same as scales/zero_points. Given {what} of shape "
                f"{_dims(bound.shape)} and scales/zero_points of shape {_dims(s.shape)}"
            )
    axis = ctx.attrs["quantization_axis"]
    s, _ = _axis_params(scales, zero_points, axis, codes.shape)
    lo, hi = lo.reshape(s.shape), hi.reshape(s.shape)
    return _qnn._as_quantized(np.minimum(np.maximum(codes, lo), hi), dtypes.qint32)


# -- UniformQuantizedDot, UniformQuantizedDotHybrid --------------------------------------------


def _rank_at_most(shape, rank: int):
    if shape.ndims is not None and shape.ndims > rank:
        raise ValueError(f"Shape must be at most rank {rank} but is rank {shape.ndims}")
    return shape


def _equal_dims(a, b) -> None:
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions must be equal, but are {a} and {b}")


def _dot_shape(op):
    """TF's shape rules: two matrices; lhs scales scalars (Dot); the others scalars or
    vectors as long as rhs's dim 1 (whatever the quantization axis)."""
    lhs, rhs = op.inputs[0].shape, op.inputs[1].shape
    for t in (lhs, rhs):
        if t.ndims is not None and t.ndims != 2:
            raise ValueError(f"Shape must be rank 2 but is rank {t.ndims}")
    lhs_dims = lhs.as_list() if lhs.ndims is not None else [None, None]
    rhs_dims = rhs.as_list() if rhs.ndims is not None else [None, None]
    _equal_dims(lhs_dims[1], rhs_dims[0])
    params = [t.shape for t in op.inputs[2:]]
    if op.type == "UniformQuantizedDot":
        _rank_at_most(params[0], 0)
        _rank_at_most(params[1], 0)
        params = params[2:]
    for p in params:
        if _rank_at_most(p, 1).ndims == 1:
            _equal_dims(p.as_list()[0], rhs_dims[1])
    return [tensor_shape.TensorShape([lhs_dims[0], rhs_dims[1]])]


def _check_matrices(lhs: np.ndarray, rhs: np.ndarray) -> None:
    for side, m in (("lhs", lhs), ("rhs", rhs)):
        if m.ndim != 2:
            raise _invalid(f"{side} rank must be 2, but given {side} shape {_dims(m.shape)}")
    if lhs.shape[1] != rhs.shape[0]:
        raise _invalid(
            "lhs.dim_size(1) and rhs.dim_size(0) must be equal, but given lhs shape "
            f"{_dims(lhs.shape)} and rhs shape {_dims(rhs.shape)}"
        )


def _check_channel_axis(name: str, axis: int) -> None:
    if axis not in (-1, 1):
        raise _invalid(f"{name} Attr must be 1 (per-channel) or -1 (per-tensor).")


def _int_dot(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return _wrap32(lhs.astype(np.int64) @ rhs.astype(np.int64))  # (int32 sums, as TF's)


UniformQuantizedDot = _register(
    "UniformQuantizedDot",
    ["lhs: Tin", "rhs: Tin", "lhs_scales: float32", "lhs_zero_points: int32",
     "rhs_scales: float32", "rhs_zero_points: int32", "output_scales: float32",
     "output_zero_points: int32"],
    ["output: Tout"],
    {"Tin": TypeConstraint(["qint8"]), "Tout": TypeConstraint(["qint32"]),
     **_qattrs("lhs_"), **_qattrs("rhs_"), **_qattrs("output_")},
    shape_fn=_dot_shape,
)  # fmt: skip


def _dot_output_params(os_, oz, rs, axis: int, n: int):
    os_, oz = np.asarray(os_, _F32), np.asarray(oz, np.int32)
    if rs.ndim == 0 and os_.ndim != 0:
        raise _invalid(
            "If rhs is per-tensor quantized, output must be also per-tensor quantized. Given "
            f"rhs scales and zero_points of shape {_dims(rs.shape)} but given output scales and "
            f"zero_points of shape {_dims(os_.shape)}"
        )
    if os_.ndim == 0:  # (TF takes one pair even where the axis is 1)
        return os_, oz
    return _axis_params(os_, oz, axis, (0, n))


def _dot(lhs, rhs, zl, rs, zr, ls, os_, oz, lo, hi):
    acc = _int_dot(lhs.astype(np.int64) - zl, rhs.astype(np.int64) - zr)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = ls.astype(np.float64) * rs.astype(np.float64) / os_.astype(np.float64)
        v = np.floor(acc * ratio + 0.5)
    return _clamp(_to_int32(v) + oz.astype(np.int64), lo, hi)


@UniformQuantizedDot.kernel("CPU")
async def _uniform_quantized_dot(ctx, lhs, rhs, ls, lz, rs, rz, os_, oz):
    a = ctx.attrs
    if a["lhs_quantization_axis"] != -1:
        raise _invalid("lhs_quantization_axis Attr must be -1 (per-tensor).")
    _check_channel_axis("rhs_quantization_axis", a["rhs_quantization_axis"])
    _check_channel_axis("output_quantization_axis", a["output_quantization_axis"])
    lc, rc = _qnn._codes(lhs, dtypes.qint8), _qnn._codes(rhs, dtypes.qint8)
    _check_matrices(lc, rc)
    ls, lz = np.asarray(ls, _F32), np.asarray(lz, np.int32)
    if ls.ndim != 0 or lz.ndim != 0:
        raise _invalid(
            f"lhs scales/zero_points must be all scalar tensors. Given: {_dims(ls.shape)}"
            f"{_dims(lz.shape)}"
        )
    rs, rz = _axis_params(rs, rz, a["rhs_quantization_axis"], rc.shape)
    os_, oz = _dot_output_params(os_, oz, rs, a["output_quantization_axis"], rc.shape[1])
    lo, hi = _range(a, "output_")
    out = await ctx.compute(_dot, lc, rc, lz, rs, rz, ls, os_, oz, lo, hi)
    return _qnn._as_quantized(out, dtypes.qint32)


UniformQuantizedDotHybrid = _register(
    "UniformQuantizedDotHybrid",
    ["lhs: Tlhs", "rhs: Trhs", "rhs_scales: float32", "rhs_zero_points: int32"],
    ["output: Tout"],
    {"Tlhs": TypeConstraint(["float32"]), "Trhs": TypeConstraint(["qint8"]),
     "Tout": TypeConstraint(["float32"]), **_qattrs("rhs_")},
    shape_fn=_dot_shape,
)  # fmt: skip


def _round_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _quantize_rows(x: np.ndarray, axes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each slice of float32 `x` over `axes` as int8 codes: (codes, zero points, scales),
    the range holding 0 and the zero point taken from the end that errs least (double)."""
    lo = np.minimum(x.min(axis=axes, keepdims=True).astype(np.float64), 0.0)
    hi = np.maximum(x.max(axis=axes, keepdims=True).astype(np.float64), 0.0)
    flat = lo == hi
    scale = np.where(flat, 1.0, (hi - lo) / 255.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        from_lo, from_hi = -128.0 - lo / scale, 127.0 - hi / scale
        use_lo = 128.0 + np.abs(lo / scale) < 127.0 + np.abs(hi / scale)
    zero = np.where(flat, 0.0, np.clip(_round_away(np.where(use_lo, from_lo, from_hi)), -128, 127))
    inv = (1.0 / scale).astype(_F32)
    v = (x * inv).astype(_F32)
    codes = np.where(flat, 0, np.clip(_round_away(v) + zero, -128, 127)).astype(np.int64)
    return codes, zero.astype(np.int64), scale.astype(_F32)


def _hybrid_dot(x, rc, rs, rz):
    codes, zero, scale = _quantize_rows(x, 1)
    acc = _int_dot(codes - zero, rc.astype(np.int64) - rz)
    return ((acc.astype(_F32) * scale).astype(_F32) * rs).astype(_F32)


@UniformQuantizedDotHybrid.kernel("CPU")
async def _uniform_quantized_dot_hybrid(ctx, lhs, rhs, rs, rz):
    a = ctx.attrs
    _check_channel_axis("rhs_quantization_axis", a["rhs_quantization_axis"])
    x, rc = np.asarray(lhs, _F32), _qnn._codes(rhs, dtypes.qint8)
    _check_matrices(x, rc)
    rs, rz = _axis_params(rs, rz, a["rhs_quantization_axis"], rc.shape)
    return await ctx.compute(_hybrid_dot, x, rc, rs, rz)


# -- UniformQuantizedConvolution, UniformQuantizedConvolutionHybrid ----------------------------
#
# XLA's general convolution on int32 sums: dimension_numbers (a serialized
# UniformQuantizedConvolutionDimensionNumbersAttr; empty: batch and feature first, kernel
# as [output feature, input feature, spatial...]) name the axes; lhs_dilation spreads the
# input, padding (SAME from the dilated sizes, or explicit pairs) adds the zero point, and
# feature_group_count / batch_group_count split features or batches into groups.

_DIM_FIELDS = (
    "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
    "kernel_input_feature_dimension", "kernel_output_feature_dimension",
    "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
    "output_spatial_dimensions",
)  # fmt: skip


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _dimension_numbers(raw, rank: int) -> dict:
    """The dimension numbers' fields (proto3: absent scalars are 0, lists empty)."""
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not raw:
        spatial = list(range(2, rank))
        return dict(zip(_DIM_FIELDS, (0, 1, spatial, 1, 0, spatial, 0, 1, spatial)))
    dims = {name: [] if name.endswith("s") else 0 for name in _DIM_FIELDS}
    pos = 0
    try:
        while pos < len(raw):
            key, pos = _varint(raw, pos)
            number, wire = key >> 3, key & 7
            if not 1 <= number <= 9 or wire not in (0, 2):
                raise ValueError("unexpected field")
            name = _DIM_FIELDS[number - 1]
            if wire == 0:
                value, pos = _varint(raw, pos)
                dims[name].append(value) if name.endswith("s") else dims.__setitem__(name, value)
                continue
            size, pos = _varint(raw, pos)
            end = pos + size
            if end > len(raw) or not name.endswith("s"):
                raise ValueError("bad packed field")
            while pos < end:
                value, pos = _varint(raw, pos)
                dims[name].append(value)
    except ValueError:
        raise _invalid("Error parsing convolution dimension numbers.") from None
    return dims


def _conv_config(a: dict, lhs_shape, rhs_shape) -> dict:
    """The attrs checked as TF checks them (its messages), with defaults filled in."""
    if len(lhs_shape) != len(rhs_shape):
        raise _invalid(
            "lhs and rhs must have same dims. Given lhs and rhs of shapes: "
            f"{_dims(lhs_shape)}{_dims(rhs_shape)}"
        )
    rank = len(lhs_shape)
    pad = a["padding"].decode() if isinstance(a["padding"], bytes) else a["padding"]
    if pad not in ("EXPLICIT", "SAME", "VALID"):
        raise _invalid(f"padding Attr must be one of [EXPLICIT | SAME | VALID], but given: {pad}")
    explicit = list(a["explicit_padding"])
    if pad == "EXPLICIT":
        if len(explicit) != 2 * (rank - 2):
            raise _invalid(
                "Size of explicit_padding Attr must be 2 * (rank - 2). Given rank "
                f"{rank} and explicit_padding of size {len(explicit)}"
            )
        if any(p < 0 for p in explicit):
            listed = ", ".join(str(p) for p in explicit)
            raise _invalid(f"All explicit_padding elems must be >= 0, Given {listed}")
    cfg = {"padding": pad, "explicit": explicit}
    # (TF's defaults for an empty list: ones; a rank-3 convolution has none, as there)
    for key, what in (("window_strides", "window_strides"), ("lhs_dilation", "lhs_dilation"),
                      ("rhs_dilation", "rhs_dilation")):  # fmt: skip
        values = list(a[key]) or ([1] * (rank - 2) if rank > 3 else [])
        if len(values) != rank - 2:
            raise _invalid(f"Size of {what} Attr must be dims - 2.")
        if any(v <= 0 for v in values):
            raise _invalid(f"{what} values must be positive.")
        cfg[key] = values
    cfg["dims"] = _dimension_numbers(a["dimension_numbers"], rank)
    for layout in _conv_layouts(cfg):
        # (TF reads out-of-range dimensions without checking; here they are an error)
        if sorted(layout) != list(range(rank)):
            raise _invalid(
                f"dimension_numbers must name each of the {rank} dimensions once per operand, "
                f"but given {layout}"
            )
    cfg["fgc"], cfg["bgc"] = int(a["feature_group_count"]), int(a["batch_group_count"])
    return cfg


def _check_conv_shapes(cfg: dict, lhs_shape, rhs_shape) -> None:
    d = cfg["dims"]
    features = lhs_shape[d["input_feature_dimension"]]
    kernel_in = rhs_shape[d["kernel_input_feature_dimension"]]
    if features % cfg["fgc"] or features // cfg["fgc"] != kernel_in:
        raise _invalid(
            "lhs feature dimension size divided by feature_group_count must equal the rhs "
            f"input feature dimension size, but {features} / {cfg['fgc']} != {kernel_in}"
        )
    outs = rhs_shape[d["kernel_output_feature_dimension"]]
    if outs % cfg["fgc"]:
        raise _invalid(
            "rhs output dimension size must be a multiple of feature_group_count, but "
            f"{outs} % {cfg['fgc']} != 0"
        )
    batch = lhs_shape[d["input_batch_dimension"]]
    if batch % cfg["bgc"]:
        raise _invalid(
            "lhs batch dimension size must be a multiple of batch_group_count, but "
            f"{batch} % {cfg['bgc']} != 0"
        )
    if outs % cfg["bgc"]:
        raise _invalid(
            "rhs output dimension size must be a multiple of batch_group_count, but "
            f"{outs} % {cfg['bgc']} != 0"
        )


def _pads(cfg: dict, sizes, kernel) -> list[tuple[int, int]]:
    if cfg["padding"] == "VALID":
        return [(0, 0)] * len(sizes)
    if cfg["padding"] == "EXPLICIT":
        e = cfg["explicit"]
        return [(e[2 * i], e[2 * i + 1]) for i in range(len(sizes))]
    pads = []
    for n, k, s in zip(sizes, kernel, cfg["window_strides"]):
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _general_conv(x: np.ndarray, k: np.ndarray, cfg: dict) -> np.ndarray:
    """[N, C, S...] x [O, I, K...] -> [N / batch groups, O, S'...] in int64 (values
    relative to their zero points, so padding and dilation holes are 0)."""
    spatial = x.shape[2:]
    if any(d != 1 for d in cfg["lhs_dilation"]):
        grown = [(n - 1) * d + 1 if n else 0 for n, d in zip(spatial, cfg["lhs_dilation"])]
        spread = np.zeros(x.shape[:2] + tuple(grown), x.dtype)
        every = (slice(None, None, d) for d in cfg["lhs_dilation"])
        spread[(slice(None), slice(None), *every)] = x
        x = spread
    rd, strides = cfg["rhs_dilation"], cfg["window_strides"]
    reach = [(n - 1) * d + 1 for n, d in zip(k.shape[2:], rd)]
    x = np.pad(x, [(0, 0), (0, 0), *_pads(cfg, x.shape[2:], reach)])
    out_sp = [max((n - r) // s + 1, 0) for n, r, s in zip(x.shape[2:], reach, strides)]
    n_, c_ = x.shape[:2]
    o_, i_ = k.shape[:2]
    fgc, bgc = cfg["fgc"], cfg["bgc"]
    acc = np.zeros((n_ // bgc, o_, *out_sp), np.int64)
    if not all(out_sp):
        return acc
    for pos in np.ndindex(*k.shape[2:]):
        window = tuple(
            slice(p * d, p * d + (m - 1) * s + 1, s)
            for p, d, m, s in zip(pos, rd, out_sp, strides)
        )
        patch = x[(slice(None), slice(None), *window)]
        taps = k[(slice(None), slice(None), *pos)]
        for g in range(fgc):
            og = slice(g * (o_ // fgc), (g + 1) * (o_ // fgc))
            cg = patch[:, g * i_ : (g + 1) * i_]
            if bgc == 1:
                acc[:, og] += np.einsum("nc...,oc->no...", cg, taps[og])
                continue
            per = n_ // bgc
            for b in range(bgc):
                ob = slice(b * (o_ // bgc), (b + 1) * (o_ // bgc))
                acc[:, ob] += np.einsum("nc...,oc->no...", cg[b * per : (b + 1) * per], taps[ob])
    return acc


def _conv_layouts(cfg: dict):
    d = cfg["dims"]
    lhs = [d["input_batch_dimension"], d["input_feature_dimension"],
           *d["input_spatial_dimensions"]]  # fmt: skip
    rhs = [d["kernel_output_feature_dimension"], d["kernel_input_feature_dimension"],
           *d["kernel_spatial_dimensions"]]  # fmt: skip
    out = [d["output_batch_dimension"], d["output_feature_dimension"],
           *d["output_spatial_dimensions"]]  # fmt: skip
    return lhs, rhs, out


def _run_conv(x: np.ndarray, k: np.ndarray, cfg: dict) -> np.ndarray:
    """The int64 sums, in the output's layout."""
    lhs, rhs, out = _conv_layouts(cfg)
    acc = _general_conv(np.transpose(x, lhs), np.transpose(k, rhs), cfg)
    return np.transpose(acc, np.argsort(out))


def _conv_shape(op):
    """TF's shape rules: equal ranks, valid attrs, scalar lhs parameters and rhs / output
    parameters scalars or as long as the kernel's output features; then the output's
    shape where the inputs' shapes are known."""
    lhs, rhs = op.inputs[0].shape, op.inputs[1].shape
    if lhs.ndims is not None and rhs.ndims is not None and lhs.ndims != rhs.ndims:
        raise ValueError("lhs and rhs must have same rank.")
    rank = lhs.ndims if lhs.ndims is not None else rhs.ndims
    if rank is None:
        return [tensor_shape.unknown_shape()]
    lhs_dims = lhs.as_list() if lhs.ndims is not None else [None] * rank
    rhs_dims = rhs.as_list() if rhs.ndims is not None else [None] * rank
    try:
        cfg = _conv_config(op.attrs, lhs_dims, rhs_dims)
    except errors.OpError as exc:
        raise ValueError(exc.message) from None
    params = [t.shape for t in op.inputs[2:]]
    if op.type == "UniformQuantizedConvolution":
        _rank_at_most(params[0], 0)
        _rank_at_most(params[1], 0)
        params = params[2:]
    outs = rhs_dims[cfg["dims"]["kernel_output_feature_dimension"]]
    for p in params:
        if _rank_at_most(p, 1).ndims == 1:
            _equal_dims(p.as_list()[0], outs)
    if None in lhs_dims or None in rhs_dims:
        return [tensor_shape.unknown_shape(rank)]
    _check_conv_shapes_static(cfg, lhs_dims, rhs_dims)
    return [tensor_shape.TensorShape(_conv_out_shape(cfg, lhs_dims, rhs_dims))]


def _check_conv_shapes_static(cfg, lhs_dims, rhs_dims) -> None:
    try:
        _check_conv_shapes(cfg, lhs_dims, rhs_dims)
    except errors.OpError as exc:
        raise ValueError(exc.message) from None


def _conv_out_shape(cfg: dict, lhs_shape, rhs_shape) -> list[int]:
    lhs, rhs, out = _conv_layouts(cfg)
    spatial = [lhs_shape[i] for i in lhs[2:]]
    kernel = [rhs_shape[i] for i in rhs[2:]]
    grown = [(n - 1) * d + 1 if n else 0 for n, d in zip(spatial, cfg["lhs_dilation"])]
    reach = [(n - 1) * d + 1 for n, d in zip(kernel, cfg["rhs_dilation"])]
    pads = _pads(cfg, grown, reach)
    sizes = [
        max((n + lo + hi - r) // s + 1, 0)
        for n, (lo, hi), r, s in zip(grown, pads, reach, cfg["window_strides"])
    ]
    ours = [lhs_shape[lhs[0]] // cfg["bgc"], rhs_shape[rhs[0]], *sizes]
    return [ours[i] for i in np.argsort(out)]


_CONV_ATTRS = {
    "window_strides": [],
    "padding": REQUIRED,
    "explicit_padding": [],
    "lhs_dilation": [],
    "rhs_dilation": [],
    "batch_group_count": 1,
    "feature_group_count": 1,
    "dimension_numbers": "",
}

UniformQuantizedConvolution = _register(
    "UniformQuantizedConvolution",
    ["lhs: Tin", "rhs: Tin", "lhs_scales: float32", "lhs_zero_points: int32",
     "rhs_scales: float32", "rhs_zero_points: int32", "output_scales: float32",
     "output_zero_points: int32"],
    ["output: Tout"],
    {"Tin": TypeConstraint(["qint8"]), "Tout": TypeConstraint(["qint32"]), **_CONV_ATTRS,
     **_qattrs("lhs_"), **_qattrs("rhs_"), **_qattrs("output_")},
    shape_fn=_conv_shape,
)  # fmt: skip


def _conv_setup(ctx, lhs_shape, rhs_shape):
    a = ctx.attrs
    cfg = _conv_config(a, lhs_shape, rhs_shape)
    d = cfg["dims"]
    if a["rhs_quantization_axis"] not in (-1, d["kernel_output_feature_dimension"]):
        raise _invalid(
            "rhs_quantization_axis Attr must be -1 (per-tensor) or "
            "dimension_numbers.kernel_output_feature_dimension (per-channel)."
        )
    _check_conv_shapes(cfg, lhs_shape, rhs_shape)
    return cfg


def _along(v: np.ndarray, axis: int, rank: int) -> np.ndarray:
    if v.ndim == 0:
        return v
    shape = [1] * rank
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def _quantized_conv(lc, rc, lz, rz, cfg, ratio, oz, lo, hi):
    acc = _wrap32(_run_conv(lc.astype(np.int64) - lz, rc.astype(np.int64) - rz, cfg))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.floor(acc * ratio + 0.5)
    return _clamp(_to_int32(v) + oz.astype(np.int64), lo, hi)


@UniformQuantizedConvolution.kernel("CPU")
async def _uniform_quantized_convolution(ctx, lhs, rhs, ls, lz, rs, rz, os_, oz):
    a = ctx.attrs
    if a["lhs_quantization_axis"] != -1:
        raise _invalid("lhs_quantization_axis Attr must be -1 (per-tensor).")
    lc, rc = _qnn._codes(lhs, dtypes.qint8), _qnn._codes(rhs, dtypes.qint8)
    cfg = _conv_setup(ctx, lc.shape, rc.shape)
    d = cfg["dims"]
    o_axis = a["output_quantization_axis"]
    if o_axis not in (-1, d["output_feature_dimension"]):
        raise _invalid(
            "output_quantization_axis Attr must be -1 (per-tensor) or "
            "dimension_numbers.output_feature_dimension (per-channel)."
        )
    ls, lz = _axis_params(ls, lz, -1, lc.shape)
    rs, rz = _axis_params(rs, rz, a["rhs_quantization_axis"], rc.shape)
    os_, oz = np.asarray(os_, _F32), np.asarray(oz, np.int32)
    if rs.ndim == 0 and os_.ndim != 0:
        raise _invalid(
            "If rhs is per-tensor quantized, output must be also per-tensor quantized. Given "
            f"output scales/zero_points of rank {os_.ndim}"
        )
    out_shape = _conv_out_shape(cfg, lc.shape, rc.shape)
    os_, oz = _axis_params(os_, oz, o_axis, out_shape)
    rank, feature = len(out_shape), d["output_feature_dimension"]
    rs_out = _along(rs.reshape(-1) if rs.ndim else rs, feature, rank)
    ratio = ls.astype(np.float64) * rs_out.astype(np.float64) / os_.astype(np.float64)
    lo, hi = _range(a, "output_")
    out = await ctx.compute(_quantized_conv, lc, rc, lz, rz, cfg, ratio, oz, lo, hi)
    return _qnn._as_quantized(out, dtypes.qint32)


UniformQuantizedConvolutionHybrid = _register(
    "UniformQuantizedConvolutionHybrid",
    ["lhs: Tlhs", "rhs: Trhs", "rhs_scales: float32", "rhs_zero_points: int32"],
    ["output: Tout"],
    {"Tlhs": TypeConstraint(["float32"]), "Trhs": TypeConstraint(["qint8"]),
     "Tout": TypeConstraint(["float32"]), **_CONV_ATTRS, **_qattrs("rhs_")},
    shape_fn=_conv_shape,
)  # fmt: skip


def _hybrid_conv(x, rc, rz, rs_out, cfg):
    batch = cfg["dims"]["input_batch_dimension"]
    codes, zero, scale = _quantize_rows(x, tuple(i for i in range(x.ndim) if i != batch))
    acc = _wrap32(_run_conv(codes - zero, rc.astype(np.int64) - rz, cfg))
    out_batch = cfg["dims"]["output_batch_dimension"]
    scale = _along(scale.reshape(-1), out_batch, acc.ndim)
    return ((acc.astype(_F32) * scale).astype(_F32) * rs_out).astype(_F32)


@UniformQuantizedConvolutionHybrid.kernel("CPU")
async def _uniform_quantized_convolution_hybrid(ctx, lhs, rhs, rs, rz):
    x, rc = np.asarray(lhs, _F32), _qnn._codes(rhs, dtypes.qint8)
    cfg = _conv_setup(ctx, x.shape, rc.shape)
    rs, rz = _axis_params(rs, rz, ctx.attrs["rhs_quantization_axis"], rc.shape)
    rank = x.ndim
    rs_out = _along(
        rs.reshape(-1) if rs.ndim else rs, cfg["dims"]["output_feature_dimension"], rank
    )
    return await ctx.compute(_hybrid_conv, x, rc, rz, rs_out, cfg)
