"""Dynamic control flow: frames, iterations, dead tensors, and compiled while loops.

The interpreter (`executor.Step`) is one for every plan.  A plan without control flow
runs on its hot loop alone; in a plan with control flow, the nodes that route values
between frames (Enter, Exit, NextIteration), Merge, and the nodes that may receive a
dead value take its general path, which calls into `FrameRouting` below.  Everything
else, in any frame, stays on the hot loop, working on the arrays of its iteration.

Model (TF's executor; "tags and frames" after the MIT Tagged-Token machine):
- Every value lives in an `Iter`: one iteration of one `Frame` instance.  The root frame
  has a single iteration; each Enter of frame F executed in iteration P creates (once)
  the child frame instance keyed by (P, F).  An Iter owns its own slot values, pending
  counts, dead counts and ready nodes, so iterations run concurrently.
- Routing follows the producer's kind: Enter sends into the child frame (iteration 0,
  or every iteration when `is_constant`), Exit to the parent iteration, NextIteration
  to the next iteration (started at once while fewer than `parallel_iterations` are
  live, else deferred), anything else within its own iteration.  An iteration that
  receives ready nodes from outside is queued on the step's `runnable` list, where a
  driver whose own iteration ran dry takes it.
- Deadness: Switch's untaken output is DEAD; a node with a dead input produces dead
  outputs without running (ControlTrigger excepted); Merge fires on its first live
  input, and is dead only when every input it can receive is dead (one per iteration
  for a loop Merge).  A dead NextIteration ends that path; a dead Exit is delivered to
  the parent only when its frame ends without a live one (the whole loop was dead).
- Completion: an iteration is done when nothing of it is outstanding (ready nodes, a
  driver working in it, live child frames, compiled loops waiting for their Enters)
  and, for iteration 0, every Enter of the frame arrived.  Done iterations are freed
  oldest first, so a 100,000-iteration loop keeps at most `parallel_iterations` of
  them alive.
"""

from __future__ import annotations

import copy

import numpy as np

from asyncflow import errors
from asyncflow.kernel_api import DEAD
from asyncflow.loop_slices import _YIELD_TO_LOOP, _clock, new_slice, slice_deadline

__all__ = [
    "CONTROL_FLOW_KINDS",
    "FORWARD",
    "FrameRouting",
    "IDENT",
    "KIND_OF",
    "LoopProgram",
    "MERGE",
    "NORMAL",
    "compile_loops",
]

# Node kinds of plans with control flow; kinds from FORWARD on forward their
# single input without calling a kernel.
NORMAL, SWITCH, MERGE, TRIGGER, SEND, RECV, CONST, FORWARD, IDENT, ENTER, EXIT, NEXT_ITER = range(
    12
)
KIND_OF = {
    "_Send": SEND,  # a dead value is still sent, so that its _Recv learns it is dead
    "_Recv": RECV,
    "Identity": IDENT,
    "Const": CONST,  # loop-body constants run every iteration: no kernel call
    "LoopCond": IDENT,
    "Switch": SWITCH,
    "Merge": MERGE,
    "Enter": ENTER,
    "Exit": EXIT,
    "NextIteration": NEXT_ITER,
    "ControlTrigger": TRIGGER,
}
# A plan needs the frame executor only if it holds one of these.
CONTROL_FLOW_KINDS = frozenset([SWITCH, MERGE, TRIGGER, ENTER, EXIT, NEXT_ITER])


class Frame:
    __slots__ = (
        "name",
        "parent",
        "parallel",
        "iters",
        "count",
        "oldest",
        "pending_inputs",
        "invariants",
        "deferred",
        "dead_exits",
    )

    def __init__(self, name, parent, parallel, pending_inputs):
        self.name = name
        self.parent = parent  # the parent Iter (None for the root frame)
        self.parallel = max(1, parallel)
        self.iters: dict[int, Iter] = {}
        self.count = 0  # index of the newest iteration
        self.oldest = 0
        self.pending_inputs = pending_inputs
        self.invariants: list[tuple[int, object]] = []  # (enter node, value)
        self.deferred: list[tuple[int, object]] = []  # NextIteration values waiting
        self.dead_exits: list[int] = []


class Iter:
    __slots__ = (
        "frame",
        "it",
        "vals",
        "pending",
        "dead",
        "ready",
        "active",
        "queued",
        "merges",
        "outstanding",
        "child_frames",
        "tag",
        "loops_pending",
    )

    def __init__(self, frame, it, plan):
        self.frame = frame
        self.it = it
        # Names this iteration the same way on every device (frame path and iteration
        # numbers), so a _Send and its _Recv inside a loop meet in the same iteration.
        up = frame.parent
        self.tag = "" if up is None else f"{up.tag}/{frame.name}:{it}"
        self.vals = [None] * plan.num_slots
        self.pending = plan.init_pending[:]
        self.dead = [0] * (len(plan.nodes) + 1)
        self.ready: list[int] = []  # nodes of this iteration ready to run
        self.active = 0  # drivers working in this iteration (running or suspended)
        self.queued = False  # on the step's runnable list
        self.merges: dict[int, list] = {}
        # Live child frames and compiled loops waiting for their Enters.
        self.outstanding = 0
        self.child_frames: dict[str, Frame] = {}
        self.loops_pending: dict | None = None  # compiled loops waiting for Enters


class FrameRouting:
    """The control-flow half of the interpreter, mixed into `executor.Step`: which
    iteration a driver works in, routing between frames and iterations, Merge, and
    when iterations and frames end.  Used only by steps of plans with control flow
    (`self.root` is their root iteration, `self.runnable` the iterations with work)."""

    __slots__ = ()

    # -- which iteration a driver works in
    def _take(self):
        """The next iteration with ready nodes (the root first), now worked in by the
        calling driver; None when there is none."""
        root = self.root
        if root.ready:
            root.active += 1
            return root
        runnable = self.runnable
        while runnable:
            it = runnable.pop()
            it.queued = False
            if it.ready:
                it.active += 1
                return it
        return None

    def _leave(self, it) -> None:
        """A driver stops working in `it` (its ready nodes ran out)."""
        it.active -= 1
        if not it.active and not it.ready:
            self._check_iteration(it)

    def _wake(self, it) -> None:
        """`it` has ready nodes that no driver may be looking at: queue it."""
        if not it.queued:
            it.queued = True
            self.runnable.append(it)

    # -- routing
    def _propagate(self, i, it, kind, outs) -> None:
        if kind == ENTER:
            self._enter(i, it, outs[0])
        elif kind == EXIT:
            frame = it.frame
            if outs[0] is DEAD:
                if it.it == frame.count:
                    frame.dead_exits.append(i)
            else:
                self._deliver(i, frame.parent, outs)
        elif kind == NEXT_ITER:
            if outs[0] is not DEAD:
                self._next_iteration(i, it, outs[0])
        else:
            self._deliver(i, it, outs)

    def _deliver(self, i, it, outs, wake=True) -> None:
        """Node i's outputs into iteration `it`; `wake=False` when the calling driver
        works in `it` itself (it runs what became ready, no need to queue `it`)."""
        plan = self.plan
        vals, pending, dead, ready = it.vals, it.pending, it.dead, it.ready
        was = len(ready)
        if plan.plain_edges[i]:  # no Merge among the consumers
            for oi, j, s in plan.edges[i]:
                if oi >= 0:
                    v = vals[s] = outs[oi]
                else:  # a control edge: dead only when the whole node was dead
                    v = DEAD if all(o is DEAD for o in outs) else None
                if v is DEAD:
                    dead[j] += 1
                pending[j] -= 1
                if not pending[j]:
                    ready.append(j)
        else:
            kinds, ends, starts = plan.kinds, plan.ends, plan.starts
            for oi, j, s in plan.edges[i]:
                if oi >= 0:
                    v = outs[oi]
                else:  # a control edge: dead only when the whole node was dead
                    v = DEAD if all(o is DEAD for o in outs) else None
                if kinds[j] == MERGE and s < ends[j]:
                    st = it.merges.get(j)
                    if st is None:
                        st = it.merges[j] = [False, 0, None]
                    if st[0]:
                        continue  # already fired on an earlier live input
                    if v is DEAD:
                        st[1] += 1
                        if st[1] < plan.merge_expected[j]:
                            continue
                        st[2] = (DEAD, DEAD)
                    else:
                        st[0] = True
                        st[2] = (v, np.int32(s - starts[j]))
                    pending[j] -= 1
                else:
                    vals[s] = v
                    if v is DEAD:
                        dead[j] += 1
                    pending[j] -= 1
                if not pending[j]:
                    ready.append(j)
        if wake and len(ready) > was and not it.queued:
            it.queued = True
            self.runnable.append(it)

    def _enter(self, i, parent_it, value) -> None:
        plan = self.plan
        name, is_constant, parallel = plan.enter_info[i]
        frame = parent_it.child_frames.get(name)
        if frame is None:
            frame = Frame(name, parent_it, parallel, plan.enter_count[name])
            parent_it.child_frames[name] = frame
            parent_it.outstanding += 1  # a live child frame keeps its parent iteration
            frame.iters[0] = Iter(frame, 0, plan)
        outs = (value,)
        if is_constant:
            frame.invariants.append((i, value))
            for child in list(frame.iters.values()):
                self._deliver(i, child, outs)
        else:
            self._deliver(i, frame.iters[0], outs)
        frame.pending_inputs -= 1
        it0 = frame.iters.get(0)
        if it0 is not None:
            self._check_iteration(it0)

    async def _enter_compiled(self, i, it, value, prog) -> bool:
        """An Enter of a compiled loop: once all arrived, run the whole loop (the
        loop's program is its kernel) and deliver its Exits.  False when a kernel
        failed (the step is then aborted)."""
        pend = it.loops_pending
        if pend is None:
            pend = it.loops_pending = {}
        rec = pend.get(prog.name)
        if rec is None:
            rec = pend[prog.name] = {}
            it.outstanding += 1  # the loop keeps its parent iteration alive
        rec[i] = value
        if len(rec) < prog.n_enters:
            return True
        del pend[prog.name]
        if any(v is DEAD for v in rec.values()):
            if all(v is DEAD for v in rec.values()):  # the whole loop is dead
                for x, _ in prog.exits:
                    self._deliver(x, it, (DEAD,), False)
            else:  # partly dead: the general machinery knows what that means
                for e, v in rec.items():
                    self._enter(e, it, v)
            it.outstanding -= 1
            return True
        try:
            exits = await prog.run(self, rec)
        except _LoopFailure as failure:
            self._fail(failure.node, failure.error)
            return False
        finally:
            it.outstanding -= 1
        if exits is None:
            return False  # aborted while it yielded
        for x, v in zip(prog.exits, exits):
            self._deliver(x[0], it, (v,), False)  # (the caller's driver works in `it`)
        return True

    def _next_iteration(self, i, it, value) -> None:
        frame = it.frame
        nxt = frame.iters.get(it.it + 1)
        if nxt is None:
            if it.it + 1 >= frame.oldest + frame.parallel:
                frame.deferred.append((i, value))
                return
            nxt = self._new_iteration(frame)
        self._deliver(i, nxt, (value,))

    def _new_iteration(self, frame) -> Iter:
        frame.count += 1
        nxt = Iter(frame, frame.count, self.plan)
        frame.iters[frame.count] = nxt
        frame.dead_exits.clear()
        for enter_i, v in frame.invariants:
            self._deliver(enter_i, nxt, (v,))
        return nxt

    # -- completion
    def _check_iteration(self, it) -> None:
        """Free `it` and any later iterations that are done, oldest first (TF's rule:
        an iteration is done when nothing of it is outstanding and the one before it
        is gone, so no NextIteration value can still arrive)."""
        frame = it.frame
        if frame.parent is None or it.it != frame.oldest:
            return
        if it.outstanding or it.active or it.ready:
            return
        iters = frame.iters
        while True:
            cur = iters.get(frame.oldest)
            if cur is None or cur.outstanding or cur.active or cur.ready:
                break
            if cur.it == 0 and frame.pending_inputs:
                break
            del iters[frame.oldest]
            frame.oldest += 1
            if frame.deferred and frame.count + 1 < frame.oldest + frame.parallel:
                pending, frame.deferred = frame.deferred, []
                nxt = self._new_iteration(frame)
                for next_i, v in pending:
                    self._deliver(next_i, nxt, (v,))
        if frame.oldest > frame.count and not frame.deferred:
            self._frame_done(frame)

    def _frame_done(self, frame) -> None:
        parent = frame.parent
        parent.child_frames.pop(frame.name, None)
        dead_exits, frame.dead_exits = frame.dead_exits, []
        for i in dead_exits:
            self._deliver(i, parent, (DEAD,))
        parent.outstanding -= 1
        self._check_iteration(parent)

    def _frame_results(self) -> list:
        """As Step.results, but a dead fetch raises."""
        plan, vals, feeds = self.plan, self.root.vals, self.feed_values
        if self.root.pending[plan.sentinel] != plan.sentinel_done:
            raise _never_ran()
        out = []
        for k, (s, ref) in enumerate(zip(plan.fetch_slots, plan.fetch_refs)):
            if s is None:
                out.append(None)
                continue
            v = vals[s] if s >= 0 else feeds[-1 - s]
            if v is DEAD:
                raise errors.InvalidArgumentError(
                    None, None, f"Retval[{k}] does not have value (it is dead)"
                )
            if ref:  # a reference; or the slot of the one a fetched Identity aliases
                v = v.read() if ref is True else vals[ref].read()
            out.append(v)
        return out


def _never_ran() -> errors.InternalError:
    """A step ended with a fetch never produced and nothing left to run: the plan has a
    cycle (a compiler bug).  Without this check the step would quietly return Nones."""
    return errors.InternalError(
        None, None, "The step ended before its fetches were produced (a cycle in its plan)"
    )


# -- compiled loops ---------------------------------------------------------------------
#
# A while loop whose frame holds only synchronous kernels and nothing but its own
# Merge/Switch/LoopCond/NextIteration/Exit structure is run by `LoopProgram` instead
# of the general machinery above: once every Enter of a frame instance has arrived,
# the loop runs to its end in one place, one iteration after another, over a flat
# list of slots.  Which nodes run in an iteration is fixed by the predicate (body
# nodes when it holds, the exit path when not, the condition's nodes always), so
# deadness is decided once, at plan time; Identity, LoopCond, Switch, NextIteration
# and Exit become slot aliases; constants are filled in once per loop.
#
# Running iterations one after another is a valid schedule of the same dataflow (it
# is `parallel_iterations=1`); it gives up overlap between iterations only, which is
# why a frame with a kernel that may suspend (`is_async`: queues, Recv, I/O) keeps
# the general executor, as do frames with nested loops, conds or Send/Recv, and any
# pattern the checks below do not recognise.

_T, _F, _BOTH = 1, 2, 3  # liveness: when the predicate holds, when it does not
_HOLD2 = -2  # two arguments, one output, some argument read elsewhere too
_PRED, _NEXT = -3, -4  # the predicate test, the carry to the next iteration
# A loop that runs long without suspending yields to the event loop once its slice
# of inline work is spent (loop_slices.SLICE_S), so that other tasks run, and a step
# deadline (RunOptions.timeout_in_ms), a cancellation or Session.close() can stop it.
_CHECK_S = 0.0001
_MAX_EVERY = 256
# A loop variable's value given to its one body reader from the second iteration on
# (`_carry_takers`); False: never (A/B, benchmarks/models/ab_inproc.py).
_TAKE_CARRIES = True


async def _call_held(kernel, ctx, vals, args, n_out, outs) -> None:
    """A compiled-loop instruction in general form: its arguments stay referenced
    while it runs (so none of them looks forwardable), outputs go to their slots."""
    held = [vals[a] for a in args]
    r = await kernel(ctx, *held)
    del held
    if n_out == 1:
        vals[outs[0]] = r
    elif n_out:
        for s, v in zip(outs, r):
            vals[s] = v


class _LoopFailure(Exception):
    """A kernel of a compiled loop failed: the loop's node and the error."""

    def __init__(self, node: int, error: BaseException):
        super().__init__(node, error)
        self.node = node
        self.error = error


class LoopProgram:
    """A while loop frame compiled to flat instruction lists (see above): the kernel of
    its loop, called once every Enter of a frame instance arrived."""

    __slots__ = (
        "name",
        "n_enters",
        "n_slots",
        "enter_slot",
        "consts",
        "loop",
        "tail",
        "pred_slot",
        "pred_node",
        "carry",
        "carry_direct",
        "index_slots",
        "exits",
        "carry_takers",
        "later",
    )

    async def run(self, step, enter_values: dict) -> list | None:
        """Run the loop to its end from `enter_values` ({Enter node: value}); the Exit
        values, in `exits` order, or None when `step` was aborted while it yielded.
        Raises _LoopFailure when a kernel fails."""
        vals = [None] * self.n_slots
        for s, v in self.consts:
            vals[s] = v
        for e, v in enter_values.items():
            vals[self.enter_slot[e]] = v
        enter_values = None
        index_slots = self.index_slots
        for s, first, _ in index_slots:
            vals[s] = first
        later = self.later
        if later is None:
            later = self.later = self._later()
        block = self.loop  # (the first iteration's: see _later)
        pred_slot, carry, direct = self.pred_slot, self.carry, self.carry_direct
        i = self.pred_node
        # The clock is read every `every` iterations, `every` adapting so that reads
        # come about every _CHECK_S of work: cheap loops pay one read per many
        # iterations, a loop with a long body one per iteration (loop_slices.SLICE_S).
        iters, every, check_at, deadline = 0, 1, 1, slice_deadline()
        checked = _clock()
        try:
            running = True
            while running:
                # One iteration: the condition's nodes, the predicate, the body, the
                # carry.  No local keeps an output past its store, so that the next
                # kernel may take it over (donation).
                for i, kernel, ctx, mode, args, n_out, outs in block:  # noqa: B007
                    if mode == 2:
                        vals[outs[0]] = await kernel(ctx, vals[args[0]], vals[args[1]])
                    elif mode == 1:
                        vals[outs[0]] = await kernel(ctx, vals[args[0]])
                    elif mode == _HOLD2:  # an argument has other readers: keep a reference
                        x, y = vals[args[0]], vals[args[1]]
                        vals[outs[0]] = await kernel(ctx, x, y)
                        x = y = None
                    elif mode == _PRED:
                        if not vals[pred_slot]:
                            running = False
                            break
                    elif mode == _NEXT:
                        block = later
                        iters += 1
                        if iters >= check_at:
                            now = _clock()
                            if now - checked < _CHECK_S:
                                every = min(every * 2, _MAX_EVERY)
                            else:
                                every = max(every >> 1, 1)
                            checked = now
                            check_at = iters + every
                            if now > deadline:
                                deadline = slice_deadline()
                                if now > deadline:
                                    # Let other tasks, deadlines and cancellation in.
                                    await _YIELD_TO_LOOP
                                    deadline = new_slice()
                                    checked = _clock()
                                    if step.error is not None:
                                        return None
                        if direct:
                            for d, s in carry:
                                vals[d] = vals[s]
                        else:  # the new values read old ones: take them all first
                            new = [vals[s] for _, s in carry]
                            for (d, _), v in zip(carry, new):
                                vals[d] = v
                            new = v = None
                        for s, _, nxt in index_slots:
                            vals[s] = nxt
                    else:
                        await _call_held(kernel, ctx, vals, args, n_out, outs)
            for i, kernel, ctx, _, args, n_out, outs in self.tail:  # noqa: B007
                await _call_held(kernel, ctx, vals, args, n_out, outs)
        except BaseException as exc:  # noqa: BLE001 - the caller fails the step
            raise _LoopFailure(i, exc) from None
        return [vals[s] for _, s in self.exits]

    def _later(self) -> list:
        """The instructions of iterations after the first: `loop`, where each carry
        taker (`carry_takers`) gets a context that may take over its loop variable's
        value, a buffer the body made in the iteration before and nothing else holds.
        Made at the first run, once donation.decide has set the contexts (a plan
        compiled again for dead values does so after it)."""
        if not self.carry_takers:
            return self.loop
        takes: dict = {}  # node -> its input positions
        for i, k in self.carry_takers:
            takes.setdefault(i, set()).add(k)
        later = []
        for ins in self.loop:
            ks = takes.get(ins[0])
            if ks and ins[2] is not None and not ks <= ins[2].forward:
                ctx = copy.copy(ins[2])
                ctx.forward = ins[2].forward | ks
                ins = (ins[0], ins[1], ctx, *ins[3:])
            later.append(ins)
        return later


def compile_loops(plan, nodes, makes_new=None, retains=None) -> dict | None:
    """{frame name: LoopProgram} for the plan's loop frames that can be compiled.
    `makes_new[i]`: node i's outputs are arrays its kernel makes at each run (not its
    inputs passed on, nor stored values); `retains[i]`: its kernel keeps references to
    its inputs (donation.py's facts, for `_carry_takers`; None: no loop variable is
    given to its reader)."""
    n = len(nodes)
    kinds = plan.kinds
    frame_of: list = [None] * n
    parent: dict = {}
    for j, p in enumerate(nodes):
        srcs = [s[0] for s in p.inputs if s[0] != "feed" and kinds[s[0]] != NEXT_ITER]
        srcs.extend(p.controls)
        for src in srcs:
            if kinds[src] == ENTER:
                name = plan.enter_info[src][0]
                parent.setdefault(name, frame_of[src])
                frame_of[j] = name
            elif kinds[src] == EXIT:
                frame_of[j] = parent.get(frame_of[src])
            else:
                frame_of[j] = frame_of[src]
            break
    members: dict = {}
    for j, f in enumerate(frame_of):
        if f is not None:
            members.setdefault(f, []).append(j)
    enters: dict = {}
    for j in range(n):
        if kinds[j] == ENTER:
            enters.setdefault(plan.enter_info[j][0], []).append(j)
    loops = {}
    for name, members_f in members.items():
        enters_f = enters.get(name, [])
        prog = _compile_loop(plan, nodes, name, members_f, enters_f, makes_new, retains)
        if prog is not None:
            loops[name] = prog
    return loops or None


def _compile_loop(plan, nodes, name, members, enters, makes_new, retains):  # noqa: C901 - one check per rule
    kinds = plan.kinds
    in_frame = set(members)
    is_enter = set(enters)
    const_enter = {e for e in enters if plan.enter_info[e][1]}
    consumers: dict = {}
    for i in members + enters:
        for oi, j, _ in plan.edges[i]:
            consumers.setdefault(i, []).append((oi, j))
    for i in members:
        k = kinds[i]
        if k in (SEND, RECV, ENTER) or plan.fwd_read[i]:
            return None
        p = nodes[i]
        if p.op.op_def.is_async or any(s[0] == "feed" for s in p.inputs):
            return None
        for s in p.inputs:
            if s[0] not in in_frame and s[0] not in is_enter:
                return None
        for c in p.controls:
            if c not in in_frame and c not in is_enter:
                return None
        if k != EXIT and any(j not in in_frame for _, j in consumers.get(i, ())):
            return None  # a value leaves the frame other than by Exit (e.g. a fetch)
    for e in enters:
        for oi, j in consumers.get(e, ()):
            if j not in in_frame:
                return None
            if e not in const_enter and (oi < 0 or kinds[j] != MERGE):
                return None
    loop_conds = [i for i in members if nodes[i].op.type == "LoopCond"]
    if len(loop_conds) != 1:
        return None
    cond = loop_conds[0]
    merges = [i for i in members if kinds[i] == MERGE]
    merge_parts = {}
    for m in merges:
        p = nodes[m]
        if len(p.inputs) != 2 or p.controls:
            return None
        (a, _), (b, _) = p.inputs
        if a in is_enter and a not in const_enter and kinds[b] == NEXT_ITER:
            merge_parts[m] = (a, b, 0, 1)
        elif b in is_enter and b not in const_enter and kinds[a] == NEXT_ITER:
            merge_parts[m] = (b, a, 1, 0)
        else:
            return None
    for i in members:
        k, p = kinds[i], nodes[i]
        if k == SWITCH:
            if p.inputs[0][0] not in merge_parts or p.inputs[0][1] != 0:
                return None
            if p.inputs[1][0] != cond:
                return None
        elif k == EXIT:
            src = p.inputs[0]
            if kinds[src[0]] != SWITCH or src[1] != 0:
                return None
        elif k == NEXT_ITER:
            for _, j in consumers.get(i, ()):
                if j not in merge_parts or merge_parts[j][1] != i:
                    return None

    # Liveness of every value, in topological order (back edges only reach Merges).
    node_live = {}

    def value_live(i, oi):
        if i in is_enter or kinds[i] == MERGE:
            return _BOTH
        if kinds[i] == SWITCH:
            return node_live[i] & (_F if oi == 0 else _T)
        return node_live[i]

    for i in members:
        if kinds[i] in (MERGE, TRIGGER):  # a ControlTrigger fires on dead inputs too
            node_live[i] = _BOTH
            continue
        live = _BOTH
        for s in nodes[i].inputs:
            live &= value_live(*s)
        for c in nodes[i].controls:
            live &= _BOTH if c in is_enter else node_live[c]
        node_live[i] = live
    if node_live[cond] != _BOTH:
        return None
    for i in members:
        if kinds[i] == NEXT_ITER and node_live[i] != _T:
            return None
        if kinds[i] == EXIT and node_live[i] != _F:
            return None

    # Slots, with forwarding nodes aliased to their source.
    slot_of: dict = {}
    n_slots = 0

    def new_slot(key):
        nonlocal n_slots
        slot_of[key] = n_slots
        n_slots += 1
        return n_slots - 1

    prog = LoopProgram()
    prog.name = name
    prog.n_enters = len(enters)
    prog.enter_slot = {}
    for e in enters:
        if e in const_enter:
            prog.enter_slot[e] = new_slot((e, 0))
    for m, (e, _nxt, _ep, _np) in merge_parts.items():
        prog.enter_slot[e] = new_slot((m, 0))
        slot_of[(e, 0)] = slot_of[(m, 0)]
    prog.index_slots = []
    for m, (_e, _nxt, ep, np_) in merge_parts.items():
        if any(oi == 1 for oi, _ in consumers.get(m, ())):
            prog.index_slots.append((new_slot((m, 1)), np.int32(ep), np.int32(np_)))
    prog.consts = []
    pre, body, tail = [], [], []
    for i in members:
        k, p = kinds[i], nodes[i]
        live = node_live[i]
        if k == MERGE or k == TRIGGER:  # a trigger computes nothing
            continue
        if k == SWITCH:
            slot_of[(i, 0)] = slot_of[(i, 1)] = slot_of[p.inputs[0]]
            continue
        if k >= FORWARD or k == IDENT:  # Identity, LoopCond, NextIteration, Exit
            if p.inputs[0] in slot_of:
                slot_of[(i, 0)] = slot_of[p.inputs[0]]
            continue
        if k == CONST:
            value = plan.ctxs[i].attrs["value"]
            if isinstance(value, np.ndarray) and not value.ndim and value.dtype != object:
                value = value[()]  # a NumPy scalar, as a 0-d result of any kernel is
            prog.consts.append((new_slot((i, 0)), value))
            continue
        if not live:
            continue  # dead in every iteration: never runs
        args = tuple(slot_of[s] for s in p.inputs)
        n_out = plan.n_outputs[i]
        outs = tuple(new_slot((i, k_)) for k_ in range(n_out))
        ins = (i, plan.kernels[i], plan.ctxs[i], len(args), args, n_out, outs)
        (pre if live == _BOTH else body if live == _T else tail).append(ins)
    prog.n_slots = n_slots
    prog.pred_slot = slot_of[(cond, 0)]
    prog.pred_node = cond
    prog.carry = [
        (slot_of[(m, 0)], slot_of[nodes[nxt].inputs[0]])
        for m, (_e, nxt, _ep, _np) in merge_parts.items()
    ]
    # Direct assignment is safe unless a new value is read from a slot assigned first.
    prog.carry_direct = not {d for d, _ in prog.carry} & {s for _, s in prog.carry}
    prog.exits = [(i, slot_of[(i, 0)]) for i in members if kinds[i] == EXIT]
    # One slot serves every reader of a value, where the executor gives each consumer
    # its own: a kernel reading a value that something else also reads must see one
    # more reference, or it could take the value for its output (forwardable).
    readers = [0] * n_slots
    for ins in pre + body + tail:
        for a in ins[4]:
            readers[a] += 1
    for s in [prog.pred_slot, *(s for _, s in prog.carry), *(s for _, s in prog.exits)]:
        readers[s] += 1

    def mode(args, n_out):
        shared = any(readers[a] > 1 for a in args)
        if n_out == 1 and len(args) == 2:
            return _HOLD2 if shared else 2
        if n_out == 1 and len(args) == 1 and not shared:
            return 1
        return 0  # the general call, which holds its arguments in a list

    def held(block):
        return [(i, kern, ctx, mode(args, n), args, n, o) for i, kern, ctx, _, args, n, o in block]

    pred = (cond, None, None, _PRED, (), 0, ())
    nxt = (cond, None, None, _NEXT, (), 0, ())
    prog.loop = [*held(pre), pred, *held(body), nxt]
    prog.tail = tail
    prog.carry_takers = []
    if _TAKE_CARRIES and makes_new is not None:
        prog.carry_takers = _carry_takers(plan, prog, body, readers, makes_new, retains)
    prog.later = None
    return prog


def _carry_takers(plan, prog, body, readers, makes_new, retains) -> list:
    """[(node, input position)]: the body kernels that may take over a loop variable's
    value from the second iteration on (`LoopProgram._later`).

    The whole-plan analysis (donation.decide) puts a loop variable's Enter, Merge,
    Switch, NextIteration and Exit in one alias group, whose consumers are those of
    every iteration and of the Exit together, so it never donates one.  Within the
    compiled loop the slots say more.  A dynamic_rnn's backward loop adds each
    iteration's weight product to an accumulator (ops/matmul_sum.py `_MatMulPairAdd`):
    the value it reads was made by the same kernel in the iteration before and read by
    nothing else, yet it was copied every iteration ([156,512] float32 in lstm_dynamic,
    ~50 us).  Here a loop variable's value is given to its one reader where:
    - the value carried in comes from one output of a body kernel that makes new arrays
      (not one that passes its input on, nor a stateful op's stored value), read by
      nothing but the carry;
    - the loop variable's slot is read by exactly one argument of one body kernel, and
      otherwise only by Exits (which read the value of the iteration whose predicate
      failed, which no body kernel saw);
    - that kernel keeps no reference to its inputs (donation's retains list) and takes
      the value, not a reference's read.
    The first iteration's value is the Enter's, which may be seen outside the loop: it
    is never given.  The kernel's own checks still apply (`may_forward`: a NumPy array
    owning its memory, writable)."""
    takers = []
    slot_node: dict = {}  # output slot -> (body node, its output)
    for i, _kernel, _ctx, _m, _args, n_out, outs in body:
        for oi in range(n_out):
            slot_node[outs[oi]] = (i, oi)
    exits = {}
    for _, s in prog.exits:
        exits[s] = exits.get(s, 0) + 1
    for dest, src in prog.carry:
        made = slot_node.get(src)
        if made is None or readers[src] != 1:
            continue
        if made[0] in plan.aliasing or not makes_new[made[0]]:
            continue
        if dest == prog.pred_slot or readers[dest] != 1 + exits.get(dest, 0):
            continue
        uses = [(i, k) for i, *_r, args, _n, _o in body for k, a in enumerate(args) if a == dest]
        if len(uses) != 1:
            continue
        i, k = uses[0]
        if retains[i] or k in plan.derefs[i]:
            continue
        takers.append((i, k))
    return takers
