"""Pooling: MaxPool, AvgPool, their backprops (MaxPoolGrad, AvgPoolGrad, MaxPoolGradGrad),
gradients and the TF1 builders `max_pool` / `avg_pool` (`af.nn`).

Each kernel loops over the KH*KW window offsets and does one vectorised pass over a
strided slice of the padded input per offset (fast: no per-window Python work and no
`np.add.at`).  Geometry is conv_ops' `window_geometry` (TF's SAME/VALID rules).  NHWC
MaxPool over side-by-side windows (the usual 2x2 stride 2) reduces whole window rows
first; MaxPoolGrad keeps its per-offset masks in per-thread scratch, and for NHWC windows
that tile the input exactly (2x2 stride 2 on even sizes) views x as [N*OH, KH, OW, KW, C]:
one comparison pass with y, the first-maximum fix on the masks, one pass spreading dy.

TF's semantics kept here:
- MaxPool pads with -inf (the dtype's lowest value for integers), so padding never wins.
- MaxPoolGrad routes each output gradient to the first maximum in its window, scanning
  rows then columns, and sums where windows overlap.
- AvgPool divides by the number of real (unpadded) elements in each window.
"""

from __future__ import annotations

import copy

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, cnn_jit
from asyncflow.ops.conv_ops import (
    _each_part,
    _parts,
    _work,
    four,
    from_nhwc,
    from_nhwc_dims,
    nhwc_dims,
    pad_spatial,
    spatial,
    static_out_size,
    to_nhwc,
    window_geometry,
    window_slice,
)
from asyncflow.registry import REAL, REQUIRED, TypeConstraint, register_op

__all__ = ["max_pool", "avg_pool", "max_pool2d", "avg_pool2d"]

_POOL_FLOATS = TypeConstraint(["float16", "bfloat16", "float32", "float64"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _check_pool_attrs(attrs) -> None:
    """What TF's shape function rejects (ValueError at build time).  Window sizes and
    pooling over the batch or depth are the kernel's to check (`_run_checks`), as in TF."""
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"Invalid data format: {fmt}")
    for key in ("ksize", "strides"):
        if len(list(attrs[key])) != 4:
            raise ValueError(f"Sliding window {key} field must specify 4 dimensions")
        for v in attrs[key]:  # TF's list(int) attrs are int32
            if not -(2**31) <= v < 2**31:
                raise ValueError(f"Attr {key} has value {v} out of range for an int32")
    for v in attrs["strides"]:
        if v < 1:
            raise ValueError(f"Stride must be > 0, but got {v}")
    padding = attrs["padding"]
    if padding not in ("SAME", "VALID", "EXPLICIT") or (
        padding == "EXPLICIT" and "explicit_paddings" not in attrs
    ):
        raise ValueError(f"padding must be SAME or VALID, got {padding!r}")
    explicit = list(attrs.get("explicit_paddings") or [])
    if padding == "EXPLICIT":
        if len(explicit) != 8:
            raise ValueError("explicit_paddings attribute must contain 8 values")
        if any(v < 0 for v in explicit):
            raise ValueError("All elements of explicit_paddings must be nonnegative")
        bd = (0, 1, 2, 3) if fmt == "NCHW" else (0, 1, 6, 7)
        if any(explicit[i] for i in bd):
            raise ValueError(
                "Nonzero explicit padding in the batch or depth dimensions is not supported"
            )
    elif explicit:
        raise ValueError("explicit_paddings should be empty unless padding is EXPLICIT")


def _run_checks(attrs, depthwise_ok: bool) -> int:
    """The kernel's checks (TF's PoolParameters); returns the depth window (1 unless a
    depthwise MaxPool).

    Raises InvalidArgumentError for a window size below 1 and UnimplementedError for
    pooling over the batch, or over the depth where TF does not implement it.
    """
    k, s = list(attrs["ksize"]), list(attrs["strides"])
    if any(v < 1 for v in k):
        raise _invalid(
            "Sliding window ksize must be positive. The specified or inferred ksize is: "
            + ",".join(str(v) for v in k)
        )
    if k[0] != 1 or s[0] != 1:
        raise errors.UnimplementedError(
            None, None, "Pooling is not yet supported on the batch dimension."
        )
    d = 1 if attrs["data_format"] == "NCHW" else 3
    if attrs.get("padding") == "EXPLICIT":  # each side's padding inside the window
        pads = list(attrs["explicit_paddings"])
        for i in range(4):
            for side, pad in (("Left", pads[2 * i]), ("Right", pads[2 * i + 1])):
                if pad >= k[i] and (pad or k[i] != 1):
                    raise _invalid(
                        f"{side} padding {pad} needs to be smaller than the window size {k[i]}"
                    )
    if k[d] == 1 and s[d] == 1:
        return 1
    if not depthwise_ok:
        raise errors.UnimplementedError(
            None, None, "Non-spatial pooling is not yet supported. Volunteers? :)"
        )
    if spatial(k, attrs["data_format"]) != (1, 1) or spatial(s, attrs["data_format"]) != (1, 1):
        raise errors.UnimplementedError(
            None, None,
            "MaxPooling supports exactly one of pooling across depth or pooling across "
            "width/height.",
        )  # fmt: skip
    if k[d] != s[d]:
        raise errors.UnimplementedError(
            None,
            None,
            "Depthwise max pooling requires the depth window to equal the depth stride.",
        )
    return k[d]


def _depth_groups(xp, x, depth: int, fmt: str):
    """x as [N, H, W, C / depth, depth] (NHWC view)."""
    x = to_nhwc(xp, x, fmt)
    if x.shape[3] % depth:  # TF: an UnimplementedError
        raise errors.UnimplementedError(
            None,
            None,
            "Depthwise max pooling requires the depth window to evenly divide the input depth.",
        )
    return x.reshape(x.shape[:3] + (x.shape[3] // depth, depth))


def _depth_max_pool(xp, x, depth: int, fmt: str):
    return from_nhwc(xp, xp.ascontiguousarray(_depth_groups(xp, x, depth, fmt).max(axis=4)), fmt)


def _depth_max_pool_grad(xp, x, dy, depth: int, fmt: str):
    """dy to the first maximum of each depth group (as TF's depthwise MaxPoolGrad)."""
    g = _depth_groups(xp, x, depth, fmt)
    first = xp.argmax(g, axis=4)[..., None] == xp.arange(depth)
    dx = first * to_nhwc(xp, dy, fmt)[..., None]
    return from_nhwc(xp, xp.ascontiguousarray(dx.reshape(g.shape[:3] + (-1,))), fmt)


def _explicit_pads(attrs):
    """((top, bottom), (left, right)) from `explicit_paddings`, or zeros."""
    if attrs["padding"] != "EXPLICIT":
        return (0, 0), (0, 0)
    e = list(attrs["explicit_paddings"])
    h, w = (4, 6) if attrs["data_format"] == "NCHW" else (2, 4)
    return (e[h], e[h + 1]), (e[w], e[w + 1])


class _Pool:
    """One pooling's geometry in NHWC terms."""

    __slots__ = ("n", "h", "w", "c", "kh", "kw", "sh", "sw", "oh", "ow", "pad")

    def __init__(self, attrs, in_nhwc):
        fmt = attrs["data_format"]
        self.n, self.h, self.w, self.c = (int(d) for d in in_nhwc)
        self.kh, self.kw = spatial(attrs["ksize"], fmt)
        self.sh, self.sw = spatial(attrs["strides"], fmt)
        pad_h, pad_w = _explicit_pads(attrs)
        self.oh, lo_h, hi_h = window_geometry(self.h, self.kh, self.sh, 1, attrs["padding"], pad_h)
        self.ow, lo_w, hi_w = window_geometry(self.w, self.kw, self.sw, 1, attrs["padding"], pad_w)
        self.pad = (lo_h, hi_h, lo_w, hi_w)

    def out_nhwc(self):
        return (self.n, self.oh, self.ow, self.c)

    def tiles(self) -> bool:
        """Windows side by side without padding (2x2 stride 2 on even sizes, or VALID
        leaving a remainder): each input position is in at most one window."""
        return (self.kh, self.kw) == (self.sh, self.sw) and not any(self.pad)

    def offsets(self):
        for i in range(self.kh):
            for j in range(self.kw):
                yield i * self.kw + j, window_slice(i, j, self.oh, self.ow, self.sh, self.sw, 1, 1)

    def padded_zeros(self, xp, dtype):
        lo_h, hi_h, lo_w, hi_w = self.pad
        hp = max(self.h + lo_h + hi_h, (self.oh - 1) * self.sh + self.kh)
        wp = max(self.w + lo_w + hi_w, (self.ow - 1) * self.sw + self.kw)
        return xp.zeros((self.n, hp, wp, self.c), dtype=dtype)

    def crop(self, xpad):
        lo_h, _, lo_w, _ = self.pad
        return xpad[:, lo_h : lo_h + self.h, lo_w : lo_w + self.w, :]


def _pool_shape(op):
    attrs = {k: op._attr(k) for k in op.op_def.attrs if k != "T"}
    _check_pool_attrs(attrs)
    return _pool_shape_of(op.inputs[0].shape, attrs)


def _pool_shape_of(in_shape, attrs):
    fmt = attrs["data_format"]
    n, h, w, c = nhwc_dims(in_shape.with_rank(4).as_list(), fmt)
    kh, kw = spatial(attrs["ksize"], fmt)
    sh, sw = spatial(attrs["strides"], fmt)
    if min(attrs["ksize"]) < 1:  # the kernel raises; nothing to infer
        return [tensor_shape.unknown_shape(4)]
    kd = attrs["ksize"][1 if fmt == "NCHW" else 3]
    if kd > 1 and c is not None:
        c //= kd
    pad_h, pad_w = _explicit_pads(attrs)
    for size, k in ((h, kh), (w, kw)):
        if attrs["padding"] == "VALID" and size is not None and size < k:
            raise ValueError(f"Negative dimension size caused by subtracting {k} from {size}")
    oh = static_out_size(h, kh, sh, 1, attrs["padding"], pad_h)
    ow = static_out_size(w, kw, sw, 1, attrs["padding"], pad_w)
    return [tensor_shape.TensorShape(from_nhwc_dims([n, oh, ow, c], fmt))]


_POOL_ATTRS = {"ksize": REQUIRED, "strides": REQUIRED, "padding": REQUIRED, "data_format": "NHWC"}
# TF's attr order (gen_nn_ops.max_pool_grad takes explicit_paddings before data_format).
_MAX_POOL_ATTRS = {
    "ksize": REQUIRED,
    "strides": REQUIRED,
    "padding": REQUIRED,
    "explicit_paddings": [],
    "data_format": "NHWC",
}


def _lowest(dtype):
    dtype = np.dtype(dtype)
    # bfloat16 (ml_dtypes) has numpy kind "V": it is a float with an -inf too.
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _input4(xp, x, what="input"):
    x = xp.asarray(x)
    if x.ndim != 4:
        raise _invalid(f"{what} must be 4-dimensional")
    return x


# -- MaxPool -------------------------------------------------------------------------------

MaxPool = register_op(
    "MaxPool",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": REAL, **_MAX_POOL_ATTRS},
    shape_fn=_pool_shape,
)


def _image_parts(xp, x):
    """Fixed ranges of x's images (NHWC) for the budget's threads to share: each image's
    windows are its own, so every part computes exactly what the whole would."""
    n = x.shape[0]
    return _parts(xp, n, x.nbytes // max(n, 1), block_bytes=1 << 62)


def _max_pool(xp, p: _Pool, x, fmt):
    if p.tiles() and fmt == "NHWC" and p.oh and p.ow and p.c:
        out = xp.empty(p.out_nhwc(), dtype=x.dtype)
        jit = _jit_2x2(xp, p, x)
        if jit is not None:
            pool = jit["_pool_2x2"]
            shape6 = (p.oh, 2, p.ow, 2, p.c)
            part = lambda s, e: pool(x[s:e].reshape(e - s, *shape6), out[s:e])  # noqa: E731
        else:
            part = lambda s, e: _max_pool_tiles(xp, p, x[s:e], out[s:e])  # noqa: E731
        _each_part(xp, _image_parts(xp, x), part)
        return out
    xpad = pad_spatial(xp, to_nhwc(xp, x, fmt), *p.pad, value=_lowest(x.dtype))
    out = None
    for _, idx in p.offsets():
        out = xpad[idx].copy() if out is None else xp.maximum(out, xpad[idx], out=out)
    return from_nhwc(xp, out, fmt)


def _jit_2x2(xp, p: _Pool, *arrays):
    """cnn_jit's compiled loops where they take this pooling: 2x2 windows at stride
    2 tiling an even NHWC input exactly, host arrays they were compiled for; else None."""
    if (
        xp is not np
        or (p.kh, p.kw, p.sh, p.sw) != (2, 2, 2, 2)
        or (p.h, p.w) != (2 * p.oh, 2 * p.ow)
        or any(p.pad)
    ):
        return None
    jit = cnn_jit.loops()
    return jit if jit is not None and cnn_jit.usable(*arrays) else None


def _max_pool_tiles(xp, p: _Pool, x, out):
    """MaxPool of side-by-side windows into `out`: the max over window rows first, each a
    pass whose contiguous runs are whole rows, then over the KW columns of what is left.
    (x may be some of the images p describes.)"""
    _, oh, ow, c = p.out_nhwc()
    n = x.shape[0]
    rows = x[:, : oh * p.kh, : ow * p.kw].reshape(n, oh, p.kh, ow * p.kw * c)
    if p.kh > 1:
        best = _work(xp, "pool.rows", (n, oh, ow * p.kw * c), x.dtype)
        xp.maximum(rows[:, :, 0], rows[:, :, 1], out=best)
        for i in range(2, p.kh):
            xp.maximum(best, rows[:, :, i], out=best)
    else:
        best = rows[:, :, 0]
    best = best.reshape(n, oh, ow, p.kw, c)
    if p.kw == 1:  # a copy even when best is x itself (1x1 windows): outputs are new
        xp.copyto(out, best[:, :, :, 0])
        return
    xp.maximum(best[:, :, :, 0], best[:, :, :, 1], out=out)
    for j in range(2, p.kw):
        xp.maximum(out, best[:, :, :, j], out=out)


@MaxPool.kernel()
async def _max_pool_kernel(ctx, x):
    return await _max_pool_run(ctx, ctx.attrs, x)


async def _max_pool_run(ctx, attrs, x):
    xp = ctx.xp
    x = _input4(xp, x)
    fmt = attrs["data_format"]
    depth = _run_checks(attrs, depthwise_ok=True)
    if depth > 1:
        return await ctx.compute(_depth_max_pool, xp, x, depth, fmt)
    p = _Pool(attrs, nhwc_dims(x.shape, fmt))
    return await ctx.compute(_max_pool, xp, p, x, fmt, cost=float(x.nbytes * p.kh * p.kw))


def _argmax_offsets(xp, p: _Pool, x):
    """For each output, the window offset (i * KW + j) of its first maximum, and the max."""
    xpad = pad_spatial(xp, x, *p.pad, value=_lowest(x.dtype))
    best = arg = None
    for k, idx in p.offsets():
        v = xpad[idx]
        if best is None:
            best, arg = v.copy(), xp.zeros(v.shape, dtype=np.int32)
            continue
        better = v > best
        best = xp.where(better, v, best)
        arg[better] = k
    return arg, best


def _max_pool_grad(xp, p: _Pool, x, y, dy, fmt, relu: bool = False):
    """Route dy to the first input equal to its window's max (y), scanning the window in
    row-major order; `claimed` marks windows already served.  With `relu`, dy is first
    masked by y > 0 (ReluGrad of the pool's input fused in: see nn_ops)."""
    x, y, dy = to_nhwc(xp, x, fmt), to_nhwc(xp, y, fmt), to_nhwc(xp, dy, fmt)
    tiles = (
        fmt == "NHWC"
        and (p.kh, p.kw) == (p.sh, p.sw)
        and (p.h, p.w) == (p.oh * p.kh, p.ow * p.kw)
        and min(p.n, p.oh, p.ow, p.c) > 0
    )
    if tiles and xp is np and dy.dtype.kind == "f" and x.dtype == y.dtype == dy.dtype:
        dx = np.empty(x.shape, dtype=dy.dtype)
        jit = _jit_2x2(xp, p, x, y, dy)
        if jit is not None:
            part = lambda s, e: _max_pool_grad_jit(jit, p, x, y, dy, relu, dx, s, e)  # noqa: E731
        else:
            part = lambda s, e: _max_pool_grad_part(p, x, y, dy, relu, dx, s, e)  # noqa: E731
        _each_part(xp, _image_parts(xp, x), part)
        return dx
    if relu:
        dy = dy * (y > 0)  # TF's ReluGrad: gradients * (features > 0)
    if tiles:
        return _max_pool_grad_tiles(xp, p, x, y, dy)
    xpad = pad_spatial(xp, x, *p.pad, value=_lowest(x.dtype))
    # Windows that tile the input exactly (2x2 stride 2 on even sizes) each write their
    # own positions once: no zero fill, no read-modify-write.
    tiles = (p.kh, p.kw) == (p.sh, p.sw) and (p.h, p.w) == (p.oh * p.kh, p.ow * p.kw)
    dxp = xp.empty(x.shape, dtype=dy.dtype) if tiles else p.padded_zeros(xp, dy.dtype)
    # dy * hit is exact when dy is finite (x * 1 == x, x * 0 == 0) and several times
    # faster than where(hit, dy, 0); inf or nan in dy must not leak into other positions.
    # (On a device: where() always; reading dy's finiteness would wait for the device.)
    finite = xp is np and bool(xp.isfinite(dy).all())
    zero = dy.dtype.type(0)
    # scratch (reused across calls: fresh pages cost more than these passes)
    hit = _work(xp, "pool.hit", y.shape, np.bool_)
    unclaimed = _work(xp, "pool.free", y.shape, np.bool_)
    part = None if tiles else _work(xp, "pool.part", y.shape, dy.dtype)
    last = p.kh * p.kw - 1
    # A window whose max is NaN equals no input: TF routes its gradient to the window's
    # first position.
    nan_y = xp.isnan(y) if y.dtype.kind == "f" else None
    for k, idx in p.offsets():
        xp.equal(xpad[idx], y, out=hit)
        if k:
            xp.logical_and(hit, unclaimed, out=hit)
        elif nan_y is not None:
            xp.logical_or(hit, nan_y, out=hit)
        if tiles and finite:
            xp.multiply(dy, hit, out=dxp[idx])
        elif tiles:
            dxp[idx] = xp.where(hit, dy, zero)
        else:
            if finite:
                xp.multiply(dy, hit, out=part)
            else:
                part[...] = xp.where(hit, dy, zero)
            dxp[idx] += part
        if k != last:
            if k == 0:
                xp.logical_not(hit, out=unclaimed)
            else:
                xp.greater(unclaimed, hit, out=unclaimed)  # unclaimed and not hit
    return from_nhwc(xp, xp.ascontiguousarray(p.crop(dxp)), fmt)


def _max_pool_grad_jit(jit, p: _Pool, x, y, dy, relu: bool, dx, s: int, e: int) -> None:
    """dx[s:e] for images [s, e) by cnn_jit's loops: each window's first maximum as
    a code, then dy (with the ReLU, dy * (y > 0)) spread by it."""
    shape6 = (e - s, p.oh, 2, p.ow, 2, p.c)
    y, dy = y[s:e], dy[s:e]
    code = _work(np, "pool.code", y.shape, np.uint8)
    jit["_first_max_2x2"](x[s:e].reshape(shape6), y, code)
    if relu:
        jit["_spread_relu_2x2"](code, dy, y, dx[s:e].reshape(shape6))
    else:
        jit["_spread_2x2"](code, dy, dx[s:e].reshape(shape6))


def first_max_code(x, y):
    """For 2x2 stride-2 windows tiling NHWC x (float, even H and W) with maxima y: each
    window's first position equal to its max in row-major order (r * 2 + s), 0 for a
    NaN max, 4 for none, as uint8 [N, H / 2, W / 2, C] (cnn_jit's `_first_max_2x2`)."""
    n, oh, ow, c = y.shape
    x6 = x.reshape(n, oh, 2, ow, 2, c)
    code = np.empty(y.shape, np.uint8)
    jit = cnn_jit.loops()
    if jit is not None and cnn_jit.usable(x, y):
        _each_part(
            np, _image_parts(np, x), lambda s, e: jit["_first_max_2x2"](x6[s:e], y[s:e], code[s:e])
        )
        return code
    code.fill(4)
    for q in (3, 2, 1, 0):
        code[x6[:, :, q // 2, :, q % 2] == y] = q
    code[np.isnan(y)] = 0
    return code


def spread_relu_by_code(code, y, dy):
    """MaxPoolGrad then ReluGrad of 2x2 stride-2 windows from `first_max_code`'s code:
    dy * (y > 0) (TF's ReluGrad) at each window's coded position, +0 elsewhere
    (cnn_jit's `_spread_relu_2x2`), as NHWC [N, 2 OH, 2 OW, C]."""
    n, oh, ow, c = y.shape
    dx = np.empty((n, 2 * oh, 2 * ow, c), dy.dtype)
    dx6 = dx.reshape(n, oh, 2, ow, 2, c)
    jit = cnn_jit.loops()
    if jit is not None and cnn_jit.usable(y, dy, dx):
        spread = jit["_spread_relu_2x2"]
        part = lambda s, e: spread(code[s:e], dy[s:e], y[s:e], dx6[s:e])  # noqa: E731
        _each_part(np, _image_parts(np, dx), part)
        return dx
    g = dy * (y > 0)
    zero = dy.dtype.type(0)
    for q in range(4):
        dx6[:, :, q // 2, :, q % 2] = np.where(code == q, g, zero)
    return dx


def _max_pool_grad_part(p: _Pool, x, y, dy, relu: bool, dx, s: int, e: int) -> None:
    """dx[s:e] of windows that tile NHWC x exactly, for images [s, e): the single-maximum
    pass, or the general one where that part has ties (windows never span images)."""
    sub = copy.copy(p)
    sub.n = e - s
    x, y, dy = x[s:e], y[s:e], dy[s:e]
    if _max_pool_grad_unique(sub, x, y, dy, relu, dx[s:e]) is None:
        if relu:
            dy = dy * (y > 0)  # TF's ReluGrad: gradients * (features > 0)
        dx[s:e] = _max_pool_grad_tiles(np, sub, x, y, dy)


def _max_pool_grad_unique(p: _Pool, x, y, dy, relu: bool, dx):
    """MaxPoolGrad of windows that tile NHWC x exactly, into `dx`, when every window that
    matters has a single maximum (the usual case; returns dx); None otherwise (the caller
    resolves ties).

    y and dy are repeated KW times along W, so that each window row of x and of dx is one
    contiguous run (W * C values) compared with, and multiplied by, a contiguous run: two
    passes with long inner loops instead of strided [.., KW, C] ones.  Every window holds
    at least one input equal to its maximum unless that is NaN, so as many hits as windows
    means one each.  With `relu` (dy masked by y > 0 first), windows whose max is not
    positive get no gradient whatever their ties: their y is replaced by NaN, which
    equals nothing, and only the positive windows are counted."""
    n, oh, ow, c = p.out_nhwc()
    kh, kw = p.kh, p.kw
    if not bool(np.isfinite(dy).all()):
        return None  # inf * 0 must not leak into other positions: the general path
    want = y.size
    if relu:
        keep = y > 0
        want = int(np.count_nonzero(keep))
        y = np.where(keep, y, y.dtype.type(np.nan))
    elif bool(np.isnan(y).any()):
        return None
    runs = (n * oh, kh, ow * kw * c)
    rep = _work(np, "pool.rep", (n * oh, ow, kw, c), y.dtype)  # y, then dy, repeated
    np.copyto(rep, y.reshape(n * oh, ow, 1, c))
    hit = _work(np, "pool.eq", runs, np.bool_)
    np.equal(x.reshape(runs), rep.reshape(n * oh, 1, -1), out=hit)
    if int(np.count_nonzero(hit)) != want:
        return None  # ties
    np.copyto(rep, dy.reshape(n * oh, ow, 1, c))
    np.multiply(rep.reshape(n * oh, 1, -1), hit, out=dx.reshape(runs))  # exact: finite dy
    return dx


def _max_pool_grad_tiles(xp, p: _Pool, x, y, dy):
    """MaxPoolGrad of windows that tile NHWC x exactly: x viewed (no copy) as [N * OH, KH,
    OW, KW, C] and compared with y in one pass, the first maximum of each window kept
    (row-major window order, as TF), and dy spread onto the kept positions in one more."""
    n, oh, ow, c = p.out_nhwc()
    kh, kw = p.kh, p.kw
    shape = (n * oh, kh, ow, kw, c)
    hit = _work(xp, "pool.eq", shape, np.bool_)
    xp.equal(x.reshape(shape), y.reshape(n * oh, 1, ow, 1, c), out=hit)
    if y.dtype.kind == "f":  # a NaN max: the window's first position (as TF)
        first = hit[:, 0, :, 0]
        xp.logical_or(first, xp.isnan(y).reshape(n * oh, ow, c), out=first)
    if kh * kw > 1:
        seen = _work(xp, "pool.seen", (n * oh, ow, c), np.bool_)
        last = kh * kw - 1
        for k in range(kh * kw):
            m = hit[:, k // kw, :, k % kw]
            if k == 0:
                xp.copyto(seen, m)
                continue
            xp.greater(m, seen, out=m)  # a maximum, and none earlier in its window
            if k != last:
                xp.logical_or(seen, m, out=seen)
    d = dy.reshape(n * oh, 1, ow, 1, c)
    if xp is not np:  # (a device: no host read of dy's finiteness, which would wait for it)
        return xp.where(hit, d, dy.dtype.type(0)).reshape(x.shape)
    dx = xp.empty(x.shape, dtype=dy.dtype)
    if bool(np.isfinite(dy).all()):  # dy * hit is exact for finite dy
        xp.multiply(d, hit, out=dx.reshape(shape))
    else:  # inf or nan must not leak into other positions
        dx.reshape(shape)[...] = xp.where(hit, d, dy.dtype.type(0))
    return dx


MaxPoolGrad = register_op(
    "MaxPoolGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs={"T": REAL, **_MAX_POOL_ATTRS},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank(4)],
)


@MaxPoolGrad.kernel()
async def _max_pool_grad_kernel(ctx, x, y, dy):
    return await _max_pool_grad_impl(ctx, x, y, dy, False)


async def max_pool_grad_relu(ctx, x, y, dy):
    """MaxPoolGrad, then ReluGrad(., x) of its own input x (nn_ops' graph pass): a
    gradient only ever lands where x equals its window's maximum y, so masking by x > 0
    afterwards is masking dy by y > 0 before, on the pooled tensor."""
    return await _max_pool_grad_impl(ctx, x, y, dy, True)


async def _max_pool_grad_impl(ctx, x, y, dy, relu: bool, attrs=None):
    xp = ctx.xp
    attrs = ctx.attrs if attrs is None else attrs
    x, y, dy = _input4(xp, x, "orig_input"), _input4(xp, y, "orig_output"), _input4(xp, dy, "grad")
    fmt = attrs["data_format"]
    depth = _run_checks(attrs, depthwise_ok=True)
    if depth > 1:
        if relu:
            dy = dy * (y > 0)
        return await ctx.compute(_depth_max_pool_grad, xp, x, dy, depth, fmt)
    p = _Pool(attrs, nhwc_dims(x.shape, fmt))
    want = from_nhwc_dims(list(p.out_nhwc()), fmt)
    for name, t in (("orig_output", y), ("grad", dy)):
        if list(t.shape) != want:
            raise _invalid(
                f"Expected {name} shape to be {_shape_str(want)}, but got {_shape_str(t.shape)}"
            )
    cost = float(x.nbytes * p.kh * p.kw)
    return await ctx.compute(_max_pool_grad, xp, p, x, y, dy, fmt, relu, cost=cost)


def _max_pool_grad_grad(xp, p: _Pool, x, ddx, fmt):
    """Gradient of MaxPoolGrad w.r.t. its `grad` input: ddx read at each window's argmax."""
    x, ddx = to_nhwc(xp, x, fmt), to_nhwc(xp, ddx, fmt)
    arg, _ = _argmax_offsets(xp, p, x)
    ddxp = pad_spatial(xp, ddx, *p.pad)
    out = xp.zeros(p.out_nhwc(), dtype=ddx.dtype)
    for k, idx in p.offsets():
        out = xp.where(arg == k, ddxp[idx], out)
    return from_nhwc(xp, out, fmt)


MaxPoolGradGrad = register_op(
    "MaxPoolGradGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs={"T": REAL, **_MAX_POOL_ATTRS},
    shape_fn=lambda op: [op.inputs[1].shape.with_rank(4)],
)


@MaxPoolGradGrad.kernel()
async def _max_pool_grad_grad_kernel(ctx, x, y, ddx):
    return await _max_pool_grad_grad_impl(ctx, x, ddx, ctx.attrs)


async def _max_pool_grad_grad_impl(ctx, x, ddx, attrs):
    xp = ctx.xp
    x, ddx = _input4(xp, x, "orig_input"), _input4(xp, ddx, "grad")
    if x.shape != ddx.shape:
        raise _invalid(
            f"grad must have the shape of orig_input: {_shape_str(ddx.shape)} vs "
            f"{_shape_str(x.shape)}"
        )
    fmt = attrs["data_format"]
    _run_checks(attrs, depthwise_ok=False)
    p = _Pool(attrs, nhwc_dims(x.shape, fmt))
    cost = float(x.nbytes * p.kh * p.kw)
    return await ctx.compute(_max_pool_grad_grad, xp, p, x, ddx, fmt, cost=cost)


def _pool_attrs(op) -> dict:
    return {k: op._attr(k) for k in op.op_def.attrs if k != "T"}


@MaxPool.gradient
def _max_pool_grad_fn(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    return ops.apply_op("MaxPoolGrad", [x, y, grad], _pool_attrs(op)).outputs[0]


@MaxPoolGrad.gradient
def _max_pool_grad_grad_fn(op, grad):
    x, y, _ = op.inputs
    ddy = ops.apply_op("MaxPoolGradGrad", [x, y, grad], _pool_attrs(op)).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), ddy]


@MaxPoolGradGrad.gradient
def _max_pool_grad_grad_grad_fn(op, grad):
    x, y, _ = op.inputs
    dgrad = ops.apply_op("MaxPoolGrad", [x, y, grad], _pool_attrs(op)).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), dgrad]


# -- MaxPoolV2: ksize and strides as tensors ----------------------------------------------


def _v2_attrs(op_or_attrs, ksize, strides) -> dict:
    get = op_or_attrs._attr if hasattr(op_or_attrs, "_attr") else op_or_attrs.__getitem__
    return {
        "ksize": [int(v) for v in np.asarray(ksize).reshape(-1)],
        "strides": [int(v) for v in np.asarray(strides).reshape(-1)],
        "padding": get("padding"),
        "data_format": get("data_format"),
    }


def _max_pool_v2_shape(op):
    if op._attr("padding") not in ("SAME", "VALID"):
        raise ValueError(
            f"Attr 'padding' of 'MaxPoolV2' Op passed string '{op._attr('padding')}' not in: "
            '"SAME", "VALID".'
        )
    ksize, strides = (ops.constant_value(t) for t in op.inputs[1:3])
    for t in op.inputs[1:3]:
        t.shape.with_rank(1)
    if ksize is None or strides is None:
        return [op.inputs[0].shape.with_rank(4) and tensor_shape.unknown_shape(4)]
    attrs = _v2_attrs(op, ksize, strides)
    _check_pool_attrs(attrs)
    return _pool_shape_of(op.inputs[0].shape, attrs)


_V2_ATTRS = {"T": REAL, "padding": REQUIRED, "data_format": "NHWC"}
MaxPoolV2 = register_op(
    "MaxPoolV2",
    inputs=["input: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs=_V2_ATTRS,
    shape_fn=_max_pool_v2_shape,
)
MaxPoolGradV2 = register_op(
    "MaxPoolGradV2",
    inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs=_V2_ATTRS,
    shape_fn=lambda op: [op.inputs[0].shape.with_rank(4)],
)


def _checked_v2_attrs(ctx, ksize, strides) -> dict:
    attrs = _v2_attrs(ctx.attrs, np.asarray(ksize), np.asarray(strides))  # host memory
    for key in ("ksize", "strides"):
        if len(attrs[key]) != 4:
            raise _invalid(f"Sliding window {key} field must specify 4 dimensions")
    if min(attrs["strides"]) < 1:
        raise _invalid(f"Stride must be > 0, but got {min(attrs['strides'])}")
    return attrs


@MaxPoolV2.kernel(host_memory=("ksize", "strides"))
async def _max_pool_v2_kernel(ctx, x, ksize, strides):
    return await _max_pool_run(ctx, _checked_v2_attrs(ctx, ksize, strides), x)


@MaxPoolGradV2.kernel(host_memory=("ksize", "strides"))
async def _max_pool_grad_v2_kernel(ctx, x, y, dy, ksize, strides):
    attrs = _checked_v2_attrs(ctx, ksize, strides)
    return await _max_pool_grad_impl(ctx, x, y, dy, False, attrs)


@MaxPoolV2.gradient
def _max_pool_v2_grad_fn(op, grad):
    x, ksize, strides = op.inputs
    attrs = {"padding": op._attr("padding"), "data_format": op._attr("data_format")}
    dx = ops.apply_op("MaxPoolGradV2", [x, op.outputs[0], grad, ksize, strides], attrs)
    return [dx.outputs[0], None, None]


MaxPoolGradGradV2 = register_op(
    "MaxPoolGradGradV2",
    inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
    outputs=["output: T"],
    attrs={"T": REAL, "padding": REQUIRED, "data_format": "NHWC"},
    shape_fn=lambda op: [op.inputs[1].shape.with_rank(4)],
)


@MaxPoolGradGradV2.kernel(host_memory=("ksize", "strides"))
async def _max_pool_grad_grad_v2_kernel(ctx, x, y, ddx, ksize, strides):
    return await _max_pool_grad_grad_impl(ctx, x, ddx, _checked_v2_attrs(ctx, ksize, strides))


def _v2_grad_attrs(op) -> dict:
    return {"padding": op._attr("padding"), "data_format": op._attr("data_format")}


@MaxPoolGradV2.gradient
def _max_pool_grad_v2_grad_fn(op, grad):
    # TF's _MaxPoolGradV2Grad: the gradient flows to `grad` only, through the window argmax.
    x, y, _, ksize, strides = op.inputs
    ddy = ops.apply_op("MaxPoolGradGradV2", [x, y, grad, ksize, strides], _v2_grad_attrs(op))
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), ddy.outputs[0], None, None]


@MaxPoolGradGradV2.gradient
def _max_pool_grad_grad_v2_grad_fn(op, grad):
    x, y, _, ksize, strides = op.inputs
    dgrad = ops.apply_op("MaxPoolGradV2", [x, y, grad, ksize, strides], _v2_grad_attrs(op))
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), dgrad.outputs[0], None, None]


# -- AvgPool -------------------------------------------------------------------------------

AvgPool = register_op(
    "AvgPool",
    inputs=["value: T"],
    outputs=["output: T"],
    attrs={"T": _POOL_FLOATS, **_POOL_ATTRS},
    shape_fn=_pool_shape,
)


def _window_counts(xp, p: _Pool, dtype):
    """[1, OH, OW, 1]: how many real input elements each window covers."""
    lo_h, _, lo_w, _ = p.pad

    def counts(out, k, s, lo, size):
        start = np.arange(out) * s - lo
        return np.minimum(start + k, size) - np.maximum(start, 0)

    ch = counts(p.oh, p.kh, p.sh, lo_h, p.h)
    cw = counts(p.ow, p.kw, p.sw, lo_w, p.w)
    return xp.asarray(np.outer(ch, cw).astype(dtype)[None, :, :, None])


def _avg_pool(xp, p: _Pool, x, fmt):
    ct = np.float32 if x.dtype.itemsize < 4 else x.dtype
    xpad = pad_spatial(xp, to_nhwc(xp, x, fmt).astype(ct, copy=False), *p.pad)
    out = xp.zeros(p.out_nhwc(), dtype=ct)
    for _, idx in p.offsets():
        out += xpad[idx]
    out /= _window_counts(xp, p, ct)
    return from_nhwc(xp, out, fmt).astype(x.dtype, copy=False)


@AvgPool.kernel()
async def _avg_pool_kernel(ctx, x):
    xp = ctx.xp
    x = _input4(xp, x)
    fmt = ctx.attrs["data_format"]
    _run_checks(ctx.attrs, depthwise_ok=False)
    p = _Pool(ctx.attrs, nhwc_dims(x.shape, fmt))
    return await ctx.compute(_avg_pool, xp, p, x, fmt, cost=float(x.nbytes * p.kh * p.kw))


AvgPoolGrad = register_op(
    "AvgPoolGrad",
    inputs=["orig_input_shape: int32", "grad: T"],
    outputs=["output: T"],
    attrs={"T": _POOL_FLOATS, **_POOL_ATTRS},
    shape_fn=lambda op: [
        ops.constant_shape(op.inputs[0]).merge_with(tensor_shape.unknown_shape(4))
    ],
)


def _avg_pool_grad(xp, p: _Pool, dy, fmt):
    out_dtype = dy.dtype
    ct = np.float32 if out_dtype.itemsize < 4 else out_dtype
    dy = to_nhwc(xp, dy, fmt).astype(ct, copy=False) / _window_counts(xp, p, ct)
    dxp = p.padded_zeros(xp, ct)
    for _, idx in p.offsets():
        dxp[idx] += dy
    return from_nhwc(xp, xp.ascontiguousarray(p.crop(dxp)), fmt).astype(out_dtype, copy=False)


def _windowed_shape(shape, attrs):
    """The forward output's shape over all four dimensions (TF checks a pooling
    backprop's grad against it); None where a size or window is not positive."""
    k, s, pad = list(attrs["ksize"]), list(attrs["strides"]), attrs["padding"]
    if any(v < 1 for v in k + s) or any(int(d) < 0 for d in shape):
        return None
    if pad == "SAME":
        return [-(-int(d) // st) for d, st in zip(shape, s, strict=True)]
    if pad == "VALID":
        return [max(0, (int(d) - kk + st) // st) for d, kk, st in zip(shape, k, s, strict=True)]
    return None


@AvgPoolGrad.kernel(host_memory=("orig_input_shape",))
async def _avg_pool_grad_kernel(ctx, shape, dy):
    xp = ctx.xp
    dy = _input4(xp, dy, "grad")
    shape = np.asarray(shape.get() if hasattr(shape, "get") else shape)
    if shape.shape != (4,):
        raise _invalid("orig_input_shape must be 1-dimensional and 4 elements")
    fmt = ctx.attrs["data_format"]
    want = _windowed_shape(shape, ctx.attrs)
    if want is not None and list(dy.shape) != want:
        raise _invalid(f"Expected grad shape to be {_shape_str(want)}, but got "
                       f"{_shape_str(dy.shape)}")  # fmt: skip
    _run_checks(ctx.attrs, depthwise_ok=False)
    ctx.device.check_alloc(int(np.prod(shape)), ctx.attrs["T"])
    p = _Pool(ctx.attrs, nhwc_dims([int(d) for d in shape], fmt))
    want = from_nhwc_dims(list(p.out_nhwc()), fmt)
    if list(dy.shape) != want:
        raise _invalid(f"Expected grad shape to be {_shape_str(want)}, got {_shape_str(dy.shape)}")
    cost = float(dy.nbytes * p.kh * p.kw)
    return await ctx.compute(_avg_pool_grad, xp, p, dy, fmt, cost=cost)


@AvgPool.gradient
def _avg_pool_grad_fn(op, grad):
    shape = array_ops.shape(op.inputs[0], out_type=dtypes.int32)
    return ops.apply_op("AvgPoolGrad", [shape, grad], _pool_attrs(op)).outputs[0]


@AvgPoolGrad.gradient
def _avg_pool_grad_grad_fn(op, grad):
    return [None, ops.apply_op("AvgPool", [grad], _pool_attrs(op)).outputs[0]]


# -- builders ------------------------------------------------------------------------------


def _explicit_attr(padding, fmt) -> list[int]:
    """TF's `convert_padding`: 4 [before, after] pairs in `fmt` order, flattened."""
    pairs = [list(p) for p in padding]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"When padding is a list, it should be of length 4 (one [before, after] pair per "
            f"dimension). Received: padding={padding}"
        )
    batch, depth = (0, 1) if fmt == "NCHW" else (0, 3)
    if pairs[batch] != [0, 0] or pairs[depth] != [0, 0]:
        raise ValueError(
            f"Padding for the batch and channel dimensions must be zero. Received: "
            f"padding={padding}"
        )
    return [int(v) for p in pairs for v in p]


def convert_padding(padding, expected_length=4):
    """TF's `nn_ops.convert_padding`: a padding argument as (padding attr,
    explicit_paddings attr): ("EXPLICIT", the pairs flattened) for a list of
    `expected_length` [before, after] pairs, (padding, []) for a string.

    Raises:
      ValueError: a list of the wrong length or with pairs of other than two ints.
    """
    if isinstance(padding, str):
        return padding, []
    pairs = [list(p) for p in padding]
    if len(pairs) != expected_length or any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"When padding is a list, it should be of length {expected_length} (one "
            f"[before, after] pair per dimension). Received: padding={padding}"
        )
    return "EXPLICIT", [int(v) for p in pairs for v in p]


def _builder(op_type, value, ksize, strides, padding, data_format, name):
    fmt = data_format or "NHWC"
    if fmt == "NCHW_VECT_C" and isinstance(padding, list | tuple):
        raise ValueError(
            f"`data_format='NCHW_VECT_C'` is not supported with explicit padding. "
            f"Received: padding={padding}"
        )
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    attrs = {
        "ksize": four(ksize, "ksize", fmt),
        "strides": four(strides, "strides", fmt),
        "data_format": fmt,
    }
    if op_type == "MaxPool" and isinstance(padding, list | tuple):
        attrs["padding"], attrs["explicit_paddings"] = "EXPLICIT", _explicit_attr(padding, fmt)
    elif not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    else:
        attrs["padding"] = padding.upper()
    return ops.apply_op(op_type, [value], attrs, name=name).outputs[0]


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """Max pooling over H and W of a 4-D `value` (ksize/strides: an int or 1, 2 or 4 ints).

    Raises:
      ValueError: a bad padding, data_format, or pooling over the batch or depth.
    """
    if input is not None:
        if value is not None:
            raise ValueError("Cannot specify both 'value' and 'input'.")
        value = input
    if 0 in four(ksize, "ksize", data_format or "NHWC"):
        raise ValueError(f"`ksize` cannot be zero. Received: ksize={ksize}")
    return _builder("MaxPool", value, ksize, strides, padding, data_format, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """Average pooling; each window is divided by the number of real (unpadded) elements.

    Raises:
      ValueError: a bad padding, data_format, or pooling over the batch or depth.
    """
    if input is not None:
        if value is not None:
            raise ValueError("Cannot specify both 'value' and 'input'.")
        value = input
    return _builder("AvgPool", value, ksize, strides, padding, data_format, name)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """`tf.nn.max_pool2d`."""
    return _builder("MaxPool", input, ksize, strides, padding, data_format, name)


avg_pool2d = avg_pool  # TF 2's compat.v1.nn.avg_pool2d is v1's avg_pool
