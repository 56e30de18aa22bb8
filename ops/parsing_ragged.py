"""RaggedFeature results of the parsing ops (tf.io.RaggedFeature in parse_example,
parse_single_example and the sequence parsers' context and feature lists).

The parse ops give each key's values with the rows they came from (an Example's
values per record; a feature list's values per time step, steps per record); the op
here, ParseRaggedPartitions, turns a RaggedFeature's values and its partition
features into the RaggedTensor's flat values and row splits, outermost first, as TF's
parsing does: partitions apply innermost first within each record (or time step), a
UniformRowLength with no ragged dimension inside it reshapes the values (a dense inner
dimension), any other partition adds a ragged dimension, and the batch (and time)
dimensions lead.  TF builds the same result from ragged ops in Python; asyncflow has
one kernel for it.  Splits that do not describe the values raise InvalidArgumentError
(TF checks them only with `validate=True`), and a feature list's values and partitions
with different step counts raise "values and partitions are not aligned".
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

_MAX_ROWS = 1 << 26  # rows one ValueRowIds partition may declare (a row id is untrusted)

# Partition kinds in the op's `partition_kinds` attr.
_KINDS = ("row_splits", "row_lengths", "row_starts", "row_limits", "value_rowids", "uniform")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _levels(kinds) -> tuple[int, list[int]]:
    """How many ragged levels the partitions add, and the dense inner dims the
    innermost uniform ones reshape into (outer first)."""
    ragged, dense = 0, []
    for kind, length in reversed(kinds):
        if kind == "uniform" and not ragged:
            dense.insert(0, length)
        else:
            ragged += 1
    return ragged, dense


def _shape_fn(op):
    a = op._attr
    kinds = list(zip(a("partition_kinds"), a("uniform_lengths")))
    ragged, dense = _levels(kinds)
    lead = 2 if a("layout") == "steps" else 1
    return [tensor_shape.TensorShape([None, *dense])] + [tensor_shape.TensorShape([None])] * (
        lead + ragged
    )


ParseRaggedPartitions = register_op(
    "ParseRaggedPartitions",
    inputs=["values: T", "partition_values: Npartitions * int64", "rows: Nrows * int64"],
    outputs=["flat_values: T", "nested_splits: Nsplits * Tsplits"],
    attrs={
        "T": TypeConstraint((dtypes.string, dtypes.float32, dtypes.int64)),
        "Tsplits": TypeConstraint((dtypes.int32, dtypes.int64)),
        "Npartitions": 0,
        "Nrows": 0,
        "Nsplits": 0,
        "feature_key": "",
        # "sparse": each source's rows as a VarLen SparseTensor's (indices, dense_shape);
        # "rows": as row splits per record; "steps": (steps per record, values per step).
        "layout": "sparse",
        "partition_kinds": [],
        "uniform_lengths": [],
    },
    shape_fn=_shape_fn,
)
NotDifferentiable("ParseRaggedPartitions")


def _record_splits(layout, parts):
    """(outer splits or None, unit splits): units are records, or time steps."""
    if layout == "sparse":
        indices, dense_shape = parts
        n = int(dense_shape[0])
        counts = np.bincount(np.asarray(indices)[:, 0], minlength=n) if len(indices) else None
        counts = np.zeros(n, np.int64) if counts is None else counts
        return None, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if layout == "rows":
        return None, np.asarray(parts[0], np.int64)
    return np.asarray(parts[0], np.int64), np.asarray(parts[1], np.int64)


def _check_splits(splits, nvals, key):
    if (
        len(splits) == 0
        or splits[0] != 0
        or np.any(np.diff(splits) < 0)
        or splits[-1] != nvals
    ):
        raise _invalid(
            f"Feature {key}: its values and partitions do not form a valid RaggedTensor"
        )


def _unit(values, parts, kinds, key):
    """One record's (or step's) ragged value: (flat values, splits per level outer
    first), partitions applied innermost first."""
    flat, levels = values, []
    for (kind, length), p in zip(reversed(kinds), reversed(parts)):
        n = len(levels[0]) - 1 if levels else flat.shape[0]
        if kind == "uniform":
            if n % length:
                raise _invalid(
                    f"Feature {key}: {n} rows cannot be split into rows of uniform length "
                    f"{length}"
                )
            if not levels:
                flat = flat.reshape(-1, length, *flat.shape[1:])
            else:
                levels.insert(0, np.arange(0, n + 1, length, dtype=np.int64))
            continue
        p = np.asarray(p, np.int64)
        if kind == "row_splits":
            splits = np.concatenate([[0], p[1:]])
        elif kind == "row_limits":
            splits = np.concatenate([[0], p])
        elif kind == "row_starts":
            splits = np.concatenate([p, [n]]) if p.size else np.zeros(1, np.int64)
        elif kind == "row_lengths":
            splits = np.concatenate([[0], np.cumsum(p)])
        else:  # value_rowids
            if p.size and (p.min() < 0 or np.any(np.diff(p) < 0)):
                raise _invalid(f"Feature {key}: value_rowids must be sorted and non-negative")
            rows = int(p.max()) + 1 if p.size else 0
            if rows > _MAX_ROWS:
                raise _invalid(f"Feature {key}: value_rowids declare {rows} rows (too many)")
            splits = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=rows))])
        splits = splits.astype(np.int64)
        _check_splits(splits, n, key)
        levels.insert(0, splits)
    return flat, levels


def _partitions_sync(attrs, values, partition_values, rows):
    key, layout = attrs["feature_key"], attrs["layout"]
    kinds = list(zip(attrs["partition_kinds"], attrs["uniform_lengths"]))
    per = 1 if layout == "rows" else 2
    sources = [rows[i : i + per] for i in range(0, len(rows), per)]
    outer, units = _record_splits(layout, sources[0])
    values = np.asarray(values)
    keyed = iter(range(len(partition_values)))
    part_rows = []  # for each partition: (its values, its unit splits) or None (uniform)
    for kind, _ in kinds:
        if kind == "uniform":
            part_rows.append(None)
            continue
        j = next(keyed)
        p_outer, p_units = _record_splits(layout, sources[1 + j])
        if layout == "steps" and not np.array_equal(p_outer, outer):
            raise _invalid(f"Feature {key}: values and partitions are not aligned")
        if len(p_units) != len(units):
            raise _invalid(f"Feature {key}: values and partitions are not aligned")
        part_rows.append((np.asarray(partition_values[j], np.int64), p_units))
    ragged, dense = _levels(kinds)
    flats, unit_levels = [], []
    for u in range(len(units) - 1):
        v = values[units[u] : units[u + 1]]
        parts = [None if pr is None else pr[0][pr[1][u] : pr[1][u + 1]] for pr in part_rows]
        flat, levels = _unit(v, parts, kinds, key)
        flats.append(flat)
        unit_levels.append(levels)
    # The unit level: each unit's outermost row count.
    counts = [len(lv[0]) - 1 if lv else f.shape[0] for f, lv in zip(flats, unit_levels)]
    nested = [] if outer is None else [outer]
    nested.append(np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]))
    for level in range(ragged):
        pieces, offset = [np.zeros(1, np.int64)], 0
        for lv in unit_levels:
            pieces.append(lv[level][1:] + offset)
            offset += int(lv[level][-1])
        nested.append(np.concatenate(pieces))
    if flats:
        flat = np.concatenate(flats)
    else:
        flat = np.zeros([0, *dense], dtype=values.dtype)
    split_np = attrs["Tsplits"].as_numpy_dtype
    return [flat, *(s.astype(split_np) for s in nested)]


@ParseRaggedPartitions.kernel("CPU")
async def _parse_ragged_partitions(ctx, values, *rest):
    n = ctx.attrs["Npartitions"]
    partition_values, rows = rest[:n], rest[n:]
    if np.size(values) > 4096:
        return await ctx.device.compute(
            _partitions_sync, ctx.attrs, values, partition_values, rows
        )
    return _partitions_sync(ctx.attrs, values, partition_values, rows)


_KIND_OF = {
    "RowSplits": "row_splits",
    "RowLengths": "row_lengths",
    "RowStarts": "row_starts",
    "RowLimits": "row_limits",
    "ValueRowIds": "value_rowids",
    "UniformRowLength": "uniform",
}


def needed_keys(key, feature):
    """The value key and partition keys a RaggedFeature reads (in that order)."""
    value_key = feature.value_key if feature.value_key is not None else key
    return [value_key] + [p.key for p in feature.partitions if hasattr(p, "key")]


def build(key, feature, values, sources, layout):
    """The RaggedTensor of RaggedFeature `feature` (output `key`) from the parsed
    `values` of its value key and `sources`: for the value key then each keyed
    partition, (partition values or None for the value key, rows tensors)."""
    from asyncflow.ragged import RaggedTensor

    kinds = [_KIND_OF[type(p).__name__] for p in feature.partitions]
    lengths = [int(getattr(p, "length", 0)) for p in feature.partitions]
    if any(k == "uniform" and n <= 0 for k, n in zip(kinds, lengths)):
        raise ValueError(f"Feature {key}: UniformRowLength must be positive")
    rows = [t for _, src in sources for t in src]
    partition_values = [pv for pv, _ in sources[1:]]
    ragged, _ = _levels(list(zip(kinds, lengths)))
    lead = 2 if layout == "steps" else 1
    op = ops.apply_op(
        "ParseRaggedPartitions",
        [values, partition_values, rows],
        {
            "Tsplits": feature.row_splits_dtype,
            "Npartitions": len(partition_values),
            "Nrows": len(rows),
            "Nsplits": lead + ragged,
            "feature_key": key,
            "layout": layout,
            "partition_kinds": kinds,
            "uniform_lengths": lengths,
        },
        name=f"ParseRagged_{_clean(key)}",
    )
    flat, *splits = op.outputs
    # Uniform levels keep their length (outer first); the lead levels have none.
    uniform = [None] * (len(splits) - ragged) + _level_lengths(list(zip(kinds, lengths)))
    value = flat
    for s, length in zip(reversed(splits), reversed(uniform)):
        value = RaggedTensor(value, s, length, internal=True)
    return value


def _level_lengths(kinds):
    """Each ragged level's uniform length (or None), outer first."""
    out, ragged = [], 0
    for kind, length in reversed(kinds):
        if kind == "uniform" and not ragged:
            continue
        ragged += 1
        out.insert(0, length if kind == "uniform" else None)
    return out


def _clean(key: str) -> str:
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in key)
