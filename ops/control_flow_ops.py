"""The control-flow family as users import it (TF1's control_flow_ops): ordering
(no_op, group, tuple, with_dependencies: `control_flow_ordering`) and dynamic control
flow (cond, case: `control_flow_cond`; while_loop: `control_flow_contexts`) built from
the primitives of `control_flow_prims`, whose gradients are in
`control_flow_prims_grad`.  This module only gathers them; nothing in ops/ below it
imports it.

cond and while_loop build TF1's classic graphs (whitepaper §4.4):
- cond: every tensor from outside a branch enters it through a Switch on the predicate
  (output 1 for true_fn, 0 for false_fn), ops without inputs get a control edge from
  the branch pivot (an Identity of the predicate's Switch), so the untaken branch is
  dead and never runs; a Merge per output joins the branches.
- while_loop: Enter -> Merge(enter, NextIteration) -> cond -> LoopCond -> Switch ->
  body on Identity(Switch:1) -> NextIteration back edge, Exit(Switch:0).  Tensors from
  outside the loop enter once through constant Enters (available to every iteration).

Contexts (CondContext, WhileContext) see every op built inside them through the hook in
`graph.apply_op`: `map_inputs` replaces external inputs by their Switch/Enter,
`add_op` adds pivot control edges.  Invariant: an op's inputs are in its own context
or in a context nested in it (cond branches) -- never in a loop it is not part of.
"""

from __future__ import annotations

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import (  # noqa: F401 - register ops
    array_ops,
    control_flow_prims_grad,  # noqa: F401 - registers the gradients
    data_flow_stack_ops,
    tensor_array_ops,
)
from asyncflow.ops.control_flow_cond import case, cond
from asyncflow.ops.control_flow_contexts import (
    CondContext,
    ControlFlowContext,
    WhileContext,
    while_loop,
)
from asyncflow.ops.control_flow_ordering import (
    NoOp,
    group,
    no_op,
    tuple,
    with_dependencies,
)
from asyncflow.ops.control_flow_prims import (  # noqa: F401 - control_flow_ops.merge, as TF's
    enter,
    loop_cond,
    merge,
    next_iteration,
    switch,
)
from asyncflow.ops.control_flow_prims import exit as _exit
from asyncflow.registry import ANY, REQUIRED, NotDifferentiable, register_op
from asyncflow.sparse_tensor import SparseTensor


def _as_ref(x):
    """A variable's reference tensor (TF's as_ref conversion); anything else as it is."""
    ref = getattr(x, "_ref", None)
    return ref() if callable(ref) else x


def _composite(fn, data):
    """`fn` over the parts of a SparseTensor or IndexedSlices (TF applies the control-flow
    primitives to a composite's component tensors); None for a plain tensor."""
    if isinstance(data, SparseTensor):
        return SparseTensor(fn(data.indices), fn(data.values), fn(data.dense_shape))
    if isinstance(data, IndexedSlices):
        shape = None if data.dense_shape is None else fn(data.dense_shape)
        return IndexedSlices(fn(data.values), fn(data.indices), shape)
    return None


def _Identity(tensor, name=None):  # noqa: N802 - TF's name
    """TF's control_flow_ops._Identity: an Identity, a RefIdentity for a reference (a
    variable passes as itself, for ops that update it); part by part for a composite."""
    parts = _composite(lambda t: _Identity(t, name=name), tensor)
    if parts is not None:
        return parts
    ref = _as_ref(tensor)
    if getattr(ref, "_is_ref", False):
        return ops.apply_op("RefIdentity", [ref], name=name or "Identity").outputs[0]
    return array_ops.identity(tensor, name=name)


def _Enter(  # noqa: N802 - TF's name
    tensor, frame_name, is_constant=False, parallel_iterations=10, name="Enter", **_kw
):
    """TF's control_flow_ops._Enter: an Enter of `tensor` (a variable enters as its
    reference) into frame `frame_name`; part by part for a composite."""
    parts = _composite(
        lambda t: _Enter(t, frame_name, is_constant, parallel_iterations, name), tensor
    )
    if parts is not None:
        return parts
    return enter(_as_ref(tensor), frame_name, is_constant, parallel_iterations, name=name)


def exit(data, name=None):  # noqa: A001 - TF's name
    """TF's control_flow_ops.exit: an Exit of `data`, part by part for a composite."""
    parts = _composite(lambda t: exit(t, name=name), data)
    return parts if parts is not None else _exit(data, name=name)


def _SwitchRefOrTensor(data, pred, name="Switch"):  # noqa: N802 - TF's name
    """TF's: a Switch of `data`, of its reference when it is a variable."""
    return switch(_as_ref(data), pred, name=name)


def ref_switch(data, pred, name=None):
    """TF's RefSwitch: (output_false, output_true), the reference on the live side."""
    return switch(_as_ref(data), pred, name=name)


def ref_merge(inputs, name=None):
    """TF's RefMerge: (output, value_index), the first live reference (a Merge of
    references, which asyncflow's Merge carries as its Switch does)."""
    return merge([_as_ref(t) for t in inputs], name=name)


def _ref_select_shape(op):
    op.inputs[0].shape.with_rank(0)
    first = op.inputs[1].shape
    # TF's: the inputs' shape when all are fully defined and equal, else unknown.
    for t in op.inputs[1:]:
        if not t.shape.is_fully_defined() or t.shape.as_list() != first.as_list():
            return [tensor_shape.unknown_shape()]
    return [first]


RefSelect = register_op(
    "RefSelect",
    inputs=["index: int32", "inputs: N * Ref(T)"],
    outputs=["output: Ref(T)"],
    attrs={"T": ANY, "N": REQUIRED},
    shape_fn=_ref_select_shape,
)
NotDifferentiable("RefSelect")


@RefSelect.kernel(host_memory=("index",))
async def _ref_select(ctx, index, *inputs):
    i = int(index)
    if not 0 <= i < len(inputs):
        raise errors.InvalidArgumentError(
            None, None, f"index {i} is out of range [0, {len(inputs)})"
        )
    return inputs[i]


def ref_select(index, inputs, name=None):
    """TF's RefSelect: the reference `inputs[index]` (variables, passed as themselves)."""
    refs = [_as_ref(t) for t in inputs]
    return ops.apply_op("RefSelect", [index, refs], name=name).outputs[0]


__all__ = [
    "no_op",
    "group",
    "tuple",
    "with_dependencies",
    "cond",
    "case",
    "while_loop",
    "CondContext",
    "ControlFlowContext",
    "WhileContext",
    "NoOp",
]
