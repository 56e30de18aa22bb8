"""Elementwise fusion: a cluster of element-wise nodes becomes one `_FusedElementwise`.

Training graphs are full of small element-wise nodes: an LSTM cell's gates (Sigmoid,
Tanh, Mul, AddV2), every activation's gradient (`grad * y * (1 - y)`), loss formulas.
Each costs a trip through the interpreter and a pass over memory.  The graph pass
`fuse_elementwise` (listed last in `graph_passes.GRAPH_PASSES`, after autodiff built
the gradients and after the pattern fusions took theirs) groups connected element-wise
nodes of one device into clusters and replaces each by one node whose kernel evaluates
the cluster's expression: a short program of ufunc calls that write into buffers it
reuses (`out=`), an input buffer nothing else holds (`ctx.may_forward`) included.
A program of arithmetic only (an LSTM cell's backward pass) runs as one compiled loop
where numba is installed (fused_elementwise_jit): one pass, the same bits; one with
transcendental functions (its forward pass) as compiled stages around NumPy's calls.

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

from asyncflow import dtypes, errors, graph, tensor_shape
from asyncflow.deadness import Deadness
from asyncflow.devices import cpu_budget
from asyncflow.ops import eigen_reduce
from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_jit as _jit
from asyncflow.ops.manip_ops import concat_axis
from asyncflow.ops.math_helpers import _quiet, _shape_str, to_host
from asyncflow.ops.select_zero import _masked
from asyncflow.ops.slicing_ops import _BITS, _select_bits
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "FusedElementwise",
    "fuse_concat_outputs",
    "fuse_bias_add_grad",
    "fuse_elementwise",
    "fuse_split_inputs",
    "mark_shape_only_outputs",
    "ELEMENTWISE",
]

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
        if self.fn is None:
            return None  # (SumTo: the schedule's)
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


def _select(xp, out, cond, t, e):
    """Select: t where cond, else e, on the values' bits as the Select kernel takes them
    (slicing_ops._select_bits: exact for every value).  TF1's batch vector (one per row
    of a value of rank 2 or more) as one factor per row, as _SelectZero's kernel makes
    it: a bool operand broadcast along a row goes through NumPy's casting loop, 2x
    slower.  CPU programs only (`_SELECT_TYPES`)."""
    if cond.ndim == 1 and t.ndim > 1:
        cond = cond.astype(_BITS[t.dtype.itemsize]).reshape(cond.shape + (1,) * (t.ndim - 1))
    return _select_bits(cond, t, e, out)


def _select_zero(xp, out, cond, value, like, zero_then: bool = False):
    """_SelectZero: its kernel's own function (select_zero._masked), into `out`."""
    return _masked(cond, value, zero_then, out)


def _add_n(xp, out, *xs):
    xp.add(xs[0], xs[1], out=out)
    for x in xs[2:]:
        xp.add(out, x, out=out)
    return out


def _sum_into(xp, dtype, shape: tuple, target: tuple):
    """f(g, out=): g of `shape` summed over the axes broadcasting made of `target`, as
    Reshape(Sum(g, BroadcastGradientArgs(..)), target) computes it."""
    lead = len(shape) - len(target)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, (t, d) in enumerate(zip(target, shape[lead:])) if t == 1 and d != 1
    )
    reduced = tuple(d for i, d in enumerate(shape) if i not in axes)
    if xp is np and np.dtype(dtype) in eigen_reduce.SUPPORTED:

        def tf_sum(g, out):  # the Sum kernel's function: TF's order of additions, its bits
            eigen_reduce.reduce_sum(g, axes, cpu_budget.budget(), out=out.reshape(reduced))
            return out

        return tf_sum
    reduce = np.add.reduce if xp is np else xp.sum

    def fn(g, out):
        reduce(g, axis=axes, dtype=dtype, out=out.reshape(reduced))
        return out

    return fn


def _copy_into(xp, g, out):
    xp.copyto(out, g)
    return out


def _copier(xp):
    """f(g, out=): g copied into out (an output that is the program's input)."""

    def copy(g, out):
        return _copy_into(xp, g, out)

    copy.is_copy = True  # (fused_elementwise_jit: a copy is the loop's own store)
    return copy


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
            "Expm1": "expm1",
            "Sin": "sin",
            "Cos": "cos",
            "Reciprocal": "reciprocal",
            "Floor": "floor",
            "Ceil": "ceil",
        }.items()
    },
    "Square": _Rule(lambda xp, out, x: xp.multiply(x, x, out=out), 1, "same", (0,)),
    "Rsqrt": _Rule(_rsqrt, 1, "same", (0,)),
    "Relu": _Rule(_relu, 1, "same", (0,)),
    "Sigmoid": _Rule(lambda xp, out, x: _ew.sigmoid(xp, x, out), 1, "same", (0,)),
    "Tanh": _Rule(lambda xp, out, x: _ew.tanh(xp, x, out), 1, "same", (0,)),
    "Exp": _Rule(lambda xp, out, x: _ew.exp(xp, x, out), 1, "same", (0,)),
    "Log": _Rule(lambda xp, out, x: _ew.log(xp, x, out), 1, "same", (0,)),
    "Log1p": _Rule(lambda xp, out, x: _ew.log1p(xp, x, out), 1, "same", (0,)),
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
    # Select of a bool condition (of the value's shape, a scalar, or TF1's batch vector)
    # and _SelectZero (ops/select_zero.py; "_SelectZeroThen" its zero_then form): the
    # sequence_length steps of static_rnn, a cross-entropy's relu_logits, and their
    # gradients.  The CPU's programs only (`_SELECT_TYPES`).
    "Select": _Rule(_select, 3, "select", ()),
    "_SelectZero": _Rule(_select_zero, 3, "select", ()),
    "_SelectZeroThen": _Rule(
        lambda xp, out, c, v, like: _select_zero(xp, out, c, v, like, True), 3, "select", ()
    ),
    # The gradient g reduced to shape s (a program's own instruction, see the op's attrs):
    # the schedule makes it an alias of g when the shapes agree, else a sum.
    "SumTo": _Rule(None, 2, "sum_to", ()),
    # gate_gradients' tf.tuple puts Identities between a gradient op and its consumers.
    "Identity": _Rule(None, 1, "alias", ()),
}


# -- the internal op -------------------------------------------------------------------------


def _fused_shape(op):
    return [tensor_shape.unknown_shape() for _ in op._outputs]


FusedElementwise = register_op(
    "_FusedElementwise",
    inputs=["inputs: N * T", "shapes: Tshapes"],
    outputs=["outputs: M * T"],
    attrs={
        "T": _FLOATS,
        "N": 0,
        "M": 1,
        "Tshapes": TypeConstraint(None, is_list=True),
        # The program: instruction j computes op type program[j] of the operands
        # operands[starts[j]:starts[j + 1]]; operand r < N is input r, r < N + len(literals)
        # literal r - N, r >= 0 instruction r - N - len(literals), r < 0 shapes[-1 - r]
        # (the target of a "SumTo": Reshape(Sum(g, BroadcastGradientArgs(..)[k]), s_k)).
        # results: the instructions whose values are the outputs.  names: each
        # instruction's node.
        "program": [],
        "operands": [],
        "starts": [],
        "literals": [],
        "results": [],
        "names": [],
        # shape_of[k] = 1: shapes input k is a tensor whose own shape is the target (it
        # stood behind a Shape node the pass dropped); 0 (or absent): the shape itself.
        "shape_of": [],
        # [axis, count] (`fuse_concat_outputs`): output 0 is ConcatV2(results[:count],
        # axis), the node's outputs after it results[count:]; empty: one output a result.
        "concat": [],
        # outputs nothing reads but for their shapes (`mark_shape_only_outputs`): each a
        # zero-stride view of its shape, never written.
        "shape_only": [],
        # [k, begin, end, width, ...] (`fuse_split_inputs`): input k is the array a Split
        # cut pieces of, of `width` along its last axis; the program reads its piece
        # [..., begin:end] (a view, as the Split's own output was).
        "columns": [],
        # 1 (`fuse_bias_add_grad`): the node's last output is BiasAddGrad of its first,
        # the join (`concat`), as that kernel computes it.
        "bias_grad": 0,
    },
    shape_fn=_fused_shape,
)
NotDifferentiable("_FusedElementwise")  # introduced after the gradients were built

# Below this many result elements the program runs inline (no errstate, no hop).
_INLINE_ELEMENTS = 4096
# A call's path kept short (cell_path_probe.py: an LSTM cell's program paid 15-40 us a
# call in the step around its loop for these): no donation checks once the schedule's
# compiled loop has run (it writes new arrays), and in a caller-driven step the
# program runs through `cpu_budget.call_without_blas`, not `compute` and its BLAS
# thread choice (it makes no BLAS call).  False: the general path (A/B).
_LEAN = True


@FusedElementwise.kernel(host_memory=("shapes",))
async def _fused_elementwise(ctx, *args):
    program = ctx.kernel_state.get("fused_program")
    if program is None:
        program = ctx.kernel_state["fused_program"] = _Program(ctx.op)
    xp = ctx.xp
    xs = args[: program.n_inputs]
    more = ()
    if program.columns:  # (Split pieces: their views; the whole arrays for the loop)
        more = (xs,)
        xs = program.pieces(xs)
    if program.by_shapes:  # (every SumTo target an input's own shape: one pass)
        key = tuple(x.shape for x in args)
    else:
        key = tuple(x.shape for x in xs)
        if len(args) > len(xs):  # SumTo targets: their values decide the schedule too
            key += _targets(xp, args[len(xs) :], program.shape_of)
    schedule = program.schedules.get(key)
    if schedule is None:
        schedule = program.schedule(xp, xs, key)
    if _LEAN and schedule.compiled:
        donated = ()  # (its compiled loop writes new arrays; evaluate says when it ran)
    else:
        donated = [
            k
            for k in schedule.donatable
            if xs[k].dtype == program.dtype
            and k not in program.column_inputs  # (a piece of an array: never its own)
            and ctx.may_forward(k, xs[k])
        ]
    if schedule.elements < _INLINE_ELEMENTS:
        out = program.evaluate(xp, schedule, donated, xs, *more)
    elif _LEAN and xp is np and getattr(ctx.device, "runs_inline_now", _never)():
        # (what `compute` would do here, without its BLAS thread choice: none is made)
        out = cpu_budget.call_without_blas(
            _quiet, (xp, program.evaluate, xp, schedule, donated, xs, *more)
        )
    else:
        cost = schedule.elements * schedule.itemsize * (len(schedule.steps) + len(xs))
        out = await ctx.device.compute(
            _quiet, xp, program.evaluate, xp, schedule, donated, xs, *more, cost=cost
        )
    return out if len(out) > 1 else out[0]


def _never() -> bool:
    return False


def _targets(xp, values, shape_of) -> tuple:
    """The SumTo targets: each value's own shape where `shape_of` says so, else the
    value (a shape vector, read on the host)."""
    return tuple(
        tuple(v.shape) if of else tuple(to_host(xp, v).tolist()) for v, of in zip(values, shape_of)
    )


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
        "jit",  # the program as one compiled loop (fused_elementwise_jit), or None
        "shape_only",  # [(result position, its view)] (`mark_shape_only_outputs`)
        "compiled",  # whether `jit` has run (the kernel's donation checks are moot then)
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
        # results nothing reads but for their shapes (`mark_shape_only_outputs`)
        self.shape_only = frozenset(attrs.get("shape_only") or ())
        concat = attrs.get("concat") or ()
        self.concat = (int(concat[0]), int(concat[1])) if concat else None
        self.bias_grad = bool(attrs.get("bias_grad"))
        # (the node's outputs but the bias gradient: the join and the other results)
        n_out = len(self.results) - len(self.shape_only)
        self.n_outputs = n_out - self.concat[1] + 1 if self.concat else n_out
        cols = [int(v) for v in attrs.get("columns") or ()]
        self.columns = [tuple(cols[j : j + 4]) for j in range(0, len(cols), 4)]
        self.column_inputs = frozenset(k for k, *_ in self.columns)
        n_shapes = len(attrs["Tshapes"])
        self.shape_of = list(attrs.get("shape_of") or ())[:n_shapes]
        self.shape_of += [0] * (n_shapes - len(self.shape_of))
        # the schedule's key is the shapes of every input, targets' included (`_targets`)
        self.by_shapes = all(self.shape_of)
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

    def schedule(self, xp, xs, key) -> _Schedule:
        """Shapes, buffer slots and lifetimes for inputs of these shapes and these SumTo
        targets (`key`; cached under it).

        Raises InvalidArgumentError for shapes an instruction's op rejects, with its
        own op's message."""
        n_fixed = self.n_fixed
        targets = key[len(xs) :]
        shapes = [tuple(x.shape) for x in xs] + [v.shape for v in self.literals]
        rep = list(range(n_fixed))  # the value each value is (a SumTo to g's shape is g)
        special: dict[int, object] = {}  # instruction -> its schedule's own function
        results = [r for k, r in enumerate(self.results) if k not in self.shape_only]
        outputs = set(results)
        for j, (rule, args) in enumerate(zip(self.rules, self.operands)):
            v = n_fixed + j
            rep.append(v)
            if rule.shapes == "alias":  # Identity
                g, target = args[0], shapes[args[0]]
            elif rule.shapes == "sum_to":
                g, target = args[0], self._sum_to(j, shapes[args[0]], targets[-1 - args[1]])
            else:
                shapes.append(self._result_shape(j, rule, [shapes[a] for a in args]))
                continue
            shapes.append(target)
            if target != shapes[g]:
                special[j] = _sum_into(xp, self.dtype, shapes[g], target)
            elif v in outputs and rep[g] < n_fixed:  # an output is never an input itself
                special[j] = _copier(xp)
            else:
                rep[v] = rep[g]
                if v in outputs:
                    outputs.add(rep[g])
        last_use = [-1] * len(rep)
        for j, args in enumerate(self.operands):
            for a in args:
                if a >= 0:
                    last_use[rep[a]] = j
        sched = _Schedule()
        self._assign_slots(sched, shapes, rep, last_use, outputs, special)
        sched.results = results
        # (each shape-only output one read-only zero-stride view, made once: nothing
        # reads its values, and np.broadcast_to costs ~10 us a call)
        zero = xp.zeros((), self.dtype)
        sched.shape_only = [
            (k, xp.broadcast_to(zero, shapes[self.results[k]])) for k in sorted(self.shape_only)
        ]
        sched.elements = max((math.prod(s) for s in shapes[n_fixed:]), default=0)
        sched.itemsize = self.dtype.itemsize
        sched.temps = []  # temporaries' arrays between runs (one set per concurrent run)
        sched.jit = _jit.compile_schedule(self, sched) if xp is np else None
        sched.compiled = False
        if len(self.schedules) > 64:  # a service's varying batch sizes: keep it bounded
            self.schedules.clear()
        self.schedules[key] = sched
        return sched

    def _sum_to(self, j: int, shape: tuple, target: tuple) -> tuple:
        lead = len(shape) - len(target)
        if lead < 0 or any(t not in (1, d) for t, d in zip(target, shape[lead:])):
            raise self._error(
                j,
                f"Incompatible shapes: {_shape_str(shape)} cannot be reduced to "
                f"{_shape_str(target)}",
            )
        return target

    def _assign_slots(self, sched, shapes, rep, last_use, outputs, special) -> None:
        """Give every value a buffer slot (see _Schedule)."""
        n_fixed = self.n_fixed
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
            args = tuple(rep[a] for a in args if a >= 0)
            if rep[v] != v:  # an alias: no work, no buffer
                steps.append((None, args[:1], None))
                continue
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
            steps.append((special.get(j), args, slot))
        used = {slot for _, _, slot in steps if slot is not None}
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
        if kind == "select":  # (Select's own checks and messages, slicing_ops._select)
            cond, t, e = shapes
            if t != e:
                raise self._error(
                    j,
                    f"'then' and 'else' must have the same size.  but received: "
                    f"{_shape_str(t)} vs. {_shape_str(e)}",
                )
            if len(cond) == 1 and len(t) > 1:
                if cond[0] != t[0]:
                    raise self._error(
                        j,
                        f"Number of batches of 'then' must match size of 'cond', but saw: "
                        f"{t[0]} vs. {cond[0]}",
                    )
            elif cond and cond != t:
                raise self._error(
                    j,
                    f"'then' and 'cond' must have the same size.  but received: "
                    f"{_shape_str(t)} vs. {_shape_str(cond)}",
                )
            return t
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

    def pack(self, xp, outs: tuple) -> tuple:
        """The node's outputs from the results' values: with `concat`, the first
        `count` joined as ConcatV2 joins them (its checks and messages), then the rest."""
        if self.concat is None:
            return outs
        axis, count = self.concat
        parts = outs[:count]
        axis = concat_axis([v.shape for v in parts], axis)
        return (xp.concatenate(parts, axis), *outs[count:])

    def pieces(self, xs) -> list:
        """The inputs with each Split piece (`columns`) cut from its array: a view, as
        the Split's own output was (its array's width is the graph's, known when the
        pass folded the Split)."""
        xs = list(xs)
        for k, begin, end, width in self.columns:
            x = xs[k]
            if x.ndim < 2 or x.shape[-1] != width:  # (cannot happen: a static shape)
                raise errors.InternalError(
                    None,
                    None,
                    f"{self.op_name}: input {k} of shape {_shape_str(x.shape)} is not the "
                    f"array of width {width} its Split cut pieces of",
                )
            xs[k] = x[..., begin:end]
        return xs

    def evaluate(self, xp, sched: _Schedule, donated, xs, whole=None) -> tuple:
        """Run the program on inputs `xs`; returns the node's outputs (`pack`).  `whole`:
        the node's inputs as given, Split pieces' whole arrays (`columns`) where `xs`
        has their views, for the compiled loop to read in place."""
        out = self._evaluate(xp, sched, donated, xs, whole)
        return self._with_bias_grad(xp, out) if self.bias_grad else out

    def _with_bias_grad(self, xp, out: tuple) -> tuple:
        """The outputs with BiasAddGrad of the join after them, as its kernel computes
        it (ops/nn_ops._bias_add_grad): the compiled row loop's column sums where they
        are that (from zero, one row at a time in order: eigen_reduce's order for a
        [rows > 1, more than 32 columns a thread] array), else the kernel's function."""
        threads = cpu_budget.budget()
        joined = out[0]
        if len(out) > self.n_outputs:  # (the loop summed the join's columns)
            if joined.ndim == 2 and joined.shape[0] > 1 and joined.shape[1] > threads * 32:
                return out
            out = out[:-1]
        if xp is np:
            return (*out, eigen_reduce.bias_add_grad(joined, False, threads))
        axes = tuple(range(joined.ndim - 1))
        return (*out, xp.sum(joined, axes).astype(joined.dtype, copy=False))

    def _evaluate(self, xp, sched: _Schedule, donated, xs, whole=None) -> tuple:
        if sched.jit is not None:
            out = sched.jit(xs, whole)  # (packed: fused_elementwise_jit.compile_schedule)
            if out is not None:
                sched.compiled = True
                return self._with_shapes(xp, sched, out) if sched.shape_only else out
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
        for fn, (own, args, slot) in zip(fns, sched.steps):
            if slot is None:  # an alias of its operand
                values.append(values[args[0]])
            else:
                values.append((own or fn)(*[values[a] for a in args], out=bufs[slot]))
        sched.temps.append(temps)
        seen: set[int] = set()
        outs = []
        for r in sched.results:  # distinct objects, as every kernel's outputs are
            v = values[r]
            if id(v) in seen:
                v = xp.copy(v)
            seen.add(id(v))
            outs.append(v)
        outs = self.pack(xp, tuple(outs))
        return self._with_shapes(xp, sched, outs) if sched.shape_only else outs

    def _with_shapes(self, xp, sched: _Schedule, outs: tuple) -> tuple:
        """The node's outputs with the shape-only ones put in: the schedule's zero-stride
        view of each one's shape (nothing reads its values; no join,
        `mark_shape_only_outputs`)."""
        outs = list(outs)
        for k, view in sched.shape_only:
            outs.insert(k, view)
        return tuple(outs)


# -- the graph pass ----------------------------------------------------------------------

# Ops whose outputs may be dead, or that make a partition's values possibly dead.
_DEADNESS = frozenset(["Switch", "Merge", "Enter", "Exit", "NextIteration", "_Recv", "_HostRecv"])
_LITERAL_MAX_ELEMENTS = 64
# Values known to hold fewer elements than this (scalars: loss formulas, schedules,
# counters) are left unfused: each fused call pays a few microseconds of setup and each
# instruction 2-3 us, more than the plain ops cost there (a step with a tf.cond of
# scalars measured 32 us unfused, 47 us fused).
_MIN_ELEMENTS = 2
_SEARCH_MAX = 4000  # clusters a cycle check may visit before it gives up (no fusion)
# A lone node of these types (and dtypes) fuses alone where programs compile: NumPy
# makes several passes of it where its program's loop makes one (a float32 Sigmoid
# between one layer's product and the next: four passes, one of them NumPy's exp at
# 2.4-2.9 ns an element on an AVX2 EPYC, against ~1 ns in the loop).
_F32, _F64 = dtypes.float32, dtypes.float64
_ALONE = {
    "Sigmoid": (_F32,),
    "Tanh": (_F32,),
    "Exp": (_F32,),
    "Log": (_F32,),
    "Log1p": (_F32,),
    "Softplus": (_F32,),
    "SigmoidGrad": (_F32, _F64),
    "TanhGrad": (_F32, _F64),
    "SquaredDifference": (_F32, _F64),
    "Rsqrt": (_F32, _F64),
}
_ALONE_MIN = 128  # ... when its known dimensions hold at least this many elements
_SELECT_TYPES = frozenset(["Select", "_SelectZero"])
_SELECT = True  # False: Selects stay nodes of their own (A/B)


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
    shape = op._outputs[0].shape
    if shape.is_fully_defined() and shape.num_elements() < _MIN_ELEMENTS:
        return False  # a known tiny result: the program's overhead outweighs the ops'
    if op.type == "BiasAdd" and op._attrs.get("data_format", "NHWC") != "NHWC":
        return False
    srcs = node.inputs
    if op.type in _SELECT_TYPES:
        if device.device_type != "CPU" or not _SELECT or len(srcs) != 3:
            return False
        if op._attrs.get("broadcast"):
            return False  # (a SelectV2's condition may broadcast when run: its own kernel)
        srcs = srcs[1:]  # (the condition: bool, by the ops' definitions)
    if any(s[0] != "feed" and view.nodes[s[0]].op._outputs[s[1]].dtype != t for s in srcs):
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

    def group_together(self, i: int, j: int) -> None:
        """Start node j in node i's cluster (a Sum that only its SumTo Reshape reads)."""
        c = self.cluster[i]
        self.cluster[j] = c
        self.members[c] = [*self.group(i), j]

    def try_merge(self, i: int, j: int) -> bool:
        """Merge node j's cluster into node i's (i: the node being processed, j: one of
        its producers) unless some other path from j's cluster reaches i's."""
        if self._closes_cycle(self.cluster[i], self.cluster[j], self.pos[i]):
            return False
        ra, rb = self.cluster[i], self.cluster[j]
        ma, mb = self.group(ra), self.group(rb)
        if len(ma) < len(mb):  # relabel the smaller group: merging stays linear overall
            ra, rb, ma, mb = rb, ra, mb, ma
        for m in mb:
            self.cluster[m] = ra
        if ra in self.members:
            ma.extend(mb)
        else:
            self.members[ra] = ma + mb
        self.members.pop(rb, None)
        return True

    def _closes_cycle(self, a: int, b: int, limit: int) -> bool:
        """Whether cluster b reaches cluster a other than by a direct edge (through the
        contracted graph of the processed nodes).  When a is the smaller, first a
        backward search from a's predecessors, with a budget of b's size (growing one
        long cluster node by node then costs O(1) a node, not O(its length)); the
        forward search from b's successors decides when that runs out."""
        ga, gb = self.group(a), self.group(b)
        if len(ga) < len(gb):
            found = self._search(ga, a, b, self.preds, None, len(gb))
            if found is not None:
                return found
        found = self._search(gb, b, a, self.succs, limit, _SEARCH_MAX)
        return True if found is None else found  # (gave up: no fusion, not a long compile)

    def _search(self, start, frm: int, to: int, edges, limit, budget: int) -> bool | None:
        """Whether cluster `to` is reached from the members `start` of cluster `frm`
        along `edges` through other clusters (nodes at positions up to `limit`); None
        after visiting more than `budget` clusters."""
        cluster, pos = self.cluster, self.pos
        todo = [
            s
            for m in start
            for s in edges[m]
            if cluster[s] != frm and cluster[s] != to and (limit is None or pos[s] <= limit)
        ]
        seen: set[int] = set()
        while todo:
            c = cluster[todo.pop()]
            if c == to:
                return True
            if c in seen:
                continue
            seen.add(c)
            if len(seen) > budget:
                return None
            for m in self.group(c):
                todo.extend(
                    s
                    for s in edges[m]
                    if cluster[s] not in seen and (limit is None or pos[s] <= limit)
                )
        return False


def fuse_elementwise(view) -> None:
    """Replace each cluster of two or more connected element-wise nodes by one
    `_FusedElementwise` (the module's note says which nodes qualify), and a lone node
    of several NumPy passes whose program compiles (`_ALONE`) by one of its own."""
    nodes = view.nodes
    if not nodes:
        return
    device = view.partition.device
    if device.kernel_for(FusedElementwise) is None:  # a device of its own kernels only
        return
    eligible = [view.available(i) and _eligible(view, i, device) for i in range(len(nodes))]
    may_be_dead = any(n.op.type in _DEADNESS for n in nodes)
    # A gradient reduced to its input's shape, Reshape(Sum(g, BroadcastGradientArgs(sx,
    # sy)[k]), s_k), is one "SumTo" instruction: nothing when the shapes agree (most of
    # an LSTM's), a sum over the broadcast axes when not.  (Where values may be dead,
    # the instruction reads s_k alone while the Sum also waited for the other shape:
    # `_same_deadness` counts that shape's deadness as the instruction's.)
    sum_to = _sum_to_patterns(view, device)
    for r in sum_to:
        eligible[r] = True
    alone = [i for i, ok in enumerate(eligible) if ok and _worth_alone(view, i)]
    if sum(eligible) < 2 and not sum_to and not alone:
        return
    deadness = _Deadness(view, _Clusters(view).order) if may_be_dead else None
    _open_gates(view, eligible, deadness)
    cl = _Clusters(view)
    for r, (sum_node, _bga) in sum_to.items():
        cl.group_together(r, sum_node)
    for i in cl.order:
        if not eligible[i]:
            continue
        srcs = [nodes[sum_to[i][0]].inputs[0]] if i in sum_to else nodes[i].inputs
        for s in srcs:
            j = s[0]
            if j == "feed" or not eligible[j] or cl.cluster[j] == cl.cluster[i]:
                continue
            cl.try_merge(i, j)
    if _CONCAT and not may_be_dead and device.device_type == "CPU":
        _merge_concatenated(view, cl, eligible)
    # One cluster at a time: fusing one rewires its outputs' consumers, which another
    # cluster's plan must see.
    bgas = set()
    for members in list(cl.members.values()):
        members = sorted(members, key=cl.pos.__getitem__)
        plan = _plan_cluster(view, members, sum_to, deadness)
        if plan is not None:
            view.fuse(**plan)
            bgas.update(sum_to[m][1] for m in members if m in sum_to)
    for i in alone:
        if cl.cluster[i] == i and i not in cl.members:  # (in no cluster of others)
            plan = _plan_cluster(view, [i], sum_to, deadness, alone=True)
            if plan is not None:
                view.fuse(**plan)
    shapes = {src[0] for b in bgas for src in nodes[b].inputs if src[0] != "feed"}
    for b in bgas:  # the shape arithmetic no fused node reads any longer
        view.drop_if_unused(b)
    for j in shapes:  # (and the Shapes it read, where a fused node reads their inputs)
        if nodes[j].op.type == "Shape":
            view.drop_if_unused(j)


_CONCAT = True  # False: joins stay ConcatV2 nodes, their clusters apart (A/B)


def _merge_concatenated(view, cl, eligible: list) -> None:
    """Clusters whose values one ConcatV2 joins become one (an LSTM cell's backward
    pass: three gate gradients from its main cluster, the output gate's SigmoidGrad
    from a cluster of its own, which shares no edge with it), so that
    `fuse_concat_outputs` can give the join to one node: one program, one call, and
    the joined array written by its loop.  Only parts of one dtype and one shape as
    far as the graph knows it ([?,128] each: a program of values of one shape
    compiles, fused_elementwise_jit, where one of parts of two shapes would not), and
    not where the clusters' union would close a cycle (either reaching the other
    through nodes outside).  On the CPU: the GPU's programs (fused_elementwise_gpu)
    take values of one shape, broadcast."""
    nodes = view.nodes
    for i in cl.order:
        node = nodes[i]
        if node.op.type != "ConcatV2":
            continue
        srcs = [s for s in node.inputs[:-1] if s[0] != "feed"]
        if len(srcs) < len(node.inputs) - 1 or not all(eligible[j] for j, _ in srcs):
            continue
        parts = [nodes[j].op._outputs[k] for j, k in srcs]
        shape, dtype = parts[0].shape, parts[0].dtype
        if shape.ndims is None or any(t.dtype != dtype or t.shape != shape for t in parts):
            continue
        head = srcs[0][0]
        for j, _k in srcs[1:]:
            a, b = cl.cluster[head], cl.cluster[j]
            if a == b or not _small_enough(nodes, cl.group(a) + cl.group(b)):
                continue
            if cl._closes_cycle(a, b, None) or cl._closes_cycle(b, a, None):
                continue
            cl.try_merge(head, j)


# A merged program's loop must still vectorize: two LSTM cells' forward programs joined
# (a bidirectional RNN's last outputs: ten Sigmoids and Tanhs inlined, 26 arrays) made a
# loop LLVM left scalar, 940 us a [128,128] call against ~50 us for each cell's own;
# one cell's (five) and the backward pass's 28 instructions of arithmetic vectorize.
_MERGED_MAX_INLINE = 5
_MERGED_MAX_MEMBERS = 48


def _small_enough(nodes, members: list) -> bool:
    inline = sum(1 for m in members if nodes[m].op.type in _jit._INLINE32)
    return inline <= _MERGED_MAX_INLINE and len(members) <= _MERGED_MAX_MEMBERS


def fuse_concat_outputs(view) -> None:
    """A ConcatV2 of values that only it reads, all outputs of one `_FusedElementwise`
    on the CPU, becomes that node's first output (attr `concat`): the compiled loop
    writes the joined array itself (`fused_elementwise_jit._source`) and the ConcatV2's
    copy of them, ~20-35 us a [128,512] join of an LSTM cell's gate gradients, and its
    trip through the interpreter are gone.  The fused node takes the ConcatV2's name
    and place (its errors are ConcatV2's, its outputs after the first the program's
    others).  Where values may be dead (a dynamic_rnn's loop body), only where the
    join is dead exactly when the fused node is: its axis (a Const waiting for the
    frame's pivot) and control edges add no source of deadness (`_Deadness`)."""
    nodes = view.nodes
    if not _CONCAT:
        return
    deadness = _Deadness(view, _Clusters(view).order) if view.has_control_flow() else None
    for i, node in enumerate(nodes):
        if node.op.type != "ConcatV2" or not view.available(i):
            continue
        if node.device.device_type != "CPU":
            continue
        *values, axis_src = node.inputs
        f = values[0][0]
        if f == "feed" or axis_src[0] == "feed" or not view.available(f):
            continue
        fused = nodes[f]
        if fused.op.type != "_FusedElementwise" or fused.op._attrs.get("concat"):
            continue
        if fused.op._attrs["T"] != node.op._attrs["T"]:
            continue
        ks = [k for j, k in values if j == f]
        if len(ks) != len(values) or len(set(ks)) != len(ks):
            continue
        fetched = {tuple(fe) for fe in view.partition.fetches if fe[0] == f}
        if (f, None) in fetched or any((f, k) in fetched for k in ks):
            continue  # (a fetched part: a value of its own)
        reads = [nodes[u].inputs[slot][1] for u, slot in view.consumers(f)]
        if any(reads.count(k) != 1 for k in ks):  # (the ConcatV2's read alone)
            continue
        axis = graph.constant_value(nodes[axis_src[0]].op._outputs[axis_src[1]])
        if axis is None or np.ndim(axis) != 0:
            continue
        if deadness is not None and deadness.node[i] != deadness.node[f]:
            continue  # (the join's own sources: its inputs' and control edges')
        attrs = dict(fused.op._attrs)
        results = list(attrs["results"])
        rest = [k for k in range(len(results)) if k not in ks]
        attrs["results"] = [results[k] for k in ks] + [results[k] for k in rest]
        attrs["M"] = len(rest) + 1
        attrs["concat"] = [int(axis), len(ks)]
        view.fuse(
            into=i,
            op_type="_FusedElementwise",
            attrs=attrs,
            inputs=list(fused.inputs),
            absorbed=[f],
            outputs=[(f, k) for k in rest],
        )
        view.drop_if_unused(axis_src[0])


_SPLITS = True  # False: Splits stay nodes of their own (A/B)


def fuse_split_inputs(view) -> None:
    """A Split or SplitV along the last axis whose pieces only one CPU `_FusedElementwise`
    reads becomes part of it (attr `columns`): the fused node takes the split array in
    each piece's place and cuts the piece itself (a view, as the Split's output was);
    a row loop reads each piece's row from the array in place
    (`fused_elementwise_jit._source`), other forms copy it as they copied the Split's
    view.  An LSTM cell's gates (the Split of its product) and its backward pass's
    state gradient (the SplitV of the concatenation's gradient): the Split's trip
    through the interpreter, its Consts', and the gates' copies are gone.

    Only where the Split cannot fail at run time (its axis a constant, the array's rank
    and its size along the axis known, the sizes constant and valid: its values are
    then those pieces, always).  Where values may be dead (a dynamic_rnn's loop body, a
    cond's branch), only where the fused node, reading the array in the pieces' place
    and waiting for the Split's control edges, is dead exactly when it was
    (`_dead_alike`: the Split's Consts, waiting for the frame's pivot, add no source of
    their own); the Split and the node it joins read each other, so are in one frame.
    A piece nothing reads is not cut.  A Split whose pieces a while loop also pushes for
    its gradient (StackPushV2: a dynamic_rnn's gate the gradient reads for its shape)
    stays, for the pushes; the program reads its pieces from the array all the same (no
    longer waiting for the Split, which only its pushes read)."""
    nodes = view.nodes
    if not _SPLITS:
        return
    may_be_dead = view.has_control_flow()
    for i, node in enumerate(nodes):
        op = node.op
        if op.type not in ("Split", "SplitV") or not view.available(i):
            continue
        if node.device.device_type != "CPU":
            continue
        cut = _split_bounds(nodes, node)
        if cut is None:
            continue
        value_src, const_srcs, bounds, width = cut
        users = view.consumers(i)
        # (a piece a loop pushes for its gradient as well: the Split stays for the push)
        pushed = [(u, slot) for u, slot in users if nodes[u].op.type == "StackPushV2"]
        users = [(u, slot) for u, slot in users if nodes[u].op.type != "StackPushV2"]
        fused = {u for u, _slot in users}
        if len(fused) != 1:
            continue
        f = fused.pop()
        target = nodes[f]
        if target.op.type != "_FusedElementwise" or not view.available(f):
            continue
        if target.device is not node.device or target.op._attrs["T"] != op._attrs["T"]:
            continue
        n = target.op._attrs["N"]
        if any(slot >= n for _u, slot in users):
            continue  # (a SumTo target: read for its shape, kept a value of its own)
        if not pushed and any(fe[0] == i for fe in view.partition.fetches):
            continue
        attrs = dict(target.op._attrs)
        columns = list(attrs.get("columns") or ())
        inputs = list(target.inputs)
        for _u, slot in users:
            k = inputs[slot][1]
            inputs[slot] = value_src
            columns += [slot, bounds[k], bounds[k + 1], width]
        waits = list(target.controls) if pushed else [*target.controls, *node.controls]
        absorbed = [] if pushed else [i]
        if may_be_dead and not _dead_alike(view, [f], inputs, waits, absorbed=absorbed):
            continue
        attrs["columns"] = columns
        view.fuse(
            into=f, op_type="_FusedElementwise", attrs=attrs, inputs=inputs, absorbed=absorbed
        )
        for src in const_srcs if not pushed else ():
            view.drop_if_unused(src[0])


def _split_bounds(nodes, node):
    """(the split array's source, the Consts' sources, the pieces' bounds along the
    last axis, its size) of a Split or SplitV that cuts along its array's last axis
    with every bound known and valid, or None."""
    op = node.op
    if op.type == "Split":
        dim_src, value_src = node.inputs
        const_srcs = [dim_src]
    else:
        value_src, sizes_src, dim_src = node.inputs
        const_srcs = [sizes_src, dim_src]
    if any(src[0] == "feed" for src in const_srcs):
        return None
    value = op.inputs[1] if op.type == "Split" else op.inputs[0]
    rank = value.shape.ndims
    if rank is None or rank < 2:
        return None
    width = value.shape.as_list()[-1]
    axis = graph.constant_value(nodes[dim_src[0]].op._outputs[dim_src[1]])
    if width is None or axis is None or np.size(axis) != 1:
        return None
    axis = int(np.reshape(axis, ()))
    if not -rank <= axis < rank or axis % rank != rank - 1:
        return None
    n = op._attrs["num_split"]
    if op.type == "Split":
        if n < 1 or width % n:
            return None
        sizes = [width // n] * n
    else:
        sizes = graph.constant_value(nodes[sizes_src[0]].op._outputs[sizes_src[1]])
        if sizes is None or np.ndim(sizes) != 1 or np.size(sizes) != n:
            return None
        sizes = [int(v) for v in np.reshape(sizes, -1)]
        if any(v < -1 for v in sizes) or sizes.count(-1) > 1:
            return None
        total = sum(v for v in sizes if v != -1)
        if (total > width) if -1 in sizes else (total != width):
            return None
        sizes = [width - total if v == -1 else v for v in sizes]
    bounds = [0]
    for v in sizes:
        bounds.append(bounds[-1] + v)
    return value_src, const_srcs, bounds, width


_BIAS_GRADS = True  # False: BiasAddGrads of joins stay nodes of their own (A/B)


def fuse_bias_add_grad(view) -> None:
    """A BiasAddGrad of a CPU `_FusedElementwise`'s join (`fuse_concat_outputs`: an LSTM
    cell's gate gradients, [batch, 4 * units]) becomes that node's last output (attr
    `bias_grad`): the compiled row loop adds each row of the join into column sums as
    it writes it, in the order TF's reduction takes for the array (`_with_bias_grad`
    checks when that is its order, else calls the kernel's function), and the
    BiasAddGrad's trip through the interpreter and its pass over the join are gone.
    Only for a join of known rank 2 (both data formats' channel axis then its last),
    float32 or float64.  Where values may be dead (the gradient loop of a dynamic_rnn),
    only where the BiasAddGrad is dead exactly when the fused node is and the node,
    waiting for its control edges too, stays so (`_dead_alike`); it reads the node, so
    is in its frame."""
    nodes = view.nodes
    if not _BIAS_GRADS:
        return
    may_be_dead = view.has_control_flow()
    for i, node in enumerate(nodes):
        op = node.op
        if op.type != "BiasAddGrad" or not view.available(i):
            continue
        if node.device.device_type != "CPU":
            continue
        (src,) = node.inputs
        f = src[0]
        if f == "feed" or src[1] != 0 or not view.available(f):
            continue
        fused = nodes[f]
        attrs = dict(fused.op._attrs)
        if fused.op.type != "_FusedElementwise" or not attrs.get("concat"):
            continue
        if attrs.get("bias_grad") or fused.device is not node.device:
            continue
        if attrs["T"] not in (_F32, _F64) or op._attrs["T"] != attrs["T"]:
            continue
        if op.inputs[0].shape.ndims != 2:
            continue
        if may_be_dead and not _dead_alike(
            view, [f, i], list(fused.inputs), [*fused.controls, *node.controls], absorbed=[i]
        ):
            continue
        attrs["bias_grad"] = 1
        attrs["M"] = attrs["M"] + 1
        view.fuse(
            into=f,
            op_type="_FusedElementwise",
            attrs=attrs,
            inputs=list(fused.inputs),
            absorbed=[i],
            outputs=[(i, 0)],
        )


def _dead_alike(view, keep: list, inputs: list, controls: list, absorbed: list) -> bool:
    """Where values may be dead: whether a node fused from nodes `keep` and `absorbed`
    (their outputs now its own), reading `inputs` and waiting for `controls`, is dead
    exactly when each node of `keep` was (the module's note: every output dead when
    any input or control edge is), and whether it may wait that way.  In a partition
    that receives from another, a control edge an absorbed node brings along is refused
    (the fused node's other outputs would wait for it: a value received may wait for
    them, through the other partition); an ordering edge that would close a cycle in
    this one `view.fuse` replaces by what it waited for."""
    dead = view.deadness()
    want = dead.node[keep[0]]
    if any(dead.node[k] != want for k in keep):
        return False
    got = set()
    for src in inputs:
        got |= dead.value(src)
    for c in controls:
        got |= dead.node[c]
    if got != want:
        return False
    if any(view.nodes[a].controls for a in absorbed) and _receives(view):
        return False
    return True


def _receives(view) -> bool:
    """Whether the partition holds a _Recv (values from another partition)."""
    return any(n.op.type in _RECVS for n in view.nodes)


_RECVS = frozenset(["_Recv", "_HostRecv"])


def mark_shape_only_outputs(view) -> None:
    """Outputs of a CPU `_FusedElementwise` whose values nothing reads, only their shapes
    (attr `shape_only`): each is a zero-stride view of its shape, never written.

    An LSTM cell's forward program wrote nine [batch, units] arrays, two of them (the
    products c * f and i * j) only for the backward program's SumTo targets, which
    read their shapes (`_shape_source`).  Only where every reader of the output takes
    its shape: a fused node's `shape_of` input or a Shape node, no fetch, no Send; and
    not for a node with a join (`concat`) or whose every output would be one."""
    nodes = view.nodes
    for i, node in enumerate(nodes):
        op = node.op
        if op.type != "_FusedElementwise" or not view.available(i):
            continue
        if node.device.device_type != "CPU" or op._attrs.get("concat"):
            continue
        fetched = {fe[1] for fe in view.partition.fetches if fe[0] == i}
        if None in fetched:
            continue
        readers: dict[int, bool] = {}  # output -> whether only its shape is read
        for u, slot in view.consumers(i):
            k = nodes[u].inputs[slot][1]
            readers[k] = readers.get(k, True) and _reads_shape(nodes[u], slot)
        only = sorted(k for k, shape in readers.items() if shape and k not in fetched)
        if only and len(only) < len(op._outputs):
            op._attrs["shape_only"] = only


def _reads_shape(node, slot: int) -> bool:
    """Whether `node` reads its input `slot` for the shape alone."""
    op = node.op
    if op.type == "Shape":
        return True
    if op.type != "_FusedElementwise":
        return False
    k = slot - op._attrs["N"]
    flags = list(op._attrs.get("shape_of") or ())
    return 0 <= k < len(flags) and bool(flags[k])


def _open_gates(view, eligible: list, deadness) -> None:
    """Drop gate_gradients' tf.tuple gates that only order element-wise nodes.

    `tf.tuple(grads)` makes a NoOp waiting for every gradient's producer and an
    Identity of each gradient waiting for the NoOp.  A cluster holding a producer and
    its Identity would wait for itself through the NoOp, so a Mul's two gradients,
    their Identities and what reads them stayed apart (an LSTM cell's backward pass in
    eight fused nodes).  Where the NoOp waits only for element-wise nodes and only
    element-wise nodes wait for it, it orders pure computations and changes no value;
    unless something that writes a variable is upstream of it (then the Identities'
    readers may rely on the wait to see the write), its edges go and the NoOp with
    them.  Where values may be dead (`deadness` not None) a control edge carries
    deadness: a gate goes only when each node waiting for it is dead whenever the
    gate would be anyway (a cell's gradients inside a while loop)."""
    nodes = view.nodes
    waiting: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        for c in node.controls:
            if nodes[c].op.type == "NoOp":
                waiting.setdefault(c, []).append(i)
    after_writes = None
    for g, users in waiting.items():
        gate = nodes[g]
        if gate.inputs or not gate.controls or not view.available(g) or g in view._fetched:
            continue
        if not all(eligible[u] for u in users) or not all(eligible[c] for c in gate.controls):
            continue
        if after_writes is None:
            writers = {
                w
                for w, node in enumerate(nodes)
                if any(arg.is_ref for arg in node.op.op_def.inputs)
                or node.op.type.startswith("Resource")
            }
            # (Once for all the gates: the edges dropped below leave it as it is, since
            # they go out of gates no writer is upstream of, on no path from a writer.)
            after_writes = view.waiting_for_any(writers)
        if g in after_writes:
            continue
        if deadness is not None and not all(
            deadness.node[g] <= deadness.without_control(u, g) for u in users
        ):
            continue
        for u in users:
            view.drop_control(u, g)
        view.drop_if_unused(g)


def _sum_to_patterns(view, device) -> dict:
    """{Reshape node: (its Sum, the BroadcastGradientArgs)} for each gradient reduced to
    an input's shape (gradient_ops.broadcast_reduce) whose Sum feeds only the Reshape."""
    nodes = view.nodes
    found = {}
    for r, node in enumerate(nodes):
        if node.op.type != "Reshape" or node.device is not device or not view.available(r):
            continue
        (si, so), shape_src = node.inputs
        if si == "feed" or so != 0 or shape_src[0] == "feed" or view.reads_ref(r):
            continue
        sum_node = nodes[si]
        if sum_node.op.type != "Sum" or sum_node.op._attrs.get("keep_dims"):
            continue
        if view.sole_consumer(si) != r or not view.available(si) or view.reads_ref(si):
            continue
        (g_src, (b, k)) = sum_node.inputs
        if b == "feed" or nodes[b].op.type != "BroadcastGradientArgs":
            continue
        if tuple(nodes[b].inputs[k]) != tuple(shape_src):
            continue  # reshaped to some other shape than the reduced input's
        t = node.op._attrs.get("T")
        if t not in _FLOATS.allowed or sum_node.op._attrs.get("T") != t:
            continue
        if g_src[0] != "feed" and nodes[g_src[0]].op._outputs[g_src[1]].dtype != t:
            continue
        found[r] = (si, b)
    return found


def _worth_alone(view, i: int) -> bool:
    """Whether node i would fuse alone (`_ALONE`): programs compile here, on its CPU."""
    node = view.nodes[i]
    op = node.op
    if op._attrs.get("T") not in _ALONE.get(op.type, ()) or node.device.device_type != "CPU":
        return False
    shape = op._outputs[0].shape
    if shape.ndims is None:
        return False
    known = math.prod(d for d in shape.as_list() if d is not None)
    if op.type == "Sigmoid" and not shape.is_fully_defined():
        # TF's sigmoid costs ~25 NumPy passes unfused; its program compiles from
        # _jit._MIN_ELEMENTS elements, so a [?, 10] Sigmoid may well be worth it
        known = max(known, _ALONE_MIN)
    return known >= _ALONE_MIN and _jit.may_compile()


def _plan_cluster(view, members: list[int], sum_to: dict, deadness, alone: bool = False):
    """The arguments of `view.fuse` for one cluster (members in topological order), or
    None when there is nothing to gain or it is not safe (a dead-value partition
    (`deadness` not None) where some output could be dead when another is not).  A
    cluster of one node only `alone` (`_worth_alone`)."""
    nodes = view.nodes
    users = view._consumers
    inside = set(members)
    hidden = {sum_to[m][0] for m in members if m in sum_to}  # Sums inside their SumTo
    shown = [m for m in members if m not in hidden]
    if len(members) < 2 and not alone:
        return None
    fetched = view._fetched
    outputs = [m for m in shown if m in fetched or any(u not in inside for u, _ in users[m])]
    if not outputs:
        return None

    def operand_sources(m):  # (data sources, shape source or None) of an instruction
        if m in sum_to:
            return [nodes[sum_to[m][0]].inputs[0]], nodes[m].inputs[1]
        return nodes[m].inputs, None

    # Const operands read only by the cluster become literals.
    literals: dict[int, int] = {}  # const node -> literal index
    inputs: list = []  # external sources of T values, each once
    input_index: dict = {}
    shape_inputs: list = []  # the shapes SumTo instructions reduce to
    for m in shown:
        srcs, shape_src = operand_sources(m)
        for src in srcs:
            j = src[0]
            if j != "feed" and j in inside:
                continue
            if j != "feed" and j not in literals and _literal(view, j, inside):
                literals[j] = len(literals)
            if (j == "feed" or j not in literals) and tuple(src) not in input_index:
                input_index[tuple(src)] = len(inputs)
                inputs.append(tuple(src))
        if shape_src is not None:
            shape_src = _shape_source(view, shape_src)
            if shape_src not in shape_inputs:
                shape_inputs.append(shape_src)
    if deadness is not None and not deadness.same(
        members, outputs, sum_to, inside, literals, inputs + [_real(src) for src in shape_inputs]
    ):
        return None
    n, n_lit = len(inputs), len(literals)
    index_of = {m: j for j, m in enumerate(shown)}
    program, operands, starts, names = [], [], [], []
    for m in shown:
        starts.append(len(operands))
        program.append("SumTo" if m in sum_to else _program_type(nodes[m].op))
        names.append(nodes[m].op.name)
        srcs, shape_src = operand_sources(m)
        for src in srcs:
            j = src[0]
            if j != "feed" and j in inside:
                operands.append(n + n_lit + index_of[j])
            elif j != "feed" and j in literals:
                operands.append(n + literals[j])
            else:
                operands.append(input_index[tuple(src)])
        if shape_src is not None:
            operands.append(-1 - shape_inputs.index(_shape_source(view, shape_src)))
    starts.append(len(operands))
    # The fused node takes the place (and name) of the last output; the others follow it.
    into = outputs[-1]
    extra = outputs[:-1]
    results = [index_of[into]] + [index_of[m] for m in extra]
    attrs = {
        "T": nodes[into].op._attrs["T"],
        "N": n,
        "M": len(results),
        "Tshapes": [_src_dtype(view, src) for src in shape_inputs],
        "shape_of": [int(src[0] == "shape_of") for src in shape_inputs],
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
        "inputs": inputs + [_real(src) for src in shape_inputs],
        "absorbed": absorbed,
        "outputs": [(m, 0) for m in extra],
    }


def _program_type(op) -> str:
    """The instruction an element-wise node becomes (its op type; a _SelectZero that
    zeroes where the condition holds, "_SelectZeroThen")."""
    if op.type == "_SelectZero" and op._attrs.get("zero_then"):
        return "_SelectZeroThen"
    return op.type


def _shape_source(view, src) -> tuple:
    """A SumTo target's source: ("shape_of", x) when `src` is the output of a Shape of
    x on a CPU device (the fused node reads x's shape itself: no Shape node a step,
    eight per LSTM cell's backward pass), else `src` as a tuple."""
    j = src[0]
    if j == "feed" or src[1] != 0:
        return tuple(src)
    node = view.nodes[j]
    if node.op.type != "Shape" or node.device.device_type != "CPU" or node.controls:
        return tuple(src)
    x = tuple(node.inputs[0])
    if x[0] == "feed" or view.nodes[x[0]].device is not node.device or view.reads_ref(j):
        return tuple(src)
    if view.nodes[x[0]].op._outputs[x[1]]._is_ref:
        return tuple(src)  # (a variable's reference: read it through Shape as before)
    return ("shape_of", x)


def _real(src) -> tuple:
    """The partition's source behind a `_shape_source`."""
    return src[1] if src[0] == "shape_of" else src


def _src_dtype(view, src):
    j, k = src[1] if src[0] == "shape_of" else src
    return view.nodes[j].op._outputs[k].dtype


def _literal(view, j: int, inside: set) -> bool:
    """Whether node j is a small Const that only the cluster reads."""
    op = view.nodes[j].op
    if op.type != "Const" or j in view._fetched:
        return False
    value = op._attrs.get("value")
    if value is None or np.size(value) > _LITERAL_MAX_ELEMENTS:
        return False
    if np.asarray(value).dtype == np.bool_:  # (a Select's condition stays a bool input)
        return False
    return all(u in inside for u, _ in view._consumers[j])


class _Deadness(Deadness):
    """`asyncflow.deadness.Deadness`, asked whether a cluster may fuse.

    A fused node is dead when any of its inputs or control edges is: it keeps each
    output's deadness when every output's set equals the union of the cluster's
    (`same`).  An LSTM cell inside a while loop depends on the loop's Switches only,
    so its gates fuse though no output reads every input."""

    def __init__(self, view, order: list[int]):
        super().__init__(view.nodes, order)

    def same(self, members, outputs, sum_to, inside, literals, inputs) -> bool:
        """Whether every output of the cluster is dead exactly when the fused node
        (reading `inputs`, waiting for every member's and literal's control edges)
        would be."""
        nodes = self.nodes
        fused = set()
        for src in inputs:
            fused |= self.value(src)
        own: dict[int, set] = {}
        for m in members:  # in topological order
            node = nodes[m]
            d = set()
            waits = list(node.controls)
            for s in node.inputs:
                j = s[0]
                if j != "feed" and j in inside:
                    d |= own[j]
                elif j != "feed" and j in literals:
                    waits.extend(nodes[j].controls)
                else:
                    d |= self.value(s)
            if m in sum_to:  # the Sum it replaces waited for both shapes' arithmetic
                d |= self.node[sum_to[m][1]]
            for c in waits:
                d |= self.node[c]
                fused |= self.node[c]
            own[m] = d
        return all(own[o] == fused for o in outputs)
