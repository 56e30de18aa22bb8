"""`tf.experimental.RowPartition`: how a ragged dimension splits a flat list of values
into rows, in every encoding TF keeps (row_splits, row_lengths, value_rowids, nrows, nvals,
row_starts, row_limits, a uniform row length), as TF 2.21's graph-mode class.

A partition is built by a factory (`from_row_splits`, `from_row_lengths`,
`from_value_rowids`, `from_row_starts`, `from_row_limits`, `from_uniform_row_length`),
which checks it as TF's does (`validate`: InvalidArgumentError at build time for
constant arguments, else an Assert the encodings wait on).  Invariant: `row_splits` is
always there; the other encodings are kept when given and computed from the splits
otherwise; all share one dtype (int32 or int64, int64 by default).
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ragged_methods import (
    _cast,
    _check,
    _concat,
    _const,
    _diff,
    _dim0,
    _lengths_to_splits,
    _op,
    _range,
    _rowids_nrows,
    _rowids_of,
    _static,
)

__all__ = ["RowPartition"]

_I32, _I64 = dtypes.int32, dtypes.int64
_PRIVATE = object()


def _as_partition_tensor(value, name, dtype, dtype_hint):
    """value as an int32/int64 tensor (Python values: dtype, else dtype_hint, else int64).

    Raises:
      ValueError: another dtype, or (for vectors) not a vector.
    """
    if isinstance(value, ops.Tensor):
        t = value if dtype is None else _cast(value, dtypes.as_dtype(dtype))
    else:
        want = dtype if dtype is not None else (dtype_hint or _I64)
        try:
            t = ops.convert_to_tensor(value, dtype=want, name=name)
        except (TypeError, ValueError):
            t = ops.convert_to_tensor(value, name=name)
    if t.dtype not in (_I32, _I64):
        raise ValueError(f"{name} must have dtype int32 or int64")
    return t


def _guard(t, checks):
    if not checks:
        return t
    with ops.control_dependencies(checks):
        return _op("Identity", t)


class RowPartition:
    """`tf.experimental.RowPartition` (see the module note).

    Raises:
      ValueError: constructing it directly (TF's message), or a factory's argument of
        the wrong rank or dtype.
    """

    def __init__(self, row_splits, row_lengths=None, value_rowids=None, nrows=None,
                 uniform_row_length=None, nvals=None, internal=None):  # fmt: skip
        if internal is not _PRIVATE:
            raise ValueError(
                "RowPartition constructor is private; please use one of the factory methods "
                "instead (e.g., RowPartition.from_row_lengths())"
            )
        self._row_splits = row_splits
        self._row_lengths = row_lengths
        self._value_rowids = value_rowids
        self._nrows = nrows
        self._uniform_row_length = uniform_row_length
        self._nvals = nvals

    # -- factories

    @classmethod
    def from_row_splits(cls, row_splits, validate=True, dtype=None, dtype_hint=None):
        """Row i is values[row_splits[i]:row_splits[i + 1]]."""
        with ops.name_scope(None, "RowPartitionFromRowSplits", []):
            splits = _as_partition_tensor(row_splits, "row_splits", dtype, dtype_hint)
            splits.shape.with_rank(1)
            if splits.shape[0].value == 0:
                raise ValueError("row_splits may not be empty")
            checks = []
            if validate:
                msg = "Arguments to from_row_splits do not form a valid RaggedTensor:"
                _check("==", splits[:1], _const([0], splits.dtype), msg + "zero", checks)
                _check(">=0", _diff(splits), None, msg + "monotonic.  ", checks)
            return cls(_guard(splits, checks), internal=_PRIVATE)

    @classmethod
    def from_row_lengths(cls, row_lengths, validate=True, dtype=None, dtype_hint=None):
        """Rows of row_lengths[i] values each."""
        with ops.name_scope(None, "RowPartitionFromRowLengths", []):
            lengths = _as_partition_tensor(row_lengths, "row_lengths", dtype, dtype_hint)
            lengths.shape.with_rank(1)
            checks = []
            if validate:
                msg = "Arguments to from_row_lengths do not form a valid RowPartition.  "
                _check(">=0", lengths, None, msg, checks)
            lengths = _guard(lengths, checks)
            return cls(_lengths_to_splits(lengths), row_lengths=lengths, internal=_PRIVATE)

    @classmethod
    def from_value_rowids(cls, value_rowids, nrows=None, validate=True, dtype=None,
                          dtype_hint=None):  # fmt: skip
        """Value j in row value_rowids[j] (sorted); nrows rows (default: last id + 1).

        Raises:
          ValueError: nrows known to be smaller than the last id plus one.
        """
        with ops.name_scope(None, "RowPartitionFromValueRowIds", []):
            rowids = _as_partition_tensor(value_rowids, "value_rowids", dtype, dtype_hint)
            rowids.shape.with_rank(1)
            nrows_t, checks = _rowids_nrows(rowids, nrows, validate)
            rowids = _guard(rowids, checks)
            counts = _op("DenseBincount", rowids, nrows_t, _const([], rowids.dtype),
                         binary_output=False)  # fmt: skip
            return cls(
                _lengths_to_splits(counts),
                value_rowids=rowids,
                nrows=nrows_t,
                nvals=_dim0(rowids, rowids.dtype),
                internal=_PRIVATE,
            )

    @classmethod
    def from_row_starts(cls, row_starts, nvals, validate=True, dtype=None, dtype_hint=None):
        """Row i from row_starts[i] to the next row's start (the last: to nvals)."""
        with ops.name_scope(None, "RowPartitionFromRowStarts", []):
            starts = _as_partition_tensor(row_starts, "row_starts", dtype, dtype_hint)
            starts.shape.with_rank(1)
            nvals_t = ops.convert_to_tensor(nvals, dtype=starts.dtype, name="nvals")
            splits = _concat([starts, _op("Reshape", nvals_t, _const([1], _I32))])
            checks = []
            if validate:
                msg = "Arguments to from_row_starts do not form a valid RaggedTensor"
                _check("==", splits[:1], _const([0], starts.dtype), msg, checks)
                _check(">=0", _diff(splits), None, msg + ".  ", checks)
            return cls(_guard(splits, checks), nvals=nvals_t, internal=_PRIVATE)

    @classmethod
    def from_row_limits(cls, row_limits, validate=True, dtype=None, dtype_hint=None):
        """Row i from the previous row's limit (0 for the first) to row_limits[i]."""
        with ops.name_scope(None, "RowPartitionFromRowLimits", []):
            limits = _as_partition_tensor(row_limits, "row_limits", dtype, dtype_hint)
            limits.shape.with_rank(1)
            splits = _concat([_const([0], limits.dtype), limits])
            checks = []
            if validate:
                msg = "Arguments to from_row_limits do not form a valid RaggedTensor.  "
                _check(">=0", _diff(splits), None, msg, checks)
            return cls(_guard(splits, checks), internal=_PRIVATE)

    @classmethod
    def from_uniform_row_length(cls, uniform_row_length, nvals=None, nrows=None,
                                validate=True, dtype=None, dtype_hint=None):  # fmt: skip
        """Rows of uniform_row_length values each: nrows rows (default: nvals // length,
        0 for length 0).

        Raises:
          ValueError: neither nvals nor nrows given.
        """
        if nvals is None and nrows is None:
            raise ValueError("Either nvals or nrows must be specified")
        with ops.name_scope(None, "RowPartitionFromUniformRowLength", []):
            length = _as_partition_tensor(uniform_row_length, "uniform_row_length", dtype,
                                          dtype_hint)  # fmt: skip
            length.shape.with_rank(0)
            dt = length.dtype
            ls = _static(length)
            if nrows is None:
                nvals_t = ops.convert_to_tensor(nvals, dtype=dt, name="nvals")
                ns = _static(nvals_t)
                if ls is not None and ns is not None:  # (TF knows nrows statically then)
                    nrows_t = _const(0 if int(ls) == 0 else int(ns) // int(ls), dt)
                else:
                    safe = _op("Maximum", length, _const(1, dt))
                    rows = _op("FloorDiv", nvals_t, safe)
                    zero = _op("Equal", length, _const(0, dt))
                    nrows_t = _op("Select", zero, _const(0, dt), rows)
            else:
                nrows_t = ops.convert_to_tensor(nrows, dtype=dt, name="nrows")
                nvals_t = (
                    nrows_t * length
                    if nvals is None
                    else ops.convert_to_tensor(nvals, dtype=dt, name="nvals")
                )
            checks = []
            if validate:
                _check(">=0", length, None, "uniform_row_length must be >= 0.", checks)
                if nrows is not None and nvals is not None:
                    rs = _static(nrows_t)
                    product = (
                        _const(int(rs) * int(ls), dt)
                        if rs is not None and ls is not None
                        else nrows_t * length
                    )
                    _check("==", product, nvals_t, "uniform_row_length * nrows must be nvals",
                           checks)  # fmt: skip
            length = _guard(length, checks)
            splits = _range(_const(0, dt), nrows_t * length + 1, _op("Maximum", length,
                            _const(1, dt)))  # fmt: skip
            if _static(length) == 0:
                splits = _op("Fill", _op("Reshape", nrows_t + 1, _const([1], _I32)),
                             _const(0, dt))  # fmt: skip
            return cls(splits, nrows=nrows_t, uniform_row_length=length, nvals=nvals_t,
                       internal=_PRIVATE)  # fmt: skip

    # -- encodings

    @property
    def dtype(self):
        return self._row_splits.dtype

    def row_splits(self):
        return self._row_splits

    def row_lengths(self):
        if self._row_lengths is not None:
            return self._row_lengths
        if self._uniform_row_length is not None:
            return _op("Fill", _op("Reshape", self.nrows(), _const([1], _I32)),
                       self._uniform_row_length)  # fmt: skip
        return _diff(self._row_splits)

    def value_rowids(self):
        if self._value_rowids is not None:
            return self._value_rowids
        return _rowids_of(self._row_splits)

    def nrows(self):
        if self._nrows is not None:
            return self._nrows
        return _dim0(self._row_splits, self.dtype) - 1

    def nvals(self):
        if self._nvals is not None:
            return self._nvals
        return self._row_splits[-1]

    def row_starts(self):
        return self._row_splits[:-1]

    def row_limits(self):
        return self._row_splits[1:]

    def uniform_row_length(self):
        return self._uniform_row_length

    def offsets_in_rows(self):
        """Each value's position within its row."""
        rowids = self.value_rowids()
        starts = _op("GatherV2", self.row_starts(), rowids, _const(0, _I32))
        return _range(_const(0, self.dtype), self.nvals(), _const(1, self.dtype)) - starts

    def is_uniform(self) -> bool:
        return self._uniform_row_length is not None

    @property
    def static_nrows(self):
        n = self._row_splits.shape[0].value
        if n is not None:
            return n - 1
        return None if self._nrows is None else _int_or_none(_static(self._nrows))

    @property
    def static_nvals(self):
        if self._value_rowids is not None and self._value_rowids.shape[0].value is not None:
            return self._value_rowids.shape[0].value
        return None if self._nvals is None else _int_or_none(_static(self._nvals))

    @property
    def static_uniform_row_length(self):
        if self._uniform_row_length is None:
            return None
        return _int_or_none(_static(self._uniform_row_length))

    def with_dtype(self, dtype) -> RowPartition:
        """This partition with every encoding cast to `dtype`."""
        dtype = dtypes.as_dtype(dtype)
        if dtype == self.dtype:
            return self

        def cast(t):
            return None if t is None else _cast(t, dtype)

        return RowPartition(
            cast(self._row_splits), cast(self._row_lengths), cast(self._value_rowids),
            cast(self._nrows), cast(self._uniform_row_length), cast(self._nvals),
            internal=_PRIVATE,
        )  # fmt: skip

    def __repr__(self) -> str:
        if self._uniform_row_length is not None:
            return (
                f"tf.RowPartition(nrows={self._nrows}, uniform_row_length="
                f"{self._uniform_row_length})"
            )
        return f"tf.RowPartition(row_splits={self._row_splits})"


def _int_or_none(value):
    return None if value is None else int(value)
