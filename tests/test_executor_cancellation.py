"""A failed step's suspended kernels: each gets its cancellation once, and its cleanup
runs to its end even where it awaits (Python 3.11's wait_for does, as a withdrawal or a
lease given back may), within a bound (executor.CLEANUP_GRACE_S) after which a kernel
ignoring its cancellation is closed.  TestCleanupOp records what it saw."""

import asyncio
import gc
import time
import weakref

import numpy as np
import pytest
from _testing_ops import CLEANUPS, cleanup_op, fail_op, new_cleanup, settle, until

import asyncflow as af
from asyncflow import errors, executor
from asyncflow.ops.array_ops import constant

pytestmark = pytest.mark.usefixtures("graph")


@pytest.fixture
def cleanups():
    made = []

    def make(stubborn=False):
        c = new_cleanup(stubborn)
        made.append(c)
        return c

    yield make
    for c in made:
        CLEANUPS.pop(c.key, None)


def _drivers_left() -> list:
    """The executor's Tasks of parked kernels still pending on the running loop."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and isinstance(t.get_coro(), executor._DriverTask)
    ]


async def test_kernel_parked_in_the_failing_drive_finishes_its_awaiting_cleanup(cleanups):
    # The failing op runs in the same drive as the parked kernel, before the kernel's
    # Task first ran.  Before, the executor threw CancelledError into the kernel by hand
    # and, as its cleanup awaited, closed it: the kernel saw GeneratorExit mid-cleanup.
    c = cleanups()
    slow = cleanup_op(constant(1.0), c)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    async with af.Session() as s:
        t0 = time.monotonic()
        with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step") as ei:
            await s.arun([slow, bad])
        assert time.monotonic() - t0 < 10.0  # (not the kernel's 30 s wait_for)
        assert ei.value.op is bad.op
        await until(lambda: c.ended)
        assert c.seen == ["CancelledError"]
        assert (c.cleaned, c.closed, c.started) == (1, 0, 1)
        assert not _drivers_left()
        assert await s.arun(constant(3.0)) == 3.0


@pytest.mark.parametrize("taken", [True, False])
def test_kernel_parked_in_a_cond_branch_finishes_its_awaiting_cleanup(sess, cleanups, taken):
    # A plan with control flow (its drivers keep their iteration, `holder`): the same.
    c = cleanups()
    pred = af.placeholder(af.bool, [])
    x = constant(1.0)
    out = af.cond(pred, lambda: cleanup_op(x, c), lambda: x + 1.0)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step"):
        sess.run([out, bad], {pred: taken})
    if taken:
        assert c.wait_for(lambda c: c.ended)
        assert c.seen == ["CancelledError"]
        assert (c.cleaned, c.closed) == (1, 0)
    assert sess.run(out, {pred: False}) == 2.0


def test_kernel_parked_in_the_failing_drive_finishes_its_awaiting_cleanup_sync(sess, cleanups):
    c = cleanups()
    slow = cleanup_op(constant(1.0), c)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step"):
        sess.run([slow, bad])
    assert c.wait_for(lambda c: c.ended)
    assert c.seen == ["CancelledError"]
    assert (c.cleaned, c.closed) == (1, 0)
    assert sess.run(constant(3.0)) == 3.0


async def test_kernel_parked_before_a_later_failure_finishes_its_cleanup_once(cleanups, probes):
    # Its Task ran (the kernel waits in it) when the step fails: asyncio's Task
    # delivers the cancellation, once (the step's end, StepStatus.close, cancels only
    # what was not cancelled yet), and the cleanup's awaits complete.
    c = cleanups()
    trigger = probes.waiter("trigger")
    slow = cleanup_op(constant(1.0), c)
    bad = fail_op(constant(2.0), "invalid", waiter=trigger, name="fails_later")
    async with af.Session() as s:
        task = asyncio.create_task(s.arun([slow, bad]))
        await until(lambda: c.started)
        await trigger.started()
        await settle()
        trigger.release()
        with pytest.raises(errors.InvalidArgumentError, match="fails_later"):
            await task
        await until(lambda: c.ended)
        assert c.seen == ["CancelledError"]
        assert (c.cleaned, c.closed) == (1, 0)
        assert not _drivers_left()
        assert await s.arun(constant(3.0)) == 3.0


async def test_kernel_ignoring_its_cancellation_is_closed_after_the_grace(cleanups, monkeypatch):
    # The step fails at once (it does not wait for its kernels' cleanups); a kernel
    # still running CLEANUP_GRACE_S after its cancellation is closed (GeneratorExit),
    # so that its Task ends.
    monkeypatch.setattr(executor, "CLEANUP_GRACE_S", 0.5)
    c = cleanups(stubborn=True)
    slow = cleanup_op(constant(1.0), c)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    async with af.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step"):
            await s.arun([slow, bad])
        assert not c.closed  # (the failure did not wait for the grace)
        await until(lambda: c.ended)
        assert c.seen == ["CancelledError", "GeneratorExit"]  # (cancelled once, then closed)
        assert (c.cleaned, c.closed) == (0, 1)
        await settle()
        assert not _drivers_left()
        assert await s.arun(constant(3.0)) == 3.0


async def test_session_close_leaves_no_kernel_running(cleanups, monkeypatch):
    monkeypatch.setattr(executor, "CLEANUP_GRACE_S", 0.5)
    polite, stubborn = cleanups(), cleanups(stubborn=True)
    fetches = [cleanup_op(constant(1.0), polite), cleanup_op(constant(2.0), stubborn)]
    s = af.Session()
    await s.__aenter__()
    try:
        task = asyncio.create_task(s.arun(fetches))
        await until(lambda: polite.started and stubborn.started)
    finally:
        await s.__aexit__(None, None, None)  # (closes it)
    with pytest.raises(errors.CancelledError):
        await task
    await until(lambda: polite.ended and stubborn.ended)
    assert polite.seen == ["CancelledError"] and polite.cleaned == 1
    assert stubborn.seen == ["CancelledError", "GeneratorExit"] and stubborn.closed == 1
    await settle()
    assert not _drivers_left()


async def test_a_failed_step_is_released_once_its_cleanups_end(cleanups):
    # The grace's timer goes with the last cleanup: it held the step's Tasks, and kept
    # the cancelled timers behind it in the loop's heap (wait_for's here), whose
    # Contexts hold the StepContext, its error, and through the error's frames the step
    # and its feeds.
    c = cleanups()
    x = af.placeholder(af.float64, [None])
    slow = cleanup_op(x, c)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    big = np.ones(1 << 16)
    gone = weakref.ref(big)
    async with af.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step"):
            await s.arun([slow, bad], {x: big})
        del big
        await until(lambda: c.ended)
        await settle()
        gc.collect()
        assert gone() is None
