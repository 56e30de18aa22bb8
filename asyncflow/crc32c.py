"""CRC-32C (Castagnoli) and the masked form TFRecord files store.

The backend is `google-crc32c` (Google's C library: the CPU's CRC32 instruction where
present, ~30 GB/s; it releases the GIL on bytes of 1 MiB and more).  Its C functions
take `bytes` only, so other buffers (memoryviews of a read buffer, arrays' memory) are
fed to it in 256 KiB copies: the copy stays in cache and the GIL is free between
pieces, for a CRC thread that runs beside I/O.  (google-crc32c falls back to its own
pure-Python code, with a RuntimeWarning, where its extension is missing.)

The mask is TensorFlow's (`tensorflow/core/lib/hash/crc32c.h`): rotate right by 15
bits and add 0xa282ead8, so that a CRC computed over data that itself holds CRCs
does not degenerate.
"""

from __future__ import annotations

import google_crc32c as _google
import numpy as np

__all__ = [
    "crc32c",
    "masked_crc32c",
    "unmask",
    "extend",
    "crc32c_function",
    "crc32c_gil_free",
    "BACKEND",
    "shift",
    "combine",
    "shift_array",
    "combine_equal",
    "SHIFT_PERIOD",
]

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_PIECE = 256 << 10
BACKEND = f"google-crc32c ({_google.implementation})"
_g_extend = _google.extend
_g_value = _google.value


def _extend_buffer(crc: int, data) -> int:
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    for start in range(0, view.nbytes, _PIECE):
        crc = _g_extend(crc, bytes(view[start : start + _PIECE]))
    return crc


def extend(crc: int, data) -> int:
    """CRC-32C of the concatenation, given `crc` of the prefix (any bytes-like data)."""
    if type(data) is bytes:
        return _g_extend(crc, data)
    return _extend_buffer(crc, data)


def _value(data) -> int:
    if type(data) is bytes:
        return _g_value(data)
    return _extend_buffer(0, data)


def crc32c_function():
    """A one-argument `crc(data) -> int` with the least call overhead."""
    return _value


def crc32c_gil_free():
    """A `crc(data) -> int` that lets other threads run while it works (for a CRC
    thread beside I/O): large bytes release the GIL, other buffers go in pieces."""
    return _value


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of `data` (bytes-like)."""
    return extend(crc, data)


def masked_crc32c(data) -> int:
    """TF's masked CRC-32C of `data`, as stored in TFRecord framing."""
    c = extend(0, data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & _U32


def unmask(masked: int) -> int:
    """The CRC a masked value was made from."""
    rot = (masked - _MASK_DELTA) & _U32
    return ((rot >> 17) | (rot << 15)) & _U32


# -- combining CRCs -----------------------------------------------------------------------
#
# CRC-32C is affine: crc(A || B) = shift(crc(A), len(B)) ^ crc(B), where shift(c, n) is
# the GF(2)-linear (and invertible) map "run the CRC register over n zero bytes" (zlib's
# crc32_combine).  So the CRC of a long run of blocks follows from the blocks' CRCs, and
# a CRC computed in one call over a whole buffer can stand for many small ones.  A
# linear map of 32-bit values is kept as its 32 column images (uint32), or, to apply it
# to many values, as 4 tables of 256 entries (one per byte).

_BIT = np.arange(32, dtype=np.uint32)
_BYTE_SHIFTS = (np.uint32(8) * np.arange(4, dtype=np.uint32))[:, None]
_POW2_COLS: list[np.ndarray] = []  # [b]: columns of shift by 2**b bytes
_POW2_TABLES: list[list[list[int]]] = []  # [b]: the same as byte tables, Python ints
# Byte tables of shifts by n bytes: n -> (4, 256); ("radix", span, extra) -> (_RADIX, 4,
# 256) (see _radix_tables), all flat.
_TABLES: dict = {}
_TABLES_MAX = 64  # at most 4 MiB
_RADIX = 16


def _apply(cols: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The linear map with columns `cols` applied to every value of `x` (uint32)."""
    bits = (x[..., None] >> _BIT) & np.uint32(1)
    return np.bitwise_xor.reduce(bits * cols, axis=-1)


def _pow2_cols(b: int) -> np.ndarray:
    while len(_POW2_COLS) <= b:
        if not _POW2_COLS:  # one zero byte: eight steps of the reflected register
            c = (np.uint32(1) << _BIT).astype(np.int64)
            for _ in range(8):
                c = np.where(c & 1, (c >> 1) ^ 0x82F63B78, c >> 1)
            _POW2_COLS.append(c.astype(np.uint32))
        else:
            last = _POW2_COLS[-1]
            _POW2_COLS.append(_apply(last, last))
    return _POW2_COLS[b]


def _byte_tables(cols: np.ndarray) -> np.ndarray:
    return _apply(cols, np.arange(256, dtype=np.uint32)[None, :] << _BYTE_SHIFTS)


def shift(crc: int, n: int) -> int:
    """The register `crc` run over `n` zero bytes: crc(A + B) == shift(crc(A), len(B)) ^
    crc(B)."""
    b = 0
    while n:
        if n & 1:
            while len(_POW2_TABLES) <= b:
                t = _byte_tables(_pow2_cols(len(_POW2_TABLES)))
                _POW2_TABLES.append([row.tolist() for row in t])
            t0, t1, t2, t3 = _POW2_TABLES[b]
            crc = t0[crc & 255] ^ t1[(crc >> 8) & 255] ^ t2[(crc >> 16) & 255] ^ t3[crc >> 24]
        n >>= 1
        b += 1
    return crc


def combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """CRC-32C of A + B from crc(A), crc(B) and len(B) (zlib's crc32_combine)."""
    return shift(crc_a, len_b) ^ crc_b


def _shift_cols(n: int) -> np.ndarray:
    cols, b = None, 0
    while n:
        if n & 1:
            p = _pow2_cols(b)
            cols = p if cols is None else _apply(p, cols)
        n >>= 1
        b += 1
    return np.uint32(1) << _BIT if cols is None else cols


def _cache(key, make):
    t = _TABLES.get(key)
    if t is None:
        if len(_TABLES) >= _TABLES_MAX:
            _TABLES.clear()
        t = _TABLES[key] = make()
    return t


def _apply_tables(flat: np.ndarray, base: np.ndarray, x: np.ndarray) -> np.ndarray:
    """XOR over the bytes k of each value of x of flat[base[k, ...] + byte k], where x
    has the shape of base[0]: one gather, and a reduction over the first axis.

    (Indexing with the bytes themselves, uint8, would make numpy convert each index
    array: an index array of intp built in one addition is several times faster.)
    """
    b = np.ascontiguousarray(x, "<u4").view(np.uint8).reshape(*x.shape, 4)
    b = b.transpose((x.ndim, *range(x.ndim)))  # the byte axis first
    return np.bitwise_xor.reduce(np.take(flat, b + base), axis=0)


_BYTE_BASE = np.arange(0, 1024, 256, dtype=np.intp)[:, None]


def shift_array(x: np.ndarray, n: int) -> np.ndarray:
    """`shift` of every value of the uint32 array `x` by the same `n` bytes."""
    t = _cache(n, lambda: _byte_tables(_shift_cols(n)).ravel())
    return _apply_tables(t, _BYTE_BASE, x)


def _radix_tables(span: int, extra: int) -> np.ndarray:
    """The byte tables of shift by (R - 1 - j) * span + extra bytes, for j < R, flat."""
    step = _shift_cols(span)
    cols = _shift_cols(extra)
    out = np.empty((_RADIX, 4, 256), np.uint32)
    for j in range(_RADIX - 1, -1, -1):
        out[j] = _byte_tables(cols)
        cols = _apply(step, cols)
    return out.ravel()


# [k, j, 0]: where the table of byte k for the j-th block of a group starts
_RADIX_BASE = (1024 * np.arange(_RADIX, dtype=np.intp))[None, :, None] + _BYTE_BASE[:, :, None]


def combine_equal(crcs: np.ndarray, length: int, shift_by: int = 0) -> int:
    """CRC-32C of the concatenation of `len(crcs)` blocks of `length` bytes each, from
    the blocks' CRCs (uint32), then `shift`ed by `shift_by` bytes.

    A tree of radix R: each level shifts every value by its distance (in blocks) to the
    end of its group of R, with tables for each position in the group (16 KiB each, so
    that they stay in cache), and XORs each group together: a few numpy calls a level.
    """
    x = np.asarray(crcs, np.uint32)
    if len(x) <= 1:
        return shift(int(x[0]), shift_by) if len(x) else 0
    span, extra = length, shift_by
    while len(x) > 1:
        g = -(-len(x) // _RADIX)
        if g * _RADIX > len(x):  # leading zero blocks change nothing: shift(0, n) == 0
            x = np.concatenate((np.zeros(g * _RADIX - len(x), np.uint32), x))
        t = _cache(("radix", span, extra), lambda s=span, e=extra: _radix_tables(s, e))
        x = np.bitwise_xor.reduce(_apply_tables(t, _RADIX_BASE, x.reshape(g, _RADIX).T), axis=0)
        span *= _RADIX
        extra = 0
    return int(x[0])


# shift by this many bytes is the identity (x**8 has this order modulo the polynomial),
# so shift(c, n) is undone by shift(c, SHIFT_PERIOD - n % SHIFT_PERIOD).
SHIFT_PERIOD = (1 << 31) - 1
