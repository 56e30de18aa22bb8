"""Compiled loops (numba) for ops/eigen_reduce: TF's addition orders in one pass.

eigen_reduce's NumPy forms follow TF's order with several passes (a cumulative sum for
each one-by-one sum, a reshape per packet accumulator); these loops do the same IEEE
additions in the same order, each in one pass: no fast-math, so no reassociation, and
the bits are the NumPy forms' (tests/ops/test_reduce_tf_bits.py runs both against TF's
recorded outputs).  The lanes of a packet accumulator are independent, so LLVM may
vectorize across them (and across the columns of a column sum) without reordering any
value's additions.

Optional, as ops/summary_jit.py: without numba, with ASYNCFLOW_NO_NUMBA=1, or until the
loops are compiled (on a background thread started by the first reduction that wants
them; no kernel waits for a compile), `loops()` is None and the NumPy forms run.
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import jit_loops

__all__ = ["loops", "warm"]


def _leaf(x, s, n, acc):
    """Eigen's vectorized InnerMostDimReducer of x[s:s+n] (no tree): four packet
    accumulators (acc: [4, lanes], scratch) over strides of four packets, added
    0+1, +2, +3, the whole packets left, then the last values one by one from 0 plus
    the lanes added pairwise by halves."""
    p = acc.shape[1]
    zero = x.dtype.type(0)
    for k in range(4):
        for lane in range(p):
            acc[k, lane] = zero
    start = 0
    if n >= 4 * p:
        v4 = n // (4 * p) * (4 * p)
        for j in range(s, s + v4, 4 * p):
            for k in range(4):
                for lane in range(p):
                    acc[k, lane] += x[j + k * p + lane]
        for lane in range(p):
            acc[0, lane] = ((acc[0, lane] + acc[1, lane]) + acc[2, lane]) + acc[3, lane]
        start = v4
    while start + p <= n:
        for lane in range(p):
            acc[0, lane] += x[s + start + lane]
        start += p
    tail = zero
    for j in range(s + start, s + n):
        tail += x[j]
    w = p
    while w > 1:
        h = w // 2
        for lane in range(h):
            acc[0, lane] = acc[0, lane] + acc[0, lane + h]
        w = h
    return tail + acc[0, 0]


def _tree(x, first, n, origin, cap, acc, stack):
    """Eigen's tree InnerMostDimReducer of n values from `first` (counted from the
    tensor's start: it places the split points; x[first - origin] is the first value):
    runs over `cap` values split in two at a packet boundary, (0 + left) + right.  The
    recursion walks an explicit stack (`stack`: [64, 3] int64 scratch)."""
    p = acc.shape[1]
    zero = x.dtype.type(0)
    values = np.empty(64, x.dtype)
    top, nv = 0, 0
    stack[0, 0], stack[0, 1], stack[0, 2] = first, n, 0
    while top >= 0:
        f, m, stage = stack[top, 0], stack[top, 1], stack[top, 2]
        if m <= cap:
            values[nv] = _leaf(x, f - origin, m, acc) + zero
            nv += 1
            top -= 1
            continue
        split = p * ((f + (m + 1) // 2 + p - 1) // p)
        left = min(split - f, m)
        if stage == 0:
            stack[top, 2] = 1
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2] = f, left, 0
        elif stage == 1 and left < m:
            stack[top, 2] = 2
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2] = split, m - left, 0
        elif stage == 1:
            values[nv - 1] = values[nv - 1] + zero
            top -= 1
        else:
            values[nv - 2] = (values[nv - 2] + zero) + values[nv - 1]
            nv -= 1
            top -= 1
    return values[0]


def _rows(x, rows, n, own_tensor, cap, acc, stack, out):
    """Each of `rows` rows of n values of flat x reduced by `_tree` into out (a row of
    one tensor starts at r * n; else each row is a tensor of its own)."""
    for r in range(rows):
        origin = 0 if own_tensor else -r * n
        first = r * n if own_tensor else 0
        out[r] = _tree(x, first, n, origin, cap, acc, stack)


def _middle(x, p, out):
    """x [A, B, C] reduced over B into out [A, C] as Eigen's reducer that keeps the
    inner axis: four row accumulators (B >= 16) at each output packet within a row,
    else one by one from 0."""
    a_n, b_n, c_n = x.shape
    total = a_n * c_n
    zero = x.dtype.type(0)
    acc = np.empty((4, c_n), x.dtype)
    u = b_n // 4 * 4
    for a in range(a_n):
        if b_n >= 16:
            for k in range(4):
                for c in range(c_n):
                    acc[k, c] = zero
            for j in range(0, u, 4):
                for c in range(c_n):
                    acc[0, c] += x[a, j, c]
                    acc[1, c] += x[a, j + 1, c]
                    acc[2, c] += x[a, j + 2, c]
                    acc[3, c] += x[a, j + 3, c]
            for c in range(c_n):
                acc[0, c] = ((acc[0, c] + acc[1, c]) + acc[2, c]) + acc[3, c]
            for j in range(u, b_n):
                for c in range(c_n):
                    acc[0, c] += x[a, j, c]
            for c in range(c_n):
                out[a, c] = acc[0, c]
        for c in range(c_n):
            o = a * c_n + c
            po = o - o % p
            if b_n < 16 or po + p > total or po % c_n + p > c_n:
                s = zero
                for j in range(b_n):
                    s += x[a, j, c]
                out[a, c] = s


def _colsum(x, out):
    """x [R, C] summed over R one row at a time from 0 into out [C]."""
    r_n, c_n = x.shape
    zero = x.dtype.type(0)
    for c in range(c_n):
        out[c] = zero
    for r in range(r_n):
        for c in range(c_n):
            out[c] += x[r, c]


_NAMES = ("_leaf", "_tree", "_rows", "_middle", "_colsum")


def _build(numba) -> dict:
    """The loops compiled for float32 and float64: on jit_loops' background thread."""
    jit = numba.njit(nogil=True, cache=True, error_model="numpy")
    fns = {}
    for name in _NAMES:  # (each before the loops that call it compile)
        fns[name] = globals()[name] = jit(globals()[name])
    stack = np.zeros((64, 3), np.int64)
    for dtype in (np.float32, np.float64):
        x = np.ones(4, dtype)
        acc = np.zeros((4, 32 // x.itemsize), dtype)
        fns["_rows"](x, 2, 2, True, 1024 * acc.shape[1], acc, stack, np.zeros(2, dtype))
        fns["_middle"](x.reshape(1, 2, 2), acc.shape[1], np.zeros((1, 2), dtype))
        fns["_colsum"](x.reshape(2, 2), np.zeros(2, dtype))
    return fns


_JIT = jit_loops.BackgroundLoops("the TF reduction loops", _build)


def loops() -> dict | None:
    """{name: compiled loop}, or None while they are not ready: the first request starts
    their compile on a background thread, and the NumPy forms run meanwhile."""
    return _JIT.loops() if _JIT.get(_NAMES[0]) is not None else None


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the loops now and wait (tests, benchmarks); whether they are ready."""
    return _JIT.warm(timeout)
