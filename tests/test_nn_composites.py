"""The tf.nn functions built from existing ops, against NumPy, with finite-difference
gradients where they differentiate."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import test_util

RNG = np.random.RandomState(0)
X = RNG.randn(2, 3, 4, 6)


def fd(graph, fn, x0):
    x = af.placeholder(af.float64, x0.shape)
    y = fn(x)
    th, nu = test_util.compute_gradient(x, list(x0.shape), y, y.shape.as_list(), x_init_value=x0)
    np.testing.assert_allclose(th, nu, atol=1e-5)


@pytest.mark.parametrize(
    "name,fn,ref",
    [
        ("leaky_relu", lambda x: af.nn.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
        (
            "selu",
            af.nn.selu,
            lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
        ),
        ("swish", af.nn.swish, lambda x: x / (1 + np.exp(-x))),
        ("crelu", af.nn.crelu, lambda x: np.maximum(np.concatenate([x, -x], -1), 0)),
    ],
)
def test_activations(graph, name, fn, ref):
    with af.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(fn(af.constant(X))), ref(X), rtol=1e-6)
    fd(graph, fn, X[0, :, :2, :3] + 0.05)


def test_lrn_like_numpy_and_gradient(graph):
    def ref(x, r=2, bias=1.0, alpha=0.5, beta=0.75):
        sq = np.pad(x * x, [(0, 0)] * 3 + [(r, r)])
        total = sum(sq[..., i : i + x.shape[-1]] for i in range(2 * r + 1))
        return x / (bias + alpha * total) ** beta

    # (op LRN: float32, half or bfloat16 as TF's; its gradient by finite differences is
    # in tests/ops/test_tf_ops_more.py)
    fn = lambda x: af.nn.lrn(x, 2, 1.0, 0.5, 0.75)  # noqa: E731
    x32 = X.astype(np.float32)
    with af.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(fn(af.constant(x32))), ref(X), rtol=2e-6, atol=1e-6)
    with pytest.raises(TypeError):
        fn(af.constant(X))


def test_space_depth_round_trip_like_numpy(sess):
    x = np.arange(2 * 4 * 6 * 3).reshape(2, 4, 6, 3).astype(np.float32)
    y = sess.run(af.nn.space_to_depth(x, 2))
    assert y.shape == (2, 2, 3, 12)
    # TF: depth index (i * block + j) * channels + k holds x[2h + i, 2w + j, k]
    np.testing.assert_array_equal(y[1, 1, 2, (1 * 2 + 0) * 3 + 2], x[1, 3, 4, 2])
    np.testing.assert_array_equal(sess.run(af.nn.depth_to_space(y, 2)), x)


def test_statistics(sess):
    x = RNG.randn(5, 3)
    w = RNG.rand(5, 1)
    cnt, m, v, _ = af.nn.sufficient_statistics(x, [0])
    mean, var = af.nn.normalize_moments(cnt, m, v, None)
    got_mean, got_var = sess.run([mean, var])
    np.testing.assert_allclose(got_mean, x.mean(0)) and np.testing.assert_allclose(
        got_var, x.var(0)
    )
    wm, wv = sess.run(af.nn.weighted_moments(x, [0], w))
    ref_m = (w * x).sum(0) / w.sum()
    np.testing.assert_allclose(wm, ref_m)
    np.testing.assert_allclose(wv, (w * (x - ref_m) ** 2).sum(0) / w.sum())
    assert sess.run(af.nn.zero_fraction([0.0, 1.0, 0.0, 2.0])) == 0.5


def test_log_poisson_loss(sess):
    t = np.array([0.0, 0.5, 2.0, 5.0])
    li = np.array([0.1, -0.3, 0.7, 1.2])
    base = np.exp(li) - li * t
    np.testing.assert_allclose(sess.run(af.nn.log_poisson_loss(t, li)), base)
    full = base + np.where(
        t > 1,
        t * np.log(np.maximum(t, 1e-9)) - t + 0.5 * np.log(2 * np.pi * np.maximum(t, 1e-9)),
        0,
    )
    np.testing.assert_allclose(sess.run(af.nn.log_poisson_loss(t, li, True)), full)


def test_pool1d_conv1d_transpose_atrous(sess):
    x = RNG.randn(2, 7, 3).astype(np.float32)
    np.testing.assert_allclose(
        sess.run(af.nn.max_pool1d(x, 2, 2, "VALID")), x[:, :6].reshape(2, 3, 2, 3).max(2)
    )
    f = RNG.randn(3, 4, 3).astype(np.float32)  # [k, out, in]
    y = sess.run(af.nn.conv1d_transpose(x, f, [2, 9, 4], 1, "VALID"))
    want = np.zeros((2, 9, 4), np.float32)
    for i in range(7):
        want[:, i : i + 3] += np.einsum("nc,koc->nko", x[:, i], f)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    img = RNG.randn(1, 7, 7, 2).astype(np.float32)
    k = RNG.randn(2, 2, 2, 3).astype(np.float32)
    dil = np.zeros((3, 3, 2, 3), np.float32)
    dil[::2, ::2] = k
    np.testing.assert_allclose(
        sess.run(af.nn.atrous_conv2d(img, k, 2, "VALID")),
        sess.run(af.nn.conv2d(img, dil, [1, 1, 1, 1], "VALID")),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse(sess, combiner):
    params = RNG.randn(6, 3)
    ids = af.SparseTensor([[0, 0], [0, 1], [2, 0]], np.array([1, 4, 1], np.int64), [3, 2])
    w = af.SparseTensor([[0, 0], [0, 1], [2, 0]], [2.0, 0.5, 1.0], [3, 2])
    got = sess.run(af.nn.embedding_lookup_sparse(af.constant(params), ids, w, combiner=combiner))
    row0 = 2.0 * params[1] + 0.5 * params[4]
    norm = {"sum": 1.0, "mean": 2.5, "sqrtn": np.sqrt(4.25)}[combiner]
    np.testing.assert_allclose(got[0], row0 / norm)
    np.testing.assert_allclose(got[1], 0.0)
    np.testing.assert_allclose(got[2], params[1] / (1.0 if combiner == "sum" else 1.0))


def test_conv_transpose_front_end(sess):
    x = RNG.randn(1, 3, 3, 2).astype(np.float32)
    f = RNG.randn(2, 2, 4, 2).astype(np.float32)
    a = af.nn.conv_transpose(x, f, [1, 6, 6, 4], 2)
    b = af.nn.conv2d_transpose(x, f, [1, 6, 6, 4], [1, 2, 2, 1], "SAME")
    np.testing.assert_allclose(*sess.run([a, b]))
    x1 = RNG.randn(1, 4, 2).astype(np.float32)
    f1 = RNG.randn(3, 5, 2).astype(np.float32)
    np.testing.assert_allclose(
        *sess.run(
            [
                af.nn.conv_transpose(x1, f1, [1, 6, 5], 1, "VALID"),
                af.nn.conv1d_transpose(x1, f1, [1, 6, 5], 1, "VALID"),
            ]
        )
    )
    assert af.nn.depthwise_conv2d_backprop_input is af.nn.depthwise_conv2d_native_backprop_input
