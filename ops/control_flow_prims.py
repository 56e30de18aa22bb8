"""The five primitives of dynamic control flow (whitepaper §4.4), plus LoopCond and
ControlTrigger.

Their kernels are trivial; what they mean lives in the executor (`asyncflow/frames.py`):
- Switch(data, pred) forwards `data` to output 1 when pred is true, else to output 0;
  the other output is *dead*.
- Merge(inputs) forwards the first live input and its index; it is dead only when every
  input is dead.  Deadness stops here.
- Enter(data) moves a value into the child frame `frame_name` (iteration 0, or every
  iteration when `is_constant`); Exit(data) moves it back to the parent frame;
  NextIteration(data) moves it to the next iteration of its frame.
- LoopCond(pred) marks a loop's predicate; ControlTrigger runs even when its control
  inputs are dead.

A graph that uses none of these runs on the plain executor and pays nothing for them.
"""

from __future__ import annotations

import typing

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.kernel_api import DEAD
from asyncflow.registry import ANY, REQUIRED, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "switch",
    "merge",
    "enter",
    "exit",
    "next_iteration",
    "loop_cond",
    "control_trigger",
    "CONTROL_FLOW_OPS",
    "DEAD",
]


def _same(op):
    return [op.inputs[0].shape]


def _merge_shape(op):
    shape = op.inputs[0].shape
    for t in op.inputs[1:]:
        shape = shape.most_specific_compatible_shape(t.shape)
    return [shape, tensor_shape.TensorShape([])]


Switch = register_op(
    "Switch",
    inputs=["data: T", "pred: bool"],
    outputs=["output_false: T", "output_true: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape, op.inputs[0].shape],
)
Merge = register_op(
    "Merge",
    inputs=["inputs: N * T"],
    outputs=["output: T", "value_index: int32"],
    attrs={"T": ANY, "N": REQUIRED},
    shape_fn=_merge_shape,
)
Enter = register_op(
    "Enter",
    inputs=["data: T"],
    outputs=["output: T"],
    attrs={"T": ANY, "frame_name": REQUIRED, "is_constant": False, "parallel_iterations": 10},
    # TF's: a loop constant keeps its shape; a loop variable's is unknown here (the
    # while loop sets it from the variable's shape invariant).
    shape_fn=lambda op: [
        op.inputs[0].shape if op._attr("is_constant") else tensor_shape.unknown_shape()
    ],
)
# TF's RefIdentity: a reference (a variable) passed on as itself, for ops that update it.
RefIdentity = register_op(
    "RefIdentity", inputs=["input: Ref(T)"], outputs=["output: Ref(T)"], attrs={"T": ANY},
    shape_fn=_same,
)  # fmt: skip
Exit = register_op(
    "Exit", inputs=["data: T"], outputs=["output: T"], attrs={"T": ANY}, shape_fn=_same
)
NextIteration = register_op(
    "NextIteration", inputs=["data: T"], outputs=["output: T"], attrs={"T": ANY}, shape_fn=_same
)
LoopCond = register_op(
    "LoopCond", inputs=["input: bool"], outputs=["output: bool"], shape_fn=_same
)
ControlTrigger = register_op("ControlTrigger", shape_fn=lambda op: [])

CONTROL_FLOW_OPS = frozenset(
    ["Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond", "ControlTrigger"]
)


# The predicate, Merge's value_index and LoopCond's boolean are read by the executor on
# the host (TF's HostMemory), wherever the data lives.
@Switch.kernel(host_memory=("pred",))
async def _switch(ctx, data, pred):
    if getattr(pred, "ndim", 0):  # (TF's legacy [1] scalar is refused here too)
        raise errors.InvalidArgumentError(
            None,
            None,
            "The second input must be a scalar, but it has shape ["
            + ",".join(map(str, pred.shape))
            + "]",
        )
    return (DEAD, data) if bool(pred) else (data, DEAD)


@Merge.kernel(host_memory=("value_index",))
async def _merge(ctx, *inputs):
    # The frame executor calls Merge with exactly the live input and its index.
    for i, x in enumerate(inputs):
        if x is not DEAD:
            return x, np.int32(i)
    return DEAD, DEAD


async def _forward(ctx, x):
    return x


for _op in (Enter, Exit, NextIteration, RefIdentity):
    _op.kernel()(_forward)
LoopCond.kernel(host_memory=("input", "output"))(_forward)


@ControlTrigger.kernel()
async def _control_trigger(ctx):
    return None


# -- builders (TF's control_flow_ops.switch/merge/...; cond and while_loop use them) ----


def _keep_ref(op, data):
    """A reference (a variable) stays a reference through the primitive, as TF's
    RefEnter/RefSwitch/...: ops downstream may update it, others read it."""
    if getattr(data, "_is_ref", False):
        for t in op._outputs[:1] if op.type == "Merge" else op._outputs:
            t._is_ref = True
    return op


def switch(data, pred, dtype=None, name=None):
    """(output_false, output_true): `data` on the side `pred` selects, dead on the other.

    An IndexedSlices or SparseTensor is switched component by component (TF's).
    """
    if isinstance(data, (IndexedSlices, SparseTensor)):
        with ops.name_scope(name, "Switch", [data, pred]):
            sides = [switch(c, pred) for c in _components(data)]
        return tuple(_rebuild(data, [side[k] for side in sides]) for k in (0, 1))
    if not getattr(data, "_is_ref", False):
        data = ops.convert_to_tensor(data, dtype=dtype)
    pred = ops.convert_to_tensor(pred, dtype=dtypes.bool)
    op = ops.apply_op("Switch", [data, pred], name=name or "Switch")
    return _keep_ref(op, data).outputs


class MergeOutput(typing.NamedTuple):
    """What `merge` returns, as TF's generated `merge` (fields `output`, `value_index`)."""

    output: object
    value_index: object


def merge(inputs, name=None):
    """(output, value_index): the first live tensor of `inputs` and which one it was.

    As TF's: SparseTensors merge component by component (all inputs must be); so do
    IndexedSlices, Tensors among them becoming IndexedSlices of all their rows.

    Raises:
      TypeError: a SparseTensor merged with something else.
    """
    if any(isinstance(t, (IndexedSlices, SparseTensor)) for t in inputs):
        return _merge_composites(inputs, name)
    inputs = [t if getattr(t, "_is_ref", False) else ops.convert_to_tensor(t) for t in inputs]
    op = ops.apply_op("Merge", [inputs], name=name or "Merge")
    if all(getattr(t, "_is_ref", False) for t in inputs):
        _keep_ref(op, inputs[0])
    return MergeOutput(*op.outputs)


def _components(x) -> list:
    if isinstance(x, SparseTensor):
        return [x.indices, x.values, x.dense_shape]
    parts = [x.values, x.indices]
    return parts if x.dense_shape is None else parts + [x.dense_shape]


def _rebuild(like, parts):
    if isinstance(like, SparseTensor):
        return SparseTensor(*parts)
    return IndexedSlices(parts[0], parts[1], parts[2] if len(parts) > 2 else None)


def _as_indexed_slices(x):
    """All the rows of a dense tensor as IndexedSlices (TF's `_as_indexed_slices`)."""
    x = ops.convert_to_tensor(x)
    shape = ops.apply_op("Shape", [x]).outputs[0]
    rows = ops.apply_op("StridedSlice", [shape, [0], [1], [1]], {"shrink_axis_mask": 1}).outputs[0]
    indices = ops.apply_op("Range", [np.int32(0), rows, np.int32(1)]).outputs[0]
    return IndexedSlices(x, indices, shape)


def _merge_composites(inputs, name):
    if any(isinstance(t, SparseTensor) for t in inputs):
        if not all(isinstance(t, SparseTensor) for t in inputs):
            raise TypeError("Type SparseTensor is not compatible with other input types")
    else:
        inputs = [t if isinstance(t, IndexedSlices) else _as_indexed_slices(t) for t in inputs]
        if any(t.dense_shape is None for t in inputs):
            inputs = [IndexedSlices(t.values, t.indices) for t in inputs]
        if len({t.indices.dtype for t in inputs}) > 1:
            inputs = [
                IndexedSlices(t.values, _cast(t.indices, dtypes.int64), t.dense_shape)
                for t in inputs
            ]
        if inputs[0].dense_shape is not None and len({t.dense_shape.dtype for t in inputs}) > 1:
            inputs = [
                IndexedSlices(t.values, t.indices, _cast(t.dense_shape, dtypes.int64))
                for t in inputs
            ]
    with ops.name_scope(name, "Merge", [c for t in inputs for c in _components(t)]):
        parts = [merge(list(column)) for column in zip(*map(_components, inputs))]
    value_index = parts[0][1]
    return MergeOutput(_rebuild(inputs[0], [out for out, _ in parts]), value_index)


def _cast(x, dtype):
    return ops.apply_op("Cast", [x], {"DstT": dtype}).outputs[0]


def enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    attrs = {
        "frame_name": frame_name,
        "is_constant": is_constant,
        "parallel_iterations": parallel_iterations,
    }
    op = ops.apply_op("Enter", [data], attrs, name=name or "Enter")
    return _keep_ref(op, data).outputs[0]


def exit(data, name=None):  # noqa: A001 - TF's name
    return _keep_ref(ops.apply_op("Exit", [data], name=name or "Exit"), data).outputs[0]


def next_iteration(data, name=None):
    op = ops.apply_op("NextIteration", [data], name=name or "NextIteration")
    return _keep_ref(op, data).outputs[0]


def loop_cond(input, name=None):  # noqa: A002 - TF's name
    return ops.apply_op("LoopCond", [input], name=name or "LoopCond").outputs[0]


def control_trigger(name=None):
    return ops.apply_op("ControlTrigger", [], name=name or "ControlTrigger")
