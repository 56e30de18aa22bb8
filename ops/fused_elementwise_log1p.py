"""The C library's float32 log1p (glibc's) as an inline function of the compiled
element-wise loops (numba).

On a CPU without AVX-512 NumPy has no SIMD loop of its own for float32 log1p: each
element is a call of the C library's `log1pf`, 10-18 ns an element on the project's
AMD EPYC (Zen 3).  The sigmoid cross-entropy TF1 programs minimise
(`sigmoid_cross_entropy_with_logits`: log1p(exp(-|x|)) over [batch, classes]) spent
~0.5-0.9 ms of a VAE step in it, more than all of TF's element-wise work.

This is glibc's algorithm (sysdeps/ieee754/flt-32/s_log1pf.c up to 2.40, fdlibm's
with glibc's thresholds: |x| < 2^-29 and 2^-54, not FreeBSD's 2^-15 and 2^-24),
written without branches: every path is computed and the one the C code takes is
selected, so LLVM vectorizes the loop (~1 ns an element).  Each path makes the same
float32 operations in the C code's order (no fused multiply-adds: numba does not
contract, and glibc is built without them for this function), so it gives glibc's
bits: every float32 input gave np.log1p's on the project machine (all 2^32 of them;
benchmarks/README.md "log1p inside the compiled loops").

Another C library (glibc 2.41 took CORE-MATH's correctly rounded log1pf), or NumPy's
own SIMD loop (its AVX-512 builds call SVML's), gives other bits: `check()` compares
this function with `np.log1p` on a fixed set of inputs (every path's ends, specials,
~260,000 values spread over the bit patterns) before any loop uses it; where one
differs, programs keep NumPy's log1p calls (fused_elementwise_jit's staged programs),
with NumPy's bits either way.  `ASYNCFLOW_INLINE_LOG1P=0` keeps them too, and so does
`_ENABLED` set False for the programs compiled after it (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import fused_elementwise_exp as _exp

__all__ = ["check", "namespace", "verdict"]

_F = np.float32
_LN2_HI = _F(6.9313812256e-01)  # 0x3f317180
_LN2_LO = _F(9.0580006145e-06)  # 0x3717f7d1
_LP = tuple(
    _F(v)
    for v in (
        6.6666668653e-01,  # 0x3f2aaaab
        4.0000000596e-01,  # 0x3ecccccd
        2.8571429849e-01,  # 0x3e924925
        2.2222198546e-01,  # 0x3e638e29
        1.8183572590e-01,  # 0x3e3a3325
        1.5313838422e-01,  # 0x3e1cd04f
        1.4798198640e-01,  # 0x3e178897
    )
)

_ENABLED = True  # False: programs compiled from now on keep NumPy's log1p calls (A/B)


def _build(numba):
    """The inline njit function log1p32(x) (float32 -> float32)."""
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
    ln2_hi, ln2_lo = _LN2_HI, _LN2_LO
    lp1, lp2, lp3, lp4, lp5, lp6, lp7 = _LP
    zero, one, two, half = _F(0.0), _F(1.0), _F(2.0), _F(0.5)
    minus_inf, nan = _F(-np.inf), _F(np.nan)

    @numba.njit(inline="always", error_model="numpy")
    def log1p32(x):
        hx = bits(x)
        ax = hx & 0x7FFFFFFF
        below = hx < 0x3ED413D7  # x < 0.41422 (and every negative x)
        # -0.2929 < x < 0.41422: f = x, k = 0 (the C code's k = 0, hu = 1)
        k0 = below & ((hx > 0) | (hx <= -0x416A09E1))  # (hx <= 0xbe95f61f as int32)
        # otherwise u = 1 + x (u = x past 2^53), k its exponent, c the correction term
        big = hx >= 0x5A000000
        u1 = one + x
        hu1 = bits(u1)
        k1 = i32(hu1 >> 23) - 127
        c1 = (one - (u1 - x)) if k1 > 0 else (x - (u1 - one))
        c1 = c1 / u1
        # (integer work in int32, as the C code's: numba widens to int64, which AVX2
        # cannot convert to float32 in vectors)
        hu = hx if big else hu1
        c = zero if big else c1
        k = i32(i32(hu >> 23) - 127)
        hu = i32(hu & 0x007FFFFF)
        upper = hu >= 0x3504F7
        u = from_bits(i32(hu | (0x3F000000 if upper else 0x3F800000)))  # u (or u / 2)
        k = i32(k + 1) if upper else k
        hu = i32(i32(0x00800000 - hu) >> 2) if upper else hu
        f = u - one
        f = x if k0 else f
        k = i32(0) if k0 else k
        hu = i32(1) if k0 else hu
        c = zero if k0 else c
        fk = _F(k)
        hfsq = (half * f) * f
        # |f| < 2^-20
        r_small = hfsq * (one - lp1 * f)
        tiny_k0 = f - r_small
        tiny_k = fk * ln2_hi - ((r_small - (fk * ln2_lo + c)) - f)
        exact = zero if k == 0 else fk * ln2_hi + (c + fk * ln2_lo)  # f == 0
        tiny = exact if f == zero else (tiny_k0 if k == 0 else tiny_k)
        s = f / (two + f)
        z = s * s
        r = z * (lp1 + z * (lp2 + z * (lp3 + z * (lp4 + z * (lp5 + z * (lp6 + z * lp7))))))
        main_k0 = f - (hfsq - s * (hfsq + r))
        main_k = fk * ln2_hi - ((hfsq - (s * (hfsq + r) + (fk * ln2_lo + c))) - f)
        out = main_k0 if k == 0 else main_k
        out = tiny if hu == 0 else out
        # |x| < 2^-29: x - x * x / 2 (x itself below 2^-54); x <= -1: -inf or nan
        small = x if ax < 0x24800000 else x - (x * x) * half
        out = small if below & (ax < 0x31000000) else out
        out = (x + x) if hx >= 0x7F800000 else out  # +inf, nan
        out = (minus_inf if x == -one else nan) if below & (ax >= 0x3F800000) else out
        return out

    return log1p32


def _inputs() -> np.ndarray:
    """The check's inputs, with 40 values either side of each of the C code's
    thresholds (where its paths meet)."""
    edges = [0x3ED413D7, 0xBE95F61F, 0x5A000000, 0x31000000, 0xB1000000, 0x24800000]
    edges += [0xA4800000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0x3F3504F7, 0x3F350000]
    return _exp.probe_inputs(np.array(edges, np.uint32).view(_F))


def check() -> bool:
    """Whether the compiled log1p gives np.log1p's bits here (compiles it; run once)."""
    return _INLINE.check()


def verdict():
    """`check()`'s result, or None before it has run (False while not `_ENABLED`)."""
    return _INLINE.verdict() if _ENABLED else False


_INLINE = _exp.InlineFunction("_log1p32", "ASYNCFLOW_INLINE_LOG1P", _build, _inputs, np.log1p)
_state = _INLINE.state
namespace = _INLINE.namespace
