"""Special functions and complex parts: Zeta, Igamma, Igammac (with IgammaGradA),
Betainc, the ops of `tf.math.special` (Dawsn, Expint, FresnelCos/Sin, Spence,
BesselJ0/J1/Y0/Y1/K0/K0e/K1/K1e; `special` holds their builders) (Lgamma, Digamma and
Polygamma are special_math_ops'), Real, Imag, Complex,
Angle, Rint; and Bitcast,
Roll, UnravelIndex.  Gradients as TF's math_grad.py / manip_grad.py.

The special functions are SciPy's (`scipy.special`), computed in float64 on the host
(a device input comes over by an explicit copy) and returned in the input's dtype.
IgammaGradA (d igamma / d a, a TF op of its own) is a Richardson-extrapolated central
difference of the regularized incomplete gamma in float64 (about 1e-9 relative).
"""

from __future__ import annotations

import types

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops import reduction_ops
from asyncflow.ops.math_helpers import special as sp
from asyncflow.ops.math_helpers import to_host
from asyncflow.ops.math_ops import _binary_op, _unary_op
from asyncflow.registry import (
    ANY,
    FLOATING,
    INDEX,
    NUMERIC,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)

__all__ = [
    "bessel_i0",
    "bessel_i0e",
    "bessel_i1",
    "bessel_i1e",
    "zeta",
    "igamma",
    "igammac",
    "betainc",
    "real",
    "imag",
    "complex",
    "angle",
    "rint",
    "bitcast",
    "roll",
    "unravel_index",
]

_FLOAT32_64 = TypeConstraint(["float32", "float64"])
_COMPLEX = TypeConstraint(["complex64", "complex128"], default="complex64")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _host64(xp, x):
    return np.asarray(to_host(xp, x), np.float64)


def _special(fn):
    """fn of float64 host copies, back in the first input's dtype on its device."""

    def kernel_fn(xp, *args):
        with np.errstate(all="ignore"):
            out = fn(*(_host64(xp, a) for a in args))
        return xp.asarray(out).astype(args[0].dtype)

    return kernel_fn


def _igamma_grad_a(a, x):
    """d/da of the regularized lower incomplete gamma P(a, x), by Richardson extrapolation
    of central differences (h and h/2)."""
    h = 1e-3 * np.maximum(np.abs(a), 1.0)
    safe = np.maximum(a - h, 1e-300)

    def diff(step, lo):
        return (sp.gammainc(a + step, x) - sp.gammainc(lo, x)) / (a + step - lo)

    d1 = diff(h, safe)
    d2 = diff(h / 2, np.maximum(a - h / 2, 1e-300))
    return (4 * d2 - d1) / 3


def _igamma(a, x):
    """P(a, x) with TF's edge values: 0 at x = 0 (whatever a), NaN for x < 0 or a <= 0,
    and 0 for a = x = inf."""
    out = np.where(x == 0, 0.0, sp.gammainc(a, x))
    out = np.where((x < 0) | ((a <= 0) & (x != 0)), np.nan, out)
    return np.where(np.isposinf(a) & np.isposinf(x), 0.0, out)


def _igammac(a, x):
    """Q(a, x) with TF's edge values: NaN for x < 0 or a <= 0, and 0 for a = x = inf."""
    out = np.where((x < 0) | (a <= 0), np.nan, sp.gammaincc(a, x))
    return np.where(np.isposinf(a) & np.isposinf(x), 0.0, out)


def _betainc_host(a, b, x):
    """I_x(a, b); NaN for a <= 0 or b <= 0 (TF's, where SciPy gives a limit)."""
    return np.where((a <= 0) | (b <= 0), np.nan, sp.betainc(a, b, x))


Zeta = _binary_op("Zeta", _special(sp.zeta), _FLOAT32_64)
Igamma = _binary_op("Igamma", _special(_igamma), _FLOAT32_64)
Igammac = _binary_op("Igammac", _special(_igammac), _FLOAT32_64)
IgammaGradA = _binary_op("IgammaGradA", _special(_igamma_grad_a), _FLOAT32_64)
Rint = _unary_op("Rint", lambda xp, x: xp.rint(x), FLOATING)
NotDifferentiable("IgammaGradA")


def _random_gamma_grad(a, x):
    """d sample / d alpha of a standard gamma sample (implicit reparameterization): the
    change of alpha that keeps P(alpha, sample) fixed, -(dP/da) / density."""
    log_density = (a - 1) * np.log(x) - x - sp.gammaln(a)
    return -_igamma_grad_a(a, x) / np.exp(log_density)


# TF's RandomGammaGrad(alpha, sample): RandomGamma's gradient (ops/random_more_ops.py).
RandomGammaGrad = _binary_op("RandomGammaGrad", _special(_random_gamma_grad), _FLOAT32_64)
NotDifferentiable("RandomGammaGrad")


BesselI0e = _unary_op("BesselI0e", _special(sp.i0e), FLOATING)
BesselI1e = _unary_op("BesselI1e", _special(sp.i1e), FLOATING)


@BesselI0e.gradient
def _bessel_i0e_grad(op, grad):
    # d/dx i0e(x) = i1e(x) - sign(x) i0e(x)
    x, y = op.inputs[0], op.outputs[0]
    dy = _g.apply("Sub", _g.apply("BesselI1e", x), _g.mul(_g.apply("Sign", x), y))
    return _g.mul(grad, dy)


@BesselI1e.gradient
def _bessel_i1e_grad(op, grad):
    # d/dx i1e(x) = i0e(x) - i1e(x) (sign(x) + 1 / x); 1/2 at x = 0 (the limit).
    x, y = op.inputs[0], op.outputs[0]
    tiny = _g.constant(np.finfo(x.dtype.as_numpy_dtype).tiny, x.dtype)
    not_tiny = _g.apply("Greater", _g.apply("Abs", x), tiny)
    safe_x = _g.apply("Select", not_tiny, x, _g.ones_like(x))
    scale = _g.apply("AddV2", _g.apply("Sign", safe_x), _g.apply("Reciprocal", safe_x))
    dy = _g.apply("Sub", _g.apply("BesselI0e", safe_x), _g.mul(y, scale))
    half = _g.mul(_g.ones_like(x), _g.constant(0.5, x.dtype))
    return _g.mul(grad, _g.apply("Select", not_tiny, dy, half))


@_dispatch.add_dispatch_support
def bessel_i0e(x, name=None):
    """`tf.math.bessel_i0e`: the exponentially scaled modified Bessel function of order 0,
    exp(-|x|) I0(x) (op BesselI0e)."""
    return ops.apply_op("BesselI0e", [x], name=name).outputs[0]


@_dispatch.add_dispatch_support
def bessel_i1e(x, name=None):
    """`tf.math.bessel_i1e`: exp(-|x|) I1(x) (op BesselI1e)."""
    return ops.apply_op("BesselI1e", [x], name=name).outputs[0]


@_dispatch.add_dispatch_support
def bessel_i0(x, name=None):
    """`tf.math.bessel_i0`: I0(x) (op BesselI0)."""
    with ops.name_scope(name, "bessel_i0", [x]):
        return ops.apply_op("BesselI0", [ops.convert_to_tensor(x, name="x")]).outputs[0]


@_dispatch.add_dispatch_support
def bessel_i1(x, name=None):
    """`tf.math.bessel_i1`: I1(x) (op BesselI1)."""
    with ops.name_scope(name, "bessel_i1", [x]):
        return ops.apply_op("BesselI1", [ops.convert_to_tensor(x, name="x")]).outputs[0]


# -- tf.math.special: Dawsn, Expint, Fresnel{Cos,Sin}, Spence, Bessel{J,Y}{0,1}, K ----------


def _fresnel(part):
    def fn(x):
        s, c = sp.fresnel(x)
        return c if part == "cos" else s

    return fn


def _below_zero(fn, value):
    """fn(x), with TF's `value` for x < 0 (outside these functions' real domain)."""
    return lambda x: np.where(x < 0, value, fn(x))


_SPECIAL_UNARY = {  # op type -> (builder name, SciPy function)
    "Dawsn": ("dawsn", sp.dawsn),
    "Expint": ("expint", _below_zero(sp.expi, np.nan)),
    "FresnelCos": ("fresnel_cos", _fresnel("cos")),
    "FresnelSin": ("fresnel_sin", _fresnel("sin")),
    "Spence": ("spence", sp.spence),
    "BesselJ0": ("bessel_j0", sp.j0),
    "BesselJ1": ("bessel_j1", sp.j1),
    "BesselY0": ("bessel_y0", _below_zero(sp.y0, -np.inf)),
    "BesselY1": ("bessel_y1", _below_zero(sp.y1, -np.inf)),
    "BesselK0": ("bessel_k0", _below_zero(sp.k0, np.inf)),
    "BesselK0e": ("bessel_k0e", _below_zero(sp.k0e, np.inf)),
    "BesselK1": ("bessel_k1", _below_zero(sp.k1, np.inf)),
    "BesselK1e": ("bessel_k1e", _below_zero(sp.k1e, np.inf)),
}
_SPECIAL_OPS = {t: _unary_op(t, _special(fn), FLOATING) for t, (_, fn) in _SPECIAL_UNARY.items()}


def _at_zero(x, value, where_nonzero):
    """where_nonzero(safe x) where x != 0, else `value` (the derivative's limit)."""
    nonzero = _g.apply("NotEqual", x, _g.zeros_like(x))
    safe = _g.apply("Select", nonzero, x, _g.ones_like(x))
    limit = _g.mul(_g.ones_like(x), _g.constant(value, x.dtype))
    return _g.apply("Select", nonzero, where_nonzero(safe), limit)


def _over(a, b):
    return _g.apply("RealDiv", a, b)


# The derivatives (TF's special_math_ops gradients), in terms of the ops' own values.
_SPECIAL_DERIVATIVES = {
    "Dawsn": lambda x, y: _g.apply(
        "Sub", _g.ones_like(x), _g.mul(_g.mul(_g.constant(2, x.dtype), x), y)
    ),
    "Expint": lambda x, y: _over(_g.apply("Exp", x), x),
    "FresnelCos": lambda x, y: _g.apply("Cos", _g.mul(_g.constant(np.pi / 2, x.dtype), x * x)),
    "FresnelSin": lambda x, y: _g.apply("Sin", _g.mul(_g.constant(np.pi / 2, x.dtype), x * x)),
    "Spence": lambda x, y: _at_zero(
        _g.apply("Sub", x, _g.ones_like(x)),
        -1.0,
        lambda d: _over(_g.apply("Log", _g.apply("AddV2", d, _g.ones_like(d))), _g.neg(d)),
    ),
    "BesselJ0": lambda x, y: _g.neg(_g.apply("BesselJ1", x)),
    "BesselJ1": lambda x, y: _at_zero(
        x,
        0.5,
        lambda s: _g.apply("Sub", _g.apply("BesselJ0", s), _over(_g.apply("BesselJ1", s), s)),
    ),
    "BesselY0": lambda x, y: _g.neg(_g.apply("BesselY1", x)),
    "BesselY1": lambda x, y: _g.apply("Sub", _g.apply("BesselY0", x), _over(y, x)),
    "BesselK0": lambda x, y: _g.neg(_g.apply("BesselK1", x)),
    "BesselK0e": lambda x, y: _g.apply("Sub", y, _g.apply("BesselK1e", x)),
    "BesselK1": lambda x, y: _g.apply("Sub", _g.neg(_g.apply("BesselK0", x)), _over(y, x)),
    "BesselK1e": lambda x, y: _g.apply(
        "Sub", _g.apply("Sub", y, _g.apply("BesselK0e", x)), _over(y, x)
    ),
}


def _special_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    with ops.control_dependencies([grad]):
        return _g.mul(grad, _SPECIAL_DERIVATIVES[op.type](x, y))


def _special_builder(op_type: str, fn_name: str):
    def builder(x, name=None):
        return ops.apply_op(op_type, [x], name=name).outputs[0]

    builder.__name__ = builder.__qualname__ = fn_name
    builder.__doc__ = f"`tf.math.special.{fn_name}` (op {op_type}; SciPy's values in float64)."
    return _dispatch.add_dispatch_support(builder)


for _type, _op in _SPECIAL_OPS.items():
    _op.gradient(_special_grad)

# `tf.math.special`: the builders above and the Bessel I functions.
special = types.SimpleNamespace(
    bessel_i0=bessel_i0,
    bessel_i0e=bessel_i0e,
    bessel_i1=bessel_i1,
    bessel_i1e=bessel_i1e,
    **{name: _special_builder(t, name) for t, (name, _) in _SPECIAL_UNARY.items()},
)
del _type, _op


@Zeta.gradient
def _zeta_grad(op, grad):
    x, q = op.inputs
    x1 = _g.apply("AddV2", x, _g.constant(1, x.dtype))
    gq = _g.mul(grad, _g.neg(_g.mul(x, _g.apply("Zeta", x1, q))))
    return [None, _g.broadcast_reduce(x, q, None, gq)[1]]


def _igamma_density(a, x):
    """exp(-x + (a - 1) log x - lgamma(a)): d igamma(a, x) / dx."""
    one = _g.constant(1, a.dtype)
    log = _g.apply("Mul", _g.apply("Sub", a, one), _g.apply("Log", x))
    return _g.apply("Exp", _g.apply("Sub", _g.apply("Sub", log, x), _g.apply("Lgamma", a)))


def _igamma_grads(op, grad, sign):
    a, x = op.inputs
    ga = _g.mul(grad, _g.apply("IgammaGradA", a, x))
    gx = _g.mul(grad, _igamma_density(a, x))
    if sign < 0:
        ga, gx = _g.neg(ga), _g.neg(gx)
    return list(_g.broadcast_reduce(a, x, ga, gx))


@Igamma.gradient
def _igamma_grad(op, grad):
    return _igamma_grads(op, grad, 1)


@Igammac.gradient
def _igammac_grad(op, grad):
    return _igamma_grads(op, grad, -1)


@Rint.gradient
def _rint_grad(op, grad):
    return [None]  # piecewise constant, as TF


# -- Betainc --------------------------------------------------------------------------------


def _betainc_shape(op):
    shapes = [t.shape for t in op.inputs]
    out = tensor_shape.unknown_shape()
    for s in shapes:
        if s.ndims != 0:
            out = out.merge_with(s)
    if all(s.ndims == 0 for s in shapes):
        return [tensor_shape.TensorShape([])]
    return [out]


Betainc = register_op(
    "Betainc",
    inputs=["a: T", "b: T", "x: T"],
    outputs=["z: T"],
    attrs={"T": _FLOAT32_64},
    shape_fn=_betainc_shape,
)


@Betainc.kernel()
async def _betainc(ctx, a, b, x):
    xp = ctx.xp
    a, b, x = xp.asarray(a), xp.asarray(b), xp.asarray(x)
    shapes = {tuple(v.shape) for v in (a, b, x) if v.ndim}
    if len(shapes) > 1:
        names = ", ".join(str(list(v.shape)) for v in (a, b, x))
        raise _invalid(f"Shapes of a, b and x are inconsistent: {names}")
    return _special(_betainc_host)(xp, a, b, x)


@Betainc.gradient
def _betainc_grad(op, grad):
    # TF defines the gradient for x only: x^(a-1) (1-x)^(b-1) / B(a, b)
    a, b, x = op.inputs
    one = _g.constant(1, x.dtype)
    log_beta = _g.apply(
        "Sub",
        _g.apply("AddV2", _g.apply("Lgamma", a), _g.apply("Lgamma", b)),
        _g.apply("Lgamma", _g.apply("AddV2", a, b)),
    )
    t1 = _g.apply("Mul", _g.apply("Sub", b, one), _g.apply("Log1p", _g.neg(x)))
    t2 = _g.apply("Mul", _g.apply("Sub", a, one), _g.apply("Log", x))
    density = _g.apply("Exp", _g.apply("Sub", _g.apply("AddV2", t1, t2), log_beta))
    gx = _g.mul(grad, density)
    if x.shape.ndims == 0 and op.outputs[0].shape.ndims != 0:
        gx = reduction_ops.reduce_sum(gx)
    return [None, None, gx]


# -- complex parts ------------------------------------------------------------------------


def _complex_part(op_type: str, fn):
    op_def = register_op(
        op_type,
        inputs=["input: T"],
        outputs=["output: Tout"],
        attrs={"T": _COMPLEX, "Tout": _FLOAT32_64},
        shape_fn=lambda op: [op.inputs[0].shape],
    )

    @op_def.kernel()
    async def _kernel(ctx, x):
        return fn(ctx.xp, ctx.xp.asarray(x)).astype(ctx.attrs["Tout"].as_numpy_dtype)

    return op_def


Real = _complex_part("Real", lambda xp, x: xp.real(x))
Imag = _complex_part("Imag", lambda xp, x: xp.imag(x))
Angle = _complex_part("Angle", lambda xp, x: xp.angle(x))

Complex = register_op(
    "Complex",
    inputs=["real: T", "imag: T"],
    outputs=["out: Tout"],
    attrs={"T": _FLOAT32_64, "Tout": _COMPLEX},
    shape_fn=lambda op: [tensor_shape.broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)],
)


@Complex.kernel()
async def _complex(ctx, re, im):
    xp = ctx.xp
    out = xp.asarray(re) + 1j * xp.asarray(im)
    return out.astype(ctx.attrs["Tout"].as_numpy_dtype)


def _to_complex(re, im):
    out = dtypes.complex128 if re.dtype.base_dtype == dtypes.float64 else dtypes.complex64
    return _g.apply("Complex", re, im, Tout=out)


@Real.gradient
def _real_grad(op, grad):
    return [_to_complex(grad, _g.zeros_like(grad))]


@Imag.gradient
def _imag_grad(op, grad):
    return [_to_complex(_g.zeros_like(grad), grad)]


@Angle.gradient
def _angle_grad(op, grad):
    # d angle = -(1 / (im + i re)) * grad, as TF's _AngleGrad
    x = op.inputs[0]
    real_t = x.dtype.real_dtype
    re = _g.apply("Real", x, Tout=real_t)
    im = _g.apply("Imag", x, Tout=real_t)
    z = _g.apply("Reciprocal", _to_complex(im, re))
    return [_g.neg(_g.mul(_to_complex(grad, _g.zeros_like(grad)), z))]


@Complex.gradient
def _complex_grad(op, grad):
    re, im = op.inputs
    real_t = re.dtype.base_dtype
    gr = _g.apply("Real", grad, Tout=real_t)
    gi = _g.apply("Imag", grad, Tout=real_t)
    return list(_g.broadcast_reduce(re, im, gr, gi))


# -- Bitcast, Roll, UnravelIndex ------------------------------------------------------------

_BITCAST_TYPES = TypeConstraint(
    [
        "bfloat16", "float16", "float32", "float64", "int64", "int32", "uint8", "uint16",
        "uint32", "uint64", "int8", "int16", "complex64", "complex128", "qint8", "quint8",
        "qint16", "quint16", "qint32",
    ]
)  # fmt: skip


def _bitcast_shape(op):
    src, dst = op.get_attr("T"), op.get_attr("type")
    shape = op.inputs[0].shape
    if src.size == dst.size:
        return [shape]
    if src.size > dst.size:
        if src.size % dst.size:
            raise ValueError(f"Cannot bitcast from {src} to {dst}")
        return [shape.concatenate([src.size // dst.size])]
    shape = shape.with_rank_at_least(1)
    last = tensor_shape.dimension_value(shape[-1])
    if last is not None and last * src.size != dst.size:
        raise ValueError(  # (TF's words: the types as their DataType numbers)
            f"Cannot bitcast from {src.as_datatype_enum} to {dst.as_datatype_enum} due to "
            f"shape. {last} does not match {dst.size // src.size}"
        )
    return [shape[:-1]]


Bitcast = register_op(
    "Bitcast",
    inputs=["input: T"],
    outputs=["output: type"],
    attrs={"T": _BITCAST_TYPES, "type": _BITCAST_TYPES},
    shape_fn=_bitcast_shape,
)
NotDifferentiable("Bitcast")


@Bitcast.kernel()
async def _bitcast(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    x = xp.ascontiguousarray(x).reshape(x.shape)  # (ascontiguousarray makes a 0-d array [1])
    src, dst = ctx.attrs["T"], ctx.attrs["type"]
    if src.size < dst.size and (x.ndim == 0 or x.shape[-1] * src.size != dst.size):
        raise _invalid(f"Cannot bitcast from {src} to {dst}: shape {list(x.shape)}")
    out = x.view(dst.as_numpy_dtype)
    if src.size > dst.size:
        return out.reshape(*x.shape, src.size // dst.size)
    if src.size < dst.size:
        return out.reshape(x.shape[:-1])
    return out


def _roll_shape(op):
    return [op.inputs[0].shape]


Roll = register_op(
    "Roll",
    inputs=["input: T", "shift: Tshift", "axis: Taxis"],
    outputs=["output: T"],
    attrs={"T": ANY, "Tshift": INDEX, "Taxis": INDEX},
    shape_fn=_roll_shape,
)


def _host_ints(v) -> list[int]:
    return [int(i) for i in np.asarray(v.get() if hasattr(v, "get") else v).reshape(-1)]


@Roll.kernel(host_memory=("shift", "axis"))
async def _roll(ctx, x, shift, axis):
    xp = ctx.xp
    x = xp.asarray(x)
    if np.ndim(shift) != np.ndim(axis) or np.shape(shift) != np.shape(axis):
        raise _invalid("shift and axis must have the same size")
    shifts, axes = _host_ints(shift), _host_ints(axis)
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise _invalid(f"axis {a} is out of range for a tensor of rank {x.ndim}")
    return xp.roll(x, shifts, axes) if axes else x


@Roll.gradient
def _roll_grad(op, grad):
    _, shift, axis = op.inputs
    return [_g.apply("Roll", grad, _g.neg(shift), axis), None, None]


def _unravel_shape(op):
    idx, dims = op.inputs[0].shape, op.inputs[1].shape.with_rank(1)
    n = tensor_shape.dimension_value(dims[0])
    if idx.ndims == 0:
        return [tensor_shape.TensorShape([n])]
    if idx.ndims is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape([n, idx.num_elements()])]


UnravelIndex = register_op(
    "UnravelIndex",
    inputs=["indices: Tidx", "dims: Tidx"],
    outputs=["output: Tidx"],
    attrs={"Tidx": INDEX},
    shape_fn=_unravel_shape,
)
NotDifferentiable("UnravelIndex")


@UnravelIndex.kernel(host_memory=("dims",))
async def _unravel_index(ctx, indices, dims):
    xp = ctx.xp
    dims_l = _host_ints(dims)
    idx = xp.asarray(indices)
    total = int(np.prod(dims_l, dtype=np.int64))
    host = np.asarray(to_host(xp, idx))
    if host.size and ((host < 0).any() or (host >= total).any()):
        raise _invalid(f"index out of bounds for shape {dims_l}: {host.tolist()}")
    out = (
        xp.stack(xp.unravel_index(idx.reshape(-1), dims_l)) if dims_l else xp.zeros((0, idx.size))
    )
    out = out.astype(idx.dtype)
    return out.reshape(len(dims_l)) if idx.ndim == 0 else out


# -- builders -------------------------------------------------------------------------------


def _un(op_type):
    def builder(x, name=None):
        return ops.apply_op(op_type, [x], name=name).outputs[0]

    builder.__name__ = op_type.lower()
    builder.__doc__ = f"Element-wise {op_type} (op {op_type}; SciPy's values, TF's gradient)."
    return _dispatch.add_dispatch_support(builder)


def _bin(op_type, a, b, name, a_name, b_name):
    with ops.name_scope(name, op_type, [a, b]) as scope:
        a = ops.convert_to_tensor(a, name=a_name)
        b = ops.convert_to_tensor(b, name=b_name, dtype=a.dtype)
        return ops.apply_op(op_type, [a, b], name=scope).outputs[0]


rint = _un("Rint")


@_dispatch.add_dispatch_support
def zeta(x, q, name=None):
    """The Hurwitz zeta function zeta(x, q), broadcasting (op Zeta)."""
    return _bin("Zeta", x, q, name, "x", "q")


def igamma(a, x, name=None):
    """The lower regularized incomplete gamma P(a, x), broadcasting (op Igamma)."""
    return _bin("Igamma", a, x, name, "a", "x")


def igammac(a, x, name=None):
    """The upper regularized incomplete gamma Q(a, x), broadcasting (op Igammac)."""
    return _bin("Igammac", a, x, name, "a", "x")


def betainc(a, b, x, name=None):
    """The regularized incomplete beta I_x(a, b) (op Betainc); a, b and x have one shape
    or are scalars.

    Raises:
      InvalidArgumentError: (when run) shapes that are neither equal nor scalar.
    """
    with ops.name_scope(name, "Betainc", [a, b, x]) as scope:
        a = ops.convert_to_tensor(a, name="a")
        b = ops.convert_to_tensor(b, name="b", dtype=a.dtype)
        x = ops.convert_to_tensor(x, name="x", dtype=a.dtype)
        return ops.apply_op("Betainc", [a, b, x], name=scope).outputs[0]


@_dispatch.add_dispatch_support
def real(input, name=None):  # noqa: A002 - TF's name
    """The real part of a complex tensor; a real tensor is returned as it is."""
    with ops.name_scope(name, "Real", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        if not x.dtype.is_complex:
            if not (x.dtype.is_floating or x.dtype.is_integer):
                raise TypeError(
                    f"input must be a numeric tensor, but got tensor with dtype {x.dtype}"
                )
            return x
        attrs = {"Tout": x.dtype.real_dtype}
        return ops.apply_op("Real", [x], attrs, name=scope).outputs[0]


@_dispatch.add_dispatch_support
def imag(input, name=None):  # noqa: A002 - TF's name
    """The imaginary part of a complex tensor; zeros for a real one."""
    with ops.name_scope(name, "Imag", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        if not x.dtype.is_complex:
            return _g.zeros_like(x)
        attrs = {"Tout": x.dtype.real_dtype}
        return ops.apply_op("Imag", [x], attrs, name=scope).outputs[0]


@_dispatch.add_dispatch_support
def angle(input, name=None):  # noqa: A002 - TF's name
    """The argument of a complex tensor; pi where a real one is negative, else 0."""
    with ops.name_scope(name, "Angle", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        if x.dtype.is_complex:
            attrs = {"Tout": x.dtype.real_dtype}
            return ops.apply_op("Angle", [x], attrs, name=scope).outputs[0]
        neg = _g.apply("Less", x, _g.zeros_like(x))
        pi = _g.apply("Mul", _g.ones_like(x), _g.constant(np.pi, x.dtype))
        return ops.apply_op("Select", [neg, pi, _g.zeros_like(x)], name=scope).outputs[0]


@_dispatch.add_dispatch_support
def complex(real, imag, name=None):  # noqa: A001 - TF's name
    """real + i * imag: complex64 from float32 parts, complex128 from float64.

    Raises:
      TypeError: parts of different dtypes, or not float32/float64.
    """
    with ops.name_scope(name, "Complex", [real, imag]) as scope:
        re = ops.convert_to_tensor(real, name="real")
        im = ops.convert_to_tensor(imag, name="imag")
        dt = re.dtype.base_dtype
        if im.dtype.base_dtype != dt or dt not in (dtypes.float32, dtypes.float64):
            raise TypeError(
                f"The `real` and `imag` components have incorrect types: {re.dtype.name} "
                f"{im.dtype.name}. They must be consistent, and one of "
                "[tf.float32, tf.float64]"
            )
        out = dtypes.complex128 if dt == dtypes.float64 else dtypes.complex64
        return ops.apply_op("Complex", [re, im], {"Tout": out}, name=scope).outputs[0]


def bitcast(input, type, name=None):  # noqa: A002 - TF's names
    """The bits of `input` read as `type` (op Bitcast): a wider source gains a last
    dimension, a narrower one loses it.

    Raises:
      ValueError: sizes that do not divide, or a last dimension of the wrong size.
    """
    return ops.apply_op("Bitcast", [input], {"type": dtypes.as_dtype(type)}, name=name).outputs[0]


def roll(input, shift, axis, name=None):  # noqa: A002 - TF's name
    """Elements shifted cyclically by `shift` along `axis` (scalars or equal-length lists).

    Raises:
      InvalidArgumentError: (when run) shift and axis differ in size, or a bad axis.
    """
    return ops.apply_op("Roll", [input, shift, axis], name=name).outputs[0]


def unravel_index(indices, dims, name=None):
    """The coordinates in an array of shape `dims` of flat `indices` ([len(dims)] for a
    scalar index, else [len(dims), n]).

    Raises:
      InvalidArgumentError: (when run) an index out of range.
    """
    return ops.apply_op("UnravelIndex", [indices, dims], name=name).outputs[0]


del NUMERIC
