"""CSR sparse matrices (TF's sparse_csr_matrix_ops) in a TF1 Session, against TF 2.21.

Every expected value below was recorded from TensorFlow 2.21 (tf.compat.v1, CPU):
literals for the small cases; fixtures/csr_sparse_matrix/amd_cholesky_tf.json for AMD
orderings and Cholesky factors of the matrices `_amd_cases` makes, and
complex_products_tf.json for sparse x dense and sparse x sparse products and their
gradients over every flag combination (inputs from `_complex_products`), and
cholesky_more_tf.json for complex and batched float32 factors (`_more_choleskys`).

SparseMatrixAdd, SparseMatrixMul, SparseMatrixSoftmax, SparseMatrixSoftmaxGrad and
SparseMatrixZeros have only GPU kernels in TF 2.21 (a CPU session fails to place them),
so they are checked against NumPy references of what TF's GPU kernels compute.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

raw = af.raw_ops
FIXTURES = Path(__file__).parent / "fixtures" / "csr_sparse_matrix"

D2 = np.array([[1.0, 0, 2], [0, 0, 3], [4, 5, 0]], np.float32)
D3 = np.stack([D2, np.array([[0, 1.0, 0], [0, 0, 0], [2, 0, 3]], np.float32)])


def csr(d):
    d = af.convert_to_tensor(d)
    return raw.DenseToCSRSparseMatrix(dense_input=d, indices=af.where(af.not_equal(d, 0)))


def comps(m, i=0, dtype=af.float32):
    return raw.CSRSparseMatrixComponents(csr_sparse_matrix=m, index=i, type=dtype)


def dense(m, dtype=af.float32):
    return raw.CSRSparseMatrixToDense(sparse_input=m, type=dtype)


def _run(fetch):
    with af.Session() as sess:
        return sess.run(fetch)


def _lists(value):
    if isinstance(value, (tuple, list)):
        return [_lists(v) for v in value]
    return np.asarray(value).tolist()


# -- forward values, recorded from TF 2.21 --------------------------------------------------


def _st() -> dict:
    """A SparseTensor not in row-major order (TF copies its entries as given)."""
    return dict(
        indices=af.constant([[0, 1], [2, 0], [1, 1]], af.int64),
        values=[1.0, 2.0, 3.0],
        dense_shape=af.constant([3, 3], af.int64),
    )


CASES = {
    "components": (lambda: comps(csr(D2)), [[0, 2, 3, 5], [0, 2, 2, 0, 1], [1, 2, 3, 4, 5]]),
    "components_batch_1": (lambda: comps(csr(D3), 1), [[0, 1, 1, 3], [1, 0, 2], [1, 2, 3]]),
    "to_dense": (lambda: dense(csr(D3)), D3.tolist()),
    "to_sparse_tensor": (
        lambda: raw.CSRSparseMatrixToSparseTensor(sparse_matrix=csr(D3), type=af.float32),
        [
            [[0, 0, 0], [0, 0, 2], [0, 1, 2], [0, 2, 0], [0, 2, 1], [1, 0, 1], [1, 2, 0],
             [1, 2, 2]],
            [1, 2, 3, 4, 5, 1, 2, 3],
            [2, 3, 3],
        ],
    ),
    "nnz": (lambda: raw.SparseMatrixNNZ(sparse_matrix=csr(D2)), 5),
    "nnz_batch": (lambda: raw.SparseMatrixNNZ(sparse_matrix=csr(D3)), [5, 3]),
    "transpose": (
        lambda: comps(raw.SparseMatrixTranspose(input=csr(D3), type=af.float32)),
        [[0, 2, 3, 5], [0, 2, 2, 0, 1], [1, 4, 5, 2, 3]],
    ),
    "matmul_batch": (
        lambda: raw.SparseMatrixMatMul(
            a=csr(D3), b=np.arange(9, dtype=np.float32).reshape(3, 3) + np.zeros([2, 1, 1])
            .astype(np.float32)),
        [[[12, 15, 18], [18, 21, 24], [15, 24, 33]], [[3, 4, 5], [0, 0, 0], [18, 23, 28]]],
    ),
    "matmul_transpose_b_output": (
        lambda: raw.SparseMatrixMatMul(
            a=csr(D2), b=np.arange(6, dtype=np.float32).reshape(2, 3), transpose_b=True,
            transpose_output=True),
        [[4, 6, 5], [13, 15, 32]],
    ),
    "matmul_transpose_a": (
        lambda: raw.SparseMatrixMatMul(
            a=csr(D2), b=np.arange(6, dtype=np.float32).reshape(3, 2), transpose_a=True),
        [[16, 21], [20, 25], [6, 11]],
    ),
    "sparse_matmul": (
        lambda: comps(raw.SparseMatrixSparseMatMul(a=csr(D2), b=csr(D2), type=af.float32)),
        [[0, 3, 5, 7], [0, 1, 2, 0, 1, 0, 2], [9, 10, 2, 12, 15, 4, 23]],
    ),
    "sparse_matmul_keeps_a_cancelled_entry": (
        lambda: comps(raw.SparseMatrixSparseMatMul(
            a=csr(np.array([[1.0, 1], [0, 0]], np.float32)),
            b=csr(np.array([[1.0, 0], [-1, 0]], np.float32)), type=af.float32)),
        [[0, 1, 1], [0], [0]],
    ),
    "sparse_matmul_batch_transpose_a": (
        lambda: comps(raw.SparseMatrixSparseMatMul(
            a=csr(D3), b=csr(D3), type=af.float32, transpose_a=True), 1),
        [[0, 2, 3, 5], [0, 2, 1, 0, 2], [4, 6, 1, 6, 9]],
    ),
    "from_sparse_tensor_as_given": (  # (not in row-major order: TF copies as given)
        lambda: comps(raw.SparseTensorToCSRSparseMatrix(**_st())),
        [[0, 1, 2, 3], [1, 0, 1], [1, 2, 3]],
    ),
    "from_sparse_tensor_duplicates": (
        lambda: comps(raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[0, 1], [0, 1]], af.int64), values=[1.0, 2.0],
            dense_shape=af.constant([3, 3], af.int64))),
        [[0, 2, 2, 2], [1, 1], [1, 2]],
    ),
    "from_sparse_tensor_unsorted_batches": (
        lambda: [comps(raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[1, 0, 1], [0, 2, 2]], af.int64), values=[1.0, 2.0],
            dense_shape=af.constant([2, 3, 3], af.int64)), i) for i in (0, 1)],
        [[[0, 0, 0, 1], [], []], [[0, 1, 1, 1], [1, 2], [1, 2]]],
    ),
    "amd_identity": (lambda: raw.SparseMatrixOrderingAMD(input=csr(D3)), [[0, 1, 2], [0, 1, 2]]),
    "cholesky": (
        lambda: comps(raw.SparseMatrixSparseCholesky(
            input=csr(np.array([[4.0, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)),
            permutation=af.constant([0, 1, 2]), type=af.float32)),
        [[0, 1, 3, 5], [0, 0, 1, 1, 2], [2.0, 0.5, 1.658312439918518, 0.6030226945877075,
                                         1.279204249382019]],
    ),
    "cholesky_reads_the_lower_triangle": (
        lambda: comps(raw.SparseMatrixSparseCholesky(
            input=csr(np.array([[4.0, 9, 0], [1, 3, 7], [0, 1, 2]], np.float32)),
            permutation=af.constant([0, 1, 2]), type=af.float32)),
        [[0, 1, 3, 5], [0, 0, 1, 1, 2], [2.0, 0.5, 1.658312439918518, 0.6030226945877075,
                                         1.279204249382019]],
    ),
    "cholesky_permuted": (
        lambda: comps(raw.SparseMatrixSparseCholesky(
            input=csr(np.array([[4.0, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)),
            permutation=af.constant([2, 0, 1]), type=af.float32)),
        [[0, 1, 2, 5], [0, 1, 0, 1, 2], [1.4142135381698608, 2.0, 0.7071067690849304, 0.5,
                                         1.5]],
    ),
    "complex_transpose_conjugate": (
        lambda: comps(raw.SparseMatrixTranspose(
            input=csr((D2 * (1 + 1j)).astype(np.complex64)), type=af.complex64,
            conjugate=True), 0, af.complex64),
        [[0, 2, 3, 5], [0, 2, 2, 0, 1], [1 - 1j, 4 - 4j, 5 - 5j, 2 - 2j, 3 - 3j]],
    ),
    "complex_matmul_conjugate_output": (
        lambda: raw.SparseMatrixMatMul(
            a=csr((D2 * (1 + 1j)).astype(np.complex64)),
            b=(np.arange(6).reshape(3, 2) * (1 - 2j)).astype(np.complex64), adjoint_a=True,
            conjugate_output=True),
        [[-16 + 48j, -21 + 63j], [-20 + 60j, -25 + 75j], [-6 + 18j, -11 + 33j]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_as_tf(name):
    build, want = CASES[name]
    with af.Graph().as_default():
        got = _run(build())
    got, want = _lists(got), _lists(want)
    np.testing.assert_equal(
        np.asarray(got, dtype=object).shape, np.asarray(want, dtype=object).shape
    )
    assert _close(got, want), (got, want)


def _close(got, want) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_close, got, want))
    return bool(np.isclose(got, want, rtol=1e-6, atol=0))


def test_static_shapes_as_tf():
    # TF infers these from the variant's handle data; recorded from TF 2.21.
    with af.Graph().as_default():
        a, b = csr(D2), csr(D3)
        assert (a.dtype, a.shape.as_list()) == (af.variant, [])
        assert [t.shape.as_list() for t in comps(a)] == [[4], [None], [None]]
        assert dense(b).shape.as_list() == [2, 3, 3]
        st = raw.CSRSparseMatrixToSparseTensor(sparse_matrix=b, type=af.float32)
        assert [t.shape.as_list() for t in st] == [[None, 3], [None], [3]]
        assert raw.SparseMatrixNNZ(sparse_matrix=a).shape.as_list() == []
        assert raw.SparseMatrixNNZ(sparse_matrix=b).shape.as_list() == [2]
        assert raw.SparseMatrixOrderingAMD(input=b).shape.as_list() == [2, 3]
        mm = raw.SparseMatrixMatMul(
            a=a, b=np.zeros([2, 3], np.float32), transpose_b=True, transpose_output=True
        )
        assert mm.shape.as_list() == [2, 3]


# -- errors, recorded from TF 2.21 ------------------------------------------------------------

RUN_ERRORS = {
    "index_past_the_batch": (lambda: comps(csr(D3), 5), "index (5) not in [0, 2)"),
    "negative_index": (lambda: comps(csr(D3), -1), "index (-1) not in [0, 2)"),
    "components_of_another_type": (
        lambda: comps(csr(D2), 0, af.float64),
        "dtype of input is not equal to 'type': float vs. double",
    ),
    "dense_of_another_type": (
        lambda: dense(csr(D2), af.float64),
        "Asked for a CSRSparseMatrix of type double but saw dtype: float",
    ),
    "sparse_tensor_index_out_of_bounds": (
        lambda: comps(raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[0, 5]], af.int64), values=[1.0],
            dense_shape=af.constant([3, 3], af.int64))),
        "Sparse index tuple indices[0, :] = [0, 5] is out of bounds",
    ),
    "sparse_tensor_negative_index": (
        lambda: comps(raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[0, -1]], af.int64), values=[1.0],
            dense_shape=af.constant([3, 3], af.int64))),
        "Sparse index tuple indices[0, :] = [0, -1] is out of bounds",
    ),
    "dense_index_out_of_bounds": (
        lambda: raw.SparseMatrixNNZ(sparse_matrix=raw.DenseToCSRSparseMatrix(
            dense_input=D2, indices=af.constant([[0, 7]], af.int64), name="D")),
        "indices[0] = [0, 7] does not index into param shape [3,3], node name: D",
    ),
    "matmul_of_two_types": (
        lambda: raw.SparseMatrixMatMul(a=csr(D2), b=np.ones([3, 1])),
        "Input types don't match.  a.dtype == float vs. b.dtype == double",
    ),
    "sparse_matmul_of_two_types": (
        lambda: comps(raw.SparseMatrixSparseMatMul(
            a=csr(D2), b=csr(D2.astype(np.float64)), type=af.float32)),
        "dtype of b is not equal to 'type': double vs. float",
    ),
    "transpose_of_another_type": (
        lambda: comps(raw.SparseMatrixTranspose(input=csr(D2), type=af.float64), 0, af.float64),
        "dtype of input is not equal to 'type': float vs. double",
    ),
    "cholesky_of_another_type": (
        lambda: comps(raw.SparseMatrixSparseCholesky(
            input=csr(np.eye(2, dtype=np.float32)), permutation=af.constant([0, 1]),
            type=af.float64), 0, af.float64),
        "Asked for a CSRSparseMatrix of type double but saw dtype: float",
    ),
    "sparse_tensor_of_another_type": (
        lambda: raw.CSRSparseMatrixToSparseTensor(sparse_matrix=csr(D2), type=af.float64),
        "Expected a CSRSparseMatrix of type double but saw type: float",
    ),
    "cholesky_of_an_indefinite_matrix": (
        lambda: comps(raw.SparseMatrixSparseCholesky(
            input=csr(np.array([[1.0, 2], [2, 1]], np.float32)),
            permutation=af.constant([0, 1]), type=af.float32)),
        "Sparse Cholesky factorization failed for batch index 0. The input might not be valid.",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RUN_ERRORS))
def test_run_errors_as_tf(name):
    build, message = RUN_ERRORS[name]
    with af.Graph().as_default():
        fetch = build()
        with pytest.raises(errors.InvalidArgumentError) as info:
            _run(fetch)
    assert info.value.message.splitlines()[0] == message


BUILD_ERRORS = {
    "dense_of_rank_1": (
        lambda: raw.DenseToCSRSparseMatrix(
            dense_input=D2[0], indices=af.constant([[0]], af.int64)),
        "Invalid rank of dense: 1.  Expected a known rank of either 2 or 3.",
    ),
    "indices_of_another_rank": (
        lambda: raw.DenseToCSRSparseMatrix(
            dense_input=D2, indices=af.constant([[0, 1, 1]], af.int64)),
        "indices.shape[1] must match rank of dense; saw: 3 vs. 2",
    ),
    "sparse_tensor_of_rank_1": (
        lambda: raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[0]], af.int64), values=[1.0],
            dense_shape=af.constant([3], af.int64)),
        "Invalid rank: 1.  Expected a known rank of either 2 or 3.",
    ),
    "values_and_indices_differ": (
        lambda: raw.SparseTensorToCSRSparseMatrix(
            indices=af.constant([[0, 1]], af.int64), values=[1.0, 2.0],
            dense_shape=af.constant([3, 3], af.int64)),
        "Number of elements in index (1) and values (2) do not match.",
    ),
    "matmul_inner_dimensions": (
        lambda: raw.SparseMatrixMatMul(a=csr(D2), b=np.ones([2, 2], np.float32)),
        "Dimensions must be equal, but are 3 and 2",
    ),
    "matmul_transpose_and_adjoint": (
        lambda: raw.SparseMatrixMatMul(a=csr(D2), b=D2, transpose_a=True, adjoint_a=True),
        "Only one of adjoint_a and transpose_a may be true.",
    ),
    "matmul_batch_sizes": (
        lambda: raw.SparseMatrixMatMul(a=csr(D3), b=np.ones([3, 3, 3], np.float32)),
        "Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3].",
    ),
    "matmul_ranks": (
        lambda: raw.SparseMatrixMatMul(a=csr(D3), b=np.ones([3, 2], np.float32)),
        "Shapes must be equal rank, but are 1 and 0",
    ),
    "sparse_matmul_transpose_and_adjoint": (
        lambda: raw.SparseMatrixSparseMatMul(
            a=csr(D2), b=csr(D2), type=af.float32, transpose_a=True, adjoint_a=True),
        "Only one of adjoint_a and transpose_a may be true.",
    ),
    "sparse_matmul_inner_dimensions": (
        lambda: raw.SparseMatrixSparseMatMul(
            a=csr(D2), b=csr(np.ones([2, 2], np.float32)), type=af.float32),
        "Dimensions must be equal, but are 3 and 2",
    ),
    "add_ranks": (
        lambda: raw.SparseMatrixAdd(a=csr(D2), b=csr(D3), alpha=1.0, beta=1.0),
        "Shapes must be equal rank, but are 2 and 3",
    ),
    "cholesky_permutation_length": (
        lambda: raw.SparseMatrixSparseCholesky(
            input=csr(np.eye(2, dtype=np.float32)), permutation=af.constant([0, 1, 2]),
            type=af.float32),
        "Dimensions must be equal, but are 2 and 3",
    ),
    "cholesky_not_square": (
        lambda: raw.SparseMatrixSparseCholesky(
            input=csr(np.ones([2, 3], np.float32)), permutation=af.constant([0, 1]),
            type=af.float32),
        "Dimensions must be equal, but are 2 and 3",
    ),
    "amd_not_square": (
        lambda: raw.SparseMatrixOrderingAMD(input=csr(np.ones([2, 3], np.float32))),
        "Dimensions must be equal, but are 2 and 3",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BUILD_ERRORS))
def test_build_errors_as_tf(name):
    build, message = BUILD_ERRORS[name]
    with af.Graph().as_default():
        with pytest.raises(ValueError) as info:
            build()
    assert str(info.value).startswith(message + " for ")


# -- AMD orderings and Cholesky factors (fixture) ----------------------------------------------


def _grid(k):
    n = k * k
    a = np.zeros((n, n))
    for i in range(k):
        for j in range(k):
            p = i * k + j
            a[p, p] = 4
            if i + 1 < k:
                a[p, p + k] = a[p + k, p] = -1
            if j + 1 < k:
                a[p, p + 1] = a[p + 1, p] = -1
    return a


def _random_spd(n, density, seed):
    r = np.random.RandomState(seed)
    m = (r.rand(n, n) < density) * r.randn(n, n)
    m = m + m.T
    return m + np.eye(n) * (np.abs(m).sum(1).max() + 1)


def _arrow(n):
    a = np.eye(n) * n
    a[0, :] = 1
    a[:, 0] = 1
    a[0, 0] = n
    return a


def _nonsymmetric(n, seed):
    r = np.random.RandomState(seed)
    return ((r.rand(n, n) < 0.2) * (r.rand(n, n) + 0.1)) + np.eye(n)


def _dense_rows(n, seed):
    r = np.random.RandomState(seed)
    m = (r.rand(n, n) < 0.01) * 1.0
    m = m + m.T
    m[5, :] = 1
    m[:, 5] = 1
    m[7, ::2] = 1
    m[::2, 7] = 1
    return m + np.eye(n) * n


def _amd_cases() -> dict:
    return {
        "arrow6": _arrow(6),
        "rand10": _random_spd(10, 0.3, 0),
        "grid4": _grid(4),
        "grid6": _grid(6),
        "rand30": _random_spd(30, 0.1, 1),
        "rand50": _random_spd(50, 0.06, 2),
        "nonsym8": _nonsymmetric(8, 3),  # (TF orders by the lower triangle)
        "dense300": _dense_rows(300, 4),  # (rows past the dense threshold go last)
        "empty_rows": np.diag([1.0, 0, 2, 0, 3]),  # (rows without a diagonal go last)
    }


def test_amd_orderings_and_cholesky_factors_as_tf():
    want = json.loads((FIXTURES / "amd_cholesky_tf.json").read_text())
    cases = _amd_cases()
    with af.Graph().as_default():
        fetch = {}
        for name, matrix in cases.items():
            m = csr(matrix)
            fetch[name] = amd = raw.SparseMatrixOrderingAMD(input=m)
            if name + "_chol" in want:
                chol = raw.SparseMatrixSparseCholesky(input=m, permutation=amd, type=af.float64)
                fetch[name + "_chol"] = comps(chol, 0, af.float64)
        batch = np.stack([
            cases["grid4"],
            cases["rand10"].repeat(2, 0).repeat(2, 1)[:16, :16] + np.eye(16) * 50,
        ])  # fmt: skip
        fetch["batch"] = raw.SparseMatrixOrderingAMD(input=csr(batch))
        got = _run(fetch)
    for name, value in got.items():
        if name.endswith("_chol"):
            ptr, cols, vals = want[name]
            assert got[name][0].tolist() == ptr and got[name][1].tolist() == cols, name
            assert got[name][2].tolist() == vals, name  # (to the last bit, as TF's Eigen)
        else:
            assert value.tolist() == want[name], name


# -- complex products and their gradients (fixture) --------------------------------------------


def _complex_products(part: str) -> dict:
    """The graph of the recording, `part` "dense" (sparse x dense products, every flag
    combination) or "sparse" (sparse x sparse): the random draws of both are made, in
    the recording's order, either way."""
    r = np.random.RandomState(0)
    a = ((r.rand(3, 4) < 0.6) * (r.randn(3, 4) + 1j * r.randn(3, 4))).astype(np.complex128)
    x = af.constant(a)
    m = csr(x)
    fetch = {}
    for ta, aa, tb, ab, to, co in itertools.product([0, 1], repeat=6):
        if (ta and aa) or (tb and ab):
            continue
        k, rows = (3, 4) if (ta or aa) else (4, 3)
        shape = (2, k) if (tb or ab) else (k, 2)
        bv = r.randn(*shape) + 1j * r.randn(*shape)
        out = (2, rows) if to else (rows, 2)
        w = r.randn(*out) + 1j * r.randn(*out)
        if part != "dense":
            continue
        b = af.constant(bv)
        flags = dict(transpose_a=ta, adjoint_a=aa, transpose_b=tb, adjoint_b=ab,
                     transpose_output=to, conjugate_output=co)  # fmt: skip
        c = raw.SparseMatrixMatMul(a=m, b=b, **{k: bool(v) for k, v in flags.items()})
        loss = af.reduce_sum(af.math.real(c * af.constant(w)))
        fetch[f"{ta}{aa}{tb}{ab}{to}{co}"] = (c, *af.gradients(loss, [x, b]))
    bs = (r.rand(4, 3) < 0.6) * (r.randn(4, 3) + 1j * r.randn(4, 3))
    y = af.constant(bs)
    mb, mbt = csr(y), csr(af.transpose(y))
    for ta, aa, tb, ab in [(0, 0, 0, 0), (1, 0, 1, 0), (0, 1, 0, 1), (1, 0, 0, 1)]:
        other = mb if bool(ta or aa) == bool(tb or ab) else mbt
        flags = dict(transpose_a=ta, adjoint_a=aa, transpose_b=tb, adjoint_b=ab)
        c = raw.SparseMatrixSparseMatMul(
            a=m, b=other, type=af.complex128, **{k: bool(v) for k, v in flags.items()}
        )
        d = dense(c, af.complex128)
        w = r.randn(*d.shape.as_list()) + 1j * r.randn(*d.shape.as_list())
        loss = af.reduce_sum(af.math.real(d * af.constant(w)))
        if part == "sparse":
            fetch[f"ss{ta}{aa}{tb}{ab}"] = (d, *af.gradients(loss, [x, y]))
    return fetch


@pytest.mark.parametrize("part", ["dense", "sparse"])
def test_complex_products_and_gradients_as_tf(part):
    want = json.loads((FIXTURES / "complex_products_tf.json").read_text())
    with af.Graph().as_default():
        got = _run(_complex_products(part))
    assert sorted(got) == sorted(k for k in want if k.startswith("ss") == (part == "sparse"))
    for name, values in got.items():
        for value, (re, im) in zip(values, want[name]):
            np.testing.assert_allclose(value, np.array(re) + 1j * np.array(im), atol=1e-7,
                                       err_msg=name)  # fmt: skip


# -- real gradients, recorded from TF 2.21 -----------------------------------------------------

_W9 = np.arange(9, dtype=np.float32).reshape(3, 3)


def _grad_to_dense():
    x = af.constant(D2)
    return af.gradients(af.reduce_sum(dense(csr(x)) * _W9), [x])


def _grad_from_sparse_tensor():
    v = af.constant([1.0, 2.0, 3.0])
    st = _st()
    m = raw.SparseTensorToCSRSparseMatrix(
        indices=st["indices"], values=v, dense_shape=st["dense_shape"]
    )
    return af.gradients(af.reduce_sum(dense(m) * _W9), [v])


def _grad_to_sparse_tensor():
    x = af.constant(D2)
    st = raw.CSRSparseMatrixToSparseTensor(sparse_matrix=csr(x), type=af.float32)
    return af.gradients(af.reduce_sum(st.values * np.arange(5, dtype=np.float32)), [x])


def _grad_matmul(**flags):
    def build():
        x = af.constant(D2)
        shape = (2, 3) if flags.get("transpose_b") else (3, 2)
        b = af.constant(np.arange(6, dtype=np.float32).reshape(shape))
        c = raw.SparseMatrixMatMul(a=csr(x), b=b, **flags)
        w = np.arange(6, dtype=np.float32).reshape(c.shape.as_list())
        return af.gradients(af.reduce_sum(c * w), [x, b])

    return build


def _grad_transpose():
    x = af.constant(D2)
    t = raw.SparseMatrixTranspose(input=csr(x), type=af.float32)
    return af.gradients(af.reduce_sum(dense(t) * _W9), [x])


def _grad_sparse_matmul():
    x, y = af.constant(D2), af.constant(D2.T.copy())
    c = raw.SparseMatrixSparseMatMul(a=csr(x), b=csr(y), type=af.float32)
    return af.gradients(af.reduce_sum(dense(c) * _W9), [x, y])


GRADIENTS = {
    "to_dense": (_grad_to_dense, [[[0, 0, 2], [0, 0, 5], [6, 7, 0]]]),
    # (values in CSR order, as TF: the SparseTensor here is not in row-major order)
    "from_sparse_tensor": (_grad_from_sparse_tensor, [[1, 3, 7]]),
    "to_sparse_tensor": (_grad_to_sparse_tensor, [[[0, 0, 1], [0, 0, 2], [3, 4, 0]]]),
    "matmul": (_grad_matmul(), [[[1, 0, 5], [0, 0, 23], [5, 23, 0]],
                                [[16, 21], [20, 25], [6, 11]]]),
    "matmul_transposes": (
        _grad_matmul(transpose_a=True, transpose_b=True, transpose_output=True),
        [[[9, 0, 15], [0, 0, 22], [15, 22, 0]], [[4, 6, 5], [13, 15, 32]]],
    ),
    "transpose": (_grad_transpose, [[[0, 0, 6], [0, 0, 7], [2, 5, 0]]]),
    "sparse_matmul": (_grad_sparse_matmul, [[[8, 0, 3], [0, 0, 18], [38, 40, 0]],
                                            [[24, 0, 34], [0, 0, 40], [9, 14, 0]]]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_as_tf(name):
    build, want = GRADIENTS[name]
    with af.Graph().as_default():
        got = _run(build())
    assert _lists(got) == want


def test_mul_has_no_gradient_as_tf():
    with af.Graph().as_default():
        x = af.constant(np.eye(2, dtype=np.float32))
        y = dense(raw.SparseMatrixMul(a=csr(x), b=af.constant(3.0)))
        with pytest.raises(NotImplementedError):
            af.gradients(y, [x])
        nnz = af.cast(raw.SparseMatrixNNZ(sparse_matrix=csr(x)), af.float32)
        assert af.gradients(nnz, [x]) == [None]


# -- ops TF 2.21 runs on GPUs only: NumPy references --------------------------------------------


def _masked_softmax(d):
    mask = d != 0
    e = np.where(mask, np.exp(np.where(mask, d, -np.inf) - d.max(-1, keepdims=True)), 0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def test_gpu_only_ops_compute_tfs_semantics():
    with af.Graph().as_default():
        a, at = csr(D2), raw.SparseMatrixTranspose(input=csr(D2), type=af.float32)
        add = raw.SparseMatrixAdd(a=a, b=at, alpha=2.0, beta=-1.0)
        cancel = raw.SparseMatrixAdd(a=a, b=a, alpha=1.0, beta=-1.0)
        mul = raw.SparseMatrixMul(a=csr(D3), b=af.constant([[[2.0]], [[3.0]]]))
        zeros = raw.SparseMatrixZeros(dense_shape=af.constant([2, 3, 4], af.int64),
                                      type=af.float32)  # fmt: skip
        soft = raw.SparseMatrixSoftmax(logits=csr(D3), type=af.float32)
        got = _run({
            "add": comps(add), "cancel": comps(cancel), "mul": dense(mul),
            "zeros": comps(zeros, 1), "zeros_dense": dense(zeros), "softmax": dense(soft),
            "nnz_softmax": raw.SparseMatrixNNZ(sparse_matrix=soft),
        })  # fmt: skip
    # the union of both structures, in column order; cancelled sums stay stored
    assert _lists(got["add"]) == [[0, 2, 3, 5], [0, 2, 2, 0, 1], [1, 0, 1, 6, 7]]
    assert _lists(got["cancel"]) == [[0, 2, 3, 5], [0, 2, 2, 0, 1], [0, 0, 0, 0, 0]]
    np.testing.assert_array_equal(got["mul"], D3 * np.array([2.0, 3.0])[:, None, None])
    assert _lists(got["zeros"]) == [[0, 0, 0, 0], [], []]
    np.testing.assert_array_equal(got["zeros_dense"], np.zeros([2, 3, 4]))
    np.testing.assert_allclose(got["softmax"], _masked_softmax(D3), rtol=1e-6)
    assert got["nnz_softmax"].tolist() == [5, 3]


def test_softmax_gradient_against_finite_differences():
    logits = np.array([[0.5, 0, -1.0], [0, 0, 2.0], [1.5, 0.25, 0]])
    w = np.arange(9.0).reshape(3, 3)
    with af.Graph().as_default():
        x = af.constant(logits)
        soft = dense(raw.SparseMatrixSoftmax(logits=csr(x), type=af.float64), af.float64)
        (grad,) = af.gradients(af.reduce_sum(soft * w), [x])
        got = _run(grad)
    eps, want = 1e-6, np.zeros_like(logits)
    for i, j in zip(*np.nonzero(logits)):
        up, down = logits.copy(), logits.copy()
        up[i, j] += eps
        down[i, j] -= eps
        want[i, j] = ((_masked_softmax(up) - _masked_softmax(down)) * w).sum() / (2 * eps)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_add_gradient_masks_to_each_structure():
    with af.Graph().as_default():
        x, y = af.constant(D2), af.constant(D2.T.copy())
        c = raw.SparseMatrixAdd(a=csr(x), b=csr(y), alpha=2.0, beta=3.0)
        got = _run(af.gradients(af.reduce_sum(dense(c) * _W9), [x, y]))
    mask = (D2 != 0).astype(np.float32)
    np.testing.assert_array_equal(got[0], 2 * _W9 * mask)
    np.testing.assert_array_equal(got[1], 3 * _W9 * mask.T)


def test_bad_inputs_tf_leaves_unchecked_are_errors():
    # TF 2.21 factors with a repeated permutation index (reading garbage) and has no
    # kernel for an integer product; asyncflow says what is wrong instead.
    with af.Graph().as_default():
        chol = raw.SparseMatrixSparseCholesky(
            input=csr(np.eye(2, dtype=np.float32)), permutation=af.constant([0, 0]),
            type=af.float32,
        )  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError, match="is not a permutation of"):
            _run(comps(chol))
        product = raw.SparseMatrixMatMul(a=csr(D2), b=np.ones([3, 1], np.int32))
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
            _run(product)
        scaled = raw.SparseMatrixMul(a=csr(D3), b=af.constant([2.0, 3.0]))
        with pytest.raises(errors.InvalidArgumentError, match="b must be a scalar"):
            _run(dense(scaled))


def _more_choleskys():
    """Hermitian complex matrices and a float32 batch, each factored in its AMD order."""
    r = np.random.RandomState(5)
    n = 12
    h = (r.rand(n, n) < 0.3) * (r.randn(n, n) + 1j * r.randn(n, n))
    h = h + h.conj().T + np.eye(n) * 8
    batch = np.stack([
        (lambda m: m + m.T + np.eye(n) * 6)((r.rand(n, n) < 0.25) * r.randn(n, n))
        for _ in range(2)
    ]).astype(np.float32)  # fmt: skip
    fetch = {}
    cases = [("c128", h, af.complex128, 0), ("c64", h.astype(np.complex64), af.complex64, 0),
             ("f32_batch", batch, af.float32, 1)]  # fmt: skip
    for name, matrix, dtype, index in cases:
        m = csr(matrix)
        amd = raw.SparseMatrixOrderingAMD(input=m)
        chol = raw.SparseMatrixSparseCholesky(input=m, permutation=amd, type=dtype)
        fetch[name] = (amd, comps(chol, index, dtype))
    return fetch


def test_complex_and_batched_cholesky_factors_as_tf():
    want = json.loads((FIXTURES / "cholesky_more_tf.json").read_text())
    with af.Graph().as_default():
        got = _run(_more_choleskys())
    for name, (amd, (ptr, cols, values)) in got.items():
        order, w_ptr, w_cols, re, im = want[name]
        assert (amd.tolist(), ptr.tolist(), cols.tolist()) == (order, w_ptr, w_cols), name
        expected = np.array(re) + 1j * np.array(im)
        if name == "f32_batch":  # real: TF's bits
            assert values.tolist() == re
        else:  # complex: an ulp or two (C++ and NumPy complex arithmetic round apart)
            eps = np.finfo(values.dtype).eps
            np.testing.assert_allclose(values, expected, rtol=0, atol=8 * eps, err_msg=name)
            zero = np.array(im) == 0  # (the diagonal's: TF's are -0.0)
            assert (
                np.signbit(values.imag[zero]).tolist() == np.signbit(np.array(im)[zero]).tolist()
            )
