"""TensorInfo helpers (TF's `saved_model.utils`).

A TensorInfo is a `Message` (a dict with attribute access):
{"name": "x:0", "dtype": <TF DataType enum, 1 for float32>, "tensor_shape": {"dim":
[{"size": n}, ...]} or {"unknown_rank": true}}.
"""

from __future__ import annotations

from asyncflow import dtypes, graph_io
from asyncflow import graph as ops
from asyncflow.meta_graph import Message

__all__ = ["build_tensor_info", "get_tensor_from_tensor_info"]


def build_tensor_info(tensor) -> Message:
    """The TensorInfo of a Tensor (or Variable: its snapshot).

    Raises:
      TypeError: not a Tensor.
    """
    if hasattr(tensor, "_as_graph_element") and not isinstance(tensor, ops.Tensor):
        tensor = tensor._as_graph_element()
    if not isinstance(tensor, ops.Tensor):
        raise TypeError(f"build_tensor_info expects a Tensor, got {tensor!r}")
    return Message(
        name=tensor.name,
        dtype=tensor.dtype.base_dtype.as_datatype_enum,
        tensor_shape=graph_io._shape_to_json(tensor.shape),
    )


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The Tensor a TensorInfo names in `graph` (default graph), under `import_scope`.

    Raises:
      KeyError: the tensor is not in the graph.
    """
    graph = graph or ops.get_default_graph()
    name = tensor_info["name"]
    if import_scope:
        name = import_scope.rstrip("/") + "/" + name
    return graph.get_tensor_by_name(name)


def tensor_info_dtype(tensor_info) -> dtypes.DType:
    return dtypes.as_dtype(tensor_info["dtype"])
