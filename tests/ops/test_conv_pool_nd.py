"""N-d front ends (convolution, conv1d, pool, max_pool_v2, avg_pool_v2) and the MaxPoolV2
op: values recorded from TF 2.21 (tf.compat.v1 graph mode) and NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session
from asyncflow.test_util import compute_gradient_error

X4 = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
X3 = X4[:, :, 0, :]
W = np.ones((2, 2, 3, 5), np.float32)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


# builder -> (shape, first six values) recorded from TF 2.21
_CASES = {
    "max_pool_v2_1d": (
        lambda: af.nn.max_pool_v2(X3, 2, 2, "VALID"),
        (2, 2, 3),
        [12, 13, 14, 36, 37, 38],
    ),  # fmt: skip
    "max_pool_v2_2d": (
        lambda: af.nn.max_pool_v2(X4, 2, 1, "SAME"),
        (2, 4, 4, 3),
        [15, 16, 17, 18, 19, 20],
    ),  # fmt: skip
    "avg_pool_v2_1d": (
        lambda: af.nn.avg_pool_v2(X3, 2, 2, "VALID"),
        (2, 2, 3),
        [6, 7, 8, 30, 31, 32],
    ),  # fmt: skip
    "avg_pool_v2_2d": (
        lambda: af.nn.avg_pool_v2(X4, 2, 1, "SAME"),
        (2, 4, 4, 3),
        [7.5, 8.5, 9.5, 10.5, 11.5, 12.5],
    ),  # fmt: skip
    "pool_max": (
        lambda: af.nn.pool(X4, [2, 2], "MAX", "SAME", strides=[2, 2]),
        (2, 2, 2, 3),
        [15, 16, 17, 21, 22, 23],
    ),  # fmt: skip
    "convolution": (
        lambda: af.nn.convolution(X4, W, "VALID"),
        (2, 3, 3, 5),
        [102, 102, 102, 102, 102, 138],
    ),  # fmt: skip
    "convolution_dilated": (
        lambda: af.nn.convolution(X4, W, "SAME", dilation_rate=[2, 2]),
        (2, 4, 4, 5),
        [48, 48, 48, 48, 48, 96],
    ),  # fmt: skip
    "convolution_strided": (
        lambda: af.nn.convolution(X4, W, "SAME", strides=[2, 2]),
        (2, 2, 2, 5),
        [102, 102, 102, 102, 102, 174],
    ),  # fmt: skip
    "convolution_1d": (
        lambda: af.nn.convolution(X3, np.ones((2, 3, 5), np.float32), "SAME"),
        (2, 4, 5),
        [42, 42, 42, 42, 42, 114],
    ),  # fmt: skip
    "conv1d": (
        lambda: af.nn.conv1d(X3, np.ones((2, 3, 5), np.float32), 1, "SAME"),
        (2, 4, 5),
        [42, 42, 42, 42, 42, 114],
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_values_match_tf(case):
    build, shape, head = _CASES[case]
    t = build()
    assert tuple(t.shape.as_list()) == shape
    v = _run(t)
    assert v.shape == shape
    np.testing.assert_array_equal(v.ravel()[:6], head)


def test_convolution_2d_is_conv2d():
    assert af.nn.convolution(X4, W, "VALID").op.type == "Conv2D"  # as TF 2.21


def test_errors_match_tf():
    with pytest.raises(ValueError, match="'SAME' padding is not implemented for `dilation_rate`"):
        af.nn.pool(X4, [2, 2], "AVG", "SAME", dilation_rate=[2, 2])
    with pytest.raises(ValueError, match="pooling_type"):
        af.nn.pool(X4, [2, 2], "MIN", "SAME")
    with pytest.raises(ValueError, match="ksize should be of length 1, 2 or 4"):
        af.nn.max_pool_v2(X4, [2, 2, 2], 1, "SAME")


def test_max_pool_v2_op_with_tensor_window():
    # TF 2.21 (gen_nn_ops.max_pool_v2): a placeholder ksize leaves the shape unknown; fed
    # [1,2,2,1] with strides [1,2,2,1] the result has shape (2,2,2,3), and a zero window
    # fails with InvalidArgumentError when run.
    ksize = af.placeholder(af.int32, [4])
    y = af.nn.max_pool_v2(X4, ksize, [1, 2, 2, 1], "VALID")
    assert y.op.type == "MaxPoolV2"
    assert y.shape.dims is None or y.shape.as_list() == [None] * 4
    out = _run(y, {ksize: [1, 2, 2, 1]})
    want = X4.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4))
    np.testing.assert_array_equal(out, want)
    with pytest.raises(errors.InvalidArgumentError, match="ksize must be positive"):
        _run(y, {ksize: [1, 0, 2, 1]})
    static = af.nn.max_pool_v2(X4, af.constant([1, 2, 2, 1]), af.constant([1, 2, 2, 1]), "VALID")
    assert static.shape.as_list() == [2, 2, 2, 3]


def test_max_pool_v2_gradient():
    x0 = np.random.default_rng(1).permutation(32).reshape(1, 4, 4, 2).astype(np.float64)
    x = af.constant(x0)
    y = af.nn.max_pool_v2(x, af.constant([1, 2, 2, 1]), af.constant([1, 2, 2, 1]), "VALID")
    with Session():
        assert compute_gradient_error(x, [1, 4, 4, 2], y, [1, 2, 2, 2], x_init_value=x0) < 1e-8


def test_conv1d_gradient():
    rng = np.random.default_rng(2)
    x0, w0 = rng.standard_normal((1, 5, 2)), rng.standard_normal((3, 2, 2))
    x = af.constant(x0)
    y = af.nn.conv1d(x, af.constant(w0), 1, "SAME")
    with Session():
        assert compute_gradient_error(x, [1, 5, 2], y, [1, 5, 2], x_init_value=x0) < 1e-8
