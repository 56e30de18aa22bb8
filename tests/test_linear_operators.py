"""tf.linalg's LinearOperators against TensorFlow 2.21's recorded results
(tests/fixtures/linear_operators_tf.json.gz, recorded by record_linear_operators.py from
linear_operator_cases.py): every method of every case gives TF's dtype, static shape and
values, raises TF's error class (and message) where TF raises, and hands back the same
kind of derived operator; the construction errors match TF's.  Gradients flow through
the operators' ops (finite differences, float64).
"""

from __future__ import annotations

import gzip
import json
import pathlib
import re
import sys

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(300)

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import linear_operator_cases as cases  # noqa: E402

TABLE = json.loads(gzip.decompress((HERE / "linear_operators_tf.json.gz").read_bytes()))
# TF raises where the result is well defined: a NumPy `mat` given to a batched
# LinearOperatorZeros.add_to_tensor is not converted (AttributeError on its tuple
# shape).  asyncflow converts it and returns mat broadcast to the batch (tested below).
# A LowRankUpdate with v or diag_update calls its own public assert_self_adjoint from
# the private one (RecursionError); asyncflow's compares the dense matrix with its
# adjoint, as the base class does.
# And a circulant's assert_hermitian_spectrum multiplies a float eps by the int32
# dimension (TypeError for every spectrum); asyncflow's checks the kernel (tested below).
TF_BUGS = {"zeros_batch_nonsquare.add_to_tensor", "low_rank_update_uv.assert_self_adjoint"} | {
    f"{c}.assert_hermitian_spectrum" for c in TABLE["cases"] if "circulant" in c
}
# TF's MatrixDiagV3 shape function rejects the compact diagonals of a Tridiag whose
# static shape is unknown (to_dense and all built on it); asyncflow builds them.
TF_DYNAMIC_DIAG_BUG = "The number of rows of `diagonal` doesn't match"
TOL = {"float16": 1e-2, "float32": 2e-4, "complex64": 2e-4}


def _message(msg: str) -> str | None:
    """TF's message with its DType spelling ours; None when it prints a tensor (whose
    repr differs between the frameworks)."""
    if "Tensor(" in msg or "tensor <" in msg or "in tensor" in msg:
        return None
    # An op's own type or shape check (its wording is the framework's, not the
    # operator's): the class is compared, not the message.
    internal = ("Value passed to parameter", "Dimensions must be equal", "Shape must be rank")
    if msg.startswith((*internal, "Shapes must be equal rank")):
        return None
    # A failed static assertion: TF appends the condition and the data after the
    # message; the message itself is compared.
    msg = msg.split("\n")[0].rstrip(". ")
    return re.sub(r"<dtype: '(\w+)'>", r"tf.\1", msg)


def _decode(rec):
    value = np.asarray(rec["value"])
    if rec["dtype"].startswith("complex"):
        value = value[..., 0] + 1j * value[..., 1]
    return value


def _compare_error(got, want, where):
    assert got.get("error") == want["error"], (where, got, want)
    expected = _message(want["message"])
    if expected is not None:
        assert _message(got["message"]) == expected, where


def _compare(got: dict, want: dict, where: str) -> None:
    if "error" in want:
        _compare_error(got, want, where)
        return
    if "assert" in want or "run_error" in want:
        assert got == want, where
        return
    assert "error" not in got, (where, got)
    if "operator" in want:
        assert got["operator"] == want["operator"], where
    assert got["dtype"] == want["dtype"], where
    assert got.get("static_shape") == want.get("static_shape"), where
    g, w = _decode(got), _decode(want)
    assert g.shape == w.shape, where
    tol = TOL.get(want["dtype"], 1e-9)
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=where)


@pytest.mark.parametrize("name", sorted(TABLE["cases"]))
def test_operator_matches_tf(name):
    want = TABLE["cases"][name]
    got = cases.evaluate(tf, cases.cases(tf)[name])
    if "error" in want:
        _compare_error(got, want, name)
        return
    assert got["static"] == want["static"], name
    assert set(got["values"]) == set(want["values"])
    for key, rec in want["values"].items():
        if f"{name}.{key}" in TF_BUGS or rec.get("message", "").startswith(TF_DYNAMIC_DIAG_BUG):
            continue
        if key.startswith("linalg_matmul"):  # tf.matmul does not dispatch (linalg_dispatch)
            continue
        _compare(got["values"][key], rec, f"{name}.{key}")


@pytest.mark.parametrize("name", sorted(TABLE["errors"]))
def test_construction_errors_match_tf(name):
    want = TABLE["errors"][name]
    got = cases.evaluate_error(tf, cases.error_cases(tf)[name])
    if want["error"] is None:
        assert got["error"] is None
    else:
        _compare_error(got, want, name)


def test_zeros_add_to_tensor_broadcasts_numpy_to_batch():
    mat = np.arange(6, dtype=np.float32).reshape(3, 2)
    with tf.Graph().as_default(), tf.Session() as sess:
        op = tf.linalg.LinearOperatorZeros(
            3, 2, batch_shape=[2], is_square=False, is_self_adjoint=False
        )
        got = sess.run(op.add_to_tensor(mat))
    np.testing.assert_array_equal(got, np.broadcast_to(mat, (2, 3, 2)))


def _grad_error(make, x_value, y_shape=None):
    """Largest Jacobian error of make(x) (a float64 tensor) at x_value."""
    with tf.Graph().as_default(), tf.Session():
        x = tf.placeholder(tf.float64, x_value.shape)
        y = make(x)
        shape = [int(d) for d in y.shape.as_list()] if y_shape is None else y_shape
        return tf.test.compute_gradient_error(
            x, list(x_value.shape), y, shape, x_init_value=x_value, delta=1e-5
        )


RHS = cases._rand(7, (3, 2), np.float64)
L = tf.linalg

GRADIENT_CASES = {
    "diag_solve": (lambda d: L.LinearOperatorDiag(d).solve(RHS), cases._pos(1, (3,), np.float64)),
    "diag_log_abs_det": (
        lambda d: L.LinearOperatorDiag(d).log_abs_determinant(),
        cases._pos(2, (2, 3), np.float64),
    ),
    "tril_solve_adjoint": (
        lambda t: L.LinearOperatorLowerTriangular(t).solve(RHS, adjoint=True),
        cases._lower(3, (3, 3), np.float64),
    ),
    "full_spd_solve": (
        lambda m: L.LinearOperatorFullMatrix(
            0.5 * (m + tf.matrix_transpose(m)), is_self_adjoint=True, is_positive_definite=True
        ).solve(RHS),
        cases._spd(4, (3, 3), np.float64),
    ),
    "householder_matmul": (
        lambda v: L.LinearOperatorHouseholder(v).matmul(RHS),
        cases._rand(5, (3,), np.float64),
    ),
    "permutation_matvec_arg": (
        lambda x: L.LinearOperatorPermutation([2, 0, 1], dtype=tf.float64).matmul(x),
        RHS,
    ),
    "composition_inverse_matmul": (
        lambda m: (
            L.LinearOperatorComposition(
                [L.LinearOperatorFullMatrix(m), L.LinearOperatorScaledIdentity(3, np.float64(2.0))]
            )
            .inverse()
            .matmul(RHS)
        ),
        cases._well_conditioned(6, (3, 3), np.float64),
    ),
    "toeplitz_matmul": (
        lambda c: L.LinearOperatorToeplitz(c, c).matmul(RHS),
        cases._rand(8, (3,), np.float64) + np.array([3.0, 0.0, 0.0]),
    ),
    "circulant_solve": (
        lambda s: L.LinearOperatorCirculant(s, input_output_dtype=tf.float64).solve(RHS),
        np.abs(cases._pos(9, (3,), np.float64)),
    ),
    "kronecker_solve": (
        lambda m: L.LinearOperatorKronecker(
            [L.LinearOperatorFullMatrix(m), L.LinearOperatorDiag(np.array([2.0, -1.0]))]
        ).solve(cases._rand(10, (4, 2), np.float64)),
        cases._well_conditioned(11, (2, 2), np.float64),
    ),
    "low_rank_update_log_abs_det": (
        lambda u: tf.reshape(
            L.LinearOperatorLowRankUpdate(
                L.LinearOperatorDiag(np.array([1.0, 2.0, 3.0]), is_positive_definite=True), u
            ).log_abs_determinant(),
            [1],
        ),
        cases._rand(12, (3, 2), np.float64),
    ),
    "tridiag_solve": (
        lambda d: L.LinearOperatorTridiag(d).solve(RHS),
        cases._tridiag(13, (3, 3), np.float64),
    ),
    "block_diag_matmul_adjoint": (
        lambda m: L.LinearOperatorBlockDiag(
            [L.LinearOperatorFullMatrix(m), L.LinearOperatorIdentity(1, dtype=tf.float64)]
        ).matmul(RHS, adjoint=True),
        cases._rand(14, (2, 2), np.float64),
    ),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradients_finite_differences(name):
    make, value = GRADIENT_CASES[name]
    assert _grad_error(make, value) < 1e-6


def test_linalg_adjoint_conjugates():
    a = cases._rand(1, (2, 3, 2), np.complex64)
    with tf.Graph().as_default(), tf.Session() as sess:
        got, got_t, op_adj = sess.run(
            [
                tf.linalg.adjoint(a),
                tf.matrix_transpose(a, conjugate=True),
                tf.linalg.adjoint(L.LinearOperatorFullMatrix(a)).to_dense(),
            ]
        )
    want = np.conj(np.swapaxes(a, -1, -2))
    for g in (got, got_t, op_adj):
        np.testing.assert_array_equal(g, want)


def test_circulant_assert_hermitian_spectrum():
    kernel = np.array([3.0, 1.0, -0.5, 0.25])
    with tf.Graph().as_default(), tf.Session() as sess:
        good = L.LinearOperatorCirculant(np.fft.fft(kernel), input_output_dtype=tf.float64)
        bad = L.LinearOperatorCirculant(np.fft.fft(kernel) + 0.5j)
        sess.run(good.assert_hermitian_spectrum())
        np.testing.assert_allclose(sess.run(good.convolution_kernel()), kernel, atol=1e-12)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(bad.assert_hermitian_spectrum())


def test_low_rank_update_assert_self_adjoint():
    u = cases._rand(1, (3, 2), np.float64)
    with tf.Graph().as_default(), tf.Session() as sess:
        base = L.LinearOperatorDiag(np.array([1.0, 2.0, 3.0]))
        symmetric = L.LinearOperatorLowRankUpdate(base, u, diag_update=np.array([2.0, 0.5]), v=u)
        sess.run(symmetric.assert_self_adjoint())
        skew = L.LinearOperatorLowRankUpdate(base, u, v=u[::-1].copy())
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(skew.assert_self_adjoint())


class UserTridiagonal(L.LinearOperator):
    """A user's operator, as TF's docs write one: only _shape, _shape_tensor and
    _matmul; the base class supplies the rest (to_dense, solve, determinant...)."""

    def __init__(self, d):
        self._d = tf.convert_to_tensor(d)
        super().__init__(dtype=self._d.dtype, is_non_singular=True)

    def _shape(self):
        n = self._d.shape[-1]
        return tf.TensorShape([n, n])

    def _shape_tensor(self):
        n = tf.shape(self._d)[-1]
        return tf.stack([n, n])

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = tf.linalg.adjoint(x) if adjoint_arg else x
        # d on the diagonal, ones just above it (below it for the adjoint)
        shifted = tf.concat([x[1:], tf.zeros_like(x[:1])], 0)
        if adjoint:
            shifted = tf.concat([tf.zeros_like(x[:1]), x[:-1]], 0)
        return self._d[:, None] * x + shifted


def test_user_subclass_gets_the_defaults():
    d = np.array([2.0, 3.0, 4.0])
    dense = np.diag(d) + np.diag([1.0, 1.0], 1)
    rhs = cases._rand(3, (3, 2), np.float64)
    with tf.Graph().as_default(), tf.Session() as sess:
        op = UserTridiagonal(d)
        got = sess.run(
            [op.to_dense(), op.solve(rhs), op.solve(rhs, adjoint=True), op.determinant()]
        )
        got.append(sess.run(op.H.matmul(rhs)))
    np.testing.assert_allclose(got[0], dense)
    np.testing.assert_allclose(got[1], np.linalg.solve(dense, rhs))
    np.testing.assert_allclose(got[2], np.linalg.solve(dense.T, rhs))
    np.testing.assert_allclose(got[3], np.prod(d))
    np.testing.assert_allclose(got[4], dense.T @ rhs)


def test_abstract_operator_cannot_be_built():
    class NoMatmul(L.LinearOperator):
        def _shape(self):
            return tf.TensorShape([2, 2])

    with pytest.raises(TypeError, match="abstract"):
        NoMatmul(dtype=tf.float32)
