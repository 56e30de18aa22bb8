"""TF's float32 log as an inline function of the compiled element-wise loops (numba).

The Log kernel computes TF's own float32 log where numba runs (ops/elementwise._log32:
Eigen's log, ~25 NumPy passes, ~10x NumPy's own log).  Written for one element it is
branch-free float32 arithmetic and integer work on the bits (the exponent and mantissa
of x, a subnormal x scaled by 2^24 first as Eigen's frexp does, a rational function of
degree 2/3, one division), so LLVM vectorizes a loop that holds it: a lone float32 Log
fuses alone (ops/fused_elementwise.py `_ALONE`) and runs as one loop, and a program's
Logs run inside its loop instead of as calls between stages.

The loop makes the same IEEE operations in the same order as the NumPy passes (numba
does not contract a multiply and an add into an FMA), so it gives their bits for the
elements TF computes in packets: all but the last size % 8, which TF computes by
Eigen's scalar path (the C library's logf).  So a loop inlines Log only where its
values' size is a multiple of 8 (fused_elementwise_jit).  `check()` compares the two
on a fixed set of inputs (specials, subnormals, both sides of sqrt(1/2) and of powers
of two, ~260,000 values spread over the bit patterns) before any loop uses it; where
one differs, programs keep the kernel's calls.  `ASYNCFLOW_INLINE_LOG=0` keeps them
too (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp

__all__ = ["check", "namespace", "verdict"]

_F = np.float32


def _build(numba):
    """The inline njit function log32(x) (float32 -> float32), for elements of whole
    packets."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def bits(typingctx, x):  # a float32's bits as a signed int32
        sig = types.int32(types.float32)

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))

        return sig, codegen

    @intrinsic
    def from_bits(typingctx, i):  # the float32 of an int32's bits
        sig = types.float32(types.int32)

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())

        return sig, codegen

    i32 = np.int32
    sqrthf, ln2 = _ew._LOG_SQRTHF, _ew._LOG_LN2
    p0, p1, p2 = _ew._LOG_P
    q0, q1, q2, q3 = _ew._LOG_Q
    zero, one = _F(0.0), _F(1.0)
    tiny, two24 = _F(np.finfo(np.float32).tiny), _F(1 << 24)
    normal_offset, subnormal_offset = _F(-126.0), _F(-150.0)
    inf, minus_inf, nan = _F(np.inf), _F(-np.inf), _F(np.nan)

    @numba.njit(inline="always", error_model="numpy")
    def log32(x):
        sub = abs(x) < tiny
        xn = x * two24 if sub else x
        b = bits(xn)
        e = _F(i32(i32(b >> 23) & 0xFF)) + (subnormal_offset if sub else normal_offset)
        m = from_bits(i32(i32(b & -0x7F800001) | 0x3F000000))  # (sign, mantissa; 2^-1)
        low = m < sqrthf
        f = m - one
        f = f + m if low else f
        e = e - one if low else e
        p = ((p0 * f + p1) * f + p2) * f
        q = ((q0 * f + q1) * f + q2) * f + q3
        y = e * ln2 + p / q
        y = y if x > zero else (minus_inf if x == zero else nan)
        return inf if x == inf else y

    return log32


def _inputs() -> np.ndarray:
    """The check's inputs (a multiple of 8 of them: every one a packet's), with 40
    values either side of sqrt(1/2), 1, 2, the smallest normal number and 0."""
    edges = (_ew._LOG_SQRTHF, _F(1.0), _F(2.0), _F(np.finfo(np.float32).tiny), _F(0.0))
    xs = _exp.probe_inputs(edges)
    pad = -xs.size % _ew.SIGMOID_PACKET
    return np.concatenate([xs, np.ones(pad, _F)])


def _reference(x):
    return _ew.log(np, x)


def check() -> bool:
    """Whether the compiled log gives the Log kernel's bits here (compiles it; run
    once)."""
    return _INLINE.check()


_INLINE = _exp.InlineFunction("_log32", "ASYNCFLOW_INLINE_LOG", _build, _inputs, _reference)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
