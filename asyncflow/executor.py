"""The ready-count executor: compile a pruned subgraph into a plan, run steps of it.

A `Plan` is built once per (feeds, fetches, targets) and holds flat arrays: one kernel,
context, input-slot range and out-edge list per node, and each node's initial pending
count.  A `Step` copies the two mutable arrays (slot values, pending counts) and drives
ready nodes in a plain loop.

Why the hot loop looks the way it does (see benchmarks/core.py for the figures):
- A kernel is an `async def`; the loop calls it and drives the coroutine with
  `send(None)`.  Most kernels finish at once (StopIteration) and cost no Task and no
  trip through the event loop.  Only a kernel that actually suspends (yields a future)
  is wrapped in a Task, whose completion callback propagates its outputs and drives
  whatever became ready.
- Every edge is a (output index, consumer, slot) triple; fetches are edges into extra
  slots whose "consumer" is a sentinel node that never becomes ready, so the loop
  needs no branch for them.  Nodes without outputs produce `(None,)` so that control
  edges are ordinary edges writing into a trash slot.
- A node's input slots are cleared when it runs, so each value is released after its
  last consumer.

Invariants:
- `pending[j]` is the number of inputs (data and control) of node j not yet produced;
  j is pushed on `ready` exactly once, when it reaches zero.
- After the first error, no further kernel starts; in-flight Tasks are cancelled and the
  step's error is the first one recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncflow import errors
from asyncflow.graph import Operation

__all__ = [
    "PLAN_REWRITES",
    "Plan",
    "claim",
    "sole_consumer",
    "Step",
    "StepContext",
    "KernelContext",
    "compile_plan",
    "current_step",
    "forwardable",
    "wrap_kernel_error",
]

# ASYNCFLOW_COMPILED_LOOPS=0 runs every loop on the general frame executor.
_NO_COMPILED_LOOPS = os.environ.get("ASYNCFLOW_COMPILED_LOOPS", "1") == "0"
_CHECK_KERNELS = os.environ.get("ASYNCFLOW_CHECK_KERNELS", "") not in ("", "0")
_ONE_NONE = (None,)

# True while a synchronous `Session.run` drives its step inside one
# `np.errstate(all="ignore")` (TF yields inf/nan silently): kernels need not enter their
# own then (`math_helpers._quiet`; an errstate costs ~3 us, ~8 us with the caches cold
# after a gemm).  A ContextVar, like NumPy's error state, so tasks outside see neither.
QUIET_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar("QUIET_STEP", default=False)


@contextlib.contextmanager
def quiet_step():
    """Run what is inside (a step's kernels) in one `np.errstate(all="ignore")`.

    Entered and left in one context: around a whole coroutine run by one Task, or
    around a direct `send` into a step (never across a hop to another Task)."""
    if QUIET_STEP.get():
        yield
        return
    token = QUIET_STEP.set(True)
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        QUIET_STEP.reset(token)


async def in_quiet_step(coro):
    """`await coro` inside `quiet_step` (for a coroutine that becomes its own Task)."""
    with quiet_step():
        return await coro


_FORWARD, _NOTHING = -1, -2  # special arities (see compile_plan)


_STEP_SERIALS = itertools.count(1)


class StepContext:
    """Per-step state a kernel may need: step id, rendezvous, undo-on-failure hooks.

    Kernels reach it with `current_step()` (a context variable set while the step's
    drivers run; Tasks created for suspended kernels inherit it).
    """

    __slots__ = ("step_id", "serial", "rendezvous", "_on_failure", "failed", "error")

    def __init__(self, step_id: int, rendezvous=None):
        self.step_id = step_id
        self.serial = next(_STEP_SERIALS)  # unique in the process (step ids are per session)
        self.rendezvous = rendezvous
        self._on_failure: list[Callable[[BaseException], None]] | None = None
        self.failed = False
        self.error: BaseException | None = None

    def on_failure(self, callback: Callable[[BaseException], None]) -> None:
        """Run `callback(error)` if this step ends in an error or is cancelled.

        For kernels whose effect must be undone when the step does not deliver its
        results (a Dequeue puts its elements back).  Callbacks run last-registered
        first, on the loop, once the step has failed (in-flight kernels are cancelled).
        """
        if self.failed:  # registered too late to wait for the failure: it already came
            callback(self.error)
            return
        if self._on_failure is None:
            self._on_failure = []
        self._on_failure.append(callback)

    def failure_callbacks(self) -> list:
        """The callbacks registered so far (a kernel may disarm its own undo)."""
        return list(self._on_failure or ())

    def close(self) -> None:
        """The step is over: drop the undo callbacks (and what they hold, e.g. the
        elements a Dequeue would put back), which only a failure would have run."""
        self._on_failure = None

    def run_failure_callbacks(self, error: BaseException) -> None:
        self.failed = True
        self.error = error
        callbacks, self._on_failure = self._on_failure, None
        for cb in reversed(callbacks or ()):
            try:
                cb(error)
            except Exception:  # noqa: BLE001 - one bad undo must not stop the others
                import logging

                logging.getLogger("asyncflow").exception("step failure callback failed")


_CURRENT_STEP: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "asyncflow_step", default=None
)


def current_step() -> StepContext | None:
    """The StepContext of the step whose kernel is running (None outside a step)."""
    return _CURRENT_STEP.get()


def _refs(x) -> int:
    return sys.getrefcount(x)


def _forward_refs(x) -> int:  # the same call depth as `forwardable` -> `_refs`
    return _refs(x)


def _calibrate_forward_baseline() -> int:
    async def kernel(ctx, x):
        return _forward_refs(x)

    vals = [np.zeros(2)]  # the executor's slot
    coro = kernel(None, vals[0])
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("probe kernel suspended")  # pragma: no cover


def forwardable(x, held: int = 0) -> bool:
    """May a kernel write its output into input `x` (TF's forward_input)?

    True when `x` is a writable NumPy array owning its memory that nothing but the
    step holds: the slot it arrived in and the kernel's own argument (`held` more
    references the calling kernel holds itself, e.g. in an `*args` tuple).  Then no
    other consumer, fetch, feed, variable or constant can see the write.  Call it
    directly from the kernel's `async def` body, on the argument, before passing the
    array anywhere: the reference count is calibrated for exactly that.
    """
    return (
        type(x) is np.ndarray
        and x.base is None
        and x.flags.writeable
        and _refs(x) <= _FORWARD_BASELINE + held
    )


_FORWARD_BASELINE = _calibrate_forward_baseline()


class KernelContext:
    """What a kernel sees besides its inputs; one per (session, node), reused by steps."""

    __slots__ = ("op", "attrs", "device", "xp", "kernel_state", "session", "node_name")

    def __init__(self, op: Operation, device, session, kernel_state: dict):
        self.op = op
        self.attrs = op._attrs
        self.device = device
        self.xp = device.xp
        self.kernel_state = kernel_state
        self.session = session
        self.node_name = op.name

    def resource_mgr(self, container: str = ""):
        return self.session._resource_mgr(container)


def wrap_kernel_error(op: Operation, exc: BaseException) -> errors.OpError:
    """Turn any kernel exception into an OpError naming the op and the user's line."""
    where = f"\n\t [[node {op.name} (defined at {op.traceback}) ]]"
    if isinstance(exc, errors.OpError):
        if exc.op is not None:
            return exc
        new = type(exc)(None, op, exc.message + where)
    elif isinstance(exc, MemoryError):
        new = errors.ResourceExhaustedError(
            None, op, f"OOM when running {op.type}: {exc or 'out of memory'}{where}"
        )
    elif isinstance(exc, asyncio.CancelledError):
        new = errors.CancelledError(None, op, f"Step was cancelled{where}")
    else:
        new = errors.UnknownError(None, op, f"{type(exc).__name__}: {exc}{where}")
    new.__cause__ = exc
    return new


def _flat_input_is_ref(op: Operation) -> list[bool]:
    out: list[bool] = []
    for arg in op.op_def.inputs:
        if arg.number_attr:
            n = op._attrs[arg.number_attr]
        elif arg.type_attr and op.op_def.attrs[arg.type_attr].is_list:
            n = len(op._attrs[arg.type_attr])
        else:
            n = 1
        out.extend([arg.is_ref] * n)
    return out


def _deref_kernel(kernel: Callable, positions: list[int]) -> Callable:
    async def deref(ctx, *args):
        args = list(args)
        for p in positions:
            args[p] = args[p].read()
        call = kernel(ctx, *args)
        del args  # hold no extra reference while the kernel runs (see forwardable)
        return await call

    return deref


def _accounting_kernel(kernel: Callable, device) -> Callable:
    """Memory accounting (traced steps): every array a kernel allocates is counted on
    its device until it is freed, which gives bytes in use and the peak per device.

    Only arrays that own their memory count (views share their base's bytes); the
    count drops when the array is garbage, i.e. after its last consumer released it.
    """

    async def accounting(ctx, *args):
        result = await kernel(ctx, *args)
        for v in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(v, np.ndarray) and v.base is None and v.nbytes:
                if any(v is a for a in args):
                    continue  # forwarded, already counted where it was made
                device.record_alloc(v.nbytes)
                try:
                    weakref.finalize(v, device.record_free, v.nbytes)
                except TypeError:  # pragma: no cover - arrays support weakrefs
                    pass
        return result

    return accounting


def _dead():
    from asyncflow.ops.control_flow_prims import DEAD  # ops import the executor

    return DEAD


def _checked_kernel(kernel: Callable, op: Operation) -> Callable:
    """Test mode (ASYNCFLOW_CHECK_KERNELS=1): verify outputs against the graph's types."""

    async def checked(ctx, *args):
        call = kernel(ctx, *args)
        del args  # hold no extra reference while the kernel runs (see forwardable)
        result = await call
        outs = op.outputs
        values = (result,) if len(outs) == 1 else (() if not outs else tuple(result))
        if len(values) != len(outs):
            raise AssertionError(f"{op.type} kernel returned {len(values)} outputs")
        for t, v in zip(outs, values):
            if t._is_ref or v is _dead():
                continue
            arr = np.asarray(v) if not hasattr(v, "dtype") else v
            want = t.dtype.as_numpy_dtype
            if np.dtype(arr.dtype) != np.dtype(want):
                raise AssertionError(
                    f"{op.type} kernel for {op.name} returned dtype {arr.dtype}, graph says "
                    f"{t.dtype.name}"
                )
            if not t.shape.is_compatible_with(np.shape(arr)):
                raise AssertionError(
                    f"{op.type} kernel for {op.name} returned shape {np.shape(arr)}, graph "
                    f"says {t.shape}"
                )
        return result

    return checked


class Plan:
    """A compiled, pruned subgraph.  Immutable once built; shared by concurrent steps."""

    __slots__ = (
        "nodes",
        "kernels",
        "ctxs",
        "starts",
        "ends",
        "clears",
        "arity",
        "edges",
        "single",
        "init_pending",
        "init_ready",
        "num_slots",
        "feed_slots",
        "fetch_slots",
        "fetch_refs",
        "sentinel",
        "has_cf",
        "kinds",
        "n_outputs",
        "merge_expected",
        "enter_info",
        "enter_count",
        "pnodes",
        "plain_edges",
        "derefs",
        "fwd_read",
        "loops",
        "rewritten",
        "__weakref__",
    )


def compile_plan(
    session, nodes, num_feeds: int, fetches: list, kernel_state_for, track_memory=False
) -> Plan:
    """Lay out one partition (a topologically ordered list of `partition.PNode`) flat.

    `fetches` holds specs: `("feed", i)`, `(node_index, output_index)`, or
    `(node_index, None)` for a target op.  Raises InvalidArgumentError when an op has
    no kernel for its device.
    """
    n = len(nodes)
    plan = Plan()
    plan.nodes = [p.op for p in nodes]
    plan.sentinel = n
    kernels, ctxs, starts, ends, clears, single = [], [], [], [], [], []
    derefs: list[list[int]] = []
    edges: list[list] = [[] for _ in range(n)]
    init_pending = [0] * (n + 1)
    init_pending[n] = 1 << 60  # fetch sentinel: never ready
    feed_slots: list[list[int]] = [[] for _ in range(num_feeds)]
    slot = 0
    for i, pnode in enumerate(nodes):
        op, device = pnode.op, pnode.device
        kernel_def = op.op_def.kernel_for(device.device_type)
        if kernel_def is None:
            raise errors.InvalidArgumentError(
                None,
                op,
                f"No OpKernel was registered to support Op '{op.type}' used by node "
                f"{op.name} (defined at {op.traceback}) with these attrs on device "
                f"{device.name}. Registered devices: [{op.op_def.registered_kernels()}]",
            )
        kernel = kernel_def.fn
        is_ref = _flat_input_is_ref(op)
        deref = []
        for k, src in enumerate(pnode.inputs):
            if src[0] != "feed" and not is_ref[k]:
                if nodes[src[0]].op._outputs[src[1]]._is_ref:
                    deref.append(k)
        derefs.append(deref)
        if deref:
            kernel = _deref_kernel(kernel, deref)
        if _CHECK_KERNELS:
            kernel = _checked_kernel(kernel, op)
        if track_memory:
            kernel = _accounting_kernel(kernel, device)
        kernels.append(kernel)
        ctxs.append(KernelContext(op, device, session, kernel_state_for(op)))
        starts.append(slot)
        for src in pnode.inputs:
            if src[0] == "feed":
                feed_slots[src[1]].append(slot)
            else:
                edges[src[0]].append((src[1], i, slot))
                init_pending[i] += 1
            slot += 1
        ends.append(slot)
        clears.append([None] * (slot - starts[-1]))
        single.append(len(op._outputs) == 1)
    trash = slot
    slot += 1
    for i, pnode in enumerate(nodes):
        for c in pnode.controls:
            edges[c].append((-1, i, trash))  # -1: the node's control "output"
            init_pending[i] += 1
    fetch_slots, fetch_refs = [], []
    for spec in fetches:
        if spec[0] == "feed":
            fetch_slots.append(-1 - spec[1])  # negative: read straight from the feed
            fetch_refs.append(False)
        elif spec[1] is None:
            edges[spec[0]].append((-1, n, trash))
            fetch_slots.append(None)
            fetch_refs.append(False)
        else:
            edges[spec[0]].append((spec[1], n, slot))
            fetch_slots.append(slot)
            fetch_refs.append(nodes[spec[0]].op._outputs[spec[1]]._is_ref)
            slot += 1
    plan.kernels = kernels
    plan.ctxs = ctxs
    plan.starts = starts
    plan.ends = ends
    plan.clears = clears
    plan.arity = [e - s for s, e in zip(starts, ends)]
    # Identity and NoOp never need their kernel (unless wrapped: deref, checks,
    # accounting): the hot loop forwards or skips them.  This is what a null-op
    # dispatch benchmark measures, so it pays to special-case.
    for i, pnode in enumerate(nodes):
        if kernels[i] is pnode.op.op_def.kernel_for(pnode.device.device_type).fn:
            if pnode.op.type == "Identity":
                plan.arity[i] = _FORWARD
            elif pnode.op.type == "NoOp":
                plan.arity[i] = _NOTHING
    plan.single = single
    plan.edges = [tuple(e) for e in edges]
    plan.init_pending = init_pending
    plan.init_ready = [i for i in range(n - 1, -1, -1) if init_pending[i] == 0]
    plan.num_slots = slot
    plan.feed_slots = feed_slots
    plan.fetch_slots = fetch_slots
    plan.fetch_refs = fetch_refs
    plan.pnodes = nodes
    plan.derefs = derefs
    plan.rewritten = set()
    if not track_memory:
        for rewrite in PLAN_REWRITES:
            rewrite(plan)
    _compile_control_flow(plan, nodes)
    return plan


# Kernel fusions over a compiled plan (TF's grappler remapper, at plan time): each is
# `rewrite(plan)` and may replace kernels in `plan.kernels` (through `checked`), never
# the graph, of nodes not yet in `plan.rewritten` (adding them there: one fusion per
# node).  Registered by the ops modules that own the kernels involved.
PLAN_REWRITES: list[Callable[[Plan], None]] = []

# Folded values larger than this stay computed each step (memory held per plan).
_FOLD_MAX_ELEMENTS = 1 << 12


def _fold_constants(plan: Plan) -> None:
    """Nodes whose value the graph already knows (`constant_value`: Fill, Shape, Size,
    Cast... of constants and static shapes) return that value instead of recomputing
    it, as TF's grappler folds them.  Their inputs still run (they are cheap Consts);
    the value is read-only, so no consumer can write into it.  A node downstream of a
    feed is left alone: the graph's value does not know that a Const was fed."""
    from asyncflow import graph

    folders = graph._CONSTANT_FOLDERS
    fed = [False] * len(plan.pnodes)  # pnodes are in topological order
    for i, p in enumerate(plan.pnodes):
        op = p.op
        srcs = op._inputs
        fed[i] = len(p.inputs) != len(srcs) or any(
            src[0] == "feed" or fed[src[0]] or plan.pnodes[src[0]].op is not t.op
            for src, t in zip(p.inputs, srcs)
        )  # (a Recv in between: the value crossed from a partition we cannot see)
        if fed[i]:
            continue
        if op.type in ("Const", "Identity") or op.type not in folders:
            continue
        if len(op._outputs) != 1 or op.op_def.stateful or p.device.device_type != "CPU":
            continue
        if plan.derefs[i] or i in plan.rewritten:
            continue
        value = graph.constant_value(op._outputs[0])
        if (
            type(value) is not np.ndarray
            or value.dtype != op._outputs[0].dtype.as_numpy_dtype
            or value.dtype.kind not in "biufc"
            or value.size > _FOLD_MAX_ELEMENTS
        ):
            continue
        value = value.copy()
        value.flags.writeable = False
        plan.kernels[i] = checked(_constant_kernel(value), op)
        plan.rewritten.add(i)


def _constant_kernel(value) -> Callable:
    async def kernel(ctx, *args):
        return value

    return kernel


PLAN_REWRITES.append(_fold_constants)


def sole_consumer(plan: Plan, j: int):
    """The node that alone takes node j's outputs (no fetch, no second consumer, no
    reference read in between), or None.  Control edges do not count."""
    data = [e for e in plan.edges[j] if e[0] >= 0]
    if len(data) != 1 or data[0][1] >= len(plan.derefs):  # (a fetch's sentinel)
        return None
    return None if plan.derefs[data[0][1]] else data[0][1]


def claim(plan: Plan, *nodes: int) -> bool:
    """Mark `nodes` as taken by a rewrite; False (taking none) if one already is."""
    if plan.rewritten.intersection(nodes):
        return False
    plan.rewritten.update(nodes)
    return True


def variable_behind(plan: Plan, src) -> int | None:
    """The variable node (VariableV2) whose value input `src` reads, past Identities."""
    j, out = src
    while j != "feed" and out == 0:
        op = plan.pnodes[j].op
        if op.type in ("VariableV2", "Variable"):
            return j
        if op.type != "Identity":
            return None
        j, out = plan.pnodes[j].inputs[0]
    return None


def order_before_writers(plan: Plan, i: int, variables) -> bool:
    """Make every node that updates one of `variables` (through a reference input) wait
    for node i, with control edges, so that i reads their values from before the
    update.  False, adding nothing, when a writer is upstream of i (it would wait on
    itself), or when the plan has control flow or receives from another partition: a
    dead i would make its writers dead too (a control input's deadness propagates)."""
    from asyncflow.frames import CONTROL_FLOW_KINDS, KIND_OF, RECV

    for p in plan.pnodes:
        kind = KIND_OF.get(p.op.type)
        if kind in CONTROL_FLOW_KINDS or kind == RECV:
            return False
    writers = set()
    for w, p in enumerate(plan.pnodes):
        if w == i:
            continue
        is_ref = _flat_input_is_ref(p.op)
        if any(r and src[0] in variables and src[1] == 0 for r, src in zip(is_ref, p.inputs)):
            writers.add(w)
    if not writers:
        return True
    upstream, todo = set(), [i]
    while todo:
        k = todo.pop()
        for src in plan.pnodes[k].inputs:
            if src[0] != "feed" and src[0] not in upstream:
                upstream.add(src[0])
                todo.append(src[0])
        for c in plan.pnodes[k].controls:
            if c not in upstream:
                upstream.add(c)
                todo.append(c)
    if writers & upstream:
        return False
    trash = plan.ends[-1]  # the slot control edges write to (compile_plan)
    plan.edges[i] = tuple(plan.edges[i]) + tuple((-1, w, trash) for w in sorted(writers))
    for w in writers:
        plan.init_pending[w] += 1
    return True


def checked(kernel: Callable, op: Operation) -> Callable:
    """`kernel` as compile_plan installs it for `op` (output checks in test mode)."""
    return _checked_kernel(kernel, op) if _CHECK_KERNELS else kernel


def _compile_control_flow(plan: Plan, nodes, force: bool = False) -> None:
    """Static facts the frame executor needs; `has_cf` is False for plain graphs.

    `force` prepares a plan without primitives for the frame executor anyway: a
    partition that receives possibly dead values from one that has control flow.
    """
    from asyncflow.frames import CONTROL_FLOW_KINDS, KIND_OF, MERGE, NORMAL

    kinds = [KIND_OF.get(p.op.type, NORMAL) for p in nodes]
    plan.has_cf = force or any(k in CONTROL_FLOW_KINDS for k in kinds)
    if not plan.has_cf:
        return
    n = len(nodes)
    plan.kinds = kinds + [NORMAL]  # the fetch sentinel
    plan.n_outputs = [len(p.op._outputs) for p in nodes]
    plan.merge_expected = [0] * n
    plan.enter_info = [None] * n
    plan.enter_count = {}
    for i, p in enumerate(nodes):
        if kinds[i] == MERGE:
            srcs = [src for src in p.inputs if src[0] != "feed"]
            loop = any(nodes[src[0]].op.type == "NextIteration" for src in srcs)
            plan.merge_expected[i] = 1 if loop else len(p.inputs)
            # A Merge waits for its control inputs and one firing, not for every input.
            plan.init_pending[i] = len(p.controls) + 1
        elif p.op.type == "Enter":
            a = p.op._attrs
            name = a["frame_name"]
            plan.enter_info[i] = (name, bool(a["is_constant"]), int(a["parallel_iterations"]))
            plan.enter_count[name] = plan.enter_count.get(name, 0) + 1
    plan.init_ready = [i for i in range(n - 1, -1, -1) if plan.init_pending[i] == 0]
    # Forwarding nodes skip their kernel, so a variable reference reaching one whose
    # output is a plain value is read by the frame executor itself; one whose output is
    # a reference (a RefEnter) passes it on.  Identity of a reference runs its kernel.
    from asyncflow.frames import FORWARD, IDENT

    plan.fwd_read = [False] * (n + 1)
    for i, p in enumerate(nodes):
        if plan.derefs[i] and plan.kinds[i] >= FORWARD:
            if plan.kinds[i] == IDENT:
                plan.kinds[i] = NORMAL
            elif not p.op._outputs[0]._is_ref:
                plan.fwd_read[i] = True
    ends = plan.ends
    plan.plain_edges = [
        all(not (plan.kinds[j] == MERGE and s < ends[j]) for oi, j, s in e) for e in plan.edges
    ]
    from asyncflow.frames import compile_loops

    plan.loops = None if _NO_COMPILED_LOOPS else compile_loops(plan, nodes)


class Step:
    """One execution of a plan.  Create, call `start()`, then await `wait()` if needed."""

    __slots__ = (
        "plan",
        "vals",
        "pending",
        "ready",
        "error",
        "tasks",
        "done",
        "feed_values",
        "loop",
        "on_error",
    )

    def __init__(self, plan: Plan, feed_values: list, on_error=None):
        self.plan = plan
        vals = [None] * plan.num_slots
        for slots, v in zip(plan.feed_slots, feed_values):
            for s in slots:
                vals[s] = v
        self.vals = vals
        self.pending = plan.init_pending[:]
        self.ready: list[int] = []
        self.error: errors.OpError | None = None
        self.tasks: dict[asyncio.Task, Any] | None = None
        self.done: asyncio.Future | None = None
        self.feed_values = feed_values
        self.loop = None
        # Called with the error when one of this step's kernels fails: the session uses
        # it to abort the step's other partitions and its rendezvous.
        self.on_error = on_error

    def start(self) -> None:
        self.ready = self.plan.init_ready[:]
        self._spawn()

    # The hot loop.  It is a coroutine so that `await kernel(...)` of a kernel that does
    # not suspend costs no StopIteration (~0.13 µs instead of ~0.45 µs for send()).  When
    # a kernel does suspend, this whole driver parks with it; `_spawn` then starts a new
    # driver for the nodes still ready, so one waiting kernel never holds up the others.
    # Deliberately flat, with locals for everything it touches.
    async def _drive(self) -> None:
        plan = self.plan
        kernels, ctxs, starts, ends = plan.kernels, plan.ctxs, plan.starts, plan.ends
        arity, clears, edges, single = plan.arity, plan.clears, plan.edges, plan.single
        vals, pending, ready = self.vals, self.pending, self.ready
        pop, push = ready.pop, ready.append
        while ready:
            if self.error is not None:
                return
            i = pop()
            try:
                n = arity[i]
                if n == 1:
                    a = starts[i]
                    r = await kernels[i](ctxs[i], vals[a])
                    vals[a] = None
                elif n == _FORWARD:  # Identity: pass the value on, no kernel call
                    a = starts[i]
                    r = vals[a]
                    vals[a] = None
                elif n == 0:
                    r = await kernels[i](ctxs[i])
                elif n == _NOTHING:  # NoOp: nothing to compute
                    r = None
                elif n == 2:
                    a = starts[i]
                    r = await kernels[i](ctxs[i], vals[a], vals[a + 1])
                    vals[a] = vals[a + 1] = None
                else:
                    a, b = starts[i], ends[i]
                    r = await kernels[i](ctxs[i], *vals[a:b])
                    vals[a:b] = clears[i]
                if single[i]:
                    for _, j, s in edges[i]:
                        vals[s] = r
                        pending[j] -= 1
                        if not pending[j]:
                            push(j)
                else:
                    if r is None:
                        r = _ONE_NONE
                    for oi, j, s in edges[i]:
                        vals[s] = r[oi]
                        pending[j] -= 1
                        if not pending[j]:
                            push(j)
                r = None  # a parked driver must not keep the last output alive
            except BaseException as exc:  # noqa: BLE001 - every failure aborts the step
                self._fail(i, exc)
                return

    def _spawn(self) -> None:
        """Drive ready nodes until none is left; park drivers whose kernel suspended."""
        ready = self.ready
        while ready and self.error is None:
            coro = self._drive()
            try:
                fut = coro.send(None)
            except StopIteration:
                continue
            if self.tasks is None:
                self.tasks = {}
                self.loop = asyncio.get_running_loop()
            task = self.loop.create_task(_resume_driver(self, coro, fut))
            self.tasks[task] = coro
            task.add_done_callback(self._on_task_done)

    @property
    def finished(self) -> bool:
        return self.error is not None or not self.tasks

    def _on_task_done(self, task: asyncio.Task) -> None:
        coro = self.tasks.pop(task, None)
        if task.cancelled() and coro is not None and coro.cr_frame is not None:
            # Cancelled before its first step: the Task never threw into the parked
            # driver, so its waiting kernel would miss its cleanup (a Dequeue must
            # withdraw its waiter).  Deliver the cancellation by hand.
            try:
                coro.throw(asyncio.CancelledError())
            except BaseException:  # noqa: BLE001 - the driver records kernel errors itself
                pass
            else:
                coro.close()  # the kernel ignored the cancellation; stop it anyway
        if not task.cancelled() and task.exception() is not None and self.error is None:
            exc = task.exception()
            self.error = errors.InternalError(None, None, f"executor failure: {exc!r}")
            self.error.__cause__ = exc
            self.cancel_tasks()
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self.done is not None and not self.done.done() and (self.error or not self.tasks):
            self.done.set_result(None)

    def _fail(self, i: int, exc: BaseException) -> None:
        if self.error is None:
            self.error = wrap_kernel_error(self.plan.nodes[i], exc)
        self.cancel_tasks()
        self._maybe_finish()
        if self.on_error is not None:
            self.on_error(self.error)

    def abort(self, error: errors.OpError) -> None:
        """Fail the step from outside (session closed, deadline passed, caller cancelled)."""
        if self.error is None:
            self.error = error
        self.cancel_tasks()
        self._maybe_finish()

    def cancel_tasks(self) -> None:
        if self.tasks:
            current = asyncio.current_task() if self.loop is not None else None
            for t in list(self.tasks):
                if t is not current:
                    t.cancel()

    async def wait(self) -> None:
        """Suspend until every suspended kernel finished or the step failed."""
        if self.error is None and self.tasks:
            self.done = self.loop.create_future()
            await self.done

    def results(self) -> list:
        plan, vals, feeds = self.plan, self.vals, self.feed_values
        out = []
        for s, ref in zip(plan.fetch_slots, plan.fetch_refs):
            if s is None:
                out.append(None)
                continue
            v = vals[s] if s >= 0 else feeds[-1 - s]
            if ref:
                v = v.read()
            out.append(v)
        return out


class _DriverResume:
    """Continues a parked driver inside a Task; starts new drivers when it parks again."""

    __slots__ = ("step", "coro", "first")

    def __init__(self, step, coro, first):
        self.step, self.coro, self.first = step, coro, first

    def __await__(self):
        coro, y, step = self.coro, self.first, self.step
        self.first = None
        while True:
            try:
                sent = yield y
            except BaseException as exc:  # cancellation goes into the waiting kernel
                try:
                    y = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    y = coro.send(sent)
                except StopIteration:
                    return
            if step.ready and step.error is None:
                step._spawn()


async def _resume_driver(step, coro, first):
    await _DriverResume(step, coro, first)
