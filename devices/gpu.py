"""GPU devices through CuPy (or its strict stand-in, devices/fake_cupy.py).

CuPy is optional: nothing here imports it until a session asks how many GPUs exist,
and a machine without CuPy or without a driver simply has none (`unavailable_reason()`
says why, and an explicit `/gpu:0` fails with that reason).  `ASYNCFLOW_FAKE_GPUS=N`
gives N devices over the stand-in instead, which runs this same code in CI.

Per physical device (shared by every session of the process, as TF's GPU streams are):
- a compute stream, on which every kernel placed on the device runs: each synchronous
  segment of a kernel coroutine runs with the device and its compute stream current,
  so `ctx.xp` calls (and array operators) enqueue there and return at once;
- a host->device and a device->host copy stream, and a peer stream for copies from
  other GPUs; copies go through pinned staging buffers and are ordered with events:
  a copy's stream waits for an event recorded on the compute stream (the producer and
  every earlier user of the memory), and the compute stream waits for the copy's event
  before any later kernel reads the result;
- the loop learns that work finished through `Stream.launch_host_func`, whose callback
  only calls `loop.call_soon_threadsafe` to resolve a future: nothing on the loop's
  thread ever synchronises a stream.  Device->host copies (fetches, host-memory
  arguments, Sends to a CPU) await that; the rest of the work stays queued on the
  streams, and `compute` awaits an event only every BACKLOG calls, so that the host
  never runs unboundedly ahead of the device.

Memory: CuPy's pool per device; `memory_stats()` gives bytes in use and the peak seen
after each kernel; `gpu_options.per_process_gpu_memory_fraction` caps the pool
(`memory_limit`).  The pool grows on demand up to that cap (TF's `allow_growth`
behaviour); TF's up-front reservation when `allow_growth` is False is not made.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import numpy as np

from asyncflow import errors
from asyncflow.devices.base import Device

__all__ = [
    "BACKLOG",
    "CHUNK_BYTES",
    "STAGE_IN_THREAD_BYTES",
    "GPUDevice",
    "backend",
    "create_gpus",
    "default_count",
    "unavailable_reason",
]

# Computes enqueued before `compute` awaits the compute stream once (backpressure).
BACKLOG = 64
# Host values at least this big are copied into pinned staging on a worker thread.
STAGE_IN_THREAD_BYTES = 4 << 20
# ... in chunks of this many bytes, staged by several threads and sent as each is ready.
CHUNK_BYTES = 8 << 20
# Control-flow primitives (asyncflow.partition._CF_PRIMS, not imported: devices sit
# below the runtime).
_CF_PRIMS = frozenset(
    "Enter RefEnter Exit RefExit NextIteration RefNextIteration Merge RefMerge Switch "
    "RefSwitch LoopCond".split()
)
GPU_PRIORITY = 200  # placement: ops with a GPU kernel go to GPU:0 first, as TF
# What lives in device memory (CuPy's dtypes): no strings, no bfloat16.
GPU_DTYPES = frozenset(
    "float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool "
    "complex64 complex128 resource".split()
)


class _Backend:
    """The array module and its pinned-memory allocator (CuPy, or the stand-in)."""

    def __init__(self, xp, empty_pinned, name: str):
        self.xp = xp
        self.empty_pinned = empty_pinned
        self.name = name
        self.physical: dict[int, _Physical] = {}
        self.lock = threading.Lock()


_real: list = []  # [backend or None, reason]
_fake: list = []
_lock = threading.Lock()


def backend() -> _Backend | None:
    """The backend GPUs use in this process: the stand-in when ASYNCFLOW_FAKE_GPUS is
    set, else CuPy when it imports and a driver answers; None otherwise."""
    if os.environ.get("ASYNCFLOW_FAKE_GPUS"):
        with _lock:
            if not _fake:
                from asyncflow.devices import fake_cupy

                _fake.append(_Backend(fake_cupy.module, fake_cupy.empty_pinned, "fake_cupy"))
            return _fake[0]
    with _lock:
        if not _real:
            try:
                import cupy
                import cupyx

                cupy.cuda.runtime.getDeviceCount()
                _real[:] = [_Backend(cupy, cupyx.empty_pinned, "cupy"), None]
            except Exception as e:  # ImportError, CUDARuntimeError (no driver, no device)
                _real[:] = [None, f"{type(e).__name__}: {e}"]
        return _real[0]


def unavailable_reason() -> str | None:
    """Why this process has no GPU (None when it has one)."""
    b = backend()
    if b is None:
        return (
            "GPU support needs CuPy and a CUDA driver (pip install 'asyncflow[gpu]'); "
            f"importing CuPy failed with {_real[1]}"
        )
    if b.xp.cuda.runtime.getDeviceCount() == 0:
        return f"{b.name} reports no CUDA devices (CUDA_VISIBLE_DEVICES?)"
    return None


def _visible(config, b: _Backend) -> list[int]:
    n = b.xp.cuda.runtime.getDeviceCount()
    opts = getattr(config, "gpu_options", None)
    listed = getattr(opts, "visible_device_list", "") if opts is not None else ""
    if not listed:
        return list(range(n))
    ids = []
    for part in str(listed).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            i = int(part)
        except ValueError:
            i = -1
        if not 0 <= i < n or i in ids:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"'visible_device_list' listed an invalid GPU id '{part}' "
                f"but visible device count is {n}",
            )
        ids.append(i)
    return ids


def default_count(config) -> int:
    b = backend()
    if b is None:
        return 0
    return len(_visible(config, b))


def create_gpus(config, prefix: str, count: int) -> list[Device]:
    b = backend()
    if b is None or count == 0:
        return []
    ids = _visible(config, b)[:count]
    return [
        GPUDevice(f"{prefix}GPU:{i}", i, b, physical_id, config)
        for i, physical_id in enumerate(ids)
    ]


class _Physical:
    """One CUDA device's streams, pool and kernel wrappers (one per process)."""

    def __init__(self, b: _Backend, physical_id: int):
        xp = b.xp
        self.backend = b
        self.xp = xp
        self.id = physical_id
        self.cuda_device = xp.cuda.Device(physical_id)
        with self.cuda_device:
            self.compute = xp.cuda.Stream(non_blocking=True)
            self.h2d = xp.cuda.Stream(non_blocking=True)
            self.d2h = xp.cuda.Stream(non_blocking=True)
            self.peer = xp.cuda.Stream(non_blocking=True)
            self.pool = xp.get_default_memory_pool()
            free, total = self.cuda_device.mem_info
        self.total_memory = int(total)
        self.free_at_start = int(free)
        self.peak = 0
        self.kernels: dict[int, Any] = {}
        self.lock = threading.Lock()
        props = xp.cuda.runtime.getDeviceProperties(physical_id)
        name = props.get("name", b"GPU")
        name = name.decode() if isinstance(name, bytes) else str(name)
        cc = f"{props.get('major', 0)}.{props.get('minor', 0)}"
        self.desc = f"name: {name}, compute capability: {cc}"

    def used(self) -> int:
        with self.cuda_device:
            used = int(self.pool.used_bytes())
        if used > self.peak:
            self.peak = used
        return used


def _physical(b: _Backend, physical_id: int) -> _Physical:
    with b.lock:
        p = b.physical.get(physical_id)
        if p is None:
            p = b.physical[physical_id] = _Physical(b, physical_id)
        return p


class _OnDevice:
    """Awaits a kernel coroutine, running each of its synchronous segments with the
    device and its compute stream current (CuPy's current device and stream are
    thread-local, and the loop's thread interleaves kernels of several devices)."""

    __slots__ = ("coro", "phys")

    def __init__(self, coro, phys: _Physical):
        self.coro = coro
        self.phys = phys

    def __await__(self):
        coro, phys = self.coro, self.phys
        value, exc = None, None
        while True:
            with phys.cuda_device, phys.compute:
                try:
                    step = coro.send(value) if exc is None else coro.throw(exc)
                except StopIteration as stop:
                    phys.used()
                    return stop.value
            try:
                value, exc = (yield step), None
            except BaseException as e:  # cancellation, or the awaited future's error
                value, exc = None, e


def _bind(fn, phys: _Physical):
    async def on_device(ctx, *args, **kwargs):
        return await _OnDevice(fn(ctx, *args, **kwargs), phys)

    on_device.__name__ = getattr(fn, "__name__", "kernel")
    on_device.__wrapped__ = fn
    return on_device


def _signal(fut) -> None:
    if not fut.done():
        fut.set_result(None)


class GPUDevice(Device):
    device_type = "GPU"
    host_memory = False
    run_mode = "stream"
    placement_priority = GPU_PRIORITY

    def __init__(self, name: str, index: int, b: _Backend, physical_id: int, config=None):
        super().__init__(name, index)
        self.backend = b
        self.xp = b.xp
        self.physical_id = physical_id
        self._phys = _physical(b, physical_id)
        self._since_wait = 0
        self.copies = {"h2d": 0, "d2h": 0, "peer": 0, "staged": 0}
        opts = getattr(config, "gpu_options", None)
        fraction = float(getattr(opts, "per_process_gpu_memory_fraction", 0.0) or 0.0)
        self.allow_growth = bool(getattr(opts, "allow_growth", False))
        p = self._phys
        if fraction > 0:
            self._limit = int(p.total_memory * min(fraction, 1.0))
        else:
            self._limit = p.free_at_start
        with p.cuda_device:
            p.pool.set_limit(size=self._limit)

    # The base class's counters, read by tracing (RunMetadata step_stats memory): here
    # they come from the device's pool (bytes in use now, the peak seen after kernels).
    @property
    def bytes_in_use(self) -> int:
        return self._phys.used()

    @bytes_in_use.setter
    def bytes_in_use(self, _value) -> None:
        pass

    @property
    def peak_bytes_in_use(self) -> int:
        return self._phys.peak

    @peak_bytes_in_use.setter
    def peak_bytes_in_use(self, _value) -> None:
        pass

    @property
    def physical_device_desc(self) -> str:
        return f"device: {self.physical_id}, name: {self._phys.desc}"

    # -- which ops run here: every registered kernel, bound to this device's stream
    def kernel_for(self, op_def):
        kd = op_def.kernel_for(self.device_type)
        if kd is None:
            return None
        p = self._phys
        entry = p.kernels.get(id(kd))
        if entry is None or entry[0] is not kd:
            with p.lock:
                entry = p.kernels.get(id(kd))
                if entry is None or entry[0] is not kd:
                    bound = type(kd)(_bind(kd.fn, p), kd.device_type, kd.host_memory)
                    entry = p.kernels[id(kd)] = (kd, bound)
        return entry[1]

    def supports_op(self, op) -> bool:
        """A kernel for the op, only GPU_DTYPES among its inputs and outputs and no
        variable reference: TF registers no GPU kernel for DT_STRING, so such ops stay
        on the CPU (a string Const, an Identity or Reshape of strings)."""
        if self.kernel_for(op.op_def) is None:
            return False
        for t in (*op._inputs, *op._outputs):
            if t.dtype.base_dtype.name not in GPU_DTYPES:
                return False
            # Variables live on the GPU with the ops colocated with them (the placer);
            # a loop's primitives do not carry a reference here (RefEnter & co.: a loop
            # split between a GPU and the CPU does not yet complete).
            if t._is_ref and (op.type in _CF_PRIMS or op.type.startswith("Ref")):
                return False
        return True

    # -- memory
    def memory_stats(self) -> dict:
        used = self._phys.used()
        return {
            "bytes_in_use": used,
            "peak_bytes_in_use": self._phys.peak,
            "bytes_limit": self._limit,
        }

    @property
    def memory_limit(self) -> int:
        return self._limit

    def check_alloc(self, num_elements, dtype) -> None:
        try:
            itemsize = np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).itemsize
        except TypeError:
            itemsize = 8
        n = int(num_elements)
        if n < 0:
            raise errors.InvalidArgumentError(None, None, f"negative allocation size {n}")
        free = self._limit - self._phys.used()
        if n * itemsize > free:
            raise errors.ResourceExhaustedError(
                None,
                None,
                f"OOM when allocating tensor with {n} elements of type "
                f"{getattr(dtype, 'name', dtype)} on {self.name} "
                f"by allocator GPU_{self.index}_bfc",
            )

    # -- completion
    async def _wait(self, stream) -> None:
        """Until the work enqueued on `stream` so far has finished; the loop is told by
        a host callback on the stream (the callback only signals)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._phys.cuda_device:
            event = stream.record()

            def callback(_arg, loop=loop, fut=fut):
                try:
                    loop.call_soon_threadsafe(_signal, fut)
                except RuntimeError:  # the loop closed meanwhile
                    pass

            stream.launch_host_func(callback, None)
        await fut
        if not event.done:  # cannot happen: the callback ran after the event's work
            raise errors.InternalError(
                None, None, f"{self.name}: stream callback before its event"
            )

    def event(self):
        return asyncio.ensure_future(self._wait(self._phys.compute))

    async def compute(self, fn, *args, cost: float | None = None):
        p = self._phys
        with p.cuda_device, p.compute:
            result = fn(*args)
        self._since_wait += 1
        if self._since_wait >= BACKLOG:
            self._since_wait = 0
            await self._wait(p.compute)
        return result

    # -- copies
    def _is_device_array(self, value) -> bool:
        return isinstance(value, self.xp.ndarray)

    async def copy_from_host(self, value):
        if self._is_device_array(value):
            raise errors.InternalError(
                None, None, f"{self.name}: copy to the device of a device value"
            )
        host = np.asarray(value)
        if host.dtype == object:
            raise errors.InvalidArgumentError(
                None, None, f"{self.name}: string/object tensors cannot live in GPU memory"
            )
        p, xp = self._phys, self.xp
        with p.cuda_device:
            staging = p.backend.empty_pinned(host.shape, host.dtype)
        if host.nbytes >= STAGE_IN_THREAD_BYTES:  # a big memcpy would hold the loop
            if host.flags.c_contiguous:
                out = await self._pipelined_h2d(host, staging)
                self.copies["h2d"] += 1
                return out
            await asyncio.get_running_loop().run_in_executor(None, np.copyto, staging, host)
        else:
            np.copyto(staging, host)
        with p.cuda_device:
            with p.compute:  # allocated on the compute stream, which will use it
                out = xp.empty(host.shape, host.dtype)
            # The copy may write memory the compute stream used before: after it.
            p.h2d.wait_event(p.compute.record())
            out.set(staging, stream=p.h2d)
            p.compute.wait_event(p.h2d.record())
            p.h2d.launch_host_func(_keep, staging)  # staging lives until copied
        self.copies["h2d"] += 1
        return out

    async def _pipelined_h2d(self, host, staging):
        """A big host->device copy in chunks: worker threads copy the chunks into pinned
        staging side by side, and each chunk's DMA is enqueued on the copy stream as
        soon as its bytes are staged, so host copies and transfers overlap."""
        p, xp = self._phys, self.xp
        loop = asyncio.get_running_loop()
        flat_host, flat_stage = host.reshape(-1), staging.reshape(-1)
        step = max(1, CHUNK_BYTES // max(host.itemsize, 1))
        bounds = [(a, min(a + step, flat_host.size)) for a in range(0, flat_host.size, step)]
        staged = [
            loop.run_in_executor(None, np.copyto, flat_stage[a:b], flat_host[a:b])
            for a, b in bounds
        ]
        with p.cuda_device:
            with p.compute:  # (views of the output, on the stream that allocated it)
                out = xp.empty(host.shape, host.dtype)
                flat_out = out.reshape(-1)
                pieces = [flat_out[a:b] for a, b in bounds]
            p.h2d.wait_event(p.compute.record())
        try:
            for (a, b), piece, done in zip(bounds, pieces, staged):
                await done
                with p.cuda_device:
                    piece.set(flat_stage[a:b], stream=p.h2d)
        except BaseException:
            for f in staged:
                f.cancel()
            raise
        finally:
            with p.cuda_device:
                p.h2d.launch_host_func(_keep, staging)  # staging lives until copied
        with p.cuda_device:
            p.compute.wait_event(p.h2d.record())
        return out

    async def copy_to_host(self, value):
        if not self._is_device_array(value):
            raise errors.InternalError(
                None, None, f"{self.name}: copy to the host of a host value {type(value).__name__}"
            )
        p = self._phys
        with p.cuda_device:
            with p.compute:  # (a strided view: made contiguous before the event)
                value = _contiguous(self.xp, value)
            p.d2h.wait_event(p.compute.record())  # after its producer (and all before)
            out = p.backend.empty_pinned(value.shape, value.dtype)
            value.get(stream=p.d2h, out=out, blocking=False)
        await self._wait(p.d2h)
        self.copies["d2h"] += 1
        return out.view(np.ndarray)

    async def copy_from_device(self, value, src: Device):
        if src is self:
            return value
        if src.host_memory:
            return await self.copy_from_host(value)
        sp = getattr(src, "_phys", None)
        p = self._phys
        if sp is None or sp.backend is not p.backend or sp is p:
            if sp is p:
                return value
            self.copies["staged"] += 1
            return await self.copy_from_host(await src.copy_to_host(value))
        xp = self.xp
        if not xp.cuda.runtime.deviceCanAccessPeer(p.id, sp.id):
            self.copies["staged"] += 1
            return await self.copy_from_host(await src.copy_to_host(value))
        with sp.cuda_device, sp.compute:
            value = _contiguous(xp, value)
            produced = sp.compute.record()
        with p.cuda_device:
            with p.compute:
                out = xp.empty(value.shape, value.dtype)
            p.peer.wait_event(produced)
            p.peer.wait_event(p.compute.record())
            out.data.copy_from_device_async(value.data, value.nbytes, p.peer)
            p.compute.wait_event(p.peer.record())
            p.peer.launch_host_func(_keep, value)  # the source lives until copied
        self.copies["peer"] += 1
        return out

    def close(self) -> None:
        pass


def _contiguous(xp, value):
    """`value` C-contiguous, with its shape: CuPy's (and NumPy's) `ascontiguousarray`
    makes a 0-d array 1-d."""
    if value.flags.c_contiguous:
        return value
    return xp.ascontiguousarray(value).reshape(value.shape)


def _keep(_value) -> None:
    """A host callback whose only job is to hold its argument until the stream got here."""
