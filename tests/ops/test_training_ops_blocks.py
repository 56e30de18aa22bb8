"""Dense optimizer updates on variables large enough to run block by block, shared among
threads (training_ops._dense_update over devices.cpu_budget.parallel_for), against the
plain NumPy formulas of TF's CPU functors, in float16, float32 and float64; and with
a gradient the kernel may overwrite (donated), which takes GradientDescent's scratch
path."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import cpu_budget
from asyncflow.ops import training_ops

SHAPE = (700, 500)  # 350,000 elements: past 2 * training_ops._BLOCK, several blocks
_RTOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}


def _reference(name, dtype, var, slots, grads, hp):
    """The updates as plain NumPy expressions in `dtype` (TF's formula order)."""
    var = var.copy()
    slots = {k: v.copy() for k, v in slots.items()}
    one = dtype(1)
    # hyper-parameters are float32 tensors cast to the variable's dtype, as TF's
    c = {k: dtype(np.float32(v)) for k, v in hp.items()}
    b1p32, b2p32 = np.float32(1), np.float32(1)  # Adam's beta powers: float32 variables
    for g in grads:
        if name == "sgd":
            var -= g * c["lr"]
        elif name == "momentum":
            a = slots["accum"]
            a *= c["momentum"]
            a += g
            var -= a * c["lr"]
        elif name == "rmsprop":
            ms, mom = slots["ms"], slots["mom"]
            ms += (g * g - ms) * (one - c["rho"])
            mom *= c["momentum"]
            mom += g * c["lr"] / np.sqrt(ms + c["eps"])
            var -= mom
        elif name == "adam":
            m, v = slots["m"], slots["v"]
            b1p32 *= np.float32(hp["beta1"])
            b2p32 *= np.float32(hp["beta2"])
            b1p, b2p = dtype(b1p32), dtype(b2p32)
            alpha = c["lr"] * np.sqrt(one - b2p) / (one - b1p)
            m += (g - m) * (one - c["beta1"])
            v += (g * g - v) * (one - c["beta2"])
            var -= m * alpha / (np.sqrt(v) + c["eps"])
    return var


def _optimizer(name, hp):
    if name == "sgd":
        return af.train.GradientDescentOptimizer(hp["lr"])
    if name == "momentum":
        return af.train.MomentumOptimizer(hp["lr"], hp["momentum"])
    if name == "rmsprop":
        return af.train.RMSPropOptimizer(
            hp["lr"], decay=hp["rho"], momentum=hp["momentum"], epsilon=hp["eps"]
        )
    return af.train.AdamOptimizer(
        hp["lr"], beta1=hp["beta1"], beta2=hp["beta2"], epsilon=hp["eps"]
    )


HP = {"lr": 0.01, "momentum": 0.9, "rho": 0.9, "eps": 1e-3, "beta1": 0.9, "beta2": 0.999}
SLOTS = {  # TF's slot initial values
    "sgd": {},
    "momentum": {"accum": 0.0},
    "rmsprop": {"ms": 1.0, "mom": 0.0},
    "adam": {"m": 0.0, "v": 0.0},
}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", ["sgd", "momentum", "rmsprop", "adam"])
@pytest.mark.parametrize("donated", [False, True], ids=["fed_grad", "donated_grad"])
def test_large_dense_update_matches_numpy(name, dtype, donated):
    rng = np.random.default_rng(7)
    var0 = rng.uniform(-1, 1, SHAPE).astype(dtype)
    grads = [rng.uniform(-1, 1, SHAPE).astype(dtype) for _ in range(3)]
    with af.Graph().as_default():
        var = af.Variable(var0)
        g = af.placeholder(dtype, SHAPE)
        grad = g * 1 if donated else g  # a fresh value nothing else reads: donatable
        train = _optimizer(name, HP).apply_gradients([(grad, var)])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for x in grads:
                sess.run(train, {g: x})
            got = sess.run(var)
    slots = {k: np.full(SHAPE, v, dtype) for k, v in SLOTS[name].items()}
    expect = _reference(name, dtype, var0, slots, grads, HP)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expect, rtol=_RTOL[dtype], atol=_RTOL[dtype])


def test_blocks_cover_every_element_once_on_any_thread_count(monkeypatch):
    for threads in (1, 2, 3):
        monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None, n=threads: n)
        seen = np.zeros(1_000_003, np.int64)

        def mark(start, stop, seen=seen):
            seen[start:stop] += 1

        cpu_budget.parallel_for(seen.size, mark, min_block=1 << 14)
        assert seen.min() == 1 and seen.max() == 1


def test_a_block_error_is_raised_by_the_caller(monkeypatch):
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: 2)

    def fail(start, stop):
        if start > 0:
            raise ValueError("block failed")

    with pytest.raises(ValueError, match="block failed"):
        cpu_budget.parallel_for(1 << 20, fail, min_block=1 << 14)


def test_budget_follows_intra_op_and_never_exceeds_the_cores(monkeypatch):
    cores = cpu_budget._CORES
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    try:
        cpu_budget.configure(1)
        assert cpu_budget.budget() == 1 and cpu_budget.threads_now(active=1) == 1
        cpu_budget.configure(0)
        assert cpu_budget.budget() == cores
        assert cpu_budget.threads_now(active=1) == cores
        # other kernels of ours computing take their share; never below one thread
        assert cpu_budget.threads_now(active=cores + 5) == 1
        monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: cores)
        assert cpu_budget.threads_now(active=1) == 1  # another process holds the cores
    finally:
        cpu_budget.configure(0)


def test_session_config_sets_the_budget():
    try:
        config = af.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
        with af.Session(config=config) as sess:
            assert cpu_budget.budget() == 1
            assert sess._worker.devices[0].num_threads == 2
    finally:
        cpu_budget.configure(0)


def test_competing_threads_are_counted_from_proc():
    if not hasattr(cpu_budget, "_running_total"):
        pytest.skip("no /proc")
    # this thread is running and ours: it never counts as a competitor
    assert cpu_budget._running_total() >= 1
    assert 0 <= cpu_budget._sample_competing() < 10_000


def test_a_competitor_counts_from_its_second_sample_in_a_row(monkeypatch):
    # a kernel thread on the run queue for one instant is no competitor; a CPU-bound
    # neighbour, runnable at every sample, counts from its second one, and stops
    # counting at the first sample without it
    if not hasattr(cpu_budget, "_running_total"):
        pytest.skip("no /proc")
    totals = iter([1, 2, 1, 2, 2, 2, 1, 1])
    monkeypatch.setattr(cpu_budget, "_running_total", lambda: next(totals))
    monkeypatch.setattr(cpu_budget, "_running_ours", lambda now: 1)
    monkeypatch.setattr(cpu_budget, "_SAMPLE_S", 0.0)
    monkeypatch.setattr(cpu_budget, "_recent", [])
    got = [cpu_budget._sample_competing() for _ in range(8)]
    assert got == [0, 0, 0, 0, 1, 1, 0, 0]
    monkeypatch.setattr(cpu_budget, "_CONFIRM", 1)  # (every sample on its own)
    totals = iter([2, 1])
    assert [cpu_budget._sample_competing() for _ in range(2)] == [1, 0]


def test_dense_update_small_or_strided_runs_whole():
    calls = []

    def update(xp, attrs, var, grad):
        calls.append(var.shape)
        var -= grad

    v = np.ones((4, 4), np.float32)
    training_ops._dense_update(update, {}, [v], [np.ones((4, 4), np.float32)])
    assert calls == [(4, 4)] and np.all(v == 0)


@pytest.mark.parametrize("name", ["rmsprop", "adam"])
def test_large_update_on_two_threads_matches_numpy(name, monkeypatch):
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: 2)
    test_large_dense_update_matches_numpy(name, np.float32, donated=False)


def test_blas_calls_take_the_thread_count_their_kind_measured_faster(monkeypatch):
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    monkeypatch.setattr(cpu_budget, "_set_blas_local", lambda n: n)
    monkeypatch.setattr(cpu_budget, "_kinds", {})
    chosen = []
    monkeypatch.setattr(cpu_budget, "_blas_threads", lambda n: chosen.append(n))
    now = [0.0]
    cost = {1: 1.0, 2: 5.0}  # two threads stall (a CPU-bound neighbour)

    def clock():
        return now[0]

    monkeypatch.setattr(cpu_budget, "_clock", clock)
    a = np.ones((8, 8))

    def work(x):
        now[0] += cost[chosen[-1]]
        return x

    assert cpu_budget.call(work, (a,)) is a
    assert cpu_budget.call(work, (a,)) is a
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)  # a busy neighbour
    for _ in range(cpu_budget._EXPLORE * 2 - 12):
        assert cpu_budget.call(work, (a,)) is a
    assert chosen[:4] == [2, 2, 1, 1]  # both ways tried first, the wide one first when idle
    assert chosen[4:].count(2) == 0  # a neighbour runs: one thread, nothing explored
    cost.update({1: 5.0, 2: 1.0})  # the neighbour left: two threads win again
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    for _ in range(30):  # nobody else runs: a kind on one thread tries two every 8 calls
        cpu_budget.call(work, (a,))
    assert chosen[-10:] == [2] * 10
    assert cpu_budget._active == 0


def test_small_kinds_run_on_one_thread_without_the_choice(monkeypatch):
    # Work shorter than _SMALL_S on one thread (an LSTM cell's [128,128] Mul): one BLAS
    # thread, no load sample or timing, measured again once every _EXPLORE calls.
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_set_blas_local", lambda n: n)
    monkeypatch.setattr(cpu_budget, "_kinds", {})
    chosen, samples = [], []
    monkeypatch.setattr(cpu_budget, "_blas_threads", lambda n: chosen.append(n))
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: samples.append(1) or 0)
    now = [0.0]
    monkeypatch.setattr(cpu_budget, "_clock", lambda: now[0])
    a = np.ones((8, 8))

    def work(x):
        now[0] += cpu_budget._SMALL_S / 4
        return x

    for _ in range(cpu_budget._EXPLORE * 2):
        assert cpu_budget.call(work, (a,)) is a
    assert chosen[:4] == [2, 2, 1, 1]
    assert chosen[4:].count(2) <= 2  # (an explored call may try two threads)
    assert len(samples) <= 6  # four first tries, then once every _EXPLORE calls
    assert cpu_budget._active == 0


def _timed_calls(monkeypatch, cost: dict):
    """(chosen, call(n)): `call(n)` makes n calls of one kind through the budget on two
    free cores, each taking cost[threads it was given] on the budget's clock; `chosen`
    lists the thread counts given."""
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_deterministic", False)
    monkeypatch.setattr(cpu_budget, "_set_blas_local", lambda n: n)
    monkeypatch.setattr(cpu_budget, "_kinds", {})
    chosen = []
    monkeypatch.setattr(cpu_budget, "_blas_threads", lambda n: chosen.append(n))
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    now = [0.0]
    monkeypatch.setattr(cpu_budget, "_clock", lambda: now[0])
    a = np.ones((8, 8))

    def work(x):
        now[0] += cost[chosen[-1]]
        return x

    def call(n: int) -> None:
        for _ in range(n):
            assert cpu_budget.call(work, (a,)) is a

    return chosen, call


@pytest.mark.timeout(30)
def test_mid_size_kinds_are_measured_both_ways(monkeypatch):
    # An LSTM cell's product (lstm_static: [128,156]x[156,512], 150-270 us on one thread)
    # is not small: both ways are tried, and two threads win when they measure faster.
    cost = {1: 220e-6, 2: 150e-6}
    chosen, call = _timed_calls(monkeypatch, cost)
    assert cpu_budget._SMALL_S < cost[1]
    call(40)
    assert chosen[:4] == [2, 2, 1, 1]
    assert chosen[-10:] == [2] * 10
    # Slower on two threads: one thread, two tried again now and then.
    cost.update({1: 220e-6, 2: 300e-6})
    call(60)
    assert chosen[-32:].count(2) <= 8  # (two tries every 8 calls)
    assert cpu_budget._active == 0


@pytest.mark.timeout(30)
def test_a_batch_of_32s_products_are_measured_both_ways(monkeypatch):
    # The GAN tutorial's [32,784]x[784,256]: 61 us on one thread, 31 as blocks on the
    # pool's two spinning threads.  Not small: two threads win.
    cost = {1: 61e-6, 2: 31e-6}
    chosen, call = _timed_calls(monkeypatch, cost)
    assert cpu_budget._SMALL_S < cost[2] < cost[1]
    call(40)
    assert chosen[-10:] == [2] * 10
    assert cpu_budget._active == 0


@pytest.mark.timeout(60)
def test_the_small_bound_follows_the_environment():
    import os
    import subprocess
    import sys

    code = "from asyncflow.devices import cpu_budget as c; print(repr(c._SMALL_S))"
    for value, want in (("300", 3e-4), ("", 3e-5)):
        env = dict(os.environ, ASYNCFLOW_BLAS_SMALL_US=value)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=50
        )
        assert out.returncode == 0, out.stderr
        assert float(out.stdout) == pytest.approx(want)
