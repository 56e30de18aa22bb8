"""TF 2.21's LinearOperatorKronecker (`A1 x A2 x ...`, applied factor by factor to its
reshaped argument, never formed) and LinearOperatorLowRankUpdate (`L + U D V^H`, solved
by the Woodbury identity and the r x r capacitance matrix).  See linalg_operator.py for
the base class.
"""

from __future__ import annotations

from asyncflow import dtypes, errors, framework_extras, math_composites
from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow import linalg_operator_util as lou
from asyncflow import tensor_shape as ts
from asyncflow.linalg_operators_diag import LinearOperatorDiag, LinearOperatorIdentity
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_ordering,
    framework_ops,
    linalg_matrix_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    reduction_ops,
)

__all__ = ["LinearOperatorKronecker", "LinearOperatorLowRankUpdate"]


# -- Kronecker --------------------------------------------------------------------------


def _static_or_dynamic_shape(x):
    return x.shape.as_list() if x.shape.is_fully_defined() else array_ops.shape(x)


def _concat_shape(first, second):
    """first (a list or a shape tensor) + second (ints or scalar tensors)."""
    statics = [lou.static_value(s) if ops.is_tensor(s) else s for s in second]
    if isinstance(first, list) and all(s is not None for s in statics):
        return first + [int(s) for s in statics]
    return manip_ops.concat([first, manip_ops.stack(list(second))], 0)


class LinearOperatorKronecker(lou.FactorwiseMixin, lo.LinearOperator):
    """The Kronecker product `A1 x A2 x ... x An`; it acts by reshaping its argument
    and applying each factor in turn, never forming the product.

    Raises:
      TypeError: the operators' dtypes differ.
      ValueError: an empty list, or a hint contradicting the factors'.
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
            raise ValueError(
                f"Argument `operators` must be a list of >=1 operators. Received: {operators}."
            )
        self._operators = operators
        dtype = lou.same_dtype(
            operators,
            lambda o: (
                "Expected every operation in argument `operators` to have the same "
                f"dtype. Received {[str((x.name, x.dtype)) for x in o]}."
            ),
        )
        checks = (
            ("is_non_singular", is_non_singular, "non-singular"),
            ("is_self_adjoint", is_self_adjoint, "self-adjoint"),
            ("is_positive_definite", is_positive_definite, "positive-definite"),
        )
        hints = {}
        for hint, given, what in checks:
            if all(getattr(op, hint) for op in operators):
                if given is False:
                    raise ValueError(
                        f"The Kronecker product of {what} operators is always {what}. "
                        f"Expected argument `{hint}` to be True. Received: {given}."
                    )
                given = True
            hints[hint] = given
        if name is None:
            name = "_x_".join(operator.name for operator in operators)
        with ops.name_scope(name):
            super().__init__(
                dtype=dtype, is_square=is_square, parameters=parameters, name=name, **hints
            )

    def _shape(self):
        domain = self.operators[0].domain_dimension
        rng = self.operators[0].range_dimension
        for operator in self.operators[1:]:
            domain = domain * operator.domain_dimension
            rng = rng * operator.range_dimension
        return lou.broadcast_batch_shape(self.operators).concatenate(ts.TensorShape([rng, domain]))

    def _shape_tensor(self):
        domain = self.operators[0].domain_dimension_tensor()
        rng = self.operators[0].range_dimension_tensor()
        for operator in self.operators[1:]:
            domain = domain * operator.domain_dimension_tensor()
            rng = rng * operator.range_dimension_tensor()
        matrix = manip_ops.stack([rng, domain])
        return manip_ops.concat([lou.broadcast_batch_shape_tensor(self.operators), matrix], 0)

    def _rebuild(self, operators, **hints):
        return LinearOperatorKronecker(operators=operators, is_square=True, **hints)

    def _apply_factors(self, x, fn, adjoint=False, adjoint_arg=False):
        """Apply each factor (last first) to x reshaped so the factor's dimension is the
        trailing one: (A x B) vec(X) = vec(B X A^T), generalised."""
        out = lou.conj(x) if adjoint_arg else math_composites.matrix_transpose(x)
        for o in reversed(self.operators):
            d = o.range_dimension_tensor() if adjoint else o.domain_dimension_tensor()
            shape = _static_or_dynamic_shape(out)
            d_static = lou.static_value(d)
            if d_static is not None and isinstance(shape, list):
                d = int(d_static)
                dim = shape[-2] * shape[-1] // d
            else:
                dim = cast_ops.cast(shape[-2] * shape[-1] // d, dtypes.int32)
            out = array_ops.reshape(out, _concat_shape(shape[:-2], [dim, d]))
            out = fn(o, lou.conj(out), adjoint=adjoint, adjoint_arg=True)
        shape_x = _static_or_dynamic_shape(x)
        col = shape_x[-2] if adjoint_arg else shape_x[-1]
        row = self.domain_dimension_tensor() if adjoint else self.range_dimension_tensor()
        out = array_ops.reshape(out, _concat_shape(_static_or_dynamic_shape(out)[:-2], [row, col]))
        if x.shape.is_fully_defined():
            batch = framework_ops.broadcast_static_shape(x.shape[:-2], self.batch_shape)
            rows = self.domain_dimension if adjoint else self.range_dimension
            out.set_shape(batch.concatenate([rows, x.shape[-2] if adjoint_arg else x.shape[-1]]))
        return out

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        def fn(o, y, adjoint, adjoint_arg):
            return o.matmul(y, adjoint=adjoint, adjoint_arg=adjoint_arg)

        return self._apply_factors(x, fn, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        def fn(o, y, adjoint, adjoint_arg):
            return o.solve(y, adjoint=adjoint, adjoint_arg=adjoint_arg)

        return self._apply_factors(rhs, fn, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _power(self, operator):
        """n / n_i, the power of a factor's determinant in the product's, as the dtype."""
        total = self.domain_dimension_tensor()
        ratio = math_ops.truediv(total, operator.domain_dimension_tensor())
        return cast_ops.cast(ratio, operator.dtype)

    def _determinant(self):
        det = 1.0
        for operator in self.operators:
            det = det * operator.determinant() ** self._power(operator)
        return det

    def _log_abs_determinant(self):
        lad = 0.0
        for operator in self.operators:
            lad += operator.log_abs_determinant() * self._power(operator)
        return lad

    def _trace(self):
        trace = 1.0
        for operator in self.operators:
            trace = trace * operator.trace()
        return trace

    def _outer_flat(self, values):
        """Kronecker product of [batch] vectors: the outer product, flattened."""
        out = values[0]
        for v in values[1:]:
            out = array_ops.expand_dims(out, -1) * array_ops.expand_dims(v, -2)
            out = array_ops.reshape(out, manip_ops.concat([array_ops.shape(out)[:-2], [-1]], 0))
        return out

    def _diag_part(self):
        out = self._outer_flat([op.diag_part() for op in self.operators])
        d = (
            self.domain_dimension
            if self.range_dimension > self.domain_dimension
            else (self.range_dimension)
        )
        out.set_shape(self.batch_shape.concatenate([d]))
        return out

    def _to_dense(self):
        product = self.operators[0].to_dense()
        for operator in self.operators[1:]:
            a = array_ops.expand_dims(array_ops.expand_dims(product, -1), -3)
            b = array_ops.expand_dims(array_ops.expand_dims(operator.to_dense(), -2), -4)
            product = a * b
            shape = _static_or_dynamic_shape(product)
            product = array_ops.reshape(
                product, _concat_shape(shape[:-4], [shape[-4] * shape[-3], shape[-2] * shape[-1]])
            )
        product.set_shape(self.shape)
        return product

    def _eigvals(self):
        out = self._outer_flat([op.eigvals() for op in self.operators])
        out.set_shape(self.shape[:-1])
        return out

    def _all_square_or_fail(self):
        if not all(operator.is_square for operator in self.operators):
            raise errors.InvalidArgumentError(
                None,
                None,
                "All Kronecker factors must be square for the product to be invertible. "
                "Expected hint `is_square` to be True for every operator in argument "
                "`operators`.",
            )

    def _assert_non_singular(self):
        self._all_square_or_fail()
        return control_flow_ordering.group(*[o.assert_non_singular() for o in self.operators])

    def _assert_self_adjoint(self):
        self._all_square_or_fail()
        return control_flow_ordering.group(*[o.assert_self_adjoint() for o in self.operators])


# -- LowRankUpdate ----------------------------------------------------------------------


class LinearOperatorLowRankUpdate(lo.LinearOperator):
    """`L + U D V^H`: a base operator L plus a rank-r update (D diagonal, the identity
    by default; V = U by default).  Solves and determinants go through the r x r
    capacitance matrix `D^-1 + V^H L^-1 U` (Cholesky when L and D are positive definite
    and V is U).

    Raises:
      ValueError: is_diag_update_positive=False without a diag_update, a hint
        contradicting what the arguments imply, or mismatched shapes of u, v and the base
        operator.
    """

    def __init__(
        self,
        base_operator,
        u,
        diag_update=None,
        v=None,
        is_diag_update_positive=None,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorLowRankUpdate",
    ):
        parameters = dict(
            base_operator=base_operator,
            u=u,
            diag_update=diag_update,
            v=v,
            is_diag_update_positive=is_diag_update_positive,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        dtype = base_operator.dtype
        if diag_update is None:
            if is_diag_update_positive is False:
                raise ValueError(
                    "Default diagonal is the identity, which is positive.  However, user set "
                    "'is_diag_update_positive' to False."
                )
            is_diag_update_positive = True
        self._use_cholesky = bool(
            base_operator.is_positive_definite
            and base_operator.is_self_adjoint
            and is_diag_update_positive
            and v is None
        )
        if base_operator.is_self_adjoint and v is None and not dtype.is_complex:
            if is_self_adjoint is False:
                raise ValueError(
                    "A = L + UDU^H, with L self-adjoint and D real diagonal.  Since UDU^H is "
                    "self-adjoint, this must be a self-adjoint operator."
                )
            is_self_adjoint = True
        if self._use_cholesky:
            if (
                is_positive_definite is False
                or is_self_adjoint is False
                or is_non_singular is False
            ):
                raise ValueError(
                    "Arguments imply this is self-adjoint positive-definite operator."
                )
            is_positive_definite = True
            is_self_adjoint = True
        with ops.name_scope(name):
            self._u = lou.to_tensor(u, name="u")
            self._v = self._u if v is None else lou.to_tensor(v, name="v")
            self._diag_update = (
                None if diag_update is None else lou.to_tensor(diag_update, name="diag_update")
            )
            self._base_operator = base_operator
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=is_square,
                parameters=parameters,
                name=name,
            )
            if diag_update is not None:
                self._diag_operator = LinearOperatorDiag(
                    self._diag_update, is_positive_definite=is_diag_update_positive
                )
            else:
                r = ts.dimension_value(self._u.shape[-1])
                if r is None:
                    r = array_ops.shape(self._u)[-1]
                self._diag_operator = LinearOperatorIdentity(num_rows=r, dtype=self.dtype)
            self._is_diag_update_positive = is_diag_update_positive
            self._check_shapes()

    def _check_shapes(self):
        uv = framework_ops.broadcast_static_shape(self.u.shape, self.v.shape)
        batch = framework_ops.broadcast_static_shape(self.base_operator.batch_shape, uv[:-2])
        ts.Dimension(
            ts.dimension_value(self.base_operator.domain_dimension)
        ).assert_is_compatible_with(uv[-2])
        if self._diag_update is not None:
            ts.dimension_at_index(uv, -1).assert_is_compatible_with(self._diag_update.shape[-1])
            framework_ops.broadcast_static_shape(batch, self._diag_update.shape[:-1])

    @property
    def u(self):
        return self._u

    @property
    def v(self):
        return self._v

    @property
    def is_diag_update_positive(self):
        return self._is_diag_update_positive

    @property
    def diag_update(self):
        return self._diag_update

    @property
    def diag_operator(self):
        return self._diag_operator

    @property
    def base_operator(self):
        return self._base_operator

    def _assert_self_adjoint(self):
        if self.u is self.v and self.diag_update is None:
            return self.base_operator.assert_self_adjoint()
        # (TF calls the public assert_self_adjoint here, which recurses without end)
        return super()._assert_self_adjoint()

    def _shape(self):
        batch = framework_ops.broadcast_static_shape(
            self.base_operator.batch_shape, self.diag_operator.batch_shape
        )
        batch = framework_ops.broadcast_static_shape(batch, self.u.shape[:-2])
        batch = framework_ops.broadcast_static_shape(batch, self.v.shape[:-2])
        return batch.concatenate(self.base_operator.shape[-2:])

    def _shape_tensor(self):
        batch = framework_ops.broadcast_dynamic_shape(
            self.base_operator.batch_shape_tensor(), self.diag_operator.batch_shape_tensor()
        )
        batch = framework_ops.broadcast_dynamic_shape(batch, array_ops.shape(self.u)[:-2])
        batch = framework_ops.broadcast_dynamic_shape(batch, array_ops.shape(self.v)[:-2])
        return manip_ops.concat([batch, self.base_operator.shape_tensor()[-2:]], 0)

    def _uv(self):
        u = ops.convert_to_tensor(self.u)
        return u, (u if self.v is self.u else ops.convert_to_tensor(self.v))

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        u, v = self._uv()
        leading = self.base_operator.matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        if adjoint:
            u, v = v, u
        vh_x = matmul_ops.matmul(v, x, adjoint_a=True, adjoint_b=adjoint_arg)
        d_vh_x = self.diag_operator.matmul(vh_x, adjoint=adjoint)
        return leading + matmul_ops.matmul(u, d_vh_x)

    def _determinant(self):
        if self.is_positive_definite:
            return math_ops.exp(self.log_abs_determinant())
        u, v = self._uv()
        det_c = linalg_matrix_ops.matrix_determinant(self._make_capacitance(u=u, v=v))
        return det_c * self.diag_operator.determinant() * self.base_operator.determinant()

    def _diag_part(self):
        u, v = self._uv()
        product = u * lou.conj(v)
        if self.diag_update is not None:
            product *= array_ops.expand_dims(self.diag_update, -2)
        return reduction_ops.reduce_sum(product, axis=-1) + self.base_operator.diag_part()

    def _log_abs_determinant(self):
        u, v = self._uv()
        lad_d = self.diag_operator.log_abs_determinant()
        lad_l = self.base_operator.log_abs_determinant()
        capacitance = self._make_capacitance(u=u, v=v)
        if self._use_cholesky:
            chol = linalg_matrix_ops.matrix_diag_part(linalg_matrix_ops.cholesky(capacitance))
            lad_c = 2 * reduction_ops.reduce_sum(math_ops.log(chol), axis=[-1])
        else:
            det_c = linalg_matrix_ops.matrix_determinant(capacitance)
            lad_c = math_ops.log(math_ops.abs(det_c))
            if self.dtype.is_complex:
                lad_c = cast_ops.cast(lad_c, self.dtype)
        return lad_c + lad_d + lad_l

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        if self.base_operator.is_non_singular is False:
            raise ValueError(
                "Solve not implemented unless this is a perturbation of a non-singular "
                "LinearOperator."
            )
        base = self.base_operator
        u, v = self._uv()
        # C = D^-1 + V^H L^-1 U; the adjoint solve uses C^H with u and v exchanged.
        capacitance = self._make_capacitance(u=u, v=v)
        if adjoint:
            u, v = v, u
        linv_rhs = base.solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        vh_linv_rhs = matmul_ops.matmul(v, linv_rhs, adjoint_a=True)
        if self._use_cholesky:
            chol, vh_linv_rhs = lou.broadcast_matrix_batch_dims(
                [linalg_matrix_ops.cholesky(capacitance), vh_linv_rhs]
            )
            cap_inv = linalg_matrix_ops.cholesky_solve(chol, vh_linv_rhs)
        else:
            cap_inv = lou.matrix_solve_with_broadcast(capacitance, vh_linv_rhs, adjoint=adjoint)
        correction = base.solve(matmul_ops.matmul(u, cap_inv), adjoint=adjoint)
        return linv_rhs - correction

    def _make_capacitance(self, u, v):
        vh_linv_u = matmul_ops.matmul(v, self.base_operator.solve(u), adjoint_a=True)
        return self._diag_operator.inverse().add_to_tensor(vh_linv_u)
