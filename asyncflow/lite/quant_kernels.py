"""NumPy kernels for quantized TFLite operators: full-integer (int8/uint8 activations,
int8 weights) and hybrid (float activations, int8 weights: dynamic-range models).

`run(name, inputs, options, outputs, qin, qout)` is the interpreter's entry: `qin`/`qout`
hold each tensor's quantization (`Quant`, or None for a float tensor). It returns None
for an operator that is not quantized, so the float kernels run it.

The integer math is TFLite's reference kernels' (gemmlowp fixed point): a real multiplier
becomes a Q31 `multiplier` and a power-of-two `shift` (`quantize_multiplier`), and
`multiply_by_quantized_multiplier` rounds twice (doubling high multiply, then rounding
right shift), as TFLite's default build does. Hybrid kernels quantize each batch row of
the float input to int8 (asymmetrically when the FULLY_CONNECTED asks for it, always for
CONV_2D and DEPTHWISE_CONV_2D), accumulate in int32 and scale back in float32. LOGISTIC,
TANH and EXP use TFLite's 256-entry tables, SOFTMAX its float exp table; reshapes,
slices, TRANSPOSE, SPLIT, GATHER, MAXIMUM/MINIMUM move or compare the stored integers.

16x8 models (int16 activations, int8 weights, int64 biases) use the same kernels, with
TFLite's int16 variants where it has them: convolutions rescale their int64
accumulators with the wide form (`multiply_by_quantized_multiplier_wide`), SOFTMAX uses
TFLite's 513-entry exp and 1/(1+x) tables (`lut_int16`), LOGISTIC and TANH interpolate
a 256-entry sigmoid table.

Invariant: integer accumulation happens in int64 arrays, so no intermediate wraps where
TFLite's int32 would not.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from asyncflow.lite import kernels, schema
from asyncflow.lite.kernels import KernelError

_INT32_MIN = -(1 << 31)
# Operators whose first two inputs must carry quantization parameters.
_QUANTIZED_TYPES = {np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}
_SCALED = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL"}
_INT32_MAX = (1 << 31) - 1


@dataclasses.dataclass
class Quant:
    """A tensor's quantization: per-tensor (one scale) or per-channel along `axis`."""

    scale: np.ndarray  # float32
    zero_point: np.ndarray  # int64
    axis: int = 0

    @property
    def s(self) -> float:
        return float(self.scale[0])

    @property
    def z(self) -> int:
        return int(self.zero_point[0])


def quant_of(tensor: dict) -> Quant | None:
    """A file tensor's `Quant`, or None when it carries no scale."""
    q = tensor.get("quantization") or {}
    scale = q.get("scale")
    if scale is None or len(scale) == 0:
        return None
    zero = q.get("zero_point")
    zero = np.zeros(len(scale), np.int64) if zero is None or not len(zero) else zero
    return Quant(
        np.asarray(scale, np.float32),
        np.asarray(zero, np.int64),
        int(q.get("quantized_dimension") or 0),
    )


# -- fixed point


def _round_half_away(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """Q31 multipliers and shifts of `real` (array of doubles), as TFLite's
    QuantizeMultiplier: real = multiplier * 2**(shift - 31)."""
    reals = np.atleast_1d(np.asarray(real, np.float64))
    mults, shifts = [], []
    for r in reals:
        if r == 0.0:
            mults.append(0)
            shifts.append(0)
            continue
        frac, shift = math.frexp(float(r))
        q = int(math.floor(frac * (1 << 31) + 0.5))
        if q == 1 << 31:
            q //= 2
            shift += 1
        if shift < -31:
            q, shift = 0, 0
        mults.append(q)
        shifts.append(shift)
    return np.asarray(mults, np.int64), np.asarray(shifts, np.int64)


def _doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    overflow = (a == _INT32_MIN) & (b == _INT32_MIN)
    ab = a * b
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    # C++ divides int64 truncating toward zero.
    high = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))
    return np.where(overflow, _INT32_MAX, high)


def _rounding_shift_right(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """x * multiplier * 2**(shift - 31), rounded as TFLite's reference kernels round."""
    x = np.asarray(x, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    high = _doubling_high_mul(np.clip(x << left, _INT32_MIN, _INT32_MAX), multiplier)
    return _rounding_shift_right(high, right)


def multiply_by_quantized_multiplier_wide(x, multiplier, shift) -> np.ndarray:
    """The int64-accumulator form (16x8 kernels): TFLite rounds the Q31 multiplier to
    Q15 and rounds once, half up, in a single right shift."""
    x = np.asarray(x, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    reduced = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, np.int64)
    return (x * reduced + (np.int64(1) << (total - 1))) >> total


def _qrange(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _act_range(act: int, q: Quant, dtype) -> tuple[int, int]:
    lo, hi = _qrange(dtype)
    scale = np.float32(q.s)

    def quantize(f):
        return q.z + int(_round_half_away(np.float32(f) / scale))

    if act == schema.ACT_RELU:
        lo = max(lo, quantize(0.0))
    elif act == schema.ACT_RELU6:
        lo, hi = max(lo, quantize(0.0)), min(hi, quantize(6.0))
    elif act == schema.ACT_RELU_N1_TO_1:
        lo, hi = max(lo, quantize(-1.0)), min(hi, quantize(1.0))
    elif act != schema.ACT_NONE:
        raise KernelError(f"Unsupported fused activation {act} on a quantized operator")
    return lo, hi


def _requantize_out(acc, mult, shift, qo: Quant, act: int, dtype, wide=False) -> np.ndarray:
    scale = multiply_by_quantized_multiplier_wide if wide else multiply_by_quantized_multiplier
    y = scale(acc, mult, shift) + qo.z
    lo, hi = _act_range(act, qo, dtype)
    return np.clip(y, lo, hi).astype(dtype)


def _conv_multipliers(qi: Quant, qw: Quant, qo: Quant):
    real = np.float64(qi.scale[0]) * qw.scale.astype(np.float64) / np.float64(qo.scale[0])
    return quantize_multiplier(real)


# -- integer kernels


def _wide(outs) -> bool:
    # 16x8 convolutions (int16 activations) accumulate in int64 and rescale with the
    # wide form.
    return np.dtype(outs[0][1]) == np.int16


def _int_windows(x, qi: Quant, o, kh, kw):
    """Windows of x - zero point; padding reads as the zero point (contributes 0)."""
    xs = x.astype(np.int64) - qi.z
    return kernels._windows(
        xs,
        kh,
        kw,
        o["stride_h"],
        o["stride_w"],
        o.get("dilation_h_factor", 1),
        o.get("dilation_w_factor", 1),
        o["padding"],
        0,
    )


def _filter_values(f: np.ndarray, qw: Quant) -> np.ndarray:
    """Filter integers less their zero point (0 for int8; uint8 files store 128 or so)."""
    if qw.zero_point.size == 1:
        return f.astype(np.int64) - qw.z
    shape = [1] * f.ndim
    shape[qw.axis] = -1
    return f.astype(np.int64) - qw.zero_point.reshape(shape)


def _weighted_out(acc, bias, o, outs, qin, qout, wide=False):
    """A weighted sum's output: the bias added, rescaled by input scale * weight scale
    over the output scale, the fused activation applied, in the output type."""
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    mult, shift = _conv_multipliers(qin[0], qin[1], qout[0])
    act = o.get("fused_activation_function", 0)
    return _requantize_out(acc, mult, shift, qout[0], act, outs[0][1], wide)


def _conv_2d(ins, o, outs, qin, qout):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    if x.ndim != 4 or f.ndim != 4 or x.shape[3] != f.shape[3]:
        raise KernelError("CONV_2D needs 4-D input and filter with matching depth")
    win = _int_windows(x, qin[0], o, f.shape[1], f.shape[2])
    acc = np.tensordot(win, _filter_values(f, qin[1]), axes=([3, 4, 5], [1, 2, 3]))
    return [_weighted_out(acc, bias, o, outs, qin, qout, _wide(outs))]


def _depthwise(ins, o, outs, qin, qout):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    cin = x.shape[3]
    mult_c = f.shape[3] // cin if cin else 0
    if x.ndim != 4 or f.ndim != 4 or f.shape[0] != 1 or mult_c * cin != f.shape[3]:
        raise KernelError("DEPTHWISE_CONV_2D needs a [1, H, W, C*M] filter for C channels")
    win = _int_windows(x, qin[0], o, f.shape[1], f.shape[2])
    filt = _filter_values(f, qin[1])[0].reshape(f.shape[1], f.shape[2], cin, mult_c)
    acc = np.einsum("nhwijc,ijcm->nhwcm", win, filt).reshape(win.shape[:3] + (cin * mult_c,))
    return [_weighted_out(acc, bias, o, outs, qin, qout, _wide(outs))]


def _fully_connected(ins, o, outs, qin, qout):
    x, w, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    depth = w.shape[1]
    if w.ndim != 2 or (x.size and x.size % depth):
        raise KernelError("FULLY_CONNECTED input size is not a multiple of the weights' depth")
    xs = x.astype(np.int64).reshape(-1, depth) - qin[0].z
    acc = xs @ (w.astype(np.int64) - qin[1].zero_point.reshape(-1, 1)).T
    # TFLite's 16x8 FULLY_CONNECTED rescales with the int32 form, unlike its convolutions.
    return [_weighted_out(acc, bias, o, outs, qin, qout).reshape(outs[0][0])]


def _add_or_sub(sign: int):
    def kernel(ins, o, outs, qin, qout):
        (a, b), (qa, qb), qo = ins, qin, qout[0]
        kernels._broadcast_checked(a, b)
        left_shift = 20 if outs[0][1] != np.int16 else 15
        twice_max = np.float64(np.float32(2) * np.float32(max(qa.s, qb.s)))
        ma, sa = quantize_multiplier(np.float64(qa.scale[0]) / twice_max)
        mb, sb = quantize_multiplier(np.float64(qb.scale[0]) / twice_max)
        mo, so = quantize_multiplier(twice_max / np.float64(np.float32((1 << left_shift) * qo.s)))
        xa = multiply_by_quantized_multiplier((a.astype(np.int64) - qa.z) << left_shift, ma, sa)
        xb = multiply_by_quantized_multiplier((b.astype(np.int64) - qb.z) << left_shift, mb, sb)
        act = o.get("fused_activation_function", 0)
        return [_requantize_out(xa + sign * xb, mo, so, qo, act, outs[0][1])]

    return kernel


def _relu(upper: float | None):
    def kernel(ins, o, outs, qin, qout):
        x, qi, qo, dtype = ins[0], qin[0], qout[0], outs[0][1]
        m, s = quantize_multiplier(np.float64(qi.scale[0]) / np.float64(qo.scale[0]))
        y = multiply_by_quantized_multiplier(x.astype(np.int64) - qi.z, m, s) + qo.z
        lo, hi = _qrange(dtype)
        lo = max(lo, qo.z)
        if upper is not None:
            hi = min(hi, qo.z + int(_round_half_away(np.float32(upper) / np.float32(qo.s))))
        return [np.clip(y, lo, hi).astype(dtype)]

    return kernel


def _pad(ins, o, outs, qin, qout):
    # Padding holds the output's zero point: the real value 0.
    x = ins[0]
    pads = np.asarray(ins[1], np.int64).reshape(-1, 2)
    if pads.shape[0] != x.ndim or (pads < 0).any():
        raise KernelError("PAD needs one non-negative (before, after) pair per dimension")
    kernels._check_size([d + int(p.sum()) for d, p in zip(x.shape, pads, strict=True)], "PAD")
    fill = qout[0].z if len(ins) < 3 or ins[2] is None else ins[2].reshape(())
    return [np.pad(x, pads, constant_values=fill).astype(outs[0][1])]


def _mul(ins, o, outs, qin, qout):
    (a, b), (qa, qb), qo = ins, qin, qout[0]
    kernels._broadcast_checked(a, b)
    m, s = quantize_multiplier(
        np.float64(qa.scale[0]) * np.float64(qb.scale[0]) / np.float64(qo.scale[0])
    )
    prod = (a.astype(np.int64) - qa.z) * (b.astype(np.int64) - qb.z)
    return [_requantize_out(prod, m, s, qo, o.get("fused_activation_function", 0), outs[0][1])]


def _max_pool(ins, o, outs, qin, qout):
    x = ins[0]
    lo, _ = _qrange(x.dtype)
    win = kernels._windows(
        x,
        o["filter_height"],
        o["filter_width"],
        o["stride_h"],
        o["stride_w"],
        1,
        1,
        o["padding"],
        lo,
    )
    lo, hi = _act_range(o.get("fused_activation_function", 0), qout[0], outs[0][1])
    return [np.clip(win.max(axis=(3, 4)), lo, hi).astype(outs[0][1])]


def _avg_pool(ins, o, outs, qin, qout):
    x = ins[0]
    args = (o["filter_height"], o["filter_width"], o["stride_h"], o["stride_w"], 1, 1)
    total = kernels._windows(x.astype(np.int64), *args, o["padding"], 0).sum(axis=(3, 4))
    ones = np.ones((1,) + x.shape[1:3] + (1,), np.int64)
    count = kernels._windows(ones, *args, o["padding"], 0).sum(axis=(3, 4))
    half = count // 2
    # C++ integer division truncates toward zero; TFLite rounds half away from zero.
    avg = np.where(total > 0, (total + half) // count, -((half - total) // count))
    lo, hi = _act_range(o.get("fused_activation_function", 0), qout[0], outs[0][1])
    return [np.clip(avg, lo, hi).astype(outs[0][1])]


def lut_int16(fn, in_scale, in_zero, out_scale, out_zero) -> np.ndarray:
    """TFLite's 513-entry int16 table of `fn` (float64): 512 samples over the input's
    int16 range, each biased by half the error its linear interpolation makes at the
    midpoint, and the value at the top as the last slope's end."""
    lo16, hi16 = -32768, 32767
    in_min, in_max = in_scale * (lo16 - in_zero), in_scale * (hi16 - in_zero)
    out_min, out_max = out_scale * (lo16 - out_zero), out_scale * (hi16 - out_zero)
    step = (in_max - in_min) / 512
    inv = 65536.0 / (out_max - out_min)
    at = in_min + np.arange(513, dtype=np.float64) * step
    val, nxt = fn(at[:-1]), fn(at[1:])
    mid = fn(at[:-1] + step / 2)
    sample = _round_half_away(val * inv)
    interp = _round_half_away((nxt * inv + sample) / 2)
    bias = _round_half_away((interp - _round_half_away(mid * inv)) / 2)
    table = np.empty(513, np.int64)
    table[:512] = np.clip(sample - bias, lo16, hi16)
    table[512] = np.clip(_round_half_away(fn(np.float64(in_max)) * inv), lo16, hi16)
    return table


def lut_lookup_int16(v: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The high 9 bits of int16 `v` pick an entry; the low 7 interpolate to the next."""
    v = np.asarray(v, np.int64)
    index = 256 + (v >> 7)
    base = table[index]
    slope = table[index + 1] - base
    return base + ((slope * (v & 0x7F) + 64) >> 7)


_EXP_LUT = None
_RECIPROCAL_LUT = None


def _softmax_tables():
    # Built once: exp over [-10, 0] and 1 / (1 + x) over [0, 1], both into [-1, 1].
    global _EXP_LUT, _RECIPROCAL_LUT
    if _EXP_LUT is None:
        span = 65535.0
        _EXP_LUT = lut_int16(np.exp, 10.0 / span, 32767, 2.0 / span, 0)
        _RECIPROCAL_LUT = lut_int16(lambda v: 1.0 / (1.0 + v), 1.0 / span, -32768, 2.0 / span, 0)
    return _EXP_LUT, _RECIPROCAL_LUT


def _softmax_int16(ins, o, outs, qin, qout):
    x, qi = ins[0].astype(np.int64), qin[0]
    if qi.z != 0 or qout[0].z != 0:
        raise KernelError("int16 SOFTMAX needs zero points of 0")
    exp_lut, recip_lut = _softmax_tables()
    # The input difference is rescaled so that [-65535, 0] spans [-10, 0].
    real = np.float64(qi.scale[0]) * np.float64(np.float32(o.get("beta", 1.0))) / (10.0 / 65535.0)
    mult, shift = quantize_multiplier(real)
    diff = x - x.max(axis=-1, keepdims=True)
    scaled = multiply_by_quantized_multiplier(diff, mult[0], shift[0]) + 32767
    e = lut_lookup_int16(np.clip(scaled, -32768, 32767), exp_lut)
    total = e.sum(axis=-1, keepdims=True)
    # Count leading zeros of the 32-bit sum, which is positive.
    headroom = 32 - np.vectorize(int.bit_length, otypes=[np.int64])(total)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    recip = lut_lookup_int16(np.clip(shifted - (1 << 15) - (1 << 16), -32768, 32767), recip_lut)
    right = 31 - headroom
    y = (e * recip + (np.int64(1) << (right - 1))) >> right
    return [np.clip(y, 0, 32767).astype(np.int16)]


def _softmax(ins, o, outs, qin, qout):
    if ins[0].dtype == np.int16:
        return _softmax_int16(ins, o, outs, qin, qout)
    x, qi, qo = ins[0].astype(np.int64), qin[0], qout[0]
    # TFLite's float lookup table: exp(-scale * beta * (max - x)).
    scale = np.float32(-qi.s * np.float32(o.get("beta", 1.0)))
    diff = x.max(axis=-1, keepdims=True) - x
    table = np.exp(scale * np.arange(256, dtype=np.float32)).astype(np.float32)
    e = table[np.clip(diff, 0, 255)]
    total = np.cumsum(e, axis=-1, dtype=np.float32)[..., -1:]
    inv = np.float32(1) / (total * np.float32(qo.s))
    q = _round_half_away(e * inv).astype(np.int64) + qo.z
    lo, hi = _qrange(outs[0][1])
    return [np.clip(q, lo, hi).astype(outs[0][1])]


def _lut(fn, int16_kernel=None):
    """LOGISTIC / TANH: a 256-entry table of fn over every input value (int16: TFLite's
    interpolated sigmoid table)."""

    def kernel(ins, o, outs, qin, qout):
        if int16_kernel is not None and ins[0].dtype == np.int16:
            return int16_kernel(ins, o, outs, qin, qout)
        x, qi, qo = ins[0], qin[0], qout[0]
        lo, hi = _qrange(x.dtype)
        vals = np.arange(lo, hi + 1, dtype=np.int64)
        deq = np.float32(qi.s) * (vals - qi.z).astype(np.float32)
        out = fn(deq.astype(np.float32)).astype(np.float32)
        q = _round_half_away(out * (np.float32(1) / np.float32(qo.s))) + qo.z
        table = np.clip(q, *_qrange(outs[0][1])).astype(np.int64)
        return [table[x.astype(np.int64) - lo].astype(outs[0][1])]

    return kernel


def _sigmoid_table() -> np.ndarray:
    """TFLite's 256-entry sigmoid(i / 24) in unsigned 0.16 fixed point (int16 kernels)."""
    i = np.arange(256, dtype=np.float64)
    return np.minimum(np.round(65536.0 / (1.0 + np.exp(-i / 24.0))), 65535).astype(np.int64)


_SIGMOID_TABLE = _sigmoid_table()


def _int16_table_scaling(scale: float) -> tuple[int, int]:
    """(multiplier, left shift) bringing an int16 input of `scale` to the table's
    1 / (3 * 4096) step: a power-of-two scale of 2**-12 or 2**-11 keeps multiplier 0."""
    log2 = math.log(scale) / math.log(2.0)
    rounded = int(round(log2))
    shift = 12 + rounded
    if abs(log2 - rounded) < 1e-3 and shift in (0, 1):
        return 0, shift
    multiplier = float(np.float32(scale)) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


def _scaled_int16(x, qi: Quant, tanh: bool):
    if qi.z != 0:
        raise KernelError("int16 LOGISTIC/TANH need a zero point of 0")
    multiplier, shift = _int16_table_scaling(qi.s)
    if multiplier == 0:
        multiplier, shift = 3 << shift, 0
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    return (x.astype(np.int64) * multiplier + rounding) >> shift


def _logistic_int16(ins, o, outs, qin, qout):
    v = _scaled_int16(ins[0], qin[0], False)
    a = np.abs(v)
    hi = a >> 9
    inside = hi < 255
    k = np.minimum(hi, 254)
    lo_t, hi_t = _SIGMOID_TABLE[k], _SIGMOID_TABLE[k + 1]
    r = np.where(inside, (lo_t << 9) + (a & 0x1FF) * (hi_t - lo_t), 0x7FFF << 10)
    r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return [(r >> 10).astype(np.int16)]


def _tanh_int16(ins, o, outs, qin, qout):
    v = _scaled_int16(ins[0], qin[0], True)
    a = np.abs(v)
    hi = a >> 8
    inside = hi < 255
    k = np.minimum(hi, 254)
    lo_t, hi_t = _SIGMOID_TABLE[k], _SIGMOID_TABLE[k + 1]
    r = np.where(inside, (lo_t << 8) + (a & 0xFF) * (hi_t - lo_t), 0xFFFF << 8)
    r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return [(r >> 8).astype(np.int16)]


def _sigmoid(v):
    return np.float32(1) / (np.float32(1) + np.exp(-v))


def _requantize(x, qi: Quant, qo: Quant, dtype) -> np.ndarray:
    if qi.s == qo.s and qi.z == qo.z:
        return np.clip(x, *_qrange(dtype)).astype(dtype)
    m, s = quantize_multiplier(np.float64(qi.scale[0]) / np.float64(qo.scale[0]))
    y = multiply_by_quantized_multiplier(x.astype(np.int64) - qi.z, m, s) + qo.z
    return np.clip(y, *_qrange(dtype)).astype(dtype)


def _quantize(ins, o, outs, qin, qout):
    x, qo, dtype = ins[0], qout[0], outs[0][1]
    if x.dtype.kind == "f":
        q = _round_half_away(x.astype(np.float32) / np.float32(qo.s)) + qo.z
        return [np.clip(q, *_qrange(dtype)).astype(dtype)]
    return [_requantize(x, qin[0], qo, dtype)]


def _concat(ins, o, outs, qin, qout):
    qo, dtype = qout[0], outs[0][1]
    parts = []
    for x, qi in zip(ins, qin, strict=True):
        if qi.s == qo.s and qi.z == qo.z:
            parts.append(x)
            continue
        scale = np.float32(qi.s) * (np.float32(1) / np.float32(qo.s))
        bias = np.float32(-qi.z) * scale
        q = _round_half_away(x.astype(np.float32) * scale + bias).astype(np.int64) + qo.z
        parts.append(np.clip(q, *_qrange(dtype)).astype(dtype))
    axis = o.get("axis", 0) % ins[0].ndim
    return [np.concatenate(parts, axis=axis)]


def _mean(ins, o, outs, qin, qout):
    x, qi, qo, dtype = ins[0], qin[0], qout[0], outs[0][1]
    axes = tuple(sorted({int(a) % x.ndim for a in np.ravel(ins[1])}))
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    total = x.astype(np.int64).sum(axis=axes, keepdims=bool(o.get("keep_dims")))
    mult, shift = quantize_multiplier(np.float64(qi.scale[0]) / np.float64(qo.scale[0]))
    mult, shift = int(mult[0]), int(shift[0])
    if count > 0:
        # TFLite folds the division by the count into the multiplier.
        extra = min(count.bit_length() - 1, 32, 31 + shift)
        mult = (mult << extra) // count
        shift -= extra
    y = multiply_by_quantized_multiplier(total - qi.z * count, mult, shift) + qo.z
    return [np.clip(y, *_qrange(dtype)).astype(dtype).reshape(outs[0][0])]


def _passthrough(kind):
    def kernel(ins, o, outs, qin, qout):
        return kernels.KERNELS[kind](ins, o, outs)

    return kernel


INT_KERNELS = {
    "CONV_2D": _conv_2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _add_or_sub(1),
    "SUB": _add_or_sub(-1),
    "RELU": _relu(None),
    "RELU6": _relu(6.0),
    "PAD": _pad,
    "MUL": _mul,
    "MAX_POOL_2D": _max_pool,
    "AVERAGE_POOL_2D": _avg_pool,
    "SOFTMAX": _softmax,
    "LOGISTIC": _lut(_sigmoid, _logistic_int16),
    "TANH": _lut(np.tanh, _tanh_int16),
    "EXP": _lut(np.exp),
    "QUANTIZE": _quantize,
    "CONCATENATION": _concat,
    "MEAN": _mean,
    "RESHAPE": _passthrough("RESHAPE"),
    "SQUEEZE": _passthrough("SQUEEZE"),
    # Same parameters in and out: these move or compare the stored integers.
    "TRANSPOSE": _passthrough("TRANSPOSE"),
    "STRIDED_SLICE": _passthrough("STRIDED_SLICE"),
    "SLICE": _passthrough("SLICE"),
    "SPLIT": _passthrough("SPLIT"),
    "GATHER": _passthrough("GATHER"),
    "MAXIMUM": _passthrough("MAXIMUM"),
    "MINIMUM": _passthrough("MINIMUM"),
}


# -- hybrid kernels (float activations, int8 weights)


def _quantize_rows(x2d: np.ndarray, asymmetric: bool):
    """Each row of float32 `x2d` as int8: (values, float32 scales, offsets)."""
    rows = x2d.shape[0]
    qx = np.zeros(x2d.shape, np.int64)
    scales = np.ones(rows, np.float32)
    offsets = np.zeros(rows, np.int64)
    for r in range(rows):
        v = x2d[r].astype(np.float32)
        lo_f = min(0.0, float(v.min())) if v.size else 0.0
        hi_f = max(0.0, float(v.max())) if v.size else 0.0
        if asymmetric:
            if lo_f == hi_f:
                continue
            scale = (hi_f - lo_f) / 255.0
            zp_min, zp_max = -128.0 - lo_f / scale, 127.0 - hi_f / scale
            err_min, err_max = 128.0 + abs(lo_f / scale), 127.0 + abs(hi_f / scale)
            zp = zp_min if err_min < err_max else zp_max
            offset = -128 if zp <= -128 else 127 if zp >= 127 else int(_round_half_away(zp))
            scales[r], offsets[r] = np.float32(scale), offset
            inv = np.float32(1) / scales[r]
            q = _round_half_away(np.float32(offset) + v * inv)
            qx[r] = np.clip(q, -128, 127)
        else:
            rng = max(abs(lo_f), abs(hi_f))
            if rng == 0:
                continue
            scales[r] = np.float32(rng) / np.float32(127)
            q = _round_half_away(v * (np.float32(127) / np.float32(rng)))
            qx[r] = np.clip(q, -127, 127)
    return qx, scales, offsets


def _hybrid_fully_connected(ins, o, outs, qw: Quant):
    x, w, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    depth = w.shape[1]
    if w.ndim != 2 or (x.size and x.size % depth):
        raise KernelError("FULLY_CONNECTED input size is not a multiple of the weights' depth")
    qx, scales, offsets = _quantize_rows(x.reshape(-1, depth), o.get("asymmetric_quantize_inputs"))
    dot = (qx - offsets[:, None]) @ w.astype(np.int64).T
    channel = np.broadcast_to(qw.scale, (w.shape[0],)).astype(np.float32)
    scale = scales[:, None] * channel[None, :]
    y = dot.astype(np.float32) * scale
    if bias is not None:
        y = bias.astype(np.float32) + y
    y = kernels._activate(y.astype(np.float32), o.get("fused_activation_function", 0))
    return [y.reshape(outs[0][0])]


def _hybrid_conv_2d(ins, o, outs, qw: Quant):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    if x.ndim != 4 or f.ndim != 4 or x.shape[3] != f.shape[3]:
        raise KernelError("CONV_2D needs 4-D input and filter with matching depth")
    n = x.shape[0]
    qx, scales, offsets = _quantize_rows(x.reshape(n, -1), True)
    xs = (qx - offsets[:, None]).reshape(x.shape)
    win = kernels._windows(
        xs,
        f.shape[1],
        f.shape[2],
        o["stride_h"],
        o["stride_w"],
        o.get("dilation_h_factor", 1),
        o.get("dilation_w_factor", 1),
        o["padding"],
        0,
    )
    acc = np.tensordot(win, f.astype(np.int64), axes=([3, 4, 5], [1, 2, 3]))
    channel = np.broadcast_to(qw.scale, (f.shape[0],)).astype(np.float32)
    y = acc.astype(np.float32) * channel * scales.reshape(n, 1, 1, 1)
    if bias is not None:
        y = y + bias.astype(np.float32)
    return [kernels._activate(y.astype(np.float32), o.get("fused_activation_function", 0))]


def _hybrid_depthwise(ins, o, outs, qw: Quant):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    cin = x.shape[3]
    mult_c = f.shape[3] // cin if cin else 0
    if x.ndim != 4 or f.ndim != 4 or f.shape[0] != 1 or mult_c * cin != f.shape[3]:
        raise KernelError("DEPTHWISE_CONV_2D needs a [1, H, W, C*M] filter for C channels")
    n = x.shape[0]
    qx, scales, offsets = _quantize_rows(x.reshape(n, -1), True)
    xs = (qx - offsets[:, None]).reshape(x.shape)
    win = kernels._windows(
        xs,
        f.shape[1],
        f.shape[2],
        o["stride_h"],
        o["stride_w"],
        o.get("dilation_h_factor", 1),
        o.get("dilation_w_factor", 1),
        o["padding"],
        0,
    )
    filt = f[0].astype(np.int64).reshape(f.shape[1], f.shape[2], cin, mult_c)
    acc = np.einsum("nhwijc,ijcm->nhwcm", win, filt).reshape(win.shape[:3] + (cin * mult_c,))
    channel = np.broadcast_to(qw.scale, (f.shape[3],)).astype(np.float32)
    # TFLite multiplies the two scales first here (unlike CONV_2D).
    y = acc.astype(np.float32) * (channel * scales.reshape(n, 1, 1, 1))
    if bias is not None:
        y = y + bias.astype(np.float32)
    return [kernels._activate(y.astype(np.float32), o.get("fused_activation_function", 0))]


_HYBRID = {
    "DEPTHWISE_CONV_2D": _hybrid_depthwise,
    "FULLY_CONNECTED": _hybrid_fully_connected,
    "CONV_2D": _hybrid_conv_2d,
}


def run(name, ins, opts, outs, qin, qout) -> list | None:
    """The outputs of quantized operator `name`, or None when it is a float one.

    Raises:
      KernelError: a quantized operator this interpreter has no integer kernel for, or
        quantization parameters it cannot use.
    """
    out_int = any(
        q is not None and np.dtype(d).kind in "iu" for (_, d), q in zip(outs, qout, strict=True)
    )
    if out_int or name == "QUANTIZE":
        kernel = INT_KERNELS.get(name)
        if kernel is None:
            raise KernelError(f"no integer kernel for quantized {name}")
        int_tensors = [(v.dtype, q) for v, q in zip(ins, qin, strict=True) if v is not None]
        int_tensors += [(np.dtype(d), q) for (_, d), q in zip(outs, qout, strict=True)]
        if any(d in _QUANTIZED_TYPES and q is None for d, q in int_tensors):
            raise KernelError(f"quantized {name} has a tensor without quantization parameters")
        if name in _SCALED and any(q is None for q in qin[:2]):
            raise KernelError(f"quantized {name} has an input without quantization parameters")
        try:
            return kernel(ins, opts, outs, qin, qout)
        except AttributeError as exc:  # a float tensor where an integer one belongs
            raise KernelError(f"quantized {name} mixes float and integer tensors") from exc
    if len(ins) > 1 and ins[0] is not None and ins[0].dtype == np.float32:
        w, qw = ins[1], qin[1]
        if w is not None and w.dtype == np.int8 and qw is not None:
            kernel = _HYBRID.get(name)
            if kernel is None:
                raise KernelError(f"no hybrid kernel for {name} with int8 weights")
            return kernel(ins, opts, outs, qw)
    return None
