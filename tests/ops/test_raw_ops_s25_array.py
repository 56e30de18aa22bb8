"""UniqueV2/UniqueWithCountsV2, Inplace*, Empty, NthElement, ParallelConcat, Bincount,
TensorStridedSliceUpdate (ops/array_extra_ops.py), MatrixDiag*V2 and TileGrad
(ops/legacy_ops.py).  Values recorded from TF 2.21."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

R = tf.raw_ops
D = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
M = [[3.0, 1.0, 4.0], [1.0, 5.0, 9.0]]


def _run(t):
    with tf.Session() as sess:
        return sess.run(t)


def _f64(v):
    return tf.constant(v, tf.float64)


_CASES = [
    (
        "UniqueV2",
        lambda: R.UniqueV2(x=[[1, 2], [3, 4], [1, 2]], axis=[0]),
        [[[1, 2], [3, 4]], [0, 1, 0]],
    ),
    (
        "UniqueV2",
        lambda: R.UniqueV2(x=[[1, 2, 1], [3, 4, 3]], axis=[1]),
        [[[1, 2], [3, 4]], [0, 1, 0]],
    ),
    (
        "UniqueV2",
        lambda: R.UniqueV2(x=[4, 1, 4, 2], axis=tf.constant([], tf.int64)),
        [[4, 1, 2], [0, 1, 0, 2]],
    ),
    (
        "UniqueWithCountsV2",
        lambda: R.UniqueWithCountsV2(x=[[1, 2], [3, 4], [1, 2]], axis=[-2]),
        [[[1, 2], [3, 4]], [0, 1, 0], [2, 1]],
    ),
    (
        "InplaceAdd",
        lambda: R.InplaceAdd(x=_f64(D), i=[1, 3], v=tf.ones([2, 2], tf.float64)),
        [[[1.0, 2.0], [4.0, 5.0], [5.0, 6.0], [8.0, 9.0]]],
    ),
    (
        "InplaceSub",
        lambda: R.InplaceSub(x=_f64(D), i=[0], v=tf.ones([1, 2], tf.float64)),
        [[[0.0, 1.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]],
    ),
    (
        "InplaceUpdate",
        lambda: R.InplaceUpdate(x=_f64(D), i=[2], v=tf.zeros([1, 2], tf.float64)),
        [[[1.0, 2.0], [3.0, 4.0], [0.0, 0.0], [7.0, 8.0]]],
    ),
    ("Empty", lambda: R.Empty(shape=[2, 3], dtype=tf.float32, init=True), [np.zeros((2, 3))]),
    ("NthElement", lambda: R.NthElement(input=_f64(M), n=1), [[3.0, 5.0]]),
    ("NthElement", lambda: R.NthElement(input=_f64(M), n=0, reverse=True), [[4.0, 9.0]]),
    (
        "ParallelConcat",
        lambda: R.ParallelConcat(values=[[[1, 2]], [[3, 4]], [[5, 6]]], shape=[3, 2]),
        [[[1, 2], [3, 4], [5, 6]]],
    ),
    (
        "MatrixDiagV2",
        lambda: R.MatrixDiagV2(
            diagonal=[[1, 2], [3, 4]], k=[0, 1], num_rows=-1, num_cols=-1, padding_value=0
        ),
        [[[3, 1], [0, 4]]],
    ),
    (
        "MatrixDiagPartV2",
        lambda: R.MatrixDiagPartV2(
            input=[[1, 2, 3], [4, 5, 6], [7, 8, 9]], k=[-1, 1], padding_value=0
        ),
        [[[2, 6, 0], [1, 5, 9], [4, 8, 0]]],
    ),
    (
        "Bincount",
        lambda: R.Bincount(arr=[1, 1, 3, 0], size=5, weights=tf.constant([], tf.float32)),
        [[1.0, 2.0, 0.0, 1.0, 0.0]],
    ),
    (
        "Bincount",
        lambda: R.Bincount(arr=[1, 1, 3, 0], size=5, weights=[0.5, 1.0, 2.0, 3.0]),
        [[3.0, 1.5, 0.0, 2.0, 0.0]],
    ),
    (
        "TensorStridedSliceUpdate",
        lambda: R.TensorStridedSliceUpdate(
            input=[[1, 2, 3], [4, 5, 6]],
            begin=[0, 1],
            end=[2, 3],
            strides=[1, 1],
            value=[[0, 0], [9, 9]],
        ),
        [[[1, 0, 0], [4, 9, 9]]],
    ),
    (
        "TensorStridedSliceUpdate",
        lambda: R.TensorStridedSliceUpdate(
            input=[1, 2, 3, 4, 5], begin=[4], end=[0], strides=[-2], value=[7, 8]
        ),
        [[1, 2, 8, 4, 7]],
    ),
]


@pytest.mark.parametrize("op_type, build, want", _CASES)
def test_values(op_type, build, want):
    with tf.Graph().as_default():
        out = build()
        outs = list(out) if isinstance(out, tuple) else [out]
        assert outs[0].op.type == op_type
        got = _run(outs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


def test_gradients():
    with tf.Graph().as_default():
        m = _f64(M)
        g_nth = tf.gradients(R.NthElement(input=m, n=1) * _f64([2.0, 3.0]), m)[0]
        tie = _f64([[1.0, 2.0, 2.0, 0.0]])
        g_tie = tf.gradients(R.NthElement(input=tie, n=2), tie)[0]
        a, v = _f64([1.0, 2.0, 3.0, 4.0]), _f64([5.0, 6.0])
        upd = R.TensorStridedSliceUpdate(input=a, begin=[1], end=[3], strides=[1], value=v)
        g_a, g_v = tf.gradients(upd * _f64([1.0, 2.0, 3.0, 4.0]), [a, v])
        x = _f64([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
        part = R.MatrixDiagPartV2(input=tf.reshape(x[:4], [2, 2]), k=0, padding_value=_f64(0.0))
        g_diag = tf.gradients(part, x)[0]
        with pytest.raises(LookupError, match="op type: InplaceAdd"):
            tf.gradients(R.InplaceAdd(x=m, i=[0], v=_f64([[1.0, 1.0, 1.0]])), m)
        values = _run([g_nth, g_tie, g_a, g_v, g_diag])
    want = [
        [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]],
        [[0.0, 0.5, 0.5, 0.0]],
        [1.0, 0.0, 0.0, 4.0],
        [2.0, 3.0],
        [1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
    ]
    for got, w in zip(values, want):
        np.testing.assert_allclose(got, w)


def test_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Input must have last dimension > n = 3 but is 3"):
            R.NthElement(input=_f64(M), n=3)
        bad = R.Bincount(arr=[1, -1], size=5, weights=tf.constant([], tf.float32))
        with pytest.raises(errors.InvalidArgumentError):
            _run(bad)
        bad_diag = R.MatrixSetDiagV2(
            input=tf.zeros([3, 3], tf.int32), diagonal=[[1, 2], [3, 4]], k=[0, 1]
        )
        with pytest.raises(errors.InvalidArgumentError):
            _run(bad_diag)
        with pytest.raises(
            NotImplementedError,
            match="Op TileGrad is not available in "
            "GraphDef version 2474. It has been removed in version 3. TileGrad "
            "has been replaced with reduce_sum.",
        ):
            R.TileGrad(input=[[1, 2, 3, 4]], multiples=[1, 2])


@pytest.mark.parametrize("resource", [False, True])
@pytest.mark.parametrize(
    "op_type, want",
    [("ScatterNdMax", [4.0, 5.0, 3.0, 7.0]), ("ScatterNdMin", [0.5, 5.0, 2.0, 7.0])],
)
def test_scatter_nd_max_min(op_type, want, resource):
    with tf.Graph().as_default(), tf.Session() as sess:
        v = tf.Variable([1.0, 5.0, 3.0, 7.0], use_resource=resource)
        fn = getattr(R, ("Resource" if resource else "") + op_type)
        out = fn(ref=v.handle if resource else v, indices=[[0], [2], [0]], updates=[4.0, 2.0, 0.5])
        assert getattr(out, "op", out).get_attr("use_locking") is resource  # (TF's defaults)
        sess.run(tf.global_variables_initializer())
        sess.run(out)
        np.testing.assert_array_equal(sess.run(v.read_value()), want)


def test_segment_v2_ops():
    # TF 2.21 registers SegmentSumV2 & co. for XLA devices only (no CPU kernel to record
    # from): the expected values are its documented ones, those of UnsortedSegment*.
    lowest = np.finfo(np.float64).min
    with tf.Graph().as_default():
        d, ids = _f64(D), tf.constant([0, 0, 2, 2])
        outs = [
            R.SegmentSumV2(data=d, segment_ids=ids, num_segments=4),
            R.SegmentProdV2(data=d, segment_ids=ids, num_segments=3),
            R.SegmentMaxV2(data=d, segment_ids=ids, num_segments=3),
            R.SegmentMinV2(data=d, segment_ids=ids, num_segments=3),
        ]
        assert all(o.shape.ndims == 2 for o in outs)
        got = _run(outs)
        with pytest.raises(LookupError, match="op type: SegmentSumV2"):
            tf.gradients(outs[0], d)
    np.testing.assert_array_equal(got[0], [[4.0, 6.0], [0.0, 0.0], [12.0, 14.0], [0.0, 0.0]])
    np.testing.assert_array_equal(got[1], [[3.0, 8.0], [1.0, 1.0], [35.0, 48.0]])
    np.testing.assert_array_equal(got[2], [[3.0, 4.0], [lowest, lowest], [7.0, 8.0]])
    np.testing.assert_array_equal(got[3], [[1.0, 2.0], [-lowest, -lowest], [5.0, 6.0]])
