"""TF's QuantizedResizeBilinear and QuantizedInstanceNorm raw ops, as TF 2.21's CPU
kernels compute them (both compute there; recorded by tests/fixtures/
quantized_fused_cases.py).

- QuantizedResizeBilinear (quint8, qint32, float32): TF's source positions and lower /
  upper neighbours (ResizeBilinear's legacy or half-pixel scalers, scales in float32),
  interpolated on the codes in fixed point (7 fractional bits for quint8, 30 for
  qint32, C's truncating division, rounded by adding half a step; TF reads each qint32
  code through a float32, so they come back rounded to 24 bits), float32 images in
  float32.  The range passes through; an unchanged size
  copies the images.
- QuantizedInstanceNorm (quint8): per image and channel, the codes' float32 mean and
  the variance of (code - mean) * (max - min) / 255; the normalized values quantized
  (MIN_FIRST) over their own min and max (or given_y_min / given_y_max), the range at
  least min_separation wide.
TF registers no gradient for either (LookupError), nor here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import image_ops as _img
from asyncflow.ops import quantization_ops as _q
from asyncflow.ops import quantized_nn_ops as _qnn
from asyncflow.ops.quantized_fused_table import OPDEFS
from asyncflow.registry import register_op

__all__: list[str] = []

_F32 = np.float32
_SCALAR = tensor_shape.TensorShape([])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- QuantizedResizeBilinear -----------------------------------------------------------------


def _resize_shape(op):
    x = op.inputs[0].shape.with_rank(4)
    op.inputs[1].shape.with_rank(1)
    for t in op.inputs[2:]:
        t.shape.with_rank(0)
    size = ops.constant_value(op.inputs[1])
    h, w = (int(size[0]), int(size[1])) if size is not None else (None, None)
    return [tensor_shape.TensorShape([x[0], h, w, x[3]]), _SCALAR, _SCALAR]


QuantizedResizeBilinear = register_op(
    "QuantizedResizeBilinear", *OPDEFS["QuantizedResizeBilinear"][:3], shape_fn=_resize_shape
)


def _lerps(out_size: int, in_size: int, align_corners: bool, half_pixel: bool, bits: int):
    """(lower, upper, float weight, fixed-point weight) of each output position."""
    if align_corners and out_size > 1:
        scale = _F32(in_size - 1) / _F32(out_size - 1)
    else:
        scale = _F32(in_size) / _F32(out_size)
    pos = np.arange(out_size).astype(_F32)
    src = (pos + _F32(0.5)) * scale - _F32(0.5) if half_pixel else pos * scale
    floor = np.floor(src)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    lower = np.minimum(np.maximum(floor.astype(np.int64), 0), upper)
    frac = (src - floor).astype(_F32)
    fixed = (frac * _F32(1 << bits)).astype(np.int64)  # (truncated, as C's cast)
    return lower, upper, frac, fixed


def _tdiv(a, b: int):
    """C's integer division: truncated toward zero."""
    return np.where(a < 0, -((-a) // b), a // b)


def _resize(x, oh: int, ow: int, align_corners: bool, half_pixel: bool, fixed_bits):
    _, h, w, _ = x.shape
    if (oh, ow) == (h, w):
        return x.copy()
    bits = fixed_bits or 0
    ylo, yhi, yf, yi = _lerps(oh, h, align_corners, half_pixel, bits)
    xlo, xhi, xf, xi = _lerps(ow, w, align_corners, half_pixel, bits)
    tl, tr = x[:, ylo][:, :, xlo], x[:, ylo][:, :, xhi]
    bl, br = x[:, yhi][:, :, xlo], x[:, yhi][:, :, xhi]
    if fixed_bits is None:  # float32 images: interpolated in float32
        xw, yw = xf[None, None, :, None], yf[None, :, None, None]
        top = tl + (tr - tl) * xw
        bottom = bl + (br - bl) * xw
        return (top + (bottom - top) * yw).astype(_F32)
    one = 1 << bits
    xw, yw = xi[None, None, :, None], yi[None, :, None, None]
    top = tl * one + (tr - tl) * xw
    bottom = bl * one + (br - bl) * xw
    out = top + _tdiv(bottom - top, one) * yw
    return _tdiv(out + one // 2, one)


@QuantizedResizeBilinear.kernel("CPU", host_memory=("size",))
async def _quantized_resize_bilinear(ctx, images, size, lo, hi):
    dt = ctx.attrs["T"]
    for v, name in ((lo, "min"), (hi, "max")):
        if np.ndim(v) != 0:
            raise _invalid(f"{name} must be a scalar")
    x = np.asarray(images)
    _img._check_images(x)
    oh, ow = _img._size(size)
    if 0 in x.shape[1:3]:
        raise _invalid("input image must be of non-zero size")
    ac, hp = bool(ctx.attrs["align_corners"]), bool(ctx.attrs["half_pixel_centers"])
    lo, hi = _F32(lo), _F32(hi)
    if (oh, ow) == x.shape[1:3]:  # (TF copies the images: qint32 codes not rounded)
        return x.copy(), np.array(lo), np.array(hi)
    if dt == dtypes.float32:
        out = await ctx.compute(_resize, x.astype(_F32), oh, ow, ac, hp, None)
    elif dt == dtypes.qint32:  # (TF reads each code through a float32: rounded to 24 bits)
        codes = _qnn._codes(x, dt).astype(_F32).astype(np.int64)
        out = await ctx.compute(_resize, codes, oh, ow, ac, hp, 30)
    else:
        out = await ctx.compute(_resize, _qnn._codes(x, dt).astype(np.int64), oh, ow, ac, hp, 7)
    out = out if dt == dtypes.float32 else _qnn._as_quantized(out, dt)
    return out, np.array(lo), np.array(hi)


# -- QuantizedInstanceNorm -----------------------------------------------------------------


def _instance_norm_shape(op):
    op.inputs[1].shape.with_rank(0)
    op.inputs[2].shape.with_rank(0)
    return [op.inputs[0].shape.with_rank(4), _SCALAR, _SCALAR]


QuantizedInstanceNorm = register_op(
    "QuantizedInstanceNorm", *OPDEFS["QuantizedInstanceNorm"][:3], shape_fn=_instance_norm_shape
)


def _instance_norm(codes, lo, hi, attrs):
    x = codes.astype(_F32)
    scale = _F32(_F32(hi - lo) / _F32(255))
    mean = x.mean(axis=(1, 2), keepdims=True, dtype=_F32)
    centred = (scale * (x - mean)).astype(_F32)
    variance = np.square(centred).mean(axis=(1, 2), keepdims=True, dtype=_F32)
    eps = _F32(attrs["variance_epsilon"])
    normed = (centred * (_F32(1) / np.sqrt(variance + eps))).astype(_F32)
    if attrs["output_range_given"]:
        y_lo, y_hi = _F32(attrs["given_y_min"]), _F32(attrs["given_y_max"])
    else:
        y_lo, y_hi = _F32(normed.min()), _F32(normed.max())
    if y_hi - y_lo < _F32(attrs["min_separation"]):
        y_hi = _F32(y_lo + _F32(attrs["min_separation"]))
    out = _q._f2q_min_first(normed, y_lo, y_hi, dtypes.quint8)
    return _qnn._as_quantized(out, dtypes.quint8), np.array(y_lo), np.array(y_hi)


@QuantizedInstanceNorm.kernel("CPU")
async def _quantized_instance_norm(ctx, x, x_min, x_max):
    at, dt = ctx.attrs, ctx.attrs["T"]
    if dt != dtypes.quint8:
        raise _qnn._no_kernel(ctx.op.type, {"T": dt}, ctx.op.name)
    if at["output_range_given"] and not at["given_y_min"] < at["given_y_max"]:
        raise _invalid(
            f"given_y_min must be less than given_y_max : {at['given_y_min']:g} >= "
            f"{at['given_y_max']:g}"
        )
    for v, name in ((x_min, "x_min"), (x_max, "x_max")):
        if np.ndim(v) != 0:
            raise _invalid(f"`{name}` must be rank 0 but is rank {np.ndim(v)}")
    lo, hi = _F32(x_min), _F32(x_max)
    if not lo < hi:
        raise _invalid(f"input_min must be less than input_max : {lo:g} >= {hi:g}")
    codes = _qnn._codes(x, dt)
    if codes.ndim != 4:
        raise _invalid(f"input must be 4-dimensional{list(codes.shape)}")
    return await ctx.compute(_instance_norm, codes, lo, hi, at)
