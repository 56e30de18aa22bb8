"""`_FusedElementwise` on a GPU: a cluster's program as one CuPy kernel (`cupy.fuse`).

The graph pass `fused_elementwise.fuse_elementwise` groups element-wise nodes of one
device into a program; on the CPU its kernel runs the program as ufunc calls into
reused buffers.  On a GPU each ufunc call is a kernel launch (about 30 us of host time
each on an H100 host, more than the arithmetic of an MLP's activations), so here the
program is composed into one Python function of its operands and compiled by
`xp.fuse` into one ElementwiseKernel: a BiasAdd+Relu, a ReluGrad, an LSTM cell's gates
and their gradients each become one launch.

Per combination of input shapes (cached, as the CPU schedule is) the program is cut
into *segments*: the instructions between two reductions (a "SumTo" that really sums:
a gradient reduced over broadcast axes) form one fused kernel; each reduction is one
`xp.sum`.  A segment's outputs are the values that later steps or the node's outputs
need; an ElementwiseKernel gives every output the broadcast shape of all its inputs,
so a segment whose outputs have other shapes runs its instructions one by one.

Numerics: each op is the same ufuncs in the same order as the CPU program
(fused_elementwise.ELEMENTWISE and ops.elementwise), with the same T-typed constants;
inside one CUDA kernel the intermediate values keep dtype T as separate launches do
(NVRTC may contract a multiply and an add into an FMA: the last bit may differ).
float16 programs keep float16 between ops as the CPU's do (each ufunc computes in
float32 and rounds, in NumPy as in CuPy's float16 type), and the activations and their
gradients that ops.elementwise computes in float32 for float16 (rounding once) do so
inside the kernel too.  Programs with an op missing from `GPU_FORMS` run the generic
kernel.

Shape errors are the program's own (`_Program.schedule`), raised before any launch.

The element-wise ops that are several ufuncs each (ReluGrad, Sigmoid and its gradient,
TanhGrad, Softplus and its gradient, SquaredDifference, Rsqrt) get a GPU kernel of
their own from the same forms, for the nodes no cluster took: one launch each (a CNN's
ReluGrad between two MaxPoolGrads, a lone Sigmoid).  Inputs other than float32/64 of
one shape go to the op's generic kernel (its checks, its messages).
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import fused_elementwise as _fe
from asyncflow.ops.math_helpers import to_host
from asyncflow.registry import get_op_def

__all__ = ["GPU_FORMS"]


def _unary(name):
    return lambda xp, one, zero: lambda x: getattr(xp, name)(x)


def _binary(name):
    return lambda xp, one, zero: lambda x, y: getattr(xp, name)(x, y)


def _add_n(xp, one, zero):
    def add_n(*xs):
        out = xp.add(xs[0], xs[1])
        for x in xs[2:]:
            out = xp.add(out, x)
        return out

    return add_n


# op type -> form(xp, one, zero) -> f(*operands): the op's value from ufuncs alone (what
# a fused kernel can hold), in the order its CPU rule computes it; one and zero are T's.
GPU_FORMS = {
    **{
        op: _unary(name)
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
    **{
        op: _binary(name)
        for op, name in {
            "Add": "add",
            "AddV2": "add",
            "BiasAdd": "add",
            "Sub": "subtract",
            "Mul": "multiply",
            "RealDiv": "true_divide",
            "Maximum": "maximum",
            "Minimum": "minimum",
            "Pow": "power",
        }.items()
    },
    "Square": lambda xp, one, zero: lambda x: xp.multiply(x, x),
    "Rsqrt": lambda xp, one, zero: lambda x: xp.reciprocal(xp.sqrt(x)),
    "Relu": lambda xp, one, zero: lambda x: xp.maximum(x, zero),
    # TF's ReluGradFunctor: gradients * (features > 0)
    "ReluGrad": lambda xp, one, zero: lambda g, x: xp.multiply(g, xp.greater(x, zero)),
    # 1 / (1 + exp(-x))
    "Sigmoid": lambda xp, one, zero: lambda x: xp.reciprocal(xp.add(xp.exp(xp.negative(x)), one)),
    # max(x, 0) + log1p(exp(-|x|))
    "Softplus": lambda xp, one, zero: (
        lambda x: xp.add(xp.maximum(x, zero), xp.log1p(xp.exp(xp.negative(xp.absolute(x)))))
    ),
    "SquaredDifference": lambda xp, one, zero: lambda x, y: _square(xp, xp.subtract(x, y)),
    # (1 - y) * y * dy
    "SigmoidGrad": lambda xp, one, zero: (
        lambda y, dy: xp.multiply(xp.multiply(xp.subtract(one, y), y), dy)
    ),
    # (1 - y * y) * dy
    "TanhGrad": lambda xp, one, zero: (
        lambda y, dy: xp.multiply(xp.subtract(one, xp.multiply(y, y)), dy)
    ),
    # g / (exp(-x) + 1)
    "SoftplusGrad": lambda xp, one, zero: (
        lambda g, x: xp.true_divide(g, xp.add(xp.exp(xp.negative(x)), one))
    ),
    "AddN": _add_n,
}

_DTYPES = frozenset([np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)])
# ops.elementwise computes these in float32 for float16 operands and rounds once.
_WIDENED = frozenset(["Sigmoid", "SigmoidGrad", "TanhGrad", "Softplus", "SoftplusGrad"])


def _widened(xp, op_type: str):
    """op_type's form over float32 copies of float16 operands, rounded to float16."""
    f = GPU_FORMS[op_type](xp, np.float32(1), np.float32(0))
    return lambda *xs: f(*(x.astype(np.float32) for x in xs)).astype(np.float16)


def _square(xp, d):
    return xp.multiply(d, d)


@_fe.FusedElementwise.kernel("GPU", host_memory=("shapes",))
async def _fused_elementwise_gpu(ctx, *args):
    state = ctx.kernel_state
    gpu = state.get("gpu_program")
    if gpu is None:
        gpu = state["gpu_program"] = _GpuProgram(ctx.op)
    if not gpu.supported:
        return await _fe._fused_elementwise(ctx, *args)
    xp = ctx.xp
    program = gpu.program
    xs = args[: program.n_inputs]
    key = tuple(x.shape for x in xs)
    if len(args) > len(xs):  # SumTo targets (host memory)
        key += tuple(tuple(int(d) for d in to_host(xp, v)) for v in args[len(xs) :])
    if key in gpu.plans:
        plan = gpu.plans[key]
    else:
        plan = gpu.plan(xp, xs, key)
    if plan is None:
        return await _fe._fused_elementwise(ctx, *args)
    out = await ctx.device.compute(gpu.run, xp, plan, xs)
    return out if len(out) > 1 else out[0]


class _GpuProgram:
    """A node's program with its GPU plans (one per input shapes)."""

    def __init__(self, op):
        self.program = _fe._Program(op)
        p = self.program
        self.supported = p.dtype in _DTYPES and all(
            t in GPU_FORMS or t in ("Identity", "SumTo") for t in p.types
        )
        self.plans: dict = {}
        self._forms: dict = {}  # xp -> the instructions' functions on it

    def forms(self, xp):
        got = self._forms.get(xp)
        if got is None:
            t = self.program.dtype.type
            half = t is np.float16
            got = self._forms[xp] = [
                (_widened(xp, k) if half and k in _WIDENED else GPU_FORMS[k](xp, t(1), t(0)))
                if k in GPU_FORMS
                else None
                for k in self.program.types
            ]
        return got

    def plan(self, xp, xs, key) -> list | None:
        """The steps for inputs of these shapes (cached under `key`): ("fused", kernel,
        operands, values), ("each", [(function, operands, value)]), ("sum", axes,
        target, operand, value), ("copy", operand, value); then ("results", values).

        Raises InvalidArgumentError for shapes an instruction's op rejects."""
        p = self.program
        p.schedule(xp, xs, key)  # the CPU schedule's checks and errors (cached there)
        n_fixed, targets = p.n_fixed, key[len(xs) :]
        shapes = [tuple(x.shape) for x in xs] + [v.shape for v in p.literals]
        rep = list(range(n_fixed))
        kinds: list[str] = []  # per instruction: "alias", "sum" or "map"
        for j, (rule, args) in enumerate(zip(p.rules, p.operands)):
            rep.append(n_fixed + j)
            if rule.shapes in ("alias", "sum_to"):
                g = args[0]
                target = shapes[g] if rule.shapes == "alias" else targets[-1 - args[1]]
                shapes.append(tuple(target))
                if tuple(target) == shapes[g]:
                    rep[-1] = rep[g]
                    kinds.append("alias")
                else:
                    kinds.append("sum")
            else:
                shapes.append(p._result_shape(j, rule, [shapes[a] for a in args]))
                kinds.append("map")
        results = [rep[r] for r in p.results]
        needed_after = _last_uses(p, rep, kinds, results)
        forms = self.forms(xp)
        steps: list = []
        segment: list[int] = []
        for j, kind in enumerate(kinds):
            if kind == "map":
                segment.append(j)
            elif kind == "sum":
                if segment:
                    steps.append(self._segment(xp, segment, rep, shapes, needed_after, forms))
                    segment = []
                g = rep[p.operands[j][0]]
                v = n_fixed + j
                steps.append(("sum", _sum_axes(shapes[g], shapes[v]), shapes[v], g, v))
        if segment:
            steps.append(self._segment(xp, segment, rep, shapes, needed_after, forms))
        steps.append(("results", results))
        if any(step is None for step in steps):
            steps = None  # the generic kernel runs it
        if len(self.plans) > 64:
            self.plans.clear()
        self.plans[key] = steps
        return steps

    def _segment(self, xp, members, rep, shapes, needed_after, forms):
        p = self.program
        n_fixed = p.n_fixed
        inside = {n_fixed + j for j in members}
        last = members[-1]
        operands: list[int] = []
        for j in members:
            for a in p.operands[j]:
                v = rep[a]
                if v not in inside and v not in operands:
                    operands.append(v)
        values = [n_fixed + j for j in members if needed_after[n_fixed + j] > last]
        arrays = [
            shapes[v] for v in operands if not (p.n_inputs <= v < n_fixed and shapes[v] == ())
        ]
        each = [(forms[j], tuple(rep[a] for a in p.operands[j]), n_fixed + j) for j in members]
        if not arrays:
            return None  # scalars only (no device array: CuPy would run it on the host)
        full = tuple(np.broadcast_shapes(*arrays))
        if not values or any(shapes[v] != full for v in values):
            return ("each", each)
        index = {v: k for k, v in enumerate(operands)}
        for k, j in enumerate(members):
            index[n_fixed + j] = len(operands) + k
        program = [(forms[j], tuple(index[rep[a]] for a in p.operands[j])) for j in members]
        outs = tuple(index[v] for v in values)

        def fused(*env):
            env = list(env)
            for f, args in program:
                env.append(f(*[env[a] for a in args]))
            return tuple(env[o] for o in outs)

        return ("fused", xp.fuse(kernel_name="asyncflow_fused")(fused), operands, values)

    def run(self, xp, steps, xs) -> tuple:
        p = self.program
        env: dict[int, object] = dict(enumerate(xs))
        lits = self._literals(xp)
        for k, v in enumerate(lits):
            env[p.n_inputs + k] = v
        for step in steps:
            kind = step[0]
            if kind == "fused":
                _, kernel, operands, values = step
                outs = kernel(*[env[v] for v in operands])
                env.update(zip(values, outs))
            elif kind == "each":
                for f, args, v in step[1]:
                    env[v] = f(*[env[a] for a in args])
            elif kind == "sum":
                _, axes, target, g, v = step
                env[v] = xp.sum(env[g], axis=axes, dtype=p.dtype).reshape(target)
            else:
                seen: set[int] = set()
                outs = []
                for v in step[1]:  # new arrays, distinct, never an input or a literal
                    value = env[v]
                    if v < p.n_fixed or id(value) in seen:
                        value = xp.array(value, dtype=p.dtype, copy=True)
                    seen.add(id(value))
                    outs.append(value)
                return tuple(outs)
        raise AssertionError("a plan ends with its results")

    def _literals(self, xp):
        got = self._forms.get(("literals", xp))
        if got is None:
            got = self._forms[("literals", xp)] = [
                self.program.dtype.type(v) if v.ndim == 0 else xp.asarray(v)
                for v in self.program.literals
            ]
        return got


def _last_uses(p, rep, kinds, results) -> dict:
    """value -> the last instruction reading it (len(kinds) for an output)."""
    last: dict[int, int] = {}
    for j, args in enumerate(p.operands):
        if kinds[j] == "alias":
            continue
        for a in args:
            if a >= 0:
                last[rep[a]] = j
    for r in results:
        last[r] = len(kinds)
    return {v: last.get(v, -1) for v in range(len(rep))}


def _sum_axes(shape: tuple, target: tuple) -> tuple:
    lead = len(shape) - len(target)
    return tuple(range(lead)) + tuple(
        lead + i for i, (t, d) in enumerate(zip(target, shape[lead:])) if t == 1 and d != 1
    )


_SINGLE_OPS = (
    "ReluGrad",
    "Sigmoid",
    "SigmoidGrad",
    "TanhGrad",
    "Softplus",
    "SoftplusGrad",
    "SquaredDifference",
    "Rsqrt",
)
_SINGLE: dict = {}  # (xp, op type, dtype) -> its fused kernel


def _register_single(op_type: str) -> None:
    op_def = get_op_def(op_type)
    generic = op_def.kernel_defs[None].fn

    @op_def.kernel("GPU")
    async def kernel(ctx, *xs):
        x0 = xs[0]
        dtype = x0.dtype
        if (
            dtype not in _DTYPES
            or not x0.size
            or any(x.dtype != dtype or x.shape != x0.shape for x in xs)
        ):
            return await generic(ctx, *xs)
        xp = ctx.xp
        key = (xp, op_type, dtype)
        fused = _SINGLE.get(key)
        if fused is None:
            form = GPU_FORMS[op_type](xp, dtype.type(1), dtype.type(0))
            fused = _SINGLE[key] = xp.fuse(kernel_name=f"asyncflow_{op_type}")(form)
        return await ctx.device.compute(fused, *xs)

    kernel.__name__ = kernel.__qualname__ = f"_{op_type.lower()}_gpu"


for _op_type in _SINGLE_OPS:
    _register_single(_op_type)
