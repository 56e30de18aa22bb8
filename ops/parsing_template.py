"""ParseExample's fastest path: a batch of records that share one byte layout.

Records written by one program (one writer, one schema) usually differ only in their
values: the same features in the same order, each list the same length.  Then the
batch is a 2-D byte array (records x bytes), and each requested feature's values are
a block of columns: floats are a view of those bytes, int64 varints are decoded for
the whole block at once.

The layout is read from the first record of each record length (a full walk of its
wire format, which must be the canonical one TF and protobuf write); every other record
of that length must equal it byte for byte outside the requested values.  Such a record
has, field for field, the first record's structure, so it parses as the first does and
only its values differ.  Anything else (an unusual encoding, a duplicate or missing
key, a requested string feature, a count or kind TF would reject, too many distinct
lengths) returns None and the caller's general path decides, with TF's messages.

Invariant: `dense_batch` returns either exactly what the general path returns for the
same input, or None.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["dense_batch"]

_MAX_LAYOUTS = 8  # distinct record lengths per batch worth a layout each
# The last layout seen per record length, with its record (as a row of bytes): a batch
# whose records equal that record outside the requested values has its layout, without
# walking a record's wire format again (~50 µs a batch of data_bench's records).
_CACHE: dict[int, tuple[dict, np.ndarray]] = {}
_CACHE_MAX = 64


def _varint(buf: bytes, pos: int, end: int):
    value = shift = 0
    while pos < end and shift < 64:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None, None


def _delimited(buf: bytes, pos: int, end: int, field: int):
    """(start, end) of the length-delimited `field` at `pos`, or None."""
    if pos >= end or buf[pos] != (field << 3 | 2):
        return None
    size, pos = _varint(buf, pos + 1, end)
    if size is None or pos + size > end:
        return None
    return pos, pos + size


def _feature_lists(rec: bytes):
    """{key: (kind, payload start, payload end)} of a canonical Example: each list one
    packed (or, for bytes, repeated) field 1; None for anything else."""
    n = len(rec)
    feats = _delimited(rec, 0, n, 1)
    if feats is None or feats[1] != n:
        return None
    out = {}
    pos, end = feats
    while pos < end:
        entry = _delimited(rec, pos, end, 1)
        if entry is None:
            return None
        pos = entry[1]
        key = _delimited(rec, entry[0], entry[1], 1)
        if key is None:
            return None
        feature = _delimited(rec, key[1], entry[1], 2)
        if feature is None or feature[1] != entry[1]:
            return None
        try:
            name = rec[key[0] : key[1]].decode("utf-8")
        except UnicodeDecodeError:
            return None
        if name in out or feature[0] == feature[1]:
            return None  # a duplicate key, or a feature with no kind set
        kind = rec[feature[0]] >> 3
        if kind not in (1, 2, 3) or rec[feature[0]] & 7 != 2:
            return None
        lst = _delimited(rec, feature[0], feature[1], kind)
        if lst is None or lst[1] != feature[1]:
            return None
        if kind == 1:
            p = lst[0]
            while p < lst[1]:  # every string a field 1 of the BytesList
                s = _delimited(rec, p, lst[1], 1)
                if s is None:
                    return None
                p = s[1]
            out[name] = (1, lst[0], lst[1])
            continue
        if lst[0] == lst[1]:
            out[name] = (kind, lst[0], lst[0])  # an empty list
            continue
        values = _delimited(rec, lst[0], lst[1], 1)
        if values is None or values[1] != lst[1]:
            return None
        out[name] = (kind, values[0], values[1])
    return out


def _varints(block: np.ndarray, want: int):
    """Decode a (records x bytes) block of packed varints: (records x want) int64, or
    None unless each row holds exactly `want` complete varints of at most 10 bytes."""
    rows = block.shape[0]
    term = block < 0x80
    if block.shape[1] == want and term.all():  # one byte each: values 0..127 (labels)
        return block.astype(np.int64)
    # Each row ends a varint, so none runs into the next row.
    if not term[:, -1].all() or (term.sum(axis=1) != want).any():
        return None
    data = block.reshape(-1)
    ends = np.flatnonzero(term.reshape(-1))
    begins = np.empty_like(ends)
    begins[0] = 0
    begins[1:] = ends[:-1] + 1
    widths = ends - begins + 1
    if widths.max() > 10:
        return None
    pos = np.arange(len(data), dtype=np.int64) - np.repeat(begins, widths)
    parts = (data & 0x7F).astype(np.uint64) << (7 * pos).astype(np.uint64)
    return np.add.reduceat(parts, begins).view(np.int64).reshape(rows, want)


def _layout_values(rows: np.ndarray, layout: dict, specs, ref: np.ndarray | None = None):
    """(which rows have the layout of `ref` (a record of that layout; `rows[0]` by
    default), their requested values), or None."""
    blocks = []
    for key, kind, want in specs:
        got = layout.get(key)
        if got is None or got[0] != kind:
            return None
        _, start, end = got
        size = end - start
        if kind == 2 and size != 4 * want:
            return None
        if kind == 3 and not want <= size <= 10 * want:
            return None
        blocks.append((kind, start, end, want))
    # Equal to `ref` outside the requested values: one comparison of the whole rows,
    # the value columns then cleared (cheaper than selecting the structural columns).
    diff = rows != (rows[0] if ref is None else ref)
    for _, start, end, _ in blocks:
        diff[:, start:end] = False
    same = ~diff.any(axis=1)
    if not same.all():
        rows = rows[same]
    out = []
    for kind, start, end, want in blocks:
        block = np.ascontiguousarray(rows[:, start:end])
        if kind == 2:
            out.append(block.view("<f4").astype(np.float32, copy=False))
            continue
        values = _varints(block, want)
        if values is None:
            return None
        out.append(values)
    return same, out


def dense_batch(records: list, keys, kinds, shapes) -> list | None:
    """Dense FixedLen features of a batch (kinds 2: float32, 3: int64), each
    [len(records), *shape]; None when the layout path does not apply."""
    n = len(records)
    if n == 0 or 1 in kinds:
        return None
    specs = []
    for key, kind, shape in zip(keys, kinds, shapes, strict=True):
        want = math.prod(shape)
        if want == 0:
            return None
        specs.append((key, kind, want))
    try:
        lens = np.fromiter(map(len, records), np.int64, n)
        flat = np.frombuffer(b"".join(records), np.uint8)
    except TypeError:  # not bytes: the general path reports it
        return None
    lo = int(lens.min())
    sizes = [lo] if lo == int(lens.max()) else np.unique(lens).tolist()
    if len(sizes) > _MAX_LAYOUTS:
        return None
    starts = np.cumsum(lens) - lens
    outs = None
    layouts = 0
    for size in sizes:
        if len(sizes) == 1:
            which, rows = np.arange(n), flat.reshape(n, size)
        else:
            which = np.flatnonzero(lens == size)
            rows = flat[starts[which][:, None] + np.arange(size)]
        cached = _CACHE.get(size)
        while len(which):  # one layout after another (maps may be written in any order)
            got = None
            if cached is not None:  # first the layout of this length seen last
                got = _layout_values(rows, cached[0], specs, cached[1])
                cached = None
                if got is not None and not got[0].any():
                    got = None
            if got is None:
                layout = _feature_lists(records[int(which[0])])
                if layout is None or layouts >= _MAX_LAYOUTS:
                    return None
                got = _layout_values(rows, layout, specs)
                if got is None:
                    return None
                if len(_CACHE) >= _CACHE_MAX:
                    _CACHE.clear()
                _CACHE[size] = (layout, rows[0].copy())
            layouts += 1
            same, values = got
            if layouts == 1 and len(sizes) == 1 and same.all():  # the whole batch: as is
                return [v.reshape([n, *shape]) for v, shape in zip(values, shapes, strict=True)]
            if outs is None:
                outs = [
                    np.empty((n, want), np.float32 if kind == 2 else np.int64)
                    for _, kind, want in specs
                ]
            for out, v in zip(outs, values, strict=True):
                out[which[same]] = v
            which, rows = which[~same], rows[~same]
    return [o.reshape([n, *shape]) for o, shape in zip(outs, shapes, strict=True)]
