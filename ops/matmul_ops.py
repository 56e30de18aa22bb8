"""MatMul and BatchMatMul/BatchMatMulV2: registration, kernels, gradients, `tf.matmul`.

Split out of `math_ops`, which imports this module (registering its ops) and re-exports
`matmul`, so `math_ops.matmul`, `tf.matmul` and `a @ b` (math_ops' operator table) are
unchanged.  Like `math_ops`, it takes its shared helpers from `math_helpers`.

Invariants:
- Kernels return exactly the declared dtype T (`_as_dtype`), as math_ops' kernels do.
- Shape and batch mismatches are ValueError at build time and TF's InvalidArgumentError
  ("Matrix size-incompatible: ...") at run time.
- BatchMatMul requires equal batch dimensions; BatchMatMulV2 broadcasts them, and its
  gradient sums over the broadcast dimensions.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.devices import host_pool
from asyncflow.kernel_api import NOT_INLINE, plain_context, template
from asyncflow.ops import blas
from asyncflow.ops import elementwise as _ew
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.manip_ops import concat_axis
from asyncflow.ops.math_helpers import (
    _as_dtype,
    _builder_scope,
    _convert_pair,
    _shape_str,
    quiet_errstate,
)
from asyncflow.registry import (
    FLOATING,
    NotDifferentiable,
    TypeConstraint,
    get_op_def,
    register_op,
)

__all__ = ["matmul"]

_MATMUL_TYPES = TypeConstraint(
    FLOATING.allowed | {dtypes.complex64, dtypes.complex128, dtypes.int32, dtypes.int64}
)


def _conj(x):
    """Conj of a complex tensor; real tensors pass through (`math_ops.conj` for Tensors)."""
    return _g.apply("Conj", x) if x.dtype.is_complex else x


# -- MatMul -----------------------------------------------------------------------------------


def _matmul_shape(op):
    for t in op.inputs:
        if t.shape.ndims is not None and t.shape.ndims != 2:
            # TF's C++ shape function's words (MatMul's WithRank(2))
            raise ValueError(f"Shape must be rank 2 but is rank {t.shape.ndims}")
    a = op.inputs[0].shape.with_rank(2)
    b = op.inputs[1].shape.with_rank(2)
    ta, tb = op._attr("transpose_a"), op._attr("transpose_b")
    m, k1 = (a[1], a[0]) if ta else (a[0], a[1])
    k2, n = (b[1], b[0]) if tb else (b[0], b[1])
    _merge_inner(k1, k2)
    return [tensor_shape.TensorShape([m, n])]


def _merge_inner(k1, k2) -> None:
    if not k1.is_compatible_with(k2):
        raise ValueError(f"Dimensions must be equal, but are {k1.value} and {k2.value}")


def _batch_matmul_shape(broadcast: bool):
    def shape_fn(op):
        a = op.inputs[0].shape.with_rank_at_least(2)
        b = op.inputs[1].shape.with_rank_at_least(2)
        if a.ndims is None or b.ndims is None:
            return [tensor_shape.unknown_shape()]
        adj_x, adj_y = op._attr("adj_x"), op._attr("adj_y")
        m, k1 = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
        k2, n = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
        _merge_inner(k1, k2)
        if broadcast:
            batch = tensor_shape.broadcast_shape(a[:-2], b[:-2])
        else:
            batch = a[:-2].merge_with(b[:-2])
        return [batch.concatenate([m, n])]

    return shape_fn


MatMul = register_op(
    "MatMul",
    inputs=["a: T", "b: T"],
    outputs=["product: T"],
    # grad_a/grad_b: TF 2.21's (set by its gradient graphs; no kernel reads them).
    attrs={
        "transpose_a": False,
        "transpose_b": False,
        "T": _MATMUL_TYPES,
        "grad_a": False,
        "grad_b": False,
    },
    shape_fn=_matmul_shape,
)


def _incompatible(a, b) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None,
        None,
        f"Matrix size-incompatible: In[0]: {_shape_str(a.shape)}, In[1]: {_shape_str(b.shape)}",
    )


def _operands(xp, ctx, a, b):
    """MatMul's inputs as matrices, checked, with its transpose attrs."""
    a, b = xp.asarray(a), xp.asarray(b)
    for i, m in enumerate((a, b)):
        if m.ndim != 2:
            raise errors.InvalidArgumentError(
                None, None, f"In[{i}] is not a matrix. Instead it has shape {_shape_str(m.shape)}"
            )
    ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
    if (a.shape[0] if ta else a.shape[1]) != (b.shape[1] if tb else b.shape[0]):
        raise _incompatible(a, b)
    return a, b, ta, tb


async def _product(ctx, xp, a, b, ta: bool, tb: bool):
    if xp is np and a.dtype == b.dtype and blas.available(a.dtype):
        # One gemm, split over the CPU budget's threads when large (ops/blas.py).  Its
        # cost hint: the flops, in the bytes the cost model's rates make them worth.
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        n = b.shape[0] if tb else b.shape[1]
        product = await ctx.compute(blas.matmul, a, b, ta, tb, cost=m * n * k / 5)
    else:
        product = await ctx.compute(xp.matmul, a.T if ta else a, b.T if tb else b)
    return _as_dtype(xp, product, ctx.attrs["T"])


@MatMul.kernel()
async def _matmul(ctx, a, b):
    xp = ctx.xp
    return await _product(ctx, xp, *_operands(xp, ctx, a, b))


class DeferredProduct:
    """A MatMul's product not computed yet, inside a fused kernel (_FusedMatMul and the
    gemm fusions of training_ops): the kernel computes it inside its own gemm."""

    __slots__ = ("a", "b", "trans_a", "trans_b", "alpha", "shape", "dtype")

    def __init__(self, a, b, trans_a: bool, trans_b: bool, alpha: float = 1.0):
        self.a, self.b, self.trans_a, self.trans_b = a, b, trans_a, trans_b
        self.alpha = alpha  # the product is alpha * op(a) @ op(b)
        m = a.shape[1] if trans_a else a.shape[0]
        n = b.shape[0] if trans_b else b.shape[1]
        self.shape = (m, n)
        self.dtype = a.dtype

    def scaled(self, factor: float) -> DeferredProduct:
        return DeferredProduct(self.a, self.b, self.trans_a, self.trans_b, self.alpha * factor)

    def materialize(self):
        out = np.matmul(self.a.T if self.trans_a else self.a, self.b.T if self.trans_b else self.b)
        if self.alpha != 1.0:
            out *= out.dtype.type(self.alpha)
        return out


async def matmul_deferred(ctx, a, b):
    """MatMul's kernel when its consumer fuses the product: checks, then defers."""
    a, b, ta, tb = _operands(np, ctx, a, b)
    product = DeferredProduct(a, b, ta, tb)
    m, n = product.shape
    if m * n < _DEFER_ELEMENTS or a.dtype != b.dtype or a.dtype != ctx.attrs["T"].np_dtype:
        # Small (a ctypes call costs more than it saves) or odd: compute it now; the
        # consumer's kernel takes an ordinary array as well.
        return await _product(ctx, np, a, b, ta, tb)
    return product


_DEFER_ELEMENTS = 4096


def _relu_of(x):
    return np.maximum(x, x.dtype.type(0))


def _gemm_relu(out, a, b, trans_a, trans_b, alpha):
    """out = relu(op(a) @ op(b) + out): on the pool's blocks while each is in cache
    where it runs them (blas.gemm_epilogue), else after the product."""
    if not blas.gemm_epilogue(out, a, b, trans_a, trans_b, alpha, 1.0, "relu"):
        blas.gemm_into(out, a, b, trans_a, trans_b, alpha, 1.0)
        np.maximum(out, out.dtype.type(0), out=out)  # while `out` is still in cache


def _gemm_sigmoid(out, a, b, trans_a, trans_b, alpha):
    """out = sigmoid(op(a) @ op(b) + out): the Sigmoid kernel's function (TF's), on the
    pool's blocks while each is in cache where it runs them (blas.gemm_sigmoid), else
    after the product."""
    if not blas.gemm_sigmoid(out, a, b, trans_a, trans_b, alpha, 1.0):
        blas.gemm_into(out, a, b, trans_a, trans_b, alpha, 1.0)
        if not blas.sigmoid_in_place(out):
            _ew.sigmoid(np, out, out)


def _activation(out, relu: bool, sigmoid: bool):
    if relu:
        return _relu_of(out)
    return _ew.sigmoid(np, out) if sigmoid else out


def _bias_fused_kernel(
    plain, product_pos: int, is_bias_add: bool, relu: bool = False, sigmoid: bool = False
):
    """AddV2/Add/BiasAdd whose input `product_pos` is a DeferredProduct: the output is
    the broadcast bias, then one gemm with beta=1 adds the product into it (and, with
    `relu` or `sigmoid`, the sole consumer's Relu or Sigmoid runs on it in place right
    after)."""

    async def add_into_gemm(ctx, x, y):
        p, bias = (x, y) if product_pos == 0 else (y, x)
        if type(p) is not DeferredProduct:
            out = await plain(ctx, x, y)
            return _activation(out, relu, sigmoid)
        bias = np.asarray(bias)
        shape = p.shape
        ok = bias.dtype == p.dtype and (
            bias.shape == (shape[1],) if is_bias_add else bias.ndim <= 2
        )
        if ok and not is_bias_add:
            try:
                ok = np.broadcast_shapes(shape, bias.shape) == shape
            except ValueError:
                ok = False
        if not ok:  # let the plain kernel judge (and word any error) on real values
            prod = p.materialize()
            out = await (plain(ctx, prod, bias) if product_pos == 0 else plain(ctx, bias, prod))
            return _activation(out, relu, sigmoid)
        out = host_pool.empty(shape, p.dtype)
        out[...] = bias
        if relu:
            await ctx.compute(_gemm_relu, out, p.a, p.b, p.trans_a, p.trans_b, p.alpha)
        elif sigmoid:
            await ctx.compute(_gemm_sigmoid, out, p.a, p.b, p.trans_a, p.trans_b, p.alpha)
        else:
            await ctx.compute(blas.gemm_into, out, p.a, p.b, p.trans_a, p.trans_b, p.alpha, 1.0)
        return out

    return add_into_gemm


# -- graph pass: x @ w + b (+ Relu) as one internal op -------------------------------------

FusedMatMul = register_op(
    "_FusedMatMul",
    inputs=["a: T", "b: T", "bias: T"],
    outputs=["product: T"],
    attrs={
        "T": FLOATING,
        "transpose_a": False,
        "transpose_b": False,
        "add_type": "BiasAdd",  # the op the pattern added with: BiasAdd, AddV2 or Add
        "bias_first": False,  # Add(bias, product) rather than Add(product, bias)
        "data_format": "NHWC",  # (BiasAdd's)
        "relu": False,  # a Relu alone after the sum
        "sigmoid": False,  # a Sigmoid alone after the sum (never with relu)
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedMatMul")  # introduced after the gradients were built


def _small_fused(a, b, bias, relu: bool, sigmoid: bool = False):
    out = np.matmul(a, b)
    out += bias
    if relu:
        np.maximum(out, out.dtype.type(0), out=out)
    elif sigmoid:
        _ew.sigmoid(np, out, out)
    return out


def _bias_fits(bias, m: int, n: int, is_bias_add: bool) -> bool:
    """Whether `bias` broadcasts onto an [m, n] product without growing it (as
    add_into_gemm checks, without np.broadcast_shapes' cost)."""
    shape = bias.shape
    if is_bias_add:
        return shape == (n,)
    if len(shape) == 1:
        return shape[0] in (n, 1)
    if len(shape) == 2:
        return shape[0] in (m, 1) and shape[1] in (n, 1)
    return not shape


@FusedMatMul.kernel("CPU")
async def _fused_matmul(ctx, a, b, bias):
    """The product accumulated by one gemm into the broadcast bias (and the Relu
    applied to the output while it is in cache); odd shapes or dtypes take the plain
    kernels, which also word any error.  A product too small to defer (a served
    request's few rows) is computed, biased and rectified in one call: the plain
    kernels' checks and dispatch cost several times its arithmetic."""
    attrs = ctx.attrs
    if type(a) is np.ndarray and type(b) is np.ndarray and type(bias) is np.ndarray:
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        if a.ndim == 2 and b.ndim == 2 and a.shape[0 if ta else 1] == b.shape[1 if tb else 0]:
            m, n = a.shape[1 if ta else 0], b.shape[0 if tb else 1]
            dtype = attrs["T"].np_dtype
            if (
                m * n < _DEFER_ELEMENTS
                and a.dtype == dtype
                and b.dtype == dtype
                and bias.dtype == dtype
                and _bias_fits(bias, m, n, attrs["add_type"] == "BiasAdd")
            ):
                return await ctx.compute(
                    _small_fused,
                    a.T if ta else a,
                    b.T if tb else b,
                    bias,
                    attrs["relu"],
                    attrs["sigmoid"],
                )
    key = (attrs["add_type"], attrs["bias_first"], attrs["relu"], attrs["sigmoid"])
    add = _ADD_KERNELS.get(key)
    if add is None:
        plain = get_op_def(key[0]).kernel_for("CPU").fn
        add = _ADD_KERNELS[key] = _bias_fused_kernel(
            plain, int(key[1]), key[0] == "BiasAdd", key[2], key[3]
        )
    product = await matmul_deferred(ctx, a, b)
    plain_ctx = plain_context(ctx)
    return await (add(plain_ctx, bias, product) if key[1] else add(plain_ctx, product, bias))


def _fused_matmul_inline(ctx):
    """The kernel's inline form (kernel_api): a product small enough for one call of
    `_small_fused` (as the kernel decides it), run now when the device would run it
    inline untimed; anything else is left to the kernel."""
    run_inline = getattr(ctx.device, "run_inline", None)
    attrs = ctx.attrs
    if run_inline is None or attrs["sigmoid"]:  # (a Sigmoid's: the kernel's small path)
        return None
    ta, tb, relu = attrs["transpose_a"], attrs["transpose_b"], attrs["relu"]
    dtype = attrs["T"].np_dtype
    is_bias_add = attrs["add_type"] == "BiasAdd"
    ndarray = np.ndarray

    def fused(a, b, bias):
        if type(a) is ndarray and type(b) is ndarray and type(bias) is ndarray:
            if a.ndim == 2 and b.ndim == 2 and a.shape[0 if ta else 1] == b.shape[1 if tb else 0]:
                m, n = a.shape[1 if ta else 0], b.shape[0 if tb else 1]
                if (
                    m * n < _DEFER_ELEMENTS
                    and a.dtype == dtype
                    and b.dtype == dtype
                    and bias.dtype == dtype
                    and _bias_fits(bias, m, n, is_bias_add)
                ):
                    return run_inline(
                        _small_fused, (a.T if ta else a, b.T if tb else b, bias, relu)
                    )
        return NOT_INLINE

    return fused


def _fused_matmul_direct(ctx, avals):
    """The kernel's direct form (kernel_api) for inputs of `avals`: the one call of
    `_small_fused` its inline form makes for them, or None where that form leaves them
    to the kernel."""
    if getattr(ctx.device, "settled_seconds", None) is None or len(avals) != 3:
        return None
    if ctx.attrs["sigmoid"]:  # (left to the kernel, as by the inline form)
        return None
    if any(v is None for v in avals):
        return None
    (sa, da), (sb, db), (sbias, dbias) = avals
    attrs = ctx.attrs
    ta, tb, relu = attrs["transpose_a"], attrs["transpose_b"], attrs["relu"]
    dtype = attrs["T"].np_dtype
    if len(sa) != 2 or len(sb) != 2 or sa[0 if ta else 1] != sb[1 if tb else 0]:
        return None
    m, n = sa[1 if ta else 0], sb[0 if tb else 1]
    if not (m * n < _DEFER_ELEMENTS and da == dtype and db == dtype and dbias == dtype):
        return None
    if not _bias_fits(template(sbias, dbias), m, n, attrs["add_type"] == "BiasAdd"):
        return None
    if ta or tb:

        def fn(a, b, bias):
            return _small_fused(a.T if ta else a, b.T if tb else b, bias, relu)

    else:

        def fn(a, b, bias):
            return _small_fused(a, b, bias, relu)

    args = (
        template(sa[::-1] if ta else sa, da),
        template(sb[::-1] if tb else sb, db),
        template(sbias, dbias),
        relu,
    )
    return fn, (_small_fused, args), [((m, n), np.dtype(dtype))]


_fused_matmul.inline = _fused_matmul_inline
_fused_matmul.direct = _fused_matmul_direct

_ADD_KERNELS: dict = {}


# A layer takes its Sigmoid into the product from this many outputs a row (its weights'
# static shape): a narrower one keeps the Sigmoid in the element-wise program after it.
_SIGMOID_MIN_N = 64
# False: a Sigmoid stays a node of its own (A/B: benchmarks/models/ab_inproc.py --attr
# asyncflow.ops.matmul_ops:_SIGMOID_EPILOGUE=False).
_SIGMOID_EPILOGUE = True


def _wide(view, weights, transpose_b: bool) -> bool:
    j, out = weights
    if j == "feed":
        return False
    shape = view.nodes[j].op.outputs[out].shape
    if shape.rank != 2:
        return False
    n = shape.dims[0 if transpose_b else 1].value
    return n is not None and n >= _SIGMOID_MIN_N


def _feeds_elementwise(view, r: int) -> bool:
    """Whether node r's output goes on to an element-wise node other than its own
    gradient (SigmoidGrad), past Identities: the element-wise fusion would take r into that node's
    program, one pass for both (a loss of the VAE's output, 1.1% of its step slower with
    the Sigmoid in the product), where in the product it costs a pass of its own."""
    from asyncflow.ops.fused_elementwise import ELEMENTWISE

    todo, seen = [r], {r}
    while todo:
        for c, _ in view.consumers(todo.pop()):
            t = view.op(c).type
            if t == "Identity":  # (what reads past it counts: Identity is element-wise)
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
            elif t in ELEMENTWISE and t != "SigmoidGrad":
                return True
    return False


def fuse_matmul_bias(view) -> None:
    """x @ w + b (AddV2, Add or BiasAdd of a MatMul that has no other consumer), and a
    Relu or Sigmoid alone after it, become one _FusedMatMul: the product is never stored
    alone."""
    for i, node in enumerate(view.nodes):
        op = node.op
        if op.type not in ("AddV2", "Add", "BiasAdd") or len(node.inputs) != 2:
            continue
        if node.device.device_type != "CPU" or view.reads_ref(i) or not view.available(i):
            continue
        if not blas.available(op._attr("T").np_dtype):
            continue
        for k in (0,) if op.type == "BiasAdd" else (0, 1):
            j, out = node.inputs[k]
            if j == "feed" or out != 0 or not view.available(j):
                continue
            mm = view.nodes[j]
            if mm.op.type != "MatMul" or mm.device is not node.device or view.reads_ref(j):
                continue
            if view.sole_consumer(j) != i:
                continue
            r = view.sole_consumer(i)
            act = (
                view.op(r).type
                if r is not None and view.device(r) is node.device and view.available(r)
                else None
            )
            relu = act == "Relu"
            # A Sigmoid as the product's epilogue (TF's oneDNN fuses it too): on the
            # pool's blocks while each is in cache (blas.gemm_sigmoid).  Only a wide
            # layer's whose output goes to products (a hidden layer, a GAN's generator):
            # a narrow one (a discriminator's logit), or one read by element-wise nodes
            # (a loss), stays with those nodes, in one compiled program.
            sigmoid = (
                act == "Sigmoid"
                and _SIGMOID_EPILOGUE
                and _wide(view, mm.inputs[1], mm.op._attr("transpose_b"))
                and not _feeds_elementwise(view, r)
            )
            attrs = {
                "T": op._attr("T"),
                "transpose_a": mm.op._attr("transpose_a"),
                "transpose_b": mm.op._attr("transpose_b"),
                "add_type": op.type,
                "bias_first": k == 1,
                "data_format": op._attrs.get("data_format", "NHWC"),
                "relu": relu,
                "sigmoid": sigmoid,
            }
            inputs = [*mm.inputs, node.inputs[1 - k]]
            if relu or sigmoid:
                view.fuse(r, "_FusedMatMul", attrs, inputs, absorbed=[i, j])
            else:
                view.fuse(i, "_FusedMatMul", attrs, inputs, absorbed=[j])
            break


# -- graph pass: a ConcatV2 whose join is a _FusedMatMul's left operand ------------------
#
# An LSTM cell's product reads the join of its input and its state ([x_t, h], 21 a step
# of lstm_seqlen), and its gradient reads the join again.  One node joins and multiplies:
# the ConcatV2's trip through the interpreter and its axis Const's are gone; the join is
# its second output, for the other readers.

FusedConcatMatMul = register_op(
    "_FusedConcatMatMul",
    inputs=["values: N * T", "b: T", "bias: T"],
    outputs=["product: T", "joined: T"],
    attrs={
        "T": FLOATING,
        "N": 2,
        "axis": 0,  # (the ConcatV2's, a constant)
        "transpose_a": False,
        "transpose_b": False,
        "add_type": "BiasAdd",
        "bias_first": False,
        "data_format": "NHWC",
        "relu": False,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape(), tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedConcatMatMul")  # introduced after the gradients were built


@FusedConcatMatMul.kernel("CPU")
async def _fused_concat_matmul(ctx, *args):
    """ConcatV2's join (its checks and messages, manip_ops.concat_axis), then
    _FusedMatMul's kernel on it."""
    *values, b, bias = args
    values = [np.asarray(v) for v in values]
    axis = concat_axis([v.shape for v in values], ctx.attrs["axis"])
    joined = np.concatenate(values, axis)
    return await _fused_matmul(ctx, joined, b, bias), joined


_CONCATS = True  # False: the joins stay ConcatV2 nodes (A/B)


def fuse_concat_matmul(view) -> None:
    """A ConcatV2 on the CPU (its axis a constant) read as the left operand of a
    _FusedMatMul becomes part of it (`_FusedConcatMatMul`): the fused node's second
    output is the join, for the ConcatV2's other readers.  Only where none of those
    readers is something the product waits for (the fused node would then wait for
    itself; in a loop, within the iteration: a loop's back edge is no wait).  Where
    values may be dead (a dynamic_rnn's loop body), only where the join and the product
    are dead together and the fused node, reading the values and the product's other
    operands and waiting for both nodes' control edges, is dead exactly when they were
    (fused_elementwise._dead_alike: the axis, a Const waiting for the frame's pivot,
    adds no source of its own); the ConcatV2 feeds the product, so is in its frame.  In
    a partition that receives from another, only a join nothing else reads (the
    readers' values, which would wait for the product's operands, may be what a value
    received waits for, through the other partition)."""
    if not _CONCATS:
        return
    from asyncflow.ops.fused_elementwise import _dead_alike, _receives

    may_be_dead = view.has_control_flow()
    loops = view.has_loops_or_recvs()
    nodes = view.nodes
    for i, node in enumerate(nodes):
        op = node.op
        if op.type != "_FusedMatMul" or not view.available(i) or op._attr("transpose_a"):
            continue
        c = node.inputs[0][0]
        if c == "feed" or node.inputs[0][1] != 0 or not view.available(c):
            continue
        cat = nodes[c]
        if cat.op.type != "ConcatV2" or cat.device is not node.device:
            continue
        if cat.op._attr("T") != op._attr("T"):
            continue
        *values, axis_src = cat.inputs
        if axis_src[0] == "feed":
            continue
        axis = ops.constant_value(nodes[axis_src[0]].op._outputs[axis_src[1]])
        if axis is None or np.ndim(axis) != 0:
            continue
        readers = {u for u, _slot in view.consumers(c)} - {i}
        if loops and readers and (i in view._downstream(readers) or _receives(view)):
            continue
        if not loops and readers & view.upstream(i):
            continue
        inputs = [*values, *node.inputs[1:]]
        if may_be_dead and not _dead_alike(
            view, [i, c], inputs, [*node.controls, *cat.controls], absorbed=[c]
        ):
            continue
        attrs = dict(op._attrs)
        attrs["N"] = len(values)
        attrs["axis"] = int(axis)
        view.fuse(
            into=i,
            op_type="_FusedConcatMatMul",
            attrs=attrs,
            inputs=inputs,
            absorbed=[c],
            outputs=[(c, 0)],
        )
        view.drop_if_unused(axis_src[0])


# -- graph pass: MatMul -> ReluGrad (a dense layer's backprop through its activation) -----
#
# The product is deferred to the ReluGrad.  An update of the weights it reads is made to
# wait for the ReluGrad (a control edge in the plan); were it to run first anyway, the
# product would still see the old weights, as variables are copy-on-write
# (state_ops.VarRef copies a buffer that anything else, here the product, still holds).


def _gemm_relu_mask(out, a, b, trans_a, trans_b, alpha, features):
    # TF's ReluGradFunctor: gradients * (features > 0), so inf * 0 gives nan there too;
    # on the pool's blocks while each is in cache where it runs them (blas.gemm_epilogue)
    if blas.gemm_epilogue(out, a, b, trans_a, trans_b, alpha, 0.0, "relu_grad", features):
        return
    blas.gemm_into(out, a, b, trans_a, trans_b, alpha, 0.0)
    with quiet_errstate():
        np.multiply(out, features > 0, out=out)


def _relu_grad_gemm_kernel(plain):
    """ReluGrad whose gradients are a DeferredProduct: the gemm writes them into a
    fresh array and the mask is applied there, in the same kernel."""

    async def relu_grad_into_gemm(ctx, g, features):
        if type(g) is not DeferredProduct:
            return await plain(ctx, g, features)
        features = np.asarray(features)
        if features.shape != g.shape or features.dtype != g.dtype:
            return await plain(ctx, g.materialize(), features)  # it words the error
        out = host_pool.empty(g.shape, g.dtype)
        # The operands go as arrays: the CPU budget tells kinds of call by their shapes.
        await ctx.compute(
            _gemm_relu_mask,
            out,
            g.a,
            g.b,
            g.trans_a,
            g.trans_b,
            g.alpha,
            features,
            cost=out.nbytes,
        )
        return out

    return relu_grad_into_gemm


FusedMatMulReluGrad = register_op(
    "_FusedMatMulReluGrad",
    inputs=["a: T", "b: T", "features: T"],
    outputs=["backprops: T"],
    attrs={"T": FLOATING, "transpose_a": False, "transpose_b": False},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedMatMulReluGrad")


@FusedMatMulReluGrad.kernel("CPU")
async def _fused_matmul_relu_grad(ctx, a, b, features):
    kernel = _ADD_KERNELS.get("ReluGrad")
    if kernel is None:
        kernel = _ADD_KERNELS["ReluGrad"] = _relu_grad_gemm_kernel(
            get_op_def("ReluGrad").kernel_for("CPU").fn
        )
    product = await matmul_deferred(ctx, a, b)
    return await kernel(plain_context(ctx), product, features)


def fuse_matmul_relu_grad(view) -> None:
    """ReluGrad(MatMul(...), features), past gate_gradients' Identities: one
    _FusedMatMulReluGrad whose gemm writes the gradient and masks it in cache."""
    for i, node in enumerate(view.nodes):
        op = node.op
        if op.type != "ReluGrad" or node.device.device_type != "CPU" or view.reads_ref(i):
            continue
        if not blas.available(op._attr("T").np_dtype) or not view.available(i):
            continue
        found = view.chain_source(i, 0)
        if found is None:
            continue
        j, passed = found
        mm = view.nodes[j]
        if mm.op.type != "MatMul" or mm.device is not node.device or view.reads_ref(j):
            continue
        if not view.available(j, *passed):
            continue
        # The product usually reads the layer's weights (dx = dy @ w.T): w's update must
        # wait for this node, else copy-on-write copies w on every step.
        variables = {view.variable_behind(src) for src in mm.inputs}
        variables.discard(None)
        if not view.order_before_writers(i, variables):
            continue
        attrs = {
            "T": op._attr("T"),
            "transpose_a": mm.op._attr("transpose_a"),
            "transpose_b": mm.op._attr("transpose_b"),
        }
        inputs = [*mm.inputs, node.inputs[1]]
        view.fuse(i, "_FusedMatMulReluGrad", attrs, inputs, absorbed=[j, *passed])


@MatMul.gradient
def _matmul_grad(op, grad):
    t_a, t_b = op._attr("transpose_a"), op._attr("transpose_b")
    a, b = _conj(op.inputs[0]), _conj(op.inputs[1])

    def mm(x, y, ta=False, tb=False):
        return ops.apply_op("MatMul", [x, y], {"transpose_a": ta, "transpose_b": tb}).outputs[0]

    if not t_a and not t_b:
        return [mm(grad, b, tb=True), mm(a, grad, ta=True)]
    if not t_a and t_b:
        return [mm(grad, b), mm(grad, a, ta=True)]
    if t_a and not t_b:
        return [mm(b, grad, tb=True), mm(a, grad)]
    return [mm(b, grad, ta=True, tb=True), mm(grad, a, ta=True, tb=True)]


# -- BatchMatMul, BatchMatMulV2 -----------------------------------------------------------


def _adjoint(xp, m):
    return xp.conj(xp.swapaxes(m, -1, -2))


def _batch_operands(ctx, xp, x, y):
    """BatchMatMul's checked operands, adjointed as its attrs say: TF's errors for a
    rank below 2 and for inner dimensions that differ."""
    for i, m in enumerate((x, y)):
        if m.ndim < 2:
            raise errors.InvalidArgumentError(None, None, f"In[{i}] ndims must be >= 2: {m.ndim}")
    x2 = _adjoint(xp, x) if ctx.attrs["adj_x"] else x
    y2 = _adjoint(xp, y) if ctx.attrs["adj_y"] else y
    if x2.shape[-1] != y2.shape[-2]:
        raise _incompatible(x, y)
    return x2, y2


async def _batch_matmul(ctx, x, y):
    xp = ctx.xp
    x, y = xp.asarray(x), xp.asarray(y)
    x2, y2 = _batch_operands(ctx, xp, x, y)
    try:
        if ctx.op.type == "BatchMatMul":
            if x.shape[:-2] != y.shape[:-2]:
                raise ValueError
        else:
            np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    except ValueError:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"In[0] and In[1] must have compatible batch dimensions: "
            f"{_shape_str(x.shape)} vs. {_shape_str(y.shape)}",
        ) from None
    product = await ctx.compute(xp.matmul, x2, y2)
    return _as_dtype(xp, product, ctx.attrs["T"])


_BATCH_ATTRS = {"T": _MATMUL_TYPES, "adj_x": False, "adj_y": False}
BatchMatMul = register_op(
    "BatchMatMul",
    inputs=["x: T", "y: T"],
    outputs=["output: T"],
    attrs=dict(_BATCH_ATTRS),
    shape_fn=_batch_matmul_shape(broadcast=False),
)
BatchMatMulV2 = register_op(
    "BatchMatMulV2",
    inputs=["x: T", "y: T"],
    outputs=["output: T"],
    attrs=dict(_BATCH_ATTRS),
    shape_fn=_batch_matmul_shape(broadcast=True),
)
BatchMatMul.kernel()(_batch_matmul)
BatchMatMulV2.kernel()(_batch_matmul)


# TF's BatchMatMulV3: x and y of their own types (Ta, Tb), the product of type Tout
# (int8 x int8 -> int32, int8 x bfloat16 -> bfloat16).
_V3_TYPES = TypeConstraint(
    [
        dtypes.bfloat16,
        dtypes.float16,
        dtypes.float32,
        dtypes.float64,
        dtypes.int16,
        dtypes.int32,
        dtypes.int64,
        dtypes.int8,
        dtypes.uint8,
        dtypes.complex64,
        dtypes.complex128,
    ]
)
BatchMatMulV3 = register_op(
    "BatchMatMulV3",
    inputs=["x: Ta", "y: Tb"],
    outputs=["output: Tout"],
    attrs={"Ta": _V3_TYPES, "Tb": _V3_TYPES, "Tout": _V3_TYPES, "adj_x": False, "adj_y": False},
    shape_fn=_batch_matmul_shape(broadcast=True),
)


@BatchMatMulV3.kernel()
async def _batch_matmul_v3(ctx, x, y):
    xp = ctx.xp
    out = ctx.attrs["Tout"]
    # Products in Tout (exact for int8 -> int32), or float32 for a bfloat16/half Tout.
    work = np.float32 if out in (dtypes.bfloat16, dtypes.float16) else out.as_numpy_dtype
    x = xp.asarray(x).astype(work, copy=False)
    y = xp.asarray(y).astype(work, copy=False)
    x2, y2 = _batch_operands(ctx, xp, x, y)
    product = await ctx.compute(xp.matmul, x2, y2)
    return _as_dtype(xp, product, out)


def _batch_matmul_grad(op, grad):
    x, y = op.inputs
    adj_x, adj_y = op._attr("adj_x"), op._attr("adj_y")
    kind = op.type

    def mm(a, b, ax=False, ay=False):
        return ops.apply_op(kind, [a, b], {"adj_x": ax, "adj_y": ay}).outputs[0]

    if not adj_x:
        if not adj_y:
            gx, gy = mm(grad, y, ay=True), mm(x, grad, ax=True)
        else:
            gx, gy = mm(grad, y), mm(grad, x, ax=True)
    elif not adj_y:
        gx, gy = mm(y, grad, ay=True), mm(x, grad)
    else:
        gx, gy = mm(y, grad, ax=True, ay=True), mm(grad, x, ax=True, ay=True)
    if kind == "BatchMatMul":
        return [gx, gy]
    return list(_batch_reduce(x, y, gx, gy))


def _batch_reduce(x, y, gx, gy):
    """Sum BatchMatMulV2 gradients over the batch dimensions that were broadcast."""
    sx, sy = x.shape, y.shape
    if sx.ndims is not None and sy.ndims is not None:
        axes = _g._static_reduction_axes(sx[:-2], sy[:-2])
        if axes is not None:
            return _g.sum_to(gx, x, axes[0]), _g.sum_to(gy, y, axes[1])
    shape_x, shape_y = _g.shape(x), _g.shape(y)

    def batch(s):
        return ops.apply_op("StridedSlice", [s, [0], [-2], [1]], {"begin_mask": 1}).outputs[0]

    rx, ry = ops.apply_op("BroadcastGradientArgs", [batch(shape_x), batch(shape_y)]).outputs
    return (
        _g.reshape(_g.reduce_sum(gx, rx), shape_x),
        _g.reshape(_g.reduce_sum(gy, ry), shape_y),
    )


BatchMatMul.gradient(_batch_matmul_grad)
BatchMatMulV2.gradient(_batch_matmul_grad)


@BatchMatMulV3.gradient
def _batch_matmul_v3_grad(op, grad):
    """BatchMatMulV2's gradient in the product's type, cast back to each input's."""
    x, y = op.inputs
    xc, yc = _g.cast(x, grad.dtype), _g.cast(y, grad.dtype)
    adj_x, adj_y = op._attr("adj_x"), op._attr("adj_y")

    def mm(a, b, ax=False, ay=False):
        return ops.apply_op("BatchMatMulV2", [a, b], {"adj_x": ax, "adj_y": ay}).outputs[0]

    if not adj_x:
        gx, gy = (mm(grad, yc, ay=True), mm(xc, grad, ax=True)) if not adj_y else (
            mm(grad, yc), mm(grad, xc, ax=True))  # fmt: skip
    elif not adj_y:
        gx, gy = mm(yc, grad, ay=True), mm(xc, grad)
    else:
        gx, gy = mm(yc, grad, ax=True, ay=True), mm(grad, xc, ax=True, ay=True)
    gx, gy = _batch_reduce(xc, yc, gx, gy)
    return [_g.cast(gx, x.dtype), _g.cast(gy, y.dtype)]


# -- tf.matmul --------------------------------------------------------------------------------


def _matmul_kind(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b):
    """(op type, attrs, a, b) of a plain product: MatMul for known ranks <= 2, else
    BatchMatMulV2 (TF's rule)."""
    a, b = _convert_pair(a, b, "MatMul", names=("a", "b"))
    a_rank, b_rank = a.shape.ndims, b.shape.ndims
    # TF's rule: a batch matmul when a rank is unknown or above 2, else MatMul (so a
    # rank-1 input is MatMul's "Shape must be rank 2 but is rank 1").
    if a_rank is not None and b_rank is not None and a_rank <= 2 and b_rank <= 2:
        if adjoint_a:
            a, transpose_a = _conj(a), True
        if adjoint_b:
            b, transpose_b = _conj(b), True
        kind, attrs = "MatMul", {"transpose_a": transpose_a, "transpose_b": transpose_b}
    else:
        # BatchMatMul has no transpose: conjugate and use the adjoint instead (as TF).
        if transpose_a:
            a, adjoint_a = _conj(a), True
        if transpose_b:
            b, adjoint_b = _conj(b), True
        kind, attrs = "BatchMatMulV2", {"adj_x": adjoint_a, "adj_y": adjoint_b}
    return kind, attrs, a, b


@_dispatch.add_dispatch_support
def matmul(
    a,
    b,
    transpose_a=False,
    transpose_b=False,
    adjoint_a=False,
    adjoint_b=False,
    a_is_sparse=False,
    b_is_sparse=False,
    output_type=None,
    grad_a=False,
    grad_b=False,
    name=None,
):
    """Multiplies matrix a by matrix b; rank > 2 inputs are batches (broadcast batch dims).

    An `output_type` other than the inputs' builds BatchMatMulV3 (int8 x int8 -> int32,
    as TF).  `grad_a`/`grad_b` (TF's hints that the product is a gradient) are accepted
    and change nothing.

    Inputs of known rank <= 2 build MatMul (as TF: ranks 0 and 1 are its shape error);
    anything else (a rank above 2 or unknown) builds BatchMatMulV2 with adj_x/adj_y.
    `a_is_sparse`/`b_is_sparse` are accepted and ignored.

    Raises:
      ValueError: both transpose_x and adjoint_x are set, or the inner dimensions differ
        ("Dimensions must be equal, but are 2 and 3 for 'MatMul' ...").
      TypeError: a and b have different dtypes.
    """
    if _ragged.is_ragged(a) or _ragged.is_ragged(b):
        return _ragged.matmul(
            a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, name, dense_matmul=matmul
        )
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    del grad_a, grad_b
    with _builder_scope(name, "MatMul", [a, b]) as op_name:
        kind = None
        if output_type is not None:
            output_type = dtypes.as_dtype(output_type)
            a = ops.convert_to_tensor(a, name="a")
            b = ops.convert_to_tensor(b, name="b")
            if output_type != a.dtype:
                a = _conj(a) if transpose_a else a
                b = _conj(b) if transpose_b else b
                kind, attrs = (
                    "BatchMatMulV3",
                    {
                        "adj_x": adjoint_a or transpose_a,
                        "adj_y": adjoint_b or transpose_b,
                        "Tout": output_type,
                    },
                )
        if kind is None:
            kind, attrs, a, b = _matmul_kind(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b)
    return ops.apply_op(kind, [a, b], attrs, name=op_name).outputs[0]
