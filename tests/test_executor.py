"""The ready-count executor: error handling, suspension, plan caching, scale, lifetimes."""

import asyncio
import sys

import numpy as np
import pytest
from _testing_ops import (
    count_op,
    fail_op,
    is_freed,
    make_big,
    release_op,
    settle,
    size_op,
    wait_op,
)

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.array_ops import constant, identity, placeholder
from asyncflow.ops.control_flow_ops import group

pytestmark = pytest.mark.usefixtures("graph")


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, cls, text",
    [
        ("value", errors.UnknownError, "ValueError: boom from TestFailOp"),
        ("memory", errors.ResourceExhaustedError, "test allocation failed"),
        ("invalid", errors.InvalidArgumentError, "bad argument from TestFailOp"),
        ("not_found", errors.NotFoundError, "nothing here"),
        ("cancelled", errors.CancelledError, "cancelled"),
    ],
)
def test_kernel_errors_become_typed_op_errors(sess, kind, cls, text):
    bad = fail_op(constant(1.0), kind, name="the_bad_op")
    with pytest.raises(cls) as ei:
        sess.run(identity(bad))
    err = ei.value
    assert type(err) is cls  # not a subclass accident: exactly the mapped class
    assert err.op is bad.op
    assert text in str(err)
    assert "the_bad_op" in str(err)
    assert "_testing_ops.py" in str(err) or "test_executor.py" in str(err)  # where defined
    if kind in ("value", "memory"):
        assert isinstance(err.__cause__, ValueError if kind == "value" else MemoryError)
    assert sess.run(constant(2.0)) == 2.0


def test_error_after_suspension_is_typed_and_names_op(sess, probes):
    w = probes.waiter()
    bad = fail_op(constant(1.0), "memory", waiter=w, name="late_failure")
    w.release()  # the kernel still goes through the gate, on the Task path if suspended
    with pytest.raises(errors.ResourceExhaustedError, match="late_failure"):
        sess.run(bad)


async def test_error_after_suspension_arun(graph, probes):
    w = probes.waiter()
    bad = fail_op(constant(1.0), "value", waiter=w, name="late_failure")
    async with af.Session() as s:
        task = asyncio.create_task(s.arun(bad))
        await w.started()
        await settle()
        assert not task.done()
        w.release()
        with pytest.raises(errors.UnknownError, match="late_failure") as ei:
            await task
        assert ei.value.op is bad.op


async def test_error_aborts_step_and_cancels_suspended_kernels(graph, probes):
    w = probes.waiter()
    after = probes.counter()
    slow = count_op(wait_op(constant(1.0), w), after)
    bad = fail_op(constant(2.0), "invalid", name="breaks_the_step")
    async with af.Session() as s:
        # `slow` comes first in the fetch order, so it is parked before `bad` runs.
        with pytest.raises(errors.InvalidArgumentError, match="breaks_the_step") as ei:
            await s.arun([slow, bad])
        assert ei.value.op is bad.op
        await w.ended()
        assert w.suspended == 1
        assert after.n == 0  # nothing downstream of the parked kernel ran
        assert await s.arun(constant(3.0)) == 3.0


async def test_kernel_parked_in_the_failing_drive_observes_cancellation(graph, probes):
    w = probes.waiter()
    slow = wait_op(constant(1.0), w)
    bad = fail_op(constant(2.0), "invalid")
    async with af.Session() as s:
        with pytest.raises(errors.InvalidArgumentError):
            await s.arun([slow, bad])
        await w.ended()
        assert w.cancelled == 1  # its cleanup (e.g. a queue's waiter list) must run


async def test_kernel_parked_before_a_later_failure_observes_cancellation(graph, probes):
    w = probes.waiter()
    trigger = probes.waiter("trigger")
    slow = wait_op(constant(1.0), w)
    bad = fail_op(constant(2.0), "invalid", waiter=trigger, name="fails_later")
    async with af.Session() as s:
        task = asyncio.create_task(s.arun([slow, bad]))
        await w.started()
        await trigger.started()
        await settle()
        trigger.release()
        with pytest.raises(errors.InvalidArgumentError, match="fails_later"):
            await task
        await w.ended()
        assert w.cancelled == 1


def test_first_error_wins(sess):
    a = fail_op(constant(1.0), "invalid", name="first")
    b = fail_op(constant(1.0), "not_found", name="second")
    with pytest.raises(errors.OpError) as ei:
        sess.run([a, b])
    assert ei.value.op in (a.op, b.op)
    assert type(ei.value) is (
        errors.InvalidArgumentError if ei.value.op is a.op else errors.NotFoundError
    )


# -- suspension --------------------------------------------------------------------------


async def test_suspended_kernel_does_not_block_other_ready_kernels(graph, probes):
    w = probes.waiter()
    waits = wait_op(constant(1.0), w)
    # `releases` can only run if the executor goes on while `waits` is suspended.
    releases = release_op(constant(2.0), w)
    async with af.Session() as s:
        opts = af.RunOptions(timeout_in_ms=20_000)  # a regression fails, never hangs
        assert await s.arun([waits, releases], options=opts) == [1.0, 2.0]
    assert w.suspended == 1


def test_suspended_kernel_does_not_block_other_ready_kernels_sync(sess, probes):
    w = probes.waiter()
    waits = identity(wait_op(identity(constant(1.0)), w))
    releases = identity(release_op(identity(constant(2.0)), w))
    opts = af.RunOptions(timeout_in_ms=20_000)
    assert sess.run({"w": waits, "r": releases}, options=opts) == {"w": 1.0, "r": 2.0}
    assert w.suspended == 1


async def test_many_suspended_kernels_in_one_step(graph, probes):
    gates = [probes.waiter(f"g{i}") for i in range(50)]
    outs = [wait_op(constant(float(i)), g) for i, g in enumerate(gates)]
    async with af.Session() as s:
        task = asyncio.create_task(s.arun(outs))
        for g in gates:
            await g.started()
        await settle()
        assert not task.done()
        for g in reversed(gates):
            g.release()
        assert await task == [float(i) for i in range(50)]


async def test_control_dependency_waits_for_suspended_kernel(graph, probes):
    w = probes.waiter()
    gate = wait_op(constant(0.0), w)
    with af.control_dependencies([gate.op]):
        after = identity(constant(5.0))
    async with af.Session() as s:
        task = asyncio.create_task(s.arun([after, group(gate.op)]))
        await w.started()
        await settle()
        assert not task.done()
        w.release()
        assert await task == [5.0, None]


async def test_kernel_timeout_inside_kernel_applies_to_the_kernel(graph, probes):
    """A kernel's own `asyncio.timeout` must fire on the kernel, not on the caller's task.

    Kernels are first driven inline in the caller's task (no Task per kernel), so a
    kernel that enters `asyncio.timeout()` before its first suspension arms it on
    `asyncio.current_task()` -- the task awaiting `arun`.
    """
    w = probes.waiter()
    y = wait_op(constant(1.0), w, timeout_s=0.05, name="kernel_with_timeout")
    async with af.Session() as s:
        try:
            await s.arun(y)
        except errors.DeadlineExceededError as e:
            assert "kernel_with_timeout" in str(e)
        except BaseException as e:  # noqa: BLE001 - report what escaped instead
            pytest.fail(f"expected DeadlineExceededError from the kernel, got {e!r}")
        else:
            pytest.fail("the kernel's timeout never fired")


# -- plans -------------------------------------------------------------------------------


def test_plan_is_cached_per_fetches_and_feeds(sess):
    x = placeholder(af.float32, [], name="x")
    y = identity(x)
    z = identity(y)
    for v in range(5):
        assert sess.run(y, {x: v}) == v
    assert len(sess._plans) == 1
    assert sess.run([y], {x: 1.0}) == [1.0]  # same flat fetches, other structure
    assert sess.run({"k": y}, {x: 1.0}) == {"k": 1.0}
    assert len(sess._plans) == 1
    sess.run(z, {x: 1.0})
    assert len(sess._plans) == 2
    sess.run(z, {y: 1.0})  # other feeds: another plan
    assert len(sess._plans) == 3
    sess.run(z, {x: 2.0})
    sess.run(y, {x: 2.0})
    assert len(sess._plans) == 3


def test_plan_cache_shared_by_make_callable(sess):
    x = placeholder(af.float32, [])
    y = identity(x)
    f = sess.make_callable(y, feed_list=[x])
    for v in range(5):
        assert f(float(v)) == v
    assert len(sess._plans) == 1


def test_graph_growth_after_run_is_seen(sess):
    c = constant(1.0)
    assert sess.run(c) == 1.0
    d = identity(c)  # built after the first run
    assert sess.run([c, d]) == [1.0, 1.0]


def test_no_kernel_for_device_is_invalid_argument(sess):
    from asyncflow.registry import register_op

    op_def = register_op(
        "TestNoCpuKernelOp", outputs=["y: float32"], shape_fn=lambda op: [af.TensorShape([])]
    )
    try:
        from asyncflow import graph as ops

        y = ops.apply_op("TestNoCpuKernelOp", []).outputs[0]
        with pytest.raises(errors.InvalidArgumentError, match="TestNoCpuKernelOp"):
            sess.run(y)
        assert sess.run(constant(1.0)) == 1.0
    finally:
        from asyncflow import registry

        registry._REGISTRY.pop(op_def.name, None)  # keep the registry test's invariant


# -- scale -------------------------------------------------------------------------------


def test_long_chain_has_no_recursion_limit(sess):
    n = 20_000
    assert n > 10 * sys.getrecursionlimit()
    x = placeholder(af.float32, [2], name="x")
    y = x
    for _ in range(n):
        y = identity(y)
    np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0]}), [1.0, 2.0])
    np.testing.assert_array_equal(sess.run(y, {x: [3.0, 4.0]}), [3.0, 4.0])
    assert len(sess._plans) == 1


def test_wide_fan_out_and_in(sess):
    x = placeholder(af.float32, [], name="x")
    branches = [identity(x) for _ in range(2_000)]
    out = sess.run(branches, {x: 7.0})
    assert out == [7.0] * 2_000


# -- lifetimes ---------------------------------------------------------------------------


def test_intermediate_released_after_last_consumer(sess):
    big = make_big("lifetime-data")
    n = size_op(big)
    freed = is_freed(n, "lifetime-data")  # runs after `big`'s only consumer
    assert sess.run([n, freed]) == [1 << 16, True]


def test_intermediate_released_before_zero_input_successor(sess):
    big = make_big("lifetime-control")
    n = size_op(big)
    with af.control_dependencies([n.op]):
        freed = is_freed(None, "lifetime-control")
    assert sess.run([n, freed]) == [1 << 16, True]


def test_fetched_intermediate_is_returned_not_released(sess):
    big = make_big("lifetime-fetched", n=8)
    n = size_op(big)
    value, size = sess.run([big, n])
    np.testing.assert_array_equal(value, np.ones(8))
    assert size == 8


# -- constant folding at plan time -----------------------------------------------------------


def _folded(sess, node_name):
    """Whether the cached plans run `node_name` with a folded (constant) kernel."""
    for sp in sess._plans.values():
        for plan in sp.plans:
            for i, op in enumerate(plan.nodes):
                if op.name == node_name:
                    return i in plan.rewritten
    raise AssertionError(f"{node_name} not in any plan")


def test_constant_subgraph_folds_to_a_read_only_value():
    dims = constant([2, 3])
    filled = af.fill(dims, constant(1.5), name="filled")
    doubled = af.multiply(filled, 2.0)
    with af.Session() as sess:
        a = sess.run(filled)
        np.testing.assert_array_equal(a, np.full((2, 3), 1.5, np.float32))
        np.testing.assert_array_equal(sess.run(doubled), np.full((2, 3), 3.0, np.float32))
        assert _folded(sess, "filled")
        # The folded value is shared by every step: a consumer must not write into it,
        # and a fetch that the caller mutates must not change the next step's value.
        a = np.array(a)
        a += 1
        np.testing.assert_array_equal(sess.run(doubled), np.full((2, 3), 3.0, np.float32))


def test_feeding_a_constant_upstream_disables_the_fold():
    value = constant(4.0, name="value")
    filled = af.fill(constant([2]), value, name="filled")
    with af.Session() as sess:
        np.testing.assert_array_equal(sess.run(filled, {value: 7.0}), [7.0, 7.0])
        assert not _folded(sess, "filled")
        np.testing.assert_array_equal(sess.run(filled), [4.0, 4.0])


def test_feed_in_another_partition_disables_the_fold():
    with af.device("/cpu:0"):
        value = constant(4.0, af.float64, name="value")
        cast = af.cast(value, af.float32)  # computed here, sent to cpu:1
    with af.device("/cpu:1"):
        filled = af.fill(constant([2]), cast, name="filled")
    with af.Session(config=af.ConfigProto(device_count={"CPU": 2})) as sess:
        np.testing.assert_array_equal(sess.run(filled, {value: 7.0}), [7.0, 7.0])
        np.testing.assert_array_equal(sess.run(filled), [4.0, 4.0])


def test_cancel_tasks_off_the_loop_cancels_when_the_loop_next_runs():
    """Session.close from the caller's thread while nothing drives the runtime loop
    (Runtime.cancel_if_idle) aborts a step that still has suspended kernels: its
    cancel_tasks runs with no running loop.  It raised RuntimeError ('no running event
    loop', from asyncio.current_task) and the close failed; the tasks must instead be
    cancelled when the loop next runs (tests/data/test_resampling.py hit it ~1 run in 4)."""
    import types

    from asyncflow.executor import Step

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(asyncio.sleep(3600))
        step = types.SimpleNamespace(tasks={task}, loop=loop)
        Step.cancel_tasks(step)  # (no loop is running here)
        loop.run_until_complete(asyncio.sleep(0))
        assert task.cancelled()
    finally:
        loop.close()
