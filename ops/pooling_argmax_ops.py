"""MaxPoolWithArgmax and MaxPoolGradWithArgmax (TF's `tf.nn.max_pool_with_argmax`).

The argmax of each output is the flattened position of the first maximum of its
window (scanning rows, then columns, as TF's CPU kernel): ((b * H + y) * W + x) * C + c
with `include_batch_in_index`, else (y * W + x) * C + c.  NHWC only, as TF.  The
gradient scatters each output's gradient back to its argmax position.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.pooling_ops import (
    _POOL_FLOATS,
    _argmax_offsets,
    _check_pool_attrs,
    _input4,
    _Pool,
    _pool_shape_of,
    _run_checks,
)
from asyncflow.registry import (
    INDEX,
    REAL,
    REQUIRED,
    NotDifferentiable,
    TypeConstraint,
    named_outputs,
    register_op,
)

__all__ = ["max_pool_with_argmax"]

_TARGMAX = TypeConstraint(["int32", "int64"], "int64")
_ATTRS = {
    "ksize": REQUIRED,
    "strides": REQUIRED,
    "padding": REQUIRED,
    "include_batch_in_index": False,
}


def _attrs(op) -> dict:
    a = {k: op._attr(k) for k in ("ksize", "strides", "padding")}
    a["data_format"] = "NHWC"
    return a


def _shape(op):
    attrs = _attrs(op)
    for v in attrs["ksize"]:
        if not 0 < v < 2**31:
            raise ValueError(f"ksize must be a positive int32 value, got:{v}")
    _check_pool_attrs(attrs)
    out = _pool_shape_of(op.inputs[0].shape, attrs)[0]
    return [out, out]


MaxPoolWithArgmax = register_op(
    "MaxPoolWithArgmax",
    inputs=["input: T"],
    outputs=["output: T", "argmax: Targmax"],
    attrs={"T": REAL, "Targmax": _TARGMAX, **_ATTRS},
    shape_fn=_shape,
)


def _flat_argmax(p: _Pool, arg, include_batch: bool):
    n, oh, ow, c = p.out_nhwc()
    lo_h, _, lo_w, _ = p.pad
    i, j = np.divmod(arg.astype(np.int64), p.kw)
    y = np.arange(oh, dtype=np.int64)[None, :, None, None] * p.sh + i - lo_h
    x = np.arange(ow, dtype=np.int64)[None, None, :, None] * p.sw + j - lo_w
    ch = np.arange(c, dtype=np.int64)[None, None, None, :]
    flat = (y * p.w + x) * p.c + ch
    if include_batch:
        flat = flat + np.arange(n, dtype=np.int64)[:, None, None, None] * (p.h * p.w * p.c)
    return flat


def _attrs_of_ctx(ctx) -> dict:
    return {
        "ksize": ctx.attrs["ksize"],
        "strides": ctx.attrs["strides"],
        "padding": ctx.attrs["padding"],
        "data_format": "NHWC",
        "explicit_paddings": [],
    }


# CPU kernels (NumPy on host arrays): a GPU graph places these on the CPU, with copies.
@MaxPoolWithArgmax.kernel("CPU")
async def _max_pool_with_argmax(ctx, x):
    x = _input4(np, np.asarray(x))
    attrs = _attrs_of_ctx(ctx)
    if _run_checks(attrs, depthwise_ok=False) != 1:
        raise errors.UnimplementedError(None, None, "Depthwise max pooling with argmax")
    p = _Pool(attrs, x.shape)

    def compute():
        arg, best = _argmax_offsets(np, p, x)
        flat = _flat_argmax(p, arg, bool(ctx.attrs["include_batch_in_index"]))
        return best.astype(x.dtype, copy=False), flat.astype(ctx.attrs["Targmax"].as_numpy_dtype)

    return await ctx.compute(compute)


MaxPoolGradWithArgmax = register_op(
    "MaxPoolGradWithArgmax",
    inputs=["input: T", "grad: T", "argmax: Targmax"],
    outputs=["output: T"],
    attrs={"T": REAL, "Targmax": INDEX, **_ATTRS},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("MaxPoolGradWithArgmax")


@MaxPoolGradWithArgmax.kernel("CPU")
async def _max_pool_grad_with_argmax(ctx, x, grad, argmax):
    x, grad, argmax = np.asarray(x), np.asarray(grad), np.asarray(argmax)
    if grad.shape != argmax.shape:
        raise errors.InvalidArgumentError(
            None, None, "Expected grad shape to be the same as argmax shape"
        )
    per_image = int(np.prod(x.shape[1:]))
    flat = argmax.astype(np.int64)
    if not ctx.attrs["include_batch_in_index"]:
        flat = flat + np.arange(x.shape[0], dtype=np.int64).reshape(-1, 1, 1, 1) * per_image
    if flat.size and (flat.min() < 0 or flat.max() >= x.size):
        raise errors.InvalidArgumentError(
            None, None, f"Invalid argmax position: outside [0, {x.size})"
        )
    out = np.zeros(x.size, dtype=np.float64)
    np.add.at(out, flat.reshape(-1), grad.reshape(-1).astype(np.float64))
    return out.reshape(x.shape).astype(x.dtype)


@MaxPoolWithArgmax.gradient
def _max_pool_with_argmax_grad(op, grad, unused_argmax_grad):
    attrs = {k: op._attr(k) for k in ("ksize", "strides", "padding", "include_batch_in_index")}
    attrs["Targmax"] = op.outputs[1].dtype
    return [
        ops.apply_op("MaxPoolGradWithArgmax", [op.inputs[0], grad, op.outputs[1]], attrs).outputs[
            0
        ]
    ]


def max_pool_with_argmax(
    input,  # noqa: A002 - TF's name
    ksize,
    strides,
    padding,
    data_format="NHWC",
    Targmax=None,  # noqa: N803 - TF1's name
    name=None,
    output_dtype=None,
    include_batch_in_index=False,
):
    """(max pool, argmax) of an NHWC `input` (`tf.nn.max_pool_with_argmax`).

    Raises:
      ValueError: data_format other than NHWC, or bad ksize/strides/padding.
    """
    if data_format != "NHWC":
        raise ValueError("Data formats other than 'NHWC' are not yet supported")
    from asyncflow.ops.conv_ops import four

    dtype = output_dtype if output_dtype is not None else Targmax
    attrs = {
        "ksize": four(ksize, "ksize", "NHWC"),
        "strides": four(strides, "strides", "NHWC"),
        "padding": padding,
        "include_batch_in_index": include_batch_in_index,
        "Targmax": dtypes.as_dtype(dtype or dtypes.int64),
    }
    return named_outputs(ops.apply_op("MaxPoolWithArgmax", [input], attrs, name=name))


del tensor_shape, _POOL_FLOATS
