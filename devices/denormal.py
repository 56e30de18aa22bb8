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
(`flush_this_thread`).  The numba pool's threads take the caller's bits for each block
(ops/jit_flush.py).  OpenBLAS's own helper threads, made when NumPy loaded it, keep
theirs: a product the CPU budget gives OpenBLAS's several threads flushes only on the
caller's share (where numba's pool runs, such products run on the pool).  GPU devices
are left as CuPy runs them (the stand-in's streams too).

Linux with glibc 2.25 or later on x86-64 only (libm's fegetmode/fesetmode, whose
`femode_t` holds x87's control word and MXCSR there: ~0.3 us a call, status flags left
alone); elsewhere nothing changes.  ASYNCFLOW_FLUSH_DENORMALS=0 turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

__all__ = ["BITS", "active", "enter", "flush_this_thread", "leave", "suspend"]

BITS = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)


class _Mode(ctypes.Structure):
    """glibc's x86-64 femode_t."""

    _fields_ = [("cw", ctypes.c_ushort), ("reserved", ctypes.c_ushort), ("mxcsr", ctypes.c_uint)]


def _load():
    """libm's fegetmode and fesetmode where femode_t is the layout above; else None."""
    if os.environ.get("ASYNCFLOW_FLUSH_DENORMALS", "") not in ("", "1"):
        return None
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        get, put = libm.fegetmode, libm.fesetmode
    except (OSError, AttributeError):  # (not glibc, or one before 2.25)
        return None
    get.argtypes = put.argtypes = [ctypes.POINTER(_Mode)]
    get.restype = put.restype = ctypes.c_int
    mode = _Mode()
    if ctypes.sizeof(_Mode) != 8 or get(mode) != 0:
        return None
    # x87's exception masks (the control word's low six bits) and MXCSR's (bits 7-12)
    # are all set unless a program unmasked them: anything else is not this layout.
    if mode.cw & 0x3F != 0x3F or mode.mxcsr >> 16:
        return None
    return get, put


_fns = _load()
_tls = threading.local()


class _State:
    """The modes `enter` or `suspend` found, the ones it set, and whether this thread's
    `enter` holds them now."""

    __slots__ = ("saved", "set", "busy")

    def __init__(self):
        self.saved, self.set, self.busy = _Mode(), _Mode(), False


def active() -> bool:
    """Whether kernels run with denormals flushed here (the platform and the setting)."""
    return _fns is not None


def enter():
    """Flush denormals on this thread until `leave(token)`; the token is None when
    there is nothing to undo (already on, or not supported here)."""
    if _fns is None:
        return None
    state = getattr(_tls, "state", None)
    if state is None:
        state = _tls.state = _State()
    elif state.busy:  # (inside this thread's own scope, or a kernel-only thread)
        return None
    get, put = _fns
    saved = state.saved
    get(saved)
    if saved.mxcsr & BITS == BITS:
        return None
    state.set.cw = saved.cw
    state.set.mxcsr = saved.mxcsr | BITS
    put(state.set)
    state.busy = True
    return state


def suspend():
    """Keep denormals on this thread until `leave(token)` (None when they were kept
    already), also inside `enter`'s scope: for a value cached across steps, which must
    not depend on whether a step or the caller built it first."""
    if _fns is None:
        return None
    get, put = _fns
    token = _State()
    get(token.saved)
    if not token.saved.mxcsr & BITS:
        return None
    token.set.cw = token.saved.cw
    token.set.mxcsr = token.saved.mxcsr & ~BITS
    put(token.set)
    return token


def leave(token) -> None:
    """Put back the modes `enter` or `suspend` found (the status flags stay as they
    are: NumPy clears and reads them around each of its own calls)."""
    if token is not None:
        _fns[1](token.saved)
        token.busy = False


def flush_this_thread() -> None:
    """Flush denormals on this thread for good: for threads that only run kernels."""
    enter()
