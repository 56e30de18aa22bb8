"""Compiled loops for a CNN's memory-bound kernels (numba): 2x2 stride-2 max pooling, its
gradient, and BiasAdd + ReLU, each in one pass where NumPy makes several.

The LeNet CNN of benchmarks/models pools [64,28,28,32] and [64,14,14,64] NHWC tensors
with 2x2 windows at stride 2, adds the conv layers' biases with the ReLU after them
(nn_ops' `_FusedBiasAddRelu`), and its backward pass takes MaxPoolGrad fused with the
ReluGrad of the pooled tensor (nn_ops' `_FusedMaxPoolGradReluGrad`).  pooling_ops and
nn_ops do them in NumPy passes: the pooling as a maximum over window rows, then over
columns; its gradient as an equality pass with y repeated along W, a count of hits (to
find ties), then a spread of dy over the hits; the bias and ReLU as two passes over
L2-sized blocks.  Measured on the 2-core AMD EPYC (Zen 4) project machine, one thread,
float32, the two layers' shapes: pooling 516 / 284 us against 137 / 57 compiled;
gradient with the ReLU 1,539-1,919 / 803-990 us against 480 / 139 compiled, as two
passes (each window's first maximum as a code 0-4, then dy spread by the code: one pass
writing four outputs per element did not vectorise, 1.1-4.5 ms); bias + ReLU 958 / 394
us against 175 / 77.  An in-place form takes one array argument: the same loop over two
arguments that are one array ran 2.9x slower (numba's arguments may alias, and LLVM's
run-time check then takes the scalar loop).

Every element is computed as the NumPy path computes it, up to the sign of a zero:
- MaxPool: `np.maximum` over the two window rows, then over the two columns, as its
  vector loops here compute `np.maximum(a, b)`: `a if a > b or a is NaN else b` (NaN
  propagates; of +0 and -0 the second, as NumPy's AVX-512 and AVX2 loops do: its
  scalar loop would give the first, so the sign of a zero maximum is not something
  either path promises).
- BiasAdd + ReLU: `np.maximum(value + bias, 0)`, the same maximum (a zero sum gives +0).
- MaxPoolGrad: dy goes to the first input equal to its window's max in row-major order
  (TF's), to the window's first position when the max is NaN, nowhere when no input
  equals it (a y not of this x); every other position is +0 (TF's MaxPoolGrad fills
  zeros and adds; NumPy's `dy * mask` gave -0 under a negative dy).  The value is dy itself
  (a select, so an inf or NaN of dy stays in its own position), or with the ReLU
  `dy * (y > 0)` as TF's ReluGrad computes it (inf * 0 is NaN, -1 * 0 is -0).

Also conv_ops' transposed column matrix of a stride-1 convolution (`_gather_cols_t`; the
filter gradient of LeNet's first layer: 232 us for the batch against 362 for NumPy's copy
of the strided window view, one thread, Intel Xeon).

Scope: float32 and float64, C-contiguous writable arrays; pooling windows that tile the
input exactly (2x2, stride 2, even H and W, no padding); the bias along the last axis.
Anything else, or numba absent or disabled (ASYNCFLOW_NO_NUMBA=1), or the loops not
compiled yet, takes the NumPy path.  The loops compile on a background thread started
by the first kernel that wants them (numba's import ~0.3 s, the compiles ~3 s, ~0.3 s
from numba's on-disk cache); no kernel waits for them.  They release the GIL, so the CPU
budget's threads share a batch's images (or rows) as before.
"""

from __future__ import annotations

import threading

import numpy as np

from asyncflow.ops import fused_updates, jit_loops

__all__ = ["CONV_MAX_C", "conv_bias_relu", "loops", "usable", "warm", "warm_conv"]


def _pool_2x2(x6, out):
    # x6: [N, OH, 2, OW, 2, C] view of NHWC x; out: [N, OH, OW, C]
    n, oh, ow, c = out.shape
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for k in range(c):
                    a0 = x6[b, i, 0, j, 0, k]
                    a1 = x6[b, i, 0, j, 1, k]
                    b0 = x6[b, i, 1, j, 0, k]
                    b1 = x6[b, i, 1, j, 1, k]
                    m0 = a0 if (a0 > b0) | (a0 != a0) else b0  # the rows first
                    m1 = a1 if (a1 > b1) | (a1 != a1) else b1
                    out[b, i, j, k] = m0 if (m0 > m1) | (m0 != m0) else m1


def _first_max_2x2(x6, y, code):
    # code[b, i, j, k]: the window position (r * 2 + s) that gets dy, 4 for none
    n, oh, ow, c = y.shape
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for k in range(c):
                    v = y[b, i, j, k]
                    q = np.uint8(4)
                    q = np.uint8(3) if x6[b, i, 1, j, 1, k] == v else q
                    q = np.uint8(2) if x6[b, i, 1, j, 0, k] == v else q
                    q = np.uint8(1) if x6[b, i, 0, j, 1, k] == v else q
                    q = np.uint8(0) if (x6[b, i, 0, j, 0, k] == v) | (v != v) else q
                    code[b, i, j, k] = q


def _spread_2x2(code, dy, dx6):
    n, oh, ow, c = dy.shape
    zero = dx6.dtype.type(0)
    for b in range(n):
        for i in range(oh):
            for r in range(2):
                for j in range(ow):
                    for s in range(2):
                        q = np.uint8(2 * r + s)
                        for k in range(c):
                            g = dy[b, i, j, k]
                            dx6[b, i, r, j, s, k] = g if code[b, i, j, k] == q else zero


def _spread_relu_2x2(code, dy, y, dx6):
    # _spread_2x2 with dy * (y > 0): a loop of its own rather than a flag, so that
    # neither inner loop holds a branch numba would have to hoist to vectorise it.
    n, oh, ow, c = dy.shape
    zero = dx6.dtype.type(0)
    one = dx6.dtype.type(1)
    for b in range(n):
        for i in range(oh):
            for r in range(2):
                for j in range(ow):
                    for s in range(2):
                        q = np.uint8(2 * r + s)
                        for k in range(c):
                            g = dy[b, i, j, k] * (one if y[b, i, j, k] > zero else zero)
                            dx6[b, i, r, j, s, k] = g if code[b, i, j, k] == q else zero


def _add_relu(value, bias, out):
    # value, out: [P, C]; bias: [C]
    p, c = value.shape
    zero = out.dtype.type(0)
    for i in range(p):
        for k in range(c):
            t = value[i, k] + bias[k]
            out[i, k] = t if (t > zero) | (t != t) else zero


def _add_relu_inplace(value, bias):
    p, c = value.shape
    zero = value.dtype.type(0)
    for i in range(p):
        for k in range(c):
            t = value[i, k] + bias[k]
            value[i, k] = t if (t > zero) | (t != t) else zero


def _gather_cols_t(xpad, cols):
    # cols [KH, KW, C, N, OH, OW] of padded NHWC xpad, stride and dilation 1: conv_ops'
    # transposed column matrix (`_Geom.cols_t`), each row a run of an output row
    kh, kw, c, n, oh, ow = cols.shape
    for p in range(kh):
        for q in range(kw):
            for ch in range(c):
                for b in range(n):
                    for i in range(oh):
                        for j in range(ow):
                            cols[p, q, ch, b, i, j] = xpad[b, i + p, j + q, ch]


_NAMES = (
    "_pool_2x2",
    "_first_max_2x2",
    "_spread_2x2",
    "_spread_relu_2x2",
    "_add_relu",
    "_add_relu_inplace",
    "_gather_cols_t",
)


def _build(numba) -> dict:
    """The loops compiled for float32 and float64 (calls on one-window arrays: the
    signatures every call will have): on jit_loops' background thread, never in a
    kernel."""
    jit = numba.njit(nogil=True, cache=True, error_model="numpy")
    fns = {name: jit(globals()[name]) for name in _NAMES}
    for dtype in (np.float32, np.float64):
        x6 = np.ones((1, 1, 2, 1, 2, 1), dtype)
        y, dy = np.ones((1, 1, 1, 1), dtype), np.ones((1, 1, 1, 1), dtype)
        code = np.zeros((1, 1, 1, 1), np.uint8)
        fns["_pool_2x2"](x6, y)
        fns["_first_max_2x2"](x6, y, code)
        fns["_spread_2x2"](code, dy, x6)
        fns["_spread_relu_2x2"](code, dy, y, x6)
        rows, bias = np.ones((1, 1), dtype), np.ones(1, dtype)
        fns["_add_relu"](rows, bias, np.ones((1, 1), dtype))
        fns["_add_relu_inplace"](rows, bias)
        fns["_gather_cols_t"](np.ones((1, 1, 1, 1), dtype), np.ones((1, 1, 1, 1, 1, 1), dtype))
    return fns


_JIT = jit_loops.BackgroundLoops("the CNN loops", _build)


def loops() -> dict | None:
    """{name: compiled loop}, or None while they are not ready: the first request starts
    their compile on a background thread, and the NumPy path runs meanwhile."""
    return _JIT.loops() if _JIT.get(_NAMES[0]) is not None else None


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the loops now and wait (tests, benchmarks); whether they are ready."""
    return _JIT.warm(timeout)


def usable(*arrays) -> bool:
    """Whether the compiled loops take these arrays: one float dtype they were compiled
    for, C-contiguous and writable (numba types a read-only or strided array apart, and
    an unseen type would compile at the call, on the kernel's thread)."""
    dtype = arrays[0].dtype
    if dtype != np.float32 and dtype != np.float64:
        return False
    for a in arrays:
        if a.dtype != dtype or not a.flags.c_contiguous or not a.flags.writeable:
            return False
    return True


# -- a convolution of few input channels, with its bias and ReLU ----------------------------
#
# LeNet's first layer ([64,28,28,1] * [5,5,1,32] SAME, then BiasAdd and Relu) through
# conv_ops' transposed columns took a gather of the 25 taps (5 MB), a GEMM with K = 25
# and a pass of bias + ReLU over the 6.4 MB output (one thread, Intel Xeon, 2026-12-03:
# 400 + 940 + 500 us).  Here each output pixel's OC values are summed from its KH*KW*C
# taps in registers and written once, bias added and ReLU applied: 0.94-1.05 ms on one
# thread for the same layer (the batch's parts on the budget's threads).  The loop
# vectorises over the output channels only when KH, KW, C and OC are constants of the
# compile (the tap loops unrolled inside the channel loop); so one specialisation is
# compiled per (KH, KW, C, OC), integer literals in its signature, on a background
# thread the first time a kernel asks for it, and kept in numba's on-disk cache.  Sums:
# over the even filter rows' taps and over the odd rows' taps, each in (i, j, c) order as
# fused multiply-adds, then the two added, then the bias; float32, the same for any split
# of the batch.  Measured on the way (same layer, one thread): one row at a time with
# one chain per sum 1.69-1.85 ms, two chains 1.36, two rows 1.03-1.08.  Slower: the sums
# accumulated in the output row in memory (3.7-8.6 ms), vectorised over output positions
# (3.8-21 ms), three or four rows or two columns or channel groups per iteration (numba's
# loops were then not vectorised, LLVM's run-time alias checks for that many stores
# being over its limit: 7-10 ms), and per-image GEMMs with the bias + ReLU in cache (2.1
# ms).


def _conv_bias_relu(xpad, w, bias, out, pooled, code, kh, kw, c, oc, pool):
    # xpad: [N, OH + KH - 1, OW + KW - 1, C] padded NHWC input; w: [KH, KW, C, OC];
    # out: [N, OH, OW, OC] = max(correlation + bias, 0), a NaN sum kept (np.maximum's);
    # kh, kw, c, oc and pool are literals of the compiled signature (`_conv_signature`).
    # Two output rows at a time share the filter's loads, each sum in two halves (even
    # and odd filter rows) to halve the chains of dependent multiply-adds.  With pool
    # (OH and OW even), the two rows just written, still in cache, are max-pooled 2x2 at
    # stride 2 into pooled [N, OH / 2, OW / 2, OC], as `_pool_2x2` computes it, and each
    # window's first maximum goes to code (uint8, the same shape) as `_first_max_2x2`
    # finds it: what MaxPoolGrad would find again from the activation.
    n, oh, ow, _ = out.shape
    zero = out.dtype.type(0)
    for b in range(n):
        for i2 in range(oh // 2):
            i = 2 * i2
            for j in range(ow):
                for k in range(oc):
                    s0 = zero
                    s1 = zero
                    u0 = zero
                    u1 = zero
                    for p in range(0, kh, 2):
                        for q in range(kw):
                            for ch in range(c):
                                wv = w[p, q, ch, k]
                                s0 += xpad[b, i + p, j + q, ch] * wv
                                s1 += xpad[b, i + 1 + p, j + q, ch] * wv
                    for p in range(1, kh, 2):
                        for q in range(kw):
                            for ch in range(c):
                                wv = w[p, q, ch, k]
                                u0 += xpad[b, i + p, j + q, ch] * wv
                                u1 += xpad[b, i + 1 + p, j + q, ch] * wv
                    t = (s0 + u0) + bias[k]
                    out[b, i, j, k] = t if (t > zero) | (t != t) else zero
                    t = (s1 + u1) + bias[k]
                    out[b, i + 1, j, k] = t if (t > zero) | (t != t) else zero
            if pool:
                for j2 in range(ow // 2):
                    for k in range(oc):
                        a0 = out[b, i, 2 * j2, k]
                        a1 = out[b, i, 2 * j2 + 1, k]
                        b0 = out[b, i + 1, 2 * j2, k]
                        b1 = out[b, i + 1, 2 * j2 + 1, k]
                        m0 = a0 if (a0 > b0) | (a0 != a0) else b0  # the rows first
                        m1 = a1 if (a1 > b1) | (a1 != a1) else b1
                        v = m0 if (m0 > m1) | (m0 != m0) else m1
                        pooled[b, i2, j2, k] = v
                        q = np.uint8(4)
                        q = np.uint8(3) if b1 == v else q
                        q = np.uint8(2) if b0 == v else q
                        q = np.uint8(1) if a1 == v else q
                        code[b, i2, j2, k] = np.uint8(0) if (a0 == v) | (v != v) else q
        if oh % 2:  # the last row alone, its sums in the same order
            i = oh - 1
            for j in range(ow):
                for k in range(oc):
                    s0 = zero
                    u0 = zero
                    for p in range(0, kh, 2):
                        for q in range(kw):
                            for ch in range(c):
                                s0 += xpad[b, i + p, j + q, ch] * w[p, q, ch, k]
                    for p in range(1, kh, 2):
                        for q in range(kw):
                            for ch in range(c):
                                u0 += xpad[b, i + p, j + q, ch] * w[p, q, ch, k]
                    t = (s0 + u0) + bias[k]
                    out[b, i, j, k] = t if (t > zero) | (t != t) else zero


# Most input channels for which graphs get the fused kernel that calls the loop (nn_ops'
# _FusedConv2DBiasAddRelu): its taps unrolled, KH*KW*C multiply-adds per channel group.
CONV_MAX_C = 4

_CONV_LOCK = threading.Lock()
_CONV_JIT: dict = {}  # (kh, kw, c, oc, pool) -> jit_loops.BackgroundLoops of that one
_conv_dispatcher: list = []


def _conv_signature(numba, key):
    t = numba.core.types
    a4 = t.Array(t.float32, 4, "C")
    lit = [t.IntegerLiteral(int(v)) for v in key]
    return (a4, a4, t.Array(t.float32, 1, "C"), a4, a4, t.Array(t.uint8, 4, "C"), *lit)


def _build_conv(numba, key) -> dict:
    with _CONV_LOCK:
        if not _conv_dispatcher:
            _conv_dispatcher.append(
                numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})(
                    _conv_bias_relu
                )
            )
    disp = _conv_dispatcher[0]
    sig = _conv_signature(numba, key)
    disp.compile(sig)
    return {"conv": disp.overloads[sig].entry_point}


def _conv_jit(key) -> jit_loops.BackgroundLoops:
    jit = _CONV_JIT.get(key)
    if jit is None:
        with _CONV_LOCK:
            jit = _CONV_JIT.get(key)
            if jit is None:
                jit = _CONV_JIT[key] = jit_loops.BackgroundLoops(
                    f"the convolution loop {key}", lambda numba: _build_conv(numba, key)
                )
    return jit


def conv_bias_relu(kh: int, kw: int, c: int, oc: int, pool: bool = False):
    """The compiled `_conv_bias_relu` for float32, these sizes and pooling or not, called
    as `fn(xpad, w, bias, out, pooled, code, kh, kw, c, oc, pool)` with C-contiguous
    writable arrays (pooled and code: any such arrays when not pooling), or None while it
    is not ready (the first request starts its compile)."""
    if fused_updates._DISABLED:
        return None
    return _conv_jit((int(kh), int(kw), int(c), int(oc), int(bool(pool)))).get("conv")


def warm_conv(
    kh: int, kw: int, c: int, oc: int, pool: bool = False, timeout: float | None = 120.0
) -> bool:
    """Compile `conv_bias_relu` for these sizes now and wait; whether it is ready."""
    if fused_updates._DISABLED:
        return False
    return _conv_jit((int(kh), int(kw), int(c), int(oc), int(bool(pool)))).warm(timeout)
