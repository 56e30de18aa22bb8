"""A fused element-wise program's short call path (ops/fused_elementwise.py `_LEAN`): in
a caller-driven step, a program whose compiled loop has run skips the donation checks
and runs through `cpu_budget.call_without_blas` (counted against the budget, BLAS's
threads untouched) instead of the device's `compute`; the outputs are the same bits
either way."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import cpu_budget
from asyncflow.ops import fused_elementwise, fused_elementwise_jit
from asyncflow.ops.math_helpers import _quiet

pytest.importorskip("numba")

BATCH, UNITS = 64, 96  # [64, 96] cells: 6,144 elements, past the inline threshold


def _cell_gradients(x, h, c, w_np):
    gates = af.matmul(af.concat([x, h], 1), af.constant(w_np))
    i, j, f, o = af.split(gates, 4, 1)
    new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
    new_h = af.tanh(new_c) * af.sigmoid(o)
    loss = af.reduce_sum(new_h * new_h) + af.reduce_sum(new_c)
    return [new_h, new_c, *af.gradients(loss, [x, h, c])]


def _run(lean: bool, monkeypatch, feeds_np, w_np):
    monkeypatch.setattr(fused_elementwise, "_LEAN", lean)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)  # (products: one thread's bits)
    with af.Graph().as_default(), af.device("/cpu:0"):
        phs = [af.placeholder(v.dtype, v.shape) for v in feeds_np]
        fetches = _cell_gradients(*phs, w_np)
        with af.Session() as sess:
            feed = dict(zip(phs, feeds_np))
            sess.run(fetches, feed)
            assert fused_elementwise_jit.wait(timeout=50)
            sess.run(fetches, feed)  # (the compiled loops run: `compiled` set)
            return sess.run(fetches, feed)


def test_short_path_same_bits_no_budget_choice_no_donation_checks(monkeypatch):
    rng = np.random.default_rng(5)
    feeds = [
        rng.standard_normal((BATCH, 32)).astype(np.float32),
        rng.standard_normal((BATCH, UNITS)).astype(np.float32),
        rng.standard_normal((BATCH, UNITS)).astype(np.float32),
    ]
    w_np = rng.standard_normal((32 + UNITS, 4 * UNITS)).astype(np.float32) * 0.1
    want = _run(False, monkeypatch, feeds, w_np)

    calls = []  # (the budget's count of computing threads inside, the donated inputs)
    real = cpu_budget.call_without_blas

    def spy(fn, args):
        if fn is not _quiet:  # (another kernel's short path: a ConcatV2's join)
            return real(fn, args)

        def counted(*a):
            calls.append((cpu_budget._active, args[4]))
            return fn(*a)

        return real(counted, args)

    monkeypatch.setattr(cpu_budget, "call_without_blas", spy)
    got = _run(True, monkeypatch, feeds, w_np)
    for a, b in zip(want, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))
    assert calls  # the programs ran through the short path ...
    assert all(active >= 1 for active, _ in calls)  # ... counted against the budget
    assert any(donated == () for _, donated in calls)  # no checks once compiled


def test_call_without_blas_counts_and_leaves_blas_alone(monkeypatch):
    set_to = []
    monkeypatch.setattr(cpu_budget, "_blas_threads", set_to.append)
    before = cpu_budget._active
    assert cpu_budget.call_without_blas(lambda a, b: (cpu_budget._active, a + b), (1, 2)) == (
        before + 1,
        3,
    )
    assert cpu_budget._active == before
    with pytest.raises(ZeroDivisionError):
        cpu_budget.call_without_blas(lambda: 1 / 0, ())
    assert cpu_budget._active == before and not set_to
