"""Broadcasting between ragged and dense shapes, as TF 2.21's (tf.broadcast_to and
tf.broadcast_dynamic_shape with a DynamicRaggedShape, and the ragged element-wise ops
whose operands' shapes differ).

An operand is seen at a ragged rank `k` (the result's): its number of rows, the row
splits of its dimensions 1..k (a dense dimension as uniform splits) and its values
below them (shape [n_k] + inner).  Broadcasting walks the dimensions outermost first,
keeping for every element of the result at that depth the element of each operand it
reads: a dimension of length 1 repeats its one element, equal lengths pair
element-wise, anything else fails when the step runs (InvalidArgumentError, as TF's).
The inner dense dimensions broadcast as dense ones.

Invariant: all the index arithmetic is int64.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ragged import RaggedTensor
from asyncflow.ragged_methods import _concat, _const, _cumsum, _diff, _op, _range, _rowids_of

__all__ = [
    "broadcast_levels",
    "broadcast_to_splits",
    "gathered",
    "levels_of",
    "rebuild",
    "shape_levels",
]

_I32, _I64 = dtypes.int32, dtypes.int64
_MESSAGE = "Unable to broadcast: dimension size mismatch in dimension"


def _cast64(t):
    return t if t.dtype == _I64 else _op("Cast", t, DstT=_I64)


def _shape64(t):
    return _op("Shape", t, out_type=_I64)


def _assert(cond, message, checks) -> None:
    """An Assert that every element of bool `cond` holds (checked when the step runs)."""
    holds = _op("All", cond, _range(0, _op("Rank", cond), 1, _I32))
    checks.append(ops.apply_op("Assert", [holds, [ops.convert_to_tensor(message)]],
                               {"summarize": 3}))  # fmt: skip


def _guarded(t, checks):
    if not checks:
        return t
    with ops.control_dependencies(checks):
        return _op("Identity", t)


def levels_of(x, rank: int, k: int):
    """(nrows, [splits of dimensions 1..k], values) of x (a Tensor or RaggedTensor of
    rank at most `rank`), with leading dimensions of length 1 added up to `rank`.

    Raises:
      ValueError: x has more ragged dimensions than k, or a rank unknown at build time.
    """
    if isinstance(x, RaggedTensor):
        splits = [_cast64(s) for s in x.nested_row_splits]
        values = x.flat_values
    else:
        x = ops.convert_to_tensor(x)
        splits, values = [], x
    if x.shape.rank is None:
        raise ValueError("Broadcasting a ragged shape needs its operands' ranks when building")
    nrows, splits, inner = shape_levels(splits, _shape64(values), x.shape.rank, rank, k)
    return nrows, splits, _op("Reshape", values, inner)


def shape_levels(splits, inner, x_rank: int, rank: int, k: int):
    """(nrows, splits of dimensions 1..k, inner shape) of the shape of rank `x_rank`
    whose partitions are `splits` and whose values have shape `inner` (an int64
    vector), with leading dimensions of length 1 added up to `rank` and the outer dense
    dimensions taken as uniform partitions up to k.

    Raises:
      ValueError: more ragged dimensions than k, a rank above `rank`.
    """
    if x_rank > rank:
        raise ValueError(f"Cannot broadcast a value of rank {x_rank} to rank {rank}")
    splits = list(splits)
    pad = rank - x_rank
    if pad and not splits:  # dense: leading dimensions of length 1
        inner = _concat([_const([1] * pad, _I64), inner])
    elif pad:  # ragged: one row holding all the rows, per added dimension
        for _ in range(pad):
            nrows = _op("Size", splits[0], out_type=_I64) - 1
            splits.insert(0, _op("Pack", [_const(0, _I64), nrows], axis=0))
    if len(splits) > k:
        raise ValueError("Cannot broadcast a ragged dimension to a uniform one")
    nrows = (_op("Size", splits[0], out_type=_I64) - 1) if splits else inner[0]
    count = splits[-1][-1] if splits else nrows
    dense = 1  # the values' dimension taken as the next uniform partition
    while len(splits) < k:
        length = inner[dense]
        splits.append(_range(_const(0, _I64), count + 1, _const(1, _I64)) * length)
        count = count * length
        dense += 1
    if dense > 1:
        inner = _concat([_op("Reshape", count, _const([1], _I32)), inner[dense:]])
    return nrows, splits, inner


def _all(cond):
    return _op("All", cond, _range(0, _op("Rank", cond), 1, _I32))


def _is_one(lengths):
    """Whether a dimension has length 1 throughout (its every row: one element)."""
    return _all(_op("Equal", lengths, _const(1, _I64)))


def _pick(lengths, checks, where: str):
    """The lengths of a dimension of the result, given each operand's (vectors, or
    scalars for the rows): an operand's dimension of length 1 throughout takes the
    others' (TF's rule: a dimension broadcasts as a whole), else the lengths must be
    equal.  Also each operand's "length 1 throughout" flag."""
    ones = [_is_one(n) for n in lengths]
    result = lengths[-1]
    for n, one in zip(reversed(lengths[:-1]), reversed(ones[:-1]), strict=True):
        result = _op("SelectV2", one, result, n)
    for n, one in zip(lengths, ones, strict=True):
        fits = _op("LogicalOr", one, _all(_op("Equal", n, result)))
        _assert(fits, f"{_MESSAGE} {where}", checks)
    return result, ones


def _fit(lengths, target, checks, where: str):
    """Each operand's "length 1 throughout" flag for a dimension of the result whose
    lengths are `target`, and a check that each operand's are 1 or `target`."""
    ones = [_is_one(n) for n in lengths]
    for n, one in zip(lengths, ones, strict=True):
        fits = _op("LogicalOr", one, _all(_op("Equal", n, target)))
        _assert(fits, f"{_MESSAGE} {where}", checks)
    return ones


def _step(index, one):
    """index where the operand's dimension is not of length 1 throughout, else 0."""
    return index * _op("Cast", _op("LogicalNot", one), DstT=_I64)


def broadcast_levels(operands, k: int, fixed=None):
    """The broadcast of `operands` (each `levels_of`'s triple at ragged rank k):
    (nrows, splits of dimensions 1..k, [each operand's index of its values for every
    value of the result], checks).  With `fixed` (nrows, splits), the result's lengths
    are those, and each operand's must be 1 or equal to them."""
    checks: list = []
    if fixed is None:
        nrows, ones = _pick([o[0] for o in operands], checks, "0")
    else:
        nrows = fixed[0]
        ones = _fit([o[0] for o in operands], nrows, checks, "0")
    rows = _range(_const(0, _I64), nrows, _const(1, _I64))
    index = [_step(rows, one) for one in ones]
    target_splits = []
    zero = _const(0, _I32)
    for d in range(k):
        starts, lengths = [], []
        for (_, s, _), i in zip(operands, index, strict=True):
            starts.append(_op("GatherV2", s[d][:-1], i, zero))
            lengths.append(_op("GatherV2", _diff(s[d]), i, zero))
        if fixed is None:
            length, ones = _pick(lengths, checks, str(d + 1))
            splits = _concat([_const([0], _I64), _cumsum(length)])
        else:
            splits = _cast64(fixed[1][d])
            ones = _fit(lengths, _diff(splits), checks, str(d + 1))
        target_splits.append(splits)
        parent = _rowids_of(splits)
        offset = _range(_const(0, _I64), splits[-1], _const(1, _I64)) - _op(
            "GatherV2", splits[:-1], parent, zero
        )
        index = [
            _op("GatherV2", st, parent, zero) + _step(offset, one)
            for st, one in zip(starts, ones, strict=True)
        ]
    return nrows, target_splits, index, checks


def gathered(operand, index, checks):
    """An operand's values read at the result's positions."""
    return _guarded(_op("GatherV2", operand[2], index, _const(0, _I32)), checks)


def rebuild(values, splits):
    """values partitioned by `splits` (outermost first); a Tensor when there are none."""
    for s in reversed(splits):
        values = RaggedTensor.from_row_splits(values, s, validate=False)
    return values


def broadcast_to_splits(x, nrows, splits, inner_shape, rank: int, k: int):
    """x broadcast to the shape of rank `rank` of `nrows` rows, partitions `splits` (k)
    and values of shape `inner_shape` (an int64 vector: the values' count, then their
    dense dimensions)."""
    operand = levels_of(x, rank, k)
    _, _, (index,), checks = broadcast_levels([operand], k, fixed=(nrows, splits))
    values = gathered(operand, index, checks)
    if rank - k > 1:
        values = _op("BroadcastTo", values, _concat([_shape64(values)[:1], inner_shape[1:]]))
    return rebuild(values, splits)
