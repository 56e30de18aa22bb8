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

Errors: MatMul's own checks and messages for each product; a sum that does not fit the
gemm path (products of different shapes, another dtype, small) computes the products
and runs AddN's own kernel on the operands in their original order, which words any
shape error as AddN does.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.devices import cpu_budget
from asyncflow.ops import blas
from asyncflow.ops.math_helpers import _shape_str
from asyncflow.ops.matmul_ops import _incompatible, _product, plain_context
from asyncflow.registry import FLOATING, NotDifferentiable, get_op_def, register_op

__all__ = ["FusedMatMulAddN", "fuse_matmul_add_n"]

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
    runs = runs_for(count, macs)
    return await ctx.compute(blas.matmul_sum, pairs, addends, shape, runs, cost=macs / 5)


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
        inputs = [src for mm in products for src in mm.inputs] + addends
        view.fuse(i, "_FusedMatMulAddN", attrs, inputs, absorbed)
