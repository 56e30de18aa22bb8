"""Helpers of the LinearOperator modules (TF's linear_operator_util and
property_hint_util): argument conversion that keeps variables as given, batch
broadcasting of [batch] matrices, the assertions the operators share, and the rules that
combine two operators' hints (is_square, is_non_singular, ...) into their product's.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, framework_extras, math_composites, variables
from asyncflow import graph as ops
from asyncflow import tensor_shape as ts
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_ordering,
    framework_ops,
    linalg_matrix_ops,
    manip_ops,
    math_ops,
    math_special_ops,
)

# -- helpers shared by the operator modules (TF's linear_operator_util) ----------------


def is_ref(x) -> bool:
    """A variable, or an operator-like object (a dtype, a shape and matmul, not a
    tensor), is kept as given, not converted to a tensor (TF's is_ref)."""
    if isinstance(x, variables.Variable):
        return True
    return (
        not ops.is_tensor(x)
        and hasattr(x, "dtype")
        and hasattr(x, "shape")
        and hasattr(x, "matmul")
    )


def to_tensor(value, name=None, dtype=None):
    """TF's convert_nonref_to_tensor: variables stay variables (their dtype checked)."""
    if value is None:
        return None
    if is_ref(value):
        if dtype is not None and dtypes.as_dtype(dtype).base_dtype != value.dtype.base_dtype:
            raise TypeError(
                f"Argument `value` must be of dtype `{dtypes.as_dtype(dtype).base_dtype.name}` "
                f"Received: `{value.dtype.base_dtype.name}`."
            )
        return value
    return ops.convert_to_tensor(value, dtype=dtype, name=name)


def shape_tensor(shape, name=None):
    """A shape as an int tensor; an empty list is int32 (not float)."""
    dtype = dtypes.int32 if isinstance(shape, (tuple, list)) and not shape else None
    return ops.convert_to_tensor(shape, dtype=dtype, name=name)


def assert_not_ref_type(x, arg_name: str) -> None:
    if is_ref(x):
        raise TypeError(f"Argument {arg_name} cannot be reference type. Found: {type(x)}.")


def static_value(t):
    """The constant value of a tensor when it has one at build time, else None."""
    value = framework_extras.get_static_value(t)
    return None if value is None else np.asarray(value)


def adjoint_tensor(x):
    return math_composites.matrix_transpose(x, conjugate=True)


def conj(x):
    return math_ops.conj(x) if x.dtype.is_complex else x


def assert_no_entries_with_modulus_zero(x, message=None):
    with ops.name_scope(None, "assert_no_entries_with_modulus_zero", [x]):
        x = ops.convert_to_tensor(x, name="x")
        zero = ops.convert_to_tensor(0, dtype=x.dtype.real_dtype)
        return check_ops.assert_less(zero, math_ops.abs(x), message=message)


def assert_zero_imag_part(x, message=None):
    with ops.name_scope(None, "assert_zero_imag_part", [x]):
        x = ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_complex:
            return no_op()
        zero = ops.convert_to_tensor(0, dtype=x.dtype.real_dtype)
        return check_ops.assert_equal(zero, math_special_ops.imag(x), message=message)


def no_op(name=None):
    return control_flow_ordering.no_op(name=name)


def assert_compatible_matrix_dimensions(operator, x):
    return check_ops.assert_equal(
        array_ops.shape(x)[-2],
        operator.domain_dimension_tensor(),
        message="Dimensions are not compatible.  shape[-2] of argument to be the same as "
        "this operator",
    )


def with_dependencies(deps, x):
    return control_flow_ordering.with_dependencies(deps, x)


def broadcast_matrix_batch_dims(batch_matrices):
    """Broadcast the batch dimensions of [batch] matrices against each other."""
    mats = [ops.convert_to_tensor(m) for m in batch_matrices]
    for m in mats:
        if m.shape.ndims is not None and m.shape.ndims < 2:
            raise ValueError(
                f"Expected [batch] matrix to have at least two dimensions. Found: {m}."
            )
    if len(mats) < 2:
        return mats
    batch = mats[0].shape[:-2]
    for m in mats[1:]:
        batch = framework_ops.broadcast_static_shape(batch, m.shape[:-2])
    if batch.is_fully_defined():
        out = []
        for m in mats:
            if m.shape[:-2] != batch:
                shape = manip_ops.concat([batch.as_list(), array_ops.shape(m)[-2:]], 0)
                m = manip_ops.broadcast_to(m, shape)
            out.append(m)
        return out
    dyn = array_ops.shape(mats[0])[:-2]
    for m in mats[1:]:
        dyn = framework_ops.broadcast_dynamic_shape(dyn, array_ops.shape(m)[:-2])
    return [
        manip_ops.broadcast_to(m, manip_ops.concat([dyn, array_ops.shape(m)[-2:]], 0))
        for m in mats
    ]


def matrix_solve_with_broadcast(matrix, rhs, adjoint=False):
    matrix = ops.convert_to_tensor(matrix, name="matrix")
    rhs = ops.convert_to_tensor(rhs, name="rhs", dtype=matrix.dtype)
    matrix, rhs = broadcast_matrix_batch_dims([matrix, rhs])
    return linalg_matrix_ops.matrix_solve(matrix, rhs, adjoint=adjoint)


def combine_hint(operator, hint_attr_name, provided, message):
    """An operator's hint or the provided one; a contradiction raises ValueError."""
    op_hint = getattr(operator, hint_attr_name)
    if (op_hint is False and provided) or (op_hint and provided is False):
        raise ValueError(message)
    if op_hint or provided:
        return True
    if op_hint is False or provided is False:
        return False
    return None


def is_adjoint_pair(x, y) -> bool:
    if x is y:
        if x.is_self_adjoint is False:
            return False
        if x.is_self_adjoint:
            return True
    return x.H is y or y.H is x


def is_aat_form(operators) -> bool:
    operators = list(operators)
    if not operators:
        raise ValueError("AAT form is undefined for empty operators")
    if len(operators) % 2:
        return False
    half = len(operators) // 2
    return all(is_adjoint_pair(operators[i], operators[-1 - i]) for i in range(half))


# TF's property_hint_util: the hints of a product of two operators.


def hint_self_adjoint_commuting(a, b):
    if a.is_self_adjoint and b.is_self_adjoint:
        return True
    if (a.is_self_adjoint is True and b.is_self_adjoint is False) or (
        a.is_self_adjoint is False and b.is_self_adjoint is True
    ):
        return False
    return None


def hint_square(a, b):
    if a.is_square and b.is_square:
        return True
    if a.is_square is False and b.is_square is False:
        m, n = a.range_dimension, b.domain_dimension
        if m is not None and n is not None:
            return m == n
    if a.is_square != b.is_square and a.is_square is not None and b.is_square is not None:
        return False
    return None


def hint_positive_definite_commuting(a, b):
    if (
        a.is_positive_definite is True
        and a.is_self_adjoint is True
        and b.is_positive_definite is True
        and b.is_self_adjoint is True
    ):
        return True
    return None


def hint_non_singular(a, b):
    if a.is_non_singular is False or b.is_non_singular is False:
        return False
    return a.is_non_singular and b.is_non_singular


def product_hints(a, b) -> dict:
    """The hints of a commuting product (Diag @ Diag and the like)."""
    return {
        "is_non_singular": hint_non_singular(a, b),
        "is_self_adjoint": hint_self_adjoint_commuting(a, b),
        "is_positive_definite": hint_positive_definite_commuting(a, b),
    }


def dim_value(d):
    return ts.dimension_value(d)


def with_rhs_shape(out, rhs):
    """A square solve's result has the right-hand side's matrix dimensions: say so
    statically where the solve op's shape function could not (unknown operator dims)."""
    if out.shape.ndims is not None and rhs.shape.ndims is not None:
        out.set_shape(out.shape[:-2].concatenate(rhs.shape[-2:]))
    return out


def eye(n, batch_shape, dtype):
    """[batch] identity matrices; n and batch_shape static (ints) or tensors."""
    if isinstance(n, int) and isinstance(batch_shape, list):
        return math_composites.eye(num_rows=n, batch_shape=batch_shape, dtype=dtype)
    shape = manip_ops.concat(
        [
            cast_ops.cast(batch_shape, dtypes.int32),
            array_ops.reshape(cast_ops.cast(n, dtypes.int32), [1]),
        ],
        0,
    )
    return linalg_matrix_ops.matrix_diag(array_ops.ones(shape, dtype=dtype))


# -- shared by the operators made of operators ------------------------------------------


def same_dtype(operators, message_fn):
    """The operators' common dtype.  Raises TypeError(message_fn(operators)) if none."""
    dtype = operators[0].dtype
    for operator in operators:
        if operator.dtype != dtype:
            raise TypeError(message_fn(operators))
    return dtype


def broadcast_batch_shape(operators):
    batch = operators[0].batch_shape
    for operator in operators[1:]:
        batch = framework_ops.broadcast_static_shape(batch, operator.batch_shape)
    return batch


def broadcast_batch_shape_tensor(operators):
    batch = operators[0].batch_shape_tensor()
    for operator in operators[1:]:
        batch = framework_ops.broadcast_dynamic_shape(batch, operator.batch_shape_tensor())
    return batch


class FactorwiseMixin:
    """For operators over a list of square factors whose adjoint, Cholesky factor and
    inverse are the same kind of operator over the factors' (BlockDiag, Kronecker, as
    TF's): the class gives `_rebuild(operators, **hints)`."""

    @property
    def operators(self) -> list:
        return self._operators

    def _rebuild(self, operators, **hints):
        raise NotImplementedError  # (abstract: each class builds its own kind)

    def _linop_adjoint(self):
        return self._rebuild(
            [o.adjoint() for o in self.operators],
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
        )

    def _linop_cholesky(self):
        return self._rebuild(
            [o.cholesky() for o in self.operators], is_non_singular=True, is_self_adjoint=None
        )

    def _linop_inverse(self):
        return self._rebuild(
            [o.inverse() for o in self.operators],
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
        )
