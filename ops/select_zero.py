"""Select of a value and ZerosLike as one node: the value's bits masked, no zeros array.

`tf.where(cond, x, y)`'s gradient is Select(cond, g, ZerosLike(x)) and Select(cond,
ZerosLike(x), g), and `relu_logits = where(x >= 0, x, zeros_like(x))` is how
sigmoid_cross_entropy_with_logits starts: a VAE's loss and its gradient take five such
Selects and three ZerosLike arrays per step.  Each Select is three passes over the
values' bits (slicing_ops._select_bits) after ZerosLike filled an array.  The graph
pass `fuse_select_zero` replaces a Select one of whose branches is a ZerosLike by one
`_SelectZero(cond, value, like)` (`like` the ZerosLike's input, for its shape); its
kernel is one pass, `bits(value) * cond` (or `* !cond`): exactly the Select's values,
nan and inf included (a masked element is +0.0, as ZerosLike's).  A ZerosLike no
other node reads is dropped.  Anything else (a batch-vector condition, shapes the
Select rejects, other dtypes, small values) runs the Select's own kernel on zeros, so
errors and values are the Select's.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph
from asyncflow.kernel_api import plain_context
from asyncflow.ops.slicing_ops import _BITS
from asyncflow.registry import ANY, NotDifferentiable, get_op_def, register_op

__all__ = ["SelectZero", "fuse_select_zero"]

SelectZero = register_op(
    "_SelectZero",
    inputs=["condition: bool", "value: T", "like: T"],
    outputs=["output: T"],
    # zero_then: Select(cond, zeros, value); broadcast: from a SelectV2 (its kernel, with
    # TF 2's broadcasting, when the fast path does not apply)
    attrs={"T": ANY, "zero_then": False, "broadcast": False},
    shape_fn=lambda op: [op.inputs[1].shape],
)
NotDifferentiable("_SelectZero")  # introduced after the gradients were built

_MIN_ELEMENTS = 1024  # as the Select kernel's own bit path


def _masked(cond, value, zero_then: bool, out=None):
    """value where cond (not cond: zero_then), else +0, into `out` if given (not value):
    the value's bits times the condition.  (Also a fused program's _SelectZero.)"""
    ints = _BITS[value.dtype.itemsize]
    out = np.empty(value.shape, value.dtype) if out is None else out
    keep = np.logical_not(cond) if zero_then else cond
    if keep.ndim < value.ndim:  # a batch vector: one factor per row, as value's ints (a
        # bool operand broadcast along a row goes through NumPy's casting loop: 2x slower)
        keep = keep.astype(ints).reshape(keep.shape + (1,) * (value.ndim - 1))
    np.multiply(value.view(ints), keep, out=out.view(ints))
    return out


@SelectZero.kernel("CPU")
async def _select_zero(ctx, cond, value, like):
    zero_then = ctx.attrs["zero_then"]
    cond, value, like = np.asarray(cond), np.asarray(value), np.asarray(like)
    if (
        value.shape == like.shape
        and (
            cond.shape == value.shape
            # TF1's batch vector: row r kept or zeroed (static_rnn's sequence_length)
            or (cond.ndim == 1 and value.ndim > 1 and cond.shape[0] == value.shape[0])
        )
        and value.dtype == like.dtype
        and value.dtype.kind in "fiu"
        and value.dtype.itemsize in _BITS
        and value.size >= _MIN_ELEMENTS
    ):
        return await ctx.device.compute(_masked, cond, value, zero_then)
    zeros = np.zeros_like(like)
    kind = "SelectV2" if ctx.attrs.get("broadcast") else "Select"
    select = get_op_def(kind).kernel_for("CPU").fn
    t, e = (zeros, value) if zero_then else (value, zeros)
    return await select(plain_context(ctx), cond, t, e)


def _zero_fill(view, z) -> bool:
    """Whether partition node `z` is Fill(dims, +0) of a Const zero (`tf.zeros` of a
    dynamic shape: static_rnn's zero output, which its sequence_length steps select)."""
    if z.op.type != "Fill" or len(z.inputs) != 2 or z.inputs[1][0] == "feed":
        return False
    src = view.nodes[z.inputs[1][0]].op
    if src.type != "Const" or src is not z.op.inputs[1].op:
        return False  # (a value fed or received: not known here)
    return _plus_zero(z.op.inputs[1])


def _zero_scalar(view, z, dtype) -> bool:
    """Whether partition node `z` is a Const scalar +0 of `dtype` (TF 2's dropout selects
    its kept values against one: SelectV2(keep, x * scale, 0))."""
    if z.op.type != "Const" or z.op._outputs[0].dtype != dtype:
        return False
    return _plus_zero(z.op._outputs[0])


def _plus_zero(t) -> bool:
    """Whether tensor `t`'s known value is a numeric scalar +0 (not -0.0)."""
    value = graph.constant_value(t)
    return (
        isinstance(value, np.ndarray)
        and value.shape == ()
        and value.dtype.kind in "fiu"
        and value == 0
        and not np.signbit(value)
    )


def fuse_select_zero(view) -> None:
    """Select(cond, x, ZerosLike(y)) and Select(cond, ZerosLike(y), x): _SelectZero;
    the same with Fill(dims, 0) for the zeros, which stays as the `like`.  SelectV2 too,
    and with a scalar +0 constant for the zeros when the condition has x's static
    shape (x is then its own `like`; other shapes when run take SelectV2's kernel)."""
    zeros_seen = set()
    for i, node in enumerate(view.nodes):
        op = node.op
        if op.type not in ("Select", "SelectV2") or node.device.device_type != "CPU":
            continue
        if view.reads_ref(i):
            continue
        if not view.available(i) or op._attr("T").np_dtype.kind not in "fiu":
            continue
        found = None
        for pos in (1, 2):
            src = node.inputs[pos]
            if src[0] == "feed" or src[1] != 0:
                continue
            z = view.nodes[src[0]]
            if z.device is not node.device or view.reads_ref(src[0]):
                continue
            if z.controls and not (op.type == "SelectV2" and z.op.type == "Const"):
                continue
            if z.op.type == "ZerosLike":
                found = (pos, src[0], z.inputs[0])
                break
            if _zero_fill(view, z):  # (the Fill stays: its zeros are the `like`)
                found = (pos, None, src)
                break
            other = node.inputs[3 - pos]
            if (
                op.type == "SelectV2"
                and _zero_scalar(view, z, op._attr("T"))
                and other[0] != "feed"
                and op.inputs[0].shape.ndims is not None
                and op.inputs[0].shape.as_list() == op.inputs[3 - pos].shape.as_list()
            ):
                # The value is its own `like`.  A constant in a cond branch waits on the
                # branch's pivot: absorbed, its control edges move to the fused node,
                # which so stays dead with the branch.
                found = (pos, None, other, src[0] if view.sole_consumer(src[0]) == i else None)
                break
        if found is None:
            continue
        pos, j, like = found[:3]
        absorbed = [found[3]] if len(found) > 3 and found[3] is not None else []
        if not absorbed and view.nodes[node.inputs[pos][0]].controls:
            continue  # (a shared constant that waits on something: left as it is)
        other = node.inputs[3 - pos]
        if other == node.inputs[pos]:
            continue  # Select(cond, zeros, zeros)
        # A SelectV2 whose condition has the value's fully known shape is a Select; any
        # other may broadcast when run (the kernel's fallback, and no fused program).
        cond_shape = op.inputs[0].shape
        same = cond_shape.is_fully_defined() and cond_shape == op.inputs[3 - pos].shape
        attrs = {"T": op._attr("T"), "zero_then": pos == 1}
        attrs["broadcast"] = op.type == "SelectV2" and not same
        view.fuse(i, "_SelectZero", attrs, [node.inputs[0], other, like], absorbed)
        if j is not None:
            zeros_seen.add(j)
    for j in zeros_seen:
        view.drop_if_unused(j)
