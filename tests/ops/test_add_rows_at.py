"""scatter_at's row path (math_helpers._add_rows_at) against np.add.at, bit for bit:
updates of rows summed in their order, duplicates in levels."""

import numpy as np
import pytest

from asyncflow.ops import math_helpers as mh


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        # values of every magnitude, so that another order of the sums shows in the bits
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
        x[rng.random(shape) < 0.05] = -0.0
        x[rng.random(shape) < 0.01] = np.nan
        x[rng.random(shape) < 0.01] = np.inf
        return x.astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1e5j * rng.standard_normal(shape)).astype(dtype)
    return rng.integers(0, 200, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.complex64])
def test_rows_match_add_at_bits(dtype):
    rng = np.random.default_rng(0)
    taken = 0
    for trial in range(150):
        n, k = int(rng.integers(1, 30)), int(rng.integers(0, 60))
        tail = [(1,), (3,), (64,), (2, 5)][trial % 4]
        a0 = _values(rng, (n,) + tail, dtype)
        if trial % 3 == 0:
            a0[...] = 0  # (a segment sum's start)
        v = _values(rng, (k,) + tail, dtype)
        idx = rng.integers(0, n, k).astype(np.int32 if trial % 2 else np.int64)
        want, got = a0.copy(), a0.copy()
        with np.errstate(all="ignore"):
            np.add.at(want, idx, v)
            took = mh._add_rows_at(got, idx, v)
            if not took:
                mh.scatter_at(np, "add", got, idx, v)  # (declined: add.at's own)
            taken += took
        assert got.tobytes() == want.tobytes(), (trial, n, k, tail)
    assert taken > 50  # (the row path itself was tested, not only add.at)


def test_declines_what_it_does_not_cover():
    a = np.zeros((4, 3), np.float32)
    v = np.ones((10, 3), np.float32)
    assert not mh._add_rows_at(a, np.array([0, 1, 2, 3, 4, 0, 1, 2, 3, 0]), v)  # 4 out of range
    assert not mh._add_rows_at(a, np.array([-1] + [0] * 9), v)  # add.at wraps negatives
    assert not mh._add_rows_at(a, np.zeros(10, np.int64), v)  # one index: ten levels
    many = np.concatenate([np.zeros(300, np.int64), np.arange(4).repeat(1000)])
    assert not mh._add_rows_at(a, many, np.ones((many.size, 3), np.float32))  # 1,300 levels
    assert not mh._add_rows_at(np.zeros(8, np.float32), np.arange(8), np.ones(8, np.float32))
    assert not mh._add_rows_at(a, np.arange(4).repeat(3)[:10], np.ones((1, 3), np.float32))
    assert not a.any()


def test_segment_sum_of_a_gather_gradient():
    # UnsortedSegmentSum of 128 distinct rows into 2560 (a gather's gradient): the row path
    import asyncflow as tf

    rng = np.random.default_rng(1)
    data = rng.standard_normal((128, 64)).astype(np.float32)
    ids = np.concatenate([rng.permutation(2560)[:120], [5, 5, 5, 7, 7, 9, 9, 9]]).astype(np.int32)
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run(tf.math.unsorted_segment_sum(data, ids, 2560))
    want = np.zeros((2560, 64), np.float32)
    np.add.at(want, ids, data)
    assert got.tobytes() == want.tobytes()
