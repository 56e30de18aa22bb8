"""TF's TridiagonalSolve and TridiagonalMatMul, with TF's gradients and the
`tf.linalg.tridiagonal_solve` / `tridiagonal_matmul` builders (diagonals in TF's
'compact' [..., 3, M], 'sequence' (super, main, sub) or 'matrix' [..., M, M] format).

In compact form row 0 is the superdiagonal (its last element unused), row 1 the main
diagonal, row 2 the subdiagonal (its first element unused).  The solve is TF's CPU
kernel's: Gaussian elimination with partial pivoting (rows i and i+1 swapped when the
subdiagonal entry is larger), or the Thomas algorithm without pivoting; a matrix that
meets a zero pivot gets NaN for its solution, as TF 2.21 (which logs "The matrix is
not invertible" and goes on).  Every matrix of a batch is solved at once, with its
own pivoting decisions (vectorized over the batch and the right-hand sides).

Invariant: kernels return new arrays.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, linalg_matrix_ops, manip_ops, math_ops, reduction_ops
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["tridiagonal_matmul", "tridiagonal_solve"]

_T = TypeConstraint(["float64", "float32", "complex64", "complex128"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _dims(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


# -- TridiagonalSolve -----------------------------------------------------------------


def _solve_shape(op):
    d, r = (t.shape for t in op.inputs)
    if d.ndims is not None and d.ndims < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {d.ndims}")
    if d.ndims is not None and d.dims[-2] is not None and d.dims[-2] != 3:
        raise ValueError(f"Dimension must be 3 but is {d.dims[-2]}")
    if d.ndims is not None and r.ndims is not None:
        if r.ndims != d.ndims:
            raise ValueError(f"Shape must be rank {d.ndims} but is rank {r.ndims}")
        if d.dims[-1] is not None and r.dims[-2] is not None and d.dims[-1] != r.dims[-2]:
            raise ValueError(f"Dimensions must be equal, but are {d.dims[-1]} and {r.dims[-2]}")
    return [r]


TridiagonalSolve = register_op(
    "TridiagonalSolve",
    inputs=["diagonals: T", "rhs: T"],
    outputs=["output: T"],
    attrs={"partial_pivoting": True, "perturb_singular": False, "T": _T},
    shape_fn=_solve_shape,
)


def _solve_pivoting(sup, diag, sub, x):
    """Batched [B, M] diagonals, x [B, M, K] (overwritten): TF's elimination with
    partial pivoting, each matrix pivoting on its own."""
    n = diag.shape[1]
    u0 = np.empty_like(diag)  # U's main diagonal
    u1 = np.zeros_like(diag)  # its first superdiagonal
    u2 = np.zeros_like(diag)  # its second (from row swaps)
    u0[:, 0], u1[:, 0] = diag[:, 0], sup[:, 0]
    bad = np.zeros(diag.shape[0], bool)  # (matrices that met a zero pivot)
    for i in range(n - 1):
        s = sub[:, i + 1]
        keep = np.abs(u0[:, i]) >= np.abs(s)
        bad |= keep & (u0[:, i] == 0)
        with np.errstate(all="ignore"):
            f_keep = np.where(keep, s / np.where(keep, u0[:, i], 1), 0)
            f_swap = np.where(keep, 0, u0[:, i] / np.where(keep, 1, s))
        nxt_sup = sup[:, i + 1]
        new_u0_next = np.where(keep, diag[:, i + 1] - f_keep * u1[:, i],
                               u1[:, i] - f_swap * diag[:, i + 1])  # fmt: skip
        new_u1_next = np.where(keep, nxt_sup, -f_swap * nxt_sup)
        u2[:, i] = np.where(keep, 0, nxt_sup)
        u1[:, i] = np.where(keep, u1[:, i], diag[:, i + 1])
        u0[:, i] = np.where(keep, u0[:, i], s)
        u0[:, i + 1], u1[:, i + 1] = new_u0_next, new_u1_next
        xi, xn = x[:, i].copy(), x[:, i + 1].copy()
        k = keep[:, None]
        x[:, i] = np.where(k, xi, xn)
        x[:, i + 1] = np.where(k, xn - f_keep[:, None] * xi, xi - f_swap[:, None] * xn)
    bad |= u0[:, n - 1] == 0
    u0 = np.where(bad[:, None], 1, u0)
    with np.errstate(all="ignore"):
        x[:, n - 1] /= u0[:, n - 1, None]
        if n > 1:
            x[:, n - 2] = (x[:, n - 2] - u1[:, n - 2, None] * x[:, n - 1]) / u0[:, n - 2, None]
        for i in range(n - 3, -1, -1):
            x[:, i] = (x[:, i] - u1[:, i, None] * x[:, i + 1] - u2[:, i, None] * x[:, i + 2]) / u0[
                :, i, None
            ]
    x[bad] = np.nan
    return x


def _solve_thomas(sup, diag, sub, x):
    n = diag.shape[1]
    u = np.empty_like(diag)
    denom = diag[:, 0]
    bad = denom == 0
    with np.errstate(all="ignore"):
        u[:, 0] = sup[:, 0] / denom
        x[:, 0] /= denom[:, None]
        for i in range(1, n):
            denom = diag[:, i] - sub[:, i] * u[:, i - 1]
            bad |= denom == 0
            u[:, i] = sup[:, i] / denom
            x[:, i] = (x[:, i] - sub[:, i, None] * x[:, i - 1]) / denom[:, None]
        for i in range(n - 2, -1, -1):
            x[:, i] -= u[:, i, None] * x[:, i + 1]
    x[bad] = np.nan
    return x


def _solve(diagonals, rhs, pivoting):
    batch = diagonals.shape[:-2]
    m, k = rhs.shape[-2], rhs.shape[-1]
    d = diagonals.reshape(-1, 3, m)
    x = rhs.reshape(-1, m, k).copy()
    if m == 0 or x.shape[0] == 0:
        return x.reshape(rhs.shape)
    fn = _solve_pivoting if pivoting else _solve_thomas
    return fn(d[:, 0], d[:, 1], d[:, 2], x).reshape((*batch, m, k))


@TridiagonalSolve.kernel("CPU")
async def _tridiagonal_solve(ctx, diagonals, rhs):
    diagonals, rhs = np.asarray(diagonals), np.asarray(rhs)
    if diagonals.ndim < 2 or diagonals.shape[-2] != 3:
        raise _invalid(f"Expected diagonals to be [..., 3, M], got {_dims(diagonals.shape)}")
    if rhs.ndim != diagonals.ndim or rhs.shape[:-2] != diagonals.shape[:-2]:
        raise _invalid(
            f"Batch shapes of diagonals {_dims(diagonals.shape)} and rhs {_dims(rhs.shape)} "
            "must match"
        )
    if rhs.shape[-2] != diagonals.shape[-1]:
        raise _invalid(
            "Expected the number of left-hand sides and right-hand sides to be equal, got "
            f"{diagonals.shape[-1]} and {rhs.shape[-2]}"
        )
    if ctx.attrs["perturb_singular"]:
        raise errors.UnimplementedError(
            None, None, "perturb_singular=True is not implemented in asyncflow"
        )
    return await ctx.device.compute(_solve, diagonals, rhs, ctx.attrs["partial_pivoting"])


def _shift(x, k: int):
    """x's second-to-last axis shifted by k (1: down, -1: up), zeros coming in."""
    rank = array_ops.rank(x)
    zeros = array_ops.zeros(manip_ops.stack([rank - 2, 2]), dtype="int32")
    row = [[1, 0], [0, 0]] if k > 0 else [[0, 1], [0, 0]]
    pad = manip_ops.concat([zeros, ops.convert_to_tensor(row, "int32")], 0)
    return manip_ops.pad(x[..., :-1, :] if k > 0 else x[..., 1:, :], pad)


def _transpose_compact(diags):
    """The compact diagonals of the transposed matrix (TF's _TransposeTridiagonalMatrix)."""
    rank = array_ops.rank(diags)
    zeros = array_ops.zeros(manip_ops.stack([rank - 2, 2]), dtype="int32")
    sup_pad = manip_ops.concat([zeros, ops.convert_to_tensor([[0, 1]], "int32")], 0)
    sub_pad = manip_ops.concat([zeros, ops.convert_to_tensor([[1, 0]], "int32")], 0)
    sup = manip_ops.pad(diags[..., 2, 1:], sup_pad)
    sub = manip_ops.pad(diags[..., 0, :-1], sub_pad)
    return manip_ops.stack([sup, diags[..., 1, :], sub], axis=-2)


def _three_diagonals_of_product(x, y):
    """The compact diagonals of x @ y^T, without forming it (TF's
    _MatmulExtractingThreeDiagonals)."""
    diag = reduction_ops.reduce_sum(x * y, axis=-1)
    sup = reduction_ops.reduce_sum(x * _shift(y, -1), axis=-1)
    sub = reduction_ops.reduce_sum(x * _shift(y, 1), axis=-1)
    return manip_ops.stack([sup, diag, sub], axis=-2)


@TridiagonalSolve.gradient
def _tridiagonal_solve_grad(op, grad):
    diags, x = op.inputs[0], op.outputs[0]
    attrs = {
        "partial_pivoting": op._attr("partial_pivoting"),
        "perturb_singular": op._attr("perturb_singular"),
    }
    grad_rhs = ops.apply_op("TridiagonalSolve", [_transpose_compact(diags), grad], attrs)
    grad_rhs = grad_rhs.outputs[0]
    return [-_three_diagonals_of_product(grad_rhs, x), grad_rhs]


# -- TridiagonalMatMul ----------------------------------------------------------------


def _matmul_shape(op):
    rhs = op.inputs[3].shape
    for t in op.inputs[:3]:
        s = t.shape
        if s.ndims is not None and s.ndims < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {s.ndims}")
        if s.ndims is not None and s.dims[-2] is not None and s.dims[-2] != 1:
            raise ValueError(f"Dimension must be 1 but is {s.dims[-2]}")
    return [rhs]


TridiagonalMatMul = register_op(
    "TridiagonalMatMul",
    inputs=["superdiag: T", "maindiag: T", "subdiag: T", "rhs: T"],
    outputs=["output: T"],
    attrs={"T": _T},
    shape_fn=_matmul_shape,
)


def _matmul(sup, main, sub, rhs):
    out = main[..., 0, :, None] * rhs
    out[..., :-1, :] += sup[..., 0, :-1, None] * rhs[..., 1:, :]
    out[..., 1:, :] += sub[..., 0, 1:, None] * rhs[..., :-1, :]
    return out


@TridiagonalMatMul.kernel("CPU")
async def _tridiagonal_matmul(ctx, superdiag, maindiag, subdiag, rhs):
    rhs = np.asarray(rhs)
    diags = [np.asarray(d) for d in (superdiag, maindiag, subdiag)]
    if rhs.ndim < 2:
        raise _invalid(f"Input must have rank >= 2, but got {rhs.ndim}")
    m = rhs.shape[-2]
    for name, d in zip(("superdiag", "maindiag", "subdiag"), diags):
        if d.shape != (*rhs.shape[:-2], 1, m):
            raise _invalid(
                f"Expected {name} to have shape {_dims((*rhs.shape[:-2], 1, m))}, got "
                f"{_dims(d.shape)}"
            )
    return await ctx.device.compute(_matmul, *diags, rhs)


@TridiagonalMatMul.gradient
def _tridiagonal_matmul_grad(op, grad):
    sup, main, sub, rhs = op.inputs
    conj = math_ops.conj if rhs.dtype.is_complex else (lambda t: t)
    rhs_c = conj(rhs)
    # d out[i] / d sup[i] = rhs[i + 1]; / d sub[i] = rhs[i - 1]; / d rhs: A^H grad.
    grad_sup = reduction_ops.reduce_sum(_shift(rhs_c, -1) * grad, axis=-1)
    grad_main = reduction_ops.reduce_sum(rhs_c * grad, axis=-1)
    grad_sub = reduction_ops.reduce_sum(_shift(rhs_c, 1) * grad, axis=-1)

    def col(d):
        return linalg_matrix_ops._adj(d) if d.dtype.is_complex else array_ops.transpose(
            d, manip_ops.concat([reduction_ops.range(array_ops.rank(d) - 2),
                                 [array_ops.rank(d) - 1, array_ops.rank(d) - 2]], 0)
        )  # fmt: skip

    grad_rhs = _shift(col(sup) * grad, 1) + col(main) * grad + _shift(col(sub) * grad, -1)
    return [
        array_ops.expand_dims(grad_sup, -2),
        array_ops.expand_dims(grad_main, -2),
        array_ops.expand_dims(grad_sub, -2),
        grad_rhs,
    ]


# -- builders -------------------------------------------------------------------------


def _compact(diagonals, diagonals_format):
    if diagonals_format == "compact":
        return ops.convert_to_tensor(diagonals, name="diagonals")
    if diagonals_format == "sequence":
        if not isinstance(diagonals, tuple | list) or len(diagonals) != 3:
            raise ValueError("Expected diagonals to be a sequence of length 3.")
        sup, main, sub = (ops.convert_to_tensor(d) for d in diagonals)
        m = main.shape.dims[-1] if main.shape.ndims else None

        def pad(t, name, padding):
            n = t.shape.dims[-1] if t.shape.ndims else None
            if not n or n == m:
                return t
            if m is not None and n == m - 1:
                return manip_ops.pad(t, [[0, 0]] * (t.shape.ndims - 1) + [padding])
            raise ValueError(f"Expected {name} to be have length {m} or {m - 1}, got {n}.")

        sub = pad(sub, "subdiagonal", [1, 0])
        sup = pad(sup, "superdiagonal", [0, 1])
        return manip_ops.stack([sup, main, sub], axis=-2)
    if diagonals_format == "matrix":
        diagonals = ops.convert_to_tensor(diagonals, name="diagonals")
        s = diagonals.shape
        m1, m2 = (s.dims[-1], s.dims[-2]) if s.ndims else (None, None)
        if m1 and m2 and m1 != m2:
            raise ValueError(
                f"Expected last two dimensions of diagonals to be same, got {m1} and {m2}"
            )
        return linalg_matrix_ops.matrix_diag_part(
            diagonals, k=(-1, 1), padding_value=0.0, align="LEFT_RIGHT"
        )
    raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False,
                      conjugate_rhs=False, name=None, partial_pivoting=True,
                      perturb_singular=False):  # fmt: skip
    """`tf.linalg.tridiagonal_solve`: X with A @ X = rhs for tridiagonal A (rhs [..., M, K],
    or [..., M] for one right-hand side).

    A singular matrix gives NaN (TF 2.21 logs a warning and does the same).

    Raises:
      ValueError: at build time, for an unknown format or mismatched shapes.
    """
    with ops.name_scope(name, "tridiagonal_solve", [rhs]):
        diagonals = _compact(diagonals, diagonals_format)
        rhs = ops.convert_to_tensor(rhs, name="rhs", dtype=diagonals.dtype)
        dr, rr = diagonals.shape.ndims, rhs.shape.ndims
        if dr is not None:
            if dr < 2:
                raise ValueError(f"Expected diagonals to have rank at least 2, got {dr}")
            if rr is not None and rr not in (dr, dr - 1):
                raise ValueError(f"Expected the rank of rhs to be {dr - 1} or {dr}, got {rr}")
        if dr is not None and diagonals.shape.dims[-2] not in (None, 3):
            raise ValueError(f"Expected 3 diagonals got {diagonals.shape.dims[-2]}")
        attrs = {"partial_pivoting": bool(partial_pivoting),
                 "perturb_singular": bool(perturb_singular)}  # fmt: skip
        conj = math_ops.conj if rhs.dtype.is_complex else (lambda t: t)
        if dr is not None and rr == dr - 1:
            if conjugate_rhs:
                rhs = conj(rhs)
            rhs = array_ops.expand_dims(rhs, -1)
            out = ops.apply_op("TridiagonalSolve", [diagonals, rhs], attrs).outputs[0]
            return array_ops.squeeze(out, [-1])
        if transpose_rhs:
            rhs = linalg_matrix_ops._adj(rhs) if conjugate_rhs else array_ops.transpose(
                rhs, manip_ops.concat([reduction_ops.range(array_ops.rank(rhs) - 2),
                                       [array_ops.rank(rhs) - 1, array_ops.rank(rhs) - 2]], 0)
            )  # fmt: skip
        elif conjugate_rhs:
            rhs = conj(rhs)
        return ops.apply_op("TridiagonalSolve", [diagonals, rhs], attrs).outputs[0]


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """`tf.linalg.tridiagonal_matmul`: A @ rhs for tridiagonal A (TridiagonalMatMul)."""
    with ops.name_scope(name, "tridiagonal_matmul", [rhs]):
        if diagonals_format == "sequence":
            sup, main, sub = (ops.convert_to_tensor(d) for d in diagonals)
        else:
            d = _compact(diagonals, diagonals_format)
            sup, main, sub = d[..., 0, :], d[..., 1, :], d[..., 2, :]
        return ops.apply_op(
            "TridiagonalMatMul",
            [array_ops.expand_dims(sup, -2), array_ops.expand_dims(main, -2),
             array_ops.expand_dims(sub, -2), rhs],
        ).outputs[0]  # fmt: skip
