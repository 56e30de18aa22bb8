"""RaggedTensor's factories and methods beyond its parts (a mixin `RaggedTensor`
inherits): the row-partition factories (`from_row_lengths`, `from_value_rowids`, ...,
`from_tensor`, `from_sparse`) with TF's `validate=True` checks, the partition views
(`row_lengths`, `value_rowids`, `nrows`, `bounding_shape`), conversions (`to_tensor`,
`to_sparse`), `merge_dims`, `with_flat_values`, `with_row_splits_dtype` and indexing
(`rt[...]`: rows, slices of rows, slices inside ragged rows, dense inner dimensions).

Everything builds graph ops directly (`apply_op`), as `ragged.py` does, so this module
sits below the op families that dispatch to ragged values.  The class itself is named
through `type(self)` / `cls` here, never imported: `ragged.py` imports this module.

Validation as TF's: a check whose operand is a constant fails when the graph is built
(InvalidArgumentError), otherwise an Assert runs with the step and the row splits wait
for it (an Identity with control inputs), so fetching the RaggedTensor raises.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["RaggedMethods"]

_I32, _I64 = dtypes.int32, dtypes.int64


# -- small graph helpers ---------------------------------------------------------------------


def _op(op_type, *inputs, **attrs):
    return ops.apply_op(op_type, list(inputs), attrs or None).outputs[0]


def _const(value, dtype):
    return ops.convert_to_tensor(np.asarray(value, dtype.as_numpy_dtype))


def _shape(t, dtype=_I64):
    return _op("Shape", t, out_type=dtype)


def _dim0(t, dtype=_I64):
    """t's first dimension: a constant where the static shape knows it."""
    n = t.shape[0].value if t.shape.ndims else None
    if n is not None:
        return _const(n, dtype)
    return _shape(t, dtype)[0]


def _range(start, limit, delta, dtype=_I64):
    return _op(
        "Range",
        *(x if isinstance(x, ops.Tensor) else _const(x, dtype) for x in (start, limit, delta)),
    )


def _concat(parts, axis=0):
    return _op("ConcatV2", parts, _const(axis, _I32))


def _cumsum(x):
    return _op("Cumsum", x, _const(0, _I32))


def _gather(params, indices):
    return _op("GatherV2", params, indices, _const(0, _I32))


def _cast(x, dtype):
    return x if x.dtype == dtype else _op("Cast", x, DstT=dtype)


def _diff(splits):
    return splits[1:] - splits[:-1]


def _lengths_to_splits(lengths):
    return _concat([_const([0], lengths.dtype), _cumsum(lengths)])


def _rowids_of(splits):
    """Each value's row (TF's value_rowids): the row limits at or below its position."""
    nvals = splits[-1]
    positions = _range(_const(0, splits.dtype), nvals, _const(1, splits.dtype))
    expand = lambda t: _op("ExpandDims", t, _const(0, _I32))  # noqa: E731
    found = _op("UpperBound", expand(splits[1:]), expand(positions), out_type=splits.dtype)
    return found[0]


def _static(t):
    """t's value when t is a constant (TF's checks fail at build time only then)."""
    if isinstance(t, ops.Tensor) and t.op.type == "Const":
        return ops.constant_value(t)
    return None


# -- TF's validate=True checks ---------------------------------------------------------------


def _check(kind, x, y, message, checks):
    """Append an Assert that `x <kind> y` element-wise ("==" or ">=0"), or raise
    InvalidArgumentError now when its operands are constants."""
    xs, ys = _static(x), (0 if y is None else _static(y))
    label = "x == y" if kind == "==" else "x >= 0"
    if xs is not None and ys is not None:
        ok = np.all(np.asarray(xs) == ys) if kind == "==" else np.all(np.asarray(xs) >= 0)
        if not ok:
            detail = f"Condition {label} did not hold element-wise:\nx ({x.name}) = \n{xs}"
            if kind == "==":
                detail += f"\ny ({y.name}) = \n{ys}"
            raise errors.InvalidArgumentError(None, None, f"{message}\n{detail}")
        return
    if kind == "==":
        holds = _op("All", _op("Equal", x, y), _range(0, _op("Rank", _op("Equal", x, y)), 1, _I32))
        data = [
            message,
            f"Condition {label} did not hold element-wise:",
            f"x ({x.name}) = ",
            x,
            f"y ({y.name}) = ",
            y,
        ]
    else:
        zero = _const(0, x.dtype)
        cond = _op("GreaterEqual", x, zero)
        holds = _op("All", cond, _range(0, _op("Rank", cond), 1, _I32))
        data = [message, f"Condition {label} did not hold element-wise:", f"x ({x.name}) = ", x]
    checks.append(
        ops.apply_op(
            "Assert",
            [holds, [ops.convert_to_tensor(d) if isinstance(d, str) else d for d in data]],
            {"summarize": 3},
        )
    )


def _rowids_nrows(rowids, nrows, validate):
    """The row count of sorted row ids (given, or the last id plus one) and, with
    `validate`, the checks that the ids are non-negative and sorted.

    Raises:
      ValueError: nrows known to be smaller than the last id plus one.
    """
    dtype = rowids.dtype
    known = _static(rowids)
    if nrows is None:
        if known is not None:
            nrows_t = _const(int(known[-1]) + 1 if len(known) else 0, dtype)
        elif rowids.shape[0].value == 0:
            nrows_t = _const(0, dtype)
        else:
            nrows_t = _op("Max", rowids, _const(0, _I32)) + 1
    else:
        nrows_t = ops.convert_to_tensor(nrows, dtype=dtype, name="nrows")
        n_static = _static(nrows_t)
        if known is not None and len(known) and n_static is not None:
            if int(n_static) < int(known[-1]) + 1:
                raise ValueError(
                    f"Expected nrows >= value_rowids[-1] + 1; got nrows={int(n_static)}, "
                    f"value_rowids[-1]={int(known[-1])}"
                )
    checks = []
    if validate:
        msg = "Arguments to from_value_rowids do not form a valid RowPartition.  "
        _check(">=0", rowids[:1], None, msg, checks)
        _check(">=0", _diff(rowids), None, msg, checks)
    return nrows_t, checks


def _guarded(t, checks):
    """t, available only once `checks` passed."""
    if not checks:
        return t
    with ops.control_dependencies(checks):
        return _op("Identity", t)


def _split_dtype(t, dtype=None):
    if t.dtype not in (_I32, _I64):
        raise ValueError(
            f"Row-partitioning tensors must have dtype int32 or int64, not {t.dtype.name}"
        )
    t.shape.with_rank(1)
    return t


def _nrows_of(values, dtype):
    if isinstance(values, RaggedMethods):
        return values.nrows(out_type=dtype)
    return _dim0(values, dtype)


def _nvals_check(splits, values, checks):
    nvals = _nrows_of(values, splits.dtype)
    _check(
        "==",
        splits[-1],
        nvals,
        "Arguments to _from_row_partition do not form a valid RaggedTensor",
        checks,
    )


def _as_values(values):
    if isinstance(values, RaggedMethods):
        return values
    return ops.convert_to_tensor(values, name="values")


def _as_splits(t, name, dtype=None):
    # A Python list becomes int64 (TF's dtype_hint); a tensor or an int32 array keeps int32.
    hint = None if isinstance(t, np.ndarray) and t.dtype == np.int32 else dtypes.int64
    t = ops.convert_to_tensor(t, dtype=dtype, name=name, dtype_hint=hint)
    return _split_dtype(t)


def _match_dtype(values, splits):
    if isinstance(values, RaggedMethods) and values.row_splits.dtype != splits.dtype:
        raise ValueError(
            "dtype mismatch: values.row_splits.dtype is "
            f"{values.row_splits.dtype.name} but row_splits.dtype is {splits.dtype.name}"
        )


class RaggedMethods:
    """What RaggedTensor has beyond its parts (see the module note)."""

    # -- factories ---------------------------------------------------------------------------

    @classmethod
    def _make(cls, values, splits, uniform_row_length=None):
        return cls(values, splits, uniform_row_length, internal=True)

    @classmethod
    def from_row_splits(cls, values, row_splits, name=None, validate=True):
        """Rows values[row_splits[i]:row_splits[i + 1]] (row_splits int32 or int64).

        Raises:
          ValueError: row_splits not a vector of int32 or int64.
          InvalidArgumentError: with validate, row_splits that do not start at 0, that
            decrease, or whose last value is not the number of values.
        """
        with ops.name_scope(name, "RaggedFromRowSplits", []):
            values = _as_values(values)
            splits = _as_splits(row_splits, "row_splits")
            _match_dtype(values, splits)
            if splits.shape[0].value == 0:
                raise ValueError("slice index 0 of dimension 0 out of bounds.")
            checks = []
            if validate:
                msg = "Arguments to from_row_splits do not form a valid RaggedTensor:"
                _check("==", splits[:1], _const([0], splits.dtype), msg + "zero", checks)
                _check(">=0", _diff(splits), None, msg + "monotonic.  ", checks)
                _nvals_check(splits, values, checks)
            return cls._make(values, _guarded(splits, checks))

    @classmethod
    def from_row_lengths(cls, values, row_lengths, name=None, validate=True):
        """Rows of row_lengths[i] values each, in order."""
        with ops.name_scope(name, "RaggedFromRowLengths", []):
            values = _as_values(values)
            lengths = _as_splits(row_lengths, "row_lengths")
            _match_dtype(values, lengths)
            checks = []
            if validate:
                _check(
                    ">=0",
                    lengths,
                    None,
                    "Arguments to from_row_lengths do not form a valid RowPartition.  ",
                    checks,
                )
            splits = _lengths_to_splits(lengths)
            if validate:
                _nvals_check(splits, values, checks)
            return cls._make(values, _guarded(splits, checks))

    @classmethod
    def from_row_starts(cls, values, row_starts, name=None, validate=True):
        """Row i from row_starts[i] to the next row's start (the last: to the end)."""
        with ops.name_scope(name, "RaggedFromRowStarts", []):
            values = _as_values(values)
            starts = _as_splits(row_starts, "row_starts")
            _match_dtype(values, starts)
            splits = _concat(
                [starts, _op("Reshape", _nrows_of(values, starts.dtype), _const([1], _I32))]
            )
            checks = []
            if validate:
                msg = "Arguments to from_row_starts do not form a valid RaggedTensor"
                _check("==", splits[:1], _const([0], starts.dtype), msg, checks)
                _check(">=0", _diff(splits), None, msg + ".  ", checks)
            return cls._make(values, _guarded(splits, checks))

    @classmethod
    def from_row_limits(cls, values, row_limits, name=None, validate=True):
        """Row i from the previous row's limit (0 for the first) to row_limits[i]."""
        with ops.name_scope(name, "RaggedFromRowLimits", []):
            values = _as_values(values)
            limits = _as_splits(row_limits, "row_limits")
            _match_dtype(values, limits)
            splits = _concat([_const([0], limits.dtype), limits])
            checks = []
            if validate:
                msg = "Arguments to from_row_limits do not form a valid RaggedTensor.  "
                _check(">=0", _diff(splits), None, msg, checks)
                _nvals_check(splits, values, checks)
            return cls._make(values, _guarded(splits, checks))

    @classmethod
    def from_value_rowids(cls, values, value_rowids, nrows=None, name=None, validate=True):
        """values[j] in row value_rowids[j] (sorted); nrows rows (default: the last id
        plus one).

        Raises:
          ValueError: value_rowids and values of different static lengths, or nrows
            known to be too small.
          InvalidArgumentError: with validate, ids negative or not sorted.
        """
        with ops.name_scope(name, "RaggedFromValueRowIds", []):
            values = _as_values(values)
            rowids = _as_splits(value_rowids, "value_rowids")
            _match_dtype(values, rowids)
            dtype = rowids.dtype
            vshape = values.shape if not isinstance(values, RaggedMethods) else None
            n_ids = rowids.shape[0].value
            if vshape is not None and vshape.ndims and n_ids is not None:
                tensor_shape.TensorShape([n_ids]).assert_is_compatible_with(vshape[:1])
            nrows_t, checks = _rowids_nrows(rowids, nrows, validate)
            counts = _op(
                "DenseBincount",
                _cast(rowids, dtype),
                _cast(nrows_t, dtype),
                _const([], dtype),
                binary_output=False,
            )
            splits = _lengths_to_splits(counts)
            if validate:
                _nvals_check(splits, values, checks)
            return cls._make(values, _guarded(splits, checks))

    @classmethod
    def from_nested_row_splits(cls, flat_values, nested_row_splits, name=None, validate=True):
        """A RaggedTensor of several ragged dimensions: the splits outermost first."""
        if isinstance(nested_row_splits, ops.Tensor):
            raise TypeError("nested_row_splits must be a list of Tensors")
        with ops.name_scope(name, "RaggedFromNestedRowSplits", []):
            result = flat_values
            for splits in reversed(list(nested_row_splits)):
                result = cls.from_row_splits(result, splits, validate=validate)
            return result

    @classmethod
    def from_nested_row_lengths(cls, flat_values, nested_row_lengths, name=None, validate=True):
        """As from_nested_row_splits, each dimension given by its row lengths."""
        if isinstance(nested_row_lengths, ops.Tensor):
            raise TypeError("nested_row_lengths must be a list of Tensors")
        with ops.name_scope(name, "RaggedFromNestedRowlengths", []):
            result = flat_values
            for lengths in reversed(list(nested_row_lengths)):
                result = cls.from_row_lengths(result, lengths, validate=validate)
            return result

    @classmethod
    def from_nested_value_rowids(
        cls, flat_values, nested_value_rowids, nested_nrows=None, name=None, validate=True
    ):
        """As from_nested_row_splits, each dimension given by its value row ids."""
        if isinstance(nested_value_rowids, ops.Tensor):
            raise TypeError("nested_value_rowids must be a list of Tensors")
        rowids = list(nested_value_rowids)
        nrows = [None] * len(rowids) if nested_nrows is None else list(nested_nrows)
        if len(nrows) != len(rowids):
            raise ValueError("Expected len(nested_nrows) == len(nested_value_rowids)")
        with ops.name_scope(name, "RaggedFromNestedValueRowIds", []):
            result = flat_values
            for ids, n in reversed(list(zip(rowids, nrows))):
                result = cls.from_value_rowids(result, ids, n, validate=validate)
            return result

    @classmethod
    def from_tensor(
        cls,
        tensor,
        lengths=None,
        padding=None,
        ragged_rank=1,
        name=None,
        row_splits_dtype=dtypes.int64,
    ):
        """The rows of a dense tensor as ragged rows: all of them (neither `lengths`
        nor `padding`), the first lengths[i] of row i, or up to the last value that is
        not `padding`; the outer `ragged_rank` dimensions become ragged.

        Raises:
          ValueError: both lengths and padding, or ragged_rank not in [1, rank).
        """
        if lengths is not None and padding is not None:
            raise ValueError("Specify lengths or padding, but not both")
        if not isinstance(ragged_rank, int) or ragged_rank <= 0:
            raise ValueError(f"ragged_rank must be greater than 0; got {ragged_rank}")
        dtype = dtypes.as_dtype(row_splits_dtype)
        with ops.name_scope(name, "RaggedFromTensor", []):
            tensor = ops.convert_to_tensor(tensor, name="tensor")
            rank = tensor.shape.ndims
            if rank is None:
                raise ValueError("from_tensor needs the tensor's rank at build time")
            if ragged_rank >= rank:
                raise ValueError(
                    f"ragged_rank must be less than rank(tensor) ({rank}); got {ragged_rank}"
                )
            shape = _shape(tensor, dtype)
            # The outer ragged_rank - 1 dimensions: uniform, merged for now.
            flat = tensor
            if ragged_rank > 1:
                new_shape = _concat(
                    [
                        _op("Prod", shape[:ragged_rank], _const(0, _I32), keep_dims=True),
                        shape[ragged_rank:],
                    ]
                )
                flat = _op("Reshape", tensor, new_shape)
            result = cls._rows_of(flat, _row_lengths_for(flat, lengths, padding, dtype), dtype)
            for i in range(ragged_rank - 2, -1, -1):
                n = _op("Prod", shape[: i + 1], _const(0, _I32))
                splits = _range(_const(0, dtype), n * shape[i + 1] + 1, shape[i + 1])
                outer = tensor.shape[: i + 1].num_elements()
                if outer is not None:
                    splits.set_shape([outer + 1])
                result = cls._make(result, splits, tensor.shape[i + 1].value)
            return result

    @classmethod
    def _rows_of(cls, tensor, lengths, dtype):
        """The rows of a dense matrix-like tensor, row i its first lengths[i] items
        (lengths None: all of them)."""
        shape = _shape(tensor, dtype)
        nrows, ncols = shape[0], shape[1]
        inner = shape[2:]
        merged = _op("Reshape", tensor, _concat([_const([-1], dtype), inner]))
        if lengths is None:
            splits = _range(_const(0, dtype), nrows * ncols + 1, ncols)
            return cls._make(merged, splits, tensor.shape[1].value)
        lengths = _op("Minimum", _op("Maximum", _cast(lengths, dtype), _const(0, dtype)), ncols)
        cols = _range(_const(0, dtype), ncols, _const(1, dtype))
        mask = _op(
            "Less",
            _op("ExpandDims", cols, _const(0, _I32)),
            _op("ExpandDims", lengths, _const(1, _I32)),
        )
        keep = _op("Reshape", mask, _const([-1], _I32))
        where = _op("Reshape", _op("Where", keep), _const([-1], _I32))
        return cls._make(_gather(merged, where), _lengths_to_splits(lengths))

    @classmethod
    def from_sparse(cls, st_input, name=None, row_splits_dtype=dtypes.int64):
        """The rows of a 2-D SparseTensor whose values fill each row from its start.

        Raises:
          ValueError: st_input not 2-D.
          InvalidArgumentError: (when the step runs) a row with a gap ("SparseTensor
            is not right-ragged").
        """
        if not isinstance(st_input, SparseTensor):
            raise TypeError(f"st_input must be a SparseTensor; got {st_input!r}")
        dtype = dtypes.as_dtype(row_splits_dtype)
        rank = st_input.dense_shape.shape[0].value if st_input.dense_shape.shape.ndims else None
        if rank is not None and rank != 2:
            raise ValueError("rank(st_input) must be 2.")
        with ops.name_scope(name, "RaggedFromSparse", []):
            indices = st_input.indices
            rows, cols = indices[:, 0], indices[:, 1]
            nrows = _cast(st_input.dense_shape[0], dtype)
            counts = _op(
                "DenseBincount", _cast(rows, dtype), nrows, _const([], dtype), binary_output=False
            )
            splits = _lengths_to_splits(counts)
            # Right-ragged: each value's column is its place in its row.
            place = _range(_const(0, _I64), _dim0(cols), _const(1, _I64)) - _gather(
                _cast(splits, _I64), rows
            )
            same = _op("Equal", cols, place)
            holds = _op("All", same, _const([0], _I32))
            check = ops.apply_op(
                "Assert",
                [
                    holds,
                    [
                        ops.convert_to_tensor("SparseTensor is not right-ragged"),
                        ops.convert_to_tensor("SparseTensor.indices ="),
                        indices,
                    ],
                ],
                {"summarize": 3},
            )
            return cls._make(st_input.values, _guarded(splits, [check]))

    # -- partition views ---------------------------------------------------------------------

    def row_lengths(self, axis=1, name=None):
        """Each row's length (axis 1); at a deeper axis, a RaggedTensor of them."""
        axis = _axis(axis, self.shape.ndims)
        if axis == 0:
            return self.nrows()
        with ops.name_scope(name, "RaggedRowLengths", []):
            if axis == 1:
                return _diff(self.row_splits)
            if isinstance(self.values, RaggedMethods):
                return self.with_values(self.values.row_lengths(axis - 1))
            inner = _shape(self.values, self.row_splits.dtype)[axis - 1]
            return self.with_values(_op("Fill", _shape(self.values, _I32)[: axis - 1], inner))

    def nrows(self, out_type=None, name=None):
        """The number of rows (a scalar of the row splits' dtype, or out_type)."""
        with ops.name_scope(name, "RaggedNRows", []):
            n = self.row_splits.shape[0].value
            dtype = self.row_splits.dtype
            out = _const(n - 1, dtype) if n is not None else _dim0(self.row_splits, dtype) - 1
            return out if out_type is None else _cast(out, dtypes.as_dtype(out_type))

    def row_starts(self, name=None):
        with ops.name_scope(name, "RaggedRowStarts", []):
            return self.row_splits[:-1]

    def row_limits(self, name=None):
        with ops.name_scope(name, "RaggedRowLimits", []):
            return self.row_splits[1:]

    def value_rowids(self, name=None):
        """Each value's row."""
        with ops.name_scope(name, "RaggedValueRowIds", []):
            return _rowids_of(self.row_splits)

    def nested_row_lengths(self, name=None):
        with ops.name_scope(name, "RaggedNestedRowLengths", []):
            return tuple(_diff(s) for s in self.nested_row_splits)

    def nested_value_rowids(self, name=None):
        with ops.name_scope(name, "RaggedNestedValueRowIds", []):
            return tuple(_rowids_of(s) for s in self.nested_row_splits)

    def bounding_shape(self, axis=None, name=None, out_type=None):
        """The smallest dense shape holding every row: [nrows, longest row, ...]."""
        dtype = self.row_splits.dtype if out_type is None else dtypes.as_dtype(out_type)
        with ops.name_scope(name, "RaggedBoundingBox", []):
            dims = [_cast(self.nrows(), dtype)]
            for s in self.nested_row_splits:
                longest = _op("Max", _diff(s), _const(0, _I32))
                dims.append(_cast(_op("Maximum", longest, _const(0, s.dtype)), dtype))
            flat = self.flat_values
            dims = _op("Pack", dims, axis=0)
            if flat.shape.ndims is None or flat.shape.ndims > 1:
                dims = _concat([dims, _shape(flat, dtype)[1:]])
            if axis is None:
                return dims
            return dims[axis]

    # -- conversions -------------------------------------------------------------------------

    def to_tensor(self, default_value=None, name=None, shape=None):
        """A dense tensor: rows padded with default_value (0) to the longest row, or cut
        or padded to `shape` (None entries: the natural size).

        Raises:
          ValueError: a shape whose rank is not the RaggedTensor's.
        """
        with ops.name_scope(name, "RaggedToTensor", []):
            dtype = self.row_splits.dtype
            if shape is None:
                shape_t = _const(-1, dtype)
            elif isinstance(shape, ops.Tensor):
                shape_t = _cast(shape, dtype)
            else:
                dims = tensor_shape.as_shape(shape)
                if (
                    dims.ndims is not None
                    and self.shape.ndims is not None
                    and dims.ndims != self.shape.ndims
                ):
                    raise ValueError(
                        f"rt_input.shape and shape=[{','.join('?' * dims.ndims)}] are "
                        "incompatible: "
                        f"rt_input.rank = {self.shape.ndims} but shape.rank = {dims.ndims}"
                    )
                shape_t = _const([-1 if d is None else d for d in dims.as_list()], dtype)
            if default_value is None:
                default = (
                    _const(np.zeros([], self.dtype.as_numpy_dtype), self.dtype)
                    if self.dtype != dtypes.string
                    else ops.convert_to_tensor(b"")
                )
            else:
                default = ops.convert_to_tensor(
                    default_value, dtype=self.dtype, name="default_value"
                )
            splits = list(self.nested_row_splits)
            return ops.apply_op(
                "RaggedTensorToTensor",
                [shape_t, self.flat_values, default, splits],
                {
                    "num_row_partition_tensors": len(splits),
                    "row_partition_types": ["ROW_SPLITS"] * len(splits),
                },
            ).outputs[0]

    def to_sparse(self, name=None):
        """The same values as a SparseTensor (one index per value)."""
        with ops.name_scope(name, "RaggedToSparse", []):
            splits = list(self.nested_row_splits)
            out = ops.apply_op(
                "RaggedTensorToSparse", [splits, self.flat_values], {"RAGGED_RANK": len(splits)}
            ).outputs
            return SparseTensor(*out)

    def with_flat_values(self, new_values):
        """The same partitions around other flat values (as many rows)."""
        if isinstance(self.values, RaggedMethods):
            return self.with_values(self.values.with_flat_values(new_values))
        new_values = ops.convert_to_tensor(new_values)
        return self.with_values(new_values)

    def with_row_splits_dtype(self, dtype):
        """The same RaggedTensor with row splits of `dtype` (int32 or int64)."""
        dtype = dtypes.as_dtype(dtype)
        if dtype not in (_I32, _I64):
            raise ValueError(f"dtype must be int32 or int64, not {dtype.name}")
        if self.row_splits.dtype == dtype:
            return self
        values = self.values
        if isinstance(values, RaggedMethods):
            values = values.with_row_splits_dtype(dtype)
        return self._make(values, _cast(self.row_splits, dtype), self.uniform_row_length)

    def merge_dims(self, outer_axis, inner_axis):
        """Dimensions outer_axis..inner_axis merged into one (a Tensor when every
        ragged dimension merges away).

        Raises:
          ValueError: outer_axis > inner_axis, or an axis out of range.
        """
        rank = self.shape.ndims
        outer, inner = _axis(outer_axis, rank), _axis(inner_axis, rank)
        if outer > inner:
            raise ValueError(
                f"Expected outer_axis ({outer_axis}) to be less than or equal to inner_axis "
                f"({inner_axis})"
            )
        with ops.name_scope(None, "RaggedMergeDims", []):
            return _merge(self, outer, inner)

    # -- indexing ----------------------------------------------------------------------------

    def __getitem__(self, key):
        """TF's ragged indexing: ints and slices on the rows, slices (not ints) inside
        ragged rows, anything on the dense inner dimensions; Ellipsis and newaxis.

        Raises:
          ValueError: an int on a ragged inner dimension, or too many indices.
          TypeError: an index that is not an int, slice, Ellipsis or newaxis.
        """
        keys = list(key) if isinstance(key, tuple) else [key]
        with ops.name_scope(None, "RaggedGetItem", []):
            return _getitem(self, _expand_ellipsis(keys, self.shape.ndims))


def _operator(name: str, reverse: bool = False):
    """rt <op> y as TF's: the math op of that name (ops/math_ops registers it), which
    takes RaggedTensors."""
    if reverse:
        return lambda self, x: ops._overload(name)(x, self)
    return lambda self, y: ops._overload(name)(self, y)


for _name, _op_name in {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "truediv",
    "floordiv": "floordiv",
    "mod": "floormod",
    "pow": "pow",
    "and": "logical_and",
    "or": "logical_or",
    "xor": "logical_xor",
}.items():
    setattr(RaggedMethods, f"__{_name}__", _operator(_op_name))
    setattr(RaggedMethods, f"__r{_name}__", _operator(_op_name, reverse=True))
for _name, _op_name in {"lt": "less", "le": "less_equal", "gt": "greater",
                        "ge": "greater_equal"}.items():  # fmt: skip
    setattr(RaggedMethods, f"__{_name}__", _operator(_op_name))
RaggedMethods.__neg__ = lambda self: ops._overload("negative")(self)
RaggedMethods.__abs__ = lambda self: ops._overload("abs")(self)
RaggedMethods.__invert__ = lambda self: ops._overload("logical_not")(self)
del _name, _op_name


def _axis(axis, rank):
    if rank is None:
        return axis
    if not -rank <= axis < rank:
        raise ValueError(f"axis={axis} out of bounds: expected {-rank}<=axis<{rank}")
    return axis % rank


def _row_lengths_for(tensor, lengths, padding, dtype):
    if lengths is not None:
        return ops.convert_to_tensor(lengths, name="lengths")
    if padding is None:
        return None
    padding = ops.convert_to_tensor(padding, dtype=tensor.dtype, name="padding")
    differs = _op("NotEqual", tensor, padding)
    rank = tensor.shape.ndims
    if rank > 2:  # a row's item is padding when all of it is
        differs = _op("Any", differs, _const(list(range(2, rank)), _I32))
    ncols = _shape(tensor, dtype)[1]
    ones = _range(_const(1, dtype), ncols + 1, _const(1, dtype))
    marked = _op("Mul", _cast(differs, dtype), _op("ExpandDims", ones, _const(0, _I32)))
    return _op("Max", marked, _const(1, _I32))


def _merge(rt, outer, inner):
    if outer == inner:
        return rt
    if not isinstance(rt, RaggedMethods):
        shape = _shape(rt, _I64)
        merged = _op("Prod", shape[outer : inner + 1], _const(0, _I32), keep_dims=True)
        return _op("Reshape", rt, _concat([shape[:outer], merged, shape[inner + 1 :]]))
    if outer == 0:  # the rows concatenated are the values
        return _merge(rt.values, 0, inner - 1)
    if outer == 1:  # each row's items merged: where their merged parts start
        starts = rt.row_splits
        v = rt.values
        for _ in range(inner - 1):
            if isinstance(v, RaggedMethods):
                starts = _gather(v.row_splits, starts)
                v = v.values
            else:
                break
        merged = _merge(rt.values, 0, inner - 1)
        if not isinstance(v, RaggedMethods) and inner - 1 > rt.ragged_rank - 1:
            raise ValueError("asyncflow's merge_dims merges ragged dimensions only")
        return rt._make(merged, starts)
    return rt.with_values(_merge(rt.values, outer - 1, inner - 1))


# -- indexing ---------------------------------------------------------------------------------


def _expand_ellipsis(keys, rank):
    if not any(k is Ellipsis for k in keys):
        return keys
    if rank is None:
        raise ValueError("Ellipsis needs the RaggedTensor's rank at build time")
    i = next(j for j, k in enumerate(keys) if k is Ellipsis)
    used = sum(1 for k in keys if k is not Ellipsis and k is not None)
    return keys[:i] + [slice(None)] * (rank - used) + keys[i + 1 :]


def _is_int(k):
    return (
        isinstance(k, (int, np.integer))
        and not isinstance(k, bool)
        or (isinstance(k, ops.Tensor) and k.shape.ndims == 0 and k.dtype.is_integer)
    )


def _getitem(rt, keys):
    if not keys:
        return rt
    k, rest = keys[0], keys[1:]
    if k is None:  # newaxis: one row holding them all
        inner = _getitem(rt, rest)
        n = inner.nrows()
        return type(rt)._make(
            inner, _op("Pack", [_const(0, n.dtype), n], axis=0), inner.shape[0].value
        )
    if _is_int(k):
        row = _row(rt, k)
        if not rest:
            return row
        if isinstance(row, RaggedMethods):
            return _getitem(row, rest)
        return row[tuple(rest)]
    if not isinstance(k, slice):
        raise TypeError(
            f"Ragged __getitem__ expects an int, slice, Ellipsis or newaxis; got {k!r}"
        )
    rows = _row_slice(rt, k)
    return _inner(rows, rest)


def _row(rt, i):
    splits = rt.row_splits
    if isinstance(i, ops.Tensor):
        i = _cast(i, splits.dtype)
        i = _op("SelectV2", _op("Less", i, _const(0, splits.dtype)), i + rt.nrows(), i)
    elif i < 0:
        i = rt.nrows() + i
    start, end = splits[i], splits[i + 1]
    return _value_range(rt.values, start, end)


def _value_range(values, start, end):
    if not isinstance(values, RaggedMethods):
        return values[start:end]
    s = values.row_splits
    inner = _value_range(values.values, s[start], s[end])
    return values._make(inner, s[start : end + 1] - s[start], values.uniform_row_length)


def _static_rows(rt, k):
    """How many rows slice k keeps, where the rows and the slice are known statically."""
    n = rt.row_splits.shape[0].value
    if n is None or not all(v is None or isinstance(v, int) for v in (k.start, k.stop, k.step)):
        return None
    return len(range(n - 1)[k])


def _row_slice(rt, k):
    if k == slice(None):
        return rt
    dtype = rt.row_splits.dtype
    s, e = _slice_bounds(k, rt.nrows(), dtype)
    kept = _static_rows(rt, k)
    if k.step is None or k.step == 1:
        e = _op("Maximum", e, s)
        splits = rt.row_splits[s : e + 1]
        if kept is not None:
            splits.set_shape([kept + 1])
        start = splits[0]
        return rt._make(
            _value_range(rt.values, start, splits[-1]), splits - start, rt.uniform_row_length
        )
    step = _const(k.step, dtype)
    rows = ops.apply_op("RaggedRange", [s, e, step], {"Tsplits": dtype}).outputs[1]
    result = _gather_rows(rt, rows)
    if kept is not None:
        result.row_splits.set_shape([kept + 1])
    return result


def _slice_bounds(k, n, dtype):
    """start and stop of slice k over n items (scalars), clipped as Python's."""
    step = 1 if k.step is None else k.step
    zero = _const(0, dtype)

    def clip(v, default, lo, hi):
        if v is None:
            return default
        v = _const(v, dtype) if not isinstance(v, ops.Tensor) else _cast(v, dtype)
        v = _op("SelectV2", _op("Less", v, zero), v + n, v)
        return _op("Minimum", _op("Maximum", v, lo), hi)

    if step > 0:
        return clip(k.start, zero, zero, n), clip(k.stop, n, zero, n)
    minus = _const(-1, dtype)
    return clip(k.start, n - 1, minus, n - 1), clip(k.stop, minus, minus, n - 1)


def _gather_rows(rt, rows):
    splits = list(rt.nested_row_splits)
    out = ops.apply_op(
        "RaggedGather", [splits, rt.flat_values, rows], {"OUTPUT_RAGGED_RANK": len(splits)}
    ).outputs
    result = out[-1]
    for s in reversed(out[:-1]):
        result = type(rt)._make(result, s)
    return result


def _inner(rt, keys):
    """keys applied to dimensions 1.. of rt."""
    if not keys:
        return rt
    k, rest = keys[0], keys[1:]
    if k is None:
        raise ValueError("asyncflow's ragged indexing takes newaxis in front only")
    if _is_int(k):
        raise ValueError("Cannot index into an inner ragged dimension.")
    if not isinstance(k, slice):
        raise TypeError(
            f"Ragged __getitem__ expects an int, slice, Ellipsis or newaxis; got {k!r}"
        )
    values = rt.values
    if k != slice(None):
        dtype = rt.row_splits.dtype
        lengths = _diff(rt.row_splits)
        s, e = _slice_bounds(k, lengths, dtype)
        base = rt.row_splits[:-1]
        step = _const(1 if k.step is None else k.step, dtype)
        splits, positions = ops.apply_op(
            "RaggedRange", [base + s, base + e, step], {"Tsplits": dtype}
        ).outputs
        values = _take(values, positions)
        rt = rt._make(values, splits)
    if not rest:
        return rt
    if isinstance(values, RaggedMethods):
        return rt.with_values(_inner(values, rest))
    return rt.with_values(values[(slice(None), *rest)])


def _take(values, positions):
    if not isinstance(values, RaggedMethods):
        return _gather(values, positions)
    return _gather_rows(values, positions)
