"""TF's eight-bit graph ops (what tools/quantization/quantize_graph.py and TF 1.x's
graph-transform tool wrote): QuantizedMatMul, QuantizedBiasAdd, QuantizedAdd,
QuantizedMul, QuantizedRelu, QuantizedRelu6, QuantizedReshape, RequantizationRange,
Requantize, QuantizeDownAndShrinkRange and the per-channel RequantizationRangePerChannel
and RequantizePerChannel, as TF's CPU kernels compute them.

- Codes are taken relative to the code of 0.0 in their range (TF's
  FloatToQuantizedUnclamped) for the products (MatMul, Mul), summed or multiplied in
  int32; the output range is the product of the two ranges' steps times qint32's limits
  (QuantizationRangeForMultiplication).
- BiasAdd and Add move both operands into a shared qint32 range, symmetric around 0 and
  2**17 (BiasAdd) or 2**14 (Add) times the widest input bound, then add: BiasAdd through
  float32 (TF's QuantizedToFloatStruct and FloatToQuantizedStruct, the MIN_FIRST
  arithmetic of ops/quantization_ops.py); Add linearly, from the qint32 codes of codes
  0 and 1 in double, a single-element operand requantized in double.  (TF's Add takes
  only a scalar, equal shapes or a vector over the last axis; NumPy broadcasting here.)
- Relu / Relu6 clamp the codes at the codes of 0 and 6 (FloatToQuantized, double).
- RequantizationRange gives the float range the qint32 codes actually use (its minimum at
  most 0, QuantizedToFloat in double); Requantize maps qint32 codes into a requested
  eight-bit range (to quint8: the code's value rounded to the output's 255 steps, in
  double; to qint8: QuantizedToFloat then FloatToQuantized); QuantizeDownAndShrinkRange is
  both, the range also holding 0.
TF 2.21 registers no gradient for any of them (LookupError), nor here; each kernel exists
for the types TF registers it for, and other types raise TF's "No OpKernel" error.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import quantization_ops as _q
from asyncflow.ops import quantized_nn_ops as _qnn
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_F32 = np.float32
_QUANTIZED = ["qint8", "quint8", "qint32", "qint16", "quint16"]
_RANGE_OUT = ["min_out: float32", "max_out: float32"]
_SCALAR = tensor_shape.TensorShape([])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _float_to_quantized(value: float, lo: float, hi: float, dt, clamp: bool = True) -> int:
    """TF's FloatToQuantized(Unclamped) in double: round(v s) - round(lo s) + lowest."""
    low, high = _q._limits(dt)
    if lo == hi:
        return low
    steps = 1 << (8 * np.dtype(_q._storage(dt)).itemsize)
    scale = steps / ((hi - lo) * (steps / (steps - 1.0)))
    code = int(_qnn._round_half_away(value * scale) - _qnn._round_half_away(lo * scale)) + low
    return min(max(code, low), high) if clamp else code


def _quantized_to_float(code: int, lo: float, hi: float, dt, as_float32: bool = True):
    """TF's QuantizedToFloat in double (its range minimum rounded with a float32 step),
    returned as float32 (or, `as_float32` False, the double)."""
    if lo == hi:
        return _F32(lo)
    low, _ = _q._limits(dt)
    steps = 1 << (8 * np.dtype(_q._storage(dt)).itemsize)
    scale = ((hi - lo) * (steps / (steps - 1.0))) / steps
    step32 = float(_F32(scale))
    min_rounded = _qnn._round_half_away(lo / step32) * step32
    value = min_rounded + (float(code) - low) * scale
    return _F32(value) if as_float32 else value


def _range(v, what: str) -> float:
    return float(_F32(_qnn._scalar(v, what)))


def _scalars(op, first: int, count: int):
    for t in op.inputs[first : first + count]:
        t.shape.with_rank(0)


def _no_kernel(ctx, **types):
    return _qnn._no_kernel(ctx.op.type, types, ctx.op.name)


# -- QuantizedMatMul ---------------------------------------------------------------------------


def _matmul_shape(op):
    a, b = (t.shape.with_rank(2) for t in op.inputs[:2])
    _scalars(op, 2, 4)
    m = a[1] if op._attr("transpose_a") else a[0]
    n = b[0] if op._attr("transpose_b") else b[1]
    ka = a[0] if op._attr("transpose_a") else a[1]
    kb = b[1] if op._attr("transpose_b") else b[0]
    ka.merge_with(kb)
    return [tensor_shape.TensorShape([m, n]), _SCALAR, _SCALAR]


QuantizedMatMul = register_op(
    "QuantizedMatMul",
    inputs=["a: T1", "b: T2", "min_a: float32", "max_a: float32", "min_b: float32",
            "max_b: float32"],
    outputs=["out: Toutput", *_RANGE_OUT],
    attrs={
        "T1": TypeConstraint(_QUANTIZED),
        "T2": TypeConstraint(_QUANTIZED),
        "Toutput": TypeConstraint(_QUANTIZED, default="qint32"),
        "transpose_a": False,
        "transpose_b": False,
        "Tactivation": TypeConstraint(_QUANTIZED, default="quint8"),
    },
    shape_fn=_matmul_shape,
)  # fmt: skip


def _product_range(lo_a, hi_a, ta, lo_b, hi_b, tb):
    level = _F32(_qnn._level(_F32(lo_a), _F32(hi_a), ta) * _qnn._level(_F32(lo_b), _F32(hi_b), tb))
    info = np.iinfo(np.int32)
    return np.array(_F32(level * _F32(info.min))), np.array(_F32(level * _F32(info.max)))


@QuantizedMatMul.kernel("CPU")
async def _quantized_matmul(ctx, a, b, min_a, max_a, min_b, max_b):
    at = ctx.attrs
    t1, t2, tout = at["T1"], at["T2"], at["Toutput"]
    if (t1, t2, tout) != (dtypes.quint8, dtypes.quint8, dtypes.qint32):
        raise _no_kernel(ctx, T1=t1, T2=t2, Toutput=tout)
    ac, bc = _qnn._codes(a, t1).astype(np.int64), _qnn._codes(b, t2).astype(np.int64)
    if ac.ndim != 2 or bc.ndim != 2:
        raise _invalid("In[0] and In[1] must be matrices")
    lo_a, hi_a = _range(min_a, "min_a"), _range(max_a, "max_a")
    lo_b, hi_b = _range(min_b, "min_b"), _range(max_b, "max_b")
    ac = ac.T if at["transpose_a"] else ac
    bc = bc.T if at["transpose_b"] else bc
    if ac.shape[1] != bc.shape[0]:
        raise _invalid(f"Matrix size-compatible: In[0]: {list(ac.shape)}, In[1]: {list(bc.shape)}")
    ac -= _qnn._zero_code(lo_a, hi_a, t1)
    bc -= _qnn._zero_code(lo_b, hi_b, t2)
    out = (ac @ bc).astype(np.int32)  # (int32 sums: wraps as TF's)
    return (_qnn._as_quantized(out, tout), *_product_range(lo_a, hi_a, t1, lo_b, hi_b, t2))


# -- QuantizedMul, QuantizedAdd, QuantizedBiasAdd -------------------------------------------


def _broadcast_shape(op):
    x, y = op.inputs[0].shape, op.inputs[1].shape
    _scalars(op, 2, 4)
    if x.ndims is None or y.ndims is None:
        return [tensor_shape.unknown_shape(), _SCALAR, _SCALAR]
    try:
        dims = np.broadcast_shapes(
            tuple(1 if d is None else d for d in x.as_list()),
            tuple(1 if d is None else d for d in y.as_list()),
        )
    except ValueError:
        raise ValueError(f"Incompatible shapes: {x.as_list()} vs. {y.as_list()}") from None
    return [tensor_shape.TensorShape(list(dims)), _SCALAR, _SCALAR]


_BINARY_ATTRS = {
    "T1": TypeConstraint(_QUANTIZED),
    "T2": TypeConstraint(_QUANTIZED),
    "Toutput": TypeConstraint(_QUANTIZED, default="qint32"),
}
_BINARY_IN = ["x: T1", "y: T2", "min_x: float32", "max_x: float32", "min_y: float32",
              "max_y: float32"]  # fmt: skip
QuantizedMul = register_op(
    "QuantizedMul",
    inputs=_BINARY_IN,
    outputs=["z: Toutput", "min_z: float32", "max_z: float32"],
    attrs=dict(_BINARY_ATTRS),
    shape_fn=_broadcast_shape,
)
QuantizedAdd = register_op(
    "QuantizedAdd",
    inputs=_BINARY_IN,
    outputs=["z: Toutput", "min_z: float32", "max_z: float32"],
    attrs=dict(_BINARY_ATTRS),
    shape_fn=_broadcast_shape,
)


def _operands(ctx, x, y, ranges):
    at = ctx.attrs
    t1, t2, tout = at["T1"], at["T2"], at["Toutput"]
    if (t1, t2, tout) != (dtypes.quint8, dtypes.quint8, dtypes.qint32):
        raise _no_kernel(ctx, T1=t1, T2=t2, Toutput=tout)
    xc, yc = _qnn._codes(x, t1), _qnn._codes(y, t2)
    try:
        np.broadcast_shapes(xc.shape, yc.shape)
    except ValueError:
        raise _invalid(f"Incompatible shapes: {list(xc.shape)} vs. {list(yc.shape)}") from None
    names = ("min_x", "max_x", "min_y", "max_y")
    return xc, yc, [_range(v, n) for v, n in zip(ranges, names)], (t1, t2, tout)


@QuantizedMul.kernel("CPU")
async def _quantized_mul(ctx, x, y, *ranges):
    xc, yc, (lo_x, hi_x, lo_y, hi_y), (t1, t2, tout) = _operands(ctx, x, y, ranges)
    xs = xc.astype(np.int64) - _qnn._zero_code(lo_x, hi_x, t1)
    ys = yc.astype(np.int64) - _qnn._zero_code(lo_y, hi_y, t2)
    z = (xs * ys).astype(np.int32)
    return (_qnn._as_quantized(z, tout), *_product_range(lo_x, hi_x, t1, lo_y, hi_y, t2))


def _sum_range(lo_a, hi_a, lo_b, hi_b, bits):
    """TF's output range for a sum: symmetric, 2**bits times the widest bound (17 for
    BiasAdd, 14 for Add)."""
    hi = _F32(max(hi_a, -lo_a, hi_b, -lo_b)) * _F32(1 << bits)
    return _F32(-hi), _F32(hi)


def _into(codes, lo, hi, dt, out_lo, out_hi):
    """Codes of [lo, hi] as qint32 codes of [out_lo, out_hi] (through float32)."""
    floats = _q._q2f_min_first(codes, _F32(lo), _F32(hi), dt)
    return _q._f2q_min_first(floats, out_lo, out_hi, dtypes.qint32).astype(np.int64)


def _quantized_sum(xc, t1, lo_x, hi_x, yc, t2, lo_y, hi_y, bits):
    out_lo, out_hi = _sum_range(lo_x, hi_x, lo_y, hi_y, bits)
    z = _into(xc, lo_x, hi_x, t1, out_lo, out_hi) + _into(yc, lo_y, hi_y, t2, out_lo, out_hi)
    # TF adds the code of 0.0 in the sum's range too: -1, not 0, for some ranges
    z += _float_to_quantized(0.0, float(out_lo), float(out_hi), dtypes.qint32)
    return z.astype(np.int32), np.array(out_lo), np.array(out_hi)


def _add_operand(codes, lo, hi, dt, out_lo, out_hi, scalar: bool):
    """TF's QuantizedAdd (quint8 -> qint32): a scalar requantized in double, a tensor
    mapped linearly through the qint32 codes of its codes 0 and 1."""
    if scalar:  # (each code requantized in double)
        flat = [
            _float_to_quantized(
                float(_quantized_to_float(int(c), lo, hi, dt)), out_lo, out_hi, dtypes.qint32
            )
            for c in codes.reshape(-1)
        ]
        return np.array(flat, np.int64).reshape(codes.shape)
    q0, q1 = (
        _float_to_quantized(
            _quantized_to_float(c, lo, hi, dt, False), out_lo, out_hi, dtypes.qint32, clamp=False
        )
        for c in (0, 1)
    )
    mult = np.int64(np.int32(q1 - q0))
    info = np.iinfo(np.int32)
    return np.clip(q0 + codes.astype(np.int64) * mult, info.min, info.max)


@QuantizedAdd.kernel("CPU")
async def _quantized_add(ctx, x, y, *ranges):
    xc, yc, (lo_x, hi_x, lo_y, hi_y), (t1, t2, tout) = _operands(ctx, x, y, ranges)
    out_lo, out_hi = _sum_range(lo_x, hi_x, lo_y, hi_y, 14)
    lo32, hi32 = float(out_lo), float(out_hi)
    xs = _add_operand(xc, lo_x, hi_x, t1, lo32, hi32, yc.size != 1 and xc.size == 1)
    ys = _add_operand(yc, lo_y, hi_y, t2, lo32, hi32, yc.size == 1)
    z = (xs + ys).astype(np.int32)  # (int32 sums: wraps as TF's)
    return _qnn._as_quantized(z, tout), np.array(out_lo), np.array(out_hi)


def _bias_shape(op):
    x = op.inputs[0].shape.with_rank_at_least(2)
    op.inputs[1].shape.with_rank(1)
    _scalars(op, 2, 4)
    return [x, _SCALAR, _SCALAR]


QuantizedBiasAdd = register_op(
    "QuantizedBiasAdd",
    inputs=["input: T1", "bias: T2", "min_input: float32", "max_input: float32",
            "min_bias: float32", "max_bias: float32"],
    outputs=["output: out_type", *_RANGE_OUT],
    attrs={"T1": TypeConstraint(_QUANTIZED), "T2": TypeConstraint(_QUANTIZED),
           "out_type": TypeConstraint(_QUANTIZED)},
    shape_fn=_bias_shape,
)  # fmt: skip


@QuantizedBiasAdd.kernel("CPU")
async def _quantized_bias_add(ctx, x, bias, *ranges):
    at = ctx.attrs
    t1, t2, tout = at["T1"], at["T2"], at["out_type"]
    if (t1, t2, tout) != (dtypes.quint8, dtypes.quint8, dtypes.qint32):
        raise _no_kernel(ctx, T1=t1, T2=t2, out_type=tout)
    xc, bc = _qnn._codes(x, t1), _qnn._codes(bias, t2)
    if xc.ndim < 2:
        raise _invalid(f"Input tensor must be at least 2D: {list(xc.shape)}")
    if bc.ndim != 1:
        raise _invalid(f"Biases must be 1D: {list(bc.shape)}")
    if bc.shape[0] != xc.shape[-1]:
        raise _invalid(
            "Must provide as many biases as the last dimension of the input tensor: "
            f"{list(bc.shape)} vs. {list(xc.shape)}"
        )
    names = ("min_input", "max_input", "min_bias", "max_bias")
    lo_x, hi_x, lo_b, hi_b = (_range(v, n) for v, n in zip(ranges, names))
    z, lo, hi = _quantized_sum(xc, t1, lo_x, hi_x, bc, t2, lo_b, hi_b, 17)
    return _qnn._as_quantized(z, tout), lo, hi


# -- QuantizedRelu, QuantizedRelu6, QuantizedReshape -----------------------------------------


def _relu_shape(op):
    _scalars(op, 1, 2)
    return [op.inputs[0].shape, _SCALAR, _SCALAR]


def _register_relu(name: str, cap: float | None):
    op_def = register_op(
        name,
        inputs=["features: Tinput", "min_features: float32", "max_features: float32"],
        outputs=["activations: out_type", "min_activations: float32",
                 "max_activations: float32"],
        attrs={"Tinput": TypeConstraint(_QUANTIZED),
               "out_type": TypeConstraint(_QUANTIZED, default="quint8")},
        shape_fn=_relu_shape,
    )  # fmt: skip

    @op_def.kernel("CPU")
    async def _kernel(ctx, features, lo, hi):
        tin, tout = ctx.attrs["Tinput"], ctx.attrs["out_type"]
        if tin not in (dtypes.qint32, dtypes.quint8) or tout != tin:
            raise _no_kernel(ctx, Tinput=tin, out_type=tout)
        lo_f, hi_f = _range(lo, "min_features"), _range(hi, "max_features")
        codes = _qnn._codes(features, tin).astype(np.int64)
        out = np.maximum(codes, _float_to_quantized(0.0, lo_f, hi_f, tin))
        if cap is not None:
            out = np.minimum(out, _float_to_quantized(cap, lo_f, hi_f, tin))
        return _qnn._as_quantized(out, tout), np.array(_F32(lo_f)), np.array(_F32(hi_f))

    _kernel.__name__ = f"_{name.lower()}_kernel"
    return op_def


QuantizedRelu = _register_relu("QuantizedRelu", None)
QuantizedRelu6 = _register_relu("QuantizedRelu6", 6.0)


def _reshape_shape(op):
    _scalars(op, 2, 2)
    shape = ops.constant_value(op.inputs[1])
    if shape is None:
        return [tensor_shape.unknown_shape(), _SCALAR, _SCALAR]
    dims = [int(d) for d in np.ravel(shape)]
    known = op.inputs[0].shape
    if -1 in dims and known.is_fully_defined():
        rest = int(np.prod([d for d in dims if d != -1]))
        total = int(np.prod(known.as_list()))
        dims = [total // rest if d == -1 and rest else d for d in dims]
    return [tensor_shape.TensorShape([None if d == -1 else d for d in dims]), _SCALAR, _SCALAR]


QuantizedReshape = register_op(
    "QuantizedReshape",
    inputs=["tensor: T", "shape: Tshape", "input_min: float32", "input_max: float32"],
    outputs=["output: T", "output_min: float32", "output_max: float32"],
    attrs={"T": TypeConstraint(None), "Tshape": TypeConstraint(["int32", "int64"],
                                                                 default="int32")},
    shape_fn=_reshape_shape,
)  # fmt: skip


@QuantizedReshape.kernel("CPU", host_memory=("shape",))
async def _quantized_reshape(ctx, tensor, shape, lo, hi):
    x = np.asarray(tensor)
    dims = [int(d) for d in np.ravel(shape)]
    try:
        out = x.reshape(dims)
    except ValueError:
        raise _invalid(
            f"Input to reshape is a tensor with {x.size} values, but the requested shape has "
            f"{int(np.prod(dims))}"
        ) from None
    return out, np.array(_F32(_range(lo, "input_min"))), np.array(_F32(_range(hi, "input_max")))


# -- RequantizationRange, Requantize, QuantizeDownAndShrinkRange ------------------------------


def _used_range(codes, lo, hi, dt):
    """The float range the codes use, as TF's CalculateUsedRange + QuantizedToFloat."""
    if codes.size == 0:
        used_lo, used_hi = _q._limits(dt)[1], _q._limits(dt)[0]
    else:
        used_lo, used_hi = int(codes.min()), int(codes.max())
    return _quantized_to_float(used_lo, lo, hi, dt), _quantized_to_float(used_hi, lo, hi, dt)


def _requantize_8bit(codes, lo, hi, out_lo, out_hi, dt_in, dt_out):
    """qint32 codes of [lo, hi] as eight-bit codes of [out_lo, out_hi]: the value a code
    stands for (its offset from the range's centre, 2**32 codes to the range), rounded
    into the output's 255 steps (TF's qint32 -> quint8 requantization, measured)."""
    lo, hi, out_lo, out_hi = (float(_F32(v)) for v in (lo, hi, out_lo, out_hi))
    if dt_in == dtypes.qint32 and dt_out == dtypes.quint8:
        if out_hi == out_lo:
            return np.zeros(codes.shape, np.int64)
        value = codes.astype(np.float64) * ((hi - lo) / 4294967296.0) + (lo + hi) / 2.0
        steps = np.floor((value - out_lo) * (255.0 / (out_hi - out_lo)) + 0.5)
        return np.clip(steps, 0, 255).astype(np.int64)
    floats = [_quantized_to_float(int(c), lo, hi, dt_in) for c in codes.reshape(-1)]
    out = [_float_to_quantized(float(f), out_lo, out_hi, dt_out) for f in floats]
    return np.array(out, np.int64).reshape(codes.shape)


_REQ_IN = ["input: Tinput", "input_min: float32", "input_max: float32"]
_EIGHT = TypeConstraint(["qint8", "quint8"])

RequantizationRange = register_op(
    "RequantizationRange",
    inputs=_REQ_IN,
    outputs=["output_min: float32", "output_max: float32"],
    attrs={"Tinput": TypeConstraint(_QUANTIZED)},
    shape_fn=lambda op: (_scalars(op, 1, 2), [_SCALAR, _SCALAR])[1],
)


@RequantizationRange.kernel("CPU")
async def _requantization_range(ctx, x, lo, hi):
    tin = ctx.attrs["Tinput"]
    if tin != dtypes.qint32:
        raise _no_kernel(ctx, Tinput=tin)
    lo_f, hi_f = _range(lo, "input_min"), _range(hi, "input_max")
    used_lo, used_hi = _used_range(_qnn._codes(x, tin), lo_f, hi_f, tin)
    return np.array(min(_F32(0), used_lo)), np.array(used_hi)


Requantize = register_op(
    "Requantize",
    inputs=[*_REQ_IN, "requested_output_min: float32", "requested_output_max: float32"],
    outputs=["output: out_type", "output_min: float32", "output_max: float32"],
    attrs={"Tinput": TypeConstraint(_QUANTIZED), "out_type": _EIGHT},
    shape_fn=lambda op: (_scalars(op, 1, 4), [op.inputs[0].shape, _SCALAR, _SCALAR])[1],
)


@Requantize.kernel("CPU")
async def _requantize(ctx, x, lo, hi, out_lo, out_hi):
    tin, tout = ctx.attrs["Tinput"], ctx.attrs["out_type"]
    if tin != dtypes.qint32:
        raise _no_kernel(ctx, Tinput=tin, out_type=tout)
    lo_f, hi_f = _range(lo, "input_min"), _range(hi, "input_max")
    out_lo_f = _range(out_lo, "requested_output_min")
    out_hi_f = _range(out_hi, "requested_output_max")
    if out_lo_f > 0.0:
        raise _invalid(f"requested_output_min must be <= 0, but got {out_lo_f:g}")
    if out_hi_f < out_lo_f:
        raise _invalid(
            f"requested_output_max must be >= requested_output_min, but got {out_hi_f:g} "
            f"and {out_lo_f:g}"
        )
    codes = _requantize_8bit(_qnn._codes(x, tin), lo_f, hi_f, out_lo_f, out_hi_f, tin, tout)
    return _qnn._as_quantized(codes, tout), np.array(_F32(out_lo_f)), np.array(_F32(out_hi_f))


QuantizeDownAndShrinkRange = register_op(
    "QuantizeDownAndShrinkRange",
    inputs=_REQ_IN,
    outputs=["output: out_type", "output_min: float32", "output_max: float32"],
    attrs={"Tinput": TypeConstraint(_QUANTIZED), "out_type": _EIGHT},
    shape_fn=lambda op: (_scalars(op, 1, 2), [op.inputs[0].shape, _SCALAR, _SCALAR])[1],
)


@QuantizeDownAndShrinkRange.kernel("CPU")
async def _quantize_down_and_shrink_range(ctx, x, lo, hi):
    tin, tout = ctx.attrs["Tinput"], ctx.attrs["out_type"]
    if (tin, tout) != (dtypes.qint32, dtypes.quint8):
        raise _no_kernel(ctx, Tinput=tin, out_type=tout)
    lo_f, hi_f = _range(lo, "input_min"), _range(hi, "input_max")
    codes = _qnn._codes(x, tin)
    used_lo, used_hi = _used_range(codes, lo_f, hi_f, tin)
    out_lo, out_hi = min(_F32(0), used_lo), max(_F32(0), used_hi)
    out = _requantize_8bit(codes, lo_f, hi_f, float(out_lo), float(out_hi), tin, tout)
    return _qnn._as_quantized(out, tout), np.array(_F32(out_lo)), np.array(_F32(out_hi))


# -- RequantizationRangePerChannel, RequantizePerChannel ---------------------------------------
#
# Per channel (the last axis of an NHWC qint32 tensor) a code stands for
# code * max(|min_c|, |max_c|) / 2**31.  The range op gives the widest such value,
# symmetric and clipped at clip_value_max; Requantize scales values by the output
# type's highest code over max(|requested_min|, |requested_max|), rounded and clamped.

_PER_CHANNEL_T = TypeConstraint(_QUANTIZED, default="qint32")


def _channel_values(ctx, x, lo, hi):
    tin = ctx.attrs["T"]
    codes = _qnn._codes(x, tin)
    if codes.ndim != 4:
        raise _invalid("input must be in NHWC format")
    lo, hi = np.asarray(lo, _F32).reshape(-1), np.asarray(hi, _F32).reshape(-1)
    depth = codes.shape[-1]
    if lo.size != depth or hi.size != depth:
        raise _invalid(
            f"input_min has incorrect size, expected {depth} was {lo.size}"
            if lo.size != depth
            else f"input_max has incorrect size, expected {depth} was {hi.size}"
        )
    scale = (np.maximum(np.abs(lo), np.abs(hi)) / _F32(1 << 31)).astype(_F32)
    return codes.astype(_F32) * scale


RequantizationRangePerChannel = register_op(
    "RequantizationRangePerChannel",
    inputs=["input: T", "input_min: float32", "input_max: float32"],
    outputs=["output_min: float32", "output_max: float32"],
    attrs={"T": _PER_CHANNEL_T, "clip_value_max": REQUIRED},
    shape_fn=lambda op: [_SCALAR, _SCALAR],
)


@RequantizationRangePerChannel.kernel("CPU")
async def _requantization_range_per_channel(ctx, x, lo, hi):
    values = _channel_values(ctx, x, lo, hi)
    widest = _F32(np.abs(values).max()) if values.size else _F32(0)
    widest = min(widest, _F32(ctx.attrs["clip_value_max"]))
    return np.array(-widest), np.array(widest)


RequantizePerChannel = register_op(
    "RequantizePerChannel",
    inputs=["input: T", "input_min: float32", "input_max: float32",
            "requested_output_min: float32", "requested_output_max: float32"],
    outputs=["output: out_type", "output_min: float32", "output_max: float32"],
    attrs={"T": _PER_CHANNEL_T, "out_type": TypeConstraint(_QUANTIZED, default="quint8")},
    shape_fn=lambda op: [op.inputs[0].shape, _SCALAR, _SCALAR],
)  # fmt: skip


@RequantizePerChannel.kernel("CPU")
async def _requantize_per_channel(ctx, x, lo, hi, out_lo, out_hi):
    tout = ctx.attrs["out_type"]
    values = _channel_values(ctx, x, lo, hi)
    out_lo_f, out_hi_f = (
        _range(out_lo, "requested_output_min"),
        _range(out_hi, "requested_output_max"),
    )
    low, high = _q._limits(tout)
    span = _F32(max(abs(out_lo_f), abs(out_hi_f)))
    scaled = values * (_F32(high) / span)
    codes = np.sign(scaled) * np.floor(np.abs(scaled) + _F32(0.5))
    codes = np.clip(codes, low, high).astype(np.int64)
    return _qnn._as_quantized(codes, tout), np.array(_F32(out_lo_f)), np.array(_F32(out_hi_f))
