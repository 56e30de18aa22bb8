"""TF 2.21's structured LinearOperators that act through FFTs or banded kernels:
Circulant, Circulant2D, Circulant3D (given their spectrum: matmul and solve are an FFT,
a product or quotient with the spectrum and an inverse FFT), Toeplitz (a Circulant of
twice the size) and Tridiag (tridiagonal_matmul / tridiagonal_solve, in TF's compact,
sequence and matrix formats).  See linalg_operator.py for the base class.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import linalg_operator as lo
from asyncflow import linalg_operator_util as lou
from asyncflow import tensor_shape as ts
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_ordering,
    fft_ops,
    framework_ops,
    linalg_matrix_ops,
    linalg_tridiag_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    reduction_ops,
    slicing_ops,
)

__all__ = [
    "LinearOperatorCirculant",
    "LinearOperatorCirculant2D",
    "LinearOperatorCirculant3D",
    "LinearOperatorToeplitz",
    "LinearOperatorTridiag",
]

_FFT = {1: fft_ops.fft, 2: fft_ops.fft2d, 3: fft_ops.fft3d}
_IFFT = {1: fft_ops.ifft, 2: fft_ops.ifft2d, 3: fft_ops.ifft3d}


def _to_complex(x):
    if x.dtype.is_complex:
        return x
    return cast_ops.cast(x, dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64)


def _rotate_transpose(x, shift: int):
    """Move the last axis to the front (shift=1) or the first to the back (shift=-1)."""
    r = x.shape.ndims
    perm = [r - 1, *range(r - 1)] if shift == 1 else [*range(1, r), 0]
    return array_ops.transpose(x, perm)


class _BaseCirculant(lo.LinearOperator):
    """A [batch] (nested block) circulant operator of block depth 1, 2 or 3."""

    def __init__(
        self,
        spectrum,
        block_depth: int,
        input_output_dtype=dtypes.complex64,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=True,
        parameters=None,
        name="LinearOperatorCirculant",
    ):
        allowed = [1, 2, 3]
        self._name = name
        if block_depth not in allowed:
            raise ValueError(
                f"Argument `block_depth` must be one of {allowed}. Received: {block_depth}."
            )
        self._block_depth = block_depth
        with ops.name_scope(name, values=[spectrum]):
            self._spectrum = lou.to_tensor(spectrum, name="spectrum")
            nd = self._spectrum.shape.ndims
            if nd is not None and nd < block_depth:
                raise ValueError(
                    f"Argument `spectrum` must have at least {block_depth} dimensions. "
                    f"Received: {self._spectrum}."
                )
            if not self._spectrum.dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError(
                        "A real spectrum always corresponds to a self-adjoint operator. "
                        "Expected argument `is_self_adjoint` to be True when "
                        f"`spectrum.dtype.is_complex` = True. Received: {is_self_adjoint}."
                    )
                is_self_adjoint = True
            if is_square is False:
                raise ValueError(
                    "A [[nested] block] circulant operator is always square. Expected "
                    f"argument `is_square` to be True. Received: {is_square}."
                )
            super().__init__(
                dtype=dtypes.as_dtype(input_output_dtype),
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    @property
    def block_depth(self) -> int:
        return self._block_depth

    @property
    def spectrum(self):
        return self._spectrum

    @property
    def block_shape(self):
        return self.spectrum.shape[-self.block_depth :]

    def block_shape_tensor(self):
        return self._block_shape_tensor()

    def _block_shape_tensor(self, spectrum_shape=None):
        if self.block_shape.is_fully_defined():
            return lou.shape_tensor(self.block_shape.as_list(), name="block_shape")
        shape = array_ops.shape(self.spectrum) if spectrum_shape is None else spectrum_shape
        return shape[-self.block_depth :]

    # The same class of circulant, for adjoint / inverse / products.
    def _like(self, spectrum, **kwargs):
        return type(self)(spectrum=spectrum, is_square=True, **kwargs)

    def _linop_adjoint(self):
        # (TF builds the adjoint with the default input_output_dtype, complex64)
        return self._like(
            lou.conj(self.spectrum),
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
        )

    def _linop_inverse(self):
        return self._like(
            1.0 / self.spectrum,
            is_non_singular=self.is_non_singular,
            is_self_adjoint=self.is_self_adjoint,
            is_positive_definite=self.is_positive_definite,
            input_output_dtype=self.dtype,
        )

    def _linop_matmul(self, left, right):
        if not isinstance(right, type(self)) or not isinstance(left, type(right)):
            return super()._linop_matmul(left, right)
        return self._like(left.spectrum * right.spectrum, **lou.product_hints(left, right))

    def _linop_solve(self, left, right):
        if not isinstance(right, type(self)):
            return super()._linop_solve(left, right)
        return self._like(right.spectrum / left.spectrum, **lou.product_hints(left, right))

    def _vectorize_then_blockify(self, matrix):
        vec = _rotate_transpose(matrix, 1)
        if vec.shape.is_fully_defined() and self.block_shape.is_fully_defined():
            shape = vec.shape[:-1].concatenate(self.block_shape).as_list()
        else:
            shape = manip_ops.concat([array_ops.shape(vec)[:-1], self.block_shape_tensor()], 0)
        return array_ops.reshape(vec, shape)

    def _unblockify(self, x):
        depth = self.block_depth
        if x.shape.is_fully_defined():
            shape = x.shape.as_list()
            flat = shape[:-depth] + [int(np.prod(shape[-depth:]))]
        else:
            shape = array_ops.shape(x)
            flat = manip_ops.concat(
                [shape[:-depth], [reduction_ops.reduce_prod(shape[-depth:])]], 0
            )
        return array_ops.reshape(x, flat)

    def _unblockify_then_matricize(self, vec):
        return _rotate_transpose(self._unblockify(vec), -1)

    def _fft(self, x):
        return _FFT[self.block_depth](_to_complex(x))

    def _ifft(self, x):
        return _IFFT[self.block_depth](_to_complex(x))

    def convolution_kernel(self, name="convolution_kernel"):
        """The operator's first column as a [batch] block: the inverse FFT of the
        spectrum, cast to the operator's dtype."""
        with self._name_scope(name):
            return cast_ops.cast(self._ifft(_to_complex(self.spectrum)), self.dtype)

    def _shape(self):
        shape = self._spectrum.shape
        trailing = shape[-self.block_depth :]
        n = int(np.prod(trailing.as_list())) if trailing.is_fully_defined() else None
        return shape[: -self.block_depth].concatenate(ts.TensorShape([n, n]))

    def _shape_tensor(self, spectrum=None):
        spectrum = self.spectrum if spectrum is None else spectrum
        shape = array_ops.shape(spectrum)
        n = reduction_ops.reduce_prod(shape[-self.block_depth :])
        return manip_ops.concat([shape[: -self.block_depth], manip_ops.stack([n, n])], 0)

    def assert_hermitian_spectrum(self, name="assert_hermitian_spectrum"):
        """An op failing unless the convolution kernel is real (to the dtype's eps)."""
        eps = np.finfo(self.dtype.real_dtype.as_numpy_dtype).eps
        with self._name_scope(name):
            max_err = eps * cast_ops.cast(self.domain_dimension_tensor(), self.dtype.real_dtype)
            imag = math_special_ops.imag(self.convolution_kernel())
            return check_ops.assert_less(
                math_ops.abs(imag), max_err, message="Spectrum was not Hermitian"
            )

    def _assert_non_singular(self):
        return lou.assert_no_entries_with_modulus_zero(
            self.spectrum, message="Singular operator:  Spectrum contained zero values."
        )

    def _assert_positive_definite(self):
        return check_ops.assert_positive(
            math_special_ops.real(self.spectrum),
            message="Not positive definite:  Real part of spectrum was not all positive.",
        )

    def _assert_self_adjoint(self):
        return lou.assert_zero_imag_part(
            self.spectrum,
            message="Not self-adjoint:  The spectrum contained non-zero imaginary part.",
        )

    def _broadcast_batch_dims(self, x, spectrum):
        spectrum = ops.convert_to_tensor(spectrum, name="spectrum")
        batch = self._batch_shape_tensor(shape=self._shape_tensor(spectrum=spectrum))
        spec_mat = array_ops.reshape(spectrum, manip_ops.concat([batch, [-1, 1]], 0))
        x, spec_mat = lou.broadcast_matrix_batch_dims([x, spec_mat])
        block = self._block_shape_tensor(spectrum_shape=array_ops.shape(spectrum))
        spectrum = array_ops.reshape(
            spec_mat, manip_ops.concat([array_ops.shape(x)[:-2], block], 0)
        )
        return x, spectrum

    def _cond(self):
        values = math_ops.abs(self._unblockify(self.spectrum))
        return reduction_ops.reduce_max(values, axis=-1) / reduction_ops.reduce_min(
            values, axis=-1
        )

    def _eigvals(self):
        return ops.convert_to_tensor(self._unblockify(self.spectrum))

    def _apply(self, x, adjoint, spectrum_op):
        spectrum = _to_complex(self.spectrum)
        if adjoint:
            spectrum = lou.conj(spectrum)
        x = cast_ops.cast(x, spectrum.dtype)
        x, spectrum = self._broadcast_batch_dims(x, spectrum)
        y = self._ifft(spectrum_op(self._fft(self._vectorize_then_blockify(x)), spectrum))
        return cast_ops.cast(self._unblockify_then_matricize(y), self.dtype)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        return self._apply(x, adjoint, lambda fx, s: s * fx)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = lou.adjoint_tensor(rhs) if adjoint_arg else rhs
        return self._apply(rhs, adjoint, lambda fx, s: fx / s)

    def _block_axes(self):
        return [-(i + 1) for i in range(self.block_depth)]

    def _determinant(self):
        det = reduction_ops.reduce_prod(self.spectrum, axis=self._block_axes())
        return cast_ops.cast(det, self.dtype)

    def _log_abs_determinant(self):
        lad = reduction_ops.reduce_sum(
            math_ops.log(math_ops.abs(self.spectrum)), axis=self._block_axes()
        )
        return cast_ops.cast(lad, self.dtype)

    def _diag_part(self):
        if self.shape.is_fully_defined():
            diag_shape = self.shape[:-1].as_list()
            size = self.domain_dimension.value
        else:
            diag_shape = self.shape_tensor()[:-1]
            size = self.domain_dimension_tensor()
        ones = array_ops.ones(diag_shape, dtype=self.dtype)
        value = self.trace() / cast_ops.cast(size, self.dtype)
        return array_ops.expand_dims(value, -1) * ones

    def _trace(self):
        axes = self._block_axes()
        re = reduction_ops.reduce_sum(math_special_ops.real(self.spectrum), axis=axes)
        if not self.dtype.is_complex:
            return cast_ops.cast(re, self.dtype)
        if self.is_self_adjoint:
            im = array_ops.zeros_like(re)
        else:
            im = reduction_ops.reduce_sum(math_special_ops.imag(self.spectrum), axis=axes)
        return cast_ops.cast(math_special_ops.complex(re, im), self.dtype)


def _circulant_class(depth: int, class_name: str, doc: str):
    def __init__(
        self,
        spectrum,
        input_output_dtype=dtypes.complex64,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=True,
        name=class_name,
    ):
        parameters = dict(
            spectrum=spectrum,
            input_output_dtype=input_output_dtype,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        _BaseCirculant.__init__(
            self,
            spectrum,
            block_depth=depth,
            input_output_dtype=input_output_dtype,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            parameters=parameters,
            name=name,
        )

    return type(class_name, (_BaseCirculant,), {"__init__": __init__, "__doc__": doc})


_RAISES = """

    Raises:
      ValueError: spectrum has too few dimensions, is_square=False, or
        is_self_adjoint=False with a real spectrum.
    """
LinearOperatorCirculant = _circulant_class(
    1,
    "LinearOperatorCirculant",
    "A [batch] circulant operator given its spectrum (the DFT of its first column); "
    "input_output_dtype is the dtype it takes and returns." + _RAISES,
)
LinearOperatorCirculant2D = _circulant_class(
    2,
    "LinearOperatorCirculant2D",
    "A [batch] block circulant operator with circulant blocks, given its 2-D spectrum." + _RAISES,
)
LinearOperatorCirculant3D = _circulant_class(
    3,
    "LinearOperatorCirculant3D",
    "A [batch] doubly nested block circulant operator, given its 3-D spectrum." + _RAISES,
)
for _cls in (LinearOperatorCirculant, LinearOperatorCirculant2D, LinearOperatorCirculant3D):
    _cls.__module__ = __name__


# -- Toeplitz ---------------------------------------------------------------------------


class LinearOperatorToeplitz(lo.LinearOperator):
    """A [batch] square Toeplitz operator given its first column and first row (the
    row's first entry is ignored); matmul embeds it in a circulant of twice the size.

    Raises:
      ValueError: row or col has no dimension, their lengths differ, or is_square=False.
    """

    def __init__(
        self,
        col,
        row,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorToeplitz",
    ):
        parameters = dict(
            col=col,
            row=row,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[row, col]):
            self._row = lou.to_tensor(row, name="row")
            self._col = lou.to_tensor(col, name="col")
            for arg, t in (("row", self._row), ("col", self._col)):
                if t.shape.ndims is not None and t.shape.ndims < 1:
                    raise ValueError(f"Argument {arg} must have at least 1 dimension.  Found: {t}")
            r, c = self._row.shape[-1], self._col.shape[-1]
            if r.value is not None and c.value is not None and r != c:
                raise ValueError(
                    "Expected square matrix, got row and col with mismatched dimensions."
                )
            if is_square is False:
                raise ValueError("Only square Toeplitz operators currently supported.")
            super().__init__(
                dtype=self._row.dtype,
                is_non_singular=is_non_singular,
                is_self_adjoint=is_self_adjoint,
                is_positive_definite=is_positive_definite,
                is_square=True,
                parameters=parameters,
                name=name,
            )

    @property
    def col(self):
        return self._col

    @property
    def row(self):
        return self._row

    def _shape(self):
        shape = framework_ops.broadcast_static_shape(self.row.shape, self.col.shape)
        return shape.concatenate(shape[-1:])

    def _shape_tensor(self, row=None, col=None):
        row = self.row if row is None else row
        col = self.col if col is None else col
        shape = framework_ops.broadcast_dynamic_shape(array_ops.shape(row), array_ops.shape(col))
        return manip_ops.concat([shape, shape[-1:]], 0)

    def _assert_self_adjoint(self):
        return check_ops.assert_equal(
            self.row,
            self.col,
            message="row and col are not the same, and so this operator is not self-adjoint.",
        )

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        expanded = manip_ops.concat([x, array_ops.zeros_like(x)], -2)
        col = ops.convert_to_tensor(self.col)
        row = ops.convert_to_tensor(self.row)
        first = manip_ops.concat(
            [col, array_ops.zeros_like(col[..., 0:1]), slicing_ops.reverse(row[..., 1:], [-1])], -1
        )
        dtype = (
            dtypes.complex128
            if first.dtype in (dtypes.float64, dtypes.complex128)
            else (dtypes.complex64)
        )
        circulant = LinearOperatorCirculant(
            fft_ops.fft(cast_ops.cast(first, dtype)), input_output_dtype=row.dtype
        )
        result = circulant.matmul(expanded, adjoint=adjoint, adjoint_arg=False)
        n = self._domain_dimension_tensor(shape=self._shape_tensor(row=row, col=col))
        return cast_ops.cast(result[..., :n, :], self.dtype)

    def _trace(self):
        n = cast_ops.cast(self.domain_dimension_tensor(), self.dtype)
        return n * self.col[..., 0]

    def _diag_part(self):
        ones = array_ops.ones(manip_ops.stack([self.domain_dimension_tensor()]), self.dtype)
        return self.col[..., 0:1] * ones

    def _to_dense(self):
        row = ops.convert_to_tensor(self.row)
        col = ops.convert_to_tensor(self.col)
        total = framework_ops.broadcast_dynamic_shape(array_ops.shape(row), array_ops.shape(col))
        n = array_ops.shape(row)[-1]
        row = manip_ops.broadcast_to(row, total)
        col = manip_ops.broadcast_to(col, total)
        elements = manip_ops.concat([slicing_ops.reverse(col, [-1]), row[..., 1:]], -1)
        # entry (i, j) is elements[n - 1 - i + j]
        indices = math_ops.mod(
            reduction_ops.range(0, n)
            + array_ops.expand_dims(reduction_ops.range(n - 1, -1, -1), -1),
            2 * n - 1,
        )
        return slicing_ops.gather(elements, indices, axis=-1)


# -- Tridiag ----------------------------------------------------------------------------

_COMPACT, _MATRIX, _SEQUENCE = "compact", "matrix", "sequence"
_FORMATS = frozenset({_COMPACT, _MATRIX, _SEQUENCE})


class LinearOperatorTridiag(lo.LinearOperator):
    """A [batch] square tridiagonal operator; diagonals_format is 'compact' (a [..., 3, N]
    tensor: superdiagonal, diagonal, subdiagonal), 'sequence' (a list of the three) or
    'matrix' (the dense [..., N, N] matrix).

    Raises:
      ValueError: an unknown diagonals_format.
    """

    def __init__(
        self,
        diagonals,
        diagonals_format=_COMPACT,
        is_non_singular=None,
        is_self_adjoint=None,
        is_positive_definite=None,
        is_square=None,
        name="LinearOperatorTridiag",
    ):
        parameters = dict(
            diagonals=diagonals,
            diagonals_format=diagonals_format,
            is_non_singular=is_non_singular,
            is_self_adjoint=is_self_adjoint,
            is_positive_definite=is_positive_definite,
            is_square=is_square,
            name=name,
        )
        with ops.name_scope(name, values=[diagonals]):
            if diagonals_format not in _FORMATS:
                raise ValueError(
                    "Argument `diagonals_format` must be one of compact, matrix, or sequence. "
                    f"Received : {diagonals_format}."
                )
            if diagonals_format == _SEQUENCE:
                self._diagonals = [
                    lou.to_tensor(d, name=f"diag_{i}") for i, d in enumerate(diagonals)
                ]
                dtype = self._diagonals[0].dtype
            else:
                self._diagonals = lou.to_tensor(diagonals, name="diagonals")
                dtype = self._diagonals.dtype
            self._diagonals_format = diagonals_format
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
    def diagonals(self):
        return self._diagonals

    @property
    def diagonals_format(self) -> str:
        return self._diagonals_format

    def _shape(self):
        if self.diagonals_format == _MATRIX:
            return self.diagonals.shape
        if self.diagonals_format == _COMPACT:
            d_shape = self.diagonals.shape[:-2].concatenate(self.diagonals.shape[-1:])
        else:
            d0, d1, d2 = self.diagonals
            batch = framework_ops.broadcast_static_shape(d0.shape[:-1], d1.shape[:-1])
            batch = framework_ops.broadcast_static_shape(batch, d2.shape[:-1])
            d_shape = batch.concatenate(d1.shape[-1:])
        return d_shape.concatenate(d_shape[-1:])

    def _shape_tensor(self, diagonals=None):
        diagonals = self.diagonals if diagonals is None else diagonals
        if self.diagonals_format == _MATRIX:
            return array_ops.shape(diagonals)
        if self.diagonals_format == _COMPACT:
            d_shape = array_ops.shape(diagonals[..., 0, :])
        else:
            shapes = [array_ops.shape(d) for d in self.diagonals]
            batch = framework_ops.broadcast_dynamic_shape(shapes[0][:-1], shapes[1][:-1])
            batch = framework_ops.broadcast_dynamic_shape(batch, shapes[2][:-1])
            d_shape = manip_ops.concat([batch, shapes[1][-1:]], 0)
        return manip_ops.concat([d_shape, d_shape[-1:]], -1)

    def _assert_self_adjoint(self):
        diag_message = (
            "This tridiagonal operator contained non-zero imaginary values on the diagonal."
        )
        off_message = "This tridiagonal operator has non-conjugate subdiagonal and superdiagonal."
        if self.diagonals_format == _MATRIX:
            return control_flow_ordering.group(
                check_ops.assert_equal(
                    self.diagonals,
                    lou.adjoint_tensor(self.diagonals),
                    message="Matrix was not equal to its adjoint.",
                )
            )
        if self.diagonals_format == _COMPACT:
            d = ops.convert_to_tensor(self.diagonals)
            sup, diag, sub = d[..., 0, :], d[..., 1, :], d[..., 2, :]
        else:
            sup, diag, sub = self.diagonals
        sub = math_special_ops.roll(sub, shift=-1, axis=-1)
        return control_flow_ordering.group(
            lou.assert_zero_imag_part(diag, message=diag_message),
            check_ops.assert_equal(lou.conj(sub[..., :-1]), sup[..., :-1], message=off_message),
        )

    def _adjoint_diagonals(self, diagonals):
        if self.diagonals_format == _SEQUENCE:
            sup, diag, sub = (lou.conj(d) for d in diagonals)
            return [
                math_special_ops.roll(sub, shift=-1, axis=-1),
                diag,
                math_special_ops.roll(sup, shift=1, axis=-1),
            ]
        if self.diagonals_format == _MATRIX:
            return lou.adjoint_tensor(diagonals)
        sup, diag, sub = slicing_ops.unstack(lou.conj(diagonals), num=3, axis=-2)
        return manip_ops.stack(
            [
                math_special_ops.roll(sub, shift=-1, axis=-1),
                diag,
                math_special_ops.roll(sup, shift=1, axis=-1),
            ],
            axis=-2,
        )

    def _check_rank(self, x):
        """TF's TridiagonalMatMul takes no batch broadcasting: the diagonals' rank (as
        [..., 1, M] rows) must be the argument's, a ValueError at build time."""
        if self.diagonals_format == _SEQUENCE:
            rank = self.diagonals[0].shape.ndims
            rank = None if rank is None else rank + 1
        else:
            rank = self.diagonals.shape.ndims
        if rank is not None and x.shape.ndims is not None and rank != x.shape.ndims:
            raise ValueError(
                f"Shapes must be equal rank, but are {rank - 1} and {x.shape.ndims - 1} for "
                "TridiagonalMatMul"
            )

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        diagonals = self.diagonals
        if adjoint:
            diagonals = self._adjoint_diagonals(diagonals)
        x = lou.adjoint_tensor(x) if adjoint_arg else x
        self._check_rank(x)
        return linalg_tridiag_ops.tridiagonal_matmul(
            diagonals, x, diagonals_format=self.diagonals_format
        )

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        diagonals = self.diagonals
        if adjoint:
            diagonals = self._adjoint_diagonals(diagonals)
        rhs_shape = array_ops.shape(rhs)
        shape = self._shape_tensor(diagonals)
        k = shape[-1:]
        batch = framework_ops.broadcast_dynamic_shape(shape[:-2], rhs_shape[:-2])
        rhs = manip_ops.broadcast_to(rhs, manip_ops.concat([batch, rhs_shape[-2:]], -1))
        if self.diagonals_format == _MATRIX:
            diagonals = manip_ops.broadcast_to(diagonals, manip_ops.concat([batch, k, k], -1))
        elif self.diagonals_format == _COMPACT:
            diagonals = manip_ops.broadcast_to(diagonals, manip_ops.concat([batch, [3], k], -1))
        else:
            diagonals = [
                manip_ops.broadcast_to(d, manip_ops.concat([batch, k], -1)) for d in diagonals
            ]
        return linalg_tridiag_ops.tridiagonal_solve(
            diagonals,
            rhs,
            diagonals_format=self.diagonals_format,
            transpose_rhs=adjoint_arg,
            conjugate_rhs=adjoint_arg,
        )

    def _diag_part(self):
        if self.diagonals_format == _MATRIX:
            return linalg_matrix_ops.matrix_diag_part(self.diagonals)
        if self.diagonals_format == _SEQUENCE:
            return manip_ops.broadcast_to(self.diagonals[1], self.shape_tensor()[:-1])
        return self.diagonals[..., 1, :]

    def _to_dense(self):
        if self.diagonals_format == _MATRIX:
            return ops.convert_to_tensor(self.diagonals)
        if self.diagonals_format == _COMPACT:
            diagonals = self.diagonals
        else:
            diagonals = manip_ops.stack([ops.convert_to_tensor(d) for d in self.diagonals], -2)
        return linalg_matrix_ops.matrix_diag(
            diagonals, k=(-1, 1), num_rows=-1, num_cols=-1, align="LEFT_RIGHT", padding_value=0
        )
