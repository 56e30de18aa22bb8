"""AddN of MatMul products as one node: the products accumulate in gemm calls (beta=1).

An unrolled RNN's weight gradient is a sum of one product per step: in the LSTM
benchmarks AddN(MatMul(x_t, dgates_t, transpose_a=True), ...) over 28 steps, each
product a new [156, 512] array that the AddN then reads again, all on one thread
(~0.6 ms of the step for the AddN alone).  The graph pass `fuse_matmul_add_n` replaces
an AddN and the MatMuls that feed only it (past gate_gradients' Identities) by one
`_FusedMatMulAddN`, whose kernel (`blas.matmul_sum`) writes the sum with gemm calls
that accumulate into one buffer (C = A @ B + C): no product arrays, no AddN pass.  A
large sum is split into runs of consecutive products, each accumulated in its own
buffer on one of the CPU budget's threads, the runs' sums added in order at the end:
the independent products of a sum that ran on one thread use the budget's cores.  A
GAN's discriminator weights (their gradient through the real and the generated batch)
and a VAE's hidden layer (through the mean and the log-deviation heads) are sums of
two products.

Numerics: the same products summed in another order (within a run gemm adds each
product into the running sum, then the runs, then the other addends), so the sum is
AddN's to rounding.  The runs depend only on the number of products, their size and
the CPU budget (intra_op_parallelism_threads), never on timing: the same inputs give
the same bits on every run.

A sum of at least _PAIR_MIN products whose MatMuls each share an operand with another
MatMul (a static RNN's: x_t^T @ dgates_t beside dgates_t @ W^T) is instead a chain of
`_MatMulSumPair` nodes, each product computed beside its partner in one batched gemm
call, and a `_MatMulSumEnd` (below, "the sum in step").

Errors: MatMul's own checks and messages for each product; a sum that does not fit the
gemm path (products of different shapes, another dtype, small) computes the products
and runs AddN's own kernel on the operands in their original order, which words any
shape error as AddN does.
"""

from __future__ import annotations

import os

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.devices import cpu_budget, host_pool
from asyncflow.ops import blas, matmul_ops
from asyncflow.ops.math_helpers import _shape_str
from asyncflow.ops.matmul_ops import _incompatible, _product, plain_context
from asyncflow.registry import FLOATING, NotDifferentiable, get_op_def, register_op

__all__ = [
    "FusedMatMulAddN",
    "MatMulPair",
    "MatMulPairAdd",
    "MatMulSumEnd",
    "MatMulSumPair",
    "MatMulSumPart",
    "accumulate_pair_products",
    "fuse_matmul_add_n",
    "pair_matmuls",
]

FusedMatMulAddN = register_op(
    "_FusedMatMulAddN",
    inputs=["operands: N * T"],
    outputs=["sum: T"],
    attrs={
        "T": FLOATING,
        "N": 1,
        # operands: a_0, b_0, a_1, b_1, ... (one pair per product), then the other
        # addends.  order[p] says what the AddN's input p was: product order[p] when
        # >= 0, else addend -1 - order[p].  transpose_a/b: per product, 0 or 1.
        "order": [],
        "transpose_a": [],
        "transpose_b": [],
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_FusedMatMulAddN")  # introduced after the gradients were built

# Sums smaller than this many elements take the plain path (a ctypes call per product
# costs more than it saves there), as matmul_ops' deferred products.
_MIN_ELEMENTS = 4096
# A sum of at least this many multiply-adds (blas' split threshold) is split into runs,
# at most one per thread of the budget and at most _MAX_RUNS.
_MAX_RUNS = 8


def _matrix_pair(a, b, ta: bool, tb: bool):
    """MatMul's checks of one product's operands: (a, b, rows, columns, inner)."""
    a, b = np.asarray(a), np.asarray(b)
    for i, m in enumerate((a, b)):
        if m.ndim != 2:
            raise errors.InvalidArgumentError(
                None, None, f"In[{i}] is not a matrix. Instead it has shape {_shape_str(m.shape)}"
            )
    k = a.shape[0] if ta else a.shape[1]
    if k != (b.shape[1] if tb else b.shape[0]):
        raise _incompatible(a, b)
    return a, b, a.shape[1] if ta else a.shape[0], b.shape[0] if tb else b.shape[1], k


def runs_for(count: int, macs: int) -> int:
    """How many runs a sum of `count` products of `macs` multiply-adds in all takes."""
    if count < 2 or macs < blas._SPLIT_MACS:
        return 1
    return max(1, min(count, cpu_budget.budget(), _MAX_RUNS))


@FusedMatMulAddN.kernel("CPU")
async def _fused_matmul_add_n(ctx, *xs):
    attrs = ctx.attrs
    tas, tbs = attrs["transpose_a"], attrs["transpose_b"]
    dtype = attrs["T"].np_dtype
    count = len(tas)
    pairs, shape, macs = [], None, 0
    fits = blas.available(dtype)
    for p in range(count):
        ta, tb = bool(tas[p]), bool(tbs[p])
        a, b, m, n, k = _matrix_pair(xs[2 * p], xs[2 * p + 1], ta, tb)
        pairs.append((a, b, ta, tb))
        shape = (m, n) if shape is None else shape
        fits = fits and (m, n) == shape and a.dtype == dtype and b.dtype == dtype
        macs += m * n * k
    addends = [np.asarray(x) for x in xs[2 * count :]]
    fits = (
        fits
        and shape[0] * shape[1] >= _MIN_ELEMENTS
        and all(x.shape == shape and x.dtype == dtype for x in addends)
    )
    if not fits:
        products = [await _product(ctx, np, *pair) for pair in pairs]
        operands = [products[o] if o >= 0 else addends[-1 - o] for o in attrs["order"]]
        add_n = get_op_def("AddN").kernel_for("CPU").fn
        return await add_n(plain_context(ctx), *operands)
    if count == 2 and _JOIN_K and tas[0] and tas[1] and not (tbs[0] or tbs[1]) and one_thread():
        return await ctx.compute(_joined_k, pairs, addends, shape, cost=macs / 5)
    runs = runs_for(count, macs)
    return await ctx.compute(blas.matmul_sum, pairs, addends, shape, runs, cost=macs / 5)


# a1^T @ b1 + a2^T @ b2, the weight gradient of one layer applied to two batches (a
# GAN's discriminator on the real and the generated batch, each [128,784]^T x
# [128,256]), is [a1; a2]^T @ [b1; b2]: one gemm over K = k1 + k2, the rows of the two
# batches stacked (a copy of both operands, under 1% of the multiply-adds' time at
# these sizes).  One call over the longer K keeps C in registers across both batches
# where two calls store it, load it again and add: measured on one thread at load ~4,
# 2,977 us as two products and an add against 2,097 us joined.  The sum is rounded
# once per K block rather than once per product: the unfused AddN's values to float32
# rounding, not its bits (tests/test_matmul_rows.py).  Only while the products get one
# thread (`one_thread`): on two free cores the two products side by side on the pool
# (`blas.matmul_sum`'s pair) were as fast or faster (the GAN's step, in one process,
# 100 rounds each at load ~1.7: 0.962x with the joined gemm always, B faster in 64/100
# rounds).  _JOIN_K = False (or ASYNCFLOW_MATMUL_ROWS=0, which turns the forward's
# merged rows off too): the sums as before.
_JOIN_K = os.environ.get("ASYNCFLOW_MATMUL_ROWS", "") in ("", "1")


def one_thread() -> bool:
    """Whether a product now runs on one thread because another process holds the
    other cores (cpu_budget.threads_now): where the joined forms of a layer's two
    batches save what two threads side by side would not.  With TF_DETERMINISTIC_OPS=1
    never (the same bits whatever the load)."""
    return not cpu_budget.deterministic() and cpu_budget.threads_now() <= 1


def _joined_k(pairs, addends, shape):
    (a1, b1, _ta1, _tb1), (a2, b2, _ta2, _tb2) = pairs
    a, b = np.concatenate((a1, a2)), np.concatenate((b1, b2))
    out = host_pool.empty(shape, a.dtype)
    blas.gemm_into(out, a, b, True, False, 1.0, 0.0)
    for x in addends:
        np.add(out, x, out=out)
    return out


# -- the sum in step: each product beside its step's input gradient -------------------
#
# A static RNN's weight gradient sums one product per step, x_t^T @ dgates_t, and each
# step's backward pass also makes dgates_t @ W^T, the gradient that the previous step's
# backward pass waits for.  As one node the sum waited for the whole backward pass
# and then ran its 28 products (lstm_static: ~3.7 ms on two cores), while each input
# gradient ran alone on the serial chain (~190 us on two BLAS threads, 260 on one).
# Here each product and the MatMul that shares its operand dgates_t are one
# `_MatMulSumPair` node: one batched gemm call (`blas.gemm_pair`), the two products
# on two of OpenBLAS's threads (~280 us for both, against ~320 for the two apart on
# two threads each), accumulating the product into the sum's buffer; the AddN becomes
# a `_MatMulSumEnd` that adds the runs and the other addends.  The pairs form a chain
# (each takes the previous one's sum, which the interpreter would run first anyway:
# the AddN lists the products in the order the backward pass makes them), and each
# product goes into the run `blas.matmul_sum` puts it in (`runs_for`: fixed by the
# count, the size and the budget): the same gemm calls into the same buffers in the
# same order, so the same bits as the one-node sum, and the input gradient's bits
# are the MatMul's (a gemm gives the same bits on one thread or several).
#
# Only where every product has such a partner, in a partition without control flow
# (a dead product would have to make the sum dead) and without a path between the
# two MatMuls (one node would wait for itself).

MatMulSumPair = register_op(
    "_MatMulSumPair",
    inputs=["operands: N * T"],
    outputs=["sum: T", "product: T"],
    attrs={
        "T": FLOATING,
        "N": 4,
        # operands: [the previous pair's sum,] a, b, then the partner's a, b.  index:
        # this product's place in the sum; count: the sum's products.
        "index": 0,
        "count": 1,
        "transpose_a": False,
        "transpose_b": False,
        "partner_transpose_a": False,
        "partner_transpose_b": False,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * 2,
)
NotDifferentiable("_MatMulSumPair")

MatMulSumPart = register_op(
    "_MatMulSumPart",
    inputs=["operands: N * T"],
    outputs=["sum: T"],
    # a product of the chain without a partner: operands [the previous sum,] a, b
    attrs={
        "T": FLOATING,
        "N": 2,
        "index": 0,
        "count": 1,
        "transpose_a": False,
        "transpose_b": False,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_MatMulSumPart")

MatMulSumEnd = register_op(
    "_MatMulSumEnd",
    inputs=["operands: N * T"],
    outputs=["sum: T"],
    # operands: the last pair's sum, then the AddN's other addends; order as
    # _FusedMatMulAddN's.
    attrs={"T": FLOATING, "N": 1, "order": []},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
)
NotDifferentiable("_MatMulSumEnd")

# Sums of fewer products stay one _FusedMatMulAddN.  ASYNCFLOW_MATMUL_PAIRS=0: always.
_PAIR_MIN = 4 if os.environ.get("ASYNCFLOW_MATMUL_PAIRS", "") in ("", "1") else 1 << 62
# The pass walks the partition twice per product or more (the paths between nodes, in
# Python: lstm_static's and bilstm's 28 products in partitions of ~2,400 nodes 0.1-0.3 s,
# once per plan): past this many products times nodes (a long unrolled RNN)
# the sum stays one node instead of costing seconds of planning.
_PAIR_WORK = 150_000


class _Sum:
    """A sum in progress, passed from pair to pair: its products' operands (for the
    AddN path), and the runs' buffers while the products fit the gemm path (None
    after one did not).  Its dtype and shape are the sum's, as a value's."""

    __slots__ = ("pairs", "bufs", "bounds", "shape", "dtype")

    def __init__(self):
        self.pairs = []
        self.bufs = None
        self.bounds = None
        self.shape = None
        self.dtype = None


def _take(acc, index: int, count: int, dtype, a, b, ta, tb):
    """Check product `index`'s operands (MatMul's errors) and note them; the run's
    buffer it accumulates into and whether it is the run's first, or None where the
    sum left the gemm path."""
    a, b, m, n, k = _matrix_pair(a, b, ta, tb)
    acc.pairs.append((a, b, ta, tb))
    if index == 0:
        acc.shape, acc.dtype = (m, n), dtype
        if blas.available(dtype) and m * n >= _MIN_ELEMENTS:
            runs = runs_for(count, count * m * n * k)
            acc.bounds = [r * count // runs for r in range(runs)]
            acc.bufs = [host_pool.empty((m, n), dtype)]
            acc.bufs += [np.empty((m, n), dtype) for _ in range(runs - 1)]
    fits = acc.bufs is not None and (m, n) == acc.shape
    if not (fits and a.dtype == dtype and b.dtype == dtype):
        acc.bufs = None  # the end computes the sum as AddN (its errors included)
        return None
    run = sum(1 for start in acc.bounds if start <= index) - 1
    return acc.bufs[run], index == acc.bounds[run], a, b, m * n * k


@MatMulSumPart.kernel("CPU")
async def _matmul_sum_part(ctx, *xs):
    attrs = ctx.attrs
    index, ta, tb = attrs["index"], attrs["transpose_a"], attrs["transpose_b"]
    acc, (a, b) = (_Sum(), xs) if index == 0 else (xs[0], xs[1:])
    into = _take(acc, index, attrs["count"], attrs["T"].np_dtype, a, b, ta, tb)
    if into is not None:
        buf, first, a, b, macs = into
        await ctx.compute(blas.accumulate, buf, a, b, ta, tb, first, cost=macs / 5)
    return acc


@MatMulSumPair.kernel("CPU")
async def _matmul_sum_pair(ctx, *xs):
    attrs = ctx.attrs
    index, ta, tb = attrs["index"], attrs["transpose_a"], attrs["transpose_b"]
    pta, ptb = attrs["partner_transpose_a"], attrs["partner_transpose_b"]
    acc, (a, b, pa, pb) = (_Sum(), xs) if index == 0 else (xs[0], xs[1:])
    dtype = attrs["T"].np_dtype
    into = _take(acc, index, attrs["count"], dtype, a, b, ta, tb)
    pa, pb, pm, pn, pk = _matrix_pair(pa, pb, pta, ptb)
    if into is not None and pa.dtype == dtype and pb.dtype == dtype and pm * pn >= _MIN_ELEMENTS:
        buf, first, a, b, macs = into
        out = host_pool.empty((pm, pn), dtype)
        args = (out, pa, pb, pta, ptb, 0.0, buf, a, b, ta, tb, 0.0 if first else 1.0)
        await ctx.compute(blas.gemm_pair, *args, cost=(macs + pm * pn * pk) / 5)
        return acc, out
    if into is not None:
        buf, first, a, b, macs = into
        await ctx.compute(blas.accumulate, buf, a, b, ta, tb, first, cost=macs / 5)
    return acc, await _product(ctx, np, pa, pb, pta, ptb)


@MatMulSumEnd.kernel("CPU")
async def _matmul_sum_end(ctx, acc, *addends):
    dtype = ctx.attrs["T"].np_dtype
    addends = [np.asarray(x) for x in addends]
    if acc.bufs is None or not all(x.shape == acc.shape and x.dtype == dtype for x in addends):
        products = [await _product(ctx, np, *pair) for pair in acc.pairs]
        operands = [products[o] if o >= 0 else addends[-1 - o] for o in ctx.attrs["order"]]
        add_n = get_op_def("AddN").kernel_for("CPU").fn
        return await add_n(plain_context(ctx), *operands)
    out = acc.bufs[0]
    for x in acc.bufs[1:] + addends:  # (as blas.matmul_sum adds them)
        np.add(out, x, out=out)
    return out


def fuse_matmul_add_n(view) -> None:
    """AddN whose inputs are MatMul products (past gate_gradients' Identities), each
    feeding only it: one _FusedMatMulAddN taking the products' operands."""
    for i, node in enumerate(view.nodes):
        op = node.op
        if op.type != "AddN" or node.device.device_type != "CPU" or view.reads_ref(i):
            continue
        t = op._attr("T")
        if not blas.available(t.np_dtype) or not view.available(i) or len(node.inputs) < 2:
            continue
        products, addends, order, absorbed = [], [], [], []
        for k in range(len(node.inputs)):
            found = view.chain_source(i, k)
            if found is not None:
                j, passed = found
                mm = view.nodes[j]
                if (
                    mm.op.type == "MatMul"
                    and mm.device is node.device
                    and not view.reads_ref(j)
                    and view.available(j, *passed)
                ):
                    order.append(len(products))
                    products.append(mm)
                    absorbed += [j, *passed]
                    continue
            order.append(-1 - len(addends))
            addends.append(node.inputs[k])
        if not products:
            continue
        # A product may read a layer's weights (dh = dy @ w.T): w's update must wait for
        # this node, else copy-on-write copies w on every step.
        variables = {view.variable_behind(src) for mm in products for src in mm.inputs}
        variables.discard(None)
        if variables and not view.order_before_writers(i, variables):
            continue
        attrs = {
            "T": t,
            "N": 2 * len(products) + len(addends),
            "order": order,
            "transpose_a": [int(mm.op._attr("transpose_a")) for mm in products],
            "transpose_b": [int(mm.op._attr("transpose_b")) for mm in products],
        }
        if (
            _PAIR_MIN <= len(products)
            and len(products) * len(view.nodes) <= _PAIR_WORK
            and not view.has_loops_or_recvs()
        ):
            at = {id(view.nodes[j]): j for j in absorbed}
            js = [at[id(mm)] for mm in products]
            partners = _partners(view, products, js)
            if partners is not None:
                passed = [j for j in absorbed if j not in js]  # gate_gradients' Identities
                _pair_up(view, i, products, js, partners, addends, order, passed, t)
                continue
        inputs = [src for mm in products for src in mm.inputs] + addends
        view.fuse(i, "_FusedMatMulAddN", attrs, inputs, absorbed)


def _partners(view, products, js) -> list | None:
    """For each product (a MatMul of the sum, node js[p]), another MatMul reading one
    of its operands, feeding no node of the sum, on its device, with no path between
    the two, or None; None instead of the list when fewer than _PAIR_MIN have one or
    the chain could wait for itself (see the note above)."""
    taken, out = set(js), []
    up = view.upstream_masks()  # (bit q of up[j]: j waits for q)
    if up is None:
        return None  # (a cycle: a loop, which the caller ruled out)
    # Where values may be dead (a cond beside the sum: a dropout on a training tensor),
    # the chain's nodes each wait for the ones before: every product and partner must
    # be dead exactly together.
    dead = view.deadness() if view.has_control_flow() else None
    if dead is not None and len({dead.node[j] for j in js}) != 1:
        return None
    for mm, j in zip(products, js):
        found = None
        for src in mm.inputs:
            if src[0] == "feed":
                continue
            for q, _k in view.consumers(src[0]):
                node = view.nodes[q]
                if (
                    q in taken
                    or node.op.type != "MatMul"
                    or node.device is not mm.device
                    or node.op._attr("T") != mm.op._attr("T")
                    or view.reads_ref(q)
                    or not view.available(q)
                    or up[j] >> q & 1
                    or up[q] >> j & 1
                    or (dead is not None and dead.node[q] != dead.node[j])
                ):
                    continue
                found = q
                break
            if found is not None:
                break
        if found is not None:
            taken.add(found)
        out.append(found)
    if sum(q is not None for q in out) < _PAIR_MIN:
        return None
    # Pair p takes pair p-1's sum: no pair may wait (before the rewrite) for a later
    # one's nodes, else the chain closes a cycle.
    waits = 0
    for j, q in zip(js, out):
        if waits >> j & 1 or (q is not None and waits >> q & 1):
            return None
        waits |= up[j]
        if q is not None:
            waits |= up[q]
    return out


def _pair_up(view, i, products, js, partners, addends, order, passed, t) -> None:
    """AddN node i of MatMul `products` (nodes js) as a chain of _MatMulSumPairs (each
    product's node becomes one, taking its partner's MatMul; _MatMulSumPart where it
    has none) and a _MatMulSumEnd."""
    count, prev = len(products), None
    for p, (mm, j, q) in enumerate(zip(products, js, partners)):
        attrs = {
            "T": t,
            "index": p,
            "count": count,
            "transpose_a": bool(mm.op._attr("transpose_a")),
            "transpose_b": bool(mm.op._attr("transpose_b")),
        }
        inputs = list(mm.inputs) if prev is None else [(prev, 0), *mm.inputs]
        if q is None:
            attrs["N"] = len(inputs)
            view.fuse(j, "_MatMulSumPart", attrs, inputs, [])
        else:
            partner = view.nodes[q]
            attrs["partner_transpose_a"] = bool(partner.op._attr("transpose_a"))
            attrs["partner_transpose_b"] = bool(partner.op._attr("transpose_b"))
            inputs += partner.inputs
            attrs["N"] = len(inputs)
            view.fuse(j, "_MatMulSumPair", attrs, inputs, [q], outputs=[(q, 0)])
        prev = j
    attrs = {"T": t, "N": 1 + len(addends), "order": order}
    view.fuse(i, "_MatMulSumEnd", attrs, [(prev, 0), *addends], passed)


# -- two products of one operand ----------------------------------------------------
#
# A dynamic_rnn's backward loop makes, each iteration, the input gradient dgates @ W^T
# (the next iteration's cell gradient waits for it) and the weight product
# concat_t^T @ dgates (added to the loop's accumulator): two MatMuls of one operand
# with no path between them, run one after the other on the step's thread (lstm_dynamic:
# 58 a step, ~200 us each traced) where TF's inter-op pool runs them side by side.  The
# unrolled RNN's pairs above come with its weight sum; in a loop's body the two are one
# `_MatMulPair` node: one batched gemm call (`blas.gemm_pair`), the two products on two
# of OpenBLAS's threads, each on one thread (with TF_DETERMINISTIC_OPS=1 one after the
# other: the MatMul's own bits; tests/test_matmul_sum.py).  Both MatMuls must be dead
# exactly together (`_Deadness`: the same sources; a fused node is dead when any input
# is) and no path may join them within an iteration.  The input gradient reads the
# loop's weights through an Enter of the variable's reference; the pair reads them as
# the MatMul did (the interpreter reads a reference input's value for an op that takes
# a value), and their update waits for the loop's gradient, as before.
#
# A plain partition has such pairs too, among the products the sums and the updates'
# fusions left: a dense layer's input gradient dz @ W^T and weight gradient x^T @ dz,
# which TF's inter-op pool runs side by side, each on one thread (a pair forms there
# only where every operand is ready once the shared one is: `_ready_with`, so that no
# product waits for its partner's operand).  They ran one after the other, each on two
# BLAS threads, and at these sizes OpenBLAS's second thread gains far less than a
# product of its own (the VAE's decoder weight gradient, [512,64]x[64,784], twice: 1,708
# us one after the other on two threads each, 948 us paired; 2-core EPYC, Haswell
# kernels).  In a traced VAE step its products take ~1 ms less; whole steps moved within
# the noise (benchmarks/models/ab_inproc.py, pairs outside loops on against off,
# `_PAIR_PLAIN`, 80 rounds: VAE 0.995x, autoencoder 0.993x at 0.967x the CPU).  No pair
# forms in the MLP (its products are in the SGD updates) nor in the GAN (its products
# are in fused nodes).
# ASYNCFLOW_MATMUL_PAIRS=0: no pairs anywhere.

_PAIR_ATTRS = {
    "T": FLOATING,
    "transpose_a": False,
    "transpose_b": False,
    "partner_transpose_a": False,
    "partner_transpose_b": False,
}
MatMulPair = register_op(
    "_MatMulPair",
    inputs=["a: T", "b: T", "partner_a: T", "partner_b: T"],
    outputs=["product: T", "partner_product: T"],
    attrs=dict(_PAIR_ATTRS),
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * 2,
)
NotDifferentiable("_MatMulPair")

# Pairs are looked for among at most this many MatMuls of a partition (each candidate
# walks the partition for paths, in Python, once per plan).
_PAIR_SEARCH_MAX = 64
# Pairs in partitions without control flow too (False: only in loops, as before; A/B).
_PAIR_PLAIN = True


def _pair_operands(attrs, a, b, pa, pb):
    """A pair's two products as its kernels take them: (dtype, (a, b, ta, tb, m, n, k),
    (pa, pb, pta, ptb, pm, pn, pk)), each operand pair checked by _matrix_pair."""
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    pta, ptb = attrs["partner_transpose_a"], attrs["partner_transpose_b"]
    a, b, m, n, k = _matrix_pair(a, b, ta, tb)
    pa, pb, pm, pn, pk = _matrix_pair(pa, pb, pta, ptb)
    return attrs["T"].np_dtype, (a, b, ta, tb, m, n, k), (pa, pb, pta, ptb, pm, pn, pk)


@MatMulPair.kernel("CPU")
async def _matmul_pair(ctx, a, b, pa, pb):
    attrs = ctx.attrs
    dtype, (a, b, ta, tb, m, n, k), (pa, pb, pta, ptb, pm, pn, pk) = _pair_operands(
        attrs, a, b, pa, pb
    )
    if (
        blas.available(dtype)
        and all(x.dtype == dtype for x in (a, b, pa, pb))
        and min(m * n * k, pm * pn * pk) >= blas._BATCH_MIN_MACS
    ):
        out, pout = host_pool.empty((m, n), dtype), host_pool.empty((pm, pn), dtype)
        args = (out, a, b, ta, tb, 0.0, pout, pa, pb, pta, ptb, 0.0)
        await ctx.compute(blas.gemm_pair, *args, cost=(m * n * k + pm * pn * pk) / 5)
        return out, pout
    return (await _product(ctx, np, a, b, ta, tb), await _product(ctx, np, pa, pb, pta, ptb))


def _ready_with(view, shared, pair) -> bool:
    """Whether every input of the MatMuls `pair` is ready once their shared input
    `shared` is: a feed, a source (a constant, a variable, or a read of one), or a value
    `shared` itself waits for (a dense layer's weights and activations, which its
    gradient dz waits for).  A pair never holds back a product for its partner's
    operand.  (In a loop's body the two products come from one iteration's values.)"""
    nodes = view.nodes
    before = None
    for i in pair:
        for s in nodes[i].inputs:
            if s[0] == "feed" or s[0] == shared[0]:
                continue  # (a node's outputs are ready together)
            node = nodes[s[0]]
            if all(t[0] == "feed" or not nodes[t[0]].inputs for t in node.inputs):
                continue  # (a source, or an op of sources only: a variable's read)
            if before is None:
                before = view.upstream(shared[0])
            if s[0] not in before:
                return False
    return True


def pair_matmuls(view) -> None:
    """Two MatMuls reading one value, dead together and with no path between them: one
    _MatMulPair (see the note above)."""
    plain = not view.has_control_flow()
    if _PAIR_MIN > 1 << 60 or (plain and not _PAIR_PLAIN):
        return
    nodes = view.nodes
    candidates = [
        i
        for i, node in enumerate(nodes)
        if node.op.type == "MatMul"
        and node.device.device_type == "CPU"
        and blas.available(node.op._attr("T").np_dtype)
        and view.available(i)
    ]
    if len(candidates) < 2 or len(candidates) > _PAIR_SEARCH_MAX:
        return
    from asyncflow.ops.fused_elementwise import _Clusters, _Deadness

    deadness = _Deadness(view, _Clusters(view).order)
    is_candidate, taken = set(candidates), set()
    for j in candidates:
        if j in taken:
            continue
        mm = nodes[j]
        partner = None
        for src in mm.inputs:
            if src[0] == "feed":
                continue
            for q, _k in view.consumers(src[0]):
                other = nodes[q]
                if (
                    q == j
                    or q not in is_candidate
                    or q in taken
                    or other.device is not mm.device
                    or other.op._attr("T") != mm.op._attr("T")
                    or deadness.node[q] != deadness.node[j]
                    or q in view._downstream({j})
                    or j in view._downstream({q})
                    or (plain and not _ready_with(view, src, (j, q)))
                ):
                    continue
                partner = q
                break
            if partner is not None:
                break
        if partner is None:
            continue
        other = nodes[partner]
        attrs = {
            "T": mm.op._attr("T"),
            "transpose_a": bool(mm.op._attr("transpose_a")),
            "transpose_b": bool(mm.op._attr("transpose_b")),
            "partner_transpose_a": bool(other.op._attr("transpose_a")),
            "partner_transpose_b": bool(other.op._attr("transpose_b")),
        }
        inputs = list(mm.inputs) + list(other.inputs)
        view.fuse(j, "_MatMulPair", attrs, inputs, [partner], outputs=[(partner, 0)])
        taken.update((j, partner))


# -- graph pass: one layer applied to two batches (a GAN's discriminator) -------------
#
# A GAN's discriminator reads the real batch and the generator's batch through the same
# weights: two _FusedMatMul nodes (x @ W + b, ReLU) with the same W and b and no path
# between them, which run one after the other, each packing W for its own gemm.  As one
# `_FusedMatMulRows` node the two batches are copied into one [m1 + m2, k] operand and
# multiplied in one gemm: W is packed once and the kernel runs on twice the rows (the
# GAN's [128,784]x[784,256] twice: ~20% less time on one thread).  The outputs are row
# views of one buffer, each row the same dot product as alone, to float32 rounding (not
# bitwise: OpenBLAS computes a block's last rows with its edge kernels, and a batch's
# last rows are no longer last; tests/test_matmul_rows.py).  Only while the products get
# one thread (`one_thread`: another process holds the other core): on two free cores
# the two products, each on both threads, were as fast (the GAN's step in one process,
# 100 rounds at load ~1.7: 0.982x with the merged rows always, 53/100 rounds), and then
# the two kernels run as before, with their bits.  Only where both products are large
# enough to defer (smaller ones run inline) and the bias is one row for all (a per-row
# bias would not be shared).

FusedMatMulRows = register_op(
    "_FusedMatMulRows",
    inputs=["a: T", "partner_a: T", "b: T", "bias: T"],
    outputs=["product: T", "partner_product: T"],
    attrs=dict(matmul_ops.FusedMatMul.attrs),
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * 2,
)
NotDifferentiable("_FusedMatMulRows")

# ASYNCFLOW_MATMUL_ROWS=0: no merged rows (A/B: benchmarks/models/ab_inproc.py
# --attr asyncflow.ops.matmul_sum:_ROWS=False).
_ROWS = os.environ.get("ASYNCFLOW_MATMUL_ROWS", "") in ("", "1")
# Layers narrower than this (a discriminator's one logit) are left to _FusedMatMul,
# whose small products run inline, cheaper than any gemm call.
_ROWS_MIN_N = 64


def _rows_gemm(out, a, pa, b, tb: bool, relu: bool):
    rows = np.concatenate((a, pa))
    if relu:
        matmul_ops._gemm_relu(out, rows, b, False, tb, 1.0)
    else:
        blas.gemm_into(out, rows, b, False, tb, 1.0, 1.0)


@FusedMatMulRows.kernel("CPU")
async def _fused_matmul_rows(ctx, a, pa, b, bias):
    """Both products in one gemm over the rows of a and pa (see the note above); other
    values, each by _FusedMatMul's kernel (which also words any error)."""
    attrs = ctx.attrs
    tb = attrs["transpose_b"]
    dtype = attrs["T"].np_dtype
    if (
        type(a) is np.ndarray
        and type(pa) is np.ndarray
        and type(b) is np.ndarray
        and type(bias) is np.ndarray
        and a.ndim == 2
        and pa.ndim == 2
        and b.ndim == 2
        and a.dtype == pa.dtype == b.dtype == bias.dtype == dtype
        and a.shape[1] == pa.shape[1] == b.shape[1 if tb else 0]
    ):
        m, pm, n = a.shape[0], pa.shape[0], b.shape[0 if tb else 1]
        if (
            min(m, pm) * n >= matmul_ops._DEFER_ELEMENTS
            and matmul_ops._bias_fits(bias, 1, n, attrs["add_type"] == "BiasAdd")
            and blas.available(dtype)
            and one_thread()
        ):
            out = host_pool.empty((m + pm, n), dtype)
            out[...] = bias
            await ctx.compute(
                _rows_gemm, out, a, pa, b, tb, attrs["relu"], cost=(m + pm) * n * a.shape[1] / 5
            )
            return out[:m], out[m:]
    fused = matmul_ops._fused_matmul
    return await fused(ctx, a, b, bias), await fused(ctx, pa, b, bias)


def merge_matmul_rows(view) -> None:
    """Two _FusedMatMul nodes of the same weights, bias and attributes, not transposing
    their first operand, dead together and with no path between them: one
    _FusedMatMulRows (see the note above)."""
    if not _ROWS:
        return
    nodes = view.nodes
    by_operands: dict = {}
    for i, node in enumerate(nodes):
        if node.op.type != "_FusedMatMul" or node.device.device_type != "CPU":
            continue
        op = node.op
        if op._attr("transpose_a") or not view.available(i):
            continue
        if op._attrs.get("sigmoid"):  # (`_rows_gemm` makes a ReLU's epilogue only)
            continue
        w = node.inputs[1]  # (a narrow layer's products run inline: left alone)
        if w[0] == "feed":
            continue
        shape = nodes[w[0]].op.outputs[w[1]].shape
        n = shape.dims[0 if op._attr("transpose_b") else 1] if shape.rank == 2 else None
        if n is None or n.value is None or n.value < _ROWS_MIN_N:
            continue
        key = (
            tuple(node.inputs[1]),
            tuple(node.inputs[2]),
            id(node.device),
            tuple(sorted((k, str(v)) for k, v in op._attrs.items())),
        )
        by_operands.setdefault(key, []).append(i)
    groups = [js for js in by_operands.values() if len(js) >= 2]
    if not groups:
        return
    from asyncflow.ops.fused_elementwise import _Clusters, _Deadness

    deadness = _Deadness(view, _Clusters(view).order)
    for js in groups:
        taken: set[int] = set()
        for x, j in enumerate(js):
            if j in taken:
                continue
            for q in js[x + 1 :]:
                if (
                    q in taken
                    or deadness.node[q] != deadness.node[j]
                    or q in view._downstream({j})
                    or j in view._downstream({q})
                ):
                    continue
                mm, other = nodes[j], nodes[q]
                inputs = [mm.inputs[0], other.inputs[0], *mm.inputs[1:]]
                attrs = {k: mm.op._attr(k) for k in matmul_ops.FusedMatMul.attrs}
                view.fuse(j, "_FusedMatMulRows", attrs, inputs, [q], outputs=[(q, 0)])
                taken.update((j, q))
                break


# -- a loop's weight product added to its accumulator --------------------------------
#
# Each backward iteration of a dynamic_rnn adds its weight product to the loop's
# accumulator: Add(acc, concat_t^T @ dgates_t), the product one output of the
# iteration's `_MatMulPair` (past gate_gradients' Identity).  As two nodes the product
# is written, then read again with acc by the Add (an element-wise pass over [156,512]
# float32 per iteration in lstm_dynamic, ~50 us traced, 28 a step).  Here the Add and
# the pair are one `_MatMulPairAdd`: the product is accumulated by the gemm itself
# (beta=1) into acc's buffer where the plan lets the kernel take acc over (donation),
# else into a copy of acc.  In a compiled loop the first iteration's acc is the Enter's
# value, so that one is a copy; from the second on the loop gives the node the buffer
# it made the iteration before (asyncflow/frames.py `_carry_takers`).  Bits: OpenBLAS adds the
# whole product of one K block to C in one rounding, as the Add does: the Add's bits
# while K fits one block (measured, 0.3.31 on this EPYC, float32 and float64: equal
# for K <= 384, K = 128 in lstm_dynamic; K = 512 differed in ~30% of the elements,
# each block's sum added to C apart), so the gemm adds only up to _ADD_K_MAX.
# Where the values do not fit the gemm path (a dtype, a shape that broadcasts, a small
# product) the products and the Add's own kernel run as before, errors included.
#
# Only where the product feeds nothing else (no fetch), the Add's deadness is the
# pair's (acc dead exactly when the pair is: a loop's accumulator and its body), and
# acc does not wait for the pair (the node would wait for itself).

# Pair-adds formed (False: the pair and the Add apart, as before; A/B in one process,
# benchmarks/models/ab_inproc.py).
_PAIR_ADD = True
# The gemm adds into acc only for products of at most this many terms (K), where the
# bits are the Add's (one K block, measured equal up to 384); longer ones take the
# plain path (the products, then the Add's kernel).
_ADD_K_MAX = 256

MatMulPairAdd = register_op(
    "_MatMulPairAdd",
    inputs=["acc: T", "a: T", "b: T", "partner_a: T", "partner_b: T"],
    outputs=["sum: T", "partner_product: T"],
    attrs={
        **_PAIR_ATTRS,
        # the Add's type ("AddV2" or "Add") and whether acc was its first operand: the
        # plain path runs that kernel on the operands in that order
        "add": "AddV2",
        "acc_first": True,
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * 2,
)
NotDifferentiable("_MatMulPairAdd")


def _accumulator(ctx, acc):
    """The buffer the sum is written into: acc's own where the plan lets this node take
    it over (nothing else sees it), else a copy of acc."""
    if ctx.may_forward(0, acc) and acc.flags.c_contiguous:
        return acc
    out = host_pool.empty(acc.shape, acc.dtype)
    np.copyto(out, acc)
    return out


@MatMulPairAdd.kernel("CPU")
async def _matmul_pair_add(ctx, acc, a, b, pa, pb):
    attrs = ctx.attrs
    dtype, (a, b, ta, tb, m, n, k), (pa, pb, pta, ptb, pm, pn, pk) = _pair_operands(
        attrs, a, b, pa, pb
    )
    if (
        type(acc) is np.ndarray
        and acc.dtype == dtype
        and acc.shape == (m, n)
        and blas.available(dtype)
        and all(x.dtype == dtype for x in (a, b, pa, pb))
        and min(m * n * k, pm * pn * pk) >= blas._BATCH_MIN_MACS
        and k <= _ADD_K_MAX
    ):
        out = _accumulator(ctx, acc)
        pout = host_pool.empty((pm, pn), dtype)
        args = (out, a, b, ta, tb, 1.0, pout, pa, pb, pta, ptb, 0.0)
        await ctx.compute(blas.gemm_pair, *args, cost=(m * n * k + pm * pn * pk) / 5)
        return out, pout
    product = await _product(ctx, np, a, b, ta, tb)
    partner = await _product(ctx, np, pa, pb, pta, ptb)
    add = get_op_def(attrs["add"]).kernel_for("CPU").fn
    x, y = (acc, product) if attrs["acc_first"] else (product, acc)
    return await add(plain_context(ctx), x, y), partner


def _added_product(view, i: int):
    """For Add node i: (input position of acc, the _MatMulPair node, its output that is
    the other operand, the Identities passed), where that operand is a product of a
    pair feeding only this Add, past Identities each feeding only the next step; else
    None.  (The consumers are as the pass found them: exact for a node none of whose
    consumers an earlier fusion of this pass took, the only nodes whose edges changed.)"""
    nodes = view.nodes
    fetched = {tuple(f) for f in view.partition.fetches}
    for k in (0, 1):
        src, passed, consumer = nodes[i].inputs[k], [], i
        while src[0] != "feed" and tuple(src) not in fetched and (src[0], None) not in fetched:
            j, out = src
            users = view.consumers(j)
            if not view.available(*(q for q, _k in users)):
                break
            users = [q for q, kk in users if nodes[q].inputs[kk][1] == out]
            if users != [consumer] or view.reads_ref(consumer):
                break
            if nodes[j].op.type == "_MatMulPair":
                return 1 - k, j, out, passed
            if nodes[j].op.type != "Identity" or out != 0:
                break
            passed.append(j)
            consumer, src = j, nodes[j].inputs[0]
    return None


def _shapes_differ(x, y) -> bool:
    """Whether tensors x and y have fully known static shapes that differ."""
    x, y = x.shape, y.shape
    return x.is_fully_defined() and y.is_fully_defined() and x.as_list() != y.as_list()


def accumulate_pair_products(view) -> None:
    """Add(acc, a product of a _MatMulPair) where the product feeds only the Add: one
    _MatMulPairAdd (see the note above)."""
    if not _PAIR_ADD:
        return
    nodes = view.nodes
    deadness = None
    for i, node in enumerate(nodes):
        op = node.op
        if op.type not in ("AddV2", "Add") or view.reads_ref(i) or not view.available(i):
            continue
        found = _added_product(view, i)
        if found is None:
            continue
        k_acc, j, out, passed = found
        pair, acc = nodes[j], node.inputs[k_acc]
        if (
            pair.device is not node.device
            or pair.op._attr("T") != op._attr("T")
            or not view.available(j, *passed)
            or _shapes_differ(op.inputs[k_acc], pair.op._outputs[out])
            or (acc[0] != "feed" and acc[0] in view._downstream({j}))
        ):
            continue  # (an accumulator of another static shape: never the gemm path)
        if deadness is None:
            from asyncflow.ops.fused_elementwise import _Clusters, _Deadness

            deadness = _Deadness(view, _Clusters(view).order)
        if deadness.node[i] != deadness.node[j]:
            continue
        pattrs = pair.op._attrs
        mine, other = ("", "partner_") if out == 0 else ("partner_", "")
        ins = list(pair.inputs) if out == 0 else pair.inputs[2:] + pair.inputs[:2]
        attrs = {
            "T": op._attr("T"),
            "transpose_a": bool(pattrs[mine + "transpose_a"]),
            "transpose_b": bool(pattrs[mine + "transpose_b"]),
            "partner_transpose_a": bool(pattrs[other + "transpose_a"]),
            "partner_transpose_b": bool(pattrs[other + "transpose_b"]),
            "add": op.type,
            "acc_first": k_acc == 0,
        }
        view.fuse(i, "_MatMulPairAdd", attrs, [acc, *ins], [j, *passed], outputs=[(j, 1 - out)])
