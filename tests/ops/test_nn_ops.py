"""NN ops against NumPy: activations, Softmax/LogSoftmax, BiasAdd."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_ops, nn_ops
from asyncflow.registry import get_op_def
from asyncflow.session import Session

F16, F32, F64, I32 = np.float16, np.float32, np.float64, np.int32


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


_RNG = np.random.default_rng(1)


def _values(dtype, shape=(3, 4)):
    if np.dtype(dtype).kind == "i":
        return _RNG.integers(-9, 10, size=shape).astype(dtype)
    return _RNG.uniform(-8.0, 8.0, shape).astype(dtype)


def _check(out, ref, dtype):
    out = np.asarray(out)
    assert out.dtype == np.dtype(dtype)
    ref = np.asarray(ref, dtype=np.float64)
    if np.dtype(dtype).kind == "f":
        tol = {2: 3e-3, 4: 1e-5, 8: 1e-12}[np.dtype(dtype).itemsize]
        np.testing.assert_allclose(out, ref.astype(dtype), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(out, ref.astype(dtype))


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


_ACTIVATIONS = [
    ("relu", nn_ops.relu, lambda x: np.maximum(x, 0), (F32, F64, I32, F16), "Relu"),
    ("relu6", nn_ops.relu6, lambda x: np.clip(x, 0, 6), (F32, F64, I32), "Relu6"),
    ("elu", nn_ops.elu, lambda x: np.where(x < 0, np.expm1(x), x), (F32, F64), "Elu"),
    ("softplus", nn_ops.softplus, lambda x: np.log1p(np.exp(x)), (F32, F64), "Softplus"),
    ("softsign", nn_ops.softsign, lambda x: x / (1 + np.abs(x)), (F32, F64), "Softsign"),
    ("sigmoid", nn_ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (F32, F64), "Sigmoid"),
    ("tanh", nn_ops.tanh, np.tanh, (F32, F64), "Tanh"),
    ("softmax", nn_ops.softmax, _np_softmax, (F16, F32, F64), "Softmax"),
    ("log_softmax", nn_ops.log_softmax, _np_log_softmax, (F32, F64), "LogSoftmax"),
]


@pytest.mark.parametrize(
    "builder,ref,dtype,op_type",
    [
        pytest.param(b, r, d, t, id=f"{n}-{np.dtype(d).name}")
        for n, b, r, ds, t in _ACTIVATIONS
        for d in ds
    ],
)
def test_activation(builder, ref, dtype, op_type):
    x = array_ops.placeholder(dtypes.as_dtype(dtype), [None, 4])
    y = builder(x)
    assert (y.op.type, y.dtype, y.shape.as_list()) == (op_type, x.dtype, [None, 4])
    xv = _values(dtype)
    _check(_run(y, {x: xv}), ref(xv.astype(np.float64)), dtype)


def test_activations_reject_bad_dtypes():
    i = array_ops.placeholder(dtypes.int32, [2])
    for builder in (nn_ops.elu, nn_ops.softplus, nn_ops.softsign, nn_ops.softmax):
        with pytest.raises(TypeError):
            builder(i)
    with pytest.raises(TypeError):
        nn_ops.relu(array_ops.placeholder(dtypes.bool, [2]))


def test_softplus_and_sigmoid_do_not_overflow():
    x = array_ops.constant([-1000.0, 0.0, 1000.0], dtype=dtypes.float32)
    sp, sg = _run([nn_ops.softplus(x), nn_ops.sigmoid(x)])
    np.testing.assert_allclose(sp, [0.0, np.log(2.0), 1000.0], rtol=1e-6)
    np.testing.assert_allclose(sg, [0.0, 0.5, 1.0])


def test_softmax_is_stable_and_sums_to_one():
    x = array_ops.constant([[1000.0, 1000.0, -1000.0], [1.0, 2.0, 3.0]], dtype=dtypes.float32)
    out, log_out = _run([nn_ops.softmax(x), nn_ops.log_softmax(x)])
    np.testing.assert_allclose(out.sum(axis=-1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(out[0], [0.5, 0.5, 0.0])
    assert np.isfinite(log_out[0, :2]).all()


def test_softmax_rank_1_and_3():
    v = array_ops.placeholder(dtypes.float64, [5])
    t = array_ops.placeholder(dtypes.float64, [2, 3, 4])
    vv, tv = _values(F64, (5,)), _values(F64, (2, 3, 4))
    outs = _run(
        [nn_ops.softmax(v), nn_ops.softmax(t, axis=-1), nn_ops.log_softmax(t, dim=2)],
        {v: vv, t: tv},
    )
    _check(outs[0], _np_softmax(vv), F64)
    _check(outs[1], _np_softmax(tv), F64)
    _check(outs[2], _np_log_softmax(tv), F64)


def test_softmax_other_axis():
    t = array_ops.placeholder(dtypes.float64, [2, 3, 4])
    tv = _values(F64, (2, 3, 4))
    s0 = nn_ops.softmax(t, axis=0)
    s1 = nn_ops.log_softmax(t, dim=1)
    assert s0.shape.as_list() == [2, 3, 4] and s1.shape.as_list() == [2, 3, 4]
    outs = _run([s0, s1], {t: tv})
    _check(outs[0], _np_softmax(tv, axis=0), F64)
    _check(outs[1], _np_log_softmax(tv, axis=1), F64)


def _op_def_or_none(op_type):
    try:
        return get_op_def(op_type)
    except KeyError:
        return None


def test_softmax_errors():
    with pytest.raises(ValueError):
        nn_ops.softmax(array_ops.constant(1.0))
    x = array_ops.placeholder(dtypes.float32, [2, 3])
    with pytest.raises(ValueError):
        nn_ops.softmax(x, axis=1, dim=1)
    with pytest.raises(errors.InvalidArgumentError):
        nn_ops.softmax(x, axis=2)
    u = array_ops.placeholder(dtypes.float32)
    with pytest.raises(errors.InvalidArgumentError, match="logits must have >= 1 dimension"):
        _run(nn_ops.softmax(u), {u: 1.0})


# -- BiasAdd ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64, I32])
@pytest.mark.parametrize(
    "shape,data_format,axis",
    [
        ((3, 4), None, 1),
        ((2, 3, 4), "NHWC", 2),
        ((2, 5, 3, 4), "NHWC", 3),
        ((2, 4, 3, 3), "NCHW", 1),
        ((2, 4, 3), "NCW", 1),
    ],
)
def test_bias_add(dtype, shape, data_format, axis):
    dt = dtypes.as_dtype(dtype)
    value = array_ops.placeholder(dt, [None, *shape[1:]])
    bias = array_ops.placeholder(dt, [None])
    out = nn_ops.bias_add(value, bias, data_format=data_format)
    assert out.op.type == "BiasAdd" and out.shape.as_list() == [None, *shape[1:]]
    vv, bv = _values(dtype, shape), _values(dtype, (shape[axis],))
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    _check(_run(out, {value: vv, bias: bv}), vv + bv.reshape(bshape), dtype)


def test_bias_add_static_shape_refines_channels():
    value = array_ops.placeholder(dtypes.float32, [None, None])
    bias = array_ops.placeholder(dtypes.float32, [7])
    assert nn_ops.bias_add(value, bias).shape.as_list() == [None, 7]


def test_bias_add_errors():
    value = array_ops.placeholder(dtypes.float32, [2, 3])
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
        nn_ops.bias_add(value, array_ops.placeholder(dtypes.float32, [4]))
    with pytest.raises(ValueError):
        nn_ops.bias_add(value, array_ops.placeholder(dtypes.float32, [1, 3]))
    with pytest.raises(ValueError):
        nn_ops.bias_add(array_ops.placeholder(dtypes.float32, [3]), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="data_format"):
        nn_ops.bias_add(value, [1.0, 2.0, 3.0], data_format="HWC")
    with pytest.raises(TypeError):
        nn_ops.bias_add(value, array_ops.placeholder(dtypes.float64, [3]))
    assert nn_ops.bias_add(value, [1, 2, 3]).dtype == dtypes.float32  # Python ints convert


def test_bias_add_nchw_needs_rank_3_when_built_as_tf():
    # TF 2.21 (recorded by hand, tf.compat.v1 graph mode): NCHW (and "NC") refuse a rank-2
    # value when the graph is built, for BiasAdd and BiasAddGrad alike; a value whose rank
    # was unknown then is summed over its rows by BiasAddGrad's kernel: [12, 15, 18, 21].
    for fmt in ("NCHW", "NC"):
        with pytest.raises(ValueError, match="Shape must be at least rank 3 but is rank 2"):
            nn_ops.bias_add(array_ops.placeholder(dtypes.float32, [None, 4]), [1.0] * 4, fmt)
    for shape, rank in (((3, 4), 2), ((5,), 1)):
        with pytest.raises(ValueError, match=f"Shape must be at least rank 3 but is rank {rank}"):
            af.raw_ops.BiasAddGrad(
                out_backprop=array_ops.placeholder(dtypes.float32, shape), data_format="NCHW"
            )
    unknown = array_ops.placeholder(dtypes.float32, None)
    grad = af.raw_ops.BiasAddGrad(out_backprop=unknown, data_format="NCHW")
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(_run(grad, {unknown: value}), [12.0, 15.0, 18.0, 21.0])
    u = array_ops.placeholder(dtypes.float32)
    b = array_ops.placeholder(dtypes.float32)
    with pytest.raises(errors.InvalidArgumentError, match="Must provide as many biases"):
        _run(nn_ops.bias_add(u, b), {u: np.zeros((2, 3)), b: np.zeros(4)})


def test_nn_namespace():
    assert nn_ops.sigmoid is math_ops.sigmoid and nn_ops.tanh is math_ops.tanh
    assert set(nn_ops.__all__) >= {"relu", "softmax", "log_softmax", "bias_add", "sigmoid"}
    for name in nn_ops.__all__:
        assert callable(getattr(nn_ops, name))
    for op_type in ("Relu", "Relu6", "Elu", "Softplus", "Softsign", "Softmax", "BiasAdd"):
        op_def = get_op_def(op_type)
        assert op_def.supports("CPU") and op_def.shape_fn is not None


# -- backprop ops and gradients -------------------------------------------------------------


def _needs_grads(*op_types):
    """Skip until the math-op gradients these checks rely on are registered."""
    for t in op_types:
        d = get_op_def(t)
        assert d.grad_fn is not None or d.not_differentiable, f"{t} has no gradient"


def _grad_error(x_vals, y_fn):
    from asyncflow import test_util

    xs = [ops.convert_to_tensor(v) for v in x_vals]
    y = y_fn(*xs)
    with Session():
        return test_util.compute_gradient_error(
            xs, [v.shape for v in x_vals], y, y.shape.as_list(), x_init_value=x_vals
        )


def _away_from_kinks(shape, kinks=(0.0, 6.0)):
    x = _RNG.uniform(-8.0, 8.0, shape)
    for k in kinks:
        x = np.where(np.abs(x - k) < 0.05, x + 0.2, x)
    return x


_BACKPROPS = [
    ("ReluGrad", lambda g, x: np.where(x > 0, g, 0)),
    ("Relu6Grad", lambda g, x: np.where((x > 0) & (x < 6), g, 0)),
    ("EluGrad", lambda g, y: np.where(y < 0, g * (y + 1), g)),
    ("SoftplusGrad", lambda g, x: g / (1 + np.exp(-x))),
    ("SoftsignGrad", lambda g, x: g / (1 + np.abs(x)) ** 2),
]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op_type,ref", _BACKPROPS, ids=[b[0] for b in _BACKPROPS])
def test_activation_backprop_ops(op_type, ref, dtype):
    g, x = _values(dtype, (3, 5)), _away_from_kinks((3, 5)).astype(dtype)
    if op_type == "EluGrad":
        x = np.where(x < 0, np.expm1(x), x).astype(dtype)
    out = _run(ops.apply_op(op_type, [g, x]).outputs[0])
    _check(out, ref(g.astype(F64), x.astype(F64)), dtype)


def test_backprop_op_shape_mismatch():
    g = array_ops.placeholder(dtypes.float32)
    with pytest.raises(errors.InvalidArgumentError, match="same shape"):
        _run(ops.apply_op("ReluGrad", [g, np.zeros(3, F32)]).outputs[0], {g: np.zeros(4)})


@pytest.mark.parametrize(
    "builder", [nn_ops.relu, nn_ops.relu6, nn_ops.elu, nn_ops.softplus, nn_ops.softsign]
)
def test_activation_gradients(builder):
    x = _away_from_kinks((3, 4))
    assert _grad_error([x], builder) < 1e-4


@pytest.mark.parametrize(
    "builder", [nn_ops.relu, nn_ops.relu6, nn_ops.elu, nn_ops.softplus, nn_ops.softsign]
)
def test_activation_second_order(builder):
    _needs_grads("Mul", "Select", "Sigmoid", "Sub", "Abs", "Sign", "RealDiv", "ZerosLike")
    from asyncflow.gradients import gradients

    x = _away_from_kinks((2, 3))
    gv = _RNG.uniform(-1, 1, (2, 3))

    def first(xt, gt):
        return gradients(builder(xt), xt, grad_ys=gt)[0]

    assert _grad_error([x, gv], first) < 1e-4


@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("builder", [nn_ops.softmax, nn_ops.log_softmax])
def test_softmax_gradients(builder, axis):
    _needs_grads("Mul", "Sub", "Sum", "Exp", "Transpose")
    x = _RNG.uniform(-3, 3, (3, 4))
    assert _grad_error([x], lambda t: builder(t, axis=axis)) < 1e-4


@pytest.mark.parametrize("fmt,shape", [("NHWC", (2, 3, 4)), ("NCHW", (2, 3, 4, 2))])
def test_bias_add_gradients(fmt, shape):
    v = _RNG.uniform(-1, 1, shape)
    b = _RNG.uniform(-1, 1, (shape[1] if fmt == "NCHW" else shape[-1],))
    assert _grad_error([v, b], lambda a, c: nn_ops.bias_add(a, c, data_format=fmt)) < 1e-4
    grad = _run(ops.apply_op("BiasAddGrad", [v], {"data_format": fmt}).outputs[0])
    axes = tuple(i for i in range(len(shape)) if i != (1 if fmt == "NCHW" else len(shape) - 1))
    np.testing.assert_allclose(grad, v.sum(axis=axes), rtol=1e-12)


def test_bias_add_grad_gradient():
    _needs_grads("Add", "Reshape", "ZerosLike")
    v = _RNG.uniform(-1, 1, (2, 3, 4))
    err = _grad_error([v], lambda a: ops.apply_op("BiasAddGrad", [a]).outputs[0])
    assert err < 1e-4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add_grad_large_inputs(dtype, fmt):
    # Past 4096 elements NHWC sums run as one BLAS gemv; NCHW keeps NumPy's reduction.
    # (Data of its own: drawn from the module's generator, its values depended on which
    # tests an xdist worker ran before, and a draw whose sum cancels to ~0.2 once missed
    # float32's rtol by 1.3e-5.)
    v = np.random.default_rng(31).uniform(-1, 1, (16, 12, 10, 8)).astype(dtype)
    grad = _run(ops.apply_op("BiasAddGrad", [v], {"data_format": fmt}).outputs[0])
    axes = (0, 2, 3) if fmt == "NCHW" else (0, 1, 2)
    want = v.astype(np.float64).sum(axis=axes)
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad, want, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_softmax_with_a_tensor_axis():
    # TF 2.21: softmax([[1, 2], [3, 5]], axis=tf.constant(0)) normalises the columns:
    # [[0.11920292, 0.04742587], [0.8807971, 0.95257413]]; a fed axis works the same.
    import asyncflow as af

    x = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    want = np.exp(x) / np.exp(x).sum(axis=0)
    ax = af.placeholder(af.int32, [])
    const_axis = nn_ops.softmax(x, axis=af.constant(0))
    fed_axis = nn_ops.softmax(x, axis=ax)
    assert fed_axis.shape.as_list() == [2, 2]
    with af.Session() as sess:
        np.testing.assert_allclose(sess.run(const_axis), want, rtol=1e-6)
        np.testing.assert_allclose(sess.run(fed_axis, {ax: 0}), want, rtol=1e-6)
        np.testing.assert_allclose(sess.run(fed_axis, {ax: -1}), sess.run(nn_ops.softmax(x)),
                                   rtol=1e-6)  # fmt: skip


def test_softmax_tensor_axis_out_of_range_fails_the_step():
    # TF 2.21 (softmax_op_test.testDimTooLarge): an axis of 100 from a
    # placeholder_with_default on a rank-1 input fails with InvalidArgumentError when run.
    import asyncflow as af

    dim = af.placeholder_with_default(100, shape=[])
    y = nn_ops.softmax([1.0, 2.0, 3.0, 4.0], axis=dim)
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError):
            sess.run(y)
        assert sess.run(y, {dim: 0}).sum() == pytest.approx(1.0)


def test_elu_and_selu_take_exp_minus_one_as_tf():
    """TF computes exp(x) - 1 (not expm1) on the negative side: a tiny negative input
    gives 0.0.  Bits recorded from TF 2.21 (tf.nn.elu / tf.nn.selu, float32)."""
    x = np.float32([-2e-8, -1e-5, -1e-3, -0.5, -3.0, -30.0, 0.0, 2.0])
    elu_tf = [0, 3072851968, 3129147904, 3200873680, 3212001576, 3212836864, 0, 1073741824]
    selu_tf = [0, 3079908907, 3135656739, 3207665424, 3218462002, 3219196262, 0, 1074167135]
    with ops.Graph().as_default(), Session() as sess:
        e, s = sess.run([nn_ops.elu(x), nn_ops.selu(x)])
    assert e.view(np.uint32).tolist() == elu_tf
    assert s.view(np.uint32).tolist() == selu_tf
