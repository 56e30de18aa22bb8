"""The fast paths of Conv2D and its backprops, and of MaxPool / MaxPoolGrad.

conv_ops picks among four methods (spectral, full im2col, the transposed column matrix for few
channels, the H-outermost "rows" layout for stride 1 in H); every path, forced on by
lowering its thresholds, must give the straightforward NumPy reference's numbers for
every geometry (strides, dilations, SAME/VALID/EXPLICIT padding, NHWC/NCHW, dtypes).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow import session as session_mod
from asyncflow.devices import fake_cupy, gpu
from asyncflow.ops import conv_ops, pooling_ops
from asyncflow.session import Session

_RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


@pytest.fixture(params=["default", "fft", "rows", "cols_t", "im2col"])
def path(request, monkeypatch):
    """Force one layout: 'fft', 'rows' and 'cols_t' lower their thresholds to take every
    shape they can; 'im2col' turns the others off.  All but 'default' (where float32
    goes to oneDNN, ops/onednn.py) are our own paths, oneDNN off."""
    if request.param != "default":
        monkeypatch.setattr(conv_ops, "_ONEDNN", False)
    if request.param == "fft":
        monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
        monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
        monkeypatch.setattr(conv_ops, "_BLOCK_BYTES", 1)  # one image per transform block
    elif request.param != "default":
        monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", float("inf"))
    if request.param == "rows":
        monkeypatch.setattr(conv_ops, "_ROWS_MIN_K", 1)
        monkeypatch.setattr(conv_ops, "_ROWS_MIN_OC", 1)
        monkeypatch.setattr(conv_ops, "_COLS_T_MAX_C", 0)
    elif request.param == "cols_t":
        monkeypatch.setattr(conv_ops, "_ROWS_MIN_K", 10**9)
        monkeypatch.setattr(conv_ops, "_COLS_T_MAX_C", 10**9)
        monkeypatch.setattr(conv_ops, "_PER_IMAGE_MIN_ROWS", 1)
    elif request.param == "im2col":
        monkeypatch.setattr(conv_ops, "_ROWS_MIN_K", 10**9)
        monkeypatch.setattr(conv_ops, "_COLS_T_MAX_C", 0)
    return request.param


def _geometry(size, k, s, d, padding, pads):
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return (size - eff) // s + 1, 0, 0
    if padding == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + eff - size, 0)
        return out, total // 2, total - total // 2
    lo, hi = pads
    return (size + lo + hi - eff) // s + 1, lo, hi


def _reference(x, w, dy, strides, padding, dilations, pads=((0, 0), (0, 0)), skip=False):
    """Conv2D output, d(sum(y * dy))/dx and /dw by direct loops over window offsets
    (NHWC, float64).  The padding's zeros are multiplied (TF's Eigen kernels: a NaN or
    an infinity tap over them gives NaN), or with `skip` left out of every sum (oneDNN's,
    TF's default kernels on x86)."""
    n, h, wd, c = x.shape
    kh, kw, _, oc = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh, th, bh = _geometry(h, kh, sh, dh, padding, pads[0])
    ow, tw, bw = _geometry(wd, kw, sw, dw, padding, pads[1])
    hp = max(h + th + bh, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(wd + tw + bw, (ow - 1) * sw + (kw - 1) * dw + 1)
    xp = np.zeros((n, hp, wp, c))
    xp[:, th : th + h, tw : tw + wd] = x
    inside = np.zeros((1, hp, wp, 1), bool)
    inside[:, th : th + h, tw : tw + wd] = True
    y = np.zeros((n, oh, ow, oc))
    dxp = np.zeros_like(xp)
    dwr = np.zeros((kh, kw, c, oc))
    for i in range(kh):
        for j in range(kw):
            sl = (
                slice(None),
                slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
            )
            y += np.where(inside[sl], xp[sl] @ w[i, j], 0) if skip else xp[sl] @ w[i, j]
            if dy is None:
                continue
            dxp[sl] += dy @ w[i, j].T
            dy_in = np.where(inside[sl], dy, 0) if skip else dy
            dwr[i, j] = np.einsum("nhwc,nhwo->co", xp[sl], dy_in)
    return y, dxp[:, th : th + h, tw : tw + wd], dwr


# name, x shape (NHWC), filter shape, strides, padding, dilations, explicit (H, W) pads
_CASES = [
    ("lenet1", (3, 12, 12, 1), (5, 5, 1, 6), (1, 1), "SAME", (1, 1), None),
    ("lenet2", (2, 6, 7, 8), (5, 5, 8, 10), (1, 1), "SAME", (1, 1), None),
    ("valid", (2, 7, 6, 3), (3, 2, 3, 4), (1, 1), "VALID", (1, 1), None),
    ("stride_w", (2, 7, 9, 4), (3, 3, 4, 5), (1, 2), "SAME", (1, 1), None),
    ("stride_h", (2, 9, 7, 4), (3, 3, 4, 5), (2, 1), "SAME", (1, 1), None),
    ("stride2_odd", (1, 9, 8, 2), (4, 3, 2, 3), (2, 2), "SAME", (1, 1), None),
    ("dilated", (2, 9, 8, 3), (3, 3, 3, 4), (1, 1), "SAME", (2, 3), None),
    ("dilated_valid", (1, 9, 9, 2), (2, 3, 2, 3), (1, 1), "VALID", (3, 2), None),
    ("explicit", (2, 6, 5, 3), (3, 3, 3, 2), (1, 1), "EXPLICIT", (1, 1), ((1, 2), (0, 1))),
    ("explicit_wide", (1, 4, 4, 2), (2, 2, 2, 3), (1, 1), "EXPLICIT", (1, 1), ((3, 0), (0, 4))),
    # the spectral grid wraps SAME/EXPLICIT padding around: lopsided pads and dilations
    ("lopsided", (2, 5, 6, 2), (3, 4, 2, 2), (1, 1), "EXPLICIT", (2, 1), ((4, 1), (0, 5))),
    ("same_even_dilated", (1, 7, 6, 2), (4, 2, 2, 3), (1, 1), "SAME", (2, 3), None),
    ("filter_bigger", (1, 2, 3, 2), (5, 4, 2, 3), (1, 1), "SAME", (1, 1), None),
    ("one_row_filter", (2, 5, 6, 3), (1, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    ("pointwise", (2, 4, 5, 6), (1, 1, 6, 3), (1, 1), "VALID", (1, 1), None),
]


def _attrs(s, padding, d, pads, fmt):
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    if padding == "EXPLICIT":
        pairs = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]]
        if fmt == "NCHW":
            pairs = [pairs[0], pairs[3], pairs[1], pairs[2]]
        padding = pairs
    return {"strides": four(s), "padding": padding, "data_format": fmt, "dilations": four(d)}


def _to(fmt, a):
    return a.transpose(0, 3, 1, 2) if fmt == "NCHW" else a


def _from(fmt, a):
    return a.transpose(0, 2, 3, 1) if fmt == "NCHW" else a


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_conv_paths_match_reference(case, fmt, dtype, path):
    _, xs, ws, s, padding, d, pads = case
    x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
    y_ref, _, _ = _reference(x, w, None, s, padding, d, pads or ((0, 0),) * 2)
    dy = _RNG.uniform(-1, 1, y_ref.shape)
    _, dx_ref, dw_ref = _reference(x, w, dy, s, padding, d, pads or ((0, 0),) * 2)
    kw = _attrs(s, padding, d, pads, fmt)
    xc, wc = af.constant(_to(fmt, x).astype(dtype)), af.constant(w.astype(dtype))
    dyc = af.constant(_to(fmt, dy).astype(dtype))
    y = conv_ops.conv2d(xc, wc, **kw)
    dx = conv_ops.conv2d_backprop_input(list(_to(fmt, x).shape), wc, dyc, **kw)
    dw = conv_ops.conv2d_backprop_filter(xc, list(ws), dyc, **kw)
    with Session() as sess:
        y_v, dx_v, dw_v = sess.run([y, dx, dw])
    assert y_v.dtype == dx_v.dtype == dw_v.dtype == dtype
    assert y_v.flags.c_contiguous and dx_v.flags.c_contiguous
    tol = {np.float16: 3e-2, np.float32: 2e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(_from(fmt, y_v), y_ref, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(_from(fmt, dx_v), dx_ref, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(dw_v, dw_ref, rtol=tol, atol=tol * 8)


def _grouped_reference(x, w, dy, strides, padding, dilations, pads):
    """A grouped convolution (TF: input depth G times the filter's) is G ordinary ones,
    group k on input channels [k*fc, (k+1)*fc) and output channels [k*oc/G, ...)."""
    fc, oc = w.shape[2], w.shape[3]
    groups = x.shape[3] // fc
    og = oc // groups
    parts = [
        _reference(
            x[..., k * fc : (k + 1) * fc],
            w[..., k * og : (k + 1) * og],
            None if dy is None else dy[..., k * og : (k + 1) * og],
            strides,
            padding,
            dilations,
            pads,
        )  # fmt: skip
        for k in range(groups)
    ]
    return tuple(np.concatenate([p[i] for p in parts], axis=-1) for i in range(3))


_GROUPED = [
    ("two_groups", (2, 7, 6, 4), (3, 3, 2, 6), (1, 1), "SAME", (1, 1), None),
    ("three_groups_strided", (1, 9, 8, 6), (3, 2, 2, 3), (2, 2), "SAME", (1, 1), None),
    ("dilated_explicit", (2, 6, 7, 8), (2, 3, 2, 8), (1, 1), "EXPLICIT", (2, 1), ((1, 2), (0, 1))),
    ("depthwise_like", (1, 5, 5, 3), (3, 3, 1, 6), (1, 2), "VALID", (1, 1), None),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", _GROUPED, ids=[c[0] for c in _GROUPED])
def test_grouped_conv_paths_match_reference(case, fmt, path):
    """TF 2.21 runs Conv2D with an input depth that is a multiple of the filter's as a
    grouped convolution (values recorded in tests/ops/test_sem18_tf.py); its backprops
    here, on every path, are the per-group ones (TF's CPU kernels refuse them)."""
    _, xs, ws, s, padding, d, pads = case
    pads = pads or ((0, 0),) * 2
    x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
    y_ref, _, _ = _grouped_reference(x, w, None, s, padding, d, pads)
    dy = _RNG.uniform(-1, 1, y_ref.shape)
    _, dx_ref, dw_ref = _grouped_reference(x, w, dy, s, padding, d, pads)
    kw = _attrs(s, padding, d, pads, fmt)
    xc, wc, dyc = af.constant(_to(fmt, x)), af.constant(w), af.constant(_to(fmt, dy))
    y = conv_ops.conv2d(xc, wc, **kw)
    assert y.shape.as_list() == list(_to(fmt, y_ref).shape)
    dx = conv_ops.conv2d_backprop_input(list(_to(fmt, x).shape), wc, dyc, **kw)
    dw = conv_ops.conv2d_backprop_filter(xc, list(ws), dyc, **kw)
    gx, gw = af.gradients(af.reduce_sum(y * dyc), [xc, wc])
    with Session() as sess:
        y_v, dx_v, dw_v, gx_v, gw_v = sess.run([y, dx, dw, gx, gw])
    np.testing.assert_allclose(_from(fmt, y_v), y_ref, rtol=1e-12, atol=1e-12)
    for got in (dx_v, gx_v):
        np.testing.assert_allclose(_from(fmt, got), dx_ref, rtol=1e-12, atol=1e-12)
    for got in (dw_v, gw_v):
        np.testing.assert_allclose(got, dw_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch,method", [(8, "_real_images"), (1, "_rows_conv")])
def test_lenet_layer2_paths(monkeypatch, batch, method):
    """The LeNet second layer (stride 1, 5x5, 32 -> 64 channels) goes spectral at batch
    sizes where that pays, and through the rows layout below them (oneDNN off)."""
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)
    calls = []
    real = getattr(conv_ops, method)
    monkeypatch.setattr(conv_ops, method, lambda *a, **k: calls.append(1) or real(*a, **k))
    xv = _RNG.uniform(-1, 1, (batch, 14, 14, 32))
    wv = _RNG.uniform(-1, 1, (5, 5, 32, 64))
    dyv = _RNG.uniform(-1, 1, (batch, 14, 14, 64))
    # The CPU's choice (a GPU's convolutions never go spectral): pinned to the CPU, as on a
    # machine with a GPU.
    with af.device("/cpu:0"):
        x, w, dy = (af.constant(v.astype(np.float32)) for v in (xv, wv, dyv))
        outs = [
            conv_ops.conv2d(x, w, 1, "SAME"),
            conv_ops.conv2d_backprop_input([batch, 14, 14, 32], w, dy, [1, 1, 1, 1], "SAME"),
            conv_ops.conv2d_backprop_filter(x, [5, 5, 32, 64], dy, [1, 1, 1, 1], "SAME"),
        ]
    with Session() as sess:
        y, dx, dw = sess.run(outs)
    assert len(calls) == 2  # bpf: its own (filter-sized) inverse; rows: its own GEMMs
    refs = _reference(xv, wv, dyv, (1, 1), "SAME", (1, 1))
    for got, ref in zip((y, dx, dw), refs, strict=True):
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-6 * scale)


# -- max pooling ---------------------------------------------------------------------------


def _pool_reference(x, k, s, padding, dy):
    """MaxPool and MaxPoolGrad (gradient to the first maximum in row-major window order)
    by loops over windows (NHWC)."""
    n, h, w, c = x.shape
    oh, th, _ = _geometry(h, k[0], s[0], 1, padding, None)
    ow, tw, _ = _geometry(w, k[1], s[1], 1, padding, None)
    y = np.empty((n, oh, ow, c), x.dtype)
    dx = np.zeros(x.shape, x.dtype)
    for a in range(oh):
        for b in range(ow):
            r0, c0 = a * s[0] - th, b * s[1] - tw
            rs = range(max(r0, 0), min(r0 + k[0], h))
            cs = range(max(c0, 0), min(c0 + k[1], w))
            win = x[:, rs.start : rs.stop, cs.start : cs.stop, :].reshape(n, -1, c)
            y[:, a, b] = win.max(axis=1)
            if dy is None:
                continue
            first = win.argmax(axis=1)  # numpy's argmax: the first maximum
            for i in range(n):
                for ch in range(c):
                    r, q = divmod(int(first[i, ch]), len(cs))
                    dx[i, rs.start + r, cs.start + q, ch] += dy[i, a, b, ch]
    return y, dx


_POOLS = [
    ("2x2_s2_even", (3, 8, 6, 5), (2, 2), (2, 2), "VALID"),
    ("2x2_s2_same_even", (2, 6, 8, 3), (2, 2), (2, 2), "SAME"),
    ("2x2_s2_same_odd", (2, 7, 5, 3), (2, 2), (2, 2), "SAME"),
    ("2x2_s2_valid_odd", (2, 7, 5, 3), (2, 2), (2, 2), "VALID"),
    ("3x3_s3", (2, 9, 6, 2), (3, 3), (3, 3), "VALID"),
    ("3x3_s2_overlap", (2, 7, 7, 2), (3, 3), (2, 2), "SAME"),
    ("2x3_s2x3", (1, 6, 9, 4), (2, 3), (2, 3), "SAME"),
    ("1x1", (2, 3, 4, 2), (1, 1), (1, 1), "VALID"),
    ("1x2_s1x2", (2, 3, 4, 2), (1, 2), (1, 2), "VALID"),
    ("2x1_s2x1", (2, 4, 3, 2), (2, 1), (2, 1), "VALID"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", _POOLS, ids=[c[0] for c in _POOLS])
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool_paths_match_reference(case, fmt, dtype, ties):
    _, xs, k, s, padding = case
    x = _RNG.uniform(-1, 1, xs)
    if ties:  # ReLU-like: many windows of equal zeros, and repeated values
        x = np.round(np.maximum(x, 0) * 2) / 2
    x = x.astype(dtype)
    y_ref, _ = _pool_reference(x, k, s, padding, None)
    dy = _RNG.uniform(-1, 1, y_ref.shape).astype(dtype)
    y_ref, dx_ref = _pool_reference(x, k, s, padding, dy)
    four = (lambda v: [1, 1, *v]) if fmt == "NCHW" else (lambda v: [1, *v, 1])
    xc = af.constant(_to(fmt, x))
    y = pooling_ops.max_pool(xc, four(k), four(s), padding, data_format=fmt)
    attrs = {"ksize": four(k), "strides": four(s), "padding": padding, "data_format": fmt}
    dx = ops.apply_op("MaxPoolGrad", [xc, y, af.constant(_to(fmt, dy))], attrs).outputs[0]
    with Session() as sess:
        y_v, dx_v = sess.run([y, dx])
    assert y_v.dtype == dx_v.dtype == dtype
    np.testing.assert_array_equal(_from(fmt, y_v), y_ref)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(_from(fmt, dx_v), dx_ref, rtol=tol, atol=tol)


def test_max_pool_output_is_not_its_input():
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    y = pooling_ops.max_pool(af.constant(x), 1, 1, "VALID")
    with Session() as sess:
        out = sess.run(y)
    np.testing.assert_array_equal(out, x)
    out[...] = -1  # the caller owns the result
    with Session() as sess:
        np.testing.assert_array_equal(sess.run(y), x)


def test_max_pool_grad_non_finite_dy():
    """inf / nan in dy reach only the first maximum of their window."""
    x = np.array([[1.0, 1.0], [0.0, 1.0]], np.float32).reshape(1, 2, 2, 1)
    x = np.concatenate([x, x], axis=2)  # two windows
    dy = np.array([np.inf, np.nan], np.float32).reshape(1, 1, 2, 1)
    xc = af.constant(x)
    y = pooling_ops.max_pool(xc, 2, 2, "VALID")
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    dx = ops.apply_op("MaxPoolGrad", [xc, y, af.constant(dy)], attrs).outputs[0]
    with Session() as sess:
        out = sess.run(dx)[0, :, :, 0]
    np.testing.assert_array_equal(out[:, :2], [[np.inf, 0], [0, 0]])
    assert np.isnan(out[0, 2]) and not np.isnan(out[:, 3]).any() and out[1, 2] == 0


def test_spectra_memo_sees_in_place_changes(monkeypatch):
    """The remembered spectra are keyed on contents: a variable updated in place and a
    fed array mutated between runs give fresh results, not the last step's."""
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (our own paths)
    monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
    monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    xv = _RNG.uniform(-1, 1, (2, 6, 5, 3)).astype(np.float32)
    wv = _RNG.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float32)
    x = af.placeholder(af.float32, xv.shape)
    w = af.Variable(wv)
    y = conv_ops.conv2d(x, w, 1, "SAME")
    dy = af.constant(np.ones((2, 6, 5, 4), np.float32))
    dx = conv_ops.conv2d_backprop_input(list(xv.shape), w, dy, [1, 1, 1, 1], "SAME")
    update = af.assign_sub(w, np.full(wv.shape, 0.5, np.float32))
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        for step in range(3):
            w_now = wv - 0.5 * step
            y_v, dx_v = sess.run([y, dx], {x: xv})
            y_ref, dx_ref, _ = _reference(xv, w_now, np.ones((2, 6, 5, 4)), (1, 1), "SAME", (1, 1))
            np.testing.assert_allclose(y_v, y_ref, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(dx_v, dx_ref, rtol=1e-4, atol=1e-4)
            sess.run(update)
            xv *= -1  # the same fed array, changed in place


def test_spectra_memo_within_a_step(monkeypatch):
    """Inside a step, the forward pass and both backprops transform x and dy once each
    (the memo keys on the array and the step, without comparing contents), and a
    variable input changed in place between steps is transformed afresh."""
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (our own paths)
    monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
    monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    # Steps driven by this thread, kernels one after another: on a shared loop a conv
    # may go to a worker (devices/cpu.py) while the other runs, each missing the memo.
    monkeypatch.setattr(session_mod, "_runtime", None)
    calls = []
    spectrum = conv_ops._spectrum

    def counting(xp, a, *args, **kwargs):
        calls.append(a.shape)
        return spectrum(xp, a, *args, **kwargs)

    monkeypatch.setattr(conv_ops, "_spectrum", counting)
    xv = _RNG.uniform(-1, 1, (2, 6, 5, 3)).astype(np.float32)
    wv = _RNG.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float32)
    dyv = _RNG.uniform(-1, 1, (2, 6, 5, 4)).astype(np.float32)
    # The memo is the CPU kernels' (a GPU's spectra are transformed afresh each time):
    # pinned to the CPU, as on a machine with a GPU.
    with af.device("/cpu:0"):
        x = af.Variable(xv)
        y = conv_ops.conv2d(x, wv, 1, "SAME")
        loss = af.reduce_sum(y * dyv)
        (dx,) = af.gradients(loss, [x])
        dw = conv_ops.conv2d_backprop_filter(x, list(wv.shape), af.constant(dyv), 1, "SAME")
        update = af.assign_sub(x, 0.25 * dx)
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        x_now = xv.astype(np.float64)
        for _ in range(3):
            calls.clear()
            y_v, dx_v, dw_v = sess.run([y, dx, dw])
            # x once for the forward pass and the filter gradient (dy: the input
            # gradient's and the filter gradient's are different arrays here)
            assert calls.count(xv.shape) == 1
            assert calls.count(dyv.shape) == 2
            y_ref, dx_ref, dw_ref = _reference(x_now, wv, dyv, (1, 1), "SAME", (1, 1))
            np.testing.assert_allclose(y_v, y_ref, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(dx_v, dx_ref, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(dw_v, dw_ref, rtol=1e-4, atol=1e-4)
            sess.run(update)  # x changes in place
            x_now = x_now - 0.25 * dx_ref


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "xs,ks,strides,padding",
    [
        ((1, 5, 7, 1), (3, 2), (1, 1), "SAME"),  # batch 1, odd sizes, an even filter width
        ((3, 6, 5, 3), (2, 3), (1, 1), "VALID"),
        ((2, 7, 6, 2), (3, 3), (2, 1), "SAME"),  # stride 2: the strided view's copy
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_columns_compiled_and_copied_alike(
    xs, ks, strides, padding, dtype, monkeypatch
):
    from asyncflow.ops import cnn_jit

    if not cnn_jit.warm():
        pytest.skip("numba is not installed")
    x = np.random.default_rng(5).standard_normal(xs).astype(dtype)
    x[0, 0, 0, 0] = np.nan
    attrs = {"data_format": "NHWC", "strides": [1, *strides, 1], "padding": padding}
    g = conv_ops._Geom(attrs, x.shape, (*ks, xs[3], 4))
    xpad = conv_ops.pad_spatial(np, x, *g.pad)
    compiled = g.cols_t(np, xpad, 1 % xs[0], xs[0]).copy()
    monkeypatch.setattr(cnn_jit, "loops", lambda: None)
    copied = g.cols_t(np, xpad, 1 % xs[0], xs[0])
    np.testing.assert_array_equal(compiled, copied)
    # and the windows themselves: row (i, j, c) holds input (oh + i, ow + j, c)
    n = xs[0] - 1 % xs[0]
    want = np.stack(
        [
            xpad[1 % xs[0] :, i : i + g.oh * g.sh : g.sh, j : j + g.ow * g.sw : g.sw, c]
            for i in range(ks[0])
            for j in range(ks[1])
            for c in range(xs[3])
        ]
    ).reshape(-1, n * g.oh * g.ow)
    np.testing.assert_array_equal(compiled, want)


def _same_values(got, ref, tol=1e-4):
    """NaN where ref has NaN, the same infinities, the finite values close."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    np.testing.assert_array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=tol, atol=tol)


def _spectral_counted(monkeypatch) -> list:
    """The spectral path for every shape it can take; a list that grows by one for each
    spectrum made."""
    monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
    monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    spectra = []
    real = conv_ops._spectrum_of
    monkeypatch.setattr(
        conv_ops, "_spectrum_of", lambda *a, **k: spectra.append(1) or real(*a, **k)
    )
    return spectra


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_reaches_only_its_windows_outputs(bad, fmt, monkeypatch):
    """TF's direct convolution: a NaN or an infinity in x (or dy) reaches only the
    outputs (gradients) whose windows hold it, an infinity as an infinity.  The spectral
    path would mix it into every frequency of its image (NaN over all of it), so a
    non-finite operand takes the direct path; finite ones stay spectral.  (On the CPU;
    a GPU's convolutions never go spectral: the test below.)"""
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (our own paths)
    spectra = _spectral_counted(monkeypatch)
    xv = _RNG.uniform(-1, 1, (2, 9, 8, 3))
    wv = _RNG.uniform(-1, 1, (3, 3, 3, 4))
    dyv = _RNG.uniform(-1, 1, (2, 9, 8, 4))
    nchw = fmt == "NCHW"  # (its arrays transposed around the NHWC computation)
    to = (lambda a: a.transpose(0, 3, 1, 2)) if nchw else (lambda a: a)
    back = (lambda a: a.transpose(0, 2, 3, 1)) if nchw else (lambda a: a)
    with ops.device("/cpu:0"):
        x = af.placeholder(af.float32, to(xv).shape)
        dy = af.placeholder(af.float32, to(dyv).shape)
        w = af.constant(wv.astype(np.float32))
        one = [1, 1, 1, 1]
        y = conv_ops.conv2d(x, w, one, "SAME", data_format=fmt)
        dx = conv_ops.conv2d_backprop_input(
            list(to(xv).shape), w, dy, one, "SAME", data_format=fmt
        )
        dw = conv_ops.conv2d_backprop_filter(x, list(wv.shape), dy, one, "SAME", data_format=fmt)
    x_bad, dy_bad = xv.copy(), dyv.copy()
    x_bad[0, 4, 3, 1] = bad
    dy_bad[1, 2, 5, 0] = bad
    with Session() as sess:
        for xs, dys, spectral in ((xv, dyv, True), (x_bad, dyv, False), (xv, dy_bad, False)):
            spectra.clear()
            feed = {x: to(xs).astype(np.float32), dy: to(dys).astype(np.float32)}
            y_v, dx_v, dw_v = sess.run([y, dx, dw], feed)
            ref = _reference(xs, wv, dys, (1, 1), "SAME", (1, 1))
            for g, r in zip((back(y_v), back(dx_v), dw_v), ref):
                _same_values(g, r)
            if spectral:
                assert spectra  # (the finite run is the spectral path's)
    assert not np.isfinite(ref[1]).all() and np.isfinite(ref[1][0]).all()  # (dx: image 1 only)


# -- oneDNN (ops/onednn.py) ----------------------------------------------------------------


def _counting_onednn(monkeypatch):
    """{kind: calls oneDNN took} for the three convolutions, counted as they return."""
    from asyncflow.ops import onednn

    taken = {"forward": 0, "data": 0, "weights": 0}
    for name, kind in (
        ("conv_forward", "forward"),
        ("conv_backward_data", "data"),
        ("conv_backward_weights", "weights"),
    ):
        real = getattr(onednn, name)

        def counted(*a, _real=real, _kind=kind, **k):
            out = _real(*a, **k)
            taken[_kind] += out is not None
            return out

        monkeypatch.setattr(onednn, name, counted)
    return taken


def _onednn_or_skip():
    import platform
    import sys

    from asyncflow.ops import onednn

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("oneDNN's wheel is a dependency on Linux x86-64 only")
    assert onednn.available(), onednn._state.get("failed")  # (a declared dependency)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_onednn_takes_float32_convolutions(case, fmt, monkeypatch):
    """Every float32 geometry of the table goes to oneDNN, forward and both backprops, in
    either data format, and gives the float64 reference's numbers."""
    _onednn_or_skip()
    taken = _counting_onednn(monkeypatch)
    _, xs, ws, s, padding, d, pads = case
    x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
    pads = pads or ((0, 0),) * 2
    y_ref, _, _ = _reference(x, w, None, s, padding, d, pads)
    dy = _RNG.uniform(-1, 1, y_ref.shape)
    _, dx_ref, dw_ref = _reference(x, w, dy, s, padding, d, pads)
    kw = _attrs(s, padding, d, pads, fmt)
    xc, wc = af.constant(_to(fmt, x).astype(np.float32)), af.constant(w.astype(np.float32))
    dyc = af.constant(_to(fmt, dy).astype(np.float32))
    with af.device("/cpu:0"):
        y = conv_ops.conv2d(xc, wc, **kw)
        dx = conv_ops.conv2d_backprop_input(list(_to(fmt, x).shape), wc, dyc, **kw)
        dw = conv_ops.conv2d_backprop_filter(xc, list(ws), dyc, **kw)
    with Session() as sess:
        y_v, dx_v, dw_v = sess.run([y, dx, dw])
    assert taken == {"forward": 1, "data": 1, "weights": 1}
    assert y_v.dtype == dx_v.dtype == dw_v.dtype == np.float32
    assert y_v.shape == _to(fmt, y_ref).shape and dx_v.shape == _to(fmt, x).shape
    np.testing.assert_allclose(_from(fmt, y_v), y_ref, rtol=2e-5, atol=8e-5)
    np.testing.assert_allclose(_from(fmt, dx_v), dx_ref, rtol=2e-5, atol=8e-5)
    np.testing.assert_allclose(dw_v, dw_ref, rtol=2e-5, atol=1.6e-4)


@pytest.mark.timeout(120)
def test_onednn_lenet_sizes_and_other_dtypes(monkeypatch):
    """LeNet's layers at a training batch go to oneDNN (its blocked kernels); float64 and
    float16 keep our own paths."""
    _onednn_or_skip()
    taken = _counting_onednn(monkeypatch)
    for xs, ws in (((16, 28, 28, 1), (5, 5, 1, 32)), ((16, 14, 14, 32), (5, 5, 32, 64))):
        x, w = _RNG.uniform(-1, 1, xs), _RNG.uniform(-1, 1, ws)
        dy = _RNG.uniform(-1, 1, (*xs[:3], ws[3]))
        refs = _reference(x, w, dy, (1, 1), "SAME", (1, 1))
        for dtype in (np.float32, np.float64):
            xc, wc, dyc = (af.constant(v.astype(dtype)) for v in (x, w, dy))
            with af.device("/cpu:0"):
                outs = [
                    conv_ops.conv2d(xc, wc, 1, "SAME"),
                    conv_ops.conv2d_backprop_input(list(xs), wc, dyc, [1, 1, 1, 1], "SAME"),
                    conv_ops.conv2d_backprop_filter(xc, list(ws), dyc, [1, 1, 1, 1], "SAME"),
                ]
            with Session() as sess:
                got = sess.run(outs)
            tol = 2e-5 if dtype == np.float32 else 1e-12
            for g, r in zip(got, refs, strict=True):
                assert g.dtype == dtype
                np.testing.assert_allclose(g, r, rtol=tol, atol=tol * np.abs(r).max())
    assert taken == {"forward": 2, "data": 2, "weights": 2}  # (float32's only)


@pytest.mark.timeout(120)
def test_onednn_calls_from_threads_at_once():
    """The same primitives run from several threads at once (each call its own
    scratchpad and memory objects) give each thread's own results, as run alone."""
    import concurrent.futures

    from asyncflow.ops import onednn

    _onednn_or_skip()
    attrs = {"data_format": "NHWC", "strides": [1] * 4, "padding": "SAME"}
    xs = [_RNG.uniform(-1, 1, (8, 14, 14, 32)).astype(np.float32) for _ in range(4)]
    w = _RNG.uniform(-1, 1, (5, 5, 32, 64)).astype(np.float32)
    g = conv_ops._Geom(attrs, xs[0].shape, w.shape)
    alone = [onednn.conv_forward(g, x, w, "NHWC", threads=1) for x in xs]

    def many(i):
        return [onednn.conv_forward(g, xs[i % 4], w, "NHWC", threads=1) for _ in range(5)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(many, range(8)))
    for i, runs in enumerate(results):
        for y in runs:
            np.testing.assert_array_equal(y, alone[i % 4])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_onednn_non_finite_values_as_tf_default_kernels(padding, bad, fmt, monkeypatch):
    """On oneDNN (TF 2.21's default CPU kernels on x86) a NaN or an infinity in x, dy or
    the filter reaches only the outputs whose windows hold it, and the padding takes no
    part in any sum: a non-finite filter tap over it gives no NaN there (TF's Eigen
    kernels, and our own paths, multiply its zeros)."""
    _onednn_or_skip()
    taken = _counting_onednn(monkeypatch)
    xs, ws = (2, 9, 8, 3), (3, 3, 3, 4)
    rng = np.random.default_rng(5)
    xv, wv = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
    wv[1, 1, 2, 0] = 0.0  # an infinity at this tap: inf * 0 = NaN
    y_shape = _reference(xv, wv, None, (1, 1), padding, (1, 1))[0].shape
    dyv = rng.uniform(-1, 1, y_shape)
    x_bad, dy_bad, w_bad = xv.copy(), dyv.copy(), wv.copy()
    x_bad[1, 4, 4, 2] = bad
    dy_bad[0, y_shape[1] - 1, 0, 3] = bad
    w_bad[2, 0, 2, 3] = bad
    to, back = (_to, _from) if fmt == "NCHW" else ((lambda f, a: a),) * 2
    with af.device("/cpu:0"):
        x = af.placeholder(af.float32, to(fmt, xv).shape)
        dy = af.placeholder(af.float32, to(fmt, dyv).shape)
        w = af.placeholder(af.float32, ws)
        one = [1, 1, 1, 1]
        y = conv_ops.conv2d(x, w, one, padding, data_format=fmt)
        shape = list(to(fmt, xv).shape)
        dx = conv_ops.conv2d_backprop_input(shape, w, dy, one, padding, data_format=fmt)
        dw = conv_ops.conv2d_backprop_filter(x, list(ws), dy, one, padding, data_format=fmt)
    runs = ((x_bad, wv, dyv), (xv, wv, dy_bad), (xv, w_bad, dyv))
    with Session() as sess:
        for xa, wa, dya in runs:
            feed = {x: to(fmt, xa).astype(np.float32), w: wa.astype(np.float32)}
            feed[dy] = to(fmt, dya).astype(np.float32)
            y_v, dx_v, dw_v = sess.run([y, dx, dw], feed)
            ref = _reference(xa, wa, dya, (1, 1), padding, (1, 1), skip=True)
            assert any(not np.isfinite(r).all() for r in ref)
            for got, r in zip((back(fmt, y_v), back(fmt, dx_v), dw_v), ref, strict=True):
                _same_values(got.astype(np.float64), r, 1e-4)
    assert taken == {"forward": 3, "data": 3, "weights": 3}


@pytest.fixture
def fake_gpu(monkeypatch):
    """The stand-in GPU, unless this process has a real one (make test-gpu)."""
    if os.environ.get("ASYNCFLOW_FAKE_GPUS", "0") == "0" and gpu.unavailable_reason():
        monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# name, x shape (NHWC), filter shape, padding, dtype
_NON_FINITE = [
    ("same", (2, 9, 8, 3), (3, 3, 3, 4), "SAME", np.float32),
    ("batch1_valid_f64", (1, 7, 6, 2), (2, 3, 2, 3), "VALID", np.float64),
    ("odd_f16", (1, 5, 7, 3), (3, 2, 3, 2), "SAME", np.float16),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device", ["/gpu:0", "/cpu:0"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("case", _NON_FINITE, ids=[c[0] for c in _NON_FINITE])
def test_non_finite_values_on_each_device_as_the_direct_method(
    case, bad, fmt, device, request, monkeypatch
):
    """A NaN or an infinity in x, dy or the filter gives what the direct method gives
    (float64 loops), on a GPU as on the CPU: NaN or an infinity only where a window
    holds it, an infinity times a zero tap NaN, the finite values as ever.  Sizes are
    ones the spectral path would take: the CPU takes it for finite operands, a GPU
    never (reading whether an operand is finite would block the calling thread on the
    stream), and a GPU's kernels read nothing back to the host.  The loops multiply the
    padding's zeros, as TF 2.21's Eigen kernels do (TF_ENABLE_ONEDNN_OPTS=0: the same
    NaN and infinities in all 81 outputs of the 27 bad runs here, NHWC); its oneDNN ones
    (x86's default) skip the padding, so under SAME a non-finite filter tap's outputs
    and dy's filter gradient differ there (12 of the 81)."""
    if device == "/gpu:0":
        request.getfixturevalue("fake_gpu")
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)  # (our own paths: oneDNN's test above)
    spectra = _spectral_counted(monkeypatch)
    _, xs, ws, padding, dtype = case
    rng = np.random.default_rng(3)
    xv, wv = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
    n, h, wd, c = xs
    kh, kw, _, oc = ws
    wv[kh // 2, kw // 2, c - 1, 0] = 0.0  # an infinity at this tap: inf * 0 = NaN
    y_shape = _reference(xv, wv, None, (1, 1), padding, (1, 1))[0].shape
    dyv = rng.uniform(-1, 1, y_shape)
    x_bad, dy_bad, w_bad = xv.copy(), dyv.copy(), wv.copy()
    x_bad[n - 1, h // 2, wd // 2, c - 1] = bad
    dy_bad[0, y_shape[1] - 1, 0, oc - 1] = bad
    w_bad[kh - 1, 0, c - 1, oc - 1] = bad
    nchw = fmt == "NCHW"
    to = (lambda a: a.transpose(0, 3, 1, 2)) if nchw else (lambda a: a)
    back = (lambda a: a.transpose(0, 2, 3, 1)) if nchw else (lambda a: a)
    af_dtype = af.as_dtype(dtype)
    with ops.device(device):
        x = af.placeholder(af_dtype, to(xv).shape)
        dy = af.placeholder(af_dtype, to(dyv).shape)
        w = af.placeholder(af_dtype, ws)
        one = [1, 1, 1, 1]
        y = conv_ops.conv2d(x, w, one, padding, data_format=fmt)
        dx = conv_ops.conv2d_backprop_input(
            list(to(xv).shape), w, dy, one, padding, data_format=fmt
        )
        dw = conv_ops.conv2d_backprop_filter(x, list(ws), dy, one, padding, data_format=fmt)
    tol = 3e-2 if dtype == np.float16 else 1e-4
    runs = ((xv, wv, dyv), (x_bad, wv, dyv), (xv, wv, dy_bad), (xv, w_bad, dyv))
    with Session() as sess:
        for i, (xa, wa, dya) in enumerate(runs):
            spectra.clear()
            feed = {x: to(xa).astype(dtype), w: wa.astype(dtype), dy: to(dya).astype(dtype)}
            if device == "/gpu:0" and os.environ.get("ASYNCFLOW_FAKE_GPUS"):
                fake_cupy.reset_launches()
            y_v, dx_v, dw_v = sess.run([y, dx, dw], feed)
            assert y_v.dtype == dx_v.dtype == dw_v.dtype == dtype
            ref = _reference(xa, wa, dya, (1, 1), padding, (1, 1))
            for got, r in zip((back(y_v), back(dx_v), dw_v), ref, strict=True):
                _same_values(got.astype(np.float64), r, tol)
            if i:  # (each bad operand reaches some outputs, not all of them)
                assert any(not np.isfinite(r).all() for r in ref)
                assert all(np.isfinite(r).any() for r in ref)
            if i == 1:  # (an infinity too: times the zero tap)
                assert np.isnan(ref[0][..., 0]).any()
            if device == "/cpu:0":
                assert spectra or i  # (the finite run is the spectral path's)
            else:
                assert not spectra
                if os.environ.get("ASYNCFLOW_FAKE_GPUS"):
                    done = fake_cupy.launches()
                    assert done["kernels"] and not done["sync"]


@pytest.mark.timeout(120)
def test_onednn_declining_a_primitive_leaves_our_own_path(monkeypatch):
    """A primitive oneDNN does not make (unimplemented, or an argument it rejects) is
    remembered as declined, and the convolution takes our own path, every time."""
    from asyncflow.ops import onednn

    _onednn_or_skip()
    made = []

    def failing(*args):
        made.append(1)
        raise onednn._Failed("oneDNN call failed with status 2")

    monkeypatch.setattr(onednn, "_cache", {})
    monkeypatch.setattr(onednn, "_forward_prim", failing)
    taken = _counting_onednn(monkeypatch)
    x, w = _RNG.uniform(-1, 1, (2, 7, 6, 3)), _RNG.uniform(-1, 1, (3, 3, 3, 4))
    y_ref = _reference(x, w, None, (1, 1), "SAME", (1, 1))[0]
    with af.device("/cpu:0"):
        y = conv_ops.conv2d(af.constant(x.astype(np.float32)), w.astype(np.float32), 1, "SAME")
    with Session() as sess:
        for _ in range(3):
            np.testing.assert_allclose(sess.run(y), y_ref, rtol=2e-5, atol=8e-5)
    assert made == [1] and taken["forward"] == 0


_FORK_CHILD = """
import os
import numpy as np
from asyncflow.devices import cpu_budget
from asyncflow.ops import conv_ops, onednn
attrs = {"data_format": "NHWC", "strides": [1] * 4, "padding": "SAME"}
rng = np.random.default_rng(2)
x = rng.uniform(-1, 1, (16, 14, 14, 32)).astype(np.float32)
w = rng.uniform(-1, 1, (5, 5, 32, 64)).astype(np.float32)
g = conv_ops._Geom(attrs, x.shape, w.shape)
y0 = onednn.conv_forward(g, x, w, "NHWC", threads=2)  # (GNU OpenMP's team started)
pid = os.fork()
if pid == 0:
    y = cpu_budget.call(onednn.conv_forward, (g, x, w, "NHWC"))
    os._exit(0 if onednn._threads() == 1 and np.allclose(y, y0, rtol=1e-5, atol=1e-4) else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.timeout(120)
def test_onednn_in_a_forked_child():
    """A child forked after oneDNN ran on two OpenMP threads (whose team does not survive
    the fork) makes its convolutions on one thread, and does not hang."""
    import subprocess
    import sys

    _onednn_or_skip()
    out = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True, timeout=100
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("child 0")


@pytest.mark.timeout(120)
def test_onednn_filter_gradient_is_deterministic_on_one_thread(monkeypatch):
    """Under TF_DETERMINISTIC_OPS=1 oneDNN's calls take one thread whatever the budget
    grants, so the filter gradient, whose sums two threads split, has one set of bits."""
    from asyncflow.devices import cpu_budget
    from asyncflow.ops import onednn

    _onednn_or_skip()
    attrs = {"data_format": "NHWC", "strides": [1] * 4, "padding": "SAME"}
    x = _RNG.standard_normal((4, 12, 10, 8)).astype(np.float32)
    dy = _RNG.standard_normal((4, 12, 10, 16)).astype(np.float32)
    g = conv_ops._Geom(attrs, x.shape, (3, 3, 8, 16))
    one = onednn.conv_backward_weights(g, x, dy, "NHWC")  # (granted nothing: threads_now)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    assert onednn._threads() == 1
    want = None
    for grant in (1, 2, 1, 2):
        monkeypatch.setattr(cpu_budget, "granted", lambda grant=grant: grant)
        got = onednn.conv_backward_weights(g, x, dy, "NHWC")
        want = got if want is None else want
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(want, one, rtol=1e-5, atol=1e-4)
