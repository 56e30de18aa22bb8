"""More of tf.nn built from the sparse and dense ops: `safe_embedding_lookup_sparse`
(embedding_lookup_sparse that tolerates invalid ids, non-positive weights and empty
rows, for ids of any rank) and `collapse_repeated` (CTC's merge of repeated labels).
"""

from __future__ import annotations

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.nn_composites import embedding_lookup_sparse
from asyncflow.ops import (
    array_ops,
    gradient_ops,
    math_ops,
    reduction_ops,
    scatter_nd_ops,
    sequence_ops,
    slicing_ops,
    sparse_ops,
)
from asyncflow.sparse_composites import sparse_retain
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["safe_embedding_lookup_sparse", "collapse_repeated"]


def _prune(sp_ids, sp_weights, keep):
    ids = sparse_retain(sp_ids, keep)
    if sp_weights is not None:
        sp_weights = sparse_retain(sp_weights, keep)
    return ids, sp_weights


def safe_embedding_lookup_sparse(
    embedding_weights,
    sparse_ids,
    sparse_weights=None,
    combiner="mean",
    default_id=None,
    name=None,
    partition_strategy="div",
    max_norm=None,
    allow_fast_lookup=False,
):
    """embedding_lookup_sparse over ids of rank >= 2 ([d0, ..., dn-1, ids]), after
    dropping negative ids (and, unless combiner is "sum", non-positive weights); a row
    left without ids gives zeros, or the embedding of `default_id` when given.

    Raises:
      ValueError: no embedding weights, or an unknown combiner.
      TypeError: sparse_ids is not a SparseTensor.
    """
    del allow_fast_lookup  # (TF's speed hint for ids without gaps: the same values)
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")
    if embedding_weights is None:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    if hasattr(embedding_weights, "_get_variable_list"):
        # A PartitionedVariable is looked up as its shards, so partition_strategy applies.
        embedding_weights = list(embedding_weights)
    if not isinstance(embedding_weights, list | tuple):
        embedding_weights = [embedding_weights]
    if not embedding_weights:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    sp_ids = sparse_ops._sp(sparse_ids, "sparse_ids")
    with ops.name_scope(name, "embedding_lookup", [sp_ids.indices]) as scope:
        shape = sp_ids.dense_shape
        rank_dim = tensor_shape.dimension_value(shape.shape[0])
        rank = array_ops.size(shape) if rank_dim is None else rank_dim
        rows = reduction_ops.reduce_prod(
            array_ops.slice(shape, [0], array_ops.reshape(rank - 1, [1]))
        )
        flat_shape = array_ops.stack([rows, array_ops.gather(shape, rank - 1)])
        sp_ids = sparse_ops.sparse_reshape(sp_ids, flat_shape)
        if sparse_weights is not None:
            sparse_weights = SparseTensor(
                sp_ids.indices, sparse_weights.values, sp_ids.dense_shape
            )
        sp_ids, sparse_weights = _prune(
            sp_ids, sparse_weights, math_ops.greater_equal(sp_ids.values, 0)
        )
        if combiner != "sum" and sparse_weights is not None:
            sp_ids, sparse_weights = _prune(
                sp_ids, sparse_weights, math_ops.greater(sparse_weights.values, 0)
            )
        sp_ids, is_empty = sparse_ops.sparse_fill_empty_rows(sp_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = sparse_ops.sparse_fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(
            embedding_weights,
            sp_ids,
            sparse_weights,
            partition_strategy=partition_strategy,
            combiner=combiner,
            max_norm=max_norm,
        )
        if default_id is None:
            width = array_ops.shape(result)[1]
            empty = array_ops.tile(
                array_ops.reshape(is_empty, [-1, 1]), array_ops.stack([1, width])
            )
            result = slicing_ops.where(empty, array_ops.zeros_like(result), result)
        lead = array_ops.slice(
            math_ops.cast(shape, dtypes.int32), [0], array_ops.reshape(rank - 1, [1])
        )
        out_shape = array_ops.concat([lead, array_ops.shape(result)[1:]], 0)
        final = array_ops.reshape(result, out_shape, name=scope)
        if rank_dim is not None:
            final.set_shape(tensor_shape.unknown_shape(rank_dim - 1).concatenate(result.shape[1:]))
        return final


def collapse_repeated(labels, seq_length, name=None):
    """(labels with each run of equal labels merged into one, left-aligned and zero
    padded to the longest result, and the new sequence lengths), as TF's ctc helper.

    Raises:
      ValueError: labels not of rank 2.
    """
    with ops.name_scope(name, "collapse_repeated_labels", [labels, seq_length]):
        labels = ops.convert_to_tensor(labels, name="labels")
        labels.shape.with_rank(2)
        seq_length = ops.convert_to_tensor(seq_length, name="seq_length")
        maxlen = array_ops.shape(labels)[1]
        # a label is kept when it differs from its left neighbour
        differs = math_ops.not_equal(labels[:, 1:], labels[:, :-1])
        keep = array_ops.concat([array_ops.ones_like(labels[:, :1], dtypes.bool), differs], 1)
        in_seq = sequence_ops.sequence_mask(seq_length, maxlen)
        keep = math_ops.logical_and(keep, in_seq)
        new_len = reduction_ops.reduce_sum(math_ops.cast(keep, dtypes.int32), 1)
        width = reduction_ops.reduce_max(new_len)
        # position of each kept label in its output row
        pos = gradient_ops.cumsum(math_ops.cast(keep, dtypes.int32), axis=1) - 1
        batch = array_ops.shape(labels)[0]
        rows = array_ops.tile(
            array_ops.expand_dims(reduction_ops.range(batch), 1), array_ops.stack([1, maxlen])
        )
        idx = slicing_ops.where(keep)
        coords = array_ops.stack(
            [scatter_nd_ops.gather_nd(rows, idx), scatter_nd_ops.gather_nd(pos, idx)], 1
        )
        values = scatter_nd_ops.gather_nd(labels, idx)
        out = scatter_nd_ops.scatter_nd(coords, values, array_ops.stack([batch, width]))
        return out, math_ops.cast(new_len, seq_length.dtype)
