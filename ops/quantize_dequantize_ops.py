"""The other spellings of QuantizeAndDequantizeV2 (ops/fake_quant_ops.py): the v1 op with
its range as attrs (removed from GraphDef version 22 on; old graphs still import), V3
with `num_bits` an input, V4 (what TF2's tf.quantization.quantize_and_dequantize_v2
writes) and V4Grad, its straight-through gradient; and TF1's
tf.quantization.quantize_and_dequantize / quantize_and_dequantize_v2 builders.

V4Grad passes the incoming gradient where the input lies inside [input_min, input_max]
(per channel along `axis`), zero elsewhere; the range's gradients are zeros.  The
gradients are TF 2.21's: straight through for v1, V2 and V3; V4Grad for V4; and for
V4Grad itself TF's rule, which feeds the op's own inputs back through V4Grad.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import fake_quant_ops
from asyncflow.ops.legacy_ops import _alias, _removed_in
from asyncflow.registry import FLOATING, register_op

__all__: list[str] = []


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _v1_inputs(attrs, x):
    x = np.asarray(x)
    return x, np.asarray(attrs["input_min"], x.dtype), np.asarray(attrs["input_max"], x.dtype)


QuantizeAndDequantize = _alias(
    "QuantizeAndDequantize",
    "QuantizeAndDequantizeV2",
    inputs=["input: T"],
    attrs={
        "signed_input": True,
        "num_bits": 8,
        "range_given": False,
        "input_min": 0.0,
        "input_max": 0.0,
        "T": FLOATING,
    },
    fixed={"round_mode": "HALF_TO_EVEN", "narrow_range": False, "axis": -1},
    to_base=_v1_inputs,
)
QuantizeAndDequantize.gradient(lambda op, grad: [grad])
_removed_in(QuantizeAndDequantize, 22, "Replaced by QuantizeAndDequantizeV2")


QuantizeAndDequantizeV3 = register_op(
    "QuantizeAndDequantizeV3",
    inputs=["input: T", "input_min: T", "input_max: T", "num_bits: int32"],
    outputs=["output: T"],
    attrs={
        "signed_input": True,
        "range_given": True,
        "T": FLOATING,
        "narrow_range": False,
        "axis": -1,
    },
    shape_fn=lambda op: fake_quant_ops._qdq_shape(op),
)


@QuantizeAndDequantizeV3.kernel("CPU", host_memory=("num_bits",))
async def _v3_kernel(ctx, x, input_min, input_max, num_bits):
    # (V3 has its own kernel in TF: per-channel given ranges work here, unlike V2's)
    a = ctx.attrs
    x = np.asarray(x)
    bits, signed = int(np.asarray(num_bits)), bool(a["signed_input"])
    if not 0 < bits < (62 if signed else 63):
        raise _invalid(f"num_bits is out of range: {bits} with `signed_input_` {int(signed)}")
    attrs = {**a, "num_bits": bits, "round_mode": "HALF_TO_EVEN"}
    signed, bits, axis, mode = fake_quant_ops._qdq_attrs(attrs, x.ndim)
    lo, hi = np.asarray(input_min, x.dtype), np.asarray(input_max, x.dtype)
    depth = 1 if axis == -1 else x.shape[axis]
    if a["range_given"]:
        want = () if axis == -1 else (depth,)
        for name, v in (("input_min", lo), ("input_max", hi)):
            if v.shape != want:
                raise _invalid(
                    f"{name} must be a scalar." if axis == -1
                    else f"{name} has incorrect size, expected {depth} was {v.size}"
                )  # fmt: skip
    elif x.size == 0:
        return x.copy()
    elif axis == -1:
        lo, hi = x.min(), x.max()
    else:
        moved = np.moveaxis(x, axis, -1).reshape(-1, depth)
        lo, hi = moved.min(axis=0), moved.max(axis=0)
    if axis != -1:
        shape = [1] * x.ndim
        shape[axis] = depth
        lo, hi = lo.reshape(shape), hi.reshape(shape)
    args = (signed, bits, bool(a["narrow_range"]), mode, bool(a["range_given"]))
    return await ctx.compute(fake_quant_ops._qdq, x, lo, hi, *args)


QuantizeAndDequantizeV3.gradient(lambda op, grad: [grad, None, None, None])

QuantizeAndDequantizeV4 = _alias("QuantizeAndDequantizeV4", "QuantizeAndDequantizeV2")


@QuantizeAndDequantizeV4.gradient
def _v4_grad(op, grad):
    return list(
        ops.apply_op(
            "QuantizeAndDequantizeV4Grad",
            [grad, op.inputs[0], op.inputs[1], op.inputs[2]],
            {"axis": op._attr("axis")},
        ).outputs
    )


QuantizeAndDequantizeV4Grad = register_op(
    "QuantizeAndDequantizeV4Grad",
    inputs=["gradients: T", "input: T", "input_min: T", "input_max: T"],
    outputs=["input_backprop: T", "input_min_backprop: T", "input_max_backprop: T"],
    attrs={"T": FLOATING, "axis": -1},
    shape_fn=lambda op: _v4_grad_shape(op),
)


def _v4_grad_shape(op):
    rank = 0 if op._attr("axis") == -1 else 1
    lo = op.inputs[2].shape.with_rank(rank)
    hi = op.inputs[3].shape.with_rank(rank)
    return [op.inputs[0].shape.merge_with(op.inputs[1].shape), lo, hi]


@QuantizeAndDequantizeV4Grad.kernel("CPU")
async def _v4_grad_kernel(ctx, gradients, x, input_min, input_max):
    grad, x = np.asarray(gradients), np.asarray(x)
    lo, hi = np.asarray(input_min, x.dtype), np.asarray(input_max, x.dtype)
    axis = int(ctx.attrs["axis"])
    if grad.shape != x.shape:
        raise _invalid("gradient and input must be the same size")
    if axis < -1 or axis >= max(x.ndim, 1) and axis != -1:
        raise _invalid(f"Axis must be less than input dimension({x.ndim}), got {axis}")
    if axis == -1:
        for name, v in (("input_min", lo), ("input_max", hi)):
            if v.ndim != 0:
                raise _invalid(f"{name} must be a scalar.")
        inside = (x >= lo) & (x <= hi)
    else:
        depth = x.shape[axis]
        for name, v in (("input_min", lo), ("input_max", hi)):
            if v.shape != (depth,):
                raise _invalid(
                    f"{name} has incorrect size, expected {depth} was {v.size}"
                    if v.ndim == 1
                    else f"{name} must be rank 1"
                )
        shape = [1] * x.ndim
        shape[axis] = depth
        inside = (x >= lo.reshape(shape)) & (x <= hi.reshape(shape))
    backprop = np.where(inside, grad, np.zeros((), grad.dtype)).astype(grad.dtype)
    return backprop, np.zeros_like(lo), np.zeros_like(hi)


@QuantizeAndDequantizeV4Grad.gradient
def _v4_grad_grad(op, grad):
    # TF's rule: V4's gradient applied to this op, so V4Grad(grad, gradients, input,
    # input_min) -- three gradients for four inputs, which tf.gradients refuses there too.
    return _v4_grad(op, grad)


# -- TF1's builders -------------------------------------------------------------------------------


def _qdq_builder(op_type: str, fn_name: str):
    def builder(
        input,  # noqa: A002 - TF's name
        input_min,
        input_max,
        signed_input=True,
        num_bits=8,
        range_given=False,
        round_mode="HALF_TO_EVEN",
        name=None,
        narrow_range=False,
        axis=None,
    ):
        with ops.name_scope(name, op_type, [input]) as scope:
            x = ops.convert_to_tensor(input, name="input")
            if axis is None:
                axis = -1
            elif axis < 0:
                if x.shape.ndims is None:
                    raise ValueError("input should have known rank to use negative axis.")
                axis %= x.shape.ndims
            attrs = {
                "signed_input": bool(signed_input),
                "num_bits": int(num_bits),
                "range_given": bool(range_given),
                "round_mode": round_mode,
                "narrow_range": bool(narrow_range),
                "axis": int(axis),
            }
            lo = ops.convert_to_tensor(input_min, dtype=x.dtype, name="input_min")
            hi = ops.convert_to_tensor(input_max, dtype=x.dtype, name="input_max")
            return ops.apply_op(op_type, [x, lo, hi], attrs, name=scope).outputs[0]

    builder.__name__ = builder.__qualname__ = fn_name
    builder.__doc__ = f"""Quantize `input` to `num_bits` integers over its range (given, or
    its own min and max) and back (op {op_type}); see fake_quant_ops.

    Raises:
      ValueError: a negative axis on an input of unknown rank.
      InvalidArgumentError: (when run) a range of the wrong shape, min above max,
        num_bits out of range.
    """
    return builder


quantize_and_dequantize = _qdq_builder("QuantizeAndDequantizeV2", "quantize_and_dequantize")
quantize_and_dequantize_v2 = _qdq_builder("QuantizeAndDequantizeV4", "quantize_and_dequantize_v2")
