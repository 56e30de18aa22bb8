"""SparseTensors through TF1's batching queues (asyncflow/train/input.py).

A queue holds dense tensors, so each SparseTensor input is stored in a SparseTensorsMap
(ops/sparse_map_ops.py) and its int64 handle, as a [1] vector, is enqueued in its place;
after the dequeue the [batch, 1] handles are taken back out as one SparseTensor of one
more dimension.  As TF's: a scalar `keep_input` stores under a cond (a dropped input
enqueues the handle -1), a vector one retains the kept rows' values; the several
enqueue lists of a *_join share the first list's maps, so the one Take op finds every
handle; each restored output waits for every restored value (TF's with_dependencies).
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import sparse_map_ops
from asyncflow.ops.control_flow_ordering import with_dependencies
from asyncflow.sparse_composites import sparse_retain
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["restore_sparse_tensors", "store_sparse_tensor_lists"]


@dataclass(frozen=True)
class SparseMetaData:
    """What restores one batched component: whether it was sparse, the Add op whose map
    holds it, and its rank (per example)."""

    sparse: bool
    map_op: ops.Operation | None = None
    rank: int | None = None


def _af():
    import asyncflow

    return asyncflow


def _store(t, enqueue_many, keep_input, shared_map_op):
    af = _af()
    name = shared_map_op.name if shared_map_op is not None else None
    if keep_input.shape.ndims == 1:
        t = sparse_retain(t, af.gather(keep_input, t.indices[:, 0]))
        return sparse_map_ops.add_many_sparse_to_tensors_map(t, shared_name=name)
    if enqueue_many:
        store = lambda: sparse_map_ops.add_many_sparse_to_tensors_map(t, shared_name=name)  # noqa: E731
        drop = lambda: -1 * af.ones(t.dense_shape[0:1], dtypes.int64)  # noqa: E731
    else:
        store = lambda: sparse_map_ops.add_sparse_to_tensors_map(t, shared_name=name)  # noqa: E731
        drop = lambda: af.constant(-1, dtypes.int64)  # noqa: E731
    known = ops.constant_value(keep_input)
    if known is not None:
        out = store() if bool(known) else drop()
    else:
        out = af.cond(keep_input, store, drop)
    if enqueue_many:
        out.set_shape([None])
    return out


def _add_op(stored) -> ops.Operation:
    """The Add op behind a stored handle (through a cond's Merge when there is one)."""
    if stored.op.type in ("AddSparseToTensorsMap", "AddManySparseToTensorsMap"):
        return stored.op
    for t in stored.op.inputs:
        if t.op.type in ("AddSparseToTensorsMap", "AddManySparseToTensorsMap"):
            return t.op
    return stored.op


def _store_list(tensor_list, enqueue_many, keep_input, shared_map_ops=None):
    af = _af()
    shared_map_ops = shared_map_ops or [None] * len(tensor_list)
    stored, info = [], []
    for t, shared in zip(tensor_list, shared_map_ops):
        if not isinstance(t, SparseTensor):
            stored.append(t)
            info.append(SparseMetaData(False))
            continue
        handles = _store(t, enqueue_many, keep_input, shared)
        rank = t.dense_shape.shape.with_rank(1)[0].value
        if rank is not None and enqueue_many:
            rank -= 1
        info.append(SparseMetaData(True, shared or _add_op(handles), rank))
        stored.append(af.expand_dims(handles, [-1]))
    return stored, info


def store_sparse_tensor_lists(tensor_list_list, enqueue_many, keep_input):
    """Each enqueue list with its SparseTensors stored (a list repeated for num_threads
    stays one list), and the metadata that restores them.

    Raises:
      ValueError: the lists do not hold SparseTensors at the same places.
    """
    if not any(isinstance(t, SparseTensor) for tl in tensor_list_list for t in tl):
        return tensor_list_list, None
    done: dict[int, list] = {}
    info = None
    out = []
    for tl in tensor_list_list:
        if id(tl) not in done:
            shared = None if info is None else [i.map_op for i in info]
            stored, candidate = _store_list(tl, enqueue_many, keep_input, shared)
            if info is not None and [i.sparse for i in info] != [c.sparse for c in candidate]:
                raise ValueError(
                    f"Inconsistent SparseTensors list: {tensor_list_list[0]} vs. {tl}"
                )
            info = info or candidate
            done[id(tl)] = stored
        out.append(done[id(tl)])
    return out, info


def restore_sparse_tensors(dequeued: list, info) -> list:
    """The dequeued components with the stored SparseTensors taken back out."""
    if info is None:
        return dequeued
    af = _af()
    restored = [
        sparse_map_ops.take_many_sparse_from_tensors_map(
            i.map_op, af.squeeze(s, [1]), rank=None if i.rank is None else i.rank + 1
        )
        if i.sparse
        else s
        for s, i in zip(dequeued, info)
    ]
    values = [x.values if isinstance(x, SparseTensor) else x for x in restored]
    deps = lambda x: with_dependencies(values, x)  # noqa: E731
    return [
        SparseTensor(deps(x.indices), deps(x.values), deps(x.dense_shape))
        if isinstance(x, SparseTensor)
        else deps(x)
        for x in restored
    ]
