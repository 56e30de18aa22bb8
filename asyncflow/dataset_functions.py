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
- a DT_RESOURCE capture whose value a node of the GraphDef makes (TF's lifted
  `tf.FIFOQueue`, made outside the function) is a placeholder of that node's type here
  (a queue's handle is a string);
- the nodes made from a function are named into `inside` for the importer, which marks
  their ops as a traced function's (`_in_dataset_function`: an unshared queue, table,
  accumulator... made there lasts a pass, kernel_api.kernel_resource);
- the attr `a` is replaced by the three name-list attrs, with the prefix below (a
  function with no results names its `control_ret` nodes, by op name, as its results:
  each call runs them); but
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

from typing import NamedTuple

from asyncflow.function_library import (
    _arg_type,
    _body_input,
    _rename_colocation,
    inline_calls,
    rewrite_colocation,
)
from asyncflow.protos.function_pb2 import FunctionDef
from asyncflow.protos.node_def_pb2 import NodeDef
from asyncflow.registry import get_op_def

__all__ = ["FUNCTION_LIST_ATTRS", "export", "instantiate"]

_VARIANT = 21
_STRING = 7
_RESOURCE = 20

# The attrs asyncflow's dataset ops name a traced function's tensors with.
FUNCTION_LIST_ATTRS = ("_inputs", "_outputs", "_captures")
# Function attrs of TF's ops that asyncflow's never call: the tf.data service's
# `uncompress_fn` (its elements travel uncompressed here; export writes TF's).
_DT_VARIANT = 21
_UNUSED_FUNCS = {
    "DataServiceDatasetV3": ("uncompress_fn",),
    "DataServiceDatasetV4": ("uncompress_fn",),
}


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


def instantiate(nodes: list[NodeDef], library, inside: set[str] | None = None) -> list[NodeDef]:
    """`nodes` with every dataset function attr instantiated (see the module note);
    the names of the nodes made from the functions (their argument placeholders and
    bodies) go into `inside`, where given: the importer marks their ops as a traced
    function's (`_in_dataset_function`: an unshared resource one makes lasts a pass,
    kernel_api.kernel_resource)."""
    if not any(_has_func(nd) for nd in nodes):
        return nodes
    functions = {f.signature.name: f for f in library.function}
    top = {nd.name: nd for nd in nodes}
    out: list[NodeDef] = []
    for nd in nodes:
        _rewrite(nd, functions, library, out, (), inside, top)
    return out


def _captured_dtype(nd: NodeDef, types_attr: str, k: int, top: dict) -> int | None:
    """The dtype of `nd`'s `k`th captured value (the input list typed by `types_attr`)
    as this runtime's op makes it, where its producer is a node of the GraphDef with a
    fixed first output type: a resource TF captures (a lifted `tf.FIFOQueue`'s handle,
    DT_RESOURCE in the function's signature) is a string handle here.  None where
    unknown."""
    try:
        op_def = get_op_def(nd.op)
    except KeyError:
        return None
    pos = 0
    attr = nd.attr  # (read with `in` first: indexing a missing key would add it)
    for arg in op_def.inputs:
        if arg.type_attr == types_attr:
            break
        if arg.number_attr:
            if arg.number_attr not in attr:
                return None
            pos += attr[arg.number_attr].i
        elif arg.type_attr and getattr(op_def.attrs.get(arg.type_attr), "is_list", False):
            if arg.type_attr not in attr:
                return None
            pos += len(attr[arg.type_attr].list.type)
        else:
            pos += 1
    else:
        return None
    data = [t for t in nd.input if not t.startswith("^")]
    if pos + k >= len(data):
        return None
    name, _, index = data[pos + k].partition(":")
    producer = top.get(name)
    if producer is None or index not in ("", "0"):
        return None
    if producer.op == "Placeholder":  # (an enclosing function's captured value)
        return producer.attr["dtype"].type if "dtype" in producer.attr else None
    try:
        outputs = get_op_def(producer.op).outputs
    except KeyError:
        return None
    if not outputs or outputs[0].fixed_dtype is None or outputs[0].number_attr:
        return None
    return outputs[0].fixed_dtype.as_datatype_enum


def _rewrite(
    nd: NodeDef,
    functions: dict,
    library,
    out: list,
    stack: tuple,
    inside: set | None = None,
    top: dict | None = None,
) -> None:
    if not _has_func(nd):
        out.append(nd)
        return
    node = NodeDef()
    node.CopyFrom(nd)
    _variants_as_strings(node)
    for attr in _UNUSED_FUNCS.get(nd.op, ()):
        if attr in node.attr:  # (a function this runtime's op never calls: dropped)
            node.attr[attr].s = b""
    if not _has_func(node):
        out.append(node)
        return
    for attr in sorted(k for k, v in node.attr.items() if v.WhichOneof("value") == "func"):
        fname = nd.attr[attr].func.name
        if fname not in functions:
            raise ValueError(
                f"Node '{nd.name}': attr '{attr}' names function '{fname}', not in the library"
            )
        if fname in stack:
            raise ValueError(f"Function '{fname}' calls itself (through {' -> '.join(stack)})")
        fdef = functions[fname]
        sig = fdef.signature
        types_attr = "Tcaptured" if nd.op == "BatchFunction" else _capture_types_attr(attr)
        if types_attr not in nd.attr and f"T{attr}_args" in nd.attr:
            types_attr = f"T{attr}_args"  # (the snapshot ops: Tshard_func_args, ...)
        n_captures = len(nd.attr[types_attr].list.type) if types_attr in nd.attr else 0
        if n_captures > len(sig.input_arg):
            raise ValueError(
                f"Node '{nd.name}': function '{fname}' takes {len(sig.input_arg)} arguments, "
                f"fewer than the node's {n_captures} captured values"
            )
        scope = f"{nd.name}/_{attr}"
        args: dict[str, str] = {}
        placeholders: list[str] = []
        made: list[NodeDef] = []
        first_capture = len(sig.input_arg) - n_captures
        for i, arg in enumerate(sig.input_arg):
            ph = NodeDef(name=f"{scope}/{arg.name}", op="Placeholder", device=nd.device)
            dtype = _arg_type(arg, nd)
            if dtype == _RESOURCE and i >= first_capture and top is not None:
                dtype = _captured_dtype(nd, types_attr, i - first_capture, top) or dtype
            ph.attr["dtype"].type = _STRING if dtype == _VARIANT else dtype
            out.append(ph)
            args[arg.name] = ph.name
            placeholders.append(f"{ph.name}:0")
            made.append(ph)
        body_nodes = _body(fdef, scope, args, functions, fname)
        inner: list[NodeDef] = []
        # (what a function inside this one captures may be one of its nodes)
        known = None if top is None else {**top, **{n.name: n for n in made + body_nodes}}
        for b in body_nodes:
            _rewrite(b, functions, library, inner, (*stack, fname), None, known)
        inner = inline_calls(inner, library)
        if inside is not None:
            inside.update(args.values())
            inside.update(b.name for b in inner)
        out.extend(inner)
        body = {b.name: b for b in fdef.node_def}
        results = []
        for arg in sig.output_arg:
            if arg.name not in fdef.ret:
                raise ValueError(f"Function '{fname}' returns no value for '{arg.name}'")
            text = _body_input(fdef.ret[arg.name], scope, args, body, functions, fname)
            results.append(text if ":" in text else f"{text}:0")
        if not results:  # (no results: its control outputs, by op name, run at each call)
            made = {n.name for n in out}
            controls = (f"{scope}/{n}" for n in sorted(set(fdef.control_ret.values())))
            results = [n for n in controls if n in made]
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
        if "_class" in inner.attr:  # (colocation with a body node: its name here)
            _rename_colocation(inner, scope, body, args)
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


# -- export: asyncflow's traced functions as TF's FunctionDefs --------------------------------
#
# The inverse of `instantiate`, run by as_graph_def so that a GraphDef or MetaGraph
# asyncflow writes loads in TF.  For each dataset op `d` with `{prefix}_inputs` attrs, in
# graph order (a function's own dataset ops come before it, so nested functions are
# converted first):
#
# - the body: the ops reached backward from `{prefix}_outputs`, stopping at the argument
#   and capture placeholders; each becomes a node of a FunctionDef named
#   `__inference_<d>_<attr>_<n>`, its inputs in TF's `node:out_arg:index` form;
# - the signature: an argument per placeholder (a dataset handle, a window or a dataset
#   passed along, as DT_VARIANT) and a result per output (an op named there, by a
#   function with no results, is a control output: `control_ret`);
# - `d` gets TF's func attr and loses the name-list attrs;
# - the function's own nodes (its body, its placeholders and whatever depends on them)
#   leave the top level, unless something outside the function uses them;
# - an op TF makes outside the function (`_lifted`: a tf.FIFOQueue's, a StaticHashTable's)
#   stays at the top level, its output a captured value of the function (DT_RESOURCE,
#   after the others), passed on through an enclosing function the same way, as TF
#   writes it; a function with a stateful body is marked `is_stateful` (TF would
#   parallelize or reorder the calls of one that is not).
# A OneShotIterator's dataset input becomes its `dataset_factory`: a function of no
# arguments holding the dataset ops it reads (TF's form).  Attrs only asyncflow's ops
# have (`output_types` where TF's op has none) are dropped.  A function whose body
# reaches a variable (or a node no FunctionDef can hold) keeps asyncflow's form: the
# GraphDef still round-trips here, and TF then rejects that one node.

_TF_ATTR = {"f": "f", "key": "key_func", "reduce": "reduce_func", "size": "window_size_func",
            "init": "init_func", "finalize": "finalize_func", "shard": "shard_func",
            "reader": "reader_func"}  # fmt: skip
_PREDICATE_OPS = ("FilterDataset", "TakeWhileDataset")
_DATASET_INPUTS = frozenset(
    ["input_dataset", "another_dataset", "input_datasets", "selector_input_dataset",
     "data_input_datasets", "dataset"]
)  # fmt: skip
_RETURNS_DATASET = {
    ("FlatMapDataset", "f"), ("InterleaveDataset", "f"), ("ParallelInterleaveDatasetV2", "f"),
    ("ParallelInterleaveDatasetV3", "f"), ("ParallelInterleaveDatasetV4", "f"),
    ("LegacyParallelInterleaveDatasetV2", "f"), ("GroupByWindowDataset", "reduce"),
}  # fmt: skip
# Attrs asyncflow's ops carry where TF's have none (TF rejects a NodeDef naming them).
_OURS_ONLY = {
    "MakeIterator": ("output_types",),
    "TensorSliceDataset": ("output_types",),
    "TensorDataset": ("output_types",),
    "PaddedBatchDatasetV2": ("output_types",),
    "TFRecordDataset": ("output_types", "output_shapes"),
    "TextLineDataset": ("output_types", "output_shapes"),
    "FixedLengthRecordDatasetV2": ("output_types", "output_shapes"),
}
_VARIABLES = frozenset(["VariableV2", "Variable", "VarHandleOp", "TemporaryVariable"])


class _CannotExport(Exception):
    pass


def export(graph, gd) -> None:
    """Rewrite GraphDef `gd` of `graph` (asyncflow's form) into TF's form, in place."""
    _export_functions(graph, gd)
    _export_uncompress_fns(gd)


def _export_uncompress_fns(gd) -> None:
    """TF's DataServiceDatasetV3/V4 need `uncompress_fn` to name a function of the
    library (instantiated even when `uncompress` is false): each gets TF's, its
    elements' UncompressElement, which asyncflow's op never calls (import drops it)."""
    nodes = [*gd.node, *(nd for f in gd.library.function for nd in f.node_def)]
    made = {f.signature.name for f in gd.library.function}
    for nd in nodes:
        if nd.op not in _UNUSED_FUNCS or nd.attr["uncompress_fn"].WhichOneof("value") == "func":
            continue
        types = list(nd.attr["output_types"].list.type)
        name = f"_asyncflow_data_service_uncompress_{len(made)}"
        made.add(name)
        f = gd.library.function.add()
        f.signature.name = name
        arg = f.signature.input_arg.add()
        arg.name, arg.type = "args_0", _DT_VARIANT
        un = f.node_def.add()
        un.name, un.op = "UncompressElement", "UncompressElement"
        un.input.append("args_0")
        un.attr["output_types"].CopyFrom(nd.attr["output_types"])
        un.attr["output_shapes"].CopyFrom(nd.attr["output_shapes"])
        for k, t in enumerate(types):
            out = f.signature.output_arg.add()
            out.name, out.type = f"identity_{k}", t
            ident = f.node_def.add()
            ident.name, ident.op = f"Identity_{k}", "Identity"
            ident.input.append(f"UncompressElement:components:{k}")
            ident.attr["T"].type = t
            f.ret[out.name] = f"Identity_{k}:output:0"
        nd.attr["uncompress_fn"].func.name = name


def _export_functions(graph, gd) -> None:
    ops_ = graph.get_operations()
    if not any(op.type == "OneShotIterator" or _function_prefixes(op) for op in ops_):
        return
    by_name = {nd.name: nd for nd in gd.node}
    owned: set[str] = set()
    counter = [0]
    # op name -> [(position, lifted tensors)]: _capture_lifted; [(None, inputs)]: the
    # inputs of a map written apart from the earlier one fused into it (_export_apart)
    lifted_inputs: dict = {}
    exported: set[str] = set()
    for op in ops_:
        prefixes = _function_prefixes(op)
        if not prefixes or op.name not in by_name:
            continue
        nd = by_name[op.name]
        before = NodeDef()
        before.CopyFrom(nd)
        apart = getattr(op, "_fused_after", None)
        if apart is not None and apart[0].name in exported:
            try:
                fname, own = _export_apart(graph, op, gd, by_name, counter, lifted_inputs)
            except _CannotExport:
                nd.CopyFrom(before)  # (its fused call's function, as below)
                lifted_inputs.pop(op.name, None)
            else:
                for suffix in FUNCTION_LIST_ATTRS:
                    del nd.attr["f" + suffix]
                nd.attr["f"].func.name = fname
                owned |= own
                exported.add(op.name)
                continue
        try:
            converted = [
                _export_one(graph, op, p, gd, by_name, counter, lifted_inputs) for p in prefixes
            ]
        except _CannotExport:
            nd.CopyFrom(before)  # (asyncflow's form: its attrs as they were)
            lifted_inputs.pop(op.name, None)
            continue
        if op.name in lifted_inputs:
            controls = [t for t in nd.input if t.startswith("^")]
            data = [_tensor_name(t) for t in _with_lifted(op, lifted_inputs)]
            del nd.input[:]
            nd.input.extend(data + controls)
        for prefix, (fname, own) in zip(prefixes, converted, strict=True):
            for suffix in FUNCTION_LIST_ATTRS:
                del nd.attr[prefix + suffix]
            attr = (
                "predicate"
                if prefix == "f" and op.type in _PREDICATE_OPS
                else _TF_ATTR.get(prefix, prefix)
            )
            nd.attr[attr].func.name = fname
            owned |= own
        exported.add(op.name)
    apart = {k: v for k, v in lifted_inputs.items() if v[0][0] is None}
    for op in ops_:
        if op.type == "OneShotIterator" and op.name in by_name and op.inputs:
            _export_one_shot(op, by_name, gd, apart)
    for nd in [*gd.node, *(b for f in gd.library.function for b in f.node_def)]:
        for key in _OURS_ONLY.get(nd.op, ()):
            if key in nd.attr:
                del nd.attr[key]
    if owned:
        keep = [nd for nd in gd.node if nd.name not in owned]
        del gd.node[:]
        gd.node.extend(keep)


def _function_prefixes(op) -> list[str]:
    attrs = op._attrs
    return [p for p in _TF_ATTR if f"{p}_inputs" in attrs and f"{p}_outputs" in attrs]


def _is_dataset(t, depth: int = 0) -> bool:
    """Whether string tensor `t` holds a dataset (a dataset op's handle, or a function
    argument used as one)."""
    if t.dtype.base_dtype.name != "string" or depth > 8:
        return False
    if t.op.type.endswith("Dataset") or t.op.type in ("_SparseToDatasetHandle",):
        return True
    if t.op.type == "Identity":
        return _is_dataset(t.op.inputs[0], depth + 1)
    for consumer in t.consumers():
        pos = list(consumer.inputs).index(t)
        arg = _input_arg_at(consumer, pos)
        if arg in _DATASET_INPUTS:
            return True
        if consumer.type == "Identity" and _is_dataset(consumer.outputs[0], depth + 1):
            return True
    return False


def _arg_sizes(op, args) -> list[tuple[str, int]]:
    op_def = get_op_def(op.type)
    out = []
    for arg in getattr(op_def, args):
        if arg.number_attr:
            n = int(op._attrs[arg.number_attr])
        elif arg.type_attr and getattr(op_def.attrs.get(arg.type_attr), "is_list", False):
            n = len(op._attrs[arg.type_attr])
        else:
            n = 1
        out.append((arg.name, n))
    return out


def _input_arg_at(op, pos: int) -> str | None:
    try:
        sizes = _arg_sizes(op, "inputs")
    except KeyError:
        return None
    for name, n in sizes:
        if pos < n:
            return name
        pos -= n
    return None


def _output_ref(t, names: dict) -> str:
    """`t` as a FunctionDef body input: `node:out_arg:index`."""
    pos = t.value_index
    for name, n in _arg_sizes(t.op, "outputs"):
        if pos < n:
            return f"{names[t.op.name]}:{name}:{pos}"
        pos -= n
    raise _CannotExport(t.name)


def _export_one(graph, op, prefix, gd, by_name, counter, lifted_inputs: dict):
    attrs = op._attrs
    get = graph.get_tensor_by_name
    try:
        inputs = [get(n) for n in attrs[prefix + "_inputs"]]
        results = attrs[prefix + "_outputs"]
        outputs = [get(n) for n in results if ":" in n]
        # (a function with no results names its control outputs' ops: TF's control_ret)
        controls = [graph.get_operation_by_name(n) for n in results if ":" not in n]
        captures = [get(n) for n in attrs[prefix + "_captures"]]
    except (KeyError, ValueError):
        raise _CannotExport(op.name) from None
    stops = {t.op.name for t in inputs + captures}
    lifted: list = []
    body = _walk_back([t.op for t in outputs] + controls, stops, by_name, lifted, lifted_inputs)
    if lifted:  # (TF's form: made outside the function, its handle a captured value)
        _capture_lifted(op, prefix, body, lifted, captures, lifted_inputs)
    fn = _Fn(inputs, outputs, controls, captures, body)
    return _write_function(op, prefix, fn, gd, by_name, counter, lifted_inputs)


class _Fn(NamedTuple):
    """A traced function's tensors as a FunctionDef writes them."""

    inputs: list
    outputs: list
    controls: list
    captures: list
    body: list


def _write_function(op, prefix: str, fn: _Fn, gd, by_name, counter, lifted_inputs: dict):
    """`fn` into `gd`'s library as the FunctionDef of `op`'s attr `prefix`: (its name,
    the graph's nodes that are its own)."""
    inputs, outputs, controls, captures, body = fn
    counter[0] += 1
    fdef = FunctionDef()
    sig = fdef.signature
    sig.name = f"__inference_{_sanitize(op.name)}_{prefix}_{counter[0]}"
    args: dict[str, str] = {}  # tensor name -> argument name (a capture may be `split:1`)
    names: dict[str, str] = {}
    for i, t in enumerate(inputs + captures):
        arg = sig.input_arg.add()
        arg.name = f"args_{i}" if i < len(inputs) else f"captured_{i - len(inputs)}"
        arg.type = _VARIANT if _is_dataset(t) else t.dtype.base_dtype.as_datatype_enum
        if getattr(t.op, "_lifted", False):
            arg.type = _RESOURCE  # (TF's handle; instantiate makes it this runtime's)
        args[t.name] = arg.name
        names.setdefault(t.op.name, arg.name)  # (a control input on it)
    _add_body(fdef, body, names, by_name, args, lifted_inputs)
    # (TF parallelizes or reorders calls of a function not marked stateful: a queue's
    # enqueue and size in a map would race)
    sig.is_stateful = any(o.op_def.stateful for o in body)
    for k, t in enumerate(outputs):
        out = sig.output_arg.add()
        out.name = f"output_{k}"
        dataset = (op.type, prefix) in _RETURNS_DATASET or _is_dataset(t)
        out.type = _VARIANT if dataset else t.dtype.base_dtype.as_datatype_enum
        fdef.ret[out.name] = args[t.name] if t.name in args else _output_ref(t, names)
    for c in controls:
        sig.control_output.append(names[c.name])
        fdef.control_ret[names[c.name]] = names[c.name]
    nd = by_name[op.name]
    targs = "Targuments" if prefix == "f" else f"T{_TF_ATTR[prefix]}_other_arguments"
    if targs in nd.attr and captures:
        types = [_RESOURCE if getattr(t.op, "_lifted", False)
                 else _VARIANT if _is_dataset(t) else t.dtype.base_dtype.as_datatype_enum
                 for t in captures]  # fmt: skip
        del nd.attr[targs].list.type[:]
        nd.attr[targs].list.type.extend(types)
    gd.library.function.add().CopyFrom(fdef)
    return sig.name, _owned(op, inputs, body)


def _export_apart(graph, op, gd, by_name, counter, lifted_inputs: dict):
    """A map Dataset.map fused with the map before it into one call, written as TF
    writes the two (`op._fused_after`: the earlier map's op, already written, and its
    results as this map's part of the call reads them): this node reads the earlier
    map's dataset, and its function is its own part, those results its arguments, the
    captures it uses its captured values.  Into `lifted_inputs`, the node's inputs as
    written (a function or one-shot iterator around it walks them).  Where the part
    reads more of the earlier map than its results, or makes a lifted resource,
    _CannotExport: the node keeps its fused call's function, as TF runs it alike."""
    earlier_op, read = op._fused_after
    earlier = frozenset().union(*op._fused_maps)
    get = graph.get_tensor_by_name
    try:
        outputs = [get(n) for n in op._attrs["f_outputs"]]
        all_captures = [get(n) for n in op._attrs["f_captures"]]
    except (KeyError, ValueError):
        raise _CannotExport(op.name) from None
    if any(t.op.name not in earlier for t in read):
        raise _CannotExport(op.name)
    stops = earlier | {t.op.name for t in all_captures}
    body = _walk_back([t.op for t in outputs], stops, by_name)
    if any(getattr(o, "_lifted", False) for o in body):
        raise _CannotExport(op.name)
    used = {t.name for o in body for t in o.inputs} | {t.name for t in outputs}
    used_ops = {c.name for o in body for c in o.control_inputs}
    captures = [c for c in all_captures if c.name in used or c.op.name in used_ops]
    known = {t.name for t in read + captures}
    read_there = [*(t for o in body for t in o.inputs), *outputs]
    if any(t.name not in known for t in read_there if t.op.name in earlier):
        raise _CannotExport(op.name)  # (another tensor of the earlier map's)
    n = len(all_captures)
    inputs = [earlier_op.outputs[0], *captures, *list(op.inputs)[1 + n :]]
    lifted_inputs[op.name] = [(None, inputs)]
    nd = by_name[op.name]
    controls = [t for t in nd.input if t.startswith("^")]
    del nd.input[:]
    nd.input.extend([*map(_tensor_name, inputs), *controls])
    types = [t.dtype.base_dtype.as_datatype_enum for t in captures]
    del nd.attr["Targuments"].list.type[:]
    nd.attr["Targuments"].list.type.extend(types)
    fn = _Fn(list(read), outputs, [], captures, body)
    return _write_function(op, "f", fn, gd, by_name, counter, lifted_inputs)


def _owned(op, inputs, body) -> set[str]:
    """The function's own nodes: its argument placeholders, the ops depending on them,
    and body ops nothing outside the function uses."""
    own = {t.op.name for t in inputs}
    stack = [c for t in inputs for c in t.consumers()]
    while stack:
        o = stack.pop()
        if o.name in own or o is op:
            continue
        own.add(o.name)
        stack.extend(c for t in o.outputs for c in t.consumers())
        stack.extend(o._control_outputs if hasattr(o, "_control_outputs") else ())
    candidates = own | {o.name for o in body}
    changed = True
    while changed:
        changed = False
        for o in body:
            if o.name not in candidates or o.name in own:
                continue
            users = [c for t in o.outputs for c in t.consumers()]
            if any(u.name not in candidates for u in users):
                candidates.discard(o.name)
                changed = True
    return candidates


def _export_one_shot(op, by_name, gd, apart: dict) -> None:
    """OneShotIterator: its dataset input as TF's `dataset_factory` function (`apart`:
    the inputs of maps written apart, _export_apart)."""
    root = op.inputs[0]
    try:
        body = _walk_back([root.op], {}, by_name, None, apart)
    except _CannotExport:
        return  # (a fed or stateful input: keep asyncflow's form)
    fdef = FunctionDef()
    fdef.signature.name = f"_make_dataset_{_sanitize(op.name)}"
    names: dict[str, str] = {}
    _add_body(fdef, body, names, by_name, {}, apart)
    out = fdef.signature.output_arg.add()
    out.name = "handle"
    out.type = _VARIANT
    fdef.ret["handle"] = _output_ref(root, names)
    gd.library.function.add().CopyFrom(fdef)
    nd = by_name[op.name]
    nd.input.remove(nd.input[0])
    nd.attr["dataset_factory"].func.name = fdef.signature.name


def _walk_back(
    roots, stops, by_name: dict, lifted: list | None = None, lifted_inputs: dict | None = None
) -> list:
    """The ops reached backward from `roots` (data and control inputs, with the lifted
    ones a function inside gets: `lifted_inputs`), stopping at the ops of the
    function's arguments (names `stops`), in graph order; with `lifted`, also at the
    ops TF makes outside the function (`_lifted`: a tf.FIFOQueue's, a StaticHashTable's),
    which go into `lifted`.  Another placeholder, a variable or an op the GraphDef lacks
    cannot go into a FunctionDef (_CannotExport)."""
    body, seen, stack = [], set(), list(roots)
    while stack:
        o = stack.pop()
        if o.name in seen or o.name in stops:
            continue
        seen.add(o.name)
        if lifted is not None and getattr(o, "_lifted", False):
            lifted.append(o)
            continue
        if o.type in _VARIABLES or o.type.startswith("Placeholder") or o.name not in by_name:
            raise _CannotExport(o.name)
        body.append(o)
        stack.extend(t.op for t in _with_lifted(o, lifted_inputs))
        stack.extend(o.control_inputs)
    body.sort(key=lambda o: o._id)
    return body


def _with_lifted(op, lifted_inputs: dict | None) -> list:
    """`op`'s data inputs with the lifted resources its functions capture
    (`_capture_lifted`) at their places; a map written apart, its inputs as written."""
    added = lifted_inputs.get(op.name) if lifted_inputs else None
    if not added:
        return list(op.inputs)
    if added[0][0] is None:  # (_export_apart)
        return list(added[0][1])
    inputs = list(op.inputs)
    for pos, tensors in sorted(added, key=lambda e: -e[0]):  # (later places first)
        inputs[pos:pos] = tensors
    return inputs


def _capture_lifted(
    op, prefix: str, body: list, lifted: list, captures: list, lifted_inputs: dict
) -> None:
    """The outputs of the `lifted` ops that `body` reads become captured values of
    `op`'s function `prefix`, after its `captures` (appended there), and inputs of `op`'s
    NodeDef at the end of that function's captured inputs (into `lifted_inputs`), as TF
    writes a resource made outside a function: the op stays the graph's, and a resource
    it makes lasts the session (imported again, kernel_api.kernel_resource does not see
    it as the function's).  A function inside another passes it on the same way."""
    made = set(lifted)
    extra = []
    for o in body:  # (a control input on one is dropped, as _add_body drops it)
        for t in _with_lifted(o, lifted_inputs):
            if t.op in made and t not in extra and t not in captures:
                extra.append(t)
    if not extra:
        return
    targs = "Targuments" if prefix == "f" else f"T{_TF_ATTR[prefix]}_other_arguments"
    pos = 0
    for spec, (_, n) in zip(get_op_def(op.type).inputs, _arg_sizes(op, "inputs"), strict=True):
        pos += n
        if spec.type_attr == targs:
            break
    else:
        raise _CannotExport(op.name)
    lifted_inputs.setdefault(op.name, []).append((pos, extra))
    captures.extend(extra)  # (their types into `targs`: _export_one)


def _add_body(
    fdef, body: list, names: dict, by_name: dict, args: dict, lifted_inputs: dict | None = None
) -> None:
    """`body`'s NodeDefs into `fdef`, named uniquely (into `names`, op name -> node
    name), inputs in TF's `node:out_arg:index` form, or an argument's name where `args`
    (tensor name -> argument name) has the tensor; a dataset op's lifted captures
    (`lifted_inputs`) among them."""
    used = set(names.values()) | set(args.values())
    for o in body:
        name = _sanitize(o.name)
        while name in used:
            name += "_"
        used.add(name)
        names[o.name] = name
    for o in body:
        nd = fdef.node_def.add()
        nd.CopyFrom(by_name[o.name])
        nd.name = names[o.name]
        del nd.input[:]
        for t in _with_lifted(o, lifted_inputs):
            nd.input.append(args[t.name] if t.name in args else _output_ref(t, names))
        nd.input.extend(f"^{names[c.name]}" for c in o.control_inputs if c.name in names)
        nd.ClearField("device")
        if "_class" in nd.attr:  # (under the body's names; an outer op's dropped, as TF's
            rewrite_colocation(nd, names.get)  # inliner drops it: a cond's, a variable's)
        if o.type in ("Identity", "IdentityN") and any(_is_dataset(t) for t in o.inputs):
            _as_variant(nd)


def _as_variant(nd: NodeDef) -> None:
    for value in nd.attr.values():
        if value.WhichOneof("value") == "type" and value.type == _STRING:
            value.type = _VARIANT
        elif value.WhichOneof("value") == "list" and _STRING in value.list.type:
            types = [_VARIANT if t == _STRING else t for t in value.list.type]
            del value.list.type[:]
            value.list.type.extend(types)


def _tensor_name(t) -> str:
    """`t` as a NodeDef input names it (graph_io's form)."""
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)
