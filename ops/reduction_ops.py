"""Reductions (Sum, Mean, Max, Min, Prod, Any, All), ArgMax/ArgMin, Range and LinSpace.

Reductions take their axes as an int32/int64 tensor ("reduction_indices") and a
`keep_dims` attr, as TF's ops do.  Axes that are constants are checked when the graph
is built (ValueError); axes that arrive at run time are checked by the kernel
(InvalidArgumentError "Invalid reduction dimension (3 for input with 2 dimension(s)").

On the CPU, float Sum and Mean (half, bfloat16, float32, float64) add in the order TF's
Eigen kernels do (ops/eigen_reduce), so their bits are TF's, for the session's intra-op
thread count (cpu_budget), on which a large full reduction's split depends.

Invariant: Range and LinSpace have constant folders, so shape functions downstream see
their sizes and values when every input is a constant.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.devices import cpu_budget
from asyncflow.ops import eigen_reduce
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_ops import _as_dtype, _builder_scope, _quiet, _shape_str, cast
from asyncflow.registry import (
    FLOATING,
    INDEX,
    NUMERIC,
    REAL,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)

__all__ = [
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_any",
    "reduce_all",
    "reduce_euclidean_norm",
    "argmax",
    "argmin",
    "arg_max",
    "arg_min",
    "range",
    "linspace",
    "lin_space",
]


def _host_ints(value) -> list[int]:
    """An index tensor's values as Python ints (works for NumPy and CuPy arrays)."""
    if type(value) is np.ndarray and value.ndim <= 1 and value.dtype.kind in "iu":
        # (the common case, a host vector of axes: its list is already Python ints;
        # the general path below made an array of it again, ~5 us a reduction)
        return value.tolist() if value.ndim else [value.item()]
    value = value.tolist() if hasattr(value, "tolist") else value
    if isinstance(value, list):
        return [int(v) for v in np.asarray(value).reshape(-1)]
    return [int(value)]


def _deprecated_lookup(new_name, new_value, old_name, old_value):
    if new_value is not None and old_value is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'.")
    return new_value if new_value is not None else old_value


# -- reductions ------------------------------------------------------------------------------


def _reduction_shape(op):
    x = op.inputs[0].shape
    keep = op._attr("keep_dims")
    if (op.inputs[1].shape.ndims or 0) > 1:  # TF's shape-function words
        raise ValueError(f"Shape must be at most rank 1 but is rank {op.inputs[1].shape.ndims}")
    axes = ops.constant_value(op.inputs[1])
    if axes is None or x.ndims is None:
        if keep and x.ndims is not None:
            return [tensor_shape.unknown_shape(x.ndims)]
        return [tensor_shape.unknown_shape()]
    rank = x.ndims
    reduced = set()
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise ValueError(f"Invalid reduction dimension {a} for input with {rank} dimensions.")
        reduced.add(a % rank)
    dims = []
    for i, d in enumerate(x.dims):
        if i not in reduced:
            dims.append(d)
        elif keep:
            dims.append(1)
    return [tensor_shape.TensorShape(dims)]


def _reduction_axes(x, axes) -> tuple[int, ...]:
    rank = x.ndim
    if type(axes) is np.ndarray and axes.ndim == 1 and axes.size == 1:
        a = int(axes[0])  # the common case (a bias gradient's Sum): one axis
        if -rank <= a < rank:
            return (a % rank,)
    out = set()
    for a in _host_ints(axes):
        if not -rank <= a < rank:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid reduction dimension ({a} for input with {rank} dimension(s)"
            )
        if a % rank in out:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Invalid reduction arguments: Axes contains duplicate dimension: {a % rank}",
            )
        out.add(a % rank)
    return tuple(sorted(out))


def _reduced_shape(shape, axis, keep) -> tuple[int, ...]:
    if keep:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _mean(xp, x, axis, keep):
    if x.dtype.kind in "iu":
        count = math.prod(x.shape[i] for i in axis)
        # Types narrower than 32 bits sum (and divide by a count they may not hold) in
        # 64 bits, as TF's kernel does since b/145030710.
        wide = np.int64 if x.dtype.itemsize < 4 and x.dtype.kind == "i" else x.dtype
        if x.dtype.itemsize < 4 and x.dtype.kind == "u":
            wide = np.uint64
        total = xp.sum(x, axis=axis, keepdims=keep, dtype=wide)
        if count == 0:
            return total.astype(x.dtype)
        # Integer mean is C++ division: it truncates toward zero.
        q = xp.floor_divide(total, count)
        q = q + ((xp.remainder(total, count) != 0) & (total < 0)).astype(q.dtype)
        return q.astype(x.dtype, copy=False)
    count = math.prod(x.shape[i] for i in axis)
    if not count:  # 0 / 0, without NumPy's warning
        return xp.full_like(xp.sum(x, axis=axis, keepdims=keep, dtype=x.dtype), np.nan)
    if xp is np and x.dtype in eigen_reduce.SUPPORTED:  # TF's order of additions: its bits
        out = eigen_reduce.reduce_mean(x, axis, cpu_budget.budget())
        return out.reshape(_reduced_shape(x.shape, axis, True)) if keep else out
    return xp.mean(x, axis=axis, keepdims=keep)


def _extreme(fn_name: str, identity: str):
    def reduce(xp, x, axis, keep):
        if x.size == 0:
            # Reducing nothing yields the identity (TF: lowest for Max, highest for Min).
            dt = dtypes.as_dtype(x.dtype)
            value = dt.min if identity == "min" else dt.max
            if dt.is_floating:
                value = -np.inf if identity == "min" else np.inf
            return xp.full(_reduced_shape(x.shape, axis, keep), value, dtype=x.dtype)
        return getattr(xp, fn_name)(x, axis=axis, keepdims=keep)

    return reduce


def _sum(xp, x, axis, keep):
    if xp is np and x.dtype in eigen_reduce.SUPPORTED:  # TF's order of additions: its bits
        out = eigen_reduce.reduce_sum(x, axis, cpu_budget.budget())
        return out.reshape(_reduced_shape(x.shape, axis, True)) if keep else out
    if xp is np:  # the ufunc's reduce directly: np.sum's Python wrapper costs ~5 µs
        return np.add.reduce(x, axis=axis, dtype=x.dtype, keepdims=keep)
    return xp.sum(x, axis=axis, keepdims=keep, dtype=x.dtype)


_REDUCERS = {
    "Sum": _sum,
    "Prod": lambda xp, x, axis, keep: xp.prod(x, axis=axis, keepdims=keep, dtype=x.dtype),
    "Mean": _mean,
    "Max": _extreme("max", "min"),
    "Min": _extreme("min", "max"),
    "Any": lambda xp, x, axis, keep: xp.any(x, axis=axis, keepdims=keep),
    "All": lambda xp, x, axis, keep: xp.all(x, axis=axis, keepdims=keep),
    "EuclideanNorm": lambda xp, x, axis, keep: _euclidean_norm(xp, x, axis, keep),
}


def _euclidean_norm(xp, x, axis, keep):
    """sqrt(sum(|x|^2)) computed in x's own dtype (integers truncate, as TF's kernel)."""
    sq = x * xp.conj(x) if x.dtype.kind == "c" else x * x
    total = xp.sum(sq, axis=axis, keepdims=keep, dtype=x.dtype)
    if x.dtype.kind in "iu":
        return xp.sqrt(total.astype(np.float64)).astype(x.dtype)
    return xp.sqrt(total)


# Reductions whose value over no axes is their input itself (EuclideanNorm's is |x|).
_NO_AXES_IS_INPUT = frozenset(["Sum", "Mean", "Prod", "Max", "Min", "Any", "All"])


def _reduction_op(op_type: str, types: TypeConstraint | None):
    if types is None:  # Any / All
        inputs, attrs = ["input: bool", "reduction_indices: Tidx"], {}
        outputs = ["output: bool"]
    else:
        inputs, attrs = ["input: T", "reduction_indices: Tidx"], {"T": types}
        outputs = ["output: T"]
    op_def = register_op(
        op_type,
        inputs=inputs,
        outputs=outputs,
        attrs={**attrs, "keep_dims": False, "Tidx": INDEX},
        shape_fn=_reduction_shape,
    )
    reducer = _REDUCERS[op_type]
    passes_through = op_type in _NO_AXES_IS_INPUT

    @op_def.kernel(host_memory=("reduction_indices",))
    async def _kernel(ctx, x, axes):
        xp = ctx.xp
        x = xp.asarray(x)
        axis = _reduction_axes(x, axes)
        if not axis and passes_through and type(x) is np.ndarray:
            # Nothing reduced (a broadcast gradient's Sum over BroadcastGradientArgs'
            # empty axes): the input's values, as a view (TF aliases the input buffer);
            # a view is never taken over by a consumer (KernelContext.may_forward).
            return x.view()
        keep = ctx.attrs["keep_dims"]
        out = await ctx.device.compute(_quiet, xp, reducer, xp, x, axis, keep)
        return _as_dtype(xp, out, ctx.attrs["T"] if types is not None else dtypes.bool_)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


Sum = _reduction_op("Sum", NUMERIC)
Mean = _reduction_op("Mean", NUMERIC)
Prod = _reduction_op("Prod", NUMERIC)
Max = _reduction_op("Max", REAL)
Min = _reduction_op("Min", REAL)
Any = _reduction_op("Any", None)
All = _reduction_op("All", None)
EuclideanNorm = _reduction_op("EuclideanNorm", NUMERIC)


def _reduction_dims(x, axis):
    """`axis`, or every axis of x when None (a Const, or Range(0, Rank(x)) if unknown)."""
    if axis is not None:
        return axis
    rank = x.shape.ndims
    if rank is not None:  # a Const of the builder's scope (TF's "Const", not "Sum/...")
        return ops.convert_to_tensor(np.arange(rank, dtype=np.int32))
    rank_t = ops.apply_op("Rank", [x]).outputs[0]
    return range(0, rank_t, 1)


def _reduction_builder(op_type: str, doc: str):
    def builder(
        input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None
    ):
        axis = _deprecated_lookup("axis", axis, "reduction_indices", reduction_indices)
        keepdims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
        keepdims = bool(keepdims) if keepdims is not None else False
        if _ragged.is_ragged(input_tensor):  # (TF's dispatch: ragged_math_ops' reduce)
            return _ragged.reduce(op_type, input_tensor, axis, keepdims, name)
        if op_type in ("Any", "All") and not isinstance(input_tensor, ops.Tensor):
            x = ops.convert_to_tensor(input_tensor, dtype=dtypes.bool)  # [] is a bool []
        else:
            x = ops.convert_to_tensor(input_tensor)
        dims = _reduction_dims(x, axis)
        out = ops.apply_op(op_type, [x, dims], {"keep_dims": keepdims}, name=name).outputs[0]
        if axis is None and not keepdims and out.shape.ndims is None:
            out.set_shape([])  # every axis reduced: a scalar whatever the rank
        return out

    builder.__doc__ = (
        doc + "\n\nReduces along `axis` (every axis when None); `keepdims` keeps them with size 1."
        "\n\nRaises:\n  ValueError: a constant axis is out of range for a known rank, or both"
        " axis and reduction_indices are given.\n  InvalidArgumentError: (at run time) an"
        " axis out of range."
    )
    return _dispatch.add_dispatch_support(builder)


def reduced_shape(input_shape, axes):
    """TF's `math_ops.reduced_shape`: `input_shape` (a shape vector) with the dimensions
    in `axes` (negative counting from the end) set to 1: a NumPy array when both are
    known at build time (as TF's), else an int32 tensor."""
    shape = ops.convert_to_tensor(input_shape, dtype=dtypes.int32)
    axes = ops.convert_to_tensor(axes, dtype=dtypes.int32)
    shape_v, axes_v = ops.constant_value(shape), ops.constant_value(axes)
    if shape_v is not None and axes_v is not None:
        out = np.array(shape_v, np.int32).reshape(-1)
        for a in np.asarray(axes_v).reshape(-1).tolist():
            out[a % len(out)] = 1
        return out
    rank = ops.apply_op("Size", [shape], {"out_type": dtypes.int32}).outputs[0]
    axes = ops.apply_op("FloorMod", [axes, rank]).outputs[0]
    positions = ops.apply_op(
        "Range", [np.int32(0), rank, np.int32(1)], {"Tidx": dtypes.int32}
    ).outputs[0]
    ones = ops.apply_op(
        "Fill",
        [
            ops.apply_op("Shape", [axes], {"out_type": dtypes.int32}).outputs[0],
            np.int32(1),
        ],  # fmt: skip
    ).outputs[0]
    return ops.apply_op("DynamicStitch", [[positions, axes], [shape, ones]], {"N": 2}).outputs[0]


reduce_sum = _reduction_builder("Sum", "Computes the sum of elements across dimensions.")
reduce_mean = _reduction_builder(
    "Mean", "Computes the mean across dimensions (integer inputs: integer division)."
)
reduce_prod = _reduction_builder("Prod", "Computes the product of elements across dimensions.")
reduce_max = _reduction_builder("Max", "Computes the maximum of elements across dimensions.")
reduce_min = _reduction_builder("Min", "Computes the minimum of elements across dimensions.")
reduce_any = _reduction_builder("Any", "Computes the logical or of elements across dimensions.")
reduce_all = _reduction_builder("All", "Computes the logical and of elements across dimensions.")
reduce_euclidean_norm = _reduction_builder(
    "EuclideanNorm",
    "Computes sqrt(sum(x**2)) across dimensions (`tf.math.reduce_euclidean_norm`).",
)


# -- ArgMax / ArgMin -------------------------------------------------------------------------


def _arg_shape(op):
    x = op.inputs[0].shape
    op.inputs[1].shape.with_rank(0)
    dim = ops.constant_value(op.inputs[1])
    if x.ndims is None:
        return [tensor_shape.unknown_shape()]
    if dim is None:
        return [tensor_shape.unknown_shape(builtins.max(x.ndims - 1, 0))]
    dim = int(dim)
    if not -x.ndims <= dim < x.ndims:
        raise ValueError(f"Expected dimension in the range [{-x.ndims}, {x.ndims}), but got {dim}")
    dims = x.dims
    del dims[dim % x.ndims]
    return [tensor_shape.TensorShape(dims)]


def _arg_op(op_type: str, fn_name: str):
    op_def = register_op(
        op_type,
        inputs=["input: T", "dimension: Tidx"],
        outputs=["output: output_type"],
        attrs={
            "T": TypeConstraint(REAL.allowed | {dtypes.bool_}),
            "Tidx": INDEX,
            "output_type": TypeConstraint([dtypes.int32, dtypes.int64], default=dtypes.int64),
        },
        shape_fn=_arg_shape,
    )

    @op_def.kernel(host_memory=("dimension",))
    async def _kernel(ctx, x, dimension):
        xp = ctx.xp
        x = xp.asarray(x)
        dims = _host_ints(dimension)
        if np.ndim(dimension) != 0:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"dim must be a scalar, but received tensor of shape: "
                f"{_shape_str(np.shape(dimension))}",
            )
        dim = dims[0]
        if not -x.ndim <= dim < x.ndim:
            raise errors.InvalidArgumentError(
                None, None, f"Expected dimension in the range [{-x.ndim}, {x.ndim}), but got {dim}"
            )
        if x.shape[dim] == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Reduction axis {dim} is empty in shape {_shape_str(x.shape)}"
            )
        out = await ctx.device.compute(_nan_skipping_arg, xp, fn_name, x, dim)
        return _as_dtype(xp, out, ctx.attrs["output_type"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _nan_skipping_arg(xp, fn_name: str, x, dim: int):
    """TF's ArgMax / ArgMin (Eigen's tuple reducers): a NaN is never greater or less, so
    the index is the first of the largest (smallest) value that is not NaN, 0 where
    every value is NaN; NumPy's argmax stops at the first NaN instead.  Measured on TF
    2.21: argmax([1, nan, 3]) = 2, argmin = 0; argmax([nan, nan]) = 0."""
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        nan = xp.isnan(x)
        if xp is not np or nan.any():  # (on a device: no host read to decide)
            fill = -np.inf if fn_name == "argmax" else np.inf
            x = xp.where(nan, xp.asarray(fill, x.dtype), x)
    return getattr(xp, fn_name)(x, dim)


ArgMax = _arg_op("ArgMax", "argmax")
ArgMin = _arg_op("ArgMin", "argmin")


def _arg_builder(op_type: str, doc: str):
    def builder(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
        axis = _deprecated_lookup("axis", axis, "dimension", dimension)
        if axis is None:
            axis = 0
        attrs = {"output_type": dtypes.as_dtype(output_type)}
        return ops.apply_op(op_type, [input, axis], attrs, name=name).outputs[0]

    builder.__doc__ = (
        doc + "\n\nRaises:\n  ValueError: a constant axis out of range.\n"
        "  InvalidArgumentError: (at run time) an axis out of range, or an empty axis."
    )
    return _dispatch.add_dispatch_support(builder)


argmax = _arg_builder("ArgMax", "Index of the largest value along `axis` (default 0).")
argmin = _arg_builder("ArgMin", "Index of the smallest value along `axis` (default 0).")


def arg_max(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002
    """TF1's deprecated `tf.arg_max` (the raw ArgMax op): `argmax` along `dimension`."""
    return argmax(input, axis=dimension, name=name, output_type=output_type)


def arg_min(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002
    """TF1's deprecated `tf.arg_min` (the raw ArgMin op): `argmin` along `dimension`."""
    return argmin(input, axis=dimension, name=name, output_type=output_type)


# -- Range -----------------------------------------------------------------------------------

_RANGE_TYPES = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]


def _range_size(start, limit, delta, np_dtype) -> int:
    """Number of elements of range(start, limit, delta); InvalidArgumentError if invalid.

    Arguments are Python numbers; floats are divided in the op's own precision, as TF's
    kernel does, so float32 sizes match TF's.
    """
    if delta == 0:
        raise errors.InvalidArgumentError(None, None, f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise errors.InvalidArgumentError(
            None, None, f"Requires start <= limit when delta > 0: {start}/{limit}"
        )
    if delta < 0 and start < limit:
        raise errors.InvalidArgumentError(
            None, None, f"Requires start >= limit when delta < 0: {start}/{limit}"
        )
    if np_dtype.kind in "iu":
        start, limit, delta = int(start), int(limit), int(delta)
        size = (builtins.abs(limit - start) + builtins.abs(delta) - 1) // builtins.abs(delta)
    else:
        t = np_dtype.type
        size = int(np.ceil(np.abs((t(limit) - t(start)) / t(delta))))
    if size > _INT64_MAX:
        raise errors.InvalidArgumentError(
            None, None, f"Requires ((limit - start) / delta) <= {_INT64_MAX}"
        )
    return size


_INT64_MAX = 2**63 - 1
# Build-time folding (constant_value, lowering) computes small ranges only; a large one
# is the kernel's, which checks the allocation (ResourceExhaustedError).
_FOLD_MAX_RANGE = 1 << 20


def _range_values(xp, start, limit, delta, np_dtype):
    size = _range_size(start, limit, delta, np_dtype)
    return xp.arange(size, dtype=np_dtype) * np_dtype.type(delta) + np_dtype.type(start)


def _scalar(value, what: str):
    if np.ndim(value) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be a scalar, not shape {_shape_str(np.shape(value))}"
        )
    return value.item() if hasattr(value, "item") else value


def _fold_range(t):
    values = [ops.constant_value(x) for x in t.op.inputs]
    if any(v is None or np.ndim(v) != 0 for v in values):
        return None
    np_dtype = np.dtype(t.dtype.as_numpy_dtype)
    start, limit, delta = (v.item() for v in values)
    try:
        if _range_size(start, limit, delta, np_dtype) > _FOLD_MAX_RANGE:
            return None
    except errors.InvalidArgumentError:
        return None
    return _range_values(np, start, limit, delta, np_dtype)


def _range_shape(op):
    for t in op.inputs:
        t.shape.with_rank(0)
    values = [ops.constant_value(x) for x in op.inputs]
    if any(v is None for v in values):
        return [tensor_shape.TensorShape([None])]
    try:
        np_dtype = np.dtype(op.outputs[0].dtype.as_numpy_dtype)
        size = _range_size(*(v.item() for v in values), np_dtype)
        return [tensor_shape.TensorShape([size])]
    except errors.InvalidArgumentError as e:
        raise ValueError(str(e)) from None


Range = register_op(
    "Range",
    inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
    outputs=["output: Tidx"],
    attrs={"Tidx": TypeConstraint([dtypes.bfloat16, *_RANGE_TYPES], default=dtypes.int32)},
    shape_fn=_range_shape,
)
ops.register_constant_folder("Range", _fold_range)


@Range.kernel(host_memory=("start", "limit", "delta"))
async def _range(ctx, start, limit, delta):
    start = _scalar(start, "start")
    limit = _scalar(limit, "limit")
    delta = _scalar(delta, "delta")
    dtype = ctx.attrs["Tidx"]
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    ctx.device.check_alloc(_range_size(start, limit, delta, np_dtype), dtype)
    return _range_values(ctx.xp, start, limit, delta, np_dtype)


def _range_arg(v, dtype, name):
    """A range argument as a tensor of `dtype`: a tensor of another dtype is cast (TF's
    `range(constant(4), dtype=int64)`)."""
    if dtype is not None and isinstance(v, ops.Tensor) and v.dtype != dtypes.as_dtype(dtype):
        return cast(v, dtype)
    return ops.convert_to_tensor(v, dtype=dtype, name=name)


@_dispatch.add_dispatch_support
def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 - TF's name
    """A 1-D tensor [start, start + delta, ...) stopping before `limit` (op Range).

    `range(n)` is `range(0, n)`.  Without `dtype`, the widest of the arguments' dtypes
    in (int32, int64, float32, float64) is used, so Python ints give int32.

    Raises:
      ValueError: constant arguments with delta == 0 or delta pointing away from limit.
      InvalidArgumentError: (at run time) the same for values known only then.
      ResourceExhaustedError: (at run time) the result would not fit in memory.
    """
    if limit is None:
        start, limit = 0, start
    with _builder_scope(name, "Range", [start, limit, delta]) as op_name:
        args = [
            _range_arg(v, dtype, n)
            for v, n in zip((start, limit, delta), ("start", "limit", "delta"), strict=True)
        ]
        if dtype is None:
            try:
                inferred = builtins.max(
                    (a.dtype for a in args), key=lambda d: _RANGE_TYPES.index(d)
                )
            except ValueError:
                names = ", ".join(a.dtype.name for a in args)
                raise TypeError(f"range: unsupported argument dtypes ({names})") from None
            args = [cast(a, inferred) for a in args]
    return ops.apply_op("Range", args, name=op_name).outputs[0]


# -- LinSpace --------------------------------------------------------------------------------


def _linspace_values(xp, start, stop, num, np_dtype):
    if num <= 0:
        raise errors.InvalidArgumentError(None, None, f"Requires num > 0: {num}")
    return xp.linspace(start, stop, num, dtype=np_dtype)


def _fold_linspace(t):
    values = [ops.constant_value(x) for x in t.op.inputs]
    if any(v is None or np.ndim(v) != 0 for v in values):
        return None
    start, stop, num = (v.item() for v in values)
    return _linspace_values(np, start, stop, int(num), np.dtype(t.dtype.as_numpy_dtype))


def _linspace_shape(op):
    for t in op.inputs:
        t.shape.with_rank(0)
    num = ops.constant_value(op.inputs[2])
    if num is None:
        return [tensor_shape.TensorShape([None])]
    if int(num) <= 0:
        raise ValueError(f"Requires num > 0: {int(num)}")
    return [tensor_shape.TensorShape([int(num)])]


LinSpace = register_op(
    "LinSpace",
    inputs=["start: T", "stop: T", "num: Tidx"],
    outputs=["output: T"],
    attrs={"T": FLOATING, "Tidx": INDEX},
    shape_fn=_linspace_shape,
)
ops.register_constant_folder("LinSpace", _fold_linspace)


@LinSpace.kernel(host_memory=("start", "stop", "num"))
async def _linspace(ctx, start, stop, num):
    start = _scalar(start, "start")
    stop = _scalar(stop, "stop")
    num = int(_scalar(num, "num"))
    dtype = ctx.attrs["T"]
    if num > 0:
        ctx.device.check_alloc(num, dtype)
    return _linspace_values(ctx.xp, start, stop, num, np.dtype(dtype.as_numpy_dtype))


def linspace_nd(start, stop, num, name=None, axis=0):
    """`tf.linspace` / `tf.lin_space` (TF 2's compat.v1 spells both so; TF's
    `math_ops.linspace_nd`): `num` evenly spaced values from `start` to `stop`
    (broadcast against each other) along a new axis `axis`; the first and last values
    are exactly start and stop, integer ends give float64 values, and num 0 gives none.
    TF's graph, so its values to the bit (for scalar ends, the LinSpace op's).

    Raises:
      TypeError: a non-integer num.
    """
    from asyncflow.ops import array_ops, framework_ops, manip_ops, math_ops

    def where(cond, a, b):
        return ops.apply_op("SelectV2", [cond, a, b]).outputs[0]

    with ops.name_scope(name, "linspace", [start, stop]):
        start = ops.convert_to_tensor(start, name="start")
        stop = ops.convert_to_tensor(stop, name="stop", dtype=start.dtype)
        num_int = ops.convert_to_tensor(num, name="num", preferred_dtype=dtypes.int32)
        if not num_int.dtype.is_integer:
            raise TypeError(
                "Argument `tensor` (name: num) must be of type integer. Received `tensor` = "
                f"{num_int} of dtype: {num_int.dtype}"
            )
        num_int = ops.apply_op("Cast", [num_int], {"DstT": dtypes.int32}).outputs[0]
        cast(num_int, start.dtype)  # (TF's graph makes this unused cast too)
        both = framework_ops.broadcast_dynamic_shape(
            array_ops.shape(start), array_ops.shape(stop)
        )
        start_b = manip_ops.broadcast_to(start, both)
        stop_b = manip_ops.broadcast_to(stop, both)
        first = array_ops.expand_dims(start_b, axis=axis)
        last = array_ops.expand_dims(stop_b, axis=axis)
        shape = array_ops.shape(first)
        ndims = array_ops.shape(shape)[0]
        from_end = ndims + axis
        axis_t = where(ops.convert_to_tensor(axis >= 0), ops.convert_to_tensor(axis), from_end)
        num_fill = math_ops.maximum(num_int - 2, 0)
        n_steps = math_ops.maximum(num_int - 1, 1)
        delta = (last - first) / cast(n_steps, last.dtype)
        first = cast(first, delta.dtype)
        last = cast(last, delta.dtype)
        range_end = where(num_int >= 0, n_steps, ops.convert_to_tensor(-1))
        steps = cast(range(1, range_end, dtype=dtypes.int64), delta.dtype)
        mask = math_ops.equal(axis_t, range(ndims))
        steps = array_ops.reshape(steps, where(mask, num_fill, ops.convert_to_tensor(1)))
        middle = first + delta * steps
        values = array_ops.concat((first, middle, last), axis=axis)
        size = array_ops.concat(
            (shape[0:axis_t], array_ops.reshape(num_int, [1]), shape[axis_t + 1 :]), axis=0
        )
        out = array_ops.slice(values, array_ops.zeros_like(shape), size)
        out.set_shape(_linspace_static_shape(start, stop, num_int, axis))
        return out


def _linspace_static_shape(start, stop, num, axis):
    try:
        ends = tensor_shape.TensorShape(
            np.broadcast_shapes(tuple(start.shape.as_list()), tuple(stop.shape.as_list()))
        )
    except (ValueError, TypeError):
        if start.shape.ndims is None or stop.shape.ndims is None:
            return tensor_shape.unknown_shape()
        ends = tensor_shape.unknown_shape(max(start.shape.ndims, stop.shape.ndims))
    n = ops.constant_value(num)
    dims = ends.as_list()
    if not isinstance(axis, int):
        return tensor_shape.unknown_shape(len(dims) + 1)
    dims.insert(axis if axis >= 0 else len(dims) + 1 + axis, None if n is None else int(n))
    return tensor_shape.TensorShape(dims)


linspace = lin_space = linspace_nd


# Integer or boolean results, or values that depend on no differentiable input.
for _op_type in ("Any", "All", "ArgMax", "ArgMin", "Range", "LinSpace"):
    NotDifferentiable(_op_type)


# -- gradients (TF's math_grad.py) ----------------------------------------------------------


def _static_axes(op) -> list[int] | None:
    """The reduced axes (sorted, non-negative) when rank and axes are known when building."""
    rank = op.inputs[0].shape.ndims
    axes = ops.constant_value(op.inputs[1])
    if rank is None or axes is None:
        return None
    return sorted({int(a) % rank for a in np.asarray(axes).reshape(-1).tolist()}) if rank else []


def _kept_dims_shape(op):
    """The shape of the reduction's result with keep_dims=True (TF's reduced_shape).

    A NumPy array when the shapes decide it, as TF's: each op it serves makes its own
    Const ("Sum_grad/Reshape/shape")."""
    x = op.inputs[0]
    axes = _static_axes(op)
    if axes is not None:
        dims = [1 if i in axes else d for i, d in enumerate(x.shape.as_list())]
        if None not in dims:
            return np.array(dims, np.int32)
        if dims.count(None) == 1:  # (a batch): -1 there, for the Reshapes it serves
            return np.array([-1 if d is None else d for d in dims], np.int32)
    # Run time: Shape(x) with the reduced positions set to 1.
    x_shape = _g.shape(x)
    rank = _g.apply("Size", x_shape)
    axes_t = _g.cast(_g.reshape(op.inputs[1], _g.constant([-1])), dtypes.int32)
    axes_t = _g.apply("FloorMod", _g.apply("AddV2", axes_t, rank), rank)
    one_hot = ops.apply_op(
        "OneHot", [axes_t, rank, _g.constant(1), _g.constant(0)], {"axis": -1}
    ).outputs[0]
    hit = _g.apply("Greater", _g.reduce_sum(one_hot, [0]), _g.constant(0))
    return _g.apply("Select", hit, _g.ones_like(x_shape), x_shape)


def _grad_to_input(op, grad, kept):
    """grad reshaped to kept dims (`_kept_dims_shape`: -1 may stand for one unknown
    dimension), then repeated to the input's shape: Tile where the repeats are known
    when building, else BroadcastTo to Shape(x) (TF's Sum gradient)."""
    x = op.inputs[0]
    if not op._attr("keep_dims"):
        grad = _g.reshape(grad, kept)
    kept_v = ops.constant_value(kept)
    if x.shape.is_fully_defined() and kept_v is not None:
        scale = [d // builtins.max(int(k), 1) for d, k in zip(x.shape.as_list(), kept_v)]
        return _g.apply("Tile", grad, _g.constant(scale, dtypes.int32))  # ([] for a scalar)
    if kept_v is not None and all(0 <= int(k) <= 1 for k in np.ravel(kept_v)):
        return _g.apply("Tile", grad, _g.shape(x))  # every kept dim is 1: tile by Shape(x)
    return _g.apply("BroadcastTo", grad, _g.shape(x))


@Sum.gradient
def _sum_grad(op, grad):
    return [_grad_to_input(op, grad, _kept_dims_shape(op)), None]


def _reduction_size(op):
    """(input size / output size) as a tensor of the input's dtype."""
    x, y = op.inputs[0], op.outputs[0]
    if x.shape.is_fully_defined() and y.shape.is_fully_defined():
        factor = x.shape.num_elements() // builtins.max(y.shape.num_elements(), 1)
        return _g.constant(factor, x.dtype)
    axes = _static_axes(op)
    if axes is not None and all(x.shape[a].value is not None for a in axes):
        # (a mean over known dimensions of a batch: their product)
        return _g.constant(math.prod(x.shape[a].value for a in axes), x.dtype)
    if y.shape.is_fully_defined():  # e.g. a mean over the batch: Size(x) // |y|
        y_n = y.shape.num_elements()
        factor = _g.apply("Size", x)
        if y_n > 1:
            factor = _g.apply("FloorDiv", factor, _g.constant(y_n))
        return _g.cast(factor, x.dtype)
    x_size = _g.apply("Prod", _g.shape(x), _g.constant([0]))
    y_size = _g.apply("Prod", _g.shape(y), _g.constant([0]))
    factor = _g.apply("FloorDiv", x_size, _g.apply("Maximum", y_size, _g.constant(1)))
    return _g.cast(factor, x.dtype)


@EuclideanNorm.gradient
def _euclidean_norm_grad(op, grad):
    """d|x| / dx = x / |x| (TF's _EuclideanNormGrad; NaN where the norm is 0, as TF)."""
    out = op.outputs[0]
    if not op._attr("keep_dims"):
        kept = _kept_dims_shape(op)
        out, grad = _g.reshape(out, kept), _g.reshape(grad, kept)
    return [_g.apply("RealDiv", op.inputs[0], _g.apply("RealDiv", out, grad)), None]


@Mean.gradient
def _mean_grad(op, grad):
    sum_grad = _grad_to_input(op, grad, _kept_dims_shape(op))
    # (TF divides with math_ops.truediv: the op is "Mean_grad/truediv")
    factor = _reduction_size(op)
    return [ops.apply_op("RealDiv", [sum_grad, factor], name="truediv").outputs[0], None]


def _min_or_max_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    kept = _kept_dims_shape(op)
    if not op._attr("keep_dims"):
        y = _g.reshape(y, kept)
        grad = _g.reshape(grad, kept)
    # Ties share the gradient equally.
    indicators = _g.cast(_g.apply("Equal", y, x), grad.dtype)
    num_selected = _g.reshape(_g.reduce_sum(indicators, op.inputs[1]), kept)
    return [_g.mul(_g.apply("RealDiv", indicators, num_selected), grad), None]


Max.gradient(_min_or_max_grad)
Min.gradient(_min_or_max_grad)


@Prod.gradient
def _prod_grad(op, grad):
    """Product of all the other entries, from exclusive cumulative products both ways."""
    x = op.inputs[0]
    axes = _static_axes(op)
    if axes is None:
        raise LookupError(f"Prod gradient needs a known rank and constant axes (op {op.name})")
    rank = x.shape.ndims
    grad = _grad_to_input(op, grad, _kept_dims_shape(op))
    other = [i for i in builtins.range(rank) if i not in axes]
    perm = axes + other
    permuted = _g.transpose(x, _g.constant(perm))
    if x.shape.is_fully_defined():
        dims = x.shape.as_list()
        reduced_num = math.prod(dims[i] for i in axes)
        other_num = math.prod(dims[i] for i in other)
        flat_shape = _g.constant([reduced_num, other_num])
        permuted_shape = _g.constant([dims[i] for i in perm])
    else:
        x_shape = _g.shape(x)

        def prod_of(idx):
            picked = _g.apply("GatherV2", x_shape, _g.constant(idx, dtypes.int32), _g.constant(0))
            return _g.apply("Prod", picked, _g.constant([0]))

        flat_shape = ops.apply_op("Pack", [[prod_of(axes), prod_of(other)]], {"axis": 0}).outputs[
            0
        ]
        permuted_shape = _g.shape(permuted)
    reshaped = _g.reshape(permuted, flat_shape)
    left = _g.cumprod(reshaped, 0, exclusive=True)
    right = _g.cumprod(reshaped, 0, exclusive=True, reverse=True)
    if x.dtype.is_complex:
        left, right = _g.apply("Conj", left), _g.apply("Conj", right)
    y = _g.reshape(_g.mul(left, right), permuted_shape)
    out = _g.mul(grad, _g.transpose(y, _g.constant(_g.invert_permutation(perm))))
    return [_g.reshape(out, _g.shape(x)), None]
