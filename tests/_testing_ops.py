"""Test-only ops for the session/executor tests: kernels that wait, fail, count or probe.

Every op here is registered once, at import (conftest imports this module), and has a
shape function and a CPU kernel like any real op.  Waiters are keyed by a string attr so
that a graph built in the test thread can be released from any thread: a kernel running
on the session's runtime loop and a test awaiting on pytest's loop see the same object.

Nothing here sleeps: tests wait for `Waiter.wait_started()` (a threading.Condition) and
release kernels with `Waiter.release()`, which is safe from any thread or loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import weakref

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, REQUIRED, NotDifferentiable, register_op

_keys = itertools.count()


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def settle(rounds: int = 20) -> None:
    """Let the running loop reach quiescence (only to check something is *still* waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def until(predicate) -> None:
    """Until `predicate()` holds (something has started waiting); bound it with the
    test's timeout.  Loop turns are not enough where a step's inputs come from a GPU:
    their copies finish on a stream's thread, which tells the loop by a callback."""
    turns = 0
    while not predicate():
        turns += 1
        await asyncio.sleep(0 if turns < 20 else 0.001)


# -- waiters ----------------------------------------------------------------------------


class Waiter:
    """A gate that TestWaitOp kernels wait on; counts starts, suspensions and cancels."""

    def __init__(self, key: str):
        self.key = key
        self.calls = 0  # kernels that started
        self.suspended = 0  # kernels that actually awaited the gate
        self.cancelled = 0  # kernels that observed asyncio.CancelledError
        self.finished = 0  # kernels that ended, however
        self._cond = threading.Condition()
        self._released = False
        self._futs: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    def release(self) -> None:
        """Open the gate (idempotent; any thread)."""
        with self._cond:
            self._released = True
            futs, self._futs = self._futs, []
        here = _running_loop()
        for loop, fut in futs:
            if loop is here:
                _resolve(fut)
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # loop closed meanwhile
                    loop.call_soon_threadsafe(_resolve, fut)

    def wait_started(self, n: int = 1, timeout: float = 10.0) -> bool:
        """Block (a test thread) until n kernels are waiting at or have passed the gate."""
        with self._cond:
            return self._cond.wait_for(lambda: self.calls >= n, timeout)

    def wait_finished(self, n: int = 1, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.finished >= n, timeout)

    async def started(self, n: int = 1) -> None:
        """`wait_started` for async tests: the loop keeps running meanwhile."""
        assert await asyncio.to_thread(self.wait_started, n), f"waiter {self.key} never started"

    async def ended(self, n: int = 1) -> None:
        assert await asyncio.to_thread(self.wait_finished, n), f"waiter {self.key} never ended"

    async def gate(self) -> None:
        """The kernel side: wait until released."""
        loop = asyncio.get_running_loop()
        with self._cond:
            self.calls += 1
            fut = None
            if not self._released:
                fut = loop.create_future()
                self._futs.append((loop, fut))
                self.suspended += 1
            self._cond.notify_all()
        try:
            if fut is not None:
                await fut
        except asyncio.CancelledError:
            with self._cond:
                self.cancelled += 1
            raise
        finally:
            with self._cond:
                self.finished += 1
                self._cond.notify_all()


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


WAITERS: dict[str, Waiter] = {}


def new_waiter(name: str = "w") -> Waiter:
    w = Waiter(f"{name}-{next(_keys)}")
    WAITERS[w.key] = w
    return w


class Counter:
    """Counts how many times TestCountOp kernels with its key ran."""

    def __init__(self, key: str):
        self.key = key
        self.n = 0


COUNTERS: dict[str, Counter] = {}


def new_counter(name: str = "c") -> Counter:
    c = Counter(f"{name}-{next(_keys)}")
    COUNTERS[c.key] = c
    return c


REFS: dict[str, weakref.ref] = {}


def _same_shape(op):
    return [op.inputs[0].shape]


def _scalar(op):
    return [tensor_shape.TensorShape([])]


# -- TestWaitOp: y = x, once the waiter `key` is released --------------------------------

TestWaitOp = register_op(
    "TestWaitOp",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "key": REQUIRED, "timeout_s": 0.0},
    shape_fn=_same_shape,
    stateful=True,
    is_async=True,
)


@TestWaitOp.kernel("CPU")
async def _test_wait(ctx, x):
    w = WAITERS[ctx.attrs["key"]]
    timeout = ctx.attrs["timeout_s"]
    if not timeout:
        await w.gate()
        return x
    try:
        # wait_for, not asyncio.timeout(): a kernel starts inline in the task awaiting
        # the step, so a timeout context there would cancel the caller (KERNELS.md).
        await asyncio.wait_for(w.gate(), timeout)
    except TimeoutError:
        raise errors.DeadlineExceededError(None, None, "TestWaitOp timed out") from None
    return x


def wait_op(x, waiter: Waiter, timeout_s: float = 0.0, name=None):
    op = ops.apply_op(
        "TestWaitOp", [x], {"key": waiter.key, "timeout_s": float(timeout_s)}, name=name
    )
    return op.outputs[0]


# -- TestReleaseOp: y = x, and opens the waiter `key` ------------------------------------

TestReleaseOp = register_op(
    "TestReleaseOp",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "key": REQUIRED},
    shape_fn=_same_shape,
    stateful=True,
)


@TestReleaseOp.kernel("CPU")
async def _test_release(ctx, x):
    WAITERS[ctx.attrs["key"]].release()
    return x


def release_op(x, waiter: Waiter, name=None):
    return ops.apply_op("TestReleaseOp", [x], {"key": waiter.key}, name=name).outputs[0]


# -- TestFailOp: raises the error `kind` names (after waiting on `wait_key`, if set) ------

_FAILURES = {
    "value": lambda: ValueError("boom from TestFailOp"),
    "memory": lambda: MemoryError("test allocation failed"),
    "invalid": lambda: errors.InvalidArgumentError(None, None, "bad argument from TestFailOp"),
    "not_found": lambda: errors.NotFoundError(None, None, "nothing here"),
    "cancelled": lambda: asyncio.CancelledError(),
}

TestFailOp = register_op(
    "TestFailOp",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "kind": "value", "wait_key": ""},
    shape_fn=_same_shape,
    stateful=True,
)


@TestFailOp.kernel("CPU")
async def _test_fail(ctx, x):
    if ctx.attrs["wait_key"]:
        await WAITERS[ctx.attrs["wait_key"]].gate()
    raise _FAILURES[ctx.attrs["kind"]]()


def fail_op(x, kind: str = "value", waiter: Waiter | None = None, name=None):
    attrs = {"kind": kind, "wait_key": waiter.key if waiter is not None else ""}
    return ops.apply_op("TestFailOp", [x], attrs, name=name).outputs[0]


# -- TestCountOp: y = x, counting runs ----------------------------------------------------

TestCountOp = register_op(
    "TestCountOp",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "key": REQUIRED},
    shape_fn=_same_shape,
    stateful=True,
)


@TestCountOp.kernel("CPU")
async def _test_count(ctx, x):
    COUNTERS[ctx.attrs["key"]].n += 1
    return x


def count_op(x, counter: Counter, name=None):
    return ops.apply_op("TestCountOp", [x], {"key": counter.key}, name=name).outputs[0]


# -- lifetime probes: a big array, something consuming it, a check that it is gone --------

TestMakeBigOp = register_op(
    "TestMakeBigOp",
    outputs=["y: float64"],
    attrs={"key": REQUIRED, "n": REQUIRED},
    shape_fn=lambda op: [tensor_shape.TensorShape([op.get_attr("n")])],
    stateful=True,
)


@TestMakeBigOp.kernel("CPU")
async def _test_make_big(ctx):
    big = np.ones(ctx.attrs["n"], dtype=np.float64)
    REFS[ctx.attrs["key"]] = weakref.ref(big)
    return big


def make_big(key: str, n: int = 1 << 16, name=None):
    return ops.apply_op("TestMakeBigOp", [], {"key": key, "n": n}, name=name).outputs[0]


TestSizeOp = register_op(
    "TestSizeOp",
    inputs=["x: T"],
    outputs=["size: int64"],
    attrs={"T": ANY},
    shape_fn=_scalar,
)


@TestSizeOp.kernel("CPU")
async def _test_size(ctx, x):
    return np.int64(np.size(x))


def size_op(x, name=None):
    return ops.apply_op("TestSizeOp", [x], name=name).outputs[0]


TestIsFreedOp = register_op(
    "TestIsFreedOp",
    inputs=["x: T"],
    outputs=["freed: bool"],
    attrs={"T": ANY, "key": REQUIRED},
    shape_fn=_scalar,
    stateful=True,
)


@TestIsFreedOp.kernel("CPU")
async def _test_is_freed(ctx, x):
    return np.bool_(REFS[ctx.attrs["key"]]() is None)


TestIsFreedNowOp = register_op(
    "TestIsFreedNowOp",
    outputs=["freed: bool"],
    attrs={"key": REQUIRED},
    shape_fn=_scalar,
    stateful=True,
)


@TestIsFreedNowOp.kernel("CPU")
async def _test_is_freed_now(ctx):
    return np.bool_(REFS[ctx.attrs["key"]]() is None)


def is_freed(x, key: str, name=None):
    """True when the array TestMakeBigOp(key) made is unreferenced when this op runs.

    With `x=None` the op has no inputs; order it with control dependencies.
    """
    if x is None:
        return ops.apply_op("TestIsFreedNowOp", [], {"key": key}, name=name).outputs[0]
    return ops.apply_op("TestIsFreedOp", [x], {"key": key}, name=name).outputs[0]


# -- TestCleanupOp: y = x after a wait; a cancellation cleanup that itself awaits --------


class Cleanup:
    """What TestCleanupOp kernels with its key saw: the exceptions thrown into them
    (by name, in order), cleanups finished, and kernels closed while they cleaned up."""

    def __init__(self, key: str, stubborn: bool):
        self.key = key
        self.stubborn = stubborn  # ignores its cancellation: waits on, forever
        self.started = 0
        self.seen: list[str] = []
        self.cleaned = 0
        self.closed = 0
        self.ended = 0
        self._cond = threading.Condition()

    def note(self, field: str) -> None:
        """One more of `field` (started, cleaned, closed, ended)."""
        with self._cond:
            setattr(self, field, getattr(self, field) + 1)
            self._cond.notify_all()

    def saw(self, exc: BaseException) -> None:
        with self._cond:
            self.seen.append(type(exc).__name__)
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 10.0) -> bool:
        """Block (a test thread) until `predicate(self)` holds."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)


CLEANUPS: dict[str, Cleanup] = {}


def new_cleanup(stubborn: bool = False) -> Cleanup:
    c = Cleanup(f"cleanup-{next(_keys)}", stubborn)
    CLEANUPS[c.key] = c
    return c


TestCleanupOp = register_op(
    "TestCleanupOp",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "key": REQUIRED},
    shape_fn=_same_shape,
    stateful=True,
    is_async=True,
)


@TestCleanupOp.kernel("CPU")
async def _test_cleanup(ctx, x):
    c = CLEANUPS[ctx.attrs["key"]]
    fut = asyncio.get_running_loop().create_future()  # (nobody resolves it)
    c.note("started")
    try:
        # Python 3.11's wait_for, thrown a cancellation, cancels `fut` and waits for it
        # once more before it raises: a cleanup that awaits.
        await asyncio.wait_for(fut, 30.0)
    except BaseException as e:
        c.saw(e)
        if not isinstance(e, asyncio.CancelledError):
            raise
        try:
            if c.stubborn:
                while True:
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError as again:
                        c.saw(again)
            for _ in range(3):  # (a withdrawal, a lease given back, each a loop turn)
                await asyncio.sleep(0)
            c.note("cleaned")
        except BaseException as e2:
            c.saw(e2)
            if isinstance(e2, GeneratorExit):
                c.note("closed")
            raise
        raise
    finally:
        c.note("ended")
    return x


def cleanup_op(x, cleanup: Cleanup, name=None):
    return ops.apply_op("TestCleanupOp", [x], {"key": cleanup.key}, name=name).outputs[0]


for _op_type in (
    "TestWaitOp",
    "TestReleaseOp",
    "TestFailOp",
    "TestCountOp",
    "TestMakeBigOp",
    "TestSizeOp",
    "TestIsFreedOp",
    "TestIsFreedNowOp",
    "TestCleanupOp",
):
    NotDifferentiable(_op_type)
