"""NVIDIA NCCL's ops, NcclAllReduce, NcclReduce and NcclBroadcast, and TF's wrappers of
them (tensorflow.python.ops.nccl_ops: all_sum, all_prod, all_min, all_max, reduce_sum,
broadcast), which `tf.distribute.NcclAllReduce` uses on GPUs.

TF 2.21 registers GPU kernels only: on a CPU a session fails with InvalidArgumentError
("No OpKernel was registered to support Op 'NcclAllReduce' ..."), and so do the CPU
kernels here.  On GPUs:

- NcclAllReduce: one node per device, `num_devices` of them tied into one all-reduce by
  their `shared_name`.  They meet in the process's collective state (collective_ops)
  under a group named by the shared name and the step, so the nodes of one
  `Session.run` meet each other; every member gets the reduction.
- NcclReduce: one node whose `num_devices` inputs (on their own devices; the runtime
  brings them to the node's) are reduced on the node's device.
- NcclBroadcast: the value on the sender's device, which consumers on other devices
  read through the runtime's copies (TF rewrites it into a send and receives).

Only "sum" has a gradient, as in TF: the all-reduce's is the all-reduce of the
gradients (shared name + "_grad"), a reduce's is a broadcast, a broadcast's a reduce.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import current_step
from asyncflow.ops import collective_ops
from asyncflow.protos.types_pb2 import DataType
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = ["all_max", "all_min", "all_prod", "all_sum", "broadcast", "reduce_sum"]

_T = TypeConstraint(["float16", "float32", "float64", "int32", "int64"])
_REDUCTIONS = ("min", "max", "prod", "sum")


def _reduction_shape(op):
    value = op._attr("reduction")
    value = value.decode() if isinstance(value, bytes) else value
    if value not in _REDUCTIONS:
        choices = ", ".join(f'"{a}"' for a in _REDUCTIONS)
        raise ValueError(
            f"Attr 'reduction' of '{op.type}' Op passed string '{value}' not in: {choices}."
        )
    return [op.inputs[0].shape]


NcclAllReduce = register_op(
    "NcclAllReduce",
    inputs=["input: T"],
    outputs=["data: T"],
    attrs={"reduction": REQUIRED, "T": _T, "num_devices": REQUIRED, "shared_name": REQUIRED},
    shape_fn=_reduction_shape,
    stateful=True,
    is_async=True,
)
NcclReduce = register_op(
    "NcclReduce",
    inputs=["input: num_devices * T"],
    outputs=["data: T"],
    attrs={"reduction": REQUIRED, "T": _T, "num_devices": 1},
    shape_fn=_reduction_shape,
    stateful=True,
)
NcclBroadcast = register_op(
    "NcclBroadcast",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _T, "shape": REQUIRED},
    shape_fn=lambda op: [tensor_shape.as_shape(op._attr("shape"))],
    stateful=True,
)

# The attributes in the order TF 2.21's message lists them.
_ATTR_ORDER = {
    "NcclAllReduce": ("num_devices", "shared_name", "T", "reduction"),
    "NcclReduce": ("num_devices", "T", "reduction"),
    "NcclBroadcast": ("shape", "T"),
}


def _no_cpu_kernel(ctx) -> errors.InvalidArgumentError:
    shown = []
    for k in _ATTR_ORDER[ctx.op.type]:
        v = ctx.attrs[k]
        if k == "T":
            shown.append(f"T={DataType.Name(v.as_datatype_enum)}")
        elif k == "shape":
            dims = tensor_shape.as_shape(v)
            dims = "<unknown>" if dims.ndims is None else dims.as_list()
            shown.append("shape=[" + ",".join("?" if d is None else str(d) for d in dims) + "]")
        elif isinstance(v, bytes | str):
            shown.append(f'{k}="{v.decode() if isinstance(v, bytes) else v}"')
        else:
            shown.append(f"{k}={v}")
    return errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op '{ctx.op.type}' used by "
        f"{{{{node {ctx.op.name}}}}} with these attrs: [{', '.join(shown)}]\n"
        "Registered devices: [CPU]\nRegistered kernels:\n  <no registered kernels>\n",
    )


@NcclAllReduce.kernel("CPU")
@NcclReduce.kernel("CPU")
@NcclBroadcast.kernel("CPU")
async def _nccl_cpu(ctx, *inputs):
    raise _no_cpu_kernel(ctx)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


_MERGE = {"sum": "Add", "prod": "Mul", "min": "Min", "max": "Max"}


@NcclAllReduce.kernel("GPU")
async def _nccl_all_reduce(ctx, x):
    a = ctx.attrs
    size, shared_name = int(a["num_devices"]), _text(a["shared_name"])
    step = current_step()
    # The members of one all-reduce are the nodes of one step: a group per step (met
    # once), else (no step: a function run alone) the k-th executions per device.
    group = f"nccl:{shared_name}" + ("" if step is None else f":{step.serial}")
    value = np.asarray(await ctx.device.copy_to_host(x))
    result = await collective_ops.local_collectives().run(
        ctx, f"reduce:{_MERGE[_text(a['reduction'])]}:Id", size, group, 0, value,
        once=step is not None,
    )  # fmt: skip
    return await ctx.device.copy_from_host(np.asarray(result, value.dtype))


_UFUNCS = {"sum": "add", "prod": "multiply", "min": "minimum", "max": "maximum"}


@NcclReduce.kernel("GPU")
async def _nccl_reduce(ctx, *xs):
    xp = ctx.xp
    first = xs[0].shape
    for x in xs[1:]:
        if x.shape != first:
            raise errors.InvalidArgumentError(
                None, None, f"NcclReduce inputs differ in shape: {list(first)} vs {list(x.shape)}"
            )
    ufunc = getattr(xp, _UFUNCS[_text(ctx.attrs["reduction"])])
    return await ctx.device.compute(functools.reduce, ufunc, xs)


@NcclBroadcast.kernel("GPU")
async def _nccl_broadcast(ctx, x):
    return x


# -- gradients (sum only, as TF) ---------------------------------------------------------


def _check_device(tensor, expected=None) -> None:
    """Raises ValueError: `tensor` has no device, or not `expected`."""
    if not tensor.device:
        raise ValueError(f"Device assignment for tensor={tensor} required for nccl collective ops")
    if expected and expected != tensor.device:
        raise ValueError(f"Expected device {expected}, got {tensor.device} for tensor={tensor}.")


def _check_sum(op) -> None:
    if _text(op.get_attr("reduction")) != "sum":
        raise LookupError('No gradient defined for NcclAllReduce except for reduction="sum".')


@NcclAllReduce.gradient
def _nccl_all_reduce_grad(op, grad):
    _check_sum(op)
    _check_device(grad, expected=op.device)
    with ops.device(op.device):
        return _all_reduce_op(
            grad, "sum", op.get_attr("num_devices"), _text(op.get_attr("shared_name")) + "_grad"
        )


@NcclReduce.gradient
def _nccl_reduce_grad(op, grad):
    _check_sum(op)
    _check_device(grad, expected=op.device)
    with ops.device(op.device):
        result = _broadcast_op(grad)
    return [result] * len(op.inputs)


@NcclBroadcast.gradient
def _nccl_broadcast_grad(op, accumulated_grad):
    # TF's: the accumulated gradient's inputs (the consumers' gradients, each on its
    # device) reduced on the broadcast's device.
    grads = list(accumulated_grad.op.inputs)
    for t in grads:
        _check_device(t)
    with ops.device(op.device):
        return _reduce_op(grads, "sum")


# -- builders --------------------------------------------------------------------------


def _all_reduce_op(t, reduction, num_devices, shared_name):
    attrs = {"reduction": reduction, "num_devices": num_devices, "shared_name": shared_name}
    return ops.apply_op("NcclAllReduce", [t], attrs).outputs[0]


def _reduce_op(tensors, reduction):
    attrs = {"reduction": reduction, "num_devices": len(tensors)}
    return ops.apply_op("NcclReduce", [list(tensors)], attrs).outputs[0]


def _broadcast_op(t):
    return ops.apply_op("NcclBroadcast", [t], {"shape": t.shape}).outputs[0]


_lock = threading.Lock()
_shared_name_counter = 0


def _shared_name() -> str:
    global _shared_name_counter
    with _lock:
        value = _shared_name_counter
        _shared_name_counter += 1
    return f"c{value}"


def _apply_all_reduce(reduction, tensors) -> list:
    if not tensors:
        raise ValueError("Must pass >0 tensors to all reduce operations")
    shared_name = _shared_name()
    out = []
    for t in tensors:
        _check_device(t)
        with ops.device(t.device):
            out.append(_all_reduce_op(t, reduction, len(tensors), shared_name))
    return out


def all_sum(tensors) -> list:
    """The all-reduce sum of `tensors` (each on its GPU): one sum per input, on the
    input's device.  Evaluating only some of them hangs (the others never join)."""
    return _apply_all_reduce("sum", tensors)


def all_prod(tensors) -> list:
    """The all-reduce product of `tensors`, one per input's device."""
    return _apply_all_reduce("prod", tensors)


def all_min(tensors) -> list:
    """The all-reduce minimum of `tensors`, one per input's device."""
    return _apply_all_reduce("min", tensors)


def all_max(tensors) -> list:
    """The all-reduce maximum of `tensors`, one per input's device."""
    return _apply_all_reduce("max", tensors)


def reduce_sum(tensors):
    """The sum of `tensors` (each on its GPU) on the current device, which must be one
    of theirs.

    Raises:
      ValueError: no tensors, one without a device, or none on the current device.
    """
    if not tensors:
        raise ValueError("Must pass >0 tensors to reduce operations")
    for t in tensors:
        _check_device(t)
    result = _reduce_op(tensors, "sum")
    if not any(t.device == result.device for t in tensors):
        raise ValueError("One input tensor must be assigned to current device")
    return result


def broadcast(tensor):
    """`tensor` (on a GPU) as a value ops on other GPUs may read."""
    _check_device(tensor)
    with ops.device(tensor.device):
        return _broadcast_op(tensor)
