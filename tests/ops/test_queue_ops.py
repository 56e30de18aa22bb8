"""Queue ops: TF1 signatures, names, blocking and closing rules, exactly-once on failure.

Blocking is tested deterministically: start the step as a task, let the loop settle,
assert it is still waiting, then release it.  No sleeps.
"""

import asyncio

import numpy as np
import pytest
from _testing_ops import settle, until, wait_op

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.array_ops import constant, placeholder
from asyncflow.ops.queue_ops import (
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
)
from asyncflow.queues import aiterate

pytestmark = pytest.mark.usefixtures("graph")

DEADLINE = af.RunOptions(timeout_in_ms=30)


async def _resource(s, q):
    return await s.arun(q.queue_ref)


# -- graph construction -----------------------------------------------------------------


def test_op_types_and_names_follow_tf():
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    assert q.queue_ref.op.type == "FIFOQueueV2" and q.name == "fifo_queue"
    assert isinstance(q, QueueBase)
    e, em, d = q.enqueue(1), q.enqueue_many([[1, 2]]), q.dequeue()
    dm, du, c = q.dequeue_many(3), q.dequeue_up_to(3), q.close()
    assert (e.type, em.type, d.op.type) == (
        "QueueEnqueueV2",
        "QueueEnqueueManyV2",
        "QueueDequeueV2",
    )
    assert (dm.op.type, du.op.type, c.type) == (
        "QueueDequeueManyV2",
        "QueueDequeueUpToV2",
        "QueueCloseV2",
    )
    size, is_closed = q.size(), q.is_closed()
    assert size.op.type == "QueueSizeV2" and is_closed.op.type == "QueueIsClosedV2"
    assert e.name == "fifo_queue_enqueue" and em.name == "fifo_queue_EnqueueMany"
    assert d.name == "fifo_queue_Dequeue:0" and dm.name == "fifo_queue_DequeueMany:0"
    assert du.name == "fifo_queue_DequeueUpTo:0" and c.name == "fifo_queue_Close"
    assert size.name == "fifo_queue_Size:0" and is_closed.name == "fifo_queue_Is_Closed:0"
    assert dm.shape.as_list() == [3] and du.shape.as_list() == [None]
    from asyncflow.registry import get_op_def

    for t in ("QueueEnqueueV2", "QueueDequeueV2", "QueueDequeueManyV2"):
        assert get_op_def(t).is_async and get_op_def(t).stateful


def test_queue_class_names_and_defaults():
    assert PaddingFIFOQueue(1, [af.int32], [[None]]).name == "padding_fifo_queue"
    assert RandomShuffleQueue(3, 1, [af.int32]).name == "random_shuffle_queue"
    pq = PriorityQueue(3, [af.string], shapes=[[]])
    assert pq.name == "priority_queue"
    assert pq.dtypes == [af.int64, af.string]
    assert [s.as_list() for s in pq.shapes] == [[], []]


@pytest.mark.parametrize(
    "build, exc, msg",
    [
        (
            lambda: FIFOQueue(2, [af.int32], shapes=[[2]]).enqueue(np.array([1, 2, 3])),
            ValueError,
            "incompatible",
        ),
        (
            lambda: FIFOQueue(2, [af.int32], shapes=[[2]]).enqueue_many(5),
            ValueError,
            "rank at least 1",
        ),
        (
            lambda: FIFOQueue(2, [af.int32], names=["a"]).enqueue(1),
            ValueError,
            "You must enqueue a dictionary in a Queue with names",
        ),
        (
            lambda: FIFOQueue(2, [af.int32]).enqueue({"a": 1}),
            ValueError,
            "Queue must have names to enqueue a dictionary",
        ),
        (
            lambda: FIFOQueue(2, [af.int32], names=["a"]).enqueue({"b": 1}),
            ValueError,
            "do not match names",
        ),
        (lambda: FIFOQueue(2, [af.int32], shapes=[[None]]), ValueError, "fully defined"),
        (lambda: FIFOQueue(2, [af.int32], shapes=[[1], [2]]), ValueError, "same length"),
        (lambda: FIFOQueue(2, [af.int32], names=["a", "b"]), ValueError, "same length"),
        (lambda: PaddingFIFOQueue(2, [af.int32], None), ValueError, "partial shapes"),
        (
            lambda: PaddingFIFOQueue(2, [af.int32, af.int32], [[None]]),
            ValueError,
            "Shapes must be provided for all components",
        ),
        (lambda: FIFOQueue(2, [af.int32]).enqueue("x"), TypeError, None),
    ],
)
def test_build_errors(build, exc, msg):
    with pytest.raises(exc, match=msg):
        build()


def test_too_few_values_build_and_fail_when_run(sess):
    # TF 2.21 pairs values with components as zip does: one value for two components
    # builds, and the enqueue fails when run (InvalidArgumentError, signature mismatch)
    enqueue = FIFOQueue(2, [af.int32, af.int32]).enqueue(1)
    with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
        sess.run(enqueue)


def test_padding_queue_requires_shapes_argument():
    with pytest.raises(TypeError):
        PaddingFIFOQueue(2, [af.int32])  # noqa - shapes is required, as in TF


# -- basic semantics ----------------------------------------------------------------------


def test_fifo_order_size_and_tuples(sess):
    q = FIFOQueue(10, [af.int32, af.string], shapes=[[], [2]])
    sess.run(q.enqueue((1, [b"a", b"b"])))
    sess.run(q.enqueue_many(([2, 3], [[b"c", b"d"], [b"e", b"f"]])))
    assert sess.run(q.size()) == 3
    a, b = sess.run(q.dequeue())
    assert a == 1 and b.dtype == object and list(b) == [b"a", b"b"]
    xs, ys = sess.run(q.dequeue_many(2))
    assert xs.dtype == np.int32 and list(xs) == [2, 3]
    assert ys.shape == (2, 2) and ys[1, 1] == b"f"
    assert sess.run(q.size()) == 0 and not sess.run(q.is_closed())


def test_names_give_dicts(sess):
    q = FIFOQueue(5, [af.int32, af.float32], shapes=[[], []], names=["a", "b"])
    sess.run(q.enqueue({"a": 1, "b": 2.0}))
    sess.run(q.enqueue_many({"a": [3, 4], "b": [5.0, 6.0]}))
    out = sess.run(q.dequeue())
    assert out == {"a": 1, "b": 2.0}
    many = sess.run(q.dequeue_many(2))
    assert list(many["a"]) == [3, 4] and many["b"].dtype == np.float32


def test_enqueue_copies_the_fed_buffer(sess):
    x = placeholder(af.float32, [3])
    q = FIFOQueue(5, [af.float32], shapes=[[3]])
    buf = np.array([1.0, 2.0, 3.0], np.float32)
    sess.run(q.enqueue(x), {x: buf})
    buf[0] = 99.0
    assert list(sess.run(q.dequeue())) == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "make, feed, msg",
    [
        (
            lambda x: FIFOQueue(2, [af.int32], shapes=[[2]]).enqueue(x),
            [1, 2, 3],
            r"Shape mismatch in tuple component 0. Expected \[2\], got \[3\]",
        ),
        (
            lambda x: FIFOQueue(2, [af.int32], shapes=[[2]]).enqueue_many(x),
            [1, 2],
            r"Shape mismatch in tuple component 0. Expected \[2,2\], got \[2\]",
        ),
    ],
)
def test_runtime_shape_errors(sess, make, feed, msg):
    x = placeholder(af.int32)
    op = make(x)
    with pytest.raises(errors.InvalidArgumentError, match=msg):
        sess.run(op, {x: feed})


def test_dequeue_many_needs_shapes_and_nonnegative_n(sess):
    q = FIFOQueue(5, [af.int32])
    with pytest.raises(errors.InvalidArgumentError, match="require the components to have"):
        sess.run(q.dequeue_many(2))
    q2 = FIFOQueue(5, [af.int32], shapes=[[]])
    n = placeholder(af.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="requested -1 < 0 elements"):
        sess.run(q2.dequeue_many(n), {n: -1})
    assert sess.run(q2.dequeue_many(n), {n: 0}).shape == (0,)


def test_bad_handle_is_a_typed_error(sess):
    from asyncflow import graph as ops

    h = ops.convert_to_tensor(b"not a queue")
    op = ops.apply_op("QueueSizeV2", [h])
    with pytest.raises(errors.InvalidArgumentError, match="queue handle"):
        sess.run(op.outputs[0])


def test_close_rules(sess):
    q = FIFOQueue(5, [af.int32], shapes=[[]])
    sess.run(q.enqueue_many([[1, 2]]))
    sess.run(q.close())
    assert sess.run(q.is_closed())
    with pytest.raises(errors.CancelledError, match="FIFOQueue 'fifo_queue' is closed."):
        sess.run(q.enqueue(3))
    with pytest.raises(errors.CancelledError, match="is already closed"):
        sess.run(q.close())
    sess.run(q.close(cancel_pending_enqueues=True))  # allowed again, as in TF
    with pytest.raises(
        errors.OutOfRangeError,
        match=r"is closed and has insufficient elements \(requested 3, current size 2\)",
    ):
        sess.run(q.dequeue_many(3))
    assert list(sess.run(q.dequeue_up_to(3))) == [1, 2]  # nothing was lost
    with pytest.raises(errors.OutOfRangeError, match=r"requested 1, current size 0"):
        sess.run(q.dequeue())
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue_up_to(3))


def test_shared_name_shares_the_queue(sess):
    a = FIFOQueue(5, [af.int32], shapes=[[]], shared_name="shared", name="a")
    b = FIFOQueue(5, [af.int32], shapes=[[]], shared_name="shared", name="b")
    c = FIFOQueue(5, [af.float32], shapes=[[]], shared_name="shared", name="c")
    sess.run(a.enqueue(7))
    assert sess.run(b.dequeue()) == 7
    with pytest.raises(errors.InvalidArgumentError, match="Shared queue"):
        sess.run(c.size())


def test_two_sessions_have_their_own_queues(graph):
    q = FIFOQueue(5, [af.int32], shapes=[[]])
    with af.Session() as s1, af.Session() as s2:
        s1.run(q.enqueue(1))
        assert s1.run(q.size()) == 1 and s2.run(q.size()) == 0


# -- other queue kinds ------------------------------------------------------------------


def test_padding_fifo_queue_pads(sess):
    q = PaddingFIFOQueue(5, [af.int32, af.string], shapes=[[None], [None]])
    sess.run(q.enqueue(([1, 2, 3], [b"x"])))
    sess.run(q.enqueue(([1], [b"y", b"z"])))
    a, b = sess.run(q.dequeue_many(2))
    np.testing.assert_array_equal(a, [[1, 2, 3], [1, 0, 0]])
    assert a.dtype == np.int32
    assert b.tolist() == [[b"x", b""], [b"y", b"z"]]
    sess.run(q.enqueue(([4, 5], [b"w"])))
    a, b = sess.run(q.dequeue())
    assert list(a) == [4, 5] and list(b) == [b"w"]


def test_priority_queue_smallest_first(sess):
    q = PriorityQueue(10, [af.string], shapes=[[]])
    sess.run(q.enqueue_many(([5, 1, 3], [b"a", b"b", b"c"])))
    sess.run(q.enqueue((2, b"d")))
    p, v = sess.run(q.dequeue_many(4))
    assert list(p) == [1, 2, 3, 5] and p.dtype == np.int64
    assert list(v) == [b"b", b"d", b"c", b"a"]


def test_random_shuffle_is_seeded_and_keeps_min_after_dequeue(graph):
    def run_once():
        g = af.Graph()
        with g.as_default():
            q = RandomShuffleQueue(100, 0, [af.int32], shapes=[[]], seed=7)
            enq = q.enqueue_many([list(range(50))])
            deq = q.dequeue_many(50)
            with af.Session(graph=g) as s:
                s.run(enq)
                return list(s.run(deq))

    a, b = run_once(), run_once()
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50))


async def test_random_shuffle_min_after_dequeue_blocks_until_closed(graph):
    q = RandomShuffleQueue(10, 2, [af.int32], shapes=[[]], seed=1)
    async with af.Session() as s:
        await s.arun(q.enqueue_many([[1, 2]]))
        t = asyncio.create_task(s.arun(q.dequeue()))
        await settle()
        assert not t.done()  # size 2 is not > min_after_dequeue 2
        await s.arun(q.enqueue(3))
        got = [await t]
        await s.arun(q.close())
        got += list(await s.arun(q.dequeue_up_to(5)))  # closed: drains below the minimum
        assert sorted(got) == [1, 2, 3]


# -- blocking -----------------------------------------------------------------------------


async def test_dequeue_waits_for_enqueue(graph):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    async with af.Session() as s:
        t = asyncio.create_task(s.arun(q.dequeue()))
        await settle()
        assert not t.done()
        r = await _resource(s, q)
        assert r.num_waiting() == (1, 0)
        await s.arun(q.enqueue(42))
        assert await t == 42


async def test_enqueue_waits_while_full_and_keeps_order(graph):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    async with af.Session() as s:
        await s.arun(q.enqueue_many([[1, 2]]))
        t1 = asyncio.create_task(s.arun(q.enqueue(3)))
        t2 = asyncio.create_task(s.arun(q.enqueue_many([[4, 5]])))
        await settle()
        assert not t1.done() and not t2.done()
        assert await s.arun(q.dequeue()) == 1
        await t1
        await settle()
        assert not t2.done()
        assert list(await s.arun(q.dequeue_many(4))) == [2, 3, 4, 5]
        await t2


async def test_dequeue_many_larger_than_capacity_streams(graph):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    async with af.Session() as s:
        t = asyncio.create_task(s.arun(q.dequeue_many(5)))
        for i in range(5):
            await s.arun(q.enqueue(i))
        assert list(await t) == [0, 1, 2, 3, 4]


async def test_close_fails_waiting_dequeue_many_but_up_to_drains(graph):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    async with af.Session() as s:
        many = asyncio.create_task(s.arun(q.dequeue_many(4)))
        await settle()
        await s.arun(q.enqueue_many([[1, 2]]))
        await settle()
        assert not many.done()
        await s.arun(q.close())
        with pytest.raises(errors.OutOfRangeError, match="requested 4, current size 2"):
            await many
        assert await s.arun(q.size()) == 2  # the partial batch went back
        assert list(await s.arun(q.dequeue_up_to(4))) == [1, 2]


async def test_close_waits_behind_pending_enqueues(graph):
    q = FIFOQueue(1, [af.int32], shapes=[[]])
    async with af.Session() as s:
        r = await _resource(s, q)
        await s.arun(q.enqueue(1))
        pending = asyncio.create_task(s.arun(q.enqueue(2)))
        await until(lambda: r.num_waiting() == (0, 1))
        await s.arun(q.close())
        assert not await s.arun(q.is_closed())  # TF: the close queues behind the enqueue
        with pytest.raises(errors.CancelledError):
            await s.arun(q.enqueue(3))  # new enqueues are refused at once
        assert list(await s.arun(q.dequeue_many(2))) == [1, 2]
        await pending
        assert await s.arun(q.is_closed())


async def test_close_cancel_pending_enqueues(graph):
    q = FIFOQueue(1, [af.int32], shapes=[[]])
    async with af.Session() as s:
        await s.arun(q.enqueue(1))
        pending = asyncio.create_task(s.arun(q.enqueue(2)))
        await settle()
        await s.arun(q.close(cancel_pending_enqueues=True))
        with pytest.raises(errors.CancelledError, match="is closed"):
            await pending
        assert await s.arun(q.dequeue()) == 1
        with pytest.raises(errors.OutOfRangeError):
            await s.arun(q.dequeue())


async def test_up_to_waits_while_open(graph):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    async with af.Session() as s:
        await s.arun(q.enqueue(1))
        t = asyncio.create_task(s.arun(q.dequeue_up_to(3)))
        await settle()
        assert not t.done()
        await s.arun(q.enqueue_many([[2, 3, 4]]))
        assert list(await t) == [1, 2, 3]


async def test_deadline_withdraws_waiter_and_loses_nothing(graph):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    async with af.Session() as s:
        r = await _resource(s, q)
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(q.dequeue(), options=DEADLINE)
        await settle()
        assert r.num_waiting() == (0, 0)
        await s.arun(q.enqueue(5))
        assert await s.arun(q.size()) == 1
        await s.arun(q.enqueue(6))
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(q.enqueue(7), options=DEADLINE)
        await settle()
        assert r.num_waiting() == (0, 0)
        assert list(await s.arun(q.dequeue_many(2))) == [5, 6]


def test_sync_run_deadline(sess):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue(), options=DEADLINE)
    sess.run(q.enqueue(1))
    assert sess.run(q.dequeue()) == 1


async def test_session_close_cancels_pending_dequeue(graph):
    q = FIFOQueue(2, [af.int32], shapes=[[]])
    s = af.Session()
    t = asyncio.create_task(s.arun(q.dequeue()))
    await settle()
    r = await _resource(s, q)
    s.close()
    with pytest.raises(errors.CancelledError):
        await t
    await settle()
    assert r.num_waiting() == (0, 0)


# -- exactly once across failures ---------------------------------------------------------


async def test_cancelled_partial_dequeue_many_restores_in_order(graph):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    async with af.Session() as s:
        t = asyncio.create_task(s.arun(q.dequeue_many(5)))
        await settle()
        await s.arun(q.enqueue_many([[1, 2, 3]]))  # the waiter takes them progressively
        assert await s.arun(q.size()) == 0
        await s.arun(q.enqueue(4))
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        await settle()
        assert list(await s.arun(q.dequeue_many(4))) == [1, 2, 3, 4]


async def test_step_failing_after_dequeue_gives_elements_back(graph, probes):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    w = probes.waiter()
    async with af.Session() as s:
        await s.arun(q.enqueue_many([[1, 2, 3]]))
        # The dequeue completes at once; the step then waits on the gate and times out.
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun([q.dequeue_many(2), wait_op(constant(0), w)], options=DEADLINE)
        assert list(await s.arun(q.dequeue_many(3))) == [1, 2, 3]


async def test_failed_steps_restore_in_enqueue_order(graph, probes):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    w = probes.waiter()
    async with af.Session() as s:
        await s.arun(q.enqueue_many([[1, 2, 3, 4]]))
        r = await _resource(s, q)
        # Each step holds its element before the next starts (loop turns are not enough
        # where the step's constant comes from a GPU: its copy ends on a stream thread).
        t1 = asyncio.create_task(s.arun([q.dequeue(), wait_op(constant(0), w)]))
        await until(lambda: r.size() == 3)
        t2 = asyncio.create_task(s.arun([q.dequeue(), wait_op(constant(0), w)]))
        await until(lambda: r.size() == 2)
        t1.cancel()  # 1 goes back after 2 was taken
        await asyncio.gather(t1, return_exceptions=True)
        t2.cancel()
        await asyncio.gather(t2, return_exceptions=True)
        assert list(await s.arun(q.dequeue_many(4))) == [1, 2, 3, 4]


async def test_transfer_step_cancelled_while_enqueue_blocked_returns_element(graph):
    q1 = FIFOQueue(10, [af.int32], shapes=[[]], name="q1")
    q2 = FIFOQueue(1, [af.int32], shapes=[[]], name="q2")
    move = q2.enqueue(q1.dequeue())
    async with af.Session() as s:
        await s.arun(q1.enqueue_many([[1, 2]]))
        await s.arun(q2.enqueue(0))
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(move, options=DEADLINE)
        assert list(await s.arun(q1.dequeue_many(2))) == [1, 2]


async def test_committed_transfer_is_not_undone(graph):
    """The enqueue committed (a dequeue made room) just before the step was cancelled:
    the element lives in q2 now and must not also go back to q1."""
    q1 = FIFOQueue(10, [af.int32], shapes=[[]], name="q1")
    q2 = FIFOQueue(1, [af.int32], shapes=[[]], name="q2")
    move = q2.enqueue(q1.dequeue())
    async with af.Session() as s:
        await s.arun(q1.enqueue(1))
        await s.arun(q2.enqueue(0))
        r1, r2 = await _resource(s, q1), await _resource(s, q2)
        t = asyncio.create_task(s.arun(move))
        await settle()
        assert r2.num_waiting() == (0, 1)
        assert r2.get_nowait(1)[0][1][0] == 0  # makes room: the transfer commits ...
        t.cancel()  # ... and its step is cancelled before it resumes
        with pytest.raises(asyncio.CancelledError):
            await t
        await settle()
        assert r1.size() == 0 and r2.size() == 1
        assert await s.arun(q2.dequeue()) == 1


async def test_aiterate_until_out_of_range(graph):
    q = FIFOQueue(10, [af.int32], shapes=[[]])
    async with af.Session() as s:
        await s.arun(q.enqueue_many([[1, 2, 3, 4, 5]]))
        await s.arun(q.close())
        batches = [list(b) async for b in aiterate(s, q.dequeue_up_to(2))]
        assert batches == [[1, 2], [3, 4], [5]]


# -- issue 18: QueueBase.from_list, shared-name shape checks ------------------------------------


def test_from_list_selects_a_queue_by_index():
    from asyncflow import graph as ops
    from asyncflow.session import Session

    with ops.Graph().as_default():
        q1 = FIFOQueue(3, af.float32, shapes=[[]])
        q2 = FIFOQueue(3, af.float32, shapes=[[]])
        i = placeholder(af.int32, [])
        qs = af.QueueBase.from_list(i, [q1, q2])
        assert qs.dtypes == [af.float32] and qs.shapes[0].as_list() == []
        with Session() as sess:
            sess.run(qs.enqueue(5.0), {i: 1})
            sess.run(qs.enqueue(6.0), {i: 0})
            assert sess.run([q1.size(), q2.size()]) == [1, 1]
            assert sess.run(q2.dequeue()) == 5.0
        with pytest.raises(TypeError, match="Queues do not have matching component dtypes"):
            af.QueueBase.from_list(0, [q1, FIFOQueue(3, af.int32)])
        with pytest.raises(TypeError, match="A list of queues expected"):
            af.QueueBase.from_list(0, [])
        mixed = af.QueueBase.from_list(0, [q1, FIFOQueue(3, af.float32, shapes=[[2]])])
        assert mixed.shapes[0].ndims is None


@pytest.mark.parametrize(
    "first,second,want",
    [
        ([[]], [[2]], r"Shared queue 'sq' has component shapes \[\[\]\] but requested "
                      r"component shapes were \[\[2\]\]"),
        ([[]], None, r"has component shapes \[\[\]\] but requested component shapes were \[\]"),
        (None, [[]], r"has component shapes \[\] but requested component shapes were \[\[\]\]"),
    ],
)  # fmt: skip
def test_shared_queue_checks_shapes_as_tf(first, second, want):
    from asyncflow import graph as ops
    from asyncflow.session import Session

    with ops.Graph().as_default():
        a = FIFOQueue(3, af.float32, shapes=first, shared_name="sq")
        b = FIFOQueue(3, af.float32, shapes=second, shared_name="sq")
        with Session() as sess:
            sess.run(a.queue_ref)
            with pytest.raises(errors.InvalidArgumentError, match=want):
                sess.run(b.queue_ref)


def test_a_poison_element_fails_one_step_only():
    # Issue 18 item 11.  TF 2.21: dequeuing [b"1", b"bad", b"3"] through string_to_number
    # gives 1.0, InvalidArgumentError, 3.0 and leaves the queue empty: the bad element
    # is consumed by the step it failed.  A cancelled or timed-out step still gives its
    # elements back (tests/test_queue_stress.py).
    from asyncflow import graph as ops
    from asyncflow.session import Session

    with ops.Graph().as_default():
        q = FIFOQueue(10, af.string, shapes=[[]])
        x = placeholder(af.string, [None])
        enq = q.enqueue_many(x)
        num = af.string_to_number(q.dequeue())
        other_fails = [q.dequeue(), af.string_to_number(constant("nope"))]
        with Session() as sess:
            sess.run(enq, {x: [b"1", b"bad", b"3"]})
            assert sess.run(num) == 1.0
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(num)
            assert sess.run(num) == 3.0
            assert sess.run(q.size()) == 0
            # an error elsewhere in the step (not computed from the element) gives it back
            sess.run(enq, {x: [b"4"]})
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(other_fails)
            assert sess.run(q.size()) == 1


def test_ctrl_c_in_a_blocked_run_loses_nothing(monkeypatch):
    # Issue 18 item 13: Ctrl-C while a synchronous run waits in a dequeue raises
    # KeyboardInterrupt, and the interrupted step gives up its place: the next element
    # goes to the next run (TF: the blocked run is abandoned, nothing is lost).  The
    # interrupt comes out of the event loop the calling thread drives while the step
    # waits, as a real Ctrl-C does.
    from asyncflow import graph as ops
    from asyncflow import session as session_mod

    monkeypatch.setattr(session_mod, "_runtime", None)  # a fresh, caller-driven loop
    rt = session_mod._get_runtime()

    def ctrl_c():
        raise KeyboardInterrupt

    try:
        with ops.Graph().as_default():
            q = FIFOQueue(10, af.int32, shapes=[[]])
            x = placeholder(af.int32, [])
            enq, deq = q.enqueue(x), q.dequeue()
            with af.Session() as sess:
                sess.run(q.size())  # the session is bound to the caller-driven loop
                assert rt.thread is None
                # Runs once the step has suspended in the dequeue and the loop waits.
                rt.loop.call_soon(ctrl_c)
                with pytest.raises(KeyboardInterrupt):
                    sess.run(deq)
                sess.run(enq, {x: 7})
                assert sess.run(deq, options=af.RunOptions(timeout_in_ms=5_000)) == 7
                assert sess.run(q.size()) == 0
    finally:
        if rt.thread is None and not rt.loop.is_running():
            rt.loop.close()
