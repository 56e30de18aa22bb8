"""Arithmetic on CSR sparse matrices (TF's `sparse_csr_matrix_ops`): products with dense
and sparse matrices, sums, element-wise scaling, row softmax, the AMD fill-reducing
ordering and the sparse Cholesky factor, with the gradients TF registers.

The values are TF's: a sparse x sparse product keeps every structurally non-zero entry
(a sum that cancels to 0 stays stored, as Eigen's product keeps it) with its columns in
order; sums keep the union of both structures; the AMD ordering is computed as TF's
(ops/amd_ordering.py); the Cholesky factor of P A P^T (A read from its lower triangle,
`B[i, j] = A[p[i], p[j]]`) has the structure of its symbolic factorization.

TF 2.21 registers SparseMatrixAdd, SparseMatrixMul, SparseMatrixSoftmax and
SparseMatrixSoftmaxGrad (and SparseMatrixZeros) for GPUs only: a TF1 graph holding one
fails on a CPU-only machine.  Here they run on any device, with the semantics of TF's
GPU kernels.

Products stay sparse (scipy.sparse, imported when first used) and run on the device's
workers when large (`ctx.compute`), as do the ordering and the factorization.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.amd_ordering import amd_order
from asyncflow.ops.csr_sparse_matrix_ops import (
    CSR_TYPES,
    check_type,
    csr_output,
    csr_shape,
    csr_value,
    from_batches,
    from_sorted_coo,
    invalid,
    make_csr_value,
    mask_like,
)
from asyncflow.registry import ANY, TypeConstraint, register_op

__all__: list[str] = []

_FLOAT_TYPES = TypeConstraint(("float32", "float64"))
_TYPE_MESSAGE = "dtype of input is not equal to 'type': {got} vs. {want}"
_ASKED_MESSAGE = "Asked for a CSRSparseMatrix of type {want} but saw dtype: {got}"


def _merge_dims(a, b, what: str = ""):
    """TF's Merge of two static dimensions: their common value, ValueError if different."""
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions must be equal, but are {a} and {b}{what}")
    return a if a is not None else b


def _merge_batch(a_batch: list, b_batch: list) -> list:
    if len(a_batch) != len(b_batch):
        raise ValueError(f"Shapes must be equal rank, but are {len(a_batch)} and {len(b_batch)}")
    out = []
    for i, (x, y) in enumerate(zip(a_batch, b_batch)):
        if x is not None and y is not None and x != y:
            raise ValueError(
                f"Dimension {i} in both shapes must be equal, but are {x} and {y}. "
                f"Shapes are {_dims_str(a_batch)} and {_dims_str(b_batch)}."
            )
        out.append(x if x is not None else y)
    return out


def _dims_str(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _check_flags(op, side: str) -> tuple[bool, bool]:
    t, a = op.get_attr(f"transpose_{side}"), op.get_attr(f"adjoint_{side}")
    if t and a:
        raise ValueError(f"Only one of adjoint_{side} and transpose_{side} may be true.")
    return t, a


def _op_dims(shape, transposed: bool):
    """(rows, cols) of op(X) for a static shape of X (None where unknown)."""
    if shape.ndims is None:
        return None, None
    r, c = shape[-2].value, shape[-1].value
    return (c, r) if transposed else (r, c)


def _apply(x: np.ndarray, transpose: bool, adjoint: bool) -> np.ndarray:
    if transpose or adjoint:
        x = np.swapaxes(x, -1, -2)
    return np.conj(x) if adjoint else x


# -- SparseMatrixMatMul (sparse x dense) ------------------------------------------------------


def _matmul_shape(op):
    ta, aa = _check_flags(op, "a")
    tb, ab = _check_flags(op, "b")
    a, b = csr_shape(op.inputs[0]), op.inputs[1].shape
    if a.ndims is None or b.ndims is None:
        return [tensor_shape.unknown_shape()]
    batch = _merge_batch([d.value for d in a.dims[:-2]], [d.value for d in b.dims[:-2]])
    ar, ac = _op_dims(a, ta or aa)
    br, bc = _op_dims(b, tb or ab)
    _merge_dims(ac, br)
    out = [bc, ar] if op.get_attr("transpose_output") else [ar, bc]
    return [tensor_shape.TensorShape(batch + out)]


SparseMatrixMatMul = register_op(
    "SparseMatrixMatMul",
    inputs=["a: variant", "b: T"],
    outputs=["output: T"],
    attrs={
        "T": ANY,  # (TF's OpDef allows any type; its kernels are the CSR types')
        "transpose_a": False,
        "transpose_b": False,
        "adjoint_a": False,
        "adjoint_b": False,
        "transpose_output": False,
        "conjugate_output": False,
    },
    shape_fn=_matmul_shape,
)


def _scipy_csr(m, b: int, values=None):
    """Matrix `b` of `m` as a scipy.sparse CSR matrix (entries as stored)."""
    import scipy.sparse  # (imported when first used: at import it costs every program)

    ptr, cols, vals = m.batch(b)
    vals = vals if values is None else values
    return scipy.sparse.csr_matrix((vals, cols, ptr - ptr[0]), shape=(m.rows, m.cols))


def _op_sparse(x, transpose: bool, adjoint: bool):
    if transpose or adjoint:
        x = x.T
    return x.conj() if adjoint else x


def _dense_product(m, b: np.ndarray, attrs: dict) -> np.ndarray:
    """op(A) op(B) per matrix, A sparse (never made dense)."""
    out = []
    bs = b if b.ndim == 3 else b[None]
    for i in range(m.batch_size):
        a = _op_sparse(_scipy_csr(m, i), attrs["transpose_a"], attrs["adjoint_a"])
        out.append(np.asarray(a @ _apply(bs[i], attrs["transpose_b"], attrs["adjoint_b"])))
    rows = m.cols if attrs["transpose_a"] or attrs["adjoint_a"] else m.rows
    cols = b.shape[-2] if attrs["transpose_b"] or attrs["adjoint_b"] else b.shape[-1]
    res = np.stack(out) if out else np.zeros((0, rows, cols), b.dtype)
    res = res if b.ndim == 3 else res[0]
    if attrs["transpose_output"]:
        res = np.swapaxes(res, -1, -2)
    if attrs["conjugate_output"]:
        res = np.conj(res)
    return np.ascontiguousarray(res.astype(b.dtype, copy=False))


@SparseMatrixMatMul.kernel("CPU")
async def _matmul(ctx, a, b):
    m, b = csr_value(a), np.asarray(b)
    _check_kernel_type(ctx)
    check_type(
        m, ctx.attrs["T"], "Input types don't match.  a.dtype == {got} vs. b.dtype == {want}"
    )
    if b.ndim != m.dense_shape.size:
        raise invalid(f"Ranks of a and b must match, saw: {m.dense_shape.size} vs. {b.ndim}.")
    if b.ndim == 3 and b.shape[0] != m.batch_size:
        raise invalid(f"Batch sizes of a and b must match, saw: {m.batch_size} vs. {b.shape[0]}.")
    attrs = ctx.attrs
    k_a = m.rows if attrs["transpose_a"] or attrs["adjoint_a"] else m.cols
    k_b = b.shape[-1] if attrs["transpose_b"] or attrs["adjoint_b"] else b.shape[-2]
    if k_a != k_b:
        raise invalid(f"Inner product dimensions of A and B do not match: {k_a} vs. {k_b}")
    return await ctx.compute(_dense_product, m, b, attrs)


def _check_kernel_type(ctx) -> None:
    """TF has kernels for the CSR types only (its OpDef takes any type)."""
    t = ctx.attrs["T"]
    if t not in CSR_TYPES.allowed:
        raise invalid(
            f"No OpKernel was registered to support Op '{ctx.op.type}' with these attrs: "
            f"[T={t.name}]"
        )


def _unop(x, transpose: bool, adjoint: bool):
    """The gradient of X from the gradient of op(X)."""
    return _swap(x, adjoint) if transpose or adjoint else x


def _swap(x, conjugate: bool):
    rank = x.shape.ndims
    perm = [0, 2, 1] if rank == 3 else [1, 0]
    out = _g.transpose(x, perm)
    return _g.apply("Conj", out) if conjugate and x.dtype.is_complex else out


def _conj(x):
    return _g.apply("Conj", x) if x.dtype.is_complex else x


@SparseMatrixMatMul.gradient
def _matmul_grad(op, grad):
    a, b = op.inputs
    at = {k: op.get_attr(k) for k in ("transpose_a", "adjoint_a", "transpose_b", "adjoint_b")}
    if op.get_attr("conjugate_output"):
        grad = _conj(grad)
    if op.get_attr("transpose_output"):
        grad = _swap(grad, False)
    # C = op(A) op(B): d op(A) = G op(B)^H, d op(B) = op(A)^H G.
    op_b = b
    if at["transpose_b"] or at["adjoint_b"]:
        op_b = _swap(b, at["adjoint_b"])
    d_op_a = _g.apply("BatchMatMulV2", grad, op_b, adj_x=False, adj_y=True)
    a_grad = mask_like(_unop(d_op_a, at["transpose_a"], at["adjoint_a"]), a, op.get_attr("T"))
    # op(A)^H G with the sparse A: A^H G; for op(A) = A^T, conj(A) G = conj(A conj(G)).
    if at["adjoint_a"]:
        d_op_b = _sparse_dense(a, grad)
    elif at["transpose_a"]:
        d_op_b = _sparse_dense(a, _conj(grad), conjugate_output=True)
    else:
        d_op_b = _sparse_dense(a, grad, adjoint_a=True)
    b_grad = _unop(d_op_b, at["transpose_b"], at["adjoint_b"])
    return [a_grad, b_grad]


def _sparse_dense(a, b, **flags):
    return ops.apply_op("SparseMatrixMatMul", [a, b], flags).outputs[0]


# -- SparseMatrixSparseMatMul -----------------------------------------------------------------


def _sparse_matmul_shape(op):
    ta, aa = _check_flags(op, "a")
    tb, ab = _check_flags(op, "b")
    a, b = csr_shape(op.inputs[0]), csr_shape(op.inputs[1])
    if a.ndims is None or b.ndims is None:
        return csr_output(op, tensor_shape.unknown_shape())
    batch = _merge_batch([d.value for d in a.dims[:-2]], [d.value for d in b.dims[:-2]])
    ar, ac = _op_dims(a, ta or aa)
    br, bc = _op_dims(b, tb or ab)
    _merge_dims(ac, br)
    return csr_output(op, batch + [ar, bc])


SparseMatrixSparseMatMul = register_op(
    "SparseMatrixSparseMatMul",
    inputs=["a: variant", "b: variant"],
    outputs=["c: variant"],
    attrs={
        "type": CSR_TYPES,
        "transpose_a": False,
        "transpose_b": False,
        "adjoint_a": False,
        "adjoint_b": False,
    },
    shape_fn=_sparse_matmul_shape,
)


def _sparse_product(ma, mb, attrs: dict):
    """op(A) op(B) per matrix, kept sparse.  The structure is the structural product (a
    sum that cancels stays stored, as Eigen keeps it): the product of the 0/1 patterns,
    whose counts never cancel; the values are read from the numeric product there."""
    fa = (attrs["transpose_a"], attrs["adjoint_a"])
    fb = (attrs["transpose_b"], attrs["adjoint_b"])
    parts = []
    for i in range(ma.batch_size):
        a, b = _scipy_csr(ma, i), _scipy_csr(mb, i)
        ones_a = _scipy_csr(ma, i, np.ones(a.nnz, np.int64))
        ones_b = _scipy_csr(mb, i, np.ones(b.nnz, np.int64))
        pattern = (_op_sparse(ones_a, *fa) @ _op_sparse(ones_b, *fb)).tocsr()
        pattern.sort_indices()
        values = (_op_sparse(a, *fa) @ _op_sparse(b, *fb)).tocoo()
        rows, cols = pattern.shape
        r = np.repeat(np.arange(rows), np.diff(pattern.indptr))
        c = pattern.indices.astype(np.int64)
        keys = r * cols + c  # (increasing: the pattern's indices are sorted)
        v = np.zeros(keys.size, ma.dtype)
        v[np.searchsorted(keys, values.row.astype(np.int64) * cols + values.col)] = values.data
        parts.append(from_sorted_coo(rows, r, c, v))
    return parts, _product_shape(ma, mb, fa, fb)


def _product_shape(ma, mb, fa, fb) -> np.ndarray:
    rows = ma.cols if fa[0] or fa[1] else ma.rows
    cols = mb.rows if fb[0] or fb[1] else mb.cols
    return np.asarray([*ma.dense_shape[:-2], rows, cols], np.int64)


@SparseMatrixSparseMatMul.kernel("CPU")
async def _sparse_matmul(ctx, a, b):
    ma, mb = csr_value(a), csr_value(b)
    check_type(ma, ctx.attrs["type"], "dtype of a is not equal to 'type': {got} vs. {want}")
    check_type(mb, ctx.attrs["type"], "dtype of b is not equal to 'type': {got} vs. {want}")
    attrs = ctx.attrs
    if ma.dense_shape.size != mb.dense_shape.size or ma.batch_size != mb.batch_size:
        raise invalid(
            "Batch sizes of a and b must match, saw: "
            f"{ma.dense_shape.tolist()} vs. {mb.dense_shape.tolist()}"
        )
    ka = ma.rows if attrs["transpose_a"] or attrs["adjoint_a"] else ma.cols
    kb = mb.cols if attrs["transpose_b"] or attrs["adjoint_b"] else mb.rows
    if ka != kb:
        raise invalid(f"Inner product dimensions of A and B do not match: {ka} vs. {kb}")
    parts, shape = await ctx.compute(_sparse_product, ma, mb, attrs)
    return make_csr_value(from_batches(shape, parts, ma.dtype))


def _dense_of(m, dtype):
    return ops.apply_op("CSRSparseMatrixToDense", [m], {"type": dtype}).outputs[0]


@SparseMatrixSparseMatMul.gradient
def _sparse_matmul_grad(op, grad):
    a, b = op.inputs
    dtype = op.get_attr("type")
    ta, aa = op.get_attr("transpose_a"), op.get_attr("adjoint_a")
    tb, ab = op.get_attr("transpose_b"), op.get_attr("adjoint_b")
    g = _dense_of(grad, dtype)
    da, db = _dense_of(a, dtype), _dense_of(b, dtype)
    op_a = _swap(da, aa) if ta or aa else da
    op_b = _swap(db, ab) if tb or ab else db
    d_op_a = _g.apply("BatchMatMulV2", g, op_b, adj_x=False, adj_y=True)
    d_op_b = _g.apply("BatchMatMulV2", op_a, g, adj_x=True, adj_y=False)
    return [
        mask_like(_unop(d_op_a, ta, aa), a, dtype),
        mask_like(_unop(d_op_b, tb, ab), b, dtype),
    ]


# -- SparseMatrixAdd, SparseMatrixMul ---------------------------------------------------------


def _add_shape(op):
    a, b = csr_shape(op.inputs[0]), csr_shape(op.inputs[1])
    if a.ndims is not None and b.ndims is not None and a.ndims != b.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}")
    for s in (op.inputs[2].shape, op.inputs[3].shape):
        if s.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {s.ndims}")
    return csr_output(op, a.merge_with(b))


SparseMatrixAdd = register_op(
    "SparseMatrixAdd",
    inputs=["a: variant", "b: variant", "alpha: T", "beta: T"],
    outputs=["c: variant"],
    attrs={"T": CSR_TYPES},
    shape_fn=_add_shape,
)


def _sum(ma, mb, alpha, beta) -> list:
    parts = []
    for i in range(ma.batch_size):
        ra, ca, va = ma.coo(i)
        rb, cb, vb = mb.coo(i)
        keys_a, keys_b = ra * ma.cols + ca, rb * mb.cols + cb
        keys = np.union1d(keys_a, keys_b)
        out = np.zeros(keys.size, ma.dtype)
        np.add.at(out, np.searchsorted(keys, keys_a), alpha * va)
        np.add.at(out, np.searchsorted(keys, keys_b), beta * vb)
        r, c = np.divmod(keys, ma.cols) if ma.cols else (keys, keys)
        parts.append(from_sorted_coo(ma.rows, r, c, out))
    return parts


@SparseMatrixAdd.kernel("CPU")
async def _add(ctx, a, b, alpha, beta):
    ma, mb = csr_value(a), csr_value(b)
    check_type(ma, ctx.attrs["T"], "dtype of a is not equal to 'T': {got} vs. {want}")
    check_type(mb, ctx.attrs["T"], "dtype of b is not equal to 'T': {got} vs. {want}")
    if ma.dense_shape.tolist() != mb.dense_shape.tolist():
        raise invalid(
            "a.dense_shape == b.dense_shape, but saw: "
            f"{ma.dense_shape.tolist()} vs. {mb.dense_shape.tolist()}"
        )
    if np.ndim(alpha) or np.ndim(beta):
        raise invalid("alpha and beta must be scalars")
    alpha, beta = np.asarray(alpha)[()], np.asarray(beta)[()]
    parts = await ctx.compute(_sum, ma, mb, alpha, beta)
    return make_csr_value(from_batches(ma.dense_shape, parts, ma.dtype))


@SparseMatrixAdd.gradient
def _add_grad(op, grad):
    a, b, alpha, beta = op.inputs
    dtype = op.get_attr("T")
    g = _dense_of(grad, dtype)
    return [
        mask_like(_g.apply("Mul", g, alpha), a, dtype),
        mask_like(_g.apply("Mul", g, beta), b, dtype),
        None,
        None,
    ]


SparseMatrixMul = register_op(
    "SparseMatrixMul",
    inputs=["a: variant", "b: T"],
    outputs=["output: variant"],
    attrs={"T": ANY},  # (as TF's OpDef)
    shape_fn=lambda op: csr_output(op, csr_shape(op.inputs[0])),
)


@SparseMatrixMul.kernel("CPU")
async def _mul(ctx, a, b):
    m, b = csr_value(a), np.asarray(b)
    _check_kernel_type(ctx)
    check_type(m, ctx.attrs["T"], "dtype of a is not equal to 'T': {got} vs. {want}")
    if b.size == 1:
        scale = np.full(m.batch_size, b.reshape(-1)[0])
    elif m.dense_shape.size == 3 and b.shape == (m.batch_size, 1, 1):
        scale = b.reshape(-1)
    else:
        raise invalid(
            "SparseMatrixMul: b must be a scalar or, for a batch of matrices, of shape "
            f"[batch_size, 1, 1]; saw b shape {list(b.shape)} and a dense_shape "
            f"{m.dense_shape.tolist()}"
        )
    counts = np.diff(m.batch_pointers)
    values = (m.values * np.repeat(scale, counts)).astype(m.dtype)
    out = type(m)(m.dense_shape, m.batch_pointers, m.row_pointers, m.col_indices, values)
    return make_csr_value(out)


@SparseMatrixMul.gradient
def _mul_grad(op, grad):
    raise NotImplementedError()  # (as TF 2.21: no gradient through SparseMatrixMul)


# -- SparseMatrixSoftmax, SparseMatrixSoftmaxGrad ---------------------------------------------


def _row_ids(m) -> np.ndarray:
    """Each stored value's global row number (batch * rows + row)."""
    ids = []
    for b in range(m.batch_size):
        rows, _, _ = m.coo(b)
        ids.append(rows + b * m.rows)
    return np.concatenate(ids) if ids else np.zeros(0, np.int64)


def _row_reduce(ufunc, values, ids, n, initial):
    out = np.full(n, initial, values.dtype)
    ufunc.at(out, ids, values)
    return out


SparseMatrixSoftmax = register_op(
    "SparseMatrixSoftmax",
    inputs=["logits: variant"],
    outputs=["softmax: variant"],
    attrs={"type": _FLOAT_TYPES},
    shape_fn=lambda op: csr_output(op, csr_shape(op.inputs[0])),
)


@SparseMatrixSoftmax.kernel("CPU")
async def _softmax(ctx, logits):
    m = csr_value(logits)
    check_type(m, ctx.attrs["type"], _TYPE_MESSAGE)
    ids, n = _row_ids(m), m.batch_size * m.rows
    v = m.values
    top = _row_reduce(np.maximum, v, ids, n, -np.inf)
    e = np.exp(v - top[ids])
    total = _row_reduce(np.add, e, ids, n, 0)
    out = (e / total[ids]).astype(m.dtype)
    return make_csr_value(type(m)(m.dense_shape, m.batch_pointers, m.row_pointers,
                                  m.col_indices, out))  # fmt: skip


@SparseMatrixSoftmax.gradient
def _softmax_grad(op, grad):
    attrs = {"type": op.get_attr("type")}
    return [ops.apply_op("SparseMatrixSoftmaxGrad", [op.outputs[0], grad], attrs).outputs[0]]


SparseMatrixSoftmaxGrad = register_op(
    "SparseMatrixSoftmaxGrad",
    inputs=["softmax: variant", "grad_softmax: variant"],
    outputs=["gradient: variant"],
    attrs={"type": _FLOAT_TYPES},
    shape_fn=lambda op: csr_output(op, csr_shape(op.inputs[0])),
)


@SparseMatrixSoftmaxGrad.kernel("CPU")
async def _softmax_grad_kernel(ctx, softmax, grad_softmax):
    s, g = csr_value(softmax), csr_value(grad_softmax)
    check_type(s, ctx.attrs["type"], _TYPE_MESSAGE)
    check_type(g, ctx.attrs["type"], _TYPE_MESSAGE)
    same = (
        s.dense_shape.tolist() == g.dense_shape.tolist()
        and np.array_equal(s.row_pointers, g.row_pointers)
        and np.array_equal(s.batch_pointers, g.batch_pointers)
        and np.array_equal(s.col_indices, g.col_indices)
    )
    if not same:
        raise invalid("softmax and grad_softmax must have the same sparsity structure")
    ids, n = _row_ids(s), s.batch_size * s.rows
    dot = _row_reduce(np.add, s.values * g.values, ids, n, 0)
    out = (s.values * (g.values - dot[ids])).astype(s.dtype)
    return make_csr_value(type(s)(s.dense_shape, s.batch_pointers, s.row_pointers,
                                  s.col_indices, out))  # fmt: skip


# -- SparseMatrixOrderingAMD ------------------------------------------------------------------


def _square(shape) -> tuple:
    if shape.ndims is None:
        return None, None
    _rank = shape.ndims
    if _rank not in (2, 3):
        raise ValueError(f"Shape must be rank 2 or 3 but is rank {_rank}")
    n = _merge_dims(shape[-2].value, shape[-1].value)
    return [d.value for d in shape.dims[:-2]], n


def _amd_shape(op):
    batch, n = _square(csr_shape(op.inputs[0]))
    if batch is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape(batch + [n])]


SparseMatrixOrderingAMD = register_op(
    "SparseMatrixOrderingAMD",
    inputs=["input: variant"],
    outputs=["output: int32"],
    shape_fn=_amd_shape,
)


def _check_square(m) -> None:
    if m.rows != m.cols:
        raise invalid(f"Sparse matrix must be square, but saw shape: [{m.rows}, {m.cols}]")


def _orderings(m) -> np.ndarray:
    out = [amd_order(m.rows, *m.coo(b)[:2]) for b in range(m.batch_size)]
    stacked = np.stack(out) if out else np.zeros((0, m.rows), np.int32)
    return stacked if m.dense_shape.size == 3 else stacked[0]


@SparseMatrixOrderingAMD.kernel("CPU")
async def _ordering_amd(ctx, matrix):
    m = csr_value(matrix)
    _check_square(m)
    return await ctx.compute(_orderings, m)


# -- SparseMatrixSparseCholesky ---------------------------------------------------------------


def _cholesky_shape(op):
    shape = csr_shape(op.inputs[0])
    perm = op.inputs[1].shape
    batch, n = _square(shape)
    if batch is not None and perm.ndims is not None:
        if perm.ndims != len(batch) + 1:
            raise ValueError(
                f"Shapes must be equal rank, but are {len(batch) + 1} and {perm.ndims}"
            )
        _merge_dims(n, perm[-1].value)
    return csr_output(op, shape)


SparseMatrixSparseCholesky = register_op(
    "SparseMatrixSparseCholesky",
    inputs=["input: variant", "permutation: int32"],
    outputs=["output: variant"],
    attrs={"type": CSR_TYPES},
    shape_fn=_cholesky_shape,
)


def _upper_columns(m, b: int, perm: np.ndarray) -> tuple[list, list]:
    """The upper triangle of B = P A P^T (`B[i, j] = A[p[i], p[j]]`, A read from its lower
    triangle), column by column, each column's entries in the order TF's twisted copy
    visits A's (its rows, then their stored entries): the order the factorization adds
    them in, which its rounding depends on."""
    n = m.rows
    inverse = np.empty(n, np.int64)
    inverse[perm] = np.arange(n)
    rows, cols, vals = m.coo(b)
    lower = rows >= cols
    ip, jp, v = inverse[rows[lower]], inverse[cols[lower]], vals[lower]
    # TF factors B^T = conj(B) (its row-major matrix seen column-major) and returns the
    # conjugate: y gets conj(B[k, i]) for column k.  (Only complex rounding, and the
    # sign of the diagonal's zero imaginary parts, tell the two apart.)
    v = np.where(ip >= jp, np.conj(v), v)
    col, row = np.maximum(ip, jp), np.minimum(ip, jp)
    order = np.argsort(col, kind="stable")
    bounds = np.searchsorted(col[order], np.arange(n + 1))
    r, x = row[order].tolist(), v[order]
    return [r[bounds[k] : bounds[k + 1]] for k in range(n)], [
        x[bounds[k] : bounds[k + 1]] for k in range(n)
    ]


def _elimination_tree(n: int, columns: list) -> tuple[list, list]:
    """(parent, off-diagonal count of each column of L) of the matrix's upper columns."""
    parent, tags, counts = [-1] * n, [-1] * n, [0] * n
    for k in range(n):
        tags[k] = k
        for i in columns[k]:
            while i < k and tags[i] != k:
                if parent[i] == -1:
                    parent[i] = k
                counts[i] += 1
                tags[i] = k
                i = parent[i]
    return parent, counts


def _cholesky_one(m, b: int, perm: np.ndarray):
    """(row pointers, cols, values) of L, B = L L^H, or None when B is not positive
    definite.  Up-looking, row k of L from a sparse triangular solve along the
    elimination tree, each operation in the order of Eigen's SimplicialLLT (which TF
    runs): a real factor is TF's to the last bit (a complex one to an ulp or two)."""
    n, dtype = m.rows, m.dtype
    columns, values = _upper_columns(m, b, perm)
    parent, counts = _elimination_tree(n, columns)
    lp = np.zeros(n + 1, np.int64)
    np.cumsum(np.asarray(counts, np.int64) + 1, out=lp[1:])
    li, lx = np.zeros(lp[-1], np.int64), np.zeros(lp[-1], dtype)
    filled = [0] * n
    y, tags, pattern = np.zeros(n, dtype), [-1] * n, [0] * n
    real = np.dtype(dtype).type(0).real.dtype.type
    for k in range(n):
        top, tags[k] = n, k
        for i, v in zip(columns[k], values[k]):
            y[i] += v
            path = []
            while tags[i] != k:  # the tree path up from i, until a node already seen
                path.append(i)
                tags[i] = k
                i = parent[i]
            for i in reversed(path):
                top -= 1
                pattern[top] = i
        d = real(y[k].real)
        y[k] = 0
        for i in pattern[top:n]:
            yi = y[i] / lx[lp[i]]  # L[k, i]
            y[i] = 0
            lo, hi = lp[i] + 1, lp[i] + filled[i]
            if hi > lo:
                y[li[lo:hi]] -= np.conj(lx[lo:hi]) * yi
            d -= real((yi * np.conj(yi)).real)
            li[hi], lx[hi] = k, yi
            filled[i] += 1
        if d <= 0:  # (a NaN goes on, as in Eigen)
            return None
        li[lp[k]], lx[lp[k]] = k, np.sqrt(d)
        filled[k] = 1
    col = np.repeat(np.arange(n), np.diff(lp))
    order = np.lexsort((col, li))
    return from_sorted_coo(n, li[order], col[order], np.conj(lx[order]))


def _choleskys(m, perms: np.ndarray) -> list:
    parts = []
    for b in range(m.batch_size):
        part = _cholesky_one(m, b, perms[b])
        if part is None:
            raise invalid(
                f"Sparse Cholesky factorization failed for batch index {b}. "
                "The input might not be valid."
            )
        parts.append(part)
    return parts


@SparseMatrixSparseCholesky.kernel("CPU")
async def _sparse_cholesky(ctx, matrix, permutation):
    m = csr_value(matrix)
    check_type(m, ctx.attrs["type"], _ASKED_MESSAGE)
    _check_square(m)
    perms = np.asarray(permutation, np.int64)
    want = (m.batch_size, m.rows) if m.dense_shape.size == 3 else (m.rows,)
    if perms.shape != want:
        raise invalid(f"Permutation must have shape {list(want)}, but saw: {list(perms.shape)}")
    perms = perms.reshape(m.batch_size, m.rows)
    for b, p in enumerate(perms):
        if not np.array_equal(np.sort(p), np.arange(m.rows)):
            raise invalid(f"Permutation for batch index {b} is not a permutation of [0, {m.rows})")
    parts = await ctx.compute(_choleskys, m, perms)
    return make_csr_value(from_batches(m.dense_shape, parts, m.dtype))
