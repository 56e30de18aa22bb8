"""Estimator training under tf.distribute (`RunConfig(train_distribute=...)`).

The expected values were recorded from TensorFlow 2.15.1 (tensorflow_estimator, graph
mode, MirroredStrategy over two CPU devices) running the same program.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)


def _input_fn():
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 10
    y = (x[:, :1] * 2 - x[:, 1:] + 0.5).astype(np.float32)
    return af.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(2)


def _model_fn(features, labels, mode):
    w = af.get_variable("w", [2, 1], initializer=af.zeros_initializer())
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    loss = af.losses.mean_squared_error(labels, pred)
    opt = af.train.GradientDescentOptimizer(0.1)
    train_op = opt.minimize(loss, global_step=af.train.get_global_step())
    return af.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_estimator_trains_with_mirrored_strategy(tmp_path):
    strategy = af.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    config = af.estimator.RunConfig(
        train_distribute=strategy,
        session_config=af.ConfigProto(device_count={"CPU": 2}),
        log_step_count_steps=1,
    )
    est = af.estimator.Estimator(_model_fn, model_dir=str(tmp_path), config=config)
    est.train(_input_fn, steps=3)
    # Each step: one batch per replica, each replica's MSE divided by 2 (the optimizer's
    # scaling of a MEAN loss), gradients summed: the mean gradient of two batches.
    np.testing.assert_allclose(est.get_variable_value("w").ravel(), [0.33716002, 0.37700969])
    np.testing.assert_allclose(est.get_variable_value("b"), [0.39849657])
    assert est.get_variable_value("global_step") == 3
    assert sorted(est.get_variable_names()) == ["b", "global_step", "w"]
    assert not af.distribute.has_strategy()


def _eval_model_fn(features, labels, mode, params):
    w = af.get_variable("w", [2, 1], initializer=af.constant_initializer(0.3))
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    loss = af.losses.mean_squared_error(labels, pred)
    metrics = {"mae": af.metrics.mean_absolute_error(labels, pred), "mp": af.metrics.mean(pred)}
    return af.estimator.EstimatorSpec(
        mode, loss=loss, eval_metric_ops=metrics, train_op=af.no_op()
    )


def _eval_input_fn():
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 10
    y = (x[:, :1] * 2 - x[:, 1:] + 0.5).astype(np.float32)
    return af.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(2)


def test_estimator_evaluates_with_mirrored_strategy(tmp_path):
    strategy = af.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    config = af.estimator.RunConfig(
        eval_distribute=strategy, session_config=af.ConfigProto(device_count={"CPU": 2})
    )
    est = af.estimator.Estimator(_eval_model_fn, model_dir=str(tmp_path), config=config, params={})
    got = est.evaluate(_eval_input_fn)
    # The four batches, two per replica: the same metrics as without a strategy.
    assert sorted(got) == ["global_step", "loss", "mae", "mp"]
    np.testing.assert_allclose(got["loss"], 0.45610005, rtol=1e-6)
    np.testing.assert_allclose(got["mae"], 0.65000004, rtol=1e-6)
    np.testing.assert_allclose(got["mp"], 0.45, rtol=1e-6)
    assert got["global_step"] == 0
    # (Metrics other than mean-based ones: tests/test_distribute_s26_strategies.py.)
