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
import collections

from asyncflow import errors, graph_io
from asyncflow.data.service import protocol as p
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import split_address
from asyncflow.ops import dataset_pipeline as pl

__all__ = ["ServiceRead", "dataset", "dataset_graph", "parse_address", "register"]

_CONNECT_S = 10.0
_NO_TASKS_POLL_S = 0.05  # while a job has no worker yet
_REFRESH_S = 0.5  # how often a pass asks the dispatcher for the job's tasks
_DEPTH = 8  # requests in flight to each task when max_outstanding_requests is AUTOTUNE


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
    return graph_io.graph_to_graph_def(tensor.graph, only=set(seen)).SerializeToString()


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
        job = reader = None
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
            if reader is not None:  # (a pass left early: its requests in flight go)
                reader.close()
            if job is not None and dispatcher.closed is None:
                try:
                    await asyncio.wait_for(p.call(dispatcher, "release", {"job": job}), 5.0)
                except (errors.OpError, TimeoutError):
                    pass
            done = errors.CancelledError(None, None, "The tf.data service read ended")
            dispatcher.abort(done)
            for conn in workers.values():
                if isinstance(conn, wire.Connection):
                    conn.abort(done)


class _Reader:
    """One pass's bookkeeping: the job's tasks, which ended, which were lost, and the
    requests in flight to each (up to `depth` a task, answered in the order sent)."""

    def __init__(self, read: ServiceRead, dispatcher, job: int, workers: dict, secret: bytes):
        self.read = read
        self.dispatcher = dispatcher
        self.job = job
        self.workers = workers  # address -> connection (or the future of one)
        self.secret = secret
        self.tasks: dict[int, str] = {}  # live tasks: id -> worker address
        self.ended: set[int] = set()
        self.lost: set[int] = set()
        self.had_tasks = False
        self.refreshed = -1.0
        self.inflight: dict[int, collections.deque] = {}

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
        self.refreshed = asyncio.get_running_loop().time()

    async def _worker(self, address: str) -> wire.Connection:
        conn = self.workers.get(address)
        if isinstance(conn, asyncio.Future):  # (another request is connecting it)
            return await asyncio.shield(conn)
        if conn is None or conn.closed is not None:
            fut = self.workers[address] = asyncio.ensure_future(_connect(address, self.secret))
            try:
                conn = await asyncio.shield(fut)
            finally:
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self.workers[address] = fut.result()
                else:
                    self.workers.pop(address, None)
        return conn

    async def _request(self, task: int, round_: int):
        conn = await self._worker(self.tasks[task])
        meta = {"task": task, "c": self.read.consumer_index, "r": round_}
        return await p.call(conn, "get", meta)

    async def _take(self, task: int, request):
        """The element `request` (a future of the reply) brings (None: the task ended
        or was lost, which is noted)."""
        try:
            reply, payload = await request
        except (errors.UnavailableError, errors.CancelledError):
            reply, payload = {"gone": True}, None
        if reply.get("gone"):  # (its worker is lost, or dropped the task)
            self.lost.add(task)
            self.tasks.pop(task, None)
            self._drop(task)
            return None
        if reply.get("eos"):
            self.ended.add(task)
            self._drop(task)
            return None
        descs = reply.get("t")
        return tuple(wire.decode_tensors(descs if isinstance(descs, list) else [], payload))

    def _drop(self, task: int) -> None:
        for fut in self.inflight.pop(task, ()):
            fut.cancel()
            fut.add_done_callback(_quiet)

    def close(self) -> None:
        for task in list(self.inflight):
            self._drop(task)

    async def _open(self) -> bool:
        """Whether there are unended tasks (asking the dispatcher again when none is
        left, else every `_REFRESH_S`; waiting while the job has none yet).

        Raises UnavailableError when all were lost."""
        while True:
            live = any(t not in self.ended for t in self.tasks)
            now = asyncio.get_running_loop().time()
            if live and now - self.refreshed < _REFRESH_S:
                return True
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
        try:
            if self.read.num_consumers:
                async for elem in self._rounds():
                    yield elem
                return
            while await self._open():
                live = sorted(t for t in self.tasks if t not in self.ended)
                outstanding = self.read.max_outstanding
                depth = _DEPTH if outstanding <= 0 else max(1, -(-outstanding // len(live)))
                for task in live:
                    if task not in self.tasks or task in self.ended:
                        continue
                    queue = self.inflight.setdefault(task, collections.deque())
                    while len(queue) < depth:
                        queue.append(asyncio.ensure_future(self._request(task, 0)))
                    elem = await self._take(task, queue.popleft())
                    if elem is not None:
                        yield elem
        finally:
            self.close()

    async def _rounds(self):
        round_ = 0
        while await self._open():
            live = sorted(t for t in self.tasks if t not in self.ended)
            task = live[round_ % len(live)]
            elem = await self._take(task, self._request(task, round_ // len(live)))
            if elem is None:
                if task in self.ended:  # the round could not be filled: the end
                    return
                continue  # (lost: the round is read from another task)
            round_ += 1
            yield elem


def _quiet(fut) -> None:
    if not fut.cancelled():
        fut.exception()  # (retrieved: an abandoned request's failure is nobody's)
