"""A plan's kernels in one fixed order: the step of a small pure graph, without the
ready-count interpreter's per-node bookkeeping.

What a prepared callable (`Session.make_async_callable`) runs for a model server's
predict: a one-partition plan without control flow whose nodes only compute on their
inputs and read variables (no queue, reader, update, random draw, Send or Recv).  Such
a step needs none of what `executor.Step` keeps per node at run time (pending counts,
a ready stack, parked drivers): the nodes run in a topological order fixed once, each
kernel awaited in turn.  Per request of the digits MLP of benchmarks/serving_*.py
that bookkeeping was a fifth of the step.

The same plan, the same kernels, contexts and slots as `executor.Step`: values pass
along the plan's edges and each input slot is cleared when its node runs (so buffer
donation, decided by the plan, holds), the fetches are read as `Step.results` reads
them, and a kernel's error is worded by `wrap_kernel_error` and ends the step.  A
kernel that suspends (work handed to a device worker) suspends the whole step: the
graph is small and has nothing else worth running meanwhile.  A kernel with an inline
form (asyncflow.kernel_api) is called through it, a plain function bound to the node's
context once, and awaited only for the calls the form leaves to it: at one row, the
kernels' coroutines and `compute`'s layers cost more than their arithmetic.

Where every computing node's kernel also has a direct form (kernel_api) for the shapes
its inputs have, the step is one step further from the kernels: per feed signature, a
`_Direct` form calls each node's one NumPy-level call back to back, after one question
to the device (are all these kinds settled cheap, as `run_inline` would find each of
them?) instead of one per call.  At one row the inline forms' checks and `run_inline`'s
cost model were a third of the step (digits MLP: straight-line step 86 -> 54 us CPU).

Invariants:
- Only plans `program_for` accepts run here; everything else runs on `executor.Step`.
- A pure plan has no effect but its results, so a step that fails or is abandoned
  leaves nothing to undo.
"""

from __future__ import annotations

import asyncio

import numpy as np

from asyncflow import loop_slices
from asyncflow.devices import cpu_budget
from asyncflow.devices.cpu import INLINE_S, RETIME_EVERY
from asyncflow.executor import _FORWARD, _NOTHING, Plan
from asyncflow.kernel_api import (
    _CURRENT_STEP,
    NOT_INLINE,
    QUIET_STEP,
    StepContext,
    wrap_kernel_error,
)

__all__ = ["MAX_NODES", "Program", "program_for"]

# Larger plans gain little (the bookkeeping is a small part of their step) and may have
# independent branches worth overlapping when a kernel suspends.
MAX_NODES = 256
# Stateful op types whose kernel only looks its variable up (the read is the consumer's
# deref): a step with them has no effect either.
_READS_ONLY = frozenset({"VariableV2", "VariableV1"})
_READ = -4  # (a node kind below: an Identity of a variable, i.e. a read)


class Program:
    """The straight-line form of one pure plan (see the module note)."""

    __slots__ = (
        "plan",
        "nodes",
        "num_slots",
        "feed_slots",
        "fetch_slots",
        "fetch_refs",
        "_direct",
        "_eligible",
    )

    def __init__(self, plan: Plan, order: list[int]):
        self.plan = plan
        identity = {}
        nodes = []
        for i in order:
            n = plan.arity[i]
            op = plan.nodes[i]
            if n == 1 and op.type == "Identity" and plan.derefs[i] == [0]:
                # Identity(variable): its kernel is the deref wrapper around Identity's
                # `return x`; the read alone is the whole of it.
                kind = identity.setdefault(op.op_def, _READ)
            else:
                kind = n
            e = plan.edges[i]
            slots, outs = tuple(s for _, _, s in e), tuple(oi for oi, _, _ in e)
            kernel, ctx, clear = plan.kernels[i], plan.ctxs[i], plan.clears[i]
            a, b = plan.starts[i], plan.ends[i]
            inline = getattr(kernel, "inline", None) if kind >= 0 else None
            if inline is not None:  # (kernel_api's inline forms)
                inline = inline(ctx)
            nodes.append((i, kind, kernel, ctx, a, b, clear, slots, outs, plan.single[i], inline))
        self.nodes = tuple(nodes)
        self.num_slots = plan.num_slots
        self.feed_slots = plan.feed_slots
        self.fetch_slots = plan.fetch_slots
        self.fetch_refs = plan.fetch_refs
        # Feed signature -> its _Direct (None: none for it); while _eligible, the plan's
        # every node might have one.
        self._direct: dict = {}
        self._eligible = all(
            kind in (_FORWARD, _READ, _NOTHING)
            or (single and (getattr(kernel, "direct", None) if kind else inline) is not None)
            for _, kind, kernel, _c, _a, _b, _cl, _s, _o, single, inline in self.nodes
        )

    async def run(self, step_id: int, feed_values: list) -> list:
        """One step: the fetched values, in the plan's fetch order.

        Raises the OpError of the failing kernel (named as the executor names it)."""
        if self._eligible:
            sig = tuple((v.shape, v.dtype) if type(v) is np.ndarray else None for v in feed_values)
            direct = self._direct.get(sig, _UNBUILT)
            if direct is _UNBUILT:
                direct = self._build_direct(sig)
            if direct is not None:
                out = direct.run(feed_values)
                if out is not None:
                    return out
        return await self._run(step_id, feed_values)

    def _build_direct(self, sig):
        if len(self._direct) >= MAX_SIGNATURES:
            self._direct.clear()
        direct = self._direct[sig] = _Direct.build(self, sig)
        return direct

    async def _run(self, step_id: int, feed_values: list) -> list:
        vals = [None] * self.num_slots
        for slots, v in zip(self.feed_slots, feed_values):
            for s in slots:
                vals[s] = v
        sctx = StepContext(step_id)
        token = _CURRENT_STEP.set(sctx)
        # The step's kernels in one np.errstate (kernel_api.quiet_step, inlined: its
        # generator cost as much as a kernel here).
        quiet = None if QUIET_STEP.get() else QUIET_STEP.set(True)
        errstate = None if quiet is None else np.errstate(all="ignore")
        if errstate is not None:
            errstate.__enter__()
        clock = loop_slices._clock
        deadline, graced = loop_slices.slice_deadline(), False
        i = -1
        try:
            # The hot loop, flat on purpose (see executor.Step._drive for the idioms);
            # `i` names the node for the error handler.
            for i, n, kernel, ctx, a, b, clear, slots, outs, single, inline in self.nodes:  # noqa: B007
                if n == _FORWARD:
                    r = vals[a]
                    vals[a] = None
                elif n == _READ:
                    r = vals[a].read()
                    vals[a] = None
                elif n == _NOTHING:
                    continue
                else:
                    if inline is not None:  # the kernel's inline form, else the kernel
                        if n == 0:
                            r = inline()
                            if r is NOT_INLINE:
                                r = await kernel(ctx)
                        elif n == 1:
                            r = inline(vals[a])
                            if r is NOT_INLINE:
                                r = await kernel(ctx, vals[a])
                            vals[a] = None
                        else:
                            r = inline(*vals[a:b])
                            if r is NOT_INLINE:
                                r = await kernel(ctx, *vals[a:b])
                            vals[a:b] = clear
                    elif n == 1:
                        r = await kernel(ctx, vals[a])
                        vals[a] = None
                    elif n == 2:
                        r = await kernel(ctx, vals[a], vals[a + 1])
                        vals[a] = vals[a + 1] = None
                    elif n == 0:
                        r = await kernel(ctx)
                    else:
                        r = await kernel(ctx, *vals[a:b])
                        vals[a:b] = clear
                    if clock() > deadline:  # share the loop as the interpreter does
                        deadline = loop_slices.slice_deadline()
                        now = clock()
                        if now > deadline and not graced:
                            graced = True
                            deadline = now + loop_slices.SLICE_S * loop_slices.GRACE_FRACTION
                        elif now > deadline:
                            await loop_slices._YIELD_TO_LOOP
                            deadline = loop_slices.new_slice()
                if single or n == _FORWARD or n == _READ:
                    for s in slots:
                        vals[s] = r
                else:
                    if r is None:
                        r = (None,)
                    for s, oi in zip(slots, outs):
                        vals[s] = r[oi]
                r = None
            i = -1
            out = []
            for s, ref in zip(self.fetch_slots, self.fetch_refs):
                if s is None:
                    out.append(None)
                    continue
                v = vals[s] if s >= 0 else feed_values[-1 - s]
                out.append(v.read() if ref else v)
            return out
        except (Exception, asyncio.CancelledError) as exc:
            if i < 0:
                raise
            if isinstance(exc, asyncio.CancelledError):
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise  # the caller was cancelled (a deadline): its own cancellation
            error = wrap_kernel_error(self.plan.nodes[i], exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            if errstate is not None:
                errstate.__exit__(None, None, None)
                QUIET_STEP.reset(quiet)
            _CURRENT_STEP.reset(token)
            sctx.close()


_UNBUILT = object()
# Feed signatures a program keeps direct forms for (a batcher's batch sizes, one each).
MAX_SIGNATURES = 256


class _Direct:
    """A Program's direct form for one feed signature: its nodes as plain calls back to
    back, in one synchronous stretch.

    For a plan whose every computing node's kernel has a direct form (kernel_api) for
    the shapes and dtypes its inputs have when the feeds have this signature and the
    variables read the shapes and dtypes they had when it was built.  A step takes it
    when the devices say every call in it is a settled cheap kind they would run inline
    untimed (`settled_seconds`), together under one inline call's limit; the kernels'
    inline forms would then run exactly these calls, one `run_inline` each.  It checks
    each variable read against its recorded shape and dtype (a read that differs: the
    step runs on the Program's own path instead, nothing done being an effect), and
    every RETIME_EVERY-th step leaves the step to the Program's path, so the devices
    keep timing these kinds.

    The same values as the Program's path: the same kernels' calls, variables read
    through `VarRef.read` (lent as the interpreter lends them), input slots cleared as
    each node runs, the fetches read as `Program.run` reads them, a call's error worded
    by `wrap_kernel_error` for its node.  No StepContext: no call in it uses one.
    """

    __slots__ = ("program", "sig", "nodes", "by_device", "count")

    def __init__(self, program, sig, nodes, by_device):
        self.program = program
        self.sig = sig
        self.nodes = nodes
        self.by_device = by_device
        self.count = 0

    @classmethod
    def build(cls, program: Program, sig) -> _Direct | None:
        plan = program.plan
        avals: list = [None] * program.num_slots
        for slots, aval in zip(program.feed_slots, sig):
            for s in slots:
                avals[s] = aval
        nodes, by_device = [], {}
        for i, n, kernel, ctx, a, b, _clear, slots, _outs, _single, inline in program.nodes:
            check = None
            if n == _FORWARD:
                out, fn = avals[a], None
            elif n == _READ:
                ref = None
                # (the variable, as VariableV2's inline form looks it up: built once)
                for _j, m, _k, _c, _a, _b, _cl, vslots, _o, _s, vinline in program.nodes:
                    if m == 0 and a in vslots:
                        ref = vinline()
                value = getattr(ref, "value", None)
                if type(value) is not np.ndarray:
                    return None
                out = check = (value.shape, value.dtype)
                fn = None
            elif n == _NOTHING:
                continue
            elif n == 0:
                if plan.nodes[i].type not in _READS_ONLY:
                    return None
                out, fn = _REF, inline
            else:
                ins = avals[a:b]
                if any(v is None or v is _REF for v in ins):
                    return None
                made = kernel.direct(ctx, ins)
                if made is None:
                    return None
                fn, (call_fn, call_args), outs = made
                device = ctx.device
                by_device.setdefault(device, []).append(device.kind_key(call_fn, call_args))
                out = outs[0]
            for s in slots:
                avals[s] = out
            nodes.append((i, n, fn, a, b, slots, check))
        for s in program.fetch_slots:
            if s is not None and s >= 0 and avals[s] is None:
                return None
        keys = tuple((device, tuple(keys)) for device, keys in by_device.items())
        return cls(program, sig, tuple(nodes), keys)

    def run(self, feed_values: list):
        """The fetched values, or None where the step must run on the Program's path."""
        self.count += 1
        if self.count % RETIME_EVERY == 0:
            return None
        total = 0.0
        for device, keys in self.by_device:
            seconds = device.settled_seconds(keys)
            if seconds is None:
                return None
            total += seconds
        if total >= INLINE_S:
            return None
        program = self.program
        vals = [None] * program.num_slots
        for slots, v in zip(program.feed_slots, feed_values):
            for s in slots:
                vals[s] = v
        quiet = None if QUIET_STEP.get() else QUIET_STEP.set(True)
        errstate = None if quiet is None else np.errstate(all="ignore")
        if errstate is not None:
            errstate.__enter__()
        at = [-1]
        try:
            if not cpu_budget.call_narrow(self._body, (vals, at)):
                # A variable changed shape or dtype: built anew for the next step.
                program._direct.pop(self.sig, None)
                return None
            out = []
            for s, ref in zip(program.fetch_slots, program.fetch_refs):
                if s is None:
                    out.append(None)
                    continue
                v = vals[s] if s >= 0 else feed_values[-1 - s]
                out.append(v.read() if ref else v)
            return out
        except Exception as exc:
            if at[0] < 0:
                raise
            error = wrap_kernel_error(program.plan.nodes[at[0]], exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            if errstate is not None:
                errstate.__exit__(None, None, None)
                QUIET_STEP.reset(quiet)

    def _body(self, vals: list, at: list) -> bool:
        ndarray = np.ndarray
        for i, n, fn, a, b, slots, check in self.nodes:
            at[0] = i
            if n == _FORWARD:
                r = vals[a]
                vals[a] = None
            elif n == _READ:
                r = vals[a].read()
                vals[a] = None
                if type(r) is not ndarray or r.shape != check[0] or r.dtype != check[1]:
                    return False  # (a variable changed: the Program's path)
            elif n == 0:
                r = fn()
            elif n == 1:
                r = fn(vals[a])
                vals[a] = None
            else:
                r = fn(*vals[a:b])
                vals[a:b] = [None] * (b - a)
            for s in slots:
                vals[s] = r
        at[0] = -1
        return True


_REF = ("ref",)  # (the aval of a variable's reference: read by a _READ only)


def program_for(plan: Plan) -> Program | None:
    """`plan`'s straight-line Program, or None when it must run on `executor.Step`: it
    has control flow or more than MAX_NODES nodes, or a node with an effect."""
    if plan.has_cf or len(plan.nodes) > MAX_NODES:
        return None
    for op in plan.nodes:
        if op.op_def.stateful and op.type not in _READS_ONLY:
            return None
    # A topological order by the plan's own counts; every node must run, and every
    # fetch arrive, as in a step of the interpreter.
    n = len(plan.nodes)
    pending = plan.init_pending[:]
    ready = list(plan.init_ready)
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for _, j, _s in plan.edges[i]:
            pending[j] -= 1
            if not pending[j] and j != n:
                ready.append(j)
    if len(order) != n or pending[n] != plan.sentinel_done:
        return None
    return Program(plan, order)
