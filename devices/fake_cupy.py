"""A strict stand-in for the part of CuPy the GPU device uses (ASYNCFLOW_FAKE_GPUS=N).

It lets CI run `devices/gpu.py` unchanged, and is stricter than a real GPU about the
one thing a GPU device can get wrong without any test noticing: synchronisation.

What it models, with CuPy's names:
- `cuda.Device(i)` (context manager, `.use()`, `.mem_info`), `cuda.runtime`
  (`getDeviceCount`, `deviceCanAccessPeer`, `getDeviceProperties`);
- `cuda.Stream(non_blocking=True)`: work enqueued on a stream completes later, in order,
  on that stream's own worker thread; `record()` / `cuda.Event`, `wait_event`,
  `launch_host_func` (the callback runs on the stream's thread, after the work before
  it), `synchronize`, `done`; a thread-local current device and current stream
  (`with stream:`), as CuPy's;
- `ndarray`: arrays of their own type that refuse every implicit conversion to NumPy
  (`np.asarray(x)`, `float(x)`, `bool(x)`, iteration, `.tolist()`: CuPy would block
  the calling thread there; a kernel on the event loop must not) and refuse host
  ndarray operands (a host value handed to the device); `.get(stream=, out=,
  blocking=)` and `.set(host, stream=)` (asynchronous only from and into pinned
  memory: `empty_pinned`), `.data.copy_from_device_async` (peer copies);
- `get_default_memory_pool()`: bytes in use and held per device, `set_limit`, and
  `cuda.memory.OutOfMemoryError` past the limit;
- `fuse`: one kernel launch for a function of ufuncs, refusing what CuPy's fusion
  refuses (devices/fake_fusion.py);
- a view's `base` (the array it views), and arrays over memory another object owns:
  `cuda.UnownedMemory(ptr, size, owner)`, `cuda.MemoryPointer(mem, offset)`,
  `ndarray(shape, dtype, memptr, strides)`; such an array and every view of it hold
  the owner, as on CuPy (`.data.ptr` names a live allocation, strictly: an unknown or
  dead pointer, or a size past its allocation, raises);
- `launches()` / `reset_launches()` (the stand-in's own): kernel launches and copies
  asked of each device, as CUDA would count them, for tests and benchmarks.

How strictness works.  Values are computed when their work is enqueued (so that shapes
are known at once, as CuPy knows them), but a value becomes *visible* only as CUDA
would make it visible.  Every stream carries a happens-before clock (which work of
which stream it is ordered after: its own earlier work, events it waited for, and
whatever the host had observed complete when the work was enqueued); the host has one
too (events it saw done, streams it synchronised).  Work that reads an array on a
stream not ordered after the array's producer, and a host read of a pinned buffer
before the host saw its copy's event, raise `UnsynchronizedAccessError`, every time,
whether or not the race would have been lost on a real GPU.  A device-to-host copy also
lands in its pinned buffer only when the copy stream's thread gets to it, so an early
read sees stale bytes as on hardware.

What it does not model: CuPy's exact API coverage (any NumPy function is offered
through the module), kernel speed, and memory reuse hazards across streams.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import types
import weakref
from typing import Any

import numpy as np

from asyncflow.devices import fake_fusion

__all__ = [
    "HostArrayError",
    "HostConversionError",
    "UnsynchronizedAccessError",
    "cuda",
    "empty_pinned",
    "get_default_memory_pool",
    "launches",
    "module",
    "ndarray",
    "reset_launches",
]

DEFAULT_MEMORY = 4 << 30  # bytes per fake device (ASYNCFLOW_FAKE_GPU_MEMORY overrides)


class HostConversionError(TypeError):
    """An implicit device -> host conversion of a fake device array."""


class HostArrayError(TypeError):
    """A host (NumPy) array handed to device work."""


class UnsynchronizedAccessError(RuntimeError):
    """A value read before the work that produces it is known to have completed."""


class _OutOfMemoryError(MemoryError):
    pass


# -- happens-before clocks --------------------------------------------------------------

_host_lock = threading.Lock()
_host_known: dict[int, int] = {}  # stream id -> highest seq the host saw complete
_local = threading.local()
_stream_ids = itertools.count(1)


def _join(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


def _host_observes(clock: dict) -> None:
    with _host_lock:
        _join(_host_known, clock)


class Stream:
    """A CUDA stream: a queue of work completed in order by its own thread."""

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.device_id = _current_device()
        self.id = next(_stream_ids)
        self.null = null
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._next = 0  # seq of the last enqueued entry
        self._done = 0  # seq of the last completed entry
        self.known: dict[int, int] = {}  # happens-before clock of the next entry
        self._thread: threading.Thread | None = None

    # -- enqueueing (any thread)
    def _submit(self, entry) -> int:
        with self._cond:
            with _host_lock:
                _join(self.known, _host_known)
            self._next += 1
            seq = self._next
            self.known[self.id] = seq
            self._queue.append((seq, entry))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name=f"fake-cuda-stream{self.id}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return seq

    def _visible(self, array) -> bool:
        if array._stream_id == self.id:
            return True
        seq = array._seq
        if self.known.get(array._stream_id, 0) >= seq:
            return True
        with _host_lock:
            return _host_known.get(array._stream_id, 0) >= seq

    def _work(self) -> None:  # the stream's thread
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                seq, entry = self._queue[0]
            if entry is not None:
                kind = entry[0]
                if kind == "wait":
                    entry[1]._wait_complete()
                elif kind == "host":
                    entry[1](entry[2])
                elif kind == "run":
                    entry[1]()
            with self._cond:
                self._queue.popleft()
                self._done = seq
                self._cond.notify_all()

    # -- CuPy's API
    def record(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        if event._stream is None:
            return
        with self._cond:
            _join(self.known, event._clock)
        self._submit(("wait", event))

    def launch_host_func(self, callback, arg) -> None:
        self._submit(("host", callback, arg))

    def synchronize(self) -> None:
        with self._cond:
            target = self._next
            clock = dict(self.known)
            while self._done < target:
                self._cond.wait()
        _host_observes(clock)

    @property
    def done(self) -> bool:
        with self._cond:
            return self._done >= self._next

    def use(self):
        _stream_stack()[:] = [self]
        return self

    def __enter__(self):
        _stream_stack().append(self)
        return self

    def __exit__(self, *exc):
        _stream_stack().pop()

    def __repr__(self) -> str:
        return f"<fake Stream {self.id} on device {self.device_id}>"


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self._stream: Stream | None = None
        self._seq = 0
        self._clock: dict[int, int] = {}

    def record(self, stream=None) -> None:
        stream = stream if stream is not None else get_current_stream()
        with stream._cond:
            self._stream = stream
            self._seq = stream._submit(None)
            self._clock = dict(stream.known)

    def _complete(self) -> bool:
        s = self._stream
        if s is None:
            return True
        with s._cond:
            return s._done >= self._seq

    def _wait_complete(self) -> None:
        s = self._stream
        if s is None:
            return
        with s._cond:
            while s._done < self._seq:
                s._cond.wait()

    @property
    def done(self) -> bool:
        if self._complete():
            _host_observes(self._clock)
            return True
        return False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self._wait_complete()
        _host_observes(self._clock)


# -- devices ----------------------------------------------------------------------------


class _Pool:
    """One device's memory pool (CuPy's `MemoryPool` as seen from its device)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.limit = capacity
        self.used = 0
        self.held = 0
        self.lock = threading.Lock()

    def malloc(self, nbytes: int) -> int:
        nbytes = (nbytes + 511) // 512 * 512
        with self.lock:
            if self.used + nbytes > self.limit:
                raise _OutOfMemoryError(
                    f"Out of memory allocating {nbytes:,} bytes (allocated so far: "
                    f"{self.used:,} bytes, limit set to: {self.limit:,} bytes)."
                )
            self.used += nbytes
            self.held = max(self.held, self.used)
        return nbytes

    def free(self, nbytes: int) -> None:
        with self.lock:
            self.used -= nbytes


class _DeviceState:
    def __init__(self, index: int, capacity: int):
        self.index = index
        self.pool = _Pool(capacity)
        self.null_stream: Stream | None = None


_devices: dict[int, _DeviceState] = {}
_devices_lock = threading.Lock()


def _count() -> int:
    raw = os.environ.get("ASYNCFLOW_FAKE_GPUS", "0") or "0"
    n = max(0, int(raw))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return n
    ids = []  # as the driver: the listed ordinals up to the first invalid one
    for part in visible.split(","):
        try:
            i = int(part)
        except ValueError:
            break
        if not 0 <= i < n or i in ids:
            break
        ids.append(i)
    return len(ids)


def _state(index: int) -> _DeviceState:
    if not 0 <= index < _count():
        raise runtime.CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {index}")
    with _devices_lock:
        st = _devices.get(index)
        if st is None:
            cap = int(os.environ.get("ASYNCFLOW_FAKE_GPU_MEMORY", DEFAULT_MEMORY))
            st = _devices[index] = _DeviceState(index, cap)
        return st


def _device_stack() -> list:
    stack = getattr(_local, "devices", None)
    if stack is None:
        stack = _local.devices = [0]
    return stack


def _stream_stack() -> list:
    stack = getattr(_local, "streams", None)
    if stack is None:
        stack = _local.streams = []
    return stack


def _current_device() -> int:
    return _device_stack()[-1]


def get_current_stream() -> Stream:
    dev = _current_device()
    for s in reversed(_stream_stack()):
        if s.device_id == dev:
            return s
    st = _state(dev)
    with _devices_lock:
        if st.null_stream is None:
            st.null_stream = Stream(null=True)
            st.null_stream.device_id = dev
        return st.null_stream


class Device:
    def __init__(self, device=None):
        self.id = _current_device() if device is None else int(device)

    def use(self) -> None:
        _state(self.id)
        _device_stack()[-1] = self.id

    def __enter__(self):
        _state(self.id)
        _device_stack().append(self.id)
        return self

    def __exit__(self, *exc):
        _device_stack().pop()

    @property
    def mem_info(self) -> tuple[int, int]:
        pool = _state(self.id).pool
        return pool.capacity - pool.held, pool.capacity

    def synchronize(self) -> None:
        for s in list(_all_streams):
            if s.device_id == self.id:
                s.synchronize()

    def __repr__(self) -> str:
        return f"<fake CUDA Device {self.id}>"


_all_streams: weakref.WeakSet = weakref.WeakSet()
_orig_stream_init = Stream.__init__


def _tracked_init(self, *args, **kwargs):
    _orig_stream_init(self, *args, **kwargs)
    _all_streams.add(self)


Stream.__init__ = _tracked_init  # type: ignore[method-assign]


class _MemoryPool:
    """`cupy.get_default_memory_pool()`: acts on the current device's pool."""

    def used_bytes(self) -> int:
        return _state(_current_device()).pool.used

    def total_bytes(self) -> int:
        return _state(_current_device()).pool.held

    def free_all_blocks(self, stream=None) -> None:
        pool = _state(_current_device()).pool
        with pool.lock:
            pool.held = pool.used

    def set_limit(self, size=None, fraction=None) -> None:
        pool = _state(_current_device()).pool
        if fraction is not None:
            size = int(pool.capacity * fraction)
        pool.limit = pool.capacity if not size else min(int(size), pool.capacity)

    def get_limit(self) -> int:
        return _state(_current_device()).pool.limit


_default_pool = _MemoryPool()


def get_default_memory_pool() -> _MemoryPool:
    return _default_pool


def _get_device_count() -> int:
    return _count()


def _can_access_peer(device: int, peer: int) -> int:
    _state(device)
    _state(peer)
    return 1


def _properties(index: int) -> dict:
    return {
        "name": b"Fake CUDA device (asyncflow stand-in)",
        "totalGlobalMem": _state(index).pool.capacity,
        "major": 8,
        "minor": 0,
        "multiProcessorCount": 1,
    }


class _CUDARuntimeError(RuntimeError):
    pass


runtime = types.SimpleNamespace(
    getDeviceCount=_get_device_count,
    deviceCanAccessPeer=_can_access_peer,
    getDeviceProperties=_properties,
    CUDARuntimeError=_CUDARuntimeError,
)
cuda = types.SimpleNamespace(
    Device=Device,
    Stream=Stream,
    Event=Event,
    runtime=runtime,
    get_current_stream=get_current_stream,
    memory=types.SimpleNamespace(OutOfMemoryError=_OutOfMemoryError),
)



# -- pinned host memory -----------------------------------------------------------------


class PinnedArray(np.ndarray):
    """A pinned host buffer (cupyx.empty_pinned).  Reading it while a device->host copy
    into it is not known complete raises."""

    _pending: tuple | None = None

    def _check(self) -> None:
        pending = self._pending
        if pending is not None:
            sid, seq = pending
            with _host_lock:
                seen = _host_known.get(sid, 0)
            if seen < seq:
                raise UnsynchronizedAccessError(
                    "pinned buffer read before its device->host copy's event completed"
                )
            self._pending = None

    def view(self, *args, **kwargs):
        self._check()
        return super().view(*args, **kwargs)

    def copy(self, *args, **kwargs):
        self._check()
        return super().copy(*args, **kwargs)

    def __getitem__(self, key):
        self._check()
        return super().__getitem__(key)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for x in inputs:
            if type(x) is PinnedArray:
                x._check()
        inputs = tuple(x.view(np.ndarray) if type(x) is PinnedArray else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        self._check()
        return super().__array_function__(func, types_, args, kwargs)


def empty_pinned(shape, dtype=float, order="C") -> PinnedArray:
    return np.empty(shape, dtype, order=order).view(PinnedArray)


def _is_pinned(a) -> bool:
    return type(a) is PinnedArray


# -- device arrays ----------------------------------------------------------------------


def _refuse(what: str):
    def method(self, *args, **kwargs):
        raise HostConversionError(
            f"implicit device -> host conversion of a device array ({what}); copy it "
            "explicitly (it would block the calling thread on a real GPU)"
        )

    method.__name__ = what
    return method


# Every implicit way out of device memory (NumPy's conversion protocols, Python's number
# and truth conversions, iteration, buffers, pickling): a device array refuses them all.
HOST_CONVERSIONS = (
    "__array__ __float__ __int__ __complex__ __index__ __bool__ __iter__ __contains__ "
    "__buffer__ tolist item tobytes __reduce__ __reduce_ex__"
).split()


def refuse_host_conversion(cls, refuse=_refuse):
    """Class decorator: every name in HOST_CONVERSIONS raises (`refuse(name)` makes the
    method; the tests' strict array module uses it with its own wording)."""
    for name in HOST_CONVERSIONS:
        setattr(cls, name, refuse(name))
    return cls


def _unwrap(value: Any) -> Any:
    t = type(value)
    if t is ndarray:
        return value._a
    if t is tuple or t is list:
        return t(_unwrap(v) for v in value)
    if t is dict:
        return {k: _unwrap(v) for k, v in value.items()}
    if t is slice:
        return slice(_unwrap(value.start), _unwrap(value.stop), _unwrap(value.step))
    return value


def _scan(value: Any, found: list, shapes_ok: bool = False) -> None:
    t = type(value)
    if t is ndarray:
        found.append(value)
    elif t is tuple or t is list:
        for v in value:
            _scan(v, found, shapes_ok)
    elif t is dict:
        for v in value.values():
            _scan(v, found, shapes_ok)
    elif t is slice:
        _scan((value.start, value.stop, value.step), found, shapes_ok)
    elif isinstance(value, np.ndarray):
        if shapes_ok and value.ndim <= 1 and value.dtype.kind in "iu":
            return  # a shape, axes or split points: CuPy's functions read those on the host
        raise HostArrayError(
            f"a host numpy array {value.dtype}{list(value.shape)} was handed to device work; "
            "copy it to the device first (xp.asarray)"
        )


class _Launch:
    """One piece of device work: check its operands, run it, enqueue its completion."""

    def __init__(self, args, kwargs=None, shapes_ok=False):
        if fake_fusion.tracing():
            raise fake_fusion.FusionError(
                "device work inside a cupy.fuse function (only ufuncs of its arguments "
                "are fused; a device array is passed as an argument)"
            )
        found: list = []
        _scan(args, found, shapes_ok)
        if kwargs:
            _scan(kwargs, found, shapes_ok)
        self.dev = _current_device()
        self.stream = get_current_stream()
        for a in found:
            if a._dev != self.dev:
                raise ValueError(
                    f"array on device {a._dev} used on device {self.dev} (peer access "
                    "is not enabled)"
                )
            if not self.stream._visible(a):
                raise UnsynchronizedAccessError(
                    f"device work on stream {self.stream.id} reads an array produced on "
                    f"stream {a._stream_id} (work #{a._seq}) without waiting for it "
                    "(no event between them)"
                )
        self.seq = self.stream._submit(None)
        self.found = found

    def wrap(self, value: Any) -> Any:
        if isinstance(value, (np.ndarray, np.generic)):
            return ndarray._make(np.asarray(value), self.dev, self.stream.id, self.seq)
        t = type(value)
        if t is tuple or t is list:
            return t(self.wrap(v) for v in value)
        return value

    def written(self, array) -> None:
        array._stream_id, array._seq = self.stream.id, self.seq


def _run(fn, args, kwargs, shapes_ok=False, allocates_only=False):
    launch = _Launch(args, kwargs, shapes_ok)
    result = fn(*_unwrap(args), **(_unwrap(kwargs) if kwargs else {}))
    out = kwargs.get("out") if kwargs else None
    if out is not None:
        for o in out if isinstance(out, tuple) else (out,):
            if type(o) is ndarray:
                launch.written(o)
                if result is o._a:
                    result = o
        _tally(launch.dev, "kernels")
    elif not allocates_only and _computes(result, launch.found):
        _tally(launch.dev, "kernels")
    if type(result) is ndarray:
        return result
    wrapped = launch.wrap(result)
    if type(wrapped) is ndarray:
        root = _root(result)
        for a in launch.found:
            if _root(a._a) is root:
                wrapped._base = a._base if a._base is not None else a
                break
    return wrapped


# -- what the device was asked to do ----------------------------------------------------
#
# A kernel launch is device work that writes memory: a result that is not a view of an
# operand (a reshape, a transpose, a basic slice launch nothing on CUDA either), an
# `out=` or in-place write, an assignment into a slice; an allocation (`empty`) is none.
# Copies count apart: host->device (`set`, `asarray` of a host value), device->host
# (`get`), peer.  `cupy.fuse`'s function is one launch however many ufuncs it calls.

_counts_lock = threading.Lock()
_counts: collections.Counter = collections.Counter()  # (device, kind) -> count
_NO_LAUNCH = frozenset(["empty", "empty_like"])  # CuPy only allocates


# Functions whose result's shape depends on values: CuPy reads a count back to the host
# (a blocking device->host read) before it can allocate the result.
_SIZED_BY_VALUES = frozenset("nonzero argwhere flatnonzero unique compress extract".split())


def _has_mask(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(type(k) is ndarray and k.dtype == np.bool_ and k.ndim > 0 for k in keys)


def _tally(dev: int, kind: str) -> None:
    with _counts_lock:
        _counts[dev, kind] += 1


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _computes(result, operands) -> bool:
    """Whether `result` was computed (not a view of an operand, not a Python value)."""
    if isinstance(result, np.generic):
        return True
    if isinstance(result, (tuple, list)):
        return any(_computes(r, operands) for r in result)
    if not isinstance(result, np.ndarray) or result.size == 0:
        return False
    root = _root(result)
    return not any(_root(a._a) is root for a in operands)


def launches(device: int | None = None) -> dict[str, int]:
    """Work asked of the device (all devices when None) since `reset_launches()`:
    {"kernels", "h2d", "d2h", "peer", "sync"} counts, as the module note defines them
    ("sync": device->host reads that block the calling thread until the device gets
    there, `asnumpy` and `get()`; on the event loop's thread a kernel must make none)."""
    with _counts_lock:
        items = list(_counts.items())
    out = dict.fromkeys(("kernels", "h2d", "d2h", "peer", "sync"), 0)
    for (dev, kind), n in items:
        if device is None or dev == device:
            out[kind] += n
    return out


def reset_launches() -> None:
    with _counts_lock:
        _counts.clear()


# Device pointers the stand-in has handed out (`.data.ptr`): a host address of the
# array's bytes -> the array, while it lives.
_by_ptr: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _MemPtr:
    def __init__(self, array):
        self._array = array

    @property
    def ptr(self) -> int:
        ptr = _address(self._array._a)
        _by_ptr[ptr] = self._array
        return ptr

    def copy_from_device_async(self, src, size, stream=None) -> None:
        """A peer (device -> device) copy enqueued on `stream` (destination side)."""
        stream = stream if stream is not None else get_current_stream()
        dst, s = self._array, src._array
        if not stream._visible(s):
            raise UnsynchronizedAccessError("peer copy reads its source before its event")
        seq = stream._submit(None)
        _tally(dst._dev, "peer")
        np.copyto(dst._a.reshape(-1).view(np.uint8)[:size], s._a.reshape(-1).view(np.uint8)[:size])
        dst._stream_id, dst._seq = stream.id, seq


class UnownedMemory:
    """CuPy's `cuda.UnownedMemory`: `size` bytes at `ptr`, kept alive by `owner`."""

    def __init__(self, ptr: int, size: int, owner, device_id: int | None = None):
        array = _by_ptr.get(ptr)
        if array is None:
            raise ValueError(f"pointer {ptr:#x} is not a live device allocation")
        root = _root(array._a)
        end = _address(root) + root.nbytes
        if size < 0 or ptr + size > end:
            raise ValueError(f"{size} bytes at {ptr:#x} run past their allocation")
        if device_id is not None and device_id != array._dev:
            raise ValueError(f"pointer on device {array._dev}, not {device_id}")
        self.ptr, self.size, self.device_id = ptr, size, array._dev
        self._owner = owner
        self._array = weakref.ref(array)


class MemoryPointer:
    """CuPy's `cuda.MemoryPointer`: `mem` at a byte offset."""

    def __init__(self, mem: UnownedMemory, offset: int):
        self.mem, self.offset, self.ptr = mem, offset, mem.ptr + offset


@refuse_host_conversion
class ndarray:  # noqa: N801 - CuPy's name
    """A fake device array; see the module note."""

    __slots__ = ("_a", "_dev", "_stream_id", "_seq", "_base", "_mem", "__weakref__")
    __array_ufunc__ = None
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]

    def __new__(cls, shape, dtype=float, memptr=None, strides=None, order="C"):
        """CuPy's constructor: new memory, or an array over `memptr` (which it holds)."""
        if memptr is None:
            return module.empty(shape, dtype, order=order)
        mem = memptr.mem
        array = mem._array()
        if array is None:
            raise ValueError("the memory's allocation has been freed")
        root = _root(array._a)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if memptr.offset + nbytes > mem.size:
            raise ValueError(f"{nbytes} bytes past the end of a {mem.size}-byte memory")
        a = np.ndarray(
            shape, dtype, buffer=root, offset=memptr.ptr - _address(root), strides=strides
        )
        self = object.__new__(cls)
        self._a, self._dev = a, mem.device_id
        self._stream_id, self._seq = array._stream_id, array._seq
        self._base = None
        self._mem = mem
        return self

    @classmethod
    def _make(cls, a: np.ndarray, dev: int, stream_id: int, seq: int) -> ndarray:
        self = object.__new__(cls)
        self._a, self._dev, self._stream_id, self._seq = a, dev, stream_id, seq
        self._base = None
        self._mem = None
        if a.base is None and a.nbytes:
            pool = _state(dev).pool
            weakref.finalize(self, pool.free, pool.malloc(a.nbytes))
        return self

    def __array_function__(self, func, types_, args, kwargs):
        raise HostConversionError(
            f"NumPy function {getattr(func, '__name__', func)} called on a device array; "
            "use the device's array module"
        )

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    device = property(lambda self: Device(self._dev))
    data = property(lambda self: _MemPtr(self))
    # A view holds the array it views (CuPy's `base`: the root array), and so whatever
    # owns that array's memory.
    base = property(lambda self: self._base)

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"<fake cupy.ndarray {self.dtype}{list(self.shape)} on device {self._dev}>"

    __str__ = __repr__

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _run(lambda _a: attr, (self,), None)

        def method(*args, **kwargs):
            if name in _SIZED_BY_VALUES:
                _tally(self._dev, "sync")
            return _run(lambda *a, **k: attr(*a[1:], **k), (self, *args), kwargs, True)

        return method

    def __getitem__(self, key):
        if _has_mask(key):  # CuPy reads the mask's count back to size the result
            _tally(self._dev, "sync")
        return _run(lambda a, k: a[k], (self, key), None)

    def __setitem__(self, key, value) -> None:
        launch = _Launch((self, key, value))
        self._a[_unwrap(key)] = _unwrap(value)
        launch.written(self)
        _tally(launch.dev, "kernels")

    # -- explicit copies
    def get(self, stream=None, order="C", out=None, blocking=True):
        stream = stream if stream is not None else get_current_stream()
        if not stream._visible(self):
            raise UnsynchronizedAccessError(
                "device->host copy reads an array before its producer's event"
            )
        if not blocking and not _is_pinned(out):
            raise TypeError("a non-blocking device->host copy needs a pinned `out` buffer")
        snapshot = self._a.copy()
        _tally(self._dev, "d2h")
        if out is None:
            out = np.empty(self.shape, self.dtype)
        dest = out.view(np.ndarray) if _is_pinned(out) else out
        if _is_pinned(out):
            out._pending = None  # (a fresh copy's own pending mark follows)
        box = {}

        def land() -> None:
            np.copyto(dest, snapshot)

        seq = stream._submit(("run", land))
        box["seq"] = seq
        if _is_pinned(out):
            out._pending = (stream.id, seq)
        if blocking:
            _tally(self._dev, "sync")
            with stream._cond:
                while stream._done < seq:
                    stream._cond.wait()
                clock = dict(stream.known)
            _host_observes(clock)
        return out

    def set(self, arr, stream=None) -> None:
        if type(arr) is ndarray:
            raise TypeError("set() takes a host array")
        if stream is not None:  # asynchronous
            if not _is_pinned(arr):
                raise TypeError(
                    "an asynchronous host->device copy needs pinned host memory "
                    "(it would be synchronous from pageable memory)"
                )
            arr._check()
        else:
            stream = get_current_stream()
        seq = stream._submit(None)
        _tally(self._dev, "h2d")
        np.copyto(self._a, np.asarray(arr.view(np.ndarray)).reshape(self.shape))
        self._stream_id, self._seq = stream.id, seq


def _binary(name: str):
    op = getattr(np.ndarray, name)

    def method(self, other):
        return _run(op, (self, other), None)

    method.__name__ = name
    return method


def _unary(name: str):
    op = getattr(np.ndarray, name)

    def method(self):
        return _run(op, (self,), None)

    method.__name__ = name
    return method


for _name in (
    "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift divmod "
    "radd rsub rmul rtruediv rfloordiv rmod rpow rmatmul rand ror rxor rlshift rrshift "
    "rdivmod lt le gt ge eq ne"
).split():
    setattr(ndarray, f"__{_name}__", _binary(f"__{_name}__"))
for _name in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior"):

    def _inplace(self, other, _op=getattr(np.ndarray, f"__{_name}__")):
        launch = _Launch((self, other))
        _op(self._a, _unwrap(other))
        launch.written(self)
        _tally(launch.dev, "kernels")
        return self

    setattr(ndarray, f"__{_name}__", _inplace)
for _name in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_name}__", _unary(f"__{_name}__"))


# -- the module -------------------------------------------------------------------------


class _Ufunc:
    def __init__(self, ufunc: np.ufunc):
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        if fake_fusion.tracing():
            return fake_fusion.call_ufunc(self._ufunc, args, kwargs)
        return _run(self._ufunc, args, kwargs)

    def __getattr__(self, name: str):
        if name not in ("reduce", "accumulate", "outer", "at", "reduceat"):
            return getattr(self._ufunc, name)
        method = getattr(self._ufunc, name)
        if name == "at":
            if self.__name__ in ("maximum", "minimum"):
                method = _extremum_at(self._ufunc)
            return lambda a, *args, **kwargs: _run(method, (_check_at(self, a), *args), kwargs)
        return lambda *args, **kwargs: _run(method, args, kwargs)


# CuPy's `ufunc.at` is an atomic scatter, for these ufuncs and dtypes only (CuPy 13/14).
_AT_DTYPES = {
    "add": frozenset("int32 uint32 uint64 float16 float32 float64".split()),
    "subtract": frozenset("int32 uint32".split()),
    "maximum": frozenset("int32 uint32 uint64 float32 float64".split()),
    "minimum": frozenset("int32 uint32 uint64 float32 float64".split()),
}


def _extremum_at(ufunc: np.ufunc):
    """CuPy's maximum.at / minimum.at: its atomicMax and atomicMin for doubles
    (cupy/_core/include/cupy/atomics.cuh) compute with fmaxf / fminf, so every entry
    they write comes back rounded to float32."""

    def at(a, idx, v):
        if a.dtype != np.float64:
            ufunc.at(a, idx, v)
            return
        narrow = a.astype(np.float32)
        ufunc.at(narrow, idx, np.asarray(v).astype(np.float32))
        written = np.zeros(a.shape, bool)
        written[idx] = True
        a[written] = narrow[written]

    return at


def _check_at(ufunc: _Ufunc, a):
    allowed = _AT_DTYPES.get(ufunc.__name__)
    if allowed is None:
        raise NotImplementedError(f"cupy.{ufunc.__name__}.at is not supported")
    dtype = getattr(a, "dtype", None)
    if dtype is None or dtype.name not in allowed:
        raise TypeError(
            f"cupy.{ufunc.__name__}.at only supports {', '.join(sorted(allowed))} as data type"
        )
    return a


def _ascontiguousarray(value, dtype=None, **kwargs):
    """CuPy's (and NumPy's) `ascontiguousarray`: a 0-d array comes back 1-d."""
    out = _to_device(value, dtype, copy=False)
    if out.ndim == 0:
        return out.reshape((1,))
    if not out.flags.c_contiguous:
        return _run(np.ascontiguousarray, (out,), None)
    return out


def _as_strided(x, shape=None, strides=None):
    """CuPy's `as_strided`: no `writeable` argument (NumPy's has one)."""
    return _run(
        lambda a: np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides), (x,), None
    )


def _asarray(value, dtype=None, order=None, **kwargs):
    return _to_device(value, dtype, copy=False)


def _to_device(value, dtype=None, copy=True, order=None, **_):
    if type(value) is ndarray:
        if dtype is None or np.dtype(dtype) == value.dtype:
            return _run(np.array, (value,), None) if copy else value
        return _run(lambda a: a.astype(dtype), (value,), None)
    if type(value) in (tuple, list):
        found: list = []
        _scan_loose(value, found)
        if found:  # a list of device arrays: stack them on the device
            return _run(lambda v: np.array(v, dtype=dtype), (value,), None)
    host = np.array(value, dtype=dtype)
    if host.dtype == object:
        raise TypeError("object arrays cannot live in device memory")
    launch = _Launch(())
    _tally(launch.dev, "h2d")  # (from pageable memory: synchronous on CUDA)
    return launch.wrap(host)


def _scan_loose(value, found):
    for v in value:
        if type(v) is ndarray:
            found.append(v)
        elif type(v) in (tuple, list):
            _scan_loose(v, found)


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if type(a) is not ndarray:
        return np.asarray(a)
    return a.get(stream=stream, out=out, blocking=blocking)


class _Namespace(types.ModuleType):
    def __init__(self, module: types.ModuleType, name: str):
        super().__init__(name)
        self._module = module

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            value: Any = _Namespace(attr, f"{self.__name__}.{name}")
        elif isinstance(attr, np.ufunc):
            value = _Ufunc(attr)
        elif isinstance(attr, type) or not callable(attr):
            value = attr
        else:

            def value(
                *args, _f=attr, _alloc=name in _NO_LAUNCH, _sized=name in _SIZED_BY_VALUES, **kw
            ):
                if _sized or (name == "where" and len(args) == 1):
                    _tally(_current_device(), "sync")
                return _run(_f, args, kw, True, _alloc)

            value.__name__ = name
        setattr(self, name, value)
        return value


cuda.UnownedMemory = UnownedMemory
cuda.MemoryPointer = MemoryPointer
module = _Namespace(np, "fake_cupy")
for _k, _v in {
    "ndarray": ndarray,
    "cuda": cuda,
    "asarray": _asarray,
    "array": _to_device,
    "ascontiguousarray": _ascontiguousarray,
    "asnumpy": asnumpy,
    "get_default_memory_pool": get_default_memory_pool,
    "empty_pinned": empty_pinned,
    "HostArrayError": HostArrayError,
    "HostConversionError": HostConversionError,
    "UnsynchronizedAccessError": UnsynchronizedAccessError,
}.items():
    setattr(module, _k, _v)
module.lib.stride_tricks.as_strided = _as_strided
module.fuse = fake_fusion.make_fuse(_Launch, ndarray, HostArrayError, _tally)


def _no_raise(fn):
    """CuPy's solvers do not raise on a singular or non-positive-definite input (unless
    `cupyx.errstate(linalg="raise")`): the result holds nan instead."""

    def solve(a, *args, **kwargs):
        def run(x, *rest, **kw):
            try:
                return fn(x, *rest, **kw)
            except np.linalg.LinAlgError:
                return np.full(x.shape, np.nan, dtype=np.result_type(x.dtype, np.float32))

        return _run(run, (a, *args), kwargs)

    solve.__name__ = fn.__name__
    return solve


module.linalg.inv = _no_raise(np.linalg.inv)
module.linalg.cholesky = _no_raise(np.linalg.cholesky)
