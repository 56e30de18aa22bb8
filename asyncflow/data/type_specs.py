"""`tf.data.DatasetSpec`, `tf.data.NumpyIterator`, and tf.compat.v1's
`tf.data.experimental` structure names (TensorStructure, SparseTensorStructure,
RaggedTensorStructure, TensorArrayStructure, DatasetStructure, Structure,
get_structure), as TF 2.21 defines them: the Structure names are the TypeSpecs under
their TF 1 names (the functions take dtype first), and get_structure is a dataset's or
iterator's element_spec.

NumpyIterator iterates a dataset eagerly; asyncflow builds graphs only, so, as TF in a
graph, making one raises RuntimeError (Dataset.as_numpy_iterator likewise).
"""

from __future__ import annotations

from asyncflow import tensor_shape
from asyncflow.composite_specs import (
    RaggedTensorSpec,
    TensorArraySpec,
    register_type_spec_from_value,
)
from asyncflow.data.dataset import Dataset
from asyncflow.data.iterator import Iterator
from asyncflow.data.optional import element_spec_of
from asyncflow.framework_extras import TensorSpec
from asyncflow.sparse_tensor import SparseTensorSpec
from asyncflow.type_spec import TypeSpec

__all__ = [
    "DatasetSpec",
    "DatasetStructure",
    "NumpyIterator",
    "RaggedTensorStructure",
    "SparseTensorStructure",
    "Structure",
    "TensorArrayStructure",
    "TensorStructure",
    "get_structure",
]


class DatasetSpec(TypeSpec):
    """`tf.data.DatasetSpec(element_spec, dataset_shape=())`: the type of a dataset, by
    its elements' structure of specs."""

    __slots__ = ("_element_spec", "_dataset_shape")

    def __init__(self, element_spec, dataset_shape=()):
        self._element_spec = element_spec
        self._dataset_shape = tensor_shape.as_shape(dataset_shape)

    element_spec = property(lambda self: self._element_spec)
    value_type = property(lambda self: Dataset)

    def _serialize(self) -> tuple:
        return (self._element_spec, self._dataset_shape)

    @staticmethod
    def from_value(value) -> DatasetSpec:
        if not isinstance(value, Dataset):
            raise TypeError(f"Expected a Dataset, got {value!r}")
        return DatasetSpec(value.element_spec)


register_type_spec_from_value(Dataset, DatasetSpec.from_value)

Structure = TypeSpec
DatasetStructure = DatasetSpec


def TensorStructure(dtype, shape):  # noqa: N802 - TF's name
    """tf.compat.v1.data.experimental.TensorStructure: `TensorSpec(shape, dtype)`."""
    return TensorSpec(shape, dtype)


def SparseTensorStructure(dtype, shape):  # noqa: N802 - TF's name
    """tf.compat.v1.data.experimental.SparseTensorStructure: `SparseTensorSpec(shape,
    dtype)`."""
    return SparseTensorSpec(shape, dtype)


def RaggedTensorStructure(dtype, shape, ragged_rank):  # noqa: N802 - TF's name
    """tf.compat.v1.data.experimental.RaggedTensorStructure: `RaggedTensorSpec(shape,
    dtype, ragged_rank)`."""
    return RaggedTensorSpec(shape, dtype, ragged_rank)


def TensorArrayStructure(dtype, element_shape, dynamic_size, infer_shape):  # noqa: N802
    """tf.compat.v1.data.experimental.TensorArrayStructure: `TensorArraySpec(...)`."""
    return TensorArraySpec(element_shape, dtype, dynamic_size, infer_shape)


def get_structure(dataset_or_iterator):
    """The element_spec of a dataset or iterator.

    Raises:
      TypeError: anything else (TF's message).
    """
    if isinstance(dataset_or_iterator, Dataset):
        return dataset_or_iterator.element_spec
    if isinstance(dataset_or_iterator, Iterator):
        return element_spec_of(dataset_or_iterator._structure)
    raise TypeError(
        "Invalid `dataset_or_iterator`. `dataset_or_iterator` must be a `tf.data.Dataset` "
        f"or tf.data.Iterator object, but got {type(dataset_or_iterator)}."
    )


class NumpyIterator:
    """`tf.data.NumpyIterator`: a dataset's elements as NumPy values, in eager mode.

    Raises (at construction):
      RuntimeError: always here, as TF in a graph (no eager mode in asyncflow: iterate
        with `make_one_shot_iterator().get_next()` and `Session.run`).
    """

    def __init__(self, dataset):
        del dataset
        raise RuntimeError(
            "`tf.data.Dataset` only supports Python-style iteration in eager mode or within "
            "tf.function."
        )
