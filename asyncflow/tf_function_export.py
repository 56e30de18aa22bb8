"""tf.function calls in the GraphDef asyncflow writes: TF's form where it can be.

A call runs here as its body inlined into the graph (asyncflow/tf_function.py); the
GraphDef `as_graph_def` writes turns each call back into what TF writes: a FunctionDef
of the graph's library (`__inference_<fn>_<n>`, one per trace) and one
`PartitionedCall` / `StatefulPartitionedCall` node named as the call, whose inputs are
the call's arguments then its captured tensors (and the call's control inputs), with
TF's attrs (`f`, `Tin`, `Tout`, `config`, `config_proto`, `executor_type`).  The
inlined nodes leave the GraphDef.  asyncflow imports such a GraphDef by inlining the
calls again (function_library), to the same names.

A call keeps its inlined form when the GraphDef needs its insides: a node outside the
call reads a tensor inside it (the gradient of a call reads the body's intermediate
values), the body holds cond / while control flow (TF1's frames have no place in a
FunctionDef), or the body holds something the GraphDef lacks.  Either form runs in TF
to the same values.

Invariant: the rewrite only removes a call's own nodes and replaces its result node;
every other node is left as it was.
"""

from __future__ import annotations

from asyncflow.dataset_functions import _add_body, _CannotExport, _output_ref
from asyncflow.graph_io import register_graph_def_exporter
from asyncflow.protos.function_pb2 import FunctionDef

__all__ = ["export_calls", "record_call"]

_CALLS = "tf_function_calls"  # (a list of _Call, in the graph's `_attached`)
_CONTROL_FLOW = frozenset(
    ["Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge",
     "NextIteration", "RefNextIteration", "LoopCond"]
)  # fmt: skip


class _Call:
    __slots__ = ("name", "func_graph", "function_name", "inputs", "own", "stateful")

    def __init__(self, name, func_graph, function_name, inputs, own, stateful):
        self.name = name  # the result node (IdentityN / NoOp), named as the call
        self.func_graph = func_graph
        self.function_name = function_name
        self.inputs = inputs  # the outer tensors: arguments, then captures
        self.own = own  # names of the call's inlined nodes (not the result node)
        self.stateful = stateful


def record_call(graph, name, func_graph, function_name, inputs, own, stateful) -> None:
    """Note a call inlined into `graph`, for export_calls."""
    graph._attached.setdefault(_CALLS, []).append(
        _Call(name, func_graph, function_name, list(inputs), set(own), stateful)
    )


def _node_of(ref: str) -> str:
    return ref[1:] if ref.startswith("^") else ref.split(":")[0]


def _tensor_ref(t) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def export_calls(graph, gd) -> None:
    """Rewrite GraphDef `gd` of `graph` in place: each recorded call as TF's call node."""
    calls = graph._attached.get(_CALLS)
    if not calls:
        return
    by_name = {nd.name: nd for nd in gd.node}
    readers: dict[str, set] = {}
    for nd in gd.node:
        for ref in nd.input:
            readers.setdefault(_node_of(ref), set()).add(nd.name)
    functions: dict[int, str] = {}
    dropped: set[str] = set()
    for call in calls:
        if call.name not in by_name or not all(n in by_name for n in call.own):
            continue
        inside = call.own | {call.name}
        if any(readers.get(n, set()) - inside for n in call.own):
            continue  # (a node outside reads the body: a gradient, say)
        if any(by_name[n].op in _CONTROL_FLOW for n in call.own):
            continue
        fname = functions.get(id(call.func_graph))
        if fname is None:
            try:
                fdef = _function_def(call.func_graph, call.function_name)
            except _CannotExport:
                continue
            gd.library.function.add().CopyFrom(fdef)
            fname = functions[id(call.func_graph)] = fdef.signature.name
        _as_call_node(by_name[call.name], call, fname, by_name)
        dropped |= call.own
    if dropped:
        keep = [nd for nd in gd.node if nd.name not in dropped]
        del gd.node[:]
        gd.node.extend(keep)


def _as_call_node(nd, call: _Call, fname: str, by_name: dict) -> None:
    fg = call.func_graph
    controls = sorted(
        {ref for n in call.own for ref in by_name[n].input if ref.startswith("^")}
        - {f"^{n}" for n in call.own}
    )
    device = nd.device
    nd.Clear()
    nd.name = call.name
    nd.op = "StatefulPartitionedCall" if call.stateful else "PartitionedCall"
    nd.device = device
    nd.input.extend(_tensor_ref(t) for t in call.inputs)
    nd.input.extend(controls)
    nd.attr["Tin"].list.type.extend(t.dtype.base_dtype.as_datatype_enum for t in call.inputs)
    nd.attr["Tin"].list.SetInParent()
    nd.attr["Tout"].list.type.extend(t.dtype.base_dtype.as_datatype_enum for t in fg.outputs)
    nd.attr["Tout"].list.SetInParent()
    nd.attr["f"].func.name = fname
    for key in ("config", "config_proto", "executor_type"):
        nd.attr[key].s = b""


def _function_def(fg, name: str) -> FunctionDef:
    """The FunctionDef of trace graph `fg`: its Placeholders as arguments (in fg.inputs
    order), its outputs as results, its last stateful op as a control output."""
    saved = fg._attached.pop(_CALLS, None)  # (calls inside stay inlined in the body)
    try:
        body_gd = fg.as_graph_def()
    finally:
        if saved is not None:
            fg._attached[_CALLS] = saved
    by_name = {nd.name: nd for nd in body_gd.node}
    placeholders = {t.op.name: t for t in fg.inputs}
    fdef = FunctionDef()
    fdef.signature.name = name
    names: dict[str, str] = {}
    for t in fg.inputs:
        arg = fdef.signature.input_arg.add()
        arg.name = _arg_name(t.op.name, names)
        arg.type = t.dtype.base_dtype.as_datatype_enum
        names[t.op.name] = arg.name
    body = [op for op in fg.get_operations() if op.name not in placeholders]
    if any(op.name not in by_name for op in body):
        raise _CannotExport(name)
    _add_body(fdef, body, names, by_name, {t.name: names[t.op.name] for t in fg.inputs})
    for nd in fdef.node_def:  # (colocation names nodes outside the function)
        if "_class" in nd.attr:
            del nd.attr["_class"]
    for k, t in enumerate(fg.outputs):
        out = fdef.signature.output_arg.add()
        out.name = "identity" if k == 0 else f"identity_{k}"
        out.type = t.dtype.base_dtype.as_datatype_enum
        fdef.ret[out.name] = (
            names[t.op.name] if t.op.name in placeholders else _output_ref(t, names)
        )
    for op in fg.control_outputs:
        if op.name in names:
            fdef.signature.control_output.append(names[op.name])
            fdef.control_ret[names[op.name]] = names[op.name]
    return fdef


def _arg_name(op_name: str, names: dict) -> str:
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in op_name).lower()
    if not base or not base[0].isalpha():  # (TF: an argument name is [a-z][a-z0-9_]*)
        base = "arg_" + base
    used = set(names.values())
    name = base
    while name in used:
        name += "_"
    return name


register_graph_def_exporter(export_calls)
