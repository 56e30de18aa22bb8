"""Resource variables' ops (TF's `gen_resource_variable_ops`): VarHandleOp,
ReadVariableOp, AssignVariableOp, AssignAdd/SubVariableOp, VarIsInitializedOp,
VariableShape, ResourceGather, DestroyResourceOp, and `_ResourceAsRef`.

A resource handle is a 0-d tensor of dtype `resource` holding the variable's `VarRef`
(the state object ref variables use: same copy-on-write buffer, same device rules),
looked up by (container, shared_name) in the resource manager, so every VarHandleOp of
one name in a session reaches the same variable.  ReadVariableOp returns the buffer as
it is when the read runs -- a value later updates never change -- and the read is an
op of its own, ordered by control dependencies like any op (TF's resource semantics:
a read inside `control_dependencies([assign])` sees the assign).

`_ResourceAsRef` views a handle as a TF1 ref (`Ref(dtype)`, the VarRef itself): every
op that updates a ref variable (Assign, the optimizers' Apply*/SparseApply*, Scatter*,
CountUpTo) then updates a resource variable as it would a ref one, with the same
kernels.  TF has a Resource* twin of each of those ops; this runtime needs one kernel.

Gradients: ReadVariableOp passes its gradient to the handle (d read / d variable is
the identity), ResourceGather gives IndexedSlices of the rows it read, as TF's.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.ops.scatter_nd_ops import _gather_nd
from asyncflow.ops.slicing_ops import _gather_v2
from asyncflow.ops.state_ops import VarRef, slice_assign
from asyncflow.ops.strided_slice_spec import MASK_DEFAULTS, slice_masks
from asyncflow.registry import ANY, INDEX, REQUIRED, NotDifferentiable, register_op

__all__ = [
    "var_handle_op",
    "read_variable_op",
    "assign_variable_op",
    "assign_add_variable_op",
    "assign_sub_variable_op",
    "var_is_initialized_op",
    "variable_shape",
    "resource_gather",
    "resource_gather_nd",
    "destroy_resource_op",
]


def _scalar(op):
    return [tensor_shape.TensorShape([])]


class ResourceVarRef(VarRef):
    """A resource variable's state.  The ref kernels it reaches through _ResourceAsRef
    (Scatter*, CountUpTo, the optimizers' Apply*) fail on it uninitialised as TF's
    Resource* twins do: their resource lookup finds nothing (NotFoundError)."""

    __slots__ = ()

    def _uninitialized_error(self) -> errors.OpError:
        return _not_found(self)


def _not_found(var: VarRef) -> errors.NotFoundError:
    # TF1's LookupResource message (TF 2.21 says "Container localhost does not exist.").
    return errors.NotFoundError(
        None, None, f"Resource localhost/{var.name}/N10tensorflow3VarE does not exist."
    )


def _var(ctx, handle) -> VarRef:
    return handle_object(handle, VarRef, "resource variable")


def _lookup(ctx, handle) -> VarRef:
    """The handle's variable, initialised (the kernels TF writes with LookupResource)."""
    var = _var(ctx, handle)
    if var.value is None:
        raise _not_found(var)
    return var


def _read(ctx, handle):
    var = _var(ctx, handle)
    if var.value is None:
        raise errors.FailedPreconditionError(
            None,
            None,
            f"Error while reading resource variable {var.name} from Container: localhost. "
            "This could mean that the variable was uninitialized. Not found: Resource "
            f"localhost/{var.name}/N10tensorflow3VarE does not exist.",
        )
    return var


def _check_dtype(var: VarRef, dtype) -> None:
    if var.dtype != dtypes.as_dtype(dtype):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Trying to read variable with wrong dtype. Expected {var.dtype.name} got "
            f"{dtypes.as_dtype(dtype).name}",
        )


VarHandleOp = register_op(
    "VarHandleOp",
    outputs=["resource: resource"],
    attrs={
        "container": "",
        "shared_name": "",
        "dtype": ANY,
        "shape": REQUIRED,
        "allowed_devices": [],
        "debug_name": "",  # (TF 2.21's: the variable's name scope, "w/")
    },
    shape_fn=_scalar,
    stateful=True,
)
NotDifferentiable("VarHandleOp")


@VarHandleOp.kernel(host_memory=("resource",))
async def _var_handle_op(ctx):
    attrs = ctx.attrs
    container = attrs["container"]
    name = attrs["shared_name"] or ctx.op.name
    var = ctx.resource_mgr(container).lookup_or_create(
        container, name, lambda: ResourceVarRef(attrs["dtype"], attrs["shape"], name)
    )
    if var.dtype != attrs["dtype"]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Trying to share variable with wrong dtype. Existing variable {name} has "
            f"dtype {var.dtype.name}, new dtype {attrs['dtype'].name}",
        )
    return handle_value(var)


def _handle_source(handle):
    """The VarHandleOp behind a handle, through the control-flow primitives and
    identities that pass it on (TF's handle data follows the handle there), or None."""
    src = handle.op
    while True:
        while src.type in _HANDLE_FORWARDING and src.inputs:
            src = src.inputs[0].op
        outer = _captured_outer(src) if src.type == "Placeholder" else None
        if outer is None:
            return src if src.type == "VarHandleOp" else None
        src = outer.op


def _captured_outer(placeholder):
    """The outer tensor a function graph's capture Placeholder stands for, or None
    (TF's handle data follows a captured handle into the function)."""
    captured = getattr(placeholder.graph, "_captured", None) or {}
    return next((outer for outer, ph in captured.values() if ph.op is placeholder), None)


_HANDLE_FORWARDING = frozenset(["Switch", "Identity", "Enter", "Exit", "RefIdentity"])


def _handle_shape(op):
    """The variable's shape, from the VarHandleOp behind a handle (unknown otherwise)."""
    src = _handle_source(op.inputs[0])
    return src._attr("shape") if src is not None else tensor_shape.unknown_shape()


ReadVariableOp = register_op(
    "ReadVariableOp",
    inputs=["resource: resource"],
    outputs=["value: dtype"],
    attrs={"dtype": ANY},
    shape_fn=lambda op: [_handle_shape(op)],
    stateful=True,
)


@ReadVariableOp.kernel(host_memory=("resource",))
async def _read_variable_op(ctx, handle):
    var = _read(ctx, handle)
    _check_dtype(var, ctx.attrs["dtype"])
    return var.read()


@ReadVariableOp.gradient
def _read_grad(op, grad):
    return grad


AssignVariableOp = register_op(
    "AssignVariableOp",
    inputs=["resource: resource", "value: dtype"],
    attrs={"dtype": ANY, "validate_shape": False},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("AssignVariableOp")


@AssignVariableOp.kernel(host_memory=("resource",))
async def _assign_variable_op(ctx, handle, value):
    var = _var(ctx, handle)
    _check_dtype(var, ctx.attrs["dtype"])
    if ctx.attrs["validate_shape"]:
        have = var.value.shape if var.value is not None else None  # (initialized only)
        # (`value` may be a device array: its own shape, never NumPy's np.shape)
        if have is not None and tuple(have) != tuple(value.shape):
            raise errors.InvalidArgumentError(
                None,
                None,
                "Trying to assign to variable with tensor with wrong shape. Expected "
                f"{_shape_text(have)} got {_shape_text(value.shape)}",
            )
    var.assign(value, False, ctx.xp)


def _shape_text(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _register_update(op_type: str, ufunc: str):
    op_def = register_op(
        op_type,
        inputs=["resource: resource", "value: dtype"],
        attrs={"dtype": ANY},
        shape_fn=lambda op: [],
        stateful=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel(host_memory=("resource",))
    async def _kernel(ctx, handle, value):
        var = _lookup(ctx, handle)  # TF: the variable's resource does not exist yet
        await ctx.compute(var.apply_ufunc, ufunc, value, ctx.xp)

    return op_def


AssignAddVariableOp = _register_update("AssignAddVariableOp", "add")
AssignSubVariableOp = _register_update("AssignSubVariableOp", "subtract")

ResourceStridedSliceAssign = register_op(
    "ResourceStridedSliceAssign",
    inputs=["ref: resource", "begin: Index", "end: Index", "strides: Index", "value: T"],
    attrs={"T": ANY, "Index": INDEX, **MASK_DEFAULTS},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("ResourceStridedSliceAssign")


@ResourceStridedSliceAssign.kernel(host_memory=("ref", "begin", "end", "strides"))
async def _resource_strided_slice_assign(ctx, handle, begin, end, strides, value):
    var = _lookup(ctx, handle)
    _check_dtype(var, ctx.attrs["T"])
    slice_assign(var, begin, end, strides, value, slice_masks(ctx.attrs), ctx.xp)


# TF 2.x's SavedModels call it before reading a variable in their save functions: it
# turns off TF's copy-on-read mode, which asyncflow's variables do not have (their reads
# are snapshots already), so it only checks that the handle names a variable.
DisableCopyOnRead = register_op(
    "DisableCopyOnRead",
    inputs=["resource: resource"],
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("DisableCopyOnRead")


@DisableCopyOnRead.kernel(host_memory=("resource",))
async def _disable_copy_on_read(ctx, handle):
    _var(ctx, handle)


VarIsInitializedOp = register_op(
    "VarIsInitializedOp",
    inputs=["resource: resource"],
    outputs=["is_initialized: bool"],
    shape_fn=_scalar,
    stateful=True,
)
NotDifferentiable("VarIsInitializedOp")


@VarIsInitializedOp.kernel(host_memory=("resource", "is_initialized"))
async def _var_is_initialized(ctx, handle):
    return np.array(_var(ctx, handle).is_initialized())


VariableShape = register_op(
    "VariableShape",
    inputs=["input: resource"],
    outputs=["output: out_type"],
    attrs={"out_type": INDEX},
    shape_fn=lambda op: [tensor_shape.TensorShape([_handle_shape(op).ndims])],
    stateful=True,
)
NotDifferentiable("VariableShape")


@VariableShape.kernel(host_memory=("input", "output"))
async def _variable_shape(ctx, handle):
    var = _lookup(ctx, handle)
    return np.array(var.value.shape, dtype=ctx.attrs["out_type"].as_numpy_dtype)


def _gather_shape(op):
    params = _handle_shape(op)
    indices = op.inputs[1].shape
    if params.ndims is None or indices.ndims is None:
        return [tensor_shape.unknown_shape()]
    b = op._attr("batch_dims")
    return [tensor_shape.TensorShape(indices.dims + params.dims[b + 1 :])]


ResourceGather = register_op(
    "ResourceGather",
    inputs=["resource: resource", "indices: Tindices"],
    outputs=["output: dtype"],
    attrs={"dtype": ANY, "Tindices": INDEX, "batch_dims": 0, "validate_indices": True},
    shape_fn=_gather_shape,
    stateful=True,
)


@ResourceGather.kernel(host_memory=("resource",))
async def _resource_gather(ctx, handle, indices):
    var = _lookup(ctx, handle)
    _check_dtype(var, ctx.attrs["dtype"])
    return await _gather_v2(ctx, var.read(), indices, np.int32(ctx.attrs["batch_dims"]))


@ResourceGather.gradient
def _resource_gather_grad(op, grad):
    # TF's _GatherGrad for ResourceGather: rows of the variable, as IndexedSlices.
    handle, indices = op.inputs
    params_shape = ops.apply_op("VariableShape", [handle], {"out_type": dtypes.int64}).outputs[0]
    size = ops.apply_op("Size", [indices], {"out_type": dtypes.int64}).outputs[0]
    rest = ops.apply_op("StridedSlice", [params_shape, [1], [0], [1]], {"end_mask": 1}).outputs[0]
    values = _g.reshape(grad, _g.concat([_g.reshape(size, [1]), rest], 0))
    flat = _g.reshape(indices, [-1])
    return [IndexedSlices(values, flat, params_shape), None]


ResourceGatherNd = register_op(
    "ResourceGatherNd",
    inputs=["resource: resource", "indices: Tindices"],
    outputs=["output: dtype"],
    attrs={"dtype": ANY, "Tindices": INDEX},
    shape_fn=lambda op: [_gather_nd_shape(op)],
    stateful=True,
)


def _gather_nd_shape(op):
    params, indices = _handle_shape(op), op.inputs[1].shape
    if params.ndims is None or indices.ndims is None or indices.dims[-1] is None:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape(indices.dims[:-1] + params.dims[indices.dims[-1] :])


@ResourceGatherNd.kernel(host_memory=("resource", "indices"))
async def _resource_gather_nd(ctx, handle, indices):
    var = _lookup(ctx, handle)
    _check_dtype(var, ctx.attrs["dtype"])
    return await _gather_nd(ctx, var.read(), indices)


@ResourceGatherNd.gradient
def _resource_gather_nd_grad(op, grad):
    # TF's gradient: the gathered slices scattered back into the variable's shape.
    handle, indices = op.inputs
    shape = ops.apply_op("VariableShape", [handle], {"out_type": indices.dtype}).outputs[0]
    return [_g.apply("ScatterNd", indices, ops.convert_to_tensor(grad), shape), None]


DestroyResourceOp = register_op(
    "DestroyResourceOp",
    inputs=["resource: resource"],
    attrs={"ignore_lookup_error": True},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("DestroyResourceOp")


@DestroyResourceOp.kernel(host_memory=("resource",))
async def _destroy_resource(ctx, handle):
    var = _var(ctx, handle)
    var.value = None  # the handle's variable is gone: reads fail as uninitialised


ResourceAsRef = register_op(
    "_ResourceAsRef",
    inputs=["resource: resource"],
    outputs=["ref: Ref(dtype)"],
    attrs={"dtype": ANY},
    shape_fn=lambda op: [_handle_shape(op)],
    stateful=True,
)
NotDifferentiable("_ResourceAsRef")


@ResourceAsRef.kernel(host_memory=("resource",))
async def _resource_as_ref(ctx, handle):
    return _var(ctx, handle)


# -- builders (TF's generated function names) ----------------------------------------------


def var_handle_op(dtype, shape, container="", shared_name="", name=None, allowed_devices=(),
                  debug_name=""):  # fmt: skip
    attrs = {
        "dtype": dtypes.as_dtype(dtype),
        "shape": tensor_shape.as_shape(shape),
        "container": container,
        "shared_name": shared_name,
        "allowed_devices": list(allowed_devices),
        "debug_name": debug_name,
    }
    return ops.apply_op("VarHandleOp", [], attrs, name=name).outputs[0]


def read_variable_op(resource, dtype, name=None):
    return ops.apply_op(
        "ReadVariableOp", [resource], {"dtype": dtypes.as_dtype(dtype)}, name=name
    ).outputs[0]


def _dtype_of_handle(resource, value):
    src = resource.op
    if src.type == "VarHandleOp":
        return src._attr("dtype")
    return ops.convert_to_tensor(value).dtype.base_dtype


def assign_variable_op(resource, value, validate_shape=False, name=None):
    dtype = _dtype_of_handle(resource, value)
    value = ops.convert_to_tensor(value, dtype=dtype, name="value")
    attrs = {"dtype": dtype, "validate_shape": validate_shape}
    return ops.apply_op("AssignVariableOp", [resource, value], attrs, name=name)


def assign_add_variable_op(resource, value, name=None):
    dtype = _dtype_of_handle(resource, value)
    value = ops.convert_to_tensor(value, dtype=dtype, name="value")
    return ops.apply_op("AssignAddVariableOp", [resource, value], {"dtype": dtype}, name=name)


def assign_sub_variable_op(resource, value, name=None):
    dtype = _dtype_of_handle(resource, value)
    value = ops.convert_to_tensor(value, dtype=dtype, name="value")
    return ops.apply_op("AssignSubVariableOp", [resource, value], {"dtype": dtype}, name=name)


def var_is_initialized_op(resource, name=None):
    return ops.apply_op("VarIsInitializedOp", [resource], name=name).outputs[0]


def variable_shape(input, out_type=dtypes.int32, name=None):  # noqa: A002 - TF's name
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    return ops.apply_op("VariableShape", [input], attrs, name=name).outputs[0]


def resource_gather(resource, indices, dtype, batch_dims=0, validate_indices=True, name=None):
    attrs = {"dtype": dtypes.as_dtype(dtype), "batch_dims": batch_dims}
    return ops.apply_op("ResourceGather", [resource, indices], attrs, name=name).outputs[0]


def resource_gather_nd(resource, indices, dtype, name=None):
    attrs = {"dtype": dtypes.as_dtype(dtype)}
    return ops.apply_op("ResourceGatherNd", [resource, indices], attrs, name=name).outputs[0]


def destroy_resource_op(resource, ignore_lookup_error=True, name=None):
    attrs = {"ignore_lookup_error": ignore_lookup_error}
    return ops.apply_op("DestroyResourceOp", [resource], attrs, name=name)


def resource_as_ref(resource, dtype, name=None):
    """The variable behind `resource` as a TF1 ref tensor (for the ref-updating ops)."""
    attrs = {"dtype": dtypes.as_dtype(dtype)}
    return ops.apply_op("_ResourceAsRef", [resource], attrs, name=name).outputs[0]
