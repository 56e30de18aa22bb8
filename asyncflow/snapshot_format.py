"""The files of a saved tf.data dataset (TF's snapshot format, version 2), as TF 2.21
writes and reads them for `Dataset.save` / `load` / `snapshot`.

    PATH/dataset_spec.pb        the element_spec, a StructuredValue proto (save only)
    PATH/snapshot.metadata      a SnapshotMetadataRecord proto: run id, dtypes, count,
                                finalized (snapshot: in PATH/<graph hash>/ instead)
    PATH/<run id>/<shard:08d>.shard/<checkpoint:08d>.snapshot
                                TFRecord-framed records, one TensorProto per component of
                                each element, the whole file NONE, GZIP or SNAPPY coded

TF's SNAPPY file coding (its SnappyOutputBuffer) is a sequence of blocks, each a
big-endian uint32 byte count and a raw snappy block.  The snappy coder here is written
from the format's definition; it stores the blocks it writes as literals (valid snappy:
TF reads them; they are not smaller), and reads any snappy block TF writes.

Invariants: every size read from a file is checked against what remains (or a cap)
before anything is allocated for it; a bad record, CRC or proto raises
`errors.DataLossError` as TF's readers do.
"""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.crc32c import masked_crc32c
from asyncflow.proto_wire import length_delimited as _field
from asyncflow.proto_wire import varint as _varint
from asyncflow.protos.tensor_pb2 import TensorProto

__all__ = [
    "SPEC_FILE",
    "METADATA_FILE",
    "checkpoint_file",
    "shard_directory",
    "encode_records",
    "decode_records",
    "encode_metadata",
    "decode_metadata",
    "encode_spec",
    "decode_spec",
    "snappy_compress",
    "snappy_decompress",
]

SPEC_FILE = "dataset_spec.pb"
METADATA_FILE = "snapshot.metadata"
VERSION = 2
# A snappy block TF's reader accepts is at most its 256 KiB buffer; ours stay well below.
_SNAPPY_BLOCK = 64 << 10
# One block may declare at most this many uncompressed bytes (TF's own are <= 256 KiB).
_SNAPPY_MAX_BLOCK = 64 << 20
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def _bad(msg: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, msg)


def shard_directory(run_dir: str, shard: int) -> str:
    """`run_dir/<shard>.shard`, the index printed as TF's `%08llu` (unsigned)."""
    return f"{run_dir}/{int(shard) & (2**64 - 1):08d}.shard"


def checkpoint_file(shard_dir: str, checkpoint: int) -> str:
    return f"{shard_dir}/{int(checkpoint):08d}.snapshot"


# -- protobuf wire helpers -----------------------------------------------------------------


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _bad("Truncated or overlong varint")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of a message: ints for varints, bytes else."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _read_varint(data, pos)
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            if n > len(data) - pos:
                raise _bad("Truncated proto field")
            val, pos = data[pos : pos + n], pos + n
        elif wire == 1:
            val, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            val, pos = data[pos : pos + 4], pos + 4
        else:
            raise _bad(f"Unsupported proto wire type {wire}")
        yield num, wire, val


# -- snappy ----------------------------------------------------------------------------------


def _snappy_block(raw: bytes) -> bytes:
    """One raw snappy block holding `raw` as literals (at most 64 KiB each)."""
    out = [_varint(len(raw))]
    for i in range(0, len(raw), 1 << 16):
        piece = raw[i : i + (1 << 16)]
        n = len(piece) - 1
        if n < 60:
            out.append(bytes([n << 2]))
        elif n < 256:
            out.append(bytes([60 << 2, n]))
        else:
            out.append(bytes([61 << 2]) + n.to_bytes(2, "little"))
        out.append(piece)
    return b"".join(out)


def _snappy_raw_decompress(block: bytes, limit: int = _SNAPPY_MAX_BLOCK) -> bytes:
    size, pos = _read_varint(block, 0)
    if size > limit:
        raise _bad(f"Snappy block declares {size} bytes")
    out = bytearray()
    end = len(block)
    while pos < end:
        tag = block[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                k = n - 59
                n = int.from_bytes(block[pos : pos + k], "little")
                pos += k
            n += 1
            if n > end - pos:
                raise _bad("Snappy literal runs past the block")
            out += block[pos : pos + n]
            pos += n
            continue
        if kind == 1:
            n = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | block[pos]
            pos += 1
        elif kind == 2:
            n = (tag >> 2) + 1
            off = int.from_bytes(block[pos : pos + 2], "little")
            pos += 2
        else:
            n = (tag >> 2) + 1
            off = int.from_bytes(block[pos : pos + 4], "little")
            pos += 4
        if off == 0 or off > len(out):
            raise _bad("Snappy copy reaches before the block")
        start = len(out) - off
        if off >= n:
            out += out[start : start + n]
        else:  # an overlapping copy repeats the last `off` bytes
            reps = out[start:]
            out += (reps * (n // off + 1))[:n]
        if len(out) > size:
            raise _bad("Snappy block is longer than it declares")
    if len(out) != size:
        raise _bad("Snappy block is shorter than it declares")
    return bytes(out)


def snappy_compress(data: bytes) -> bytes:
    """`data` in TF's SNAPPY file coding (blocks of a uint32 size and a snappy block)."""
    out = []
    for i in range(0, len(data), _SNAPPY_BLOCK):
        block = _snappy_block(data[i : i + _SNAPPY_BLOCK])
        out.append(struct.pack(">I", len(block)))
        out.append(block)
    return b"".join(out)


def snappy_decompress(data: bytes) -> bytes:
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 4:
            raise _bad("Truncated snappy block header")
        (n,) = struct.unpack_from(">I", data, pos)
        pos += 4
        if n > len(data) - pos:
            raise _bad("Truncated snappy block")
        out.append(_snappy_raw_decompress(data[pos : pos + n]))
        pos += n
    return b"".join(out)


# -- files of records ------------------------------------------------------------------------


def _code(compression: str) -> str:
    c = (compression or "").upper()
    if c not in ("", "NONE", "GZIP", "ZLIB", "SNAPPY"):
        raise errors.InvalidArgumentError(
            None, None, f"Compression {compression} is not supported."
        )
    return "" if c == "NONE" else c


def compress(data: bytes, compression: str) -> bytes:
    c = _code(compression)
    if c in ("GZIP", "ZLIB"):
        z = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS + (16 if c == "GZIP" else 0))
        return z.compress(data) + z.flush()
    if c == "SNAPPY":
        return snappy_compress(data)
    return data


def decompress(data: bytes, compression: str) -> bytes:
    c = _code(compression)
    try:
        if c in ("GZIP", "ZLIB"):
            return zlib.decompress(data, zlib.MAX_WBITS + (16 if c == "GZIP" else 0))
        if c == "SNAPPY":
            return snappy_decompress(data)
    except zlib.error as e:
        raise _bad(f"Corrupted {c} data: {e}") from None
    return data


def _frame(record: bytes) -> bytes:
    header = _U64.pack(len(record))
    return b"".join(
        (header, _U32.pack(masked_crc32c(header)), record, _U32.pack(masked_crc32c(record)))
    )


def encode_records(records) -> bytes:
    """TFRecord framing of `records` (uncompressed)."""
    return b"".join(_frame(r) for r in records)


def decode_records(data: bytes) -> list[bytes]:
    """The records of an uncompressed TFRecord stream.

    Raises:
      DataLossError: a truncated record or a CRC mismatch (TF's message for the first
        record of a file that is not one).
    """
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise _bad(f"corrupted record at {pos}")
        header = data[pos : pos + 8]
        (n,) = _U64.unpack(header)
        (crc,) = _U32.unpack_from(data, pos + 8)
        if crc != masked_crc32c(header):
            raise _bad(f"corrupted record at {pos} (Is this even a TFRecord file?)")
        if n > len(data) - pos - 16:
            raise _bad(f"truncated record at {pos}")
        rec = data[pos + 12 : pos + 12 + n]
        (crc,) = _U32.unpack_from(data, pos + 12 + n)
        if crc != masked_crc32c(rec):
            raise _bad(f"corrupted record at {pos}")
        out.append(rec)
        pos += n + 16
    return out


# -- tensors ---------------------------------------------------------------------------------


def encode_tensor(arr) -> bytes:
    """A TensorProto as TF's `AsProtoTensorContent` writes it: every value in
    tensor_content, strings as their varint lengths followed by their bytes."""
    arr = np.asarray(arr)
    dt = dtypes.as_dtype(dtypes.string if arr.dtype == object else arr.dtype)
    p = TensorProto()
    p.dtype = dt.as_datatype_enum
    p.tensor_shape.SetInParent()
    for d in arr.shape:
        p.tensor_shape.dim.add(size=int(d))
    if dt == dtypes.string:
        vals = [
            v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in arr.reshape(-1).tolist()
        ]
        if vals:
            p.tensor_content = b"".join(_varint(len(v)) for v in vals) + b"".join(vals)
    elif arr.size:
        p.tensor_content = (
            np.ascontiguousarray(arr)
            .astype(np.dtype(dt.as_numpy_dtype).newbyteorder("<"), copy=False)
            .tobytes()
        )
    return p.SerializeToString()


def _strings(content: bytes, count: int) -> np.ndarray:
    lengths, pos = [], 0
    for _ in range(count):
        n, pos = _read_varint(content, pos)
        lengths.append(n)
    if sum(lengths) != len(content) - pos:
        raise _bad("String tensor content does not match its lengths")
    out = np.empty(count, dtype=object)
    for i, n in enumerate(lengths):
        out[i] = content[pos : pos + n]
        pos += n
    return out


_DTYPES: dict = {}  # DataType enum -> (DType, little-endian NumPy dtype, NumPy dtype)


def _dtype_of(enum: int):
    hit = _DTYPES.get(enum)
    if hit is None:
        dt = dtypes.as_dtype(enum)
        if dt == dtypes.string:
            hit = (dt, None, None)
        else:
            np_dt = np.dtype(dt.as_numpy_dtype)
            hit = (dt, np_dt.newbyteorder("<"), np_dt)
        _DTYPES[enum] = hit
    return hit


def decode_tensor(data: bytes) -> np.ndarray:
    """The array a record's TensorProto holds (tensor_content or the typed value lists).

    Raises:
      DataLossError: an unparsable proto, unknown dtype or values not fitting the shape.
    """
    p = TensorProto()
    try:
        p.ParseFromString(data)
        dt, le_dt, np_dt = _dtype_of(p.dtype)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and dtype lookups alike
        raise _bad("Unable to parse tensor from stored proto.") from None
    shape = p.tensor_shape
    dims = tuple(d.size for d in shape.dim)
    if shape.unknown_rank or any(d < 0 for d in dims):
        raise _bad("Unable to parse tensor from stored proto.")
    count = math.prod(dims)
    content = p.tensor_content
    if dt == dtypes.string:
        if content:
            flat = _strings(content, count)
        else:
            flat = np.empty(len(p.string_val), dtype=object)
            flat[:] = list(p.string_val)
    elif content or count == 0:
        if len(content) != count * le_dt.itemsize:
            raise _bad("Unable to parse tensor from stored proto.")
        flat = np.frombuffer(content, le_dt).astype(np_dt)  # (a copy the element owns)
    else:
        flat = _typed_values(p, np_dt)
    if flat.size != count:
        raise _bad("Unable to parse tensor from stored proto.")
    return flat.reshape(dims)


def _typed_values(p: TensorProto, np_dt) -> np.ndarray:
    if p.half_val:
        return np.asarray(p.half_val, np.uint32).astype(np.uint16).view(np_dt)
    if p.scomplex_val or p.dcomplex_val:
        flat = np.asarray(p.scomplex_val or p.dcomplex_val, np.float64)
        return (flat[0::2] + 1j * flat[1::2]).astype(np_dt)
    for field in ("float_val", "double_val", "int_val", "int64_val", "uint32_val",
                  "uint64_val", "bool_val"):  # fmt: skip
        vals = getattr(p, field)
        if vals:
            return np.asarray(vals).astype(np_dt)
    return np.zeros(0, np_dt)


# -- snapshot.metadata -----------------------------------------------------------------------


def encode_metadata(
    run_id: str,
    timestamp: int,
    dtype_enums,
    num_elements: int,
    finalized: bool,
    graph_hash="",
    version: int = VERSION,
) -> bytes:
    """A SnapshotMetadataRecord (graph_hash 1, run_id 2, creation_timestamp 3, version 4,
    dtype 5 packed, num_elements 6, finalized 1000), fields in TF's order (version 1 for
    the v1 SnapshotDataset's files, 2 for the others)."""
    out = b""
    if graph_hash:
        out += _field(1, graph_hash.encode())
    out += _field(2, run_id.encode())
    if timestamp:
        out += _varint(3 << 3) + _varint(timestamp)
    out += _varint(4 << 3) + _varint(version)
    enums = list(dtype_enums)
    if enums:
        out += _field(5, b"".join(_varint(int(e)) for e in enums))
    if num_elements:
        out += _varint(6 << 3) + _varint(num_elements)
    if finalized:
        out += _varint(1000 << 3) + b"\x01"
    return out


def decode_metadata(data: bytes) -> dict:
    """The fields of a SnapshotMetadataRecord (missing ones at proto defaults)."""
    md = {"graph_hash": "", "run_id": "", "creation_timestamp": 0, "version": 0,
          "dtype": [], "num_elements": 0, "finalized": False}  # fmt: skip
    for num, wire, val in _fields(data):
        if num == 1 and wire == 2:
            md["graph_hash"] = val.decode("utf-8", "replace")
        elif num == 2 and wire == 2:
            md["run_id"] = val.decode("utf-8", "replace")
        elif num in (3, 4, 6) and wire == 0:
            key = {3: "creation_timestamp", 4: "version", 6: "num_elements"}[num]
            md[key] = val - (1 << 64) if val >= 1 << 63 else val
        elif num == 5 and wire == 2:
            pos = 0
            while pos < len(val):
                e, pos = _read_varint(val, pos)
                md["dtype"].append(e)
        elif num == 5 and wire == 0:
            md["dtype"].append(val)
        elif num == 1000 and wire == 0:
            md["finalized"] = bool(val)
    return md


# -- dataset_spec.pb: the element_spec as a StructuredValue ---------------------------------
# StructuredValue fields used: none_value 1, list_value 51, tuple_value 52, dict_value 53,
# named_tuple_value 54, tensor_spec_value 33.  A spec is given here as nested Python
# values whose leaves are (name, TensorShape, DType) triples.


def _shape_proto(shape: tensor_shape.TensorShape) -> bytes:
    if shape.ndims is None:
        return _varint(3 << 3) + b"\x01"
    out = b""
    for d in shape.as_list():
        size = -1 if d is None else int(d)
        out += _field(2, _varint(1 << 3) + _varint(size) if size else b"")
    return out


def _shape_from(data: bytes) -> tensor_shape.TensorShape:
    dims, unknown = [], False
    for num, wire, val in _fields(data):
        if num == 2 and wire == 2:
            size = 0
            for n2, w2, v2 in _fields(val):
                if n2 == 1 and w2 == 0:
                    size = v2 - (1 << 64) if v2 >= 1 << 63 else v2
            dims.append(None if size < 0 else size)
        elif num == 3 and wire == 0:
            unknown = bool(val)
    return tensor_shape.unknown_shape() if unknown else tensor_shape.TensorShape(dims)


def encode_spec(value) -> bytes:
    """The StructuredValue bytes of a nest of (name, shape, dtype) leaves.

    Raises:
      TypeError: a leaf or container the format here does not cover.
    """
    if value is None:
        return _field(1, b"")
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[2], dtypes.DType):
        name, shape, dt = value
        body = (_field(1, name.encode()) if name else b"") + _field(2, _shape_proto(shape))
        body += _varint(3 << 3) + _varint(dt.as_datatype_enum)
        return _field(33, body)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        body = _field(1, type(value).__name__.encode())
        for k, v in zip(value._fields, value):
            body += _field(2, _field(1, k.encode()) + _field(2, encode_spec(v)))
        return _field(54, body)
    if isinstance(value, (tuple, list)):
        body = b"".join(_field(1, encode_spec(v)) for v in value)
        return _field(52 if isinstance(value, tuple) else 51, body)
    if isinstance(value, dict):
        body = b"".join(
            _field(1, _field(1, str(k).encode()) + _field(2, encode_spec(v)))
            for k, v in sorted(value.items())
        )
        return _field(53, body)
    raise TypeError(f"Cannot encode {value!r} in a dataset_spec file")


def decode_spec(data: bytes, namedtuple_factory=None):
    """The nest `encode_spec` encodes (named tuples rebuilt by `namedtuple_factory(name,
    fields)`, by default collections.namedtuple).

    Raises:
      ValueError: a StructuredValue kind the format here does not cover.
    """
    import collections

    make_nt = namedtuple_factory or collections.namedtuple
    for num, wire, val in _fields(data):
        if wire != 2:
            continue
        if num == 1:
            return None
        if num == 33:
            name, shape, dt = "", tensor_shape.unknown_shape(), dtypes.float32
            for n2, w2, v2 in _fields(val):
                if n2 == 1 and w2 == 2:
                    name = v2.decode()
                elif n2 == 2 and w2 == 2:
                    shape = _shape_from(v2)
                elif n2 == 3 and w2 == 0:
                    dt = dtypes.as_dtype(v2)
            return (name, shape, dt)
        if num in (51, 52):
            items = [decode_spec(v2, make_nt) for n2, w2, v2 in _fields(val) if n2 == 1]
            return tuple(items) if num == 52 else items
        if num == 53:
            out = {}
            for n2, _w2, v2 in _fields(val):
                if n2 == 1:
                    entry = dict((k, v) for k, _w, v in _fields(v2))
                    out[entry.get(1, b"").decode()] = decode_spec(entry.get(2, b""), make_nt)
            return out
        if num == 54:
            name, pairs = "", []
            for n2, _w2, v2 in _fields(val):
                if n2 == 1:
                    name = v2.decode()
                elif n2 == 2:
                    entry = dict((k, v) for k, _w, v in _fields(v2))
                    pairs.append((entry.get(1, b"").decode(), decode_spec(entry.get(2, b""))))
            cls = make_nt(name, [k for k, _ in pairs])
            return cls(*[v for _, v in pairs])
        raise ValueError(f"Unsupported StructuredValue field {num} in a dataset_spec file")
    raise ValueError("Empty StructuredValue in a dataset_spec file")
