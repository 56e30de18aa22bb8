"""Conv3D (and its backprops), MaxPool3D, AvgPool3D: values against direct numpy loops,
gradients against finite differences in float64, TF's tie rule for MaxPool3DGrad and
TF's build-time errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches):
    with af.Session() as sess:
        return sess.run(fetches)


def _geometry(size, k, s, padding):
    if padding == "VALID":
        return (size - k + s) // s, 0
    out = -(-size // s)
    return out, max((out - 1) * s + k - size, 0) // 2


def _windows(x, k, s, padding, fill):
    """Yield (out index, window of x [N, kd, kh, kw, C]) by direct loops."""
    geo = [_geometry(x.shape[1 + i], k[i], s[i], padding) for i in range(3)]
    for o in itertools.product(*(range(g[0]) for g in geo)):
        idx = []
        for i in range(3):
            start = o[i] * s[i] - geo[i][1]
            idx.append(np.arange(start, start + k[i]))
        win = np.full((x.shape[0], *k, x.shape[4]), fill, x.dtype)
        for a, b, c in itertools.product(*(range(kk) for kk in k)):
            p = (idx[0][a], idx[1][b], idx[2][c])
            if all(0 <= p[i] < x.shape[1 + i] for i in range(3)):
                win[:, a, b, c] = x[:, p[0], p[1], p[2]]
        yield o, win


def _ref_conv3d(x, w, s, padding):
    outs = {}
    for o, win in _windows(x, w.shape[:3], s, padding, 0.0):
        outs[o] = np.einsum("nabci,abcio->no", win, w)
    return _assemble(outs, x.shape[0], w.shape[4])


def _ref_pool(x, k, s, padding, kind):
    outs = {}
    for o, win in _windows(x, k, s, padding, np.nan):
        outs[o] = np.nanmax(win, (1, 2, 3)) if kind == "max" else np.nanmean(win, (1, 2, 3))
    return _assemble(outs, x.shape[0], x.shape[4])


def _assemble(outs, n, c):
    shape = tuple(max(o[i] for o in outs) + 1 for i in range(3))
    out = np.zeros((n, *shape, c))
    for o, v in outs.items():
        out[(slice(None), *o)] = v
    return out


_CONV_CASES = [
    ((2, 5, 6, 7, 3), (2, 3, 2, 3, 4), (1, 1, 1), "VALID"),
    ((1, 5, 6, 7, 2), (3, 2, 3, 2, 3), (2, 1, 2), "SAME"),
    ((2, 4, 4, 5, 1), (1, 3, 3, 1, 2), (1, 2, 3), "SAME"),
]


@pytest.mark.parametrize("x_shape,w_shape,s,padding", _CONV_CASES)
def test_conv3d_matches_direct_loops(x_shape, w_shape, s, padding):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    y = af.nn.conv3d(x, w, [1, *s, 1], padding)
    want = _ref_conv3d(x.astype(np.float64), w.astype(np.float64), s, padding)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(_run(y), want, rtol=1e-4, atol=1e-4)


def test_conv3d_ncdhw_is_ndhwc_transposed():
    x = RNG.standard_normal((2, 4, 5, 6, 3)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 3, 3, 2)).astype(np.float32)
    last = af.nn.conv3d(x, w, [1, 1, 2, 1, 1], "SAME")
    first = af.nn.conv3d(x.transpose(0, 4, 1, 2, 3), w, [1, 1, 1, 2, 1], "SAME",
                         data_format="NCDHW")  # fmt: skip
    a, b = _run([last, first])
    np.testing.assert_allclose(a, b.transpose(0, 2, 3, 4, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_matches_direct_loops(kind, padding):
    x = RNG.standard_normal((2, 5, 4, 6, 3)).astype(np.float32)
    fn = af.nn.max_pool3d if kind == "max" else af.nn.avg_pool3d
    y = fn(x, [1, 2, 3, 2, 1], [1, 2, 2, 3, 1], padding)
    want = _ref_pool(x.astype(np.float64), (2, 3, 2), (2, 2, 3), padding, kind)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(_run(y), want, rtol=1e-5, atol=1e-6)


def _grad_error(build, *shapes):
    xs = [af.constant(RNG.standard_normal(s)) for s in shapes]
    y = build(*xs)
    return compute_gradient_error(
        xs, list(shapes), y, y.shape.as_list(), x_init_value=[_run(x) for x in xs]
    )


@pytest.mark.parametrize("s,padding", [((1, 1, 1), "VALID"), ((2, 1, 2), "SAME")])
def test_conv3d_gradients_match_finite_differences(s, padding):
    err = _grad_error(
        lambda x, w: af.nn.conv3d(x, w, [1, *s, 1], padding), (1, 4, 3, 5, 2), (2, 2, 3, 2, 3)
    )
    assert err < 1e-6


def test_conv3d_transpose_is_the_adjoint_and_differentiable():
    x = RNG.standard_normal((2, 4, 5, 6, 3))
    w = RNG.standard_normal((3, 2, 2, 3, 2))
    y = af.nn.conv3d(x, w, [1, 2, 1, 2, 1], "SAME")
    dy = RNG.standard_normal(y.shape.as_list())
    t = af.nn.conv3d_transpose(dy, w, x.shape, [1, 2, 1, 2, 1], "SAME")
    assert t.shape.as_list() == list(x.shape)
    y_val, t_val = _run([y, t])
    np.testing.assert_allclose(np.vdot(y_val, dy), np.vdot(x, t_val), rtol=1e-10)
    err = _grad_error(
        lambda v, f: af.nn.conv3d_transpose(v, f, [1, 4, 3, 4, 2], [1, 2, 1, 2, 1], "SAME"),
        (1, 2, 3, 2, 3),
        (2, 2, 2, 2, 3),
    )
    assert err < 1e-6


def test_conv3d_backprop_filter_matches_gradient():
    x = RNG.standard_normal((2, 4, 3, 5, 2))
    w = af.constant(RNG.standard_normal((2, 2, 2, 2, 3)))
    y = af.nn.conv3d(x, w, [1, 1, 1, 2, 1], "VALID")
    dy = RNG.standard_normal(y.shape.as_list())
    (dw,) = af.gradients(y, [w], grad_ys=[dy])
    direct = af.nn.conv3d_backprop_filter_v2(x, [2, 2, 2, 2, 3], dy, [1, 1, 1, 2, 1], "VALID")
    assert af.nn.conv3d_backprop_filter is af.nn.conv3d_backprop_filter_v2
    a, b = _run([dw, direct])
    np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_gradients_match_finite_differences(kind):
    fn = af.nn.max_pool3d if kind == "max" else af.nn.avg_pool3d
    dtype = np.float32 if kind == "max" else np.float64  # MaxPool3D has no float64 kernel
    x = af.constant(RNG.permutation(60).reshape(1, 3, 4, 5, 1).astype(dtype))
    y = fn(x, [1, 2, 2, 3, 1], [1, 1, 2, 2, 1], "SAME")
    err = compute_gradient_error(
        x, [1, 3, 4, 5, 1], y, y.shape.as_list(), x_init_value=_run(x), delta=0.1
    )
    assert err < 1e-2


def test_max_pool3d_grad_sends_ties_to_every_maximum():
    # TF's CPU kernel: each window's gradient goes to every element equal to its max
    x = af.constant(np.ones((1, 2, 2, 2, 1), np.float32))
    y = af.nn.max_pool3d(x, 2, 2, "VALID")
    (dx,) = af.gradients(y, [x], grad_ys=[np.full((1, 1, 1, 1, 1), 3.0, np.float32)])
    np.testing.assert_array_equal(_run(dx), np.full((1, 2, 2, 2, 1), 3.0))


def test_max_pool3d_second_order_matches_finite_differences():
    # The gradient of MaxPool3DGrad with respect to its incoming gradient is
    # MaxPool3DGradGrad (TF's _MaxPool3DGradGrad), and that one's is MaxPool3DGrad:
    # d(dx)/d(up) and d(gg)/d(ddx) against finite differences (both maps are linear).
    x = af.constant(RNG.permutation(60).reshape(1, 3, 4, 5, 1).astype(np.float32))
    up = af.constant(RNG.standard_normal((1, 2, 2, 3, 1)).astype(np.float32))
    y = af.nn.max_pool3d(x, [1, 2, 2, 3, 1], [1, 2, 2, 2, 1], "SAME")
    assert y.shape.as_list() == [1, 2, 2, 3, 1]
    (dx,) = af.gradients(y * up, [x])
    assert "MaxPool3DGradGrad" in {
        o.type for o in af.gradients(dx, [up])[0].op.graph.get_operations()
    }
    err = compute_gradient_error(
        up, [1, 2, 2, 3, 1], dx, [1, 3, 4, 5, 1], x_init_value=_run(up), delta=0.5
    )
    assert err < 1e-3
    ddx = af.constant(RNG.standard_normal((1, 3, 4, 5, 1)).astype(np.float32))
    attrs = {"ksize": [1, 2, 2, 3, 1], "strides": [1, 2, 2, 2, 1], "padding": "SAME"}
    gg = ops.apply_op("MaxPool3DGradGrad", [x, y, ddx], attrs).outputs[0]
    err = compute_gradient_error(
        ddx, [1, 3, 4, 5, 1], gg, [1, 2, 2, 3, 1], x_init_value=_run(ddx), delta=0.5
    )
    assert err < 1e-3


def test_avg_pool3d_second_order_is_avg_pool():
    x = af.constant(RNG.standard_normal((1, 4, 4, 4, 2)))
    y = af.nn.avg_pool3d(x, 2, 2, "VALID")
    g = af.constant(RNG.standard_normal((1, 2, 2, 2, 2)))
    (dx,) = af.gradients(y, [x], grad_ys=[g])
    (ddg,) = af.gradients(dx, [g], grad_ys=[af.ones_like(x)])
    np.testing.assert_allclose(_run(ddg), np.ones((1, 2, 2, 2, 2)), rtol=1e-12)


def test_build_time_errors_match_tf():
    x = af.placeholder(af.float32, [1, 4, 4, 4, 2])
    w = af.placeholder(af.float32, [2, 2, 2, 2, 3])
    with pytest.raises(ValueError, match="batch and depth"):
        af.nn.conv3d(x, w, [2, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="5 dimensions"):
        af.nn.conv3d(x, w, [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError):
        af.nn.conv3d(x, af.placeholder(af.float32, [2, 2, 2, 5, 3]), [1] * 5, "SAME")
    with pytest.raises(ValueError, match="length 1, 3 or 5"):
        af.nn.max_pool3d(x, [2, 2], 2, "SAME")
    with pytest.raises(TypeError):
        af.nn.max_pool3d(af.placeholder(af.float64, [1, 4, 4, 4, 2]), 2, 2, "SAME")
    with pytest.raises(ValueError, match="data_format"):
        af.nn.avg_pool3d(x, 2, 2, "SAME", data_format="NHWC")


def test_nd_front_ends_route_3d_work_to_the_3d_ops():
    x = RNG.standard_normal((1, 4, 5, 6, 2)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 3, 2, 3)).astype(np.float32)
    conv = af.nn.convolution(x, w, "SAME", strides=[1, 2, 1])
    pooled = af.nn.pool(x, [2, 2, 2], "AVG", "VALID", strides=[2, 2, 2])
    assert conv.op.type == "Conv3D" and pooled.op.type == "AvgPool3D"
    a, b = _run([conv, pooled])
    np.testing.assert_allclose(a, _ref_conv3d(x, w, (1, 2, 1), "SAME"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b, _ref_pool(x, (2, 2, 2), (2, 2, 2), "VALID", "avg"), rtol=1e-5)


def test_avg_pool3d_grad_checks_its_window_when_run():
    # TF 2.21: the raw AvgPool3DGrad op with ksize [1, -3, 1, 1, 1] builds, and running it
    # raises InvalidArgumentError (pooling_ops_3d_test.testAvgPool3dGradInvalidKsize).
    attrs = {"ksize": [1, -3, 1, 1, 1], "strides": [1, 1, 1, 1, 1], "padding": "SAME"}
    t = ops.apply_op(
        "AvgPool3DGrad", [np.int32([1, 1, 1, 1, 1]), np.ones((1, 1, 1, 1, 1), np.float32)], attrs
    ).outputs[0]
    with pytest.raises(af.errors.InvalidArgumentError, match="must be positive"):
        _run(t)
