"""TensorInfo helpers (TF's `saved_model.utils`): TensorInfo is TF's protobuf message."""

from __future__ import annotations

from asyncflow import dtypes, graph_io
from asyncflow import graph as ops
from asyncflow.protos.meta_graph_pb2 import TensorInfo

__all__ = ["build_tensor_info", "build_tensor_info_from_op", "get_tensor_from_tensor_info"]


def build_tensor_info(tensor) -> TensorInfo:
    """The TensorInfo of a Tensor (or Variable: its snapshot), a SparseTensor (its
    components' names: coo_sparse) or another composite tensor (a RaggedTensor...: its
    TypeSpec and its components' TensorInfos, composite_tensor), as TF builds them.

    Raises:
      TypeError: not a Tensor or composite tensor.
    """
    from asyncflow import nest  # (the composites register with nest on import)

    if hasattr(tensor, "_as_graph_element") and not isinstance(tensor, ops.Tensor):
        tensor = tensor._as_graph_element()
    if nest.is_composite(tensor):
        return _composite_info(tensor)
    if not isinstance(tensor, ops.Tensor):
        raise TypeError(f"build_tensor_info expects a Tensor, got {tensor!r}")
    info = TensorInfo(name=tensor.name, dtype=tensor.dtype.base_dtype.as_datatype_enum)
    graph_io.shape_proto(tensor.shape, info.tensor_shape)
    return info


def _composite_info(value) -> TensorInfo:
    from asyncflow import nest
    from asyncflow.composite_specs import type_spec_from_value
    from asyncflow.saved_model.nested_structure import encode_type_spec as _type_spec
    from asyncflow.sparse_tensor import SparseTensor

    if isinstance(value, SparseTensor):
        info = TensorInfo(dtype=value.dtype.base_dtype.as_datatype_enum)
        graph_io.shape_proto(value.shape, info.tensor_shape)
        info.coo_sparse.values_tensor_name = value.values.name
        info.coo_sparse.indices_tensor_name = value.indices.name
        info.coo_sparse.dense_shape_tensor_name = value.dense_shape.name
        return info
    info = TensorInfo()
    _type_spec(info.composite_tensor.type_spec, type_spec_from_value(value))
    for part in nest.flatten(value, expand_composites=True):
        info.composite_tensor.components.add().CopyFrom(build_tensor_info(part))
    return info


def build_tensor_info_from_op(op) -> TensorInfo:
    """The TensorInfo naming an Operation (TF's init-op signature uses these)."""
    op = op.op if isinstance(op, ops.Tensor) else op
    info = TensorInfo(name=op.name, dtype=0)
    info.tensor_shape.unknown_rank = True
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The Tensor a TensorInfo names in `graph` (default graph), under `import_scope`;
    a coo_sparse's SparseTensor, a composite_tensor's value rebuilt from its components.

    Raises:
      KeyError: the tensor is not in the graph.
      ValueError: a TensorInfo with no encoding (TF's message), or a composite's
        TypeSpec asyncflow cannot read.
    """
    graph = graph or ops.get_default_graph()

    def tensor(name):
        if import_scope:
            name = import_scope.rstrip("/") + "/" + name
        return graph.get_tensor_by_name(name)

    encoding = tensor_info.WhichOneof("encoding")
    if encoding == "name":
        return tensor(tensor_info.name)
    if encoding == "coo_sparse":
        from asyncflow.sparse_tensor import SparseTensor

        coo = tensor_info.coo_sparse
        return SparseTensor(
            tensor(coo.indices_tensor_name),
            tensor(coo.values_tensor_name),
            tensor(coo.dense_shape_tensor_name),
        )
    if encoding == "composite_tensor":
        from asyncflow.saved_model.nested_structure import decode_type_spec as _type_spec
        from asyncflow.tf_function import _component_specs, _from_components

        spec = _type_spec(tensor_info.composite_tensor.type_spec)
        parts = [tensor(c.name) for c in tensor_info.composite_tensor.components]
        if len(parts) != len(_component_specs(spec)):
            raise ValueError(f"a TensorInfo of {spec} names {len(parts)} components")
        return _from_components(spec, parts)
    raise ValueError(
        f"Invalid TensorInfo.encoding: {encoding}. Expected `coo_sparse`, "
        "`composite_tensor`, or `name` for a dense tensor."
    )


def tensor_info_dtype(tensor_info) -> dtypes.DType:
    return dtypes.as_dtype(tensor_info.dtype)
