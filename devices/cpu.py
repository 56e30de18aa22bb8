"""The CPU device: NumPy kernels, heavy work on the device's own worker threads.

NumPy's BLAS and most large ufunc loops release the GIL, so a kernel handed to a worker
thread runs while the loop goes on with other ready kernels.  Small work runs inline:
a thread hop (~20-50 µs) costs more than the work.  So does all work of a lone device
while a synchronous `run` drives its step on the caller's own thread (`CALLER_DRIVES`):
that thread waits for the step anyway and the loop has nothing else to serve, while a
worker would only run heavy kernels beside the inline ones, two BLAS calls thrashing
two cores and their caches (~15% of the LeNet step of benchmarks/conv_bench.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from asyncflow.devices.base import Device

__all__ = ["CALLER_DRIVES", "CPUDevice", "INLINE_BYTES", "SOLO_INLINE_BYTES", "share_cores"]

# Work whose array arguments total fewer bytes than this runs inline on the loop while
# several devices share the host: a hop lets another device's kernels run meanwhile.
INLINE_BYTES = 1 << 18
# A lone device gains little from a hop (BLAS already spreads over the cores and there is
# one worker), and each costs a loop wake-up (~20-50 us, 30% of the MLP step of
# benchmarks/train_bench.py); it pays only to keep the loop responsive during long work.
SOLO_INLINE_BYTES = 1 << 22


# True while a synchronous caller drives the current step inline on its own thread
# (set by the session runtime; Tasks of the step inherit it).
CALLER_DRIVES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "asyncflow_caller_drives", default=False
)

_share_lock = threading.Lock()
_share_count = 0
_share_limiter = None


def share_cores(n_devices: int) -> None:
    """Split the host's cores between `n_devices` virtual CPU devices.

    Each device runs heavy kernels on its own workers; letting every BLAS call also
    spread over all cores would oversubscribe them, so while a multi-device session
    lives, each BLAS call gets cores / n_devices threads (threadpoolctl, when present).
    Call `release_cores()` when that session closes.
    """
    global _share_count, _share_limiter
    if n_devices <= 1:
        return
    with _share_lock:
        _share_count += 1
        if _share_limiter is None:
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # pragma: no cover - optional
                return
            per = max(1, (os.cpu_count() or 1) // n_devices)
            _share_limiter = threadpool_limits(limits=per, user_api="blas")


def release_cores() -> None:
    global _share_count, _share_limiter
    with _share_lock:
        if _share_count == 0:
            return
        _share_count -= 1
        if _share_count == 0 and _share_limiter is not None:
            _share_limiter.restore_original_limits()
            _share_limiter = None


class CPUDevice(Device):
    device_type = "CPU"
    xp = np

    def __init__(self, name: str, index: int = 0, num_threads: int = 0):
        super().__init__(name, index)
        # One worker by default: BLAS already spreads a big kernel over the cores, and
        # two BLAS calls at once on two cores oversubscribe them (intra-op threads).
        self.num_threads = num_threads or 1
        self._pool: ThreadPoolExecutor | None = None

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.num_threads, thread_name_prefix=f"asyncflow-cpu{self.index}"
            )
        return self._pool

    async def compute(self, fn, *args, cost: float | None = None):
        if cost is None:
            cost = 0
            for a in args:
                if isinstance(a, np.ndarray):
                    cost += a.nbytes
        if _share_count:
            if cost < INLINE_BYTES:
                return fn(*args)
        elif cost < SOLO_INLINE_BYTES or CALLER_DRIVES.get():
            return fn(*args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, fn, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def local_cpu_name(index: int = 0) -> str:
    return f"/job:localhost/replica:0/task:0/device:CPU:{index}"
