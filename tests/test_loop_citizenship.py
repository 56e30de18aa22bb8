"""The runtime shares its event loop: long inline work yields, heavy work leaves the loop,
and sessions follow their users from one loop to the next.

Deterministic: slices are made zero-length (every kernel is past the deadline) instead
of timing real work, and the cost model is checked through its decisions.
"""

import asyncio
import threading

import numpy as np
import pytest
from _testing_ops import count_op, new_counter

import asyncflow as af
from asyncflow import executor, loop_slices, lowering
from asyncflow import session as session_mod
from asyncflow.devices import cpu
from asyncflow.ops.control_flow_ops import while_loop

# -- yielding between kernels ----------------------------------------------------------


def _count_chain(counter, n):
    x = af.constant(1.0)
    for _ in range(n):
        x = count_op(x, counter)
    return x


async def test_never_suspending_arun_step_lets_a_callback_run(graph, monkeypatch):
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)  # every kernel spends the slice
    counter = new_counter()
    y = _count_chain(counter, 50)
    seen = []
    async with af.Session() as s:
        await s.arun(af.constant(0.0))  # bound; plans of the next step not yet built
        asyncio.get_running_loop().call_soon(lambda: seen.append(counter.n))
        assert await s.arun(y) == 1.0
    assert counter.n == 50
    assert len(seen) == 1 and seen[0] < 50  # it ran before the step's last kernel


@pytest.mark.parametrize("prepared", [False, True], ids=["arun", "make_async_callable"])
async def test_back_to_back_aruns_share_the_slice(graph, monkeypatch, prepared):
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)
    counter = new_counter()
    y = count_op(af.constant(1.0), counter)
    seen = []
    async with af.Session() as s:
        step = s.make_async_callable(y) if prepared else lambda: s.arun(y)
        await step()
        asyncio.get_running_loop().call_soon(lambda: seen.append(counter.n))
        for _ in range(5):  # one kernel each: the yield comes between steps' kernels
            await step()
    assert seen and seen[0] < 6


@pytest.mark.parametrize("general", [False, True], ids=["compiled", "general"])
async def test_never_suspending_loop_lets_a_callback_run(graph, monkeypatch, general):
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)
    monkeypatch.setattr(lowering, "_NO_COMPILED_LOOPS", general)
    counter = new_counter()
    i = while_loop(lambda i: i < 40, lambda i: count_op(i + 1, counter), [af.constant(0)])
    seen = []
    async with af.Session() as s:
        await s.arun(af.constant(0))
        asyncio.get_running_loop().call_soon(lambda: seen.append(counter.n))
        assert await s.arun(i) == 40
    assert counter.n == 40
    assert len(seen) == 1 and seen[0] < 40


def test_a_synchronous_caller_keeps_its_loop(graph, monkeypatch):
    monkeypatch.setattr(session_mod, "_runtime", None)  # a loop without a thread yet
    # Driving its own step inline, a sync caller has nobody to yield to: its slices
    # are CALLER_SLICE_S long, whatever SLICE_S is.
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)
    monkeypatch.setattr(loop_slices, "CALLER_SLICE_S", 3600.0)
    yields = []

    class CountingYield:
        def __await__(self):
            yields.append(1)
            yield

    monkeypatch.setattr(executor, "_YIELD_TO_LOOP", CountingYield())
    counter = new_counter()
    y = _count_chain(counter, 20)
    with af.Session() as s:
        assert s.run(y) == 1.0
    assert counter.n == 20 and not yields

    async def main():  # the same step on a shared loop yields between its kernels
        async with af.Session() as s:
            return await s.arun(y)

    assert asyncio.run(main()) == 1.0
    assert counter.n == 40 and yields


# -- the cost model --------------------------------------------------------------------


def test_estimates_count_the_result_not_only_the_inputs():
    col, row = np.ones((4096, 1), np.float32), np.ones((1, 4096), np.float32)
    assert cpu.estimate_seconds(np.matmul, (col, row)) > cpu.INLINE_S  # 64 MiB written
    assert cpu.estimate_seconds(np.add, (col, row)) > cpu.INLINE_S  # broadcast alike
    small = np.ones((8, 8), np.float32)
    assert cpu.estimate_seconds(np.matmul, (small, small)) < cpu.SHARED_INLINE_S
    big_gemm = np.ones((1024, 1024), np.float32)
    assert cpu.estimate_seconds(np.matmul, (big_gemm, big_gemm)) > cpu.INLINE_S  # flops
    assert cpu.estimate_seconds(np.negative, (small,), cost=float(1 << 30)) > cpu.INLINE_S


async def test_heavy_by_estimate_kernel_goes_to_a_worker_under_arun(graph):
    a = af.placeholder(af.float32, [4096, 1])
    b = af.placeholder(af.float32, [1, 4096])
    outer = af.matmul(a, b)
    total = af.reduce_sum(outer)
    c = af.placeholder(af.float32, [4, 4])
    small = af.matmul(c, c)
    feed = {a: np.full((4096, 1), 0.5, np.float32), b: np.full((1, 4096), 2.0, np.float32)}
    async with af.Session() as s:
        dev = s._devices[0]
        np.testing.assert_allclose(
            await s.arun(small, {c: np.eye(4, dtype=np.float32)}), np.eye(4)
        )
        assert dev.offloaded == 0
        assert await s.arun(total, feed) == 4096 * 4096
        assert dev.offloaded >= 1  # the product (and the sum of 64 MiB) ran on a worker


async def test_large_variable_updates_go_to_a_worker_under_arun(graph):
    # 4M float32 (16 MiB) per buffer: every update below is estimated far over INLINE_S.
    n = 1 << 22
    v = af.Variable(np.zeros(n, np.float32))
    g = af.placeholder(af.float32, [n])
    sgd = af.train.GradientDescentOptimizer(0.5).apply_gradients([(g, v)])
    bump = af.assign_add(v, g)
    tiny = af.Variable(np.zeros(4, np.float32))
    tiny_bump = af.assign_add(tiny, af.ones([4]))
    grad = np.full(n, 2.0, np.float32)
    async with af.Session() as s:
        dev = s._devices[0]
        await s.arun(af.global_variables_initializer())
        await s.arun(tiny_bump)
        before = dev.offloaded
        await s.arun(tiny_bump)
        assert dev.offloaded == before  # cheap: inline
        await s.arun(sgd, {g: grad})
        assert dev.offloaded == before + 1  # v -= 0.5 * g on a worker
        await s.arun(bump, {g: grad})
        assert dev.offloaded == before + 2  # v += g on a worker
        np.testing.assert_array_equal(await s.arun(v), np.ones(n, np.float32))


def test_a_caller_driven_step_computes_inline(graph, monkeypatch):
    monkeypatch.setattr(cpu, "_share_count", 0)  # a lone device (whatever other tests left)
    monkeypatch.setattr(session_mod, "_runtime", None)  # a loop without a thread yet
    a = af.placeholder(af.float32, [4096, 1])
    b = af.placeholder(af.float32, [1, 4096])
    total = af.reduce_sum(af.matmul(a, b))
    feed = {a: np.ones((4096, 1), np.float32), b: np.ones((1, 4096), np.float32)}
    with af.Session() as s:
        assert s.run(total, feed) == 4096 * 4096
        assert s._devices[0].offloaded == 0  # its thread waits anyway: no hop


async def test_measured_time_corrects_the_estimate(monkeypatch):
    monkeypatch.setattr(cpu, "_MEASURED", {})
    monkeypatch.setattr(cpu, "_SAMPLES", {})
    # Every measured call takes 1 us (a preempted run on a loaded machine must not
    # decide this test): the clock advances that much per reading.
    ticks = iter(range(1 << 30))
    monkeypatch.setattr(cpu, "_clock", lambda: next(ticks) * 1e-6)
    dev = cpu.CPUDevice(cpu.local_cpu_name())
    try:
        x = np.ones(4, np.float32)
        key = cpu._call_key(np.add, (x, x))
        assert cpu.estimate_seconds(np.add, (x, x)) < cpu.INLINE_S
        for _ in range(2):
            np.testing.assert_array_equal(await dev.compute(np.add, x, x), 2 * x)
        assert dev.offloaded == 0
        assert cpu._MEASURED[key] < cpu.INLINE_S  # two inline runs measured
        cpu._SAMPLES[key][:] = [1.0, 1.0]  # as if such calls had been slow
        cpu._MEASURED[key] = 1.0
        np.testing.assert_array_equal(await dev.compute(np.add, x, x), 2 * x)
        assert dev.offloaded == 1
        assert cpu._MEASURED[key] == 1.0  # one fast run on the worker: still the median
        np.testing.assert_array_equal(await dev.compute(np.add, x, x), 2 * x)
        assert dev.offloaded == 2
        assert cpu._MEASURED[key] < cpu.INLINE_S  # two fast runs of three: inline again
    finally:
        dev.close()


# -- sessions across loops -------------------------------------------------------------


def test_asyncio_run_twice_with_one_session(graph):
    v = af.Variable(1.0)
    bump = af.assign_add(v, 1.0)
    s = af.Session()

    async def first():
        await s.arun(v.initializer)
        return await s.arun(bump)

    async def second():
        async with s:  # (closes the session on the way out)
            return await s.arun(bump)

    assert asyncio.run(first()) == 2.0
    assert asyncio.run(second()) == 3.0  # the closed loop was left, the state kept
    assert s._closed


def test_sync_run_after_the_async_loop_closed(graph):
    c = af.constant(3.0)
    s = af.Session()
    try:

        async def use():
            return await s.arun(c)

        assert asyncio.run(use()) == 3.0
        assert s.run(c) == 3.0  # rebound to the runtime loop
        assert asyncio.run(use()) == 3.0  # bridged to it
    finally:
        s.close()


def test_arun_while_bound_to_a_loop_running_elsewhere_is_a_clear_error(graph):
    c = af.constant(4.0)
    s = af.Session()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        assert asyncio.run_coroutine_threadsafe(s.arun(c), loop).result(10) == 4.0

        async def elsewhere():
            return await s.arun(c)

        with pytest.raises(RuntimeError, match="running in another thread"):
            asyncio.run(elsewhere())
        assert s.run(c) == 4.0  # a blocking run from this thread is handed to that loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        s.close()


async def test_a_small_broadcast_with_a_large_result_is_not_judged_by_its_inputs(graph):
    # [2000,1] + [1,2000]: 16 KiB in, 16 MiB out. The elementwise fast path must not run
    # it inline on the loop because its inputs are small; the cost model decides.
    a = af.placeholder(af.float32, [2000, 1])
    b = af.placeholder(af.float32, [1, 2000])
    feed = {a: np.full((2000, 1), 0.5, np.float32), b: np.full((1, 2000), 2.0, np.float32)}
    async with af.Session() as s:
        dev = s._devices[0]
        got = await s.arun(a + b, feed)
        assert got.shape == (2000, 2000) and (got == 2.5).all()
        assert dev.offloaded == 1  # the broadcast add, the step's only kernel


# -- issue 13's performance pass: fewer Tasks, plan-time decisions, no flip-flop ---------


async def test_a_short_step_past_its_slice_ends_without_parking(graph, monkeypatch):
    # The slice is spent before the step's only kernel runs: the driver's one grace (a
    # tenth of a slice, here 10 s) lets the step end instead of parking it in a Task.
    monkeypatch.setattr(loop_slices, "SLICE_S", 100.0)
    counter = new_counter()
    x = af.placeholder(af.float32, [])
    y = count_op(x, counter)
    async with af.Session() as s:
        await s.arun(y, {x: 1.0})  # bound, its plan built
        mp = s._master.plan([x], [y])
        loop = asyncio.get_running_loop()
        loop_slices._DEADLINES[loop] = 0.0  # spent long ago
        step = executor.Step(mp.plans[0], [np.float32(2.0)])
        step.start()
        assert not step.tasks  # ended inline: no driver parked
        assert step.results() == [2.0]
        assert counter.n == 2


def test_the_plan_estimates_known_ops_from_static_shapes(graph):
    col = af.placeholder(af.float32, [4096, 1])
    row = af.placeholder(af.float32, [1, 4096])
    small = af.placeholder(af.float32, [4, 4])
    batch = af.placeholder(af.float32, [None, 4])
    images = af.placeholder(af.float32, [64, 28, 28, 32])
    filters = af.constant(np.zeros((5, 5, 32, 64), np.float32))
    assert cpu.plan_seconds(af.matmul(col, row).op) > 4 * cpu.INLINE_S  # 64 MiB written
    assert cpu.plan_seconds(af.matmul(small, small).op) < cpu.INLINE_S / 4
    assert cpu.plan_seconds(af.matmul(batch, small).op) is None  # the batch is not fixed
    conv = af.nn.conv2d(images, filters, [1, 1, 1, 1], "SAME")
    assert cpu.plan_seconds(conv.op) > 4 * cpu.INLINE_S  # 1.6 GFLOP
    assert cpu.plan_seconds((small + small).op) is None  # not in the table: per call


async def test_plan_decided_kernels_skip_the_per_call_model(graph, monkeypatch):
    col = af.placeholder(af.float32, [4096, 1])
    row = af.placeholder(af.float32, [1, 4096])
    total = af.reduce_sum(af.matmul(col, row))
    small = af.placeholder(af.float32, [4, 4])
    product = af.matmul(small, small)
    judged = []
    call_key = cpu._call_key
    monkeypatch.setattr(
        cpu, "_call_key", lambda fn, args: judged.append(args) or call_key(fn, args)
    )
    feed = {col: np.ones((4096, 1), np.float32), row: np.ones((1, 4096), np.float32)}
    async with af.Session() as s:
        dev = s._devices[0]
        eye = np.eye(4, dtype=np.float32)
        np.testing.assert_array_equal(await s.arun(product, {small: eye}), eye)
        assert dev.offloaded == 0  # cheap by the plan: inline
        assert await s.arun(total, feed) == 4096 * 4096
        assert dev.offloaded >= 1  # heavy by the plan: on a worker
    shapes = {getattr(a, "shape", None) for args in judged for a in args}
    assert (4, 4) not in shapes and (4096, 1) not in shapes  # neither judged per call


async def test_a_settled_cheap_kind_is_timed_only_now_and_then(monkeypatch):
    monkeypatch.setattr(cpu, "_MEASURED", {})
    monkeypatch.setattr(cpu, "_SAMPLES", {})
    monkeypatch.setattr(cpu, "_UNTIMED", {})
    readings = []

    def clock():
        readings.append(1)
        return len(readings) * 1e-6  # every timed call: 1 us, well under the limit

    monkeypatch.setattr(cpu, "_clock", clock)
    dev = cpu.CPUDevice(cpu.local_cpu_name())
    try:
        x = np.ones(4, np.float32)
        for _ in range(2):  # two timed runs settle the kind
            await dev.compute(np.add, x, x)
        assert len(readings) == 4
        for _ in range(cpu.RETIME_EVERY - 1):
            np.testing.assert_array_equal(await dev.compute(np.add, x, x), 2 * x)
        assert len(readings) == 4  # untimed
        await dev.compute(np.add, x, x)
        assert len(readings) == 6  # the RETIME_EVERY-th call is timed again
        key = cpu._call_key(np.add, (x, x))
        cpu._SAMPLES[key][:] = [1.0, 1.0, 1.0]  # as if the kind had become slow
        cpu._MEASURED[key] = 1.0
        await dev.compute(np.add, x, x)
        assert dev.offloaded == 1  # not settled any more: judged, and sent to a worker
    finally:
        dev.close()


async def test_a_kind_back_from_the_worker_must_be_well_under_the_limit(monkeypatch):
    monkeypatch.setattr(cpu, "_MEASURED", {})
    monkeypatch.setattr(cpu, "_SAMPLES", {})
    monkeypatch.setattr(cpu, "_WENT_TO_WORKER", set())
    dev = cpu.CPUDevice(cpu.local_cpu_name())
    try:
        x = np.ones(4, np.float32)
        key = cpu._call_key(np.add, (x, x))
        near = 0.7 * cpu.INLINE_S  # under the limit, over half of it
        cpu._SAMPLES[key] = [near, near, near]
        cpu._MEASURED[key] = near
        await dev.compute(np.add, x, x)
        assert dev.offloaded == 0  # never went to a worker: inline
        cpu._WENT_TO_WORKER.add(key)
        cpu._SAMPLES[key][:] = [near, near, near]
        cpu._MEASURED[key] = near
        np.testing.assert_array_equal(await dev.compute(np.add, x, x), 2 * x)
        assert dev.offloaded == 1  # went before: stays until well under the limit
    finally:
        dev.close()


async def test_a_leased_variable_is_copied_as_the_devices_work():
    from asyncflow.ops import state_ops

    ref = state_ops.VarRef(af.float32)
    ref.assign(np.arange(4, dtype=np.float32), True)
    held = ref.read()  # a reader's lease is alive: the update must not write in place
    calls = []

    class Device:
        async def compute(self, fn, *args, cost=None):
            calls.append(fn)
            return fn(*args)

    buf = await ref.writable_target_on(Device())
    assert len(calls) == 1 and buf.flags.writeable
    buf += 1
    ref.commit(buf)
    np.testing.assert_array_equal(held, np.arange(4))  # the reader's value is unchanged
    del held
    buf = await ref.writable_target_on(Device())  # no lease now: in place, no copy
    assert len(calls) == 1 and buf is ref.value
    buf += 1
    ref.commit(buf)
    np.testing.assert_array_equal(ref.read(), np.arange(4) + 2)
