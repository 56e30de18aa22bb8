"""The denormal modes (devices/denormal.py) inside numba code: the pool's blocks run
on GNU OpenMP's threads, which numba made from whichever thread first ran a parallel
region, so a block takes its caller's flush bits for its run and puts its thread's own
back after (`get()` read on the calling thread before the `prange`, `put(...)` in each
block).  Two instructions each (x86's stmxcsr and ldmxcsr), a few cycles.

`intrinsics(numba)` gives `(get, put, adopt)` to call from compiled code: `get()` the
MXCSR register as an int64, `put(value)` loads it, and `adopt(mode)` sets the flush
bits of `mode` (the caller's `get() & BITS`) and returns what `put` restores after.
Where denormals are not flushed (another CPU, or ASYNCFLOW_FLUSH_DENORMALS=0), `get`
gives 0 and `put` does nothing.
"""

from __future__ import annotations

from asyncflow.devices import denormal

__all__ = ["BITS", "intrinsics"]

BITS = denormal.BITS
_built: list = []


def intrinsics(numba):
    """(get, put, adopt), built once."""
    if not _built:
        get, put = _register(numba) if denormal.active() else _inert(numba)

        @numba.njit(nogil=True)
        def adopt(mode):
            saved = get()
            put((saved & ~BITS) | mode)
            return saved

        _built.append((get, put, adopt))
    return _built[0]


def _register(numba):
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i32, i64, p8 = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [p8])

    @intrinsic
    def get(typingctx):
        def codegen(context, builder, signature, args):
            slot = cgutils.alloca_once(builder, i32)
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.stmxcsr")
            builder.call(fn, [builder.bitcast(slot, p8)])
            return builder.zext(builder.load(slot), i64)

        return types.int64(), codegen

    @intrinsic
    def put(typingctx, value):
        def codegen(context, builder, signature, args):
            slot = cgutils.alloca_once(builder, i32)
            builder.store(builder.trunc(args[0], i32), slot)
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.ldmxcsr")
            builder.call(fn, [builder.bitcast(slot, p8)])
            return context.get_dummy_value()

        return types.void(types.int64), codegen

    return get, put


def _inert(numba):
    @numba.njit(nogil=True)
    def get():
        return 0

    @numba.njit(nogil=True)
    def put(value):
        pass

    return get, put
