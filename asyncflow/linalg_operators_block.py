"""TF 2.21's block LinearOperators: BlockDiag (a direct sum) and BlockLowerTriangular.
Each acts block by block through its operators' own (specialised) methods, and takes
and returns a list of blocks in place of a tensor, as TF's do.  Kronecker and
LowRankUpdate are in linalg_operators_kronecker.py.
"""

from __future__ import annotations

from asyncflow import framework_extras
from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow import linalg_operator_util as lou
from asyncflow import tensor_shape as ts
from asyncflow.linalg_operators_matrix import LinearOperatorFullMatrix
from asyncflow.ops import array_ops, control_flow_ordering, manip_ops, math_ops, slicing_ops

__all__ = ["LinearOperatorBlockDiag", "LinearOperatorBlockLowerTriangular"]


def _names_types(operators) -> str:
    return "   ".join(str((o.name, o.dtype)) for o in operators)


def _is_nested(x) -> bool:
    return isinstance(x, (list, tuple))


def arg_is_blockwise(block_dimensions, arg, arg_split_dim) -> bool:
    """Whether `arg` is a list of one tensor per block (TF's rule, ambiguity included).

    Raises:
      ValueError: the list's dimensions match neither the blocks nor the whole.
    """
    if not (isinstance(arg, (tuple, list)) and len(arg) == len(block_dimensions)):
        return False
    if not any(_is_nested(x) for x in arg):
        return True
    arg_dims = [ops.convert_to_tensor(x).shape[arg_split_dim] for x in arg]
    self_dims = [d.value for d in block_dimensions]
    if all(d is None for d in self_dims):
        if len(arg_dims) == 1:
            return False
        if any(d != arg_dims[0] for d in arg_dims):
            return True
        raise ValueError(
            "Parsing of the input structure is ambiguous. Please input a blockwise iterable "
            "of `Tensor`s or a single `Tensor`."
        )
    if all(s == a or s is None for s, a in zip(self_dims, arg_dims)):
        return True
    total = sum(s for s in self_dims if s is not None)
    if all(a == arg_dims[0] for a in arg_dims) and arg_dims[0] >= total:
        return False
    raise ValueError("Input dimension does not match operator dimension.")


def split_arg_into_blocks(block_dims, block_dims_fn, arg, axis=-1):
    sizes = [d.value for d in block_dims]
    if any(d is None for d in sizes):
        sizes = block_dims_fn()
    return slicing_ops.split(arg, sizes, axis=axis)


def _squeeze_last(x):
    return array_ops.squeeze(x, axis=[-1])


def _concat_vectors(vectors):
    """Concatenate [batch] vectors after broadcasting their batch dimensions."""
    mats = lou.broadcast_matrix_batch_dims([array_ops.expand_dims(v, -1) for v in vectors])
    return _squeeze_last(manip_ops.concat(mats, -2))


class _Blockwise(lo.LinearOperator):
    """What BlockDiag and BlockLowerTriangular share: their diagonal blocks set the
    block dimensions; arguments may be one tensor or a list of one per block."""

    def _block_range_dimensions(self):
        return [op.range_dimension for op in self._diagonal_operators]

    def _block_domain_dimensions(self):
        return [op.domain_dimension for op in self._diagonal_operators]

    def _block_range_dimension_tensors(self):
        return [op.range_dimension_tensor() for op in self._diagonal_operators]

    def _block_domain_dimension_tensors(self):
        return [op.domain_dimension_tensor() for op in self._diagonal_operators]

    def _checked_blocks(self, x, block_dimensions, arg_dim):
        x = list(x)
        for i, block in enumerate(x):
            if not isinstance(block, lo.LinearOperator):
                block = ops.convert_to_tensor(block)
                self._check_input_dtype(block)
                block_dimensions[i].assert_is_compatible_with(block.shape[arg_dim])
                x[i] = block
        return x

    def _checked_whole(self, x, dimension, arg_dim, name):
        x = ops.convert_to_tensor(x, name=name)
        self._check_input_dtype(x)
        dimension.assert_is_compatible_with(x.shape[arg_dim])
        return x

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """As LinearOperator.matmul; x may also be a list of one tensor per block (a list
        comes back)."""
        if isinstance(x, lo.LinearOperator):
            return self._matmul_operator(x, adjoint, adjoint_arg, name)
        with self._name_scope(name):
            arg_dim = -1 if adjoint_arg else -2
            dims = self._block_range_dimensions() if adjoint else self._block_domain_dimensions()
            if arg_is_blockwise(dims, x, arg_dim):
                x = self._checked_blocks(x, dims, arg_dim)
            else:
                dimension = self.range_dimension if adjoint else self.domain_dimension
                x = self._checked_whole(x, dimension, arg_dim, "x")
            return self._matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _matmul_operator(self, x, adjoint, adjoint_arg, name):
        return lo.LinearOperator.matmul(
            self, x, adjoint=adjoint, adjoint_arg=adjoint_arg, name=name
        )

    def matvec(self, x, adjoint=False, name="matvec"):
        with self._name_scope(name):
            dims = self._block_range_dimensions() if adjoint else self._block_domain_dimensions()
            if arg_is_blockwise(dims, x, -1):
                x = self._checked_blocks(x, dims, -1)
                y = self.matmul([array_ops.expand_dims(b, -1) for b in x], adjoint=adjoint)
                return [_squeeze_last(b) for b in y]
            dimension = self.range_dimension if adjoint else self.domain_dimension
            x = self._checked_whole(x, dimension, -1, "x")
            return _squeeze_last(self.matmul(array_ops.expand_dims(x, -1), adjoint=adjoint))

    def solvevec(self, rhs, adjoint=False, name="solve"):
        with self._name_scope(name):
            dims = self._block_domain_dimensions() if adjoint else self._block_range_dimensions()
            if arg_is_blockwise(dims, rhs, -1):
                rhs = self._checked_blocks(rhs, dims, -1)
                y = self.solve([array_ops.expand_dims(b, -1) for b in rhs], adjoint=adjoint)
                return [_squeeze_last(b) for b in y]
            dimension = self.domain_dimension if adjoint else self.range_dimension
            rhs = self._checked_whole(rhs, dimension, -1, "rhs")
            return _squeeze_last(self.solve(array_ops.expand_dims(rhs, -1), adjoint=adjoint))

    def _solve_guards(self):
        if self.is_non_singular is False:
            raise NotImplementedError(
                "Exact solve not implemented for an operator that is expected to be singular."
            )
        if self.is_square is False:
            raise NotImplementedError(
                "Exact solve not implemented for an operator that is expected to not be square."
            )

    def _diag_concat(self, method: str):
        return _concat_vectors([getattr(op, method)() for op in self._diagonal_operators])

    def _dense_rows(self, rows):
        """Rows of dense blocks (each row ending at the diagonal) to the dense matrix."""
        flat = lou.broadcast_matrix_batch_dims([b for row in rows for b in row])
        out, start, num_cols = [], 0, 0
        total = self.domain_dimension_tensor()
        for row in rows:
            blocks = flat[start : start + len(row)]
            start += len(row)
            batch_row = array_ops.shape(blocks[0])[:-1]
            num_cols = num_cols + array_ops.shape(blocks[-1])[-1]
            after = manip_ops.concat([batch_row, manip_ops.stack([total - num_cols])], -1)
            out.append(manip_ops.concat([*blocks, array_ops.zeros(after, dtype=self.dtype)], -1))
        return manip_ops.concat(out, -2)


class LinearOperatorBlockDiag(lou.FactorwiseMixin, _Blockwise):
    """The direct sum `diag(A1, ..., An)` of operators (square by default).

    Raises:
      TypeError: the operators' dtypes differ.
      ValueError: an empty list, or a hint contradicting the operators' (the sum of
        non-singular / self-adjoint / positive definite operators is one too).
    """

    def __init__(
        self,
        operators,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=True,
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
        self._diagonal_operators = operators
        dtype = lou.same_dtype(
            operators,
            lambda o: f"Expected all operators to have the same dtype.  Found {_names_types(o)}",
        )
        hints = {}
        for hint, given, what in (
            ("is_non_singular", is_non_singular, "non-singular"),
            ("is_self_adjoint", is_self_adjoint, "self-adjoint"),
            ("is_positive_definite", is_positive_definite, "positive definite"),
        ):
            if all(getattr(op, hint) for op in operators):
                if given is False:
                    raise ValueError(f"The direct sum of {what} operators is always {what}.")
                given = True
            hints[hint] = given
        if name is None:
            name = "_ds_".join(operator.name for operator in operators)
        with ops.name_scope(name):
            super().__init__(
                dtype=dtype, is_square=is_square, parameters=parameters, name=name, **hints
            )

    def _shape(self):
        matrix = ts.TensorShape(
            [sum(self._block_range_dimensions()), sum(self._block_domain_dimensions())]
        )
        return lou.broadcast_batch_shape(self.operators).concatenate(matrix)

    def _shape_tensor(self):
        matrix = manip_ops.stack(
            [
                sum(self._block_range_dimension_tensors()),
                sum(self._block_domain_dimension_tensors()),
            ]
        )
        return manip_ops.concat([lou.broadcast_batch_shape_tensor(self.operators), matrix], 0)

    def _rebuild(self, operators, **hints):
        return LinearOperatorBlockDiag(operators=operators, is_square=True, **hints)

    def _linop_matmul(self, left, right):
        if isinstance(right, LinearOperatorBlockDiag):
            return self._rebuild(
                [o1.matmul(o2) for o1, o2 in zip(left.operators, right.operators)],
                is_non_singular=lou.hint_non_singular(left, right),
                is_self_adjoint=None,
                is_positive_definite=None,
            )
        return super()._linop_matmul(left, right)

    def _linop_solve(self, left, right):
        if isinstance(right, LinearOperatorBlockDiag):
            return self._rebuild(
                [o1.solve(o2) for o1, o2 in zip(left.operators, right.operators)],
                is_non_singular=lou.hint_non_singular(left, right),
                is_self_adjoint=None,
                is_positive_definite=None,
            )
        return super()._linop_solve(left, right)

    def _check_blocks_agree(self, left, right, what, arg):
        _check_dims(
            right,
            left,
            f"Operators are incompatible. Expected `{arg}` to have "
            f"dimension {left.domain_dimension} but got {right.range_dimension}.",
        )
        if isinstance(right, LinearOperatorBlockDiag):
            if len(left.operators) != len(right.operators):
                raise ValueError(f"Can not efficiently {what} when number of blocks differ.")
            for o1, o2 in zip(left.operators, right.operators):
                _check_dims(
                    o2,
                    o1,
                    "Blocks are incompatible. Expected `x` to have dimension "
                    f"{o1.domain_dimension} but got {o2.range_dimension}.",
                )

    def _matmul_operator(self, x, adjoint, adjoint_arg, name):
        left = self.adjoint() if adjoint else self
        right = x.adjoint() if adjoint_arg else x
        if isinstance(x, LinearOperatorBlockDiag):
            self._check_blocks_agree(
                left, right, "multiply two `LinearOperatorBlockDiag`s together", "x"
            )
        else:
            self._check_blocks_agree(left, right, "", "x")
        with self._name_scope(name):
            return self._linop_matmul(left, right)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        arg_dim = -1 if adjoint_arg else -2
        if adjoint:
            dims, dims_fn = (self._block_range_dimensions(), self._block_range_dimension_tensors)
        else:
            dims, dims_fn = (self._block_domain_dimensions(), self._block_domain_dimension_tensors)
        blockwise = arg_is_blockwise(dims, x, arg_dim)
        split_x = x if blockwise else split_arg_into_blocks(dims, dims_fn, x, axis=arg_dim)
        results = [
            op.matmul(split_x[i], adjoint=adjoint, adjoint_arg=adjoint_arg)
            for i, op in enumerate(self.operators)
        ]
        if blockwise:
            return results
        return manip_ops.concat(lou.broadcast_matrix_batch_dims(results), -2)

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

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """As LinearOperator.solve, block by block; rhs may be a list of blocks."""
        self._solve_guards()
        if isinstance(rhs, lo.LinearOperator):
            left = self.adjoint() if adjoint else self
            right = rhs.adjoint() if adjoint_arg else rhs
            if isinstance(right, LinearOperatorBlockDiag):
                self._check_blocks_agree(left, right, "solve `LinearOperatorBlockDiag`", "x")
            else:
                self._check_blocks_agree(left, right, "", "x")
            with self._name_scope(name):
                return self._linop_solve(left, right)
        with self._name_scope(name):
            dims = self._block_domain_dimensions() if adjoint else self._block_range_dimensions()
            arg_dim = -1 if adjoint_arg else -2
            blockwise = arg_is_blockwise(dims, rhs, arg_dim)
            if blockwise:
                split_rhs = self._checked_blocks(rhs, dims, arg_dim)
            else:
                dimension = self.domain_dimension if adjoint else self.range_dimension
                rhs = self._checked_whole(rhs, dimension, arg_dim, "rhs")
                split_rhs = split_arg_into_blocks(
                    self._block_domain_dimensions(),
                    self._block_domain_dimension_tensors,
                    rhs,
                    axis=arg_dim,
                )
            solutions = [
                op.solve(split_rhs[i], adjoint=adjoint, adjoint_arg=adjoint_arg)
                for i, op in enumerate(self.operators)
            ]
            if blockwise:
                return solutions
            return manip_ops.concat(lou.broadcast_matrix_batch_dims(solutions), -2)

    def _all_square_or_raise(self, what):
        if not all(operator.is_square for operator in self.operators):
            raise NotImplementedError(
                f"`{what}` not implemented for an operator whose blocks are not square."
            )

    def _diag_part(self):
        self._all_square_or_raise("diag_part")
        return self._diag_concat("diag_part")

    def _trace(self):
        self._all_square_or_raise("trace")
        result = self.operators[0].trace()
        for operator in self.operators[1:]:
            result += operator.trace()
        return result

    def _to_dense(self):
        # Each block row: zeros up to the block, the block, zeros after it.
        dense = lou.broadcast_matrix_batch_dims([op.to_dense() for op in self.operators])
        rows, num_cols = [], 0
        total = self.domain_dimension_tensor()
        for block in dense:
            batch_row = array_ops.shape(block)[:-1]
            before = manip_ops.concat([batch_row, manip_ops.stack([num_cols])], -1)
            num_cols = num_cols + array_ops.shape(block)[-1]
            after = manip_ops.concat([batch_row, manip_ops.stack([total - num_cols])], -1)
            rows.append(
                manip_ops.concat(
                    [
                        array_ops.zeros(before, dtype=block.dtype),
                        block,
                        array_ops.zeros(after, dtype=block.dtype),
                    ],
                    -1,
                )
            )
        mat = manip_ops.concat(rows, -2)
        mat.set_shape(self.shape)
        return mat

    def _assert_non_singular(self):
        return control_flow_ordering.group(*[o.assert_non_singular() for o in self.operators])

    def _assert_self_adjoint(self):
        return control_flow_ordering.group(*[o.assert_self_adjoint() for o in self.operators])

    def _assert_positive_definite(self):
        return control_flow_ordering.group(*[o.assert_positive_definite() for o in self.operators])

    def _eigvals(self):
        self._all_square_or_raise("eigvals")
        return self._diag_concat("eigvals")


def _check_dims(r, left, message):
    if (
        r.range_dimension is not None
        and left.domain_dimension is not None
        and r.range_dimension != left.domain_dimension
    ):
        raise ValueError(message)


class LinearOperatorBlockLowerTriangular(_Blockwise):
    """A square block lower-triangular operator; `operators[i]` is row i's i+1 blocks
    (the last one on the diagonal).  Solves are block forward/back substitution.

    Raises:
      TypeError: the operators' dtypes differ.
      ValueError: an empty list, a row of the wrong length, blocks of mismatched
        dimensions, a non-square diagonal block, is_square=False, or a non-singular hint
        contradicting the diagonal blocks'.
    """

    def __init__(
        self,
        operators,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorBlockLowerTriangular",
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
        for row in operators:
            framework_extras.assert_proper_iterable(row)
        operators = [list(row) for row in operators]
        if not operators:
            raise ValueError(
                f"Argument `operators` must be a list of >=1 operators. Received: {operators}."
            )
        self._operators = operators
        self._diagonal_operators = [row[-1] for row in operators]
        dtype = operators[0][0].dtype
        for i, row in enumerate(operators):
            for operator in row:
                if operator.dtype != dtype:
                    name_type = (str((o.name, o.dtype)) for o in row)
                    raise TypeError(
                        f"Expected all operators to have the same dtype.  Found {name_type} "
                        f"in row {i} and {dtype} in row 0."
                    )
        is_non_singular = self._validate_non_singular(is_non_singular)
        for i, row in enumerate(operators):
            if len(row) != i + 1:
                raise ValueError(
                    f"Argument `operators[{i}]` must contain `{i + 1}` blocks. Received: "
                    f"{len(row)} blocks."
                )
        self._validate_operator_dimensions()
        if is_square is False:
            raise ValueError(
                "`LinearOperatorBlockLowerTriangular` must be square. Expected argument "
                f"`is_square` to be True. Received: {is_square}."
            )
        for i, op in enumerate(self._diagonal_operators):
            if op.is_square is False:
                raise ValueError(
                    "Matrices on the diagonal (the final elements of each row-partition in "
                    "the `operators` list) must be square. Expected argument "
                    f"`operators[{i}][-1].is_square` to be True. Received: {op.is_square}."
                )
        with ops.name_scope(name):
            super().__init__(
                dtype=dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    def _validate_non_singular(self, is_non_singular):
        diagonal = self._diagonal_operators
        if all(op.is_non_singular for op in diagonal):
            if is_non_singular is False:
                raise ValueError(
                    "A blockwise lower-triangular operator with non-singular operators on the "
                    "main diagonal is always non-singular. Expected argument `is_non_singular` "
                    f"to be True. Received: {is_non_singular}."
                )
            return True
        if any(op.is_non_singular is False for op in diagonal):
            if is_non_singular is True:
                raise ValueError(
                    "A blockwise lower-triangular operator with a singular operator on the "
                    "main diagonal is always singular. Expected argument `is_non_singular` to "
                    f"be True. Received: {is_non_singular}."
                )
            return False
        return None

    def _validate_operator_dimensions(self):
        for i in range(1, len(self.operators)):
            for j in range(i):
                op = self.operators[i][j]
                above = self.operators[i - 1][j]
                right = self.operators[i][j + 1]
                if op.domain_dimension is not None and above.domain_dimension is not None:
                    if op.domain_dimension != above.domain_dimension:
                        raise ValueError(
                            f"Argument `operators[{i}][{j}].domain_dimension` "
                            f"({op.domain_dimension}) must be the same as "
                            f"`operators[{i - 1}][{j}].domain_dimension` "
                            f"({above.domain_dimension})."
                        )
                if op.range_dimension is not None and right.range_dimension is not None:
                    if op.range_dimension != right.range_dimension:
                        raise ValueError(
                            f"Argument `operators[{i}][{j}].range_dimension` "
                            f"({op.range_dimension}) must be the same as "
                            f"`operators[{i}][{j + 1}].range_dimension` "
                            f"({right.range_dimension})."
                        )

    @property
    def operators(self) -> list:
        return self._operators

    def _all_operators(self):
        return [op for row in self.operators for op in row]

    def _shape(self):
        # (TF writes [domain, range]; the operator is square, so they agree)
        matrix = ts.TensorShape(
            [sum(self._block_domain_dimensions()), sum(self._block_range_dimensions())]
        )
        return lou.broadcast_batch_shape(self._all_operators()).concatenate(matrix)

    def _shape_tensor(self):
        matrix = manip_ops.stack(
            [
                sum(self._block_domain_dimension_tensors()),
                sum(self._block_range_dimension_tensors()),
            ]
        )
        return manip_ops.concat(
            [lou.broadcast_batch_shape_tensor(self._all_operators()), matrix], 0
        )

    def _linop_inverse(self):
        """Block forward substitution: the inverse's bottom row is -D^-1 (sum of the row
        times the upper-left inverse), each block a dense FullMatrix."""
        hints = {
            "is_non_singular": self.is_non_singular,
            "is_self_adjoint": self.is_self_adjoint,
            "is_positive_definite": self.is_positive_definite,
            "is_square": True,
        }
        if len(self.operators) == 1:
            return LinearOperatorBlockLowerTriangular([[self.operators[0][0].inverse()]], **hints)
        n = len(self.operators)
        upper_left = LinearOperatorBlockLowerTriangular(self.operators[:-1]).inverse()
        bottom = self.operators[-1]
        bottom_right_inv = bottom[-1].inverse()
        row = []
        for i in range(n - 1):
            total = None
            for j in range(i, n - 1):
                term = bottom[j].matmul(upper_left.operators[j][i]).to_dense()
                total = term if total is None else total + term
            block = bottom_right_inv.matmul(total)
            row.append(LinearOperatorFullMatrix(-block))
        row.append(bottom_right_inv)
        return LinearOperatorBlockLowerTriangular(upper_left.operators + [row], **hints)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        arg_dim = -1 if adjoint_arg else -2
        dims = self._block_range_dimensions() if adjoint else self._block_domain_dimensions()
        blockwise = arg_is_blockwise(dims, x, arg_dim)
        if blockwise:
            split_x = x
        else:
            split_x = split_arg_into_blocks(
                self._block_domain_dimensions(),
                self._block_domain_dimension_tensors,
                x,
                axis=arg_dim,
            )
        n = len(self.operators)
        results = []
        if adjoint:  # column i of the blocks, adjointed
            for i in range(n):
                result = self.operators[i][i].matmul(
                    split_x[i], adjoint=adjoint, adjoint_arg=adjoint_arg
                )
                for j in range(i + 1, n):
                    result += self.operators[j][i].matmul(
                        split_x[j], adjoint=adjoint, adjoint_arg=adjoint_arg
                    )
                results.append(result)
        else:
            for row in self.operators:
                result = row[0].matmul(split_x[0], adjoint=adjoint, adjoint_arg=adjoint_arg)
                for j, operator in enumerate(row[1:]):
                    result += operator.matmul(
                        split_x[j + 1], adjoint=adjoint, adjoint_arg=adjoint_arg
                    )
                results.append(result)
        if blockwise:
            return results
        return manip_ops.concat(lou.broadcast_matrix_batch_dims(results), -2)

    def _determinant(self):
        if all(op.is_positive_definite for op in self._diagonal_operators):
            return math_ops.exp(self._log_abs_determinant())
        result = self._diagonal_operators[0].determinant()
        for op in self._diagonal_operators[1:]:
            result *= op.determinant()
        return result

    def _log_abs_determinant(self):
        result = self._diagonal_operators[0].log_abs_determinant()
        for op in self._diagonal_operators[1:]:
            result += op.log_abs_determinant()
        return result

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """Block forward (back, for adjoint) substitution; rhs may be a list of blocks."""
        self._solve_guards()
        if isinstance(rhs, lo.LinearOperator):
            return lo.LinearOperator.solve(
                self, rhs, adjoint=adjoint, adjoint_arg=adjoint_arg, name=name
            )
        with self._name_scope(name):
            dims = self._block_domain_dimensions() if adjoint else self._block_range_dimensions()
            arg_dim = -1 if adjoint_arg else -2
            blockwise = arg_is_blockwise(dims, rhs, arg_dim)
            if blockwise:
                split_rhs = self._checked_blocks(rhs, dims, arg_dim)
                if adjoint_arg:
                    split_rhs = [lou.adjoint_tensor(y) for y in split_rhs]
            else:
                dimension = self.domain_dimension if adjoint else self.range_dimension
                rhs = self._checked_whole(rhs, dimension, arg_dim, "rhs")
                rhs = lou.adjoint_tensor(rhs) if adjoint_arg else rhs
                split_rhs = split_arg_into_blocks(
                    self._block_domain_dimensions(),
                    self._block_domain_dimension_tensors,
                    rhs,
                    axis=-2,
                )
            solutions = self._substitute(split_rhs, adjoint)
            if blockwise:
                return solutions
            return manip_ops.concat(lou.broadcast_matrix_batch_dims(solutions), -2)

    def _substitute(self, split_rhs, adjoint):
        n = len(self.operators)
        solutions = []
        if adjoint:
            for i in reversed(range(n)):
                y = split_rhs[i]
                for j in reversed(range(i + 1, n)):
                    y = y - self.operators[j][i].matmul(solutions[n - 1 - j], adjoint=True)
                solutions.append(self._diagonal_operators[i].solve(y, adjoint=True))
            solutions.reverse()
            return solutions
        for row, y in zip(self.operators, split_rhs):
            for i, operator in enumerate(row[:-1]):
                y = y - operator.matmul(solutions[i])
            solutions.append(row[-1].solve(y))
        return solutions

    def _diag_part(self):
        return self._diag_concat("diag_part")

    def _trace(self):
        result = self._diagonal_operators[0].trace()
        for op in self._diagonal_operators[1:]:
            result += op.trace()
        return result

    def _to_dense(self):
        mat = self._dense_rows([[op.to_dense() for op in row] for row in self.operators])
        mat.set_shape(self.shape)
        return mat

    def _assert_non_singular(self):
        return control_flow_ordering.group(
            *[op.assert_non_singular() for op in self._diagonal_operators]
        )

    def _eigvals(self):
        return self._diag_concat("eigvals")
