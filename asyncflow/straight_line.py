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
        out = self.run_direct(feed_values)
        if out is not None:
            return out
        return await self.run_kernels(step_id, feed_values)

    def run_direct(self, feed_values: list) -> list | None:
        """The step by its direct form, now (see `_Direct`): the fetched values, or None
        where the step must be `await run_kernels(...)` instead (no direct form for
        these feeds, kinds not settled cheap, a variable changed).  A plain call: one
        coroutine less per served predict than `run`.

        Raises the OpError of the failing call (named as the executor names it)."""
        if not self._eligible:
            return None
        if len(feed_values) == 1:  # (a served model's one input: no generator)
            v = feed_values[0]
            sig = ((v.shape, v.dtype) if type(v) is np.ndarray else None,)
        else:
            sig = tuple((v.shape, v.dtype) if type(v) is np.ndarray else None for v in feed_values)
        direct = self._direct.get(sig, _UNBUILT)
        if direct is _UNBUILT:
            direct = self._build_direct(sig)
        if direct is None:
            return None
        return direct.run(feed_values)

    def _build_direct(self, sig):
        if len(self._direct) >= MAX_SIGNATURES:
            self._direct.clear()
        direct = self._direct[sig] = _Direct.build(self, sig)
        return direct

    async def run_kernels(self, step_id: int, feed_values: list) -> list:
        """One step through the kernels (their inline forms where they have them)."""
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
                if ref:  # a reference; or the slot of the one a fetched Identity aliases
                    v = v.read() if ref is True else vals[ref].read()
                out.append(v)
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
    every RETIME_EVERY-th step times its calls and hands the times to their devices
    (`observe_kinds`), so the devices keep timing these kinds as `compute` would.
    (That step took the Program's path before: its kernels' inline forms and a
    StepContext, about a sixteenth of the step's cost again, for clock readings.)

    The same values as the Program's path: the same kernels' calls, variables read
    through `VarRef.read` (lent as the interpreter lends them; a read that only its
    calls consume, and so nothing outlives, pins the buffer instead: `VarRef.pin`, no
    lease made, an update meanwhile copies), input slots cleared as
    each node runs, the fetches read as `Program.run` reads them, a call's error worded
    by `wrap_kernel_error` for its node.  No StepContext: no call in it uses one.
    """

    __slots__ = ("program", "sig", "nodes", "by_device", "kinds", "count")

    def __init__(self, program, sig, nodes, by_device, kinds):
        self.program = program
        self.sig = sig
        self.nodes = nodes
        self.by_device = by_device
        self.kinds = kinds  # node index -> (device, kind key) of its call
        self.count = 0

    @classmethod
    def build(cls, program: Program, sig) -> _Direct | None:
        plan = program.plan
        avals: list = [None] * program.num_slots
        for slots, aval in zip(program.feed_slots, sig):
            for s in slots:
                avals[s] = aval
        nodes, by_device, kinds = [], {}, {}
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
                if type(value) is not np.ndarray or not hasattr(ref, "pin"):
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
                if getattr(device, "observe_kinds", None) is None:
                    return None
                key = device.kind_key(call_fn, call_args)
                by_device.setdefault(device, []).append(key)
                kinds[i] = (device, key)
                out = outs[0]
            for s in slots:
                avals[s] = out
            nodes.append((i, n, fn, a, b, slots, check))
        for s in program.fetch_slots:
            if s is not None and s >= 0 and avals[s] is None:
                return None
        # A read whose every consumer is a call (a direct form's result is a new array)
        # and that is not fetched lets nothing of its buffer outlive the step: it pins
        # the buffer (VarRef.pin) instead of lending it on a lease.
        calls_only = set()
        for _i, n, _fn, a, b, _slots, _check in nodes:
            if n >= 1:
                calls_only.update(range(a, b))
        for _i, n, _fn, a, _b, _slots, _check in nodes:
            if n < 0:
                calls_only.discard(a)  # (forwarded or read: not a call's)
        calls_only.difference_update(s for s in program.fetch_slots if s is not None)
        for k, (i, n, fn, a, b, slots, check) in enumerate(nodes):
            if n == _READ and all(s in calls_only for s in slots):
                nodes[k] = (i, _PINNED, fn, a, b, slots, check)
        keys = tuple((device, tuple(keys)) for device, keys in by_device.items())
        return cls(program, sig, tuple(nodes), keys, kinds)

    def run(self, feed_values: list):
        """The fetched values, or None where the step must run on the Program's path."""
        self.count += 1
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
        errstate = None if quiet is None else _ignore_fp_errors()
        at = [-1]
        pinned: list = []
        try:
            times = None if self.count % RETIME_EVERY else []
            if not cpu_budget.call_narrow(self._body, (vals, at, pinned, times)):
                # A variable changed shape or dtype: built anew for the next step.
                program._direct.pop(self.sig, None)
                return None
            if times:
                for device, key, seconds in times:
                    device.observe_kinds(((key, seconds),))
            out = []
            for s, ref in zip(program.fetch_slots, program.fetch_refs):
                if s is None:
                    out.append(None)
                    continue
                v = vals[s] if s >= 0 else feed_values[-1 - s]
                if ref:  # a reference; or the slot of the one a fetched Identity aliases
                    v = v.read() if ref is True else vals[ref].read()
                out.append(v)
            return out
        except Exception as exc:
            if at[0] < 0:
                raise
            error = wrap_kernel_error(program.plan.nodes[at[0]], exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            for lendings in pinned:
                lendings.unpin()
            if quiet is not None:
                _restore_fp_errors(errstate)
                QUIET_STEP.reset(quiet)

    def _body(self, vals: list, at: list, pinned: list, times: list | None) -> bool:
        """The calls back to back; False where a variable read differs from the form's
        (the Program's path then).  With `times` (a list), each call is timed into it
        as (device, kind key, seconds)."""
        ndarray = np.ndarray
        for i, n, fn, a, b, slots, check in self.nodes:
            at[0] = i
            if n == _PINNED:  # a read that only this step's calls consume: the buffer
                held = vals[a].pin()
                if held is None:
                    r = vals[a].read()  # (uninitialised: its error)
                else:
                    r, lendings = held
                    pinned.append(lendings)
                vals[a] = None
                if type(r) is not ndarray or r.shape != check[0] or r.dtype != check[1]:
                    return False  # (a variable changed: the Program's path)
            elif n == _FORWARD:
                r = vals[a]
                vals[a] = None
            elif n == _READ:
                r = vals[a].read()
                vals[a] = None
                if type(r) is not ndarray or r.shape != check[0] or r.dtype != check[1]:
                    return False  # (likewise)
            elif n == 0:
                r = fn()
            elif times is not None:
                t0 = _clock()
                if n == 1:
                    r = fn(vals[a])
                    vals[a] = None
                else:
                    r = fn(*vals[a:b])
                    vals[a:b] = [None] * (b - a)
                times.append((*self.kinds[i], _clock() - t0))
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


_clock = loop_slices._clock
_REF = ("ref",)  # (the aval of a variable's reference: read by a _READ only)
_PINNED = -5  # (a node kind of the direct form: a read that pins the variable's buffer)

# NumPy's floating-point error state is a ContextVar of "extobj" values (NumPy 2):
# setting one made once costs a tenth of entering an `np.errstate`, whose Python layer
# builds its extobj anew each time (~12k instructions, as much as a small kernel).
try:
    from numpy._core.umath import _extobj_contextvar, _make_extobj

    _IGNORE_ALL = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # (NumPy 1: np.errstate itself)
    _extobj_contextvar = None


def _ignore_fp_errors():
    """`np.errstate(all="ignore")` entered; pass the result to `_restore_fp_errors`."""
    if _extobj_contextvar is not None:
        return _extobj_contextvar.set(_IGNORE_ALL)
    errstate = np.errstate(all="ignore")
    errstate.__enter__()
    return errstate


def _restore_fp_errors(entered) -> None:
    if _extobj_contextvar is not None:
        _extobj_contextvar.reset(entered)
    else:
        entered.__exit__(None, None, None)


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
