"""MaxPool, AvgPool and their backprops: direct-loop NumPy references, TF's numbers
(tests/fixtures/nn_pool_tf.json) and finite-difference gradients in float64."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import pooling_ops
from asyncflow.session import Session

FIXTURES = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "nn_pool_tf.json").read_text()
)
_RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _ref_pool(x, k, s, padding, kind):
    n, h, w, c = x.shape
    out_dims, pads = [], []
    for size, kk, ss in ((h, k[0], s[0]), (w, k[1], s[1])):
        if padding == "VALID":
            out_dims.append((size - kk) // ss + 1)
            pads.append(0)
        else:
            o = -(-size // ss)
            out_dims.append(o)
            pads.append(max((o - 1) * ss + kk - size, 0) // 2)
    out = np.zeros((n, *out_dims, c))
    for i in range(out_dims[0]):
        for j in range(out_dims[1]):
            r0, q0 = i * s[0] - pads[0], j * s[1] - pads[1]
            win = x[:, max(r0, 0) : r0 + k[0], max(q0, 0) : q0 + k[1], :]
            out[:, i, j, :] = win.max(axis=(1, 2)) if kind == "max" else win.mean(axis=(1, 2))
    return out


_CONFIGS = [
    ((2, 7, 6, 3), (3, 3), (2, 2), "SAME"),
    ((1, 6, 6, 2), (2, 2), (2, 2), "VALID"),
    ((1, 5, 7, 2), (2, 3), (1, 2), "SAME"),
    ((2, 4, 5, 1), (3, 2), (1, 1), "VALID"),
    ((1, 3, 3, 2), (5, 5), (1, 1), "SAME"),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("xs,k,s,pad", _CONFIGS)
def test_pool_forward(xs, k, s, pad, dtype, fmt, kind):
    x = _RNG.uniform(-1, 1, xs)
    ref = _ref_pool(x, k, s, pad, kind)
    fn = pooling_ops.max_pool if kind == "max" else pooling_ops.avg_pool
    xin = x.transpose(0, 3, 1, 2) if fmt == "NCHW" else x
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    y = fn(af.constant(xin.astype(dtype)), four(k), four(s), pad, data_format=fmt)
    out = _run(y)
    assert out.dtype == dtype and list(out.shape) == y.shape.as_list()
    if fmt == "NCHW":
        out = out.transpose(0, 2, 3, 1)
    tol = {np.float16: 3e-3, np.float32: 1e-6, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(out, ref.astype(dtype), rtol=tol, atol=tol)


def test_max_pool_int32_pads_with_lowest():
    x = -np.arange(1, 10, dtype=np.int32).reshape(1, 3, 3, 1) * 1000
    y = pooling_ops.max_pool(x, 2, 2, "SAME")
    np.testing.assert_array_equal(_run(y)[0, ..., 0], [[-1000, -3000], [-7000, -9000]])


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("name", [c["name"] for c in FIXTURES])
def test_pool_against_tf(name, fmt):
    c = next(c for c in FIXTURES if c["name"] == name)
    x, dy = np.asarray(c["x"]), np.asarray(c["dy"])
    to = (lambda a: a.transpose(0, 3, 1, 2)) if fmt == "NCHW" else (lambda a: a)
    back = (lambda a: a.transpose(0, 2, 3, 1)) if fmt == "NCHW" else (lambda a: a)
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    attrs = {"ksize": four(c["ksize"]), "strides": four(c["strides"]),
             "padding": c["padding"], "data_format": fmt}  # fmt: skip
    fn = pooling_ops.max_pool if c["op"] == "max_pool" else pooling_ops.avg_pool
    y = fn(af.constant(to(x)), attrs["ksize"], attrs["strides"], c["padding"], data_format=fmt)
    if c["op"] == "max_pool":
        dx = ops.apply_op("MaxPoolGrad", [to(x), y, to(dy)], attrs).outputs[0]
    else:
        shape = np.asarray(to(x).shape, np.int32)
        dx = ops.apply_op("AvgPoolGrad", [shape, to(dy)], attrs).outputs[0]
    assert dx.shape.as_list() == list(to(x).shape)
    yv, dxv = _run([y, dx])
    np.testing.assert_allclose(back(yv), c["y"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(back(dxv), c["dx"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(ksize=[2, 2, 2, 1], strides=1, padding="SAME"), "batch nor depth"),
        (dict(ksize=2, strides=[1, 1, 1, 2], padding="SAME"), "batch nor depth"),
        (dict(ksize=2, strides=1, padding="FULL"), "padding"),
        (dict(ksize=2, strides=1, padding="SAME", data_format="NWHC"), "data_format"),
        (dict(ksize=[2, 2, 2], strides=1, padding="SAME"), "ksize"),
        (dict(ksize=9, strides=1, padding="VALID"), "negative"),
    ],
)
def test_pool_build_errors(kwargs, match):
    x = af.placeholder(af.float32, [1, 4, 4, 3])
    with pytest.raises(ValueError, match=match):
        pooling_ops.max_pool(x, **kwargs)


def test_pool_run_errors():
    x = af.placeholder(af.float32)
    y = pooling_ops.avg_pool(x, 3, 1, "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="4-dimensional"):
        _run(y, {x: np.zeros((3, 3, 1), np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        _run(y, {x: np.zeros((1, 1, 3, 1), np.float32)})
    g = ops.apply_op(
        "MaxPoolGrad", [np.zeros((1, 4, 4, 1), np.float32), np.zeros((1, 2, 2, 1), np.float32),
                        x], {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
    ).outputs[0]  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError, match="grad shape"):
        _run(g, {x: np.zeros((1, 3, 2, 1), np.float32)})


def test_pool_type_errors():
    with pytest.raises(TypeError):
        pooling_ops.avg_pool(np.zeros((1, 2, 2, 1), np.int32), 2, 2, "SAME")


# -- gradients (finite differences) ---------------------------------------------------------


def _grad_error(x, y_fn):
    from asyncflow import test_util

    xt = af.constant(x)
    y = y_fn(xt)
    with Session():
        return test_util.compute_gradient_error(xt, x.shape, y, y.shape.as_list(), x_init_value=x)


def _distinct(shape):
    """Values whose window maxima are unique and well separated (finite differences)."""
    return _RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float64) / 10.0


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("xs,k,s,pad", _CONFIGS[:3])
def test_pool_gradients(xs, k, s, pad, fmt):
    x = _distinct(xs)
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    if fmt == "NCHW":
        x = x.transpose(0, 3, 1, 2).copy()
    for fn in (pooling_ops.max_pool, pooling_ops.avg_pool):
        err = _grad_error(x, lambda t, fn=fn: fn(t, four(k), four(s), pad, data_format=fmt))
        assert err < 1e-4, fn.__name__


def test_pool_second_order_gradients():
    x = _distinct((1, 4, 5, 2))
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    y = pooling_ops.max_pool(x, 2, 2, "SAME")
    dy = _RNG.uniform(-1, 1, (1, 2, 3, 2))

    def max_grad(t):
        return ops.apply_op("MaxPoolGrad", [x, y, t], attrs).outputs[0]

    def avg_grad(t):
        return ops.apply_op("AvgPoolGrad", [np.asarray(x.shape, np.int32), t], attrs).outputs[0]

    def max_grad_grad(t):
        return ops.apply_op("MaxPoolGradGrad", [x, y, t], attrs).outputs[0]

    assert _grad_error(dy, max_grad) < 1e-4
    assert _grad_error(dy, avg_grad) < 1e-4
    assert _grad_error(x, max_grad_grad) < 1e-4
