"""Array ops from TF's op set asyncflow lacked: UniqueV2/UniqueWithCountsV2 (unique
slices along an axis), InplaceAdd/InplaceSub/InplaceUpdate (rows of x replaced or
shifted, as a new tensor), Empty, NthElement, ParallelConcat, Bincount and
TensorStridedSliceUpdate (a strided slice of a tensor replaced, functionally).

Gradients are TF's: NthElement's goes to the elements equal to the n-th value, split
evenly between ties; TensorStridedSliceUpdate's is the incoming gradient with the slice
zeroed for `input` and the slice itself for `value`.  TF registers none for the others
(tf.gradients raises LookupError through them).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.strided_slice_spec import (
    SliceError,
    basic_index,
    slice_masks,
    strided_slice_spec,
)
from asyncflow.registry import (
    ANY,
    INDEX,
    REAL,
    REQUIRED,
    TypeConstraint,
    register_op,
)

__all__: list[str] = []

_INDEX64 = TypeConstraint(["int32", "int64"], default="int64")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- UniqueV2 / UniqueWithCountsV2 -----------------------------------------------------


def _unique(x, axis):
    """Unique slices of x along `axis` in order of first appearance, the index of each
    slice's unique one, and how often each occurs."""
    x = np.asarray(x)
    axis = np.asarray(axis).reshape(-1)
    if axis.size == 0:
        if x.ndim != 1:
            raise _invalid(f"unique expects a 1D vector. [{x.ndim}]")
        ax = 0
    else:
        if axis.size > 1:
            raise _invalid(
                f"`axis` argument should be a 1D tensor with only 1 element, got {axis.size}"
            )
        ax = int(axis[0])
        if not -x.ndim <= ax < x.ndim:
            raise _invalid(f"axis {ax} is out of range for rank {x.ndim}")
        ax %= x.ndim
    moved = np.moveaxis(x, ax, 0)
    rows = moved.reshape(moved.shape[0], -1)
    seen: dict = {}
    idx = np.empty(rows.shape[0], np.int64)
    firsts = []
    for i, row in enumerate(rows):
        key = row.tobytes() if row.dtype != object else tuple(row)
        j = seen.setdefault(key, len(seen))
        if j == len(firsts):
            firsts.append(i)
        idx[i] = j
    y = np.moveaxis(moved[firsts], 0, ax)
    counts = np.bincount(idx, minlength=len(firsts))
    return y, idx, counts


def _unique_shape(with_counts):
    def shape_fn(op):
        x = op.inputs[0].shape
        out = [tensor_shape.unknown_shape(x.ndims), tensor_shape.TensorShape([None])]
        return out + [tensor_shape.TensorShape([None])] if with_counts else out

    return shape_fn


for _name, _counts in (("UniqueV2", False), ("UniqueWithCountsV2", True)):
    _def = register_op(
        _name,
        inputs=["x: T", "axis: Taxis"],
        outputs=["y: T", "idx: out_idx"] + (["count: out_idx"] if _counts else []),
        attrs={"T": ANY, "Taxis": _INDEX64, "out_idx": INDEX},
        shape_fn=_unique_shape(_counts),
    )

    @_def.kernel("CPU")
    async def _unique_kernel(ctx, x, axis, _counts=_counts):
        y, idx, counts = _unique(x, axis)
        out = ctx.attrs["out_idx"].as_numpy_dtype
        return (y, idx.astype(out), counts.astype(out)) if _counts else (y, idx.astype(out))


# -- InplaceAdd / InplaceSub / InplaceUpdate -------------------------------------------


def _inplace_op(op_type, combine):
    op_def = register_op(
        op_type,
        inputs=["x: T", "i: int32", "v: T"],
        outputs=["y: T"],
        attrs={"T": ANY},
        shape_fn=lambda op: [op.inputs[0].shape],
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, x, i, v):
        x, i, v = np.asarray(x), np.asarray(i).reshape(-1), np.asarray(v)
        if v.ndim != x.ndim or v.shape[1:] != x.shape[1:] or v.shape[0] != i.size:
            raise _invalid(
                f"i and x shape doesn't match: i.shape={list(i.shape)} x.shape="
                f"{list(x.shape)} v.shape={list(v.shape)}"
            )
        bad = (i < 0) | (i >= x.shape[0])
        if bad.any():
            raise _invalid(f"{op_type}: index {int(i[bad][0])} is not in [0, {x.shape[0]})")
        y = x.copy()
        y[i] = combine(y[i], v)
        return y

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


_inplace_op("InplaceAdd", lambda old, v: old + v)
_inplace_op("InplaceSub", lambda old, v: old - v)
_inplace_op("InplaceUpdate", lambda old, v: v)


# -- Empty -----------------------------------------------------------------------------


def _empty_shape(op):
    value = ops.constant_value(op.inputs[0])
    if value is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape([int(d) for d in np.reshape(value, -1)])]


Empty = register_op(
    "Empty",
    inputs=["shape: int32"],
    outputs=["output: dtype"],
    attrs={"dtype": ANY, "init": False},
    shape_fn=_empty_shape,
    stateful=True,
)


@Empty.kernel("CPU", host_memory=("shape",))
async def _empty(ctx, shape):
    # (init=False leaves the contents unspecified in TF; zeros are one such content)
    shape = np.asarray(shape).reshape(-1)
    if (shape < 0).any():
        raise _invalid(f"Empty: shape must be non-negative, got {shape.tolist()}")
    return np.zeros(tuple(int(d) for d in shape), ctx.attrs["dtype"].as_numpy_dtype)


# -- NthElement ------------------------------------------------------------------------


def _nth_shape(op):
    x = op.inputs[0].shape.with_rank_at_least(1)
    n = ops.constant_value(op.inputs[1])
    last = x[-1].value if x.ndims is not None else None
    if n is not None and last is not None and not int(n) < last:
        raise ValueError(f"Input must have last dimension > n = {int(n)} but is {last}")
    if x.ndims is None:
        return [tensor_shape.unknown_shape()]
    return [x[:-1]]


NthElement = register_op(
    "NthElement",
    inputs=["input: T", "n: int32"],
    outputs=["values: T"],
    attrs={"reverse": False, "T": REAL},
    shape_fn=_nth_shape,
)


@NthElement.kernel("CPU", host_memory=("n",))
async def _nth_element(ctx, x, n):
    x, n = np.asarray(x), int(n)
    if x.ndim < 1:
        raise _invalid(f"Input must be >= 1-D, got shape {list(x.shape)}")
    if n < 0:
        raise _invalid(f"Need n >= 0, got {n}")
    if not n < x.shape[-1]:
        raise _invalid(f"Input must have at least n+1 columns, got {x.shape[-1]}")
    if ctx.attrs["reverse"]:
        n = x.shape[-1] - 1 - n
    return np.partition(x, n, axis=-1)[..., n]


@NthElement.gradient
def _nth_element_grad(op, grad):
    x, values = op.inputs[0], op.outputs[0]
    hit = _g.apply("Equal", x, _g.apply("ExpandDims", values, -1))
    hits = _g.cast(hit, grad.dtype)
    count = _g.apply("Sum", hits, _g.constant([-1]), keep_dims=True)
    share = _g.apply("RealDiv", hits, count)
    return [_g.mul(share, _g.apply("ExpandDims", grad, -1)), None]


# -- ParallelConcat --------------------------------------------------------------------


ParallelConcat = register_op(
    "ParallelConcat",
    inputs=["values: N * T"],
    outputs=["output: T"],
    attrs={"N": REQUIRED, "T": ANY, "shape": REQUIRED},
    shape_fn=lambda op: [tensor_shape.TensorShape(op._attrs["shape"])],
)


@ParallelConcat.kernel("CPU")
async def _parallel_concat(ctx, *values):
    values = [np.asarray(v) for v in values]
    for v in values:
        if v.ndim < 1 or v.shape[0] != 1:
            raise _invalid(f"ParallelConcat: each value must have first dimension 1, got "
                           f"{list(v.shape)}")  # fmt: skip
    return np.concatenate(values, axis=0)


# -- Bincount --------------------------------------------------------------------------


Bincount = register_op(
    "Bincount",
    inputs=["arr: int32", "size: int32", "weights: T"],
    outputs=["bins: T"],
    attrs={"T": TypeConstraint(["int32", "int64", "float32", "float64"])},
    shape_fn=lambda op: [tensor_shape.TensorShape([_const_int(op.inputs[1])])],
)


def _const_int(t):
    value = ops.constant_value(t)
    return None if value is None else int(value)


@Bincount.kernel("CPU", host_memory=("size",))
async def _bincount(ctx, arr, size, weights):
    arr, size, weights = np.asarray(arr).reshape(-1), int(size), np.asarray(weights)
    if size < 0:
        raise _invalid(f"size ({size}) must be non-negative")
    if (arr < 0).any():
        raise _invalid(f"Input arr must be non-negative! Got {int(arr[arr < 0][0])}")
    out = ctx.attrs["T"].as_numpy_dtype
    keep = arr < size
    if weights.size == 0:
        return np.bincount(arr[keep], minlength=size)[:size].astype(out)
    if weights.size != arr.size:
        raise _invalid("weights and arr must have the same shape")
    w = weights.reshape(-1)[keep]
    return np.bincount(arr[keep], weights=w, minlength=size)[:size].astype(out)


# -- TensorStridedSliceUpdate ----------------------------------------------------------


TensorStridedSliceUpdate = register_op(
    "TensorStridedSliceUpdate",
    inputs=["input: T", "begin: Index", "end: Index", "strides: Index", "value: T"],
    outputs=["output: T"],
    attrs={
        "T": ANY,
        "Index": INDEX,
        "begin_mask": 0,
        "end_mask": 0,
        "ellipsis_mask": 0,
        "new_axis_mask": 0,
        "shrink_axis_mask": 0,
    },
    shape_fn=lambda op: [op.inputs[0].shape],
)


@TensorStridedSliceUpdate.kernel("CPU", host_memory=("begin", "end", "strides"))
async def _tensor_strided_slice_update(ctx, x, begin, end, strides, value):
    x = np.asarray(x)
    try:
        final, canon = strided_slice_spec(
            list(x.shape), np.asarray(begin), np.asarray(end), np.asarray(strides),
            slice_masks(ctx.attrs),
        )  # fmt: skip
    except SliceError as e:
        raise _invalid(str(e)) from None
    out = x.copy()
    if not all(final):
        return out
    value = np.asarray(value)
    try:
        value = np.broadcast_to(value, tuple(final))
    except ValueError:
        raise _invalid(
            f"Cannot broadcast input shape {list(value.shape)} into final shape {list(final)}"
        ) from None
    view = out[basic_index(canon)]
    view[...] = value.reshape(view.shape)
    return out


@TensorStridedSliceUpdate.gradient
def _tensor_strided_slice_update_grad(op, grad):
    _, begin, end, strides, value = op.inputs
    masks = {k: op._attrs[k] for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                      "new_axis_mask", "shrink_axis_mask")}  # fmt: skip
    zeros = _g.zeros_like(value)
    grad_input = _g.apply("TensorStridedSliceUpdate", grad, begin, end, strides, zeros, **masks)
    grad_value = _g.apply("StridedSlice", grad, begin, end, strides, **masks)
    grad_value = _g.apply("Reshape", grad_value, _g.apply("Shape", value))
    return [grad_input, None, None, None, grad_value]


# -- ScatterNdMax / ScatterNdMin (ref variables; their Resource* twins) ----------------


def _register_scatter_nd_extremes() -> None:
    from asyncflow.ops import resource_training_ops, scatter_nd_ops

    for op_type, mode in (("ScatterNdMax", "max"), ("ScatterNdMin", "min")):
        op_def = scatter_nd_ops._ref_scatter_nd_op(op_type, mode, REAL)
        op_def.attrs["use_locking"] = False  # (TF's default here, unlike ScatterNdAdd's)
        resource_training_ops._twin(op_type)
        get = resource_training_ops.get_op_def("Resource" + op_type)
        get.attrs["use_locking"] = True  # (TF's ResourceScatterNd* default)


_register_scatter_nd_extremes()
