"""Barrier ops: TF1 names and signatures, readiness and ordering, closing rules, blocking
takes as suspensions, and exactly-once delivery across cancelled and failed steps.

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
from asyncflow.ops.barrier_ops import Barrier, BarrierResource
from asyncflow.registry import get_gradient_function, get_op_def

pytestmark = pytest.mark.usefixtures("graph")

MIN = -(2**63)
DEADLINE = af.RunOptions(timeout_in_ms=30)
OP_TYPES = (
    "Barrier",
    "BarrierInsertMany",
    "BarrierTakeMany",
    "BarrierClose",
    "BarrierReadySize",
    "BarrierIncompleteSize",
)


def _barrier(**kw):
    return Barrier((af.string, af.int32), shapes=((), ()), **kw)


def _sizes(s, b):
    return [int(v) for v in s.run([b.ready_size(), b.incomplete_size()])]


async def _asizes(s, b):
    return [int(v) for v in await s.arun([b.ready_size(), b.incomplete_size()])]


def _keys(out):
    return [k.decode() for k in out[1]]


# -- graph construction -----------------------------------------------------------------


def test_op_types_names_and_shapes_follow_tf():
    b = _barrier()
    assert b.barrier_ref.op.type == "Barrier" and b.name == "barrier"
    assert b.component_types == [af.string, af.int32]
    ins = b.insert_many(0, ["k"], ["v"])
    indices, keys, values = b.take_many(3)
    close, ready, incomplete = b.close(), b.ready_size(), b.incomplete_size()
    assert (ins.type, indices.op.type, close.type) == (
        "BarrierInsertMany",
        "BarrierTakeMany",
        "BarrierClose",
    )
    assert (ready.op.type, incomplete.op.type) == ("BarrierReadySize", "BarrierIncompleteSize")
    assert ins.name == "barrier_BarrierInsertMany" and close.name == "barrier_BarrierClose"
    assert indices.name == "barrier_BarrierTakeMany:0"
    assert ready.name == "barrier_BarrierReadySize:0"
    assert incomplete.name == "barrier_BarrierIncompleteSize:0"
    assert ins.get_attr("component_index") == 0
    assert indices.dtype == af.int64 and keys.dtype == af.string
    assert [v.dtype for v in values] == [af.string, af.int32]
    assert indices.shape.as_list() == [3] and values[1].shape.as_list() == [3]
    small = b.take_many(3, allow_small_batch=True)
    assert small[0].shape.as_list() == [None] and small[2][0].shape.as_list() == [None]
    assert Barrier(af.float32, shapes=[2, 3]).take_many(1)[2][0].shape.as_list() == [1, 2, 3]
    assert get_op_def("BarrierTakeMany").is_async
    for t in OP_TYPES:
        assert get_op_def(t).stateful and get_op_def(t).supports("CPU")
        assert get_gradient_function(type("Op", (), {"type": t})()) is None


@pytest.mark.parametrize(
    "build, exc, msg",
    [
        (lambda: Barrier(af.float32, shapes=[[0]]), ValueError, "Empty tensors"),
        (lambda: Barrier(af.float32, shapes=[[None]]), ValueError, "fully defined"),
        (lambda: Barrier([af.float32, af.int32], shapes=[[]]), ValueError, "one shape per"),
        (lambda: _barrier().insert_many(1, [["a"]], [1]), ValueError, "rank 1 but is rank 2"),
        (lambda: _barrier().insert_many(1, ["a", "b"], [1]), ValueError, "are 2 and 1"),
        (lambda: _barrier().insert_many(1, "a", [1]), ValueError, "rank 1 but is rank 0"),
        (lambda: _barrier().take_many(-1), ValueError, "Dimension -1 must be >= 0"),
    ],
)
def test_build_errors(build, exc, msg):
    with pytest.raises(exc, match=msg):
        build()


# -- readiness, order, indices ------------------------------------------------------------


def test_tf_docstring_example(sess):
    b = _barrier()
    sess.run(b.insert_many(0, keys=["k1", "k2"], values=["a", "b"]))
    sess.run(b.insert_many(1, keys=["k1"], values=[1]))
    assert _sizes(sess, b) == [1, 1]
    sess.run(b.insert_many(0, keys=["k3"], values=["c"]))
    sess.run(b.insert_many(1, keys=["k3"], values=[3]))
    sess.run(b.insert_many(1, keys=["k2"], values=[2]))
    assert _sizes(sess, b) == [3, 0]
    indices, keys, values = sess.run(b.take_many(2))
    # k3 completed before k2, but k2's first component came first: k1 and k2 lead.
    assert list(indices) == [MIN, MIN] and list(keys) == [b"k1", b"k2"]
    assert list(values[0]) == [b"a", b"b"] and list(values[1]) == [1, 2]
    assert values[1].dtype == np.int32
    indices, keys, values = sess.run(b.take_many(1))
    assert list(indices) == [MIN + 1] and list(keys) == [b"k3"] and list(values[1]) == [3]
    assert _sizes(sess, b) == [0, 0]


def test_index_counts_calls_that_add_new_keys(sess):
    b = Barrier(af.int64, shapes=[[2]])
    sess.run(b.insert_many(0, ["a"], [[1, 2]]))  # single component: ready at once
    sess.run(b.insert_many(0, ["b", "c"], [[3, 4], [5, 6]]))
    sess.run(b.insert_many(0, [], np.zeros((0, 2), np.int64)))  # no new key: no new index
    sess.run(b.insert_many(0, ["a"], [[7, 8]]))  # "a" again once complete: a new element
    indices, keys, (v,) = sess.run(b.take_many(4))
    assert list(indices) == [MIN, MIN + 1, MIN + 1, MIN + 2]
    assert list(keys) == [b"a", b"b", b"c", b"a"]
    assert v.tolist() == [[1, 2], [3, 4], [5, 6], [7, 8]] and v.dtype == np.int64


def test_take_zero_and_unconstrained_shapes(sess):
    b = _barrier()
    indices, keys, values = sess.run(b.take_many(0))
    assert indices.shape == (0,) and indices.dtype == np.int64 and keys.shape == (0,)
    assert values[1].shape == (0,) and values[1].dtype == np.int32
    u = Barrier([af.float32], name="u")
    sess.run(u.insert_many(0, ["x", "y"], np.ones((2, 3), np.float32)))
    assert sess.run(u.take_many(2))[2][0].shape == (2, 3)
    sess.run(u.insert_many(0, ["p"], np.ones((1, 2), np.float32)))
    sess.run(u.insert_many(0, ["q"], np.ones((1, 3), np.float32)))
    with pytest.raises(errors.InvalidArgumentError, match="Cannot batch"):
        sess.run(u.take_many(2))
    assert _sizes(sess, u) == [2, 0]  # nothing taken
    assert sess.run(u.take_many(1))[1].tolist() == [b"p"]


def test_python_values_take_the_component_dtype(sess):
    b = Barrier([af.int64, af.float32], shapes=[[], []])
    sess.run(b.insert_many(0, ["k"], [5]))
    sess.run(b.insert_many(1, ["k"], [0.5]))
    _, _, (v0, v1) = sess.run(b.take_many(1))
    assert v0.dtype == np.int64 and v1.dtype == np.float32 and v0[0] == 5


# -- errors -----------------------------------------------------------------------------


def test_duplicate_component_is_invalid_and_the_batch_is_atomic(sess):
    b = _barrier()
    sess.run(b.insert_many(0, ["k1"], ["a"]))
    with pytest.raises(
        errors.InvalidArgumentError, match="Key k1 already has a value for component 0"
    ):
        sess.run(b.insert_many(0, ["k2", "k1"], ["b", "c"]))
    with pytest.raises(errors.InvalidArgumentError, match="Key k3 already has a value"):
        sess.run(b.insert_many(0, ["k3", "k3"], ["b", "c"]))
    assert _sizes(sess, b) == [0, 1]  # neither k2 nor k3 went in
    sess.run(b.insert_many(1, ["k1"], [1]))
    assert _keys(sess.run(b.take_many(1))) == ["k1"]


def test_runtime_type_shape_and_index_errors(sess):
    b = Barrier([af.int32, af.float32], shapes=[[], [2]])
    keys = placeholder(af.string, name="keys")
    vals = placeholder(af.float32, name="vals")
    cases = [
        (b.insert_many(0, ["k"], constant([1.0])), "Signature mismatch"),
        (b.insert_many(5, ["k"], constant([1])), "component ID is out of range 5"),
        (b.insert_many(1, keys, vals), "Shape mismatch in value component 1"),
    ]
    for op, msg in cases:
        with pytest.raises(errors.InvalidArgumentError, match=msg):
            sess.run(op, {keys: [b"k"], vals: np.ones((1, 3), np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="one row per key"):
        sess.run(cases[2][0], {keys: [b"k", b"j"], vals: np.ones((1, 2), np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="keys must be a vector"):
        sess.run(cases[2][0], {keys: [[b"k"]], vals: np.ones((1, 2), np.float32)})
    u = Barrier([af.float32], name="u")
    with pytest.raises(errors.InvalidArgumentError, match="no elements are not supported"):
        sess.run(u.insert_many(0, keys, vals), {keys: [b"k"], vals: np.ones((1, 0), np.float32)})
    n = placeholder(af.int32, name="n")
    with pytest.raises(errors.InvalidArgumentError, match="must be >= 0"):
        sess.run(b.take_many(n)[0], {n: -1})
    assert _sizes(sess, b) == [0, 0]


def test_capacity_must_be_unbounded_and_shared_barriers_must_agree(sess):
    from asyncflow import graph as ops

    op = ops.apply_op("Barrier", [], {"component_types": [af.int32], "capacity": 3})
    with pytest.raises(errors.InvalidArgumentError, match="capacity=-1"):
        sess.run(op.outputs[0])
    a = Barrier(af.int32, shapes=[[]], shared_name="x", name="a")
    b = Barrier(af.int32, shapes=[[]], shared_name="x", name="b")
    c = Barrier(af.int64, shapes=[[]], shared_name="x", name="c")
    d = Barrier(af.int32, shapes=[[2]], shared_name="x", name="d")
    sess.run(a.insert_many(0, ["k"], [1]))
    assert sess.run(b.ready_size()) == 1
    with pytest.raises(errors.InvalidArgumentError, match="has component types int32"):
        sess.run(c.ready_size())
    with pytest.raises(errors.InvalidArgumentError, match="has component shapes"):
        sess.run(d.ready_size())


def test_bad_handle_is_a_typed_error(sess):
    from asyncflow import graph as ops

    op = ops.apply_op("BarrierReadySize", [ops.convert_to_tensor(b"nope")])
    with pytest.raises(errors.InvalidArgumentError, match="barrier handle"):
        sess.run(op.outputs[0])


# -- closing ------------------------------------------------------------------------------


def test_close_rules(sess):
    b = _barrier()
    sess.run(b.insert_many(0, ["k1", "k2", "k3"], ["a", "b", "c"]))
    sess.run(b.insert_many(1, ["k1"], [1]))
    sess.run(b.close())
    with pytest.raises(errors.CancelledError, match="Barrier 'barrier' is already closed."):
        sess.run(b.close())
    with pytest.raises(
        errors.CancelledError, match="is closed, but attempted to insert a brand new key: k4"
    ):
        sess.run(b.insert_many(0, ["k4"], ["d"]))
    with pytest.raises(errors.CancelledError, match="brand new key: k4"):
        sess.run(b.insert_many(1, ["k2", "k4"], [2, 4]))  # atomic: k2 not completed
    assert _sizes(sess, b) == [1, 2]
    sess.run(b.insert_many(1, ["k2"], [2]))  # completing an existing key is allowed
    with pytest.raises(
        errors.OutOfRangeError,
        match=r"Barrier 'barrier' is closed and has insufficient elements "
        r"\(requested 4, total size 3\)",
    ):
        sess.run(b.take_many(4))  # ready 2 + incomplete 1 < 4
    assert _keys(sess.run(b.take_many(5, allow_small_batch=True))) == ["k1", "k2"]
    with pytest.raises(errors.OutOfRangeError, match=r"requested 0, total size 0"):
        sess.run(b.take_many(5, allow_small_batch=True))  # k3 incomplete: not counted
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(b.take_many(1), options=DEADLINE)  # k3 may still complete: waits
    sess.run(b.insert_many(1, ["k3"], [3]))
    assert _keys(sess.run(b.take_many(1))) == ["k3"]
    with pytest.raises(errors.CancelledError, match="is closed.  Pending enqueues cancelled: 0"):
        sess.run(b.insert_many(1, ["k3"], [3]))  # nothing incomplete is left
    sess.run(b.insert_many(1, [], np.zeros([0], np.int32)))  # an empty insert is fine
    with pytest.raises(errors.OutOfRangeError, match=r"requested 1, total size 0"):
        sess.run(b.take_many(1))


def test_close_cancel_pending_enqueues_drops_incomplete(sess):
    b = _barrier()
    sess.run(b.insert_many(0, ["k1", "k2"], ["a", "b"]))
    sess.run(b.insert_many(1, ["k1"], [1]))
    sess.run(b.close())
    sess.run(b.close(cancel_pending_enqueues=True))  # allowed once after a plain close
    with pytest.raises(errors.CancelledError, match="already closed"):
        sess.run(b.close(cancel_pending_enqueues=True))
    assert _sizes(sess, b) == [1, 0]
    with pytest.raises(errors.CancelledError, match="Pending enqueues cancelled: 1"):
        sess.run(b.insert_many(1, ["k2"], [2]))
    with pytest.raises(errors.OutOfRangeError):
        sess.run(b.take_many(2))
    assert _keys(sess.run(b.take_many(2, allow_small_batch=True))) == ["k1"]


# -- blocking takes -------------------------------------------------------------------------


async def _resource(s, b) -> BarrierResource:
    return await s.arun(b.barrier_ref)


async def test_take_waits_until_enough_elements_are_complete(graph):
    b = _barrier()
    async with af.Session() as s:
        r = await _resource(s, b)
        t = asyncio.create_task(s.arun(b.take_many(2)))
        await until(lambda: r.num_waiting() == 1)
        assert not t.done()
        await s.arun(b.insert_many(0, ["k1", "k2"], ["a", "b"]))
        await s.arun(b.insert_many(1, ["k2"], [2]))
        await settle()
        assert not t.done() and await _asizes(s, b) == [1, 1]  # waiting takes hold nothing
        await s.arun(b.insert_many(1, ["k1"], [1]))
        indices, keys, values = await t
        # Same index (one insert_many call): ties break by completion order.
        assert list(keys) == [b"k2", b"k1"] and list(values[1]) == [2, 1]
        assert list(indices) == [MIN, MIN]
        assert r.num_waiting() == 0 and await _asizes(s, b) == [0, 0]


async def test_takes_are_served_in_arrival_order(graph):
    b = Barrier(af.int32, shapes=[[]])
    async with af.Session() as s:
        first = asyncio.create_task(s.arun(b.take_many(2)))
        await settle()
        second = asyncio.create_task(s.arun(b.take_many(1)))
        await settle()
        await s.arun(b.insert_many(0, ["a"], [1]))
        await settle()
        assert not first.done() and not second.done()  # the head blocks the line
        await s.arun(b.insert_many(0, ["b", "c"], [2, 3]))
        assert list((await first)[1]) == [b"a", b"b"]
        assert list((await second)[1]) == [b"c"]


async def test_close_fails_waiting_takes_that_cannot_be_served(graph):
    b = _barrier()
    async with af.Session() as s:
        await s.arun(b.insert_many(0, ["k1", "k2"], ["a", "b"]))
        big = asyncio.create_task(s.arun(b.take_many(3)))
        await settle()
        await s.arun(b.close())  # ready 0 + incomplete 2 < 3
        with pytest.raises(errors.OutOfRangeError, match=r"requested 3, total size 2"):
            await big
        two = asyncio.create_task(s.arun(b.take_many(2)))
        await settle()
        assert not two.done()  # k1 and k2 may still complete
        await s.arun(b.insert_many(1, ["k1"], [1]))
        await settle()
        assert not two.done()
        await s.arun(b.close(cancel_pending_enqueues=True))  # k2 dropped: 1 < 2
        with pytest.raises(errors.OutOfRangeError, match=r"requested 2, total size 1"):
            await two
        assert await _asizes(s, b) == [1, 0]


async def test_close_serves_a_waiting_small_batch(graph):
    b = _barrier()
    async with af.Session() as s:
        await s.arun(b.insert_many(0, ["k1", "k2"], ["a", "b"]))
        await s.arun(b.insert_many(1, ["k1"], [1]))
        small = asyncio.create_task(s.arun(b.take_many(3, allow_small_batch=True)))
        await settle()
        assert not small.done()  # open: a small batch waits for the full count
        await s.arun(b.close())
        assert list((await small)[1]) == [b"k1"]
        empty = asyncio.create_task(s.arun(b.take_many(3, allow_small_batch=True)))
        with pytest.raises(errors.OutOfRangeError):
            await empty


async def test_cancelled_take_withdraws_and_loses_nothing(graph):
    b = Barrier(af.int32, shapes=[[]])
    async with af.Session() as s:
        r = await _resource(s, b)
        t = asyncio.create_task(s.arun(b.take_many(2)))
        await settle()
        await s.arun(b.insert_many(0, ["a"], [1]))
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        await settle()
        assert r.num_waiting() == 0 and await _asizes(s, b) == [1, 0]
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(b.take_many(2), options=DEADLINE)
        await settle()
        assert r.num_waiting() == 0
        await s.arun(b.insert_many(0, ["b"], [2]))
        assert list((await s.arun(b.take_many(2)))[1]) == [b"a", b"b"]


async def test_take_timeout_attr(graph):
    b = Barrier(af.int32, shapes=[[]])
    async with af.Session() as s:
        with pytest.raises(errors.DeadlineExceededError, match="Timed out waiting for 1"):
            await s.arun(b.take_many(1, timeout=1))
        assert (await _resource(s, b)).num_waiting() == 0


def test_sync_run_deadline(sess):
    b = Barrier(af.int32, shapes=[[]])
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(b.take_many(1), options=DEADLINE)
    sess.run(b.insert_many(0, ["a"], [1]))
    assert sess.run(b.take_many(1))[1].tolist() == [b"a"]


async def test_session_close_cancels_a_pending_take(graph):
    b = Barrier(af.int32, shapes=[[]])
    s = af.Session()
    r = await _resource(s, b)
    t = asyncio.create_task(s.arun(b.take_many(1)))
    await settle()
    s.close()
    with pytest.raises(errors.CancelledError):
        await t
    await settle()
    assert r.num_waiting() == 0


# -- exactly once across failed steps -------------------------------------------------------


async def test_failed_step_gives_taken_elements_back_in_order(graph, probes):
    b = Barrier(af.int32, shapes=[[]])
    w = probes.waiter()
    async with af.Session() as s:
        await s.arun(b.insert_many(0, ["a", "b"], [1, 2]))
        await s.arun(b.insert_many(0, ["c"], [3]))
        # The take completes at once; the step then waits on the gate and times out.
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun([b.take_many(2), wait_op(constant(0), w)], options=DEADLINE)
        assert await _asizes(s, b) == [3, 0]
        indices, keys, _ = await s.arun(b.take_many(3))
        assert list(keys) == [b"a", b"b", b"c"] and list(indices) == [MIN, MIN, MIN + 1]


async def test_cancelled_step_after_a_waiting_take_was_served(graph, probes):
    b = Barrier(af.int32, shapes=[[]])
    w = probes.waiter()
    async with af.Session() as s:
        take = b.take_many(1)
        t = asyncio.create_task(s.arun([take, wait_op(take[0], w)]))
        await settle()
        await s.arun(b.insert_many(0, ["a"], [1]))  # serves the waiting take
        await settle()
        assert not t.done() and await _asizes(s, b) == [0, 0]
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        await settle()
        assert await _asizes(s, b) == [1, 0]
        assert list((await s.arun(b.take_many(1)))[1]) == [b"a"]


async def test_resource_take_without_a_step_restores_when_cancelled_after_service():
    r = BarrierResource("r", [af.int32])
    t = asyncio.create_task(r.take(1))
    await settle()
    r.insert_many(0, np.array([b"a"], dtype=object), np.array([1], np.int32))
    t.cancel()  # served, but cancelled before the task resumed
    with pytest.raises(asyncio.CancelledError):
        await t
    assert r.ready_size() == 1 and r.num_waiting() == 0


def test_take_enqueued_then_failed_step_is_not_duplicated():
    # A step takes from the barrier, enqueues into a queue, then fails: the enqueue
    # committed, so the taken elements must not also go back to the barrier.
    b = _barrier()
    q = af.FIFOQueue(10, [af.int64, af.string, af.int32], shapes=[[], [], []])
    ins0 = b.insert_many(0, [b"k"], [b"v"])
    ins1 = b.insert_many(1, [b"k"], [7])
    idx, keys, (vals, nums) = b.take_many(1)
    enq = q.enqueue_many([idx, keys, nums])
    with af.control_dependencies([enq]):
        boom = af.check_numerics(af.constant(np.float32(np.nan)), "after the enqueue")
    with af.Session() as s:
        s.run([ins0, ins1])
        with pytest.raises(errors.InvalidArgumentError, match="after the enqueue"):
            s.run(boom)
        assert s.run(q.size()) == 1
        assert _sizes(s, b) == [0, 0]
