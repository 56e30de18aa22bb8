"""TF1's gradient overrides: `Graph.gradient_override_map` with `tf.RegisterGradient`
under a name of one's own (or another op type's gradient), `tf.custom_gradient` and
`tf.grad_pass_through` in graph mode.  Expected values are TF 2.21's for the same
programs (run under tensorflow.compat.v1 when these tests were written)."""

import numpy as np
import pytest

import asyncflow as tf


@tf.RegisterGradient("AsyncflowTestTimesTen")
def _times_ten(op, grad):
    return grad * 10.0


def _run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


def test_override_map_takes_the_named_gradient_and_records_it():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0, 3.0])
        with g.gradient_override_map({"Square": "AsyncflowTestTimesTen"}):
            y = tf.square(x, name="sq")
        z = tf.square(x, name="sq2")  # outside the block: its own gradient
        assert y.op.get_attr("_gradient_op_type") == b"AsyncflowTestTimesTen"
        assert y.op.node_def.attr["_gradient_op_type"].s == b"AsyncflowTestTimesTen"
        assert "_gradient_op_type" not in z.op.node_def.attr
        gy, gz = _run([tf.gradients(y, x)[0], tf.gradients(z, x)[0]])
    np.testing.assert_array_equal(gy, [10.0, 10.0, 10.0])
    np.testing.assert_array_equal(gz, [2.0, 4.0, 6.0])


def test_nested_maps_restore_the_outer_mapping():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        with g.gradient_override_map({"Square": "AsyncflowTestTimesTen"}):
            with g.gradient_override_map({"Square": "Identity"}):
                inner = tf.square(x)
            outer = tf.square(x)
        after = tf.square(x)
        got = _run([tf.gradients(t, x)[0] for t in (inner, outer, after)])
    assert got == [1.0, 10.0, 4.0]


def test_another_op_types_gradient_gives_a_straight_through_estimator():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([0.2, 1.7])
        with g.gradient_override_map({"Floor": "Identity"}):
            y = tf.floor(x * 1.5)
        np.testing.assert_allclose(_run(tf.gradients(y, x)[0]), [1.5, 1.5])


def test_unknown_names_and_bad_maps_fail_as_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        with g.gradient_override_map({"Square": "NoSuchGradientAnywhere"}):
            y = tf.square(x)
        with pytest.raises(LookupError, match="No gradient defined for operation"):
            tf.gradients(y, x)
        with pytest.raises(TypeError, match="mapping strings to strings"):
            with g.gradient_override_map({"Square": 3}):
                pass
        with pytest.raises(TypeError, match="mapping strings to strings"):
            with g.gradient_override_map([("Square", "Identity")]):
                pass
    with pytest.raises(KeyError, match="Registering two gradient"):
        tf.RegisterGradient("AsyncflowTestTimesTen")(lambda op, grad: grad)


def test_the_override_survives_a_graph_def_round_trip():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        with g.gradient_override_map({"Square": "AsyncflowTestTimesTen"}):
            tf.square(x, name="sq")
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(g.as_graph_def(), name="")
        x, y = g2.get_tensor_by_name("x:0"), g2.get_tensor_by_name("sq:0")
        with tf.Session() as sess:
            got = sess.run(tf.gradients(y, x)[0], {x: [1.0, 2.0]})
    np.testing.assert_array_equal(got, [10.0, 10.0])


def test_custom_gradient_one_input():
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0, 3.0])

        @tf.custom_gradient
        def clip_gradient(v):
            def grad(dy):
                return tf.clip_by_value(dy, -0.1, 0.1)

            return tf.identity(v) * 2.0, grad

        y = clip_gradient(x)
        assert y.shape.as_list() == [3]
        value, grad = _run([y, tf.gradients(tf.reduce_sum(y * 5.0), x)[0]])
    np.testing.assert_array_equal(value, [2.0, 4.0, 6.0])
    np.testing.assert_allclose(grad, [0.1, 0.1, 0.1])


def test_custom_gradient_several_inputs_and_results():
    with tf.Graph().as_default():
        a, b = tf.constant([1.0, 2.0, 3.0]), tf.constant([4.0, 5.0, 6.0])

        @tf.custom_gradient
        def two(a, b):
            def grad(dp, dq):
                return dp + dq, dp - dq

            return (a * b, a + b), grad

        p, q = two(a, b)
        ga, gb = _run(tf.gradients([p, 3.0 * q], [a, b]))
    np.testing.assert_array_equal(ga, [4.0, 4.0, 4.0])  # dp = 1, dq = 3
    np.testing.assert_array_equal(gb, [-2.0, -2.0, -2.0])


def test_custom_gradient_errors():
    with tf.Graph().as_default():
        x = tf.constant(1.0)

        @tf.custom_gradient
        def bad(v):
            return v * 2.0, lambda dy: (dy, dy)

        with pytest.raises(ValueError, match="Num gradients 3 generated for op"):
            tf.gradients(bad(x), x)
        with pytest.raises(ValueError, match="keywords arguments only"):
            bad(v=x)


def test_grad_pass_through():
    with tf.Graph().as_default():
        x = tf.constant([0.4, 1.6])
        y = tf.grad_pass_through(tf.round)(x * 0.7)
        value, grad = _run([y, tf.gradients(y, x)[0]])
    np.testing.assert_array_equal(value, [0.0, 1.0])
    np.testing.assert_allclose(grad, [0.7, 0.7])
