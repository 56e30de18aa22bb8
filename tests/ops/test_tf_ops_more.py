"""TF's LeakyRelu, Selu, DivNoNan, MulNoNan and BroadcastTo as ops (they were built
from other ops here, so a GraphDef TF wrote with them did not load), with their
gradients, against TF 2.21's recorded results (tests/fixtures/tf_ops_more/, recorded by
record_tf_ops_more.py from tf_ops_more_cases.py):

- the same graph built by asyncflow gives TF's values and gradients;
- TF's own GraphDef (TF's gradient ops: LeakyReluGrad, SeluGrad, a Sum's BroadcastTo,
  DynamicStitch...) imports and runs to the same values;
- kernels against NumPy, gradients by finite differences, and the errors of bad shapes.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import tf_ops_more_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "tf_ops_more" / "values.json").read_text())
NAMES = ["x", "y", "xn", "b"]


def _close(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype)
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-6, atol=1e-6)


def test_built_here_matches_tf():
    with tf.Graph().as_default() as g:
        out = cases.build(tf)
        feeds = cases.feeds([g.get_tensor_by_name(n + ":0") for n in NAMES])
        with tf.Session() as sess:
            got = sess.run(out, feeds)
    assert out["leaky"].op.type == "LeakyRelu" and out["selu"].op.type == "Selu"
    assert out["div_no_nan"].op.type == "DivNoNan" and out["mul_no_nan"].op.type == "MulNoNan"
    assert out["broadcast"].op.type == "BroadcastTo" and out["lrn"].op.type == "LRN"
    assert set(got) == set(TABLE)
    for k, rec in TABLE.items():
        _close(got[k], rec["value"], rec["dtype"])


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "tf_ops_more" / "graph.pb").read_bytes())
    types = {n.op for n in gd.node}
    assert {"LeakyReluGrad", "SeluGrad", "BroadcastTo", "DivNoNan", "MulNoNan"} <= types
    assert {"LRN", "LRNGrad"} <= types
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        feeds = cases.feeds([g.get_tensor_by_name(n + ":0") for n in NAMES])
        fetch = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in TABLE.items()}
        with tf.Session() as sess:
            got = sess.run(fetch, feeds)
    for k, rec in TABLE.items():
        _close(got[k], rec["value"], rec["dtype"])


_RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_kernels_against_numpy(dtype):
    x = _RNG.uniform(-4, 4, (5, 6)).astype(dtype)
    y = np.where(_RNG.random((5, 6)) < 0.3, 0, _RNG.uniform(-3, 3, (5, 6))).astype(dtype)
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run([
            tf.nn.leaky_relu(x, 0.3), tf.nn.selu(x), tf.div_no_nan(x, y),
            tf.math.multiply_no_nan(x, y), tf.broadcast_to(x[:1], [3, 5, 6]),
        ])  # fmt: skip
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        want = [
            np.where(x64 > 0, x64, 0.3 * x64),
            np.where(x64 < 0, 1.7580993408473768 * np.expm1(x64), 1.0507009873554805 * x64),
            np.where(y64 == 0, 0, x64 / y64),
            np.where(y64 == 0, 0, x64 * y64),
            np.broadcast_to(x64[:1], (3, 5, 6)),
        ]
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}[dtype]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol, atol=tol)


def test_complex_div_and_mul_no_nan():
    x = np.array([1 + 2j, np.inf + 0j, 3 - 1j], np.complex64)
    y = np.array([0j, 0j, 1 + 1j], np.complex64)
    with tf.Graph().as_default(), tf.Session() as sess:
        d, m = sess.run([tf.div_no_nan(x, y), tf.math.multiply_no_nan(x, y)])
    np.testing.assert_array_equal(d, [0, 0, (3 - 1j) / (1 + 1j)])
    np.testing.assert_array_equal(m, [0, 0, (3 - 1j) * (1 + 1j)])


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "build",
    [
        lambda t, x: t.nn.leaky_relu(x, 0.2),
        lambda t, x: t.nn.leaky_relu(x, 1.7),
        lambda t, x: t.nn.selu(x),
        lambda t, x: t.div_no_nan(x, t.constant([[2.0, -0.5, 4.0]], t.float64)),
        lambda t, x: t.math.multiply_no_nan(x, t.constant([[2.0, 0.0, -3.0]], t.float64)),
        lambda t, x: t.broadcast_to(t.expand_dims(x[:, :1], 1), [2, 4, 3]),
        lambda t, x: t.broadcast_to(t.reshape(x, [2, 1, 3]), [2, 4, 3]),
        lambda t, x: t.reduce_sum(t.reshape(x, [-1, 3]), 1),  # unknown batch: BroadcastTo
        lambda t, x: t.reduce_mean(t.reshape(x, [-1, 3]), 1, keepdims=True),
    ],
)
def test_gradients_by_finite_differences(build):
    x0 = np.array([[-1.3, 0.4, 2.2], [0.7, -0.2, -2.9]])
    w = None
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 3])
        y = build(tf, x)
        w = np.linspace(-1.5, 2.0, int(np.prod([d or 2 for d in y.shape.as_list()])))
        loss = tf.reduce_sum(y * tf.constant(w.reshape([d or 2 for d in y.shape.as_list()])))
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            got = sess.run(g, {x: x0})
            num = _numeric_grad(lambda v: sess.run(loss, {x: v}), x0)
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-7)


def test_broadcast_to_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
            tf.broadcast_to(tf.ones([3]), [2, 2])
        with pytest.raises(ValueError, match="at most rank 1"):
            tf.broadcast_to(tf.ones([2, 3]), [3])
        x = tf.placeholder(tf.float32)
        s = tf.placeholder(tf.int32)
        y = tf.broadcast_to(x, s)
        with tf.Session() as sess:
            with pytest.raises(
                tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[3\] vs. \[2,2\]"
            ):
                sess.run(y, {x: np.ones(3), s: [2, 2]})
            with pytest.raises(
                tf.errors.InvalidArgumentError,
                match=r"Unable to broadcast tensor of shape \[3\] to tensor of shape \[1\]",
            ):
                sess.run(y, {x: np.ones(3), s: [1]})
            with pytest.raises(
                tf.errors.InvalidArgumentError, match="must be no greater than rank"
            ):
                sess.run(y, {x: np.ones((2, 3)), s: [3]})
            with pytest.raises(tf.errors.InvalidArgumentError, match="Dimension -1 must be >= 0"):
                sess.run(y, {x: np.ones(3), s: [-1, 3]})
            same = np.ones((2, 3), np.float32)
            np.testing.assert_array_equal(sess.run(y, {x: same, s: [2, 3]}), same)
            np.testing.assert_array_equal(
                sess.run(y, {x: np.float32(2), s: [0, 3]}), np.zeros((0, 3))
            )


def test_activation_grads_shape_mismatch_is_an_error():
    with tf.Graph().as_default():
        g = tf.placeholder(tf.float32)
        x = tf.placeholder(tf.float32)
        leaky = ops.apply_op("LeakyReluGrad", [g, x], {"alpha": 0.2}).outputs[0]
        selu = ops.apply_op("SeluGrad", [g, x]).outputs[0]
        with tf.Session() as sess:
            for t in (leaky, selu):
                with pytest.raises(tf.errors.InvalidArgumentError, match="must be the same shape"):
                    sess.run(t, {g: np.ones(3), x: np.ones(2)})


SETS = json.loads((HERE / "tf_ops_more" / "sets.json").read_text())


@pytest.mark.parametrize("name", sorted(cases.SET_CASES))
def test_dense_to_dense_set_operation_matches_tf(name):
    a, b, operation = cases.SET_CASES[name]
    with tf.Graph().as_default(), tf.Session() as sess:
        out = ops.apply_op(
            "DenseToDenseSetOperation", [a, b], {"set_operation": operation}
        ).outputs
        i, v, s = sess.run(out)
    want = SETS[name]
    assert i.tolist() == want["indices"] and s.tolist() == want["shape"]
    assert [x.decode() if isinstance(x, bytes) else x for x in v.tolist()] == want["values"]


def test_set_operation_errors():
    with tf.Graph().as_default(), tf.Session() as sess:
        bad = ops.apply_op(
            "DenseToDenseSetOperation", [[[1, 2]], [[1], [2]]], {"set_operation": "union"}
        ).outputs[0]
        with pytest.raises(tf.errors.InvalidArgumentError, match="do not match"):
            sess.run(bad)
        op = ops.apply_op("DenseToDenseSetOperation", [[[1]], [[2]]], {"set_operation": "xor"})
        with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid set_operation"):
            sess.run(op.outputs[0])
        with pytest.raises(ValueError, match="at least rank 2"):
            ops.apply_op("DenseToDenseSetOperation", [[1], [2]], {"set_operation": "union"})


ASSIGNS = json.loads((HERE / "tf_ops_more" / "slice_assign.json").read_text())


@pytest.mark.parametrize("use_resource", [False, True])
def test_variable_slice_assign_matches_tf(use_resource):
    with tf.Graph().as_default():
        built = cases.build_slice_assigns(tf, use_resource)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for name, (a, v) in built.items():
                want = ASSIGNS[f"{name}{'_resource' if use_resource else ''}"]
                if "error" in want:
                    with pytest.raises(getattr(tf.errors, want["error"])) as info:
                        sess.run(a)
                    assert want["message"] in info.value.message
                    continue
                if not use_resource:
                    assert a.op.type == "StridedSliceAssign" and a.op.name == want["assign"]
                np.testing.assert_array_equal(sess.run(a), want["value"])
                np.testing.assert_array_equal(sess.run(v), want["variable"])


def test_tf_slice_assign_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "tf_ops_more" / "slice_assign_graph.pb").read_bytes())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        with tf.Session() as sess:
            for name in cases.SLICE_ASSIGNS:
                want = ASSIGNS[name]
                sess.run(g.get_operation_by_name(f"{name}/Assign"))  # the initializer
                if "error" in want:
                    continue
                np.testing.assert_array_equal(
                    sess.run(g.get_tensor_by_name(want["assign"] + ":0")), want["value"]
                )
                np.testing.assert_array_equal(
                    sess.run(g.get_tensor_by_name(f"{name}:0")), want["variable"]
                )


def test_slice_assign_needs_an_initialized_variable_and_only_slices_have_assign():
    with tf.Graph().as_default():
        v = tf.Variable(tf.zeros([3]))
        a = v[1:].assign([1.0, 2.0])
        assert not hasattr(v.value(), "assign") and not hasattr(v[0] + 1.0, "assign")
        with tf.Session() as sess:
            with pytest.raises(tf.errors.FailedPreconditionError):
                sess.run(a)


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"depth_radius": 1, "bias": 2.0, "alpha": 0.5, "beta": 1.0},
        {"depth_radius": 3, "bias": 0.5, "alpha": 0.2, "beta": 0.3},
        {"depth_radius": 0, "bias": 1.0, "alpha": 1.0, "beta": 0.5},
    ],
)
def test_lrn_against_numpy_and_finite_differences(attrs):
    r = attrs.get("depth_radius", 5)
    bias, alpha, beta = attrs.get("bias", 1.0), attrs.get("alpha", 1.0), attrs.get("beta", 0.5)
    x0 = _RNG.standard_normal((2, 2, 3, 5)).astype(np.float32)
    w = _RNG.standard_normal((2, 2, 3, 5)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2, 2, 3, 5])
        y = tf.nn.lrn(x, **attrs)
        loss = tf.reduce_sum(y * w)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            got, grad = sess.run([y, g], {x: x0})
            x64 = x0.astype(np.float64)
            sq = np.zeros_like(x64)
            for d in range(5):
                lo, hi = max(0, d - r), min(5, d + r + 1)
                sq[..., d] = (x64[..., lo:hi] ** 2).sum(-1)
            np.testing.assert_allclose(
                got, x64 / (bias + alpha * sq) ** beta, rtol=2e-6, atol=1e-6
            )
            eps = 1e-3
            num = np.zeros_like(x64)
            for i in np.ndindex(x0.shape):
                d = np.zeros_like(x0)
                d[i] = eps
                num[i] = (sess.run(loss, {x: x0 + d}) - sess.run(loss, {x: x0 - d})) / (2 * eps)
    np.testing.assert_allclose(grad, num, rtol=5e-3, atol=5e-3)


def test_lrn_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="rank 4"):
            tf.nn.lrn(tf.ones([2, 3]))
        with pytest.raises(TypeError):
            tf.nn.lrn(tf.ones([1, 1, 1, 2], tf.float64))  # (TF: half, bfloat16, float)


def test_lrn_grad_has_no_gradient_as_in_tf():
    with tf.Graph().as_default():
        x = tf.ones([1, 1, 1, 3])
        g = tf.gradients(tf.reduce_sum(tf.nn.lrn(x)), x)[0]
        with pytest.raises(LookupError, match="LRNGrad"):
            tf.gradients(tf.reduce_sum(g), x)


def test_broadcast_to_of_the_same_shape_is_not_donated_over_another_reader():
    # BroadcastTo passes its input on when the shapes match: the in-place Add after it
    # must not write into the array the Mul still reads (the suite runs the kernels
    # checked: ASYNCFLOW_CHECK_KERNELS=1).
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 300])
        a = x * 2.0
        b = tf.broadcast_to(a, tf.shape(a))
        c = b + 1.0
        d = a * 3.0
        with tf.Session() as sess:
            cv, dv = sess.run([c, d], {x: np.ones((100, 300), np.float32)})
    np.testing.assert_array_equal(cv, np.full((100, 300), 3.0, np.float32))
    np.testing.assert_array_equal(dv, np.full((100, 300), 6.0, np.float32))
