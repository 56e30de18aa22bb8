"""Sharing the event loop: the time slices of inline work the step interpreter keeps to.

The lowest piece of the runtime: the interpreter (`executor.Step`), compiled loops
(`frames.LoopProgram`) and `Session.arun` read the same per-loop slice deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
import time

__all__ = [
    "CALLER_SLICE_S",
    "SLICE_S",
    "caller_drives",
    "new_slice",
    "slice_deadline",
    "slice_spent",
]

# -- sharing the loop ------------------------------------------------------------------
#
# A step that never suspends would hold the loop until it ends, however long that is.
# So the interpreter (Step) and compiled loops read the clock after their
# kernels and yield to the loop once the inline work of the loop's current *slice*
# passed SLICE_S; `Session.arun` checks it too before it starts a step.  A slice starts
# when a driver first runs after the loop got control, and lasts until the loop runs
# its next round of callbacks (a `call_soon` ends it), so back-to-back `arun` steps of
# one task that never suspends share one slice, and a step that does not reach the
# deadline costs one clock read per kernel and nothing else.  A synchronous caller
# driving its own step inline (`caller_drives`) owns the loop, which may not even run
# between its steps: only its own step's deadline or cancellation could want it, so
# its slices last CALLER_SLICE_S, one per step.
#
# Many tasks stepping on one loop take turns: `arun` yields before a step only when
# the slice is spent *and* its task already ran a step in this slice (`STEPPED_IN`);
# a task's first step of a spent slice gets GRACE_FRACTION of a slice more.  So every
# task advances once per round of the loop, and none wakes only to yield again (with
# 100 tasks, that was a third of the loop's time).
SLICE_S = 0.001
GRACE_FRACTION = 0.1
CALLER_SLICE_S = 0.02
_INF = float("inf")
_clock = time.perf_counter
_get_running_loop = asyncio.events._get_running_loop
_DEADLINES: dict = {}  # loop -> the clock reading that ends its current slice
_SLICE_OF: dict = {}  # loop -> the id of its latest slice
_SLICE_IDS = itertools.count(1)
# The slice in which the current task last ran a step with `arun` (a task's own value).
STEPPED_IN: contextvars.ContextVar[int] = contextvars.ContextVar("asyncflow_stepped_in", default=0)


class _Caller(threading.local):
    on = False  # a synchronous caller drives its own step on this thread


_CALLER = _Caller()


def slice_deadline() -> float:
    """The clock (`time.perf_counter`) reading after which inline work should yield."""
    loop = _get_running_loop()
    deadline = _DEADLINES.get(loop)
    if deadline is not None:
        return deadline
    if loop is None:  # driven by hand, outside any loop: nothing to share it with
        return _INF
    if len(_DEADLINES) > 16:  # loops closed in the middle of a slice
        for old in [lp for lp in _DEADLINES if lp.is_closed()]:
            del _DEADLINES[old]
        for old in [lp for lp in _SLICE_OF if lp.is_closed()]:
            del _SLICE_OF[old]
    _SLICE_OF[loop] = next(_SLICE_IDS)
    if _CALLER.on:  # ended by the caller, at its next step
        deadline = _DEADLINES[loop] = _clock() + CALLER_SLICE_S
        return deadline
    deadline = _DEADLINES[loop] = _clock() + SLICE_S
    loop.call_soon(_DEADLINES.pop, loop, None)
    return deadline


def new_slice() -> float:
    """Start a fresh slice (after yielding to the loop); its deadline."""
    _DEADLINES.pop(_get_running_loop(), None)
    return slice_deadline()


def slice_spent() -> bool:
    """Whether the running loop's current slice is over (time to yield before more)."""
    deadline = _DEADLINES.get(_get_running_loop())
    return deadline is not None and _clock() > deadline


def caller_drives(loop, on: bool) -> None:
    """A synchronous caller starts (True) or ends (False) driving a step of `loop`
    inline on this thread: its slices are CALLER_SLICE_S long, one per step (the
    step's slice starts here, so its drivers find the deadline set)."""
    _CALLER.on = on
    if on:
        _SLICE_OF[loop] = next(_SLICE_IDS)
        _DEADLINES[loop] = _clock() + CALLER_SLICE_S
    else:
        _DEADLINES.pop(loop, None)


class _YieldToLoop:
    """`await _YIELD_TO_LOOP`: a bare yield, i.e. one trip through the loop (what
    `asyncio.sleep(0)` does, without its coroutine)."""

    __slots__ = ()

    def __await__(self):
        yield


_YIELD_TO_LOOP = _YieldToLoop()
