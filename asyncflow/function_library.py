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

Control flow v2 (`If` / `StatelessIf`, `Case` / `StatelessCase`, `While` /
`StatelessWhile`: what TF 2.x graphs hold for tf.cond, tf.switch_case and tf.while_loop)
is lowered to control flow v1 with the branch and
loop functions inlined, as TF's LowerFunctionalOps pass does:
- If `c`: `c/input_k` = Switch(input k, pred); the then-branch is a call `c/then` of
  the Switches' true outputs gated by `c/pivot_t`, the else-branch `c/else` likewise;
  `c/output_k` = Merge(else k, then k); `c` = IdentityN of the Merges, waiting for
  `c/branch_executed`, so `^c` waits for the branch that ran.
- While `w`: per loop variable k, `w/enter_k` (frame "w", the node's
  parallel_iterations) -> `w/merge_k` -> `w/switch_k` on `w/loop_cond` (LoopCond of the
  call `w/cond` of the Merges) -> `w/exit_k`, and `w/body_in_k` -> the call `w/body` ->
  `w/next_iteration_k` -> back into `w/merge_k`; `w` = IdentityN of the Exits.  The
  node's `output_shapes` become the `_output_shapes` of `c` / `w`.

Invariants: the rewrite never modifies its input; a GraphDef without calls comes back
as the same list.  A function that calls itself (directly or not), a call naming a
function the library lacks, or a body input naming nothing is a ValueError.
"""

from __future__ import annotations

from collections.abc import Callable

from asyncflow import errors
from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.registry import TypeConstraint, get_op_def

__all__ = ["inline_calls"]

_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# Node types an upper layer expands (SymbolicGradient: asyncflow/symbolic_gradient.py,
# which needs the gradient walk): op type -> expand(node, functions, out, stack).
NODE_EXPANDERS: dict = {}
_IF_OPS = ("If", "StatelessIf")
_CASE_OPS = ("Case", "StatelessCase")
_WHILE_OPS = ("While", "StatelessWhile")
_DT_INT32 = 3
_DT_BOOL = 10  # TF's DataType enum


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
    if nd.op in NODE_EXPANDERS:
        NODE_EXPANDERS[nd.op](nd, functions, out, stack)
        return
    if nd.op in _IF_OPS:
        _lower_if(nd, functions, out, stack)
        return
    if nd.op in _CASE_OPS:
        _lower_case(nd, functions, out, stack)
        return
    if nd.op in _WHILE_OPS:
        _lower_while(nd, functions, out, stack)
        return
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
        if "_class" in inner.attr:  # colocation with a body node: its inlined name
            _rename_colocation(inner, prefix, body, args)
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


# -- control flow v2, lowered --------------------------------------------------------------


def _node(name: str, op: str, inputs: list, device: str, **attrs) -> NodeDef:
    """A NodeDef; attrs given as ints are types ("T") or ints, by name."""
    nd = NodeDef(name=name, op=op, device=device)
    nd.input.extend(inputs)
    for key, value in attrs.items():
        if isinstance(value, bool):
            nd.attr[key].b = value
        elif isinstance(value, bytes):
            nd.attr[key].s = value
        elif isinstance(value, list):
            nd.attr[key].list.type.extend(value)
        elif key in ("T", "SrcT", "DstT"):
            nd.attr[key].type = value
        else:
            nd.attr[key].i = value
    return nd


def _function(nd: NodeDef, attr: str, functions: dict):
    """The NameAttrList of `nd`'s function-valued attr `attr`, checked to exist."""
    func = nd.attr[attr].func
    if func.name not in functions:
        raise ValueError(
            f"Node '{nd.name}' ({nd.op}) names function '{func.name}' as {attr}, "
            "not in the library"
        )
    return func


def _call(name: str, func, inputs: list, controls: list, device: str) -> NodeDef:
    """A call of `func` (a NameAttrList) as `_expand` inlines it."""
    call = NodeDef(name=name, op=func.name, device=device)
    call.input.extend(inputs)
    call.input.extend(controls)
    for key, value in func.attr.items():
        call.attr[key].CopyFrom(value)
    return call


def _split_inputs(nd: NodeDef) -> tuple[list, list]:
    return (
        [i for i in nd.input if not i.startswith("^")],
        [i for i in nd.input if i.startswith("^")],
    )


def _result_node(nd: NodeDef, inputs: list, types: list, controls: list) -> NodeDef:
    """The node keeping `nd`'s name: an IdentityN of its results (`nd:i` is result i)."""
    if types:
        result = _node(nd.name, "IdentityN", inputs + controls, nd.device, T=types)
    else:
        result = _node(nd.name, "NoOp", controls, nd.device)
    shapes = nd.attr["output_shapes"].list.shape if "output_shapes" in nd.attr else []
    if types and len(shapes) == len(types):
        result.attr["_output_shapes"].list.shape.extend(shapes)
    return result


def _lower_if(nd: NodeDef, functions: dict, out: list, stack: tuple) -> None:
    then_fn = _function(nd, "then_branch", functions)
    else_fn = _function(nd, "else_branch", functions)
    data, controls = _split_inputs(nd)
    tin = list(nd.attr["Tin"].list.type)
    tout = list(nd.attr["Tout"].list.type)
    if not data or len(data) - 1 != len(tin):
        raise ValueError(
            f"Node '{nd.name}' ({nd.op}) has {len(data)} inputs for a predicate and "
            f"{len(tin)} arguments"
        )
    p, dev = nd.name, nd.device
    pred = data[0]
    tcond = nd.attr["Tcond"].type if "Tcond" in nd.attr else _DT_BOOL
    if tcond != _DT_BOOL:  # TF: a non-boolean scalar predicate is "!= 0"
        out.append(_node(f"{p}/pred", "Cast", [pred, *controls], dev, SrcT=tcond, DstT=_DT_BOOL))
        pred = f"{p}/pred"
    out.append(_node(f"{p}/switch_pred", "Switch", [pred, pred, *controls], dev, T=_DT_BOOL))
    out.append(_node(f"{p}/pivot_f", "Identity", [f"{p}/switch_pred"], dev, T=_DT_BOOL))
    out.append(_node(f"{p}/pivot_t", "Identity", [f"{p}/switch_pred:1"], dev, T=_DT_BOOL))
    for k, (arg, t) in enumerate(zip(data[1:], tin, strict=True)):
        out.append(_node(f"{p}/input_{k}", "Switch", [arg, pred, *controls], dev, T=t))
    branches = (("else", else_fn, 0, "pivot_f"), ("then", then_fn, 1, "pivot_t"))
    for branch, fn, side, pivot in branches:
        inputs = [f"{p}/input_{k}:{side}" for k in range(len(tin))]
        _expand(_call(f"{p}/{branch}", fn, inputs, [f"^{p}/{pivot}"], dev), functions, out, stack)
        out.append(
            _node(
                f"{p}/{branch}_done",
                "Identity",
                [f"{p}/{pivot}", f"^{p}/{branch}"],
                dev,
                T=_DT_BOOL,
            )
        )
    for k, t in enumerate(tout):
        out.append(
            _node(f"{p}/output_{k}", "Merge", [f"{p}/else:{k}", f"{p}/then:{k}"], dev, T=t, N=2)
        )
    out.append(
        _node(
            f"{p}/branch_executed",
            "Merge",
            [f"{p}/else_done", f"{p}/then_done"],
            dev,
            T=_DT_BOOL,
            N=2,
        )
    )
    outputs = [f"{p}/output_{k}" for k in range(len(tout))]
    out.append(_result_node(nd, outputs, tout, [f"^{p}/branch_executed"]))


def _const_int32(name: str, value: int, controls: list, device: str) -> NodeDef:
    nd = _node(name, "Const", list(controls), device)
    nd.attr["dtype"].type = _DT_INT32
    nd.attr["value"].tensor.dtype = _DT_INT32
    nd.attr["value"].tensor.int_val.append(value)
    nd.attr["value"].tensor.tensor_shape.SetInParent()
    return nd


def _lower_case(nd: NodeDef, functions: dict, out: list, stack: tuple) -> None:
    """Case `c` (tf.switch_case): branch j runs when the index is j, the last branch
    when the index is out of range (TF's rule).  As `_lower_if` with one predicate per
    branch: `c/pred_j`, the inputs switched on it (`c/input_j_k`), the branch a call
    `c/branch_j` gated by `c/pivot_j`, and `c/output_k` = Merge of the branches' k-th
    results (exactly one branch is live)."""
    branches = list(nd.attr["branches"].list.func)
    for j, fn in enumerate(branches):
        if fn.name not in functions:
            raise ValueError(
                f"Node '{nd.name}' ({nd.op}) names function '{fn.name}' as branch {j}, "
                "not in the library"
            )
    data, controls = _split_inputs(nd)
    tin = list(nd.attr["Tin"].list.type)
    tout = list(nd.attr["Tout"].list.type)
    if not branches or not data or len(data) - 1 != len(tin):
        raise ValueError(
            f"Node '{nd.name}' ({nd.op}) has {len(data)} inputs for an index and "
            f"{len(tin)} arguments, and {len(branches)} branches"
        )
    p, dev, index = nd.name, nd.device, data[0]
    n = len(branches)
    for j in range(n):
        pred = f"{p}/pred_{j}"
        if j < n - 1:
            out.append(_const_int32(f"{p}/index_{j}", j, controls, dev))
            out.append(_node(pred, "Equal", [index, f"{p}/index_{j}"], dev, T=_DT_INT32))
        else:  # the default: an index below 0 or at least n - 1
            zero, last = f"{p}/index_zero", f"{p}/index_last"
            out.append(_const_int32(zero, 0, controls, dev))
            out.append(_const_int32(last, n - 1, controls, dev))
            out.append(_node(f"{p}/below", "Less", [index, zero], dev, T=_DT_INT32))
            out.append(_node(f"{p}/above", "GreaterEqual", [index, last], dev, T=_DT_INT32))
            out.append(_node(pred, "LogicalOr", [f"{p}/below", f"{p}/above"], dev))
        out.append(_node(f"{p}/switch_pred_{j}", "Switch", [pred, pred], dev, T=_DT_BOOL))
        out.append(
            _node(f"{p}/pivot_{j}", "Identity", [f"{p}/switch_pred_{j}:1"], dev, T=_DT_BOOL)
        )
        for k, (arg, t) in enumerate(zip(data[1:], tin, strict=True)):
            out.append(_node(f"{p}/input_{j}_{k}", "Switch", [arg, pred, *controls], dev, T=t))
        inputs = [f"{p}/input_{j}_{k}:1" for k in range(len(tin))]
        call = _call(f"{p}/branch_{j}", branches[j], inputs, [f"^{p}/pivot_{j}"], dev)
        _expand(call, functions, out, stack)
        out.append(
            _node(f"{p}/branch_{j}_done", "Identity", [f"{p}/pivot_{j}", f"^{p}/branch_{j}"],
                  dev, T=_DT_BOOL)  # fmt: skip
        )
    for k, t in enumerate(tout):
        merged = [f"{p}/branch_{j}:{k}" for j in range(n)]
        out.append(_node(f"{p}/output_{k}", "Merge", merged, dev, T=t, N=n))
    done = [f"{p}/branch_{j}_done" for j in range(n)]
    out.append(_node(f"{p}/branch_executed", "Merge", done, dev, T=_DT_BOOL, N=n))
    outputs = [f"{p}/output_{k}" for k in range(len(tout))]
    out.append(_result_node(nd, outputs, tout, [f"^{p}/branch_executed"]))


def _lower_while(nd: NodeDef, functions: dict, out: list, stack: tuple) -> None:
    cond_fn = _function(nd, "cond", functions)
    body_fn = _function(nd, "body", functions)
    data, controls = _split_inputs(nd)
    types = list(nd.attr["T"].list.type)
    if not data or len(data) != len(types):
        raise ValueError(
            f"Node '{nd.name}' ({nd.op}) has {len(data)} inputs for {len(types)} loop variables"
        )
    p, dev = nd.name, nd.device
    parallel = nd.attr["parallel_iterations"].i if "parallel_iterations" in nd.attr else 10
    n = len(types)
    for k, (x, t) in enumerate(zip(data, types, strict=True)):
        out.append(
            _node(
                f"{p}/enter_{k}",
                "Enter",
                [x, *controls],
                dev,
                T=t,
                frame_name=p.encode(),
                is_constant=False,
                parallel_iterations=parallel,
            )
        )
        out.append(
            _node(
                f"{p}/merge_{k}",
                "Merge",
                [f"{p}/enter_{k}", f"{p}/next_iteration_{k}"],
                dev,
                T=t,
                N=2,
            )
        )
    merges = [f"{p}/merge_{k}" for k in range(n)]
    # The cond's and body's nodes without inputs (constants) run in the loop's frame,
    # once per iteration, by a control edge from this iteration's values.
    _expand(_call(f"{p}/cond", cond_fn, merges, [f"^{p}/merge_0"], dev), functions, out, stack)
    pred = f"{p}/cond"
    out_types = [a.type for a in functions[cond_fn.name].signature.output_arg]
    if len(out_types) != 1:
        raise ValueError(f"Node '{nd.name}': cond '{cond_fn.name}' must return one value")
    if out_types[0] not in (_DT_BOOL, 0):
        out.append(_node(f"{p}/pred", "Cast", [pred], dev, SrcT=out_types[0], DstT=_DT_BOOL))
        pred = f"{p}/pred"
    out.append(_node(f"{p}/loop_cond", "LoopCond", [pred], dev))
    for k, t in enumerate(types):
        out.append(_node(f"{p}/switch_{k}", "Switch", [merges[k], f"{p}/loop_cond"], dev, T=t))
        out.append(_node(f"{p}/exit_{k}", "Exit", [f"{p}/switch_{k}"], dev, T=t))
        out.append(_node(f"{p}/body_in_{k}", "Identity", [f"{p}/switch_{k}:1"], dev, T=t))
    body_in = [f"{p}/body_in_{k}" for k in range(n)]
    _expand(_call(f"{p}/body", body_fn, body_in, [f"^{p}/body_in_0"], dev), functions, out, stack)
    for k, t in enumerate(types):
        out.append(_node(f"{p}/next_iteration_{k}", "NextIteration", [f"{p}/body:{k}"], dev, T=t))
    out.append(_result_node(nd, [f"{p}/exit_{k}" for k in range(n)], types, []))


def _rename_colocation(nd: NodeDef, prefix: str, body: dict, args: dict) -> None:
    """`loc:@x` entries naming a body node or an argument, as they are named inlined; a
    name the function does not hold (an outer node) is dropped, as TF's inliner does."""
    rewrite_colocation(nd, lambda name: f"{prefix}/{name}" if name in body else args.get(name))


def rewrite_colocation(nd: NodeDef, rename: Callable[[str], str | None]) -> None:
    """Each `loc:@name` entry of `nd`'s `_class` as `loc:@rename(name)`, dropped where
    `rename` gives None (the attr too, once nothing is left)."""
    kept = []
    for entry in nd.attr["_class"].list.s:
        text = entry.decode("utf-8", "replace")
        if not text.startswith("loc:@"):
            kept.append(entry)
            continue
        name = rename(text[len("loc:@") :])
        if name is not None:
            kept.append(f"loc:@{name}".encode())
    del nd.attr["_class"].list.s[:]
    if kept:
        nd.attr["_class"].list.s.extend(kept)
    else:
        del nd.attr["_class"]


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
    elif nd.op in _CALL_OPS or nd.op in _IF_OPS or nd.op in _CASE_OPS:
        names, sizes = ["output"], {"output": len(nd.attr["Tout"].list.type)}
    elif nd.op in _WHILE_OPS:
        names, sizes = ["output"], {"output": len(nd.attr["T"].list.type)}
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
