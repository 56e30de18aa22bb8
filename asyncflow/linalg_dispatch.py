"""`tf.linalg` functions that take a LinearOperator as well as a tensor, as TF 2.21
dispatches them: adjoint, cholesky, det, diag_part, inv, logdet, solve and trace call
the operator's own method when given one (`tf.linalg.det(op)` is `op.determinant()`),
and the dense op otherwise.  TF also dispatches tf.matmul (tf.linalg.matmul is the same
function); asyncflow's does not yet (`op.matmul(x)` or `op @ x` do the same).
"""

from __future__ import annotations

import functools

from asyncflow import graph as ops
from asyncflow import math_composites
from asyncflow.linalg_operator import LinearOperator
from asyncflow.linalg_operator_util import adjoint_tensor
from asyncflow.ops import (
    linalg_matrix_ops,
    math_more_ops,
    math_ops,
    math_special_ops,
    reduction_ops,
)

__all__ = ["adjoint", "cholesky", "det", "diag_part", "inv", "logdet", "solve", "trace"]


def adjoint(matrix, name=None):
    """tf.linalg.adjoint: the conjugate transpose of a [batch] matrix, or an operator's
    `adjoint()` when given a LinearOperator."""
    if isinstance(matrix, LinearOperator):
        return matrix.adjoint(name or "adjoint")
    with ops.name_scope(name, "adjoint", [matrix]):
        return adjoint_tensor(ops.convert_to_tensor(matrix, name="matrix"))


def _dispatch(dense, on_operator):
    """`dense`, unless its first argument is a LinearOperator: then `on_operator`."""

    @functools.wraps(dense)
    def wrapper(*args, **kwargs):
        if args and isinstance(args[0], LinearOperator):
            return on_operator(*args, **kwargs)
        return dense(*args, **kwargs)

    return wrapper


def _cholesky(input, name=None):  # noqa: A002 - TF's argument names
    return input.cholesky(name or "cholesky")


def _det(input, name=None):  # noqa: A002
    return input.determinant(name or "det")


def _diag_part(input, name="diag_part", k=0, padding_value=0, align="RIGHT_LEFT"):  # noqa: A002
    return input.diag_part(name)


def _inv(input, adjoint=False, name=None):  # noqa: A002
    inverse = input.inverse(name or "inverse")
    return inverse.adjoint() if adjoint else inverse


def _logdet(matrix, name=None):
    # TF runs logdet's own body first, its cholesky and diag_part dispatching to the
    # operator (so a real result, from the dense Cholesky factor's diagonal); only when
    # that raises (no Cholesky) does its dispatcher raise this.
    if not (matrix.is_positive_definite and matrix.is_self_adjoint):
        raise ValueError("Expected matrix to be self-adjoint positive definite.")
    with ops.name_scope(name, "logdet"):
        diag = matrix.cholesky().diag_part()
        if diag.dtype.is_complex:
            diag = math_special_ops.real(diag)
        return 2.0 * reduction_ops.reduce_sum(math_ops.log(diag), axis=[-1])


def _solve(matrix, rhs, adjoint=False, name=None):
    return matrix.solve(rhs, adjoint=adjoint, name=name or "solve")


def _trace(x, name=None):
    return x.trace(name or "trace")


cholesky = _dispatch(linalg_matrix_ops.cholesky, _cholesky)
det = _dispatch(linalg_matrix_ops.matrix_determinant, _det)
diag_part = _dispatch(linalg_matrix_ops.matrix_diag_part, _diag_part)
inv = _dispatch(linalg_matrix_ops.matrix_inverse, _inv)
logdet = _dispatch(math_more_ops.logdet, _logdet)
trace = _dispatch(math_composites.trace, _trace)


def solve(matrix, rhs, adjoint=False, name=None):
    """tf.linalg.solve; `matrix` may be a LinearOperator (`matrix.solve(rhs)`).

    Raises:
      ValueError: a tensor matrix with a LinearOperator rhs (as TF).
    """
    if isinstance(matrix, LinearOperator):
        return _solve(matrix, rhs, adjoint=adjoint, name=name)
    if isinstance(rhs, LinearOperator):
        raise ValueError(
            "Passing in `matrix` as a Tensor and `rhs` as a LinearOperator is not supported."
        )
    return linalg_matrix_ops.matrix_solve(matrix, rhs, adjoint=adjoint, name=name)
