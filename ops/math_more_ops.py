"""TF's Erfinv, Ndtri, NextAfter, CumulativeLogsumexp, HistogramFixedWidth,
LogMatrixDeterminant and Lu ops, with TF's gradients (math_grad.py, linalg_grad.py) and
builders: `tf.math.erfinv`, `ndtri`, `erfcinv`, `nextafter`, `cumulative_logsumexp`,
`tf.linalg.slogdet`, `logdet`, `lu` (`histogram_fixed_width` is math_composites').

Erfinv and Ndtri are SciPy's, in float64 on the host, returned in the input's dtype
(TF's float32 kernels use their own polynomials: the two agree to a few float32 ulps).
CumulativeLogsumexp accumulates log(exp(a) + exp(b)) in the input's dtype as TF's scan
does, -inf starting an exclusive scan.  LogMatrixDeterminant and Lu factor each matrix
with partial pivoting (LAPACK's getrf, as TF's Eigen PartialPivLU): a singular matrix
gives sign 0 and log|det| -inf, not an error.

Invariant: kernels return new arrays.  Lu has no gradient in TF, nor here (a gradient
through it raises LookupError).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import special as sp
from asyncflow.ops.math_helpers import to_host
from asyncflow.ops.math_ops import _binary_op, _unary_op
from asyncflow.registry import (
    FLOATING,
    INDEX,
    NotDifferentiable,
    TypeConstraint,
    named_outputs,
    register_op,
)

__all__ = [
    "cumulative_logsumexp",
    "erfcinv",
    "erfinv",
    "logdet",
    "lu",
    "ndtri",
    "nextafter",
    "slogdet",
]

_MATRIX_T = TypeConstraint(["float16", "float32", "float64", "complex64", "complex128"])
_LU_T = TypeConstraint(["float64", "float32", "float16", "complex64", "complex128"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _via_float64(fn):
    """fn of a float64 host copy, back in x's dtype on x's device."""

    def kernel_fn(xp, x):
        with np.errstate(all="ignore"):
            out = fn(np.asarray(to_host(xp, x), np.float64))
        return xp.asarray(out.astype(x.dtype))

    return kernel_fn


Erfinv = _unary_op("Erfinv", _via_float64(sp.erfinv), FLOATING)
Ndtri = _unary_op("Ndtri", _via_float64(sp.ndtri), FLOATING)
NextAfter = _binary_op(
    "NextAfter", lambda xp, x, y: xp.nextafter(x, y), TypeConstraint(["float64", "float32"])
)


@Erfinv.gradient
def _erfinv_grad(op, grad):
    # d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x)^2)
    c = _g.constant(np.sqrt(np.pi) / 2, grad.dtype)
    with ops.control_dependencies([grad]):
        return [grad * c * _g.apply("Exp", _g.apply("Square", op.outputs[0]))]


@Ndtri.gradient
def _ndtri_grad(op, grad):
    # d ndtri(x) = sqrt(2 pi) * exp(ndtri(x)^2 / 2)
    c = _g.constant(np.sqrt(2 * np.pi), grad.dtype)
    with ops.control_dependencies([grad]):
        half = _g.apply("Square", op.outputs[0]) / _g.constant(2.0, grad.dtype)
        return [grad * c * _g.apply("Exp", half)]


@NextAfter.gradient
def _nextafter_grad(op, grad):
    # As TF: 1 toward x1, 0 toward x2, each summed over its broadcast axes.
    x1, x2 = op.inputs
    s1, s2 = _g.shape(x1), _g.shape(x2)
    r1, r2 = ops.apply_op("BroadcastGradientArgs", [s1, s2]).outputs
    with ops.control_dependencies([grad]):
        ones = _g.apply("Fill", s1, _g.constant(1, x1.dtype))
        zeros = _g.apply("Fill", s2, _g.constant(0, x2.dtype))
        g1 = _g.apply("Sum", ones * grad, r1)
        g2 = _g.apply("Sum", zeros * grad, r2)
        return [_g.reshape(g1, s1), _g.reshape(g2, s2)]


# -- HistogramFixedWidth ------------------------------------------------------------------


def _histogram_shape(op):
    nbins = ops.constant_value(op.inputs[2])
    if nbins is None:
        return [tensor_shape.TensorShape([None])]
    if int(nbins) <= 0:
        raise ValueError(f"Requires nbins > 0: {int(nbins)}")
    return [tensor_shape.TensorShape([int(nbins)])]


HistogramFixedWidth = register_op(
    "HistogramFixedWidth",
    inputs=["values: T", "value_range: T", "nbins: int32"],
    outputs=["out: dtype"],
    attrs={
        "T": TypeConstraint(["int32", "int64", "float32", "float64"]),
        "dtype": TypeConstraint(["int32", "int64"]),
    },
    shape_fn=_histogram_shape,
)
NotDifferentiable("HistogramFixedWidth")


def _histogram(values, lo, hi, nbins: int, dtype) -> np.ndarray:
    # TF's bin: floor((v - lo) / (hi - lo) * nbins), clamped into [0, nbins).
    with np.errstate(all="ignore"):
        scaled = (values.astype(np.float64) - lo) / (hi - lo) * nbins
        idx = np.clip(np.floor(scaled), 0, nbins - 1).astype(np.int64)
    return np.bincount(idx.reshape(-1), minlength=nbins).astype(dtype)


@HistogramFixedWidth.kernel("CPU", host_memory=("value_range", "nbins"))
async def _histogram_fixed_width(ctx, values, value_range, nbins):
    rng = np.asarray(value_range)
    if rng.shape != (2,):
        raise _invalid(f"value_range should be a vector of 2 elements, got {list(rng.shape)}")
    nbins = int(np.asarray(nbins))
    if nbins <= 0:
        raise _invalid(f"nbins should be a positive number, but got '{nbins}'")
    lo, hi = rng.tolist()
    if not lo < hi:
        raise _invalid(
            "value_range should satisfy value_range[0] < value_range[1], "
            f"but got '[{rng[0]:g}, {rng[1]:g}]'"
        )
    values = np.asarray(values)
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise _invalid("Histogram values must not contain NaN")
    dt = ctx.attrs["dtype"].as_numpy_dtype
    return await ctx.device.compute(_histogram, values, lo, hi, nbins, dt)


# -- CumulativeLogsumexp ------------------------------------------------------------------


def _logsumexp_scan(x, axis, exclusive, reverse):
    x = np.moveaxis(x, axis, 0)
    if reverse:
        x = x[::-1]
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.logaddexp.accumulate(x, axis=0, dtype=x.dtype) if x.shape[0] else x.copy()
    if exclusive and x.shape[0]:
        out = np.concatenate([np.full_like(out[:1], -np.inf), out[:-1]], 0)
    if reverse:
        out = out[::-1]
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


CumulativeLogsumexp = register_op(
    "CumulativeLogsumexp",
    inputs=["x: T", "axis: Tidx"],
    outputs=["out: T"],
    attrs={"exclusive": False, "reverse": False, "T": FLOATING, "Tidx": INDEX},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@CumulativeLogsumexp.kernel("CPU", host_memory=("axis",))
async def _cumulative_logsumexp(ctx, x, axis):
    x = np.asarray(x)
    if np.ndim(axis) != 0:
        raise _invalid(
            f"ScanOp: axis must be a scalar, not [{','.join(map(str, np.shape(axis)))}]"
        )
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise _invalid(
            f"ScanOp: Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {axis}"
        )
    half = x.dtype in (np.float16, dtypes.bfloat16.as_numpy_dtype)
    work = x.astype(np.float32) if half else x  # (Eigen's half scan computes in float)
    out = await ctx.device.compute(
        _logsumexp_scan, work, axis % x.ndim, ctx.attrs["exclusive"], ctx.attrs["reverse"]
    )
    return out.astype(x.dtype) if half else out


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """`tf.math.cumulative_logsumexp`: log(cumsum(exp(x))) along `axis`, computed stably.

    Raises:
      InvalidArgumentError: at run time, for an axis out of range or not a scalar.
    """
    attrs = {"exclusive": bool(exclusive), "reverse": bool(reverse)}
    return ops.apply_op("CumulativeLogsumexp", [x, axis], attrs, name=name).outputs[0]


@CumulativeLogsumexp.gradient
def _cumulative_logsumexp_grad(op, grad):
    # TF's: the gradient split into its positive and negative parts so that each goes
    # through the scan in log space.
    x, axis = op.inputs
    out = op.outputs[0]
    exclusive, reverse = op._attr("exclusive"), op._attr("reverse")
    lowest = _g.constant(np.finfo(grad.dtype.as_numpy_dtype).min, grad.dtype)
    zero = _g.constant(0, grad.dtype)

    def part(mask_op, value):
        log = _g.apply("SelectV2", _g.apply(mask_op, grad, zero), _g.apply("Log", value), lowest)
        scan = cumulative_logsumexp(log - out, axis, exclusive=exclusive, reverse=not reverse)
        return _g.apply("Exp", scan + x)

    return [part("Greater", grad) - part("Less", _g.apply("Neg", grad)), None]


# -- LogMatrixDeterminant, Lu ------------------------------------------------------------


def _square_shape(op):
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {s.ndims}")
    if s.ndims is not None:
        rows, cols = s.dims[-2], s.dims[-1]
        if rows is not None and cols is not None and rows != cols:
            raise ValueError(f"Dimensions must be equal, but are {cols} and {rows}")
    return s


def _check_square(x, lu=False):
    if x.ndim < 2:  # (TF's Lu kernel words it without the input's index)
        raise _invalid(f"Input tensor {'' if lu else '0 '}must have rank >= 2, got {x.ndim}")
    if x.shape[-1] != x.shape[-2]:
        raise _invalid("Input matrix must be square.")


def _slogdet(x):
    n = x.shape[-1]
    batch = x.shape[:-2]
    if n == 0:
        return np.ones(batch, x.dtype), np.zeros(batch, x.dtype)
    sign, logabs = np.linalg.slogdet(x)
    return np.asarray(sign, x.dtype), np.asarray(logabs, x.dtype)


LogMatrixDeterminant = register_op(
    "LogMatrixDeterminant",
    inputs=["input: T"],
    outputs=["sign: T", "log_abs_determinant: T"],
    attrs={"T": _MATRIX_T},
    shape_fn=lambda op: [
        _square_shape(op)[:-2] if op.inputs[0].shape.ndims is not None
        else tensor_shape.unknown_shape()
    ] * 2,
)  # fmt: skip


@LogMatrixDeterminant.kernel("CPU")
async def _log_matrix_determinant(ctx, x):
    x = np.asarray(x)
    _check_square(x)
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    sign, logabs = await ctx.device.compute(_slogdet, work)
    return sign.astype(x.dtype), logabs.astype(x.dtype)


@LogMatrixDeterminant.gradient
def _log_matrix_determinant_grad(op, _, grad_b):
    # TF's: d log|det A| = tr(A^-1 dA), so the gradient is grad * A^-H.
    a = op.inputs[0]
    inv = ops.apply_op("MatrixInverse", [a], {"adjoint": True}).outputs[0]
    shape = _g.concat([_g.shape(grad_b), _g.constant([1, 1])], 0)
    return [_g.reshape(grad_b, shape) * inv]


def _lu(x, index_dtype):
    import scipy.linalg  # (imported here: at import it cost every program ~0.3 s)

    n = x.shape[-1]
    flat = x.reshape(-1, n, n)
    lu = np.empty_like(flat)
    perm = np.empty((flat.shape[0], n), index_dtype)
    for i, m in enumerate(flat):
        packed, piv = scipy.linalg.lu_factor(m, check_finite=False)
        lu[i] = packed
        p = np.arange(n)
        for k, j in enumerate(piv):  # (LAPACK's row swaps, as a permutation)
            p[k], p[j] = p[j], p[k]
        perm[i] = p
    return lu.reshape(x.shape), perm.reshape(x.shape[:-1])


Lu = register_op(
    "Lu",
    inputs=["input: T"],
    outputs=["lu: T", "p: output_idx_type"],
    attrs={"T": _LU_T, "output_idx_type": INDEX},
    shape_fn=lambda op: [
        _square_shape(op),
        _square_shape(op)[:-1] if op.inputs[0].shape.ndims is not None
        else tensor_shape.unknown_shape(),
    ],
)  # fmt: skip
# (TF registers no gradient for Lu: tf.gradients through it raises LookupError, here too)


@Lu.kernel("CPU")
async def _lu_kernel(ctx, x):
    x = np.asarray(x)
    _check_square(x, lu=True)
    if x.size and not np.isfinite(x).all():
        raise _invalid("Input is not invertible.")  # (LAPACK would not stop on nan)
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    index = ctx.attrs["output_idx_type"].as_numpy_dtype
    if x.size == 0:
        return x.copy(), np.zeros(x.shape[:-1], index)
    lu, perm = await ctx.device.compute(_lu, work, index)
    return lu.astype(x.dtype), perm


# -- builders ----------------------------------------------------------------------------


@_dispatch.add_dispatch_support
def erfinv(x, name=None):
    """`tf.math.erfinv`: the inverse of erf (TF's Erfinv op)."""
    return ops.apply_op("Erfinv", [x], name=name).outputs[0]


@_dispatch.add_dispatch_support
def ndtri(x, name=None):
    """`tf.math.ndtri`: the inverse of the standard normal CDF (TF's Ndtri op)."""
    return ops.apply_op("Ndtri", [x], name=name).outputs[0]


@_dispatch.add_dispatch_support
def erfcinv(x, name=None):
    """`tf.math.erfcinv`: the inverse of erfc, built as TF builds it, -ndtri(x / 2) / sqrt(2)."""
    with ops.name_scope(name, "erfcinv", [x]):
        x = ops.convert_to_tensor(x, name="start")
        return -ndtri(0.5 * x) * np.sqrt(0.5)


@_dispatch.add_dispatch_support
def nextafter(x1, x2, name=None):
    """`tf.math.nextafter`: the next representable value after x1 toward x2."""
    return ops.apply_op("NextAfter", [x1, x2], name=name).outputs[0]


def slogdet(input, name=None):  # noqa: A002 - TF's name
    """`tf.linalg.slogdet`: (sign, log|det|) of each square matrix (LogMatrixDeterminant).

    Raises:
      ValueError: at build time, for a shape of rank < 2 or non-square matrices.
    """
    out = ops.apply_op("LogMatrixDeterminant", [input], name=name).outputs
    return out[0], out[1]


def logdet(matrix, name=None):
    """`tf.linalg.logdet`: log det of Hermitian positive definite matrices, as TF builds it
    (2 * sum(log(real(diag(cholesky(matrix)))))).

    Raises:
      InvalidArgumentError: at run time, for a matrix that is not positive definite.
    """
    with ops.name_scope(name, "logdet", [matrix]):
        chol = ops.apply_op("Cholesky", [matrix]).outputs[0]
        diag = ops.apply_op("MatrixDiagPart", [chol]).outputs[0]
        if diag.dtype.is_complex:
            diag = ops.apply_op("Real", [diag], {"Tout": diag.dtype.real_dtype}).outputs[0]
        log = _g.apply("Log", diag)
        return 2.0 * _g.apply("Sum", log, _g.constant([-1]))


def lu(input, output_idx_type=dtypes.int32, name=None):  # noqa: A002 - TF's name
    """`tf.linalg.lu`: (lower_upper, perm) with input[perm] = L @ U, L unit lower (TF's Lu).

    Raises:
      InvalidArgumentError: at run time, for non-square or non-finite input.
    """
    return named_outputs(
        ops.apply_op(
            "Lu", [input], {"output_idx_type": dtypes.as_dtype(output_idx_type)}, name=name
        )
    )


# -- MatrixSolveLs (fast=False) -----------------------------------------------------------


def _solve_ls_shape(op):
    a = op.inputs[0].shape.with_rank_at_least(2)
    b = op.inputs[1].shape.with_rank_at_least(2)
    if a.ndims is None or b.ndims is None:
        return [tensor_shape.unknown_shape()]
    return [a[:-2].concatenate([a[-1], b[-1]])]


MatrixSolveLs = register_op(
    "MatrixSolveLs",
    inputs=["matrix: T", "rhs: T", "l2_regularizer: float64"],
    outputs=["output: T"],
    attrs={"T": _MATRIX_T, "fast": True},
    shape_fn=_solve_ls_shape,
)


def _lstsq_min_norm(a, b):
    out = np.empty(a.shape[:-2] + (a.shape[-1], b.shape[-1]), np.result_type(a, b))
    for idx in np.ndindex(a.shape[:-2]):
        out[idx] = np.linalg.lstsq(a[idx], b[idx], rcond=None)[0]
    return out


@MatrixSolveLs.kernel("CPU", host_memory=("l2_regularizer",))
async def _matrix_solve_ls(ctx, a, b, l2):
    # (asyncflow runs only fast=False here: the minimum-norm least-squares solution, as
    # TF's complete orthogonal decomposition gives, for rank-deficient matrices too.)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape[:-2] != b.shape[:-2] or a.shape[-2] != b.shape[-2]:
        raise _invalid(
            f"Incompatible shapes for matrix and rhs: {list(a.shape)} vs {list(b.shape)}"
        )
    if ctx.attrs["fast"]:
        # TF's fast path: the normal equations, regularized by l2_regularizer.
        return (await ctx.device.compute(_normal_equations, a, b, float(l2))).astype(a.dtype)
    return (await ctx.device.compute(_lstsq_min_norm, a, b)).astype(a.dtype)


def _normal_equations(a, b, l2):
    ah = np.conj(np.swapaxes(a, -1, -2))
    m, n = a.shape[-2:]
    if m >= n:
        gram = ah @ a + l2 * np.eye(n, dtype=a.dtype)
        return np.linalg.solve(gram, ah @ b)
    gram = a @ ah + l2 * np.eye(m, dtype=a.dtype)
    return ah @ np.linalg.solve(gram, b)


@MatrixSolveLs.gradient
def _matrix_solve_ls_grad(op, grad):
    raise NotImplementedError("Gradient not defined for fast=False")
