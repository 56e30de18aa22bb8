"""tf.nn's CTC: CTCLoss (and its gradient), the greedy and beam-search decoders,
ctc_loss_v2 and ctc_unique_labels, against TF 2.21's recorded results
(tests/fixtures/ctc_tf.json, from tests/fixtures/record_ctc_tf.py), against a
brute-force sum over every alignment, and against finite differences."""

import itertools
import json
import os

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.test_util import compute_gradient

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "ctc_tf.json")
with open(FIXTURE) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


def _of_kind(*kinds):
    return [pytest.param(c, id=n) for n, c in CASES.items() if c["kind"] in kinds]


def _sparse(c):
    return tf.SparseTensor(
        np.array(c["indices"], np.int64).reshape(-1, 2),
        np.array(c["values"], np.int32),
        np.array(c["shape"], np.int64),
    )


def _run(build):
    with tf.Graph().as_default():
        fetches = build()
        with tf.Session() as sess:
            return sess.run(fetches)


def _expect_error(c, build):
    exc = errors.OpError if c["error"] != "ValueError" else ValueError
    with pytest.raises(exc) as info:
        _run(build)
    assert type(info.value).__name__ == c["error"]
    assert c["message"] in str(info.value)


@pytest.mark.parametrize("c", _of_kind("loss"))
def test_ctc_loss_and_gradient_match_tf(c):
    x = np.array(c["x"], c["dtype"])

    def build():
        inp = tf.constant(x)
        loss = tf.nn.ctc_loss(_sparse(c), inp, np.array(c["seq_len"], np.int32), **c["flags"])
        weights = np.array(c["weights"], x.dtype)
        return loss, tf.gradients(tf.reduce_sum(loss * weights), inp)[0]

    if "error" in c:
        _expect_error(c, build)
        return
    loss, grad = _run(build)
    assert loss.dtype == x.dtype and grad.dtype == x.dtype
    np.testing.assert_allclose(loss, c["loss"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad, c["grad"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("c", _of_kind("loss_v2"))
def test_ctc_loss_v2_matches_tf(c):
    x = np.array(c["x"], np.float32)

    def build():
        inp = tf.constant(x)
        if c["dense"]:
            width = c["shape"][1]
            labels = np.zeros((len(c["rows"]), width), np.int32)
            for b, row in enumerate(c["rows"]):
                labels[b, : len(row)] = row
        else:
            labels = _sparse(c)
        loss = tf.nn.ctc_loss_v2(
            labels,
            inp,
            np.array([len(r) for r in c["rows"]], np.int32),
            np.array(c["seq_len"], np.int32),
            logits_time_major=False,
            **c["kw"],
        )
        return loss, tf.gradients(tf.reduce_sum(loss), inp)[0]

    if "error" in c:
        _expect_error(c, build)
        return
    loss, grad = _run(build)
    np.testing.assert_allclose(loss, c["loss"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad, c["grad"], rtol=1e-4, atol=1e-5)


def _check_decoded(got, c):
    decoded, log_prob = got
    assert len(decoded) == len(c["decoded"])
    for (indices, values, shape), want in zip(decoded, c["decoded"]):
        np.testing.assert_array_equal(indices, np.array(want["indices"]).reshape(-1, 2))
        np.testing.assert_array_equal(values, want["values"])
        np.testing.assert_array_equal(shape, want["shape"])
        assert indices.dtype == values.dtype == shape.dtype == np.int64
    np.testing.assert_allclose(log_prob, c["log_prob"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("c", _of_kind("greedy", "beam", "beam_v2"))
def test_decoders_match_tf(c):
    x = np.array(c["x"], np.float32)
    fn = {
        "greedy": tf.nn.ctc_greedy_decoder,
        "beam": tf.nn.ctc_beam_search_decoder,
        "beam_v2": tf.nn.ctc_beam_search_decoder_v2,
    }[c["kind"]]

    def build():
        decoded, log_prob = fn(tf.constant(x), np.array(c["seq_len"], np.int32), **c["kw"])
        return [(d.indices, d.values, d.dense_shape) for d in decoded], log_prob

    if "error" in c:
        _expect_error(c, build)
        return
    _check_decoded(_run(build), c)


def test_ctc_unique_labels_matches_tf():
    c = CASES["unique_labels"]
    y, idx = _run(lambda: tf.nn.ctc_unique_labels(np.array(c["labels"], np.int32)))
    assert str(y.dtype) == c["y_dtype"] and str(idx.dtype) == c["idx_dtype"]
    np.testing.assert_array_equal(y, c["y"])
    np.testing.assert_array_equal(idx, c["idx"])


# -- independent references ---------------------------------------------------------------


def _collapse(path, blank, merge):
    out, prev = [], None
    for c in path:
        if c != blank and not (merge and c == prev):
            out.append(c)
        prev = c
    return out


def _brute_force_loss(x, labels, merge):
    """-log of the summed probability of every frame-by-frame path that reads as
    `labels` (blank = last class): the CTC definition, without any recursion.  A path
    reads as its classes with blanks dropped and, when `merge`, runs of one class
    merged; without merging every frame of a class is one label of its own."""
    t_len, n_cls = x.shape
    logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    blank = n_cls - 1
    total = 0.0
    for path in itertools.product(range(n_cls), repeat=t_len):
        if _collapse(path, blank, merge) == list(labels):
            total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
    return -np.log(total)


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("labels", [[0], [1, 1], [0, 1], [2, 0, 2]])
def test_loss_is_the_sum_over_every_alignment(labels, merge):
    rng = np.random.RandomState(len(labels) + 7 * merge)
    x = rng.randn(6, 4)
    loss = _run(
        lambda: tf.nn.ctc_loss(
            tf.SparseTensor([[0, i] for i in range(len(labels))], labels, [1, len(labels)]),
            tf.constant(x[:, None, :]),
            [6],
            ctc_merge_repeated=merge,
        )
    )
    np.testing.assert_allclose(loss[0], _brute_force_loss(x, labels, merge), rtol=1e-10)


def test_gradient_matches_finite_differences():
    rng = np.random.RandomState(3)
    x0 = rng.randn(7, 2, 5)
    lengths = np.array([7, 5], np.int32)
    w = np.array([0.7, 1.3])
    with tf.Graph().as_default():
        labels = tf.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], [1, 1, 3, 2, 0], [2, 3])
        xp = tf.placeholder(tf.float64, [7, 2, 5])
        loss = tf.reduce_sum(tf.nn.ctc_loss(labels, xp, lengths) * w)
        g, num = compute_gradient(xp, x0.shape, loss, [], x_init_value=x0, delta=1e-6)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-7)
    assert not g.reshape(x0.shape)[5:, 1].any()  # past the second entry's length: none


def test_batch_major_inputs_equal_time_major():
    rng = np.random.RandomState(4)
    x = rng.randn(5, 3, 4).astype(np.float32)

    def build():
        labels = tf.SparseTensor([[0, 0], [1, 0], [1, 1], [2, 0]], [1, 0, 2, 2], [3, 2])
        a = tf.nn.ctc_loss(labels, tf.constant(x), [5, 4, 3])
        b = tf.nn.ctc_loss(labels, tf.constant(x.transpose(1, 0, 2)), [5, 4, 3], time_major=False)
        return a, b

    a, b = _run(build)
    np.testing.assert_array_equal(a, b)


def test_second_derivative_is_refused_as_tf():
    with tf.Graph().as_default():
        x = tf.constant(np.random.RandomState(0).randn(4, 1, 3))
        loss = tf.nn.ctc_loss(tf.SparseTensor([[0, 0]], [1], [1, 1]), x, [4])
        g = tf.gradients(loss, x)[0]
        with pytest.raises(LookupError, match="second derivative of ctc_loss"):
            tf.gradients(g, x)


def test_labels_must_be_sparse():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="SparseTensor"):
            tf.nn.ctc_loss([[1, 2]], tf.zeros([3, 1, 4]), [3])


def test_no_valid_path_gives_inf_and_the_softmax_gradient():
    x = np.zeros((3, 1, 3))
    x[:, 0, 0] = -np.inf  # the label's class can never be emitted

    def build():
        inp = tf.constant(x)
        loss = tf.nn.ctc_loss(tf.SparseTensor([[0, 0]], [0], [1, 1]), inp, [3])
        return loss, tf.gradients(loss, inp)[0]

    loss, grad = _run(build)
    assert np.isinf(loss[0]) and loss[0] > 0
    np.testing.assert_allclose(grad[:, 0], [[0.0, 0.5, 0.5]] * 3)
