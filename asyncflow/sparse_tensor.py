"""SparseTensor: a sparse value as three dense tensors (TF1's `tf.SparseTensor`).

`indices` (int64 [N, rank]), `values` ([N]) and `dense_shape` (int64 [rank]).  Fetching
a SparseTensor with `Session.run` gives a `SparseTensorValue` namedtuple of the three
arrays (the session asks `_fetch_components()` for the parts and how to rebuild them).

This is the minimal value class the parsing and string ops return; sparse math ops
come with their own issue.
"""

from __future__ import annotations

import collections

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.type_spec import TypeSpec

__all__ = ["SparseTensor", "SparseTensorSpec", "SparseTensorValue"]


class SparseTensorValue(
    collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
):
    """The fetched value of a SparseTensor: numpy arrays indices, values, dense_shape."""

    __slots__ = ()


class SparseTensorSpec(TypeSpec):
    """`tf.SparseTensorSpec`: the dense shape and values dtype a SparseTensor is
    expected to have (e.g. a while loop variable's invariant)."""

    __slots__ = ("_shape", "_dtype")
    _spec_of = "sparse"  # (what control flow checks a loop variable against)

    def __init__(self, shape=None, dtype=dtypes.float32):
        self._shape = tensor_shape.as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    value_type = property(lambda self: SparseTensor)

    @classmethod
    def from_value(cls, value):
        """The spec of a SparseTensor: its dense shape as far as it is known when the
        graph is built (TF's constant_value_as_shape, merged with the shape it was
        declared or traced with), and its values' dtype."""
        dense = value.dense_shape
        if isinstance(dense, ops.Tensor):  # (with a static shape beyond it: TF's default)
            return cls(value.shape, value.dtype)
        return cls(tensor_shape.unknown_shape(dense.shape[0].value), value.dtype)

    def is_compatible_with(self, other) -> bool:
        if isinstance(other, SparseTensor):
            other = SparseTensorSpec.from_value(other)
        return (
            isinstance(other, SparseTensorSpec)
            and self._dtype.is_compatible_with(other.dtype)
            and self._shape.is_compatible_with(other.shape)
        )

    def _key(self):
        dims = None if self._shape.rank is None else tuple(self._shape.as_list())
        return (dims, self._dtype)

    def _serialize(self) -> tuple:
        return (self._shape, self._dtype)


class SparseTensor:
    """Represents a sparse tensor.

    Raises (at construction):
      ValueError / TypeError: the components cannot be converted, or have the wrong
        dtype or rank (indices and dense_shape must be int64).
    """

    @classmethod
    def from_value(cls, sparse_tensor_value) -> SparseTensor:
        if isinstance(sparse_tensor_value, SparseTensor):
            return sparse_tensor_value
        return cls(
            sparse_tensor_value.indices,
            sparse_tensor_value.values,
            sparse_tensor_value.dense_shape,
        )

    # A static shape known beyond dense_shape's value (sparse_placeholder's `shape`, a
    # traced SparseTensorSpec's).
    _static_shape: tensor_shape.TensorShape | None = None

    def __init__(self, indices, values, dense_shape):
        with ops.name_scope(None, "SparseTensor", []):
            indices = ops.convert_to_tensor(indices, name="indices", dtype=dtypes.int64)
            values = ops.convert_to_tensor(values, name="values")
            dense_shape = ops.convert_to_tensor(
                dense_shape, name="dense_shape", dtype=dtypes.int64
            )
        if indices.dtype != dtypes.int64 or dense_shape.dtype != dtypes.int64:
            raise TypeError("indices and dense_shape of a SparseTensor must be int64")
        indices_shape = indices.shape.with_rank(2)
        values_shape = values.shape.with_rank(1)
        dense_shape_shape = dense_shape.shape.with_rank(1)
        # as TF: one index row per value, one index column per dense dimension
        indices_shape[0].assert_is_compatible_with(values_shape[0])
        indices_shape[1].assert_is_compatible_with(dense_shape_shape[0])
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape

    @property
    def indices(self) -> ops.Tensor:
        return self._indices

    @property
    def values(self) -> ops.Tensor:
        return self._values

    @property
    def dense_shape(self) -> ops.Tensor:
        return self._dense_shape

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def op(self) -> ops.Operation:
        return self._values.op

    @property
    def graph(self) -> ops.Graph:
        return self._indices.graph

    @property
    def shape(self) -> tensor_shape.TensorShape:
        shape = ops.constant_shape(self._dense_shape)
        # (sparse_placeholder's declared shape: its dense_shape is a placeholder)
        return shape if self._static_shape is None else shape.merge_with(self._static_shape)

    def get_shape(self) -> tensor_shape.TensorShape:
        return self.shape

    def _fetch_components(self):
        return [self._indices, self._values, self._dense_shape], (
            lambda parts: SparseTensorValue(*parts)
        )

    def eval(self, feed_dict=None, session=None) -> SparseTensorValue:
        session = session or ops.get_default_session()
        if session is None:
            raise ValueError("Cannot evaluate SparseTensor using `eval()`: no default session.")
        return session.run(self, feed_dict)

    def __repr__(self) -> str:
        return (
            f"SparseTensor(indices={self._indices}, values={self._values}, "
            f"dense_shape={self._dense_shape})"
        )


def _register_with_nest():
    from asyncflow import nest

    nest.register_composite(
        SparseTensor,
        lambda sp: [sp.indices, sp.values, sp.dense_shape],
        lambda like, c: SparseTensor(c[0], c[1], c[2]),
    )


_register_with_nest()
