"""What runs a tf.data op's traced functions on a task: the kernels' `ctx.session`.

In one process a dataset op's function is a nested step of the client's session
(ops/dataset_pipeline.py `Function`): its results fetched, its arguments fed.  On a
task the partitions' kernels have no session; a `TaskFunctions` per master connection
stands in for one: it plans a (feeds, fetches) combination of the function bodies'
graph (graph_codec.decode_functions) as a master does (prune, place on this task's
devices, partition, lower) and runs its steps on a worker of its own, whose step ids
are its own (they never meet the masters' steps on the task).  It offers what the
calls use: `arun`, and the master's `plan` / `run_step` for tf.data's fast caller
(asyncflow/data/calls.py).

Invariant: plans are cached per (feeds, fetches) and live until `close`, which fails
the steps in flight.
"""

from __future__ import annotations

from asyncflow import device_spec, errors
from asyncflow import graph as ops
from asyncflow import partition as partition_mod
from asyncflow.graph_passes import run_graph_passes
from asyncflow.lowering import compile_partitions
from asyncflow.placement import Placer
from asyncflow.worker import LocalWorker, RegisteredGraph

__all__ = ["TaskFunctions"]

_MAX_CACHED_PLANS = 1024


class _Plan:
    __slots__ = ("handle", "fed_fetches")


class TaskFunctions:
    """Nested steps of dataset functions on one task's `devices` (the module note)."""

    def __init__(self, devices, default_device: str):
        self.worker = LocalWorker(devices)
        # (soft placement: a body placed on another task in the client's graph runs here)
        self.placer = Placer(devices, allow_soft_placement=True, default_device=default_device)
        self._task = device_spec.DeviceSpec.from_string(default_device)
        self.plans: dict = {}
        self._scratch_graph = ops.Graph()  # owns the _Send/_Recv nodes partitions add
        self._kernel_states: dict = {}
        self._step_counter = 0
        self.closed = False

    @property
    def _master(self):  # (what tf.data's fast caller looks for: data/calls.py)
        return self

    def plan(self, feed_tensors, fetches, trace=False, debug=None) -> _Plan:
        """The plan running `fetches` with `feed_tensors` fed.

        Raises CancelledError once closed."""
        if self.closed:
            raise errors.CancelledError(None, None, "The session's connection was closed")
        key = (tuple(feed_tensors), tuple(fetches))
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= _MAX_CACHED_PLANS:
                self.worker.deregister_graph(self.plans.pop(next(iter(self.plans))).handle)
            plan = self.plans[key] = self._compile(list(feed_tensors), list(fetches))
        return plan

    def _compile(self, feeds: list, fetches: list) -> _Plan:
        order = partition_mod.prune(feeds, fetches)
        self._check_task(order)
        assignment = self.placer.place(order)
        parts, fetch_map = partition_mod.partition(
            order, assignment, feeds, fetches, self._scratch_graph
        )
        if not parts:  # every fetch is fed
            parts, fetch_map = partition_mod.partition([], {}, feeds, fetches, self._scratch_graph)
            for p in parts:
                p.device = self.worker.devices[0]
        for p in parts:
            run_graph_passes(p, self._scratch_graph)
        plans = compile_partitions(self, parts, len(feeds), self._kernel_state_for)
        index = {id(p): i for i, p in enumerate(parts)}
        plan = _Plan()
        fed = {t: i for i, t in enumerate(feeds)}
        plan.fed_fetches = tuple((k, fed[t]) for k, t in enumerate(fetches) if t in fed)
        plan.handle = self.worker.register_graph(
            RegisteredGraph(plans, [(index[id(p)], j) for p, j in fetch_map])
        )
        return plan

    def _check_task(self, order) -> None:
        """Raises UnimplementedError for a stateful op placed on another task (a
        variable on a ps task): run here, it would be another object of the same name
        (a stateless one computes the same values here)."""
        for op in order:
            if not op.device or not op.op_def.stateful:
                continue
            spec = device_spec.DeviceSpec.from_string(op.device)
            if (spec.job is not None and spec.job != self._task.job) or (
                spec.task is not None and spec.task != self._task.task
            ):
                raise errors.UnimplementedError(
                    None,
                    op,
                    f"Operation {op.name} ({op.type}) of a dataset function is placed on "
                    f"{op.device}: a dataset's functions run on the task of its dataset "
                    f"op ({self._task.to_string()}), and cannot reach another task's state",
                )

    def _kernel_state_for(self, op) -> dict:
        st = self._kernel_states.get(op)
        if st is None:
            st = self._kernel_states[op] = {}
        return st

    def run_step(self, plan: _Plan, feed_values, options=None, run_metadata=None):
        """One step of `plan`: an awaitable of the fetched values."""
        self._step_counter += 1
        return self.worker.run_graph(plan.handle, self._step_counter, list(feed_values))

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

    def close(self, error: BaseException) -> None:
        """Fail the steps in flight with `error`; drop the plans."""
        self.closed = True
        self.worker.abort_all(error)
        for plan in self.plans.values():
            self.worker.deregister_graph(plan.handle)
        self.plans.clear()
        self._kernel_states.clear()
