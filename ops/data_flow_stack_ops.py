"""Stacks: StackV2, StackPushV2, StackPopV2, StackCloseV2.

While-loop gradients keep the forward values a gradient needs on a stack per loop:
pushed once per forward iteration, popped once per backward iteration (whitepaper §4.4;
TF's `gen_data_flow_ops.stack_*_v2`).

A stack handle is a 0-d tensor holding the `_Stack` object itself (dtype string, as
TF1's string handles: this runtime has no resource dtype yet).  Each run of StackV2
makes a new stack, so every step (and every run of an inner loop) has its own; it is
freed with the last tensor that refers to it.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op

__all__ = ["stack_v2", "stack_push_v2", "stack_pop_v2", "stack_close_v2"]


class _Stack:
    __slots__ = ("name", "elem_type", "max_size", "items", "closed")

    def __init__(self, name: str, elem_type, max_size: int):
        self.name = name
        self.elem_type = elem_type
        self.max_size = max_size
        self.items: list = []
        self.closed = False

    def __repr__(self) -> str:
        return f"<Stack {self.name} size={len(self.items)}>"


def handle_value(obj) -> np.ndarray:
    """A 0-d object array holding a resource object (how handles travel)."""
    out = np.empty((), dtype=object)
    out[()] = obj
    return out


def handle_object(value, cls, what: str):
    if isinstance(value, np.ndarray) and value.shape == (2,):
        value = value[1]  # a ref Stack's [container, stack] handle
    obj = value[()] if isinstance(value, np.ndarray) else value
    if not isinstance(obj, cls):
        raise errors.InvalidArgumentError(None, None, f"Expected a {what} handle, got {obj!r}")
    return obj


def _scalar(op):
    return [tensor_shape.TensorShape([])]


StackV2 = register_op(
    "StackV2",
    inputs=["max_size: int32"],
    outputs=["handle: string"],
    attrs={"elem_type": TypeConstraint(None), "stack_name": ""},
    shape_fn=_scalar,
    stateful=True,
)
StackPushV2 = register_op(
    "StackPushV2",
    inputs=["handle: string", "elem: T"],
    outputs=["output: T"],
    attrs={"T": ANY, "swap_memory": False},
    shape_fn=lambda op: [op.inputs[1].shape],
    stateful=True,
)
StackPopV2 = register_op(
    "StackPopV2",
    inputs=["handle: string"],
    outputs=["elem: elem_type"],
    attrs={"elem_type": TypeConstraint(None)},
    shape_fn=lambda op: [None],
    stateful=True,
)
StackCloseV2 = register_op(
    "StackCloseV2", inputs=["handle: string"], shape_fn=lambda op: [], stateful=True
)


# Generic: a stack holds its elements where they were pushed; handles and sizes stay in
# host memory (TF's HostMemory).
@StackV2.kernel(host_memory=("max_size", "handle"))
async def _stack_v2(ctx, max_size):
    name = ctx.attrs["stack_name"] or ctx.op.name
    return handle_value(_Stack(name, ctx.attrs["elem_type"], int(max_size)))


@StackPushV2.kernel(host_memory=("handle",))
async def _stack_push_v2(ctx, handle, elem):
    stack = handle_object(handle, _Stack, "stack")
    if stack.closed:
        raise errors.InvalidArgumentError(
            None, None, f"Stack[{stack.name}] has already been closed."
        )
    if 0 <= stack.max_size <= len(stack.items):
        raise errors.InvalidArgumentError(
            None, None, f"Stack[{stack.name}] overflowed its max_size ({stack.max_size})"
        )
    stack.items.append(elem)
    return elem


@StackPopV2.kernel(host_memory=("handle",))
async def _stack_pop_v2(ctx, handle):
    stack = handle_object(handle, _Stack, "stack")
    if stack.closed:
        raise errors.InvalidArgumentError(
            None, None, f"Stack[{stack.name}] has already been closed."
        )
    if not stack.items:
        raise errors.InvalidArgumentError(
            None, None, f"Stack[{stack.name}] is empty when calling Pop()."
        )
    return stack.items.pop()


@StackCloseV2.kernel(host_memory=("handle",))
async def _stack_close_v2(ctx, handle):
    stack = handle_object(handle, _Stack, "stack")
    stack.closed = True
    stack.items.clear()


# TF1's deprecated ref stacks (`gen_data_flow_ops._stack`, stack_push, stack_pop,
# stack_close): the same stacks, unbounded, behind a [2] string handle (container, stack)
# as TF's ref handle; two stacks of one name are distinct.
Stack = register_op(
    "Stack",
    outputs=["handle: string"],
    attrs={"elem_type": TypeConstraint(None), "stack_name": ""},
    shape_fn=lambda op: [tensor_shape.TensorShape([2])],
    stateful=True,
)
StackPush = register_op(
    "StackPush",
    inputs=["handle: string", "elem: T"],
    outputs=["output: T"],
    attrs={"T": ANY, "swap_memory": False},
    shape_fn=lambda op: [op.inputs[1].shape],
    stateful=True,
)
StackPop = register_op(
    "StackPop",
    inputs=["handle: string"],
    outputs=["elem: elem_type"],
    attrs={"elem_type": TypeConstraint(None)},
    shape_fn=lambda op: [None],
    stateful=True,
)
StackClose = register_op(
    "StackClose", inputs=["handle: string"], shape_fn=lambda op: [], stateful=True
)


@Stack.kernel(host_memory=("handle",))
async def _stack_ref(ctx):
    name = ctx.attrs["stack_name"] or ctx.op.name
    out = np.empty((2,), dtype=object)
    out[0], out[1] = b"_stacks", _Stack(name, ctx.attrs["elem_type"], -1)
    return out


StackPush.kernel(host_memory=("handle",))(_stack_push_v2)
StackPop.kernel(host_memory=("handle",))(_stack_pop_v2)
StackClose.kernel(host_memory=("handle",))(_stack_close_v2)

for _t in ("StackV2", "StackPushV2", "StackPopV2", "StackCloseV2", "Stack", "StackPush",
           "StackPop", "StackClose"):  # fmt: skip
    NotDifferentiable(_t)


def stack_v2(max_size, elem_type, stack_name="", name=None) -> ops.Tensor:
    """A new stack of `elem_type` values (max_size -1: unbounded); its handle."""
    return ops.apply_op(
        "StackV2",
        [ops.convert_to_tensor(max_size, dtype=dtypes.int32)],
        {"elem_type": dtypes.as_dtype(elem_type), "stack_name": stack_name},
        name=name or "StackV2",
    ).outputs[0]


def stack_push_v2(handle, elem, swap_memory=False, name=None) -> ops.Tensor:
    return ops.apply_op(
        "StackPushV2", [handle, elem], {"swap_memory": swap_memory}, name=name or "StackPushV2"
    ).outputs[0]


def stack_pop_v2(handle, elem_type, name=None) -> ops.Tensor:
    """Pop a value; InvalidArgumentError at run time when the stack is empty."""
    return ops.apply_op(
        "StackPopV2",
        [handle],
        {"elem_type": dtypes.as_dtype(elem_type)},
        name=name or "StackPopV2",
    ).outputs[0]


def stack_close_v2(handle, name=None) -> ops.Operation:
    return ops.apply_op("StackCloseV2", [handle], name=name or "StackCloseV2")
