"""Bidirectional RNNs against a NumPy BasicRNNCell run over the weights they created."""

import numpy as np
import pytest

import asyncflow as af


def np_rnn(x, lengths, kernel, bias, reverse):
    """x [batch, time, depth]; outputs [batch, time, units] zero past each length."""
    batch, time, _ = x.shape
    units = bias.shape[0]
    out = np.zeros((batch, time, units))
    final = np.zeros((batch, units))
    for b in range(batch):
        h = np.zeros(units)
        steps = range(lengths[b])
        for t in reversed(steps) if reverse else steps:
            h = np.tanh(np.concatenate([x[b, t], h]) @ kernel + bias)
            out[b, t] = h
        final[b] = h
    return out, final


def _vars(sess, direction):
    vs = {v.name: v for v in af.trainable_variables()}
    k = vs[f"bidirectional_rnn/{direction}/basic_rnn_cell/kernel:0"]
    b = vs[f"bidirectional_rnn/{direction}/basic_rnn_cell/bias:0"]
    return sess.run([k, b])


@pytest.mark.parametrize("with_lengths", [True, False])
def test_bidirectional_dynamic_rnn(sess, with_lengths):
    rng = np.random.RandomState(0)
    x = rng.randn(3, 5, 2)
    lengths = np.array([5, 2, 4]) if with_lengths else np.array([5, 5, 5])
    fw, bw = af.nn.rnn_cell.BasicRNNCell(4), af.nn.rnn_cell.BasicRNNCell(4)
    (out_fw, out_bw), (st_fw, st_bw) = af.nn.bidirectional_dynamic_rnn(
        fw, bw, af.constant(x), sequence_length=lengths if with_lengths else None, dtype=af.float64
    )
    sess.run(af.global_variables_initializer())
    got = sess.run([out_fw, out_bw, st_fw, st_bw])
    want_fw = np_rnn(x, lengths, *_vars(sess, "fw"), reverse=False)
    want_bw = np_rnn(x, lengths, *_vars(sess, "bw"), reverse=True)
    np.testing.assert_allclose(got[0], want_fw[0], atol=1e-10)
    np.testing.assert_allclose(got[1], want_bw[0], atol=1e-10)
    np.testing.assert_allclose(got[2], want_fw[1], atol=1e-10)
    np.testing.assert_allclose(got[3], want_bw[1], atol=1e-10)


def test_static_bidirectional_rnn(sess):
    rng = np.random.RandomState(1)
    x = rng.randn(2, 3, 2)
    lengths = np.array([3, 1])
    inputs = [af.constant(x[:, t]) for t in range(3)]
    fw, bw = af.nn.rnn_cell.BasicRNNCell(3), af.nn.rnn_cell.BasicRNNCell(3)
    outs, st_fw, st_bw = af.nn.static_bidirectional_rnn(
        fw, bw, inputs, dtype=af.float64, sequence_length=lengths
    )
    assert len(outs) == 3 and outs[0].shape.as_list() == [2, 6]
    sess.run(af.global_variables_initializer())
    got = sess.run(outs + [st_fw, st_bw])
    want_fw = np_rnn(x, lengths, *_vars(sess, "fw"), reverse=False)
    want_bw = np_rnn(x, lengths, *_vars(sess, "bw"), reverse=True)
    for t in range(3):
        np.testing.assert_allclose(
            got[t], np.concatenate([want_fw[0][:, t], want_bw[0][:, t]], 1), atol=1e-10
        )
    np.testing.assert_allclose(got[3], want_fw[1], atol=1e-10)
    np.testing.assert_allclose(got[4], want_bw[1], atol=1e-10)


def test_bidirectional_gradients_reach_both_directions(sess):
    x = af.constant(np.random.RandomState(2).randn(2, 4, 3).astype(np.float32))
    (a, b), _ = af.nn.bidirectional_dynamic_rnn(
        af.nn.rnn_cell.BasicRNNCell(2),
        af.nn.rnn_cell.BasicRNNCell(2),
        x,
        sequence_length=[4, 2],
        dtype=af.float32,
    )
    loss = af.reduce_sum(a) + af.reduce_sum(b)
    grads = af.gradients(loss, af.trainable_variables())
    sess.run(af.global_variables_initializer())
    assert len(grads) == 4 and all(np.abs(g).sum() > 0 for g in sess.run(grads))
