"""A histogram summary's statistics in one compiled pass (numba), bit for bit the NumPy path's.

summary_ops counts a tensor's values into TF's buckets with NumPy: a cell look-up per
value (shift, two table look-ups, a comparison, an add) and a bincount, then min, max
and the two sums, each a pass of its own; in the MLP step of
benchmarks/summary_example_bench.py its eight passes over 50,826 values took ~0.27 ms
and the sums ~0.12 ms.  `histograms` does all of it in one loop over the values:
each value's bucket from the same tables (`summary_ops._CellTable`), its count, and TF's
`Histogram::Add` statistics in TF's order: min and max as `if (min_ > v) min_ = v` from
(DBL_MAX, -DBL_MAX), so the first of equal values (+0.0 or -0.0) stays; the sum and sum
of squares in double, one value at a time from 0.0, no fast-math (numba compiles
without reassociation or fused multiply-add), so the bits are TF's and the NumPy path's
(tests/ops/test_summary_jit.py).  ~1 ns a value on the project machine (2-core EPYC):
the counting alone takes ~0.95 ns and the sums alone ~0.8 ns (TF's order is a chain of
dependent additions, one add's latency per value), overlapped.  A row of counts (12
KiB) serves one tensor after another: the buckets kept are read from it while in L1.

Optional, as ops/fused_updates.py: without numba, with ASYNCFLOW_NO_NUMBA=1, or until the
loop is compiled (on a background thread started by the first histogram that wants it;
no kernel waits for a compile), `histograms` returns None and the NumPy path runs,
with the same results.  `warm()` compiles it and waits.
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import jit_loops

__all__ = ["histograms", "ready", "warm"]

_DBL_MAX = float(np.finfo(np.float64).max)  # (TF's min_ starts there, max_ at -DBL_MAX)


def _histogram_loop(
    values, bits, base, threshold, shift, counts, limits, out_limits, out_counts, start
):
    """TF's Histogram of `values` (`bits`: the same memory as unsigned integers): each
    value counted into `counts` (zeroed here; `limits.size` buckets, then the NaN and
    Inf bins) at its bucket (its cell's base, one more at or above the cell's
    threshold), min/max/sum/sum of squares as Histogram::Add computes them; then the
    buckets EncodeToProto(h, false) keeps (the non-empty ones, each empty one just
    before a non-empty one, and the last) written as limits and counts (double) into
    `out_limits`/`out_counts` from `start`.  Only the buckets from the one below the
    minimum's to the maximum's are looked at: the others are empty, and of them only
    the last is kept.  Returns (min, max, sum, sum of squares, end of what was
    written), the end -1 (nothing written) when a NaN or Inf was counted."""
    size = limits.size
    counts[:] = 0
    lo = _DBL_MAX
    hi = -_DBL_MAX
    total = 0.0
    squares = 0.0
    for i in range(values.size):
        v = values[i]
        k = bits[i] >> shift
        b = np.intp(base[k])
        if v >= threshold[k]:
            b += 1
        counts[b] += 1
        d = np.float64(v)
        if lo > d:
            lo = d
        if hi < d:
            hi = d
        total += d
        squares += d * d
    if counts[size] or counts[size + 1]:
        return lo, hi, total, squares, -1
    n = start
    first = np.searchsorted(limits, lo, side="right")  # (upper_bound)
    last = min(np.searchsorted(limits, hi, side="right"), size - 1)
    for b in range(max(first - 1, 0), last + 1):
        c = counts[b]
        if c != 0 or b == size - 1 or counts[b + 1] != 0:
            out_limits[n] = limits[b]
            out_counts[n] = np.float64(c)
            n += 1
    if last < size - 1:
        out_limits[n] = limits[size - 1]
        out_counts[n] = 0.0
        n += 1
    return lo, hi, total, squares, n


def _build(numba) -> dict:
    """The loop compiled for its signatures (float32 values with uint32 bits, float64
    with uint64): on jit_loops' background thread, never in a kernel."""
    loop = numba.njit(nogil=True, cache=True, error_model="numpy")(_histogram_loop)
    counts = np.zeros(4, np.int64)
    limits, out = np.array([0.0, 1.0]), np.zeros(2)
    for ftype, utype in ((np.float32, np.uint32), (np.float64, np.uint64)):
        v = np.zeros(1, ftype)
        thr = np.full(1, np.inf, ftype)
        loop(
            v,
            v.view(utype),
            np.zeros(1, np.int16),
            thr,
            utype(1),
            counts,
            limits,
            out,
            out.copy(),
            0,
        )
    return {"hist": loop}


_JIT = jit_loops.BackgroundLoops("the histogram loop", _build)


def ready() -> bool:
    """Whether the compiled loops run now; the first call starts their compile."""
    return _JIT.get("hist") is not None


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the loops now and wait (tests, benchmarks); whether they are ready."""
    return _JIT.warm(timeout)


def histograms(values: list, tables: list, limits: np.ndarray):
    """TF's Histogram of each of `values` (flat, contiguous float32 or float64 arrays,
    each of the type of its `summary_ops._CellTable` in `tables`) over the bucket
    `limits`, by the compiled loop: ([(min, max, sum, sum of squares)], the kept
    buckets' limits and counts (doubles) end to end, each histogram's end in them).
    The index of the first of `values` with a NaN or Inf instead (an int); None while
    the loop is not compiled."""
    loop = _JIT.get("hist")
    if loop is None:
        return None
    size = limits.size
    counts = np.empty(size + 2, np.int64)
    out_limits = np.empty(len(values) * size)
    out_counts = np.empty(len(values) * size)
    stats, ends, n = [], [], 0
    for k, (v, t) in enumerate(zip(values, tables)):
        lo, hi, total, squares, n = loop(
            v, v.view(t.utype), t.base16, t.threshold, t.shift, counts, limits, out_limits,
            out_counts, n,
        )  # fmt: skip
        if n < 0:
            return k
        stats.append((lo, hi, total, squares))
        ends.append(n)
    return stats, out_limits[:n], out_counts[:n], ends
