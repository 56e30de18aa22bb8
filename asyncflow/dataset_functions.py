"""tf.data's function attrs in a TF GraphDef, instantiated for import.

TF writes the function a dataset op applies (`MapDataset`'s `f`, `FilterDataset`'s
`predicate`, `GroupByWindowDataset`'s `key_func` / `reduce_func` / `window_size_func`,
...) as a FunctionDef of the GraphDef's library, named by a `func` attr.  asyncflow's
dataset ops carry their traced functions as ops of the same graph fed through
placeholders instead (ops/dataset_ops.py): attrs `{prefix}_inputs` (the placeholders
of the element's components), `{prefix}_outputs` (the results) and `{prefix}_captures`
(the placeholders of the captured values, which arrive as the op's "other arguments").
`instantiate` rewrites a node list so that each such attr becomes that form.  For a node
`n` and its attr `a` naming function `F`:

- each argument `x` of F becomes a Placeholder `n/_a/x` of the argument's type (a
  DT_VARIANT argument, a dataset, becomes a string: this runtime's dataset handles);
  the first arguments are the element's components, the last ones (as many as the
  node's capture-type attr lists: `Targuments`, or `T<a>_other_arguments`) the
  captures;
- each body node `b` becomes `n/_a/b`, its inputs renamed as function_library inlines
  a call (`node:out_arg:k` becomes the flat output index); calls and dataset functions
  inside the body are expanded the same way, recursively;
- DT_VARIANT in the type attrs of the body's nodes and of `n` becomes DT_STRING;
- the attr `a` is replaced by the three name-list attrs, with the prefix below; but
  a `OneShotIterator`'s `dataset_factory` (no arguments, one dataset) becomes the
  node's `dataset` input instead, as asyncflow's OneShotIterator takes it.

TF attr -> prefix: `f` and `predicate` -> `f`; `<x>_func` -> `<x>` (`window_size_func`
-> `size`), as the asyncflow ops name them.

Invariants: nodes without `func` attrs come back unchanged (the same objects); the
names the new attrs hold are the GraphDef's own names, which import_graph_def prefixes
with its scope like any node name.  A function the library lacks, or one whose
arguments do not fit the node's capture types, is a ValueError naming the node.
"""

from __future__ import annotations

from asyncflow.function_library import _arg_type, _body_input, inline_calls
from asyncflow.protos.node_def_pb2 import NodeDef

__all__ = ["FUNCTION_LIST_ATTRS", "instantiate"]

_VARIANT = 21
_STRING = 7

# The attrs asyncflow's dataset ops name a traced function's tensors with.
FUNCTION_LIST_ATTRS = ("_inputs", "_outputs", "_captures")


def _prefix(attr: str) -> str:
    if attr in ("f", "predicate"):
        return "f"
    if attr == "window_size_func":
        return "size"
    if attr.endswith("_func"):
        return attr[: -len("_func")]
    return attr


def _capture_types_attr(attr: str) -> str:
    return "Targuments" if attr in ("f", "predicate") else f"T{attr}_other_arguments"


def _has_func(nd: NodeDef) -> bool:
    return any(v.WhichOneof("value") == "func" for v in nd.attr.values())


def instantiate(nodes: list[NodeDef], library) -> list[NodeDef]:
    """`nodes` with every dataset function attr instantiated (see the module note)."""
    if not any(_has_func(nd) for nd in nodes):
        return nodes
    functions = {f.signature.name: f for f in library.function}
    out: list[NodeDef] = []
    for nd in nodes:
        _rewrite(nd, functions, library, out, ())
    return out


def _rewrite(nd: NodeDef, functions: dict, library, out: list, stack: tuple) -> None:
    if not _has_func(nd):
        out.append(nd)
        return
    node = NodeDef()
    node.CopyFrom(nd)
    _variants_as_strings(node)
    for attr in sorted(k for k, v in nd.attr.items() if v.WhichOneof("value") == "func"):
        fname = nd.attr[attr].func.name
        if fname not in functions:
            raise ValueError(
                f"Node '{nd.name}': attr '{attr}' names function '{fname}', not in the library"
            )
        if fname in stack:
            raise ValueError(f"Function '{fname}' calls itself (through {' -> '.join(stack)})")
        fdef = functions[fname]
        sig = fdef.signature
        types_attr = _capture_types_attr(attr)
        n_captures = len(nd.attr[types_attr].list.type) if types_attr in nd.attr else 0
        if n_captures > len(sig.input_arg):
            raise ValueError(
                f"Node '{nd.name}': function '{fname}' takes {len(sig.input_arg)} arguments, "
                f"fewer than the node's {n_captures} captured values"
            )
        scope = f"{nd.name}/_{attr}"
        args: dict[str, str] = {}
        placeholders: list[str] = []
        for arg in sig.input_arg:
            ph = NodeDef(name=f"{scope}/{arg.name}", op="Placeholder", device=nd.device)
            dtype = _arg_type(arg, nd)
            ph.attr["dtype"].type = _STRING if dtype == _VARIANT else dtype
            out.append(ph)
            args[arg.name] = ph.name
            placeholders.append(f"{ph.name}:0")
        body_nodes = _body(fdef, scope, args, functions, fname)
        inner: list[NodeDef] = []
        for b in body_nodes:
            _rewrite(b, functions, library, inner, (*stack, fname))
        out.extend(inline_calls(inner, library))
        body = {b.name: b for b in fdef.node_def}
        results = []
        for arg in sig.output_arg:
            if arg.name not in fdef.ret:
                raise ValueError(f"Function '{fname}' returns no value for '{arg.name}'")
            text = _body_input(fdef.ret[arg.name], scope, args, body, functions, fname)
            results.append(text if ":" in text else f"{text}:0")
        del node.attr[attr]
        if attr == "dataset_factory":  # OneShotIterator: the dataset, built once
            if len(results) != 1 or placeholders:
                raise ValueError(
                    f"Node '{nd.name}': dataset_factory '{fname}' must take no arguments "
                    "and return one dataset"
                )
            node.input.insert(0, results[0])
            continue
        prefix = _prefix(attr)
        split = len(placeholders) - n_captures
        for suffix, names in zip(
            FUNCTION_LIST_ATTRS,
            (placeholders[:split], results, placeholders[split:]),
            strict=True,
        ):
            node.attr[prefix + suffix].list.s.extend(n.encode() for n in names)
    out.append(node)


def _body(fdef, scope: str, args: dict, functions: dict, fname: str) -> list[NodeDef]:
    """The function's body nodes, renamed into `scope` (inputs as function_library's)."""
    body = {b.name: b for b in fdef.node_def}
    nodes = []
    for b in fdef.node_def:
        inner = NodeDef()
        inner.CopyFrom(b)
        inner.name = f"{scope}/{b.name}"
        del inner.input[:]
        for text in b.input:
            inner.input.append(_body_input(text, scope, args, body, functions, fname))
        for key, value in b.attr.items():
            if value.placeholder:
                raise ValueError(
                    f"Function '{fname}' node '{b.name}': attr '{key}' refers to "
                    f"'{value.placeholder}', which a dataset function cannot set"
                )
        _variants_as_strings(inner)
        nodes.append(inner)
    return nodes


def _variants_as_strings(nd: NodeDef) -> None:
    """DT_VARIANT in `nd`'s type attrs becomes DT_STRING: a dataset inside a function (a
    window, flat_map's result) is one of this runtime's string-typed dataset handles."""
    for value in nd.attr.values():
        if value.WhichOneof("value") == "type" and value.type == _VARIANT:
            value.type = _STRING
        elif value.WhichOneof("value") == "list" and _VARIANT in value.list.type:
            types = [_STRING if t == _VARIANT else t for t in value.list.type]
            del value.list.type[:]
            value.list.type.extend(types)
