"""More element-wise math: inverse and hyperbolic trigonometry, Atan2, Erf/Erfc,
IsNan/IsInf/IsFinite, TruncateDiv/TruncateMod (C's `/` and `%`).

Registered through math_ops' factories (one kernel each, written against `ctx.xp`),
with TF's gradients (math_grad.py) where TF has one.  NumPy has no erf: it is
computed with `math.erf` element by element (exact to double precision).
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import no_nan, to_host
from asyncflow.ops.math_ops import (
    _binary_op,
    _check_int_div,
    _conj,
    _trunc_div,
    _unary_op,
    sparse_values_map,
)
from asyncflow.registry import (
    FLOATING,
    REAL,
    NotDifferentiable,
    TypeConstraint,
    get_op_def,
    register_op,
)

__all__ = [
    "acos",
    "asin",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "atan2",
    "erf",
    "erfc",
    "is_nan",
    "is_inf",
    "is_finite",
    "truncatediv",
    "truncatemod",
    "lgamma",
    "digamma",
    "polygamma",
    "xlogy",
    "xdivy",
    "xlog1py",
]

_FLOAT_OR_COMPLEX = TypeConstraint(
    ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
)

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _lgamma1(v: float) -> float:
    """log|Gamma(v)|; +inf at the poles (0, -1, -2, ...) where math.lgamma raises."""
    try:
        return math.lgamma(v)
    except ValueError:
        return math.inf


def _digamma(xp, x):
    """psi(x) in float64: reflection below 0, recurrence up to 10, then the asymptotic
    series (error below 1e-15 there); NaN at the poles 0, -1, -2, ..., as TF."""
    pole = (x <= 0) & (x == xp.floor(x))
    neg = x < 0
    y = xp.where(neg, 1.0 - x, x)
    y = xp.where(pole, 1.0, y)
    reflect = xp.where(neg & ~pole, math.pi / xp.tan(math.pi * xp.where(pole, 0.5, x)), 0.0)
    acc = xp.zeros_like(y)
    for _ in range(10):
        small = y < 10.0
        acc = acc - xp.where(small, 1.0 / y, 0.0)
        y = xp.where(small, y + 1.0, y)
    inv2 = 1.0 / (y * y)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (
        1 / 240 - inv2 * (1 / 132 - inv2 * (691 / 32760 - inv2 / 12))))))  # fmt: skip
    out = acc + xp.log(y) - 0.5 / y - series - reflect
    return xp.where(pole, xp.nan, out)


# Euler-Maclaurin coefficients (2k)!/B_2k of the Hurwitz zeta tail (Cephes' zeta.c).
_ZETA_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)


def _zeta(xp, s, q):
    """Hurwitz zeta(s, q) for s > 1 (float64): direct terms until q + n >= 9, then the
    Euler-Maclaurin tail; +inf at q = 0, -1, ...; NaN for q < 0 with s non-integer."""
    n = xp.maximum(9.0, xp.ceil(9.0 - q))
    n = xp.where(xp.isfinite(n), xp.minimum(n, 1e5), 9.0)
    k_max = int(to_host(xp, xp.max(n))) if n.size else 0
    total = xp.zeros_like(q)
    for k in range(k_max + 1):  # q^-s ... (q + n)^-s: the last term is the tail's too
        total = total + xp.where(k <= n, (q + k) ** -s, 0.0)
    w = q + n
    b = w**-s
    total = total + w * b / (s - 1.0) - 0.5 * b
    a, k = xp.ones_like(q), 0.0
    for coef in _ZETA_A:
        a = a * (s + k)
        b = b / w
        total = total + a * b / coef
        k += 1.0
        a = a * (s + k)
        b = b / w
        k += 1.0
    bad = (q <= 0) & (q == xp.floor(q))
    total = xp.where(bad, xp.inf, total)
    return xp.where((q < 0) & (s != xp.floor(s)), xp.nan, total)


def _polygamma(xp, a, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for integer n >= 1; psi(x) for n = 0;
    NaN for n negative or not an integer, as TF."""
    a64, x64 = np.broadcast_arrays(a, x) if xp is np else xp.broadcast_arrays(a, x)
    a64, x64 = a64.astype(np.float64), x64.astype(np.float64)
    n = xp.where((a64 >= 1) & (a64 == xp.floor(a64)), a64, 1.0)
    fact = xp.ones_like(n)
    top = int(to_host(xp, xp.max(xp.minimum(n, 171.0)))) if n.size else 0
    for k in range(2, top + 1):
        fact = fact * xp.where(k <= n, float(k), 1.0)
    sign = xp.where(xp.fmod(n, 2.0) == 1.0, 1.0, -1.0)
    out = sign * fact * _zeta(xp, n + 1.0, x64)
    out = xp.where(a64 == 0, _digamma(xp, x64), out)
    out = xp.where((a64 >= 1) & xp.isposinf(x64), 0.0, out)  # (TF's limit at x = inf)
    out = xp.where((a64 < 0) | (a64 != xp.floor(a64)), xp.nan, out)
    return out.astype(x.dtype)


def _via_double(fn):
    """fn computed in float64 (math.erf's precision), returned in x's dtype.  On a
    device, x comes to the host by an explicit copy (`to_host`) and the result goes
    back with `xp.asarray`."""
    return lambda xp, x: xp.asarray(fn(np.asarray(to_host(xp, x), np.float64))).astype(x.dtype)


Acos = _unary_op("Acos", lambda xp, x: xp.arccos(x), _FLOAT_OR_COMPLEX)
Asin = _unary_op("Asin", lambda xp, x: xp.arcsin(x), _FLOAT_OR_COMPLEX)
Atan = _unary_op("Atan", lambda xp, x: xp.arctan(x), _FLOAT_OR_COMPLEX)
Sinh = _unary_op("Sinh", lambda xp, x: xp.sinh(x), _FLOAT_OR_COMPLEX)
Cosh = _unary_op("Cosh", lambda xp, x: xp.cosh(x), _FLOAT_OR_COMPLEX)
Asinh = _unary_op("Asinh", lambda xp, x: xp.arcsinh(x), _FLOAT_OR_COMPLEX)
Acosh = _unary_op("Acosh", lambda xp, x: xp.arccosh(x), _FLOAT_OR_COMPLEX)
Atanh = _unary_op("Atanh", lambda xp, x: xp.arctanh(x), _FLOAT_OR_COMPLEX)
Erf = _unary_op("Erf", _via_double(_erf), FLOATING)
Erfc = _unary_op("Erfc", _via_double(_erfc), FLOATING)
Lgamma = _unary_op("Lgamma", _via_double(np.vectorize(_lgamma1, otypes=[np.float64])), FLOATING)
Digamma = _unary_op(
    "Digamma", lambda xp, x: _digamma(xp, x.astype(np.float64)).astype(x.dtype), FLOATING
)
Polygamma = _binary_op(
    "Polygamma", lambda xp, a, x: _polygamma(xp, a, x), TypeConstraint(["float32", "float64"])
)
Atan2 = _binary_op("Atan2", lambda xp, y, x: xp.arctan2(y, x), FLOATING)


def _x_times(fn):
    """TF's Xlogy/Xdivy/Xlog1py: 0 where x == 0 (even where fn(y) is inf or nan)."""

    def kernel(xp, x, y):
        x, y = xp.asarray(x), xp.asarray(y)
        with np.errstate(all="ignore"):
            out = x * fn(xp, y)
        return xp.where(x == 0, xp.zeros_like(out), out)

    return kernel


Xlogy = _binary_op("Xlogy", _x_times(lambda xp, y: xp.log(y)), _FLOAT_OR_COMPLEX)
Xdivy = _binary_op("Xdivy", _x_times(lambda xp, y: 1 / y), _FLOAT_OR_COMPLEX)
Xlog1py = _binary_op("Xlog1py", _x_times(lambda xp, y: xp.log1p(y)), _FLOAT_OR_COMPLEX)


DivNoNan = _binary_op("DivNoNan", no_nan(lambda x, y: x / y), _FLOAT_OR_COMPLEX)
MulNoNan = _binary_op("MulNoNan", no_nan(lambda x, y: x * y), _FLOAT_OR_COMPLEX)


def _check_trunc_div(xp, x, y, dtype) -> None:
    # TF's CPU kernels for TruncateDiv/TruncateMod do not flag integer division by zero as
    # Div/FloorDiv do: the step fails with InternalError "Unexpected error in binary
    # operator (only integer div and mod should have errors)" (TF 2.21).
    try:
        _check_int_div(xp, x, y, dtype)
    except errors.InvalidArgumentError:
        raise errors.InternalError(
            None,
            None,
            "Unexpected error in binary operator (only integer div and mod should have errors)",
        ) from None


def _truncate_div(xp, x, y):
    """C's `/` for integers; for floats TF's TruncateDiv truncates the quotient too."""
    q = _trunc_div(xp, x, y)
    return xp.trunc(q) if q.dtype.kind == "f" else q


TruncateDiv = _binary_op("TruncateDiv", _truncate_div, REAL, check=_check_trunc_div)
TruncateMod = _binary_op(
    "TruncateMod", lambda xp, x, y: xp.fmod(x, y), REAL, check=_check_trunc_div
)
NotDifferentiable("TruncateDiv")  # (TruncateMod has no gradient in TF: LookupError)


def _predicate_op(op_type: str, fn):
    op_def = register_op(
        op_type,
        inputs=["x: T"],
        outputs=["y: bool"],
        attrs={"T": FLOATING},
        shape_fn=lambda op: [op.inputs[0].shape],
    )
    NotDifferentiable(op_type)

    @op_def.kernel()
    async def _kernel(ctx, x):
        return fn(ctx.xp, x)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


IsNan = _predicate_op("IsNan", lambda xp, x: xp.isnan(x))
IsInf = _predicate_op("IsInf", lambda xp, x: xp.isinf(x))
IsFinite = _predicate_op("IsFinite", lambda xp, x: xp.isfinite(x))


# -- gradients (TF's math_grad.py) -----------------------------------------------------------
# For complex x each takes the conjugate of the derivative, as TF's do.


def _apply(op_type, *inputs):
    return _g.apply(op_type, *inputs)


def _one_minus_x2(x):
    return _apply("Sub", _g.ones_like(x), _apply("Square", x))


@Acos.gradient
def _acos_grad(op, grad):
    x = _conj(op.inputs[0])
    return _g.neg(_apply("Mul", grad, _apply("Rsqrt", _one_minus_x2(x))))


@Asin.gradient
def _asin_grad(op, grad):
    return _apply("Mul", grad, _apply("Rsqrt", _one_minus_x2(_conj(op.inputs[0]))))


@Atan.gradient
def _atan_grad(op, grad):
    x = _conj(op.inputs[0])
    return _apply("Mul", grad, _apply("Reciprocal", _apply("AddV2", _g.ones_like(x),
                                                             _apply("Square", x))))  # fmt: skip


@Sinh.gradient
def _sinh_grad(op, grad):
    return _apply("Mul", grad, _apply("Cosh", _conj(op.inputs[0])))


@Cosh.gradient
def _cosh_grad(op, grad):
    return _apply("Mul", grad, _apply("Sinh", _conj(op.inputs[0])))


@Asinh.gradient
def _asinh_grad(op, grad):
    return _apply("RealDiv", grad, _apply("Cosh", _conj(op.outputs[0])))


@Acosh.gradient
def _acosh_grad(op, grad):
    return _apply("RealDiv", grad, _apply("Sinh", _conj(op.outputs[0])))


@Atanh.gradient
def _atanh_grad(op, grad):
    return _apply("Mul", grad, _apply("Reciprocal", _one_minus_x2(_conj(op.inputs[0]))))


@Erf.gradient
def _erf_grad(op, grad):
    x = op.inputs[0]
    two_over_root_pi = _g.constant(2 / math.sqrt(math.pi), x.dtype)
    return _apply("Mul", grad, _apply("Mul", two_over_root_pi, _apply("Exp", _g.neg(
        _apply("Square", x)))))  # fmt: skip


@Erfc.gradient
def _erfc_grad(op, grad):
    return _g.neg(_erf_grad(op, grad))


@Lgamma.gradient
def _lgamma_grad(op, grad):
    return _apply("Mul", grad, _apply("Digamma", op.inputs[0]))


@Digamma.gradient
def _digamma_grad(op, grad):
    x = op.inputs[0]
    return _apply("Mul", grad, _apply("Polygamma", _g.ones_like(x), x))


@Polygamma.gradient
def _polygamma_grad(op, grad):
    # TF's _PolygammaGrad: no gradient for the order a.
    a, x = op.inputs
    gx = _apply("Mul", grad, _apply("Polygamma", _apply("AddV2", a, _g.ones_like(a)), x))
    return _g.broadcast_reduce(a, x, None, gx)


@Atan2.gradient
def _atan2_grad(op, grad):
    y, x = op.inputs
    inv = _apply("Reciprocal", _apply("AddV2", _apply("Square", x), _apply("Square", y)))
    gy = _apply("Mul", grad, _apply("Mul", x, inv))
    gx = _apply("Mul", grad, _g.neg(_apply("Mul", y, inv)))
    return _g.broadcast_reduce(y, x, gy, gx)


def _x_grad(op_type: str, dy_term):
    """TF's math_grad: d/dx = f(y) where x != 0 (0 at x == 0); d/dy = dy_term(x, y),
    itself an Xdivy so that it is 0 where x == 0."""

    @get_op_def(op_type).gradient
    def _grad(op, grad):
        x, y = op.inputs
        nonzero = _g.cast(_apply("NotEqual", x, _g.zeros_like(x)), x.dtype)
        gx = _apply("Mul", grad, _apply(op_type, nonzero, y))
        gy = _apply("Mul", grad, dy_term(x, y))
        return _g.broadcast_reduce(x, y, gx, gy)

    return _grad


_x_grad("Xlogy", lambda x, y: _apply("Xdivy", x, y))
_x_grad("Xlog1py", lambda x, y: _apply("Xdivy", x, _apply("AddV2", y, _g.ones_like(y))))
_x_grad("Xdivy", lambda x, y: _apply("Xdivy", _g.neg(x), _apply("Square", y)))


@DivNoNan.gradient
def _div_no_nan_grad(op, grad):
    """TF's _DivNoNanGrad: grad / y, and grad * (-x / y) / y, each 0 where y == 0."""
    x, y = op.inputs
    xc, yc = _conj(x), _conj(y)
    gx = _apply("DivNoNan", grad, yc)
    gy = _apply("Mul", grad, _apply("DivNoNan", _apply("DivNoNan", _g.neg(xc), yc), yc))
    return _g.broadcast_reduce(x, y, gx, gy)


@MulNoNan.gradient
def _mul_no_nan_grad(op, grad):
    """TF's _MulNoNanGrad: MulNoNan(grad, y) and MulNoNan(x, grad)."""
    x, y = op.inputs
    return _g.broadcast_reduce(x, y, _apply("MulNoNan", grad, y), _apply("MulNoNan", x, grad))


# -- builders ------------------------------------------------------------------------------


def _unary(op_type: str):
    def builder(x, name=None):
        return ops.apply_op(op_type, [x], name=name).outputs[0]

    builder.__doc__ = f"Element-wise {op_type} (TF's `tf.math.{op_type.lower()}`)."
    return _dispatch.add_dispatch_support(builder)


acos, asin, atan = _unary("Acos"), _unary("Asin"), _unary("Atan")
sinh, cosh = _unary("Sinh"), _unary("Cosh")
asinh, acosh, atanh = _unary("Asinh"), _unary("Acosh"), _unary("Atanh")
erf, erfc = _unary("Erf"), _unary("Erfc")
erf = sparse_values_map(erf)
lgamma, digamma = _unary("Lgamma"), _unary("Digamma")


def polygamma(a, x, name=None):
    """Element-wise psi^(a)(x), the a-th derivative of digamma (op Polygamma)."""
    return ops.apply_op("Polygamma", [a, x], name=name).outputs[0]


def _x_binary(op_type: str):
    def builder(x, y, name=None):
        return ops.apply_op(op_type, [x, y], name=name).outputs[0]

    builder.__doc__ = (
        f"Element-wise {op_type}: x * f(y), 0 where x == 0 (TF's `tf.math.{op_type.lower()}`)."
    )
    return _dispatch.add_dispatch_support(builder)


xlogy, xdivy, xlog1py = _x_binary("Xlogy"), _x_binary("Xdivy"), _x_binary("Xlog1py")

is_nan, is_inf, is_finite = _unary("IsNan"), _unary("IsInf"), _unary("IsFinite")


@_dispatch.add_dispatch_support
def atan2(y, x, name=None):
    """Element-wise arctan(y / x) in the right quadrant (op Atan2)."""
    return ops.apply_op("Atan2", [y, x], name=name).outputs[0]


@_dispatch.add_dispatch_support
def truncatediv(x, y, name=None):
    """C's `/`: integers round toward zero (op TruncateDiv).

    Raises (when run): InternalError for an integer division by zero, as TF's kernel."""
    return ops.apply_op("TruncateDiv", [x, y], name=name).outputs[0]


@_dispatch.add_dispatch_support
def truncatemod(x, y, name=None):
    """C's `%` (fmod): the remainder has the sign of x (op TruncateMod).

    Raises (when run): InternalError for an integer division by zero, as TF's kernel."""
    return ops.apply_op("TruncateMod", [x, y], name=name).outputs[0]
