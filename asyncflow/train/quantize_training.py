"""`tf.compat.v1.train.do_quantize_training_on_graphdef`: TF's GraphDef rewrite for
quantized training (its C++ DoQuantizeTrainingOnGraphDef, quant op
QuantizeAndDequantizeV2), node for node.

Every data input of a MatMul or Conv2D not named "gradients..." goes through a
QuantizeAndDequantizeV2 of its source node ("<src>/QuantizeAndDequantizeV2", one per
source node, output 0, as TF builds it).  The range comes from what the source is:
constants and variables are signed, Relu unsigned, Relu6 [0, 6], Sigmoid [0, 1], Tanh
[-1, 1] (those three as InputMin / InputMax constants); Identity, pooling, Reshape and
ConcatV2 take their first input's kind; any other source is a model input (signed), and
more than two such inputs are refused.  A range not given is an exponential moving
average (decay 0.999) of the source's min and max, kept in new VariableV2 nodes that
initialize themselves (IsVariableInitialized -> Switch -> Merge -> Assign).  When the
graph has a Saver's SaveV2, the new variables are added to it and restored by
"save/restore_all".

The result is laid out as TF's Graph::ToGraphDef lays it out: the input's nodes in
TF's import order (each node after its inputs, the earliest first), then the new nodes
in the order they were made; data inputs as "name" or "name:k", control inputs last,
sorted by name.  TF also fills in every op's default attrs on the way (its importer
does); here the input's nodes get the defaults this registry knows.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph_io
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

__all__ = ["do_quantize_training_on_graphdef"]

_ALLOWED_INPUTS = 2
_EMA_DECAY = np.float32(0.999)
_REWRITE = ("MatMul", "Conv2D")
_FLOAT, _INT32, _STRING = 1, 3, 7  # DataType enums
_QUANT_OP = "QuantizeAndDequantizeV2"


class _Node:
    """A node of the graph being rewritten: its NodeDef and its input edges, in the
    order TF's graph holds them (data edges as [src, output, dst_input])."""

    __slots__ = ("nd", "edges", "controls")

    def __init__(self, nd: NodeDef):
        self.nd = nd
        self.edges: list[list] = []  # [src _Node, src output, dst input]
        self.controls: list[_Node] = []

    @property
    def name(self) -> str:
        return self.nd.name

    @property
    def op(self) -> str:
        return self.nd.op


# Input names and TF's GraphConstructor order (the lowest-indexed ready node next, a
# Merge's loop back edges left out) are graph_io's, as the importer reads a GraphDef.
_parse_input = graph_io._parse_input


def _import_order(nodes: list[NodeDef]) -> list[int]:
    return graph_io._topological_order(nodes, {}, {})[0]


def _with_defaults(nd: NodeDef) -> NodeDef:
    """A copy of `nd` with the default attrs the registry knows, as TF's importer adds."""
    out = NodeDef()
    out.CopyFrom(nd)
    try:
        op_def = get_op_def(nd.op)
    except KeyError:
        return out
    for key, spec in op_def.attrs.items():
        if key in out.attr or spec is REQUIRED or spec is None:
            continue
        if isinstance(spec, TypeConstraint):
            continue
        try:
            out.attr[key].CopyFrom(graph_io.attr_value(spec))
        except TypeError:
            pass
    return out


class _Graph:
    def __init__(self, graph_def: GraphDef):
        defs = list(graph_def.node)
        self.nodes: list[_Node] = []
        by_name: dict[str, _Node] = {}
        for i in _import_order(defs):
            node = _Node(_with_defaults(defs[i]))
            self.nodes.append(node)
            by_name[node.name] = node
        for node in self.nodes:
            slot = 0
            for text in node.nd.input:
                name, output, control = _parse_input(text)
                if control:
                    node.controls.append(by_name[name])
                else:
                    node.edges.append([by_name[name], output, slot])
                    slot += 1
        self.by_name = by_name
        self.names_made = 0  # TF's Graph::NewName counter

    def add(self, name: str, op: str, inputs=(), attrs=None, controls=()) -> _Node:
        nd = NodeDef(name=name, op=op)
        for key, value in (attrs or {}).items():
            nd.attr[key].CopyFrom(value)
        node = _Node(nd)
        for slot, src in enumerate(inputs):
            src, output = src if isinstance(src, tuple) else (src, 0)
            node.edges.append([src, output, slot])
        node.controls.extend(controls)
        self.nodes.append(node)
        return node

    def new_name(self, prefix: str) -> str:
        name = f"{prefix}/_{self.names_made}"
        self.names_made += 1
        return name

    def to_graph_def(self, like: GraphDef) -> GraphDef:
        out = GraphDef()
        out.versions.CopyFrom(like.versions)
        out.library.CopyFrom(like.library)  # (set even when empty, as TF's)
        for node in self.nodes:
            nd = out.node.add()
            nd.CopyFrom(node.nd)
            del nd.input[:]
            for src, output, _ in sorted(node.edges, key=lambda e: e[2]):
                nd.input.append(src.name if output == 0 else f"{src.name}:{output}")
            nd.input.extend(f"^{c.name}" for c in sorted(node.controls, key=lambda c: c.name))
        return out


# -- attr values as TF's NodeBuilder writes them ----------------------------------------------


def _type(enum: int):
    av = graph_io.AttrValue()
    av.type = enum
    return av


def _attr(value):
    return graph_io.attr_value(value)


def _scalar_const(value, enum: int):
    av = graph_io.AttrValue()
    av.tensor.dtype = enum
    av.tensor.tensor_shape.SetInParent()
    if enum == _FLOAT:
        av.tensor.float_val.append(float(np.float32(value)))
    else:
        av.tensor.int_val.append(int(value))
    return av


def _strings_const(values: list[bytes], content: bool = False):
    """A string vector: as string_val (NodeBuilder's Const) or, with `content`, as
    tensor_content (a Tensor set with AddAttr): varint lengths, then the bytes."""
    av = graph_io.AttrValue()
    av.tensor.dtype = _STRING
    av.tensor.tensor_shape.dim.add().size = len(values)
    if content:
        av.tensor.tensor_content = graph_io._string_content_bytes(values)
    else:
        av.tensor.string_val.extend(values)
    return av


def _const(g: _Graph, name: str, value) -> _Node:
    return g.add(name, "Const", attrs={"dtype": _type(value.tensor.dtype), "value": value})


def _dtype_of(node: _Node, output: int) -> int:
    """The DataType of a source node's output, from its attrs (T, dtype), as TF infers."""
    for key in ("T", "dtype"):
        if key in node.nd.attr and node.nd.attr[key].type:
            return node.nd.attr[key].type
    if "dtypes" in node.nd.attr and len(node.nd.attr["dtypes"].list.type) > output:
        return node.nd.attr["dtypes"].list.type[output]
    return _FLOAT


# -- the rewrite --------------------------------------------------------------------------------


def _find_type(node: _Node) -> tuple[bool, bool, bool, float, float]:
    """(known, signed_input, range_given, input_min, input_max) of a source (FindType)."""
    op = node.op
    if op in ("Const", "Variable", "VariableV2"):
        return True, True, False, 0.0, 0.0
    if op == "Relu":
        return True, False, False, 0.0, 0.0
    if op == "Relu6":
        return True, False, True, 0.0, 6.0
    if op == "Sigmoid":
        return True, False, True, 0.0, 1.0
    if op == "Tanh":
        return True, True, True, -1.0, 1.0
    if op in ("Reshape", "ConcatV2", "Identity", "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"):
        found = (True, False, False, 0.0, 0.0)  # TF's defaults when no input says otherwise
        for src, _, slot in node.edges:
            if slot == 0 or op not in ("Reshape", "ConcatV2"):
                found = (True, *_find_type(src)[1:])
        return found
    return False, True, False, 0.0, 0.0


def _ema_variable(g: _Graph, name: str, decay: _Node, init: _Node, added: list) -> _Node:
    """MakeInitializedEMAVariable: the variable's AssignValue node."""
    f = _type(_FLOAT)
    scalar = graph_io.AttrValue()
    scalar.shape.SetInParent()
    var = g.add(f"{name}/Variable", "VariableV2", attrs={
        "container": _attr(""), "dtype": f, "shape": scalar, "shared_name": _attr(""),
    })  # fmt: skip
    added.append(var)
    is_init = g.add(f"{name}/IsInitialized", "IsVariableInitialized", [var], {"dtype": f})
    switch = g.add(f"{name}/Switch", "Switch", [init, is_init], {"T": f})
    ema = f"{name}/EMA"
    one = _const(g, f"{ema}/OneConst", _scalar_const(1.0, _FLOAT))
    complement = g.add(f"{ema}/DecayComplement", "Sub", [one, decay], {"T": f})
    diff = g.add(f"{ema}/ValueDiff", "Sub", [var, (switch, 1)], {"T": f})
    update = g.add(f"{ema}/UpdateValue", "Mul", [diff, complement], {"T": f})
    value = g.add(f"{ema}/EMAValue", "Sub", [var, update], {"T": f})
    merge = g.add(f"{name}/Merge", "Merge", [(switch, 0), value], {"N": _attr(2), "T": f})
    return g.add(f"{name}/AssignValue", "Assign", [var, merge], {
        "T": f, "use_locking": _attr(True), "validate_shape": _attr(True),
    })  # fmt: skip


def _ema_min_max(g: _Graph, prefix: str, src: _Node, added: list) -> tuple[_Node, _Node]:
    decay = _const(g, f"{prefix}/Decay", _scalar_const(_EMA_DECAY, _FLOAT))
    axes = f"{prefix}/ReductionAxes"
    start = _const(g, f"{axes}/RangeStart", _scalar_const(0, _INT32))
    delta = _const(g, f"{axes}/RangeDelta", _scalar_const(1, _INT32))
    t = _type(_dtype_of(src, 0))
    rank = g.add(f"{axes}/InputRank", "Rank", [src], {"T": t})
    reduce_axes = g.add(f"{axes}/ReductionAxes", "Range", [start, rank, delta], {
        "Tidx": _type(_INT32),
    })  # fmt: skip
    reduce = {"T": t, "Tidx": _type(_INT32), "keep_dims": _attr(False)}
    low = g.add(f"{prefix}/Min", "Min", [src, reduce_axes], reduce)
    high = g.add(f"{prefix}/Max", "Max", [src, reduce_axes], reduce)
    return (
        _ema_variable(g, f"{prefix}/Min", decay, low, added),
        _ema_variable(g, f"{prefix}/Max", decay, high, added),
    )


def _quantize_op(g: _Graph, src: _Node, kind: tuple, num_bits: int, added: list) -> _Node:
    _, signed, range_given, low, high = kind
    prefix = src.name
    if range_given:
        input_min = _const(g, f"{prefix}/InputMin", _scalar_const(low, _FLOAT))
        input_max = _const(g, f"{prefix}/InputMax", _scalar_const(high, _FLOAT))
    else:
        input_min, input_max = _ema_min_max(g, prefix, src, added)
    return g.add(f"{prefix}/{_QUANT_OP}", _QUANT_OP, [src, input_min, input_max], {
        "T": _type(_dtype_of(src, 0)), "axis": _attr(-1), "narrow_range": _attr(False),
        "num_bits": _attr(num_bits), "range_given": _attr(True),
        "round_mode": _attr("HALF_TO_EVEN"), "signed_input": _attr(signed),
    })  # fmt: skip


def _target_edges(g: _Graph) -> list[tuple[list, tuple]]:
    targets, unknown = [], 0
    for node in g.nodes:
        if node.op not in _REWRITE or node.name.startswith("gradients"):
            continue
        for edge in node.edges:
            kind = _find_type(edge[0])
            if not kind[0]:
                unknown += 1
                if unknown > _ALLOWED_INPUTS:
                    raise NotImplementedError(
                        f"Found an unknown op: {edge[0].name} with type: {edge[0].op}; "
                        "Unknown ops are considered as model input for now and only "
                        f"{_ALLOWED_INPUTS} inputs are supported currently."
                    )
            targets.append((edge, kind))
    return targets


def _add_save_and_restore(g: _Graph, added: list) -> None:
    saves = [n for n in g.nodes if n.op == "SaveV2"]
    if len(saves) > 1:
        raise ValueError("Input graph has multiple SaveV2 ops.")
    if not saves:
        return
    save = saves[0]
    ins = [src for src, _, _ in sorted(save.edges, key=lambda e: e[2])]
    prefix = save.name[: save.name.rfind("/")] if "/" in save.name else save.name
    restore_all = g.by_name.get(f"{prefix}/restore_all")
    if restore_all is None:
        raise ValueError("graph has SaveOp, but no restore_all NoOp")
    for var in added:
        restore_name = f"{g.new_name(f'{prefix}/RestoreV2')}_qt"
        assign_name = f"{g.new_name(f'{prefix}/Assign')}_qt"
        names = _const(g, f"{restore_name}/tensor_names", _strings_const([var.name.encode()]))
        slices = _const(g, f"{restore_name}/shape_and_slices", _strings_const([b""]))
        dtypes = graph_io.AttrValue()
        dtypes.list.type.append(_FLOAT)
        restore = g.add(restore_name, "RestoreV2", [ins[0], names, slices], {"dtypes": dtypes})
        assign = g.add(assign_name, "Assign", [var, restore], {
            "T": _type(_FLOAT), "use_locking": _attr(True), "validate_shape": _attr(True),
        })  # fmt: skip
        restore_all.controls.append(assign)
    # The save op again, with the variables: its name-list constants grow, and a new
    # SaveV2 (inputs as NodeBuilder takes them: each source's output 0) replaces it.
    for const, extra in ((ins[1], [v.name.encode() for v in added]), (ins[2], [b""] * len(added))):
        old = list(graph_io.tensor_from_proto(const.nd.attr["value"].tensor).ravel())
        const.nd.attr["value"].CopyFrom(_strings_const(old + extra, content=True))
    tensors = ins[3:] + added
    types = [_dtype_of(s, 0) for s in ins[3:]]
    if len(save.nd.attr["dtypes"].list.type) == len(ins) - 3:
        types = list(save.nd.attr["dtypes"].list.type)
    dtypes = graph_io.AttrValue()
    dtypes.list.type.extend(types + [_FLOAT] * len(added))
    new_save = g.add(save.name, "SaveV2", ins[:3] + tensors, {"dtypes": dtypes})
    g.nodes.remove(save)
    for node in g.nodes:
        if any(c is save for c in node.controls):
            node.controls = [c for c in node.controls if c is not save] + [new_save]
        if any(src is save for src, _, _ in node.edges):  # (SaveV2 has no outputs)
            node.edges = [e for e in node.edges if e[0] is not save]
            node.controls.append(new_save)
    g.by_name[save.name] = new_save


def do_quantize_training_on_graphdef(input_graph, num_bits):
    """A GraphDef rewritten for quantized training (TF's rewrite, deprecated in TF).

    Args:
      input_graph: A `GraphDef` (asyncflow's or TF's message).
      num_bits: The number of bits for quantize training.

    Returns:
      The graph with quantize training done (a `GraphDef`).

    Raises:
      IndexError: `num_bits` outside [1, 63] (TF's OutOfRange status).
      NotImplementedError: more than two MatMul / Conv2D inputs of unknown kind.
      ValueError: a graph that does not import; more than one SaveV2 op; a SaveV2
        without "<prefix>/restore_all".
    """
    graph_def = graph_io.as_graph_def_message(input_graph)
    g = _Graph(graph_def)
    num_bits = int(num_bits)
    if not 1 <= num_bits <= 63:
        raise IndexError(f"num_bits should be in range [1, 63] but is: {num_bits}")
    targets = _target_edges(g)
    made: dict[str, _Node] = {}
    added: list[_Node] = []
    for edge, kind in targets:
        src = edge[0]
        quant = made.get(src.name)
        if quant is None:
            quant = made[src.name] = _quantize_op(g, src, kind, num_bits, added)
        edge[0], edge[1] = quant, 0
    _add_save_and_restore(g, added)
    return g.to_graph_def(graph_def)
