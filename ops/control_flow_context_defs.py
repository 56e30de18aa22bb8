"""TF's CondContextDef / WhileContextDef: how a MetaGraphDef carries the contexts of
control flow v1 (the "cond_context" and "while_context" collections), so that the
gradient of an imported cond or while loop is built as the gradient of one built here.

`context_to_proto(ctx, export_scope)` writes what TF writes: the context's names
(relative to `export_scope`), its values (every output of an op in it or in a context
nested in it, and the external tensors it maps in), the external -> internal map, and
the contexts nested in it.  `context_from_proto(proto, import_scope)` rebuilds a
CondContext / WhileContext bound to the imported tensors and sets the context of each
op whose output it lists (external values excepted), then rebuilds the nested contexts
inside it, so an op ends in its innermost context.

Invariants:
- Only contexts TF keeps are written: top-level ones from the collections, the rest as
  nested contexts; the loops that gradients build (their `grad_state` set) never are.
- A context whose name lies outside `export_scope` is skipped (None), as TF's.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.ops.control_flow_contexts import CondContext, WhileContext
from asyncflow.protos.control_flow_pb2 import (
    CondContextDef,
    ControlFlowContextDef,
    ValuesDef,
    WhileContextDef,
)

__all__ = ["context_to_proto", "context_from_proto", "cond_from_proto", "while_from_proto"]


# -- names -------------------------------------------------------------------------------


def _strip(name: str, scope: str | None) -> str:
    """TF's strip_name_scope: `name` without a leading `scope/` (unchanged otherwise)."""
    if not scope:
        return name
    prefix = scope.rstrip("/") + "/"
    return name[len(prefix) :] if name.startswith(prefix) else name


def _prepend(name: str, scope: str | None) -> str:
    return f"{scope.rstrip('/')}/{name}" if scope else name


def _in_scope(name: str, scope: str | None) -> bool:
    return not scope or name.startswith(scope)


# -- export --------------------------------------------------------------------------------


def _members(ctx) -> tuple[list, list]:
    """(ops in `ctx` or nested in it, contexts directly nested in it), graph order."""
    members, nested, seen = [], [], set()
    for op in ctx._graph.get_operations():
        inner = op._control_flow_context
        if inner is None or not ctx.contains(inner):
            continue
        members.append(op)
        while inner is not ctx and inner._outer_context is not ctx:
            inner = inner._outer_context
        is_grad = getattr(inner, "_grad_state", None) is not None
        if inner is not ctx and id(inner) not in seen and not is_grad:
            seen.add(id(inner))
            nested.append(inner)
    return members, nested


def _outputs(op) -> list:
    """The outputs of `op` its context holds: a cond's Switch of an external value
    feeds its branch only (TF's CondContext lists that output alone)."""
    ctx = op._control_flow_context
    if op.type == "Switch" and isinstance(ctx, CondContext):
        return [op.outputs[ctx.branch]]
    return op.outputs


def _values_def(ctx, members, scope, out: ValuesDef) -> None:
    names = {t.name for op in members for t in _outputs(op)}
    names.update(t.name for t in ctx._values if isinstance(t, ops.Tensor))
    external = {
        k.name: v.name
        for k, v in ctx._external_values.items()
        if isinstance(k, ops.Tensor) and isinstance(v, ops.Tensor)
    }
    names.update(external)
    out.values.extend(_strip(n, scope) for n in sorted(names))
    for k, v in external.items():
        out.external_values[_strip(k, scope)] = _strip(v, scope)


def _fill(ctx, scope, out) -> None:
    members, nested = _members(ctx)
    out.context_name = _strip(ctx.name, scope)
    if isinstance(ctx, CondContext):
        out.pred_name = _strip(ctx.pred.name, scope)
        out.pivot_name = _strip(ctx.pivot.name, scope)
        out.branch = ctx.branch
    else:
        out.parallel_iterations = ctx.parallel_iterations
        out.back_prop = ctx.back_prop
        out.swap_memory = ctx.swap_memory
        out.pivot_name = _strip(ctx.pivot.name, scope)
        out.pivot_for_pred_name = _strip(ctx._pivot_for_pred.name, scope)
        out.pivot_for_body_name = _strip(ctx._pivot_for_body.name, scope)
        out.loop_exit_names.extend(_strip(t.name, scope) for t in ctx.loop_exits)
        out.loop_enter_names.extend(_strip(t.name, scope) for t in ctx.loop_enters)
        if isinstance(ctx.maximum_iterations, ops.Tensor):
            out.maximum_iterations_name = _strip(ctx.maximum_iterations.name, scope)
    _values_def(ctx, members, scope, out.values_def)
    for inner in nested:
        slot = out.nested_contexts.add()
        _fill(inner, scope, slot.cond_ctxt if isinstance(inner, CondContext) else slot.while_ctxt)


def context_to_proto(ctx, export_scope: str | None = None):
    """`ctx` (a CondContext or WhileContext) as TF's CondContextDef / WhileContextDef;
    None when it lies outside `export_scope` or is a gradient's loop."""
    if not isinstance(ctx, CondContext | WhileContext) or not _in_scope(ctx.name, export_scope):
        return None
    if getattr(ctx, "_grad_state", None) is not None:
        return None
    out = CondContextDef() if isinstance(ctx, CondContext) else WhileContextDef()
    _fill(ctx, export_scope, out)
    return out


# -- import ------------------------------------------------------------------------------------


def _base(cls, graph, name: str, outer):
    """A context of `cls` with the state ControlFlowContext.__init__ gives, no ops built."""
    ctx = cls.__new__(cls)
    ctx._graph = graph
    ctx._outer_context = outer
    ctx._values = set()
    ctx._external_values = {}
    ctx._saved = []
    ctx.name = name
    return ctx


def _restore_values(ctx, values_def: ValuesDef, scope) -> None:
    graph = ctx._graph
    external = {}
    for k, v in values_def.external_values.items():
        key = _prepend(k, scope)
        external[key] = graph.as_graph_element(_prepend(v, scope))
    names = [_prepend(n, scope) for n in values_def.values]
    ctx._values = {graph.as_graph_element(n) for n in names if ":" in n}
    ctx._external_values = {graph.as_graph_element(k): v for k, v in external.items()}
    for op_name in sorted({n.split(":")[0] for n in names if n not in external}):
        graph.as_graph_element(op_name)._control_flow_context = ctx


def _restore_nested(ctx, nested, scope) -> None:
    for slot in nested:
        which = slot.WhichOneof("ctxt")
        if which == "cond_ctxt":
            cond_from_proto(slot.cond_ctxt, scope, outer=ctx)
        elif which == "while_ctxt":
            while_from_proto(slot.while_ctxt, scope, outer=ctx)


def cond_from_proto(proto: CondContextDef, import_scope: str | None = None, outer=None):
    """The CondContext a CondContextDef describes, bound to the default graph's ops.

    Raises:
      KeyError / ValueError: a name the graph lacks (as `Graph.as_graph_element`).
    """
    graph = ops.get_default_graph()
    ctx = _base(CondContext, graph, _prepend(proto.context_name, import_scope), outer)
    ctx._pred = graph.as_graph_element(_prepend(proto.pred_name, import_scope))
    ctx._pivot = graph.as_graph_element(_prepend(proto.pivot_name, import_scope))
    ctx._branch = int(proto.branch)
    _restore_values(ctx, proto.values_def, import_scope)
    _restore_nested(ctx, proto.nested_contexts, import_scope)
    return ctx


def while_from_proto(proto: WhileContextDef, import_scope: str | None = None, outer=None):
    """The WhileContext a WhileContextDef describes, bound to the default graph's ops.

    Raises:
      KeyError / ValueError: a name the graph lacks (as `Graph.as_graph_element`).
    """
    graph = ops.get_default_graph()

    def element(name):
        return graph.as_graph_element(_prepend(name, import_scope))

    ctx = _base(WhileContext, graph, _prepend(proto.context_name, import_scope), outer)
    ctx._maximum_iterations = (
        element(proto.maximum_iterations_name) if proto.maximum_iterations_name else None
    )
    ctx._parallel_iterations = int(proto.parallel_iterations)
    ctx._back_prop = bool(proto.back_prop)
    ctx._swap_memory = bool(proto.swap_memory)
    ctx._pivot = element(proto.pivot_name)
    ctx._pivot_for_pred = element(proto.pivot_for_pred_name)
    ctx._pivot_for_body = element(proto.pivot_for_body_name) if proto.pivot_for_body_name else None
    ctx._loop_exits = [element(n) for n in proto.loop_exit_names]
    ctx._loop_enters = [element(n) for n in proto.loop_enter_names]
    ctx._grad_state = None
    _restore_values(ctx, proto.values_def, import_scope)
    if import_scope:
        # The frame takes the context's scoped name, as TF's: loops imported twice under
        # two scopes stay two frames, and the Enters a gradient adds join this one.
        for t in ctx._values:
            if t.op.type == "Enter" and t.op._control_flow_context is ctx:
                t.op._attrs["frame_name"] = ctx.name
        graph._version += 1
    _restore_nested(ctx, proto.nested_contexts, import_scope)
    return ctx


def context_from_proto(proto, import_scope: str | None = None):
    """A CondContextDef, WhileContextDef or ControlFlowContextDef as its context."""
    if isinstance(proto, ControlFlowContextDef):
        which = proto.WhichOneof("ctxt")
        proto = getattr(proto, which) if which else None
    if isinstance(proto, CondContextDef):
        return cond_from_proto(proto, import_scope)
    if isinstance(proto, WhileContextDef):
        return while_from_proto(proto, import_scope)
    raise TypeError(f"Not a control flow context def: {type(proto).__name__}")
