"""Stateless random ops and tf.random.Generator against TF 2.21's recorded numbers
(fixtures/stateless_random_tf.json, recorded by fixtures/record_stateless_random_tf.py
from fixtures/stateless_random_cases.py): the same bits for uniform / normal / truncated
normal / integer draws, categorical and multinomial, gamma, poisson, binomial,
parameterized truncated normal (its three samplers), fold_in and split, a Generator's
draws one after another and its state, create_rng_state, and the build errors; then the
distributions' constraints and the runtime errors.

Float32 normals come from TF's Box-Muller through the C library's logf / sincosf, which
ops/philox_random.py calls from a compiled loop (numba); without numba it rounds
float64 functions instead, and `ptn_defaults` shows one value a ulp off TF's."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import stateless_random_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "stateless_random_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetch):
    with Session() as sess:
        return sess.run(fetch)


# Cases with one float32 normal a ulp off TF's without numba (see the module note).
_ONE_ULP = set() if importlib.util.find_spec("numba") else {"ptn_defaults"}


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_same_numbers_as_tf(key):
    got = cases.plain(_run(cases.CASES[key](af)))
    want = TF["cases"][key]
    if key in _ONE_ULP:
        assert got["shape"] == want["shape"] and got["dtype"] == want["dtype"] == "float32"
        a, b = (np.array(v["values"], np.float32) for v in (got, want))
        np.testing.assert_array_max_ulp(a, b, maxulp=1)
        assert (a != b).sum() <= 1
        return
    assert got == want


def test_generator_draws_and_state_match_tf():
    steps = cases.generator_steps(af)
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        got = [cases.plain(sess.run(t)) for t in steps]
    assert got == TF["generator"]


def test_generator_binomial_matches_tf():
    steps = cases.generator_binomial_steps(af)
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        got = [cases.plain(sess.run(t)) for t in steps]
    assert got == TF["generator_binomial"]


def test_generator_is_tfs_graph():
    g = af.random.Generator.from_seed(7)
    n = g.normal([2])
    types = {o.type for o in ops.get_default_graph().get_operations()}
    assert {"RngReadAndSkip", "StatelessRandomNormalV2", "VarHandleOp"} <= types
    assert g.state.name == "random_generator/StateVar:0" and n.shape.as_list() == [2]


def test_rng_states_and_build_errors_match_tf():
    got = {k: cases.plain(v) for k, v in cases.rng_states(af).items()}
    assert got == TF["rng_states"]
    assert cases.build_errors(af) == TF["build_errors"]


def test_global_generator():
    g = af.random.get_global_generator()
    assert af.random.get_global_generator() is g
    mine = af.random.Generator.from_seed(3)
    af.random.set_global_generator(mine)
    try:
        assert af.random.get_global_generator() is mine
    finally:
        af.random.set_global_generator(g)
    assert af.random.Algorithm.PHILOX.value == 1 and af.random.Algorithm.AUTO_SELECT.value == 3


def test_distributions_hold_their_constraints():
    # Larger draws than the fixtures: the moments of each distribution.
    gam = af.random.stateless_gamma([4000, 2], [5, 6], alpha=[0.7, 4.0], beta=[1.0, 2.0])
    poi = af.random.stateless_poisson([4000, 2], [5, 6], lam=[3.0, 60.0])
    bino = af.random.stateless_binomial([4000, 2], [5, 6], counts=[8.0, 300.0], probs=[0.3, 0.6])
    cat = af.random.stateless_categorical(af.math.log([[0.1, 0.6, 0.3]]), 6000, [5, 6])
    g, p, b, c = _run([gam, poi, bino, cat])
    np.testing.assert_allclose(g.mean(0), [0.7, 2.0], rtol=0.08)
    np.testing.assert_allclose(p.mean(0), [3.0, 60.0], rtol=0.05)
    np.testing.assert_allclose(b.mean(0), [2.4, 180.0], rtol=0.05)
    assert b.min() >= 0 and (b[:, 0] <= 8).all() and (b[:, 1] <= 300).all()
    np.testing.assert_allclose(np.bincount(c[0], minlength=3) / 6000, [0.1, 0.6, 0.3], atol=0.02)


@pytest.mark.parametrize(
    "build,error,match",
    [
        (lambda: af.random.stateless_uniform([2], af.placeholder_with_default([1, 2, 3], [None])),
         errors.InvalidArgumentError, r"seed must have shape \[2\], not \[3\]"),
        (lambda: af.random.stateless_uniform([2], [1, 2], minval=5, maxval=5, dtype=af.int32),
         errors.InvalidArgumentError, "Need minval < maxval"),
        (lambda: af.random.stateless_gamma([3], [1, 2], alpha=[1.0, 2.0]),
         errors.InvalidArgumentError, "must end with broadcasted shape"),
        (lambda: af.random.stateless_parameterized_truncated_normal([2], [1, 2], stddevs=0.0),
         errors.InvalidArgumentError, "Invalid parameters"),
        (lambda: af.random.stateless_parameterized_truncated_normal(
            [2], [1, 2], minvals=-np.inf, maxvals=np.inf),
         errors.InvalidArgumentError, "Invalid parameters"),
        (lambda: af.random.stateless_categorical([[0.0]], af.placeholder_with_default(-1, []),
                                                 [1, 2]),
         errors.InvalidArgumentError, "num_samples should be nonnegative"),
    ],
)  # fmt: skip
def test_runtime_errors(build, error, match):
    with pytest.raises(error, match=match):
        _run(build())
