"""GEMM with accumulation (C = alpha * op(A) @ op(B) + beta * C), from NumPy's own BLAS
(and Intel MKL's for calls on one thread, where the `mkl` extra is installed: below).

`np.matmul` always writes a fresh product, so `var -= lr * (a.T @ g)` costs a product
array, a scaled copy and a subtraction pass over memory.  BLAS's gemm does it in one
call, writing into `var`.  NumPy's wheels ship OpenBLAS (as `scipy_openblas64_`, with
64-bit integers); we call that same library, already loaded by NumPy, through ctypes,
so that one thread pool serves both.  When it cannot be found (another NumPy build),
`available()` is False and callers keep their NumPy path.

A large product is split into blocks of C's rows (or columns, for a short C), each one
gemm on one BLAS thread, shared by the caller and the CPU budget's helper threads
(`cpu_budget.parallel_for`): a helper the OS does not run leaves its blocks to the
caller, where OpenBLAS's own threads split a product statically and spin, then wait for
a partner another process has preempted (issue 21: the models' slowdown beside a busy
process).  So a product is split only while another process's thread is runnable and
a core it leaves free is there for the helper besides the caller's
(`cpu_budget.split_allowed`; never on two cores beside one busy process, where the
helper waited on the busy core's run queue): on a free machine OpenBLAS's own threads
are faster (each block packs the other operand again), and the split's helper would take turns with
OpenBLAS's idle thread, so there the CPU budget's two ways are one BLAS thread and all
of them; "all of them", for a float32 product up to _POOL_MAX_MACS where numba's pool
runs (ops/jit_threads.py), means blocks on the pool's threads, each on one BLAS thread
(see "products on the numba pool" below).  While other processes' threads fill every
core the product is not split either (`cpu_budget.threads_blocks`): a helper that took a
block and was preempted would keep the caller waiting.  The split is over M or N, never
over the summed K, but whether a block's elements get one whole call's bits depends on
the CPU's kernels: on OpenBLAS 0.3.31's SkylakeX kernels they did; on its Haswell
kernels (an AMD EPYC) a [512,300]x[300,256] product split in two halves differed from
one call's in 3% of its elements, and one call on two threads from one on one thread in
6%.  So a kind of call whose measured choice flips between the ways can give a model's
loss different last digits from run to run; with TF_DETERMINISTIC_OPS=1
(`cpu_budget.deterministic`) a product is never split and runs on one BLAS thread.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import numpy as np

from asyncflow import tf_logging
from asyncflow.devices import cpu_budget, host_pool
from asyncflow.ops import jit_flush, jit_loops, jit_threads

__all__ = ["available", "gemm_into", "matmul", "matmul_sum", "warm"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_fns: dict = {}
_batch_fns: dict = {}  # dtype -> cblas_?gemm_batch (OpenBLAS 0.3.30 and later)


# -- MKL for one thread ------------------------------------------------------------------
#
# On an Intel Xeon with AVX-512 (Sapphire Rapids, 2 vCPUs; 2026-12-02) OpenBLAS 0.3.31
# picks its SkylakeX kernels, and MKL's sequential sgemm ran the models' products 1.1-2x
# faster on one thread (one process, alternating: [128,784]x[784,256] 601 against 458
# us, [32,256]x[784,256]^T 373 against 189, [64,784]x[784,512] 855 against 659), about
# as fast as OpenBLAS on two threads; MKL on two threads (its OpenMP beside numba's
# GNU OpenMP) was slower than on one.  So MKL takes the calls the CPU budget gives one
# thread (its measured choice per kind of call, or another process holding the other
# core) and the single-thread calls of the pool's blocks and pairs; calls given several
# threads keep OpenBLAS's own threads, and TF_DETERMINISTIC_OPS=1 keeps OpenBLAS on one
# thread (its bits, as before).  The models' steps (benchmarks/models/ab_env.py, this
# against ASYNCFLOW_BLAS=openblas, 3 rounds): gan 1.11x, vae 1.07x, autoencoder 1.14x,
# mlp 1.19x, lstm_static 1.26x faster.  MKL only, for every call, lost on lstm_static
# (0.83x) and the VAE (0.95x): their products gained more from OpenBLAS's two threads.
# MKL is used where the `mkl` extra installed its runtime (`pip install asyncflow[mkl]`);
# ASYNCFLOW_BLAS=openblas: NumPy's OpenBLAS for every call.  A kind of call whose
# measured choice flips between one thread and several also flips library, so its last
# bits may differ between runs (as between OpenBLAS's one and two threads before).
_WANT = os.environ.get("ASYNCFLOW_BLAS", "").strip().lower()
_MKL_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL (mkl_service.h)
_one_fns: dict = {}  # dtype -> MKL's cblas ?gemm (64-bit integers), on its sequential layer
_ONE_ADDRESSES: dict = {}  # dtype -> its address, for the compiled calls


def _typed(pairs) -> dict:
    """{dtype: cblas ?gemm with 64-bit integers, its ctypes signature set} of
    (dtype, function, scalar type) triples."""
    i64, ptr, enum = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    out = {}
    for dtype, fn, scalar in pairs:
        fn.restype = None
        fn.argtypes = [enum, enum, enum, i64, i64, i64, scalar, ptr, i64, ptr, i64]
        fn.argtypes += [scalar, ptr, i64]
        out[dtype] = fn
    return out


def _load_mkl() -> None:
    """MKL's cblas on its sequential layer, where the `mkl` package put its runtime
    library beside this Python's."""
    for path in sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*"))):
        try:
            lib = ctypes.CDLL(path)
            layer = lib.MKL_Set_Threading_Layer
            pairs = (
                (np.dtype(np.float32), lib.cblas_sgemm_64, ctypes.c_float),
                (np.dtype(np.float64), lib.cblas_dgemm_64, ctypes.c_double),
            )
        except (OSError, AttributeError):
            continue
        layer.restype, layer.argtypes = ctypes.c_int, [ctypes.c_int]
        if layer(_MKL_SEQUENTIAL) != _MKL_SEQUENTIAL:  # (another user chose a layer first)
            continue
        _one_fns.update(_typed(pairs))
        return


# -- oneDNN's sgemm for one thread, where MKL is not installed ---------------------------
#
# oneDNN (a dependency on Linux x86-64 for its convolutions, ops/onednn.py) exports its
# own sgemm, whose one-thread speed is MKL's: on the 2-vCPU Intel Xeon (AVX-512), hot,
# medians of 30 alternating calls, us, oneDNN / MKL / OpenBLAS: [128,784]x[784,256]
# 264 / 267 / 307, [128,256]x[784,256]^T 267 / 269 / 336, [784,128]^T x[128,256] 270 /
# 271 / 283, [32,784]x[784,256] 70 / 72 / 103, [128,100]x[100,256] 38 / 37 / 45.  So
# without the 700 MB `mkl` extra, float32 calls on one thread take oneDNN's (float64
# keeps OpenBLAS: oneDNN has no dgemm).  Its signature is not cblas's, and its thread
# count is GNU OpenMP's for the calling thread: a compiled function of cblas's signature
# (numba's cfunc, made with the gemm call's other compiled code, on its background
# thread) sets that count to one and calls it, so every path that calls the one-thread
# gemm (ctypes, the compiled call, the pool's blocks) calls it.  Inside a pool's block
# (a parallel region) oneDNN runs on that thread alone anyway.  ASYNCFLOW_BLAS=onednn
# takes it even where MKL is installed (A/B).
_ONEDNN_ONE = [False]  # [whether oneDNN's sgemm is the one-thread gemm once compiled]


def _onednn_sgemm(numba):
    """(cfunc of cblas_sgemm's signature calling oneDNN's sgemm on one thread, its
    address), or None where oneDNN is not loaded."""
    from numba import types

    from asyncflow.ops import onednn

    lib = onednn.library()
    if lib is None:
        return None
    i8, i32, i64, ptr = ctypes.c_int8, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    sgemm = lib.dnnl_sgemm
    sgemm.restype = i32
    sgemm.argtypes = [i8, i8, i64, i64, i64, ctypes.c_float, ptr, i64, ptr, i64]
    sgemm.argtypes += [ctypes.c_float, ptr, i64]
    one_thread = ctypes.CDLL("libgomp.so.1").omp_set_num_threads
    one_thread.restype, one_thread.argtypes = None, [i32]
    n, t = ord("N"), ord("T")
    t32, t64, f32, vp = types.int32, types.int64, types.float32, types.voidptr
    signature = types.void(t32, t32, t32, t64, t64, t64, f32, vp, t64, vp, t64, f32, vp, t64)

    def call(layout, ta, tb, m, n_, k, alpha, a, lda, b, ldb, beta, c, ldc):
        one_thread(1)
        sgemm(t if ta == _TRANS else n, t if tb == _TRANS else n, m, n_, k, alpha, a, lda,
              b, ldb, beta, c, ldc)  # fmt: skip

    compiled = numba.cfunc(signature, nogil=True)(call)
    return compiled, compiled.address


def library() -> str:
    """Whose gemm the calls here make: "openblas", "openblas+mkl" or "openblas+onednn"
    (MKL's or oneDNN's for calls on one thread), or "" (none found: callers keep NumPy's
    matmul)."""
    if not _fns:
        return ""
    if not _one_fns:
        return "openblas"
    return "openblas+onednn" if _ONEDNN_ONE[0] else "openblas+mkl"


def _load() -> None:
    if os.environ.get("ASYNCFLOW_NO_FUSED_GEMM", "") not in ("", "0"):
        return
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "libscipy_openblas64_*.so"))):
        try:
            lib = ctypes.CDLL(path)
            pairs = (
                (np.dtype(np.float32), lib.scipy_cblas_sgemm64_, ctypes.c_float),
                (np.dtype(np.float64), lib.scipy_cblas_dgemm64_, ctypes.c_double),
            )
        except (OSError, AttributeError):
            continue
        _fns.update(_typed(pairs))
        if _WANT not in ("openblas", "onednn"):
            _load_mkl()
        if os.environ.get("ASYNCFLOW_GEMM_BATCH", "") not in ("", "1"):
            return
        for dtype, name in ((np.float32, "scipy_cblas_sgemm_batch64_"),
                            (np.float64, "scipy_cblas_dgemm_batch64_")):  # fmt: skip
            fn = getattr(lib, name, None)
            if fn is not None:
                ptr = ctypes.c_void_p
                fn.restype = None
                fn.argtypes = [ctypes.c_int] + [ptr] * 13 + [ctypes.c_int64, ptr]
                _batch_fns[np.dtype(dtype)] = fn
        return


_load()


# -- the call itself, compiled --------------------------------------------------------
#
# Through ctypes a gemm call costs ~8 us more than NumPy's matmul of the same product
# on the project machine (three `.ctypes.data` look-ups at ~2.4 us each and the
# foreign call's argument conversions), most of a small product's time: the MLP of
# examples/train_digits.py makes five a step of 20-60 us each.  Compiled by numba
# (where installed), a function taking the arrays themselves calls the same cblas
# function at its address (an argument, so that numba caches the compiled code on
# disk: no ctypes object is baked into it): ~2.5-3 us in all, the GIL released as
# ctypes releases it.  Until it is compiled (on a background thread, jit_loops; ~0.5 s
# once, then loaded from numba's cache), and for arrays of a layout its signatures
# leave out, ctypes makes the call.


def _gemm_intrinsic(real):
    """`at(address, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)`: the cblas
    ?gemm (64-bit integers) at `address` called with C's row-major order; `real` the
    LLVM type of its alpha and beta (float or double)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    i32, i64, p8 = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(
        ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, p8, i64, p8, i64, real, p8, i64]
    )
    narrow = isinstance(real, ir.FloatType)

    @intrinsic
    def at(typingctx, address, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc):
        sig = types.void(address, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)

        def codegen(context, builder, signature, args):
            (address, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc) = args
            scalar = (lambda x: builder.fptrunc(x, real)) if narrow else (lambda x: x)
            builder.call(
                builder.inttoptr(address, fnty.as_pointer()),
                [
                    ir.Constant(i32, _ROW_MAJOR), builder.trunc(ta, i32),
                    builder.trunc(tb, i32), m, n, k, scalar(alpha),
                    builder.inttoptr(pa, p8), lda, builder.inttoptr(pb, p8), ldb,
                    scalar(beta), builder.inttoptr(pc, p8), ldc,
                ],
            )  # fmt: skip
            return context.get_dummy_value()

        return sig, codegen

    return at


def _call_float32(address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c):
    _sgemm_at(address, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
              c.ctypes.data, n)  # fmt: skip


def _call_float64(address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c):
    _dgemm_at(address, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
              c.ctypes.data, n)  # fmt: skip


# -- products on the numba pool (ops/jit_threads.py) -----------------------------------
#
# A product granted `parts` threads runs as that many blocks of C's rows (by_rows) or
# columns in a `prange`, each block one gemm call on one BLAS thread: each element is
# one thread's whole sum over K, the same bits as one call on one thread where the CPU's
# kernels give a block one call's bits (the models' shapes on OpenBLAS 0.3.31's
# SkylakeX kernels did; tests/ops/test_jit_pool.py checks values to rounding).
# Two threads so took [128,156]x[156,512] 118-121 us against 211 on one, and the
# GAN's [128,784]x[784,256] 261 against 504 (OpenBLAS's own two threads: 130-147 and
# 280-320).  A pair of independent products (`gemm_pair`) runs one on each thread.


def _blocks_float32(address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, parts, by_rows):
    pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
    mode = _mx_get() & _FLUSH  # the caller's denormal modes, for each block's thread
    for p in prange(parts):
        saved = _mx_adopt(mode)
        if by_rows:  # rows r0:r1 of C: rows of op(a), all of op(b)
            r0, r1 = p * m // parts, (p + 1) * m // parts
            off = r0 if ta == _TRANS else r0 * lda
            _sgemm_at(address, ta, tb, r1 - r0, n, k, alpha, pa + off * 4, lda, pb, ldb, beta,
                      pc + r0 * n * 4, n)  # fmt: skip
        else:  # columns c0:c1 of C: all of op(a), columns of op(b)
            c0, c1 = p * n // parts, (p + 1) * n // parts
            off = c0 * ldb if tb == _TRANS else c0
            _sgemm_at(address, ta, tb, m, c1 - c0, k, alpha, pa, lda, pb + off * 4, ldb, beta,
                      pc + c0 * 4, n)  # fmt: skip
        _mx_put(saved)


def _pair_float32(address, ta1, tb1, k1, a1, b1, beta1, c1, ta2, tb2, k2, a2, b2, beta2, c2):
    mode = _mx_get() & _FLUSH
    for p in prange(2):
        saved = _mx_adopt(mode)
        if p == 0:
            m, n = c1.shape
            _sgemm_at(address, ta1, tb1, m, n, k1, 1.0, a1.ctypes.data, a1.shape[1],
                      b1.ctypes.data, b1.shape[1], beta1, c1.ctypes.data, n)  # fmt: skip
        else:
            m, n = c2.shape
            _sgemm_at(address, ta2, tb2, m, n, k2, 1.0, a2.ctypes.data, a2.shape[1],
                      b2.ctypes.data, b2.shape[1], beta2, c2.ctypes.data, n)  # fmt: skip
        _mx_put(saved)


def _blocks_act_float32(
    address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, parts, by_rows, act, features
):
    """`_blocks_float32`, then an activation over each block on the thread that wrote
    it, in place while the block is in its cache: act 1 TF's sigmoid, 2 a ReLU, 3 the
    ReLU gradient's mask by `features` (of c's shape; else any array).  Each a compiled
    loop of its own (`_build_epilogues`: in a `prange` body an inline function's loop
    did not vectorize)."""
    pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
    flat = c.reshape(m * n)
    feat = features.reshape(features.size)
    mode = _mx_get() & _FLUSH
    for p in prange(parts):
        saved = _mx_adopt(mode)
        if by_rows:
            r0, r1 = p * m // parts, (p + 1) * m // parts
            off = r0 if ta == _TRANS else r0 * lda
            _sgemm_at(address, ta, tb, r1 - r0, n, k, alpha, pa + off * 4, lda, pb, ldb, beta,
                      pc + r0 * n * 4, n)  # fmt: skip
            _act_flat(flat, feat, act, r0 * n, r1 * n)
        else:
            c0, c1 = p * n // parts, (p + 1) * n // parts
            off = c0 * ldb if tb == _TRANS else c0
            _sgemm_at(address, ta, tb, m, c1 - c0, k, alpha, pa, lda, pb + off * 4, ldb, beta,
                      pc + c0 * 4, n)  # fmt: skip
            for r in range(m):
                _act_flat(flat, feat, act, r * n + c0, r * n + c1)
        _mx_put(saved)


def _build_pool(numba):
    """The pool's float32 functions (parallel, one signature each: read-only a and b
    take writable arrays too), run once here so that numba's threading layer starts on
    this thread and `jit_threads.note_layer` learns whether it spins; {} where it does
    not (the pool would wake sleeping threads: ops/jit_threads.py)."""
    from numba import types

    ro = types.Array(types.float32, 2, "C", readonly=True)
    rw = types.Array(types.float32, 2, "C")
    i64, f64, b1 = types.int64, types.float64, types.boolean
    options = dict(nogil=True, cache=True, parallel=True)
    address = _ADDRESSES[np.dtype(np.float32)]
    x, y = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    with jit_threads.launching():  # (numba loads its threading layer as it compiles)
        blocks = numba.njit(
            [types.void(i64, i64, i64, i64, i64, i64, f64, ro, i64, ro, i64, f64, rw, i64, b1)],
            **options,
        )(_blocks_float32)
        blocks(address, _NO_TRANS, _NO_TRANS, 2, 2, 2, 1.0, x, 2, x, 2, 0.0, y, 2, True)
    pair = numba.njit(
        [types.void(i64, i64, i64, i64, ro, ro, f64, rw, i64, i64, i64, ro, ro, f64, rw)],
        **options,
    )(_pair_float32)
    blocks.disable_compile()
    pair.disable_compile()
    pair(address, _NO_TRANS, _NO_TRANS, 2, x, x, 0.0, y, _NO_TRANS, _NO_TRANS, 2, x, x, 0.0, y)
    if not jit_threads.note_layer(numba):
        return {}
    return {"blocks": blocks, "pair": pair}


def _build_gemm(numba):
    from llvmlite import ir
    from numba import types

    global _sgemm_at, _dgemm_at, prange, _mx_get, _mx_put, _mx_adopt  # (compiled against)
    _sgemm_at = _gemm_intrinsic(ir.FloatType())
    _mx_get, _mx_put, _mx_adopt = jit_flush.intrinsics(numba)
    _dgemm_at = _gemm_intrinsic(ir.DoubleType())
    prange = numba.prange
    loops = {}
    for dtype, fn in _fns.items():
        nb = numba.from_dtype(dtype)
        arrays = [types.Array(nb, 2, "C"), types.Array(nb, 2, "C", readonly=True)]
        i64, f64, out = types.int64, types.float64, types.Array(nb, 2, "C")
        signatures = [
            types.void(i64, i64, i64, i64, i64, i64, f64, a, i64, b, i64, f64, out)
            for a in arrays
            for b in arrays
        ]
        call = _call_float32 if dtype == np.float32 else _call_float64
        compiled = numba.njit(signatures, nogil=True, cache=True)(call)
        compiled.disable_compile()  # (another layout: TypeError, then ctypes)
        loops[_NAMES[dtype]] = compiled
        _ADDRESSES[dtype] = ctypes.cast(fn, ctypes.c_void_p).value
        if dtype in _one_fns:
            _ONE_ADDRESSES[dtype] = ctypes.cast(_one_fns[dtype], ctypes.c_void_p).value
    f32 = np.dtype(np.float32)
    if f32 in _fns and not _one_fns and _WANT != "openblas":
        made = _onednn_sgemm(numba)
        if made is not None:
            loops["onednn_sgemm"], address = made
            _ONE_ADDRESSES[f32] = address
            _one_fns.update(_typed([(f32, made[0].ctypes, ctypes.c_float)]))
            _ONEDNN_ONE[0] = True
    if np.dtype(np.float32) in _fns and jit_threads.may_launch():
        try:
            loops.update(_build_pool(numba))
        except Exception as exc:  # (no parallel layer here: products stay as they were)
            tf_logging.warning("asyncflow: numba's parallel products failed: %r", exc)
    return loops


def _pool(name: str, dtype, free: bool = False):
    """The pool's function `name` where a float32 call that the CPU budget granted
    several threads may run on numba's pool now (ops/jit_threads.py), with the calling
    thread's pool count set to those threads; else None.

    `free`: also a call granted one thread while the budget has two free now
    (`threads_now`; not under TF_DETERMINISTIC_OPS=1, where every call gets one).  The
    budget gives a call measured under its small-call time one thread, as OpenBLAS's
    sleeping threads cost more to wake than they save there; a pair of independent
    products on the pool's spinning threads still gains (the dynamic_rnn tutorial's
    cell, [128,256]x[65,256]^T beside [65,128]x[128,256]: 90 us against 133 for the two
    one after the other, 161 for OpenBLAS's batched call on one thread)."""
    if dtype != np.float32 or not jit_threads.usable():
        return None
    fn = _JIT.get(name)
    if fn is None:
        return None
    n = cpu_budget.granted()
    if n >= 2:
        jit_threads.threads(n)
        return fn
    if free and not cpu_budget.deterministic() and jit_threads.free_threads(2) >= 2:
        return fn
    return None


_sgemm_at = _dgemm_at = prange = _mx_get = _mx_put = _mx_adopt = None
_FLUSH = jit_flush.BITS
_ADDRESSES: dict = {}  # dtype -> the address of its cblas function
_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
# ASYNCFLOW_GEMM_JIT=0: every call through ctypes (to measure what the compiled call buys).
_COMPILED_CALL = os.environ.get("ASYNCFLOW_GEMM_JIT", "") != "0"
_JIT = jit_loops.BackgroundLoops("the gemm call", _build_gemm)


def _sigmoid_flat_float32(x):
    """TF's sigmoid over x in place (elements of whole packets: see `gemm_epilogue`)."""
    for i in range(x.size):
        x[i] = _sigmoid32(x[i])


def _relu_flat_float32(x):
    """np.maximum(x, 0) in place: x where not below 0 (NaN and -0.0 stay)."""
    zero = np.float32(0)
    for i in range(x.size):
        v = x[i]
        x[i] = zero if v < zero else v


def _mask_flat_float32(x, f):
    """TF's ReluGradFunctor in place: x * (f > 0), a multiply by 1 or 0 (inf * 0 is
    NaN, as `np.multiply(x, f > 0)`)."""
    zero = np.float32(0)
    for i in range(x.size):
        x[i] = x[i] * np.float32(f[i] > zero)


def _act_flat_float32(flat, feat, act, lo, hi):
    if act == _ACT_SIGMOID:
        _sigmoid_flat(flat[lo:hi])
    elif act == _ACT_RELU:
        _relu_flat(flat[lo:hi])
    else:
        _mask_flat(flat[lo:hi], feat[lo:hi])


def _identity32(x):
    return x


def _build_epilogues(numba):
    """`_blocks_act_float32` and its loops compiled, once the gemm's pool functions are
    (it calls the same gemm); {} where they are not: the callers' steps stay.  TF's
    sigmoid is the compiled loops' inline function where it passed its check
    (fused_elementwise_sigmoid); else "sigmoid" is False and only the ReLUs run here."""
    from numba import types

    from asyncflow.ops import fused_elementwise_sigmoid

    global _sigmoid32, _sigmoid_flat, _relu_flat, _mask_flat, _act_flat
    if not _JIT.warm() or _JIT.get("blocks") is None:
        return {}
    sigmoid = fused_elementwise_sigmoid.check()
    if sigmoid:
        _sigmoid32 = fused_elementwise_sigmoid.namespace()["_sigmoid32"]
    else:  # (never called: gemm_epilogue asks for "sigmoid" first)
        _sigmoid32 = numba.njit(inline="always")(_identity32)
    v1 = types.Array(types.float32, 1, "C")
    r1 = types.Array(types.float32, 1, "C", readonly=True)
    i64 = types.int64
    # (no division check, error_model="numpy": the loops vectorize)
    options = dict(nogil=True, cache=True, error_model="numpy")
    _sigmoid_flat = numba.njit([types.void(v1)], **options)(_sigmoid_flat_float32)
    _relu_flat = numba.njit([types.void(v1)], **options)(_relu_flat_float32)
    _mask_flat = numba.njit([types.void(v1, r1)], **options)(_mask_flat_float32)
    _act_flat = numba.njit([types.void(v1, r1, i64, i64, i64)], **options)(_act_flat_float32)
    for fn in (_sigmoid_flat, _relu_flat, _mask_flat, _act_flat):
        fn.disable_compile()
    ro = types.Array(types.float32, 2, "C", readonly=True)
    rw = types.Array(types.float32, 2, "C")
    f64, b1 = types.float64, types.boolean
    blocks = numba.njit(
        [
            types.void(
                i64, i64, i64, i64, i64, i64, f64, ro, i64, ro, i64, f64, rw, i64, b1, i64, ro
            )
        ],
        nogil=True,
        cache=True,
        parallel=True,
    )(_blocks_act_float32)
    blocks.disable_compile()
    x, y = np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)
    address = _ADDRESSES[np.dtype(np.float32)]
    for by_rows in (True, False):
        for act in (_ACT_RELU, _ACT_MASK) + ((_ACT_SIGMOID,) if sigmoid else ()):
            blocks(address, _NO_TRANS, _NO_TRANS, 8, 8, 8, 1.0, x, 8, x, 8, 0.0, y, 2, by_rows,
                   act, x)  # fmt: skip
    loops = {"blocks": blocks, "sigmoid": sigmoid}
    if sigmoid:
        _sigmoid_flat(y.reshape(-1))
        loops["sigmoid_flat"] = _sigmoid_flat
    return loops


_ACT_SIGMOID, _ACT_RELU, _ACT_MASK = 1, 2, 3
_ACTS = {"sigmoid": _ACT_SIGMOID, "relu": _ACT_RELU, "relu_grad": _ACT_MASK}
_sigmoid32 = _sigmoid_flat = _relu_flat = _mask_flat = _act_flat = None
_EPILOGUES = jit_loops.BackgroundLoops("the gemm's epilogues", _build_epilogues)
# False: no activation in the pool's blocks (A/B: benchmarks/models/ab_inproc.py --attr
# asyncflow.ops.blas:_EPILOGUES_ON=False), or no ReLU nor its gradient's mask there
# (_RELU_EPILOGUES=False); the callers' two steps run.
_EPILOGUES_ON = True
_RELU_EPILOGUES = True


def warm_epilogues(timeout: float | None = 120.0) -> bool:
    """Compile `gemm_epilogue`'s loops now and wait (tests, benchmarks)."""
    return _EPILOGUES.warm(timeout)


def sigmoid_in_place(c) -> bool:
    """c = sigmoid(c), TF's float32 sigmoid as `gemm_epilogue` applies it, on the
    calling thread (a compiled loop): whether it ran (float32, C-contiguous, whole
    packets, the loop compiled); else c is untouched."""
    if c.dtype != np.float32 or c.size % 8 or not c.flags.c_contiguous:
        return False
    fn = _EPILOGUES.get("sigmoid_flat")
    if fn is None:
        return False
    fn(c.reshape(-1))
    return True


def gemm_epilogue(
    c, a, b, trans_a: bool, trans_b: bool, alpha: float, beta: float, act: str, features=None
) -> bool:
    """c = act(alpha * op(a) @ op(b) + beta * c) in place, the activation applied to
    each of the pool's blocks by the thread that computed it, while the block is in its
    cache: whether it ran.  `act`: "sigmoid" (TF's float32 sigmoid, ops/elementwise.py),
    "relu" (np.maximum(x, 0)) or "relu_grad" (x * (features > 0), TF's ReluGrad;
    `features` float32 of c's shape).  Only where `gemm_into` would run the product as
    the pool's blocks now (the same blocks: the same bits as the product and then the
    activation's kernel), and for "sigmoid" where every element is in one of TF's whole
    packets (c.size a multiple of 8: the last size % 8 take Eigen's scalar path); else
    False, with c untouched: the caller runs its two steps."""
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if c.dtype != np.float32 or not (m and n and k) or not _EPILOGUES_ON:
        return False
    if act == "sigmoid" and c.size % 8 or act != "sigmoid" and not _RELU_EPILOGUES:
        return False
    if act == "relu_grad" and (
        type(features) is not np.ndarray
        or features.dtype != np.float32
        or features.shape != c.shape
        or not features.flags.c_contiguous
    ):
        return False
    if min(m, n) < _POOL_MIN_SIDE or m * n * k > _POOL_MAX_MACS:
        return False
    if cpu_budget.split_allowed() or cpu_budget.deterministic():
        return False
    fn = _EPILOGUES.get("blocks")
    if fn is None or (act == "sigmoid" and not _EPILOGUES.get("sigmoid")):
        return False
    if _pool("blocks", c.dtype) is None:
        return False
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    parts = cpu_budget.pool_threads()
    try:
        fn(_single_address(c.dtype), _TRANS if trans_a else _NO_TRANS,
           _TRANS if trans_b else _NO_TRANS, m, n, k, alpha, a, a.shape[1], b, b.shape[1],
           beta, c, parts, _by_rows(m, n, parts), _ACTS[act],
           features if act == "relu_grad" else a)  # fmt: skip
    except TypeError:  # (a C its signature leaves out)
        cpu_budget.unpool()
        return False
    return True


def gemm_sigmoid(c, a, b, trans_a: bool, trans_b: bool, alpha: float, beta: float) -> bool:
    """`gemm_epilogue` with TF's sigmoid."""
    return gemm_epilogue(c, a, b, trans_a, trans_b, alpha, beta, "sigmoid")


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the gemm call now and wait (tests, benchmarks)."""
    return _JIT.warm(timeout)


def _single_address(dtype) -> int:
    """The gemm for a call on one thread of a pool's: MKL's where loaded (never with
    TF_DETERMINISTIC_OPS=1, where OpenBLAS on one thread gives its bits), else
    OpenBLAS's."""
    if _ONE_ADDRESSES and not cpu_budget.deterministic():
        return _ONE_ADDRESSES.get(dtype, _ADDRESSES[dtype])
    return _ADDRESSES[dtype]


def available(dtype) -> bool:
    """Whether `gemm_into` handles arrays of `dtype`."""
    return np.dtype(dtype) in _fns


def gemm_into(c, a, b, trans_a: bool, trans_b: bool, alpha: float, beta: float) -> None:
    """c = alpha * op(a) @ op(b) + beta * c, in place (op transposes when asked).

    `c` must be a writable C-contiguous 2-D array of a dtype `available`; `a` and `b`
    of the same dtype, 2-D (made contiguous here when they are not) and of matching
    sizes, which the caller has checked.
    """
    _gemm(c, a, b, trans_a, trans_b, alpha, beta)


def _gemm(
    c, a, b, trans_a: bool, trans_b: bool, alpha: float, beta: float, split: bool = True
) -> None:
    fn = _fns[c.dtype]
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if not (m and n and k):  # BLAS rejects zero leading dimensions
        if m and n:
            if beta == 0.0:
                c.fill(0)  # (BLAS does not read C then: it may hold anything)
            else:
                c *= beta
        return
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    ta = _TRANS if trans_a else _NO_TRANS
    tb = _TRANS if trans_b else _NO_TRANS
    lda, ldb = a.shape[1], b.shape[1]
    size = c.itemsize
    split = split and cpu_budget.split_allowed() and not cpu_budget.deterministic()
    blocks = _blocks(m, n, k) if split else None
    if blocks is None:
        pool = _pool("blocks", c.dtype)
        if pool is not None and min(m, n) >= _POOL_MIN_SIDE and m * n * k <= _POOL_MAX_MACS:
            parts = cpu_budget.pool_threads()
            try:
                pool(_single_address(c.dtype), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                     c, parts, _by_rows(m, n, parts))  # fmt: skip
                return
            except TypeError:  # (a C its signature leaves out: the call below)
                cpu_budget.unpool()
        address = _ADDRESSES.get(c.dtype)
        if c.dtype in _one_fns and cpu_budget.granted() == 1 and not cpu_budget.deterministic():
            fn = _one_fns[c.dtype]
            address = _ONE_ADDRESSES.get(c.dtype)
        jit = _JIT.get(_NAMES[c.dtype]) if _COMPILED_CALL else None  # (not `.name`: ~5 us)
        if jit is not None and address is not None:
            try:
                jit(address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c)
                return
            except TypeError:  # (an array of a layout without a signature)
                pass
        fn(_ROW_MAJOR, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
           c.ctypes.data, n)  # fmt: skip
        return
    if c.dtype in _one_fns and _BLOCKS_ON_ONE:
        fn = _one_fns[c.dtype]  # (MKL's or oneDNN's one thread: see `_BLOCKS_ON_ONE`)
    pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
    by_rows, count = blocks

    if by_rows:  # rows r0:r1 of C: rows of op(a), all of op(b)

        def block(r0: int, r1: int) -> None:
            pa_r = pa + (r0 if trans_a else r0 * lda) * size
            pc_r = pc + r0 * n * size
            fn(_ROW_MAJOR, ta, tb, r1 - r0, n, k, alpha, pa_r, lda, pb, ldb, beta, pc_r, n)

    else:  # columns c0:c1 of C: all of op(a), columns of op(b)

        def block(c0: int, c1: int) -> None:
            pb_c = pb + (c0 * ldb if trans_b else c0) * size
            pc_c = pc + c0 * size
            fn(_ROW_MAJOR, ta, tb, m, c1 - c0, k, alpha, pa, lda, pb_c, ldb, beta, pc_c, n)

    cpu_budget.blas_single()  # the blocks share the cores, each on one BLAS thread
    cpu_budget.parallel_for(
        m if by_rows else n,
        block,
        min_block=count,
        threads=cpu_budget.threads_blocks(),
        per_thread=_PER_THREAD,
    )


# A product is split when it has at least this many multiply-adds (~0.5 ms on one
# core) and no side shorter than _MIN_SIDE, into one block per thread, of at least
# _MIN_ROWS rows or columns: each block packs the other operand again and a helper's
# wake-up costs.  Measured on the models of benchmarks/models (2 cores, load 4-8):
# split, an LSTM cell's 10M-multiply-add products cost ~20% more CPU alone, and the
# VAE's batch-64 products 15%; the autoencoder's, MLP's and GAN's (batch 128-256) cost
# no more, and beside a spinning process their steps took half the wall time.
# ASYNCFLOW_GEMM_SPLIT=0: one call each (OpenBLAS's threads, as the CPU budget sets them).
_SPLIT_MACS = 1 << 24 if os.environ.get("ASYNCFLOW_GEMM_SPLIT", "") in ("", "1") else 1 << 62
# A split's blocks run on the one-thread gemm, MKL's or oneDNN's where loaded (above),
# as the calls the budget gives one thread do: beside a spinning process on the 2-core
# machine, when products still split there (one process alternating,
# benchmarks/models/contention_probe.py), the MLP's step took 3.27 ms with the blocks on
# MKL against 3.61 on OpenBLAS's one thread (6/6 rounds).  False: OpenBLAS's (A/B).
_BLOCKS_ON_ONE = True
_MIN_SIDE = 128
_MIN_BLOCK_MACS = 1 << 20
_MIN_ROWS = 64
_PER_THREAD = 1
# Products smaller than this go to np.matmul (see `matmul`): well below the split size
# and host_pool's, where the ctypes call's ~6 us is a tenth of the work or more.
_NUMPY_MACS = 1 << 20


def _blocks(m: int, n: int, k: int):
    """(split by rows?, minimum rows or columns a block takes), or None: one call."""
    macs = m * n * k
    if macs < _SPLIT_MACS or min(m, n, k) < _MIN_SIDE or cpu_budget.budget() < 2:
        return None
    by_rows = m >= n  # (each block packs the other operand again: the smaller one)
    extent, across = (m, n * k) if by_rows else (n, m * k)
    least = max(_MIN_ROWS, -(-_MIN_BLOCK_MACS // across))
    if extent < 2 * least:
        return None
    return by_rows, least


def matmul(a, b, trans_a: bool, trans_b: bool):
    """op(a) @ op(b) as a new array, from `gemm_into` (split as it splits); a and b are
    2-D, of one dtype `available`, of matching sizes."""
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    if m * n * (a.shape[0] if trans_a else a.shape[1]) < _NUMPY_MACS:
        # NumPy's matmul calls the same gemm (cblas_sgemm/dgemm, transposes as flags)
        # for ~1 us where this module's ctypes call costs ~7 us: small products go there.
        return np.matmul(a.T if trans_a else a, b.T if trans_b else b)
    out = host_pool.empty((m, n), a.dtype)  # a huge product's pages stay warm
    if trans_b and not trans_a and m <= _SWAP_MAX_M < n:
        # A short product with B transposed (a gradient g @ W^T at batch 64): both
        # operands are K-contiguous, which OpenBLAS 0.3.31's SkylakeX kernels pack slowly
        # when M is short.  C^T = B @ A^T, then C copied out of its transpose, costs less
        # (one thread, CPU time; [64,784]x[784,512]^T: 673 -> 566 us, M=32: 0.68-0.75x,
        # M=96: 0.88-0.98x, M=128 within 4% either way, M=256 1.04-1.21x) and gives the
        # same bits here: each element is the same sum over K in the same order.
        tmp = np.empty((n, m), a.dtype)
        _gemm(tmp, b, a, False, True, 1.0, 0.0, split=False)
        np.copyto(out, tmp.T)
        return out
    _gemm(out, a, b, trans_a, trans_b, 1.0, 0.0)
    return out


_SWAP_MAX_M = 96
# A product on the pool has both sides of C at least this long (each block is a whole
# gemm call of its own), and at most _POOL_MAX_MACS multiply-adds: larger ones keep
# OpenBLAS's own threads, which share packed panels where the blocks each pack their
# part of B again.  The LeNet CNN's [64,3136]x[3136,1024] layer and its gradient pair
# (~205M each) are under it: on an Intel Xeon that LLVM reads as Rocket Lake (2 vCPUs,
# 2026-12-03), its pair as one product a thread (MKL's sequential layer) took 3,132 us
# in the step against 4,115 for OpenBLAS's batched call, the layer 1,844 against 2,439
# on OpenBLAS's two threads; the CNN's step 0.93-0.97x in two in-process A/Bs of 20
# rounds (benchmarks/models/ab_inproc.py, B faster in 17 and 19 rounds).  Alone, a
# 411M product [128,3136]x[3136,1024] was faster on OpenBLAS's two threads (2,764
# against 3,244 us in two blocks): the limit stays below it.
_POOL_MIN_SIDE = 32
_POOL_MAX_MACS = 1 << 28
_ROW_BLOCKS = True  # False: rows only where C is no wider than tall (A/B)
_ROW_BLOCK_MIN = 64


def _by_rows(m: int, n: int, parts: int) -> bool:
    """Whether the pool's `parts` blocks of an [m, n] product are row blocks (else
    column blocks): where C is no wider than tall, and where each row block has at
    least _ROW_BLOCK_MIN rows even though it is wider.  A column block reads all of A
    and its columns of B, a row block its rows of A and all of B; in a step, where
    neither is in the cache, row blocks of 64 rows ran faster all the same: on the
    2-vCPU Xeon (2026-12-04), after 16 MB written between calls, us, rows / columns:
    [128,784]x[784,256] 153 / 161, [128,256]x[256,784] 151 / 169, [256,128]^T x
    [256,784] 161 / 167, [128,256]x[784,256]^T 186 / 178; the GAN's step 0.945x
    (`ab_inproc.py`, 10 rounds, 10/10).  Blocks of 16 rows (the GAN tutorial's batch of
    32) lost: its step 1.028x."""
    return m >= n or (_ROW_BLOCKS and m >= parts * _ROW_BLOCK_MIN)


def accumulate(c, a, b, trans_a: bool, trans_b: bool, first: bool) -> None:
    """c = op(a) @ op(b) (first) or c += op(a) @ op(b): one product of a streamed sum
    (ops/matmul_sum.py), one gemm call on the BLAS threads set now, never split."""
    _gemm(c, a, b, trans_a, trans_b, 1.0, 0.0 if first else 1.0, split=False)


# OpenBLAS 0.3.31's batched gemm crashes (SIGSEGV) when one of its products takes the
# small-matrix kernels (M*N*K <= 100^3 on SkylakeX, float32 and float64 alike, found by
# bisecting sizes): smaller pairs are two calls.  ASYNCFLOW_GEMM_BATCH=0: never batched.
_BATCH_MIN_MACS = 1 << 21
# A sum of two products in two runs on the pool's pair (`matmul_sum`); False: on the
# budget's helper threads (benchmarks/models/ab_inproc.py compares the two).
_SUM_PAIR = True
# A pair granted one thread on the pool's two when they are free (`_pool`'s `free`);
# False: on the thread granted (A/B).
_PAIR_FREE = True


# A pair given one thread while another process holds a core (`threads_now`: the pool
# takes no pair then) runs as two calls of MKL's or oneDNN's one-thread gemm where
# loaded, not as OpenBLAS's batched call on one thread.  Beside a spinning process on
# the 2-core machine, in one process alternating (benchmarks/models/contention_probe.py,
# `_PAIR_ON_ONE=False` as B, 6 rounds, B/A, rounds B was faster): lstm_seqlen 1.088x
# (0/6), lstm_static 1.075x (0/6), bilstm 1.095x (0/6), lstm_dynamic 1.044x (0/6).
# Alone, where a pair given one thread (a kind measured small) also took them, the
# steps moved both ways (lstm_static 1.037x, bilstm 0.983x, 6/6 each): so only beside
# a busy process; alone then 0.98-1.02x (noise).
_PAIR_ON_ONE = True


def gemm_pair(c1, a1, b1, ta1: bool, tb1: bool, beta1: float, c2, a2, b2, ta2, tb2, beta2):
    """c1 = op(a1) @ op(b1) + beta1 * c1 and c2 = op(a2) @ op(b2) + beta2 * c2, two
    independent products of one dtype `available`: float32 on the pool's two threads,
    one product each, where `_pool` allows (two free cores are enough, see `free`
    there); else as one batched call: OpenBLAS runs the two on two of its threads, or
    one after the other on one thread (measured here: each product with one thread's
    bits either way; with TF_DETERMINISTIC_OPS=1 the CPU budget gives every call one
    thread).  Without the batched call (an OpenBLAS before 0.3.30), or with an empty
    dimension, two calls.  (The LSTM's input gradient and its step's weight product:
    ops/matmul_sum.py.)"""
    pool = _pool("pair", c1.dtype, _PAIR_FREE)
    if pool is not None and c1.size and c2.size:
        k1 = a1.shape[0] if ta1 else a1.shape[1]
        k2 = a2.shape[0] if ta2 else a2.shape[1]
        if k1 and k2 and max(c1.size * k1, c2.size * k2) <= _POOL_MAX_MACS:
            # (BLAS set to one thread only here: a pair it does not take keeps the
            # threads granted, for OpenBLAS's batched call below)
            cpu_budget.pool_threads()
            a1, b1, a2, b2 = (np.ascontiguousarray(x) for x in (a1, b1, a2, b2))
            try:
                pool(_single_address(c1.dtype), _TRANS if ta1 else _NO_TRANS,
                     _TRANS if tb1 else _NO_TRANS, k1, a1, b1, beta1, c1,
                     _TRANS if ta2 else _NO_TRANS, _TRANS if tb2 else _NO_TRANS, k2, a2, b2,
                     beta2, c2)  # fmt: skip
                return
            except TypeError:  # (a C its signature leaves out: the calls below)
                cpu_budget.unpool()
    fn = _batch_fns.get(c1.dtype)
    gemms = ((c1, a1, b1, ta1, tb1, beta1), (c2, a2, b2, ta2, tb2, beta2))
    if (
        _PAIR_ON_ONE
        and c1.dtype in _one_fns
        and cpu_budget.granted() == 1
        and not cpu_budget.deterministic()
        and cpu_budget.threads_now() <= 1
    ):
        fn = None  # (two calls of MKL's or oneDNN's one-thread gemm: `_PAIR_ON_ONE`)
    if fn is None or not all(
        c.size * (a.shape[0] if ta else a.shape[1]) >= _BATCH_MIN_MACS
        for c, a, _b, ta, _tb, _beta in gemms
    ):
        for c, a, b, ta, tb, beta in gemms:
            _gemm(c, a, b, ta, tb, 1.0, beta, split=False)
        return
    i64, ptr = ctypes.c_int64 * 2, ctypes.c_void_p * 2
    scalar = (ctypes.c_float if c1.dtype == np.float32 else ctypes.c_double) * 2
    a1, b1, a2, b2 = (np.ascontiguousarray(x) for x in (a1, b1, a2, b2))
    fn(
        _ROW_MAJOR,
        (ctypes.c_int * 2)(_TRANS if ta1 else _NO_TRANS, _TRANS if ta2 else _NO_TRANS),
        (ctypes.c_int * 2)(_TRANS if tb1 else _NO_TRANS, _TRANS if tb2 else _NO_TRANS),
        i64(c1.shape[0], c2.shape[0]),
        i64(c1.shape[1], c2.shape[1]),
        i64(a1.shape[0] if ta1 else a1.shape[1], a2.shape[0] if ta2 else a2.shape[1]),
        scalar(1.0, 1.0),
        ptr(a1.ctypes.data, a2.ctypes.data),
        i64(a1.shape[1], a2.shape[1]),
        ptr(b1.ctypes.data, b2.ctypes.data),
        i64(b1.shape[1], b2.shape[1]),
        scalar(beta1, beta2),
        ptr(c1.ctypes.data, c2.ctypes.data),
        i64(c1.shape[1], c2.shape[1]),
        2,
        i64(1, 1),
    )


def matmul_sum(pairs, addends, shape: tuple, groups: int):
    """sum_k op(a_k) @ op(b_k) + sum(addends) as a new array of `shape` (`pairs`: tuples
    (a, b, trans_a, trans_b), each of `shape`'s product; `addends` arrays of `shape`),
    the products accumulated by gemm calls with beta=1 (ops/matmul_sum.py).

    With `groups` > 1 the products are split into that many runs of consecutive ones,
    each summed into its own buffer (the first run's is the result) by one of the CPU
    budget's threads, each gemm on one BLAS thread; then the runs' sums are added in
    order, then the addends.  The grouping depends only on `groups`, never on which
    thread took which run: the same inputs give the same bits."""
    dtype = pairs[0][0].dtype
    out = host_pool.empty(shape, dtype)
    count = len(pairs)
    groups = max(1, min(groups, count))
    if groups == 1:  # one run: each product as one gemm call would split it
        for k, (a, b, ta, tb) in enumerate(pairs):
            _gemm(out, a, b, ta, tb, 1.0, 1.0 if k else 0.0)
    elif count == 2 and _SUM_PAIR and _pool("pair", dtype) is not None:
        # Two runs of one product each (the GAN's discriminator weight gradient, real
        # and fake): the pool's pair, one product on each of its spinning threads,
        # where the budget's helpers woke a sleeping thread (`gemm_pair`; the same
        # bits: each product one gemm call on one thread, then added in order).
        (a1, b1, ta1, tb1), (a2, b2, ta2, tb2) = pairs
        buf = np.empty(shape, dtype)
        gemm_pair(out, a1, b1, ta1, tb1, 0.0, buf, a2, b2, ta2, tb2, 0.0)
        np.add(out, buf, out=out)
    else:
        bounds = [(g * count // groups, (g + 1) * count // groups) for g in range(groups)]
        bufs = [out] + [np.empty(shape, dtype) for _ in range(groups - 1)]

        def run(start: int, stop: int) -> None:
            for g in range(start, stop):
                lo, hi = bounds[g]
                for k in range(lo, hi):
                    a, b, ta, tb = pairs[k]
                    _gemm(bufs[g], a, b, ta, tb, 1.0, 0.0 if k == lo else 1.0, split=False)

        cpu_budget.blas_single()  # the runs share the cores, each on one BLAS thread
        cpu_budget.parallel_for(
            groups, run, min_block=1, threads=cpu_budget.threads_blocks(), per_thread=1
        )
        for buf in bufs[1:]:
            np.add(out, buf, out=out)
    for x in addends:
        np.add(out, x, out=out)
    return out
