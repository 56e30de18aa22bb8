"""Prototype, for A/B runs only (issue 13's MLP gap): OpenBLAS's second job on a helper of ours.

NumPy's OpenBLAS (0.3.31) lets a program run its threaded jobs itself
(`openblas_set_threads_callback_function`).  `install()` hands it a numba cfunc that runs
job 0 on the calling thread and job 1 on one helper thread, which waits in a compiled
loop without the GIL: it spins `BLAS_CALLBACK_SPIN` sched_yield turns (300: ~0.1-0.3
ms) after each job, so a step's next product finds it running, then sleeps on a futex.
Two cores only (at most two jobs), no fork handling, not used by the package.  To run a
benchmark with it, put benchmarks/blas_callback_site on PYTHONPATH (its sitecustomize
installs it before NumPy runs BLAS), e.g.

    .venv/bin/python benchmarks/models/ab_env.py \\
        PYTHONPATH=$PWD/benchmarks/blas_callback_site --models mlp vae cnn
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_LIBS = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
_SPIN = int(os.environ.get("BLAS_CALLBACK_SPIN", "300"))

# The shared words (int64): 0 jobs posted, 1 jobs done, 2 job function, 3 job 1's data,
# 4 its extra argument, 5 helper asleep, 6 caller lock, 8 futex word (low 32 bits).
_state = np.zeros(16, np.int64)
_S = _state.ctypes.data
_syscall = ctypes.CDLL(None).syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long] * 6
_SYS_FUTEX, _SYS_YIELD = 202, 24  # x86-64
_WAIT, _WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE


@intrinsic
def _load(typingctx, addr):
    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "seq_cst", 8)

    return types.int64(types.int64), codegen


@intrinsic
def _store(typingctx, addr, value):
    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store_atomic(args[1], ptr, "seq_cst", 8)
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@intrinsic
def _cas(typingctx, addr, old, new):
    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        pair = builder.cmpxchg(ptr, args[1], args[2], "seq_cst", "seq_cst")
        return builder.zext(builder.extract_value(pair, 1), ir.IntType(64))

    return types.int64(types.int64, types.int64, types.int64), codegen


@intrinsic
def _run_job(typingctx, fn, position, job, extra):
    def codegen(context, builder, signature, args):
        i32, ptr = ir.IntType(32), ir.IntType(8).as_pointer()
        fn_type = ir.FunctionType(ir.VoidType(), [i32, ptr, i32])
        target = builder.inttoptr(args[0], fn_type.as_pointer())
        builder.call(
            target,
            [
                builder.trunc(args[1], i32),
                builder.inttoptr(args[2], ptr),
                builder.trunc(args[3], i32),
            ],
        )
        return context.get_dummy_value()

    return types.void(types.int64, types.int64, types.int64, types.int64), codegen


@numba.njit(nogil=True)
def _serve(s, spin):
    last = _load(s + 8)
    while True:
        turns = 0
        while _load(s) == last:
            turns += 1
            if turns > spin:
                _store(s + 40, 1)
                _store(s + 64, 0)
                if _load(s) == last:
                    _syscall(_SYS_FUTEX, s + 64, _WAIT, 0, 0, 0)
                _store(s + 40, 0)
                turns = 0
            else:
                _syscall(_SYS_YIELD, 0, 0, 0, 0, 0)
        posted = _load(s)
        _run_job(_load(s + 16), 1, _load(s + 24), _load(s + 32))
        _store(s + 8, posted)
        last = posted


def _make_callback(s):
    sig = types.void(types.int32, types.int64, types.int32, types.int64, types.int64, types.int32)

    @numba.cfunc(sig, nopython=True)
    def callback(sync, dojob, numjobs, elsize, jobdata, extra):
        if numjobs == 1:
            _run_job(dojob, 0, jobdata, extra)
            return
        while _cas(s + 48, 0, 1) == 0:  # one caller at a time
            _syscall(_SYS_YIELD, 0, 0, 0, 0, 0)
        _store(s + 16, dojob)
        _store(s + 24, jobdata + elsize)
        _store(s + 32, extra)
        posted = _load(s) + 1
        _store(s, posted)
        if _load(s + 40) == 1:
            _store(s + 64, 1)
            _syscall(_SYS_FUTEX, s + 64, _WAKE, 1, 0, 0)
        _run_job(dojob, 0, jobdata, extra)
        while _load(s + 8) != posted:
            _syscall(_SYS_YIELD, 0, 0, 0, 0, 0)
        _store(s + 48, 0)

    return callback


_callback = None


def install() -> None:
    """Route OpenBLAS's threaded jobs through the helper (once, before BLAS runs)."""
    global _callback
    if _callback is not None:
        return
    lib = ctypes.CDLL(sorted(glob.glob(os.path.join(_LIBS, "libscipy_openblas*.so")))[0])
    setter = lib.scipy_openblas_set_threads_callback_function64_
    setter.argtypes, setter.restype = [ctypes.c_void_p], None
    _callback = _make_callback(_S)
    threading.Thread(target=_serve, args=(_S, _SPIN), daemon=True, name="blas-callback").start()
    setter(_callback.address)
