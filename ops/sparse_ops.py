"""Sparse tensor ops (TF's sparse_ops): SparseToDense, SparseTensorDenseMatMul,
SparseReorder, SparseAdd (+ SparseAddGrad), SparseTensorDenseAdd, SparseReshape,
SparseConcat, SparseSlice (+ SparseSliceGrad), SparseFillEmptyRows (+ its grad op);
their gradients (TF's sparse_grad.py) and TF1 builders (`sparse_to_dense`,
`sparse_tensor_dense_matmul`, `sparse_add`, ...).

A SparseTensor is (indices int64 [N, rank], values [N], dense_shape int64 [rank]).
Kernels are CPU kernels over NumPy (TF's are CPU-only too, but for a few GPU ones):
index bookkeeping is host work.  "Canonical order" is row-major (lexicographic) order of
the indices; ops that merge or reorder produce it, as TF's do.

Invariant: every kernel validates indices against the shape (InvalidArgumentError)
before it builds an output.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, math_ops, reduction_ops, slicing_ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import ANY, INDEX, NUMERIC, REAL, NotDifferentiable, register_op
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = [
    "sparse_to_dense",
    "sparse_tensor_to_dense",
    "sparse_tensor_dense_matmul",
    "sparse_reorder",
    "sparse_add",
    "sparse_reshape",
    "sparse_concat",
    "sparse_slice",
    "sparse_fill_empty_rows",
]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _np(x):
    return np.asarray(x.get() if hasattr(x, "get") else x)


def _matching(t, dtype, op_type: str, arg: str, ref: str):
    """`t`, whose dtype must be `dtype`: TF's op-building TypeError otherwise."""
    if t.dtype.base_dtype != dtype.base_dtype:
        raise TypeError(
            f"Input '{arg}' of '{op_type}' Op has type {t.dtype.base_dtype.name} that does not "
            f"match type {dtype.base_dtype.name} of argument '{ref}'."
        )
    return t


def _sp(sp_input, name="sp_input") -> SparseTensor:
    if isinstance(sp_input, SparseTensorValue):
        return SparseTensor.from_value(sp_input)
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"Input must be a SparseTensor. Received: {type(sp_input)} for {name}")
    return sp_input


def _check_bounds(indices, shape, what="indices"):
    if indices.size and ((indices < 0).any() or (indices >= shape).any()):
        bad = int(np.flatnonzero(((indices < 0) | (indices >= shape)).any(axis=1))[0])
        raise _invalid(
            f"{what}[{bad}] = [{','.join(map(str, indices[bad]))}] is out of bounds: need 0 <= "
            f"index < [{','.join(map(str, shape))}]"
        )


def _order(indices) -> np.ndarray:
    """The permutation that puts `indices` in row-major order (stable)."""
    if indices.shape[0] == 0 or indices.shape[1] == 0:
        return np.arange(indices.shape[0])
    return np.lexsort(indices.T[::-1])


def _linear(indices, shape) -> np.ndarray:
    """Row-major positions of `indices` in `shape` (int64; shapes fit in int64 as TF's)."""
    if indices.shape[1] == 0:
        return np.zeros(indices.shape[0], np.int64)
    strides = np.cumprod([1, *shape[::-1][:-1]])[::-1].astype(np.int64)
    return indices.astype(np.int64) @ strides


def _sparse_out_shapes(rank=None):
    return [
        tensor_shape.TensorShape([None, rank]),
        tensor_shape.TensorShape([None]),
    ]


# -- SparseToDense -----------------------------------------------------------------------


def _to_dense_shape(op):
    return [ops.constant_shape(op.inputs[1])]


SparseToDense = register_op(
    "SparseToDense",
    inputs=[
        "sparse_indices: Tindices",
        "output_shape: Tindices",
        "sparse_values: T",
        "default_value: T",
    ],
    outputs=["dense: T"],
    attrs={"validate_indices": True, "T": ANY, "Tindices": INDEX},
    shape_fn=_to_dense_shape,
)


@SparseToDense.kernel("CPU")
async def _sparse_to_dense(ctx, indices, shape, values, default):
    indices, shape, values = _np(indices), _np(shape).reshape(-1), _np(values)
    if indices.ndim > 2:
        raise _invalid(
            f"sparse_indices should be a scalar, vector, or matrix, got shape "
            f"{list(indices.shape)}"
        )
    indices = indices.reshape(-1, 1) if indices.ndim == 1 and shape.size == 1 else indices
    indices = indices.reshape(-1, shape.size) if indices.ndim < 2 else indices
    n = indices.shape[0]
    if values.ndim > 1 or (values.ndim == 1 and values.shape[0] != n):
        raise _invalid(
            f"sparse_values has incorrect shape {list(values.shape)}, should be [] or [{n}]"
        )
    if np.ndim(default) != 0:
        raise _invalid("default_value should be a scalar.")
    if ctx.attrs["validate_indices"]:
        _check_bounds(indices, shape)
        lin = _linear(indices, shape)
        if n > 1:
            step = np.diff(lin)
            if (step <= 0).any():
                i = int(np.flatnonzero(step <= 0)[0]) + 1
                at = f"indices[{i}] = [{','.join(map(str, indices[i]))}]"
                if step[i - 1] == 0:
                    raise _invalid(f"{at} is repeated")
                raise _invalid(
                    f"{at} is out of order. Many sparse ops require sorted indices.\n    "
                    "Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n"
                )
    dtype = ctx.attrs["T"].as_numpy_dtype
    out = np.full(tuple(int(d) for d in shape), default, dtype=dtype)
    if n:
        out[tuple(indices.T)] = values
    return out


@SparseToDense.gradient
def _sparse_to_dense_grad(op, grad):
    indices, _, values, _ = op.inputs
    idx = indices if indices.shape.ndims == 2 else _g.apply("Reshape", indices, [-1, 1])
    values_grad = _g.apply("GatherNd", grad, idx)
    if values.shape.ndims == 0:
        values_grad = reduction_ops.reduce_sum(values_grad)
    default_grad = reduction_ops.reduce_sum(grad) - reduction_ops.reduce_sum(values_grad)
    return [None, None, values_grad, default_grad]


def sparse_to_dense(
    sparse_indices, output_shape, sparse_values, default_value=0, validate_indices=True, name=None
):
    """A dense tensor of `output_shape` holding `sparse_values` at `sparse_indices`
    (indices in row-major order, no repeats when validate_indices) and `default_value`
    elsewhere.

    Raises:
      InvalidArgumentError: (when run) an index out of bounds, out of order or repeated.
    """
    with ops.name_scope(name, "SparseToDense", [sparse_indices, sparse_values]) as scope:
        values = ops.convert_to_tensor(sparse_values, name="sparse_values")
        default = ops.convert_to_tensor(default_value, name="default_value", dtype=values.dtype)
        indices = ops.convert_to_tensor(sparse_indices, name="sparse_indices")
        shape = ops.convert_to_tensor(output_shape, name="output_shape", dtype=indices.dtype)
        attrs = {"validate_indices": bool(validate_indices)}
        return ops.apply_op(
            "SparseToDense", [indices, shape, values, default], attrs, name=scope
        ).outputs[0]


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices=True, name=None):
    """The dense tensor of a SparseTensor, `default_value` (zero) where nothing is set.

    Raises:
      TypeError: sp_input is not a SparseTensor.
      InvalidArgumentError: (when run) indices out of bounds, or not in canonical order
        when validate_indices.
    """
    sp = _sp(sp_input)
    if default_value is None:
        default_value = np.zeros((), sp.dtype.as_numpy_dtype) if sp.dtype != dtypes.string else b""
    return sparse_to_dense(
        sp.indices,
        sp.dense_shape,
        sp.values,
        default_value,
        validate_indices,
        name=name or "SparseToDense",
    )


# -- SparseTensorDenseMatMul -------------------------------------------------------------


def _spmm_shape(op):
    b = op.inputs[3].shape.with_rank(2)
    a_shape = ops.constant_value(op.inputs[2])
    rows = None
    adjoint_a, adjoint_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    if a_shape is not None and np.size(a_shape) == 2:
        rows = int(a_shape[1] if adjoint_a else a_shape[0])
        inner, b_inner = int(a_shape[0 if adjoint_a else 1]), b[1 if adjoint_b else 0].value
        if b_inner is not None and inner != b_inner:
            raise ValueError(f"Dimensions must be equal, but are {inner} and {b_inner}")
    cols = b.dims[0] if adjoint_b else b.dims[1]
    return [tensor_shape.TensorShape([rows, cols])]


SparseTensorDenseMatMul = register_op(
    "SparseTensorDenseMatMul",
    inputs=["a_indices: Tindices", "a_values: T", "a_shape: int64", "b: T"],
    outputs=["product: T"],
    attrs={"T": NUMERIC, "Tindices": INDEX, "adjoint_a": False, "adjoint_b": False},
    shape_fn=_spmm_shape,
)


@SparseTensorDenseMatMul.kernel("CPU")
async def _spmm(ctx, indices, values, shape, b):
    indices, values, shape, b = _np(indices), _np(values), _np(shape), _np(b)
    if shape.size != 2 or indices.ndim != 2 or indices.shape[1] != 2:
        raise _invalid("Tensor 'a_shape' is not a vector of length 2 / a_indices not [N, 2]")
    _check_bounds(indices, shape, "a_indices")
    rows, cols = indices[:, 0], indices[:, 1]
    if ctx.attrs["adjoint_a"]:
        rows, cols, shape = cols, rows, shape[::-1]
        values = np.conj(values)
    if ctx.attrs["adjoint_b"]:
        b = np.conj(b.T)
    if b.shape[0] != shape[1]:
        raise _invalid(
            f"Cannot multiply A and B because inner dimension does not match: "
            f"{shape[1]} vs. {b.shape[0]}"
        )
    out = np.zeros((int(shape[0]), b.shape[1]), b.dtype)
    np.add.at(out, rows, values[:, None] * b[cols])
    return out


@SparseTensorDenseMatMul.gradient
def _spmm_grad(op, grad):
    indices, values, shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    # d b: A^T grad (in b's layout)
    attrs = {"adjoint_a": not adj_a, "adjoint_b": False}
    b_grad = _g.apply("SparseTensorDenseMatMul", indices, values, shape, grad, **attrs)
    if adj_b:
        b_grad = (
            _g.apply("Conj", _g.transpose(b_grad, [1, 0]))
            if b.dtype.is_complex
            else (_g.transpose(b_grad, [1, 0]))
        )
    # d values[k] = sum_j grad[row_k, j] * B'[col_k, j] (rows/cols swapped for adjoint_a)
    row, col = indices[:, 0], indices[:, 1]
    if adj_a:
        row, col = col, row
    b_eff = _g.transpose(b, [1, 0]) if adj_b else b
    if adj_b and b.dtype.is_complex:
        b_eff = _g.apply("Conj", b_eff)
    picked = _g.apply(
        "Mul", _g.apply("GatherV2", grad, row, 0), _g.apply("GatherV2", b_eff, col, 0)
    )
    values_grad = _g.reduce_sum(picked, [1])
    if adj_a and values.dtype.is_complex:
        values_grad = _g.apply("Conj", values_grad)
    return [None, values_grad, None, b_grad]


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """The matrix product of a rank-2 SparseTensor and a dense matrix (op
    SparseTensorDenseMatMul); adjoints are taken before the product.

    Raises:
      TypeError: sp_a is not a SparseTensor.
      InvalidArgumentError: (when run) inner dimensions differ, or an index is out of
        bounds.
    """
    sp = _sp(sp_a, "sp_a")
    with ops.name_scope(name, "SparseTensorDenseMatMul", [sp.indices, sp.values, b]):
        b = ops.convert_to_tensor(b, name="b")
        _matching(b, sp.dtype, "SparseTensorDenseMatMul", "b", "a_values")
        attrs = {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)}
        return ops.apply_op(
            "SparseTensorDenseMatMul",
            [sp.indices, sp.values, sp.dense_shape, b],
            attrs,
            name="SparseTensorDenseMatMul",  # inside the scope of that name, as in TF
        ).outputs[0]


# -- SparseReorder -----------------------------------------------------------------------


def _reorder_shape(op):
    return [op.inputs[0].shape, op.inputs[1].shape]


SparseReorder = register_op(
    "SparseReorder",
    inputs=["input_indices: int64", "input_values: T", "input_shape: int64"],
    outputs=["output_indices: int64", "output_values: T"],
    attrs={"T": ANY},
    shape_fn=_reorder_shape,
)


def _check_sparse(indices, values, shape):
    if indices.ndim != 2 or values.ndim != 1 or shape.ndim != 1:
        raise _invalid("Input indices should be a matrix, values a vector, shape a vector.")
    if indices.shape[0] != values.shape[0] or indices.shape[1] != shape.shape[0]:
        raise _invalid(
            f"Number of elements in input_indices ({indices.shape[0]}) and input_values "
            f"({values.shape[0]}) must match, and each index must have {shape.shape[0]} "
            "coordinates"
        )
    _check_bounds(indices, shape)


@SparseReorder.kernel("CPU")
async def _sparse_reorder(ctx, indices, values, shape):
    indices, values, shape = _np(indices), _np(values), _np(shape)
    _check_sparse(indices, values, shape)
    perm = _order(indices)
    return indices[perm], values[perm]


@SparseReorder.gradient
def _sparse_reorder_grad(op, unused_indices_grad, values_grad):
    indices, _, shape = op.inputs
    n = _g.apply("Shape", indices, out_type=dtypes.int64)[0]
    positions = _g.apply("Range", _g.constant(0, dtypes.int64), n, _g.constant(1, dtypes.int64))
    perm = ops.apply_op("SparseReorder", [indices, positions, shape]).outputs[1]
    inverse = _g.apply("InvertPermutation", perm)
    return [None, _g.apply("GatherV2", values_grad, inverse, 0), None]


def sparse_reorder(sp_input, name=None) -> SparseTensor:
    """The same SparseTensor with its entries in canonical (row-major) order.

    Raises:
      TypeError: sp_input is not a SparseTensor.
      InvalidArgumentError: (when run) an index out of bounds.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseReorder", [sp.indices, sp.values]) as scope:
        op = ops.apply_op("SparseReorder", [sp.indices, sp.values, sp.dense_shape], name=scope)
        idx, vals = op.outputs
        static = ops.constant_value(sp.dense_shape)
        idx.set_shape([None, None if static is None else len(static)])
        return SparseTensor(idx, vals, sp.dense_shape)


# -- SparseAdd / SparseTensorDenseAdd ----------------------------------------------------

SparseAdd = register_op(
    "SparseAdd",
    inputs=[
        "a_indices: int64",
        "a_values: T",
        "a_shape: int64",
        "b_indices: int64",
        "b_values: T",
        "b_shape: int64",
        "thresh: Treal",
    ],
    outputs=["sum_indices: int64", "sum_values: T", "sum_shape: int64"],
    attrs={"T": NUMERIC, "Treal": REAL},
    # TF's: [?, rank] indices, the rank read from a's (static) dense shape length.
    shape_fn=lambda op: [
        *_sparse_out_shapes(
            tensor_shape.dimension_value(op.inputs[2].shape[0])
            if op.inputs[2].shape.ndims == 1
            else None
        ),
        op.inputs[2].shape,
    ],
)


def _merge(a_idx, b_idx, a_shape):
    """Row-major union of two canonical index sets: (indices, from_a, from_b) where
    from_* map each output position to the input entry (-1 when absent)."""
    lin = np.concatenate([_linear(a_idx, a_shape), _linear(b_idx, a_shape)])
    src = np.concatenate([np.arange(len(a_idx)), -1 - np.arange(len(b_idx))])
    order = np.lexsort((src < 0, lin))  # by position; a before b at a tie
    lin, src = lin[order], src[order]
    keys, first = np.unique(lin, return_index=True)
    from_a = np.full(len(keys), -1)
    from_b = np.full(len(keys), -1)
    slot = np.searchsorted(keys, lin)
    from_a[slot[src >= 0]] = src[src >= 0]
    from_b[slot[src < 0]] = -1 - src[src < 0]
    out = np.concatenate([a_idx, b_idx])[
        np.where(src[first] >= 0, src[first], len(a_idx) - 1 - src[first])
    ]
    return out.reshape(-1, a_idx.shape[1]), from_a, from_b


def _walk(a_idx, a_lin, b_idx, b_lin):
    """_merge's result for inputs not in canonical order, as TF's kernel computes it: one
    pass over both, taking the entry that comes first of the two heads (both, summed,
    when they are at the same position), so unsorted entries are never brought together."""
    picked, from_a, from_b = [], [], []
    i = j = 0
    while i < len(a_lin) or j < len(b_lin):
        if j == len(b_lin) or (i < len(a_lin) and a_lin[i] < b_lin[j]):
            picked.append(a_idx[i]), from_a.append(i), from_b.append(-1)
            i += 1
        elif i == len(a_lin) or b_lin[j] < a_lin[i]:
            picked.append(b_idx[j]), from_a.append(-1), from_b.append(j)
            j += 1
        else:
            picked.append(a_idx[i]), from_a.append(i), from_b.append(j)
            i, j = i + 1, j + 1
    out = np.array(picked, np.int64).reshape(-1, a_idx.shape[1])
    return out, np.array(from_a, np.int64), np.array(from_b, np.int64)


@SparseAdd.kernel("CPU")
async def _sparse_add(ctx, a_idx, a_val, a_shape, b_idx, b_val, b_shape, thresh):
    a_idx, a_val, a_shape = _np(a_idx), _np(a_val), _np(a_shape)
    b_idx, b_val, b_shape = _np(b_idx), _np(b_val), _np(b_shape)
    if not np.array_equal(a_shape, b_shape):
        raise _invalid(
            f"Operands do not have the same ranks; got shapes: "
            f"[{','.join(map(str, a_shape))}] and [{','.join(map(str, b_shape))}]"
        )
    _check_sparse(a_idx, a_val, a_shape)
    _check_sparse(b_idx, b_val, b_shape)
    a_lin, b_lin = _linear(a_idx, a_shape), _linear(b_idx, a_shape)
    if (np.diff(a_lin) > 0).all() and (np.diff(b_lin) > 0).all():
        idx, from_a, from_b = _merge(a_idx, b_idx, a_shape)
    else:
        idx, from_a, from_b = _walk(a_idx, a_lin, b_idx, b_lin)
    vals = np.zeros(len(idx), a_val.dtype)
    vals[from_a >= 0] += a_val[from_a[from_a >= 0]]
    vals[from_b >= 0] += b_val[from_b[from_b >= 0]]
    # TF's kernel: only a sum of two entries may vanish, kept when |sum| >= thresh
    both = (from_a >= 0) & (from_b >= 0)
    keep = ~both | (np.abs(vals) >= _np(thresh))
    return idx[keep].astype(np.int64), vals[keep], a_shape.copy()


SparseAddGrad = register_op(
    "SparseAddGrad",
    inputs=["backprop_val_grad: T", "a_indices: int64", "b_indices: int64", "sum_indices: int64"],
    outputs=["a_val_grad: T", "b_val_grad: T"],
    attrs={"T": NUMERIC},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([op.inputs[1].shape.dims[0]]),
        tensor_shape.TensorShape([op.inputs[2].shape.dims[0]]),
    ],
)
NotDifferentiable("SparseAddGrad")


@SparseAddGrad.kernel("CPU")
async def _sparse_add_grad(ctx, grad, a_idx, b_idx, sum_idx):
    grad, a_idx, b_idx, sum_idx = _np(grad), _np(a_idx), _np(b_idx), _np(sum_idx)
    key = {tuple(r): k for k, r in enumerate(sum_idx.tolist())}

    def pick(idx):
        out = np.zeros(len(idx), grad.dtype)
        for k, r in enumerate(idx.tolist()):
            j = key.get(tuple(r))
            if j is not None:
                out[k] = grad[j]
        return out

    return pick(a_idx), pick(b_idx)


@SparseAdd.gradient
def _sparse_add_grad_fn(op, unused_idx_grad, val_grad, unused_shape_grad):
    a_idx, b_idx, sum_idx = op.inputs[0], op.inputs[3], op.outputs[0]
    ga, gb = ops.apply_op("SparseAddGrad", [val_grad, a_idx, b_idx, sum_idx]).outputs
    return [None, ga, None, None, gb, None, None]


SparseTensorDenseAdd = register_op(
    "SparseTensorDenseAdd",
    inputs=["a_indices: Tindices", "a_values: T", "a_shape: Tindices", "b: T"],
    outputs=["output: T"],
    attrs={"T": NUMERIC, "Tindices": INDEX},
    shape_fn=lambda op: [op.inputs[3].shape],
)


@SparseTensorDenseAdd.kernel("CPU")
async def _sparse_dense_add(ctx, idx, vals, shape, b):
    idx, vals, shape, b = _np(idx), _np(vals), _np(shape), _np(b)
    if len(shape) != b.ndim:
        raise _invalid(f"Two operands have different ranks; received: {len(shape)} and {b.ndim}")
    if list(shape) != list(b.shape):
        raise _invalid(
            f"Dimension mismatch: shapes [{','.join(map(str, shape))}] and "
            f"[{','.join(map(str, b.shape))}]"
        )
    _check_sparse(idx, vals, shape)
    out = b.copy()
    np.add.at(out, tuple(idx.T), vals)
    return out


@SparseTensorDenseAdd.gradient
def _sparse_dense_add_grad(op, grad):
    indices = op.inputs[0]
    return [None, _g.apply("GatherNd", grad, indices), None, grad]


def sparse_add(a, b, threshold=None, thresh=None):
    """a + b where at least one is a SparseTensor: sparse + sparse is a SparseTensor
    (entries whose |sum| < threshold dropped; inputs in canonical order), sparse + dense
    a dense tensor.

    Raises:
      TypeError: neither operand is sparse.
      ValueError: two SparseTensors of static shapes that differ.
      InvalidArgumentError: (when run) the shapes differ.
    """
    if threshold is not None and thresh is not None:
        raise ValueError("Cannot specify both 'threshold' and 'thresh'.")
    threshold = thresh if threshold is None else threshold
    threshold = 0 if threshold is None else threshold
    sparse_a = isinstance(a, SparseTensor | SparseTensorValue)
    sparse_b = isinstance(b, SparseTensor | SparseTensorValue)
    if not (sparse_a or sparse_b):
        raise TypeError("At least one input should be SparseTensor; do you mean to use tf.add()?")
    if sparse_a and sparse_b:
        a, b = _sp(a, "a"), _sp(b, "b")
        a.shape.assert_is_compatible_with(b.shape)  # (TF's build-time check)
        with ops.name_scope(None, "SparseAdd", [a.indices, b.indices]) as scope:
            b_vals = _matching(b.values, a.dtype, "SparseAdd", "b_values", "a_values")
            real = a.dtype.real_dtype if a.dtype.is_complex else a.dtype
            t = ops.convert_to_tensor(threshold, dtype=real, name="threshold")
            out = ops.apply_op(
                "SparseAdd",
                [a.indices, a.values, a.dense_shape, b.indices, b_vals, b.dense_shape, t],
                name=scope,
            ).outputs
            return SparseTensor(out[0], out[1], out[2])
    if sparse_b:
        a, b = b, a
    a = _sp(a, "a")
    with ops.name_scope(None, "SparseTensorDenseAdd", [a.indices, b]) as scope:
        b = ops.convert_to_tensor(b, name="b")
        _matching(b, a.dtype, "SparseTensorDenseAdd", "b", "a_values")
        return ops.apply_op(
            "SparseTensorDenseAdd", [a.indices, a.values, a.dense_shape, b], name=scope
        ).outputs[0]


# -- SparseReshape ------------------------------------------------------------------------

SparseReshape = register_op(
    "SparseReshape",
    inputs=["input_indices: int64", "input_shape: int64", "new_shape: int64"],
    outputs=["output_indices: int64", "output_shape: int64"],
    shape_fn=lambda op: [
        tensor_shape.TensorShape([op.inputs[0].shape.dims[0], op.inputs[2].shape.dims[0]]),
        op.inputs[2].shape,
    ],
)
NotDifferentiable("SparseReshape")


@SparseReshape.kernel("CPU")
async def _sparse_reshape(ctx, indices, shape, new_shape):
    indices, shape, new_shape = _np(indices), _np(shape), _np(new_shape).copy()
    total = int(np.prod(shape, dtype=np.int64))
    unknown = np.flatnonzero(new_shape == -1)
    if len(unknown) > 1:
        raise _invalid(
            f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}"
        )
    if (new_shape < -1).any():
        raise _invalid(f"size {int(np.flatnonzero(new_shape < -1)[0])} must be non-negative")
    known = int(np.prod(new_shape[new_shape != -1], dtype=np.int64))
    if len(unknown):
        if known == 0 or total % known:
            raise _invalid(
                f"Input to reshape is a SparseTensor with {total} dense values, but "
                f"the requested shape requires a multiple of {known}."
            )
        new_shape[unknown[0]] = total // known
    elif known != total:
        raise _invalid(
            f"Input to reshape is a tensor with {total} dense values, but the "
            f"requested shape has {known}."
        )
    lin = _linear(indices, shape)
    out = (
        np.stack(np.unravel_index(lin, new_shape), axis=1)
        if new_shape.size
        else (np.zeros((len(lin), 0), np.int64))
    )
    return out.astype(np.int64), new_shape.astype(np.int64)


def sparse_reshape(sp_input, shape, name=None) -> SparseTensor:
    """The SparseTensor with the same dense values in row-major order, in `shape` (one
    entry may be -1).

    Raises:
      TypeError: sp_input is not a SparseTensor.
      ValueError: a static shape with a different number of elements, or two -1s.
      InvalidArgumentError: (when run) the same, found then.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseReshape", [sp.indices]) as scope:
        shape = ops.convert_to_tensor(shape, dtype=dtypes.int64, name="shape")
        want, have = ops.constant_value(shape), ops.constant_value(sp.dense_shape)
        if want is not None and want.tolist().count(-1) > 1:
            raise ValueError(
                f"At most one dimension can be inferred (-1). Found: {np.asarray(want)}"
            )
        if want is not None and have is not None and -1 not in want.tolist():
            if int(np.prod(want)) != int(np.prod(have)):
                raise ValueError(
                    f"Cannot reshape a tensor with {int(np.prod(have))} elements "
                    f"to shape {want.tolist()} ({int(np.prod(want))} elements)."
                )
        idx, out_shape = ops.apply_op(
            "SparseReshape", [sp.indices, sp.dense_shape, shape], name=scope
        ).outputs
        dims = None if want is None or have is None else want.tolist()
        if dims is not None and -1 in dims:
            rest = int(np.prod([d for d in dims if d != -1]))
            size = int(np.prod(have))
            dims[dims.index(-1)] = size // rest if rest and size % rest == 0 else -1
        if dims is not None and -1 not in dims:
            # Both shapes known when built: TF gives the result's shape as a constant,
            # so what is built on it (an embedding lookup's reshape) keeps static dims.
            out_shape = ops.convert_to_tensor(np.asarray(dims, np.int64))
        return SparseTensor(idx, array_values(sp), out_shape)


def array_values(sp):
    return sp.values


# -- SparseConcat -------------------------------------------------------------------------

SparseConcat = register_op(
    "SparseConcat",
    inputs=["indices: N * int64", "values: N * T", "shapes: N * int64"],
    outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
    attrs={"concat_dim": 0, "N": 2, "T": ANY},
    shape_fn=lambda op: [*_sparse_out_shapes(), op.inputs[-1].shape],
)
NotDifferentiable("SparseConcat")


@SparseConcat.kernel("CPU")
async def _sparse_concat(ctx, *args):
    n = ctx.attrs["N"]
    inds = [_np(a) for a in args[:n]]
    vals = [_np(a) for a in args[n : 2 * n]]
    shapes = [_np(a) for a in args[2 * n :]]
    rank = shapes[0].size
    dim = ctx.attrs["concat_dim"]
    if not -rank <= dim < rank:
        raise _invalid(f"Concat dimension must be in range [{-rank}, {rank}), got {dim}")
    dim %= rank
    for k, s in enumerate(shapes):
        if s.size != rank or not np.array_equal(np.delete(s, dim), np.delete(shapes[0], dim)):
            raise _invalid(
                f"Input shapes must match: expected [{','.join(map(str, shapes[0]))}]"
                f" but got [{','.join(map(str, s))}] for input {k}"
            )
        _check_sparse(inds[k], vals[k], s)
    offset, parts = 0, []
    for idx, s in zip(inds, shapes):
        moved = idx.copy()
        moved[:, dim] += offset
        offset += int(s[dim])
        parts.append(moved)
    idx = np.concatenate(parts) if parts else np.zeros((0, rank), np.int64)
    val = np.concatenate(vals)
    out_shape = shapes[0].copy()
    out_shape[dim] = offset
    # TF's order: inputs in canonical order give canonical output (stable sort keeps
    # each input's own order among equal keys)
    perm = _order(idx) if dim != 0 else np.arange(len(idx))
    return idx[perm].astype(np.int64), val[perm], out_shape.astype(np.int64)


def sparse_concat(
    axis,
    sp_inputs,
    name=None,
    expand_nonconcat_dim=False,
    concat_dim=None,
    expand_nonconcat_dims=None,
):
    """SparseTensors joined along `axis` (other dimensions equal, or with
    expand_nonconcat_dim grown to the largest).

    Raises:
      TypeError: an input is not a SparseTensor.
      ValueError: both axis and concat_dim, or no inputs.
      InvalidArgumentError: (when run) the other dimensions differ.
    """
    if concat_dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'concat_dim'.")
        axis = concat_dim
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    sps = [_sp(s, "sp_inputs") for s in sp_inputs]
    if not sps:
        raise ValueError("sp_inputs must not be empty")
    with ops.name_scope(name, "SparseConcat", [s.indices for s in sps]) as scope:
        shapes = [s.dense_shape for s in sps]
        if expand_nonconcat_dim:
            biggest = reduction_ops.reduce_max(array_ops.stack(shapes), 0)
            out_shapes = []
            for s in shapes:
                rank = array_ops.size(s)
                on_axis = math_ops.equal(reduction_ops.range(rank), axis % rank)
                out_shapes.append(slicing_ops.where(on_axis, s, biggest))
            shapes = out_shapes
        values = [s.values for s in sps]
        if len({v.dtype.base_dtype for v in values}) > 1:
            names = ", ".join(v.dtype.base_dtype.name for v in values)
            raise TypeError(
                f"Tensors in list passed to 'values' of 'SparseConcat' Op have types [{names}] "
                "that don't all match."
            )
        attrs = {"concat_dim": int(axis), "N": len(sps)}
        out = ops.apply_op(
            "SparseConcat", [[s.indices for s in sps], values, shapes], attrs, name=scope
        ).outputs
        return SparseTensor(*out)


# -- SparseSlice ----------------------------------------------------------------------------

SparseSlice = register_op(
    "SparseSlice",
    inputs=["indices: int64", "values: T", "shape: int64", "start: int64", "size: int64"],
    outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
    attrs={"T": ANY},
    shape_fn=lambda op: [*_sparse_out_shapes(), op.inputs[2].shape],
)


def _slice_window(shape, start, size):
    lo = np.minimum(np.maximum(start, 0), shape)
    hi = np.minimum(np.maximum(start + size, lo), shape)
    return lo, hi


@SparseSlice.kernel("CPU")
async def _sparse_slice(ctx, indices, values, shape, start, size):
    indices, values, shape = _np(indices), _np(values), _np(shape)
    start, size = _np(start), _np(size)
    if start.size != shape.size:
        raise _invalid(
            f"Expected start to be a vector of length {shape.size} but got length {start.size}"
        )
    if size.size != shape.size:
        raise _invalid(
            f"Expected size to be a vector of length {shape.size} but got length {size.size}"
        )
    if (size < 0).any():
        raise _invalid(f"Expected a non-negative size, got {int(size[size < 0][0])}")
    _check_sparse(indices, values, shape)
    lo, hi = _slice_window(shape, start, size)
    keep = ((indices >= lo) & (indices < hi)).all(axis=1) if len(indices) else np.zeros(0, bool)
    return (indices[keep] - lo).astype(np.int64), values[keep], (hi - lo).astype(np.int64)


SparseSliceGrad = register_op(
    "SparseSliceGrad",
    inputs=[
        "backprop_val_grad: T",
        "input_indices: int64",
        "input_start: int64",
        "output_indices: int64",
    ],
    outputs=["val_grad: T"],
    attrs={"T": NUMERIC},
    shape_fn=lambda op: [tensor_shape.TensorShape([op.inputs[1].shape.dims[0]])],
)
NotDifferentiable("SparseSliceGrad")


@SparseSliceGrad.kernel("CPU")
async def _sparse_slice_grad(ctx, grad, in_idx, start, out_idx):
    grad, in_idx, start, out_idx = _np(grad), _np(in_idx), _np(start), _np(out_idx)
    lo = np.maximum(start, 0)
    where = {tuple(r): k for k, r in enumerate((out_idx + lo).tolist())}
    out = np.zeros(len(in_idx), grad.dtype)
    for k, r in enumerate(in_idx.tolist()):
        j = where.get(tuple(r))
        if j is not None:
            out[k] = grad[j]
    return out


@SparseSlice.gradient
def _sparse_slice_grad_fn(op, unused_idx_grad, val_grad, unused_shape_grad):
    in_idx, start, out_idx = op.inputs[0], op.inputs[3], op.outputs[0]
    g = ops.apply_op("SparseSliceGrad", [val_grad, in_idx, start, out_idx]).outputs[0]
    return [None, g, None, None, None]


def sparse_slice(sp_input, start, size, name=None) -> SparseTensor:
    """The entries of sp_input in the box [start, start + size) (clipped to the shape),
    re-indexed from the box's corner.

    Raises:
      TypeError: sp_input is not a SparseTensor.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseSlice", [sp.indices]) as scope:
        start = ops.convert_to_tensor(start, dtype=dtypes.int64, name="start")
        size = ops.convert_to_tensor(size, dtype=dtypes.int64, name="size")
        out = ops.apply_op(
            "SparseSlice", [sp.indices, sp.values, sp.dense_shape, start, size], name=scope
        ).outputs
        return SparseTensor(*out)


# -- SparseFillEmptyRows ------------------------------------------------------------------

SparseFillEmptyRows = register_op(
    "SparseFillEmptyRows",
    inputs=["indices: int64", "values: T", "dense_shape: int64", "default_value: T"],
    outputs=[
        "output_indices: int64",
        "output_values: T",
        "empty_row_indicator: bool",
        "reverse_index_map: int64",
    ],
    attrs={"T": ANY},
    shape_fn=lambda op: [
        *_sparse_out_shapes(),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([op.inputs[0].shape.dims[0]]),
    ],
)


@SparseFillEmptyRows.kernel("CPU")
async def _fill_empty_rows(ctx, indices, values, shape, default):
    indices, values, shape, default = _np(indices), _np(values), _np(shape), _np(default)
    if np.ndim(default) != 0:
        raise _invalid("default_value must be a scalar")
    if shape.size == 0:
        raise _invalid("Dense shape cannot be empty.")
    _check_sparse(indices, values, shape)
    rows = int(shape[0])
    counts = np.bincount(indices[:, 0], minlength=rows) if len(indices) else np.zeros(rows, int)
    empty = counts == 0
    filler = np.zeros((int(empty.sum()), shape.size), np.int64)
    filler[:, 0] = np.flatnonzero(empty)
    all_idx = np.concatenate([indices, filler])
    all_val = np.concatenate([values, np.full(len(filler), default, values.dtype)])
    # rows in order, each row's own entries keeping their order (TF's output)
    order = np.argsort(all_idx[:, 0], kind="stable")
    reverse = np.empty(len(indices), np.int64)
    reverse[order[order < len(indices)]] = np.flatnonzero(order < len(indices))
    return all_idx[order].astype(np.int64), all_val[order], empty, reverse


SparseFillEmptyRowsGrad = register_op(
    "SparseFillEmptyRowsGrad",
    inputs=["reverse_index_map: int64", "grad_values: T"],
    outputs=["d_values: T", "d_default_value: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape, tensor_shape.TensorShape([])],
)
NotDifferentiable("SparseFillEmptyRowsGrad")


@SparseFillEmptyRowsGrad.kernel("CPU")
async def _fill_empty_rows_grad(ctx, reverse, grad):
    reverse, grad = _np(reverse), _np(grad)
    d_values = grad[reverse]
    d_default = grad.sum() - d_values.sum()
    return d_values, np.asarray(d_default, grad.dtype)


@SparseFillEmptyRows.gradient
def _fill_empty_rows_grad_fn(op, unused_idx, grad_values, unused_empty, unused_reverse):
    dv, dd = ops.apply_op("SparseFillEmptyRowsGrad", [op.outputs[3], grad_values]).outputs
    return [None, dv, None, dd]


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(SparseTensor with one `default_value` entry at column 0 of every row that has
    none, bool indicator of those rows).

    Raises:
      TypeError: sp_input is not a SparseTensor.
    """
    sp = _sp(sp_input)
    with ops.name_scope(name, "SparseFillEmptyRows", [sp.indices]) as scope:
        default = ops.convert_to_tensor(default_value, dtype=sp.dtype, name="default_value")
        idx, val, empty, _ = ops.apply_op(
            "SparseFillEmptyRows", [sp.indices, sp.values, sp.dense_shape, default], name=scope
        ).outputs
        return SparseTensor(idx, val, sp.dense_shape), empty
