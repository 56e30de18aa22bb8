"""TF's quantized NN ops: QuantizedAvgPool, QuantizedMaxPool, QuantizedConv2D and
QuantizedReluX (`tf.nn.quantized_*`), on quint8 / qint8 tensors with their float
ranges, as TF's CPU kernels compute them.

- QuantizedAvgPool: the window's integer sum divided by the count of real (unpadded)
  elements, rounded to nearest with ties to even (measured against TF's kernel on
  signed and unsigned codes); the range passes through.
- QuantizedMaxPool: the window's largest code; the range passes through.
- QuantizedConv2D (quint8 x quint8 -> qint32): each product of codes taken relative to
  the code of 0.0 in its own range (TF's FloatToQuantizedUnclamped), padding counting as
  that zero, summed in int32; the output range is the product of the two ranges' steps
  times qint32's limits (TF's QuantizationRangeForMultiplication).
- QuantizedReluX: TF 2.21 registers no kernel for it; running it raises TF's "No
  OpKernel was registered" InvalidArgumentError, as there.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.conv_ops import static_out_size, window_geometry
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = ["quantized_avg_pool", "quantized_conv2d", "quantized_max_pool", "quantized_relu_x"]

_QUANTIZED = ["qint8", "quint8", "qint32", "qint16", "quint16"]
_POOL_T = TypeConstraint(_QUANTIZED)
_RANGE_OUT = ["min_output: float32", "max_output: float32"]


def _storage(dt: dtypes.DType) -> np.dtype:
    record = np.dtype(dt.as_numpy_dtype)
    return record.fields[record.names[0]][0]


def _codes(x, dt: dtypes.DType) -> np.ndarray:
    """A quantized array's integer codes (its record's one field)."""
    x = np.asarray(x)
    return x.view(_storage(dt)) if x.dtype.names else x.astype(_storage(dt))


def _as_quantized(codes: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    return np.ascontiguousarray(codes.astype(_storage(dt))).view(dt.as_numpy_dtype)


def _scalar(v, what: str) -> float:
    v = np.asarray(v, np.float32)
    if v.size < 1:
        raise errors.InvalidArgumentError(None, None, f"{what} must have at least 1 element")
    return float(v.reshape(-1)[0])


def _no_kernel(op_type: str, attrs: dict, node: str):
    listed = ", ".join(f"{k}=DT_{v.name.upper()}" for k, v in sorted(attrs.items()))
    return errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op '{op_type}' used by {{{{node {node}}}}} "
        f"with these attrs: [{listed}]\nRegistered devices: [CPU]\nRegistered kernels:\n"
        "  <no registered kernels>",
    )


# -- pooling ---------------------------------------------------------------------------------

_POOL_ATTRS = {"T": _POOL_T, "ksize": REQUIRED, "strides": REQUIRED, "padding": REQUIRED}


def _pool_shape(op):
    n, h, w, c = op.inputs[0].shape.with_rank(4).as_list()
    ksize, strides = op.get_attr("ksize"), op.get_attr("strides")
    pad = op.get_attr("padding")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    op.inputs[1].shape.with_rank_at_most(1)
    op.inputs[2].shape.with_rank_at_most(1)
    oh = static_out_size(h, ksize[1], strides[1], 1, pad)
    ow = static_out_size(w, ksize[2], strides[2], 1, pad)
    scalar = tensor_shape.TensorShape([])
    return [tensor_shape.TensorShape([n, oh, ow, c]), scalar, scalar]


def _check_pool(attrs) -> None:
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    if len(ksize) != 4:
        raise errors.InvalidArgumentError(
            None, None, "Sliding window ksize field must specify 4 dimensions"
        )
    if len(strides) != 4:
        raise errors.InvalidArgumentError(
            None, None, "Sliding window strides field must specify 4 dimensions"
        )
    if ksize[0] != 1 or strides[0] != 1:
        raise errors.UnimplementedError(
            None, None, "Pooling is not yet supported on the batch dimension."
        )


def _windows(codes: np.ndarray, attrs, fill):
    """[N, OH, OW, KH*KW, C] windows of `codes` (padded with `fill`), and the mask of
    the real elements in each ([OH, OW, KH*KW])."""
    _check_pool(attrs)
    pad = attrs["padding"]
    pad = pad.decode() if isinstance(pad, bytes) else pad
    _, kh, kw, _ = attrs["ksize"]
    _, sh, sw, _ = attrs["strides"]
    n, h, w, c = codes.shape
    oh, lo_h, hi_h = window_geometry(h, kh, sh, 1, pad)
    ow, lo_w, hi_w = window_geometry(w, kw, sw, 1, pad)
    padded = np.full((n, h + lo_h + hi_h, w + lo_w + hi_w, c), fill, codes.dtype)
    padded[:, lo_h : lo_h + h, lo_w : lo_w + w] = codes
    real = np.zeros(padded.shape[1:3], bool)
    real[lo_h : lo_h + h, lo_w : lo_w + w] = True
    rows = (np.arange(oh) * sh)[:, None] + np.arange(kh)[None, :]  # [OH, KH]
    cols = (np.arange(ow) * sw)[:, None] + np.arange(kw)[None, :]  # [OW, KW]
    win = padded[:, rows[:, None, :, None], cols[None, :, None, :]]  # [N,OH,OW,KH,KW,C]
    mask = real[rows[:, None, :, None], cols[None, :, None, :]]  # [OH,OW,KH,KW]
    return win.reshape(n, oh, ow, kh * kw, c), mask.reshape(oh, ow, kh * kw)


def _register_pool(op_type: str):
    op_def = register_op(
        op_type,
        inputs=["input: T", "min_input: float32", "max_input: float32"],
        outputs=["output: T", *_RANGE_OUT],
        attrs=dict(_POOL_ATTRS),
        shape_fn=_pool_shape,
    )
    NotDifferentiable(op_type)
    return op_def


QuantizedAvgPool = _register_pool("QuantizedAvgPool")
QuantizedMaxPool = _register_pool("QuantizedMaxPool")
_POOL_KERNEL_TYPES = (dtypes.quint8, dtypes.qint8)  # (TF registers these two)


def _pool_input(ctx, x, lo, hi):
    dt = ctx.attrs["T"]
    if dt not in _POOL_KERNEL_TYPES:
        raise _no_kernel(ctx.op.type, {"T": dt}, ctx.op.name)
    codes = _codes(x, dt)
    if codes.ndim != 4:
        raise errors.InvalidArgumentError(None, None, "tensor_in must be 4-dimensional")
    return dt, codes, np.float32(_scalar(lo, "min_input")), np.float32(_scalar(hi, "max_input"))


def _avg(codes: np.ndarray, attrs) -> np.ndarray:
    win, mask = _windows(codes.astype(np.int64), attrs, 0)
    total = win.sum(axis=3)
    count = mask.sum(axis=2)[None, :, :, None]
    return np.rint(total / count).astype(np.int64)  # (TF's: to nearest, ties to even)


def _max(codes: np.ndarray, attrs) -> np.ndarray:
    info = np.iinfo(codes.dtype)
    win, _ = _windows(codes, attrs, info.min)
    return win.max(axis=3)


@QuantizedAvgPool.kernel("CPU")
async def _quantized_avg_pool(ctx, x, lo, hi):
    dt, codes, lo, hi = _pool_input(ctx, x, lo, hi)
    out = await ctx.compute(_avg, codes, ctx.attrs)
    return _as_quantized(out, dt), np.array(lo, np.float32), np.array(hi, np.float32)


@QuantizedMaxPool.kernel("CPU")
async def _quantized_max_pool(ctx, x, lo, hi):
    dt, codes, lo, hi = _pool_input(ctx, x, lo, hi)
    out = await ctx.compute(_max, codes, ctx.attrs)
    return _as_quantized(out, dt), np.array(lo, np.float32), np.array(hi, np.float32)


# -- QuantizedConv2D --------------------------------------------------------------------


def _conv_shape(op):
    n, h, w, _ = op.inputs[0].shape.with_rank(4).as_list()
    kh, kw, _, oc = op.inputs[1].shape.with_rank(4).as_list()
    strides = op.get_attr("strides")
    dil = op.get_attr("dilations")
    pad = op.get_attr("padding")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    for i in range(2, 6):
        op.inputs[i].shape.with_rank(0)
    oh = static_out_size(h, kh, strides[1], dil[1], pad)
    ow = static_out_size(w, kw, strides[2], dil[2], pad)
    scalar = tensor_shape.TensorShape([])
    return [tensor_shape.TensorShape([n, oh, ow, oc]), scalar, scalar]


QuantizedConv2D = register_op(
    "QuantizedConv2D",
    inputs=[
        "input: Tinput",
        "filter: Tfilter",
        "min_input: float32",
        "max_input: float32",
        "min_filter: float32",
        "max_filter: float32",
    ],
    outputs=["output: out_type", *_RANGE_OUT],
    attrs={
        "Tinput": TypeConstraint(_QUANTIZED),
        "Tfilter": TypeConstraint(_QUANTIZED),
        "out_type": TypeConstraint(_QUANTIZED, default="qint32"),
        "strides": REQUIRED,
        "padding": REQUIRED,
        "dilations": [1, 1, 1, 1],
    },
    shape_fn=_conv_shape,
)
NotDifferentiable("QuantizedConv2D")


def _zero_code(lo: float, hi: float, dt: dtypes.DType) -> int:
    """TF's FloatToQuantizedUnclamped(0.0f, lo, hi): the code of 0.0 in [lo, hi]."""
    lowest = int(np.iinfo(_storage(dt)).min)
    if lo == hi:
        return lowest
    steps = 1 << (8 * _storage(dt).itemsize)
    scale = steps / ((hi - lo) * (steps / (steps - 1.0)))
    return int(round(0.0 * scale) - _round_half_away(lo * scale)) + lowest


def _round_half_away(v: float) -> float:
    return float(np.sign(v) * np.floor(abs(v) + 0.5))


def _level(lo: np.float32, hi: np.float32, dt: dtypes.DType) -> np.float32:
    """TF's FloatForOneQuantizedLevel: (hi - lo) / (highest - lowest), in float32."""
    info = np.iinfo(_storage(dt))
    return np.float32(np.float32(hi - lo) / np.float32(int(info.max) - int(info.min)))


def _conv(x, f, x_zero, f_zero, strides, padding):
    n, h, w, c = x.shape
    kh, kw, _, oc = f.shape
    oh, lo_h, hi_h = window_geometry(h, kh, strides[1], 1, padding)
    ow, lo_w, hi_w = window_geometry(w, kw, strides[2], 1, padding)
    xs = np.full((n, h + lo_h + hi_h, w + lo_w + hi_w, c), x_zero, np.int64)
    xs[:, lo_h : lo_h + h, lo_w : lo_w + w] = x
    xs -= x_zero
    fs = f.astype(np.int64) - f_zero
    out = np.zeros((n, oh, ow, oc), np.int64)
    for i in range(kh):
        for j in range(kw):
            sh, sw = strides[1], strides[2]
            patch = xs[:, i : i + oh * sh : sh, j : j + ow * sw : sw]
            out += np.tensordot(patch, fs[i, j], axes=([3], [0]))
    return out.astype(np.int32)  # (TF sums in int32: wraps the same way)


@QuantizedConv2D.kernel("CPU")
async def _quantized_conv2d(ctx, x, f, x_lo, x_hi, f_lo, f_hi):
    a = ctx.attrs
    tin, tf_, tout = a["Tinput"], a["Tfilter"], a["out_type"]
    if (tin, tf_, tout) != (dtypes.quint8, dtypes.quint8, dtypes.qint32):
        raise _no_kernel(
            ctx.op.type, {"Tinput": tin, "Tfilter": tf_, "out_type": tout}, ctx.op.name
        )
    strides, dil = list(a["strides"]), list(a["dilations"])
    padding = a["padding"].decode() if isinstance(a["padding"], bytes) else a["padding"]
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1:
        raise errors.InvalidArgumentError(
            None, None, "Current implementation does not yet support strides in the batch "
            "and depth dimensions."
        )  # fmt: skip
    if strides[1] != strides[2]:
        raise errors.InvalidArgumentError(
            None, None, "Current implementation only supports equal length strides in the "
            "row and column dimensions."
        )  # fmt: skip
    if dil != [1, 1, 1, 1]:
        raise errors.InvalidArgumentError(
            None, None, "Current implementation only supports dilated rate as 1 in the row "
            "and column dimensions."
        )  # fmt: skip
    xc, fc = _codes(x, tin), _codes(f, tf_)
    if xc.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional{list(xc.shape)}"
        )
    if fc.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"filter must be 4-dimensional: {list(fc.shape)}"
        )
    if xc.shape[3] != fc.shape[2]:
        raise errors.InvalidArgumentError(
            None, None, f"input and filter must have the same depth: {xc.shape[3]} vs "
            f"{fc.shape[2]}"
        )  # fmt: skip
    lo_x, hi_x = np.float32(_scalar(x_lo, "min_input")), np.float32(_scalar(x_hi, "max_input"))
    lo_f, hi_f = np.float32(_scalar(f_lo, "min_filter")), np.float32(_scalar(f_hi, "max_filter"))
    x_zero = _zero_code(float(lo_x), float(hi_x), tin)
    f_zero = _zero_code(float(lo_f), float(hi_f), tf_)
    out = await ctx.compute(_conv, xc, fc, x_zero, f_zero, strides, padding)
    level = np.float32(_level(lo_x, hi_x, tin) * _level(lo_f, hi_f, tf_))
    info = np.iinfo(np.int32)
    lo_out = np.float32(level * np.float32(info.min))
    hi_out = np.float32(level * np.float32(info.max))
    return _as_quantized(out, tout), np.array(lo_out), np.array(hi_out)


# -- QuantizedReluX ----------------------------------------------------------------------

QuantizedReluX = register_op(
    "QuantizedReluX",
    inputs=["features: Tinput", "max_value: float32", "min_features: float32",
            "max_features: float32"],  # fmt: skip
    outputs=["activations: out_type", "min_activations: float32", "max_activations: float32"],
    attrs={"Tinput": TypeConstraint(_QUANTIZED),
           "out_type": TypeConstraint(_QUANTIZED, default="quint8")},  # fmt: skip
    shape_fn=lambda op: [op.inputs[0].shape, tensor_shape.TensorShape([]),
                         tensor_shape.TensorShape([])],  # fmt: skip
)
NotDifferentiable("QuantizedReluX")


@QuantizedReluX.kernel("CPU")
async def _quantized_relu_x(ctx, features, max_value, lo, hi):
    a = ctx.attrs  # (TF 2.21 has no kernel for any types: its error, as there)
    raise _no_kernel(ctx.op.type, {"Tinput": a["Tinput"], "out_type": a["out_type"]}, ctx.op.name)


# -- builders --------------------------------------------------------------------------


def _outs(op):
    return tuple(op.outputs)


def quantized_avg_pool(input, min_input, max_input, ksize, strides, padding, name=None):  # noqa: A002
    """`tf.nn.quantized_avg_pool`: (output, min_output, max_output)."""
    attrs = {"ksize": list(ksize), "strides": list(strides), "padding": padding}
    return _outs(ops.apply_op("QuantizedAvgPool", [input, min_input, max_input], attrs, name=name))


def quantized_max_pool(input, min_input, max_input, ksize, strides, padding, name=None):  # noqa: A002
    """`tf.nn.quantized_max_pool`: (output, min_output, max_output)."""
    attrs = {"ksize": list(ksize), "strides": list(strides), "padding": padding}
    return _outs(ops.apply_op("QuantizedMaxPool", [input, min_input, max_input], attrs, name=name))


def quantized_conv2d(  # noqa: A002 - TF's argument names
    input, filter, min_input, max_input, min_filter, max_filter, strides, padding,
    out_type=dtypes.qint32, dilations=(1, 1, 1, 1), name=None,
):  # fmt: skip
    """`tf.nn.quantized_conv2d`: (output, min_output, max_output)."""
    attrs = {
        "strides": list(strides),
        "padding": padding,
        "out_type": dtypes.as_dtype(out_type),
        "dilations": list(dilations),
    }
    inputs = [input, filter, min_input, max_input, min_filter, max_filter]
    return _outs(ops.apply_op("QuantizedConv2D", inputs, attrs, name=name))


def quantized_relu_x(features, max_value, min_features, max_features, out_type=dtypes.quint8,
                     name=None):  # fmt: skip
    """`tf.nn.quantized_relu_x`: (activations, min_activations, max_activations); TF 2.21
    has no kernel for it, so running it raises (as there)."""
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    inputs = [features, max_value, min_features, max_features]
    return _outs(ops.apply_op("QuantizedReluX", inputs, attrs, name=name))
