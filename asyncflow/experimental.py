"""`tf.experimental` (TF 2.21's compat.v1): only its narrow data types here, the same
DType objects as `tf.dtypes.experimental` (float8_*, float4_e2m1fn, int4/uint4, int2/uint2).
"""

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

__all__ = [
    "float4_e2m1fn", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "int2", "int4", "uint2", "uint4",
]  # fmt: skip
