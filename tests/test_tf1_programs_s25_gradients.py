"""Gradients as a TF1 program asks for them, checked against TF 2.21 (tf.compat.v1;
values and names recorded from it): tf.hessians built as TF builds it (a while loop
per x, second derivatives through x[i] slices), the experimental aggregation methods'
scopes, unconnected zeros, custom_gradient over variables, the dense conversion of a
gathered gradient."""

import numpy as np
import pytest

import asyncflow as tf


def test_hessians_match_tf_values_and_names():
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.Variable([1.0, 2.0, 3.0], name="x")
        (h,) = tf.hessians(tf.reduce_sum(x**3) + x[0] * x[1], x)
        assert (h.name, h.shape.as_list()) == ("Reshape_1:0", [3, 3])
        # the next while loop is TF's "while_1": hessians built one named "while"
        _, out = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * x), [0, x])
        assert out.name == "while_1/Exit_1:0"
        sess.run(x.initializer)
        got = sess.run(h)
    np.testing.assert_allclose(got, [[6.0, 1.0, 0.0], [1.0, 12.0, 0.0], [0.0, 0.0, 18.0]])


def test_hessians_of_unknown_shape_and_second_derivative_through_slices():
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None])
        (h,) = tf.hessians(x[0] * x[1] * x[2], x)
        g1 = tf.gradients(x[0] * x[1], x)[0]
        g3 = tf.gradients(tf.reduce_sum(g1 * tf.constant([1.0, 2.0, 3.0])), x)[0]
        rh, r3 = sess.run([h, g3], {x: [1.0, 2.0, 3.0]})
    np.testing.assert_allclose(rh, [[0.0, 3.0, 2.0], [3.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    np.testing.assert_allclose(r3, [2.0, 1.0, 0.0])


@pytest.mark.parametrize(
    "method,name",
    [
        (tf.AggregationMethod.ADD_N, "gradients/AddN:0"),
        (tf.AggregationMethod.EXPERIMENTAL_TREE, "gradients/x/read_gradient_sum/AddN_2:0"),
        (
            tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N,
            "gradients/x/read_gradient_sum/AddN_2:0",
        ),
    ],
)
def test_aggregation_methods_name_their_sums_as_tf(method, name):
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.Variable([1.0, 2.0, 3.0], name="x")
        (g,) = tf.gradients(x * x + x * 3.0 + tf.exp(x), x, aggregation_method=method)
        assert g.name == name
        sess.run(x.initializer)
        np.testing.assert_allclose(sess.run(g), [7.71828, 14.38906, 29.08554], rtol=1e-5)


def test_unconnected_zero_built_outside_the_gradients_scope():
    with tf.Graph().as_default():
        x = tf.Variable([1.0, 2.0])
        u = tf.Variable(1.0, name="u")
        (g,) = tf.gradients(tf.reduce_sum(x), u, unconnected_gradients="zero")
        assert g.name == "zeros_like:0"


def test_custom_gradient_over_a_variable_it_reads():
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.Variable([1.0, 2.0, 3.0], name="x")
        w = tf.Variable([[0.5, -1.0], [2.0, 0.3], [1.0, 1.0]], name="w")

        @tf.custom_gradient
        def with_var(v):
            def grad(dy, variables=None):
                assert [var.name for var in variables] == ["w:0"]
                return dy * 2.0, [tf.ones_like(w) * tf.reduce_sum(dy)]

            return v * w[:, 0], grad

        gx, gw = tf.gradients(tf.reduce_sum(with_var(x)), [x, w])
        assert (gx.name, gw.name) == (
            "gradients/IdentityN_grad/mul:0",
            "gradients/IdentityN_grad/mul_1:0",
        )
        sess.run(tf.global_variables_initializer())
        rx, rw = sess.run([gx, gw])
    np.testing.assert_allclose(rx, [2.0, 2.0, 2.0])
    np.testing.assert_allclose(rw, np.full((3, 2), 3.0))


def test_custom_gradient_variable_errors_match_tf():
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        x = tf.constant([3.0, 4.0])

        @tf.custom_gradient
        def no_variables_arg(v):
            return v * w, lambda dy: dy

        with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
            no_variables_arg(x)

        @tf.custom_gradient
        def too_few(v):
            def grad(dy, variables=None):
                return dy, []

            return v * w, grad

        y = too_few(x)
        with pytest.raises(ValueError, match="Must return gradient for each variable"):
            tf.gradients(y, [x, w])
        # the unused outputs' zeros are TF's "zeros_like"
        names = [op.name for op in tf.get_default_graph().get_operations()]
        assert "gradients/zeros_like" in names


def test_gathered_gradient_densifies_with_tf_names():
    with tf.Graph().as_default(), tf.Session() as sess:
        w = tf.Variable(tf.ones([3, 2]))
        g = tf.gradients(tf.reduce_sum(tf.gather(w, [0, 0, 2])), w)[0]
        d = tf.convert_to_tensor(g)
        assert d.name == "UnsortedSegmentSum:0"
        sess.run(w.initializer)
        np.testing.assert_allclose(sess.run(d), [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]])
