"""Set-like ops on vectors: Unique, UniqueWithCounts, ListDiff (`setdiff1d`),
InvertPermutation.  None has a gradient (TF marks them the same way).

Unique keeps the order of first appearance, as TF does (not NumPy's sorted order).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, INDEX, NotDifferentiable, named_outputs, register_op

__all__ = ["unique", "unique_with_counts", "setdiff1d", "invert_permutation"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _vector_shapes(n_out: int):
    def shape_fn(op):
        op.inputs[0].shape.with_rank(1)
        x = op.inputs[0].shape
        return [tensor_shape.TensorShape([None]), x] + [tensor_shape.TensorShape([None])] * (
            n_out - 2
        )

    return shape_fn


def _first_appearance(x: np.ndarray):
    """(unique values in order of first appearance, index of each x in them, counts).
    Each NaN is a value of its own (TF's kernel hashes with ==, which NaN never is)."""
    if x.dtype.kind in "fc" and np.isnan(x).any():
        return _first_appearance_nan(x)
    values, first, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse.reshape(-1)], counts[order]


def _first_appearance_nan(x: np.ndarray):
    nan = np.isnan(x)
    # Key each NaN by its own position, the rest by their value's first position.
    vals, first, inverse = np.unique(x[~nan], return_index=True, return_inverse=True)
    key = np.empty(x.size, np.int64)
    key[~nan] = np.flatnonzero(~nan)[first][inverse.reshape(-1)]
    key[nan] = np.flatnonzero(nan)
    starts, idx, counts = np.unique(key, return_inverse=True, return_counts=True)
    return x[starts], idx.reshape(-1), counts


def _unique_op(op_type: str, with_counts: bool):
    outputs = ["y: T", "idx: out_idx"] + (["count: out_idx"] if with_counts else [])
    op_def = register_op(
        op_type,
        inputs=["x: T"],
        outputs=outputs,
        attrs={"T": ANY, "out_idx": INDEX},
        shape_fn=_vector_shapes(len(outputs)),
    )
    # (TF registers no gradient: tf.gradients through it raises LookupError.)

    # One kernel for every device, on host arrays (all arguments in host memory): on a GPU
    # an optimizer's sparse update deduplicates its indices with Unique beside a variable
    # that lives there.
    @op_def.kernel(host_memory=("x", *(o.split(":")[0] for o in outputs)))
    async def _kernel(ctx, x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise _invalid(f"unique expects a 1D vector, got shape {list(x.shape)}")
        idx_dt = ctx.attrs["out_idx"].as_numpy_dtype
        y, idx, counts = _first_appearance(x)
        out = (y.astype(x.dtype), idx.astype(idx_dt))
        return out + (counts.astype(idx_dt),) if with_counts else out

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


Unique = _unique_op("Unique", with_counts=False)
UniqueWithCounts = _unique_op("UniqueWithCounts", with_counts=True)


@_dispatch.add_dispatch_support
def unique(x, out_idx=dtypes.int32, name=None):
    """The distinct values of the vector `x` in order of first appearance, and for each
    element of x its index in them (op Unique).

    Raises:
      ValueError: (at build time) x is not a vector.
    """
    return named_outputs(
        ops.apply_op("Unique", [x], {"out_idx": dtypes.as_dtype(out_idx)}, name=name)
    )


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """`unique`, plus how many times each distinct value occurs (op UniqueWithCounts)."""
    return named_outputs(
        ops.apply_op("UniqueWithCounts", [x], {"out_idx": dtypes.as_dtype(out_idx)}, name=name)
    )


# -- ListDiff ---------------------------------------------------------------------------------

ListDiff = register_op(
    "ListDiff",
    inputs=["x: T", "y: T"],
    outputs=["out: T", "idx: out_idx"],
    attrs={"T": ANY, "out_idx": INDEX},
    shape_fn=lambda op: [op.inputs[1].shape.with_rank(1) and tensor_shape.TensorShape([None])] * 2,
)
# (ListDiff has no gradient in TF: LookupError.)


@ListDiff.kernel("CPU")
async def _list_diff(ctx, x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1:
        raise _invalid("x and y must be 1-D")
    keep = ~np.isin(x, y)
    idx = np.flatnonzero(keep).astype(ctx.attrs["out_idx"].as_numpy_dtype)
    return x[keep], idx


def setdiff1d(x, y, index_dtype=dtypes.int32, name=None):
    """The values of vector x not in y, in x's order, and their positions in x (ListDiff)."""
    attrs = {"out_idx": dtypes.as_dtype(index_dtype)}
    return named_outputs(ops.apply_op("ListDiff", [x, y], attrs, name=name))


# -- InvertPermutation ----------------------------------------------------------------------

InvertPermutation = register_op(
    "InvertPermutation",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": INDEX},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank(1)],
)
NotDifferentiable("InvertPermutation")


@InvertPermutation.kernel("CPU")
async def _invert_permutation(ctx, x):
    x = np.asarray(x)
    if x.ndim != 1:
        raise _invalid(f"invert_permutation expects a 1D vector, got shape {list(x.shape)}")
    n = x.size
    out = np.full(n, -1, dtype=x.dtype)
    for i, d in enumerate(x.tolist()):
        if not 0 <= d < n:
            raise _invalid(f"{d} is not between 0 and {n}")
        if out[d] != -1:
            raise _invalid(f"{d} is duplicated in the input.")
        out[d] = i
    return out


def invert_permutation(x, name=None):
    """y[x[i]] = i for a permutation x of 0..n-1 (op InvertPermutation).

    Raises (when run): InvalidArgumentError for a value out of range or duplicated."""
    return ops.apply_op("InvertPermutation", [x], name=name).outputs[0]
