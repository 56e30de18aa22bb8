"""TF's Erfinv, Ndtri, NextAfter, CumulativeLogsumexp, LogMatrixDeterminant and Lu ops,
tf.linalg's LU / SVD composites and tf.losses' cosine_distance and
mean_pairwise_squared_error against TF 2.21's recorded results
(tests/fixtures/math_more/, recorded by record_math_more_tf.py from math_more_cases.py):

- the graph built here gives TF's values and gradients (float64 to 1e-9, float32 to
  1e-5: SciPy's erfinv / ndtri and LAPACK's factorizations against TF's own);
- TF's own GraphDef (with its gradient ops) imports and runs to the same values;
- TF's errors (class and message), gradients by finite differences, and Lu's missing
  gradient (a LookupError, as TF).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import math_more_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "math_more" / "values.json").read_text())
ERRORS = json.loads((HERE / "math_more" / "errors.json").read_text())


def _decode(rec):
    dt = np.dtype(rec["dtype"])
    if dt.kind in "fc":
        v = np.vectorize(float, otypes=[np.float64])(np.array(rec["value"], dtype=object))
        return (v[..., 0] + 1j * v[..., 1]).astype(dt) if dt.kind == "c" else v.astype(dt)
    return np.asarray(rec["value"], dt)


def _check(key, got):
    want = _decode(TABLE[key])
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, key
    tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-9
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=key)


def test_built_here_matches_tf():
    with tf.Graph().as_default() as g:
        out = cases.build(tf)
        with tf.Session() as sess:
            got = sess.run(out, cases.feeds(g))
    with tf.Graph().as_default():
        extra = cases.build_batched_reconstruct(tf)
        with tf.Session() as sess:
            got.update(sess.run(extra))
    assert out["erfinv"].op.type == "Erfinv" and out["ndtri"].op.type == "Ndtri"
    assert out["nextafter_up"].op.type == "NextAfter"
    assert out["cumlse"].op.type == "CumulativeLogsumexp"
    assert out["slogdet_log"].op.type == "LogMatrixDeterminant" and out["lu"].op.type == "Lu"
    assert set(got) == set(TABLE)
    for k in TABLE:
        _check(k, got[k])


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "math_more" / "graph.pb").read_bytes())
    assert {"Erfinv", "Ndtri", "NextAfter", "CumulativeLogsumexp", "Lu"} <= {n.op for n in gd.node}
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(r["tensor"]) for k, r in TABLE.items() if r["tensor"]}
        with tf.Session() as sess:
            got = sess.run(fetch, cases.feeds(g))
    for k in fetch:
        _check(k, got[k])


@pytest.mark.parametrize("name", sorted(cases.ERRORS))
def test_errors_match_tf(name):
    want = ERRORS[name]
    with tf.Graph().as_default():
        if want["when"] == "build":
            with pytest.raises(
                {"ValueError": ValueError, "TypeError": TypeError}[want["error"]]
            ) as info:
                cases.ERRORS[name](tf)
            assert want["message"].strip() in str(info.value)
            return
        t = cases.ERRORS[name](tf)
        with tf.Session() as sess:
            with pytest.raises(getattr(tf.errors, want["error"])) as info:
                sess.run(t)
    assert want["message"].split("ScanOp: ")[-1] in str(info.value)


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


_R = np.random.default_rng(3)


@pytest.mark.parametrize(
    "build, x0",
    [
        (lambda t, x: t.math.erfinv(x), _R.uniform(-0.9, 0.9, (2, 3))),
        (lambda t, x: t.math.ndtri(x), _R.uniform(0.05, 0.95, (2, 3))),
        (lambda t, x: t.math.erfcinv(x), _R.uniform(0.1, 1.9, (2, 3))),
        (lambda t, x: t.math.cumulative_logsumexp(x, 1), _R.normal(0, 2, (2, 3))),
        (lambda t, x: t.math.cumulative_logsumexp(x, 0, False, True), _R.normal(0, 2, (3, 2))),
        (lambda t, x: t.linalg.slogdet(x)[1], _R.normal(0, 1, (2, 3, 3))),
        (
            lambda t, x: t.linalg.logdet(
                t.matmul(x, x, transpose_b=True) + 0.5 * t.eye(3, dtype=t.float64)
            ),
            _R.normal(0, 1, (3, 3)),
        ),  # fmt: skip
        (lambda t, x: t.linalg.normalize(x, axis=1)[0], _R.normal(0, 1, (2, 3))),
    ],
)
def test_gradients_by_finite_differences(build, x0):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, x0.shape)
        y = tf.cast(build(tf, x), tf.float64)
        w = tf.constant(np.linspace(-1.5, 2.0, max(1, int(np.prod(y.shape.as_list())))).reshape(
            y.shape.as_list()))  # fmt: skip
        loss = tf.reduce_sum(y * w)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            got = sess.run(g, {x: x0})
            num = _numeric_grad(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-6)


def test_nextafter_gradient_is_one_toward_x1():
    with tf.Graph().as_default(), tf.Session() as sess:
        x1 = tf.constant([[1.0, 2.0, 3.0]], tf.float64)
        x2 = tf.constant([[0.0], [5.0]], tf.float64)
        g1, g2 = sess.run(tf.gradients(tf.reduce_sum(tf.math.nextafter(x1, x2)), [x1, x2]))
    np.testing.assert_array_equal(g1, [[2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(g2, [[0.0], [0.0]])


def test_lu_reconstructs_and_has_no_gradient():
    a = _R.normal(size=(3, 5, 5))
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant(a)
        lu, p = tf.linalg.lu(x)
        np.testing.assert_allclose(sess.run(tf.linalg.lu_reconstruct(lu, p)), a, atol=1e-12)
        with pytest.raises(LookupError, match="No gradient defined for operation"):
            tf.gradients(tf.reduce_sum(lu), [x])
