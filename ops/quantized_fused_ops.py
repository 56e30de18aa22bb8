"""TF's fused quantized raw ops (the ones its oneDNN graph rewrite writes):
QuantizedConv2D{WithBias,AndRelu,...AndRequantize,WithBias[Signed]SumAndRelu...},
QuantizedConv2DPerChannel, QuantizedDepthwiseConv2D[WithBias[AndRelu[AndRequantize]]],
QuantizedMatMulWithBias[AndRelu][AndRequantize|AndDequantize] and
QuantizedBatchNormWithGlobalNormalization.

Their OpDefs are TF's (ops/quantized_fused_table.py).  TF 2.21's CPU build has only
oneDNN placeholders for the fused conv / matmul kernels: with a quint8 filter no kernel
is registered, with a qint8 one the kernel returns no output ("Missing 0-th output").
Here each computes, as the chain of TF's unfused CPU kernels its name spells (recorded
against TF by tests/fixtures/quantized_fused_cases.py):

- the core: QuantizedConv2D (the depthwise ops: each input channel convolved with its
  own filters; the per-channel op: each output channel with its own filter range, its
  min and max outputs vectors) or QuantizedMatMul, into qint32;
- WithBias: the qint32 result requantized into quint8 over the range it uses
  (QuantizeDownAndShrinkRange), then QuantizedBiasAdd with the bias quantized to quint8
  by QuantizeV2 (MIN_FIRST) over its own min and max (a qint32 bias is first read as
  values in the core's output range);
- Sum: the same requantization, then QuantizedAdd with the summand (a float summand is
  quantized as the bias is);
- Relu: QuantizedRelu on the qint32 codes; AndRequantize: Requantize into the frozen
  output range (min_freezed_output, max_freezed_output); AndDequantize: that into quint8,
  then Dequantize (MIN_FIRST).

Codes are taken relative to the code of 0.0 in their own range, so a qint8 filter or
summand gives what the same values as quint8 codes give.  The matmuls take
input_quant_mode MIN_FIRST (SCALED: UnimplementedError).  BatchNorm is TF's own CPU
kernel (it computes): the inputs requantized into qint32 over +-2**20, each channel's
scale and offset quantized there, output = input * scale / one + offset in int32.
TF registers no gradient for any of them (LookupError), nor here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import quantization_ops as _q
from asyncflow.ops import quantized_math_ops as _qm
from asyncflow.ops import quantized_nn_ops as _qnn
from asyncflow.ops.conv_ops import static_out_size
from asyncflow.ops.quantized_fused_table import OPDEFS
from asyncflow.registry import register_op

__all__: list[str] = []

_F32 = np.float32
_SCALAR = tensor_shape.TensorShape([])
_EIGHT_BIT = (dtypes.quint8, dtypes.qint8)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


# -- shape functions ---------------------------------------------------------------------


def _conv_out(op, x, f, depthwise: bool):
    n, h, w, c = x.with_rank(4).as_list()
    kh, kw, fc, oc = f.with_rank(4).as_list()
    strides, dil = op.get_attr("strides"), op.get_attr("dilations")
    pad = _text(op.get_attr("padding"))
    oh = static_out_size(h, kh, strides[1], dil[1], pad)
    ow = static_out_size(w, kw, strides[2], dil[2], pad)
    if depthwise:
        depth = c if c is not None else fc
        oc = None if depth is None or oc is None else depth * oc
    return tensor_shape.TensorShape([n, oh, ow, oc])


def _ranks(op, names_ranks) -> dict:
    by_name = {a.name: t for a, t in zip(op.op_def.inputs, op.inputs)}
    for name, rank in names_ranks:
        if name in by_name:
            by_name[name].shape.with_rank(rank)
    return by_name


def _fused_shape(op):
    name = op.type
    ins = _ranks(op, [("bias", 1)])
    if "MatMul" in name:
        a, b = ins["a"].shape.with_rank(2), ins["b"].shape.with_rank(2)
        m = a[1] if op.get_attr("transpose_a") else a[0]
        n = b[0] if op.get_attr("transpose_b") else b[1]
        ka = a[0] if op.get_attr("transpose_a") else a[1]
        ka.merge_with(b[1] if op.get_attr("transpose_b") else b[0])
        out = tensor_shape.TensorShape([m, n])
        _ranks(op, [(k, 0) for k in ("min_a", "max_a", "min_b", "max_b")])
        return [out] if name.endswith("Dequantize") else [out, _SCALAR, _SCALAR]
    depthwise = "Depthwise" in name
    out = _conv_out(op, ins["input"].shape, ins["filter"].shape, depthwise)
    if depthwise:
        return [out, tensor_shape.unknown_shape(), tensor_shape.unknown_shape()]
    if "PerChannel" in name:
        channels = tensor_shape.TensorShape([out[3]])
        return [out, channels, channels]
    _ranks(op, [(k, 0) for k in ("min_input", "max_input", "min_filter", "max_filter")])
    return [out, _SCALAR, _SCALAR]


def _batch_norm_shape(op):
    ins = _ranks(op, [(n, 1) for n in ("m", "v", "beta", "gamma")])
    return [ins["t"].shape.with_rank(4), _SCALAR, _SCALAR]


# -- the chain's steps (NumPy, on integer codes) ---------------------------------------------


def _conv_checks(attrs, xc, fc, depthwise: bool) -> None:
    strides, dil = list(attrs["strides"]), list(attrs["dilations"])
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or strides[1] != strides[2]:
        raise _invalid(
            "Current implementation only supports equal length strides in the row and column "
            "dimensions, and none in the batch and depth dimensions."
        )
    if dil != [1, 1, 1, 1]:
        raise _invalid(
            "Current implementation only supports dilated rate as 1 in the row and column "
            "dimensions."
        )
    if xc.ndim != 4 or fc.ndim != 4:
        raise _invalid(
            f"input and filter must be 4-dimensional: {list(xc.shape)} {list(fc.shape)}"
        )
    if xc.shape[3] != fc.shape[2]:
        raise _invalid(
            f"input and filter must have the same depth: {xc.shape[3]} vs {fc.shape[2]}"
        )
    if not depthwise and len(attrs.get("padding_list", ())) not in (0,):
        raise _invalid("padding_list (explicit padding) is not supported by this kernel")


def _product_range(lo_x, hi_x, tx, lo_f, hi_f, tf_):
    level = _F32(
        _qnn._level(_F32(lo_x), _F32(hi_x), tx) * _qnn._level(_F32(lo_f), _F32(hi_f), tf_)
    )
    info = np.iinfo(np.int32)
    return _F32(level * _F32(info.min)), _F32(level * _F32(info.max))


def _conv_core(op_type, attrs, xc, fc, ranges, types):
    """(qint32 codes, min, max) of the QuantizedConv2D(s) the op starts with."""
    tin, tf_ = types
    depthwise = "Depthwise" in op_type
    _conv_checks(attrs, xc, fc, depthwise)
    strides, pad = list(attrs["strides"]), _text(attrs["padding"])
    lo_x, hi_x, lo_f, hi_f = ranges
    x_zero = _qnn._zero_code(float(lo_x), float(hi_x), tin)
    if "PerChannel" in op_type:
        lo_f, hi_f = (np.asarray(v, _F32).reshape(-1) for v in (lo_f, hi_f))
        oc = fc.shape[3]
        if lo_f.size != oc or hi_f.size != oc:
            raise _invalid(f"min_filter and max_filter must have {oc} elements (one a channel)")
        parts, los, his = [], [], []
        for k in range(oc):
            f_zero = _qnn._zero_code(float(lo_f[k]), float(hi_f[k]), tf_)
            parts.append(_qnn._conv(xc, fc[..., k : k + 1], x_zero, f_zero, strides, pad))
            lo, hi = _product_range(lo_x, hi_x, tin, lo_f[k], hi_f[k], tf_)
            los.append(lo)
            his.append(hi)
        return np.concatenate(parts, axis=3), np.array(los, _F32), np.array(his, _F32)
    lo_f, hi_f = _F32(_qnn._scalar(lo_f, "min_filter")), _F32(_qnn._scalar(hi_f, "max_filter"))
    f_zero = _qnn._zero_code(float(lo_f), float(hi_f), tf_)
    if depthwise:
        parts = [
            _qnn._conv(xc[..., c : c + 1], fc[:, :, c : c + 1, :], x_zero, f_zero, strides, pad)
            for c in range(xc.shape[3])
        ]
        out = np.concatenate(parts, axis=3)
    else:
        out = _qnn._conv(xc, fc, x_zero, f_zero, strides, pad)
    return (out, *_product_range(lo_x, hi_x, tin, lo_f, hi_f, tf_))


def _matmul_core(attrs, ac, bc, ranges, types):
    if _text(attrs["input_quant_mode"]) != "MIN_FIRST":
        raise errors.UnimplementedError(
            None, None, "Only input_quant_mode MIN_FIRST is implemented for the quantized matmuls"
        )
    if ac.ndim != 2 or bc.ndim != 2:
        raise _invalid("In[0] and In[1] must be matrices")
    ac = ac.T if attrs["transpose_a"] else ac
    bc = bc.T if attrs["transpose_b"] else bc
    if ac.shape[1] != bc.shape[0]:
        raise _invalid(f"Matrix size-compatible: In[0]: {list(ac.shape)}, In[1]: {list(bc.shape)}")
    lo_a, hi_a, lo_b, hi_b = (_F32(_qnn._scalar(v, n)) for v, n in zip(ranges, _MM_RANGES))
    ta, tb = types
    ac = ac.astype(np.int64) - _qnn._zero_code(float(lo_a), float(hi_a), ta)
    bc = bc.astype(np.int64) - _qnn._zero_code(float(lo_b), float(hi_b), tb)
    return ((ac @ bc).astype(np.int32), *_product_range(lo_a, hi_a, ta, lo_b, hi_b, tb))


def _down(codes, lo, hi):
    """QuantizeDownAndShrinkRange: qint32 codes into quint8 over the range they use."""
    used_lo, used_hi = _qm._used_range(codes, float(lo), float(hi), dtypes.qint32)
    out_lo, out_hi = min(_F32(0), used_lo), max(_F32(0), used_hi)
    out = _qm._requantize_8bit(
        codes, lo, hi, float(out_lo), float(out_hi), dtypes.qint32, dtypes.quint8
    )
    return out, _F32(out_lo), _F32(out_hi)


def _quantize_float(values):
    """QuantizeV2 (quint8, MIN_FIRST) over the values' own min and max."""
    v = np.asarray(values, _F32)
    if v.size == 0:
        raise _invalid("the bias and a float summand must not be empty")
    lo, hi = np.array(v.min(), _F32), np.array(v.max(), _F32)
    q, out_lo, out_hi = _q._quantize(
        v, lo, hi, dtypes.quint8, "MIN_FIRST", "HALF_AWAY_FROM_ZERO", False, -1, 0.01
    )
    return _qnn._codes(q, dtypes.quint8), _F32(out_lo), _F32(out_hi)


def _bias_add(codes, lo, hi, bias, tbias):
    if bias.ndim != 1 or bias.shape[0] != codes.shape[-1]:
        raise _invalid(
            "Must provide as many biases as the last dimension of the input tensor: "
            f"{list(bias.shape)} vs. {list(codes.shape)}"
        )
    if tbias == dtypes.qint32:  # (its codes read in the core's output range)
        bias = _q._q2f_min_first(_qnn._codes(bias, tbias), _F32(lo), _F32(hi), dtypes.qint32)
    bq, b_lo, b_hi = _quantize_float(bias)
    c8, lo8, hi8 = _down(codes, lo, hi)
    z, out_lo, out_hi = _qm._quantized_sum(
        c8, dtypes.quint8, float(lo8), float(hi8), bq, dtypes.quint8, float(b_lo), float(b_hi), 17
    )
    return z, _F32(out_lo), _F32(out_hi)


def _sum(codes, lo, hi, summand, s_lo, s_hi, tsum):
    if tuple(summand.shape) != tuple(codes.shape):
        raise _invalid(
            f"summand must have the output's shape: {list(summand.shape)} vs. {list(codes.shape)}"
        )
    if tsum == dtypes.float32:
        sc, s_lo, s_hi, tsum = (*_quantize_float(summand), dtypes.quint8)
    else:
        sc = _qnn._codes(summand, tsum)
    c8, lo8, hi8 = _down(codes, lo, hi)
    lo8, hi8, s_lo, s_hi = (float(_F32(v)) for v in (lo8, hi8, s_lo, s_hi))
    out_lo, out_hi = _qm._sum_range(lo8, hi8, s_lo, s_hi, 14)
    lo32, hi32 = float(out_lo), float(out_hi)
    xs = _qm._add_operand(c8, lo8, hi8, dtypes.quint8, lo32, hi32, False)
    ys = _qm._add_operand(sc, s_lo, s_hi, tsum, lo32, hi32, sc.size == 1)
    return (xs + ys).astype(np.int32), _F32(out_lo), _F32(out_hi)


def _relu(codes, lo, hi):
    zero = _qm._float_to_quantized(0.0, float(lo), float(hi), dtypes.qint32)
    return np.maximum(codes.astype(np.int64), zero)


def _requantize(codes, lo, hi, out_lo, out_hi, tout):
    if out_lo > 0.0:
        raise _invalid(f"min_freezed_output must be <= 0, but got {out_lo:g}")
    if out_hi < out_lo:
        raise _invalid(
            f"max_freezed_output must be >= min_freezed_output, but got {out_hi:g} and {out_lo:g}"
        )
    out = _qm._requantize_8bit(codes, lo, hi, out_lo, out_hi, dtypes.qint32, tout)
    return out, _F32(out_lo), _F32(out_hi)


# -- the fused kernel -----------------------------------------------------------------------

_MM_RANGES = ("min_a", "max_a", "min_b", "max_b")
_CONV_RANGES = ("min_input", "max_input", "min_filter", "max_filter")


def _out_type(op_type: str, attrs) -> dtypes.DType:
    return attrs["Toutput"] if "MatMul" in op_type else attrs["out_type"]


def _check_types(ctx) -> None:
    op_type, at = ctx.op.type, ctx.attrs
    mm = "MatMul" in op_type
    operands = (at["T1"], at["T2"]) if mm else (at["Tinput"], at["Tfilter"])
    tout = _out_type(op_type, at)
    if op_type.endswith("Dequantize"):
        want_out = (dtypes.float32,)
    elif op_type.endswith("Requantize"):
        want_out = _EIGHT_BIT
    else:
        want_out = (dtypes.qint32,)
    ok = all(t in _EIGHT_BIT for t in operands) and tout in want_out
    ok = ok and at.get("Tbias", dtypes.float32) in (dtypes.float32, dtypes.qint32)
    ok = ok and at.get("Tsummand", dtypes.quint8) in _EIGHT_BIT
    if not ok:
        types = {k: v for k, v in at.items() if isinstance(v, dtypes.DType)}
        raise _qnn._no_kernel(op_type, types, ctx.op.name)


def _fused(op_type: str, attrs, args: dict):
    """The chain the op's name spells, on the inputs by name."""
    if "MatMul" in op_type:
        types = (attrs["T1"], attrs["T2"])
        codes = [_qnn._codes(args[k], t) for k, t in zip(("a", "b"), types)]
        c, lo, hi = _matmul_core(attrs, *codes, [args[k] for k in _MM_RANGES], types)
    else:
        types = (attrs["Tinput"], attrs["Tfilter"])
        xc, fc = (_qnn._codes(args[k], t) for k, t in zip(("input", "filter"), types))
        ranges = [args[k] for k in _CONV_RANGES]
        ranges[:2] = [_F32(_qnn._scalar(v, n)) for v, n in zip(ranges[:2], _CONV_RANGES)]
        c, lo, hi = _conv_core(op_type, attrs, xc, fc, ranges, types)
    if "Bias" in op_type:
        c, lo, hi = _bias_add(
            c, lo, hi, np.asarray(args["bias"]), attrs.get("Tbias", dtypes.float32)
        )
    if "Sum" in op_type:
        tsum = attrs.get("Tsummand", dtypes.float32)
        s_lo = _qnn._scalar(args["min_summand"], "min_summand") if "min_summand" in args else 0.0
        s_hi = _qnn._scalar(args["max_summand"], "max_summand") if "max_summand" in args else 0.0
        c, lo, hi = _sum(c, lo, hi, np.asarray(args["summand"]), s_lo, s_hi, tsum)
    if "Relu" in op_type:
        c = _relu(c, lo, hi)
    if not op_type.endswith("quantize"):
        return _qnn._as_quantized(c, dtypes.qint32), np.array(lo), np.array(hi)
    frozen = [_F32(_qnn._scalar(args[k], k)) for k in ("min_freezed_output", "max_freezed_output")]
    tout = dtypes.quint8 if op_type.endswith("Dequantize") else _out_type(op_type, attrs)
    c, lo, hi = _requantize(c, float(lo), float(hi), float(frozen[0]), float(frozen[1]), tout)
    if op_type.endswith("Dequantize"):
        return _q._q2f_min_first(c, _F32(lo), _F32(hi), dtypes.quint8).astype(_F32)
    return _qnn._as_quantized(c, tout), np.array(lo), np.array(hi)


def _register_fused(name: str):
    inputs, outputs, attrs, stateful = OPDEFS[name]
    op_def = register_op(name, inputs, outputs, dict(attrs), _fused_shape, stateful=stateful)
    arg_names = [s.split(":")[0] for s in inputs]

    @op_def.kernel("CPU")
    async def _kernel(ctx, *args):
        _check_types(ctx)
        return await ctx.compute(_fused, ctx.op.type, ctx.attrs, dict(zip(arg_names, args)))

    _kernel.__name__ = f"_{name}_kernel"
    return op_def


FUSED = {name: _register_fused(name) for name in OPDEFS if name.startswith(("QuantizedConv",
         "QuantizedDepthwise", "QuantizedMatMul"))}  # fmt: skip


# -- QuantizedBatchNormWithGlobalNormalization (TF's own kernel computes) ------------------------

_BN = "QuantizedBatchNormWithGlobalNormalization"
QuantizedBatchNormWithGlobalNormalization = register_op(
    _BN, *OPDEFS[_BN][:3], shape_fn=_batch_norm_shape, stateful=OPDEFS[_BN][3]
)
_BN_RANGE = float(1 << 20)


def _to_float(codes, lo: float, hi: float, dt):
    """TF's QuantizedToFloat, element-wise (as quantized_math_ops' scalar one)."""
    if lo == hi:
        return np.full(codes.shape, _F32(lo))
    low, _ = _q._limits(dt)
    steps = float(1 << (8 * np.dtype(_q._storage(dt)).itemsize))
    scale = ((hi - lo) * (steps / (steps - 1.0))) / steps
    step32 = float(_F32(scale))
    min_rounded = _qnn._round_half_away(lo / step32) * step32
    return (min_rounded + (codes.astype(np.float64) - low) * scale).astype(_F32)


def _to_codes(values, lo: float, hi: float, dt):
    """TF's FloatToQuantized (in double, clamped), element-wise."""
    low, high = _q._limits(dt)
    if lo == hi:
        return np.full(np.shape(values), low, np.int64)
    steps = float(1 << (8 * np.dtype(_q._storage(dt)).itemsize))
    scale = steps / ((hi - lo) * (steps / (steps - 1.0)))
    v = np.asarray(values, np.float64) * scale
    code = np.sign(v) * np.floor(np.abs(v) + 0.5) - _qnn._round_half_away(lo * scale) + low
    return np.clip(code, low, high).astype(np.int64)


def _batch_norm(args: dict, tin, tout, eps: float, scale_after: bool):
    def floats(k):
        codes = _qnn._codes(args[k], tin)
        lo, hi = (float(_F32(_qnn._scalar(args[f"{k}_{e}"], f"{k}_{e}"))) for e in ("min", "max"))
        return codes, lo, hi

    t, t_lo, t_hi = floats("t")
    if t.ndim != 4:
        raise _invalid(f"input must be 4-dimensional{list(t.shape)}")
    depth = t.shape[3]
    per_channel = {}
    for k in ("m", "v", "beta", "gamma"):
        codes, lo, hi = floats(k)
        if codes.ndim != 1 or codes.shape[0] != depth:
            names = {"m": "mean", "v": "variance"}
            raise _invalid(f"{names.get(k, k)} must be 1-dimensional{list(codes.shape)}")
        per_channel[k] = _to_float(codes, lo, hi, tin)
    scale = (_F32(1) / np.sqrt(per_channel["v"] + _F32(eps))).astype(_F32)
    if scale_after:
        scale = (scale * per_channel["gamma"]).astype(_F32)
    offset = (-per_channel["m"] * scale + per_channel["beta"]).astype(_F32)
    lo, hi = -_BN_RANGE, _BN_RANGE
    scale_q, offset_q = _to_codes(scale, lo, hi, tout), _to_codes(offset, lo, hi, tout)
    one = int(_to_codes(1.0, lo, hi, tout))
    x = _to_codes(_to_float(t, t_lo, t_hi, tin), lo, hi, tout)
    product = (x * scale_q).astype(np.int32).astype(np.int64)  # (int32 arithmetic, as TF's)
    out = (np.trunc(product / one).astype(np.int64) + offset_q).astype(np.int32)
    return _qnn._as_quantized(out, tout), np.array(_F32(lo)), np.array(_F32(hi))


@QuantizedBatchNormWithGlobalNormalization.kernel("CPU")
async def _quantized_batch_norm(ctx, *args):
    at = ctx.attrs
    tin, tout = at["Tinput"], at["out_type"]
    if (tin, tout) != (dtypes.quint8, dtypes.qint32):
        raise _qnn._no_kernel(ctx.op.type, {"Tinput": tin, "out_type": tout}, ctx.op.name)
    names = [s.split(":")[0] for s in OPDEFS[_BN][0]]
    eps, scale_after = float(at["variance_epsilon"]), bool(at["scale_after_normalization"])
    return await ctx.compute(_batch_norm, dict(zip(names, args)), tin, tout, eps, scale_after)
