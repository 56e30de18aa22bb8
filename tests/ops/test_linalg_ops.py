"""searchsorted (LowerBound/UpperBound), reduce_euclidean_norm, norm and linalg.matvec:
values and errors recorded from TF 2.21 (tf.compat.v1 graph mode)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error

M = [[3.0, -4.0], [5.0, 12.0]]


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


_CASES = {
    "searchsorted_batched": (
        lambda: af.searchsorted(
            [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]], [[0.0, 3.0, 7.0], [4.0, 4.0, 1.0]]
        ),
        [[0, 1, 3], [1, 1, 0]],
    ),
    "searchsorted_right": (
        lambda: af.searchsorted([1.0, 3.0, 3.0, 5.0], [3.0, 4.0], side="right"),
        [3, 3],
    ),  # fmt: skip
    "searchsorted_left": (lambda: af.searchsorted([1.0, 3.0, 3.0, 5.0], [3.0, 4.0]), [1, 3]),
    "euclidean_norm_axis": (
        lambda: af.reduce_euclidean_norm([[3.0, 4.0], [5.0, 12.0]], 1),
        np.float32([5, 13]),
    ),  # fmt: skip
    "euclidean_norm_all": (
        lambda: af.reduce_euclidean_norm([[3.0, 4.0], [5.0, 12.0]]),
        np.float32(13.928389),
    ),  # fmt: skip
    "euclidean_norm_int": (
        lambda: af.reduce_euclidean_norm([[3, 4], [5, 12]], 0, keepdims=True),
        np.int32([[5, 12]]),  # computed in int32: sqrt(34), sqrt(160) truncated
    ),
    "norm": (lambda: af.norm(M), np.float32(13.928389)),
    "norm_axis": (lambda: af.norm(M, axis=1), np.float32([5, 13])),
    "norm_1": (lambda: af.norm(M, ord=1, axis=1), np.float32([7, 17])),
    "norm_inf": (lambda: af.norm(M, ord=np.inf, axis=1), np.float32([4, 12])),
    "norm_fro": (lambda: af.norm(M, ord="fro", axis=[0, 1]), np.float32(13.928389)),
    "norm_matrix_1": (lambda: af.norm(M, ord=1, axis=[0, 1]), np.float32(16)),
    "norm_matrix_inf": (lambda: af.norm(M, ord=np.inf, axis=[0, 1]), np.float32(17)),
    "norm_p3_keepdims": (
        lambda: af.norm(M, ord=3, axis=1, keepdims=True),
        np.float32([[4.4979415], [12.282643]]),
    ),  # fmt: skip
    "matvec": (lambda: af.linalg.matvec([[1.0, 2.0], [3.0, 4.0]], [1.0, 1.0]), np.float32([3, 7])),
    "matvec_t": (
        lambda: af.linalg.matvec([[1.0, 2.0], [3.0, 4.0]], [1.0, 0.0], transpose_a=True),
        np.float32([1, 2]),
    ),  # fmt: skip
    "matvec_batch": (
        lambda: af.linalg.matvec(np.ones((2, 3, 2), np.float32), np.ones((2, 2), np.float32)),
        np.full((2, 3), 2.0, np.float32),
    ),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_values_match_tf(case):
    build, want = _CASES[case]
    t = build()
    want = np.asarray(want)
    assert t.shape.as_list() == list(want.shape)
    got = _run(t)
    if want.dtype != np.int64:  # plain int lists: the value is what matters
        assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_searchsorted_types_and_errors():
    t = af.searchsorted([1, 3], [2], out_type=af.int64)
    assert _run(t).dtype == np.int64
    with pytest.raises(ValueError, match="Argument `side` must be either 'right' or 'left'"):
        af.searchsorted([1.0, 3.0], [2.0], side="middle")
    with pytest.raises(errors.InvalidArgumentError, match="Leading dim_size of both tensors"):
        _run(af.searchsorted([[1.0, 3.0]], [[2.0], [3.0]]))


def test_norm_errors_match_tf():
    with pytest.raises(ValueError, match="'ord' must be a supported vector norm, got 0"):
        af.norm([3.0, 4.0], ord=0)
    with pytest.raises(ValueError, match="'ord' must be a supported vector norm, got fro"):
        af.norm([3.0, 4.0], ord="fro")
    with pytest.raises(ValueError, match="'axis' must be None, an integer, or a tuple of 2"):
        af.norm(M, axis=[0, 0])


@pytest.mark.parametrize(
    "build",
    [
        lambda x: af.reduce_euclidean_norm(x, axis=1),
        lambda x: af.norm(x, ord=3, axis=0),
        lambda x: af.norm(x, ord="fro", axis=[0, 1]),
        lambda x: af.linalg.matvec(x, np.array([0.5, -2.0])),
    ],
)
def test_gradients_against_finite_differences(build):
    x0 = np.array([[3.0, -4.0], [5.0, 12.0]])
    x = af.constant(x0)
    y = build(x)
    with Session() as sess:
        y_shape = sess.run(y).shape
        assert compute_gradient_error(x, [2, 2], y, list(y_shape), x_init_value=x0) < 1e-7


def test_euclidean_norm_gradient_at_zero_is_nan_as_tf():
    # TF 2.21: d reduce_euclidean_norm([[3, 4], [0, 0]], 1) = [[0.6, 0.8], [nan, nan]].
    x = af.constant(np.array([[3.0, 4.0], [0.0, 0.0]]))
    (g,) = af.gradients(af.reduce_euclidean_norm(x, 1), [x])
    np.testing.assert_allclose(_run(g), [[0.6, 0.8], [np.nan, np.nan]])


@pytest.mark.parametrize("index_dtype", [af.int32, af.int64])
def test_matrix_band_part_takes_int32_or_int64_bounds(index_dtype):
    # TF 2.21: MatrixBandPart's Tindex is int32 or int64 (Python ints: int64).
    x = np.ones((2, 3, 4), np.float32)
    band = af.matrix_band_part(x, af.constant(1, index_dtype), af.constant(0, index_dtype))
    assert band.op.inputs[1].dtype == index_dtype
    want = np.tril(np.triu(np.ones((3, 4)), -1), 0)
    np.testing.assert_array_equal(_run(band), np.broadcast_to(want, (2, 3, 4)))
    assert af.matrix_band_part(x, 1, -1).op.inputs[1].dtype == af.int64
