"""Accumulators and the mutex; values checked against tf.compat.v1 2.21's results."""

import asyncio

import numpy as np
import pytest
from _testing_ops import settle, wait_op

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.accumulator_ops import (
    ConditionalAccumulator,
    SparseConditionalAccumulator,
    consume_mutex_lock,
    mutex_lock,
    mutex_v2,
)
from asyncflow.ops.array_ops import constant, placeholder

pytestmark = pytest.mark.usefixtures("graph")


def test_op_types_and_names():
    ca = ConditionalAccumulator(af.float32, shape=[2])
    assert ca.accumulator_ref.op.type == "ResourceConditionalAccumulator"
    assert ca.name == "conditional_accumulator"
    assert ca.apply_grad([1.0, 2.0]).type == "ResourceAccumulatorApplyGradient"
    assert ca.take_grad(1).op.type == "ResourceAccumulatorTakeGradient"
    assert ca.num_accumulated().op.type == "ResourceAccumulatorNumAccumulated"
    assert ca.set_global_step(1).type == "ResourceAccumulatorSetGlobalStep"
    sa = SparseConditionalAccumulator(af.float32, shape=[4, 2])
    assert sa.accumulator_ref.op.type == "SparseConditionalAccumulator"
    assert sa.take_grad(1).indices.op.type == "SparseAccumulatorTakeGradient"
    with pytest.raises(ValueError, match="incompatible"):
        ca.apply_grad([1.0, 2.0, 3.0])


def test_dense_mean_sum_and_staleness(sess):
    ca = ConditionalAccumulator(af.float32, shape=[2])
    sess.run(ca.apply_grad([1.0, 2.0], local_step=0))
    sess.run(ca.apply_grad([3.0, 4.0], local_step=0))
    assert sess.run(ca.num_accumulated()) == 2
    out = sess.run(ca.take_grad(2))
    np.testing.assert_array_equal(out, [2.0, 3.0])
    assert out.dtype == np.float32
    sess.run(ca.apply_grad([3.0, 4.0], local_step=0))  # global step is 1 now: stale
    assert sess.run(ca.num_accumulated()) == 0
    sess.run(ca.set_global_step(5))
    sess.run(ca.apply_grad([1.0, 1.0], local_step=4))
    sess.run(ca.apply_grad([1.0, 1.0], local_step=5))
    assert sess.run(ca.num_accumulated()) == 1
    s = ConditionalAccumulator(af.float64, shape=[], reduction_type="SUM", name="s")
    sess.run(s.apply_grad(1.5))
    sess.run(s.apply_grad(2.5))
    assert sess.run(s.take_grad(2)) == 4.0


def test_dense_errors(sess):
    ca = ConditionalAccumulator(af.float32)
    with pytest.raises(errors.InvalidArgumentError, match="num_required must be positive"):
        sess.run(ca.take_grad(0))
    x = placeholder(af.float32)
    apply = ca.apply_grad(x)
    sess.run(apply, {x: [1.0, 2.0]})
    with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
        sess.run(apply, {x: [1.0, 2.0, 3.0]})


def test_sparse_per_index_mean(sess):
    sa = SparseConditionalAccumulator(af.float32, shape=[4, 2])
    sess.run(sa.apply_grad([2, 0], [[1.0, 1.0], [2.0, 2.0]], local_step=0))
    sess.run(sa.apply_grad([2, 3], [[3.0, 3.0], [4.0, 4.0]], local_step=0))
    assert sess.run(sa.num_accumulated()) == 2
    idx, vals, shape = sess.run(sa.take_grad(2))
    assert list(idx) == [2, 0, 3] and idx.dtype == np.int64  # TF's order
    np.testing.assert_array_equal(vals, [[2.0, 2.0], [2.0, 2.0], [4.0, 4.0]])
    assert list(shape) == [4, 2]
    sess.run(sa.apply_grad([1], [[1.0, 1.0]], local_step=0))  # stale now
    assert sess.run(sa.num_accumulated()) == 0
    with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
        sess.run(sa.apply_grad([1], [[1.0, 1.0, 1.0]], local_step=9))


async def test_take_grad_waits_and_withdraws_on_timeout(graph):
    ca = ConditionalAccumulator(af.float32, shape=[])
    async with af.Session() as s:
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(ca.take_grad(1), options=af.RunOptions(timeout_in_ms=20))
        t = asyncio.create_task(s.arun(ca.take_grad(2)))
        await settle()
        await s.arun(ca.apply_grad(1.0))
        await settle()
        assert not t.done()
        await s.arun(ca.apply_grad(3.0))
        assert await t == 2.0


async def test_mutex_serialises_and_releases_on_failure(graph, probes):
    m = mutex_v2(shared_name="m")
    w = probes.waiter()
    lock1 = mutex_lock(m)
    with af.control_dependencies([lock1]):
        held = wait_op(constant(1), w)
    with af.control_dependencies([held]):
        release1 = consume_mutex_lock(lock1)
    lock2 = mutex_lock(m, name="second")
    release2 = consume_mutex_lock(lock2)
    async with af.Session() as s:
        t1 = asyncio.create_task(s.arun(release1))
        await settle()
        t2 = asyncio.create_task(s.arun(release2))
        await settle()
        assert not t1.done() and not t2.done()  # the second waits for the mutex
        w.release()
        await t1
        await t2
        # A step that fails while holding the lock releases it.
        w2 = probes.waiter()
        lock3 = mutex_lock(m, name="third")
        with af.control_dependencies([lock3]):
            stuck = wait_op(constant(1), w2)
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(stuck, options=af.RunOptions(timeout_in_ms=20))
        await s.arun(release2)  # would wait forever if the lock were still held
        # A lock that is fetched and dropped is released too (TF: tensor destruction).
        await s.arun(lock2)
        await settle()
        await s.arun(release2)


# -- a take whose step fails gives its gradients back ------------------------------------------

DEADLINE = af.RunOptions(timeout_in_ms=50)


def _fails_after(t, message="after take_grad"):
    """An op that runs after `t` (control dependency) and fails its step."""
    with af.control_dependencies([t if isinstance(t, af.Operation) else t.op]):
        return af.check_numerics(constant(np.float32(np.nan)), message)


def test_dense_take_then_failure_restores_sum_count_and_step(sess):
    ca = ConditionalAccumulator(af.float32, shape=[2])
    sess.run(ca.apply_grad([1.0, 2.0], local_step=0))
    sess.run(ca.apply_grad([3.0, 4.0], local_step=0))
    take = ca.take_grad(2)
    with pytest.raises(errors.InvalidArgumentError, match="after take_grad"):
        sess.run(_fails_after(take))
    assert sess.run(ca.num_accumulated()) == 2
    sess.run(ca.apply_grad([5.0, 6.0], local_step=0))  # global step is back at 0: not stale
    assert sess.run(ca.num_accumulated()) == 3
    np.testing.assert_array_equal(sess.run(take), [3.0, 4.0])
    sess.run(ca.apply_grad([9.0, 9.0], local_step=0))  # the successful take advanced it
    assert sess.run(ca.num_accumulated()) == 0


def test_sparse_take_then_failure_restores_rows_in_order(sess):
    sa = SparseConditionalAccumulator(af.float32, shape=[4, 2])
    sess.run(sa.apply_grad([2, 0], [[1.0, 1.0], [2.0, 2.0]], local_step=0))
    sess.run(sa.apply_grad([2, 3], [[3.0, 3.0], [4.0, 4.0]], local_step=0))
    take = sa.take_grad(2)
    with pytest.raises(errors.InvalidArgumentError, match="after take_grad"):
        sess.run(_fails_after(take.indices))
    assert sess.run(sa.num_accumulated()) == 2
    idx, vals, shape = sess.run(take)
    assert list(idx) == [2, 0, 3] and list(shape) == [4, 2]
    np.testing.assert_array_equal(vals, [[2.0, 2.0], [2.0, 2.0], [4.0, 4.0]])


def test_successful_take_is_not_undone(sess):
    ca = ConditionalAccumulator(af.float32, shape=[])
    sess.run(ca.apply_grad(1.0))
    assert sess.run(ca.take_grad(1)) == 1.0
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(_fails_after(ca.num_accumulated()))  # a later failing step: no effect
    assert sess.run(ca.num_accumulated()) == 0


async def test_waiting_take_that_times_out_leaves_the_accumulator_untouched(graph):
    ca = ConditionalAccumulator(af.float32, shape=[])
    async with af.Session() as s:
        await s.arun(ca.apply_grad(2.0, local_step=0))
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun(ca.take_grad(2), options=DEADLINE)
        assert await s.arun(ca.num_accumulated()) == 1
        await s.arun(ca.apply_grad(4.0, local_step=0))  # global step unchanged: accepted
        assert await s.arun(ca.take_grad(2)) == 3.0


async def test_take_served_then_step_times_out_restores(graph, probes):
    ca = ConditionalAccumulator(af.float32, shape=[])
    w = probes.waiter()
    take = ca.take_grad(1)
    async with af.Session() as s:
        await s.arun(ca.apply_grad(5.0))
        with pytest.raises(errors.DeadlineExceededError):
            await s.arun([take, wait_op(take, w)], options=DEADLINE)
        assert await s.arun(ca.num_accumulated()) == 1
        assert await s.arun(take) == 5.0


async def test_waiting_take_served_then_step_cancelled_restores_with_later_grads(graph, probes):
    sa = SparseConditionalAccumulator(af.float32, shape=[None, 1])
    w = probes.waiter()
    take = sa.take_grad(1)
    async with af.Session() as s:
        t = asyncio.create_task(s.arun([take.values, wait_op(take.values, w)]))
        await settle()
        await s.arun(sa.apply_grad([7], [[1.0]], local_step=0))  # serves the waiting take
        await w.started()
        assert await s.arun(sa.num_accumulated()) == 0
        # Global step is 1 now: a gradient of step 1 is accepted meanwhile.
        await s.arun(sa.apply_grad([7, 8], [[3.0], [5.0]], local_step=1))
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        # Both are there: the taken one merged back first, and the global step is back
        # at 0 (nothing moved it since the take).
        assert await s.arun(sa.num_accumulated()) == 2
        await s.arun(sa.apply_grad([9], [[1.0]], local_step=0))
        assert await s.arun(sa.num_accumulated()) == 3
        idx, vals, _ = await s.arun(take)
        assert list(idx) == [7, 8, 9]
        np.testing.assert_array_equal(vals, [[2.0], [5.0], [1.0]])


def test_restore_keeps_a_global_step_moved_since(sess):
    ca = ConditionalAccumulator(af.float32, shape=[])
    sess.run(ca.apply_grad(1.0))
    take = ca.take_grad(1)
    with af.control_dependencies([take.op]):
        moved = ca.set_global_step(10)
    with pytest.raises(errors.InvalidArgumentError, match="after take_grad"):
        sess.run(_fails_after(moved))
    assert sess.run(ca.num_accumulated()) == 1  # the gradient is back ...
    sess.run(ca.apply_grad(1.0, local_step=9))  # ... the global step stays at 10: stale
    assert sess.run(ca.num_accumulated()) == 1


async def test_resource_take_without_a_step_restores_when_cancelled_after_service():
    from asyncflow.ops.accumulator_ops import DenseAccumulator

    acc = DenseAccumulator("r", af.float32, [], "MEAN")
    t = asyncio.create_task(acc.take(1))
    await settle()
    acc.apply(np.float32(3.0), 0)
    t.cancel()  # served, but cancelled before the task resumed
    with pytest.raises(asyncio.CancelledError):
        await t
    assert acc.count == 1 and acc.global_step == 0 and not acc._takers
    assert await acc.take(1) == 3.0
