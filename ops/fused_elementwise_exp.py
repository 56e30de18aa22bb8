"""NumPy's float32 exp as an inline function of the compiled element-wise loops (numba).

The LSTM cell's forward program computes three Sigmoids, each NumPy's four passes
(negative, exp, add one, reciprocal); staged (fused_elementwise_jit._staged) the
negation and the reciprocal run in compiled loops but exp stays a NumPy call between
them: a pass of its own over a [batch, units] array, an array written and read back,
a Python call.  In a loop of its own, exp costs about what NumPy's SIMD call costs
(0.4-0.5 ns an element on this machine, vectorized), so the Sigmoid becomes one more
expression of a loop.

numba's own exp calls the C library's (other bits, scalar), so this is NumPy's
algorithm for float32, the one its AVX2/AVX-512F loops run (simd_exp_FLOAT in
numpy/_core/src/umath/loops_exponent_log.dispatch.c.src): NaN, overflow (x >= xmax)
and underflow (x <= xmin) lanes set apart, quadrant = rint(x * log2e) by adding and
subtracting 1.5 * 2^23, a three-step Cody-Waite reduction with fused multiply-adds, a
5th / 2nd degree rational function evaluated with fused multiply-adds, one IEEE
division, and scaling by 2^quadrant (AVX-512's scalef: one rounding; here two exact
power-of-two products, the second rounding once into the subnormal range).  Every
float32 input gave NumPy 2's bits on the project machine (all 2^32 of them, AMD EPYC,
AVX-512F dispatch; benchmarks/README.md "Sigmoid inside the compiled loops").

Since another NumPy build or CPU may take another exp loop (a scalar libm one without
AVX2, say), `check()` compares this function with `np.exp` on a fixed set of inputs
(all specials, both ends of the range, ~260,000 values spread over the bit patterns)
before any loop uses it; where one differs, programs keep NumPy's exp calls
(fused_elementwise_jit's staged programs), with NumPy's bits either way.
`ASYNCFLOW_INLINE_EXP=0` keeps them too (A/B).
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

from asyncflow.ops import fused_updates, jit_cache, jit_fork

__all__ = [
    "check",
    "InlineFunction",
    "pow2_intrinsic",
    "matches_numpy",
    "namespace",
    "probe_inputs",
    "same_bits",
    "verdict",
]

_F = np.float32
# numpy/_core/src/common/npy_config... npy_simd_data.h's float32 exp constants.
_MAGIC = _F(12582912.0)  # 0x1.8p+23: x + magic - magic rounds x to an integer
_LOG2E = _F(1.442695040888963407359924681001892137)
_C1 = _F(-6.93145752e-1)  # -ln 2, high part
_C2 = _F(-1.42860677e-6)  # -ln 2, low part
_P = tuple(
    _F(v)
    for v in (
        9.999999999980870924916e-01,
        7.257664613233124478488e-01,
        2.473615434895520810817e-01,
        5.114512081637298353406e-02,
        6.757896990527504603057e-03,
        5.082762527590693718096e-04,
    )
)
_Q = (_F(1.0), _F(-2.742335390411667452936e-01), _F(2.159509375685829852307e-02))
_XMAX = _F(88.72283935546875)
_XMIN = _F(-103.97208404541015625)


def pow2_intrinsic():
    """A numba intrinsic pow2(q): 2^q (float32) for an integral float32 q in [-126, 127],
    made from its bits (the exponent field q + 127), exact."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def pow2(typingctx, q):
        sig = types.float32(types.float32)

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            qi = builder.fptosi(args[0], i32)
            bits = builder.shl(builder.add(qi, ir.Constant(i32, 127)), ir.Constant(i32, 23))
            return builder.bitcast(bits, ir.FloatType())

        return sig, codegen

    return pow2


def _build(numba):
    """The inline njit function exp32(x) (float32 -> float32)."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def fma32(typingctx, a, b, c):
        sig = types.float32(types.float32, types.float32, types.float32)

        def codegen(context, builder, signature, args):
            flt = ir.FloatType()
            fn = builder.module.declare_intrinsic(
                "llvm.fma", [flt], ir.FunctionType(flt, [flt, flt, flt])
            )
            return builder.call(fn, args)

        return sig, codegen

    pow2 = pow2_intrinsic()

    magic, log2e, c1, c2 = _MAGIC, _LOG2E, _C1, _C2
    p0, p1, p2, p3, p4, p5 = _P
    q0, q1, q2 = _Q
    xmax, xmin = _XMAX, _XMIN
    zero, inf, nan = _F(0.0), _F(np.inf), _F(np.nan)
    lo, hi = _F(-125.0), _F(127.0)

    @numba.njit(inline="always", error_model="numpy")
    def exp32(x):
        is_nan = x != x
        big = x >= xmax
        small = x <= xmin
        xc = min(max(x, xmin), xmax)  # (the lanes set apart compute on anything finite)
        k = xc * log2e
        k = k + magic
        k = k - magic
        r = fma32(k, c1, xc)
        r = fma32(k, c2, r)
        r = fma32(k, zero, r)
        num = fma32(p5, r, p4)
        num = fma32(num, r, p3)
        num = fma32(num, r, p2)
        num = fma32(num, r, p1)
        num = fma32(num, r, p0)
        den = fma32(q2, r, q1)
        den = fma32(den, r, q0)
        p = num / den
        # p * 2^k with one rounding: 2^k1 keeps p normal and exact, 2^(k - k1) (k - k1
        # in [-25, 1]) rounds once where the result is subnormal.
        k1 = min(max(k, lo), hi)
        p = (p * pow2(k1)) * pow2(k - k1)
        p = nan if is_nan else p
        p = inf if big else p
        return zero if small else p

    return exp32


def _inputs() -> np.ndarray:
    """The check's inputs, with 40 values either side of the range's ends (where the
    lanes set apart begin, and where results turn subnormal)."""
    return probe_inputs((_XMAX, _XMIN, _F(-87.33654), _F(-103.0), _F(88.0)))


def check() -> bool:
    """Whether the compiled exp gives np.exp's bits here (compiles it; run once)."""
    return _INLINE.check()


def probe_inputs(edges) -> np.ndarray:
    """float32: every 16,411th bit pattern, the specials, and 40 values either side of
    each of `edges` (where an inline function's paths meet)."""
    bits = np.arange(0, 1 << 32, 16411, dtype=np.uint64).astype(np.uint32)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45]
    for edge in edges:
        for direction in (_F(np.inf), _F(-np.inf)):
            v = _F(edge)
            for _ in range(40):
                values.append(v)
                v = np.nextafter(v, direction)
    return np.concatenate([bits.view(_F), np.array(values, _F)])


class InlineFunction:
    """One inline float32 function of the compiled loops (exp, log1p, tanh): built and
    checked once, its verdict, and the name the loops' sources call it by.

    `check()` runs once under a lock: `build(numba)` compiled and compared with
    `reference` on `inputs()` (`matches_numpy`); the verdict goes in state["ok"], the
    function in state["fn"].  The environment variable `switch` at 0 fails it."""

    def __init__(self, name: str, switch: str, build, inputs, reference):
        self.name, self.switch = name, switch
        self._build, self._inputs, self._reference = build, inputs, reference
        self.lock = threading.Lock()
        self.state: dict = {}  # "fn": the inline function; "ok": the check's verdict
        jit_fork.at_fork_in_child(self._in_child)

    def _in_child(self, mid_compile: bool) -> None:
        self.lock = threading.Lock()  # (a check running at the fork held it)

    def check(self) -> bool:
        with self.lock:
            state = self.state
            if "ok" in state:
                return state["ok"]
            ok = False
            numba = fused_updates.import_numba()
            if numba is not None and os.environ.get(self.switch, "") != "0":
                # A verdict this machine recorded with these versions (ops/jit_cache.py)
                # spares the check's compiles (~0.5-1 s a function each process).
                module_file = sys.modules[self._build.__module__].__file__
                cached = jit_cache.read_verdict(self.name, module_file)
                try:
                    fn = self._build(numba)  # (lazy: numba compiles it at a loop's compile)
                    if cached is None:
                        ok = matches_numpy(numba, fn, self._inputs(), self._reference)
                        jit_cache.write_verdict(self.name, module_file, ok)
                    else:
                        ok = cached
                    state["fn"] = fn
                except Exception:  # (numba could not build it: NumPy's calls stay)
                    ok = False
            state["ok"] = ok
            return ok

    def verdict(self):
        """`check()`'s result, or None before it has run."""
        return self.state.get("ok")

    def namespace(self) -> dict:
        """Names the compiled loops' sources may use (after a passing `check()`)."""
        return {self.name: self.state["fn"]} if self.state.get("ok") else {}


def matches_numpy(numba, fn, xs, ufunc) -> bool:
    """Whether the inline float32 function `fn`, called in a compiled loop, gives
    `ufunc`'s bits for every value of `xs` (NaN where it gives NaN)."""

    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    got = np.empty_like(xs)
    loop(xs, got)
    with np.errstate(all="ignore"):
        return same_bits(ufunc(xs), got)


def same_bits(a, b) -> bool:
    """Whether float arrays a and b hold the same bits, NaN where the other has NaN
    (whatever its payload)."""
    nan = np.isnan(a)
    ints = f"i{a.itemsize}"
    return bool(
        np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(ints), b[~nan].view(ints))
    )


_INLINE = InlineFunction("_exp32", "ASYNCFLOW_INLINE_EXP", _build, _inputs, np.exp)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
