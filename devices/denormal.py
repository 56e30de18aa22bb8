"""Denormal floats flushed to zero while kernels run, as TF's CPU kernels flush them.

TF runs every kernel with the CPU's flush-to-zero and denormals-are-zero modes on (its
executor sets them around each node, and its intra-op threads keep them for life), so a
float32 or float64 result below the smallest normal number is 0, and a denormal input
counts as 0: `tf.constant(1e-38) * 0.01` is 0.0 in a TF1 session, where NumPy gives
1e-40.  Besides the numbers, it is speed: x86 cores take a slow path of ~100 cycles for
each denormal operand or result.  A GAN whose discriminator saturates makes them by the
thousand (the tutorial GAN's step at batch 32: 8.3 ms with them, 3.9 ms flushed).

The modes are bits of a register of each thread (x86's MXCSR: FTZ, bit 15, and DAZ, bit
6).  The step's driver runs kernels on the caller's thread, which also runs the user's
own code (an event loop's other tasks, NumPy between steps), so there they are scoped:
`enter()` turns them on and returns what `leave()` restores, around each stretch a
driver runs (asyncflow/executor.py).  Threads of ours that only run kernels (the CPU
device's workers, `parallel_for`'s helpers) turn them on for good at their start
(`flush_this_thread`).  GPU devices are left as CuPy runs them (the stand-in's streams
too).  The numba pool's threads take the caller's
bits for each block (ops/jit_flush.py).  OpenBLAS's own helper threads, made when NumPy
loaded it, keep theirs: a product the CPU budget gives OpenBLAS's several threads flushes
only on the caller's share (where numba's pool runs, such products run on the pool).

Linux with glibc on x86-64 only (the register's place in `fenv_t`); elsewhere nothing
changes.  ASYNCFLOW_FLUSH_DENORMALS=0 turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

__all__ = ["BITS", "active", "enter", "flush_this_thread", "leave", "suspend"]

BITS = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)
_ENV_BYTES = 32  # glibc's x86-64 fenv_t: the x87 environment (28 bytes), then MXCSR
_MXCSR_AT = 28


def _load():
    """libm's fegetenv and fesetenv, where fenv_t is glibc's x86-64 layout; else None."""
    if os.environ.get("ASYNCFLOW_FLUSH_DENORMALS", "") not in ("", "1"):
        return None
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        get, put = libm.fegetenv, libm.fesetenv
    except (OSError, AttributeError):
        return None
    get.argtypes = put.argtypes = [ctypes.c_void_p]
    get.restype = put.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(64)
    if get(buf) != 0:
        return None
    mxcsr = int.from_bytes(buf.raw[_MXCSR_AT : _MXCSR_AT + 4], "little")
    # The x87 control word opens the environment and MXCSR's exception masks (bits 7-12)
    # are all set unless a program unmasked them: anything else is not the layout above.
    if mxcsr >> 16 or int.from_bytes(buf.raw[:2], "little") & 0x3F != 0x3F:
        return None
    return get, put


_fns = _load()
_tls = threading.local()


def active() -> bool:
    """Whether kernels run with denormals flushed here (the platform and the setting)."""
    return _fns is not None


def _mxcsr(buf) -> int:
    return int.from_bytes(buf.raw[_MXCSR_AT : _MXCSR_AT + 4], "little")


def enter():
    """Flush denormals on this thread until `leave(token)`; the token is None when
    there is nothing to undo (already on, or not supported here)."""
    if _fns is None:
        return None
    get, put = _fns
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    get(saved)
    mxcsr = _mxcsr(saved)
    if mxcsr & BITS == BITS:
        return None
    on = getattr(_tls, "on", None)
    if on is None:
        on = _tls.on = ctypes.create_string_buffer(_ENV_BYTES)
    ctypes.memmove(on, saved, _ENV_BYTES)
    on[_MXCSR_AT : _MXCSR_AT + 4] = (mxcsr | BITS).to_bytes(4, "little")
    put(on)
    return saved


def leave(token) -> None:
    """Put back the modes `enter` found (with the status flags of that moment: NumPy
    clears and reads them around each of its own calls, nothing else keeps them)."""
    if token is not None:
        _fns[1](token)


def suspend():
    """Keep denormals on this thread until `leave(token)` (the token None when they
    were kept already): for a value cached across steps, which must not depend on
    whether a step or the caller built it first."""
    if _fns is None:
        return None
    get, put = _fns
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    get(saved)
    mxcsr = _mxcsr(saved)
    if not mxcsr & BITS:
        return None
    off = ctypes.create_string_buffer(_ENV_BYTES)
    ctypes.memmove(off, saved, _ENV_BYTES)
    off[_MXCSR_AT : _MXCSR_AT + 4] = (mxcsr & ~BITS).to_bytes(4, "little")
    put(off)
    return saved


def flush_this_thread() -> None:
    """Flush denormals on this thread for good: for threads that only run kernels."""
    enter()
