"""Batched matrix ops over the innermost two dimensions (TF's linalg_ops /
array_ops matrix family): MatrixBandPart, MatrixDiag, MatrixDiagPart, MatrixSetDiag,
Diag, DiagPart, MatrixDeterminant, MatrixInverse, Cholesky, MatrixSolve,
MatrixTriangularSolve, MatrixSquareRoot, SelfAdjointEigV2, Qr, Svd, Cross; with TF's
gradients (linalg_grad.py) and TF1 builders, plus the compositions TF builds the same
way (cholesky_solve, matrix_solve_ls, self_adjoint_eigvals).

Kernels are written against the device's array module (`xp.linalg`); MatrixSquareRoot
uses SciPy's `sqrtm` on the host (a device input comes over by an explicit copy).
A singular matrix raises InvalidArgumentError as TF's CPU kernels do.  Svd's gradient is
defined for `s` (TF's formula with u and v recomputed); through `u` and `v` it raises
NotImplementedError here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_more_ops, math_ops, matmul_ops
from asyncflow.ops.math_helpers import _shape_str, to_host
from asyncflow.registry import (
    ANY,
    INDEX,
    NotDifferentiable,
    TypeConstraint,
    named_outputs,
    register_op,
)

__all__ = [
    "matrix_band_part",
    "matrix_diag",
    "matrix_diag_part",
    "matrix_set_diag",
    "diag",
    "diag_part",
    "matrix_determinant",
    "matrix_inverse",
    "cholesky",
    "cholesky_solve",
    "matrix_solve",
    "matrix_triangular_solve",
    "matrix_solve_ls",
    "matrix_square_root",
    "self_adjoint_eig",
    "self_adjoint_eigvals",
    "qr",
    "svd",
    "cross",
]

_LINALG = TypeConstraint(["float32", "float64", "complex64", "complex128"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _adj(x):
    """The conjugate transpose of the innermost matrices (a graph tensor)."""
    perm = _inner_perm(x)
    out = array_ops.transpose(x, perm)
    return math_ops.conj(out) if x.dtype.is_complex else out


def _inner_perm(x):
    rank = x.shape.ndims
    if rank is None:
        raise ValueError("matrix gradients need a tensor of known rank")
    return list(range(rank - 2)) + [rank - 1, rank - 2]


def _mm(a, b, adjoint_a=False, adjoint_b=False):
    return matmul_ops.matmul(a, b, adjoint_a=adjoint_a, adjoint_b=adjoint_b)


def _square(x, what="input"):
    # TF1's LinearAlgebraOp checks (a solver's matrix is its "First input (lhs)").
    if x.ndim < 2:
        raise _invalid(f"Input tensor 0 must have rank >= 2, got {x.ndim}")
    if x.shape[-1] != x.shape[-2]:
        raise _invalid(
            "First input (lhs) must be a square matrix."
            if what == "matrix"
            else "Input matrix must be square."
        )


def _square_shape(op):
    s = op.inputs[0].shape.with_rank_at_least(2)
    if s.ndims is not None:
        a, b = s.dims[-2].value, s.dims[-1].value
        if a is not None and b is not None and a != b:
            raise ValueError(f"Dimensions must be equal, but are {a} and {b}")
    return [s]


# -- band part, diagonals -----------------------------------------------------------------

MatrixBandPart = register_op(
    "MatrixBandPart",
    inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
    outputs=["band: T"],
    attrs={"T": ANY, "Tindex": INDEX},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(2)],
)


@MatrixBandPart.kernel(host_memory=("num_lower", "num_upper"))
async def _band_part(ctx, x, lower, upper):
    xp = ctx.xp
    x = xp.asarray(x)
    if x.ndim < 2:
        raise _invalid(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    m, n = x.shape[-2:]
    lo, hi = int(np.asarray(to_host(xp, lower))), int(np.asarray(to_host(xp, upper)))
    if lo > m:
        raise _invalid(f"num_lower must be negative or less or equal to number of rows ({m}) "
                       f"got: {lo}")  # fmt: skip
    if hi > n:
        raise _invalid(f"num_upper must be negative or less or equal to number of columns "
                       f"({n}) got: {hi}")  # fmt: skip
    i = xp.arange(m).reshape(-1, 1)
    j = xp.arange(n).reshape(1, -1)
    keep = xp.ones((m, n), bool)
    if lo >= 0:
        keep &= (i - j) <= lo
    if hi >= 0:
        keep &= (j - i) <= hi
    return xp.where(keep, x, xp.zeros((), x.dtype))


@MatrixBandPart.gradient
def _band_part_grad(op, grad):
    return [ops.apply_op("MatrixBandPart", [grad, op.inputs[1], op.inputs[2]]).outputs[0],
            None, None]  # fmt: skip


MatrixDiag = register_op(
    "MatrixDiag",
    inputs=["diagonal: T"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(1).concatenate(
        op.inputs[0].shape.with_rank_at_least(1)[-1:])],
)  # fmt: skip


@MatrixDiag.kernel()
async def _matrix_diag(ctx, d):
    xp = ctx.xp
    d = xp.asarray(d)
    if d.ndim < 1:
        raise _invalid("input must be at least 1-dim")
    n = d.shape[-1]
    out = xp.zeros((*d.shape, n), d.dtype)
    idx = xp.arange(n)
    out[..., idx, idx] = d
    return out


def _diag_part_shape(op):
    s = op.inputs[0].shape.with_rank_at_least(2)
    if s.ndims is None:
        return [tensor_shape.unknown_shape()]
    a, b = s.dims[-2].value, s.dims[-1].value
    k = None if a is None or b is None else min(a, b)
    return [s[:-2].concatenate([k])]


MatrixDiagPart = register_op(
    "MatrixDiagPart",
    inputs=["input: T"],
    outputs=["diagonal: T"],
    attrs={"T": ANY},
    shape_fn=_diag_part_shape,
)


@MatrixDiagPart.kernel()
async def _matrix_diag_part(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    if x.ndim < 2:
        raise _invalid("input must be at least 2-dim")
    k = min(x.shape[-2:])
    idx = xp.arange(k)
    return xp.ascontiguousarray(x[..., idx, idx])


MatrixSetDiag = register_op(
    "MatrixSetDiag",
    inputs=["input: T", "diagonal: T"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(2)],
)


@MatrixSetDiag.kernel()
async def _matrix_set_diag(ctx, x, d):
    xp = ctx.xp
    x, d = xp.asarray(x), xp.asarray(d)
    k = min(x.shape[-2:])
    if d.shape != (*x.shape[:-2], k):
        raise _invalid(f"diagonal must have shape {[*x.shape[:-2], k]}, got {list(d.shape)}")
    out = x.copy()
    idx = xp.arange(k)
    out[..., idx, idx] = d
    return out


@MatrixDiag.gradient
def _matrix_diag_grad(op, grad):
    return [ops.apply_op("MatrixDiagPart", [grad]).outputs[0]]


@MatrixDiagPart.gradient
def _matrix_diag_part_grad(op, grad):
    zeros = array_ops.zeros_like(op.inputs[0])
    return [ops.apply_op("MatrixSetDiag", [zeros, grad]).outputs[0]]


@MatrixSetDiag.gradient
def _matrix_set_diag_grad(op, grad):
    diag_grad = ops.apply_op("MatrixDiagPart", [grad]).outputs[0]
    input_grad = ops.apply_op("MatrixSetDiag", [grad, array_ops.zeros_like(diag_grad)])
    return [input_grad.outputs[0], diag_grad]


# -- MatrixDiagV3 family: diagonals k[0]..k[1], aligned and padded ----------------------------
#
# A band of diagonals d = k1 .. k0 (row k1 - d of the packed form) of an M x N matrix,
# each at most L = min(M + min(k1, 0), N - max(k0, 0)) long.  Diagonal d's n-th packed
# entry is the matrix's [n + max(-d, 0) - off, n + max(d, 0) - off], where a shorter
# diagonal is aligned right (off = L - its length) when `align` says so for its side
# (first word: superdiagonals d >= 0, second: subdiagonals d <= 0), else left (off 0).

_ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")


def _diag_band(xp, x, k):
    """(rows, cols, lower k, upper k, diagonal length) of matrix batch `x` for the
    diagonals `k` names, with TF's MatrixDiagPartV3/MatrixSetDiagV3 checks."""
    if x.ndim < 2:
        raise _invalid(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    m, n = x.shape[-2:]
    k0, k1 = _k_pair(xp, k)
    for name, v in (("lower", k0), ("upper", k1)):
        if not (-m < v < n or v == 0):
            raise _invalid(f"{name}_diag_index is out of bound: {v}. It must be between "
                           f"{-m} and {n}")  # fmt: skip
    return m, n, k0, k1, min(m + min(k1, 0), n - max(k0, 0))


def _k_pair(xp, k) -> tuple[int, int]:
    k = np.asarray(to_host(xp, k)).reshape(-1)
    if k.size not in (1, 2):
        raise _invalid(f"diag_index must be a scalar or vector with 1 or 2 elements, got {k.size}")
    k0, k1 = int(k[0]), int(k[-1])
    if k0 > k1:
        raise _invalid("lower_diag_index must not be larger than upper_diag_index: "
                       f"{k0} > {k1}")  # fmt: skip
    return k0, k1


def _band_index(m: int, n: int, k0: int, k1: int, length: int, align: str):
    """(packed row, packed position, matrix row, matrix column) of the band's entries."""
    sup_right, sub_right = (w == "RIGHT" for w in align.split("_"))
    d = np.arange(k1, k0 - 1, -1).reshape(-1, 1)
    pos = np.arange(length).reshape(1, -1)
    own = np.minimum(m + np.minimum(d, 0), n - np.maximum(d, 0))
    right = ((d >= 0) & sup_right) | ((d <= 0) & sub_right)
    off = np.where(right, length - own, 0)
    y = pos + np.maximum(-d, 0) - off
    x = pos + np.maximum(d, 0) - off
    valid = (y >= 0) & (y < m) & (x >= 0) & (x < n)
    rows = np.broadcast_to(k1 - d, valid.shape)
    cols = np.broadcast_to(pos, valid.shape)
    return rows[valid], cols[valid], y[valid], x[valid]


def _align_attr(ctx) -> str:
    a = ctx.attrs["align"]
    return a.decode() if isinstance(a, bytes) else a


def _static_k(t):
    v = ops.constant_value(t)
    if v is None:
        return None
    v = np.asarray(v).reshape(-1)
    return int(v[0]), int(v[-1])


def _diag_part_v3_shape(op):
    s = op.inputs[0].shape
    k = _static_k(op.inputs[1])
    if s.ndims is None or k is None:
        return [tensor_shape.unknown_shape()]
    m, n = s.dims[-2].value, s.dims[-1].value
    k0, k1 = k
    if k0 > k1:
        raise ValueError(f"lower_diag_index must not be larger than upper_diag_index: "
                         f"{k0} > {k1}")  # fmt: skip
    for v in (k0, k1):
        if m is not None and n is not None and not (-m < v < n or v == 0):
            raise ValueError(f"diag_index is out of bound: {v}. It must be between {-m} and {n}")
    length = None if m is None or n is None else min(m + min(k1, 0), n - max(k0, 0))
    mid = [k1 - k0 + 1] if k0 != k1 else []
    return [s[:-2].concatenate([*mid, length])]


MatrixDiagPartV3 = register_op(
    "MatrixDiagPartV3",
    inputs=["input: T", "k: int32", "padding_value: T"],
    outputs=["diagonal: T"],
    attrs={"T": ANY, "align": "RIGHT_LEFT"},
    shape_fn=_diag_part_v3_shape,
)


@MatrixDiagPartV3.kernel()
async def _matrix_diag_part_v3(ctx, x, k, pad):
    xp = ctx.xp
    x = xp.asarray(x)
    m, n, k0, k1, length = _diag_band(xp, x, k)
    rows, cols, y, xs = (
        xp.asarray(a) for a in _band_index(m, n, k0, k1, length, _align_attr(ctx))
    )
    out = xp.full((*x.shape[:-2], k1 - k0 + 1, length), xp.asarray(pad).reshape(()), x.dtype)
    out[..., rows, cols] = x[..., y, xs]
    return out[..., 0, :] if k0 == k1 else out


def _diag_v3_shape(op):
    d = op.inputs[0].shape
    k = _static_k(op.inputs[1])
    rows, cols = (ops.constant_value(t) for t in op.inputs[2:4])
    if d.ndims is None or k is None or rows is None or cols is None:
        return [tensor_shape.unknown_shape()]
    k0, k1 = k
    lead = d[:-1] if k0 == k1 else d[:-2]
    length = d.dims[-1].value
    rows, cols = int(rows), int(cols)
    if length is None:
        return [lead.concatenate([None, None])]
    min_rows, min_cols = length - min(k1, 0), length + max(k0, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows != min_rows and cols != min_cols:
        raise ValueError(f"The number of rows or columns is not consistent with the specified "
                         f"d_lower, d_upper, and diagonal: num_rows {rows}, "
                         f"num_cols {cols}")  # fmt: skip
    return [lead.concatenate([rows, cols])]


MatrixDiagV3 = register_op(
    "MatrixDiagV3",
    inputs=["diagonal: T", "k: int32", "num_rows: int32", "num_cols: int32", "padding_value: T"],
    outputs=["output: T"],
    attrs={"T": ANY, "align": "RIGHT_LEFT"},
    shape_fn=_diag_v3_shape,
)


def _packed_diagonals(d, k0, k1):
    """The diagonals as [..., num_diags, L] (a single one gains its axis)."""
    if k0 == k1:
        if d.ndim < 1:
            raise _invalid("diagonal must be at least 1-dim")
        return d[..., None, :]
    if d.ndim < 2 or d.shape[-2] != k1 - k0 + 1:
        raise _invalid(f"The number of diagonals provided in the input does not match "
                       f"the lower_diag_index and upper_diag_index range. Expected "
                       f"{k1 - k0 + 1}, got shape {list(d.shape)}")  # fmt: skip
    return d


@MatrixDiagV3.kernel()
async def _matrix_diag_v3(ctx, d, k, num_rows, num_cols, pad):
    xp = ctx.xp
    k0, k1 = _k_pair(xp, k)
    d = _packed_diagonals(xp.asarray(d), k0, k1)
    length = d.shape[-1]
    rows, cols = (int(np.asarray(to_host(xp, v))) for v in (num_rows, num_cols))
    min_rows, min_cols = length - min(k1, 0), length + max(k0, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows != min_rows and cols != min_cols:
        raise _invalid(f"The number of rows or columns is not consistent with the specified "
                       f"d_lower, d_upper, and diagonal: num_rows {rows}, "
                       f"num_cols {cols}")  # fmt: skip
    r, c, y, x = (xp.asarray(a) for a in _band_index(rows, cols, k0, k1, length, _align_attr(ctx)))
    out = xp.full((*d.shape[:-2], rows, cols), xp.asarray(pad).reshape(()), d.dtype)
    out[..., y, x] = d[..., r, c]
    return out


MatrixSetDiagV3 = register_op(
    "MatrixSetDiagV3",
    inputs=["input: T", "diagonal: T", "k: int32"],
    outputs=["output: T"],
    attrs={"T": ANY, "align": "RIGHT_LEFT"},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(2)],
)


@MatrixSetDiagV3.kernel()
async def _matrix_set_diag_v3(ctx, x, d, k):
    xp = ctx.xp
    x = xp.asarray(x)
    m, n, k0, k1, length = _diag_band(xp, x, k)
    d = _packed_diagonals(xp.asarray(d), k0, k1)
    want = (*x.shape[:-2], k1 - k0 + 1, length)
    if d.shape != want:
        raise _invalid(f"diagonal must have shape {list(want)} (a single diagonal without "
                       f"its axis of 1), got {list(d.shape)}")  # fmt: skip
    r, c, y, xs = (xp.asarray(a) for a in _band_index(m, n, k0, k1, length, _align_attr(ctx)))
    out = x.copy()
    out[..., y, xs] = d[..., r, c]
    return out


def _v3(op_type, inputs, align, name=None):
    return ops.apply_op(op_type, inputs, {"align": align}, name=name).outputs[0]


@MatrixDiagV3.gradient
def _matrix_diag_v3_grad(op, grad):
    zero = array_ops.zeros([], grad.dtype)
    part = _v3("MatrixDiagPartV3", [grad, op.inputs[1], zero], op.get_attr("align"))
    return [part, None, None, None, None]


@MatrixDiagPartV3.gradient
def _matrix_diag_part_v3_grad(op, grad):
    zeros = array_ops.zeros_like(op.inputs[0])
    return [_v3("MatrixSetDiagV3", [zeros, grad, op.inputs[1]], op.get_attr("align")), None, None]


@MatrixSetDiagV3.gradient
def _matrix_set_diag_v3_grad(op, grad):
    k, align = op.inputs[2], op.get_attr("align")
    zero = array_ops.zeros([], grad.dtype)
    diag_grad = _v3("MatrixDiagPartV3", [grad, k, zero], align)
    input_grad = _v3("MatrixSetDiagV3", [grad, array_ops.zeros_like(diag_grad), k], align)
    return [input_grad, diag_grad, None]


Diag = register_op(
    "Diag",
    inputs=["diagonal: T"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape.concatenate(op.inputs[0].shape)],
)


@Diag.kernel()
async def _diag(ctx, d):
    xp = ctx.xp
    d = xp.asarray(d)
    if d.ndim < 1:
        raise _invalid(f"Input must be at least rank 1, got {d.ndim}")
    n = d.size
    out = xp.zeros((n, n), d.dtype)
    idx = xp.arange(n)
    out[idx, idx] = d.reshape(-1)
    return out.reshape(*d.shape, *d.shape)


def _diag_part_rank_shape(op):
    s = op.inputs[0].shape
    if s.ndims is None:
        return [tensor_shape.unknown_shape()]
    if s.ndims % 2:
        raise ValueError(f"Input must have even rank <= 6, input rank is {s.ndims}")
    half = s.ndims // 2
    return [s[:half].merge_with(s[half:])]


DiagPart = register_op(
    "DiagPart",
    inputs=["input: T"],
    outputs=["diagonal: T"],
    attrs={"T": ANY},
    shape_fn=_diag_part_rank_shape,
)


@DiagPart.kernel()
async def _diag_part(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    half = x.ndim // 2
    if x.ndim % 2 or not x.ndim:
        # TF's message has a line continuation's 42 spaces in it (TF1's too).
        raise _invalid(
            "The rank of the tensor should be" + " " * 42 + "even and positive, got shape "
            f"{_shape_str(x.shape)}"
        )
    for i in range(half):
        if x.shape[i] != x.shape[i + half]:
            raise _invalid(
                f"Invalid shape {_shape_str(x.shape)}: dimensions {i} and {i + half} do not match."
            )
    n = int(np.prod(x.shape[:half], dtype=np.int64))
    idx = xp.arange(n)
    return xp.ascontiguousarray(x.reshape(n, n)[idx, idx]).reshape(x.shape[:half])


@Diag.gradient
def _diag_grad(op, grad):
    return [ops.apply_op("DiagPart", [grad]).outputs[0]]


@DiagPart.gradient
def _diag_part_grad(op, grad):
    return [ops.apply_op("Diag", [grad]).outputs[0]]


# -- determinant, inverse, Cholesky, solves ------------------------------------------------


def _det_shape(op):
    s = _square_shape(op)[0]
    return [s[:-2] if s.ndims is not None else tensor_shape.unknown_shape()]


MatrixDeterminant = register_op(
    "MatrixDeterminant",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG},
    shape_fn=_det_shape,
)


@MatrixDeterminant.kernel()
async def _det(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _square(x)
    return xp.linalg.det(x).astype(x.dtype)


@MatrixDeterminant.gradient
def _det_grad(op, grad):
    a, det = op.inputs[0], op.outputs[0]
    inv_t = _adj(ops.apply_op("MatrixInverse", [a]).outputs[0])
    if a.dtype.is_complex:
        inv_t = math_ops.conj(inv_t)  # d det = det * tr(A^-1 dA): no conjugate
    scale = array_ops.expand_dims(array_ops.expand_dims(grad * det, -1), -1)
    return [scale * inv_t]


MatrixInverse = register_op(
    "MatrixInverse",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG, "adjoint": False},
    shape_fn=_square_shape,
)


def _singular() -> errors.InvalidArgumentError:
    return _invalid("Input is not invertible.")


@MatrixInverse.kernel()
async def _inverse(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _square(x)
    if ctx.attrs["adjoint"]:
        x = xp.conj(xp.swapaxes(x, -1, -2))
    if xp is np and np.isnan(x).any():  # (a NaN pivot fails TF's check: pivot > 0)
        raise _singular()
    try:
        out = xp.linalg.inv(x).astype(x.dtype)
    except np.linalg.LinAlgError:
        raise _singular() from None
    if not await _all_finite(ctx, out):
        raise _singular()
    return out


async def _all_finite(ctx, out) -> bool:
    """On a device whose solvers report failure in their output (CuPy leaves a singular
    matrix's inverse, a non-positive-definite Cholesky factor, inf or nan instead of
    raising as NumPy does): whether `out` is finite, learned by an asynchronous copy of
    one flag (TF's GPU kernels check their solvers' info on the host the same way).
    Always True on the host, where NumPy raised already."""
    xp = ctx.xp
    if xp is np or out.size == 0:
        return True
    flag = await ctx.device.copy_to_host(xp.isfinite(out).all())
    return bool(flag)


@MatrixInverse.gradient
def _inverse_grad(op, grad):
    ainv = op.outputs[0]
    if op.get_attr("adjoint"):  # y = inv(A^H): the adjoint of the plain case's gradient
        return [-_mm(_mm(ainv, grad, adjoint_b=True), ainv)]
    return [-_mm(_mm(ainv, grad, adjoint_a=True), ainv, adjoint_b=True)]


Cholesky = register_op(
    "Cholesky",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG},
    shape_fn=_square_shape,
)


@Cholesky.kernel()
async def _cholesky(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _square(x)
    message = "Cholesky decomposition was not successful. The input might not be valid."
    try:
        out = xp.linalg.cholesky(x).astype(x.dtype)
    except np.linalg.LinAlgError:
        raise _invalid(message) from None
    if not await _all_finite(ctx, out):
        raise _invalid(message)
    return out


def _eye_like(x):
    n = array_ops.shape(x)[-1]
    eye = array_ops.reshape(
        math_ops.cast(math_ops.equal(array_ops.expand_dims(_range(n), 1), _range(n)), x.dtype),
        array_ops.stack([n, n]),
    )
    return eye


def _range(n):
    from asyncflow.ops import reduction_ops

    return reduction_ops.range(n)


def _set_diag(x, d):
    return ops.apply_op("MatrixSetDiag", [x, d]).outputs[0]


def _diag_part_of(x):
    return ops.apply_op("MatrixDiagPart", [x]).outputs[0]


def _band(x, lo, hi):
    return ops.apply_op("MatrixBandPart", [x, lo, hi]).outputs[0]


def _tri_solve(a, b, lower=True, adjoint=False):
    attrs = {"lower": lower, "adjoint": adjoint}
    return ops.apply_op("MatrixTriangularSolve", [a, b], attrs).outputs[0]


@Cholesky.gradient
def _cholesky_grad(op, grad):
    # Murray (2016), as TF: Phi(L^H grad) sandwiched by L^-1, symmetrised
    low = op.outputs[0]
    eye = _eye_like(low) + array_ops.zeros_like(low)
    l_inv = _tri_solve(low, eye)
    middle = _mm(low, grad, adjoint_a=True)
    middle = _set_diag(middle, 0.5 * _diag_part_of(middle))
    middle = _band(middle, -1, 0)
    grad_a = _mm(_mm(l_inv, middle, adjoint_a=True), l_inv)
    return [(grad_a + _adj(grad_a)) * 0.5]


def _equal_dims(x, y) -> None:
    if x.value is not None and y.value is not None and x.value != y.value:
        raise ValueError(f"Dimensions must be equal, but are {x.value} and {y.value}")


def _solve_shape(op):
    a = op.inputs[0].shape.with_rank_at_least(2)
    b = op.inputs[1].shape.with_rank_at_least(2)
    if a.ndims is None or b.ndims is None:
        return [tensor_shape.unknown_shape()]
    _equal_dims(a[-2], a[-1])  # (TF's checks: a square matrix, as many rows as rhs)
    _equal_dims(a[-2], b[-2])
    return [a[:-1].concatenate(b[-1:])]


def _solve_no_broadcast_shape(op):
    """MatrixSolve's: _solve_shape's, and batch dimensions that agree (no broadcasting)."""
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if a.ndims is not None and b.ndims is not None:
        if a.ndims != b.ndims:
            raise ValueError(f"Shapes must be equal rank, but are {a.ndims - 2} and {b.ndims - 2}")
        for x, y in zip(a.dims[:-2], b.dims[:-2]):
            _equal_dims(x, y)
    return _solve_shape(op)


MatrixSolve = register_op(
    "MatrixSolve",
    inputs=["matrix: T", "rhs: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG, "adjoint": False},
    shape_fn=_solve_no_broadcast_shape,
)


@MatrixSolve.kernel()
async def _solve(ctx, a, b):
    xp = ctx.xp
    a, b = xp.asarray(a), xp.asarray(b)
    _square(a, "matrix")
    if a.shape[:-1] != b.shape[:-1]:
        raise _invalid(f"Input matrix and right-hand side must have the same number of rows: "
                       f"{list(a.shape)} vs {list(b.shape)}")  # fmt: skip
    if ctx.attrs["adjoint"]:
        a = xp.conj(xp.swapaxes(a, -1, -2))
    try:
        return xp.linalg.solve(a, b).astype(b.dtype)
    except np.linalg.LinAlgError:
        raise _invalid("Input matrix is not invertible.") from None


@MatrixSolve.gradient
def _solve_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    adjoint = op.get_attr("adjoint")
    grad_b = ops.apply_op("MatrixSolve", [a, grad], {"adjoint": not adjoint}).outputs[0]
    if adjoint:
        grad_a = -_mm(c, grad_b, adjoint_b=True)
    else:
        grad_a = -_mm(grad_b, c, adjoint_b=True)
    return [grad_a, grad_b]


MatrixTriangularSolve = register_op(
    "MatrixTriangularSolve",
    inputs=["matrix: T", "rhs: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG, "lower": True, "adjoint": False},
    shape_fn=_solve_shape,
)


def _triangular_solve_host(a, b, lower, adjoint):
    import scipy.linalg  # (imported here: at import it cost every program ~0.3 s)

    trans = 2 if adjoint else 0
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                   np.result_type(a, b))  # fmt: skip
    a_b = np.broadcast_to(a, out.shape[:-2] + a.shape[-2:])
    b_b = np.broadcast_to(b, out.shape)
    for idx in np.ndindex(out.shape[:-2]):
        out[idx] = scipy.linalg.solve_triangular(a_b[idx], b_b[idx], trans=trans, lower=lower,
                                                 check_finite=False)  # fmt: skip
    return out


@MatrixTriangularSolve.kernel()
async def _triangular_solve(ctx, a, b):
    xp = ctx.xp
    a, b = xp.asarray(a), xp.asarray(b)
    _square(a, "matrix")
    if a.shape[-1] != b.shape[-2]:
        raise _invalid(f"Incompatible shapes {list(a.shape)} and {list(b.shape)}")
    ha, hb = np.asarray(to_host(xp, a)), np.asarray(to_host(xp, b))
    diag = np.diagonal(ha, axis1=-2, axis2=-1)
    if (diag == 0).any():
        raise _invalid("Input matrix is not invertible.")
    out = _triangular_solve_host(ha, hb, ctx.attrs["lower"], ctx.attrs["adjoint"])
    return xp.asarray(out.astype(hb.dtype))


@MatrixTriangularSolve.gradient
def _triangular_solve_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    lower, adjoint = op.get_attr("lower"), op.get_attr("adjoint")
    grad_b = _tri_solve(a, grad, lower=lower, adjoint=not adjoint)
    grad_a = -_mm(c, grad_b, adjoint_b=True) if adjoint else -_mm(grad_b, c, adjoint_b=True)
    grad_a = _band(grad_a, -1, 0) if lower else _band(grad_a, 0, -1)
    return [grad_a, grad_b]


# -- square root, eigen, QR, SVD, cross ----------------------------------------------------

MatrixSquareRoot = register_op(
    "MatrixSquareRoot",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": _LINALG},
    shape_fn=_square_shape,
)


@MatrixSquareRoot.kernel()
async def _sqrtm(ctx, x):
    import scipy.linalg  # (imported here: at import it cost every program ~0.3 s)

    xp = ctx.xp
    x = xp.asarray(x)
    _square(x)
    host = np.asarray(to_host(xp, x))
    out = np.empty_like(host)
    for idx in np.ndindex(host.shape[:-2]):
        root = scipy.linalg.sqrtm(host[idx])
        if host.dtype.kind != "c" and np.iscomplexobj(root):
            # A real matrix without a real root (a negative eigenvalue): TF's real Schur
            # method takes the square root of a negative number, NaN throughout.
            scale = max(float(np.abs(root).max(initial=0.0)), 1.0)
            if np.abs(root.imag).max(initial=0.0) > 1e3 * np.finfo(host.dtype).eps * scale:
                root = np.full(root.shape, np.nan)
        out[idx] = root if host.dtype.kind == "c" else np.real(root)
    return xp.asarray(out)


_SylvesterSolve = register_op(
    "_SylvesterSolve",
    inputs=["a: T", "c: T"],
    outputs=["x: T"],
    attrs={"T": _LINALG},
    shape_fn=lambda op: [op.inputs[1].shape],
)
NotDifferentiable("_SylvesterSolve")


@_SylvesterSolve.kernel()
async def _sylvester(ctx, a, c):
    import scipy.linalg  # (imported here: at import it cost every program ~0.3 s)

    # X with A X + X A = C, per matrix: the square root's gradient
    xp = ctx.xp
    ha, hc = np.asarray(to_host(xp, xp.asarray(a))), np.asarray(to_host(xp, xp.asarray(c)))
    out = np.empty_like(hc)
    for idx in np.ndindex(hc.shape[:-2]):
        out[idx] = scipy.linalg.solve_sylvester(ha[idx], ha[idx], hc[idx])
    return xp.asarray(out)


@MatrixSquareRoot.gradient
def _sqrtm_grad(op, grad):
    # S = sqrt(A): S dS + dS S = dA, so grad_A solves S^H X + X S^H = grad
    s_adj = _adj(op.outputs[0])
    return [ops.apply_op("_SylvesterSolve", [s_adj, grad]).outputs[0]]


def _eig_shape(op):
    s = _square_shape(op)[0]
    if s.ndims is None:
        return [tensor_shape.unknown_shape(), tensor_shape.unknown_shape()]
    v = s if op.get_attr("compute_v") else tensor_shape.TensorShape([0])
    return [s[:-1], v]


SelfAdjointEigV2 = register_op(
    "SelfAdjointEigV2",
    inputs=["input: T"],
    outputs=["e: T", "v: T"],
    attrs={"T": _LINALG, "compute_v": True},
    shape_fn=_eig_shape,
)


@SelfAdjointEigV2.kernel()
async def _eigh(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    _square(x)
    e, v = (xp.asarray(a) for a in xp.linalg.eigh(x))  # (the stand-in GPU hands back host arrays)
    e = e.astype(x.dtype)
    if not ctx.attrs["compute_v"]:
        return e, xp.zeros((0,), x.dtype)
    return e, v.astype(x.dtype)


@SelfAdjointEigV2.gradient
def _eigh_grad(op, grad_e, grad_v):
    e, v = op.outputs
    if not op.get_attr("compute_v"):
        e, v = ops.apply_op("SelfAdjointEigV2", [op.inputs[0]], {"compute_v": True}).outputs
        grad_v = None
    real = e.dtype
    inner = ops.apply_op("MatrixDiag", [grad_e if grad_e is not None else
                                        array_ops.zeros_like(e)]).outputs[0]  # fmt: skip
    if grad_v is not None:
        diff = array_ops.expand_dims(e, -2) - array_ops.expand_dims(e, -1)
        f = _set_diag(math_ops.reciprocal(diff), array_ops.zeros_like(e))
        inner = inner + f * _mm(v, grad_v, adjoint_a=True)
    del real
    grad_a = _mm(v, _mm(inner, v, adjoint_b=True))
    grad_a = _band(grad_a + _adj(grad_a), -1, 0)
    grad_a = _set_diag(grad_a, 0.5 * _diag_part_of(grad_a))
    return [grad_a]


def _qr_shape(op):
    s = op.inputs[0].shape.with_rank_at_least(2)
    if s.ndims is None:
        return [tensor_shape.unknown_shape(), tensor_shape.unknown_shape()]
    m, n = s.dims[-2].value, s.dims[-1].value
    k = None if m is None or n is None else min(m, n)
    full = op.get_attr("full_matrices")
    batch = s[:-2]
    q = batch.concatenate([m, m if full else k])
    r = batch.concatenate([m if full else k, n])
    return [q, r]


Qr = register_op(
    "Qr",
    inputs=["input: T"],
    outputs=["q: T", "r: T"],
    attrs={"T": _LINALG, "full_matrices": False},
    shape_fn=_qr_shape,
)


@Qr.kernel()
async def _qr(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    mode = "complete" if ctx.attrs["full_matrices"] else "reduced"
    q, r = (xp.asarray(a) for a in xp.linalg.qr(x, mode=mode))
    return q.astype(x.dtype), r.astype(x.dtype)


def _tri_solve_right(x, r):
    """x r^-1 for upper-triangular r (as TF's _TriangularSolve in linalg_grad)."""
    return _adj(_tri_solve(r, _adj(x), lower=False, adjoint=False))


def _qr_grad_deep(q, r, dq, dr):
    """TF's QR gradient for a square or deep (m >= n) matrix, reduced."""
    qdq = _mm(q, dq, adjoint_a=True)
    qdq_ = qdq - _adj(qdq)
    rdr = _mm(r, dr, adjoint_b=True)
    rdr_ = rdr - _adj(rdr)
    tril = _band(qdq_ + rdr_, -1, 0)
    grad_a = _mm(q, dr + _tri_solve_right(tril, r))
    grad_b = _tri_solve_right(dq - _mm(q, qdq), r)
    return grad_a + grad_b


@Qr.gradient
def _qr_grad(op, dq, dr):
    """TF's: a deep matrix (reduced), a square one, or a wide one a = [x, y] with
    r = [u, v]: x's gradient is the square case's for (q, u) with dq + y dv^H, y's is
    q dv.  A deep matrix with full_matrices raises NotImplementedError, as TF."""
    a = op.inputs[0]
    q, r = op.outputs
    m = tensor_shape.dimension_value(a.shape[-2])
    n = tensor_shape.dimension_value(a.shape[-1])
    if m is None or n is None:
        raise NotImplementedError("QrGrad needs static matrix dimensions in asyncflow")
    if op.get_attr("full_matrices") and m > n:
        raise NotImplementedError(
            "QrGrad not implemented when nrows > ncols and full_matrices is true. Received "
            f"r.shape={tuple(r.shape.as_list())} with nrows={m}and ncols={n}."
        )
    dq = dq if dq is not None else array_ops.zeros_like(q)
    dr = dr if dr is not None else array_ops.zeros_like(r)
    if m >= n:
        return [_qr_grad_deep(q, r, dq, dr)]
    y, u = a[..., :, m:], r[..., :, :m]
    du, dv = dr[..., :, :m], dr[..., :, m:]
    dx = _qr_grad_deep(q, u, dq + _mm(y, dv, adjoint_b=True), du)
    return [array_ops.concat([dx, _mm(q, dv)], -1)]


def _svd_shape(op):
    s = op.inputs[0].shape.with_rank_at_least(2)
    if s.ndims is None:
        return [tensor_shape.unknown_shape()] * 3
    m, n = s.dims[-2].value, s.dims[-1].value
    k = None if m is None or n is None else min(m, n)
    batch = s[:-2]
    if not op.get_attr("compute_uv"):
        return [batch.concatenate([k]), tensor_shape.TensorShape([0]),
                tensor_shape.TensorShape([0])]  # fmt: skip
    full = op.get_attr("full_matrices")
    return [batch.concatenate([k]), batch.concatenate([m, m if full else k]),
            batch.concatenate([n, n if full else k])]  # fmt: skip


Svd = register_op(
    "Svd",
    inputs=["input: T"],
    outputs=["s: T", "u: T", "v: T"],
    attrs={"T": _LINALG, "compute_uv": True, "full_matrices": False},
    shape_fn=_svd_shape,
)


@Svd.kernel()
async def _svd(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    if ctx.attrs["compute_uv"]:
        u, s, vh = (
            xp.asarray(a) for a in xp.linalg.svd(x, full_matrices=ctx.attrs["full_matrices"])
        )
        v = xp.conj(xp.swapaxes(vh, -1, -2))
        return s.astype(x.dtype), u.astype(x.dtype), xp.ascontiguousarray(v).astype(x.dtype)
    s = xp.asarray(xp.linalg.svd(x, compute_uv=False))
    empty = xp.zeros((0,), x.dtype)
    return s.astype(x.dtype), empty, empty


def _safe_reciprocal(x, eps=1e-20):
    return x * math_ops.reciprocal(x * x + eps)


def _diag_of(d):
    return ops.apply_op("MatrixDiag", [d]).outputs[0]


@Svd.gradient
def _svd_grad(op, grad_s, grad_u, grad_v):
    """TF's SVD gradient (Townsend's derivation): through s alone, or through u and v
    as well for real inputs, with M != N handled by the thin factors (full_matrices
    only when |M - N| <= 1, as TF).  Repeated singular values give a non-finite
    gradient, as in TF."""
    a = op.inputs[0]
    uv_grads = grad_u is not None or grad_v is not None
    if not op.get_attr("compute_uv") or not uv_grads:
        _, u, v = ops.apply_op("Svd", [a], {"compute_uv": True, "full_matrices": False}).outputs
        grad_s = math_ops.cast(grad_s, a.dtype)
        return [_mm(u, _mm(_diag_of(grad_s), v, adjoint_b=True))]
    if a.dtype.is_complex:
        raise NotImplementedError("The gradient of a complex Svd through u and v is not "
                                  "implemented in asyncflow.")  # fmt: skip
    shape = a.shape.with_rank_at_least(2)
    m, n = shape.dims[-2].value, shape.dims[-1].value
    if m is None or n is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with "
                                  "unknown inner matrix shape.")  # fmt: skip
    full = op.get_attr("full_matrices")
    if full and abs(m - n) > 1:
        raise NotImplementedError("svd gradient is not implemented for abs(m - n) > 1 when "
                                  f"full_matrices is True: m={m}, n={n}")  # fmt: skip
    s, u, v = op.outputs
    grad_s = array_ops.zeros_like(s) if grad_s is None else grad_s
    grad_u = array_ops.zeros_like(u) if grad_u is None else grad_u
    grad_v = array_ops.zeros_like(v) if grad_v is None else grad_v
    use_adjoint = m > n
    if use_adjoint:  # the gradient of A^T = V S U^T, transposed at the end
        m, n = n, m
        u, v = v, u
        grad_u, grad_v = grad_v, grad_u
    s_mat = _diag_of(s)
    s_2 = s * s
    f = _safe_reciprocal(array_ops.expand_dims(s_2, -2) - array_ops.expand_dims(s_2, -1))
    f = ops.apply_op("MatrixSetDiag", [f, array_ops.zeros_like(s)]).outputs[0]
    v1, grad_v1 = v[..., :, :m], grad_v[..., :, :m]
    f_u = f * _mm(u, grad_u, adjoint_a=True)
    f_v = f * _mm(v1, grad_v1, adjoint_a=True)
    inner = (
        _diag_of(math_ops.cast(grad_s, a.dtype))
        + _mm(f_u + _adj(f_u), s_mat)
        + _mm(s_mat, f_v + _adj(f_v))
    )
    grad_a = _mm(u, _mm(inner, v1, adjoint_b=True))
    if m != n:
        gv1t = _adj(grad_v1)
        term2 = gv1t - _mm(_mm(gv1t, v1), v1, adjoint_b=True)
        if full:
            v2, grad_v2 = v[..., :, m:n], grad_v[..., :, m:n]
            term2 = term2 - _mm(_mm(v1, grad_v2, adjoint_a=True), v2, adjoint_b=True)
        grad_a = grad_a + _mm(_mm(u, _diag_of(_safe_reciprocal(s))), term2)
    return [_adj(grad_a) if use_adjoint else grad_a]


Cross = register_op(
    "Cross",
    inputs=["a: T", "b: T"],
    outputs=["product: T"],
    attrs={"T": TypeConstraint(["float16", "float32", "float64", "int32", "int64"])},
    shape_fn=lambda op: [_cross_shape(op)],
)


def _cross_shape(op):
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if a.ndims is not None and b.ndims is not None and a.ndims != b.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}")
    out = a.merge_with(b).with_rank_at_least(1)
    if out.ndims is not None and out[-1].value not in (None, 3):
        raise ValueError(f"Dimension must be 3 but is {out[-1].value}")
    return out


@Cross.kernel()
async def _cross(ctx, a, b):
    xp = ctx.xp
    a, b = xp.asarray(a), xp.asarray(b)
    if a.shape != b.shape or a.ndim < 1 or a.shape[-1] != 3:
        raise _invalid(f"Arguments a and b must have the same shape with last dimension 3: "
                       f"{list(a.shape)} vs {list(b.shape)}")  # fmt: skip
    return xp.cross(a, b).astype(a.dtype)


@Cross.gradient
def _cross_grad(op, grad):
    a, b = op.inputs
    return [
        ops.apply_op("Cross", [b, grad]).outputs[0],
        ops.apply_op("Cross", [grad, a]).outputs[0],
    ]


# -- builders ---------------------------------------------------------------------------------


def _one(op_type, x, attrs=None, name=None):
    return ops.apply_op(op_type, [x], attrs or {}, name=name).outputs[0]


def matrix_band_part(input, num_lower, num_upper, name=None):  # noqa: A002 - TF's name
    """The band of each innermost matrix: num_lower sub- and num_upper super-diagonals
    (negative: all of them), zeros elsewhere.

    Raises:
      InvalidArgumentError: (when run) a band wider than the matrix.
    """
    with ops.name_scope(name, "MatrixBandPart", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        # Tindex is int32 or int64 (Python ints: int64, TF's default); an int32 tensor
        # keeps its type.
        lo = ops.convert_to_tensor(num_lower, preferred_dtype=dtypes.int64, name="num_lower")
        hi = ops.convert_to_tensor(num_upper, preferred_dtype=lo.dtype, name="num_upper")
        return ops.apply_op("MatrixBandPart", [x, lo, hi], name=scope).outputs[0]


def _check_align(align):
    if align not in _ALIGNS:
        raise ValueError(f"align must be one of {', '.join(_ALIGNS)}, got {align!r}")


def _k_tensor(k):
    return ops.convert_to_tensor(k, dtype=dtypes.int32, name="k")


def matrix_diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0,
                align="RIGHT_LEFT"):  # fmt: skip
    """Batched matrices with `diagonal` on diagonal k (or the band k[0]..k[1], packed
    [..., k[1] - k[0] + 1, L] from the highest diagonal down), `padding_value`
    elsewhere; num_rows / num_cols -1: the smallest that fit (square when both are).

    Raises:
      ValueError: a bad `align`.
      InvalidArgumentError: (when run) k[0] > k[1], sizes that do not fit the band.
    """
    _check_align(align)
    if (
        isinstance(k, int)
        and k == 0
        and num_rows == -1
        and num_cols == -1
        and (isinstance(padding_value, (int, float)) and padding_value == 0)
    ):
        return _one("MatrixDiag", diagonal, name=name)
    with ops.name_scope(name, "diag", [diagonal]) as scope:
        d = ops.convert_to_tensor(diagonal, name="diagonal")
        inputs = [
            d,
            _k_tensor(k),
            ops.convert_to_tensor(num_rows, dtype=dtypes.int32, name="num_rows"),
            ops.convert_to_tensor(num_cols, dtype=dtypes.int32, name="num_cols"),
            ops.convert_to_tensor(padding_value, dtype=d.dtype, name="padding_value"),
        ]
        return _v3("MatrixDiagV3", inputs, align, name=scope)


def matrix_diag_part(input, name="diag_part", k=0, padding_value=0, align="RIGHT_LEFT"):  # noqa: A002
    """Diagonal k of each innermost matrix, or the band k[0]..k[1] packed as
    [..., k[1] - k[0] + 1, L] (highest diagonal first, shorter ones aligned by `align`
    and padded with `padding_value`).

    Raises:
      ValueError: a bad `align`.
      InvalidArgumentError: (when run) k out of the matrix, k[0] > k[1].
    """
    _check_align(align)
    if (
        isinstance(k, int)
        and k == 0
        and (isinstance(padding_value, (int, float)) and padding_value == 0)
    ):
        return _one("MatrixDiagPart", input, name=name)
    with ops.name_scope(name, "diag_part", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        pad = ops.convert_to_tensor(padding_value, dtype=x.dtype, name="padding_value")
        return _v3("MatrixDiagPartV3", [x, _k_tensor(k), pad], align, name=scope)


def matrix_set_diag(input, diagonal, name="set_diag", k=0, align="RIGHT_LEFT"):  # noqa: A002
    """Each innermost matrix with diagonal k (or the band k[0]..k[1], packed as
    matrix_diag_part gives it) replaced by `diagonal`.

    Raises:
      ValueError: a bad `align`.
      InvalidArgumentError: (when run) k out of the matrix, a diagonal of the wrong shape.
    """
    _check_align(align)
    if isinstance(k, int) and k == 0:
        return ops.apply_op("MatrixSetDiag", [input, diagonal], name=name).outputs[0]
    with ops.name_scope(name, "set_diag", [input, diagonal]) as scope:
        x = ops.convert_to_tensor(input, name="input")
        d = ops.convert_to_tensor(diagonal, dtype=x.dtype, name="diagonal")
        return _v3("MatrixSetDiagV3", [x, d, _k_tensor(k)], align, name=scope)


def diag(diagonal, name=None):
    """A tensor of rank 2k with `diagonal` (rank k) on its diagonal (op Diag)."""
    return _one("Diag", diagonal, name=name)


def diag_part(input, name=None):  # noqa: A002 - TF's name
    """The diagonal of a rank-2k tensor (op DiagPart).

    Raises:
      ValueError: an odd rank or dimensions that differ in pairs (static).
    """
    return _one("DiagPart", input, name=name)


def matrix_determinant(input, name=None):  # noqa: A002
    """The determinant of each innermost square matrix."""
    return _one("MatrixDeterminant", input, name=name)


def matrix_inverse(input, adjoint=False, name=None):  # noqa: A002
    """The inverse (of the adjoint, with adjoint=True) of each innermost matrix.

    Raises:
      InvalidArgumentError: (when run) a singular matrix.
    """
    return _one("MatrixInverse", input, {"adjoint": bool(adjoint)}, name=name)


def cholesky(input, name=None):  # noqa: A002
    """The lower Cholesky factor of each Hermitian positive-definite matrix.

    Raises:
      InvalidArgumentError: (when run) a matrix that is not positive definite.
    """
    return _one("Cholesky", input, name=name)


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """X with matrix @ X = rhs (adjoint(matrix) with adjoint=True), batched.

    Raises:
      InvalidArgumentError: (when run) a singular matrix or mismatched rows.
    """
    attrs = {"adjoint": bool(adjoint)}
    return ops.apply_op("MatrixSolve", [matrix, rhs], attrs, name=name).outputs[0]


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """X with matrix @ X = rhs for triangular `matrix` (its other triangle is ignored).

    Raises:
      InvalidArgumentError: (when run) a zero on the diagonal, or mismatched shapes.
    """
    attrs = {"lower": bool(lower), "adjoint": bool(adjoint)}
    return ops.apply_op("MatrixTriangularSolve", [matrix, rhs], attrs, name=name).outputs[0]


def cholesky_solve(chol, rhs, name=None):
    """X with A X = rhs given A's Cholesky factor `chol` (two triangular solves)."""
    with ops.name_scope(name, "cholesky_solve", [chol, rhs]):
        y = matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
        return matrix_triangular_solve(chol, y, lower=True, adjoint=True)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """Least-squares X minimising ||matrix X - rhs||^2 + l2 ||X||^2: with `fast`, through
    the normal equations and a Cholesky factorisation (TF's fast path); otherwise the
    minimum-norm solution (op MatrixSolveLs; no regularisation there, no gradient).

    Raises:
      InvalidArgumentError: (when run) a rank-deficient matrix on the fast path
        without regularisation.
      ValueError: fast=False with a non-zero l2_regularizer.
    """
    with ops.name_scope(name, "matrix_solve_ls", [matrix, rhs, l2_regularizer]):
        a = ops.convert_to_tensor(matrix, name="matrix")
        b = ops.convert_to_tensor(rhs, name="rhs", dtype=a.dtype)
        if not fast:
            if not (isinstance(l2_regularizer, int | float) and l2_regularizer == 0):
                raise ValueError("asyncflow's fast=False least squares takes no l2_regularizer")
            reg = ops.convert_to_tensor(0.0, dtypes.float64, name="l2_regularizer")
            solve_ls = math_more_ops.MatrixSolveLs.name
            return ops.apply_op(solve_ls, [a, b, reg], {"fast": False}).outputs[0]
        reg = math_ops.cast(l2_regularizer, a.dtype)
        m = tensor_shape.dimension_value(a.shape.with_rank_at_least(2)[-2])
        n = tensor_shape.dimension_value(a.shape[-1])
        if m is not None and n is not None and m < n:  # underdetermined: minimum norm
            gram = _mm(a, a, adjoint_b=True)
            gram = gram + reg * (_eye_like(gram) + array_ops.zeros_like(gram))
            chol = cholesky(gram)
            return _mm(a, cholesky_solve(chol, b), adjoint_a=True)
        gram = _mm(a, a, adjoint_a=True)
        gram = gram + reg * (_eye_like(gram) + array_ops.zeros_like(gram))
        chol = cholesky(gram)
        return cholesky_solve(chol, _mm(a, b, adjoint_a=True))


def matrix_square_root(input, name=None):  # noqa: A002
    """The principal square root of each innermost matrix (SciPy's sqrtm)."""
    return _one("MatrixSquareRoot", input, name=name)


def self_adjoint_eig(tensor, name=None):
    """(eigenvalues ascending, eigenvectors as columns) of each Hermitian matrix."""
    e, v = ops.apply_op("SelfAdjointEigV2", [tensor], {"compute_v": True}, name=name).outputs
    return e, v


def self_adjoint_eigvals(tensor, name=None):
    """The eigenvalues (ascending) of each Hermitian matrix."""
    return ops.apply_op("SelfAdjointEigV2", [tensor], {"compute_v": False}, name=name).outputs[0]


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """(q, r) of each innermost matrix: q with orthonormal columns, r upper triangular."""
    return named_outputs(
        ops.apply_op("Qr", [input], {"full_matrices": bool(full_matrices)}, name=name)
    )


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """Singular values s (descending), and with compute_uv u and v such that
    tensor = u diag(s) v^H (TF's order of results: s, u, v)."""
    attrs = {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)}
    s, u, v = ops.apply_op("Svd", [tensor], attrs, name=name).outputs
    if s.dtype.is_complex:  # (the op's s is complex for complex input: TF takes its real part)
        s = ops.apply_op("Real", [s], {"Tout": s.dtype.real_dtype}).outputs[0]
    return (s, u, v) if compute_uv else s


def cross(a, b, name=None):
    """The cross product of 3-element vectors in the last dimension.

    Raises:
      InvalidArgumentError: (when run) shapes that differ or a last dimension not 3.
    """
    return ops.apply_op("Cross", [a, b], name=name).outputs[0]
