"""tf.train.Example and friends: the protobuf messages, plus the ParseExample fast path.

The messages are the generated classes of asyncflow/protos/{example,feature}.proto (TF's
names and field numbers), so `Example`, `Features`, `Feature`, `BytesList`,
`FloatList`, `Int64List`, `SequenceExample`, `FeatureList` and `FeatureLists` have
protobuf's whole API and produce TF's bytes and text format.  `DecodeError` is
protobuf's `message.DecodeError`.

`decode_features(buf)` is the fast path the ParseExample kernel uses: it goes straight
from bytes to `{name: (kind, values)}` without building message objects.
"""

from __future__ import annotations

import numpy as np
from google.protobuf import message as _message

from asyncflow.protos.example_pb2 import Example, SequenceExample
from asyncflow.protos.feature_pb2 import (
    BytesList,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
)

__all__ = [
    "Example",
    "SequenceExample",
    "Features",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "BytesList",
    "FloatList",
    "Int64List",
    "DecodeError",
    "decode_features",
]


DecodeError = _message.DecodeError


# -- wire primitives -----------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64 values are ten-byte two's complement
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError("Truncated message.")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("Too many bytes when decoding varint.")


def _len_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _fields(buf, pos: int, end: int):
    """Yield (field number, wire type, value) where value is an int or (start, stop)."""
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise DecodeError("Field number 0 is illegal.")
        if wt == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if n > end - pos:
                raise DecodeError("Truncated message.")
            value = (pos, pos + n)
            pos += n
        elif wt == 5:
            if pos + 4 > end:
                raise DecodeError("Truncated message.")
            value = (pos, pos + 4)
            pos += 4
        elif wt == 1:
            if pos + 8 > end:
                raise DecodeError("Truncated message.")
            value = (pos, pos + 8)
            pos += 8
        else:  # groups (3, 4) never appear in these messages
            raise DecodeError(f"Unsupported wire type {wt}.")
        yield field, wt, value


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _decode_int64s(buf, pos: int, end: int, out: list) -> None:
    while pos < end:
        v, pos = _read_varint(buf, pos, end)
        out.append(_signed64(v & 0xFFFFFFFFFFFFFFFF))


def _decode_list(buf, start: int, end: int, kind: int):
    """Values of one BytesList (kind 1), FloatList (2) or Int64List (3) message."""
    if kind == 2:
        # Fast path: one packed field covering the whole message.
        if end - start >= 2 and buf[start] == 0x0A:
            n, p = _read_varint(buf, start + 1, end)
            if p + n == end and n % 4 == 0:
                return np.frombuffer(buf, "<f4", n // 4, p).astype(np.float32)
        parts = []
        for field, wt, val in _fields(buf, start, end):
            if field != 1:
                continue
            if wt == 2 and (val[1] - val[0]) % 4 == 0:
                parts.append(np.frombuffer(buf, "<f4", (val[1] - val[0]) // 4, val[0]))
            elif wt == 5:
                parts.append(np.frombuffer(buf, "<f4", 1, val[0]))
            else:
                raise DecodeError("Bad FloatList encoding.")
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
    values: list = []
    for field, wt, val in _fields(buf, start, end):
        if field != 1:
            continue
        if kind == 1:
            if wt != 2:
                raise DecodeError("Bad BytesList encoding.")
            values.append(bytes(buf[val[0] : val[1]]))
        elif wt == 2:
            _decode_int64s(buf, val[0], val[1], values)
        elif wt == 0:
            values.append(_signed64(val))
        else:
            raise DecodeError("Bad Int64List encoding.")
    return values


def _decode_feature(buf, start: int, end: int) -> tuple[int, object]:
    kind, values = 0, None
    for field, wt, val in _fields(buf, start, end):
        if 1 <= field <= 3:
            if wt != 2:
                raise DecodeError("Bad Feature encoding.")
            kind, values = field, _decode_list(buf, val[0], val[1], field)
    return kind, values


def _decode_map(buf, start: int, end: int, decode_value) -> dict:
    out: dict = {}
    for field, wt, val in _fields(buf, start, end):
        if field != 1:
            continue
        if wt != 2:
            raise DecodeError("Bad map entry.")
        key, value = b"", None
        for f2, wt2, v2 in _fields(buf, val[0], val[1]):
            if f2 == 1 and wt2 == 2:
                key = bytes(buf[v2[0] : v2[1]])
            elif f2 == 2 and wt2 == 2:
                value = decode_value(buf, v2[0], v2[1])
        if value is None:
            value = decode_value(buf, 0, 0)
        try:
            out[key.decode("utf-8")] = value
        except UnicodeDecodeError:
            raise DecodeError("Map key is not valid UTF-8.") from None
    return out


def decode_features(buf) -> dict[str, tuple[int, object]]:
    """Serialized Example → {feature name: (kind, values)}.

    kind is 0 (no value set), 1 (bytes: list of bytes), 2 (float: float32 ndarray) or
    3 (int64: list of int).

    Raises:
      DecodeError: malformed input.
    """
    mv = memoryview(buf)
    features = {}
    for field, wt, val in _fields(mv, 0, len(mv)):
        if field == 1:
            if wt != 2:
                raise DecodeError("Bad Example encoding.")
            features.update(_decode_map(mv, val[0], val[1], _decode_feature))
    return features
