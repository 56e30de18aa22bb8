"""Sparse-tensor maps (TF's SparseTensorsMap): AddSparseToTensorsMap,
AddManySparseToTensorsMap and TakeManySparseFromTensorsMap, how TF1's batching
(tf.train.batch, shuffle_batch, ...) carries SparseTensors through a queue of dense
tensors: each SparseTensor is stored in a map and an int64 handle is enqueued in its
place; after the dequeue, the handles are taken back out as one batched SparseTensor.

A map is a resource found by (container, shared_name), the op's own name when
shared_name is empty, in the session's resource manager (a named container: the
process's, as every resource).  The Add op and the Take op of one batch meet through
that name: `take_many_sparse_from_tensors_map` gives the Take op its Add op's container
and name.  Handles count from 0 in each map, in the order the Add kernels run; Take
removes what it returns, so a handle is taken once.

AddMany stores each row of a rank >= 2 SparseTensor (its indices must be in order, as
TF requires): the rows holding values first, in order, then the empty ones, as TF
numbers them.  Take prepends the batch index to each stored tensor's indices, keeping
their order, and its dense shape is the batch size followed by the largest of each
dimension.  TF registers no gradient for these ops (LookupError when differentiated),
nor does asyncflow.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "add_many_sparse_to_tensors_map",
    "add_sparse_to_tensors_map",
    "take_many_sparse_from_tensors_map",
]


class SparseTensorsMap:
    """Stored SparseTensors by handle.  Invariant: `next_handle` is above every handle
    ever given out, so a handle names one tensor for the map's life."""

    def __init__(self, name: str):
        self.name = name
        self.tensors: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.next_handle = 0

    def add(self, indices, values, shape) -> int:
        handle = self.next_handle
        self.next_handle += 1
        self.tensors[handle] = (indices, values, shape)
        return handle

    def take(self, handle: int):
        found = self.tensors.pop(handle, None)
        if found is None:
            raise _invalid(f"Unable to find SparseTensor: {handle} in map: {self.name}")
        return found


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _the_map(ctx) -> SparseTensorsMap:
    name = _text(ctx.attrs["shared_name"]) or ctx.op.name
    container = _text(ctx.attrs["container"])
    mgr = ctx.resource_mgr(container)
    return mgr.lookup_or_create(container, name, lambda: SparseTensorsMap(name))


def _sparse_inputs(indices, values, shape):
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape)
    if indices.ndim != 2:
        raise _invalid(
            f"Input indices should be a matrix but received shape {list(indices.shape)}"
        )
    if values.ndim != 1:
        raise _invalid(f"Input values should be a vector but received shape {list(values.shape)}")
    if shape.ndim != 1:
        raise _invalid(f"Input shape should be a vector but received shape {list(shape.shape)}")
    if indices.shape[0] != values.shape[0]:
        raise _invalid(
            f"indices and values rows (indexing dimension) must match. (indices = "
            f"{indices.shape[0]}, values = {values.shape[0]})"
        )
    return indices.astype(np.int64), values, shape.astype(np.int64)


def _add_shape(op, rank_of_handles: int):
    op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(1)
    op.inputs[2].shape.with_rank(1)
    return [tensor_shape.TensorShape([None] * rank_of_handles)]


_MAP_ATTRS = {"container": "", "shared_name": ""}

AddSparseToTensorsMap = register_op(
    "AddSparseToTensorsMap",
    inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
    outputs=["sparse_handle: int64"],
    attrs={"T": ANY, **_MAP_ATTRS},
    shape_fn=lambda op: _add_shape(op, 0),
    stateful=True,
)


@AddSparseToTensorsMap.kernel("CPU")
async def _add_one(ctx, indices, values, shape):
    indices, values, shape = _sparse_inputs(indices, values, shape)
    return np.array(_the_map(ctx).add(indices.copy(), values.copy(), shape.copy()), np.int64)


AddManySparseToTensorsMap = register_op(
    "AddManySparseToTensorsMap",
    inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
    outputs=["sparse_handles: int64"],
    attrs={"T": ANY, **_MAP_ATTRS},
    shape_fn=lambda op: _add_shape(op, 1),
    stateful=True,
)


_REORDER_HINT = "\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"


def _check_order_and_bounds(indices: np.ndarray, shape: np.ndarray) -> None:
    """TF's SparseTensor::IndicesValid: each index in bounds, all in row-major order."""
    show = lambda row: "[" + ",".join(str(int(v)) for v in row) + "]"  # noqa: E731
    for i, row in enumerate(indices):
        if np.any(row < 0) or np.any(row >= shape):
            raise _invalid(
                f"indices[{i}] = {show(row)} is out of bounds: need 0 <= index < {show(shape)}"
            )
        if i and tuple(row) <= tuple(indices[i - 1]):
            if tuple(row) == tuple(indices[i - 1]):
                raise _invalid(f"indices[{i}] = {show(row)} is repeated")
            raise _invalid(
                f"indices[{i}] = {show(row)} is out of order. Many sparse ops require sorted "
                f"indices.{_REORDER_HINT}"
            )


@AddManySparseToTensorsMap.kernel("CPU")
async def _add_many(ctx, indices, values, shape):
    indices, values, shape = _sparse_inputs(indices, values, shape)
    if shape.size <= 1:
        raise _invalid(f"Rank of input SparseTensor should be > 1, but saw rank: {shape.size}")
    if indices.shape[1] != shape.size:
        raise _invalid(
            f"Number of dimensions of indices ({indices.shape[1]}) does not match the rank of "
            f"the shape ({shape.size})"
        )
    _check_order_and_bounds(indices, shape)
    the_map = _the_map(ctx)
    rows = int(shape[0])
    handles = np.empty([rows], np.int64)
    present = sorted(set(int(r) for r in indices[:, 0]))
    for r in present:  # (TF's numbering: rows holding values first, then the empty ones)
        keep = indices[:, 0] == r
        handles[r] = the_map.add(indices[keep, 1:].copy(), values[keep].copy(), shape[1:].copy())
    empty_values = values[:0].copy()
    for r in sorted(set(range(rows)) - set(present)):
        handles[r] = the_map.add(
            np.zeros([0, shape.size - 1], np.int64), empty_values.copy(), shape[1:].copy()
        )
    return handles


def _take_shape(op):
    op.inputs[0].shape.with_rank(1)
    return [tensor_shape.TensorShape([None, None]), tensor_shape.TensorShape([None]),
            tensor_shape.TensorShape([None])]  # fmt: skip


TakeManySparseFromTensorsMap = register_op(
    "TakeManySparseFromTensorsMap",
    inputs=["sparse_handles: int64"],
    outputs=["sparse_indices: int64", "sparse_values: dtype", "sparse_shape: int64"],
    attrs={"dtype": ANY, **_MAP_ATTRS},
    shape_fn=_take_shape,
    stateful=True,
)


def _type_string(dt: np.dtype) -> str:
    name = "string" if dt.kind == "O" else dtypes.as_dtype(dt).name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


@TakeManySparseFromTensorsMap.kernel("CPU")
async def _take_many(ctx, handles):
    handles = np.asarray(handles)
    if handles.ndim != 1:
        raise _invalid(f"sparse_handles should be a vector but received shape "
                       f"{list(handles.shape)}")  # fmt: skip
    the_map = _the_map(ctx)
    taken = [the_map.take(int(h)) for h in handles]
    want = ctx.attrs["dtype"]
    want_np = np.dtype(object) if want == dtypes.string else np.dtype(want.as_numpy_dtype)
    rank = None
    for i, (_, vals, shape) in enumerate(taken):
        if vals.dtype != want_np:
            raise _invalid(
                f"Requested SparseTensor of type {_type_string(want_np)} but "
                f"SparseTensor[{i}].values.dtype() == {_type_string(vals.dtype)}"
            )
        if rank is not None and shape.size + 1 != rank:
            raise _invalid(
                f"Inconsistent rank across SparseTensors: rank prior to SparseTensor[{i}] was: "
                f"{rank} but rank of SparseTensor[{i}] is: {shape.size + 1}"
            )
        rank = shape.size + 1
    if not taken:
        return np.zeros([0, 1], np.int64), np.zeros([0], want_np), np.array([0], np.int64)
    out_ind = np.concatenate(
        [np.concatenate([np.full([len(ind), 1], b, np.int64), ind], axis=1)
         for b, (ind, _, _) in enumerate(taken)]
    )  # fmt: skip
    out_vals = np.concatenate([vals for _, vals, _ in taken]).astype(want_np, copy=False)
    dims = np.max(np.stack([shape for _, _, shape in taken]), axis=0)
    return out_ind, out_vals, np.concatenate([[len(taken)], dims]).astype(np.int64)


# -- builders (TF's sparse_ops._add_sparse_to_tensors_map and friends) -----------------------


def _sparse(sp_input) -> SparseTensor:
    if not isinstance(sp_input, SparseTensor):
        raise TypeError("Input must be a SparseTensor.")
    return sp_input


def add_sparse_to_tensors_map(sp_input, container=None, shared_name=None, name=None):
    """Store `sp_input` in a SparseTensorsMap; the scalar int64 handle to it.

    Raises:
      TypeError: `sp_input` is not a SparseTensor.
    """
    sp = _sparse(sp_input)
    return ops.apply_op(
        "AddSparseToTensorsMap",
        [sp.indices, sp.values, sp.dense_shape],
        {"T": sp.values.dtype, "container": container or "", "shared_name": shared_name or ""},
        name=name,
    ).outputs[0]


def add_many_sparse_to_tensors_map(sp_input, container=None, shared_name=None, name=None):
    """Store each row (first dimension) of `sp_input`; a vector of int64 handles.

    Raises:
      TypeError: `sp_input` is not a SparseTensor.
    """
    sp = _sparse(sp_input)
    return ops.apply_op(
        "AddManySparseToTensorsMap",
        [sp.indices, sp.values, sp.dense_shape],
        {"T": sp.values.dtype, "container": container or "", "shared_name": shared_name or ""},
        name=name,
    ).outputs[0]


def take_many_sparse_from_tensors_map(sparse_map_op, sparse_handles, rank=None, name=None):
    """The SparseTensors of `sparse_handles` (stored by `sparse_map_op`, an Add op), as
    one SparseTensor with a new first (batch) dimension; `rank` its rank if known.

    Raises:
      TypeError: `sparse_map_op` is not an Add*SparseToTensorsMap Operation.
    """
    if not isinstance(sparse_map_op, ops.Operation):
        raise TypeError("sparse_map_op be an Operation")
    if sparse_map_op.type not in ("AddSparseToTensorsMap", "AddManySparseToTensorsMap"):
        raise TypeError(
            "sparse_map_op must be one of AddSparseToTensorsMap or AddSparseToTensorsMap. "
            f"Instead, found `{sparse_map_op.type}`."
        )
    with ops.colocate_with(sparse_map_op):
        shared_name = _text(sparse_map_op.get_attr("shared_name")) or sparse_map_op.name
        out = ops.apply_op(
            "TakeManySparseFromTensorsMap",
            [sparse_handles],
            {
                "dtype": sparse_map_op.get_attr("T"),
                "container": _text(sparse_map_op.get_attr("container")),
                "shared_name": shared_name,
            },
            name=name,
        ).outputs
    indices, values, shape = out
    indices.set_shape([None, rank])
    shape.set_shape([rank])
    return SparseTensor(indices, values, shape)
