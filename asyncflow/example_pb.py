"""tf.train.Example and friends, written out by hand on the protobuf wire format.

The messages (tensorflow/core/example/{example,feature}.proto):

    Example          { Features features = 1; }
    SequenceExample  { Features context = 1; FeatureLists feature_lists = 2; }
    Features         { map<string, Feature> feature = 1; }
    FeatureLists     { map<string, FeatureList> feature_list = 1; }
    FeatureList      { repeated Feature feature = 1; }
    Feature          { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                    Int64List int64_list = 3; } }
    BytesList        { repeated bytes value = 1; }
    FloatList        { repeated float value = 1 [packed = true]; }
    Int64List        { repeated int64 value = 1 [packed = true]; }

The classes mirror the generated Python API a TF1 user touches
(`ex.features.feature["x"].float_list.value`, `SerializeToString`, `FromString`,
`ParseFromString`, `WhichOneof`).  Serialization writes map entries sorted by key
(protobuf's deterministic mode) and packed repeated scalars, which is what TensorFlow
produces with `deterministic=True`.  Parsing accepts anything a protobuf parser does
for these messages (packed or unpacked scalars, unknown fields skipped, last map
entry wins) and raises `DecodeError` on malformed input.

`decode_features(buf)` is the fast path the ParseExample kernel uses: it goes straight
from bytes to `{name: (kind, values)}` without building message objects.
"""

from __future__ import annotations

import numpy as np

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


class DecodeError(ValueError):
    """Malformed protobuf wire data (protobuf's `message.DecodeError`)."""


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


# -- message classes -----------------------------------------------------------------------


class _Message:
    __slots__ = ()

    def SerializeToString(self, deterministic=None) -> bytes:  # noqa: N802 - protobuf API
        return self._encode()

    def SerializePartialToString(self, deterministic=None) -> bytes:  # noqa: N802
        return self._encode()

    def ByteSize(self) -> int:  # noqa: N802
        return len(self._encode())

    @classmethod
    def FromString(cls, s):  # noqa: N802
        msg = cls()
        msg.MergeFromString(s)
        return msg

    def ParseFromString(self, s) -> int:  # noqa: N802
        self.Clear()
        return self.MergeFromString(s)

    def MergeFromString(self, s) -> int:  # noqa: N802
        mv = memoryview(bytes(s))
        self._merge(mv, 0, len(mv))
        return len(mv)

    def CopyFrom(self, other) -> None:  # noqa: N802
        if type(other) is not type(self):
            raise TypeError(
                f"Parameter to CopyFrom() must be instance of same class: "
                f"expected {type(self).__name__} got {type(other).__name__}."
            )
        self.ParseFromString(other.SerializeToString())

    def MergeFrom(self, other) -> None:  # noqa: N802
        self.MergeFromString(other.SerializeToString())

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._encode() == other._encode()

    __hash__ = None  # mutable, as protobuf messages

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._fields_repr()})"


class _ValueList(_Message):
    __slots__ = ("value",)

    def __init__(self, value=None):
        self.value = list(value) if value is not None else []

    def Clear(self) -> None:  # noqa: N802
        self.value = []

    def _fields_repr(self) -> str:
        return f"value={self.value!r}"


class BytesList(_ValueList):
    __slots__ = ()

    def _encode(self) -> bytes:
        out = []
        for v in self.value:
            if isinstance(v, str):
                v = v.encode("utf-8")
            elif not isinstance(v, bytes):
                raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: bytes")
            out.append(_len_field(1, v))
        return b"".join(out)

    def _merge(self, buf, start, end) -> None:
        self.value.extend(_decode_list(buf, start, end, 1))


class FloatList(_ValueList):
    __slots__ = ()

    def _encode(self) -> bytes:
        if not self.value:
            return b""
        return _len_field(1, np.asarray(self.value, dtype="<f4").tobytes())

    def _merge(self, buf, start, end) -> None:
        self.value.extend(float(x) for x in _decode_list(buf, start, end, 2))


class Int64List(_ValueList):
    __slots__ = ()

    def _encode(self) -> bytes:
        if not self.value:
            return b""
        for v in self.value:
            if not -(1 << 63) <= int(v) < 1 << 63:
                raise ValueError(f"Value out of range: {v}")
        return _len_field(1, b"".join(_varint(int(v)) for v in self.value))

    def _merge(self, buf, start, end) -> None:
        self.value.extend(_decode_list(buf, start, end, 3))


_KINDS = ("bytes_list", "float_list", "int64_list")
_KIND_TYPES = (BytesList, FloatList, Int64List)


class Feature(_Message):
    """One feature: exactly one of bytes_list, float_list, int64_list (a oneof)."""

    __slots__ = ("_lists", "_kind")

    def __init__(self, bytes_list=None, float_list=None, int64_list=None):
        self._lists = [None, None, None]
        self._kind = None
        for i, v in enumerate((bytes_list, float_list, int64_list)):
            if v is not None:
                if not isinstance(v, _KIND_TYPES[i]):
                    raise TypeError(f"{_KINDS[i]} must be a {_KIND_TYPES[i].__name__}")
                self._lists[i] = v
                self._kind = i

    def _get(self, i: int):
        if self._lists[i] is None:
            self._lists[i] = _KIND_TYPES[i]()
        return self._lists[i]

    bytes_list = property(lambda self: self._get(0))
    float_list = property(lambda self: self._get(1))
    int64_list = property(lambda self: self._get(2))

    def _which(self) -> int | None:
        if self._kind is not None:
            return self._kind
        for i, lst in enumerate(self._lists):
            if lst is not None and lst.value:
                return i
        return None

    def WhichOneof(self, oneof_group: str):  # noqa: N802
        if oneof_group != "kind":
            raise ValueError(f'Protocol message has no oneof "{oneof_group}" field.')
        i = self._which()
        return None if i is None else _KINDS[i]

    def HasField(self, name: str) -> bool:  # noqa: N802
        i = self._which()
        return i is not None and _KINDS[i] == name

    def Clear(self) -> None:  # noqa: N802
        self._lists = [None, None, None]
        self._kind = None

    def _encode(self) -> bytes:
        i = self._which()
        if i is None:
            return b""
        return _len_field(i + 1, self._get(i)._encode())

    def _merge(self, buf, start, end) -> None:
        for field, wt, val in _fields(buf, start, end):
            if 1 <= field <= 3 and wt == 2:
                i = field - 1
                if self._kind is not None and self._kind != i:
                    self._lists[self._kind] = None
                self._get(i)._merge(buf, val[0], val[1])
                self._kind = i

    def _fields_repr(self) -> str:
        i = self._which()
        return "" if i is None else f"{_KINDS[i]}={self._get(i)!r}"


class _MessageMap(dict):
    """A protobuf message map: reading a missing key creates the message."""

    def __init__(self, value_type, items=None):
        super().__init__()
        self._value_type = value_type
        for k, v in (items or {}).items():
            self[k] = v

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"map keys must be str, got {type(key).__name__}")
        if not isinstance(value, self._value_type):
            raise TypeError(f"map values must be {self._value_type.__name__}")
        super().__setitem__(key, value)

    def __missing__(self, key):
        value = self._value_type()
        self[key] = value
        return value

    def get_or_create(self, key):
        return self[key]


def _encode_map(field: int, mapping: dict) -> bytes:
    out = []
    for key in sorted(mapping):
        entry = _len_field(1, key.encode("utf-8")) + _len_field(2, mapping[key]._encode())
        out.append(_len_field(field, entry))
    return b"".join(out)


def _merge_map(mapping: dict, value_type, buf, start, end) -> None:
    for field, wt, val in _fields(buf, start, end):
        if field != 1 or wt != 2:
            continue
        key, span = b"", None
        for f2, wt2, v2 in _fields(buf, val[0], val[1]):
            if f2 == 1 and wt2 == 2:
                key = bytes(buf[v2[0] : v2[1]])
            elif f2 == 2 and wt2 == 2:
                span = v2
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("Map key is not valid UTF-8.") from None
        value = value_type()
        if span is not None:
            value._merge(buf, span[0], span[1])
        mapping[name] = value  # last entry wins, as protobuf maps


class Features(_Message):
    __slots__ = ("feature",)

    def __init__(self, feature=None):
        self.feature = _MessageMap(Feature, feature)

    def Clear(self) -> None:  # noqa: N802
        self.feature = _MessageMap(Feature)

    def _encode(self) -> bytes:
        return _encode_map(1, self.feature)

    def _merge(self, buf, start, end) -> None:
        _merge_map(self.feature, Feature, buf, start, end)

    def _fields_repr(self) -> str:
        return f"feature={dict(self.feature)!r}"


class FeatureList(_Message):
    __slots__ = ("feature",)

    def __init__(self, feature=None):
        self.feature = list(feature or [])

    def Clear(self) -> None:  # noqa: N802
        self.feature = []

    def _encode(self) -> bytes:
        return b"".join(_len_field(1, f._encode()) for f in self.feature)

    def _merge(self, buf, start, end) -> None:
        for field, wt, val in _fields(buf, start, end):
            if field == 1 and wt == 2:
                f = Feature()
                f._merge(buf, val[0], val[1])
                self.feature.append(f)

    def _fields_repr(self) -> str:
        return f"feature={self.feature!r}"


class FeatureLists(_Message):
    __slots__ = ("feature_list",)

    def __init__(self, feature_list=None):
        self.feature_list = _MessageMap(FeatureList, feature_list)

    def Clear(self) -> None:  # noqa: N802
        self.feature_list = _MessageMap(FeatureList)

    def _encode(self) -> bytes:
        return _encode_map(1, self.feature_list)

    def _merge(self, buf, start, end) -> None:
        _merge_map(self.feature_list, FeatureList, buf, start, end)

    def _fields_repr(self) -> str:
        return f"feature_list={dict(self.feature_list)!r}"


class _Composite(_Message):
    """A message of optional sub-messages: (attribute, field number, type) in _SPEC."""

    __slots__ = ("_subs", "_has")
    _SPEC: tuple = ()

    def __init__(self, **kwargs):
        self._subs = {}
        self._has = set()
        for name, value in kwargs.items():
            spec = self._spec(name)
            if value is not None:
                if not isinstance(value, spec[2]):
                    raise TypeError(f"{name} must be a {spec[2].__name__}")
                self._subs[name] = value
                self._has.add(name)

    def _spec(self, name: str):
        for s in self._SPEC:
            if s[0] == name:
                return s
        raise ValueError(f'Protocol message {type(self).__name__} has no "{name}" field.')

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        spec = self._spec(name)
        sub = self._subs.get(name)
        if sub is None:
            sub = self._subs[name] = spec[2]()
        return sub

    def HasField(self, name: str) -> bool:  # noqa: N802
        self._spec(name)
        return name in self._has or bool(self._subs.get(name) and self._subs[name]._encode())

    def Clear(self) -> None:  # noqa: N802
        self._subs = {}
        self._has = set()

    def _encode(self) -> bytes:
        out = []
        for name, number, _ in self._SPEC:
            if self.HasField(name):
                out.append(_len_field(number, self._subs[name]._encode()))
        return b"".join(out)

    def _merge(self, buf, start, end) -> None:
        for field, wt, val in _fields(buf, start, end):
            for name, number, _ in self._SPEC:
                if field == number and wt == 2:
                    getattr(self, name)._merge(buf, val[0], val[1])
                    self._has.add(name)

    def _fields_repr(self) -> str:
        return ", ".join(f"{n}={self._subs[n]!r}" for n, _, _ in self._SPEC if self.HasField(n))


class Example(_Composite):
    """tf.train.Example: `Example(features=Features(feature={...}))`."""

    __slots__ = ()
    _SPEC = (("features", 1, Features),)

    def __init__(self, features=None):
        super().__init__(features=features)


class SequenceExample(_Composite):
    """tf.train.SequenceExample: context features plus named feature lists."""

    __slots__ = ()
    _SPEC = (("context", 1, Features), ("feature_lists", 2, FeatureLists))

    def __init__(self, context=None, feature_lists=None):
        super().__init__(context=context, feature_lists=feature_lists)
