"""Linear-algebra helpers: LowerBound/UpperBound (`searchsorted`), `norm`, `matvec`.

`norm` and `matvec` are compositions of existing ops, built as TF builds them (so their
gradients come from those ops); LowerBound/UpperBound are kernels over a batch of sorted
rows.  The matrix 2-norm (largest singular value) needs an SVD op, not registered yet:
`norm(ord=2, axis=[i, j])` raises ValueError saying so.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, linalg_matrix_ops, math_ops, matmul_ops, reduction_ops
from asyncflow.ops.math_helpers import to_host
from asyncflow.registry import INDEX, REAL, NotDifferentiable, register_op

__all__ = ["searchsorted", "norm", "matvec"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- LowerBound / UpperBound --------------------------------------------------------------


def _bound_shape(op):
    op.inputs[0].shape.with_rank(2)  # leading sizes are the kernel's to check, as in TF
    return [op.inputs[1].shape.with_rank(2)]


def _bound_op(op_type: str, side: str):
    op_def = register_op(
        op_type,
        inputs=["sorted_inputs: T", "values: T"],
        outputs=["output: out_type"],
        attrs={"T": REAL, "out_type": INDEX},
        shape_fn=_bound_shape,
    )
    NotDifferentiable(op_type)

    @op_def.kernel()
    async def _kernel(ctx, seq, values):
        xp = ctx.xp
        seq, values = xp.asarray(seq), xp.asarray(values)
        if seq.ndim != 2 or values.ndim != 2:
            raise _invalid("Inputs sorted_inputs and values must be 2-D")
        if seq.shape[0] != values.shape[0]:
            raise _invalid("Leading dim_size of both tensors must match.")
        out_type = ctx.attrs["out_type"].as_numpy_dtype
        out = xp.empty(values.shape, out_type)
        if seq.dtype.kind in "fc" and bool(
            to_host(xp, xp.isnan(seq).any() | xp.isnan(values).any())
        ):
            out[...] = _bisect(xp, seq, values, side)
            return out
        for row in range(seq.shape[0]):  # rows of the shape, not values: device-generic
            out[row] = xp.searchsorted(seq[row], values[row], side=side)
        return out

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _bisect(xp, seq, values, side):
    """std::lower_bound / upper_bound with operator<, probe by probe, for every value at
    once: TF's kernels.  (NaN compares false both ways, so where a NaN takes part only
    the same probes give TF's answer; NumPy's searchsorted orders NaN last.)"""
    lo = xp.zeros(values.shape, np.int64)
    count = xp.full(values.shape, seq.shape[1], np.int64)
    rows = xp.arange(seq.shape[0])[:, None]
    while bool(to_host(xp, (count > 0).any())):
        step = count // 2
        probe = xp.minimum(lo + step, max(seq.shape[1] - 1, 0))
        at = seq[rows, probe] if seq.shape[1] else xp.zeros(values.shape, seq.dtype)
        go_right = (at < values) if side == "left" else ~(values < at)
        go_right &= count > 0
        lo = xp.where(go_right, lo + step + 1, lo)
        count = xp.where(go_right, count - step - 1, step)
    return lo


LowerBound = _bound_op("LowerBound", "left")
UpperBound = _bound_op("UpperBound", "right")


def searchsorted(sorted_sequence, values, side="left", out_type=dtypes.int32, name=None):
    """For each of `values`, its insertion index into the innermost sorted rows of
    `sorted_sequence` (leading dimensions pair the rows with rows of `values`).

    Raises:
      ValueError: `side` is not "left" or "right".
      InvalidArgumentError: (at run time) the leading dimensions differ.
    """
    if side not in ("left", "right"):
        raise ValueError(
            f"Argument `side` must be either 'right' or 'left'. Received: `side` = '{side}'."
        )
    with ops.name_scope(name, "searchsorted", [sorted_sequence, values]):
        seq = ops.convert_to_tensor(sorted_sequence, name="sorted_sequence")
        values = ops.convert_to_tensor(values, name="values", dtype=seq.dtype)
        seq_2d = array_ops.reshape(seq, [-1, _last_dim(seq)])
        values_2d = array_ops.reshape(values, [-1, _last_dim(values)])
        op_type = "UpperBound" if side == "right" else "LowerBound"
        attrs = {"out_type": dtypes.as_dtype(out_type)}
        out = ops.apply_op(op_type, [seq_2d, values_2d], attrs).outputs[0]
        shape = values.shape.as_list() if values.shape.is_fully_defined() else None
        return array_ops.reshape(out, shape if shape is not None else array_ops.shape(values))


def _last_dim(t):
    d = t.shape.dims[-1].value if t.shape.ndims else None
    return d if d is not None else array_ops.shape(t)[-1]


# -- norm ------------------------------------------------------------------------------------

_VECTOR_NORMS = ("euclidean", 1, 2, np.inf)
_MATRIX_NORMS = ("euclidean", "fro", 1, 2, np.inf)


def _is_real_number(v) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):  # noqa: A002
    """`tf.norm`: a vector norm (axis None or an int: 'euclidean', 1, 2, inf or any p > 0)
    or a matrix norm (axis a pair: 'euclidean'/'fro', 1, 2 (the largest singular
    value), inf).

    Raises:
      ValueError: an unsupported `ord` for the kind of norm, or a bad `axis`.
    """
    if keep_dims is not None:
        if keepdims is not None:
            raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'.")
        keepdims = keep_dims
    keepdims = bool(keepdims)
    is_matrix = isinstance(axis, tuple | list) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not all(isinstance(a, int) for a in axis) or axis[0] == axis[1]:
            raise ValueError(
                f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}"
            )
        if ord not in _MATRIX_NORMS:
            raise ValueError(
                f"'ord' must be a supported matrix norm in {list(_MATRIX_NORMS)}, got {ord}"
            )
    else:
        if not (isinstance(axis, int) or axis is None):
            raise ValueError(
                f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}"
            )
        if ord not in _VECTOR_NORMS and (not _is_real_number(ord) or ord <= 0):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (axis,)
    with ops.name_scope(name, "norm", [tensor]):
        x = ops.convert_to_tensor(tensor)
        red_axis = None if axis is None else list(axis)
        if is_matrix and ord in (2, 2.0):
            return _spectral_norm(x, axis, keepdims)
        if ord in ("fro", "euclidean", 2, 2.0):
            sq = x * math_ops.conj(x) if x.dtype.is_complex else x * x
            result = math_ops.sqrt(reduction_ops.reduce_sum(sq, red_axis, keepdims=True))
        else:
            result = math_ops.abs(x)
            if ord == 1:
                result = reduction_ops.reduce_sum(
                    result, None if axis is None else axis[0], keepdims=True
                )
                if is_matrix:
                    result = reduction_ops.reduce_max(result, axis[-1], keepdims=True)
            elif ord == np.inf:
                if is_matrix:
                    result = reduction_ops.reduce_sum(result, axis[1], keepdims=True)
                result = reduction_ops.reduce_max(
                    result, None if axis is None else axis[0], keepdims=True
                )
            else:
                p = ops.convert_to_tensor(ord, dtype=result.dtype)
                total = reduction_ops.reduce_sum(math_ops.pow(result, p), red_axis, keepdims=True)
                result = math_ops.pow(total, 1.0 / p)
        if not keepdims:
            result = array_ops.squeeze(result, red_axis)
        return result


def _spectral_norm(x, axis, keepdims):
    """The matrix 2-norm over the two `axis`: the largest singular value."""
    rank = x.shape.ndims
    if rank is None:
        raise ValueError("the matrix 2-norm needs a tensor of known rank in asyncflow")
    rows, cols = (a % rank for a in axis)
    perm = [d for d in range(rank) if d not in (rows, cols)] + [rows, cols]
    s = linalg_matrix_ops.svd(array_ops.transpose(x, perm), compute_uv=False)
    result = reduction_ops.reduce_max(s, -1)
    if keepdims:
        for d in sorted((rows, cols)):
            result = array_ops.expand_dims(result, d)
    return result


# -- matvec ---------------------------------------------------------------------------------


def matvec(a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False, b_is_sparse=False,
           name=None):  # fmt: skip
    """`tf.linalg.matvec`: the (batched) matrix `a` times the vector `b` on its last axis.

    Raises:
      ValueError: shapes that cannot multiply (at build time where known).
    """
    del a_is_sparse, b_is_sparse  # hints for TF's dense kernels; the result is the same
    with ops.name_scope(name, "MatVec", [a, b]):
        b = array_ops.expand_dims(ops.convert_to_tensor(b), -1)
        out = matmul_ops.matmul(a, b, transpose_a=transpose_a, adjoint_a=adjoint_a)
        return array_ops.squeeze(out, axis=[-1])
