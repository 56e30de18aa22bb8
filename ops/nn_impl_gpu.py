"""GPU kernels of ops/nn_impl.py's ops whose generic form suits a GPU badly.

SparseSoftmaxCrossEntropyWithLogits: the generic kernel reads the labels' minimum and
maximum on the host to raise TF's CPU error for a label outside [0, classes): on a GPU
two blocking copies in the middle of every training step, and 17 launches in all.
TF's GPU kernel does not check (its documentation: "an exception will be raised on
CPU, and NaN will be returned for corresponding loss and gradient rows on GPU"); this
one does as TF's GPU kernel, in 7 launches: the rows' maximum, exp(x - max) fused, its
sum, the label entries gathered (clipped into range), the loss fused, the gradient fused.

Numerics are the generic kernel's: shifted = x - max, loss = log(sum(exp(shifted))) -
shifted[label], backprop = exp(shifted) / sum - onehot (float16 in float32, rounded
once); a bad label's row gets NaN (0 / 0) added, a good one's 0.
"""

from __future__ import annotations

import numpy as np

from asyncflow.ops import nn_impl

__all__: list[str] = []

_FUSED: dict = {}  # (xp, name) -> its fused kernel (CuPy caches the compiled code in it)


def _kernels(xp):
    got = _FUSED.get(xp)
    if got is None:

        def shifted_exp(x, top):
            return xp.exp(xp.subtract(x, top))

        def nan_unless_valid(labels, classes, zero):
            valid = xp.logical_and(xp.greater_equal(labels, 0), xp.less(labels, classes))
            return xp.true_divide(zero, valid.astype(zero.dtype))

        def loss(total, picked, top, labels, classes, zero):
            value = xp.subtract(xp.log(total), xp.subtract(picked, top))
            return xp.add(value, nan_unless_valid(labels, classes, zero))

        def backprop(e, total, iota, labels, classes, zero):
            onehot = xp.equal(iota, labels).astype(zero.dtype)
            value = xp.subtract(xp.true_divide(e, total), onehot)
            return xp.add(value, nan_unless_valid(labels, classes, zero))

        got = _FUSED[xp] = {
            "shifted_exp": xp.fuse(kernel_name="asyncflow_xent_exp")(shifted_exp),
            "loss": xp.fuse(kernel_name="asyncflow_xent_loss")(loss),
            "backprop": xp.fuse(kernel_name="asyncflow_xent_backprop")(backprop),
        }
    return got


def _sparse_xent(xp, x, labels, iota):
    n = x.shape[1]
    out_dtype = x.dtype
    if x.dtype.itemsize < 4:
        x = x.astype(np.float32)
    ct = x.dtype
    k = _kernels(xp)
    zero = ct.type(0)
    classes = labels.dtype.type(n)
    top = xp.max(x, axis=1, keepdims=True)
    e = k["shifted_exp"](x, top)
    total = xp.sum(e, axis=1, keepdims=True)
    safe = xp.clip(labels, 0, n - 1).reshape(-1, 1)  # (bad rows become NaN below)
    picked = xp.take_along_axis(x, safe, axis=1)
    loss = k["loss"](total[:, 0], picked[:, 0], top[:, 0], labels, classes, zero)
    col = labels.reshape(-1, 1)
    backprop = k["backprop"](e, total, iota, col, classes, zero)
    return loss.astype(out_dtype, copy=False), backprop.astype(out_dtype, copy=False)


@nn_impl.SparseSoftmaxCrossEntropyWithLogits.kernel("GPU")
async def _sparse_xent_gpu(ctx, x, labels):
    xp = ctx.xp
    nn_impl.check_sparse_xent_shapes(x, labels)
    if not x.size:
        return xp.zeros(x.shape[:1], x.dtype), xp.zeros(x.shape, x.dtype)
    n = x.shape[1]
    iota = ctx.kernel_state.get("iota")
    if iota is None or iota.shape[0] != n or iota.dtype != labels.dtype:
        iota = ctx.kernel_state["iota"] = xp.arange(n, dtype=labels.dtype)
    return await ctx.device.compute(_sparse_xent, xp, x, labels, iota)
