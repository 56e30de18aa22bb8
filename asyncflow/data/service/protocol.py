"""What the tf.data service's dispatcher, workers and clients say to each other.

Every connection is the cluster's wire (asyncflow/distributed/wire.py): the mutual
HMAC hello before anything is read, framed messages with JSON meta checked field by
field, raw tensor payloads, every size bounded before allocation.  A request is one
RUN frame whose meta names the method (`"m"`), answered by REPLY or ERROR; the
dispatcher also sends RUN frames to each worker over the connection the worker opened
(a new task, a task to drop), so no side listens for the other's address.

Methods (requester -> answerer: meta in -> meta out):
  client -> dispatcher  register  {out, spec, id} + graph    -> {id}
                        job       {d, mode, name, nc, rep}  -> {job, inc}
                        tasks     {job, inc}                -> {tasks: [[task, addr]]}
                        release   {job}                     -> {}
  worker -> dispatcher  worker    {addr}                    -> {tasks: [task dicts], inc}
                        dataset   {d}                       -> {out} + graph bytes
                        split     {job, rep, n, src}        -> {i} or {end: true}
  dispatcher -> worker  task      {task dict}               -> {}
                        drop      {task}                    -> {}
  client -> worker      get       {task, c, r, n}           -> {n} + up to n elements,
                                                               {eos}, or {gone}: no such task

`inc`: the dispatcher's incarnation, the same after a restart from its journal and
new after one without it: a consumer or worker of an earlier one (whose job and task
ids the new one gives out again) is told so rather than served another job.

A task dict: {task, job, d, mode, nc, z, wi, nw}: one worker's share of one job (z: its
elements are compressed; wi, nw: this worker's index in the dispatcher's fixed worker
list and the list's length, for static sharding; -1, 0 without one).

A `get` reply carries `n` elements' components one after another (`pack`); compressed,
they travel as one snappy block of their wire encoding, whose size and descriptors are
in meta and checked before it is decompressed (`unpack`).

No pickle: a dataset travels as its GraphDef (TF's form, FunctionDefs included), an
element as its component arrays.
"""

from __future__ import annotations

import enum

import numpy as np

from asyncflow import errors
from asyncflow.distributed import wire

__all__ = [
    "ShardingPolicy",
    "call",
    "check_int",
    "check_str",
    "graph_tensor",
    "pack",
    "read_graph",
    "unpack",
]

MAX_GRAPH_BYTES = 64 << 20  # a registered dataset's GraphDef
MAX_NAME = 1 << 10  # job names, dataset ids, addresses
MAX_SPLITS = 1 << 40
MAX_BATCH = 1 << 10  # elements in one `get` reply
MAX_INCARNATION = 1 << 62  # a dispatcher's incarnation (see `inc` above)


class ShardingPolicy(enum.IntEnum):
    """How a job's work is split between workers (TF's values).

    OFF: each worker processes the whole dataset ("parallel_epochs").
    DYNAMIC: the dispatcher hands each split of the source to one worker, so each
      element is produced once overall ("distributed_epoch"); at most once when a
      worker is lost.
    FILE, DATA, FILE_OR_DATA, HINT: static sharding by worker index.
    """

    OFF = 0
    DYNAMIC = 1
    FILE = 2
    DATA = 3
    FILE_OR_DATA = 4
    HINT = 5

    def _to_proto(self) -> int:
        return int(self)


def bad(what: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"Malformed tf.data service request: {what}")


def check_str(meta: dict, key: str, default=None) -> str:
    v = meta.get(key, default)
    if not isinstance(v, str) or len(v) > MAX_NAME:
        raise bad(f"field {key!r}")
    return v


def check_int(meta: dict, key: str, default=None, low: int = -1, high: int = MAX_SPLITS) -> int:
    v = meta.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise bad(f"field {key!r}")
    return v


def graph_tensor(graph: bytes) -> np.ndarray:
    """A GraphDef's bytes as the one tensor of a frame."""
    if len(graph) > MAX_GRAPH_BYTES:
        raise errors.InvalidArgumentError(
            None, None, f"The dataset's graph ({len(graph)} bytes) is over the tf.data "
            f"service's limit of {MAX_GRAPH_BYTES} bytes"
        )  # fmt: skip
    return np.frombuffer(graph, np.uint8)


def read_graph(meta: dict, payload) -> bytes:
    """The GraphDef bytes a frame carries (one uint8 tensor of bounded size)."""
    descs = meta.get("t")
    if not isinstance(descs, list) or len(descs) != 1:
        raise bad("graph")
    (arr,) = wire.decode_tensors(descs, payload)
    if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 1:
        raise bad("graph")
    if arr.size > MAX_GRAPH_BYTES:
        raise bad("graph too large")
    return arr.tobytes()


def pack(elements: list, compress: bool) -> tuple[dict, list]:
    """(meta, tensors) of a `get` reply carrying `elements` (tuples of arrays)."""
    flat = [c for elem in elements for c in elem]
    if not compress:
        return {"n": len(elements)}, flat
    import imagecodecs  # (a declared dependency; its import is slow, so only here)

    descs, bufs, size = wire.encode_tensors(flat)
    block = imagecodecs.snappy_encode(b"".join(bufs))
    return {"n": len(elements), "z": descs, "zn": size}, [np.frombuffer(block, np.uint8)]


def unpack(meta: dict, payload) -> list[tuple]:
    """The elements of a `get` reply (see `pack`).

    Raises InvalidArgumentError for a reply whose sizes or descriptors do not agree
    (a compressed block is decompressed only into the size meta states, at most the
    wire's payload limit)."""
    n = check_int(meta, "n", 1, 1, MAX_BATCH)
    descs = meta.get("t") if isinstance(meta.get("t"), list) else []
    flat = wire.decode_tensors(descs, payload)
    if "z" in meta:
        size = check_int(meta, "zn", None, 0, wire.MAX_PAYLOAD)
        if len(flat) != 1 or not isinstance(flat[0], np.ndarray) or flat[0].dtype != np.uint8:
            raise bad("compressed element")
        import imagecodecs

        try:
            raw = imagecodecs.snappy_decode(flat[0], out=bytearray(size)) if size else b""
        except imagecodecs.SnappyError as e:
            raise bad(f"compressed element ({e})") from None
        if len(raw) != size:
            raise bad("compressed element size")
        flat = wire.decode_tensors(meta["z"], memoryview(raw))
    if len(flat) % n:
        raise bad("element count")
    k = len(flat) // n
    return [tuple(flat[i * k : (i + 1) * k]) for i in range(n)]


async def call(conn: wire.Connection, method: str, meta=None, tensors=None):
    """(reply meta, payload) of one request on `conn`; the answerer's error raises."""
    return await conn.call(wire.RUN, {**(meta or {}), "m": method}, tensors)


def answer(conn: wire.Connection, rid: int, fn, *args) -> None:
    """Send `fn(*args)`'s (meta, tensors) as the REPLY to request `rid`, or its OpError."""
    try:
        meta, tensors = fn(*args)
    except errors.OpError as e:
        if rid and conn.closed is None:
            conn.send(wire.ERROR, rid, wire.encode_error(e))
        return
    if rid and conn.closed is None:
        conn.send(wire.REPLY, rid, meta, tensors)


async def answer_async(conn: wire.Connection, rid: int, coro) -> None:
    """As `answer`, for a request whose answer waits (an element being produced)."""
    try:
        meta, tensors = await coro
    except errors.OpError as e:
        if rid and conn.closed is None:
            conn.send(wire.ERROR, rid, wire.encode_error(e))
        return
    except Exception as e:  # noqa: BLE001 - reported to the requester as TF's UnknownError
        if rid and conn.closed is None:
            conn.send(wire.ERROR, rid, wire.encode_error(e))
        return
    if rid and conn.closed is None:
        try:
            conn.send(wire.REPLY, rid, meta, tensors)
        except errors.OpError as e:  # (an element whose dtype cannot travel)
            conn.send(wire.ERROR, rid, wire.encode_error(e))
