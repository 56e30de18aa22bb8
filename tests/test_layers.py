"""af.layers: TF1 variable and op names, reuse, UPDATE_OPS, and a small conv net's
outputs, loss, gradients and moving statistics against TF's numbers
(tests/fixtures/nn_layers_tf.json); af.initializers."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow import initializers, layers, losses, regularizers
from asyncflow.gradients import gradients
from asyncflow.session import Session

NET = json.loads((pathlib.Path(__file__).parent / "fixtures" / "nn_layers_tf.json").read_text())[
    "layers"
]
_RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _names(vs):
    return [v.name for v in vs]


def test_small_net_against_tf():
    x = af.placeholder(af.float32, [2, 6, 6, 2])
    w = {k: np.asarray(v, np.float32) for k, v in NET["weights"].items()}
    init = {k: af.constant_initializer(v) for k, v in w.items()}
    h = layers.conv2d(x, 3, 3, padding="same", activation=af.nn.relu,
                      kernel_initializer=init["conv2d/kernel"],
                      bias_initializer=init["conv2d/bias"])  # fmt: skip
    h = layers.max_pooling2d(h, 2, 2)
    h = layers.batch_normalization(h, training=True, momentum=0.9)
    h = layers.flatten(h)
    h = layers.dropout(h, 0.5, training=False)
    y = layers.dense(h, 4, kernel_initializer=init["dense/kernel"],
                     bias_initializer=init["dense/bias"])  # fmt: skip
    loss = losses.sparse_softmax_cross_entropy(np.asarray(NET["labels"]), y)
    assert _names(af.global_variables()) == [
        "conv2d/kernel:0", "conv2d/bias:0", "batch_normalization/gamma:0",
        "batch_normalization/beta:0", "batch_normalization/moving_mean:0",
        "batch_normalization/moving_variance:0", "dense/kernel:0", "dense/bias:0",
    ]  # fmt: skip
    trainable = af.trainable_variables()
    assert "batch_normalization/moving_mean:0" not in _names(trainable)
    updates = af.get_collection(af.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    grads = gradients(loss, trainable)
    moving = [v for v in af.global_variables() if "moving" in v.name]
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        out = sess.run([y, loss, *grads], {x: np.asarray(NET["x"], np.float32)})
        sess.run(updates, {x: np.asarray(NET["x"], np.float32)})
        mv = sess.run(moving)
    np.testing.assert_allclose(out[0], NET["y"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[1], NET["loss"], rtol=1e-5)
    for got, want in zip(out[2:], NET["grads"]):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
    for got, want in zip(mv, NET["moving"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_names_scopes_and_reuse():
    x = af.placeholder(af.float32, [None, 3])
    a = layers.dense(x, 2)
    b = layers.dense(x, 2, activation=af.nn.relu)
    with af.variable_scope("model"):
        c = layers.dense(x, 2, name="fc")
    assert a.op.name == "dense/BiasAdd" and b.op.name == "dense_1/Relu"
    assert c.op.name == "model/fc/BiasAdd"
    assert "model/fc/kernel:0" in _names(af.global_variables())
    with pytest.raises(ValueError, match="already exists"):
        with af.variable_scope("model"):
            layers.dense(x, 2, name="fc")
    with af.variable_scope("model", reuse=True):
        d = layers.dense(x, 2, name="fc")
    assert len(af.trainable_variables()) == 6
    assert d.op.name != c.op.name


def test_dense_rank3_and_no_bias():
    x = _RNG.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    y = layers.dense(x, 5, use_bias=False)
    assert y.shape.as_list() == [2, 3, 5] and len(af.trainable_variables()) == 1
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        out, k = sess.run([y, af.trainable_variables()[0]])
    np.testing.assert_allclose(out, x @ k, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="last dimension"):
        layers.dense(af.placeholder(af.float32, [None, None]), 3)


def test_conv_and_pool_layers_nchw():
    x = _RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    y = layers.conv2d(x, 4, (3, 3), strides=2, padding="same", data_format="channels_first")
    assert y.shape.as_list() == [2, 4, 4, 4]
    assert y.op.name == "conv2d/BiasAdd" and y.op.get_attr("data_format") == b"NCHW"
    p = layers.max_pooling2d(y, 2, 2, data_format="channels_first")
    q = layers.average_pooling2d(y, 2, 1, padding="same", data_format="channels_first")
    assert p.op.name == "max_pooling2d/MaxPool" and p.shape.as_list() == [2, 4, 2, 2]
    assert q.op.name == "average_pooling2d/AvgPool" and q.shape.as_list() == [2, 4, 4, 4]
    f = layers.flatten(p, data_format="channels_first")
    assert f.shape.as_list() == [2, 16]
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        pv, fv = sess.run([p, f])
    np.testing.assert_allclose(fv, pv.transpose(0, 2, 3, 1).reshape(2, -1))
    with pytest.raises(ValueError, match="padding"):
        layers.conv2d(x, 4, 3, padding="full")
    with pytest.raises(ValueError, match="data_format"):
        layers.max_pooling2d(x, 2, 2, data_format="nchw")


def test_flatten_unknown_batch():
    x = af.placeholder(af.float32, [None, 2, 3])
    f = layers.flatten(x)
    assert f.shape.as_list() == [None, 6]
    with Session() as sess:
        assert sess.run(f, {x: np.zeros((4, 2, 3))}).shape == (4, 6)


def test_dropout_layer_training_flag():
    x = np.ones((50, 40), np.float32)
    training = af.placeholder(af.bool, [])
    y = layers.dropout(x, rate=0.5, training=training, seed=1)
    off = layers.dropout(x, rate=0.5)
    with Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {training: False}), x)
        on = sess.run(y, {training: True})
        np.testing.assert_array_equal(sess.run(off), x)
    assert set(np.unique(on)) <= {0.0, 2.0} and 0.4 < (on == 0).mean() < 0.6


@pytest.mark.parametrize(
    "shape,axis,fused",
    [
        ((4, 3, 2, 5), -1, None),
        ((4, 5, 2, 3), 1, None),
        ((6, 5), -1, None),
        ((4, 3, 2, 5), -1, False),
    ],
)
def test_batch_normalization_modes(shape, axis, fused):  # fmt: skip
    x = _RNG.uniform(-2, 2, shape).astype(np.float32)
    training = af.placeholder(af.bool, [])
    y = layers.batch_normalization(x, axis=axis, training=training, fused=fused, momentum=0.5)
    updates = af.get_collection(af.GraphKeys.UPDATE_OPS)
    ax = axis % len(shape)
    red = tuple(i for i in range(len(shape)) if i != ax)
    n = x.size // shape[ax]
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        infer = sess.run(y, {training: False})
        train, _, _ = sess.run([y, *updates], {training: True})
        mm, mv = sess.run([v for v in af.global_variables() if "moving" in v.name])
    np.testing.assert_allclose(infer, x / np.sqrt(1 + 1e-3), rtol=1e-5, atol=1e-5)
    mean, var = x.mean(axis=red, keepdims=True), x.var(axis=red, keepdims=True)
    np.testing.assert_allclose(train, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mm, 0.5 * mean.reshape(-1), rtol=1e-5, atol=1e-6)
    # the fused kernel (4-D, channel axis) updates with the unbiased variance, as TF's
    bessel = n / (n - 1) if (fused is None and len(shape) == 4) else 1.0
    np.testing.assert_allclose(mv, 0.5 + 0.5 * var.reshape(-1) * bessel, rtol=1e-5)


def test_batch_normalization_inference_has_no_updates_and_errors():
    x = af.placeholder(af.float32, [None, 3])
    layers.batch_normalization(x, center=False, scale=False)
    assert af.get_collection(af.GraphKeys.UPDATE_OPS) == []
    assert _names(af.global_variables()) == [
        "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="fused"):
        layers.batch_normalization(x, fused=True)
    with pytest.raises(ValueError, match="axis"):
        layers.batch_normalization(x, axis=2)


def test_kernel_regularizer_and_activity_regularizer():
    x = np.ones((2, 3), np.float32)
    layers.dense(x, 2, kernel_regularizer=regularizers.l2_regularizer(0.1),
                 activity_regularizer=regularizers.l1_regularizer(0.01))  # fmt: skip
    regs = af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)
    assert len(regs) == 2
    assert regs[0].op.name.startswith("dense/kernel/Regularizer")


def test_layers_train_end_to_end():
    """A few SGD steps by hand lower the loss (gradients flow through every layer)."""
    x = _RNG.uniform(-1, 1, (8, 6, 6, 1)).astype(np.float32)
    labels = np.arange(8) % 3
    h = layers.conv2d(x, 4, 3, padding="same", activation=af.nn.relu)
    h = layers.max_pooling2d(h, 2, 2)
    h = layers.batch_normalization(h, training=True)
    h = layers.dense(layers.flatten(h), 3)
    loss = losses.sparse_softmax_cross_entropy(labels, h)
    params = af.trainable_variables()
    step = [af.assign_sub(v, 0.5 * g) for v, g in zip(params, gradients(loss, params))]
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(10):
            sess.run(step)
        assert sess.run(loss) < first * 0.7


@pytest.mark.parametrize(
    "name,args,check",
    [
        ("zeros", (), lambda v: np.all(v == 0)),
        ("ones", (), lambda v: np.all(v == 1)),
        ("constant", (3.0,), lambda v: np.all(v == 3)),
        ("identity", (2.0,), lambda v: np.array_equal(v, 2 * np.eye(4, 5))),
        ("he_normal", (1,), lambda v: abs(v.std() - np.sqrt(2 / 4)) < 0.35),
        ("he_uniform", (1,), lambda v: np.abs(v).max() <= np.sqrt(6 / 4)),
        ("glorot_uniform", (1,), lambda v: np.abs(v).max() <= np.sqrt(6 / 9)),
        ("orthogonal", (), lambda v: np.allclose(v @ v.T, np.eye(4), atol=1e-5)),
        ("variance_scaling", (), lambda v: v.shape == (4, 5)),
    ],
)
def test_initializers(name, args, check):
    init = getattr(initializers, name)(*args)
    v = af.get_variable("v", [4, 5], initializer=init)
    with Session() as sess:
        sess.run(initializers.global_variables())
        assert check(sess.run(v))
    with pytest.raises(ValueError, match="2D"):
        initializers.identity()([2, 2, 2])
