"""Loss scaling (asyncflow/mixed_precision.py) against TF 2.21's
`tf.compat.v1.train.experimental`: every expected value below was recorded from TF 2.21
running the same program."""

import numpy as np
import pytest

import asyncflow as tf

_X = tf.train.experimental


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def _gd(rate=0.01):
    return tf.train.GradientDescentOptimizer(rate)


def test_dynamic_scale_trains_and_adapts_as_tf():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    w = tf.Variable([[0.5], [-0.25]], name="w")
    loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
    ls = tf.train.experimental.DynamicLossScale(4.0, increment_period=2, multiplier=2.0)
    opt = tf.train.experimental.MixedPrecisionLossScaleOptimizer(_gd(), ls)
    train = opt.minimize(loss)
    assert (train.name, train.type) == ("GradientDescent", "NoOp")
    assert sorted(v.name for v in tf.global_variables()) == [
        "current_loss_scale:0",
        "good_steps:0",
        "w:0",
    ]
    assert [v.name for v in tf.trainable_variables()] == ["w:0"]
    assert opt.get_name() == "GradientDescent"
    assert ls().op.type == "ReadVariableOp"
    # TF 2.21: (loss, scale) per step, then w.
    expected = [
        (0.6875, 4.0, [0.43, -0.335]),
        (0.13527499, 4.0, [0.4322, -0.32410002]),
        (0.12841211, 8.0, [0.427852, -0.321974]),
        (0.12612522, 8.0, [0.42413768, -0.31907526]),
        (0.12391549, 16.0, [0.42040175, -0.31627417]),
    ]
    scale = ls()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for want_loss, want_scale, want_w in expected:
            _, got_loss, got_scale = s.run([train, loss, scale])
            np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
            assert got_scale == want_scale
            np.testing.assert_allclose(s.run(w).ravel(), want_w, rtol=1e-6)
        # A non-finite gradient: no update, the scale halves.
        s.run(tf.assign(w, [[np.inf], [0.0]]))
        s.run(train)
        assert s.run(scale) == 8.0
        np.testing.assert_array_equal(s.run(w).ravel(), [np.inf, 0.0])
        s.run(train)
        assert s.run(scale) == 4.0


@pytest.mark.parametrize(
    "init, period, mult, want",
    [
        # TF 2.21, per update: (raised?, finite?, scale, good_steps).
        (
            3e38,
            2,
            2.0,
            [(0, 1, 3e38, 1), (1, 1, 3e38, 0), (0, 1, 3e38, 1), (0, 0, 1.5e38, 0),
             (0, 1, 1.5e38, 1), (1, 1, 3e38, 0), (0, 1, 3e38, 1), (0, 0, 1.5e38, 0)],
        ),
        (
            4.0,
            3,
            2.0,
            [(0, 1, 4, 1), (0, 1, 4, 2), (1, 1, 8, 0), (0, 0, 4, 0),
             (0, 1, 4, 1), (0, 1, 4, 2), (1, 1, 8, 0), (0, 0, 4, 0)],
        ),
        (
            1.0,
            2,
            0.5,
            [(0, 1, 1, 1), (1, 1, 0.5, 0), (0, 1, 0.5, 1), (0, 0, 1, 0),
             (0, 1, 1, 1), (1, 1, 0.5, 0), (0, 1, 0.5, 1), (0, 0, 1, 0)],
        ),
    ],
)  # fmt: skip
def test_dynamic_update_sequence_as_tf(init, period, mult, want):
    g = tf.placeholder(tf.float32, [2])
    h = tf.placeholder(tf.float64, [])
    ls = tf.train.experimental.DynamicLossScale(init, period, mult)
    update, finite = ls.update([g, None, h])
    assert finite.dtype == tf.bool and update.dtype == tf.bool
    good = ls._num_good_steps
    feeds = [[1, 1], [1, 1], [1, 1], [np.nan, 1], [1, 1], [1, 1], [1, 1], [-np.inf, 0]]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for val, (raised, ok, scale, steps) in zip(feeds, want):
            got = s.run([update, finite], {g: val, h: 1.0})
            assert got == [bool(raised), bool(ok)]
            got_scale, got_steps = s.run([ls(), good])
            np.testing.assert_allclose(got_scale, scale, rtol=1e-7)
            assert got_steps == steps


def test_scale_never_below_one():
    g = tf.placeholder(tf.float32, [2])
    ls = tf.train.experimental.DynamicLossScale(1.0, increment_period=1, multiplier=3.0)
    update, finite = ls.update([g])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = []
        for val in [[np.nan, 1], [1, 1], [1, 1], [np.inf, 1], [1, 1]]:
            ok = s.run(finite, {g: val})
            s.run(update, {g: val})
            got.append((bool(ok), float(s.run(ls()))))
    assert got == [(False, 1.0), (True, 3.0), (True, 9.0), (False, 3.0), (True, 9.0)]


def test_fixed_scale_is_the_wrapped_optimizers_op():
    w = tf.Variable(3.0, name="w3")
    gs = tf.train.get_or_create_global_step()
    opt = tf.train.experimental.MixedPrecisionLossScaleOptimizer(_gd(0.1), 8)
    assert type(opt._loss_scale).__name__ == "FixedLossScale"
    train = opt.minimize(w * w, global_step=gs)
    # TF 2.21: the wrapped optimizer's own op (its global-step AssignAdd), no control inputs.
    assert (train.name, train.type) == ("GradientDescent", "AssignAdd")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        assert s.run([w, gs]) == [pytest.approx(2.4), 1]


def test_dynamic_names_wrapped_update():
    w = tf.Variable(3.0, name="w3")
    gs = tf.train.get_or_create_global_step()
    opt = tf.train.experimental.MixedPrecisionLossScaleOptimizer(_gd(0.1), "dynamic")
    train = opt.minimize(w * w, global_step=gs)
    assert train.name == "GradientDescent"
    assert sorted(i.name for i in train.control_inputs) == ["cond/Merge", "cond_1/Merge"]
    names = {o.name for o in tf.get_default_graph().get_operations()}
    assert "cond_1/GradientDescent-wrapped/update_w3/ApplyGradientDescent" in names
    assert "cond_1/GradientDescent-wrapped" in names


def test_adam_variables_and_slots_as_tf():
    w = tf.Variable([1.0, 2.0], name="w")
    opt = tf.train.experimental.MixedPrecisionLossScaleOptimizer(
        tf.train.AdamOptimizer(0.1), "dynamic"
    )
    train = opt.minimize(tf.reduce_sum(w * w), global_step=tf.train.get_or_create_global_step())
    assert (train.name, train.type) == ("Adam", "NoOp")
    assert [v.name for v in opt.variables()] == [
        "cond_1/beta1_power:0",
        "cond_1/beta2_power:0",
        "current_loss_scale:0",
        "good_steps:0",
        "w/Adam:0",
        "w/Adam_1:0",
    ]
    # TF's wrapper keeps no slots of its own.
    assert opt.get_slot_names() == [] and opt.get_slot(w, "m") is None
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        np.testing.assert_allclose(s.run(w), [0.90000004, 1.9], rtol=1e-7)
        assert s.run(tf.train.get_global_step()) == 1
        assert s.run(opt._loss_scale()) == 32768.0


def test_sparse_and_missing_gradients():
    emb = tf.Variable(np.ones((4, 2), np.float32), name="emb")
    unused = tf.Variable(1.0, name="unused")
    loss = tf.reduce_sum(tf.gather(emb, [0, 2]))
    opt = tf.train.experimental.MixedPrecisionLossScaleOptimizer(_gd(1.0), 4)
    gv = opt.compute_gradients(loss, var_list=[emb, unused])
    assert [type(g).__name__ for g, _ in gv] == ["IndexedSlices", "NoneType"]
    train = opt.apply_gradients(gv)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        np.testing.assert_array_equal(s.run(emb).ravel(), [0, 0, 1, 1, 0, 0, 1, 1])


def test_loss_scale_objects_as_tf():
    fixed = tf.train.experimental.FixedLossScale(128)
    assert repr(fixed) == "FixedLossScale(128.0)"
    assert fixed.get_config() == {"loss_scale_value": 128.0}
    update, should = fixed.update([tf.constant([np.nan])])
    assert update.type == "NoOp" and should is True
    dynamic = tf.train.experimental.DynamicLossScale()
    assert (dynamic.initial_loss_scale, dynamic.increment_period, dynamic.multiplier) == (
        32768.0,
        2000,
        2.0,
    )
    assert repr(dynamic) == (
        "DynamicLossScale(initial_loss_scale=32768.0, increment_period=2000, multiplier=2.0)"
    )
    config = {"initial_loss_scale": 8.0, "increment_period": 3, "multiplier": 2.0}
    assert tf.train.experimental.DynamicLossScale.from_config(config).get_config() == config
    assert [(v.op.type, v.op.name) for v in tf.global_variables()] == [
        ("VarHandleOp", "current_loss_scale"),
        ("VarHandleOp", "good_steps"),
        ("VarHandleOp", "current_loss_scale_1"),
        ("VarHandleOp", "good_steps_1"),
    ]
    with tf.Session() as s:
        assert s.run(fixed()) == 128.0
    assert tf.mixed_precision.experimental.LossScale is tf.train.experimental.LossScale
    assert (
        tf.mixed_precision.MixedPrecisionLossScaleOptimizer
        is tf.train.experimental.MixedPrecisionLossScaleOptimizer
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: _X.FixedLossScale("x"), "loss_scale_value must be a Python int or float."),
        (lambda: _X.FixedLossScale(0.5), "loss_scale_value must be at least 1."),
        (
            lambda: _X.MixedPrecisionLossScaleOptimizer(_gd(), "foo"),
            "Could not interpret loss scale identifier: foo",
        ),
        (
            lambda: _X.MixedPrecisionLossScaleOptimizer(_gd(), -1),
            "loss_scale_value must be at least 1.",
        ),
        (
            lambda: _X.MixedPrecisionLossScaleOptimizer(object(), "dynamic"),
            "\"opt\" must be an instance of Optimizer, but got: <class 'object'>",
        ),
        (
            lambda: _X.enable_mixed_precision_graph_rewrite(_gd(), loss_scale="bogus"),
            "Could not interpret loss scale identifier: bogus",
        ),
    ],
)
def test_errors_as_tf(make, message):
    with pytest.raises(ValueError) as e:
        make()
    assert str(e.value) == message


def test_graph_rewrite_wraps_the_optimizer():
    w = tf.Variable(3.0)
    opt = tf.train.experimental.enable_mixed_precision_graph_rewrite(tf.train.AdamOptimizer(0.1))
    try:
        assert type(opt).__name__ == "MixedPrecisionLossScaleOptimizer"
        train = opt.minimize(w * w)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train)
            assert s.run(w) == pytest.approx(2.9)
        with pytest.raises(ValueError, match="must not already be an instance"):
            tf.train.experimental.enable_mixed_precision_graph_rewrite(opt)
    finally:
        tf.train.experimental.disable_mixed_precision_graph_rewrite()


def test_loss_scale_state_is_checkpointed(tmp_path):
    ls = tf.train.experimental.DynamicLossScale(4.0, increment_period=1)
    update, _ = ls.update([tf.constant([1.0])])
    saver = tf.train.Saver()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(update)
        path = saver.save(s, str(tmp_path / "model"))
    with tf.Session() as s:
        saver.restore(s, path)
        assert s.run(ls()) == 8.0
    reader = tf.train.load_checkpoint(path)
    assert reader.get_variable_to_shape_map() == {"current_loss_scale": [], "good_steps": []}
