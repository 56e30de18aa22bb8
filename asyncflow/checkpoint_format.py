"""The checkpoint byte formats: safetensors data files, the JSON index, atomic writes.

A checkpoint with prefix P is
  P.index                       JSON: {"format", "version", "num_shards",
                                "tensors": {name: {"shard", "dtype", "shape"}}}
  P.data-00000-of-0000N         one safetensors file per shard.
The index is written last, so its presence marks a complete checkpoint.

A data file is exactly the safetensors format: an 8-byte little-endian header length,
a JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}} padded with spaces to a multiple of 8, then the tensors' raw little-endian
bytes, contiguous, in header order.  Tensors are laid out as the `safetensors`
package lays them out (widest dtype first, then by name), so for the dtypes it knows
the bytes equal `safetensors.numpy.save(tensors, metadata)`.

What safetensors cannot express travels in `__metadata__["asyncflow"]`, a JSON string
{name: {"dtype": <asyncflow dtype name>, "shape": [...], "crc32": "<8 hex digits>"}}:
- the CRC32 (zlib) of every tensor's stored bytes;
- string tensors, stored as one "U8" entry: N little-endian int64 lengths followed by
  the N byte strings, for the N elements in row-major order;
- complex128, stored as "F64" with a trailing dimension of 2 (real, imaginary).
Bool is safetensors' own "BOOL" (one byte, 0 or 1).

Invariants:
- Readers bound every size read from a file before allocating: the header length is at
  most `MAX_HEADER_BYTES` and inside the file; every entry's byte range lies inside the
  data, ranges are contiguous, and the file ends where the data does.
- Every defect (truncation, bad JSON, overlapping ranges, CRC mismatch, inconsistent
  string lengths) raises `errors.DataLossError` naming the file.
- Writers write a temporary file in the same directory, fsync it, rename it over the
  target and fsync the directory, so a crash leaves the old file or the new one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import zlib
from dataclasses import dataclass
from typing import Any

import aiofiles
import aiofiles.os
import numpy as np

from asyncflow import dtypes, errors

__all__ = [
    "MAX_HEADER_BYTES",
    "INDEX_FORMAT",
    "TensorEntry",
    "DataHeader",
    "encode_file",
    "parse_header",
    "decode_tensor",
    "write_data_file",
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
# The order of the safetensors package's Dtype enum (it sorts tensors by it).
_ST_RANK = {
    name: i
    for i, name in enumerate("BOOL U8 I8 I16 U16 F16 BF16 I32 U32 F32 C64 F64 I64 U64".split())
}
_ST_DEFAULT_DTYPE = {  # a file without our metadata: the safetensors dtype decides
    "BOOL": dtypes.bool_, "U8": dtypes.uint8, "I8": dtypes.int8, "I16": dtypes.int16,
    "U16": dtypes.uint16, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
    "I32": dtypes.int32, "U32": dtypes.uint32, "F32": dtypes.float32, "I64": dtypes.int64,
    "U64": dtypes.uint64, "F64": dtypes.float64, "C64": dtypes.complex64,
}  # fmt: skip
_WRITE_CHUNK = 64 << 20


def _data_loss(filename: str, what: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Checkpoint file {filename} is corrupted: {what}")


# -- encoding ------------------------------------------------------------------------


def _to_bytes_view(arr: np.ndarray) -> tuple[str, list[int], Any]:
    """(safetensors dtype, stored shape, buffer) for one array, without copying if possible."""
    dt = dtypes.as_dtype(arr.dtype)
    if dt == dtypes.string:
        flat = [b if isinstance(b, bytes) else str(b).encode() for b in arr.reshape(-1).tolist()]
        lengths = np.asarray([len(b) for b in flat], dtype="<i8")
        blob = lengths.tobytes() + b"".join(flat)
        return "U8", [len(blob)], memoryview(blob)
    if dt not in _ST_NAMES:
        raise errors.InvalidArgumentError(None, None, f"Cannot save a tensor of type {dt.name}")
    shape = list(arr.shape)
    arr = np.ascontiguousarray(arr)  # note: 0-d becomes 1-d here
    if sys.byteorder != "little" and arr.dtype.itemsize > 1:
        arr = arr.byteswap()
    if dt == dtypes.complex128:
        shape.append(2)
    if arr.dtype == np.bool_:
        arr = arr.view(np.uint8)
    return _ST_NAMES[dt], shape, memoryview(arr.reshape(-1)).cast("B")


@dataclass
class _Planned:
    name: str
    st_dtype: str
    shape: list[int]
    buf: Any
    meta: dict


def _plan(tensors: dict[str, np.ndarray]) -> list[_Planned]:
    planned = []
    for name, value in tensors.items():
        arr = np.asarray(value)
        st, shape, buf = _to_bytes_view(arr)
        meta = {"dtype": dtypes.as_dtype(arr.dtype).name, "shape": list(arr.shape)}
        planned.append(_Planned(name, st, shape, buf, meta))
    # The safetensors package's order: its Dtype enum descending, then by name.
    planned.sort(key=lambda p: (-_ST_RANK[p.st_dtype], p.name))
    return planned


def _header_bytes(planned: list[_Planned], crcs: list[int], metadata: dict | None) -> bytes:
    ours = {}
    for p, crc in zip(planned, crcs, strict=True):
        ours[p.name] = dict(p.meta, crc32=f"{crc:08x}")
    meta = dict(metadata or {})
    meta[_META_KEY] = json.dumps(ours, separators=(",", ":"), ensure_ascii=False)
    header: dict[str, Any] = {"__metadata__": meta}
    offset = 0
    for p in planned:
        n = p.buf.nbytes
        header[p.name] = {
            "dtype": p.st_dtype,
            "shape": p.shape,
            "data_offsets": [offset, offset + n],
        }
        offset += n
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


def encode_file(tensors: dict[str, np.ndarray], metadata: dict | None = None) -> bytes:
    """The whole safetensors file for `tensors` as bytes (for small files and tests)."""
    planned = _plan(tensors)
    crcs = [zlib.crc32(p.buf) for p in planned]
    return b"".join([_header_bytes(planned, crcs, metadata)] + [bytes(p.buf) for p in planned])


def write_data_file(path: str, tensors: dict[str, np.ndarray], metadata=None) -> None:
    """Write `tensors` to `path` atomically (blocking: run it on a worker thread).

    The header's CRC fields have a fixed width, so the header is written with
    placeholders, the data streamed while another thread computes the CRCs (zlib
    releases the GIL), and the header rewritten in place: checksumming overlaps I/O.
    """
    planned = _plan(tensors)
    placeholder = _header_bytes(planned, [0] * len(planned), metadata)
    crcs: list[int] = [0] * len(planned)

    def checksum():
        for i, p in enumerate(planned):
            crcs[i] = zlib.crc32(p.buf)

    def body(f):
        big = sum(p.buf.nbytes for p in planned) >= (8 << 20)
        worker = threading.Thread(target=checksum, name="asyncflow-crc") if big else None
        if worker is not None:
            worker.start()
        else:
            checksum()
        try:
            f.write(placeholder)
            for p in planned:
                for start in range(0, p.buf.nbytes, _WRITE_CHUNK):
                    f.write(p.buf[start : start + _WRITE_CHUNK])
        finally:
            if worker is not None:
                worker.join()
        header = _header_bytes(planned, crcs, metadata)
        assert len(header) == len(placeholder)
        f.seek(0)
        f.write(header)

    atomic_write(path, body)


# -- decoding ------------------------------------------------------------------------


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


# -- the index -----------------------------------------------------------------------


def index_path(prefix: str) -> str:
    return prefix + ".index"


def data_path(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def encode_index(num_shards: int, tensors: dict[str, dict]) -> bytes:
    """`tensors`: {name: {"shard", "dtype", "shape"}}."""
    doc = {"format": INDEX_FORMAT, "version": 1, "num_shards": num_shards, "tensors": tensors}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def parse_index(raw: bytes, filename: str) -> dict:
    """The validated index document.

    Raises:
      DataLossError: not a JSON index, or inconsistent shard numbers.
    """
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
    return doc


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
