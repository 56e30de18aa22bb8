"""NumPy kernels for the TFLite builtin operators the interpreter runs (float32 models;
`quant_kernels` runs the quantized ones).

One table, `KERNELS`, maps a builtin operator name to `kernel(inputs, options, outputs)`
returning the list of output arrays; `inputs` holds None for an omitted optional input
(index -1). Semantics follow TFLite's reference kernels: NHWC images, OHWI conv filters,
[1, H, W, C*M] depthwise filters, [units, depth] fully-connected weights, SAME padding
with the extra pixel after, and the fused activation applied last.
"""

from __future__ import annotations

import numpy as np

from asyncflow.lite import schema


class KernelError(ValueError):
    """A TFLite operator was handed inputs it cannot run on."""


# Invariant: a kernel checks any array it builds from a size the file chose (padding,
# strides, a resize target, tile multiples, broadcasting) against this many elements
# before allocating it.
MAX_ELEMENTS = 1 << 28


def _check_size(shape, what: str) -> None:
    count = 1
    for d in shape:
        if d < 0:
            raise KernelError(f"{what}: negative dimension in {list(shape)}")
        count *= int(d)
    if count > MAX_ELEMENTS:
        raise KernelError(f"{what}: {list(shape)} is too large")


def _positive(*values) -> None:
    if any(int(v) < 1 for v in values):
        raise KernelError(f"strides, dilations and sizes must be positive, got {list(values)}")


def _activate(x: np.ndarray, act: int) -> np.ndarray:
    if act == schema.ACT_RELU:
        return np.maximum(x, 0).astype(x.dtype)
    if act == schema.ACT_RELU6:
        return np.clip(x, 0, 6).astype(x.dtype)
    if act == schema.ACT_RELU_N1_TO_1:
        return np.clip(x, -1, 1).astype(x.dtype)
    if act == schema.ACT_TANH:
        return np.tanh(x).astype(x.dtype)
    if act != schema.ACT_NONE:
        raise KernelError(f"Unsupported fused activation {act}")
    return x


def _act(opts: dict) -> int:
    return opts.get("fused_activation_function", 0) if opts else 0


def _pad_amounts(size: int, k: int, stride: int, dilation: int, padding: int):
    """(output size, padding before, padding after) of one spatial axis."""
    eff = (k - 1) * dilation + 1
    if padding == schema.SAME:
        out = -(-size // stride)
    else:
        out = -(-(size - eff + 1) // stride)
    out = max(out, 0)
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2, total - total // 2


def _windows(x, kh, kw, sh, sw, dh, dw, padding, fill):
    """x [N, H, W, C] cut into windows [N, OH, OW, kh, kw, C] (SAME padding with `fill`)."""
    _positive(kh, kw, sh, sw, dh, dw)
    n, h, w, c = x.shape
    oh, ph0, ph1 = _pad_amounts(h, kh, sh, dh, padding)
    ow, pw0, pw1 = _pad_amounts(w, kw, sw, dw, padding)
    _check_size((n, h + ph0 + ph1, w + pw0 + pw1, c), "padded input")
    _check_size((n, oh, ow, kh, kw, c), "windows")
    if ph0 or ph1 or pw0 or pw1:
        x = np.pad(x, ((0, 0), (ph0, ph1), (pw0, pw1), (0, 0)), constant_values=fill)
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (eh, ew), axis=(1, 2))
    win = win[:, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw, :, ::dh, ::dw]
    return np.moveaxis(win, 3, 5)  # [N, OH, OW, kh, kw, C]


def _conv_2d(ins, o, _outs):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    if x.ndim != 4 or f.ndim != 4 or x.shape[3] % f.shape[3]:
        raise KernelError("CONV_2D needs 4-D input and filter with matching depth")
    win = _windows(
        x,
        f.shape[1],
        f.shape[2],
        o["stride_h"],
        o["stride_w"],
        o.get("dilation_h_factor", 1),
        o.get("dilation_w_factor", 1),
        o["padding"],
        0,
    )
    y = np.tensordot(win, f, axes=([3, 4, 5], [1, 2, 3])).astype(np.float32)
    if bias is not None:
        y = y + bias
    return [_activate(y.astype(np.float32), _act(o))]


def _depthwise_conv_2d(ins, o, _outs):
    x, f, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    cin = x.shape[3]
    mult = f.shape[3] // cin if cin else 0
    if x.ndim != 4 or f.ndim != 4 or f.shape[0] != 1 or mult * cin != f.shape[3]:
        raise KernelError("DEPTHWISE_CONV_2D needs a [1, H, W, C*M] filter for C channels")
    win = _windows(
        x,
        f.shape[1],
        f.shape[2],
        o["stride_h"],
        o["stride_w"],
        o.get("dilation_h_factor", 1),
        o.get("dilation_w_factor", 1),
        o["padding"],
        0,
    )
    filt = f[0].reshape(f.shape[1], f.shape[2], cin, mult)
    y = np.einsum("nhwijc,ijcm->nhwcm", win, filt).reshape(win.shape[:3] + (cin * mult,))
    if bias is not None:
        y = y + bias
    return [_activate(y.astype(np.float32), _act(o))]


def _max_pool(ins, o, _outs):
    win = _windows(
        ins[0],
        o["filter_height"],
        o["filter_width"],
        o["stride_h"],
        o["stride_w"],
        1,
        1,
        o["padding"],
        -np.inf,
    )
    return [_activate(win.max(axis=(3, 4)).astype(ins[0].dtype), _act(o))]


def _avg_pool(ins, o, _outs):
    x = ins[0]
    args = (o["filter_height"], o["filter_width"], o["stride_h"], o["stride_w"], 1, 1)
    total = _windows(x, *args, o["padding"], 0).sum(axis=(3, 4))
    # SAME padding averages over the pixels inside the image only.
    count = _windows(np.ones((1,) + x.shape[1:3] + (1,), x.dtype), *args, o["padding"], 0)
    return [_activate((total / count.sum(axis=(3, 4))).astype(x.dtype), _act(o))]


def _fully_connected(ins, o, _outs):
    x, w, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    depth = w.shape[1]
    if w.ndim != 2 or (x.size and x.size % depth):
        raise KernelError("FULLY_CONNECTED input size is not a multiple of the weights' depth")
    y = x.reshape(-1, depth) @ w.T
    if bias is not None:
        y = y + bias
    if o.get("keep_num_dims"):
        y = y.reshape(x.shape[:-1] + (w.shape[0],))
    return [_activate(y.astype(np.float32), _act(o))]


def _broadcast_checked(*arrays) -> None:
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError as exc:
        raise KernelError(str(exc)) from exc
    _check_size(shape, "broadcast result")


def _binary(fn):
    def kernel(ins, o, _outs):
        a, b = ins
        _broadcast_checked(a, b)
        return [_activate(np.asarray(fn(a, b)).astype(a.dtype), _act(o))]

    return kernel


def _int_div(a, b):
    if a.dtype.kind in "iu":
        return np.floor_divide(a, b) if np.all(b) else _raise("DIV by zero")
    return a / b


def _raise(msg):
    raise KernelError(msg)


def _unary(fn):
    return lambda ins, o, _outs: [np.asarray(fn(ins[0])).astype(ins[0].dtype)]


def _softmax(ins, o, _outs):
    x = ins[0] * np.float32(o.get("beta", 1.0))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return [(e / e.sum(axis=-1, keepdims=True)).astype(ins[0].dtype)]


def _log_softmax(ins, o, _outs):
    x = ins[0] - ins[0].max(axis=-1, keepdims=True)
    return [(x - np.log(np.exp(x).sum(axis=-1, keepdims=True))).astype(ins[0].dtype)]


def _reshape(ins, o, outs):
    x = ins[0]
    if len(ins) > 1 and ins[1] is not None:
        shape = [int(s) for s in np.ravel(ins[1])]
    elif o and o.get("new_shape") is not None:
        shape = [int(s) for s in o["new_shape"]]
    else:
        shape = list(outs[0][0])
    try:
        return [x.reshape(shape)]
    except ValueError as exc:
        raise KernelError(f"RESHAPE cannot make {shape} from {list(x.shape)}") from exc


def _squeeze(ins, o, _outs):
    dims = o.get("squeeze_dims") if o else None
    axes = tuple(int(d) % ins[0].ndim for d in dims) if dims is not None and len(dims) else None
    return [np.squeeze(ins[0], axis=axes)]


def _axes(ins, i=1):
    return tuple(int(a) % max(ins[0].ndim, 1) for a in np.ravel(ins[i]))


def _reducer(fn):
    def kernel(ins, o, _outs):
        y = fn(ins[0], axis=_axes(ins), keepdims=bool(o.get("keep_dims")))
        return [np.asarray(y).astype(ins[0].dtype)]

    return kernel


def _concat(ins, o, _outs):
    y = np.concatenate(ins, axis=o.get("axis", 0) % ins[0].ndim)
    return [_activate(y, _act(o))]


def _pad(ins, o, _outs):
    fill = ins[2].reshape(()) if len(ins) > 2 and ins[2] is not None else 0
    pads = np.asarray(ins[1], np.int64).reshape(-1, 2)
    if pads.shape[0] != ins[0].ndim:
        raise KernelError("PAD needs one (before, after) pair per dimension")
    _check_size([d + int(p.sum()) for d, p in zip(ins[0].shape, pads, strict=True)], "PAD")
    return [np.pad(ins[0], pads, constant_values=fill)]


def _mirror_pad(ins, o, _outs):
    pads = np.asarray(ins[1], np.int64).reshape(-1, 2)
    x = ins[0]
    limit = 0 if o.get("mode", 0) == 0 else 1  # REFLECT leaves out the edge, SYMMETRIC not
    if pads.shape[0] != x.ndim or (pads < 0).any():
        raise KernelError("MIRROR_PAD needs one non-negative (before, after) pair per dimension")
    if any(p.max() > d - 1 + limit for d, p in zip(x.shape, pads, strict=True)):
        raise KernelError("MIRROR_PAD paddings must not exceed the dimension")
    mode = "reflect" if o.get("mode", 0) == 0 else "symmetric"
    return [np.pad(x, pads, mode=mode)]


def _lrn(ins, o, _outs):
    x = ins[0]
    radius = int(o.get("radius", 0))
    if x.ndim != 4 or radius < 0:
        raise KernelError("LOCAL_RESPONSE_NORMALIZATION needs a 4-D input")
    sq = np.pad(np.square(x), ((0, 0), (0, 0), (0, 0), (radius, radius)))
    window = np.lib.stride_tricks.sliding_window_view(sq, 2 * radius + 1, axis=3).sum(-1)
    scale = np.float32(o["bias"]) + np.float32(o["alpha"]) * window
    return [(x / np.power(scale, np.float32(o["beta"]))).astype(x.dtype)]


def _tile(ins, o, _outs):
    reps = [int(m) for m in np.ravel(ins[1])]
    _check_size([d * m for d, m in zip(ins[0].shape, reps, strict=False)] or [0], "TILE")
    return [np.tile(ins[0], reps)]


def _strided_slice(ins, o, _outs):
    x, begin, end, strides = ins[0], ins[1], ins[2], ins[3]
    index: list = []
    dim = 0
    for i in range(len(begin)):
        bit = 1 << i
        if o.get("ellipsis_mask", 0) & bit:
            index.append(Ellipsis)
            dim = x.ndim - (len(begin) - i - 1)
            continue
        if o.get("new_axis_mask", 0) & bit:
            index.append(None)
            continue
        if o.get("shrink_axis_mask", 0) & bit:
            index.append(int(begin[i]))
        else:
            b = None if o.get("begin_mask", 0) & bit else int(begin[i])
            e = None if o.get("end_mask", 0) & bit else int(end[i])
            if o.get("offset") and e is not None and b is not None:
                e = b + e
            index.append(slice(b, e, int(strides[i])))
        dim += 1
    return [np.asarray(x[tuple(index)])]


def _slice(ins, o, _outs):
    x, begin, size = ins
    index = tuple(
        slice(int(b), None if int(s) == -1 else int(b) + int(s))
        for b, s in zip(begin, size, strict=True)
    )
    return [x[index]]


def _pack(ins, o, _outs):
    return [np.stack(ins, axis=o.get("axis", 0) % (ins[0].ndim + 1))]


def _unpack(ins, o, _outs):
    axis = o.get("axis", 0) % ins[0].ndim
    return [np.take(ins[0], i, axis=axis) for i in range(ins[0].shape[axis])]


def _gather(ins, o, _outs):
    return [np.take(ins[0], ins[1], axis=o.get("axis", 0) % ins[0].ndim)]


def _cast(ins, o, outs):
    return [ins[0].astype(outs[0][1])]


def _batch_matmul(ins, o, _outs):
    a, b = ins
    if o.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if o.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    return [np.matmul(a, b).astype(ins[0].dtype)]


def _leaky_relu(ins, o, _outs):
    x = ins[0]
    return [np.where(x >= 0, x, x * np.float32(o.get("alpha", 0.0))).astype(x.dtype)]


def _transpose_conv(ins, o, outs):
    out_shape, w, x = [int(d) for d in ins[0]], ins[1], ins[2]
    bias = ins[3] if len(ins) > 3 else None
    n, h, wd, _ = x.shape
    oc, kh, kw, _ = w.shape
    sh, sw = o.get("stride_h", 0), o.get("stride_w", 0)
    _positive(sh, sw, *out_shape)
    _check_size((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, oc), "TRANSPOSE_CONV")
    _check_size(out_shape, "TRANSPOSE_CONV output")
    full = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, oc), np.float32)
    for i in range(kh):
        for j in range(kw):
            full[:, i : i + (h - 1) * sh + 1 : sh, j : j + (wd - 1) * sw + 1 : sw] += (
                x @ w[:, i, j].T
            )
    top = left = 0
    if o["padding"] == schema.SAME:
        top = max((h - 1) * sh + kh - out_shape[1], 0) // 2
        left = max((wd - 1) * sw + kw - out_shape[2], 0) // 2
    full = np.pad(
        full,
        (
            (0, 0),
            (0, max(out_shape[1] + top - full.shape[1], 0)),
            (0, max(out_shape[2] + left - full.shape[2], 0)),
            (0, 0),
        ),
    )
    y = full[:, top : top + out_shape[1], left : left + out_shape[2]]
    if bias is not None:
        y = y + bias
    return [_activate(y.astype(np.float32), _act(o))]


def _resize_coords(in_size, out_size, align, half):
    scale = (in_size - 1) / (out_size - 1) if align and out_size > 1 else in_size / out_size
    dst = np.arange(out_size, dtype=np.float64)
    return (dst + 0.5) * scale - 0.5 if half else dst * scale


def _resize_size(ins) -> list[int]:
    sizes = [int(d) for d in np.ravel(ins[1])]
    if ins[0].ndim != 4 or len(sizes) != 2:
        raise KernelError("resizing needs a 4-D image and a size of 2")
    _positive(*sizes)
    _check_size((ins[0].shape[0], *sizes, ins[0].shape[3]), "resize output")
    return sizes


def _resize_bilinear(ins, o, _outs):
    x, sizes = ins[0], _resize_size(ins)
    align, half = o.get("align_corners", False), o.get("half_pixel_centers", False)
    out = x.astype(np.float64)
    for axis, osize in ((1, sizes[0]), (2, sizes[1])):
        size = x.shape[axis]
        src = _resize_coords(size, osize, align, half)
        lo = np.clip(np.floor(src), 0, size - 1).astype(int)
        hi = np.clip(np.ceil(src), 0, size - 1).astype(int)
        frac = (src - np.floor(src)).reshape((1, -1, 1, 1) if axis == 1 else (1, 1, -1, 1))
        a, b = np.take(out, lo, axis=axis), np.take(out, hi, axis=axis)
        out = a + (b - a) * frac
    return [out.astype(x.dtype)]


def _resize_nearest(ins, o, _outs):
    x, (oh, ow) = ins[0], _resize_size(ins)
    align, half = o.get("align_corners", False), o.get("half_pixel_centers", False)
    idx = []
    for size, osize in ((x.shape[1], oh), (x.shape[2], ow)):
        scale = (size - 1) / (osize - 1) if align and osize > 1 else size / osize
        src = (np.arange(osize) + (0.5 if half else 0.0)) * scale
        src = np.round(src) if align else np.floor(src)
        idx.append(np.clip(src.astype(int), 0, size - 1))
    return [x[:, idx[0]][:, :, idx[1]]]


def _space_to_depth(ins, o, _outs):
    x, b = ins[0], o["block_size"]
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return [y.reshape(n, h // b, w // b, b * b * c)]


def _depth_to_space(ins, o, _outs):
    x, b = ins[0], o["block_size"]
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [y.reshape(n, h * b, w * b, c // (b * b))]


def _l2_norm(ins, o, _outs):
    x = ins[0]
    norm = np.sqrt(np.sum(np.square(x), axis=-1, keepdims=True))
    return [_activate((x / np.maximum(norm, 1e-6)).astype(x.dtype), _act(o))]


def _arg(fn):
    def kernel(ins, o, outs):
        return [fn(ins[0], axis=int(np.ravel(ins[1])[0])).astype(outs[0][1])]

    return kernel


def _split(ins, o, _outs):
    axis, x = int(np.ravel(ins[0])[0]), ins[1]
    return np.split(x, o["num_splits"], axis=axis)


def _split_v(ins, o, _outs):
    x, sizes, axis = ins[0], [int(s) for s in ins[1]], int(np.ravel(ins[2])[0])
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _floor_mod(a, b):
    if a.dtype.kind in "iu":
        return np.mod(a, b)
    m = np.fmod(a, b)
    return np.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


def _compare(fn):
    def kernel(ins, o, _outs):
        _broadcast_checked(ins[0], ins[1])
        return [fn(ins[0], ins[1])]

    return kernel


def _select(ins, o, _outs):
    cond = ins[0]
    if cond.ndim == 1 and ins[1].ndim > 1:  # TF1 Select: a vector picks whole rows
        cond = cond.reshape((-1,) + (1,) * (ins[1].ndim - 1))
    return [np.where(cond, ins[1], ins[2])]


def _add_n(ins, o, _outs):
    _broadcast_checked(*ins)
    total = ins[0]
    for x in ins[1:]:
        total = total + x
    return [np.asarray(total).astype(ins[0].dtype)]


def dequantize(x: np.ndarray, quant: dict) -> np.ndarray:
    """DEQUANTIZE: float16 widened, or (q - zero_point) * scale (per tensor or along
    `quantized_dimension`) for integer tensors."""
    if x.dtype.kind == "f":
        return x.astype(np.float32)
    scale = np.asarray(quant.get("scale") if quant.get("scale") is not None else [], np.float32)
    zero = np.asarray(
        quant.get("zero_point") if quant.get("zero_point") is not None else [0], np.int64
    )
    if scale.size == 0:
        raise KernelError("DEQUANTIZE of an integer tensor without a scale")
    if scale.size > 1:
        axis = int(quant.get("quantized_dimension") or 0)
        if not 0 <= axis < x.ndim or x.shape[axis] != scale.size:
            raise KernelError("DEQUANTIZE scales do not match the quantized dimension")
        shape = [1] * x.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zero = zero.reshape(shape) if zero.size == scale.size else zero.reshape(())
    return ((x.astype(np.int64) - zero) * scale).astype(np.float32)


KERNELS = {
    "CONV_2D": _conv_2d,
    "DEPTHWISE_CONV_2D": _depthwise_conv_2d,
    "MAX_POOL_2D": _max_pool,
    "AVERAGE_POOL_2D": _avg_pool,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _binary(np.add),
    "SUB": _binary(np.subtract),
    "MUL": _binary(np.multiply),
    "DIV": _binary(_int_div),
    "MAXIMUM": _binary(np.maximum),
    "MINIMUM": _binary(np.minimum),
    "SQUARED_DIFFERENCE": _binary(lambda a, b: (a - b) * (a - b)),
    "RELU": _unary(lambda x: np.maximum(x, 0)),
    "RELU6": _unary(lambda x: np.clip(x, 0, 6)),
    "LOGISTIC": _unary(lambda x: 1 / (1 + np.exp(-x))),
    "TANH": _unary(np.tanh),
    "EXP": _unary(np.exp),
    "LOG": _unary(np.log),
    "SQRT": _unary(np.sqrt),
    "RSQRT": _unary(lambda x: 1 / np.sqrt(x)),
    "SQUARE": _unary(np.square),
    "NEG": _unary(np.negative),
    "ABS": _unary(np.abs),
    "SIN": _unary(np.sin),
    "COS": _unary(np.cos),
    "FLOOR": _unary(np.floor),
    "CEIL": _unary(np.ceil),
    "ELU": _unary(lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    "LEAKY_RELU": _leaky_relu,
    "SOFTMAX": _softmax,
    "LOG_SOFTMAX": _log_softmax,
    "RESHAPE": _reshape,
    "SQUEEZE": _squeeze,
    "EXPAND_DIMS": lambda ins, o, _outs: [np.expand_dims(ins[0], int(np.ravel(ins[1])[0]))],
    "MEAN": _reducer(np.mean),
    "SUM": _reducer(np.sum),
    "REDUCE_MAX": _reducer(np.max),
    "REDUCE_MIN": _reducer(np.min),
    "REDUCE_PROD": _reducer(np.prod),
    "CONCATENATION": _concat,
    "PAD": _pad,
    "PADV2": _pad,
    "TRANSPOSE": lambda ins, o, _outs: [np.transpose(ins[0], [int(p) for p in ins[1]])],
    "STRIDED_SLICE": _strided_slice,
    "SLICE": _slice,
    "PACK": _pack,
    "UNPACK": _unpack,
    "GATHER": _gather,
    "TILE": _tile,
    "CAST": _cast,
    "BATCH_MATMUL": _batch_matmul,
    "TRANSPOSE_CONV": _transpose_conv,
    "RESIZE_BILINEAR": _resize_bilinear,
    "RESIZE_NEAREST_NEIGHBOR": _resize_nearest,
    "SPACE_TO_DEPTH": _space_to_depth,
    "DEPTH_TO_SPACE": _depth_to_space,
    "L2_NORMALIZATION": _l2_norm,
    "ARG_MAX": _arg(np.argmax),
    "ARG_MIN": _arg(np.argmin),
    "SPLIT": _split,
    "SPLIT_V": _split_v,
    "LESS": _compare(np.less),
    "LESS_EQUAL": _compare(np.less_equal),
    "GREATER": _compare(np.greater),
    "GREATER_EQUAL": _compare(np.greater_equal),
    "EQUAL": _compare(np.equal),
    "NOT_EQUAL": _compare(np.not_equal),
    "LOGICAL_AND": _compare(np.logical_and),
    "LOGICAL_OR": _compare(np.logical_or),
    "LOGICAL_NOT": lambda ins, o, _outs: [np.logical_not(ins[0])],
    "SELECT": _select,
    "SELECT_V2": lambda ins, o, _outs: [np.where(ins[0], ins[1], ins[2])],
    "POW": _binary(np.power),
    "FLOOR_DIV": _binary(lambda a, b: np.floor_divide(a, b)),
    "FLOOR_MOD": _binary(_floor_mod),
    "REDUCE_ANY": _reducer(np.any),
    "REVERSE_V2": lambda ins, o, _outs: [np.flip(ins[0], axis=_axes(ins))],
    "ROUND": _unary(np.round),
    "SIGN": _unary(np.sign),
    "RELU_N1_TO_1": _unary(lambda x: np.clip(x, -1, 1)),
    "ADD_N": _add_n,
    "HARD_SWISH": _unary(lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "MIRROR_PAD": _mirror_pad,
    "LOCAL_RESPONSE_NORMALIZATION": _lrn,
    # The interpreter calls `dequantize` with the input's quantization parameters.
    "DEQUANTIZE": lambda ins, o, _outs: [dequantize(ins[0], {})],
}
