"""Batch normalization on a `training` tensor builds TF's smart_cond graph, as TF 2.21:
tf.layers.batch_normalization (plain and fused kernels) and tf.keras.layers
.BatchNormalization in graph mode.  Conds pick the batch's statistics or the moving
averages (the fused kernel: the training or the inference kernel, and the momentum);
the moving averages' updates are conds whose Merge is in UPDATE_OPS, so evaluation
steps between training steps leave them as they are.  Names and values over
interleaved steps were recorded from TF 2.21 (fixtures/record_bn_cond_tf.py, from
fixtures/bn_cond_cases.py, into fixtures/bn_cond_tf.json)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph_passes

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import bn_cond_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "bn_cond_tf.json").read_text())


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_names_as_tf(name):
    got, want = cases.run(tf, name), RECORDED[name]
    assert got["y"] == want["y"]
    assert got["updates"] == want["updates"]
    assert got["cond_ops"] == want["cond_ops"]


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_values_over_interleaved_steps_as_tf(name):
    got, want = cases.run(tf, name), RECORDED[name]
    for k, (g, w) in enumerate(zip(got["steps"], want["steps"])):
        np.testing.assert_allclose(g["y"], w["y"], rtol=1e-5, atol=2e-6, err_msg=f"step {k}")
        for a, b in zip(g["moving"], w["moving"]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=f"step {k}")
        for a, b in zip(g["grads"], w["grads"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5, err_msg=f"step {k}")


def test_evaluation_steps_leave_the_moving_averages_alone():
    steps = RECORDED["dense"]["steps"]
    for k, training in enumerate(cases.STEPS):
        if not training:
            assert steps[k]["moving"] == steps[k - 1]["moving"]


def test_the_statistics_and_the_updates_are_conds():
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [4, 3])
        training = tf.placeholder(tf.bool, [])
        tf.layers.batch_normalization(x, training=training)
        (update,) = tf.get_collection(tf.GraphKeys.UPDATE_OPS)[:1]
        types = {op.type for op in g.get_operations()}
    assert update.type == "Merge" and update.name == "batch_normalization/cond_2/Merge"
    assert "Select" not in types and {"Switch", "Merge", "AssignSub"} <= types


def test_a_training_step_computes_as_without_the_graph_passes(monkeypatch):
    # Dense, batch norm, ReLU, dense: the deadness analysis lets the passes fuse and
    # order around the conds; the weights and moving averages after interleaved steps
    # are those of the plain graph.
    rng = np.random.default_rng(2)
    xv = rng.standard_normal((16, 12)).astype(np.float32)
    yv = rng.integers(0, 4, 16)

    def program():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [None, 12])
        labels = tf.placeholder(tf.int64, [None])
        training = tf.placeholder_with_default(False, [])
        h = tf.layers.dense(x, 16, use_bias=False)
        h = tf.nn.relu(tf.layers.batch_normalization(h, training=training))
        logits = tf.layers.dense(h, 4)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            evals = []
            for t in (True, False, True, True, False):
                if t:
                    s.run(train, {x: xv, labels: yv, training: True})
                else:
                    evals.append(s.run(logits, {x: xv}))
            return evals + s.run(tf.global_variables())

    with tf.Graph().as_default():
        fused = program()
    with monkeypatch.context() as m:
        m.setattr(graph_passes, "GRAPH_PASSES", [])
        with tf.Graph().as_default():
            plain = program()
    for f, p in zip(fused, plain):
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6)
