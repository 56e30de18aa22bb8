"""The master: from (feeds, fetches) to registered graphs on workers, and their steps.

The architecture guide's master service, in the client: for each (feeds, fetches,
targets) combination it prunes the graph, places the ops on the workers' devices,
partitions it per device (Send/Recv and host<->device copies on every cut edge), lowers
each partition to a plan and registers them with the worker; later steps with the same
combination pay none of this.  A step gets a fresh id, and the worker runs it.

Sessions with target "" get one `LocalWorker` in this process; other targets name a
scheme ("grpc://host:port") whose worker factory was registered with
`register_target_scheme` (the distributed runtime adds its own).

A OneShotIterator's dataset input matters only until the iterator exists (TF runs its
`dataset_factory` once, as the iterator is made).  Once its kernel has made the iterator
(`kernel_state["inputs_spent"]`), steps of a plan holding it run a twin plan where that
input is fed an empty string instead: a fed tensor cuts its producer off, so the
dataset-building ops no longer run each step.  A remote task's kernel states are out of
the master's sight: there, the first step of a plan holding the op that succeeds spends
its input (the op ran, outside control flow, so its kernel made the iterator or had it
already), and the master remembers it for every plan of the session.  (The task keeps
the iterator with the kernel states of the session's connection: a connection lost
takes it along, and a later step fails with FailedPreconditionError.)

Invariant: plans are cached per (feeds, fetches, targets, graph version, tracing) and
shared by concurrent steps; a cached plan's graph stays registered until it is evicted
or the master closes (its twin with it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from asyncflow import debug_watch, errors
from asyncflow import graph as ops
from asyncflow import partition as partition_mod
from asyncflow.graph_passes import run_graph_passes
from asyncflow.lowering import compile_partitions
from asyncflow.placement import Placer
from asyncflow.rendezvous import LocalRendezvous
from asyncflow.worker import RegisteredGraph, timeout_s

__all__ = ["Master", "MasterPlan", "register_target_scheme", "worker_for_target"]

_MAX_CACHED_PLANS = 1024
# Ops whose data inputs matter only until their kernel has used them once and set
# `kernel_state["inputs_spent"]` (the module note).
_SPENT_INPUT_OPS = frozenset(["OneShotIterator"])
_SPENT = np.array(b"", dtype=object)  # what a spent input is fed

_schemes: dict[str, Callable] = {}


def register_target_scheme(scheme: str, factory: Callable) -> None:
    """Let `Session(target)` accept targets "scheme://...": `factory(target, config)`
    returns the Worker the session runs its steps on."""
    _schemes[scheme] = factory


def worker_for_target(target: str, config, local_factory: Callable):
    """The worker for a session target: the local one for "", else the scheme's.

    Raises NotFoundError (TF's) for a target with no registered scheme."""
    if not target:
        return local_factory(config)
    scheme = target.split("://", 1)[0] if "://" in target else None
    factory = _schemes.get(scheme) if scheme else None
    if factory is None:
        known = ", ".join(f"{s}://" for s in sorted(_schemes)) or "none"
        raise errors.NotFoundError(
            None,
            None,
            f"No session factory registered for the given session options: target "
            f"{target!r} (known target schemes: {known}; use '' for this process)",
        )
    return factory(target, config)


class MasterPlan:
    """One (feeds, fetches, targets) combination: the plans registered with the worker
    under `handle`, and the partitions they came from (for RunMetadata)."""

    __slots__ = (
        "plans", "handle", "parts", "client_keys", "fed_fetches", "debug",
        "spendable", "twin", "extra_feeds",
    )  # fmt: skip

    def __init__(self):
        # (op, input tensor) of each op whose input can be cut once spent, or None;
        # the twin plan feeding them (made on first use); the values a step of this
        # plan appends to its feeds (a twin's: one _SPENT per cut input).
        self.spendable = None
        self.twin = None
        self.extra_feeds = ()


class Master:
    def __init__(self, session, graph: ops.Graph, config, worker):
        self._session = session  # what kernels see as ctx.session
        self._graph = graph
        self._config = config
        self.worker = worker
        self.plans: dict = {}
        self.placer = Placer(
            worker.devices,
            allow_soft_placement=config.allow_soft_placement,
            log_device_placement=config.log_device_placement,
            default_device=getattr(worker, "default_device", None),
        )
        self._scratch_graph = ops.Graph()  # owns the _Send/_Recv nodes partitions add
        self._kernel_states: dict[ops.Operation, dict] = {}
        self._remote = getattr(worker, "register_partitions", None) is not None
        self._spent_remotely: set[ops.Operation] = set()  # (the module note)
        self._lock = threading.Lock()
        self._step_counter = 0
        self._config_timeout = timeout_s(None, config)  # operation_timeout_in_ms
        self._client_rendezvous: dict[int, LocalRendezvous] = {}  # step id -> (partial runs)

    def plan(self, feed_tensors, elements, trace=False, debug=None) -> MasterPlan:
        """The plan of (feeds, fetches); `debug`: `debug_watch.debug_watches(options)`."""
        key = (tuple(feed_tensors), tuple(elements), self._graph._version, trace, debug)
        plan = self.plans.get(key)
        if plan is None:
            compiled = self._compile(feed_tensors, list(elements), trace, debug=debug)
            plan = self._remember(key, compiled)
        if plan.spendable is not None:
            return self._spent_twin(plan, feed_tensors, elements, trace)
        return plan

    def _spent_twin(self, plan: MasterPlan, feed_tensors, elements, trace) -> MasterPlan:
        """`plan`'s twin feeding its spendable inputs, once every such op's kernel has
        spent them (until then, `plan`)."""
        states = self._kernel_states
        for op, _ in plan.spendable:
            if self._remote:
                if op not in self._spent_remotely:
                    return plan
                continue
            st = states.get(op)
            if st is None or not st.get("inputs_spent"):
                return plan
        twin = plan.twin
        if twin is None:
            cut = [t for _, t in plan.spendable]
            twin = self._compile([*feed_tensors, *cut], list(elements), trace)
            twin.extra_feeds = (_SPENT,) * len(cut)
            with self._lock:
                if plan.twin is None:
                    plan.twin = twin
                else:  # (made meanwhile by another thread's step)
                    self.worker.deregister_graph(twin.handle)
                    twin = plan.twin
        return twin

    def _remember(self, key, plan: MasterPlan) -> MasterPlan:
        if len(self.plans) >= _MAX_CACHED_PLANS:
            # Drop the oldest plan; TF1 scripts that keep adding ops must not leak.
            old = self.plans.pop(next(iter(self.plans)))
            self.worker.deregister_graph(old.handle)
            if old.twin is not None:
                self.worker.deregister_graph(old.twin.handle)
        self.plans[key] = plan
        return plan

    def _compile(
        self, feed_tensors, elements, trace=False, client=False, debug=None
    ) -> MasterPlan:
        """Prune, place, partition, lower and register one (feeds, fetches) combination
        (`client`: feeds and fetches cross the step's rendezvous, for a partial run;
        `debug`: tfdbg's watches, whose debug ops join the partitions)."""
        order = partition_mod.prune(feed_tensors, elements)
        spendable = None
        if not (client or debug is not None):
            spendable = _spendable_inputs(order, feed_tensors, elements)
        with self._lock:
            assignment = self.placer.place(order)
        lossy = bool(getattr(self._config.graph_options, "enable_bfloat16_sendrecv", False))
        parts, fetch_map = partition_mod.partition(
            order, assignment, feed_tensors, elements, self._scratch_graph, lossy
        )
        if not parts:  # every fetch is fed (or nothing is fetched)
            parts, fetch_map = partition_mod.partition(
                [], {}, feed_tensors, elements, self._scratch_graph
            )
            for p in parts:
                p.device = self.worker.devices[0]
        fed_index = {t: i for i, t in enumerate(feed_tensors)}
        fed_fetches = tuple((k, fed_index[e]) for k, e in enumerate(elements) if e in fed_index)
        client_keys = None
        if client:
            client_keys = partition_mod.client_ends(parts, feed_tensors, self._scratch_graph)
            fetch_map = []
        dplan = None
        if debug is not None:
            roots = debug_watch.insert_debug_nodes(parts, debug, self._scratch_graph)
            dplan = debug_watch.debug_plan(parts, feed_tensors, elements, roots)
        for p in parts:  # (a traced step times the fused ops, as TF's trace shows them)
            run_graph_passes(p, self._scratch_graph)
        register_partitions = getattr(self.worker, "register_partitions", None)
        if register_partitions is not None:  # a remote worker lowers its partitions itself
            mp = MasterPlan()
            mp.plans = []
            mp.parts = parts
            mp.client_keys = None
            mp.fed_fetches = fed_fetches
            mp.debug = dplan
            mp.spendable = spendable
            mp.handle = register_partitions(parts, fetch_map, feed_tensors, trace)
            return mp
        plans = compile_partitions(
            self._session,
            parts,
            0 if client else len(feed_tensors),
            self._kernel_state_for,
            trace,
        )
        index = {id(p): i for i, p in enumerate(parts)}
        mp = MasterPlan()
        mp.spendable = spendable
        mp.plans = plans
        mp.parts = parts
        mp.client_keys = client_keys
        mp.fed_fetches = fed_fetches  # (fetch index, feed index): Session hands the feed back
        mp.debug = dplan
        mp.handle = self.worker.register_graph(
            RegisteredGraph(
                plans,
                [(index[id(p)], j) for p, j in fetch_map],
                self._client_rendezvous.pop if client else None,
            )
        )
        return mp

    def partial_plan(self, feed_tensors, elements) -> MasterPlan:
        """The plan of a partial run (`Session.partial_run_setup`): `plan`'s, with the
        feeds and fetches crossing the step's rendezvous (`partition.client_ends`), so
        they can come and go while the step runs.  `client_keys` holds (the keys each
        feed is sent under, the key each fetch arrives under).

        Raises UnimplementedError on a remote worker."""
        key = ("partial", tuple(feed_tensors), tuple(elements), self._graph._version)
        mp = self.plans.get(key)
        if mp is not None:
            return mp
        if getattr(self.worker, "register_partitions", None) is not None:
            raise errors.UnimplementedError(
                None, None, "partial_run is supported by in-process sessions only"
            )
        return self._remember(key, self._compile(feed_tensors, list(elements), client=True))

    def start_partial(self, plan: MasterPlan):
        """A step of a partial plan: (its rendezvous, its id, the awaitable of the whole
        step)."""
        self._step_counter += 1
        step_id = self._step_counter
        rv = self._client_rendezvous[step_id] = LocalRendezvous()
        return rv, step_id, self.worker.run_graph(plan.handle, step_id, [], None, None, None)

    def _kernel_state_for(self, op) -> dict:
        st = self._kernel_states.get(op)
        if st is None:
            st = self._kernel_states[op] = {}
        return st

    def run_step(self, plan: MasterPlan, feed_values, options, run_metadata=None):
        """One step of `plan` on the worker: an awaitable of the fetched values.

        (A plain function returning the worker's coroutine: the common step pays no
        extra coroutine frame here.)"""
        self._step_counter += 1
        if plan.extra_feeds:
            feed_values = [*feed_values, *plan.extra_feeds]
        step_timeout = (
            self._config_timeout if options is None else timeout_s(options, self._config)
        )
        if plan.debug is not None:  # tfdbg's watches: their files, then the step
            run = self._debugged_step(plan, feed_values, options, run_metadata, step_timeout)
        else:
            run = self.worker.run_graph(
                plan.handle, self._step_counter, feed_values, options, run_metadata, step_timeout
            )
        if self._remote and plan.spendable is not None:
            run = self._spending(run, plan.spendable)
        if run_metadata is not None and getattr(options, "output_partition_graphs", False):
            return self._with_partition_graphs(run, plan, run_metadata)
        return run

    def _debugged_step(self, plan, feed_values, options, run_metadata, step_timeout):
        step_id = self._step_counter

        def start():
            return self.worker.run_graph(
                plan.handle, step_id, feed_values, options, run_metadata, step_timeout
            )

        return debug_watch.run_debugged(start, plan.debug, options, step_id)

    async def _spending(self, run, spendable):
        """`run`, a step on remote tasks of a plan holding `spendable`: once it succeeds,
        their inputs are spent (the module note)."""
        values = await run
        self._spent_remotely.update(op for op, _ in spendable)
        return values

    @staticmethod
    async def _with_partition_graphs(run, plan, run_metadata):
        values = await run
        run_metadata.partition_graphs = partition_mod.partition_graph_defs(plan.parts)
        return values

    def close(self) -> None:
        for plan in self.plans.values():
            self.worker.deregister_graph(plan.handle)
            if plan.twin is not None:
                self.worker.deregister_graph(plan.twin.handle)
        self.plans.clear()


def _spendable_inputs(order, feed_tensors, elements):
    """(op, input) of each op of `order` in `_SPENT_INPUT_OPS` whose one input can be
    fed instead of computed: outside control flow, neither fed nor fetched, and read
    by no other op of the step (None if there is none)."""
    found = [op for op in order if op.type in _SPENT_INPUT_OPS]
    if not found:
        return None
    in_step = set(order)
    fed, fetched = set(feed_tensors), set(elements)
    out = []
    for op in found:
        if len(op._inputs) != 1 or op._control_flow_context is not None:
            continue
        t = op._inputs[0]
        if t in fed or t in fetched or t.op._control_flow_context is not None:
            continue
        if all(c is op for c in t.consumers() if c in in_step):
            out.append((op, t))
    return tuple(out) or None
