"""Automatic control dependencies of a traced dataset function, as TF 2.21 traces
tf.data's functions (tests/fixtures/dataset_autodeps_cases.py):

- the stateful ops made in the function that no result depends on (an `assign_add`
  of an outer variable, a table's `insert`, a `Print`, a cond updating a variable)
  run with each call: the function's control outputs, here a NoOp the results'
  Identity ops wait for;
- the stateful ops using one resource (the same handle or ref tensor) run in the
  order they were made: a control edge from each to the next.

A function without such ops is left exactly as traced (no extra op per call).  An op
inside a cond or a loop of the function stands for itself through the first ops
outside it that it reaches (the cond's Merge, the loop's Exit): a control edge from
an untaken branch would make the results dead.  Seeded random ops are left out: no
result sees their draws (each op has its own sequence), as TF's legacy random ops
are not among its must-run ops."""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_ordering

__all__ = ["control_outputs", "order_by_resource", "refuse_outer_refs", "run_after", "wait_for"]

# Read-only ops: they run only where a result needs their value (TF's
# RESOURCE_READ_OPS: a read no one uses is no side effect).
_READS = frozenset(
    (
        "ReadVariableOp",
        "ResourceGather",
        "ResourceGatherNd",
        "VariableShape",
        "VarIsInitializedOp",
        "LookupTableFindV2",
        "LookupTableFind",
        "LookupTableSizeV2",
        "LookupTableSize",
        "LookupTableExportV2",
        "LookupTableExport",
    )
)


def _stateful(op) -> bool:
    return op.op_def.stateful and "seed2" not in op._attrs


def _resource_keys(op) -> list:
    """The resource tensors `op` uses (a handle, a ref), through Identity ops."""
    keys = []
    for t in op._inputs:
        if t.dtype.is_ref_dtype or t.dtype.base_dtype == dtypes.resource:
            while t.op.type == "Identity" and t.op._inputs:
                t = t.op._inputs[0]
            keys.append(t)
    return keys


def refuse_outer_refs(new_ops, inner: set) -> None:
    """TF captures an outer ref variable into a dataset function by value: an op of the
    function that writes one (an assign, a scatter) is TF's TypeError as it is traced.

    Raises:
      TypeError: an op of `new_ops` with a ref input made outside (not in `inner`).
    """
    for op in new_ops:
        args = op.op_def.inputs
        if not any(a.is_ref for a in args) or len(args) != len(op._inputs):
            continue
        if any(a.number_attr for a in args):
            continue
        pairs = list(zip(args, op._inputs))
        if not any(a.is_ref and t.op not in inner for a, t in pairs):
            continue
        got = [t.dtype.base_dtype if t.op not in inner else t.dtype for t in op._inputs]
        want = [t.dtype.base_dtype._as_ref if a.is_ref else t.dtype for a, t in pairs]
        raise TypeError(
            f"In op '{op.type}', input types ({got!r}) are not compatible with "
            f"expected types ({want!r})"
        )


def order_by_resource(new_ops) -> None:
    """A control edge from each stateful op of `new_ops` (in creation order) to the next
    one using the same resource, both in the same control-flow context."""
    last: dict = {}
    for op in new_ops:
        if not _stateful(op):
            continue
        for key in _resource_keys(op):
            prev = last.get(key)
            if prev is not None and prev._control_flow_context is op._control_flow_context:
                op._add_control_input(prev)
            last[key] = op


def run_after(new_ops, done) -> None:
    """The stateful ops of `new_ops` outside any control-flow context wait for `done`
    (a fused earlier function's control outputs: TF calls the two one after the
    other)."""
    for op in new_ops:
        if _stateful(op) and op._control_flow_context is None:
            op._add_control_input(done)


def _needed(outputs, inner: set) -> set:
    """The ops of `inner` (the function's) that `outputs` depend on."""
    seen: set = set()
    stack = [t.op for t in outputs]
    while stack:
        op = stack.pop()
        if op in seen or op not in inner:
            continue
        seen.add(op)
        stack.extend(t.op for t in op._inputs)
        stack.extend(op._control_inputs)
    return seen


def _outside(op, own: set) -> list:
    """The first ops of the function outside any control-flow context that `op` (in
    one) reaches through its consumers."""
    found, seen, stack = [], set(), [op]
    while stack:
        o = stack.pop()
        if o in seen or o not in own:
            continue
        seen.add(o)
        if o is not op and o._control_flow_context is None:
            found.append(o)
            continue
        stack.extend(c for t in o.outputs for c in t._consumers)
        stack.extend(o._control_outputs)
    return found


def control_outputs(new_ops, outputs, inner: set) -> list:
    """The stateful ops of `new_ops` (the function's own, in creation order) that
    `outputs` do not depend on and that run for their effect (not a read no one
    uses); `inner`: the ops made while the function was traced (its own, those of
    functions traced inside it)."""
    if not any(_stateful(op) for op in new_ops):
        return []
    needed = _needed(outputs, inner)
    own = set(new_ops)
    found: list = []
    for op in new_ops:
        if op in needed or not _stateful(op):
            continue
        if op.type in _READS and not any(t._consumers for t in op.outputs):
            continue
        if op._control_flow_context is None:
            candidates = [op]
        else:
            candidates = [o for o in _outside(op, own) if o not in needed]
        for c in candidates:
            if c not in found:
                found.append(c)
    return found


def wait_for(outputs, must_run, name: str):
    """`outputs` as Identity ops after a NoOp waiting for `must_run`, and that NoOp."""
    with ops.control_dependencies(None):
        done = control_flow_ordering.no_op(name=name)
        done._add_control_inputs(must_run)
        with ops.control_dependencies([done]):
            return [array_ops.identity(t) for t in outputs], done
