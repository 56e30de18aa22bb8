"""N-d indexing ops: GatherNd, ScatterNd, TensorScatter{Update,Add,Sub,Max,Min} and the
variable updates ScatterNd{Update,Add,Sub}.

An index tensor of shape [..., K] names, in its last dimension, the first K coordinates
of a slice of a tensor of shape S: it picks (or writes) the slices S[K:].  Every kernel
reduces that to one flat row index into the tensor viewed as [prod(S[:K]), prod(S[K:])],
after the same bounds check, so the three kinds of op share one implementation.

Duplicates: ScatterNd and the Add/Sub updates accumulate; TensorScatterUpdate and
ScatterNdUpdate keep one of them (the last here; TF leaves it unspecified).

GatherNd, ScatterNd and TensorScatter* have one generic kernel: the indices (and
ScatterNd's shape) stay in host memory, where the bounds check and the flat row ids are
computed; the values live on the kernel's device.  The variable updates are CPU kernels,
as the variables they update.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, ragged_functions, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, manip_ops, math_ops, reduction_ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import scatter_at
from asyncflow.ops.state_ops import _is_resource, require_ref
from asyncflow.ragged import is_ragged
from asyncflow.registry import (
    ANY,
    INDEX,
    NUMERIC,
    REAL,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)

__all__ = [
    "batch_scatter_update",
    "gather_nd",
    "scatter_nd",
    "tensor_scatter_nd_update",
    "tensor_scatter_nd_add",
    "tensor_scatter_nd_sub",
    "tensor_scatter_nd_max",
    "tensor_scatter_nd_min",
    "tensor_scatter_update",
    "tensor_scatter_add",
    "tensor_scatter_sub",
    "scatter_nd_update",
    "scatter_nd_add",
    "scatter_nd_sub",
]


def _shape_str(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


_POLICIES = ("", "DEFAULT", "ERROR", "IGNORE")


def _ignoring(ctx) -> bool:
    """Whether the op's `bad_indices_policy` skips out-of-range indices (IGNORE) rather
    than failing; a policy TF has no kernel for is its InvalidArgumentError."""
    policy = ctx.attrs.get("bad_indices_policy", "")
    if policy not in _POLICIES:
        raise _invalid(
            f"No OpKernel was registered to support Op '{ctx.op.type}' with "
            f'bad_indices_policy="{policy}" (one of "", "DEFAULT", "ERROR", "IGNORE")'
        )
    return policy == "IGNORE"


def _flat_rows(indices: np.ndarray, shape, what: str, ignore: bool = False) -> np.ndarray:
    """Flat row ids of `indices` [..., K] into `shape` viewed as [prod(shape[:K]), -1].

    Raises InvalidArgumentError, as TF does, naming the first index out of range; with
    `ignore` such rows are -1 instead.
    """
    k = indices.shape[-1]
    n = int(np.prod(indices.shape[:-1], dtype=np.int64))
    idx = indices.reshape(n, k).astype(np.int64, copy=False)
    dims = np.asarray(shape[:k], dtype=np.int64)
    bad = ((idx < 0) | (idx >= dims)).any(axis=1)
    if ignore and bad.any():
        rows = _flat_rows(np.where(bad[:, None], 0, idx), shape, what)
        rows[bad] = -1
        return rows
    if bad.any():
        i = int(np.argmax(bad))
        coords = ", ".join(str(int(c)) for c in idx[i])
        # TF names the bad row by its position in indices.shape[:-1] ("indices[0,1]"),
        # and by nothing when that is a scalar ("indices = [7]").
        pos = ",".join(str(int(p)) for p in np.unravel_index(i, indices.shape[:-1]))
        where = f"indices[{pos}]" if indices.ndim > 1 else "indices"
        raise _invalid(f"{where} = [{coords}] does not index into {what} {_shape_str(shape)}")
    if k == 0:
        return np.zeros(idx.shape[0], np.int64)
    return np.ravel_multi_index(tuple(idx.T), tuple(int(d) for d in dims))


def _as_rows(x: np.ndarray, k: int) -> np.ndarray:
    """x viewed as [prod(x.shape[:k]), prod(x.shape[k:])]."""
    return x.reshape(
        int(np.prod(x.shape[:k], dtype=np.int64)), int(np.prod(x.shape[k:], dtype=np.int64))
    )


def _updates_shape_check(indices_shape, updates_shape, shape, fail) -> None:
    """updates.shape must be indices.shape[:-1] + shape[K:] (TF's ValidateUpdateShape)."""
    k = indices_shape[-1]
    outer = len(indices_shape) - 1
    want = tuple(indices_shape[:-1]) + tuple(shape[k:])
    if tuple(updates_shape) != want:
        raise fail(
            f"Dimensions [0,{outer}) of indices[shape={_shape_str(indices_shape)}] must match "
            f"dimensions [0,{outer}) of updates[shape={_shape_str(updates_shape)}] and "
            f"updates.shape[{outer}:] must equal shape[{k}:] = {_shape_str(shape[k:])}"
        )


# -- shape functions -----------------------------------------------------------------------


def _dims(shape: tensor_shape.TensorShape) -> str:
    """A static shape as TF's shape functions print it: [2,?,3]."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


def _merge_reason(a: tensor_shape.TensorShape, b: tensor_shape.TensorShape):
    """Why `a` and `b` do not merge, in TF's words; None when they do."""
    if a.ndims != b.ndims:
        return f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}"
    for i, (x, y) in enumerate(zip(a.as_list(), b.as_list(), strict=True)):
        if x is not None and y is not None and x != y:
            return (
                f"Dimension {i} in both shapes must be equal, but are {x} and {y}. "
                f"Shapes are {_dims(a)} and {_dims(b)}."
            )
    return None


def _static_updates_check(indices, updates, shape: tensor_shape.TensorShape) -> None:
    """Build-time check of updates' shape where it is known (TF's ScatterNd shape
    function: ValueError, "Dimensions [0,2) of indices[shape=[4,1,1]] = [4,1] must match
    dimensions [0,2) of updates[shape=[4]] = [4]: ...")."""
    if indices.ndims is None or updates.ndims is None:
        return
    k = indices.dims[-1].value if indices.ndims else None
    outer = indices.ndims - 1
    prefix_u = updates[: min(outer, updates.ndims)]
    reason = _merge_reason(indices[:outer], prefix_u)
    if reason is not None:
        raise ValueError(
            f"Dimensions [0,{outer}) of indices[shape={_dims(indices)}] = "
            f"{_dims(indices[:outer])} must match dimensions [0,{outer}) of "
            f"updates[shape={_dims(updates)}] = {_dims(prefix_u)}: {reason}"
        )
    if k is None or shape.ndims is None:
        return
    if k > shape.ndims:
        raise ValueError(f"indices.shape[-1] must be <= shape.rank, but saw {k} > {shape}")
    suffix_u = updates[outer:]
    reason = _merge_reason(shape[k:], suffix_u)
    if reason is not None:
        raise ValueError(
            f"Dimensions [{k},{shape.ndims}) of input[shape={_dims(shape)}] = "
            f"{_dims(shape[k:])} must match dimensions [{outer},{updates.ndims}) of "
            f"updates[shape={_dims(updates)}] = {_dims(suffix_u)}: {reason}"
        )
    if (
        shape.is_fully_defined()
        and shape.num_elements() == 0
        and indices.is_fully_defined()
        and updates.is_fully_defined()
        and (indices.num_elements() or updates.num_elements())
    ):
        raise ValueError("Indices and updates specified for empty input")


def _static_str(shape: tensor_shape.TensorShape) -> str:
    return _shape_str(shape.as_list()) if shape.is_fully_defined() else str(shape)


def _gather_nd_shape(op):
    params, indices = op.inputs[0].shape, op.inputs[1].shape
    indices = indices.with_rank_at_least(1)
    if indices.ndims is None:
        return [tensor_shape.unknown_shape()]
    k = indices.dims[-1].value
    if k is None or params.ndims is None:
        return [tensor_shape.unknown_shape()]
    if k > params.ndims:
        raise ValueError(
            f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
            f"{_static_str(indices)} and params shape: {_static_str(params)}"
        )
    return [indices[:-1].concatenate(params[k:])]


def _scatter_nd_shape(op):
    indices, updates, shape_t = (t.shape for t in op.inputs)
    indices.with_rank_at_least(1)
    shape_t.with_rank(1)
    value = ops.constant_value(op.inputs[2])
    if value is None:
        n = shape_t.dims[0].value if shape_t.ndims else None
        shape = tensor_shape.unknown_shape(n) if n is not None else tensor_shape.unknown_shape()
    else:
        shape = tensor_shape.TensorShape([int(d) for d in value])
    _static_updates_check(indices, updates, shape)
    return [shape]


def _tensor_scatter_shape(op):
    tensor, indices, updates = (t.shape for t in op.inputs)
    indices.with_rank_at_least(1)
    if tensor.ndims == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    _static_updates_check(indices, updates, tensor)
    return [tensor]


# -- GatherNd ------------------------------------------------------------------------------

# TF registers GatherNd for int16 indices too (TF 2.21).
_GATHER_ND_INDEX = TypeConstraint([dtypes.int16, dtypes.int32, dtypes.int64], default="int32")

GatherNd = register_op(
    "GatherNd",
    inputs=["params: Tparams", "indices: Tindices"],
    outputs=["output: Tparams"],
    attrs={"Tparams": ANY, "Tindices": _GATHER_ND_INDEX, "bad_indices_policy": ""},
    shape_fn=_gather_nd_shape,
)


def _gather_nd_value(xp, params, indices, ignore=False):
    k = indices.shape[-1]
    if k > params.ndim:
        raise _invalid(
            f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
            f"{_shape_str(indices.shape)} and params shape: {_shape_str(params.shape)}"
        )
    if params.size == 0 and indices.size // max(k, 1) > 0 and k > 0:
        raise _invalid(
            "Requested more than 0 entries, but params is empty.  Params shape: "
            + _shape_str(params.shape)
        )
    rows = _flat_rows(indices, params.shape, "param shape", ignore)
    out_shape = indices.shape[:-1] + params.shape[k:]
    if ignore and (rows < 0).any():  # out-of-range rows read as zeros
        flat = _as_rows(params, k)
        out = xp.zeros((rows.size, flat.shape[1]), params.dtype)
        keep = np.nonzero(rows >= 0)[0]
        out[_device_rows(xp, keep)] = flat[_device_rows(xp, rows[keep])]
        return out.reshape(out_shape)
    return _as_rows(params, k)[_device_rows(xp, rows)].reshape(out_shape)


def _device_rows(xp, rows):
    return rows if xp is np else xp.asarray(rows)


@GatherNd.kernel(host_memory=("indices",))
async def _gather_nd(ctx, params, indices):
    params, indices = ctx.xp.asarray(params), np.asarray(indices)
    if indices.ndim < 1:
        raise _invalid(f"indices must be at least a vector, got shape {_shape_str(indices.shape)}")
    return await ctx.device.compute(_gather_nd_value, ctx.xp, params, indices, _ignoring(ctx))


@GatherNd.gradient
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    with ops.colocate_with(params):
        shape = _g.shape(params, out_type=indices.dtype)
    ishape = indices.shape
    if ishape.ndims == 2 and ishape.dims[-1].value == 1:
        # Whole rows picked by a [N, 1] index: TF's gradient is IndexedSlices over them.
        from asyncflow.indexed_slices import IndexedSlices
        from asyncflow.ops import array_ops

        rows = array_ops.squeeze(indices, axis=[-1])
        return [IndexedSlices(ops.convert_to_tensor(grad), rows, shape), None]
    return [_g.apply("ScatterNd", indices, ops.convert_to_tensor(grad), shape), None]


def _batch_indices(indices: ops.Tensor, batch_dims: int) -> ops.Tensor:
    """indices [B..., N..., K] -> [B..., N..., batch_dims + K]: each row prefixed with
    its own batch coordinates (how TF's gather_nd reduces batch_dims to a plain GatherNd)."""
    from asyncflow.ops import array_ops, math_ops, reduction_ops

    shape = array_ops.shape(indices, out_type=indices.dtype)
    ones = array_ops.ones_like(indices[..., :1])
    parts = []
    for d in range(batch_dims):
        n = shape[d]
        coord = reduction_ops.range(n, dtype=indices.dtype)
        bshape = [1] * indices.shape.ndims
        bshape[d] = -1
        parts.append(math_ops.multiply(ones, array_ops.reshape(coord, bshape)))
    return array_ops.concat(parts + [indices], axis=-1)


@_dispatch.add_dispatch_support
def gather_nd(params, indices, name=None, batch_dims=0, bad_indices_policy=""):
    """`tf.gather_nd`: slices of `params` at the N-d coordinates in the last dimension of
    `indices`; output shape indices.shape[:-1] + params.shape[indices.shape[-1]:].

    Raises:
      ValueError: at build time, indices.shape[-1] > rank(params).
      InvalidArgumentError: at run time, "indices[1] = [3, 0] does not index into param
        shape [3,4]".
    """
    batch_dims = int(batch_dims)
    policy = bad_indices_policy not in ("", "DEFAULT")
    if batch_dims == 0 and is_ragged(params):
        return ragged_functions.gather_nd(params, indices, name=name)
    if batch_dims == 0 and hasattr(params, "gather_nd") and not policy:
        return params.gather_nd(indices, name=name)  # a resource variable, as TF's
    if batch_dims == 0:
        attrs = {"bad_indices_policy": bad_indices_policy}
        return ops.apply_op("GatherNd", [params, indices], attrs, name=name).outputs[0]
    with ops.name_scope(name, "GatherNd", [params, indices]):
        params = ops.convert_to_tensor(params, name="params")
        indices = ops.convert_to_tensor(indices, name="indices")
        if indices.shape.ndims is None or batch_dims < 0:
            raise ValueError("gather_nd with batch_dims needs indices of known rank")
        return ops.apply_op("GatherNd", [params, _batch_indices(indices, batch_dims)]).outputs[0]


# -- ScatterNd -----------------------------------------------------------------------------

ScatterNd = register_op(
    "ScatterNd",
    inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
    outputs=["output: T"],
    attrs={"T": ANY, "Tindices": INDEX, "bad_indices_policy": ""},
    shape_fn=_scatter_nd_shape,
)


def _scatter_into(xp, target, indices, updates, mode: str, ignore: bool = False):
    """Scatter `updates` into `target` (written in place) at host `indices`, by `mode`;
    with `ignore`, updates at out-of-range indices are dropped."""
    k = indices.shape[-1]
    _updates_shape_check(indices.shape, updates.shape, target.shape, _invalid)
    rows = _flat_rows(indices, target.shape, "shape", ignore)
    flat = _as_rows(target, k)
    upd = updates.reshape(rows.size, flat.shape[1])
    if ignore and (rows < 0).any():
        keep = np.nonzero(rows >= 0)[0]
        rows, upd = rows[keep], upd[_device_rows(xp, keep)]
    rows = _device_rows(xp, rows)
    if mode == "update":
        flat[rows] = upd
    else:
        op = {"add": "add", "sub": "subtract", "max": "maximum"}.get(mode, "minimum")
        scatter_at(xp, op, flat, rows, upd)
    return target


@ScatterNd.kernel(host_memory=("indices", "shape"))
async def _scatter_nd(ctx, indices, updates, shape):
    xp = ctx.xp
    indices, updates = np.asarray(indices), xp.asarray(updates)
    shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if indices.ndim < 1:
        raise _invalid(f"Indices shape must have rank at least one. Found:{indices.shape}")
    if any(d < 0 for d in shape):
        raise _invalid(f"Shape must be non-negative, got {_shape_str(shape)}")
    if indices.shape[-1] > len(shape):
        raise _invalid(
            f"Output must have rank at least indices.shape[-1] = {indices.shape[-1]}, got "
            f"shape {_shape_str(shape)}"
        )
    if 0 in shape and (indices.size or updates.size):
        raise _invalid(
            f"Indices and updates specified for empty output shape. indices shape: "
            f"{_shape_str(indices.shape)}, updates shape: {_shape_str(updates.shape)}"
        )
    if updates.dtype == object:  # strings: duplicates concatenate onto b""
        out = np.full(shape, b"", dtype=object)
    else:
        out = xp.zeros(shape, updates.dtype)
    ignore = _ignoring(ctx)
    return await ctx.device.compute(_scatter_into, xp, out, indices, updates, "add", ignore)


@ScatterNd.gradient
def _scatter_nd_grad(op, grad):
    indices = op.inputs[0]
    return [None, _g.apply("GatherNd", ops.convert_to_tensor(grad), indices), None]


@_dispatch.add_dispatch_support
def scatter_nd(indices, updates, shape, bad_indices_policy="", name=None):
    """`tf.scatter_nd`: a zero tensor of `shape` with `updates` added at `indices`
    (duplicates accumulate).

    Raises:
      ValueError: at build time, updates' shape is not indices.shape[:-1] + shape[K:].
      InvalidArgumentError: at run time, "indices[0] = [5] does not index into shape [5]".
    """
    attrs = {"bad_indices_policy": bad_indices_policy}
    return ops.apply_op("ScatterNd", [indices, updates, shape], attrs, name=name).outputs[0]


# -- TensorScatter{Update,Add,Sub,Max,Min} --------------------------------------------------


def _tensor_scatter_op(op_type: str, mode: str, allowed):
    op_def = register_op(
        op_type,
        inputs=["tensor: T", "indices: Tindices", "updates: T"],
        outputs=["output: T"],
        attrs={"T": allowed, "Tindices": INDEX, "bad_indices_policy": ""},
        shape_fn=_tensor_scatter_shape,
    )

    @op_def.kernel(host_memory=("indices",))
    async def _kernel(ctx, tensor, indices, updates):
        xp = ctx.xp
        indices, updates = np.asarray(indices), xp.asarray(updates)
        if indices.ndim < 1:
            raise _invalid(f"Indices shape must have rank at least one. Found:{indices.shape}")
        tensor = xp.asarray(tensor)
        if tensor.size == 0 and (indices.size or updates.size):
            raise _invalid(
                f"Indices and updates specified for empty input. indices shape: "
                f"{_shape_str(indices.shape)}, updates shape: {_shape_str(updates.shape)}"
            )
        if indices.shape[-1] > tensor.ndim:
            raise _invalid(
                f"Output must have rank at least indices.shape[-1] = {indices.shape[-1]}, "
                f"got shape {_shape_str(tensor.shape)}"
            )
        out = xp.array(tensor)  # a copy: never write into an input
        ignore = _ignoring(ctx)
        return await ctx.device.compute(_scatter_into, xp, out, indices, updates, mode, ignore)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


TensorScatterUpdate = _tensor_scatter_op("TensorScatterUpdate", "update", ANY)
TensorScatterAdd = _tensor_scatter_op("TensorScatterAdd", "add", NUMERIC)
TensorScatterSub = _tensor_scatter_op("TensorScatterSub", "sub", NUMERIC)
TensorScatterMax = _tensor_scatter_op("TensorScatterMax", "max", REAL)
TensorScatterMin = _tensor_scatter_op("TensorScatterMin", "min", REAL)


@TensorScatterUpdate.gradient
def _tensor_scatter_update_grad(op, grad):
    _, indices, updates = op.inputs
    grad = ops.convert_to_tensor(grad)
    dtensor = _g.apply("TensorScatterUpdate", grad, indices, _g.zeros_like(updates))
    return [dtensor, None, _g.apply("GatherNd", grad, indices)]


@TensorScatterAdd.gradient
def _tensor_scatter_add_grad(op, grad):
    grad = ops.convert_to_tensor(grad)
    return [grad, None, _g.apply("GatherNd", grad, op.inputs[1])]


@TensorScatterSub.gradient
def _tensor_scatter_sub_grad(op, grad):
    grad = ops.convert_to_tensor(grad)
    return [grad, None, _g.neg(_g.apply("GatherNd", grad, op.inputs[1]))]


def _tensor_scatter_extremum_grad(op, grad):
    """The gradient flows to whichever of tensor/updates the output took, shared equally
    among all that took it (ties), as TF's."""
    tensor, indices, updates = op.inputs
    out = op.outputs[0]
    grad = ops.convert_to_tensor(grad)
    took_x = _g.cast(_g.apply("Equal", tensor, out), grad.dtype)
    took_u = _g.cast(_g.apply("Equal", updates, _g.apply("GatherNd", out, indices)), grad.dtype)
    # Each output element's number of contributors: the tensor's and the updates'.
    count = _g.apply(
        "AddV2", took_x, _g.apply("TensorScatterAdd", _g.zeros_like(took_x), indices, took_u)
    )
    share = _g.apply("RealDiv", grad, count)
    return [_g.mul(share, took_x), None, _g.mul(_g.apply("GatherNd", share, indices), took_u)]


TensorScatterMax.gradient(_tensor_scatter_extremum_grad)
TensorScatterMin.gradient(_tensor_scatter_extremum_grad)


def _tensor_scatter_builder(op_type: str, verb: str):
    if op_type == "TensorScatterUpdate":  # (TF gives only the others a policy argument)

        def builder(tensor, indices, updates, name=None):
            return ops.apply_op(op_type, [tensor, indices, updates], name=name).outputs[0]

    else:

        def builder(tensor, indices, updates, bad_indices_policy="", name=None):
            attrs = {"bad_indices_policy": bad_indices_policy}
            return ops.apply_op(op_type, [tensor, indices, updates], attrs, name=name).outputs[0]

    builder.__doc__ = f"""A copy of `tensor` with `updates` {verb} at `indices` (op {op_type}).

    Raises:
      ValueError: at build time, updates' shape is not indices.shape[:-1] + shape[K:].
      InvalidArgumentError: at run time, "indices[0] = [0, 7] does not index into shape
        [3,4]".
    """
    return builder


tensor_scatter_nd_update = _tensor_scatter_builder("TensorScatterUpdate", "written")
tensor_scatter_nd_add = _tensor_scatter_builder("TensorScatterAdd", "added")
tensor_scatter_nd_sub = _tensor_scatter_builder("TensorScatterSub", "subtracted")
tensor_scatter_nd_max = _tensor_scatter_builder("TensorScatterMax", "max-combined")
tensor_scatter_nd_min = _tensor_scatter_builder("TensorScatterMin", "min-combined")
tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


# -- ScatterNdNonAliasingAdd ------------------------------------------------------------------

ScatterNdNonAliasingAdd = register_op(
    "ScatterNdNonAliasingAdd",
    inputs=["input: T", "indices: Tindices", "updates: T"],
    outputs=["output: T"],
    attrs={
        "T": TypeConstraint([*NUMERIC.allowed, dtypes.bool]),
        "Tindices": INDEX,
        "bad_indices_policy": "",
    },
    shape_fn=_tensor_scatter_shape,
)


@ScatterNdNonAliasingAdd.kernel(host_memory=("indices",))
async def _scatter_nd_non_aliasing_add(ctx, tensor, indices, updates):
    xp = ctx.xp
    indices, updates = np.asarray(indices), xp.asarray(updates)
    tensor = xp.asarray(tensor)
    if indices.ndim < 1 or indices.shape[-1] > tensor.ndim:
        raise _invalid(
            f"Output must have rank at least indices.shape[-1] = {indices.shape[-1]}, got "
            f"shape {_shape_str(tensor.shape)}"
        )
    if tensor.size == 0 and (indices.size or updates.size):
        raise _invalid(
            f"Indices and updates specified for empty input. indices shape: "
            f"{_shape_str(indices.shape)}, updates shape: {_shape_str(updates.shape)}"
        )
    out = xp.array(tensor)  # a copy: the input is never written (non-aliasing)
    ignore = _ignoring(ctx)
    return await ctx.device.compute(_scatter_into, xp, out, indices, updates, "add", ignore)


@ScatterNdNonAliasingAdd.gradient
def _scatter_nd_non_aliasing_add_grad(op, grad):
    grad = ops.convert_to_tensor(grad)
    return [grad, None, _g.apply("GatherNd", grad, op.inputs[1])]


def scatter_nd_non_aliasing_add(input, indices, updates, name=None):  # noqa: A002 - TF's name
    """`array_ops.scatter_nd_non_aliasing_add`: a copy of `input` with `updates` added at
    `indices` (duplicates accumulate; bools combine by OR); `input` itself is not written.

    Raises:
      ValueError: at build time, updates' shape is not indices.shape[:-1] + shape[K:].
      InvalidArgumentError: at run time, an index out of range.
    """
    return ops.apply_op("ScatterNdNonAliasingAdd", [input, indices, updates], name=name).outputs[0]


# -- ScatterNd{Update,Add,Sub}: in-place updates of a ref variable -----------------------------


def _ref_scatter_nd_shape(op):
    ref, indices, updates = (t.shape for t in op.inputs)
    indices.with_rank_at_least(1)
    if ref.ndims != 0:  # a scalar ref fails when run, as TF's ("Output must be at least 1-D")
        _static_updates_check(indices, updates, ref)
    return [ref]


def _ref_scatter_nd_op(op_type: str, mode: str, allowed):
    op_def = register_op(
        op_type,
        inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
        outputs=["output_ref: T"],
        attrs={"T": allowed, "Tindices": INDEX, "use_locking": True, "bad_indices_policy": ""},
        shape_fn=_ref_scatter_nd_shape,
        stateful=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, ref, indices, updates):
        indices, updates = np.asarray(indices), np.asarray(updates)
        _ref_scatter_nd_check(ref, indices, updates)
        target = ref.writable_target()
        _scatter_into(np, target, indices, updates, mode)
        ref.commit(target)
        return ref.value

    # As the ref Scatter* GPU kernels: the indices stay on the host, where they are checked
    # before anything is written; the scatter runs on the device's array module.
    @op_def.kernel("GPU", host_memory=("indices",))
    async def _device_kernel(ctx, ref, indices, updates):
        xp = ctx.xp
        indices, updates = np.asarray(indices), xp.asarray(updates)
        _ref_scatter_nd_check(ref, indices, updates)
        target = ref.writable_target()
        try:
            _scatter_into(xp, target, indices, updates, mode)
        except BaseException:
            ref.abandon(target)
            raise
        ref.commit(target)
        return ref.value

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    _device_kernel.__name__ = _device_kernel.__qualname__ = f"_{op_type.lower()}_device_kernel"
    return op_def


def _ref_scatter_nd_check(ref, indices, updates) -> None:
    """Validate before writing: a bad index must leave the variable unchanged."""
    params = ref._current()  # checked within this loop step, not handed out
    if params.ndim == 0:
        raise _invalid(f"Output must be at least 1-D, got shape: {_shape_str(params.shape)}")
    if indices.ndim < 1 or indices.shape[-1] > params.ndim:
        raise _invalid(
            f"Output must have rank at least indices.shape[-1] = {indices.shape[-1]}, "
            f"got shape {_shape_str(params.shape)}"
        )
    _updates_shape_check(indices.shape, updates.shape, params.shape, _invalid)
    _flat_rows(indices, params.shape, "shape")


ScatterNdUpdate = _ref_scatter_nd_op("ScatterNdUpdate", "update", ANY)
ScatterNdAdd = _ref_scatter_nd_op("ScatterNdAdd", "add", NUMERIC)
ScatterNdSub = _ref_scatter_nd_op("ScatterNdSub", "sub", NUMERIC)


def _ref_scatter_nd_builder(op_type: str, verb: str):
    # TF1's defaults: only the Update builders lock unless asked not to.
    locking = op_type.endswith("Update")

    def builder(ref, indices, updates, use_locking=locking, name=None):
        require_ref(ref, "_lazy_read")
        if _is_resource(ref):
            return ref._resource_scatter(op_type, indices, updates, name)
        attrs = {"use_locking": use_locking}
        return ops.apply_op(op_type, [ref, indices, updates], attrs, name=name).outputs[0]

    builder.op_type = op_type  # (a resource variable's methods build its Resource twin)
    builder.__doc__ = f"""{verb} `updates` into `ref` at the N-d `indices`; the new value.

    Raises (when run):
      FailedPreconditionError: `ref` is uninitialised.
      InvalidArgumentError: an index out of range or shapes mismatch (`ref` unchanged).
    """
    return builder


scatter_nd_update = _ref_scatter_nd_builder("ScatterNdUpdate", "Write")
scatter_nd_add = _ref_scatter_nd_builder("ScatterNdAdd", "Add (duplicates accumulate)")
scatter_nd_sub = _ref_scatter_nd_builder("ScatterNdSub", "Subtract (duplicates accumulate)")


def batch_scatter_update(ref, indices, updates, use_locking=True, name=None):
    """`tf.batch_scatter_update`: ref[i..., indices[i..., j]] = updates[i..., j] for
    the leading (batch) dimensions of `indices`; one ScatterNdUpdate, as TF.

    Raises:
      ValueError: indices of unknown rank.
    """
    with ops.name_scope(name):
        indices = ops.convert_to_tensor(indices, name="indices")
        indices_shape = array_ops.shape(indices)
        rank = indices.shape.ndims
        if rank is None:
            raise ValueError("batch_gather does not allow indices with unknown shape.")
        nd_indices = array_ops.expand_dims(indices, axis=-1)
        parts = []
        # each leading dimension's coordinate: a range broadcast over the others
        for dim in range(rank - 1):
            size = indices_shape[dim]
            shape = [1] * (rank + 1)
            shape[dim] = size
            coords = array_ops.reshape(reduction_ops.range(0, size, 1), manip_ops.stack(shape))
            if coords.dtype.base_dtype != nd_indices.dtype:
                coords = math_ops.cast(coords, nd_indices.dtype)
            parts.append(coords * array_ops.ones_like(nd_indices))
        parts.append(nd_indices)
        final = manip_ops.concat(parts, axis=-1)
        return scatter_nd_update(ref, final, updates, use_locking=use_locking)
