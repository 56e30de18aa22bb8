"""Element-wise math of special_math_ops against values recorded from TF 2.21
(tf.compat.v1 graph mode, float32 inputs) and float64 finite-difference gradients."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error

X = np.array([-0.5, 0.0, 0.25, 0.9], np.float32)
NONFINITE = np.float32([np.nan, np.inf, -np.inf, 1.0])
XI, YI = np.array([7, -7, 7, -7], np.int32), np.array([3, 3, -3, -3], np.int32)

TF = {
    "acos": [2.094395160675049, 1.5707963705062866, 1.3181160688400269, 0.4510268568992615],
    "asin": [-0.5235987901687622, 0.0, 0.252680242061615, 1.1197694540023804],
    "atan": [-0.46364760398864746, 0.0, 0.244978666305542, 0.7328150868415833],
    "sinh": [-0.5210952758789062, 0.0, 0.25261232256889343, 1.0265166759490967],
    "cosh": [1.1276259422302246, 1.0, 1.0314130783081055, 1.4330863952636719],
    "asinh": [-0.4812118411064148, 0.0, 0.24746647477149963, 0.8088668584823608],
    "atanh": [-0.5493061542510986, 0.0, 0.2554128170013428, 1.4722193479537964],
    "erf": [-0.5204998850822449, 0.0, 0.27632641792297363, 0.7969081997871399],
    "erfc": [1.5204999446868896, 1.0, 0.7236735820770264, 0.2030918002128601],
    "acosh": [0.0, 0.9624236822128296, 1.7627471685409546],
    "atan2": [1.5707963705062866, -2.356194496154785, 3.1415927410125732, -0.7853981852531433],
    "truncatediv": [2, -2, -2, 2],
    "truncatemod": [1, -1, 1, -1],
    "truncatemod_f": [1.5, -1.5],
    "isnan": [True, False, False, False],
    "isinf": [False, True, True, False],
    "isfinite": [False, False, False, True],
}

_BUILD = {
    **{n: (lambda n=n: getattr(af, n)(X)) for n in
       ("acos", "asin", "atan", "sinh", "cosh", "asinh", "atanh", "erf", "erfc")},
    "acosh": lambda: af.acosh(np.float32([1.0, 1.5, 3.0])),
    "atan2": lambda: af.atan2(np.float32([1, -1, 0, -1]), np.float32([0, -1, -2, 1])),
    "truncatediv": lambda: af.truncatediv(XI, YI),
    "truncatemod": lambda: af.truncatemod(XI, YI),
    "truncatemod_f": lambda: af.truncatemod(np.float32([7.5, -7.5]), np.float32([2, 2])),
    "isnan": lambda: af.is_nan(NONFINITE),
    "isinf": lambda: af.is_inf(NONFINITE),
    "isfinite": lambda: af.is_finite(NONFINITE),
}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


@pytest.mark.parametrize("name", sorted(TF))
def test_values_match_tf(name):
    t = _BUILD[name]()
    with Session() as sess:
        got = sess.run(t)
    want = np.asarray(TF[name])
    if want.dtype == bool:
        assert got.dtype == np.bool_ and got.tolist() == TF[name]
    elif want.dtype.kind == "i":
        assert got.dtype == np.int32 and got.tolist() == TF[name]
    else:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)


def test_truncated_integer_division_by_zero_fails_as_tf():
    # TF 2.21's CPU kernels fail the step with InternalError "Unexpected error in binary
    # operator (only integer div and mod should have errors)" (not Div's InvalidArgument).
    with Session() as sess:
        for fn in (af.truncatediv, af.truncatemod):
            for dtype in (np.int32, np.int64):
                with pytest.raises(errors.InternalError, match="Unexpected error in binary op"):
                    sess.run(fn(XI.astype(dtype), np.zeros(4, dtype)))


X64 = np.array([-0.5, 0.1, 0.25, 0.7])


@pytest.mark.parametrize(
    "build,x0",
    [
        (af.acos, X64), (af.asin, X64), (af.atan, X64), (af.sinh, X64), (af.cosh, X64),
        (af.asinh, X64), (af.atanh, X64), (af.erf, X64), (af.erfc, X64),
        (af.acosh, np.array([1.2, 1.5, 3.0])),
        (lambda x: af.atan2(x, np.array([0.5, -1.0, 2.0, -0.3])), X64),
        (lambda x: af.atan2(np.array([[0.5], [-1.0]]), x), X64),
    ],
)  # fmt: skip
def test_gradients_against_finite_differences(build, x0):
    x = af.constant(x0)
    y = build(x)
    with Session() as sess:
        y_shape = sess.run(y).shape
        assert compute_gradient_error(x, list(x0.shape), y, list(y_shape), x_init_value=x0) < 1e-5


def test_reduce_logsumexp_and_count_nonzero_match_tf():
    # TF 2.21 on x = [[0, 1, 2], [3, 0, -inf]] (float32).
    x = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, -np.inf]], np.float32)
    with Session() as sess:
        np.testing.assert_allclose(sess.run(af.reduce_logsumexp(x)), 3.471745, rtol=1e-6)
        np.testing.assert_allclose(sess.run(af.reduce_logsumexp(x, 1)), [2.4076059, 3.0485873],
                                   rtol=1e-6)  # fmt: skip
        np.testing.assert_allclose(
            sess.run(af.reduce_logsumexp(x, 0, keepdims=True)),
            [[3.0485873, 1.3132616, 2.0]],
            rtol=1e-6,
        )
        assert sess.run(af.reduce_logsumexp(np.float32([-np.inf, -np.inf]))) == -np.inf
        c = af.count_nonzero(x)
        assert c.dtype == af.int64 and sess.run(c) == 4
        assert sess.run(af.count_nonzero(x, 1, dtype=af.int32)).tolist() == [2, 2]
        assert sess.run(af.count_nonzero([b"a", b"", b"c"])) == 2


def test_reduce_logsumexp_gradient_is_the_softmax():
    x0 = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    x = af.constant(x0)
    y = af.reduce_logsumexp(x, 1)
    with Session():
        assert compute_gradient_error(x, [2, 3], y, [2], x_init_value=x0) < 1e-7


# Recorded from TF 2.21 (tf.compat.v1 graph mode, float64): lgamma, digamma and their
# gradients (digamma, polygamma(1, .)) at poles, negatives, tiny and large x.
GAMMA_X = np.array([0.5, 3.0, -1.5, 0.0, -2.0, 1e-3, 20.0])
GAMMA_TF = {
    "lgamma": [0.5723649429247001, 0.6931471805599453, 0.8600470153764809, np.inf, np.inf,
               6.907178885383853, 39.339884187199495],
    "digamma": [-1.9635100260214227, 0.9227843350984675, 0.7031566406452434, np.nan, np.nan,
                -1000.5755719318104, 2.970523992242149],
    "trigamma": [4.93480220054468, 0.39493406684822646, 9.379246644989124, np.inf, np.inf,
                 1000001.6425331959, 0.051270822935203124],
}  # fmt: skip


def test_lgamma_digamma_and_their_gradients_match_tf():
    x = af.constant(GAMMA_X)
    lg, dg = af.lgamma(x), af.digamma(x)
    fetches = [lg, dg, af.gradients(lg, x)[0], af.gradients(dg, x)[0]]
    with Session() as sess:
        got = sess.run(fetches)
    want = [GAMMA_TF["lgamma"], GAMMA_TF["digamma"], GAMMA_TF["digamma"], GAMMA_TF["trigamma"]]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    assert lg.op.type == "Lgamma" and dg.op.type == "Digamma"


def test_polygamma_matches_tf_and_keeps_float32():
    # TF 2.21: polygamma([1, 2, 0], [0.5, 3, 2]) -> [4.934802, -0.1541138, 0.4227842];
    # a non-integer or negative order gives NaN.
    y = af.polygamma(np.float32([1, 2, 0, 1.5, -1]), np.float32([0.5, 3, 2, 1, 1]))
    with Session() as sess:
        got = sess.run(y)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[:3], [4.934802055358887, -0.1541137993335724,
                                         0.4227842092514038], rtol=1e-6)
    assert np.isnan(got[3:]).all()


@pytest.mark.parametrize("build", [af.lgamma, af.digamma, lambda x: af.polygamma(2.0, x)])
def test_gamma_family_gradients_against_finite_differences(build):
    x0 = np.array([0.3, 1.7, -0.4, 6.0])
    x = af.constant(x0)
    y = build(af.cast(x, af.float64))
    assert compute_gradient_error(x, [4], y, [4], x_init_value=x0, delta=1e-5) < 1e-5


def test_polygamma_has_no_gradient_for_its_order():
    a, x = af.constant(1.0), af.constant(0.5)
    assert af.gradients(af.polygamma(a, x), [a]) == [None]
