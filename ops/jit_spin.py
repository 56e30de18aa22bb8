"""How long one round of GNU OpenMP's wait loop takes on this CPU (ops/jit_threads.py
turns its spin time into GOMP_SPINCOUNT with it).

libgomp's idle thread spins `GOMP_SPINCOUNT` rounds of an atomic (relaxed) load of the
word it waits on and a `pause`, then sleeps on a futex.  `pause` takes ~140 cycles on
Skylake's server cores and far fewer on other x86 cores (~10.8 ns a round measured on
the 2-vCPU Xeon LLVM reads as Rocket Lake, 2026-12-04), so a fixed count is a spin time
that differs severalfold between machines.  `seconds_per_round` times the same round
here: the load, the compare and the `pause`, compiled by numba (imported by the caller).
x86-64 only: elsewhere libgomp's round is another instruction.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["seconds_per_round"]


@intrinsic
def _round(typingctx, address):
    """libgomp's round: the word at `address` loaded atomically (relaxed), a `pause`;
    the word."""

    def codegen(context, builder, sig, args):
        word = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        value = builder.load_atomic(word, "monotonic", 4)
        pause = ir.FunctionType(ir.VoidType(), [])
        builder.call(
            cgutils.get_or_insert_function(builder.module, pause, "llvm.x86.sse2.pause"), []
        )
        return builder.zext(value, ir.IntType(64))

    return types.int64(types.int64), codegen


@numba.njit(types.int64(types.int64, types.int64), nogil=True, cache=True)
def _spin(address, rounds):
    for i in range(rounds):
        if _round(address) != 0:  # (never here: the word stays 0)
            return i
    return rounds


def seconds_per_round(rounds: int = 20_000, tries: int = 5) -> float:
    """The fastest of `tries` timings of `rounds` rounds, per round (a preempted try
    only reads longer)."""
    word = np.zeros(16, np.int32)  # (its own cache line's start, as libgomp's word)
    _spin(word.ctypes.data, 100)  # (compiled or loaded from numba's cache before timing)
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        _spin(word.ctypes.data, rounds)
        best = min(best, time.perf_counter() - start)
    return best / rounds
