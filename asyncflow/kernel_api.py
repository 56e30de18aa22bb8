"""The kernel API: everything of the runtime a kernel (ops/) may use.

Ops import this module and nothing else of the runtime: the step a kernel runs in
(`current_step()`: step id, rendezvous, undo-on-failure hooks), its `KernelContext`
(attrs, device, array module, resource manager), the value of a dead tensor (`DEAD`),
whether an input buffer may be written into (`ctx.may_forward`), the per-step error state
(`QUIET_STEP`), and how kernel exceptions become OpErrors.

Invariant: nothing here imports the interpreter, the compiler or the client, so every
layer above can import it without a cycle.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import itertools
import types
import weakref
from collections.abc import Callable

import numpy as np

from asyncflow import errors, resources
from asyncflow.devices import cpu_budget, host_pool
from asyncflow.devices.base import NOT_INLINE
from asyncflow.graph import Operation

__all__ = [
    "DEAD",
    "KernelContext",
    "NOT_INLINE",
    "QUIET_STEP",
    "StepContext",
    "current_step",
    "end_quiet_step",
    "in_parked_task",
    "in_quiet_step",
    "keeps_pass_resource",
    "kernel_resource",
    "note_task",
    "plain_context",
    "parked_task",
    "parks",
    "PASS_RESOURCE_OPS",
    "pass_resource_state",
    "pass_state",
    "random_state",
    "with_pass_random",
    "quiet_step",
    "template",
    "wrap_kernel_error",
]


class _Dead:
    """The value of a dead tensor (never seen by kernels or users)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dead>"


DEAD = _Dead()


# Inline forms.  A kernel that never suspends for some calls may carry
# `kernel.inline(ctx) -> fn | None`: `fn(*inputs)`, a plain function bound to that
# node's context once, returns what `await kernel(ctx, *inputs)` would, or NOT_INLINE
# for a call it leaves to the kernel (inputs it does not handle, work the device would
# not run inline now).  It raises only what the kernel would.  A straight-line step
# (asyncflow.straight_line) calls it instead of driving the kernel's coroutine: for a
# served one-row predict the coroutines and `compute`'s layers cost more than the
# arithmetic.
# (NOT_INLINE itself lives with the Device protocol: devices answer it too.)
#
# Direct forms.  Such a kernel may also carry `kernel.direct(ctx, avals) -> (fn, call,
# out_avals) | None`, asked once per signature of a straight-line step: `avals` gives
# each input as `(shape, dtype)` of a NumPy array (None: anything else).  For inputs of
# exactly those shapes and dtypes, `fn(*inputs)` returns what the kernel would, by the
# one call `call[0](*args)` that its inline form would hand the device's `run_inline`
# (`call[1]`: template arrays of the args' shapes and dtypes, `template` below, for the
# device's `kind_key`), and `out_avals` is its result's `[(shape, dtype)]`.  The step
# asks the device once whether all those kinds are settled cheap (`settled_seconds`)
# and then calls the `fn`s back to back (asyncflow.straight_line: the direct form).
# None: not for these inputs (or not on this device).  `fn` returns a new array, never
# an input or a view of one: the form may hand it a variable's buffer pinned, not lent
# (ops.state_ops `VarRef.pin`), which must not outlive the step.


def template(shape, dtype) -> np.ndarray:
    """An array of `shape` and `dtype` that holds no memory of its size (a broadcast
    scalar): for a kind's key, never read."""
    return np.broadcast_to(np.empty((), dtype), shape)


# True while a synchronous `Session.run` drives its step inside one
# `np.errstate(all="ignore")` (TF yields inf/nan silently): kernels need not enter their
# own then (`math_helpers._quiet`; an errstate costs ~3 us, ~8 us with the caches cold
# after a gemm).  A ContextVar, like NumPy's error state, so tasks outside see neither.
QUIET_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar("QUIET_STEP", default=False)


class quiet_step:
    """`with quiet_step():` runs what is inside (a step's kernels) in one
    `np.errstate(all="ignore")`.

    Entered and left in one context: around a whole coroutine run by one Task, or
    around a direct `send` into a step (never across a hop to another Task).  A class,
    not a generator: contextlib's generator machinery cost more than the errstate
    (~1.3 us of a ~13 us trivial step).  `end_quiet_step` is its exit, for callers
    that inline it."""

    __slots__ = ("_token", "_errstate")

    def __enter__(self) -> None:
        if QUIET_STEP.get():
            self._token = None
            return
        self._errstate = errstate = np.errstate(all="ignore")
        errstate.__enter__()
        self._token = QUIET_STEP.set(True)

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            end_quiet_step(self._token, self._errstate)


def end_quiet_step(token, errstate) -> None:
    """Leave a quiet step entered by hand: `errstate = np.errstate(all="ignore")`,
    `errstate.__enter__()`, `token = QUIET_STEP.set(True)` (in that order)."""
    try:
        QUIET_STEP.reset(token)
        errstate.__exit__(None, None, None)
    finally:
        cpu_budget.restore_blas()  # the program's NumPy between steps: its own BLAS threads


async def in_quiet_step(coro):
    """`await coro` inside `quiet_step` (for a coroutine that becomes its own Task)."""
    with quiet_step():
        return await coro


# Tasks a kernel starts ahead of demand (tf.data's prefetch producer, a parallel map's
# calls), and every Task started inside one (a nested step's drivers), may wait,
# suspended, between two synchronous `Session.run`s.  A blocked synchronous caller
# drives its steps inline; any other Task still pending after a step moves the loop to
# a thread of its own for good (the session's `_Runtime`), and every later step then
# costs a hand-off to that thread and back (~3 context switches, each a wait for a core
# on a busy machine).  A parked Task loses nothing: the steps that consume its results
# run it whenever they wait on it.
_PARKABLE: weakref.WeakSet[asyncio.Task] = weakref.WeakSet()
_PARKED: contextvars.ContextVar[bool] = contextvars.ContextVar("_PARKED", default=False)
_STARTED_PARKED: weakref.WeakSet[asyncio.Task] = weakref.WeakSet()  # by parked_task itself


def parked_task(coro) -> asyncio.Task:
    """`asyncio.ensure_future(coro)`, a Task that may sit suspended between synchronous
    steps instead of needing the loop to run meanwhile (see `_PARKABLE`); so may the
    Tasks it starts."""
    ctx = contextvars.copy_context()
    ctx.run(_PARKED.set, True)
    task = asyncio.get_running_loop().create_task(coro, context=ctx)
    _PARKABLE.add(task)
    _STARTED_PARKED.add(task)
    return task


def start_parked(coro, resume) -> asyncio.Future:
    """`parked_task(coro)` whose first slice runs now, on the caller's stack, up to its
    first wait (what the Task's first step would do at the next turn of the loop, which
    a synchronous caller would have to run the loop for); a parked Task then takes over
    with `resume(coro, first)`, `first` the future it waits on.  A coroutine that ends
    or fails in that slice gives a done future."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    ctx.run(_PARKED.set, True)
    try:
        first = ctx.run(coro.send, None)
    except StopIteration as stop:
        done = loop.create_future()
        done.set_result(stop.value)
        return done
    except Exception as exc:  # noqa: BLE001 - the step's error, delivered as a Task's
        done = loop.create_future()
        done.set_exception(exc)
        return done
    task = loop.create_task(resume(coro, first), context=ctx)
    _PARKABLE.add(task)
    return task


def in_parked_task() -> bool:
    """Whether the running Task was started by `parked_task`: its coroutine is awaited
    in it, in its one Context, from start to end (no interpreter resumes it elsewhere)."""
    task = asyncio.current_task()
    return task is not None and task in _STARTED_PARKED


def note_task(task: asyncio.Task) -> None:
    """Called by a loop's task factory as `task` is made: a Task started from inside a
    parked one is parked too."""
    if _PARKED.get():
        _PARKABLE.add(task)


def parks(task: asyncio.Task) -> bool:
    """Whether `task` may wait between synchronous steps (see `_PARKABLE`)."""
    return task in _PARKABLE


_STEP_SERIALS = itertools.count(1)


class StepContext:
    """Per-step state a kernel may need: step id, rendezvous, undo-on-failure hooks.

    Kernels reach it with `current_step()` (a context variable set while the step's
    drivers run; Tasks created for suspended kernels inherit it).
    """

    __slots__ = (
        "step_id",
        "serial",
        "rendezvous",
        "_on_failure",
        "failed",
        "error",
        "temporaries",
    )

    def __init__(self, step_id: int, rendezvous=None):
        self.step_id = step_id
        # TF's per-step resource container: the TemporaryVariables of this step by
        # var_name (None until the first); they end with the step.
        self.temporaries: dict | None = None
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
        elements a Dequeue would put back), which only a failure would have run, and
        the step's temporary variables."""
        self._on_failure = None
        self.temporaries = None

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


# What makes the rendezvous of a step that has none when a kernel first needs one (a
# step of one partition pairing tf.raw_ops.Send / Recv): the runtime's LocalRendezvous,
# installed by asyncflow/rendezvous.py (a layer above this one).
LOCAL_RENDEZVOUS: list[Callable[[], object]] = []


def step_rendezvous(step: StepContext):
    """`step`'s rendezvous, a local one made on first use where it has none (a failing
    step aborts it as any other: the step status reads `step.rendezvous` then)."""
    if step.rendezvous is None:
        step.rendezvous = LOCAL_RENDEZVOUS[0]()
    return step.rendezvous


def current_step() -> StepContext | None:
    """The StepContext of the step whose kernel is running (None outside a step)."""
    return _CURRENT_STEP.get()


# The per-pass kernel states (`pass_state`) of the dataset pass (or `reduce` run)
# whose function is running: {op: state}, set by `with_pass_random` while it drives
# a function's call (and inherited by the Tasks the call starts); None outside
# dataset functions.
_PASS_RANDOM: contextvars.ContextVar = contextvars.ContextVar("pass_random", default=None)


@types.coroutine
def with_pass_random(aw, states: dict):
    """Awaits `aw` (a dataset function's call) with `states` as its kernels' per-pass
    states (`pass_state`).  Set and reset around each of its stretches rather than across
    the whole await: the awaiting coroutine may be started outside a Task and resumed
    in one (session.py `_Continue`), in another context."""
    it = aw if type(aw) is types.CoroutineType else aw.__await__()
    send = it.send
    value, exc = None, None
    while True:
        token = _PASS_RANDOM.set(states)
        try:
            if exc is None:
                y = send(value)
            else:
                y = it.throw(exc)
        except StopIteration as stop:
            return stop.value
        finally:
            _PASS_RANDOM.reset(token)
        try:
            value, exc = (yield y), None
        except GeneratorExit:
            it.close()
            raise
        except BaseException as e:  # (cancellation goes into the call)
            value, exc = None, e


def pass_state(ctx: KernelContext) -> dict:
    """Where a kernel keeps the state that changes what it outputs or prints (a
    stateful random op's generator, a learned candidate sampler's weights, Print's
    `first_n` count, RecordInput's reader, an unshared resource: `kernel_resource`):
    for the session (`ctx.kernel_state`), or
    inside a dataset function for the dataset's pass, as TF instantiates a function's
    kernels anew for each iterator (and each run of `Dataset.reduce`), so a seeded op
    there starts its sequence again with each.  An op keeping such state must be
    counted in data/calls.py `_per_pass`."""
    states = _PASS_RANDOM.get()
    if states is None:
        return ctx.kernel_state
    st = states.get(ctx.op)
    if st is None:
        st = states[ctx.op] = {}
    return st


# The random ops' name for it.
random_state = pass_state


# Op types making a resource that, made with no shared name (nor, for a table,
# `use_node_name_sharing`), belongs to its kernel, as TF's ResourceOpKernel and lookup
# table kernels keep it: made inside a dataset function (an op `_in_dataset_function`:
# traced, data/dataset.py; imported from a GraphDef's FunctionDef, graph_io; sent to a
# task, distributed/graph_codec), it lasts the pass, as the kernel of TF's function
# does.  Each op family adds its types.
PASS_RESOURCE_OPS: set[str] = set()


def keeps_pass_resource(op: Operation) -> bool:
    """Whether `op` makes a resource of its own for each dataset pass (`kernel_resource`);
    counted by data/calls.py `_per_pass`."""
    if op.type not in PASS_RESOURCE_OPS or not getattr(op, "_in_dataset_function", False):
        return False
    a = op._attrs
    return not a.get("shared_name") and not a.get("use_node_name_sharing")


def pass_resource_state(ctx: KernelContext) -> dict | None:
    """The pass's state of a kernel whose resource lasts the pass (`keeps_pass_resource`,
    inside a dataset function's call): it keeps the resource as "resource"; None
    elsewhere."""
    if _PASS_RANDOM.get() is None or not keeps_pass_resource(ctx.op):
        return None
    return pass_state(ctx)


def kernel_resource(ctx: KernelContext, container: str, name: str, make: Callable[[], object]):
    """The resource of a resource-making kernel: `(container, name)` of the session's
    (or the process's) manager, made by `make` where missing; but inside a dataset
    function, one with no shared name is the pass's (`pass_resource_state`), made anew
    with each pass as TF's kernel."""
    st = pass_resource_state(ctx)
    if st is None:
        return ctx.resource_mgr(container).lookup_or_create(container, name, make)
    r = st.get("resource")
    if r is None:
        r = st["resource"] = make()
    return r


class KernelContext:
    """What a kernel sees besides its inputs; one per (session, node), reused by steps."""

    __slots__ = (
        "op",
        "attrs",
        "device",
        "xp",
        "kernel_state",
        "session",
        "node_name",
        "forward",
        "fresh",
        "est_seconds",
    )

    def __init__(self, op: Operation, device, session, kernel_state: dict):
        self.op = op
        self.attrs = op._attrs
        self.device = device
        self.xp = device.xp
        self.kernel_state = kernel_state
        self.session = session
        self.node_name = op.name
        # Set when the plan is lowered (donation.decide): the input positions whose
        # buffer this kernel may take over, and whether a consumer may take over ours.
        self.forward: frozenset[int] = frozenset()
        self.fresh = False
        # Set when the plan is lowered, where the device estimates a node's time from
        # its op type and static shapes (devices/cpu.py plan_seconds): `compute` then
        # runs this node's work inline or on a worker by that estimate.
        self.est_seconds: float | None = None

    def compute(self, fn, *args, cost: float | None = None):
        """`self.device.compute(fn, *args)` (an awaitable), where this node's work runs
        decided by the plan's estimate when it made one."""
        seconds = self.est_seconds
        if seconds is None:
            return self.device.compute(fn, *args, cost=cost)
        return self.device.compute(fn, *args, cost=cost, seconds=seconds)

    def may_forward(self, k: int, x) -> bool:
        """May the kernel write its output into input `k`, the array `x` (TF's
        forward_input)?  The plan decided from the graph that nothing else sees that
        input (donation.decide); `x` must also be a writable NumPy array that owns its
        memory (NumPy's or devices/host_pool's: not a view, nor a constant's or a
        variable's read-only buffer)."""
        return (
            k in self.forward
            and type(x) is np.ndarray
            and host_pool.owns_memory(x)
            and x.flags.writeable
        )

    def resource_mgr(self, container: str = ""):
        """Where this kernel's resources live: its device's manager for the default
        container, the process-wide one for a named container (`Session.reset`)."""
        return self.device.resource_mgr if not container else resources.shared_resources()


def wrap_kernel_error(op, exc: BaseException) -> errors.OpError:
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


def plain_context(ctx):
    """`ctx` for calling a plain kernel from a fused one: it must not take over an
    input (this node's donation decisions are about its own inputs, not about the
    plain kernel's operands)."""
    plain = ctx.kernel_state.get("plain_ctx")
    if plain is None:
        plain = ctx.kernel_state["plain_ctx"] = copy.copy(ctx)
        plain.forward = frozenset()
    return plain
