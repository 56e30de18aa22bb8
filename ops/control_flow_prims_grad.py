"""The gradients of the control-flow primitives (TF1's control_flow_grad.py).

Switch <-> Merge swap roles, Enter <-> Exit, NextIteration is an identity, LoopCond
and ControlTrigger have none.  They sit beside the contexts rather than beside the
primitives (`control_flow_prims`) because they need the contexts, which are built on
the primitives.

Inside a while loop's gradient the current context's `grad_state` is the backward
loop's state (`asyncflow.control_flow_grad.GradLoopState`: stacks of forward values,
the map from forward Switches to backward Merges); these functions use it through its
methods only, so ops/ never imports the autodiff layer.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import control_flow_contexts as cfc
from asyncflow.ops import control_flow_prims, math_ops
from asyncflow.registry import NotDifferentiable, RegisterGradient


@RegisterGradient("Switch")
def _switch_grad(op, *grad):
    graph = op.graph
    op_ctxt = op._control_flow_context
    grad_ctxt = graph._control_flow_context
    if isinstance(op_ctxt, cfc.WhileContext):
        gs = grad_ctxt.grad_state
        merge_grad = gs.switch_map.get(op)
        if merge_grad is not None:
            if grad[1] is not None:  # the gradient of the body closes the backward loop
                cfc.add_next_and_back_edge(merge_grad, grad[1], enforce_shape_invariant=False)
            return None, None
        if grad[0] is not None:  # the gradient of the Exit starts it
            merge_grad = control_flow_prims.merge([grad[0], grad[0]], name="b_switch")[0]
            gs.switch_map[op] = merge_grad
            return merge_grad, None
        return None, None
    if isinstance(op_ctxt, cfc.CondContext):
        if grad[1 - op_ctxt.branch] is None:
            return None, None
        return control_flow_prims.merge(list(grad), name="cond_grad")[0], None
    false_grad = control_flow_prims.switch(grad[0], op.inputs[1])[0]
    true_grad = control_flow_prims.switch(grad[1], op.inputs[1])[1]
    return control_flow_prims.merge([false_grad, true_grad])[0], None


@RegisterGradient("Merge")
def _merge_grad(op, grad, _):
    graph = op.graph
    op_ctxt = cfc._output_context(op.inputs[0].op)
    grad_ctxt = graph._control_flow_context
    if isinstance(op_ctxt, cfc.WhileContext):
        return list(control_flow_prims.switch(grad, grad_ctxt.pivot))
    if isinstance(op_ctxt, cfc.CondContext):
        pred = op_ctxt.pred
        if grad_ctxt is not None and grad_ctxt.grad_state is not None:
            # A cond inside a loop: the predicate of each forward iteration is replayed.
            gs = grad_ctxt.grad_state
            real_pred = gs.history_map.get(pred)
            if real_pred is None:
                g = gs.grad_context
                g.Exit()
                history = gs.AddForwardAccumulator(pred)
                g.Enter()
                real_pred = gs.AddBackpropAccumulatedValue(history, pred)
                gs.history_map[pred] = real_pred
            pred = real_pred
        return list(control_flow_prims.switch(grad, pred, name="cond_grad"))
    n = len(op.inputs)
    conds = [math_ops.equal(op.outputs[1], i) for i in range(n)]
    return [control_flow_prims.switch(grad, conds[i])[1] for i in range(n)]


@RegisterGradient("RefIdentity")
def _ref_identity_grad(op, grad):
    return grad  # TF's: the gradient passes through, as Identity's


@RegisterGradient("Exit")
def _exit_grad(op, grad):
    graph = op.graph
    op_ctxt = op._control_flow_context
    grad_ctxt = graph._control_flow_context
    if not grad_ctxt.back_prop:
        return None
    if op_ctxt.grad_state is not None:
        raise TypeError("Second-order gradient for while loops not supported.")
    if isinstance(grad, IndexedSlices):
        grad = ops.convert_to_tensor(grad)
    grad_ctxt.AddName(grad)
    result = grad_ctxt._enter(grad, is_constant=False, name="b_exit")
    grad_ctxt.loop_enters.append(result)
    return result


@RegisterGradient("NextIteration")
def _next_iteration_grad(_, grad):
    return grad


@RegisterGradient("Enter")
def _enter_grad(op, grad):
    grad_ctxt = op.graph._control_flow_context
    if grad_ctxt is None or not grad_ctxt.back_prop or grad_ctxt.grad_state is None:
        return grad
    if op._attr("is_constant"):
        if isinstance(grad, IndexedSlices):
            # Rows gathered over the iterations (an embedding read in a loop), unless
            # the loop is nested in another: then summed dense, as before.
            if not isinstance(grad_ctxt.outer_context, cfc.WhileContext):
                return grad_ctxt.AddBackpropIndexedSlicesAccumulator(op, grad)
            grad = ops.convert_to_tensor(grad)
        return grad_ctxt.AddBackpropAccumulator(op, grad)
    result = control_flow_prims.exit(grad)
    grad_ctxt.loop_exits.append(result)
    return result


@RegisterGradient("LoopCond")
def _loop_cond_grad(_, grad):
    return None


NotDifferentiable("ControlTrigger")
