"""The Worker protocol and the in-process worker (the architecture guide's worker service).

A worker owns devices and runs registered graphs on them:
- `register_graph(graph)` takes the plans of one (feeds, fetches) combination, one per
  device partition, already lowered by the master, and returns a handle;
- `run_graph(handle, step_id, feeds, ...)` runs one step of it and returns the fetched
  values; every partition's executor starts at once and they meet in the step's
  rendezvous;
- `abort_step(step_id, error)` fails one step in flight (its pending Recvs and
  suspended kernels), `abort_all(error)` every step (a closing session);
- `deregister_graph(handle)` drops a graph.
`LocalWorker` runs in this process; a remote worker (TCP) implements the same protocol
and lowers the partition graphs it receives with the compiler before registering them.

Invariant: every in-flight step's StepStatus is in `_step_ids` until the step ends, so
an abort reaches all of it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import weakref
from typing import Protocol

from asyncflow import errors, tracing
from asyncflow.executor import Step
from asyncflow.kernel_api import _CURRENT_STEP, StepContext
from asyncflow.rendezvous import LocalRendezvous

__all__ = ["LocalWorker", "RegisteredGraph", "StepStatus", "Worker", "timeout_s", "traced"]


class Worker(Protocol):
    """What the master needs of a worker, local or remote."""

    devices: list

    def register_graph(self, graph: RegisteredGraph):
        """Keep `graph` for later steps; returns its handle."""

    def deregister_graph(self, handle) -> None:
        """Forget a registered graph (its steps in flight finish)."""

    async def run_graph(
        self,
        handle,
        step_id: int,
        feed_values: list,
        options=None,
        run_metadata=None,
        step_timeout=None,
    ) -> list:
        """Run one step of a registered graph; the fetched values."""

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """Fail one step in flight with `error`."""

    def abort_all(self, error: BaseException) -> None:
        """Fail every step in flight with `error`."""


class RegisteredGraph:
    """What a worker runs for one registered graph: a Plan per partition (device), and
    where each fetch comes from (partition index, fetch index within it).

    `rendezvous_factory(step_id)`, when set, gives each step the rendezvous its
    partitions meet in (the distributed runtime's, shared with other tasks); else a
    step of several partitions gets a fresh LocalRendezvous."""

    __slots__ = ("plans", "fetch_map", "rendezvous_factory")

    def __init__(self, plans: list, fetch_map: list, rendezvous_factory=None):
        self.plans = plans
        self.fetch_map = fetch_map
        self.rendezvous_factory = rendezvous_factory


class LocalWorker:
    """A worker in this process: its devices, its registered graphs, its steps."""

    live: weakref.WeakSet = weakref.WeakSet()  # (Session.reset clears their containers)

    def __init__(self, devices: list):
        LocalWorker.live.add(self)
        self.devices = list(devices)
        self._graphs: dict[int, RegisteredGraph] = {}
        self._handles = itertools.count(1)
        self._step_ids: dict[int, StepStatus] = {}

    def register_graph(self, graph: RegisteredGraph) -> int:
        handle = next(self._handles)
        self._graphs[handle] = graph
        return handle

    def deregister_graph(self, handle) -> None:
        self._graphs.pop(handle, None)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        status = self._step_ids.get(step_id)
        if status is not None:
            status.fail(error)

    def abort_all(self, error: BaseException) -> None:
        for status in list(self._step_ids.values()):
            status.fail(error)

    @property
    def _steps(self) -> set:
        """The partitions' Steps of every step in flight."""
        return {s for status in self._step_ids.values() for s in status.steps}

    @property
    def steps_in_flight(self) -> int:
        return len(self._step_ids)

    def close(self) -> None:
        self._graphs.clear()
        for d in self.devices:
            d.close()

    async def run_graph(
        self,
        handle,
        step_id: int,
        feed_values: list,
        options=None,
        run_metadata=None,
        step_timeout=None,
    ) -> list:
        """Run one step of a registered graph; the fetched values, in fetch order.

        `step_timeout` (seconds) aborts the step with DeadlineExceededError.  Raises the
        OpError of the first failing kernel (the step's other partitions are aborted and
        its pending Recvs released with it); errors.CancelledError when the step is
        aborted from outside (`abort_step`, `abort_all`) or the caller is cancelled.
        """
        sp = self._graphs[handle]
        plans = sp.plans
        untraced = run_metadata is None or not traced(options)  # (NO_TRACE: as None)
        if len(plans) == 1 and sp.rendezvous_factory is None and untraced:
            # The common step: one partition, untraced.  Most such steps never suspend:
            # they end inside start(), before any abort could reach them, so the step
            # joins _step_ids (and gets its StepStatus) only when it does suspend.
            sctx = StepContext(step_id)
            step = Step(plans[0], feed_values)
            token = _CURRENT_STEP.set(sctx)
            try:
                if plans[0].watchers:
                    _watch([step], sctx)
                step.start()
            except BaseException as exc:  # (as _finish ends a failed step)
                step.cancel_tasks()
                sctx.run_failure_callbacks(step.error or exc)
                raise
            finally:
                _CURRENT_STEP.reset(token)
            if step.tasks or step.error is not None:
                return await self._finish(sp, sctx, [step], step_id, step_timeout)
            try:
                return step.results()
            except BaseException as exc:
                sctx.run_failure_callbacks(exc)
                raise
            finally:
                sctx.close()
        if sp.rendezvous_factory is not None:
            sctx = StepContext(step_id, sp.rendezvous_factory(step_id))
            steps = [_new_step(plan, feed_values) for plan in plans]
        elif len(plans) == 1:
            sctx = StepContext(step_id)
            steps = [_new_step(plans[0], feed_values)]
        else:
            sctx = StepContext(step_id, LocalRendezvous())
            steps = [_new_step(plan, feed_values) for plan in plans]
        status = StepStatus(sctx, steps)
        self._step_ids[step_id] = status
        # Tracing hook: a traced step (its plan's kernels are timed) gets a collector.
        trace = [] if run_metadata is not None and traced(options) else None
        try:
            token = _CURRENT_STEP.set(sctx)
            trace_token = None if trace is None else tracing.collect_into(trace)
            try:
                _watch(steps, sctx)
                for s in steps:
                    s.start()
            finally:
                if trace_token is not None:
                    tracing.stop_collecting(trace_token)
                _CURRENT_STEP.reset(token)
        except BaseException as exc:  # (as _finish ends a failed step)
            sctx.run_failure_callbacks(status.first_error() or exc)
            del self._step_ids[step_id]
            status.close()
            raise
        return await self._finish(
            sp, sctx, steps, step_id, step_timeout, trace, run_metadata, status
        )

    async def _finish(
        self, sp, sctx, steps, step_id, step_timeout, trace=None, run_metadata=None, status=None
    ):
        """Wait for a started step's partitions; its fetched values (run_graph)."""
        if status is None:  # (the single-partition path: it joins _step_ids now)
            status = StepStatus(sctx, steps)
            self._step_ids[step_id] = status
        try:
            for s in steps:
                if s.tasks:  # something suspended: wait (most steps never do)
                    await status.wait(step_timeout)
                    break
            error = status.first_error()
            if error is not None:
                raise error
            if trace is not None:  # tracing hook (see tracing.py)
                tracing.fill_run_metadata(run_metadata, trace, self.devices)
            if len(steps) == 1:
                return steps[0].results()
            results = [s.results() for s in steps]
            return [results[p][j] for p, j in sp.fetch_map]
        except BaseException as exc:
            sctx.run_failure_callbacks(status.first_error() or exc)
            raise
        finally:
            del self._step_ids[step_id]
            status.close()


def _watch(steps, sctx: StepContext) -> None:
    """Tell the ops that follow every step holding them (OpDef.step_watch) that one
    starts."""
    for step in steps:
        for watch, ctx, i in step.plan.watchers:
            watch(ctx, sctx, functools.partial(step.inputs_so_far, i))


class StepStatus:
    """One step across its partitions: its termination, cancellation and first error.

    Invariant: `error` is set once, by the first failure from anywhere (a kernel of any
    partition, the deadline, the caller's cancellation, an abort from outside); at that
    moment every partition and the step's rendezvous are aborted with it, so no kernel
    starts afterwards and every pending Recv is released.  A single partition keeps its
    kernel's error in its own Step (no status call on its hot path).
    """

    __slots__ = ("sctx", "steps", "error")

    def __init__(self, sctx: StepContext, steps: list):
        self.sctx = sctx
        self.steps = steps
        self.error: BaseException | None = None
        if len(steps) > 1:
            for s in steps:
                s.on_error = self.fail

    def fail(self, error: BaseException) -> None:
        """Fail the whole step with `error` (only the first failure counts)."""
        if self.error is not None:
            return
        self.error = error
        if self.sctx.rendezvous is not None:
            self.sctx.rendezvous.abort(error)
        for s in self.steps:
            s.abort(error)

    def first_error(self) -> BaseException | None:
        if self.error is not None:
            return self.error
        for s in self.steps:
            if s.error is not None:
                return s.error
        return None

    async def wait(self, step_timeout=None) -> None:
        """Until every partition has finished or the step failed.

        Raises asyncio.CancelledError when the caller is cancelled (the step is failed
        with errors.CancelledError first); a passed deadline fails the step with
        DeadlineExceededError."""
        steps = self.steps
        if not any(s.tasks for s in steps) or self.first_error() is not None:
            return
        try:
            if step_timeout is None:
                for s in steps:
                    await s.wait()
            else:
                async with asyncio.timeout(step_timeout):
                    for s in steps:
                        await s.wait()
        except TimeoutError:
            self.fail(
                errors.DeadlineExceededError(
                    None,
                    None,
                    # TF's words for a blocked op past the deadline.
                    "Timed out waiting for notification (the step ran past "
                    f"timeout_in_ms={int(step_timeout * 1000)})",
                )
            )
        except asyncio.CancelledError:
            self.fail(errors.CancelledError(None, None, "Step was cancelled"))
            raise

    def close(self) -> None:
        """The step is over: drop its undo hooks and stop anything still suspended."""
        self.sctx.close()
        for s in self.steps:
            if s.tasks:
                s.cancel_tasks()


def _new_step(plan, feed_values):
    return Step(plan, feed_values)


def traced(options) -> bool:
    """SOFTWARE_TRACE or more: the step runs a traced plan (per-node times, memory
    accounting) and fills RunMetadata.step_stats."""
    return bool(options is not None and getattr(options, "trace_level", 0) >= 1)


def timeout_s(options, config):
    ms = getattr(options, "timeout_in_ms", 0) if options is not None else 0
    if not ms:
        ms = getattr(config, "operation_timeout_in_ms", 0)
    return ms / 1000.0 if ms and ms > 0 else None
