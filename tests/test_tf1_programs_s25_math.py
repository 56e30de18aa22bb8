"""Sparse, set, segment, linalg and signal ops as one TF1 program uses them, checked
against TF 2.21 (tf.compat.v1; values recorded from it): result names, static shapes
and values."""

import numpy as np
import pytest

import asyncflow as tf


def _data():
    rng = np.random.RandomState(0)
    d = rng.randn(4, 2).astype(np.float32)
    return d, rng.randn(6, 2).astype(np.float32)


def test_unsorted_segment_mean_and_sqrt_n_names_shapes_values():
    _, data = _data()
    with tf.Graph().as_default(), tf.Session() as sess:
        useg = tf.constant([2, 0, 2, 1, 4, 0])
        mean = tf.math.unsorted_segment_mean(tf.constant(data), useg, 5)
        sqrtn = tf.math.unsorted_segment_sqrt_n(tf.constant(data), useg, 5)
        assert (mean.name, mean.shape.as_list()) == ("UnsortedSegmentMean/truediv:0", [5, 2])
        assert (sqrtn.name, sqrtn.shape.as_list()) == ("UnsortedSegmentSqrtN/truediv:0", [5, 2])
        m, s = sess.run([mean, sqrtn])
    np.testing.assert_allclose(
        m,
        [[0.22856, 0.30009], [0.44386, 0.33367], [0.32891, 0.26614], [0, 0], [1.49408, -0.20516]],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        s,
        [[0.32323, 0.42439], [0.44386, 0.33367], [0.46515, 0.37637], [0, 0], [1.49408, -0.20516]],
        atol=1e-5,
    )


def test_sorted_segment_count_stays_unknown_as_in_tf():
    with tf.Graph().as_default():
        out = tf.segment_sum(tf.ones([6, 2]), tf.constant([0, 0, 1, 2, 2, 2]))
        assert out.shape.as_list() == [None, 2]


def test_segment_gradients_match_tf():
    _, data = _data()
    with tf.Graph().as_default(), tf.Session() as sess:
        seg = tf.constant([0, 0, 1, 2, 2, 2])
        useg = tf.constant([2, 0, 2, 1, 4, 0])
        dv = tf.Variable(data)
        loss = (
            tf.reduce_sum(tf.unsorted_segment_max(dv, useg, 5) ** 2)
            + tf.reduce_sum(tf.segment_prod(dv, seg))
            + tf.reduce_sum(tf.math.unsorted_segment_sqrt_n(dv, useg, 5))
        )
        (g,) = tf.gradients(loss, dv)
        sess.run(dv.initializer)
        got = sess.run(g)
    np.testing.assert_allclose(
        got,
        [
            [0.85115, 2.98258],
            [0.60389, 4.02625],
            [3.22918, 1.70711],
            [2.35547, 1.84257],
            [4.12712, 0.30469],
            [1.99641, 0.63865],
        ],
        atol=1e-4,
    )


def test_trace_matmul_and_mel_names_as_tf():
    d, _ = _data()
    with tf.Graph().as_default(), tf.Session() as sess:
        sp = tf.SparseTensor([[0, 1], [1, 0], [1, 2], [2, 3]], [1.0, 2.0, 3.0, 4.0], [3, 4])
        mm = tf.sparse_tensor_dense_matmul(sp, tf.constant(d))
        assert mm.name == "SparseTensorDenseMatMul/SparseTensorDenseMatMul:0"
        a = tf.constant(np.arange(16, dtype=np.float32).reshape(4, 4))
        tr = tf.trace(a)
        assert (tr.name, tr.shape.as_list()) == ("Trace:0", [])
        unknown = tf.placeholder(tf.float32, [None, None, None])
        tr2 = tf.trace(unknown)  # TF takes matrices of any size (the diagonal part)
        assert tr2.shape.as_list() == [None]
        mel = tf.signal.linear_to_mel_weight_matrix(4, 9, 8000.0, 20.0, 4000.0)
        assert (mel.name, mel.shape.as_list()) == ("linear_to_mel_weight_matrix:0", [9, 4])
        r = sess.run([mm, tr, tr2], {unknown: np.ones((2, 3, 2), np.float32)})
    np.testing.assert_allclose(
        r[0], [[0.97874, 2.24089], [9.13078, -2.13152], [3.80035, -0.60543]], atol=1e-5
    )
    assert r[1] == 30.0
    assert r[2].tolist() == [2.0, 2.0]


def test_sparse_tensor_checks_its_parts_agree_as_tf():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Dimensions 1 and 2 are not compatible"):
            tf.SparseTensor([[0, 0]], [1.0, 2.0], [2, 2])
        with pytest.raises(ValueError, match="Dimensions 2 and 3 are not compatible"):
            tf.SparseTensor([[0, 0]], [1.0], [2, 2, 2])
        ok = tf.SparseTensor(tf.placeholder(tf.int64, [None, 2]), [1.0], [2, 2])
        assert ok.values.shape.as_list() == [1]


def test_sparse_segment_with_num_segments_named_after_its_op():
    with tf.Graph().as_default(), tf.Session() as sess:
        data = tf.ones([4, 2])
        out = tf.sparse.segment_sum(data, [0, 1, 3], [0, 0, 2], num_segments=4)
        plain = tf.sparse.segment_sum(data, [0, 1, 3], [0, 0, 2])
        assert (out.op.type, out.name) == (
            "SparseSegmentSumWithNumSegments",
            "SparseSegmentSumWithNumSegments:0",
        )
        assert plain.name == "SparseSegmentSum:0"
        got = sess.run(out)
    assert got.tolist() == [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
