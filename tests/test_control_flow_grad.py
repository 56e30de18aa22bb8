"""Gradients through cond and while_loop: against finite differences (float64) and TF
fixtures (tests/fixtures/control_flow_tf.json)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import asyncflow as af
from asyncflow.gradients import gradients
from asyncflow.ops.control_flow_ops import cond, while_loop

with open(os.path.join(os.path.dirname(__file__), "fixtures", "control_flow_tf.json")) as f:
    FX = json.load(f)


def _numeric_grad(sess, y, x, xv, feed=None, eps=1e-6):
    feed = dict(feed or {})
    xv = np.array(xv, dtype=np.float64)
    g = np.zeros_like(xv)
    for idx in np.ndindex(*xv.shape):
        for sign in (1, -1):
            v = xv.copy()
            v[idx] += sign * eps
            feed[x] = v
            g[idx] += sign * np.sum(sess.run(y, feed))
    return g / (2 * eps)


def _check(build, xv, feed_extra=None, rtol=1e-5):
    with af.Graph().as_default():
        x = af.placeholder(af.float64, np.shape(xv))
        y = build(x)
        (gx,) = gradients(y, x)
        with af.Session() as sess:
            feed = {x: xv, **(feed_extra or {})}
            got = sess.run(gx, feed)
            want = _numeric_grad(sess, y, x, xv, feed_extra)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("taken", [True, False])
def test_cond_gradient_follows_the_taken_branch(taken):
    with af.Graph().as_default():
        p = af.placeholder(af.bool, [])
        x = af.placeholder(af.float64, [2])
        y = cond(p, lambda: af.reduce_sum(x * x), lambda: af.reduce_sum(af.sin(x)))
        (gx,) = gradients(y, x)
        with af.Session() as sess:
            got = sess.run(gx, {p: taken, x: [0.5, 2.0]})
    v = np.array([0.5, 2.0])
    np.testing.assert_allclose(got, 2 * v if taken else np.cos(v))


def test_cond_gradient_with_a_branch_that_ignores_x():
    with af.Graph().as_default():
        p = af.placeholder(af.bool, [])
        x = af.placeholder(af.float64, [])
        y = cond(p, lambda: x * 3.0, lambda: af.constant(1.0, af.float64))
        (gx,) = gradients(y, x)
        with af.Session() as sess:
            assert sess.run(gx, {p: True, x: 2.0}) == 3.0
            assert sess.run(gx, {p: False, x: 2.0}) == 0.0


def test_while_gradient_power():
    _check(lambda x: while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s * x), [0, x])[1], 1.3)


def test_rnn_like_loop_matmul_tanh_matches_tf_and_fd():
    fx = FX["tanh_loop"]
    w, h0 = np.array(fx["w"]), np.array(fx["h0"])
    with af.Graph().as_default():
        W, H0 = af.placeholder(af.float64, [3, 3]), af.placeholder(af.float64, [2, 3])
        _, h = while_loop(
            lambda i, h: i < 5,
            lambda i, h: (i + 1, af.tanh(af.matmul(h, W))),
            [af.constant(0), H0],
        )
        y = af.reduce_sum(h * h)
        gw, gh = gradients(y, [W, H0])
        with af.Session() as sess:
            hv, gwv, ghv = sess.run([h, gw, gh], {W: w, H0: h0})
            fd = _numeric_grad(sess, y, W, w, {H0: h0})
    np.testing.assert_allclose(hv, fx["h"], rtol=1e-10)
    np.testing.assert_allclose(gwv, fx["gw"], rtol=1e-9)
    np.testing.assert_allclose(ghv, fx["gh0"], rtol=1e-9)
    np.testing.assert_allclose(gwv, fd, rtol=1e-5)


def test_nested_loops_and_cond_in_loop_match_tf():
    fx = FX["nested"]

    def nested(x):
        def outer(i, s):
            _, s2 = while_loop(
                lambda j, t: j < i + 1, lambda j, t: (j + 1, af.sin(t) * x + t), [0, s]
            )
            return i + 1, s2

        return while_loop(lambda i, s: i < 3, outer, [0, x])[1]

    def cond_in_loop(x):
        def body(i, s):
            return i + 1, cond(af.equal(i % 2, 0), lambda: s * x, lambda: af.exp(s * 0.1) + x)

        return while_loop(lambda i, s: i < 5, body, [0, x])[1]

    with af.Graph().as_default():
        x = af.constant(fx["x"], af.float64)
        y, z = nested(x), cond_in_loop(x)
        gy, gz = gradients(y, x)[0], gradients(z, x)[0]
        with af.Session() as sess:
            out = sess.run([y, gy, z, gz])
    np.testing.assert_allclose(out, [fx["y"], fx["gy"], fx["z"], fx["gz"]], rtol=1e-10)
    _check(nested, 0.7)
    _check(cond_in_loop, 0.7)


def test_loop_inside_cond():
    def build(x, p):
        return cond(
            p,
            lambda: while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * x), [0, x])[1],
            lambda: x * 2.0,
        )

    for taken in (True, False):
        with af.Graph().as_default():
            p = af.placeholder(af.bool, [])
            x = af.placeholder(af.float64, [])
            (gx,) = gradients(build(x, p), x)
            with af.Session() as sess:
                got = sess.run(gx, {p: taken, x: 1.5})
        assert got == pytest.approx(4 * 1.5**3 if taken else 2.0)


def test_loop_invariant_gradients_accumulate_and_unused_exits():
    def build(x):
        # x is a loop invariant (constant Enter); `b` does not depend on the carried value.
        _, a, b = while_loop(
            lambda i, a, b: i < 3,
            lambda i, a, b: (i + 1, a * x + x, x * x),
            [0, af.ones_like(x), af.zeros_like(x)],
        )
        return a + 2.0 * b

    _check(build, [0.4, 1.1])
    _check(
        lambda x: while_loop(
            lambda i, a, b: i < 3, lambda i, a, b: (i + 1, a * x, b + 1.0), [0, x, x]
        )[1],
        [0.9],
    )


def test_stop_gradient_inside_body():
    with af.Graph().as_default():
        x = af.placeholder(af.float64, [])
        _, y = while_loop(
            lambda i, y: i < 3, lambda i, y: (i + 1, af.stop_gradient(y) * x), [0, x]
        )
        (gx,) = gradients(y, x)
        with af.Session() as sess:
            assert sess.run(gx, {x: 2.0}) == pytest.approx(8.0)  # the last step only: y2 = x**3


def test_back_prop_false_gives_no_gradient():
    with af.Graph().as_default():
        x = af.placeholder(af.float64, [])
        _, y = while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x), [0, x], back_prop=False)
        assert gradients(y, x) == [None]


# -- one walk: plain parts of a graph with a cond get the plain graph's gradient ops ------


def _mlp_grad_op_types(with_cond: bool, gate: bool):
    """Op types that `gradients` adds for a two-layer net, its hidden layer in a cond."""
    rng = np.random.RandomState(0)
    graph = af.Graph()
    with graph.as_default():
        x = af.placeholder(af.float64, [4, 3], name="x")
        p = af.placeholder(af.bool, [], name="p")
        w1 = af.constant(rng.randn(3, 5), name="w1")
        w2 = af.constant(rng.randn(5, 2), name="w2")
        h = af.nn.relu(af.matmul(x, w1))
        mask = af.constant((rng.rand(4, 5) > 0.5) * 2.0)
        if with_cond:
            h = cond(p, lambda: h * mask, lambda: h)
        else:
            h = h * mask
        loss = af.reduce_sum(af.square(af.matmul(h, w2)))
        before = set(graph.get_operations())
        grads = gradients(loss, [w1, w2], gate_gradients=gate)
        added = [op for op in graph.get_operations() if op not in before]
    return graph, x, p, w1, w2, loss, grads, [op.type for op in added]


@pytest.mark.parametrize("gate", [False, True])
def test_a_cond_leaves_the_gradient_ops_of_the_plain_parts_alone(gate):
    *_, plain = _mlp_grad_op_types(False, gate)
    *_, grads, with_cond = _mlp_grad_op_types(True, gate)
    # Only the cond's own Switch/Merge gradients (the zeros of its untaken sides, the
    # sum of its branches' gradients, the gate of the Merge's two gradients) are new.
    cond_only = {"Switch", "Merge", "Identity", "Shape", "Fill", "AddN", "Const", "NoOp"}
    for t in set(plain) | set(with_cond):
        if t not in cond_only:
            assert plain.count(t) == with_cond.count(t), t
    # What a step fetching the gradients runs: dW1, dW2 and d h, never d loss / d x
    # (x is no x of ours), even when gated.
    needed, stack = set(), [g.op for g in grads]
    while stack:
        op = stack.pop()
        if op not in needed:
            needed.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    grad_matmuls = [op for op in needed if op.type == "MatMul" and "gradients" in op.name]
    assert len(grad_matmuls) == 3


def test_gated_gradient_of_the_mlp_in_a_cond_matches_finite_differences():
    graph, x, p, w1, w2, loss, (g1, g2), _ = _mlp_grad_op_types(True, True)
    xv = np.random.RandomState(1).randn(4, 3)
    with graph.as_default(), af.Session() as sess:
        for taken in (True, False):
            feed = {x: xv, p: taken}
            got1, got2 = sess.run([g1, g2], feed)
            for w, got in ((w1, got1), (w2, got2)):
                wv = sess.run(w)
                want = _numeric_grad(sess, loss, w, wv, feed)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("gate", [False, True])
def test_gated_loop_gradients_match_finite_differences(gate):
    """The one walk prunes gated gradients of inputs off every path to xs inside loops
    too: an RNN-like loop over a weight and an input it does not differentiate."""
    rng = np.random.RandomState(3)
    wv, xv = rng.randn(3, 3) * 0.5, rng.randn(2, 3)
    with af.Graph().as_default():
        w = af.placeholder(af.float64, [3, 3])
        x = af.placeholder(af.float64, [2, 3])
        p = af.placeholder(af.bool, [])

        def body(i, h):
            h = af.tanh(af.matmul(h, w) + x)
            return i + 1, cond(p, lambda: h * 2.0, lambda: h)

        _, h = while_loop(lambda i, h: i < 3, body, [0, x])
        loss = af.reduce_sum(h * h)
        (gw,) = gradients(loss, [w], gate_gradients=gate)
        with af.Session() as sess:
            for taken in (True, False):
                feed = {x: xv, p: taken}
                got = sess.run(gw, {w: wv, **feed})
                want = _numeric_grad(sess, loss, w, wv, feed)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
