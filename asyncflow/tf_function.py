"""`tf.function` in a TF1 graph (eager execution off), and `tf.compat.v1.wrap_function`.

A `Function` wraps a Python function.  Called in a graph, it binds its arguments to the
Python signature and reduces them to a trace key: each Tensor (or NumPy array) becomes a
TensorSpec (shape and dtype), every other value stays as itself (a "literal"; unhashable
ones by identity).  A key that an existing trace accepts (same literals, each spec a
subtype of the trace's: `[2]` fits `[None]`) reuses that trace; otherwise the Python
function is traced once more into a `FuncGraph`: a graph of its own whose Placeholders
stand for the tensor arguments, which captures the tensors of the graphs around it as
further Placeholders, and whose default graph, while tracing, it is.  Python control
flow runs once per trace (autograph is not applied: `autograph=` is accepted, and the
trace is what a plain Python call builds); tf.cond / tf.while_loop inside build their
usual graphs.

Calling a trace (a `ConcreteFunction`) copies its body into the calling graph, as TF's
function inlining does to a `PartitionedCall`: op `o` of the body becomes
`<call>/<o>`, where `<call>` is named "PartitionedCall" (or "StatefulPartitionedCall"
when the body holds a stateful op) made unique; each argument enters through an
Identity `<call>/<arg>`; captured tensors are used directly; the results leave through
one IdentityN named `<call>`, so result i is `<call>:i` as in TF's graph.  Gradients
flow through the copied ops as through any other (cond and while loops inside keep
their contexts, copied with the ops).  The GraphDef asyncflow writes holds each call
as TF's call node and FunctionDef where nothing outside reads the body, else the
inlined body (asyncflow/tf_function_export.py); TF runs either to the same values.

Variables: a trace's `tf.Variable` / `get_variable` calls make resource variables in the
outermost graph (TF's init_scope), on the first trace only; a later trace that creates
one raises ValueError, as TF.  Stateful ops of a body run in the order the Python code
built them (each waits for the previous one: TF's automatic control dependencies), and
the call's result waits for the last of them.

Composite arguments (TF's expand_composites): a SparseTensor, RaggedTensor,
IndexedSlices, StructuredTensor or ExtensionType value is keyed by its TypeSpec (a
RaggedTensorSpec by shape, dtype, ragged_rank and row_splits_dtype: another one traces
again), and the trace gets one Placeholder per component tensor, from which the value is
rebuilt; an input_signature or get_concrete_function may hold such specs.  A composite
result leaves the body as its components (each through an Identity) and is rebuilt
around the call's outputs.  A tf.data Dataset argument is not a composite here: it is
keyed as a Python value and its graph captured (TF passes its variant tensor).

Invariants: a trace is never modified after it is built; calling it only adds ops to
the caller's graph.  Python side effects of the function happen once per trace.
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import logging

import numpy as np

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.composite_specs import IndexedSlicesSpec, RaggedTensorSpec, type_spec_from_value
from asyncflow.dataset_functions import FUNCTION_LIST_ATTRS
from asyncflow.extension_type import ExtensionTypeSpec
from asyncflow.framework_extras import TensorSpec
from asyncflow.graph import GraphKeys
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops
from asyncflow.ragged import RaggedTensor
from asyncflow.sparse_tensor import SparseTensor, SparseTensorSpec
from asyncflow.tf_function_export import record_call
from asyncflow.type_spec import TypeSpec
from asyncflow.variables import Variable, variable_creator_scope

__all__ = [
    "ConcreteFunction", "FuncGraph", "Function", "WrappedFunction", "function", "wrap_function",
    "run_functions_eagerly", "functions_run_eagerly", "experimental_run_functions_eagerly",
    "experimental_functions_run_eagerly",
]  # fmt: skip

# tf.config.run_functions_eagerly: a tf.function called while it is set runs its Python
# function directly, so in graph mode its ops are built inline with no call node.
_RUN_EAGERLY = [False]


def run_functions_eagerly(run_eagerly) -> None:
    """Whether tf.functions run their Python function directly instead of a trace."""
    _RUN_EAGERLY[0] = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    return _RUN_EAGERLY[0]


def experimental_run_functions_eagerly(run_eagerly) -> None:
    logging.getLogger("asyncflow").warning(
        "Use `tf.config.run_functions_eagerly` instead of the experimental version."
    )
    run_functions_eagerly(run_eagerly)


def experimental_functions_run_eagerly() -> bool:
    logging.getLogger("asyncflow").warning(
        "Use tf.config.functions_run_eagerly instead of the experimental version."
    )
    return functions_run_eagerly()


_TRACE_IDS = itertools.count(1)  # (trace names unique in the process, as TF's uids)


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


_SHARED_COLLECTIONS = (
    GraphKeys.GLOBAL_VARIABLES,
    GraphKeys.LOCAL_VARIABLES,
    GraphKeys.TRAINABLE_VARIABLES,
)


class FuncGraph(ops.Graph):
    """The graph a Python function is traced into (TF's FuncGraph).

    `inputs` are the Placeholders of the tensor arguments then those of the captured
    tensors; `captures` pairs each captured outer tensor with its Placeholder.
    """

    _building_function = True

    def __init__(self, name: str, outer_graph: ops.Graph):
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.inputs: list = []
        self.n_args = 0  # (the first inputs: the arguments' placeholders)
        self.outputs: list = []
        self.structured_outputs = None
        self.control_outputs: list = []
        self.variables: list = []
        self._captured: dict[int, tuple] = {}  # id(outer tensor) -> (outer, placeholder)
        self._last_stateful = None
        self._seed = outer_graph.seed
        for key, values in outer_graph._collections.items():
            self._collections[key] = values if key in _SHARED_COLLECTIONS else list(values)
        for key in _SHARED_COLLECTIONS:
            self._collections.setdefault(key, outer_graph.get_collection_ref(key))

    @property
    def captures(self) -> list:
        return list(self._captured.values())

    @property
    def external_captures(self) -> list:
        return [outer for outer, _ in self._captured.values()]

    @property
    def internal_captures(self) -> list:
        return [inner for _, inner in self._captured.values()]

    def _capture(self, t):
        if t.graph is self:
            return t
        hit = self._captured.get(id(t))
        if hit is not None:
            return hit[1]
        outer = t
        if t.graph is not self.outer_graph:
            if not isinstance(self.outer_graph, FuncGraph):
                raise ValueError(f"Tensor {t.name} must be from the same graph as the op.")
            outer = self.outer_graph._capture(t)
        saved, self._control_flow_context = self._control_flow_context, None
        saved_last = self._last_stateful
        try:
            # Named as TF's: the outer op's whole name under the scope of the op that
            # captures it ("Sum/outer/yy": apply_op captures inside the op's scope).
            with self.as_default(), self.control_dependencies(None):
                ph = array_ops.placeholder(t.dtype.base_dtype, t.shape, name=t.op.name)
        finally:
            self._control_flow_context = saved
            self._last_stateful = saved_last
        self._captured[id(t)] = (outer, ph)
        self.inputs.append(ph)
        return ph

    def _create_op(self, op_def, name, inputs, attrs, output_dtypes, output_refs, control):
        op = super()._create_op(op_def, name, inputs, attrs, output_dtypes, output_refs, control)
        # TF's automatic control dependencies, simplified: stateful ops at the top level
        # of the body run in program order.
        if op_def.stateful and self._control_flow_context is None:
            last = self._last_stateful
            if last is not None and all(t.op is not last for t in op._inputs):
                op._add_control_input(last)
            self._last_stateful = op
        return op


# -- trace keys ----------------------------------------------------------------------------


class _Literal:
    """A non-tensor argument in a trace key: equal by value, or by identity when it
    cannot be hashed (TF's weak references to such objects)."""

    __slots__ = ("value", "_key")

    def __init__(self, value):
        self.value = value
        try:
            hash(value)
            self._key = ("v", type(value), value)
        except TypeError:
            self._key = ("id", id(value))

    def __eq__(self, other):
        return isinstance(other, _Literal) and self._key == other._key

    def __hash__(self):
        return hash(self._key)


def _spec_of(x, name=None):
    if isinstance(x, TypeSpec):
        return x
    if isinstance(x, ops.Tensor):
        return TensorSpec(x.shape, x.dtype.base_dtype, name)
    if isinstance(x, np.ndarray):
        return TensorSpec(x.shape, dtypes.as_dtype(x.dtype), name)
    if isinstance(x, IndexedSlices):  # (TF keys it by the values' shape, not dense_shape)
        spec = type_spec_from_value(x)
        shape, values_dtype, indices_dtype, dense_dtype, indices_shape = spec._serialize()
        dense = tensor_shape.TensorShape([None]).concatenate(x.values.shape[1:])
        return IndexedSlicesSpec(dense, values_dtype, indices_dtype, dense_dtype, indices_shape)
    if nest.is_composite(x):
        return type_spec_from_value(x)
    return _Literal(x)


def _is_tensorlike(x) -> bool:
    return isinstance(x, (ops.Tensor, np.ndarray, TensorSpec))


def _subtype(spec, trace_spec) -> bool:
    """Whether argument type `spec` fits trace type `trace_spec`."""
    if isinstance(spec, TensorSpec) and isinstance(trace_spec, TensorSpec):
        if spec.dtype != trace_spec.dtype:
            return False
        want, got = trace_spec.shape, spec.shape
        if want.rank is None:
            return True
        if got.rank != want.rank:
            return False
        return all(w is None or w == g for w, g in zip(want.as_list(), got.as_list()))
    if isinstance(spec, TypeSpec) and isinstance(trace_spec, TypeSpec):
        return spec.is_subtype_of(trace_spec)
    return spec == trace_spec


def _relaxed(spec, trace_spec):
    """The most specific type both fit (reduce_retracing), or None."""
    if isinstance(spec, TypeSpec) and isinstance(trace_spec, TypeSpec):
        if isinstance(spec, TensorSpec) and isinstance(trace_spec, TensorSpec):
            if spec.dtype != trace_spec.dtype:
                return None
            shape = spec.shape.most_specific_compatible_shape(trace_spec.shape)
            return TensorSpec(shape, spec.dtype)
        return spec.most_specific_common_supertype([trace_spec])
    return spec if spec == trace_spec else None


# -- composite arguments and results (TF's expand_composites) ----------------------------
# A SparseTensor, RaggedTensor, IndexedSlices or ExtensionType argument is keyed by its
# TypeSpec; the trace gets one Placeholder per component tensor (shaped as the spec's
# components: any value of the spec fits) and the composite is rebuilt from them.  A
# composite result leaves as its components and is rebuilt around the call's outputs.


def _component_specs(spec) -> list | None:
    """The TensorSpecs of `spec`'s components, in TF's order; None where asyncflow does
    not know them (a value's own component shapes are used then)."""
    if isinstance(spec, TensorSpec):
        return [spec]
    i64 = dtypes.int64
    if isinstance(spec, SparseTensorSpec):
        rank = spec.shape.rank
        return [TensorSpec([None, rank], i64), TensorSpec([None], spec.dtype),
                TensorSpec([rank], i64)]  # fmt: skip
    if isinstance(spec, RaggedTensorSpec):
        shape, rr = spec.shape, spec.ragged_rank
        if rr == 0:
            return [TensorSpec(shape, spec.dtype)]
        if shape.rank is None:
            flat = tensor_shape.unknown_shape()
        else:
            flat = tensor_shape.TensorShape([None]).concatenate(shape[rr + 1 :])
        outer = None if shape.rank is None or shape[0].value is None else shape[0].value + 1
        splits = [TensorSpec([outer], spec.row_splits_dtype)]
        splits += [TensorSpec([None], spec.row_splits_dtype) for _ in range(rr - 1)]
        return [TensorSpec(flat, spec.dtype), *splits]
    if isinstance(spec, IndexedSlicesSpec):
        shape, values_dtype, indices_dtype, dense_dtype, indices_shape = spec._serialize()
        values_shape = indices_shape[:1].concatenate(shape[1:]) if shape.rank else indices_shape
        out = [TensorSpec(values_shape, values_dtype), TensorSpec(indices_shape, indices_dtype)]
        if dense_dtype is not None:
            out.append(TensorSpec([shape.rank], dense_dtype))
        return out
    if isinstance(spec, ExtensionTypeSpec):
        out = []
        for leaf in nest.flatten(list(spec._serialize())):
            if isinstance(leaf, TypeSpec):
                inner = _component_specs(leaf)
                if inner is None:
                    return None
                out.extend(inner)
        return out
    return None


def _from_components(spec, tensors: list):
    """The value of `spec` made of its component `tensors` (no checks added: TF's)."""
    if isinstance(spec, TensorSpec):
        return tensors[0]
    if isinstance(spec, SparseTensorSpec):
        out = SparseTensor(*tensors)
        out._static_shape = spec.shape  # (TF: the spec's shape, beyond dense_shape's value)
        return out
    if isinstance(spec, RaggedTensorSpec):
        values = tensors[0]
        for splits in reversed(tensors[1:]):
            values = RaggedTensor._make(values, splits)
        return values
    if isinstance(spec, IndexedSlicesSpec):
        return IndexedSlices(tensors[0], tensors[1], tensors[2] if len(tensors) > 2 else None)
    if isinstance(spec, ExtensionTypeSpec):
        parts = iter(tensors)

        def rebuild(leaf):
            if not isinstance(leaf, TypeSpec):
                return leaf
            n = len(_component_specs(leaf))
            return _from_components(leaf, [next(parts) for _ in range(n)])

        fields = nest.map_structure(rebuild, list(spec._serialize()))
        out = object.__new__(spec.value_type)
        for f, v in zip(spec.value_type._fields(), fields, strict=True):
            object.__setattr__(out, f.name, v)
        return out
    raise TypeError(f"Can not rebuild a value of {spec} from its components")


def _cast_problem(value, got, spec) -> str | None:
    """Why `value` (of type `got`) can not be passed as `spec`, a composite's spec in an
    input_signature, or None.  As TF's, a value fits when each of its components fits
    the spec's (a SparseTensor's dense shape is not compared)."""
    if isinstance(value, TypeSpec):
        return None if _subtype(value, spec) else f"Can not cast {value} to {spec}"
    shown = got.value if isinstance(got, _Literal) else got
    if not isinstance(got, TypeSpec) or type(got) is not type(spec):
        return f"Can not cast {shown} to {spec}"
    want = _component_specs(spec)
    if want is None:
        return None if _subtype(got, spec) else f"Can not cast {got} to {spec}"
    parts = _components(value)
    if len(parts) != len(want):
        return f"Can not cast {got} to {spec}"
    for part, w in zip(parts, want, strict=True):
        part_spec = _spec_of(part)
        if not _subtype(part_spec, w):
            return f"Can not cast {part_spec} to {w}"
    return None


def _is_composite_spec(spec) -> bool:
    try:
        value_type = spec.value_type
    except (AttributeError, NotImplementedError):
        return False
    return isinstance(value_type, type) and value_type in nest._COMPOSITES


def _components(x) -> list:
    return nest.flatten(x, expand_composites=True)


def _rebuild_like(x, spec, tensors: list):
    """A value like composite `x` (of type `spec`) made of `tensors`."""
    if _component_specs(spec) is not None:
        return _from_components(spec, tensors)
    return nest.pack_sequence_as(x, tensors, expand_composites=True)


def _per_tensor(x, attr: str):
    if isinstance(x, ops.Tensor):
        return getattr(x, attr)
    if nest.is_composite(x):
        return [getattr(t, attr) for t in _components(x)]
    return None


# -- ConcreteFunction --------------------------------------------------------------------


class ConcreteFunction:
    """One trace of a Function: its FuncGraph, called with flat tensors (TF's).

    Call it with the tensor arguments of its trace, positionally in their flat order
    (`cf(x)`), or with the Python structure it was traced with.
    """

    def __init__(self, func_graph: FuncGraph, structured_input_signature, arg_keys, function):
        self.graph = func_graph
        self.structured_input_signature = structured_input_signature
        self._arg_keys = arg_keys  # the trace key, flat (specs and literals)
        self._function = function
        self._arg_placeholders = func_graph.inputs[: func_graph.n_args]
        self._stateful = None

    name = property(lambda self: self.graph.name)
    inputs = property(lambda self: list(self.graph.inputs))
    outputs = property(lambda self: list(self.graph.outputs))
    structured_outputs = property(lambda self: self.graph.structured_outputs)
    captured_inputs = property(lambda self: self.graph.external_captures)
    variables = property(lambda self: list(self.graph.variables))
    trainable_variables = property(lambda self: [v for v in self.graph.variables if v.trainable])

    @property
    def output_dtypes(self):
        """Each output's dtype (a composite's: the list of its components', TF's)."""
        return nest.map_structure(lambda t: _per_tensor(t, "dtype"), self.structured_outputs)

    @property
    def output_shapes(self):
        """Each output's shape (a composite's: the list of its components', TF's)."""
        return nest.map_structure(lambda t: _per_tensor(t, "shape"), self.structured_outputs)

    def __call__(self, *args, **kwargs):
        if self._function is not None and (kwargs or not all(map(_is_tensorlike, args))):
            return self._function._call_concrete(self, args, kwargs)
        if len(args) != len(self._arg_placeholders):
            raise TypeError(
                f"{self.name}(...) takes {len(self._arg_placeholders)} tensor arguments, "
                f"got {len(args)}"
            )
        return self._call_flat(list(args))

    def _call_flat(self, tensors):
        """Copy the body into the default graph, fed by `tensors` (the flat arguments)."""
        graph = ops.get_default_graph()
        fg = self.graph
        converted = []
        for ph, x in zip(self._arg_placeholders, tensors, strict=True):
            t = ops.convert_to_tensor(x, dtype=ph.dtype)
            if not ph.shape.is_compatible_with(t.shape):
                raise ValueError(
                    f"The argument {ph.op.name} of {self.name} has shape {t.shape}, not "
                    f"compatible with {ph.shape} of its trace"
                )
            converted.append(t)
        if self._stateful is None:
            self._stateful = any(op.op_def.stateful for op in fg.get_operations())
        base = "StatefulPartitionedCall" if self._stateful else "PartitionedCall"
        call = graph.unique_name(base)
        return _inline(graph, fg, call, converted, self._stateful)

    def prune(self, feeds, fetches, name=None, input_signature=None):
        """A function of `feeds` (tensors of this trace's graph, or their names) computing
        `fetches` (TF's WrappedFunction.prune).

        Raises:
          ValueError: a fetch depends on a placeholder that is not among the feeds.
        """
        return _prune(self, feeds, fetches, name)

    def __repr__(self):
        return f"<ConcreteFunction {self.name} at {id(self):#X}>"


class WrappedFunction(ConcreteFunction):
    """What `wrap_function` returns (TF's class name): a ConcreteFunction."""


# -- inlining a trace into a graph -------------------------------------------------------


def _inline(graph, fg: FuncGraph, call: str, args: list, stateful: bool = False, captures=None):
    """Copy `fg` into `graph` as call `call` of `args`; `captures`, where given, are the
    tensors that stand for the captured ones (in `fg.inputs` order: tf.raw_ops' calls
    pass them as arguments, as TF's)."""
    given = dict(zip(fg.inputs[fg.n_args :], captures, strict=True)) if captures else {}
    cf_ctx = graph._control_flow_context
    tmap: dict = {}
    omap: dict = {}
    own = []
    for ph, t in zip(fg.inputs[: fg.n_args], args, strict=True):
        tmap[ph] = array_ops.identity(t, name=f"{call}/{ph.op.name}")
        own.append(tmap[ph].op.name)
    captured = []
    for outer, ph in fg._captured.values():
        outer = given.get(ph, outer)
        tmap[ph] = graph._capture(outer) if outer.graph is not graph else outer
        captured.append(tmap[ph])
    call_controls = graph._current_control_inputs()
    frames = {}
    later: list = []
    placeholders = {ph.op for ph in fg.inputs}
    for op in fg.get_operations():
        if op in placeholders:
            continue
        # (a loop's NextIteration comes after the Merge it feeds: patched in below)
        inputs = [tmap.get(t, t) for t in op._inputs]
        later.extend((op, i, t) for i, t in enumerate(op._inputs) if t not in tmap)
        if cf_ctx is not None and op._control_flow_context is None:
            inputs = cf_ctx.map_inputs(inputs)
        attrs = dict(op._attrs)
        if op.type in ("Enter", "RefEnter"):
            frame = attrs["frame_name"]
            frames[frame] = f"{call}/{frame}"
            attrs["frame_name"] = frames[frame]
        if "_class" in attrs:
            attrs["_class"] = [_rename_loc(c, call, fg) for c in attrs["_class"]]
        _rename_function_tensors(op, attrs, fg, tmap, omap)
        name = graph.unique_name(f"{call}/{op.name}", mark_as_used=True)
        controls = [omap[c] for c in op._control_inputs]
        if not op._inputs:
            controls.extend(c for c in call_controls if c not in controls)
        new = graph._create_op(
            op.op_def, name, inputs, attrs, [t.dtype for t in op._outputs],
            [t._is_ref for t in op._outputs], controls,
        )  # fmt: skip
        new._device = op._device
        omap[op] = new
        for old_t, new_t in zip(op._outputs, new._outputs, strict=True):
            new_t._shape = old_t._shape
            tmap[old_t] = new_t
        _refine_shapes(new)
        if op._control_flow_context is None and cf_ctx is not None:
            cf_ctx.add_op(new)
        if not fg.is_fetchable(op):
            graph.prevent_fetching(new)
        for old_t in op._outputs:
            if not fg.is_feedable(old_t):
                graph.prevent_feeding(tmap[old_t])
    for op, i, t in later:
        omap[op]._update_input(i, tmap[t])
    _copy_contexts(fg, graph, omap, tmap, frames, cf_ctx)
    result = _results(graph, fg, call, tmap, omap)
    if cf_ctx is None:  # (in a cond or loop the call stays inlined in the GraphDef)
        own.extend(o.name for o in omap.values())
        record_call(graph, call, fg, fg.name, [*args, *captured], own, stateful)
    return result


def _rename_function_tensors(op, attrs: dict, fg, tmap: dict, omap: dict) -> None:
    """A dataset op names its traced function's tensors in list attrs (`f_inputs`, ...:
    ops/dataset_ops.py; a name without ":" an op, the control outputs of a function
    with no results); the copy names the copies (the function's ops come first in the
    body, so they are copied by now)."""
    for key, names in attrs.items():
        if not key.endswith(FUNCTION_LIST_ATTRS) or op.op_def.attrs.get(key) != []:
            continue
        renamed = []
        for n in names:
            if isinstance(n, str) and ":" not in n:
                o = fg._ops_by_name.get(n)
                renamed.append(omap[o].name if o is not None and o in omap else n)
                continue
            try:
                t = fg.get_tensor_by_name(n)
            except (KeyError, ValueError):
                t = None
            renamed.append(tmap[t].name if t is not None and t in tmap else n)
        attrs[key] = renamed


def _rename_loc(group: bytes, call: str, fg) -> bytes:
    text = group.decode()
    if text.startswith("loc:@"):
        target = text[len("loc:@") :]
        op = fg._ops_by_name.get(target)
        if op is None:
            return group
        for outer, inner in fg._captured.values():
            if inner.op is op:  # (colocated with a captured tensor: with its op)
                return f"loc:@{outer.op.name}".encode()
        return f"loc:@{call}/{target}".encode()
    return group


def _refine_shapes(op) -> None:
    """Shapes from the op's shape function on the call's arguments (TF refines a call's
    output shapes the same way); the trace's shapes where it cannot say more."""
    fn = op.op_def.shape_fn
    if fn is None:
        return
    try:
        shapes = fn(op)
    except Exception:  # noqa: BLE001 - the trace's shapes stand
        return
    if isinstance(shapes, tensor_shape.TensorShape) or shapes is None:
        shapes = [shapes]
    for t, s in zip(op._outputs, shapes):
        if s is None:
            continue
        s = tensor_shape.as_shape(s)
        if s.is_compatible_with(t._shape):
            t._shape = s.merge_with(t._shape)


def _copy_contexts(fg, graph, omap, tmap, frames, cf_ctx) -> None:
    """The body's cond/while contexts, copied onto the copied ops (their tensors, ops and
    frame names mapped; an outermost context's outer context is the call's)."""
    memo: dict[int, object] = {}

    def remap(v):
        if isinstance(v, ops.Tensor):
            return tmap.get(v, v)
        if isinstance(v, ops.Operation):
            return omap.get(v, v)
        if isinstance(v, str):
            return frames.get(v, v)
        if isinstance(v, list):
            return [remap(x) for x in v]
        if isinstance(v, tuple):
            return tuple(remap(x) for x in v)
        if isinstance(v, set):
            return {remap(x) for x in v}
        if isinstance(v, dict):
            return {remap(k): remap(x) for k, x in v.items()}
        if hasattr(v, "_outer_context") and hasattr(v, "_external_values"):
            return clone(v)
        return v

    def clone(ctx):
        if ctx is None:
            return cf_ctx
        hit = memo.get(id(ctx))
        if hit is not None:
            return hit
        new = copy.copy(ctx)
        memo[id(ctx)] = new
        for key, value in vars(ctx).items():
            if key == "_outer_context":
                setattr(new, key, clone(value))
            elif key == "_graph":
                setattr(new, key, graph)
            else:
                setattr(new, key, remap(value))
        return new

    for op, new in omap.items():
        if op._control_flow_context is not None:
            new._control_flow_context = clone(op._control_flow_context)


def _results(graph, fg: FuncGraph, call: str, tmap, omap):
    outs = [tmap[t] for t in fg.outputs]
    controls = [omap[o] for o in fg.control_outputs if o in omap]
    with graph.control_dependencies(None):
        saved_stack, graph._name_stack = graph._name_stack, ""
        try:
            if outs:
                op = ops.apply_op(
                    "IdentityN", [outs], {"T": [t.dtype.base_dtype for t in outs]}, name=call + "/"
                )
                for t, src in zip(op.outputs, outs, strict=True):
                    t._shape = src.shape
            else:
                op = ops.apply_op("NoOp", [], name=call + "/")
        finally:
            graph._name_stack = saved_stack
    op._add_control_inputs(controls)
    if not outs and not controls:
        op._add_control_inputs(graph._current_control_inputs())
    flat = list(op.outputs)
    pos = iter(range(len(flat)))

    def fill(x):
        if isinstance(x, ops.Tensor):
            return flat[next(pos)]
        if nest.is_composite(x):
            parts = [flat[next(pos)] for _ in _components(x)]
            return _rebuild_like(x, type_spec_from_value(x), parts)
        return None if isinstance(x, ops.Operation) else x

    if fg.structured_outputs is None:  # (TF, in a graph: the call op itself)
        return op
    return nest.map_structure(fill, fg.structured_outputs)


# -- Function ----------------------------------------------------------------------------


class Function:
    """A Python function traced per input signature (see the module note); TF's
    `tf.function` object."""

    def __init__(self, python_function, name=None, input_signature=None, autograph=True,
                 reduce_retracing=False, jit_compile=None):  # fmt: skip
        self._python_function = python_function
        self._name = name or getattr(python_function, "__name__", "function")
        self._signature = inspect.signature(python_function)
        if input_signature is not None:
            input_signature = tuple(input_signature)
            bad = [s for s in nest.flatten(input_signature) if not isinstance(s, TypeSpec)]
            if bad:
                raise TypeError(
                    "input_signature must be a possibly nested sequence of TensorSpec "
                    f"objects, got invalid args {bad} with types {[type(s) for s in bad]}."
                )
        self._input_signature = input_signature
        self._autograph = autograph
        self._reduce_retracing = bool(reduce_retracing)
        self._jit_compile = jit_compile
        self._traces: list[ConcreteFunction] = []
        self._wrapped = False  # (wrap_function: Placeholders named so, outputs as built)
        self._created_variables = False
        self._counter = 0
        functools.update_wrapper(self, python_function)

    python_function = property(lambda self: self._python_function)
    input_signature = property(lambda self: self._input_signature)
    name = property(lambda self: self._name)

    def experimental_get_tracing_count(self) -> int:
        return len(self._traces)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        bound = _BOUND.get(self, instance)
        return bound

    def __call__(self, *args, **kwargs):
        if _RUN_EAGERLY[0]:
            return self._python_function(*args, **kwargs)
        concrete, flat = self._lookup(args, kwargs, trace=True)
        return concrete._call_flat(flat)

    def _call_concrete(self, concrete, args, kwargs):
        keys, flat, _ = self._key(args, kwargs)
        if len(keys) != len(concrete._arg_keys) or not all(
            _subtype(k, t) for k, t in zip(keys, concrete._arg_keys)
        ):
            raise TypeError(
                "Binding inputs to tf.function failed due to `The arguments do not fit the "
                f"signature of {concrete.name}: {concrete.structured_input_signature}`. "
                f"Received args: {args} and kwargs: {kwargs}."
            )
        return concrete._call_flat(flat)

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The trace for these arguments (Tensors, TensorSpecs or Python values), made if
        none fits; with an input_signature and no arguments, its trace."""
        if self._input_signature is not None and not args and not kwargs:
            args = self._input_signature
        return self._lookup(args, kwargs, trace=True)[0]

    # -- binding and lookup
    def _bind(self, args, kwargs):
        if self._input_signature is not None:
            n = len(self._input_signature)
            params = list(self._signature.parameters)
            extra = list(args[n:]) + [k for k in kwargs if k not in params[:n]]
            if len(args) > n or extra:
                raise TypeError(
                    "Binding inputs to tf.function failed due to `too many positional "
                    f"arguments`. Received args: {args} and kwargs: {kwargs} for signature: "
                    f"{self._input_signature}."
                )
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(
                f"Binding inputs to tf.function `{self._name}` failed due to `{e}`"
            ) from None
        bound.apply_defaults()
        return bound

    def _key(self, args, kwargs):
        """(flat trace key, flat tensor arguments, the bound arguments)."""
        bound = self._bind(args, kwargs)
        values = [bound.arguments[p] for p in self._signature.parameters]
        if self._input_signature is not None:
            n = len(self._input_signature)
            flat = []
            for spec, value in zip(self._input_signature, values[:n]):
                nest.assert_same_structure(spec, value)
                for s, v in zip(nest.flatten(spec), nest.flatten(value)):
                    got = _spec_of(v)
                    if not isinstance(s, TensorSpec):  # (a composite's spec)
                        problem = _cast_problem(v, got, s)
                        if problem:
                            raise TypeError(
                                f"Binding inputs to tf.function failed due to `{problem}`. "
                                f"Received args: {args} and kwargs: {kwargs} for signature: "
                                f"{self._input_signature}."
                            )
                        if not isinstance(v, TypeSpec):
                            flat.extend(_components(v))
                        continue
                    if not isinstance(got, TensorSpec):
                        try:
                            got = _spec_of(ops.convert_to_tensor(v, dtype=s.dtype))
                        except (TypeError, ValueError):
                            got = _spec_of(ops.convert_to_tensor(v))
                    if not _subtype(got, s):
                        raise TypeError(
                            f"Binding inputs to tf.function failed due to `Can not cast {got} "
                            f"to {s}`. Received args: {args} and kwargs: {kwargs} for "
                            f"signature: {self._input_signature}."
                        )
                    if not isinstance(v, TensorSpec):
                        flat.append(v)
            keys = list(nest.flatten(self._input_signature))
            keys.extend(_Literal(v) for v in values[n:])
            return keys, flat, bound
        leaves = nest.flatten(values)
        keys = [_spec_of(x) for x in leaves]
        flat = []
        for x, key in zip(leaves, keys, strict=True):
            if isinstance(x, (ops.Tensor, np.ndarray)):
                flat.append(x)
            elif isinstance(key, TypeSpec) and not isinstance(x, TypeSpec):
                flat.extend(_components(x))
        return keys, flat, bound

    def _lookup(self, args, kwargs, trace: bool):
        keys, flat, bound = self._key(args, kwargs)
        for concrete in self._traces:
            if len(concrete._arg_keys) == len(keys) and all(
                _subtype(k, t) for k, t in zip(keys, concrete._arg_keys)
            ):
                return concrete, flat
        if self._reduce_retracing:
            for concrete in self._traces:
                if len(concrete._arg_keys) != len(keys):
                    continue
                relaxed = [_relaxed(k, t) for k, t in zip(keys, concrete._arg_keys)]
                if all(r is not None for r in relaxed):
                    keys = relaxed
                    break
        concrete = self._trace(keys, bound)
        self._traces.append(concrete)
        return concrete, flat

    # -- tracing
    def _trace(self, keys, bound) -> ConcreteFunction:
        outer = ops.get_default_graph()
        self._counter += 1
        fg = FuncGraph(f"__inference_{_sanitize(self._name)}_{next(_TRACE_IDS)}", outer)
        names = []
        for p in self._signature.parameters:
            value = bound.arguments[p]
            if self._input_signature is not None and len(names) < len(self._input_signature):
                value = self._input_signature[len(names)]
            names.extend((p, n) for n in _arg_names(p, value))
        keyed = iter(keys)
        name_iter = iter(names)
        placeholders = []
        composites: dict = {}  # id(rebuilt argument) -> its spec
        leaf_specs: dict = {}  # id(placeholder) -> its TensorSpec in the signature

        def placeholder_for(x):
            key = next(keyed)
            # (TF: the placeholders of an argument's leaves are all named for the
            # argument, made unique; the leaves' TensorSpecs are named "<arg>_<i>")
            name, leaf_name = next(name_iter)
            if isinstance(key, TensorSpec):
                default = "Placeholder" if self._wrapped else name
                ph = array_ops.placeholder(key.dtype, key.shape, name=key.name or default)
                placeholders.append(ph)
                spec_name = key.name or (ph.op.name if self._wrapped else leaf_name)
                leaf_specs[id(ph)] = TensorSpec(ph.shape, ph.dtype, spec_name)
                return ph
            if isinstance(key, TypeSpec):
                specs = _component_specs(key)
                if specs is None:
                    if isinstance(x, TypeSpec):
                        if not _is_composite_spec(x):
                            return x  # (a DatasetSpec, NoneTensorSpec...: a Python value)
                        raise TypeError(f"tf.function can not trace a value of {key}")
                    specs = [TensorSpec(t.shape, t.dtype.base_dtype) for t in _components(x)]
                default = "Placeholder" if self._wrapped else name
                phs = [array_ops.placeholder(c.dtype, c.shape, name=default) for c in specs]
                placeholders.extend(phs)
                value = _rebuild_like(x, key, phs)
                composites[id(value)] = key
                return value
            return x

        first_trace = not self._created_variables and not any(t.variables for t in self._traces)
        with fg.as_default():
            values = [bound.arguments[p] for p in self._signature.parameters]
            if self._input_signature is not None:
                n = len(self._input_signature)
                values = list(self._input_signature) + values[n:]
            traced = nest.map_structure(placeholder_for, values)
            fg.inputs.extend(placeholders)
            fg.n_args = len(placeholders)
            call_args, call_kwargs = _rebind(self._signature, traced)
            creator = _LiftingCreator(fg, allow=first_trace and not self._traces)
            with variable_creator_scope(creator):
                try:
                    result = self._python_function(*call_args, **call_kwargs)
                except TypeError as e:
                    if not (self._autograph and "as a Python `bool`" in str(e)):
                        raise
                    raise TypeError(
                        f"{e} asyncflow traces tf.function without AutoGraph: Python `if` / "
                        "`while` on a tensor must be written as tf.cond / tf.while_loop."
                    ) from e
            _finish_outputs(fg, result, identities=not self._wrapped)
        fg.variables = creator.created
        if creator.created:
            self._created_variables = True
        signature_in = _structured_signature(self._signature, traced, {**leaf_specs, **composites})
        return ConcreteFunction(fg, signature_in, keys, self)


class _BoundMethods:
    """Per-instance Functions for a tf.function used as a method (TF traces per object)."""

    def __init__(self):
        self._by_instance: dict = {}

    def get(self, function: Function, instance) -> Function:
        key = (id(function), id(instance))
        bound = self._by_instance.get(key)
        if bound is None or bound[0] is not instance:
            method = function._python_function.__get__(instance, type(instance))
            fn = Function(
                method,
                name=function._name,
                input_signature=function._input_signature,
                autograph=function._autograph,
                reduce_retracing=function._reduce_retracing,
            )
            bound = (instance, fn)
            self._by_instance[key] = bound
        return bound[1]


_BOUND = _BoundMethods()


def _arg_names(param: str, value) -> list[str]:
    leaves = nest.flatten(value)
    if len(leaves) == 1 and not nest.is_nested(value):
        return [param]
    return [f"{param}_{i}" for i in range(len(leaves))]


def _rebind(signature, values):
    args, kwargs = [], {}
    for (name, p), v in zip(signature.parameters.items(), values, strict=True):
        if p.kind is p.VAR_POSITIONAL:
            args.extend(v)
        elif p.kind is p.VAR_KEYWORD:
            kwargs.update(v)
        elif p.kind is p.KEYWORD_ONLY:
            kwargs[name] = v
        else:
            args.append(v)
    return args, kwargs


def _structured_signature(signature, traced, specs: dict):
    def spec(x):
        return specs.get(id(x), x)

    args, kwargs = _rebind(signature, [nest.map_structure(spec, v) for v in traced])
    return tuple(args), kwargs


def _finish_outputs(fg: FuncGraph, result, identities: bool = True) -> None:
    """Outputs as TF's tracing makes them: each tensor through an Identity, Operations as
    control outputs (their place in the structure becomes None), the last stateful op
    as a control output too."""
    if isinstance(result, ops.Operation):
        fg.control_outputs.append(result)
        result = None

    def convert(x):
        if x is None:
            return None
        if isinstance(x, ops.Operation):
            fg.control_outputs.append(x)
            return x
        if isinstance(x, Variable):
            x = x.read_value() if hasattr(x, "_handle") else ops.convert_to_tensor(x)
        if nest.is_composite(x):  # (its components, each an output)
            spec = type_spec_from_value(x)
            return _rebuild_like(x, spec, [convert(c) for c in _components(x)])
        t = ops.convert_to_tensor(x)
        out = array_ops.identity(t, name="Identity") if identities else t
        fg.outputs.append(out)
        return out

    if result is not None:
        result = nest.map_structure(convert, result)
    last = fg._last_stateful
    if last is not None and last not in fg.control_outputs:
        fg.control_outputs.append(last)
    fg.structured_outputs = result


class _LiftingCreator:
    """Variables made while tracing: resource variables of the outermost graph, made on
    the first trace only (TF's UnliftedInitializerVariable in a graph)."""

    def __init__(self, fg: FuncGraph, allow: bool):
        self._fg = fg
        self._allow = allow
        self.created: list = []

    def __call__(self, next_creator, **kwargs):
        if not self._allow:
            raise ValueError(
                "tf.function only supports singleton tf.Variables created on the first call. "
                "Make sure the tf.Variable is only created once or created outside "
                "tf.function."
            )
        outer = self._fg.outer_graph
        while isinstance(outer, FuncGraph):
            outer = outer.outer_graph
        scope = self._fg.get_name_scope()
        kwargs["use_resource"] = True
        saved = outer._control_flow_context
        outer._control_flow_context = None
        try:
            with outer.as_default(), outer.control_dependencies(None):
                with outer.name_scope((scope + "/") if scope else None):
                    v = next_creator(**kwargs)
        finally:
            outer._control_flow_context = saved
        self.created.append(v)
        return v


def function(func=None, input_signature=None, autograph=True, jit_compile=None,
             reduce_retracing=False, experimental_implements=None,
             experimental_autograph_options=None, experimental_attributes=None,
             experimental_relax_shapes=None, experimental_compile=None,
             experimental_follow_type_hints=None):  # fmt: skip
    """`tf.function` (a decorator, or a call on a function) for graphs built with eager
    execution off: see the module note.  `experimental_relax_shapes` is
    `reduce_retracing`'s older name; autograph, jit_compile and the other experimental
    options are accepted and change nothing here.

    Raises:
      TypeError: an input_signature holding something other than TensorSpecs (at once),
        or a call whose arguments do not fit the signature.
      ValueError: a trace after the first creating a variable.
    """
    del experimental_implements, experimental_autograph_options, experimental_compile
    del experimental_follow_type_hints, experimental_attributes
    relax = bool(reduce_retracing or experimental_relax_shapes)

    def decorate(f):
        return Function(f, input_signature=input_signature, autograph=autograph,
                        reduce_retracing=relax, jit_compile=jit_compile)  # fmt: skip

    return decorate if func is None else decorate(func)


# -- wrap_function ----------------------------------------------------------------------


def wrap_function(fn, signature, name=None) -> ConcreteFunction:
    """`tf.compat.v1.wrap_function`: `fn` traced once, with a Placeholder per TensorSpec of
    `signature`, as a ConcreteFunction; `prune(feeds, fetches)` makes functions of any of
    its tensors.  Variables `fn` makes are resource variables of the outer graph.

    Raises:
      TypeError: `signature` holds something other than TensorSpecs.
    """
    f = Function(fn, name=name or getattr(fn, "__name__", "wrapped_function"),
                 input_signature=signature if signature is not None else ())  # fmt: skip
    f._wrapped = True
    concrete = f.get_concrete_function()
    concrete.__class__ = WrappedFunction
    return concrete


def _prune(concrete: ConcreteFunction, feeds, fetches, name):
    fg = concrete.graph

    def element(x, allow_op):
        if isinstance(x, str):
            x = fg.as_graph_element(x, allow_tensor=True, allow_operation=allow_op)
        if isinstance(x, (ops.Tensor, ops.Operation)) and x.graph is not fg:
            raise ValueError(
                f"Can only prune function whose feeds and fetches are from this graph ({x.name})"
            )
        return x

    flat_feeds = [element(x, False) for x in nest.flatten(feeds)]
    flat_fetches = nest.map_structure(lambda x: element(x, True), fetches)
    # The pruned function is the original body fed at `feeds`: walk back from the
    # fetches, stopping at the feeds; any other placeholder reached must be captured.
    needed, stack = (
        set(),
        [x.op if isinstance(x, ops.Tensor) else x for x in nest.flatten(flat_fetches)],
    )
    fed_ops = {t.op for t in flat_feeds if t.op.type == "Placeholder"}
    fed = set(flat_feeds)
    captured = {inner.op: outer for outer, inner in fg._captured.values()}
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        if op.type == "Placeholder" and op not in fed_ops and op not in captured:
            raise ValueError(
                f"The fetches depend on placeholder {op.name}, which is not fed: add it to "
                "the feeds"
            )
        for t in op._inputs:
            if t not in fed:
                stack.append(t.op)
        stack.extend(op._control_inputs)
    return _PrunedFunction(
        concrete, name or f"pruned_{concrete.name}", flat_feeds, flat_fetches, needed
    )


class _PrunedFunction:
    """A pruned WrappedFunction: called with one tensor per feed, it copies the body
    ops the fetches need (fed at the feeds) into the caller's graph."""

    def __init__(self, concrete, name, feeds, fetches, needed):
        self._concrete = concrete
        self.name = name
        self._feeds = feeds
        self._fetches = fetches
        self._needed = needed

    inputs = property(lambda self: list(self._feeds))
    structured_outputs = property(lambda self: self._fetches)
    graph = property(lambda self: self._concrete.graph)

    def __call__(self, *args):
        if len(args) != len(self._feeds):
            raise TypeError(
                f"{self.name}(...) takes {len(self._feeds)} arguments, got {len(args)}"
            )
        graph = ops.get_default_graph()
        fg = self._concrete.graph
        call = graph.unique_name("PartitionedCall")
        tmap, omap = {}, {}
        for i, (feed, x) in enumerate(zip(self._feeds, args, strict=True)):
            t = ops.convert_to_tensor(x, dtype=feed.dtype)
            tmap[feed] = array_ops.identity(t, name=f"{call}/feed_{i}")
        for outer, inner in fg._captured.values():
            tmap.setdefault(inner, outer)
        for op in fg.get_operations():
            if op not in self._needed or all(t in tmap for t in op._outputs) and op._outputs:
                continue
            if op.type == "Placeholder":
                continue
            inputs = [tmap[t] for t in op._inputs]
            name = graph.unique_name(f"{call}/{op.name}")
            new = graph._create_op(
                op.op_def, name, inputs, dict(op._attrs), [t.dtype for t in op._outputs],
                [t._is_ref for t in op._outputs],
                [omap[c] for c in op._control_inputs if c in omap],
            )  # fmt: skip
            new._device = op._device
            omap[op] = new
            for old_t, new_t in zip(op._outputs, new._outputs, strict=True):
                new_t._shape = old_t._shape
                tmap.setdefault(old_t, new_t)

        flat = [tmap[x] for x in nest.flatten(self._fetches) if isinstance(x, ops.Tensor)]
        controls = [omap[x] for x in nest.flatten(self._fetches) if isinstance(x, ops.Operation)]
        saved_stack, graph._name_stack = graph._name_stack, ""
        try:
            with graph.control_dependencies(controls):
                if flat:
                    types = [t.dtype.base_dtype for t in flat]
                    out = ops.apply_op("IdentityN", [flat], {"T": types}, name=call + "/")
                else:
                    out = ops.apply_op("NoOp", [], name=call + "/")
        finally:
            graph._name_stack = saved_stack
        results = iter(out.outputs)

        def fetch(x):
            return next(results) if isinstance(x, ops.Tensor) else out

        return nest.map_structure(fetch, self._fetches)
