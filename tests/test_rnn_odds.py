"""tf.nn.raw_rnn, tf.nn.static_state_saving_rnn and the DeviceWrapper / ResidualWrapper
cells (asyncflow/rnn_extras.py, asyncflow/rnn_cell.py) against TF 2.21's recorded
results (tests/fixtures/rnn_odds.json, recorded by record_rnn_odds.py from
rnn_odds_cases.py): the same programs give TF's variables and, over two runs (the
state-saving RNN's second from the first's saved state), TF's values.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import rnn_odds_cases as cases  # noqa: E402

RECORDED = json.loads((HERE / "rnn_odds.json").read_text())


def test_programs_match_tf():
    with tf.Graph().as_default():
        out = cases.build(tf)
        assert sorted(v.op.name for v in tf.global_variables()) == RECORDED["variables"]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            cases.set_weights(tf, sess)
            runs = [sess.run(out), sess.run(out)]
    for got, want in zip(runs, RECORDED["runs"]):
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_allclose(
                np.asarray(got[k], np.float64),
                np.asarray(want[k]),
                rtol=2e-5,
                atol=2e-6,
                err_msg=k,
            )


def test_raw_rnn_and_state_saving_errors_as_tf():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(3)
        with pytest.raises(TypeError, match="loop_fn must be a callable"):
            tf.nn.raw_rnn(cell, None)
        with pytest.raises(ValueError, match="state_name should be the same type"):
            tf.nn.static_state_saving_rnn(cell, [tf.zeros([2, 3])], object(), ("a", "b"))


def test_device_wrapper_places_the_cell():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.DeviceWrapper(tf.nn.rnn_cell.BasicRNNCell(2), "/cpu:0")
        out, _ = cell(tf.zeros([1, 2]), cell.zero_state(1, tf.float32))
        assert "CPU:0" in out.device.upper()
