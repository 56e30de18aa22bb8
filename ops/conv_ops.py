"""Convolutions: Conv2D, its two backprops (conv2d_transpose is Conv2DBackpropInput), and
DepthwiseConv2dNative with its backprops; their gradients and TF1 builders (`af.nn`).

How they compute (CPU and GPU, written once against the device's array module).  Each
kernel picks the first method that fits (measured at the LeNet sizes of
benchmarks/conv_bench.py, 64x28x28x1 -> 5x5x32 -> pool -> 5x5x64):
- oneDNN (ops/onednn.py; float32 host arrays, one group, either data format, any
  geometry it accepts): the library TF's CPU build calls, a direct convolution.  LeNet's
  layers on the 2-vCPU Intel Xeon: forward 2.5-2.8 ms against 4.4 spectral (second
  layer), 0.3 against ~1.0 (first); input gradient 2.4 against 4.2; filter gradient 0.3
  against 1.2 (first), 2.9 against ~4.3 without the forward's spectrum (second).  The
  methods below take every other dtype, grouped convolutions, GPUs, and all of it where
  oneDNN is not installed (`_ONEDNN`, ASYNCFLOW_ONEDNN=0).
- Spectral (host arrays only, see `_finite`; `_use_fft`: stride 1, a filter of 2+ taps,
  big enough, and fewer multiply-adds than direct): DFTs as GEMMs with cos/sin matrices,
  one real block GEMM per frequency and output part (see the section's comment).
  5x5x32->64 on 14x14 (64 images), measured in isolation: forward 6 ms, input gradient
  6 ms, filter gradient 4 ms with the spectra remembered, against 13-16 ms each for the
  rows layout.
- Rows layout (`_use_rows`: stride 1 in H, KW*C >= 48 and OC >= 8): the padded input
  laid out H outermost, windows copied along W only (KH times less than im2col), and KH
  GEMMs each reading a contiguous slice of that copy in place.  The input gradient (stride
  1) is the same correlation of the placed out_backprop with the flipped filter.
- Transposed columns (`_use_cols_t`: C <= 4): the column matrix [KH*KW*C, rows] built
  by one strided gather whose inner runs are output rows (4x faster than copying KW*C
  values at a time for C = 1), times the filter or dy.
- Otherwise im2col + GEMM: the padded NHWC input viewed (no copy) as windows
  [N, OH, OW, KH, KW, C] through `as_strided`, copied into [rows, KH*KW*C] and one
  `matmul` with the [KH*KW*C, OC] filter; the filter gradient is the same column matrix,
  transposed, times dy; the input gradient is one GEMM dy @ filter[i, j]^T per window
  offset, each block added onto the strided slice of the input it touches.  These work
  through the batch in chunks of `_CHUNK_BYTES` of column matrix (still in cache when
  BLAS reads it).
- Intermediates that never leave a kernel live in per-thread scratch (`_work`).
- NCHW is accepted and transposed to NHWC around the NHWC computation.

Geometry follows TF's `GetWindowedOutputSize`: SAME gives ceil(in / stride) outputs and
puts the odd padding row/column at the bottom/right; VALID gives
ceil((in - (k - 1) * dilation) / stride); EXPLICIT takes `explicit_paddings`.

Invariant: every kernel returns exactly the declared dtype; half precision is computed in
float32 and cast back.
"""

from __future__ import annotations

import copy
import functools
import math
import threading
import warnings

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.deprecation import deprecated_argument_lookup
from asyncflow.devices import cpu_budget
from asyncflow.kernel_api import current_step
from asyncflow.ops import array_ops, cnn_jit, onednn, space_ops
from asyncflow.ops.math_helpers import strided_view
from asyncflow.ops.math_ops import _builder_scope
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = [
    "conv2d",
    "conv2d_transpose",
    "conv2d_backprop_input",
    "conv2d_backprop_filter",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter",
]

CONV_TYPES = TypeConstraint(["float16", "bfloat16", "float32", "float64"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- geometry shared with pooling_ops -----------------------------------------------------


def _cdiv(a: int, b: int) -> int:
    """C's integer division (toward zero), as TF's size arithmetic."""
    q = abs(a) // b
    return q if a >= 0 else -q


def window_geometry(in_size: int, k: int, stride: int, dilation: int, padding: str, pads=(0, 0)):
    """(out_size, pad_before, pad_after) for one spatial dimension, as TF computes them.

    Raises InvalidArgumentError when the output size would be negative.
    """
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        out, lo, hi = _cdiv(in_size - eff + stride, stride), 0, 0
    elif padding == "SAME":
        out = -(-in_size // stride)
        total = max((out - 1) * stride + eff - in_size, 0)
        lo, hi = total // 2, total - total // 2
    else:  # EXPLICIT
        lo, hi = int(pads[0]), int(pads[1])
        out = _cdiv(in_size + lo + hi - eff + stride, stride)
    if out < 0:
        raise _invalid(
            f"Computed output size would be negative: {out} [input_size: {in_size}, "
            f"effective_filter_size: {eff}, stride: {stride}]"
        )
    return out, lo, hi


def static_out_size(in_dim, k, stride, dilation, padding, pads=(0, 0)):
    """window_geometry's output size for the shape function (None when unknown)."""
    if in_dim is None or k is None:
        return None
    eff = (k - 1) * dilation + 1
    padded = in_dim + (sum(int(p) for p in pads) if padding == "EXPLICIT" else 0)
    if padding != "SAME" and padded < eff:  # TF's shape function: Subtract(in, eff) < 0
        raise ValueError(f"Negative dimension size caused by subtracting {eff} from {padded}")
    try:
        return window_geometry(in_dim, k, stride, dilation, padding, pads)[0]
    except errors.InvalidArgumentError as e:
        raise ValueError(e.message) from None


def four(value, name: str, data_format: str, default: int = 1) -> list[int]:
    """TF's `_get_sequence`: an int or 1/2/4 ints as the 4 per-dimension values."""
    if value is None:
        return [default] * 4
    if isinstance(value, int | np.integer):
        value = [int(value)]
    value = [int(v) for v in value]
    if len(value) == 4:
        return value
    if len(value) == 1:
        value = value * 2
    if len(value) != 2:
        raise ValueError(
            f"{name} should be of length 1, 2 or 4. Received: {name}={value} of length "
            f"{len(value)}"
        )
    if data_format.startswith("NC"):
        return [1, 1, *value]
    return [1, *value, 1]


def spatial(values, data_format: str) -> tuple[int, int]:
    """The (H, W) entries of a 4-element attr in `data_format`."""
    return (values[2], values[3]) if data_format == "NCHW" else (values[1], values[2])


def to_nhwc(xp, x, data_format: str):
    return x.transpose(0, 2, 3, 1) if data_format == "NCHW" else x


def from_nhwc(xp, x, data_format: str):
    return xp.ascontiguousarray(x.transpose(0, 3, 1, 2)) if data_format == "NCHW" else x


def nhwc_dims(dims, data_format: str):
    """[N, H, W, C] from a 4-list in data_format."""
    if data_format == "NCHW":
        return [dims[0], dims[2], dims[3], dims[1]]
    return list(dims)


def from_nhwc_dims(dims, data_format: str):
    if data_format == "NCHW":
        return [dims[0], dims[3], dims[1], dims[2]]
    return list(dims)


def pad_spatial(xp, x, lo_h, hi_h, lo_w, hi_w, value=0):
    """x [N, H, W, C] padded in H and W with `value` (no copy when there is nothing to pad)."""
    if not (lo_h or hi_h or lo_w or hi_w):
        return x
    n, h, w, c = x.shape
    out = xp.full((n, h + lo_h + hi_h, w + lo_w + hi_w, c), value, dtype=x.dtype)
    out[:, lo_h : lo_h + h, lo_w : lo_w + w, :] = x
    return out


def windows(xp, xpad, kh, kw, oh, ow, sh, sw, dh, dw):
    """The view [N, OH, OW, KH, KW, C] of all windows of padded NHWC `xpad` (no copy)."""
    n, _, _, c = xpad.shape
    s0, s1, s2, s3 = xpad.strides
    return strided_view(
        xp, xpad, (n, oh, ow, kh, kw, c), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3)
    )


def window_slice(i, j, oh, ow, sh, sw, dh, dw):
    """The index of the padded-input positions that window offset (i, j) touches."""
    return (
        slice(None),
        slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
        slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
        slice(None),
    )


# Whether `_Geom.cols_t` of a stride-1 convolution takes cnn_jit's compiled gather
# (benchmarks' A/B: ab_inproc.py --attr).
_COMPILED_GATHER = True

# Column-matrix bytes per chunk of the batch: a few MB stays in this machine's L2/L3.
_CHUNK_BYTES = 6 << 20


def compute_dtype(dtype):
    """Half precision computes in float32 (BLAS has no half GEMM)."""
    return np.float32 if np.dtype(dtype).itemsize < 4 else dtype


class _Geom:
    """Everything about one 2-D convolution, in NHWC terms, checked against TF's rules."""

    __slots__ = (
        "n", "h", "w", "c", "kh", "kw", "oc", "oh", "ow", "sh", "sw", "dh", "dw", "pad", "groups"
    )  # fmt: skip

    def __init__(self, attrs, in_nhwc, filter_shape, depthwise=False):
        fmt = attrs["data_format"]
        self.n, self.h, self.w, self.c = (int(d) for d in in_nhwc)
        if len(filter_shape) != 4:
            raise _invalid(f"filter must be 4-dimensional: {_shape_str(filter_shape)}")
        self.kh, self.kw, fc, m = (int(d) for d in filter_shape)
        if depthwise and fc != self.c:
            raise _invalid(f"input and filter must have the same depth: {self.c} vs {fc}")
        if not depthwise and (fc < 1 or self.c % fc):
            raise _invalid(
                f"input depth must be evenly divisible by filter depth: {self.c} vs {fc}"
            )
        # A grouped convolution (TF: input depth a multiple of the filter's): group k
        # convolves input channels [k*fc, (k+1)*fc) with output channels k*oc/G onwards.
        self.groups = 1 if depthwise else self.c // fc
        if m % self.groups:
            raise _invalid(
                f"output depth must be evenly divisible by number of groups: {m} vs {self.groups}"
            )
        self.oc = fc * m if depthwise else m
        self.sh, self.sw = spatial(attrs["strides"], fmt)
        self.dh, self.dw = spatial(attrs.get("dilations") or [1, 1, 1, 1], fmt)
        explicit = list(attrs.get("explicit_paddings") or [0] * 8)
        if any(int(p) < 0 for p in explicit):
            raise _invalid(
                f"All elements of explicit_paddings must be nonnegative, got {explicit}"
            )
        pads = nhwc_dims([explicit[i : i + 2] for i in range(0, 8, 2)], fmt) if explicit else None
        padding = attrs["padding"]
        self.oh, lo_h, hi_h = window_geometry(
            self.h, self.kh, self.sh, self.dh, padding, pads[1] if pads else (0, 0)
        )
        self.ow, lo_w, hi_w = window_geometry(
            self.w, self.kw, self.sw, self.dw, padding, pads[2] if pads else (0, 0)
        )
        self.pad = (lo_h, hi_h, lo_w, hi_w)

    def out_nhwc(self):
        return (self.n, self.oh, self.ow, self.oc)

    def one_group(self) -> _Geom:
        """The geometry of one group of a grouped convolution."""
        g = copy.copy(self)
        g.c, g.oc, g.groups = self.c // self.groups, self.oc // self.groups, 1
        return g

    def windows(self, xp, x):
        xpad = pad_spatial(xp, x, *self.pad)
        return windows(
            xp, xpad, self.kh, self.kw, self.oh, self.ow, self.sh, self.sw, self.dh, self.dw
        )

    def is_pointwise(self) -> bool:
        """A plain 1x1 convolution: x itself is the column matrix."""
        return self.kh == self.kw == 1 and self.sh == self.sw == 1 and not any(self.pad)

    def batch_chunks(self, itemsize: int) -> list[tuple[int, int]]:
        """[start, end) image ranges of about _CHUNK_BYTES of column matrix each."""
        per_image = self.oh * self.ow * self.kh * self.kw * self.c * itemsize
        nb = max(1, _CHUNK_BYTES // max(per_image, 1))
        return [(s, min(s + nb, self.n)) for s in range(0, self.n, nb)]

    def batch_parts(self, xp, itemsize: int, n: int | None = None) -> list[tuple[int, int]]:
        """`batch_chunks`' ranges of the first `n` images (default all), split into
        fixed parts that the budget's threads share (`_parts`)."""
        per_image = self.oh * self.ow * self.kh * self.kw * self.c * itemsize
        return _parts(xp, self.n if n is None else n, per_image, _CHUNK_BYTES)

    def cols(self, xp, win, s: int, e: int):
        """The im2col matrix [rows, KH*KW*C] of images [s, e) from windows `win`."""
        if self.is_pointwise():
            return win[s:e].reshape(-1, self.c)
        cols = _work(xp, "cols", (e - s, *win.shape[1:]), win.dtype)
        # copyto walks the strided view far faster than reshape's copy (3-4x here)
        xp.copyto(cols, win[s:e])
        return cols.reshape(-1, self.kh * self.kw * self.c)

    def cols_t(self, xp, xpad, s: int, e: int):
        """The transposed column matrix [KH*KW*C, rows] of images [s, e) of padded NHWC
        `xpad`: for few channels each (i, j, c) row is one strided gather whose inner run
        is an output row, far faster than `cols` copying KW*C values at a time."""
        shape = (self.kh, self.kw, self.c, e - s, self.oh, self.ow)
        cols = _work(xp, "cols_t", shape, xpad.dtype)
        unit = self.sh == self.sw == self.dh == self.dw == 1
        jit = cnn_jit.loops() if xp is np and unit and _COMPILED_GATHER else None
        if jit is not None and cnn_jit.usable(xpad, cols):  # a compiled loop: 1.6x faster
            jit["_gather_cols_t"](xpad[s:e], cols)
            return cols.reshape(self.kh * self.kw * self.c, -1)
        s0, s1, s2, s3 = xpad.strides
        view = strided_view(
            xp, xpad[s:e], shape, (s1 * self.dh, s2 * self.dw, s3, s0, s1 * self.sh, s2 * self.sw)
        )
        xp.copyto(cols, view)
        return cols.reshape(self.kh * self.kw * self.c, -1)

    def windows_or_x(self, xp, x):
        """What `cols` slices: the window view, or x itself for a pointwise convolution."""
        return x if self.is_pointwise() else self.windows(xp, x)

    def padded_zeros(self, xp, n, dtype):
        """Zeros [n, HP, WP, C] covering the padded input and every window."""
        lo_h, hi_h, lo_w, hi_w = self.pad
        hp = max(self.h + lo_h + hi_h, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1)
        wp = max(self.w + lo_w + hi_w, (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1)
        return xp.zeros((n, hp, wp, self.c), dtype=dtype)

    def col2im_into(self, dxp, blocks) -> None:
        """Add window gradients onto padded dxp [n, HP, WP, C]; blocks[i * KW + j] is the
        [n, OH, OW, C] gradient of window offset (i, j)."""
        if not (self.oh and self.ow):
            return
        for i in range(self.kh):
            for j in range(self.kw):
                idx = window_slice(i, j, self.oh, self.ow, self.sh, self.sw, self.dh, self.dw)
                dxp[idx] += blocks[i * self.kw + j]

    def crop(self, dxp):
        lo_h, _, lo_w, _ = self.pad
        return dxp[:, lo_h : lo_h + self.h, lo_w : lo_w + self.w, :]


# -- row-major-in-H ("rows") convolution: the fast path for stride 1 in H ------------------
#
# With the padded input laid out [HP, N, OW', KW*C] (H outermost; OW' the output columns,
# KW*C the pixels of one window row), the column matrix of filter row i is the
# contiguous slice of rows [i*DH*N*OW, (i*DH + OH)*N*OW): output row oh of every image
# reads padded row oh + i*DH.  So one copy that is KH times smaller than the full im2col
# (windows only along W) feeds KH GEMMs with K = KW*C, each reading its operand in place,
# and the filter gradient is KH GEMMs A_i^T @ dy with no copy of A_i either.

# Smallest KW*C (the GEMMs' inner size) for which the rows layout beats a full im2col
# (tests lower it to cover the rows path on small shapes).
_ROWS_MIN_K = 48
# ... and the fewest output channels (the GEMMs' N: a thin N leaves BLAS starved).
_ROWS_MIN_OC = 8


def _use_rows(g: _Geom, c: int, oc: int) -> bool:
    """Whether the rows layout suits a correlation with c input and oc output channels."""
    return (
        g.sh == 1
        and g.kh > 1
        and g.kw * c >= _ROWS_MIN_K
        and oc >= _ROWS_MIN_OC
        and min(g.n, g.oh, g.ow, g.c, g.oc) > 0
    )


# Most input channels for which `cols_t` (channels in the column matrix's rows) is used.
_COLS_T_MAX_C = 4


# Fewest output positions per image for which the filter gradient from the transposed
# column matrix is summed from one GEMM per image (tests lower it).
_PER_IMAGE_MIN_ROWS = 256


def _use_cols_t(g: _Geom) -> bool:
    return g.c <= _COLS_T_MAX_C and not g.is_pointwise() and min(g.n, g.oh, g.ow) > 0


def _row_windows(xp, xpad, hp: int, ow: int, kw: int, sw: int, dw: int):
    """The copy [hp * N * OW, KW * C] of padded NHWC `xpad`'s first hp rows, H outermost:
    row (h, n, j) holds the KW pixels (with their C channels) of output column j."""
    n, _, _, c = xpad.shape
    s0, s1, s2, s3 = xpad.strides
    view = strided_view(xp, xpad, (hp, n, ow, kw, c), (s1, s0, s2 * sw, s2 * dw, s3))
    a = _work(xp, "rows.a", view.shape, xpad.dtype)
    xp.copyto(a, view)
    return a.reshape(hp * n * ow, kw * c)


def _rows_conv(xp, xpad, w, oh: int, ow: int, sw: int, dh: int, dw: int):
    """Stride-1-in-H correlation of padded NHWC `xpad` with w [KH, KW, C, OC]: the output
    laid out [OH, N, OW, OC] (H outermost)."""
    kh, kw, c, oc = w.shape
    n = xpad.shape[0]
    a = _row_windows(xp, xpad, oh + (kh - 1) * dh, ow, kw, sw, dw)
    w = w.reshape(kh, kw * c, oc)
    m = n * ow  # rows of A per input row
    out = xp.matmul(a[: oh * m], w[0], out=_work(xp, "rows.out", (oh * m, oc), a.dtype))
    part = _work(xp, "rows.part", (oh * m, oc), a.dtype)
    for i in range(1, kh):
        out += xp.matmul(a[i * dh * m : (i * dh + oh) * m], w[i], out=part)
    return out.reshape(oh, n, ow, oc)


def _rows_filter_grad(xp, xpad, dy, kh: int, kw: int, sw: int, dh: int, dw: int):
    """The filter gradient [KH, KW*C, OC] of `_rows_conv` for NHWC dy [N, OH, OW, OC]."""
    n, oh, ow, oc = dy.shape
    a = _row_windows(xp, xpad, oh + (kh - 1) * dh, ow, kw, sw, dw)
    dyt = _work(xp, "rows.dyt", (oh, n, ow, oc), dy.dtype)
    xp.copyto(dyt, dy.transpose(1, 0, 2, 3))
    dyt = dyt.reshape(-1, oc)
    m = n * ow
    out = xp.empty((kh, a.shape[1], oc), dtype=dyt.dtype)
    for i in range(kh):
        xp.matmul(a[i * dh * m : (i * dh + oh) * m].T, dyt, out=out[i])
    return out


def _from_hnwc(xp, out, fmt: str, out_dtype):
    """[H, N, W, C] as a contiguous array in `fmt`, cast to out_dtype (one copy)."""
    perm = (1, 3, 0, 2) if fmt == "NCHW" else (1, 0, 2, 3)
    res = xp.empty(tuple(out.shape[p] for p in perm), dtype=out_dtype)
    xp.copyto(res, out.transpose(perm), casting="unsafe")
    return res


def _place(xp, x, top: int, hp: int, left: int, wp: int):
    """Zeros [N, hp, wp, C] with NHWC x written at offset (top, left); rows and columns
    falling outside (negative offsets, or past hp/wp) are dropped."""
    n, h, w, c = x.shape
    out = xp.zeros((n, hp, wp, c), dtype=x.dtype)
    r0, c0 = max(0, -top), max(0, -left)
    r1, c1 = min(h, hp - top), min(w, wp - left)
    if r1 > r0 and c1 > c0:
        out[:, top + r0 : top + r1, left + c0 : left + c1] = x[:, r0:r1, c0:c1]
    return out


# -- spectral (DFT-as-GEMM) convolution: the fast path for big stride-1 convolutions -------
#
# A stride-1 correlation is a pointwise product in the 2-D DFT domain of a grid on which
# no window wraps onto data (`_grid_size`: SAME padding may wrap onto the other side's
# zeros, so LeNet's 14x14 SAME 5x5 needs 16x16, not 18x18): Y(f) = X(f) conj(W(f)), summed
# over input channels, so each of the F = L1 * (L2 // 2 + 1) frequencies (real input: half
# the W axis) is one small complex GEMM [N, C] @ [C, OC].  Spectra are stored [F, N, 2C],
# real parts then imaginary parts side by side, and the filter as its real block matrices
# (`_filter_matrices`, built straight from the taps), so each frequency's complex product
# is one real GEMM with K = 2C per output part, a quarter of the direct method's
# multiply-adds at LeNet sizes.  The transforms themselves are GEMMs with (cos, sin)
# matrices, one axis at a time, folding in where the data sits on the grid (padding costs
# nothing) and which outputs are wanted (cropping costs nothing).
# The backprops are the same machinery on the same grid: the padded input's gradient is
# out_backprop convolved with the filter, DY(f) W(f)^T, read back at the padding offsets,
# and the filter gradient is X(f)^T conj(DY(f)) read back at the filter's KH x KW lags.
# So one step transforms x, w and dy once each (`_memo` remembers them).  Float32
# rounding is of the direct method's size (each output is a sum over the whole grid).

# False: float32 convolutions do not go to oneDNN (A/B switch; ASYNCFLOW_ONEDNN=0 too).
_ONEDNN = True

# Use the spectral path when its multiply-adds are below this fraction of the direct
# method's (tests raise it to cover small shapes) and the problem is at least this big.
_FFT_MAX_RATIO = 0.5
_FFT_MIN_MACS = 1 << 24


def _fft_macs(n, c, oc, ha, wa, l1, l2, p, q) -> int:
    """Rough multiply-adds of one spectral correlation (transforms and products)."""
    f2 = l2 // 2 + 1
    fwd = n * c * (ha * wa * 2 * f2 + 2 * f2 * ha * 2 * l1)
    inv = n * oc * (2 * f2 * l1 * 2 * p + 4 * f2 * p * q)
    return fwd + inv + 4 * f2 * l1 * n * c * oc


# False: operands are not checked (A/B: what the check costs a step).
_CHECK_FINITE = True


class _NonFinite(Exception):
    """An operand of the spectral path holds a NaN or an infinity (`_finite`)."""


def _finite(a) -> bool:
    """Whether every value of filter `a` is finite: its least and greatest (a NaN
    propagates into both, an infinity is one of them).  The spectral path mixes every
    value of an image, and every tap of a filter, into all its frequencies: one NaN or
    infinity would reach every output of its image (an infinity as NaN), where TF's
    direct convolution reaches only the outputs whose windows hold it.  So the spectral
    callers take the direct path for a non-finite operand: the filter checked here, a
    batch of images by its spectrum's zero frequency (`_spectrum_of`).

    Host arrays only: on a device the convolutions never go spectral (their callers ask
    `xp is np`).  Knowing an operand finite before choosing the path would be a read
    back to the host, holding the calling thread (the event loop's) until the GPU's
    stream got there, and with it the host's lead over the device.  The direct paths
    are exact for any values and ask a GPU for about as many launches: LeNet's second
    layer at batch 64, as the stand-in counts it, forward, input and filter gradients
    take 12, 13 and 8 kernel launches direct, against 9, 10 and 9 spectral, which also
    uploaded 5, 5 and 6 DFT matrices per call from pageable memory (each a copy that
    holds the calling thread on CUDA) and transformed x and dy afresh in each kernel
    (`_memo` is the host's)."""
    if type(a) is not np.ndarray or not _CHECK_FINITE:
        return True
    return math.isfinite(float(a.min())) and math.isfinite(float(a.max()))


def _use_fft(g: _Geom, c: int, oc: int) -> bool:
    """Whether a stride-1 correlation of g's geometry with c -> oc channels goes spectral
    (by its sizes; the caller checks its operands are host arrays and finite: `_finite`)."""
    if not (g.sh == g.sw == 1 and g.kh * g.kw > 1 and min(g.n, g.oh, g.ow, c, oc) > 0):
        return False
    direct = g.n * g.oh * g.ow * g.kh * g.kw * c * oc
    if direct < _FFT_MIN_MACS:
        return False
    l1, l2 = _fft_grid(g)
    return _fft_macs(g.n, c, oc, g.h, g.w, l1, l2, g.oh, g.ow) < _FFT_MAX_RATIO * direct


@functools.lru_cache(maxsize=64)
def _dft_rows(size: int, count: int, off: int, step: int, half: bool, inverse: bool, dtype):
    """[cos; sin] of the angles -+2 pi f (off + i * step) / size, for frequencies f (half:
    0..size//2) and points i < count: [2F, count] forward, [2 * count, size] inverse."""
    nf = size // 2 + 1 if half else size
    pos = off + step * np.arange(count)
    if inverse:
        ang = 2 * np.pi * np.outer(pos, np.arange(nf)) / size
    else:
        ang = -2 * np.pi * np.outer(np.arange(nf), pos) / size
    out = np.concatenate([np.cos(ang), np.sin(ang)]).astype(dtype)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _dft_rows_by_freq(size: int, count: int, off: int, step: int, dtype):
    """`_dft_rows` of the half spectrum, forward, as [F, 2 (cos, sin), count]."""
    rows = _dft_rows(size, count, off, step, True, False, dtype)
    out = np.ascontiguousarray(rows.reshape(2, -1, count).transpose(1, 0, 2))
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _dft_complex(size: int, count: int, off: int, step: int, dtype):
    """The forward DFT of complex points (off + i * step, i < count) as a real map
    [2 (real, imag out), size, 2 (real, imag in), count]."""
    rows = _dft_rows(size, count, off, step, False, False, dtype)
    c, s = rows[:size], rows[size:]  # cos and sin of the (negative) angles
    out = np.empty((2, size, 2, count), dtype=dtype)
    out[0, :, 0], out[0, :, 1], out[1, :, 0], out[1, :, 1] = c, -s, s, c
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _dft_real_out(l1: int, l2: int, q: int, off: int, step: int, dtype):
    """[Q, 2 * F2 * 2]: the last (W axis) inverse step from the half spectrum to real
    values at points off + j * step, over (part of Z, f2, cos/sin row of the H step), with the
    1 / (L1 L2) normalisation and the Hermitian weights (2 for the bins that stand for a
    conjugate pair)."""
    f2 = np.arange(l2 // 2 + 1)
    weight = np.where((f2 == 0) | ((l2 % 2 == 0) & (f2 == l2 // 2)), 1.0, 2.0) / (l1 * l2)
    ang = 2 * np.pi * np.outer(off + step * np.arange(q), f2) / l2
    cq, sq = weight * np.cos(ang), weight * np.sin(ang)
    m = np.empty((q, 2, f2.size, 2))
    m[:, 0, :, 0], m[:, 1, :, 1], m[:, 1, :, 0], m[:, 0, :, 1] = cq, -cq, -sq, -sq
    out = m.reshape(q, -1).astype(dtype)
    out.flags.writeable = False
    return out


_scratch = threading.local()
# Largest scratch array kept for reuse (per thread and tag; about a dozen tags, so a
# thread holds at most ~200 MB, ~50 MB at the LeNet sizes); bigger ones are allocated.
_SCRATCH_MAX_BYTES = 16 << 20


def _work(xp, tag: str, shape, dtype):
    """An uninitialised array for intermediate values, reused across calls by this thread:
    reused buffers stay warm in cache where fresh ones do not (measured: the conv kernels
    of one LeNet step take ~15% less time; no page faults either way after warm-up).
    `tag` names one intermediate of one computation (never returned, never alive twice),
    so that buffers in use at the same time are distinct."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if xp is not np or nbytes > _SCRATCH_MAX_BYTES:
        return xp.empty(shape, dtype=dtype)
    bufs = getattr(_scratch, "bufs", None)
    if bufs is None:
        bufs = _scratch.bufs = {}
    buf = bufs.get(tag)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[tag] = np.empty(max(nbytes, 1), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


# Bytes of the largest intermediate of one batch block of a transform: bounds the scratch
# memory of big batches (keeps it reusable, see `_work`).  Smaller blocks (1 MB, to stay in
# L2) were measured no faster in a LeNet step and slower in isolation (smaller GEMMs).
_BLOCK_BYTES = _SCRATCH_MAX_BYTES


# Two cores inside one kernel (issue 21): the stages below write disjoint slices of
# their outputs (images of a batch, frequencies of a spectrum), so each splits into up to
# _PARTS fixed parts that the CPU budget's threads share (`cpu_budget.parallel_parts`,
# one BLAS thread each).  The parts depend on sizes only, never on how many threads run
# them: one thread computes exactly what two do.  Work under _PART_MIN_BYTES stays whole
# (a helper's wake-up and the smaller GEMMs would cost more than they save).
_PARTS = 4
_PART_MIN_BYTES = 1 << 20


def _parts(xp, n: int, per_item: int, block_bytes: int | None = None) -> list[tuple[int, int]]:
    """Fixed [start, end) ranges covering range(n) for items of `per_item` bytes of work:
    blocks of at most `block_bytes` (default _BLOCK_BYTES), and on the host up to
    _PARTS of them when the work is worth sharing."""
    nb = max(1, (_BLOCK_BYTES if block_bytes is None else block_bytes) // max(per_item, 1))
    if xp is np and n * per_item >= _PART_MIN_BYTES:
        nb = min(nb, -(-n // _PARTS))
    return [(s, min(s + nb, n)) for s in range(0, n, nb)]


def _each_part(xp, bounds, fn) -> None:
    """`fn(start, end)` for every range of `bounds` (`_parts`), on the budget's threads
    when on the host (a device's array module runs them in order)."""
    if xp is not np or len(bounds) < 2:
        for s, e in bounds:
            fn(s, e)
        return
    cpu_budget.parallel_parts(len(bounds), lambda i: fn(*bounds[i]))


def _spectrum(xp, a, l1: int, l2: int, off_h: int, off_w: int, step_h=1, step_w=1, tag=""):
    """The DFT of [B, HA, WA, C] `a` placed on an L1 x L2 grid (element (h, w) at
    (off_h + h * step_h, off_w + w * step_w); all of it must land inside the grid), over
    the half W spectrum: [F2 * L1, B, 2 * C] (frequency index f2 * L1 + f1; each row the
    real parts of the C channels, then their imaginary parts), in scratch `tag`.  Works
    through the batch in blocks (`_BLOCK_BYTES`)."""
    b, ha, wa, c = a.shape
    dt = a.dtype
    f2 = l2 // 2 + 1
    ew = xp.asarray(_dft_rows_by_freq(l2, wa, off_w, step_w, dt))  # [F2, 2, WA]
    eh = xp.asarray(_dft_complex(l1, ha, off_h, step_h, dt))  # [2, L1, 2, HA]
    spec = _work(xp, "spectrum." + tag, (f2, l1, b, 2, c), dt)

    def block(s: int, e: int) -> None:
        nb = e - s
        at = _work(xp, "spectrum.at", (wa, ha, nb, c), dt)
        xp.copyto(at, a[s:e].transpose(2, 1, 0, 3))
        t1 = _work(xp, "spectrum.t1", (f2, 2, ha, nb * c), dt)  # [f2, part, h, (B, C)]
        xp.matmul(ew.reshape(2 * f2, wa), at.reshape(wa, -1), out=t1.reshape(2 * f2, -1))
        r = _work(xp, "spectrum.r", (f2, 2, l1, nb, c), dt)  # [f2, part, f1, B, C]
        xp.matmul(
            eh.reshape(2 * l1, 2 * ha), t1.reshape(f2, 2 * ha, -1), out=r.reshape(f2, 2 * l1, -1)
        )
        xp.copyto(spec[:, :, s:e], r.transpose(0, 2, 3, 1, 4))

    _each_part(xp, _parts(xp, b, 2 * f2 * l1 * c * dt.itemsize), block)
    return spec.reshape(f2 * l1, b, 2 * c)


def _products(xp, a2, m2, l1: int):
    """Per frequency, the complex product of side-by-side spectra a2 [F, B, 2K] with the
    real block form m2 [2, F, 2K, O] of the other factor (`_filter_matrices`): one real
    GEMM per frequency and part, [F2, 2 (real, imag), L1, B, O] in scratch (the layout
    `_real_images` reads)."""
    f, b, k2 = a2.shape
    o = m2.shape[3]
    f2 = f // l1
    y2 = _work(xp, "products.y", (f2, 2, l1, b, o), a2.dtype)
    a2 = a2.reshape(f2, l1, b, k2)
    m2 = m2.reshape(2, f2, l1, k2, o)

    def block(s: int, e: int) -> None:  # frequencies f2 in [s, e)
        for part in range(2):
            xp.matmul(a2[s:e], m2[part, s:e], out=y2[s:e, part])

    _each_part(xp, _parts(xp, f2, 2 * l1 * b * (k2 + o) * a2.itemsize), block)
    return y2


def _cross_products(xp, x2, d2):
    """Per frequency, X^T conj(D) for side-by-side spectra x2 [F, B, 2C] and d2
    [F, B, 2O]: one GEMM giving the four real blocks, combined: [2, F, C, O] in scratch."""
    f, _, c2 = x2.shape
    c, o = c2 // 2, d2.shape[2] // 2
    g = _work(xp, "products.g", (f, c2, 2 * o), x2.dtype)
    y2 = _work(xp, "products.y", (2, f, c, o), x2.dtype)

    def block(s: int, e: int) -> None:  # frequencies [s, e)
        xp.matmul(x2[s:e].transpose(0, 2, 1), d2[s:e], out=g[s:e])
        xp.add(g[s:e, :c, :o], g[s:e, c:, o:], out=y2[0, s:e])  # xr^T dr + xi^T di
        xp.subtract(g[s:e, c:, :o], g[s:e, :c, o:], out=y2[1, s:e])  # xi^T dr - xr^T di

    per = (x2.shape[1] * (c2 + 2 * o) + c2 * 2 * o) * x2.itemsize
    _each_part(xp, _parts(xp, f, per), block)
    return y2


def _real_values(xp, y2, l1: int, l2: int, p: int, q: int, off=(0, 0), step=(1, 1)):
    """Inverse of `_spectrum`: real values [Q, P, B, O] at grid points (off[0] + i *
    step[0], off[1] + j * step[1]), i < P, j < Q, from the half spectrum y2
    [2, F2 * L1, B, O] (scratch)."""
    _, _, b, o = y2.shape
    f2 = l2 // 2 + 1
    gh = xp.asarray(_dft_rows(l1, p, off[0], step[0], False, True, y2.dtype))  # [2P, L1]
    z = _work(xp, "real.z", (2 * f2, 2 * p, b * o), y2.dtype)
    xp.matmul(gh, y2.reshape(2 * f2, l1, b * o), out=z)
    m = xp.asarray(_dft_real_out(l1, l2, q, off[1], step[1], y2.dtype))
    out = _work(xp, "real.out", (q, p * b * o), y2.dtype)
    xp.matmul(m, z.reshape(4 * f2, p * b * o), out=out)
    return out.reshape(q, p, b, o)


def _real_images(xp, y2, l1: int, l2: int, p: int, q: int, off, fmt: str, out_dtype, then=None):
    """Real values at grid points (off[0] + i, off[1] + j), i < P, j < Q, of a batch
    y2 [F2, 2, L1, B, O] (`_products`) as a new array [B, P, Q, O] in `fmt` (and
    out_dtype): per f2 the complex inverse over H is one real block GEMM (K = 2 L1), then
    the real inverse over W one GEMM (K = 2 F2); a block of images at a time
    (`_BLOCK_BYTES`), each block copied straight into the result, then `then(res, s, e)`
    (if given) on the block's images [s, e) while they are in cache."""
    f2, _, _, b, o = y2.shape
    dt = y2.dtype
    gh = xp.asarray(_dft_complex_inverse(l1, p, off[0], dt))  # [2, P, 2, L1]
    m = xp.asarray(_dft_real_out_complex(l1, l2, q, off[1], dt))  # [Q, F2 * 2]
    res = xp.empty((b, o, p, q) if fmt == "NCHW" else (b, p, q, o), dtype=out_dtype)
    perm = (2, 3, 1, 0) if fmt == "NCHW" else (2, 1, 0, 3)

    def block(s: int, e: int) -> None:
        nb = e - s
        z = _work(xp, "real.z", (f2, 2, p, nb, o), dt)
        yb = y2[:, :, :, s:e].reshape(f2, 2 * l1, nb * o)
        xp.matmul(gh.reshape(2 * p, 2 * l1), yb, out=z.reshape(f2, 2 * p, -1))
        out = _work(xp, "real.out", (q, p, nb, o), dt)
        xp.matmul(m, z.reshape(2 * f2, -1), out=out.reshape(q, -1))
        xp.copyto(res[s:e], out.transpose(perm), casting="unsafe")
        if then is not None:
            then(res, s, e)

    _each_part(xp, _parts(xp, b, 2 * f2 * p * o * dt.itemsize), block)
    return res


@functools.lru_cache(maxsize=64)
def _dft_complex_inverse(size: int, count: int, off: int, dtype):
    """The inverse DFT (unnormalised) of a complex spectrum of `size` at points off + i,
    i < count, as a real map [2 (real, imag out), count, 2 (real, imag in), size]."""
    rows = _dft_rows(size, count, off, 1, False, True, dtype)
    c, s = rows[:count], rows[count:]
    out = np.empty((2, count, 2, size), dtype=dtype)
    out[0, :, 0], out[0, :, 1], out[1, :, 0], out[1, :, 1] = c, -s, s, c
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _dft_real_out_complex(l1: int, l2: int, q: int, off: int, dtype):
    """[Q, F2 * 2]: the real inverse over W from the half spectrum (complex, parts
    second) to points off + j, with the 1 / (L1 L2) normalisation and the Hermitian
    weights (`_dft_real_out` for a spectrum already inverted over H)."""
    f2 = np.arange(l2 // 2 + 1)
    weight = np.where((f2 == 0) | ((l2 % 2 == 0) & (f2 == l2 // 2)), 1.0, 2.0) / (l1 * l2)
    ang = 2 * np.pi * np.outer(off + np.arange(q), f2) / l2
    out = np.stack([weight * np.cos(ang), -weight * np.sin(ang)], axis=2)
    out = out.reshape(q, -1).astype(dtype)
    out.flags.writeable = False
    return out


_spectra = threading.local()


def _memo(xp, role: str, a, params, make):
    """`make()` (a scratch array derived from `a`), remembered per thread for one array
    per role ("x", "w", "dy"): the forward pass and both backprops of one convolution
    transform the same input, filter and out_backprop, so each is transformed once per
    step.  A hit needs the same `params` and either

    - for the activations ("x", "dy") inside a step (`_in_step`): the same array object
      in the same step.  The memo holds the array (these ops are declared
      `donation.retains_inputs`), the convolution is one of its consumers so no other
      can take it over in place (donation.decide), and an activation is written once
      per step: no copy, no comparison (~1.4 ms of a LeNet step);
    - otherwise: bit-identical contents, compared against a copy (never trusted to
      identity across steps: arrays are reused, and variables change in place)."""
    if xp is not np:
        return make()
    params = (a.shape, a.dtype.str, *params)
    memo = getattr(_spectra, role, None)
    token = getattr(_spectra, "token", None) if role in ("x", "dy") else None
    if token is not None:
        if memo is not None and memo[0] == params and memo[1] is a and memo[3] == token:
            return memo[2]
        setattr(_spectra, role, None)  # its buffers are about to be rewritten
        value = make()
        setattr(_spectra, role, (params, a, value, token))
        return value
    bits = np.dtype(f"u{a.dtype.itemsize}")
    if (
        memo is not None
        and memo[0] == params
        and memo[3] is None
        and np.array_equal(memo[1], a.view(bits))
    ):
        return memo[2]
    setattr(_spectra, role, None)
    value = make()
    key = _work(xp, "memo.key." + role, a.shape, bits)
    xp.copyto(key, a.view(bits))
    setattr(_spectra, role, (params, key, value, None))
    return value


def _in_step(token, fn, *args):
    """`fn(*args)` with the step's token visible to `_memo` on this thread."""
    prev = getattr(_spectra, "token", None)
    _spectra.token = token
    try:
        return fn(*args)
    finally:
        _spectra.token = prev


def _step_token():
    step = current_step()
    return None if step is None else step.serial


def _spectrum_of(xp, role: str, a, l1: int, l2: int, off=(0, 0), step=(1, 1)):
    """`_spectrum` of `a`, remembered per role (`_memo`); _NonFinite where `a` holds a
    NaN or an infinity."""

    def make():
        spec = _spectrum(xp, a, l1, l2, *off, *step, tag="memo." + role)
        # Row 0 is each image's and channel's zero frequency: the sum of its values
        # (times cos 0 = 1) and that sum times sin 0 = 0, both finite exactly where
        # every value is (barring a sum that overflows: the direct path then too).
        # ~1 us, where the values' least and greatest took 116-277 us in the step.
        if xp is np and _CHECK_FINITE and not np.isfinite(spec[0]).all():
            raise _NonFinite  # (not remembered: each caller takes the direct path)
        return spec

    return _memo(xp, role, a, (l1, l2, off, step), make)


@functools.lru_cache(maxsize=16)
def _dft_filter(l1: int, l2: int, kh: int, kw: int, dh: int, dw: int, grad: bool, dtype):
    """[2 (output part), F, 2 (input part), KH * KW]: the filter's block matrices as linear
    maps of its taps (see `_filter_matrices`), from the angles theta = 2 pi (f1 i dh / L1 +
    f2 j dw / L2) of frequency f = f2 * L1 + f1 and tap (i, j)."""
    f1, f2 = np.arange(l1), np.arange(l2 // 2 + 1)
    i, j = np.arange(kh) * dh, np.arange(kw) * dw
    ang = (
        2
        * np.pi
        * (
            (f1[None, :, None, None] * i[None, None, :, None] / l1)
            + (f2[:, None, None, None] * j[None, None, None, :] / l2)
        ).reshape(f2.size * l1, kh * kw)
    )
    cos, sin = np.cos(ang), np.sin(ang)
    if grad:  # [Wr^T; -Wi^T] and [Wi^T; Wr^T]
        out = np.stack([np.stack([cos, sin], 1), np.stack([-sin, cos], 1)])
    else:  # [Wr; Wi] and [-Wi; Wr]
        out = np.stack([np.stack([cos, -sin], 1), np.stack([sin, cos], 1)])
    out = out.astype(dtype)
    out.flags.writeable = False
    return out


def _filter_matrices(xp, w, l1: int, l2: int, dh: int, dw: int, grad: bool = False):
    """For filter [KH, KW, C, OC] with taps at (i*dh, j*dw) and spectrum W (Wr + i Wi,
    per frequency [C, OC]), the real block form of its product, [2 (output part), F, 2K,
    O], straight from the taps (one GEMM), remembered per thread: [Xr Xi] @ m[0] and
    [Xr Xi] @ m[1] are Re and Im of X conj(W) (forward, K = C), and [Dr Di] @ m[p] those
    of D W^T (`grad`, the input gradient, K = OC)."""
    kh, kw, c, oc = w.shape

    def make():
        e = xp.asarray(_dft_filter(l1, l2, kh, kw, dh, dw, grad, w.dtype))
        taps = w.transpose(0, 1, 3, 2) if grad else w
        k, o = (oc, c) if grad else (c, oc)
        tag = "memo.wt.m" if grad else "memo.w.m"
        f = e.shape[1]
        m2 = _work(xp, tag, (2, f, 2, k * o), w.dtype)
        # Of e's four [F, KH*KW] blocks two are the others negated ((0, 1) = -(1, 0),
        # (1, 1) = (0, 0)), and so are their products with the taps (rounding is
        # symmetric: the same values, zeros' signs aside, measured against one GEMM of
        # all four): two GEMMs [F, KH*KW] @ [KH*KW, K*O], a short inner
        # size and an output of MBs (LeNet's second layer: 4.7 MB in all, ~1.4 ms on
        # one thread as one GEMM), then a copy and a negation, in parts of F.
        tv = taps.reshape(kh * kw, k * o)

        def block(s: int, t: int) -> None:
            for p in range(2):
                xp.matmul(e[p, s:t, 0], tv, out=m2[p, s:t, 0])
            xp.copyto(m2[1, s:t, 1], m2[0, s:t, 0])
            xp.negative(m2[1, s:t, 0], out=m2[0, s:t, 1])

        _each_part(xp, _parts(xp, f, 4 * (kh * kw + k * o) * w.itemsize), block)
        return m2.reshape(2, f, 2 * k, o)

    return _memo(xp, "wt" if grad else "w", w, (l1, l2, dh, dw), make)


def _grid_size(size: int, lo: int, out: int, span: int) -> int:
    """The smallest circular grid on which a stride-1 correlation over one axis (input of
    `size` placed at `lo`, `out` outputs, filter taps spanning `span` = (K - 1) * dilation)
    equals the linear one, and so do its two backprops read the same way: the input fits
    (lo + size), and every window position past the grid's end wraps onto zero padding
    below lo (out + span - lo), so SAME padding wraps around instead of widening it."""
    return max(lo + size, out + span - lo, out, span + 1)


def _fft_grid(g: _Geom):
    """The (L1, L2) grid shared by the three spectral kernels of g (stride 1)."""
    return (
        _grid_size(g.h, g.pad[0], g.oh, (g.kh - 1) * g.dh),
        _grid_size(g.w, g.pad[2], g.ow, (g.kw - 1) * g.dw),
    )


def _check_attrs(attrs, depthwise=False) -> None:
    """TF's construction-time checks (strides/dilations in batch and depth must be 1)."""
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"Invalid data format: {fmt}")
    for key in ("strides", "dilations"):
        vals = attrs.get(key)
        if vals is None:
            continue
        if len(vals) != 4:
            raise ValueError(f"Sliding window {key} field must specify 4 dimensions")
        batch, depth = (vals[0], vals[1]) if fmt == "NCHW" else (vals[0], vals[3])
        # TF 2.21 builds a DepthwiseConv2dNative with such strides; its kernel refuses them.
        if (batch != 1 or depth != 1) and not (depthwise and key == "strides"):
            raise ValueError(
                f"Current implementation does not yet support {key} in the batch and depth "
                "dimensions."
            )
        if any(v < 1 for v in vals):
            raise ValueError(f"{key} must be positive, got {list(vals)}")
    padding = attrs["padding"]
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise ValueError(f"padding must be one of SAME, VALID, EXPLICIT, got {padding!r}")
    explicit = attrs.get("explicit_paddings") or []
    if any(int(p) < 0 for p in explicit):
        raise ValueError(f"All elements of explicit_paddings must be nonnegative, got {explicit}")
    if padding == "EXPLICIT" and len(explicit) != 8:
        raise ValueError("explicit_paddings attribute must contain 8 values for EXPLICIT padding")
    if padding != "EXPLICIT" and explicit:
        raise ValueError("explicit_paddings should be empty unless padding is EXPLICIT")


def _attrs_of(op) -> dict:
    return {k: op._attr(k) for k in op.op_def.attrs}


def _static_out_shape(op, in_shape, filter_shape, depthwise=False) -> tensor_shape.TensorShape:
    """The NHWC/NCHW output shape from partially known input and filter shapes."""
    attrs = _attrs_of(op)
    _check_attrs(attrs, depthwise)
    fmt = attrs["data_format"]
    in_shape = tensor_shape.as_shape(in_shape).with_rank(4)
    filter_shape = tensor_shape.as_shape(filter_shape).with_rank(4)
    n, h, w, c = nhwc_dims(in_shape.as_list(), fmt)
    kh, kw, fc, m = filter_shape.as_list()
    if depthwise and c is not None and fc is not None and c != fc:
        raise ValueError(f"Depth of input ({c}) must equal the filter's input depth ({fc})")
    if not depthwise and c is not None and fc is not None:
        if fc < 1 or c % fc:
            raise ValueError(
                f"Depth of input ({c}) is not a multiple of input depth of filter ({fc})"
            )
        if m is not None and m % (c // fc):
            raise ValueError(
                f"Depth of output ({m}) is not a multiple of the number of groups ({c // fc})"
            )
    sh, sw = spatial(attrs["strides"], fmt)
    dh, dw = spatial(attrs.get("dilations") or [1] * 4, fmt)
    explicit = list(attrs.get("explicit_paddings") or [0] * 8)
    pads = nhwc_dims([explicit[i : i + 2] for i in range(0, 8, 2)], fmt)
    oh = static_out_size(h, kh, sh, dh, attrs["padding"], pads[1])
    ow = static_out_size(w, kw, sw, dw, attrs["padding"], pads[2])
    if depthwise:
        oc = None if (fc is None and c is None) or m is None else (fc or c) * m
    else:
        oc = m
    return tensor_shape.TensorShape(from_nhwc_dims([n, oh, ow, oc], fmt))


_CONV_ATTRS = {
    "T": CONV_TYPES,
    "strides": REQUIRED,
    "use_cudnn_on_gpu": True,
    "padding": REQUIRED,
    "explicit_paddings": [],
    "data_format": "NHWC",
    "dilations": [1, 1, 1, 1],
}


def _check_rank4(x, what: str) -> None:
    if x.ndim != 4:
        raise _invalid(f"{what} must be 4-dimensional: {_shape_str(x.shape)}")


def _input_sizes(value, w, dy, fmt) -> list[int]:
    """Conv2DBackpropInput's input_sizes: 4 sizes, or (as TF takes) [height, width] with
    the batch from out_backprop and the depth from the filter."""
    v = np.asarray(value.get() if hasattr(value, "get") else value)
    if v.ndim == 1 and v.shape[0] == 2:
        n = nhwc_dims(dy.shape, fmt)[0]
        return from_nhwc_dims([int(n), int(v[0]), int(v[1]), int(w.shape[2])], fmt)
    return _sizes(value, "input_sizes")


def _sizes(value, what: str) -> list[int]:
    v = np.asarray(value.get() if hasattr(value, "get") else value)
    if v.ndim != 1 or v.shape[0] != 4:
        raise _invalid(f"{what} must be 4-dimensional, got {_shape_str(v.shape)}")
    return [int(d) for d in v]


# -- Conv2D --------------------------------------------------------------------------------


def _conv2d_shape(op):
    return [_static_out_shape(op, op.inputs[0].shape, op.inputs[1].shape)]


Conv2D = register_op(
    "Conv2D",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    # TF's CPU kernel also convolves int32 (its backprops do not).
    attrs={**_CONV_ATTRS, "T": TypeConstraint([*CONV_TYPES.allowed, "int32"])},
    shape_fn=_conv2d_shape,
)


def _conv2d_forward_one(xp, g: _Geom, x, w, fmt, out_dtype):
    ct = compute_dtype(x.dtype)
    x = to_nhwc(xp, x, fmt).astype(ct, copy=False)
    w = w.astype(ct, copy=False)
    if xp is np and _use_fft(g, g.c, g.oc) and _finite(w):
        # y = x (placed at the padding offsets) correlated with w: X conj(W) per frequency
        l1, l2 = _fft_grid(g)
        try:
            x2 = _spectrum_of(xp, "x", x, l1, l2, off=(g.pad[0], g.pad[2]))
        except _NonFinite:
            x2 = None  # (the direct path below)
        if x2 is not None:
            y2 = _products(xp, x2, _filter_matrices(xp, w, l1, l2, g.dh, g.dw), l1)
            return _real_images(xp, y2, l1, l2, g.oh, g.ow, (0, 0), fmt, out_dtype)
    if _use_rows(g, g.c, g.oc):
        out = _rows_conv(xp, pad_spatial(xp, x, *g.pad), w, g.oh, g.ow, g.sw, g.dh, g.dw)
        return _from_hnwc(xp, out, fmt, out_dtype)
    w = w.reshape(-1, g.oc)
    rows = g.oh * g.ow
    out = xp.empty((g.n * rows, g.oc), dtype=ct)
    if _use_cols_t(g):
        xpad = pad_spatial(xp, x, *g.pad)

        def block(s: int, e: int) -> None:
            xp.matmul(g.cols_t(xp, xpad, s, e).T, w, out=out[s * rows : e * rows])

    else:
        win = g.windows_or_x(xp, x)

        def block(s: int, e: int) -> None:
            xp.matmul(g.cols(xp, win, s, e), w, out=out[s * rows : e * rows])

    _each_part(xp, g.batch_parts(xp, np.dtype(ct).itemsize), block)
    return from_nhwc(xp, out.reshape(g.out_nhwc()), fmt).astype(out_dtype, copy=False)


# -- the spectral forward with its bias and ReLU (and a 2x2 pool) -------------------------
#
# nn_ops' _FusedConv2DBiasAddRelu(MaxPool) of a convolution that goes spectral (LeNet's
# second layer, [64,14,14,32] * [5,5,32,64] SAME): the inverse transform writes each block
# of images into the result, and while the block is in cache cnn_jit's loops add the bias
# and apply the ReLU in place, then pool it with each window's first-maximum code.  Where
# Conv2D, _FusedBiasAddRelu and MaxPool each read the whole activation again (in the
# step 4.9 + 0.37 + 0.33 ms), and the backward's MaxPoolGrad + ReluGrad read it once more
# to find the maxima (0.72 ms) where the code is spread (`spread_relu_by_code`).  Every
# value is what those kernels compute (the same float32 operations in the same order).


def spectral_suits(g: _Geom) -> bool:
    """Whether a convolution of g's geometry goes spectral at any batch big enough
    (`_use_fft`'s ratio; the batch cancels out of it)."""
    if not (g.sh == g.sw == 1 and g.kh * g.kw > 1 and g.groups == 1):
        return False
    if min(g.h, g.w, g.c, g.oc, g.oh, g.ow) < 1:
        return False
    l1, l2 = _fft_grid(g)
    direct = g.oh * g.ow * g.kh * g.kw * g.c * g.oc
    return _fft_macs(1, g.c, g.oc, g.h, g.w, l1, l2, g.oh, g.ow) < _FFT_MAX_RATIO * direct


def spectral_bias_relu_geom(attrs, x, w, bias, pool: bool):
    """The geometry where `spectral_bias_relu` takes this NHWC convolution on the host
    now (the spectral path, one float dtype, cnn_jit's loops compiled; with `pool` even
    output sizes), else None."""
    if attrs["data_format"] != "NHWC" or x.ndim != 4 or w.ndim != 4 or bias.ndim != 1:
        return None
    dt = x.dtype
    if dt not in (np.float32, np.float64) or not (w.dtype == bias.dtype == dt):
        return None
    if attrs["T"].np_dtype != dt or x.shape[3] != w.shape[2] or bias.shape[0] != w.shape[3]:
        return None
    if 0 in x.shape or 0 in w.shape:
        return None
    g = _Geom(attrs, x.shape, w.shape)
    if 0 in g.out_nhwc() or (pool and (g.oh % 2 or g.ow % 2)) or not _use_fft(g, g.c, g.oc):
        return None
    if not _finite(w):
        return None  # (the layers' own kernels then: the direct path)
    return g if cnn_jit.loops() is not None else None


def spectral_bias_relu(g: _Geom, x, w, bias, pool: bool):
    """max(conv2d(x, w) + bias, 0) for NHWC x on the spectral path (`_use_fft`), the bias
    and ReLU applied by cnn_jit's loop to each block of images as the inverse transform
    writes it; with `pool`, (the 2x2 stride-2 max pooling, the activation, each window's
    first-maximum code) as nn_ops' _FusedConv2DBiasAddReluMaxPool returns them."""
    jit = cnn_jit.loops()
    dt = x.dtype
    bias = np.require(bias, requirements=("C", "W"))  # (numba types read-only arrays apart)
    shape = (g.n, g.oh // 2, g.ow // 2, g.oc) if pool else (0, 1, 1, 1)
    pooled, code = np.empty(shape, dt), np.empty(shape, np.uint8)

    def then(res, s: int, e: int) -> None:
        act = res[s:e]
        jit["_add_relu_inplace"](act.reshape(-1, g.oc), bias)
        if pool:
            x6 = act.reshape(e - s, g.oh // 2, 2, g.ow // 2, 2, g.oc)
            jit["_pool_2x2"](x6, pooled[s:e])
            jit["_first_max_2x2"](x6, pooled[s:e], code[s:e])

    l1, l2 = _fft_grid(g)
    try:
        x2 = _spectrum_of(np, "x", x, l1, l2, off=(g.pad[0], g.pad[2]))
    except _NonFinite:
        return None  # (a NaN or an infinity in x: the layers' own kernels, direct)
    y2 = _products(np, x2, _filter_matrices(np, w, l1, l2, g.dh, g.dw), l1)
    y = _real_images(np, y2, l1, l2, g.oh, g.ow, (0, 0), "NHWC", dt, then)
    return (pooled, y, code) if pool else y


@Conv2D.kernel()
async def _conv2d(ctx, x, w):
    xp = ctx.xp
    x, w = xp.asarray(x), xp.asarray(w)
    _check_rank4(x, "input")
    _check_rank4(w, "filter")
    fmt = ctx.attrs["data_format"]
    if 0 in w.shape:
        raise _invalid("filter must not have zero elements (i.e. all dimensions must be non-zero)")
    g = _Geom(ctx.attrs, nhwc_dims(x.shape, fmt), w.shape)
    dt = x.dtype
    if 0 in g.out_nhwc():
        return xp.zeros(from_nhwc_dims(g.out_nhwc(), fmt), dtype=dt)
    ctx.device.check_alloc(g.n * g.oh * g.ow * g.kh * g.kw * g.c, ctx.attrs["T"])
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * x.itemsize)
    if dt.kind in "iu":  # int32: exact in float64 for any sum an int32 result can hold
        x, w = x.astype(np.float64), w.astype(np.float64)
    y = await ctx.compute(
        _in_step, _step_token(), _conv2d_forward, xp, g, x, w, fmt, x.dtype, cost=cost
    )
    return xp.rint(y).astype(dt) if dt.kind in "iu" else y


# -- Conv2DBackpropInput -------------------------------------------------------------------


def _backprop_input_shape(op):
    op.inputs[2].shape.with_rank(4)
    value = ops.constant_value(op.inputs[0])
    if value is not None and np.size(value) == 2:  # [height, width]: TF takes those too
        fmt = op._attr("data_format")
        n = nhwc_dims(op.inputs[2].shape.as_list(), fmt)[0]
        c = op.inputs[1].shape.with_rank(4).as_list()[2]
        dims = from_nhwc_dims([n, *(int(v) for v in np.ravel(value)), c], fmt)
        return [tensor_shape.TensorShape(dims)]
    sizes = ops.constant_shape(op.inputs[0])
    return [sizes.merge_with(tensor_shape.unknown_shape(4))]


Conv2DBackpropInput = register_op(
    "Conv2DBackpropInput",
    inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_CONV_ATTRS),
    shape_fn=_backprop_input_shape,
)


def _check_out_backprop(g: _Geom, dy_nhwc, what="out_backprop") -> None:
    if tuple(dy_nhwc) != g.out_nhwc():
        raise _invalid(
            f"Conv2DCustomBackprop: Size of {what} doesn't match computed: actual = "
            f"{_shape_str(dy_nhwc)}, computed = {_shape_str(g.out_nhwc())}"
        )


def _conv2d_backprop_input_one(xp, g: _Geom, w, dy, fmt, out_dtype):
    ct = compute_dtype(dy.dtype)
    dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False)
    d2 = None
    if xp is np and _use_fft(g, g.oc, g.c) and _finite(w):
        l1, l2 = _fft_grid(g)
        try:
            d2 = _spectrum_of(xp, "dy", dy, l1, l2)
        except _NonFinite:
            pass  # (the direct path below)
    if d2 is not None:
        # the padded input's gradient is dy convolved with w (DY W per frequency, the
        # filter's spectrum as the forward pass made it); dx is read at the offsets
        m2 = _filter_matrices(xp, w.astype(ct, copy=False), l1, l2, g.dh, g.dw, grad=True)
        y2 = _products(xp, d2, m2, l1)
        off = (g.pad[0], g.pad[2])
        return _real_images(xp, y2, l1, l2, g.h, g.w, off, fmt, out_dtype)
    if g.sh == g.sw == 1 and _use_rows(g, g.oc, g.c):
        # dx is a stride-1 correlation of dy, padded so that every input position sees
        # all the outputs it fed, with the filter flipped and its channels swapped.
        lo_h, _, lo_w, _ = g.pad
        eh, ew = (g.kh - 1) * g.dh, (g.kw - 1) * g.dw
        dyp = _place(xp, dy, eh - lo_h, g.h + eh, ew - lo_w, g.w + ew)
        wf = xp.ascontiguousarray(w.astype(ct, copy=False)[::-1, ::-1].transpose(0, 1, 3, 2))
        out = _rows_conv(xp, dyp, wf, g.h, g.w, 1, g.dh, g.dw)
        return _from_hnwc(xp, out, fmt, out_dtype)
    dy = dy.reshape(g.n, -1, g.oc)
    # [KH*KW, OC, C]: one GEMM per window offset, each block landing in NHWC order
    w_t = xp.ascontiguousarray(
        w.astype(ct, copy=False).reshape(g.kh * g.kw, g.c, g.oc).transpose(0, 2, 1)
    )
    dxp = g.padded_zeros(xp, g.n, ct)
    for s, e in g.batch_chunks(np.dtype(ct).itemsize):
        blocks = xp.matmul(dy[s:e].reshape(-1, g.oc), w_t)
        g.col2im_into(dxp[s:e], blocks.reshape(-1, e - s, g.oh, g.ow, g.c))
    dx = g.crop(dxp)
    return from_nhwc(xp, xp.ascontiguousarray(dx), fmt).astype(out_dtype, copy=False)


@Conv2DBackpropInput.kernel(host_memory=("input_sizes",))
async def _conv2d_backprop_input_kernel(ctx, input_sizes, w, dy):
    xp = ctx.xp
    w, dy = xp.asarray(w), xp.asarray(dy)
    _check_rank4(w, "filter")
    _check_rank4(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    sizes = _input_sizes(input_sizes, w, dy, fmt)
    ctx.device.check_alloc(int(np.prod(sizes)), ctx.attrs["T"])
    g = _Geom(ctx.attrs, nhwc_dims(sizes, fmt), w.shape)
    _check_out_backprop(g, nhwc_dims(dy.shape, fmt))
    if not (dy.size and w.size and np.prod(sizes)):
        return xp.zeros(sizes, dtype=dy.dtype)
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * dy.itemsize)
    return await ctx.compute(
        _in_step, _step_token(), _conv2d_backprop_input, xp, g, w, dy, fmt, dy.dtype, cost=cost
    )


# -- Conv2DBackpropFilter ------------------------------------------------------------------


def _backprop_filter_shape(op):
    sizes = ops.constant_shape(op.inputs[1])
    op.inputs[0].shape.with_rank(4)
    return [sizes.merge_with(tensor_shape.unknown_shape(4))]


Conv2DBackpropFilter = register_op(
    "Conv2DBackpropFilter",
    inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_CONV_ATTRS),
    shape_fn=_backprop_filter_shape,
)


def _conv2d_backprop_filter_one(xp, g: _Geom, x, dy, fmt, out_dtype):
    ct = compute_dtype(dy.dtype)
    x = to_nhwc(xp, x, fmt).astype(ct, copy=False)
    spectra = None
    if xp is np and _use_fft(g, g.c, g.oc):
        dy_nhwc = to_nhwc(xp, dy, fmt).astype(ct, copy=False)  # (dy stays in fmt: below)
        l1, l2 = _fft_grid(g)
        try:
            spectra = (
                _spectrum_of(xp, "x", x, l1, l2, off=(g.pad[0], g.pad[2])),
                _spectrum_of(xp, "dy", dy_nhwc, l1, l2),  # [F, N, 2 OC]
            )
        except _NonFinite:
            pass  # (the direct path below)
    if spectra is not None:
        # dw[i, j] = sum over n, p, q of xpad[n, p + i*dh, q + j*dw] dy[n, p, q]: on the
        # padded grid, X(f)^T conj(DY(f)) per frequency, read back at the filter's lags
        x2, d2 = spectra
        y2 = _cross_products(xp, x2, d2)  # [2, F, C, OC]
        dw = _real_values(xp, y2, l1, l2, g.kh, g.kw, step=(g.dh, g.dw))
        res = xp.empty((g.kh, g.kw, g.c, g.oc), dtype=out_dtype)
        xp.copyto(res, dw.transpose(1, 0, 2, 3), casting="unsafe")
        return res
    if _use_rows(g, g.c, g.oc):
        dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False)
        xpad = pad_spatial(xp, x, *g.pad)
        dw = _rows_filter_grad(xp, xpad, dy, g.kh, g.kw, g.sw, g.dh, g.dw)
        return dw.reshape(g.kh, g.kw, g.c, g.oc).astype(out_dtype, copy=False)
    rows = g.oh * g.ow
    dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False).reshape(-1, g.oc)
    dw = xp.zeros((g.kh * g.kw * g.c, g.oc), dtype=ct)
    if _use_cols_t(g):
        xpad = pad_spatial(xp, x, *g.pad)
        k = g.kh * g.kw * g.c
        for s, e in g.batch_chunks(np.dtype(ct).itemsize):
            if rows < _PER_IMAGE_MIN_ROWS:
                dw += xp.matmul(g.cols_t(xp, xpad, s, e), dy[s * rows : e * rows])
                continue
            # one GEMM per image, summed: BLAS splits a single GEMM's long inner
            # dimension poorly (64x28x28x1 -> 5x5x32: 1.2 instead of 1.8 ms); the
            # images' products are independent, so parts of them share the cores
            # (and their sum, in image order, is the same whoever made them)
            prods = _work(xp, "cols_t.prods", (e - s, k, g.oc), ct)

            def block(a: int, b: int, s: int = s, prods=prods) -> None:
                cols = g.cols_t(xp, xpad, s + a, s + b)
                xp.matmul(
                    cols.reshape(k, b - a, rows).transpose(1, 0, 2),
                    dy[(s + a) * rows : (s + b) * rows].reshape(b - a, rows, g.oc),
                    out=prods[a:b],
                )

            _each_part(xp, g.batch_parts(xp, np.dtype(ct).itemsize, e - s), block)
            dw += prods.sum(axis=0)
        return dw.reshape(g.kh, g.kw, g.c, g.oc).astype(out_dtype, copy=False)
    win = g.windows_or_x(xp, x)
    for s, e in g.batch_chunks(np.dtype(ct).itemsize):
        dw += xp.matmul(g.cols(xp, win, s, e).T, dy[s * rows : e * rows])
    return dw.reshape(g.kh, g.kw, g.c, g.oc).astype(out_dtype, copy=False)


@Conv2DBackpropFilter.kernel(host_memory=("filter_sizes",))
async def _conv2d_backprop_filter_kernel(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    x, dy = xp.asarray(x), xp.asarray(dy)
    sizes = _sizes(filter_sizes, "filter_sizes")
    _check_rank4(x, "input")
    _check_rank4(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    g = _Geom(ctx.attrs, nhwc_dims(x.shape, fmt), sizes)
    _check_out_backprop(g, nhwc_dims(dy.shape, fmt))
    if not (x.size and dy.size and np.prod(sizes)):
        return xp.zeros(sizes, dtype=dy.dtype)
    ctx.device.check_alloc(g.n * g.oh * g.ow * g.kh * g.kw * g.c, ctx.attrs["T"])
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.c * dy.itemsize)
    return await ctx.compute(
        _in_step, _step_token(), _conv2d_backprop_filter, xp, g, x, dy, fmt, dy.dtype, cost=cost
    )


# -- grouped convolutions ------------------------------------------------------------------
#
# Each group is an ordinary convolution of its slice of the channels; its result is
# copied into the whole output at once (the kernels above may return views of per-thread
# scratch buffers that the next group's call rewrites).


def _channels(a, lo: int, hi: int, fmt: str):
    return a[:, lo:hi] if fmt == "NCHW" else a[..., lo:hi]


def _grouped(xp, g: _Geom, fmt: str, one, slices, out_shape, out_dtype, filter_out=False):
    """`one(sub_geometry, *args)` per group, the args of group k from `slices(k, sub)`,
    gathered along the output's channel axis (the filter's last axis if `filter_out`)."""
    sub = g.one_group()
    out = xp.empty(out_shape, dtype=out_dtype)
    for k in range(g.groups):
        part, (lo, hi) = one(sub, *slices(k, sub))
        if filter_out:
            out[..., lo:hi] = part
        else:
            _channels(out, lo, hi, fmt)[...] = part
    return out


def _on_onednn(xp, out_dtype, *arrays) -> bool:
    """Whether a float32 convolution of these operands may go to oneDNN (ops/onednn.py)."""
    f32 = np.dtype(np.float32)
    return (
        _ONEDNN
        and xp is np
        and np.dtype(out_dtype) == f32
        and all(type(a) is np.ndarray and a.dtype == f32 for a in arrays)
        and onednn.available()
    )


def _nhwc_c(a, fmt: str):
    """`a` as a C-contiguous NHWC array (oneDNN's calls take every format in NHWC: its
    blocked kernels skip the padding there, where on plain NCHW its gemm-based filter
    gradient multiplies the padding's zeros, as our own paths and TF's Eigen kernels do)."""
    return np.ascontiguousarray(to_nhwc(np, a, fmt))


def _conv2d_forward(xp, g: _Geom, x, w, fmt, out_dtype):
    if g.groups == 1 and _on_onednn(xp, out_dtype, x, w):
        y = onednn.conv_forward(g, _nhwc_c(x, fmt), np.ascontiguousarray(w), "NHWC")
        if y is not None:
            return np.ascontiguousarray(from_nhwc(np, y, fmt))
    if g.groups == 1:
        return _conv2d_forward_one(xp, g, x, w, fmt, out_dtype)

    def one(sub, xk, wk, span):
        return _conv2d_forward_one(xp, sub, xk, wk, fmt, out_dtype), span

    def slices(k, sub):
        c, oc = (k * sub.c, (k + 1) * sub.c), (k * sub.oc, (k + 1) * sub.oc)
        return _channels(x, *c, fmt), w[..., oc[0] : oc[1]], oc

    shape = from_nhwc_dims(list(g.out_nhwc()), fmt)
    return _grouped(xp, g, fmt, one, slices, shape, out_dtype)


def _conv2d_backprop_input(xp, g: _Geom, w, dy, fmt, out_dtype):
    if g.groups == 1 and _on_onednn(xp, out_dtype, w, dy):
        dx = onednn.conv_backward_data(g, np.ascontiguousarray(w), _nhwc_c(dy, fmt), "NHWC")
        if dx is not None:
            return np.ascontiguousarray(from_nhwc(np, dx, fmt))
    if g.groups == 1:
        return _conv2d_backprop_input_one(xp, g, w, dy, fmt, out_dtype)

    def one(sub, wk, dyk, span):
        return _conv2d_backprop_input_one(xp, sub, wk, dyk, fmt, out_dtype), span

    def slices(k, sub):
        c, oc = (k * sub.c, (k + 1) * sub.c), (k * sub.oc, (k + 1) * sub.oc)
        return w[..., oc[0] : oc[1]], _channels(dy, *oc, fmt), c

    shape = from_nhwc_dims([g.n, g.h, g.w, g.c], fmt)
    return _grouped(xp, g, fmt, one, slices, shape, out_dtype)


def _conv2d_backprop_filter(xp, g: _Geom, x, dy, fmt, out_dtype):
    if g.groups == 1 and _on_onednn(xp, out_dtype, x, dy):
        dw = onednn.conv_backward_weights(g, _nhwc_c(x, fmt), _nhwc_c(dy, fmt), "NHWC")
        if dw is not None:
            return dw
    if g.groups == 1:
        return _conv2d_backprop_filter_one(xp, g, x, dy, fmt, out_dtype)

    def one(sub, xk, dyk, span):
        return _conv2d_backprop_filter_one(xp, sub, xk, dyk, fmt, out_dtype), span

    def slices(k, sub):
        c, oc = (k * sub.c, (k + 1) * sub.c), (k * sub.oc, (k + 1) * sub.oc)
        return _channels(x, *c, fmt), _channels(dy, *oc, fmt), oc

    shape = (g.kh, g.kw, g.c // g.groups, g.oc)
    return _grouped(xp, g, fmt, one, slices, shape, out_dtype, filter_out=True)


# -- gradients -----------------------------------------------------------------------------


def _conv_attrs(op) -> dict:
    return {k: op._attr(k) for k in _CONV_ATTRS if k != "T"}


def _shape_of(t):
    return array_ops.shape(t, out_type=dtypes.int32)


@Conv2D.gradient
def _conv2d_grad(op, grad):
    attrs = _conv_attrs(op)
    x, w = op.inputs
    dx = ops.apply_op("Conv2DBackpropInput", [_shape_of(x), w, grad], attrs).outputs[0]
    dw = ops.apply_op("Conv2DBackpropFilter", [x, _shape_of(w), grad], attrs).outputs[0]
    return [dx, dw]


@Conv2DBackpropInput.gradient
def _conv2d_backprop_input_grad(op, grad):
    attrs = _conv_attrs(op)
    _, w, dy = op.inputs
    dw = ops.apply_op("Conv2DBackpropFilter", [grad, _shape_of(w), dy], attrs).outputs[0]
    ddy = ops.apply_op("Conv2D", [grad, w], attrs).outputs[0]
    return [None, dw, ddy]


@Conv2DBackpropFilter.gradient
def _conv2d_backprop_filter_grad(op, grad):
    attrs = _conv_attrs(op)
    x, _, dy = op.inputs
    dx = ops.apply_op("Conv2DBackpropInput", [_shape_of(x), grad, dy], attrs).outputs[0]
    ddy = ops.apply_op("Conv2D", [x, grad], attrs).outputs[0]
    return [dx, None, ddy]


# -- builders ------------------------------------------------------------------------------


def _fmt(data_format) -> str:
    fmt = data_format or "NHWC"
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return fmt


def _padding_attrs(padding, fmt) -> dict:
    """TF's `convert_padding`: a string, or explicit [[before, after]] * 4 pairs."""
    if isinstance(padding, str):
        padding = padding.upper()
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
        return {"padding": padding, "explicit_paddings": []}
    if any(not isinstance(p, list | tuple) for p in padding):
        raise ValueError(
            f"When padding is explicit, it must be a list of lists or tuples, got {padding}"
        )
    pairs = [list(p) for p in padding]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(f"When padding is explicit, it must be 4 pairs, got {padding}")
    batch, depth = (pairs[0], pairs[1]) if fmt == "NCHW" else (pairs[0], pairs[3])
    if any(batch) or any(depth):
        raise ValueError("Explicit padding in the batch or depth dimension is not supported")
    return {"padding": "EXPLICIT", "explicit_paddings": [int(v) for p in pairs for v in p]}


def _pick(a, a_name, b, b_name):
    return deprecated_argument_lookup(b_name, b, a_name, a)


def conv2d(
    input,  # noqa: A002 - TF's name
    filter=None,  # noqa: A002 - TF's name
    strides=None,
    padding=None,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=None,
    name=None,
    filters=None,
):
    """2-D convolution of a 4-D `input` [N,H,W,C] with `filter` [KH,KW,C,OC].

    Raises:
      ValueError: a bad data_format, padding, stride or dilation (at build time), or
        shapes that cannot convolve.
      InvalidArgumentError: at run time, input and filter depths differ.
    """
    filter = _pick(filter, "filter", filters, "filters")  # noqa: A001
    if filter is None or padding is None or strides is None:
        raise ValueError("conv2d needs filter, strides and padding")
    fmt = _fmt(data_format)
    attrs = {
        "strides": four(strides, "strides", fmt),
        "use_cudnn_on_gpu": bool(use_cudnn_on_gpu),
        "data_format": fmt,
        "dilations": four(dilations, "dilations", fmt),
        **_padding_attrs(padding, fmt),
    }
    if isinstance(input, ops.Tensor):
        rank = input.shape.ndims
    else:
        rank = np.ndim(input) if isinstance(input, np.ndarray | list | tuple) else None
    if rank is not None and rank > 4:  # TF's expanded batch: all leading dims
        input = ops.convert_to_tensor(input, name="input")  # noqa: A001
        return fold_batch(input, 2, lambda x: conv2d(x, filter, strides, padding,
                          use_cudnn_on_gpu, data_format, dilations), name)  # fmt: skip
    return ops.apply_op("Conv2D", [input, filter], attrs, name=name).outputs[0]


def fold_batch(input, n: int, fn, name=None):  # noqa: A002 - TF's name
    """`fn` (an op over one batch dimension) applied to `input` whose dimensions before
    its last n + 1 are all batch (TF's `num_batch_dims`): those fold into one and come
    back in the result's shape."""
    from asyncflow.ops import array_ops

    if input.shape.ndims is None:
        raise ValueError("input must have a known rank")
    b = input.shape.ndims - n - 1
    if b == 1:
        return fn(input)
    shape = array_ops.shape(input)
    y = fn(array_ops.reshape(input, array_ops.concat([[-1], shape[b:]], 0)))
    out = array_ops.reshape(y, array_ops.concat([shape[:b], array_ops.shape(y)[1:]], 0), name=name)
    out.set_shape(input.shape[:b].concatenate(y.shape[1:]))
    return out


def conv2d_backprop_input(
    input_sizes,
    filter=None,  # noqa: A002 - TF's name
    out_backprop=None,
    strides=None,
    padding=None,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=None,
    name=None,
    filters=None,
):
    """The gradient of conv2d with respect to its input (op Conv2DBackpropInput)."""
    filter = _pick(filter, "filter", filters, "filters")  # noqa: A001
    fmt = _fmt(data_format)
    attrs = {
        "strides": four(strides, "strides", fmt),
        "use_cudnn_on_gpu": bool(use_cudnn_on_gpu),
        "data_format": fmt,
        "dilations": four(dilations, "dilations", fmt),
        **_padding_attrs(padding, fmt),
    }
    return ops.apply_op(
        "Conv2DBackpropInput", [input_sizes, filter, out_backprop], attrs, name=name
    ).outputs[0]


def conv2d_backprop_filter(
    input,  # noqa: A002 - TF's name
    filter_sizes,
    out_backprop,
    strides,
    padding,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=None,
    name=None,
):
    """The gradient of conv2d with respect to its filter (op Conv2DBackpropFilter)."""
    fmt = _fmt(data_format)
    attrs = {
        "strides": four(strides, "strides", fmt),
        "use_cudnn_on_gpu": bool(use_cudnn_on_gpu),
        "data_format": fmt,
        "dilations": four(dilations, "dilations", fmt),
        **_padding_attrs(padding, fmt),
    }
    return ops.apply_op(
        "Conv2DBackpropFilter", [input, filter_sizes, out_backprop], attrs, name=name
    ).outputs[0]


def conv2d_transpose(
    value=None,
    filter=None,  # noqa: A002 - TF's name
    output_shape=None,
    strides=None,
    padding="SAME",
    data_format="NHWC",
    name=None,
    input=None,  # noqa: A002 - TF's name
    filters=None,
    dilations=None,
):
    """The transpose of conv2d: `filter` is [KH, KW, out_channels, in_channels].

    Raises:
      ValueError: value's channels differ from filter's last dimension, or output_shape
        is not 4 values.
    """
    value = _pick(value, "value", input, "input")
    filter = _pick(filter, "filter", filters, "filters")  # noqa: A001
    fmt = _fmt(data_format)
    with _builder_scope(name, "conv2d_transpose", [value, filter]) as op_name:
        value = ops.convert_to_tensor(value, name="value")
        filter = ops.convert_to_tensor(filter, name="filter")  # noqa: A001
        axis = 1 if fmt == "NCHW" else 3
        vc = tensor_shape.dimension_value(value.shape.with_rank(4)[axis])
        fc = tensor_shape.dimension_value(filter.shape.with_rank(4)[3])
        if vc is not None and fc is not None and vc != fc:
            raise ValueError(
                f"input channels does not match filter's input channels, {vc} != {fc}"
            )
        if not isinstance(output_shape, ops.Tensor):
            output_shape = np.asarray(
                [int(tensor_shape.dimension_value(d)) for d in output_shape], np.int32
            )
            if output_shape.shape != (4,):
                raise ValueError("output_shape must have shape (4,)")
        output_shape = ops.convert_to_tensor(output_shape, name="output_shape")
    return conv2d_backprop_input(
        output_shape, filter, value, strides, padding, True, fmt, dilations, name=op_name
    )


# -- depthwise -----------------------------------------------------------------------------

_DEPTHWISE_ATTRS = {
    "T": CONV_TYPES,
    "strides": REQUIRED,
    "padding": REQUIRED,
    "explicit_paddings": [],
    "data_format": "NHWC",
    "dilations": [1, 1, 1, 1],
}


def _depthwise_shape(op):
    return [_static_out_shape(op, op.inputs[0].shape, op.inputs[1].shape, depthwise=True)]


DepthwiseConv2dNative = register_op(
    "DepthwiseConv2dNative",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs=dict(_DEPTHWISE_ATTRS),
    shape_fn=_depthwise_shape,
)


def _depthwise_forward(xp, g: _Geom, x, w, fmt, out_dtype):
    ct = compute_dtype(x.dtype)
    win = g.windows(xp, to_nhwc(xp, x, fmt).astype(ct, copy=False))
    w = w.astype(ct, copy=False)
    m = w.shape[3]
    out = xp.zeros((g.n, g.oh, g.ow, g.c, m), dtype=ct)
    for i in range(g.kh):
        for j in range(g.kw):
            out += win[:, :, :, i, j, :, None] * w[i, j]
    return from_nhwc(xp, out.reshape(g.out_nhwc()), fmt).astype(out_dtype, copy=False)


@DepthwiseConv2dNative.kernel()
async def _depthwise(ctx, x, w):
    xp = ctx.xp
    x, w = xp.asarray(x), xp.asarray(w)
    _check_rank4(x, "input")
    _check_rank4(w, "filter")
    fmt = ctx.attrs["data_format"]
    n_step, *_, c_step = nhwc_dims(ctx.attrs["strides"], fmt)
    if n_step != 1 or c_step != 1:
        raise errors.UnimplementedError(
            None,
            None,
            "Current implementation does not yet support strides in the batch and depth "
            "dimensions.",
        )
    g = _Geom(ctx.attrs, nhwc_dims(x.shape, fmt), w.shape, depthwise=True)
    ctx.device.check_alloc(g.n * g.oh * g.ow * g.oc, ctx.attrs["T"])
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.oc * x.itemsize)
    return await ctx.compute(_depthwise_forward, xp, g, x, w, fmt, x.dtype, cost=cost)


DepthwiseConv2dNativeBackpropInput = register_op(
    "DepthwiseConv2dNativeBackpropInput",
    inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_DEPTHWISE_ATTRS),
    shape_fn=_backprop_input_shape,
)


def _depthwise_backprop_input(xp, g: _Geom, w, dy, fmt, out_dtype):
    ct = compute_dtype(dy.dtype)
    w = w.astype(ct, copy=False)
    m = w.shape[3]
    dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False).reshape(g.n, g.oh, g.ow, g.c, m)
    blocks = xp.empty((g.kh * g.kw, g.n, g.oh, g.ow, g.c), dtype=ct)
    for i in range(g.kh):
        for j in range(g.kw):
            blocks[i * g.kw + j] = xp.einsum("nhwcm,cm->nhwc", dy, w[i, j])
    dxp = g.padded_zeros(xp, g.n, ct)
    g.col2im_into(dxp, blocks)
    dx = g.crop(dxp)
    return from_nhwc(xp, xp.ascontiguousarray(dx), fmt).astype(out_dtype, copy=False)


@DepthwiseConv2dNativeBackpropInput.kernel(host_memory=("input_sizes",))
async def _depthwise_backprop_input_kernel(ctx, input_sizes, w, dy):
    xp = ctx.xp
    w, dy = xp.asarray(w), xp.asarray(dy)
    sizes = _sizes(input_sizes, "input_sizes")
    _check_rank4(w, "filter")
    _check_rank4(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    ctx.device.check_alloc(int(np.prod(sizes)), ctx.attrs["T"])
    g = _Geom(ctx.attrs, nhwc_dims(sizes, fmt), w.shape, depthwise=True)
    _check_out_backprop(g, nhwc_dims(dy.shape, fmt))
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.oc * dy.itemsize)
    return await ctx.compute(_depthwise_backprop_input, xp, g, w, dy, fmt, dy.dtype, cost=cost)


DepthwiseConv2dNativeBackpropFilter = register_op(
    "DepthwiseConv2dNativeBackpropFilter",
    inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_DEPTHWISE_ATTRS),
    shape_fn=_backprop_filter_shape,
)


def _depthwise_backprop_filter(xp, g: _Geom, x, dy, m, fmt, out_dtype):
    ct = compute_dtype(dy.dtype)
    win = g.windows(xp, to_nhwc(xp, x, fmt).astype(ct, copy=False))
    dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False).reshape(-1, g.c, m)
    dw = xp.empty((g.kh, g.kw, g.c, m), dtype=ct)
    for i in range(g.kh):
        for j in range(g.kw):
            xs = win[:, :, :, i, j, :].reshape(-1, g.c)
            dw[i, j] = xp.einsum("pc,pcm->cm", xs, dy)
    return dw.astype(out_dtype, copy=False)


@DepthwiseConv2dNativeBackpropFilter.kernel(host_memory=("filter_sizes",))
async def _depthwise_backprop_filter_kernel(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    x, dy = xp.asarray(x), xp.asarray(dy)
    sizes = _sizes(filter_sizes, "filter_sizes")
    _check_rank4(x, "input")
    _check_rank4(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    g = _Geom(ctx.attrs, nhwc_dims(x.shape, fmt), sizes, depthwise=True)
    _check_out_backprop(g, nhwc_dims(dy.shape, fmt))
    cost = float(g.n * g.oh * g.ow * g.kh * g.kw * g.oc * dy.itemsize)
    return await ctx.compute(
        _depthwise_backprop_filter, xp, g, x, dy, sizes[3], fmt, dy.dtype, cost=cost
    )


def _depthwise_attrs(op) -> dict:
    return {k: op._attr(k) for k in _DEPTHWISE_ATTRS if k != "T"}


@DepthwiseConv2dNative.gradient
def _depthwise_grad(op, grad):
    attrs = _depthwise_attrs(op)
    x, w = op.inputs
    dx = ops.apply_op(
        "DepthwiseConv2dNativeBackpropInput", [_shape_of(x), w, grad], attrs
    ).outputs[0]
    dw = ops.apply_op(
        "DepthwiseConv2dNativeBackpropFilter", [x, _shape_of(w), grad], attrs
    ).outputs[0]
    return [dx, dw]


@DepthwiseConv2dNativeBackpropInput.gradient
def _depthwise_backprop_input_grad(op, grad):
    attrs = _depthwise_attrs(op)
    _, w, dy = op.inputs
    dw = ops.apply_op(
        "DepthwiseConv2dNativeBackpropFilter", [grad, _shape_of(w), dy], attrs
    ).outputs[0]
    ddy = ops.apply_op("DepthwiseConv2dNative", [grad, w], attrs).outputs[0]
    return [None, dw, ddy]


@DepthwiseConv2dNativeBackpropFilter.gradient
def _depthwise_backprop_filter_grad(op, grad):
    attrs = _depthwise_attrs(op)
    x, _, dy = op.inputs
    dx = ops.apply_op(
        "DepthwiseConv2dNativeBackpropInput", [_shape_of(x), grad, dy], attrs
    ).outputs[0]
    ddy = ops.apply_op("DepthwiseConv2dNative", [x, grad], attrs).outputs[0]
    return [dx, None, ddy]


def _depthwise_builder_attrs(strides, padding, data_format, dilations) -> dict:
    fmt = _fmt(data_format)
    return {
        "strides": four(strides, "strides", fmt),
        "data_format": fmt,
        "dilations": four(dilations, "dilations", fmt),
        **_padding_attrs(padding, fmt),
    }


def depthwise_conv2d_native(
    input,  # noqa: A002 - TF's name
    filter,  # noqa: A002 - TF's name
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    name=None,
):
    """Depthwise 2-D convolution: `filter` [KH, KW, C, M] gives C*M output channels.

    Raises:
      ValueError: unequal row and column strides, a bad padding or data_format.
    """
    attrs = _depthwise_builder_attrs(strides, padding, data_format, dilations)
    return ops.apply_op("DepthwiseConv2dNative", [input, filter], attrs, name=name).outputs[0]


def depthwise_conv2d_native_backprop_input(
    input_sizes,
    filter,  # noqa: A002 - TF's name
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    name=None,
):
    """The gradient of depthwise_conv2d_native with respect to its input."""
    attrs = _depthwise_builder_attrs(strides, padding, data_format, dilations)
    inputs = [input_sizes, filter, out_backprop]
    return ops.apply_op("DepthwiseConv2dNativeBackpropInput", inputs, attrs, name=name).outputs[0]


def depthwise_conv2d_native_backprop_filter(
    input,  # noqa: A002 - TF's name
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    name=None,
):
    """The gradient of depthwise_conv2d_native with respect to its filter."""
    attrs = _depthwise_builder_attrs(strides, padding, data_format, dilations)
    inputs = [input, filter_sizes, out_backprop]
    return ops.apply_op("DepthwiseConv2dNativeBackpropFilter", inputs, attrs, name=name).outputs[0]


def depthwise_conv2d(
    input,  # noqa: A002 - TF's name
    filter,  # noqa: A002 - TF's name
    strides,
    padding,
    rate=None,
    name=None,
    data_format=None,
    dilations=None,
):
    """`tf.nn.depthwise_conv2d`: `rate` (TF1) or `dilations` sets the atrous rate.

    As TF1, a rate other than 1 moves the input's spatial dims into the batch
    (SpaceToBatchND), runs DepthwiseConv2dNative with `strides` there and moves the
    result back; strides other than 1 with such a rate only warn (UserWarning) and
    give TF's numbers, which are not those of a strided atrous convolution.

    Raises:
      ValueError: both rate and dilations given, or a bad padding or data_format.
    """
    rate = _pick(rate, "rate", dilations, "dilations")
    with ops.name_scope(name, "depthwise", [input, filter]) as scope:
        input = ops.convert_to_tensor(input, name="tensor_in")  # noqa: A001
        filter = ops.convert_to_tensor(filter, name="filter_in")  # noqa: A001
        rate = atrous_rate(rate)
        warn_strided_atrous(rate, strides)

        def _native(x, _, pad):
            return depthwise_conv2d_native(x, filter, strides, pad, data_format, name=scope)

        return space_ops.with_space_to_batch(
            input,
            rate,
            padding,
            _native,
            filter_shape=array_ops.shape(filter),
            data_format=data_format,
        )


def atrous_rate(rate) -> list:
    """TF1's `rate` argument as a list: None is [1, 1], an int r is [r, r]."""
    if rate is None:
        return [1, 1]
    return [int(rate)] * 2 if isinstance(rate, int) else rate


def warn_strided_atrous(rate, strides) -> None:
    """TF 2.21 only warns for strides with an atrous rate (and then runs the strided
    native op on the space-to-batch'ed input)."""
    steps = [strides] if isinstance(strides, int) else strides
    if any(r > 1 for r in rate) and any(s != 1 for s in steps):
        warnings.warn(
            "When dilation rate is greater than 1, then all values of strides must be 1. "
            f"Received: `dilation rate` {rate} and `strides` {strides}",
            stacklevel=3,
        )
