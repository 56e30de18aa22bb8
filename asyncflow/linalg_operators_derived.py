"""TF 2.21's LinearOperatorAdjoint and LinearOperatorInversion: the operators a
LinearOperator's `adjoint()` and `inverse()` return (registered with the base class at
import), acting through the wrapped operator's own methods: the adjoint's matmul is the
operator's adjoint matmul, the inverse's matmul the operator's solve.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow.linalg_operator_util import adjoint_tensor, combine_hint, conj
from asyncflow.ops import manip_ops

__all__ = ["LinearOperatorAdjoint", "LinearOperatorInversion"]


class LinearOperatorAdjoint(lo.LinearOperator):
    """The adjoint of an operator, acting through the operator's own methods.

    Raises:
      ValueError: a hint contradicting the operator's.
    """

    def __init__(
        self,
        operator,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name=None,
    ):
        parameters = dict(
            operator=operator,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        self._operator = operator
        msg = "An operator is {} if and only if its adjoint is {}."
        is_square = combine_hint(operator, "is_square", is_square, msg.format("square", "square"))
        is_non_singular = combine_hint(
            operator, "is_non_singular", is_non_singular, msg.format(*["non-singular"] * 2)
        )
        is_self_adjoint = combine_hint(
            operator, "is_self_adjoint", is_self_adjoint, msg.format(*["self-adjoint"] * 2)
        )
        is_positive_definite = combine_hint(
            operator,
            "is_positive_definite",
            is_positive_definite,
            msg.format(*["positive-definite"] * 2),
        )
        if name is None:
            name = operator.name + "_adjoint"
        with ops.name_scope(name):
            super().__init__(
                dtype=operator.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )

    @property
    def operator(self):
        return self._operator

    def _linop_adjoint(self):
        return self.operator

    def _assert_non_singular(self):
        return self.operator.assert_non_singular()

    def _assert_positive_definite(self):
        return self.operator.assert_positive_definite()

    def _assert_self_adjoint(self):
        return self.operator.assert_self_adjoint()

    def _shape(self):
        shape = self.operator.shape
        return shape[:-2].concatenate([shape[-1], shape[-2]])

    def _shape_tensor(self):
        shape = self.operator.shape_tensor()
        return manip_ops.concat([shape[:-2], manip_ops.stack([shape[-1], shape[-2]])], -1)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self.operator.matmul(x, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return self.operator.matvec(x, adjoint=not adjoint)

    def _determinant(self):
        if self.is_self_adjoint:
            return self.operator.determinant()
        return conj(self.operator.determinant())

    def _log_abs_determinant(self):
        return self.operator.log_abs_determinant()

    def _trace(self):
        if self.is_self_adjoint:
            return self.operator.trace()
        return conj(self.operator.trace())

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self.operator.solve(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _solvevec(self, rhs, adjoint=False):
        return self.operator.solvevec(rhs, adjoint=not adjoint)

    def _to_dense(self):
        if self.is_self_adjoint:
            return self.operator.to_dense()
        return adjoint_tensor(self.operator.to_dense())

    def _eigvals(self):
        values = self.operator.eigvals()
        return values if self.operator.is_self_adjoint else conj(values)

    def _cond(self):
        return self.operator.cond()


class LinearOperatorInversion(lo.LinearOperator):
    """The inverse of an operator: its matmul is the operator's solve and back.

    Raises:
      ValueError: the operator (or the hint) is singular or not square, or a hint
        contradicts the operator's.
    """

    def __init__(
        self,
        operator,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name=None,
    ):
        parameters = dict(
            operator=operator,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        self._operator = operator
        if operator.is_non_singular is False or is_non_singular is False:
            raise ValueError(
                "Argument `is_non_singular` or argument `operator` must have supplied hint "
                "`is_non_singular` equal to `True` or `None`. Found `operator.is_non_singular`"
                f": {operator.is_non_singular}, `is_non_singular`: {is_non_singular}."
            )
        if operator.is_square is False or is_square is False:
            raise ValueError(
                "Argument `is_square` or argument `operator` must have supplied hint "
                f"`is_square` equal to `True` or `None`. Found `operator.is_square`: "
                f"{operator.is_square}, `is_square`: {is_square}."
            )
        msg = "An operator is {0} if and only if its inverse is {0}."
        is_square = combine_hint(operator, "is_square", is_square, msg.format("square"))
        is_non_singular = combine_hint(
            operator, "is_non_singular", is_non_singular, msg.format("non-singular")
        )
        is_self_adjoint = combine_hint(
            operator, "is_self_adjoint", is_self_adjoint, msg.format("self-adjoint")
        )
        is_positive_definite = combine_hint(
            operator, "is_positive_definite", is_positive_definite, msg.format("positive-definite")
        )
        if name is None:
            name = operator.name + "_inv"
        with ops.name_scope(name):
            super().__init__(
                dtype=operator.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )

    @property
    def operator(self):
        return self._operator

    def _linop_inverse(self):
        return self.operator

    def _linop_solve(self, left, right):
        return left.operator.matmul(right)

    def _assert_non_singular(self):
        return self.operator.assert_non_singular()

    def _assert_positive_definite(self):
        return self.operator.assert_positive_definite()

    def _assert_self_adjoint(self):
        return self.operator.assert_self_adjoint()

    def _shape(self):
        return self.operator.shape

    def _shape_tensor(self):
        return self.operator.shape_tensor()

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self.operator.solve(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _determinant(self):
        return 1.0 / self.operator.determinant()

    def _log_abs_determinant(self):
        return -1.0 * self.operator.log_abs_determinant()

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self.operator.matmul(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _eigvals(self):
        return 1.0 / self.operator.eigvals()

    def _cond(self):
        return self.operator.cond()


lo._DERIVED.update(adjoint=LinearOperatorAdjoint, inversion=LinearOperatorInversion)
