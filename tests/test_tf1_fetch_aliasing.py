"""Fetching a ref variable in the step that updates it, as TF1 does: TF's Identity
forwards the variable's buffer, so `v`, `v.value()`, `v.read_value()` and
`tf.identity(v)` fetched beside an update show the variable as the step left it.
Every expected value was recorded from TF 2.21 (`tf.compat.v1`, ref variables)."""

import numpy as np
import pytest

import asyncflow as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    # On the CPU: a ref variable on a GPU is read when its value is sent to the host, so
    # a fetch beside an update cannot alias its buffer there (by design).
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        yield


def test_global_step_and_weights_fetched_beside_the_train_op():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable([1.0, 2.0], name="w")
    loss = tf.reduce_sum(w * w)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    want = [
        (1, [0.8, 1.6], 5.0),
        (2, [0.64, 1.28], 3.2000003),
        (3, [0.51199996, 1.0239999], 2.0479999),
    ]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for step, weights, value in want:
            _, got_step, got_w, got_loss = s.run([train, gs, w, loss])
            assert got_step == step
            np.testing.assert_allclose(got_w, weights, rtol=1e-7)
            np.testing.assert_allclose(got_loss, value, rtol=1e-7)  # computed before


def test_every_identity_of_the_variable_aliases_it():
    v2 = tf.Variable(3.0, name="v2")
    inc2 = tf.assign_add(v2, 1.0)
    r = tf.identity(v2)
    rr = tf.identity(tf.identity(v2.value()))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run([inc2, v2, v2.value(), r, v2.read_value(), rr]) == [4.0] * 6
        assert s.run([v2, inc2]) == [5.0, 5.0]
        with tf.control_dependencies([tf.assign_add(v2, 1.0)]):
            x = tf.identity(v2)
        assert s.run([x, v2]) == [6.0, 6.0]


def test_assign_scatter_and_computed_reads():
    v = tf.Variable(3.0, name="v")
    a1 = tf.assign(v, v * 2)
    ph = tf.placeholder(tf.float32, [])
    a3 = tf.assign(v, ph)
    u = tf.Variable([1.0, 2.0], name="u")
    sc = tf.scatter_update(u, [0], [9.0])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run([a1, v, v.value()]) == [6.0, 6.0, 6.0]
        assert s.run([a3, v, v.value()], {ph: 11.0}) == [11.0, 11.0, 11.0]
        got = s.run([sc, u])
        np.testing.assert_array_equal(got[0], [9.0, 2.0])
        np.testing.assert_array_equal(got[1], [9.0, 2.0])


def test_resource_variable_reads_stay_snapshots():
    # TF 2.21: a resource variable's read is a copy; fetched beside an update it shows
    # the value it read (here, before the add).
    rv = tf.Variable(5.0, use_resource=True, name="rv")
    inc = tf.assign_add(rv, 1.0)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run([inc, rv]) == [6.0, 5.0]


def test_fetched_values_are_the_callers_own():
    w = tf.Variable([1.0, 2.0], name="w")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(w)
        _, second = s.run([train, w])
        s.run(train)
        np.testing.assert_array_equal(first, [1.0, 2.0])
        np.testing.assert_allclose(second, [0.8, 1.6], rtol=1e-7)
        second[0] = 100.0
        np.testing.assert_allclose(s.run(w), [0.64, 1.28], rtol=1e-7)


def test_monitored_session_steps_as_tf():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(w * w, global_step=gs)
    seen = []
    hooks = [tf.train.StopAtStepHook(last_step=3)]
    with tf.train.MonitoredTrainingSession(hooks=hooks) as s:
        while not s.should_stop():
            seen.append(s.run([train, gs])[1])
    assert seen == [1, 2, 3]  # TF 2.21's
