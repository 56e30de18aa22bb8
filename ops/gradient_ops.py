"""Ops that exist for automatic differentiation, and the helpers gradient functions share.

StopGradient and PreventGradient are identities that the gradient search treats
specially; BroadcastGradientArgs, UnsortedSegmentSum, StridedSliceGrad, MirrorPadGrad,
Cumsum and Cumprod are the run-time pieces gradient functions of other families build
(TF's `gen_array_ops`/`gen_math_ops` counterparts).

The helpers below (`shape`, `reshape`, `reduce_sum`, `broadcast_reduce`, ...) build ops
through `apply_op` by op type only, so this module imports no other op family: every
family may import it at load time without an import cycle.

Invariant: a helper never changes what a gradient computes for a dtype it was not
given: gradients keep the dtype of the tensor they differentiate.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.ops import device_indexing
from asyncflow.ops.math_helpers import scatter_at, to_host
from asyncflow.ops.strided_slice_spec import (
    MASK_DEFAULTS,
    SliceError,
    basic_index,
    slice_masks,
    strided_slice_spec,
)
from asyncflow.registry import ANY, INDEX, NUMERIC, NotDifferentiable, register_op

__all__ = [
    "stop_gradient",
    "unsorted_segment_sum",
    "cumsum",
    "cumprod",
]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _same_shape(op):
    return [op.inputs[0].shape]


# -- StopGradient, PreventGradient -----------------------------------------------------------

StopGradient = register_op(
    "StopGradient", inputs=["input: T"], outputs=["output: T"], attrs={"T": ANY},
    shape_fn=_same_shape,
)  # fmt: skip
PreventGradient = register_op(
    "PreventGradient", inputs=["input: T"], outputs=["output: T"],
    attrs={"T": ANY, "message": ""}, shape_fn=_same_shape,
)  # fmt: skip


@StopGradient.kernel()
@PreventGradient.kernel()
async def _identity(ctx, x):
    return x


NotDifferentiable("StopGradient")


@PreventGradient.gradient
def _prevent_gradient_grad(op, grad):
    raise LookupError(f"Gradient explicitly disabled. Reason: {op._attr('message')}")


def stop_gradient(input, name=None):  # noqa: A002 - TF's name
    """`tf.stop_gradient`: the input's value; `gradients` treats it as a constant."""
    return ops.apply_op("StopGradient", [input], name=name).outputs[0]


def prevent_gradient(input, message="", name=None):  # noqa: A002 - TF's name
    """The input's value; asking for a gradient through it raises LookupError."""
    return ops.apply_op("PreventGradient", [input], {"message": message}, name=name).outputs[0]


# -- BroadcastGradientArgs -------------------------------------------------------------------


def _bcast_reduction_axes(s0, s1):
    """TF's BCast gradient reduction indices for shapes s0, s1 (lists of ints)."""
    n = max(len(s0), len(s1))
    p0 = [1] * (n - len(s0)) + list(s0)
    p1 = [1] * (n - len(s1)) + list(s1)
    r0, r1 = [], []
    for i, (a, b) in enumerate(zip(p0, p1)):
        if a != b and a != 1 and b != 1:
            raise _invalid(f"Incompatible shapes: {_shape_str(s0)} vs. {_shape_str(s1)}")
        if a == 1 and b == 1:
            # TF reduces over axes where both are 1 too (a no-op sum).
            r0.append(i)
            r1.append(i)
        elif a == 1:
            r0.append(i)
        elif b == 1:
            r1.append(i)
    return r0, r1


BroadcastGradientArgs = register_op(
    "BroadcastGradientArgs", inputs=["s0: T", "s1: T"], outputs=["r0: T", "r1: T"],
    attrs={"T": INDEX}, shape_fn=lambda op: [[None], [None]],
)  # fmt: skip


@BroadcastGradientArgs.kernel(host_memory=("s0", "s1", "r0", "r1"))
async def _broadcast_gradient_args(ctx, s0, s1):
    s0, s1 = np.asarray(s0), np.asarray(s1)
    if s0.ndim != 1 or s1.ndim != 1:
        raise _invalid("BroadcastGradientArgs needs two vectors")
    r0, r1 = _bcast_reduction_axes(s0.tolist(), s1.tolist())
    dt = ctx.attrs["T"].as_numpy_dtype
    return np.asarray(r0, dtype=dt), np.asarray(r1, dtype=dt)


NotDifferentiable("BroadcastGradientArgs")


# -- UnsortedSegmentSum ----------------------------------------------------------------------


def _segment_sum_shape(op):
    data, ids, num = op.inputs
    n = ops.constant_value(num)
    if data.shape.ndims is None or ids.shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    tail = data.shape[ids.shape.ndims :]
    data.shape[: ids.shape.ndims].merge_with(ids.shape)
    return [tensor_shape.TensorShape([None if n is None else int(n)]).concatenate(tail)]


UnsortedSegmentSum = register_op(
    "UnsortedSegmentSum",
    inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
    outputs=["output: T"],
    attrs={"T": NUMERIC, "Tindices": INDEX, "Tnumsegments": INDEX},
    shape_fn=_segment_sum_shape,
)


def _segment_sum_value(xp, data, ids, n):
    out = xp.zeros((n,) + data.shape[ids.ndim :], dtype=data.dtype)
    keep = ids >= 0  # TF drops negative ids
    flat_ids = ids[keep]
    scatter_at(xp, "add", out, flat_ids, data[keep])
    return out


@UnsortedSegmentSum.kernel(host_memory=("num_segments",))
async def _unsorted_segment_sum(ctx, data, segment_ids, num_segments):
    xp = ctx.xp
    data, ids = xp.asarray(data), xp.asarray(segment_ids)
    if np.ndim(num_segments) != 0:
        raise _invalid(
            f"num_segments should be a scalar, not shape {_shape_str(np.shape(num_segments))}"
        )
    n = int(num_segments)
    if n < 0:
        raise _invalid(f"Input num_segments == {n} must not be negative.")
    if data.shape[: ids.ndim] != ids.shape:
        raise _invalid(
            f"data.shape = {_shape_str(data.shape)} does not start with segment_ids.shape = "
            f"{_shape_str(ids.shape)}"
        )
    if xp is not np:  # TF's GPU kernel: no host check, rows of ids out of range dropped
        ctx.device.check_alloc(
            n * int(np.prod(data.shape[ids.ndim :], dtype=np.int64)), ctx.attrs["T"]
        )
        return await ctx.device.compute(device_indexing.segment_sum, xp, data, ids, n, scatter_at)
    bad = ids >= n
    if to_host(xp, bad.any()):
        ids = to_host(xp, ids)
        i = int(np.argwhere(ids.reshape(-1) >= n)[0][0])
        raise _invalid(f"segment_ids[{i}] = {int(ids.reshape(-1)[i])} is out of range [0, {n})")
    ctx.device.check_alloc(
        n * int(np.prod(data.shape[ids.ndim :], dtype=np.int64)), ctx.attrs["T"]
    )
    return await ctx.device.compute(_segment_sum_value, xp, data, ids, n)


@UnsortedSegmentSum.gradient
def _unsorted_segment_sum_grad(op, grad):
    ids = op.inputs[1]
    # Gather with negative ids clamped to 0, then zero the rows of dropped (negative) ids.
    safe = ops.apply_op("Maximum", [ids, zeros_like(ids)]).outputs[0]
    gathered = ops.apply_op("GatherV2", [grad, safe, constant(0, ids.dtype)]).outputs[0]
    keep = cast(ops.apply_op("GreaterEqual", [ids, zeros_like(ids)]).outputs[0], grad.dtype)
    rank_ids, rank_g = ids.shape.ndims, gathered.shape.ndims
    if rank_ids is not None and rank_g is not None and rank_g > rank_ids:
        keep = reshape(keep, concat([shape(ids), constant([1] * (rank_g - rank_ids))]))
    return [ops.apply_op("Mul", [gathered, keep]).outputs[0], None, None]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """`tf.math.unsorted_segment_sum`: output[i] = sum of data[j] with segment_ids[j] == i.

    Negative ids are dropped.

    Raises:
      InvalidArgumentError: (at run time) an id >= num_segments, or mismatched shapes.
    """
    if _ragged.is_ragged(data):
        return _ragged.unsorted_segment("Sum", data, segment_ids, num_segments, name)
    return ops.apply_op(
        "UnsortedSegmentSum", [data, segment_ids, num_segments], name=name
    ).outputs[0]


# -- StridedSliceGrad ------------------------------------------------------------------------

StridedSliceGrad = register_op(
    "StridedSliceGrad",
    inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
    outputs=["output: T"],
    attrs={
        "T": ANY,
        "Index": INDEX,
        **MASK_DEFAULTS,
    },
    shape_fn=lambda op: [ops.constant_shape(op.inputs[0])],
)


@StridedSliceGrad.kernel(host_memory=("shape", "begin", "end", "strides"))
async def _strided_slice_grad(ctx, shape_, begin, end, strides, dy):
    dims = [int(d) for d in np.asarray(shape_).reshape(-1)]
    ctx.device.check_alloc(math.prod(int(d) for d in dims), ctx.attrs["T"])
    try:
        final, canon = strided_slice_spec(
            dims, np.asarray(begin), np.asarray(end), np.asarray(strides), slice_masks(ctx.attrs)
        )
    except SliceError as e:
        raise _invalid(str(e)) from None
    dy = ctx.xp.asarray(dy)
    if list(dy.shape) != final:
        raise _invalid(f"shape of dy was {_shape_str(dy.shape)} instead of {_shape_str(final)}")
    out = ctx.xp.zeros(dims, dtype=dy.dtype)
    view = out[basic_index(canon)]
    view[...] = dy.reshape(view.shape)
    return out


@StridedSliceGrad.gradient
def _strided_slice_grad_grad(op, grad):
    # StridedSliceGrad is linear in dy: its gradient slices the incoming gradient the
    # same way (what second derivatives through x[i] need, e.g. tf.hessians)
    attrs = {k: op.get_attr(k) for k in MASK_DEFAULTS}
    sliced = ops.apply_op("StridedSlice", [grad, *op.inputs[1:4]], attrs).outputs[0]
    return [None, None, None, None, sliced]


# -- MirrorPadGrad ---------------------------------------------------------------------------

MirrorPadGrad = register_op(
    "MirrorPadGrad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
    attrs={"T": ANY, "Tpaddings": INDEX, "mode": "REFLECT"},
    shape_fn=lambda op: [tensor_shape.unknown_shape(op.inputs[0].shape.ndims)],
)  # fmt: skip


def _mirror_pad_grad_value(xp, g, pads, mode):
    g = xp.array(g, copy=True)
    offset = 1 if mode == "REFLECT" else 0
    for axis, (lo, hi) in enumerate(pads):
        g = xp.moveaxis(g, axis, 0)
        n = g.shape[0] - lo - hi
        core = g[lo : lo + n].copy()
        for i in range(lo):  # padded row i mirrors core row lo - i - 1 + offset
            core[lo - 1 - i + offset] += g[i]
        for i in range(hi):
            core[n - 1 - i - offset] += g[lo + n + i]
        g = xp.moveaxis(core, 0, axis)
    return g


@MirrorPadGrad.kernel(host_memory=("paddings",))
async def _mirror_pad_grad(ctx, g, paddings):
    g, paddings = ctx.xp.asarray(g), np.asarray(paddings)
    if paddings.shape != (g.ndim, 2):
        raise _invalid(f"paddings must be a matrix with 2 columns: {_shape_str(paddings.shape)}")
    pads = [(int(lo), int(hi)) for lo, hi in paddings.tolist()]
    for d, (lo, hi) in zip(g.shape, pads):
        if lo < 0 or hi < 0 or lo + hi > d:
            raise _invalid(f"Paddings must be non-negative and fit the input: {lo} {hi} {d}")
    return await ctx.device.compute(_mirror_pad_grad_value, ctx.xp, g, pads, ctx.attrs["mode"])


@MirrorPadGrad.gradient
def _mirror_pad_grad_grad(op, grad):
    mode = op._attr("mode")
    return [ops.apply_op("MirrorPad", [grad, op.inputs[1]], {"mode": mode}).outputs[0], None]


# -- Cumsum, Cumprod ---------------------------------------------------------------------------


def _cumulative(xp, fn, x, axis, exclusive, reverse):
    x = xp.asarray(x)
    if reverse:
        x = xp.flip(x, axis)
    out = fn(x, axis=axis, dtype=x.dtype)
    if exclusive:
        ident = xp.zeros_like if fn is xp.cumsum else xp.ones_like
        first = ident(xp.take(x, [0], axis=axis)) if x.shape[axis] else xp.take(x, [], axis=axis)
        out = xp.concatenate([first, xp.take(out, range(x.shape[axis] - 1), axis=axis)], axis)
    if reverse:
        out = xp.flip(out, axis)
    return out


def _cumulative_op(op_type: str, fn_name: str):
    op_def = register_op(
        op_type, inputs=["x: T", "axis: Tidx"], outputs=["out: T"],
        attrs={"exclusive": False, "reverse": False, "T": NUMERIC, "Tidx": INDEX},
        shape_fn=_same_shape,
    )  # fmt: skip

    @op_def.kernel(host_memory=("axis",))
    async def _kernel(ctx, x, axis):
        x = ctx.xp.asarray(x)
        if np.ndim(axis) != 0:
            raise _invalid(f"ScanOp: axis must be a scalar, not {_shape_str(np.shape(axis))}")
        axis = int(axis)
        if not -x.ndim <= axis < x.ndim:
            raise _invalid(
                f"ScanOp: Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {axis}"
            )
        fn = getattr(ctx.xp, fn_name)
        a = ctx.attrs
        return await ctx.device.compute(
            _cumulative, ctx.xp, fn, x, axis, a["exclusive"], a["reverse"]
        )

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


Cumsum = _cumulative_op("Cumsum", "cumsum")
Cumprod = _cumulative_op("Cumprod", "cumprod")


@_dispatch.add_dispatch_support
def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """`tf.cumsum`: cumulative sum along `axis` (exclusive / reverse as TF)."""
    if _ragged.is_ragged(x):
        return _ragged.cumsum(x, axis, exclusive, reverse, name, dense_cumsum=cumsum)
    attrs = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
    return ops.apply_op("Cumsum", [x, axis], attrs, name=name).outputs[0]


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """`tf.math.cumprod`: cumulative product along `axis` (exclusive / reverse as TF)."""
    attrs = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
    return ops.apply_op("Cumprod", [x, axis], attrs, name=name).outputs[0]


@Cumsum.gradient
def _cumsum_grad(op, grad):
    exclusive, reverse = op._attr("exclusive"), op._attr("reverse")
    return [cumsum(grad, op.inputs[1], exclusive=exclusive, reverse=not reverse), None]


@Cumprod.gradient
def _cumprod_grad(op, grad):
    # TF's formula (exact only for inputs without zeros); a zero input's gradient is 0
    # there, not NaN (TF's div_no_nan).
    x, axis = op.inputs
    exclusive, reverse = op._attr("exclusive"), op._attr("reverse")
    prod = op.outputs[0]
    out = cumsum(mul(prod, grad), axis, exclusive=exclusive, reverse=not reverse)
    return [ops.apply_op("DivNoNan", [out, x]).outputs[0], None]


# -- helpers for gradient functions (TF's gen_*_ops by op type) ----------------------------


def apply(op_type: str, *inputs, **attrs) -> ops.Tensor:
    """The first output of a new `op_type` op (the gradient code's gen_*_ops call)."""
    return ops.apply_op(op_type, list(inputs), attrs).outputs[0]


def constant(value, dtype=None, name="Const") -> ops.Tensor:
    dt = dtypes.as_dtype(dtype) if dtype is not None else None
    arr = np.asarray(value, dtype=None if dt is None else dt.as_numpy_dtype)
    if dt is None:
        # Gradients build shapes, axes and permutations with this: an empty one (a
        # scalar's) is int32 too, not NumPy's float64.
        dt = dtypes.as_dtype(np.int32 if arr.dtype.kind == "i" or not arr.size else arr.dtype)
        arr = arr.astype(dt.as_numpy_dtype)
    arr.flags.writeable = False
    return ops.apply_op("Const", [], {"value": arr, "dtype": dt}, name=name).outputs[0]


def shape(x, out_type=dtypes.int32) -> ops.Tensor:
    """x's shape: a constant when fully known, else a Shape op."""
    if x.shape.is_fully_defined():
        return constant(x.shape.as_list(), out_type, name="Shape")
    return ops.apply_op("Shape", [x], {"out_type": out_type}).outputs[0]


def reshape(x, shape_) -> ops.Tensor:
    return ops.apply_op("Reshape", [x, shape_]).outputs[0]


def reduce_sum(x, axes, keep_dims=False) -> ops.Tensor:
    if not isinstance(axes, ops.Tensor):  # apply_op's Const: "Sum/reduction_indices", as TF's
        axes = np.asarray(axes, dtype=np.int32).reshape(-1)
    return ops.apply_op("Sum", [x, axes], {"keep_dims": keep_dims}).outputs[0]


def cast(x, dtype) -> ops.Tensor:
    dtype = dtypes.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return ops.apply_op("Cast", [x], {"DstT": dtype}).outputs[0]


def zeros_like(x) -> ops.Tensor:
    return ops.apply_op("ZerosLike", [x]).outputs[0]


def ones_like(x) -> ops.Tensor:
    return ops.apply_op("OnesLike", [x]).outputs[0]


def mul(x, y) -> ops.Tensor:
    return ops.apply_op("Mul", [x, y]).outputs[0]


def neg(x) -> ops.Tensor:
    return ops.apply_op("Neg", [x]).outputs[0]


def concat(values, axis=0) -> ops.Tensor:
    if len(values) == 1:
        return values[0]
    # named "concat" as TF's array_ops.concat names it (the summed IndexedSlices' values)
    return ops.apply_op("ConcatV2", [list(values), axis], name="concat").outputs[0]


def transpose(x, perm) -> ops.Tensor:
    return ops.apply_op("Transpose", [x, perm]).outputs[0]


def invert_permutation(perm) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[int(p)] = i
    return inv


_MISSING = -1  # a leading dimension one input lacks (0 is a real, empty dimension)


def _static_reduction_axes(sx, sy):
    """(rx, ry) reduction axes of x and y when the shapes decide them, else None."""
    if sx.ndims is None or sy.ndims is None:
        return None
    n = max(sx.ndims, sy.ndims)
    dx = [_MISSING] * (n - sx.ndims) + [d.value for d in sx.dims]
    dy = [_MISSING] * (n - sy.ndims) + [d.value for d in sy.dims]
    rx, ry = [], []
    for i, (a, b) in enumerate(zip(dx, dy)):
        for mine, other, axes in ((a, b, rx), (b, a, ry)):
            if mine == _MISSING:
                axes.append(i)
            elif mine == 1:
                if other is None:
                    return None
                if other != 1 and other != _MISSING:  # broadcast to >1 or to an empty dim
                    axes.append(i)
            elif mine is None and other not in (_MISSING, 1):
                return None
    return rx, ry


def sum_to(grad, x, axes) -> ops.Tensor:
    """Sum `grad` over `axes` (static ints) and give it x's shape."""
    if not axes:
        return grad
    if x.shape.is_fully_defined():
        return reshape(reduce_sum(grad, axes), shape(x))
    summed = reduce_sum(grad, axes, keep_dims=True)
    lead = grad.shape.ndims - x.shape.ndims
    if lead:
        summed = ops.apply_op("Squeeze", [summed], {"squeeze_dims": list(range(lead))}).outputs[0]
    return summed


def _reduce_to(grad, axes, shape_) -> ops.Tensor:
    """TF's _ReduceGradientArg: `grad` summed over `axes` (kept) and reshaped."""
    if grad is None or not axes:
        return grad
    return reshape(reduce_sum(grad, axes, keep_dims=True), shape_)


def broadcast_reduce(x, y, gx, gy):
    """Reduce the gradients of a broadcasting binary op's inputs to the inputs' shapes.

    Static shapes decide the reduction axes when they can (no run-time ops); otherwise
    a BroadcastGradientArgs op computes them at run time, as TF does.
    """
    axes = _static_reduction_axes(x.shape, y.shape)
    if axes is not None:
        rx, ry = axes
        if not (rx or ry):
            return gx, gy
        # TF's SmartBroadcastGradientArgs takes both shapes, x's first: "mul_grad/Shape"
        # and "mul_grad/Shape_1" (Consts when known; one of them may go unused).
        sx, sy = shape(x), shape(y)
        return _reduce_to(gx, rx, sx), _reduce_to(gy, ry, sy)
    sx, sy = shape(x), shape(y)
    rx, ry = ops.apply_op("BroadcastGradientArgs", [sx, sy]).outputs
    if gx is not None:
        gx = reshape(reduce_sum(gx, rx), sx)
    if gy is not None:
        gy = reshape(reduce_sum(gy, ry), sy)
    return gx, gy


def is_trainable(dtype) -> bool:
    """dtypes gradients flow through (TF's backprop_util.IsTrainable)."""
    dtype = dtypes.as_dtype(dtype)
    # A resource variable's handle takes the gradient of its reads (TF's IsTrainable);
    # the float8 types are not trainable there.
    if dtype.base_dtype in (dtypes.float8_e5m2, dtypes.float8_e4m3fn):
        return False
    return dtype.is_floating or dtype.is_complex or dtype.base_dtype in (
        dtypes.resource,
        dtypes.variant,  # (a ragged value's encoding: RaggedTensorToVariant's gradient)
    )
