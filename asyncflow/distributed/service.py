"""One task's worker service: registered partitions, their steps, and cross-task tensors.

The architecture guide's worker service, serving the wire protocol (`wire.py`) on one
event loop.  A master (in a client's process) registers each (feeds, fetches)
combination's partitions for this task once per connection (REGISTER: GraphDefs this
service lowers with the compiler into plans, kept by a `LocalWorker`); a step is one
RUN message carrying the task's feeds and answered with its fetches.  The tf.data
functions the partitions' ops call come along as one more GraphDef (graph_codec), once
per connection (later registrations name it by digest); the connection's
`TaskFunctions` runs them as nested steps, the kernels' `ctx.session`.

Tensors cross tasks by push: a _Send whose _Recv lives on another task writes a PUSH
frame (step id, rendezvous key, tensor) on this task's link to that one; the receiving
service deposits it in the step's rendezvous (created on first use, by the RUN or by
the first PUSH, whichever comes first), where the _Recv finds it as it would a local
one.  Nothing needs to stay behind on the sending side once the frame is written.

Fault handling: a client connection that closes aborts its steps here and drops its
registrations; a lost link to another task aborts every step here that exchanges
tensors with that task (UnavailableError); ABORT from the master fails one step (and
a RUN arriving after it fails at once).

Invariants: a step's cross-task rendezvous is in `_rendezvous` from its first use until
its RUN ends (or, never claimed by a RUN, until the sweep drops it); a finished step id
stays in `_finished` (bounded) so late PUSHes are dropped, not kept.
"""

from __future__ import annotations

import asyncio
import collections
import time

import numpy as np

from asyncflow import device_spec, errors
from asyncflow import graph as ops
from asyncflow.config import RunMetadata, RunOptions
from asyncflow.distributed import wire
from asyncflow.distributed.client import RemoteDevice
from asyncflow.distributed.cluster import ClusterSpec, split_address
from asyncflow.distributed.graph_codec import (
    FUNCTION_BODIES_KEPT,
    decode_attr_type,
    decode_functions,
    decode_partition,
    functions_digest,
)
from asyncflow.distributed.task_functions import TaskFunctions
from asyncflow.kernel_api import in_quiet_step, quiet_step
from asyncflow.lowering import compile_control_flow, compile_plan
from asyncflow.ops import collective_ops
from asyncflow.rendezvous import LocalRendezvous
from asyncflow.worker import LocalWorker, RegisteredGraph

__all__ = ["TaskService"]

_FINISHED_KEPT = 1 << 14
_ORPHAN_AFTER = 60.0  # s: a rendezvous made by PUSHes whose RUN never came
_COLLECTIVE_STEP = -1  # the step id of collective frames, which belong to no one step
_MAX_SESSION_DEVICES = 1 << 14


class _ClientState:
    """What a connection from a master owns here."""

    __slots__ = ("graphs", "steps", "kernel_states", "functions", "function_graphs")

    def __init__(self):
        self.graphs: dict[int, object] = {}  # handle -> RegisteredGraph or its error
        self.steps: set[int] = set()
        self.kernel_states: dict[str, dict] = {}
        self.functions: TaskFunctions | None = None  # (tf.data functions' nested steps)
        # their bodies' digest -> graph (or the error importing them)
        self.function_graphs: dict[str, object] = {}


class StepRendezvous:
    """A step's rendezvous on this task: local keys meet here; a key whose receiving
    device is on another task is pushed to it."""

    __slots__ = ("local", "service", "step_id", "created", "claimed", "peers")

    def __init__(self, service, step_id: int):
        self.local = LocalRendezvous()
        self.service = service
        self.step_id = step_id
        self.created = time.monotonic()
        self.claimed = False
        self.peers: frozenset = frozenset()  # the tasks the step exchanges tensors with

    def send_nowait(self, key: str, value, device=None) -> None:
        link = self.service.link_for_key(key)
        if link is None:
            self.local.send_nowait(key, value, device)
        else:
            link.push(self.step_id, key, value, device)

    async def recv(self, key: str, device=None):
        return await self.local.recv(key, device)

    def abort(self, error: BaseException) -> None:
        self.local.abort(error)


class PeerLink:
    """This task's connection to another task, for PUSH frames (opened on first use;
    frames wait in order until it is up)."""

    def __init__(self, service, job: str, task: int, address: str):
        self.service = service
        self.name = f"/job:{job}/replica:0/task:{task}"
        self.address = address
        self.conn: wire.Connection | None = None
        self.pending: list | None = None  # frames waiting for the connection
        self.steps: set[int] = set()

    def push(self, step_id: int, key: str, value, device) -> None:
        if device is not None and not device.host_memory:
            asyncio.ensure_future(self._push_from_device(step_id, key, value, device))
            return
        self.steps.add(step_id)
        conn = self.conn
        if conn is not None and conn.closed is None:
            conn.send(wire.PUSH, 0, {"s": step_id, "k": key}, [value])
            return
        # A value no frame can carry fails the _Send now, as on a link that is up (sent
        # later, its error would reach no step, and the _Recv would wait for good).
        wire.encode_tensors([value])
        if self.pending is None:
            self.pending = []
            asyncio.ensure_future(self._connect())
        self.pending.append((step_id, key, value))

    async def _push_from_device(self, step_id, key, value, device) -> None:
        try:
            host = await device.copy_to_host(value)
            self.push(step_id, key, host, None)
        except Exception as e:  # noqa: BLE001 - fails the step
            self.service.fail_step(step_id, e)

    async def _connect(self) -> None:
        host, port = split_address(self.address)
        try:
            self.conn = await wire.connect(
                host, port, self.service.secret, self.service.on_frame, self._lost,
                tls=self.service.tls,
            )  # fmt: skip
        except errors.OpError as e:
            pending, self.pending = self.pending or [], None
            err = errors.UnavailableError(None, None, f"{self.name} is unreachable: {e.message}")
            for step_id, _, _ in pending:
                self.service.fail_step(step_id, err)
            return
        self.conn.state = _ClientState()
        pending, self.pending = self.pending or [], None
        for step_id, key, value in pending:
            try:
                self.conn.send(wire.PUSH, 0, {"s": step_id, "k": key}, [value])
            except errors.OpError as e:  # (too large, or the link lost meanwhile)
                self.service.fail_step(step_id, e)

    def _lost(self, conn, error) -> None:
        if conn is self.conn:
            self.conn = None
        self.service.peer_lost(self.name, error)


class TaskWorker(LocalWorker):
    """The LocalWorker of a task; its steps' rendezvous reach other tasks."""


class TaskService:
    """The worker service of one task (job, index) of `cluster`, on the running loop."""

    def __init__(
        self, cluster: ClusterSpec, job: str, task: int, devices, secret: bytes, tls=None
    ):
        self.cluster = cluster
        self.tls = tls  # a wire.TLSConfig: this task's connections, both ways, use TLS
        self.job = job
        self.task = task
        self.name = f"/job:{job}/replica:0/task:{task}"
        self.secret = secret
        self.devices = devices
        self.by_name = {d.name: d for d in devices}
        self.worker = TaskWorker(devices)
        self.incarnation = devices[0].incarnation
        self._rendezvous: dict[int, StepRendezvous] = {}
        self._finished: collections.OrderedDict = collections.OrderedDict()
        self._links: dict[tuple, PeerLink] = {}
        self._key_links: dict[str, PeerLink | None] = {}
        self.connections: set[wire.Connection] = set()
        self.server = None
        self._sweeper = None
        self.runs = 0
        self._idle: asyncio.Event | None = None

    # -- serving
    async def start(self, host: str, port: int):
        loop = asyncio.get_running_loop()
        self.server = await wire.serve(self._new_connection, host, port, self.tls)
        self._sweeper = loop.call_later(_ORPHAN_AFTER / 2, self._sweep)
        return self.server.sockets[0].getsockname()[1]

    def _new_connection(self) -> wire.Connection:
        conn = wire.Connection(
            self.secret, True, self.on_frame, self._connection_lost, self.incarnation
        )
        conn.state = _ClientState()
        self.connections.add(conn)
        return conn

    def _connection_lost(self, conn, error) -> None:
        self.connections.discard(conn)
        st = conn.state
        err = errors.AbortedError(
            None, None, f"The master's connection to {self.name} was lost: {error}"
        )
        for step_id in list(st.steps):
            self.fail_step(step_id, err)
        for h in list(st.graphs):
            reg = st.graphs.pop(h)
            if isinstance(reg, int):
                self.worker.deregister_graph(reg)
        for ks in st.kernel_states.values():  # (resources of the session's own: one-shot
            release = ks.pop("release", None)  # iterators, ops/dataset_ops.py)
            if release is not None:
                release()
        if st.functions is not None:
            st.functions.close(err)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.server is not None:
            self.server.close()
        err = errors.UnavailableError(None, None, f"{self.name} is shutting down")
        self.worker.abort_all(err)
        for conn in list(self.connections):
            conn.abort(err)
        for link in self._links.values():
            if link.conn is not None:
                link.conn.abort(err)

    @property
    def busy(self) -> bool:
        return bool(self.worker.steps_in_flight)

    async def drain(self) -> None:
        """Stop accepting connections; return once no step is in flight."""
        self.server.close()
        if self.busy:
            self._idle = asyncio.Event()
            await self._idle.wait()

    def on_frame(self, conn, kind, rid, meta, payload) -> None:
        try:
            if kind == wire.RUN:
                self._start_run(conn, rid, meta, payload)
            elif kind == wire.PUSH:
                self._deliver(meta, payload)
            elif kind == wire.REGISTER:
                self._register(conn, meta, payload)
            elif kind == wire.DEREGISTER:
                reg = conn.state.graphs.pop(meta.get("h"), None)
                if isinstance(reg, int):
                    self.worker.deregister_graph(reg)
            elif kind == wire.ABORT:
                step_id = meta.get("s")
                if isinstance(step_id, int):
                    self.fail_step(step_id, wire.error_from_meta(meta))
            elif kind == wire.STATUS:
                conn.send(wire.REPLY, rid, self.status())
            elif kind == wire.RESET:
                containers = meta.get("containers")
                if containers is not None and not isinstance(containers, list):
                    raise wire._bad("containers")
                for d in self.devices:
                    d.resource_mgr.clear(containers)
                conn.send(wire.REPLY, rid, {})
            else:
                raise errors.InvalidArgumentError(None, None, f"Unexpected frame kind {kind}")
        except errors.OpError as e:
            if rid and conn.closed is None:
                conn.send(wire.ERROR, rid, wire.encode_error(e))

    def status(self) -> dict:
        return {
            "cluster": self.cluster.to_json(),
            "job": self.job,
            "task": self.task,
            "incarnation": self.incarnation,
            "devices": [
                [
                    d.name,
                    d.device_type,
                    d.incarnation,
                    int(d.memory_limit),
                    bool(d.host_memory),
                    int(getattr(d, "placement_priority", 0)),
                ]
                for d in self.devices
            ],
        }

    # -- registration
    def _register(self, conn, meta, payload) -> None:
        h = meta.get("h")
        if not isinstance(h, int):
            raise wire._bad("handle")
        try:
            conn.state.graphs[h] = self._compile(conn.state, meta, payload)
        except errors.OpError as e:
            conn.state.graphs[h] = e  # reported by the RUNs of this handle
        except Exception as e:  # noqa: BLE001 - a partition this task cannot lower
            conn.state.graphs[h] = errors.InternalError(
                None, None, f"{self.name} could not register a graph: {type(e).__name__}: {e}"
            )

    def _compile(self, state: _ClientState, meta, payload) -> int:
        parts, feeds, fetch_map = meta.get("p"), meta.get("fd"), meta.get("fm")
        if not isinstance(parts, list) or not isinstance(feeds, list):
            raise wire._bad("registration")
        blobs = wire.decode_tensors(meta.get("t", []), payload)
        fn_graph = session = None
        fn = meta.get("fn")
        if (fn == 1 and blobs) or fn == 2:  # tf.data functions' bodies (graph_codec)
            fn_graph = self._function_graph(state, blobs.pop() if fn == 1 else None, meta)
            if state.functions is None:
                state.functions = TaskFunctions(
                    self, self._peer_devices(meta.get("dv")), meta.get("sd") == 1
                )
            session = state.functions  # (what the kernels call their functions through)
        if len(blobs) != len(parts):
            raise wire._bad("registration")
        feed_dtypes = [decode_attr_type(e) for e in feeds]
        trace = meta.get("tr") == 1  # a traced graph: per-node times and memory
        kstates = state.kernel_states

        def kernel_state_for(op) -> dict:
            # Stateful kernels keep their state per node name for the master's
            # session, as TF's per-session OpSegment.
            st = kstates.get(op.name)
            if st is None:
                st = kstates[op.name] = {}
                if op.type.startswith("Collective"):
                    st["task_service"] = self  # (how a collective reaches the other tasks)
            return st

        plans = []
        for spec, blob in zip(parts, blobs):
            if not isinstance(spec, list):
                raise wire._bad("partition")
            nodes = decode_partition(blob, self.by_name, len(feeds), feed_dtypes, fn_graph)
            fetches = [_fetch_spec(f, len(nodes), len(feeds)) for f in spec]
            plans.append(
                compile_plan(session, nodes, len(feeds), fetches, kernel_state_for, trace)
            )
        if len(plans) > 1 and any(pl.has_cf for pl in plans):
            for pl in plans:
                if not pl.has_cf:
                    compile_control_flow(pl, pl.pnodes, force=True)
        if not isinstance(fetch_map, list) or not all(
            isinstance(f, list) and len(f) == 2 and 0 <= f[0] < len(plans) for f in fetch_map
        ):
            raise wire._bad("fetch map")
        graph = RegisteredGraph(plans, [tuple(f) for f in fetch_map])
        peers = meta.get("x")
        if peers:  # exchanges tensors with these other tasks
            if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
                raise wire._bad("peers")
            peers = frozenset(peers)
            graph.rendezvous_factory = lambda step_id: self.rendezvous_for(step_id, peers)
        return self.worker.register_graph(graph)

    def _function_graph(self, state: _ClientState, blob, meta) -> ops.Graph:
        """The graph of the function bodies a registration calls: `blob`, imported once
        per connection and content, or (no blob) the one its digest "fh" names, sent
        on this connection before.  A graph reused keeps the plans TaskFunctions cached
        for its tensors.  The connection keeps `FUNCTION_BODIES_KEPT` sets, oldest out
        first, as the master counts them (client.py).

        Raises InternalError for a digest this connection holds no bodies of, and the
        InvalidArgumentError of bodies that did not import (again when named later)."""
        digest = meta.get("fh")
        if digest is not None and not isinstance(digest, str):
            raise wire._bad("function digest")
        if blob is None:
            graph = state.function_graphs.get(digest)
            if isinstance(graph, errors.OpError):  # (the bodies sent did not import)
                raise graph
            if graph is None:
                raise errors.InternalError(
                    None, None,
                    f"{self.name} holds no function bodies {str(digest)[:16]}... on this "
                    "connection: the master named bodies it did not send",
                )  # fmt: skip
            return graph
        data = bytes(blob)
        key = functions_digest(data)
        if digest is not None and digest != key:
            raise wire._bad("function digest")
        graph = state.function_graphs.get(key)
        if graph is None:
            if len(state.function_graphs) >= FUNCTION_BODIES_KEPT:
                state.function_graphs.pop(next(iter(state.function_graphs)))
            try:
                graph = decode_functions(data)
            except errors.OpError as e:  # (kept too: the master counts these bodies sent)
                graph = e
            state.function_graphs[key] = graph
        if isinstance(graph, errors.OpError):
            raise graph
        return graph

    def _peer_devices(self, listed) -> list[RemoteDevice]:
        """The session's devices on other tasks, from a registration's "dv" (each as
        `status` lists a device)."""
        if listed is None:
            return []
        if not isinstance(listed, list) or len(listed) > _MAX_SESSION_DEVICES:
            raise wire._bad("devices")
        out = []
        for d in listed:
            if not (
                isinstance(d, list)
                and len(d) == 6
                and isinstance(d[0], str)
                and isinstance(d[1], str)
                and all(isinstance(v, int) for v in (d[2], d[3], d[4], d[5]))
            ):
                raise wire._bad("devices")
            if d[0] in self.by_name:
                continue
            try:
                out.append(RemoteDevice(*d))
            except ValueError:
                raise wire._bad("devices") from None
        return out

    # -- steps
    def rendezvous_for(self, step_id: int, peers=frozenset()) -> StepRendezvous:
        rv = self._rendezvous.get(step_id)
        if rv is None:
            rv = self._rendezvous[step_id] = StepRendezvous(self, step_id)
            err = self._finished.get(step_id)
            if err is not None:
                rv.abort(err)
        rv.claimed = True
        rv.peers = peers
        return rv

    def _start_run(self, conn, rid, meta, payload) -> None:
        step_id = meta.get("s")
        reg = conn.state.graphs.get(meta.get("h"))
        if not isinstance(step_id, int) or not rid:
            raise wire._bad("run request")
        if reg is None:
            raise errors.AbortedError(
                None,
                None,
                f"Graph handle is not found on {self.name}: it may have restarted; "
                "recreate the session",
            )
        if isinstance(reg, errors.OpError):
            raise reg
        if step_id in self._finished:
            raise self._finished[step_id] or errors.AbortedError(None, None, "Step was aborted")
        feeds = wire.decode_tensors(meta.get("t", []), payload)
        timeout = meta.get("to")
        timeout = timeout if isinstance(timeout, int | float) and timeout > 0 else None
        coro = self._run(conn, rid, reg, step_id, feeds, timeout, meta.get("tr") == 1)
        if timeout is not None:  # (asyncio.timeout needs a Task around the step)
            asyncio.ensure_future(in_quiet_step(coro)).add_done_callback(_ignore)
            return
        # Drive it at once: a step that never suspends costs no Task.
        with quiet_step():
            try:
                fut = coro.send(None)
            except StopIteration:
                return
        task = asyncio.ensure_future(in_quiet_step(_resume(coro, fut)))
        task.add_done_callback(_ignore)

    async def _run(self, conn, rid, reg, step_id, feeds, step_timeout, trace=False) -> None:
        st = conn.state
        st.steps.add(step_id)
        self.runs += 1
        options = run_metadata = None
        if trace:  # the reply's last two tensors: StepStats and CostGraphDef, serialized
            options, run_metadata = RunOptions(trace_level=RunOptions.FULL_TRACE), RunMetadata()
        try:
            values = await self.worker.run_graph(
                reg, step_id, feeds, options, run_metadata, step_timeout
            )
            if run_metadata is not None:
                values = [*values, _serialized(run_metadata.step_stats),
                          _serialized(run_metadata.cost_graph)]  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the master
            if conn.closed is None:
                conn.send(wire.ERROR, rid, wire.encode_error(_as_op_error(e)))
            if not isinstance(e, Exception):
                raise
        else:
            if conn.closed is None:
                try:
                    conn.send(wire.REPLY, rid, None, values)
                except errors.OpError as e:
                    conn.send(wire.ERROR, rid, wire.encode_error(e))
        finally:
            st.steps.discard(step_id)
            self.end_step(step_id, None)
            if self._idle is not None and not self.busy:
                self._idle.set()

    def end_step(self, step_id: int, error) -> None:
        """`step_id` ended here (with `error`, if aborted): its rendezvous goes; a late
        PUSH or RUN of it finds it finished."""
        self._rendezvous.pop(step_id, None)
        fin = self._finished
        if step_id not in fin or error is not None:
            fin[step_id] = error
            if len(fin) > _FINISHED_KEPT:
                fin.popitem(last=False)

    def fail_step(self, step_id: int, error: BaseException) -> None:
        """Abort `step_id` here (in flight, or when its RUN comes)."""
        self.worker.abort_step(step_id, error)
        rv = self._rendezvous.get(step_id)
        if rv is not None:
            rv.abort(error)
        if self.worker._step_ids.get(step_id) is None:
            self.end_step(step_id, error)

    def _deliver(self, meta, payload) -> None:
        step_id, key = meta.get("s"), meta.get("k")
        if not isinstance(step_id, int) or not isinstance(key, str):
            raise wire._bad("push")
        if key.startswith("collective;"):  # a collective's part or result: no step's
            (value,) = wire.decode_tensors(meta.get("t", []), payload) or (None,)
            collective_ops.deliver(self, key, value)
            return
        if step_id in self._finished:
            return  # the step ended here (aborted): nobody will receive it
        (value,) = wire.decode_tensors(meta.get("t", []), payload) or (None,)
        rv = self._rendezvous.get(step_id)
        if rv is None:
            rv = self._rendezvous[step_id] = StepRendezvous(self, step_id)
        try:
            rv.local.send_nowait(key, value, self._pushed_from(key, value))
        except errors.OpError:
            pass  # aborted meanwhile, or a duplicate: the step reports its own error

    def _pushed_from(self, key: str, value):
        """Where a pushed value lives for the rendezvous: a plain array bound for a
        device with its own memory is in this task's host memory (so the _Recv copies
        it over); anything else is as it came (None: no copy)."""
        if not isinstance(value, np.ndarray) or value.dtype == object:
            return None
        dst = self.by_name.get(key.split(";", 3)[2])
        if dst is None or dst.host_memory:
            return None
        return next((d for d in self.devices if d.host_memory), None)

    def _sweep(self) -> None:
        now = time.monotonic()
        for step_id, rv in list(self._rendezvous.items()):
            if not rv.claimed and now - rv.created > _ORPHAN_AFTER:
                del self._rendezvous[step_id]
        self._sweeper = asyncio.get_running_loop().call_later(_ORPHAN_AFTER / 2, self._sweep)

    # -- other tasks
    def push_collective(self, job: str, task: int, key: str, value) -> None:
        """Send a collective's part or result (a host array) to task (job, task)."""
        link = self._links.get((job, task))
        if link is None:
            try:
                address = self.cluster.task_address(job, task)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None, None, f"No task /job:{job}/task:{task} in this cluster"
                ) from None
            link = self._links[(job, task)] = PeerLink(self, job, task, address)
        link.push(_COLLECTIVE_STEP, key, value, None)

    def link_for_key(self, key: str) -> PeerLink | None:
        """The link to the task of `key`'s receiving device; None for this task."""
        try:
            return self._key_links[key]
        except KeyError:
            pass
        dst = key.split(";", 3)[2]
        spec = device_spec.DeviceSpec.from_string(dst)
        job = spec.job if spec.job is not None else self.job
        task = spec.task if spec.task is not None else 0
        if (job, task) == (self.job, self.task):
            link = None
        else:
            link = self._links.get((job, task))
            if link is None:
                try:
                    address = self.cluster.task_address(job, task)
                except ValueError:
                    raise errors.InvalidArgumentError(
                        None, None, f"No task {dst} in this cluster"
                    ) from None
                link = self._links[(job, task)] = PeerLink(self, job, task, address)
        if len(self._key_links) > 1 << 16:
            self._key_links.clear()
        self._key_links[key] = link
        return link

    def peer_lost(self, name: str, error) -> None:
        err = errors.UnavailableError(
            None, None, f"The connection from {self.name} to {name} was lost: {error}"
        )
        for step_id, rv in list(self._rendezvous.items()):
            if name in rv.peers:  # (a step with no tensor to or from it goes on)
                self.fail_step(step_id, err)


def _fetch_spec(f, n: int, num_feeds: int):
    if isinstance(f, list) and len(f) == 2:
        i, k = f
        if i == "f" and isinstance(k, int) and 0 <= k < num_feeds:
            return ("feed", k)
        if isinstance(i, int) and 0 <= i < n and (k is None or isinstance(k, int) and k >= 0):
            return (i, k)
    raise wire._bad("fetch")


def _serialized(message) -> np.ndarray:
    return np.frombuffer(message.SerializeToString(), np.uint8)


def _as_op_error(e: BaseException) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    if isinstance(e, asyncio.CancelledError):
        return errors.CancelledError(None, None, "Step was cancelled")
    return errors.UnknownError(None, None, f"{type(e).__name__}: {e}")


def _ignore(task) -> None:
    if not task.cancelled():
        task.exception()


async def _resume(coro, first):
    return await _Resume(coro, first)


class _Resume:
    """Re-yields the future a coroutine first suspended on, then keeps driving it."""

    __slots__ = ("coro", "first")

    def __init__(self, coro, first):
        self.coro, self.first = coro, first

    def __await__(self):
        coro, y = self.coro, self.first
        while True:
            try:
                sent = yield y
            except BaseException as exc:  # noqa: BLE001 - into the coroutine
                try:
                    y = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    y = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
