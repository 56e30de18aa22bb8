"""Keras pieces added in s26 beside the callbacks (RadialConstraint, activations.mish,
tf.keras.experimental's schedule aliases, model_from_yaml's refusal) and the Keras
differences from TF fixed in s26.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1,
tf.disable_v2_behavior()) unless a test says TF 2.15.1.
"""

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


def _run(t):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(t)


# TF 2.21's values for the (0, k) kernels of np.arange(n*n*1*2).reshape(n, n, 1, 2):
# the centre (a cell, or a 2x2 block) takes k[s-1, s-1], ring r the diagonal beyond it.
RADIAL = {
    2: [[[[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]],
    3: [[[[8.0, 8.0, 8.0], [8.0, 0.0, 8.0], [8.0, 8.0, 8.0]],
         [[9.0, 9.0, 9.0], [9.0, 1.0, 9.0], [9.0, 9.0, 9.0]]]],
    4: [[[[30.0, 30.0, 30.0, 30.0], [30.0, 10.0, 10.0, 30.0], [30.0, 10.0, 10.0, 30.0],
          [30.0, 30.0, 30.0, 30.0]],
         [[31.0, 31.0, 31.0, 31.0], [31.0, 11.0, 11.0, 31.0], [31.0, 11.0, 11.0, 31.0],
          [31.0, 31.0, 31.0, 31.0]]]],
    5: [[[[36.0, 36.0, 36.0, 36.0, 36.0], [36.0, 24.0, 24.0, 24.0, 36.0],
          [36.0, 24.0, 12.0, 24.0, 36.0], [36.0, 24.0, 24.0, 24.0, 36.0],
          [36.0, 36.0, 36.0, 36.0, 36.0]],
         [[37.0, 37.0, 37.0, 37.0, 37.0], [37.0, 25.0, 25.0, 25.0, 37.0],
          [37.0, 25.0, 13.0, 25.0, 37.0], [37.0, 25.0, 25.0, 25.0, 37.0],
          [37.0, 37.0, 37.0, 37.0, 37.0]]]],
}  # fmt: skip


@pytest.mark.parametrize("n", sorted(RADIAL))
def test_radial_constraint_values(n):
    w = np.arange(n * n * 2, dtype="float32").reshape(n, n, 1, 2)
    out = _run(K.constraints.RadialConstraint()(tf.constant(w)))
    assert out.transpose(2, 3, 0, 1).tolist() == RADIAL[n]


def test_radial_constraint_names_and_rank_error():
    C = K.constraints
    assert C.radial_constraint is C.RadialConstraint
    assert type(C.get("radial_constraint")) is C.RadialConstraint
    assert C.serialize(C.RadialConstraint()) == {"class_name": "RadialConstraint", "config": {}}
    assert type(C.deserialize({"class_name": "RadialConstraint", "config": {}})).__name__ == (
        "RadialConstraint"
    )
    with pytest.raises(ValueError, match=r"must have rank 4. Received weight tensor with shape"):
        C.RadialConstraint()(tf.ones([2, 2]))


def test_mish_values_gradient_and_name():
    x = tf.constant([-20.0, -2.0, -0.5, 0.0, 0.3, 1.5, 25.0])
    expected = [-4.1223074731533416e-08, -0.2525014579296112, -0.22074377536773682, 0.0,
                0.20800139009952545, 1.4033781290054321, 25.0]  # fmt: skip
    np.testing.assert_allclose(_run(K.activations.mish(x)), expected, rtol=1e-6)
    g = tf.constant([-2.0, 0.0, 1.5])
    grad = _run(tf.gradients(K.activations.mish(g), g)[0])
    np.testing.assert_allclose(grad, [-0.10835510492324829, 0.6, 1.0884881019592285], rtol=1e-6)
    assert K.activations.get("mish") is K.activations.mish
    assert K.activations.serialize(K.activations.mish) == "mish"
    assert K.layers.Dense(2, activation="mish").get_config()["activation"] == "mish"


def test_experimental_schedule_aliases_and_model_from_yaml():
    assert K.experimental.CosineDecay is K.optimizers.schedules.CosineDecay
    assert K.experimental.CosineDecayRestarts is K.optimizers.schedules.CosineDecayRestarts
    with pytest.raises(RuntimeError, match=r"model_from_yaml\(\)` has been removed"):
        K.models.model_from_yaml("a: 1")
