"""Buffer donation decided at plan time, from the graph (TF's forward_input, compiled).

A kernel may write its output into an input buffer instead of allocating (an in-place
Relu, Add, BiasAdd, ReluGrad, optimizer update).  That is safe only when nothing else
can see the buffer.  TF asks the buffer's reference count at run time; here the plan
decides once, when it is lowered, for every input slot of every node:

  input k of node j is donatable when the value arriving there was made fresh by its
  producer in this step, and j is the only consumer of that object.

Values are grouped into alias groups: a node that passes an input object on as an
output (Identity, Enter / Exit / NextIteration / Switch / Merge, the ops declared with
`aliases_inputs`, nodes a plan rewrite marks with `Plan.passes_input`) puts its inputs
and outputs in one group, so a consumer behind any chain of them counts.  A group is
fresh when every value in it that is not passed on comes from a producer that makes a
new array each run: not a feed, a Const, a variable (reference) or a _Recv, not a
stateful op (queues, stacks, TensorArrays, readers hand out what was stored; random
ops are declared `fresh_outputs`), and it does not enter a loop as a loop constant
(every iteration sees that object).  The group's consumers are every other data edge
into it, fetches included.  Exactly one consumer, one slot: that slot is donatable,
unless the consumer keeps a reference to its inputs after it returns (`retains_inputs`:
TensorArray writes, stack pushes, memo caches).  A kernel that keeps a value is one of
its consumers, so no other consumer can take it over in that step; what it hands back
later comes out of a stateful op (a read, a pop), never trusted as new.

What the graph cannot tell is checked on the value itself when the kernel asks
(`KernelContext.may_forward`): a view of another array (`.base` set) or a read-only
buffer (constants, variables, folded values) is never taken over.

Invariant: a stateless op's kernel returns new arrays or views, never one of its input
objects, nor an array it returned before and still holds (a cache), unless the op is
declared `aliases_inputs`.  The test suite runs with ASYNCFLOW_CHECK_KERNELS=1, which
checks it on every node whose output the plan lets a consumer take over.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "aliases_inputs",
    "retains_inputs",
    "fresh_outputs",
    "decide",
    "makes_new",
    "passes_inputs",
    "retains",
]

# Op types whose outputs may be their input objects themselves (pass-through), with
# the condition under which they are, when it is narrower than always.  Kept here, not
# beside each op, so that every kernel that forwards an input object is listed in one
# place; ASYNCFLOW_CHECK_KERNELS finds the ones missing.
_ALIASES: dict[str, Callable | None] = dict.fromkeys(
    [
        # the executor's forwarding nodes (plain and control flow)
        "Identity",
        "RefIdentity",
        "IdentityN",
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
        "LoopCond",
        # kernels that return their input
        "StopGradient",
        "PreventGradient",
        "CheckNumerics",
        "PlaceholderWithDefault",
        "Print",
        "_DeviceCopy",  # between host-memory devices, the value itself
        "EnsureShape",
        "GuaranteeConst",
        "Bitcast",  # a view of its input's buffer
    ]
)
_ALIASES.update(
    {
        "Cast": lambda op: op._attrs["SrcT"] == op._attrs["DstT"],
        "AddN": lambda op: op._attrs["N"] == 1,  # reduce() of one array is that array
        "ReverseV2": None,  # no axes: the input itself
        "Roll": None,
        "Cumsum": None,  # a 0-d input is returned as it is
        "Cumprod": None,
    }
)
# Op types whose kernels keep a reference to their inputs after they return.  Stateful
# ones are listed for the reader: their outputs are never trusted as new anyway.
# (Queues copy what they enqueue: they hold no input.)
_RETAINS: set[str] = {
    "TensorArrayWriteV3",
    "TensorArrayScatterV3",
    "TensorArraySplitV3",
    "StackPushV2",
    "BarrierInsertMany",
    "_Send",  # the rendezvous holds the value until its _Recv takes it
    "PyFunc",  # a user's function may keep what it is given
    "PyFuncStateless",
    # the spectra memo of ops/conv_ops.py keeps the activations it transformed (`_memo`)
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "_FusedConv2DBiasAddRelu",  # (ops/nn_ops.py: Conv2D's kernel or the spectral path)
    "_FusedConv2DBiasAddReluMaxPool",
}
# Stateful op types whose outputs are nevertheless new arrays on every run.
_FRESH: set[str] = {
    "RandomUniform",
    "RandomStandardNormal",
    "TruncatedNormal",
    "RandomUniformInt",
}
# Stateless op types whose outputs are stored objects (handed out again each run).
# (A stateless py_func may return its argument or an array the user keeps.)
_STORED: set[str] = {"Const", "HostConst", "_Recv", "_HostRecv", "PyFuncStateless"}


def aliases_inputs(op_type: str, when: Callable | None = None) -> None:
    """Declare an op whose kernel may return an input object itself (pass-through);
    `when(op)`, if given, says for which nodes (e.g. a Cast to the same type)."""
    _ALIASES[op_type] = when


def retains_inputs(*op_types: str) -> None:
    """Declare ops whose kernels keep references to their inputs after returning
    (a queue, a TensorArray, a stack, a memo): no input of theirs is ever donated."""
    _RETAINS.update(op_types)


def fresh_outputs(*op_types: str) -> None:
    """Declare stateful ops whose outputs are new arrays on every run (random ops)."""
    _FRESH.update(op_types)


def passes_inputs(op) -> bool:
    """Whether `op`'s kernel may return one of its input objects (pass-through)."""
    if op.type not in _ALIASES:
        return False
    when = _ALIASES[op.type]
    return when is None or bool(when(op))


def makes_new(op) -> bool:
    """Whether `op`'s outputs are made by its kernel at each run: not a stateful op's
    stored value (bar the random ops), a constant's or a received value, a reference."""
    return not (
        (op.op_def.stateful and op.type not in _FRESH)
        or op.type in _STORED
        or any(t._is_ref for t in op._outputs)
    )


def retains(op) -> bool:
    """Whether `op`'s kernel keeps references to its inputs after it returns."""
    return op.type in _RETAINS


def _find(parent: list[int], a: int) -> int:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def decide(plan) -> None:
    """Set `ctx.forward` (the donatable input positions) on every node's context, and
    `ctx.fresh` on the nodes whose outputs some consumer may take over."""
    pnodes = plan.pnodes
    n = len(pnodes)
    # One id per value: (node, output) -> base[node] + output; feeds after all outputs.
    base, count = [], 0
    for p in pnodes:
        base.append(count)
        count += max(1, len(p.op._outputs))
    feed0 = count
    count += len(plan.feed_slots)
    parent = list(range(count))

    def value(src) -> int:
        return feed0 + src[1] if src[0] == "feed" else base[src[0]] + src[1]

    def union(a: int, b: int) -> None:
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[ra] = rb

    aliasing = [i in plan.aliasing or passes_inputs(p.op) for i, p in enumerate(pnodes)]
    for i, p in enumerate(pnodes):
        if aliasing[i]:
            for k in range(1, len(p.op._outputs)):
                union(base[i], base[i] + k)
            for src in p.inputs:
                union(value(src), base[i])
    stale = set()  # groups holding a value that is not new in this step
    producers: dict[int, list[int]] = {}  # group -> nodes making its values
    for f in range(len(plan.feed_slots)):
        stale.add(_find(parent, feed0 + f))
    for i, p in enumerate(pnodes):
        op = p.op
        if aliasing[i]:
            if op.type in ("Enter", "RefEnter") and op._attrs.get("is_constant"):
                stale.add(_find(parent, base[i]))  # every iteration reads that object
            continue
        made_here = makes_new(op)
        for k in range(max(1, len(op._outputs))):
            g = _find(parent, base[i] + k)
            producers.setdefault(g, []).append(i)
            if not made_here:
                stale.add(g)
    # Consumers per group: every data edge into a node that is not an alias of it, and
    # every fetch.
    consumers: dict[int, list] = {}
    for i, p in enumerate(pnodes):
        if aliasing[i]:
            continue
        for k, src in enumerate(p.inputs):
            consumers.setdefault(_find(parent, value(src)), []).append((i, k))
    sentinel = plan.sentinel
    for i, edges in enumerate(plan.edges[:n]):
        for oi, j, _s in edges:
            if oi >= 0 and j == sentinel:
                consumers.setdefault(_find(parent, base[i] + oi), []).append((j, -1))
    forward: list[set[int]] = [set() for _ in range(n)]
    for g, users in consumers.items():
        if g in stale or len(users) != 1:
            continue
        j, k = users[0]
        if j == sentinel or retains(pnodes[j].op) or k in plan.derefs[j]:
            continue
        forward[j].add(k)
    fresh = [False] * n  # the producers these decisions trust
    for i in range(n):
        for k in forward[i]:
            for m in producers.get(_find(parent, value(pnodes[i].inputs[k])), ()):
                fresh[m] = True
    for i, ctx in enumerate(plan.ctxs):
        ctx.forward = frozenset(forward[i])
        ctx.fresh = fresh[i]
