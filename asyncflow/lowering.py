"""Lowering: one partition's nodes become a flat `executor.Plan`, then plan passes run.

`compile_plan` lays a partition (a topologically ordered list of `partition.PNode`) out
as flat arrays (kernels, input-slot ranges, out-edges, initial pending counts), wraps
kernels that need it (reads of variable references, test-mode output checks, memory
accounting), runs the plan passes in their explicit order (`PLAN_PASSES`), and adds what
the frame executor needs for plans with control flow.

Invariant: a plan is immutable once `compile_plan` returns; steps share it.
"""

from __future__ import annotations

import collections
import os
import weakref
from collections.abc import Callable

import numpy as np

from asyncflow import donation, errors, executor, graph, tracing
from asyncflow.devices import denormal, host_pool
from asyncflow.executor import (
    _FORWARD,
    _GENERAL,
    _NOTHING,
    CONST,
    CONTROL_FLOW_KINDS,
    FORWARD,
    IDENT,
    KIND_OF,
    MERGE,
    NORMAL,
    RECV,
    SWITCH,
    TRIGGER,
    KernelContext,
    Plan,
    _checked_kernel,
    _flat_input_is_ref,
)
from asyncflow.frames import ENTER, EXIT, NEXT_ITER, compile_loops
from asyncflow.ops import reader_ops

__all__ = ["PLAN_PASSES", "compile_control_flow", "compile_partitions", "compile_plan"]

# ASYNCFLOW_COMPILED_LOOPS=0 runs every loop on the general frame executor.
_NO_COMPILED_LOOPS = os.environ.get("ASYNCFLOW_COMPILED_LOOPS", "1") == "0"


# Control-flow primitives that carry a reference through when their output is one.
_REF_FORWARDING = frozenset(["Switch", "Enter", "Exit", "NextIteration", "Merge"])


def _deref_kernel(kernel: Callable, positions: list[int]) -> Callable:
    async def deref(ctx, *args, **kw):
        args = list(args)
        for p in positions:
            args[p] = args[p].read()
        return await kernel(ctx, *args, **kw)

    return deref


def _accounting_kernel(kernel: Callable, device) -> Callable:
    """Memory accounting (traced steps): every array a kernel allocates is counted on
    its device until it is freed, which gives bytes in use and the peak per device.

    Only arrays that own their memory count (views share their base's bytes); the
    count drops when the array is garbage, i.e. after its last consumer released it.
    """

    async def accounting(ctx, *args, **kw):
        result = await kernel(ctx, *args, **kw)
        for v in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(v, np.ndarray) and v.nbytes and host_pool.owns_memory(v):
                if any(v is a for a in args):
                    continue  # forwarded, already counted where it was made
                device.record_alloc(v.nbytes)
                try:
                    weakref.finalize(v, device.record_free, v.nbytes)
                except TypeError:  # pragma: no cover - arrays support weakrefs
                    pass
        return result

    return accounting


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
        kernel_def = device.kernel_for(op.op_def)
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
        if op.type in _REF_FORWARDING and op._outputs and op._outputs[0]._is_ref:
            # TF's RefSwitch/RefEnter/RefExit/RefNextIteration/RefMerge: a variable
            # passes through as itself (Switch's predicate is still read).
            is_ref = [True] * (len(is_ref) if op.type == "Merge" else 1) + is_ref[1:]
        deref = []
        for k, src in enumerate(pnode.inputs):
            if src[0] != "feed" and not is_ref[k]:
                if nodes[src[0]].op._outputs[src[1]]._is_ref:
                    deref.append(k)
        derefs.append(deref)
        if deref:
            kernel = _deref_kernel(kernel, deref)
        if executor._CHECK_KERNELS:  # (read at compile time: tests switch it)
            kernel = _checked_kernel(kernel, op)
        if track_memory:  # a traced plan: memory accounting and per-node times
            kernel = tracing.timed_kernel(_accounting_kernel(kernel, device), op, device)
        kernels.append(kernel)
        ctx = KernelContext(op, device, session, kernel_state_for(op))
        plan_seconds = getattr(device, "plan_seconds", None)
        if plan_seconds is not None:  # where its work runs, decided now when it can be
            ins = [
                nodes[src[0]].op._outputs[src[1]]
                if src[0] != "feed"
                else (op.inputs[k] if k < len(op.inputs) else None)
                for k, src in enumerate(pnode.inputs)
            ]
            ctx.est_seconds = plan_seconds(op, ins)
        ctxs.append(ctx)
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
    late_reads = 0
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
            slot += 1
            if nodes[spec[0]].op._outputs[spec[1]]._is_ref:
                fetch_refs.append(True)
                continue
            var = _aliased_variable(nodes, spec[0]) if session is not None else None
            if var is None or nodes[var[0]].device.device_type != "CPU":
                fetch_refs.append(False)
                continue
            # The variable's reference reaches the sentinel too, in a slot of its own;
            # the fetch reads the variable through it once the step is done.
            edges[var[0]].append((var[1], n, slot))
            fetch_refs.append(slot)
            late_reads += 1
            slot += 1
    plan.kernels = kernels
    plan.ctxs = ctxs
    # (watch, ctx, node) of the ops that follow each step of the plan (OpDef.step_watch)
    plan.watchers = tuple(
        (op.op_def.step_watch, ctx, i)
        for i, (op, ctx) in enumerate(zip(plan.nodes, ctxs, strict=True))
        if op.op_def.step_watch is not None
    )
    plan.starts = starts
    plan.ends = ends
    plan.clears = clears
    plan.arity = [e - s for s, e in zip(starts, ends)]
    # Identity and NoOp never need their kernel (unless wrapped: deref, checks,
    # accounting): the hot loop forwards or skips them.  This is what a null-op
    # dispatch benchmark measures, so it pays to special-case.
    for i, pnode in enumerate(nodes):
        if kernels[i] is pnode.device.kernel_for(pnode.op.op_def).fn:
            if pnode.op.type == "Identity":
                plan.arity[i] = _FORWARD
            elif pnode.op.type == "NoOp":
                plan.arity[i] = _NOTHING
    plan.single = single
    plan.edges = [tuple(e) for e in edges]
    plan.init_pending = init_pending
    plan.init_ready = [i for i in range(n - 1, -1, -1) if init_pending[i] == 0]
    plan.num_slots = slot
    # What the fetch sentinel's count is once every fetch arrived (Step.results).
    plan.sentinel_done = init_pending[n] - sum(spec[0] != "feed" for spec in fetches) - late_reads
    plan.feed_slots = feed_slots
    plan.fetch_slots = fetch_slots
    plan.fetch_refs = fetch_refs
    plan.pnodes = nodes
    plan.derefs = derefs
    plan.rewritten = set()
    plan.aliasing = set()
    if not track_memory:
        for rewrite in PLAN_PASSES:
            rewrite(plan)
    compile_control_flow(plan, nodes)
    donation.decide(plan)
    return plan


def _aliased_variable(nodes, i):
    """The (node, output) of the ref variable that node `i`'s output aliases in TF1, or
    None.  TF's Identity forwards its input's buffer, so a fetched `v`, `v.value()` or
    `tf.identity(v)` of a ref variable shows the variable as the step left it (after an
    update made in place in the same step), not as it was when read; `fetch_refs` marks
    such fetches to be read once the step is done (`Step.results`).  Only in the
    session's own process and host memory: a value that crosses to another task or
    device is a copy made when it is sent, in TF as here (the caller checks that)."""
    for _ in range(len(nodes)):
        pnode = nodes[i]
        if pnode.op.type != "Identity" or len(pnode.inputs) != 1:
            return None
        src = pnode.inputs[0]
        if src[0] == "feed":
            return None
        if nodes[src[0]].op._outputs[src[1]]._is_ref:
            return src
        i = src[0]
    return None


# Folded values larger than this stay computed each step (memory held per plan).
_FOLD_MAX_ELEMENTS = 1 << 12


def _fold_constants(plan: Plan) -> None:
    """Nodes whose value the graph already knows (`constant_value`: Fill, Shape, Size,
    Cast... of constants and static shapes) return that value instead of recomputing
    it, as TF's grappler folds them.  Their inputs still run (they are cheap Consts);
    the value is read-only, so no consumer can write into it.  A node downstream of a
    feed is left alone: the graph's value does not know that a Const was fed.  The
    values are computed with denormals flushed, as the kernels would compute them
    (devices/denormal.py: a Cast to float32 of 1e-40 is 0)."""
    flushed = denormal.enter()
    try:
        _fold_constant_nodes(plan)
    finally:
        denormal.leave(flushed)


def _fold_constant_nodes(plan: Plan) -> None:
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
        plan.kernels[i] = plan.checked(_constant_kernel(value), op)
        plan.rewritten.add(i)


def _constant_kernel(value) -> Callable:
    async def kernel(ctx, *args):
        return value

    return kernel


def compile_partitions(
    session, parts, num_feeds: int, kernel_state_for, track_memory=False
) -> list[Plan]:
    """`compile_plan` of each partition of one step (`partition.Partition`s); where
    any has control flow and there are several, every one understands dead values,
    which may cross devices."""
    plans = [
        compile_plan(session, p.nodes, num_feeds, p.fetches, kernel_state_for, track_memory)
        for p in parts
    ]
    if len(plans) > 1 and any(pl.has_cf for pl in plans):
        for pl in plans:
            if not pl.has_cf:
                compile_control_flow(pl, pl.pnodes, force=True)
    return plans


def compile_control_flow(plan: Plan, nodes, force: bool = False) -> None:
    """Static facts the frame executor needs; `has_cf` is False for plain graphs.

    `force` prepares a plan without primitives for the frame executor anyway: a
    partition that receives possibly dead values from one that has control flow.
    """
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
    _check_frames(nodes)
    plan.init_ready = [i for i in range(n - 1, -1, -1) if plan.init_pending[i] == 0]
    # Forwarding nodes skip their kernel, so a variable reference reaching one whose
    # output is a plain value is read by the frame executor itself; one whose output is
    # a reference (a RefEnter) passes it on.  Identity of a reference runs its kernel.
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
    if _NO_COMPILED_LOOPS:
        plan.loops = None
    else:
        made = [donation.makes_new(p.op) and not donation.passes_inputs(p.op) for p in nodes]
        keeps = [donation.retains(p.op) for p in nodes]
        plan.loops = compile_loops(plan, nodes, made, keeps)
    _general_nodes(plan, nodes)


def _check_frames(nodes) -> None:
    """TF's executor check that each node's inputs come from one frame: an Enter's
    output is in its frame, an Exit's in the frame its input's frame was entered from,
    any other node's in its inputs' frame.  A node with no inputs but fed ones fits any
    frame (a constant of a loop body may have none), so only frames known through
    Enter/Exit can disagree.

    Raises:
      InvalidArgumentError: a node with inputs from two frames (TF's message).
    """
    n = len(nodes)
    frame: list = [None] * n  # the frame a node's outputs are in, None while unknown
    parent: dict = {}  # frame name -> the frame it was entered from (when known)
    for _ in range(64):  # a fixed point: graph order is nearly topological already
        changed = False
        for j, p in enumerate(nodes):
            if p.op.type == "Enter":
                name = p.op._attrs["frame_name"]
                src = p.inputs[0][0] if p.inputs and p.inputs[0][0] != "feed" else None
                outer = _out_frame(src, frame, parent, nodes) if src is not None else None
                if outer is not None and parent.get(name) is None:
                    parent[name] = outer
                if frame[j] != name:
                    frame[j], changed = name, True
                continue
            seen = None
            for i in [s[0] for s in p.inputs if s[0] != "feed"] + list(p.controls):
                f = _out_frame(i, frame, parent, nodes)
                if f is None:
                    continue
                if seen is None:
                    seen = (i, f)
                elif seen[1] != f:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"{{{{node {p.op.name}}}}} has inputs from different frames. The "
                        f"input {{{{node {nodes[i].op.name}}}}} is in frame '{f}'. The input "
                        f"{{{{node {nodes[seen[0]].op.name}}}}} is in frame '{seen[1]}'.",
                    )
            if seen is not None and frame[j] != seen[1]:
                frame[j], changed = seen[1], True
        if not changed:
            return


def _out_frame(i, frame, parent, nodes):
    if nodes[i].op.type == "Exit":
        return parent.get(frame[i])
    return frame[i]


def _general_nodes(plan: Plan, nodes) -> None:
    """Which nodes of a plan with control flow take the interpreter's general path
    (arity _GENERAL): the control-flow primitives, Send/Recv (keyed by iteration),
    nodes with a Merge among their consumers, forwarding nodes that read a reference,
    and every node that may receive a dead value (`_dead_conditions`).  The rest run
    on the hot paths."""
    ports, ctl = _dead_conditions(plan, nodes)
    fast_kinds = (NORMAL, IDENT, CONST)
    for i, p in enumerate(nodes):
        may_be_dead = any(s[0] != "feed" and ports[s[0]][s[1]] for s in p.inputs) or any(
            ctl[c] for c in p.controls
        )
        if (
            plan.kinds[i] not in fast_kinds
            or may_be_dead
            or not plan.plain_edges[i]
            or plan.fwd_read[i]
        ):
            plan.arity[i] = _GENERAL
            plan.single[i] = False  # (Step._drive: it delivers its outputs itself)


_NEVER: frozenset = frozenset()


def _dead_conditions(plan: Plan, nodes) -> tuple[list, list]:
    """When each value of a plan may be dead: per node, a condition per output port
    and one for its control edge, each a set of literals, the value being dead only
    if one of them holds (empty: never dead).

    A literal `(pred, b)` holds when the predicate value `pred` (a node's output,
    followed back through Identity nodes) is `b`: a Switch's false output is dead when
    its predicate is True, its true output when it is False, and both when its data
    or predicate is.  A literal `("?", i)` is node i's own unknown condition: a Recv's
    (its sender's), and any value crossing a frame's boundary or into the next
    iteration (Enter, Exit, NextIteration), where a predicate's value may differ.
    Any other node's outputs are dead when any input is (a ControlTrigger's never).
    A Merge's output is dead only when all its inputs are: when one input is dead
    only under the literals all inputs share, or every input's other literal is on
    one predicate and they cover both of its values (a `tf.cond`'s Merge: one branch
    always runs), it is dead only under the shared literals, so the nodes after a
    cond whose inputs are live run on the hot paths; otherwise under any input's.

    Sets only grow, and each holds at least what its inputs' sets imply, which keeps
    it sound; a plan whose sets have not settled after 64 looks at each node (graph
    order is nearly topological: one or two settle them) is taken as all possibly
    dead, the general path for every node."""
    kinds = plan.kinds
    n = len(nodes)
    ports = [[_NEVER] * max(len(p.op._outputs), 1) for p in nodes]
    ctl = [_NEVER] * n

    def pred_key(src):
        while src[0] != "feed" and kinds[src[0]] == IDENT and nodes[src[0]].inputs:
            src = nodes[src[0]].inputs[0]
        return tuple(src)

    def data(src):
        return _NEVER if src[0] == "feed" else ports[src[0]][src[1]]

    def evaluate(i, p):
        k = kinds[i]
        controls = _NEVER.union(*(ctl[c] for c in p.controls)) if p.controls else _NEVER
        if k == TRIGGER:
            return _NEVER, _NEVER
        if k == RECV:
            whole = frozenset([("?", i)])
            return whole, whole
        if k == MERGE:
            whole = controls | _merged([data(s) for s in p.inputs])
            return whole, whole
        whole = controls.union(*(data(s) for s in p.inputs))
        if k == SWITCH:
            key = pred_key(p.inputs[1]) if len(p.inputs) > 1 else ("?", i)
            return (whole | {(key, True)}, whole | {(key, False)}), whole
        if whole and k in (ENTER, EXIT, NEXT_ITER):
            whole = frozenset([("?", i)])
        return whole, whole

    # A work list in graph order (nearly topological): a node is looked at again only
    # when a set it reads grew.
    consumers = [[j for _, j, _ in plan.edges[i] if j < n] for i in range(n)]
    queue, queued = collections.deque(range(n)), [True] * n
    visits = 64 * n + 64
    while queue:
        visits -= 1
        if visits < 0:
            unknown = frozenset([("?", -1)])  # (not settled: every value may be dead)
            return [[unknown] * len(c) for c in ports], [unknown] * n
        i = queue.popleft()
        queued[i] = False
        outs, whole = evaluate(i, nodes[i])
        if not isinstance(outs, tuple):
            outs = (outs,) * len(ports[i])
        grew = False
        for port, cond in enumerate(outs):
            if not cond <= ports[i][port]:
                ports[i][port] = ports[i][port] | cond
                grew = True
        if not whole <= ctl[i]:
            ctl[i] = ctl[i] | whole
            grew = True
        if grew:
            for j in consumers[i]:
                if not queued[j]:
                    queued[j] = True
                    queue.append(j)
    return ports, ctl


def _merged(conds: list) -> frozenset:
    """A Merge's condition from its inputs' (see `_dead_conditions`)."""
    if not conds:
        return _NEVER
    shared = frozenset.intersection(*conds)
    rest = [c - shared for c in conds]
    if any(not r for r in rest):
        return shared  # (an input dead only when all are)
    if all(len(r) == 1 for r in rest):
        lits = [next(iter(r)) for r in rest]
        key, values = lits[0][0], {lit[1] for lit in lits}
        if key != "?" and all(lit[0] == key for lit in lits) and values == {True, False}:
            return shared  # (one branch of each predicate value always runs)
    return frozenset().union(*conds)


# The plan passes, in the order they run (TF's grappler remapper, at plan time).  Each is
# `rewrite(plan)`: it may replace kernels in `plan.kernels` (through `plan.checked`), never
# the graph, of nodes it claims first (`plan.claim`: one rewrite per node), so an earlier
# pass wins over a later one.  The fusions' kernels live with their ops in ops/; the
# order lives here, and only here.
PLAN_PASSES: list[Callable[[Plan], None]] = [
    _fold_constants,
    reader_ops.skip_unused_keys,
]
