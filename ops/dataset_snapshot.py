"""tf.data's saved datasets and snapshots in TF's on-disk format (asyncflow/snapshot_format.py
has the files): SaveDataset, LoadDataset and SnapshotDatasetV2 as TF 2.21 runs them.

- SaveDataset writes every element of its input to `path/<run id>/<shard>.shard/
  00000000.snapshot` (shard 0, or `shard_func(element)`), then a finalized
  `path/snapshot.metadata` with the element count.
- LoadDataset reads `path/snapshot.metadata`, makes one dataset per shard directory
  (sorted by name) and gives `reader_func(dataset of those datasets)`'s elements.
- SnapshotDatasetV2 keeps its snapshot in `path/<hash>/`: a pass finding a finalized
  snapshot there reads it (through `reader_func`); any other pass runs the input, writing
  each element as it passes it on, and finalizes the snapshot when the input ends (a
  pass stopped early leaves an unfinished run that the next pass does not use).
- A distributed snapshot's readers (tf.data.experimental.distributed_save / load):
  SnapshotChunkDataset reads one chunk file (a TFRecord file like a shard's),
  ListSnapshotChunksDataset lists `path/chunks/` as chunks are committed until
  `path/DONE` (in TF's order), SnapshotNestedDatasetReader reads datasets in turn.
  (The v1 SnapshotDataset is ops/dataset_snapshot_v1.py.)

Files are read and written on worker threads, many elements per hop, so the loop never
waits on the disk or on encoding.
"""

from __future__ import annotations

import asyncio
import glob
import os
import random
import re
import time

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import snapshot_format as sf
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops.dataset_more import _closing, _fn, _fn_attrs
from asyncflow.registry import NotDifferentiable, register_op

__all__: list[str] = []

_FLUSH_ELEMENTS = 1024  # elements buffered per shard before a write on a worker thread
_LIST = dso._LIST


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _auto(compression: str) -> str:
    """TF's "AUTO" is SNAPPY (everywhere but mobile builds)."""
    return "SNAPPY" if compression.upper() == "AUTO" else compression


# -- reading -----------------------------------------------------------------------------------


def _read_file(path: str, compression: str, n: int) -> list | None:
    """The elements (tuples of n arrays) of one checkpoint file, None if it is missing."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}: {e}") from None
    recs = sf.decode_records(sf.decompress(data, compression))
    if n == 0 or len(recs) % n:
        raise errors.DataLossError(None, None, f"{path} holds a partial element")
    return [tuple(sf.decode_tensor(r) for r in recs[i : i + n]) for i in range(0, len(recs), n)]


class ShardReader(pl.DatasetValue):
    """The elements of one shard directory: its checkpoint files 0, 1, ... in turn."""

    def __init__(self, shard_dir: str, compression: str, types: list):
        self.dir, self.compression, self.types = shard_dir, compression, types

    def _check(self, elem: tuple) -> tuple:
        for a, dt in zip(elem, self.types):
            got = dtypes.string if a.dtype == object else dtypes.as_dtype(a.dtype)
            if got != dt:
                raise _bad(
                    f"The snapshot in {self.dir} holds {got.name} values where "
                    f"{dt.name} was expected."
                )
        return elem

    async def iterate(self, env):
        ckpt = 0
        while True:
            path = sf.checkpoint_file(self.dir, ckpt)
            elems = await pl._in_thread(_read_file, path, self.compression, len(self.types))
            if elems is None:
                return
            for e in elems:
                yield self._check(e)
            ckpt += 1


class ShardList(pl.DatasetValue):
    """A dataset of datasets, one per shard (what `reader_func` receives)."""

    def __init__(self, readers: list):
        self.readers = readers

    async def iterate(self, env):
        for r in self.readers:
            yield (dso._handle(r),)

    def cardinality(self):
        return len(self.readers)


def _shard_dirs(run_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(run_dir), "*.shard")))


async def _read_run(env, run_dir, compression, types, reader_fn):
    dirs = await pl._in_thread(_shard_dirs, run_dir)
    nested = ShardList([ShardReader(d, compression, types) for d in dirs])
    out = await reader_fn(env, (dso._handle(nested),))
    async for x in _closing(pl._dataset_of(out[0]).iterate(env)):
        yield x


def _read_metadata(directory: str) -> dict | None:
    try:
        with open(os.path.join(directory, sf.METADATA_FILE), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return sf.decode_metadata(data)


class Load(pl.DatasetValue):
    def __init__(self, path: str, metadata: dict, compression: str, types, reader_fn):
        self.path, self.md, self.compression = path, metadata, compression
        self.types, self.reader_fn = types, reader_fn

    def iterate(self, env):
        run_dir = os.path.join(self.path, self.md["run_id"])
        return _read_run(env, run_dir, self.compression, self.types, self.reader_fn)

    def cardinality(self):
        return int(self.md["num_elements"])


# -- writing -----------------------------------------------------------------------------------


class _ShardWriter:
    """One shard's checkpoint file: records encoded, compressed and appended on worker
    threads (a GZIP/ZLIB file is one stream; SNAPPY blocks are cut at fixed sizes)."""

    def __init__(self, path: str, compression: str):
        self.path, self.compression = path, (compression or "").upper()
        self.pending: list = []
        self.zstream = None
        self.tail = b""  # SNAPPY: bytes not yet making a whole block

    def _write(self, elems: list, final: bool) -> None:
        raw = sf.encode_records(sf.encode_tensor(a) for e in elems for a in e)
        c = self.compression
        if c in ("GZIP", "ZLIB"):
            if self.zstream is None:
                import zlib

                bits = zlib.MAX_WBITS + (16 if c == "GZIP" else 0)
                self.zstream = zlib.compressobj(6, zlib.DEFLATED, bits)
            data = self.zstream.compress(raw) + (self.zstream.flush() if final else b"")
        elif c == "SNAPPY":
            raw = self.tail + raw
            cut = len(raw) if final else len(raw) - len(raw) % sf._SNAPPY_BLOCK
            data, self.tail = sf.snappy_compress(raw[:cut]), raw[cut:]
        else:
            data = raw
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(data)

    async def add(self, elem: tuple) -> None:
        self.pending.append(elem)
        if len(self.pending) >= _FLUSH_ELEMENTS:
            elems, self.pending = self.pending, []
            await pl._in_thread(self._write, elems, False)

    async def close(self) -> None:
        elems, self.pending = self.pending, []
        await pl._in_thread(self._write, elems, True)


def _write_metadata(directory, run_id, types, n, finalized, graph_hash="") -> None:
    data = sf.encode_metadata(
        run_id,
        time.time_ns() // 1000,
        [dtypes.as_dtype(t).as_datatype_enum for t in types],
        n,
        finalized,
        graph_hash,
    )
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{sf.METADATA_FILE}.{run_id}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(directory, sf.METADATA_FILE))


class _Writer:
    """One run of a save or a snapshot: shards by `shard_fn` (or all in shard 0)."""

    def __init__(self, directory: str, compression: str, types, shard_fn, graph_hash=""):
        self.dir, self.compression, self.types = directory, compression, types
        self.shard_fn, self.hash = shard_fn, graph_hash
        self.run_id = str(random.SystemRandom().getrandbits(64))
        self.run_dir = os.path.join(directory, self.run_id)
        self.writers: dict[int, _ShardWriter] = {}
        self.count = 0

    async def start(self) -> None:
        await pl._in_thread(os.makedirs, self.run_dir, 0o777, True)
        await pl._in_thread(
            _write_metadata, self.dir, self.run_id, self.types, 0, False, self.hash
        )

    async def add(self, env, elem: tuple) -> None:
        shard = 0
        if self.shard_fn is not None:
            out = await self.shard_fn(env, elem)
            v = np.asarray(out[0]) if len(out) == 1 else None
            if v is None or v.dtype not in (np.int64, np.int32) or v.size != 1:
                raise _bad("`shard_func` must return a scalar int64.")
            shard = int(v.reshape(()))
        w = self.writers.get(shard)
        if w is None:
            path = sf.checkpoint_file(sf.shard_directory(self.run_dir, shard), 0)
            w = self.writers[shard] = _ShardWriter(path, self.compression)
        self.count += 1
        await w.add(elem)

    async def finish(self, num_elements: int) -> None:
        for w in self.writers.values():
            await w.close()
        await pl._in_thread(
            _write_metadata, self.dir, self.run_id, self.types, num_elements, True, self.hash
        )


# -- snapshot --------------------------------------------------------------------------------


class Snapshot(pl.DatasetValue):
    def __init__(self, input_value, path, compression, types, reader_fn, shard_fn, graph_hash):
        self.input, self.path, self.compression = input_value, path, compression
        self.types, self.reader_fn, self.shard_fn = types, reader_fn, shard_fn
        self.hash = str(graph_hash)

    async def iterate(self, env):
        hash_dir = os.path.join(self.path, self.hash)
        md = await pl._in_thread(_read_metadata, hash_dir)
        if md is not None and md["finalized"]:
            run_dir = os.path.join(hash_dir, md["run_id"])
            async for x in _read_run(env, run_dir, self.compression, self.types, self.reader_fn):
                yield x
            return
        writer = _Writer(hash_dir, self.compression, self.types, self.shard_fn, self.hash)
        await writer.start()
        async for elem in _closing(self.input.iterate(env)):
            await writer.add(env, elem)
            yield elem
        await writer.finish(0)  # (TF's snapshot metadata leaves num_elements unset)

    def cardinality(self):
        return self.input.cardinality()


# -- ops ---------------------------------------------------------------------------------------

SaveDataset = register_op(
    "SaveDataset",
    inputs=["input_dataset: string", "path: string", "shard_func_other_args: Tshard_func_args"],
    attrs={
        "compression": "",
        "use_shard_func": True,
        "Tshard_func_args": _LIST,
        **_fn_attrs("shard"),
    },
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("SaveDataset")


@SaveDataset.kernel("CPU")
async def _save(ctx, ds, path, *captured):
    env = pl.Env(ctx.session)
    value = dso._ds(ds)
    # (SaveDataset has no type attrs: the metadata's dtypes are its input dataset's)
    types = [dtypes.as_dtype(t) for t in ctx.op.inputs[0].op._attrs["output_types"]]
    shard_fn = _fn(ctx, "shard", captured) if ctx.attrs["use_shard_func"] else None
    writer = _Writer(dso._str(path), _auto(dso._str(ctx.attrs["compression"])), types, shard_fn)
    await writer.start()
    async for elem in _closing(value.iterate(env)):
        await writer.add(env, elem)
    await writer.finish(writer.count)


async def _load(ctx, path, *captured):
    p = dso._str(path)
    types = list(ctx.attrs["output_types"])
    dist_comp = await pl._in_thread(_distributed_compression, p)
    if dist_comp is not None:
        return dso._handle(LoadDistributed(p, dist_comp, types, _fn(ctx, "reader", captured)))
    md = await pl._in_thread(_read_metadata, p)
    if md is None:
        raise errors.NotFoundError(None, None, f"Could not find metadata file [{p}]")
    comp = _auto(ctx.attrs["compression"])
    return dso._handle(Load(p, md, comp, types, _fn(ctx, "reader", captured)))


async def _snapshot(ctx, ds, path, *captured):
    a = ctx.attrs
    n = len(a["Treader_func_args"])
    reader_args, shard_args = captured[:n], captured[n:]
    return dso._handle(
        Snapshot(
            dso._ds(ds),
            dso._str(path),
            _auto(a["compression"]),
            list(a["output_types"]),
            _fn(ctx, "reader", reader_args),
            _fn(ctx, "shard", shard_args),
            a["hash"],
        )
    )


dso._register(
    "LoadDataset",
    ["path: string", "reader_func_other_args: Treader_func_args"],
    {"compression": "", "Treader_func_args": _LIST, **_fn_attrs("reader")},
    _load,
)
dso._register(
    "SnapshotDatasetV2",
    [
        "input_dataset: string",
        "path: string",
        "reader_func_other_args: Treader_func_args",
        "shard_func_other_args: Tshard_func_args",
    ],
    {
        "compression": "",
        "reader_prefix": "",
        "writer_prefix": "",
        "hash_valid": False,
        "hash": 0,
        "metadata": "",
        "Treader_func_args": _LIST,
        "Tshard_func_args": _LIST,
        **_fn_attrs("reader"),
        **_fn_attrs("shard"),
    },
    _snapshot,
)


# -- SaveDatasetV2: a save as a dataset; SnapshotDatasetReader: one shard from an index ---------


class Save(pl.DatasetValue):
    """The input's elements, each written as it passes (SaveDataset's files); a pass
    that reaches the end finalizes the save with its count (TF's SaveDatasetV2)."""

    def __init__(self, input_value, path: str, compression: str, types, shard_fn):
        self.input, self.path, self.compression = input_value, path, compression
        self.types, self.shard_fn = types, shard_fn

    def cardinality(self):
        return self.input.cardinality()

    async def iterate(self, env):
        writer = _Writer(self.path, self.compression, self.types, self.shard_fn)
        await writer.start()
        async for elem in _closing(self.input.iterate(env)):
            await writer.add(env, elem)
            yield elem
        await writer.finish(writer.count)


async def _save_v2(ctx, ds, path, *captured):
    a = ctx.attrs
    shard_fn = _fn(ctx, "shard", captured) if a["use_shard_func"] else None
    comp = _auto(dso._str(a["compression"]))
    return dso._handle(Save(dso._ds(ds), dso._str(path), comp, list(a["output_types"]), shard_fn))


dso._register(
    "SaveDatasetV2",
    ["input_dataset: string", "path: string", "shard_func_other_args: Tshard_func_args"],
    {"compression": "", "use_shard_func": True, "Tshard_func_args": _LIST, **_fn_attrs("shard")},
    _save_v2,
)


class ShardFrom(pl.DatasetValue):
    """One shard directory's elements from index `start` on."""

    def __init__(self, reader: ShardReader, start: int):
        self.reader, self.start = reader, start

    async def iterate(self, env):
        k = 0
        async for elem in _closing(self.reader.iterate(env)):
            if k >= self.start:
                yield elem
            k += 1


async def _snapshot_reader(ctx, shard_dir, start_index):
    a = ctx.attrs
    if a["version"] != 2:
        raise _bad(f"Snapshot version {a['version']} is not supported; the version is 2.")
    start = int(start_index)
    if start < 0:
        raise _bad(f"start_index must be non-negative, got {start}")
    reader = ShardReader(dso._str(shard_dir), _auto(a["compression"]), list(a["output_types"]))
    return dso._handle(ShardFrom(reader, start))


dso._register(
    "SnapshotDatasetReader",
    ["shard_dir: string", "start_index: int64"],
    {"compression": "", "version": 2},
    _snapshot_reader,
)


# -- a distributed snapshot's readers (tf.data.experimental.distributed_save's files) ----------
# PATH/chunks/chunk_<stream>_<chunk>_<records>: TFRecord files of TensorProtos, as the
# shard files above; PATH/DONE once every stream is written, PATH/ERROR if one failed.

_CHUNK_POLL_SECONDS = 1.0


class Chunk(pl.DatasetValue):
    """One chunk file's elements (TF's SnapshotChunkDataset)."""

    def __init__(self, path: str, compression: str, types: list):
        self.reader = ShardReader(path, compression, types)
        self.path = path

    async def iterate(self, env):
        r = self.reader
        elems = await pl._in_thread(_read_file, self.path, r.compression, len(r.types))
        if elems is None:
            raise errors.NotFoundError(None, None, f"{self.path}; No such file or directory")
        for e in elems:
            yield r._check(e)


async def _chunk(ctx, chunk_file):
    # (as TF's: a compression it does not know, "AUTO" included, reads the file as is)
    comp = dso._str(ctx.attrs["compression"])
    comp = comp if comp.upper() in ("GZIP", "ZLIB", "SNAPPY") else ""
    return dso._handle(Chunk(dso._str(chunk_file), comp, list(ctx.attrs["output_types"])))


def _chunk_key(name: str) -> tuple:
    """TF's order: chunk index, then stream index; names it cannot parse after, by name."""
    parts = name.split("_")
    if len(parts) == 4 and parts[0] == "chunk" and all(p.isdigit() for p in parts[1:]):
        return (0, int(parts[2]), int(parts[1]), name)
    return (1, 0, 0, name)


def _list_chunks(path: str) -> tuple[list[str], bool]:
    """(the chunk file names, whether the snapshot is done).

    Raises:
      The error an ERROR file records (a StatusProto: code 1, message 2).
    """
    try:
        with open(os.path.join(path, "ERROR"), "rb") as f:
            data = f.read(1 << 20)
    except FileNotFoundError:
        pass
    else:
        code, msg = errors.UNKNOWN, f"The snapshot at {path} failed."
        try:
            for num, wire, val in sf._fields(data):
                if num == 1 and wire == 0:
                    code = val
                elif num == 2 and wire == 2:
                    msg = val.decode("utf-8", "replace")
        except errors.DataLossError:
            pass
        try:
            cls = errors.exception_type_from_error_code(code)
        except KeyError:  # (OK, or a code TF does not have)
            cls = errors.UnknownError
        raise cls(None, None, msg)
    done = os.path.exists(os.path.join(path, "DONE"))
    try:
        names = os.listdir(os.path.join(path, "chunks"))
    except FileNotFoundError:
        names = []
    return sorted(names, key=_chunk_key), done


class ChunkList(pl.DatasetValue):
    """The paths of a distributed snapshot's chunk files as they are committed, until
    the snapshot is done (TF's ListSnapshotChunksDataset: a snapshot being written, or
    not there yet, is waited for, polling every second)."""

    def __init__(self, path: str):
        self.path = path

    async def iterate(self, env):
        seen: set[str] = set()
        while True:
            names, done = await pl._in_thread(_list_chunks, self.path)
            for n in names:
                if n not in seen:
                    seen.add(n)
                    yield (np.array(os.path.join(self.path, "chunks", n).encode(), object),)
            if done:
                return
            await asyncio.sleep(_CHUNK_POLL_SECONDS)


async def _list_chunks_op(ctx, snapshot_path):
    types = [dtypes.as_dtype(t) for t in ctx.attrs["output_types"]]
    if types != [dtypes.string]:
        raise _bad(f"ListSnapshotChunksDataset gives strings, not {[t.name for t in types]}")
    return dso._handle(ChunkList(dso._str(snapshot_path)))


class Nested(pl.DatasetValue):
    """The elements of several datasets, one after another (SnapshotNestedDatasetReader)."""

    def __init__(self, values: list):
        self.values = values

    async def iterate(self, env):
        for v in self.values:
            async for x in _closing(v.iterate(env)):
                yield x

    def cardinality(self):
        cards = [v.cardinality() for v in self.values]
        if any(c < 0 for c in cards):
            return -1 if -1 in cards else -2
        return sum(cards)


async def _nested(ctx, *datasets):
    return dso._handle(Nested([dso._ds(d) for d in datasets]))


dso._register("SnapshotChunkDataset", ["chunk_file: string"], {"compression": ""}, _chunk)
dso._register("ListSnapshotChunksDataset", ["snapshot_path: string"], {}, _list_chunks_op)
dso._register(
    "SnapshotNestedDatasetReader",
    ["inputs: N * string"],
    {"N": 1},
    _nested,
)


# -- Dataset.load of a distributed snapshot --------------------------------------------------
# TF's Python builds ListSnapshotChunksDataset -> map(SnapshotChunkDataset) -> reader_func
# for it; here LoadDataset's kernel does the same when PATH/snapshot.metadata is a
# DistributedSnapshotMetadata (text: `element_spec: "..."`, `compression: "..."`).

_DIST_COMPRESSION = re.compile(rb'^compression:\s*"([A-Za-z]*)"\s*$', re.MULTILINE)


def _distributed_compression(path: str) -> str | None:
    """The compression a distributed snapshot's metadata names; None when `path` holds
    no distributed snapshot (a binary SnapshotMetadataRecord, or nothing)."""
    try:
        with open(os.path.join(path, sf.METADATA_FILE), "rb") as f:
            head = f.read(1 << 20)  # (TF's are a few hundred bytes)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not head.startswith((b"element_spec:", b"compression:")):
        return None
    m = _DIST_COMPRESSION.search(head)
    return m.group(1).decode() if m else ""


class ChunkDatasets(pl.DatasetValue):
    """A dataset of datasets, one per chunk as ChunkList lists them (reader_func's input)."""

    def __init__(self, path: str, compression: str, types: list):
        self.list, self.compression, self.types = ChunkList(path), compression, types

    async def iterate(self, env):
        async for (name,) in _closing(self.list.iterate(env)):
            chunk = Chunk(name[()].decode(), self.compression, self.types)
            yield (dso._handle(chunk),)


class LoadDistributed(pl.DatasetValue):
    def __init__(self, path: str, compression: str, types: list, reader_fn):
        self.nested = ChunkDatasets(path, compression, types)
        self.reader_fn = reader_fn

    async def iterate(self, env):
        out = await self.reader_fn(env, (dso._handle(self.nested),))
        async for x in _closing(pl._dataset_of(out[0]).iterate(env)):
            yield x
