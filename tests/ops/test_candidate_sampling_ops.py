"""Candidate samplers and sampled losses: NumPy references, values recorded from TF 2.21
(tf.compat.v1 graph mode, given sampled_values so no draw is involved), and finite
differences for the gradients."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, test_util

# Recorded from TF 2.21 with the inputs of _case().
TF_NCE = {
    False: [9.526287078857422, 10.880613327026367, 8.613264083862305],
    True: [8.080652236938477, 9.552258491516113, 8.613264083862305],
}
TF_SSM = {
    False: [3.4694724082946777, 2.182857036590576, 2.623142719268799],
    True: [3.4081873893737793, 2.1338624954223633, 2.623142719268799],
}


def _case():
    rng = np.random.RandomState(0)
    w = rng.randn(10, 4).astype(np.float32) * 0.5
    b = rng.randn(10).astype(np.float32) * 0.1
    x = rng.randn(3, 4).astype(np.float32)
    labels = np.array([[1, 3], [0, 7], [2, 2]], np.int64)
    sampled = np.array([3, 5, 0, 9], np.int64)
    te = np.array([[0.3, 0.2], [0.5, 0.1], [0.25, 0.25]], np.float32)
    se = np.array([0.2, 0.15, 0.5, 0.05], np.float32)
    return w, b, x, labels, sampled, te, se


def _np_logits(w, b, x, labels, sampled, te, se, remove):
    true = np.einsum("bd,btd->bt", x, w[labels]) + b[labels] - np.log(te)
    samp = x @ w[sampled].T + b[sampled]
    if remove:
        hit = (labels[:, :, None] == sampled[None, None, :]).any(1)
        samp = samp + hit * np.finfo(np.float32).min
    samp = samp - np.log(se)
    return np.concatenate([true, samp], 1)


@pytest.mark.parametrize("remove", [False, True])
def test_nce_and_sampled_softmax_match_tf_and_numpy(sess, remove):
    w, b, x, labels, sampled, te, se = _case()
    sv = (af.constant(sampled), af.constant(te), af.constant(se))
    nce = af.nn.nce_loss(
        w, b, labels, x, 4, 10, num_true=2, sampled_values=sv, remove_accidental_hits=remove
    )
    ssm = af.nn.sampled_softmax_loss(
        w, b, labels, x, 4, 10, num_true=2, sampled_values=sv, remove_accidental_hits=remove
    )
    got_nce, got_ssm = sess.run([nce, ssm])
    np.testing.assert_allclose(got_nce, TF_NCE[remove], rtol=1e-5)
    np.testing.assert_allclose(got_ssm, TF_SSM[remove], rtol=1e-5)
    logits = _np_logits(w, b, x, labels, sampled, te, se, remove).astype(np.float64)
    target = np.concatenate([np.full((3, 2), 0.5), np.zeros((3, 4))], 1)
    sig = np.maximum(logits, 0) - logits * target + np.log1p(np.exp(-np.abs(logits)))
    np.testing.assert_allclose(got_nce, sig.sum(1), rtol=1e-5)
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    np.testing.assert_allclose(got_ssm, -(target * (logits - lse[:, None])).sum(1), rtol=1e-5)


@pytest.mark.parametrize("loss", ["nce_loss", "sampled_softmax_loss"])
def test_sampled_loss_gradients_finite_differences(graph, loss):
    w0, b0, x0, labels, sampled, te, se = _case()
    w = af.constant(w0.astype(np.float64))
    b = af.placeholder(af.float64, [10])
    x = af.placeholder(af.float64, [3, 4])
    sv = (
        af.constant(sampled),
        af.constant(te.astype(np.float64)),
        af.constant(se.astype(np.float64)),
    )
    y = getattr(af.nn, loss)(
        w, b, labels, x, 4, 10, num_true=2, sampled_values=sv, remove_accidental_hits=False
    )
    for t, shape, v in ((x, [3, 4], x0), (b, [10], b0)):
        feed = {b: b0.astype(np.float64), x: x0.astype(np.float64)}
        feed.pop(t)
        th, nu = test_util.compute_gradient(
            t, shape, y, [3], x_init_value=v.astype(np.float64), extra_feed_dict=feed
        )
        np.testing.assert_allclose(th, nu, atol=1e-6)


def test_sampled_weights_take_the_inputs_dtype_as_tf(graph):
    """TF casts the looked-up weights and biases to the inputs' dtype.  So nlintz's
    08_word2vec, which passes (inputs, labels) in TF 0.x's order, fails as on TF 2.21 with
    MatMul's shape error on the int32 "inputs", and float64 inputs beside float32 weights
    fail at the float32 expected counts (both messages recorded from TF 2.21)."""
    w = af.constant(np.arange(12, dtype=np.float32).reshape(6, 2) / 10)
    b = af.constant(np.arange(6, dtype=np.float32) / 10)
    embed = af.constant(np.ones((20, 2), np.float32))
    labels = af.placeholder(af.int32, [20, 1])
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 1 and 2"):
        af.nn.nce_loss(w, b, embed, labels, 15, 6)
    sv = (
        af.constant([0, 2, 5], af.int64),
        af.constant([[0.5], [0.5]]),
        af.constant([0.25, 0.25, 0.25]),
    )
    x64 = af.constant(np.array([[0.5, -1.0], [2.0, 0.25]]))
    lab = af.constant([[1], [4]], af.int64)
    with pytest.raises(TypeError, match="Input 'y' of 'Sub' Op has type float32"):
        af.nn.nce_loss(w, b, lab, x64, 3, 6, sampled_values=sv)


def test_compute_accidental_hits_recorded_from_tf(sess):
    _, _, _, labels, sampled, _, _ = _case()
    idx, ids, wts = sess.run(af.nn.compute_accidental_hits(labels, sampled, 2))
    assert idx.tolist() == [0, 1] and ids.tolist() == [0, 2]
    assert wts.tolist() == [np.finfo(np.float32).min] * 2


@pytest.mark.parametrize("unique", [True, False])
def test_log_uniform_sampler_distribution_and_expected_counts(sess, unique):
    true = np.array([[0], [5]], np.int64)
    s, te, se = af.nn.log_uniform_candidate_sampler(true, 1, 20, unique, 50, seed=7)
    draws = [sess.run([s, te, se]) for _ in range(200)]
    p = lambda k: (np.log(k + 2.0) - np.log(k + 1.0)) / np.log(51.0)  # noqa: E731
    for samp, t_exp, s_exp in draws[:5]:
        assert samp.shape == (20,) and samp.min() >= 0 and samp.max() < 50
        if unique:
            assert len(set(samp.tolist())) == 20
            # 1 - (1 - p)^tries: the same tries for every id of one draw
            tries = np.log1p(-s_exp[0]) / np.log1p(-p(samp[0]))
            np.testing.assert_allclose(s_exp, -np.expm1(tries * np.log1p(-p(samp))), rtol=1e-4)
            np.testing.assert_allclose(
                t_exp[:, 0], -np.expm1(tries * np.log1p(-p(true[:, 0]))), rtol=1e-4
            )
        else:
            np.testing.assert_allclose(s_exp, 20 * p(samp), rtol=1e-6)
    if not unique:
        counts = np.bincount(np.concatenate([d[0] for d in draws]), minlength=50)
        np.testing.assert_allclose(counts / counts.sum(), p(np.arange(50)), atol=0.01)


def test_uniform_fixed_unigram_and_all_samplers(sess):
    true = np.array([[1, 2]], np.int64)
    s, te, se = sess.run(af.nn.uniform_candidate_sampler(true, 2, 5, False, 10, seed=1))
    np.testing.assert_allclose(se, 0.5) and np.testing.assert_allclose(te, 0.5)
    fu = af.nn.fixed_unigram_candidate_sampler(true, 2, 1000, False, 3, unigrams=[1, 0, 3], seed=2)
    s, te, se = sess.run(fu)
    assert (s != 1).all()  # zero mass is never drawn
    np.testing.assert_allclose(te, [[0.0, 750.0]])
    s, te, se = sess.run(af.nn.all_candidate_sampler(true, 2, 4, True))
    assert s.tolist() == [0, 1, 2, 3] and te.tolist() == [[1, 1]]


def test_unique_sampler_needs_num_sampled_within_range(sess):
    s = af.nn.uniform_candidate_sampler(np.array([[0]], np.int64), 1, 5, True, 3)
    with pytest.raises(errors.InvalidArgumentError, match="Sampler's range is too small"):
        sess.run(s)


def test_samplers_reproduce_with_a_seed(graph):
    s = af.nn.log_uniform_candidate_sampler(np.array([[0]], np.int64), 1, 8, True, 100, seed=3)
    runs = []
    for _ in range(2):
        with af.Session(graph=graph) as sess:
            runs.append([sess.run(s[0]).tolist() for _ in range(3)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]
