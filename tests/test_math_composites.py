"""Top-level math names built from existing ops, against NumPy; finite differences for
the differentiable ones."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import test_util

RNG = np.random.RandomState(0)
A = RNG.randn(3, 4)


@pytest.mark.parametrize(
    "fn,ref",
    [
        (lambda x: af.log_sigmoid(x), lambda x: -np.log1p(np.exp(-x))),
        (lambda x: af.reduce_logsumexp(x, 1), lambda x: np.log(np.exp(x).sum(1))),
        (lambda x: af.reduce_logsumexp(x), lambda x: np.log(np.exp(x).sum())),
        (lambda x: af.reduce_variance(x, 0), lambda x: x.var(0)),
        (lambda x: af.reduce_std(x, 1, keepdims=True), lambda x: x.std(1, keepdims=True)),
        (lambda x: af.cumsum(x, 1), lambda x: np.cumsum(x, 1)),
        (
            lambda x: af.cumsum(x, 0, exclusive=True, reverse=True),
            lambda x: np.flip(np.cumsum(np.flip(x, 0), 0), 0) - x,
        ),
        (lambda x: af.cumprod(x, 1), lambda x: np.cumprod(x, 1)),
        (lambda x: af.cumprod(x, 1, exclusive=True), lambda x: np.cumprod(x, 1) / x),
        (lambda x: af.tensordot(x, af.constant(A.T), 1), lambda x: x @ A.T),
        (lambda x: af.tensordot(x, af.constant(A), [[0, 1], [0, 1]]), lambda x: (x * A).sum()),
        (lambda x: af.trace(af.matmul(x, af.constant(A.T))), lambda x: np.trace(x @ A.T)),
        (lambda x: af.matrix_transpose(x), lambda x: x.T),
        (
            lambda x: af.div_no_nan(x, af.constant([1.0, 0.0, 2.0, 0.0], af.float64)),
            lambda x: np.where([1, 0, 1, 0], x / np.array([1.0, 1.0, 2.0, 1.0]), 0.0),
        ),
        (lambda x: af.broadcast_to(x[:1], [2, 3, 4]), lambda x: np.broadcast_to(x[:1], (2, 3, 4))),
        (
            lambda x: af.where_v2(x > 0, x, af.constant([0.0, 1.0, 2.0, 3.0], af.float64)),
            lambda x: np.where(x > 0, x, [0.0, 1.0, 2.0, 3.0]),
        ),
    ],
)
def test_values_and_gradients(graph, fn, ref):
    x = af.placeholder(af.float64, A.shape)
    y = fn(x)
    with af.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(y, {x: A}), ref(A), rtol=1e-10, atol=1e-12)
    th, nu = test_util.compute_gradient(x, list(A.shape), y, y.shape.as_list(), x_init_value=A)
    np.testing.assert_allclose(th, nu, atol=1e-6)


def test_counting_and_grids(sess):
    v = np.array([0.0, 0.1, 0.5, 0.99, 1.0, -3.0, 7.0])
    got = sess.run(af.histogram_fixed_width(v, [0.0, 1.0], nbins=4))
    np.testing.assert_array_equal(got, [3, 0, 1, 3])  # out-of-range values clamp to the ends
    np.testing.assert_array_equal(
        sess.run(af.bincount([1, 1, 3], minlength=5)), np.bincount([1, 1, 3], minlength=5)
    )
    np.testing.assert_allclose(
        sess.run(af.bincount([0, 2, 2], weights=[0.5, 1.0, 2.0])), [0.5, 0.0, 3.0]
    )
    assert sess.run(af.count_nonzero([[0, 1, 2], [0, 0, 3]])) == 3
    np.testing.assert_array_equal(sess.run(af.count_nonzero([[0, 1, 2], [0, 0, 3]], 1)), [2, 1])
    xs, ys = sess.run(af.meshgrid([1, 2, 3], [4, 5]))
    wx, wy = np.meshgrid([1, 2, 3], [4, 5])
    np.testing.assert_array_equal(xs, wx) and np.testing.assert_array_equal(ys, wy)
    np.testing.assert_array_equal(sess.run(af.eye(2, 3)), np.eye(2, 3))
    assert sess.run(af.scalar_mul(2, af.constant([1.5]))).tolist() == [3.0]


def test_where_v2_is_select_v2_and_broadcasts_all_three(graph):
    # TF 2.21: where_v2 is one SelectV2 that broadcasts condition, x and y together (a
    # [3, 5, 1, 1] condition against [7, 11] branches gives [3, 5, 7, 11]); an integer
    # NumPy condition converts to bool; only one of x, y given is a ValueError.
    rng = np.random.RandomState(0)
    f = rng.normal(0, 1, (3, 5, 1, 1))
    out = af.where_v2(af.constant(f) < 0, np.zeros((7, 11)), np.ones((7, 11)))
    assert out.op.type == "SelectV2" and out.shape.as_list() == [3, 5, 7, 11]
    pred = np.array([1, 0, 0]).reshape((3, 1))
    x, y = rng.randn(3, 4), rng.randn(3, 4)
    by_int = af.where_v2(pred, x, y)
    with af.Session(graph=graph) as s:
        got, got_int = s.run([out, by_int])
    np.testing.assert_array_equal(got, np.where(f < 0, np.zeros((7, 11)), np.ones((7, 11))))
    np.testing.assert_array_equal(got_int, np.where(pred, x, y))
    with pytest.raises(ValueError, match="both be non-None"):
        af.where_v2([False, True], [1, 2], None)


def test_select_v2_gradient_sums_over_broadcast_axes(graph):
    # x [3, 1] broadcast against y [1, 4] by a [3, 4] condition: each input's gradient is
    # its selected share summed back to its own shape (finite differences).
    cond = af.constant(np.arange(12).reshape(3, 4) % 3 == 0)
    x = af.placeholder(af.float64, [3, 1])
    y = af.placeholder(af.float64, [1, 4])
    out = af.where_v2(cond, x * x, y * 3.0)
    for v, shape in ((x, [3, 1]), (y, [1, 4])):
        other = y if v is x else x
        init = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
        feed = {other: np.ones(other.shape.as_list())}
        th, nu = test_util.compute_gradient(
            v, shape, out, [3, 4], x_init_value=init, extra_feed_dict=feed
        )
        np.testing.assert_allclose(th, nu, atol=1e-6)


def test_cumsum_cumprod_of_a_scalar_fail_as_tf(sess):
    # TF's ScanOp needs an axis inside the rank: a 0-d scan fails when run (TF 2.21).
    x = af.placeholder(af.float32, [])
    y = x * 1.0
    for scan in (af.cumsum, af.cumprod):
        with pytest.raises(af.errors.InvalidArgumentError, match="Expected scan axis"):
            sess.run(scan(y, 0), {x: 3.0})
