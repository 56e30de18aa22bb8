"""PNG encoding byte for byte as TF's EncodePng writes it (libpng's defaults).

TF hands rows to libpng with only the compression level set, so its files follow
libpng's default choices, which this module makes the same way:

- chunks IHDR, IDAT, IEND only; IDAT data cut into chunks of 8192 bytes (libpng's
  compression buffer);
- every row filtered with the filter (None, Sub, Up, Average, Paeth, tried in that order)
  whose output has the smallest sum of bytes read as signed magnitudes (libpng's
  "minimum sum of absolute differences" heuristic; the first of equal sums wins);
- an image of one row keeps only None and Sub, of one column only None and Up;
- zlib with the Z_FILTERED strategy, the level asked (-1: zlib's default, 6), memLevel
  9, and the window shrunk while the whole filtered image plus 262 bytes fits in half
  of it; for images up to 16 KiB the zlib header then names the smallest window that
  covers the data (libpng's optimisations for small images).

Python's zlib is the same deflate libpng calls, so the compressed stream is the same
bytes.  The filtering is vectorized over each row's bytes; rows run one after another
(each depends on the one above).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["encode_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG color type
_IDAT_SIZE = 8192


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _cost(filtered: np.ndarray) -> np.ndarray:
    """libpng's heuristic per candidate: each byte v counts min(v, 256 - v)."""
    v = filtered.astype(np.int64)
    return np.where(v < 128, v, 256 - v).sum(axis=-1)


def _filter_rows(rows: np.ndarray, bpp: int, allowed: list[int]) -> np.ndarray:
    """[height, 1 + row bytes]: each row's chosen filter type (of `allowed`) and its
    filtered bytes."""
    height, width = rows.shape
    out = np.empty((height, width + 1), np.uint8)
    prev = np.zeros(width, np.int64)
    for r in range(height):
        x = rows[r].astype(np.int64)
        left = np.concatenate([np.zeros(bpp, np.int64), x[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        p = left + prev - upleft
        pa, pb, pc = np.abs(p - left), np.abs(p - prev), np.abs(p - upleft)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        candidates = np.stack(
            [x, x - left, x - prev, x - (left + prev) // 2, x - paeth]
        ) & 0xFF
        costs = _cost(candidates[allowed])
        best = allowed[int(np.argmin(costs))]  # (the first of equal sums)
        out[r, 0] = best
        out[r, 1:] = candidates[best]
        prev = x
    return out


def _window_bits(data_size: int) -> int:
    bits, half = 15, 1 << 14
    while data_size + 262 <= half and bits > 9:  # (zlib has no 8-bit window)
        half >>= 1
        bits -= 1
    return bits


def _optimize_cmf(stream: bytearray, data_size: int) -> None:
    """libpng's rewrite of the zlib header for small images: the window size it names
    is the smallest that still covers the data (a valid header: FCHECK recomputed)."""
    if data_size > 16384:
        return
    cmf = stream[0]
    if cmf & 0x0F != 8 or cmf & 0xF0 > 0x70:
        return
    cinfo = cmf >> 4
    half = 1 << (cinfo + 7)
    if data_size > half:
        return
    while True:
        half >>= 1
        cinfo -= 1
        if not (cinfo > 0 and data_size <= half):
            break
    cmf = (cmf & 0x0F) | (cinfo << 4)
    flg = stream[1] & 0xE0
    flg += 0x1F - ((cmf << 8) + flg) % 0x1F
    stream[0], stream[1] = cmf, flg


def encode_png(image: np.ndarray, compression: int = -1) -> bytes:
    """`image` [height, width, channels] (uint8 or uint16, 1-4 channels) as the PNG file
    TF's EncodePng writes for it."""
    height, width, channels = image.shape
    depth = 16 if image.dtype == np.uint16 else 8
    samples = image.astype(">u2" if depth == 16 else np.uint8, copy=False)
    rows = np.ascontiguousarray(samples).view(np.uint8).reshape(height, -1)
    bpp = channels * depth // 8
    # libpng drops the filters that would look at a missing row above or pixel to
    # the left of every pixel: one row keeps None and Sub, one column None and Up.
    allowed = [0, 1, 2, 3, 4]
    if height == 1:
        allowed = [f for f in allowed if f not in (2, 3, 4)]
    if width == 1:
        allowed = [f for f in allowed if f not in (1, 3, 4)]
    filtered = _filter_rows(rows, bpp, allowed)
    raw = filtered.tobytes()
    level = zlib.Z_DEFAULT_COMPRESSION if compression < 0 else min(int(compression), 9)
    z = zlib.compressobj(level, zlib.DEFLATED, _window_bits(len(raw)), 9, zlib.Z_FILTERED)
    stream = bytearray(z.compress(raw) + z.flush())
    _optimize_cmf(stream, len(raw))
    stream = bytes(stream)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, _COLOR_TYPES[channels], 0, 0, 0)
    parts = [_SIGNATURE, _chunk(b"IHDR", ihdr)]
    for start in range(0, len(stream), _IDAT_SIZE):
        parts.append(_chunk(b"IDAT", stream[start : start + _IDAT_SIZE]))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)


# -- 16-bit decoding -----------------------------------------------------------------------
#
# Pillow reads 16-bit gray PNGs at 16 bits but 16-bit RGB, RGBA and gray+alpha ones at 8
# (it has no 16-bit multi-channel modes), so decode_png(dtype=uint16) of those lost the
# low byte.  `decode_png16` reads them itself: non-interlaced, bit depth 16, every
# filter; anything else returns None and Pillow decodes it.

_CHANNELS_OF = {0: 1, 2: 3, 4: 2, 6: 4}
_MAX_PIXELS = 1 << 29  # (a header's claim checked before any allocation)


def _chunks(data: bytes):
    pos = len(_SIGNATURE)
    while pos + 12 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if len(body) != n:
            return
        yield kind, body
        pos += 12 + n


def decode_png16(data: bytes):
    """A 16-bit PNG as uint16 [height, width, channels], or None when it is not a
    non-interlaced 16-bit image (or is damaged: Pillow then says how)."""
    if not data.startswith(_SIGNATURE) or len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if depth != 16 or interlace or color not in _CHANNELS_OF or not (width and height):
        return None
    channels = _CHANNELS_OF[color]
    if width * height * channels > _MAX_PIXELS:
        return None
    stream = b"".join(body for kind, body in _chunks(data) if kind == b"IDAT")
    row_bytes = width * channels * 2
    size = height * (row_bytes + 1)
    try:
        raw = zlib.decompressobj().decompress(stream, size)
    except zlib.error:
        return None
    if len(raw) != size:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(height, row_bytes + 1)
    out = np.empty((height, row_bytes), np.uint8)
    bpp = channels * 2
    prev = np.zeros(row_bytes, np.int64)
    for r in range(height):
        kind, x = int(rows[r, 0]), rows[r, 1:].astype(np.int64)
        if kind == 0:
            cur = x
        elif kind == 1:  # Sub: a running sum along each byte of the pixel
            cur = np.cumsum(x.reshape(-1, bpp), axis=0).reshape(-1) & 0xFF
        elif kind == 2:
            cur = (x + prev) & 0xFF
        elif kind in (3, 4):
            cur = np.zeros(row_bytes, np.int64)
            for i in range(0, row_bytes, bpp):
                b = prev[i : i + bpp]
                if i:
                    a, c = cur[i - bpp : i], prev[i - bpp : i]
                else:
                    a = c = np.zeros(bpp, np.int64)
                if kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
                    pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
                cur[i : i + bpp] = (x[i : i + bpp] + pred) & 0xFF
        else:
            return None
        out[r] = cur
        prev = cur
    return out.view(">u2").astype(np.uint16).reshape(height, width, channels)
