"""`tf.linalg.eigh_tridiagonal`: eigenvalues (and eigenvectors) of a Hermitian
tridiagonal matrix given its diagonal `alpha` and superdiagonal `beta` (the
subdiagonal is conj(beta)), with TF 2.21's arguments, selections and errors.

TF bisects Sturm counts for the eigenvalues and runs inverse iteration for the
vectors; here the matrix is formed and handed to SelfAdjointEigV2, so the eigenvalues
agree with TF's to its tolerance, the eigenvectors agree up to each one's phase (TF's
inverse iteration leaves that arbitrary too), and the gradient is the eigenvalue
derivative |v_i|^2 (TF's, taken through its bisection bounds, is not).  Forming the
matrix costs O(n^2) memory.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    linalg_matrix_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    partition_ops,
    reduction_ops,
    slicing_ops,
)

__all__ = ["eigh_tridiagonal"]


def _dense(alpha, beta):
    """The Hermitian tridiagonal matrix: alpha on the diagonal, beta above, conj below."""
    zero = array_ops.zeros([1], dtype=beta.dtype)
    sub = math_ops.conj(beta) if beta.dtype.is_complex else beta
    diagonals = manip_ops.stack(
        [manip_ops.concat([beta, zero], 0), alpha, manip_ops.concat([zero, sub], 0)], 0
    )
    return linalg_matrix_ops.matrix_diag(
        diagonals, k=(-1, 1), num_rows=-1, num_cols=-1, align="LEFT_RIGHT", padding_value=0
    )


def _select(values, vectors, select, select_range, n, real_dtype):
    """The selected eigenvalues (ascending) and their vectors (columns)."""
    if select == "a":
        return values, vectors
    if select == "i":
        lo = ops.convert_to_tensor(select_range[0], dtype=dtypes.int32)
        hi = ops.convert_to_tensor(select_range[1], dtype=dtypes.int32)
        check = check_ops.assert_less_equal(
            lo, hi, message="Got empty index range in select_range."
        )
        with ops.control_dependencies([check]):
            index = reduction_ops.range(lo, hi + 1)
        return slicing_ops.gather(values, index), slicing_ops.gather(vectors, index, axis=1)
    vl = ops.convert_to_tensor(select_range[0], dtype=real_dtype)
    vu = ops.convert_to_tensor(select_range[1], dtype=real_dtype)
    check = check_ops.assert_less(vl, vu, message="Got empty interval in select_range.")
    # TF widens the interval by its bisection slack: n * 2.1 * eps * |T|.
    eps = np.finfo(real_dtype.as_numpy_dtype).eps
    slack = (
        cast_ops.cast(n, real_dtype) * 2.1 * eps * reduction_ops.reduce_max(math_ops.abs(values))
    )
    with ops.control_dependencies([check]):
        keep = math_ops.logical_and(values >= vl - slack, values < vu + slack)
    return (
        partition_ops.boolean_mask(values, keep),
        array_ops.transpose(partition_ops.boolean_mask(array_ops.transpose(vectors), keep)),
    )


def eigh_tridiagonal(
    alpha, beta, eigvals_only=True, select="a", select_range=None, tol=None, name=None
):
    """Eigenvalues (ascending) of the Hermitian tridiagonal matrix with diagonal alpha
    (length n; its real part) and superdiagonal beta (length n - 1), and with
    eigvals_only=False the eigenvectors as columns.  select: 'a' all, 'i' the indices
    select_range[0]..select_range[1], 'v' those in the interval select_range.  An n <= 1
    matrix gives real(alpha) alone, as TF does.  `tol` (TF's bisection tolerance) has
    nothing to tune here.

    Raises:
      ValueError: alpha and beta of different dtypes, or an unknown `select`.
      InvalidArgumentError: (when run) an empty select_range.
    """
    del tol
    with ops.name_scope(name or "eigh_tridiagonal"):
        alpha = ops.convert_to_tensor(alpha, name="alpha")
        n = alpha.shape[0].value
        if n is not None and n <= 1:
            return math_special_ops.real(alpha) if alpha.dtype.is_complex else alpha
        beta = ops.convert_to_tensor(beta, name="beta")
        if alpha.dtype != beta.dtype:
            raise ValueError("'alpha' and 'beta' must have the same type.")
        if select not in ("a", "i", "v"):
            raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
        real_dtype = alpha.dtype.real_dtype
        if alpha.dtype.is_complex:
            alpha = cast_ops.cast(math_special_ops.real(alpha), alpha.dtype)
        values, vectors = linalg_matrix_ops.self_adjoint_eig(_dense(alpha, beta))
        if values.dtype.is_complex:
            values = math_special_ops.real(values)
        size = n if n is not None else array_ops.shape(alpha)[0]
        values, vectors = _select(values, vectors, select, select_range, size, real_dtype)
        if eigvals_only:
            return values
        return values, vectors
