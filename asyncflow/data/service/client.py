"""The consumer side of the tf.data service: registering a dataset, reading a job.

`RegisterDataset(V2)`'s kernel (ops/dataset_service_ops.py) sends its input dataset's
subgraph, as a GraphDef, to the dispatcher; `DataServiceDataset(V1..V4)`'s kernel
gives a `ServiceRead`, whose pass joins (or creates) the job, learns its tasks from the
dispatcher and takes elements from their workers in turn.  A named job's key holds the
pass's repetition (the passes over that `ServiceRead` started before: TF's iteration
counter, fresh at each run of the kernel), so a second pass of one value reads the job
anew where a new value of the same name joins what is left of it.

`target_workers="LOCAL"` reads only the tasks of workers running in this process
(worker.LOCAL_WORKERS, TF's LocalWorkers), and fails with TF's InvalidArgumentError
when there is none or the read is coordinated (`num_consumers`); when it ends, those
workers delete the tasks it read (TF's DeleteLocalWorkerTasks: a later consumer of the
named job finds them deleted, worker.py); "AUTO" and "ANY" read
every worker (TF's AUTO skips only remote workers tagged COLOCATED, a tag asyncflow's
WorkerConfig, like TF's Python one, cannot set).  A LOCAL read of a job that has no
task on this process's workers waits for one, as a read of a job without workers does
(TF's too).  A local worker is still read over its socket (TF's reads it in-process: a
saving, not a difference in what is read).

A pass ends when every task it knows has ended and the dispatcher, asked again, names
no new one.  A worker lost midway (its connection fails) takes its task with it: with
DYNAMIC sharding the splits it held are not read again (TF's at-most-once guarantee
for a lost worker); the pass fails with UnavailableError only when every task of the
job was lost.  With `num_consumers` (any value >= 0, 0 too, as TF's), round r is read
from the job's task r mod (number of tasks), each consumer taking its own element of
the round; a consumer index at or above `num_consumers` fails at the worker (TF's
FailedPreconditionError), a negative one here (InvalidArgumentError: TF's process
aborts).  A worker's error (its dataset's, or its refusal) keeps its class and reads
"Failed to get element from worker <address>: Failed to get an element, with a
nonretryable error: ..." as TF's client's, and an iterator's later get_next gives it
again (`ServiceRead.iterate_tolerant`: TF's client keeps its error status).

A pass's network reading runs on the process's client loop (`_io_loop`, a thread of
its own, as TF's client threads), which keeps `_DEPTH` requests of up to `_BATCH`
elements in flight to each task and fills a bounded buffer (`_Fetch`) the session's
step takes from: a step finds its element ready without a thread hop.  A register op
whose dataset feeds one OneShotIterator registers once per session (TF builds that
dataset once, in the iterator's `dataset_factory`), not at each step: in-process, the
master stops running such a dataset's ops once the iterator is made
(asyncflow/master.py); the id `register` keeps serves the steps of a remote task,
which still run them.

A pass whose dispatcher is lost keeps reading the tasks it knows from their workers
and connects to the dispatcher again (a fault-tolerant dispatcher started again on its
address knows the job); only when it needs the dispatcher to go on (every task it
knows ended) does it wait for it, at most `DISPATCHER_WAIT_S`.

A pass stops fetching, and releases its job, when its consumer's stream is closed, when
the session running it closes (a close hook: TF's iterator resource is destroyed with
its session), or when the stream is dropped unclosed (a finalizer).

Invariants: a pass holds its connections only while it runs (closed and the job
released in its `finally`); it never waits on the network without a bound other than
a worker producing an element (the wire's keep-alive bounds a silent peer); a running
fetch is referenced by `_FETCHING` (a task only the loop held could be collected
mid-pass).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import weakref

from asyncflow import errors, graph_io
from asyncflow.data.service import protocol as p
from asyncflow.data.service import worker as local
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import split_address
from asyncflow.distributed.server import new_loop
from asyncflow.ops import dataset_pipeline as pl

__all__ = ["ServiceRead", "dataset", "dataset_graph", "parse_address", "register"]

_CONNECT_S = 10.0
_NO_TASKS_POLL_S = 0.05  # while a job has no worker yet
_REFRESH_S = 0.5  # how often a pass asks the dispatcher for the job's tasks
_DEPTH = 2  # requests in flight to each task when max_outstanding_requests is AUTOTUNE
_BATCH = 64  # elements asked for in each of them (a worker sends those it has ready)
_BUFFER = 256  # elements a pass keeps fetched ahead of its consumer (AUTOTUNE)
DISPATCHER_WAIT_S = 60.0  # how long a pass that needs a lost dispatcher waits for it
_RETRY_MIN_S, _RETRY_MAX_S = 0.05, 1.0  # between tries to reach a lost dispatcher


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


async def _connect(address: str, secret: bytes, protocol: str = "", wait_s=_CONNECT_S):
    host, port = parse_address(address, protocol)
    return await wire.connect(host, port, secret, _no_requests, wait_s=wait_s)


def _no_requests(conn, kind, rid, meta, payload) -> None:
    p.answer(conn, rid, _refuse)


def _refuse():
    raise errors.UnimplementedError(None, None, "A tf.data service consumer serves no requests")


# -- registration --------------------------------------------------------------------------


def _function_ops(op) -> list:
    """The ops of the tensors a dataset op's traced functions name in its attrs
    (`f_inputs`, `key_outputs`, ...), and the ops a function with no results names
    (its control outputs): their bodies are part of the dataset."""
    g = op.graph
    out = []
    for name, v in op._attrs.items():
        if name.endswith(("_inputs", "_outputs", "_captures")) and isinstance(v, list | tuple):
            for t in v:
                t = t.decode() if isinstance(t, bytes) else t
                if isinstance(t, str) and ":" in t:
                    out.append(g.get_tensor_by_name(t).op)
                elif isinstance(t, str) and name.endswith("_outputs"):
                    out.append(g.get_operation_by_name(t))
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
        fn = _function_ops(o)
        args.update(f.name for f in fn if f.type.startswith("Placeholder"))
        stack.extend(fn)
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
        st["once"] = _only_for_one_shot(ctx.op)
    key = (_text(address), _text(protocol))
    if st["once"] and st.get("key") == key:
        return st["id"]
    conn = await _connect(_text(address), _secret(), _text(protocol))
    try:
        meta = {
            "out": ctx.op.inputs[0].name,
            "spec": ctx.attrs.get("element_spec", ""),
            "id": ctx.attrs.get("requested_dataset_id", ""),
            "z": int(compression_of(ctx.attrs.get("metadata", b"")) in _SNAPPY),
        }
        reply, _ = await p.call(conn, "register", meta, [p.graph_tensor(graph)])
    finally:
        conn.abort(errors.CancelledError(None, None, "done"))
    st["id"], st["key"] = p.check_str(reply, "id"), key
    return st["id"]


def _only_for_one_shot(op, limit: int = 1 << 10) -> bool:
    """Whether every use of `op`'s result ends in one OneShotIterator: TF builds that
    iterator's dataset once (in its `dataset_factory` function), so the register op
    runs once per session, where a remote task evaluates the iterator's input at
    each step (the in-process master feeds it once the iterator is made).
    (Several iterators would each register anew in TF: not cached then.)"""
    stack, seen, iterators = [op], set(), set()
    while stack:
        o = stack.pop()
        if o.type == "OneShotIterator":
            iterators.add(o.name)
            if len(iterators) > 1:
                return False
            continue
        uses = [c for t in o.outputs for c in t.consumers()]
        if not uses or len(seen) > limit:
            return False  # (fetched, or a graph too tangled to tell)
        for c in uses:
            if c.name not in seen:
                seen.add(c.name)
                stack.append(c)
    return True


_COMPRESSION_OFF, _COMPRESSION_SNAPPY = 1, 2  # TF's DataServiceMetadata.Compression
_SNAPPY = (2, 3)  # SNAPPY, FORCED_SNAPPY (unset or OFF: elements travel as they are)


def metadata(compression) -> bytes:
    """TF's serialized DataServiceMetadata for RegisterDataset's `metadata` attr: its
    compression field (2) only: SNAPPY for "AUTO", FORCED_SNAPPY for "SNAPPY", OFF
    for None."""
    if compression is None:
        return bytes([0x10, _COMPRESSION_OFF])
    return bytes([0x10, _COMPRESSION_SNAPPY if compression == "AUTO" else 3])


def compression_of(raw) -> int:
    """The compression field of a serialized DataServiceMetadata (0: unset)."""
    raw = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw or b"")
    i, value = 0, 0
    try:
        while i < len(raw):
            tag, i = _varint(raw, i)
            kind = tag & 7
            if kind == 0:
                v, i = _varint(raw, i)
                if tag >> 3 == 2:
                    value = v
            elif kind == 2:
                n, i = _varint(raw, i)
                i += n
            else:
                return value
    except IndexError:
        pass
    return value


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = raw[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80 or shift > 63:
            return v, i
        shift += 7


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
    num_consumers = max(_int(args.get("num_consumers", -1)), -1)
    consumer_index = max(_int(args.get("consumer_index", -1)), -1)
    if num_consumers >= 0 and consumer_index < 0:  # (TF's process aborts here)
        raise errors.InvalidArgumentError(
            None, None, f"A coordinated read (num_consumers={num_consumers}) needs a "
            f"non-negative consumer_index, got {_int(args.get('consumer_index', -1))}"
        )  # fmt: skip
    return ServiceRead(
        address=_text(args["address"]),
        protocol=_text(args["protocol"]),
        dataset_id=dataset_id,
        mode=mode_of(args["processing_mode"]),
        job_name=_text(args["job_name"]),
        consumer_index=consumer_index,
        num_consumers=num_consumers,
        max_outstanding=_int(args["max_outstanding_requests"]),
        target_workers=target_workers_of(ctx.attrs.get("target_workers", "")),
    )


_TARGET_WORKERS = ("AUTO", "ANY", "LOCAL")


def target_workers_of(value) -> str:
    """A DataServiceDataset's `target_workers` attr, upper-cased ("" is AUTO): part of
    a named job's parameters; LOCAL reads only this process's workers.

    Raises InvalidArgumentError for another value."""
    text = (_text(value) or "AUTO").upper()
    if text not in _TARGET_WORKERS:
        raise errors.InvalidArgumentError(None, None, f"Unrecognized target workers: {text}")
    return text


class ServiceRead(pl.DatasetValue):
    """A pass reads one job of the service (see the module note)."""

    def __init__(
        self, address, protocol, dataset_id, mode, job_name, consumer_index, num_consumers,
        max_outstanding, target_workers="AUTO",
    ):  # fmt: skip
        self.address = address
        self.protocol = protocol
        self.dataset_id = dataset_id
        self.mode = mode
        self.job_name = job_name
        self.consumer_index = consumer_index  # (-1: none)
        self.num_consumers = num_consumers  # (-1: not coordinated; 0 is, as TF's)
        self.max_outstanding = max_outstanding
        self.target_workers = target_workers
        # TF's iteration counter (a fresh one at each run of the kernel, as TF's
        # DummyIterationCounter's): the repetition each pass reads its named job for
        self.passes = itertools.count()

    async def iterate(self, env):
        fetch = _Fetch(self, next(self.passes))
        dropped = _Token()  # (only this frame holds it: it dies when the stream does)
        weakref.finalize(dropped, fetch.stop)
        hooks = getattr(env.session, "_close_hooks", None)
        if hooks is not None:
            hooks.append(fetch.stop)
        try:
            while True:
                elem = await fetch.next()
                if elem is _END:
                    return
                yield elem
        finally:
            fetch.stop()
            if hooks is not None and fetch.stop in hooks:
                hooks.remove(fetch.stop)

    async def iterate_tolerant(self, env):
        """The pass for an iterator: its error is a `pl.Failed` given at every later
        call too (TF's client keeps its error status), where `iterate` ends with it."""
        stream = self.iterate(env)
        try:
            async for elem in stream:
                yield elem
        except errors.OpError as e:
            failed = pl.Failed(e)
            while True:
                yield failed
        finally:
            await stream.aclose()

    def check_target_workers(self) -> None:
        """TF's checks of a read's target workers, before it asks for its job.

        Raises InvalidArgumentError (TF's words) for a LOCAL read when no worker runs
        in this process, or for a coordinated one."""
        if self.target_workers != "LOCAL":
            return
        if not local.LOCAL_WORKERS:
            if self.mode in (p.ShardingPolicy.OFF, p.ShardingPolicy.DYNAMIC):
                raise errors.InvalidArgumentError(
                    None, None, "Local reads require local tf.data workers, but no local "
                    "worker is found. You need to run local tf.data service workers in "
                    "your training workers."
                )  # fmt: skip
            raise errors.InvalidArgumentError(
                None, None, f"Static sharding policy <{p.ShardingPolicy(self.mode).name}> "
                "requires local tf.data workers, but no local worker is found. You need to "
                "run local tf.data service workers in your training workers. Static "
                "sharding also requires a fixed worker pool and a list of worker addresses "
                'in the DispatcherConfig. See the "Processing Modes" section in the module '
                "doc for details."
            )  # fmt: skip
        if self.num_consumers >= 0:
            raise errors.InvalidArgumentError(
                None, None, 'Coordinated reads require non-local workers, but `target_workers` '
                'is "LOCAL".'
            )  # fmt: skip

    def reads_from(self, address: str) -> bool:
        """Whether this read takes elements from the worker at `address` (every one
        but for a LOCAL read, which takes those of this process's workers only;
        coordinated reads are never LOCAL)."""
        return self.target_workers != "LOCAL" or address in local.LOCAL_WORKERS

    async def elements(self, rep: int = 0):
        """The pass's elements, read on the client's loop (`_io_loop`); `rep`: how
        many passes over this value started before (a named job's repetition)."""
        self.check_target_workers()
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
                "rep": rep,
                "tw": self.target_workers,
            }
            reply, _ = await p.call(dispatcher, "job", meta)
            job = p.check_int(reply, "job", None, 0)
            reader = _Reader(self, dispatcher, job, workers, secret)
            reader.incarnation = p.check_int(reply, "inc", 0, 0, p.MAX_INCARNATION)
            async for elem in reader.elements():
                yield elem
        finally:
            if reader is not None:  # (a pass left early: its requests in flight go)
                reader.close()
                dispatcher = reader.dispatcher  # (the one it reconnected to, if any)
                if self.target_workers == "LOCAL" and self.num_consumers < 0:
                    _delete_local_tasks(reader.tasks)
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


def _delete_local_tasks(tasks: dict) -> None:
    """Have this process's workers delete the `tasks` (id -> worker address) a LOCAL
    read took from them (TF's DeleteLocalWorkerTasks, as its client goes): a later
    consumer of the job finds them deleted (worker.py).  Sent before anything the pass
    still awaits, so a later read of this process reaches the worker after it."""
    for task, address in tasks.items():
        worker = local.LOCAL_WORKERS.get(address)
        if worker is not None:
            worker.delete_local_task_threadsafe(task)


_END = object()


class _Token:
    """A stream's token: its finalizer stops the stream's fetch."""

    __slots__ = ("__weakref__",)


_FETCHING: set = set()  # the client loop's running fetches (see the module note)


class _Fetch:
    """One pass's elements, fetched on the client's own loop into a bounded buffer
    that the consumer's step takes from (TF's client: its requests in flight and its
    buffer are filled by threads of its own).

    A step finds an element ready without suspending, so reading costs no thread hop
    while the buffer keeps up; an empty buffer costs one wake-up of the step's loop,
    a full one one wake-up of the fetching loop when half of it was taken.

    Invariant: `items` holds elements, then at most one final item (`_END` or the
    pass's error), which stays there for every later `next`; `lock` guards `items`,
    `waiter` and `wants_room`.
    """

    def __init__(self, read: ServiceRead, rep: int = 0):
        self.lock = threading.Lock()
        self.items: collections.deque = collections.deque()
        self.cap = _BUFFER if read.max_outstanding <= 0 else max(1, read.max_outstanding)
        self.waiter: tuple | None = None  # the consumer's (loop, future) while it waits
        self.wants_room = False
        self.io = _io_loop()
        self.room = None  # an asyncio.Event of the fetching loop
        self.future = asyncio.run_coroutine_threadsafe(self._run(read, rep), self.io)

    # -- the consumer's side (its step's loop)
    async def next(self):
        """The next element, or _END; the pass's error."""
        while True:
            with self.lock:
                if self.items:
                    item = self.items[0]
                    if item is _END or isinstance(item, BaseException):
                        break
                    self.items.popleft()
                    if self.wants_room and len(self.items) <= self.cap // 2:
                        self.wants_room = False
                        self.io.call_soon_threadsafe(self.room.set)
                    return item
                fut = asyncio.get_running_loop().create_future()
                self.waiter = (fut.get_loop(), fut)
            await fut
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """End the fetching (the job is released there; nothing waits here)."""
        self.future.cancel()

    # -- the fetching side (the client's loop)
    async def _run(self, read: ServiceRead, rep: int) -> None:
        this = asyncio.current_task()
        _FETCHING.add(this)
        try:
            await self._fetch(read, rep)
        finally:
            _FETCHING.discard(this)

    async def _fetch(self, read: ServiceRead, rep: int) -> None:
        self.room = asyncio.Event()
        final = _END
        try:
            async for elem in read.elements(rep):
                await self._put(elem)
        except asyncio.CancelledError:  # (`stop`, or the client loop closing under it:
            with self.lock:  # a step still waiting must not wait for ever)
                self.items.append(errors.CancelledError(None, None, "The read was stopped"))
                self._wake()
            raise
        except errors.OpError as e:
            final = e
        except Exception as e:  # noqa: BLE001 - the consumer's error, as TF's UnknownError
            final = errors.UnknownError(None, None, f"{type(e).__name__}: {e}")
        with self.lock:
            self.items.append(final)
            self._wake()

    async def _put(self, elem) -> None:
        while True:
            with self.lock:
                if len(self.items) < self.cap:
                    self.items.append(elem)
                    self._wake()
                    return
                self.room.clear()
                self.wants_room = True
            await self.room.wait()

    def _wake(self) -> None:  # (with the lock held)
        if self.waiter is not None:
            loop, fut = self.waiter
            self.waiter = None
            loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut) -> None:
    if not fut.done():
        fut.set_result(None)


_IO: list = []
_IO_LOCK = threading.Lock()


def _io_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for consumers' reads, on a daemon thread of its own
    (started on first use)."""
    with _IO_LOCK:
        if not _IO:
            loop = new_loop()
            ready = threading.Event()

            def serve():
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=serve, name="asyncflow-data-service", daemon=True).start()
            ready.wait()
            _IO.append(loop)
        return _IO[0]


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
        self.inflight: dict[int, collections.deque] = {}  # task -> its requests' futures
        self.got: dict[int, collections.deque] = {}  # task -> elements received, not given
        self.reconnecting: asyncio.Task | None = None  # to a lost dispatcher
        self.incarnation = 0  # the dispatcher's (see protocol.py)

    async def refresh(self, wait: bool = True) -> None:
        """Learn the job's tasks from the dispatcher.  When it is lost: reconnect,
        waiting for that (at most DISPATCHER_WAIT_S) if `wait`, else going on with
        the tasks known while it reconnects.

        Raises UnavailableError when a lost dispatcher was waited for in vain."""
        while True:
            conn = self.dispatcher
            if conn.closed is None:
                try:
                    meta = {"job": self.job, "inc": self.incarnation}
                    reply, _ = await p.call(conn, "tasks", meta)
                    break
                except (errors.UnavailableError, errors.CancelledError):
                    if conn.closed is None:
                        raise  # (the dispatcher's own answer)
            if self.reconnecting is None or self.reconnecting.done():
                self.reconnecting = asyncio.ensure_future(self._reconnect())
                self.reconnecting.add_done_callback(_quiet)
            if not wait:
                self.refreshed = asyncio.get_running_loop().time()
                return
            await asyncio.shield(self.reconnecting)
        listed = reply.get("tasks")
        if not isinstance(listed, list):
            raise p.bad("tasks")
        now = {}
        for entry in listed:
            if not (isinstance(entry, list) and len(entry) == 2):
                raise p.bad("tasks")
            task = p.check_int({"t": entry[0]}, "t", None, 0)
            now[task] = p.check_str({"a": entry[1]}, "a")
        self.tasks = {
            t: a for t, a in now.items() if t not in self.lost and self.read.reads_from(a)
        }
        self.had_tasks |= bool(self.tasks)
        self.refreshed = asyncio.get_running_loop().time()

    async def _reconnect(self) -> None:
        """Connect to the dispatcher again (`self.dispatcher`), trying for at most
        DISPATCHER_WAIT_S.

        Raises UnavailableError when it cannot be reached."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISPATCHER_WAIT_S
        delay = _RETRY_MIN_S
        while True:
            try:
                wait_s = max(0.1, min(2.0, deadline - loop.time()))
                self.dispatcher = await _connect(
                    self.read.address, self.secret, self.read.protocol, wait_s
                )
                return
            except errors.UnavailableError:
                if loop.time() + delay > deadline:
                    raise errors.UnavailableError(
                        None, None, f"Lost the tf.data service dispatcher at "
                        f"{self.read.address} and could not reach it again in "
                        f"{DISPATCHER_WAIT_S:g} s"
                    ) from None  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(2 * delay, _RETRY_MAX_S)

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

    async def _request(self, task: int, round_: int, n: int = 1):
        conn = await self._worker(self.tasks[task])
        return await conn.call(wire.RUN, self._get_meta(task, round_, n))

    def _get_meta(self, task: int, round_: int, n: int) -> dict:
        return {"m": "get", "task": task, "c": self.read.consumer_index, "r": round_, "n": n}

    def _holding(self) -> set:
        """Tasks with elements received, or ended with replies still to read."""
        held = {t for t, got in self.got.items() if got}
        return held | {t for t in self.ended if self.inflight.get(t)}

    def _connected(self, task: int) -> bool:
        conn = self.workers.get(self.tasks[task])
        return isinstance(conn, wire.Connection) and conn.closed is None

    def _send(self, task: int, n: int):
        """A future of the reply to a `get` of up to `n` elements of `task` (sent now
        on a connected worker: no Task per request)."""
        conn = self.workers.get(self.tasks[task])
        if isinstance(conn, wire.Connection) and conn.closed is None:
            try:
                return conn.call(wire.RUN, self._get_meta(task, 0, n))
            except errors.OpError as e:
                fut = asyncio.get_running_loop().create_future()
                fut.set_exception(e)
                return fut
        return asyncio.ensure_future(self._request(task, 0, n))

    async def _take(self, task: int, request):
        """The elements `request` (a future of the reply) brings (None: the task ended
        or was lost, which is noted)."""
        try:
            reply, payload = await request
        except (errors.UnavailableError, errors.CancelledError):
            reply, payload = {"gone": True}, None
        except errors.OpError as e:  # the worker's error, in TF's client's words
            address = self.tasks.get(task, "")
            raise type(e)(
                e.node_def, e.op, f"Failed to get element from worker {address}: Failed to "
                f"get an element, with a nonretryable error: {e.message}"
            ) from e  # fmt: skip
        if reply.get("gone"):  # (its worker is lost, or dropped the task)
            self.lost.add(task)
            self.tasks.pop(task, None)
            self._drop(task)
            return None
        if reply.get("eos"):  # (its other requests in flight are still read: each
            self.ended.add(task)  # brings elements or the end)
            return None
        return p.unpack(reply, payload)

    def _drop(self, task: int) -> None:
        for fut in self.inflight.pop(task, ()):
            fut.cancel()
            fut.add_done_callback(_quiet)

    def close(self) -> None:
        for task in list(self.inflight):
            self._drop(task)
        if self.reconnecting is not None:
            self.reconnecting.cancel()

    async def _open(self) -> bool:
        """Whether there are unended tasks (asking the dispatcher again when none is
        left, else every `_REFRESH_S`; waiting while the job has none yet).

        Raises UnavailableError when all were lost."""
        while True:
            if self._holding():
                return True
            live = any(t not in self.ended for t in self.tasks)
            now = asyncio.get_running_loop().time()
            if live and now - self.refreshed < _REFRESH_S:
                return True
            await self.refresh(wait=not live)
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
            if self.read.num_consumers >= 0:
                async for elem in self._rounds():
                    yield elem
                return
            while await self._open():
                live = sorted({t for t in self.tasks if t not in self.ended} | self._holding())
                depth, n = _flow(self.read.max_outstanding, len(live))
                for task in live:  # (one element of each task in turn, as before batches)
                    got = self.got.setdefault(task, collections.deque())
                    queue = self.inflight.setdefault(task, collections.deque())
                    if not got:
                        if task not in self.tasks or task in self.ended:
                            if not queue or task not in self.ended:
                                continue
                        else:  # (one request while connecting: they go out in order)
                            while len(queue) < (depth if self._connected(task) else 1):
                                queue.append(self._send(task, n))
                        got.extend(await self._take(task, queue.popleft()) or ())
                    if got:
                        yield got.popleft()
        finally:
            self.close()

    async def _rounds(self):
        round_ = 0
        while await self._open():
            live = sorted(t for t in self.tasks if t not in self.ended)
            task = live[round_ % len(live)]
            elems = await self._take(task, self._request(task, round_ // len(live)))
            if elems is None:
                if task in self.ended:  # the round could not be filled: the end
                    return
                continue  # (lost: the round is read from another task)
            round_ += 1
            yield elems[0]


def _flow(max_outstanding: int, tasks: int) -> tuple[int, int]:
    """(requests in flight to each task, elements asked for in each): AUTOTUNE (or
    any value <= 0) keeps `_DEPTH` requests of `_BATCH` elements a task; a set
    `max_outstanding_requests` bounds the elements asked for across all tasks."""
    if max_outstanding <= 0:
        return _DEPTH, _BATCH
    share = max(1, -(-max_outstanding // tasks))
    depth = min(_DEPTH, share)
    return depth, max(1, share // depth)


def _quiet(fut) -> None:
    if not fut.cancelled():
        fut.exception()  # (retrieved: an abandoned request's failure is nobody's)
