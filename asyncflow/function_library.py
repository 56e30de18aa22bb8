"""Calls of a GraphDef's FunctionDefLibrary, inlined for import (TF's function inlining).

A TF1 graph calls a function of its library in two ways: a node whose op type is the
function's name (`function.Defun`), or a `PartitionedCall` / `StatefulPartitionedCall`
node whose attr `f` names it (a `tf.function` called in a graph).  `inline_calls`
rewrites the node list of such a GraphDef into plain nodes asyncflow imports and runs.
A call node `c` becomes:

- `c/<arg>`: an Identity per argument, of the call's input, carrying the call's control
  inputs (so a call that waits on a control dependency runs nothing before it);
- `c/<node>`: each node of the function's body, its inputs renamed: an argument's name
  becomes `c/<arg>`, `node:out_arg:k` becomes `c/node:<flat output index>` (found from
  the op's declared outputs and the node's attrs), `^node` becomes `^c/node`; body
  nodes without inputs get the call's control inputs too, and the call's device when
  they name none;
- `c`: an IdentityN of the function's results in signature order, so that `c:i` still
  names result i, with control inputs on the function's `control_ret` nodes (a NoOp
  when the function returns nothing), so `^c` waits for the whole body.

Calls inside bodies are inlined the same way, recursively.  Attrs of body nodes that
refer to the call's attrs (`placeholder`) take the call's values.

Invariants: the rewrite never modifies its input; a GraphDef without calls comes back
as the same list.  A function that calls itself (directly or not), a call naming a
function the library lacks, or a body input naming nothing is a ValueError.
"""

from __future__ import annotations

from asyncflow import errors
from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.registry import TypeConstraint, get_op_def

__all__ = ["inline_calls"]

_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")


def inline_calls(nodes: list[NodeDef], library) -> list[NodeDef]:
    """`nodes` with every call of a function of `library` inlined (see the module note).

    Raises:
      ValueError: a recursive function, a call of a function the library lacks, or a
        function body that does not fit its signature.
      NotFoundError: a body node's op type asyncflow lacks (named with its node).
    """
    functions = {f.signature.name: f for f in library.function}
    if not functions:
        return nodes
    out: list[NodeDef] = []
    for nd in nodes:
        _expand(nd, functions, out, ())
    return out


def _called(nd: NodeDef, functions: dict):
    """The FunctionDef `nd` calls, or None for an ordinary op."""
    if nd.op in functions:
        return functions[nd.op]
    if nd.op in _CALL_OPS:
        name = nd.attr["f"].func.name
        if name not in functions:
            raise ValueError(f"Node '{nd.name}' calls function '{name}', not in the library")
        return functions[name]
    return None


def _expand(nd: NodeDef, functions: dict, out: list, stack: tuple) -> None:
    fdef = _called(nd, functions)
    if fdef is None:
        out.append(nd)
        return
    fname = fdef.signature.name
    if fname in stack:
        raise ValueError(f"Function '{fname}' calls itself (through {' -> '.join(stack)})")
    prefix = nd.name
    data = [i for i in nd.input if not i.startswith("^")]
    controls = [i for i in nd.input if i.startswith("^")]
    sig = fdef.signature
    if len(data) != len(sig.input_arg):
        raise ValueError(
            f"Node '{nd.name}' passes {len(data)} inputs to function '{fname}', "
            f"which takes {len(sig.input_arg)}"
        )
    args = {}
    for arg, source in zip(sig.input_arg, data, strict=True):
        ident = NodeDef(name=f"{prefix}/{arg.name}", op="Identity", device=nd.device)
        ident.input.append(source)
        ident.input.extend(controls)
        ident.attr["T"].type = _arg_type(arg, nd)
        out.append(ident)
        args[arg.name] = ident.name
    body = {b.name: b for b in fdef.node_def}
    for b in fdef.node_def:
        inner = NodeDef()
        inner.CopyFrom(b)
        inner.name = f"{prefix}/{b.name}"
        del inner.input[:]
        for text in b.input:
            inner.input.append(_body_input(text, prefix, args, body, functions, fname))
        if not b.input:
            inner.input.extend(controls)
        if not inner.device:
            inner.device = nd.device
        for key, value in b.attr.items():
            if value.placeholder:
                if value.placeholder not in nd.attr:
                    raise ValueError(
                        f"Function '{fname}' node '{b.name}': attr '{key}' refers to "
                        f"'{value.placeholder}', which call '{nd.name}' does not set"
                    )
                inner.attr[key].CopyFrom(nd.attr[value.placeholder])
        _expand(inner, functions, out, (*stack, fname))
    results = NodeDef(name=prefix, device=nd.device)
    for arg in sig.output_arg:
        if arg.name not in fdef.ret:
            raise ValueError(f"Function '{fname}' returns no value for '{arg.name}'")
        results.input.append(_body_input(fdef.ret[arg.name], prefix, args, body, functions, fname))
    for name in sorted(fdef.control_ret.values()):
        results.input.append(f"^{prefix}/{name}")
    if sig.output_arg:
        results.op = "IdentityN"
        results.attr["T"].list.type.extend(_arg_type(a, nd) for a in sig.output_arg)
    else:
        results.op = "NoOp"
        if not fdef.control_ret:  # nothing to wait for but the body's entry
            results.input.extend(f"^{n}" for n in args.values())
            results.input.extend(controls)
    out.append(results)


def _arg_type(arg, call: NodeDef) -> int:
    if arg.type:
        return arg.type
    if arg.type_attr and call.attr[arg.type_attr].type:
        return call.attr[arg.type_attr].type
    raise ValueError(
        f"Call '{call.name}': argument '{arg.name}' of a polymorphic or list type is not "
        "supported in an inlined function"
    )


def _body_input(text: str, prefix: str, args: dict, body: dict, functions: dict, fname) -> str:
    """A body node's input (or a `ret` value) as a name in the inlined graph."""
    if text.startswith("^"):
        name = text[1:]
        if name in args:
            return f"^{args[name]}"
        if name not in body:
            raise ValueError(f"Function '{fname}': control input '{text}' names no node")
        return f"^{prefix}/{name}"
    if text in args:
        return args[text]
    parts = text.split(":")
    if parts[0] not in body:
        raise ValueError(f"Function '{fname}': input '{text}' names no argument or node")
    src = body[parts[0]]
    if len(parts) == 1:
        return f"{prefix}/{src.name}"
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"Function '{fname}': input '{text}' is not node:output:index")
    index = _output_offset(src, parts[1], functions, fname) + int(parts[2])
    return f"{prefix}/{src.name}:{index}"


def _output_offset(nd: NodeDef, out_arg: str, functions: dict, fname: str) -> int:
    """The flat index of the first tensor of output argument `out_arg` of node `nd`."""
    if nd.op in functions:
        declared = [(a.name, a.number_attr, a.type_list_attr) for a in
                    functions[nd.op].signature.output_arg]  # fmt: skip
        sizes = {}
        for name, number_attr, list_attr in declared:
            if number_attr:
                sizes[name] = nd.attr[number_attr].i
            elif list_attr:
                sizes[name] = len(nd.attr[list_attr].list.type)
            else:
                sizes[name] = 1
        names = [d[0] for d in declared]
    elif nd.op in _CALL_OPS:
        names, sizes = ["output"], {"output": len(nd.attr["Tout"].list.type)}
    else:
        try:
            op_def = get_op_def(nd.op)
        except KeyError:
            raise errors.NotFoundError(
                None,
                None,
                f"Op type not registered '{nd.op}' in binary running on asyncflow "
                f"(node '{nd.name}' of function '{fname}')",
            ) from None
        names, sizes = [], {}
        for arg in op_def.outputs:
            names.append(arg.name)
            spec = op_def.attrs.get(arg.type_attr) if arg.type_attr else None
            if arg.number_attr:
                sizes[arg.name] = nd.attr[arg.number_attr].i
            elif isinstance(spec, TypeConstraint) and spec.is_list:
                sizes[arg.name] = len(nd.attr[arg.type_attr].list.type)
            else:
                sizes[arg.name] = 1
    if out_arg not in sizes:
        raise ValueError(
            f"Function '{fname}': op '{nd.op}' of node '{nd.name}' has no output '{out_arg}'"
        )
    offset = 0
    for name in names:
        if name == out_arg:
            return offset
        offset += sizes[name]
    return offset  # unreachable: out_arg is one of names
