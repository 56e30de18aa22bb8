"""TF's float32 log1p as an inline function of the compiled element-wise loops (numba).

The Log1p kernel computes TF's own float32 log1p where numba runs
(ops/elementwise._log1p32: Eigen's generic log1p, Kahan's x log(1 + x) / ((1 + x) - 1)
on Eigen's log, ~30 NumPy passes).  The sigmoid cross-entropy TF1 programs minimise
(`sigmoid_cross_entropy_with_logits`: log1p(exp(-|x|)) over [batch, classes]) holds
one; inline, it is the inline log of fused_elementwise_log, a division and a multiply
inside the program's loop.  (Until TF's function, this module held glibc's log1pf,
which NumPy's float32 log1p calls without AVX-512: see git history.)

The loop makes the same IEEE operations in the same order as the NumPy passes (x times
1 where 1 + x is 1 or infinite, so a subnormal x flushes as the NumPy pass flushes it;
a zero x, which under the kernels' denormals-are-zero mode a subnormal one is, times 0,
which LLVM cannot fold into x as it may x * 1), so it gives their bits for the
elements TF computes in packets: all but the last size % 8, which TF computes by
Eigen's scalar path (the C library's log1pf).  So a loop inlines Log1p only where its
values' size is a multiple of 8 (fused_elementwise_jit).
`check()` compares the two on a fixed set of inputs (specials, subnormals, both sides
of -1, 0 and where 1 + x rounds to 1, ~260,000 values spread over the bit patterns)
before any loop uses it; where one differs, programs keep the kernel's calls.
`ASYNCFLOW_INLINE_LOG1P=0` keeps them too, and so does `_ENABLED` set False for the
programs compiled after it (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp
from asyncflow.ops import fused_elementwise_log as _log

__all__ = ["check", "namespace", "verdict"]

_F = np.float32

_ENABLED = True  # False: programs compiled from now on keep the kernel's calls (A/B)


def _build(numba):
    """The inline njit function log1p32(x) (float32 -> float32), for elements of whole
    packets."""
    log32 = _log._build(numba)
    one, zero = _F(1.0), _F(0.0)

    @numba.njit(inline="always", error_model="numpy")
    def log1p32(x):
        y = x + one
        log = log32(y)
        q = log / (y - one)
        q = one if (y == one) | (y == log) else q
        # x * 1 where 1 + x is 1: a zero (or a denormal counted as one) times zero
        # instead, so that LLVM cannot fold the product into x and pass a denormal x
        # through where the kernel's pass flushes it (seen on a Rocket Lake target)
        q = zero if x == zero else q
        return x * q

    return log1p32


def _inputs() -> np.ndarray:
    """The check's inputs (a multiple of 8 of them: every one a packet's), with 40
    values either side of -1, 0, 2^-24 and -2^-25 (where 1 + x rounds to 1)."""
    edges = (_F(-1.0), _F(0.0), _F(2.0**-24), _F(-(2.0**-25)), _F(1.0))
    xs = _exp.probe_inputs(edges)
    pad = -xs.size % _ew.SIGMOID_PACKET
    return np.concatenate([xs, np.zeros(pad, _F)])


def _reference(x):
    return _ew.log1p(np, x)


def check() -> bool:
    """Whether the compiled log1p gives the Log1p kernel's bits here (compiles it; run
    once)."""
    return _INLINE.check()


def verdict():
    """`check()`'s result, or None before it has run (False while not `_ENABLED`)."""
    return _INLINE.verdict() if _ENABLED else False


_INLINE = _exp.InlineFunction("_log1p32", "ASYNCFLOW_INLINE_LOG1P", _build, _inputs, _reference)
_state = _INLINE.state
namespace = _INLINE.namespace
