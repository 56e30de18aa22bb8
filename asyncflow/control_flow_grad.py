"""The while-loop part of the gradient walk (TF1's control_flow_state.py).

A while loop's gradient is another while loop (the "grad context") that runs as many
iterations as the forward loop did: a counter added to the forward loop records the
count, and a counter in the backward loop counts down from it.  A forward value that a
gradient needs is pushed on a stack (StackV2) in each forward iteration and popped in
the matching backward iteration; pushes are ordered by the forward counter and pops by
a ControlTrigger ("b_sync") gating the backward counter.  Loop invariants (constant
Enters) get their gradients summed over the iterations by an accumulator loop variable
of the backward loop.

`asyncflow.gradients` runs one walk for every graph; it creates a `ControlFlowState`
only when a while loop lies between xs and ys, and asks `zeros_like_output` for zero
gradients (a cond's Switch needs its zeros on the untaken side only).  The primitives'
own gradients (Switch, Merge, Enter, Exit, ...) are in `ops/control_flow_prims_grad.py`.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_prims, resource_variable_ops
from asyncflow.ops import control_flow_contexts as cfc
from asyncflow.ops import data_flow_stack_ops as stack_ops

__all__ = [
    "ControlFlowState",
    "GradLoopState",
    "is_loop_switch",
    "maybe_create_control_flow_state",
    "zeros_like_output",
]


def _is_loop_exit(op) -> bool:
    return op.type == "Exit"


def is_loop_switch(op) -> bool:
    """True for the Switch of a while loop's condition (processed once per gradient)."""
    return (
        op.type == "Switch"
        and isinstance(op._control_flow_context, cfc.WhileContext)
        and (
            op.inputs[0].op.type == "Merge"
            and isinstance(op.inputs[0].op._control_flow_context, cfc.WhileContext)
            and op.inputs[1].op.type == "LoopCond"
        )
    )


def _while_of_op(op):
    return cfc._while_of(op._control_flow_context)


# -- per-loop gradient state -------------------------------------------------------------------


class GradLoopState:
    """The backward loop of one forward while loop, and the stacks between them."""

    def __init__(self, forward_ctxt, outer_grad_state):
        self.outer_grad_state = outer_grad_state
        self.forward_context = forward_ctxt
        self._forward_sync = None
        self._grad_sync = None
        self.history_map: dict = {}
        self.switch_map: dict = {}
        self.unused_exits: list = []
        self.deferred_exits: list = []
        self.forward_loop_exits = list(forward_ctxt.loop_exits)
        self.pending_exits_count = len(forward_ctxt.loop_exits)
        outer_forward = (
            outer_grad_state.forward_context if outer_grad_state else forward_ctxt.outer_context
        )
        with _entered(outer_forward):
            cnt, self.forward_index = forward_ctxt.AddForwardLoopCounter(outer_grad_state)
        kwargs = {
            "maximum_iterations": forward_ctxt.maximum_iterations,
            "parallel_iterations": forward_ctxt.parallel_iterations,
            "back_prop": forward_ctxt.back_prop,
            "swap_memory": forward_ctxt.swap_memory,
            "name": forward_ctxt.name,
            "grad_state": self,
        }
        if outer_grad_state is not None:
            # A nested loop: its count differs from one outer iteration to the next.
            outer_forward.AddName(cnt)
            history_cnt = outer_grad_state.AddForwardAccumulator(cnt)
            with _entered(outer_grad_state.grad_context):
                self.grad_context = cfc.WhileContext(**kwargs)
                real_cnt = outer_grad_state.AddBackpropAccumulatedValue(history_cnt, cnt)
                self.grad_index = self.grad_context.AddBackpropLoopCounter(
                    real_cnt, outer_grad_state
                )
        else:
            with _entered(outer_forward):
                self.grad_context = cfc.WhileContext(**kwargs)
                self.grad_index = self.grad_context.AddBackpropLoopCounter(cnt, None)

    @property
    def forward_sync(self):
        if self._forward_sync is None:
            with cfc._raw(self.forward_context._graph):
                self._forward_sync = control_flow_prims.control_trigger(name="f_sync")
            self._forward_sync._control_flow_context = self.forward_context
            self.forward_index.op._add_control_input(self._forward_sync)
        return self._forward_sync

    @property
    def grad_sync(self):
        if self._grad_sync is None:
            with cfc._raw(self.grad_context._graph):
                self._grad_sync = control_flow_prims.control_trigger(name="b_sync")
            self._grad_sync._control_flow_context = self.grad_context
            self.grad_index.op._add_control_input(self._grad_sync)
        return self._grad_sync

    def AddForwardAccumulator(self, value, dead_branch=False):  # noqa: N802
        """Push `value` on a new stack in each forward iteration; the stack handle."""
        graph = value.graph
        curr = graph._control_flow_context
        with cfc._raw(graph), _entered(curr), ops.colocate_with(value):
            acc = stack_ops.stack_v2(-1, value.dtype, name="f_acc")
        enter_acc = self.forward_context.AddValue(acc)
        value_ctxt = cfc._output_context(value.op)
        if value_ctxt is self.forward_context:
            with cfc._raw(graph), _entered(self.forward_context):
                push = stack_ops.stack_push_v2(enter_acc, value, self.forward_context.swap_memory)
            self.forward_index.op._add_control_input(push.op)
        else:
            if not isinstance(value_ctxt, cfc.CondContext):
                raise TypeError(f"value_ctxt is not a CondContext: {value_ctxt}")
            where = value_ctxt.outer_context if dead_branch else value_ctxt
            with cfc._raw(graph), _entered(where):
                push = stack_ops.stack_push_v2(enter_acc, value, self.forward_context.swap_memory)
            push.op._control_flow_context = value_ctxt
            self.forward_sync._add_control_input(push.op)
        # Each push comes after this iteration's counter Add and before its NextIteration:
        # the pushes of successive iterations are ordered.
        push.op._add_control_input(self.forward_index.op.inputs[0].op)
        return acc

    def AddBackpropAccumulatedValue(self, history_value, value, dead_branch=False):  # noqa: N802
        """Pop, in the backward iteration, what the forward iteration pushed."""
        history_ctxt = history_value.op._control_flow_context
        cond_ctxt = None
        value_ctxt = value.op._control_flow_context
        while value_ctxt is not None and value_ctxt is not history_ctxt:
            if isinstance(value_ctxt, cfc.CondContext):
                cond_ctxt = value_ctxt
                break
            value_ctxt = value_ctxt.outer_context
        graph = value.graph
        with cfc._raw(graph), _entered(self.grad_context):
            if cond_ctxt is not None:
                # The push happened only on the taken branch: pop on it only.
                gs, pred = self, None
                while pred is None and gs is not None:
                    pred = gs.history_map.get(cond_ctxt.pred)
                    gs = gs.outer_grad_state
                if pred is None:
                    pred = cond_ctxt.pred
                branch = (1 - cond_ctxt.branch) if dead_branch else cond_ctxt.branch
                history_value = control_flow_prims.switch(history_value, pred)[branch]
            pop = stack_ops.stack_pop_v2(history_value, value.dtype)
            pop.set_shape(value.shape)
        if self.grad_context.parallel_iterations > 1:
            self.grad_sync._add_control_input(pop.op)
        return pop

    def GetRealValue(self, value):  # noqa: N802
        """`value` (a forward-loop tensor) as seen by the backward loop."""
        real = self.history_map.get(value)
        if real is not None:
            return real
        cur_value, cur_state, history = value, self, None
        while True:
            enter_op = _loop_constant_enter(cur_value)
            if enter_op is not None:
                cur_value = enter_op.inputs[0]
                cur_state = cur_state.outer_grad_state
                if cur_state is None:
                    real = self.grad_context.AddValue(cur_value)
                    break
            elif cur_value.op.type == "Const":
                # A constant is cloned in the backward loop, not stacked.
                real = array_ops.constant(cur_value.op._attr("value"), dtype=cur_value.dtype)
                break
            else:
                self.grad_context.Exit()
                try:
                    history = cur_state.AddForwardAccumulator(cur_value)
                finally:
                    self.grad_context.Enter()
                break
        if real is None:
            real = cur_state.AddBackpropAccumulatedValue(history, cur_value)
            if cur_state is not self:
                real = self.grad_context.AddValue(real)
        self.history_map[value] = real
        return real


def _loop_constant_enter(t):
    op = t.op
    while op.type == "Identity" and op.inputs:
        op = op.inputs[0].op
    return op if cfc.is_loop_constant_enter(op) else None


class _entered:
    """Enter a context if there is one (TF's `if ctxt: ctxt.Enter()` pattern)."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __enter__(self):
        if self._ctx is not None:
            self._ctx.Enter()

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.Exit()


class ControlFlowState:
    """The GradLoopStates of one `gradients` call, keyed by forward loop."""

    def __init__(self):
        self._map: dict = {}

    def GetGradState(self, op, before):  # noqa: N802
        if before and _is_loop_exit(op):
            forward = op._control_flow_context.outer_context
            forward = cfc._while_of(forward)
        else:
            forward = _while_of_op(op)
        return self._map.get(forward) if forward is not None else None

    def EnterGradWhileContext(self, op, before):  # noqa: N802
        gs = self.GetGradState(op, before)
        if gs is not None:
            gs.grad_context.Enter()
        return gs

    def AddWhileContext(self, op, between_op_list, between_ops):  # noqa: N802
        forward = _while_of_op(op)
        if forward in self._map:
            return
        outer_forward = cfc._while_of(forward.outer_context)
        outer_state = self._map.get(outer_forward) if outer_forward is not None else None
        gs = GradLoopState(forward, outer_state)
        self._map[forward] = gs
        for loop_exit in gs.forward_loop_exits:
            if loop_exit.op not in between_ops:
                between_ops.add(loop_exit.op)
                between_op_list.append(loop_exit.op)

    def ZerosLikeForExit(self, val):  # noqa: N802
        shape = val.shape
        forward = val.op._control_flow_context
        outer_forward = cfc._while_of(forward.outer_context)
        outer_state = self._map.get(outer_forward) if outer_forward is not None else None
        if outer_state is not None:
            if shape.is_fully_defined():
                with _entered(outer_state.grad_context):
                    return array_ops.zeros(shape.as_list(), val.dtype)
            with _entered(forward.outer_context):
                zshape = array_ops.shape(val, optimize=False)
            history = outer_state.AddForwardAccumulator(zshape)
            with _entered(outer_state.grad_context):
                real_shape = outer_state.AddBackpropAccumulatedValue(history, zshape)
                return array_ops.zeros(real_shape, val.dtype)
        if shape.is_fully_defined():
            return array_ops.zeros(shape.as_list(), val.dtype)
        return array_ops.zeros_like(val, optimize=False)

    def ZerosLike(self, op, index):  # noqa: N802
        """A zero gradient for output `index` of `op`, built in the backward loop."""
        if is_loop_switch(op):
            return None
        dead_branch = op.type == "Switch"
        forward = _while_of_op(op)
        gs = self._map.get(forward)
        if gs is None:
            return zeros_like_outside_loop(op, index)
        op_ctxt = op._control_flow_context
        val = op.outputs[index]
        shape = val.shape
        if shape.is_fully_defined():
            result = array_ops.zeros(shape.as_list(), val.dtype)
            if dead_branch:
                pred = gs.history_map.get(op_ctxt.pred)
                if pred is None:
                    g = gs.grad_context
                    g.Exit()
                    history = gs.AddForwardAccumulator(op_ctxt.pred)
                    g.Enter()
                    pred = gs.AddBackpropAccumulatedValue(history, op_ctxt.pred)
                    gs.history_map[op_ctxt.pred] = pred
                result = control_flow_prims.switch(result, pred)[1 - op_ctxt.branch]
            return result
        graph = op.graph
        if dead_branch:
            outer = op_ctxt.outer_context
            with cfc._raw(graph), _entered(outer):
                val = control_flow_prims.switch(op.inputs[0], op_ctxt.pred)[1 - op_ctxt.branch]
                zshape = array_ops.shape(val, optimize=False)
            val.op._control_flow_context = op_ctxt
            zshape.op._control_flow_context = op_ctxt
        else:
            with cfc._raw(graph), _entered(op_ctxt):
                zshape = array_ops.shape(val, optimize=False)
        g = gs.grad_context
        g.Exit()
        history = gs.AddForwardAccumulator(zshape, dead_branch=dead_branch)
        g.Enter()
        real_shape = gs.AddBackpropAccumulatedValue(history, zshape, dead_branch)
        return array_ops.zeros(real_shape, val.dtype)

    def ProcessUnusedLoopExits(self, pending, to_ops_set):  # noqa: N802
        loop_exits = []
        for gs in self._map.values():
            for y in gs.forward_loop_exits:
                if pending[y.op] == 0:
                    gs.pending_exits_count -= 1
                    if y.op not in to_ops_set:
                        gs.unused_exits.append(y)
                    if gs.pending_exits_count == 0:
                        loop_exits.extend(gs.unused_exits)
            for y in gs.forward_context.loop_enters:
                if pending[y.op] == 0:
                    pending[y.op] = 1
        return loop_exits

    def ExitReady(self, exit_t, has_grad):  # noqa: N802
        """Exit `exit_t` of a loop has all its gradients: what the walk queues now.

        A loop's backward pass starts once every one of its exits is ready; then each
        of them is returned as (exit, needs_zeros), needs_zeros for those without a
        gradient when another exit has one.  Before that: nothing.
        """
        gs = self.GetGradState(exit_t.op, before=False)
        gs.deferred_exits.append(exit_t)
        gs.pending_exits_count -= 1
        if gs.pending_exits_count != 0:
            return []
        ready = []
        for y in gs.deferred_exits:
            if has_grad(y.op):
                ready.append((y, False))
            else:
                gs.unused_exits.append(y)
        fill = bool(ready)
        return ready + [(y, fill) for y in gs.unused_exits]

    def PostProcessing(self):  # noqa: N802
        """A loop variable whose next value ignores its current one gets zero gradients
        after the first backward iteration."""
        for gs in self._map.values():
            for b_merge in gs.switch_map.values():
                if b_merge.op.inputs[0] is b_merge.op.inputs[1]:
                    dtype = b_merge.op.inputs[0].dtype
                    shape = b_merge.op.inputs[0].shape
                    if shape.is_fully_defined():
                        with _entered(gs.grad_context):
                            grad_val = array_ops.zeros(shape.as_list(), dtype)
                            nxt = control_flow_prims.next_iteration(grad_val)
                    else:
                        with _entered(gs.grad_context.outer_context):
                            enter_grad = b_merge.op.inputs[0].op.inputs[0]
                            grad_val = array_ops.zeros(
                                array_ops.shape(enter_grad, optimize=False), dtype
                            )
                        with _entered(gs.grad_context):
                            nxt = control_flow_prims.next_iteration(grad_val)
                    b_merge.op._update_input(1, nxt)


def zeros_like_output(op, index, state):
    """A zero gradient for output `index` of `op` (None for a loop's Switch).

    Outside while loops this is the plain graph's ZerosLike, except for a cond's Switch,
    whose zeros must exist on its untaken side only.
    """
    if state is not None:
        return state.ZerosLike(op, index)
    return zeros_like_outside_loop(op, index)


def zeros_like_outside_loop(op, index):
    """Zeros for output `index` of `op`; for a cond Switch, only on its untaken side."""
    val = op.outputs[index]
    if op.type != "Switch" or not isinstance(op._control_flow_context, cfc.CondContext):
        if val.dtype == dtypes.resource:
            return _resource_zeros(val)
        # TF's zeros_like(val, optimize=False): one ZerosLike named "zeros_like"
        return ops.apply_op("ZerosLike", [val], name="zeros_like").outputs[0]
    ctx = op._control_flow_context
    switch_val = control_flow_prims.switch(op.inputs[0], ctx.pred)[1 - ctx.branch]
    pivot = array_ops.identity(switch_val)
    with ops.control_dependencies([pivot]):
        if val.dtype == dtypes.resource:
            return _resource_zeros(switch_val)
        zshape = array_ops.shape(switch_val, optimize=False)
        return array_ops.zeros(zshape, dtype=val.dtype)


def _resource_zeros(handle):
    """TF's zero gradient of a resource variable's handle: zeros of the variable's shape
    and dtype (read from the VarHandleOp the handle comes from)."""
    src = resource_variable_ops._handle_source(handle)
    dtype, static = dtypes.float32, None
    if src is not None:
        dtype = src._attr("dtype")
        static = src._attr("shape")
    zeros = array_ops.zeros(resource_variable_ops.variable_shape(handle), dtype=dtype)
    if static is not None:
        zeros.set_shape(static)
    return zeros


def maybe_create_control_flow_state(between_op_list, between_ops, colocate):
    state = None
    for op in list(between_op_list):
        if _is_loop_exit(op):
            if state is None:
                state = ControlFlowState()
            if colocate:
                with op.graph.colocate_with(op):
                    state.AddWhileContext(op, between_op_list, between_ops)
            else:
                state.AddWhileContext(op, between_op_list, between_ops)
    return state
