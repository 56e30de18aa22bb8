"""RaggedTensor (TF1's `tf.RaggedTensor`, graph mode): a tensor whose rows have
different lengths, as `values` (a Tensor, or a RaggedTensor for more ragged dimensions)
split into rows by `row_splits` (row i is values[row_splits[i]:row_splits[i + 1]]).

What asyncflow has of TF's ragged API is what its parsing ops need: the composite itself
(fetched as a `RaggedTensorValue`, whose `to_list()` gives the nested Python lists),
`tf.ragged.constant` / `constant_value`, `from_row_splits`, `from_uniform_row_length`,
concatenation along the rows (`concat(..., axis=0)`) and row indexing (`rt[i]`).  A
partition made by `from_uniform_row_length` keeps its length (`uniform_row_length`) and
counts in `ragged_rank`, as TF's does.  Ragged math, control flow over ragged values and
`tf.concat` dispatch are not here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops

__all__ = ["RaggedTensor", "RaggedTensorValue", "constant", "constant_value", "concat"]

_SPLIT_TYPES = (dtypes.int32, dtypes.int64)


def is_ragged(value) -> bool:
    return isinstance(value, (RaggedTensor, RaggedTensorValue))


class _Nesting:
    """The parts of a ragged value nested in its `values` (a RaggedTensor's in a
    RaggedTensor, a fetched value's in a fetched value)."""

    @property
    def flat_values(self):
        v = self._values
        while isinstance(v, _Nesting):
            v = v.values
        return v

    @property
    def nested_row_splits(self):
        out, v = [self._row_splits], self._values
        while isinstance(v, _Nesting):
            out.append(v.row_splits)
            v = v.values
        return tuple(out)

    @property
    def ragged_rank(self) -> int:
        return len(self.nested_row_splits)


class RaggedTensorValue(_Nesting):
    """A fetched RaggedTensor: `values` (an ndarray or RaggedTensorValue) split by
    `row_splits` (an ndarray)."""

    def __init__(self, values, row_splits, uniform_row_length=None):
        self._values = values
        self._row_splits = np.asarray(row_splits)
        self._uniform_row_length = uniform_row_length

    values = property(lambda self: self._values)
    row_splits = property(lambda self: self._row_splits)

    @property
    def dtype(self):
        return dtypes.as_dtype(self.flat_values.dtype)

    @property
    def shape(self):
        inner = self.flat_values.shape[1:]
        nrows = len(self._row_splits) - 1
        return (nrows,) + (None,) * (self.ragged_rank - 1) + tuple(inner)

    def to_list(self) -> list:
        inner = self._values
        rows = inner.to_list() if isinstance(inner, RaggedTensorValue) else inner.tolist()
        s = self._row_splits.tolist()
        return [rows[s[i] : s[i + 1]] for i in range(len(s) - 1)]

    def __repr__(self) -> str:
        return f"tf.RaggedTensorValue(values={self._values!r}, row_splits={self._row_splits!r})"


class RaggedTensor(_Nesting):
    """A graph ragged tensor: `values` split into rows by `row_splits`."""

    def __init__(self, values, row_splits, uniform_row_length=None, internal=False):
        if not internal:
            raise ValueError(
                "RaggedTensor constructor is private; please use one of the factory methods "
                "instead (e.g., RaggedTensor.from_row_lengths())"
            )
        self._values = values
        self._row_splits = row_splits
        self._uniform_row_length = uniform_row_length

    # -- factories -------------------------------------------------------------------------

    @classmethod
    def from_row_splits(cls, values, row_splits, name=None, validate=True):
        """Rows values[row_splits[i]:row_splits[i + 1]] (row_splits int32 or int64)."""
        del validate  # (the kernels that make splits check them)
        with ops.name_scope(name, "RaggedFromRowSplits", []):
            if not is_ragged(values):
                values = ops.convert_to_tensor(values, name="values")
            row_splits = ops.convert_to_tensor(row_splits, name="row_splits")
            if row_splits.dtype not in _SPLIT_TYPES:
                raise ValueError(f"Row-partitioning tensors must have dtype int32 or int64, not "
                                 f"{row_splits.dtype.name}")  # fmt: skip
            row_splits.shape.with_rank(1)
            _check_split_dtype(values, row_splits.dtype)
            return cls(values, row_splits, internal=True)

    @classmethod
    def from_uniform_row_length(cls, values, uniform_row_length, nrows=None, validate=True,
                                name=None):  # fmt: skip
        """Rows of `uniform_row_length` values each (a Python int)."""
        del validate, nrows
        length = int(uniform_row_length)
        if length <= 0:
            raise ValueError(f"uniform_row_length must be positive, got {length}")
        with ops.name_scope(name, "RaggedFromUniformRowLength", []):
            if is_ragged(values):
                split_dtype = values.row_splits.dtype
                n = _nrows(values.row_splits, split_dtype) - 1
            else:
                values = ops.convert_to_tensor(values, name="values")
                split_dtype = dtypes.int64
                n = _nrows(values, split_dtype)
            zero, step = (ops.convert_to_tensor(x, split_dtype) for x in (0, length))
            splits = ops.apply_op("Range", [zero, n + 1, step]).outputs[0]
            return cls(values, splits, uniform_row_length=length, internal=True)

    # -- parts -----------------------------------------------------------------------------

    values = property(lambda self: self._values)
    row_splits = property(lambda self: self._row_splits)
    uniform_row_length = property(lambda self: self._uniform_row_length)

    @property
    def dtype(self):
        return self.flat_values.dtype

    @property
    def graph(self):
        return self._row_splits.graph

    @property
    def shape(self) -> tensor_shape.TensorShape:
        nrows = self._row_splits.shape[0].value
        dims = [None if nrows is None else nrows - 1]
        v = self
        while isinstance(v, RaggedTensor):
            inner = v.values
            dims.append(
                v.uniform_row_length if v.uniform_row_length is not None else None
            )
            v = inner
        return tensor_shape.TensorShape(dims[:-1] + [dims[-1]]).concatenate(
            v.shape[1:] if v.shape.dims is not None else tensor_shape.unknown_shape()
        )

    def get_shape(self):
        return self.shape

    def _nested(self):
        """Outer to inner: each level's (row_splits, uniform_row_length)."""
        out, v = [], self
        while isinstance(v, RaggedTensor):
            out.append((v.row_splits, v.uniform_row_length))
            v = v.values
        return out

    def _fetch_components(self):
        levels = self._nested()

        def make(parts):
            value = parts[0]
            for (_, length), splits in zip(reversed(levels), reversed(parts[1:])):
                value = RaggedTensorValue(value, splits, length)
            return value

        return [self.flat_values, *(s for s, _ in levels)], make

    def with_values(self, new_values):
        return RaggedTensor(new_values, self._row_splits, self._uniform_row_length, internal=True)

    def __getitem__(self, key):
        """Row `key` (a Python int): a Tensor when ragged_rank is 1, else a RaggedTensor."""
        if not isinstance(key, (int, np.integer)):
            raise TypeError("asyncflow's RaggedTensor supports indexing by one int row only")
        key = int(key)
        with ops.name_scope(None, "RaggedGetItem", []):
            if key < 0:
                n = _nrows(self._row_splits, self._row_splits.dtype) - 1
                start, end = self._row_splits[n + key], self._row_splits[n + key + 1]
            else:
                start, end = self._row_splits[key], self._row_splits[key + 1]
            return _rows(self._values, start, end)

    def to_list(self):
        raise ValueError("RaggedTensor.to_list() is only available in eager mode.")

    def __repr__(self) -> str:
        return (
            f"tf.RaggedTensor(values={self._values!r}, row_splits={self._row_splits!r})"
        )


def _nrows(t, dtype):
    """t's first dimension as a scalar tensor of `dtype`."""
    return ops.apply_op("Shape", [t], {"out_type": dtype}).outputs[0][0]


def _concat0(parts):
    axis = ops.convert_to_tensor(0, dtypes.int32)
    return ops.apply_op("ConcatV2", [parts, axis]).outputs[0]


def _check_split_dtype(values, dtype):
    if isinstance(values, RaggedTensor) and values.row_splits.dtype != dtype:
        raise ValueError(
            "dtype mismatch: values.row_splits.dtype is "
            f"{values.row_splits.dtype.name} but row_splits.dtype is {dtype.name}"
        )


def _rows(values, start, end):
    """values[start:end] along the rows, for a Tensor or a RaggedTensor."""
    if not isinstance(values, RaggedTensor):
        return values[start:end]
    splits = values.row_splits
    new_splits = splits[start : end + 1] - splits[start]
    inner = _rows(values.values, splits[start], splits[end])
    return RaggedTensor(inner, new_splits, values.uniform_row_length, internal=True)


# -- tf.ragged.constant ----------------------------------------------------------------------


def _max_depth(x) -> int:
    if not isinstance(x, (list, tuple)):
        return 0
    return 1 + max((_max_depth(e) for e in x), default=0)


def _constant_parts(pylist, dtype, ragged_rank, inner_shape):
    """(flat values as an ndarray, splits per ragged level outer first) of `pylist`."""
    if not isinstance(pylist, (list, tuple)):
        raise ValueError("pylist must be a list or tuple, not a scalar")
    depth = _max_depth(pylist)
    inner_rank = len(inner_shape) if inner_shape is not None else None
    if ragged_rank is None:
        ragged_rank = max(1, depth - 1 - (inner_rank or 0))
    if ragged_rank < 1:
        raise ValueError(f"ragged_rank must be at least 1; got {ragged_rank}")
    rows, splits = list(pylist), []
    for _ in range(ragged_rank):
        s, nxt = [0], []
        for row in rows:
            if not isinstance(row, (list, tuple)):
                raise ValueError("all scalar values must have the same nesting depth")
            nxt.extend(row)
            s.append(len(nxt))
        splits.append(s)
        rows = nxt
    np_dtype = None if dtype is None else dtypes.as_dtype(dtype).as_numpy_dtype
    if rows:
        flat = np.asarray(rows, dtype=np_dtype)
    else:  # no values: the inner dims the nesting leaves are empty too
        rank = max(0, depth - 1 - ragged_rank)
        dims = list(inner_shape) if inner_shape is not None else [0] * rank
        flat = np.zeros([0, *dims], dtype=np_dtype or np.float32)
    if inner_shape is not None:
        flat = flat.reshape([len(rows), *inner_shape])
    if dtype is None:  # Python values: TF's defaults (int32, float32, string)
        kind = flat.dtype.kind
        flat = flat.astype({"i": np.int32, "u": np.int32, "f": np.float32}.get(kind, flat.dtype))
    if flat.dtype.kind in "USO":
        out = np.empty(flat.size, dtype=object)
        out[:] = [x.encode() if isinstance(x, str) else x for x in flat.ravel()]
        flat = out.reshape(flat.shape)
    return flat, splits


def constant(pylist, dtype=None, ragged_rank=None, inner_shape=None, name=None,
             row_splits_dtype=dtypes.int64):  # fmt: skip
    """A RaggedTensor of the nested Python lists `pylist` (tf.ragged.constant): the
    outer `ragged_rank` list levels are ragged, the rest (`inner_shape`) dense."""
    row_splits_dtype = dtypes.as_dtype(row_splits_dtype)
    flat, splits = _constant_parts(pylist, dtype, ragged_rank, inner_shape)
    with ops.name_scope(name, "RaggedConstant", []):
        value = ops.convert_to_tensor(flat, dtype=dtype)
        for s in reversed(splits):
            value = RaggedTensor.from_row_splits(
                value, ops.convert_to_tensor(np.asarray(s, row_splits_dtype.as_numpy_dtype))
            )
        return value


def constant_value(pylist, dtype=None, ragged_rank=None, inner_shape=None,
                   row_splits_dtype="int64"):  # fmt: skip
    """The RaggedTensorValue of `pylist` (tf.ragged.constant_value)."""
    split_np = dtypes.as_dtype(row_splits_dtype).as_numpy_dtype
    flat, splits = _constant_parts(pylist, dtype, ragged_rank, inner_shape)
    value = flat
    for s in reversed(splits):
        value = RaggedTensorValue(value, np.asarray(s, split_np))
    return value


# -- concat ----------------------------------------------------------------------------------


def concat(values, axis, name=None):
    """RaggedTensors (of one ragged_rank and splits dtype) concatenated along their rows
    (axis 0 only)."""
    if axis != 0:
        raise NotImplementedError("asyncflow's ragged concat joins along axis 0 only")
    values = list(values)
    if not values:
        raise ValueError("values must not be empty")
    with ops.name_scope(name, "RaggedConcat", []):
        return _concat_rows(values)


def _concat_rows(parts):
    if not isinstance(parts[0], RaggedTensor):
        return _concat0([ops.convert_to_tensor(p) for p in parts])
    if not all(isinstance(p, RaggedTensor) for p in parts):
        raise ValueError("all values must have the same ragged_rank")
    ranks = {p.ragged_rank for p in parts}
    if len(ranks) != 1:
        raise ValueError("all values must have the same ragged_rank")
    pieces, offset = [parts[0].row_splits], parts[0].row_splits[-1]
    for p in parts[1:]:
        pieces.append(p.row_splits[1:] + offset)
        offset = offset + p.row_splits[-1]
    lengths = {p.uniform_row_length for p in parts}
    return RaggedTensor(
        _concat_rows([p.values for p in parts]),
        _concat0(pieces),
        lengths.pop() if len(lengths) == 1 else None,
        internal=True,
    )
