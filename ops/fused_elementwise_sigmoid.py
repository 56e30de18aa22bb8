"""TF's float32 sigmoid as an inline function of the compiled element-wise loops (numba).

The Sigmoid kernel computes TF's own float32 sigmoid (ops/elementwise._sigmoid32:
Eigen's logistic function, ~25 NumPy passes): an exp(x/2) by a Cody-Waite reduction and
a polynomial, squared, then e / (1 + e).  Written for one element it is branch-free
float32 arithmetic (a clamp, a floor, multiplies and adds, a power of two from its bits,
one division), so LLVM vectorizes a loop that holds it; an LSTM cell's three Sigmoids
then cost one division each inside the cell's loop, where NumPy's exp and reciprocal
took two.

The loop makes the same IEEE operations in the same order as the NumPy passes (numba
does not contract a multiply and an add into an FMA), so it gives their bits for the
elements TF computes in packets: all but the last size % 8 (`SIGMOID_PACKET`), which
TF computes by Eigen's scalar path.  So a loop inlines Sigmoid only where its values'
size is a multiple of 8 (fused_elementwise_jit); elsewhere the kernel's NumPy function
runs between compiled stages.  `check()` compares the two on a fixed set of inputs
(specials, both sides of the clamp and of -104, ~260,000 values spread over the bit
patterns) before any loop uses it; where one differs, programs keep the NumPy passes.
`ASYNCFLOW_INLINE_SIGMOID=0` keeps them too (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp

__all__ = ["check", "namespace", "verdict"]

_F = np.float32


def _build(numba):
    """The inline njit function sigmoid32(x) (float32 -> float32), for elements of
    whole packets."""
    pow2 = _exp.pow2_intrinsic()  # (2^m for an integral m in [-126, 127], from its bits)
    hi, lo, half, log2e = _ew._SIG_HI, _ew._SIG_LO, _ew._SIG_HALF, _ew._SIG_LOG2E
    c1, c2 = _ew._SIG_C1, _ew._SIG_C2
    p2, p3, p4, p5 = _ew._SIG_P2, _ew._SIG_P3, _ew._SIG_P4, _ew._SIG_P5
    one, zero = _F(1.0), _F(0.0)

    @numba.njit(inline="always", error_model="numpy")
    def sigmoid32(x):
        t = hi if x > hi else x  # (NaN stays NaN, as NumPy's minimum)
        t = t * half
        m = np.floor(t * log2e + half)
        r = m * c1 + t
        r = m * c2 + r
        r2 = r * r
        even = r2 * p4 + p2
        p = r * (r2 * p5 + p3) + even
        p = r2 * p + (r + one)
        e = p * pow2(m)
        e = e * e
        y = e / (e + one)
        return zero if x < lo else y

    return sigmoid32


def _inputs() -> np.ndarray:
    """The check's inputs (a multiple of 8 of them: every one a packet's), with 40
    values either side of the clamp and of the cut to 0."""
    xs = _exp.probe_inputs((_ew._SIG_HI, _ew._SIG_LO, _F(-87.0), _F(0.0)))
    pad = -xs.size % _ew.SIGMOID_PACKET
    return np.concatenate([xs, np.zeros(pad, _F)])


def _reference(x):
    return _ew.sigmoid(np, x)


def check() -> bool:
    """Whether the compiled sigmoid gives the Sigmoid kernel's bits here (compiles it;
    run once)."""
    return _INLINE.check()


_INLINE = _exp.InlineFunction(
    "_sigmoid32", "ASYNCFLOW_INLINE_SIGMOID", _build, _inputs, _reference
)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
