"""The master's worker across a cluster: `Session("grpc://host:port")`.

A session with a "grpc://" target gets a `ClusterWorker`.  At construction it asks the
target task for the cluster and then every task the session may use
(`ConfigProto.device_filters`; the target's own task always) for its devices, which the
placer sees as `RemoteDevice`s named /job:J/replica:0/task:T/device:CPU:0.  The master
prunes, places and partitions as for one process; `register_partitions` groups the
partitions by task and encodes them once (GraphDefs); a step is one RUN message per
task carrying that task's feeds, answered with its fetches.  Registration travels
lazily, in front of the first RUN on each connection (no round trip of its own), so a
connection opened later (another event loop, a reconnect) re-registers by itself.  The
tf.data function bodies a registration's partitions call travel once per connection:
later registrations name them by digest, which the task holds because the connection
delivers in order and both sides keep the same bounded list of sets
(graph_codec.FUNCTION_BODIES_KEPT, oldest out first).

Fault tolerance: every connection pings a task that owes it an answer and gives up
after `wire.Connection.dead_after` seconds of silence; the first task to fail a step
(a kernel error, a lost connection: UnavailableError) has the step aborted on every
other task, and the client gets that first error.  A task that restarted since the
session was created (its incarnation changed) answers AbortedError: its state is gone,
the session must be recreated (as MonitoredSession does).

Invariant: a connection belongs to the event loop that opened it; `registered` lists
the handles sent on the current connection, `functions` the digests of the function
bodies sent on it that the task still keeps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import secrets
import socket
import threading

import numpy as np

from asyncflow import device_spec, errors
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import ClusterSpec, split_address
from asyncflow.distributed.graph_codec import (
    FUNCTION_BODIES_KEPT,
    encode_functions,
    encode_partition,
    functions_digest,
)
from asyncflow.graph_io import attr_value
from asyncflow.protos.cost_graph_pb2 import CostGraphDef
from asyncflow.protos.step_stats_pb2 import StepStats
from asyncflow.worker import traced

__all__ = ["ClusterWorker", "RemoteDevice", "parse_target", "peer_tasks"]

_STEP_MASK = (1 << 62) - 1
_DISCOVERY_TIMEOUT = 30.0


def parse_target(target: str) -> tuple[str, int]:
    """(host, port) of "grpc://host:port".  Raises InvalidArgumentError."""
    rest = target.split("://", 1)[1] if "://" in target else target
    try:
        host, port = split_address(rest)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Invalid session target {target!r}: expected grpc://host:port"
        ) from None
    return host, port


def connect_host(host: str) -> str:
    return "127.0.0.1" if host == "localhost" else host


class RemoteDevice:
    """A device of another task, as the placer and partitioner see it."""

    xp = np
    run_mode = "remote"

    def __init__(self, name, device_type, incarnation, memory_limit, host_memory, priority):
        self.name = name
        self.device_type = device_type
        self.incarnation = incarnation
        self.memory_limit = memory_limit
        self.host_memory = host_memory
        if priority:
            self.placement_priority = priority
        spec = device_spec.DeviceSpec.from_string(name)
        self.task_key = (spec.job, spec.task)
        self.index = spec.device_index or 0

    def kernel_for(self, op_def):
        return op_def.kernel_for(self.device_type)

    def supports(self, op_def) -> bool:
        return self.kernel_for(op_def) is not None

    def supports_op(self, op) -> bool:
        if self.kernel_for(op.op_def) is None:
            return False
        if self.device_type == "GPU":  # as devices/gpu.py: no strings, no references
            from asyncflow.devices.gpu import GPU_DTYPES

            for t in (*op._inputs, *op._outputs):
                if t._is_ref or t.dtype.base_dtype.name not in GPU_DTYPES:
                    return False
        return True

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"RemoteDevice({self.name})"


class _Channel:
    """The session's connection to one task (re-opened on demand)."""

    __slots__ = (
        "name", "host", "sni", "port", "incarnation", "conn", "registered", "connecting",
        "functions",
    )  # fmt: skip

    def __init__(self, name, address, incarnation):
        self.name = name
        host, self.port = split_address(address)
        self.sni = host  # the name a TLS certificate must carry
        self.host = connect_host(host)
        self.incarnation = incarnation
        self.conn: wire.Connection | None = None
        self.registered: set[int] = set()
        self.connecting: asyncio.Future | None = None
        # digests of the function bodies sent on the current connection that the task
        # still keeps (the same list as its own: oldest out first)
        self.functions: dict[str, None] = {}

    def reconnected(self) -> None:
        """A new connection (or none): the task knows nothing sent before."""
        self.registered = set()
        self.functions = {}

    def tell_functions(self, digest: str) -> bool:
        """Whether function bodies `digest` must travel with a registration on the
        current connection (the task has not got them); noted as sent if so."""
        if digest in self.functions:
            return False
        if len(self.functions) >= FUNCTION_BODIES_KEPT:
            del self.functions[next(iter(self.functions))]
        self.functions[digest] = None
        return True


class _TaskGraph:
    __slots__ = (
        "channel", "handle", "meta", "tensors", "feed_ids", "fetch_ids", "functions",
    )  # fmt: skip


class RemoteGraph:
    __slots__ = ("tasks", "num_fetches", "handle")


class ClusterWorker:
    """The Worker protocol over the cluster a target belongs to."""

    def __init__(self, target: str, config):
        self.target = target
        self.secret = wire.cluster_secret()
        self.tls = wire.tls_config()
        host, port = parse_target(target)
        timeout = getattr(config, "operation_timeout_in_ms", 0) or 0
        timeout = timeout / 1000.0 if timeout > 0 else _DISCOVERY_TIMEOUT
        filters = [
            device_spec.DeviceSpec.from_string(f)
            for f in (getattr(config, "device_filters", None) or [])
        ]
        info = _run_in_thread(_discover(host, port, self.secret, filters, timeout, self.tls))
        self.cluster = ClusterSpec(
            {job: {int(i): a for i, a in tasks.items()} for job, tasks in info["cluster"].items()}
        )
        self.job, self.task = info["job"], info["task"]
        self.devices: list = []
        self._channels: dict[tuple, _Channel] = {}
        for (job, task), status in info["tasks"]:
            name = f"/job:{job}/replica:0/task:{task}"
            address = (
                f"{host}:{port}"
                if (job, task) == (self.job, self.task)
                else (self.cluster.task_address(job, task))
            )
            self._channels[(job, task)] = _Channel(name, address, status["incarnation"])
            for d in status["devices"]:
                self.devices.append(RemoteDevice(*d))
        # Ops with no device go to the target's task, as TF's master places them.
        self.default_device = f"/job:{self.job}/replica:0/task:{self.task}"
        self.share_devices = bool(
            getattr(getattr(config, "experimental", None), "share_cluster_devices_in_session", 0)
        )
        self._init_steps(secrets.randbits(62))

    def _init_steps(self, step_base: int) -> None:
        self._handles = itertools.count(1)
        self._step_base = step_base
        self._in_flight: dict[int, list] = {}  # global step id -> its tasks' channels
        self._closed = False

    @classmethod
    def of_tasks(cls, cluster: ClusterSpec, tasks: dict, secret: bytes, tls) -> ClusterWorker:
        """A worker over `tasks` ((job, index) -> incarnation) of `cluster`, known
        without asking them: a task reaching other tasks for its dataset functions
        (distributed/task_functions.py).  Its step ids are used as given."""
        self = cls.__new__(cls)
        self.target = None
        self.secret, self.tls, self.cluster = secret, tls, cluster
        self.job = self.task = self.default_device = None
        self.devices = []
        self.share_devices = False
        self._channels = {
            (job, task): _Channel(
                f"/job:{job}/replica:0/task:{task}", cluster.task_address(job, task), inc
            )
            for (job, task), inc in tasks.items()
        }
        self._init_steps(0)
        return self

    # -- the Worker protocol
    def register_graph(self, graph):
        raise errors.UnimplementedError(
            None, None, "A cluster worker registers partitions, not lowered plans"
        )

    def register_partitions(self, parts, fetch_map, feed_tensors, trace=False) -> RemoteGraph:
        """Encode `parts` (the master's partitions) per task; the handle of the lot.
        `trace`: the tasks lower them as traced plans (per-node times and memory), for
        steps run with RunOptions(trace_level >= SOFTWARE_TRACE) and a RunMetadata.

        Raises UnimplementedError for an op whose attrs cannot cross the wire."""
        by_task: dict[tuple, list] = {}
        for p in parts:
            by_task.setdefault(p.device.task_key, []).append(p)
        graph = RemoteGraph()
        graph.handle = next(self._handles)
        graph.num_fetches = len(fetch_map)
        graph.tasks = []
        index_of = {}
        for key, tparts in by_task.items():
            for i, p in enumerate(tparts):
                index_of[id(p)] = (key, i)
        for key, tparts in by_task.items():
            feed_ids = sorted(
                {s[1] for p in tparts for n in p.nodes for s in n.inputs if s[0] == "feed"}
                | {f[1] for p in tparts for f in p.fetches if f[0] == "feed"}
            )
            local = {g: i for i, g in enumerate(feed_ids)}
            blobs, specs = [], []
            for p in tparts:
                blobs.append(np.frombuffer(encode_partition(p.nodes, local), np.uint8))
                specs.append(
                    [["f", local[f[1]]] if f[0] == "feed" else [f[0], f[1]] for f in p.fetches]
                )
            fm, fetch_ids = [], []
            for k, (p, j) in enumerate(fetch_map):
                if id(p) not in index_of:  # (a fetch the caller gets elsewhere)
                    continue
                pkey, i = index_of[id(p)]
                if pkey == key:
                    fm.append([i, j])
                    fetch_ids.append(k)
            t = _TaskGraph()
            t.channel = self._channels[key]
            t.handle = graph.handle
            t.meta = {
                "h": graph.handle,
                "p": specs,
                "fd": [attr_value(feed_tensors[g].dtype).type for g in feed_ids],
                "fm": fm,
                "x": peer_tasks(tparts, key),
            }
            if trace:
                t.meta["tr"] = 1
            functions = encode_functions([n for p in tparts for n in p.nodes])
            t.functions = None
            if functions:  # (tf.data functions' bodies: the last blob, or their digest)
                t.meta["fh"] = functions_digest(functions)
                # (where the functions' state on other tasks is: task_functions.py)
                t.meta["dv"] = [_device_status(d) for d in self.devices]
                if self.share_devices:
                    t.meta["sd"] = 1
                t.functions = np.frombuffer(functions, np.uint8)
            t.tensors = blobs
            t.feed_ids = feed_ids
            t.fetch_ids = fetch_ids
            graph.tasks.append(t)
        return graph

    def deregister_graph(self, handle) -> None:
        for t in getattr(handle, "tasks", ()):
            ch = t.channel
            if t.handle in ch.registered:
                ch.registered.discard(t.handle)
                conn = ch.conn
                if conn is not None and conn.closed is None:
                    _on_loop(conn.loop, _send_quietly, conn, wire.DEREGISTER, {"h": t.handle})

    async def run_graph(
        self, handle, step_id, feed_values, options=None, run_metadata=None, step_timeout=None
    ) -> list:
        """One step: a RUN per task; the fetched values in fetch order.

        Raises the first task's error (UnavailableError for a lost task, after which
        the step is aborted on the others)."""
        gs = (self._step_base + step_id) & _STEP_MASK
        tasks = handle.tasks
        if run_metadata is not None and traced(options):
            return await self._run_traced(handle, gs, feed_values, run_metadata, step_timeout)
        if len(tasks) == 1 and len(tasks[0].fetch_ids) == handle.num_fetches:
            # The common case: one message each way.
            t = tasks[0]
            conn = t.channel.conn
            if conn is None or conn.closed is not None or conn.loop is not _loop():
                conn = await self._connect(t.channel)
            fut = self._send_run(conn, t, gs, feed_values, step_timeout)
            try:
                meta, payload = await fut
            except asyncio.CancelledError:
                self._abort_remote([t.channel], gs, _cancelled())
                raise
            values = wire.decode_tensors(meta.get("t", []), payload)
            if len(values) != handle.num_fetches:
                raise errors.InternalError(None, None, "A task answered the wrong fetches")
            return values
        return await self._run_many(handle, gs, feed_values, step_timeout)

    async def _run_traced(self, handle, gs, feed_values, run_metadata, step_timeout) -> list:
        """A traced step: each task answers its fetches, then its StepStats and
        CostGraphDef (serialized); the client's RunMetadata gets every task's device
        stats side by side (the task's device names are full: /job:J/replica:0/task:T)."""
        per_task = await self._run_many(handle, gs, feed_values, step_timeout, traced_reply=2)
        stats, cost = StepStats(), CostGraphDef()
        for ss, cg in per_task.traces:
            stats.dev_stats.extend(StepStats.FromString(ss.tobytes()).dev_stats)
            _append_cost_graph(cost, CostGraphDef.FromString(cg.tobytes()))
        if isinstance(getattr(run_metadata, "step_stats", None), StepStats):
            run_metadata.step_stats.CopyFrom(stats)
        else:
            run_metadata.step_stats = stats
        if isinstance(getattr(run_metadata, "cost_graph", None), CostGraphDef):
            run_metadata.cost_graph.CopyFrom(cost)
        else:
            run_metadata.cost_graph = cost
        return per_task.values

    async def _run_many(self, handle, gs, feed_values, step_timeout, traced_reply=0):
        tasks = handle.tasks
        futs = []
        channels = [t.channel for t in tasks]
        self._in_flight[gs] = channels
        try:
            for t in tasks:
                try:
                    conn = t.channel.conn
                    if conn is None or conn.closed is not None or conn.loop is not _loop():
                        conn = await self._connect(t.channel)
                    futs.append(
                        self._send_run(conn, t, gs, feed_values, step_timeout, traced_reply)
                    )
                except errors.OpError as e:
                    self._abort_remote(channels, gs, e)
                    await _settle(futs)
                    raise
            try:
                done, pending = await asyncio.wait(futs, return_when=asyncio.FIRST_EXCEPTION)
            except asyncio.CancelledError:
                self._abort_remote(channels, gs, _cancelled())
                raise
            if pending:  # a task failed: stop the step everywhere, then report it
                first = _first_error(futs)
                self._abort_remote(
                    [t.channel for t, f in zip(tasks, futs) if not f.done()], gs, first
                )
                await _settle(futs)
                raise first
            first = _first_error(futs)
            if first is not None:
                raise first
            out = [None] * handle.num_fetches
            traces = []
            for t, f in zip(tasks, futs):
                meta, payload = f.result()
                values = wire.decode_tensors(meta.get("t", []), payload)
                if traced_reply:
                    if len(values) < traced_reply:
                        raise errors.InternalError(None, None, "A task sent no trace")
                    traces.append(values[-traced_reply:])
                    values = values[:-traced_reply]
                if len(values) != len(t.fetch_ids):
                    raise errors.InternalError(None, None, "A task answered the wrong fetches")
                for k, v in zip(t.fetch_ids, values):
                    out[k] = v
            if traced_reply:
                return _Traced(out, traces)
            return out
        finally:
            self._in_flight.pop(gs, None)

    def _send_run(self, conn, t: _TaskGraph, gs, feed_values, step_timeout, trace=0):
        ch = t.channel
        if t.handle not in ch.registered:
            meta, tensors = t.meta, t.tensors
            if t.functions is not None:  # the bodies once per connection, then by digest
                sent = ch.tell_functions(meta["fh"])
                meta = {**meta, "fn": 1 if sent else 2}
                tensors = [*tensors, t.functions] if sent else tensors
            conn.send(wire.REGISTER, 0, meta, tensors)
            ch.registered.add(t.handle)
        meta = {"h": t.handle, "s": gs}
        if step_timeout:
            meta["to"] = step_timeout
        if trace:
            meta["tr"] = 1
        return conn.call(wire.RUN, meta, [feed_values[i] for i in t.feed_ids])

    async def _connect(self, ch: _Channel) -> wire.Connection:
        if self._closed:
            raise errors.CancelledError(None, None, "Session has been closed.")
        loop = _loop()
        if ch.connecting is not None and ch.connecting.get_loop() is loop:
            return await asyncio.shield(ch.connecting)
        old = ch.conn
        if old is not None and old.closed is None:
            _on_loop(old.loop, old.abort, _cancelled())
        ch.conn = None
        ch.reconnected()
        ch.connecting = loop.create_future()
        try:
            conn = await wire.connect(
                ch.host, ch.port, self.secret, _ignore_frame, tls=self.tls, server_hostname=ch.sni
            )
            if conn.incarnation != ch.incarnation:
                conn.abort(_cancelled())
                raise errors.AbortedError(
                    None,
                    None,
                    f"Task {ch.name} restarted since this session was created: the graphs "
                    "and state it held are gone; recreate the session",
                )
            ch.conn = conn
            ch.connecting.set_result(conn)
            return conn
        except BaseException as e:
            ch.connecting.set_exception(e)
            ch.connecting.exception()
            raise
        finally:
            ch.connecting = None

    def _abort_remote(self, channels, gs, error) -> None:
        meta = {"s": gs, **wire.encode_error(error)}
        for ch in channels:
            conn = ch.conn
            if conn is not None and conn.closed is None:
                _send_quietly(conn, wire.ABORT, meta)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        gs = (self._step_base + step_id) & _STEP_MASK
        channels = self._in_flight.get(gs) or list(self._channels.values())
        self._abort_remote(channels, gs, error)

    def abort_all(self, error: BaseException) -> None:
        for ch in self._channels.values():
            conn = ch.conn
            if conn is not None and conn.closed is None and conn.pending_calls:
                conn.abort(error)

    @property
    def steps_in_flight(self) -> int:
        return sum(ch.conn.pending_calls for ch in self._channels.values() if ch.conn is not None)

    @property
    def _steps(self) -> set:
        return set()

    def reset(self, containers=None) -> None:
        """Clear resource containers on every task of the session (Session.reset)."""
        chans = list(self._channels.values())
        _run_in_thread(_reset(chans, self.secret, containers, self.tls))

    def close(self) -> None:
        """Close the connections: the tasks drop this session's graphs and steps."""
        self._closed = True
        for ch in self._channels.values():
            conn, ch.conn = ch.conn, None
            ch.reconnected()
            if conn is not None and conn.closed is None:
                _shutdown(conn)
                _on_loop(conn.loop, conn.abort, _cancelled())


class _Traced:
    __slots__ = ("values", "traces")

    def __init__(self, values, traces):
        self.values, self.traces = values, traces


def _append_cost_graph(into: CostGraphDef, part: CostGraphDef) -> None:
    """`part`'s nodes after `into`'s, their ids (and the ids they refer to) shifted."""
    base = len(into.node)
    for n in part.node:
        m = into.node.add()
        m.CopyFrom(n)
        m.id = n.id + base
        for info in m.input_info:
            info.preceding_node += base
        for i in range(len(m.control_input)):
            m.control_input[i] += base


def _device_status(d) -> list:
    """`d` as a task's STATUS lists its devices (RemoteDevice's arguments)."""
    priority = int(getattr(d, "placement_priority", 0))
    return [d.name, d.device_type, d.incarnation, int(d.memory_limit), bool(d.host_memory),
            priority]  # fmt: skip


def peer_tasks(tparts, key) -> list[str]:
    """The other tasks this task's partitions send to or receive from."""
    peers = set()
    for p in tparts:
        for n in p.nodes:
            if n.op.type in ("_Send", "_Recv"):
                other = n.op._attrs["recv_device" if n.op.type == "_Send" else "send_device"]
                spec = device_spec.DeviceSpec.from_string(other)
                if (spec.job, spec.task) != key:
                    peers.add(f"/job:{spec.job}/replica:0/task:{spec.task}")
    return sorted(peers)


def _first_error(futs):
    """The error that ended the step: the first one that is not the echo of an abort."""
    errs = [f.exception() for f in futs if f.done() and not f.cancelled() and f.exception()]
    if not errs:
        return None
    for e in errs:
        if not isinstance(e, errors.CancelledError | errors.AbortedError):
            return e
    return errs[0]


async def _settle(futs, wait_s: float = 10.0) -> None:
    """Wait (bounded) for the other tasks to report the aborted step."""
    pending = [f for f in futs if not f.done()]
    if pending:
        await asyncio.wait(pending, timeout=wait_s)
    for f in futs:
        if f.done() and not f.cancelled():
            f.exception()


def _cancelled() -> errors.CancelledError:
    return errors.CancelledError(None, None, "Step was cancelled")


def _loop():
    return asyncio.get_running_loop()


def _ignore_frame(conn, kind, rid, meta, payload) -> None:
    pass


def _send_quietly(conn, kind, meta) -> None:
    if conn.closed is None:
        try:
            conn.send(kind, 0, meta)
        except errors.OpError:
            pass


def _on_loop(loop, fn, *args) -> None:
    """Call `fn` on `loop`'s thread (now, when nobody runs the loop)."""
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop or not loop.is_running():
        fn(*args)
    else:
        loop.call_soon_threadsafe(fn, *args)


def _shutdown(conn) -> None:
    """Shut the socket down now, from any thread: the task sees the session end even
    if the connection's loop does not run again."""
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    if sock is None:
        return
    try:
        dup = socket.socket(fileno=os.dup(sock.fileno()))
    except OSError:
        return
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        dup.close()


def _run_in_thread(coro):
    """Run `coro` to completion on a fresh loop in a helper thread (callable from any
    thread, a loop's included: it blocks the caller as TF's session constructor does)."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="asyncflow-connect") as ex:
        return ex.submit(asyncio.run, coro).result()


async def _status(host, port, secret, wait_s, tls) -> dict:
    conn = await wire.connect(
        connect_host(host), port, secret, _ignore_frame, wait_s=wait_s, tls=tls,
        server_hostname=host,
    )  # fmt: skip
    try:
        meta, _ = await asyncio.wait_for(conn.call(wire.STATUS), wait_s)
    except TimeoutError:
        raise wire.unavailable(f"{host}:{port} did not answer in {wait_s} s") from None
    finally:
        conn.abort(_cancelled())
    return meta


async def _discover(host, port, secret, filters, wait_s, tls) -> dict:
    """The target's cluster and the devices of every task the session may use."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    first = await _status(host, port, secret, wait_s, tls)
    cluster = first.get("cluster")
    if not isinstance(cluster, dict):
        raise errors.InternalError(None, None, f"{host}:{port} sent a malformed status")
    me = (first["job"], first["task"])
    spec = ClusterSpec({j: {int(i): a for i, a in t.items()} for j, t in cluster.items()})
    wanted = [(j, i, a) for j, i, a in spec.tasks() if (j, i) != me and _matches(filters, j, i)]

    async def one(job, index, address):
        h, p = split_address(address)
        while True:
            left = deadline - loop.time()
            try:
                return (job, index), await _status(h, p, secret, max(left, 0.1), tls)
            except errors.UnavailableError:
                if loop.time() >= deadline:
                    raise errors.UnavailableError(
                        None,
                        None,
                        f"Could not reach /job:{job}/replica:0/task:{index} ({address}) "
                        f"within {wait_s:g} s; set ConfigProto.device_filters to use a "
                        "session without it",
                    ) from None
                await asyncio.sleep(0.1)  # (polling a task that is not up yet)

    others = await asyncio.gather(*(one(*w) for w in wanted))
    return {"cluster": cluster, "job": me[0], "task": me[1], "tasks": [(me, first), *others]}


def _matches(filters, job, index) -> bool:
    if not filters:
        return True
    return any(f.job in (None, job) and f.task in (None, index) for f in filters)


async def _reset(channels, secret, containers, tls) -> None:
    for ch in channels:
        conn = await wire.connect(
            ch.host, ch.port, secret, _ignore_frame, tls=tls, server_hostname=ch.sni
        )
        try:
            await conn.call(wire.RESET, {"containers": containers})
        finally:
            conn.abort(_cancelled())


_lock = threading.Lock()
