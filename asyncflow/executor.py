"""The ready-count executor: the flat `Plan` of a partition, and the `Step` that runs it.

Plans are laid out by `lowering.compile_plan` (the compiler); this module runs them.

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
- After the first error, no further kernel starts; in-flight Tasks are cancelled, each
  once (their kernels' cleanups run on, awaits included, for at most CLEANUP_GRACE_S),
  and the step's error is the first one recorded.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncflow import dtypes, errors, loop_slices
from asyncflow.devices import denormal
from asyncflow.devices.base import DRIVER
from asyncflow.frames import (  # noqa: F401 - re-exported for older callers
    CONST,
    CONTROL_FLOW_KINDS,
    ENTER,
    EXIT,
    FORWARD,
    IDENT,
    KIND_OF,
    MERGE,
    NEXT_ITER,
    NORMAL,
    RECV,
    SEND,
    SWITCH,
    TRIGGER,
    Frame,
    FrameRouting,
    Iter,
    _never_ran,
)
from asyncflow.graph import Operation
from asyncflow.kernel_api import (  # noqa: F401 - re-exported for older callers
    _CURRENT_STEP,
    DEAD,
    NOT_INLINE,
    QUIET_STEP,
    KernelContext,
    StepContext,
    current_step,
    in_quiet_step,
    quiet_step,
    wrap_kernel_error,
)
from asyncflow.loop_slices import (  # noqa: F401 - re-exported for older callers
    _DEADLINES,
    _INF,
    _YIELD_TO_LOOP,
    CALLER_SLICE_S,
    GRACE_FRACTION,
    SLICE_S,
    _clock,
    caller_drives,
    new_slice,
    slice_deadline,
    slice_spent,
)

__all__ = [
    "CONTROL_FLOW_KINDS",
    "KIND_OF",
    "Plan",
    "Step",
]

_CHECK_KERNELS = os.environ.get("ASYNCFLOW_CHECK_KERNELS", "") not in ("", "0")
_ONE_NONE = (None,)

# Special arities (see lowering.compile_plan; literal in Step._drive).
_FORWARD, _NOTHING, _GENERAL = -1, -2, -3
_GENERAL_DONE = object()  # (Step._drive: the general path delivered the outputs)


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


# Test mode: the arrays trusted-new producers returned, while they live (any plan).
_MADE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _check_fresh(op: Operation, forward, args, values) -> None:
    """A consumer may take over this node's outputs (donation.decide): each must be a
    new object (or an input it was given to take over), neither another input, nor
    another output, nor one some kernel returned before and that still lives."""
    for k, v in enumerate(values):
        if not isinstance(v, np.ndarray) or not v.flags.writeable or not v.size:
            continue
        if any(v is a for m, a in enumerate(args) if m in forward):
            continue  # taken over: as new as its producer made it
        if any(v is a for a in args) or any(v is w for w in values[:k]):
            raise AssertionError(
                f"{op.type} kernel for {op.name} returned an input object as an output: "
                "declare the op with donation.aliases_inputs"
            )
        if _MADE.get(id(v)) is v:
            raise AssertionError(
                f"{op.type} kernel for {op.name} returned an array returned before "
                "(a cache): make it read-only or declare the op with donation.aliases_inputs"
            )
        _MADE[id(v)] = v


def _checked_kernel(kernel: Callable, op: Operation) -> Callable:
    """Test mode (ASYNCFLOW_CHECK_KERNELS=1): verify outputs against the graph's types."""

    async def checked(ctx, *args, **kw):
        result = await kernel(ctx, *args, **kw)
        _check_result(op, ctx, args, result)
        return result

    inline = getattr(kernel, "inline", None)
    if inline is not None:  # its inline form (kernel_api), checked alike

        def checked_inline(ctx):
            fn = inline(ctx)
            if fn is None:
                return None

            def run(*args):
                result = fn(*args)
                if result is not NOT_INLINE:
                    _check_result(op, ctx, args, result)
                return result

            return run

        checked.inline = checked_inline
    direct = getattr(kernel, "direct", None)
    if direct is not None:  # its direct form (kernel_api), checked alike

        def checked_direct(ctx, avals):
            made = direct(ctx, avals)
            if made is None:
                return None
            fn, call, out_avals = made

            def run(*args):
                result = fn(*args)
                _check_result(op, ctx, args, result)
                if (result.shape, result.dtype) != tuple(out_avals[0]):
                    raise AssertionError(
                        f"{op.type} direct form returned {result.shape} {result.dtype}, "
                        f"announced {out_avals[0]}"
                    )
                return result

            return run, call, out_avals

        checked.direct = checked_direct
    return checked


def _check_result(op: Operation, ctx, args, result) -> None:
    """The checks of `_checked_kernel` on one result of the kernel (or its inline form)."""
    outs = op.outputs
    values = (result,) if len(outs) == 1 else (() if not outs else tuple(result))
    if len(values) != len(outs):
        raise AssertionError(f"{op.type} kernel returned {len(values)} outputs")
    if ctx.fresh:
        _check_fresh(op, ctx.forward, args, values)
    for t, v in zip(outs, values):
        if t._is_ref or v is DEAD or t.dtype.base_dtype in (dtypes.resource, dtypes.variant):
            continue  # a ref, a dead branch, a resource handle (no NumPy type)
        arr = np.asarray(v) if not hasattr(v, "dtype") else v
        want = t.dtype.as_numpy_dtype
        if np.dtype(arr.dtype) != np.dtype(want):
            raise AssertionError(
                f"{op.type} kernel for {op.name} returned dtype {arr.dtype}, graph says "
                f"{t.dtype.name}"
            )
        if not t.shape.is_compatible_with(tuple(arr.shape)):
            raise AssertionError(
                f"{op.type} kernel for {op.name} returned shape {tuple(arr.shape)}, graph "
                f"says {t.shape}"
            )


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
        "sentinel_done",
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
        "aliasing",
        "watchers",
        "__weakref__",
    )

    # -- helpers for the plan passes (lowering.PLAN_PASSES)
    def passes_input(self, i: int) -> None:
        """A rewrite installed a kernel on node i that returns an input object itself
        (donation.decide follows it as it follows an Identity)."""
        self.aliasing.add(i)

    def claim(self, *nodes: int) -> bool:
        """Mark `nodes` as taken by a rewrite; False (taking none) if one already is."""
        if self.rewritten.intersection(nodes):
            return False
        self.rewritten.update(nodes)
        return True

    @staticmethod
    def checked(kernel: Callable, op: Operation) -> Callable:
        """`kernel` as compile_plan installs it for `op` (output checks in test mode)."""
        return _checked_kernel(kernel, op) if _CHECK_KERNELS else kernel


class Step(FrameRouting):
    """One execution of a plan.  Create, call `start()`, then await `wait()` if needed.

    The one interpreter of every plan, with or without control flow (see `_drive`)."""

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
        "root",
        "runnable",
        "closer",
    )

    def __init__(self, plan: Plan, feed_values: list, on_error=None):
        self.plan = plan
        if plan.has_cf:
            # The root iteration holds the step's arrays; loop iterations get their own.
            root = Iter(Frame("", None, 1, 0), 0, plan)
            root.frame.iters[0] = root
            self.root = root
            self.runnable: list = []
            vals, self.pending, self.ready = root.vals, root.pending, root.ready
        else:
            self.root = None
            self.runnable = ()
            vals = [None] * plan.num_slots
            self.pending = plan.init_pending[:]
            self.ready: list[int] = []
        for slots, v in zip(plan.feed_slots, feed_values):
            for s in slots:
                vals[s] = v
        self.vals = vals
        self.error: errors.OpError | None = None
        self.tasks: dict[asyncio.Task, Any] | None = None
        self.done: asyncio.Future | None = None
        self.feed_values = feed_values
        self.loop = None
        # Called with the error when one of this step's kernels fails: the session uses
        # it to abort the step's other partitions and its rendezvous.
        self.on_error = on_error

    def start(self) -> None:
        self.ready.extend(self.plan.init_ready)
        self._spawn()

    # The interpreter.  It is a coroutine so that `await kernel(...)` of a kernel that
    # does not suspend costs no StopIteration (~0.13 µs instead of ~0.45 µs for send()).
    # When a kernel does suspend, this whole driver parks with it; `_spawn` then starts
    # a new driver for the nodes still ready, so one waiting kernel never holds up the
    # others.  A driver works in one iteration at a time (`it`; None for a plan without
    # control flow, whose only iteration is the step's own arrays); when its ready
    # nodes run out, it leaves the iteration and takes the next one queued as runnable
    # (FrameRouting).  `holder[0]` tells `_spawn` which iteration a parked driver is in.
    #
    # Deliberately flat, with locals for everything it touches, and trading elegance
    # for speed (benchmarks/core.py, the Identity chain and the NoOp fan-in):
    # - the node that became ready last runs next without a trip through `ready`
    #   (`nxt`; the same order as pushing and popping it), and an Identity or NoOp with
    #   one consumer (a chain, a fan-in) skips the general edge loop;
    # - Identity and NoOp come first and skip the error and time checks: only a
    #   kernel call can fail, suspend (letting an abort in) or take time;
    # - in a plan with control flow, only the nodes that need it take the general path
    #   (arity _GENERAL, set by lowering): Merge, Switch, Enter/Exit/NextIteration,
    #   Send/Recv and any node that may receive a dead value; every other node, in any
    #   frame, runs on the paths above;
    # - after a kernel, one clock read against the loop slice's deadline (see
    #   `loop_slices`): past it, the driver parks the ready nodes and yields to the
    #   loop, so that a step that never suspends still lets other tasks run.  Its
    #   first overrun gets a tenth of a slice more instead: a short step whose slice
    #   ran out mid-step (after `arun` let it start) ends rather than paying a Task.
    async def _drive(self, holder=None) -> None:  # noqa: C901 - the hot loop, flat on purpose
        plan = self.plan
        kernels, ctxs, starts, ends = plan.kernels, plan.ctxs, plan.starts, plan.ends
        arity, clears, edges, single = plan.arity, plan.clears, plan.edges, plan.single
        clock, deadline, graced = _clock, slice_deadline(), False
        if self.error is not None:
            return
        it = self.root
        if it is None:
            vals, pending, ready = self.vals, self.pending, self.ready
            DRIVER.ready = ready  # (devices: the other ready nodes, see devices/base.py)
        else:
            kinds, n_out, fwd_read = plan.kinds, plan.n_outputs, plan.fwd_read
            plain_edges = plan.plain_edges
            loops, enter_info, runnable = plan.loops, plan.enter_info, self.runnable
            it = self._take()
            if it is None:
                return
            holder[0] = it
            vals, pending, ready = it.vals, it.pending, it.ready
            DRIVER.ready = ready
        pop, push = ready.pop, ready.append
        while True:
            if not ready:  # this iteration ran dry: take the next one queued, if any
                if it is None:
                    return
                self._leave(it)
                it = self._take()
                if it is None:
                    return
                holder[0] = it
                vals, pending, ready = it.vals, it.pending, it.ready
                DRIVER.ready = ready
                pop, push = ready.pop, ready.append
                continue
            i = pop()
            while True:
                n = arity[i]
                nxt = -1
                if n == -1:  # _FORWARD (Identity): pass the value on, no kernel call
                    a = starts[i]
                    r = vals[a]
                    vals[a] = None
                    e = edges[i]
                    if len(e) == 1:  # one consumer (a chain): straight on to it if ready
                        _, j, s = e[0]
                        vals[s] = r
                        pending[j] -= 1
                        if not pending[j]:
                            i = j
                            continue
                        if ready:
                            i = pop()
                            continue
                        break
                    for _, j, s in e:
                        vals[s] = r
                        pending[j] -= 1
                        if not pending[j]:
                            if nxt >= 0:
                                push(nxt)
                            nxt = j
                    r = None
                elif n == -2:  # _NOTHING (NoOp): nothing to compute, control edges only
                    e = edges[i]
                    if len(e) == 1:  # (a fan-in: straight on to its consumer if ready)
                        j = e[0][1]
                        pending[j] -= 1
                        if not pending[j]:
                            i = j
                            continue
                        if ready:
                            i = pop()
                            continue
                        break
                    for _, j, _s in e:
                        pending[j] -= 1
                        if not pending[j]:
                            if nxt >= 0:
                                push(nxt)
                            nxt = j
                else:
                    try:
                        if n == 1:
                            a = starts[i]
                            r = await kernels[i](ctxs[i], vals[a])
                            vals[a] = None
                        elif n == 2:
                            a = starts[i]
                            r = await kernels[i](ctxs[i], vals[a], vals[a + 1])
                            vals[a] = vals[a + 1] = None
                        elif n == 0:
                            r = await kernels[i](ctxs[i])
                        elif n > 0:
                            a, b = starts[i], ends[i]
                            r = await kernels[i](ctxs[i], *vals[a:b])
                            vals[a:b] = clears[i]
                        else:  # _GENERAL: control flow, or a value that may be dead
                            kind = kinds[i]
                            if kind == MERGE:
                                st = it.merges[i]
                                outs, st[2] = st[2], None
                            elif it.dead[i] and kind != TRIGGER and kind != SEND:
                                outs = (DEAD,) * (n_out[i] or 1)
                            else:
                                a = starts[i]
                                if kind == CONST:
                                    outs = (ctxs[i].attrs["value"],)
                                elif kind >= FORWARD:  # identity-like: no kernel call
                                    v = vals[a]
                                    vals[a] = None
                                    outs = (v.read() if fwd_read[i] else v,)
                                    v = None
                                else:
                                    b = ends[i]
                                    args = vals[a:b]
                                    vals[a:b] = clears[i]
                                    if kind == SEND or kind == RECV:  # keyed by iteration
                                        r = await kernels[i](ctxs[i], *args, frame_tag=it.tag)
                                    else:
                                        r = await kernels[i](ctxs[i], *args)
                                    del args
                                    if self.error is not None:  # aborted while suspended
                                        return
                                    if n_out[i] == 1:
                                        outs = (r,)
                                    elif r is None:
                                        outs = (None,)
                                    else:
                                        outs = tuple(r)
                                    r = None
                            if kind > IDENT:  # Enter, Exit, NextIteration: across frames
                                name = enter_info[i][0] if kind == ENTER else None
                                if loops is not None and name in loops:
                                    prog = loops[name]
                                    if not await self._enter_compiled(i, it, outs[0], prog):
                                        return  # the loop failed; the step is aborted
                                else:
                                    self._propagate(i, it, kind, outs)
                            elif plain_edges[i]:  # within the iteration, no Merge
                                dead = it.dead
                                for oi, j, s in edges[i]:
                                    if oi >= 0:
                                        v = vals[s] = outs[oi]
                                    else:  # control: dead only when the whole node was
                                        v = DEAD if all(o is DEAD for o in outs) else None
                                    if v is DEAD:
                                        dead[j] += 1
                                    pending[j] -= 1
                                    if not pending[j]:
                                        push(j)
                                v = None
                            else:
                                self._deliver(i, it, outs, False)
                            outs = None
                            r = _GENERAL_DONE
                        if self.error is not None:  # aborted while the kernel was suspended
                            return
                        if single[i]:  # (never a _GENERAL node: see compile_control_flow)
                            for _, j, s in edges[i]:
                                vals[s] = r
                                pending[j] -= 1
                                if not pending[j]:
                                    if nxt >= 0:
                                        push(nxt)
                                    nxt = j
                        elif r is not _GENERAL_DONE:  # (else delivered by FrameRouting)
                            if r is None:
                                r = _ONE_NONE
                            for oi, j, s in edges[i]:
                                vals[s] = r[oi]
                                pending[j] -= 1
                                if not pending[j]:
                                    if nxt >= 0:
                                        push(nxt)
                                    nxt = j
                        r = None  # a parked driver must not keep the last output alive
                    except BaseException as exc:  # noqa: BLE001 - every failure aborts the step
                        self._fail(i, exc)
                        return
                    if clock() > deadline:
                        deadline = slice_deadline()  # (a new slice may have begun meanwhile)
                        now = clock()
                        if now > deadline and not graced:
                            # This driver's first overrun: a little more, so that a short
                            # step ends instead of parking in a Task mid-step (which
                            # costs more than the step); the next `arun` yields.
                            graced = True
                            deadline = now + loop_slices.SLICE_S * GRACE_FRACTION
                        elif now > deadline:
                            if nxt >= 0:
                                push(nxt)
                            # Park the ready nodes and the queued iterations (another
                            # driver would take them at once), and let the loop run.
                            parked = ready[:]
                            ready.clear()
                            if it is not None:
                                parked_iters = runnable[:]
                                runnable.clear()
                            await _YIELD_TO_LOOP
                            ready.extend(parked)
                            parked = None
                            if it is not None:
                                runnable.extend(parked_iters)
                                parked_iters = None
                            deadline = new_slice()
                            if self.error is not None:
                                return
                            nxt = -1
                if nxt >= 0:
                    i = nxt
                elif ready:
                    i = pop()
                else:
                    break

    def _spawn(self) -> None:
        """Drive ready nodes until none is left; park drivers whose kernel suspended.

        Kernels run with denormals flushed (devices/denormal.py), here and wherever a
        parked driver resumes (`_DriverTask`): the thread's own modes come back
        before anything else of the caller's runs on it."""
        if self.root is not None:
            self._spawn_frames()
            return
        ready = self.ready
        flushed = denormal.enter()
        try:
            while ready and self.error is None:
                coro = self._drive()
                try:
                    fut = coro.send(None)
                except StopIteration:
                    continue
                self._park(coro, fut, None)
        finally:
            denormal.leave(flushed)
        DRIVER.ready = ()
        if self.tasks:  # (a kernel is away: devices learn when the driver ran dry)
            DRIVER.idle_at = _clock()

    def _spawn_frames(self) -> None:
        root, runnable = self.root, self.runnable
        flushed = denormal.enter()
        try:
            while (root.ready or runnable) and self.error is None:
                holder = [None]
                coro = self._drive(holder)
                try:
                    fut = coro.send(None)
                except StopIteration:
                    continue
                it = holder[0]
                if it is not None and it.ready:
                    self._wake(it)  # its other ready nodes go on in a new driver
                self._park(coro, fut, holder)
        finally:
            denormal.leave(flushed)
        DRIVER.ready = ()
        if self.tasks:
            DRIVER.idle_at = _clock()

    def _park(self, coro, fut, holder) -> None:
        if self.tasks is None:
            self.tasks = {}
            self.loop = asyncio.get_running_loop()
        task = self.loop.create_task(_DriverTask(self, coro, fut, holder))
        self.tasks[task] = coro
        task.add_done_callback(self._on_task_done)

    @property
    def finished(self) -> bool:
        return self.error is not None or not self.tasks

    def _on_task_done(self, task: asyncio.Task) -> None:
        tasks = self.tasks
        tasks.pop(task, None)
        if not tasks and self.error is not None:
            closer = getattr(self, "closer", None)  # (set by cancel_tasks only)
            if closer is not None:
                # Every cleanup ended: no timer to wait for (the cancelled timers
                # behind a live one stay in the loop's heap, with their Contexts).
                self.closer = None
                closer.cancel()
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
        """Cancel the Tasks of the suspended kernels, each once (as TF's cancellation
        manager calls a kernel's callback once): a second cancellation would cut short
        the cleanup the first one started, where it awaits.  Their cleanups run on in
        their Tasks (the step does not wait for them); CLEANUP_GRACE_S later, a kernel
        still running is closed (`_close_stragglers`)."""
        if self.tasks:
            try:
                current = asyncio.current_task() if self.loop is not None else None
            except RuntimeError:
                # Off the loop: a session closed from its caller's thread while nothing
                # drives the runtime loop (Runtime.cancel_if_idle).  No task of ours is
                # running then; the cancellations run when the loop next does.
                current = None
            cancelled = False
            for t in list(self.tasks):
                if t is current:
                    continue
                driver = t.get_coro()
                if type(driver) is _DriverTask:
                    if driver.cancel_sent:  # (not Task.cancelling(): a kernel's own
                        continue  # asyncio.timeout counts there too, while it expires)
                    driver.cancel_sent = True
                t.cancel()
                cancelled = True
            if cancelled and self.loop is not None and getattr(self, "closer", None) is None:
                # (one timer a step: a second cancel_tasks, an abort after the failure,
                # finds it armed.  In a Context of its own: the caller's would hold the
                # step's StepContext, and through its error the step, for the whole grace)
                self.closer = self.loop.call_later(
                    CLEANUP_GRACE_S, _close_stragglers, self.tasks, context=_NO_CONTEXT
                )

    async def wait(self) -> None:
        """Suspend until every suspended kernel finished or the step failed."""
        if self.error is None and self.tasks:
            self.done = self.loop.create_future()
            await self.done

    def inputs_so_far(self, i: int) -> list:
        """The inputs of node `i` that have arrived (None for those still to come), as
        the step stands; until the node runs (its kernel clears them).  A node in a
        loop's frame has its inputs elsewhere: all None here."""
        plan = self.plan
        return self.vals[plan.starts[i] : plan.ends[i]]

    def results(self) -> list:
        if self.root is not None:
            return self._frame_results()  # (a dead fetch raises)
        plan, vals, feeds = self.plan, self.vals, self.feed_values
        if self.pending[plan.sentinel] != plan.sentinel_done:
            raise _never_ran()
        out = []
        for s, ref in zip(plan.fetch_slots, plan.fetch_refs):
            if s is None:
                out.append(None)
                continue
            v = vals[s] if s >= 0 else feeds[-1 - s]
            if ref:  # a reference; or the slot of the one a fetched Identity aliases
                v = v.read() if ref is True else vals[ref].read()
            out.append(v)
        return out


class _DriverTask:
    """The coroutine of the Task that continues a parked driver (the driver `coro`,
    suspended in a kernel on `first`); starts new drivers when it parks again.

    A coroutine object of its own rather than an `async def` awaiting the driver, so
    that a cancellation reaches the kernel even when it comes before the Task's first
    step (the step failed in the drive that parked it): asyncio then throws into the
    Task's coroutine before any send, which a native coroutine would raise at its
    first line without running it.  Here it goes into the kernel, as it would had the
    Task been waiting on `first`; the kernel's cleanup then runs to its end in this
    Task, awaits included (Python 3.11's wait_for, thrown a cancellation, waits for its
    inner future once more).  `cancel_sent`: Step.cancel_tasks cancelled it (once);
    `closing` (set by `_close_stragglers`): the next throw closes the driver instead
    (GeneratorExit in the kernel)."""

    __slots__ = ("step", "coro", "first", "holder", "cancel_sent", "closing")

    def __init__(self, step, coro, first, holder):
        self.step, self.coro, self.first, self.holder = step, coro, first, holder
        self.cancel_sent = self.closing = False

    def send(self, sent):
        y = self.first
        if y is not _RUNNING:  # the Task's first step: the kernel waits on `first`
            self.first = _RUNNING
            return y
        step, holder = self.step, self.holder
        if holder is None:  # (devices see this driver's other ready nodes again)
            DRIVER.ready = step.ready
        else:
            it = holder[0]
            DRIVER.ready = () if it is None else it.ready
        flushed = denormal.enter()
        try:
            y = self.coro.send(sent)
        except BaseException:  # (StopIteration: the driver ran dry)
            DRIVER.ready = ()
            self.step = self.holder = None  # (the ended Task keeps nothing of the step)
            raise
        finally:
            denormal.leave(flushed)
        self._parked_again()
        return y

    def throw(self, exc, *args):
        """Cancellation (or another exception) goes into the waiting kernel."""
        if args:  # (the legacy signature: type, value, traceback)
            exc = args[0] if args[0] is not None else exc()
        first, self.first = self.first, _RUNNING
        DRIVER.ready = ()
        flushed = denormal.enter()
        try:
            if self.closing:  # past its grace: closed, its Task ends cancelled
                try:
                    self.coro.close()
                except BaseException:  # noqa: BLE001 - it ignored GeneratorExit too
                    pass
                raise exc
            if first is not _RUNNING and isinstance(exc, asyncio.CancelledError):
                # (what the Task's cancel() would have done, had it been waiting on it)
                if isinstance(first, asyncio.Future):
                    first.cancel()
            y = self.coro.throw(exc)
        except BaseException:
            self.step = self.holder = None  # (the ended Task keeps nothing of the step)
            raise
        finally:
            denormal.leave(flushed)
        self._parked_again()
        return y

    def close(self):
        self.first = _RUNNING
        self.coro.close()

    @property
    def __name__(self) -> str:  # (asyncio's repr of the Task)
        return "parked_kernel_driver"

    def _parked_again(self) -> None:
        step, holder = self.step, self.holder
        if holder is not None:  # (a plan with control flow)
            it = holder[0]
            if it is not None and it.ready:
                step._wake(it)  # its other ready nodes go on in a new driver
            if step.error is None and (step.ready or step.runnable):
                step._spawn()
        elif step.ready and step.error is None:
            step._spawn()


collections.abc.Coroutine.register(_DriverTask)  # (what asyncio.Task accepts)
_RUNNING = object()  # (_DriverTask.first once its Task ran)

# How long (seconds) a cancelled kernel may go on with its cleanup before the executor
# closes it (GeneratorExit).  A bound, so that a kernel ignoring its cancellation
# neither runs for ever nor holds its step's resources: longer than any cleanup of this
# package's kernels (the longest found awaits 5 s: a tf.data service read's release).
CLEANUP_GRACE_S = 10.0


_NO_CONTEXT = contextvars.Context()


def _close_stragglers(tasks: dict) -> None:
    """CLEANUP_GRACE_S after a step cancelled `tasks` (its suspended kernels' Tasks):
    close the kernels still running (each Task ends cancelled)."""
    for t in list(tasks):
        if not t.done():
            coro = t.get_coro()
            if type(coro) is _DriverTask:
                coro.closing = True
            t.cancel()
