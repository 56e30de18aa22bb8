"""The structure of a dataset's elements: nested tuples/dicts of components, each with
a dtype and a static shape (shared by datasets and their iterators)."""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape

__all__ = ["_DatasetSpec", "_Spec", "_flat", "_pack"]


class _Spec:
    """One component's dtype and static shape."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype = dtypes.as_dtype(dtype).base_dtype
        self.shape = tensor_shape.as_shape(shape)

    def __repr__(self) -> str:
        return f"_Spec({self.dtype.name}, {self.shape})"


class _DatasetSpec(_Spec):
    """A component that is itself a dataset (a window): its handle is a 0-d string
    tensor, as every dataset's here; `structure` is its elements' structure."""

    __slots__ = ("structure",)

    def __init__(self, structure):
        super().__init__(dtypes.string, [])
        self.structure = structure

    def __repr__(self) -> str:
        return f"_DatasetSpec({self.structure!r})"


def _flat(value) -> list:
    return nest.flatten(value) if isinstance(value, (tuple, dict)) else [value]


def _pack(structure, flat):
    if isinstance(structure, (tuple, dict)):
        return nest.pack_sequence_as(structure, flat)
    return flat[0]
