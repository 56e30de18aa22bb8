"""CSR sparse matrices (TF's `sparse_csr_matrix_ops`): the variant-typed CSRSparseMatrix
and the ops that make it, take it apart and transpose it.

A CSRSparseMatrix value (a 0-d object array holding `CSRSparseMatrix`) is a matrix, or a
batch of matrices (rank 3), in compressed sparse row form, as TF lays it out:
`dense_shape` (int64 [rank]), `batch_pointers` (int32 [batch + 1]: where each batch's
entries start in `col_indices`/`values`), `row_pointers` (int32 [batch * (rows + 1)],
each batch's row starts, counted from its own first entry), `col_indices` (int32) and
`values`.  Entries keep the order they were given in (TF builds the pointers by counting
and copies indices and values as given: a SparseTensor must be in row-major order for
the matrix to mean what it says, as in TF).

The ops here: DenseToCSRSparseMatrix, SparseTensorToCSRSparseMatrix,
CSRSparseMatrixComponents, CSRSparseMatrixToDense, CSRSparseMatrixToSparseTensor,
SparseMatrixNNZ, SparseMatrixZeros, SparseMatrixTranspose, with TF's gradients.  The
arithmetic (products, sums, softmax, ordering, Cholesky) is in csr_sparse_matrix_math.

Static shapes: TF keeps a CSR tensor's dense shape as the variant's handle data, from
which later ops infer theirs (a dense result's shape, `row_ptrs`' length) and check
theirs at build time.  Here the shape function of each op making a CSR matrix records
it on the op (`_csr_shape`), and `csr_shape(tensor)` reads it back.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["CSRSparseMatrix", "csr_shape", "csr_value", "make_csr_value"]

CSR_TYPES = TypeConstraint(("float32", "float64", "complex64", "complex128"))
_TYPE_NAMES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "complex64",
    np.dtype(np.complex128): "complex128",
}


def invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


class CSRSparseMatrix:
    """One CSR matrix or batch of them (see the module note); immutable once made."""

    __slots__ = ("dense_shape", "batch_pointers", "row_pointers", "col_indices", "values")

    def __init__(self, dense_shape, batch_pointers, row_pointers, col_indices, values):
        self.dense_shape = np.asarray(dense_shape, np.int64)
        self.batch_pointers = np.asarray(batch_pointers, np.int32)
        self.row_pointers = np.asarray(row_pointers, np.int32)
        self.col_indices = np.asarray(col_indices, np.int32)
        self.values = np.asarray(values)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def batch_size(self) -> int:
        return int(self.dense_shape[0]) if self.dense_shape.size == 3 else 1

    @property
    def rows(self) -> int:
        return int(self.dense_shape[-2])

    @property
    def cols(self) -> int:
        return int(self.dense_shape[-1])

    def batch(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row pointers, column indices, values) of matrix `b`."""
        r = self.rows + 1
        lo, hi = int(self.batch_pointers[b]), int(self.batch_pointers[b + 1])
        return (
            self.row_pointers[b * r : (b + 1) * r],
            self.col_indices[lo:hi],
            self.values[lo:hi],
        )

    def coo(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, values) of matrix `b`'s entries, in storage order."""
        ptr, cols, vals = self.batch(b)
        rows = np.repeat(np.arange(self.rows), np.diff(ptr))[: cols.size]
        return rows, cols, vals

    def dense(self, b: int) -> np.ndarray:
        out = np.zeros((self.rows, self.cols), self.dtype)
        rows, cols, vals = self.coo(b)
        out[rows, cols] = vals
        return out

    def to_dense(self) -> np.ndarray:
        out = np.stack([self.dense(b) for b in range(self.batch_size)]) if self.batch_size else (
            np.zeros((0, self.rows, self.cols), self.dtype)
        )  # fmt: skip
        return out if self.dense_shape.size == 3 else out[0]


def from_batches(dense_shape, parts: list, dtype) -> CSRSparseMatrix:
    """A CSRSparseMatrix of per-matrix (row pointers, column indices, values)."""
    counts = [p[1].size for p in parts]
    bptr = np.zeros(len(parts) + 1, np.int32)
    np.cumsum(counts, out=bptr[1:])
    cat = lambda xs, t: np.concatenate(xs).astype(t) if xs else np.zeros(0, t)  # noqa: E731
    return CSRSparseMatrix(
        dense_shape,
        bptr,
        cat([p[0] for p in parts], np.int32),
        cat([p[1] for p in parts], np.int32),
        cat([p[2] for p in parts], dtype),
    )


def from_sorted_coo(rows: int, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> tuple:
    """(row pointers, cols, values) of entries given in row-major order."""
    ptr = np.zeros(rows + 1, np.int32)
    np.cumsum(np.bincount(r, minlength=rows)[:rows], out=ptr[1:])
    return ptr, c.astype(np.int32), v


def csr_value(x) -> CSRSparseMatrix:
    m = x[()] if isinstance(x, np.ndarray) and x.shape == () else x
    if not isinstance(m, CSRSparseMatrix):
        raise invalid(f"Expected a CSRSparseMatrix variant, got {type(m).__name__}")
    return m


def make_csr_value(m: CSRSparseMatrix) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = m
    return out


def check_type(m: CSRSparseMatrix, want, message: str) -> None:
    want = np.dtype(dtypes.as_dtype(want).as_numpy_dtype)
    if m.dtype != want:
        raise invalid(message.format(got=_type_name(m.dtype), want=_type_name(want)))


def _type_name(dtype: np.dtype) -> str:
    return _TYPE_NAMES.get(dtype) or dtypes.as_dtype(dtype).name


def _asked_type(m, want):
    check_type(m, want, "Asked for a CSRSparseMatrix of type {want} but saw dtype: {got}")


# -- static shapes (TF's handle data) ---------------------------------------------------------


def csr_shape(t) -> tensor_shape.TensorShape:
    """The dense shape of the CSR matrix tensor `t`, as far as the graph knows it."""
    shape = getattr(t.op, "_csr_shape", None)
    return shape if shape is not None else tensor_shape.unknown_shape()


def csr_output(op, shape) -> list:
    """A shape function's result for an op with one CSR output of dense `shape`."""
    op._csr_shape = tensor_shape.as_shape(shape)
    return [tensor_shape.TensorShape([])]


def _rank_2_or_3(rank, what: str) -> None:
    if rank is not None and rank not in (2, 3):
        raise ValueError(f"Invalid rank{what}: {rank}.  Expected a known rank of either 2 or 3.")


# -- DenseToCSRSparseMatrix -------------------------------------------------------------------


def _dense_to_csr_shape(op):
    dense, indices = op.inputs[0].shape, op.inputs[1].shape
    _rank_2_or_3(dense.ndims, " of dense")
    if dense.ndims is not None and indices.ndims == 2 and indices[1].value is not None:
        if indices[1].value != dense.ndims:
            raise ValueError(
                "indices.shape[1] must match rank of dense; saw: "
                f"{indices[1].value} vs. {dense.ndims}"
            )
    return csr_output(op, dense)


DenseToCSRSparseMatrix = register_op(
    "DenseToCSRSparseMatrix",
    inputs=["dense_input: T", "indices: int64"],
    outputs=["sparse_output: variant"],
    attrs={"T": CSR_TYPES},
    shape_fn=_dense_to_csr_shape,
)


def coo_to_csr(shape: np.ndarray, indices: np.ndarray, values: np.ndarray) -> CSRSparseMatrix:
    """TF's conversion of (row-major) COO entries: pointers by counting, entries as given."""
    rank = shape.size
    batches = int(shape[0]) if rank == 3 else 1
    rows = int(shape[-2])
    b = indices[:, 0] if rank == 3 else np.zeros(indices.shape[0], np.int64)
    r = indices[:, -2]
    counts = np.bincount(b * rows + r, minlength=batches * rows)[: batches * rows]
    ptr = np.zeros((batches, rows + 1), np.int32)
    np.cumsum(counts.reshape(batches, rows), axis=1, out=ptr[:, 1:])
    bptr = np.zeros(batches + 1, np.int32)
    bptr[1:-1] = _batch_ends(b, batches)
    bptr[-1] = b.size
    return CSRSparseMatrix(shape, bptr, ptr.reshape(-1), indices[:, -1], values)


def _batch_ends(b: np.ndarray, batches: int) -> np.ndarray:
    """Where batches 0 .. batches-2 end, as TF finds them: walking the entries while their
    batch is the one being counted (on unsorted entries too, as TF; the last batch ends
    at the last entry)."""
    if b.size < 2 or (np.diff(b) >= 0).all():
        return np.searchsorted(b, np.arange(batches - 1), side="right")
    ends, i = [], 0
    for k in range(batches - 1):
        while i < b.size and b[i] == k:
            i += 1
        ends.append(i)
    return np.asarray(ends, np.int64)


def _check_bounds(indices: np.ndarray, shape: np.ndarray) -> None:
    bad = np.flatnonzero(((indices < 0) | (indices >= shape)).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise invalid(
            f"Sparse index tuple indices[{i}, :] = [{', '.join(map(str, indices[i]))}] "
            "is out of bounds"
        )


@DenseToCSRSparseMatrix.kernel("CPU")
async def _dense_to_csr(ctx, dense, indices):
    dense = np.asarray(dense)
    indices = np.asarray(indices, np.int64).reshape(-1, dense.ndim)
    shape = np.asarray(dense.shape, np.int64)
    bad = np.flatnonzero(((indices < 0) | (indices >= shape)).any(axis=1))
    if bad.size:  # (TF's GatherNd wording)
        i = int(bad[0])
        raise invalid(
            f"indices[{i}] = [{', '.join(map(str, indices[i]))}] does not index into param "
            f"shape [{','.join(map(str, shape))}], node name: {ctx.op.name}"
        )
    return make_csr_value(coo_to_csr(shape, indices, dense[tuple(indices.T)]))


@DenseToCSRSparseMatrix.gradient
def _dense_to_csr_grad(op, grad):
    dense = ops.apply_op("CSRSparseMatrixToDense", [grad], {"type": op.get_attr("T")})
    return [dense.outputs[0], None]


# -- SparseTensorToCSRSparseMatrix ------------------------------------------------------------


def _sparse_tensor_to_csr_shape(op):
    indices, values, dense_shape = (t.shape for t in op.inputs)
    rank = dense_shape[0].value if dense_shape.ndims == 1 else None
    _rank_2_or_3(rank, "")
    n, m = (indices[0].value if indices.ndims == 2 else None), values.num_elements()
    if n is not None and m is not None and values.ndims == 1 and n != m:
        raise ValueError(f"Number of elements in index ({n}) and values ({m}) do not match.")
    known = ops.constant_value(op.inputs[2])
    shape = tensor_shape.as_shape(known.tolist()) if known is not None else (
        tensor_shape.unknown_shape(rank)
    )  # fmt: skip
    return csr_output(op, shape)


SparseTensorToCSRSparseMatrix = register_op(
    "SparseTensorToCSRSparseMatrix",
    inputs=["indices: int64", "values: T", "dense_shape: int64"],
    outputs=["sparse_matrix: variant"],
    attrs={"T": CSR_TYPES},
    shape_fn=_sparse_tensor_to_csr_shape,
)


@SparseTensorToCSRSparseMatrix.kernel("CPU")
async def _sparse_tensor_to_csr(ctx, indices, values, dense_shape):
    shape = np.asarray(dense_shape, np.int64).reshape(-1)
    if shape.size not in (2, 3):
        raise invalid(
            f"SparseTensor must have rank 2 or 3; but dense_shape has size: {shape.size}"
        )
    values = np.asarray(values).reshape(-1)
    indices = np.asarray(indices, np.int64).reshape(-1, shape.size)
    if indices.shape[0] != values.size:
        raise invalid(
            f"Number of elements in index ({indices.shape[0]}) and values ({values.size}) "
            "do not match."
        )
    _check_bounds(indices, shape)
    return make_csr_value(coo_to_csr(shape, indices, values))


@SparseTensorToCSRSparseMatrix.gradient
def _sparse_tensor_to_csr_grad(op, grad):
    st = ops.apply_op("CSRSparseMatrixToSparseTensor", [grad], {"type": op.get_attr("T")})
    return [None, st.outputs[1], None]


# -- CSRSparseMatrixComponents ----------------------------------------------------------------


def _components_shape(op):
    shape = csr_shape(op.inputs[0])
    rows = shape[-2].value if shape.ndims else None
    return [
        tensor_shape.TensorShape([None if rows is None else rows + 1]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([None]),
    ]


CSRSparseMatrixComponents = register_op(
    "CSRSparseMatrixComponents",
    inputs=["csr_sparse_matrix: variant", "index: int32"],
    outputs=["row_ptrs: int32", "col_inds: int32", "values: type"],
    attrs={"type": CSR_TYPES},
    shape_fn=_components_shape,
)


@CSRSparseMatrixComponents.kernel("CPU")
async def _components(ctx, matrix, index):
    m = csr_value(matrix)
    check_type(m, ctx.attrs["type"], "dtype of input is not equal to 'type': {got} vs. {want}")
    i = int(np.asarray(index))
    if not 0 <= i < m.batch_size:
        raise invalid(f"index ({i}) not in [0, {m.batch_size})")
    ptr, cols, vals = m.batch(i)
    return ptr.copy(), cols.copy(), vals.copy()


# -- CSRSparseMatrixToDense, CSRSparseMatrixToSparseTensor ------------------------------------

CSRSparseMatrixToDense = register_op(
    "CSRSparseMatrixToDense",
    inputs=["sparse_input: variant"],
    outputs=["dense_output: type"],
    attrs={"type": CSR_TYPES},
    shape_fn=lambda op: [csr_shape(op.inputs[0])],
)


@CSRSparseMatrixToDense.kernel("CPU")
async def _to_dense(ctx, matrix):
    m = csr_value(matrix)
    _asked_type(m, ctx.attrs["type"])
    return m.to_dense()


def mask_like(dense_grad, matrix, dtype):
    """`dense_grad` kept at `matrix`'s entries only, as a CSR matrix of its structure."""
    st = ops.apply_op("CSRSparseMatrixToSparseTensor", [matrix], {"type": dtype}).outputs
    values = _g.apply("GatherNd", dense_grad, st[0])
    return ops.apply_op("SparseTensorToCSRSparseMatrix", [st[0], values, st[2]]).outputs[0]


@CSRSparseMatrixToDense.gradient
def _to_dense_grad(op, grad):
    return [mask_like(grad, op.inputs[0], op.get_attr("type"))]


def _to_sparse_tensor_shape(op):
    shape = csr_shape(op.inputs[0])
    rank = shape.ndims
    return [
        tensor_shape.TensorShape([None, rank]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([rank]),
    ]


CSRSparseMatrixToSparseTensor = register_op(
    "CSRSparseMatrixToSparseTensor",
    inputs=["sparse_matrix: variant"],
    outputs=["indices: int64", "values: type", "dense_shape: int64"],
    attrs={"type": CSR_TYPES},
    shape_fn=_to_sparse_tensor_shape,
)


@CSRSparseMatrixToSparseTensor.kernel("CPU")
async def _to_sparse_tensor(ctx, matrix):
    m = csr_value(matrix)
    check_type(
        m, ctx.attrs["type"], "Expected a CSRSparseMatrix of type {want} but saw type: {got}"
    )
    parts = []
    for b in range(m.batch_size):
        rows, cols, _ = m.coo(b)
        cols = cols.astype(np.int64)
        if m.dense_shape.size == 3:
            parts.append(np.stack([np.full_like(cols, b), rows, cols], axis=1))
        else:
            parts.append(np.stack([rows.astype(np.int64), cols], axis=1))
    rank = m.dense_shape.size
    indices = np.concatenate(parts) if parts else np.zeros((0, rank), np.int64)
    return indices.astype(np.int64), m.values.copy(), m.dense_shape.copy()


@CSRSparseMatrixToSparseTensor.gradient
def _to_sparse_tensor_grad(op, unused_indices_grad, values_grad, unused_shape_grad):
    return [
        ops.apply_op(
            "SparseTensorToCSRSparseMatrix", [op.outputs[0], values_grad, op.outputs[2]]
        ).outputs[0]
    ]


# -- SparseMatrixNNZ, SparseMatrixZeros -------------------------------------------------------


def _nnz_shape(op):
    shape = csr_shape(op.inputs[0])
    if shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape(shape.dims[:-2])]


SparseMatrixNNZ = register_op(
    "SparseMatrixNNZ",
    inputs=["sparse_matrix: variant"],
    outputs=["nnz: int32"],
    shape_fn=_nnz_shape,
)
NotDifferentiable("SparseMatrixNNZ")


@SparseMatrixNNZ.kernel("CPU")
async def _nnz(ctx, matrix):
    m = csr_value(matrix)
    counts = np.diff(m.batch_pointers).astype(np.int32)
    return counts if m.dense_shape.size == 3 else np.int32(counts[0])


def _zeros_shape(op):
    known = ops.constant_value(op.inputs[0])
    if known is not None:
        shape = tensor_shape.as_shape(np.asarray(known).tolist())
    else:
        n = op.inputs[0].shape
        shape = tensor_shape.unknown_shape(n[0].value if n.ndims == 1 else None)
    _rank_2_or_3(shape.ndims, " of dense_shape")
    return csr_output(op, shape)


SparseMatrixZeros = register_op(
    "SparseMatrixZeros",
    inputs=["dense_shape: int64"],
    outputs=["sparse_matrix: variant"],
    attrs={"type": CSR_TYPES},
    shape_fn=_zeros_shape,
)
NotDifferentiable("SparseMatrixZeros")


@SparseMatrixZeros.kernel("CPU")
async def _zeros(ctx, dense_shape):
    # (TF 2.21 registers this kernel on GPU only: asyncflow runs it on any device)
    shape = np.asarray(dense_shape, np.int64).reshape(-1)
    if shape.size not in (2, 3):
        raise invalid(
            f"sparse matrix must have rank 2 or 3; but dense_shape has size {shape.size}"
        )
    batches = int(shape[0]) if shape.size == 3 else 1
    dtype = dtypes.as_dtype(ctx.attrs["type"]).as_numpy_dtype
    return make_csr_value(
        CSRSparseMatrix(
            shape,
            np.zeros(batches + 1, np.int32),
            np.zeros(batches * (int(shape[-2]) + 1), np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, dtype),
        )
    )


# -- SparseMatrixTranspose --------------------------------------------------------------------


def _transposed(shape: tensor_shape.TensorShape) -> tensor_shape.TensorShape:
    if shape.ndims is None:
        return shape
    dims = shape.dims
    return tensor_shape.TensorShape([*dims[:-2], dims[-1], dims[-2]])


SparseMatrixTranspose = register_op(
    "SparseMatrixTranspose",
    inputs=["input: variant"],
    outputs=["output: variant"],
    attrs={"conjugate": False, "type": CSR_TYPES},
    shape_fn=lambda op: csr_output(op, _transposed(csr_shape(op.inputs[0]))),
)


def transpose_one(rows: int, cols: int, r, c, v, conjugate: bool) -> tuple:
    """(row pointers, cols, values) of one matrix's transpose, rows in column order."""
    order = np.lexsort((r, c))
    v = v[order]
    return from_sorted_coo(cols, c[order], r[order], np.conj(v) if conjugate else v)


def transpose(m: CSRSparseMatrix, conjugate: bool) -> CSRSparseMatrix:
    shape = m.dense_shape.copy()
    shape[-2], shape[-1] = shape[-1], shape[-2]
    parts = [transpose_one(m.rows, m.cols, *m.coo(b), conjugate) for b in range(m.batch_size)]
    return from_batches(shape, parts, m.dtype)


@SparseMatrixTranspose.kernel("CPU")
async def _transpose(ctx, matrix):
    m = csr_value(matrix)
    check_type(m, ctx.attrs["type"], "dtype of input is not equal to 'type': {got} vs. {want}")
    return make_csr_value(transpose(m, ctx.attrs["conjugate"]))


@SparseMatrixTranspose.gradient
def _transpose_grad(op, grad):
    attrs = {"type": op.get_attr("type"), "conjugate": op.get_attr("conjugate")}
    return [ops.apply_op("SparseMatrixTranspose", [grad], attrs).outputs[0]]
