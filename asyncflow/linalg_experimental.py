"""`tf.linalg.experimental`: `conjugate_gradient`, TF 2.21's (preconditioned) conjugate
gradient solver for a self-adjoint positive definite LinearOperator, built as one
while_loop whose result is TF's `CGState(i, x, r, p, gamma)`.

The loop runs while i < max_iter and any batch member's residual norm exceeds
tol * norm(rhs); each step is the textbook PCG update, so `r` is the last residual,
`p` the next search direction and `gamma` = r . (M r) (M the preconditioner, or the
identity).
"""

from __future__ import annotations

import collections

from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    control_flow_contexts,
    math_ops,
    math_special_ops,
    reduction_ops,
)

__all__ = ["conjugate_gradient"]

CGState = collections.namedtuple("CGState", ["i", "x", "r", "p", "gamma"])


def _dot(a, b):
    if a.dtype.is_complex:
        a = math_ops.conj(a)
    return reduction_ops.reduce_sum(math_ops.multiply(a, b), axis=-1)


def _norm(v):
    sq = _dot(v, v)
    return math_ops.sqrt(math_special_ops.real(sq) if sq.dtype.is_complex else sq)


def conjugate_gradient(
    operator, rhs, preconditioner=None, x=None, tol=1e-5, max_iter=20, name="conjugate_gradient"
):
    """Solve `operator x = rhs` (batched over the leading dimensions) by conjugate
    gradients from `x` (zeros when None); returns CGState(i, x, r, p, gamma).

    Raises:
      ValueError: `operator` is not marked self-adjoint and positive definite.
    """
    if not (operator.is_self_adjoint and operator.is_positive_definite):
        raise ValueError("Expected a self-adjoint, positive definite operator.")
    with ops.name_scope(name):
        rhs = ops.convert_to_tensor(rhs, name="rhs", dtype=operator.dtype)
        if x is None:
            x = array_ops.zeros_like(rhs)
        else:
            x = ops.convert_to_tensor(x, name="x", dtype=rhs.dtype)
        tol = math_ops.multiply(math_ops.cast(tol, rhs.dtype.real_dtype), _norm(rhs), name="tol")

        def precondition(v):
            return v if preconditioner is None else preconditioner.matvec(v)

        r0 = math_ops.subtract(rhs, operator.matvec(x))
        p0 = precondition(r0)
        start = CGState(ops.convert_to_tensor(0, name="i"), x, r0, p0, _dot(r0, p0))

        def keep_going(i, x, r, p, gamma):
            return math_ops.logical_and(
                math_ops.less(i, max_iter),
                reduction_ops.reduce_any(math_ops.greater(_norm(r), tol)),
            )

        def step(i, x, r, p, gamma):
            z = operator.matvec(p)
            alpha = math_ops.divide(gamma, _dot(p, z))
            x = math_ops.add(x, math_ops.multiply(alpha[..., None], p))
            r = math_ops.subtract(r, math_ops.multiply(alpha[..., None], z))
            q = precondition(r)
            new_gamma = _dot(r, q)
            beta = math_ops.divide(new_gamma, gamma)
            p = math_ops.add(q, math_ops.multiply(beta[..., None], p))
            return CGState(i + 1, x, r, p, new_gamma)

        out = control_flow_contexts.while_loop(keep_going, step, start)
        return CGState(*out)
