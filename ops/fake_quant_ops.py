"""TF's fake quantization for quantization-aware training: FakeQuantWithMinMaxArgs /
Vars / VarsPerChannel, their Gradient ops and the gradients TF registers for them (the
straight-through estimator: the gradient passes inside the nudged range; with Vars, what
falls outside sums into min's or max's gradient).

Invariant: every float step is float32 in TF's order of operations (its Nudge, its
functors' Eigen expressions), so the results are TF's bits, not just close to them.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.math_helpers import _quiet
from asyncflow.registry import FLOATING, register_op

__all__ = [
    "fake_quant_with_min_max_args",
    "fake_quant_with_min_max_args_gradient",
    "fake_quant_with_min_max_vars",
    "fake_quant_with_min_max_vars_gradient",
    "fake_quant_with_min_max_vars_per_channel",
    "fake_quant_with_min_max_vars_per_channel_gradient",
]

_F32 = np.float32
_FQ_ATTRS = {"num_bits": 8, "narrow_range": False}


def _fmt(v) -> str:
    """A float as TF's StrCat writes it: the shortest of %.6g / %.9g that round-trips."""
    s = f"{float(v):.6g}"
    return s if _F32(s) == _F32(v) else f"{float(v):.9g}"


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- shape-function helpers with TF's messages -------------------------------------------


def _with_rank(shape, rank: int):
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {shape.ndims}")
    return shape.with_rank(rank) if shape.ndims is None else shape


def _with_rank_at_least(shape, rank: int):
    if shape.ndims is not None and shape.ndims < rank:
        raise ValueError(f"Shape must be at least rank {rank} but is rank {shape.ndims}")
    return shape


def _with_rank_at_most(shape, rank: int):
    if shape.ndims is not None and shape.ndims > rank:
        raise ValueError(f"Shape must be at most rank {rank} but is rank {shape.ndims}")
    return shape


def _merge_dim(a, b):
    a, b = tensor_shape.as_dimension(a), tensor_shape.as_dimension(b)
    if a.value is not None and b.value is not None and a.value != b.value:
        raise ValueError(f"Dimensions must be equal, but are {a.value} and {b.value}")
    return a if a.value is not None else b


# -- fake quantization -------------------------------------------------------------------


def _quant_range(attrs) -> tuple[int, int]:
    num_bits = int(attrs["num_bits"])
    if not 2 <= num_bits <= 16:
        raise _invalid("num_bits must be between 2 and 16, inclusive")
    return (1 if attrs["narrow_range"] else 0), (1 << num_bits) - 1


def _round_away(xp, v):
    """std::round: halves away from zero (exact: v - trunc(v) is exact in float)."""
    r = xp.trunc(v)
    return r + xp.where(xp.abs(v - r) >= 0.5, xp.sign(v), 0).astype(v.dtype)


def _nudge(xp, lo, hi, quant_min: int, quant_max: int):
    """TF's Nudge, elementwise over float32 arrays lo, hi (one per channel): the range
    moved so that 0.0 is exactly representable; returns (nudged_min, nudged_max,
    scale, inv_scale)."""
    qmin, qmax = _F32(quant_min), _F32(quant_max)
    scale = (hi - lo) / (qmax - qmin)
    inv_scale = (qmax - qmin) / (hi - lo)
    zero_from_min = qmin - lo / scale
    zero = xp.where(
        zero_from_min < qmin,
        qmin,
        xp.where(zero_from_min > qmax, qmax, _round_away(xp, zero_from_min)),
    )
    # (TF keeps the zero point as a uint16, then subtracts it from a float)
    zero = xp.nan_to_num(zero).astype(np.uint16).astype(_F32)
    return (qmin - zero) * scale, (qmax - zero) * scale, scale, inv_scale


def _fake_quant(xp, x, lo, hi, qrange, divide: bool):
    """The forward functor, x of shape [..., d] against lo/hi of shape [d] or []."""
    nmin, nmax, scale, inv = _nudge(xp, lo, hi, *qrange)
    zero = xp.floor(-nmin * inv + _F32(0.5))
    shifted = xp.maximum(xp.minimum(x, nmax), nmin) - nmin
    q = shifted / scale if divide else shifted * inv
    out = xp.floor(q - zero + _F32(0.5)) * scale
    both_zero = (lo == 0) & (hi == 0)  # (the Vars functors' special case: all zeros)
    return xp.where(both_zero, _F32(0), out).astype(_F32)


def _fake_quant_masks(xp, x, lo, hi, qrange):
    nmin, nmax, _, _ = _nudge(xp, lo, hi, *qrange)
    return (x >= nmin) & (x <= nmax), x < nmin, x > nmax


def _f32(xp, v):
    return xp.asarray(v, dtype=_F32)


def _check_args_range(attrs) -> tuple[float, float]:
    lo, hi = _F32(attrs["min"]), _F32(attrs["max"])
    if not lo < hi:
        raise _invalid(f"min has to be smaller than max, was: {_fmt(lo)} >= {_fmt(hi)}")
    return lo, hi


def _unchanged_shape(op):
    return [op.inputs[0].shape]


FakeQuantWithMinMaxArgs = register_op(
    "FakeQuantWithMinMaxArgs",
    inputs=["inputs: float32"],
    outputs=["outputs: float32"],
    attrs={"min": -6.0, "max": 6.0, **_FQ_ATTRS},
    shape_fn=_unchanged_shape,
)


@FakeQuantWithMinMaxArgs.kernel()
async def _fq_args(ctx, x):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    lo, hi = _check_args_range(ctx.attrs)
    x = _f32(xp, x)
    return await ctx.compute(
        _quiet, xp, _fake_quant, xp, x, _f32(xp, lo), _f32(xp, hi), qrange, False
    )


def _same_shape(op_type: str, g, x):
    if g.shape != x.shape:
        raise _invalid(
            f"Inputs to operation {op_type} of type {op_type} must have the same size and "
            f"shape.  Input 0: {_shape_str(g.shape)} != input 1: {_shape_str(x.shape)}"
        )


FakeQuantWithMinMaxArgsGradient = register_op(
    "FakeQuantWithMinMaxArgsGradient",
    inputs=["gradients: float32", "inputs: float32"],
    outputs=["backprops: float32"],
    attrs={"min": -6.0, "max": 6.0, **_FQ_ATTRS},
    shape_fn=_unchanged_shape,
)


@FakeQuantWithMinMaxArgsGradient.kernel()
async def _fq_args_grad(ctx, g, x):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    lo, hi = _check_args_range(ctx.attrs)
    g, x = _f32(xp, g), _f32(xp, x)
    _same_shape("FakeQuantWithMinMaxArgsGradient", g, x)
    return await ctx.compute(_quiet, xp, _args_grad, xp, g, x, _f32(xp, lo), _f32(xp, hi), qrange)


def _args_grad(xp, g, x, lo, hi, qrange):
    inside, _, _ = _fake_quant_masks(xp, x, lo, hi, qrange)
    return g * inside.astype(_F32)


@FakeQuantWithMinMaxArgs.gradient
def _fq_args_gradient(op, grad):
    return [
        fake_quant_with_min_max_args_gradient(
            grad,
            op.inputs[0],
            min=op._attr("min"),
            max=op._attr("max"),
            num_bits=op._attr("num_bits"),
            narrow_range=op._attr("narrow_range"),
        )
    ]


def _vars_shape(op):
    for t in op.inputs[-2:]:
        _with_rank(t.shape, 0)
    n = len(op.outputs)
    return [
        op.inputs[0].shape if n == 1 else op.inputs[0].shape.merge_with(op.inputs[1].shape)
    ] + [tensor_shape.TensorShape([])] * (n - 1)


def _scalar_range(lo, hi):
    for name, v in (("min", lo), ("max", hi)):
        if v.ndim != 0:
            raise _invalid(f"`{name}` must be rank 0 but is rank {v.ndim}")


FakeQuantWithMinMaxVars = register_op(
    "FakeQuantWithMinMaxVars",
    inputs=["inputs: float32", "min: float32", "max: float32"],
    outputs=["outputs: float32"],
    attrs=dict(_FQ_ATTRS),
    shape_fn=_vars_shape,
)


@FakeQuantWithMinMaxVars.kernel()
async def _fq_vars(ctx, x, lo, hi):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    x, lo, hi = _f32(xp, x), _f32(xp, lo), _f32(xp, hi)
    _scalar_range(lo, hi)
    return await ctx.compute(_quiet, xp, _fake_quant, xp, x, lo, hi, qrange, True)


def _vars_grad(xp, g, x, lo, hi, qrange, axis):
    """(backprops wrt input, wrt min, wrt max): the gradient passes inside the nudged
    range; what falls below (above) it sums into min's (max's)."""
    zero = _F32(0)
    inside, below, above = _fake_quant_masks(xp, x, lo, hi, qrange)
    both_zero = (lo == 0) & (hi == 0)  # (then the input's gradient passes whole)
    dx = g * (inside | both_zero).astype(_F32)
    dmin = (g * below.astype(_F32)).sum(axis=axis, dtype=_F32)
    dmax = (g * above.astype(_F32)).sum(axis=axis, dtype=_F32)
    dmin = xp.where(both_zero, zero, dmin).astype(_F32)
    dmax = xp.where(both_zero, zero, dmax).astype(_F32)
    return dx, dmin, dmax


FakeQuantWithMinMaxVarsGradient = register_op(
    "FakeQuantWithMinMaxVarsGradient",
    inputs=["gradients: float32", "inputs: float32", "min: float32", "max: float32"],
    outputs=[
        "backprops_wrt_input: float32",
        "backprop_wrt_min: float32",
        "backprop_wrt_max: float32",
    ],
    attrs=dict(_FQ_ATTRS),
    shape_fn=_vars_shape,
)


@FakeQuantWithMinMaxVarsGradient.kernel()
async def _fq_vars_grad(ctx, g, x, lo, hi):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    g, x, lo, hi = _f32(xp, g), _f32(xp, x), _f32(xp, lo), _f32(xp, hi)
    _same_shape("FakeQuantWithMinMaxVarsGradient", g, x)
    _scalar_range(lo, hi)
    return await ctx.compute(_quiet, xp, _vars_grad, xp, g, x, lo, hi, qrange, None)


@FakeQuantWithMinMaxVars.gradient
def _fq_vars_gradient(op, grad):
    return fake_quant_with_min_max_vars_gradient(
        grad,
        op.inputs[0],
        op.inputs[1],
        op.inputs[2],
        num_bits=op._attr("num_bits"),
        narrow_range=op._attr("narrow_range"),
    )


def _per_channel_shape(op):
    x = op.inputs[-3].shape
    if len(op.inputs) == 4:  # the gradient op takes at most rank 4 (TF's shape function)
        x = _with_rank_at_most(x, 4)
        x = x.merge_with(op.inputs[0].shape)
    x = _with_rank_at_least(x, 1)
    lo = _with_rank(op.inputs[-2].shape, 1)
    hi = _with_rank(op.inputs[-1].shape, 1)
    depth = _merge_dim(lo[0], hi[0])
    if x.ndims is not None:
        depth = _merge_dim(x[-1], depth)
    if len(op.outputs) == 1:
        return [x]
    return [x, tensor_shape.TensorShape([depth]), tensor_shape.TensorShape([depth])]


def _channel_range(x, lo, hi):
    if x.ndim < 1:
        raise _invalid(f"inputs must be at least rank 1 but is rank {x.ndim}")
    depth = x.shape[-1]
    for name, v in (("min", lo), ("max", hi)):
        if v.ndim != 1:
            raise _invalid(f"`{name}` must be rank 1 but is rank {v.ndim}")
        if v.shape[0] != depth:
            raise _invalid(f"{name} has incorrect size, expected {depth} was {v.shape[0]}")


FakeQuantWithMinMaxVarsPerChannel = register_op(
    "FakeQuantWithMinMaxVarsPerChannel",
    inputs=["inputs: float32", "min: float32", "max: float32"],
    outputs=["outputs: float32"],
    attrs=dict(_FQ_ATTRS),
    shape_fn=_per_channel_shape,
)


@FakeQuantWithMinMaxVarsPerChannel.kernel()
async def _fq_per_channel(ctx, x, lo, hi):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    x, lo, hi = _f32(xp, x), _f32(xp, lo), _f32(xp, hi)
    _channel_range(x, lo, hi)
    return await ctx.compute(_quiet, xp, _fake_quant, xp, x, lo, hi, qrange, False)


FakeQuantWithMinMaxVarsPerChannelGradient = register_op(
    "FakeQuantWithMinMaxVarsPerChannelGradient",
    inputs=["gradients: float32", "inputs: float32", "min: float32", "max: float32"],
    outputs=[
        "backprops_wrt_input: float32",
        "backprop_wrt_min: float32",
        "backprop_wrt_max: float32",
    ],
    attrs=dict(_FQ_ATTRS),
    shape_fn=_per_channel_shape,
)


@FakeQuantWithMinMaxVarsPerChannelGradient.kernel()
async def _fq_per_channel_grad(ctx, g, x, lo, hi):
    xp = ctx.xp
    qrange = _quant_range(ctx.attrs)
    g, x, lo, hi = _f32(xp, g), _f32(xp, x), _f32(xp, lo), _f32(xp, hi)
    _same_shape("FakeQuantWithMinMaxVarsPerChannelGradient", g, x)
    _channel_range(x, lo, hi)
    axis = tuple(range(x.ndim - 1))
    return await ctx.compute(_quiet, xp, _vars_grad, xp, g, x, lo, hi, qrange, axis)


@FakeQuantWithMinMaxVarsPerChannel.gradient
def _fq_per_channel_gradient(op, grad):
    return fake_quant_with_min_max_vars_per_channel_gradient(
        grad,
        op.inputs[0],
        op.inputs[1],
        op.inputs[2],
        num_bits=op._attr("num_bits"),
        narrow_range=op._attr("narrow_range"),
    )


def _fq_attrs(num_bits, narrow_range) -> dict:
    return {"num_bits": int(num_bits), "narrow_range": bool(narrow_range)}


def fake_quant_with_min_max_args(
    inputs,
    min=-6,
    max=6,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """`tf.quantization.fake_quant_with_min_max_args`: inputs clamped to [min, max]
    (nudged so 0.0 is exact) and rounded to one of 2^num_bits levels, still float32.

    Raises:
      InvalidArgumentError (at run time): min >= max, num_bits outside [2, 16].
    """
    attrs = {"min": float(min), "max": float(max), **_fq_attrs(num_bits, narrow_range)}
    op = ops.apply_op("FakeQuantWithMinMaxArgs", [inputs], attrs, name=name)
    return op.outputs[0]


def fake_quant_with_min_max_args_gradient(
    gradients,
    inputs,
    min=-6,
    max=6,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """The gradient of fake_quant_with_min_max_args: `gradients` where inputs lie in
    the nudged [min, max], else 0."""
    attrs = {"min": float(min), "max": float(max), **_fq_attrs(num_bits, narrow_range)}
    op = ops.apply_op("FakeQuantWithMinMaxArgsGradient", [gradients, inputs], attrs, name=name)
    return op.outputs[0]


def fake_quant_with_min_max_vars(
    inputs,
    min,
    max,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """`tf.quantization.fake_quant_with_min_max_vars`: as ..._args with the range given
    by scalar float tensors (variables trained by the gradient); min == max == 0 gives 0.

    Raises:
      ValueError: min or max not scalars (statically).
      InvalidArgumentError (at run time): num_bits outside [2, 16], min/max not scalars.
    """
    attrs = _fq_attrs(num_bits, narrow_range)
    return ops.apply_op("FakeQuantWithMinMaxVars", [inputs, min, max], attrs, name=name).outputs[0]


def fake_quant_with_min_max_vars_gradient(
    gradients,
    inputs,
    min,
    max,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """The gradient of fake_quant_with_min_max_vars: (backprops_wrt_input,
    backprop_wrt_min, backprop_wrt_max)."""
    attrs = _fq_attrs(num_bits, narrow_range)
    op = ops.apply_op(
        "FakeQuantWithMinMaxVarsGradient", [gradients, inputs, min, max], attrs, name=name
    )
    return op.outputs


def fake_quant_with_min_max_vars_per_channel(
    inputs,
    min,
    max,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """`tf.quantization.fake_quant_with_min_max_vars_per_channel`: one [min, max]
    range per channel of the last dimension (min, max of shape [d]).

    Raises:
      ValueError: min/max not vectors, or their size not the last dimension (statically).
      InvalidArgumentError (at run time): the same, and num_bits outside [2, 16].
    """
    attrs = _fq_attrs(num_bits, narrow_range)
    op = ops.apply_op("FakeQuantWithMinMaxVarsPerChannel", [inputs, min, max], attrs, name=name)
    return op.outputs[0]


def fake_quant_with_min_max_vars_per_channel_gradient(
    gradients,
    inputs,
    min,
    max,
    num_bits=8,
    narrow_range=False,
    name=None,  # noqa: A002
):
    """The gradient of fake_quant_with_min_max_vars_per_channel (inputs of rank 1 to 4)."""
    attrs = _fq_attrs(num_bits, narrow_range)
    op = ops.apply_op(
        "FakeQuantWithMinMaxVarsPerChannelGradient",
        [gradients, inputs, min, max],
        attrs,
        name=name,
    )
    return op.outputs


# -- QuantizeAndDequantizeV2 ---------------------------------------------------------------
#
# TF's QuantizeAndDequantizeOneScaleFunctor (and its per-channel twin): the range (given,
# or the input's own min and max) sets the scale that maps it onto the integer range
# without moving 0; the input is scaled, rounded and scaled back, in the input's type.
# The op do_quantize_training_on_graphdef inserts; its gradient passes straight through.

QuantizeAndDequantizeV2 = register_op(
    "QuantizeAndDequantizeV2",
    inputs=["input: T", "input_min: T", "input_max: T"],
    outputs=["output: T"],
    attrs={
        "signed_input": True,
        "num_bits": 8,
        "range_given": False,
        "T": FLOATING,
        "round_mode": "HALF_TO_EVEN",
        "narrow_range": False,
        "axis": -1,
    },
    shape_fn=lambda op: _qdq_shape(op),
)


def _qdq_shape(op):
    """TF's: the range is scalars, or vectors when quantizing per channel (axis != -1)."""
    rank = 0 if op._attr("axis") == -1 else 1
    for t in op.inputs[1:3]:
        t.shape.with_rank(rank)
    return [op.inputs[0].shape]


def _qdq_attrs(attrs, rank: int) -> tuple[bool, int, int, str]:
    signed, bits, axis = bool(attrs["signed_input"]), int(attrs["num_bits"]), int(attrs["axis"])
    if not 0 < bits < (62 if signed else 63):
        raise _invalid(f"num_bits is out of range: {bits} with signed_input_ {int(signed)}")
    mode = attrs["round_mode"]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("HALF_UP", "HALF_TO_EVEN"):
        raise _invalid(f"Round mode string must be 'HALF_UP' or 'HALF_TO_EVEN', is '{mode}'")
    if axis < -1:
        raise _invalid(f"Axis must be at least -1. Found {axis}")
    if axis != -1 and axis >= rank:
        raise _invalid(f"Shape must be at least rank {axis + 1} but is rank {rank}")
    return signed, bits, axis, mode


def _qdq(x, lo, hi, signed, bits, narrow, mode, range_given):
    """One scale per element of lo/hi (arrays broadcasting against x), as TF's functor."""
    t = x.dtype.type
    qmin = (-(1 << (bits - 1)) + (1 if narrow else 0)) if signed else 0
    qmax = ((1 << (bits - 1)) - 1) if signed else (1 << bits) - 1
    qmin_t, qmax_t, big = t(qmin), t(qmax), np.finfo(x.dtype).max
    with np.errstate(divide="ignore", invalid="ignore"):
        from_min = np.where(qmin_t * lo > 0, qmin_t / lo, big).astype(x.dtype)
        from_max = np.where(qmax_t * hi > 0, qmax_t / hi, big).astype(x.dtype)
        use_min = from_min < from_max
        scale = np.where(use_min, from_min, from_max)
        inverse = np.where(use_min, lo / qmin_t, hi / qmax_t).astype(x.dtype)
        hi = np.where(use_min, qmax_t * inverse, hi).astype(x.dtype)
        lo = np.where(use_min, lo, qmin_t * inverse).astype(x.dtype)
        if range_given:
            x = np.maximum(np.minimum(x, hi), lo)
        v = x * scale
        v = np.rint(v) if mode == "HALF_TO_EVEN" else np.floor(v + t(0.5))
        return (v * inverse).astype(x.dtype)


@QuantizeAndDequantizeV2.kernel("CPU")
async def _quantize_and_dequantize_v2(ctx, x, input_min, input_max):
    a = ctx.attrs
    x = np.asarray(x)
    signed, bits, axis, mode = _qdq_attrs(a, x.ndim)
    lo, hi = np.asarray(input_min, x.dtype), np.asarray(input_max, x.dtype)
    depth = 1 if axis == -1 else x.shape[axis]
    if a["range_given"]:
        # TF 2.21's CPU kernel (V2 and V4) takes a given range as scalars only: per
        # channel (axis != -1) it refuses the vectors its shape function requires.
        for name, v in (("input_min", lo), ("input_max", hi)):
            if v.ndim != 0 or axis != -1:
                raise _invalid(f"{name} must be a scalar.")
        if np.any(lo > hi):
            i = int(np.argmax(lo > hi))
            raise _invalid(
                f"Invalid range: input_min {_fmt(lo.ravel()[i])} > input_max {_fmt(hi.ravel()[i])}"
            )
    elif x.size == 0:
        return x.copy()
    elif axis == -1:
        lo, hi = x.min(), x.max()
    else:
        moved = np.moveaxis(x, axis, -1).reshape(-1, depth)
        lo, hi = moved.min(axis=0), moved.max(axis=0)
    if axis != -1:
        shape = [1] * x.ndim
        shape[axis] = depth
        lo, hi = lo.reshape(shape), hi.reshape(shape)
    args = (signed, bits, bool(a["narrow_range"]), mode, bool(a["range_given"]))
    return await ctx.compute(_qdq, x, lo, hi, *args)


@QuantizeAndDequantizeV2.gradient
def _quantize_and_dequantize_v2_grad(op, grad):
    return [grad, None, None]
