"""What runs a tf.data op's traced functions on a task: the kernels' `ctx.session`.

In one process a dataset op's function is a nested step of the client's session
(ops/dataset_pipeline.py `Function`): its results fetched, its arguments fed.  On a
task the partitions' kernels have no session; a `TaskFunctions` per master connection
stands in for one: it plans a (feeds, fetches) combination of the function bodies'
graph (graph_codec.decode_functions) as a master does (prune, place, partition, lower)
and runs its steps on a worker of its own.  It offers what the calls use: `arun`, and
the master's `plan` / `run_step` for tf.data's fast caller (asyncflow/data/calls.py).

State on another task.  A body op placed on another task runs here (soft placement:
the values are the same) unless it holds or reaches that task's state: a stateful op,
or one taking a resource.  Those stay on their task, as TF's function runtime places
them, and the step splits into this task's partitions and that task's, joined by
_Send/_Recv pairs through the task service's rendezvous, as a master's step is: the
other task's partitions are registered there over a connection of this object's
(`ClusterWorker.of_tasks`) and each step sends them a RUN under the same step id.  A
ref variable's value crosses that way in any session (TF captures it by value); an op
of a resource on another task is TF's InternalError unless the session's
`ConfigProto.experimental.share_cluster_devices_in_session` is set, as in TF.

Invariants: plans are cached per (feeds, fetches) and live until `close`, which fails
the steps in flight; a split step's ids are drawn from a random base, so they never
meet the masters' steps on any task, and its rendezvous leaves the service when it ends.
"""

from __future__ import annotations

import asyncio
import secrets

from asyncflow import device_spec, dtypes, errors
from asyncflow import graph as ops
from asyncflow import partition as partition_mod
from asyncflow.distributed.client import ClusterWorker, RemoteDevice, peer_tasks
from asyncflow.graph_passes import run_graph_passes
from asyncflow.lowering import compile_partitions
from asyncflow.placement import Placer
from asyncflow.worker import LocalWorker, RegisteredGraph

__all__ = ["TaskFunctions"]

_MAX_CACHED_PLANS = 1024
_STEP_MASK = (1 << 62) - 1


class _Plan:
    __slots__ = ("handle", "fed_fetches", "remote", "local_fetches")


class TaskFunctions:
    """Nested steps of dataset functions on one task (the module note).

    `service`: the task's TaskService (its devices, rendezvous and cluster);
    `peer_devices`: the session's devices on other tasks (RemoteDevices);
    `share_devices`: the session's share_cluster_devices_in_session."""

    def __init__(self, service, peer_devices=(), share_devices: bool = False):
        self.service = service
        devices = service.devices
        self.worker = LocalWorker(devices)
        self._task = device_spec.DeviceSpec.from_string(service.name)
        # (soft placement: a body op placed on another task in the client's graph runs here)
        self.placer = Placer(devices, allow_soft_placement=True, default_device=service.name)
        self.peer_devices = list(peer_devices)
        self.share_devices = share_devices
        self._cluster_placer: Placer | None = None
        self._peers: ClusterWorker | None = None
        self.plans: dict = {}
        self._scratch_graph = ops.Graph()  # owns the _Send/_Recv nodes partitions add
        self._kernel_states: dict = {}
        self._step_counter = 0
        self._step_base = secrets.randbits(62)
        self.closed = False

    @property
    def _master(self):  # (what tf.data's fast caller looks for: data/calls.py)
        return self

    def plan(self, feed_tensors, fetches, trace=False, debug=None) -> _Plan:
        """The plan running `fetches` with `feed_tensors` fed.

        Raises CancelledError once closed; InternalError for an op of a resource on
        another task where the session does not share the cluster's devices."""
        if self.closed:
            raise errors.CancelledError(None, None, "The session's connection was closed")
        key = (tuple(feed_tensors), tuple(fetches))
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= _MAX_CACHED_PLANS:
                self._drop(self.plans.pop(next(iter(self.plans))))
            plan = self.plans[key] = self._compile(list(feed_tensors), list(fetches))
        return plan

    def prepare_function(self, inputs, outputs, captures) -> None:
        """Plan a dataset function as its calls will (fed: its captures, then its
        arguments), when its dataset op runs: one this task cannot run fails that op,
        as TF's instantiation fails the iterator's initialization.

        Raises what `plan` raises."""
        self.plan([*captures, *inputs], outputs)

    def _compile(self, feeds: list, fetches: list) -> _Plan:
        order = partition_mod.prune(feeds, fetches)
        assignment = self._place(order)
        parts, fetch_map = partition_mod.partition(
            order, assignment, feeds, fetches, self._scratch_graph
        )
        if not parts:  # every fetch is fed
            parts, fetch_map = partition_mod.partition([], {}, feeds, fetches, self._scratch_graph)
            for p in parts:
                p.device = self.worker.devices[0]
        local = [p for p in parts if not isinstance(p.device, RemoteDevice)]
        remote = [p for p in parts if isinstance(p.device, RemoteDevice)]
        for p in local:
            run_graph_passes(p, self._scratch_graph)
        plan = _Plan()
        fed = {t: i for i, t in enumerate(feeds)}
        plan.fed_fetches = tuple((k, fed[t]) for k, t in enumerate(fetches) if t in fed)
        index = {id(p): i for i, p in enumerate(local)}
        local_map = [(k, index[id(p)], j) for k, (p, j) in enumerate(fetch_map) if id(p) in index]
        plan.local_fetches = [k for k, _, _ in local_map]
        graph = RegisteredGraph(
            compile_partitions(self, local, len(feeds), self._kernel_state_for),
            [(i, j) for _, i, j in local_map],
        )
        plan.remote = None
        if remote:
            service = self.service
            peers = frozenset(peer_tasks(local, (self._task.job, self._task.task)))
            graph.rendezvous_factory = lambda step_id: service.rendezvous_for(step_id, peers)
            # (the other tasks answer the fetches they hold; the rest are this task's)
            plan.remote = self._peers_worker().register_partitions(remote, fetch_map, feeds)
        plan.handle = self.worker.register_graph(graph)
        return plan

    def _place(self, order) -> dict:
        """Each op's device: this task's (soft placement), but for the ops that hold or
        reach another task's state, which stay there (the module note)."""
        foreign = [op for op in order if self._reaches_state(op) and self._elsewhere(op)]
        assignment = self.placer.place(order)
        if not foreign:
            return assignment
        if not self.share_devices:
            first = next((op for op in foreign if _of_resource(op)), None)
            if first is not None:
                raise self._not_shared(first)
        if self._cluster_placer is None:
            self._cluster_placer = Placer(
                [*self.worker.devices, *self.peer_devices],
                allow_soft_placement=True,
                default_device=self.service.name,
            )
        across = self._cluster_placer.place(order)
        split = dict(assignment)
        for op in order:  # (topological: a resource's maker before its users)
            dev = across[op]
            if isinstance(dev, RemoteDevice) and self._reaches_state(op):
                split[op] = dev
                continue
            # A resource's handle names an object of its task: its users run there.
            for t in op._inputs:
                if t.dtype == dtypes.resource and isinstance(split[t.op], RemoteDevice):
                    split[op] = split[t.op]
                    break
        for op in foreign:
            if not isinstance(split[op], RemoteDevice):  # (a task the session does not see)
                raise errors.UnimplementedError(
                    None,
                    op,
                    f"Operation {op.name} ({op.type}) of a dataset function is placed on "
                    f"{op.device}, a task this session has no devices of: run on the "
                    f"dataset's task ({self._task.to_string()}), it would make or read "
                    "another object of that name there",
                )
        return split

    @staticmethod
    def _reaches_state(op) -> bool:
        return op.op_def.stateful or any(t.dtype == dtypes.resource for t in op._inputs)

    def _elsewhere(self, op) -> bool:
        if not op.device:
            return False
        spec = device_spec.DeviceSpec.from_string(op.device)
        return (spec.job is not None and spec.job != self._task.job) or (
            spec.task is not None and spec.task != self._task.task
        )

    def _not_shared(self, op) -> errors.InternalError:
        """TF's error for a function's op of a resource on another task."""
        spec = device_spec.DeviceSpec.from_string(op.device)
        name = device_spec.DeviceSpec(
            job=spec.job or self._task.job,
            replica=spec.replica or 0,
            task=spec.task if spec.task is not None else 0,
            device_type=spec.device_type or "CPU",
            device_index=spec.device_index or 0,
        ).to_string()
        here = ", ".join(d.name for d in self.worker.devices)
        return errors.InternalError(
            None,
            op,
            f"Assigned device '{name}' does not match any device. This error can happen "
            "when one attempts to run a tf.function with resource inputs residing on remote "
            "devices. This use case is currently not supported. Here are the devices "
            f"available on this machine: [{here}].If you are seeing this error when running "
            "using a tf.Session, set share_cluster_devices_in_session to true in the "
            "tf.ConfigProto.",
        )

    def _peers_worker(self) -> ClusterWorker:
        if self._peers is None:
            tasks = {}
            for d in self.peer_devices:
                tasks.setdefault(d.task_key, d.incarnation)
            s = self.service
            self._peers = ClusterWorker.of_tasks(s.cluster, tasks, s.secret, s.tls)
        return self._peers

    def _kernel_state_for(self, op) -> dict:
        st = self._kernel_states.get(op)
        if st is None:
            st = self._kernel_states[op] = {}
        return st

    def run_step(self, plan: _Plan, feed_values, options=None, run_metadata=None):
        """One step of `plan`: an awaitable of the fetched values."""
        self._step_counter += 1
        if plan.remote is None:
            return self.worker.run_graph(plan.handle, self._step_counter, list(feed_values))
        step_id = (self._step_base + self._step_counter) & _STEP_MASK
        return self._run_split(plan, step_id, list(feed_values))

    async def _run_split(self, plan: _Plan, step_id: int, feed_values: list) -> list:
        """A step whose partitions span tasks: this task's and the others' at once; the
        first error fails it everywhere."""
        here = asyncio.ensure_future(self.worker.run_graph(plan.handle, step_id, feed_values))
        there = asyncio.ensure_future(self._peers.run_graph(plan.remote, step_id, feed_values))
        both = [here, there]
        try:
            await asyncio.wait(both, return_when=asyncio.FIRST_EXCEPTION)
        except asyncio.CancelledError:
            await self._fail(step_id, both, errors.CancelledError(None, None, "Step cancelled"))
            raise
        first = next((f.exception() for f in (there, here) if f.done() and f.exception()), None)
        if first is not None:
            await self._fail(step_id, both, first)
            raise first
        self.service.end_step(step_id, None)
        out = there.result()
        for k, v in zip(plan.local_fetches, here.result()):
            out[k] = v
        return out

    async def _fail(self, step_id: int, parts: list, error: BaseException) -> None:
        """Fail a split step's parts here and there with `error`; return once they end."""
        self.worker.abort_step(step_id, error)
        self.service.fail_step(step_id, error)  # (this task's rendezvous of the step)
        self._peers.abort_step(step_id, error)
        await asyncio.wait(parts)
        for f in parts:
            if not f.cancelled():
                f.exception()  # (retrieved: the step reports the first error)
        self.service.end_step(step_id, error)

    async def arun(self, fetches, feed_dict=None, options=None, run_metadata=None) -> list:
        """The values of `fetches` (a list of Tensors) with `feed_dict` (Tensor -> value)
        fed, as `Session.arun` for a list."""
        feed_dict = feed_dict or {}
        feeds, values = list(feed_dict), list(feed_dict.values())
        plan = self.plan(feeds, list(fetches))
        out = list(await self.run_step(plan, values))
        for k, i in plan.fed_fetches:
            out[k] = values[i]
        return out

    def _drop(self, plan: _Plan) -> None:
        self.worker.deregister_graph(plan.handle)
        if plan.remote is not None:
            self._peers.deregister_graph(plan.remote)

    def close(self, error: BaseException) -> None:
        """Fail the steps in flight with `error`; drop the plans and the connections to
        other tasks."""
        self.closed = True
        self.worker.abort_all(error)
        for plan in self.plans.values():
            self._drop(plan)
        self.plans.clear()
        self._kernel_states.clear()
        if self._peers is not None:
            self._peers.close()


def _of_resource(op) -> bool:
    """Whether `op` makes or takes a resource (a variable's handle, a table)."""
    return any(t.dtype == dtypes.resource for t in (*op._inputs, *op._outputs))
