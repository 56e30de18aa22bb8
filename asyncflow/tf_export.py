"""GraphDef export in TF's form where asyncflow's graph differs: resource variables.

asyncflow updates a resource variable with the ref op's kernel on a `_ResourceAsRef`
view of its handle ("v/Ref"), an op TF does not have: a GraphDef holding one would not
load in TF.  `resource_twins` rewrites, in a GraphDef about to be written, each op that
takes such a view into its Resource twin as TF writes it (ApplyAdam(v/Ref, m/Ref, ...)
becomes ResourceApplyAdam(v, m, ...); ScatterUpdate's `T` becomes the twin's `dtype`;
Assign / AssignAdd / AssignSub / IsVariableInitialized become AssignVariableOp /
AssignAdd- / AssignSubVariableOp / VarIsInitializedOp; an op without ref inputs that
reads a view as a value, SaveV2 among them, reads a ReadVariableOp of the handle),
and drops the views nothing reads any more.  The twins are registered here too
(ops/resource_training_ops.py), so the rewritten GraphDef imports back and runs.

An op whose updated ref something reads as data becomes its twin plus a ReadVariableOp
of the handle that waits for it (`<op>/read`), and those readers read that, as TF's
optimizers build it (`resource_scatter_add` then `value()` under its control).

Invariants: node names never change, so control inputs stay valid; a view that a
rewritten op did not take stays (TF then rejects that node).
"""

from __future__ import annotations

from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.registry import get_op_def

__all__ = ["resource_twins", "tensor_array_handles"]

_VIEW = "_ResourceAsRef"


def _source(text: str) -> str:
    name = text[1:] if text.startswith("^") else text
    return name.split(":")[0]


def resource_twins(gd) -> None:
    """Rewrite GraphDef `gd` in place (see the module note)."""
    views = {nd.name: nd for nd in gd.node if nd.op == _VIEW}
    if not views:
        return
    data_readers: dict[str, int] = {}
    for nd in gd.node:
        for text in nd.input:
            if not text.startswith("^"):
                src = _source(text)
                data_readers[src] = data_readers.get(src, 0) + 1
    names = {nd.name for nd in gd.node}
    redirect: dict[str, str] = {}
    added = []
    for nd in gd.node:
        if nd.op == _VIEW or not any(_source(t) in views for t in nd.input):
            continue
        twin = _twin_def(nd.op)
        if twin is None:
            continue
        read = None
        if data_readers.get(nd.name) and not twin.outputs:
            # What reads the updated ref reads the variable after the update: a
            # ReadVariableOp of the handle waiting for the twin (TF's form).
            dtype = nd.attr["T"].type if "T" in nd.attr else None
            if dtype is None:
                continue
            handle = next(views[_source(t)].input[0] for t in nd.input if _source(t) in views)
            read = NodeDef(name=_unique(f"{nd.name}/read", names), op="ReadVariableOp")
            read.input.extend([handle, f"^{nd.name}"])
            read.attr["dtype"].type = dtype
            read.device = nd.device
            names.add(read.name)
        _rewrite(nd, twin, views)
        if read is not None:
            added.append(read)
            redirect[nd.name] = read.name
    if added:
        for nd in gd.node:
            for i, text in enumerate(nd.input):
                if not text.startswith("^") and text.split(":")[0] in redirect:
                    nd.input[i] = redirect[text.split(":")[0]]
        gd.node.extend(added)
    _reads_for_values(gd, views, names)
    used = {_source(t) for nd in gd.node for t in nd.input}
    keep = [nd for nd in gd.node if nd.op != _VIEW or nd.name in used]
    if len(keep) != len(gd.node):
        del gd.node[:]
        gd.node.extend(keep)


# Ops whose output 0 is a string handle here and a resource in TF (TensorArrays, and the
# stacks a loop's gradient keeps its forward values on).
_TA_SOURCES = ("TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape", "StackV2")
_FORWARDING = frozenset(
    ["Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge",
     "NextIteration", "RefNextIteration", "Identity"]
)  # fmt: skip
_DT_STRING, _DT_RESOURCE = 7, 20


def tensor_array_handles(gd) -> None:
    """A TensorArray's (or a StackV2's) handle is a string tensor here, a resource in TF:
    the control-flow primitives and Identities it passes through (a dynamic_rnn's loop and
    its gradient) get T = resource, as TF writes them."""
    sources = {nd.name for nd in gd.node if nd.op in _TA_SOURCES}
    if not sources:
        return
    handles = {(name, 0) for name in sources}  # (node, output) holding a handle
    consumers: dict[str, list] = {}
    for nd in gd.node:
        for text in nd.input:
            if not text.startswith("^"):
                consumers.setdefault(_source(text), []).append(nd)
    stack = list(sources)
    seen = set()
    while stack:
        name = stack.pop()
        for nd in consumers.get(name, ()):
            if nd.op not in _FORWARDING or nd.name in seen:
                continue
            fed = any(
                (_source(t), int(t.split(":")[1]) if ":" in t else 0) in handles
                for t in nd.input
                if not t.startswith("^")
            )
            if not fed or nd.attr["T"].type != _DT_STRING:
                continue
            seen.add(nd.name)
            nd.attr["T"].type = _DT_RESOURCE
            outputs = 2 if nd.op in ("Switch", "RefSwitch") else 1
            handles.update((nd.name, k) for k in range(outputs))
            stack.append(nd.name)


def _reads_for_values(gd, views: dict, names: set) -> None:
    """A view an op without ref inputs takes (SaveV2 saving the variable, an Identity)
    is a value: each such op reads a ReadVariableOp of the handle instead (one per
    view, `<view>/read`), as TF's Saver reads a resource variable."""
    reads: dict[str, str] = {}
    added = []
    for nd in gd.node:
        if nd.op == _VIEW or not any(_source(t) in views for t in nd.input):
            continue
        try:
            op_def = get_op_def(nd.op)
        except KeyError:
            continue
        if any(a.is_ref for a in op_def.inputs):
            continue  # (a ref op with no TF twin: it keeps the view)
        for i, text in enumerate(nd.input):
            src = _source(text)
            if src not in views:
                continue
            if src not in reads:
                view = views[src]
                read = NodeDef(name=_unique(f"{src}/read", names), op="ReadVariableOp")
                read.input.append(view.input[0])
                read.attr["dtype"].CopyFrom(view.attr["dtype"])
                read.device = view.device
                names.add(read.name)
                added.append(read)
                reads[src] = read.name
            nd.input[i] = ("^" if text.startswith("^") else "") + reads[src]
    gd.node.extend(added)


def _unique(name: str, names: set) -> str:
    out, k = name, 1
    while out in names:
        out, k = f"{name}_{k}", k + 1
    return out


# Ref ops whose resource form TF names otherwise.
_NAMED = {
    "IsVariableInitialized": "VarIsInitializedOp",
    "Assign": "AssignVariableOp",
    "AssignAdd": "AssignAddVariableOp",
    "AssignSub": "AssignSubVariableOp",
}


def _twin_def(op_type: str):
    try:
        return get_op_def(_NAMED.get(op_type, "Resource" + op_type))
    except KeyError:
        return None


def _rewrite(nd: NodeDef, twin, views: dict) -> None:
    inputs = []
    for text in nd.input:
        src = _source(text)
        if not text.startswith("^") and src in views:
            inputs.append(views[src].input[0])  # the view's handle
        else:
            inputs.append(text)
    attrs = {k: v for k, v in nd.attr.items()}
    nd.op = twin.name
    del nd.input[:]
    nd.input.extend(inputs)
    nd.ClearField("attr")
    for key in twin.attrs:
        value = attrs.get(key)
        if value is None and key == "dtype":
            value = attrs.get("T")  # (the Scatter twins name the value type dtype)
        if value is not None:
            nd.attr[key].CopyFrom(value)
    for key, value in attrs.items():
        if key.startswith("_"):
            nd.attr[key].CopyFrom(value)
