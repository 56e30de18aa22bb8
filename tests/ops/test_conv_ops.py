"""Conv2D, Conv2DBackpropInput/Filter, conv2d_transpose, DepthwiseConv2dNative.

Forward values against direct-loop NumPy references; forward and both backprops against
TensorFlow's numbers (tests/fixtures/nn_conv_tf.json, recorded by record_nn_tf.py);
gradients against finite differences (float64) once asyncflow.test_util exists.
"""

from __future__ import annotations

import json
import pathlib
import platform
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, conv_ops
from asyncflow.session import Session

FIXTURES = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "nn_conv_tf.json").read_text()
)
_RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


@pytest.fixture
def _on_cpu(_fresh_graph):
    """The graph on the CPU: the fused convolution loops are the CPU device's (with a
    stand-in GPU, ASYNCFLOW_FAKE_GPUS=1, placement would give the ops to GPU:0)."""
    with ops.device("/cpu:0"):
        yield


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _pads(size, k, s, d, padding):
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return (size - eff) // s + 1, 0
    out = -(-size // s)
    return out, max((out - 1) * s + eff - size, 0) // 2


def _ref_conv(x, w, strides, padding, dilations, depthwise=False):
    """Direct loops over outputs and filter taps (NHWC)."""
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    oh, ph = _pads(h, kh, strides[0], dilations[0], padding)
    ow, pw = _pads(wd, kw, strides[1], dilations[1], padding)
    oc = c * m if depthwise else m
    out = np.zeros((n, oh, ow, oc))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r = i * strides[0] + a * dilations[0] - ph
                    q = j * strides[1] + b * dilations[1] - pw
                    if 0 <= r < h and 0 <= q < wd:
                        v = x[:, r, q, :]
                        if depthwise:
                            out[:, i, j, :] += (v[:, :, None] * w[a, b]).reshape(n, oc)
                        else:
                            out[:, i, j, :] += v @ w[a, b]
    return out


# name, x shape, filter shape, strides, padding, dilations
_CONFIGS = [
    ("same_s1", (2, 5, 6, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ("same_s2_even", (1, 6, 6, 2), (2, 2, 2, 3), (2, 2), "SAME", (1, 1)),
    ("same_s2_odd_pad", (2, 7, 6, 2), (4, 3, 2, 3), (2, 2), "SAME", (1, 1)),
    ("valid_s2x3", (1, 8, 9, 2), (2, 3, 2, 3), (2, 3), "VALID", (1, 1)),
    ("same_dil2", (2, 7, 7, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 2)),
    ("valid_dil2x1", (1, 7, 6, 3), (2, 2, 3, 2), (1, 1), "VALID", (2, 1)),
    ("one_by_one", (2, 4, 4, 5), (1, 1, 5, 3), (1, 1), "VALID", (1, 1)),
    ("filter_bigger_same", (1, 2, 3, 1), (5, 5, 1, 2), (1, 1), "SAME", (1, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("name,xs,ws,s,pad,d", _CONFIGS, ids=[c[0] for c in _CONFIGS])
def test_conv2d_forward(name, xs, ws, s, pad, d, fmt, dtype):
    x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
    ref = _ref_conv(x, w, s, pad, d)
    xin = x.transpose(0, 3, 1, 2) if fmt == "NCHW" else x
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    y = conv_ops.conv2d(
        af.constant(xin.astype(dtype)), af.constant(w.astype(dtype)), four(s), pad,
        data_format=fmt, dilations=four(d),
    )  # fmt: skip
    out = _run(y)
    assert out.dtype == dtype
    if fmt == "NCHW":
        out = out.transpose(0, 2, 3, 1)
    assert y.shape.as_list() == list(np.shape(xin)[:1]) + list(
        (np.asarray(out.shape) if fmt == "NHWC" else np.asarray(out.transpose(0, 3, 1, 2).shape))[
            1:
        ]
    )
    tol = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def _case(name):
    return next(c for c in FIXTURES if c["name"] == name)


_CONV_TF = [c["name"] for c in FIXTURES if c["op"] == "conv2d"]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("name", _CONV_TF)
def test_conv2d_against_tf(name, fmt):
    c = _case(name)
    x, w, dy = (np.asarray(c[k]) for k in ("x", "w", "dy"))
    to = (lambda a: a.transpose(0, 3, 1, 2)) if fmt == "NCHW" else (lambda a: a)
    back = (lambda a: a.transpose(0, 2, 3, 1)) if fmt == "NCHW" else (lambda a: a)
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    kw = dict(strides=four(c["strides"]), padding=c["padding"], data_format=fmt,
              dilations=four(c["dilations"]))  # fmt: skip
    y = conv_ops.conv2d(af.constant(to(x)), af.constant(w), **kw)
    dx = conv_ops.conv2d_backprop_input(to(x).shape, af.constant(w), af.constant(to(dy)), **kw)
    dw = conv_ops.conv2d_backprop_filter(
        af.constant(to(x)), np.asarray(w.shape, np.int32), af.constant(to(dy)), **kw
    )
    assert dx.shape.as_list() == list(to(x).shape)
    assert dw.shape.as_list() == list(w.shape)
    yv, dxv, dwv = _run([y, dx, dw])
    np.testing.assert_allclose(back(yv), c["y"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(back(dxv), c["dx"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dwv, c["dw"], rtol=1e-10, atol=1e-10)


def test_conv2d_transpose_against_tf():
    c = _case("transpose_s2")
    v, w, dy = (np.asarray(c[k]) for k in ("x", "w", "dy"))
    y = conv_ops.conv2d_transpose(
        af.constant(v), af.constant(w), c["output_shape"], [1, 2, 2, 1], "SAME"
    )
    assert y.shape.as_list() == c["output_shape"]
    assert y.op.type == "Conv2DBackpropInput" and y.op.name == "conv2d_transpose"
    np.testing.assert_allclose(_run(y), c["y"], rtol=1e-10, atol=1e-10)
    # the gradient w.r.t. value of a transpose conv is the forward conv of dy
    dv = conv_ops.conv2d(af.constant(dy), af.constant(w), [1, 2, 2, 1], "SAME")
    dw = conv_ops.conv2d_backprop_filter(
        af.constant(dy), np.asarray(w.shape, np.int32), af.constant(v), [1, 2, 2, 1], "SAME"
    )
    dvv, dwv = _run([dv, dw])
    np.testing.assert_allclose(dvv, c["dx"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dwv, c["dw"], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["dw_same_s2", "dw_valid_rate2"])
def test_depthwise_against_tf(name):
    c = _case(name)
    x, w, dy = (np.asarray(c[k]) for k in ("x", "w", "dy"))
    s, rate = c["strides"], c["dilations"]
    y = conv_ops.depthwise_conv2d(af.constant(x), af.constant(w), [1, *s, 1], c["padding"], rate)
    # TF 2.21 runs an atrous rate through SpaceToBatchND / BatchToSpaceND.
    assert y.op.type == ("DepthwiseConv2dNative" if rate == [1, 1] else "BatchToSpaceND")
    kw = dict(strides=[1, *s, 1], padding=c["padding"], dilations=[1, *rate, 1])
    dx = conv_ops.depthwise_conv2d_native_backprop_input(x.shape, af.constant(w), dy, **kw)
    dw = conv_ops.depthwise_conv2d_native_backprop_filter(
        af.constant(x), np.asarray(w.shape, np.int32), dy, **kw
    )
    yv, dxv, dwv = _run([y, dx, dw])
    np.testing.assert_allclose(yv, c["y"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        yv, _ref_conv(x, w, s, c["padding"], rate, depthwise=True), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(dxv, c["dx"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dwv, c["dw"], rtol=1e-10, atol=1e-10)


def test_depthwise_nchw_matches_nhwc():
    x, w = _RNG.uniform(-1, 1, (2, 5, 6, 3)), _RNG.uniform(-1, 1, (3, 2, 3, 2))
    a = conv_ops.depthwise_conv2d_native(x, w, [1, 2, 2, 1], "SAME")
    b = conv_ops.depthwise_conv2d_native(
        x.transpose(0, 3, 1, 2), w, [1, 1, 2, 2], "SAME", data_format="NCHW"
    )
    av, bv = _run([a, b])
    np.testing.assert_allclose(bv.transpose(0, 2, 3, 1), av, rtol=1e-12, atol=1e-12)


def test_explicit_padding():
    x, w = _RNG.uniform(-1, 1, (1, 4, 5, 2)), _RNG.uniform(-1, 1, (2, 2, 2, 3))
    y = conv_ops.conv2d(x, w, 1, [[0, 0], [1, 2], [0, 1], [0, 0]])
    ref = _ref_conv(np.pad(x, ((0, 0), (1, 2), (0, 1), (0, 0))), w, (1, 1), "VALID", (1, 1))
    assert y.shape.as_list() == list(ref.shape)
    np.testing.assert_allclose(_run(y), ref, rtol=1e-12, atol=1e-12)


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(strides=[2, 1, 1, 1], padding="SAME"), "batch and depth"),
        (dict(strides=[1, 1, 1, 1], padding="FULL"), "padding"),
        (dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NCWH"), "data_format"),
        (dict(strides=[1, 1, 1], padding="SAME"), "strides"),
        (
            dict(strides=1, padding="VALID"),
            "Negative dimension size caused by subtracting 3 from 1",
        ),
    ],
)
def test_conv2d_build_errors(kwargs, match):
    x = af.placeholder(af.float32, [1, 1, 2, 3])
    w = af.placeholder(af.float32, [3, 3, 3, 4])
    with pytest.raises(ValueError, match=match):
        conv_ops.conv2d(x, w, **kwargs)


def test_conv2d_depth_mismatch():
    with pytest.raises(ValueError, match="Depth of input"):
        conv_ops.conv2d(np.zeros((1, 4, 4, 3), np.float32), np.zeros((2, 2, 2, 1), np.float32),
                        1, "SAME")  # fmt: skip
    x = af.placeholder(af.float32)
    w = af.placeholder(af.float32)
    y = conv_ops.conv2d(x, w, 1, "SAME")
    feed = {x: np.zeros((1, 4, 4, 3), np.float32), w: np.zeros((2, 2, 2, 1), np.float32)}
    with pytest.raises(errors.InvalidArgumentError, match="depth"):
        _run(y, feed)
    with pytest.raises(errors.InvalidArgumentError, match="4-dimensional"):
        _run(y, {x: np.zeros((4, 4, 3), np.float32), w: feed[w]})
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        w331 = np.zeros((3, 3, 3, 1), np.float32)
        _run(conv_ops.conv2d(x, w, 1, "VALID"), {x: feed[x][:, :1], w: w331})


def test_backprop_input_size_mismatch():
    w = np.zeros((2, 2, 1, 1), np.float32)
    dy = af.placeholder(af.float32, [None, None, None, 1])
    dx = conv_ops.conv2d_backprop_input([1, 4, 4, 1], w, dy, [1, 1, 1, 1], "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="out_backprop"):
        _run(dx, {dy: np.zeros((1, 4, 4, 1), np.float32)})


def test_conv2d_type_errors():
    # TF's Conv2D takes half, bfloat16, float, double and int32 (CPU); not int64.
    with pytest.raises(TypeError):
        conv_ops.conv2d(np.zeros((1, 2, 2, 1), np.int64), np.zeros((1, 1, 1, 1), np.int64),
                        1, "SAME")  # fmt: skip


# -- gradients (finite differences) ---------------------------------------------------------


def _grad_error(x_vals, y_fn):
    from asyncflow import test_util

    xs = [af.constant(v) for v in x_vals]
    y = y_fn(*xs)
    with Session():
        return test_util.compute_gradient_error(
            xs, [v.shape for v in x_vals], y, y.shape.as_list(), x_init_value=x_vals
        )


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    "name,xs,ws,s,pad,d", [_CONFIGS[2], _CONFIGS[3], _CONFIGS[4]], ids=lambda v: str(v)
)
def test_conv2d_gradient(name, xs, ws, s, pad, d, fmt):
    x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    if fmt == "NCHW":
        x = x.transpose(0, 3, 1, 2).copy()
    err = _grad_error(
        [x, w],
        lambda a, b: conv_ops.conv2d(a, b, four(s), pad, data_format=fmt, dilations=four(d)),
    )
    assert err < 1e-4


def test_conv2d_transpose_gradient():
    v, w = _RNG.uniform(-1, 1, (1, 3, 2, 2)), _RNG.uniform(-1, 1, (3, 3, 3, 2))
    err = _grad_error(
        [v, w], lambda a, b: conv_ops.conv2d_transpose(a, b, [1, 6, 4, 3], [1, 2, 2, 1], "SAME")
    )
    assert err < 1e-4


def test_backprop_filter_gradient():
    x, dy = _RNG.uniform(-1, 1, (1, 5, 4, 2)), _RNG.uniform(-1, 1, (1, 3, 2, 3))
    err = _grad_error(
        [x, dy],
        lambda a, b: conv_ops.conv2d_backprop_filter(a, [3, 3, 2, 3], b, [1, 2, 2, 1], "SAME"),
    )
    assert err < 1e-4


@pytest.mark.parametrize("s,pad,rate", [((2, 2), "SAME", (1, 1)), ((1, 1), "VALID", (2, 2))])
def test_depthwise_gradient(s, pad, rate):
    x, w = _RNG.uniform(-1, 1, (1, 6, 5, 2)), _RNG.uniform(-1, 1, (2, 3, 2, 2))
    err = _grad_error(
        [x, w], lambda a, b: conv_ops.depthwise_conv2d(a, b, [1, *s, 1], pad, rate=rate)
    )
    assert err < 1e-4


def test_depthwise_backprop_gradients():
    x, w = _RNG.uniform(-1, 1, (1, 5, 5, 2)), _RNG.uniform(-1, 1, (2, 2, 2, 1))
    dy = _RNG.uniform(-1, 1, (1, 3, 3, 2))
    kw = dict(strides=[1, 2, 2, 1], padding="SAME")
    err_i = _grad_error(
        [w, dy],
        lambda a, b: conv_ops.depthwise_conv2d_native_backprop_input([1, 5, 5, 2], a, b, **kw),
    )
    err_f = _grad_error(
        [x, dy],
        lambda a, b: conv_ops.depthwise_conv2d_native_backprop_filter(a, [2, 2, 2, 1], b, **kw),
    )
    assert err_i < 1e-4 and err_f < 1e-4


def test_shape_of_helper_is_int32():
    assert conv_ops._shape_of(array_ops.zeros([2, 3])).dtype == af.int32


# -- Conv2D -> BiasAdd -> Relu of few input channels: one compiled pass ---------------------
# (nn_ops' _FusedConv2DBiasAddRelu, cnn_jit's loop; the graph pass: test_graph_passes.py)

# x shape, filter shape, padding: batch 1 with odd sizes and an even filter width (the odd
# padding column on the right), VALID, a filter bigger than its input (SAME), 4 channels
_FUSED = [
    ((1, 5, 7, 1), (3, 2, 1, 5), "SAME"),
    ((3, 6, 5, 3), (2, 3, 3, 8), "VALID"),
    ((2, 3, 4, 4), (5, 5, 4, 3), "SAME"),
]


def _conv_bias_relu_graph(xs, ws, pad, dtype=np.float32):
    x = af.placeholder(dtype, [None, *xs[1:]])
    w = _RNG.uniform(-1, 1, ws)
    b = _RNG.uniform(-1, 1, ws[3])
    pre = af.nn.bias_add(conv_ops.conv2d(x, af.constant(w.astype(dtype)), [1, 1, 1, 1], pad),
                         af.constant(b.astype(dtype)))  # fmt: skip
    return x, w, b, af.nn.relu(pre)


def _run_with_types(fetches, feed_dict):
    with Session() as sess:
        got = sess.run(fetches, feed_dict)
        types = {op.type for sp in sess._plans.values() for pl in sp.plans for op in pl.nodes}
    return got, types


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("xs,ws,pad", _FUSED, ids=lambda v: str(v))
def test_conv2d_bias_relu_fused(xs, ws, pad, compiled, monkeypatch):
    from asyncflow.ops import cnn_jit

    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (the compiled loops' paths)

    if compiled and not cnn_jit.warm_conv(*ws):
        pytest.skip("numba is not installed")
    if not compiled:  # the loop not compiled (yet): Conv2D's and BiasAdd's kernels
        monkeypatch.setattr(cnn_jit, "conv_bias_relu", lambda *sizes: None)
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    xv = _RNG.uniform(-1, 1, xs).astype(np.float32)
    xv[0, 1, 1, 0] = np.nan  # NaN sums stay NaN (TF's Relu)
    got, types = _run_with_types(y, {x: xv})
    assert "_FusedConv2DBiasAddRelu" in types and "Conv2D" not in types
    assert got.dtype == np.float32
    ref = np.maximum(_ref_conv(xv.astype(np.float64), w, (1, 1), pad, (1, 1)) + b, 0)
    assert np.isnan(ref).any()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
def test_conv2d_bias_relu_fused_gradients():
    from asyncflow.ops import cnn_jit

    xs, ws, pad = _FUSED[0]
    if not cnn_jit.warm_conv(*ws):
        pytest.skip("numba is not installed")
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    (wt,) = [
        op.inputs[1] for op in ops.get_default_graph().get_operations() if op.type == "Conv2D"
    ]
    (bt,) = [
        op.inputs[1] for op in ops.get_default_graph().get_operations() if op.type == "BiasAdd"
    ]
    loss = af.reduce_sum(y * y)
    gw, gb = af.gradients(loss, [wt, bt])
    xv = _RNG.uniform(-1, 1, (4, *xs[1:])).astype(np.float32)
    (gwv, gbv), types = _run_with_types([gw, gb], {x: xv})
    assert "_FusedConv2DBiasAddRelu" in types
    x64 = xv.astype(np.float64)
    dpre = 2 * np.maximum(_ref_conv(x64, w, (1, 1), pad, (1, 1)) + b, 0)  # d loss / d pre
    np.testing.assert_allclose(gbv, dpre.sum(axis=(0, 1, 2)), rtol=1e-5, atol=1e-5)
    # d loss / d w[i, j, c, k] = sum over outputs of dpre times the input under tap (i, j)
    kh, kw, c, oc = ws
    oh, ph = _pads(xs[1], kh, 1, 1, pad)
    ow, pw = _pads(xs[2], kw, 1, 1, pad)
    xp = np.zeros((4, xs[1] + kh, xs[2] + kw, c))
    xp[:, ph : ph + xs[1], pw : pw + xs[2]] = x64
    ref = np.zeros(ws)
    for i in range(kh):
        for j in range(kw):
            ref[i, j] = np.einsum("nhwc,nhwk->ck", xp[:, i : i + oh, j : j + ow], dpre)
    np.testing.assert_allclose(gwv, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.parametrize("use_onednn", [True, False])
def test_conv2d_bias_relu_float64_and_many_channels_keep_conv2d(use_onednn, monkeypatch):
    from asyncflow.ops import onednn

    # (float32 of many channels fuses for oneDNN's kernel where it is on)
    monkeypatch.setattr(conv_ops, "_ONEDNN", use_onednn)
    for dtype, ws in ((np.float64, (3, 3, 2, 4)), (np.float32, (3, 3, 5, 4))):
        xs = (2, 6, 5, ws[2])
        x, w, b, y = _conv_bias_relu_graph(xs, ws, "SAME", dtype)
        xv = _RNG.uniform(-1, 1, xs)
        got, types = _run_with_types(y, {x: xv.astype(dtype)})
        fused = dtype == np.float32 and use_onednn and onednn.available()
        assert ("Conv2D" in types) != fused and ("_FusedConv2DBiasAddRelu" in types) == fused
        ref = np.maximum(_ref_conv(xv, w, (1, 1), "SAME", (1, 1)) + b, 0)
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


# x shape, filter shape, conv padding, pool padding: even outputs (the loop pools), and
# an odd output (left to MaxPool's kernel: SAME pads the last window)
_FUSED_POOL = [
    ((2, 6, 8, 1), (3, 3, 1, 4), "SAME", "VALID"),
    ((1, 7, 6, 2), (2, 3, 2, 3), "VALID", "SAME"),
    ((2, 7, 5, 1), (3, 3, 1, 4), "SAME", "SAME"),
]


def _ref_pool(y, padding):
    n, h, w, c = y.shape
    oh, ow = (-(-h // 2), -(-w // 2)) if padding == "SAME" else (h // 2, w // 2)
    yp = np.full((n, 2 * oh, 2 * ow, c), -np.inf)
    yp[:, :h, :w] = y[:, : 2 * oh, : 2 * ow]
    return yp.reshape(n, oh, 2, ow, 2, c).max(axis=(2, 4))


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("xs,ws,pad,pool_pad", _FUSED_POOL, ids=lambda v: str(v))
def test_conv2d_bias_relu_max_pool_fused(xs, ws, pad, pool_pad, compiled, monkeypatch):
    from asyncflow.ops import cnn_jit

    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (the compiled loops' paths)

    if compiled and not (cnn_jit.warm_conv(*ws, pool=True) and cnn_jit.warm_conv(*ws)):
        pytest.skip("numba is not installed")
    if not compiled:
        monkeypatch.setattr(cnn_jit, "conv_bias_relu", lambda *sizes: None)
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    pooled = af.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], pool_pad)
    xv = _RNG.uniform(-1, 1, xs).astype(np.float32)
    xv[0, 2, 3, 0] = np.nan
    (got_p, got_y), types = _run_with_types([pooled, y], {x: xv})
    if y.shape.as_list()[1] % 2 or y.shape.as_list()[2] % 2:
        assert "_FusedConv2DBiasAddRelu" in types and "MaxPool" in types
    else:
        assert "_FusedConv2DBiasAddReluMaxPool" in types and "MaxPool" not in types
    ref = np.maximum(_ref_conv(xv.astype(np.float64), w, (1, 1), pad, (1, 1)) + b, 0)
    np.testing.assert_allclose(got_y, ref, rtol=1e-5, atol=1e-5)
    assert got_p.dtype == np.float32 and np.isnan(got_p).any()
    np.testing.assert_allclose(got_p, _ref_pool(ref, pool_pad), rtol=1e-5, atol=1e-5)
    # the pool of the activation itself, bit for bit (MaxPool's own kernel's values)
    np.testing.assert_array_equal(got_p, _ref_pool(got_y.astype(np.float64), pool_pad))


def _assert_pooled_layer_grads(xv, w, b, ws, pad, gwv, gbv):
    """The gradients of sum(pool(relu(conv(x, w) + b))^2) for w and b (a 2x2 stride-2
    pool) against float64 loops: each window's gradient to its first maximum."""
    x64 = xv.astype(np.float64)
    act = np.maximum(_ref_conv(x64, w, (1, 1), pad, (1, 1)) + b, 0)
    n, h, wd, oc = act.shape
    win = act.reshape(n, h // 2, 2, wd // 2, 2, oc).transpose(0, 1, 3, 5, 2, 4)
    win = win.reshape(n, h // 2, wd // 2, oc, 4)
    first = np.argmax(win, axis=-1)  # the gradient goes to each window's first maximum
    dwin = np.zeros_like(win)
    np.put_along_axis(dwin, first[..., None], 2 * win.max(axis=-1)[..., None], axis=-1)
    dact = dwin.reshape(n, h // 2, wd // 2, oc, 2, 2).transpose(0, 1, 4, 2, 5, 3)
    dpre = dact.reshape(act.shape) * (act > 0)
    np.testing.assert_allclose(gbv, dpre.sum(axis=(0, 1, 2)), rtol=1e-4, atol=1e-5)
    kh, kw, c, _ = ws
    xp = np.zeros((n, x64.shape[1] + kh, x64.shape[2] + kw, c))
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    xp[:, ph : ph + x64.shape[1], pw : pw + x64.shape[2]] = x64
    ref = np.zeros(ws)
    for i in range(kh):
        for j in range(kw):
            ref[i, j] = np.einsum("nhwc,nhwk->ck", xp[:, i : i + h, j : j + wd], dpre)
    np.testing.assert_allclose(gwv, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
def test_conv2d_bias_relu_max_pool_fused_gradients():
    from asyncflow.ops import cnn_jit

    xs, ws, pad, pool_pad = _FUSED_POOL[0]
    if not cnn_jit.warm_conv(*ws, pool=True):
        pytest.skip("numba is not installed")
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    pooled = af.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], pool_pad)
    graph_ops = ops.get_default_graph().get_operations()
    (wt,) = [op.inputs[1] for op in graph_ops if op.type == "Conv2D"]
    (bt,) = [op.inputs[1] for op in graph_ops if op.type == "BiasAdd"]
    gw, gb = af.gradients(af.reduce_sum(pooled * pooled), [wt, bt])
    xv = _RNG.uniform(-1, 1, (3, *xs[1:])).astype(np.float32)
    (gwv, gbv), types = _run_with_types([gw, gb], {x: xv})
    assert "_FusedConv2DBiasAddReluMaxPool" in types
    _assert_pooled_layer_grads(xv, w, b, ws, pad, gwv, gbv)


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
def test_pool_gradient_from_the_fused_layers_code_is_max_pool_grads(compiled, monkeypatch):
    from asyncflow.ops import cnn_jit, nn_ops

    xs, ws, pad, pool_pad = _FUSED_POOL[0]
    if compiled and not (cnn_jit.warm_conv(*ws, pool=True) and cnn_jit.warm()):
        pytest.skip("numba is not installed")
    if not compiled:
        monkeypatch.setattr(cnn_jit, "conv_bias_relu", lambda *sizes: None)
        monkeypatch.setattr(cnn_jit, "loops", lambda: None)
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    pooled = af.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], pool_pad)
    graph_ops = ops.get_default_graph().get_operations()
    (wt,) = [op.inputs[1] for op in graph_ops if op.type == "Conv2D"]
    (bt,) = [op.inputs[1] for op in graph_ops if op.type == "BiasAdd"]
    dy = af.constant(_RNG.standard_normal((4, 3, 4, 4)).astype(np.float32))
    grads = af.gradients(pooled, [wt, bt, x], grad_ys=dy)
    xv = np.zeros((4, *xs[1:]), np.float32)
    xv[0] = 1.0  # constant images: ties inside every window
    xv[1, 2:] = _RNG.standard_normal((4, 8, 1))
    xv[2] = _RNG.standard_normal(xs[1:])
    xv[3, 3, 3, 0] = np.nan
    got = {}
    for argmax in (True, False):
        monkeypatch.setattr(nn_ops, "_GRAD_OF_ARGMAX", argmax)
        got[argmax], types = _run_with_types(grads, {x: xv})
        assert ("_FusedMaxPoolGradReluGradOfArgmax" in types) == argmax
    for a, b in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)


# -- Conv2D -> BiasAdd -> Relu (-> MaxPool) on the spectral path: the bias, ReLU and pool
# applied to each block of the inverse transform's output (conv_ops.spectral_bias_relu)

# x shape, filter shape, conv padding, pool padding: batch 1 with odd outputs (the pool
# left to MaxPool), even outputs pooled in the kernel (SAME; VALID with an even filter)
_SPECTRAL = [
    ((1, 9, 7, 6), (3, 4, 6, 5), "SAME", "VALID"),
    ((2, 8, 6, 5), (3, 3, 5, 7), "SAME", "SAME"),
    ((3, 10, 9, 8), (3, 2, 8, 4), "VALID", "VALID"),
]


def _spectral_layer(xs, ws, pad, pool_pad):
    x, w, b, y = _conv_bias_relu_graph(xs, ws, pad)
    pooled = af.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], pool_pad)
    graph_ops = ops.get_default_graph().get_operations()
    (wt,) = [op.inputs[1] for op in graph_ops if op.type == "Conv2D"]
    (bt,) = [op.inputs[1] for op in graph_ops if op.type == "BiasAdd"]
    return x, w, b, y, pooled, wt, bt


def _pooled_layer_grads(xs, ws, pad, pool_pad):
    """`_spectral_layer`'s graph and the gradients of its pooled output (a random dy)
    for the filter, the bias and x."""
    x, w, b, y, pooled, wt, bt = _spectral_layer(xs, ws, pad, pool_pad)
    dys = (xs[0], *pooled.shape.as_list()[1:])
    dy = af.constant(_RNG.standard_normal(dys).astype(np.float32))
    return x, w, b, y, pooled, af.gradients(pooled, [wt, bt, x], grad_ys=dy)


def _run_fused_layer(fetches, feed, y):
    """(the fetches' values, whether y's sizes are even) from a run whose plan has the
    fused layer, with the pool where even, and no Conv2D."""
    got, types = _run_with_types(fetches, feed)
    even = not (y.shape.as_list()[1] % 2 or y.shape.as_list()[2] % 2)
    fused = "_FusedConv2DBiasAddReluMaxPool" if even else "_FusedConv2DBiasAddRelu"
    assert fused in types and "Conv2D" not in types
    return got, even


def _assert_unfused_alike(got, fetches, feed):
    """The same fetches from a run with the layers unfused (a switch the caller set) are
    `got`, bit for bit."""
    want, types = _run_with_types(fetches, feed)
    assert (
        "Conv2D" in types
        and not {"_FusedConv2DBiasAddRelu", "_FusedConv2DBiasAddReluMaxPool"} & types
    )
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a, e)


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("xs,ws,pad,pool_pad", _SPECTRAL, ids=lambda v: str(v))
def test_conv2d_bias_relu_spectral_fused(xs, ws, pad, pool_pad, compiled, monkeypatch):
    from asyncflow.ops import cnn_jit, nn_ops

    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (the compiled loops' paths)

    if compiled and not cnn_jit.warm():
        pytest.skip("numba is not installed")
    if not compiled:  # the loops not compiled (yet): Conv2D's, BiasAdd's, MaxPool's kernels
        monkeypatch.setattr(cnn_jit, "loops", lambda: None)
    monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
    monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    calls = []
    spectral = conv_ops.spectral_bias_relu
    monkeypatch.setattr(
        conv_ops, "spectral_bias_relu", lambda *a: calls.append(a[-1]) or spectral(*a)
    )
    x, w, b, y, pooled, grads = _pooled_layer_grads(xs, ws, pad, pool_pad)
    xv = _RNG.uniform(-1, 1, xs).astype(np.float32)
    # (no NaN: the spectral path's transforms spread one over its image's outputs)
    if xs[0] > 1:
        xv[1] = 0.25  # constant image: ties inside windows
    fetches = [pooled, y, *grads]
    got, even = _run_fused_layer(fetches, {x: xv}, y)
    assert calls == ([even] if compiled else [])
    ref = np.maximum(_ref_conv(xv.astype(np.float64), w, (1, 1), pad, (1, 1)) + b, 0)
    assert got[1].dtype == np.float32
    np.testing.assert_allclose(got[1], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], _ref_pool(ref, pool_pad), rtol=1e-5, atol=1e-5)
    # every value, the gradients' included, is the unfused layers' (Conv2D on the same
    # spectral path, BiasAdd + Relu, MaxPool, MaxPoolGrad + ReluGrad), bit for bit
    monkeypatch.setattr(nn_ops, "_FUSE_SPECTRAL", False)
    _assert_unfused_alike(got, fetches, {x: xv})


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
def test_conv2d_bias_relu_spectral_fused_gradients(monkeypatch):
    from asyncflow.ops import cnn_jit

    if not cnn_jit.warm():
        pytest.skip("numba is not installed")
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (the spectral path's)
    monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
    monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    xs, ws, pad, pool_pad = _SPECTRAL[1]
    x, w, b, y, pooled, wt, bt = _spectral_layer(xs, ws, pad, pool_pad)
    gw, gb = af.gradients(af.reduce_sum(pooled * pooled), [wt, bt])
    xv = _RNG.uniform(-1, 1, (3, *xs[1:])).astype(np.float32)
    (gwv, gbv), types = _run_with_types([gw, gb], {x: xv})
    assert "_FusedConv2DBiasAddReluMaxPool" in types
    assert "_FusedMaxPoolGradReluGradOfArgmax" in types
    _assert_pooled_layer_grads(xv, w, b, ws, pad, gwv, gbv)


def test_spectral_choice_of_the_pass_needs_static_sizes():
    from asyncflow.ops import nn_ops

    # LeNet's second layer goes spectral whatever the batch; its first does not
    for xs, ws, want in (((None, 14, 14, 32), (5, 5, 32, 64), True),
                         ((None, 28, 28, 1), (5, 5, 1, 32), False),
                         ((None, None, 14, 32), (5, 5, 32, 64), False)):  # fmt: skip
        x = af.placeholder(af.float32, xs)
        y = conv_ops.conv2d(x, af.zeros(ws), [1, 1, 1, 1], "SAME")
        assert nn_ops._spectral_attrs(y.op) == want


# -- the fused layers on oneDNN (ops/onednn.py): the bias and ReLU its post-ops, the pool
# and its code by cnn_jit's loops in the same call


@pytest.mark.usefixtures("_on_cpu")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("xs,ws,pad,pool_pad", _FUSED_POOL + _SPECTRAL, ids=lambda v: str(v))
def test_conv2d_bias_relu_max_pool_on_onednn(xs, ws, pad, pool_pad, monkeypatch):
    from asyncflow.devices import cpu_budget
    from asyncflow.ops import cnn_jit, nn_ops, onednn

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("oneDNN's wheel is a dependency on Linux x86-64 only")
    assert onednn.available(), onednn._state.get("failed")  # (a declared dependency)
    cnn_jit.warm()
    # One thread for every call of both runs (TF_DETERMINISTIC_OPS=1): oneDNN's filter
    # gradient splits its sums by thread, so its last bits follow the budget's choice.
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    calls = []
    bias_relu = nn_ops._onednn_bias_relu
    monkeypatch.setattr(
        nn_ops, "_onednn_bias_relu", lambda *a: calls.append(a[-1]) or bias_relu(*a)
    )
    x, w, b, y, pooled, grads = _pooled_layer_grads(xs, ws, pad, pool_pad)
    xv = _RNG.uniform(-1, 1, xs).astype(np.float32)
    xv[0, 1, 1, 0] = np.nan  # a direct convolution: NaN only where the windows hold it
    if xs[0] > 1:
        xv[1] = 0.25  # constant image: ties inside windows
    fetches = [pooled, y, *grads]
    got, even = _run_fused_layer(fetches, {x: xv}, y)
    assert calls == [even]
    ref = np.maximum(_ref_conv(xv.astype(np.float64), w, (1, 1), pad, (1, 1)) + b, 0)
    assert np.isnan(ref).any() and not np.isnan(ref).all()
    np.testing.assert_array_equal(np.isnan(got[1]), np.isnan(ref))
    np.testing.assert_allclose(got[1], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], _ref_pool(ref, pool_pad), rtol=1e-5, atol=1e-5)
    # every value, the gradients' included, is the unfused layers' (Conv2D on oneDNN,
    # BiasAdd + Relu, MaxPool, MaxPoolGrad + ReluGrad), bit for bit
    monkeypatch.setattr(nn_ops, "_FUSE_CONV", False)
    _assert_unfused_alike(got, fetches, {x: xv})
