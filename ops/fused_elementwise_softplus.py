"""TF's float32 softplus as an inline function of the compiled element-wise loops (numba).

The Softplus kernel computes TF's own float32 softplus where numba runs
(ops/elementwise._softplus_tf: x, exp(x) or Eigen's log1p of exp(x) by two thresholds,
TF's exp and log inside, ~55 NumPy passes).  Written for one element it is the inline
exp and log of fused_elementwise_exp and fused_elementwise_log, a division and a
multiply, and two selects: a lone float32 Softplus fuses alone (ops/fused_elementwise.py
`_ALONE`) and runs as one loop at about the cost of NumPy's old four passes.

The loop makes the same IEEE operations in the same order as the NumPy passes, so it
gives their bits for the elements TF computes in packets: all but the last size % 8,
which TF computes by Eigen's scalar path (the C library's expf and log1pf).  So a loop
inlines Softplus only where its values' size is a multiple of 8 (fused_elementwise_jit).
`check()` compares the two on a fixed set of inputs (specials, both sides of the
thresholds, ~260,000 values spread over the bit patterns) before any loop uses it;
where one differs, programs keep the kernel's calls.  `ASYNCFLOW_INLINE_SOFTPLUS=0`
keeps them too (A/B).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp
from asyncflow.ops import fused_elementwise_log as _log

__all__ = ["check", "namespace", "verdict"]

_F = np.float32


def _build(numba):
    """The inline njit function softplus32(x) (float32 -> float32), for elements of
    whole packets."""
    exp32, log32 = _exp._build(numba), _log._build(numba)
    t = _ew._SP_T32
    minus_t, one = _F(-t), _F(1.0)

    @numba.njit(inline="always", error_model="numpy")
    def softplus32(x):
        e = exp32(x)
        y = e + one
        y = e * (log32(y) / (y - one))
        y = e if x < t else y
        return x if x > minus_t else y

    return softplus32


def _inputs() -> np.ndarray:
    """The check's inputs (a multiple of 8 of them: every one a packet's), with 40
    values either side of each threshold and of 0."""
    t = _ew._SP_T32
    xs = _exp.probe_inputs((t, _F(-t), _F(0.0)))
    pad = -xs.size % _ew.SIGMOID_PACKET
    return np.concatenate([xs, np.zeros(pad, _F)])


def _reference(x):
    return _ew.softplus(np, x)


def check() -> bool:
    """Whether the compiled softplus gives the Softplus kernel's bits here (compiles it;
    run once)."""
    return _INLINE.check()


_INLINE = _exp.InlineFunction(
    "_softplus32", "ASYNCFLOW_INLINE_SOFTPLUS", _build, _inputs, _reference
)
_state = _INLINE.state
verdict = _INLINE.verdict
namespace = _INLINE.namespace
