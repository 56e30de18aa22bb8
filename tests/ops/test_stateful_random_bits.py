"""Seeded stateful random ops as TF 2.21 draws them (fixtures/stateful_random_tf.npz,
recorded by fixtures/record_stateful_random_tf.py from fixtures/stateful_random_cases.py):
random_gamma, random_poisson, multinomial / categorical and random_shuffle reserve TF's
counters each run and draw TF's values, bit for bit, run after run."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import stateful_random_cases as cases  # noqa: E402

TF = dict(np.load(FIXTURES / "stateful_random_tf.npz"))


@pytest.fixture(scope="module")
def runs():
    # (on the CPU: the stand-in GPU set runs this file too)
    with ops.Graph().as_default(), af.device("/cpu:0"):
        out = cases.build(af)
        with Session() as sess:
            return [sess.run(out) for _ in range(cases.RUNS)]


@pytest.mark.parametrize("key", sorted({k.split("/")[0] for k in TF}))
def test_same_values_as_tf(runs, key):
    for i, r in enumerate(runs):
        got, want = np.asarray(r[key]), TF[f"{key}/{i}"]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        if key == "gamma_beta":
            # The samples are TF's; the division by beta is a RealDiv by a constant,
            # which TF's graph optimizer sometimes turns into a multiplication by the
            # reciprocal (it did while recording: 1 ulp off x / beta in 8 of 40).
            np.testing.assert_array_max_ulp(got, want, maxulp=1)
            continue
        assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), (key, i)


def test_shuffle_keeps_every_row_once():
    with ops.Graph().as_default():
        x = af.random_shuffle(af.reshape(af.range(3000), [1000, 3]), seed=4)
        with Session() as sess:
            for _ in range(3):
                y = sess.run(x)
                assert sorted(y[:, 0].tolist()) == list(range(0, 3000, 3))
                assert (y[:, 1] == y[:, 0] + 1).all()
