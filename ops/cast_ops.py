"""Cast: registration, kernel, constant folder, gradient and the `tf.cast` builders.

Split out of `math_ops`, which imports this module (registering Cast) and re-exports
`cast`, `to_float`, `to_double`, `to_int32` and `to_int64`, so `math_ops.cast` and
`tf.cast` are unchanged.  Its helpers come from `math_helpers`.

Invariants:
- Floats cast to integers truncate toward zero and complex to real keeps the real part,
  as TF's Cast does; casts to or from string, and the narrow-type casts TF's CPU kernel
  lacks (`_cast_supported`), raise UnimplementedError at run time.
- The constant folder computes exactly what the kernel would, so shape functions can
  read cast shape tensors (`tf.cast(tf.shape(x), tf.float32)`) at build time.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_helpers import _builder_scope, _quiet, _unary_shape
from asyncflow.registry import ANY, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["cast", "to_float", "to_double", "to_int32", "to_int64"]


# -- Cast ------------------------------------------------------------------------------------


def _cast_value(xp, x, src: dtypes.DType, dst: dtypes.DType):
    x = xp.asarray(x)
    if src in _INT4 or dst in _INT4:
        return _cast_int4(xp, x, dst)
    if src.is_complex and not dst.is_complex:
        x = xp.real(x)  # TF keeps the real part
    # astype truncates floats toward zero (C's conversion), as TF's Cast does.
    out = x.astype(dst.as_numpy_dtype)
    if src.is_floating and dst in (dtypes.uint32, dtypes.uint64) and out.size:
        # +inf: TF's x86 conversion gives the top bit (as for NaN), NumPy's gives 0.
        top = dst.as_numpy_dtype(1 << (dst.size * 8 - 1))
        out = xp.where(xp.isposinf(x), top, out)
    return out


# TF 2.21's CPU Cast for the narrow types (recorded): the two OCP float8s convert from
# the wide floats and each other and to every wide type; int4/uint4 convert only to and
# from integers; the fnuz float8s, float4_e2m1fn and int2/uint2 do not convert at all.
_F8 = frozenset((dtypes.float8_e5m2, dtypes.float8_e4m3fn))
_INT4 = frozenset((dtypes.int4, dtypes.uint4))
_NO_CAST = frozenset(
    (dtypes.float8_e4m3fnuz, dtypes.float8_e5m2fnuz, dtypes.float8_e4m3b11fnuz,
     dtypes.float4_e2m1fn, dtypes.int2, dtypes.uint2)
)  # fmt: skip
_WIDE_FLOATS = frozenset((dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))


def _cast_int4(xp, x, dst: dtypes.DType):
    # ml_dtypes' 4-bit integers refuse some casts (int4 -> uint4) and do not wrap; TF
    # keeps the low bits, as C's conversion to a narrower integer does.
    wide = x.astype(np.int64)
    if dst not in _INT4:
        return wide.astype(dst.as_numpy_dtype)
    low = wide & 0xF
    if dst == dtypes.int4:
        low = xp.where(low >= 8, low - 16, low)
    return low.astype(np.int8).astype(dst.as_numpy_dtype)


def _cast_supported(src: dtypes.DType, dst: dtypes.DType) -> bool:
    if src == dst:
        return True
    if dtypes.string in (src, dst) or src in _NO_CAST or dst in _NO_CAST:
        return False
    if dst in _F8 and src not in _WIDE_FLOATS | _F8:
        return False
    if (src in _INT4 or dst in _INT4) and not (src.is_integer and dst.is_integer):
        return False
    return True


Cast = register_op(
    "Cast",
    inputs=["x: SrcT"],
    outputs=["y: DstT"],
    attrs={"SrcT": ANY, "DstT": ANY, "Truncate": False},
    shape_fn=_unary_shape,
)


@Cast.kernel()
async def _cast(ctx, x):
    src, dst = ctx.attrs["SrcT"], ctx.attrs["DstT"]
    if src == dst:
        return x
    if not _cast_supported(src, dst):
        raise errors.UnimplementedError(
            None, None, f"Cast {src.name} to {dst.name} is not supported"
        )
    return await ctx.device.compute(_quiet, ctx.xp, _cast_value, ctx.xp, x, src, dst)


def _fold_cast(t):
    value = ops.constant_value(t.op.inputs[0])
    if value is None:
        return None
    src, dst = t.op._attr("SrcT"), t.op._attr("DstT")
    if not _cast_supported(src, dst):
        return None
    return _quiet(np, _cast_value, np, value, src, dst)


ops.register_constant_folder("Cast", _fold_cast)


@_ragged.dispatch_unary
def cast(x, dtype, name=None):
    """Casts x to `dtype` (op Cast); a tensor already of that dtype is returned as is.

    Floats cast to integers truncate toward zero; complex to real keeps the real part;
    numbers cast to bool are `x != 0`.  A SparseTensor or IndexedSlices has its values
    cast.

    Raises:
      TypeError: `dtype` is not a dtype.
      UnimplementedError: (at run time) a cast to or from string.
    """
    base = dtypes.as_dtype(dtype).base_dtype
    if isinstance(x, SparseTensor | IndexedSlices):  # TF casts their values
        with _builder_scope(name, "Cast", [x]) as op_name:
            values = cast(x.values, base, name=op_name)
        if isinstance(x, SparseTensor):
            return SparseTensor(x.indices, values, x.dense_shape)
        return IndexedSlices(values, x.indices, x.dense_shape)
    if isinstance(x, ops.Tensor) and x.dtype.base_dtype == base:
        return x
    with _builder_scope(name, "Cast", [x]) as op_name:
        x = ops.convert_to_tensor(x, name="x")
    if x.dtype.base_dtype == base:
        # No op takes the scope's name, but TF's name_scope took it: the next cast is
        # "Cast_1" (its Const "Cast_1/x").
        x.graph.unique_name(op_name)
        return x
    return ops.apply_op("Cast", [x], {"DstT": base}, name=op_name).outputs[0]


@_dispatch.add_dispatch_support
def to_float(x, name="ToFloat"):
    """Casts x to float32."""
    return cast(x, dtypes.float32, name=name)


@_dispatch.add_dispatch_support
def to_double(x, name="ToDouble"):
    """Casts x to float64."""
    return cast(x, dtypes.float64, name=name)


@_dispatch.add_dispatch_support
def to_int32(x, name="ToInt32"):
    """Casts x to int32."""
    return cast(x, dtypes.int32, name=name)


@_dispatch.add_dispatch_support
def to_int64(x, name="ToInt64"):
    """Casts x to int64."""
    return cast(x, dtypes.int64, name=name)


@Cast.gradient
def _cast_grad(op, grad):
    src, dst = op._attr("SrcT"), op._attr("DstT")
    if _g.is_trainable(src) and _g.is_trainable(dst):
        return [_g.cast(grad, src)]
    return [None]
