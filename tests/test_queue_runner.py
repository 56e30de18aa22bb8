"""QueueRunner (tasks on the session's loop), Coordinator, and the unstarted-runner error."""

import asyncio
import threading

import numpy as np
import pytest
from _testing_ops import fail_op, settle

import asyncflow as af
from asyncflow import errors, queues
from asyncflow.ops.array_ops import constant
from asyncflow.ops.queue_ops import FIFOQueue
from asyncflow.train.coordinator import Coordinator
from asyncflow.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners

pytestmark = pytest.mark.usefixtures("graph")


def _pipeline(n):
    """q1 holds 0..n-1 and is closed; a runner moves q1 -> q2."""
    q1 = FIFOQueue(n + 1, [af.int32], shapes=[[]], name="q1")
    enq = q1.enqueue_many([np.arange(n, dtype=np.int32)])
    with af.control_dependencies([enq]):
        fill = q1.close()
    q2 = FIFOQueue(3, [af.int32], shapes=[[]], name="q2")
    add_queue_runner(QueueRunner(q2, [q2.enqueue(q1.dequeue())] * 1))
    return fill, q2


def test_runner_moves_everything_then_closes(sess):
    fill, q2 = _pipeline(50)
    sess.run(fill)
    coord = Coordinator()
    threads = start_queue_runners(sess, coord)
    assert len(threads) == 2 and all(t.is_alive() for t in threads[:1])
    got = []
    with pytest.raises(errors.OutOfRangeError):
        while True:
            got.extend(sess.run(q2.dequeue_up_to(4)))
    assert got == list(range(50))
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    assert not any(t.is_alive() for t in threads)


def test_two_enqueue_loops_each_element_once(sess):
    q1 = FIFOQueue(101, [af.int32], shapes=[[]], name="src")
    sess.run(q1.enqueue_many([np.arange(100, dtype=np.int32)]))
    sess.run(q1.close())
    q2 = FIFOQueue(2, [af.int32], shapes=[[]], name="dst")
    qr = QueueRunner(q2, [q2.enqueue(q1.dequeue()), q2.enqueue(q1.dequeue())])
    coord = Coordinator()
    threads = qr.create_threads(sess, coord=coord, start=True)
    assert qr.create_threads(sess, coord=coord) == []  # already running here
    got = []
    with pytest.raises(errors.OutOfRangeError):
        while True:
            got.append(int(sess.run(q2.dequeue())))
    assert sorted(got) == list(range(100))
    coord.request_stop()
    coord.join(threads)


def test_stop_cancels_blocked_enqueue(sess):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    qr = QueueRunner(q, [q.enqueue(constant(7))])
    coord = Coordinator()
    threads = qr.create_threads(sess, coord, start=True)
    assert list(sess.run(q.dequeue_many(4))) == [7, 7, 7, 7]
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)  # cancel_op ended the blocked enqueue
    assert sess.run(q.is_closed())


def test_runner_error_reported_to_coordinator(sess):
    q = FIFOQueue(2, [af.float32], shapes=[[]])
    qr = QueueRunner(q, [q.enqueue(fail_op(constant(1.0), "invalid"))])
    coord = Coordinator()
    threads = qr.create_threads(sess, coord, start=True)
    with pytest.raises(errors.InvalidArgumentError):
        coord.join(threads, stop_grace_period_secs=10)


def test_runner_error_without_coordinator_is_recorded(sess):
    q = FIFOQueue(2, [af.float32], shapes=[[]])
    qr = QueueRunner(q, [q.enqueue(fail_op(constant(1.0), "invalid"))])
    (t,) = qr.create_threads(sess, start=True)
    t.join(10)
    assert not t.is_alive()
    assert len(qr.exceptions_raised) == 1
    assert isinstance(qr.exceptions_raised[0], errors.InvalidArgumentError)


def test_queue_runner_validation():
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    with pytest.raises(ValueError, match="Must provide queue and enqueue_ops"):
        QueueRunner(q, [])
    with pytest.raises(TypeError, match="queue_closed_exception_types"):
        QueueRunner(q, [q.enqueue(1)], queue_closed_exception_types=(ValueError,))
    qr = QueueRunner(q, [q.enqueue(1)])
    assert qr.queue is q and qr.name == "fifo_queue"
    assert qr.close_op.type == "QueueCloseV2" and qr.cancel_op.get_attr("cancel_pending_enqueues")
    assert qr.queue_closed_exception_types == (errors.OutOfRangeError,)
    with pytest.raises(ValueError, match="No default session"):
        start_queue_runners()


async def test_runners_on_the_callers_loop(graph):
    fill, q2 = _pipeline(20)
    async with af.Session() as s:
        await s.arun(fill)
        coord = Coordinator()
        threads = start_queue_runners(s, coord)
        got = []
        async for batch in queues.aiterate(s, q2.dequeue_up_to(3)):
            got.extend(batch)
        assert got == list(range(20))
        with pytest.raises(RuntimeError, match="ajoin"):
            coord.join(threads)
        coord.request_stop()
        await coord.ajoin(threads, stop_grace_period_secs=10)


def test_runners_follow_the_session_to_a_later_loop(graph):
    fill, q2 = _pipeline(12)
    s = af.Session()

    async def first():
        await s.arun(fill)  # binds the session to this loop, which then closes

    async def second():
        coord = Coordinator()
        threads = start_queue_runners(s, coord)  # on this loop, not the closed one
        got = []
        async for batch in queues.aiterate(s, q2.dequeue_up_to(5)):
            got.extend(batch)
        coord.request_stop()
        await coord.ajoin(threads, stop_grace_period_secs=10)
        return got

    try:
        asyncio.run(first())
        assert asyncio.run(second()) == list(range(12))
    finally:
        s.close()


# -- a pipeline whose runners were never started --------------------------------------------


@pytest.fixture
def short_runner_timeout():
    old = queues.set_unstarted_runner_timeout(0.05)
    yield
    queues.set_unstarted_runner_timeout(old)


def test_unstarted_runners_raise_a_clear_error(sess, short_runner_timeout):
    _, q2 = _pipeline(5)
    with pytest.raises(errors.FailedPreconditionError, match="start_queue_runners"):
        sess.run(q2.dequeue())
    # Without runners registered for it, a queue simply waits (TF's behaviour).
    q3 = FIFOQueue(2, [af.int32], shapes=[[]], name="q3")
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q3.dequeue(), options=af.RunOptions(timeout_in_ms=150))


def test_started_runners_disarm_the_watchdog(sess, short_runner_timeout):
    fill, q2 = _pipeline(3)
    assert queues.unstarted_runners(sess, q2.queue_ref.op)  # armed: runners not started
    coord = Coordinator()
    threads = start_queue_runners(sess, coord)
    assert queues.unstarted_runners(sess, q2.queue_ref.op) == []
    with af.Session() as other:  # started per session
        assert queues.unstarted_runners(other, q2.queue_ref.op)
    sess.run(fill)
    assert list(sess.run(q2.dequeue_many(3))) == [0, 1, 2]
    coord.request_stop()
    coord.join(threads)


# -- Coordinator ----------------------------------------------------------------------------


def test_coordinator_stop_and_exceptions():
    c = Coordinator()
    assert not c.should_stop() and not c.wait_for_stop(0)
    c.request_stop(errors.OutOfRangeError(None, None, "end"))  # clean stop
    assert c.should_stop() and c.wait_for_stop(0)
    c.join()
    assert c.joined
    c.clear_stop()
    with c.stop_on_exception():
        raise ValueError("boom")
    c.request_stop(RuntimeError("second"))  # the first one wins
    with pytest.raises(ValueError, match="boom"):
        c.raise_requested_exception()
    with pytest.raises(ValueError, match="boom"):
        c.join()
    with pytest.raises(KeyError):
        c.request_stop(KeyError("after join"))  # nobody would see it: raised here


def test_coordinator_custom_clean_stop_types():
    c = Coordinator(clean_stop_exception_types=[KeyError])
    c.request_stop(errors.OutOfRangeError(None, None, "x"))
    with pytest.raises(errors.OutOfRangeError):
        c.join()
    c2 = Coordinator(clean_stop_exception_types=[KeyError])
    c2.request_stop(KeyError("clean"))
    c2.join()


def test_coordinator_join_threads_and_stragglers():
    c = Coordinator()
    gate = threading.Event()

    def worker():
        with c.stop_on_exception():
            gate.wait(10)

    t = threading.Thread(target=worker, name="straggler")
    c.register_thread(t)
    t.start()
    c.request_stop()
    with pytest.raises(RuntimeError, match="straggler"):
        c.join(stop_grace_period_secs=0)
    c.clear_stop()
    c.register_thread(t)
    c.request_stop()
    c.join(stop_grace_period_secs=0, ignore_live_threads=True)
    gate.set()
    t.join()
    c2 = Coordinator()
    t2 = threading.Thread(target=lambda: None)
    t2.start()
    c2.join([t2])  # all threads ended: join returns without a stop request


async def test_await_for_stop():
    c = Coordinator()
    assert not await c.await_for_stop(0.01)
    w = asyncio.create_task(c.await_for_stop())
    await settle()
    assert not w.done()
    threading.Thread(target=c.request_stop).start()
    assert await w
