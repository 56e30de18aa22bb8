"""ops.elementwise (the few-pass activation numerics) against NumPy references.

Each function runs with a new result, and written into each buffer a kernel may donate
(its input itself, or either input of a gradient), in float16, float32 and float64;
then the ops that use them run through a session at sizes past the inline threshold,
so the device's compute path and the donated (in-place) path are the ones exercised.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import elementwise as ew

F16, F32, F64 = np.float16, np.float32, np.float64
_RTOL = {F16: 2e-3, F32: 2e-6, F64: 1e-13}


def _sigmoid_ref(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def _softplus_ref(x):
    x = x.astype(np.float64)
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


UNARY = [
    ("sigmoid", ew.sigmoid, _sigmoid_ref),
    ("softplus", ew.softplus, _softplus_ref),
]
BINARY = [  # fn(xp, a, b, out), reference(a, b)
    ("sigmoid_grad", ew.sigmoid_grad, lambda y, dy: dy * y * (1 - y)),
    ("tanh_grad", ew.tanh_grad, lambda y, dy: dy * (1 - y * y)),
    ("softplus_grad", ew.softplus_grad, lambda g, x: g * _sigmoid_ref(x)),
]


def _close(out, ref, dtype):
    assert out.dtype == dtype
    ref = ref.astype(dtype)  # the reference rounded once, as the kernel rounds
    np.testing.assert_allclose(out, ref, rtol=_RTOL[dtype], atol=_RTOL[dtype])


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("name,fn,ref", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("where", ["new", "in_place"])
def test_unary(name, fn, ref, dtype, where):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((37, 51)) * 6).astype(dtype)
    x[0, :6] = [0, -30, 30, -100, 100, -1e-3]  # saturation and the no-overflow range
    expect = ref(x)
    if where == "new":
        out = fn(np, x.copy())
    else:
        buf = x.copy()
        out = fn(np, buf, out=buf)
        assert out is buf
    with np.errstate(all="ignore"):
        _close(out, expect, dtype)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("name,fn,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("where", ["new", "first", "second"])
def test_binary(name, fn, ref, dtype, where):
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (29, 43)).astype(dtype)
    b = rng.uniform(-3, 3, (29, 43)).astype(dtype)
    expect = ref(a.astype(np.float64), b.astype(np.float64))
    a2, b2 = a.copy(), b.copy()
    out = {"new": None, "first": a2, "second": b2}[where]
    got = fn(np, a2, b2, out)
    if out is not None:
        assert got is out
    _close(got, expect, dtype)


def test_sigmoid_complex():
    z = np.array([0.5 + 1j, -2 - 0.25j], np.complex128)
    np.testing.assert_allclose(ew.sigmoid(np, z), 1 / (1 + np.exp(-z)), rtol=1e-14)


# -- through a session: the compute path (past the inline size) and donated buffers ---------

_SHAPE = (96, 80)  # 7,680 elements: past math_ops._INLINE_ELEMENTS


def _run(fetches, feeds):
    with af.Session() as sess:
        return sess.run(fetches, feeds)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize(
    "builder,ref",
    [
        (af.sigmoid, _sigmoid_ref),
        (af.nn.softplus, _softplus_ref),
        (af.tanh, lambda x: np.tanh(x.astype(np.float64))),
        (af.exp, lambda x: np.exp(x.astype(np.float64))),
        (af.log, lambda x: np.log(np.abs(x.astype(np.float64)) + 2)),
    ],
    ids=["sigmoid", "softplus", "tanh", "exp", "log"],
)
def test_large_ops_new_and_donated(builder, ref, dtype):
    x_np = np.random.default_rng(3).uniform(-4, 4, _SHAPE).astype(dtype)
    with af.Graph().as_default():
        x = af.placeholder(dtype, _SHAPE)
        arg = af.abs(x) + 2 if builder is af.log else x
        direct = builder(arg)  # the input is a feed (or read elsewhere): a new result
        fresh = builder(arg * 1)  # a fresh value with one consumer: written in place
        got_direct, got_fresh, x_after = _run([direct, fresh, x], {x: x_np})
    expect = ref(x_np)
    _close(got_direct, expect, dtype)
    _close(got_fresh, expect, dtype)
    np.testing.assert_array_equal(x_after, x_np)  # the fed value was not overwritten


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("act", ["sigmoid", "tanh", "softplus"])
def test_large_activation_gradients(act, dtype):
    rng = np.random.default_rng(4)
    x_np = rng.uniform(-3, 3, _SHAPE).astype(dtype)
    w_np = rng.uniform(-1, 1, _SHAPE).astype(dtype)
    builder = {"sigmoid": af.sigmoid, "tanh": af.tanh, "softplus": af.nn.softplus}[act]
    with af.Graph().as_default():
        x = af.placeholder(dtype, _SHAPE)
        w = af.placeholder(dtype, _SHAPE)
        y = builder(x)
        (gx,) = af.gradients(af.reduce_sum(y * w), [x])
        types = {op.type for op in af.get_default_graph().get_operations()}
        got = _run(gx, {x: x_np, w: w_np})
    x64, w64 = x_np.astype(np.float64), w_np.astype(np.float64)
    s = _sigmoid_ref(x64)
    y64 = {"sigmoid": s, "tanh": np.tanh(x64), "softplus": _softplus_ref(x64)}[act]
    y64 = y64.astype(dtype).astype(np.float64)  # the gradient reads the rounded output
    deriv = {"sigmoid": y64 * (1 - y64), "tanh": 1 - y64 * y64, "softplus": s}[act]
    _close(got, w64 * deriv, dtype)
    assert {"sigmoid": "SigmoidGrad", "tanh": "TanhGrad", "softplus": "SoftplusGrad"}[
        act
    ] in types


@pytest.mark.parametrize("act", ["sigmoid", "tanh"])
def test_second_derivative_against_finite_differences(act):
    x_np = np.random.default_rng(5).uniform(-2, 2, (7,))
    builder = af.sigmoid if act == "sigmoid" else af.tanh
    with af.Graph().as_default():
        x = af.placeholder(af.float64, (7,))
        (g,) = af.gradients(af.reduce_sum(builder(x)), [x])
        (gg,) = af.gradients(af.reduce_sum(g), [x])
        fn = af.get_default_graph()
        with af.Session(graph=fn) as sess:
            got = sess.run(gg, {x: x_np})
            h = 1e-6
            fd = (sess.run(g, {x: x_np + h}) - sess.run(g, {x: x_np - h})) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


# -- large tensors over the CPU budget's threads (ops.elementwise.parallel) ----------------

_BIG = (400, 500)  # 200,000 elements: several blocks of elementwise._BLOCK


@pytest.fixture
def two_threads(monkeypatch):
    from asyncflow.devices import cpu_budget

    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: 2)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize(
    "fn,n_in",
    [(ew.sigmoid, 1), (ew.softplus, 1), (ew.ufunc("exp"), 1), (ew.ufunc("tanh"), 1)]
    + [(fn, 2) for _, fn, _ in BINARY],
    ids=["sigmoid", "softplus", "exp", "tanh", "sigmoid_grad", "tanh_grad", "softplus_grad"],
)
@pytest.mark.parametrize("where", ["new", "first", "last"])
def test_parallel_blocks_equal_one_call(fn, n_in, dtype, where, two_threads):
    rng = np.random.default_rng(6)
    inputs = [rng.uniform(-3, 3, _BIG).astype(dtype) for _ in range(n_in)]
    with np.errstate(all="ignore"):
        expect = fn(np, *[a.copy() for a in inputs], None)
    args = tuple(a.copy() for a in inputs)
    out = {"new": None, "first": args[0], "last": args[-1]}[where]
    got = ew.parallel(np, fn, args, out)
    if out is not None:
        assert got is out
    np.testing.assert_array_equal(got, expect)  # element-wise: bitwise the same


def test_parallel_ops_through_a_session(two_threads):
    x_np = np.random.default_rng(8).uniform(-4, 4, _BIG).astype(F32)
    with af.Graph().as_default():
        x = af.placeholder(F32, _BIG)
        y = af.sigmoid(x * 1)  # donated: in place, in blocks
        (g,) = af.gradients(af.reduce_sum(af.tanh(x) * y), [x])
        got_y, got_g = _run([y, g], {x: x_np})
    x64 = x_np.astype(np.float64)
    s, t = _sigmoid_ref(x64), np.tanh(x64)
    _close(got_y, s, F32)
    expect = (1 - t * t) * s + t * s * (1 - s)
    np.testing.assert_allclose(got_g, expect, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize(
    "name,fn,n_in",
    [(u[0], u[1], 1) for u in UNARY] + [("tanh", ew.tanh, 1)] + [(b[0], b[1], 2) for b in BINARY],
    ids=[u[0] for u in UNARY] + ["tanh"] + [b[0] for b in BINARY],
)
def test_zero_d_values_as_one_element(name, fn, n_in, dtype):
    # NumPy's ufuncs return scalars for 0-d operands; each function still gives a 0-d
    # array, new or written into `out`, equal to its one-element result.
    args = [np.array(v, dtype) for v in (0.75, -0.5)[:n_in]]
    want = fn(np, *(a.reshape(1) for a in args))[0]
    got = fn(np, *args)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == dtype
    assert got == want
    out = np.empty((), dtype)
    assert fn(np, *args, out) is out and out == want


def test_scalar_activations_and_their_gradients_through_a_session():
    with af.Graph().as_default(), af.device("/cpu:0"):
        c = af.constant(0.5)
        acts = [af.sigmoid(c), af.nn.softplus(c), af.tanh(c)]
        grads = [af.gradients(a, c)[0] for a in acts]
        with af.Session() as sess:
            got = sess.run(acts + grads)
    s = 1 / (1 + np.exp(-0.5))
    want = [s, np.log1p(np.exp(0.5)), np.tanh(0.5), s * (1 - s), s, 1 - np.tanh(0.5) ** 2]
    for g in got:
        assert np.shape(g) == ()
    np.testing.assert_allclose(np.array(got, np.float64), want, rtol=1e-6)
