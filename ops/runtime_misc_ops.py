"""Small runtime ops TF 2.21 graphs may hold: Abort, DeviceIndex, SyncDevice, FakeParam.

- Abort ends the process, as TF's kernel does: with `error_msg` it writes TF's line
  ("Abort_op intentional failure; <msg>") to stderr and aborts (SIGABRT); with
  `exit_without_error` it flushes the standard streams and exits with status 0.
- DeviceIndex: the position of the running device's type in `device_names`, or their
  count when absent (TF's: the If/Case of tf.experimental.device-dispatched functions).
- SyncDevice waits for the device's queued work; the host's kernels have none.
- FakeParam stands in for a value an If branch never uses; TF's is unwritten memory,
  here zeros of the attr's shape (its unknown dims as 0).

TF registers no gradient for any of them.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from asyncflow import tensor_shape
from asyncflow.registry import ANY, REQUIRED, register_op

__all__: list[str] = []


Abort = register_op(
    "Abort",
    inputs=[],
    outputs=[],
    attrs={"error_msg": "", "exit_without_error": False},
    shape_fn=lambda op: [],
)


@Abort.kernel("CPU")
async def _abort(ctx):
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if ctx.attrs["exit_without_error"]:
        os._exit(0)  # (TF's exit(0): no Python cleanup runs past this op either)
    message = ctx.attrs["error_msg"]
    if isinstance(message, bytes):
        message = message.decode(errors="replace")
    os.write(2, f"Abort_op intentional failure; {message}\n".encode())
    os.abort()


DeviceIndex = register_op(
    "DeviceIndex",
    inputs=[],
    outputs=["index: int32"],
    attrs={"device_names": REQUIRED},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


@DeviceIndex.kernel()
async def _device_index(ctx):
    names = [n.decode() if isinstance(n, bytes) else n for n in ctx.attrs["device_names"]]
    kind = ctx.device.device_type
    return np.array(names.index(kind) if kind in names else len(names), np.int32)


SyncDevice = register_op(
    "SyncDevice", inputs=[], outputs=[], shape_fn=lambda op: [], stateful=True
)


@SyncDevice.kernel("CPU")
async def _sync_device(ctx):
    return None


FakeParam = register_op(
    "FakeParam",
    inputs=[],
    outputs=["output: dtype"],
    attrs={"dtype": ANY, "shape": REQUIRED},
    shape_fn=lambda op: [tensor_shape.as_shape(op._attr("shape"))],
)


@FakeParam.kernel("CPU")
async def _fake_param(ctx):
    shape = tensor_shape.as_shape(ctx.attrs["shape"])
    dims = [] if shape.ndims is None else [d or 0 for d in shape.as_list()]
    dtype = ctx.attrs["dtype"]
    np_dtype = object if dtype.name == "string" else dtype.as_numpy_dtype
    return np.zeros(dims, np_dtype) if np_dtype is not object else np.full(dims, b"", object)
