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

_PACKET_BYTES = 32  # (eigen_reduce's: float32 and float64 only, 8 and 4 lanes)


def _leaf(x, s, n, acc):
    """Eigen's vectorized InnerMostDimReducer of x[s:s+n] (no tree): four packet
    accumulators (acc: 4 * lanes values, scratch, packet k at [k * lanes:]) over
    strides of four packets, added 0+1, +2, +3, the whole packets left, then the last
    values one by one from 0 plus the lanes added pairwise by halves."""
    q4 = acc.size
    p = q4 // 4
    zero = x.dtype.type(0)
    xs = x[s : s + n]  # (indices from 0, and a 2-D view below: LLVM vectorizes these loops)
    start = 0
    if n >= q4:
        for q in range(q4):
            acc[q] = zero
        v4 = n // q4 * q4
        # (a column sum of x as [v4 / q4, q4]: each accumulator adds its values in order)
        m = xs[:v4].reshape((v4 // q4, q4))
        for r in range(v4 // q4):
            for q in range(q4):
                acc[q] += m[r, q]
        for q in range(p):
            acc[q] = ((acc[q] + acc[p + q]) + acc[2 * p + q]) + acc[3 * p + q]
        start = v4
    else:
        for q in range(p):
            acc[q] = zero
    while start + p <= n:
        for q in range(p):
            acc[q] += xs[start + q]
        start += p
    tail = zero
    for j in range(start, n):
        tail += xs[j]
    w = p
    while w > 1:
        h = w // 2
        for q in range(h):
            acc[q] = acc[q] + acc[q + h]
        w = h
    return tail + acc[0]


def _tree(x, first, n, origin, cap, acc, stack, values):
    """Eigen's tree InnerMostDimReducer of n values from `first` (counted from the
    tensor's start: it places the split points; x[first - origin] is the first value):
    runs over `cap` values split in two at a packet boundary, (0 + left) + right.  The
    recursion walks an explicit stack (`stack`: [64, 3] int64, `values`: 64, scratch)."""
    zero = x.dtype.type(0)
    if n <= cap:
        return _leaf(x, first - origin, n, acc) + zero
    p = acc.size // 4
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


def _full(x, size, blocks):
    """All of flat x: one tree (blocks 1), or `blocks` trees of `size` values added in
    order to the tree of the values after them (Eigen's threaded full reducer)."""
    p = _PACKET_BYTES // x.itemsize
    cap = 1024 * p
    acc = np.empty(4 * p, x.dtype)
    stack = np.empty((64, 3), np.int64)
    values = np.empty(64, x.dtype)
    n = x.size
    if blocks == 1:
        return _tree(x, 0, n, 0, cap, acc, stack, values)
    rest = n - blocks * size
    total = x.dtype.type(0)
    if rest:
        total = _tree(x, blocks * size, rest, 0, cap, acc, stack, values)
    for b in range(blocks):
        total = total + _tree(x, b * size, size, 0, cap, acc, stack, values)
    return total


def _rows(x, rows, n, own_tensor, out):
    """Each of `rows` rows of n values of flat x reduced by `_tree` into out (a row of
    one tensor starts at r * n; else each row is a tensor of its own)."""
    p = _PACKET_BYTES // x.itemsize
    cap = 1024 * p
    acc = np.empty(4 * p, x.dtype)
    zero = x.dtype.type(0)
    if n < 4 * p:  # (short rows, _leaf's steps inline: a call and a view a row cost more)
        for r in range(rows):
            base = r * n
            for q in range(p):
                acc[q] = zero
            start = 0
            while start + p <= n:
                for q in range(p):
                    acc[q] += x[base + start + q]
                start += p
            tail = zero
            for j in range(start, n):
                tail += x[base + j]
            w = p
            while w > 1:
                w //= 2
                for q in range(w):
                    acc[q] = acc[q] + acc[q + w]
            out[r] = (tail + acc[0]) + zero
        return
    if n <= cap:  # (no tree: each row one leaf)
        for r in range(rows):
            out[r] = _leaf(x, r * n, n, acc) + zero
        return
    stack = np.empty((64, 3), np.int64)
    values = np.empty(64, x.dtype)
    for r in range(rows):
        origin = 0 if own_tensor else -r * n
        first = r * n if own_tensor else 0
        out[r] = _tree(x, first, n, origin, cap, acc, stack, values)


def _middle(x, out):
    """x [A, B, C] reduced over B into out [A, C] as Eigen's reducer that keeps the
    inner axis: four row accumulators (B >= 16) at each output packet within a row,
    else one by one from 0."""
    a_n, b_n, c_n = x.shape
    p = _PACKET_BYTES // x.itemsize
    total = a_n * c_n
    zero = x.dtype.type(0)
    acc = np.empty((4, c_n), x.dtype)
    u = b_n // 4 * 4
    for a in range(a_n):
        xa = x[a]  # (2-D views indexed from 0: LLVM vectorizes over the columns)
        oa = out[a]
        if b_n >= 16:
            a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
            for c in range(c_n):
                a0[c] = zero
                a1[c] = zero
                a2[c] = zero
                a3[c] = zero
            u8 = b_n // 8 * 8
            for j in range(0, u8, 8):  # (two of each accumulator's rows a pass, in order)
                for c in range(c_n):
                    a0[c] = (a0[c] + xa[j, c]) + xa[j + 4, c]
                    a1[c] = (a1[c] + xa[j + 1, c]) + xa[j + 5, c]
                    a2[c] = (a2[c] + xa[j + 2, c]) + xa[j + 6, c]
                    a3[c] = (a3[c] + xa[j + 3, c]) + xa[j + 7, c]
            for j in range(u8, u, 4):
                x0, x1, x2, x3 = xa[j], xa[j + 1], xa[j + 2], xa[j + 3]
                for c in range(c_n):
                    a0[c] += x0[c]
                    a1[c] += x1[c]
                    a2[c] += x2[c]
                    a3[c] += x3[c]
            for c in range(c_n):
                oa[c] = ((a0[c] + a1[c]) + a2[c]) + a3[c]
            for j in range(u, b_n):
                xj = xa[j]
                for c in range(c_n):
                    oa[c] += xj[c]
        # Output packets wholly inside this row (and the vectorized range) took the
        # accumulators; the values outside them add their rows one by one.
        row = a * c_n
        ps = (row + p - 1) // p * p
        pe = min(row + c_n, total // p * p) // p * p
        if b_n < 16 or pe <= ps:
            ps = pe = row
        for c in range(c_n):
            if row + c < ps or row + c >= pe:
                s = zero
                for j in range(b_n):
                    s += xa[j, c]
                oa[c] = s


def _colsum(x, out):
    """x [R, C] summed over R one row at a time from 0 into out [C]."""
    r_n, c_n = x.shape
    zero = x.dtype.type(0)
    for c in range(c_n):
        out[c] = zero
    r4 = r_n // 4 * 4
    for r in range(0, r4, 4):  # (four rows a pass, still added one at a time in order)
        x0, x1, x2, x3 = x[r], x[r + 1], x[r + 2], x[r + 3]
        for c in range(c_n):
            out[c] = (((out[c] + x0[c]) + x1[c]) + x2[c]) + x3[c]
    for r in range(r4, r_n):
        xr = x[r]
        for c in range(c_n):
            out[c] += xr[c]


_NAMES = ("_leaf", "_tree", "_full", "_rows", "_middle", "_colsum")


def _build(numba) -> dict:
    """The loops compiled for float32 and float64: on jit_loops' background thread."""
    jit = numba.njit(nogil=True, cache=True, error_model="numpy")
    fns = {}
    for name in _NAMES:  # (each before the loops that call it compile)
        fns[name] = globals()[name] = jit(globals()[name])
    for dtype in (np.float32, np.float64):
        x = np.ones(4, dtype)
        fns["_full"](x, 4, 1)
        fns["_rows"](x, 2, 2, True, np.zeros(2, dtype))
        fns["_middle"](x.reshape(1, 2, 2), np.zeros((1, 2), dtype))
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
