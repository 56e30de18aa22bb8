"""asyncflow: TensorFlow's dataflow system as an asyncio-native runtime (tf.compat.v1 API).

`import asyncflow as tf` gives the TF1 names; `await sess.arun(...)` is the async twin
of `sess.run(...)`.
"""

from asyncflow import errors
from asyncflow.config import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
)
from asyncflow.device_spec import DeviceSpec
from asyncflow.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool,  # noqa: A004 - TF's name
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from asyncflow.graph import (
    Graph,
    GraphKeys,
    Operation,
    Tensor,
    add_to_collection,
    add_to_collections,
    colocate_with,
    control_dependencies,
    convert_to_tensor,
    device,
    get_collection,
    get_collection_ref,
    get_default_graph,
    is_tensor,
    name_scope,
    register_tensor_conversion_function,
    reset_default_graph,
)
from asyncflow.registry import NotDifferentiable, RegisterGradient
from asyncflow.session import InteractiveSession, Session, get_default_session
from asyncflow.tensor_shape import Dimension, TensorShape


def _reexport(module) -> None:
    """Copy a family's public builders (its `__all__`) into the top-level namespace."""
    for name in module.__all__:
        globals()[name] = getattr(module, name)


from asyncflow import ops  # noqa: E402 - registers every op family
from asyncflow.ops import array_ops as _array_ops  # noqa: E402
from asyncflow.ops import control_flow_ops as _control_flow_ops  # noqa: E402

for _m in (_array_ops, _control_flow_ops):
    if hasattr(_m, "__all__"):
        _reexport(_m)

convert_to_tensor_or_indexed_slices = convert_to_tensor
