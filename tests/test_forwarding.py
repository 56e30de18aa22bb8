"""Input forwarding (`executor.forwardable`): a kernel writes into an input only when
nothing else can see it.  A wrong answer here corrupts a value another consumer, a
fetch, a feed, a variable or a constant still holds, so every holder is tried."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import executor
from asyncflow import graph as ops
from asyncflow.ops.control_flow_ops import while_loop
from asyncflow.registry import ANY, register_op

_Probe = register_op(
    "TestForwardableProbe",
    inputs=["x: T"],
    outputs=["y: bool"],
    attrs={"T": ANY},
    shape_fn=lambda op: [af.TensorShape([])],
)


@_Probe.kernel("CPU")
async def _probe(ctx, x):
    return np.array(executor.forwardable(x))


def _probe_of(t):
    return ops.apply_op("TestForwardableProbe", [t]).outputs[0]


A = np.arange(64 * 80, dtype=np.float32).reshape(64, 80) / 1000.0
B = np.linspace(-1, 1, 80 * 96, dtype=np.float32).reshape(80, 96)


@pytest.fixture(autouse=True)
def _graph():
    with af.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches, feed)


def test_probe_sees_exclusive_and_shared_values():
    z = af.matmul(af.constant(A), af.constant(B))
    assert _run(_probe_of(z))  # a fresh kernel output with one consumer
    assert not _run([_probe_of(z), z])[0]  # also fetched
    probe = _probe_of(z)
    with af.control_dependencies([probe]):  # a second consumer, still waiting
        later = af.reduce_sum(z)
    assert not _run([probe, later])[0]
    assert _run(af.reduce_sum(z)) == pytest.approx(float((A @ B).sum()), rel=1e-5)
    assert not _run(_probe_of(af.constant(A)))  # a constant's value
    v = af.Variable(A)
    assert not _run(_probe_of(v.read_value()))  # a variable's buffer
    x = af.placeholder(af.float32, [64, 80])
    assert not _run(_probe_of(x), {x: A})  # the caller's array
    assert not _run(_probe_of(af.reshape(z, [-1])))  # a view of another array


def test_probe_inside_loops_general_and_compiled():
    def body(i, acc):
        z = af.matmul(af.constant(A), af.constant(B))
        shared = af.matmul(af.constant(A), af.constant(B))
        probe = _probe_of(shared)
        with af.control_dependencies([probe]):  # a second consumer, still waiting
            keep = af.reduce_sum(shared)
        ok = af.logical_and(_probe_of(z), af.logical_not(probe))
        with af.control_dependencies([keep]):
            return i + 1, af.logical_and(acc, ok)

    _, ok = while_loop(lambda i, acc: i < 3, body, [0, True])
    assert _run(ok)


def test_in_place_kernels_leave_other_consumers_alone():
    z = af.matmul(af.constant(A), af.constant(B))  # large: the in-place paths apply
    bias = af.constant(np.linspace(-5, 5, 96, dtype=np.float32))
    outs = _run(
        [
            z,
            af.nn.relu(z),
            z + bias,
            af.nn.bias_add(z, bias),
            z * 2.0,
            af.nn.relu(af.matmul(af.constant(A), af.constant(B))),  # exclusive: in place
            af.matmul(af.constant(A), af.constant(B)) - bias,
        ]
    )
    want = A @ B
    np.testing.assert_allclose(outs[0], want, rtol=1e-6)
    np.testing.assert_allclose(outs[1], np.maximum(want, 0), rtol=1e-6)
    bias_v = np.linspace(-5, 5, 96, dtype=np.float32)
    np.testing.assert_allclose(outs[2], want + bias_v, rtol=1e-6)
    np.testing.assert_allclose(outs[3], want + bias_v, rtol=1e-6)
    np.testing.assert_allclose(outs[4], want * 2, rtol=1e-6)
    np.testing.assert_allclose(outs[5], np.maximum(want, 0), rtol=1e-6)
    np.testing.assert_allclose(outs[6], want - bias_v, rtol=1e-6)


def test_relu_grad_and_gradient_descent_with_the_gradient_fetched():
    w = af.Variable(B)
    x = af.constant(A)
    h = af.nn.relu(af.matmul(x, w))
    loss = af.reduce_sum(h * h)
    (g,) = af.gradients(loss, [w])
    train = af.train.GradientDescentOptimizer(0.01).apply_gradients([(g, w)])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        g_val, _ = s.run([g, train])  # the gradient is fetched: it must not be scaled
        w_after = s.run(w)
    hv = np.maximum(A @ B, 0)
    g_want = A.T @ (2 * hv * (hv > 0))
    np.testing.assert_allclose(g_val, g_want, rtol=1e-4)
    np.testing.assert_allclose(w_after, B - 0.01 * g_val, rtol=1e-5, atol=1e-6)


def test_gradient_descent_scratch_path_matches_the_plain_update():
    w = af.Variable(B)
    g = af.matmul(af.constant(A.T), af.constant(A)) @ af.constant(B) / 100.0  # exclusive
    train = af.train.GradientDescentOptimizer(0.5).apply_gradients([(g, w)])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(train)
        got = s.run(w)
    g_val = (A.T @ A) @ B / np.float32(100.0)
    np.testing.assert_allclose(got, B - np.float32(0.5) * g_val, rtol=1e-5, atol=1e-6)


def test_bias_add_forwards_an_exclusive_input_and_only_that(monkeypatch):
    from asyncflow.ops import nn_ops

    seen = []

    def recording(x, held=0):
        ok = executor.forwardable(x, held + 1)  # + this wrapper's own reference
        seen.append(ok)
        return ok

    monkeypatch.setattr(nn_ops, "forwardable", recording)
    z = af.matmul(af.constant(A), af.constant(B)) * 2.0
    bias = af.constant(np.linspace(-5, 5, 96, dtype=np.float32))
    fused = af.nn.relu(af.nn.bias_add(af.matmul(af.constant(A), af.constant(B)) * 2.0, bias))
    got = _run([af.nn.bias_add(z, bias), fused])
    assert seen == [True, True]  # both inputs were held by nothing else
    want = 2 * (A @ B) + np.linspace(-5, 5, 96, dtype=np.float32)
    np.testing.assert_allclose(got[0], want, rtol=1e-5)
    np.testing.assert_allclose(got[1], np.maximum(want, 0), rtol=1e-5)
    seen.clear()
    got_z, got_b = _run([z, af.nn.bias_add(z, bias)])  # z is fetched too
    assert seen == [False]
    np.testing.assert_allclose(got_z, 2 * (A @ B), rtol=1e-5)
