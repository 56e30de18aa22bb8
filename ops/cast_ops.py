"""Cast: registration, kernel, constant folder, gradient and the `tf.cast` builders.

Split out of `math_ops`, which imports this module (registering Cast) and re-exports
`cast`, `to_float`, `to_double`, `to_int32` and `to_int64`, so `math_ops.cast` and
`tf.cast` are unchanged.  Its helpers come from `math_helpers`.

Invariants:
- Floats cast to integers truncate toward zero and complex to real keeps the real part,
  as TF's Cast does; casts to or from string raise UnimplementedError at run time.
- The constant folder computes exactly what the kernel would, so shape functions can
  read cast shape tensors (`tf.cast(tf.shape(x), tf.float32)`) at build time.
"""

from __future__ import annotations

import numpy as np

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
    if src.is_complex and not dst.is_complex:
        x = xp.real(x)  # TF keeps the real part
    # astype truncates floats toward zero (C's conversion), as TF's Cast does.
    out = x.astype(dst.as_numpy_dtype)
    if src.is_floating and dst in (dtypes.uint32, dtypes.uint64) and out.size:
        # +inf: TF's x86 conversion gives the top bit (as for NaN), NumPy's gives 0.
        top = dst.as_numpy_dtype(1 << (dst.size * 8 - 1))
        out = xp.where(xp.isposinf(x), top, out)
    return out


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
    if dtypes.string in (src, dst):
        raise errors.UnimplementedError(
            None, None, f"Cast {src.name} to {dst.name} is not supported"
        )
    return await ctx.device.compute(_quiet, ctx.xp, _cast_value, ctx.xp, x, src, dst)


def _fold_cast(t):
    value = ops.constant_value(t.op.inputs[0])
    if value is None:
        return None
    src, dst = t.op._attr("SrcT"), t.op._attr("DstT")
    if dtypes.string in (src, dst) and src != dst:
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


def to_float(x, name="ToFloat"):
    """Casts x to float32."""
    return cast(x, dtypes.float32, name=name)


def to_double(x, name="ToDouble"):
    """Casts x to float64."""
    return cast(x, dtypes.float64, name=name)


def to_int32(x, name="ToInt32"):
    """Casts x to int32."""
    return cast(x, dtypes.int32, name=name)


def to_int64(x, name="ToInt64"):
    """Casts x to int64."""
    return cast(x, dtypes.int64, name=name)


@Cast.gradient
def _cast_grad(op, grad):
    src, dst = op._attr("SrcT"), op._attr("DstT")
    if _g.is_trainable(src) and _g.is_trainable(dst):
        return [_g.cast(grad, src)]
    return [None]
