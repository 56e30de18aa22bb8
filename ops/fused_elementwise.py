"""Elementwise fusion: a cluster of element-wise nodes becomes one `_FusedElementwise`.

Training graphs are full of small element-wise nodes: an LSTM cell's gates (Sigmoid,
Tanh, Mul, AddV2), every activation's gradient (`grad * y * (1 - y)`), loss formulas.
Each costs a trip through the interpreter and a pass over memory.  The graph pass
`fuse_elementwise` (listed last in `graph_passes.GRAPH_PASSES`, after autodiff built
the gradients and after the pattern fusions took theirs) groups connected element-wise
nodes of one device into clusters and replaces each by one node whose kernel evaluates
the cluster's expression: a short program of ufunc calls that write into buffers it
reuses (`out=`), an input buffer nothing else holds (`ctx.may_forward`) included.

A cluster may have several outputs: every member whose value something outside needs
(the forward activations a backward pass reads) is one.  Const operands that only the
cluster reads become literals of the program.

Invariants:
- Clusters are convex, together: contracting every one of them to a node leaves the
  graph acyclic (`graph_passes.run_graph_passes` checks it too).
- All members compute one floating dtype T, on one device, and none reads a variable
  through a reference.
- In a partition where values may be dead (control flow, or a _Recv from one), every
  output depends on every input and control edge of the cluster, so that the fused
  node is dead exactly when each replaced output would have been.
- The program computes each member as its own kernel does: the same ufuncs in the same
  order, the activations and their gradients through the same ops.elementwise helpers.
- Outputs are new arrays (or donated inputs), never one another, never a literal.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import elementwise as _ew
from asyncflow.ops.math_helpers import _quiet, _shape_str
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["FusedElementwise", "fuse_elementwise", "ELEMENTWISE"]

_FLOATS = TypeConstraint([dtypes.float16, dtypes.float32, dtypes.float64])


# -- what each op computes, into `out` -------------------------------------------------------
#
# fn(xp, out, *operands) writes the op's value into `out` (an array of the result's shape
# and dtype T) and returns it.  `alias` lists the operand positions `out` may share a
# buffer with (functions of several ufunc calls read some operands after writing `out`).


@dataclass(frozen=True)
class _Rule:
    fn: object  # fn(xp, out, *operands), or the name of the xp ufunc computing it
    arity: int  # -1: any number (AddN)
    shapes: str  # "same" (unary), "broadcast", "equal" (all alike), "bias" (BiasAdd)
    alias: tuple[int, ...]
    mismatch: str = "Incompatible shapes: {0} vs. {1}"  # the op's own message ("equal")

    def bind(self, xp):
        """A callable `f(*operands, out=)` on the array module xp."""
        if isinstance(self.fn, str):
            return getattr(xp, self.fn)
        fn = self.fn
        return lambda *args, out: fn(xp, out, *args)


def _relu(xp, out, x):
    return xp.maximum(x, out.dtype.type(0), out=out)


def _relu_grad(xp, out, g, x):  # TF's ReluGradFunctor: gradients * (features > 0)
    return xp.multiply(g, x > 0, out=out)


def _squared_difference(xp, out, x, y):
    xp.subtract(x, y, out=out)
    return xp.multiply(out, out, out=out)


def _rsqrt(xp, out, x):
    xp.sqrt(x, out=out)
    return xp.reciprocal(out, out=out)


def _add_n(xp, out, *xs):
    xp.add(xs[0], xs[1], out=out)
    for x in xs[2:]:
        xp.add(out, x, out=out)
    return out


_ACTIVATION_GRAD = "gradients and features must be the same shape: {0} vs. {1}"
_ADD_N = (
    "Inputs to operation {name} of type AddN must have the same size and shape.  "
    "Input 0: {0} != input {k}: {1}"
)

# The activations and their gradients share their kernels' numerics (ops.elementwise),
# which take `out` last and allow it to be the operands listed in `alias`.
ELEMENTWISE: dict[str, _Rule] = {
    **{
        op: _Rule(name, 1, "same", (0,))
        for op, name in {
            "Neg": "negative",
            "Abs": "absolute",
            "Sign": "sign",
            "Sqrt": "sqrt",
            "Exp": "exp",
            "Expm1": "expm1",
            "Log": "log",
            "Log1p": "log1p",
            "Sin": "sin",
            "Cos": "cos",
            "Tanh": "tanh",
            "Reciprocal": "reciprocal",
            "Floor": "floor",
            "Ceil": "ceil",
        }.items()
    },
    "Square": _Rule(lambda xp, out, x: xp.multiply(x, x, out=out), 1, "same", (0,)),
    "Rsqrt": _Rule(_rsqrt, 1, "same", (0,)),
    "Relu": _Rule(_relu, 1, "same", (0,)),
    "Sigmoid": _Rule(lambda xp, out, x: _ew.sigmoid(xp, x, out), 1, "same", (0,)),
    "Softplus": _Rule(lambda xp, out, x: _ew.softplus(xp, x, out), 1, "same", (0,)),
    **{
        op: _Rule(name, 2, "broadcast", (0, 1))
        for op, name in {
            "Add": "add",
            "AddV2": "add",
            "Sub": "subtract",
            "Mul": "multiply",
            "RealDiv": "true_divide",
            "Maximum": "maximum",
            "Minimum": "minimum",
            "Pow": "power",
        }.items()
    },
    "SquaredDifference": _Rule(_squared_difference, 2, "broadcast", (0, 1)),
    "BiasAdd": _Rule("add", 2, "bias", (0,)),
    "SigmoidGrad": _Rule(
        lambda xp, out, y, dy: _ew.sigmoid_grad(xp, y, dy, out), 2, "equal", (0, 1)
    ),
    "TanhGrad": _Rule(lambda xp, out, y, dy: _ew.tanh_grad(xp, y, dy, out), 2, "equal", (0, 1)),
    "ReluGrad": _Rule(_relu_grad, 2, "equal", (0, 1), _ACTIVATION_GRAD),
    "SoftplusGrad": _Rule(
        lambda xp, out, g, x: _ew.softplus_grad(xp, g, x, out),
        2,
        "equal",
        (0, 1),
        _ACTIVATION_GRAD,
    ),
    "AddN": _Rule(_add_n, -1, "equal", (), _ADD_N),  # a later operand may be the same value
}


# -- the internal op -------------------------------------------------------------------------


def _fused_shape(op):
    return [tensor_shape.unknown_shape() for _ in op._outputs]


FusedElementwise = register_op(
    "_FusedElementwise",
    inputs=["inputs: N * T"],
    outputs=["outputs: M * T"],
    attrs={
        "T": _FLOATS,
        "N": 0,
        "M": 1,
        # The program: instruction j computes op type program[j] of the operands
        # operands[starts[j]:starts[j + 1]]; operand r < N is input r, r < N + len(literals)
        # literal r - N, else instruction r - N - len(literals).  results: the
        # instructions whose values are the outputs.  names: each instruction's node.
        "program": [],
        "operands": [],
        "starts": [],
        "literals": [],
        "results": [],
        "names": [],
    },
    shape_fn=_fused_shape,
)
NotDifferentiable("_FusedElementwise")  # introduced after the gradients were built

# Below this many result elements the program runs inline (no errstate, no hop).
_INLINE_ELEMENTS = 4096


@FusedElementwise.kernel()
async def _fused_elementwise(ctx, *xs):
    program = ctx.kernel_state.get("fused_program")
    if program is None:
        program = ctx.kernel_state["fused_program"] = _Program(ctx.op)
    xp = ctx.xp
    schedule = program.schedules.get(tuple(x.shape for x in xs))
    if schedule is None:
        schedule = program.schedule(xs)
    donated = [
        k for k in schedule.donatable if xs[k].dtype == program.dtype and ctx.may_forward(k, xs[k])
    ]
    if schedule.elements < _INLINE_ELEMENTS:
        out = program.evaluate(xp, schedule, donated, xs)
    else:
        cost = schedule.elements * schedule.itemsize * (len(schedule.steps) + len(xs))
        out = await ctx.device.compute(
            _quiet, xp, program.evaluate, xp, schedule, donated, xs, cost=cost
        )
    return out if len(out) > 1 else out[0]


class _Schedule:
    """How the program runs on inputs of one combination of shapes, decided once.

    Every value has a buffer slot, shared by values whose lifetimes do not overlap (an
    operand's slot takes the result when the operand dies there and the op allows it).
    An input's slot is its own buffer when the input was donated (`ctx.may_forward`);
    a slot that holds an output is a new array each run (or a donated input's); the
    others hold temporaries, arrays the program keeps between runs.
    """

    __slots__ = (
        "steps",
        "slot_shapes",
        "fresh_slots",
        "temp_slots",
        "donatable",
        "results",
        "elements",
        "itemsize",
        "temps",
    )


class _Program:
    """A node's program, decoded once per node; schedules cached per input shapes."""

    def __init__(self, op):
        attrs = op._attrs
        self.op_name = op.name
        self.n_inputs = attrs["N"]
        self.dtype = attrs["T"].np_dtype
        self.literals = [np.asarray(v, self.dtype) for v in attrs["literals"]]
        self.n_fixed = self.n_inputs + len(self.literals)
        starts, operands = list(attrs["starts"]), list(attrs["operands"])
        self.types = list(attrs["program"])
        self.rules = [ELEMENTWISE[t] for t in self.types]
        self.names = list(attrs["names"])
        self.operands = [
            tuple(operands[starts[j] : starts[j + 1]]) for j in range(len(self.rules))
        ]
        self.results = [self.n_fixed + r for r in attrs["results"]]
        self.schedules: dict = {}
        self._bound: dict = {}  # xp -> (callables per instruction, literals on its device)

    def bound(self, xp):
        got = self._bound.get(xp)
        if got is None:
            # Scalar literals go to ufuncs as NumPy scalars of T (CuPy takes those).
            lits = [
                self.dtype.type(v) if v.ndim == 0 else (v if xp is np else xp.asarray(v))
                for v in self.literals
            ]
            got = self._bound[xp] = ([r.bind(xp) for r in self.rules], lits)
        return got

    def schedule(self, xs) -> _Schedule:
        """Shapes, buffer slots and lifetimes for inputs of these shapes (cached).

        Raises InvalidArgumentError for shapes an instruction's op rejects, with its
        own op's message."""
        n_fixed = self.n_fixed
        shapes = [tuple(x.shape) for x in xs] + [v.shape for v in self.literals]
        last_use = [-1] * (n_fixed + len(self.rules))
        for j, (rule, args) in enumerate(zip(self.rules, self.operands)):
            shapes.append(self._result_shape(j, rule, [shapes[a] for a in args]))
            for a in args:
                last_use[a] = j
        sched = _Schedule()
        self._assign_slots(sched, shapes, last_use)
        sched.results = self.results
        sched.elements = max((math.prod(s) for s in shapes[n_fixed:]), default=0)
        sched.itemsize = self.dtype.itemsize
        sched.temps = []  # temporaries' arrays between runs (one set per concurrent run)
        if len(self.schedules) > 64:  # a service's varying batch sizes: keep it bounded
            self.schedules.clear()
        self.schedules[tuple(shapes[: self.n_inputs])] = sched
        return sched

    def _assign_slots(self, sched: _Schedule, shapes: list, last_use: list) -> None:
        """Give every value a buffer slot (see _Schedule)."""
        n_fixed, outputs = self.n_fixed, set(self.results)
        slot_of: dict[int, int] = {}
        slot_shapes: list[tuple] = []
        kind: list[str] = []  # "input" (an input's buffer, if donated), "temp", "output"
        free: dict[tuple, list[int]] = {}
        for k in range(self.n_inputs):  # an input's buffer, once it dies, if donated
            slot_of[k] = len(slot_shapes)
            slot_shapes.append(shapes[k])
            kind.append("input")
        steps = []
        for j, (rule, args) in enumerate(zip(self.rules, self.operands)):
            v = n_fixed + j
            shape, is_output = shapes[v], v in outputs
            dying = [a for a in dict.fromkeys(args) if last_use[a] == j and a in slot_of]
            # Outputs are new arrays: never a temporary kept between runs.
            ok = ("input",) if is_output else ("input", "temp")
            slot = None
            for pos in rule.alias:  # in place: into an operand that dies here
                a = args[pos] if pos < len(args) else None
                if a in dying and shapes[a] == shape and kind[slot_of[a]] in ok:
                    slot = slot_of[a]
                    break
            if slot is None:
                for cand in free.get(shape, ()):
                    if kind[cand] in ok:
                        free[shape].remove(cand)
                        slot = cand
                        break
            if slot is None:
                slot = len(slot_shapes)
                slot_shapes.append(shape)
                kind.append("output" if is_output else "temp")
            elif is_output:
                kind[slot] = "output"  # (an input's slot: a new array unless donated)
            for a in dying:
                if slot_of[a] != slot and kind[slot_of[a]] != "output":
                    free.setdefault(shapes[a], []).append(slot_of[a])
            slot_of[v] = slot
            steps.append((args, slot))
        used = {slot for _, slot in steps}
        sched.steps = steps
        sched.slot_shapes = slot_shapes
        # Slots that hold an output get a new array each run (an input's own buffer, if
        # it was donated); the others keep their arrays between runs (an input's slot:
        # unless the input was donated).
        sched.fresh_slots = [s for s in range(len(slot_shapes)) if kind[s] == "output"]
        sched.temp_slots = [s for s in used if kind[s] != "output"]
        sched.donatable = tuple(k for k in range(self.n_inputs) if slot_of[k] in used)

    def _result_shape(self, j: int, rule: _Rule, shapes: list) -> tuple:
        kind = rule.shapes
        if kind == "same":
            return shapes[0]
        if kind == "broadcast":
            if shapes[0] == shapes[1]:
                return shapes[0]
            try:
                return tuple(np.broadcast_shapes(*shapes))
            except ValueError:
                raise self._error(
                    j, f"Incompatible shapes: {_shape_str(shapes[0])} vs. {_shape_str(shapes[1])}"
                ) from None
        if kind == "equal":
            for k, shape in enumerate(shapes[1:], 1):
                if shape != shapes[0]:
                    a, b = _shape_str(shapes[0]), _shape_str(shape)
                    raise self._error(j, rule.mismatch.format(a, b, name=self.names[j], k=k))
            return shapes[0]
        value, bias = shapes  # BiasAdd, NHWC: the bias runs along the last axis
        if len(value) < 2:
            raise self._error(j, f"Input tensor must be at least 2D: {_shape_str(value)}")
        if len(bias) != 1:
            raise self._error(j, f"Biases must be 1D: {_shape_str(bias)}")
        if value[-1] != bias[0]:
            raise self._error(
                j,
                "Must provide as many biases as the channel dimension of the input tensor: "
                f"{_shape_str(bias)} vs. {_shape_str(value)}",
            )
        return value

    def _error(self, j: int, message: str) -> errors.InvalidArgumentError:
        where = "" if self.names[j] == self.op_name else f" (in node {self.names[j]})"
        return errors.InvalidArgumentError(None, None, message + where)

    def evaluate(self, xp, sched: _Schedule, donated, xs) -> tuple:
        """Run the program on inputs `xs`; returns the outputs' values."""
        fns, literals = self.bound(xp)
        dtype, shapes = self.dtype, sched.slot_shapes
        bufs: list = [None] * len(shapes)
        for k in donated:  # (input k's slot is slot k)
            bufs[k] = xs[k]
        for s in sched.fresh_slots:
            if bufs[s] is None:
                bufs[s] = xp.empty(shapes[s], dtype)
        temps = sched.temps.pop() if sched.temps else None
        if temps is None or temps[0] is not xp:
            temps = (xp, [xp.empty(shapes[s], dtype) for s in sched.temp_slots])
        for s, buf in zip(sched.temp_slots, temps[1]):
            if bufs[s] is None:
                bufs[s] = buf
        values = [*xs, *literals]
        for fn, (args, slot) in zip(fns, sched.steps):
            values.append(fn(*[values[a] for a in args], out=bufs[slot]))
        sched.temps.append(temps)
        seen: set[int] = set()
        outs = []
        for r in sched.results:  # distinct objects, as every kernel's outputs are
            v = values[r]
            if id(v) in seen:
                v = xp.copy(v)
            seen.add(id(v))
            outs.append(v)
        return tuple(outs)


# -- the graph pass ----------------------------------------------------------------------

# Ops whose outputs may be dead, or that make a partition's values possibly dead.
_DEADNESS = frozenset(["Switch", "Merge", "Enter", "Exit", "NextIteration", "_Recv", "_HostRecv"])
_LITERAL_MAX_ELEMENTS = 64
_SEARCH_MAX = 4000  # clusters a cycle check may visit before it gives up (no fusion)


def _eligible(view, i: int, device) -> bool:
    node = view.nodes[i]
    op = node.op
    rule = ELEMENTWISE.get(op.type)
    if rule is None or node.device is not device or view.reads_ref(i):
        return False
    if len(op._outputs) != 1 or op._outputs[0]._is_ref:
        return False
    t = op._attrs.get("T")
    if t not in _FLOATS.allowed:
        return False
    if op.type == "BiasAdd" and op._attrs.get("data_format", "NHWC") != "NHWC":
        return False
    if any(s[0] != "feed" and view.nodes[s[0]].op._outputs[s[1]].dtype != t for s in node.inputs):
        return False
    return rule.arity < 0 or len(node.inputs) == rule.arity


class _Clusters:
    """Greedy clustering in topological order.

    Invariant: the graph with every cluster contracted to one node stays acyclic.  Only
    processed nodes (those up to the current one in the order) are ever clustered, so
    an unprocessed node reaches no processed one: a path that would close a cycle runs
    through processed nodes alone, which bounds the search (`_closes_cycle`)."""

    def __init__(self, view):
        nodes = view.nodes
        self.n = len(nodes)
        self.preds: list[list[int]] = []
        self.succs: list[list[int]] = [[] for _ in nodes]
        for i, node in enumerate(nodes):
            ps = [s[0] for s in node.inputs if s[0] != "feed"] + list(node.controls)
            ps = [j for j in ps if nodes[j].op.type != "NextIteration"]  # back edges
            self.preds.append(ps)
            for j in ps:
                self.succs[j].append(i)
        self.order = self._topological()
        self.pos = [0] * self.n
        for p, i in enumerate(self.order):
            self.pos[i] = p
        self.cluster: list[int] = list(range(self.n))  # representative member
        self.members: dict[int, list[int]] = {}

    def _topological(self) -> list[int]:
        pending = [len(ps) for ps in self.preds]
        ready = [i for i in range(self.n) if not pending[i]]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in self.succs[i]:
                pending[u] -= 1
                if not pending[u]:
                    heapq.heappush(ready, u)
        return order

    def group(self, i: int) -> list[int]:
        return self.members.get(self.cluster[i], [i])

    def try_merge(self, i: int, j: int) -> bool:
        """Merge node j's cluster into node i's (i: the node being processed, j: one of
        its producers) unless some other path from j's cluster reaches i's."""
        if self._closes_cycle(self.cluster[i], self.cluster[j], self.pos[i]):
            return False
        ra, rb = self.cluster[i], self.cluster[j]
        ma, mb = self.group(ra), self.group(rb)
        for m in mb:
            self.cluster[m] = ra
        self.members[ra] = ma + mb
        self.members.pop(rb, None)
        return True

    def _closes_cycle(self, a: int, b: int, limit: int) -> bool:
        """Whether cluster b reaches cluster a other than by a direct edge (through the
        contracted graph of the processed nodes)."""
        cluster, pos, succs = self.cluster, self.pos, self.succs
        todo = [
            s
            for m in self.group(b)
            for s in succs[m]
            if pos[s] <= limit and cluster[s] != a and cluster[s] != b
        ]
        seen: set[int] = set()
        while todo:
            c = cluster[todo.pop()]
            if c == a:
                return True
            if c in seen:
                continue
            seen.add(c)
            if len(seen) > _SEARCH_MAX:
                return True  # (give up: no fusion rather than a long compile)
            for m in self.group(c):
                todo.extend(s for s in succs[m] if pos[s] <= limit and cluster[s] not in seen)
        return False


def fuse_elementwise(view) -> None:
    """Replace each cluster of two or more connected element-wise nodes by one
    `_FusedElementwise` (the module's note says which nodes qualify)."""
    nodes = view.nodes
    if not nodes:
        return
    device = view.partition.device
    if device.kernel_for(FusedElementwise) is None:  # a device of its own kernels only
        return
    eligible = [view.available(i) and _eligible(view, i, device) for i in range(len(nodes))]
    if sum(eligible) < 2:
        return
    cl = _Clusters(view)
    for i in cl.order:
        if not eligible[i]:
            continue
        for s in nodes[i].inputs:
            j = s[0]
            if j == "feed" or not eligible[j] or cl.cluster[j] == cl.cluster[i]:
                continue
            cl.try_merge(i, j)
    may_be_dead = any(n.op.type in _DEADNESS for n in nodes)
    # One cluster at a time: fusing one rewires its outputs' consumers, which another
    # cluster's plan must see.
    for members in list(cl.members.values()):
        plan = _plan_cluster(view, cl, sorted(members, key=cl.pos.__getitem__), may_be_dead)
        if plan is not None:
            view.fuse(**plan)


def _plan_cluster(view, cl: _Clusters, members: list[int], may_be_dead: bool):
    """The arguments of `view.fuse` for one cluster, or None when it is not worth it
    (or not safe: a dead-value partition whose outputs depend on different inputs)."""
    nodes = view.nodes
    users = view._consumers
    inside = set(members)
    fetched = view._fetched
    outputs = [m for m in members if m in fetched or any(u not in inside for u, _ in users[m])]
    if not outputs:
        return None
    # Const operands read only by the cluster become literals.
    literals: dict[int, int] = {}  # const node -> literal index
    inputs: list = []  # external sources, each once
    input_index: dict = {}
    index_of = {m: j for j, m in enumerate(members)}
    for m in members:
        for s in nodes[m].inputs:
            j = s[0]
            if j != "feed" and j in inside:
                continue
            if j != "feed" and j not in literals and _literal(view, j, inside):
                literals[j] = len(literals)
            if j == "feed" or j not in literals:
                key = tuple(s)
                if key not in input_index:
                    input_index[key] = len(inputs)
                    inputs.append(key)
    if may_be_dead and not _same_dependencies(view, members, outputs, inside, literals):
        return None
    n, n_lit = len(inputs), len(literals)
    program, operands, starts, names = [], [], [], []
    for m in members:
        starts.append(len(operands))
        program.append(nodes[m].op.type)
        names.append(nodes[m].op.name)
        for s in nodes[m].inputs:
            j = s[0]
            if j != "feed" and j in inside:
                operands.append(n + n_lit + index_of[j])
            elif j != "feed" and j in literals:
                operands.append(n + literals[j])
            else:
                operands.append(input_index[tuple(s)])
    starts.append(len(operands))
    # The fused node takes the place (and name) of the last output; the others follow it.
    into = outputs[-1]
    extra = outputs[:-1]
    results = [index_of[into]] + [index_of[m] for m in extra]
    t = nodes[into].op._attrs["T"]
    attrs = {
        "T": t,
        "N": n,
        "M": len(results),
        "program": program,
        "operands": operands,
        "starts": starts,
        "literals": [nodes[c].op._attrs["value"] for c in literals],
        "results": results,
        "names": names,
    }
    absorbed = [m for m in members if m != into] + list(literals)
    return {
        "into": into,
        "op_type": "_FusedElementwise",
        "attrs": attrs,
        "inputs": inputs,
        "absorbed": absorbed,
        "outputs": [(m, 0) for m in extra],
    }


def _literal(view, j: int, inside: set) -> bool:
    """Whether node j is a small Const that only the cluster reads."""
    op = view.nodes[j].op
    if op.type != "Const" or j in view._fetched:
        return False
    value = op._attrs.get("value")
    if value is None or np.size(value) > _LITERAL_MAX_ELEMENTS:
        return False
    return all(u in inside for u, _ in view._consumers[j])


def _same_dependencies(view, members, outputs, inside, literals) -> bool:
    """Whether every output waits, through the cluster, for all the cluster's external
    inputs and control edges (then it is dead exactly when the fused node is)."""
    nodes = view.nodes
    deps: dict[int, frozenset] = {}
    for m in members:  # members are in topological order
        d = set()
        node = nodes[m]
        for s in node.inputs:
            j = s[0]
            if j != "feed" and j in inside:
                d |= deps[j]
            elif j != "feed" and j in literals:
                d.update(("control", c) for c in nodes[j].controls)
            else:
                d.add(tuple(s))
        d.update(("control", c) for c in node.controls)
        deps[m] = frozenset(d)
    every = frozenset().union(*deps.values())
    return all(deps[o] == every for o in outputs)
