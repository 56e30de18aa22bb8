"""The structure of a dataset's elements: nested tuples/dicts of components, each with
a dtype and a static shape (shared by datasets and their iterators)."""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape

__all__ = [
    "_DatasetSpec",
    "_ExtensionSpec",
    "_RaggedSpec",
    "_SparseSpec",
    "_Spec",
    "_component_attrs",
    "_flat",
    "_from_components",
    "_pack",
    "_respec",
    "_to_components",
]


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


class _SparseSpec(_Spec):
    """A SparseTensor component: `dtype` its values' dtype, `shape` its dense shape.
    Its op-level component is a 0-d string handle (ops/dataset_more.py)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"_SparseSpec({self.dtype.name}, {self.shape})"


class _RaggedSpec(_Spec):
    """A RaggedTensor component: `shape` its static shape, `ragged_rank` its ragged
    dimensions (1 to rank - 1), `row_splits_dtype` int32 or int64.  Its op-level
    component is a 0-d string handle (ops/dataset_ragged.py)."""

    __slots__ = ("ragged_rank", "row_splits_dtype")

    def __init__(self, dtype, shape, ragged_rank, row_splits_dtype=dtypes.int64):
        super().__init__(dtype, shape)
        self.ragged_rank = int(ragged_rank)
        self.row_splits_dtype = dtypes.as_dtype(row_splits_dtype)

    def __repr__(self) -> str:
        return (
            f"_RaggedSpec({self.dtype.name}, {self.shape}, {self.ragged_rank}, "
            f"{self.row_splits_dtype.name})"
        )


class _ExtensionSpec(_Spec):
    """An ExtensionType component: `type_spec` its Spec, `like` a value of it (the
    structure its tensors are rebuilt in).  Its op-level component is a 0-d variant
    packing those tensors (CompositeTensorVariantFromComponents, as TF's)."""

    __slots__ = ("type_spec", "like")

    def __init__(self, like):
        super().__init__(dtypes.variant, [])
        self.like = like
        self.type_spec = like._type_spec

    def __repr__(self) -> str:
        return f"_ExtensionSpec({self.type_spec!r})"


def _respec(spec: _Spec, shape) -> _Spec:
    """`spec` with another static shape, of the same kind (dense or sparse)."""
    return (_SparseSpec if isinstance(spec, _SparseSpec) else _Spec)(spec.dtype, shape)


def _component_attrs(structure) -> dict:
    """output_types / output_shapes of the ops carrying elements of `structure`."""
    specs = _flat(structure)
    handle = [isinstance(s, (_SparseSpec, _DatasetSpec, _RaggedSpec)) for s in specs]
    scalar = tensor_shape.TensorShape([])
    return {
        "output_types": [dtypes.string if h else s.dtype for s, h in zip(specs, handle)],
        "output_shapes": [scalar if h else s.shape for s, h in zip(specs, handle)],
    }


def _to_components(flat: list) -> list:
    """Element values (tensors, SparseTensors) as the tensors ops carry."""
    from asyncflow import graph as ops
    from asyncflow.ragged import RaggedTensor
    from asyncflow.sparse_tensor import SparseTensor

    out = []
    for v in flat:
        if hasattr(v, "_tf_extension_type_fields"):
            parts = v._cf_parts()
            v = ops.apply_op(
                "CompositeTensorVariantFromComponents",
                [parts],
                {"metadata": b"", "Tcomponents": [p.dtype for p in parts]},
                name="CompositeTensorVariantFromComponents",
            ).outputs[0]
        elif isinstance(v, RaggedTensor):
            splits = v.nested_row_splits
            v = ops.apply_op(
                "_RaggedToDatasetHandle",
                [v.flat_values, list(splits)],
                {"Tsplits": splits[0].dtype, "ragged_rank": len(splits)},
                name="RaggedToHandle",
            ).outputs[0]
        elif isinstance(v, SparseTensor):
            v = ops.apply_op(
                "_SparseToDatasetHandle",
                [v.indices, v.values, v.dense_shape],
                {"T": v.dtype},
                name="SparseToHandle",
            ).outputs[0]
        out.append(v)
    return out


def _from_components(structure, tensors: list):
    """`structure` packed with the tensors ops give, sparse components as SparseTensors."""
    from asyncflow import graph as ops
    from asyncflow.ragged import RaggedTensor
    from asyncflow.sparse_tensor import SparseTensor

    specs = _flat(structure)
    out = []
    for s, t in zip(specs, tensors):
        if isinstance(s, _ExtensionSpec):
            like = s.like._cf_parts()
            parts = ops.apply_op(
                "CompositeTensorVariantToComponents",
                [t],
                {"metadata": b"", "Tcomponents": [p.dtype for p in like]},
                name="CompositeTensorVariantToComponents",
            ).outputs
            for part, template in zip(parts, like):
                part.set_shape(template.shape)
            t = s.like._cf_rebuild(list(parts))
        elif isinstance(s, _RaggedSpec):
            parts = ops.apply_op(
                "_DatasetHandleToRagged",
                [t],
                {"T": s.dtype, "Tsplits": s.row_splits_dtype, "ragged_rank": s.ragged_rank},
                name="HandleToRagged",
            ).outputs
            if s.shape.ndims is not None:
                parts[0].set_shape([None, *s.shape.as_list()[s.ragged_rank + 1 :]])
            t = parts[0]
            for splits in reversed(parts[1:]):
                t = RaggedTensor(t, splits, internal=True)
        elif isinstance(s, _SparseSpec):
            rank = s.shape.ndims
            parts = ops.apply_op(
                "_DatasetHandleToSparse",
                [t],
                {"T": s.dtype, "rank": -1 if rank is None else rank},
                name="HandleToSparse",
            ).outputs
            t = SparseTensor(*parts)
        out.append(t)
    return _pack(structure, out)
