"""Small framework ops: EnsureShape, GuaranteeConst, Timestamp and BroadcastArgs, with
their TF1 builders (`ensure_shape`, `guarantee_const`, `timestamp`,
`broadcast_dynamic_shape`, `broadcast_static_shape`).

EnsureShape checks at build time what it can and at run time the rest
(InvalidArgumentError); its gradient passes through.  GuaranteeConst is an identity
whose value the caller promises is constant; TF registers no gradient for it (asking
raises LookupError there), here it is marked not differentiable.
"""

from __future__ import annotations

import time

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import dynamic_ragged_shape as _drs
from asyncflow import graph as ops
from asyncflow.dynamic_ragged_shape import DynamicRaggedShape
from asyncflow.ops.math_helpers import merged_shapes
from asyncflow.registry import ANY, INDEX, REQUIRED, NotDifferentiable, register_op

__all__ = [
    "ensure_shape",
    "guarantee_const",
    "timestamp",
    "broadcast_dynamic_shape",
    "broadcast_static_shape",
]


def _dims(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


# -- EnsureShape --------------------------------------------------------------------------


def _ensure_shape_shape(op):
    want = tensor_shape.as_shape(op.get_attr("shape"))
    return [merged_shapes(want, op.inputs[0].shape)]


EnsureShape = register_op(
    "EnsureShape",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"shape": REQUIRED, "T": ANY},
    shape_fn=_ensure_shape_shape,
)


@EnsureShape.kernel()
async def _ensure_shape(ctx, x):
    want = tensor_shape.as_shape(ctx.attrs["shape"])
    if not want.is_compatible_with(tensor_shape.TensorShape(list(x.shape))):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Shape of tensor {ctx.op.inputs[0].op.name} {_dims(x.shape)} is not "
            f"compatible with expected shape {_dims(want.as_list())}.",
        )
    return x


@EnsureShape.gradient
def _ensure_shape_grad(op, grad):
    return [grad]


def ensure_shape(x, shape, name=None):
    """`x`, checked to have `shape` (None dimensions match anything): statically when
    known, else when run; the result carries the merged static shape.

    Raises:
      ValueError: the static shape of `x` contradicts `shape` (build time).
      InvalidArgumentError: the run-time shape contradicts it.
    """
    shape = tensor_shape.as_shape(shape)
    return ops.apply_op("EnsureShape", [x], {"shape": shape}, name=name).outputs[0]


# -- GuaranteeConst -----------------------------------------------------------------------

GuaranteeConst = register_op(
    "GuaranteeConst",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("GuaranteeConst")


@GuaranteeConst.kernel()
async def _guarantee_const(ctx, x):
    return x


def guarantee_const(input, name=None):  # noqa: A002 - TF's name
    """`input` unchanged; a promise to the runtime that its value never changes."""
    return ops.apply_op("GuaranteeConst", [input], name=name).outputs[0]


# -- Timestamp ----------------------------------------------------------------------------

Timestamp = register_op(
    "Timestamp",
    outputs=["ts: float64"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)
NotDifferentiable("Timestamp")


@Timestamp.kernel("CPU")
async def _timestamp(ctx):
    return np.float64(time.time())


def timestamp(name=None):
    """Seconds since the epoch (float64) when the op runs."""
    return ops.apply_op("Timestamp", [], name=name).outputs[0]


# -- BroadcastArgs ------------------------------------------------------------------------


def _broadcast_args_shape(op):
    a = op.inputs[0].shape.with_rank(1)
    b = op.inputs[1].shape.with_rank(1)
    if a.ndims is not None and a[0].value is not None and b[0].value is not None:
        return [tensor_shape.TensorShape([max(a[0].value, b[0].value)])]
    return [tensor_shape.TensorShape([None])]


BroadcastArgs = register_op(
    "BroadcastArgs",
    inputs=["s0: T", "s1: T"],
    outputs=["r0: T"],
    attrs={"T": INDEX},
    shape_fn=_broadcast_args_shape,
)
NotDifferentiable("BroadcastArgs")


def broadcast_shape(a, b) -> list[int] | None:
    """NumPy's broadcast of two shapes (with -1/None as unknown), None if incompatible."""
    a, b = list(a), list(b)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == 1 or x == y:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    return out


@BroadcastArgs.kernel(host_memory=("s0", "s1", "r0"))
async def _broadcast_args(ctx, s0, s1):
    s0 = np.asarray(s0.get() if hasattr(s0, "get") else s0)
    s1 = np.asarray(s1.get() if hasattr(s1, "get") else s1)
    out = broadcast_shape(s0.tolist(), s1.tolist())
    if out is None:
        raise errors.InvalidArgumentError(
            None, None, f"Incompatible shapes: {_dims(s0.tolist())} vs. {_dims(s1.tolist())}"
        )
    return np.asarray(out, dtype=s0.dtype)


def broadcast_dynamic_shape(shape_x, shape_y):
    """The broadcast of two 1-D shape tensors (op BroadcastArgs); of two shapes one of
    which is a DynamicRaggedShape, that DynamicRaggedShape (TF's ragged broadcasting).

    Raises:
      InvalidArgumentError: (when run) the shapes do not broadcast.
    """
    if isinstance(shape_x, DynamicRaggedShape) or isinstance(shape_y, DynamicRaggedShape):
        return _drs.broadcast_dynamic_shape(shape_x, shape_y)
    return ops.apply_op("BroadcastArgs", [shape_x, shape_y]).outputs[0]


def broadcast_static_shape(shape_x, shape_y) -> tensor_shape.TensorShape:
    """The broadcast of two TensorShapes (unknown dimensions stay unknown where they
    could be anything).

    Raises:
      ValueError: the shapes do not broadcast.
    """
    x, y = tensor_shape.as_shape(shape_x), tensor_shape.as_shape(shape_y)
    if x.ndims is None or y.ndims is None:
        return tensor_shape.unknown_shape()
    n = max(x.ndims, y.ndims)
    a = [1] * (n - x.ndims) + x.as_list()
    b = [1] * (n - y.ndims) + y.as_list()
    out = []
    for p, q in zip(a, b):
        if p is None or q is None:
            known = q if p is None else p
            out.append(None if known in (None, 1) else known)
        elif p == 1 or p == q:
            out.append(q)
        elif q == 1:
            out.append(p)
        else:
            raise ValueError(
                "Incompatible shapes for broadcasting. Two shapes are compatible if for each "
                "dimension pair they are either equal or one of them is 1. Received: "
                f"{tuple(x.as_list())} and {tuple(y.as_list())}."
            )
    return tensor_shape.TensorShape(out)


del dtypes
