"""Keras' Adam(amsgrad=True) in TF1 graph mode: the ApplyAdamWithAmsgrad update (Adam
whose denominator is the running maximum of v) and its third slot, vhat.

Expected values recorded from TF 2.21 (TF_USE_LEGACY_KERAS=1, v2 behaviour disabled).
"""

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras.backend


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.clear_session()


X = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.2]], np.float32)
Y = np.array([[1.0], [0.0], [2.0]], np.float32)


def test_amsgrad_six_steps_match_tf():
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(1, input_shape=(2,), kernel_initializer="ones")]
    )
    opt = tf.keras.optimizers.Adam(0.1, beta_2=0.9, amsgrad=True)
    model.compile(opt, "mse")
    losses = [float(model.train_on_batch(X[i : i + 1], Y[i : i + 1])) for i in (0, 1, 2) * 2]
    np.testing.assert_allclose(
        losses, [4.0, 2.890000104904175, 2.631848096847534, 1.462656855583191,
                 0.9656465649604797, 3.494499683380127], rtol=1e-6,
    )  # fmt: skip
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel, [[0.5602126121520996], [0.7590264678001404]], rtol=1e-6)
    np.testing.assert_allclose(bias, [-0.34679773449897766], rtol=1e-6)
    slots = K.batch_get_value(
        [opt.get_slot(model.layers[0].kernel, s) for s in ("m", "v", "vhat")]
    )
    np.testing.assert_allclose(slots[0], [[1.3267838954925537], [0.3422030806541443]], rtol=1e-6)
    np.testing.assert_allclose(slots[1], [[11.914758682250977], [6.867434501647949]], rtol=1e-6)
    np.testing.assert_allclose(slots[2], [[12.850342750549316], [7.980111122131348]], rtol=1e-6)
    names = sorted(v.name for v in opt.variables() if v.name.endswith(("/m:0", "/v:0", "hat:0")))
    assert names == [
        "training/Adam/dense/bias/m:0", "training/Adam/dense/bias/v:0",
        "training/Adam/dense/bias/vhat:0", "training/Adam/dense/kernel/m:0",
        "training/Adam/dense/kernel/v:0", "training/Adam/dense/kernel/vhat:0",
    ]  # fmt: skip
    assert opt.amsgrad is True


def test_amsgrad_fit_epochs_match_tf():
    tf.set_random_seed(1)
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(1, input_shape=(2,), kernel_initializer="ones")]
    )
    model.compile(tf.keras.optimizers.Adam(0.1, amsgrad=True), "mse")
    hist = model.fit(X, Y, epochs=4, batch_size=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(
        hist.history["loss"],
        [3.1743062337239585, 1.9583517511685689, 1.6012456566095352, 1.5170194033998996],
        rtol=1e-6,
    )
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel, [[0.3095464], [0.6433731]], rtol=1e-6)
    np.testing.assert_allclose(bias, [-0.3720136], rtol=1e-6)


def test_apply_adam_with_amsgrad_op_matches_numpy():
    from asyncflow.ops import training_ops

    var = tf.Variable([1.0, -2.0])
    m, v = tf.Variable([0.1, 0.2]), tf.Variable([0.5, 0.01])
    vhat = tf.Variable([0.3, 0.02])
    g = tf.constant([0.5, -1.0])
    up = training_ops.apply_adam_with_amsgrad(var, m, v, vhat, 0.9**2, 0.999**2, 0.01, 0.9,
                                              0.999, 1e-7, g)  # fmt: skip
    assert up.op.type == "ApplyAdamWithAmsgrad"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(up)
        got = sess.run([var, m, v, vhat])
    m_ = np.float32([0.1, 0.2]) + (np.float32([0.5, -1.0]) - [0.1, 0.2]) * 0.1
    v_ = np.float32([0.5, 0.01]) + (np.float32([0.25, 1.0]) - [0.5, 0.01]) * 0.001
    vh = np.maximum([0.3, 0.02], v_)
    alpha = 0.01 * np.sqrt(1 - 0.999**2) / (1 - 0.9**2)
    np.testing.assert_allclose(got[1], m_, rtol=1e-5)
    np.testing.assert_allclose(got[2], v_, rtol=1e-5)
    np.testing.assert_allclose(got[3], vh, rtol=1e-5)
    np.testing.assert_allclose(
        got[0], np.float32([1.0, -2.0]) - alpha * m_ / (np.sqrt(vh) + 1e-7), rtol=1e-5
    )
