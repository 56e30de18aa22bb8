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

Invariant: every in-flight step is in `_steps` (and by id in `_step_ids`) until it
ends, so an abort reaches all of it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Protocol

from asyncflow import errors, tracing
from asyncflow.executor import Step
from asyncflow.frames import FrameStep
from asyncflow.kernel_api import _CURRENT_STEP, StepContext
from asyncflow.rendezvous import LocalRendezvous

__all__ = ["LocalWorker", "RegisteredGraph", "Worker", "timeout_s", "traced"]


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
    where each fetch comes from (partition index, fetch index within it)."""

    __slots__ = ("plans", "fetch_map")

    def __init__(self, plans: list, fetch_map: list):
        self.plans = plans
        self.fetch_map = fetch_map


def _abort_all(steps, sctx, error) -> None:
    if sctx.rendezvous is not None:
        sctx.rendezvous.abort(error)
    for s in steps:
        s.abort(error)


def _step_error(steps):
    """The step's error: the first kernel failure wins over the aborts it caused."""
    for s in steps:
        if s.error is not None and s.on_error is None:
            return s.error
    errs = [s.error for s in steps if s.error is not None]
    if not errs:
        return None
    # With partitions, on_error recorded the original; every step holds it or an abort.
    for e in errs:
        if not isinstance(e, errors.CancelledError):
            return e
    return errs[0]


class LocalWorker:
    """A worker in this process: its devices, its registered graphs, its steps."""

    def __init__(self, devices: list):
        self.devices = list(devices)
        self._graphs: dict[int, RegisteredGraph] = {}
        self._handles = itertools.count(1)
        self._steps: set[Step] = set()
        self._step_ids: dict[int, tuple] = {}

    def register_graph(self, graph: RegisteredGraph) -> int:
        handle = next(self._handles)
        self._graphs[handle] = graph
        return handle

    def deregister_graph(self, handle) -> None:
        self._graphs.pop(handle, None)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        entry = self._step_ids.get(step_id)
        if entry is not None:
            steps, sctx = entry
            _abort_all(steps, sctx, error)

    def abort_all(self, error: BaseException) -> None:
        for step in list(self._steps):
            step.abort(error)

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
        if len(plans) == 1:
            sctx = StepContext(step_id)
            steps = [_new_step(plans[0], feed_values)]
        else:
            sctx = StepContext(step_id, LocalRendezvous())
            steps = [_new_step(plan, feed_values) for plan in plans]
            first_error: list = []

            def on_error(err, steps=steps, rdv=sctx.rendezvous):
                # One partition failed: the whole step fails with that error, and every
                # pending Recv of the step is released with it.
                if first_error:
                    return
                first_error.append(err)
                rdv.abort(err)
                for s in steps:
                    s.abort(err)

            for s in steps:
                s.on_error = on_error
        self._steps.update(steps)
        self._step_ids[step_id] = (steps, sctx)
        # Tracing hook: a traced step (its plan's kernels are timed) gets a collector.
        trace = [] if run_metadata is not None and traced(options) else None
        try:
            token = _CURRENT_STEP.set(sctx)
            trace_token = None if trace is None else tracing.collect_into(trace)
            try:
                for s in steps:
                    s.start()
            finally:
                if trace_token is not None:
                    tracing.stop_collecting(trace_token)
                _CURRENT_STEP.reset(token)
            if any(s.tasks for s in steps) and not any(s.error for s in steps):
                try:
                    if step_timeout is None:
                        for s in steps:
                            await s.wait()
                    else:
                        async with asyncio.timeout(step_timeout):
                            for s in steps:
                                await s.wait()
                except TimeoutError:
                    _abort_all(
                        steps,
                        sctx,
                        errors.DeadlineExceededError(
                            None,
                            None,
                            "Timed out waiting for the step to finish "
                            f"(timeout_in_ms={int(step_timeout * 1000)})",
                        ),
                    )
                except asyncio.CancelledError:
                    _abort_all(
                        steps, sctx, errors.CancelledError(None, None, "Step was cancelled")
                    )
                    raise
            error = _step_error(steps)
            if error is not None:
                raise error
            if trace is not None:  # tracing hook (see tracing.py)
                tracing.fill_run_metadata(run_metadata, trace, self.devices)
            if len(steps) == 1:
                return steps[0].results()
            results = [s.results() for s in steps]
            return [results[p][j] for p, j in sp.fetch_map]
        except BaseException as exc:
            sctx.run_failure_callbacks(_step_error(steps) or exc)
            raise
        finally:
            sctx.close()
            self._step_ids.pop(step_id, None)
            for s in steps:
                self._steps.discard(s)
                if s.tasks:
                    s.cancel_tasks()


def _new_step(plan, feed_values):
    if plan.has_cf:
        return FrameStep(plan, feed_values)
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
