"""Parsing ops: tf.train.Example records, CSV lines, raw bytes, numbers in strings.

ParseExample / ParseSingleExample decode serialized `tf.train.Example` protos with
protobuf's parser (upb) into dense tensors (FixedLenFeature, FixedLenSequenceFeature)
and SparseTensors (VarLenFeature).  DecodeCSV, DecodeRaw and StringToNumber follow TF's
kernels, messages included.

A batch of records is parsed in one protobuf call (asyncflow/protos/parse_batch.proto:
the records, each prefixed with a field-1 tag and its length, are a message repeating
them), in a view that keeps each feature's list as its serialized bytes.  The values of
a whole batch are then decoded with numpy: packed floats by one frombuffer, packed
int64 varints vectorised, strings sliced out of their lists.  Anything not in the
canonical form TF and protobuf write (an unpacked list, a long length prefix), a
missing feature without default, a wrong count or kind sends that feature down the
general path over TF's schema (the batch parsed again as ExampleBatch), which keeps
TF's checks and messages.

Kernels never suspend; a batch of records is handed to the device's compute pool when
large (`ctx.device.compute`).
"""

from __future__ import annotations

import collections
import math
import operator
import re

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.example_pb import DecodeError
from asyncflow.ops import array_ops, math_ops, parsing_template, sparse_ops
from asyncflow.proto_wire import varint as _varint_bytes
from asyncflow.protos.example_pb2 import Example
from asyncflow.protos.parse_batch_pb2 import ExampleBatch, RawExample, RawExampleBatch
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "VarLenFeature",
    "SparseFeature",
    "parse_example",
    "parse_single_example",
    "decode_csv",
    "decode_raw",
    "decode_json_example",
    "string_to_number",
]

_PARSE_TYPES = (dtypes.string, dtypes.float32, dtypes.int64)
_KIND_OF = {dtypes.string: 1, dtypes.float32: 2, dtypes.int64: 3}
_KIND_NAME = {1: "string", 2: "float", 3: "int64"}
# TF's value-count messages call a string list's values "bytes" ("Number of bytes values").
_COUNT_NAME = {1: "bytes", 2: "float", 3: "int64"}


class FixedLenFeature(
    collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])
):
    """Configuration for parsing a fixed-length input feature."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(
    collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"]
    )
):
    """Configuration for parsing a variable-length feature into a dense, padded tensor."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """Configuration for parsing a variable-length input feature (a SparseTensor)."""


class SparseFeature(
    collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"]
    )
):
    """A SparseTensor of `size` (a list for several index keys) whose indices are read
    from the int64 feature(s) `index_key` and values from `value_key` (TF parses both as
    VarLenFeatures and merges them, sorting by index unless `already_sorted`)."""

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


class RaggedFeature(
    collections.namedtuple(
        "RaggedFeature", ["dtype", "value_key", "partitions", "row_splits_dtype", "validate"]
    )
):
    """A RaggedTensor read from the values feature `value_key` (the output key when None)
    and, outermost first, `partitions` naming the features (or the uniform length) that
    split it: RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength."""

    RowSplits = collections.namedtuple("RowSplits", ["key"])
    RowLengths = collections.namedtuple("RowLengths", ["key"])
    RowStarts = collections.namedtuple("RowStarts", ["key"])
    RowLimits = collections.namedtuple("RowLimits", ["key"])
    ValueRowIds = collections.namedtuple("ValueRowIds", ["key"])
    UniformRowLength = collections.namedtuple("UniformRowLength", ["length"])
    _PARTITION_TYPES = (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength)

    def __new__(cls, dtype, value_key=None, partitions=(), row_splits_dtype=dtypes.int32,
                validate=False):  # fmt: skip
        if value_key is not None and (not isinstance(value_key, str) or not value_key):
            raise ValueError(f"Argument `value_key` must be a string; got {value_key}")
        dtype = dtypes.as_dtype(dtype)
        if dtype not in _PARSE_TYPES:
            raise ValueError(f"Argument `dtype` must be int64, float32, or bytes; got {dtype!r}")
        row_splits_dtype = dtypes.as_dtype(row_splits_dtype)
        if row_splits_dtype not in (dtypes.int32, dtypes.int64):
            raise ValueError(  # (TF's message has no space after "got")
                f"Argument `row_splits_dtype` must be int32 or int64; got{row_splits_dtype!r}"
            )
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"Argument `partitions` must be a list or tuple; got {partitions!r}")
        for p in partitions:
            if not isinstance(p, cls._PARTITION_TYPES):
                raise TypeError(
                    "Argument `partitions` cannot be cast to any of the partition types in "
                    f"{cls._PARTITION_TYPES}; got: {p!r} with type {type(p)}"
                )
        if not isinstance(validate, bool):
            raise TypeError(f"Argument `validate` must be a bool; got {validate!r}")
        return super().__new__(cls, dtype, value_key, tuple(partitions), row_splits_dtype,
                               validate)  # fmt: skip


def _split_sparse_features(features: dict):
    """`features` with each SparseFeature replaced by VarLenFeatures of its keys, and the
    SparseFeatures by output key."""
    plain, merged = dict(features or {}), {}
    for key, f in (features or {}).items():
        if not isinstance(f, SparseFeature):
            continue
        del plain[key]
        merged[key] = f
        index_keys = [f.index_key] if isinstance(f.index_key, str) else list(f.index_key)
        sizes = [f.size] if isinstance(f.size, int) else list(f.size)
        if len(sizes) != len(index_keys):
            raise ValueError(
                f"SparseFeature {key} has {len(index_keys)} index keys but size {f.size}"
            )
        for k in index_keys:
            plain[k] = VarLenFeature(dtypes.int64)
        plain[f.value_key] = VarLenFeature(f.dtype)
    return plain, merged


def _dtype_str(dt) -> str:
    return f"<dtype: '{dtypes.as_dtype(dt).name}'>"


def ragged_keys(features: dict) -> dict:
    """The keys the RaggedFeatures of `features` read, in TF's order (by output key:
    the value key, then the partition keys), each with its (value dtype, splits dtype);
    a key read two ways raises ValueError with TF's message."""
    from asyncflow.ops import parsing_ragged

    keys: dict = {}
    for key in sorted(features):
        f = features[key]
        if not isinstance(f, RaggedFeature):
            continue
        for i, k in enumerate(parsing_ragged.needed_keys(key, f)):
            want = (f.dtype if i == 0 else dtypes.int64, f.row_splits_dtype)
            have = keys.setdefault(k, want)
            if have[0] != want[0]:
                raise ValueError(
                    f"Conflicting type {_dtype_str(have[0])} vs {_dtype_str(want[0])} for "
                    f"feature {k}."
                )
            if have[1] != want[1]:
                raise ValueError(
                    f"Conflicting partition type {_dtype_str(have[1])} vs "
                    f"{_dtype_str(want[1])} for feature {k}."
                )
    return keys


def _split_ragged(plain: dict, features: dict):
    """`plain` (parse_example's features, SparseFeatures already split) less its
    RaggedFeatures, plus a VarLenFeature for each key those read; and the
    RaggedFeatures by output key.  As TF, a key read by a RaggedFeature may not also be
    a sparse or dense feature's."""
    ragged = {k: f for k, f in plain.items() if isinstance(f, RaggedFeature)}
    keys = ragged_keys(ragged)
    sparse_keys, dense_keys = [], []
    for key in sorted(features):
        f = features[key]
        if isinstance(f, VarLenFeature):
            sparse_keys.append(key)
        elif isinstance(f, SparseFeature):
            index = [f.index_key] if isinstance(f.index_key, str) else list(f.index_key)
            sparse_keys += [*index, f.value_key]
        elif isinstance(f, (FixedLenFeature, FixedLenSequenceFeature)):
            dense_keys.append(key)
    both = set(keys) & set(sparse_keys)
    if both:
        raise ValueError(
            f"Ragged and sparse keys must not intersect; ragged_keys: {list(keys)}, "
            f"sparse_keys: {sparse_keys}, intersection: {both}"
        )
    both = set(keys) & set(dense_keys)
    if both:  # (TF's message is a pair of strings)
        raise ValueError(
            "Dense and ragged keys must not intersect; dense_keys: ",
            f"{dense_keys}, ragged_keys: {list(keys)}, intersection: {both}",
        )
    out = {k: f for k, f in plain.items() if k not in ragged}
    for k, (dt, _) in keys.items():
        out[k] = VarLenFeature(dt)
    return out, ragged


def _ragged_outputs(parsed: dict, ragged: dict) -> dict:
    from asyncflow.ops import parsing_ragged

    out = {}
    for key, f in ragged.items():
        value_key, *partition_keys = parsing_ragged.needed_keys(key, f)
        sp = parsed[value_key]
        sources = [(None, [sp.indices, sp.dense_shape])]
        sources += [(parsed[k].values, [parsed[k].indices, parsed[k].dense_shape])
                    for k in partition_keys]  # fmt: skip
        out[key] = parsing_ragged.build(key, f, sp.values, sources, "sparse")
    return out


def _merge_sparse(parsed: dict, merged: dict, asked: dict) -> dict:
    """TF's SparseFeature outputs: the index features' values become the last
    coordinates of the value feature's entries; the parts not asked for are dropped."""
    out = {k: v for k, v in parsed.items() if k in asked and k not in merged}
    for key, f in merged.items():
        index_keys = [f.index_key] if isinstance(f.index_key, str) else list(f.index_key)
        sizes = [f.size] if isinstance(f.size, int) else list(f.size)
        values = parsed[f.value_key]
        first = parsed[index_keys[0]]
        lead = first.indices[:, :-1]
        cols = [array_ops.expand_dims(math_ops.cast(parsed[k].values, dtypes.int64), 1)
                for k in index_keys]  # fmt: skip
        indices = array_ops.concat([lead, *cols], 1)
        shape = array_ops.concat(
            [first.dense_shape[:-1], ops.convert_to_tensor(sizes, dtype=dtypes.int64)], 0
        )
        sp = SparseTensor(indices, values.values, shape)
        out[key] = sp if f.already_sorted else sparse_ops.sparse_reorder(sp)
    return out


# -- ParseExample ---------------------------------------------------------------------------


def _shapes_and_seqs(dense_shapes) -> tuple[list, list]:
    """TF's dense_shapes: a leading -1 marks a FixedLenSequenceFeature (its shape is the
    rest).  The dense shapes and the flags the parse kernels take."""
    shapes, seqs = [], []
    for shape in dense_shapes:
        dims = shape.as_list() if shape.ndims is not None else []
        seq = bool(dims) and dims[0] is None
        shapes.append(tensor_shape.TensorShape(dims[1:] if seq else dims))
        seqs.append(seq)
    return shapes, seqs


def _parse_shape(count_attr: str, rank: int | None = None):
    """The shape function of a parse op whose sparse outputs number `count_attr`; the
    rank of `serialized` (0: one record, 1: a batch) is the input's unless fixed."""

    def shape_fn(op):
        r = op.inputs[0].shape.ndims if rank is None else rank
        if rank is not None:
            op.inputs[0].shape.with_rank(rank)
        ns = op._attr(count_attr)
        shapes, seqs = _shapes_and_seqs(op._attr("dense_shapes"))
        if r is None:
            return [tensor_shape.TensorShape(None)] * (3 * ns + len(shapes))
        lead = [op.inputs[0].shape.with_rank(1)[0].value] if r == 1 else []
        out = [tensor_shape.TensorShape([None, r + 1])] * ns
        out += [tensor_shape.TensorShape([None])] * ns
        out += [tensor_shape.TensorShape([r + 1])] * ns
        for shape, seq in zip(shapes, seqs):
            out.append(tensor_shape.TensorShape(lead + ([None] if seq else []) + shape.as_list()))
        return out

    return shape_fn


_SPARSE_OUT = ["sparse_values: sparse_types"]
_DENSE_OUT = ["dense_values: Tdense"]

# The three ops with TF's signatures, so TF's GraphDefs import here and ours load in TF.
# TF 1.x's parse_example: the keys are inputs, one string scalar each.
ParseExample = register_op(
    "ParseExample",
    inputs=[
        "serialized: string",
        "names: string",
        "sparse_keys: Nsparse * string",
        "dense_keys: Ndense * string",
        "dense_defaults: Tdense",
    ],
    outputs=[
        "sparse_indices: Nsparse * int64",
        *_SPARSE_OUT,
        "sparse_shapes: Nsparse * int64",
        *_DENSE_OUT,
    ],
    attrs={
        "Nsparse": 0,
        "Ndense": 0,
        "sparse_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "Tdense": TypeConstraint(_PARSE_TYPES, is_list=True),
        "dense_shapes": [],
    },
    shape_fn=_parse_shape("Nsparse", 1),
)
NotDifferentiable("ParseExample")

# parse_single_example: the keys are attrs.
ParseSingleExample = register_op(
    "ParseSingleExample",
    inputs=["serialized: string", "dense_defaults: Tdense"],
    outputs=[
        "sparse_indices: num_sparse * int64",
        *_SPARSE_OUT,
        "sparse_shapes: num_sparse * int64",
        *_DENSE_OUT,
    ],
    attrs={
        "num_sparse": 0,
        "sparse_keys": [],
        "dense_keys": [],
        "sparse_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "Tdense": TypeConstraint(_PARSE_TYPES, is_list=True),
        "dense_shapes": [],
        "_example_names": [],  # example_names given as Python values, for messages
    },
    shape_fn=_parse_shape("num_sparse", 0),
)
NotDifferentiable("ParseSingleExample")

# What TF 2.x writes for both: keys as string vectors, a scalar `serialized` is one record.
ParseExampleV2 = register_op(
    "ParseExampleV2",
    inputs=[
        "serialized: string",
        "names: string",
        "sparse_keys: string",
        "dense_keys: string",
        "ragged_keys: string",
        "dense_defaults: Tdense",
    ],
    outputs=[
        "sparse_indices: num_sparse * int64",
        *_SPARSE_OUT,
        "sparse_shapes: num_sparse * int64",
        *_DENSE_OUT,
        "ragged_values: ragged_value_types",
        "ragged_row_splits: ragged_split_types",
    ],
    attrs={
        "Tdense": TypeConstraint(_PARSE_TYPES, is_list=True),
        "num_sparse": 0,
        "sparse_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "ragged_value_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "ragged_split_types": TypeConstraint([dtypes.int32, dtypes.int64], is_list=True),
        "dense_shapes": [],
    },
    shape_fn=_parse_shape("num_sparse"),
)
NotDifferentiable("ParseExampleV2")


def _values_of(feature, kind: int, key: str, index: int, sparse: bool = False):
    """The values of one parsed feature as an array of the wanted kind.

    Raises:
      InvalidArgumentError: a feature of another kind, in TF's words for a dense or a
        sparse (VarLen) feature.
    """
    got_kind, values = feature
    if got_kind == 0:
        values, got_kind = [], kind
    if got_kind != kind:
        got, want = _KIND_NAME[got_kind], _KIND_NAME[kind]
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Name: <unknown>, Key: {key}, Index: {index}.  Data types don't match. "
            + (
                f"Expected type: {want}, Actual type: {got}"
                if sparse
                else f"Data type: {got} but expected type: {want}"
            ),
        )
    if kind == 1:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr
    if kind == 2:
        return np.asarray(values, dtype=np.float32)
    return np.asarray(values, dtype=np.int64)


_SHORT = 1 << 14  # records shorter than this take a 2-byte length: prefixes precomputed
_PREFIXES: list[bytes] = []


def _prefix(n: int) -> bytes:
    out = bytearray(b"\x0a")
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _batch_blob(records: list) -> bytes:
    """The records as one ExampleBatch message (see the module note)."""
    if not _PREFIXES:
        _PREFIXES.extend(_prefix(n) for n in range(_SHORT))
    table = _PREFIXES
    try:
        return b"".join([table[len(s)] + s for s in records])
    except IndexError:  # a long record
        return b"".join([_prefix(len(s)) + s for s in records])
    except TypeError:
        bad = next(s for s in records if not isinstance(s, bytes))
        raise errors.InvalidArgumentError(
            None, None, f"Could not parse example input, value: '{str(bad)[:64]}'"
        ) from None


def _wire_fields(buf: bytes):
    """(field, wire type, field start, value start, end) of each field; None if malformed."""
    out, pos, n = [], 0, len(buf)
    while pos < n:
        begin = pos
        key, pos = _wire_varint(buf, pos)
        if key is None:
            return None
        start, wt = pos, key & 7
        if wt == 0:
            _, pos = _wire_varint(buf, pos)
        elif wt == 2:
            size, pos = _wire_varint(buf, pos)
            if size is None:
                return None
            start, pos = pos, pos + size
        elif wt in (1, 5):
            pos += 8 if wt == 1 else 4
        else:
            return None
        if pos is None or pos > n:
            return None
        out.append((key >> 3, wt, begin, start, pos))
    return out


def _wire_varint(buf: bytes, pos: int):
    value = shift = 0
    while pos < len(buf) and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None, None


def _utf8_name(entry: bytes) -> bool:
    """Whether a feature map entry's name (field 1) is valid UTF-8."""
    for field, wt, _, start, end in _wire_fields(entry) or ():
        if field == 1 and wt == 2:
            try:
                entry[start:end].decode("utf-8")
            except UnicodeDecodeError:
                return False
    return True


def _without_non_utf8_names(record: bytes) -> bytes:
    """`record` (an Example) without the feature map entries whose name is not UTF-8;
    the record itself when it has none or cannot be read."""
    top = _wire_fields(record)
    if top is None:
        return record
    out, changed = bytearray(), False
    for field, wt, begin, start, end in top:
        features = record[start:end]
        entries = _wire_fields(features) if field == 1 and wt == 2 else None
        if entries is None:
            out += record[begin:end]
            continue
        kept = bytearray()
        for _, _, b2, s2, e2 in entries:
            if _utf8_name(features[s2:e2]):
                kept += features[b2:e2]
            else:
                changed = True
        out += _prefix(len(kept)) + kept  # field 1 (features), length-delimited
    return bytes(out) if changed else record


class _Batch:
    """One kernel call's records, parsed lazily in the two views."""

    def __init__(self, records: list):
        self.records = records
        self.blob = _batch_blob(records)
        self._raw = None
        self._real = None

    def _parse(self, cls):
        try:
            return cls.FromString(self.blob)
        except DecodeError:
            # TF compares feature names as bytes, so a name that is not UTF-8 (which
            # protobuf refuses) parses and matches no requested name: drop those entries.
            fixed = [_without_non_utf8_names(s) for s in self.records]
            if any(f is not s for f, s in zip(fixed, self.records, strict=True)):
                self.records, self.blob = fixed, _batch_blob(fixed)
                return self._parse(cls)
            for s in self.records:
                try:
                    Example.FromString(s)
                except DecodeError:
                    raise errors.InvalidArgumentError(
                        None, None, f"Could not parse example input, value: '{s[:64]!r}'"
                    ) from None
            raise errors.InvalidArgumentError(
                None, None, "Could not parse example input"
            ) from None

    def raw_maps(self) -> list:
        if self._raw is None:
            self._raw = [ex.features.feature for ex in self._parse(RawExampleBatch).example]
        return self._raw

    def real_maps(self) -> list:
        if self._real is None:
            self._real = [ex.features.feature for ex in self._parse(ExampleBatch).example]
        return self._real

    def payloads(self, key: str, kind: int) -> list:
        """Per record: None (no such feature) or the serialized list of `kind` (b"": that
        kind not set, or set to an empty list)."""
        get = _PAYLOAD_OF_KIND[kind]
        return [None if f is None else get(f) for f in (m.get(key) for m in self.raw_maps())]

    def column(self, key: str) -> list:
        """Per record: None (no such feature) or (kind, values), kind 0 for none set."""
        out = []
        for m in self.real_maps():
            f = m.get(key)
            if f is None:
                out.append(None)
                continue
            which = f.WhichOneof("kind")
            if which is None:
                out.append((0, None))
            elif which == "float_list":
                out.append((2, np.asarray(f.float_list.value, np.float32)))
            elif which == "int64_list":
                out.append((3, list(f.int64_list.value)))
            else:
                out.append((1, list(f.bytes_list.value)))
        return out


_KIND_FIELD = {"bytes_list": 1, "float_list": 2, "int64_list": 3}
_PAYLOAD_OF_KIND = {
    1: operator.attrgetter("bytes_list"),
    2: operator.attrgetter("float_list"),
    3: operator.attrgetter("int64_list"),
}


def _encode_payload(kind: int, values) -> bytes:
    """The canonical serialized list of `values` (a dense default standing in for a
    missing feature)."""
    values = np.asarray(values).reshape(-1)
    if kind == 1:
        return b"".join(b"\x0a" + _varint_bytes(len(v)) + bytes(v) for v in values.tolist())
    if kind == 2:
        data = values.astype("<f4").tobytes()
    else:
        data = b"".join(_varint_bytes(int(v) & 0xFFFFFFFFFFFFFFFF) for v in values.tolist())
    return b"\x0a" + _varint_bytes(len(data)) + data if data else b""


def _packed(payloads: list, kind: int):
    """Decode serialized FloatLists / Int64Lists, each one packed field (as TF and
    protobuf write them), all at once: (flat values, count per payload), or None when
    any payload is not in that form (the general path then decides)."""
    n = len(payloads)
    lens = np.fromiter(map(len, payloads), np.int64, n)
    if n == 0 or (lens < 2).any():
        return None
    b = np.frombuffer(b"".join(payloads), np.uint8)
    starts = np.cumsum(lens) - lens
    if (b[starts] != 0x0A).any():
        return None
    b1 = b[starts + 1].astype(np.int64)
    long = b1 >= 0x80
    head = np.where(long, 3, 2)
    size = b1
    if long.any():  # a 2-byte length (128 to 16383 bytes of values)
        if (lens[long] < 3).any():
            return None
        b2 = b[starts[long] + 2].astype(np.int64)
        if (b2 >= 0x80).any():
            return None
        size = b1.copy()
        size[long] = (b1[long] & 0x7F) | (b2 << 7)
    if (size != lens - head).any():
        return None
    keep = np.ones(len(b), bool)
    keep[starts] = False
    keep[starts + 1] = False
    keep[starts[long] + 2] = False
    data = b[keep]
    if kind == 2:
        if (size % 4).any():
            return None
        return data.view("<f4").astype(np.float32), size // 4
    term = data < 0x80
    seg_end = np.cumsum(size)
    if (size == 0).any() or not term[seg_end - 1].all():
        return None
    ends = np.flatnonzero(term)
    begins = np.empty_like(ends)
    begins[0] = 0
    begins[1:] = ends[:-1] + 1
    widths = ends - begins + 1
    if widths.max() > 10:
        return None
    pos = np.arange(len(data), dtype=np.int64) - np.repeat(begins, widths)
    parts = (data & 0x7F).astype(np.uint64) << (7 * pos).astype(np.uint64)
    values = np.add.reduceat(parts, begins).view(np.int64)
    counted = np.concatenate([[0], np.cumsum(term)])
    return values, counted[seg_end] - counted[seg_end - size]


def _packed_one(p: bytes, kind: int):
    """`_packed` of a single payload (parse_single_example's common case) without the
    vectorised set-up: the decoded values, or None for the general path."""
    n = len(p)
    if n < 2 or p[0] != 0x0A:
        return None
    size, head = p[1], 2
    if size >= 0x80:
        if n < 3 or p[2] >= 0x80:
            return None
        size, head = (size & 0x7F) | (p[2] << 7), 3
    if size != n - head:
        return None
    if kind == 2:
        if size % 4:
            return None
        return np.frombuffer(p, "<f4", offset=head).astype(np.float32)
    if size == 0 or p[-1] >= 0x80:
        return None
    values, pos = [], head
    while pos < n:
        v, pos = _wire_varint(p, pos)
        if v is None:
            return None
        v &= 0xFFFFFFFFFFFFFFFF
        values.append(v - (1 << 64) if v >= 1 << 63 else v)
    return np.array(values, np.int64)


def _strings(payload: bytes):
    """The strings of one serialized BytesList, or None when it is not the plain
    canonical form (field 1 repeated, lengths under 16 KiB)."""
    out, pos, end = [], 0, len(payload)
    while pos < end:
        if payload[pos] != 0x0A or pos + 1 >= end:
            return None
        n = payload[pos + 1]
        pos += 2
        if n >= 0x80:
            if pos >= end or payload[pos] >= 0x80:
                return None
            n = (n & 0x7F) | (payload[pos] << 7)
            pos += 1
        if pos + n > end:
            return None
        out.append(payload[pos : pos + n])
        pos += n
    return out


def _dense_fast(batch: _Batch, key, dtype, shape, default):
    """A dense (not sequence) feature's batch output, or None when any record needs the
    general path (missing without default, wrong count or kind, an unusual encoding)."""
    kind = _KIND_OF[dtype]
    # Plain ints: a Dimension here would be compared with each record's count in Python.
    shape = [int(d) for d in shape]
    want = math.prod(shape)
    if want == 0:
        return None
    payloads = batch.payloads(key, kind)
    n = len(payloads)
    if None in payloads:
        if default is None:
            return None
        fill = _encode_payload(kind, default)
        payloads = [fill if p is None else p for p in payloads]
    if kind == 1:
        values = []
        for p in payloads:
            got = _strings(p)
            if got is None or len(got) != want:
                return None
            values.extend(got)
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out.reshape([n, *shape])
    if n == 1:
        one = _packed_one(payloads[0], kind)
        if one is None or one.size != want:
            return None
        return one.reshape([1, *shape])
    decoded = _packed(payloads, kind)
    if decoded is None or (decoded[1] != want).any():
        return None
    return decoded[0].reshape([n, *shape])


def _sparse_fast(batch: _Batch, key, dtype):
    """A VarLen feature as (counts per record, flat values), or None for the general
    path (a feature present with no values to read, or an unusual encoding)."""
    kind = _KIND_OF[dtype]
    payloads = batch.payloads(key, kind)
    if b"" in payloads:  # no values of this kind: an empty list, no kind, or another kind
        maps = batch.raw_maps()
        for i, p in enumerate(payloads):
            if p == b"":
                which = maps[i][key].WhichOneof("kind")
                if which is not None and _KIND_FIELD[which] != kind:
                    return None  # the general path reports the mismatch
                payloads[i] = None
    present = [p for p in payloads if p is not None]
    counts = np.zeros(len(payloads), np.int64)
    if kind == 1:
        values = []
        for i, p in enumerate(payloads):
            if p is not None:
                got = _strings(p)
                if got is None:
                    return None
                counts[i] = len(got)
                values.extend(got)
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return counts, out
    if not present:
        return counts, np.zeros(0, dtype.as_numpy_dtype)
    decoded = _packed(present, kind)
    if decoded is None:
        return None
    counts[[i for i, p in enumerate(payloads) if p is not None]] = decoded[1]
    return counts, decoded[0]


# TF's names for the data types in parse_example's messages.
_TF_TYPE_NAMES = {"float32": "float", "float64": "double"}


def _dense_output(column, key, dtype, shape, default, seq, batch_size, xp, names=(), single=False):
    kind = _KIND_OF[dtype]
    want = int(np.prod(shape, dtype=np.int64)) if shape else 1
    rows = []
    for i, feature in enumerate(column):
        name = names[i] if i < len(names) else "<unknown>"
        if feature is None or feature[0] == 0:  # no such feature, or one of no kind (TF)
            if seq:
                rows.append(None)
                continue
            if default is None or np.size(default) == 0:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    # (ParseSingleExample names no example)
                    ("" if single else f"Name: {name}, ") + f"Feature: {key} (data type: "
                    f"{_TF_TYPE_NAMES.get(dtype.name, dtype.name)}) is required "
                    "but could not be found.",
                )
            rows.append(np.asarray(default).reshape(shape))
            continue
        vals = _values_of(feature, kind, key, i)
        if single and (vals.size % want if seq and want else vals.size != want):
            # ParseSingleExample's own messages (TF 2.21).
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Error while parsing feature with key {key}: number of elements should be "
                f"divisible by {want}, found {vals.size} instead"
                if seq
                else f"Key: {key}.  Can't parse serialized Example: Some "
                f"{_KIND_NAME_OF[kind]} slice was not parsed.",
            )
        if seq:
            if want == 0 or vals.size % want:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Name: {name}, Key: {key}, Index: {i}.  Number of {_COUNT_NAME[kind]} "
                    f"values is not a multiple of stride length. Saw {vals.size} values "
                    f"but output shape is: [{','.join(['?', *map(str, shape)])}]",
                )
            rows.append(vals.reshape([-1, *shape]))
        elif vals.size != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Name: {name}, Key: {key}, Index: {i}.  Number of {_COUNT_NAME[kind]} "
                f"values != expected.  Values size: {vals.size} but output shape: "
                f"[{','.join(str(d) for d in shape)}]",
            )
        else:
            rows.append(vals.reshape(shape))
    np_dt = dtype.as_numpy_dtype
    if seq:
        n = max([0] + [r.shape[0] for r in rows if r is not None])
        out = np.empty([len(rows), n, *shape], dtype=np_dt)
        pad = default if default is not None else (b"" if kind == 1 else 0)
        out[...] = np.asarray(pad, dtype=np_dt) if kind != 1 else pad
        for i, r in enumerate(rows):
            if r is not None:
                out[i, : r.shape[0]] = r
    else:
        out = np.empty([len(rows), *shape], dtype=np_dt)
        for i, r in enumerate(rows):
            out[i] = r[()] if r.ndim == 0 else r  # a 0-d object array would nest
    return out if batch_size is not None else out[0]


def _sparse_output(column, key, dtype):
    """(counts per record, flat values) of a VarLen feature from the general path."""
    kind = _KIND_OF[dtype]
    counts = np.zeros(len(column), np.int64)
    flat: list = []
    arrays: list = []  # float columns hold arrays
    for i, feature in enumerate(column):
        if feature is None:
            continue
        got, vals = feature
        if got != kind and got != 0:
            _values_of(feature, kind, key, i, sparse=True)  # raises "Data types don't match"
        if vals is not None and len(vals):
            counts[i] = len(vals)
            (arrays.append if kind == 2 else flat.extend)(vals)
    if kind == 2:
        values = np.concatenate(arrays).astype(np.float32) if arrays else np.zeros(0, np.float32)
    elif kind == 3:
        values = np.array(flat, np.int64)
    else:
        values = np.empty(len(flat), dtype=object)
        values[:] = flat
    return counts, values


def _sparse_tensor(counts, values, batch: bool):
    """SparseTensor parts (indices, values, dense_shape) from counts per record."""
    total = int(counts.sum())
    rows = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts
    cols = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
    longest = int(counts.max()) if len(counts) else 0
    if batch:
        return np.stack([rows, cols], 1), values, np.array([len(counts), longest], np.int64)
    return cols.reshape(-1, 1), values, np.array([longest], np.int64)


_KIND_NAME_OF = {1: "bytes_list", 2: "float_list", 3: "int64_list"}
_SINGLE_SPECS: dict = {}  # id(op attrs) -> (attrs, the fast path's spec or None)


def _single_fast(attrs, record, defaults):
    """parse_single_example of dense features only, each present in its usual encoding
    (or missing with a default): the outputs without the batch machinery, or None for
    the general path (which also reports every error)."""
    hit = _SINGLE_SPECS.get(id(attrs))
    if hit is None or hit[0] is not attrs:
        if len(_SINGLE_SPECS) > 256:
            _SINGLE_SPECS.clear()
        spec = None
        if not attrs["sparse_keys"]:
            spec = []
            for key, dt, shape, seq in zip(
                attrs["dense_keys"], attrs["Tdense"], attrs["dense_shapes"], attrs["_dense_seq"]
            ):
                shape = [int(d) for d in shape]
                kind = _KIND_OF[dt]
                if seq or math.prod(shape) == 0:
                    spec = None
                    break
                spec.append((key, dt, shape, math.prod(shape), kind, _KIND_NAME_OF[kind]))
        hit = _SINGLE_SPECS[id(attrs)] = (attrs, spec)
    spec = hit[1]
    if spec is None or not isinstance(record, bytes):
        return None
    try:
        feats = RawExample.FromString(record).features.feature
    except DecodeError:
        return None
    out = []
    for (key, dt, shape, want, kind, name), default in zip(spec, defaults):
        f = feats.get(key)
        if f is None:
            if np.size(default) == 0:
                return None
            out.append(np.array(np.reshape(default, shape), dtype=dt.as_numpy_dtype))
            continue
        if f.WhichOneof("kind") != name:
            return None
        payload = getattr(f, name)
        if kind == 1:
            got = _strings(payload)
            if got is None or len(got) != want:
                return None
            v = np.empty(want, dtype=object)
            v[:] = got
        else:
            v = _packed_one(payload, kind)
            if v is None or v.size != want:
                return None
        out.append(v.reshape(shape))
    return out


def _parse_kernel_sync(attrs, serialized, defaults):
    batch = attrs["_batch"]
    if not batch and isinstance(serialized, np.ndarray) and serialized.shape == ():
        fast = _single_fast(attrs, serialized[()], defaults)
        if fast is not None:
            return fast
    serialized = np.asarray(serialized, dtype=object)
    if batch and serialized.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a vector, got shape: {list(serialized.shape)}"
        )
    if not batch and serialized.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a scalar, got shape: {list(serialized.shape)}"
        )
    records = serialized.reshape(-1).tolist()
    if batch and not attrs["sparse_keys"] and not any(attrs["_dense_seq"]):
        shapes = [[int(d) for d in shape] for shape in attrs["dense_shapes"]]
        kinds = [_KIND_OF[dt] for dt in attrs["Tdense"]]
        fast = parsing_template.dense_batch(records, attrs["dense_keys"], kinds, shapes)
        if fast is not None:
            return fast
    parsed = _Batch(records)
    n = len(parsed.records)
    s_idx, s_val, s_shape = [], [], []
    for key, dt in zip(attrs["sparse_keys"], attrs["sparse_types"]):
        fast = _sparse_fast(parsed, key, dt)
        if fast is None:
            fast = _sparse_output(parsed.column(key), key, dt)
        i, v, s = _sparse_tensor(*fast, batch)
        s_idx.append(i)
        s_val.append(v)
        s_shape.append(s)
    dense = []
    for key, dt, shape, seq, default in zip(
        attrs["dense_keys"], attrs["Tdense"], attrs["dense_shapes"], attrs["_dense_seq"], defaults
    ):
        default = None if np.size(default) == 0 else default
        out = None if seq else _dense_fast(parsed, key, dt, list(shape), default)
        if out is None:
            column = parsed.column(key)
            out = _dense_output(
                column,
                key,
                dt,
                list(shape),
                default,
                seq,
                n,
                np,
                attrs["_example_names"],
                single=not batch,
            )
        # out[0, ...] keeps a scalar an array: out[0] of an object array is a bare bytes.
        dense.append(out if batch else out[0, ...])
    return [*s_idx, *s_val, *s_shape, *dense]


def _names_of(value) -> list[str]:
    """Strings from a string tensor, or from a list of scalar ones (N * string inputs)."""
    parts = value if isinstance(value, (list, tuple)) else [value]
    flat = [k for part in parts for k in np.asarray(part, dtype=object).reshape(-1)]
    return [k.decode() if isinstance(k, bytes) else str(k) for k in flat]


def _kernel_attrs(ctx, sparse_keys, dense_keys, names, batch: bool) -> dict:
    """The attrs `_parse_kernel_sync` reads, one dict per op while its keys stay the same
    (the fast paths cache their layouts by that dict)."""
    a = ctx.attrs
    key = (tuple(sparse_keys), tuple(dense_keys), tuple(names), batch)
    cached = ctx.kernel_state.get("attrs")
    if cached is not None and cached[0] == key:
        return cached[1]
    for keys, what, want in (
        (sparse_keys, "sparse_keys", len(a["sparse_types"])),
        (dense_keys, "dense_keys", len(a["Tdense"])),
    ):
        if len(keys) != want:
            raise errors.InvalidArgumentError(
                None, None, f"Expected len({what}) to match the op's types: {len(keys)} vs. {want}"
            )
    shapes, seqs = _shapes_and_seqs(a["dense_shapes"])
    attrs = {
        "_batch": batch,
        "sparse_keys": list(sparse_keys),
        "dense_keys": list(dense_keys),
        "sparse_types": a["sparse_types"],
        "Tdense": a["Tdense"],
        "dense_shapes": shapes,
        "_dense_seq": seqs,
        "_example_names": list(names),
    }
    ctx.kernel_state["attrs"] = (key, attrs)
    return attrs


async def _run_parse(ctx, attrs, serialized, defaults):
    if np.size(serialized) > 256:
        out = await ctx.device.compute(_parse_kernel_sync, attrs, serialized, defaults)
    else:
        out = _parse_kernel_sync(attrs, serialized, defaults)
    return out[0] if len(out) == 1 else out


@ParseExample.kernel("CPU")
async def _parse_example_v1(ctx, serialized, names, *rest):
    ns, nd = ctx.attrs["Nsparse"], ctx.attrs["Ndense"]
    sparse_keys = _names_of(rest[:ns])
    dense_keys = _names_of(rest[ns : ns + nd])
    attrs = _kernel_attrs(ctx, sparse_keys, dense_keys, _names_of(names), True)
    return await _run_parse(ctx, attrs, serialized, rest[ns + nd :])


@ParseSingleExample.kernel("CPU")
async def _parse_single(ctx, serialized, *defaults):
    a = ctx.attrs
    attrs = _kernel_attrs(ctx, a["sparse_keys"], a["dense_keys"], a["_example_names"], False)
    return await _run_parse(ctx, attrs, serialized, defaults)


@ParseExampleV2.kernel("CPU")
async def _parse_v2(ctx, serialized, names, sparse_keys, dense_keys, ragged_keys, *defaults):
    if np.size(ragged_keys):
        raise errors.UnimplementedError(
            None, None, "ParseExampleV2: RaggedFeature (ragged_keys) is not supported"
        )
    if np.ndim(serialized) > 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected serialized to be a scalar or vector, got shape: "
            f"{list(np.shape(serialized))}",
        )
    for keys, what in ((sparse_keys, "sparse_keys"), (dense_keys, "dense_keys")):
        if np.ndim(keys) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Expected {what} to be a vector, got shape: {list(np.shape(keys))}"
            )
    attrs = _kernel_attrs(
        ctx,
        _names_of(sparse_keys),
        _names_of(dense_keys),
        _names_of(names),
        np.ndim(serialized) == 1,
    )
    return await _run_parse(ctx, attrs, serialized, defaults)


def _features_spec(features: dict):
    if not features:
        raise ValueError(f"Missing: features was {features}.")
    sparse, dense = [], []
    for key in sorted(features):
        f = features[key]
        if isinstance(f, VarLenFeature):
            sparse.append((key, dtypes.as_dtype(f.dtype)))
        elif isinstance(f, (FixedLenFeature, FixedLenSequenceFeature)):
            dense.append((key, f))
        else:
            raise ValueError(f"Unsupported {type(f).__name__} {f}.")
    for param, dts in (
        ("sparse_types", [dt for _, dt in sparse]),
        ("dense_defaults", [dtypes.as_dtype(f.dtype) for _, f in dense]),
    ):
        _check_parse_types(param, dts)
    return sparse, dense


def _check_parse_types(param: str, dts) -> None:
    """TF's op-definition check of a parse op's type list, raised at build time.

    Raises:
      TypeError: a dtype other than float32, int64 or string.
    """
    for dt in dts:
        if dt not in _PARSE_TYPES:
            raise TypeError(
                f"Value passed to parameter '{param}' has DataType {dt.name} not in list of "
                "allowed values: float32, int64, string"
            )


def _dense_default(key, f):
    dt = dtypes.as_dtype(f.dtype)
    if f.shape is None:
        raise ValueError(f"Missing shape for feature {key}. Received feature={f!r}.")
    shape = tensor_shape.as_shape(f.shape)
    seq = isinstance(f, FixedLenSequenceFeature)
    if not shape.is_fully_defined():
        if not seq and shape.dims and shape.dims[0].value is None:
            raise ValueError(
                f"First dimension of shape for feature {key} unknown. Consider using "
                f"FixedLenSequenceFeature. Received feature={f!r}."
            )
        # (TF writes the shape as it was given: "(1, None)")
        raise ValueError(
            f"All dimensions of shape for feature {key} need to be known but received {f.shape}."
        )
    if seq and not f.allow_missing:
        raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing to be True.")
    if f.default_value is None and seq:  # TF's padding element: a zero scalar
        zero = np.zeros((), dt.as_numpy_dtype) if dt != dtypes.string else b""
        return ops.convert_to_tensor(zero, dtype=dt), shape, seq
    if f.default_value is None:
        return (
            ops.convert_to_tensor(
                np.zeros([0], dt.as_numpy_dtype) if dt != dtypes.string else np.zeros([0], object),
                dtype=dt,
            ),
            shape,
            seq,
        )
    value = np.asarray(f.default_value, dtype=dt.as_numpy_dtype)
    if seq and value.size != 1:
        # TF reshapes a sequence feature's padding value to a scalar when building.
        raise ValueError(
            f"Cannot reshape a tensor with {value.size} elements to shape [] (1 elements) "
            f"(default_value of {key})"
        )
    if seq:
        value = value.reshape([])
    else:
        value = np.broadcast_to(value, shape.as_list()).copy() if value.ndim == 0 else value
        if int(np.prod(shape.as_list(), dtype=np.int64)) != value.size:
            raise ValueError(
                f"Cannot reshape a tensor with {value.size} elements to shape "
                f"{shape.as_list()} (default_value of {key})"
            )
        value = value.reshape(shape.as_list())
    return ops.convert_to_tensor(value, dtype=dt), shape, seq


def _parse(op_type, serialized, features, name, batch, example_names=None):
    """The op TF 2.21 makes: ParseExampleV2 for a batch (keys and names as inputs),
    ParseSingleExample for one record (keys as attrs)."""
    sparse, dense = _features_spec(features)
    with ops.name_scope(name, "ParseExample" if batch else "ParseSingleExample", [serialized]):
        serialized = ops.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        defaults, shapes = [], []
        for key, f in dense:
            d, shape, seq = _dense_default(key, f)
            defaults.append(d)
            # TF's encoding of a FixedLenSequenceFeature: a leading -1
            shapes.append(tensor_shape.TensorShape([None]).concatenate(shape) if seq else shape)
        sparse_types = [dt for _, dt in sparse]
        if batch:
            if example_names is None:
                names = ops.convert_to_tensor(np.array([], dtype=object), dtypes.string, "names")
            else:
                names = ops.convert_to_tensor(example_names, dtype=dtypes.string, name="names")

            def keys(name, items):
                value = np.array([k for k, _ in items], dtype=object).reshape(-1)
                return ops.convert_to_tensor(value, dtype=dtypes.string, name=name)

            empty = np.array([], dtype=object)
            op = ops.apply_op(
                "ParseExampleV2",
                [
                    serialized,
                    names,
                    keys("sparse_keys", sparse),
                    keys("dense_keys", dense),
                    ops.convert_to_tensor(empty, dtypes.string, "ragged_keys"),
                    defaults,
                ],
                {
                    "num_sparse": len(sparse),
                    "sparse_types": sparse_types,
                    "Tdense": [d.dtype for d in defaults],
                    "ragged_value_types": [],
                    "ragged_split_types": [],
                    "dense_shapes": shapes,
                },
                name="ParseExampleV2",
            )
        else:
            # Names known now go into the messages (a names Tensor is not read: the
            # messages then say "<unknown>", as TF's do without names).
            names = (
                []
                if example_names is None or isinstance(example_names, ops.Tensor)
                else [
                    n.decode() if isinstance(n, bytes) else str(n) for n in np.ravel(example_names)
                ]  # fmt: skip
            )
            op = ops.apply_op(
                "ParseSingleExample",
                [serialized, defaults],
                {
                    "num_sparse": len(sparse),
                    "sparse_keys": [k for k, _ in sparse],
                    "dense_keys": [k for k, _ in dense],
                    "sparse_types": sparse_types,
                    "Tdense": [d.dtype for d in defaults],
                    "dense_shapes": shapes,
                    "_example_names": names,
                },
                name="ParseSingleExample",
            )
    outs = list(op.outputs)
    n = len(sparse)
    result = {}
    for i, (key, _) in enumerate(sparse):
        result[key] = SparseTensor(outs[i], outs[n + i], outs[2 * n + i])
    for j, (key, _) in enumerate(dense):
        result[key] = outs[3 * n + j]
    return result


def parse_example(serialized, features, name=None, example_names=None) -> dict:
    """Parses a batch of serialized `Example` protos into a dict of tensors.

    `features` maps keys to FixedLenFeature (dense [batch] + shape), VarLenFeature
    (SparseTensor with indices [N, 2]) or FixedLenSequenceFeature (dense, padded).

    Raises (when run):
      InvalidArgumentError: a record does not parse, a required feature is missing, or
        a feature has the wrong type or number of values.
    """
    plain, merged = _split_sparse_features(features)
    plain, ragged = _split_ragged(plain, features)
    parsed = _parse("ParseExample", serialized, plain, name, True, example_names)
    if not ragged:
        return _merge_sparse(parsed, merged, features) if merged else parsed
    out = _merge_sparse(parsed, merged, features)
    with ops.name_scope(name, "ParseExample", []):
        out.update(_ragged_outputs(parsed, ragged))
    return out


def parse_single_example(serialized, features, name=None, example_names=None) -> dict:
    """Parses one serialized `Example` (a scalar string) into a dict of tensors.

    Raises (when run):
      InvalidArgumentError: as `parse_example`.
    """
    ragged = {k: f for k, f in (features or {}).items() if isinstance(f, RaggedFeature)}
    if ragged:
        # TF's parse_single_example of RaggedFeatures: the batch form on [serialized],
        # row 0 of each (a Tensor when the feature has no ragged dimension of its own).
        rest = {k: f for k, f in features.items() if k not in ragged}
        out = parse_single_example(serialized, rest, name, example_names) if rest else {}
        with ops.name_scope(name, "ParseSingleExample", [serialized]):
            batch = array_ops.reshape(serialized, [1])
            out.update({k: v[0] for k, v in parse_example(batch, ragged).items()})
        return out
    plain, merged = _split_sparse_features(features)
    parsed = _parse("ParseSingleExample", serialized, plain, name, False)
    return _merge_sparse(parsed, merged, features) if merged else parsed


# -- DecodeCSV ------------------------------------------------------------------------------

_CSV_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)

DecodeCSV = register_op(
    "DecodeCSV",
    inputs=["records: string", "record_defaults: OUT_TYPE"],
    outputs=["output: OUT_TYPE"],
    attrs={
        "OUT_TYPE": TypeConstraint(_CSV_TYPES, is_list=True),
        "field_delim": ",",
        "use_quote_delim": True,
        "na_value": "",
        "select_cols": [],
    },
    shape_fn=lambda op: _decode_csv_shape(op),
)
NotDifferentiable("DecodeCSV")


def _decode_csv_shape(op):
    """TF's DecodeCSV shape function: each record default has rank at most 1."""
    for d in op.inputs[1:]:
        rank = d.shape.ndims
        if rank is not None and rank > 1:
            raise ValueError(f"Shape must be at most rank 1 but is rank {rank}")
        if d.shape.is_fully_defined() and d.shape.num_elements() > 1:
            raise ValueError(
                "Shape of a default must be a length-0 or length-1 vector, or a scalar."
            )
    return [op.inputs[0].shape] * len(op._attr("OUT_TYPE"))


# TF's names for the column types in DecodeCSV's "not a valid ..." message.
_CSV_TYPE_NAMES = {"float32": "float", "float64": "double"}


def _split_csv(record: bytes, delim: int, quote: bool, index: int) -> list[bytes]:
    """TF's DecodeCSV field splitting: CR/LF may start a field (skipped) or sit inside a
    quoted one, never inside an unquoted one; an empty record has no fields."""
    if not (b"\n" in record or b"\r" in record or (quote and b'"' in record)):
        return record.split(bytes([delim])) if record else []
    fields, i, n = [], 0, len(record)
    while i < n:
        if record[i] in (0x0A, 0x0D):  # TF skips CR/LF where a field starts
            i += 1
            continue
        if quote and record[i] == 0x22:  # a quoted field: "" stands for one quote
            i += 1
            buf = bytearray()
            while True:
                j = record.find(b'"', i)
                if j < 0:
                    raise errors.InvalidArgumentError(
                        None, None, "Quoted field has to end with quote followed by delim or end"
                    )
                buf += record[i:j]
                if j + 1 < n and record[j + 1] == 0x22:
                    buf += b'"'
                    i = j + 2
                    continue
                i = j + 1
                break
            if i < n and record[i] != delim:
                raise errors.InvalidArgumentError(
                    None, None, "Quote inside a string has to be escaped by another quote"
                )
            fields.append(bytes(buf))
        else:
            j = record.find(bytes([delim]), i)
            field = record[i:] if j < 0 else record[i:j]
            if b"\n" in field or b"\r" in field or (quote and b'"' in field):
                raise errors.InvalidArgumentError(
                    None, None, "Unquoted fields cannot have quotes/CRLFs inside"
                )
            fields.append(field)
            i = n if j < 0 else j
        if i >= n:
            return fields
        i += 1  # past the delimiter
        if i == n:
            fields.append(b"")
    return fields


_INT_RE = re.compile(rb"^\s*[+-]?\d+\s*$")
_HEX_RE = re.compile(rb"^[+-]?0[xX]")


def _parse_number(text: bytes, dt: dtypes.DType):
    """TF's safe_strto*/safe_strtof: surrounding whitespace allowed; None when invalid."""
    if dt.is_integer:
        if not _INT_RE.match(text):
            return None
        if not dt.is_unsigned:
            v = int(text)
            return v if dt.min <= v <= dt.max else None
        if text.strip().startswith(b"-"):  # safe_strtou32/64 refuse a minus, on "-0" too
            return None
        v = int(text)
        return v if v <= dt.max else None
    s = text.strip()
    if not s or b"_" in s:  # Python's float() takes "1_0"; strtof does not
        return None
    try:
        # strtof also reads C99 hex floats ("0x10", "0x1p3", "-0X1.8P1"); float() does not.
        v = float.fromhex(s.decode("ascii")) if _HEX_RE.match(s) else float(s)
    except (ValueError, UnicodeDecodeError):
        return None
    if dt == dtypes.float32 and math.isfinite(v) and abs(v) > 3.4028234663852886e38:
        return math.copysign(math.inf, v)
    return v


def _decode_csv_sync(attrs, records, defaults):
    records = np.asarray(records, dtype=object)
    types = attrs["OUT_TYPE"]
    delim = attrs["field_delim"]
    if len(delim) != 1:
        raise errors.InvalidArgumentError(None, None, "field_delim should be only 1 char")
    delim_b = delim.encode()[0]
    quote = attrs["use_quote_delim"]
    na = attrs["na_value"].encode()
    select = list(attrs["select_cols"])
    for d_i, d in enumerate(defaults):
        if np.ndim(d) != 1 or np.size(d) > 1:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape of a default must be a length-0 or length-1 vector, or a "
                f"scalar (record_defaults[{d_i}])",
            )
    outs = [np.empty(records.shape, dtype=dt.as_numpy_dtype) for dt in types]
    flat = [o.reshape(-1) for o in outs]
    ncols = len(types)
    for r, record in enumerate(records.ravel()):
        fields = _split_csv(record, delim_b, quote, r)
        if select:
            # TF counts the selected columns the record has.
            fields = [fields[c] for c in select if c < len(fields)]
        if len(fields) != ncols:
            raise errors.InvalidArgumentError(
                None, None, f"Expect {ncols} fields but have {len(fields)} in record {r}"
            )
        for c, (field, dt) in enumerate(zip(fields, types)):
            if not field or field == na:
                if np.size(defaults[c]) == 0:
                    raise errors.InvalidArgumentError(
                        None, None, f"Field {c} is required but missing in record {r}!"
                    )
                flat[c][r] = defaults[c][0]
            elif dt == dtypes.string:
                flat[c][r] = field
            else:
                v = _parse_number(field, dt)
                if v is None:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Field {c} in record {r} is not a valid "
                        f"{_CSV_TYPE_NAMES.get(dt.name, dt.name)}: "
                        f"{field.decode('utf-8', 'replace')}",
                    )
                flat[c][r] = v
    return outs


@DecodeCSV.kernel("CPU")
async def _decode_csv(ctx, records, *defaults):
    if np.size(records) > 1024:
        outs = await ctx.device.compute(_decode_csv_sync, ctx.attrs, records, defaults)
    else:
        outs = _decode_csv_sync(ctx.attrs, records, defaults)
    return outs[0] if len(outs) == 1 else outs


def decode_csv(
    records,
    record_defaults,
    field_delim=",",
    use_quote_delim=True,
    name=None,
    na_value="",
    select_cols=None,
):
    """Convert CSV records to tensors; each column maps to one tensor.

    `record_defaults` gives one default per column (a one-element list, or an empty
    tensor for a required column); its dtype is the column's type.

    Raises:
      TypeError: a default of a type other than float32, float64, int32, int64, string.
      ValueError: a default of rank above 1 or of more than one element.
      InvalidArgumentError: (when run) wrong number of fields, an unparsable number, a
        missing required field, or bad quoting.
    """
    if not isinstance(record_defaults, (list, tuple)):
        raise TypeError(
            f"Expected list for 'record_defaults' argument to 'DecodeCSV' Op, not "
            f"{record_defaults}."
        )
    defaults = []
    for d in record_defaults:
        if isinstance(d, ops.Tensor):
            defaults.append(d)
        elif isinstance(d, np.ndarray):
            defaults.append(ops.convert_to_tensor(d))  # keeps its dtype (float64, int32...)
        elif isinstance(d, (list, tuple)):
            # TF's conversion rules: [0] is int32, [0.0] float32, [] a required float32.
            defaults.append(ops.convert_to_tensor(d if len(d) else np.zeros(0, np.float32)))
        else:
            defaults.append(ops.convert_to_tensor([d]))
    for d in defaults:
        if d.dtype.base_dtype not in _CSV_TYPES:
            raise TypeError(
                f"Value passed to parameter 'record_defaults' has DataType {d.dtype.name} not "
                "in list of allowed values: float32, float64, int32, int64, string"
            )
    if select_cols is not None and any(
        select_cols[i] >= select_cols[i + 1] for i in range(len(select_cols) - 1)
    ):
        raise ValueError("select_cols is not strictly increasing.")
    if select_cols is not None and len(select_cols) and select_cols[0] < 0:
        raise ValueError("select_cols contains negative values.")
    if select_cols is not None and len(select_cols) != len(defaults):
        raise ValueError("Length of select_cols and record_defaults do not match.")
    op = ops.apply_op(
        "DecodeCSV",
        [records, defaults],
        {
            "OUT_TYPE": [d.dtype for d in defaults],
            "field_delim": field_delim,
            "use_quote_delim": use_quote_delim,
            "na_value": na_value,
            "select_cols": list(select_cols or []),
        },
        name=name,
    )
    return list(op.outputs)


# -- DecodeRaw ------------------------------------------------------------------------------

_RAW_TYPES = (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "complex64", "complex128", "bool", "bfloat16",
)  # fmt: skip


def _decode_raw_shape(op):
    s = op.inputs[0].shape
    if s.dims is None:
        return [tensor_shape.unknown_shape()]
    return [s.concatenate([None])]


DecodeRaw = register_op(
    "DecodeRaw",
    inputs=["bytes: string"],
    outputs=["output: out_type"],
    attrs={"out_type": TypeConstraint(_RAW_TYPES), "little_endian": True},
    shape_fn=_decode_raw_shape,
)
NotDifferentiable("DecodeRaw")


@DecodeRaw.kernel("CPU")
async def _decode_raw(ctx, data):
    dt = ctx.attrs["out_type"]
    np_dt = np.dtype(dt.as_numpy_dtype)
    if dt == dtypes.bfloat16:  # (no byte-swapped bfloat16 dtype: read its 16 bits)
        np_dt = np.dtype(np.uint16)
    np_dt = np_dt.newbyteorder("<" if ctx.attrs["little_endian"] else ">")
    data = np.asarray(data, dtype=object)
    flat = data.ravel()
    width = np_dt.itemsize
    size = len(flat[0]) if flat.size else 0
    for i, s in enumerate(flat):
        if len(s) != size:
            raise errors.InvalidArgumentError(
                None,
                None,
                "DecodeRaw requires input strings to all be the same size, but element "
                f"{i} has size {size} != {len(s)}",
            )
    if size % width:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Input to DecodeRaw has length {size} that is not a multiple of {width}, the "
            f"size of {dt.name}",
        )
    buf = b"".join(flat)
    out = np.frombuffer(buf, dtype=np_dt)
    if dt == dtypes.bfloat16:
        out = out.astype(np.uint16).view(dt.as_numpy_dtype)
    else:
        out = out.astype(dt.as_numpy_dtype)
    return out.reshape(*data.shape, size // width)


def _decode_padded_raw_shape(op):
    s, n = op.inputs[0].shape, ops.constant_value(op.inputs[1])
    op.inputs[1].shape.with_rank(0)
    width = np.dtype(op._attr("out_type").as_numpy_dtype).itemsize
    if n is not None and int(n) % width:
        raise ValueError(f"Dimension size must be evenly divisible by {width} but is {int(n)}")
    last = None if n is None else int(n) // width
    return [tensor_shape.unknown_shape() if s.dims is None else s.concatenate([last])]


DecodePaddedRaw = register_op(
    "DecodePaddedRaw",
    inputs=["input_bytes: string", "fixed_length: int32"],
    outputs=["output: out_type"],
    attrs={"out_type": TypeConstraint(_RAW_TYPES), "little_endian": True},
    shape_fn=_decode_padded_raw_shape,
)
NotDifferentiable("DecodePaddedRaw")


@DecodePaddedRaw.kernel("CPU")
async def _decode_padded_raw(ctx, data, fixed_length):
    dt = ctx.attrs["out_type"]
    np_dt = np.dtype(dt.as_numpy_dtype).newbyteorder("<" if ctx.attrs["little_endian"] else ">")
    n = int(fixed_length)
    if n <= 0:
        raise errors.InvalidArgumentError(
            None, None, f"fixed_length ({n}) must be greater than zero."
        )
    if n % np_dt.itemsize:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"fixed_length ({n}) must be a multiple of the size of out_type ({np_dt.itemsize})",
        )
    data = np.asarray(data, dtype=object)
    # Each string cut or zero-padded to fixed_length bytes, then reinterpreted.
    buf = b"".join(bytes(s[:n]).ljust(n, b"\0") for s in data.ravel())
    out = np.frombuffer(buf, dtype=np_dt).astype(dt.as_numpy_dtype)
    return out.reshape(*data.shape, n // np_dt.itemsize)


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None,  # noqa: A002
               fixed_length=None):  # fmt: skip
    """Reinterpret the bytes of a string as a vector of numbers.  With `fixed_length`
    (TF2's decode_raw), each string is cut or zero-padded to that many bytes first
    (op DecodePaddedRaw).

    Raises:
      ValueError: (at build time) a constant fixed_length not a multiple of the type's size.
      InvalidArgumentError: (when run) strings of different lengths, a length that is
        not a multiple of the type's size, or fixed_length <= 0.
    """
    if input_bytes is None:
        input_bytes = bytes
    if out_type is None:
        raise TypeError("decode_raw() missing required argument 'out_type'")
    if fixed_length is not None:
        attrs = {"out_type": dtypes.as_dtype(out_type), "little_endian": little_endian}
        return ops.apply_op(
            "DecodePaddedRaw", [input_bytes, fixed_length], attrs, name=name
        ).outputs[0]
    return ops.apply_op(
        "DecodeRaw",
        [input_bytes],
        {"out_type": dtypes.as_dtype(out_type), "little_endian": little_endian},
        name=name,
    ).outputs[0]


def decode_raw_v1(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):  # noqa: A002
    """TF1's decode_raw (`tf.compat.v1.decode_raw`): no `fixed_length`; `bytes` is the
    deprecated name of `input_bytes`."""
    if input_bytes is not None and bytes is not None:
        raise ValueError("Cannot specify both 'input_bytes' and 'bytes'")
    return decode_raw(input_bytes if input_bytes is not None else bytes, out_type,
                      little_endian, name)  # fmt: skip


# -- DecodeJSONExample ----------------------------------------------------------------------

DecodeJSONExample = register_op(
    "DecodeJSONExample",
    inputs=["json_examples: string"],
    outputs=["binary_examples: string"],
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("DecodeJSONExample")


def _json_to_example(text) -> bytes:
    from google.protobuf import json_format

    from asyncflow.example_json import example_from_json

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.InvalidArgumentError(
                None, None, f"Error while parsing JSON: invalid UTF-8: {exc}"
            ) from exc
    try:
        return example_from_json(text)
    except json_format.ParseError as exc:
        raise errors.InvalidArgumentError(None, None, f"Error while parsing JSON: {exc}") from exc


def _decode_json_sync(data):
    data = np.asarray(data, dtype=object)
    out = np.empty(data.shape, dtype=object)
    flat = out.reshape(-1)
    for i, text in enumerate(data.reshape(-1)):
        flat[i] = _json_to_example(text)
    return out


@DecodeJSONExample.kernel("CPU")
async def _decode_json_example(ctx, data):
    if np.size(data) > 64:  # a large batch on the compute pool, never the loop
        return await ctx.device.compute(_decode_json_sync, data)
    return _decode_json_sync(data)


def decode_json_example(json_examples, name=None):
    """Converts each JSON-encoded `tf.train.Example` (protobuf's JSON mapping) in
    `json_examples` to its binary serialization, keeping the shape.

    Raises (when run):
      InvalidArgumentError: a string that is not JSON for an Example ("Error while
        parsing JSON").
    """
    return ops.apply_op("DecodeJSONExample", [json_examples], {}, name=name).outputs[0]


# -- StringToNumber -------------------------------------------------------------------------

StringToNumber = register_op(
    "StringToNumber",
    inputs=["string_tensor: string"],
    outputs=["output: out_type"],
    attrs={
        "out_type": TypeConstraint(
            ("float32", "float64", "int32", "int64", "uint32", "uint64"), default="float32"
        )
    },
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("StringToNumber")


@StringToNumber.kernel("CPU")
async def _string_to_number(ctx, s):
    dt = ctx.attrs["out_type"]
    s = np.asarray(s, dtype=object)
    out = np.empty(s.shape, dtype=dt.as_numpy_dtype)
    flat = out.reshape(-1)
    for i, text in enumerate(s.ravel()):
        v = _parse_number(text, dt)
        if v is None:
            raise errors.InvalidArgumentError(
                None,
                None,
                "StringToNumberOp could not correctly convert string: "
                f"{text.decode('utf-8', 'replace')}",
            )
        flat[i] = v
    return out


@_dispatch.add_dispatch_support
def string_to_number(string_tensor=None, out_type=dtypes.float32, name=None, input=None):  # noqa: A002
    """Converts each string in the input Tensor to the specified numeric type (`input` is
    TF 2's name for `string_tensor`).

    Raises (when run):
      InvalidArgumentError: a string is not a number of that type.
    """
    from asyncflow.deprecation import deprecated_argument_lookup

    string_tensor = deprecated_argument_lookup("input", input, "string_tensor", string_tensor)
    return ops.apply_op(
        "StringToNumber", [string_tensor], {"out_type": dtypes.as_dtype(out_type)}, name=name
    ).outputs[0]
