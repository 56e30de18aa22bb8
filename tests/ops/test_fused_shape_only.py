"""Outputs of a fused element-wise program that nothing reads but for their shapes
(ops/fused_elementwise.mark_shape_only_outputs): an LSTM cell's c * f and i * j, which
only the backward program's SumTo targets read.  They become zero-stride views; the
step's values keep their bits, with and without the compiled loops."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph_passes
from asyncflow.devices import cpu_budget
from asyncflow.ops import fused_elementwise, fused_elementwise_jit, fused_updates


def _cell_and_gradients(gates_np, c_np):
    with af.Graph().as_default(), af.device("/cpu:0"):
        gates = af.placeholder(af.float32, [None, gates_np.shape[1]])
        c = af.placeholder(af.float32, [None, c_np.shape[1]])
        i, j, f, o = af.split(gates, 4, 1)
        new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        h = af.tanh(new_c) * af.sigmoid(o)
        loss = af.reduce_sum(h * h) + af.reduce_sum(new_c)
        grads = af.gradients(loss, [gates, c])
        with af.Session() as sess:
            feed = {gates: gates_np, c: c_np}
            first = sess.run([h, new_c, *grads], feed)
            fused_elementwise_jit.wait(timeout=50)
            return first, sess.run([h, new_c, *grads], feed)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy_program", "compiled_loop"])
def test_shape_only_outputs_same_bits(monkeypatch, compiled):
    if compiled:
        pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    gates = rng.standard_normal((64, 4 * 96)).astype(np.float32)
    c = rng.standard_normal((64, 96)).astype(np.float32)
    monkeypatch.setattr(fused_updates, "_DISABLED", not compiled)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    made = []
    real = fused_elementwise._Program._with_shapes

    def counting(self, xp, sched, outs):
        got = real(self, xp, sched, outs)
        made.extend(got[k] for k, _shape in sched.shape_only)
        return got

    monkeypatch.setattr(fused_elementwise._Program, "_with_shapes", counting)
    with_pass = _cell_and_gradients(gates, c)
    assert made and all(v.strides == (0, 0) and v.shape == (64, 96) for v in made)
    passes = [
        p for p in graph_passes.GRAPH_PASSES if p is not fused_elementwise.mark_shape_only_outputs
    ]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    made.clear()
    without = _cell_and_gradients(gates, c)
    assert not made
    for a, b in zip(with_pass[0] + with_pass[1], without[0] + without[1]):
        np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))


def test_a_fetched_or_data_read_output_stays_whole():
    # the product is fetched: its values are read, so it stays an array of its own
    rng = np.random.default_rng(4)
    x_np = rng.standard_normal((32, 64)).astype(np.float32)
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.placeholder(af.float32, [None, 64])
        y = af.placeholder(af.float32, [None, 64])
        p = af.sigmoid(x) * y
        q = p + af.tanh(x)
        g = af.gradients(af.reduce_sum(q * q), [x, y])
        with af.Session() as sess:
            got_p, got_q, *_ = sess.run([p, q, *g], {x: x_np, y: x_np})
    np.testing.assert_allclose(got_q, got_p + np.tanh(x_np), rtol=1e-5, atol=1e-6)
    assert got_p.strides != (0, 0)
