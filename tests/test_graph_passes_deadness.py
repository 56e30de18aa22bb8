"""Deadness in the graph passes (asyncflow.deadness, graph_passes.PartitionView).

A cond's Merge is live exactly when its inputs outside the branches are, so the passes
fuse and order nodes around a cond (the MLP with tf.layers.dropout on a training
tensor keeps its MatMul+ReluGrad fusion); inside a branch, a node is dead with the
branch, and nothing live may be made to wait for it.  Each program runs with the
passes and without them (GRAPH_PASSES emptied): the values must agree, and agree with
NumPy, for conds, nested conds, conds in while loops and gradients of conds, with the
predicate true and false.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph_passes, partition
from asyncflow.deadness import Deadness
from asyncflow.devices.cpu import CPUDevice

pytestmark = pytest.mark.timeout(30)

RNG = np.random.default_rng(5)
X = RNG.standard_normal((16, 32)).astype(np.float32)
W1 = RNG.standard_normal((32, 24)).astype(np.float32) * 0.3
W2 = RNG.standard_normal((24, 24)).astype(np.float32) * 0.3
B1 = RNG.standard_normal(24).astype(np.float32)


def _partition(fetches, feeds=()):
    order = partition.prune(list(feeds), fetches)
    dev = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
    parts, _ = partition.partition(
        order, dict.fromkeys(order, dev), list(feeds), fetches, tf.Graph()
    )
    return parts[0]


def _view(fetches, feeds=()):
    return graph_passes.PartitionView(_partition(fetches, feeds), tf.Graph())


def _index(view, name):
    (i,) = [k for k, n in enumerate(view.nodes) if n.op.name == name]
    return i


def _relu(v):
    return np.maximum(v, 0)


def _with_and_without_passes(monkeypatch, program):
    """program() builds a graph and returns what it computed, run in a session of it:
    once with the graph passes, once without."""
    with tf.Graph().as_default():
        fused = program()
    with monkeypatch.context() as m:
        m.setattr(graph_passes, "GRAPH_PASSES", [])
        with tf.Graph().as_default():
            plain = program()
    return fused, plain


def _fused_types(sess):
    return [op.type for sp in sess._plans.values() for pl in sp.plans for op in pl.nodes]


# -- the analysis ------------------------------------------------------------------------


def test_a_cond_merge_is_live_where_its_inputs_outside_the_branches_are():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        flag = tf.placeholder(tf.bool, [])
        y = tf.cond(flag, lambda: tf.tanh(x), lambda: tf.constant([1.0] * 4))
        z = y * 2.0
        view = _view([z], [x, flag])
    dead = view.deadness()
    assert dead.node[_index(view, "cond/Merge")] == frozenset()
    assert dead.node[_index(view, "mul")] == frozenset()
    branch = dead.node[_index(view, "cond/Tanh")]
    constant = dead.node[_index(view, "cond/Const")]  # (waits for the pivot)
    assert len(branch) == 1 and len(constant) == 1 and branch != constant


def test_nested_conds_join_to_the_outer_branch_then_to_live():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        a = tf.placeholder(tf.bool, [])
        b = tf.placeholder(tf.bool, [])

        def outer_true():
            return tf.cond(b, lambda: tf.tanh(x), lambda: tf.sigmoid(x), name="inner")

        y = tf.cond(a, outer_true, lambda: tf.identity(x), name="outer")
        view = _view([y], [x, a, b])
    dead = view.deadness()
    inner = dead.node[_index(view, "outer/inner/Merge")]
    # (the outer true branch's port, which the inner predicate's Identity carries)
    assert inner == dead.node[_index(view, "outer/inner/pred_id")]
    assert len(inner) == 1
    assert dead.node[_index(view, "outer/Merge")] == frozenset()


def test_a_merge_of_unrelated_values_and_a_lone_switch_port_stay_sources():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        flag = tf.placeholder(tf.bool, [])
        _, taken = tf.raw_ops.Switch(data=x, pred=flag)
        t = tf.tanh(taken)
        merged = tf.raw_ops.Merge(inputs=[t, x])[0]
        view = _view([merged, t], [x, flag])
    dead = view.deadness()
    assert len(dead.node[_index(view, "Tanh")]) == 1
    assert dead.node[_index(view, "Merge")] == frozenset([("Merge", _index(view, "Merge"))])


def test_a_cond_whose_predicate_may_be_dead_carries_that_deadness():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        a = tf.placeholder(tf.bool, [])
        _, p = tf.raw_ops.Switch(data=a, pred=a)  # (live only when a is true)
        y = tf.cond(p, lambda: tf.tanh(x), lambda: tf.sigmoid(x))
        view = _view([y], [x, a])
    dead = view.deadness()
    merge = dead.node[_index(view, "cond/Merge")]
    assert merge and merge == dead.node[_index(view, "cond/pred_id")]


def test_deadness_is_recomputed_after_a_fusion_only():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        flag = tf.placeholder(tf.bool, [])
        y = tf.cond(flag, lambda: tf.tanh(x), lambda: x)
        view = _view([y], [x, flag])
    first = view.deadness()
    assert view.deadness() is first
    assert isinstance(first, Deadness)


# -- ordering edges ------------------------------------------------------------------------


def _reads_and_update(in_branch: bool):
    """A node reading v (inside a cond's branch, or after the cond) and v's update."""
    v = tf.Variable(np.ones(4, np.float32), name="v")
    flag = tf.placeholder(tf.bool, [], name="flag")
    x = tf.placeholder(tf.float32, [4], name="x")
    if in_branch:
        y = tf.cond(flag, lambda: tf.reduce_sum(v * x, name="reader"), lambda: tf.constant(0.0))
    else:
        y = tf.cond(flag, lambda: tf.tanh(x), lambda: x)
        y = tf.reduce_sum(tf.multiply(v, y, name="reader"))
    upd = tf.assign_sub(v, x, name="update")
    return y, upd, flag, x


def test_no_ordering_edge_from_a_node_in_a_branch_to_a_live_update():
    with tf.Graph().as_default():
        y, upd, flag, x = _reads_and_update(in_branch=True)
        view = _view([y, upd], [flag, x])
    reader = next(k for k, n in enumerate(view.nodes) if n.op.name.endswith("reader"))
    before = [list(n.controls) for n in view.nodes]
    assert not view.order_before_writers(reader, {_index(view, "v")})
    assert [list(n.controls) for n in view.nodes] == before


def test_an_ordering_edge_after_a_cond_joins():
    with tf.Graph().as_default():
        y, upd, flag, x = _reads_and_update(in_branch=False)
        view = _view([y, upd], [flag, x])
    reader = _index(view, "reader")
    assert view.order_before_writers(reader, {_index(view, "v")})
    assert reader in view.nodes[_index(view, "update")].controls


def test_no_ordering_edge_in_a_partition_with_a_while_loop():
    with tf.Graph().as_default():
        v = tf.Variable(np.ones(4, np.float32), name="v")
        x = tf.placeholder(tf.float32, [4], name="x")
        r = tf.reduce_sum(tf.multiply(v, x, name="reader"))
        n = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        upd = tf.assign_sub(v, x, name="update")
        view = _view([r, n, upd], [x])
    assert not view.order_before_writers(_index(view, "reader"), {_index(view, "v")})


# -- values with and without the passes ------------------------------------------------


@pytest.mark.parametrize("flag_value", [True, False])
def test_dense_layers_in_a_cond_compute_as_without_the_passes(monkeypatch, flag_value):
    def program():
        x = tf.placeholder(tf.float32, [None, 32])
        flag = tf.placeholder(tf.bool, [])
        w1, w2, b1 = tf.constant(W1), tf.constant(W2), tf.constant(B1)

        def true_fn():
            h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
            with tf.control_dependencies([h]):  # (waits for the fused node's pattern)
                k = tf.constant(3.0)
            return tf.matmul(h, w2) * k

        def false_fn():
            return tf.tanh(tf.matmul(x, w1))

        y = tf.cond(flag, true_fn, false_fn)
        out = tf.nn.relu(y + 1.0)
        with tf.Session() as s:
            return s.run(out, {x: X, flag: flag_value}), _fused_types(s)

    (fused, types), (plain, _) = _with_and_without_passes(monkeypatch, program)
    if flag_value:
        want = _relu(_relu(X @ W1 + B1) @ W2 * 3.0 + 1.0)
    else:
        want = _relu(np.tanh(X @ W1) + 1.0)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused, want, rtol=1e-4, atol=1e-4)
    assert "_FusedMatMul" in types  # (the fusions apply inside the branches)


@pytest.mark.parametrize("a_value,b_value", [(True, True), (True, False), (False, True)])
def test_nested_conds_compute_as_without_the_passes(monkeypatch, a_value, b_value):
    def program():
        x = tf.placeholder(tf.float32, [None, 32])
        a = tf.placeholder(tf.bool, [])
        b = tf.placeholder(tf.bool, [])
        w1 = tf.constant(W1)

        def inner_true():
            return tf.nn.relu(tf.matmul(x, w1) + tf.constant(B1))

        def inner_false():
            return tf.sigmoid(tf.matmul(x, w1)) * 2.0

        y = tf.cond(a, lambda: tf.cond(b, inner_true, inner_false), lambda: tf.matmul(x, w1))
        z = tf.tanh(y) + tf.sigmoid(y)
        with tf.Session() as s:
            return s.run([y, z], {x: X, a: a_value, b: b_value})

    fused, plain = _with_and_without_passes(monkeypatch, program)
    p = X @ W1
    if not a_value:
        y = p
    elif b_value:
        y = _relu(p + B1)
    else:
        y = 2.0 / (1.0 + np.exp(-p))
    for f, q in zip(fused, plain):
        np.testing.assert_allclose(f, q, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused[0], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fused[1], np.tanh(y) + 1 / (1 + np.exp(-y)), rtol=1e-4, atol=1e-4)


def test_a_cond_inside_a_while_loop_computes_as_without_the_passes(monkeypatch):
    def program():
        x = tf.placeholder(tf.float32, [None, 24])
        w2 = tf.constant(W2)

        def body(i, h):
            h = tf.cond(
                tf.equal(i % 2, 0),
                lambda: tf.nn.relu(tf.matmul(h, w2) + 0.5),
                lambda: tf.tanh(h) * 0.9,
            )
            return i + 1, h

        _, h = tf.while_loop(lambda i, h: i < 5, body, [tf.constant(0), x])
        loss = tf.reduce_sum(h * h)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as s:
            return s.run([h, g], {x: X[:, :24]})

    fused, plain = _with_and_without_passes(monkeypatch, program)
    h = X[:, :24]
    for i in range(5):
        h = _relu(h @ W2 + 0.5) if i % 2 == 0 else np.tanh(h) * 0.9
    for f, q in zip(fused, plain):
        np.testing.assert_allclose(f, q, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused[0], h, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("flag_value", [True, False])
def test_gradients_of_a_cond_compute_as_without_the_passes(monkeypatch, flag_value):
    def program():
        x = tf.placeholder(tf.float32, [None, 32])
        flag = tf.placeholder(tf.bool, [])
        w1 = tf.Variable(W1)
        b1 = tf.Variable(B1)
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        h = tf.cond(flag, lambda: h * 2.0, lambda: tf.identity(h))
        loss = tf.reduce_sum(tf.nn.relu(h - 0.5))
        grads = tf.gradients(loss, [x, w1, b1])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            return s.run(grads, {x: X, flag: flag_value})

    fused, plain = _with_and_without_passes(monkeypatch, program)
    scale = 2.0 if flag_value else 1.0
    pre = X @ W1 + B1
    dh = ((_relu(pre) * scale - 0.5) > 0) * scale * (pre > 0)
    want = [dh @ W1.T, X.T @ dh, dh.sum(0)]
    for f, q, w in zip(fused, plain, want):
        np.testing.assert_allclose(f, q, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(f, w, rtol=1e-4, atol=1e-4)


def test_an_mlp_with_dropout_on_a_training_tensor_keeps_its_fusions(monkeypatch):
    # Training and evaluation steps interleaved: the weights after them, and the
    # evaluation logits, agree with and without the passes (the seeded masks too).
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((32, 64)).astype(np.float32)
    yv = rng.integers(0, 10, 32)

    def program():
        tf.set_random_seed(3)
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.placeholder(tf.int64, [None])
        training = tf.placeholder_with_default(False, [])
        h = tf.layers.dense(x, 48, tf.nn.relu)
        h = tf.layers.dropout(h, 0.5, training=training)
        h = tf.layers.dense(h, 48, tf.nn.relu)
        logits = tf.layers.dense(h, 10)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        out = []
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for t in (True, False, True, True, False):
                if t:
                    s.run(train, {x: xv, y: yv, training: True})
                else:
                    out.append(s.run(logits, {x: xv}))
            out.extend(s.run(tf.trainable_variables()))
            return out, _fused_types(s)

    (fused, types), (plain, _) = _with_and_without_passes(monkeypatch, program)
    for f, q in zip(fused, plain):
        np.testing.assert_allclose(f, q, rtol=1e-5, atol=1e-6)
    # (One ReluGrad takes its product; the other's gradient comes through the dropout.)
    assert types.count("_FusedMatMulReluGrad") == 1
    assert types.count("_FusedMatMulApplyGradientDescent") == 3
    # The last evaluation's logits: the plain forward pass of the final weights.
    k1, b1, k2, b2, k3, b3 = fused[2:]
    want = _relu(_relu(xv @ k1 + b1) @ k2 + b2) @ k3 + b3
    np.testing.assert_allclose(fused[1], want, rtol=1e-4, atol=1e-4)


def test_a_node_waiting_for_a_taken_product_in_a_branch_stays_dead_with_it(monkeypatch):
    # The constant waits for a MatMul of the branch that the MatMul+BiasAdd+Relu fusion
    # takes: what the MatMul waited for (its Switches) is live in either branch, so the
    # constant waits for the fused node instead and stays dead with the branch.
    from asyncflow.ops import matmul_ops

    def build():
        x = tf.placeholder(tf.float32, [None, 32])
        flag = tf.placeholder(tf.bool, [])

        def true_fn():
            mm = tf.matmul(x, tf.constant(W1))
            h = tf.nn.relu(tf.nn.bias_add(mm, tf.constant(B1)))
            with tf.control_dependencies([mm]):
                k = tf.constant(3.0, name="k")
            return k, tf.reduce_sum(h)

        k, total = tf.cond(flag, true_fn, lambda: (tf.constant(-1.0), tf.constant(-2.0)))
        return x, flag, k, total

    with tf.Graph().as_default():
        x, flag, k, total = build()
        view = _view([k, total], [x, flag])
    const = _index(view, "cond/k")
    before = view.deadness().node[const]
    matmul_ops.fuse_matmul_bias(view)
    assert "_FusedMatMul" in [n.op.type for n in view.nodes]
    assert before and view.deadness().node[const] == before

    def program():
        x, flag, k, total = build()
        with tf.Session() as s:
            return [s.run([k, total], {x: X, flag: f}) for f in (False, True, False)]

    fused, plain = _with_and_without_passes(monkeypatch, program)
    want_total = _relu(X @ W1 + B1).sum()
    for got in (fused, plain):
        assert got[0] == [-1.0, -2.0] and got[2] == [-1.0, -2.0]
        assert got[1][0] == 3.0
        np.testing.assert_allclose(got[1][1], want_total, rtol=1e-4)


def test_summaries_beside_a_dropout_cond_fuse_and_merge_as_without_the_passes(monkeypatch):
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((16, 32)).astype(np.float32)

    def program():
        tf.set_random_seed(4)
        x = tf.placeholder(tf.float32, [None, 32])
        training = tf.placeholder_with_default(False, [])
        h = tf.layers.dense(x, 24, tf.nn.relu, name="dense")
        h = tf.layers.dropout(h, 0.5, training=training)
        loss = tf.reduce_mean(tf.square(tf.layers.dense(h, 1, name="out")))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        kernel = tf.trainable_variables()[0]
        merged = tf.summary.merge(
            [tf.summary.scalar("loss", loss), tf.summary.histogram("kernel", kernel)]
        )
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out = [s.run([merged, train], {x: xv, training: t})[0] for t in (True, False, True)]
            return out, _fused_types(s)

    (fused, types), (plain, _) = _with_and_without_passes(monkeypatch, program)
    assert fused == plain
    assert "_FusedMergeSummary" in types


def test_an_unrolled_rnn_beside_a_dropout_cond_pairs_its_weight_products(monkeypatch):
    # The weight gradient of a static LSTM is a sum of one product per step, each
    # paired with its step's input gradient (_MatMulSumPair); a dropout's cond on the
    # inputs leaves every product live under the same conditions, so the chain forms.
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((8, 5, 12)).astype(np.float32)

    def program():
        tf.set_random_seed(5)
        x = tf.placeholder(tf.float32, [None, 5, 12])
        training = tf.placeholder_with_default(False, [])
        dropped = tf.layers.dropout(x, 0.3, training=training)
        cell = tf.nn.rnn_cell.BasicLSTMCell(32)
        out, _ = tf.nn.static_rnn(cell, tf.unstack(dropped, 5, 1), dtype=tf.float32)
        loss = tf.reduce_sum(out[-1] * out[-1])
        grads = tf.gradients(loss, tf.trainable_variables() + [x])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            return s.run(grads, {x: xv, training: True}), _fused_types(s)

    (fused, types), (plain, _) = _with_and_without_passes(monkeypatch, program)
    for f, q in zip(fused, plain):
        np.testing.assert_allclose(f, q, rtol=1e-5, atol=1e-5)
    assert types.count("_MatMulSumPair") >= 4


def test_no_ordering_edge_in_a_partition_that_receives_from_another():
    # The reader's input comes from another partition, which could itself wait for the
    # update: an edge no path inside this partition shows would close a cycle.
    with tf.Graph().as_default():
        v = tf.Variable(np.ones(4, np.float32), name="v")
        x = tf.placeholder(tf.float32, [4], name="x")
        remote = tf.tanh(x, name="remote")
        r = tf.reduce_sum(tf.multiply(v, remote, name="reader"))
        upd = tf.assign_sub(v, x, name="update")
        fetches = [r, upd]
        order = partition.prune([x], fetches)
        here = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
        there = CPUDevice("/job:localhost/replica:0/task:1/device:CPU:0")
        place = {op: (there if op.name == "remote" else here) for op in order}
        parts, _ = partition.partition(order, place, [x], fetches, tf.Graph())
    (p,) = [p for p in parts if any(n.op.name == "reader" for n in p.nodes)]
    view = graph_passes.PartitionView(p, tf.Graph())
    assert "_Recv" in [n.op.type for n in view.nodes]
    assert not view.order_before_writers(_index(view, "reader"), {_index(view, "v")})
