"""Large host arrays from a pool: their pages stay warm from one step to the next.

A kernel whose output is large pays for fresh memory every step: glibc serves any
block over its mmap threshold (32 MiB at most; devices/cpu.py keep_freed_memory) with
a new mapping, whose pages fault in as the kernel writes them and go back to the OS
when the array is freed.  Measured on the 2-core project VM: `np.empty` and a write of
64 MiB took 10 ms median and 160-230 ms at worst (the host backing the pages), where
the [4096,1]x[1,4096] product of benchmarks/loop_bench.py wrote into a buffer kept
from the step before at 66-71 steps/s instead of 22-36.  TF's allocator (BFC) keeps
its memory for the same reason.

`empty(shape, dtype)` gives an array of at least MIN_BYTES from a kept buffer of the
same size when there is one, else from a new buffer: an anonymous memory map (page
aligned, asked for huge pages as NumPy asks for its large arrays; its pages fault in
where the kernel writes them, off the GIL, where a bytearray would be zeroed on the
allocating thread with the GIL held).  The array is built on the map
(`np.ndarray(buffer=...)`): NumPy stops collapsing a view's base at the first array
whose own base is of another type, so that array is the base of every view made from
it, and once it and all its views are garbage, a finalizer keeps the map for the next
`empty` of that size.  A buffer is reused only when no array can reach it:
nothing here reads reference counts.  Kept buffers total at most `kept_limit()` bytes
(ASYNCFLOW_HOST_POOL_MB, default 256; 0 turns the pool off); beyond it a returned
buffer is freed.

`owns_memory(x)`: whether `x` is an array that owns its memory (NumPy's, base None, or
one of this pool's), as opposed to a view of another array's memory: what buffer
forwarding and memory accounting ask.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["MIN_BYTES", "empty", "kept_bytes", "kept_limit", "owns_memory"]

# glibc's heap keeps smaller blocks warm already: its mmap threshold is fixed at 32 MiB
# (its largest) and it never trims (devices/cpu.py keep_freed_memory).
MIN_BYTES = 32 << 20
_DEFAULT_KEPT_MB = 256

_lock = threading.Lock()
_free: dict[int, list[mmap.mmap]] = {}  # nbytes -> kept buffers
_kept = 0  # bytes in _free
_ours: set[int] = set()  # ids of the buffers alive (in use or kept)
_limit: int | None = None
_HUGE = getattr(mmap, "MADV_HUGEPAGE", None)


def kept_limit() -> int:
    """The most bytes kept free (read once from ASYNCFLOW_HOST_POOL_MB)."""
    global _limit
    if _limit is None:
        env = os.environ.get("ASYNCFLOW_HOST_POOL_MB", "")
        try:
            mb = float(env) if env else _DEFAULT_KEPT_MB
        except ValueError:
            mb = _DEFAULT_KEPT_MB
        _limit = max(int(mb * (1 << 20)), 0)
    return _limit


def kept_bytes() -> int:
    """Bytes of buffers kept free now (statistics, tests)."""
    return _kept


def empty(shape, dtype) -> np.ndarray:
    """`np.empty(shape, dtype)`, from a kept buffer when it is large (see above)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape) if not isinstance(shape, int) else (int(shape),)
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes < MIN_BYTES or dtype.hasobject or not kept_limit():
        return np.empty(shape, dtype)
    global _kept
    raw = None
    with _lock:
        kept = _free.get(nbytes)
        if kept:
            raw = kept.pop()
            _kept -= nbytes
    if raw is None:
        raw = mmap.mmap(-1, nbytes)
        if _HUGE is not None:
            try:
                raw.madvise(_HUGE)
            except OSError:  # (a kernel without transparent huge pages)
                pass
        with _lock:
            _ours.add(id(raw))
    out = np.ndarray(shape, dtype, buffer=raw)  # out.base is raw; views' base is out
    weakref.finalize(out, _give_back, raw).atexit = False
    return out


def _give_back(raw: mmap.mmap) -> None:
    """The array built on `raw` and all its views are gone: keep `raw` for reuse, or
    free it when the kept bytes would pass the limit (any thread may run this)."""
    global _kept
    nbytes = len(raw)
    with _lock:
        if _kept + nbytes <= kept_limit():
            _free.setdefault(nbytes, []).append(raw)
            _kept += nbytes
            return
        _ours.discard(id(raw))


def owns_memory(x) -> bool:
    """Whether the NumPy array `x` owns its memory: NumPy's own (no base) or built by
    `empty` on a pool buffer; a view of either does not."""
    base = x.base
    if base is None:
        return True
    return type(base) is mmap.mmap and id(base) in _ours


def _clear() -> None:
    """Free every kept buffer (tests)."""
    global _kept, _limit
    with _lock:
        for kept in _free.values():
            for raw in kept:
                _ours.discard(id(raw))
        _free.clear()
        _kept = 0
        _limit = None
