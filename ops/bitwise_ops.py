"""Bitwise ops on integers: BitwiseAnd/Or/Xor, Invert, LeftShift, RightShift,
PopulationCount (TF's `tf.bitwise`, `bitwise_ops`).

Shifts follow TF's kernels: the shift amount is clamped to [0, bits - 1] (C++ leaves
larger shifts undefined; TF defines them so), and a signed right shift is arithmetic.
None of them is differentiable.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.ops.math_ops import _binary_op, _unary_op
from asyncflow.registry import INTEGER, NotDifferentiable, register_op

__all__ = [
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "invert",
    "left_shift",
    "right_shift",
    "population_count",
]


def _shift(np_fn):
    def kernel(xp, x, y):
        x, y = xp.asarray(x), xp.asarray(y)
        bits = x.dtype.itemsize * 8
        y = xp.clip(y, 0, bits - 1).astype(x.dtype)
        return np_fn(xp)(x, y)

    return kernel


BitwiseAnd = _binary_op("BitwiseAnd", lambda xp, x, y: xp.bitwise_and(x, y), INTEGER)
BitwiseOr = _binary_op("BitwiseOr", lambda xp, x, y: xp.bitwise_or(x, y), INTEGER)
BitwiseXor = _binary_op("BitwiseXor", lambda xp, x, y: xp.bitwise_xor(x, y), INTEGER)
LeftShift = _binary_op("LeftShift", _shift(lambda xp: xp.left_shift), INTEGER)
RightShift = _binary_op("RightShift", _shift(lambda xp: xp.right_shift), INTEGER)
Invert = _unary_op("Invert", lambda xp, x: xp.invert(x), INTEGER)

PopulationCount = register_op(
    "PopulationCount",
    inputs=["x: T"],
    outputs=["y: uint8"],
    attrs={"T": INTEGER},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@PopulationCount.kernel()
async def _population_count(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    count = xp.zeros(x.shape, np.uint8)
    for _ in range(x.dtype.itemsize * 8):
        count += (u & 1).astype(np.uint8)
        u = u >> 1
    return count


for _t in (
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "LeftShift",
    "RightShift",
    "Invert",
    "PopulationCount",
):
    NotDifferentiable(_t)


def _binary(op_type: str, what: str):
    def builder(x, y, name=None):
        return ops.apply_op(op_type, [x, y], name=name).outputs[0]

    builder.__doc__ = f"Element-wise {what} of two integer tensors (op {op_type})."
    return _dispatch.add_dispatch_support(builder)


bitwise_and = _binary("BitwiseAnd", "x & y")
bitwise_or = _binary("BitwiseOr", "x | y")
bitwise_xor = _binary("BitwiseXor", "x ^ y")
left_shift = _binary("LeftShift", "x << y (y clamped to [0, bits - 1])")
right_shift = _binary("RightShift", "x >> y (arithmetic for signed x; y clamped)")


@_dispatch.add_dispatch_support
def invert(x, name=None):
    """Element-wise ~x of an integer tensor (op Invert)."""
    return ops.apply_op("Invert", [x], name=name).outputs[0]


def population_count(x, name=None):
    """The number of set bits of each element, as uint8 (op PopulationCount)."""
    return ops.apply_op("PopulationCount", [x], name=name).outputs[0]


del tensor_shape
