"""The consumer side of the tf.data service: registering a dataset, reading a job.

`RegisterDataset(V2)`'s kernel (ops/dataset_service_ops.py) sends its input dataset's
subgraph, as a GraphDef, to the dispatcher; `DataServiceDataset(V1..V4)`'s kernel
gives a `ServiceRead`, whose pass joins (or creates) the job, learns its tasks from the
dispatcher and takes elements from their workers in turn.

A pass ends when every task it knows has ended and the dispatcher, asked again, names
no new one.  A worker lost midway (its connection fails) takes its task with it: with
DYNAMIC sharding the splits it held are not read again (TF's at-most-once guarantee
for a lost worker); the pass fails with UnavailableError only when every task of the
job was lost.  With `num_consumers`, round r is read from the job's task r mod (number
of tasks), each consumer taking its own element of the round.

Invariants: a pass holds its connections only while it runs (closed and the job
released in its `finally`); it never waits on the network without a bound other than
a worker producing an element (the wire's keep-alive bounds a silent peer).
"""

from __future__ import annotations

import asyncio

from asyncflow import errors
from asyncflow.data.service import protocol as p
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import split_address
from asyncflow.ops import dataset_pipeline as pl

__all__ = ["ServiceRead", "dataset", "dataset_graph", "parse_address", "register"]

_CONNECT_S = 10.0
_NO_TASKS_POLL_S = 0.05  # while a job has no worker yet


def parse_address(address: str, protocol: str = "") -> tuple[str, int]:
    """(host, port) of a service address ("grpc://host:port" or "host:port").

    Raises InvalidArgumentError for another protocol or an address without a port."""
    proto, sep, rest = address.partition("://")
    if not sep:
        proto, rest = protocol or "grpc", address
    if proto not in ("grpc", "grpc+local"):
        raise errors.InvalidArgumentError(
            None, None, f"Unsupported tf.data service protocol {proto!r} in {address!r}: "
            "asyncflow's service speaks 'grpc' (its own authenticated TCP protocol)"
        )  # fmt: skip
    try:
        return split_address(rest)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, str(e)) from None


async def _connect(address: str, secret: bytes, protocol: str = ""):
    host, port = parse_address(address, protocol)
    return await wire.connect(host, port, secret, _no_requests, wait_s=_CONNECT_S)


def _no_requests(conn, kind, rid, meta, payload) -> None:
    p.answer(conn, rid, _refuse)


def _refuse():
    raise errors.UnimplementedError(None, None, "A tf.data service consumer serves no requests")


# -- registration --------------------------------------------------------------------------


def _function_tensors(op) -> list:
    """The tensors a dataset op's traced functions name in its attrs (`f_inputs`,
    `key_outputs`, ...): their bodies are part of the dataset."""
    g = op.graph
    out = []
    for name, v in op._attrs.items():
        if name.endswith(("_inputs", "_outputs", "_captures")) and isinstance(v, list | tuple):
            for t in v:
                t = t.decode() if isinstance(t, bytes) else t
                if isinstance(t, str) and ":" in t:
                    out.append(g.get_tensor_by_name(t))
    return out


def dataset_graph(tensor) -> bytes:
    """The GraphDef (bytes) of the ops that make the dataset `tensor`, with its traced
    functions' bodies (TF's FunctionDefs, as `as_graph_def` writes them).

    Raises InvalidArgumentError where the dataset depends on a placeholder that is not
    one of its functions' arguments (a value the session feeds cannot travel)."""
    seen: dict = {}
    args: set = set()
    stack = [tensor.op]
    while stack:
        o = stack.pop()
        if o.name in seen:
            continue
        seen[o.name] = o
        fn = _function_tensors(o)
        args.update(t.op.name for t in fn if t.op.type.startswith("Placeholder"))
        stack.extend(t.op for t in fn)
        stack.extend(t.op for t in o.inputs)
        stack.extend(o.control_inputs)
    for o in seen.values():
        if o.type in ("Placeholder", "PlaceholderV2") and o.name not in args:
            raise errors.InvalidArgumentError(
                None, None, f"Cannot register a dataset that depends on placeholder "
                f"{o.name!r} with the tf.data service: its graph must stand alone"
            )  # fmt: skip
    gd = tensor.graph.as_graph_def()
    sub = type(gd)()
    for n in gd.node:
        if n.name in seen:
            sub.node.add().CopyFrom(n)
    sub.library.CopyFrom(gd.library)
    return sub.SerializeToString()


async def register(ctx, address, protocol) -> str:
    """RegisterDataset's kernel: the dispatcher's id for the kernel's input dataset."""
    st = ctx.kernel_state
    graph = st.get("graph")
    if graph is None:
        graph = st["graph"] = dataset_graph(ctx.op.inputs[0])
    conn = await _connect(_text(address), _secret(), _text(protocol))
    try:
        meta = {
            "out": ctx.op.inputs[0].name,
            "spec": ctx.attrs.get("element_spec", ""),
            "id": ctx.attrs.get("requested_dataset_id", ""),
        }
        reply, _ = await p.call(conn, "register", meta, [p.graph_tensor(graph)])
    finally:
        conn.abort(errors.CancelledError(None, None, "done"))
    return p.check_str(reply, "id")


def _text(v) -> str:
    v = v[()] if hasattr(v, "shape") and v.shape == () else v
    return v.decode() if isinstance(v, bytes) else str(v)


def _int(v) -> int:
    return int(v[()] if hasattr(v, "shape") else v)


_SECRET: list = []


def _secret() -> bytes:
    if not _SECRET:
        _SECRET.append(wire.cluster_secret())
    return _SECRET[0]


# -- reading ---------------------------------------------------------------------------------

_MODES = {"parallel_epochs": p.ShardingPolicy.OFF, "distributed_epoch": p.ShardingPolicy.DYNAMIC}


def mode_def(policy: int) -> bytes:
    """TF's processing_mode input: a serialized ProcessingModeDef (field 1, the
    sharding policy, a varint; proto3 writes nothing for OFF)."""
    return b"" if policy == 0 else bytes([0x08, int(policy)])


def mode_of(raw) -> int:
    """The sharding policy of a DataServiceDataset's processing_mode input (TF's
    serialized ProcessingModeDef; also "parallel_epochs" / "distributed_epoch").

    Raises InvalidArgumentError for anything else."""
    raw = raw[()] if hasattr(raw, "shape") and raw.shape == () else raw
    raw = raw.encode() if isinstance(raw, str) else bytes(raw)
    if raw.decode("latin-1") in _MODES:
        return int(_MODES[raw.decode("latin-1")])
    if raw == b"":
        return 0
    if len(raw) == 2 and raw[0] == 0x08 and raw[1] in set(p.ShardingPolicy):
        return raw[1]
    raise errors.InvalidArgumentError(None, None, f"Unrecognized processing mode: {raw!r}")


def dataset(ctx, args: dict) -> ServiceRead:
    """DataServiceDataset's kernel: the value a pass over reads the job from."""
    dataset_id = args["dataset_id"]
    dataset_id = (
        _text(dataset_id) if ctx.op.type == "DataServiceDatasetV4" else str(_int(dataset_id))
    )
    num_consumers = _int(args.get("num_consumers", -1))
    consumer_index = _int(args.get("consumer_index", -1))
    if num_consumers > 0 and not 0 <= consumer_index < num_consumers:
        raise errors.InvalidArgumentError(
            None, None, f"consumer_index must be in [0, {num_consumers}), got {consumer_index}"
        )
    return ServiceRead(
        address=_text(args["address"]),
        protocol=_text(args["protocol"]),
        dataset_id=dataset_id,
        mode=mode_of(args["processing_mode"]),
        job_name=_text(args["job_name"]),
        consumer_index=consumer_index,
        num_consumers=max(num_consumers, 0),
        max_outstanding=_int(args["max_outstanding_requests"]),
    )


class ServiceRead(pl.DatasetValue):
    """A pass reads one job of the service (see the module note)."""

    def __init__(
        self, address, protocol, dataset_id, mode, job_name, consumer_index, num_consumers,
        max_outstanding,
    ):  # fmt: skip
        self.address = address
        self.protocol = protocol
        self.dataset_id = dataset_id
        self.mode = mode
        self.job_name = job_name
        self.consumer_index = consumer_index
        self.num_consumers = num_consumers
        self.max_outstanding = max_outstanding

    async def iterate(self, env):
        secret = _secret()
        dispatcher = await _connect(self.address, secret, self.protocol)
        workers: dict[str, wire.Connection] = {}
        job = None
        try:
            meta = {
                "d": self.dataset_id,
                "mode": self.mode,
                "name": self.job_name,
                "nc": self.num_consumers,
            }
            reply, _ = await p.call(dispatcher, "job", meta)
            job = p.check_int(reply, "job", None, 0)
            reader = _Reader(self, dispatcher, job, workers, secret)
            async for elem in reader.elements():
                yield elem
        finally:
            if job is not None and dispatcher.closed is None:
                try:
                    await asyncio.wait_for(p.call(dispatcher, "release", {"job": job}), 5.0)
                except (errors.OpError, TimeoutError):
                    pass
            done = errors.CancelledError(None, None, "The tf.data service read ended")
            dispatcher.abort(done)
            for conn in workers.values():
                conn.abort(done)


class _Reader:
    """One pass's bookkeeping: the job's tasks, which ended, which were lost."""

    def __init__(self, read: ServiceRead, dispatcher, job: int, workers: dict, secret: bytes):
        self.read = read
        self.dispatcher = dispatcher
        self.job = job
        self.workers = workers
        self.secret = secret
        self.tasks: dict[int, str] = {}  # live tasks: id -> worker address
        self.ended: set[int] = set()
        self.lost: set[int] = set()
        self.had_tasks = False

    async def refresh(self) -> None:
        reply, _ = await p.call(self.dispatcher, "tasks", {"job": self.job})
        listed = reply.get("tasks")
        if not isinstance(listed, list):
            raise p.bad("tasks")
        now = {}
        for entry in listed:
            if not (isinstance(entry, list) and len(entry) == 2):
                raise p.bad("tasks")
            task = p.check_int({"t": entry[0]}, "t", None, 0)
            now[task] = p.check_str({"a": entry[1]}, "a")
        self.tasks = {t: a for t, a in now.items() if t not in self.lost}
        self.had_tasks |= bool(self.tasks)

    async def _worker(self, address: str) -> wire.Connection:
        conn = self.workers.get(address)
        if conn is None or conn.closed is not None:
            conn = self.workers[address] = await _connect(address, self.secret)
        return conn

    async def _get(self, task: int, round_: int):
        """The task's element for this consumer (None: it ended; the task's loss is
        noted and None returned)."""
        meta = {"task": task, "c": self.read.consumer_index, "r": round_}
        try:
            conn = await self._worker(self.tasks[task])
            reply, payload = await p.call(conn, "get", meta)
        except (errors.UnavailableError, errors.NotFoundError, errors.CancelledError):
            self.lost.add(task)
            self.tasks.pop(task, None)
            return None
        if reply.get("eos"):
            self.ended.add(task)
            return None
        descs = reply.get("t")
        return tuple(wire.decode_tensors(descs if isinstance(descs, list) else [], payload))

    async def _open(self) -> bool:
        """Whether there are unended tasks, after asking the dispatcher (waiting while
        the job has none yet).  Raises UnavailableError when all were lost."""
        while True:
            await self.refresh()
            if any(t not in self.ended for t in self.tasks):
                return True
            if self.tasks:
                return False
            if self.had_tasks or self.lost:
                raise errors.UnavailableError(
                    None, None, f"Every tf.data service worker of job {self.job} was lost"
                )
            await asyncio.sleep(_NO_TASKS_POLL_S)

    async def elements(self):
        if self.read.num_consumers:
            async for elem in self._rounds():
                yield elem
            return
        while await self._open():
            for task in sorted(self.tasks):
                if task in self.ended or task not in self.tasks:
                    continue
                elem = await self._get(task, 0)
                if elem is not None:
                    yield elem

    async def _rounds(self):
        round_ = 0
        while await self._open():
            live = sorted(t for t in self.tasks if t not in self.ended)
            task = live[round_ % len(live)]
            elem = await self._get(task, round_ // len(live))
            if elem is None:
                if task in self.ended:  # the round could not be filled: the end
                    return
                continue  # (lost: the round is read from another task)
            round_ += 1
            yield elem
