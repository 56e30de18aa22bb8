"""`tf.raw_ops` (asyncflow/raw_op_functions.py): keyword-only functions made from the op
registry.  Values, names, return kinds and error messages were recorded from TF 2.21
running the same calls; the argument names of all 773 ops TF 2.21 also has were
compared with TF's raw_ops signatures (the renames in the module are what differed)."""

import numpy as np
import pytest

import asyncflow as tf

R = tf.raw_ops


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def test_ops_names_and_return_kinds_as_tf():
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    m = R.MatMul(a=a, b=a, transpose_b=True)
    s = R.Sum(input=a, axis=[1], keep_dims=True)
    c = R.ConcatV2(values=[a, a], axis=0, name="cc")
    u = R.Unique(x=tf.constant([3, 1, 3, 2]))
    cast = R.Cast(x=a, DstT=tf.int32)
    sp = R.Split(axis=0, value=a, num_split=2)
    r = R.RandomUniform(shape=[3], dtype=tf.float32, seed=1, seed2=2)
    n = R.NoOp()
    tk = R.TopKV2(input=tf.constant([1.0, 3.0, 2.0]), k=2)
    assert (m.name, s.name, c.name) == ("MatMul:0", "Sum:0", "cc:0")
    assert (type(u).__name__, u._fields) == ("Unique", ("y", "idx"))
    assert tk._fields == ("values", "indices")
    assert cast.dtype == tf.int32 and isinstance(sp, list) and len(sp) == 2
    assert (type(n).__name__, n.name) == ("Operation", "NoOp")
    with tf.Session() as sess:
        got = sess.run([m, s, c, u.y, u.idx, sp, r, tk.indices])
    np.testing.assert_array_equal(got[0], [[5, 11], [11, 25]])
    np.testing.assert_array_equal(got[1], [[3], [7]])
    np.testing.assert_array_equal(got[2], [[1, 2], [3, 4], [1, 2], [3, 4]])
    np.testing.assert_array_equal(got[3], [3, 1, 2])
    np.testing.assert_array_equal(got[4], [0, 1, 0, 2])
    np.testing.assert_array_equal(got[5][1], [[3, 4]])
    np.testing.assert_allclose(got[6], [0.40639675, 0.8575996, 0.05539584], rtol=1e-6)
    np.testing.assert_array_equal(got[7], [1, 2])


def test_renamed_arguments_as_tf():
    y = tf.constant([1.0, -1.0])
    x = tf.constant([2.0, 0.5])
    outs = [
        R.Atan2(y=y, x=x),
        R.Select(condition=tf.constant([True, False]), x=x, y=y),
        R.Squeeze(input=tf.ones([1, 2, 1]), axis=[0]),
        R.ExpandDims(input=x, axis=0),
        R.Where(condition=tf.constant([True, False, True])),
        R.Igamma(a=x, x=tf.constant([1.0, 1.0])),
        R.Mean(input=tf.constant([[1.0, 2.0], [3.0, 5.0]]), axis=1),
        R.SplitV(value=tf.range(5), size_splits=[2, 3], axis=0, num_split=2)[1],
    ]
    want = [
        [0.46365, -1.10715],
        [2.0, -1.0],
        [[1.0], [1.0]],
        [[2.0, 0.5]],
        [[0], [2]],
        [0.26424, 0.8427],
        [1.5, 4.0],
        [2, 3, 4],
    ]
    with tf.Session() as sess:
        for got, expected in zip(sess.run(outs), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda a: R.MatMul(a, a),
            "mat_mul only takes keyword args (possible keys: ['a', 'b', 'transpose_a', "
            "'transpose_b', 'grad_a', 'grad_b', 'name']). Please pass these args as kwargs "
            "instead.",  # (TF 2.21's MatMul has grad_a/grad_b: test_parity_s30)
        ),
        (lambda a: R.MatMul(a=a), "mat_mul() missing 1 required positional argument: 'b'"),
        (
            lambda a: R.MatMul(a=a, b=a, bogus=1),
            "mat_mul() got an unexpected keyword argument 'bogus'",
        ),
        (
            lambda a: R.Conv2D(input=tf.ones([1, 2, 2, 1]), filter=a[None, None], padding="SAME"),
            "conv2d() missing 1 required positional argument: 'strides'",
        ),
    ],
)  # fmt: skip
def test_errors_as_tf(call, message):
    with pytest.raises(TypeError) as e:
        call(tf.constant([[1.0]]))
    assert str(e.value) == message


def test_namespace_lists_every_public_op():
    names = dir(R)
    assert "MatMul" in names and "AddV2" in names
    assert not any(n.startswith("_") for n in names)
    assert "OneShotIterator" in names  # (a builder of its own: TF's dataset_factory)
    for name in names:  # every one builds its function
        assert callable(getattr(R, name))
    with pytest.raises(AttributeError):
        R._FusedMatMulReluGrad  # noqa: B018
