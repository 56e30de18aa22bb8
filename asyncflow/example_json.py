"""A tf.train.Example written in protobuf's JSON mapping, serialized the way TF's
DecodeJSONExample writes it.

TF converts the JSON text straight to wire format, so its bytes follow the JSON: fields
and map entries in the order the text lists them, and repeated numbers one tag per
value (unpacked). protobuf's Python serializer would sort map entries by its own order
and pack the numbers, which parses to the same message but gives other bytes.

Invariant: the message is first parsed with json_format, so every error (and every
value conversion: "NaN", int64 given as strings, base64 bytes) is protobuf's; this
module only orders and frames values already parsed.
"""

from __future__ import annotations

import json
import struct

from google.protobuf import json_format

from asyncflow.proto_wire import length_delimited as _framed
from asyncflow.proto_wire import varint as _varint
from asyncflow.protos.example_pb2 import Example

__all__ = ["example_from_json"]

# Feature's oneof, by either JSON spelling: (field number, list attribute, value encoder).
_KINDS = {
    "bytesList": (1, "bytes_list"),
    "bytes_list": (1, "bytes_list"),
    "floatList": (2, "float_list"),
    "float_list": (2, "float_list"),
    "int64List": (3, "int64_list"),
    "int64_list": (3, "int64_list"),
}


def _list_bytes(number: int, values) -> bytes:
    if number == 1:
        return b"".join(_framed(1, bytes(v)) for v in values)
    if number == 2:
        return b"".join(b"\x0d" + struct.pack("<f", v) for v in values)
    return b"".join(b"\x08" + _varint(int(v)) for v in values)


def _feature_bytes(feature, text: dict) -> bytes:
    out = b""
    for key, value in text.items():
        if key in _KINDS and value is not None:
            number, attr = _KINDS[key]
            out += _framed(number, _list_bytes(number, getattr(feature, attr).value))
    return out


def _features_bytes(features, text: dict) -> bytes:
    out = b""
    for key, entries in text.items():
        if key != "feature" or entries is None:
            continue
        for name, value in entries.items():
            entry = _framed(1, name.encode("utf-8"))
            entry += _framed(2, _feature_bytes(features.feature[name], value or {}))
            out += _framed(1, entry)
    return out


def example_from_json(text: str) -> bytes:
    """The serialized Example that JSON `text` spells, in TF's byte order.

    Raises:
      json_format.ParseError: text that is not JSON for an Example.
    """
    example = json_format.Parse(text, Example())
    tree = json.loads(text)
    out = b""
    for key, value in tree.items():
        if key == "features" and value is not None:
            out += _framed(1, _features_bytes(example.features, value))
    return out
