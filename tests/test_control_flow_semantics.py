"""TF1's control-flow and autodiff edge cases (issue 18, items 1-6).

Each test states what TF 2.21 does in `tf.compat.v1` graph mode with v1 control flow
(`tf.disable_v2_behavior()`: Switch/Merge conds and loops, reference variables), as
recorded with /work/tfvenv; the values are small enough to write down here.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf

# -- item 1: assigns inside a cond branch ----------------------------------------------------


def test_assign_in_cond_branches_updates_the_variable():
    # TF: (5.0, 5.0) with pred True, then (6.0, 6.0) with pred False.
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        p = tf.placeholder(tf.bool, [])
        r = tf.cond(p, lambda: tf.assign(v, 5.0), lambda: tf.assign_add(v, 1.0))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r, {p: True}) == 5.0
            assert sess.run(v) == 5.0
            assert sess.run(r, {p: False}) == 6.0
            assert sess.run(v) == 6.0


def test_assign_as_control_dependency_and_scatter_update_in_cond():
    # TF: [3, 4] (the branch reads after its assign), then [9, 4] from scatter_update.
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        p = tf.placeholder(tf.bool, [])

        def assign_then_read():
            with tf.control_dependencies([tf.assign(v, [3.0, 4.0])]):
                return tf.identity(v)

        r = tf.cond(p, assign_then_read, lambda: tf.identity(v))
        r2 = tf.cond(p, lambda: tf.scatter_update(v, [0], [9.0]), lambda: tf.identity(v))
        with tf.Session() as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(r, {p: True}), [3.0, 4.0])
            np.testing.assert_array_equal(sess.run(r2, {p: True}), [9.0, 4.0])
            np.testing.assert_array_equal(sess.run(r2, {p: False}), [9.0, 4.0])


def test_untaken_assign_branch_leaves_the_variable_alone():
    # TF: the false branch runs; the true branch's assign never does: v stays 1.
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        p = tf.placeholder(tf.bool, [])
        r = tf.cond(p, lambda: tf.assign(v, 5.0), lambda: tf.constant(0.0))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r, {p: False}) == 0.0
            assert sess.run(v) == 1.0


# -- item 2: a loop condition reading a variable its body updates ----------------------------


def test_while_condition_sees_the_bodys_assign_add():
    # TF: the loop ends after 5 iterations: (5, 5).
    with tf.Graph().as_default():
        v = tf.Variable(0)

        def body(i):
            with tf.control_dependencies([tf.assign_add(v, 1)]):
                return i + 1

        r = tf.while_loop(lambda i: tf.less(v, 5), body, [tf.constant(0)])
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r) == 5
            assert sess.run(v) == 5


def test_while_body_reads_the_variable_each_iteration():
    # TF, one iteration at a time: acc sums v after each increment: 1 + 2 + 3 = 6, v
    # ends at 3.  (With parallel iterations TF's reads race the next increments.)
    with tf.Graph().as_default():
        v = tf.Variable(0)

        def body(i, acc):
            with tf.control_dependencies([tf.assign_add(v, 1)]):
                i = i + 1
            with tf.control_dependencies([i]):
                return i, acc + v

        _, acc = tf.while_loop(
            lambda i, acc: i < 3, body, [tf.constant(0), tf.constant(0)], parallel_iterations=1
        )
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(acc) == 6
            assert sess.run(v) == 3


def test_loop_reading_a_variable_still_differentiates_to_it():
    # TF: d/dw of w**3, a loop of three multiplications by the variable w: 6.75.
    with tf.Graph().as_default():
        w = tf.Variable(np.float64(1.5))
        _, y = tf.while_loop(
            lambda i, y: i < 3, lambda i, y: (i + 1, y * w), [0, tf.constant(1.0, tf.float64)]
        )
        (g,) = tf.gradients(y, [w])
        with tf.Session() as sess:
            sess.run(w.initializer)
            np.testing.assert_allclose(sess.run(g), 3 * 1.5**2)


# -- item 3: the gradient of a reduction of a scalar -----------------------------------------


@pytest.mark.parametrize(
    "reduce", ["reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min"]
)
def test_gradient_of_reducing_a_scalar(reduce):
    # TF: 1.0 for each; here also against the finite difference of reduce(x * x).
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [])
        (g1,) = tf.gradients(getattr(tf, reduce)(x), x)
        y = getattr(tf, reduce)(x * x)
        (g2,) = tf.gradients(y, x)
        with tf.Session() as sess:
            assert sess.run(g1, {x: 3.0}) == 1.0
            eps = 1e-6
            fd = (sess.run(y, {x: 3.0 + eps}) - sess.run(y, {x: 3.0 - eps})) / (2 * eps)
            np.testing.assert_allclose(sess.run(g2, {x: 3.0}), fd, rtol=1e-6)
