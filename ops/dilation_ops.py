"""Grayscale morphological dilation (`tf.nn.dilation2d`: op Dilation2D, with its
gradients Dilation2DBackpropInput and Dilation2DBackpropFilter) and erosion
(`tf.nn.erosion2d`, built from dilation as TF builds it).

out[b, y, x, c] = max over (i, j) of input[b, y*sh + i*rh - top, x*sw + j*rw - left, c]
+ filter[i, j, c], positions outside the image left out (SAME padding adds none of
its own values).  The gradients go to the first maximising (i, j) of each output,
scanning rows then columns, as TF's CPU kernels.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.conv_ops import static_out_size, window_geometry
from asyncflow.registry import REAL, REQUIRED, NotDifferentiable, register_op

__all__ = ["dilation2d", "erosion2d"]

_ATTRS = {"T": REAL, "strides": REQUIRED, "rates": REQUIRED, "padding": REQUIRED}


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _check_attrs(strides, rates, padding) -> None:
    if len(strides) != 4 or len(rates) != 4:
        raise ValueError("Dilation2D requires 4 strides and 4 rates")
    if strides[0] != 1 or strides[3] != 1 or rates[0] != 1 or rates[3] != 1:
        raise ValueError("Current implementation does not yet support strides or rates in "
                         "the batch and depth dimensions.")  # fmt: skip
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME or VALID, got {padding!r}")


def _shape(op):
    a = {k: op._attr(k) for k in ("strides", "rates", "padding")}
    _check_attrs(a["strides"], a["rates"], a["padding"])
    x = op.inputs[0].shape.with_rank(4).as_list()
    f = op.inputs[1].shape.with_rank(3).as_list()
    if x[3] is not None and f[2] is not None and x[3] != f[2]:
        raise ValueError(f"input and filter must have the same depth: {x[3]} vs {f[2]}")
    oh = static_out_size(x[1], f[0], a["strides"][1], a["rates"][1], a["padding"])
    ow = static_out_size(x[2], f[1], a["strides"][2], a["rates"][2], a["padding"])
    return [tensor_shape.TensorShape([x[0], oh, ow, x[3] if x[3] is not None else f[2]])]


Dilation2D = register_op(
    "Dilation2D",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs=dict(_ATTRS),
    shape_fn=_shape,
)


def _geometry(attrs, x, f):
    if x.ndim != 4:
        raise _invalid(f"input must be 4-dimensional: {list(x.shape)}")
    if f.ndim != 3:
        raise _invalid(f"filter must be 3-dimensional: {list(f.shape)}")
    if x.shape[3] != f.shape[2]:
        raise _invalid(f"input and filter must have the same depth: {x.shape[3]} vs {f.shape[2]}")
    s, r = attrs["strides"], attrs["rates"]
    oh, top, _ = window_geometry(x.shape[1], f.shape[0], s[1], r[1], attrs["padding"])
    ow, left, _ = window_geometry(x.shape[2], f.shape[1], s[2], r[2], attrs["padding"])
    return oh, ow, top, left


def _scan(attrs, x, f):
    """(out, the input rows and cols, and filter offsets of each output's first max)."""
    n, h, w, c = x.shape
    fh, fw, _ = f.shape
    s, r = attrs["strides"], attrs["rates"]
    oh, ow, top, left = _geometry(attrs, x, f)
    lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    best = np.full((n, oh, ow, c), lowest, dtype=x.dtype)
    by = np.zeros((n, oh, ow, c), np.int64)
    bx = np.zeros((n, oh, ow, c), np.int64)
    bi = np.zeros((n, oh, ow, c), np.int64)
    bj = np.zeros((n, oh, ow, c), np.int64)
    first = np.ones((n, oh, ow, c), bool)
    ys0 = np.arange(oh) * s[1] - top
    xs0 = np.arange(ow) * s[2] - left
    for i in range(fh):
        ys = ys0 + i * r[1]
        vy = (ys >= 0) & (ys < h)
        for j in range(fw):
            xs = xs0 + j * r[2]
            vx = (xs >= 0) & (xs < w)
            yy, xx = ys.clip(0, h - 1), xs.clip(0, w - 1)
            val = x[:, yy][:, :, xx] + f[i, j]
            ok = (vy[:, None] & vx[None, :])[None, :, :, None]
            better = ok & ((val > best) | first)
            best = np.where(better, val, best)
            first &= ~ok
            by = np.where(better, yy[None, :, None, None], by)
            bx = np.where(better, xx[None, None, :, None], bx)
            bi = np.where(better, i, bi)
            bj = np.where(better, j, bj)
    return best, by, bx, bi, bj


def _attrs(ctx) -> dict:
    return {k: ctx.attrs[k] for k in ("strides", "rates", "padding")}


@Dilation2D.kernel("CPU")
async def _dilation2d(ctx, x, f):
    x, f = np.asarray(x), np.asarray(f)
    return await ctx.compute(lambda: _scan(_attrs(ctx), x, f)[0])


Dilation2DBackpropInput = register_op(
    "Dilation2DBackpropInput",
    inputs=["input: T", "filter: T", "out_backprop: T"],
    outputs=["in_backprop: T"],
    attrs=dict(_ATTRS),
    shape_fn=lambda op: [op.inputs[0].shape],
)
Dilation2DBackpropFilter = register_op(
    "Dilation2DBackpropFilter",
    inputs=["input: T", "filter: T", "out_backprop: T"],
    outputs=["filter_backprop: T"],
    attrs=dict(_ATTRS),
    shape_fn=lambda op: [op.inputs[1].shape],
)


def _backprop(attrs, x, f, dy, to_input: bool):
    best, by, bx, bi, bj = _scan(attrs, x, f)
    if dy.shape != best.shape:
        raise _invalid(f"out_backprop has shape {list(dy.shape)}, expected {list(best.shape)}")
    n, oh, ow, c = best.shape
    b = np.arange(n)[:, None, None, None] + np.zeros_like(by)
    ch = np.arange(c)[None, None, None, :] + np.zeros_like(by)
    g = dy.astype(np.float64)
    if to_input:
        out = np.zeros(x.shape, np.float64)
        np.add.at(out, (b, by, bx, ch), g)
        return out.astype(x.dtype)
    out = np.zeros(f.shape, np.float64)
    np.add.at(out, (bi, bj, ch), g)
    return out.astype(f.dtype)


@Dilation2DBackpropInput.kernel("CPU")
async def _dilation2d_backprop_input(ctx, x, f, dy):
    x, f, dy = np.asarray(x), np.asarray(f), np.asarray(dy)
    return await ctx.compute(lambda: _backprop(_attrs(ctx), x, f, dy, True))


@Dilation2DBackpropFilter.kernel("CPU")
async def _dilation2d_backprop_filter(ctx, x, f, dy):
    x, f, dy = np.asarray(x), np.asarray(f), np.asarray(dy)
    return await ctx.compute(lambda: _backprop(_attrs(ctx), x, f, dy, False))


@Dilation2D.gradient
def _dilation2d_grad(op, grad):
    x, f = op.inputs
    attrs = {k: op._attr(k) for k in ("strides", "rates", "padding")}
    return [
        ops.apply_op("Dilation2DBackpropInput", [x, f, grad], attrs).outputs[0],
        ops.apply_op("Dilation2DBackpropFilter", [x, f, grad], attrs).outputs[0],
    ]


for _t in ("Dilation2DBackpropInput", "Dilation2DBackpropFilter"):
    NotDifferentiable(_t)


def dilation2d(
    input=None,  # noqa: A002 - TF's name
    filter=None,  # noqa: A002 - TF's name
    strides=None,
    rates=None,
    padding=None,
    name=None,
    filters=None,
    dilations=None,
):
    """Grayscale dilation of a 4-D `input` by a 3-D `filter` (TF1's `tf.nn.dilation2d`).

    Raises:
      ValueError: at build time, for strides/rates over batch or depth, a bad padding,
        or depths that differ.
    """
    filter = filters if filter is None else filter  # noqa: A001
    rates = dilations if rates is None else rates
    attrs = {"strides": list(strides), "rates": list(rates), "padding": padding}
    return ops.apply_op("Dilation2D", [input, filter], attrs, name=name).outputs[0]


def erosion2d(value, kernel, strides, rates, padding, name=None):
    """Grayscale erosion: -dilation2d(-value, the kernel reversed) (`tf.nn.erosion2d`)."""
    from asyncflow.ops import array_ops, math_ops

    with ops.name_scope(name, "erosion2d", [value, kernel]) as scope:
        rev = array_ops.reverse(kernel, [0, 1])
        out = dilation2d(math_ops.negative(value), rev, strides, rates, padding)
        return math_ops.negative(out, name=scope)
