"""A histogram summary's statistics in one compiled pass (numba), bit for bit the NumPy path's.

summary_ops counts a tensor's values into TF's buckets with NumPy: a cell look-up per
value (shift, two table look-ups, a comparison, an add) and a bincount, then min, max
and the two sums, each a pass of its own; in the MLP step of
benchmarks/summary_example_bench.py its eight passes over 50,826 values took ~0.27 ms
and the sums ~0.12 ms.  `histogram_stats` does all of it in one loop over the values:
each value's bucket from the same tables (`summary_ops._CellTable`), its count, and TF's
`Histogram::Add` statistics in TF's order: min and max as `if (min_ > v) min_ = v` from
(DBL_MAX, -DBL_MAX), so the first of equal values (+0.0 or -0.0) stays; the sum and sum
of squares in double, one value at a time from 0.0, no fast-math (numba compiles
without reassociation or fused multiply-add), so the bits are TF's and the NumPy path's
(tests/ops/test_summary_jit.py).  ~1 ns a value on the project machine: the sums' chain
of dependent additions (one add's latency per value) sets that pace, and the counting
fits beside it.

Optional, as ops/fused_updates.py: without numba, with ASYNCFLOW_NO_NUMBA=1, or until the
loop is compiled (on a background thread started by the first histogram that wants it;
no kernel waits for a compile), `histogram_stats` returns None and the NumPy path runs,
with the same results.  `warm()` compiles it and waits.
"""

from __future__ import annotations

import threading

import numpy as np

from asyncflow import tf_logging
from asyncflow.ops import fused_updates

__all__ = ["histogram_loop", "histogram_stats", "kept_buckets", "ready", "warm"]

_DBL_MAX = float(np.finfo(np.float64).max)


def _histogram_loop(values, bits, base, threshold, shift, counts, offset):
    """Count each value of `values` (`bits`: the same memory as unsigned integers) into
    `counts[offset + bucket]` (bucket: the value's cell's base, one more at or above the
    cell's threshold; non-finite values into the two bins past the buckets) and return
    (min, max, sum, sum of squares) as TF's Histogram::Add computes them."""
    lo = _DBL_MAX
    hi = -_DBL_MAX
    total = 0.0
    squares = 0.0
    for i in range(values.size):
        v = values[i]
        k = bits[i] >> shift
        b = offset + np.intp(base[k])
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
    return lo, hi, total, squares


def _keep_loop(counts, rows, width, size, limits, lows, highs, out_limits, out_counts, ends):
    """The kept buckets of each row of `counts` (`rows` rows of `width`: `size` buckets,
    then the NaN and Inf bins), as `Histogram::EncodeToProto(h, False)` keeps them: the
    non-empty ones, each empty one just before a non-empty one, and the last; their
    limits and counts (as double) into `out_limits`/`out_counts` end to end, each row's
    end (a count of entries) into `ends`.  Only the buckets from the one below the
    row's minimum `lows[r]` to its maximum's are looked at (the others are empty: of
    them only the last is kept).  Returns the number kept, or -1 - r for the first row
    r with a NaN or Inf counted (nothing written then)."""
    for r in range(rows):
        if counts[r * width + size] or counts[r * width + size + 1]:
            return -1 - r
    n = 0
    for r in range(rows):
        row = r * width
        first = np.searchsorted(limits, lows[r], side="right")  # (upper_bound)
        last = min(np.searchsorted(limits, highs[r], side="right"), size - 1)
        for b in range(max(first - 1, 0), last + 1):
            c = counts[row + b]
            if c != 0 or b == size - 1 or counts[row + b + 1] != 0:
                out_limits[n] = limits[b]
                out_counts[n] = np.float64(c)
                n += 1
        if last < size - 1:
            out_limits[n] = limits[size - 1]
            out_counts[n] = 0.0
            n += 1
        ends[r] = n
    return n


_lock = threading.Lock()
_loops: dict[str, object] = {}
_done = threading.Event()
_started = False


def _compile() -> None:
    """Import numba and compile both loops for their signatures (float32 values with
    uint32 bits, float64 with uint64): on a thread of its own, never in a kernel."""
    try:
        numba = fused_updates.numba_module()
        if numba is None:
            return
        jit = numba.njit(nogil=True, cache=True, error_model="numpy")
        hist = jit(_histogram_loop)
        counts = np.zeros(4, np.int64)
        base = np.zeros(1, np.int16)
        for ftype, utype in ((np.float32, np.uint32), (np.float64, np.uint64)):
            v = np.zeros(1, ftype)
            hist(v, v.view(utype), base, np.full(1, np.inf, ftype), utype(1), counts, 0)
        keep = jit(_keep_loop)
        one, two = np.zeros(1), np.zeros(2)
        keep(counts, 1, 4, 2, two, one, one, two, two.copy(), np.zeros(1, np.intp))
        _loops["hist"], _loops["keep"] = hist, keep
    except Exception as exc:  # a loop that cannot compile leaves NumPy's path in place
        tf_logging.warning("asyncflow: compiling the histogram loop with numba failed: %r", exc)
    finally:
        _done.set()


def _start() -> None:
    global _started
    with _lock:
        if not _started:
            _started = True
            threading.Thread(target=_compile, name="asyncflow-numba", daemon=True).start()


def ready() -> bool:
    """Whether the compiled loops run now; the first call starts their compile."""
    if _loops:
        return True
    if not _started and not fused_updates._DISABLED:
        _start()
    return False


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the loops now and wait (tests, benchmarks); whether they are ready."""
    if fused_updates._DISABLED:
        return False
    ready()
    _done.wait(timeout)
    return bool(_loops)


def histogram_loop():
    """The compiled `_histogram_loop` (for a caller with several tensors to count), or
    None while it is not ready."""
    return _loops["hist"] if ready() else None


def histogram_stats(v: np.ndarray, table, counts: np.ndarray, offset: int = 0):
    """Count `v` (flat, contiguous float32 or float64, the type of `table`, a
    `summary_ops._CellTable`) into `counts[offset:offset + buckets + 2]` (int64; NaN
    and Inf into the last two) and return (min, max, sum, sum of squares) as floats in
    TF's order; None (nothing counted) while the compiled loop is not ready."""
    if not ready():
        return None
    return _loops["hist"](
        v, v.view(table.utype), table.base16, table.threshold, table.shift, counts, offset
    )


def kept_buckets(counts, rows: int, width: int, limits: np.ndarray, lows, highs):
    """(limits, counts, ends) of the kept buckets of `counts`' rows (see _keep_loop;
    `lows`/`highs`: each row's minimum and maximum), or the first row with a NaN or
    Inf counted (an int); None while the compiled loop is not ready."""
    if not ready():
        return None
    size = limits.size
    out_limits = np.empty(rows * size)
    out_counts = np.empty(rows * size)
    ends = np.empty(rows, np.intp)
    n = _loops["keep"](
        counts, rows, width, size, limits, np.asarray(lows, np.float64),
        np.asarray(highs, np.float64), out_limits, out_counts, ends,
    )  # fmt: skip
    if n < 0:
        return -1 - n
    return out_limits[:n], out_counts[:n], ends
