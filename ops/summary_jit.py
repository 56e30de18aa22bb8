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

import threading

import numpy as np

from asyncflow.ops import jit_loops

__all__ = ["encode", "histograms", "ready", "warm"]

_DBL_MAX = float(np.finfo(np.float64).max)  # (TF's min_ starts there, max_ at -DBL_MAX)


def _accumulate(values, bits, base, threshold, shift, counts):
    """Each of `values` (`bits`: the same memory as unsigned integers) counted into
    `counts` (zeroed here) at its bucket (its cell's base, one more at or above the
    cell's threshold); (min, max, sum, sum of squares) as Histogram::Add computes them,
    in TF's order."""
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
    return lo, hi, total, squares


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
    lo, hi, total, squares = _accumulate(values, bits, base, threshold, shift, counts)
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


def _put_double(out, n, x, scratch, bits):
    """`x` as 8 little-endian bytes at out[n:]; the end."""
    scratch[0] = x
    u = bits[0]
    for j in range(8):
        out[n + j] = np.uint8((u >> np.uint64(8 * j)) & np.uint64(0xFF))
    return n + 8


def _put_field(out, n, key, x, scratch, bits):
    """A double field (`key`, then `x`), left out when `x` is +0.0, as upb writes it."""
    scratch[0] = x
    if bits[0] == 0:
        return n
    out[n] = key
    return _put_double(out, n + 1, x, scratch, bits)


def _put_varint(out, n, x):
    while x > 0x7F:
        out[n] = np.uint8((x & 0x7F) | 0x80)
        x >>= 7
        n += 1
    out[n] = np.uint8(x)
    return n + 1


# numba.carray and `_address` (set by _build, before the compile)
_carray = _address = None


def _varint_size(x):
    n = 1
    while x > 0x7F:
        x >>= 7
        n += 1
    return n


def _encode_loop(addrs, sizes, base, threshold, shift, counts, limits, tags, tag_ends, out, ends):
    """The serialized HistogramProto of each of the float32 tensors at `addrs` (`sizes`
    values each), end to end in `out` (each one's end in `ends`), as `_histogram_loop`
    and summary_ops' `_encode` make it: one pass over each tensor's values (bucket,
    min/max and the sums in TF's order), one over its counts, then its bytes.  With
    `tag_ends` (not empty), each one inside a serialized Summary of one Value, whose
    tag field is its slice of `tags` (summary_ops' `_histo_value_bytes`).  All of it
    without the GIL: the tensors are read through their addresses, so one call serves
    them all.  Returns -1, or for the first tensor with a NaN or Inf (nothing after it
    written) twice its index, plus one when it has a NaN."""
    size = limits.size
    scratch = np.empty(1, np.float64)
    bits64 = scratch.view(np.uint64)
    wrap = tag_ends.size > 0
    n = 0
    for k in range(addrs.size):
        t0 = 0
        t1 = 0
        start = n
        if wrap:  # (room for the Value's head: its key, length, tag and histo's key, length)
            t0 = 0 if k == 0 else tag_ends[k - 1]
            t1 = tag_ends[k]
            n += t1 - t0 + 12
        h0 = n
        m = sizes[k]
        values = _carray(_address(addrs[k]), (m,), np.float32)
        bits = _carray(_address(addrs[k]), (m,), np.uint32)
        lo, hi, total, squares = _accumulate(values, bits, base, threshold, shift, counts)
        if counts[size] or counts[size + 1]:  # (NaN and -inf in the first, +inf next)
            for i in range(m):
                if np.isnan(values[i]):
                    return 2 * k + 1
            return 2 * k
        n = _put_field(out, n, 0x09, lo, scratch, bits64)
        n = _put_field(out, n, 0x11, hi, scratch, bits64)
        n = _put_field(out, n, 0x19, np.float64(m), scratch, bits64)
        n = _put_field(out, n, 0x21, total, scratch, bits64)
        n = _put_field(out, n, 0x29, squares, scratch, bits64)
        first = max(np.searchsorted(limits, lo, side="right") - 1, 0)  # (upper_bound)
        last = min(np.searchsorted(limits, hi, side="right"), size - 1)
        kept = 0 if last == size - 1 else 1  # (the last bucket, kept when past them)
        for b in range(first, last + 1):
            if counts[b] != 0 or b == size - 1 or counts[b + 1] != 0:
                kept += 1
        for field in range(2):  # bucket_limit (6), then bucket (7): packed doubles
            out[n] = 0x32 if field == 0 else 0x3A
            n = _put_varint(out, n + 1, 8 * kept)
            for b in range(first, last + 1):
                c = counts[b]
                if c != 0 or b == size - 1 or counts[b + 1] != 0:
                    x = limits[b] if field == 0 else np.float64(c)
                    n = _put_double(out, n, x, scratch, bits64)
            if last < size - 1:
                x = limits[size - 1] if field == 0 else 0.0
                n = _put_double(out, n, x, scratch, bits64)
        if wrap:
            length = n - h0
            at = _put_varint(out, start + 1, t1 - t0 + 1 + _varint_size(length) + length)
            out[start] = 0x0A  # Summary.value (1)
            for i in range(t0, t1):
                out[at] = tags[i]
                at += 1
            out[at] = 0x2A  # Value.histo (5)
            at = _put_varint(out, at + 1, length)
            for i in range(length):  # (back over the room left: at <= h0)
                out[at + i] = out[h0 + i]
            n = at + length
        ends[k] = n
    return -1


# The most bytes one HistogramProto takes: five doubles with their keys, two packed
# fields of every bucket (a key, a length of up to 3 bytes, 8 bytes a bucket).
def _encoded_max(n_limits: int) -> int:
    return 5 * 9 + 2 * (4 + 8 * n_limits)


def _address_intrinsic(numba):
    """`_address(int)`: an address as a pointer for numba.carray (the tensors of one
    `encode` call, read where they are, with no list of arrays to box)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def address(typingctx, src):
        if not isinstance(src, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

        return types.voidptr(src), codegen

    return address


def _build(numba) -> dict:
    """The loop compiled for its signatures (float32 values with uint32 bits, float64
    with uint64): on jit_loops' background thread, never in a kernel."""
    jit = numba.njit(nogil=True, cache=True, error_model="numpy")
    globals()["_accumulate"] = jit(_accumulate)  # (before the loops that call it compile)
    loop = jit(_histogram_loop)
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
    global _carray, _address  # (the names _encode_loop compiles against)
    _carray, _address = numba.carray, _address_intrinsic(numba)
    for f in (_put_double, _put_field, _put_varint, _varint_size):
        globals()[f.__name__] = jit(f)
    encode = jit(_encode_loop)
    table = np.zeros(1, np.int16), np.full(1, np.inf, np.float32), np.uint32(1)
    v = np.zeros(1, np.float32)
    out = np.empty(_encoded_max(limits.size), np.uint8)
    addrs, sizes = np.array([v.ctypes.data], np.uint64), np.ones(1, np.intp)
    for tag_ends in (np.zeros(0, np.intp), np.ones(1, np.intp)):
        encode(addrs, sizes, *table, counts, limits, out[:1], tag_ends, out, np.zeros(1, np.intp))
    return {"hist": loop, "encode": encode}


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


def encode(values: list, table, limits: np.ndarray, tags: list | None = None):
    """The serialized HistogramProto of each of `values` (flat, contiguous float32 arrays
    of one value or more; `table` float32's `summary_ops._CellTable`) over the bucket
    `limits`, as summary_ops' `histogram_bytes`, in one GIL-free call; with `tags` (each
    one's Value.tag field, serialized), each inside a serialized Summary of one Value
    with that tag.  Returns the bytes of each; for the first of `values` with a NaN or
    Inf, an int instead: twice its index, plus one when it has a NaN.  None while the
    loop is not compiled."""
    loop = _JIT.get("encode")
    if loop is None:
        return None
    k = len(values)
    buffers = _local.__dict__.get("buffers")
    if buffers is None or buffers[0].size < k or buffers[4].size != limits.size + 2:
        buffers = _local.buffers = (
            np.empty(k, np.uint64),
            np.empty(k, np.intp),
            np.empty(k, np.intp),
            np.empty(k, np.intp),
            np.empty(limits.size + 2, np.int64),
        )
    addrs, sizes, tag_ends, ends, counts = buffers
    need = 0
    for i, v in enumerate(values):
        addrs[i] = v.__array_interface__["data"][0]
        sizes[i] = v.size
    if tags is None:
        tag_bytes, tag_ends = _NO_TAGS, _NO_TAG_ENDS
    else:
        end = 0
        for i, t in enumerate(tags):
            end += len(t)
            tag_ends[i] = end
        tag_bytes = np.frombuffer(bytearray(b"".join(tags) or b"\0"), np.uint8)
        need = end + 12 * k
        tag_ends = tag_ends[:k]
    need += k * _encoded_max(limits.size)
    out = _local.__dict__.get("out")
    if out is None or out.size < need:
        out = _local.out = np.empty(need, np.uint8)
    ends = ends[:k]
    bad = loop(
        addrs[:k], sizes[:k], table.base16, table.threshold, table.shift, counts, limits,
        tag_bytes, tag_ends, out, ends,
    )  # fmt: skip
    if bad >= 0:
        return int(bad)
    pieces, begin = [], 0
    for end in ends.tolist():
        pieces.append(out[begin:end].tobytes())
        begin = end
    return pieces


_local = threading.local()  # (each thread's buffers for `encode`)
_NO_TAGS, _NO_TAG_ENDS = np.zeros(0, np.uint8), np.zeros(0, np.intp)
