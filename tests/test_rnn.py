"""RNN cells, dynamic_rnn and static_rnn against TF 2.21 fixtures (same weights).

The fixtures (tests/fixtures/control_flow_tf.json) are recorded by
tests/fixtures/record_control_flow_tf.py with TF's own TF1 cells.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import asyncflow as af
from asyncflow import nest, rnn, rnn_cell
from asyncflow.gradients import gradients

with open(os.path.join(os.path.dirname(__file__), "fixtures", "control_flow_tf.json")) as f:
    FX = json.load(f)

CELLS = {
    "basic_lstm": lambda: rnn_cell.BasicLSTMCell(5),
    "basic_lstm_seq": lambda: rnn_cell.BasicLSTMCell(5),
    "lstm_peep_proj": lambda: rnn_cell.LSTMCell(5, use_peepholes=True, num_proj=3, cell_clip=1.0),
    "gru": lambda: rnn_cell.GRUCell(4),
    "basic_rnn": lambda: rnn_cell.BasicRNNCell(4),
    "multi": lambda: rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(3), rnn_cell.GRUCell(4)]),
}


@pytest.mark.parametrize("case", sorted(CELLS))
def test_dynamic_rnn_matches_tf(case):
    fx = FX["rnn"][case]
    with af.Graph().as_default():
        x = af.constant(np.array(fx["x"]))
        out, st = rnn.dynamic_rnn(
            CELLS[case](), x, dtype=af.float64, sequence_length=fx["seq_len"]
        )
        vs = af.trainable_variables()
        assert [v.op.name for v in vs] == fx["names"]
        flat_st = nest.flatten(st)
        loss = af.reduce_sum(out * out) + af.add_n([af.reduce_sum(s) for s in flat_st])
        grads = gradients(loss, vs + [x])
        with af.Session() as sess:
            for v in vs:
                sess.run(v.initializer)
                v.load(np.array(fx["weights"][v.op.name]), sess)
            o, s, gr = sess.run([out, flat_st, grads])
    np.testing.assert_allclose(o, fx["outputs"], rtol=1e-9, atol=1e-12)
    for a, b in zip(s, fx["states"]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    for a, b in zip(gr, fx["grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_static_rnn_equals_dynamic_rnn():
    x = np.random.RandomState(3).randn(2, 3, 4)
    with af.Graph().as_default():
        cell = rnn_cell.BasicLSTMCell(3)
        xs = af.constant(x)
        dyn, dyn_st = rnn.dynamic_rnn(cell, xs, dtype=af.float64, sequence_length=[3, 2])
        with af.variable_scope("", reuse=True):
            pass
        stat, stat_st = rnn.static_rnn(
            cell,
            [xs[:, t] for t in range(3)],
            dtype=af.float64,
            sequence_length=[3, 2],
            scope="rnn",
        )
        assert len(af.trainable_variables()) == 2  # the same cell: one set of variables
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            d, ds, s, ss = sess.run([dyn, dyn_st, stat, stat_st])
    np.testing.assert_allclose(np.stack(s, 1), d, rtol=1e-12)
    np.testing.assert_allclose(ss.h, ds.h, rtol=1e-12)


def test_time_major_and_initial_state():
    x = np.random.RandomState(4).randn(3, 2, 2)  # [time, batch, depth]
    with af.Graph().as_default():
        cell = rnn_cell.GRUCell(2)
        h0 = af.constant(np.ones((2, 2)))
        out, st = rnn.dynamic_rnn(cell, af.constant(x), initial_state=h0, time_major=True)
        assert out.shape.as_list() == [3, 2, 2]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            o, s = sess.run([out, st])
    np.testing.assert_allclose(o[-1], s)


def test_dropout_wrapper_keep_one_is_identity_and_errors():
    with af.Graph().as_default():
        cell = rnn_cell.DropoutWrapper(rnn_cell.BasicRNNCell(2), output_keep_prob=1.0)
        out, _ = rnn.dynamic_rnn(cell, af.ones([1, 2, 2], af.float64), dtype=af.float64)
        cell2 = rnn_cell.DropoutWrapper(rnn_cell.BasicRNNCell(2), output_keep_prob=0.5, seed=1)
        out2, _ = rnn.dynamic_rnn(
            cell2, af.ones([1, 2, 2], af.float64), dtype=af.float64, scope="r2"
        )
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            o, o2 = sess.run([out, out2])
        assert o.shape == o2.shape == (1, 2, 2)
    with pytest.raises(ValueError):
        rnn_cell.DropoutWrapper(rnn_cell.BasicRNNCell(2), input_keep_prob=1.5)


def test_build_errors():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="dtype"):
            rnn.dynamic_rnn(rnn_cell.BasicRNNCell(2), af.ones([1, 2, 2]))
        with pytest.raises(ValueError, match="sequence_length"):
            rnn.dynamic_rnn(
                rnn_cell.BasicRNNCell(2),
                af.ones([1, 2, 2]),
                dtype=af.float32,
                sequence_length=[[1]],
            )
        with pytest.raises(ValueError):
            rnn_cell.MultiRNNCell([])
