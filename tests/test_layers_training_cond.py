"""tf.layers.dropout with a `training` tensor builds TF's cond: the seeded random draw
runs on training steps only, so evaluation steps in between do not advance it.  The
masks below were recorded from TF 2.21 running the same program."""

import numpy as np

import asyncflow as tf


def test_dropout_mask_stream_skips_evaluation_steps_as_tf():
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        x = tf.ones([2, 6])
        training = tf.placeholder_with_default(False, [])
        y = tf.layers.dropout(x, 0.5, training=training, seed=2)
        assert y.name == "dropout/cond/Merge:0"
        want = [
            (True, [[0, 2, 0, 0, 0, 0], [2, 0, 2, 0, 0, 0]]),
            (False, [[1] * 6, [1] * 6]),
            (True, [[0, 0, 0, 0, 0, 2], [2, 0, 0, 2, 2, 0]]),
            (False, [[1] * 6, [1] * 6]),
            (True, [[0, 2, 2, 2, 2, 0], [2, 2, 0, 2, 0, 2]]),
        ]
        with tf.Session() as s:
            for t, mask in want:
                np.testing.assert_array_equal(s.run(y, {training: t}), mask)
