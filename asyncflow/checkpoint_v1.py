"""TF's V1 checkpoint format: one table file of saved tensor slices, read and written.

TF1's Saver wrote it before the V2 bundle (`write_version=SaverDef.V1`; the pretrained
slim checkpoints are V1).  A V1 checkpoint is one table file (checkpoint_format's
`encode_table` / `decode_table`), or several whose names match a pattern
("model.ckpt-?????-of-00002"):
  key ""                        SavedTensorSlices{meta}: per tensor its name, full
                                shape, dtype and the slices of it the file holds;
  key slice_key(name, slice)    SavedTensorSlices{data}: one slice's values, in the
                                typed fields of a TensorProto (float_val, int_val, ...).

Invariants:
- Nothing is allocated from a size the file states before the values are there: a
  tensor's slices must cover its shape exactly once and each slice's data must hold
  exactly the slice's element count (so an array is never larger than the values
  parsed from the file).
- Every defect (not a table, checksum, malformed protos, missing or mismatched
  slices) raises `errors.DataLossError` naming the file.
- `encode` writes what TF's TensorSliceWriter writes for the same tensors, byte for
  byte: the meta lists tensors in the order first added, slices in order added.
"""

from __future__ import annotations

import glob
import os

import numpy as np
from google.protobuf import message as _pb_message

from asyncflow import checkpoint_format as cf
from asyncflow import dtypes, errors
from asyncflow.protos.saved_tensor_slice_pb2 import SavedTensorSlices
from asyncflow.protos.tensor_pb2 import TensorProto

__all__ = ["matching_files", "read_meta", "read_tensors", "read", "encode", "V1Tensor"]

# The version TF's TensorSliceWriter stamps on the meta (VersionDef.producer).
_PRODUCER = 1

# dtype -> the TensorProto field TF keeps a slice's values in
_FIELD = {
    "float32": "float_val",
    "float64": "double_val",
    "int32": "int_val",
    "int16": "int_val",
    "int8": "int_val",
    "uint8": "int_val",
    "uint16": "int_val",
    "qint8": "int_val",
    "quint8": "int_val",
    "qint16": "int_val",
    "quint16": "int_val",
    "qint32": "int_val",
    "int64": "int64_val",
    "uint32": "uint32_val",
    "uint64": "uint64_val",
    "bool": "bool_val",
    "string": "string_val",
    "complex64": "scomplex_val",
    "complex128": "dcomplex_val",
    "float16": "half_val",
    "bfloat16": "half_val",
}


def _loss(filename: str, what: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Checkpoint file {filename} is corrupted: {what}")


class V1Tensor:
    """One tensor of a V1 checkpoint: dtype, full shape, and its slices as
    (starts, lengths, file, key) (lengths in full: a whole dimension's is its size)."""

    __slots__ = ("name", "dtype", "shape", "slices")

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.slices: list[tuple[list[int], list[int], str, bytes]] = []

    @property
    def is_sliced(self) -> bool:
        return any(lengths != self.shape for _, lengths, _, _ in self.slices)


def matching_files(pattern: str) -> list[str]:
    """The files a V1 file pattern names (itself when it is a file), sorted."""
    if os.path.isfile(pattern):
        return [pattern]
    if glob.has_magic(pattern):
        return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    return []


def _table(filename: str) -> dict[bytes, bytes]:
    """The entries of one V1 file.  (TF's table reader names a short file or a bad
    magic number this way; asyncflow also verifies block checksums.)"""
    with open(filename, "rb") as f:
        data = f.read()
    if len(data) < 48:
        raise errors.DataLossError(
            None,
            None,
            f"Unable to open table file {filename}: DATA_LOSS: file is too short to be an "
            "sstable: perhaps your file is in a different file format and you need to use "
            "a different restore operator?",
        )
    if int.from_bytes(data[-8:], "little") != 0xDB4775248B80FB57:
        raise errors.DataLossError(
            None,
            None,
            f"Unable to open table file {filename}: DATA_LOSS: not an sstable (bad magic "
            "number): perhaps your file is in a different file format and you need to use "
            "a different restore operator?",
        )
    return dict(cf.decode_table(data, filename))


def _parse(raw: bytes, filename: str) -> SavedTensorSlices:
    try:
        return SavedTensorSlices.FromString(raw)
    except _pb_message.DecodeError as e:
        raise _loss(filename, f"malformed saved tensor slices ({e})") from None


def _extent(sl, shape, filename, name) -> tuple[list[int], list[int], list[int]]:
    """(starts, lengths, key lengths: -1 for a whole dimension) of a TensorSliceProto."""
    if len(sl.extent) != len(shape):
        raise _loss(filename, f"a slice of '{name}' has the wrong rank")
    starts, lengths, key_lengths = [], [], []
    for ext, dim in zip(sl.extent, shape, strict=True):
        whole = not ext.HasField("length")
        start, length = (0, dim) if whole else (ext.start, ext.length)
        if start < 0 or length < 0 or start + length > dim:
            raise _loss(filename, f"a slice of '{name}' lies outside its shape")
        starts.append(start)
        lengths.append(length)
        key_lengths.append(-1 if whole else length)
    return starts, lengths, key_lengths


def read_meta(files: list[str]) -> tuple[dict[str, V1Tensor], dict[str, dict]]:
    """({name: V1Tensor}, {file: its entries}) of the V1 checkpoint made of `files`.

    Raises:
      DataLossError: a file that is not a V1 checkpoint, or damaged.
    """
    tensors: dict[str, V1Tensor] = {}
    tables = {}
    for filename in files:
        table = tables[filename] = _table(filename)
        head = table.get(b"")
        if head is None:
            raise _loss(filename, "no saved tensor slices at the beginning of the file")
        meta = _parse(head, filename)
        if not meta.HasField("meta"):
            raise _loss(filename, "no saved tensor slices at the beginning of the file")
        for m in meta.meta.tensor:
            try:
                dtype = dtypes.as_dtype(m.type)
            except (TypeError, ValueError, KeyError):
                raise _loss(filename, f"tensor '{m.name}' has unknown dtype {m.type}") from None
            shape = [d.size for d in m.shape.dim]
            if any(d < 0 for d in shape):
                raise _loss(filename, f"tensor '{m.name}' has a negative dimension")
            t = tensors.get(m.name)
            if t is None:
                t = tensors[m.name] = V1Tensor(m.name, dtype, shape)
            elif t.dtype != dtype or t.shape != shape:
                raise _loss(filename, f"the files disagree on tensor '{m.name}'")
            for sl in m.slice:
                starts, lengths, key_lengths = _extent(sl, shape, filename, m.name)
                t.slices.append(
                    (starts, lengths, filename, cf.slice_key(m.name, starts, key_lengths))
                )
    return tensors, tables


def _check_coverage(t: V1Tensor) -> None:
    whole = int(np.prod(t.shape, dtype=object))
    volume = sum(int(np.prod(lengths, dtype=object)) for _, lengths, _, _ in t.slices)
    if volume != whole:
        where = t.slices[0][2] if t.slices else "(no file)"
        raise _loss(where, f"the slices of '{t.name}' do not cover it exactly once")


def _values(proto: TensorProto, dtype: dtypes.DType, count: int, filename, name) -> np.ndarray:
    field = _FIELD.get(dtype.name)
    if field is None:
        raise errors.UnimplementedError(None, None, f"Data type {dtype.name} not supported")
    vals = getattr(proto, field)
    n = len(vals)
    if dtype.is_complex:
        n //= 2
    if n != count:
        raise _loss(filename, f"a slice of '{name}' holds {n} values, not {count}")
    if dtype == dtypes.string:
        out = np.empty(count, dtype=object)
        out[:] = list(vals)
        return out
    if dtype.name in ("float16", "bfloat16"):
        return np.asarray(vals, dtype=np.uint16).view(dtype.as_numpy_dtype)
    if dtype.is_complex:
        parts = np.asarray(vals, dtype=np.float32 if dtype == dtypes.complex64 else np.float64)
        return parts.view(dtype.as_numpy_dtype)
    return np.asarray(vals).astype(dtype.as_numpy_dtype)


def read_tensors(tensors, tables, names) -> dict[str, np.ndarray]:
    """{name: array} of `names` (each in `tensors`), assembled from their slices.

    Raises: DataLossError (missing or damaged slices).
    """
    out = {}
    for name in names:
        t = tensors[name]
        _check_coverage(t)
        parts = []
        for starts, lengths, filename, key in t.slices:
            raw = tables[filename].get(key)
            if raw is None:
                raise _loss(filename, f"a slice of '{name}' has no entry")
            saved = _parse(raw, filename)
            count = int(np.prod(lengths, dtype=object))
            parts.append(
                (starts, lengths, _values(saved.data.data, t.dtype, count, filename, name))
            )
        np_dtype = object if t.dtype == dtypes.string else t.dtype.as_numpy_dtype
        whole = np.empty(t.shape, dtype=np_dtype)
        for starts, lengths, values in parts:
            index = tuple(slice(a, a + k) for a, k in zip(starts, lengths))
            whole[index] = values.reshape(lengths)
        out[name] = whole
    return out


def not_found(pattern: str) -> errors.NotFoundError:
    return errors.NotFoundError(
        None,
        None,
        "Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
        f"for {pattern}",
    )


def read(pattern: str, names: list[str]) -> tuple[dict, dict]:
    """({name: V1Tensor}, {name: array}) of `names` in the V1 checkpoint `pattern`.
    Blocking (run on a worker).

    Raises: NotFoundError (no file, or a name it lacks), DataLossError (damage).
    """
    files = matching_files(pattern)
    if not files:
        raise not_found(pattern)
    tensors, tables = read_meta(files)
    for name in names:
        if name not in tensors:
            raise errors.NotFoundError(
                None,
                None,
                f'Tensor name "{name}" not found in checkpoint files {pattern}',
            )
    return tensors, read_tensors(tensors, tables, names)


def _fill(proto: TensorProto, arr: np.ndarray) -> None:
    dtype = dtypes.as_dtype(arr.dtype) if arr.dtype != object else dtypes.string
    field = _FIELD.get(dtype.name)
    if field is None:
        raise errors.UnimplementedError(None, None, f"Data type {dtype.name} not supported")
    flat = arr.reshape(-1)
    if dtype == dtypes.string:
        proto.string_val.extend(x if isinstance(x, bytes) else str(x).encode() for x in flat)
    elif dtype.name in ("float16", "bfloat16"):
        proto.half_val.extend(flat.view(np.uint16).tolist())
    elif dtype.is_complex:
        getattr(proto, field).extend(np.stack([flat.real, flat.imag], -1).reshape(-1).tolist())
    else:
        getattr(proto, field).extend(flat.tolist())


def encode(items: list[tuple[str, np.ndarray, list[int], list[int], list[int]]]) -> bytes:
    """A V1 checkpoint file of `items`: (name, slice values, full shape, starts, key
    lengths (-1: whole dimension)), in the order TF's Save/SaveSlices adds them.

    Raises: InvalidArgumentError (a (name, slice) saved twice, or one name with two
    dtypes or shapes).
    """
    head = SavedTensorSlices()
    head.meta.versions.producer = _PRODUCER
    metas: dict[str, object] = {}
    entries = {}
    for name, arr, shape, starts, key_lengths in items:
        dtype = dtypes.string if arr.dtype == object else dtypes.as_dtype(arr.dtype)
        m = metas.get(name)
        if m is None:
            m = metas[name] = head.meta.tensor.add(name=name, type=dtype.as_datatype_enum)
            m.shape.SetInParent()  # (a scalar's empty shape is still written)
            for d in shape:
                m.shape.dim.add(size=d)
        elif m.type != dtype.as_datatype_enum or [d.size for d in m.shape.dim] != shape:
            raise errors.InvalidArgumentError(
                None, None, f"Slices of {name!r} disagree on the full shape or dtype"
            )
        key = cf.slice_key(name, starts, key_lengths)
        if key in entries:
            raise errors.InvalidArgumentError(
                None, None, f"Duplicate tensor name {name!r} in the checkpoint"
            )
        sl = m.slice.add()
        for start, length in zip(starts, key_lengths, strict=True):
            ext = sl.extent.add()
            if length != -1:
                ext.start, ext.length = start, length
        saved = SavedTensorSlices()
        saved.data.name = name
        saved.data.slice.SetInParent()  # (a scalar's empty slice is still written)
        saved.data.slice.CopyFrom(sl)
        _fill(saved.data.data, arr)
        entries[key] = saved.SerializeToString()
    entries[b""] = head.SerializeToString()
    return cf.encode_table(sorted(entries.items()))
