"""Concurrent steps, loop binding, deadlines, cancellation and close().

DESIGN.md "Event loop and sessions": a session is bound to one loop; `arun` on it runs
in the caller's task, `arun` from another loop and `run` from other threads are bridged,
and `run` on the bound loop's thread is an error that says to use `arun`.
"""

import asyncio
import threading

import numpy as np
import pytest
from _testing_ops import settle, wait_op

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.array_ops import constant, identity, placeholder
from asyncflow.session import runtime_loop

pytestmark = pytest.mark.usefixtures("graph")

DEADLINE = af.RunOptions(timeout_in_ms=50)


def _counter_graph():
    """A variable v and an op adding 1 to it (state from asyncflow.variables)."""
    from asyncflow.ops.state_ops import assign_add
    from asyncflow.variables import Variable

    v = Variable(0, dtype=af.int64, name="v")
    inc = assign_add(v, constant(1, dtype=af.int64))
    return v, inc


def _in_threads(n, fn):
    """Run fn(i) in n threads started together; return results, re-raise the first error."""
    barrier = threading.Barrier(n)
    results, failures = [None] * n, []

    def body(i):
        try:
            barrier.wait(timeout=10)
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            failures.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a thread never finished its steps"
    if failures:
        raise failures[0]
    return results


# -- arun on the running loop ------------------------------------------------------------


async def test_arun_on_running_loop(graph):
    x = placeholder(af.float32, [2])
    y = identity(x)
    async with af.Session() as s:
        out = await s.arun({"y": y}, {x: [1.0, 2.0]})
        np.testing.assert_array_equal(out["y"], [1.0, 2.0])
        assert await s.arun(constant(3.0)) == 3.0
        assert s._loop is asyncio.get_running_loop()


async def test_arun_binds_plain_session_to_running_loop(graph):
    s = af.Session()
    try:
        assert await s.arun(constant(1.0)) == 1.0
        assert s._loop is asyncio.get_running_loop()
    finally:
        s.close()


async def test_1000_concurrent_arun_assign_add_exact(graph):
    v, inc = _counter_graph()
    async with af.Session() as s:
        await s.arun(v.initializer)
        await asyncio.gather(*(s.arun(inc.op) for _ in range(1000)))
        assert await s.arun(v) == 1000
        assert len(s._plans) <= 3  # initializer, increment, read: one plan each


async def test_concurrent_arun_steps_are_independent(graph, probes):
    w = probes.waiter()
    x = placeholder(af.float32, [])
    y = wait_op(identity(x), w)
    async with af.Session() as s:
        tasks = [asyncio.create_task(s.arun(y, {x: float(i)})) for i in range(20)]
        await w.started(20)  # twenty steps of one plan, all parked at once
        await settle()
        assert not any(t.done() for t in tasks)
        assert await s.arun(identity(constant(2.0))) == 2.0  # others still run
        w.release()
        assert await asyncio.gather(*tasks) == [float(i) for i in range(20)]
        assert len(s._plans) == 2


# -- threads on a synchronous session ----------------------------------------------------


def test_threads_run_assign_add_exact(sess):
    v, inc = _counter_graph()
    sess.run(v.initializer)

    def work(i):
        for _ in range(100):
            sess.run(inc.op)

    _in_threads(8, work)
    assert sess.run(v) == 800


def test_threads_pure_compute(sess):
    x = placeholder(af.float64, [None], name="x")
    y = x
    for _ in range(20):
        y = identity(y)

    def work(i):
        for k in range(50):
            value = np.full(3, i * 1000 + k, dtype=np.float64)
            out = sess.run({"y": y, "x": x}, {x: value})
            np.testing.assert_array_equal(out["y"], value)
            np.testing.assert_array_equal(out["x"], value)
        return i

    assert _in_threads(8, work) == list(range(8))
    assert len(sess._plans) == 1


def test_threads_steps_run_concurrently(sess, probes):
    """Eight sync run() calls are all in flight at once (none waits for another)."""
    w = probes.waiter()
    x = placeholder(af.int32, [])
    y = wait_op(x, w)
    gate = threading.Thread(target=lambda: w.wait_started(8) and w.release())
    gate.start()
    try:
        assert _in_threads(8, lambda i: sess.run(y, {x: i})) == list(range(8))
    finally:
        w.release()
        gate.join(timeout=10)
    assert w.suspended >= 1


# -- loop binding ------------------------------------------------------------------------


async def test_run_on_bound_loop_thread_mentions_arun(graph):
    c = constant(1.0)
    async with af.Session() as s:
        with pytest.raises(RuntimeError, match="arun"):
            s.run(c)
        assert await s.arun(c) == 1.0  # and the session still works
    s2 = af.Session()
    try:
        await s2.arun(c)
        with pytest.raises(RuntimeError, match="arun"):
            s2.run(c)
    finally:
        s2.close()


def test_run_on_runtime_loop_thread_raises_instead_of_deadlocking(sess):
    c = constant(1.0)
    assert sess.run(c) == 1.0  # bound to the runtime loop

    async def from_the_loop():
        return sess.run(c)

    cf = asyncio.run_coroutine_threadsafe(from_the_loop(), runtime_loop())
    with pytest.raises(RuntimeError, match="arun"):
        cf.result(timeout=10)
    assert sess.run(c) == 1.0


async def test_arun_from_another_loop_is_bridged(sess, probes):
    c = constant(4.0)
    assert sess.run(c) == 4.0  # bound to the runtime loop, not to pytest's
    assert sess._loop is not asyncio.get_running_loop()
    assert await sess.arun(c) == 4.0
    w = probes.waiter()
    y = wait_op(identity(c), w)
    task = asyncio.create_task(sess.arun(y))
    await w.started()
    await settle()
    assert not task.done()  # pytest's loop is free while the runtime loop waits
    w.release()
    assert await task == 4.0


def test_arun_from_a_second_private_loop(graph):
    c = constant(2.0)

    async def use(s):
        return await s.arun(c)

    s = af.Session()
    try:
        assert s.run(c) == 2.0
        assert asyncio.run(use(s)) == 2.0
        assert asyncio.run(use(s)) == 2.0  # a second, different loop
    finally:
        s.close()


# -- deadlines -------------------------------------------------------------------------


async def test_arun_timeout_deadline_exceeded(graph, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    async with af.Session() as s:
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(y, options=DEADLINE)
        await w.ended()
        assert w.cancelled == 1  # the parked kernel was cancelled, not leaked
        assert await s.arun(constant(5.0)) == 5.0
        w.release()
        assert await s.arun(y, options=DEADLINE) == 1.0  # same plan, now released


def test_sync_run_timeout_deadline_exceeded(sess, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    with pytest.raises(errors.DeadlineExceededError, match="timeout"):
        sess.run(y, options=DEADLINE)
    assert w.wait_finished()
    assert w.cancelled == 1
    assert sess.run(constant(5.0)) == 5.0
    w.release()
    assert sess.run(y, options=DEADLINE) == 1.0


def test_config_operation_timeout(graph, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    with af.Session(config=af.ConfigProto(operation_timeout_in_ms=50)) as s:
        with pytest.raises(errors.DeadlineExceededError):
            s.run(y)
        assert s.run(constant(1.0)) == 1.0


# -- cancellation ------------------------------------------------------------------------


async def test_cancelling_arun_cancels_the_step(graph, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    async with af.Session() as s:
        task = asyncio.create_task(s.arun(y))
        await w.started()
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await w.ended()
        assert w.cancelled == 1
        assert not s._steps
        assert await s.arun(constant(2.0)) == 2.0


async def test_cancelling_bridged_arun_cancels_the_remote_step(sess, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    assert sess.run(constant(0.0)) == 0.0  # bound to the runtime loop
    task = asyncio.create_task(sess.arun(y))
    await w.started()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await w.ended()
    assert w.cancelled == 1
    assert sess.run(constant(2.0)) == 2.0


async def test_close_while_arun_waits_raises_tf_cancelled(graph, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    s = af.Session()
    task = asyncio.create_task(s.arun(y))
    await w.started()
    await settle()
    s.close()
    with pytest.raises(errors.CancelledError):  # TF's, not asyncio's
        await task
    await w.ended()
    assert w.cancelled == 1
    with pytest.raises(RuntimeError):
        await s.arun(y)


def test_close_while_sync_run_waits_raises_tf_cancelled(graph, probes):
    w = probes.waiter()
    y = wait_op(constant(1.0), w)
    s = af.Session()
    outcome = []

    def runner():
        try:
            outcome.append(s.run(y))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)

    t = threading.Thread(target=runner)
    t.start()
    assert w.wait_started()
    s.close()
    t.join(timeout=10)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.CancelledError)
    assert not isinstance(outcome[0], asyncio.CancelledError)
    assert w.wait_finished()
