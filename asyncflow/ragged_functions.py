"""TF1's `tf.ragged` functions (range, boolean_mask, stack, stack_dynamic_partitions,
map_flat_values, cross, cross_hashed, placeholder, row_splits_to_segment_ids,
segment_ids_to_row_splits) and what TF's dense ops do when given a RaggedTensor
(TF "dispatches" them here): element-wise math on the flat values, reductions over
ragged axes (reduce_join too), gather (of rows, along inner axes, with batch_dims),
where (and its coordinates), split, dynamic_partition, reshape, matmul, cumsum, and
TF's text of a RaggedTensor for tf.strings.format.

Like `ragged.py` this module builds ops directly (`apply_op`) and imports no op family,
so the op families' builders can hand ragged arguments to it (`ops/math_ops.py`,
`ops/reduction_ops.py`, `ops/array_ops.py` check `is_ragged` first).  Ragged arguments
of one element-wise op must have the same partitions: an Assert checks them when the
step runs (as TF's), and a partition object shared by both is not checked.
"""

from __future__ import annotations

import builtins
import functools
import inspect

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow import ragged_broadcast as _rb
from asyncflow.ragged import RaggedTensor, concat, is_ragged
from asyncflow.ragged_methods import (
    _cast,
    _concat,
    _const,
    _diff,
    _dim0,
    _gather,
    _gather_rows,
    _lengths_to_splits,
    _op,
    _range,
    _rowids_of,
)
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "boolean_mask",
    "cross",
    "cross_hashed",
    "map_flat_values",
    "placeholder",
    "range",
    "row_splits_to_segment_ids",
    "segment_ids_to_row_splits",
    "stack",
    "stack_dynamic_partitions",
]

_I32, _I64 = dtypes.int32, dtypes.int64
_DEFAULT_CROSS_HASH_KEY = 0xDECAFCAFFE


def _from_splits(values, splits, uniform_row_length=None):
    return RaggedTensor(values, splits, uniform_row_length, internal=True)


def _convert(value, name=None, dtype=None):
    if is_ragged(value):
        return value
    return ops.convert_to_tensor(value, dtype=dtype, name=name)


# -- tf.ragged.range, segment ids ------------------------------------------------------------


def range(
    starts,
    limits=None,
    deltas=1,
    dtype=None,
    name=None,  # noqa: A001 - TF's name
    row_splits_dtype=dtypes.int64,
):
    """Row i: the numbers from starts[i] up to (not including) limits[i] in steps of
    deltas[i] (scalars broadcast); one argument: the limits, starting at 0.

    Raises:
      InvalidArgumentError: (when the step runs) a delta of 0.
    """
    if limits is None:
        starts, limits = 0, starts
    with ops.name_scope(name, "RaggedRange", []):
        args = [starts, limits, deltas]
        if dtype is None:
            for a in args:
                if isinstance(a, ops.Tensor):
                    dtype = a.dtype
                    break
        if dtype is None:
            kinds = {np.asarray(a).dtype.kind for a in args}
            dtype = dtypes.float32 if "f" in kinds else _I32
        starts, limits, deltas = (ops.convert_to_tensor(a, dtype=dtype) for a in args)
        splits, values = ops.apply_op(
            "RaggedRange", [starts, limits, deltas], {"Tsplits": dtypes.as_dtype(row_splits_dtype)}
        ).outputs
        return _from_splits(values, splits)


def row_splits_to_segment_ids(splits, name=None, out_type=None):
    """Each value's row (segment id) for `splits`.

    Raises:
      ValueError: splits not a vector.
    """
    with ops.name_scope(name, "RaggedSplitsToSegmentIds", []):
        splits = ops.convert_to_tensor(
            splits, dtype=_I64 if not isinstance(splits, ops.Tensor) else None, name="splits"
        )
        splits.shape.with_rank(1)
        ids = _rowids_of(splits)
        return ids if out_type is None else _cast(ids, dtypes.as_dtype(out_type))


def segment_ids_to_row_splits(segment_ids, num_segments=None, out_type=None, name=None):
    """Row splits of sorted segment ids (num_segments rows, default the last id + 1)."""
    out_type = _I64 if out_type is None else dtypes.as_dtype(out_type)
    with ops.name_scope(name, "SegmentIdsToRaggedSplits", []):
        ids = ops.convert_to_tensor(
            segment_ids,
            dtype=None if isinstance(segment_ids, ops.Tensor) else out_type,
            name="segment_ids",
        )
        ids.shape.with_rank(1)
        ids = _cast(ids, out_type)
        if num_segments is None:
            n = _op("Maximum", _op("Max", ids, _const(0, _I32)) + 1, _const(0, out_type))
            n = _op(
                "SelectV2",
                _op("Greater", _dim0(ids, out_type), _const(0, out_type)),
                n,
                _const(0, out_type),
            )
        else:
            n = _cast(ops.convert_to_tensor(num_segments, name="num_segments"), out_type)
        counts = _op("DenseBincount", ids, n, _const([], out_type), binary_output=False)
        return _lengths_to_splits(counts)


# -- boolean_mask -----------------------------------------------------------------------------


def boolean_mask(data, mask, name=None):
    """The items of `data` where `mask` is true, the mask covering data's outer
    dimensions: a 1-D mask keeps rows; a deeper one keeps items inside rows (the result
    ragged).

    Raises:
      ValueError: a scalar mask, or one of a higher rank than data.
    """
    with ops.name_scope(name, "RaggedMask", []):
        data = _convert(data, "data")
        mask = _convert(mask, "mask", dtypes.bool)
        mask_rank = mask.shape.ndims
        if mask_rank == 0:
            raise ValueError("mask cannot be scalar.")
        if mask_rank is None:
            raise ValueError("mask's rank must be known statically.")
        if data.shape.ndims is not None and mask_rank > data.shape.ndims:
            raise ValueError("mask.shape.ndims must be less than or equal to data.shape.ndims")
        return _mask(data, mask)


def _mask(data, mask):
    if mask.shape.ndims == 1 and not is_ragged(mask):
        keep = _op("Reshape", _op("Where", mask), _const([-1], _I32))
        if is_ragged(data):
            return _gather_rows(data, _cast(keep, data.row_splits.dtype))
        return _gather(data, keep)
    if not is_ragged(mask):
        mask = RaggedTensor.from_tensor(mask, ragged_rank=mask.shape.ndims - 1)
    if not is_ragged(data):
        data = RaggedTensor.from_tensor(data, ragged_rank=mask.ragged_rank)
    splits = _same_splits(data.row_splits, mask.row_splits)
    if is_ragged(mask.values):  # items kept whole at this level: the mask is deeper
        return _from_splits(_mask(data.values, mask.values), splits)
    inner = _mask(data.values, mask.values)
    kept = _op(
        "UnsortedSegmentSum",
        _cast(mask.values, splits.dtype),
        _rowids_of(splits),
        _dim0(splits, splits.dtype) - 1,
    )
    return _from_splits(inner, _lengths_to_splits(kept))


def _same_splits(a, b):
    """a, checked (when the step runs, even for constants, as TF's) equal to b: two
    ragged arguments' partitions."""
    if a is b:
        return a
    b = _cast(b, a.dtype)

    def data(x, y):
        return [
            ops.convert_to_tensor("Condition x == y did not hold element-wise:"),
            ops.convert_to_tensor(f"x ({x.name}) = "),
            x,
            ops.convert_to_tensor(f"y ({y.name}) = "),
            y,
        ]

    na, nb = _dim0(a), _dim0(b)
    check = ops.apply_op("Assert", [_op("Equal", na, nb), data(na, nb)])
    sa, sb = a.shape[0].value, b.shape[0].value
    if sa is None or sb is None or sa == sb:  # (else the count check fails first)
        with ops.control_dependencies([check]):
            same = _op("All", _op("Equal", a, b), _const([0], _I32))
        check = ops.apply_op("Assert", [same, data(a, b)], {"summarize": 3})
    with ops.control_dependencies([check]):
        return _op("Identity", a)


# -- map_flat_values, stack -------------------------------------------------------------------


def map_flat_values(op, *args, **kwargs):
    """op applied to the flat values of the RaggedTensors among args and kwargs (their
    partitions must agree), the result given their partitions; no ragged argument:
    op(*args, **kwargs).

    Raises:
      ValueError: ragged arguments of different ragged ranks.
    """
    found = []

    def swap(x):
        if is_ragged(x):
            found.append(x)
            return x.flat_values
        if isinstance(x, (list, tuple)):
            return type(x)(swap(e) for e in x)
        if isinstance(x, dict):
            return {k: swap(v) for k, v in x.items()}
        return x

    new_args = [swap(a) for a in args]
    new_kwargs = {k: swap(v) for k, v in kwargs.items()}
    if not found:
        return op(*args, **kwargs)
    first = found[0]
    ranks = {r.ragged_rank for r in found}
    if len(ranks) > 1:
        raise ValueError("Inputs must have identical ragged splits.")
    splits = list(first.nested_row_splits)
    for other in found[1:]:
        splits = [_same_splits(a, b) for a, b in zip(splits, other.nested_row_splits)]
    result = op(*new_args, **new_kwargs)
    return _rebuild(first, splits, result)


def _rebuild(like, splits, flat):
    """flat values inside the partitions `splits` (outermost first) of `like`."""
    lengths = []
    v = like
    while is_ragged(v):
        lengths.append(v.uniform_row_length)
        v = v.values
    out = flat
    for s, length in zip(reversed(splits), reversed(lengths)):
        out = _from_splits(out, s, length)
    return out


def stack(values, axis=0, name=None):
    """The values (RaggedTensors or Tensors of one rank) stacked along a new `axis`;
    always a RaggedTensor.

    Raises:
      ValueError: no values, or an axis out of range.
    """
    values = list(values)
    if not values:
        raise ValueError("rt_inputs may not be empty.")
    with ops.name_scope(name, "RaggedConcat", []):
        values = [_convert(v) for v in values]
        rank = max(v.shape.ndims for v in values)
        if not -(rank + 1) <= axis <= rank:
            raise ValueError(f"axis={axis} out of bounds: expected {-(rank + 1)}<=axis<{rank + 1}")
        axis %= rank + 1
        expanded = [_expand(v, axis, uniform=False) for v in values]
        if len(expanded) == 1:
            return expanded[0]
        return concat(expanded, axis)


def _expand(value, axis, uniform=True):
    """value with a new dimension of size 1 at `axis`, as a RaggedTensor (a new outer
    dimension keeps its static length where `uniform`, as TF's expand_dims does)."""
    if not is_ragged(value):
        value = RaggedTensor.from_tensor(value) if value.shape.ndims > 1 else value
    if not is_ragged(value):  # a vector: one row of it
        n = _dim0(value)
        return _from_splits(value, _op("Pack", [_const(0, _I64), n], axis=0))
    dtype = value.row_splits.dtype
    if axis == 0:
        n = value.row_splits.shape[0].value
        splits = _op("Pack", [_const(0, dtype), value.nrows()], axis=0)
        return _from_splits(value, splits, None if n is None or not uniform else n - 1)
    if axis == 1:
        n = value.nrows()
        return _from_splits(value, _range(_const(0, dtype), n + 1, _const(1, dtype)), 1)
    if is_ragged(value.values):
        return value.with_values(_expand(value.values, axis - 1, uniform))
    return value.with_values(_op("ExpandDims", value.values, _const(axis - 1, _I32)))


def expand_dims(input, axis, name=None):  # noqa: A002 - TF's name
    """tf.expand_dims of a RaggedTensor: a new dimension of size 1 at `axis`.

    Raises:
      ValueError: an axis out of range.
    """
    rank = input.shape.ndims
    if not -(rank + 1) <= axis <= rank:
        raise ValueError(f"axis={axis} out of bounds: expected {-(rank + 1)}<=axis<{rank + 1}")
    with ops.name_scope(name, "RaggedExpandDims", []):
        return _expand(input, axis % (rank + 1))


def squeeze(input, axis, name=None):  # noqa: A002 - TF's name
    """tf.squeeze of a RaggedTensor: each dimension in `axis` (required) dropped; a
    ragged one must have rows of length 1 (checked when the step runs).

    Raises:
      ValueError: no axis, or one out of range.
      InvalidArgumentError: (when the step runs) a squeezed row not of length 1.
    """
    if axis is None:
        raise ValueError("Ragged.squeeze must have an axis argument.")
    axes = [axis] if isinstance(axis, int) else list(axis)
    rank = input.shape.ndims
    axes = sorted({a % rank for a in axes}, reverse=True)
    with ops.name_scope(name, "RaggedSqueeze", []):
        result = input
        for a in axes:
            result = _squeeze_axis(result, a)
        return result


def _squeeze_axis(rt, axis):
    splits = list(rt.nested_row_splits)
    flat = rt.flat_values
    if axis > len(splits):  # a dense dimension of the flat values
        inner = _op("Squeeze", flat, squeeze_dims=[axis - len(splits)])
        return _rebuild(rt, splits, inner) if splits else inner
    if axis == 0:
        lengths, level = _op("Reshape", rt.nrows(), _const([1], _I32)), None
    else:
        lengths, level = _diff(splits[axis - 1]), axis - 1
    ones = _op("All", _op("Equal", lengths, _const(1, lengths.dtype)), _const([0], _I32))
    msg = ops.convert_to_tensor(f"the given axis (axis = {axis}) is not squeezable!")
    check = ops.apply_op("Assert", [ones, [msg]])
    kept = [s for i, s in enumerate(splits) if i != (0 if level is None else level)]
    with ops.control_dependencies([check]):
        if kept:
            kept[0] = _op("Identity", kept[0])
        else:
            flat = _op("Identity", flat)
    out = flat
    for s in reversed(kept):
        out = _from_splits(out, s)
    return out


def reverse(tensor, axis, name=None):
    """tf.reverse of a RaggedTensor: the rows in reverse (axis 0), each row's items in
    reverse (a ragged axis), or a dense inner axis of the flat values reversed."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    rank = tensor.shape.ndims
    with ops.name_scope(name, "RaggedReverse", []):
        result = tensor
        for a in sorted({a % rank for a in axes}):
            result = _reverse_axis(result, a)
        return result


def _reverse_axis(rt, axis):
    if not is_ragged(rt):
        return _op("ReverseV2", rt, _const([axis], _I32))
    dtype = rt.row_splits.dtype
    if axis == 0:
        n = rt.nrows()
        rows = _range(n - 1, _const(-1, dtype), _const(-1, dtype))
        return _gather_rows(rt, rows)
    if axis > 1:
        return rt.with_values(_reverse_axis(rt.values, axis - 1))
    splits = rt.row_splits
    one = _const(1, dtype)
    positions = ops.apply_op(
        "RaggedRange", [splits[1:] - one, splits[:-1] - one, _const(-1, dtype)], {"Tsplits": dtype}
    ).outputs[1]
    values = (
        _gather_rows(rt.values, positions)
        if is_ragged(rt.values)
        else _gather(rt.values, positions)
    )
    return _from_splits(values, splits, rt.uniform_row_length)


def tile(input, multiples, name=None):  # noqa: A002 - TF's name
    """tf.tile of a RaggedTensor: the rows repeated multiples[0] times, each row's items
    multiples[1] times (and so on inward; dense inner dimensions by Tile).

    Raises:
      ValueError: multiples not a list of the RaggedTensor's rank (known statically).
    """
    multiples = ops.constant_value(ops.convert_to_tensor(multiples))
    rank = input.shape.ndims
    if multiples is None or np.ndim(multiples) != 1 or len(multiples) != rank:
        raise ValueError(f"asyncflow's ragged tile needs {rank} constant multiples")
    with ops.name_scope(name, "RaggedTile", []):
        return _tile(input, [int(m) for m in multiples])


def _tile(rt, multiples):
    if not is_ragged(rt):
        return _op("Tile", rt, _const(multiples, _I32))
    inner = _tile(rt.values, [1, *multiples[2:]]) if len(multiples) > 1 else rt.values
    splits = rt.row_splits
    dtype = splits.dtype
    if len(multiples) > 1 and multiples[1] != 1:  # each row's items, repeated in turn
        lengths = _diff(splits)
        new_splits = _lengths_to_splits(lengths * _const(multiples[1], dtype))
        rows = _rowids_of(new_splits)
        within = _range(_const(0, dtype), new_splits[-1], _const(1, dtype)) - _gather(
            new_splits, rows
        )
        positions = _gather(splits, rows) + _op("FloorMod", within, _gather(lengths, rows))
        inner = _take_rows(inner, positions)
        splits = new_splits
    result = _from_splits(inner, splits)
    if multiples[0] != 1:  # the rows, repeated in turn
        n = rt.nrows()
        order = _op(
            "Tile", _range(_const(0, dtype), n, _const(1, dtype)), _const([multiples[0]], _I32)
        )
        result = _gather_rows(result, order)
    return result


def _take_rows(values, positions):
    if is_ragged(values):
        return _gather_rows(values, positions)
    return _gather(values, positions)


def stack_dynamic_partitions(data, partitions, num_partitions, name=None):
    """Row p of the result: the rows of data whose partition is p, in their order.

    Raises:
      InvalidArgumentError: (when the step runs) a partition < 0 or >= num_partitions.
    """
    with ops.name_scope(name, "SegmentStack", []):
        data = _convert(data, "data")
        partitions = ops.convert_to_tensor(partitions, name="partitions")
        partitions.shape.with_rank(1)
        dtype = data.row_splits.dtype if is_ragged(data) else _I64
        parts = _cast(partitions, dtype)
        n = _cast(ops.convert_to_tensor(num_partitions, name="num_partitions"), dtype)
        low = ops.apply_op(
            "Assert",
            [
                _op("All", _op("GreaterEqual", parts, _const(0, dtype)), _const([0], _I32)),
                [ops.convert_to_tensor("partitions must be non-negative")],
            ],
        )
        high = ops.apply_op(
            "Assert",
            [
                _op("All", _op("Less", parts, n), _const([0], _I32)),
                [
                    ops.convert_to_tensor("partitions must be less than num_partitions"),
                    ops.convert_to_tensor("Condition x < y did not hold element-wise:"),
                    parts,
                    n,
                ],
            ],
            {"summarize": 3},
        )
        with ops.control_dependencies([low, high]):
            parts = _op("Identity", parts)
        counts = _op("DenseBincount", parts, n, _const([], dtype), binary_output=False)
        # A stable order by partition: each row's key, partition * rows + position.
        rows = _dim0(parts, dtype)
        key = parts * rows + _range(_const(0, dtype), rows, _const(1, dtype))
        order = ops.apply_op("TopKV2", [-key, _cast(rows, _I32)]).outputs[1]
        picked = (
            _gather_rows(data, _cast(order, dtype)) if is_ragged(data) else _gather(data, order)
        )
        return _from_splits(picked, _lengths_to_splits(counts))


# -- cross ------------------------------------------------------------------------------------


def cross(inputs, name=None):
    """Each row's crosses of its features across the inputs (RaggedTensors,
    SparseTensors or dense matrices, all of as many rows), as "a_X_b" strings."""
    return _cross(inputs, hashed=False, num_buckets=0, hash_key=None, name=name)


def cross_hashed(inputs, num_buckets=0, hash_key=None, name=None):
    """As `cross`, each cross a fingerprint hash (mod num_buckets when > 0)."""
    return _cross(inputs, hashed=True, num_buckets=num_buckets, hash_key=hash_key, name=name)


def _feature(value, i):
    if value.dtype not in (_I64, dtypes.string):
        if value.dtype.is_integer:
            return _cast(value, _I64)
        raise ValueError(f"Unexpected dtype for inputs[{i}]: {value.dtype!r}")
    return value


def _cross(inputs, hashed, num_buckets, hash_key, name):
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("Inputs must be a list")
    with ops.name_scope(name, "RaggedCross", []):
        r_vals, r_splits, s_ind, s_vals, s_shape, dense, order = [], [], [], [], [], [], []
        for i, x in enumerate(inputs):
            if isinstance(x, SparseTensor):
                order.append("S")
                s_ind.append(x.indices)
                s_vals.append(_feature(x.values, i))
                s_shape.append(x.dense_shape)
                continue
            x = _convert(x)
            if x.shape.ndims is not None and x.shape.ndims != 2:
                raise ValueError("tf.ragged.cross only supports inputs with rank=2")
            if is_ragged(x):
                if x.ragged_rank != 1:
                    raise ValueError("tf.ragged.cross only supports inputs with rank=2")
                order.append("R")
                r_vals.append(_feature(x.values, i))
                r_splits.append(x.row_splits)
            else:
                order.append("D")
                dense.append(_feature(x, i))
        split_types = {s.dtype for s in r_splits}
        out_splits = _I32 if split_types == {_I32} else _I64
        r_splits = [_cast(s, out_splits) for s in r_splits]
        attrs = {
            "Nsparse": len(s_ind),
            "input_order": "".join(order),
            "hashed_output": hashed,
            "num_buckets": int(num_buckets),
            "hash_key": _DEFAULT_CROSS_HASH_KEY if hash_key is None else int(hash_key),
            "out_values_type": _I64 if hashed else dtypes.string,
            "out_row_splits_type": out_splits,
        }
        values, splits = ops.apply_op(
            "RaggedCross", [r_vals, r_splits, s_ind, s_vals, s_shape, dense], attrs
        ).outputs
        return _from_splits(values, splits)


# -- placeholder ------------------------------------------------------------------------------


def placeholder(dtype, ragged_rank, value_shape=None, name=None):
    """A RaggedTensor fed through placeholders: flat values of `value_shape` items
    ("flat_values") and ragged_rank int64 row splits ("row_splits_0", ...)."""
    if not isinstance(ragged_rank, int) or ragged_rank < 0:
        raise ValueError(f"ragged_rank must be a non-negative int; got {ragged_rank}")
    dtype = dtypes.as_dtype(dtype)
    with ops.name_scope(name, "RaggedPlaceholder", []):
        inner = [] if value_shape is None else list(value_shape)
        flat = ops.apply_op(
            "Placeholder", [], {"dtype": dtype, "shape": [None, *inner]}, name="flat_values"
        ).outputs[0]
        if ragged_rank == 0:
            return flat
        result = flat
        for i in builtins.range(ragged_rank - 1, -1, -1):
            splits = ops.apply_op(
                "Placeholder", [], {"dtype": _I64, "shape": [None]}, name=f"row_splits_{i}"
            ).outputs[0]
            result = _from_splits(result, splits)
        return result


# -- what dense ops do with RaggedTensors -----------------------------------------------------


def unary(fn, x, *args, **kwargs):
    """A dense element-wise builder `fn` given a RaggedTensor: fn of its flat values,
    in its partitions."""
    return x.with_flat_values(fn(x.flat_values, *args, **kwargs))


def binary(fn, x, y, *args, **kwargs):
    """A dense element-wise builder `fn` of two arguments, one or both ragged: fn of
    the flat values; a dense argument broadcasts against the inner dense dimensions, or
    (of the full rank, size 1 in the ragged dimensions) over the rows.

    Raises:
      ValueError: ragged arguments of different ragged ranks, a dense one that does
        not broadcast.
      InvalidArgumentError: (when the step runs) ragged arguments whose partitions
        differ.
    """
    x_r, y_r = is_ragged(x), is_ragged(y)
    like = x if x_r else y
    if not (x_r and y_r):
        other = y if x_r else x
        if not isinstance(other, ops.Tensor):
            other = ops.convert_to_tensor(other, dtype=like.dtype)
        x, y = (x, other) if x_r else (other, y)
    if _needs_full_broadcast(x, y):
        return _broadcast_binary(fn, x, y, *args, **kwargs)
    if x_r and y_r:
        if x.ragged_rank != y.ragged_rank:
            raise ValueError("asyncflow's ragged element-wise ops need equal ragged ranks")
        fx, fy = x.flat_values, y.flat_values
        splits = [_same_splits(a, b) for a, b in zip(x.nested_row_splits, y.nested_row_splits)]
        nx, ny = fx.shape[0].value, fy.shape[0].value
        if nx is not None and ny is not None and nx != ny:
            # As TF's, the partitions' check fails when the step runs: y's values pass
            # through an op whose static shape forgets their number, after the check.
            with ops.control_dependencies([splits[-1].op]):
                inner = fy.shape.as_list()[1:]
                fy = ops.apply_op(
                    "PlaceholderWithDefault", [fy], {"dtype": fy.dtype, "shape": [None, *inner]}
                ).outputs[0]
    else:
        splits = list(like.nested_row_splits)
        flat = _broadcast_dense(like, y if x_r else x)
        fx, fy = (like.flat_values, flat) if x_r else (flat, like.flat_values)
    return _rebuild(like, splits, fn(fx, fy, *args, **kwargs))


def _needs_full_broadcast(x, y) -> bool:
    """Whether x op y needs TF's full ragged broadcasting (asyncflow/ragged_broadcast.py)
    rather than the flat values' own: ragged operands of different ragged ranks, or a
    dense one that neither fits the flat values' inner dimensions nor has the ragged
    operand's rank with length 1 in its ragged dimensions."""
    if is_ragged(x) and is_ragged(y):
        return x.ragged_rank != y.ragged_rank
    rt, dense = (x, y) if is_ragged(x) else (y, x)
    rank, inner = dense.shape.ndims, rt.flat_values.shape.ndims - 1
    if rank is None or rank <= inner:
        return False
    dims = dense.shape.as_list()
    return rank != rt.shape.ndims or any(d != 1 for d in dims[1 : rt.ragged_rank + 1])


def _broadcast_binary(fn, x, y, *args, **kwargs):
    """fn(x, y) on the values both broadcast to, partitioned as their broadcast shape."""
    rank = max(x.shape.ndims, y.shape.ndims)

    def padded_partitions(v):
        return v.ragged_rank + rank - v.shape.ndims if is_ragged(v) else 0

    k = max(padded_partitions(x), padded_partitions(y))
    lx, ly = _rb.levels_of(x, rank, k), _rb.levels_of(y, rank, k)
    _, splits, (ix, iy), checks = _rb.broadcast_levels([lx, ly], k)
    out = fn(_rb.gathered(lx, ix, checks), _rb.gathered(ly, iy, checks), *args, **kwargs)
    return _rb.rebuild(out, splits)


def dispatch_unary(fn):
    """fn, taking a RaggedTensor as its first argument too (TF's ragged dispatch); the
    argument may also come by keyword (its own name, or TF 2's `input`)."""
    first = next(iter(inspect.signature(fn).parameters))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _dispatch._ACTIVE:  # (a user's tf.experimental.dispatch_for_* target)
            result = _dispatch.dispatch(wrapper, args, kwargs)
            if result is not NotImplemented:
                return result
        if args:
            if is_ragged(args[0]):
                return unary(fn, *args, **kwargs)
            return fn(*args, **kwargs)
        key = first if first in kwargs else "input"
        if is_ragged(kwargs.get(key)):
            x = kwargs.pop(key)
            return unary(fn, x, **kwargs)
        return fn(**kwargs)

    wrapper._tf_dispatch_api = wrapper
    return wrapper


def dispatch_binary(fn):
    """fn, taking RaggedTensors as either of its first two arguments too."""

    @functools.wraps(fn)
    def wrapper(x, y, *args, **kwargs):
        if _dispatch._ACTIVE:
            result = _dispatch.dispatch(wrapper, (x, y, *args), kwargs)
            if result is not NotImplemented:
                return result
        if is_ragged(x) or is_ragged(y):
            return binary(fn, x, y, *args, **kwargs)
        return fn(x, y, *args, **kwargs)

    wrapper._tf_dispatch_api = wrapper
    return wrapper


def _broadcast_dense(rt, dense):
    """dense, broadcast to rt's flat values: as is when it fits their inner dimensions,
    else (rank rt's, ragged dimensions of size 1) each row's entry repeated."""
    rank, inner = dense.shape.ndims, rt.flat_values.shape.ndims - 1
    if rank is None:
        raise ValueError("a dense operand of a ragged op needs its rank at build time")
    if rank <= inner:
        return dense
    if rank != rt.shape.ndims:
        raise ValueError(f"Shapes {dense.shape} and {rt.shape} are incompatible")
    # Drop the ragged dimensions (size 1), then repeat each row's entry for its values.
    squeezed = _op("Squeeze", dense, squeeze_dims=list(builtins.range(1, rt.ragged_rank + 1)))
    ids = None
    for s in rt.nested_row_splits:
        rows = _rowids_of(s)
        ids = rows if ids is None else _gather(ids, rows)
    return _gather(squeezed, ids)


def where(condition, x=None, y=None, name=None, v2=False):
    """tf.where with ragged arguments, as TF's: the condition alone gives the
    coordinates of its true values (int64 [num_true, rank]: a value's row, then its
    place in the row).  With x and y, TF1's where (v2=False) selects element-wise when
    all three are ragged (the same partitions), or whole rows of x and y by a dense
    vector condition; where_v2 (v2=True) broadcasts the three together (TF's ragged
    broadcasting) and selects element-wise.

    Raises:
      ValueError: only one of x and y; (TF1's) a ragged condition with a dense x or y
        ("Input shapes do not match."), a dense condition not a vector, ragged
        arguments of different ragged ranks or (known when building) numbers of
        values; (where_v2) shapes that cannot broadcast, known when building.
      InvalidArgumentError: (when the step runs) partitions or lengths that differ.
    """
    if (x is None) != (y is None):
        raise ValueError("x and y must be either both None or both non-None")
    if x is None:
        with ops.name_scope(name, "RaggedWhere", []):
            return _coordinate_where(_convert(condition, "condition"))
    with ops.name_scope(name, "RaggedWhere", []):
        condition = _convert(condition, "condition")
        x, y = _convert(x, "x"), _convert(y, "y")
        if v2:
            return _where_v2(condition, x, y)
        rag = [is_ragged(v) for v in (condition, x, y)]
        if all(rag):
            nvals = {r.flat_values.shape[0].value for r in (condition, x, y)} - {None}
            if len(nvals) > 1:
                raise ValueError(
                    "Input RaggedTensors' flat_values must all have the same "
                    f"outer-dimension size.  Got sizes: {nvals}"
                )
            return map_flat_values(lambda c, a, b: _op("Select", c, a, b), condition, x, y)
        if rag[0]:
            raise ValueError("Input shapes do not match.")
        # A dense condition picks whole rows: a vector as long as x and y.
        condition.shape.assert_has_rank(1)
        both = concat([x, y], 0)
        dtype = both.row_splits.dtype
        nx, ny = _nrows_of(x, dtype), _nrows_of(y, dtype)
        one = _const(1, dtype)
        rows = _op("Select", condition, _range(_const(0, dtype), nx, one),
                   nx + _range(_const(0, dtype), ny, one))  # fmt: skip
        return gather(both, rows)


def _nrows_of(v, dtype):
    if is_ragged(v):
        return v.nrows(out_type=dtype)
    return _op("Shape", v, out_type=dtype)[0]


def _where_v2(condition, x, y):
    """SelectV2 of condition, x and y broadcast together (one at least ragged)."""
    parts = [condition, x, y]
    ranks = [p.shape.ndims for p in parts]
    if any(r is None for r in ranks):
        raise ValueError("Broadcasting a ragged shape needs its operands' ranks when building")
    rank = max(ranks)

    def padded_partitions(v):
        return v.ragged_rank + rank - v.shape.ndims if is_ragged(v) else 0

    k = max(padded_partitions(p) for p in parts)
    # As TF's map_flat_values after its broadcast: ragged operands of the result's
    # shape whose numbers of values, known when building, differ.
    full = [p for p in parts if is_ragged(p) and p.shape.ndims == rank and p.ragged_rank == k]
    nvals = {p.flat_values.shape[0].value for p in full} - {None}
    if len(nvals) > 1:
        raise ValueError(
            "Input RaggedTensors' flat_values must all have the same outer-dimension "
            f"size.  Got sizes: {nvals}"
        )
    levels = [_rb.levels_of(p, rank, k) for p in parts]
    # TF's where_v2 broadcasts with its older ragged shapes: a uniform dimension meets
    # a ragged one only where its length is 1 (checked when the step runs).
    ragged_dims = [
        set(builtins.range(rank - p.shape.ndims + 1, rank - p.shape.ndims + p.ragged_rank + 1))
        if is_ragged(p) else set()
        for p in parts
    ]  # fmt: skip
    uniform_checks = []
    for lv, own in zip(levels, ragged_dims, strict=True):
        for d in set().union(*ragged_dims) - own:
            _rb._assert(
                _op("Equal", _diff(lv[1][d - 1]), _const(1, _I64)),
                "Unable to broadcast a uniform dimension to a ragged one",
                uniform_checks,
            )
    levels = [(n, sp, _rb._guarded(v, uniform_checks)) for n, sp, v in levels]
    _, splits, index, checks = _rb.broadcast_levels(levels, k)
    values = [_rb.gathered(lv, i, checks) for lv, i in zip(levels, index, strict=True)]
    return _rb.rebuild(_op("SelectV2", *values), splits)


def _coordinate_where(condition):
    if not is_ragged(condition):
        return _op("Where", ops.convert_to_tensor(condition))
    inner = _coordinate_where(condition.values)
    first = inner[:, 0]
    rows = _gather(_rowids_of(_cast(condition.row_splits, _I64)), first)
    cols = first - _gather(_cast(condition.row_splits, _I64), rows)
    expand = lambda t: _op("ExpandDims", t, _const(1, _I32))  # noqa: E731
    return _concat([expand(rows), expand(cols), inner[:, 1:]], 1)


def gather(params, indices, name=None, axis=0, batch_dims=0):
    """tf.gather with ragged params (rows at `indices`, of any rank: RaggedGather) or
    ragged indices (params' rows at each index, in indices' partitions); along an inner
    axis, each row's items at `indices` (as TF's, an index is checked against the
    values, not against its row); batch_dims equal to axis: row b's items at
    indices[b].

    Raises:
      ValueError: axis < batch_dims, an axis out of range, or what asyncflow does not
        gather (batch_dims other than 0 and below a greater axis).
    """
    axis = 0 if axis is None else axis
    if not is_ragged(params):
        params = ops.convert_to_tensor(params, name="params")
    rank = params.shape.ndims
    if rank is not None:
        if not -rank <= axis < rank:
            raise ValueError(f"axis={axis} out of bounds: expected {-rank}<=axis<{rank}")
        axis %= rank
    if not is_ragged(indices):
        indices = ops.convert_to_tensor(indices, name="indices")
    if batch_dims < 0:
        batch_dims += indices.shape.ndims
    if axis < batch_dims:
        raise ValueError("axis must be greater than or equal to batch_dims")
    with ops.name_scope(name, "RaggedGather", []):
        if batch_dims:
            if batch_dims != axis:
                raise ValueError(
                    "asyncflow's ragged tf.gather takes batch_dims 0 or equal to axis; got "
                    f"axis={axis}, batch_dims={batch_dims}"
                )
            return _batch_gather(params, indices, batch_dims)
        if axis:
            return _axis_gather(params, indices, axis)
        if is_ragged(indices):
            if is_ragged(params):
                inner = _gather_rows(params, _cast(indices.flat_values, params.row_splits.dtype))
            else:
                inner = _gather(ops.convert_to_tensor(params), indices.flat_values)
            return _rebuild(indices, list(indices.nested_row_splits), inner)
        indices = ops.convert_to_tensor(indices, name="indices")
        return _gather_any(params, indices)


def _gather_any(values, positions):
    """values' rows at positions of any rank (RaggedGather for ragged values)."""
    if not is_ragged(values):
        return _gather(values, positions)
    splits = list(values.nested_row_splits)
    rank = positions.shape.ndims
    if rank is None:
        raise ValueError("indices' rank must be known statically")
    out = ops.apply_op(
        "RaggedGather",
        [splits, values.flat_values, positions],
        {"OUTPUT_RAGGED_RANK": rank + len(splits) - 1},
    ).outputs
    result = out[-1]
    for s in reversed(out[:-1]):
        result = _from_splits(result, s)
    return result


def _as_rows(params, dtype):
    """params as a RaggedTensor of one partition (a dense one's rows of uniform length)."""
    if is_ragged(params):
        return params
    params = ops.convert_to_tensor(params, name="params")
    return RaggedTensor.from_tensor(params, ragged_rank=1, row_splits_dtype=dtype)


def _axis_gather(params, indices, axis):
    """Row b's items at indices (any rank) for axis 1: the values at row_starts[b] +
    indices, of shape [nrows] + indices' shape; deeper axes gather inside the values."""
    if is_ragged(indices):
        return _axis_gather_ragged(params, indices, axis)
    if indices.shape.ndims is None:
        raise ValueError("indices.shape.rank must be statically known.")
    params = _as_rows(params, _I64)
    if axis > 1:
        return params.with_values(_gather_inner(params.values, indices, axis - 1))
    starts = _cast(params.row_splits[:-1], indices.dtype)
    starts = _op("Reshape", starts, _const([-1] + [1] * indices.shape.ndims, _I32))
    return _gather_any(params.values, starts + indices)


def _axis_gather_ragged(params, indices, axis):
    """Ragged indices along axis 1: every row b of params gathers a copy of indices
    (the result [nrows, (indices' partitions)...])."""
    dtype = indices.row_splits.dtype
    params = _as_rows(params, dtype)
    if axis > 1:
        return params.with_values(_gather_inner(params.values, indices, axis - 1))
    n = _cast(indices.nrows(), dtype)
    b = _cast(params.nrows(), dtype)
    order = _op("Tile", _range(_const(0, dtype), n, _const(1, dtype)), _op("Pack", [b], axis=0))
    tiled = _gather_rows(indices, order)
    outer = None  # each flat index's row of the tiled indices
    for s in tiled.nested_row_splits:
        rows = _rowids_of(s)
        outer = rows if outer is None else _gather(outer, rows)
    flat = tiled.flat_values
    starts = _gather(_cast(params.row_splits, flat.dtype), _cast(outer // n, flat.dtype))
    inner = _rebuild(
        tiled, list(tiled.nested_row_splits), _gather_any(params.values, flat + starts)
    )
    return _from_splits(inner, _range(_const(0, dtype), b * n + 1, n), n)


def _gather_inner(values, indices, axis):
    if is_ragged(values) or is_ragged(indices):
        return _axis_gather(values, indices, axis)
    return _op("GatherV2", values, indices, _const(axis, _I32))


def _batch_gather(params, indices, batch_dims):
    """Row b's items at indices[b] (batch_dims = axis; deeper batch dimensions one
    partition at a time, each checked to match)."""
    if is_ragged(params) and is_ragged(indices) or batch_dims > 1:
        params = _as_rows(params, _I64)
        if not is_ragged(indices):
            indices = _as_rows(indices, params.row_splits.dtype)
        if batch_dims > 1:
            splits = _same_splits(params.row_splits, indices.row_splits)
            inner = _batch_gather(params.values, indices.values, batch_dims - 1)
            return _from_splits(inner, splits)
    if not is_ragged(indices):
        indices = ops.convert_to_tensor(indices, name="indices")
        if indices.shape.ndims is None:
            raise ValueError("indices.shape.rank must be statically known.")
        params = _as_rows(params, _I64)
        rows = params.row_splits.shape[0].value
        if rows is not None and indices.shape[0].value not in (None, rows - 1):
            raise ValueError(
                f"batch shape from indices {tuple(indices.shape.as_list()[:1])} does not "
                f"match params shape {params.shape}"
            )
        starts = _cast(params.row_splits[:-1], indices.dtype)
        starts = _op("Reshape", starts, _const([-1] + [1] * (indices.shape.ndims - 1), _I32))
        return _gather_any(params.values, starts + indices)
    params = _as_rows(params, indices.row_splits.dtype)
    rows = _rowids_of(indices.row_splits)
    starts = _gather(_cast(params.row_splits, indices.flat_values.dtype), rows)
    if is_ragged(indices.values):
        raise ValueError("asyncflow's ragged batch gather takes indices of one partition")
    flat = _take_rows(params.values, starts + indices.values)
    return _from_splits(flat, indices.row_splits)


def gather_nd(params, indices, name=None):
    """tf.gather_nd of a RaggedTensor: each index vector's leading components pick a row,
    then an item in it, and so on (a ragged result while ragged dimensions are left).

    Raises:
      ValueError: indices' rank or last dimension unknown statically.
      InvalidArgumentError: (when the step runs) a row, or the position an item index
        makes in the values, out of range.
    """
    with ops.name_scope(name, "RaggedGatherNd", []):
        indices = ops.convert_to_tensor(indices, name="indices")
        rank, k = indices.shape.ndims, None
        if rank:
            k = indices.shape[-1].value
        if rank is None or k is None:
            raise ValueError("asyncflow's ragged gather_nd needs indices of a known shape")
        if rank == 1:  # one index vector: as TF's, a ragged result keeps its one row
            out = gather_nd(params, _op("ExpandDims", indices, _const(0, _I32)))
            return out if is_ragged(out) else out[0]
        dtype = params.row_splits.dtype
        flat_idx = _cast(_op("Reshape", indices, _const([-1, k], _I32)), dtype)
        cur, pos, m = params, flat_idx[:, 0], 1
        while m < k and is_ragged(cur):
            # (as TF's, an item index is not checked against its row: only the
            # gather of the values checks the position it makes)
            pos = _gather(cur.row_splits, pos) + flat_idx[:, m]
            cur, m = cur.values, m + 1
        if m < k:  # the rest index the flat values' dense dimensions
            coords = _concat([_op("ExpandDims", pos, _const(1, _I32)), flat_idx[:, m:]], 1)
            out = _op("GatherNd", cur, coords)
        else:
            out = _take_rows(cur, pos)
        lead = indices.shape[:-1].as_list()
        if not is_ragged(out):
            shape = _concat([_const(lead, _I32), _shape_i32(out)[1:]])
            return _op("Reshape", out, shape)
        for d in reversed(lead[1:]):  # indices' own dimensions: uniform partitions
            n = _dim0_of(out)
            out = _from_splits(out, _range(_const(0, dtype), n + 1, _const(d, dtype)), d)
        return out


def _shape_i32(t):
    return _op("Shape", t, out_type=_I32)


def _dim0_of(value):
    return value.nrows() if is_ragged(value) else _dim0(value)


_SEGMENT = {
    "Sum": "UnsortedSegmentSum",
    "Prod": "UnsortedSegmentProd",
    "Max": "UnsortedSegmentMax",
    "Min": "UnsortedSegmentMin",
    "Join": "UnsortedSegmentJoin",
}


def reduce(kind, x, axis=None, keepdims=False, name=None):
    """tf.reduce_<kind> (Sum, Prod, Max, Min, Mean, Any, All) of a RaggedTensor: over
    the rows (axis 0: item j of every row that has one), over a ragged axis (each row
    on its own), or over inner dense axes; several axes one after another.

    Raises:
      ValueError: an axis out of range.
    """
    with ops.name_scope(name, f"RaggedReduce{kind}", []):
        if kind == "Mean":  # as TF's: the sum over the count, divided as Python's `/`
            total = reduce("Sum", x, axis, keepdims)
            ones = x.with_flat_values(_op("OnesLike", x.flat_values))
            count = reduce("Sum", ones, axis, keepdims)
            if is_ragged(total):
                return total.with_flat_values(_truediv(total.flat_values, count.flat_values))
            return _truediv(total, count)
        if axis is None:
            flat = x.flat_values
            all_axes = _range(_const(0, _I32), _op("Rank", flat), _const(1, _I32), _I32)
            out = _op(kind, flat, all_axes, keep_dims=keepdims)
            if keepdims:  # (as TF's: one more dimension for each of x's but the first)
                for _ in builtins.range(x.shape.ndims - 1):
                    out = _op("ExpandDims", out, _const(-1, _I32))
            return out
        rank = x.shape.ndims
        axes = sorted(
            {a % rank for a in (axis if isinstance(axis, (list, tuple)) else [axis])}, reverse=True
        )
        result = x
        for a in axes:
            result = _reduce_axis(kind, result, a)
            if keepdims:
                result = (
                    _expand(result, a)
                    if is_ragged(result)
                    else _op("ExpandDims", result, _const(a, _I32))
                )
        return result


def _truediv(a, b):
    """a / b as Python's `/` on tensors: integers divided as floats (float32 for 8- and
    16-bit integers, float64 for wider ones)."""
    if a.dtype.is_integer:
        wide = a.dtype.size > 2
        a, b = (_cast(t, dtypes.float64 if wide else dtypes.float32) for t in (a, b))
    return _op("RealDiv", a, b)


def _reduce_axis(kind, x, axis):
    if not is_ragged(x):
        return _op(kind, x, _const(axis, _I32))
    if axis > 1:
        return x.with_values(_reduce_axis(kind, x.values, axis - 1))
    if kind in ("Any", "All"):
        as_int = x.with_flat_values(_cast(x.flat_values, _I32))
        out = _reduce_axis("Max" if kind == "Any" else "Min", as_int, axis)
        if kind == "All":  # (an empty row: all of nothing is true)
            out = (
                map_flat_values(lambda v: _op("Minimum", v, _const(1, _I32)), out)
                if is_ragged(out)
                else _op("Minimum", out, _const(1, _I32))
            )
        else:
            out = (
                map_flat_values(lambda v: _op("Maximum", v, _const(0, _I32)), out)
                if is_ragged(out)
                else _op("Maximum", out, _const(0, _I32))
            )
        return (
            map_flat_values(lambda v: _cast(v, dtypes.bool), out)
            if is_ragged(out)
            else _cast(out, dtypes.bool)
        )
    dtype = x.row_splits.dtype
    if axis == 0:  # item j of every row together
        ids = _op("ZerosLike", _range(_const(0, dtype), x.nrows(), _const(1, dtype)))
        grouped = _segment(kind, x, ids, _const(1, dtype))
        return grouped.values
    return _segment(kind, x.values, _rowids_of(x.row_splits), x.nrows())


def unsorted_segment(kind, data, segment_ids, num_segments, name=None):
    """tf.math.unsorted_segment_<kind> (Sum, Prod, Max, Min, Mean) of a RaggedTensor's
    rows: segment j's row is its rows combined item by item (as long as the longest).
    """
    with ops.name_scope(name, f"RaggedUnsortedSegment{kind}", []):
        dtype = data.row_splits.dtype
        ids = _cast(ops.convert_to_tensor(segment_ids, name="segment_ids"), dtype)
        n = _cast(ops.convert_to_tensor(num_segments, name="num_segments"), dtype)
        if kind != "Mean":
            return _segment(kind, data, ids, n)
        total = _segment("Sum", data, ids, n)
        ones = data.with_flat_values(_op("OnesLike", data.flat_values))
        count = _segment("Sum", ones, ids, n)
        return map_flat_values(lambda a, b: _op("RealDiv", a, b), total, count)


def reduce_join(inputs, axis, keepdims, separator, name=None):
    """tf.strings.reduce_join of a RaggedTensor, as TF's: no axis joins the flat values
    (kept dimensions: ones, to the input's rank); axis 0 joins item j of every row
    (UnsortedSegmentJoin by place in row), axis 1 each row's items, deeper axes inside
    the values; several axes one after another, the last first.

    Raises:
      ValueError: an axis out of range, or the rank unknown.
    """
    rank = inputs.shape.ndims
    if rank is None:
        raise ValueError("asyncflow's ragged reduce_join needs the rank at build time")
    with ops.name_scope(name, "RaggedReduceJoin", []):
        if axis is None:
            flat = inputs.flat_values
            all_axes = _range(_const(0, _I32), _op("Rank", flat), _const(1, _I32), _I32)
            out = _op("ReduceJoin", flat, all_axes, keep_dims=keepdims, separator=separator)
            if keepdims:
                for _ in builtins.range(rank - flat.shape.ndims):
                    out = _op("ExpandDims", out, _const(-1, _I32))
            return out
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"axis={a} out of bounds: expected {-rank}<=axis<{rank}")
        result = inputs
        for a in sorted({a % rank for a in axes}, reverse=True):
            result = _join_axis(result, a, keepdims, separator)
        return result


def _join_axis(x, axis, keepdims, separator):
    if not is_ragged(x):
        return _op("ReduceJoin", x, _const(axis, _I32), keep_dims=keepdims, separator=separator)
    if axis > 1:
        return x.with_values(_join_axis(x.values, axis - 1, keepdims, separator))
    dtype = x.row_splits.dtype
    if axis == 0:  # item j of every row together
        ids = _op("ZerosLike", _range(_const(0, dtype), x.nrows(), _const(1, dtype)))
        out = _segment("Join", x, ids, _const(1, dtype), separator=separator).values
    else:
        out = _segment("Join", x.values, _rowids_of(x.row_splits), x.nrows(), separator=separator)
    if keepdims:
        out = _expand(out, axis) if is_ragged(out) else _op("ExpandDims", out, _const(axis, _I32))
    return out


def _segment(kind, v, ids, n, **attrs):
    """Rows of v reduced by segment (ids sorted or not, n segments): a ragged v's rows
    reduce item by item, a segment as long as its longest row."""
    if not is_ragged(v):
        return _op(_SEGMENT[kind], v, ids, n, **attrs)
    dtype = v.row_splits.dtype
    lengths = _diff(v.row_splits)
    longest = _op("Maximum", _op("UnsortedSegmentMax", lengths, ids, n), _const(0, dtype))
    out_splits = _lengths_to_splits(longest)
    rows = _rowids_of(v.row_splits)
    positions = _range(_const(0, dtype), v.row_splits[-1], _const(1, dtype))
    cols = positions - _gather(v.row_splits, rows)
    new_ids = _gather(out_splits, _gather(ids, rows)) + cols
    return _from_splits(_segment(kind, v.values, new_ids, out_splits[-1], **attrs), out_splits)


# -- split, dynamic_partition -------------------------------------------------------------


def split(value, num_or_size_splits, axis=0, num=None, name=None):
    """tf.split of a RaggedTensor: along axis 0 into row ranges (`num_or_size_splits`
    equal parts, or parts of the given sizes), or along an inner dense axis of the
    flat values; a ragged axis cannot be split.

    Raises:
      ValueError: a ragged axis, an axis out of range, or `num` not inferable.
      InvalidArgumentError: a negative size (at build time); rows not divisible into
        equal parts or sizes not summing to the rows (when the step runs).
    """
    rank = value.shape.ndims
    if not -rank <= axis < rank:
        raise ValueError(f"axis={axis} out of bounds: expected {-rank}<=axis<{rank}")
    axis %= rank
    if 0 < axis <= value.ragged_rank:
        raise ValueError(
            f"Cannot split a ragged dimension. Got `value` with shape {value.shape} and "
            f"`axis` {axis}."
        )
    with ops.name_scope(name, "RaggedSplit", []):
        splits = list(value.nested_row_splits)
        if axis:
            flat = value.flat_values
            flat_axis = _const(axis - value.ragged_rank, _I32)
            if isinstance(num_or_size_splits, (int, np.integer)):
                parts = ops.apply_op(
                    "Split", [flat_axis, flat], {"num_split": int(num_or_size_splits)}
                ).outputs
            else:
                sizes = ops.convert_to_tensor(num_or_size_splits)
                count = num if num is not None else sizes.shape[0].value
                if count is None:
                    raise ValueError(f"Cannot infer argument `num` from shape {sizes.shape}")
                parts = ops.apply_op(
                    "SplitV", [flat, sizes, flat_axis], {"num_split": int(count)}
                ).outputs
            return [_rebuild(value, splits, p) for p in parts]
        dtype = value.row_splits.dtype
        nrows = value.nrows()
        if isinstance(num_or_size_splits, (int, np.integer)):
            n = int(num_or_size_splits)
            if n <= 0:
                raise ValueError(
                    f"`num_or_size_splits` must be >=1 if it is an `int`.Received {n}."
                )
            size = nrows // _const(n, dtype)
            check = _assert(
                _op("Equal", size * _const(n, dtype), nrows),
                f"Cannot split {n} ways: the rows are not divisible by {n}",
            )
            with ops.control_dependencies([check]):
                size = _op("Identity", size)
            bounds = [size * _const(i, dtype) for i in builtins.range(n + 1)]
        else:
            given = num_or_size_splits
            if isinstance(given, ops.Tensor):
                given = ops.constant_value(given)
                if given is None:
                    raise ValueError("asyncflow's ragged split needs sizes known at build time")
            sizes = [int(x) for x in np.asarray(given).ravel()]
            if any(x < 0 for x in sizes):
                raise errors.InvalidArgumentError(
                    None, None, "`num_or_size_splits` must be non-negative."
                )
            if num is not None and num != len(sizes):
                raise ValueError(f"num={num} does not match {len(sizes)} sizes")
            total = _const(sum(sizes), dtype)
            check = _assert(_op("Equal", total, nrows), "Sizes of the splits must sum to the rows")
            with ops.control_dependencies([check]):
                start = _op("Identity", _const(0, dtype))
            bounds = [start + _const(int(b), dtype) for b in np.cumsum([0] + sizes)]
        return [
            _gather_rows(value, _range(lo, hi, _const(1, dtype)))
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]


def _assert(condition, message):
    return ops.apply_op("Assert", [condition, [_const(message, dtypes.string)]], {"summarize": 3})


def dynamic_partition(data, partitions, num_partitions, name=None):
    """tf.dynamic_partition of a RaggedTensor's rows by a vector of partitions: part p
    holds the rows whose partition is p, in their order.

    Raises:
      ValueError: partitions not a vector.
      InvalidArgumentError: (when the step runs) a partition out of range.
    """
    with ops.name_scope(name, "RaggedDynamicPartition", []):
        partitions = ops.convert_to_tensor(partitions, name="partitions")
        if partitions.shape.ndims != 1:
            raise ValueError("asyncflow's ragged dynamic_partition takes a vector of partitions")
        dtype = data.row_splits.dtype
        rows = _range(_const(0, dtype), data.nrows(), _const(1, dtype))
        parts = ops.apply_op(
            "DynamicPartition", [rows, partitions], {"num_partitions": int(num_partitions)}
        ).outputs
        return [_gather_rows(data, p) for p in parts]


# -- reshape, matmul, cumsum, to_string -----------------------------------------------------


def reshape(tensor, shape, name=None):
    """tf.reshape of a RaggedTensor, or of anything to a DynamicRaggedShape: the values
    in row-major order (a ragged tensor's flat values) reshaped to the dense `shape`, or
    to the DynamicRaggedShape's inner shape and partitioned by its row partitions (a
    RaggedTensor; a Tensor where it has none), as TF's.

    Raises:
      ValueError: element counts known when building that differ.
      InvalidArgumentError: (when the step runs) element counts that differ.
    """
    from asyncflow.dynamic_ragged_shape import DynamicRaggedShape

    with ops.name_scope(name, "RaggedReshape", []):
        flat = tensor.flat_values if is_ragged(tensor) else ops.convert_to_tensor(tensor)
        if not isinstance(shape, DynamicRaggedShape):
            return _op("Reshape", flat, ops.convert_to_tensor(shape, name="shape"))
        out = _op("Reshape", flat, shape.inner_shape)
        for p in reversed(shape.row_partitions):
            length = p.uniform_row_length() if p.is_uniform() else None
            out = _from_splits(out, p.row_splits(), length)
        return out


def matmul(
    a,
    b,
    transpose_a=False,
    transpose_b=False,
    adjoint_a=False,
    adjoint_b=False,
    name=None,
    dense_matmul=None,
):
    """tf.matmul with a ragged argument, as TF's: rank 2 as dense matrices; rank 3 with
    `a` ragged in its rows ([B, (I), J]) each row times its batch's b (b repeated per
    row: TF's batch-dimension folding, a ragged result in a's partition); a dense `a`
    times a ragged `b` per batch, a ragged result of uniform rows.

    Raises:
      ValueError: different dtypes or ranks, a rank below 2, or what asyncflow does not
        multiply (a rank above 3, a transposed ragged `a`).
      InvalidArgumentError: (when the step runs) a ragged inner dimension whose rows
        differ in length, as TF's per-batch product fails.
    """
    with ops.name_scope(name, "RaggedMatMul", []):
        a, b = _convert(a, "a"), _convert(b, "b")
        if a.dtype != b.dtype:
            raise ValueError("`a` and `b` must have the same dtype.")
        rank = a.shape.ndims
        if rank != b.shape.ndims:
            raise ValueError("`a` and `b` must have the same rank.")
        if rank < 2:
            raise ValueError("`matmul` requires inputs with rank >= 2.")
        flags = dict(
            transpose_a=transpose_a,
            transpose_b=transpose_b,
            adjoint_a=adjoint_a,
            adjoint_b=adjoint_b,
        )
        if rank == 2:  # (TF pads ragged rows here)
            pad = lambda x: x.to_tensor() if is_ragged(x) else x  # noqa: E731
            return dense_matmul(pad(a), pad(b), **flags)
        dense = lambda x: _uniform_to_tensor(x) if is_ragged(x) else x  # noqa: E731
        if rank > 3:
            raise ValueError("asyncflow's ragged matmul takes ranks 2 and 3")
        if not is_ragged(a):
            out = dense_matmul(a, dense(b), **flags)
            return RaggedTensor.from_tensor(out, row_splits_dtype=b.row_splits.dtype)
        if a.ragged_rank == 2:  # rows of one length inside (else TF's per-batch error)
            a = a.with_values(_uniform_to_tensor(a.values))
        if a.ragged_rank != 1 or transpose_a or adjoint_a:
            raise ValueError(
                "asyncflow's ragged matmul takes a ragged `a` of one ragged (row) "
                "dimension, not transposed"
            )
        repeated = _gather(dense(b), _rowids_of(a.row_splits))
        flat = dense_matmul(_op("ExpandDims", a.values, _const(1, _I32)), repeated, **flags)
        return a.with_values(_op("Squeeze", flat, squeeze_dims=[1]))


def _uniform_to_tensor(rt):
    """rt as a dense tensor, checked (when the step runs) to have rows of one length
    in each ragged dimension, as a matrix product needs."""
    checks = []
    v = rt
    while is_ragged(v):
        lengths = _diff(v.row_splits)
        longest = _op("Max", lengths, _const([0], _I32))
        same = _op("All", _op("Equal", lengths, longest), _const([0], _I32))
        checks.append(_assert(same, "Ragged matmul needs rows of one length in each batch"))
        v = v.values
    with ops.control_dependencies(checks):
        return _op("Identity", rt.to_tensor())


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None, dense_cumsum=None):
    """tf.cumsum of a RaggedTensor, as TF's: along its last ragged axis each row's own
    sums (the flat values' sums less the sum before the row, TF's arithmetic); along
    an inner dense axis, of the flat values; along an outer axis, of the zero-padded
    dense form, read back in the rows' lengths.

    Raises:
      ValueError: an axis out of range.
    """
    rank = x.shape.ndims
    if not isinstance(axis, (int, np.integer)):
        axis = ops.constant_value(ops.convert_to_tensor(axis))
        if axis is None:
            raise ValueError("asyncflow's ragged cumsum needs a constant axis")
        axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"axis={axis} out of bounds: expected {-rank}<=axis<{rank}")
    axis %= rank
    with ops.name_scope(name, "RaggedCumSum", []):
        if axis > x.ragged_rank:
            return map_flat_values(
                lambda v: dense_cumsum(v, axis - x.ragged_rank, exclusive, reverse), x
            )
        if axis == x.ragged_rank:
            splits = x.nested_row_splits[-1]
            return x.with_flat_values(
                _cumsum_in_rows(splits, x.flat_values, exclusive, reverse, dense_cumsum)
            )
        summed = dense_cumsum(x.to_tensor(), axis, exclusive, reverse)
        # (read back in row-major order: where x has a value, its flat order)
        present = x.with_flat_values(_op("OnesLike", _cast(x.flat_values, dtypes.bool)))
        where = _op("Where", present.to_tensor(default_value=False))
        flat = _op("Reshape", _op("GatherNd", summed, where), _op("Shape", x.flat_values))
        return x.with_flat_values(flat)


def _cumsum_in_rows(splits, values, exclusive, reverse, dense_cumsum):
    if not exclusive:
        return _cumsum_in_rows(splits, values, True, reverse, dense_cumsum) + values
    rows = _rowids_of(splits)
    if reverse:
        last = _gather(splits, rows + _const(1, splits.dtype)) - _const(1, splits.dtype)
        sums = dense_cumsum(values, 0, True, True)
        return sums - _gather(sums, last)
    first = _gather(splits, rows)
    sums = dense_cumsum(values, 0, True, False)
    return sums - _gather(sums, first)


def to_string(rt, summarize=None):
    """TF's text of a RaggedTensor ("[[1, 2], [3]]"; strings quoted, ' and \\ escaped):
    each row's items joined by ", " in brackets, level by level; with `summarize` (not
    -1 or None) a row of more than 2 * summarize items shows its first and last
    `summarize` around "...".

    Raises:
      ValueError: summarize neither -1 nor a positive int.
    """
    if (
        summarize is not None
        and summarize != -1
        and not (isinstance(summarize, int) and summarize > 0)
    ):
        raise ValueError(f"Expected summarize to be -1 or a positive int, got {summarize!r}")
    keep = None if summarize in (None, -1) else summarize
    with ops.name_scope(None, "RaggedTensorToString", []):
        values = rt.flat_values
        if values.dtype == dtypes.string:
            escaped = _op(
                "RegexReplace",
                values,
                _const("(['\\\\])", dtypes.string),
                _const("\\\\\\1", dtypes.string),
                replace_global=True,
            )
            quote = _const("'", dtypes.string)
            text = _op("StringJoin", [quote, escaped, quote], separator="")
        else:
            text = _op("AsString", values)
        inner = values.shape.ndims
        if inner is None:
            raise ValueError("RaggedTensorToString needs the rank at build time")
        levels = list(rt.nested_row_splits)
        if inner > 1:  # dense inner dimensions: uniform partitions of their own
            dense = RaggedTensor.from_tensor(
                text, ragged_rank=inner - 1, row_splits_dtype=rt.row_splits.dtype
            )
            levels += list(dense.nested_row_splits)
            text = dense.flat_values
        for splits in reversed(levels):
            text = _join_rows(text, splits, keep)
        return _join_rows(
            text,
            _op("Pack", [_const(0, levels[0].dtype), _dim0(text, levels[0].dtype)], axis=0),
            keep,
        )[0]


def _join_rows(text, splits, keep):
    """Each row's strings as "[a, b, ...]" (its middle elided past 2 * keep)."""
    dtype = splits.dtype
    rows = _rowids_of(splits)
    nrows = _dim0(splits, dtype) - _const(1, dtype)
    if keep is not None:
        lengths = _gather(_diff(splits), rows)
        pos = _range(_const(0, dtype), splits[-1], _const(1, dtype)) - _gather(splits, rows)
        k = _const(keep, dtype)
        long_row = _op("Greater", lengths, k + k)
        kept = _op(
            "LogicalOr",
            _op("LogicalNot", long_row),
            _op("LogicalOr", _op("Less", pos, k), _op("GreaterEqual", pos, lengths - k)),
        )
        dots = _op("LogicalAnd", long_row, _op("Equal", pos, k - _const(1, dtype)))
        suffix = _op(
            "Select",
            dots,
            _op("Fill", _op("Shape", text), _const(", ...", dtypes.string)),
            _op("Fill", _op("Shape", text), _const("", dtypes.string)),
        )
        text = _op("StringJoin", [text, suffix], separator="")
        where = _op("Where", kept)[:, 0]
        text, rows = _gather(text, where), _gather(rows, where)
    joined = _op("UnsortedSegmentJoin", text, rows, nrows, separator=", ")
    return _op(
        "StringJoin",
        [_const("[", dtypes.string), joined, _const("]", dtypes.string)],
        separator="",
    )
