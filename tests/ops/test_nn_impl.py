"""nn_impl: cross-entropies, l2_loss/l2_normalize, moments, batch norms, dropout,
embedding_lookup, top_k, in_top_k — against NumPy, TF's numbers for fused_batch_norm
(tests/fixtures/nn_impl_tf.json) and finite-difference gradients in float64."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import nn_impl
from asyncflow.registry import get_op_def
from asyncflow.session import Session

FIXTURES = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "nn_impl_tf.json").read_text()
)
_RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _needs_grads(*op_types):
    for t in op_types:
        d = get_op_def(t)
        assert d.grad_fn is not None or d.not_differentiable, f"{t} has no gradient"


def _grad_error(x_vals, y_fn):
    from asyncflow import test_util

    xs = [af.constant(v) for v in x_vals]
    y = y_fn(*xs)
    with Session():
        return test_util.compute_gradient_error(
            xs, [v.shape for v in x_vals], y, y.shape.as_list(), x_init_value=x_vals
        )


def _log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _dist(shape, axis=-1):
    p = _RNG.uniform(0.1, 1, shape)
    return p / p.sum(axis=axis, keepdims=True)


# -- cross-entropies -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((2, 3, 4), -1), ((3, 4, 2), 1), ((5,), 0)])
def test_softmax_cross_entropy(shape, axis, dtype):
    logits, labels = _RNG.uniform(-5, 5, shape), _dist(shape, axis)
    ref = -(labels * _log_softmax(logits, axis)).sum(axis=axis)
    v2 = nn_impl.softmax_cross_entropy_with_logits_v2(
        labels.astype(dtype), logits.astype(dtype), axis=axis
    )
    v1 = nn_impl.softmax_cross_entropy_with_logits(
        labels=labels.astype(dtype), logits=logits.astype(dtype), dim=axis
    )
    assert v2.shape.as_list() == list(ref.shape) and v2.dtype == af.as_dtype(dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    for out in _run([v1, v2]):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def test_cross_entropy_positional_arguments_are_labels_then_logits():
    """TF 2.21's tf.compat.v1 dropped TF 1.x's `_sentinel`: a positional call means
    (labels, logits) (the nlintz 04_modern_net tutorial calls xent(py_x, Y)).  Values
    recorded from TF 2.21 for these inputs; a variable reached only through the labels
    gets no gradient, so minimize raises ValueError as TF does."""
    lab = np.array([[0.2, 0.8, 0.0], [1, 0, 0]], np.float32)
    log = np.array([[1.0, 2, 3], [0, -1, 2]], np.float32)
    soft = nn_impl.softmax_cross_entropy_with_logits(lab, log)
    sparse = nn_impl.sparse_softmax_cross_entropy_with_logits(np.array([2, 0]), log)
    sig = nn_impl.sigmoid_cross_entropy_with_logits(lab, log)
    sig_kw = nn_impl.sigmoid_cross_entropy_with_logits(labels=lab, logits=log)
    got = _run([soft, sparse, sig, sig_kw])
    np.testing.assert_allclose(got[0], [1.6076059, 2.169846], rtol=1e-6)
    np.testing.assert_allclose(got[1], [0.40760595, 2.169846], rtol=1e-6)
    np.testing.assert_array_equal(got[2], got[3])
    with pytest.raises(TypeError):
        nn_impl.softmax_cross_entropy_with_logits(lab, log, -1, None, -1, 5)
    with af.Graph().as_default():
        w = af.Variable(log)
        loss = af.reduce_sum(nn_impl.softmax_cross_entropy_with_logits(w, lab))
        with pytest.raises(ValueError, match="No gradients provided"):
            af.train.GradientDescentOptimizer(0.1).minimize(loss)


def test_softmax_cross_entropy_casts_labels_to_the_logits_dtype():
    """TF casts labels of another dtype to the logits' (tf.data of NumPy one-hot labels
    gives float64 labels beside float32 logits: aymericdamien's tensorflow_dataset_api).
    Values and gradient recorded from TF 2.21 for these inputs."""
    lab64 = np.array([[0.25, 0.75, 0.0], [1, 0, 0]])
    logv = np.array([[1.0, 2, 3], [0, -1, 2]], np.float32)
    g = af.placeholder(af.float32, [None, 3])
    a = nn_impl.softmax_cross_entropy_with_logits(labels=af.constant(lab64), logits=g)
    b = nn_impl.softmax_cross_entropy_with_logits_v2(
        labels=af.constant([[0, 1, 0], [1, 0, 0]]), logits=g
    )
    (grad,) = af.gradients(af.reduce_sum(a), [g])
    assert a.dtype == af.float32 and b.dtype == af.float32
    got_a, got_b, got_g = _run([a, b, grad], {g: logv})
    np.testing.assert_allclose(got_a, [1.6576059, 2.169846], rtol=1e-6)
    np.testing.assert_allclose(got_b, [1.4076059, 2.169846], rtol=1e-6)
    np.testing.assert_allclose(
        got_g,
        [[-0.15996942, -0.50527155, 0.66524094], [-0.8858048, 0.04201007, 0.8437947]],
        rtol=1e-5,
        atol=1e-7,
    )


def test_softmax_cross_entropy_errors():
    with pytest.raises(ValueError, match="incompatible"):
        nn_impl.softmax_cross_entropy_with_logits_v2(np.zeros((2, 3)), np.zeros((2, 4)))
    a, b = af.placeholder(af.float32, [None, None]), af.placeholder(af.float32, [None, None])
    loss = nn_impl.softmax_cross_entropy_with_logits_v2(a, b)
    with pytest.raises(errors.InvalidArgumentError, match="broadcastable"):
        _run(loss, {a: np.zeros((2, 3)), b: np.zeros((2, 4))})


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_sparse_softmax_cross_entropy(shape, label_dtype):
    logits = _RNG.uniform(-5, 5, shape).astype(np.float32)
    labels = _RNG.integers(0, shape[-1], shape[:-1]).astype(label_dtype)
    ref = -np.take_along_axis(_log_softmax(logits.astype(np.float64)), labels[..., None], -1)
    loss = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    assert loss.shape.as_list() == list(shape[:-1])
    np.testing.assert_allclose(_run(loss), ref[..., 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sparse_softmax_cross_entropy_backprop(dtype):
    logits = _RNG.uniform(-30, 30, (6, 7)).astype(dtype)
    labels = np.array([0, 6, 3, 3, 1, 5], np.int64)
    p = np.exp(_log_softmax(logits.astype(np.float64)))
    want = p.copy()
    want[np.arange(6), labels] -= 1
    x = af.constant(logits)
    loss = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x)
    (g,) = af.gradients(af.reduce_sum(loss), [x])
    got_loss, got_g = _run([loss, g])
    assert got_g.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got_g, want, rtol=tol, atol=tol)
    ref = -np.log(p[np.arange(6), labels])
    np.testing.assert_allclose(got_loss, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("classes", [0, 3])
def test_sparse_softmax_cross_entropy_of_an_empty_batch(classes):
    x = af.placeholder(af.float32, [None, None])
    labels = af.placeholder(af.int32, [None])
    loss = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x)
    (g,) = af.gradients(af.reduce_sum(loss), [x])
    got_loss, got_g = _run([loss, g], {x: np.zeros((0, classes)), labels: np.zeros(0)})
    assert got_loss.shape == (0,) and got_g.shape == (0, classes)


def test_sparse_softmax_cross_entropy_errors():
    with pytest.raises(ValueError, match="Rank mismatch"):
        nn_impl.sparse_softmax_cross_entropy_with_logits(labels=[[1]], logits=np.zeros((1, 3)))
    labels = af.placeholder(af.int32, [None])
    loss = nn_impl.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=np.zeros((2, 3), np.float32)
    )
    if af.test.is_gpu_available():
        # TF's GPU kernel does not check: NaN in the loss and gradient rows of bad labels.
        logits = af.placeholder(af.float32, [2, 3])
        loss = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        (g,) = af.gradients(af.reduce_sum(loss), [logits])
        zeros = np.zeros((2, 3), np.float32)
        got, grad = _run([loss, g], {labels: [0, 3], logits: zeros})
        assert np.isfinite(got[0]) and np.isnan(got[1])
        assert np.isfinite(grad[0]).all() and np.isnan(grad[1]).all()
        np.testing.assert_allclose(got[0], np.log(3), rtol=1e-6)
        got, grad = _run([loss, g], {labels: [-1, 0], logits: zeros})
        assert np.isnan(got[0]) and np.isfinite(got[1])
        return
    with pytest.raises(errors.InvalidArgumentError, match="label value of 3 .* \\[0, 3\\)"):
        _run(loss, {labels: [0, 3]})
    with pytest.raises(errors.InvalidArgumentError, match="label value of -1"):
        _run(loss, {labels: [-1, 0]})


def test_sigmoid_and_weighted_cross_entropy():
    x = np.array([-100.0, -3.0, -0.5, 0.0, 0.5, 3.0, 100.0])
    z = np.array([0.0, 1.0, 0.3, 1.0, 0.0, 0.7, 1.0])
    ref = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    q = 2.5
    wref = (1 - z) * x + (1 + (q - 1) * z) * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    s = nn_impl.sigmoid_cross_entropy_with_logits(labels=z, logits=x)
    w = nn_impl.weighted_cross_entropy_with_logits(labels=z, logits=x, pos_weight=q)
    w1 = nn_impl.weighted_cross_entropy_with_logits(targets=z, logits=x, pos_weight=q)
    sv, wv, w1v = _run([s, w, w1])
    np.testing.assert_allclose(sv, ref, rtol=1e-12)
    np.testing.assert_allclose(wv, wref, rtol=1e-12)
    np.testing.assert_allclose(w1v, wref, rtol=1e-12)
    assert s.op.name == "logistic_loss"
    with pytest.raises(ValueError, match="same shape"):
        nn_impl.sigmoid_cross_entropy_with_logits(labels=z[:3], logits=x)


def test_cross_entropy_gradients():
    logits, labels = _RNG.uniform(-3, 3, (3, 4)), _dist((3, 4))
    err = _grad_error(
        [logits, labels], lambda a, b: nn_impl.softmax_cross_entropy_with_logits_v2(b, a)
    )
    assert err < 1e-4
    ids = np.array([0, 3, 1])
    err = _grad_error(
        [logits],
        lambda a: nn_impl.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=a),
    )
    assert err < 1e-4


def test_v1_cross_entropy_stops_label_gradient():
    from asyncflow.gradients import gradients

    logits, labels = af.constant(np.zeros((2, 3))), af.constant(_dist((2, 3)))
    v1 = nn_impl.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    v2 = nn_impl.softmax_cross_entropy_with_logits_v2(labels, logits)
    assert gradients(v1, labels)[0] is None
    assert gradients(v2, labels)[0] is not None


def test_cross_entropy_second_order():
    _needs_grads("Mul", "Sum", "Sub", "ExpandDims", "Neg")
    from asyncflow.gradients import gradients

    logits, labels = _RNG.uniform(-3, 3, (2, 4)), _dist((2, 4))

    def first(a):
        return gradients(nn_impl.softmax_cross_entropy_with_logits_v2(labels, a), a)[0]

    assert _grad_error([logits], first) < 1e-4


def test_composite_losses_gradients():
    _needs_grads("Mul", "Add", "Sub", "Select", "Log1p", "Exp", "Neg", "Abs", "Relu")
    x, z = _RNG.uniform(-3, 3, (3, 2)), _RNG.uniform(0, 1, (3, 2))
    assert _grad_error([x], lambda a: nn_impl.sigmoid_cross_entropy_with_logits(
        labels=z, logits=a)) < 1e-4  # fmt: skip
    assert _grad_error([x], lambda a: nn_impl.weighted_cross_entropy_with_logits(
        labels=z, logits=a, pos_weight=3.0)) < 1e-4  # fmt: skip


# -- l2, moments, batch norm ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_l2_loss(dtype):
    x = _RNG.uniform(-2, 2, (3, 4)).astype(dtype)
    out = _run(nn_impl.l2_loss(x))
    assert out.dtype == dtype and np.shape(out) == ()
    np.testing.assert_allclose(out, (x.astype(np.float64) ** 2).sum() / 2, rtol=2e-3)
    assert _grad_error([x.astype(np.float64)], nn_impl.l2_loss) < 1e-4


@pytest.mark.parametrize("axis", [0, 1, [0, 1], None])
def test_l2_normalize(axis):
    x = _RNG.uniform(-2, 2, (3, 4))
    ax = tuple(axis) if isinstance(axis, list) else axis
    ref = x / np.sqrt(np.maximum((x**2).sum(axis=ax, keepdims=True), 1e-12))
    np.testing.assert_allclose(_run(nn_impl.l2_normalize(x, axis)), ref, rtol=1e-12)
    np.testing.assert_allclose(_run(nn_impl.l2_normalize(np.zeros(3), 0)), np.zeros(3))


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("axes", [[0], [0, 1, 2], [1, 2]])
def test_moments(axes, keep):
    x = _RNG.uniform(-2, 2, (4, 3, 2, 5))
    mean, var = nn_impl.moments(x, axes, keepdims=keep)
    mv, vv = _run([mean, var])
    np.testing.assert_allclose(mv, x.mean(axis=tuple(axes), keepdims=keep), rtol=1e-12)
    np.testing.assert_allclose(vv, x.var(axis=tuple(axes), keepdims=keep), rtol=1e-10)
    assert mean.op.name.startswith("moments")
    m16, v16 = _run(nn_impl.moments(x.astype(np.float16), axes))
    assert m16.dtype == np.float16 and v16.dtype == np.float16


def test_batch_normalization():
    x = _RNG.uniform(-2, 2, (4, 3))
    m, v, o, s = x.mean(0), x.var(0), _RNG.uniform(size=3), _RNG.uniform(size=3)
    ref = (x - m) / np.sqrt(v + 1e-3) * s + o
    out = _run(nn_impl.batch_normalization(x, m, v, o, s, 1e-3))
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    out = _run(nn_impl.batch_normalization(x, m, v, None, None, 1e-3))
    np.testing.assert_allclose(out, (x - m) / np.sqrt(v + 1e-3), rtol=1e-12)


@pytest.mark.parametrize("name", [c["name"] for c in FIXTURES])
def test_fused_batch_norm_against_tf(name):
    c = next(c for c in FIXTURES if c["name"] == name)
    f32 = {k: np.asarray(c[k], np.float32) for k in ("x", "scale", "offset", "mean", "variance")}
    x, scale, offset = af.constant(f32["x"]), af.constant(f32["scale"]), af.constant(f32["offset"])
    kw = {} if c["is_training"] else {"mean": f32["mean"], "variance": f32["variance"]}
    y, bm, bv = nn_impl.fused_batch_norm(
        x, scale, offset, epsilon=0.001, data_format=c["data_format"],
        is_training=c["is_training"], **kw,
    )  # fmt: skip
    assert y.op.type == "FusedBatchNormV3" and y.shape.as_list() == list(f32["x"].shape)
    from asyncflow.gradients import gradients

    grads = gradients(y, [x, scale, offset], grad_ys=np.asarray(c["dy"], np.float32))
    got = _run([y, bm, bv, *grads])
    for key, val in zip(["y", "batch_mean", "batch_variance", "dx", "dscale", "doffset"], got):
        np.testing.assert_allclose(val, c[key], rtol=2e-4, atol=2e-4, err_msg=key)


def test_fused_batch_norm_gradients_float64_inputs():
    x = _RNG.uniform(-2, 2, (2, 3, 2, 3))
    scale, offset = _RNG.uniform(0.5, 1.5, 3), _RNG.uniform(size=3)
    # the kernel computes in float32 (U is float32 as in TF), so the tolerance is looser
    for fmt in ("NHWC", "NCHW"):
        xin = x.transpose(0, 3, 1, 2).copy() if fmt == "NCHW" else x
        for training in (True, False):
            kw = {} if training else {"mean": np.ones(3, np.float32),
                                      "variance": np.full(3, 2.0, np.float32)}  # fmt: skip
            err = _grad_error(
                [xin], lambda a, kw=kw, fmt=fmt, training=training: nn_impl.fused_batch_norm(
                    a, scale, offset, data_format=fmt, is_training=training, **kw)[0],
            )  # fmt: skip
            assert err < 5e-3, (fmt, training, err)


def test_fused_batch_norm_errors():
    with pytest.raises(ValueError, match="is_training is False"):
        nn_impl.fused_batch_norm(np.zeros((1, 2, 2, 3), np.float32), np.ones(3), np.zeros(3),
                                 is_training=False)  # fmt: skip
    s = af.placeholder(af.float32)
    y = nn_impl.fused_batch_norm(np.zeros((1, 2, 2, 3), np.float32), s, np.zeros(3))[0]
    with pytest.raises(errors.InvalidArgumentError, match="scale must have"):
        _run(y, {s: np.ones(4)})


# -- dropout ------------------------------------------------------------------------------


def test_dropout():
    x = np.ones((200, 50), np.float32)
    y = nn_impl.dropout(x, keep_prob=0.75, seed=3)
    out = _run(y)
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert 0.7 < kept.mean() < 0.8
    out = _run(nn_impl.dropout(x, rate=0.5, noise_shape=[200, 1], seed=1))
    assert np.all((out == 0).all(axis=1) | (out == 2).all(axis=1))
    assert _run(nn_impl.dropout(x, rate=0.0)) is not None
    keep = af.placeholder(af.float32, [])
    np.testing.assert_array_equal(_run(nn_impl.dropout(x, keep_prob=keep), {keep: 1.0}), x)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(keep_prob=0.5, rate=0.5), "both"),
        (dict(), "rate"),
        (dict(rate=1.0), "range"),
        (dict(keep_prob=0.0), "range"),
    ],
)
def test_dropout_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nn_impl.dropout(np.ones(3, np.float32), **kwargs)
    with pytest.raises(ValueError, match="floating"):
        nn_impl.dropout(np.ones(3, np.int32), rate=0.5)


# -- embedding_lookup ----------------------------------------------------------------------


def _shards(table, n, strategy):
    if strategy == "mod":
        return [table[p::n] for p in range(n)]
    per, extra = divmod(len(table), n)
    sizes = [per + (p < extra) for p in range(n)]
    return np.split(table, np.cumsum(sizes)[:-1])


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_embedding_lookup(n, strategy):
    table = _RNG.uniform(-1, 1, (10, 4))
    ids = np.array([[0, 9, 4], [3, 3, 7]])
    params = _shards(table, n, strategy) if n > 1 else table
    out = nn_impl.embedding_lookup([af.constant(p) for p in params] if n > 1 else params, ids,
                                   partition_strategy=strategy)  # fmt: skip
    np.testing.assert_allclose(_run(out), table[ids], rtol=1e-12)


def test_embedding_lookup_max_norm_and_errors():
    table = np.array([[3.0, 4.0], [0.3, 0.4]])
    out = _run(nn_impl.embedding_lookup(table, [0, 1], max_norm=1.0))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-12)
    with pytest.raises(ValueError, match="partition strategy"):
        nn_impl.embedding_lookup(table, [0], partition_strategy="rr")
    with pytest.raises(ValueError, match="at least one"):
        nn_impl.embedding_lookup([], [0])
    ids = af.placeholder(af.int32, [None])
    if af.test.is_gpu_available():  # TF's GPU gather: zeros for an id out of range
        got = _run(nn_impl.embedding_lookup(table, ids), {ids: [2, 1]})
        np.testing.assert_array_equal(got, [[0.0, 0.0], table[1]])
        return
    with pytest.raises(errors.InvalidArgumentError):
        _run(nn_impl.embedding_lookup(table, ids), {ids: [2]})


def test_embedding_lookup_sharded_gradient():
    _needs_grads("Mul", "Add", "GatherV2", "Select", "Cast")
    table = _RNG.uniform(-1, 1, (7, 3))
    shards = _shards(table, 2, "div")
    err = _grad_error(shards, lambda a, b: nn_impl.embedding_lookup([a, b], [0, 6, 3, 3], "div"))
    assert err < 1e-4


# -- top_k, in_top_k ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.uint8])
def test_top_k(dtype):
    x = np.array([[3, 1, 3, 2, 5], [0, 0, 0, 1, 0]]).astype(dtype)
    v, i = nn_impl.top_k(x, k=3)
    assert v.shape.as_list() == [2, 3] and i.dtype == af.int32
    vv, iv = _run([v, i])
    np.testing.assert_array_equal(iv, [[4, 0, 2], [3, 0, 1]])
    np.testing.assert_array_equal(vv, np.take_along_axis(x, iv, 1))
    with pytest.raises(ValueError, match="last dimension >= k"):
        nn_impl.top_k(x, k=6)
    k = af.placeholder(af.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="at least k"):
        _run(nn_impl.top_k(x, k)[0], {k: 6})


def test_top_k_gradient():
    x = _RNG.permutation(12).reshape(3, 4).astype(np.float64)
    assert _grad_error([x], lambda a: nn_impl.top_k(a, 2)[0]) < 1e-4


def test_in_top_k():
    pred = np.array([[0.1, 0.5, 0.5, 0.2], [0.9, 0.1, 0.0, np.inf], [0.3, 0.2, np.nan, 0.1]],
                    np.float32)  # fmt: skip
    # TF answers False for a row holding any non-finite prediction (rows 1 and 2).
    for k, want in [(1, [True, False, False]), (2, [True, False, False])]:
        got = _run(nn_impl.in_top_k(pred, [2, 1, 0], k))
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_run(nn_impl.in_top_k(pred, [1, 3, 2], 3)), [True, False, False])
    np.testing.assert_array_equal(_run(nn_impl.in_top_k(pred, np.array([5, 0, -1]), 4)),
                                  [False, False, False])  # fmt: skip


def test_dropout_placeholder_keep_prob_keeps_static_shape():
    # Issue 18 item 7.  TF 2.21: dropout(x[?,10], keep_prob=placeholder()) has shape (?, 10),
    # so a later softmax_cross_entropy_with_logits sees known-rank logits; a keep_prob of
    # known non-scalar shape [3] raises ValueError "Shape (3,) must have rank 0".
    x = af.placeholder(af.float32, [None, 10])
    keep = af.placeholder(af.float32)
    y = nn_impl.dropout(x, keep)
    assert y.shape.as_list() == [None, 10]
    labels = af.placeholder(af.float32, [None, 10])
    loss = nn_impl.softmax_cross_entropy_with_logits(labels=labels, logits=y)
    assert loss.shape.as_list() == [None]
    xv = np.ones((2, 10), np.float32)
    np.testing.assert_array_equal(_run(y, {x: xv, keep: 1.0}), xv)
    with pytest.raises(ValueError, match="must have rank 0"):
        nn_impl.dropout(x, af.placeholder(af.float32, [3]))


def _xent_op(features, labels):
    return ops.apply_op("SoftmaxCrossEntropyWithLogits", [features, labels]).outputs


def test_xent_op_broadcasts_a_batch_of_one_as_tf():
    # TF 2.21 (gen_nn_ops.softmax_cross_entropy_with_logits): features [1, 4] against
    # labels [2, 4] -> loss [0.4401897, 1.9401896], backprop [2, 4]; [[1.]] vs [[1.], [1.]]
    # -> loss [0, 0].
    f = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    lab = np.array([[0, 0, 0, 1.0], [0, 0.5, 0.5, 0]], np.float32)
    loss, backprop = _xent_op(f, lab)
    assert loss.shape.as_list() == [2] and backprop.shape.as_list() == [2, 4]
    loss1, _ = _xent_op(np.float32([[1.0]]), np.float32([[1.0], [1.0]]))
    with Session() as sess:
        got_loss, got_bp, got1 = sess.run([loss, backprop, loss1])
    np.testing.assert_allclose(got_loss, [0.4401897, 1.9401896], rtol=1e-6)
    np.testing.assert_allclose(
        got_bp,
        [[0.0320586, 0.08714432, 0.23688284, -0.35608572],
         [0.0320586, -0.41285568, -0.26311716, 0.6439143]],
        rtol=1e-5,
    )  # fmt: skip
    assert got1.tolist() == [0.0, 0.0]


def test_xent_op_shape_errors_as_tf():
    # TF 2.21: rank 3 inputs -> ValueError "Shape must be broadcasted with rank 2, but is
    # rank 3"; [1, 4] vs [2, 3] -> "Dimensions must be equal, but are 4 and 3".
    with pytest.raises(ValueError, match="rank 2, but is rank 3"):
        _xent_op(np.ones((2, 1, 4), np.float32), np.ones((2, 1, 4), np.float32))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 4 and 3"):
        _xent_op(np.ones((1, 4), np.float32), np.ones((2, 3), np.float32))


def test_xent_with_zero_classes_and_unknown_rank():
    # TF 2.21: fed [2, 0] features and labels give loss [0, 0] and an empty backprop; the
    # nn function takes logits of unknown rank (flattening the outer dims at run time).
    p = af.placeholder(af.float32, [None, None])
    loss, backprop = _xent_op(p, p)
    x = af.placeholder(af.float32)
    y = af.placeholder(af.float32)
    nn_loss = nn_impl.softmax_cross_entropy_with_logits_v2(labels=y, logits=x)
    logits = np.array([[[1.0, 2.0], [3.0, 1.0]]], np.float32)
    labels = np.array([[[0.0, 1.0], [1.0, 0.0]]], np.float32)
    want = -(labels * (logits - np.log(np.exp(logits).sum(-1, keepdims=True)))).sum(-1)
    with Session() as sess:
        got_loss, got_bp = sess.run([loss, backprop], {p: np.zeros((2, 0), np.float32)})
        got = sess.run(nn_loss, {x: logits, y: labels})
    assert got_loss.tolist() == [0.0, 0.0] and got_bp.shape == (2, 0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.shape == (1, 2)


def test_xent_gradient_reduces_a_broadcast_batch():
    # d/dfeatures of sum(loss) for features [1, 4] broadcast against labels [2, 4] is the
    # batch sum of the backprops; checked against finite differences.
    from asyncflow.test_util import compute_gradient_error

    f = af.constant(np.array([[0.1, 0.4, -0.3, 0.2]]))
    lab = af.constant(np.array([[0, 0, 0, 1.0], [0, 0.5, 0.5, 0]]))
    loss = _xent_op(f, lab)[0]
    assert compute_gradient_error(f, [1, 4], loss, [2], delta=1e-5) < 1e-8


def test_sparse_xent_v2_takes_positional_labels_and_logits():
    # TF's nn_ops.sparse_softmax_cross_entropy_with_logits_v2(labels, logits): the same
    # loss as the TF1 function called with keywords.
    logits = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.array([1, 2], np.int32)
    v2 = nn_impl.sparse_softmax_cross_entropy_with_logits_v2(labels, logits)
    v1 = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    want = -np.log(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))[[0, 1], labels]
    with Session() as sess:
        got2, got1 = sess.run([v2, v1])
    np.testing.assert_allclose(got2, want, rtol=1e-6)
    np.testing.assert_array_equal(got1, got2)


def test_l2_normalize_complex():
    """TF normalizes a complex tensor by the norm of its real and imaginary parts."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    with ops.Graph().as_default(), Session() as sess:
        y = nn_impl.l2_normalize(x, 1)
        assert y.dtype == af.complex64
        got = sess.run(y)
    np.testing.assert_allclose(got, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-5)
