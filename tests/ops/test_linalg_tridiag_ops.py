"""TF's TridiagonalSolve and TridiagonalMatMul (`tf.linalg.tridiagonal_solve` /
`tridiagonal_matmul`, every diagonals format) and `tf.linalg.expm` against TF 2.21's
recorded results (tests/fixtures/tridiag/, recorded by record_tridiag_tf.py from
tridiag_cases.py):

- the graph built here gives TF's values and gradients (float64 to 1e-9, float32 to
  1e-4), NaN for a singular matrix as TF; TF's own GraphDef imports and runs to them
  (expm's has a while loop, which the GraphDef import does not take: values only);
- TF's build-time errors; gradients by finite differences; the solve against NumPy.
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
import tridiag_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "tridiag" / "values.json").read_text())
ERRORS = json.loads((HERE / "tridiag" / "errors.json").read_text())


def _decode(rec):
    dt = np.dtype(rec["dtype"])
    v = np.vectorize(float, otypes=[np.float64])(np.array(rec["value"], dtype=object))
    return (v[..., 0] + 1j * v[..., 1]).astype(dt) if dt.kind == "c" else v.astype(dt)


def _check(key, got):
    want = _decode(TABLE[key])
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, key
    tol = 1e-4 if got.dtype in (np.float32, np.complex64) else 1e-9
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=key)


def test_built_here_matches_tf():
    with tf.Graph().as_default() as g:
        out = cases.build(tf)
        with tf.Session() as sess:
            got = sess.run(out, cases.feeds(g))
    assert out["solve"].op.type == "TridiagonalSolve"
    assert out["matmul"].op.type == "TridiagonalMatMul"
    with tf.Graph().as_default():
        with tf.Session() as sess:
            got.update(sess.run(cases.build_expm(tf)))
    assert set(got) == set(TABLE)
    for k in TABLE:
        _check(k, got[k])


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "tridiag" / "graph.pb").read_bytes())
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
        with pytest.raises(ValueError, match=want["message"]):
            cases.ERRORS[name](tf)


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("pivoting", [True, False])
def test_gradients_by_finite_differences(pivoting):
    rng = np.random.default_rng(5)
    d0 = rng.normal(0, 1, (3, 5))
    d0[1] += 4.0  # (diagonally dominant: the Thomas algorithm is stable on it)
    r0 = rng.normal(0, 1, (5, 2))
    w = rng.normal(0, 1, (5, 2))
    with tf.Graph().as_default():
        d = tf.placeholder(tf.float64, d0.shape)
        r = tf.placeholder(tf.float64, r0.shape)
        loss = tf.reduce_sum(tf.linalg.tridiagonal_solve(d, r, partial_pivoting=pivoting) * w)
        loss += tf.reduce_sum(tf.linalg.tridiagonal_matmul(d, r) * w * w)
        gd, gr = tf.gradients(loss, [d, r])
        with tf.Session() as sess:
            got_d, got_r = sess.run([gd, gr], {d: d0, r: r0})
            num_d = _numeric_grad(lambda v: sess.run(loss, {d: v, r: r0}), d0)
            num_r = _numeric_grad(lambda v: sess.run(loss, {d: d0, r: v}), r0)
    # (the unused corners, superdiagonal[-1] and subdiagonal[0], have gradient 0)
    np.testing.assert_allclose(got_d, num_d, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_r, num_r, rtol=1e-6, atol=1e-7)


def test_solve_against_numpy_batched():
    rng = np.random.default_rng(9)
    diags = rng.normal(0, 1, (4, 3, 7))
    rhs = rng.normal(0, 1, (4, 7, 3))
    dense = np.zeros((4, 7, 7))
    i = np.arange(7)
    dense[:, i, i] = diags[:, 1]
    dense[:, i[:-1], i[1:]] = diags[:, 0, :-1]
    dense[:, i[1:], i[:-1]] = diags[:, 2, 1:]
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run(tf.linalg.tridiagonal_solve(diags, rhs))
    np.testing.assert_allclose(got, np.linalg.solve(dense, rhs), rtol=1e-9, atol=1e-9)
