"""TF 2.21's LinearOperatorFullMatrix (over a dense [batch] matrix),
LinearOperatorHouseholder (a reflection: a rank-one update of the identity) and
LinearOperatorPermutation (a gather of rows).  See linalg_operator.py for the base class.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, math_composites_2
from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow import linalg_operator_util as lou
from asyncflow.ops import (
    array_ops,
    cast_ops,
    framework_ops,
    linalg_matrix_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    matmul_ops,
    nn_impl,
    reduction_ops,
    slicing_ops,
)

__all__ = ["LinearOperatorFullMatrix", "LinearOperatorHouseholder", "LinearOperatorPermutation"]


_FULL_MATRIX_DTYPES = [dtypes.float16, dtypes.float32, dtypes.float64, dtypes.complex64]
_FULL_MATRIX_DTYPES.append(dtypes.complex128)


class LinearOperatorFullMatrix(lo.LinearOperator):
    """An operator over a dense [batch] matrix.

    Raises:
      TypeError: matrix's dtype is not float16/32/64 or complex64/128.
      ValueError: matrix has fewer than 2 dimensions.
    """

    def __init__(
        self,
        matrix,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorFullMatrix",
    ):
        parameters = dict(
            matrix=matrix,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[matrix]):
            self._matrix = lou.to_tensor(matrix, name="matrix")
            if self._matrix.dtype.base_dtype not in _FULL_MATRIX_DTYPES:
                raise TypeError(
                    f"Argument `matrix` must have dtype in {_FULL_MATRIX_DTYPES}. "
                    f"Received: {self._matrix.dtype.base_dtype}."
                )
            if self._matrix.shape.ndims is not None and self._matrix.shape.ndims < 2:
                raise ValueError(
                    f"Argument `matrix` must have at least 2 dimensions. Received: {self._matrix}."
                )
            super().__init__(
                dtype=self._matrix.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )

    @property
    def matrix(self):
        return self._matrix

    def _shape(self):
        return self._matrix.shape

    def _shape_tensor(self):
        return array_ops.shape(self._matrix)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return matmul_ops.matmul(self._matrix, x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _to_dense(self):
        return ops.convert_to_tensor(self._matrix)


# -- Householder, Permutation -----------------------------------------------------------


class LinearOperatorHouseholder(lo.LinearOperator):
    """The reflection `I - 2 v v^H / |v|^2` through the hyperplane orthogonal to v.

    Raises:
      ValueError: reflection_axis has no dimension, or a hint other than self-adjoint,
        not positive definite, square.
    """

    def __init__(
        self,
        reflection_axis,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorHouseholder",
    ):
        parameters = dict(
            reflection_axis=reflection_axis,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[reflection_axis]):
            self._reflection_axis = lou.to_tensor(reflection_axis, name="reflection_axis")
            axis = self._reflection_axis
            if axis.shape.ndims is not None and axis.shape.ndims < 1:
                raise ValueError(
                    f"Argument reflection_axis must have at least 1 dimension.  Found: {axis}"
                )
            if is_self_adjoint is False:
                raise ValueError("A Householder operator is always self adjoint.")
            if is_positive_definite is True:
                raise ValueError("A Householder operator is always non-positive definite.")
            if is_square is False:
                raise ValueError("A Householder operator is always square.")
            super().__init__(
                dtype=axis.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=True,
                is_positive_definite=False,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    @property
    def reflection_axis(self):
        return self._reflection_axis

    def _shape(self):
        shape = self._reflection_axis.shape
        return shape.concatenate(shape[-1:])

    def _shape_tensor(self):
        shape = array_ops.shape(self._reflection_axis)
        return manip_ops.concat([shape, shape[-1:]], 0)

    def _assert_non_singular(self):
        return lou.no_op("assert_non_singular")

    def _assert_positive_definite(self):
        raise errors.InvalidArgumentError(
            None, None, "Householder operators are always non-positive definite."
        )

    def _assert_self_adjoint(self):
        return lou.no_op("assert_self_adjoint")

    def _linop_adjoint(self):
        return self

    def _linop_inverse(self):
        return self

    def _unit_axis(self):
        v = ops.convert_to_tensor(self.reflection_axis)
        if not v.dtype.is_complex:
            return nn_impl.l2_normalize(v, axis=-1)
        # |v|^2 from the real and imaginary parts, as TF's l2_normalize of a complex v
        re, im = math_special_ops.real(v), math_special_ops.imag(v)
        sq = reduction_ops.reduce_sum(re * re + im * im, axis=-1, keepdims=True)
        inv = math_ops.rsqrt(math_ops.maximum(sq, 1e-12))
        return math_special_ops.complex(re * inv, im * inv)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        v = array_ops.expand_dims(self._unit_axis(), -1)
        return x - 2 * v * matmul_ops.matmul(v, x, adjoint_a=True)

    def _trace(self):
        shape = self.shape_tensor()
        n = cast_ops.cast(self._domain_dimension_tensor(shape=shape) - 2, self.dtype)
        return n * array_ops.ones(self._batch_shape_tensor(shape=shape), dtype=self.dtype)

    def _determinant(self):
        return -array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint, adjoint_arg)

    def _to_dense(self):
        v = array_ops.expand_dims(self._unit_axis(), -1)
        m = -2 * matmul_ops.matmul(v, v, adjoint_b=True)
        return linalg_matrix_ops.matrix_set_diag(m, 1.0 + linalg_matrix_ops.matrix_diag_part(m))

    def _diag_part(self):
        v = self._unit_axis()
        return 1.0 - 2 * v * lou.conj(v)

    def _eigvals(self):
        shape = array_ops.shape(self.reflection_axis)
        n = shape[-1]
        ones = array_ops.ones(manip_ops.concat([shape[:-1], [n - 1]], -1), dtype=self.dtype)
        neg = -array_ops.ones(manip_ops.concat([shape[:-1], [1]], -1), dtype=self.dtype)
        return manip_ops.concat([neg, ones], -1)

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)


class LinearOperatorPermutation(lo.LinearOperator):
    """The [batch] permutation matrix P with `P @ x = x[perm]` (rows gathered).

    Raises:
      TypeError: perm is not integer.
      ValueError: perm has no dimension, is statically not a permutation of 0..n-1, or
        is_non_singular / is_square is False.
    """

    def __init__(
        self,
        perm,
        dtype=dtypes.float32,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorPermutation",
    ):
        parameters = dict(
            perm=perm,
            dtype=dtype,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[perm]):
            self._perm = lou.to_tensor(perm, name="perm")
            self._check_perm(self._perm)
            if is_non_singular is False:
                raise ValueError(
                    "A Permutation operator is always non-singular. Expected argument "
                    f"`is_non_singular` to be True. Received: {is_non_singular}."
                )
            if is_square is False:
                raise ValueError(
                    "A Permutation operator is always square. Expected argument `is_square` "
                    f"to be True. Received: {is_square}."
                )
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    def _check_perm(self, perm):
        if perm.shape.ndims is not None and perm.shape.ndims < 1:
            raise ValueError(f"Argument `perm` must have at least 1 dimension. Received: {perm}.")
        if not perm.dtype.is_integer:
            raise TypeError(f"Argument `perm` must be integer dtype. Received: {perm}.")
        static = lou.static_value(perm)
        if static is not None:
            n = static.shape[-1]
            if np.any(np.sort(static, axis=-1) != np.arange(n)):
                raise ValueError(
                    f"Argument `perm` must be a vector of unique integers from 0 to {n - 1}."
                )

    @property
    def perm(self):
        return self._perm

    def _shape(self):
        shape = self._perm.shape
        return shape.concatenate(shape[-1:])

    def _shape_tensor(self):
        shape = array_ops.shape(self._perm)
        return manip_ops.concat([shape, shape[-1:]], 0)

    def _assert_non_singular(self):
        return lou.no_op("assert_non_singular")

    def _domain_dimension_tensor(self, perm=None):
        perm = self.perm if perm is None else perm
        return array_ops.shape(perm)[-1]

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        perm = ops.convert_to_tensor(self.perm)
        if adjoint and not self.is_self_adjoint:
            perm = math_composites_2.argsort(perm, axis=-1)
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        static_x_shape = x.shape
        shape = framework_ops.broadcast_dynamic_shape(
            array_ops.shape(x)[:-1], array_ops.shape(perm)
        )
        k = array_ops.shape(x)[-1:]
        x_shape = manip_ops.concat([shape, k], -1)
        x = manip_ops.broadcast_to(x, x_shape)
        perm = manip_ops.broadcast_to(perm, shape)
        m = array_ops.shape(x)[-2]
        x = array_ops.reshape(x, manip_ops.stack([-1, m, k[0]]))
        perm = array_ops.reshape(perm, manip_ops.stack([-1, m]))
        y = array_ops.reshape(slicing_ops.gather(x, perm, axis=-2, batch_dims=1), x_shape)
        # (the reshape by a computed shape leaves the static one to be stated, which TF
        # infers when both shapes are known)
        if static_x_shape.is_fully_defined() and self.perm.shape.is_fully_defined():
            rows = framework_ops.broadcast_static_shape(static_x_shape[:-1], self.perm.shape)
            y.set_shape(rows.concatenate(static_x_shape[-1:]))
        return y

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _to_dense(self):
        perm = ops.convert_to_tensor(self.perm)
        n = self._domain_dimension_tensor(perm)
        hits = math_ops.equal(reduction_ops.range(0, n), array_ops.expand_dims(perm, -1))
        return cast_ops.cast(hits, self.dtype)

    def _diag_part(self):
        perm = ops.convert_to_tensor(self.perm)
        n = self._domain_dimension_tensor(perm)
        return cast_ops.cast(math_ops.equal(reduction_ops.range(0, n), perm), self.dtype)

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)
