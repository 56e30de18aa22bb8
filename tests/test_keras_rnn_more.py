"""Keras recurrent layers beyond the basics: stateful=True with reset_states, dropout
and recurrent_dropout, unroll, go_backwards, and inputs with an unknown number of time
steps (run in a while_loop).

Expected values were recorded from TF 2.21 (TF_USE_LEGACY_KERAS=1, v2 behaviour
disabled): fixtures/keras_masking_tf.json (fixtures/keras_masking_cases.py's `stateful`
run; masked and unknown-length runs are in test_keras_masking.py) and the error texts
below.  Dropout masks are random (TF draws them from op seeds), so their checks are
statistical: the rate of dropped units, one mask per call shared by every step, and no
dropout in inference.
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_masking_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_masking_tf.json").read_text())
L = tf.keras.layers
K = tf.keras.backend


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        tf.set_random_seed(1)
        yield g
    K.clear_session()


def test_stateful_lstm_matches_tf():
    got = json.loads(json.dumps(cases.stateful(tf)))
    want = RECORDED["stateful"]
    assert got["n_weights"] == want["n_weights"] == 3  # the states are not weights
    for key in ("p1", "p2", "states", "p_reset", "p_given", "train", "evaluate", "states_after"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
    # the state carried over: a second prediction differs from the first
    assert not np.allclose(got["p1"], got["p2"])
    np.testing.assert_allclose(got["p_reset"], got["p1"], rtol=1e-6)


def test_stateful_errors_match_tf():
    with pytest.raises(ValueError, match="If a RNN is stateful, it needs to know its batch size"):
        L.SimpleRNN(2, stateful=True)(tf.keras.Input((3, 2)))
    with pytest.raises(AttributeError, match="Layer must be stateful."):
        L.SimpleRNN(2).reset_states()
    layer = L.LSTM(3, stateful=True)
    layer(tf.keras.Input(batch_shape=(2, 3, 2)))
    assert [s.shape.as_list() for s in layer.states] == [[2, 3], [2, 3]]
    with pytest.raises(ValueError, match="Layer lstm expects 2 states, but it received 1 state"):
        layer.reset_states([np.ones((2, 3), np.float32)])
    with pytest.raises(ValueError, match="State 0 is incompatible with layer lstm"):
        layer.reset_states([np.ones((2, 4), np.float32), np.ones((2, 3), np.float32)])


def test_unroll_needs_known_steps():
    with pytest.raises(ValueError, match="Cannot unroll a RNN if the time dimension is undefined"):
        L.SimpleRNN(2, unroll=True)(tf.keras.Input((None, 2)))


def test_unknown_steps_fit_and_predict_any_length():
    model = tf.keras.Sequential(
        [L.GRU(3, input_shape=(None, 2), recurrent_initializer="glorot_uniform"), L.Dense(1)]
    )
    model.compile("sgd", "mse")
    x = np.random.RandomState(0).rand(4, 5, 2).astype(np.float32)
    hist = model.fit(x, np.ones((4, 1), np.float32), epochs=2, verbose=0)
    assert hist.history["loss"][1] < hist.history["loss"][0]
    assert model.predict(x[:, :2]).shape == (4, 1)
    assert model.predict(x).shape == (4, 1)


def _dropout_rnn(**kwargs):
    # SimpleRNN with a linear activation, an identity kernel and no recurrence: each
    # output is the input scaled by the cell's dropout mask.
    layer = L.SimpleRNN(
        200, activation=None, use_bias=False, return_sequences=True,
        kernel_initializer="identity", recurrent_initializer="zeros", **kwargs,
    )  # fmt: skip
    x = tf.placeholder(tf.float32, [3, 4, 200])
    return layer, x, layer(x, training=True), layer(x, training=False)


def test_dropout_rate_one_mask_per_call_and_none_in_inference():
    _, x, train, infer = _dropout_rnn(dropout=0.4)
    ones = np.ones((3, 4, 200), np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([train, infer], {x: ones})
    np.testing.assert_array_equal(b, ones)
    kept = a != 0
    assert abs(1 - kept.mean() - 0.4) < 0.08  # 600 draws: 4 standard deviations
    np.testing.assert_allclose(a[kept], 1 / 0.6, rtol=1e-6)
    for t in range(1, 4):  # every step uses the same mask
        np.testing.assert_array_equal(a[:, t], a[:, 0])


def test_recurrent_dropout_scales_the_previous_state():
    layer = L.SimpleRNN(
        300, activation=None, use_bias=False, return_sequences=True,
        kernel_initializer="identity", recurrent_initializer="identity",
        recurrent_dropout=0.5,
    )  # fmt: skip
    x = tf.placeholder(tf.float32, [2, 2, 300])
    train, infer = layer(x, training=True), layer(x, training=False)
    feed = {x: np.stack([np.ones((2, 300)), np.zeros((2, 300))], 1).astype(np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([train, infer], feed)
    np.testing.assert_array_equal(b[:, 1], np.ones((2, 300)))
    step2 = a[:, 1]
    assert set(np.unique(step2).round(5)) <= {0.0, 2.0}
    assert abs((step2 == 0).mean() - 0.5) < 0.08  # 600 draws: 4 standard deviations


@pytest.mark.parametrize("cls", [L.LSTM, L.GRU])
def test_lstm_gru_dropout_train_with_learning_phase(cls):
    layer = cls(4, dropout=0.3, recurrent_dropout=0.3, recurrent_initializer="glorot_uniform")
    model = tf.keras.Sequential([tf.keras.Input((3, 2)), layer])
    model.compile("sgd", "mse")
    x = np.random.RandomState(1).rand(6, 3, 2).astype(np.float32)
    model.fit(x, np.zeros((6, 4), np.float32), epochs=1, verbose=0)
    # inference is deterministic
    np.testing.assert_array_equal(model.predict(x), model.predict(x))
    assert layer.cell.dropout == 0.3 and layer.cell.recurrent_dropout == 0.3


def test_go_backwards_without_mask_reverses_time():
    layer = L.SimpleRNN(2, go_backwards=True, return_sequences=True)
    fwd = L.SimpleRNN(2, return_sequences=True)
    x = tf.keras.Input((3, 1))
    out_b, out_f = layer(x), fwd(tf.reverse(x, [1]))
    fwd.set_weights(layer.get_weights())
    data = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    sess = K.get_session()
    b, f = sess.run([out_b, out_f], {x: data})
    np.testing.assert_allclose(b, f, rtol=1e-6)


def test_stacked_cells_dropout_per_cell():
    cells = [
        L.SimpleRNNCell(5, dropout=0.5, recurrent_initializer="zeros"),
        L.SimpleRNNCell(3, recurrent_dropout=0.5, recurrent_initializer="zeros"),
    ]
    layer = L.RNN(cells, return_state=True)
    x = tf.placeholder(tf.float32, [2, 3, 4])
    out = layer(x, training=False)
    assert [t.shape.as_list() for t in out] == [[2, 3], [2, 5], [2, 3]]
    train = layer(x, training=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        data = np.ones((2, 3, 4), np.float32)
        a, b = sess.run([out[0], out[0]], {x: data})
        sess.run(train, {x: data})
    np.testing.assert_array_equal(a, b)
    assert isinstance(layer.cell, L.StackedRNNCells)


def test_states_of_a_layer_that_is_not_stateful_and_forced_implementation():
    # recorded from TF 2.21: [None, None] and [None]; implementations 1, 1, 2
    assert L.LSTM(2).states == [None, None] and L.SimpleRNN(2).states == [None]
    assert L.LSTM(2, recurrent_dropout=0.1, implementation=2).cell.implementation == 1
    assert L.GRU(2, recurrent_dropout=0.1, implementation=2).cell.implementation == 1
    assert L.LSTM(2, dropout=0.1, implementation=2).cell.implementation == 2


def test_initial_state_from_keras_tensors_matches_tf():
    got = json.loads(json.dumps(cases.seq2seq(tf)))
    want = RECORDED["seq2seq"]
    assert (
        got["layers"]
        == want["layers"]
        == ["input_2", "input_1", "masking", "lstm", "lstm_1", "dense"]
    )
    assert got["n_trainable"] == want["n_trainable"] == 8
    np.testing.assert_allclose(got["history"], want["history"], rtol=1e-5)
    np.testing.assert_allclose(got["predict"], want["predict"], rtol=1e-5, atol=1e-6)


def test_time_major_matches_tf():
    got = json.loads(json.dumps(cases.time_major(tf)))
    want = RECORDED["time_major"]
    assert got["shapes"] == want["shapes"] == [[4, None, 3], [None, 2], [None, 2], [4, None, 4]]
    for a, b in zip(got["values"], want["values"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_gru_reset_after_matches_tf():
    got = json.loads(json.dumps(cases.gru_reset_after(tf)))
    want = RECORDED["gru_reset_after"]
    assert got["weight_shapes"] == want["weight_shapes"]
    assert want["weight_shapes"][2] == [2, 9]
    for a, b in zip(got["values"], want["values"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
