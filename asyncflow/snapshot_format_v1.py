"""The files of TF's v1 `SnapshotDataset` (tf.data.experimental.snapshot in TF 2.0-2.2,
snapshot format version 1), as TF 2.21 still writes and reads them:

    PATH/<graph hash %016x | custom-NAME>/snapshot.metadata
                                a SnapshotMetadataRecord, version 1 (snapshot_format.py)
    .../<run id %016x | custom>/<file:08d>.snapshot
                                records, each a little-endian uint64 length and its bytes
                                (no CRC); GZIP codes the whole file as one gzip stream

Records of an element: with NONE or GZIP one SnapshotRecord (field 1: a TensorProto per
component, as `AsProtoTensorContent` writes it); with SNAPPY two: a
SnapshotTensorMetadata (field 1: per component a TensorMetadata, tensor_shape 2 and
tensor_size_bytes 3) and one raw snappy block of the components' bytes in turn (a
number's raw little-endian values, a string tensor's TensorProto).

As TF's reader: a length running past the end of the file (or a partial length) ends
the file; a length of 2**63 or more is TF's "Cannot read negative number of bytes".

Invariants: no size read from a file is allocated before it is checked against the
bytes that hold it; an unparsable record raises `errors.DataLossError`.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import snapshot_format as sf
from asyncflow.proto_wire import length_delimited as _field
from asyncflow.proto_wire import varint as _varint

__all__ = ["VERSION", "COMPRESSIONS", "encode_element", "decode_elements"]

VERSION = 1
COMPRESSIONS = ("", "GZIP", "SNAPPY")
_U64 = struct.Struct("<Q")
# A snappy copy of at most 64 bytes costs at least 2 bytes: no block holds more than
# 32 times its size (plus its length varint), whatever it declares.
_SNAPPY_RATIO = 32


def _bad(msg: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, msg)


def _frame(record: bytes) -> bytes:
    return _U64.pack(len(record)) + record


def _raw(arr: np.ndarray, dt) -> bytes:
    if dt == dtypes.string:
        return sf.encode_tensor(arr)
    le = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    return np.ascontiguousarray(arr).astype(le, copy=False).tobytes()


def encode_element(arrays, compression: str) -> bytes:
    """The records of one element (before the file's GZIP coding, if any)."""
    if compression != "SNAPPY":
        return _frame(b"".join(_field(1, sf.encode_tensor(a)) for a in arrays))
    meta, raws = [], []
    for a in arrays:
        a = np.asarray(a)
        dt = dtypes.as_dtype(dtypes.string if a.dtype == object else a.dtype)
        raw = _raw(a, dt)
        shape = sf._shape_proto(tensor_shape.TensorShape(a.shape))
        meta.append(_field(1, _field(2, shape) + _varint(3 << 3) + _varint(len(raw))))
        raws.append(raw)
    return _frame(b"".join(meta)) + _frame(sf._snappy_block(b"".join(raws)))


def _records(data: bytes):
    pos, end = 0, len(data)
    while end - pos >= 8:
        (n,) = _U64.unpack_from(data, pos)
        if n >= 1 << 63:
            raise errors.InvalidArgumentError(None, None, "Cannot read negative number of bytes")
        if n > end - pos - 8:
            return
        yield data[pos + 8 : pos + 8 + n]
        pos += 8 + n


def _tensor_metadata(record: bytes) -> list[tuple[tuple, int]]:
    out = []
    for num, wire, val in sf._fields(record):
        if num != 1 or wire != 2:
            continue
        shape, size = tensor_shape.TensorShape([]), 0
        for n2, w2, v2 in sf._fields(val):
            if n2 == 2 and w2 == 2:
                shape = sf._shape_from(v2)
            elif n2 == 3 and w2 == 0:
                size = v2
        if shape.ndims is None or not shape.is_fully_defined():
            raise _bad("Snapshot tensor metadata has an unknown shape")
        out.append((tuple(shape.as_list()), size))
    return out


def _from_raw(raw: bytes, dims: tuple, dt) -> np.ndarray:
    if dt == dtypes.string:
        arr = sf.decode_tensor(raw)
        if arr.shape != dims:
            raise _bad("Snapshot tensor does not have its metadata's shape")
        return arr
    np_dt = np.dtype(dt.as_numpy_dtype)
    if len(raw) != math.prod(dims) * np_dt.itemsize:
        raise _bad("Snapshot tensor size does not match its shape")
    return np.frombuffer(raw, np_dt.newbyteorder("<")).astype(np_dt).reshape(dims)


def _snappy_element(meta: bytes, block: bytes, types) -> tuple:
    entries = _tensor_metadata(meta)
    if len(entries) != len(types):
        raise _bad(f"Snapshot element has {len(entries)} components, expected {len(types)}")
    total = sum(size for _, size in entries)
    if total > _SNAPPY_RATIO * len(block) + 16:
        raise _bad(f"Snapshot element declares {total} bytes in a {len(block)}-byte block")
    raw = sf._snappy_raw_decompress(block, total)
    if len(raw) != total:
        raise _bad("Snapshot element is shorter than its metadata declares")
    out, pos = [], 0
    for (dims, size), dt in zip(entries, types):
        out.append(_from_raw(raw[pos : pos + size], dims, dt))
        pos += size
    return tuple(out)


def decode_elements(data: bytes, compression: str, types) -> list[tuple]:
    """The elements of one `.snapshot` file's bytes (tuples of arrays of `types`).

    Raises:
      DataLossError: an unparsable record, or one not holding `len(types)` tensors.
      InvalidArgumentError: a record length of 2**63 or more (TF's message).
    """
    if compression == "GZIP":
        data = sf.decompress(data, "GZIP")
    records = _records(data)
    out = []
    if compression == "SNAPPY":
        for meta in records:
            block = next(records, None)
            if block is None:  # (a partial element ends the file, as a partial record)
                break
            out.append(_snappy_element(meta, block, types))
        return out
    for rec in records:
        tensors = [sf.decode_tensor(v) for num, w, v in sf._fields(rec) if num == 1 and w == 2]
        if len(tensors) != len(types):
            raise _bad(f"Snapshot element has {len(tensors)} components, expected {len(types)}")
        out.append(tuple(tensors))
    return out
