"""RaggedTensor components of dataset elements, and `dense_to_ragged_batch`'s stage.

A ragged component travels as a handle (a 0-d object array holding a `RaggedValue`:
flat values and the row splits of each ragged dimension, outer first), as a sparse one
does; `_DatasetHandleToRagged` / `_RaggedToDatasetHandle` convert at the edges of
traced functions and iterators (asyncflow/data/structure.py).

`_DenseToRaggedBatchDataset` is TF's `dense_to_ragged_batch` in one stage: TF encodes
each component whose static shape is not fully known as a RaggedTensor of ragged_rank
r = its last unknown axis, then batches (ragged_rank r + 1); components of fully known
or unknown-rank shapes batch densely.  A batched ragged component's level-0 rows are
the elements' first dimensions; level k's rows repeat each element's k-th dimension
over its rows of level k - 1; the flat values are the elements' values reshaped to
[-1, *dims after r].
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops.dataset_more import _closing
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op

__all__ = ["RaggedValue"]


class RaggedValue:
    """A ragged component's value: `flat_values` and `splits` (outer to inner)."""

    __slots__ = ("flat_values", "splits")

    def __init__(self, flat_values, splits):
        self.flat_values = np.asarray(flat_values)
        self.splits = [np.asarray(s) for s in splits]


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _ragged_batch(parts: list, rank: int, split_dt) -> np.ndarray:
    """The elements `parts` (dense arrays) as one RaggedValue of ragged_rank `rank` + 1."""
    inner = parts[0].shape[rank + 1 :]
    splits = []
    counts = np.ones(len(parts), np.int64)  # rows each element has at the current level
    for level in range(rank + 1):
        lengths = np.concatenate(
            [np.full(int(c), p.shape[level], np.int64) for c, p in zip(counts, parts)]
        )
        splits.append(np.concatenate([[0], np.cumsum(lengths)]).astype(split_dt))
        counts = counts * np.array([p.shape[level] for p in parts], np.int64)
    flat = np.concatenate([p.reshape((-1, *inner)) for p in parts]) if parts else None
    return pl._handle_of(RaggedValue(flat, splits))


class DenseToRaggedBatch(pl._PassesFailed, pl.DatasetValue):
    def __init__(self, input_value, n: int, drop: bool, ranks: list, split_dt):
        if n <= 0:
            raise _bad("Batch size must be greater than zero.")
        self.input, self.n, self.drop, self.ranks = input_value, n, drop, ranks
        self.split_dt = split_dt

    def _emit(self, buf: list) -> tuple:
        out = []
        for k, r in enumerate(self.ranks):
            parts = [np.asarray(e[k]) for e in buf]
            if r < 0:
                out.append(pl._batch([(p,) for p in parts])[0])
                continue
            for j, p in enumerate(parts):
                if p.shape[r + 1 :] != parts[0].shape[r + 1 :] or p.ndim != parts[0].ndim:
                    raise _bad(
                        f"Cannot batch tensors with different shapes in component {k}. First "
                        f"element had shape {list(parts[0].shape)} and element {j} had shape "
                        f"{list(p.shape)}."
                    )
            out.append(_ragged_batch(parts, r, self.split_dt))
        return tuple(out)

    async def iterate(self, env):
        buf: list = []
        async for elem in _closing(self.input.iterate(env)):
            buf.append(elem)
            if len(buf) == self.n:
                yield self._emit(buf)
                buf = []
        if buf and not self.drop:
            yield self._emit(buf)

    async def _tolerant(self, env):
        # TF's dense_to_ragged_batch is a map and a batch, which its map_and_batch_fusion
        # fuses: a batch with a failed element in it is that element's error, whole.
        buf: list = []
        async for elem in _closing(pl._pass_of(self.input, env)):
            buf.append(elem)
            if len(buf) == self.n:
                yield _failed_in(buf) or self._emit(buf)
                buf = []
        if buf and not self.drop:
            yield _failed_in(buf) or self._emit(buf)

    def cardinality(self):
        n = self.input.cardinality()
        if n < 0:
            return n
        return n // self.n if self.drop else -(-n // self.n)


def _failed_in(buf: list) -> pl.Failed | None:
    return next((e for e in buf if type(e) is pl.Failed), None)


async def _dense_to_ragged(ctx, ds, batch_size, drop):
    a = ctx.attrs
    split_dt = a["row_splits_dtype"].as_numpy_dtype
    return dso._handle(
        DenseToRaggedBatch(
            dso._ds(ds), int(batch_size), bool(drop), list(a["ragged_ranks"]), split_dt
        )
    )


dso._register(
    "_DenseToRaggedBatchDataset",
    ["input_dataset: string", "batch_size: int64", "drop_remainder: bool"],
    {"ragged_ranks": [], "row_splits_dtype": dtypes.int64},
    _dense_to_ragged,
)


# -- handles <-> ragged tensors ------------------------------------------------------------


def _to_ragged_shapes(op):
    rank = op._attr("ragged_rank")
    return [tensor_shape.unknown_shape()] + [tensor_shape.TensorShape([None])] * rank


HandleToRagged = register_op(
    "_DatasetHandleToRagged",
    inputs=["handle: string"],
    outputs=["flat_values: T", "splits: ragged_rank * Tsplits"],
    attrs={"T": ANY, "Tsplits": TypeConstraint((dtypes.int32, dtypes.int64)), "ragged_rank": 1},
    shape_fn=_to_ragged_shapes,
)
NotDifferentiable("_DatasetHandleToRagged")


@HandleToRagged.kernel("CPU")
async def _handle_to_ragged(ctx, handle):
    v = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(v, RaggedValue) or len(v.splits) != ctx.attrs["ragged_rank"]:
        raise _bad(f"Expected a RaggedTensor component, got {v!r}")
    return (np.array(v.flat_values, copy=True), *(np.array(s, copy=True) for s in v.splits))


RaggedToHandle = register_op(
    "_RaggedToDatasetHandle",
    inputs=["flat_values: T", "splits: ragged_rank * Tsplits"],
    outputs=["handle: string"],
    attrs={"T": ANY, "Tsplits": TypeConstraint((dtypes.int32, dtypes.int64)), "ragged_rank": 1},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)
NotDifferentiable("_RaggedToDatasetHandle")


@RaggedToHandle.kernel("CPU")
async def _ragged_to_handle(ctx, flat_values, *splits):
    return pl._handle_of(
        RaggedValue(np.array(flat_values, copy=True), [np.array(s, copy=True) for s in splits])
    )
