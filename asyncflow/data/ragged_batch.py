"""`Dataset.ragged_batch` / `tf.data.experimental.dense_to_ragged_batch` in graph mode:
TF's element_spec (a component of not fully known static shape batches into a
RaggedTensor of ragged_rank = its last unknown axis + 1; the others batch densely) on
one stage (ops/dataset_ragged.py)."""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.data.structure import _DatasetSpec, _pack, _RaggedSpec, _SparseSpec, _Spec

__all__ = ["ragged_batch"]


def ragged_batch(ds, batch_size, drop_remainder=False, row_splits_dtype=dtypes.int64):
    """Batches of `batch_size` elements, ragged where the element shapes may differ.

    Raises:
      TypeError: sparse, ragged or dataset components; row_splits_dtype not int32/int64.
    """
    split_dt = dtypes.as_dtype(row_splits_dtype)
    if split_dt not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"row_splits_dtype must be int32 or int64, got {split_dt.name}")
    bs = ops.convert_to_tensor(batch_size, dtype=dtypes.int64, name="batch_size")
    static = ops.constant_value(bs) if drop_remainder is True else None
    outer = int(static) if static is not None else None
    ranks, specs = [], []
    for s in ds._flat_specs():
        if isinstance(s, (_SparseSpec, _DatasetSpec, _RaggedSpec)):
            raise TypeError(f"ragged_batch does not batch {s!r} components here.")
        dims = s.shape.as_list() if s.shape.ndims is not None else None
        if dims is None:
            ranks.append(-1)
            specs.append(_Spec(s.dtype, None))
        elif None not in dims:
            ranks.append(-1)
            specs.append(_Spec(s.dtype, [outer, *dims]))
        else:
            r = max(i for i, d in enumerate(dims) if d is None)
            ranks.append(r)
            specs.append(_RaggedSpec(s.dtype, [outer, *dims], r + 1, split_dt))
    if all(r < 0 for r in ranks):
        return ds.batch(batch_size, drop_remainder)
    drop = ops.convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder")
    return ds._then(
        "_DenseToRaggedBatchDataset",
        [ds._variant, bs, drop],
        _pack(ds._structure, specs),
        {"ragged_ranks": ranks, "row_splits_dtype": split_dt},
    )
