"""3-D convolution and pooling: Conv3D with its two backprops (Conv3DBackpropInputV2 is
`conv3d_transpose`), MaxPool3D, AvgPool3D and their gradients; TF1's builders
(`af.nn.conv3d`, `conv3d_transpose`, `conv3d_backprop_filter(_v2)`, `max_pool3d`,
`avg_pool3d`).

How they compute (written once against the device's array module): the input is padded
once and, for each of the KD*KH*KW window offsets, the strided slice of the padded input
that offset touches is one GEMM with that offset's [C, OC] filter block.  Backprops are
the same walk: the input gradient adds `dy @ w[off]^T` onto each slice, the filter
gradient is `slice^T @ dy` per offset.  Pooling takes the max / sum over the same slices.

Semantics follow TF's CPU kernels: SAME puts the odd padding plane at the end;
AvgPool3D divides by the number of in-bounds elements of each window; MaxPool3DGrad, as
TF's CPU kernel, sends a window's gradient to every element within 1e-5 of its maximum.
MaxPool3DGradGrad is the exact adjoint of that (each window's pooled value gathers the
incoming gradient of every near-maximal element); each is the other's gradient, as TF.

Invariant: kernels return the declared dtype; half precision is computed in float32.
"""

from __future__ import annotations

import itertools

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.deprecation import deprecated_argument_lookup
from asyncflow.ops import array_ops
from asyncflow.ops.conv_ops import CONV_TYPES, compute_dtype, static_out_size, window_geometry
from asyncflow.registry import INDEX, REQUIRED, TypeConstraint, register_op

__all__ = [
    "conv3d",
    "conv3d_transpose",
    "conv3d_backprop_filter",
    "conv3d_backprop_filter_v2",
    "max_pool3d",
    "avg_pool3d",
]

_FORMATS = ("NDHWC", "NCDHW")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _spatial(values, fmt: str) -> list[int]:
    """The (D, H, W) entries of a 5-element attr or shape in `fmt`."""
    values = list(values)
    return values[2:5] if fmt == "NCDHW" else values[1:4]


def _to_last(x, fmt: str):
    return x.transpose(0, 2, 3, 4, 1) if fmt == "NCDHW" else x


def _from_last(xp, x, fmt: str):
    return xp.ascontiguousarray(x.transpose(0, 4, 1, 2, 3)) if fmt == "NCDHW" else x


def _layout(n, spatial, c, fmt: str) -> list:
    return [n, c, *spatial] if fmt == "NCDHW" else [n, *spatial, c]


def _check_attrs(attrs, window_key: str | None) -> None:
    """TF's build-time checks (ValueError), for convolutions and pooling alike."""
    fmt = attrs["data_format"]
    if fmt not in _FORMATS:
        raise ValueError(f"Invalid data format: {fmt}")
    for key in ("strides", "dilations", window_key):
        if key is None or attrs.get(key) is None:
            continue
        vals = list(attrs[key])
        if len(vals) != 5:
            raise ValueError(f"Sliding window {key} field must specify 5 dimensions")
        batch, depth = (vals[0], vals[1]) if fmt == "NCDHW" else (vals[0], vals[4])
        if batch != 1 or depth != 1:
            raise ValueError(
                f"Current implementation does not yet support {key} in the batch and depth "
                "dimensions."
            )
        if any(v < 1 for v in vals):
            raise ValueError(f"{key} must be positive, got {vals}")
    if attrs["padding"] not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME or VALID, got {attrs['padding']!r}")


class _Geom:
    """Window geometry of one 3-D convolution or pooling: sizes per spatial dimension."""

    def __init__(self, attrs, in_spatial, k_spatial):
        fmt = attrs["data_format"]
        self.strides = _spatial(attrs["strides"], fmt)
        self.dil = _spatial(attrs.get("dilations") or [1] * 5, fmt)
        self.k = [int(k) for k in k_spatial]
        self.inp = [int(i) for i in in_spatial]
        geo = [
            window_geometry(i, k, s, d, attrs["padding"])
            for i, k, s, d in zip(self.inp, self.k, self.strides, self.dil)
        ]
        self.out = [g[0] for g in geo]
        self.pads = [(g[1], g[2]) for g in geo]
        # padded extent: every input plus whatever the last window reaches past it
        self.padded = [
            max(i + lo + hi, (o - 1) * s + (k - 1) * d + 1)
            for i, (lo, hi), o, s, k, d in zip(
                self.inp, self.pads, self.out, self.strides, self.k, self.dil
            )
        ]

    def offsets(self):
        return itertools.product(*(range(k) for k in self.k))

    def slices(self, off):
        """The padded-input index (N, D, H, W, C) that window offset `off` touches."""
        sl = [
            slice(o * d, o * d + (n - 1) * s + 1, s) if n > 0 else slice(0, 0)
            for o, d, n, s in zip(off, self.dil, self.out, self.strides)
        ]
        return (slice(None), *sl, slice(None))

    def pad(self, xp, x, value=0):
        n, c = x.shape[0], x.shape[-1]
        out = xp.full((n, *self.padded, c), value, dtype=x.dtype)
        out[self.interior()] = x
        return out

    def interior(self):
        sl = [slice(lo, lo + i) for (lo, _), i in zip(self.pads, self.inp)]
        return (slice(None), *sl, slice(None))


def _sizes(xp, value, what: str) -> list[int]:
    v = np.asarray(value.get() if hasattr(value, "get") else value)
    if v.ndim != 1 or v.shape[0] != 5:
        raise _invalid(f"{what} must be 5-dimensional, got [{','.join(map(str, v.shape))}]")
    return [int(d) for d in v]


def _rank5(x, what: str):
    if x.ndim != 5:
        raise _invalid(f"{what} must be 5-dimensional: [{','.join(map(str, x.shape))}]")


def _attrs_of(op) -> dict:
    return {k: op._attr(k) for k in op.op_def.attrs}


# -- Conv3D --------------------------------------------------------------------------------

_CONV_ATTRS = {
    "T": CONV_TYPES,
    "strides": REQUIRED,
    "padding": REQUIRED,
    "data_format": "NDHWC",
    "dilations": [1, 1, 1, 1, 1],
}


def _conv_out_shape(attrs, in_shape, filter_shape) -> tensor_shape.TensorShape:
    _check_attrs(attrs, None)
    fmt = attrs["data_format"]
    in_shape = tensor_shape.as_shape(in_shape).with_rank(5).as_list()
    kd, kh, kw, fc, oc = tensor_shape.as_shape(filter_shape).with_rank(5).as_list()
    c = in_shape[1] if fmt == "NCDHW" else in_shape[4]
    if c is not None and fc is not None and c != fc:
        raise ValueError(f"Depth of input ({c}) must equal the filter's input depth ({fc})")
    out = [
        static_out_size(i, k, s, d, attrs["padding"])
        for i, k, s, d in zip(
            _spatial(in_shape, fmt),
            (kd, kh, kw),
            _spatial(attrs["strides"], fmt),
            _spatial(attrs["dilations"], fmt),
        )
    ]
    return tensor_shape.TensorShape(_layout(in_shape[0], out, oc, fmt))


def _conv3d_shape(op):
    return [_conv_out_shape(_attrs_of(op), op.inputs[0].shape, op.inputs[1].shape)]


Conv3D = register_op(
    "Conv3D",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs=dict(_CONV_ATTRS),
    shape_fn=_conv3d_shape,
)


def _conv3d_forward(xp, g: _Geom, x, w, fmt, out_dtype):
    ct = compute_dtype(x.dtype)
    xpad = g.pad(xp, _to_last(x, fmt).astype(ct, copy=False))
    w = w.astype(ct, copy=False)
    out = xp.zeros((x.shape[0], *g.out, w.shape[-1]), ct)
    for off in g.offsets():
        out += xp.matmul(xpad[g.slices(off)], w[off])
    return _from_last(xp, out, fmt).astype(out_dtype, copy=False)


def _geom_for(attrs, x_shape, w_shape, what="input") -> _Geom:
    fmt = attrs["data_format"]
    c = x_shape[1] if fmt == "NCDHW" else x_shape[4]
    if c != w_shape[3]:
        raise _invalid(
            f"{what} depth must be evenly divisible by filter depth: {c} vs {w_shape[3]}"
        )
    return _Geom(attrs, _spatial(x_shape, fmt), w_shape[:3])


@Conv3D.kernel()
async def _conv3d(ctx, x, w):
    xp = ctx.xp
    x, w = xp.asarray(x), xp.asarray(w)
    _rank5(x, "input")
    _rank5(w, "filter")
    if 0 in w.shape:
        raise errors.InvalidArgumentError(
            None, None, "filter must not have zero elements (i.e. all dimensions must be non-zero)"
        )
    g = _geom_for(ctx.attrs, x.shape, w.shape)
    cost = float(x.shape[0] * np.prod(g.out) * w.size * x.itemsize)
    fmt = ctx.attrs["data_format"]
    return await ctx.device.compute(_conv3d_forward, xp, g, x, w, fmt, x.dtype, cost=cost)


# -- Conv3DBackpropInputV2 / Conv3DBackpropFilterV2 ---------------------------------------

_BACKPROP_ATTRS = {**_CONV_ATTRS, "Tshape": INDEX}


def _sizes_shape(op, idx: int):
    """The shape a backprop produces: its constant `*_sizes` input, else rank 5."""
    return ops.constant_shape(op.inputs[idx]).merge_with(tensor_shape.unknown_shape(5))


def _backprop_input_shape(op):
    return [_sizes_shape(op, 0)]


def _backprop_filter_shape(op):
    return [_sizes_shape(op, 1)]


Conv3DBackpropInputV2 = register_op(
    "Conv3DBackpropInputV2",
    inputs=["input_sizes: Tshape", "filter: T", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_BACKPROP_ATTRS),
    shape_fn=_backprop_input_shape,
)
Conv3DBackpropFilterV2 = register_op(
    "Conv3DBackpropFilterV2",
    inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
    outputs=["output: T"],
    attrs=dict(_CONV_ATTRS),
    shape_fn=_backprop_filter_shape,
)


def _check_dy(g: _Geom, dy_last, oc: int, n: int):
    want = [n, *g.out, oc]
    if list(dy_last.shape) != want:
        raise _invalid(
            f"Conv3DBackprop: out_backprop has shape [{','.join(map(str, dy_last.shape))}] "
            f"but the convolution gives [{','.join(map(str, want))}]"
        )


def _conv3d_backprop_input(xp, g: _Geom, w, dy, fmt, out_dtype):
    ct = compute_dtype(w.dtype)
    w = w.astype(ct, copy=False)
    dy = dy.astype(ct, copy=False)
    dxpad = xp.zeros((dy.shape[0], *g.padded, w.shape[3]), ct)
    for off in g.offsets():
        dxpad[g.slices(off)] += xp.matmul(dy, w[off].T)
    return _from_last(xp, dxpad[g.interior()], fmt).astype(out_dtype, copy=False)


@Conv3DBackpropInputV2.kernel(host_memory=("input_sizes",))
async def _conv3d_backprop_input_kernel(ctx, input_sizes, w, dy):
    xp = ctx.xp
    w, dy = xp.asarray(w), xp.asarray(dy)
    sizes = _sizes(xp, input_sizes, "input_sizes")
    _rank5(w, "filter")
    _rank5(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    g = _geom_for(ctx.attrs, sizes, w.shape)
    dy_last = _to_last(dy, fmt)
    _check_dy(g, dy_last, w.shape[4], sizes[0])
    cost = float(dy.size * w.shape[3] * np.prod(g.k) * w.itemsize)
    return await ctx.device.compute(
        _conv3d_backprop_input, xp, g, w, dy_last, fmt, w.dtype, cost=cost
    )


def _conv3d_backprop_filter(xp, g: _Geom, x, dy, w_shape, out_dtype):
    ct = compute_dtype(x.dtype)
    xpad = g.pad(xp, x.astype(ct, copy=False))
    dy2 = dy.astype(ct, copy=False).reshape(-1, w_shape[4])
    dw = xp.empty(w_shape, ct)
    for off in g.offsets():
        dw[off] = xp.matmul(xpad[g.slices(off)].reshape(-1, w_shape[3]).T, dy2)
    return dw.astype(out_dtype, copy=False)


@Conv3DBackpropFilterV2.kernel(host_memory=("filter_sizes",))
async def _conv3d_backprop_filter_kernel(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    x, dy = xp.asarray(x), xp.asarray(dy)
    w_shape = tuple(_sizes(xp, filter_sizes, "filter_sizes"))
    _rank5(x, "input")
    _rank5(dy, "out_backprop")
    fmt = ctx.attrs["data_format"]
    g = _geom_for(ctx.attrs, x.shape, w_shape)
    x_last, dy_last = _to_last(x, fmt), _to_last(dy, fmt)
    _check_dy(g, dy_last, w_shape[4], x.shape[0])
    cost = float(dy.size * w_shape[3] * np.prod(g.k) * x.itemsize)
    return await ctx.device.compute(
        _conv3d_backprop_filter, xp, g, x_last, dy_last, w_shape, x.dtype, cost=cost
    )


def _conv_attrs(op) -> dict:
    return {k: op._attr(k) for k in ("strides", "padding", "data_format", "dilations")}


def _shape_of(t):
    return array_ops.shape(t, out_type=dtypes.int32)


@Conv3D.gradient
def _conv3d_grad(op, grad):
    attrs = _conv_attrs(op)
    x, w = op.inputs
    dx = ops.apply_op("Conv3DBackpropInputV2", [_shape_of(x), w, grad], attrs).outputs[0]
    dw = ops.apply_op("Conv3DBackpropFilterV2", [x, _shape_of(w), grad], attrs).outputs[0]
    return [dx, dw]


@Conv3DBackpropInputV2.gradient
def _conv3d_backprop_input_grad(op, grad):
    attrs = _conv_attrs(op)
    _, w, dy = op.inputs
    dw = ops.apply_op("Conv3DBackpropFilterV2", [grad, _shape_of(w), dy], attrs).outputs[0]
    return [None, dw, ops.apply_op("Conv3D", [grad, w], attrs).outputs[0]]


@Conv3DBackpropFilterV2.gradient
def _conv3d_backprop_filter_grad(op, grad):
    attrs = _conv_attrs(op)
    x, _, dy = op.inputs
    dx = ops.apply_op("Conv3DBackpropInputV2", [_shape_of(x), grad, dy], attrs).outputs[0]
    return [dx, None, ops.apply_op("Conv3D", [x, grad], attrs).outputs[0]]


# -- MaxPool3D / AvgPool3D -----------------------------------------------------------------

_POOL_ATTRS = {"ksize": REQUIRED, "strides": REQUIRED, "padding": REQUIRED, "data_format": "NDHWC"}
_MAX_TYPES = TypeConstraint(["float16", "bfloat16", "float32"])


def _pool_out_shape(attrs, in_shape) -> tensor_shape.TensorShape:
    _check_attrs(attrs, "ksize")
    fmt = attrs["data_format"]
    in_shape = tensor_shape.as_shape(in_shape).with_rank(5).as_list()
    out = [
        static_out_size(i, k, s, 1, attrs["padding"])
        for i, k, s in zip(
            _spatial(in_shape, fmt), _spatial(attrs["ksize"], fmt), _spatial(attrs["strides"], fmt)
        )
    ]
    c = in_shape[1] if fmt == "NCDHW" else in_shape[4]
    return tensor_shape.TensorShape(_layout(in_shape[0], out, c, fmt))


def _pool_shape(op):
    return [_pool_out_shape(_attrs_of(op), op.inputs[0].shape)]


def _pool_geom(attrs, x_shape) -> _Geom:
    fmt = attrs["data_format"]
    return _Geom(attrs, _spatial(x_shape, fmt), _spatial(attrs["ksize"], fmt))


MaxPool3D = register_op(
    "MaxPool3D",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _MAX_TYPES, **_POOL_ATTRS},
    shape_fn=_pool_shape,
)


def _max_pool3d(xp, g: _Geom, x):
    xpad = g.pad(xp, x, value=-np.inf)
    out = None
    for off in g.offsets():
        win = xpad[g.slices(off)]
        out = win.copy() if out is None else xp.maximum(out, win, out=out)
    return out


@MaxPool3D.kernel()
async def _max_pool3d_kernel(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _rank5(x, "tensor_in")
    fmt = ctx.attrs["data_format"]
    g = _pool_geom(ctx.attrs, x.shape)
    out = await ctx.device.compute(_max_pool3d, xp, g, _to_last(x, fmt), cost=float(x.nbytes))
    return _from_last(xp, out, fmt)


MaxPool3DGrad = register_op(
    "MaxPool3DGrad",
    inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
    outputs=["output: T"],
    attrs={"T": _MAX_TYPES, "TInput": _MAX_TYPES, **_POOL_ATTRS},
    shape_fn=lambda op: [op.inputs[0].shape],
)


def _max_pool3d_grad(xp, g: _Geom, x, y, dy):
    xpad = g.pad(xp, x, value=-np.inf)
    dxpad = xp.zeros(xpad.shape, dy.dtype)
    zero = xp.zeros((), dy.dtype)
    for off in g.offsets():
        sl = g.slices(off)
        hit = xp.abs(xpad[sl] - y) < 1e-5  # TF's CPU kernel: every near-maximal element
        dxpad[sl] += xp.where(hit, dy, zero)
    return dxpad[g.interior()]


@MaxPool3DGrad.kernel()
async def _max_pool3d_grad_kernel(ctx, x, y, dy):
    xp = ctx.xp
    x, y, dy = xp.asarray(x), xp.asarray(y), xp.asarray(dy)
    _rank5(x, "orig_input")
    fmt = ctx.attrs["data_format"]
    g = _pool_geom(ctx.attrs, x.shape)
    x_l, y_l, dy_l = (_to_last(a, fmt) for a in (x, y, dy))
    if list(y_l.shape) != [x.shape[0], *g.out, x_l.shape[-1]] or y_l.shape != dy_l.shape:
        raise _invalid("MaxPool3DGrad: orig_output and grad must have the pooled shape")
    dx = await ctx.device.compute(_max_pool3d_grad, xp, g, x_l, y_l, dy_l, cost=float(x.nbytes))
    return _from_last(xp, dx, fmt)


MaxPool3DGradGrad = register_op(
    "MaxPool3DGradGrad",
    inputs=["orig_input: T", "orig_output: T", "grad: T"],
    outputs=["output: T"],
    attrs={"T": _MAX_TYPES, **_POOL_ATTRS},
    shape_fn=lambda op: [op.inputs[1].shape],
)


def _max_pool3d_grad_grad(xp, g: _Geom, x, y, ddx):
    xpad = g.pad(xp, x, value=-np.inf)
    ddxpad = g.pad(xp, ddx)
    out = xp.zeros(y.shape, ddx.dtype)
    zero = xp.zeros((), ddx.dtype)
    for off in g.offsets():
        sl = g.slices(off)
        out += xp.where(xp.abs(xpad[sl] - y) < 1e-5, ddxpad[sl], zero)
    return out


@MaxPool3DGradGrad.kernel()
async def _max_pool3d_grad_grad_kernel(ctx, x, y, ddx):
    xp = ctx.xp
    x, y, ddx = xp.asarray(x), xp.asarray(y), xp.asarray(ddx)
    _rank5(x, "orig_input")
    fmt = ctx.attrs["data_format"]
    g = _pool_geom(ctx.attrs, x.shape)
    x_l, y_l, ddx_l = (_to_last(a, fmt) for a in (x, y, ddx))
    if list(y_l.shape) != [x.shape[0], *g.out, x_l.shape[-1]] or ddx_l.shape != x_l.shape:
        raise _invalid(
            "MaxPool3DGradGrad: orig_output must have the pooled shape and grad the input's"
        )
    out = await ctx.device.compute(
        _max_pool3d_grad_grad, xp, g, x_l, y_l, ddx_l, cost=float(x.nbytes)
    )
    return _from_last(xp, out, fmt)


@MaxPool3DGrad.gradient
def _max_pool3d_grad_grad_fn(op, grad):
    """TF's _MaxPool3DGradGrad: no gradient into the forward input and output."""
    x, y = op.inputs[0], op.inputs[1]
    attrs = {k: op._attr(k) for k in _POOL_ATTRS}
    gg = ops.apply_op("MaxPool3DGradGrad", [x, y, grad], attrs).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), gg]


@MaxPool3DGradGrad.gradient
def _max_pool3d_grad_grad_grad_fn(op, grad):
    x, y = op.inputs[0], op.inputs[1]
    attrs = {k: op._attr(k) for k in _POOL_ATTRS}
    g = ops.apply_op("MaxPool3DGrad", [x, y, grad], attrs).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), g]


@MaxPool3D.gradient
def _max_pool3d_grad_fn(op, grad):
    attrs = {k: op._attr(k) for k in _POOL_ATTRS}
    return ops.apply_op("MaxPool3DGrad", [op.inputs[0], op.outputs[0], grad], attrs).outputs


AvgPool3D = register_op(
    "AvgPool3D",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": CONV_TYPES, **_POOL_ATTRS},
    shape_fn=_pool_shape,
)


def _window_counts(xp, g: _Geom, dtype):
    """In-bounds elements of each window, [1, OD, OH, OW, 1] (TF divides by these)."""
    ones = g.pad(xp, xp.ones((1, *g.inp, 1), dtype))
    counts = xp.zeros((1, *g.out, 1), dtype)
    for off in g.offsets():
        counts += ones[g.slices(off)]
    return counts


def _avg_pool3d(xp, g: _Geom, x, out_dtype):
    ct = compute_dtype(x.dtype)
    xpad = g.pad(xp, x.astype(ct, copy=False))
    total = xp.zeros((x.shape[0], *g.out, x.shape[-1]), ct)
    for off in g.offsets():
        total += xpad[g.slices(off)]
    return (total / _window_counts(xp, g, ct)).astype(out_dtype, copy=False)


@AvgPool3D.kernel()
async def _avg_pool3d_kernel(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _rank5(x, "tensor_in")
    fmt = ctx.attrs["data_format"]
    g = _pool_geom(ctx.attrs, x.shape)
    out = await ctx.device.compute(
        _avg_pool3d, xp, g, _to_last(x, fmt), x.dtype, cost=float(x.nbytes)
    )
    return _from_last(xp, out, fmt)


def _avg_grad_shape(op):
    return [_sizes_shape(op, 0)]


AvgPool3DGrad = register_op(
    "AvgPool3DGrad",
    inputs=["orig_input_shape: int32", "grad: T"],
    outputs=["output: T"],
    attrs={"T": CONV_TYPES, **_POOL_ATTRS},
    shape_fn=_avg_grad_shape,
)


def _avg_pool3d_grad(xp, g: _Geom, n: int, c: int, dy, out_dtype):
    ct = compute_dtype(dy.dtype)
    share = dy.astype(ct, copy=False) / _window_counts(xp, g, ct)
    dxpad = xp.zeros((n, *g.padded, c), ct)
    for off in g.offsets():
        dxpad[g.slices(off)] += share
    return dxpad[g.interior()].astype(out_dtype, copy=False)


@AvgPool3DGrad.kernel(host_memory=("orig_input_shape",))
async def _avg_pool3d_grad_kernel(ctx, shape, dy):
    xp = ctx.xp
    dy = xp.asarray(dy)
    try:  # the raw op takes any attrs; TF's kernel checks them when it runs
        _check_attrs(ctx.attrs, "ksize")
    except ValueError as e:
        raise _invalid(str(e)) from None
    sizes = _sizes(xp, shape, "orig_input_shape")
    fmt = ctx.attrs["data_format"]
    g = _pool_geom(ctx.attrs, sizes)
    c = sizes[1] if fmt == "NCDHW" else sizes[4]
    dy_l = _to_last(dy, fmt)
    if list(dy_l.shape) != [sizes[0], *g.out, c]:
        raise _invalid("AvgPool3DGrad: grad must have the pooled shape")
    dx = await ctx.device.compute(
        _avg_pool3d_grad, xp, g, sizes[0], c, dy_l, dy.dtype, cost=float(dy.nbytes)
    )
    return _from_last(xp, dx, fmt)


@AvgPool3D.gradient
def _avg_pool3d_grad_fn(op, grad):
    attrs = {k: op._attr(k) for k in _POOL_ATTRS}
    return [ops.apply_op("AvgPool3DGrad", [_shape_of(op.inputs[0]), grad], attrs).outputs[0]]


@AvgPool3DGrad.gradient
def _avg_pool3d_grad_grad_fn(op, grad):
    attrs = {k: op._attr(k) for k in _POOL_ATTRS}
    return [None, ops.apply_op("AvgPool3D", [grad], attrs).outputs[0]]


# -- builders (af.nn) ----------------------------------------------------------------------


def _fmt(data_format) -> str:
    fmt = data_format or "NDHWC"
    if fmt not in _FORMATS:
        raise ValueError(f"data_format must be 'NDHWC' or 'NCDHW', got {data_format!r}")
    return fmt


def _five(value, name: str, fmt: str, default: int = 1) -> list[int]:
    """TF's `_get_sequence` for 3 spatial dimensions: an int, 1, 3 or 5 values."""
    if value is None:
        return [default] * 5
    if isinstance(value, int | np.integer):
        value = [int(value)]
    value = [int(v) for v in value]
    if len(value) == 5:
        return value
    if len(value) == 1:
        value = value * 3
    if len(value) != 3:
        raise ValueError(
            f"{name} should be of length 1, 3 or 5. Received: {name}={value} of length "
            f"{len(value)}"
        )
    return [1, 1, *value] if fmt == "NCDHW" else [1, *value, 1]


def _padding(padding) -> str:
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return p


def _pick(a, a_name, b, b_name):
    return deprecated_argument_lookup(b_name, b, a_name, a)


def _conv_builder_attrs(strides, padding, data_format, dilations) -> dict:
    if strides is None or padding is None:
        raise ValueError("conv3d needs strides and padding")
    fmt = _fmt(data_format)
    return {
        "strides": [int(s) for s in strides],
        "padding": _padding(padding),
        "data_format": fmt,
        "dilations": [int(d) for d in (dilations or [1] * 5)],
    }


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",  # noqa: A002
           dilations=(1, 1, 1, 1, 1), name=None, filters=None):  # fmt: skip
    """3-D convolution of `input` [N, D, H, W, C] with `filter` [KD, KH, KW, C, OC];
    `strides` and `dilations` are 5 values (1 in the batch and depth dimensions).

    Raises:
      ValueError: a bad data_format, padding, stride or dilation, or depths that differ
        (at build time).
      InvalidArgumentError: at run time, input and filter depths differ.
    """
    filter = _pick(filter, "filter", filters, "filters")  # noqa: A001
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    return ops.apply_op("Conv3D", [input, filter], attrs, name=name).outputs[0]


def conv3d_backprop_filter_v2(
    input,  # noqa: A002 - TF's name
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NDHWC",
    dilations=(1, 1, 1, 1, 1),
    name=None,
):
    """The gradient of conv3d with respect to its filter (op Conv3DBackpropFilterV2)."""
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    return ops.apply_op(
        "Conv3DBackpropFilterV2", [input, filter_sizes, out_backprop], attrs, name=name
    ).outputs[0]


conv3d_backprop_filter = conv3d_backprop_filter_v2


def conv3d_transpose(value, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding="SAME", data_format="NDHWC", name=None, input=None,  # noqa: A002
                     filters=None, dilations=None):  # fmt: skip
    """The transpose of conv3d: `filter` is [KD, KH, KW, out_channels, in_channels] and
    `output_shape` the 5 values of the result (op Conv3DBackpropInputV2).

    Raises:
      ValueError: value's channels differ from filter's last dimension, or output_shape
        is not 5 values.
    """
    value = _pick(value, "value", input, "input")
    filter = _pick(filter, "filter", filters, "filters")  # noqa: A001
    attrs = _conv_builder_attrs(strides, padding, data_format, dilations)
    with ops.name_scope(name, "conv3d_transpose", [value, filter, output_shape]) as scope:
        value = ops.convert_to_tensor(value, name="value")
        filter = ops.convert_to_tensor(filter, name="filter")  # noqa: A001
        axis = 1 if attrs["data_format"] == "NCDHW" else 4
        vc = tensor_shape.dimension_value(value.shape.with_rank(5)[axis])
        fc = tensor_shape.dimension_value(filter.shape.with_rank(5)[4])
        if vc is not None and fc is not None and vc != fc:
            raise ValueError(
                f"input channels does not match filter's input channels, {vc} != {fc}"
            )
        if not isinstance(output_shape, ops.Tensor):
            output_shape = np.asarray(
                [int(tensor_shape.dimension_value(d)) for d in output_shape], np.int32
            )
            if output_shape.shape != (5,):
                raise ValueError("output_shape must have shape (5,)")
        output_shape = ops.convert_to_tensor(output_shape, name="output_shape")
        return ops.apply_op(
            "Conv3DBackpropInputV2", [output_shape, filter, value], attrs, name=scope
        ).outputs[0]


def _pool(op_type, input, ksize, strides, padding, data_format, name):  # noqa: A002
    fmt = _fmt(data_format)
    attrs = {
        "ksize": _five(ksize, "ksize", fmt),
        "strides": _five(strides, "strides", fmt),
        "padding": _padding(padding),
        "data_format": fmt,
    }
    return ops.apply_op(op_type, [input], attrs, name=name).outputs[0]


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """3-D max pooling of [N, D, H, W, C] (op MaxPool3D; float16/bfloat16/float32 as TF).

    Raises:
      ValueError: a bad ksize, strides, padding or data_format.
      TypeError: an input dtype MaxPool3D does not take.
    """
    return _pool("MaxPool3D", input, ksize, strides, padding, data_format, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """3-D average pooling (op AvgPool3D): each window's mean over its in-bounds elements.

    Raises:
      ValueError: a bad ksize, strides, padding or data_format.
    """
    return _pool("AvgPool3D", input, ksize, strides, padding, data_format, name)
