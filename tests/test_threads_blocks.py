"""devices/cpu_budget.threads_blocks: a GEMM's blocks are shared with helpers unless
other processes' runnable threads fill every core, or the budget does not set BLAS's
thread count; the split never changes results."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import blas


def _sets_blas(n: int) -> int:  # stands for OpenBLAS's per-call control (never called here)
    raise AssertionError("threads_blocks only asks whether the budget sets BLAS's count")


@pytest.mark.parametrize("cores, competing", [(2, 0), (3, 1), (4, 2)])
def test_blocks_are_shared_while_a_core_is_free(monkeypatch, cores, competing):
    monkeypatch.setattr(cpu_budget, "_set_blas_local", _sets_blas)
    monkeypatch.setattr(cpu_budget, "_CORES", cores)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: competing)
    assert cpu_budget.threads_blocks(1) == cpu_budget.threads_shared(1) == 2


def test_blocks_stay_with_the_caller_when_the_free_core_is_the_callers(monkeypatch):
    # Two cores beside one busy process: a helper could only take the busy core, where
    # it would wait on the run queue (issue 21).
    monkeypatch.setattr(cpu_budget, "_set_blas_local", _sets_blas)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)
    assert cpu_budget.threads_blocks(1) == 1
    assert cpu_budget.threads_shared(1) == 2  # (other processes' load does not count)
    monkeypatch.setattr(cpu_budget, "_CORES", 3)
    monkeypatch.setattr(cpu_budget, "_side", 1)  # a side lane holds the third core
    assert cpu_budget.threads_blocks(1) == 1
    monkeypatch.setattr(cpu_budget, "_side", 0)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_PARTS_ON_BUSY_CORES", True)  # (A/B: shared there too)
    assert cpu_budget.threads_blocks(1) == 2


@pytest.mark.parametrize("competing", [2, 5])
def test_blocks_stay_with_the_caller_when_every_core_is_busy(monkeypatch, competing):
    monkeypatch.setattr(cpu_budget, "_set_blas_local", _sets_blas)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: competing)
    assert cpu_budget.threads_blocks(1) == 1
    assert cpu_budget.threads_shared(1) == 2  # (other processes' load does not count)


@pytest.mark.parametrize("competing", [0, 1])
def test_blocks_stay_with_the_caller_when_the_budget_leaves_blas_alone(monkeypatch, competing):
    """ASYNCFLOW_CPU_BUDGET=0 (or a BLAS with no per-call thread control): each block's
    BLAS call would run on all of BLAS's threads, so blocks are not shared: the caller
    runs every part itself, convolution parts (`parallel_parts`) included."""
    monkeypatch.setattr(cpu_budget, "_set_blas_local", None)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: competing)
    assert cpu_budget.threads_blocks(1) == 1
    assert cpu_budget.threads_shared(1) == 2  # (element-wise work still shares the cores)
    ran_on = []
    cpu_budget.parallel_parts(6, lambda i: ran_on.append((i, threading.get_ident())))
    assert sorted(i for i, _ in ran_on) == list(range(6))
    assert {t for _, t in ran_on} == {threading.get_ident()}


@pytest.mark.skipif(not blas.available(np.float32), reason="NumPy's bundled OpenBLAS not found")
def test_a_split_product_is_the_same_on_one_thread_or_two(monkeypatch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 300)).astype(np.float32)
    b = rng.standard_normal((300, 256)).astype(np.float32)
    if blas._blocks(512, 256, 300) is None:
        pytest.skip("a budget of one thread: products are never split")
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: cpu_budget._CORES)
    cpu_budget.blas_single()
    alone = blas.matmul(a, b, False, False)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)
    monkeypatch.setattr(cpu_budget, "_CORES", cpu_budget._CORES + 1)  # a core still free
    shared = blas.matmul(a, b, False, False)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(alone, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(shared, want, rtol=1e-4, atol=1e-4)
    # Bit for bit where this CPU's kernels give a block of rows one call's bits (on
    # OpenBLAS 0.3.31's SkylakeX kernels they do; on its Haswell kernels, not always).
    half = np.empty((256, 256), np.float32)
    blas._gemm(half, a[256:], b, False, False, 1.0, 0.0, split=False)
    if np.array_equal(half, alone[256:]):
        np.testing.assert_array_equal(alone, shared)
    # TF_DETERMINISTIC_OPS=1: never split, the one thread's bits whatever the load
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    np.testing.assert_array_equal(blas.matmul(a, b, False, False), alone)
    cpu_budget.restore_blas()
