"""SymbolicGradient in imported GraphDefs: the gradient of a library function, as nodes.

TF's SymbolicGradient(input=[x..., dy...], f) returns the gradients of f's outputs with
respect to its inputs x, weighted by dy (one per output); TF builds that gradient
function at run time from C++ gradient registrations.  asyncflow inlines a GraphDef's
function calls when importing it (function_library), so a SymbolicGradient node is
expanded there too, through the hook this module installs: f is imported alone into a
scratch graph (placeholders for x, an inlined call), `gradients` differentiates it with
placeholders for dy as grad_ys, and the scratch graph's nodes are spliced in under the
node's name with the placeholders replaced by the node's inputs.  An IdentityN keeps the
node's name, so `<node>:i` is the gradient of input i (zeros where f's outputs do not
depend on it, as TF's).

`tf.raw_ops.SymbolicGradient` built in a graph is differentiated as it is built
(asyncflow/raw_ops_functional.py), so only imported graphs hold SymbolicGradient nodes.
"""

from __future__ import annotations

from asyncflow import function_library, gradients
from asyncflow import graph as ops
from asyncflow.graph_io import import_graph_def
from asyncflow.ops import array_ops
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.protos.node_def_pb2 import NodeDef

__all__: list[str] = []

_ARG, _DY, _CALL = "symbolic_gradient_x_", "symbolic_gradient_dy_", "symbolic_gradient_f"


def _scratch_graph_def(nd: NodeDef, fdef, func, functions: dict, in_types: list) -> GraphDef:
    gd = GraphDef()
    gd.library.function.extend(functions.values())
    for i, t in enumerate(in_types):
        ph = gd.node.add(name=f"{_ARG}{i}", op="Placeholder")
        ph.attr["dtype"].type = t
    call = gd.node.add(name=_CALL, op=func.name)
    call.input.extend(f"{_ARG}{i}" for i in range(len(in_types)))
    for key, value in func.attr.items():
        call.attr[key].CopyFrom(value)
    return gd


def _gradient_nodes(nd: NodeDef, gd: GraphDef, n_in: int, out_types: list):
    """The scratch graph's nodes once differentiated, and the names of the gradients."""
    with ops.Graph().as_default() as g:
        import_graph_def(gd, name="")
        xs = [g.get_tensor_by_name(f"{_ARG}{i}:0") for i in range(n_in)]
        ys = [g.get_tensor_by_name(f"{_CALL}:{j}") for j in range(len(out_types))]
        dys = [array_ops.placeholder(y.dtype, name=f"{_DY}{j}") for j, y in enumerate(ys)]
        grads = gradients.gradients(ys, xs, grad_ys=dys)
        grads = [array_ops.zeros_like(x) if d is None else d for x, d in zip(xs, grads)]
        names = [ops.convert_to_tensor(d).name for d in grads]
        return list(g.as_graph_def().node), names


def _source(text: str, prefix: str, sources: dict) -> str:
    """An input of a scratch node, renamed: a placeholder becomes the node's input."""
    control = text.startswith("^")
    name = text[1:] if control else text
    node, _, index = name.partition(":")
    if node in sources:
        outer = sources[node]
        return "^" + outer.lstrip("^").split(":")[0] if control else outer
    renamed = f"{prefix}/{node}" + (f":{index}" if index else "")
    return "^" + renamed if control else renamed


def _expand_symbolic_gradient(nd: NodeDef, functions: dict, out: list, stack: tuple) -> None:
    func = function_library._function(nd, "f", functions)
    fdef = functions[func.name]
    data, controls = function_library._split_inputs(nd)
    n_in, n_out = len(fdef.signature.input_arg), len(fdef.signature.output_arg)
    if len(data) != n_in + n_out:
        raise ValueError(
            f"Node '{nd.name}' (SymbolicGradient) passes {len(data)} inputs; function "
            f"'{func.name}' takes {n_in} and returns {n_out}, so it needs {n_in + n_out}"
        )
    call = function_library._call(nd.name, func, [], [], nd.device)
    in_types = [function_library._arg_type(a, call) for a in fdef.signature.input_arg]
    out_types = [function_library._arg_type(a, call) for a in fdef.signature.output_arg]
    gd = _scratch_graph_def(nd, fdef, func, functions, in_types)
    nodes, grad_names = _gradient_nodes(nd, gd, n_in, out_types)
    sources = {f"{_ARG}{i}": data[i] for i in range(n_in)}
    sources.update({f"{_DY}{j}": data[n_in + j] for j in range(n_out)})
    prefix = nd.name
    for node in nodes:
        if node.name in sources:
            continue
        inner = NodeDef()
        inner.CopyFrom(node)
        inner.name = f"{prefix}/{node.name}"
        del inner.input[:]
        inner.input.extend(_source(t, prefix, sources) for t in node.input)
        if not node.input:
            inner.input.extend(controls)
        if not inner.device:
            inner.device = nd.device
        if "_class" in inner.attr:  # (colocation: the spliced names)
            locs = [bytes(v) for v in inner.attr["_class"].list.s]
            inner.attr["_class"].list.ClearField("s")
            for loc in locs:
                target = loc.decode()[len("loc:@") :]
                moved = _source(target, prefix, sources).split(":")[0]
                inner.attr["_class"].list.s.append(f"loc:@{moved}".encode())
        out.append(inner)
    result = function_library._node(
        nd.name, "IdentityN", [_source(n, prefix, sources) for n in grad_names] + controls,
        nd.device, T=in_types,
    )  # fmt: skip
    out.append(result)


function_library.NODE_EXPANDERS["SymbolicGradient"] = _expand_symbolic_gradient
