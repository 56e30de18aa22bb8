"""_Send and _Recv: the ops the partitioner puts on every cut edge (whitepaper §3.2.2).

They are never built by users; `asyncflow.partition` creates them.  Both reach the
step's rendezvous through `kernel_api.current_step()`.  With the `lossy` attr, float32
values travel as 16-bit truncated-mantissa floats (bfloat16 bits; whitepaper §5.5) and
are widened again on the receiving side.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.kernel_api import DEAD, current_step, step_rendezvous
from asyncflow.registry import ANY, REQUIRED, NotDifferentiable, register_op

__all__: list[str] = []

_SEND_ATTRS = {
    "T": ANY,
    "tensor_name": REQUIRED,
    "send_device": REQUIRED,
    "send_device_incarnation": 0,
    "recv_device": REQUIRED,
    "client_terminated": False,
    "lossy": False,
    "key": REQUIRED,
}

Send = register_op(
    "_Send", inputs=["tensor: T"], attrs=_SEND_ATTRS, shape_fn=lambda op: [], stateful=True
)
Recv = register_op(
    "_Recv",
    outputs=["tensor: tensor_type"],
    attrs={
        **{k: v for k, v in _SEND_ATTRS.items() if k != "T"},
        "tensor_type": ANY,
        "shape": tensor_shape.unknown_shape(),
    },
    shape_fn=lambda op: [op._attr("shape")],
    stateful=True,
    is_async=True,
)
NotDifferentiable("_Send")
NotDifferentiable("_Recv")


def to_lossy(x: np.ndarray) -> np.ndarray:
    """float32 → the upper 16 bits of each value (mantissa truncated to 7 bits)."""
    # asarray(order="C"), not ascontiguousarray: that one makes a scalar shape (1,).
    x = np.asarray(x, dtype=np.float32, order="C")
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def from_lossy(bits: np.ndarray) -> np.ndarray:
    wide = np.asarray(bits, dtype=np.uint32) << np.uint32(16)
    return np.asarray(wide, dtype=np.uint32).view(np.float32).reshape(np.shape(bits))


def _rendezvous():
    step = current_step()
    if step is None:
        raise errors.InternalError(None, None, "_Send/_Recv outside a step")
    return step_rendezvous(step)  # (a step of one partition: tf.raw_ops.Send / Recv)


@Send.kernel()
async def _send(ctx, x, frame_tag: str = ""):
    """Deposit x, where it lives, under the pair's key (plus the frame and iteration
    tag inside a loop); a dead value crosses too, so that its _Recv learns it is dead.
    The receiving side's rendezvous makes the device copy."""
    device = ctx.device
    if ctx.attrs["T"] == dtypes.resource:
        device = None  # a resource handle is a host object on every device: no copy
    elif ctx.attrs["lossy"] and x is not DEAD and getattr(x, "dtype", None) == np.float32:
        x = _Lossy(to_lossy(await device.copy_to_host(x)))
        device = None  # host memory
    _rendezvous().send_nowait(ctx.attrs["key"] + frame_tag, x, device)


@Recv.kernel()
async def _recv(ctx, frame_tag: str = ""):
    value = await _rendezvous().recv(ctx.attrs["key"] + frame_tag, ctx.device)
    if isinstance(value, _Lossy):
        value = await ctx.device.copy_from_host(from_lossy(value.bits))
    return value  # (DEAD stays dead)


# TF's public Send and Recv (tf.raw_ops.Send / Recv): the pair's key is made from the
# attrs when the step runs, so a Send and a Recv of one step with the same tensor_name,
# devices and incarnation meet, as in TF.  Both run on the device they are placed on.
_PUBLIC_ATTRS = {k: v for k, v in _SEND_ATTRS.items() if k not in ("lossy", "key")}
PublicSend = register_op(
    "Send", inputs=["tensor: T"], attrs=_PUBLIC_ATTRS, shape_fn=lambda op: [], stateful=True
)
PublicRecv = register_op(
    "Recv",
    outputs=["tensor: tensor_type"],
    attrs={**{k: v for k, v in _PUBLIC_ATTRS.items() if k != "T"}, "tensor_type": ANY},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
    stateful=True,
    is_async=True,
)
NotDifferentiable("Send")
NotDifferentiable("Recv")


def _public_key(attrs) -> str:
    """The rendezvous key of a pair (asyncflow.rendezvous.create_key's form)."""
    return (
        f"{attrs['send_device']};{attrs['send_device_incarnation']:016x};"
        f"{attrs['recv_device']};{attrs['tensor_name']};0:0"
    )


@PublicSend.kernel()
async def _public_send(ctx, x, frame_tag: str = ""):
    device = None if ctx.attrs["T"] == dtypes.resource else ctx.device
    _rendezvous().send_nowait(_public_key(ctx.attrs) + frame_tag, x, device)


@PublicRecv.kernel()
async def _public_recv(ctx, frame_tag: str = ""):
    return await _rendezvous().recv(_public_key(ctx.attrs) + frame_tag, ctx.device)


# A copy between host memory and a device's own memory, on one device: the partitioner
# puts one on every edge whose two ends want different memory (a feed or a host-memory
# output into a kernel on the device, a device value into a host-memory input, a fetch).
DeviceCopy = register_op(
    "_DeviceCopy",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": ANY, "to_host": False, "constant": False},
    shape_fn=lambda op: [op.inputs[0].shape] if op.inputs else [tensor_shape.unknown_shape()],
    is_async=True,  # a GPU copy suspends until its stream event
)
NotDifferentiable("_DeviceCopy")


@DeviceCopy.kernel()
async def _device_copy(ctx, x):
    if x is DEAD:
        return x
    if ctx.attrs["to_host"]:
        return await ctx.device.copy_to_host(x)
    if not ctx.attrs.get("constant"):
        return await ctx.device.copy_from_host(x)
    # A Const's value: copied once, then the device copy serves every step (as TF's
    # constants live on their device).  Device arrays are never forwarded or written
    # by the kernels that take them, so the copy stays as it was made.
    cached = ctx.kernel_state.get("copy")
    if cached is not None and cached[0] is x:
        return cached[1]
    value = await ctx.device.copy_from_host(x)
    ctx.kernel_state["copy"] = (x, value)
    return value


class _Lossy:
    __slots__ = ("bits",)

    def __init__(self, bits):
        self.bits = bits
