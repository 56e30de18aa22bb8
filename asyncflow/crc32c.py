"""CRC-32C (Castagnoli) and the masked form TFRecord files store.

The fast path is the `crc32c` package (a C extension using the CPU's CRC32
instruction where present); without it a table-driven pure-Python implementation is
used, correct but ~1000x slower, so writing or checking large files wants the package.

The mask is TensorFlow's (`tensorflow/core/lib/hash/crc32c.h`): rotate right by 15
bits and add 0xa282ead8, so that a CRC computed over data that itself holds CRCs
does not degenerate.
"""

from __future__ import annotations

__all__ = ["crc32c", "masked_crc32c", "unmask", "extend", "crc32c_function", "BACKEND"]

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def _py_extend(crc: int, data: bytes) -> int:
    table = _TABLE
    c = crc ^ _U32
    for b in memoryview(data).cast("B"):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ _U32


try:  # the C extension: tens of GB/s with SSE4.2, still fast in software
    import crc32c as _crc32c_ext

    def extend(crc: int, data) -> int:
        """CRC-32C of the concatenation, given `crc` of the prefix."""
        return _crc32c_ext.crc32c(data, crc)

    def crc32c_function():
        """A one-argument `crc(data) -> int` with the least call overhead."""
        return _crc32c_ext.crc32c

    BACKEND = "crc32c"
except ImportError:  # pragma: no cover - exercised by test_python_io via _py_extend
    extend = _py_extend
    BACKEND = "python"

    def crc32c_function():
        """A one-argument `crc(data) -> int` with the least call overhead."""
        return lambda data: _py_extend(0, data)


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
