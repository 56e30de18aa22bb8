"""Automatic control dependencies of a traced dataset function, as TF 2.21 traces
tf.data's functions (tests/fixtures/dataset_autodeps_cases.py):

- the stateful ops made in the function that no result depends on (an `assign_add`
  of an outer variable, a table's `insert`, a `Print`, a cond updating a variable)
  run with each call: the function's control outputs, here a NoOp the results'
  Identity ops wait for;
- the stateful ops using one resource (the same handle or ref tensor) run in the
  order they were made: a control edge from each to the next.

A function without such ops is left exactly as traced (no extra op per call).  TF
builds a cond or a while loop of a dataset function as a function call of its own
(cond_v2, while_v2), its branches and body with the same rules: a stateful op in a
branch runs when the branch is taken, one in a loop's body at each iteration, and the
call as a whole is one op in its function's order.  Here the branches and the body are
parts of one graph (Switch, Merge, Enter, Exit), so `_Nesting` gives them that form:
the results of a branch (the inputs of the cond's Merges) and of a body (the inputs of
the loop's NextIteration ops) wait for its stateful ops, and an op inside stands, for
the ops outside, for a cond's Merge or a loop's Exit (a control edge from an untaken
branch would make the results dead), and is entered through itself (a cond's branch)
or the loop's Enter ops.  Seeded random ops are left out: no result sees their draws
(each op has its own sequence), as TF's legacy random ops are not among its must-run
ops."""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_ordering
from asyncflow.ops.control_flow_contexts import CondContext, WhileContext

__all__ = [
    "control_outputs",
    "nesting",
    "order_by_resource",
    "refuse_outer_refs",
    "run_after",
    "wait_for",
]

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


def _must_run(op) -> bool:
    """A stateful op run for its effect: not a seeded random op, nor a read no one uses."""
    if not _stateful(op):
        return False
    return op.type not in _READS or any(t._consumers for t in op.outputs)


# Ops passing their first input on: a resource used in a cond or a loop of the function
# reaches its ops through a Switch or an Enter.
_PASSING = frozenset(("Identity", "RefIdentity", "Switch", "RefSwitch", "Enter", "RefEnter"))


def _resource_keys(op) -> list:
    """The resource tensors `op` uses (a handle, a ref), through the ops passing one on."""
    keys = []
    for t in op._inputs:
        if t.dtype.is_ref_dtype or t.dtype.base_dtype == dtypes.resource:
            while t.op.type in _PASSING and t.op._inputs:
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


class _Nesting:
    """The conds and while loops of a function's ops, as TF's calls of their own: each
    context's results wait for its ops `_must_run` (`wire`), and an op inside stands
    for itself outside (`lift`) and is entered (`enter`) as the module says.  `base`:
    the context the function was traced in (its top level)."""

    def __init__(self, new_ops, base):
        self.base = base
        self.feeds: dict = {}  # context -> [(op, input index)]: its results' consumers
        for op in new_ops:
            if op.type == "NextIteration" and op._inputs:
                self.feeds.setdefault(op._control_flow_context, []).append((op, 0))
            elif op.type == "Merge" and len(op._inputs) == 2:
                for i, t in enumerate(op._inputs):
                    ctx = self._branch(t.op, op._control_flow_context)
                    if isinstance(ctx, CondContext) and ctx.branch == i:
                        self.feeds.setdefault(ctx, []).append((op, i))
        self.pending: dict = {}  # context -> the ops its results must wait for
        for op in new_ops:
            ctx = op._control_flow_context
            if ctx is not base and _must_run(op) and self._known(ctx):
                self.pending.setdefault(ctx, []).append(op)
        self._wire_all()

    @staticmethod
    def _branch(op, outer):
        """The context just inside `outer` that `op`'s result comes from (None: none)."""
        ctx = op._control_flow_context
        if ctx is not None and op.type == "Exit":
            ctx = ctx.outer_context
        while ctx is not None and ctx.outer_context is not outer:
            ctx = ctx.outer_context
        return ctx

    def _known(self, ctx) -> bool:
        """Whether `ctx` and the contexts around it, up to the function's top level,
        are conds and loops of the function (their results found)."""
        while ctx is not self.base:
            if ctx is None or not isinstance(ctx, CondContext | WhileContext):
                return False
            if not self.feeds.get(ctx) or isinstance(ctx, WhileContext) and not ctx.loop_exits:
                return False
            ctx = ctx.outer_context
        return True

    def _depth(self, ctx) -> int:
        n = 0
        while ctx is not self.base:
            ctx, n = ctx.outer_context, n + 1
        return n

    def _wire_all(self) -> None:
        """Each context's results wait for its pending ops, innermost contexts first;
        the op standing for a context in the one around it is pending there."""
        while self.pending:
            ctx = max(self.pending, key=self._depth)
            self.wire(ctx, self.pending.pop(ctx))
            outer = ctx.outer_context
            if outer is not self.base:
                self.pending.setdefault(outer, []).append(self._stand_in(ctx))

    def wire(self, ctx, deps) -> None:
        """Each result of `ctx` (a consumer's input) that does not depend on all of
        `deps` becomes an Identity inside `ctx` waiting for them."""
        for consumer, i in self.feeds[ctx]:
            t = consumer._inputs[i]
            before = _before(t.op, ctx)
            missing = [d for d in deps if d not in before]
            if not missing or t.dtype.is_ref_dtype:
                continue
            with ops.control_dependencies(None), ctx.entered():
                with ops.control_dependencies(missing):
                    consumer._update_input(i, array_ops.identity(t))

    def _stand_in(self, ctx):
        """The op standing for `ctx` in the context around it: the cond's (first)
        Merge, the loop's (first) Exit; each runs after all of the context's results."""
        if isinstance(ctx, WhileContext):
            return ctx.loop_exits[0].op
        return self.feeds[ctx][0][0]

    def _chain(self, op, level) -> list:
        """The contexts from `op`'s out to (not including) `level`, innermost first."""
        chain, ctx = [], op._control_flow_context
        while ctx is not level:
            chain.append(ctx)
            ctx = ctx.outer_context
        return chain

    def lift(self, op, level):
        """The op standing for `op` in context `level` (one around `op`'s, known)."""
        for ctx in self._chain(op, level):
            op = self._stand_in(ctx)
        return op

    def enter(self, op, level) -> list:
        """The ops that an op of context `level` waits on to run before `op`: `op`
        itself, or the Enter ops of the outermost loop between them."""
        loops = [c for c in self._chain(op, level) if isinstance(c, WhileContext)]
        return [t.op for t in loops[-1].loop_enters] if loops else [op]

    def known(self, op) -> bool:
        return self._known(op._control_flow_context)

    def exclusive(self, a, b) -> bool:
        """Whether ops `a` and `b` are in the two branches of one cond (the branches'
        pivots are the two results of one Switch of the predicate)."""
        branches = {
            _switch_of(ctx): ctx.branch
            for ctx in self._chain(a, self.base)
            if isinstance(ctx, CondContext)
        }
        for ctx in self._chain(b, self.base):
            if isinstance(ctx, CondContext):
                branch = branches.get(_switch_of(ctx))
                if branch is not None and branch != ctx.branch:
                    return True
        return False

    def common(self, a, b):
        """The innermost context around both `a` and `b` (the function's top level at
        most)."""
        around = set(self._chain(a, self.base))
        around.add(self.base)
        ctx = b._control_flow_context
        while ctx not in around:
            ctx = ctx.outer_context
        return ctx


def _switch_of(ctx):
    """The Switch whose results are cond branch `ctx`'s pivot and its sibling's."""
    inputs = ctx.pivot.op._inputs
    return inputs[0].op if inputs else ctx


def _before(op, ctx) -> set:
    """The ops of `ctx` (or nested in it) that `op` depends on, `op` included."""
    seen: set = set()
    stack = [op]
    while stack:
        o = stack.pop()
        if o in seen or not ctx.contains(o._control_flow_context):
            continue
        seen.add(o)
        stack.extend(t.op for t in o._inputs)
        stack.extend(o._control_inputs)
    return seen


def nesting(new_ops, base) -> _Nesting | None:
    """The conds and loops of a function's ops `new_ops` traced in context `base`, their
    results waiting for their stateful ops (`_Nesting`); None where no stateful op is
    in one (nothing to do)."""
    for op in new_ops:
        if op._control_flow_context is not base and _stateful(op):
            return _Nesting(new_ops, base)
    return None


def _placed(op, nest: _Nesting | None, base) -> bool:
    """Whether `op` is at the function's top level or in a cond or loop `nest` knows."""
    if op._control_flow_context is base:
        return True
    return nest is not None and nest.known(op)


def order_by_resource(new_ops, nest: _Nesting | None, base) -> None:
    """A control edge from each stateful op of `new_ops` (in creation order) to the next
    one using the same resource: directly in one context, else from the op standing for
    the first in the innermost context around both to the ops entering the second
    (the two branches of one cond are not ordered: the second follows the op before
    the first)."""
    used: dict = {}  # resource -> its ops so far
    for op in new_ops:
        if not _stateful(op) or not _placed(op, nest, base):
            continue
        for key in _resource_keys(op):
            history = used.setdefault(key, [])
            prev = next((p for p in reversed(history) if not _exclusive(nest, p, op)), None)
            history.append(op)
            if prev is None:
                continue
            if prev._control_flow_context is op._control_flow_context:
                op._add_control_input(prev)
            else:
                level = nest.common(prev, op)
                src = nest.lift(prev, level)
                for dst in nest.enter(op, level):
                    if src is not dst:
                        dst._add_control_input(src)


def _exclusive(nest: _Nesting | None, a, b) -> bool:
    return nest is not None and nest.exclusive(a, b)


def run_after(new_ops, done, nest: _Nesting | None, base) -> None:
    """The stateful ops of `new_ops` wait for `done` (a fused earlier function's control
    outputs: TF calls the two one after the other): those at the top level, and the
    ops entering the conds and loops holding the others."""
    waiting: set = set()
    for op in new_ops:
        if not _stateful(op) or not _placed(op, nest, base):
            continue
        for dst in [op] if op._control_flow_context is base else nest.enter(op, base):
            if dst not in waiting:
                waiting.add(dst)
                dst._add_control_input(done)


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


def control_outputs(new_ops, outputs, inner: set, nest: _Nesting | None, base) -> list:
    """The ops to run with each call that `outputs` do not depend on, in creation order:
    the stateful ops of `new_ops` (the function's own) that run for their effect (not
    a read no one uses), each as itself at the top level or as the op standing for it
    there (`_Nesting.lift`); `inner`: the ops made while the function was traced (its
    own, those of functions traced inside it, those `nest` made)."""
    if not any(_stateful(op) for op in new_ops):
        return []
    needed = _needed(outputs, inner)
    found: list = []
    for op in new_ops:
        if not _must_run(op) or not _placed(op, nest, base):
            continue
        if op._control_flow_context is not base:
            op = nest.lift(op, base)
        if op not in needed and op not in found:
            found.append(op)
    return found


def wait_for(outputs, must_run, name: str):
    """`outputs` as Identity ops after a NoOp waiting for `must_run`, and that NoOp."""
    with ops.control_dependencies(None):
        done = control_flow_ordering.no_op(name=name)
        done._add_control_inputs(must_run)
        with ops.control_dependencies([done]):
            return [array_ops.identity(t) for t in outputs], done
