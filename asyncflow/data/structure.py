"""The structure of a dataset's elements: nested tuples/dicts of components, each with
a dtype and a static shape (shared by datasets and their iterators)."""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape

__all__ = ["_Spec", "_flat", "_pack"]


class _Spec:
    """One component's dtype and static shape."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype = dtypes.as_dtype(dtype).base_dtype
        self.shape = tensor_shape.as_shape(shape)

    def __repr__(self) -> str:
        return f"_Spec({self.dtype.name}, {self.shape})"


def _flat(value) -> list:
    return nest.flatten(value) if isinstance(value, (tuple, dict)) else [value]


def _pack(structure, flat):
    if isinstance(structure, (tuple, dict)):
        return nest.pack_sequence_as(structure, flat)
    return flat[0]
