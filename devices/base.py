"""The Device interface (DESIGN.md "Devices and names", "Kernel contract").

A device has a TF name and type, an array module (`xp`: NumPy on CPU, CuPy on GPU),
a way to run heavy work without blocking the loop (`compute`), memory accounting and
copies to and from host memory.  A GPU device implements `compute` by enqueueing on a
stream and awaiting an event; the interface is the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncflow import errors

__all__ = ["Device", "available_host_memory"]

_MEMINFO_CACHE: list[float] = [0.0, 0.0]


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


class Device:
    """Base class.  Subclasses set `device_type` and implement `compute`."""

    device_type = "CPU"
    xp: Any = np

    def __init__(self, name: str, index: int = 0):
        self.name = name  # full TF name, e.g. /job:localhost/replica:0/task:0/device:CPU:0
        self.index = index
        self.bytes_in_use = 0
        self.peak_bytes_in_use = 0

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

    async def copy_to_host(self, value):
        """A host (NumPy) copy of a value living on this device.

        Asynchronous so that a GPU device can enqueue the copy on a stream and await its
        event instead of blocking the loop; on the CPU it is the value itself (arrays
        are never mutated in place, so sharing the buffer is safe).
        """
        return value

    async def copy_from_host(self, value):
        """This device's copy of a host value (see `copy_to_host`)."""
        return value

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
