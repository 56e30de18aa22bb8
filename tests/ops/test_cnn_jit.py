"""The compiled 2x2 max pooling (ops/cnn_jit.py) against pooling_ops' NumPy path: the
same bits, ties, NaN, infinities and signed zeros included, and through the graph."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.ops import cnn_jit, pooling_ops

pytestmark = pytest.mark.skipif(not cnn_jit.warm(), reason="numba is not installed")

_ATTRS = {
    "ksize": [1, 2, 2, 1],
    "strides": [1, 2, 2, 1],
    "padding": "VALID",
    "data_format": "NHWC",
    "explicit_paddings": [],
}


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _numpy_path(monkeypatch, fn, *args):
    """fn(*args) with the compiled loops hidden: pooling_ops' NumPy passes."""
    with monkeypatch.context() as m:
        m.setattr(cnn_jit, "loops", lambda: None)
        return fn(*args)


def _inputs(rng, shape, dtype, special: bool):
    # Small integers: many windows with tied maxima, and signed zeros.
    x = rng.integers(-3, 4, shape).astype(dtype)
    x[rng.random(shape) < 0.2] *= -0.0
    if special:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 7)] = np.nan
        flat[rng.integers(0, flat.size, 5)] = np.inf
        flat[rng.integers(0, flat.size, 5)] = -np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("shape", [(3, 4, 6, 5), (2, 8, 8, 32), (5, 2, 2, 1)])
def test_forward_and_gradient_bits_equal_numpy_path(monkeypatch, dtype, special, shape):
    rng = np.random.default_rng(sum(shape) + special)
    x = _inputs(rng, shape, dtype, special)
    p = pooling_ops._Pool(_ATTRS, shape)
    y = pooling_ops._max_pool(np, p, x, "NHWC")
    y_ref = _numpy_path(monkeypatch, pooling_ops._max_pool, np, p, x, "NHWC")
    np.testing.assert_array_equal(y, y_ref)  # (NaN where NaN; the sign of a zero max is
    nonzero = y_ref != 0  # not promised: NumPy's own loops differ, see cnn_jit)
    np.testing.assert_array_equal(_bits(y)[nonzero], _bits(y_ref)[nonzero])
    dy = rng.standard_normal(y.shape).astype(dtype)
    dy[rng.random(y.shape) < 0.1] *= -1.0
    if special:
        dy.reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    for y_in in (y, _inputs(rng, y.shape, dtype, special)):  # its own max, and a foreign y
        for relu in (False, True):
            args = (np, p, x, y_in, dy, "NHWC", relu)
            got = pooling_ops._max_pool_grad(*args)
            want = _numpy_path(monkeypatch, pooling_ops._max_pool_grad, *args)
            np.testing.assert_array_equal(got, want)
            nonzero = want != 0
            np.testing.assert_array_equal(_bits(got)[nonzero], _bits(want)[nonzero])
            # Where no gradient lands: +0, as TF's MaxPoolGrad (zeros, then the
            # gradients added); NumPy's multiply by a mask gave -0 under a negative dy.
            # (Without NaN, a gradient lands only where x equals its window's max.)
            if not special:
                away = x != y_in.repeat(2, 1).repeat(2, 2)
                assert not np.signbit(got[away]).any()


def test_gradient_goes_to_first_maximum_in_row_major_order():
    x = np.array([[[[1.0], [2.0]], [[2.0], [0.0]]]], np.float32)  # ties at (0,1) and (1,0)
    p = pooling_ops._Pool(_ATTRS, x.shape)
    y = pooling_ops._max_pool(np, p, x, "NHWC")
    assert y.reshape(-1).tolist() == [2.0]
    dx = pooling_ops._max_pool_grad(np, p, x, y, np.full(y.shape, 5.0, np.float32), "NHWC", False)
    assert dx.reshape(-1).tolist() == [0.0, 5.0, 0.0, 0.0]
    nan_y = np.full(y.shape, np.nan, np.float32)  # a NaN max: the window's first position
    five = np.full(y.shape, 5.0, np.float32)
    dx = pooling_ops._max_pool_grad(np, p, x, nan_y, five, "NHWC", False)
    assert dx.reshape(-1).tolist() == [5.0, 0.0, 0.0, 0.0]


def test_other_inputs_take_the_numpy_path():
    p = pooling_ops._Pool(_ATTRS, (1, 4, 4, 2))
    x = np.ones((1, 4, 4, 2), np.float32)
    assert pooling_ops._jit_2x2(np, p, x) is not None
    assert pooling_ops._jit_2x2(np, p, x.astype(np.float16)) is None
    ro = x.copy()
    ro.flags.writeable = False
    assert pooling_ops._jit_2x2(np, p, ro) is None
    assert pooling_ops._jit_2x2(np, p, np.ones((1, 4, 4, 4), np.float32)[..., ::2]) is None
    odd = pooling_ops._Pool(_ATTRS, (1, 5, 4, 2))  # VALID leaves a row out
    assert pooling_ops._jit_2x2(np, odd, np.ones((1, 5, 4, 2), np.float32)) is None
    attrs3 = {**_ATTRS, "ksize": [1, 3, 3, 1], "strides": [1, 3, 3, 1]}
    three = pooling_ops._Pool(attrs3, (1, 6, 6, 1))
    assert pooling_ops._jit_2x2(np, three, np.ones((1, 6, 6, 1), np.float32)) is None


def test_graph_max_pool_and_relu_gradient_match_numpy():
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((4, 8, 6, 3)).astype(np.float32)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, 8, 6, 3])
        h = tf.nn.relu(x * 1.0)
        y = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        weights = np.arange(4 * 4 * 3 * 3, dtype=np.float32).reshape(4, 4, 3, 3)
        loss = tf.reduce_sum(y * tf.constant(weights))
        (gx,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            yv, gv = sess.run([y, gx], {x: xv})
    hv = np.maximum(xv, 0)
    windows = hv.reshape(4, 4, 2, 3, 2, 3).transpose(0, 1, 3, 5, 2, 4).reshape(4, 4, 3, 3, 4)
    np.testing.assert_array_equal(yv, windows.max(-1))
    weights = np.arange(4 * 4 * 3 * 3, dtype=np.float32).reshape(4, 4, 3, 3)
    first = windows.argmax(-1)
    want = np.zeros((4, 4, 3, 3, 4), np.float32)
    np.put_along_axis(want, first[..., None], (weights * (windows.max(-1) > 0))[..., None], -1)
    want = want.reshape(4, 4, 3, 3, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(4, 8, 6, 3)
    np.testing.assert_array_equal(gv, want * (xv > 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 6, 6, 32), (3, 5, 7), (2, 3)])
def test_bias_add_relu_bits_equal_numpy(dtype, shape):
    from asyncflow.ops import nn_ops

    rng = np.random.default_rng(len(shape))
    value = rng.standard_normal(shape).astype(dtype)
    value.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    bias = rng.standard_normal(shape[-1]).astype(dtype)
    bias[0] = 0.0
    want = np.maximum(value + bias, dtype(0))
    got = nn_ops._add_relu_blocked(value, bias, np.empty_like(value))
    np.testing.assert_array_equal(got, want)
    nonzero = want != 0
    np.testing.assert_array_equal(_bits(got)[nonzero], _bits(want)[nonzero])
    assert not np.signbit(got[got == 0]).any()  # (-0 + 0 and negative sums: +0)
    inplace = value.copy()
    assert nn_ops._add_relu_blocked(inplace, bias, inplace) is inplace
    np.testing.assert_array_equal(_bits(inplace), _bits(got))
    ro_bias = bias.copy()
    ro_bias.flags.writeable = False  # (a variable's buffer: copied for the loop)
    from_ro = nn_ops._add_relu_blocked(value, ro_bias, np.empty_like(value))
    np.testing.assert_array_equal(_bits(from_ro), _bits(got))
