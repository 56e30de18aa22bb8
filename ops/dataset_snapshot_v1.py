"""TF's v1 `SnapshotDataset` (the op behind tf.data.experimental.snapshot in TF 2.0-2.2)
as TF 2.21 runs it, on the files of asyncflow/snapshot_format_v1.py.

A pass picks its mode when it starts:
- "read" reads the run `PATH/<dir>/snapshot.metadata` names (its `.snapshot` files in
  name order; NotFoundError when there is no metadata or no file), ignoring the input;
- "write" runs the input, writing each element as it passes it on, to a new run
  (metadata unfinalized first, finalized when the input ends; a new file once one holds
  `shard_size_bytes`);
- "passthrough" only runs the input;
- "auto" reads a finalized snapshot, passes through while another run's unfinalized
  metadata is younger than `pending_snapshot_expiry_seconds`, and writes otherwise.
`<dir>` is `custom-<snapshot_name>` (run id "custom": a second write appends to the
same files, as TF's) or the pipeline's fingerprint as 16 hex digits (ours, not TF's
number).  `writer_path_prefix` / `reader_path_prefix` are put before the run
directory's path, not the metadata's, as in TF.

Not as TF: several reader threads here read the files in order (TF's threads
interleave them as they run), and `shuffle_on_read` orders the files by a NumPy
permutation seeded by (seed, seed2), not TF's generator.
"""

from __future__ import annotations

import glob
import hashlib
import os
import random
import time
import zlib

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import snapshot_format as sf
from asyncflow import snapshot_format_v1 as v1
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops.dataset_graph import dataset_graph_def
from asyncflow.ops.dataset_more import _closing

__all__: list[str] = []

_MODES = ("auto", "read", "write", "passthrough")
_FLUSH_BYTES = 1 << 20  # encoded bytes buffered before a write on a worker thread


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- reading -----------------------------------------------------------------------------------


def _read_metadata(hash_dir: str) -> dict | None:
    try:
        with open(os.path.join(hash_dir, sf.METADATA_FILE), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        return sf.decode_metadata(data)
    except errors.DataLossError:
        raise errors.DataLossError(
            None, None, f"Could not parse snapshot metadata {hash_dir}/{sf.METADATA_FILE}"
        ) from None


def _files(run_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(run_dir), "*.snapshot")))


def _read_file(path: str, compression: str, types: list) -> list:
    with open(path, "rb") as f:
        data = f.read()
    return v1.decode_elements(data, compression, types)


def _check_types(md: dict, types: list) -> None:
    want = [dtypes.as_dtype(t).as_datatype_enum for t in types]
    if len(md["dtype"]) != len(want):
        raise errors.InternalError(
            None, None, f"Snapshot has {len(md['dtype'])} components; dataset: {len(want)}"
        )
    for i, (got, exp) in enumerate(zip(md["dtype"], want)):
        if got != exp:
            raise errors.InternalError(
                None, None, f"Type: {i} doesn't match. Snapshot: {got}; dataset: {exp}"
            )


# -- writing -----------------------------------------------------------------------------------


class _RunWriter:
    """One run's `.snapshot` files: elements encoded, compressed and appended on worker
    threads; a new file once the current one holds `shard_size_bytes` (before coding)."""

    def __init__(self, run_dir: str, compression: str, shard_size_bytes: int):
        self.dir, self.compression, self.limit = run_dir, compression, shard_size_bytes
        self.index, self.file_bytes = 0, 0
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.zstream = None

    def _path(self) -> str:
        return os.path.join(self.dir, f"{self.index:08d}.snapshot")

    def _write(self, chunks: list, final: bool) -> None:
        os.makedirs(self.dir, exist_ok=True)
        for data, next_file in chunks:
            if self.compression == "GZIP" and (data or self.zstream is not None):
                if self.zstream is None:
                    self.zstream = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS + 16)
                data = self.zstream.compress(data)
                if next_file or final:
                    data += self.zstream.flush()
                    self.zstream = None
            if data:  # (a run's last file is not left empty)
                with open(self._path(), "ab") as f:
                    f.write(data)
            if next_file:
                self.index += 1

    async def add(self, record: bytes) -> None:
        self.pending.append(record)
        self.pending_bytes += len(record)
        self.file_bytes += len(record)
        if self.file_bytes >= self.limit or self.pending_bytes >= _FLUSH_BYTES:
            await self._flush(self.file_bytes >= self.limit, False)

    async def _flush(self, next_file: bool, final: bool) -> None:
        data, self.pending, self.pending_bytes = b"".join(self.pending), [], 0
        if next_file:
            self.file_bytes = 0
        if data or final:
            await pl._in_thread(self._write, [(data, next_file)], final)

    async def close(self) -> None:
        await self._flush(False, True)


def _write_metadata(hash_dir, run_id, graph_hash, timestamp, types, finalized) -> None:
    enums = [dtypes.as_dtype(t).as_datatype_enum for t in types]
    data = sf.encode_metadata(run_id, timestamp, enums, 0, finalized, graph_hash, v1.VERSION)
    os.makedirs(hash_dir, exist_ok=True)
    tmp = os.path.join(hash_dir, f".{sf.METADATA_FILE}.{run_id}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(hash_dir, sf.METADATA_FILE))


# -- the dataset -------------------------------------------------------------------------------


class SnapshotV1(pl.DatasetValue):
    def __init__(self, input_value, hash_dir: str, graph_hash: str, custom: bool, attrs, types):
        self.input, self.hash_dir, self.hash, self.custom = (
            input_value,
            hash_dir,
            graph_hash,
            custom,
        )
        self.a, self.types = attrs, types

    # (no cardinality: a pass that reads gives the snapshot's count, not the input's)

    def _mode(self, md: dict | None) -> str:
        mode = self.a["mode"]
        if mode != "auto":
            return mode
        if md is None:
            return "write"
        if md["finalized"]:
            return "read"
        age_us = time.time_ns() // 1000 - md["creation_timestamp"]
        if age_us > self.a["pending_snapshot_expiry_seconds"] * 1_000_000:
            return "write"
        return "passthrough"

    async def iterate(self, env):
        md = None
        if self.a["mode"] != "passthrough":
            md = await pl._in_thread(_read_metadata, self.hash_dir)
        mode = self._mode(md)
        if mode == "read":
            stream = self._read(md)
        elif mode == "write":
            stream = self._write(env)
        else:
            stream = self.input.iterate(env)
        async for x in _closing(stream):
            yield x

    def _order(self, files: list) -> list:
        if not self.a["shuffle_on_read"]:
            return files
        seed = (self.a["seed"] & 0xFFFFFFFF, self.a["seed2"] & 0xFFFFFFFF)
        return [files[i] for i in np.random.RandomState(list(seed)).permutation(len(files))]

    async def _read(self, md: dict | None):
        if md is None:
            raise errors.NotFoundError(None, None, "Metadata file does not exist.")
        _check_types(md, self.types)
        run_dir = self.a["reader_path_prefix"] + os.path.join(self.hash_dir, md["run_id"])
        files = await pl._in_thread(_files, run_dir)
        if not files:
            raise errors.NotFoundError(None, None, f"Could not find any files in dir: {run_dir}")
        for path in self._order(files):
            elems = await pl._in_thread(_read_file, path, self.a["compression"], self.types)
            for e in elems:
                yield e

    async def _write(self, env):
        run_id = "custom" if self.custom else f"{random.SystemRandom().getrandbits(64):016x}"
        stamp = time.time_ns() // 1000
        run_dir = self.a["writer_path_prefix"] + os.path.join(self.hash_dir, run_id)
        meta = (self.hash_dir, run_id, self.hash, stamp, self.types)
        await pl._in_thread(_write_metadata, *meta, False)
        comp = self.a["compression"]
        writer = _RunWriter(run_dir, comp, self.a["shard_size_bytes"])
        async for elem in _closing(self.input.iterate(env)):
            await writer.add(v1.encode_element(elem, comp))
            yield elem
        await writer.close()
        await pl._in_thread(_write_metadata, *meta, True)


def _check_attrs(a) -> None:
    if a["mode"] not in _MODES:
        raise _invalid("mode must be either 'auto', 'read', 'write', or 'passthrough'.")
    if a["compression"] not in v1.COMPRESSIONS:
        raise _invalid("compression must be either '', 'GZIP' or 'SNAPPY'.")
    if a["pending_snapshot_expiry_seconds"] < 1:
        raise _invalid("pending_snapshot_expiry_seconds must be at least 1 second.")


def _fingerprint(ctx, value) -> str:
    gd = dataset_graph_def(ctx, value, True)
    for nd in gd.node:
        nd.attr.pop("metadata", None)
    return hashlib.sha256(gd.SerializeToString(deterministic=True)).hexdigest()[:16]


async def _snapshot_v1(ctx, ds, path):
    a = dict(ctx.attrs)
    a["compression"] = dso._str(a["compression"])
    a["mode"] = dso._str(a["mode"])
    for key in ("reader_path_prefix", "writer_path_prefix", "snapshot_name"):
        a[key] = dso._str(a[key])
    _check_attrs(a)
    value = dso._ds(ds)
    name = a["snapshot_name"]
    try:
        fingerprint = _fingerprint(ctx, value)
    except errors.OpError:
        if not name:
            raise
        fingerprint = ""  # (only the metadata's graph_hash: a named snapshot needs none)
    hash_dir = os.path.join(dso._str(path), f"custom-{name}" if name else fingerprint)
    types = list(a["output_types"])
    return dso._handle(SnapshotV1(value, hash_dir, fingerprint, bool(name), a, types))


dso._register(
    "SnapshotDataset",
    ["input_dataset: string", "path: string"],
    {
        "compression": "",
        "reader_path_prefix": "",
        "writer_path_prefix": "",
        "shard_size_bytes": 10 * 1024**3,
        "pending_snapshot_expiry_seconds": 86400,
        "num_reader_threads": 1,
        "reader_buffer_size": 1,
        "num_writer_threads": 1,
        "writer_buffer_size": 1,
        "shuffle_on_read": False,
        "seed": 0,
        "seed2": 0,
        "mode": "auto",
        "snapshot_name": "",
    },
    _snapshot_v1,
)
