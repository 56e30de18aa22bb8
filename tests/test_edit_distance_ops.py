"""tf.edit_distance (op EditDistance) against TF 2.21's recorded results
(tests/fixtures/edit_distance_tf.json, from tests/fixtures/record_edit_distance_tf.py)
and against a plain dynamic-programming Levenshtein distance."""

import json
import os

import numpy as np
import pytest

import asyncflow as tf

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "edit_distance_tf.json")
with open(FIXTURE) as _f:
    CASES = json.load(_f)["cases"]


def _sp(d):
    dtype = object if d["dtype"] == "string" else d["dtype"]
    values = [v.encode() for v in d["values"]] if dtype is object else d["values"]
    rank = len(d["shape"])
    return tf.SparseTensor(
        np.array(d["indices"], np.int64).reshape(-1, rank),
        np.array(values, dtype),
        np.array(d["shape"], np.int64),
    )


@pytest.mark.parametrize("c", [pytest.param(c, id=c["name"]) for c in CASES])
def test_edit_distance_matches_tf(c):
    with tf.Graph().as_default():
        if "error" in c:
            with pytest.raises(ValueError, match=c["message"]):
                tf.edit_distance(_sp(c["hyp"]), _sp(c["truth"]), c["normalize"])
            return
        out = tf.edit_distance(_sp(c["hyp"]), _sp(c["truth"]), c["normalize"])
        assert out.dtype == tf.float32
        assert out.shape.as_list() == list(np.shape(c["out"]))  # constant shapes: static
        with tf.Session() as sess:
            got = sess.run(out)
    np.testing.assert_allclose(got, c["out"], rtol=1e-6)


def _levenshtein(a, b):
    d = np.zeros((len(a) + 1, len(b) + 1), int)
    d[:, 0] = range(len(a) + 1)
    d[0, :] = range(len(b) + 1)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i, j] = min(
                d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1])
            )
    return d[-1, -1]


def test_random_sequences_against_dynamic_programming():
    rng = np.random.RandomState(1)
    seqs = [[list(rng.randint(0, 3, rng.randint(0, 6))) for _ in range(20)] for _ in range(2)]

    def sparse(rows):
        idx = [[b, i] for b, r in enumerate(rows) for i in range(len(r))]
        vals = [v for r in rows for v in r]
        return tf.SparseTensor(np.array(idx, np.int64).reshape(-1, 2), vals, [len(rows), 6])

    with tf.Graph().as_default():
        hyp = tf.placeholder(tf.int64, [None, 2])
        h = sparse(seqs[0])
        out = tf.edit_distance(
            tf.SparseTensor(hyp, h.values, h.dense_shape), sparse(seqs[1]), normalize=False
        )
        assert out.shape.as_list() == [20]  # from the constant dense shapes
        with tf.Session() as sess:
            idx = [[b, i] for b, r in enumerate(seqs[0]) for i in range(len(r))]
            got = sess.run(out, {hyp: np.array(idx, np.int64).reshape(-1, 2)})
    want = [_levenshtein(a, b) for a, b in zip(*seqs)]
    np.testing.assert_array_equal(got, want)


def test_arguments_must_be_sparse():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Hypothesis must be a SparseTensor"):
            tf.edit_distance([[1]], tf.SparseTensor([[0, 0]], [1], [1, 1]))
