"""Protocol buffer wire-format pieces for the encoders written by hand (summaries,
snapshots, Examples from JSON, serialized sparse tensors, reader states, EncodeProto):
they write TF's messages' bytes field by field where building protobuf messages would
cost more than the work itself."""

from __future__ import annotations

__all__ = ["length_delimited", "varint"]

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
