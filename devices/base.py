"""The Device protocol (DESIGN.md "Devices and names", "Kernel contract").

Everything the runtime knows of a device is here; the runtime never names a device
kind.  A device has:
- a TF name and type, and an incarnation (a random 64-bit number drawn when the device
  object is made, so a restarted process never matches an old rendezvous key);
- an array module `xp` (NumPy on CPU, CuPy on GPU) that its kernels compute with, and
  whether its arrays live in host memory (`host_memory`; False: the device has memory
  of its own, and the partitioner puts copies on every edge that crosses it);
- how work runs (`run_mode`: "inline", "threads" or "stream") and `compute`, which runs
  heavy work without blocking the loop; `event()` is an awaitable that completes when
  the work enqueued so far has finished (a stream event; at once on a host device);
- asynchronous copies host->device, device->host and device->device;
- memory accounting (bytes in use, peak) and its resource manager (TF's per-device
  containers: variables, queues, readers living on it);
- which ops it runs: `kernel_for(op_def)`, derived from the op registry (the device's
  own kernel, else the generic one), which a device with a narrower array module may
  narrow further.
A GPU device implements `compute` by enqueueing on a stream and awaiting an event; the
protocol is the same.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from asyncflow import errors, resources

__all__ = ["DRIVER", "Device", "NOT_INLINE", "available_host_memory"]

_MEMINFO_CACHE: list[float] = [0.0, 0.0]


class _NotInline:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<not inline>"


# What a kernel's inline form (asyncflow.kernel_api) or `CPUDevice.run_inline` returns
# for a call it leaves to the kernel's coroutine.
NOT_INLINE = _NotInline()


class _Driver(threading.local):
    """What the step interpreter driving on this thread tells devices: `ready`, the list
    of its other ready nodes while it runs a kernel (asyncflow.executor sets it when a
    driver starts or resumes; empty: nothing else to run), and `idle_at`, the
    perf_counter time its drivers last ran out of ready nodes.  A device may run a
    kernel's heavy work beside them (TF's inter-op parallelism, devices/cpu.py), and
    learn from `idle_at` how long the driver had work to run meanwhile."""

    ready: list | tuple = ()
    idle_at = 0.0


DRIVER = _Driver()


def available_host_memory() -> int:
    """Bytes the host can still give (MemAvailable), cached for a second."""
    now = time.monotonic()
    if now - _MEMINFO_CACHE[0] < 1.0:
        return int(_MEMINFO_CACHE[1])
    avail = None
    try:
        with open("/proc/meminfo", "rb") as f:  # noqa: ASYNC230 - tiny procfs read, no disk
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            avail = 1 << 62
    _MEMINFO_CACHE[:] = [now, float(avail)]
    return avail


def new_incarnation() -> int:
    """A random nonzero 63-bit incarnation number (TF draws one per device per process)."""
    return secrets.randbits(63) or 1  # (an int64 attr in partition graphs)


class Device:
    """Base class.  Subclasses set `device_type` (and `xp`, `host_memory`, `run_mode`
    where they differ from a host device's) and implement `compute`."""

    device_type = "CPU"
    xp: Any = np
    # True when the device's arrays are host (NumPy) arrays, so values cross to and
    # from it without copies.
    host_memory = True
    run_mode = "threads"  # "inline", "threads" (worker threads) or "stream"

    def __init__(self, name: str, index: int = 0):
        self.name = name  # full TF name, e.g. /job:localhost/replica:0/task:0/device:CPU:0
        self.index = index
        self.incarnation = new_incarnation()
        self.bytes_in_use = 0
        self.peak_bytes_in_use = 0
        self.resource_mgr = resources.ResourceMgr(name)

    # -- which ops run here
    def kernel_for(self, op_def):
        """The kernel registration (`registry.KernelDef`) this device runs for
        `op_def`, or None when it has none (placement then looks elsewhere)."""
        return op_def.kernel_for(self.device_type)

    def supports(self, op_def) -> bool:
        return self.kernel_for(op_def) is not None

    # -- memory
    def memory_stats(self) -> dict:
        """TF's allocator stats: bytes in use and the peak since the device was made."""
        return {"bytes_in_use": self.bytes_in_use, "peak_bytes_in_use": self.peak_bytes_in_use}

    @property
    def memory_limit(self) -> int:
        return available_host_memory()

    # -- completion of enqueued work
    def event(self) -> Awaitable[None]:
        """An awaitable that completes when all work enqueued on this device so far has
        finished.  Host devices finish work before `compute` returns: done at once."""
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def compute(self, fn: Callable, *args, cost: float | None = None):
        """Run `fn(*args)`; inline when cheap, elsewhere (threads, streams) when heavy."""
        raise NotImplementedError

    def check_alloc(self, num_elements, dtype) -> None:
        """Raise ResourceExhaustedError before an allocation the host cannot satisfy."""
        try:
            itemsize = np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).itemsize
        except TypeError:
            itemsize = 8
        n = int(num_elements)
        if n < 0:
            raise errors.InvalidArgumentError(None, None, f"negative allocation size {n}")
        nbytes = n * itemsize
        if nbytes > available_host_memory():
            raise errors.ResourceExhaustedError(
                None,
                None,
                f"OOM when allocating tensor with {n} elements of type "
                f"{getattr(dtype, 'name', dtype)} ({nbytes} bytes) on {self.name}: "
                f"only {available_host_memory()} bytes are available",
            )

    def record_alloc(self, nbytes: int) -> None:
        self.bytes_in_use += nbytes
        if self.bytes_in_use > self.peak_bytes_in_use:
            self.peak_bytes_in_use = self.bytes_in_use

    def record_free(self, nbytes: int) -> None:
        self.bytes_in_use -= nbytes

    # -- copies (values already where they are asked to be pass through unchanged)
    async def copy_to_host(self, value):
        """A host (NumPy) copy of a value living on this device.

        Asynchronous so that a GPU device can enqueue the copy on a stream and await its
        event instead of blocking the loop; on a host device it is the value itself.
        """
        return value

    async def copy_from_host(self, value):
        """This device's copy of a host value (see `copy_to_host`)."""
        return value

    async def copy_from_device(self, value, src: Device):
        """This device's copy of `value`, which lives on device `src`.  Through host
        memory unless a device knows a direct path (a peer copy between GPUs)."""
        if src is self or (src.host_memory and self.host_memory):
            return value
        return await self.copy_from_host(await src.copy_to_host(value))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
