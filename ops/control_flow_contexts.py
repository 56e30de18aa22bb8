"""cond, case and while_loop, and the contexts that build them (TF1's CondContext and
WhileContext).  Re-exported by `control_flow_ops`; see its module note for the graphs.

How a context sees the ops built inside it: `graph.apply_op` calls
`ctx.map_inputs(inputs)` before creating an op (external tensors become Switch or Enter
outputs) and `ctx.add_op(op)` after (pivot control edges, external control edges).
Ops this module builds itself are made with the context switched off (`_raw`) and
assigned to a context explicitly.

Invariants:
- `_output_context(t.op)` is the context a tensor lives in: an op's own context, except
  an Exit, whose output lives in its loop's outer context.
- A context maps each external tensor once (`_external_values`); later uses share the
  Switch/Enter.
"""

from __future__ import annotations

import contextlib

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, math_ops, tensor_array_ops
from asyncflow.ops import control_flow_prims as prims
from asyncflow.ops.control_flow_ordering import with_dependencies
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["ControlFlowContext", "CondContext", "WhileContext", "while_loop"]


# -- helpers ---------------------------------------------------------------------------


@contextlib.contextmanager
def _raw(graph):
    """Build ops outside every context and control dependency (TF's
    `control_dependencies(None)`, which also clears the control-flow context)."""
    saved = graph._control_flow_context
    graph._control_flow_context = None
    # Ops built raw get their context set by the caller: no outside-use check for them.
    graph._attached[_RAW] = graph._attached.get(_RAW, 0) + 1
    try:
        with graph.control_dependencies(None):
            yield
    finally:
        graph._control_flow_context = saved
        graph._attached[_RAW] -= 1


_RAW = "control_flow_raw_depth"


def _output_context(op):
    ctx = op._control_flow_context
    if ctx is not None and op.type == "Exit":
        ctx = ctx._outer_context
    return ctx


def _while_of(ctx):
    while ctx is not None and not isinstance(ctx, WhileContext):
        ctx = ctx._outer_context
    return ctx


def output_while_context(op):
    """The while loop whose frame `op`'s outputs live in (None outside loops)."""
    return _while_of(_output_context(op))


def is_loop_constant_enter(op) -> bool:
    return op.type == "Enter" and bool(op._attr("is_constant"))


def _identity(x, name=None):
    return ops.apply_op("Identity", [x], name=name or "Identity").outputs[0]


def _is_variable_snapshot(t) -> bool:
    """An Identity of a reference-typed variable (`Variable/read`)."""
    op = t.op
    return (
        op.type == "Identity"
        and bool(op._inputs)
        and op._inputs[0]._is_ref
        and op._inputs[0].op.type in ("VariableV2", "Variable")
    )


def _set_control_inputs(op, keep) -> None:
    for c in op._control_inputs:
        if c not in keep:
            c._control_outputs.remove(op)
    op._control_inputs = list(keep)
    op._graph._version += 1


def _leaf_components(x) -> list:
    """The tensors that carry one leaf of a structure through control flow: a
    TensorArray's flow, the parts of an IndexedSlices or SparseTensor (TF's composites,
    carried whole rather than densified), or the leaf itself."""
    if isinstance(x, SparseTensor):
        return [x.indices, x.values, x.dense_shape]
    if isinstance(x, IndexedSlices):
        parts = [x.values, x.indices]
        return parts if x.dense_shape is None else parts + [x.dense_shape]
    if hasattr(x, "_cf_parts"):  # an ExtensionType value: its tensors (TF's components)
        return x._cf_parts()
    return [x.flow if isinstance(x, tensor_array_ops.TensorArray) else x]


def _flat_components(leaves) -> list:
    return [c for x in leaves for c in _leaf_components(x)]


def _pack_components(leaves, flat) -> list:
    """`leaves` rebuilt from the counterparts, in `flat`, of their components."""
    out, pos = [], 0
    for x in leaves:
        n = len(_leaf_components(x))
        parts, pos = flat[pos : pos + n], pos + n
        if isinstance(x, SparseTensor):
            out.append(SparseTensor(*parts))
        elif isinstance(x, IndexedSlices):
            out.append(IndexedSlices(parts[0], parts[1], parts[2] if n > 2 else None))
        elif isinstance(x, tensor_array_ops.TensorArray):
            out.append(tensor_array_ops.build_ta_with_new_flow(x, parts[0]))
        elif hasattr(x, "_cf_parts"):
            out.append(x._cf_rebuild(parts))
        else:
            out.append(parts[0])
    return out


def _composite_kind(x):
    if isinstance(x, SparseTensor):
        return "SparseTensor"
    if isinstance(x, IndexedSlices):
        return "IndexedSlices" if x.dense_shape is not None else "IndexedSlices without shape"
    if hasattr(x, "_cf_kind"):  # an ExtensionType value: its spec, shapes aside
        return x._cf_kind()
    if hasattr(x, "_cf_parts"):
        return type(x)
    return None


def _invariant_shape(shape):
    """A loop variable's invariant as TF1 takes it: a shape; a TensorSpec's shape; for
    a SparseTensorSpec, the shape of the dense_shape vector ([rank])."""
    if shape is None:
        return tensor_shape.unknown_shape()
    if getattr(shape, "_spec_of", None) == "sparse":
        return tensor_shape.TensorShape([shape.shape.rank])  # ([None] for an unknown rank)
    return tensor_shape.as_shape(getattr(shape, "shape", shape))


def _check_type_spec(leaf, spec) -> None:
    """A TensorSpec or SparseTensorSpec invariant must fit its loop variable's kind and
    dtype (TF's TypeError); a plain shape only constrains the shape."""
    if hasattr(leaf, "_cf_invariant_shapes"):  # an ExtensionType value: its Spec checks
        leaf._cf_invariant_shapes(spec)
        return
    kind = getattr(spec, "_spec_of", None)
    if kind is None:
        return
    if kind == "sparse":
        fits = isinstance(leaf, SparseTensor)
    else:
        fits = not isinstance(leaf, (SparseTensor, IndexedSlices)) and (
            isinstance(leaf, ops.Tensor) or not hasattr(leaf, "_fetch_components")
        )
    dtype = getattr(leaf, "dtype", None)  # (a Python value is converted later)
    if fits and dtype is not None:
        fits = dtypes.as_dtype(spec.dtype).base_dtype == dtypes.as_dtype(dtype).base_dtype
    if not fits:
        raise TypeError(f"TypeSpec {spec!r} is not compatible with {leaf!r}")


def _component_invariants(leaf, shape) -> list:
    """Shape invariants of a leaf's components, from the leaf's (TF's rules)."""
    if isinstance(leaf, IndexedSlices):
        out = [shape, tensor_shape.TensorShape([None])]
        return out if leaf.dense_shape is None else out + [leaf.dense_shape.shape]
    if isinstance(leaf, SparseTensor):
        if shape.ndims is None:  # TF still takes it (backward compatibility): any rank
            shape = tensor_shape.TensorShape([None])
        if shape.ndims != 1:
            raise ValueError(
                f"Expected a shape with 1 dimension. Obtained: {shape} which has "
                f"{shape.ndims} dimensions."
            )
        rank = shape.dims[0].value
        return [tensor_shape.TensorShape([None, rank]), tensor_shape.TensorShape([None]), shape]
    return [shape]


# -- contexts --------------------------------------------------------------------------


class ControlFlowContext:
    """Base of CondContext and WhileContext: nesting, membership, external values."""

    def __init__(self):
        self._graph = ops.get_default_graph()
        self._outer_context = self._graph._control_flow_context
        self._values: set = set()
        self._external_values: dict = {}
        self._saved: list = []

    @property
    def outer_context(self):
        return self._outer_context

    @property
    def grad_state(self):
        return None

    @property
    def back_prop(self) -> bool:
        outer = self._outer_context
        return True if outer is None else outer.back_prop

    def GetWhileContext(self):  # noqa: N802 - TF's name
        return _while_of(self)

    def Enter(self) -> None:  # noqa: N802
        self._saved.append(self._graph._control_flow_context)
        self._graph._control_flow_context = self

    def Exit(self) -> None:  # noqa: N802
        self._graph._control_flow_context = self._saved.pop()

    @contextlib.contextmanager
    def entered(self):
        self.Enter()
        try:
            yield self
        finally:
            self.Exit()

    def AddName(self, t) -> None:  # noqa: N802
        self._values.add(t)

    def contains(self, ctx) -> bool:
        """Whether `ctx` is this context or nested in it."""
        while ctx is not None:
            if ctx is self:
                return True
            ctx = ctx._outer_context
        return False

    def _is_internal(self, t) -> bool:
        return t in self._values or self.contains(_output_context(t.op))

    def _check_frame(self, t) -> None:
        w = output_while_context(t.op)
        if w is not None and not w.contains(self):
            raise ValueError(
                f"Cannot use '{t.name}' as input to an op in '{self.name}' because they are "
                "in different while loops."
            )

    # the apply_op hook
    def map_inputs(self, inputs) -> list:
        return [self.AddValue(t) for t in inputs]

    def add_op(self, op) -> None:
        op._control_flow_context = self
        self._add_op_internal(op)
        self._hide(op)

    def _hide(self, op) -> None:
        """What `Session.run` may not fetch or feed of an op built here (TF's rules:
        nothing inside a cond or loop is fetchable; nothing inside a loop feedable)."""
        self._graph.prevent_fetching(op)

    def check_use_outside(self, t, consumer_name: str) -> None:
        """`t`, from this context, feeds op `consumer_name` built outside every context.

        Raises:
          ValueError: `t` is a value of a while loop's body (TF's message).
        """
        if output_while_context(t.op) is not None and not self._graph._attached.get(_RAW):
            raise ValueError(
                f"Cannot use '{t.op.name}' as input to '{consumer_name}' because "
                f"'{t.op.name}' is in a while loop."
            )

    def _remove_external_control_edges(self, op):
        """Split op's control inputs into (internal, external) by while loop; drop the
        external ones (their frame differs)."""
        while_ctx = self.GetWhileContext()
        if while_ctx is None:
            return list(op._control_inputs), []
        internal, external = [], []
        for c in op._control_inputs:
            if output_while_context(c) is while_ctx:
                internal.append(c)
            else:
                external.append(c)
        if external:
            _set_control_inputs(op, internal)
        return internal, external


class CondContext(ControlFlowContext):
    """One branch of a cond: `pred` selects it when it equals `branch`."""

    def __init__(self, pred, pivot, branch: int, name: str = "cond_text"):
        super().__init__()
        self.name = self._graph.unique_name(name)
        self._pred = pred
        self._pivot = pivot
        self._branch = branch
        self._values.add(pred)
        self._external_values[pred] = pred
        self._values.add(pivot)
        pivot.op._control_flow_context = self

    @property
    def pred(self):
        return self._pred

    @property
    def pivot(self):
        return self._pivot

    @property
    def branch(self) -> int:
        return self._branch

    def GetControlPivot(self):  # noqa: N802
        return self._pivot

    def AddValue(self, val):  # noqa: N802
        ext = self._external_values.get(val)
        if ext is not None:
            return ext
        if self._is_internal(val):
            return val
        real = val
        if self._outer_context is not None:
            real = self._outer_context.AddValue(val)
        else:
            self._check_frame(val)
        with _raw(self._graph):
            result = prims.switch(real, self._pred)[self._branch]
        result.op._control_flow_context = self
        self._hide(result.op)
        self._external_values[val] = result
        self._external_values[real] = result
        return result

    def _add_op_internal(self, op) -> None:
        if not op._inputs:
            internal, _ = self._remove_external_control_edges(op)
            if not any(self.contains(_output_context(c)) for c in internal):
                op._add_control_input(self._pivot.op)
        else:
            self._remove_external_control_edges(op)

    def BuildCondBranch(self, fn):  # noqa: N802
        """Call `fn` in this context; (its result, the flat tensors to merge)."""
        original = fn()
        if original is None:
            return None, []
        flat = []
        for v in nest.flatten(original):
            if isinstance(v, ops.Operation):
                flat.append(with_dependencies([v], self._pivot))
            elif v is None:
                raise ValueError("true_fn and false_fn must not return None inside a structure")
            else:
                flat.extend(self.AddValue(ops.convert_to_tensor(c)) for c in _leaf_components(v))
        return original, flat


class WhileContext(ControlFlowContext):
    """One while loop: its frame name, pivots, enters and exits."""

    def __init__(
        self,
        maximum_iterations=None,
        parallel_iterations: int = 10,
        back_prop: bool = True,
        swap_memory: bool = False,
        name: str = "while_context",
        grad_state=None,
    ):
        super().__init__()
        self.name = self._graph.unique_name(name)
        self._maximum_iterations = maximum_iterations
        self._parallel_iterations = parallel_iterations
        self._back_prop = back_prop
        self._swap_memory = swap_memory
        self._pivot_for_pred = None
        self._pivot_for_body = None
        self._pivot = None
        self._loop_exits: list = []
        self._loop_enters: list = []
        self._grad_state = grad_state

    maximum_iterations = property(lambda self: self._maximum_iterations)
    parallel_iterations = property(lambda self: self._parallel_iterations)
    swap_memory = property(lambda self: self._swap_memory)
    pivot = property(lambda self: self._pivot)
    loop_exits = property(lambda self: self._loop_exits)
    loop_enters = property(lambda self: self._loop_enters)
    grad_state = property(lambda self: self._grad_state)

    @property
    def back_prop(self) -> bool:
        return self._back_prop

    def GetControlPivot(self):  # noqa: N802
        return self._pivot_for_body if self._pivot_for_body is not None else self._pivot_for_pred

    def _enter(self, x, is_constant: bool, name: str = "Enter"):
        with _raw(self._graph):
            out = prims.enter(
                x,
                self.name,
                is_constant=is_constant,
                parallel_iterations=self._parallel_iterations,
                name=name,
            )
        if not is_constant:  # the loop variable's shape (Enter's own is unknown, as TF's)
            out.set_shape(getattr(x, "shape", None))
        self._fix_control_inputs_and_context(out)
        self._graph.prevent_feeding(out)  # (an Enter stays fetchable, as TF's)
        self._values.add(out)
        return out

    def _hide(self, op) -> None:
        if self._outer_context is not None or op.type != "Exit":
            self._graph.prevent_fetching(op)
            for t in op.outputs:
                self._graph.prevent_feeding(t)

    def _fix_control_inputs_and_context(self, enter_t) -> None:
        """An Enter keeps the user's control dependencies that live in its outer frame."""
        outer_while = _while_of(self._outer_context)
        for c in self._graph._current_control_inputs():
            if output_while_context(c) is outer_while and c is not enter_t.op.inputs[0].op:
                enter_t.op._add_control_input(c)
        enter_t.op._control_flow_context = self

    def AddValue(self, val):  # noqa: N802
        ext = self._external_values.get(val)
        if ext is not None:
            return ext
        if self._is_internal(val):
            return val
        current = _while_of(self._graph._control_flow_context)
        if current is not None and current._grad_state is not None:
            forward = output_while_context(val.op)
            if forward is current._grad_state.forward_context:
                real = current._grad_state.GetRealValue(val)
                self._external_values[val] = real
                return real
        if _is_variable_snapshot(val) and self.GetControlPivot() is not None:
            read = self._read_in_each_iteration(val)
            self._external_values[val] = read
            return read
        if self._outer_context is not None:
            result = self._outer_context.AddValue(val)
        else:
            self._check_frame(val)
            result = val
        enter = self._enter(result, is_constant=True)
        self._external_values[val] = enter
        return enter

    def _read_in_each_iteration(self, snapshot):
        """A variable's value read afresh by each iteration (after its pivot).

        TF enters the variable's `read` snapshot, whose buffer is the variable's own, so
        an iteration sees what earlier iterations assigned (a condition reading a
        variable that the body increments ends).  Here a read is a value that later
        updates leave alone, so the variable itself enters (TF's RefEnter) and each
        iteration reads it.
        """
        ref = self.AddValue(snapshot.op.inputs[0])
        with _raw(self._graph):
            read = _identity(ref, name="read")
        read.op._control_flow_context = self
        read.op._add_control_input(self.GetControlPivot().op)
        self._hide(read.op)
        self._values.add(read)
        return read

    def _add_op_internal(self, op) -> None:
        if not op._inputs:
            internal, external = self._remove_external_control_edges(op)
            if not internal:
                op._add_control_input(self.GetControlPivot().op)
        else:
            _, external = self._remove_external_control_edges(op)
            if not op._control_inputs and all(is_loop_constant_enter(t.op) for t in op._inputs):
                # Only loop invariants feed it: without this edge it would run once,
                # outside any iteration's control.
                op._add_control_input(self.GetControlPivot().op)
        if external:
            with self._graph.control_dependencies(None):
                pulled = [_identity(c.outputs[0]).op for c in external if c.outputs]
            op._add_control_inputs(pulled)

    # -- building the loop
    def _init_enters(self, real_vars, shape_invariants):
        enters = [self._enter(x, is_constant=False) for x in real_vars]
        # In a nested loop, an Enter fed by an outer invariant runs once per outer
        # iteration only if it waits for the outer pivot.
        outer = self._outer_context
        pivot = None
        while outer is not None and pivot is None:
            pivot = outer.GetControlPivot()
            outer = outer._outer_context
        if pivot is not None:
            for e in enters:
                if is_loop_constant_enter(e.op.inputs[0].op):
                    e.op._add_control_input(pivot.op)
        if shape_invariants is not None:
            for inp, e, shape in zip(real_vars, enters, shape_invariants):
                if not _shape_less_than_or_equal(inp.shape, shape):
                    raise ValueError(
                        f"The shape invariant specified for {inp.name} is not compatible with "
                        f"the initial shape of the loop variable. It enters the loop with "
                        f"shape {inp.shape}, but the specified shape invariant is {shape}."
                    )
                e._shape = shape
        self._loop_enters = enters
        return enters

    def BuildLoop(self, pred, body, loop_vars, shape_invariants, return_same_structure):  # noqa: N802
        flat_orig = nest.flatten(loop_vars)
        if shape_invariants is not None:
            nest.assert_same_structure(loop_vars, shape_invariants, check_types=False)
            for leaf, spec in zip(flat_orig, nest.flatten(shape_invariants)):
                _check_type_spec(leaf, spec)
        flat = [ops.convert_to_tensor(c) for c in _flat_components(flat_orig)]
        if shape_invariants is not None:
            shape_invariants = [
                s
                for leaf, shape in zip(flat_orig, nest.flatten(shape_invariants))
                for s in (
                    leaf._cf_invariant_shapes(shape)
                    if hasattr(leaf, "_cf_invariant_shapes")
                    else _component_invariants(leaf, _invariant_shape(shape))
                )
            ]
        elif any(isinstance(leaf, SparseTensor) for leaf in flat_orig):
            # TF's default invariant of a SparseTensor keeps only its rank: any number
            # of values ([None, rank] indices, [None] values).
            shape_invariants, k = [], 0
            for leaf in flat_orig:
                n = len(_leaf_components(leaf))
                if isinstance(leaf, SparseTensor):
                    shape_invariants += _component_invariants(leaf, flat[k + 2].shape)
                else:
                    shape_invariants += [c.shape for c in flat[k : k + n]]
                k += n
        real_vars = flat
        if self._outer_context is not None:
            real_vars = [self._outer_context.AddValue(x) for x in flat]
        with self.entered():
            body_result, exits = self._build_loop(
                pred, body, loop_vars, flat_orig, real_vars, shape_invariants
            )
        flat_result = nest.flatten(body_result)
        packed = nest.pack_sequence_as(body_result, _pack_components(flat_result, exits))
        if return_same_structure:
            return packed
        return packed[0] if len(exits) == 1 else packed

    def _build_loop(self, pred, body, loop_vars, flat_orig, real_vars, shape_invariants):
        enters = self._init_enters(real_vars, shape_invariants)
        # The Enters keep the user's outer control dependencies (TF's
        # _FixControlInputsAndContext); everything else in the loop runs after them, so
        # (as TF's control dependencies skip an op its inputs already order) the rest of
        # the loop takes none of its own: a Merge has no pivot yet to wait on, and an
        # Exit waiting on the body would be dead when the loop ends.
        with self._graph.control_dependencies(None):
            return self._build_loop_body(pred, body, loop_vars, flat_orig, enters)

    def _build_loop_body(self, pred, body, loop_vars, flat_orig, enters):
        merges = [prims.merge([e, e])[0] for e in enters]
        self._pivot_for_pred = merges[0]
        packed = nest.pack_sequence_as(loop_vars, _pack_components(flat_orig, merges))
        c = ops.convert_to_tensor(pred(*packed))
        if c.dtype != dtypes.bool:
            raise TypeError(f"cond of while_loop must return a boolean Tensor, got {c.dtype.name}")
        if c.shape.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {c.shape.ndims} for 'LoopCond'")
        self._pivot = prims.loop_cond(c, name="LoopCond")
        switches = [prims.switch(m, self._pivot) for m in merges]
        # A reference loop variable (a variable's ref) reaches the body as itself (TF's
        # RefIdentity), so the body may update it.
        body_vars = [
            ops.apply_op("RefIdentity", [sw[1]], name="Identity").outputs[0]
            if sw[1]._is_ref
            else _identity(sw[1])
            for sw in switches
        ]
        self._pivot_for_body = body_vars[0]
        packed_body = nest.pack_sequence_as(loop_vars, _pack_components(flat_orig, body_vars))
        result = body(*packed_body)
        if not nest.is_nested(result):
            result = [result]
        # TF compares the two as lists, so only the outer sequence type may differ; a list
        # where loop_vars nest a tuple (or maximum_iterations' wrapped vars) is a TypeError
        nest.assert_same_structure(list(packed_body), list(result))
        for var, res in zip(flat_orig, nest.flatten(result)):
            if _composite_kind(var) != _composite_kind(res):
                raise ValueError(
                    "The two structures don't have the same nested structure: loop_vars "
                    f"and the result of body. {var} vs {res}"
                )
        flat_res = [ops.convert_to_tensor(c) for c in _flat_components(nest.flatten(result))]
        if len(flat_res) != len(merges):
            raise ValueError(
                "Number of inputs and outputs of body must match loop_vars: "
                f"{len(merges)}, {len(flat_res)}"
            )
        for m, v in zip(merges, flat_res):
            add_next_and_back_edge(m, v)
        exits = [prims.exit(sw[0]) for sw in switches]
        self._loop_exits = exits
        return result, exits

    # -- used by gradients (asyncflow/control_flow_grad.py)
    def AddForwardLoopCounter(self, outer_grad_state):  # noqa: N802
        """A counter of this loop's iterations: (total count Exit, next-index tensor)."""
        n = array_ops.constant(0, name="f_count")
        if outer_grad_state is not None:
            # The pushes of one run of an inner loop precede those of the next run.
            n.op._add_control_input(outer_grad_state.forward_index.op.inputs[0].op)
        with self.entered():
            enter_n = self._enter(n, is_constant=False, name="f_count")
            self._loop_enters.append(enter_n)
            merge_n = prims.merge([enter_n, enter_n])[0]
            switch_n = prims.switch(merge_n, self._pivot)
            index = math_ops.add(switch_n[1], 1)
            next_n = prims.next_iteration(index)
            merge_n.op._update_input(1, next_n)
            total = prims.exit(switch_n[0], name="f_count")
            self._loop_exits.append(total)
        return total, next_n

    def AddBackpropLoopCounter(self, count, outer_grad_state):  # noqa: N802
        """Count down from `count` to 0 in this (gradient) loop; the next-count tensor."""
        one = array_ops.constant(1, name="b_count")
        with self.entered():
            enter_count = self._enter(count, is_constant=False, name="b_count")
            self._loop_enters.append(enter_count)
            merge_count = prims.merge([enter_count, enter_count])[0]
            self._pivot_for_pred = merge_count
            pred = math_ops.greater_equal(merge_count, one)
            self._pivot = prims.loop_cond(pred, name="b_count")
            switch_count = prims.switch(merge_count, self._pivot)
            index = math_ops.subtract(switch_count[1], one)
            self._pivot_for_body = index
            next_count = prims.next_iteration(index)
            merge_count.op._update_input(1, next_count)
            final_zero = prims.exit(switch_count[0], name="b_count")
            self._loop_exits.append(final_zero)
            if outer_grad_state is not None:
                # The pops of one run of an inner loop precede those of the next run.
                outer_grad_state.grad_sync._add_control_input(final_zero.op)
        return next_count

    def AddBackpropAccumulator(self, op, grad):  # noqa: N802
        """Sum `grad` over the iterations of this gradient loop (for a loop invariant)."""
        shape = grad.shape
        outer = self._outer_context
        with contextlib.ExitStack() as stack:
            self.Exit()
            stack.callback(self.Enter)
            if outer is not None:
                stack.enter_context(outer.entered())
            if shape.is_fully_defined():
                acc = array_ops.zeros(shape.as_list(), grad.dtype, name="b_acc")
            else:
                value = op.inputs[0]
                if isinstance(outer, WhileContext) and outer.grad_state is not None:
                    gs = self._grad_state
                    fwd_outer = gs.forward_context._outer_context
                    with contextlib.ExitStack() as s2:
                        outer.Exit()
                        s2.callback(outer.Enter)
                        if fwd_outer is not None:
                            s2.enter_context(fwd_outer.entered())
                        zeros_shape = array_ops.shape(value, optimize=False)
                    ogs = gs.outer_grad_state
                    history = ogs.AddForwardAccumulator(zeros_shape)
                    real_shape = ogs.AddBackpropAccumulatedValue(history, zeros_shape)
                    acc = array_ops.zeros(real_shape, grad.dtype)
                else:
                    acc = array_ops.zeros(array_ops.shape(value, optimize=False), grad.dtype)
        self.AddName(acc)
        enter_acc = self._enter(acc, is_constant=False, name="b_acc")
        self._loop_enters.append(enter_acc)
        merge_acc = prims.merge([enter_acc, enter_acc], name="b_acc")[0]
        switch_false, switch_true = prims.switch(merge_acc, self._pivot)
        add_acc = math_ops.add(switch_true, grad)
        next_acc = prims.next_iteration(add_acc)
        merge_acc.op._update_input(1, next_acc)
        result = prims.exit(switch_false, name="b_acc")
        self._loop_exits.append(result)
        return result

    def AddBackpropIndexedSlicesAccumulator(self, op, grad):  # noqa: N802
        """Gather `grad`, an IndexedSlices, over this gradient loop's iterations (for a
        loop invariant of a loop nested in no other): the rows of every iteration after
        one zero row at index 0, never densified (TF's)."""
        value = op.inputs[0]
        values, indices = grad.values, grad.indices
        row_shape = values.shape[1:] if values.shape.ndims is not None else None
        with contextlib.ExitStack() as stack:
            self.Exit()
            stack.callback(self.Enter)
            if self._outer_context is not None:
                stack.enter_context(self._outer_context.entered())
            if row_shape is not None and row_shape.is_fully_defined():
                init_values = array_ops.zeros([1] + row_shape.as_list(), values.dtype)
            else:
                rows = _resource_safe_shape(value)[1:]
                init_values = array_ops.zeros(array_ops.concat([[1], rows], 0), values.dtype)
            init_indices = array_ops.constant([0], indices.dtype)
            dense_shape = None
            if grad.dense_shape is not None:
                dense_shape = _resource_safe_shape(value, grad.dense_shape.dtype)
        out = []
        for init, part, shape in (
            (init_values, values, tensor_shape.TensorShape([None]).concatenate(row_shape)
             if row_shape is not None else tensor_shape.unknown_shape()),
            (init_indices, indices, tensor_shape.TensorShape([None])),
        ):  # fmt: skip
            self.AddName(init)
            enter = self._enter(init, is_constant=False, name="b_acc")
            enter._shape = shape
            self._loop_enters.append(enter)
            merge = prims.merge([enter, enter], name="b_acc")[0]
            switch_false, switch_true = prims.switch(merge, self._pivot)
            nxt = prims.next_iteration(array_ops.concat([switch_true, part], 0))
            merge.op._update_input(1, nxt)
            result = prims.exit(switch_false, name="b_acc")
            self._loop_exits.append(result)
            out.append(result)
        return IndexedSlices(out[0], out[1], dense_shape)


def _resource_safe_shape(t, out_type=dtypes.int32):
    """The shape of `t`, or (TF's _resource_safe_shape) of the variable a resource handle
    `t` points to: the handle's source, followed back through Enter/Identity/Switch."""
    if t.dtype == dtypes.resource:
        while t.op.inputs:
            t = t.op.inputs[0]
        return ops.apply_op("VariableShape", [t], {"out_type": out_type}).outputs[0]
    return array_ops.shape(t, out_type=out_type, optimize=False)


def _shape_less_than_or_equal(s1, s2) -> bool:
    if s2.dims is None:
        return True
    if s1.ndims != s2.ndims:
        return False
    for d1, d2 in zip(s1.dims, s2.dims):
        if d2.value is not None and d1.value != d2.value:
            return False
    return True


def add_next_and_back_edge(m, v, enforce_shape_invariant: bool = True):
    """NextIteration(v) as the back edge of loop Merge `m`."""
    v = ops.convert_to_tensor(v)
    nxt = prims.next_iteration(v)
    if enforce_shape_invariant and not _shape_less_than_or_equal(nxt.shape, m.shape):
        inp = m.op.inputs[0].op.inputs[0]
        raise ValueError(
            f"Input tensor '{inp.name}' enters the loop with shape {inp.shape}, but has "
            f"shape {nxt.shape} after one iteration. To allow the shape to vary across "
            "iterations, use the `shape_invariants` argument of tf.while_loop to specify "
            "a less-specific shape."
        )
    if nxt.dtype != m.dtype:
        raise TypeError(
            f"Loop variable {m.op.inputs[0].op.inputs[0].name} has dtype {m.dtype.name} "
            f"but the body returns dtype {nxt.dtype.name}"
        )
    m.op._update_input(1, nxt)
    return nxt


# -- while_loop --------------------------------------------------------------------------


def while_loop(
    cond,
    body,
    loop_vars,
    shape_invariants=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
    maximum_iterations=None,
    return_same_structure=False,
):
    """Repeat `body` while `cond` is true (TF1's classic `tf.while_loop`).

    `loop_vars` is any nested structure of tensors (and TensorArrays); `body` returns
    the same structure.  Up to `parallel_iterations` iterations run at once.
    `shape_invariants` relaxes the static shape each loop variable may take.

    Raises:
      ValueError: empty `loop_vars`, a body result whose structure or shape (with
        respect to the invariants) differs, a non-scalar `maximum_iterations`.
      TypeError: `cond`/`body` not callable, non-positive `parallel_iterations`, body
        results of another dtype, a non-bool `cond` result.
    """
    with ops.name_scope(name, "while", nest.flatten(loop_vars)):
        if not loop_vars:
            raise ValueError("No loop variables provided")
        if not callable(cond):
            raise TypeError("cond must be callable.")
        if not callable(body):
            raise TypeError("body must be callable.")
        if not isinstance(parallel_iterations, int) or parallel_iterations < 1:
            raise TypeError("parallel_iterations must be a positive integer.")
        try_to_pack = len(loop_vars) == 1 and not return_same_structure
        if maximum_iterations is not None:
            maximum_iterations = ops.convert_to_tensor(
                maximum_iterations, name="maximum_iterations"
            )
            if maximum_iterations.shape.ndims not in (None, 0):
                raise ValueError(
                    f"maximum_iterations must be a scalar, saw shape: {maximum_iterations.shape}"
                )
            counter = array_ops.constant(0, maximum_iterations.dtype, name="iteration_counter")
            orig_cond, orig_body = cond, body
            if try_to_pack:
                loop_vars = (counter, loop_vars[0])

                def cond(i, lv):
                    return math_ops.logical_and(i < maximum_iterations, orig_cond(lv))

                def body(i, lv):
                    return (i + 1, orig_body(lv))
            else:
                loop_vars = (counter, loop_vars)

                def cond(i, lv):
                    return math_ops.logical_and(i < maximum_iterations, orig_cond(*lv))

                def body(i, lv):
                    return (i + 1, orig_body(*lv))

            if shape_invariants is not None:
                shape_invariants = (
                    tensor_shape.TensorShape([]),
                    shape_invariants[0] if try_to_pack else shape_invariants,
                )
            try_to_pack = False
        ctx = WhileContext(
            maximum_iterations=maximum_iterations,
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
        )
        if ctx.outer_context is None:
            ops.add_to_collection(ops.GraphKeys.WHILE_CONTEXT, ctx)
        result = ctx.BuildLoop(cond, body, loop_vars, shape_invariants, return_same_structure)
        if maximum_iterations is not None:
            return result[1]
        return result
