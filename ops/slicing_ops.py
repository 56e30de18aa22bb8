"""Slicing and indexing ops: Slice, StridedSlice (and `Tensor.__getitem__`), GatherV2,
ReverseV2, Split/SplitV, Unpack, OneHot, Where/Select.

StridedSlice follows TF's `ValidateStridedSliceOp` step by step (sparse spec -> dense
spec -> canonical begin/end per dimension -> processing shape -> final shape), so the
build-time shape function and the run-time kernel share one implementation and agree
with TF on every mask combination.  Unknown values (a non-constant `begin`, an unknown
input dimension) simply leave the affected output dimensions unknown.

This module uses no other op family directly (it builds Pack/Const/Cast through
`ops.apply_op`), so `array_ops` can import it without an import cycle.
"""

from __future__ import annotations

import builtins
import contextlib
import sys

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.ops import device_indexing
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import merged_shapes, to_host
from asyncflow.ops.strided_slice_spec import (
    MASK_DEFAULTS,
    SliceError,
    basic_index,
    mask_attrs,
    slice_masks,
    strided_slice_spec,
)
from asyncflow.registry import (
    ANY,
    INDEX,
    NUMERIC,
    REQUIRED,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)

__all__ = [
    "slice",
    "strided_slice",
    "gather",
    "batch_gather",
    "reverse",
    "reverse_v2",
    "split",
    "unstack",
    "one_hot",
    "where",
]

_SLICE_TYPE_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
    "tf.int32/tf.int64 tensors are valid indices"
)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _np_dtype(dtype) -> np.dtype:
    return np.dtype(dtypes.as_dtype(dtype).as_numpy_dtype)


def _outs(values):
    """A kernel's return for a variadic output: a bare value when there is one."""
    values = list(values)
    return values[0] if len(values) == 1 else tuple(values)


def _dims(shape: tensor_shape.TensorShape) -> list[int | None] | None:
    return None if shape.ndims is None else shape.as_list()


def _graph_of(values) -> ops.Graph:
    for v in values:
        for x in v if isinstance(v, list | tuple) else [v]:
            if isinstance(x, ops.Tensor):
                return x.graph
    return ops.get_default_graph()


@contextlib.contextmanager
def op_scope(name, default_name, values=()):
    """TF's `with name_scope(name, default_name, values) as scope:`.

    Yields the scope as TF does ("outer/zeros/"): ops built inside land under it, and
    `apply(..., name=scope)` creates the op named exactly "outer/zeros".  The scope name
    is computed without reserving it, so that final op can still take it.
    """
    g = _graph_of(values)
    with g.as_default():
        if name and name.endswith("/"):
            full = name[:-1]
        else:
            full = g.unique_name(name or default_name, mark_as_used=False)
        with g.name_scope(full + "/"):
            yield full + "/"


def apply(op_type, inputs=(), attrs=None, name=None) -> ops.Operation:
    """`ops.apply_op`, also accepting TF's "scope/" names meaning exactly that name.

    op_scope does not reserve its name, so the op takes it here; a scope that TF's
    name_scope reserved ("clip_by_norm/") names the op exactly, as in TF.
    """
    if name and name.endswith("/"):
        g = _graph_of(inputs)
        full = name[:-1]
        # A used name: TF's exact name, which fails as a duplicate if an op has it.
        if full.lower() in g._names_in_use or full in g._ops_by_name:
            return ops.apply_op(op_type, inputs, attrs, name=name, graph=g)
        with g.as_default(), g.name_scope(None):
            return ops.apply_op(op_type, inputs, attrs, name=name[:-1], graph=g)
    return ops.apply_op(op_type, inputs, attrs, name=name)


# -- Slice ---------------------------------------------------------------------------------


def _slice_shape(op):
    x, begin_t, size_t = op.inputs
    begin_t.shape.with_rank(1)
    size_t.shape.with_rank(1)
    n = begin_t.shape.merge_with(size_t.shape)[0].value
    x_shape = x.shape if n is None else x.shape.with_rank(n)
    begin = ops.constant_value(begin_t)
    size = ops.constant_value(size_t)
    if size is None:
        partial = ops.constant_shape(size_t)
        if partial.ndims is None and x_shape.ndims is not None:
            return [tensor_shape.unknown_shape(x_shape.ndims)]
        return [partial]
    dims = _dims(x_shape) or [None] * len(size)
    out = []
    # As TF's shape function: sizes are taken as given (the kernel checks them against
    # the input), a -1 takes the rest of a known dimension.
    for i, (s, d) in enumerate(zip(size.tolist(), dims, strict=True)):
        b = None if begin is None else int(begin[i])
        if s == -1:
            if b is not None and d is not None and d - b < 0:
                raise ValueError(f"Negative dimension size caused by subtracting {b} from {d}")
            out.append(None if b is None or d is None else d - b)
            continue
        if s < 0:
            raise ValueError(f"Expected size[{i}] >= -1, but got {s}")
        out.append(int(s))
    return [out]


Slice = register_op(
    "Slice",
    inputs=["input: T", "begin: Index", "size: Index"],
    outputs=["output: T"],
    attrs={"T": ANY, "Index": INDEX},
    shape_fn=_slice_shape,
)


@Slice.kernel(host_memory=("begin", "size"))
async def _slice(ctx, x, begin, size):
    x = ctx.xp.asarray(x)
    begin, size = np.asarray(begin), np.asarray(size)
    if begin.ndim != 1 or size.ndim != 1 or begin.size != x.ndim or size.size != x.ndim:
        raise _invalid(
            f"Expected begin and size arguments to be 1-D tensors of size {x.ndim}, but got "
            f"shapes {_shape_str(begin.shape)} and {_shape_str(size.shape)} instead."
        )
    index = []
    for i, (b, s, d) in enumerate(zip(begin.tolist(), size.tolist(), x.shape, strict=True)):
        if s == -1:
            s = d - b
        if not 0 <= b <= d:
            raise _invalid(f"Expected begin[{i}] in [0, {d}], but got {b}")
        if not 0 <= s <= d - b:
            raise _invalid(f"Expected size[{i}] in [0, {d - b}], but got {s}")
        index.append(builtins.slice(b, b + s))
    return x[tuple(index)]


def _fold_slice(t):
    """A slice of a build-time constant (a shape's first dims, say) is one too, as TF's
    shape inference evaluates it: reshapes to `slice(shape(x), ...)` keep static dims."""
    x, begin, size = (ops.constant_value(i) for i in t.op.inputs)
    if x is None or begin is None or size is None or begin.size != x.ndim:
        return None
    index = tuple(
        builtins.slice(int(b), None if s == -1 else int(b) + int(s))
        for b, s in zip(begin.tolist(), size.tolist(), strict=True)
    )
    return np.asarray(x)[index]


ops.register_constant_folder("Slice", _fold_slice)


@_dispatch.add_dispatch_support
def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """`tf.slice`: the `size`-shaped block starting at `begin` (size -1: to the end).

    Raises:
      ValueError: at build time for known out-of-range begin/size.
      InvalidArgumentError: at run time for out-of-range begin/size.
    """
    return apply("Slice", [input_, begin, size], name=name).outputs[0]


# -- StridedSlice ----------------------------------------------------------------------


def _strided_slice_shape(op):
    x, begin_t, end_t, strides_t = op.inputs
    spec = begin_t.shape.with_rank(1).merge_with(end_t.shape.with_rank(1))
    spec = spec.merge_with(strides_t.shape.with_rank(1))
    strides = ops.constant_value(strides_t)
    if x.shape.ndims is None or spec[0].value is None or strides is None:
        return [tensor_shape.unknown_shape()]
    try:
        final, _ = strided_slice_spec(
            x.shape.as_list(),
            ops.constant_value(begin_t),
            ops.constant_value(end_t),
            strides.reshape(-1),
            slice_masks(op),
        )
    except SliceError as e:
        raise ValueError(str(e)) from None
    return [final]


StridedSlice = register_op(
    "StridedSlice",
    inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
    outputs=["output: T"],
    attrs={
        "T": ANY,
        "Index": INDEX,
        **MASK_DEFAULTS,
    },
    shape_fn=_strided_slice_shape,
)


def _strided_slice_value(x, begin, end, strides, masks, xp=np):
    """Apply a strided slice to an array; raises SliceError for a bad spec."""
    x = xp.asarray(x)
    begin, end, strides = np.asarray(begin), np.asarray(end), np.asarray(strides)
    if not (begin.ndim == end.ndim == strides.ndim == 1) or not (
        begin.shape == end.shape == strides.shape
    ):
        raise SliceError(
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{_shape_str(begin.shape)}, {_shape_str(end.shape)}, and "
            f"{_shape_str(strides.shape)} instead."
        )
    final, canon = strided_slice_spec(list(x.shape), begin, end, strides, masks)
    return x[basic_index(canon)].reshape(final)


@StridedSlice.kernel(host_memory=("begin", "end", "strides"))
async def _strided_slice(ctx, x, begin, end, strides):
    try:
        return _strided_slice_value(x, begin, end, strides, slice_masks(ctx.attrs), ctx.xp)
    except SliceError as e:
        raise _invalid(str(e)) from None


def _fold_strided_slice(t):
    vals = [ops.constant_value(i) for i in t.op.inputs]
    if any(v is None for v in vals):
        return None
    return _strided_slice_value(*vals, slice_masks(t.op))


def _partial_strided_slice(t):
    """`tf.shape(x)[1:]` of a partially known shape is a partially known shape (as TF)."""
    x, *rest = t.op.inputs
    if slice_masks(t.op)[2:] != (0, 0, 0) or x.shape.ndims != 1:
        return None
    vals = [ops.constant_value(r) for r in rest]
    if any(v is None for v in vals):
        return None
    partial = ops.constant_shape(x)
    if partial.ndims is None:
        return None
    dims = partial.as_list()
    picked = _strided_slice_value(np.arange(len(dims)), *vals, slice_masks(t.op))
    return tensor_shape.TensorShape([dims[int(i)] for i in picked])


ops.register_constant_folder("StridedSlice", _fold_strided_slice)
ops.register_constant_folder("__partial_shape__:StridedSlice", _partial_strided_slice)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):  # fmt: skip
    """`tf.strided_slice` with TF's five masks (see `Tensor.__getitem__` for the sugar).

    Raises:
      ValueError: at build time when a known spec is invalid (e.g. shrinking out of range).
      InvalidArgumentError: at run time for the same conditions on run-time values.
    """
    del var  # only used by TF for variable slice assignment
    if strides is None:
        strides = apply("OnesLike", [begin]).outputs[0]
    attrs = mask_attrs(begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    return apply("StridedSlice", [input_, begin, end, strides], attrs, name=name).outputs[0]


def _check_index(idx) -> None:
    if isinstance(idx, int | np.integer | tensor_shape.Dimension) and not isinstance(idx, bool):
        return
    dtype = getattr(idx, "dtype", None)
    if (
        dtype is None
        or isinstance(idx, bool)
        or dtypes.as_dtype(dtype) not in (dtypes.int32, dtypes.int64)
        or (getattr(idx, "shape", None) is not None and len(idx.shape or ()) == 1)
    ):
        raise TypeError(_SLICE_TYPE_ERROR + f", got {idx!r}")


def _as_index(v):
    if isinstance(v, tensor_shape.Dimension):
        return v.value
    if isinstance(v, np.integer):
        return int(v)
    return v


def _pack_index(values, name):
    """Pack Python ints / scalar index tensors into a 1-D index tensor (TF's stack)."""
    if not any(isinstance(v, ops.Tensor) for v in values):
        return ops.convert_to_tensor(values, name=name)
    want = (
        dtypes.int64
        if any(isinstance(v, ops.Tensor) and v.dtype == dtypes.int64 for v in values)
        else dtypes.int32
    )
    with op_scope(name, name, values) as scope:
        parts = [
            cast(v, want) if isinstance(v, ops.Tensor)
            else ops.convert_to_tensor(v, dtype=want, name=str(i))
            for i, v in enumerate(values)
        ]  # fmt: skip
        return apply("Pack", [parts], {"axis": 0}, name=scope).outputs[0]


def cast(t: ops.Tensor, dtype) -> ops.Tensor:
    """Cast through the math family's Cast op (TypeError when it is not loaded)."""
    dtype = dtypes.as_dtype(dtype)
    if t.dtype == dtype:
        return t
    try:
        return apply("Cast", [t], {"DstT": dtype}).outputs[0]
    except KeyError:
        raise TypeError(
            f"Cannot convert {t!r} to {dtype.name}: the Cast op is not loaded"
        ) from None


def _getitem(tensor, slice_spec, var=None):
    """`Tensor.__getitem__`: NumPy-style basic indexing lowered to one StridedSlice.
    With `var` (a variable whose value `tensor` is), the slice also has TF1's
    `assign(value, name=None)`: `var._strided_slice_assign` of the same spec, named
    "<slice>/_assign" by default.

    Raises:
      TypeError: for unsupported index types (floats, lists, 1-D tensors...).
    """
    if not isinstance(slice_spec, tuple | list):
        slice_spec = [slice_spec]
    begin, end, strides = [], [], []
    begin_mask = end_mask = ellipsis_mask = new_axis_mask = shrink_axis_mask = 0
    for index, s in enumerate(slice_spec):
        if isinstance(s, builtins.slice):
            if s.start is not None and (isinstance(s.start, ops.Tensor) or s.start != sys.maxsize):
                _check_index(s.start)
                begin.append(_as_index(s.start))
            else:
                begin.append(0)
                begin_mask |= 1 << index
            if s.stop is not None and (isinstance(s.stop, ops.Tensor) or s.stop != sys.maxsize):
                _check_index(s.stop)
                end.append(_as_index(s.stop))
            else:
                end.append(0)
                end_mask |= 1 << index
            if s.step is not None:
                _check_index(s.step)
                strides.append(_as_index(s.step))
            else:
                strides.append(1)
        elif s is Ellipsis or s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            if s is None:
                new_axis_mask |= 1 << index
            else:
                ellipsis_mask |= 1 << index
        else:
            _check_index(s)
            s = _as_index(s)
            begin.append(s)
            # Shrinking ignores `end` (TF recomputes it as begin + 1), so a tensor index
            # needs no Add op here.
            end.append(s if isinstance(s, ops.Tensor) else s + 1)
            strides.append(1)
            shrink_axis_mask |= 1 << index
    with op_scope(None, "strided_slice", [tensor, begin, end, strides]) as name:
        if begin:
            packed = [_pack_index(v, "stack") for v in (begin, end, strides)]
            if any(p.dtype == dtypes.int64 for p in packed):
                packed = [cast(p, dtypes.int64) for p in packed]
        else:
            empty = ops.convert_to_tensor(np.zeros([0], np.int32))
            packed = [empty, empty, empty]
        masks = mask_attrs(begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        out = strided_slice(tensor, *packed, **masks, name=name)
    if var is not None:

        def assign(value, name=None):
            return var._strided_slice_assign(
                *packed, value, **masks, name=name if name is not None else scope + "_assign"
            )

        scope = name  # ("strided_slice/": TF names the assign "strided_slice/_assign")
        ops.set_slice_assign(out, assign)
    return out


def slice_of_variable(var, slice_spec):
    """A variable's `__getitem__` (TF's `_SliceHelperVar`): its value's slice, with
    `assign` (see `_getitem`)."""
    return _getitem(var.value(), slice_spec, var=var)


ops.register_overload("getitem", _getitem)

# -- GatherV2 ----------------------------------------------------------------------------


def _gather_shape(op):
    params, indices, axis_t = op.inputs
    params_shape = params.shape.with_rank_at_least(1)
    axis_t.shape.with_rank(0)
    batch_dims = op._attr("batch_dims")
    axis = ops.constant_value(axis_t)
    if axis is None:
        if params_shape.ndims is not None and indices.shape.ndims is not None:
            if batch_dims < 0:
                batch_dims += indices.shape.ndims
            rank = params_shape.ndims + indices.shape.ndims - 1 - batch_dims
            return [tensor_shape.unknown_shape(rank)]
        return [tensor_shape.unknown_shape()]
    axis = int(axis)
    need = -axis if axis < 0 else axis + 1
    if params_shape.ndims is not None and params_shape.ndims < need:
        raise ValueError(f"Shape must be at least rank {need} but is rank {params_shape.ndims}")
    indices.shape.with_rank_at_least(abs(batch_dims))
    if params_shape.ndims is None or indices.shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    if batch_dims < 0:
        batch_dims += indices.shape.ndims
    params_shape.with_rank_at_least(batch_dims + 1)
    if axis < 0:
        axis += params_shape.ndims
    if batch_dims > axis:
        raise ValueError(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis}).")
    batch = params_shape[:batch_dims].merge_with(indices.shape[:batch_dims])
    return [batch + params_shape[batch_dims:axis] + indices.shape[batch_dims:]
            + params_shape[axis + 1 :]]  # fmt: skip


GatherV2 = register_op(
    "GatherV2",
    inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
    outputs=["output: Tparams"],
    # TF registers GatherV2 for int16 indices too (TF 2.21).
    attrs={
        "Tparams": ANY,
        "Tindices": TypeConstraint([dtypes.int16, dtypes.int32, dtypes.int64], default="int32"),
        "Taxis": INDEX,
        "batch_dims": 0,
    },
    shape_fn=_gather_shape,
)


def _check_gather_indices(xp, indices, limit):
    bad = (indices < 0) | (indices >= limit)
    if to_host(xp, bad.any()):
        indices, bad = to_host(xp, indices), to_host(xp, bad)
        where = np.argwhere(bad)[0]
        at = "indices[" + ",".join(str(int(i)) for i in where) + "]" if indices.ndim else "indices"
        raise _invalid(f"{at} = {indices[tuple(where)]} is not in [0, {limit})")  # (TF's wording)


def _gather_value(xp, params, indices, axis, batch_dims):
    if batch_dims == 0:
        return xp.take(params, indices, axis=axis)
    batch = params.shape[:batch_dims]
    n = int(np.prod(batch, dtype=np.int64))
    p = params.reshape((n,) + params.shape[batch_dims:])
    ind = indices.reshape((n,) + indices.shape[batch_dims:])
    parts = [xp.take(p[i], ind[i], axis=axis - batch_dims) for i in range(n)]
    inner = params.shape[batch_dims:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    out = xp.stack(parts) if parts else xp.zeros((0,) + inner, params.dtype)
    return out.reshape(batch + inner)


@GatherV2.kernel(host_memory=("axis",))
async def _gather_v2(ctx, params, indices, axis):
    xp = ctx.xp
    params, indices = xp.asarray(params), xp.asarray(indices)
    axis, batch_dims = int(axis), int(ctx.attrs["batch_dims"])
    if not -params.ndim <= axis < params.ndim:
        raise _invalid(
            f"Expected axis in the range [{-params.ndim}, {params.ndim}), but got {axis}"
        )
    axis %= params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    if not 0 <= batch_dims <= axis or batch_dims > indices.ndim:
        raise _invalid(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis}).")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise _invalid(
            f"params.shape[:{batch_dims}] should equal indices.shape[:{batch_dims}] but got "
            f"{_shape_str(params.shape)} and {_shape_str(indices.shape)}"
        )
    if xp is not np:  # TF's GPU kernel: no host check, zeros for an index out of range
        return await ctx.device.compute(
            device_indexing.gather, xp, params, indices, axis, batch_dims, _gather_value
        )
    _check_gather_indices(xp, indices, params.shape[axis])
    return await ctx.device.compute(_gather_value, xp, params, indices, axis, batch_dims)


@_dispatch.add_dispatch_support
def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """`tf.gather`: slices of `params` along `axis` picked by `indices`.

    Raises:
      ValueError: at build time for a known axis out of range of params' rank.
      InvalidArgumentError: at run time, "indices[1] = 7 is not in [0, 5)".
    """
    del validate_indices  # TF always validates on CPU
    if _ragged.is_ragged(params) or _ragged.is_ragged(indices):
        return _ragged.gather(params, indices, name=name, axis=axis, batch_dims=batch_dims)
    if batch_dims is None:
        batch_dims = 0
    if axis is None:
        axis = batch_dims
    attrs = {"batch_dims": int(batch_dims)}
    return apply("GatherV2", [params, indices, axis], attrs, name=name).outputs[0]


def batch_gather(params, indices, name=None):
    """TF1's `batch_gather`: gather along the axis after indices' leading (batch)
    dimensions, i.e. `gather(params, indices, axis=r - 1, batch_dims=r - 1)` with r the
    rank of `indices`.

    Raises:
      ValueError: indices of unknown rank.
    """
    with op_scope(name, "BatchGather", [params, indices]) as scope:
        indices = ops.convert_to_tensor(indices, name="indices")
        rank = indices.shape.ndims
        if rank is None:
            raise ValueError("batch_gather does not allow indices with unknown shape.")
        return gather(params, indices, axis=rank - 1, batch_dims=rank - 1, name=scope)


# -- ReverseV2 ---------------------------------------------------------------------------


def _norm_axes(axes, rank, fail):
    seen = set()
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise fail(f"'axis'[{len(seen)}] = {a} is out of valid range [0, {rank - 1}]")
        a %= rank
        if a in seen:
            raise fail(f"axis {a} specified more than once.")
        seen.add(a)
    return tuple(sorted(seen))


def _reverse_shape(op):
    x, axis_t = op.inputs
    axis_t.shape.with_rank(1)
    axes = ops.constant_value(axis_t)
    if axes is not None and x.shape.ndims is not None:
        _norm_axes(axes, x.shape.ndims, ValueError)
    return [x.shape]


ReverseV2 = register_op(
    "ReverseV2",
    inputs=["tensor: T", "axis: Tidx"],
    outputs=["output: T"],
    attrs={"T": ANY, "Tidx": INDEX},
    shape_fn=_reverse_shape,
)


@ReverseV2.kernel(host_memory=("axis",))
async def _reverse_v2(ctx, x, axis):
    x, axis = ctx.xp.asarray(x), np.asarray(axis)
    if axis.ndim != 1:
        raise _invalid(f"'dims' must be 1-dimension, not {axis.ndim}")
    axes = _norm_axes(axis, x.ndim, _invalid)
    return ctx.xp.flip(x, axis=axes) if axes else x


@_dispatch.add_dispatch_support
def reverse(tensor, axis, name=None):
    """`tf.reverse` (TF1's alias of reverse_v2): flip `tensor` along each of `axis`.

    Raises:
      ValueError / InvalidArgumentError: an axis out of range or given twice.
    """
    if _ragged.is_ragged(tensor):
        return _ragged.reverse(tensor, axis, name=name)
    return apply("ReverseV2", [tensor, axis], name=name).outputs[0]


reverse_v2 = reverse


# -- Split, SplitV -----------------------------------------------------------------------


def _split_axis(axis_t, rank):
    axis = ops.constant_value(axis_t)
    if axis is None:
        return None
    axis = int(axis)
    if rank is not None and not -rank <= axis < rank:
        raise ValueError(f"Dimension size, given by scalar input {axis}, must be in range "
                         f"[{-rank}, {rank})")  # fmt: skip
    return axis % rank if rank is not None and axis < 0 else axis


def _split_shape(op):
    axis_t, x = op.inputs
    n = op._attr("num_split")
    axis_t.shape.with_rank(0)
    axis = _split_axis(axis_t, x.shape.ndims)
    if axis is None or x.shape.ndims is None:
        shape = tensor_shape.unknown_shape(x.shape.ndims)
        return [shape] * n
    dims = x.shape.with_rank_at_least(axis + 1).as_list()
    d = dims[axis]
    if d is not None and d % n:
        raise ValueError(
            f"Dimension size must be evenly divisible by {n} but is {d}\n\tNumber of ways to "
            "split should evenly divide the split dimension"
        )
    dims[axis] = None if d is None else d // n
    return [dims] * n


Split = register_op(
    "Split", inputs=["split_dim: int32", "value: T"], outputs=["output: num_split * T"],
    attrs={"num_split": REQUIRED, "T": ANY}, shape_fn=_split_shape,
)  # fmt: skip


def _split_sizes_error(sizes):
    """TF's message for a size below -1 (the first), or None."""
    for i, s in enumerate(sizes):
        if s < -1:
            return f"Split size at index {i} must be >= 0. Got: {s}"
    return None


def _check_split_dim(x, axis):
    axis = np.asarray(axis)
    if axis.size != 1:
        raise _invalid("split_dim_tensor must have exactly one element.")
    axis = int(axis.reshape(()))
    if not -x.ndim <= axis < x.ndim:
        raise _invalid(
            f"-input rank(-{x.ndim}) <= split_dim < input rank ({x.ndim}), but got {axis}"
        )
    return axis % x.ndim


@Split.kernel(host_memory=("split_dim",))
async def _split(ctx, axis, x):
    x = ctx.xp.asarray(x)
    n = ctx.attrs["num_split"]
    axis = _check_split_dim(x, axis)
    if x.shape[axis] % n:
        raise _invalid(
            f"Number of ways to split should evenly divide the split dimension, but got "
            f"split_dim {axis} (size = {x.shape[axis]}) and num_split {n}"
        )
    step = x.shape[axis] // n
    return _outs(_pieces(x, axis, [k * step for k in range(n + 1)]))


def _splitv_shape(op):
    x, sizes_t, axis_t = op.inputs
    n = op._attr("num_split")
    rank = x.shape.ndims
    if rank is None:
        return [tensor_shape.unknown_shape()] * n
    if rank == 0:
        raise ValueError("Can't split scalars")
    axis = _split_axis(axis_t, rank)
    sizes = ops.constant_value(sizes_t)
    if axis is None:
        return [tensor_shape.unknown_shape(rank)] * n
    dims = x.shape.as_list()
    if sizes is None:
        dims[axis] = None
        return [dims] * n
    sizes = sizes.reshape(-1).tolist()
    if len(sizes) != n:
        raise ValueError("Length of size_splits should be equal to num_outputs")
    if _split_sizes_error(sizes):
        raise ValueError(_split_sizes_error(sizes))
    if sizes.count(-1) > 1:
        raise ValueError("size_splits can only have one -1")
    total = sum(s for s in sizes if s != -1)
    d = dims[axis]
    if d is not None and (total > d if -1 in sizes else total != d):
        raise ValueError(
            f"can't split axis of size {d} into pieces of size [{','.join(map(str, sizes))}]"
        )
    outs = []
    for s in sizes:
        s = (None if d is None else d - total) if s == -1 else s
        outs.append(dims[:axis] + [s] + dims[axis + 1 :])
    return outs


SplitV = register_op(
    "SplitV", inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
    outputs=["output: num_split * T"],
    attrs={"num_split": REQUIRED, "T": ANY, "Tlen": INDEX}, shape_fn=_splitv_shape,
)  # fmt: skip


@SplitV.kernel(host_memory=("size_splits", "split_dim"))
async def _split_v(ctx, x, sizes, axis):
    x, sizes = ctx.xp.asarray(x), np.asarray(sizes)
    n = ctx.attrs["num_split"]
    axis = _check_split_dim(x, axis)
    if sizes.ndim != 1 or sizes.size != n:
        raise _invalid(
            "size of the split_tensor must be 1-D and have the same elements as outputs got "
            f"{sizes.ndim} -D and {sizes.size} elements"
        )
    sizes = sizes.tolist()
    if _split_sizes_error(sizes):
        raise _invalid(_split_sizes_error(sizes))
    if sizes.count(-1) > 1:
        raise _invalid("There can only be one -1 in the input.")
    total = sum(s for s in sizes if s != -1)
    d = x.shape[axis]
    if any(s < -1 for s in sizes) or (total > d if -1 in sizes else total != d):
        raise _invalid(
            "Determined shape must either match input shape along split_dim exactly if fully "
            "specified, or be less than the size of the input along split_dim if not fully "
            f"specified.  Got: {total}"
        )
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + (d - total if s == -1 else s))
    return _outs(_pieces(x, axis, bounds))


def _pieces(x, axis: int, bounds: list) -> list:
    """Views of x between consecutive `bounds` along `axis` (what xp.split returns, by
    basic slicing: np.split's Python path cost ~20 us a call, an LSTM cell's gates)."""
    lead = (builtins.slice(None),) * axis
    return [x[(*lead, builtins.slice(a, b))] for a, b in zip(bounds[:-1], bounds[1:])]


@_dispatch.add_dispatch_support
def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """`tf.split`: `num_or_size_splits` equal parts (Split) or parts of given sizes (SplitV).

    Raises:
      ValueError: an uneven split or sizes not summing to the dimension (when known), or
        `num` not inferable.
      InvalidArgumentError: the same conditions at run time.
    """
    if _ragged.is_ragged(value):
        return _ragged.split(value, num_or_size_splits, axis, num, name)
    if isinstance(num_or_size_splits, int | np.integer | tensor_shape.Dimension) and not (
        isinstance(num_or_size_splits, bool)
    ):
        n = int(num_or_size_splits)
        return list(apply("Split", [axis, value], {"num_split": n}, name=name).outputs)
    size_splits = ops.convert_to_tensor(num_or_size_splits)
    if size_splits.shape.ndims == 0:
        raise ValueError(
            "Rank-0 tensors are not supported as the num_or_size_splits argument to split. "
            f"Argument provided: {num_or_size_splits}"
        )
    if num is None:
        if size_splits.shape.ndims is not None:
            num = size_splits.shape[0].value
        if num is None:
            raise ValueError(f"Cannot infer argument `num` from shape {num_or_size_splits}")
    attrs = {"num_split": int(num)}
    return list(apply("SplitV", [value, size_splits, axis], attrs, name=name).outputs)


# -- Unpack ------------------------------------------------------------------------------


def _unpack_shape(op):
    x = op.inputs[0]
    num = op._attr("num")
    if x.shape.ndims is None:
        return [tensor_shape.unknown_shape()] * num
    dims = x.shape.as_list()
    axis = op._attr("axis")
    if not -len(dims) <= axis < len(dims):
        raise ValueError(f"Invalid axis: {axis}; must be in [{-len(dims)},{len(dims)})")
    axis %= len(dims)
    if dims[axis] is not None and dims[axis] != num:
        raise ValueError(f"Dimension must be {num} but is {dims[axis]}")
    return [dims[:axis] + dims[axis + 1 :]] * num


Unpack = register_op(
    "Unpack", inputs=["value: T"], outputs=["output: num * T"],
    attrs={"num": REQUIRED, "T": ANY, "axis": 0}, shape_fn=_unpack_shape,
)  # fmt: skip


@Unpack.kernel()
async def _unpack(ctx, x):
    x = ctx.xp.asarray(x)
    num = ctx.attrs["num"]
    axis = ctx.attrs["axis"]
    if not -x.ndim <= axis < x.ndim:
        raise _invalid(f"axis = {axis} not in [{-x.ndim}, {x.ndim})")
    axis %= x.ndim
    if x.shape[axis] != num:
        raise _invalid(
            f"Input shape axis {axis} must equal {num}, got shape {_shape_str(x.shape)}"
        )
    moved = ctx.xp.moveaxis(x, axis, 0)
    return _outs(moved[i] for i in range(num))  # views; never iterate a device array


@_dispatch.add_dispatch_support
def unstack(value, num=None, axis=0, name="unstack"):
    """`tf.unstack`: split `value` along `axis` into a list of rank-1-lower tensors.

    Raises:
      ValueError: `num` is None and the dimension is unknown, or `axis` is out of range.
    """
    value = ops.convert_to_tensor(value)
    if num is None:
        shape = value.shape
        if shape.ndims is not None:
            if not -shape.ndims <= axis < shape.ndims:
                raise ValueError(f"axis = {axis} not in [{-shape.ndims}, {shape.ndims})")
            num = shape[axis].value
        if num is None:
            raise ValueError(f"Cannot infer num from shape {shape}")
    attrs = {"num": int(num), "axis": int(axis)}
    return list(apply("Unpack", [value], attrs, name=name).outputs)


# -- OneHot --------------------------------------------------------------------------------


def _one_hot_shape(op):
    indices, depth_t, on_t, off_t = op.inputs
    depth_t.shape.with_rank(0)
    on_t.shape.with_rank(0)
    off_t.shape.with_rank(0)
    axis = op._attr("axis")
    if axis < -1:
        raise ValueError(f"axis must be >= -1, but got {axis}")
    if indices.shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    dims = indices.shape.as_list()
    if axis > len(dims):
        raise ValueError(
            f"Expected axis to be -1 or between [0, {len(dims) + 1}).  But received: {axis}"
        )
    depth = ops.constant_value(depth_t)
    if depth is not None and int(depth) < 0:
        raise ValueError(f"depth must be non-negative, got: {int(depth)}")
    pos = len(dims) if axis == -1 else axis
    return [dims[:pos] + [None if depth is None else int(depth)] + dims[pos:]]


OneHot = register_op(
    "OneHot", inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
    outputs=["output: T"],
    attrs={
        "axis": -1,
        "T": ANY,
        "TI": TypeConstraint(["uint8", "int32", "int64"], default="int64"),
    },
    shape_fn=_one_hot_shape,
)  # fmt: skip


def _one_hot_value(xp, indices, depth, on, off, axis, dtype):
    hot = indices[..., None] == xp.arange(depth).reshape((1,) * indices.ndim + (depth,))
    out = xp.where(hot, on, off).astype(dtype)
    return xp.moveaxis(out, -1, axis) if axis != -1 else out


@OneHot.kernel(host_memory=("depth",))
async def _one_hot(ctx, indices, depth, on, off):
    xp = ctx.xp
    indices = xp.asarray(indices)
    depth, on, off = np.asarray(depth), xp.asarray(on), xp.asarray(off)
    axis = ctx.attrs["axis"]
    for what, v in (("depth", depth), ("on_value", on), ("off_value", off)):
        if v.ndim:
            raise _invalid(f"{what} must be a scalar, but got: {_shape_str(v.shape)}")
    if not -1 <= axis <= indices.ndim:
        raise _invalid(
            f"Expected axis to be -1 or between [0, {indices.ndim + 1}).  But received: {axis}"
        )
    depth = int(depth)
    if depth < 0:
        raise _invalid(f"depth must be non-negative, got: {depth}")
    dtype = ctx.attrs["T"]
    ctx.device.check_alloc(indices.size * depth, dtype)
    args = (xp, indices, depth, on, off, axis, _np_dtype(dtype))
    return await ctx.device.compute(_one_hot_value, *args)


def _hinted(value, hint, name):
    return ops.convert_to_tensor(value, name=name, preferred_dtype=hint)


@_dispatch.add_dispatch_support
def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """`tf.one_hot`: `on_value` where index == position along a new `axis`, else `off_value`.

    Indices outside [0, depth) give an all-`off_value` row.

    Raises:
      TypeError: `on_value`/`off_value`/`dtype` disagree.
      ValueError: `axis` out of range at build time.
    """
    if _ragged.is_ragged(indices):  # (TF's dispatch: the flat values' one_hot)
        if axis is not None and 0 <= axis <= indices.ragged_rank:
            raise ValueError(
                f"axis ({axis}) must be greater than indices.ragged_rank "
                f"({indices.ragged_rank})."
            )
        inner = None if axis is None or axis < 0 else axis - indices.ragged_rank
        return _ragged.map_flat_values(
            one_hot, indices, depth, on_value, off_value, inner, dtype, name
        )
    with op_scope(name, "one_hot", [indices, depth, on_value, off_value]) as scope:
        # A Python on/off value takes `dtype` where it can (TF's dtype_hint):
        # one_hot(..., on_value=1.0, dtype=float16) is float16.
        hint = None if dtype is None else dtypes.as_dtype(dtype)
        # (TF names only the defaults: given values are "one_hot/Const", "one_hot/Const_1")
        on = None if on_value is None else _hinted(on_value, hint, None)
        off = None if off_value is None else _hinted(off_value, hint, None)
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            for what, t in (("on_value", on), ("off_value", off)):
                if t is not None and t.dtype != dtype:
                    raise TypeError(f"dtype {t.dtype} of {what} does not match dtype parameter "
                                    f"{dtype}")  # fmt: skip
        else:
            dtype = on.dtype if on is not None else off.dtype if off is not None else None
            dtype = dtype or dtypes.float32
        if on is None:
            on = ops.convert_to_tensor(np.array(1).astype(_np_dtype(dtype)), name="on_value")
        if off is None:
            off = ops.convert_to_tensor(np.array(0).astype(_np_dtype(dtype)), name="off_value")
        if on.dtype != off.dtype:
            raise TypeError(f"dtype {on.dtype} of on_value does not match dtype {off.dtype} of "
                            "off_value")  # fmt: skip
        attrs = {"axis": -1 if axis is None else int(axis)}
        return apply("OneHot", [indices, depth, on, off], attrs, name=scope).outputs[0]


# -- Where, Select --------------------------------------------------------------------------


def _where_shape(op):
    x = op.inputs[0]
    return [[None, x.shape.ndims]]


Where = register_op(
    "Where", inputs=["input: T"], outputs=["index: int64"],
    attrs={"T": TypeConstraint([*NUMERIC.allowed, dtypes.bool], default=dtypes.bool)},
    shape_fn=_where_shape,
)  # fmt: skip


@Where.kernel()
async def _where(ctx, cond):
    return ctx.xp.argwhere(ctx.xp.asarray(cond)).astype(np.int64)


def _select_shape(op):
    cond, t, e = (i.shape for i in op.inputs)
    data = merged_shapes(t, e)
    if cond.ndims is None or data.ndims is None or cond.ndims == 0:
        return [data]
    if cond.ndims != 1 or data.ndims == 0:
        return [data.merge_with(cond)]
    first = data[0].merge_with(cond[0])
    return [tensor_shape.TensorShape([first]) + data[1:]]


Select = register_op(
    "Select", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
    attrs={"T": ANY}, shape_fn=_select_shape,
)  # fmt: skip


@Select.kernel()
async def _select(ctx, cond, t, e):
    xp = ctx.xp
    cond, t, e = xp.asarray(cond), xp.asarray(t), xp.asarray(e)
    if t.shape != e.shape:
        raise _invalid(
            f"'then' and 'else' must have the same size.  but received: {_shape_str(t.shape)} "
            f"vs. {_shape_str(e.shape)}"
        )
    if cond.ndim == 1 and t.ndim > 1:
        if cond.shape[0] != t.shape[0]:
            raise _invalid(f"Number of batches of 'then' must match size of 'cond', but saw: "
                           f"{t.shape[0]} vs. {cond.shape[0]}")  # fmt: skip
        if xp is np and t.size >= 1024 and t.dtype == e.dtype:
            return await ctx.device.compute(_select_rows, cond, t, e)
        cond = cond.reshape(cond.shape + (1,) * (t.ndim - 1))
    elif cond.ndim and cond.shape != t.shape:
        raise _invalid(
            f"'then' and 'cond' must have the same size.  but received: {_shape_str(t.shape)} "
            f"vs. {_shape_str(cond.shape)}"
        )
    if xp is np and t.size >= 1024 and t.dtype == e.dtype and t.dtype.kind in "fiuc":
        if t.dtype.itemsize in _BITS:
            return await ctx.device.compute(_select_bits, cond, t, e)
    return await ctx.device.compute(xp.where, cond, t, e)


_BITS = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _select_bits(cond, t, e, out=None):
    """np.where(cond, t, e) on the values' bits: e ^ ((t ^ e) * cond), exact for every
    value (nan and inf included), into `out` if given (neither t nor e).  np.where
    branches on each element and a random mask mispredicts: 3.5 ns an element against
    ~1 for these three passes (float32).  `cond` broadcasts against t: bools, or ints
    of t's width (a batch vector as one factor per row, fused_elementwise._select)."""
    ints = _BITS[t.dtype.itemsize]
    out = np.empty(t.shape, t.dtype) if out is None else out
    bits, e_bits = out.view(ints), e.view(ints)
    np.bitwise_xor(t.view(ints), e_bits, out=bits)
    np.multiply(bits, cond, out=bits)
    np.bitwise_xor(bits, e_bits, out=bits)
    return out


def _select_rows(cond, t, e):
    """Select with a batch vector `cond` (TF1: row r of t where cond[r], else e's): the
    rows copied, the more common branch whole, then the other one's rows.  Copies are
    exact; half the time of the bit masks broadcast along the rows (static_rnn's
    sequence_length steps: [128, 64] float32 rows, 4-5 us against 9-10)."""
    cond = np.asarray(cond, bool)
    n_true = int(np.count_nonzero(cond))
    base, other, rows = (t, e, ~cond) if 2 * n_true > cond.size else (e, t, cond)
    out = np.array(base, copy=True, order="C")
    if n_true not in (0, cond.size):
        idx = np.flatnonzero(rows)
        out[idx] = other[idx]
    return out


# -- SelectV2 (TF2's where: condition, t and e broadcast together) -------------------------


def _select_v2_shape(op):
    cond, t, e = (i.shape for i in op.inputs)
    return [tensor_shape.broadcast_shape(tensor_shape.broadcast_shape(cond, t), e)]


SelectV2 = register_op(
    "SelectV2", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
    attrs={"T": ANY}, shape_fn=_select_v2_shape,
)  # fmt: skip


@SelectV2.kernel()
async def _select_v2(ctx, cond, t, e):
    xp = ctx.xp
    cond, t, e = xp.asarray(cond), xp.asarray(t), xp.asarray(e)
    try:
        np.broadcast_shapes(cond.shape, t.shape, e.shape)
    except ValueError:
        raise _invalid(
            f"condition {_shape_str(cond.shape)}, then {_shape_str(t.shape)}, and else "
            f"{_shape_str(e.shape)} must be broadcastable"
        ) from None
    return await ctx.device.compute(xp.where, cond, t, e)


@SelectV2.gradient
def _select_v2_grad(op, grad):
    """TF's _SelectGradV2: each branch's share, summed back over its broadcast axes."""
    c, x, y = op.inputs
    out = op.outputs[0]
    zeros = _g.zeros_like(grad)
    gx = _g.apply("SelectV2", c, grad, zeros)
    gy = _g.apply("SelectV2", c, zeros, grad)
    gx, _ = _g.broadcast_reduce(x, out, gx, None)
    gy, _ = _g.broadcast_reduce(y, out, gy, None)
    return [None, gx, gy]


@_dispatch.add_dispatch_support
def where(condition, x=None, y=None, name=None):
    """TF1 `tf.where`: Select(condition, x, y), or without x/y the int64 coordinates
    [num_true, rank] of the true elements.  With x/y, `condition` is a scalar, x's
    shape, or a vector matching x's first dimension.

    Raises:
      ValueError: only one of x and y given, or incompatible shapes (when known).
      InvalidArgumentError: incompatible shapes at run time.
    """
    if any(_ragged.is_ragged(v) for v in (condition, x, y)):
        return _ragged.where(condition, x, y, name=name)
    if x is None and y is None:
        with op_scope(name, "Where", [condition]) as scope:
            condition = ops.convert_to_tensor(
                condition, preferred_dtype=dtypes.bool, name="condition"
            )
            return apply("Where", [condition], name=scope).outputs[0]
    if x is not None and y is not None:
        return apply("Select", [condition, x, y], name=name).outputs[0]
    raise ValueError("x and y must both be non-None or both be None.")


# -- gradients (TF's array_grad.py) ---------------------------------------------------------

NotDifferentiable("OneHot")
NotDifferentiable("Where")


@Slice.gradient
def _slice_grad(op, grad):
    """Pad the gradient back to the input's shape."""
    x, begin = op.inputs[:2]
    idx = begin.dtype
    out_shape = _g.apply("Shape", op.outputs[0], out_type=idx)
    x_shape = _g.apply("Shape", x, out_type=idx)
    column = _g.constant([-1, 1], idx)
    before = _g.reshape(begin, column)
    after = _g.reshape(_g.apply("Sub", _g.apply("Sub", x_shape, out_shape), begin), column)
    paddings = ops.apply_op("ConcatV2", [[before, after], _g.constant(1)]).outputs[0]
    return [_g.apply("Pad", grad, paddings), None, None]


@StridedSlice.gradient
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    attrs = mask_attrs(*slice_masks(op))
    # As TF's: what is known when building goes in as new Consts of the gradient op
    # ("StridedSliceGrad/begin", ...), the forward op's own tensors otherwise.
    args = [_g.shape(x, out_type=begin.dtype), begin, end, strides]
    args = [t if (v := ops.constant_value(t)) is None else v for t in args]
    dx = ops.apply_op("StridedSliceGrad", [*args, grad], attrs).outputs[0]
    return [dx, None, None, None]


@GatherV2.gradient
def _gather_v2_grad(op, grad):
    """An IndexedSlices for axis 0 (only the gathered rows); dense for other axes."""
    from asyncflow.indexed_slices import IndexedSlices

    params, indices, axis_t = op.inputs
    batch_dims = int(op._attr("batch_dims"))
    grad = ops.convert_to_tensor(grad)
    with ops.colocate_with(params):
        params_shape = _g.shape(params)
    axis = ops.constant_value(axis_t)
    rank = params.shape.ndims
    if axis is not None and rank is not None:
        axis = int(axis) % rank
    if axis == 0 and batch_dims == 0:
        size = _g.reshape(_g.apply("Size", indices), _g.constant([1]))
        tail = ops.apply_op(
            "StridedSlice", [params_shape, [1], [0], [1]], {"end_mask": 1}
        ).outputs[0]
        values_shape = ops.apply_op("ConcatV2", [[size, tail], _g.constant(0)]).outputs[0]
        values = _g.reshape(grad, values_shape)
        flat_indices = _g.reshape(indices, size)
        return [IndexedSlices(values, flat_indices, params_shape), None, None]
    if axis is None or rank is None or indices.shape.ndims is None or batch_dims != 0:
        return [_gather_grad_general(params, indices, axis_t, batch_dims, grad), None, None]
    # Move the gathered axis to the front, sum rows by index, move it back.
    n_idx = indices.shape.ndims
    grad_rank = rank - 1 + n_idx
    # grad dims: params[:axis] + indices dims + params[axis+1:]; flatten the indices dims.
    outer = list(range(axis))
    idx_dims = list(range(axis, axis + n_idx))
    inner = list(range(axis + n_idx, grad_rank))
    moved = _g.transpose(grad, _g.constant(idx_dims + outer + inner))
    flat_ids = _g.reshape(indices, _g.constant([-1]))
    moved_shape = _g.shape(moved)
    rest = ops.apply_op("StridedSlice", [moved_shape, [n_idx], [0], [1]], {"end_mask": 1}).outputs[
        0
    ]
    flat = _g.reshape(
        moved, ops.apply_op("ConcatV2", [[_g.constant([-1]), rest], _g.constant(0)]).outputs[0]
    )
    num = ops.apply_op("StridedSlice", [params_shape, [axis], [axis + 1], [1]],
                       {"shrink_axis_mask": 1}).outputs[0]  # fmt: skip
    summed = _g.apply("UnsortedSegmentSum", flat, flat_ids, num)
    # summed dims: [params[axis]] + params[:axis] + params[axis+1:]
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    return [_g.transpose(summed, _g.constant(perm)), None, None]


def _vec(t):
    """A scalar tensor as a 1-element vector."""
    return _g.reshape(t, _g.constant([1]))


def _part(v, begin, end=None, shrink=False):
    """v[begin:end] (or v[begin] with shrink) of a 1-D tensor; bounds are ints or scalars."""
    b = _vec(begin) if isinstance(begin, ops.Tensor) else _g.constant([begin])
    e = (
        _g.constant([0])
        if end is None
        else (_vec(end) if isinstance(end, ops.Tensor) else _g.constant([end]))
    )
    attrs = {"end_mask": 1 if end is None else 0, "shrink_axis_mask": 1 if shrink else 0}
    return ops.apply_op("StridedSlice", [v, b, e, _g.constant([1])], attrs).outputs[0]


def _gather_grad_general(params, indices, axis_t, batch_dims, grad):
    """GatherV2's gradient for any axis (a tensor too) and batch_dims, dense (TF's
    _GatherV2Grad): move the gathered axis behind the batch dimensions, sum rows by
    their (batch-offset) indices, move it back."""
    i32 = dtypes.int32
    grad = ops.convert_to_tensor(grad)
    with ops.colocate_with(params):
        params_shape = _g.shape(params)
    if batch_dims < 0:
        if indices.shape.ndims is None:
            raise ValueError(
                "Currently, it is unsupported to take the gradient of tf.gather when "
                "batch_dims < 0 and the rank of the indices is unknown. Please pass a "
                "positive batch_dims or use tf.ensure_shape to update the shape of "
                "indices when calling tf.gather."
            )
        batch_dims += indices.shape.ndims
    rank = _g.apply("Rank", params)
    axis = _g.apply("FloorMod", _g.cast(axis_t, i32), rank)
    axis1 = _g.apply("AddV2", axis, _g.constant(1))
    outer_shape = _part(params_shape, 0, axis)
    inner_shape = _part(params_shape, axis1)
    values_shape = _g.concat([outer_shape, _g.constant([-1]), inner_shape], 0)
    values_dims = _g.apply("Size", values_shape, out_type=i32)
    axis_dims = _g.apply("Size", outer_shape, out_type=i32)
    one = _g.constant(1)
    outer_batches = _g.apply("Range", _g.constant(0), _g.constant(batch_dims), one)
    batch_axis = _g.apply("Range", _g.constant(batch_dims), axis_dims, one)
    inner_axes = _g.apply("Range", _g.apply("AddV2", axis_dims, one), values_dims, one)
    values = _g.reshape(grad, values_shape)
    perm = _g.concat([outer_batches, _vec(axis_dims), batch_axis, inner_axes], 0)
    values = _g.transpose(values, perm)
    size = _part(params_shape, axis, axis1, shrink=True)
    dx = _batch_gather_grad(params_shape, values, indices, batch_dims, size)
    back = _g.concat(
        [outer_batches, _g.apply("AddV2", batch_axis, one), _g.constant([batch_dims]), inner_axes],
        0,
    )
    return _g.transpose(dx, back)


def _batch_gather_grad(params_shape, values, indices, batch_dims, size):
    indices_size = _vec(_g.apply("Size", indices, out_type=dtypes.int32))
    if batch_dims:
        values_shape = _g.shape(values)
        outer = _part(values_shape, 0, batch_dims)
        inner = _part(values_shape, batch_dims + 1)
        batch_size = _g.apply("Prod", outer, _g.constant([0]), keep_dims=False)
        indices = _batch_offsets(params_shape, indices, batch_dims, size)
        size = _g.apply("Mul", size, batch_size)
        values = _g.reshape(values, _g.concat([_g.constant([-1]), inner], 0))
    indices = _g.reshape(indices, indices_size)
    dx = _g.apply("UnsortedSegmentSum", values, indices, size)
    if batch_dims:
        dx = _g.reshape(dx, _g.concat([outer, _g.constant([-1]), _part(_g.shape(dx), 1)], 0))
    return dx


def _batch_offsets(params_shape, indices, batch_dims, size):
    """indices plus, per batch position, its batch's row offset (flat batch index times
    the gathered axis' `size`) in the batch-flattened gradient."""
    dt = indices.dtype
    shape = _g.cast(params_shape, dt)
    accum = _g.cast(size, dt)
    out = indices
    for dim in range(batch_dims, 0, -1):
        dim_value = _part(shape, dim - 1, dim, shrink=True)
        ids = _g.apply("Range", _g.constant(0, dt), dim_value, _g.constant(1, dt))
        ids = _g.apply("Mul", ids, accum)
        accum = _g.apply("Mul", accum, dim_value)
        tail = _g.apply("Sub", _g.apply("Rank", indices), _g.constant(dim))
        dim_shape = _g.concat(
            [
                _g.constant([1] * (dim - 1), dtypes.int32),
                _vec(_g.cast(dim_value, dtypes.int32)),
                _g.apply("Fill", _vec(tail), _g.constant(1)),
            ],
            0,
        )
        out = _g.apply("AddV2", out, _g.reshape(ids, dim_shape))
    return out


@ReverseV2.gradient
def _reverse_grad(op, grad):
    return [_g.apply("ReverseV2", grad, op.inputs[1]), None]


@Split.gradient
def _split_grad(op, *grads):
    return [None, ops.apply_op("ConcatV2", [list(grads), op.inputs[0]]).outputs[0]]


@SplitV.gradient
def _split_v_grad(op, *grads):
    return [ops.apply_op("ConcatV2", [list(grads), op.inputs[2]]).outputs[0], None, None]


@Unpack.gradient
def _unpack_grad(op, *grads):
    return [ops.apply_op("Pack", [list(grads)], {"axis": op._attr("axis")}).outputs[0]]


@Select.gradient
def _select_grad(op, grad):
    c, x = op.inputs[:2]
    zeros = _g.zeros_like(x)
    return [None, _g.apply("Select", c, grad, zeros), _g.apply("Select", c, zeros, grad)]
