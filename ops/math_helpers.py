"""Helpers shared by the math-family op modules: builder name scopes, dtype-exact
results, warning-free NumPy calls, shape strings, binary-operand conversion.

`math_ops`, `cast_ops` and `matmul_ops` import them from here; other families (nn_ops,
reduction_ops, conv_ops, nn_impl) import them through `math_ops`, which re-exports them.
This module registers no ops and imports no op family, so any family can import it
without an import cycle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.kernel_api import QUIET_STEP


@contextlib.contextmanager
def _builder_scope(name: str | None, default: str, values=()):
    """TF's `with ops.name_scope(name, default, values) as name:` for a single-op builder.

    Helper ops (converted constants, casts) are named `<op>/...`, and the op the builder
    finally creates (outside this block) takes the scope's own name, as in TF.  Yields
    the name to pass to that op.
    """
    graph = ops._graph_from_values([v for v in values if isinstance(v, ops.Tensor)])
    with graph.as_default():
        if name and name.endswith("/"):  # an operator's scope ("ops/add/"): reuse it exactly
            with graph.name_scope(name):
                yield name
            return
        op_name = graph.unique_name(name or default, mark_as_used=False)
        base = op_name.rsplit("/", 1)[-1]
        with graph.name_scope(op_name + "/"):
            yield base


def _as_dtype(xp, value, dtype: dtypes.DType):
    """`value` as an array of exactly `dtype` (kernels must not leak NumPy's upcasts)."""
    return xp.asarray(value, dtype=dtype.as_numpy_dtype)


def quiet_errstate():
    """`np.errstate(all="ignore")`, or nothing when the step already runs inside one."""
    return contextlib.nullcontext() if QUIET_STEP.get() else np.errstate(all="ignore")


def _quiet(xp, fn: Callable, *args):
    """Run `fn` without NumPy's floating-point warnings (TF yields inf/nan silently)."""
    if xp is np and QUIET_STEP.get():
        return fn(*args)
    errstate = getattr(xp, "errstate", None)
    if errstate is None:
        return fn(*args)
    with errstate(all="ignore"):
        return fn(*args)


def to_host(xp, value):
    """An explicit device -> host read of a (small) device array, for kernel checks that
    need its values on the host (index bounds, division by zero); the array itself on
    the CPU.  On a GPU it waits for the value, so kernels use it only where TF's kernel
    reads the value on the host too."""
    return value if xp is np else xp.asnumpy(value)


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def no_nan(fn):
    """TF's DivNoNan/MulNoNan: fn(x, y) where y != 0, else 0 (even where x is inf or nan);
    as `kernel(xp, x, y)`."""

    def kernel(xp, x, y):
        x, y = xp.asarray(x), xp.asarray(y)
        with np.errstate(all="ignore"):
            out = xp.asarray(fn(x, y))
        return xp.where(y == 0, xp.zeros_like(out), out)

    return kernel


def merged_shapes(a, b):
    """`a.merge_with(b)` (TensorShapes), with TF's shape inference's messages
    (InferenceContext::Merge): "Shapes must be equal rank, but are 2 and 1", "Dimension
    0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3]."."""
    if a.ndims is not None and b.ndims is not None:
        if a.ndims != b.ndims:
            raise ValueError(f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}")
        for i, (x, y) in enumerate(zip(a.as_list(), b.as_list())):
            if x is not None and y is not None and x != y:
                raise ValueError(
                    f"Dimension {i} in both shapes must be equal, but are {x} and {y}. "
                    f"Shapes are {ops.shape_text(a)} and {ops.shape_text(b)}."
                )
    return a.merge_with(b)


def _unary_shape(op):
    return [op.inputs[0].shape]


# How a builder says that its two tensors' dtypes differ, as TF's does (recorded from TF
# 2.21): the op's input check (matmul, pow), truediv's own TypeError (truediv,
# div_no_nan), or y's conversion to x's dtype, a ValueError (div, multiply_no_nan).
_OP_INPUT, _SAME_DTYPE, _CONVERSION = "op input", "same dtype", "conversion"
_MISMATCH = {
    "MatMul": _OP_INPUT,
    "Pow": _OP_INPUT,
    "truediv": _SAME_DTYPE,
    "div_no_nan": _SAME_DTYPE,
}


def _convert_pair(x, y, op_name: str, names=("x", "y")):
    """Converts x and y to tensors of one dtype, as TF's binary operators do; a Const
    made for one is named by `names` (TF's matmul names them "a" and "b").

    Raises TypeError or ValueError for tensors of two dtypes, as `op_name`'s builder
    in TF (`_MISMATCH`)."""
    x_name, y_name = names
    if not isinstance(x, ops.Tensor) and isinstance(y, ops.Tensor):
        x = ops.convert_to_tensor(x, dtype=y.dtype, name=x_name)
    else:
        x = ops.convert_to_tensor(x, name=x_name)
    if isinstance(y, ops.Tensor) and y.dtype != x.dtype:
        kind = _MISMATCH.get(op_name, _CONVERSION)
        if kind == _OP_INPUT:
            raise TypeError(
                f"Input '{y_name}' of '{op_name}' Op has type {y.dtype.name} that does not "
                f"match type {x.dtype.name} of argument '{x_name}'."
            )
        if kind == _SAME_DTYPE:
            raise TypeError(
                f"`x` and `y` must have the same dtype, got {x.dtype!r} != {y.dtype!r}."
            )
    if not isinstance(y, ops.Tensor) or y.dtype != x.dtype:  # (ValueError on a mismatch)
        y = ops.convert_to_tensor(y, dtype=x.dtype, name=y_name)
    return x, y


def strided_view(xp, a, shape, strides):
    """A read-only strided view of `a` (NumPy's `writeable=False`; CuPy's `as_strided`
    takes no such argument, and its views are never written through here either)."""
    if xp is np:
        return np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


# CuPy's `ufunc.at` (atomic scatters) supports only these dtypes; NumPy's supports all
# (devices/fake_cupy.py refuses the same, as CuPy does).
_AT_DTYPES = {
    "add": frozenset("int32 uint32 uint64 float16 float32 float64".split()),
    "subtract": frozenset("int32 uint32".split()),
    # (CuPy takes float64 too, but its atomicMax/atomicMin for doubles compute with
    # fmaxf/fminf: the entries come back rounded to float32.  float64 goes by the sort.)
    "maximum": frozenset("int32 uint32 uint64 float32".split()),
    "minimum": frozenset("int32 uint32 uint64 float32".split()),
}


# np.add.at costs ~1.2 us an index where each index adds a row (its general path): the
# gradient of a gather of 128 rows of [2560, 64] (UnsortedSegmentSum) took 150 us warm,
# 350 in a step.  From this many indices of rows, `_add_rows_at` sorts them instead.
_ROWS_AT_MIN = 8
_LEVEL_INDICES = 4  # ... and while the levels average at least this many indices
_LEVELS_MAX = 256  # ... and number at most this many (an index repeated more: add.at)


def _add_rows_at(a, idx, v) -> bool:
    """np.add.at(a, idx, v) for `v` one row of a's per index, with its bits: each row of
    `a` plus its updates in their order, ((a[i] + v_j) + v_k) + ....  The updates go in
    levels, the first occurrence of every index, then the second, ...: each level a
    fancy-indexed add of distinct rows (one level where the indices are distinct, as a
    gather's).  False (nothing done) where this is not that case: a 1-D `a` (NumPy's
    add.at has a fast path of its own there), broadcast updates, few indices, an index
    out of [0, len(a)) (add.at's own error, or its wrap of negative ones), other dtypes,
    or an index repeated so often that the levels would cost more than add.at."""
    idx = np.asarray(idx)
    if a.ndim < 2 or idx.ndim != 1 or idx.size < _ROWS_AT_MIN or a.dtype.kind not in "iufc":
        return False
    v = np.asarray(v)
    if v.dtype != a.dtype or v.shape != idx.shape + a.shape[1:] or idx.dtype.kind not in "iu":
        return False
    if not a.flags.c_contiguous or int(idx.min()) < 0 or int(idx.max()) >= a.shape[0]:
        return False
    k = idx.size
    flat = a.reshape(a.shape[0], -1)  # (views: both contiguous)
    rows = v.reshape(k, -1)
    order = np.argsort(idx, kind="stable")
    ids = idx[order]
    first = np.empty(k, bool)
    first[0] = True
    np.not_equal(ids[1:], ids[:-1], out=first[1:])
    if first.all():
        flat[idx] += rows
        return True
    starts = np.flatnonzero(first)
    rank = np.arange(k) - np.repeat(starts, np.diff(np.append(starts, k)))
    levels = int(rank.max()) + 1
    if levels > _LEVELS_MAX or levels * _LEVEL_INDICES > k:
        return False
    # the positions by level, each level's in index order (both sorts stable)
    by_level = order[np.argsort(rank, kind="stable")]
    stop = 0
    for size in np.bincount(rank).tolist():
        at = by_level[stop : stop + size]
        stop += size
        flat[idx[at]] += rows[at]
    return True


def scatter_at(xp, op: str, a, idx, v) -> None:
    """`getattr(xp, op).at(a, idx, v)` (op: add, subtract, maximum, minimum) for every
    dtype NumPy takes, also on a GPU where CuPy's atomic scatter takes only a few:
    subtraction adds the negation, 64-bit and small integers add through a view or a
    wider type, complex numbers add as pairs of reals, and maxima/minima of the other
    dtypes keep each index's extreme after a sort.  `idx` indexes `a`'s first axis."""
    if xp is np:
        if op == "add" and _add_rows_at(a, idx, v):
            return
        getattr(np, op).at(a, idx, v)
        return
    v = xp.asarray(v, dtype=a.dtype)
    name = a.dtype.name
    if name in _AT_DTYPES[op]:
        getattr(xp, op).at(a, idx, v)
        return
    if op == "subtract":
        if a.dtype.kind == "b":
            raise TypeError(f"subtract.at is not defined for {name}")
        scatter_at(xp, "add", a, idx, -v)
        return
    v = xp.broadcast_to(v, (idx.shape[0],) + a.shape[1:])
    if op == "add":
        if a.dtype.kind == "c":
            real = a.real.dtype
            scatter_at(
                xp,
                "add",
                a.view(real).reshape(a.shape + (2,)),
                idx,
                xp.ascontiguousarray(v).view(real).reshape(v.shape + (2,)),
            )
            return
        if name == "int64":
            xp.add.at(a.view(xp.uint64), idx, xp.ascontiguousarray(v).view(xp.uint64))
            return
        if a.dtype.kind in "iub" and a.dtype.itemsize < 4:
            wide = a.astype(xp.int32)
            xp.add.at(wide, idx, v.astype(xp.int32))
            a[...] = wide.astype(a.dtype) if a.dtype.kind != "b" else wide != 0
            return
        raise TypeError(f"add.at is not defined for {name} on this device")
    # maximum / minimum: sort by (row, column, value); the last (first) entry of each
    # (row, column) run is its extreme.
    if a.dtype.kind == "c":
        raise TypeError(f"{op}.at is not defined for {name}")
    flat_v = v.reshape(idx.shape[0], -1)
    cols = flat_v.shape[1]
    rows = xp.repeat(idx.astype(xp.int64), cols)
    col = xp.tile(xp.arange(cols, dtype=xp.int64), idx.shape[0])
    vals = flat_v.reshape(-1)
    order = xp.lexsort(xp.stack([vals, col, rows]))
    rows, col, vals = rows[order], col[order], vals[order]
    key = rows * cols + col
    pick = xp.ones(key.shape, bool)
    if op == "maximum":
        pick[:-1] = key[1:] != key[:-1]
    else:
        pick[1:] = key[1:] != key[:-1]
    flat_a = a.reshape(a.shape[0], -1)
    r, c = rows[pick], col[pick]
    flat_a[r, c] = getattr(xp, op)(flat_a[r, c], vals[pick])


class _LazySpecial:
    """scipy.special's functions, each imported at its first call: importing
    scipy.special costs every program ~0.3-0.5 s (scipy's array-API layer), while only
    a few ops (Erfinv, Igamma, Zeta, ...) use it."""

    def __getattr__(self, name: str):
        def call(*args):
            import scipy.special

            return getattr(scipy.special, name)(*args)

        call.__name__ = name
        return call


special = _LazySpecial()  # (`special.erfinv(x)` as `scipy.special.erfinv(x)`)
