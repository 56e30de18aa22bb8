"""Protocol buffer wire-format pieces for the encoders written by hand (summaries,
snapshots, Examples from JSON, serialized sparse tensors, reader states, EncodeProto):
they write TF's messages' bytes field by field where building protobuf messages would
cost more than the work itself."""

from __future__ import annotations

__all__ = ["fields", "length_delimited", "varint"]

_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_M64 = 2**64 - 1


def varint(n: int) -> bytes:
    """`n` as a base-128 varint; a negative `n` as its 64-bit two's complement, as
    protobuf writes an int64."""
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    n &= _M64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def length_delimited(field: int, payload: bytes) -> bytes:
    """Field `field` holding `payload` (wire type 2: bytes, strings, messages)."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """The top-level fields of a serialized message: (number, wire type, value), a
    varint's value an int, the others' their bytes.

    Raises:
      ValueError: `data` is not a message's wire format (a group, a bad length).
    """
    out: list = []
    i, n = 0, len(data)

    def read_varint() -> int:
        nonlocal i
        v = shift = 0
        while True:
            if i >= n or shift > 63:
                raise ValueError("truncated varint")
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < n:
        key = read_varint()
        number, wire = key >> 3, key & 7
        if number == 0 or wire not in (0, 1, 2, 5):
            raise ValueError(f"bad field key {key}")
        if wire == 0:
            out.append((number, wire, read_varint()))
            continue
        size = read_varint() if wire == 2 else (8 if wire == 1 else 4)
        if i + size > n:
            raise ValueError("truncated field")
        out.append((number, wire, bytes(data[i : i + size])))
        i += size
    return out
