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

Invariants:
- Only plans `program_for` accepts run here; everything else runs on `executor.Step`.
- A pure plan has no effect but its results, so a step that fails or is abandoned
  leaves nothing to undo.
"""

from __future__ import annotations

import asyncio

import numpy as np

from asyncflow import loop_slices
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

    __slots__ = ("plan", "nodes", "num_slots", "feed_slots", "fetch_slots", "fetch_refs")

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

    async def run(self, step_id: int, feed_values: list) -> list:
        """One step: the fetched values, in the plan's fetch order.

        Raises the OpError of the failing kernel (named as the executor names it)."""
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
