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
from asyncflow.test_util import compute_gradient_error

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
        (dict(ksize=2, strides=1, padding="FULL"), "padding"),
        (dict(ksize=2, strides=1, padding="SAME", data_format="NWHC"), "data_format"),
        (dict(ksize=[2, 2, 2], strides=1, padding="SAME"), "ksize"),
        (dict(ksize=9, strides=1, padding="VALID"), "Negative dimension size"),
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


def test_max_pool_v2_second_order_gradients():
    """MaxPoolGradV2 and MaxPoolGradGradV2 have gradients, as in TF (issue 18: the second
    gradient of a MaxPoolV2 was silently zero, TF's testMaxPoolGradGrad saw an error of 2)."""
    x = _distinct((1, 4, 5, 2))
    ksize = af.constant([1, 2, 2, 1], af.int32)
    strides = af.constant([1, 2, 2, 1], af.int32)
    y = ops.apply_op("MaxPoolV2", [x, ksize, strides], {"padding": "SAME"}).outputs[0]
    dy = _RNG.uniform(-1, 1, (1, 2, 3, 2))

    def v2(name, a, b, t):
        return ops.apply_op(name, [a, b, t, ksize, strides], {"padding": "SAME"}).outputs[0]

    assert _grad_error(dy, lambda t: v2("MaxPoolGradV2", x, y, t)) < 1e-4
    assert _grad_error(x, lambda t: v2("MaxPoolGradGradV2", x, y, t)) < 1e-4
    # the chain as TF's test builds it: dx = gradients(max_pool_v2(x), x, dy), checked in dy
    xt, dyt = af.constant(x), af.constant(dy)
    yt = ops.apply_op("MaxPoolV2", [xt, ksize, strides], {"padding": "SAME"}).outputs[0]
    (dx,) = af.gradients(yt, xt, grad_ys=dyt)
    with Session():
        err = compute_gradient_error(dyt, dy.shape, dx, list(x.shape), x_init_value=dy)
    assert err < 1e-4


# -- argument validation as TF 2.21 does it (issue 18; tf.compat.v1 graph mode) ---------------

X4 = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)


@pytest.mark.parametrize("fn", [pooling_ops.max_pool, pooling_ops.avg_pool])
@pytest.mark.parametrize(
    "ksize,strides,padding,error,match",
    [
        # pooling over the batch: built, then UnimplementedError when run
        ([1, 1, 1, 1], [2, 1, 1, 1], "SAME", errors.UnimplementedError, "batch dimension"),
        ([2, 1, 1, 1], [1, 1, 1, 1], "SAME", errors.UnimplementedError, "batch dimension"),
        # a window larger than a known input: ValueError at build time
        ([1, 5, 4, 1], [1, 1, 1, 1], "VALID", ValueError,
         "Negative dimension size caused by subtracting 5 from 4"),
        # a zero stride: ValueError at build time
        ([1, 1, 1, 1], [1, 0, 1, 1], "VALID", ValueError, "Stride must be > 0, but got 0"),
        # a negative window: InvalidArgumentError when run
        ([1, -1, 1, 1], [1, 1, 1, 1], "VALID", errors.InvalidArgumentError,
         "Sliding window ksize must be positive. The specified or inferred ksize is: 1,-1,1,1"),
        ([1, 1, 1], [1, 1, 1, 1], "VALID", ValueError,
         r"ksize should be of length 1, 2 or 4. Received: ksize=\[1, 1, 1\] of length 3"),
    ],
)  # fmt: skip
def test_pool_validation_matches_tf(fn, ksize, strides, padding, error, match):
    with pytest.raises(error, match=match):
        _run(fn(af.constant(X4), ksize, strides, padding))


def test_zero_window_max_pool_at_build_avg_pool_when_run():
    # TF 2.21: max_pool's Python wrapper rejects a zero ksize; avg_pool's kernel does.
    with pytest.raises(ValueError, match="`ksize` cannot be zero"):
        pooling_ops.max_pool(X4, [1, 0, 1, 1], [1, 1, 1, 1], "VALID")
    y = pooling_ops.avg_pool(X4, [1, 0, 1, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="ksize is: 1,0,1,1"):
        _run(y)


def test_window_larger_than_an_unknown_input_gives_an_empty_output():
    # TF 2.21: with the shape unknown at build time, VALID 5x4 windows on 4x4 give [2,0,1,3].
    x = af.placeholder(af.float32)
    for fn in (pooling_ops.max_pool, pooling_ops.avg_pool):
        assert _run(fn(x, [1, 5, 4, 1], [1, 1, 1, 1], "VALID"), {x: X4}).shape == (2, 0, 1, 3)


def test_depthwise_max_pool_matches_tf():
    # TF 2.21: max_pool(x, [1,1,1,3], [1,1,1,3]) -> [2,4,4,1], the max of each pixel's 3
    # channels (2, 5, 8, ...); avg_pool over depth is UnimplementedError.
    y = pooling_ops.max_pool(af.constant(X4), [1, 1, 1, 3], [1, 1, 1, 3], "SAME")
    assert y.shape.as_list() == [2, 4, 4, 1]
    np.testing.assert_array_equal(_run(y), X4.max(axis=3, keepdims=True))
    with pytest.raises(errors.UnimplementedError, match="Non-spatial pooling"):
        _run(pooling_ops.avg_pool(af.constant(X4), [1, 1, 1, 3], [1, 1, 1, 3], "SAME"))
    x = af.constant(np.random.default_rng(3).standard_normal((1, 2, 2, 4)))
    pooled = pooling_ops.max_pool(x, [1, 1, 1, 2], [1, 1, 1, 2], "VALID")
    with Session():
        err = compute_gradient_error(x, [1, 2, 2, 4], pooled, [1, 2, 2, 2])
    assert err < 1e-8


def test_explicit_padding_max_pool_matches_tf():
    # TF 2.21: max_pool(x, 2x2, stride 1, [[0,0],[1,1],[1,0],[0,0]]) has shape [2,5,4,3];
    # its padding is -inf, so the corners are x's own values.
    pads = [[0, 0], [1, 1], [1, 0], [0, 0]]
    y = pooling_ops.max_pool(af.constant(X4), [1, 2, 2, 1], [1, 1, 1, 1], pads)
    assert y.shape.as_list() == [2, 5, 4, 3]
    assert y.op.get_attr("padding") == b"EXPLICIT"
    xp = np.pad(X4, [(0, 0), (1, 1), (1, 0), (0, 0)], constant_values=-np.inf)
    want = np.max([xp[:, i : i + 5, j : j + 4] for i in (0, 1) for j in (0, 1)], axis=0)
    np.testing.assert_array_equal(_run(y), want)
    with pytest.raises(ValueError, match="batch and channel"):
        pooling_ops.max_pool(X4, 2, 1, [[1, 0], [1, 1], [1, 0], [0, 0]])


def test_bfloat16_max_pool_and_its_gradient_match_tf():
    # Recorded from TF 2.21: MaxPool on bfloat16 (x = arange(16)/3) keeps bfloat16, and
    # its gradient routes each upstream value to the window's maximum.
    x = af.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1) / 3, dtype=af.bfloat16)
    y = af.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    y3 = af.nn.max_pool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
    up = af.cast(af.reshape(af.range(16), [1, 4, 4, 1]), af.bfloat16)
    g, g3 = af.gradients(y, x)[0], af.gradients(y3, x, grad_ys=up)[0]
    got = _run([y, g, y3, g3])
    assert all(v.dtype == af.bfloat16.as_numpy_dtype for v in got)
    want = [
        [1.6640625, 2.328125, 4.34375, 5.0],
        [0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1],
        [1.6640625, 2.0, 2.328125, 2.328125, 3.0, 3.328125, 3.671875, 3.671875,
         4.34375, 4.65625, 5.0, 5.0, 4.34375, 4.65625, 5.0, 5.0],
        [0, 0, 0, 0, 0, 0, 1, 5, 0, 4, 5, 13, 0, 20, 22, 50],
    ]  # fmt: skip
    for v, w in zip(got, want, strict=True):
        assert v.astype(np.float32).ravel().tolist() == w


# -- 2x2 stride-2 windows by code (the fused conv layer's pooling: nn_ops) -----------------


def _coded_inputs():
    x = np.maximum(_RNG.standard_normal((3, 4, 6, 5)), 0).astype(np.float32)
    x[1] = np.round(x[1])  # ties (zeros and equal positives)
    x[0, 0, 0, 0] = np.nan  # a NaN max: its window's first position
    x[2, 2:4, 2:4, 1] = [[np.nan, 1], [1, 2]]
    y = x.reshape(3, 2, 2, 3, 2, 5)
    y = np.where(np.isnan(y).any(axis=(2, 4)), np.nan, np.nanmax(y, axis=(2, 4)))
    y = y.astype(np.float32)
    dy = _RNG.standard_normal(y.shape).astype(np.float32)
    dy[0, 1, 1, 2] = np.inf  # inf * 0 (a window not positive) is NaN, as TF's ReluGrad
    dy[1, 0, 0, 3] = np.nan
    return x, y, dy


@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
def test_first_max_code_and_spread_match_max_pool_grad_relu(compiled, monkeypatch):
    from asyncflow.ops import cnn_jit

    if compiled and not cnn_jit.warm():
        pytest.skip("numba is not installed")
    if not compiled:
        monkeypatch.setattr(cnn_jit, "loops", lambda: None)
    x, y, dy = _coded_inputs()
    code = pooling_ops.first_max_code(x, y)
    assert code.dtype == np.uint8 and code.shape == y.shape
    got = pooling_ops.spread_relu_by_code(code, y, dy)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    p = pooling_ops._Pool({**attrs, "data_format": "NHWC"}, x.shape)
    want = pooling_ops._max_pool_grad(np, p, x, y, dy, "NHWC", relu=True)
    np.testing.assert_array_equal(got, want)  # the same bits, NaN and -0 included
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
