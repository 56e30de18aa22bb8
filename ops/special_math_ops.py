"""More element-wise math: inverse and hyperbolic trigonometry, Atan2, Erf/Erfc,
IsNan/IsInf/IsFinite, TruncateDiv/TruncateMod (C's `/` and `%`).

Registered through math_ops' factories (one kernel each, written against `ctx.xp`),
with TF's gradients (math_grad.py) where TF has one.  NumPy has no erf: it is
computed with `math.erf` element by element (exact to double precision).
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import to_host
from asyncflow.ops.math_ops import _binary_op, _check_int_div, _trunc_div, _unary_op
from asyncflow.registry import FLOATING, REAL, NotDifferentiable, TypeConstraint, register_op

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
]

_FLOAT_OR_COMPLEX = TypeConstraint(
    ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
)

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


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
Atan2 = _binary_op("Atan2", lambda xp, y, x: xp.arctan2(y, x), FLOATING)


def _check_trunc_div(xp, x, y, dtype) -> None:
    # TF's CPU kernels for TruncateDiv/TruncateMod do not flag integer division by zero as
    # Div/FloorDiv do: the step fails with InternalError "Unexpected error in binary
    # operator (only integer div and mod should have errors)" (TF 2.21).
    try:
        _check_int_div(xp, x, y, dtype)
    except errors.InvalidArgumentError:
        raise errors.InternalError(
            None, None,
            "Unexpected error in binary operator (only integer div and mod should have errors)",
        ) from None


TruncateDiv = _binary_op("TruncateDiv", _trunc_div, REAL, check=_check_trunc_div)
TruncateMod = _binary_op(
    "TruncateMod", lambda xp, x, y: xp.fmod(x, y), REAL, check=_check_trunc_div
)
NotDifferentiable("TruncateDiv")
NotDifferentiable("TruncateMod")


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


def _apply(op_type, *inputs):
    return _g.apply(op_type, *inputs)


def _one_minus_x2(x):
    return _apply("Sub", _g.ones_like(x), _apply("Square", x))


@Acos.gradient
def _acos_grad(op, grad):
    x = op.inputs[0]
    return _g.neg(_apply("Mul", grad, _apply("Rsqrt", _one_minus_x2(x))))


@Asin.gradient
def _asin_grad(op, grad):
    return _apply("Mul", grad, _apply("Rsqrt", _one_minus_x2(op.inputs[0])))


@Atan.gradient
def _atan_grad(op, grad):
    x = op.inputs[0]
    return _apply("Mul", grad, _apply("Reciprocal", _apply("AddV2", _g.ones_like(x),
                                                             _apply("Square", x))))  # fmt: skip


@Sinh.gradient
def _sinh_grad(op, grad):
    return _apply("Mul", grad, _apply("Cosh", op.inputs[0]))


@Cosh.gradient
def _cosh_grad(op, grad):
    return _apply("Mul", grad, _apply("Sinh", op.inputs[0]))


@Asinh.gradient
def _asinh_grad(op, grad):
    return _apply("RealDiv", grad, _apply("Cosh", op.outputs[0]))


@Acosh.gradient
def _acosh_grad(op, grad):
    return _apply("RealDiv", grad, _apply("Sinh", op.outputs[0]))


@Atanh.gradient
def _atanh_grad(op, grad):
    return _apply("Mul", grad, _apply("Reciprocal", _one_minus_x2(op.inputs[0])))


@Erf.gradient
def _erf_grad(op, grad):
    x = op.inputs[0]
    two_over_root_pi = _g.constant(2 / math.sqrt(math.pi), x.dtype)
    return _apply("Mul", grad, _apply("Mul", two_over_root_pi, _apply("Exp", _g.neg(
        _apply("Square", x)))))  # fmt: skip


@Erfc.gradient
def _erfc_grad(op, grad):
    return _g.neg(_erf_grad(op, grad))


@Atan2.gradient
def _atan2_grad(op, grad):
    y, x = op.inputs
    inv = _apply("Reciprocal", _apply("AddV2", _apply("Square", x), _apply("Square", y)))
    gy = _apply("Mul", grad, _apply("Mul", x, inv))
    gx = _apply("Mul", grad, _g.neg(_apply("Mul", y, inv)))
    return _g.broadcast_reduce(y, x, gy, gx)


# -- builders ------------------------------------------------------------------------------


def _unary(op_type: str):
    def builder(x, name=None):
        return ops.apply_op(op_type, [x], name=name).outputs[0]

    builder.__doc__ = f"Element-wise {op_type} (TF's `tf.math.{op_type.lower()}`)."
    return builder


acos, asin, atan = _unary("Acos"), _unary("Asin"), _unary("Atan")
sinh, cosh = _unary("Sinh"), _unary("Cosh")
asinh, acosh, atanh = _unary("Asinh"), _unary("Acosh"), _unary("Atanh")
erf, erfc = _unary("Erf"), _unary("Erfc")
is_nan, is_inf, is_finite = _unary("IsNan"), _unary("IsInf"), _unary("IsFinite")


def atan2(y, x, name=None):
    """Element-wise arctan(y / x) in the right quadrant (op Atan2)."""
    return ops.apply_op("Atan2", [y, x], name=name).outputs[0]


def truncatediv(x, y, name=None):
    """C's `/`: integers round toward zero (op TruncateDiv).

    Raises (when run): InternalError for an integer division by zero, as TF's kernel."""
    return ops.apply_op("TruncateDiv", [x, y], name=name).outputs[0]


def truncatemod(x, y, name=None):
    """C's `%` (fmod): the remainder has the sign of x (op TruncateMod).

    Raises (when run): InternalError for an integer division by zero, as TF's kernel."""
    return ops.apply_op("TruncateMod", [x, y], name=name).outputs[0]
