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
- The program computes each member as its own kernel does (the same ufuncs in the same
  order), with one exception: Sigmoid is 1 / (1 + exp(-x)), ten times faster than the
  overflow-free logaddexp form of math_ops, and equal to it but for results below the
  smallest normal number (which it flushes to 0).
- Outputs are new arrays (or donated inputs), never one another, never a literal.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
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
    fn: object
    arity: int  # -1: any number (AddN)
    shapes: str  # "same" (unary), "broadcast", "equal" (all alike), "bias" (BiasAdd)
    alias: tuple[int, ...]


def _ufunc1(name):
    return lambda xp, out, x: getattr(xp, name)(x, out=out)


def _ufunc2(name):
    return lambda xp, out, x, y: getattr(xp, name)(x, y, out=out)


def _sigmoid(xp, out, x):
    xp.negative(x, out=out)
    xp.exp(out, out=out)
    xp.add(out, out.dtype.type(1), out=out)
    return xp.reciprocal(out, out=out)


def _rsqrt(xp, out, x):
    xp.sqrt(x, out=out)
    return xp.reciprocal(out, out=out)


def _relu(xp, out, x):
    return xp.maximum(x, out.dtype.type(0), out=out)


def _relu_grad(xp, out, g, x):  # TF's ReluGradFunctor: gradients * (features > 0)
    return xp.multiply(g, x > 0, out=out)


def _squared_difference(xp, out, x, y):
    xp.subtract(x, y, out=out)
    return xp.multiply(out, out, out=out)


def _add_n(xp, out, *xs):
    xp.add(xs[0], xs[1], out=out)
    for x in xs[2:]:
        xp.add(out, x, out=out)
    return out


def _square(xp, out, x):
    return xp.multiply(x, x, out=out)


ELEMENTWISE: dict[str, _Rule] = {
    **{
        op: _Rule(_ufunc1(name), 1, "same", (0,))
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
    "Square": _Rule(_square, 1, "same", (0,)),
    "Sigmoid": _Rule(_sigmoid, 1, "same", (0,)),
    "Rsqrt": _Rule(_rsqrt, 1, "same", (0,)),
    "Relu": _Rule(_relu, 1, "same", (0,)),
    **{
        op: _Rule(_ufunc2(name), 2, "broadcast", (0, 1))
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
    "BiasAdd": _Rule(_ufunc2("add"), 2, "bias", (0,)),
    "ReluGrad": _Rule(_relu_grad, 2, "equal", (0, 1)),
    "AddN": _Rule(_add_n, -1, "equal", ()),  # a later operand may be the same value
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
    donated = tuple(
        k for k in schedule.donatable if xs[k].dtype == program.dtype and ctx.may_forward(k, xs[k])
    )
    literals = program.literals_for(xp)
    if schedule.elements < _INLINE_ELEMENTS:
        out = program.evaluate(xp, schedule, literals, donated, *xs)
    else:
        cost = schedule.elements * schedule.itemsize * (len(schedule.shapes) + 1)
        out = await ctx.device.compute(
            _quiet, xp, program.evaluate, xp, schedule, literals, donated, *xs, cost=cost
        )
    return out if len(out) > 1 else out[0]


@dataclass
class _Schedule:
    """How one combination of input shapes runs: each instruction's result shape, and
    which values die after which instruction (their buffers are reused)."""

    shapes: list
    dies_after: list  # per instruction: value ids read for the last time there
    donatable: tuple  # inputs whose shape some instruction's result has
    elements: int
    itemsize: int


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
        self.rules = [ELEMENTWISE[t] for t in attrs["program"]]
        self.types = list(attrs["program"])
        self.names = list(attrs["names"])
        self.operands = [
            tuple(operands[starts[j] : starts[j + 1]]) for j in range(len(self.rules))
        ]
        self.results = [self.n_fixed + r for r in attrs["results"]]
        self.schedules: dict = {}
        self._device_literals: dict = {}
        # Literals that are scalars go to ufuncs as NumPy scalars of T (CuPy takes those).
        self._scalar = [v.ndim == 0 for v in self.literals]

    def literals_for(self, xp) -> list:
        got = self._device_literals.get(xp)
        if got is None:
            got = [
                self.dtype.type(v) if s else (v if xp is np else xp.asarray(v))
                for v, s in zip(self.literals, self._scalar)
            ]
            self._device_literals[xp] = got
        return got

    def schedule(self, xs) -> _Schedule:
        """Shapes and lifetimes for inputs of these shapes (cached).

        Raises InvalidArgumentError for shapes an instruction's op rejects, with its
        own op's message."""
        shapes = [tuple(x.shape) for x in xs] + [v.shape for v in self.literals]
        last_use = [-1] * (self.n_fixed + len(self.rules))
        for j, (rule, args) in enumerate(zip(self.rules, self.operands)):
            shapes.append(self._result_shape(j, rule, [shapes[a] for a in args]))
            for a in args:
                last_use[a] = j
        outputs = set(self.results)
        dies_after: list[list[int]] = [[] for _ in self.rules]
        for v, j in enumerate(last_use):
            if j >= 0 and v not in outputs:
                dies_after[j].append(v)
        result_shapes = set(shapes[self.n_fixed :])
        donatable = tuple(k for k in range(self.n_inputs) if shapes[k] in result_shapes)
        elements = max((math.prod(s) for s in shapes[self.n_fixed :]), default=0)
        sched = _Schedule(shapes, dies_after, donatable, elements, self.dtype.itemsize)
        if len(self.schedules) > 64:  # a service's varying batch sizes: keep it bounded
            self.schedules.clear()
        self.schedules[tuple(shapes[: self.n_inputs])] = sched
        return sched

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
            for k, s in enumerate(shapes[1:], 1):
                if s != shapes[0]:
                    if self.types[j] == "ReluGrad":
                        msg = "gradients and features must be the same shape: "
                        msg += f"{_shape_str(shapes[0])} vs. {_shape_str(s)}"
                    else:
                        msg = (
                            f"Inputs to operation {self.names[j]} of type AddN must have the "
                            f"same size and shape.  Input 0: {_shape_str(shapes[0])} != "
                            f"input {k}: {_shape_str(s)}"
                        )
                    raise self._error(j, msg)
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

    def evaluate(self, xp, sched: _Schedule, literals, donated, *xs):
        """Run the program; returns the outputs' values (a tuple)."""
        values = [*xs, *literals]
        shapes, dies_after = sched.shapes, sched.dies_after
        n_fixed, dtype = self.n_fixed, self.dtype
        pool: dict = {}  # shape -> buffers whose value died (temporaries, donated inputs)
        for j, (rule, args) in enumerate(zip(self.rules, self.operands)):
            shape = shapes[n_fixed + j]
            dying = dies_after[j]
            out = None
            for pos in rule.alias:  # a dying operand's buffer takes the result
                if pos < len(args):
                    a = args[pos]
                    if a in dying and self._writable(a, donated, shapes[a], shape):
                        out = values[a]
                        break
            if out is None:
                bufs = pool.get(shape)
                out = bufs.pop() if bufs else xp.empty(shape, dtype)
            values.append(rule.fn(xp, out, *[values[a] for a in args]))
            for a in dying:
                if values[a] is not out and self._writable(a, donated, shapes[a], shapes[a]):
                    pool.setdefault(shapes[a], []).append(values[a])
                values[a] = None
        return tuple(self._distinct(xp, values, self.results))

    def _writable(self, a: int, donated, shape, want) -> bool:
        """Whether value a's buffer may be written: a temporary, or a donated input."""
        if shape != want:
            return False
        if a >= self.n_fixed:
            return True
        return a < self.n_inputs and a in donated

    @staticmethod
    def _distinct(xp, values, results):
        seen = set()
        for r in results:
            v = values[r]
            if id(v) in seen:
                v = xp.copy(v)
            seen.add(id(v))
            yield v


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
