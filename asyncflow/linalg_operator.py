"""`tf.linalg.LinearOperator`, TF 2.21's abstract matrix-free operator, and the operators
the base class itself hands out: LinearOperatorLowerTriangular (what `cholesky()`
returns) and LinearOperatorComposition (`matmul` of two operators); the adjoint and
inverse operators are in linalg_operators_derived.py.

An operator is a Python object over graph tensors: every method builds ops from the
existing families (matmul, triangular_solve, cholesky, ...), so its results run in a
Session and differentiate through those ops.  Subclasses override the private `_matmul`,
`_solve`, `_determinant`, ... with their cheaper forms; the public methods do TF's
argument checks (dtype, static dimensions, the hints) and open a name scope.

Hints (is_non_singular, is_self_adjoint, is_positive_definite, is_square) follow TF:
positive definite implies non-singular, non-singular or self-adjoint implies square, and
a contradicting explicit hint raises ValueError at construction.  Batch slicing
(`operator[...]`) and the TypeSpec/CompositeTensor side of TF's class are not here.
"""

from __future__ import annotations

import abc
import contextlib

import numpy as np

from asyncflow import dtypes, framework_extras
from asyncflow import graph as ops
from asyncflow import tensor_shape as ts
from asyncflow.linalg_operator_util import (
    adjoint_tensor,
    assert_no_entries_with_modulus_zero,
    broadcast_matrix_batch_dims,
    dim_value,
    eye,
    hint_non_singular,
    hint_self_adjoint_commuting,
    hint_square,
    is_aat_form,
    is_ref,
    matrix_solve_with_broadcast,
    shape_tensor,
    to_tensor,
    with_rhs_shape,
)
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_ordering,
    framework_ops,
    linalg_matrix_ops,
    manip_ops,
    math_more_ops,
    math_ops,
    math_special_ops,
    matmul_ops,
    reduction_ops,
)

__all__ = ["LinearOperator", "LinearOperatorComposition", "LinearOperatorLowerTriangular"]


# The classes `adjoint()` and `inverse()` hand out subclass this one, so they live in
# linalg_operators_derived.py, which registers them here when imported (the package
# imports it): a hook in place of an import cycle.
_DERIVED: dict[str, type] = {}


# -- the base class ---------------------------------------------------------------------


class LinearOperator(metaclass=abc.ABCMeta):
    """Base class for a [batch] of M x N matrices, defined by how they act (TF 2.21).

    Raises:
      ValueError: at construction, a hint contradicting another (a positive definite
        operator is non-singular; a non-singular or self-adjoint one is square).
    """

    def __init__(
        self,
        dtype,
        graph_parents=None,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name=None,
        parameters=None,
    ):
        if is_positive_definite:
            if is_non_singular is False:
                raise ValueError("A positive definite matrix is always non-singular.")
            is_non_singular = True
        if is_non_singular:
            if is_square is False:
                raise ValueError("A non-singular matrix is always square.")
            is_square = True
        if is_self_adjoint:
            if is_square is False:
                raise ValueError("A self-adjoint matrix is always square.")
            is_square = True
        self._is_square_set_or_implied_by_hints = is_square
        self._graph_parents = []
        if graph_parents is not None:
            self._set_graph_parents(graph_parents)
        self._dtype = dtypes.as_dtype(dtype).base_dtype if dtype else dtype
        self._is_non_singular = is_non_singular
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._parameters = dict(parameters or {})
        self._name = name or type(self).__name__

    @contextlib.contextmanager
    def _name_scope(self, name=None):
        full_name = self.name if name is None else f"{self.name}/{name}"
        with ops.name_scope(full_name) as scope:
            yield scope

    def _set_graph_parents(self, graph_parents):
        for i, t in enumerate(graph_parents):
            if t is None or not (is_ref(t) or ops.is_tensor(t)):
                raise ValueError(f"Graph parent item {i} is not a Tensor; {t}.")
        self._graph_parents = list(graph_parents)

    # -- properties ----------------------------------------------------------------

    @property
    def parameters(self) -> dict:
        return dict(self._parameters)

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self) -> str:
        return self._name

    @property
    def graph_parents(self) -> list:
        return self._graph_parents

    @property
    def is_non_singular(self):
        return self._is_non_singular

    @property
    def is_self_adjoint(self):
        return self._is_self_adjoint

    @property
    def is_positive_definite(self):
        return self._is_positive_definite

    @property
    def is_square(self):
        """True when the static dimensions are equal (or the hint says so).

        Raises:
          ValueError: the hint is False but the operator is square.
        """
        auto = self.domain_dimension == self.range_dimension
        hint = self._is_square_set_or_implied_by_hints
        if hint is False and auto:
            raise ValueError("User set is_square hint to False, but the operator was square.")
        return auto if hint is None else hint

    # -- shapes --------------------------------------------------------------------

    @abc.abstractmethod
    def _shape(self):
        raise NotImplementedError("_shape is not implemented.")

    def _shape_tensor(self):
        raise NotImplementedError("_shape_tensor is not implemented.")

    @property
    def shape(self):
        return self._shape()

    def shape_tensor(self, name="shape_tensor"):
        with self._name_scope(name):
            if self.shape.is_fully_defined():
                return shape_tensor(self.shape.as_list())
            return self._shape_tensor()

    @property
    def batch_shape(self):
        return self.shape[:-2]

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        with self._name_scope(name):
            return self._batch_shape_tensor()

    def _batch_shape_tensor(self, shape=None):
        if self.batch_shape.is_fully_defined():
            return shape_tensor(self.batch_shape.as_list(), name="batch_shape")
        shape = self.shape_tensor() if shape is None else shape
        return shape[:-2]

    @property
    def tensor_rank(self):
        return self.shape.ndims

    def tensor_rank_tensor(self, name="tensor_rank_tensor"):
        with self._name_scope(name):
            if self.tensor_rank is not None:
                return ops.convert_to_tensor(self.tensor_rank)
            return array_ops.size(self.shape_tensor())

    @property
    def domain_dimension(self):
        if self.shape.rank is None:
            return ts.Dimension(None)
        return self.shape.dims[-1]

    def domain_dimension_tensor(self, name="domain_dimension_tensor"):
        with self._name_scope(name):
            return self._domain_dimension_tensor()

    def _domain_dimension_tensor(self, shape=None):
        value = dim_value(self.domain_dimension)
        if value is not None:
            return ops.convert_to_tensor(value)
        shape = self.shape_tensor() if shape is None else shape
        return shape[-1]

    @property
    def range_dimension(self):
        if self.shape.dims:
            return self.shape.dims[-2]
        return ts.Dimension(None)

    def range_dimension_tensor(self, name="range_dimension_tensor"):
        with self._name_scope(name):
            return self._range_dimension_tensor()

    def _range_dimension_tensor(self, shape=None):
        value = dim_value(self.range_dimension)
        if value is not None:
            return ops.convert_to_tensor(value)
        shape = self.shape_tensor() if shape is None else shape
        return shape[-2]

    # -- assertions ----------------------------------------------------------------

    def _max_condition_number_to_be_non_singular(self):
        with ops.name_scope("max_nonsingular_condition_number"):
            eps = np.finfo(self.dtype.as_numpy_dtype).eps
            dims = manip_ops.stack(
                [
                    cast_ops.cast(100.0, self.dtype),
                    cast_ops.cast(self.range_dimension_tensor(), self.dtype),
                    cast_ops.cast(self.domain_dimension_tensor(), self.dtype),
                ]
            )
            return 1.0 / (reduction_ops.reduce_max(dims) * eps)

    def _assert_non_singular(self):
        if self._can_use_cholesky():
            return self.assert_positive_definite()
        values = self._singular_values(self.to_dense())
        cond = reduction_ops.reduce_max(values, axis=-1) / reduction_ops.reduce_min(
            values, axis=-1
        )
        return check_ops.assert_less(
            cond,
            cast_ops.cast(self._max_condition_number_to_be_non_singular(), cond.dtype),
            message="Singular matrix up to precision epsilon.",
        )

    def assert_non_singular(self, name="assert_non_singular"):
        """An op that fails (InvalidArgumentError when run) if the operator is singular."""
        with self._name_scope(name):
            return self._assert_non_singular()

    def _assert_positive_definite(self):
        if self.is_self_adjoint:
            # (TF checks the Cholesky diagonal as it is: a complex one is a TypeError)
            chol = linalg_matrix_ops.cholesky(self.to_dense())
            return check_ops.assert_positive(
                linalg_matrix_ops.matrix_diag_part(chol),
                message="Matrix was not positive definite.",
            )
        raise NotImplementedError("assert_positive_definite is not implemented.")

    def assert_positive_definite(self, name="assert_positive_definite"):
        """An op that fails if the (self-adjoint) operator is not positive definite.

        Raises:
          NotImplementedError: the operator is not hinted self-adjoint.
        """
        with self._name_scope(name):
            return self._assert_positive_definite()

    def _assert_self_adjoint(self):
        dense = self.to_dense()
        return check_ops.assert_equal(
            dense, adjoint_tensor(dense), message="Matrix was not equal to its adjoint."
        )

    def assert_self_adjoint(self, name="assert_self_adjoint"):
        with self._name_scope(name):
            return self._assert_self_adjoint()

    def _check_input_dtype(self, arg):
        if arg.dtype.base_dtype != self.dtype:
            raise TypeError(
                f"Expected argument to have dtype {self.dtype}.  Found: {arg.dtype} in "
                f"tensor {arg}"
            )

    # -- matmul / solve ------------------------------------------------------------

    @abc.abstractmethod
    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        raise NotImplementedError("_matmul is not implemented.")

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """`self @ x` (adjoint: self^H @ x; adjoint_arg: ... @ x^H); x a tensor or operator.

        Raises:
          TypeError: x's dtype is not the operator's.
          ValueError: statically incompatible dimensions.
        """
        if isinstance(x, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            _check_operator_dims(left, right, "x")
            with self._name_scope(name):
                return self._linop_matmul(left, right)
        with self._name_scope(name):
            x = ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            self_dim = -2 if adjoint else -1
            arg_dim = -1 if adjoint_arg else -2
            ts.dimension_at_index(self.shape, self_dim).assert_is_compatible_with(x.shape[arg_dim])
            return self._matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _linop_matmul(self, left, right):
        if hasattr(right, "_ones_diag") and not hasattr(right, "multiplier"):
            return left
        if hasattr(right, "_zeros_diag"):
            if not right.is_square or not left.is_square:
                raise ValueError(
                    "Matmul with non-square `LinearOperator`s or non-square "
                    "`LinearOperatorZeros` not supported at this time."
                )
            return right
        return LinearOperatorComposition(operators=[left, right], **_composed_hints(left, right))

    def __matmul__(self, other):
        return self.matmul(other)

    def _matvec(self, x, adjoint=False):
        y = self.matmul(array_ops.expand_dims(x, -1), adjoint=adjoint)
        return array_ops.squeeze(y, axis=[-1])

    def matvec(self, x, adjoint=False, name="matvec"):
        """`self @ x` for a [batch] vector x."""
        with self._name_scope(name):
            x = ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            self_dim = -2 if adjoint else -1
            ts.dimension_at_index(self.shape, self_dim).assert_is_compatible_with(x.shape[-1])
            return self._matvec(x, adjoint=adjoint)

    def _dense_solve(self, rhs, adjoint=False, adjoint_arg=False):
        if self.is_square is False:
            raise NotImplementedError("Solve is not yet implemented for non-square operators.")
        rhs = adjoint_tensor(rhs) if adjoint_arg else rhs
        if self._can_use_cholesky():
            chol = linalg_matrix_ops.cholesky(self.to_dense())
            chol, rhs_b = broadcast_matrix_batch_dims([chol, rhs])
            out = linalg_matrix_ops.cholesky_solve(chol, rhs_b)
        else:
            out = matrix_solve_with_broadcast(self.to_dense(), rhs, adjoint=adjoint)
        return with_rhs_shape(out, rhs)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._dense_solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """X with `self @ X = rhs` (adjoint, adjoint_arg as in matmul).

        Raises:
          NotImplementedError: the operator is hinted singular or not square.
          TypeError, ValueError: as matmul.
        """
        if self.is_non_singular is False:
            raise NotImplementedError(
                "Exact solve not implemented for an operator that is expected to be singular."
            )
        if self.is_square is False:
            raise NotImplementedError(
                "Exact solve not implemented for an operator that is expected to not be square."
            )
        if isinstance(rhs, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = rhs.adjoint() if adjoint_arg else rhs
            _check_operator_dims(left, right, "rhs")
            with self._name_scope(name):
                return self._linop_solve(left, right)
        with self._name_scope(name):
            rhs = ops.convert_to_tensor(rhs, name="rhs")
            self._check_input_dtype(rhs)
            self_dim = -1 if adjoint else -2
            arg_dim = -1 if adjoint_arg else -2
            ts.dimension_at_index(self.shape, self_dim).assert_is_compatible_with(
                rhs.shape[arg_dim]
            )
            return self._solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _linop_solve(self, left, right):
        if hasattr(right, "_ones_diag") and not hasattr(right, "multiplier"):
            return left.inverse()
        return LinearOperatorComposition(
            operators=[_DERIVED["inversion"](left), right], **_composed_hints(left, right)
        )

    def _solvevec(self, rhs, adjoint=False):
        y = self.solve(array_ops.expand_dims(rhs, -1), adjoint=adjoint)
        return array_ops.squeeze(y, axis=[-1])

    def solvevec(self, rhs, adjoint=False, name="solve"):
        """x with `self @ x = rhs` for a [batch] vector rhs."""
        with self._name_scope(name):
            rhs = ops.convert_to_tensor(rhs, name="rhs")
            self._check_input_dtype(rhs)
            self_dim = -1 if adjoint else -2
            ts.dimension_at_index(self.shape, self_dim).assert_is_compatible_with(rhs.shape[-1])
            return self._solvevec(rhs, adjoint=adjoint)

    # -- derived operators ---------------------------------------------------------

    def adjoint(self, name="adjoint"):
        """The adjoint operator (self when hinted self-adjoint)."""
        if self.is_self_adjoint is True:
            return self
        with self._name_scope(name):
            return self._linop_adjoint()

    H = property(adjoint, None)

    def _linop_adjoint(self):
        return _DERIVED["adjoint"](
            self,
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
            is_square=self.is_square,
        )

    def inverse(self, name="inverse"):
        """The inverse operator.

        Raises:
          ValueError: the operator is hinted not square or singular.
        """
        if self.is_square is False:
            raise ValueError(
                "Cannot take the Inverse: This operator represents a non square matrix."
            )
        if self.is_non_singular is False:
            raise ValueError(
                "Cannot take the Inverse: This operator represents a singular matrix."
            )
        with self._name_scope(name):
            return self._linop_inverse()

    def _linop_inverse(self):
        return _DERIVED["inversion"](
            self,
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
            is_square=self.is_square,
        )

    def cholesky(self, name="cholesky"):
        """The lower-triangular Cholesky factor as an operator.

        Raises:
          ValueError: the operator is not hinted self-adjoint and positive definite.
        """
        if not self._can_use_cholesky():
            raise ValueError(
                "Cannot take the Cholesky decomposition: Not a positive definite self "
                "adjoint matrix."
            )
        with self._name_scope(name):
            return self._linop_cholesky()

    def _linop_cholesky(self):
        return LinearOperatorLowerTriangular(
            linalg_matrix_ops.cholesky(self.to_dense()),
            is_non_singular=True,
            is_self_adjoint=False,
            is_square=True,
        )

    # -- reductions of the matrix --------------------------------------------------

    def _determinant(self):
        if self._can_use_cholesky():
            return math_ops.exp(self.log_abs_determinant())
        return linalg_matrix_ops.matrix_determinant(self.to_dense())

    def determinant(self, name="det"):
        """Raises NotImplementedError for an operator hinted not square."""
        if self.is_square is False:
            raise NotImplementedError(
                "Determinant not implemented for an operator that is expected to not be square."
            )
        with self._name_scope(name):
            return self._determinant()

    def _log_abs_determinant(self):
        if self._can_use_cholesky():
            diag = linalg_matrix_ops.matrix_diag_part(linalg_matrix_ops.cholesky(self.to_dense()))
            return 2 * reduction_ops.reduce_sum(math_ops.log(diag), axis=[-1])
        return math_more_ops.slogdet(self.to_dense())[1]

    def log_abs_determinant(self, name="log_abs_det"):
        """Raises NotImplementedError for an operator hinted not square."""
        if self.is_square is False:
            raise NotImplementedError(
                "Determinant not implemented for an operator that is expected to not be square."
            )
        with self._name_scope(name):
            return self._log_abs_determinant()

    def _to_dense(self):
        if self.batch_shape.is_fully_defined():
            batch_shape = self.batch_shape.as_list()
        else:
            batch_shape = self.batch_shape_tensor()
        n = dim_value(self.domain_dimension)
        if n is None:
            n = self.domain_dimension_tensor()
        return self.matmul(eye(n, batch_shape, self.dtype))

    def to_dense(self, name="to_dense"):
        with self._name_scope(name):
            return self._to_dense()

    def _diag_part(self):
        return linalg_matrix_ops.matrix_diag_part(self.to_dense())

    def diag_part(self, name="diag_part"):
        with self._name_scope(name):
            return self._diag_part()

    def _trace(self):
        return reduction_ops.reduce_sum(self.diag_part(), axis=-1)

    def trace(self, name="trace"):
        with self._name_scope(name):
            return self._trace()

    def _add_to_tensor(self, x):
        return self.to_dense() + x

    def add_to_tensor(self, x, name="add_to_tensor"):
        """`self.to_dense() + x`.  Raises TypeError on a dtype mismatch."""
        with self._name_scope(name):
            x = ops.convert_to_tensor(x, name="x")
            self._check_input_dtype(x)
            return self._add_to_tensor(x)

    def _eigvals(self):
        return linalg_matrix_ops.self_adjoint_eigvals(self.to_dense())

    def eigvals(self, name="eigvals"):
        """Raises NotImplementedError unless the operator is hinted self-adjoint."""
        if not self.is_self_adjoint:
            raise NotImplementedError("Only self-adjoint matrices are supported.")
        with self._name_scope(name):
            return self._eigvals()

    @staticmethod
    def _singular_values(dense):
        s = linalg_matrix_ops.svd(dense, compute_uv=False)
        return math_special_ops.real(s) if s.dtype.is_complex else s

    def _cond(self):
        if not self.is_self_adjoint:
            values = self._singular_values(self.to_dense())
        else:
            values = math_ops.abs(self._eigvals())
        return reduction_ops.reduce_max(values, axis=-1) / reduction_ops.reduce_min(
            values, axis=-1
        )

    def cond(self, name="cond"):
        with self._name_scope(name):
            return self._cond()

    def _can_use_cholesky(self):
        return self.is_self_adjoint and self.is_positive_definite

    def __repr__(self):
        return (
            f"<asyncflow.linalg.{type(self).__name__} '{self.name}' "
            f"batch_shape={self.batch_shape} dtype={self.dtype.name if self.dtype else None}>"
        )


def _check_operator_dims(left, right, what):
    if (
        right.range_dimension is not None
        and left.domain_dimension is not None
        and right.range_dimension != left.domain_dimension
    ):
        raise ValueError(
            f"Operators are incompatible. Expected `{what}` to have dimension "
            f"{left.domain_dimension} but got {right.range_dimension}."
        )


def _composed_hints(left, right) -> dict:
    is_square = hint_square(left, right)
    hints = {"is_non_singular": None, "is_self_adjoint": None, "is_positive_definite": None}
    if is_square:
        hints["is_non_singular"] = hint_non_singular(left, right)
    elif is_square is False:
        hints = dict.fromkeys(hints, False)
    hints["is_square"] = is_square
    return hints


class LinearOperatorLowerTriangular(LinearOperator):
    """An operator over the lower triangle of a square [batch] matrix (the upper part
    of `tril` is ignored); solves are triangular solves.

    Raises:
      ValueError: is_square=False, or tril has fewer than 2 dimensions.
    """

    def __init__(
        self,
        tril,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorLowerTriangular",
    ):
        parameters = dict(
            tril=tril,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        if is_square is False:
            raise ValueError("Only square lower triangular operators supported at this time.")
        with ops.name_scope(name, values=[tril]):
            self._tril = to_tensor(tril, name="tril")
            if self._tril.shape.ndims is not None and self._tril.shape.ndims < 2:
                raise ValueError(
                    f"Argument tril must have at least 2 dimensions.  Found: {self._tril}"
                )
            super().__init__(
                dtype=self._tril.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    @property
    def tril(self):
        return self._tril

    def _get_tril(self):
        return linalg_matrix_ops.matrix_band_part(self._tril, -1, 0)

    def _get_diag(self):
        return linalg_matrix_ops.matrix_diag_part(self._tril)

    def _shape(self):
        return self._tril.shape

    def _shape_tensor(self):
        return array_ops.shape(self._tril)

    def _assert_non_singular(self):
        return assert_no_entries_with_modulus_zero(
            self._get_diag(), message="Singular operator:  Diagonal contained zero values."
        )

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return matmul_ops.matmul(self._get_tril(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _linop_matmul(self, left, right):
        if hasattr(right, "_check_diag"):  # a LinearOperatorDiag
            return LinearOperatorLowerTriangular(
                tril=left.to_dense() * right.diag,
                is_non_singular=hint_non_singular(right, left),
                is_self_adjoint=hint_self_adjoint_commuting(right, left),
                is_positive_definite=None,
                is_square=True,
            )
        return super()._linop_matmul(left, right)

    def _determinant(self):
        return reduction_ops.reduce_prod(self._get_diag(), axis=[-1])

    def _log_abs_determinant(self):
        return reduction_ops.reduce_sum(math_ops.log(math_ops.abs(self._get_diag())), axis=[-1])

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = adjoint_tensor(rhs) if adjoint_arg else rhs
        tril, rhs_b = broadcast_matrix_batch_dims([self._get_tril(), rhs])
        out = linalg_matrix_ops.matrix_triangular_solve(tril, rhs_b, lower=True, adjoint=adjoint)
        return with_rhs_shape(out, rhs)

    def _to_dense(self):
        return self._get_tril()

    def _eigvals(self):
        return self._get_diag()


class LinearOperatorComposition(LinearOperator):
    """The product `A1 @ A2 @ ... @ An` of operators, applied right to left.

    Raises:
      TypeError: the operators' dtypes differ.
      ValueError: an empty list, or a hint contradicting what the operators imply.
    """

    def __init__(
        self,
        operators,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name=None,
    ):
        parameters = dict(
            operators=operators,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        framework_extras.assert_proper_iterable(operators)
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a non-empty list of operators. Found: {operators}")
        self._operators = operators
        dtype = operators[0].dtype
        for operator in operators:
            if operator.dtype != dtype:
                found = "   ".join(str((o.name, o.dtype)) for o in operators)
                raise TypeError(f"Expected all operators to have the same dtype.  Found {found}")
        if all(operator.is_non_singular for operator in operators):
            if is_non_singular is False:
                raise ValueError(
                    "The composition of non-singular operators is always non-singular."
                )
            is_non_singular = True
        aat = is_aat_form(operators)
        if (len(operators) == 1 and operators[0].is_self_adjoint) or aat:
            if is_self_adjoint is False:
                raise ValueError(
                    "The composition was determined to be self-adjoint but user provided "
                    "incorrect `False` hint."
                )
            is_self_adjoint = True
        if aat:
            if is_square is False:
                raise ValueError(
                    "The composition was determined have the form A @ A.H, hence it must be "
                    "square. The user provided an incorrect `False` hint."
                )
            is_square = True
        if aat and is_non_singular:
            if is_positive_definite is False:
                raise ValueError(
                    "The composition was determined to be non-singular and have the form "
                    "A @ A.H, hence it must be positive-definite. The user provided an "
                    "incorrect `False` hint."
                )
            is_positive_definite = True
        if name is None:
            name = "_o_".join(operator.name for operator in operators)
        with ops.name_scope(name):
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )

    @property
    def operators(self) -> list:
        return self._operators

    def _shape(self):
        domain = self.operators[0].domain_dimension
        for operator in self.operators[1:]:
            domain.assert_is_compatible_with(operator.range_dimension)
            domain = operator.domain_dimension
        matrix = ts.TensorShape(
            [self.operators[0].range_dimension, self.operators[-1].domain_dimension]
        )
        batch = self.operators[0].batch_shape
        for operator in self.operators[1:]:
            batch = framework_ops.broadcast_static_shape(batch, operator.batch_shape)
        return batch.concatenate(matrix)

    def _shape_tensor(self):
        if self.shape.is_fully_defined():
            return ops.convert_to_tensor(self.shape.as_list(), dtype=dtypes.int32, name="shape")
        matrix = manip_ops.stack(
            [
                self.operators[0].range_dimension_tensor(),
                self.operators[-1].domain_dimension_tensor(),
            ]
        )
        batch = self.operators[0].batch_shape_tensor()
        for operator in self.operators[1:]:
            batch = framework_ops.broadcast_dynamic_shape(batch, operator.batch_shape_tensor())
        return manip_ops.concat([batch, matrix], 0)

    def _linop_cholesky(self):
        ops_ = self.operators
        if not (
            len(ops_) == 2
            and is_aat_form(ops_)
            and isinstance(ops_[0], LinearOperatorLowerTriangular)
        ):
            return super()._linop_cholesky()
        left = ops_[0]
        if left.is_positive_definite:
            return left
        sign = array_ops.expand_dims(math_ops.sign(left.diag_part()), -2)
        return LinearOperatorLowerTriangular(
            tril=left.tril / sign,
            is_non_singular=left.is_non_singular,
            is_self_adjoint=left.is_self_adjoint,
            is_positive_definite=True if left.is_positive_definite else None,
            is_square=True,
        )

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        order = self.operators if adjoint else list(reversed(self.operators))
        result = order[0].matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for operator in order[1:]:
            result = operator.matmul(result, adjoint=adjoint)
        return result

    def _determinant(self):
        result = self.operators[0].determinant()
        for operator in self.operators[1:]:
            result *= operator.determinant()
        return result

    def _log_abs_determinant(self):
        result = self.operators[0].log_abs_determinant()
        for operator in self.operators[1:]:
            result += operator.log_abs_determinant()
        return result

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        order = list(reversed(self.operators)) if adjoint else self.operators
        solution = order[0].solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for operator in order[1:]:
            solution = operator.solve(solution, adjoint=adjoint)
        return solution

    def _assert_non_singular(self):
        if all(operator.is_square for operator in self.operators):
            return control_flow_ordering.group(
                *[operator.assert_non_singular() for operator in self.operators]
            )
        return super()._assert_non_singular()
