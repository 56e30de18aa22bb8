"""ReverseSequence and sequence_mask against NumPy; the gradient by finite differences."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, test_util


def np_reverse_sequence(x, lengths, seq_axis, batch_axis):
    out = np.array(x, copy=True)
    for b, n in enumerate(lengths):
        src = [slice(None)] * x.ndim
        src[batch_axis] = b
        part = np.take(x, b, axis=batch_axis)
        s = seq_axis - (1 if seq_axis > batch_axis else 0)
        idx = [slice(None)] * part.ndim
        idx[s] = slice(0, n)
        rev = np.flip(part[tuple(idx)], axis=s)
        dst = [slice(None)] * x.ndim
        dst[batch_axis] = b
        dst[seq_axis] = slice(0, n)
        out[tuple(dst)] = rev
    return out


@pytest.mark.parametrize(
    "shape,seq_axis,batch_axis",
    [((3, 5), 1, 0), ((5, 3, 2), 0, 1), ((2, 4, 3, 2), 1, 0), ((4, 2, 6), 2, 1)],
)
def test_reverse_sequence_like_numpy(sess, shape, seq_axis, batch_axis):
    rng = np.random.RandomState(1)
    x = rng.randn(*shape).astype(np.float32)
    lengths = rng.randint(0, shape[seq_axis] + 1, shape[batch_axis])
    y = af.reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)
    np.testing.assert_array_equal(
        sess.run(y), np_reverse_sequence(x, lengths, seq_axis, batch_axis)
    )


def test_reverse_sequence_gradient(graph):
    x = af.placeholder(af.float64, [3, 4, 2])
    y = af.reverse_sequence(x, [4, 0, 2], seq_axis=1, batch_axis=0) * af.constant(
        np.arange(24.0).reshape(3, 4, 2)
    )
    th, nu = test_util.compute_gradient(x, [3, 4, 2], y, [3, 4, 2])
    np.testing.assert_allclose(th, nu, atol=1e-6)


def test_reverse_sequence_bad_lengths(sess):
    y = af.reverse_sequence(np.zeros((2, 3)), [1, 4], seq_axis=1, batch_axis=0)
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(y)


def test_sequence_mask(sess):
    got = sess.run(af.sequence_mask([1, 3, 2], 5))
    np.testing.assert_array_equal(got, np.arange(5)[None, :] < np.array([1, 3, 2])[:, None])
    got = sess.run(af.sequence_mask([[0, 2]], dtype=af.float32))
    np.testing.assert_array_equal(got, [[[0, 0], [1, 1]]])


def test_reverse_sequence_shape_errors_match_tf(graph):
    # TF 2.21: the shape function refuses these at build time, with these messages; equal
    # batch and seq dims fail when run ("batch_dim == seq_dim == 0").
    x = [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        af.reverse_sequence(x, [2, 2, 2], seq_axis=1)
    with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 2"):
        af.reverse_sequence(x, [[2, 2]], seq_axis=1)
    with pytest.raises(ValueError, match="seq_dim must be < input rank: 2 vs. 2"):
        af.reverse_sequence(x, [2, 2], seq_axis=2)
    with pytest.raises(ValueError, match="batch_dim must be < input rank: 3 vs. 2"):
        af.reverse_sequence(x, [2, 2], seq_axis=1, batch_axis=3)
    same = af.reverse_sequence(x, [2, 2], seq_axis=0)
    with af.Session(graph=graph) as s, pytest.raises(
        af.errors.InvalidArgumentError, match="batch_dim == seq_dim == 0"
    ):
        s.run(same)
