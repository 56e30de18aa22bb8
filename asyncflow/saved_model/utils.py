"""TensorInfo helpers (TF's `saved_model.utils`): TensorInfo is TF's protobuf message."""

from __future__ import annotations

from asyncflow import dtypes, graph_io
from asyncflow import graph as ops
from asyncflow.protos.meta_graph_pb2 import TensorInfo

__all__ = ["build_tensor_info", "build_tensor_info_from_op", "get_tensor_from_tensor_info"]


def build_tensor_info(tensor) -> TensorInfo:
    """The TensorInfo of a Tensor (or Variable: its snapshot).

    Raises:
      TypeError: not a Tensor.
    """
    if hasattr(tensor, "_as_graph_element") and not isinstance(tensor, ops.Tensor):
        tensor = tensor._as_graph_element()
    if not isinstance(tensor, ops.Tensor):
        raise TypeError(f"build_tensor_info expects a Tensor, got {tensor!r}")
    info = TensorInfo(name=tensor.name, dtype=tensor.dtype.base_dtype.as_datatype_enum)
    graph_io.shape_proto(tensor.shape, info.tensor_shape)
    return info


def build_tensor_info_from_op(op) -> TensorInfo:
    """The TensorInfo naming an Operation (TF's init-op signature uses these)."""
    op = op.op if isinstance(op, ops.Tensor) else op
    info = TensorInfo(name=op.name, dtype=0)
    info.tensor_shape.unknown_rank = True
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The Tensor a TensorInfo names in `graph` (default graph), under `import_scope`.

    Raises:
      KeyError: the tensor is not in the graph.
    """
    graph = graph or ops.get_default_graph()
    name = tensor_info.name
    if import_scope:
        name = import_scope.rstrip("/") + "/" + name
    return graph.get_tensor_by_name(name)


def tensor_info_dtype(tensor_info) -> dtypes.DType:
    return dtypes.as_dtype(tensor_info.dtype)
