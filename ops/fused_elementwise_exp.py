"""TF's float32 exp as an inline function of the compiled element-wise loops (numba),
and the machinery the loops' other inline functions share (`InlineFunction`, the
check's `probe_inputs`, `pow2_intrinsic`).

The Exp kernel computes TF's own float32 exp where numba runs (ops/elementwise._exp32,
`tf_exp`: Eigen's exp, ~22 NumPy passes).  A lone float32 Exp fuses alone
(ops/fused_elementwise.py `_ALONE`), so its program's loop runs this function: a clamp,
a floor, a Cody-Waite reduction, a polynomial of degree 6 evaluated as Eigen's steps,
and 2^m as two exact powers of two from their bits (m in [-150, 128]; the second
product rounds once, and a result below 2^-126 is flushed to zero as the kernels run).
It is branch-free float32 arithmetic, so LLVM vectorizes a loop that holds it (about
NumPy's own SIMD exp's cost, ~0.5 ns an element), where the NumPy passes cost ~10x that.

The loop makes the same IEEE operations in the same order as the NumPy passes (numba
does not contract a multiply and an add into an FMA), so it gives their bits for the
elements TF computes in packets: all but the last size % 8, which TF computes by
Eigen's scalar path (the C library's expf).  So a loop inlines Exp only where its
values' size is a multiple of 8 (fused_elementwise_jit); elsewhere the kernel's NumPy
function runs between compiled stages.  `check()` compares the two on a fixed set of
inputs (specials, both ends of the range, where m reaches 128, where results flush to
zero, ~260,000 values spread over the bit patterns) before any loop uses it; where one
differs, programs keep the kernel's calls.  `ASYNCFLOW_INLINE_EXP=0` keeps them too
(A/B).
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

from asyncflow.devices import denormal
from asyncflow.ops import elementwise as _ew
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
    """The inline njit function exp32(x) (float32 -> float32), for elements of whole
    packets."""
    pow2 = pow2_intrinsic()
    lo, hi, half, log2e = _ew._SIG_LO, _ew._EXP_HI, _ew._SIG_HALF, _ew._SIG_LOG2E
    c1, c2 = _ew._SIG_C1, _ew._SIG_C2
    p2, p3, p4, p5, p6 = _ew._EXP_P2, _ew._EXP_P3, _ew._EXP_P4, _ew._EXP_P5, _ew._EXP_P6
    one = _F(1.0)

    @numba.njit(inline="always", error_model="numpy")
    def exp32(x):
        t = hi if x > hi else x  # (NaN stays NaN, as NumPy's clip)
        t = lo if t < lo else t
        m = np.floor(t * log2e + half)
        r = m * c1 + t
        r = m * c2 + r
        r2 = r * r
        even = ((r2 * p6 + p4) * r2) + p2
        p = r2 * (r * (r2 * p5 + p3) + even) + (r + one)
        h = np.floor(m * half)  # 2^m = 2^h 2^(m - h), both in [-75, 64]
        return (p * pow2(h)) * pow2(m - h)

    return exp32


def _inputs() -> np.ndarray:
    """The check's inputs (a multiple of 8 of them: every one a packet's), with 40
    values either side of the clamps, of where m reaches 128, of where results flush to
    zero, and of 0."""
    edges = (_ew._EXP_HI, _ew._SIG_LO, _F(88.3762626647949), _F(-87.33654), _F(0.0))
    xs = probe_inputs(edges)
    pad = -xs.size % _ew.SIGMOID_PACKET
    return np.concatenate([xs, np.zeros(pad, _F)])


def _reference(x):
    return _ew.exp(np, x)


def check() -> bool:
    """Whether the compiled exp gives the Exp kernel's bits here (compiles it; run
    once)."""
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
                # A passing verdict this machine recorded with these versions
                # (ops/jit_cache.py) spares the check's compiles (~0.5-1 s a function each
                # process).  Only a pass is recorded: the record's key reads the sources on
                # disk when first asked, so a process whose modules were edited under it
                # could record a failure of code it no longer matches, which would keep
                # the function out of every later process's loops (seen while editing the
                # sources with tests running); a failure costs its own process the check.
                module_file = sys.modules[self._build.__module__].__file__
                # (a verdict holds for one denormal mode: kept apart where kernels do not
                # flush, ASYNCFLOW_FLUSH_DENORMALS=0 or another platform)
                record = self.name if denormal.active() else f"{self.name}_unflushed"
                cached = jit_cache.read_verdict(record, module_file)
                try:
                    fn = self._build(numba)  # (lazy: numba compiles it at a loop's compile)
                    if cached is not True:
                        # Under the kernels' denormal modes, whatever the caller's: the
                        # loops run inside kernels, and the two may differ only there (an
                        # x * 1 that LLVM folds into x lets a denormal x through where the
                        # NumPy pass flushes it)
                        token = denormal.enter()
                        try:
                            ok = matches_numpy(numba, fn, self._inputs(), self._reference)
                        finally:
                            denormal.leave(token)
                        if ok:
                            jit_cache.write_verdict(record, module_file, ok)
                    else:
                        ok = True
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


_INLINE = InlineFunction("_exp32", "ASYNCFLOW_INLINE_EXP", _build, _inputs, _reference)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
