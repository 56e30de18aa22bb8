"""Partitions across the wire: the master's per-device node lists as GraphDef messages.

The master (in the client) prunes, places and partitions; each task receives its
partitions once, as protobuf GraphDefs, and lowers them itself.  A node's inputs are
written by position, not name ("#3:0" is output 0 of node 3, "^#3" a control edge,
"$feed:1" the task's feed 1), so the runtime-inserted nodes of a partition need no
unique names; its output dtypes and reference flags travel in private attrs
("_af_out", "_af_ref") so a node is rebuilt without shape inference.

A tf.data op's traced functions are ops of the client's graph that no partition holds
(the op names their tensors in attrs: ops/dataset_ops.py), so a task's partitions travel
with one more GraphDef, `encode_functions`: those bodies, nodes named as in the client's
graph; the ops made inside a function carry a private attr saying so (`_IN_FUNCTION`).
The task imports it into a graph of its own (`decode_functions`) and decodes the
partitions' ops as detached ops of that graph, so a kernel finds its function's tensors
by name in `ctx.op.graph`, as in one process.

Invariant: decoding only builds Operations of registered op types with attrs decoded by
graph_io (detached ones for the partitions, imported ones for the function bodies);
nothing from the wire is evaluated.
"""

from __future__ import annotations

import hashlib

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.dataset_functions import FUNCTION_LIST_ATTRS
from asyncflow.graph_io import attr_value, decode_attr, import_graph_def, node_def
from asyncflow.partition import PNode
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

__all__ = [
    "FUNCTION_BODIES_KEPT",
    "decode_functions",
    "decode_partition",
    "encode_functions",
    "encode_partition",
    "functions_digest",
]

MAX_NODES = 1 << 22
# A body op made inside a traced function, not one of the graph's it reads (a lifted
# queue, a captured constant): an unshared resource it makes lasts one pass on the task
# too (kernel_api.kernel_resource).  A private attr, dropped as the bodies import.
_IN_FUNCTION = "_af_in_function"
# Distinct sets of function bodies a task keeps imported per master connection, oldest
# first out; the master mirrors that list, in the same order, to know which sets it may
# name by digest instead of sending them again (client.py `_Channel.functions`).
FUNCTION_BODIES_KEPT = 64


def encode_partition(nodes, feed_local: dict) -> bytes:
    """`nodes` (PNodes of one device) as GraphDef bytes; `feed_local` maps the master's
    feed indices to this task's.

    Raises UnimplementedError for an attr no AttrValue can hold (a Python object)."""
    gd = GraphDef()
    for pnode in nodes:
        op = pnode.op
        nd = gd.node.add()
        nd.name = op.name
        nd.op = op.type
        nd.device = pnode.device.name if pnode.device is not None else ""
        for src in pnode.inputs:
            if src[0] == "feed":
                nd.input.append(f"$feed:{feed_local[src[1]]}")
            else:
                nd.input.append(f"#{src[0]}:{src[1]}")
        nd.input.extend(f"^#{c}" for c in pnode.controls)
        for key, value in op._attrs.items():
            if value is None:
                continue
            try:
                nd.attr[key].CopyFrom(attr_value(value))
            except TypeError as e:
                raise errors.UnimplementedError(
                    None,
                    op,
                    f"Operation {op.name} ({op.type}) cannot run on a remote task: its attr "
                    f"'{key}' holds a value that cannot be sent ({e})",
                ) from None
        outs = nd.attr["_af_out"].list
        outs.SetInParent()
        refs = nd.attr["_af_ref"].list
        refs.SetInParent()
        for t in op._outputs:
            outs.type.append(attr_value(t.dtype).type)
            refs.b.append(bool(t._is_ref))
    return gd.SerializeToString()


def _hint(op_def, name: str):
    spec = op_def.attrs.get(name)
    return None if spec is REQUIRED or isinstance(spec, TypeConstraint) else spec


def _ref(text: str, n: int) -> tuple:
    """("feed", i) or (node, output) of an input written by encode_partition."""
    try:
        if text.startswith("$feed:"):
            return ("feed", int(text[6:]))
        if text.startswith("#"):
            node, _, out = text[1:].partition(":")
            i, k = int(node), int(out or 0)
            if 0 <= i < n and k >= 0:
                return (i, k)
    except ValueError:
        pass
    raise errors.InvalidArgumentError(None, None, f"Malformed partition input {text!r}")


def decode_partition(
    data: bytes, devices: dict, num_feeds: int, feed_dtypes: list, graph: ops.Graph | None = None
):
    """The PNodes of one partition from `encode_partition`'s bytes; `devices` maps
    device names to this task's devices; `graph`: the one its ops belong to (detached:
    not found by name in it), the functions' graph from `decode_functions` if any.

    Raises InvalidArgumentError for a malformed partition, an unknown op type or a
    device this task does not have."""
    gd = GraphDef()
    try:
        gd.ParseFromString(bytes(data))
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise errors.InvalidArgumentError(None, None, f"Malformed partition: {e}") from None
    n = len(gd.node)
    if n > MAX_NODES:
        raise errors.InvalidArgumentError(None, None, f"Partition too large ({n} nodes)")
    graph = ops.Graph() if graph is None else graph
    feed_ops: dict[int, ops.Operation] = {}
    nodes: list[PNode] = []
    for nd in gd.node:  # the nodes first: inputs may refer forward (appended _Recvs)
        nodes.append(_node(graph, nd, devices))
    for nd, pnode in zip(gd.node, nodes):
        in_tensors = []
        for text in nd.input:
            if text.startswith("^"):
                pnode.controls.append(_ref(text[1:], n)[0])
                continue
            src = _ref(text, n)
            if src[0] == "feed":
                if not 0 <= src[1] < num_feeds:
                    raise errors.InvalidArgumentError(None, None, f"Bad feed in {nd.name}")
                in_tensors.append(_feed_op(graph, feed_ops, src[1], feed_dtypes).outputs[0])
            else:
                producer = nodes[src[0]].op
                if src[1] >= len(producer._outputs):
                    raise errors.InvalidArgumentError(None, None, f"Bad input {text!r}")
                in_tensors.append(producer._outputs[src[1]])
            pnode.inputs.append(src)
        pnode.op._inputs = tuple(in_tensors)
    return nodes


def _node(graph, nd, devices) -> PNode:
    try:
        op_def = get_op_def(nd.op)
    except (KeyError, ValueError):
        raise errors.InvalidArgumentError(
            None, None, f"Op type not registered '{nd.op}' in binary running on this task"
        ) from None
    device = devices.get(nd.device)
    if device is None:
        raise errors.InvalidArgumentError(
            None, None, f"Node {nd.name} is placed on {nd.device!r}, not a device of this task"
        )
    attrs = {}
    for key, av in nd.attr.items():
        if key in ("_af_out", "_af_ref"):
            continue
        try:
            attrs[key] = decode_attr(av, _hint(op_def, key), key)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, str(e)) from None
    out_types = [decode_attr_type(t) for t in nd.attr["_af_out"].list.type]
    out_refs = list(nd.attr["_af_ref"].list.b)
    if len(out_refs) != len(out_types):
        raise errors.InvalidArgumentError(None, None, f"Malformed node {nd.name}")
    op = ops.Operation(graph, op_def, nd.name, [], attrs, out_types, out_refs)
    op.traceback = "<remote partition>"
    op._device = nd.device
    return PNode(op, device, [], [])


def _feed_op(graph, feed_ops: dict, i: int, feed_dtypes: list) -> ops.Operation:
    """A detached stand-in producer for feed `i` (so `op.inputs` is whole)."""
    op = feed_ops.get(i)
    if op is None:
        dtype = feed_dtypes[i]
        op = ops.Operation(
            graph, get_op_def("Placeholder"), f"_feed_{i}", [], {"dtype": dtype}, [dtype], [False]
        )
        feed_ops[i] = op
    return op


def decode_attr_type(enum: int):
    from asyncflow.protos.attr_value_pb2 import AttrValue

    av = AttrValue()
    av.type = enum
    try:
        return decode_attr(av)
    except (KeyError, ValueError):
        raise errors.InvalidArgumentError(None, None, f"Unknown dtype enum {enum}") from None


# -- tf.data functions -------------------------------------------------------------------


def _function_ops(op) -> list[ops.Operation]:
    """The ops of the tensors `op`'s traced-function attrs name (`f_inputs`,
    `key_outputs`...: registered list attrs whose default is empty); a name of no tensor
    of the graph is left to the kernel, which fails on it as in one process."""
    found = []
    defaults = op.op_def.attrs
    for key, value in op._attrs.items():
        if not (key.endswith(FUNCTION_LIST_ATTRS) and defaults.get(key) == [] and value):
            continue
        for v in value:
            try:
                t = op.graph.get_tensor_by_name(v.decode() if isinstance(v, bytes) else str(v))
            except (KeyError, ValueError, TypeError):
                continue
            found.append(t.op)
    return found


def encode_functions(nodes) -> bytes:
    """The bodies of the traced functions the ops of `nodes` (PNodes) call, as GraphDef
    bytes in asyncflow's form (nodes named as in the client's graph; functions called
    inside bodies included); b"" when they call none.  A body is every op its results
    depend on, as a nested step of a session prunes it: its argument placeholders, the
    placeholders of its captures, and the graph's ops it reads (a captured constant).

    Raises UnimplementedError for a body op whose attrs cannot cross the wire."""
    stack = [f for pnode in nodes for f in _function_ops(pnode.op)]
    if not stack:
        return b""
    seen: dict[str, ops.Operation] = {}
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen[op.name] = op
        stack.extend(_function_ops(op))
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    gd = GraphDef()
    for op in sorted(seen.values(), key=lambda o: o._id):
        try:
            nd = node_def(op, gd.node.add())
        except TypeError as e:
            raise errors.UnimplementedError(
                None, op, f"Operation {op.name} ({op.type}), in a dataset function, cannot "
                f"run on a remote task: {e}"
            ) from None  # fmt: skip
        if "_class" in nd.attr:  # (colocation with an op left behind: dropped)
            groups = [g for g in nd.attr["_class"].list.s if g[5:].decode() in seen]
            del nd.attr["_class"]
            if groups:
                nd.attr["_class"].list.s.extend(groups)
        if getattr(op, "_in_dataset_function", False):
            nd.attr[_IN_FUNCTION].b = True
    return gd.SerializeToString()


def functions_digest(data) -> str:
    """The name of a set of function bodies (`encode_functions`' bytes) on a master
    connection: their SHA-256, in hex."""
    return hashlib.sha256(bytes(data)).hexdigest()


def decode_functions(data: bytes) -> ops.Graph:
    """A graph of the function bodies `encode_functions` wrote.

    Raises InvalidArgumentError for a malformed or too large GraphDef, or one that does
    not import (an unknown op type, a missing input)."""
    gd = GraphDef()
    try:
        gd.ParseFromString(bytes(data))
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise errors.InvalidArgumentError(None, None, f"Malformed functions: {e}") from None
    if len(gd.node) > MAX_NODES:
        raise errors.InvalidArgumentError(
            None, None, f"Functions too large ({len(gd.node)} nodes)"
        )
    graph = ops.Graph()
    try:
        with graph.as_default():
            import_graph_def(gd, name="")
    except (ValueError, TypeError, errors.OpError) as e:
        msg = getattr(e, "message", None) or str(e)
        raise errors.InvalidArgumentError(
            None, None, f"The dataset functions do not import on this task: {msg}"
        ) from None
    for op in graph.get_operations():
        if op._attrs.pop(_IN_FUNCTION, None):
            op._in_dataset_function = True
    return graph
