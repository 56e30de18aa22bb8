"""tf.raw_ops.Snapshot as TF 2.21's: a copy of its input (its own buffer), its static
shape, and no gradient (TF's LookupError)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)


def test_snapshot_copies_its_input():
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        y = tf.raw_ops.Snapshot(input=x)
        assert y.op.type == "Snapshot" and y.op.name == "Snapshot"
        assert y.shape.as_list() == [2]
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(y), [1.0, 2.0])


def test_snapshot_of_a_variable_keeps_the_value_before_an_update():
    with tf.Graph().as_default():
        v = tf.Variable([1, 2], use_resource=True)
        snap = tf.raw_ops.Snapshot(input=v.read_value())
        with tf.control_dependencies([snap]):
            update = v.assign_add([10, 10])
        with tf.Session() as sess:
            sess.run(v.initializer)
            got, _ = sess.run([snap, update])
            assert got.tolist() == [1, 2]
            assert sess.run(v).tolist() == [11, 12]


def test_snapshot_has_no_gradient_as_in_tf():
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        with pytest.raises(LookupError):
            tf.gradients(tf.raw_ops.Snapshot(input=x) * 3.0, x)
