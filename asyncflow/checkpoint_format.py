"""The checkpoint byte formats: TF's V2 tensor bundle, the former safetensors layout
(read only), atomic writes.

A checkpoint with prefix P is, as TensorFlow writes it (tensor_bundle.cc):
  P.index                       a table of BundleEntryProtos keyed by tensor name, plus
                                the BundleHeaderProto under "" (layout: see "TF's V2
                                checkpoint bundle" below)
  P.data-00000-of-0000N         the tensors' bytes, one file per shard.
The index is written last, so its presence marks a complete checkpoint.  TF's
`tf.train.load_checkpoint` / `Saver.restore` read what this module writes and it reads
what they write.  A partitioned variable is saved as TF saves it: the whole tensor's
entry lists its slices (BundleEntryProto.slices) and each slice has an entry of its own
(see "Partitioned variables" below).  Reading assembles the whole tensor, so a
checkpoint restores into any partitioning, or none.

asyncflow's former layout (a JSON index and safetensors data files) is still read, so
old checkpoints restore: `parse_index` tells them apart by the first byte.

Invariants:
- Readers bound every size read from a file before allocating: an index over
  `MAX_HEADER_BYTES` is refused, table blocks and tensors must lie inside their files,
  a tensor's byte count must match its dtype and shape, a string tensor's lengths
  must add up to its bytes.
- Every defect (truncation, bad magic, checksum mismatch, malformed protos or
  varints) raises `errors.DataLossError` naming the file.
- Writers write a temporary file in the same directory (mode from the umask), fsync
  it, rename it over the target and fsync the directory, so a crash leaves the old
  file or the new one; the next write removes a dead writer's temporary file.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import sys
import tempfile
import threading
import zlib
from dataclasses import dataclass

import aiofiles
import aiofiles.os
import numpy as np
from google.protobuf import message as _pb_message

from asyncflow import crc32c as crc32c_mod
from asyncflow import dtypes, errors
from asyncflow.protos.tensor_bundle_pb2 import BundleEntryProto, BundleHeaderProto

__all__ = [
    "MAX_HEADER_BYTES",
    "INDEX_FORMAT",
    "TensorEntry",
    "DataHeader",
    "parse_header",
    "decode_tensor",
    "write_data_file",
    "encode_table",
    "decode_table",
    "parse_bundle_index",
    "decode_bundle_tensor",
    "read_shard_tensors",
    "aread_shard_tensors",
    "remove_stale_tmp_files",
    "FILE_MODE",
    "read_data_header",
    "read_tensors",
    "aread_tensors",
    "index_path",
    "data_path",
    "encode_index",
    "parse_index",
    "read_index",
    "aread_index",
    "atomic_write",
    "aatomic_write",
    "fsync_dir",
]

MAX_HEADER_BYTES = 100_000_000  # the safetensors package's own limit
INDEX_FORMAT = "asyncflow.checkpoint.index"
_META_KEY = "asyncflow"

# asyncflow dtype -> safetensors dtype name (strings and complex128 are encoded).
_ST_NAMES = {
    dtypes.bool_: "BOOL",
    dtypes.uint8: "U8",
    dtypes.int8: "I8",
    dtypes.int16: "I16",
    dtypes.uint16: "U16",
    dtypes.float16: "F16",
    dtypes.bfloat16: "BF16",
    dtypes.int32: "I32",
    dtypes.uint32: "U32",
    dtypes.float32: "F32",
    dtypes.int64: "I64",
    dtypes.uint64: "U64",
    dtypes.float64: "F64",
    dtypes.complex64: "C64",
    dtypes.string: "U8",
    dtypes.complex128: "F64",
}
_ST_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}  # fmt: skip
_ST_DEFAULT_DTYPE = {  # a file without our metadata: the safetensors dtype decides
    "BOOL": dtypes.bool_, "U8": dtypes.uint8, "I8": dtypes.int8, "I16": dtypes.int16,
    "U16": dtypes.uint16, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
    "I32": dtypes.int32, "U32": dtypes.uint32, "F32": dtypes.float32, "I64": dtypes.int64,
    "U64": dtypes.uint64, "F64": dtypes.float64, "C64": dtypes.complex64,
}  # fmt: skip


def _data_loss(filename: str, what: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Checkpoint file {filename} is corrupted: {what}")


# -- the former layout: safetensors data files (read only) -----------------------------


@dataclass
class TensorEntry:
    """One tensor of a data file: where its bytes are and what they decode to."""

    name: str
    dtype: dtypes.DType
    shape: tuple[int, ...]
    st_dtype: str
    begin: int  # absolute file offsets
    end: int
    crc32: int | None


@dataclass
class DataHeader:
    filename: str
    entries: dict[str, TensorEntry]
    metadata: dict[str, str]


def _int_list(value, filename, what) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise _data_loss(filename, f"bad {what} {value!r}")
    return value


def parse_header(raw: bytes, filename: str, file_size: int) -> DataHeader:
    """Validate a header (the bytes after the 8-byte length) of a file of `file_size` bytes.

    Raises:
      DataLossError: for any inconsistency, naming `filename`.
    """
    data_start = 8 + len(raw)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _data_loss(filename, f"header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise _data_loss(filename, "header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _data_loss(filename, "__metadata__ must map strings to strings")
    ours: dict = {}
    if _META_KEY in metadata:
        try:
            ours = json.loads(metadata[_META_KEY])
        except json.JSONDecodeError:
            raise _data_loss(filename, "asyncflow metadata is not valid JSON") from None
        if not isinstance(ours, dict):
            raise _data_loss(filename, "asyncflow metadata is not a JSON object")
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        entries[name] = _parse_entry(name, info, ours.get(name), filename, data_start)
    pos = data_start
    for e in sorted(entries.values(), key=lambda e: e.begin):
        if e.begin != pos:
            raise _data_loss(filename, f"tensor '{e.name}' does not start where the last ended")
        pos = e.end
    if pos != file_size:
        what = "truncated" if pos > file_size else "longer than its header says"
        raise _data_loss(filename, f"file is {what} ({file_size} bytes, expected {pos})")
    return DataHeader(filename, entries, {k: v for k, v in metadata.items() if k != _META_KEY})


def _parse_entry(name, info, ours, filename, data_start) -> TensorEntry:
    if not isinstance(info, dict) or info.get("dtype") not in _ST_ITEMSIZE:
        raise _data_loss(filename, f"bad entry for tensor '{name}'")
    st = info["dtype"]
    shape = _int_list(info.get("shape"), filename, f"shape of '{name}'")
    offsets = _int_list(info.get("data_offsets"), filename, f"offsets of '{name}'")
    if len(offsets) != 2 or offsets[0] > offsets[1]:
        raise _data_loss(filename, f"bad data_offsets for tensor '{name}'")
    begin, end = offsets
    nbytes = int(np.prod(shape, dtype=object)) * _ST_ITEMSIZE[st]
    if nbytes != end - begin:
        raise _data_loss(filename, f"tensor '{name}' has {end - begin} bytes for shape {shape}")
    crc, dt, logical = None, _ST_DEFAULT_DTYPE[st], tuple(shape)
    if ours is not None:
        try:
            dt = dtypes.as_dtype(ours["dtype"])
            logical = tuple(_int_list(ours["shape"], filename, f"shape of '{name}'"))
            crc = int(ours["crc32"], 16)
        except (KeyError, TypeError, ValueError):
            raise _data_loss(filename, f"bad asyncflow metadata for tensor '{name}'") from None
        if _ST_NAMES.get(dt) != st:
            raise _data_loss(filename, f"tensor '{name}': {dt.name} stored as {st}")
        expect = list(logical) + ([2] if dt == dtypes.complex128 else [])
        if dt != dtypes.string and expect != shape:
            raise _data_loss(filename, f"tensor '{name}': shape {shape} for {list(logical)}")
    return TensorEntry(name, dt, logical, st, data_start + begin, data_start + end, crc)


def decode_tensor(entry: TensorEntry, raw: bytes, filename: str) -> np.ndarray:
    """The array stored in `raw` (exactly the entry's bytes); checks the CRC.

    Raises:
      DataLossError: CRC mismatch or inconsistent string lengths.
    """
    if len(raw) != entry.end - entry.begin:
        raise _data_loss(filename, f"tensor '{entry.name}' is truncated")
    if entry.crc32 is not None and zlib.crc32(raw) != entry.crc32:
        raise _data_loss(filename, f"checksum mismatch for tensor '{entry.name}'")
    dt = entry.dtype
    if dt == dtypes.string:
        return _decode_strings(entry, raw, filename)
    np_dt = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    if dt == dtypes.complex128:
        np_dt = np.dtype("<c16")
    arr = np.frombuffer(raw, dtype=np.uint8 if dt == dtypes.bool_ else np_dt)
    if dt == dtypes.bool_:
        if arr.size and arr.max() > 1:
            raise _data_loss(filename, f"tensor '{entry.name}' has bool bytes other than 0/1")
        arr = arr.view(np.bool_)
    arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)  # writable, native order
    return arr.reshape(entry.shape)


def _decode_strings(entry: TensorEntry, raw: bytes, filename: str) -> np.ndarray:
    n = int(np.prod(entry.shape, dtype=object))
    if 8 * n > len(raw):
        raise _data_loss(filename, f"string tensor '{entry.name}' is too short")
    lengths = np.frombuffer(raw, dtype="<i8", count=n)
    if n and (lengths.min() < 0 or int(lengths.sum()) != len(raw) - 8 * n):
        raise _data_loss(filename, f"string tensor '{entry.name}' has inconsistent lengths")
    out = np.empty(n, dtype=object)
    pos = 8 * n
    for i, k in enumerate(lengths.tolist()):
        out[i] = raw[pos : pos + k]
        pos += k
    return out.reshape(entry.shape)


def _split_header_length(head: bytes, filename: str, file_size: int) -> int:
    if len(head) < 8:
        raise _data_loss(filename, "file is truncated (no header)")
    n = int.from_bytes(head[:8], "little")
    if n > MAX_HEADER_BYTES or n > file_size - 8:
        raise _data_loss(filename, f"header length {n} is out of bounds")
    return n


def _not_found(filename: str) -> errors.NotFoundError:
    return errors.NotFoundError(None, None, f"Failed to find any matching files for {filename}")


def read_data_header(filename: str) -> DataHeader:
    """Parse the header of a data file (blocking).

    Raises: NotFoundError (missing file), DataLossError (corrupt file).
    """
    try:
        with open(filename, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = _split_header_length(f.read(8), filename, size)
            return parse_header(f.read(n), filename, size)
    except FileNotFoundError:
        raise _not_found(filename) from None


def read_tensors(filename: str, names, header: DataHeader | None = None) -> dict:
    """{name: array} for `names` of one data file (blocking)."""
    header = header or read_data_header(filename)
    out = {}
    try:
        with open(filename, "rb") as f:
            for name in names:
                e = header.entries[name]
                f.seek(e.begin)
                out[name] = decode_tensor(e, f.read(e.end - e.begin), filename)
    except FileNotFoundError:
        raise _not_found(filename) from None
    return out


async def aread_tensors(filename: str, names) -> tuple[DataHeader, dict]:
    """Async twin of `read_data_header` + `read_tensors` (aiofiles; CRCs on a worker)."""
    loop = asyncio.get_running_loop()
    try:
        async with aiofiles.open(filename, "rb") as f:
            size = (await aiofiles.os.stat(filename)).st_size
            n = _split_header_length(await f.read(8), filename, size)
            header = parse_header(await f.read(n), filename, size)
            out = {}
            for name in names:
                e = header.entries.get(name)
                if e is None:
                    raise _data_loss(filename, f"tensor '{name}' named by the index is missing")
                await f.seek(e.begin)
                raw = await f.read(e.end - e.begin)
                if len(raw) > (1 << 20):
                    out[name] = await loop.run_in_executor(None, decode_tensor, e, raw, filename)
                else:
                    out[name] = decode_tensor(e, raw, filename)
            return header, out
    except FileNotFoundError:
        raise _not_found(filename) from None


# -- TF's V2 checkpoint bundle -----------------------------------------------------------
#
# P.index is a table file (the LevelDB layout TF's tensorflow/core/lib/io/table uses):
#   data blocks   entries (shared key bytes: varint32, unshared: varint32, value
#                 length: varint32, key suffix, value), then uint32 restart offsets
#                 and their count; each block followed by a 5-byte trailer: the
#                 compression type (0: none) and the masked CRC-32C of block + type
#   metaindex     an empty block
#   index block   one entry per data block: its last key -> BlockHandle (varint64
#                 offset, varint64 size)
#   footer        metaindex and index BlockHandles padded to 40 bytes, then the magic
#                 number 0xdb4775248b80fb57 (little-endian): 48 bytes.
# Keys are sorted bytewise: "" holds the BundleHeaderProto, every other key a tensor's
# BundleEntryProto (dtype, shape, shard_id, offset, size, masked CRC-32C of its bytes).
# A data shard holds the tensors' bytes back to back, in key order: numbers raw and
# little-endian; a string tensor as its elements' lengths (varint64 each), the masked
# CRC-32C of those length bytes (4 bytes), then the elements' bytes.

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_LEN = 48
_BLOCK_TRAILER = 5
_RESTART_INTERVAL = 16
_BLOCK_SIZE = 256 << 10  # TF's table::Options default
BUNDLE_VERSION = 1  # TF's kTensorBundleVersion
_MASK_DELTA = 0xA282EAD8


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _unmask(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def _put_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(buf, pos: int, end: int, filename: str, bits: int = 64) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift >= bits:
            raise _data_loss(filename, "bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


class _BlockBuilder:
    def __init__(self, restart_interval: int):
        self.buf = bytearray()
        self.restarts = [0]
        self.count = 0
        self.last = b""
        self.interval = restart_interval

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.count < self.interval:
            n = min(len(key), len(self.last))
            while shared < n and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.count = 0
        _put_varint(self.buf, shared)
        _put_varint(self.buf, len(key) - shared)
        _put_varint(self.buf, len(value))
        self.buf += key[shared:]
        self.buf += value
        self.last = key
        self.count += 1

    def size(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        out = self.buf + b"".join(struct.pack("<I", r) for r in self.restarts)
        return bytes(out + struct.pack("<I", len(self.restarts)))


def _short_successor(key: bytes) -> bytes:
    """A short key >= `key` (LevelDB's FindShortSuccessor), for the last index entry."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def _short_separator(start: bytes, limit: bytes) -> bytes:
    """A short key in [start, limit) (LevelDB's FindShortestSeparator)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def encode_table(items: list[tuple[bytes, bytes]]) -> bytes:
    """A table file of (key, value) pairs sorted by key (bytewise), byte for byte what
    TF's table builder writes for them."""
    out = bytearray()
    index = _BlockBuilder(1)

    def flush(block: _BlockBuilder, next_key: bytes | None) -> None:
        raw = block.finish()
        handle = bytearray()
        _put_varint(handle, len(out))
        _put_varint(handle, len(raw))
        out.extend(raw)
        out.append(0)  # no compression
        out.extend(struct.pack("<I", _mask(crc32c_mod.crc32c(raw + b"\x00"))))
        if next_key is None:
            index.add(_short_successor(block.last), bytes(handle))
        else:
            index.add(_short_separator(block.last, next_key), bytes(handle))

    block = _BlockBuilder(_RESTART_INTERVAL)
    prev = None
    for key, value in items:
        if prev is not None and key <= prev:
            raise ValueError(f"table keys must be strictly increasing: {prev!r}, {key!r}")
        if block.size() >= _BLOCK_SIZE or (
            block.count and len(key) + len(value) > 2 * _BLOCK_SIZE
        ):  # (TF also gives an entry over twice the block size a block of its own)
            flush(block, key)
            block = _BlockBuilder(_RESTART_INTERVAL)
        prev = key
        block.add(key, value)
    if block.count or not index.count:
        flush(block, None)
    handles = bytearray()
    meta = _BlockBuilder(_RESTART_INTERVAL).finish()
    _put_varint(handles, len(out))
    _put_varint(handles, len(meta))
    out += meta + b"\x00" + struct.pack("<I", _mask(crc32c_mod.crc32c(meta + b"\x00")))
    index_raw = index.finish()
    _put_varint(handles, len(out))
    _put_varint(handles, len(index_raw))
    out += index_raw + b"\x00" + struct.pack("<I", _mask(crc32c_mod.crc32c(index_raw + b"\x00")))
    out += handles + b"\x00" * (40 - len(handles)) + struct.pack("<Q", _TABLE_MAGIC)
    return bytes(out)


def _read_block(data: bytes, handle: tuple[int, int], filename: str) -> bytes:
    offset, size = handle
    if offset + size + _BLOCK_TRAILER > len(data) - _FOOTER_LEN:
        raise _data_loss(filename, "table block outside the file")
    raw = data[offset : offset + size]
    kind = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if _unmask(stored) != crc32c_mod.crc32c(raw + bytes([kind])):
        raise _data_loss(filename, "table block checksum mismatch")
    if kind != 0:
        raise _data_loss(filename, f"unsupported table block compression {kind}")
    return raw


def _block_entries(raw: bytes, filename: str):
    """(key, value) pairs of one block, in order."""
    if len(raw) < 4:
        raise _data_loss(filename, "table block too short")
    (n_restarts,) = struct.unpack_from("<I", raw, len(raw) - 4)
    limit = len(raw) - 4 - 4 * n_restarts
    if limit < 0 or n_restarts == 0:
        raise _data_loss(filename, "bad table block restart array")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _get_varint(raw, pos, limit, filename, 32)
        unshared, pos = _get_varint(raw, pos, limit, filename, 32)
        vlen, pos = _get_varint(raw, pos, limit, filename, 32)
        if shared > len(key) or pos + unshared + vlen > limit:
            raise _data_loss(filename, "bad table entry")
        key = key[:shared] + raw[pos : pos + unshared]
        pos += unshared
        yield key, raw[pos : pos + vlen]
        pos += vlen


def decode_table(data: bytes, filename: str) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of a table file, checksums verified.

    Raises:
      DataLossError: anything malformed (never another exception, never a read or an
        allocation past the file's own size).
    """
    if len(data) < _FOOTER_LEN:
        raise _data_loss(filename, "too short to be a table (no footer)")
    footer = data[-_FOOTER_LEN:]
    if struct.unpack_from("<Q", footer, 40)[0] != _TABLE_MAGIC:
        raise _data_loss(filename, "not a table file (bad magic number)")
    pos = 0
    handles = []
    for _ in range(2):
        off, pos = _get_varint(footer, pos, 40, filename)
        size, pos = _get_varint(footer, pos, 40, filename)
        handles.append((off, size))
    items: list[tuple[bytes, bytes]] = []
    last = None
    for _, handle_raw in _block_entries(_read_block(data, handles[1], filename), filename):
        off, p = _get_varint(handle_raw, 0, len(handle_raw), filename)
        size, _ = _get_varint(handle_raw, p, len(handle_raw), filename)
        for key, value in _block_entries(_read_block(data, (off, size), filename), filename):
            if last is not None and key <= last:
                raise _data_loss(filename, "table keys out of order")
            last = key
            items.append((key, value))
    return items


# -- bundle entries -----------------------------------------------------------------------


@dataclass
class BundleEntry:
    """Where one tensor lies in a bundle: what the index's BundleEntryProto says."""

    dtype: dtypes.DType
    shape: list[int]
    shard: int
    offset: int
    size: int
    crc32c: int  # masked

    def to_dict(self) -> dict:
        return {
            "shard": self.shard,
            "dtype": self.dtype.name,
            "shape": list(self.shape),
            "offset": self.offset,
            "size": self.size,
            "crc32c": self.crc32c,
        }


def _entry_from_dict(info: dict) -> BundleEntry:
    return BundleEntry(
        dtypes.as_dtype(info["dtype"]),
        [int(d) for d in info["shape"]],
        int(info["shard"]),
        int(info["offset"]),
        int(info["size"]),
        int(info["crc32c"]),
    )


def _tensor_bytes(arr: np.ndarray) -> tuple[bytes, int]:
    """A tensor's bytes in a data shard (see the note above) and their masked CRC-32C.

    For strings TF's checksum runs over each length as a little-endian uint32 (not over
    the varints written), then the 4 length-checksum bytes, then the elements' bytes.
    """
    dt = dtypes.as_dtype(arr.dtype)
    if dt == dtypes.string:
        items = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
        lengths = bytearray()
        for item in items:
            _put_varint(lengths, len(item))
        crc = crc32c_mod.crc32c(struct.pack(f"<{len(items)}I", *map(len, items)))
        check = struct.pack("<I", _mask(crc))
        crc = crc32c_mod.extend(crc, check)
        body = b"".join(items)
        return bytes(lengths) + check + body, _mask(crc32c_mod.extend(crc, body))
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    raw = arr.tobytes()
    return raw, _mask(crc32c_mod.crc32c(raw))


_WRITE_CHUNK = 64 << 20
_OVERLAP_BYTES = 8 << 20  # above this, CRCs run on a second thread while the data is written


def _key_bytes(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode("utf-8")


def write_data_file(path: str, tensors: dict, shard: int = 0, in_order: bool = False) -> dict:
    """Write one data shard atomically; returns {name: entry dict} for the index.

    Keys are tensor names, or a slice's key (bytes, see `slice_key`).  Tensors are laid
    out in key order, or in the dict's order with `in_order` (TF's BundleWriter writes
    them in the order SaveV2 lists them).  Numbers are written straight from the
    arrays' memory (no copy) in 64 MiB pieces while another thread computes their
    CRC-32C (the GIL is free between its pieces, see crc32c.py), so checksumming overlaps
    the I/O.
    """
    names = list(tensors) if in_order else sorted(tensors, key=_key_bytes)
    planned = []  # [name, dtype, shape, buffer, masked crc or None]
    for name in names:
        arr = np.asarray(tensors[name])
        dt = dtypes.as_dtype(arr.dtype)
        if dt == dtypes.string:
            raw, crc = _tensor_bytes(arr)
            planned.append([name, dt, list(arr.shape), memoryview(raw), crc])
            continue
        flat = np.ascontiguousarray(arr).reshape(-1)
        if flat.dtype.byteorder == ">" or (flat.dtype.byteorder == "=" and sys.byteorder == "big"):
            flat = flat.astype(flat.dtype.newbyteorder("<"))
        planned.append([name, dt, list(arr.shape), memoryview(flat.view(np.uint8)), None])
    crc_of = crc32c_mod.crc32c_gil_free() or crc32c_mod.crc32c

    def checksum():
        for p in planned:
            if p[4] is None:
                p[4] = _mask(crc_of(p[3]))

    def body(f):
        big = sum(p[3].nbytes for p in planned) >= _OVERLAP_BYTES
        worker = threading.Thread(target=checksum, name="asyncflow-crc") if big else None
        if worker is not None:
            worker.start()
        else:
            checksum()
        try:
            for p in planned:
                buf = p[3]
                for start in range(0, buf.nbytes, _WRITE_CHUNK):
                    f.write(buf[start : start + _WRITE_CHUNK])
        finally:
            if worker is not None:
                worker.join()

    atomic_write(path, body)
    entries, offset = {}, 0
    for name, dt, shape, buf, crc in planned:
        entries[name] = BundleEntry(dt, shape, shard, offset, buf.nbytes, crc).to_dict()
        offset += buf.nbytes
    return entries


def encode_index(num_shards: int, tensors: dict[str, dict]) -> bytes:
    """The V2 `.index` table for `tensors`: {name: entry dict from write_data_file}."""
    header = BundleHeaderProto(num_shards=num_shards, endianness=BundleHeaderProto.LITTLE)
    header.version.producer = BUNDLE_VERSION
    items = [(b"", header.SerializeToString())]
    for name, info in tensors.items():
        if "slices" not in info:
            items.append((_key_bytes(name), _entry_proto(info).SerializeToString()))
            continue
        # TF's whole-tensor entry of a sliced tensor: dtype, shape and the slices' extents.
        whole = BundleEntryProto(dtype=dtypes.as_dtype(info["dtype"]).as_datatype_enum)
        whole.shape.SetInParent()
        for d in info["shape"]:
            whole.shape.dim.add(size=d)
        for part in info["slices"]:
            extent = whole.slices.add()
            for start, length in zip(part["start"], part["key_lengths"], strict=True):
                e = extent.extent.add()
                if length != -1:
                    e.start, e.length = start, length
            key = slice_key(name, part["start"], part["key_lengths"])
            items.append((key, _entry_proto(part["entry"]).SerializeToString()))
        items.append((_key_bytes(name), whole.SerializeToString()))
    items[1:] = sorted(items[1:], key=lambda kv: kv[0])
    return encode_table(items)


def _entry_proto(info: dict) -> BundleEntryProto:
    e = _entry_from_dict(info)
    proto = BundleEntryProto(
        dtype=e.dtype.as_datatype_enum, shard_id=e.shard, offset=e.offset, size=e.size,
        crc32c=e.crc32c,
    )  # fmt: skip
    proto.shape.SetInParent()
    for d in e.shape:
        proto.shape.dim.add(size=d)
    return proto


def parse_slice_spec(spec: str) -> tuple[list[int], list[int], list[int]]:
    """(full shape, starts, lengths) of a SaveV2 shape_and_slices string such as
    "10 3 0,4:-" (a length of -1: the whole dimension).

    Raises:
      InvalidArgumentError: a malformed spec, or a slice outside the shape.
    """

    def bad(why):
        return errors.InvalidArgumentError(None, None, f"Bad shape_and_slice {spec!r}: {why}")

    *dims, slices = spec.split(" ")
    try:
        full = [int(d) for d in dims]
    except ValueError:
        raise bad("dimensions are not integers") from None
    parts = slices.split(":")
    if len(parts) != len(full) or any(d < 0 for d in full):
        raise bad(f"{len(parts)} slice extents for {len(full)} dimensions")
    starts, lengths = [], []
    for part, dim in zip(parts, full, strict=True):
        if part == "-":
            starts.append(0)
            lengths.append(-1)
            continue
        try:
            start, length = (int(x) for x in part.split(","))
        except ValueError:
            raise bad(f"extent {part!r} is not 'start,length' or '-'") from None
        if start < 0 or length < 0 or start + length > dim:
            raise bad(f"extent {part!r} lies outside a dimension of {dim}")
        starts.append(start)
        lengths.append(length)
    return full, starts, lengths


# Partitioned variables: TF saves the whole tensor's entry with `slices` (one
# TensorSliceProto per part) and each part under a key built with OrderedCode (TF's
# checkpoint::EncodeTensorNameSlice): NumIncreasing(0), String(name), NumIncreasing(rank),
# then SignedNumIncreasing(start), SignedNumIncreasing(length) per dimension (length -1:
# the whole dimension).  Such keys start with a zero byte; readers look them up from the
# whole tensor's entry and assemble it.

_SIGNED_HEADER = {1: (0x80, 0), 2: (0xC0, 0), 3: (0xE0, 0), 4: (0xF0, 0), 5: (0xF8, 0),
                  6: (0xFC, 0), 7: (0xFE, 0), 8: (0xFF, 0), 9: (0xFF, 0x80),
                  10: (0xFF, 0xC0)}  # fmt: skip


def _num_increasing(v: int) -> bytes:
    body = v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""
    return bytes([len(body)]) + body


def _signed_num_increasing(v: int) -> bytes:
    x = ~v if v < 0 else v
    n = x.bit_length() // 7 + 1
    full = (b"\xff\xff" if v < 0 else b"\x00\x00") + (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
    out = bytearray(full[10 - n :])
    h0, h1 = _SIGNED_HEADER[n]
    out[0] ^= h0
    if n > 1:
        out[1] ^= h1
    return bytes(out)


def slice_key(name: str, starts: list[int], lengths: list[int]) -> bytes:
    """The index key of one saved slice of tensor `name` (-1 length: whole dimension)."""
    escaped = name.encode("utf-8").replace(b"\x00", b"\x00\xff").replace(b"\xff", b"\xff\x00")
    out = b"\x00" + escaped + b"\x00\x01" + _num_increasing(len(starts))
    for start, length in zip(starts, lengths, strict=True):
        out += _signed_num_increasing(start) + _signed_num_increasing(length)
    return out


def _slice_entries(name, proto, shape, slice_items: dict, filename: str, n: int) -> list[dict]:
    parts = []
    for sl in proto.slices:
        if len(sl.extent) != len(shape):
            raise _data_loss(filename, f"a slice of '{name}' has the wrong rank")
        starts, lengths, key_lengths = [], [], []
        for ext, dim in zip(sl.extent, shape, strict=True):
            full = not ext.HasField("length")
            start, length = (0, dim) if full else (ext.start, ext.length)
            if start < 0 or length < 0 or start + length > dim:
                raise _data_loss(filename, f"a slice of '{name}' lies outside its shape")
            starts.append(start)
            lengths.append(length)
            key_lengths.append(-1 if full else length)
        raw = slice_items.get(slice_key(name, starts, key_lengths))
        if raw is None:
            raise _data_loss(filename, f"a slice of '{name}' has no entry")
        try:
            part = BundleEntryProto.FromString(raw)
        except _pb_message.DecodeError as e:
            raise _data_loss(filename, f"bad slice entry of '{name}' ({e})") from None
        if part.dtype != proto.dtype or [d.size for d in part.shape.dim] != lengths:
            raise _data_loss(filename, f"a slice of '{name}' does not match its extent")
        info = _plain_entry(f"{name} (slice)", part, lengths, filename, n)
        parts.append(
            {"start": starts, "length": lengths, "key_lengths": key_lengths, "entry": info}
        )
    # Coverage is checked when the whole tensor is read: one shard's index, before a
    # merge, lists only the slices that shard holds.
    return parts


def _check_coverage(filename: str, name: str, info: dict) -> None:
    covered = np.zeros(info["shape"], dtype=np.uint8) if info["shape"] else None
    volume = 0
    for part in info["slices"]:
        volume += int(np.prod(part["length"], dtype=object))
        if covered is not None and covered.size <= (1 << 24):
            index = tuple(slice(a, a + k) for a, k in zip(part["start"], part["length"]))
            covered[index] += 1
    whole = int(np.prod(info["shape"], dtype=object))
    if volume != whole or (covered is not None and covered.size <= (1 << 24) and
                           (covered != 1).any()):  # fmt: skip
        raise _data_loss(filename, f"the slices of '{name}' do not cover it exactly once")


def parse_bundle_index(raw: bytes, filename: str) -> dict:
    """{"format": "bundle", "num_shards", "tensors": {name: entry dict}} from a `.index`.

    Raises:
      DataLossError: a malformed table, header or entry.
      UnimplementedError: a big-endian bundle.
    """
    items = decode_table(raw, filename)
    if not items or items[0][0] != b"":
        raise _data_loss(filename, "no bundle header")
    try:
        header = BundleHeaderProto.FromString(items[0][1])
    except _pb_message.DecodeError as e:
        raise _data_loss(filename, f"bad bundle header ({e})") from None
    n = header.num_shards
    if not 1 <= n <= 99999:
        raise _data_loss(filename, f"bad num_shards {n}")
    if header.endianness != BundleHeaderProto.LITTLE:
        raise errors.UnimplementedError(None, None, f"{filename}: big-endian bundles")
    tensors: dict[str, dict] = {}
    slice_items = {k: v for k, v in items[1:] if k[:1] == b"\x00"}
    for key, value in items[1:]:
        if key[:1] == b"\x00":
            continue  # a slice: read through its whole tensor's entry
        try:
            name = key.decode("utf-8")
            proto = BundleEntryProto.FromString(value)
        except (UnicodeDecodeError, _pb_message.DecodeError) as e:
            raise _data_loss(filename, f"bad entry for key {key!r} ({e})") from None
        shape = [d.size for d in proto.shape.dim]
        if proto.shape.unknown_rank or any(d < 0 for d in shape):
            raise _data_loss(filename, f"tensor '{name}' has an unknown shape")
        if proto.slices:
            info = _plain_entry(name, proto, shape, filename, n, sliced=True)
            info["slices"] = _slice_entries(name, proto, shape, slice_items, filename, n)
        else:
            info = _plain_entry(name, proto, shape, filename, n)
        tensors[name] = info
    return {"format": "bundle", "num_shards": n, "tensors": tensors}


def _plain_entry(name, proto, shape, filename, num_shards, sliced=False) -> dict:
    """The entry dict of one BundleEntryProto, its location and size checked."""
    try:
        dt = dtypes.as_dtype(proto.dtype)
    except TypeError:
        raise _data_loss(filename, f"tensor '{name}' has dtype {proto.dtype}") from None
    bad_shard = num_shards is not None and not 0 <= proto.shard_id < num_shards
    if bad_shard or proto.shard_id < 0 or proto.offset < 0 or proto.size < 0:
        raise _data_loss(filename, f"tensor '{name}' has a bad location")
    if dt != dtypes.string and not sliced:
        want = int(np.prod(shape, dtype=object)) * np.dtype(dt.as_numpy_dtype).itemsize
        if want != proto.size:
            raise _data_loss(filename, f"tensor '{name}' has {proto.size} bytes, not {want}")
    return BundleEntry(dt, shape, proto.shard_id, proto.offset, proto.size, proto.crc32c).to_dict()


def decode_bundle_tensor(info: dict, raw: bytes, filename: str) -> np.ndarray:
    """The array of one bundle entry from its `raw` bytes (CRC checked)."""
    e = _entry_from_dict(info)
    if len(raw) != e.size:
        raise _data_loss(filename, f"truncated: {len(raw)} of {e.size} bytes")
    count = int(np.prod(e.shape, dtype=object))
    if e.dtype != dtypes.string:
        if _mask(crc32c_mod.crc32c(raw)) != e.crc32c:
            raise _data_loss(filename, "tensor checksum mismatch")
        arr = np.frombuffer(raw, dtype=np.dtype(e.dtype.as_numpy_dtype).newbyteorder("<"))
        return arr.astype(e.dtype.as_numpy_dtype).reshape(e.shape)
    if count > len(raw):  # each element takes at least one length byte
        raise _data_loss(filename, "string tensor larger than its bytes")
    pos, lengths = 0, []
    for _ in range(count):
        n, pos = _get_varint(raw, pos, len(raw), filename)
        lengths.append(n)
    if pos + 4 > len(raw):
        raise _data_loss(filename, "string tensor truncated")
    if any(n > 0xFFFFFFFF for n in lengths):
        raise _data_loss(filename, "string element longer than 4 GiB")
    crc = crc32c_mod.crc32c(struct.pack(f"<{count}I", *lengths))
    (check,) = struct.unpack_from("<I", raw, pos)
    if check != _mask(crc):
        raise _data_loss(filename, "string lengths checksum mismatch")
    pos += 4
    if pos + sum(lengths) != len(raw):
        raise _data_loss(filename, "string lengths do not match the tensor's bytes")
    crc = crc32c_mod.extend(crc32c_mod.extend(crc, raw[pos - 4 : pos]), raw[pos:])
    if _mask(crc) != e.crc32c:
        raise _data_loss(filename, "tensor checksum mismatch")
    out = np.empty(count, dtype=object)
    for i, n in enumerate(lengths):
        out[i] = raw[pos : pos + n]
        pos += n
    return out.reshape(e.shape)


def _read_range(f, size: int, info: dict, filename: str) -> bytes:
    if info["offset"] + info["size"] > size:
        raise _data_loss(filename, "tensor lies past the end of the data file")
    f.seek(info["offset"])
    return f.read(info["size"])


_DATA_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")


def _read_sliced(filename: str, index: dict, name: str) -> np.ndarray:
    """A partitioned tensor assembled from its slices (each maybe in another shard);
    the whole tensor is allocated only once its slices have been read and checked."""
    info = index["tensors"][name]
    _check_coverage(filename, name, info)
    prefix = _DATA_SUFFIX.sub("", filename)
    parts = []
    for part in info["slices"]:
        e = part["entry"]
        path = data_path(prefix, e["shard"], index["num_shards"])
        try:
            with open(path, "rb") as f:
                raw = _read_range(f, os.fstat(f.fileno()).st_size, e, path)
        except FileNotFoundError:
            raise _not_found(path) from None
        parts.append((part, decode_bundle_tensor(e, raw, path)))
    dt = dtypes.as_dtype(info["dtype"])
    out = np.empty(info["shape"], dtype=dt.as_numpy_dtype)
    for part, arr in parts:
        index_ = tuple(slice(a, a + n) for a, n in zip(part["start"], part["length"], strict=True))
        out[index_] = arr
    return out


def read_shard_tensors(filename: str, index: dict, names) -> dict:
    """{name: array} for `names` of one data shard of a checkpoint (blocking)."""
    if index.get("format") != "bundle":
        return read_tensors(filename, names)
    out = {}
    try:
        with open(filename, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            for name in names:
                info = index["tensors"][name]
                if "slices" in info:
                    out[name] = _read_sliced(filename, index, name)
                    continue
                raw = _read_range(f, size, info, filename)
                out[name] = decode_bundle_tensor(info, raw, filename)
    except FileNotFoundError:
        raise _not_found(filename) from None
    return out


async def aread_shard_tensors(filename: str, index: dict, names) -> dict:
    """`read_shard_tensors` for the event loop: aiofiles reads, big CRCs on a worker."""
    if index.get("format") != "bundle":
        return (await aread_tensors(filename, names))[1]
    loop = asyncio.get_running_loop()
    out = {}
    try:
        size = (await aiofiles.os.stat(filename)).st_size
        async with aiofiles.open(filename, "rb") as f:
            for name in names:
                info = index["tensors"][name]
                if "slices" in info:
                    out[name] = await loop.run_in_executor(
                        None, _read_sliced, filename, index, name
                    )
                    continue
                if info["offset"] + info["size"] > size:
                    raise _data_loss(filename, "tensor lies past the end of the data file")
                await f.seek(info["offset"])
                raw = await f.read(info["size"])
                if len(raw) > (1 << 20):
                    out[name] = await loop.run_in_executor(
                        None, decode_bundle_tensor, info, raw, filename
                    )
                else:
                    out[name] = decode_bundle_tensor(info, raw, filename)
    except FileNotFoundError:
        raise _not_found(filename) from None
    return out


# -- the index -----------------------------------------------------------------------


def index_path(prefix: str) -> str:
    return prefix + ".index"


def data_path(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def parse_index(raw: bytes, filename: str) -> dict:
    """The index of a checkpoint: TF's V2 table (see parse_bundle_index), or the JSON
    index of asyncflow's former safetensors layout ({"format": "safetensors", ...}).

    Raises:
      DataLossError: neither, or inconsistent.
    """
    if raw[:1] != b"{":
        return parse_bundle_index(raw, filename)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _data_loss(filename, f"index is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT:
        raise _data_loss(filename, "not an asyncflow checkpoint index")
    n = doc.get("num_shards")
    tensors = doc.get("tensors")
    if not isinstance(n, int) or not 1 <= n <= 99999 or not isinstance(tensors, dict):
        raise _data_loss(filename, "bad num_shards or tensors")
    for name, info in tensors.items():
        try:
            ok = 0 <= info["shard"] < n
            dtypes.as_dtype(info["dtype"])
            ok = ok and isinstance(info["shape"], list)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise _data_loss(filename, f"bad index entry for tensor '{name}'")
    return {"format": "safetensors", "num_shards": n, "tensors": tensors}


def _check_index_size(filename: str, size: int) -> None:
    if size > MAX_HEADER_BYTES:
        raise _data_loss(filename, f"index of {size} bytes is larger than {MAX_HEADER_BYTES}")


def read_index(prefix: str) -> dict:
    """Blocking read of `prefix`.index.  Raises NotFoundError, DataLossError."""
    filename = index_path(prefix)
    try:
        with open(filename, "rb") as f:
            _check_index_size(filename, os.fstat(f.fileno()).st_size)
            return parse_index(f.read(), filename)
    except (FileNotFoundError, NotADirectoryError):
        raise _not_found(prefix) from None


async def aread_index(prefix: str) -> dict:
    filename = index_path(prefix)
    try:
        _check_index_size(filename, (await aiofiles.os.stat(filename)).st_size)
        async with aiofiles.open(filename, "rb") as f:
            return parse_index(await f.read(), filename)
    except (FileNotFoundError, NotADirectoryError):
        raise _not_found(prefix) from None


# -- atomic writes -------------------------------------------------------------------


def fsync_dir(dirname: str) -> None:
    try:
        fd = os.open(dirname or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories
    finally:
        os.close(fd)


# Files are created with the permissions the user's umask gives (TF: 0644 under the usual
# 022), not mkstemp's 0600.  Read once: os.umask can only be read by setting it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK
_TMP_MARK = ".tmp"


def _tmp_prefix(path: str) -> str:
    """Temporary files are "<name>.tmp<pid>-<random>": the pid says whether a leftover
    belongs to a process that died mid-write."""
    return f"{os.path.basename(path)}{_TMP_MARK}{os.getpid()}-"


def remove_stale_tmp_files(path: str) -> None:
    """Delete the temporary files of writes to `path` whose process is gone (a crash
    mid-write leaves one; the next save of the same file removes it)."""
    dirname = os.path.dirname(path) or "."
    head = os.path.basename(path) + _TMP_MARK
    try:
        names = [n for n in os.listdir(dirname) if n.startswith(head)]
    except OSError:
        return
    for name in names:
        pid, sep, _ = name[len(head) :].partition("-")
        if not sep or not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(dirname, name))
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _mkstemp(path: str) -> tuple[int, str]:
    dirname = os.path.dirname(path) or "."
    remove_stale_tmp_files(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path), dir=dirname)
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{dirname}; No such file or directory") from None
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        pass
    return fd, tmp


def atomic_write(path: str, data) -> None:
    """Write `data` (bytes, or a callable taking the open file) to `path` atomically.

    Blocking.  Raises NotFoundError when the directory does not exist.
    """
    dirname = os.path.dirname(path) or "."
    fd, tmp = _mkstemp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(dirname)


async def aatomic_write(path: str, data: bytes) -> None:
    """`atomic_write` for the event loop: aiofiles writes, fsync and rename on a worker."""
    loop = asyncio.get_running_loop()
    dirname = os.path.dirname(path) or "."
    fd, tmp = await loop.run_in_executor(None, _mkstemp, path)
    os.close(fd)
    try:
        async with aiofiles.open(tmp, "wb") as f:
            await f.write(data)
            await f.flush()
            await loop.run_in_executor(None, os.fsync, f.fileno())
        await aiofiles.os.replace(tmp, path)
    except BaseException:
        try:
            await aiofiles.os.remove(tmp)
        except OSError:
            pass
        raise
    await loop.run_in_executor(None, fsync_dir, dirname)
