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

Scope: float32 and float64, C-contiguous writable arrays; pooling windows that tile the
input exactly (2x2, stride 2, even H and W, no padding); the bias along the last axis.
Anything else, or numba absent or disabled (ASYNCFLOW_NO_NUMBA=1), or the loops not
compiled yet, takes the NumPy path.  The loops compile on a background thread started
by the first kernel that wants them (numba's import ~0.3 s, the compiles ~3 s, ~0.3 s
from numba's on-disk cache); no kernel waits for them.  They release the GIL, so the CPU
budget's threads share a batch's images (or rows) as before.
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import jit_loops

__all__ = ["loops", "usable", "warm"]


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


_NAMES = (
    "_pool_2x2",
    "_first_max_2x2",
    "_spread_2x2",
    "_spread_relu_2x2",
    "_add_relu",
    "_add_relu_inplace",
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
