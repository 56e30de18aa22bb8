"""Summary ops: ScalarSummary, HistogramSummary, ImageSummary, AudioSummaryV2,
TensorSummaryV2, MergeSummary, and TF1's `tf.summary.*` builders over them.

Each kernel returns one serialized `Summary` protocol buffer (a scalar string tensor),
with TF's tags, values and encodings: histograms use TF's default bucket limits (1e-12
growing by 10% to 1e20, mirrored for negatives, then +-DBL_MAX) and collapse runs of
empty buckets as `Histogram::EncodeToProto`; images are PNG (floats normalised per image
as TF's ImageSummary: [0, max] -> [0, 255], or symmetric around 128 when negative, non-
finite pixels painted `bad_color`), PNG-encoded byte for byte as TF (png_codec); audio
is 16-bit PCM WAV.  The builders name ops and
tags as TF1's `summary_scope` (family prefixes) and add the op to the SUMMARIES
collection unless `collections` says otherwise.
"""

from __future__ import annotations

import collections
import re
import struct
import sys
import threading

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.devices import denormal
from asyncflow.graph_io import tensor_content_proto
from asyncflow.ops import png_codec, summary_jit
from asyncflow.proto_wire import varint as _varint
from asyncflow.protos.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "audio",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "tensor_summary",
    "text",
]

_SCALAR = lambda op: [tensor_shape.TensorShape([])]  # noqa: E731
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_REAL = TypeConstraint(_FLOATS + _INTS, default=dtypes.float32)


def _serialized(summary: Summary) -> np.ndarray:
    tags = tuple(v.tag for v in summary.value)
    metadata = any(v.HasField("metadata") for v in summary.value)
    return _remember(summary.SerializeToString(), tags, metadata)


# -- summary bytes built by hand, and the ones this module made ---------------------------
#
# A Summary is one repeated field (`value`, 1), so the concatenation of serialized
# Summaries is the serialized Summary of all their values: MergeSummary and the
# FileWriter need no parse of what these kernels made, only the tags (for the duplicate
# check) and whether a value has metadata.  The kernels record each string they return
# with those (`_made`); a string not found there (fed, or from elsewhere) is parsed as
# before.  Scalars and histograms are serialized by hand: the bytes upb writes for the
# message (fields in number order, zero scalars left out, packed doubles), without
# building one (for a histogram, the message and its lists cost more than its counts).

# The record holds the strings themselves (so that an id stays theirs): the most recent
# ones, up to _MADE_MAX of them and _MADE_BYTES in all; a string over _MADE_ONE_MAX (images,
# audio) is not recorded, its parse costing little beside its encoding.
_MADE_MAX = 1024
_MADE_BYTES = 8 << 20
_MADE_ONE_MAX = 1 << 20
# id(bytes) -> (bytes, tags, any value with metadata); oldest first (an OrderedDict: a
# plain dict's first key is found past the slots of every key deleted before it)
_made: collections.OrderedDict[int, tuple] = collections.OrderedDict()
_made_bytes = 0
_made_lock = threading.Lock()


def _remember(raw: bytes, tags: tuple, metadata: bool) -> np.ndarray:
    """`raw` as a summary op's output, recorded as this module's with `tags`."""
    global _made_bytes
    if len(raw) <= _MADE_ONE_MAX:
        with _made_lock:
            while _made and (len(_made) >= _MADE_MAX or _made_bytes + len(raw) > _MADE_BYTES):
                _made_bytes -= len(_made.popitem(last=False)[1][0])
            _made[id(raw)] = (raw, tags, metadata)  # (holding raw keeps its id its own)
            _made_bytes += len(raw)
    out = np.empty((), dtype=object)
    out[()] = raw
    return out


def made_here(raw) -> tuple | None:
    """(tags, any value with metadata) of a serialized Summary this module's kernels
    returned; None for any other string."""
    found = _made.get(id(raw))
    if found is None or found[0] is not raw:
        return None
    return found[1], found[2]


def _len_field(key: int, payload: bytes) -> bytes:
    return bytes((key,)) + _varint(len(payload)) + payload


_ZERO8 = bytes(8)
_pack_d = struct.Struct("<d").pack
_pack_f = struct.Struct("<f").pack


def _double_field(key: int, x: float) -> bytes:
    b = _pack_d(x)
    return b"" if b == _ZERO8 else bytes((key,)) + b  # (-0.0 is written, as upb does)


def summary_event_bytes(summary: bytes, wall_time: float, step: int) -> bytes:
    """The serialized Event(wall_time, step, summary) of a serialized Summary (fields in
    number order: wall_time 1, step 2, summary 5; zeros left out, as upb writes it)."""
    head = _double_field(0x09, wall_time)
    if step:
        head += b"\x10" + _varint(step & 0xFFFFFFFFFFFFFFFF)
    return head + _len_field(0x2A, summary)


_TAG_FIELDS: dict[str, bytes] = {}  # tag -> its Value.tag field's bytes (bounded)


def _tag_field(tag: str) -> bytes:
    t = _TAG_FIELDS.get(tag)
    if t is None:
        if len(_TAG_FIELDS) >= 4096:
            _TAG_FIELDS.clear()
        b = tag.encode("utf-8")
        t = _TAG_FIELDS[tag] = _len_field(0x0A, b) if b else b""
    return t


def _value_bytes(tag: str, body: bytes) -> bytes:
    """A Summary holding one Value: its tag (1) and `body` (its other fields)."""
    t = _tag_field(tag)
    return b"".join((b"\x0a", _varint(len(t) + len(body)), t, body))


def _histo_value_bytes(tag: str, histo: bytes) -> bytes:
    """`_value_bytes(tag, _len_field(0x2A, histo))`: a Value with a histogram (5)."""
    t = _tag_field(tag)
    h = _varint(len(histo))
    return b"".join((b"\x0a", _varint(len(t) + 1 + len(h) + len(histo)), t, b"\x2a", h, histo))


def _tag(value) -> str:
    t = np.asarray(value, dtype=object).reshape(-1)[0] if np.ndim(value) else value
    t = t[()] if isinstance(t, np.ndarray) else t
    return t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)


def _check_scalar_tag(tag, what="tag"):
    if np.ndim(tag) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be scalar; got shape {list(np.shape(tag))}"
        )


# -- ScalarSummary ------------------------------------------------------------------------

ScalarSummary = register_op(
    "ScalarSummary",
    inputs=["tags: string", "values: T"],
    outputs=["summary: string"],
    attrs={"T": _REAL},
    shape_fn=_SCALAR,
)


@ScalarSummary.kernel("CPU")
async def _scalar_summary(ctx, tags, values):
    raw, names = _scalar_bytes(tags, values)
    return _remember(raw, names, False)


def _scalar_bytes(tags, values) -> tuple[bytes, tuple]:
    """A ScalarSummary's serialized Summary and its tags."""
    if np.shape(tags) != np.shape(values):
        raise errors.InvalidArgumentError(
            None,
            None,
            "tags and values are not the same shape: "
            f"[{','.join(map(str, np.shape(tags)))}] != "
            f"[{','.join(map(str, np.shape(values)))}]",
        )
    parts, names = [], []
    flat_values = np.asarray(values).reshape(-1)
    for tag, v in zip(np.asarray(tags, dtype=object).reshape(-1), flat_values):
        name = _tag(tag)
        names.append(name)
        # simple_value (2, float; in the oneof `value`, so written when zero too)
        parts.append(_value_bytes(name, b"\x15" + _pack_f(float(np.float32(v)))))
    return b"".join(parts), tuple(names)


# -- HistogramSummary ---------------------------------------------------------------------


def _default_bucket_limits() -> list[float]:
    pos, v = [], 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


_BUCKET_LIMITS = _default_bucket_limits()
_LIMITS = np.array(_BUCKET_LIMITS)


# Each value's bucket (std::upper_bound over TF's limits on the value as double) from two
# small tables instead of a search.  A float's top 16 bits (sign, exponent, leading
# mantissa bits) name a *cell*: an interval of relative width at most 2**-7 (float32) or
# 2**-4 (float64), narrower than a bucket (10%), so at most one limit falls inside a
# cell.  The bucket is the cell's base bucket (an int16 table, 128 KiB) plus one when the
# value is at or above the cell's threshold (the limit inside it, in the value's own
# type; inf for cells without one).  Then one bincount into the buckets, whose counts
# stay in L1 (a bincount into the 65,536 cells measured slower inside a training step:
# 512 KiB of counters compete with the step's data).  Non-finite values have cells of
# their own (exponent all ones) that count into two extra bins, so the NaN/Inf check
# costs no pass either.  Exactly TF's counts for any finite input.
_SEARCH_MAX = 4096


class _CellTable:
    """Per top-16-bit cell of one float type (top `cell_bits` bits: 13 for float32 is as
    good, its cells 2**-4 wide, and its tables stay in cache), the bucket of its lowest
    value, the threshold (in that type) above which its values fall in the next bucket
    (inf for cells without a limit inside), and whether the cell holds NaN/Inf."""

    def __init__(self, ftype, cell_bits: int = 16):
        ftype = np.dtype(ftype)
        utype = np.dtype(f"u{ftype.itemsize}")
        bits = 8 * ftype.itemsize
        n_cells = 1 << cell_bits
        self.ftype, self.utype, self.shift = ftype, utype, utype.type(bits - cell_bits)
        cells = np.arange(n_cells, dtype=utype)
        low_bits = utype.type((1 << (bits - cell_bits)) - 1)
        negative = (cells >> utype.type(cell_bits - 1)) == 1
        top = cells << self.shift
        lowest = np.where(negative, top | low_bits, top).view(ftype)
        highest = np.where(negative, top, top | low_bits).view(ftype)
        exp_mask = (1 << (bits - 1)) - 1  # sign cleared
        inf_bits = int(np.array(np.inf, ftype).view(utype))
        self.nonfinite = (top & utype.type(exp_mask)) >= utype.type(inf_bits & ~int(low_bits))
        finite = ~self.nonfinite
        base = np.zeros(n_cells, np.intp)
        upper = np.zeros(n_cells, np.intp)
        base[finite] = np.searchsorted(_LIMITS, lowest[finite].astype(np.float64), "right")
        upper[finite] = np.searchsorted(_LIMITS, highest[finite].astype(np.float64), "right")
        # DBL_MAX itself would fall past the last bucket (TF's upper_bound indexes one
        # past its buckets there); it is counted in the last one.
        np.minimum(upper, _LIMITS.size - 1, out=upper)
        assert (upper - base).max() <= 1  # at most one limit per cell
        self.base = base
        split = upper > base
        # The smallest value of the type that is >= the limit: v >= it <=> double(v) >= limit.
        limit = _LIMITS[np.minimum(base, _LIMITS.size - 1)]
        with np.errstate(over="ignore"):
            thr = limit.astype(ftype)
            below = thr.astype(np.float64) < limit
            thr[below] = np.nextafter(thr[below], ftype.type(np.inf))
        self.threshold = np.where(split, thr, ftype.type(np.inf))
        self.split = split
        # Non-finite values count into two bins past the buckets (NaN, and inf moved up).
        self.base16 = np.where(self.nonfinite, _LIMITS.size, base).astype(np.int16)

    def counts(self, v: np.ndarray, memo=None) -> tuple[np.ndarray, int, tuple]:
        """Bucket counts of `v` (flat, contiguous, this table's type) over TF's limits,
        the number of non-finite values (not counted), and (min, max, sum, sum of
        squares) of the values (in double, as TF), all in one walk over them.

        `memo` (a `_BucketMemo`, for tensors above _SEARCH_MAX values) carries each
        value's bucket from this op's previous call: values still inside their bucket's
        bounds keep it, and only the others are looked up again (see `_BucketMemo`)."""
        if memo is not None and v.size > _SEARCH_MAX:
            if not memo.lock.acquire(blocking=False):  # a concurrent step has it
                return self.counts(v)
            try:
                return memo.counts(self, v)
            finally:
                memo.lock.release()
        return self._counts(v)

    def buckets(self, v: np.ndarray) -> np.ndarray:
        """Each finite value's bucket (the cells' look-up, one value at a time)."""
        key = (v.view(self.utype) >> self.shift).astype(np.intp)
        index = self.base16[key].astype(np.intp)
        index += v >= self.threshold[key]
        return index

    def _counts(self, v: np.ndarray, build=None) -> tuple[np.ndarray, int, tuple]:
        """`counts` without a memo; `build` (a `_BucketMemo`) records each value's
        bucket and bounds on the way."""
        if v.size <= _SEARCH_MAX:  # a binary search per value is cheaper than the cells
            if v.size:
                lo, hi = _min_max(v)  # (NaN when there is one)
                if np.isfinite(lo) and np.isfinite(hi):  # all finite: no mask
                    d = v.astype(np.float64)
                    index = np.searchsorted(_LIMITS, d, "right")
                    if hi >= _LIMITS[-1]:
                        np.minimum(index, _LIMITS.size - 1, out=index)
                    stats = (lo, hi, *_sums(d, 0.0, 0.0))
                    return np.bincount(index, minlength=_LIMITS.size), 0, stats
            finite = np.isfinite(v)
            nonfinite = v.size - int(np.count_nonzero(finite))
            d = (v[finite] if nonfinite else v).astype(np.float64)
            index = np.minimum(np.searchsorted(_LIMITS, d, "right"), _LIMITS.size - 1)
            stats = (*_min_max(v), *_sums(d, 0.0, 0.0)) if d.size else ()
            return np.bincount(index, minlength=_LIMITS.size), nonfinite, stats
        scratch = _scratch()
        counts = np.zeros(_LIMITS.size + 2, np.intp)
        lo, hi, total, squares = np.inf, -np.inf, 0.0, 0.0
        for start in range(0, v.size, _CHUNK):
            chunk = v[start : start + _CHUNK]
            n = chunk.size
            key = scratch.key[:n]
            np.right_shift(chunk.view(self.utype), self.shift, out=key, casting="unsafe")
            threshold = scratch.threshold(self.ftype)[:n]
            np.take(self.threshold, key, out=threshold)
            above = scratch.above[:n]
            np.greater_equal(chunk, threshold, out=above)
            base = scratch.base[:n]
            np.take(self.base16, key, out=base)
            index = scratch.index[:n]
            np.add(base, above, out=index, casting="unsafe")
            # A bincount into the buckets (12 KiB, in L1) rather than into the cells.
            counts += np.bincount(index, minlength=_LIMITS.size + 2)
            if build is not None:
                build.record(start, index)
            lo, hi, total, squares = _moments(chunk, scratch, lo, hi, total, squares)
        nonfinite = int(counts[-2:].sum())
        counts = counts[:-2]
        return counts.astype(np.int64), nonfinite, (lo, hi, total, squares)


def _min_max(v: np.ndarray) -> tuple:
    """(min, max) of `v` as TF's Histogram::Add finds them (`if (min_ > v) min_ = v`):
    of equal values the first stays, so a zero minimum or maximum has the sign of the
    first zero (NumPy's min and max may return either)."""
    lo, hi = v.min(), v.max()
    if lo == 0 or hi == 0:
        first = v[int(np.argmax(v == 0))]
        lo = first if lo == 0 else lo
        hi = first if hi == 0 else hi
    return lo, hi


def _sums(d: np.ndarray, total: float, squares: float, out=None) -> tuple[float, float]:
    """(sum, sum of squares) so far with the doubles `d` added one at a time in order,
    as TF's Histogram::Add (from 0.0: so a sum of -0.0s is 0.0): a cumulative sum is
    that order, bit for bit (summary_jit's loop is too).  `d` is overwritten; `out`, a
    buffer of its size for the squares."""
    squares_d = np.multiply(d, d, out=out)
    d[0] += total
    squares_d[0] += squares
    return float(np.add.accumulate(d, out=d)[-1]), float(
        np.add.accumulate(squares_d, out=squares_d)[-1]
    )


def _moments(chunk, scratch, lo, hi, total, squares):
    """(min, max, sum, sum of squares) so far, with `chunk`'s values added in TF's
    order (min and max: the earlier of equal values stays, as `min`/`max` keep their
    first argument)."""
    c_lo, c_hi = _min_max(chunk)
    lo, hi = min(lo, c_lo), max(hi, c_hi)
    d = scratch.double[: chunk.size]
    np.copyto(d, chunk)
    total, squares = _sums(d, total, squares, scratch.squares[: chunk.size])
    return lo, hi, total, squares


# -- bucket memo: a histogram of a slowly changing tensor (a parameter every step) ---------
#
# Most values of a parameter stay inside their bucket (10% wide) from one step to the
# next.  A `_BucketMemo` keeps, per value of the op's last input, its bucket and that
# bucket's bounds in the value's own type ([lo, hi): the smallest values at or above the
# bucket's lower and upper limits, so `lo <= v < hi` <=> upper_bound puts v there).  A
# call then compares each value with its bounds (two comparisons, no table look-up),
# looks up only the values that left their bucket (`_CellTable.buckets`), and moves
# their counts.  The counts are exactly a full count's: the memo always describes its
# own counts, and each value is either inside its recorded bucket or looked up.  NaN
# and Inf are never inside any bounds, so they are always looked up and found.  When
# many values move (an activation, not a parameter), the memo is dropped and rebuilt
# only after _MEMO_PAUSE plain calls.  Cost: 10 bytes per value kept (bucket, bounds).
# (The NumPy path's: summary_jit's compiled pass, where it runs, counts afresh faster.)
# Inside the MLP step of benchmarks/summary_bench.py, the [784, 512] parameter's
# histogram took 1.6 ms with the memo against 6.3 ms counted afresh (CPU time).
_MEMO_MOVED_MAX = 4  # look-ups beyond size / this: count afresh instead
_MEMO_PAUSE = 32


def _bound_tables(ftype) -> tuple[np.ndarray, np.ndarray]:
    """Per bucket (and the two non-finite bins after them), its bounds [lo, hi) in
    `ftype`; empty bounds (lo > hi) for buckets no finite value of the type falls in."""
    ftype = np.dtype(ftype)
    with np.errstate(over="ignore"):
        thr = _LIMITS.astype(ftype)
        below = thr.astype(np.float64) < _LIMITS
        thr[below] = np.nextafter(thr[below], ftype.type(np.inf))
    size = _LIMITS.size
    lo = np.full(size + 2, np.inf, ftype)
    hi = np.full(size + 2, -np.inf, ftype)
    # Bucket b holds limit[b-1] <= v < limit[b]; bucket 0 (below -DBL_MAX) no finite
    # value; the last one every value from its lower limit up (DBL_MAX counts there).
    lo[1:size] = thr[: size - 1]
    hi[1 : size - 1] = thr[1 : size - 1]
    hi[size - 1] = np.inf
    return lo, hi


_BOUNDS: dict = {}


class _BucketMemo:
    """One histogram op's buckets of its last input's values (see above); kept in the
    kernel's per-session state, used by one call at a time (`lock`)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.key = None  # (dtype, size) of the values described; None: nothing kept
        self.bucket = self.lo = self.hi = self.counts_kept = self.tables = None
        self.pause = 0

    def record(self, start: int, index: np.ndarray) -> None:
        """Keep the buckets `index` of the values from `start` on (a full count's)."""
        end = start + index.size
        np.copyto(self.bucket[start:end], index, casting="unsafe")
        lo_table, hi_table = self.tables
        np.take(lo_table, index, out=self.lo[start:end])
        np.take(hi_table, index, out=self.hi[start:end])

    def _rebuild(self, table, v):
        if self.pause:
            self.pause -= 1
            self.key = None
            return table._counts(v)
        ftype = v.dtype
        if self.key != (ftype, v.size):
            self.bucket = np.empty(v.size, np.int16)
            self.lo = np.empty(v.size, ftype)
            self.hi = np.empty(v.size, ftype)
        tables = _BOUNDS.get(ftype)
        if tables is None:
            tables = _BOUNDS[ftype] = _bound_tables(ftype)
        self.tables = tables
        counts, nonfinite, stats = table._counts(v, build=self)
        # Kept only when it describes every value (no NaN/Inf among them).
        self.key = (ftype, v.size) if not nonfinite else None
        self.counts_kept = counts.copy()
        return counts, nonfinite, stats

    def counts(self, table, v):
        if self.key != (v.dtype, v.size):
            return self._rebuild(table, v)
        scratch = _scratch()
        lo, hi, total, squares = np.inf, -np.inf, 0.0, 0.0
        moved = []
        n_moved, limit = 0, v.size // _MEMO_MOVED_MAX
        for start in range(0, v.size, _CHUNK):
            chunk = v[start : start + _CHUNK]
            n = chunk.size
            inside, below_hi = scratch.above[:n], scratch.flag[:n]
            np.greater_equal(chunk, self.lo[start : start + n], out=inside)
            np.less(chunk, self.hi[start : start + n], out=below_hi)
            np.logical_and(inside, below_hi, out=inside)
            out = n - int(np.count_nonzero(inside))
            if out:
                n_moved += out
                if n_moved > limit:  # not a slowly changing tensor: count afresh
                    self.pause = _MEMO_PAUSE
                    return self._rebuild(table, v)
                np.logical_not(inside, out=inside)
                moved.append(np.flatnonzero(inside) + start)
            lo, hi, total, squares = _moments(chunk, scratch, lo, hi, total, squares)
        counts = self.counts_kept
        if moved:
            where = np.concatenate(moved)
            values = v[where]
            finite = np.isfinite(values)
            if not finite.all():  # reported by the caller; the memo stays as it was
                nonfinite = int(values.size - np.count_nonzero(finite))
                return counts.copy(), nonfinite, (lo, hi, total, squares)
            new = table.buckets(values)
            size = _LIMITS.size
            counts -= np.bincount(self.bucket[where], minlength=size)
            counts += np.bincount(new, minlength=size)
            self.bucket[where] = new
            lo_table, hi_table = self.tables
            self.lo[where] = lo_table[new]
            self.hi[where] = hi_table[new]
        return counts.copy(), 0, (lo, hi, total, squares)


# Values are counted in chunks through per-thread scratch buffers: temporaries as large
# as the tensor would cost more in page faults than the counting itself (fresh large
# allocations are fresh pages), and a chunk's keys stay in cache between the passes.
_CHUNK = 1 << 17
_local = threading.local()


class _Scratch:
    def __init__(self):
        self.key = np.empty(_CHUNK, np.intp)
        self.above = np.empty(_CHUNK, bool)
        self.flag = np.empty(_CHUNK, bool)
        self.double = np.empty(_CHUNK, np.float64)
        self.squares = np.empty(_CHUNK, np.float64)
        self.base = np.empty(_CHUNK, np.int16)
        self.index = np.empty(_CHUNK, np.intp)
        self._thresholds: dict = {}

    def threshold(self, ftype) -> np.ndarray:
        buf = self._thresholds.get(ftype)
        if buf is None:
            buf = self._thresholds[ftype] = np.empty(_CHUNK, ftype)
        return buf


def _scratch() -> _Scratch:
    s = getattr(_local, "scratch", None)
    if s is None:
        s = _local.scratch = _Scratch()
    return s


_TABLES: dict = {}


def _cell_table(ftype, cell_bits: int = 16) -> _CellTable:
    table = _TABLES.get((ftype, cell_bits))
    if table is None:
        # (its bounds are denormal near zero: the same table whether a step, which
        # flushes denormals, or the caller builds it first)
        kept = denormal.suspend()
        try:
            table = _TABLES[(ftype, cell_bits)] = _CellTable(ftype, cell_bits)
        finally:
            denormal.leave(kept)
    return table


def _as_float(values) -> np.ndarray:
    """`values` flat and contiguous as float32 (exact for float16/bfloat16/float32) or
    float64 (ints and float64, as TF's static_cast<double>)."""
    v = np.asarray(values)
    ftype = np.float32 if v.dtype.kind == "f" and v.dtype.itemsize <= 4 else np.float64
    if v.dtype.kind == "V":  # (ml_dtypes' bfloat16 too)
        ftype = np.float32
    return np.ascontiguousarray(v, dtype=ftype).reshape(-1)


def bucket_counts(values) -> np.ndarray:
    """TF's bucket counts of finite `values` (one per limit of `_BUCKET_LIMITS`)."""
    v = _as_float(values)
    return _cell_table(v.dtype).counts(v)[0]


def _histogram(values, name, memo):
    """(min, max, num, sum, sum_squares, bucket limits, bucket counts) of TF's
    `Histogram` of `values` (as double), encoded as `EncodeToProto(h, False)`."""
    v = _as_float(values)
    if not v.size:
        last = np.array(_BUCKET_LIMITS[-1:])
        return _BUCKET_LIMITS[-1], -_BUCKET_LIMITS[-1], 0.0, 0.0, 0.0, last, np.zeros(1)
    done = summary_jit.histograms([v], [_jit_table(v.dtype)], _LIMITS)  # one pass
    if type(done) is tuple:
        (stats,), limits, kept, _ = done
        return (*(float(x) for x in stats[:2]), float(v.size), *stats[2:], limits, kept)
    if done is None:  # (stats: none when no value is finite)
        counts, nonfinite, stats = _cell_table(v.dtype).counts(v, memo)
    else:
        nonfinite = True
    if nonfinite:
        kind = "Nan" if np.isnan(v).any() else "Infinity"
        raise errors.InvalidArgumentError(None, None, f"{kind} in summary histogram for: {name}")
    lo, hi, total, squares = stats
    # A run of empty buckets collapses into its last limit: the buckets kept are the
    # non-empty ones, each empty one just before a non-empty one, and the last.
    filled = counts != 0
    keep = filled.copy()
    keep[:-1] |= filled[1:]
    keep[-1] = True
    index = np.flatnonzero(keep)
    return (float(lo), float(hi), float(v.size), float(total), float(squares),
            _LIMITS[index], counts[index].astype(np.float64))  # fmt: skip


def histogram_proto(values, name: str | None = None, memo=None) -> HistogramProto:
    """TF's `Histogram` of `values` (as double), encoded as `EncodeToProto(h, False)`.
    `memo`: a `_BucketMemo` of the op's earlier calls (the same result, sooner).

    Raises:
      InvalidArgumentError: a NaN or Inf among the values ("Nan in summary histogram
        for: <name>"), as TF's HistogramSummary kernel.
    """
    lo, hi, num, total, squares, limits, counts = _histogram(values, name, memo)
    proto = HistogramProto(min=lo, max=hi, num=num, sum=total, sum_squares=squares)
    proto.bucket_limit.extend(limits.tolist())
    proto.bucket.extend(counts.tolist())
    return proto


def histogram_bytes(values, name: str | None = None, memo=None) -> bytes:
    """`histogram_proto(...).SerializeToString()`, written by hand."""
    lo, hi, num, total, squares, limits, counts = _histogram(values, name, memo)
    return b"".join(
        (
            _double_field(0x09, lo),
            _double_field(0x11, hi),
            _double_field(0x19, num),
            _double_field(0x21, total),
            _double_field(0x29, squares),
            _len_field(0x32, limits.astype("<f8").tobytes()),
            _len_field(0x3A, counts.astype("<f8").tobytes()),
        )
    )


HistogramSummary = register_op(
    "HistogramSummary",
    inputs=["tag: string", "values: T"],
    outputs=["summary: string"],
    attrs={"T": _REAL},
    shape_fn=_SCALAR,
)


@HistogramSummary.kernel("CPU")
async def _histogram_summary(ctx, tag, values):
    _check_scalar_tag(tag)
    # The bucketing reads every value a few times: large tensors go to a worker when the
    # loop has other work (the device's cost model decides), off the loop's thread.
    memo = ctx.kernel_state.get("buckets")
    if memo is None:
        memo = ctx.kernel_state["buckets"] = _BucketMemo()
    histo = await ctx.device.compute(histogram_bytes, values, ctx.op.name, memo)
    name = _tag(tag)
    return _remember(_histo_value_bytes(name, histo), (name,), False)  # histo: 5


# -- ImageSummary -------------------------------------------------------------------------


def _normalize_image(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's NormalizeFloatImage: an affine map into uint8, computed in the image's type."""
    finite = np.isfinite(img)
    kind = img.dtype.type
    vals = img[finite]
    lo = float(vals.min()) if vals.size else np.inf
    hi = float(vals.max()) if vals.size else -np.inf
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale, offset = kind(0.0 if max_val < 1e-6 else 127.0 / max_val), kind(128.0)
    else:
        scale, offset = kind(0.0 if hi < 1e-6 else 255.0 / hi), kind(0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (np.where(finite, img, 0) * scale + offset).astype(np.uint8)
    bad = ~finite.all(axis=-1)
    out[bad] = bad_color[: img.shape[-1]]
    return out


ImageSummary = register_op(
    "ImageSummary",
    inputs=["tag: string", "tensor: T"],
    outputs=["summary: string"],
    attrs={
        "max_images": 3,
        "T": TypeConstraint(("uint8", "float32", "float16", "float64"), default=dtypes.float32),
        "bad_color": np.array([255, 0, 0, 255], np.uint8),
    },
    shape_fn=_SCALAR,
)


@ImageSummary.kernel("CPU")
async def _image_summary(ctx, tag, tensor):
    _check_scalar_tag(tag)
    t = np.asarray(tensor)
    if t.ndim != 4 or t.shape[-1] not in (1, 3, 4):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Tensor must be 4-D with last dim 1, 3, or 4, not [{','.join(map(str, t.shape))}]",
        )
    bad_color = np.asarray(ctx.attrs["bad_color"], np.uint8).reshape(-1)
    if bad_color.size < t.shape[-1]:
        raise errors.InvalidArgumentError(
            None, None, f"bad_color must have at least {t.shape[-1]} elements"
        )
    summary = Summary()
    add_image_values(summary, _tag(tag), t, ctx.attrs["max_images"], bad_color)
    return _serialized(summary)


def add_image_values(summary, base: str, t: np.ndarray, max_images: int, bad_color) -> None:
    """Append TF's image values of the 4-D batch `t` to `summary`: PNGs tagged
    `<base>/image/<i>` (`<base>/image` when `max_images` is 1: TF goes by the attr, not
    by the batch size)."""
    for i in range(min(t.shape[0], max_images)):
        img = t[i] if t.dtype == np.uint8 else _normalize_image(t[i], bad_color)
        value = summary.value.add(tag=f"{base}/image" if max_images == 1 else f"{base}/image/{i}")
        value.image.height, value.image.width = int(t.shape[1]), int(t.shape[2])
        value.image.colorspace = int(t.shape[3])
        value.image.encoded_image_string = png_codec.encode_png(np.ascontiguousarray(img))


# -- AudioSummaryV2 -----------------------------------------------------------------------


def encode_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """[frames, channels] floats in [-1, 1] as 16-bit PCM WAV (TF's EncodeAudioAsS16LEWav)."""
    frames, channels = samples.shape
    pcm = np.clip(np.round(samples.astype(np.float32) * 32768.0), -32768, 32767)
    data = pcm.astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        len(data),
    )
    return header + data


AudioSummaryV2 = register_op(
    "AudioSummaryV2",
    inputs=["tag: string", "tensor: float", "sample_rate: float"],
    outputs=["summary: string"],
    attrs={"max_outputs": 3},
    shape_fn=_SCALAR,
)


@AudioSummaryV2.kernel("CPU")
async def _audio_summary(ctx, tag, tensor, sample_rate):
    _check_scalar_tag(tag)
    t = np.asarray(tensor, np.float32)
    if t.ndim not in (2, 3):
        raise errors.InvalidArgumentError(
            None, None, f"Tensor must be 3-D or 2-D, got: [{','.join(map(str, t.shape))}]"
        )
    if np.ndim(sample_rate) != 0:
        raise errors.InvalidArgumentError(None, None, "sample_rate must be rank-0")
    rate = float(sample_rate)
    if rate <= 0:
        raise errors.InvalidArgumentError(None, None, "sample_rate must be > 0")
    summary = Summary()
    add_audio_values(summary, _tag(tag), t, rate, ctx.attrs["max_outputs"])
    return _serialized(summary)


def add_audio_values(summary, base: str, t: np.ndarray, rate: float, max_outputs: int) -> None:
    """Append TF's audio values of `t` ([batch, frames] or [batch, frames, channels]) to
    `summary`: WAVs tagged `<base>/audio/<i>` (`<base>/audio` when `max_outputs` is 1)."""
    if t.ndim == 2:
        t = t[:, :, None]
    for i in range(min(t.shape[0], max_outputs)):
        one = max_outputs == 1
        value = summary.value.add(tag=f"{base}/audio" if one else f"{base}/audio/{i}")
        value.audio.sample_rate = rate
        value.audio.num_channels = int(t.shape[2])
        value.audio.length_frames = int(t.shape[1])
        value.audio.content_type = "audio/wav"
        value.audio.encoded_audio_string = encode_wav(t[i], int(rate))


# -- TensorSummaryV2 ----------------------------------------------------------------------

TensorSummaryV2 = register_op(
    "TensorSummaryV2",
    inputs=["tag: string", "tensor: T", "serialized_summary_metadata: string"],
    outputs=["summary: string"],
    attrs={"T": TypeConstraint(None)},
    shape_fn=_SCALAR,
)


@TensorSummaryV2.kernel("CPU")
async def _tensor_summary(ctx, tag, tensor, serialized_summary_metadata):
    _check_scalar_tag(tag)
    summary = Summary()
    value = summary.value.add(tag=_tag(tag))
    raw = np.asarray(serialized_summary_metadata, dtype=object)[()]
    value.metadata.ParseFromString(raw if isinstance(raw, bytes) else str(raw).encode())
    tensor_content_proto(tensor, value.tensor)  # (as TF's kernel: raw content)
    return _serialized(summary)


# -- MergeSummary -------------------------------------------------------------------------

MergeSummary = register_op(
    "MergeSummary",
    inputs=["inputs: N * string"],
    outputs=["summary: string"],
    attrs={"N": 1},
    shape_fn=_SCALAR,
)


@MergeSummary.kernel("CPU")
async def _merge_summary(ctx, *inputs):
    return _merge(inputs)


def _merge(inputs) -> np.ndarray:
    """MergeSummary of `inputs` (string tensors of serialized Summaries)."""
    raws = [raw for inp in inputs for raw in np.asarray(inp, dtype=object).reshape(-1)]
    known = [made_here(raw) for raw in raws]
    if all(k is not None for k in known):  # all made here: their bytes, concatenated
        tags = tuple(t for k in known for t in k[0])
        if len(set(tags)) == len(tags):
            return _remember(b"".join(raws), tags, any(k[1] for k in known))
    merged = Summary()
    seen: set[str] = set()
    for inp in inputs:
        for raw in np.asarray(inp, dtype=object).reshape(-1):
            part = Summary()
            try:
                part.ParseFromString(raw)
            except Exception:  # protobuf's DecodeError: not a Summary
                raise errors.InvalidArgumentError(
                    None, None, "Could not parse one of the summary inputs"
                ) from None
            for v in part.value:
                if v.tag in seen:
                    raise errors.InvalidArgumentError(
                        None, None, f"Duplicate tag {v.tag} found in summary inputs"
                    )
                seen.add(v.tag)
                merged.value.add().CopyFrom(v)
    raw = merged.SerializeToString()
    return _remember(raw, tuple(v.tag for v in merged.value),
                     any(v.HasField("metadata") for v in merged.value))  # fmt: skip


for _name in (
    "ScalarSummary",
    "HistogramSummary",
    "ImageSummary",
    "AudioSummaryV2",
    "TensorSummaryV2",
    "MergeSummary",
):
    NotDifferentiable(_name)


# -- _FusedMergeSummary: the scalars and histograms of a merge in one op --------------------
#
# A training step that merges a few scalars and a histogram of each parameter runs one
# op per summary and the merge: each histogram's fixed cost (a dozen NumPy calls on a
# few hundred values, the encoding) is most of its time at a small model's sizes.  The
# graph pass `fuse_summaries` makes a MergeSummary and the ScalarSummary/HistogramSummary
# ops that feed only it one `_FusedMergeSummary`, whose kernel buckets the float32
# histograms of up to _CHUNK values each together: their values concatenated into one
# buffer, one cell look-up (or one bounds check against the op's bucket memo), one
# bincount with an offset per histogram, min and max by `reduceat`, the kept buckets of
# every histogram in one pass.  The bytes are the unfused ops' (each histogram's sums
# computed on its own values as `_histogram` does), concatenated as MergeSummary does.
# Where numba is installed, summary_jit's compiled loop counts each histogram (float32
# or float64, any size) in one pass instead (`_jit_histograms`), with the same bytes:
# in the MLP step of benchmarks/summary_example_bench.py the kernel took ~0.1 ms
# instead of 0.56-0.6 ms.

FusedMergeSummary = register_op(
    "_FusedMergeSummary",
    inputs=["inputs: Tin"],
    outputs=["summary: string"],
    attrs={
        "Tin": TypeConstraint(None, is_list=True),
        # per part, in the merge's order: "scalar" (inputs tags, values), "histogram"
        # (inputs tag, values) or "summary" (one input: serialized Summaries); names: the
        # op each scalar or histogram part was (its errors name it)
        "kinds": [],
        "names": [],
    },
    shape_fn=_SCALAR,
)
NotDifferentiable("_FusedMergeSummary")  # introduced after the gradients were built

_ARITY = {"scalar": 2, "histogram": 2, "summary": 1}


class _Batch:
    """A fused op's buffers for its batch of histograms, kept for the sizes they were
    made for (fresh ones every step would be fresh pages): the values concatenated, each
    value's cell and bucket, and each value's histogram's offset into the counts.  (No
    bucket memo as `_BucketMemo`: inside a training step with Adam a tenth of the
    parameters' values change bucket every step, and moving them cost as much as the
    count afresh.)"""

    def __init__(self, sizes: tuple):
        n, width = sum(sizes), _LIMITS.size + 2
        self.sizes = sizes
        self.starts = np.zeros(len(sizes), np.intp)
        np.cumsum(sizes[:-1], out=self.starts[1:])
        self.buffer = np.empty(n, np.float32)
        self.threshold = np.empty(n, np.float32)
        self.above = np.empty(n, bool)
        self.key = np.empty(n, np.intp)
        self.base = np.empty(n, np.int16)
        self.index = np.empty(n, np.intp)
        self.offsets = np.repeat(np.arange(len(sizes), dtype=np.intp) * width, sizes)


# The batch's cells: float32's top 13 bits (sign, exponent, 4 mantissa bits), 2**-4 wide,
# still narrower than a bucket; its tables (48 KiB) stay in cache inside a training step,
# where the 16-bit ones (384 KiB) were fetched afresh: the batch's count of the example
# MLP's 50,826 values took 0.38 -> 0.29 ms inside its step.
_BATCH_CELL_BITS = 13


def _batch_counts(batch: _Batch, parts: list) -> np.ndarray:
    """Bucket counts ([histograms, buckets + 2]: NaN and Inf in the last two) of the
    float32 arrays `parts`, concatenated into `batch.buffer` (`_CellTable._counts` on
    all of them at once, a bincount with an offset per histogram)."""
    buf = batch.buffer
    np.concatenate(parts, out=buf)
    table = _cell_table(np.float32, _BATCH_CELL_BITS)
    key, index = batch.key, batch.index
    np.right_shift(buf.view(np.uint32), table.shift, out=key, casting="unsafe")
    np.take(table.threshold, key, out=batch.threshold)
    np.greater_equal(buf, batch.threshold, out=batch.above)
    np.take(table.base16, key, out=batch.base)
    np.add(batch.offsets, batch.base, out=index)
    index += batch.above
    width = _LIMITS.size + 2
    return np.bincount(index, minlength=len(batch.sizes) * width).reshape(-1, width)


def _batch_histograms(batch: _Batch, values: list, names: list) -> list[bytes]:
    """`histogram_bytes` of each float32 array of `values` (flat, 1.._CHUNK values, as
    many as `batch` was made for)."""
    sizes, starts = batch.sizes, batch.starts
    counts = _batch_counts(batch, values)
    width = _LIMITS.size + 2
    flat = counts.reshape(-1)
    _check_finite(flat, values, names)
    buf = batch.buffer
    lows = np.minimum.reduceat(buf, starts).tolist()
    highs = np.maximum.reduceat(buf, starts).tolist()
    for k, v in enumerate(values):  # a zero's sign: the first zero's (`_min_max`)
        if lows[k] == 0 or highs[k] == 0:
            lows[k], highs[k] = (float(x) for x in _min_max(v))
    # The kept buckets of each (as `_histogram`): non-empty ones, each empty one just
    # before a non-empty one, and the last; over the rows laid end to end (a row's two
    # non-finite bins are empty, and the next row's first bucket, below -DBL_MAX, too).
    filled = flat != 0
    keep = filled.copy()
    keep[:-1] |= filled[1:]
    keep.reshape(-1, width)[:, _LIMITS.size - 1] = True
    index = np.flatnonzero(keep)
    limits = _LIMITS[index % width].tobytes()
    kept = flat[index].astype("<f8").tobytes()
    ends = (np.searchsorted(index, np.arange(1, len(sizes) + 1) * width) * 8).tolist()
    totals, squares = _batch_sums(values, sizes)
    return _encode(sizes, lows, highs, totals, squares, limits, kept, ends)


def _check_finite(flat, values, names) -> None:
    """Raise TF's error for the first of `values` with NaN/Inf counted (the last two
    bins of its row of the counts `flat`)."""
    bad = flat.reshape(len(values), -1)[:, -2:].sum(axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        kind = "Nan" if np.isnan(values[k]).any() else "Infinity"
        raise errors.InvalidArgumentError(
            None, None, f"{kind} in summary histogram for: {names[k]}"
        )


def _encode(sizes, lows, highs, totals, squares, limits: bytes, kept: bytes, ends) -> list:
    """Each histogram's HistogramProto bytes (`histogram_bytes`): its kept buckets'
    limits and counts are `limits`/`kept` (doubles, little-endian) up to `ends[k]`
    (bytes), from where the previous one's end."""
    out, begin = [], 0
    for k, n in enumerate(sizes):
        end = ends[k]
        lo, hi, total, square = lows[k], highs[k], totals[k], squares[k]
        if lo and hi and total and square:  # (none left out: no 0.0, no -0.0 either)
            head = _pack_head(0x09, lo, 0x11, hi, 0x19, float(n), 0x21, total, 0x29, square)
        else:
            head = b"".join(
                (
                    _double_field(0x09, lo),
                    _double_field(0x11, hi),
                    _double_field(0x19, float(n)),
                    _double_field(0x21, total),
                    _double_field(0x29, square),
                )
            )
        size = _varint(end - begin)
        out.append(
            b"".join((head, b"\x32", size, limits[begin:end], b"\x3a", size, kept[begin:end]))
        )
        begin = end
    return out


# A histogram's five doubles (min 1, max 2, num 3, sum 4, sum_squares 5) with their
# keys, in one pack when none is zero (none left out).
_pack_head = struct.Struct("<BdBdBdBdBd").pack


def _jit_table(ftype) -> _CellTable:
    """The compiled loop's cell table: float32's 13-bit one (48 KiB, stays in cache),
    float64's 16-bit one (its cells need the bits to stay narrower than a bucket)."""
    return _cell_table(ftype, _BATCH_CELL_BITS if ftype == np.float32 else 16)


def _jit_histograms(values: list, names: list, tags: list | None = None) -> list | None:
    """`histogram_bytes` of each of `values` (flat, contiguous, float32 or float64, at
    least one value each) by summary_jit's compiled loop (one pass over each tensor's
    values, one over its counts); None while it is not compiled.  With `tags` (float32
    values only), each one's `_histo_value_bytes` instead."""
    if all(v.dtype == np.float32 for v in values):  # one call, the bytes written in it
        fields = None if tags is None else [_tag_field(t) for t in tags]
        done = summary_jit.encode(values, _jit_table(np.float32), _LIMITS, fields)
        if type(done) is int:  # (a NaN or Inf in one: see summary_jit.encode)
            k, nan = divmod(done, 2)
            kind = "Nan" if nan else "Infinity"
            raise errors.InvalidArgumentError(
                None, None, f"{kind} in summary histogram for: {names[k]}"
            )
        return done
    done = summary_jit.histograms(values, [_jit_table(v.dtype) for v in values], _LIMITS)
    if done is None:
        return None
    if type(done) is int:  # (a NaN or Inf in that one)
        kind = "Nan" if np.isnan(values[done]).any() else "Infinity"
        raise errors.InvalidArgumentError(
            None, None, f"{kind} in summary histogram for: {names[done]}"
        )
    stats, limits, kept, ends = done
    lows, highs, totals, squares = zip(*stats)
    return _encode(
        [v.size for v in values], lows, highs, totals, squares,
        limits.astype("<f8").tobytes(), kept.astype("<f8").tobytes(), [8 * e for e in ends],
    )  # fmt: skip


def _batch_sums(values: list, sizes: tuple) -> tuple[list, list]:
    """Sum and sum of squares (in double, in TF's order: `_sums`) of each of `values`."""
    totals, squares = [], []
    scratch = _scratch()
    for v, n in zip(values, sizes):
        d = scratch.double[:n]
        np.copyto(d, v)
        total, square = _sums(d, 0.0, 0.0, scratch.squares[:n])
        totals.append(total)
        squares.append(square)
    return totals, squares


def _scalar_tag(tag) -> str | None:
    """The tag of a 0-d string array, else None (`_tag` and its checks decide)."""
    if type(tag) is np.ndarray and tag.ndim == 0:
        t = tag[()]
        if isinstance(t, bytes):
            return t.decode("utf-8", "replace")
    return None


class _FusedState:
    def __init__(self, op):
        self.kinds = [k.decode() if isinstance(k, bytes) else k for k in op._attr("kinds")]
        self.names = [n.decode() if isinstance(n, bytes) else n for n in op._attr("names")]
        self.lock = threading.Lock()
        self.batch: _Batch | None = None
        self.memos = [_BucketMemo() for _ in self.kinds]

    def run(self, args) -> np.ndarray:
        pieces: list = []  # per part: its serialized Summary, or a string tensor
        histograms = []  # (part, tag, float32 values) of the batch
        jit = summary_jit.ready()  # (then the batch takes any non-empty float values)
        pos = 0
        for p, kind in enumerate(self.kinds):
            if kind == "scalar":
                tag, v = args[pos], args[pos + 1]
                name = _scalar_tag(tag)
                if name is not None and type(v) is np.ndarray and v.ndim == 0:  # one value
                    body = b"\x15" + _pack_f(float(v.astype(np.float32)))
                    pieces.append((_value_bytes(name, body), (name,)))
                else:
                    pieces.append(_scalar_bytes(tag, v))
            elif kind == "histogram":
                tag, v = args[pos], args[pos + 1]
                name = _scalar_tag(tag)
                if name is None:
                    _check_scalar_tag(tag)
                    name = _tag(tag)
                if type(v) is not np.ndarray or v.dtype != np.float32 or not v.flags.c_contiguous:
                    v = _as_float(v)
                elif v.ndim != 1:
                    v = v.reshape(-1)
                if v.size and (jit or v.dtype == np.float32 and v.size <= _CHUNK):
                    histograms.append((p, name, v))
                    pieces.append(None)
                else:
                    histo = histogram_bytes(v, self.names[p], self.memos[p])
                    pieces.append((_histo_value_bytes(name, histo), (name,)))
            else:
                pieces.append(args[pos])
            pos += _ARITY[kind]
        if histograms:
            values = [v for _, _, v in histograms]
            names = [self.names[p] for p, _, _ in histograms]
            if jit and all(v.dtype == np.float32 for v in values):
                # compiled, each Summary of one Value written there, tag and all
                tags = [name for _, name, _ in histograms]
                raws = _jit_histograms(values, names, tags)
                for (p, name, _), raw in zip(histograms, raws):
                    pieces[p] = (raw, (name,))
            else:
                sizes = tuple(v.size for v in values)
                if jit:  # (compiled: no buffers to share)
                    encoded = _jit_histograms(values, names)
                elif self.lock.acquire(blocking=False):
                    try:
                        if self.batch is None or self.batch.sizes != sizes:
                            self.batch = _Batch(sizes)
                        encoded = _batch_histograms(self.batch, values, names)
                    finally:
                        self.lock.release()
                else:  # a concurrent step has the buffers: its own
                    encoded = _batch_histograms(_Batch(sizes), values, names)
                for (p, name, _), histo in zip(histograms, encoded):
                    pieces[p] = (_histo_value_bytes(name, histo), (name,))
        # MergeSummary of the parts: their bytes concatenated when every string is known
        # (made here) and the tags are distinct; else `_merge` parses and checks them.
        raws, tags, metadata = [], [], False
        for kind, piece in zip(self.kinds, pieces):
            if kind != "summary":
                raws.append(piece[0])
                tags.extend(piece[1])
                continue
            for raw in np.asarray(piece, dtype=object).reshape(-1):
                known = made_here(raw)
                if known is None:
                    return self._merge(pieces)
                raws.append(raw)
                tags.extend(known[0])
                metadata = metadata or known[1]
        if len(set(tags)) != len(tags):
            return self._merge(pieces)
        return _remember(b"".join(raws), tuple(tags), metadata)

    def _merge(self, pieces) -> np.ndarray:
        inputs = [
            piece if kind == "summary" else _remember(*piece, False)
            for kind, piece in zip(self.kinds, pieces)
        ]
        return _merge(inputs)


@FusedMergeSummary.kernel("CPU")
async def _fused_merge_summary(ctx, *args):
    state = ctx.kernel_state.get("fused")
    if state is None:
        state = ctx.kernel_state["fused"] = _FusedState(ctx.op)
    return await ctx.device.compute(state.run, args)


def fuse_summaries(view) -> None:
    """Graph pass (asyncflow.graph_passes): a MergeSummary and the ScalarSummary and
    HistogramSummary ops that feed only it become one `_FusedMergeSummary` on CPU, in a
    partition without a while loop or a Recv (the fused node is dead exactly when the
    merge was: when one of their inputs is).  A merge that waits for a variable's update stays as
    it is: the fused op must run before the updates of the variables it reads
    (`order_before_updates`), or each would copy its variable."""
    if view.has_loops_or_recvs():
        return
    for m, node in enumerate(view.nodes):
        if node.op.type != "MergeSummary" or node.device.device_type != "CPU":
            continue
        if not view.available(m) or view.reads_ref(m) or view.after_an_update(m):
            continue  # (after an update: its histograms could not be ordered before it)
        kinds, names, inputs, dtypes_in, absorbed = [], [], [], [], []
        for k, src in enumerate(node.inputs):
            j = src[0]
            part = view.nodes[j] if j != "feed" else None
            if (
                part is not None
                and src[1] == 0
                and part.op.type in ("ScalarSummary", "HistogramSummary")
                and part.device is node.device
                and view.available(j)
                and not view.reads_ref(j)
                and view.sole_consumer(j) == m
            ):
                kinds.append("scalar" if part.op.type == "ScalarSummary" else "histogram")
                names.append(part.op.name)
                inputs.extend(part.inputs)
                dtypes_in.extend(t.dtype for t in part.op.inputs)
                absorbed.append(j)
            else:
                kinds.append("summary")
                names.append("")
                inputs.append(src)
                dtypes_in.append(node.op.inputs[k].dtype)
        if not absorbed:
            continue
        attrs = {"Tin": dtypes_in, "kinds": kinds, "names": names}
        view.fuse(m, "_FusedMergeSummary", attrs, inputs, absorbed=absorbed)


# -- graph pass: summaries of a variable before its update ------------------------------
#
# A summary op that reads a variable (a histogram of a weight) holds a lease on its
# buffer until it ends.  The executor runs it when its branch of the ready stack comes up,
# which in a training step is after the optimizer's updates: each update then found the
# buffer lent and copied the variable (six copies of 670k values per step in the MLP of
# benchmarks/summary_bench.py).  Making the updates wait for the summaries of what they
# write changes no value (the summary reads the value from before the update either way:
# copy-on-write guarantees that) and costs no copy.

_SUMMARY_OPS = frozenset(
    [
        "ScalarSummary",
        "HistogramSummary",
        "ImageSummary",
        "AudioSummaryV2",
        "TensorSummaryV2",
        "_FusedMergeSummary",
    ]
)


def order_before_updates(view) -> None:
    """Graph pass (asyncflow.graph_passes): each summary op that reads a variable runs
    before the ops of its partition that update that variable (control edges), unless
    an update is upstream of the summary, the partition has a while loop or a Recv, or
    the summary may be dead where an update is live (`PartitionView.order_before_writers`
    declines those)."""
    for i, node in enumerate(view.nodes):
        if node.op.type not in _SUMMARY_OPS:
            continue
        variables = set()
        for src in node.inputs:
            if src[0] != "feed":
                v = view.variable_behind(src)
                if v is not None:
                    variables.add(v)
        if variables:
            view.order_before_writers(i, variables)


# -- builders (TF1's tf.summary) ----------------------------------------------------------

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name):
    """TF's `clean_tag`: invalid characters become '_', leading '/' go."""
    if name is None:
        return None
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if new_name != name:
        from asyncflow import tf_logging

        tf_logging.info("Summary name %s is illegal; using %s instead.", name, new_name)
    return new_name


class _SummaryScope:
    """TF's `summary_scope`: the name scope `family/name` and the tag shown."""

    def __init__(self, name, family=None, values=None):
        self._name = _clean_tag(name)
        self._family = _clean_tag(family)
        base = self._name if self._family is None else f"{self._family}/{self._name}"
        self._cm = ops.name_scope(base, None, values)

    def __enter__(self):
        scope = self._cm.__enter__()
        tag = scope.rstrip("/")
        if self._family is not None:
            tag = f"{self._family}/{tag}"
        return tag, scope

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def _collect(val, collections, default_collections):
    if collections is None:
        collections = default_collections
    for key in collections:
        ops.add_to_collection(key, val)


def _summary_op(op_type, inputs, attrs, scope):
    return ops.apply_op(op_type, inputs, attrs, name=scope).outputs[0]


def scalar(name, tensor, collections=None, family=None):
    """A Summary with one scalar value (`tf.summary.scalar`).

    Raises:
      ValueError: the tensor is not a scalar (build time, as TF).
    """
    tensor = ops.convert_to_tensor(tensor)
    if tensor.shape.ndims is not None and tensor.shape.ndims != 0:
        raise ValueError(
            f"Shapes must be equal rank, but are {tensor.shape.ndims} and 0 for "
            f"'{name}' (op: 'ScalarSummary')"
        )
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op("ScalarSummary", [tag, tensor], {}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def histogram(name, values, collections=None, family=None):
    """A Summary with a histogram of `values` (`tf.summary.histogram`)."""
    with _SummaryScope(name, family, values=[values]) as (tag, scope):
        val = _summary_op("HistogramSummary", [tag, values], {}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """PNG images of a [batch, height, width, channels] tensor (`tf.summary.image`)."""
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op("ImageSummary", [tag, tensor], {"max_images": max_outputs}, scope)
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """WAV clips of a [batch, frames(, channels)] float tensor (`tf.summary.audio`)."""
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        sample_rate = ops.convert_to_tensor(sample_rate, dtype=dtypes.float32, name="sample_rate")
        val = _summary_op(
            "AudioSummaryV2", [tag, tensor, sample_rate], {"max_outputs": max_outputs}, scope
        )
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def tensor_summary(
    name,
    tensor,
    summary_description=None,
    collections=None,
    summary_metadata=None,
    family=None,
    display_name=None,
):
    """A Summary holding the whole tensor as a TensorProto (`tf.summary.tensor_summary`)."""
    if summary_metadata is None:
        summary_metadata = SummaryMetadata()
    if summary_description is not None:
        summary_metadata.summary_description = summary_description
    if display_name is not None:
        summary_metadata.display_name = display_name
    serialized = summary_metadata.SerializeToString()
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        val = _summary_op(
            "TensorSummaryV2",
            [tag, tensor, np.array(serialized, dtype=object)],
            {},
            scope,
        )
        _collect(val, collections, [ops.GraphKeys.SUMMARIES])
    return val


def text(name, tensor, collections=None):
    """A string tensor for TensorBoard's text plugin (`tf.summary.text`).

    Raises:
      ValueError: the tensor is not of dtype string.
    """
    tensor = ops.convert_to_tensor(tensor)
    if tensor.dtype != dtypes.string:
        raise ValueError(f"Expected tensor {tensor.name} to have dtype string, got {tensor.dtype}")
    metadata = SummaryMetadata()
    metadata.plugin_data.plugin_name = "text"
    return tensor_summary(
        name=name, tensor=tensor, summary_metadata=metadata, collections=collections
    )


def merge(inputs, collections=None, name=None):
    """One Summary with every value of `inputs` (`tf.summary.merge`).

    Raises (at run time): InvalidArgumentError for a tag that appears twice.
    """
    inputs = list(inputs)
    with ops.name_scope(name, "Merge", inputs):
        val = ops.apply_op("MergeSummary", [inputs], {"N": len(inputs)}, name=name).outputs[0]
        _collect(val, collections, [])
    return val


def merge_all(key=ops.GraphKeys.SUMMARIES, scope=None, name=None):
    """Merge every summary in collection `key` (optionally under `scope`); None if none."""
    summary_ops = ops.get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)
