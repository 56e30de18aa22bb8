"""tf.make_template: variables created on the first call and shared by later ones.
The names asserted (variables, ops, scopes) are TF 2.21's for the same program, run
under tensorflow.compat.v1 when these tests were written."""

import numpy as np
import pytest

import asyncflow as tf


def _scale(x, scalar_name):
    v = tf.get_variable(scalar_name, shape=[], initializer=tf.constant_initializer(1.5))
    return x * v


def _names(variables):
    return [v.name for v in variables]


def test_calls_share_the_first_calls_variables():
    with tf.Graph().as_default():
        scale_by_y = tf.make_template("scale_by_y", _scale, scalar_name="y")
        assert scale_by_y.variable_scope is None and scale_by_y.variable_scope_name is None
        z = scale_by_y(tf.constant(2.0))
        w = scale_by_y(tf.constant(3.0))
        assert _names(tf.global_variables()) == ["scale_by_y/y:0"]
        assert (z.name, w.name) == ("scale_by_y/mul:0", "scale_by_y_1/mul:0")
        assert scale_by_y.name == "scale_by_y"
        assert scale_by_y.variable_scope.name == "scale_by_y"
        assert scale_by_y.variable_scope_name == "scale_by_y/"
        assert _names(scale_by_y.variables) == ["scale_by_y/y:0"]
        assert _names(scale_by_y.trainable_variables) == ["scale_by_y/y:0"]
        assert scale_by_y.non_trainable_variables == []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(scale_by_y.variables[0], 4.0))
            np.testing.assert_allclose(sess.run([z, w]), [8.0, 12.0])


def test_scopes_as_tf_names_them():
    with tf.Graph().as_default():
        first = tf.make_template("scale_by_y", _scale, scalar_name="y")
        first(tf.constant(1.0))
        with tf.variable_scope("outer"):
            t = tf.make_template("t", _scale, scalar_name="s")
            a = t(tf.constant(1.0))
        b = t(tf.constant(1.0))  # the scope made under "outer", ops named here
        assert (a.name, b.name) == ("outer/t/mul:0", "t/mul:0")
        now = tf.make_template("t3", _scale, create_scope_now_=True, scalar_name="q")
        with tf.variable_scope("elsewhere"):
            c = now(tf.constant(1.0))
        assert c.name == "elsewhere/t3/mul:0"
        again = tf.make_template("scale_by_y", _scale, scalar_name="y")  # a second one
        d = again(tf.constant(1.0))
        named = tf.make_template("t5", _scale, unique_name_="custom", scalar_name="y")
        e = named(tf.constant(1.0))
        assert _names(tf.global_variables()) == [
            "scale_by_y/y:0",
            "outer/t/s:0",
            "t3/q:0",
            "scale_by_y_1/y:0",
            "custom/y:0",
        ]
        assert (d.name, e.name) == ("scale_by_y_1/mul:0", "custom/mul:0")


def test_new_variables_on_later_calls_are_errors_that_say_where_it_was_made():
    with tf.Graph().as_default():
        t = tf.make_template("t6", lambda i: tf.get_variable(f"nv{i}", shape=[]))
        t(0)
        with pytest.raises(ValueError, match="(?s)Variable t6/nv1 does not exist.*originally"):
            t(1)
        u = tf.make_template("t7", lambda: tf.Variable(1.0))
        u()
        with pytest.raises(ValueError, match="Trainable variable created when calling"):
            u()


def test_name_is_required():
    with pytest.raises(ValueError, match="name cannot be None"):
        tf.make_template(None, _scale)
