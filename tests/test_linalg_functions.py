"""tf.linalg.logm (TF's MatrixLogarithm, complex only) and tf.linalg.eigh_tridiagonal
against TF 2.21's recorded results (tests/fixtures/linalg_functions_tf.json, recorded
by record_linalg_functions.py from linalg_functions_cases.py).

eigh_tridiagonal's eigenvectors are compared up to each column's phase: TF's inverse
iteration fixes none (its sign flips with the bisection's side of the eigenvalue).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(120)

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import linalg_functions_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "linalg_functions_tf.json").read_text())
GOT = cases.run_all(tf)


def _decode(rec):
    value = np.asarray(rec["value"])
    if rec["dtype"].startswith("complex"):
        value = value[..., 0] + 1j * value[..., 1]
    return value


def _tol(dtype: str) -> float:
    return 2e-5 if dtype in ("float32", "complex64") else 1e-10


@pytest.mark.parametrize("name", sorted(TABLE["logm"]))
def test_logm_matches_tf(name):
    want, got = TABLE["logm"][name], GOT["logm"][name]
    assert got["dtype"] == want["dtype"]
    tol = 1e-5 if want["dtype"] == "complex64" else 1e-10
    np.testing.assert_allclose(_decode(got), _decode(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(TABLE["eigh_tridiagonal"]))
def test_eigh_tridiagonal_matches_tf(name):
    want, got = TABLE["eigh_tridiagonal"][name], GOT["eigh_tridiagonal"][name]
    if isinstance(want, dict):
        assert isinstance(got, dict) and got["dtype"] == want["dtype"]
        tol = _tol(want["dtype"])
        np.testing.assert_allclose(_decode(got), _decode(want), rtol=tol, atol=tol)
        return
    (w_vals, w_vecs), (g_vals, g_vecs) = want, got
    assert (g_vals["dtype"], g_vecs["dtype"]) == (w_vals["dtype"], w_vecs["dtype"])
    tol = _tol(w_vals["dtype"])
    np.testing.assert_allclose(_decode(g_vals), _decode(w_vals), rtol=tol, atol=tol)
    gv, wv = _decode(g_vecs), _decode(w_vecs)
    assert gv.shape == wv.shape
    # same columns up to a unit factor: |<g_j, w_j>| = 1
    overlap = np.abs(np.sum(np.conj(gv) * wv, axis=0))
    np.testing.assert_allclose(overlap, np.ones_like(overlap), atol=1e-6)


def test_errors_match_tf():
    assert GOT["errors"] == TABLE["errors"]


def test_logm_has_no_gradient_as_in_tf():
    with tf.Graph().as_default():
        x = tf.constant(np.eye(2), dtype=tf.complex64)
        y = tf.linalg.logm(x)
        with pytest.raises(LookupError, match="MatrixLogarithm"):
            tf.gradients(tf.reduce_sum(tf.abs(y)), x)


def test_logm_inverts_expm():
    a = cases._rand(3, (2, 3, 3), True) * 0.5
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run(tf.linalg.logm(tf.linalg.expm(tf.constant(a, tf.complex128))))
    np.testing.assert_allclose(got, a, atol=1e-10)


def test_eigh_tridiagonal_gradient_is_the_eigenvalue_derivative():
    """d(sum w_k lambda_k)/d alpha_i = sum_k w_k v_ik^2, / d beta_i = 2 sum_k w_k v_ik
    v_(i+1)k (TF's own gradient, through its bisection bounds, is not this)."""
    alpha, beta = np.array([1.0, 2.0, 3.0, 0.5]), np.array([0.5, 0.25, -0.75])
    w = np.array([1.0, -2.0, 0.5, 0.25])
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    _, v = np.linalg.eigh(t)
    want_a = (v**2) @ w
    want_b = 2 * np.einsum("k,ik,ik->i", w, v[:-1], v[1:])
    with tf.Graph().as_default(), tf.Session() as sess:
        a, b = tf.constant(alpha), tf.constant(beta)
        e = tf.linalg.eigh_tridiagonal(a, b)
        ga, gb = sess.run(tf.gradients(tf.reduce_sum(e * w), [a, b]))
    np.testing.assert_allclose(ga, want_a, atol=1e-10)
    np.testing.assert_allclose(gb, want_b, atol=1e-10)
