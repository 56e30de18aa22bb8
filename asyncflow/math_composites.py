"""TF1 top-level math names built from existing ops (so they differentiate through them):
log_sigmoid, count_nonzero, reduce_logsumexp, reduce_variance, reduce_std,
scalar_mul, eye, tensordot, meshgrid, trace, matrix_transpose, where_v2,
histogram_fixed_width, bincount; and the builders of DivNoNan and MulNoNan (div_no_nan;
`tf.math`'s multiply_no_nan and reciprocal_no_nan, through its namespace).

The package re-exports these before the op families, so a family that later registers
a dedicated op under one of these names takes its place.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, ragged_functions
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    linalg_matrix_ops,
    manip_ops,
    math_more_ops,
    math_ops,
    matmul_ops,
    nn_ops,
    reduction_ops,
    slicing_ops,
    tf2_graph_ops,
)
from asyncflow.ops.gradient_ops import stop_gradient
from asyncflow.ops.math_helpers import _builder_scope, _convert_pair

__all__ = [
    "log_sigmoid",
    "div_no_nan",
    "count_nonzero",
    "reduce_logsumexp",
    "reduce_variance",
    "reduce_std",
    "scalar_mul",
    "eye",
    "tensordot",
    "meshgrid",
    "trace",
    "matrix_transpose",
    "where_v2",
    "histogram_fixed_width",
    "bincount",
]


def _t(x, name="x", dtype=None):
    return ops.convert_to_tensor(x, name=name, dtype=dtype)


@_dispatch.add_dispatch_support
def log_sigmoid(x, name=None):
    """log(1 / (1 + exp(-x))) = -softplus(-x)."""
    with ops.name_scope(name, "LogSigmoid", [x]):
        return -nn_ops.softplus(-_t(x))


@_dispatch.add_dispatch_support
def div_no_nan(x, y, name=None):
    """x / y, or 0 where y is 0 (op DivNoNan; integers divide in floats, as `truediv`).

    Raises:
      TypeError: x and y have different dtypes, or a dtype that cannot be divided.
    """
    with _builder_scope(name, "div_no_nan", [x, y]) as op_name:
        x, y = _convert_pair(x, y, "div_no_nan")
        target = math_ops._TRUEDIV_FLOAT.get(x.dtype)
        if target is not None:
            x, y = cast_ops.cast(x, target), cast_ops.cast(y, target)
        elif not (x.dtype.is_floating or x.dtype.is_complex):
            raise TypeError(f"Invalid dtype {x.dtype!r} in tf.math.divide_no_nan.")
    return ops.apply_op("DivNoNan", [x, y], name=op_name).outputs[0]


@_dispatch.add_dispatch_support
def multiply_no_nan(x, y, name=None):
    """x * y, or 0 where y is 0 even where x is inf or nan (op MulNoNan;
    `tf.math.multiply_no_nan`).

    Raises:
      TypeError: x and y have different dtypes.
    """
    with _builder_scope(name, "multiply_no_nan", [x, y]) as op_name:
        x, y = _convert_pair(x, y, "multiply_no_nan")
    return ops.apply_op("MulNoNan", [x, y], name=op_name).outputs[0]


@_dispatch.add_dispatch_support
def reciprocal_no_nan(x, name=None):
    """1 / x, or 0 where x is 0 (op DivNoNan; `tf.math.reciprocal_no_nan`)."""
    with _builder_scope(name, "reciprocal_no_nan", [x]) as op_name:
        x = ops.convert_to_tensor(x, name="x")
        one = ops.convert_to_tensor(np.array(1, x.dtype.as_numpy_dtype), name="one")
    return ops.apply_op("DivNoNan", [one, x], name=op_name).outputs[0]


def _select(cond, a, b):
    """where with broadcasting (TF2's where)."""
    shape = array_ops.shape(a + b if a.dtype != dtypes.bool else a)
    ones = array_ops.ones(shape, dtypes.bool)
    cond = math_ops.logical_and(cond, ones)
    return slicing_ops.where(cond, a * array_ops.ones_like(b), b * array_ops.ones_like(a))


def count_nonzero(
    input_tensor=None,
    axis=None,
    keepdims=None,
    dtype=dtypes.int64,
    name=None,
    reduction_indices=None,
    keep_dims=None,
    input=None,
):  # noqa: A002
    """The number of non-zero elements over `axis`."""
    x = _t(input if input_tensor is None else input_tensor, "input_tensor")
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with ops.name_scope(name, "count_nonzero", [x]):
        zero = array_ops.zeros([], dtype=x.dtype) if x.dtype != dtypes.string else ""
        nz = cast_ops.cast(math_ops.not_equal(x, zero), dtypes.int64)
        return cast_ops.cast(reduction_ops.reduce_sum(nz, axis, keepdims=keep), dtype)


def reduce_logsumexp(
    input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None
):
    """log(sum(exp(x))) over `axis`, computed stably (max subtracted first)."""
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    ragged = ragged_functions.is_ragged(input_tensor)
    if ragged and axis is None:  # all of its values: their own logsumexp, TF's shape
        out = reduce_logsumexp(input_tensor.flat_values, None, keep, name)
        if keep:
            for _ in range(input_tensor.shape.ndims - input_tensor.flat_values.shape.ndims):
                out = array_ops.expand_dims(out, -1)
        return out
    with ops.name_scope(name, "ReduceLogSumExp", [input_tensor]):
        x = input_tensor if ragged else _t(input_tensor, "input_tensor")
        m = reduction_ops.reduce_max(x, axis, keepdims=True)
        finite = math_ops.less(math_ops.abs(m), np.inf)  # an all -inf row keeps 0 as shift
        m = stop_gradient(_select(finite, m, array_ops.zeros_like(m)))
        out = math_ops.log(reduction_ops.reduce_sum(math_ops.exp(x - m), axis, keepdims=True))
        out = out + m
        if not keep:
            out = (
                reduction_ops.reduce_sum(out, axis)
                if axis is not None
                else array_ops.reshape(out, [])
            )
        return out


def _real_or_complex(x):
    if x.dtype.is_integer:
        raise TypeError(
            f"Input must be either real or complex. Received integer type <dtype: "
            f"'{x.dtype.name}'>."
        )


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The mean squared deviation from the mean; real (|x - mean|^2) for complex input.

    Raises:
      TypeError: an integer input.
    """
    if ragged_functions.is_ragged(input_tensor):
        return _ragged_variance(input_tensor, axis, keepdims, name)
    with ops.name_scope(name, "reduce_variance", [input_tensor]):
        x = _t(input_tensor, "input_tensor")
        _real_or_complex(x)
        mean = reduction_ops.reduce_mean(x, axis, keepdims=True)
        if x.dtype.is_complex:
            diff = x - mean
            sq = diff * math_ops.conj(diff)
            sq = ops.apply_op("Real", [sq], {"Tout": sq.dtype.real_dtype}).outputs[0]
        else:
            sq = math_ops.squared_difference(x, mean)
        return reduction_ops.reduce_mean(sq, axis, keepdims=keepdims)


def _ragged_variance(x, axis, keepdims, name):
    """TF's variance of a RaggedTensor: mean(x^2) - mean(x)^2, at least 0 (integers as
    float64 through the ragged mean's division)."""
    if x.dtype.is_complex:
        raise ValueError("reduce_variance is not supported for RaggedTensors with complex dtypes.")
    with ops.name_scope(name, "RaggedReduceVariance", []):
        mean_of_square = reduction_ops.reduce_mean(math_ops.square(x), axis, keepdims=keepdims)
        mean = reduction_ops.reduce_mean(x, axis, keepdims=keepdims)
        return math_ops.maximum(mean_of_square - math_ops.square(mean), 0)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The square root of `reduce_variance` (real for complex input).

    Raises:
      TypeError: an integer input.
    """
    if ragged_functions.is_ragged(input_tensor):
        with ops.name_scope(name, "RaggedReduceStd", []):
            return math_ops.sqrt(_ragged_variance(input_tensor, axis, keepdims, None))
    with ops.name_scope(name, "reduce_std", [input_tensor]):
        x = _t(input_tensor, "input_tensor")
        _real_or_complex(x)
        return math_ops.sqrt(reduce_variance(x, axis, keepdims))


@_dispatch.add_dispatch_support
def scalar_mul(scalar, x, name=None):
    """scalar * x (scalar must be 0-d)."""
    s = _t(scalar, "scalar")
    if s.shape.ndims not in (0, None):
        raise ValueError(f"The input scalar must be a 0-D value. Received shape {s.shape}.")
    with ops.name_scope(name, "scalar_mul", [x]):
        x = _t(x)
        return cast_ops.cast(s, x.dtype) * x


def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32, name=None):
    """An identity matrix (or batch of them); sizes may be tensors, as TF's.

    Raises:
      InvalidArgumentError: at run time, a negative tensor size.
    """
    with ops.name_scope(name, "eye", [num_rows, num_columns, batch_shape]):
        is_square = num_columns is None
        num_columns = num_rows if num_columns is None else num_columns
        if not all(isinstance(n, int | np.integer) for n in (num_rows, num_columns)) or (
            batch_shape is not None and not isinstance(batch_shape, list | tuple)
        ):
            return _dynamic_eye(num_rows, num_columns, is_square, batch_shape, dtype)
        num_rows, num_columns = int(num_rows), int(num_columns)
        m = array_ops.constant(
            np.eye(num_rows, num_columns, dtype=dtypes.as_dtype(dtype).as_numpy_dtype)
        )
        if batch_shape:
            m = manip_ops.tile(
                array_ops.reshape(m, [1] * len(batch_shape) + [num_rows, num_columns]),
                [*batch_shape, 1, 1],
            )
        return m


def _dynamic_eye(num_rows, num_columns, is_square, batch_shape, dtype):
    # TF's graph for sizes known only at run time: ones on the diagonal of the shape.
    def dims(last):
        return last if batch_shape is None else manip_ops.concat([batch_shape, last], 0)

    size = num_rows if is_square else math_ops.minimum(num_rows, num_columns)
    ones = array_ops.ones(dims([size]), dtype=dtype)
    if is_square:
        return linalg_matrix_ops.matrix_diag(ones)
    shape = dims([num_rows, num_columns])
    return linalg_matrix_ops.matrix_set_diag(array_ops.zeros(shape, dtype=dtype), ones)


@_dispatch.add_dispatch_support
def tensordot(a, b, axes, name=None):
    """Sum over `axes` of a and b (an int: a's last n with b's first n; or two lists)."""
    with ops.name_scope(name, "Tensordot", [a, b]):
        a, b = _t(a, "a"), _t(b, "b")
        ra, rb = a.shape.ndims, b.shape.ndims
        if ra is None or rb is None:
            raise ValueError("tensordot needs inputs of known rank in asyncflow")
        if isinstance(axes, int):
            if axes < 0:
                raise ValueError(f"`axes` must be at least 0. Received: {axes}.")
            a_axes, b_axes = list(range(ra - axes, ra)), list(range(axes))
        else:
            a_axes, b_axes = (
                [axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                [axes[1]] if isinstance(axes[1], int) else list(axes[1]),
            )
        a_axes = [x % ra for x in a_axes]
        b_axes = [x % rb for x in b_axes]
        a_free = [i for i in range(ra) if i not in a_axes]
        b_free = [i for i in range(rb) if i not in b_axes]
        inner = [
            int(np.prod([x.shape[i].value for i in axes_]))
            for x, axes_ in ((a, a_axes), (b, b_axes))
            if all(x.shape[i].value is not None for i in axes_)
        ]
        if len(inner) == 2 and inner[0] != inner[1]:  # (TF's MatMul finds it at build time)
            raise ValueError(f"Dimensions must be equal, but are {inner[0]} and {inner[1]}")
        sa, sb = array_ops.shape(a), array_ops.shape(b)
        at = array_ops.reshape(
            array_ops.transpose(a, a_free + a_axes),
            manip_ops.stack(
                [reduction_ops.reduce_prod(slicing_ops.gather(sa, a_free)) if a_free else 1, -1]
            ),
        )
        bt = array_ops.reshape(
            array_ops.transpose(b, b_axes + b_free),
            manip_ops.stack(
                [-1, reduction_ops.reduce_prod(slicing_ops.gather(sb, b_free)) if b_free else 1]
            ),
        )
        out = matmul_ops.matmul(at, bt)
        shape = manip_ops.concat(
            [
                slicing_ops.gather(sa, a_free) if a_free else array_ops.constant([], dtypes.int32),
                slicing_ops.gather(sb, b_free) if b_free else array_ops.constant([], dtypes.int32),
            ],
            0,
        )
        out = array_ops.reshape(out, shape)
        static = [a.shape[i].value for i in a_free] + [b.shape[i].value for i in b_free]
        out.set_shape(static)
        return out


def meshgrid(*args, **kwargs):
    """N-d coordinate grids from 1-D tensors ('xy' or 'ij' indexing)."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"Invalid keyword arguments: {list(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with ops.name_scope(name, "meshgrid", list(args)):
        xs = [array_ops.reshape(_t(x), [-1]) for x in args]
        n = len(xs)
        shapes = [array_ops.shape(x)[0] for x in xs]
        if indexing == "xy" and n > 1:
            shapes[0], shapes[1] = shapes[1], shapes[0]
        out = []
        for i, x in enumerate(xs):
            pos = i
            if indexing == "xy" and n > 1 and i < 2:
                pos = 1 - i
            shape = [1] * n
            shape[pos] = -1
            r = array_ops.reshape(x, shape)
            out.append(r * array_ops.ones(manip_ops.stack(shapes), x.dtype))
        return out


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Swap the last two axes."""
    with ops.name_scope(name, values=[a]):
        a = _t(a, "a")
        r = a.shape.ndims
        if r is None or r < 2:
            raise ValueError(f"Argument 'a' should be a (batch) matrix, with rank >= 2: {a}")
        out = array_ops.transpose(a, [*range(r - 2), r - 1, r - 2])
        return math_ops.conj(out) if conjugate and a.dtype.is_complex else out


def trace(x, name=None):
    """The sum of the main diagonal of each innermost matrix."""
    with ops.name_scope(name, "Trace", [x]) as scope:
        x = _t(x)
        return reduction_ops.reduce_sum(linalg_matrix_ops.matrix_diag_part(x), [-1], name=scope)


@_dispatch.add_dispatch_support
def where_v2(condition, x=None, y=None, name=None):
    """TF2's where: broadcasts condition, x and y together (coordinates without x, y)."""
    if x is None and y is None:
        return slicing_ops.where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    if any(ragged_functions.is_ragged(v) for v in (condition, x, y)):
        return ragged_functions.where(condition, x, y, name=name, v2=True)
    return ops.apply_op("SelectV2", [condition, x, y], name=name).outputs[0]


def histogram_fixed_width(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """Counts of `values` in `nbins` equal bins over value_range (edges clamp).

    Raises:
      ValueError: a constant nbins that is not positive.
      InvalidArgumentError: (when run) value_range[0] >= value_range[1], or nbins <= 0.
    """
    with ops.name_scope(name, "histogram_fixed_width", [values, value_range, nbins]) as scope:
        v = _t(values, "values")
        rng = _t(value_range, "value_range", v.dtype)
        nbins = _t(nbins, "nbins", dtypes.int32)
        attrs = {"dtype": dtypes.as_dtype(dtype)}
        return ops.apply_op(
            math_more_ops.HistogramFixedWidth.name, [v, rng, nbins], attrs, name=scope
        ).outputs[0]


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=dtypes.int32, name=None):
    """How often each value 0..max(arr) occurs (weighted when `weights` is given); values
    at or above `maxlength` are left out.

    Raises:
      InvalidArgumentError: (when run) a negative value in `arr`.
    """
    if ragged_functions.is_ragged(arr):  # (TF's dispatch: the flat values counted)
        arr = arr.flat_values
        if ragged_functions.is_ragged(weights):
            weights = weights.flat_values
    with ops.name_scope(name, "bincount", [arr, weights]):
        a = _t(arr, "arr")
        if a.dtype not in (dtypes.int32, dtypes.int64):  # (TF keeps int64 values as such)
            a = cast_ops.cast(a, dtypes.int32)
        a = array_ops.reshape(a, [-1])
        nonempty = cast_ops.cast(math_ops.greater(array_ops.size(a), 0), a.dtype)
        size = math_ops.maximum(nonempty * (reduction_ops.reduce_max(a) + 1), 0)
        if minlength is not None:
            size = math_ops.maximum(size, cast_ops.cast(minlength, a.dtype))
        if maxlength is not None:
            size = math_ops.minimum(size, cast_ops.cast(maxlength, a.dtype))
        if weights is None:
            w = array_ops.constant([], dtypes.as_dtype(dtype))
        else:
            w = array_ops.reshape(_t(weights, "weights"), [-1])
        return ops.apply_op(tf2_graph_ops.DenseBincount.name, [a, size, w]).outputs[0]
