"""tf.train's proximal optimizers, AdagradDA, cosine-restart / linear-cosine schedules and
sdca_shrink_l1 against numbers recorded from TF 2.21 (tests/fixtures/
record_train_extras_tf.py)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af

FIXTURE = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "train_extras_tf.json").read_text()
)


@pytest.fixture(autouse=True)
def _graph(graph):
    return graph


@pytest.mark.parametrize("case", sorted(FIXTURE["optimizers"]))
def test_optimizers_follow_tf_step_for_step(case):
    rec = FIXTURE["optimizers"][case]
    var = af.Variable(np.float32(FIXTURE["var0"]), name="v")
    step = af.train.get_or_create_global_step()
    kwargs = dict(rec["kwargs"])
    if rec["class"] == "AdagradDAOptimizer":
        kwargs["global_step"] = step
    opt = getattr(af.train, rec["class"])(**kwargs)
    coef = np.float32(FIXTURE["coef"])
    if rec["sparse"]:
        rows = af.gather(var, [1, 0, 1])
        loss = af.reduce_sum(rows * np.concatenate([coef, coef[1:]]) + 0.5 * rows * rows)
    else:
        loss = af.reduce_sum(var * coef + 0.5 * var * var)
    train = opt.minimize(loss, global_step=step)
    assert sorted(opt.get_slot_names()) == sorted(rec["slots"])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        for want in rec["values"]:
            s.run(train)
            np.testing.assert_allclose(s.run(var), want, rtol=2e-6, atol=1e-7)
        for name, want in rec["slots"].items():
            np.testing.assert_allclose(s.run(opt.get_slot(var, name)), want, rtol=2e-6)


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (af.train.ProximalAdagradOptimizer, {"initial_accumulator_value": 0.0}),
        (af.train.AdagradDAOptimizer, {"global_step": 0,
                                       "initial_gradient_squared_accumulator_value": -1.0}),
    ],
)  # fmt: skip
def test_nonpositive_accumulators_raise_value_error(cls, kwargs):
    with pytest.raises(ValueError, match="must be positive"):
        cls(0.1, **kwargs)


@pytest.mark.parametrize("case", sorted(FIXTURE["schedules"]))
def test_schedules_match_tf(case):
    rec = FIXTURE["schedules"][case]
    step = af.placeholder(af.int64, [])
    lr = getattr(af.train, rec["fn"])(0.5, step, **rec["kwargs"])
    with af.Session() as s:
        got = [s.run(lr, {step: k}) for k in FIXTURE["steps"]]
    np.testing.assert_allclose(got, rec["values"], rtol=2e-6, atol=1e-8)


def test_noisy_linear_cosine_decay_noise_has_the_documented_variance():
    step = af.placeholder(af.int64, [])
    noisy = af.train.noisy_linear_cosine_decay(1.0, step, 100, initial_variance=0.5,
                                               variance_decay=0.5, beta=0.0)  # fmt: skip
    clean = af.train.linear_cosine_decay(1.0, step, 100, beta=0.0)
    with af.Session() as s:
        base = s.run(clean, {step: 3})
        draws = np.array([s.run(noisy, {step: 3}) for _ in range(400)])
    cosine = 0.5 * (1 + np.cos(np.pi * 3 / 100))
    noise = (draws - base) / cosine  # the noise on the linear term
    want_std = np.sqrt(0.5 / 4**0.5)
    assert abs(noise.mean()) < 4 * want_std / np.sqrt(400)
    assert 0.8 * want_std < noise.std() < 1.2 * want_std


def test_schedules_require_a_global_step():
    for fn in (af.train.cosine_decay_restarts, af.train.linear_cosine_decay,
               af.train.noisy_linear_cosine_decay):  # fmt: skip
        with pytest.raises(ValueError, match="global_step is required"):
            fn(0.1, None, 10)


def test_sdca_shrink_l1_matches_tf():
    a = af.Variable(np.float32([[0.5, -1.5, 2.0], [-0.1, 0.0, 3.0]]))
    b = af.Variable(np.float32([-0.2, 0.9]))
    op = af.train.sdca_shrink_l1([a, b], l1=0.6, l2=2.0)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(op)
        got = s.run([a, b])
    for g, want in zip(got, FIXTURE["sdca_shrink_l1"]):
        np.testing.assert_allclose(g, want, rtol=1e-6)
