"""TF 2.21's diagonal LinearOperators: Diag, Identity, ScaledIdentity and Zeros.  Each
acts without building its dense matrix: a Diag's matmul is a broadcast product and its
solve a division, an Identity's matmul returns x (broadcast to its batch shape when it
has one), a ScaledIdentity's a product with its multiplier, a Zeros' zeros of the
result's shape.  See linalg_operator.py for the base class.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, math_composites
from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow import linalg_operator_util as lou
from asyncflow import tensor_shape as ts
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    framework_ops,
    linalg_matrix_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    reduction_ops,
)

__all__ = [
    "LinearOperatorDiag",
    "LinearOperatorIdentity",
    "LinearOperatorScaledIdentity",
    "LinearOperatorZeros",
]


def _hint_args(op) -> dict:
    return {
        "is_non_singular": op.is_non_singular,
        "is_self_adjoint": op.is_self_adjoint,
        "is_positive_definite": op.is_positive_definite,
    }


class LinearOperatorDiag(lo.LinearOperator):
    """A [batch] square diagonal operator `diag(d)`; real diagonals are self-adjoint.

    Raises:
      ValueError: diag has no dimension, is_square=False, or is_self_adjoint=False for
        a real diagonal.
    """

    def __init__(
        self,
        diag,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorDiag",
    ):
        parameters = dict(
            diag=diag,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[diag]):
            self._diag = lou.to_tensor(diag, name="diag")
            self._check_diag(self._diag)
            if not self._diag.dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError("A real diagonal operator is always self adjoint.")
                is_self_adjoint = True
            if is_square is False:
                raise ValueError("Only square diagonal operators currently supported.")
            super().__init__(
                dtype=self._diag.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    def _check_diag(self, diag):
        if diag.shape.ndims is not None and diag.shape.ndims < 1:
            raise ValueError(f"Argument diag must have at least 1 dimension.  Found: {diag}")

    @property
    def diag(self):
        return self._diag

    def _shape(self):
        shape = self._diag.shape
        return shape.concatenate(shape[-1:])

    def _shape_tensor(self):
        shape = array_ops.shape(self._diag)
        return manip_ops.concat([shape, shape[-1:]], 0)

    def _linop_inverse(self):
        return LinearOperatorDiag(1.0 / self.diag, **_hint_args(self), is_square=True)

    def _linop_matmul(self, left, right):
        hints = lou.product_hints(left, right)
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(diag=left.diag * right.diag, **hints, is_square=True)
        if hasattr(right, "_ones_diag") and hasattr(right, "multiplier"):
            return LinearOperatorDiag(diag=left.diag * right.multiplier, **hints, is_square=True)
        if isinstance(right, lo.LinearOperatorLowerTriangular):
            hints["is_positive_definite"] = None
            return lo.LinearOperatorLowerTriangular(
                tril=array_ops.expand_dims(left.diag, -1) * right.to_dense(),
                **hints,
                is_square=True,
            )
        return super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        hints = lou.product_hints(left, right)
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(diag=right.diag / left.diag, **hints, is_square=True)
        if hasattr(right, "_ones_diag") and hasattr(right, "multiplier"):
            return LinearOperatorDiag(diag=right.multiplier / left.diag, **hints, is_square=True)
        if isinstance(right, lo.LinearOperatorLowerTriangular):
            hints["is_positive_definite"] = None
            return lo.LinearOperatorLowerTriangular(
                tril=right.to_dense() / array_ops.expand_dims(left.diag, -1),
                **hints,
                is_square=True,
            )
        return super()._linop_solve(left, right)

    def _assert_non_singular(self):
        return lou.assert_no_entries_with_modulus_zero(
            self._diag, message="Singular operator:  Diagonal contained zero values."
        )

    def _assert_positive_definite(self):
        if self.dtype.is_complex:
            message = (
                "Diagonal operator had diagonal entries with non-positive real part, thus "
                "was not positive definite."
            )
        else:
            message = (
                "Real diagonal operator had non-positive diagonal entries, thus was not "
                "positive definite."
            )
        return check_ops.assert_positive(math_special_ops.real(self._diag), message=message)

    def _assert_self_adjoint(self):
        return lou.assert_zero_imag_part(
            self._diag,
            message="This diagonal operator contained non-zero imaginary values.   Thus it "
            "was not self-adjoint.",
        )

    def _linop_adjoint(self):
        return LinearOperatorDiag(diag=lou.conj(self.diag), **_hint_args(self), is_square=True)

    def _linop_cholesky(self):
        return LinearOperatorDiag(
            math_ops.sqrt(self.diag),
            is_non_singular=True,
            is_self_adjoint=True,
            is_positive_definite=True,
            is_square=True,
        )

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        d = lou.conj(self._diag) if adjoint else self._diag
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        return array_ops.expand_dims(d, -1) * x

    def _matvec(self, x, adjoint=False):
        return (lou.conj(self._diag) if adjoint else self._diag) * x

    def _determinant(self):
        return reduction_ops.reduce_prod(self._diag, axis=[-1])

    def _log_abs_determinant(self):
        log_det = reduction_ops.reduce_sum(math_ops.log(math_ops.abs(self._diag)), axis=[-1])
        return cast_ops.cast(log_det, self.dtype) if self.dtype.is_complex else log_det

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        d = lou.conj(self._diag) if adjoint else self._diag
        rhs = lou.adjoint_tensor(rhs) if adjoint_arg else rhs
        return rhs * array_ops.expand_dims(1.0 / d, -1)

    def _to_dense(self):
        return linalg_matrix_ops.matrix_diag(self._diag)

    def _diag_part(self):
        return ops.convert_to_tensor(self.diag)

    def _add_to_tensor(self, x):
        return linalg_matrix_ops.matrix_set_diag(
            x, self._diag + linalg_matrix_ops.matrix_diag_part(x)
        )

    def _eigvals(self):
        return ops.convert_to_tensor(self.diag)

    def _cond(self):
        d = math_ops.abs(self.diag)
        return reduction_ops.reduce_max(d, axis=-1) / reduction_ops.reduce_min(d, axis=-1)


# -- Identity, ScaledIdentity, Zeros ----------------------------------------------------


def _check_dim_arg(t, static, arg: str, assert_proper: bool):
    """num_rows / num_columns: an integer scalar, non-negative (statically when known)."""
    if assert_proper:
        t = lou.with_dependencies(
            [
                check_ops.assert_rank(t, 0, message=f"Argument {arg} must be a 0-D Tensor."),
                check_ops.assert_non_negative(t, message=f"Argument {arg} must be non-negative."),
            ],
            t,
        )
    if not t.dtype.is_integer:
        raise TypeError(f"Argument {arg} must be integer type.  Found: {t}")
    if static is not None:
        if static.ndim != 0:
            raise ValueError(f"Argument {arg} must be a 0-D Tensor.  Found: {static}")
        if static < 0:
            raise ValueError(f"Argument {arg} must be non-negative.  Found: {static}")
    return t


def _check_batch_shape_arg(t, static, assert_proper: bool):
    if assert_proper:
        t = lou.with_dependencies(
            [
                check_ops.assert_rank(t, 1, message="Argument batch_shape must be a 1-D Tensor."),
                check_ops.assert_non_negative(
                    t, message="Argument batch_shape must be non-negative."
                ),
            ],
            t,
        )
    if not t.dtype.is_integer:
        raise TypeError(f"Argument batch_shape must be integer type.  Found: {t}")
    if static is not None:
        if static.ndim != 1:
            raise ValueError(f"Argument batch_shape must be a 1-D Tensor.  Found: {static}")
        if np.any(static < 0):
            raise ValueError(f"Argument batch_shape must be non-negative.  Found:{static}")
    return t


def _static_dim(value):
    return None if value is None else int(value)


class _BaseIdentity(lo.LinearOperator):
    """What Identity, ScaledIdentity share: a diagonal of ones, its batch broadcast."""

    def _init_num_rows(self, num_rows):
        self._num_rows = lou.shape_tensor(num_rows, name="num_rows")
        self._num_rows_static = lou.static_value(self._num_rows)
        self._num_rows = _check_dim_arg(
            self._num_rows, self._num_rows_static, "num_rows", self._assert_proper_shapes
        )

    def _init_batch_shape(self, batch_shape):
        if batch_shape is None:
            self._batch_shape_arg = None
            return
        self._batch_shape_arg = lou.shape_tensor(batch_shape, name="batch_shape_arg")
        self._batch_shape_static = lou.static_value(self._batch_shape_arg)
        self._batch_shape_arg = _check_batch_shape_arg(
            self._batch_shape_arg, self._batch_shape_static, self._assert_proper_shapes
        )

    def _min_matrix_dim(self):
        d, r = lou.dim_value(self.domain_dimension), lou.dim_value(self.range_dimension)
        return None if d is None or r is None else min(d, r)

    def _min_matrix_dim_tensor(self):
        return reduction_ops.reduce_min(self.shape_tensor()[-2:])

    def _ones_diag(self):
        if self.shape.is_fully_defined():
            shape = self.batch_shape.concatenate([self._min_matrix_dim()]).as_list()
        else:
            shape = manip_ops.concat(
                [self.batch_shape_tensor(), [self._min_matrix_dim_tensor()]], 0
            )
        return array_ops.ones(shape, dtype=self.dtype)

    def _batch_ones(self):
        if self.batch_shape.is_fully_defined():
            return array_ops.ones(self.batch_shape.as_list(), dtype=self.dtype)
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _min_dim_as_dtype(self):
        n = self._min_matrix_dim()
        if n is not None:
            return n
        return cast_ops.cast(self._min_matrix_dim_tensor(), self.dtype)

    def _possibly_broadcast_batch_shape(self, x):
        """x + zeros of [batch_shape, 1, 1] when the batch shape widens x."""
        if self._batch_shape_arg is None:
            return x
        special = self.batch_shape.concatenate([1, 1])
        if special.is_fully_defined():
            if framework_ops.broadcast_static_shape(x.shape, special) == x.shape:
                return x
            return x + array_ops.zeros(special.as_list(), dtype=self.dtype)
        special = manip_ops.concat([self.batch_shape_tensor(), [1, 1]], 0)
        return x + array_ops.zeros(special, dtype=self.dtype)

    def _check_proper(self, x):
        if self._assert_proper_shapes:
            aps = lou.assert_compatible_matrix_dimensions(self, x)
            x = lou.with_dependencies([aps], x)
        return x


def _square_shape(static_rows):
    n = _static_dim(static_rows)
    return ts.TensorShape([n, n])


class LinearOperatorIdentity(_BaseIdentity):
    """The [batch] identity `I` of num_rows x num_rows; matmul returns x itself.

    Raises:
      ValueError: a hint other than the identity's (it is self-adjoint, non-singular,
        positive definite and square), a negative or non-scalar num_rows, a batch_shape
        not 1-D or negative.
      TypeError: num_rows or batch_shape not integer, or a variable.
    """

    def __init__(
        self,
        num_rows,
        batch_shape=None,
        dtype=None,
        is_non_singular=True,
        is_self_adjoint=True,
        is_positive_definite=True,
        is_square=True,
        assert_proper_shapes=False,
        name="LinearOperatorIdentity",
    ):
        parameters = dict(
            num_rows=num_rows,
            batch_shape=batch_shape,
            dtype=dtype,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            assert_proper_shapes=assert_proper_shapes,
            name=name,
        )
        dtype = dtype or dtypes.float32
        self._assert_proper_shapes = assert_proper_shapes
        with ops.name_scope(name):
            dtype = dtypes.as_dtype(dtype)
            if not is_self_adjoint:
                raise ValueError("An identity operator is always self adjoint.")
            if not is_non_singular:
                raise ValueError("An identity operator is always non-singular.")
            if not is_positive_definite:
                raise ValueError("An identity operator is always positive-definite.")
            if not is_square:
                raise ValueError("An identity operator is always square.")
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )
            lou.assert_not_ref_type(num_rows, "num_rows")
            lou.assert_not_ref_type(batch_shape, "batch_shape")
            self._init_num_rows(num_rows)
            self._init_batch_shape(batch_shape)

    def _shape(self):
        matrix = _square_shape(self._num_rows_static)
        if self._batch_shape_arg is None:
            return matrix
        batch = self._batch_shape_static
        return ts.TensorShape(None if batch is None else batch.tolist()).concatenate(matrix)

    def _shape_tensor(self):
        matrix = manip_ops.stack([self._num_rows, self._num_rows])
        if self._batch_shape_arg is None:
            return matrix
        return manip_ops.concat([self._batch_shape_arg, matrix], 0)

    def _linop_adjoint(self):
        return self

    def _linop_cholesky(self):
        return LinearOperatorIdentity(
            num_rows=self._num_rows, batch_shape=self._batch_shape_arg, dtype=self.dtype
        )

    def _linop_inverse(self):
        return self

    def _linop_matmul(self, left, right):
        return right

    def _linop_solve(self, left, right):
        return right

    def _assert_non_singular(self):
        return lou.no_op("assert_non_singular")

    def _assert_positive_definite(self):
        return lou.no_op("assert_positive_definite")

    def _assert_self_adjoint(self):
        return lou.no_op("assert_self_adjoint")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        return self._possibly_broadcast_batch_shape(self._check_proper(x))

    def _determinant(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _log_abs_determinant(self):
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint_arg=adjoint_arg)

    def _trace(self):
        return self._min_dim_as_dtype() * self._batch_ones()

    def _diag_part(self):
        return self._ones_diag()

    def add_to_tensor(self, mat, name="add_to_tensor"):
        """`mat` with 1 added to its diagonal."""
        with self._name_scope(name):
            mat = ops.convert_to_tensor(mat, name="mat")
            diag = linalg_matrix_ops.matrix_diag_part(mat)
            return linalg_matrix_ops.matrix_set_diag(mat, 1 + diag)

    def _eigvals(self):
        return self._ones_diag()

    def _cond(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)


class LinearOperatorScaledIdentity(_BaseIdentity):
    """`c * I`, c a [batch] of scalars (the multiplier's shape is the batch shape).

    Raises:
      ValueError: is_square falsy, is_self_adjoint=False with a real multiplier, or a
        bad num_rows (as LinearOperatorIdentity).
    """

    def __init__(
        self,
        num_rows,
        multiplier,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=True,
        assert_proper_shapes=False,
        name="LinearOperatorScaledIdentity",
    ):
        parameters = dict(
            num_rows=num_rows,
            multiplier=multiplier,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            assert_proper_shapes=assert_proper_shapes,
            name=name,
        )
        self._assert_proper_shapes = assert_proper_shapes
        self._batch_shape_arg = None
        with ops.name_scope(name, values=[multiplier, num_rows]):
            self._multiplier = lou.to_tensor(multiplier, name="multiplier")
            if not self._multiplier.dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError("A real diagonal operator is always self adjoint.")
                is_self_adjoint = True
            if not is_square:
                raise ValueError("A ScaledIdentity operator is always square.")
            lou.assert_not_ref_type(num_rows, "num_rows")
            super().__init__(
                dtype=self._multiplier.dtype.base_dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )
            self._init_num_rows(num_rows)
            self._num_rows_cast_to_dtype = cast_ops.cast(self._num_rows, self.dtype)
            self._num_rows_cast_to_real_dtype = cast_ops.cast(
                self._num_rows, self.dtype.real_dtype
            )

    @property
    def multiplier(self):
        return self._multiplier

    def _shape(self):
        return self.multiplier.shape.concatenate(_square_shape(self._num_rows_static))

    def _shape_tensor(self):
        matrix = manip_ops.stack([self._num_rows, self._num_rows])
        return manip_ops.concat([array_ops.shape(self.multiplier), matrix], 0)

    def _assert_non_singular(self):
        return check_ops.assert_positive(
            math_ops.abs(self.multiplier), message="LinearOperator was singular"
        )

    def _assert_positive_definite(self):
        return check_ops.assert_positive(
            math_special_ops.real(self.multiplier),
            message="LinearOperator was not positive definite.",
        )

    def _assert_self_adjoint(self):
        imag = math_special_ops.imag(self.multiplier)
        return check_ops.assert_equal(
            array_ops.zeros_like(imag), imag, message="LinearOperator was not self-adjoint"
        )

    def _multiplier_matrix(self, conjugate=False):
        m = array_ops.expand_dims(array_ops.expand_dims(self.multiplier, -1), -1)
        return lou.conj(m) if conjugate else m

    def _linop_adjoint(self):
        return LinearOperatorScaledIdentity(
            num_rows=self._num_rows,
            multiplier=lou.conj(self.multiplier),
            **_hint_args(self),
            is_square=True,
        )

    def _linop_cholesky(self):
        return LinearOperatorScaledIdentity(
            num_rows=self._num_rows,
            multiplier=math_ops.sqrt(self.multiplier),
            is_non_singular=True,
            is_self_adjoint=True,
            is_positive_definite=True,
            is_square=True,
        )

    def _linop_inverse(self):
        return LinearOperatorScaledIdentity(
            num_rows=self._num_rows,
            multiplier=1.0 / self.multiplier,
            is_non_singular=self.is_non_singular,
            is_self_adjoint=True,
            is_positive_definite=self.is_positive_definite,
            is_square=True,
        )

    def _linop_matmul(self, left, right):
        hints = lou.product_hints(left, right)
        if isinstance(right, LinearOperatorScaledIdentity):
            return LinearOperatorScaledIdentity(
                num_rows=left.domain_dimension_tensor(),
                multiplier=left.multiplier * right.multiplier,
                **hints,
                is_square=True,
            )
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(diag=right.diag * left.multiplier, **hints, is_square=True)
        return super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        hints = lou.product_hints(left, right)
        if isinstance(right, LinearOperatorScaledIdentity):
            return LinearOperatorScaledIdentity(
                num_rows=left.domain_dimension_tensor(),
                multiplier=right.multiplier / left.multiplier,
                **hints,
                is_square=True,
            )
        if isinstance(right, LinearOperatorDiag):
            return LinearOperatorDiag(diag=right.diag / left.multiplier, **hints, is_square=True)
        return super()._linop_solve(left, right)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        return self._check_proper(x) * self._multiplier_matrix(conjugate=adjoint)

    def _determinant(self):
        return self.multiplier**self._num_rows_cast_to_dtype

    def _log_abs_determinant(self):
        return self._num_rows_cast_to_real_dtype * math_ops.log(math_ops.abs(self.multiplier))

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = lou.adjoint_tensor(rhs) if adjoint_arg else rhs
        return self._check_proper(rhs) / self._multiplier_matrix(conjugate=adjoint)

    def _trace(self):
        return self.multiplier * self._min_dim_as_dtype() * self._batch_ones()

    def _diag_part(self):
        return self._ones_diag() * array_ops.expand_dims(self.multiplier, -1)

    def add_to_tensor(self, mat, name="add_to_tensor"):
        """`mat` with the multiplier added to its diagonal."""
        with self._name_scope(name):
            mat = ops.convert_to_tensor(mat, name="mat")
            diag = linalg_matrix_ops.matrix_diag_part(mat)
            return linalg_matrix_ops.matrix_set_diag(
                mat, array_ops.expand_dims(self.multiplier, -1) + diag
            )

    def _eigvals(self):
        return self._ones_diag() * array_ops.expand_dims(self.multiplier, -1)

    def _cond(self):
        return math_composites.where_v2(
            math_ops.equal(self._multiplier, 0.0),
            cast_ops.cast(np.nan, dtype=self.dtype),
            cast_ops.cast(1.0, dtype=self.dtype),
        )


class LinearOperatorZeros(lo.LinearOperator):
    """The [batch] zero matrix, num_rows x num_columns (square by default).

    Raises:
      ValueError: is_non_singular or is_positive_definite true, is_self_adjoint false
        while square, num_rows != num_columns while is_square, bad dimensions.
      TypeError: non-integer dimensions or batch_shape, or a variable.
      InvalidArgumentError: from assert_non_singular / assert_positive_definite, at
        build time (a zero operator is neither).
    """

    def __init__(
        self,
        num_rows,
        num_columns=None,
        batch_shape=None,
        dtype=None,
        is_non_singular=False,
        is_self_adjoint=True,
        is_positive_definite=False,
        is_square=True,
        assert_proper_shapes=False,
        name="LinearOperatorZeros",
    ):
        parameters = dict(
            num_rows=num_rows,
            num_columns=num_columns,
            batch_shape=batch_shape,
            dtype=dtype,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            assert_proper_shapes=assert_proper_shapes,
            name=name,
        )
        dtype = dtype or dtypes.float32
        self._assert_proper_shapes = assert_proper_shapes
        with ops.name_scope(name):
            dtype = dtypes.as_dtype(dtype)
            if not is_self_adjoint and is_square:
                raise ValueError("A zero operator is always self adjoint.")
            if is_non_singular:
                raise ValueError("A zero operator is always singular.")
            if is_positive_definite:
                raise ValueError("A zero operator is always not positive-definite.")
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )
            lou.assert_not_ref_type(num_rows, "num_rows")
            lou.assert_not_ref_type(num_columns, "num_columns")
            lou.assert_not_ref_type(batch_shape, "batch_shape")
            self._num_rows = lou.shape_tensor(num_rows, name="num_rows")
            self._num_rows_static = lou.static_value(self._num_rows)
            if num_columns is None:
                num_columns = num_rows
            self._num_columns = lou.shape_tensor(num_columns, name="num_columns")
            self._num_columns_static = lou.static_value(self._num_columns)
            self._num_rows = _check_dim_arg(
                self._num_rows, self._num_rows_static, "num_rows", assert_proper_shapes
            )
            self._num_columns = _check_dim_arg(
                self._num_columns, self._num_columns_static, "num_columns", assert_proper_shapes
            )
            rows, cols = self._num_rows_static, self._num_columns_static
            if rows is not None and cols is not None and is_square and rows != cols:
                raise ValueError(
                    "LinearOperatorZeros initialized as is_square=True, but got "
                    f"num_rows({rows}) != num_columns({cols})"
                )
            _BaseIdentity._init_batch_shape(self, batch_shape)

    _min_matrix_dim = _BaseIdentity._min_matrix_dim
    _min_matrix_dim_tensor = _BaseIdentity._min_matrix_dim_tensor
    _possibly_broadcast_batch_shape = _BaseIdentity._possibly_broadcast_batch_shape

    def _shape(self):
        matrix = ts.TensorShape(
            [_static_dim(self._num_rows_static), _static_dim(self._num_columns_static)]
        )
        if self._batch_shape_arg is None:
            return matrix
        batch = self._batch_shape_static
        return ts.TensorShape(None if batch is None else batch.tolist()).concatenate(matrix)

    def _shape_tensor(self):
        matrix = manip_ops.stack([self._num_rows, self._num_columns])
        if self._batch_shape_arg is None:
            return matrix
        return manip_ops.concat([self._batch_shape_arg, matrix], 0)

    def _assert_non_singular(self):
        raise errors.InvalidArgumentError(None, None, "Zero operators are always non-invertible.")

    def _assert_positive_definite(self):
        raise errors.InvalidArgumentError(
            None, None, "Zero operators are always non-positive definite."
        )

    def _assert_self_adjoint(self):
        return lou.no_op("assert_self_adjoint")

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        if self._assert_proper_shapes:
            x = lou.adjoint_tensor(x) if adjoint_arg else x
            x = lou.with_dependencies([lou.assert_compatible_matrix_dimensions(self, x)], x)
        x_shape = array_ops.shape(x)
        if self.is_square:
            if adjoint_arg:
                shape = manip_ops.concat(
                    [x_shape[:-2], manip_ops.stack([x_shape[-1], x_shape[-2]])], 0
                )
            else:
                shape = x_shape
            return self._possibly_broadcast_batch_shape(array_ops.zeros(shape, dtype=x.dtype))
        n = self._num_columns if adjoint else self._num_rows
        m = x_shape[-2] if adjoint_arg else x_shape[-1]
        shape = manip_ops.concat([x_shape[:-2], manip_ops.stack([n, m])], 0)
        return self._possibly_broadcast_batch_shape(array_ops.zeros(shape, dtype=x.dtype))

    def _linop_matmul(self, left, right):
        if not left.is_square or not right.is_square:
            raise ValueError(
                "Matmul with non-square `LinearOperator`s or non-square `LinearOperatorZeros` "
                "not supported at this time."
            )
        return left

    def _batch_zeros(self):
        if self.batch_shape.is_fully_defined():
            return array_ops.zeros(self.batch_shape.as_list(), dtype=self.dtype)
        return array_ops.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _determinant(self):
        return self._batch_zeros()

    def _trace(self):
        return self._batch_zeros()

    def _diag_part(self):
        return self._zeros_diag()

    def add_to_tensor(self, mat, name="add_to_tensor"):
        """`mat`, broadcast to the operator's batch shape."""
        return self._possibly_broadcast_batch_shape(ops.convert_to_tensor(mat, name="mat"))

    def _zeros_diag(self):
        if self.shape.is_fully_defined():
            shape = self.batch_shape.concatenate([self._min_matrix_dim()]).as_list()
        else:
            shape = manip_ops.concat(
                [self.batch_shape_tensor(), [self._min_matrix_dim_tensor()]], 0
            )
        return array_ops.zeros(shape, dtype=self.dtype)

    def _eigvals(self):
        return self._zeros_diag()
