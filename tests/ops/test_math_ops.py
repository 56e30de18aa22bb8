"""Math ops against NumPy: element-wise families, casts, MatMul, reductions, Range.

Each table row names a builder, a NumPy reference and the dtypes it runs in; the test
feeds random values through a placeholder and checks the value and the exact dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.extra import numpy as hnp

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_ops, reduction_ops
from asyncflow.registry import get_op_def
from asyncflow.session import Session

F16, F32, F64 = np.float16, np.float32, np.float64
I32, I64 = np.int32, np.int64


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _registered(op_type: str) -> bool:
    try:
        get_op_def(op_type)
    except KeyError:
        return False
    return True


_RNG = np.random.default_rng(0)


def _values(dtype, domain="any", shape=(3, 4), rng=None):
    rng = _RNG if rng is None else rng
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        lo = {"any": -9, "pos": 1, "nonzero": 1, "small": 0}[domain]
        v = rng.integers(lo, 10 if domain != "small" else 4, size=shape).astype(dtype)
        if domain == "nonzero":
            v = v * np.where(rng.random(shape) > 0.5, 1, -1).astype(dtype)
        return v
    if domain == "pos":
        v = rng.uniform(0.1, 5.0, shape)
    elif domain == "nonzero":
        v = rng.uniform(0.5, 5.0, shape) * np.where(rng.random(shape) > 0.5, 1, -1)
    elif domain == "small":
        v = rng.uniform(-1.2, 1.2, shape)
    else:
        v = rng.uniform(-5.0, 5.0, shape)
    return v.astype(dtype)


def _check(out, ref, dtype):
    dtype = np.dtype(dtype)
    out = np.asarray(out)
    assert out.dtype == dtype, (out.dtype, dtype)
    ref = np.asarray(ref).astype(dtype)
    if dtype.kind in "fc":
        # by the precision of the parts (complex64 is float32's): another BLAS (a GPU's)
        # sums in another order
        part = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
        rtol = {2: 2e-3, 4: 1e-5, 8: 1e-12}.get(part, 1e-5)
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(out, ref)


# -- unary -----------------------------------------------------------------------------------

_FLOATS = (F32, F64)
_UNARY = [
    ("negative", math_ops.negative, np.negative, (F32, F64, I32, I64), "any"),
    ("neg", math_ops.neg, np.negative, (F32,), "any"),
    ("abs", math_ops.abs, np.abs, (F32, F64, I32, I64), "any"),
    ("sign", math_ops.sign, np.sign, (F32, F64, I32), "any"),
    ("square", math_ops.square, np.square, (F32, F64, I32), "any"),
    ("sqrt", math_ops.sqrt, np.sqrt, (F16, F32, F64), "pos"),
    ("rsqrt", math_ops.rsqrt, lambda x: 1 / np.sqrt(x), _FLOATS, "pos"),
    ("exp", math_ops.exp, np.exp, (F16, F32, F64), "any"),
    ("expm1", math_ops.expm1, np.expm1, _FLOATS, "any"),
    ("log", math_ops.log, np.log, _FLOATS, "pos"),
    ("log1p", math_ops.log1p, np.log1p, _FLOATS, "pos"),
    ("sin", math_ops.sin, np.sin, _FLOATS, "any"),
    ("cos", math_ops.cos, np.cos, _FLOATS, "any"),
    ("tan", math_ops.tan, np.tan, _FLOATS, "small"),
    ("tanh", math_ops.tanh, np.tanh, (F16, F32, F64), "any"),
    ("sigmoid", math_ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (F16, F32, F64), "any"),
    ("floor", math_ops.floor, np.floor, _FLOATS, "any"),
    ("ceil", math_ops.ceil, np.ceil, _FLOATS, "any"),
    ("round", math_ops.round, np.round, _FLOATS, "any"),
    ("reciprocal", math_ops.reciprocal, np.reciprocal, _FLOATS, "nonzero"),
]


@pytest.mark.parametrize(
    "builder,ref,dtype,domain",
    [
        pytest.param(b, r, d, dom, id=f"{n}-{np.dtype(d).name}")
        for n, b, r, ds, dom in _UNARY
        for d in ds
    ],
)
def test_unary(builder, ref, dtype, domain):
    x = array_ops.placeholder(dtypes.as_dtype(dtype), shape=[None, 4])
    y = builder(x)
    assert y.dtype == dtypes.as_dtype(dtype)
    assert y.shape.as_list() == [None, 4]
    v = _values(dtype, domain)
    _check(_run(y, {x: v}), ref(v.astype(np.float64) if v.dtype == F16 else v), dtype)


def test_round_is_bankers_and_ints_pass_through():
    x = array_ops.constant([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6], dtype=dtypes.float32)
    i = array_ops.constant([1, -2], dtype=dtypes.int32)
    assert math_ops.round(i) is i
    out = _run(math_ops.round(x))
    np.testing.assert_array_equal(out, [0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0])


def test_abs_of_complex_is_complex_abs():
    z = array_ops.constant([3 + 4j, -1j], dtype=dtypes.complex64)
    a = math_ops.abs(z)
    assert (a.op.type, a.dtype) == ("ComplexAbs", dtypes.float32)
    np.testing.assert_allclose(_run(a), [5.0, 1.0])


def test_logical_ops_and_operators():
    x = array_ops.placeholder(dtypes.bool, [4])
    y = array_ops.placeholder(dtypes.bool, [4])
    xv, yv = np.array([True, True, False, False]), np.array([True, False, True, False])
    fetches = [
        math_ops.logical_and(x, y),
        math_ops.logical_or(x, y),
        math_ops.logical_xor(x, y),
        math_ops.logical_not(x),
        x & y,
        x | y,
        x ^ y,
        ~x,
        True & x,
    ]
    refs = [xv & yv, xv | yv, xv ^ yv, ~xv, xv & yv, xv | yv, xv ^ yv, ~xv, xv]
    for out, ref in zip(_run(fetches, {x: xv, y: yv}), refs, strict=True):
        _check(out, ref, np.bool_)
    with pytest.raises(TypeError):
        math_ops.logical_and(x, array_ops.constant([1.0]))


# -- binary ----------------------------------------------------------------------------------

_ARITH = (F32, F64, I32, I64)
_BINARY = [
    ("add", math_ops.add, np.add, _ARITH, "any"),
    ("subtract", math_ops.subtract, np.subtract, _ARITH, "any"),
    ("sub", math_ops.sub, np.subtract, (F32,), "any"),
    ("multiply", math_ops.multiply, np.multiply, _ARITH, "any"),
    ("mul", math_ops.mul, np.multiply, (I32,), "any"),
    ("realdiv", math_ops.realdiv, np.true_divide, _FLOATS, "nonzero"),
    ("divide", math_ops.divide, np.true_divide, _FLOATS, "nonzero"),
    ("floordiv", math_ops.floordiv, np.floor_divide, (F32, F64, I32, I64), "nonzero"),
    ("floormod", math_ops.floormod, np.mod, (F32, F64, I32), "nonzero"),
    ("mod", math_ops.mod, np.mod, (I32,), "nonzero"),
    ("div_int_is_floor", math_ops.div, np.floor_divide, (I32, I64), "nonzero"),
    ("div_float_is_true", math_ops.div, np.true_divide, _FLOATS, "nonzero"),
    ("pow", math_ops.pow, np.power, (F32, F64, I32), "small"),
    ("maximum", math_ops.maximum, np.maximum, (F32, F64, I32), "any"),
    ("minimum", math_ops.minimum, np.minimum, (F32, F64, I32), "any"),
    ("squared_difference", math_ops.squared_difference, lambda x, y: (x - y) ** 2, _ARITH, "any"),
    ("equal", math_ops.equal, np.equal, (F32, I32, np.bool_), "small"),
    ("not_equal", math_ops.not_equal, np.not_equal, (F32, I32), "small"),
    ("less", math_ops.less, np.less, (F32, F64, I32), "any"),
    ("less_equal", math_ops.less_equal, np.less_equal, (F32, I32), "small"),
    ("greater", math_ops.greater, np.greater, (F32, F64, I32), "any"),
    ("greater_equal", math_ops.greater_equal, np.greater_equal, (F32, I32), "small"),
]
_BOOL_OUT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


@pytest.mark.parametrize(
    "name,builder,ref,dtype,domain",
    [
        pytest.param(n, b, r, d, dom, id=f"{n}-{np.dtype(d).name}")
        for n, b, r, ds, dom in _BINARY
        for d in ds
    ],
)
def test_binary(name, builder, ref, dtype, domain):
    dt = dtypes.as_dtype(dtype)
    x = array_ops.placeholder(dt, shape=[None, 4])
    y = array_ops.placeholder(dt, shape=[4])  # broadcasts against x
    z = builder(x, y)
    out_dtype = np.bool_ if name in _BOOL_OUT else dtype
    assert z.dtype == dtypes.as_dtype(out_dtype)
    assert z.shape.as_list() == [None, 4]
    xv = _values(dtype, "pos" if name == "pow" else "any")
    yv = _values(dtype, domain, shape=(4,))
    _check(_run(z, {x: xv, y: yv}), ref(xv, yv), out_dtype)


def test_div_op_truncates_integers_toward_zero():
    x = array_ops.constant([-7, 7, -7, 7, 6], dtype=dtypes.int32)
    y = array_ops.constant([2, -2, -2, 2, 3], dtype=dtypes.int32)
    out = _run(ops.apply_op("Div", [x, y]).outputs[0])
    np.testing.assert_array_equal(out, [-3, -3, 3, 3, 2])
    assert out.dtype == np.int32


def test_string_add_and_equal():
    a = array_ops.constant(["ab", "c"])
    b = array_ops.constant(["x", "c"])
    s, e = _run([math_ops.add(a, b), math_ops.equal(a, b)])
    assert list(s) == [b"abx", b"cc"]
    np.testing.assert_array_equal(e, [False, True])


@pytest.mark.parametrize(
    "src,dst",
    [
        (np.int8, np.float32),
        (np.int16, np.float32),
        (np.uint8, np.float32),
        (np.int32, np.float64),
        (np.int64, np.float64),
        (np.float32, np.float32),
        (np.float64, np.float64),
    ],
)
def test_truediv_casts_integers(src, dst):
    x = array_ops.placeholder(dtypes.as_dtype(src), [3])
    y = array_ops.placeholder(dtypes.as_dtype(src), [3])
    z = math_ops.truediv(x, y)
    assert z.dtype == dtypes.as_dtype(dst) and z.op.type == "RealDiv"
    assert (x / y).dtype == dtypes.as_dtype(dst)
    xv, yv = (
        np.array([7, 3 if src == np.uint8 else -3, 4], dtype=src),
        np.array([2, 2, 3], dtype=src),
    )
    _check(_run(z, {x: xv, y: yv}), xv.astype(np.float64) / yv, dst)


def test_integer_division_by_zero_is_invalid_argument():
    x = array_ops.placeholder(dtypes.int32, [2])
    y = array_ops.placeholder(dtypes.int32, [2])
    for z in (x // y, x % y, math_ops.div(x, y)):
        with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
            _run(z, {x: [1, 2], y: [1, 0]})


def test_integer_negative_power_is_invalid_argument():
    x = array_ops.constant([2, 3])
    with pytest.raises(errors.InvalidArgumentError, match="negative integer powers"):
        _run(x ** array_ops.constant([1, -1]))


def test_float_division_by_zero_is_inf():
    x = array_ops.constant([1.0, -1.0, 0.0])
    out = _run(x / 0.0)
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


# -- operators, conversion and build-time errors ---------------------------------------------


def test_operator_overloads_float():
    x = array_ops.placeholder(dtypes.float32, [3])
    y = array_ops.placeholder(dtypes.float32, [3])
    xv = np.array([1.5, -2.0, 3.0], np.float32)
    yv = np.array([2.0, 0.5, -4.0], np.float32)
    cases = [
        (x + y, xv + yv),
        (x - y, xv - yv),
        (x * y, xv * yv),
        (x / y, xv / yv),
        (x // y, xv // yv),
        (x % y, np.mod(xv, yv)),
        (abs(x) ** y, np.abs(xv) ** yv),
        (-x, -xv),
        (abs(x), np.abs(xv)),
        (x + 1, xv + 1),
        (1 - x, 1 - xv),
        (2 * x, 2 * xv),
        (2 / x, 2 / xv),
        (2 // x, 2 // xv),
        (7 % x, np.mod(7, xv)),
        (2**x, 2**xv),
        (x < y, xv < yv),
        (x <= y, xv <= yv),
        (x > y, xv > yv),
        (x >= y, xv >= yv),
        (x > 0, xv > 0),
    ]
    outs = _run([c[0] for c in cases], {x: xv, y: yv})
    for (_, ref), out in zip(cases, outs, strict=True):
        _check(out, ref, ref.dtype)


def test_operator_types_and_op_names():
    x = array_ops.placeholder(dtypes.float32, [3])
    i = array_ops.placeholder(dtypes.int32, [3])
    assert (x + x).op.type == "AddV2"
    assert (x - x).op.type == "Sub"
    assert (x * x).op.type == "Mul"
    assert (x / x).op.type == "RealDiv"
    assert (x // x).op.type == "FloorDiv"
    assert (x % x).op.type == "FloorMod"
    assert (x**x).op.type == "Pow"
    assert (-x).op.type == "Neg"
    half = i / 2
    assert half.dtype == dtypes.float64 and half.op.name.startswith("truediv")
    assert [t.op.type for t in half.op.inputs] == ["Cast", "Cast"]
    assert (i // 2).dtype == dtypes.int32
    out = _run([half, i // 2, i % 3], {i: [-3, 4, 7]})
    np.testing.assert_allclose(out[0], [-1.5, 2.0, 3.5])
    np.testing.assert_array_equal(out[1], [-2, 2, 3])
    np.testing.assert_array_equal(out[2], [0, 1, 1])


def test_mixed_dtypes_are_type_errors():
    x = array_ops.placeholder(dtypes.float32, [2])
    i = array_ops.placeholder(dtypes.int32, [2])
    assert (x + 1).dtype == dtypes.float32
    assert (1 + x).dtype == dtypes.float32
    assert (i + 1).dtype == dtypes.int32
    with pytest.raises(TypeError):
        x + i
    with pytest.raises(TypeError):
        i + 1.5
    with pytest.raises(TypeError):
        1.5 * i
    with pytest.raises(TypeError):
        i / x
    with pytest.raises(TypeError):
        i / 2.5
    with pytest.raises(TypeError):
        math_ops.maximum(x, i)
    with pytest.raises(TypeError):  # Sqrt takes floats only
        math_ops.sqrt(i)
    with pytest.raises(TypeError):
        math_ops.floor(i)


def test_incompatible_static_shapes_are_value_errors():
    a = array_ops.placeholder(dtypes.float32, [2, 3])
    b = array_ops.placeholder(dtypes.float32, [4])
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
        a + b
    with pytest.raises(ValueError):
        math_ops.less(a, b)


def test_incompatible_runtime_shapes_are_invalid_argument():
    a = array_ops.placeholder(dtypes.float32)
    b = array_ops.placeholder(dtypes.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        _run(a + b, {a: np.zeros(2), b: np.zeros(3)})


@pytest.mark.parametrize(
    "sx,sy,expected",
    [
        ([None, 3], [3], [None, 3]),
        ([None, 1], [1, 4], [None, 4]),
        ([2, None], [None], [2, None]),
        ([5, None], [1], [5, None]),
        ([], [2, 3], [2, 3]),
        (None, [3], None),
        ([None], [None], [None]),
    ],
)
def test_broadcast_static_shapes(sx, sy, expected):
    x = array_ops.placeholder(dtypes.float32, sx)
    y = array_ops.placeholder(dtypes.float32, sy)
    for z in (x + y, math_ops.squared_difference(x, y), math_ops.equal(x, y)):
        if expected is None:
            assert z.shape.ndims is None
        else:
            assert z.shape.as_list() == expected


_BROADCAST_OPS = [
    (math_ops.add, np.add),
    (math_ops.multiply, np.multiply),
    (math_ops.maximum, np.maximum),
    (math_ops.greater, np.greater),
]


@pytest.mark.parametrize("builder,ref", _BROADCAST_OPS, ids=lambda v: getattr(v, "__name__", ""))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
def test_broadcasting_matches_numpy(builder, ref, shapes):
    (sx, sy), result = shapes
    with ops.Graph().as_default():
        x = array_ops.placeholder(dtypes.float32, sx)
        y = array_ops.placeholder(dtypes.float32, sy)
        z = builder(x, y)
        assert tuple(z.shape.as_list()) == result
        # Its own generator: Hypothesis draws different shapes on every run, and drawing
        # their values from the shared _RNG would reseed every later test in this file
        # by chance.
        rng = np.random.default_rng(1)
        xv, yv = _values(F32, shape=sx, rng=rng), _values(F32, shape=sy, rng=rng)
        out = _run(z, {x: xv, y: yv})
    expected = ref(xv, yv)
    _check(out, expected, expected.dtype)


# -- AddN --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64, I32])
def test_add_n(dtype):
    dt = dtypes.as_dtype(dtype)
    xs = [array_ops.placeholder(dt, s) for s in ([None, 3], [2, None], None)]
    total = math_ops.add_n(xs)
    assert total.op.type == "AddN" and total.shape.as_list() == [2, 3]
    vals = [_values(dtype, shape=(2, 3)) for _ in xs]
    _check(_run(total, dict(zip(xs, vals, strict=True))), sum(vals), dtype)


def test_add_n_errors_and_single_input():
    a = array_ops.placeholder(dtypes.float32, [2])
    assert math_ops.add_n([a]) is a
    assert math_ops.add_n([a], name="same").op.type == "Identity"
    with pytest.raises(ValueError):
        math_ops.add_n([])
    with pytest.raises(ValueError):
        math_ops.add_n([a, array_ops.placeholder(dtypes.float32, [3])])
    with pytest.raises(TypeError):
        math_ops.add_n([a, array_ops.placeholder(dtypes.int32, [2])])
    u = array_ops.placeholder(dtypes.float32)
    with pytest.raises(errors.InvalidArgumentError, match="must have the same size and shape"):
        _run(math_ops.add_n([a, u]), {a: [1, 2], u: [1, 2, 3]})


# -- Cast ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src,dst,values,expected",
    [
        (F32, I32, [-1.7, 1.7, 2.5, -0.2], [-1, 1, 2, 0]),
        (F64, I64, [-3.99, 3.99], [-3, 3]),
        (F32, np.bool_, [0.0, -2.0, 0.5], [False, True, True]),
        (np.bool_, F32, [True, False], [1.0, 0.0]),
        (I32, F64, [3, -4], [3.0, -4.0]),
        (I64, I32, [5, -6], [5, -6]),
        (F32, F16, [0.5, 1.25], [0.5, 1.25]),
        (I32, np.bool_, [0, 3, -1], [False, True, True]),
        (np.complex64, F32, [1 + 2j, -3j], [1.0, 0.0]),
        (np.uint8, I32, [0, 255], [0, 255]),
    ],
)
def test_cast(src, dst, values, expected):
    x = array_ops.placeholder(dtypes.as_dtype(src), [None])
    y = math_ops.cast(x, dtypes.as_dtype(dst))
    assert (y.op.type, y.dtype, y.shape.as_list()) == ("Cast", dtypes.as_dtype(dst), [None])
    assert y.op.get_attr("SrcT") == dtypes.as_dtype(src)
    assert y.op.get_attr("DstT") == dtypes.as_dtype(dst)
    _check(_run(y, {x: np.array(values, dtype=src)}), np.array(expected), dst)


def test_cast_helpers_and_no_op():
    x = array_ops.placeholder(dtypes.int32, [2])
    assert math_ops.cast(x, dtypes.int32) is x
    assert math_ops.cast(x, "int32") is x
    f = math_ops.to_float(x)
    assert (f.dtype, f.op.name) == (dtypes.float32, "ToFloat")
    assert math_ops.to_double(x).dtype == dtypes.float64
    assert math_ops.to_int64(x).dtype == dtypes.int64
    assert math_ops.to_int32(f).dtype == dtypes.int32
    c = math_ops.cast(1.5, dtypes.int32)  # a Python float becomes float32, then Cast
    assert c.op.inputs[0].dtype == dtypes.float32
    assert _run(c) == 1


def test_cast_constant_folds():
    c = math_ops.cast(array_ops.constant([1.9, -1.9]), dtypes.int32)
    np.testing.assert_array_equal(ops.constant_value(c), [1, -1])
    assert ops.constant_value(c).dtype == np.int32
    p = array_ops.placeholder(dtypes.float32)
    assert ops.constant_value(math_ops.cast(p, dtypes.int32)) is None


def test_cast_string_is_unimplemented():
    s = array_ops.constant(["1"])
    with pytest.raises(errors.UnimplementedError):
        _run(math_ops.cast(s, dtypes.float32))


# -- MatMul ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64, I32])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_2d(dtype, ta, tb):
    dt = dtypes.as_dtype(dtype)
    av = _values(dtype, shape=(4, 3) if ta else (3, 4))
    bv = _values(dtype, shape=(5, 4) if tb else (4, 5))
    a = array_ops.placeholder(dt, [None, None])
    b = array_ops.placeholder(dt, bv.shape)
    c = math_ops.matmul(a, b, transpose_a=ta, transpose_b=tb)
    assert c.op.type == "MatMul" and c.shape.as_list() == [None, 5]
    ref = (av.T if ta else av) @ (bv.T if tb else bv)
    _check(_run(c, {a: av, b: bv}), ref, dtype)


def test_matmul_operator_and_static_shape():
    a = array_ops.placeholder(dtypes.float32, [2, 3])
    b = array_ops.placeholder(dtypes.float32, [3, 4])
    c = a @ b
    assert c.shape.as_list() == [2, 4]
    av, bv = _values(F32, shape=(2, 3)), _values(F32, shape=(3, 4))
    _check(_run(c, {a: av, b: bv}), av @ bv, F32)


def test_matmul_adjoint_complex():
    av = (_values(F32, shape=(3, 2)) + 1j * _values(F32, shape=(3, 2))).astype(np.complex64)
    bv = (_values(F32, shape=(3, 4)) + 1j * _values(F32, shape=(3, 4))).astype(np.complex64)
    a, b = array_ops.constant(av), array_ops.constant(bv)
    c = math_ops.matmul(a, b, adjoint_a=True)
    _check(_run(c), av.conj().T @ bv, np.complex64)
    with pytest.raises(ValueError):
        math_ops.matmul(a, b, transpose_a=True, adjoint_a=True)


@pytest.mark.parametrize(
    "sa,sb,kwargs,expected",
    [
        ((2, 3, 4), (2, 4, 5), {}, [2, 3, 5]),
        ((2, 3, 4), (4, 5), {}, [2, 3, 5]),
        ((2, 1, 3, 4), (5, 5, 4), {"transpose_b": True}, [2, 5, 3, 5]),
        ((3, 4, 2), (3, 4, 5), {"adjoint_a": True}, [3, 2, 5]),
        ((3, 4), (6, 3, 2), {"transpose_a": True}, [6, 4, 2]),
    ],
)
def test_batch_matmul_broadcasts(sa, sb, kwargs, expected):
    av, bv = _values(F64, shape=sa), _values(F64, shape=sb)
    a = array_ops.placeholder(dtypes.float64, sa)
    b = array_ops.placeholder(dtypes.float64, sb)
    c = math_ops.matmul(a, b, **kwargs)
    assert c.op.type == "BatchMatMulV2" and c.shape.as_list() == expected
    ta = kwargs.get("transpose_a") or kwargs.get("adjoint_a")
    tb = kwargs.get("transpose_b") or kwargs.get("adjoint_b")
    ref = np.matmul(np.swapaxes(av, -1, -2) if ta else av, np.swapaxes(bv, -1, -2) if tb else bv)
    _check(_run(c, {a: av, b: bv}), ref, F64)


def test_matmul_shape_errors():
    a = array_ops.placeholder(dtypes.float32, [2, 2])
    b = array_ops.placeholder(dtypes.float32, [3, 4])
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3 for 'MatMul"):
        math_ops.matmul(a, b)
    with pytest.raises(ValueError):
        math_ops.matmul(array_ops.placeholder(dtypes.float32, [2, 3, 4]), b)
    with pytest.raises(ValueError):  # rank 1 is not a matrix
        math_ops.matmul(array_ops.placeholder(dtypes.float32, [3]), b)
    with pytest.raises(TypeError):
        math_ops.matmul(a, array_ops.placeholder(dtypes.float64, [2, 2]))


def test_matmul_runtime_errors():
    a = array_ops.placeholder(dtypes.float32, [None, None])
    b = array_ops.placeholder(dtypes.float32, [None, None])
    with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
        _run(math_ops.matmul(a, b), {a: np.zeros((2, 3)), b: np.zeros((2, 3))})
    x = array_ops.placeholder(dtypes.float32, [None, 2, 2])
    y = array_ops.placeholder(dtypes.float32, [None, 2, 2])
    with pytest.raises(errors.InvalidArgumentError, match="compatible batch dimensions"):
        _run(math_ops.matmul(x, y), {x: np.zeros((2, 2, 2)), y: np.zeros((3, 2, 2))})


# -- reductions ------------------------------------------------------------------------------


def _int_mean(x, axis=None, keepdims=False, dtype=None):
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    count = x.size // max(np.asarray(total).size, 1)
    return np.trunc(total / count).astype(x.dtype)


_REDUCTIONS = [
    ("reduce_sum", reduction_ops.reduce_sum, np.sum, (F32, F64, I32, I64)),
    ("reduce_mean", reduction_ops.reduce_mean, np.mean, (F32, F64)),
    ("reduce_mean_int", reduction_ops.reduce_mean, _int_mean, (I32, I64)),
    ("reduce_max", reduction_ops.reduce_max, np.max, (F32, F64, I32)),
    ("reduce_min", reduction_ops.reduce_min, np.min, (F32, F64, I32)),
    ("reduce_prod", reduction_ops.reduce_prod, np.prod, (F32, F64, I32)),
]
_AXES = [None, 0, 1, -1, 2, [0, 2], [-1, 0, 1], []]


@pytest.mark.parametrize(
    "builder,ref,dtype",
    [
        pytest.param(b, r, d, id=f"{n}-{np.dtype(d).name}")
        for n, b, r, ds in _REDUCTIONS
        for d in ds
    ],
)
def test_reductions(builder, ref, dtype):
    x = array_ops.placeholder(dtypes.as_dtype(dtype), [2, None, 4])
    xv = _values(dtype, "small", shape=(2, 3, 4))
    if np.dtype(dtype).kind == "i":
        xv = xv - 1  # some negatives: integer Mean truncates toward zero
    fetches, refs = [], []
    for axis in _AXES:
        for keep in (False, True):
            t = builder(x, axis=axis, keepdims=keep)
            assert t.dtype == dtypes.as_dtype(dtype)
            np_axis = tuple(axis) if isinstance(axis, list) else axis
            r = np.asarray(ref(xv, axis=np_axis, keepdims=keep))
            assert t.shape.ndims == r.ndim
            fetches.append(t)
            refs.append(r)
    for out, r in zip(_run(fetches, {x: xv}), refs, strict=True):
        _check(out, r, dtype)


def test_integer_mean_truncates():
    x = array_ops.constant([[-1, -2], [3, 4]], dtype=dtypes.int32)
    out = _run(reduction_ops.reduce_mean(x, axis=1))
    np.testing.assert_array_equal(out, [-1, 3])


@pytest.mark.parametrize(
    "builder,ref", [(reduction_ops.reduce_any, np.any), (reduction_ops.reduce_all, np.all)]
)
def test_boolean_reductions(builder, ref):
    x = array_ops.placeholder(dtypes.bool, [3, 4])
    xv = _values(np.bool_, shape=(3, 4))
    fetches = [builder(x), builder(x, 0), builder(x, 1, keepdims=True)]
    refs = [ref(xv), ref(xv, 0), ref(xv, 1, keepdims=True)]
    for out, r in zip(_run(fetches, {x: xv}), refs, strict=True):
        _check(out, r, np.bool_)
    with pytest.raises(TypeError):
        builder(array_ops.placeholder(dtypes.float32, [2]))


def test_reduction_static_shapes_and_old_names():
    x = array_ops.placeholder(dtypes.float32, [None, 3, 5])
    assert reduction_ops.reduce_sum(x).shape.as_list() == []
    assert reduction_ops.reduce_sum(x, 1).shape.as_list() == [None, 5]
    assert reduction_ops.reduce_sum(x, [0, 2], keepdims=True).shape.as_list() == [1, 3, 1]
    assert reduction_ops.reduce_max(x, reduction_indices=-1).shape.as_list() == [None, 3]
    assert reduction_ops.reduce_min(x, 0, keep_dims=True).shape.as_list() == [1, 3, 5]
    axis = array_ops.placeholder(dtypes.int32, [])
    assert reduction_ops.reduce_mean(x, axis).shape.ndims is None
    assert reduction_ops.reduce_mean(x, axis, keepdims=True).shape.as_list() == [None] * 3
    t = reduction_ops.reduce_sum(x, [1])
    assert t.op.type == "Sum" and t.op.get_attr("keep_dims") is False
    assert t.op.inputs[1].dtype == dtypes.int32
    with pytest.raises(ValueError):
        reduction_ops.reduce_sum(x, 1, reduction_indices=1)
    with pytest.raises(ValueError):
        reduction_ops.reduce_sum(x, 0, keepdims=True, keep_dims=True)


def test_reduction_axis_int64():
    x = array_ops.constant([[1.0, 2.0], [3.0, 4.0]])
    t = reduction_ops.reduce_sum(x, array_ops.constant([1], dtype=dtypes.int64))
    assert t.op.get_attr("Tidx") == dtypes.int64
    np.testing.assert_allclose(_run(t), [3.0, 7.0])


def test_reduction_bad_axis():
    x = array_ops.placeholder(dtypes.float32, [2, 3])
    with pytest.raises(ValueError, match="Invalid reduction dimension 3 for input with 2"):
        reduction_ops.reduce_sum(x, 3)
    with pytest.raises(ValueError):
        reduction_ops.reduce_mean(x, [-3])
    axis = array_ops.placeholder(dtypes.int32)
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"Invalid reduction dimension \(3 for input with 2 dimension\(s\)",
    ):
        _run(reduction_ops.reduce_sum(x, axis), {x: np.ones((2, 3)), axis: 3})
    with pytest.raises(errors.InvalidArgumentError):
        _run(reduction_ops.reduce_max(x, axis), {x: np.ones((2, 3)), axis: [0, -3]})


def test_reduction_of_empty():
    x = array_ops.placeholder(dtypes.float32, [None])
    i = array_ops.placeholder(dtypes.int32, [None])
    out = _run(
        [
            reduction_ops.reduce_sum(x),
            reduction_ops.reduce_prod(x),
            reduction_ops.reduce_max(x),
            reduction_ops.reduce_min(x),
            reduction_ops.reduce_max(i),
        ],
        {x: np.zeros(0, np.float32), i: np.zeros(0, np.int32)},
    )
    assert out[:4] == [0.0, 1.0, -np.inf, np.inf]
    assert out[4] == np.iinfo(np.int32).min


def test_reduction_unknown_rank():
    x = array_ops.placeholder(dtypes.float32)
    s = reduction_ops.reduce_sum(x)
    assert s.shape.as_list() == []
    assert _run(s, {x: np.ones((2, 3))}) == 6.0


# -- ArgMax / ArgMin -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64, I32])
@pytest.mark.parametrize(
    "builder,ref", [(reduction_ops.argmax, np.argmax), (reduction_ops.argmin, np.argmin)]
)
def test_arg_reductions(builder, ref, dtype):
    x = array_ops.placeholder(dtypes.as_dtype(dtype), [None, 5])
    xv = _values(dtype, shape=(3, 5))
    default = builder(x)
    assert default.dtype == dtypes.int64 and default.shape.as_list() == [5]
    by_row = builder(x, axis=1, output_type=dtypes.int32)
    assert by_row.dtype == dtypes.int32 and by_row.shape.as_list() == [None]
    last = builder(x, dimension=-1)
    outs = _run([default, by_row, last], {x: xv})
    _check(outs[0], ref(xv, 0), I64)
    _check(outs[1], ref(xv, 1), I32)
    _check(outs[2], ref(xv, -1), I64)


def test_arg_reduction_errors():
    x = array_ops.placeholder(dtypes.float32, [2, 3])
    with pytest.raises(ValueError):
        reduction_ops.argmax(x, 2)
    with pytest.raises(ValueError):
        reduction_ops.argmax(x, 0, dimension=0)
    axis = array_ops.placeholder(dtypes.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match=r"range \[-2, 2\), but got 2"):
        _run(reduction_ops.argmax(x, axis), {x: np.ones((2, 3)), axis: 2})
    e = array_ops.placeholder(dtypes.float32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="Reduction axis 0 is empty"):
        _run(reduction_ops.argmin(e), {e: np.zeros(0)})


# -- Range and LinSpace ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,kwargs,expected,dtype",
    [
        ((5,), {}, np.arange(5), I32),
        ((1, 10, 3), {}, np.arange(1, 10, 3), I32),
        ((10, 1, -3), {}, np.arange(10, 1, -3), I32),
        ((1.0, 4, 0.5), {}, np.arange(1.0, 4, 0.5), F32),
        ((0, 5), {"dtype": dtypes.float64}, np.arange(5.0), F64),
        ((0, 1, 0.3), {}, np.arange(0, 1, 0.3), F32),
        ((3, 3), {}, np.arange(0), I32),
        ((-2, 2), {"dtype": dtypes.int64}, np.arange(-2, 2), I64),
    ],
)
def test_range(args, kwargs, expected, dtype):
    r = reduction_ops.range(*args, **kwargs)
    assert r.op.type == "Range" and r.op.name == "range"
    assert r.dtype == dtypes.as_dtype(dtype)
    assert r.shape.as_list() == [len(expected)]
    folded = ops.constant_value(r)
    _check(folded, expected, dtype)
    _check(_run(r), expected, dtype)


def test_range_dtype_inference_from_tensors():
    n64 = array_ops.placeholder(dtypes.int64, [])
    r = reduction_ops.range(0, n64)
    assert r.dtype == dtypes.int64 and r.shape.as_list() == [None]
    nf = array_ops.placeholder(dtypes.float64, [])
    rf = reduction_ops.range(1, nf, 2)
    assert rf.dtype == dtypes.float64
    out = _run([r, rf], {n64: 4, nf: 6.0})
    _check(out[0], np.arange(4), I64)
    _check(out[1], np.arange(1.0, 6.0, 2), F64)
    with pytest.raises(TypeError):
        reduction_ops.range(0, 1.5, dtype=dtypes.int32)


def test_range_errors():
    with pytest.raises(ValueError, match="Requires delta != 0"):
        reduction_ops.range(0, 5, 0)
    with pytest.raises(ValueError, match="Requires start <= limit when delta > 0"):
        reduction_ops.range(5, 1)
    with pytest.raises(ValueError):
        reduction_ops.range(array_ops.constant([1, 2]))
    d = array_ops.placeholder(dtypes.int32, [])
    r = reduction_ops.range(0, 10, d)
    with pytest.raises(errors.InvalidArgumentError, match="Requires delta != 0"):
        _run(r, {d: 0})
    with pytest.raises(errors.InvalidArgumentError, match="Requires start >= limit"):
        _run(r, {d: -1})


def test_range_checks_allocation():
    n = array_ops.placeholder(dtypes.int64, [])
    with pytest.raises(errors.ResourceExhaustedError):
        _run(reduction_ops.range(n), {n: 2**62})


@pytest.mark.parametrize("dtype", [F32, F64])
def test_linspace(dtype):
    t = reduction_ops.linspace(array_ops.constant(1.0, dtype=dtypes.as_dtype(dtype)), 3.0, 5)
    assert t.dtype == dtypes.as_dtype(dtype) and t.shape.as_list() == [5]
    _check(_run(t), np.linspace(1.0, 3.0, 5), dtype)
    assert reduction_ops.lin_space is reduction_ops.linspace
    # The LinSpace op itself (TF's raw op; tf.linspace builds TF 2's graph instead).
    op = ops.apply_op("LinSpace", [array_ops.constant(1.0, dtype=dtypes.as_dtype(dtype)), 3.0, 5])
    _check(ops.constant_value(op.outputs[0]), np.linspace(1.0, 3.0, 5), dtype)


def test_linspace_num_fed_and_errors():
    # TF 2.21's tf.linspace: num 0 gives no values, integer ends float64 values.
    num = array_ops.placeholder(dtypes.int32, [])
    t = reduction_ops.linspace(0.0, 1.0, num)
    assert t.shape.as_list() == [None]
    _check(_run(t, {num: 1}), [0.0], F32)
    _check(_run(t, {num: 3}), [0.0, 0.5, 1.0], F32)
    assert _run(t, {num: 0}).shape == (0,)
    assert _run(reduction_ops.linspace(0.0, 1.0, 0)).shape == (0,)
    t = reduction_ops.linspace(0, 1, 3)
    assert t.dtype == dtypes.float64
    _check(_run(t), [0.0, 0.5, 1.0], np.float64)
    with pytest.raises(TypeError, match="must be of type integer"):
        reduction_ops.linspace(0.0, 1.0, 2.5)
    op = ops.apply_op("LinSpace", [0.0, 1.0, num])
    with pytest.raises(errors.InvalidArgumentError, match="Requires num > 0"):
        _run(op.outputs[0], {num: 0})
    with pytest.raises(ValueError):
        ops.apply_op("LinSpace", [0.0, 1.0, 0])


def test_public_names():
    for name in math_ops.__all__:
        assert callable(getattr(math_ops, name)), name
    for name in reduction_ops.__all__:
        assert callable(getattr(reduction_ops, name)), name
    for op_type in ("Add", "AddV2", "BatchMatMul", "Sum", "ArgMax", "Range", "LinSpace"):
        assert get_op_def(op_type).supports("CPU")
        assert get_op_def(op_type).shape_fn is not None


# -- issue 18 items 8 and 9 ----------------------------------------------------------------


def test_integer_division_by_zero_of_an_empty_tensor_is_empty():
    # TF 2.21: FloorMod/FloorDiv of an int32 [] by 0 give [] (no divisor is used); a
    # non-empty x by 0 raises InvalidArgumentError "Integer division by zero".
    empty = ops.convert_to_tensor(np.zeros([0], np.int32))
    zero = ops.convert_to_tensor(0)
    out = _run([math_ops.floormod(empty, zero), math_ops.floordiv(empty, zero)])
    for v in out:
        assert v.shape == (0,) and v.dtype == np.int32
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        _run(math_ops.floormod([1, 2], zero))


def test_reduce_sum_gradient_over_unknown_rank_fed_a_scalar():
    # The linear-regression tutorial: reduce_sum(p * w) over an unknown-rank placeholder fed
    # a scalar; TF 2.21 gives d/dw = 3.0 for p = 3.0 (its gradient takes FloorMod([], 0)).
    import asyncflow as af

    p = af.placeholder(af.float32)
    w = af.Variable(1.0)
    (g,) = af.gradients(reduction_ops.reduce_sum(p * w), [w])
    with Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(g, {p: 3.0}) == 3.0


def test_arg_min_arg_max():
    # TF 2.21: tf.arg_min(m, 1) = [0, 1] int64; tf.arg_max(m, 0) = [1, 0, 1] (op ArgMax);
    # output_type=int32 gives int32.
    m = ops.convert_to_tensor(np.array([[1, 5, 3], [7, 2, 9]], np.int32))
    lo, hi = reduction_ops.arg_min(m, 1), reduction_ops.arg_max(m, 0)
    assert lo.dtype == dtypes.int64 and hi.op.type == "ArgMax" and lo.op.type == "ArgMin"
    hi32 = reduction_ops.arg_max(m, 1, output_type=dtypes.int32)
    a, b, c = _run([lo, hi, hi32])
    np.testing.assert_array_equal(a, [0, 1])
    np.testing.assert_array_equal(b, [1, 0, 1])
    assert c.dtype == np.int32 and c.tolist() == [1, 2]


def test_bucketize_matches_tf():
    # TF 2.21's math_ops._bucketize (op Bucketize): int32 buckets, boundaries[i-1] <= x <
    # boundaries[i]; unsorted boundaries fail when run, a non-list at build time.
    import asyncflow as af
    from asyncflow.ops import math_ops as M

    with ops.Graph().as_default():
        b = M._bucketize(af.constant([[-5, 0, 2, 3, 5], [8, 10, 11, 12, 0]]), [0, 3, 8, 11])
        f = M._bucketize(af.constant([-5.0, 3.0, 11.5]), boundaries=[0.0, 3.0, 8.0, 11.0])
        empty = M._bucketize(af.zeros([0, 3]), boundaries=[])
        bad = M._bucketize(af.constant([-5, 0]), boundaries=[0, 8, 3, 11])
        with Session() as s:
            got_b, got_f, got_e = s.run([b, f, empty])
            with pytest.raises(errors.InvalidArgumentError, match="Expected sorted boundaries"):
                s.run(bad)
    np.testing.assert_array_equal(got_b, [[0, 1, 1, 2, 2], [3, 3, 4, 4, 1]])
    assert got_b.dtype == np.int32
    np.testing.assert_array_equal(got_f, [0, 2, 4])
    assert got_e.shape == (0, 3)
    with pytest.raises(TypeError, match="Expected list"):
        M._bucketize(af.constant([1]), boundaries=0)
