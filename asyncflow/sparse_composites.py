"""TF1's sparse helpers built from the sparse ops and dense ones: sparse_retain,
sparse_reset_shape, sparse_transpose, sparse_mask, sparse_merge, sparse_to_indicator,
sparse_placeholder, sparse_matmul (a dense product with TF's sparsity hints), and
`from_dense` (tf.sparse.from_dense).

sparse_placeholder's parts are placeholders fed one by one (`{sp.indices: ...,
sp.values: ..., sp.dense_shape: ...}`); feeding a SparseTensorValue for the whole is
a Session feature asyncflow does not have yet.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import (
    array_ops,
    check_ops,
    control_flow_ordering,
    manip_ops,
    math_ops,
    matmul_ops,
    reduction_ops,
    scatter_nd_ops,
    slicing_ops,
    sparse_ops,
    unique_ops,
)
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "sparse_retain",
    "sparse_reset_shape",
    "sparse_transpose",
    "sparse_mask",
    "sparse_merge",
    "sparse_to_indicator",
    "sparse_placeholder",
    "sparse_matmul",
]

_sp = sparse_ops._sp


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of sp_input where the bool vector `to_retain` is True (shape kept).

    Raises:
      TypeError: sp_input is not a SparseTensor.
      ValueError: to_retain is not a vector of the number of entries (static check).
    """
    sp = _sp(sp_input)
    to_retain = ops.convert_to_tensor(to_retain)
    to_retain.shape.with_rank(1)
    n = tensor_shape.dimension_value(sp.values.shape[0])
    if n is not None and not to_retain.shape.is_compatible_with([n]):
        raise ValueError(f"Shapes must be equal rank and size: to_retain {to_retain.shape} for "
                         f"{n} values")  # fmt: skip
    where = array_ops.reshape(slicing_ops.where(to_retain), [-1])
    return SparseTensor(
        array_ops.gather(sp.indices, where), array_ops.gather(sp.values, where), sp.dense_shape
    )


def sparse_reset_shape(sp_input, new_shape=None) -> SparseTensor:
    """sp_input with dense shape `new_shape` (no smaller than the old one), or the
    tightest shape around its indices when None.

    Raises:
      TypeError: sp_input is not a SparseTensor.
      ValueError: new_shape of another rank, or smaller, known at build time.
      InvalidArgumentError: (when run) new_shape smaller than the old shape.
    """
    sp = _sp(sp_input)
    if new_shape is None:
        rank = array_ops.shape(sp.dense_shape, out_type=dtypes.int64)
        empty = math_ops.equal(array_ops.size(sp.values), 0)
        tight = reduction_ops.reduce_max(sp.indices, 0) + 1
        shape = slicing_ops.where(empty, array_ops.zeros(rank, dtypes.int64), tight)
        return SparseTensor(sp.indices, sp.values, shape)
    new_shape = ops.convert_to_tensor(new_shape, dtype=dtypes.int64, name="new_shape")
    want, have = ops.constant_value(new_shape), ops.constant_value(sp.dense_shape)
    if want is not None and have is not None:
        if len(want) != len(have):
            raise ValueError(f"Shapes must be equal rank, but are {len(have)} and {len(want)}")
        if (want < have).any():
            raise ValueError("Requested new_shape should have dimension sizes >= "
                             f"sp_input.dense_shape.  Found new_shape ({want.tolist()}), "
                             f"sp_input.dense_shape ({have.tolist()}).")  # fmt: skip
        return SparseTensor(sp.indices, sp.values, new_shape)
    check = check_ops.assert_less_equal(sp.dense_shape, new_shape, message=(
        "Requested new_shape should have dimension sizes >= sp_input.dense_shape."))  # fmt: skip
    new_shape = control_flow_ordering.with_dependencies([check], new_shape)
    return SparseTensor(sp.indices, sp.values, new_shape)


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """sp_input with its dimensions permuted by `perm` (reversed when None), in
    canonical order.

    Raises:
      TypeError: sp_input is not a SparseTensor.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseTranspose", [sp.indices]):
        if perm is None:
            rank = array_ops.shape(sp.dense_shape)[0]
            perm = reduction_ops.range(rank - 1, -1, -1)
        perm = ops.convert_to_tensor(perm, dtype=dtypes.int32, name="perm")
        indices = array_ops.gather(sp.indices, perm, axis=1)
        shape = array_ops.gather(sp.dense_shape, perm)
        static = ops.constant_value(perm)
        if static is not None:
            indices.set_shape([None, len(static)])
        return sparse_ops.sparse_reorder(SparseTensor(indices, sp.values, shape))


def sparse_mask(a, mask_indices, name=None) -> IndexedSlices:
    """The slices of IndexedSlices `a` whose index is not in `mask_indices`."""
    with ops.name_scope(name, "sparse_mask", [a, mask_indices]):
        _, keep = unique_ops.setdiff1d(a.indices, mask_indices)
        return IndexedSlices(array_ops.gather(a.values, keep), array_ops.gather(a.indices, keep),
                             a.dense_shape)  # fmt: skip


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False) -> SparseTensor:
    """A SparseTensor whose last index is `sp_ids`' values (ids < vocab_size) and whose
    values are `sp_values`' (TF1's feature-column merge of ids and weights).

    Raises:
      TypeError: an operand is not a SparseTensor, or ids are not integers.
    """
    ids_sp, vals_sp = _sp(sp_ids, "sp_ids"), _sp(sp_values, "sp_values")
    with ops.name_scope(name, "SparseMerge", [ids_sp.indices, vals_sp.values]):
        if not ids_sp.dtype.is_integer:
            raise TypeError(f"sp_ids.values must be integer, got {ids_sp.dtype}")
        ids = math_ops.cast(ids_sp.values, dtypes.int64)
        lead = ids_sp.indices[:, :-1]
        indices = array_ops.concat([lead, array_ops.expand_dims(ids, 1)], 1)
        size = ops.convert_to_tensor(vocab_size, dtype=dtypes.int64)
        shape = array_ops.concat([ids_sp.dense_shape[:-1], array_ops.reshape(size, [1])], 0)
        out = SparseTensor(indices, vals_sp.values, shape)
        return out if already_sorted else sparse_ops.sparse_reorder(out)


def sparse_to_indicator(sp_input, vocab_size, name=None):
    """A dense bool tensor [batch..., vocab_size]: True where an id of sp_input's last
    dimension occurs.

    Raises:
      TypeError: sp_input is not a SparseTensor of integers.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseToIndicator", [sp.indices]):
        n = array_ops.shape(sp.indices)[0]
        trues = array_ops.fill(array_ops.reshape(n, [1]), True)
        merged = sparse_merge(sp, SparseTensor(sp.indices, trues, sp.dense_shape), vocab_size)
        return sparse_ops.sparse_tensor_to_dense(merged, default_value=False,
                                                 validate_indices=False)  # fmt: skip


def sparse_placeholder(dtype, shape=None, name=None) -> SparseTensor:
    """A SparseTensor of placeholders: values [None], indices [None, rank], dense_shape
    [rank] (defaulting to `shape` when that is fully known).  Its static shape is `shape`.

    Unnamed, the parts take TF's default names in TF's order (the shape's, then
    "Placeholder" for the values and "Placeholder_1" for the indices); named, they are
    name/values, name/indices and name/shape.
    """
    dtype = dtypes.as_dtype(dtype)
    static = tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
    rank = static.ndims
    part = (lambda what: f"{name}/{what}") if name else (lambda what: None)
    if static.is_fully_defined():
        default = np.asarray(static.as_list(), np.int64)
        dense_shape = array_ops.placeholder_with_default(default, [rank], name=part("shape"))
    else:
        dense_shape = array_ops.placeholder(dtypes.int64, [rank], name=part("shape"))
    values = array_ops.placeholder(dtype, [None], name=part("values"))
    indices = array_ops.placeholder(dtypes.int64, [None, rank], name=part("indices"))
    result = SparseTensor(indices, values, dense_shape)
    result._static_shape = static
    return result


def sparse_matmul(a, b, transpose_a=False, transpose_b=False, a_is_sparse=False,
                  b_is_sparse=False, name=None):  # fmt: skip
    """a @ b for dense float matrices; the *_is_sparse hints only choose TF's kernel,
    the result is the same (op MatMul here)."""
    del a_is_sparse, b_is_sparse
    return matmul_ops.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


def from_dense(tensor, name=None) -> SparseTensor:
    """`tf.sparse.from_dense`: the non-zero (non-empty for strings) entries of `tensor`."""
    with ops.name_scope(name, "dense_to_sparse", [tensor]):
        t = ops.convert_to_tensor(tensor)
        zero = (
            array_ops.zeros([], t.dtype)
            if t.dtype != dtypes.string
            else ops.convert_to_tensor(b"")
        )
        indices = slicing_ops.where(math_ops.not_equal(t, zero))
        values = scatter_nd_ops.gather_nd(t, indices)
        shape = array_ops.shape(t, out_type=dtypes.int64)
        return SparseTensor(indices, values, shape)


def sparse_eye(num_rows, num_columns=None, dtype=dtypes.float32, name=None) -> SparseTensor:
    """`tf.sparse.eye`: a [num_rows, num_columns] SparseTensor with ones on the diagonal,
    built as TF builds it (Range indices, a Fill of ones)."""
    with ops.name_scope(name, "eye", [num_rows, num_columns]):
        num_rows = ops.convert_to_tensor(num_rows, dtypes.int64, name="num_rows")
        num_columns = (
            num_rows
            if num_columns is None
            else ops.convert_to_tensor(num_columns, dtypes.int64, name="num_columns")
        )
        size = math_ops.minimum(num_rows, num_columns)
        diag = reduction_ops.range(size, dtype=dtypes.int64)
        return SparseTensor(
            indices=manip_ops.stack([diag, diag], axis=1),
            values=array_ops.ones(size, dtype=dtype),
            dense_shape=manip_ops.stack([num_rows, num_columns]),
        )


def sparse_expand_dims(sp_input, axis=None, name=None) -> SparseTensor:
    """`tf.sparse.expand_dims`: a size-1 dimension inserted at `axis` (default -1: last).

    Raises:
      TypeError: `axis` neither an int nor a 0-D Tensor.
    """
    rank = sp_input.dense_shape.shape.dims[0] if sp_input.dense_shape.shape.ndims else None
    if rank is None:
        rank = array_ops.shape(sp_input.dense_shape)[0]
    axis = -1 if axis is None else axis
    with ops.name_scope(name, "expand_dims", [sp_input]):
        if isinstance(axis, int | np.integer):
            axis = ops.convert_to_tensor(int(axis), dtypes.int32, name="axis")
        elif not isinstance(axis, ops.Tensor):
            raise TypeError("axis must be an int scalar or a 0-D Tensor")
        axis = slicing_ops.where(axis >= 0, axis, axis + rank + 1)
        count = array_ops.shape(sp_input.indices)[0]
        new_index = array_ops.zeros(manip_ops.stack([count, 1]), dtype=dtypes.int64)
        before = slicing_ops.slice(sp_input.indices, [0, 0], manip_ops.stack([-1, axis]))
        after = slicing_ops.slice(sp_input.indices, manip_ops.stack([0, axis]), [-1, -1])
        indices = manip_ops.concat([before, new_index, after], axis=1)
        shape = manip_ops.concat(
            [
                slicing_ops.slice(sp_input.dense_shape, [0], array_ops.reshape(axis, [1])),
                ops.convert_to_tensor([1], dtypes.int64, name="new_shape"),
                slicing_ops.slice(sp_input.dense_shape, array_ops.reshape(axis, [1]), [-1]),
            ],
            axis=0,
        )
        return SparseTensor(indices=indices, values=sp_input.values, dense_shape=shape)
