"""`tf.linalg`'s composites over the LU factorization and the SVD, built as TF 2.21
builds them (linalg_impl.py): lu_reconstruct, lu_solve, lu_matrix_inverse, pinv,
matrix_rank, `normalize` and `expm` (a while loop of squarings).  They differentiate
like any graph where their ops do (pinv's SVD gradient through u and v is not
implemented here: see linalg_matrix_ops).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_cond,
    control_flow_contexts,
    linalg_matrix_ops,
    linalg_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    reduction_ops,
    scatter_nd_ops,
    slicing_ops,
)

__all__ = [
    "lu_matrix_inverse",
    "lu_reconstruct",
    "lu_solve",
    "expm",
    "matrix_rank",
    "normalize",
    "pinv",
]


def _lower_upper(lower_upper):
    shape = array_ops.shape(lower_upper)
    lower = linalg_matrix_ops.matrix_set_diag(
        linalg_matrix_ops.matrix_band_part(lower_upper, -1, 0),
        array_ops.ones(shape[:-1], dtype=lower_upper.dtype),
    )
    return lower, linalg_matrix_ops.matrix_band_part(lower_upper, 0, -1)


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """The matrix whose `tf.linalg.lu` is (lower_upper, perm): P^-1 @ L @ U."""
    del validate_args
    with ops.name_scope(name, "lu_reconstruct", [lower_upper, perm]):
        lower_upper = ops.convert_to_tensor(lower_upper, name="lower_upper")
        perm = ops.convert_to_tensor(perm, name="perm")
        lower, upper = _lower_upper(lower_upper)
        x = matmul_ops.matmul(lower, upper)
        if lower_upper.shape.ndims == 2:
            return slicing_ops.gather(x, ops.apply_op("InvertPermutation", [perm]).outputs[0])
        # A batch: row i of each product goes back to row perm[i] (TF gathers by the
        # inverted permutation; a scatter by the permutation puts the same rows there).
        shape = array_ops.shape(lower_upper)
        batch = reduction_ops.reduce_prod(shape[:-2])
        d = shape[-1]
        x = array_ops.reshape(x, manip_ops.stack([batch, d, d]))
        perm = cast_ops.cast(array_ops.reshape(perm, manip_ops.stack([batch, d])), dtypes.int32)
        rows = manip_ops.broadcast_to(
            array_ops.expand_dims(reduction_ops.range(batch), -1), manip_ops.stack([batch, d])
        )
        index = manip_ops.stack([rows, perm], axis=-1)
        x = scatter_nd_ops.scatter_nd(index, x, array_ops.shape(x))
        return array_ops.reshape(x, shape)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """X with A @ X = rhs, A given by its `tf.linalg.lu` (lower_upper, perm)."""
    del validate_args
    with ops.name_scope(name, "lu_solve", [lower_upper, perm, rhs]):
        lower_upper = ops.convert_to_tensor(lower_upper, name="lower_upper")
        perm = ops.convert_to_tensor(perm, name="perm")
        rhs = ops.convert_to_tensor(rhs, name="rhs", dtype=lower_upper.dtype)
        if rhs.shape.ndims == 2 and perm.shape.ndims == 1:
            permuted = slicing_ops.gather(rhs, perm, axis=-2)
        else:
            rhs_shape = array_ops.shape(rhs)
            batch_shape = ops.apply_op(
                "BroadcastArgs", [rhs_shape[:-2], array_ops.shape(perm)[:-1]]
            ).outputs[0]
            d, m = rhs_shape[-2], rhs_shape[-1]
            full = manip_ops.concat([batch_shape, manip_ops.stack([d, m])], 0)
            b_rhs = array_ops.reshape(manip_ops.broadcast_to(rhs, full), [-1, d, m])
            b_perm = array_ops.reshape(manip_ops.broadcast_to(perm, full[:-1]), [-1, d])
            size = reduction_ops.reduce_prod(batch_shape)
            rows = manip_ops.broadcast_to(
                array_ops.expand_dims(reduction_ops.range(size), -1), manip_ops.stack([size, d])
            )
            b_perm = manip_ops.stack([rows, cast_ops.cast(b_perm, dtypes.int32)], axis=-1)
            permuted = array_ops.reshape(scatter_nd_ops.gather_nd(b_rhs, b_perm), full)
        lower, _ = _lower_upper(lower_upper)
        y = linalg_matrix_ops.matrix_triangular_solve(lower, permuted)
        return linalg_matrix_ops.matrix_triangular_solve(lower_upper, y, lower=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """The inverse of A given by its `tf.linalg.lu` (lower_upper, perm)."""
    del validate_args
    with ops.name_scope(name, "lu_matrix_inverse", [lower_upper, perm]):
        lower_upper = ops.convert_to_tensor(lower_upper, name="lower_upper")
        shape = array_ops.shape(lower_upper)
        eye = ops.apply_op(
            "MatrixDiag", [array_ops.ones(shape[:-1], dtype=lower_upper.dtype)]
        ).outputs[0]
        return lu_solve(lower_upper, perm, eye)


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse by the SVD, singular values at most rcond times
    the largest taken as 0 (rcond default 10 * max(rows, cols) * eps, as TF)."""
    del validate_args
    with ops.name_scope(name, "pinv", [a, rcond]):
        a = ops.convert_to_tensor(a, name="a")
        if not a.dtype.is_floating:
            raise TypeError(f"Input `a` must have `float`-like `dtype` (saw {a.dtype.name}).")
        dtype = a.dtype.as_numpy_dtype
        if rcond is None:
            rows, cols = a.shape.dims[-2:] if a.shape.ndims is not None else (None, None)
            if rows is not None and cols is not None:
                size = float(max(rows, cols))
            else:
                shape = array_ops.shape(a)
                size = cast_ops.cast(math_ops.maximum(shape[-2], shape[-1]), a.dtype)
            rcond = 10.0 * size * np.finfo(dtype).eps
        rcond = ops.convert_to_tensor(rcond, dtype=a.dtype, name="rcond")
        s, u, v = linalg_matrix_ops.svd(a, full_matrices=False, compute_uv=True)
        cutoff = rcond * reduction_ops.reduce_max(s, axis=-1)
        s = ops.apply_op(
            "SelectV2",
            [math_ops.greater(s, array_ops.expand_dims(cutoff, -1)), s, np.array(np.inf, dtype)],
        ).outputs[0]
        return matmul_ops.matmul(v / array_ops.expand_dims(s, -2), u, adjoint_b=True)


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """The number of singular values above `tol` (default eps * max(rows, cols) * the
    largest singular value, as TF)."""
    del validate_args
    with ops.name_scope(name, "matrix_rank", [a, tol]):
        a = ops.convert_to_tensor(a, name="a")
        if not a.dtype.is_floating and not a.dtype.is_complex:
            a = cast_ops.cast(a, dtypes.float32)
        s = linalg_matrix_ops.svd(a, compute_uv=False)
        if tol is None:
            dims = a.shape.dims[-2:] if a.shape.ndims is not None else [None, None]
            if None not in dims:
                m = max(dims)
            else:
                m = reduction_ops.reduce_max(array_ops.shape(a)[-2:])
            eps = np.finfo(a.dtype.as_numpy_dtype).eps
            tol = (
                eps
                * cast_ops.cast(m, s.dtype)
                * reduction_ops.reduce_max(s, axis=-1, keepdims=True)
            )
        return reduction_ops.reduce_sum(
            cast_ops.cast(math_ops.greater(s, tol), dtypes.int32), axis=-1
        )


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002 - TF's name
    """(tensor / its norm, the norm) with the norm kept in the reduced axes."""
    with ops.name_scope(name, "normalize", [tensor]):
        tensor = ops.convert_to_tensor(tensor)
        norm = linalg_ops.norm(tensor, ord, axis, keepdims=True)
        norm = cast_ops.cast(norm, tensor.dtype)
        return tensor / norm, norm


# -- expm (TF's Pade approximation with scaling and squaring) -------------------------------

_PADE = {
    3: [120.0, 60.0, 12.0],
    5: [30240.0, 15120.0, 3360.0, 420.0, 30.0],
    7: [17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0],
    9: [17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0],
    13: [64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
         1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
         33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0],
}  # fmt: skip


def _pade(matrix, order):
    """(U, V) of TF's degree-`order` Pade approximant of exp(matrix)."""
    b = [ops.convert_to_tensor(x, matrix.dtype) for x in _PADE[order]]
    shape = array_ops.shape(matrix)
    ident = ops.apply_op("MatrixDiag", [array_ops.ones(shape[:-1], dtype=matrix.dtype)]).outputs[0]
    mm = matmul_ops.matmul
    m2 = mm(matrix, matrix)
    if order == 3:
        return mm(matrix, m2 + b[1] * ident), b[2] * m2 + b[0] * ident
    m4 = mm(m2, m2)
    if order == 5:
        u = mm(matrix, m4 + b[3] * m2 + b[1] * ident)
        return u, b[4] * m4 + b[2] * m2 + b[0] * ident
    m6 = mm(m4, m2)
    if order == 7:
        u = mm(matrix, m6 + b[5] * m4 + b[3] * m2 + b[1] * ident)
        return u, b[6] * m6 + b[4] * m4 + b[2] * m2 + b[0] * ident
    if order == 9:
        m8 = mm(m6, m2)
        u = mm(matrix, m8 + b[7] * m6 + b[5] * m4 + b[3] * m2 + b[1] * ident)
        v = b[8] * m8 + b[6] * m6 + b[4] * m4 + b[2] * m2 + b[0] * ident
        return u, v
    tmp_u = mm(m6, m6 + b[11] * m4 + b[9] * m2) + b[7] * m6 + b[5] * m4 + b[3] * m2 + b[1] * ident
    tmp_v = b[12] * m6 + b[10] * m4 + b[8] * m2
    v = mm(m6, tmp_v) + b[6] * m6 + b[4] * m4 + b[2] * m2 + b[0] * ident
    return mm(matrix, tmp_u), v


def expm(input, name=None):  # noqa: A002 - TF's name
    """`tf.linalg.expm`: the matrix exponential, as TF computes it (a Pade approximant of
    degree 3-7 (float32) or 3-13 (float64) chosen by the 1-norm, scaling and squaring;
    NaN for a non-finite input).

    Raises:
      ValueError: for a dtype other than float16/32/64 or complex64/128.
    """
    with ops.name_scope(name, "matrix_exponential", [input]):
        matrix = ops.convert_to_tensor(input, name="input")
        if matrix.shape.ndims is not None and matrix.shape.as_list()[-2:] == [0, 0]:
            return matrix
        batch_shape = array_ops.shape(matrix)[:-2]
        matrix = array_ops.reshape(
            matrix, manip_ops.concat(([-1], array_ops.shape(matrix)[-2:]), axis=0)
        )
        l1 = reduction_ops.reduce_max(
            reduction_ops.reduce_sum(math_ops.abs(matrix), axis=1), axis=-1
        )
        l1 = array_ops.expand_dims(array_ops.expand_dims(l1, -1), -1)

        def const(x):
            return ops.convert_to_tensor(x, l1.dtype)

        def nest_where(vals, cases):
            rest = cases[1] if len(vals) == 1 else nest_where(vals[1:], cases[1:])
            return ops.apply_op(
                "SelectV2", [math_ops.less(l1, const(vals[0])), cases[0], rest]
            ).outputs[0]

        def squarings_for(maxnorm):
            return math_ops.maximum(
                math_ops.floor(math_ops.log(l1 / const(maxnorm)) / math_ops.log(const(2.0))), 0
            )

        def scaled(s):
            return matrix / cast_ops.cast(math_ops.pow(const(2.0), s), matrix.dtype)

        if matrix.dtype in (dtypes.float16, dtypes.float32, dtypes.complex64):
            squarings = squarings_for(3.925724783138660)
            pairs = [_pade(matrix, 3), _pade(matrix, 5), _pade(scaled(squarings), 7)]
            conds = (4.258730016922831e-001, 1.880152677804762e000)
        elif matrix.dtype in (dtypes.float64, dtypes.complex128):
            squarings = squarings_for(5.371920351148152)
            pairs = [_pade(matrix, 3), _pade(matrix, 5), _pade(matrix, 7), _pade(matrix, 9),
                     _pade(scaled(squarings), 13)]  # fmt: skip
            conds = (1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                     2.097847961257068e000)  # fmt: skip
        else:
            raise ValueError(f"tf.linalg.expm does not support matrices of type {matrix.dtype}")
        u = nest_where(conds, [p[0] for p in pairs])
        v = nest_where(conds, [p[1] for p in pairs])
        finite = ops.apply_op("IsFinite", [reduction_ops.reduce_max(l1)]).outputs[0]
        nan = ops.convert_to_tensor(np.nan, matrix.dtype)
        result = control_flow_cond.cond(
            finite,
            lambda: linalg_matrix_ops.matrix_solve(-u + v, u + v),
            lambda: ops.apply_op("Fill", [array_ops.shape(matrix), nan]).outputs[0],
        )
        max_squarings = reduction_ops.reduce_max(squarings)

        def c(i, _):
            return control_flow_cond.cond(
                finite, lambda: math_ops.less(i, max_squarings),
                lambda: ops.convert_to_tensor(False),
            )  # fmt: skip

        def b(i, r):
            squared = ops.apply_op(
                "SelectV2", [math_ops.less(i, squarings), matmul_ops.matmul(r, r), r]
            ).outputs[0]
            return i + 1, squared

        _, result = control_flow_contexts.while_loop(c, b, [const(0.0), result])
        return array_ops.reshape(
            result, manip_ops.concat((batch_shape, array_ops.shape(result)[-2:]), axis=0)
        )
