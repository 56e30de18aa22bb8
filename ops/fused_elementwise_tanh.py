"""TF's float32 tanh as an inline function of the compiled element-wise loops (numba).

The Tanh kernel computes TF's own float32 tanh (ops/elementwise.tanh: Eigen's rational
function, 20 NumPy passes).  An LSTM cell's forward program holds two Tanhs; as NumPy
calls between compiled stages (fused_elementwise_jit._staged) each is a pass of its own
with arrays written and read back.  The same function written for one element is
branch-free float32 arithmetic (two clamps, nine multiplies and adds, a division), so
LLVM vectorizes a loop that holds it: the whole cell program becomes one loop.

The loop makes the same IEEE operations in the same order as the NumPy passes (numba
does not contract a multiply and an add into an FMA), so it gives their bits.
`check()` still compares the two on a fixed set of inputs (specials, both sides of the
clamp, ~260,000 values spread over the bit patterns) before any loop uses it; where one
differs, programs keep the NumPy passes.  `ASYNCFLOW_INLINE_TANH=0` keeps them too (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp

__all__ = ["check", "namespace", "verdict"]

_F = np.float32


def _build(numba):
    """The inline njit function tanh32(x) (float32 -> float32)."""
    c = _ew._TANH_CLAMP
    p0, p1, p2, p3 = _ew._TANH_P
    q0, q1, q2, q3, q4 = _ew._TANH_Q
    minus_c = _F(-c)

    @numba.njit(inline="always", error_model="numpy")
    def tanh32(x):
        t = c if x > c else x  # (NaN stays NaN, as NumPy's minimum and maximum)
        t = minus_c if t < minus_c else t
        x2 = t * t
        p = ((x2 * p0 + p1) * x2 + p2) * x2 + p3
        q = (((x2 * q0 + q1) * x2 + q2) * x2 + q3) * x2 + q4
        return ((x2 * t) * p + t) / q

    return tanh32


def _inputs() -> np.ndarray:
    """The check's inputs, with 40 values either side of the clamp."""
    c = _ew._TANH_CLAMP
    return _exp.probe_inputs((c, -c, _F(0.0004), _F(1.0)))


def _reference(x):
    return _ew.tanh(np, x)


def check() -> bool:
    """Whether the compiled tanh gives the Tanh kernel's bits here (compiles it; run
    once)."""
    return _INLINE.check()


_INLINE = _exp.InlineFunction("_tanh32", "ASYNCFLOW_INLINE_TANH", _build, _inputs, _reference)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
