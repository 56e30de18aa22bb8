"""tf.raw_ops' functional control flow and calls, built in a graph: If, StatelessIf, Case,
StatelessCase, While, StatelessWhile, For, PartitionedCall, StatefulPartitionedCall,
RemoteCall, SymbolicGradient, MapDefun, and the Send / Recv pair.

asyncflow runs no function-valued attrs: a tf.function call is its body inlined
(asyncflow/tf_function.py), and the If / Case / While nodes of an imported GraphDef are
lowered to control flow v1 (function_library).  These raw ops are lowered the same way
as they are built: If is a `cond` of the two branch calls (Case: conds in a chain, the
last branch taking every index out of range, as TF's), While a `while_loop` of the cond
and body calls, For a `while_loop` counting from `start` by `delta`, MapDefun a `map_fn`
of the call, SymbolicGradient the call differentiated by `gradients`.  The node named as
the op (`If`, `While_1`) is an IdentityN of the results, so `If:0` names result 0 as in
TF's graph (its type is IdentityN); an op without results returns a NoOp.  Gradients are
those of the lowered graph: TF1's gradients of cond and while_loop.

A function attr is what TF 2.21 takes inside a TF1 graph: a ConcreteFunction
(`tf.function(...).get_concrete_function()`), or the name of a function already called
in this graph (TF: a name of the graph's function library).

Errors TF raises only when the step runs (a branch giving other results than `Tout`, a
call given arguments its signature does not take, For's zero `delta`, MapDefun's
arguments of different lengths) are raised here when the step runs too, by a
`_FunctionalError` op built in place of the call; a branch that never runs never fails.

Invariant: nothing here changes a ConcreteFunction; building only adds ops to the graph.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import keyword

import numpy as np

from asyncflow import dtypes, errors, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow import raw_op_functions as _raw
from asyncflow.gradients import gradients as _gradients
from asyncflow.graph_io import register_graph_def_exporter, tensor_proto
from asyncflow.ops import array_ops, control_flow_ops, functional_ops
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op
from asyncflow.tf_function import ConcreteFunction, _inline

__all__: list[str] = []

_FUNCTIONS = "raw_ops_functions"  # (graph._attached: function name -> ConcreteFunction)

# -- an error raised when the step runs ---------------------------------------------------

FunctionalError = register_op(
    "_FunctionalError",
    inputs=["when: bool", "data: Tdata"],
    outputs=["output: Tout"],
    attrs={
        "Tdata": TypeConstraint(None, default=(), is_list=True),
        "Tout": TypeConstraint(None, default=(), is_list=True),
        "code": REQUIRED,
        "message": REQUIRED,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape() for _ in op.outputs],
    stateful=True,
)
NotDifferentiable("_FunctionalError")


@FunctionalError.kernel()
async def _functional_error(ctx, when, *data):
    """Raises the error of class `code` when `when` is true (always when the op has
    results to stand for); `message` is formatted with the values of `data`."""
    if bool(when) or ctx.attrs["Tout"]:
        cls = errors.exception_type_from_error_code(ctx.attrs["code"])
        message = ctx.attrs["message"]
        if data:
            message = message.format(*[await ctx.device.copy_to_host(d) for d in data])
        raise cls(None, None, message)
    return None


def _fail(cls, message: str, tout, when=None, data=(), shapes=None) -> list:
    """Tensors of types `tout` (of `shapes`, where given) whose op raises `cls(message)`
    when the step runs (where `when` is true, if given); the op itself if no `tout`."""
    when = ops.convert_to_tensor(True if when is None else when, dtype=dtypes.bool)
    data = [ops.convert_to_tensor(d) for d in data]
    attrs = {
        "Tdata": [d.dtype.base_dtype for d in data],
        "Tout": list(tout),
        "code": errors.error_code_from_exception_type(cls),
        "message": message,
    }
    op = ops.apply_op("_FunctionalError", [when, data], attrs, name="FunctionalError")
    for t, shape in zip(op.outputs, shapes or [], strict=False):
        t._shape = tensor_shape.as_shape(shape)
    return list(op.outputs) if tout else [op]


def _export_checks(graph, gd) -> None:
    """GraphDef exporter: each `_FunctionalError` becomes TF's ops, so that TF imports
    and runs the GraphDef (Assert's wording then).  A check (no results: For's delta,
    MapDefun's lengths) becomes an Assert of `not when`, its message the first datum;
    one that stands for results (a branch that does not fit) an IdentityN of zeros of
    its types, each after such an Assert (which always fails)."""
    del graph
    for nd in list(gd.node):
        if nd.op != "_FunctionalError":
            continue
        tout = list(nd.attr["Tout"].list.type)
        check = nd if not tout else gd.node.add(name=f"{nd.name}/check", device=nd.device)
        _assert_node(gd, nd, check)
        if not tout:
            continue
        nd.op = "IdentityN"
        del nd.input[:]
        for key in list(nd.attr):
            if key != "_class":
                del nd.attr[key]
        nd.attr["T"].list.type.extend(tout)
        for k, t in enumerate(tout):
            zero = gd.node.add(name=f"{nd.name}/zero_{k}", op="Const", device=nd.device)
            zero.input.append(f"^{check.name}")
            zero.attr["dtype"].type = t
            if t == dtypes.string.as_datatype_enum:
                zero.attr["value"].tensor.dtype = t
                zero.attr["value"].tensor.string_val.append(b"")
                zero.attr["value"].tensor.tensor_shape.SetInParent()
            else:
                value = np.zeros((), dtypes.as_dtype(t).as_numpy_dtype)
                tensor_proto(value, zero.attr["value"].tensor)
            nd.input.append(zero.name)


def _assert_node(gd, nd, check) -> None:
    """`check` as TF's Assert of `not` nd's `when`, with nd's message and data."""
    data = [i for i in nd.input if not i.startswith("^")]
    controls = [i for i in nd.input if i.startswith("^")]
    not_when = gd.node.add(name=f"{check.name}/not_when", op="LogicalNot", device=nd.device)
    not_when.input.append(data[0])
    message = gd.node.add(name=f"{check.name}/message", op="Const", device=nd.device)
    message.input.extend(controls)
    message.attr["dtype"].type = dtypes.string.as_datatype_enum
    message.attr["value"].tensor.dtype = dtypes.string.as_datatype_enum
    message.attr["value"].tensor.string_val.append(
        nd.attr["message"].s.replace(b"{}", b"").strip()
    )
    message.attr["value"].tensor.tensor_shape.SetInParent()
    types = list(nd.attr["Tdata"].list.type)
    if check is nd:
        for key in ("Tdata", "Tout", "code", "message"):
            del nd.attr[key]
    check.op = "Assert"
    check.attr["T"].list.type.extend([dtypes.string.as_datatype_enum, *types])
    check.attr["summarize"].i = 3
    del check.input[:]
    check.input.extend([not_when.name, message.name, *data[1:], *controls])


register_graph_def_exporter(_export_checks)


def _tf_name(dtype) -> str:
    """TF's C++ name of a dtype, as its runtime messages spell it."""
    name = dtypes.as_dtype(dtype).base_dtype.name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


# -- function attrs ------------------------------------------------------------------------


def _function(value, arg: str) -> ConcreteFunction | str:
    """The ConcreteFunction a func attr names (see the module note); remembered in the
    default graph, so that its name names it afterwards."""
    graph = ops.get_default_graph()
    known = graph._attached.setdefault(_FUNCTIONS, {})
    if isinstance(value, ConcreteFunction):
        known[value.name] = value
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return known.get(value, value)  # (a name it lacks fails when the step runs, as TF)
    raise TypeError(f"Don't know how to convert {value!r} to a func for argument {arg}")


def _tensors(values, arg: str) -> list:
    if isinstance(values, ops.Tensor) or not isinstance(values, list | tuple):
        raise TypeError(f"Expected list for '{arg}' argument, got {values!r}.")
    return [ops.convert_to_tensor(v) for v in values]


def _types(values, arg: str) -> list:
    if not isinstance(values, list | tuple):
        raise TypeError(f"Expected list for '{arg}' argument, got {values!r}.")
    return [dtypes.as_dtype(t) for t in values]


def _mismatch(fn, args: list):
    """The error class and TF's message where `fn` cannot take `args` (its arguments,
    then the tensors it captures, as TF's function signature), else None."""
    if isinstance(fn, str):
        return errors.NotFoundError, f"Function {fn} is not defined."
    params = fn.graph.inputs
    if len(params) != len(args):
        return (
            errors.InvalidArgumentError,
            f"Expects {len(params)} arguments, but {len(args)} is provided",
        )
    for k, (p, a) in enumerate(zip(params, args, strict=True)):
        if p.dtype.base_dtype != a.dtype.base_dtype:
            return (
                errors.InvalidArgumentError,
                f"Expects arg[{k}] to be {_tf_name(p.dtype)} but {_tf_name(a.dtype)} is provided",
            )
    return None


def _results_mismatch(outs: list, tout: list) -> str | None:
    """TF's (If's) message where a function's results are not of types `tout`."""
    if len(outs) != len(tout):
        return f"Expect to produce {len(tout)} tensors, but only get {len(outs)}"
    for k, (t, want) in enumerate(zip(outs, tout, strict=True)):
        if t.dtype.base_dtype != want:
            return f"Expect {k}-th output is of type {_tf_name(want)} but get {_tf_name(t.dtype)}"
    return None


def _call(fn, args: list, tout, base: str, shapes=None, results_error=None) -> list:
    """`fn` inlined with `args`: its flat results (the call op where it has none), or
    ops that fail when the step runs where the function does not fit (TF's checks):
    `results_error(outs)` gives the class and message for results that are not of
    types `tout` (None: any results)."""
    problem = _mismatch(fn, args)
    if problem is not None:
        return _fail(*problem, tout or [], shapes=shapes)
    outs = list(fn.graph.outputs)
    if tout is not None and results_error is not None:
        problem = results_error(outs)
        if problem is not None:
            return _fail(*problem, tout, shapes=shapes)
    graph = ops.get_default_graph()
    call = graph.unique_name(base)
    stateful = any(op.op_def.stateful for op in fn.graph.get_operations())
    n = fn.graph.n_args
    _inline(graph, fn.graph, call, args[:n], stateful, captures=args[n:])
    op = graph.get_operation_by_name(call)
    return list(op.outputs) if outs else [op]


def _if_results(tout):
    def check(outs):
        problem = _results_mismatch(outs, tout)
        return None if problem is None else (errors.InternalError, problem)

    return check


def _keyword_only(op_type: str, args: tuple, keys: list) -> None:
    """TF's TypeError for a raw op given positional arguments."""
    if args:
        snake = _raw._snake(op_type)
        snake = "_" + snake if keyword.iskeyword(snake) else snake
        raise TypeError(
            f"{snake} only takes keyword args (possible keys: {keys}). Please pass these "
            "args as kwargs instead."
        )


@contextlib.contextmanager
def _scope(op_type: str, name):
    """Reserves the op's node name (`name`, else the op type, made unique) and opens the
    name scope under it, where the lowered ops go; yields the node name."""
    graph = ops.get_default_graph()
    call = graph.unique_name(name or op_type)
    with ops.name_scope(call + "/"):
        yield call


def _result(call: str, outs: list, output_shapes=()):
    """The node named `call`: an IdentityN of `outs` (a NoOp after them if none)."""
    tensors = [t for t in outs if isinstance(t, ops.Tensor)]
    graph = ops.get_default_graph()
    saved, graph._name_stack = graph._name_stack, ""
    try:
        if not tensors:
            with graph.control_dependencies([o for o in outs if isinstance(o, ops.Operation)]):
                return ops.apply_op("NoOp", [], name=call + "/")
        op = ops.apply_op(
            "IdentityN",
            [tensors],
            {"T": [t.dtype.base_dtype for t in tensors]},
            name=call + "/",
        )
    finally:
        graph._name_stack = saved
    shapes = list(output_shapes or [])
    for k, t in enumerate(op.outputs):
        t._shape = tensors[k].shape
        if len(shapes) == len(tensors):
            t._shape = t.shape.merge_with(tensor_shape.as_shape(shapes[k]))
    return list(op.outputs)


def _truth(x) -> ops.Tensor:
    """TF's truth of a tensor as a functional predicate: a scalar is true where it is
    not zero (not empty for strings), any other tensor where it has elements."""
    rank = x.shape.ndims
    if x.dtype.base_dtype == dtypes.bool and rank == 0:
        return x
    if rank is not None and rank > 0:
        size = ops.apply_op("Size", [x], {"out_type": dtypes.int32}).outputs[0]
        return size > 0
    if x.dtype.base_dtype == dtypes.bool:
        nonzero = x
    else:
        zero = "" if x.dtype.base_dtype == dtypes.string else 0
        zero = ops.convert_to_tensor(zero, dtype=x.dtype.base_dtype)
        nonzero = ops.apply_op("NotEqual", [x, zero]).outputs[0]
    if rank == 0:
        return nonzero
    r = ops.apply_op("Rank", [x]).outputs[0]
    axes = ops.apply_op("Range", [0, r, 1]).outputs[0]
    anything = ops.apply_op("Any", [nonzero, axes]).outputs[0]
    size = ops.apply_op("Size", [x], {"out_type": dtypes.int32}).outputs[0]
    return ops.apply_op("Select", [r < 1, anything, size > 0]).outputs[0]


def _raw_op(fn):
    """`fn` as TF's raw op: keyword arguments only (TF's TypeError for others), with
    TF's signature."""
    sig = inspect.signature(fn)
    keys = list(sig.parameters)

    @functools.wraps(fn)
    def raw_op(*args, **kwargs):
        _keyword_only(fn.__name__, args, keys)
        return fn(**kwargs)

    params = [
        p.replace(
            kind=inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=[] if p.default == () else p.default,
        )
        for p in sig.parameters.values()
    ]  # (TF shows `output_shapes=[]`)
    raw_op.__signature__ = sig.replace(parameters=params)
    return raw_op


# -- If / Case -----------------------------------------------------------------------------


def _branch(fn, args, tout):
    def run():
        outs = _call(fn, args, tout, "PartitionedCall", results_error=_if_results(tout))
        if not tout:  # (cond needs a value: a constant after the call's ops)
            with ops.control_dependencies(outs):
                return [array_ops.constant(0, name="done")]
        return outs

    return run


def _finish(call, outs, tout, output_shapes=()):
    if not tout:
        return _result(call, [o.op if isinstance(o, ops.Tensor) else o for o in outs])
    return _result(call, outs, output_shapes)


def _if(op_type, cond, input, Tout, then_branch, else_branch, output_shapes, name):  # noqa: A002, N803
    then_fn = _function(then_branch, "then_branch")
    else_fn = _function(else_branch, "else_branch")
    tout = _types(Tout, "Tout")
    args = _tensors(input, "input")
    with _scope(op_type, name) as call:
        pred = _truth(ops.convert_to_tensor(cond))
        outs = control_flow_ops.cond(
            pred, _branch(then_fn, args, tout), _branch(else_fn, args, tout), strict=True
        )
    return _finish(call, outs, tout, output_shapes)


@_raw_op
def If(*, cond, input, Tout, then_branch, else_branch, output_shapes=(), name=None):  # noqa: A002, N802, N803
    """TF's raw op If: `then_branch(*input)` where `cond` is true, else
    `else_branch(*input)`, as a list of `Tout` tensors (the NoOp when Tout is empty)."""
    return _if("If", cond, input, Tout, then_branch, else_branch, output_shapes, name)


@_raw_op
def StatelessIf(*, cond, input, Tout, then_branch, else_branch, output_shapes=(), name=None):  # noqa: A002, N802, N803
    """TF's raw op StatelessIf: If whose branches have no side effects."""
    return _if("StatelessIf", cond, input, Tout, then_branch, else_branch, output_shapes, name)


def _case(op_type, branch_index, input, Tout, branches, output_shapes, name):  # noqa: A002, N803
    if not isinstance(branches, list | tuple):
        raise TypeError(f"Expected list for 'branches' argument, got {branches!r}.")
    if not branches:
        raise ValueError(
            f"Attr 'branches' of '{op_type}' Op passed list of length 0 less than minimum 1."
        )
    fns = [_function(b, "branches") for b in branches]
    tout = _types(Tout, "Tout")
    args = _tensors(input, "input")
    index = ops.convert_to_tensor(branch_index)
    if index.dtype.base_dtype != dtypes.int32:
        raise TypeError(
            f"Input 'branch_index' of '{op_type}' Op has type {index.dtype.name} that does "
            "not match expected type of int32."
        )
    with _scope(op_type, name) as call:
        if index.shape.ndims not in (None, 0):
            outs = _fail(errors.InvalidArgumentError, "branch_index must be scalar", tout)
            return _finish(call, outs, tout, output_shapes)

        def chain(j):  # branch j where the index is j, else the ones after it
            if j == len(fns) - 1:
                return _branch(fns[j], args, tout)
            pred = ops.apply_op("Equal", [index, j]).outputs[0]
            return lambda: control_flow_ops.cond(
                pred, _branch(fns[j], args, tout), chain(j + 1), strict=True
            )

        outs = chain(0)()
    return _finish(call, outs, tout, output_shapes)


@_raw_op
def Case(*, branch_index, input, Tout, branches, output_shapes=(), name=None):  # noqa: A002, N802, N803
    """TF's raw op Case: `branches[branch_index](*input)`, the last branch for an index
    out of range (negative or too large)."""
    return _case("Case", branch_index, input, Tout, branches, output_shapes, name)


@_raw_op
def StatelessCase(*, branch_index, input, Tout, branches, output_shapes=(), name=None):  # noqa: A002, N802, N803
    """TF's raw op StatelessCase: Case whose branches have no side effects."""
    return _case("StatelessCase", branch_index, input, Tout, branches, output_shapes, name)


# -- While / For ---------------------------------------------------------------------------


def _while_results(tout):
    def check(outs):
        if len(outs) != len(tout):
            return (
                errors.InvalidArgumentError,
                f"Expected {len(tout)} return values but got {len(outs)}.",
            )
        for k, (t, want) in enumerate(zip(outs, tout, strict=True)):
            if t.dtype.base_dtype != want:
                return (
                    errors.InvalidArgumentError,
                    f"Expected type {_tf_name(want)} for return value {k} but got "
                    f"{_tf_name(t.dtype)}.",
                )
        return None

    return check


def _while(op_type, input, cond, body, output_shapes, parallel_iterations, name):  # noqa: A002
    cond_fn = _function(cond, "cond")
    body_fn = _function(body, "body")
    args = _tensors(input, "input")
    types = [t.dtype.base_dtype for t in args]
    shapes = [tensor_shape.as_shape(s) for s in output_shapes] if output_shapes else None

    def test(*vs):
        outs = _call(cond_fn, list(vs), None, "cond")
        if len(outs) != 1 or not isinstance(outs[0], ops.Tensor):
            return _fail(
                errors.InvalidArgumentError,
                f"Expected a single scalar return value from WhileOp cond, got {len(outs)} "
                "tensors.",
                [dtypes.bool],
                shapes=[[]],
            )[0]
        return _truth(outs[0])

    def step(*vs):
        if not isinstance(body_fn, str) and len(body_fn.graph.inputs) > len(vs):
            return _fail(
                errors.InvalidArgumentError,
                f"Argument {len(vs)} is out of range.",
                types,
                shapes=[v.shape for v in vs],
            )
        return _call(
            body_fn,
            list(vs),
            types,
            "body",
            shapes=[v.shape for v in vs],
            results_error=_while_results(types),
        )

    with _scope(op_type, name) as call:
        outs = []
        if args:  # (TF accepts any parallel_iterations; 0 runs as 1)
            outs = control_flow_ops.while_loop(
                test,
                step,
                args,
                shape_invariants=shapes,
                parallel_iterations=max(1, int(parallel_iterations)),
                return_same_structure=True,
            )
    return _result(call, list(outs), output_shapes)


@_raw_op
def While(*, input, cond, body, output_shapes=(), parallel_iterations=10, name=None):  # noqa: A002, N802
    """TF's raw op While: `input` passed through `body` while `cond` of it is true."""
    return _while("While", input, cond, body, output_shapes, parallel_iterations, name)


@_raw_op
def StatelessWhile(*, input, cond, body, output_shapes=(), parallel_iterations=10, name=None):  # noqa: A002, N802
    """TF's raw op StatelessWhile: While whose functions have no side effects."""
    return _while("StatelessWhile", input, cond, body, output_shapes, parallel_iterations, name)


@_raw_op
def For(*, start, limit, delta, input, body, name=None):  # noqa: A002, N802
    """TF's raw op For: `input = body(i, *input)` for i from `start` towards `limit` by
    `delta` (int32 scalars; `limit` not reached).  As TF's, `delta` must lead from
    `start` to `limit` (InvalidArgumentError when the step runs otherwise)."""
    body_fn = _function(body, "body")
    args = _tensors(input, "input")
    types = [t.dtype.base_dtype for t in args]
    with _scope("For", name) as call:
        start, limit, delta = (
            ops.convert_to_tensor(v, dtype=dtypes.int32) for v in (start, limit, delta)
        )
        up = ops.apply_op("LogicalAnd", [delta > 0, start <= limit]).outputs[0]
        down = ops.apply_op("LogicalAnd", [delta < 0, start >= limit]).outputs[0]
        bad = ops.apply_op("LogicalNot", [ops.apply_op("LogicalOr", [up, down]).outputs[0]])
        check = _fail(
            errors.InvalidArgumentError,
            "Invalid start/limit/delta: {} {} {}",
            [],
            when=bad.outputs[0],
            data=[start, limit, delta],
        )
        with ops.control_dependencies(check):
            start = array_ops.identity(start)

        def test(i, *vs):
            return ops.apply_op("Select", [delta > 0, i < limit, i > limit]).outputs[0]

        def step(i, *vs):
            outs = _call(
                body_fn,
                [i, *vs],
                types,
                "body",
                shapes=[v.shape for v in vs],
                results_error=_while_results(types),
            )
            return [i + delta, *outs]

        outs = control_flow_ops.while_loop(test, step, [start, *args], return_same_structure=True)
    return _result(call, list(outs[1:]))


# -- calls ---------------------------------------------------------------------------------


def _partitioned(op_type, args, Tout, f, name):  # noqa: N803
    fn = _function(f, "f")
    tout = _types(Tout, "Tout")
    args = _tensors(args, "args")
    graph = ops.get_default_graph()
    node = graph.unique_name(name or op_type, mark_as_used=False)

    def results_error(outs):
        if len(outs) != len(tout):
            return (
                errors.InvalidArgumentError,
                f"Function {fn.name} returns {len(outs)} values, but {node} declares {len(tout)}",
            )
        for k, (t, want) in enumerate(zip(outs, tout, strict=True)):
            if t.dtype.base_dtype != want:
                return (
                    errors.InternalError,
                    f"Output {k} of type {_tf_name(t.dtype)} does not match declared "
                    f"output type {_tf_name(want)} for node {{{{node {node}}}}}",
                )
        return None

    with _scope(op_type, name) as call:
        if not isinstance(fn, str) and len(fn.graph.inputs) != len(args):
            outs = _fail(
                errors.InvalidArgumentError,
                "InstantiateOptions.input_devices must have the same length as the number of "
                f"arguments: input_devices length = {len(args)} number of arguments = "
                f"{len(fn.graph.inputs)}",
                tout,
            )
        else:
            outs = _call(fn, args, tout, "call", results_error=results_error)
    return _result(call, outs)


@_raw_op
def PartitionedCall(*, args, Tout, f, config="", config_proto="", executor_type="", name=None):  # noqa: N802, N803
    """TF's raw op PartitionedCall: `f(*args)` as a list of `Tout` tensors (`config`,
    `config_proto` and `executor_type` are accepted; asyncflow runs f inlined)."""
    return _partitioned("PartitionedCall", args, Tout, f, name)


@_raw_op
def StatefulPartitionedCall(
    *,
    args,
    Tout,
    f,
    config="",
    config_proto="",
    executor_type="",  # noqa: N802, N803
    name=None,
):
    """TF's raw op StatefulPartitionedCall: PartitionedCall of a function with side
    effects."""
    return _partitioned("StatefulPartitionedCall", args, Tout, f, name)


@_raw_op
def RemoteCall(*, target, args, Tout, f, name=None):  # noqa: N802, N803
    """TF's raw op RemoteCall: `f(*args)` on the device `target` names; asyncflow runs
    it on this process's devices (the call inlined, as PartitionedCall)."""
    ops.convert_to_tensor(target, dtype=dtypes.string)
    return _partitioned("RemoteCall", args, Tout, f, name)


@_raw_op
def SymbolicGradient(*, input, Tout, f, name=None):  # noqa: A002, N802, N803
    """TF's raw op SymbolicGradient: `input` is f's arguments then one gradient per f
    result; the results are the gradients of f's results with respect to its
    arguments, weighted by those (zeros where a result does not depend on one)."""
    fn = _function(f, "f")
    tout = _types(Tout, "Tout")
    values = _tensors(input, "input")
    with _scope("SymbolicGradient", name) as call:
        if isinstance(fn, str):
            outs = _fail(errors.NotFoundError, f"Function {fn} is not defined.", tout)
            return _result(call, outs)
        n = len(fn.graph.inputs)
        xs = [array_ops.identity(x) for x in values[:n]]
        dys = values[n:]
        ys = [y for y in _call(fn, xs, None, "call") if isinstance(y, ops.Tensor)]
        if len(ys) != len(dys) or [x.dtype.base_dtype for x in xs] != tout:
            outs = _fail(
                errors.InvalidArgumentError,
                f"SymbolicGradient of {fn.name} takes {n} arguments and {len(ys)} "
                f"gradients, of types [{', '.join(_tf_name(x.dtype) for x in xs)}]",
                tout,
            )
        else:
            grads = _gradients(ys, xs, grad_ys=dys) if ys else [None] * n
            outs = [
                array_ops.zeros_like(x) if g is None else ops.convert_to_tensor(g)
                for x, g in zip(xs, grads, strict=True)
            ]
    return _result(call, outs)


@_raw_op
def MapDefun(
    *,
    arguments,
    captured_inputs,
    output_types,
    output_shapes,
    f,  # noqa: N802
    max_intra_op_parallelism=1,
    name=None,
):
    """TF's raw op MapDefun: `f(*slices, *captured_inputs)` for each slice of the
    arguments along their first dimension (all of one length), stacked."""
    fn = _function(f, "f")
    args = _tensors(arguments, "arguments")
    captured = _tensors(captured_inputs, "captured_inputs")
    types = _types(output_types, "output_types")
    shapes = [tensor_shape.as_shape(s) for s in output_shapes]
    firsts = {a.shape[0] for a in args if a.shape.ndims and a.shape[0] is not None}
    if len(firsts) > 1:
        raise ValueError("Arguments must have the same dimension 0.")
    with _scope("MapDefun", name) as call:
        n = ops.apply_op("Shape", [args[0]]).outputs[0][0]
        checks = []
        for a in args[1:]:
            other = ops.apply_op("Shape", [a]).outputs[0][0]
            differ = ops.apply_op("NotEqual", [other, n]).outputs[0]
            checks += _fail(
                errors.InvalidArgumentError,
                "Arguments must have the same dimension 0.",
                [],
                when=differ,
            )
        with ops.control_dependencies(checks):
            args = [array_ops.identity(a) for a in args]

        def one(elems):
            outs = _call(
                fn, [*elems, *captured], types, "call", results_error=_while_results(types)
            )
            for k, t in enumerate(outs[: len(shapes)]):
                if isinstance(t, ops.Tensor) and not t.shape.is_compatible_with(shapes[k]):
                    return _fail(
                        errors.InvalidArgumentError,
                        f"Mismatch in function retval shape, {ops.shape_text(t.shape)}, and "
                        f"expected output shape, {ops.shape_text(shapes[k])}.",
                        types,
                        shapes=shapes,
                    )
            return outs

        outs = functional_ops.map_fn(one, list(args), dtype=list(types))
        outs = [ops.convert_to_tensor(o) for o in nest.flatten(outs)]
    result = _result(call, outs)
    for t, s in zip(result, shapes, strict=False):
        t._shape = t.shape.merge_with(tensor_shape.TensorShape([None]).concatenate(s))
    return result


_raw._BUILDERS.update(
    {
        fn.__name__: fn
        for fn in (
            If,
            StatelessIf,
            Case,
            StatelessCase,
            While,
            StatelessWhile,
            For,
            PartitionedCall,
            StatefulPartitionedCall,
            RemoteCall,
            SymbolicGradient,
            MapDefun,
        )
    }
)
