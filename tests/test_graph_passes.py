"""Graph passes (asyncflow.graph_passes), each alone on a small graph.

A pass replaces a pattern of a partition's nodes by one internal op (`_FusedMatMul`,
`_FusedBiasAddRelu`, `_FusedMaxPoolGradReluGrad`) and drops what it absorbed; it leaves
a pattern alone when an intermediate value is seen elsewhere (another consumer, a
fetch). The fused graph computes what the unfused one does (NumPy as the reference).
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph_passes, partition
from asyncflow.devices.cpu import CPUDevice
from asyncflow.ops import (
    fused_elementwise,
    matmul_ops,
    matmul_sum,
    nn_ops,
    select_zero,
    summary_ops,
    training_ops,
)

pytestmark = pytest.mark.timeout(30)

RNG = np.random.default_rng(11)
A = RNG.standard_normal((80, 64)).astype(np.float32)
W = RNG.standard_normal((64, 96)).astype(np.float32)
B = RNG.standard_normal(96).astype(np.float32)


def _partition(fetches, feeds=()):
    order = partition.prune(list(feeds), fetches)
    dev = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
    parts, _ = partition.partition(
        order, dict.fromkeys(order, dev), list(feeds), fetches, tf.Graph()
    )
    return parts[0]


def _apply(rewrite, p):
    view = graph_passes.PartitionView(p, tf.Graph())
    rewrite(view)
    view.finish()
    return [n.op.type for n in p.nodes]


def test_matmul_bias_relu_becomes_one_fused_matmul():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, tf.constant(W)), tf.constant(B)))
        p = _partition([y], [x])
        types = _apply(matmul_ops.fuse_matmul_bias, p)
        assert types.count("_FusedMatMul") == 1
        assert not {"MatMul", "BiasAdd", "Relu"} & set(types)
        (fused,) = [n for n in p.nodes if n.op.type == "_FusedMatMul"]
        assert fused.op.get_attr("relu") and fused.op.get_attr("add_type") == b"BiasAdd"
        assert p.fetches == [(p.nodes.index(fused), 0)]  # the fetch follows the fused node


def test_an_intermediate_seen_elsewhere_is_not_absorbed():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 64])
        pre = tf.matmul(x, tf.constant(W)) + tf.constant(B)
        y = tf.nn.relu(pre)
        p = _partition([y, pre], [x])  # the sum is fetched: the Relu stays apart
        types = _apply(matmul_ops.fuse_matmul_bias, p)
        assert "Relu" in types and "_FusedMatMul" in types and "MatMul" not in types
        mm = tf.matmul(x, tf.constant(W))
        z = tf.nn.relu(tf.nn.bias_add(mm, tf.constant(B))) + mm  # the product used twice
        p = _partition([z], [x])
        assert "_FusedMatMul" not in _apply(matmul_ops.fuse_matmul_bias, p)


def test_bias_add_relu_and_control_edges_move_to_the_fused_node():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 96])
        gate = tf.no_op(name="gate")
        x2, bias = x * 2.0, tf.constant(B)  # (made inside, they would carry ^gate, as TF)
        with tf.control_dependencies([gate]):
            b = tf.nn.bias_add(x2, bias)
        y = tf.nn.relu(b)
        p = _partition([y], [x])
        types = _apply(nn_ops.fuse_bias_add_relu, p)
        assert "_FusedBiasAddRelu" in types and "BiasAdd" not in types and "Relu" not in types
        (fused,) = [n for n in p.nodes if n.op.type == "_FusedBiasAddRelu"]
        assert [p.nodes[c].op.name for c in fused.controls] == ["gate"]


def _conv_layer(xs, ws, strides=(1, 1, 1, 1), dtype=tf.float32):
    x = tf.placeholder(dtype, xs)
    w = tf.constant(RNG.standard_normal(ws).astype(dtype.as_numpy_dtype))
    conv = tf.nn.conv2d(x, w, list(strides), "SAME")
    bias = tf.constant(RNG.standard_normal(ws[3]).astype(dtype.as_numpy_dtype))
    return x, conv, tf.nn.relu(tf.nn.bias_add(conv, bias))


def test_conv2d_bias_add_relu_of_few_channels_becomes_one_node():
    with tf.Graph().as_default():
        x, _, y = _conv_layer([None, 8, 8, 1], [5, 5, 1, 4])
        p = _partition([y], [x])
        types = _apply(nn_ops.fuse_conv2d_bias_add_relu, p)
        assert "_FusedConv2DBiasAddRelu" in types
        assert not {"Conv2D", "BiasAdd", "Relu"} & set(types)


@pytest.mark.parametrize(
    "xs,ws,strides,dtype",
    [
        ([None, 8, 8, 5], [3, 3, 5, 4], (1, 1, 1, 1), tf.float32),  # more than 4 channels
        ([None, 8, 8, 1], [3, 3, 1, 4], (1, 2, 2, 1), tf.float32),  # stride 2
        ([None, 8, 8, 1], [3, 3, 1, 4], (1, 1, 1, 1), tf.float64),  # not float32
    ],
)
@pytest.mark.parametrize("use_onednn", [True, False])
def test_conv2d_bias_add_relu_left_to_the_pair_fusion(
    xs, ws, strides, dtype, use_onednn, monkeypatch
):
    from asyncflow.ops import conv_ops, onednn

    monkeypatch.setattr(conv_ops, "_ONEDNN", use_onednn)
    with tf.Graph().as_default():
        x, _, y = _conv_layer(xs, ws, strides, dtype)
        p = _partition([y], [x])
        types = _apply(nn_ops.fuse_conv2d_bias_add_relu, p)
        # (float32 of many channels, stride 1: oneDNN's kernel with the bias and ReLU)
        fused = use_onednn and onednn.available() and xs[3] > 4 and dtype == tf.float32
        assert ("_FusedConv2DBiasAddRelu" in types) == fused and ("Conv2D" in types) != fused


def test_conv2d_seen_elsewhere_is_not_absorbed():
    with tf.Graph().as_default():
        x, conv, y = _conv_layer([None, 8, 8, 1], [5, 5, 1, 4])
        p = _partition([y, conv], [x])  # the convolution is fetched too
        types = _apply(nn_ops.fuse_conv2d_bias_add_relu, p)
        assert "_FusedConv2DBiasAddRelu" not in types and "Conv2D" in types


def test_conv_layer_and_its_pool_become_one_node_whose_activation_the_gradient_reads():
    with tf.Graph().as_default():
        x, _, y = _conv_layer([None, 8, 8, 1], [5, 5, 1, 4])
        pool = tf.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        (dx,) = tf.gradients(tf.reduce_sum(pool), [x])
        p = _partition([dx], [x])
        types = _apply(nn_ops.fuse_conv2d_bias_add_relu, p)
        assert "_FusedConv2DBiasAddReluMaxPool" in types
        assert not {"Conv2D", "BiasAdd", "Relu", "MaxPool"} & set(types)
        fused = next(k for k, n in enumerate(p.nodes) if n.op.type.endswith("MaxPool"))
        (grad,) = [n for n in p.nodes if n.op.type == "MaxPoolGrad"]
        assert [tuple(src) for src in grad.inputs[:2]] == [(fused, 1), (fused, 0)]
        # MaxPoolGrad + ReluGrad then read the window codes the fused layer wrote
        types = _apply(nn_ops.fuse_max_pool_grad_relu_grad, p)
        assert "_FusedMaxPoolGradReluGradOfArgmax" in types and "ReluGrad" not in types
        fused = next(k for k, n in enumerate(p.nodes) if n.op.type.endswith("MaxPool"))
        (grad,) = [n for n in p.nodes if n.op.type == "_FusedMaxPoolGradReluGradOfArgmax"]
        assert [tuple(src) for src in grad.inputs[:2]] == [(fused, 2), (fused, 0)]


@pytest.mark.parametrize("second_pool", [False, True])
def test_a_pool_of_other_windows_or_a_second_pool_stays_apart(second_pool):
    with tf.Graph().as_default():
        x, _, y = _conv_layer([None, 8, 8, 1], [5, 5, 1, 4])
        if second_pool:  # two poolings of one activation
            pools = [tf.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME") for _ in range(2)]
        else:  # 3x3 windows
            pools = [tf.nn.max_pool(y, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")]
        p = _partition(pools, [x])
        types = _apply(nn_ops.fuse_conv2d_bias_add_relu, p)
        assert "_FusedConv2DBiasAddRelu" in types and "MaxPool" in types


def test_max_pool_grad_relu_grad_pattern():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2, 8, 8, 3])
        pool = tf.nn.max_pool(tf.nn.relu(x), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        (dx,) = tf.gradients(pool, [x])
        p = _partition([dx], [x])
        types = _apply(nn_ops.fuse_max_pool_grad_relu_grad, p)
        assert "_FusedMaxPoolGradReluGrad" in types and "ReluGrad" not in types


@pytest.mark.parametrize("passes_on", [True, False])
def test_fused_and_unfused_graphs_agree_with_numpy(monkeypatch, passes_on):
    if not passes_on:
        monkeypatch.setattr(graph_passes, "GRAPH_PASSES", [])
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 64])
        dense = tf.nn.relu(tf.matmul(x, tf.constant(W)) + tf.constant(B))
        dense2 = tf.nn.relu(tf.nn.bias_add(tf.constant(B) + tf.matmul(x, tf.constant(W)), -B))
        biased = tf.nn.relu(tf.nn.bias_add(x[:, :8] * 3.0, tf.constant(B[:8])))
        with tf.Session() as s:
            got = s.run([dense, dense2, biased], {x: A})
            fused = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    assert ("_FusedMatMul" in fused) == passes_on
    np.testing.assert_allclose(got[0], np.maximum(A @ W + B, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], np.maximum(B + A @ W - B, 0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[2], np.maximum(A[:, :8] * 3 + B[:8], 0), rtol=1e-6)


def test_the_passes_run_in_the_listed_order():
    assert graph_passes.GRAPH_PASSES == [
        summary_ops.fuse_summaries,  # before the ordering: the updates wait for the fused op
        summary_ops.order_before_updates,  # control edges only
        matmul_ops.fuse_matmul_bias,  # before BiasAdd+Relu: a dense layer is one gemm
        matmul_sum.merge_matmul_rows,  # two batches through one such layer: one gemm
        matmul_ops.fuse_matmul_relu_grad,
        nn_ops.fuse_conv2d_bias_add_relu,  # before BiasAdd+Relu: a small-C conv layer is one pass
        nn_ops.fuse_bias_add_relu,
        nn_ops.fuse_max_pool_grad_relu_grad,
        training_ops.fuse_matmul_into_updates,
        matmul_sum.fuse_matmul_add_n,  # after the updates took their single products
        matmul_sum.pair_matmuls,  # loops' products of one operand, after the sums
        matmul_sum.accumulate_pair_products,  # a pair's product into its Add's accumulator
        select_zero.fuse_select_zero,
        fused_elementwise.fuse_elementwise,  # what the patterns left, in clusters
        fused_elementwise.fuse_concat_outputs,  # a join of one fused node's outputs
        fused_elementwise.fuse_split_inputs,  # a Split whose pieces one fused node reads
        fused_elementwise.fuse_bias_add_grad,  # a BiasAddGrad of a fused node's join
        matmul_ops.fuse_concat_matmul,  # a join a product reads, after the joins' fusions
        fused_elementwise.mark_shape_only_outputs,  # last: outputs read for shapes alone
    ]


def test_summaries_of_a_merge_fuse_and_run_before_the_updates():
    """The scalars and histograms feeding one merge become one _FusedMergeSummary (the
    merge's name, its fetch); the ordering pass then makes the weights' updates wait for
    it.  A summary read elsewhere stays apart; a merge that waits for an update (a
    summary of the step counter after it) is left as it is."""
    with tf.Graph().as_default():
        train, (w1, w2) = _dense_training_graph()
        shared = tf.summary.scalar("shared", tf.constant(1.0))
        merged = tf.summary.merge(
            [tf.summary.histogram("w1", w1), tf.summary.histogram("w2", w2), shared]
        )
        step = tf.Variable(0, name="step")
        with tf.control_dependencies([train]):
            bump = tf.assign_add(step, 1)
        after = tf.summary.merge(
            [tf.summary.scalar("after", bump), tf.summary.histogram("w1_again", w1)]
        )
        p = _partition([train, merged, shared, after])
        types = _apply(summary_ops.fuse_summaries, p)
        assert types.count("_FusedMergeSummary") == 1 and types.count("MergeSummary") == 1
        assert types.count("HistogramSummary") == 1 and types.count("ScalarSummary") == 2
        (i,) = [k for k, n in enumerate(p.nodes) if n.op.type == "_FusedMergeSummary"]
        fused = p.nodes[i].op
        assert fused.name == merged.op.name and (i, 0) in p.fetches
        kinds = [k.decode() for k in fused.get_attr("kinds")]
        assert kinds == ["histogram", "histogram", "summary"]
        _apply(summary_ops.order_before_updates, p)
        updates = [n for n in p.nodes if n.op.type == "ApplyGradientDescent"]
        assert len(updates) == 2 and all(i in n.controls for n in updates)


def _dense_training_graph():
    x = tf.constant(A)
    w1, w2 = tf.Variable(W * 0.1), tf.Variable(W.T[:, :10] * 0.1)
    h = tf.nn.relu(tf.matmul(x, w1) + tf.constant(B))
    y = tf.matmul(h, w2)
    loss = tf.reduce_sum(y * y) / 2
    return tf.train.GradientDescentOptimizer(0.001).minimize(loss), [w1, w2]


def test_backprop_and_update_gemms_fuse_past_gate_gradients_without_a_cycle():
    with tf.Graph().as_default():
        train, _ = _dense_training_graph()
        p = _partition([train])
        types = []
        for rewrite in graph_passes.GRAPH_PASSES:
            types = _apply(rewrite, p)
        assert types.count("_FusedMatMulApplyGradientDescent") == 2
        assert types.count("_FusedMatMulReluGrad") == 1
        assert "ReluGrad" not in types
        # gate_gradients' group_deps waited for an absorbed MatMul that a later Identity
        # of the pattern waited on: the fused node must not wait for it (a cycle).
        order = []
        pending = [len(n.controls) + sum(s[0] != "feed" for s in n.inputs) for n in p.nodes]
        users = [[] for _ in p.nodes]
        for i, n in enumerate(p.nodes):
            for j in [s[0] for s in n.inputs if s[0] != "feed"] + n.controls:
                users[j].append(i)
        ready = [i for i, c in enumerate(pending) if not c]
        while ready:
            i = ready.pop()
            order.append(i)
            for u in users[i]:
                pending[u] -= 1
                if not pending[u]:
                    ready.append(u)
        assert len(order) == len(p.nodes)


def test_fused_training_matches_unfused_training(monkeypatch):
    results = []
    for passes in (list(graph_passes.GRAPH_PASSES), []):
        monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
        with tf.Graph().as_default():
            train, ws = _dense_training_graph()
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                for _ in range(3):
                    s.run(train)
                results.append(s.run(ws))
    for fused, plain in zip(*results):
        np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)


def test_assign_sub_of_a_scaled_product_fuses_into_one_update():
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros((64, 64), np.float32))
        upd = tf.assign_sub(v, 0.5 * tf.matmul(tf.constant(A.T), tf.constant(A)))
        p = _partition([upd])
        assert "_FusedMatMulAssignUpdate" in _apply(training_ops.fuse_matmul_into_updates, p)
        with tf.Session() as s:
            s.run(v.initializer)
            got = s.run(upd)
    want = -0.5 * (A.T @ A)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_fusing_keeps_weight_updates_after_the_gradients_that_read_the_weights(monkeypatch):
    # An MLP whose dropout sits in a cond, trained with SGD: every gradient gemm is
    # fused, yet each weight update still runs after the backprop product that reads
    # those weights, so copy-on-write never copies a weight matrix.
    from asyncflow.ops import state_ops

    copies = []
    real = state_ops.VarRef.writable_target

    def counting(ref):
        if not ref._exclusive():
            copies.append(ref.value.shape)
        return real(ref)

    monkeypatch.setattr(state_ops.VarRef, "writable_target", counting)
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((32, 64)).astype(np.float32)
    yv = rng.integers(0, 10, 32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.placeholder(tf.int64, [None])
        training = tf.placeholder_with_default(True, [])
        h = tf.layers.dense(x, 96, tf.nn.relu)
        h = tf.layers.dropout(h, 0.5, training=training)
        h = tf.layers.dense(h, 96, tf.nn.relu)
        logits = tf.layers.dense(h, 10)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(3):
                s.run(train, {x: xv, y: yv})
            fused = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    assert fused.count("_FusedMatMulApplyGradientDescent") == 3
    # One Relu's gradient takes its product; the other is behind the dropout.  The
    # dropout's cond (TF's smart_cond on a training tensor) joins in its Merge, so the
    # gradient and the update it is ordered before are live under the same conditions
    # (asyncflow.deadness) and the ordering edge is safe.
    assert fused.count("_FusedMatMulReluGrad") == 1
    assert copies == []


def test_a_plan_that_can_never_finish_is_an_error_not_empty_results(monkeypatch):
    # A compiler bug that leaves a node waiting for an input that never comes (a
    # cycle) must fail the step, not return None for the fetch.
    from asyncflow import errors, lowering

    def starve(plan):
        for i, op in enumerate(plan.nodes):
            if op.type == "Square":
                plan.init_pending[i] += 1  # waits forever
                if i in plan.init_ready:
                    plan.init_ready.remove(i)

    monkeypatch.setattr(lowering, "PLAN_PASSES", [*lowering.PLAN_PASSES, starve])
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", [])  # keep the Square a node
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [])
        y = tf.square(x) + 1.0
        with tf.Session() as s:
            with pytest.raises(errors.InternalError, match="cycle"):
                s.run(y, {x: 2.0})
        cond_y = tf.cond(x > 0, lambda: tf.square(x), lambda: x)
        with tf.Session() as s:
            with pytest.raises(errors.InternalError, match="cycle"):
                s.run(cond_y, {x: 2.0})
