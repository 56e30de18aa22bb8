"""IndexedSlices: a sparse representation of a dense tensor's gradient (TF1's).

`IndexedSlices(values, indices, dense_shape)` stands for the dense tensor whose rows
`indices[i]` are `values[i]` (rows named twice add up) and whose other rows are zero.
Gradients of Gather produce them, so an embedding's gradient costs the rows it touched,
not the whole table.  Anywhere a Tensor is expected, an IndexedSlices converts to its
dense value through UnsortedSegmentSum (registered with `convert_to_tensor`).

Invariant: `values.shape[0] == indices.shape[0]`; `dense_shape` (when given) is a 1-D
int tensor whose first entry is the number of rows.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops

__all__ = ["IndexedSlices", "IndexedSlicesValue", "convert_to_tensor_or_indexed_slices"]


class IndexedSlices:
    """A sparse slice-wise representation of a dense tensor (`tf.IndexedSlices`)."""

    def __init__(self, values, indices, dense_shape=None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self) -> ops.Tensor:
        return self._values

    @property
    def indices(self) -> ops.Tensor:
        return self._indices

    @property
    def dense_shape(self) -> ops.Tensor | None:
        return self._dense_shape

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.device

    @property
    def op(self) -> ops.Operation:
        return self._values.op

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def graph(self) -> ops.Graph:
        return self._values.graph

    @property
    def shape(self):
        if self._dense_shape is None:
            return tensor_shape.unknown_shape()
        return ops.constant_shape(self._dense_shape)

    def get_shape(self):
        return self.shape

    def _fetch_components(self):
        """What `Session.run` fetches for it: an IndexedSlicesValue of the parts (TF's)."""
        parts = [self._values, self._indices]
        if self._dense_shape is None:
            return parts, lambda got: IndexedSlicesValue(got[0], got[1], None)
        return parts + [self._dense_shape], lambda got: IndexedSlicesValue(*got)

    def __neg__(self):
        neg = ops.apply_op("Neg", [self._values]).outputs[0]
        return IndexedSlices(neg, self._indices, self._dense_shape)

    def __repr__(self) -> str:
        shape = "" if self._dense_shape is None else f", dense_shape={self._dense_shape}"
        return f"IndexedSlices(indices={self._indices}, values={self._values}{shape})"


class IndexedSlicesValue:
    """The value of an IndexedSlices fetched by `Session.run` (NumPy arrays)."""

    __slots__ = ("values", "indices", "dense_shape")

    def __init__(self, values, indices, dense_shape):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    def __repr__(self) -> str:
        return (
            f"IndexedSlicesValue(values={self.values!r}, indices={self.indices!r}, "
            f"dense_shape={self.dense_shape!r})"
        )


def _to_dense(value: IndexedSlices, dtype=None, name=None, as_ref=False) -> ops.Tensor:
    """Dense conversion (TF's `_indexed_slices_to_tensor`), without TF's size warning.

    Ops are built by type name through the graph's registry: this module is graph
    level, below the op families that define them."""
    if as_ref:
        raise ValueError(f"Can't convert IndexedSlices to a reference tensor: {value}")
    if dtype is not None and dtypes.as_dtype(dtype) != value.dtype:
        raise ValueError(
            f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for "
            f"IndexedSlices with dtype {value.dtype.name}"
        )
    if value.dense_shape is None:
        raise ValueError(
            f"Tensor conversion requested for IndexedSlices without dense_shape: {value.name}"
        )
    # TF's ops and names: dense_shape[0] ("strided_slice"), then UnsortedSegmentSum
    # named `name` (or its type), in the current scope
    with ops.name_scope("strided_slice") as scope:
        begin, end, strides = (
            ops.convert_to_tensor(np.array([v], np.int32), name=n)
            for v, n in ((0, "stack"), (1, "stack_1"), (1, "stack_2"))
        )
        rows = ops.apply_op(
            "StridedSlice",
            [value.dense_shape, begin, end, strides],
            {"shrink_axis_mask": 1},
            name=scope,
        ).outputs[0]
    dense = ops.apply_op(
        "UnsortedSegmentSum",
        [value.values, value.indices, rows],
        name=name or "UnsortedSegmentSum",
    ).outputs[0]
    static = value.shape
    if static.ndims is not None:
        dense.set_shape(static)
    return dense


ops.register_tensor_conversion_function(IndexedSlices, _to_dense)


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """An IndexedSlices stays as is; anything else becomes a Tensor."""
    if isinstance(value, IndexedSlices):
        if dtype is not None and dtypes.as_dtype(dtype) != value.dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for "
                f"IndexedSlices with dtype {value.dtype.name}"
            )
        return value
    return ops.convert_to_tensor(value, dtype=dtype, name=name)


def _register_with_nest():
    from asyncflow import nest

    nest.register_composite(
        IndexedSlices,
        lambda s: [s.values, s.indices, s.dense_shape],
        lambda like, c: IndexedSlices(c[0], c[1], c[2]),
    )


_register_with_nest()
