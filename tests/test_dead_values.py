"""asyncflow/lowering._dead_conditions: which values of a plan with control flow may be
dead.  The nodes after a `tf.cond` whose inputs are live never see a dead value and run
on the interpreter's hot paths; inside a branch, across frames and after a Merge whose
branches do not cover both values of one predicate, values stay possibly dead.  Results
are checked against NumPy for both predicate values, inside loops too."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import lowering
from asyncflow.executor import _GENERAL
from asyncflow.ops import control_flow_ops

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def plans(monkeypatch, graph):
    """The plans lowered while the test runs (those with control flow), on a fresh
    default graph."""
    seen = []
    compile_cf = lowering.compile_control_flow

    def spy(plan, nodes, force=False):
        compile_cf(plan, nodes, force)
        if plan.has_cf:
            seen.append(plan)

    monkeypatch.setattr(lowering, "compile_control_flow", spy)
    return seen


def _arity(plans, name):
    for plan in plans:
        for i, p in enumerate(plan.pnodes):
            if p.op.name == name:
                return plan.arity[i]
    raise KeyError(name)


def test_after_a_cond_the_nodes_take_the_hot_paths(plans):
    x = tf.placeholder(tf.float32, [2, 3], name="x")
    wv = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5) * np.float32(0.02)
    w = tf.constant(wv)
    pred = tf.placeholder(tf.bool, [], name="pred")
    h = tf.cond(pred, lambda: tf.nn.relu(x) * 2.0, lambda: x - 1.0)
    y = tf.matmul(h, w, name="after")
    z = tf.reduce_sum(tf.tanh(y), name="total")
    (gx,) = tf.gradients(z, [x])
    xv = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    with tf.Session() as sess:
        for p in (True, False):
            got_y, got_z, got_g = sess.run([y, z, gx], {x: xv, pred: p})
            hv = np.maximum(xv, 0) * 2.0 if p else xv - 1.0
            want_y = hv @ wv
            np.testing.assert_allclose(got_y, want_y, rtol=1e-6)
            np.testing.assert_allclose(got_z, np.tanh(want_y).sum(), rtol=1e-5)
            dy = 1.0 - np.tanh(want_y) ** 2
            dh = dy @ wv.T
            want_g = dh * 2.0 * (xv > 0) if p else dh
            np.testing.assert_allclose(got_g, want_g, rtol=1e-5, atol=1e-6)
            assert np.abs(want_g).max() > 0.1  # (tanh not saturated: a real check)
    assert _arity(plans, "after") != _GENERAL
    assert _arity(plans, "total") != _GENERAL
    assert _arity(plans, "cond/Merge") == _GENERAL  # (a Merge always takes it)


def test_a_merge_of_two_predicates_branches_may_be_dead():
    a, b = ("p", 0), ("q", 0)
    never = lowering._NEVER
    both = lowering._merged([frozenset([(a, True)]), frozenset([(a, False)])])
    assert both == never  # one branch of `a` always runs
    mixed = lowering._merged([frozenset([(a, True)]), frozenset([(b, False)])])
    assert mixed == {(a, True), (b, False)}
    shared = lowering._merged(
        [frozenset([(b, True), (a, True)]), frozenset([(b, True), (a, False)])]
    )
    assert shared == {(b, True)}  # dead exactly when `b` is True
    assert lowering._merged([frozenset([(a, True)]), never]) == never
    unknown = lowering._merged([frozenset([("?", 3)]), frozenset([("?", 4)])])
    assert unknown == {("?", 3), ("?", 4)}
    same_side = lowering._merged([frozenset([(a, True)]), frozenset([(a, True)])])
    assert same_side == {(a, True)}


def test_a_value_from_one_branch_stays_possibly_dead(plans):
    x = tf.placeholder(tf.float32, [3], name="x")
    pred = tf.placeholder(tf.bool, [], name="pred")
    # A Switch and Merge by hand (control_flow_ops.switch / merge, as TF1's): the
    # nodes between them may see a dead value, the Merge's output never does.
    sw_false, sw_true = control_flow_ops.switch(x, pred)
    after_true = tf.identity(sw_true * 3.0, name="after_true")
    merged = control_flow_ops.merge([sw_false + 1.0, after_true], name="m")[0]
    out = tf.square(merged, name="out")
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with tf.Session() as sess:
        for p in (True, False):
            got = sess.run(out, {x: xv, pred: p})
            np.testing.assert_allclose(got, np.square(xv * 3.0 if p else xv + 1.0))
    assert _arity(plans, "after_true") == _GENERAL
    assert _arity(plans, "out") != _GENERAL


def test_nested_conds_and_a_cond_in_a_loop_match_numpy(graph):
    x = tf.placeholder(tf.float32, [4], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    q = tf.placeholder(tf.bool, [], name="q")
    inner = tf.cond(
        p,
        lambda: tf.cond(q, lambda: x * 2.0, lambda: x + 5.0),
        lambda: tf.cond(q, lambda: x - 3.0, lambda: -x),
    )
    after = tf.reduce_sum(inner * inner)

    def body(i, acc):
        odd = tf.equal(tf.math.floormod(i, 2), 1)
        step = tf.cond(odd, lambda: acc * 0.5, lambda: acc + tf.reduce_sum(x))
        return i + 1, step

    _, looped = tf.while_loop(lambda i, a: i < 5, body, [tf.constant(0), tf.constant(1.0)])
    (g,) = tf.gradients(after + looped, [x])
    xv = np.array([1.0, -2.0, 0.5, 4.0], np.float32)

    def want(pv, qv):
        v = (xv * 2.0 if qv else xv + 5.0) if pv else (xv - 3.0 if qv else -xv)
        acc = 1.0
        for i in range(5):
            acc = acc * 0.5 if i % 2 else acc + xv.sum()
        d_inner = 2.0 * v * ((2.0 if qv else 1.0) if pv else (1.0 if qv else -1.0))
        # d looped / dx: each even step adds sum(x), later halved once per odd step after
        d_loop = sum(0.5 ** sum(1 for j in range(i + 1, 5) if j % 2) for i in (0, 2, 4))
        return (v * v).sum(), acc, d_inner + d_loop

    with tf.Session() as sess:
        for pv in (True, False):
            for qv in (True, False):
                a, lp, gv = sess.run([after, looped, g], {x: xv, p: pv, q: qv})
                wa, wl, wg = want(pv, qv)
                np.testing.assert_allclose(a, wa, rtol=1e-5)
                np.testing.assert_allclose(lp, wl, rtol=1e-5)
                np.testing.assert_allclose(gv, wg, rtol=1e-5)


def test_a_merge_of_two_predicates_can_be_dead_and_says_so(plans):
    """Both inputs dead (p and q False): the Merge is dead, and so is what follows it;
    fetching that is TF's error, not a kernel handed a dead value."""
    x = tf.placeholder(tf.float32, [3], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    q = tf.placeholder(tf.bool, [], name="q")
    from_p = control_flow_ops.switch(x, p)[1] * 2.0
    from_q = control_flow_ops.switch(x, q)[1] + 1.0
    merged = control_flow_ops.merge([from_p, from_q], name="m")[0]
    out = tf.square(merged, name="out")
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out, {x: xv, p: True, q: False}), (xv * 2) ** 2)
        np.testing.assert_allclose(sess.run(out, {x: xv, p: False, q: True}), (xv + 1) ** 2)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(out, {x: xv, p: False, q: False})
    assert _arity(plans, "out") == _GENERAL
