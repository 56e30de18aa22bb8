"""Side lanes: a caller-driven step of a session with `inter_op_parallelism_threads=2`
runs a heavy kernel on a worker beside its other ready nodes (devices/cpu.py, TF's
inter-op parallelism).

The fixture makes the lanes' conditions hold on any machine: two cores in the budget,
no other process's runnable thread, every kind of call heavy enough.  References: the
same steps with side lanes off (`inter_op_parallelism_threads=1`, TF's one-at-a-time),
and NumPy.  Products run on one BLAS thread throughout (TF_DETERMINISTIC_OPS), so the
two runs' bits can be compared.
"""

import threading
import time

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import session as session_module
from asyncflow.devices import cpu, cpu_budget
from asyncflow.ops import fused_elementwise


@pytest.fixture
def lanes(monkeypatch):
    """Side lanes possible for every kind measured twice, whatever the machine."""
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    monkeypatch.setattr(cpu, "SIDE_S", 1e-9)
    monkeypatch.setattr(cpu, "_SIDE_LANES", None)  # (as without ASYNCFLOW_SIDE_LANES)
    monkeypatch.setattr(cpu, "_SIDE_RECORDS", {})
    # The branches' Tanh stays a kernel of its own (where numba is, it would fuse alone
    # into a compiled loop of a few microseconds, run inline).
    monkeypatch.setattr(fused_elementwise, "_ALONE", {})
    # A runtime of our own, whose loop no earlier test moved to a thread of its own:
    # synchronous steps are then driven by the caller (side lanes are for those).
    monkeypatch.setattr(session_module, "_runtime", None)
    before = cpu_budget.deterministic()
    cpu_budget.set_deterministic(True)
    yield
    cpu_budget.set_deterministic(before)
    cpu_budget.restore_blas()
    runtime = session_module._runtime
    if runtime is not None:
        if runtime.thread is not None:
            runtime.loop.call_soon_threadsafe(runtime.loop.stop)
            runtime.thread.join(10)
        runtime.loop.close()
    assert cpu_budget._side == 0  # every lane gave its core back


def _two_branches(seed=0):
    """Two independent chains of products joined at the end; their inputs."""
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((128, 128)).astype(np.float32) / 8 for _ in range(4)]
    x = af.placeholder(af.float32, [64, 128], name="x")
    left = af.matmul(af.tanh(af.matmul(x, ws[0], name="left_a")), ws[1], name="left_b")
    right = af.matmul(af.sigmoid(af.matmul(x, ws[2], name="right_a")), ws[3], name="right_b")
    return x, left + right, ws


def _reference(xv, ws):
    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    return np.tanh(xv @ ws[0]) @ ws[1] + sigmoid(xv @ ws[2]) @ ws[3]


def _run_steps(inter_op: int, steps: int = 12, intra_op: int = 0):
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal((64, 128)).astype(np.float32) for _ in range(steps)]
    with af.Graph().as_default():
        x, y, ws = _two_branches()
        config = af.ConfigProto(
            inter_op_parallelism_threads=inter_op, intra_op_parallelism_threads=intra_op
        )
        with af.Session(config=config) as sess:
            got = [sess.run(y, {x: f}) for f in feeds]
            device = sess._worker.devices[0]
            return got, device.offloaded, feeds, ws


@pytest.mark.timeout(60)
def test_side_lanes_give_the_one_lane_results_bit_for_bit(lanes):
    beside, offloaded, feeds, ws = _run_steps(inter_op=2)
    alone, alone_offloaded, _, _ = _run_steps(inter_op=1)
    assert offloaded > 0  # the lanes ran kernels beside the driver
    assert alone_offloaded == 0  # inter_op_parallelism_threads=1: one at a time, as TF
    for a, b, f in zip(beside, alone, feeds):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, _reference(f, ws), rtol=1e-4, atol=1e-5)


@pytest.mark.timeout(60)
def test_no_side_lane_beside_a_busy_process(lanes, monkeypatch):
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)
    _, offloaded, _, _ = _run_steps(inter_op=2)
    assert offloaded == 0


@pytest.mark.timeout(60)
def test_no_side_lane_by_default_unless_asked(lanes, monkeypatch):
    _, offloaded, _, _ = _run_steps(inter_op=0)  # TF's default: one lane here
    assert offloaded == 0
    monkeypatch.setattr(cpu, "_SIDE_LANES", True)  # ASYNCFLOW_SIDE_LANES=1
    _, offloaded, _, _ = _run_steps(inter_op=0)
    assert offloaded > 0


@pytest.mark.timeout(60)
def test_no_side_lane_with_a_budget_of_one_thread(lanes):
    _, offloaded, _, _ = _run_steps(inter_op=2, intra_op=1)
    assert offloaded == 0


_TWO_LANES = af.ConfigProto(inter_op_parallelism_threads=2)


def _on_a_worker() -> bool:
    return threading.current_thread().name.startswith("asyncflow-cpu")


@pytest.mark.timeout(60)
def test_an_error_on_a_side_lane_ends_the_step_naming_the_kernel(lanes, monkeypatch):
    narrow = cpu_budget.call_narrow

    def failing(fn, args):
        if _on_a_worker():
            raise errors.InvalidArgumentError(None, None, "bad value on the side lane")
        return narrow(fn, args)

    rng = np.random.default_rng(2)
    with af.Graph().as_default():
        x, y, ws = _two_branches()
        with af.Session(config=_TWO_LANES) as sess:
            for _ in range(3):  # every kind measured (inline) before it may go beside
                sess.run(y, {x: rng.standard_normal((64, 128)).astype(np.float32)})
            monkeypatch.setattr(cpu_budget, "call_narrow", failing)
            with pytest.raises(errors.InvalidArgumentError, match="side lane") as info:
                sess.run(y, {x: rng.standard_normal((64, 128)).astype(np.float32)})
            # The kernel that failed, by name: one of the branches' (any may go beside).
            assert info.value.op is not None
            assert info.value.op.type in ("MatMul", "Tanh", "Sigmoid")
            monkeypatch.setattr(cpu_budget, "call_narrow", narrow)
            xv = rng.standard_normal((64, 128)).astype(np.float32)
            np.testing.assert_allclose(
                sess.run(y, {x: xv}), _reference(xv, ws), rtol=1e-4, atol=1e-5
            )


@pytest.mark.timeout(60)
def test_a_step_ended_while_its_side_kernel_runs_neither_hangs_nor_leaks(lanes, monkeypatch):
    """The step's deadline passes while a kernel computes on a side lane: the step ends
    with DeadlineExceededError at once; the kernel finishes on its worker, gives its
    core back, and the session runs the next step."""
    narrow = cpu_budget.call_narrow
    entered, release = threading.Event(), threading.Event()

    def stuck(fn, args):
        if _on_a_worker():
            entered.set()
            release.wait(20)
        return narrow(fn, args)

    rng = np.random.default_rng(3)
    with af.Graph().as_default():
        x, y, ws = _two_branches()
        with af.Session(config=_TWO_LANES) as sess:
            for _ in range(3):
                sess.run(y, {x: rng.standard_normal((64, 128)).astype(np.float32)})
            monkeypatch.setattr(cpu_budget, "call_narrow", stuck)
            options = af.RunOptions(timeout_in_ms=300)
            xv = rng.standard_normal((64, 128)).astype(np.float32)
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(y, {x: xv}, options=options)
            assert entered.is_set()  # (it was a side kernel that held the step)
            release.set()
            monkeypatch.setattr(cpu_budget, "call_narrow", narrow)
            device = sess._worker.devices[0]
            device.pool.submit(lambda: None).result(timeout=20)  # the workers take work
            # The stuck call gives its core back when it returns on its worker (its
            # future's callback there); with inter_op 2 the pool has two workers, so the
            # call above may have run on the other one before that: wait, bounded.
            deadline = time.monotonic() + 20
            while cpu_budget._side and time.monotonic() < deadline:
                time.sleep(0.005)
            assert cpu_budget._side == 0
            np.testing.assert_allclose(
                sess.run(y, {x: xv}), _reference(xv, ws), rtol=1e-4, atol=1e-5
            )
