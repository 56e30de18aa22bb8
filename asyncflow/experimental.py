"""`tf.experimental` (TF 2.21's compat.v1): the narrow data types (the same DType objects
as `tf.dtypes.experimental`), extension types and their dispatch, Optional, and the
runtime switches TF keeps here.
"""

import types

from asyncflow import extension_type as _extension_type
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
from asyncflow.extension_type import (
    BatchableExtensionType,
    ExtensionType,
    ExtensionTypeBatchEncoder,
    ExtensionTypeSpec,
)

extension_type = types.ModuleType(
    "extension_type", "`tf.experimental.extension_type`: as_dict, an ExtensionType's fields."
)
extension_type.as_dict = _extension_type.as_dict

__all__ = [
    "BatchableExtensionType", "ExtensionType", "ExtensionTypeBatchEncoder",
    "ExtensionTypeSpec", "extension_type",
    "float4_e2m1fn", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "int2", "int4", "uint2", "uint4",
]  # fmt: skip
