"""Joining, tiling and padding ops: ConcatV2 (`tf.concat`), Pack (`tf.stack`), Tile,
Pad/PadV2/MirrorPad (`tf.pad`), each with its kernel, gradient and builder.

Split out of `array_ops`, which imports this module and re-exports its builders, so
`from asyncflow.ops.array_ops import *` still gives the whole family.  Autopacking
(`convert_to_tensor` of a list holding Tensors) stays in `array_ops` beside `constant`.

Shape functions follow TF's C++ shape inference (array_ops.cc); the constant folders
registered here (ConcatV2, Pack, and their partial shapes) let `tf.concat`/`tf.stack` of
known values serve as shapes at build time.  Like `slicing_ops`, this module uses no
other op family directly (it builds Identity/Slice/SplitV/Unpack through
`ops.apply_op`), so `array_ops` can import it without an import cycle.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, ragged, ragged_functions, tensor_shape
from asyncflow import dynamic_ragged_shape as _drs
from asyncflow import graph as ops
from asyncflow.devices import cpu_budget
from asyncflow.dynamic_ragged_shape import DynamicRaggedShape
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import merged_shapes
from asyncflow.ops.slicing_ops import _invalid, _np_dtype, apply
from asyncflow.ragged import RaggedTensor, is_ragged
from asyncflow.registry import ANY, INDEX, REQUIRED, register_op

__all__ = ["concat", "stack", "tile", "pad", "broadcast_to"]

_FOLD_LIMIT = 1000  # fold Fill/Pack results up to this many elements, as TF's size cap


def _shape_str(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _mul_dim(a, b):
    """InferenceContext::Multiply: 0 wins over unknown, 1 is the identity."""
    if a == 0 or b == 0:
        return 0
    if a is None or b is None:
        return None
    return a * b


# -- ConcatV2 ----------------------------------------------------------------------------


def _merge_dims(a, b, i, sa, sb):
    if a is not None and b is not None and a != b:
        raise ValueError(
            f"Dimension {i} in both shapes must be equal, but are {a} and {b}. Shapes are "
            f"{_shape_str(sa)} and {_shape_str(sb)}."
        )
    return a if a is not None else b


def _concat_shape(op):
    *values, axis_t = op.inputs
    axis_t.shape.with_rank(0)
    known = [v.shape.as_list() for v in values if v.shape.ndims is not None]
    if not known:
        return [tensor_shape.unknown_shape()]
    rank = len(known[0])
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    for dims in known:
        if len(dims) != rank:
            raise ValueError(f"Shape must be rank {rank} but is rank {len(dims)}")
    axis = ops.constant_value(axis_t)
    if axis is None:
        return [tensor_shape.unknown_shape(rank)]
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(
            f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), "
            f"but got {axis}"
        )
    axis %= rank
    out = list(known[0])
    out[axis] = 0
    for dims in [v.shape for v in values]:
        if dims.ndims is None:
            out[axis] = None
            continue
        dims = dims.as_list()
        for i, d in enumerate(dims):
            if i == axis:
                out[i] = None if out[i] is None or d is None else out[i] + d
            else:
                out[i] = _merge_dims(out[i], d, i, out, dims)
    return [out]


ConcatV2 = register_op(
    "ConcatV2", inputs=["values: N * T", "axis: Tidx"], outputs=["output: T"],
    attrs={"N": REQUIRED, "T": ANY, "Tidx": INDEX}, shape_fn=_concat_shape,
)  # fmt: skip


# A small join in a caller-driven step runs at once, counted against the CPU budget
# without its BLAS thread choice (np.concatenate makes no BLAS call): `compute`'s kind
# key and measured choice cost more than the copy (an LSTM cell's [128,65] input join,
# 21 a step of lstm_seqlen).  False: every join through `compute` (A/B).
_LEAN = True
_LEAN_MAX_BYTES = 1 << 20


@ConcatV2.kernel(host_memory=("axis",))
async def _concat_v2(ctx, *args):
    *values, axis = args
    xp = ctx.xp
    values = [xp.asarray(v) for v in values]
    axis = concat_axis([v.shape for v in values], axis)
    if _LEAN and xp is np and getattr(ctx.device, "runs_inline_now", _never)():
        if sum(v.nbytes for v in values) <= _LEAN_MAX_BYTES:
            return cpu_budget.call_without_blas(np.concatenate, (values, axis))
    return await ctx.device.compute(xp.concatenate, values, axis)


def _never() -> bool:
    return False


def concat_axis(shapes: list, axis) -> int:
    """ConcatV2's checks of its values' shapes and its axis, with its messages; the axis
    in [0, rank).  (Also a `_FusedElementwise` that writes a ConcatV2's value itself.)"""
    first = tuple(shapes[0])
    rank = len(first)
    axis = int(axis)
    if not -rank <= axis < rank or rank == 0:
        raise _invalid(
            f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), "
            f"but got {axis}"
        )
    axis %= rank
    for i, shape in enumerate(shapes[1:], 1):
        if len(shape) != rank:
            raise _invalid(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{_shape_str(first)} vs. shape[{i}] = {_shape_str(shape)}"
            )
        if any(a != b for j, (a, b) in enumerate(zip(first, shape, strict=True)) if j != axis):
            raise _invalid(
                f"ConcatOp : Dimensions of inputs should match: shape[0] = {_shape_str(first)} "
                f"vs. shape[{i}] = {_shape_str(shape)}"
            )
    return axis


def _fold_concat(t):
    *values, axis = (ops.constant_value(i) for i in t.op.inputs)
    if axis is None or any(v is None for v in values):
        return None
    return np.concatenate(values, int(axis))


def _partial_concat(t):
    *values, axis = t.op.inputs
    dims = []
    for v in values:
        part = ops.constant_shape(v)
        if part.ndims is None:
            return None
        dims += part.as_list()
    return tensor_shape.TensorShape(dims)


ops.register_constant_folder("ConcatV2", _fold_concat)
ops.register_constant_folder("__partial_shape__:ConcatV2", _partial_concat)


@_dispatch.add_dispatch_support
def concat(values, axis, name="concat"):
    """`tf.concat`: join tensors along `axis` (one tensor: an Identity).

    Raises:
      ValueError: at build time for no values, mismatched ranks/dimensions or a known axis
        out of range.
      InvalidArgumentError: at run time for the same conditions.
    """
    if not isinstance(values, list | tuple):
        values = [values]
    if any(isinstance(v, RaggedTensor) for v in values):  # TF dispatches to ragged concat
        return ragged.concat(values, axis, name=name)
    if not values:  # TF's ConcatV2 has N >= 2 (one value is an Identity, below)
        raise ValueError(
            "List argument 'values' to 'ConcatV2' Op with length 0 shorter than minimum length 2."
        )
    if len(values) == 1:
        with ops.name_scope(name):  # (TF's: "concat/concat", its scope reserved)
            ops.convert_to_tensor(axis, name="concat_dim", dtype=dtypes.int32).shape.with_rank(0)
            return apply("Identity", [values[0]], name=name).outputs[0]
    return apply("ConcatV2", [list(values), axis], name=name).outputs[0]


def _axis_sizes(values, axis_t):
    """Each value's size along axis (int32): constants when known, else run-time ops."""
    axis = ops.constant_value(axis_t)
    if axis is not None:
        axis = int(axis)
        sizes = []
        for v in values:
            rank = v.shape.ndims
            d = None if rank is None else v.shape.as_list()[axis % rank]
            sizes.append(d)
        if None not in sizes:
            return _g.constant(sizes, dtypes.int32), _g.constant(axis, dtypes.int32)
    rank = _g.apply("Rank", values[0])
    axis_t = _g.apply("FloorMod", _g.cast(axis_t, dtypes.int32), rank)
    zero = _g.constant(0)
    picked = [_g.apply("GatherV2", _g.shape(v), axis_t, zero) for v in values]
    return ops.apply_op("Pack", [picked], {"axis": 0}).outputs[0], axis_t


@ConcatV2.gradient
def _concat_grad(op, grad):
    values, axis_t = list(op.inputs[:-1]), op.inputs[-1]
    if len(values) == 1:
        return [grad, None]
    axis_v = ops.constant_value(axis_t)
    if (
        type(grad).__name__ == "IndexedSlices"
        and axis_v is not None
        and int(axis_v) < 0
        and values[0].shape.ndims is None
    ):  # TF's words: its IndexedSlices split needs the axis counted from the front
        raise ValueError(
            "Can only compute IndexedSlices gradient with negative concat_dim when first "
            "value rank is statically-known."
        )
    sizes, axis = _axis_sizes(values, axis_t)
    parts = ops.apply_op(
        "SplitV", [ops.convert_to_tensor(grad), sizes, axis], {"num_split": len(values)}
    ).outputs
    return [*parts, None]


# -- Pack -----------------------------------------------------------------------------------


def _pack_axis(axis, rank, fail):
    if not -rank <= axis < rank:
        raise fail(f"Invalid axis: {axis}; must be in [{-rank},{rank})")
    return axis % rank


def _pack_shape(op):
    shape = tensor_shape.unknown_shape()
    for i, t in enumerate(op.inputs):
        try:
            shape = merged_shapes(shape, t.shape)
        except ValueError as e:  # (TF's Pack shape function's words)
            raise ValueError(f"{e}\n\tFrom merging shape {i} with other shapes.") from None
    if shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    axis = _pack_axis(op._attr("axis"), shape.ndims + 1, ValueError)
    dims = shape.as_list()
    return [dims[:axis] + [len(op.inputs)] + dims[axis:]]


Pack = register_op(
    "Pack", inputs=["values: N * T"], outputs=["output: T"],
    attrs={"N": REQUIRED, "T": ANY, "axis": 0}, shape_fn=_pack_shape,
)  # fmt: skip


@Pack.kernel()
async def _pack(ctx, *values):
    xp = ctx.xp
    values = [xp.asarray(v) for v in values]
    for i, v in enumerate(values[1:], 1):
        if v.shape != values[0].shape:
            raise _invalid(
                f"Shapes of all inputs must match: values[0].shape = "
                f"{_shape_str(values[0].shape)} != values[{i}].shape = {_shape_str(v.shape)}"
            )
    axis = _pack_axis(ctx.attrs["axis"], values[0].ndim + 1, _invalid)
    return xp.stack(values, axis=axis)


def _fold_pack(t):
    values = [ops.constant_value(i) for i in t.op.inputs]
    if any(v is None for v in values) or sum(np.size(v) for v in values) > _FOLD_LIMIT:
        return None
    return np.stack(values, axis=t.op._attr("axis")).astype(_np_dtype(t.dtype))


def _partial_pack(t):
    """`tf.stack([batch, 3])` as a shape: unknown where an element is not constant."""
    if t.op._attr("axis") != 0:
        return None
    dims = []
    for v in t.op.inputs:
        c = ops.constant_value(v)
        dims.append(None if c is None or c.ndim or int(c) < 0 else int(c))
    return tensor_shape.TensorShape(dims)


ops.register_constant_folder("Pack", _fold_pack)
ops.register_constant_folder("__partial_shape__:Pack", _partial_pack)


@_dispatch.add_dispatch_support
def stack(values, axis=0, name="stack"):
    """`tf.stack`: join same-shaped tensors along a new dimension `axis`.

    Raises:
      ValueError: `axis` out of range, or shapes that differ (when known).
      InvalidArgumentError: at run time for inputs of different shapes.
    """
    if any(is_ragged(v) for v in values):  # TF dispatches to tf.ragged.stack
        return ragged_functions.stack(values, axis, name=name)
    values = list(values)
    if axis == 0 and not any(ops.is_tensor(v) for v in values):
        try:  # constants become one Const (nested lists holding Tensors are autopacked)
            return ops.convert_to_tensor(values, name=name)
        except (TypeError, ValueError):
            pass  # ragged, or mixed dtypes: Pack reports the problem below
    first = ops.convert_to_tensor(values[0])
    if first.shape.ndims is not None:
        n = first.shape.ndims + 1
        if not -n <= axis < n:
            raise ValueError(f"axis = {axis} not in [{-n}, {n})")
    values[0] = first
    return apply("Pack", [values], {"axis": int(axis)}, name=name).outputs[0]


@Pack.gradient
def _pack_grad(op, grad):
    n = len(op.inputs)
    outs = ops.apply_op("Unpack", [grad], {"num": n, "axis": op._attr("axis")}).outputs
    return list(outs)


# -- Tile ----------------------------------------------------------------------------------


def _tile_shape(op):
    x, multiples_t = op.inputs
    multiples_t.shape.with_rank(1)
    mult = ops.constant_shape(multiples_t)
    if x.shape.ndims is not None:
        mult = mult.with_rank(x.shape.ndims)
    if mult.ndims is None:
        return [tensor_shape.unknown_shape()]
    dims = x.shape.with_rank(mult.ndims).as_list()
    return [[_mul_dim(d, m) for d, m in zip(dims, mult.as_list(), strict=True)]]


Tile = register_op(
    "Tile", inputs=["input: T", "multiples: Tmultiples"], outputs=["output: T"],
    attrs={"T": ANY, "Tmultiples": INDEX}, shape_fn=_tile_shape,
)  # fmt: skip


@Tile.kernel(host_memory=("multiples",))
async def _tile(ctx, x, multiples):
    xp = ctx.xp
    x, multiples = xp.asarray(x), np.asarray(multiples)
    if multiples.ndim != 1 or multiples.size != x.ndim:
        raise _invalid(
            f"Expected multiples argument to be a vector of length {x.ndim} but got length "
            f"{multiples.shape[0] if multiples.ndim else multiples.size}"
        )
    mult = multiples.tolist()
    for i, m in enumerate(mult):
        if m < 0:
            raise _invalid(f"Expected multiples[{i}] >= 0, but got {m}")
    ctx.device.check_alloc(x.size * math.prod(int(m) for m in mult), ctx.attrs["T"])
    if x.size == 1 and x.dtype.kind in "biufc":  # (a Mean's gradient): np.tile costs ~5 us
        return xp.full([d * m for d, m in zip(x.shape, mult)], x.reshape(()), x.dtype)
    return await ctx.device.compute(xp.tile, x, mult)


@_dispatch.add_dispatch_support
def tile(input, multiples, name=None):  # noqa: A002 - TF's name
    """`tf.tile`: repeat `input` `multiples[i]` times along dimension i.

    Raises:
      ValueError: `multiples` length differs from the rank (when known).
      InvalidArgumentError: the same, or a negative multiple, at run time.
    """
    if is_ragged(input):
        return ragged_functions.tile(input, multiples, name=name)
    return apply("Tile", [input, multiples], name=name).outputs[0]


@Tile.gradient
def _tile_grad(op, grad):
    x, multiples = op.inputs
    x_shape = x.shape
    mult = ops.constant_value(multiples)
    if x_shape.is_fully_defined() and mult is not None:
        dims = x_shape.as_list()
        split = [v for m, d in zip(mult.tolist(), dims) for v in (int(m), d)]
        summed = _g.reduce_sum(_g.reshape(grad, _g.constant(split)), list(range(0, len(split), 2)))
        return [summed, None]
    input_shape = _g.apply("Shape", x, out_type=multiples.dtype)
    pair = ops.apply_op("Pack", [[multiples, input_shape]], {"axis": 0}).outputs[0]
    split_shape = _g.reshape(_g.transpose(pair, _g.constant([1, 0])), _g.constant([-1]))
    size = _g.apply("Size", split_shape)
    axes = _g.apply("Range", _g.constant(0), size, _g.constant(2))
    summed = _g.reduce_sum(_g.reshape(grad, split_shape), axes)
    summed.set_shape(x_shape)
    return [summed, None]


# -- BroadcastTo ---------------------------------------------------------------------------


def _broadcast_to_shape(op):
    """TF's shape function: the shape tensor's value, with each known input dimension
    > 1 merged into the output dimension it aligns with (from the right)."""
    x, shape_t = op.inputs
    shape_t.shape.with_rank(1)
    out = ops.constant_shape(shape_t)
    if out.ndims is None or x.shape.ndims is None:
        return [out]
    if x.shape.ndims > out.ndims:
        raise ValueError(f"Shape must be at most rank {out.ndims} but is rank {x.shape.ndims}")
    dims = out.as_list()
    in_dims = x.shape.as_list()
    for i in range(1, len(in_dims) + 1):
        d = in_dims[-i]
        if d is not None and d > 1:
            if dims[-i] is not None and dims[-i] != d:
                raise ValueError(f"Dimensions must be equal, but are {d} and {dims[-i]}")
            dims[-i] = d
    return [dims]


BroadcastTo = register_op(
    "BroadcastTo", inputs=["input: T", "shape: Tidx"], outputs=["output: T"],
    attrs={"T": ANY, "Tidx": INDEX}, shape_fn=_broadcast_to_shape,
)  # fmt: skip


def _broadcast_copy(xp, x, shape):
    out = xp.empty(shape, x.dtype)
    out[...] = x
    return out


@BroadcastTo.kernel(host_memory=("shape",))
async def _broadcast_to(ctx, x, shape):
    xp = ctx.xp
    x, shape = xp.asarray(x), np.asarray(shape)
    if shape.ndim != 1:
        raise _invalid(f"shape must be a vector, got shape {_shape_str(shape.shape)}")
    dims = tuple(int(d) for d in shape.tolist())
    for d in dims:
        if d < 0:
            raise _invalid(f"Dimension {d} must be >= 0")
    if x.shape == dims:  # (TF forwards its input: a view here, never the object itself,
        return x.view()  # so no consumer takes over a buffer another one still reads)
    if x.ndim > len(dims):
        raise _invalid(
            f"Rank of input ({x.ndim}) must be no greater than rank of output shape ({len(dims)})."
        )
    try:
        both = np.broadcast_shapes(x.shape, dims)
    except ValueError:
        raise _invalid(
            f"Incompatible shapes: {_shape_str(x.shape)} vs. {_shape_str(dims)}"
        ) from None
    if both != dims:
        raise _invalid(
            f"Unable to broadcast tensor of shape {_shape_str(x.shape)} to tensor of shape "
            f"{_shape_str(dims)}"
        )
    ctx.device.check_alloc(math.prod(dims), ctx.attrs["T"])
    if x.size == 1 and x.dtype.kind in "biufc":  # (a Sum's gradient): one fill
        return xp.full(dims, x.reshape(()), x.dtype)
    return await ctx.device.compute(_broadcast_copy, xp, x, dims)


@_dispatch.add_dispatch_support
def broadcast_to(input, shape, name=None):  # noqa: A002 - TF's name
    """`tf.broadcast_to`: `input` repeated along new and size-1 dimensions to `shape`
    (op BroadcastTo, a new tensor; NumPy's broadcasting rules).

    With a DynamicRaggedShape `shape` (or a RaggedTensor `input`), TF's ragged
    broadcasting: see asyncflow/dynamic_ragged_shape.py.

    Raises:
      ValueError: the shapes cannot broadcast (when known).
      InvalidArgumentError: the same at run time, or a negative dimension.
    """
    if isinstance(shape, DynamicRaggedShape):
        with ops.name_scope(name, "BroadcastTo", []):
            return _drs.broadcast_to(input, shape)
    return apply("BroadcastTo", [input, shape], name=name).outputs[0]


@BroadcastTo.gradient
def _broadcast_to_grad(op, grad):
    """TF's _BroadcastToGrad: grad summed over the broadcast dimensions, reshaped to
    the input's shape."""
    _, gx = _g.broadcast_reduce(op.outputs[0], op.inputs[0], None, grad)
    return [gx, None]


# -- Pad, PadV2, MirrorPad -------------------------------------------------------------------


def _pad_shape(op):
    x, paddings_t = op.inputs[:2]
    pshape = paddings_t.shape.with_rank(2)
    if pshape[1].value not in (None, 2):
        raise ValueError(f"Dimension must be 2 but is {pshape[1].value}")
    n = pshape[0].value
    if n is not None:
        x.shape.with_rank(n)
    elif x.shape.ndims is not None:
        n = x.shape.ndims
    if len(op.inputs) == 3:
        op.inputs[2].shape.with_rank(0)
    paddings = ops.constant_value(paddings_t)
    if paddings is None:
        return [tensor_shape.unknown_shape(n)]
    dims = x.shape.with_rank(paddings.shape[0]).as_list()
    mode = op._attr("mode") if op.type == "MirrorPad" else None
    out = []
    for d, (lo, hi) in zip(dims, paddings.tolist(), strict=True):
        if lo < 0 or hi < 0:
            raise ValueError("Paddings must be non-negative")
        if d is not None and mode is not None:
            _check_mirror(d, lo, hi, mode, ValueError)
        out.append(None if d is None else d + lo + hi)
    return [out]


def _check_mirror(d, lo, hi, mode, fail):
    offset = 0 if mode == "SYMMETRIC" else 1
    if mode == "REFLECT" and (lo >= d or hi >= d):
        raise fail(f"paddings must be less than the dimension size: {lo}, {hi} not less than {d}")
    if offset == 0 and (lo > d or hi > d):
        raise fail(f"paddings must be no greater than the dimension size: {lo}, {hi} greater "
                   f"than {d}")  # fmt: skip


_PAD_ATTRS = {"T": ANY, "Tpaddings": INDEX}
Pad = register_op(
    "Pad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
    attrs=_PAD_ATTRS, shape_fn=_pad_shape,
)  # fmt: skip
PadV2 = register_op(
    "PadV2", inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
    outputs=["output: T"], attrs=_PAD_ATTRS, shape_fn=_pad_shape,
)  # fmt: skip
MirrorPad = register_op(
    "MirrorPad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
    attrs={**_PAD_ATTRS, "mode": REQUIRED}, shape_fn=_pad_shape,
)  # fmt: skip


def _check_paddings(ctx, x, paddings):
    if paddings.ndim != 2 or paddings.shape[1] != 2:
        raise _invalid(f"paddings must be a matrix with 2 columns: {_shape_str(paddings.shape)}")
    if paddings.shape[0] != x.ndim:
        raise _invalid(
            f"The first dimension of paddings must be the rank of inputs"
            f"{_shape_str(paddings.shape)} {_shape_str(x.shape)}"
        )
    pads = [tuple(p) for p in paddings.tolist()]
    for lo, hi in pads:
        if lo < 0 or hi < 0:
            raise _invalid(f"Paddings must be non-negative: {lo} {hi}")
    n = int(
        np.prod([d + lo + hi for d, (lo, hi) in zip(x.shape, pads, strict=True)], dtype=np.int64)
    )
    ctx.device.check_alloc(n, ctx.attrs["T"])
    return pads


async def _pad_constant(ctx, x, paddings, value):
    x, paddings = ctx.xp.asarray(x), np.asarray(paddings)
    pads = _check_paddings(ctx, x, paddings)
    return await ctx.device.compute(_pad_value, ctx.xp, x, pads, value)


def _pad_value(xp, x, pads, value):
    return xp.pad(x, pads, "constant", constant_values=value)


@Pad.kernel(host_memory=("paddings",))
async def _pad(ctx, x, paddings):
    x = ctx.xp.asarray(x)
    return await _pad_constant(ctx, x, paddings, b"" if x.dtype == object else 0)


# constant_values stays in host memory too, as in TF (a scalar the pad reads).
@PadV2.kernel(host_memory=("paddings", "constant_values"))
async def _pad_v2(ctx, x, paddings, constant_values):
    if np.ndim(constant_values):
        raise _invalid(
            f"constant_values must be a scalar. Got: {_shape_str(np.shape(constant_values))}"
        )
    return await _pad_constant(ctx, x, paddings, constant_values)


@MirrorPad.kernel(host_memory=("paddings",))
async def _mirror_pad(ctx, x, paddings):
    x, paddings = ctx.xp.asarray(x), np.asarray(paddings)
    pads = _check_paddings(ctx, x, paddings)
    mode = ctx.attrs["mode"]
    for d, (lo, hi) in zip(x.shape, pads, strict=True):
        _check_mirror(d, lo, hi, mode, _invalid)
    return await ctx.device.compute(ctx.xp.pad, x, pads, mode.lower())


@_dispatch.add_dispatch_support
def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """`tf.pad`: pad with `constant_values` (CONSTANT) or mirrored edges (REFLECT,
    SYMMETRIC); `mode` is case-insensitive.

    Raises:
      ValueError: an unknown mode, or bad paddings known at build time.
      InvalidArgumentError: bad paddings at run time.
    """
    mode = mode.upper()
    if mode == "CONSTANT":
        if not isinstance(constant_values, ops.Tensor) and np.all(
            np.asarray(constant_values, dtype=object) == 0
        ):
            result = apply("Pad", [tensor, paddings], name=name).outputs[0]
        else:
            result = apply("PadV2", [tensor, paddings, constant_values], name=name).outputs[0]
    elif mode in ("REFLECT", "SYMMETRIC"):
        result = apply("MirrorPad", [tensor, paddings], {"mode": mode}, name=name).outputs[0]
    else:
        raise ValueError(f"Unknown padding mode: {mode}")
    return result


def _pad_grad(op, grad):
    x, paddings = op.inputs[:2]
    rank = x.shape.ndims
    pads = ops.constant_value(paddings)
    if pads is not None and x.shape.is_fully_defined():
        begin = _g.constant(pads[:, 0].tolist(), paddings.dtype)
        size = _g.constant(x.shape.as_list(), paddings.dtype)
    else:
        n = _g.constant([rank if rank is not None else -1, 1], paddings.dtype)
        col0 = ops.apply_op("Slice", [paddings, _g.constant([0, 0], paddings.dtype), n]).outputs[0]
        begin = _g.reshape(col0, _g.constant([-1]))
        size = _g.apply("Shape", x, out_type=paddings.dtype)
    x_grad = ops.apply_op("Slice", [grad, begin, size]).outputs[0]
    return [x_grad] + [None] * (len(op.inputs) - 1)


Pad.gradient(_pad_grad)
PadV2.gradient(_pad_grad)


@MirrorPad.gradient
def _mirror_pad_grad(op, grad):
    attrs = {"mode": op._attr("mode")}
    return [ops.apply_op("MirrorPadGrad", [grad, op.inputs[1]], attrs).outputs[0], None]
