"""TF's ApproxTopK (`tf.math.approx_max_k`, `approx_min_k`, `tf.approx_top_k`): the k
largest (smallest) entries along one dimension and their indices.  On CPU and GPU TF
computes them exactly (its TopK), sorted, ties in index order; here likewise.  (TF 2.21's
CPU kernel covers only max_k along the last dimension; the others run here with the same
exact rule, as TF's TPU op documents them.  NaN, which TF's TopK places inconsistently,
counts here as the largest value.)
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.manip_ops import broadcast_to
from asyncflow.ops.reduction_ops import range as _range
from asyncflow.ops.scatter_nd_ops import scatter_nd
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["approx_top_k"]  # (approx_max_k / approx_min_k: tf.math and tf.nn)


def _dim(rank: int, d: int) -> int:
    return d + rank if d < 0 else d


def _approx_top_k_shape(op):
    x = op.inputs[0].shape
    k = int(op._attr("k"))
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    if x.ndims is None:
        return [x, x]
    d = _dim(x.ndims, int(op._attr("reduction_dimension")))
    if not 0 <= d < x.ndims:
        raise ValueError(
            f"reduction_dimension {op._attr('reduction_dimension')} is out of range for an "
            f"input of rank {x.ndims}"
        )
    if x[d].value is not None and x[d].value < k:
        raise ValueError(f"input must have at least k = {k} entries along dimension {d}")
    dims = list(x.dims)
    dims[d] = tensor_shape.Dimension(k)
    out = tensor_shape.TensorShape(dims)
    return [out, out]


ApproxTopK = register_op(
    "ApproxTopK",
    inputs=["input: T"],
    outputs=["values: T", "indices: int32"],
    attrs={
        "k": 0,
        "reduction_dimension": -1,
        "recall_target": 0.95,
        "is_max_k": True,
        "reduction_input_size_override": -1,
        "aggregate_to_topk": True,
        "T": TypeConstraint(["float16", "bfloat16", "float32"]),
    },
    shape_fn=_approx_top_k_shape,
)


def _top_k_along(xp, x, k: int, d: int, is_max: bool):
    moved = xp.moveaxis(x, d, -1).astype(np.float64)
    nan = xp.isnan(moved)
    key = xp.where(nan, 0.0, moved)
    if is_max:
        key = -key
    # by value, ties in index order (stable); then NaN moved to the front for max_k and
    # to the back for min_k (NaN as the largest value, as TF's TopK)
    order = xp.argsort(key, axis=-1, kind="stable")
    nan_sorted = xp.take_along_axis(nan, order, axis=-1)
    front = ~nan_sorted if is_max else nan_sorted
    order = xp.take_along_axis(order, xp.argsort(front, axis=-1, kind="stable"), axis=-1)
    idx = order[..., :k]
    values = xp.take_along_axis(xp.moveaxis(x, d, -1), idx, axis=-1)
    return xp.moveaxis(values, -1, d).copy(), xp.moveaxis(idx, -1, d).astype(np.int32)


@ApproxTopK.kernel()
async def _approx_top_k(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    k = int(ctx.attrs["k"])
    d = _dim(x.ndim, int(ctx.attrs["reduction_dimension"]))
    if not 0 <= d < x.ndim:
        raise errors.InvalidArgumentError(
            None, None, f"reduction_dimension {d} is out of range for an input of rank {x.ndim}"
        )
    if x.shape[d] < k:
        raise errors.InvalidArgumentError(
            None, None, f"input must have at least k columns. Had {x.shape[d]}, needed {k}"
        )
    return await ctx.compute(_top_k_along, xp, x, k, d, bool(ctx.attrs["is_max_k"]))


@ApproxTopK.gradient
def _approx_top_k_grad(op, grad, _):
    """TF's: the values' gradient scattered back to where they were taken from."""
    idx_shape = op.outputs[1].shape
    x_shape = op.inputs[0].shape
    if not idx_shape.is_fully_defined() or not x_shape.is_fully_defined():
        raise ValueError("The gradient of ApproxTopK needs static shapes (as TF's).")
    rank = x_shape.ndims
    d = _dim(rank, int(op._attr("reduction_dimension")))
    dims = idx_shape.as_list()
    lifted = dims + [1]
    coords = []
    for i in range(rank):
        if i == d:
            coords.append(ops.apply_op("Reshape", [op.outputs[1], lifted]).outputs[0])
            continue
        shape = [1] * (rank + 1)
        shape[i] = dims[i]
        iota = ops.apply_op("Reshape", [_range(dims[i]), shape]).outputs[0]
        coords.append(broadcast_to(iota, lifted))
    indices = ops.apply_op("ConcatV2", [coords, -1]).outputs[0]
    return [scatter_nd(indices, grad, x_shape.as_list())]


def _approx(operand, k, reduction_dimension, recall_target, is_max_k, override, aggregate, name):
    attrs = {
        "k": int(k),
        "reduction_dimension": int(reduction_dimension),
        "recall_target": float(recall_target),
        "is_max_k": bool(is_max_k),
        "reduction_input_size_override": int(override),
        "aggregate_to_topk": bool(aggregate),
    }
    op = ops.apply_op("ApproxTopK", [operand], attrs, name=name)
    return op.outputs[0], op.outputs[1]


def approx_max_k(
    operand,
    k,
    reduction_dimension=-1,
    recall_target=0.95,
    reduction_input_size_override=-1,
    aggregate_to_topk=True,
    name=None,
):
    """`tf.math.approx_max_k`: (values, indices) of the k largest along a dimension.

    Raises:
      ValueError: k < 0, or larger than the dimension when known at build time.
      InvalidArgumentError: the same at run time.
    """
    return _approx(
        operand, k, reduction_dimension, recall_target, True,
        reduction_input_size_override, aggregate_to_topk, name,
    )  # fmt: skip


def approx_min_k(
    operand,
    k,
    reduction_dimension=-1,
    recall_target=0.95,
    reduction_input_size_override=-1,
    aggregate_to_topk=True,
    name=None,
):
    """`tf.math.approx_min_k`: (values, indices) of the k smallest along a dimension."""
    return _approx(
        operand, k, reduction_dimension, recall_target, False,
        reduction_input_size_override, aggregate_to_topk, name,
    )  # fmt: skip


def approx_top_k(
    input,  # noqa: A002 - TF's name
    k,
    reduction_dimension=-1,
    recall_target=0.95,
    is_max_k=True,
    reduction_input_size_override=-1,
    aggregate_to_topk=True,
    name=None,
):
    """`tf.approx_top_k` (the raw op's wrapper): approx_max_k or approx_min_k."""
    return _approx(
        input, k, reduction_dimension, recall_target, is_max_k,
        reduction_input_size_override, aggregate_to_topk, name,
    )  # fmt: skip
