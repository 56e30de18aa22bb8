"""Optimizers, schedules and clip ops against numbers recorded from TensorFlow 1.x graphs.

tests/fixtures/optimizers_tf.json is written by tests/fixtures/record_optimizers_tf.py
(run with the separate TensorFlow venv); it holds every input, so nothing here needs
TensorFlow.  Loss curves must follow TF's to 1e-4 relative, step for step.
"""

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import clip_ops
from asyncflow import graph as ops
from asyncflow.registry import get_op_def
from asyncflow.train import learning_rate_decay, optimizers, training_util

FIXTURE = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "optimizers_tf.json").read_text()
)
F32 = np.float32


def _f32(d):
    return {k: np.asarray(v, F32) for k, v in d.items()}


# -- raw kernels ----------------------------------------------------------------------------


def _kernel_id(case):
    return case["op"] + ("-nesterov" if case["attrs"].get("use_nesterov") else "")


@pytest.mark.parametrize("case", FIXTURE["kernels"], ids=_kernel_id)
def test_kernel_matches_tf(case):
    op_def = get_op_def(case["op"])
    with af.Graph().as_default():
        refs, args = {}, []
        for arg in op_def.inputs:
            if arg.name == "indices":
                args.append(np.asarray(case["indices"], np.int32))
                continue
            value = np.asarray(case["inputs"][arg.name], F32)
            if arg.is_ref:
                refs[arg.name] = af.Variable(value, name=arg.name)
                args.append(refs[arg.name])
            else:
                args.append(value)
        op = ops.apply_op(case["op"], args, dict(case["attrs"]))
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(op.outputs[0].op)
            for name, ref in refs.items():
                np.testing.assert_allclose(
                    sess.run(ref), case["outputs"][name], rtol=1e-5, atol=2e-6, err_msg=name
                )


# -- 15-step trajectories --------------------------------------------------------------------


def _dense_model():
    m = _f32(FIXTURE["model_init"])
    x, y = af.constant(m["x"]), af.constant(m["y"])
    w1 = af.Variable(m["w1"], name="w1")
    b1 = af.Variable(m["b1"], name="b1")
    w2 = af.Variable(m["w2"], name="w2")
    b2 = af.Variable(m["b2"], name="b2")
    h = af.tanh(af.matmul(x, w1) + b1)
    out = af.matmul(h, w2) + b2
    return af.reduce_mean(af.square(out - y)), [w1, b1, w2, b2]


def _sparse_model():
    m = FIXTURE["emb_init"]
    emb = af.Variable(np.asarray(m["emb"], F32), name="emb")
    w = af.Variable(np.asarray(m["w"], F32), name="w")
    h = af.gather(emb, af.constant(m["ids"], af.int32))
    y = np.asarray(m["y"], F32)
    return af.reduce_mean(af.square(af.matmul(h, w) - y)), [emb, w]


def _check_trajectory(model, rec):
    with af.Graph().as_default():
        loss, variables = model()
        gs = training_util.get_or_create_global_step()
        opt = getattr(optimizers, rec["class"])(**rec["kwargs"])
        train = opt.minimize(loss, global_step=gs)
        assert train.name == rec["train_op"]
        assert opt.get_slot_names() == rec["slot_names"]
        assert [v.op.name for v in opt.variables()] == rec["variables"]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            losses = [float(sess.run([loss, train])[0]) for _ in range(FIXTURE["steps"])]
            np.testing.assert_allclose(losses, rec["losses"], rtol=1e-4)
            np.testing.assert_allclose(sess.run(loss), rec["final_loss"], rtol=1e-4)
            assert sess.run(gs) == rec["global_step"]
            for v in variables:
                np.testing.assert_allclose(
                    sess.run(v), rec["final"][v.op.name], rtol=1e-4, atol=1e-5
                )


@pytest.mark.parametrize("key", sorted(FIXTURE["optimizers"]))
def test_trajectory_matches_tf(key):
    _check_trajectory(_dense_model, FIXTURE["optimizers"][key])


@pytest.mark.parametrize("key", sorted(FIXTURE["sparse_optimizers"]))
def test_sparse_trajectory_matches_tf(key):
    _check_trajectory(_sparse_model, FIXTURE["sparse_optimizers"][key])


# -- schedules -------------------------------------------------------------------------------


def _schedule_id(rec):
    return (
        rec["fn"] + "-" + "-".join(f"{k}={v}" for k, v in rec["kwargs"].items() if k != "values")
    )


@pytest.mark.parametrize("rec", FIXTURE["schedules"], ids=_schedule_id)
def test_schedule_matches_tf(rec):
    with af.Graph().as_default():
        step = af.placeholder(af.int64, [])
        fn = getattr(learning_rate_decay, rec["fn"])
        key = "x" if rec["fn"] == "piecewise_constant" else "global_step"
        lr = fn(**{key: step}, **rec["kwargs"])
        with af.Session() as sess:
            got = [float(sess.run(lr, {step: s})) for s in rec["steps"]]
    np.testing.assert_allclose(got, rec["values"], rtol=1e-5, atol=1e-9)


def test_schedule_requires_global_step():
    with pytest.raises(ValueError, match="global_step is required for exponential_decay"):
        learning_rate_decay.exponential_decay(0.1, None, 10, 0.9)
    with pytest.raises(ValueError, match="1 less than the length of values"):
        learning_rate_decay.piecewise_constant(af.constant(1), [1, 2], [0.1, 0.2])


def test_schedule_drives_an_optimizer():
    with af.Graph().as_default():
        x = af.Variable(0.0, name="x")
        gs = training_util.get_or_create_global_step()
        lr = learning_rate_decay.exponential_decay(1.0, gs, 1, 0.5, staircase=True)
        train = optimizers.GradientDescentOptimizer(lr).minimize(-x, global_step=gs)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(3):
                sess.run(train)
            assert sess.run(x) == pytest.approx(1.0 + 0.5 + 0.25)


# -- clip ops ----------------------------------------------------------------------------------


def test_clip_ops_match_tf():
    c = FIXTURE["clips"]
    with af.Graph().as_default():
        a, b = af.constant(np.asarray(c["a"], F32)), af.constant(np.asarray(c["b"], F32))
        clipped, norm = clip_ops.clip_by_global_norm([a, b], 2.5)
        big, _ = clip_ops.clip_by_global_norm([a, None, b], 1000.0)
        fetch = {
            "clip_by_value": clip_ops.clip_by_value(a, -0.5, 1.2),
            "clip_by_norm": clip_ops.clip_by_norm(a, 2.0),
            "clip_by_norm_axes": clip_ops.clip_by_norm(a, 1.0, axes=[1]),
            "clip_by_norm_noop": clip_ops.clip_by_norm(b, 100.0),
            "global_norm": clip_ops.global_norm([a, b]),
            "clip_by_global_norm": clipped,
            "clip_by_global_norm_norm": norm,
            "clip_by_global_norm_noop": [big[0], big[2]],
            "clip_by_average_norm": clip_ops.clip_by_average_norm(a, 0.3),
        }
        assert big[1] is None
        with af.Session() as sess:
            got = sess.run(fetch)
    for key, value in got.items():
        want = c[key]
        pairs = zip(value, want) if isinstance(value, list) else [(value, want)]
        for g, w in pairs:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7, err_msg=key)


def test_clip_by_global_norm_of_inf_is_nan_and_zero_norm_is_safe():
    with af.Graph().as_default():
        (inf,), _ = clip_ops.clip_by_global_norm([af.constant([np.inf, 1.0])], 1.0)
        zero = clip_ops.clip_by_norm(af.constant([0.0, 0.0]), 1.0)
        with af.Session() as sess:
            assert np.isnan(sess.run(inf)).all()
            np.testing.assert_array_equal(sess.run(zero), [0.0, 0.0])
    with pytest.raises(TypeError, match="t_list should be a sequence"):
        clip_ops.global_norm(af.constant([1.0]))
