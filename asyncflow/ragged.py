"""RaggedTensor (TF1's `tf.RaggedTensor`, graph mode): a tensor whose rows have
different lengths, as `values` (a Tensor, or a RaggedTensor for more ragged dimensions)
split into rows by `row_splits` (row i is values[row_splits[i]:row_splits[i + 1]]).

This module holds the composite itself (fetched as a `RaggedTensorValue`, whose
`to_list()` gives the nested Python lists), `tf.ragged.constant` / `constant_value`,
`from_uniform_row_length` and concatenation along any axis (`concat`, which `tf.concat`
dispatches to when a value is ragged).  A partition made by `from_uniform_row_length`
keeps its length (`uniform_row_length`) and counts in `ragged_rank`, as TF's does.
The other factories, views, conversions and indexing are `ragged_methods.RaggedMethods`
(a mixin); the tf.ragged functions and what dense ops do with ragged arguments are in
`ragged_functions`; the raw ragged ops in `ops/ragged_ops.py`.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ragged_methods import RaggedMethods

__all__ = ["RaggedTensor", "RaggedTensorValue", "constant", "constant_value", "concat"]


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

    def __str__(self) -> str:  # (TF's: the rows)
        return f"<tf.RaggedTensorValue {self.to_list()}>"


class RaggedTensor(_Nesting, RaggedMethods):
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
            dims.append(v.uniform_row_length if v.uniform_row_length is not None else None)
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

    def to_list(self):
        raise ValueError("RaggedTensor.to_list() is only available in eager mode.")

    def __repr__(self) -> str:
        return f"tf.RaggedTensor(values={self._values}, row_splits={self._row_splits})"


def _nrows(t, dtype):
    """t's first dimension as a scalar tensor of `dtype`."""
    return ops.apply_op("Shape", [t], {"out_type": dtype}).outputs[0][0]


def _concat0(parts):
    axis = ops.convert_to_tensor(0, dtypes.int32)
    return ops.apply_op("ConcatV2", [parts, axis]).outputs[0]


# -- tf.ragged.constant ----------------------------------------------------------------------


def _max_depth(x) -> int:
    if not isinstance(x, (list, tuple)):
        return 0
    return 1 + max((_max_depth(e) for e in x), default=0)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    else:
        yield x


def _constant_parts(pylist, dtype, ragged_rank, inner_shape):
    """(flat values as an ndarray, splits per ragged level outer first) of `pylist`."""
    depth = _max_depth(pylist)
    inner_rank = len(inner_shape) if inner_shape is not None else None
    if ragged_rank is None:  # (no ragged level: a dense value, as TF's)
        ragged_rank = max(0, depth - 1 - (inner_rank or 0))
    if ragged_rank < 0:
        raise ValueError(f"Invalid ragged_rank={ragged_rank}: must be nonnegative")
    rows, splits = (list(pylist) if isinstance(pylist, (list, tuple)) else pylist), []
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
    if not isinstance(pylist, (list, tuple)):
        flat = np.asarray(pylist, dtype=np_dtype)
    elif rows:
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
        if dtype is None and not all(isinstance(x, (str, bytes)) for x in _leaves(rows)):
            raise TypeError("Expected a list of strings: numbers and strings were mixed")
        out = np.empty(flat.size, dtype=object)
        out[:] = [x.encode() if isinstance(x, str) else x for x in flat.ravel()]
        flat = out.reshape(flat.shape)
    return flat, splits


def constant(pylist, dtype=None, ragged_rank=None, inner_shape=None, name=None,
             row_splits_dtype=dtypes.int64):  # fmt: skip
    """A RaggedTensor of the nested Python lists `pylist` (tf.ragged.constant): the
    outer `ragged_rank` list levels are ragged, the rest (`inner_shape`) dense; a plain
    Tensor where no level is ragged (a scalar, a flat list, ragged_rank=0), as TF's."""
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
    """RaggedTensors (and Tensors, taken as ragged) joined along `axis`, as TF's
    `tf.concat` on ragged values: axis 0 appends rows; axis 1 joins row i of every input
    into row i of the result (the inputs must have as many rows); a deeper axis joins
    the values inside rows whose partitions are identical (checked when the step runs,
    or when the graph is built where the partitions are constants).

    Raises:
      ValueError: no values, a rank that differs or is unknown, an axis out of range,
        row_splits of different dtypes.
      InvalidArgumentError: inputs whose row counts (axis 1) or partitions (deeper
        axes) differ: at build time when known then, else when the step runs.
    """
    values = list(values)
    if not values:
        raise ValueError("values must not be empty")
    with ops.name_scope(name, "RaggedConcat", []):
        values = [v if is_ragged(v) else ops.convert_to_tensor(v) for v in values]
        if not any(is_ragged(v) for v in values):
            return _concat_dense(values, axis)
        split_dtypes = {v.row_splits.dtype for v in values if is_ragged(v)}
        if len(split_dtypes) > 1:
            raise ValueError(
                "Input RaggedTensors have mismatched row_splits dtypes; use "
                "RaggedTensor.with_row_splits_dtype() to convert them to compatible dtypes."
            )
        split_dtype = split_dtypes.pop()
        ndims = values[0].shape.ndims
        for v in values[1:]:
            if ndims is not None and v.shape.ndims is not None:
                v.shape.with_rank(ndims)
            ndims = ndims if ndims is not None else v.shape.ndims
        if ndims is None:
            raise ValueError("asyncflow's ragged concat needs the inputs' rank at build time")
        axis = int(axis)
        if not -ndims <= axis < ndims:
            raise ValueError(f"axis={axis} out of bounds: expected {-ndims}<=axis<{ndims}")
        axis %= ndims
        rank = max(max(v.ragged_rank for v in values if is_ragged(v)), 1)
        values = [_as_ragged(v, rank, split_dtype) for v in values]
        if len(values) == 1:
            return values[0]
        return _concat_axis(values, axis)


def _concat_dense(values, axis):
    axis_t = ops.convert_to_tensor(axis, dtypes.int32)
    if len(values) == 1:
        return ops.apply_op("Identity", [values[0]]).outputs[0]
    return ops.apply_op("ConcatV2", [values, axis_t]).outputs[0]


def _as_ragged(value, rank, split_dtype):
    """`value` with at least `rank` ragged dimensions (a Tensor's rows all of its length)."""
    if not is_ragged(value):
        shape = value.shape
        if shape.ndims is None or shape.ndims <= rank:
            raise ValueError(f"Shape {shape} must have rank at least {rank + 1}")
        dims = [_dim(value, i, split_dtype) for i in range(rank + 1)]
        flat = ops.apply_op(
            "Reshape",
            [value, ops.apply_op("ConcatV2", [
                [_pack([_product(dims)]),
                 ops.apply_op("Shape", [value], {"out_type": split_dtype}).outputs[0][rank + 1 :]],
                ops.convert_to_tensor(0, dtypes.int32)]).outputs[0]],
        ).outputs[0]  # fmt: skip
        out, n = flat, _product(dims)
        for i in range(rank, 0, -1):  # level i: rows of dims[i] values, n of them
            n = ops.apply_op("FloorDiv", [n, dims[i]]).outputs[0]
            splits = _range(ops.convert_to_tensor(0, split_dtype), n * dims[i] + 1, dims[i])
            out = RaggedTensor(out, splits, internal=True)
        return out
    while value.ragged_rank < rank:  # the innermost dense dimension becomes a partition
        value = _split_innermost(value, split_dtype)
    return value


def _split_innermost(value, split_dtype):
    if not is_ragged(value.values):
        inner = value.values
        if inner.shape.ndims is None or inner.shape.ndims < 2:
            raise ValueError(f"Shape {value.shape} must have rank at least "
                             f"{value.ragged_rank + 2}")  # fmt: skip
        return value.with_values(_as_ragged(inner, 1, split_dtype))
    return value.with_values(_split_innermost(value.values, split_dtype))


def _dim(value, i, dtype):
    d = value.shape[i].value
    if d is not None:
        return ops.convert_to_tensor(d, dtype)
    return ops.apply_op("Shape", [value], {"out_type": dtype}).outputs[0][i]


def _product(dims):
    out = dims[0]
    for d in dims[1:]:
        out = ops.apply_op("Mul", [out, d]).outputs[0]
    return out


def _op(op_type, *inputs, **attrs):
    """The first output of a new `op_type` op."""
    return ops.apply_op(op_type, list(inputs), attrs or None).outputs[0]


def _i32(value):
    return ops.convert_to_tensor(value, dtypes.int32)


def _pack(parts):
    return ops.apply_op("Pack", [parts], {"axis": 0}).outputs[0]


def _range(start, limit, delta):
    return ops.apply_op("Range", [start, limit, delta]).outputs[0]


def _cumsum(x, exclusive=False):
    axis = ops.convert_to_tensor(0, dtypes.int32)
    return ops.apply_op("Cumsum", [x, axis], {"exclusive": exclusive}).outputs[0]


def _gather(params, indices):
    axis = ops.convert_to_tensor(0, dtypes.int32)
    return ops.apply_op("GatherV2", [params, indices, axis]).outputs[0]


def _concat_axis(values, axis):
    if axis == 0:
        return _concat_rows(values)
    if axis == 1:
        return _concat_within_rows(values)
    _assert_same_splits(values)
    inner = _concat_axis([v.values for v in values], axis - 1) if is_ragged(values[0].values) \
        else _concat_dense([v.values for v in values], axis - 1)  # fmt: skip
    return values[0].with_values(inner)


def _concat_within_rows(values):
    """Row i of the result: row i of each input, in order (TF's axis-1 ragged concat)."""
    k, dtype = len(values), values[0].row_splits.dtype
    nrows = [_nrows(v.row_splits, dtype) - 1 for v in values]
    checks = _assert_equal_nrows(values, nrows)
    with ops.control_dependencies(checks):
        stacked = _concat_rows(values)  # input j's row i is row j * n + i
        n = ops.apply_op("Identity", [nrows[0]]).outputs[0]
    zero, one = (ops.convert_to_tensor(x, dtype) for x in (0, 1))
    order = _range(zero, n * k, one)  # [k, n] -> [n, k]: row i of input 0, of input 1, ...
    order = _op("Reshape", order, _pack([ops.convert_to_tensor(k, dtype), n]))
    order = _op("Reshape", _op("Transpose", order, _i32([1, 0])), _i32([-1]))
    splits = stacked.row_splits
    starts = _gather(splits, order)
    lengths = _gather(splits, order + 1) - starts
    row_ends = _cumsum(lengths)
    merged = ops.apply_op("ConcatV2", [
        [ops.convert_to_tensor([0], dtype), row_ends],
        ops.convert_to_tensor(0, dtypes.int32)]).outputs[0]  # fmt: skip
    new_splits = merged[::k]
    return RaggedTensor(_gather_ranges(stacked.values, starts, lengths), new_splits,
                        internal=True)  # fmt: skip


def _gather_ranges(values, starts, lengths):
    """values[starts[0]:starts[0]+lengths[0]], then the next range, ... along the rows."""
    ends = _cumsum(lengths)
    total = ends[-1:]
    dtype = lengths.dtype
    zero, one = (ops.convert_to_tensor(x, dtype) for x in (0, 1))
    positions = _range(zero, ops.apply_op("Sum", [total, ops.convert_to_tensor(0, dtypes.int32)])
                       .outputs[0], one)  # fmt: skip
    piece = _op("UpperBound", _op("ExpandDims", ends, _i32(0)),
                _op("ExpandDims", positions, _i32(0)), out_type=dtype)[0]  # fmt: skip
    shift = _gather(ends - lengths - starts, piece)
    index = positions - shift
    if not is_ragged(values):
        return _gather(values, index)
    splits = values.row_splits
    inner_starts = _gather(splits, index)
    inner_lengths = _gather(splits, index + 1) - inner_starts
    inner_splits = ops.apply_op("ConcatV2", [
        [ops.convert_to_tensor([0], splits.dtype), _cumsum(inner_lengths)],
        ops.convert_to_tensor(0, dtypes.int32)]).outputs[0]  # fmt: skip
    return RaggedTensor(_gather_ranges(values.values, inner_starts, inner_lengths),
                        inner_splits, values.uniform_row_length, internal=True)  # fmt: skip


def _assert_equal_nrows(values, nrows):
    known = [v.row_splits.shape[0].value for v in values]
    for j, n in enumerate(known[1:], 1):
        if known[0] is not None and n is not None and n != known[0]:
            raise errors.InvalidArgumentError(
                None, None,
                f"Input tensors at index 0 (=x) and {j} (=y) have incompatible shapes.\n"
                f"x = {known[0] - 1}, y = {n - 1}",
            )  # fmt: skip
    checks = []
    for j, n in enumerate(nrows[1:], 1):
        if known[0] is not None and known[j] is not None:
            continue
        same = ops.apply_op("Equal", [nrows[0], n]).outputs[0]
        msg = ops.convert_to_tensor(
            f"Input tensors at index 0 (=x) and {j} (=y) have incompatible shapes."
        )
        checks.append(ops.apply_op("Assert", [same, [msg]]))
    return checks


def _assert_same_splits(values):
    """Deeper-axis concat: every input's outer partition equal to the first's."""
    first = values[0].row_splits
    first_v = ops.constant_value(first)
    checks = []
    for v in values[1:]:
        other = v.row_splits
        other_v = ops.constant_value(other)
        if first_v is not None and other_v is not None:
            if first_v.shape != other_v.shape or not np.array_equal(first_v, other_v):
                raise errors.InvalidArgumentError(
                    None, None,
                    f"Inputs must have identical ragged splits\nx = {first_v}, y = {other_v}",
                )  # fmt: skip
            continue
        same_len = ops.apply_op("Equal", [_nrows(first, first.dtype),
                                          _nrows(other, first.dtype)]).outputs[0]  # fmt: skip
        msg = ops.convert_to_tensor("Inputs must have identical ragged splits")
        checks.append(ops.apply_op("Assert", [same_len, [msg]]))
        with ops.control_dependencies(checks[-1:]):
            eq = ops.apply_op("Equal", [first, other]).outputs[0]
            all_eq = ops.apply_op("All", [eq, ops.convert_to_tensor(0, dtypes.int32)]).outputs[0]
            checks.append(ops.apply_op("Assert", [all_eq, [msg]]))
    if checks:
        with ops.control_dependencies(checks):
            values[0] = values[0].with_values(_identity_values(values[0].values))
    return values


def _identity_values(values):
    if is_ragged(values):
        return values.with_values(_identity_values(values.values))
    return ops.apply_op("Identity", [values]).outputs[0]


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


def _rebuild_ragged(like, components):
    values = components[0]
    for splits in reversed(components[1:]):
        values = RaggedTensor.from_row_splits(values, splits)
    return values


def _register_with_nest():
    from asyncflow import nest

    nest.register_composite(
        RaggedTensor, lambda rt: [rt.flat_values, *rt.nested_row_splits], _rebuild_ragged
    )


_register_with_nest()
