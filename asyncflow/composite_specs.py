"""The TypeSpecs of composite values, and `tf.type_spec_from_value`.

RaggedTensorSpec, IndexedSlicesSpec and TensorArraySpec follow TF's fields, defaults,
checks and reprs; their comparisons are TypeSpec's (asyncflow/type_spec.py).
`type_spec_from_value` maps a value to its spec: a Tensor (or anything that converts
to one: a NumPy array, a Python number, string or list) to a TensorSpec, a
SparseTensor, RaggedTensor, IndexedSlices or TensorArray to its spec, None to
NoneTensorSpec; other types register theirs (`register_type_spec_from_value`: tf.data
registers DatasetSpec).  As TF in a graph, a Python value is converted to a tensor of
the default graph (a Const), a NumPy array is not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import dynamic_ragged_shape as _drs
from asyncflow import graph as ops
from asyncflow.framework_extras import TensorSpec
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops.tensor_array_ops import TensorArray
from asyncflow.ragged import RaggedTensor
from asyncflow.sparse_tensor import SparseTensor, SparseTensorSpec
from asyncflow.type_spec import NoneTensorSpec, TypeSpec

__all__ = [
    "IndexedSlicesSpec",
    "RaggedTensorSpec",
    "TensorArraySpec",
    "register_type_spec_from_value",
    "type_spec_from_value",
]


class RaggedTensorSpec(TypeSpec):
    """`tf.RaggedTensorSpec(shape=None, dtype=tf.float32, ragged_rank=None,
    row_splits_dtype=tf.int64, flat_values_spec=None)`.

    Raises (at construction):
      ValueError: no ragged_rank and a shape of unknown rank, or a ragged_rank not less
        than the rank.
    """

    __slots__ = ("_shape", "_dtype", "_ragged_rank", "_row_splits_dtype", "_flat_values_spec")

    def __init__(self, shape=None, dtype=dtypes.float32, ragged_rank=None,
                 row_splits_dtype=dtypes.int64, flat_values_spec=None):  # fmt: skip
        self._shape = tensor_shape.as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._row_splits_dtype = dtypes.as_dtype(row_splits_dtype)
        self._flat_values_spec = flat_values_spec
        if flat_values_spec is not None:
            self._dtype = flat_values_spec.dtype
        rank = self._shape.rank
        if ragged_rank is None:
            if rank is None:
                raise ValueError("Must specify ragged_rank or a shape with a known rank.")
            ragged_rank = rank - 1
        if not isinstance(ragged_rank, int):
            raise TypeError(f"Argument `ragged_rank` must be an int. Received {ragged_rank}.")
        if rank is not None and ragged_rank >= rank:
            raise ValueError(
                f"Argument `ragged_rank` ({ragged_rank}) must be less than rank ({rank})."
            )
        self._ragged_rank = ragged_rank

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    ragged_rank = property(lambda self: self._ragged_rank)
    row_splits_dtype = property(lambda self: self._row_splits_dtype)
    flat_values_spec = property(lambda self: self._flat_values_spec)
    value_type = property(lambda self: RaggedTensor)

    def _serialize(self) -> tuple:
        fields = (self._shape, self._dtype, self._ragged_rank, self._row_splits_dtype)
        return fields if self._flat_values_spec is None else (*fields, self._flat_values_spec)

    @classmethod
    def from_value(cls, value) -> RaggedTensorSpec:
        if not isinstance(value, RaggedTensor):
            raise TypeError(f"Expected a RaggedTensor, got {value!r}")
        return cls(value.shape, value.dtype, value.ragged_rank, value.row_splits.dtype)


class IndexedSlicesSpec(TypeSpec):
    """`tf.IndexedSlicesSpec(shape=None, dtype=tf.float32, indices_dtype=tf.int64,
    dense_shape_dtype=None, indices_shape=None)`: `indices_shape` defaults to [None]."""

    __slots__ = ("_shape", "_values_dtype", "_indices_dtype", "_dense_shape_dtype",
                 "_indices_shape")  # fmt: skip

    def __init__(self, shape=None, dtype=dtypes.float32, indices_dtype=dtypes.int64,
                 dense_shape_dtype=None, indices_shape=None):  # fmt: skip
        self._shape = tensor_shape.as_shape(shape)
        self._values_dtype = dtypes.as_dtype(dtype)
        self._indices_dtype = dtypes.as_dtype(indices_dtype)
        self._dense_shape_dtype = (
            None if dense_shape_dtype is None else dtypes.as_dtype(dense_shape_dtype)
        )
        self._indices_shape = tensor_shape.as_shape(indices_shape).with_rank(1)

    value_type = property(lambda self: IndexedSlices)

    def _serialize(self) -> tuple:
        return (self._shape, self._values_dtype, self._indices_dtype,
                self._dense_shape_dtype, self._indices_shape)  # fmt: skip

    @classmethod
    def from_value(cls, value) -> IndexedSlicesSpec:
        if not isinstance(value, IndexedSlices):
            raise TypeError(f"Expected an IndexedSlices, got {value!r}")
        dense = value.dense_shape
        shape = (
            ops.constant_shape(dense)
            if dense is not None
            else tensor_shape.TensorShape([None]).concatenate(value.values.shape[1:])
        )
        return cls(shape, value.values.dtype, value.indices.dtype,
                   None if dense is None else dense.dtype, value.indices.shape)  # fmt: skip


class TensorArraySpec(TypeSpec):
    """`tf.TensorArraySpec(element_shape=None, dtype=tf.float32, dynamic_size=False,
    infer_shape=True)`.  As TF's, compatibility ignores infer_shape, and joins keep the
    first spec's element shape."""

    __slots__ = ("_element_shape", "_dtype", "_dynamic_size", "_infer_shape")

    def __init__(self, element_shape=None, dtype=dtypes.float32, dynamic_size=False,
                 infer_shape=True):  # fmt: skip
        self._element_shape = tensor_shape.as_shape(element_shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._dynamic_size = dynamic_size
        self._infer_shape = infer_shape

    value_type = property(lambda self: TensorArray)

    def _serialize(self) -> tuple:
        return (self._element_shape, self._dtype, self._dynamic_size, self._infer_shape)

    def is_compatible_with(self, other) -> bool:
        if not isinstance(other, TypeSpec):
            try:
                other = self.from_value(other)
            except TypeError:
                return False
        return (
            type(other) is TensorArraySpec
            and self._dtype.is_compatible_with(other._dtype)
            and self._element_shape.is_compatible_with(other._element_shape)
            and self._dynamic_size == other._dynamic_size
        )

    def most_specific_common_supertype(self, others):
        """As TF's: same dtype and dynamic_size, or None; the element shape stays this
        spec's (TF does not join it) and infer_shape holds only if it holds for all."""
        if not all(type(o) is TensorArraySpec for o in others):
            return None
        if any(o._dtype != self._dtype or o._dynamic_size != self._dynamic_size for o in others):
            return None
        infer = self._infer_shape and all(o._infer_shape for o in others)
        return TensorArraySpec(self._element_shape, self._dtype, self._dynamic_size, infer)

    def most_specific_compatible_type(self, other) -> TensorArraySpec:
        joined = self.most_specific_common_supertype([other])
        if joined is None:
            raise ValueError(f"No TypeSpec is compatible with both {self} and {other}")
        return joined

    @classmethod
    def from_value(cls, value) -> TensorArraySpec:
        if not isinstance(value, TensorArray):
            raise TypeError(f"Expected a TensorArray, got {value!r}")
        return cls(value.element_shape, value.dtype, value._dynamic_size, value._infer_shape)


_drs._TENSOR_SPEC.append(TensorSpec)
_FROM_VALUE: list[tuple[type, Callable]] = [
    (ops.Tensor, lambda t: TensorSpec(t.shape, t.dtype.base_dtype)),
    (_drs.DynamicRaggedShape, _drs.DynamicRaggedShape.Spec.from_value),
    (SparseTensor, SparseTensorSpec.from_value),
    (RaggedTensor, RaggedTensorSpec.from_value),
    (IndexedSlices, IndexedSlicesSpec.from_value),
    (TensorArray, TensorArraySpec.from_value),
]


def register_type_spec_from_value(value_type: type, fn: Callable) -> None:
    """`fn(value) -> TypeSpec` for values of `value_type` (tried before the rest)."""
    _FROM_VALUE.insert(0, (value_type, fn))


def type_spec_from_value(value) -> TypeSpec:
    """`tf.type_spec_from_value`: the TypeSpec of `value`.

    Raises:
      TypeError: a value no spec describes (TF's message).
    """
    if value is None:
        return NoneTensorSpec()
    for value_type, fn in _FROM_VALUE:
        if isinstance(value, value_type):
            return fn(value)
    if isinstance(value, TypeSpec):
        raise TypeError(
            f"Could not build a TypeSpec for {value!r} of unsupported type {type(value)}."
        )
    if isinstance(value, np.ndarray):  # (TF: an array adds no op; a Python value does)
        return TensorSpec(value.shape, dtypes.as_dtype(value.dtype))
    try:
        t = ops.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"Could not build a TypeSpec for {value!r} of unsupported type {type(value)}."
        ) from None
    return TensorSpec(t.shape, t.dtype.base_dtype)
