"""The tf.data service's worker: it produces the elements of its tasks for consumers.

A worker serves consumers' `get` requests on its own port and keeps one connection to
the dispatcher, which it opens, registers on (getting a task of every live job) and
over which the dispatcher sends it new tasks and tasks to drop.  A task's elements come
from one pass of its dataset, imported from the GraphDef the dispatcher holds, run in
a session of this worker on its loop (a session of the task's own where the dataset
makes resources: a queue, a table..., which TF's worker makes anew for each task, as it
imports the dataset for each): with DYNAMIC sharding the pass's sources yield
only the splits the dispatcher hands this worker (`_with_splits`: an element of a
range or of tensor slices, a file of a file source, the whole of a generator; each
input of a zip split apart, as TF's).

Consumers of a task share its stream: each element goes to one `get`.  With
`num_consumers` (coordinated reads; 0 too), the stream is cut into rounds of one
element per consumer; consumer c gets element c of every round it asks for (TF's
round-robin reads, which need an infinite dataset: checked before the consumer's
index, which must be below `num_consumers`, FailedPreconditionError as TF's).

A worker that loses the dispatcher keeps serving its tasks and registers again
(`_reconnect`, backing off up to `_RETRY_MAX_S` between tries, until it stops): a
fault-tolerant dispatcher started again gives it back the tasks it had.  What it asks
the dispatcher meanwhile (a split, a dataset's graph) waits for that, at most
`DISPATCHER_WAIT_S`, then fails with UnavailableError.

The workers running in this process are in `LOCAL_WORKERS` by the address they
registered (TF's LocalWorkers): a consumer reading with `target_workers="LOCAL"` reads
only their tasks (client.py), and has them delete those when it ends
(`delete_local_task`, TF's DeleteLocalTask): a later `get` of one fails, or ends when
its stream had ended; the dispatcher giving it again does not bring it back.

Invariants: a task's producer is started by its first `get` and holds at most
`_BUFFER` elements ahead; a dataset's imported graph and session live while a task of
it does; a dropped task's producer is cancelled and its waiting `get`s fail with
CancelledError; once a task's stream ended, every later `get` of it is answered
end-of-sequence.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import itertools

import numpy as np

from asyncflow import errors
from asyncflow.data.service import protocol as p
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import split_address
from asyncflow.kernel_api import PASS_RESOURCE_OPS
from asyncflow.ops import dataset_pipeline as pl

__all__ = ["LOCAL_WORKERS", "Worker"]

_BUFFER = 64  # elements a task's producer keeps ready
_BATCH_BYTES = 4 << 20  # a `get` reply takes more ready elements up to about this size
_TASK_WAIT_S = 2.0  # how long a `get` for a task not (yet) here waits for it
_DELETED_KEPT = 1 << 12  # deleted tasks remembered (TF's keeps every one)
DISPATCHER_WAIT_S = 60.0  # how long a request waits for a lost dispatcher to come back
_RETRY_MIN_S, _RETRY_MAX_S = 0.05, 1.0  # between tries to reach a lost dispatcher
_EOS = object()
_DISPATCHER = object()  # the `state` of a connection to the dispatcher

# This process's registered workers by address (from their registration to their
# close; read by consumers on other threads: only whole-item operations on it)
LOCAL_WORKERS: dict[str, Worker] = {}


class _Task:
    def __init__(self, worker: Worker, info: dict):
        self.worker = worker
        self.id = info["task"]
        self.job = info["job"]
        self.dataset = info["d"]
        self.mode = info["mode"]
        self.num_consumers = info["nc"]  # (-1: not coordinated; 0 is, as TF's)
        self.compress = bool(info.get("z", 0))
        self.worker_index = info.get("wi", -1)  # in the dispatcher's fixed worker list
        self.num_workers = info.get("nw", 0)
        self.queue: asyncio.Queue = asyncio.Queue(_BUFFER)
        self.producer: asyncio.Task | None = None
        self.started = asyncio.Event()  # (set once the pass began, or failed to)
        self.failed_to_start = False  # (its dataset could not be made or checked)
        self.ended = False
        self.error: BaseException | None = None
        self.rounds: dict[int, list] = {}  # coordinated reads: round -> its elements
        self.taken: collections.Counter = collections.Counter()  # round -> consumers served
        self.next_round = 0
        self.round_lock = asyncio.Lock()
        self.serving = asyncio.Lock()  # one uncoordinated `get` takes elements at a time

    def start(self) -> None:
        if self.producer is None:
            self.producer = asyncio.ensure_future(self._produce())

    async def _produce(self) -> None:
        own = None  # (a session of this task's own: closed as its pass ends)
        try:
            hint = (self.num_workers, self.worker_index) if self.worker_index >= 0 else None
            value, session, mine = await self.worker.dataset_value(self.dataset, hint)
            own = session if mine else None
            if self.num_consumers >= 0 and value.cardinality() != -1:
                raise errors.FailedPreconditionError(
                    None, None, "Round robin reads require that the input dataset has "
                    f"infinite cardinality, but the dataset has cardinality "
                    f"{value.cardinality()}. Consider adding a `.repeat()` transformation "
                    "to the dataset."
                )  # fmt: skip
            if self.mode == p.ShardingPolicy.DYNAMIC:
                value = _with_splits(value, self)
            elif self.mode != p.ShardingPolicy.OFF:
                value = self._static_shard(value)
            env = pl.Env(session)
            stream = value.iterate(env)
            self.started.set()
            try:
                async for elem in stream:
                    await self.queue.put(elem)
            except errors.OpError as e:  # (TF's worker's words before its iterator's error)
                raise type(e)(e.node_def, e.op, f"Failed to get element: {e.message}") from e
            finally:
                await stream.aclose()
        except asyncio.CancelledError:
            raise
        except errors.OpError as e:
            self.error = e
        except Exception as e:  # noqa: BLE001 - reported to consumers as TF's UnknownError
            self.error = errors.UnknownError(None, None, f"{type(e).__name__}: {e}")
        finally:
            self.failed_to_start = not self.started.is_set()
            self.started.set()
            if own is not None:
                own.close()
        await self.queue.put(_EOS)

    def _static_shard(self, value: pl.DatasetValue) -> pl.DatasetValue:
        """`value`'s shard for this worker (its index in the dispatcher's fixed worker
        list): FILE shards the source's files, DATA the elements at the end of the
        pipeline, FILE_OR_DATA files where the source has files, else elements; HINT
        leaves the pipeline as it is but for its `shard(SHARD_HINT, SHARD_HINT)`s,
        which became shard(workers, index) when the graph was loaded."""
        if self.worker_index < 0:
            raise errors.NotFoundError(
                None, None, "Failed to shard dataset in tf.data service: Worker "
                f"{self.worker.address} is not in the workers list. Got workers list ."
            )  # fmt: skip
        n, i = self.num_workers, self.worker_index
        mode = self.mode
        if mode == p.ShardingPolicy.HINT:
            return value
        if mode in (p.ShardingPolicy.FILE, p.ShardingPolicy.FILE_OR_DATA):
            sharded = _shard_files(value, n, i)
            if sharded is not None:
                return sharded
            if mode == p.ShardingPolicy.FILE:
                raise errors.NotFoundError(
                    None, None, "Failed to get element: Found an unshardable source "
                    "dataset: FILE sharding needs a dataset reading files (such as "
                    "TextLineDataset or TFRecordDataset) at the source of the pipeline"
                )  # fmt: skip
        return _EveryNth(value, n, i)

    async def next_element(self):
        """The stream's next element, or _EOS (for ever after the end); its error."""
        if self.ended:
            return _EOS
        self.start()
        elem = await self.queue.get()
        if elem is _EOS:
            try:  # (put back: another `get` waiting here ends too)
                self.queue.put_nowait(_EOS)
            except asyncio.QueueFull:
                pass
            if not self.ended:
                self.ended = True
                if self.error is not None:
                    raise self.error
        return elem

    def ready_elements(self, most: int, budget: int) -> list:
        """Up to `most` elements already produced (no wait), about `budget` bytes at
        most; the end of the stream stays for the next request."""
        out = []
        while len(out) < most and budget > 0 and not self.ended:
            try:
                elem = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if elem is _EOS:  # (the last item: put back for the next request, which
                self.queue.put_nowait(_EOS)  # ends the stream or raises its error)
                break
            out.append(elem)
            budget -= _nbytes(elem)
        return out

    async def get(self, consumer: int, round_: int):
        if self.num_consumers < 0:
            return await self.next_element()
        # (a plain consumer of a coordinated job, which TF lets join it, asks as
        # consumer 0 for round 0: TF's defaults)
        consumer = max(consumer, 0)
        self.start()  # (its dataset's checks come first: TF's task is made first)
        await self.started.wait()
        if consumer >= self.num_consumers:  # (0 consumers: every one, as TF's)
            if self.failed_to_start or self.ended:
                return await self.next_element()  # (its error, or the end)
            raise errors.FailedPreconditionError(
                None, None, f"Failed to get element: Requesting data for consumer index "
                f"{consumer}, but the task is configured for only {self.num_consumers} "
                "consumers"
            )  # fmt: skip
        async with self.round_lock:
            while self.next_round <= round_:
                elems = []
                for _ in range(self.num_consumers):
                    elem = await self.next_element()
                    if elem is _EOS:
                        break
                    elems.append(elem)
                full = len(elems) == self.num_consumers
                self.rounds[self.next_round] = elems if full else None
                self.next_round += 1
        if round_ not in self.rounds:  # (TF's words, its closing backquote too)
            raise errors.FailedPreconditionError(
                None, None, f"Failed to get element: Consumer {consumer} requested data "
                f"for round {round_}, but the current round has already reached "
                f"{self.next_round - 1}. This may indicate that the consumer was restarted "
                "with the same iteration name.`"
            )  # fmt: skip
        elems = self.rounds[round_]
        self.taken[round_] += 1
        if self.taken[round_] >= self.num_consumers:
            del self.rounds[round_], self.taken[round_]
        return _EOS if elems is None else elems[consumer]

    def cancel(self) -> None:
        if self.producer is not None:
            self.producer.cancel()
        self.ended = True
        self.started.set()  # (a `get` waiting for the start goes on to the end)
        self.error = errors.CancelledError(None, None, f"Task {self.id} was cancelled")
        while True:  # wake the `get`s waiting on it
            try:
                self.queue.put_nowait(_EOS)
            except asyncio.QueueFull:
                self.queue.get_nowait()
                continue
            break


def _indexed(src) -> bool:
    """Whether the source's element i can be made directly (each element a split)."""
    if isinstance(src, pl.Zip):
        return all(_indexed(d) for d in src.inputs)
    if isinstance(src, pl.Concatenate):
        return _indexed(src.first) and _indexed(src.second)
    return isinstance(src, pl.Range | pl.TensorSlices | pl.Tensors)


def _files(src) -> bool:
    return isinstance(getattr(src, "paths", None), list) and not _indexed(src)


def _count(src) -> int:
    """The source's number of splits: its elements, its files, or 1 (the whole of a
    source that cannot be split, such as a generator: one worker makes it all)."""
    if isinstance(src, pl.Zip):
        return min(_count(d) for d in src.inputs)
    if isinstance(src, pl.Concatenate):
        return _count(src.first) + _count(src.second)
    if isinstance(src, pl.Range):
        return len(src.r)
    if isinstance(src, pl.TensorSlices):
        return src.n
    if isinstance(src, pl.Tensors):
        return 1
    return len(src.paths) if _files(src) else 1


def _element(src, i: int) -> tuple:
    if isinstance(src, pl.Zip):
        return sum((_element(d, i) for d in src.inputs), ())
    if isinstance(src, pl.Concatenate):
        n = _count(src.first)
        return _element(src.first, i) if i < n else _element(src.second, i - n)
    if isinstance(src, pl.Range):
        return (np.array(src.r[i], src.dtype),)
    if isinstance(src, pl.Tensors):
        return tuple(np.array(c, dtype=c.dtype, copy=True) for c in src.components)
    return tuple(np.array(c[i], dtype=c.dtype, copy=True) for c in src.components)


class _Splits(pl.DatasetValue):
    """A source that yields the splits the dispatcher hands this worker: each element
    of a range, of tensors or tensor slices, or of zips and concatenations of them is
    a split; each file of a file dataset is one; any other source is one split."""

    def __init__(self, source: pl.DatasetValue, task: _Task, provider: int):
        self.source = source
        self.task = task
        self.provider = provider  # which of the pipeline's sources (a zip has several)
        self.opened = 0  # passes over it: the input's repetition

    async def iterate(self, env):
        rep, self.opened = self.opened, self.opened + 1
        src = self.source
        n = _count(src)
        worker, job = self.task.worker, self.task.job

        def ask():  # (the next split is asked for while this one's elements are made)
            return asyncio.ensure_future(worker.next_split(job, rep, n, self.provider))

        nxt = ask()
        try:
            while True:
                i = await nxt
                if i is None:
                    return
                nxt = ask()
                if _indexed(src):
                    yield _element(src, i)
                    continue
                if _files(src):
                    one = copy.copy(src)
                    one.paths = [src.paths[i]]
                else:
                    one = src
                async for elem in one.iterate(env):
                    yield elem
        finally:
            nxt.cancel()
            nxt.add_done_callback(_retrieved)


def _with_splits(value: pl.DatasetValue, task: _Task, providers=None) -> pl.DatasetValue:
    """`value` with each of its sources replaced by the dispatcher's splits (DYNAMIC
    sharding): the end of its chain of `input`s, or each input of a zip there (each
    with splits of its own, as TF's zip: a worker pairs the splits it got of each)."""
    providers = providers if providers is not None else itertools.count()
    stage = _in_process(value)
    inner = getattr(stage, "input", None)
    if isinstance(inner, pl.DatasetValue):
        stage = copy.copy(stage)
        stage.input = _with_splits(inner, task, providers)
        return stage
    if isinstance(stage, pl.Zip) and not _indexed(stage):
        stage = copy.copy(stage)
        stage.inputs = [_with_splits(d, task, providers) for d in stage.inputs]
        return stage
    if isinstance(stage, pl.Zip):  # (of indexed sources: each with its own splits)
        stage = copy.copy(stage)
        stage.inputs = [_Splits(d, task, next(providers)) for d in stage.inputs]
        return stage
    return _Splits(stage, task, next(providers))


class _EveryNth(pl.DatasetValue):
    """Elements i, i + n, i + 2n, ... of `input` (DATA sharding's shard i of n)."""

    def __init__(self, input_value: pl.DatasetValue, n: int, i: int):
        self.input, self.n, self.i = input_value, n, i

    def cardinality(self) -> int:
        c = self.input.cardinality()
        return c if c < 0 else c // self.n + (1 if c % self.n > self.i else 0)

    async def iterate(self, env):
        source = self.input.iterate(env)
        try:
            k = 0
            async for elem in source:
                if k % self.n == self.i:
                    yield elem
                k += 1
        finally:
            await source.aclose()


def _shard_files(value: pl.DatasetValue, n: int, i: int):
    """`value` with the files of its file source cut to every n-th from i (FILE
    sharding), or None where its chain of inputs ends in no file source."""
    stage = _in_process(value)
    if isinstance(stage, pl.Zip | pl.Concatenate):
        return None
    if _files(stage):
        stage = copy.copy(stage)
        stage.paths = stage.paths[i::n]
        return stage
    inner = getattr(stage, "input", None)
    if not isinstance(inner, pl.DatasetValue):
        return None
    if _indexed(inner) and _is_file_names(inner):  # (file names sliced, then read)
        stage = copy.copy(stage)
        stage.input = _EveryNth(inner, n, i)
        return stage
    sharded = _shard_files(inner, n, i)
    if sharded is None:
        return None
    stage = copy.copy(stage)
    stage.input = sharded
    return stage


def _is_file_names(src) -> bool:
    """Whether `src` is a list of file names read by the stage above it (the
    `from_tensor_slices(paths).interleave(TextLineDataset)` form)."""
    comps = getattr(src, "components", None)
    return (
        isinstance(src, pl.TensorSlices)
        and isinstance(comps, list | tuple)
        and len(comps) == 1
        and np.asarray(comps[0]).dtype.hasobject
    )


def _retrieved(fut) -> None:
    if not fut.cancelled():
        fut.exception()  # (a split asked for ahead and not wanted: at most once)


def _in_process(stage: pl.DatasetValue) -> pl.DatasetValue:
    """`stage`, or the in-process form of a prefetch served by an input worker process
    (asyncflow/data/remote.py): its source must ask this worker for splits."""
    local = getattr(stage, "local", None)
    return local if isinstance(local, pl.DatasetValue) else stage


class Worker:
    """A worker on the running loop (`await start(host, port, dispatcher)`, `close()`)."""

    def __init__(self, secret: bytes, tls=None):
        self.secret = secret
        self.tls = tls
        self.tasks: dict[int, _Task] = {}
        # dataset id -> (graph, session, dataset tensor, whether it makes resources)
        self.graphs: dict[str, tuple] = {}
        self._loading: dict[str, asyncio.Future] = {}
        self.dispatcher: wire.Connection | None = None
        self.connections: set[wire.Connection] = set()
        self.server = None
        self.address = ""
        self._requests: set[asyncio.Task] = set()
        self._task_added = asyncio.Event()
        self._dropped: collections.deque = collections.deque(maxlen=1 << 12)  # recent drops
        # tasks a LOCAL read of this process deleted (recent ones): id -> whether it
        # had ended (TF's deleted_tasks_)
        self._deleted: collections.OrderedDict[int, bool] = collections.OrderedDict()
        self.loop: asyncio.AbstractEventLoop | None = None  # (the one it serves on)
        self._dispatcher_address = ("", 0)
        self._registered = asyncio.Event()  # set while connected to the dispatcher
        self._reconnecting: asyncio.Task | None = None
        self._closing = False
        self.incarnation = 0  # the dispatcher's (see protocol.py)
        self.gets = 0  # `get` requests answered (tests watch that a dropped read stops)

    async def start(self, host: str, port: int, dispatcher: str, worker_address: str) -> int:
        """Serve on host:port and register with the dispatcher at `dispatcher`; the
        port.  `worker_address` is what consumers dial ("%port%" becomes the port).

        Raises UnavailableError when the dispatcher cannot be reached."""
        self.loop = asyncio.get_running_loop()
        self.server = await wire.serve(self._new_connection, host, port, self.tls)
        port = self.server.sockets[0].getsockname()[1]
        self.address = worker_address.replace("%port%", str(port))
        self._dispatcher_address = split_address(dispatcher)
        await self._register()
        LOCAL_WORKERS[self.address] = self
        return port

    async def _register(self, wait_s: float = 10.0) -> None:
        """Connect to the dispatcher and register, taking the tasks it gives.

        Raises UnavailableError when it cannot be reached."""
        host, port = self._dispatcher_address
        conn = await wire.connect(
            host, port, self.secret, self.on_frame, self._dispatcher_lost, wait_s, self.tls
        )
        conn.state = _DISPATCHER  # (it may send tasks before its reply comes)
        try:
            reply, _ = await p.call(conn, "worker", {"addr": self.address})
            tasks = reply.get("tasks", [])
            if not isinstance(tasks, list):
                raise p.bad("tasks")
            incarnation = p.check_int(reply, "inc", 0, 0, p.MAX_INCARNATION)
            if incarnation != self.incarnation:
                self._forget()  # (a dispatcher without the state it had: ids restart)
                self.incarnation = incarnation
            for info in tasks:
                self._add_task(info)
        except BaseException:
            conn.abort(errors.CancelledError(None, None, "Registration failed"))
            raise
        self.dispatcher = conn
        self._registered.set()

    async def _reconnect(self) -> None:
        """Register again with the dispatcher, trying until it answers or this worker
        stops (backing off: a dispatcher being restarted comes back on its port)."""
        delay = _RETRY_MIN_S
        while not self._closing:
            await asyncio.sleep(delay)
            try:
                await self._register(wait_s=2.0)
                return
            except errors.OpError:
                delay = min(2 * delay, _RETRY_MAX_S)

    async def call_dispatcher(self, method: str, meta: dict):
        """(reply meta, payload) of a request to the dispatcher, waiting (at most
        `DISPATCHER_WAIT_S`) for it to come back when it is lost.

        Raises UnavailableError when it does not come back; its own errors."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISPATCHER_WAIT_S
        while True:
            conn = self.dispatcher
            if conn is not None and conn.closed is None:
                try:
                    return await p.call(conn, method, meta)
                except (errors.UnavailableError, errors.CancelledError):
                    if conn.closed is None or self._closing:
                        raise  # (the dispatcher's own answer, or this worker stopping)
            left = deadline - loop.time()
            if left > 0 and not self._closing:
                try:
                    await asyncio.wait_for(self._registered.wait(), left)
                    continue
                except TimeoutError:
                    pass
            raise errors.UnavailableError(
                None, None, f"tf.data service worker {self.address} lost its dispatcher"
            )

    def _new_connection(self) -> wire.Connection:
        conn = wire.Connection(self.secret, True, self.on_frame, self._client_lost)
        self.connections.add(conn)
        return conn

    def _client_lost(self, conn, error) -> None:
        self.connections.discard(conn)

    def _dispatcher_lost(self, conn, error) -> None:
        # (elements of the tasks it has keep being served while it registers again)
        if conn is not self.dispatcher or self._closing:
            return
        self._registered.clear()
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.ensure_future(self._reconnect())

    def close(self) -> None:
        self._closing = True
        if LOCAL_WORKERS.get(self.address) is self:
            del LOCAL_WORKERS[self.address]
        self._registered.set()  # (a request waiting for the dispatcher fails now)
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self.server is not None:
            self.server.close()
        for task in self.tasks.values():
            task.cancel()
        for req in self._requests:
            req.cancel()
        err = errors.UnavailableError(None, None, f"tf.data service worker {self.address} stopped")
        for conn in list(self.connections):
            conn.abort(err)
        if self.dispatcher is not None:
            self.dispatcher.abort(err)
        for _, session, *_ in self.graphs.values():
            session.close()

    def on_frame(self, conn, kind, rid, meta, payload) -> None:
        if kind != wire.RUN:
            raise errors.InvalidArgumentError(None, None, f"Unexpected frame kind {kind}")
        method = meta.get("m")
        if method == "get":
            req = asyncio.ensure_future(self._answer_get(conn, rid, meta))
            self._requests.add(req)
            req.add_done_callback(self._requests.discard)
        elif method == "task" and conn.state is _DISPATCHER:
            p.answer(conn, rid, self._task, meta)
        elif method == "drop" and conn.state is _DISPATCHER:
            p.answer(conn, rid, self._drop, meta)
        else:
            p.answer(conn, rid, _refused, method)

    def _task(self, meta):
        self._add_task(meta)
        return {}, None

    def _add_task(self, info) -> None:
        if not isinstance(info, dict):
            raise p.bad("task")
        p.check_int(info, "task", None, 0)
        p.check_int(info, "job", None, 0)
        p.check_str(info, "d")
        p.check_int(info, "mode", None, 0, 5)
        p.check_int(info, "nc", None, -1, 1 << 20)
        p.check_int(info, "z", 0, 0, 1)
        p.check_int(info, "wi", -1, -1, 1 << 20)
        p.check_int(info, "nw", 0, 0, 1 << 20)
        if info["task"] not in self.tasks and info["task"] not in self._deleted:
            self.tasks[info["task"]] = _Task(self, info)
            self._task_added.set()

    def _forget(self) -> None:
        """Drop every task and dataset: they were an earlier dispatcher's, whose ids
        the one registered with now gives out again."""
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()
        self._dropped.clear()
        self._deleted.clear()
        self._loading.clear()
        for _, session, *_ in self.graphs.values():
            session.close()
        self.graphs.clear()

    def _drop(self, meta):
        task_id = p.check_int(meta, "task", None, 0)
        self._dropped.append(task_id)
        self._remove(task_id)
        return {}, None

    def _remove(self, task_id: int) -> _Task | None:
        """Stop and forget task `task_id` (its dataset's graph and session too, when it
        was that dataset's last); the task, or None when there was none."""
        task = self.tasks.pop(task_id, None)
        if task is not None:
            task.cancel()
            if all(t.dataset != task.dataset for t in self.tasks.values()):
                # (its last task: the dataset's graph and session go until a task needs them)
                self._loading.pop(task.dataset, None)
                entry = self.graphs.pop(task.dataset, None)
                if entry is not None:
                    entry[1].close()
        return task

    def delete_local_task_threadsafe(self, task_id: int) -> None:
        """`delete_local_task` on this worker's loop, from any thread (nothing when the
        worker stopped)."""
        loop = self.loop
        if loop is None or self._closing:
            return
        try:
            loop.call_soon_threadsafe(self.delete_local_task, task_id)
        except RuntimeError:  # (its loop closed meanwhile)
            pass

    def delete_local_task(self, task_id: int) -> None:
        """Delete task `task_id`, which a LOCAL read of this process has done with
        (TF's DeleteLocalTask): a later `get` of it fails (FailedPreconditionError,
        TF's words) or, when its stream had ended, ends.  The dispatcher still lists
        it (TF's later consumer of the job was recorded failing so too)."""
        task = self.tasks.get(task_id)
        if task is None:
            return
        self._deleted[task_id] = task.ended
        while len(self._deleted) > _DELETED_KEPT:
            self._deleted.popitem(last=False)
        self._remove(task_id)

    async def _answer_get(self, conn, rid, meta) -> None:
        # (the get's coroutine is made once this task runs: a request cancelled before
        # that, by close(), leaves no coroutine that was never awaited)
        await p.answer_async(conn, rid, self._get(meta))
        self.gets += 1

    async def _get(self, meta):
        task_id = p.check_int(meta, "task", None, 0)
        consumer = p.check_int(meta, "c", -1)
        round_ = p.check_int(meta, "r", 0, 0)
        most = p.check_int(meta, "n", 1, 1, p.MAX_BATCH)
        task = await self._task_by_id(task_id)
        if task is None:
            if task_id not in self._deleted:
                return {"gone": True}, None
            if self._deleted[task_id]:
                return {"eos": True}, None
            raise errors.FailedPreconditionError(
                None, None, f"Got request for local task {task_id} of worker "
                f"{self.address}, which has been deleted. You may be creating a duplicate "
                "iteration which has already finished. To fix this, make sure to create "
                "your dataset only once, as opposed to re-creating it repeatedly inside a "
                "loop."
            )  # fmt: skip
        if task.num_consumers >= 0:
            elem = await task.get(consumer, round_)
            return ({"eos": True}, None) if elem is _EOS else p.pack([elem], task.compress)
        async with task.serving:  # (in arrival order: a newer `get` takes no element
            elem = await task.next_element()  # an older one was woken for)
            if elem is _EOS:
                return {"eos": True}, None
            elems = [elem]
            if most > 1:
                elems += task.ready_elements(most - 1, _BATCH_BYTES - _nbytes(elem))
        return p.pack(elems, task.compress)

    async def _task_by_id(self, task_id: int) -> _Task | None:
        """Task `task_id`, waiting a little for it: a consumer may learn of a task from
        the dispatcher before the dispatcher's message creating it reaches here; None
        when it does not come (a task dropped, or never ours)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _TASK_WAIT_S
        while task_id not in self.tasks:
            left = deadline - loop.time()
            if left <= 0 or task_id in self._dropped or task_id in self._deleted:
                return None
            self._task_added.clear()
            try:
                await asyncio.wait_for(self._task_added.wait(), left)
            except TimeoutError:
                pass
        return self.tasks[task_id]

    # -- datasets
    async def dataset_value(self, dataset: str, hint=None) -> tuple:
        """A fresh value of dataset `dataset` (its graph fetched and imported once;
        `hint`: (workers, this worker's index) for its SHARD_HINT shards), the session
        it runs in, and whether that session is the caller's to close: the dataset's,
        or, where its graph makes resources (a queue, a table, an accumulator...:
        kernel_api.PASS_RESOURCE_OPS, shared or not), one of its own, as TF's worker
        makes each task's dataset with resources of its own."""
        import asyncflow as af

        entry = self.graphs.get(dataset)
        if entry is None:
            fut = self._loading.get(dataset)
            if fut is None:
                fut = self._loading[dataset] = asyncio.ensure_future(self._load(dataset, hint))
            entry = await asyncio.shield(fut)
        g, session, tensor, resources = entry
        if resources:
            session = af.Session(graph=g)
        try:
            value = await session.arun(tensor)
        except BaseException:
            if resources:
                session.close()
            raise
        return (value[()] if isinstance(value, np.ndarray) else value), session, resources

    async def _load(self, dataset: str, hint=None):
        import asyncflow as af  # (the whole API: the graph may use any op)

        reply, payload = await self.call_dispatcher("dataset", {"d": dataset})
        graph = p.read_graph(reply, payload)
        if hint is not None:
            graph = _fill_shard_hints(graph, *hint)
        g = af.Graph()
        with g.as_default():
            af.import_graph_def(graph, name="")
        tensor = g.get_tensor_by_name(p.check_str(reply, "out"))
        resources = any(op.type in PASS_RESOURCE_OPS for op in g.get_operations())
        entry = self.graphs[dataset] = (g, af.Session(graph=g), tensor, resources)
        return entry

    async def next_split(self, job: int, rep: int, n: int, provider: int = 0) -> int | None:
        meta = {"job": job, "rep": rep, "n": n, "src": provider}
        reply, _ = await self.call_dispatcher("split", meta)
        if reply.get("end"):
            return None
        return p.check_int(reply, "i", None, 0, n - 1)


def _fill_shard_hints(graph: bytes, n: int, i: int):
    """`graph` (GraphDef bytes) with each `shard(SHARD_HINT, SHARD_HINT)` made
    `shard(n, i)`: HINT sharding's shard of this worker (index i of n in the fixed
    worker list); the graph as it is (bytes) when it has none."""
    from asyncflow.protos import graph_pb2

    g = graph_pb2.GraphDef.FromString(graph)
    consts = {node.name: node for node in g.node if node.op == "Const"}

    def is_hint(name: str) -> bool:
        node = consts.get(name.split(":")[0])
        if node is None:
            return False
        t = node.attr["value"].tensor
        return list(t.int64_val) == [-1] and not t.tensor_shape.dim

    changed = False
    for node in list(g.node):
        if node.op != "ShardDataset" or len(node.input) < 3:
            continue
        if not (is_hint(node.input[1]) and is_hint(node.input[2])):
            continue
        for k, value in ((1, n), (2, i)):
            const = g.node.add()
            const.CopyFrom(consts[node.input[k].split(":")[0]])
            const.name = f"{node.name}/shard_hint_{k}"
            const.attr["value"].tensor.int64_val[:] = [value]
            node.input[k] = const.name
        changed = True
    return g.SerializeToString() if changed else graph


def _nbytes(elem) -> int:
    n = 0
    for c in elem:
        if isinstance(c, np.ndarray) and c.dtype.hasobject:
            n += sum(len(x) if isinstance(x, bytes | str) else 8 for x in c.flat)
        else:
            n += getattr(c, "nbytes", 8)
    return n


def _refused(method):
    raise errors.UnimplementedError(None, None, f"Unknown tf.data service method {method!r}")
