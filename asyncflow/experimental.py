"""`tf.experimental` (TF 2.21's compat.v1): the narrow data types (the same DType objects
as `tf.dtypes.experimental`), extension types and their dispatch, Optional, and the
runtime switches TF keeps here.
"""

import types

from asyncflow import dispatch as _dispatch
from asyncflow import extension_type as _extension_type
from asyncflow.data.optional import Optional
from asyncflow.deprecation import enable_strict_mode
from asyncflow.dtypes import (
    float4_e2m1fn,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    int2,
    int4,
    uint2,
    uint4,
)
from asyncflow.dynamic_ragged_shape import DynamicRaggedShape
from asyncflow.experimental_runtime import (
    async_clear_error,
    async_scope,
    function_executor_type,
    output_all_intermediates,
    register_filesystem_plugin,
)
from asyncflow.extension_type import (
    BatchableExtensionType,
    ExtensionType,
    ExtensionTypeBatchEncoder,
    ExtensionTypeSpec,
)
from asyncflow.row_partition import RowPartition
from asyncflow.structured_tensor import StructuredTensor

extension_type = types.ModuleType(
    "extension_type", "`tf.experimental.extension_type`: as_dict, an ExtensionType's fields."
)
extension_type.as_dict = _extension_type.as_dict


def _dispatching_apis(kind: str) -> set:
    """The APIs of TF's `kind` element-wise list that asyncflow has, with dispatch."""
    import asyncflow

    names = {
        "unary": _dispatch.UNARY_ELEMENTWISE_APIS,
        "binary": _dispatch.BINARY_ELEMENTWISE_APIS,
        "assert": _dispatch.BINARY_ASSERT_APIS,
    }[kind]
    found = set()
    for name in names:
        obj = asyncflow
        for part in name.split("."):
            obj = getattr(obj, part, None)
        key = _dispatch.dispatch_key(obj)
        if key is not None:
            found.add(key)
    return found


def dispatch_for_api(api, *signatures):
    """`tf.experimental.dispatch_for_api`: see asyncflow/dispatch.py."""
    return _dispatch.dispatch_for_api(api, *signatures)


def dispatch_for_unary_elementwise_apis(x_type):
    """`tf.experimental.dispatch_for_unary_elementwise_apis(x_type)`: a decorator making
    `handler(api_func, x)` take every unary element-wise API's calls on an `x_type` value
    (called in the API's name scope when a name is given).

    Raises:
      ValueError: (when decorating) a handler is already registered for x_type.
    """
    return _dispatch._elementwise_decorator(
        "unary", "unary elementwise", (x_type,), _dispatching_apis
    )


def dispatch_for_binary_elementwise_apis(x_type, y_type):
    """`tf.experimental.dispatch_for_binary_elementwise_apis(x_type, y_type)`:
    `handler(api_func, x, y)` takes the binary element-wise APIs' calls on such values.

    Raises:
      ValueError: (when decorating) a handler is already registered for the two types.
    """
    return _dispatch._elementwise_decorator(
        "binary", "binary elementwise", (x_type, y_type), _dispatching_apis
    )


def dispatch_for_binary_elementwise_assert_apis(x_type, y_type):
    """`tf.experimental.dispatch_for_binary_elementwise_assert_apis(x_type, y_type)`:
    `handler(assert_func, x, y)` takes tf.assert_equal and its kin on such values.

    Raises:
      ValueError: (when decorating) a handler is already registered for the two types.
    """
    return _dispatch._elementwise_decorator(
        "assert", "binary elementwise assert", (x_type, y_type), _dispatching_apis
    )


def unregister_dispatch_for(dispatch_target):
    """`tf.experimental.unregister_dispatch_for`.

    Raises:
      ValueError: `dispatch_target` was not registered by a dispatch_for_* decorator.
    """
    _dispatch.unregister(dispatch_target)


__all__ = [
    "BatchableExtensionType", "DynamicRaggedShape", "ExtensionType",
    "ExtensionTypeBatchEncoder", "ExtensionTypeSpec", "Optional", "RowPartition",
    "StructuredTensor",
    "async_clear_error", "async_scope", "enable_strict_mode",
    "function_executor_type", "output_all_intermediates", "register_filesystem_plugin",
    "extension_type", "dispatch_for_api",
    "dispatch_for_binary_elementwise_apis", "dispatch_for_binary_elementwise_assert_apis",
    "dispatch_for_unary_elementwise_apis", "unregister_dispatch_for",
    "float4_e2m1fn", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "int2", "int4", "uint2", "uint4",
]  # fmt: skip
