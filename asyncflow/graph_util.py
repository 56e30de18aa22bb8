"""`tf.graph_util` (TF1's graph_util): subgraph extraction and frozen graphs.

`convert_variables_to_constants(sess, graph_def, output_node_names)` keeps the nodes the
outputs need and replaces each variable among them by a Const holding its current value
in `sess`: the frozen `.pb` TF1 deployments ship, which TF and asyncflow both import.
"""

from __future__ import annotations

from asyncflow import graph_io
from asyncflow.protos.graph_pb2 import GraphDef

__all__ = [
    "extract_sub_graph",
    "convert_variables_to_constants",
    "remove_training_nodes",
    "must_run_on_cpu",
    "tensor_shape_from_node_def_name",
    "import_graph_def",
]

import_graph_def = graph_io.import_graph_def  # TF's deprecated tf.graph_util alias

_VARIABLE_OPS = frozenset({"Variable", "VariableV2", "VarHandleOp"})


def _node_name(text: str) -> str:
    return text[1:] if text.startswith("^") else text.split(":")[0]


def extract_sub_graph(graph_def, dest_nodes) -> GraphDef:
    """The nodes of `graph_def` that `dest_nodes` (names) depend on, in GraphDef order.

    Raises:
      TypeError: dest_nodes is a single string.
      AssertionError: a name in dest_nodes is not in the graph.
    """
    if isinstance(dest_nodes, str):
        raise TypeError(
            f"dest_nodes must be an iterable of strings, but got type {type(dest_nodes)}."
        )
    graph_def = graph_io.as_graph_def_message(graph_def)
    by_name = {n.name: n for n in graph_def.node}
    for d in dest_nodes:
        assert d in by_name, f"{d} is not in graph"
    keep, stack = set(), list(dest_nodes)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(_node_name(i) for i in by_name[name].input if _node_name(i) in by_name)
    out = GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    out.node.extend(n for n in graph_def.node if n.name in keep)
    return out


def convert_variables_to_constants(sess, input_graph_def, output_node_names,
                                   variable_names_whitelist=None,
                                   variable_names_blacklist=None) -> GraphDef:  # fmt: skip
    """`input_graph_def` cut to what `output_node_names` need, its variables replaced by
    Consts holding their values in `sess` (TF1's frozen graph)."""
    sub = extract_sub_graph(input_graph_def, output_node_names)
    names = [
        n.name
        for n in sub.node
        if n.op in _VARIABLE_OPS
        and (variable_names_whitelist is None or n.name in variable_names_whitelist)
        and (variable_names_blacklist is None or n.name not in variable_names_blacklist)
    ]
    values = dict(zip(names, sess.run([n + ":0" for n in names]), strict=True)) if names else {}
    out = GraphDef()
    out.versions.CopyFrom(sub.versions)
    out.library.CopyFrom(sub.library)
    for node in sub.node:
        new = out.node.add()
        if node.name in values:
            value = values[node.name]
            new.name, new.op = node.name, "Const"
            if node.device:
                new.device = node.device
            new.attr["dtype"].CopyFrom(graph_io.attr_value(graph_io._dtype_from_enum(
                node.attr["dtype"].type)))  # fmt: skip
            new.attr["value"].CopyFrom(graph_io.attr_value(value))
        else:
            new.CopyFrom(node)
    return out


def remove_training_nodes(input_graph, protected_nodes=None) -> GraphDef:
    """`input_graph` without CheckNumerics nodes and pass-through Identity nodes (their
    consumers read the Identity's input), except `protected_nodes`."""
    graph_def = graph_io.as_graph_def_message(input_graph)
    protected = set(protected_nodes or [])
    drop = {}
    for n in graph_def.node:
        if n.name in protected:
            continue
        if n.op == "CheckNumerics" or (
            n.op == "Identity" and len(n.input) == 1 and not n.input[0].startswith("^")
        ):
            drop[n.name] = n.input[0]

    def resolve(text: str) -> str:
        caret = text.startswith("^")
        name = _node_name(text)
        seen = 0
        while name in drop and seen < len(drop):
            text, seen = drop[name], seen + 1
            name = _node_name(text)
        return ("^" + name) if caret else text

    out = GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    for n in graph_def.node:
        if n.name in drop:
            continue
        new = out.node.add()
        new.CopyFrom(n)
        del new.input[:]
        new.input.extend(resolve(i) for i in n.input)
    return out


def must_run_on_cpu(node, pin_variables_on_cpu=False) -> bool:
    """TF1's heuristic: string-typed nodes (and variables, when asked) stay on the CPU."""
    if hasattr(node, "node_def"):
        node = node.node_def
    if pin_variables_on_cpu and node.op in _VARIABLE_OPS:
        return True
    if "T" in node.attr and node.attr["T"].type == 7:  # DT_STRING
        return True
    return "dtype" in node.attr and node.attr["dtype"].type == 7


def tensor_shape_from_node_def_name(graph, input_name):
    """The static shape of the tensor `input_name` ("op" means "op:0") in `graph`."""
    if ":" not in input_name:
        input_name += ":0"
    return graph.get_tensor_by_name(input_name).shape
