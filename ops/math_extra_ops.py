"""Math ops TF's Python API writes that asyncflow had as composites or not at all:
BesselI0/BesselI1 (tf.math.bessel_i0/i1), ApproximateEqual, ClipByValue,
AccumulateNV2, DataFormatDimMap/DataFormatVecPermute (layout helpers TF's grappler
and Keras write), Eig (tf.linalg.eig) and CholeskyGrad.

Gradients are those TF registers: BesselI0' = I1, BesselI1' = I0 - I1 / x (TF takes
I0(0) - 0 = 1 at x = 0), ClipByValue's passes the gradient to whichever of t, min, max
gave the value, AccumulateNV2's is AddN's, Eig's is the adjoint of A = V diag(e) V^-1
for unit-norm eigenvectors.  ApproximateEqual is not differentiable.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import special as sp
from asyncflow.ops.math_ops import _unary_op
from asyncflow.ops.math_special_ops import _special  # (host float64 copies, any device)
from asyncflow.registry import (
    NUMERIC,
    REQUIRED,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)

__all__: list[str] = []

_BESSEL_T = TypeConstraint(["bfloat16", "float16", "float32", "float64"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


BesselI0 = _unary_op("BesselI0", _special(sp.i0), _BESSEL_T)
BesselI1 = _unary_op("BesselI1", _special(sp.i1), _BESSEL_T)


@BesselI0.gradient
def _bessel_i0_grad(op, grad):
    return _g.mul(grad, _g.apply("BesselI1", op.inputs[0]))


@BesselI1.gradient
def _bessel_i1_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    zero = _g.apply("Equal", x, _g.zeros_like(x))
    safe_x = _g.apply("Select", zero, _g.ones_like(x), x)
    dy = _g.apply("Sub", _g.apply("BesselI0", x), _g.apply("RealDiv", y, safe_x))
    return _g.mul(grad, dy)


# -- ApproximateEqual ------------------------------------------------------------------


def _same_shape(op):
    x, y = op.inputs[0].shape, op.inputs[1].shape
    if x.ndims is not None and y.ndims is not None and x.ndims == y.ndims:
        for i, (a, b) in enumerate(zip(x.as_list(), y.as_list())):
            if a is not None and b is not None and a != b:
                raise ValueError(
                    f"Dimension {i} in both shapes must be equal, but are {a} and {b}. "
                    f"Shapes are {_dims(x)} and {_dims(y)}."
                )
    return [x.merge_with(y)]


def _dims(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


ApproximateEqual = register_op(
    "ApproximateEqual",
    inputs=["x: T", "y: T"],
    outputs=["z: bool"],
    attrs={"T": NUMERIC, "tolerance": 1e-05},
    shape_fn=_same_shape,
)


@ApproximateEqual.kernel()
async def _approximate_equal(ctx, x, y):
    xp = ctx.xp
    if x.shape != y.shape:
        # (TF's message names y's shape first, as "x shape")
        raise _invalid(
            f"x and y must be of the same shape. x shape: {list(y.shape)}. "
            f"y shape: {list(x.shape)}"
        )
    return xp.abs(x - y) < ctx.attrs["tolerance"]


NotDifferentiable("ApproximateEqual")


# -- ClipByValue -----------------------------------------------------------------------


ClipByValue = register_op(
    "ClipByValue",
    inputs=["t: T", "clip_value_min: T", "clip_value_max: T"],
    outputs=["output: T"],
    attrs={"T": NUMERIC},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@ClipByValue.kernel()
async def _clip_by_value(ctx, t, lo, hi):
    xp = ctx.xp
    if any(v.ndim != 0 and v.shape != t.shape for v in (lo, hi)):
        raise _invalid(
            "clip_value_min and clip_value_max must be either of the same shape as input, "
            f"or a scalar. input shape: {list(t.shape)}clip_value_min shape: "
            f"{list(lo.shape)}clip_value_max shape: {list(hi.shape)}"
        )
    return xp.minimum(xp.maximum(t, lo), hi).astype(t.dtype)


@ClipByValue.gradient
def _clip_by_value_grad(op, grad):
    t, lo, hi = op.inputs
    zeros = _g.zeros_like(grad)
    below = _g.apply("Less", t, lo)
    above = _g.apply("Greater", t, hi)
    outside = _g.apply("LogicalOr", below, above)
    grad_t = _g.apply("SelectV2", outside, zeros, grad)
    grad_lo = _g.apply("SelectV2", below, grad, zeros)
    grad_hi = _g.apply("SelectV2", above, grad, zeros)
    _, grad_lo = _g.broadcast_reduce(t, lo, grad_t, grad_lo)
    _, grad_hi = _g.broadcast_reduce(t, hi, grad_t, grad_hi)
    return [grad_t, grad_lo, grad_hi]


# -- AccumulateNV2 ---------------------------------------------------------------------


AccumulateNV2 = register_op(
    "AccumulateNV2",
    inputs=["inputs: N * T"],
    outputs=["sum: T"],
    attrs={"N": REQUIRED, "T": NUMERIC, "shape": REQUIRED},
    shape_fn=lambda op: [
        tensor_shape.TensorShape(op._attrs["shape"]).merge_with(op.inputs[0].shape)
    ],
)


@AccumulateNV2.kernel()
async def _accumulate_n(ctx, *inputs):
    out = inputs[0].copy()
    for x in inputs[1:]:
        out += x
    return out


@AccumulateNV2.gradient
def _accumulate_n_grad(op, grad):
    return [grad] * len(op.inputs)


# -- DataFormatDimMap / DataFormatVecPermute -------------------------------------------


_FORMAT_T = TypeConstraint(["int32", "int64"], default="int32")


def _formats(ctx, op_type):
    src = ctx.attrs["src_format"]
    dst = ctx.attrs["dst_format"]
    src = src.decode() if isinstance(src, bytes) else src
    dst = dst.decode() if isinstance(dst, bytes) else dst
    if len(src) not in (4, 5) or sorted(src) != sorted(dst):
        raise _invalid(
            f"{op_type}: destination and source format must be a permutation of each "
            f"other, of size 4 or 5: src_format={src}, dst_format={dst}"
        )
    return src, dst


DataFormatDimMap = register_op(
    "DataFormatDimMap",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": _FORMAT_T, "src_format": "NHWC", "dst_format": "NCHW"},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@DataFormatDimMap.kernel("CPU")
async def _data_format_dim_map(ctx, x):
    src, dst = _formats(ctx, "DataFormatDimMap")
    x = np.asarray(x)
    table = np.array([dst.index(c) for c in src], x.dtype)
    return table[np.mod(x, len(src))]


DataFormatVecPermute = register_op(
    "DataFormatVecPermute",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": _FORMAT_T, "src_format": "NHWC", "dst_format": "NCHW"},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@DataFormatVecPermute.kernel("CPU")
async def _data_format_vec_permute(ctx, x):
    src, dst = _formats(ctx, "DataFormatVecPermute")
    x = np.asarray(x)
    n = len(src)
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[1] != 2):
        raise _invalid(f"input must be a vector or 2D tensor, but got shape {list(x.shape)}")
    if x.shape[0] == n:
        order = src, dst
    elif x.shape[0] == n - 2:  # (the spatial dims only)
        order = [c for c in src if c not in "NC"], [c for c in dst if c not in "NC"]
    else:
        raise _invalid(
            f"First dimension of 1D input must be of size {n} or {n - 2}, but got shape "
            f"{list(x.shape)}"
        )
    return x[[order[0].index(c) for c in order[1]]]


NotDifferentiable("DataFormatDimMap")
NotDifferentiable("DataFormatVecPermute")


# -- Eig -------------------------------------------------------------------------------


def _eig_shape(op):
    x = op.inputs[0].shape.with_rank_at_least(2)
    if x.ndims is None:
        return [tensor_shape.unknown_shape()] * 2
    n = x[-1].merge_with(x[-2])
    batch = x[:-2]
    v = batch.concatenate([n, n]) if op._attrs["compute_v"] else tensor_shape.TensorShape([0])
    return [batch.concatenate([n]), v]


Eig = register_op(
    "Eig",
    inputs=["input: T"],
    outputs=["e: Tout", "v: Tout"],
    attrs={
        "compute_v": True,
        "T": TypeConstraint(["float32", "float64", "complex64", "complex128"]),
        "Tout": TypeConstraint(["complex64", "complex128"]),
    },
    shape_fn=_eig_shape,
)


@Eig.kernel("CPU")
async def _eig(ctx, x):
    x = np.asarray(x)
    if x.shape[-1] != x.shape[-2]:
        raise _invalid(f"Input matrix must be square, got shape {list(x.shape)}")
    out = ctx.attrs["Tout"].as_numpy_dtype
    if x.size == 0:
        e = np.zeros(x.shape[:-1], out)
        v = np.zeros(x.shape, out)
    else:
        e, v = await ctx.compute(np.linalg.eig, x)
    if not ctx.attrs["compute_v"]:
        v = np.zeros([0], out)
    return e.astype(out), v.astype(out)


# -- CholeskyGrad ----------------------------------------------------------------------


CholeskyGrad = register_op(
    "CholeskyGrad",
    inputs=["l: T", "grad: T"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint(["float16", "float32", "float64"])},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(2).merge_with(op.inputs[1].shape)],
)


def _cholesky_grad_value(chol, grad):
    # The symmetric gradient of A = L L^T from the gradient of L (lower triangles of both
    # read): 1/2 L^-T Phi(L^T G) L^-1, symmetrized, Phi keeping the lower triangle with
    # its diagonal halved.
    chol = np.tril(chol)
    g = np.tril(grad)
    middle = np.tril(np.swapaxes(chol, -1, -2) @ g)
    idx = np.arange(chol.shape[-1])
    middle[..., idx, idx] *= 0.5
    l_inv = np.linalg.inv(chol)
    out = np.swapaxes(l_inv, -1, -2) @ middle @ l_inv
    return 0.5 * (out + np.swapaxes(out, -1, -2))


@CholeskyGrad.kernel("CPU")
async def _cholesky_grad(ctx, chol, grad):
    chol, grad = np.asarray(chol), np.asarray(grad)
    if chol.ndim < 2 or chol.shape[-1] != chol.shape[-2] or chol.shape != grad.shape:
        raise _invalid(f"Input matrix must be square, got shape {list(chol.shape)}")
    value = await ctx.compute(
        _cholesky_grad_value, chol.astype(np.float64), grad.astype(np.float64)
    )
    return value.astype(chol.dtype)


# -- MatrixExponential (removed from GraphDefs at version 27; ops/legacy_ops.py) ---------


MatrixExponential = register_op(
    "MatrixExponential",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint(["float64", "float32", "float16", "complex64", "complex128"])},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(2)],
)


@MatrixExponential.kernel("CPU")
async def _matrix_exponential(ctx, x):
    from scipy.linalg import expm  # (scipy: imported when the op first runs)

    x = np.asarray(x)
    if x.shape[-1] != x.shape[-2]:
        raise _invalid(f"Input matrix must be square, got shape {list(x.shape)}")
    return expm(x).astype(x.dtype) if x.size else x.copy()


# -- BatchNormWithGlobalNormalization(Grad) (removed at version 9; ops/legacy_ops.py) ---


def _bn_shape(op):
    t = op.inputs[0].shape.with_rank(4)
    return [t]


BatchNormWithGlobalNormalization = register_op(
    "BatchNormWithGlobalNormalization",
    inputs=["t: T", "m: T", "v: T", "beta: T", "gamma: T"],
    outputs=["result: T"],
    attrs={"T": NUMERIC, "variance_epsilon": REQUIRED, "scale_after_normalization": REQUIRED},
    shape_fn=_bn_shape,
)


@BatchNormWithGlobalNormalization.kernel()
async def _batch_norm_global(ctx, t, m, v, beta, gamma):
    xp = ctx.xp
    scale = 1 / xp.sqrt(v + ctx.attrs["variance_epsilon"])
    if ctx.attrs["scale_after_normalization"]:
        scale = scale * gamma
    return ((t - m) * scale + beta).astype(t.dtype)


BatchNormWithGlobalNormalizationGrad = register_op(
    "BatchNormWithGlobalNormalizationGrad",
    inputs=["t: T", "m: T", "v: T", "gamma: T", "backprop: T"],
    outputs=["dx: T", "dm: T", "dv: T", "db: T", "dg: T"],
    attrs={"T": NUMERIC, "variance_epsilon": REQUIRED, "scale_after_normalization": REQUIRED},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank(4)] + [op.inputs[1].shape] * 4,
)


@BatchNormWithGlobalNormalizationGrad.kernel()
async def _batch_norm_global_grad(ctx, t, m, v, gamma, backprop):
    xp = ctx.xp
    axes = (0, 1, 2)
    rsqrt = 1 / xp.sqrt(v + ctx.attrs["variance_epsilon"])
    scaled = ctx.attrs["scale_after_normalization"]
    dx = backprop * (rsqrt * gamma if scaled else rsqrt)
    centered = t - m
    db = backprop.sum(axis=axes)
    dm = -dx.sum(axis=axes)
    dv_scale = -0.5 * rsqrt**3 * (gamma if scaled else 1)
    dv = (backprop * centered).sum(axis=axes) * dv_scale
    dg = (backprop * centered * rsqrt).sum(axis=axes) if scaled else xp.zeros_like(gamma)
    return tuple(a.astype(t.dtype) for a in (dx, dm, dv, db, dg))


@BatchNormWithGlobalNormalization.gradient
def _batch_norm_global_gradient(op, grad):
    t, m, v, beta, gamma = op.inputs
    attrs = {k: op._attrs[k] for k in ("variance_epsilon", "scale_after_normalization")}
    grads = ops.apply_op(
        "BatchNormWithGlobalNormalizationGrad", [t, m, v, gamma, grad], attrs
    ).outputs
    dx, dm, dv, db, dg = grads
    return [dx, dm, dv, db, dg]


# -- BandedTriangularSolve -------------------------------------------------------------
# `matrix` holds K bands of an M x M triangular matrix, [..., K, M], LEFT_RIGHT aligned:
# lower, row k is the k-th subdiagonal (row 0 the diagonal), padded on the left; upper,
# row K-1-k is the k-th superdiagonal (row K-1 the diagonal), padded on the right.


def _banded_shape(op):
    m = op.inputs[0].shape.with_rank_at_least(2)
    rhs = op.inputs[1].shape.with_rank_at_least(2)
    if m.ndims is None or rhs.ndims is None:
        return [tensor_shape.unknown_shape()]
    m_rows = m[-1].merge_with(rhs[-2])
    batch = m[:-2] if m.ndims >= rhs.ndims else rhs[:-2]
    return [batch.concatenate([m_rows, rhs[-1]])]


BandedTriangularSolve = register_op(
    "BandedTriangularSolve",
    inputs=["matrix: T", "rhs: T"],
    outputs=["output: T"],
    attrs={
        "lower": True,
        "adjoint": False,
        "T": TypeConstraint(["float64", "float32", "float16", "complex64", "complex128"]),
    },
    shape_fn=_banded_shape,
)


def _dense_from_bands(bands, lower):
    k_rows, m = bands.shape[-2:]
    dense = np.zeros(bands.shape[:-2] + (m, m), bands.dtype)
    cols = np.arange(m)
    for r in range(k_rows):
        k = r if lower else k_rows - 1 - r
        j = cols[k:] if lower else cols[: m - k]
        if lower:
            dense[..., j, j - k] = bands[..., r, j]
        else:
            dense[..., j, j + k] = bands[..., r, j]
    return dense


@BandedTriangularSolve.kernel("CPU")
async def _banded_triangular_solve(ctx, bands, rhs):
    bands, rhs = np.asarray(bands), np.asarray(rhs)
    if bands.shape[-2] > bands.shape[-1] or bands.shape[-1] != rhs.shape[-2]:
        raise _invalid(
            f"Input matrix and rhs are incompatible: {list(bands.shape)} vs {list(rhs.shape)}"
        )
    dense = _dense_from_bands(bands, ctx.attrs["lower"])
    if ctx.attrs["adjoint"]:
        dense = np.conj(np.swapaxes(dense, -1, -2))
    diag = np.diagonal(dense, axis1=-2, axis2=-1)
    if (diag == 0).any():
        raise _invalid("Input matrix is not invertible.")
    return np.linalg.solve(dense, rhs).astype(rhs.dtype)


@BandedTriangularSolve.gradient
def _banded_triangular_solve_grad(op, grad):
    bands, x = op.inputs[0], op.outputs[0]
    lower, adjoint = op._attrs["lower"], op._attrs["adjoint"]
    k_rows, m = bands.shape.as_list()[-2:]
    if k_rows is None or m is None:
        raise ValueError("BandedTriangularSolve's gradient needs the band sizes known")
    k = [-(k_rows - 1), 0] if lower else [0, k_rows - 1]
    k_t = _g.constant(k, "int32")
    zero = _g.constant(0, bands.dtype)
    m_t = _g.constant(m, "int32")
    dense = _g.apply("MatrixDiagV3", bands, k_t, m_t, m_t, zero, align="LEFT_RIGHT")
    grad_rhs = _g.apply("MatrixTriangularSolve", dense, grad, lower=lower, adjoint=not adjoint)
    if adjoint:
        outer = _g.apply("BatchMatMulV2", x, grad_rhs, adj_y=True)
    else:
        outer = _g.apply("BatchMatMulV2", grad_rhs, x, adj_y=True)
    grad_dense = _g.neg(outer)
    grad_bands = _g.apply("MatrixDiagPartV3", grad_dense, k_t, zero, align="LEFT_RIGHT")
    return [grad_bands, grad_rhs]


@Eig.gradient
def _eig_grad(op, grad_e, grad_v):
    # A = V diag(e) V^-1 with unit-norm columns of V: grad_A = V^-H M V^H, where M holds
    # grad_e on its diagonal and, off it, conj(1 / (e_j - e_i)) times V^H grad_v less the
    # part that only rescales the (normalized) eigenvectors.
    e, v = op.outputs
    x = op.inputs[0]
    vh = _g.apply("Conj", _g.transpose(v, _last_two_swapped(v)))
    diff = _g.apply("Sub", _g.apply("ExpandDims", e, -2), _g.apply("ExpandDims", e, -1))
    f = _g.apply(
        "MatrixSetDiagV3",
        _g.apply("Reciprocal", diff),
        _g.zeros_like(e),
        _g.constant(0, "int32"),
        align="RIGHT_LEFT",
    )
    f = _g.apply("Conj", f)
    if grad_v is None:
        mid = _g.apply("MatrixDiag", grad_e) if grad_e is not None else None
    else:
        vgv = _g.apply("BatchMatMulV2", vh, grad_v)
        real_diag = _g.apply("Real", _g.apply("MatrixDiagPart", vgv), Tout=e.dtype.real_dtype)
        rescale = _g.apply("MatrixDiag", _g.cast(real_diag, e.dtype))
        vhv = _g.apply("BatchMatMulV2", vh, v)
        mid = _g.mul(f, _g.apply("Sub", vgv, _g.apply("BatchMatMulV2", vhv, rescale)))
        if grad_e is not None:
            mid = _g.apply("AddV2", mid, _g.apply("MatrixDiag", grad_e))
    grad_a = _g.apply("MatrixSolve", vh, _g.apply("BatchMatMulV2", mid, vh))
    if not x.dtype.is_complex:
        grad_a = _g.apply("Real", grad_a, Tout=x.dtype)
    return grad_a


def _last_two_swapped(t):
    rank = t.shape.ndims
    return list(range(rank - 2)) + [rank - 1, rank - 2]
