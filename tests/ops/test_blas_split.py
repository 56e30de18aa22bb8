"""Large products split into blocks of C's rows or columns over the CPU budget's
threads (ops/blas.py) equal NumPy's matmul (issue 21).  Each element is summed over
K as one call would, so the blocks agree with the unsplit product to rounding."""

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import blas

pytestmark = pytest.mark.skipif(not blas.available(np.float32), reason="no BLAS found")


@pytest.fixture(params=["openblas", "one-thread gemm"])
def two_threads(monkeypatch, request):
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    # (products split only while another process holds a core, and a core it leaves
    # free is there for the helper: cpu_budget.split_allowed)
    monkeypatch.setattr(cpu_budget, "_CORES", 3)
    monkeypatch.setattr(cpu_budget, "threads_shared", lambda active=None: 2)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)
    if not cpu_budget.manages_blas():
        pytest.skip("the CPU budget does not set BLAS's threads: products are never split")
    monkeypatch.setattr(blas, "_SPLIT_MACS", 1 << 12)  # small products split too
    monkeypatch.setattr(blas, "_MIN_BLOCK_MACS", 1 << 10)
    monkeypatch.setattr(blas, "_MIN_SIDE", 1)
    if request.param == "openblas":  # blocks on OpenBLAS's one thread
        monkeypatch.setattr(blas, "_BLOCKS_ON_ONE", False)
    # (else on MKL's or oneDNN's one-thread gemm where loaded)
    cpu_budget.blas_single()
    yield
    cpu_budget.restore_blas()


# (m, k, n): by rows (m >= n), by columns (m < n), and odd sizes.
_SHAPES = [(300, 64, 96), (20, 48, 300), (67, 33, 259)]


@pytest.mark.parametrize("m, k, n", _SHAPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_product_matches_numpy(two_threads, m, k, n, trans_a, trans_b, dtype):
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    assert blas._blocks(m, n, k) is not None and cpu_budget.split_allowed()  # split
    got = blas.matmul(a, b, trans_a, trans_b)
    want = (a.T if trans_a else a) @ (b.T if trans_b else b)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.sqrt(k))


def test_split_accumulation_into_c(two_threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 40)).astype(np.float32)
    b = rng.standard_normal((40, 96)).astype(np.float32)
    c = rng.standard_normal((128, 96)).astype(np.float32)
    want = -0.5 * (a @ b) + c
    blas.gemm_into(c, a, b, False, False, -0.5, 1.0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_empty_inner_dimension_gives_zeros():
    got = blas.matmul(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), False, False)
    np.testing.assert_array_equal(got, np.zeros((3, 4), np.float32))


@pytest.mark.parametrize("m", [8, 64, 96, 97, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_products_with_b_transposed(monkeypatch, m, dtype):
    # M <= 96 < N: computed as (B @ A^T)^T, the same values as A @ B^T.
    calls = []
    real = blas._gemm

    def spy(c, a, b, trans_a, trans_b, *args, **kw):
        calls.append((c.shape, trans_a, trans_b))
        return real(c, a, b, trans_a, trans_b, *args, **kw)

    monkeypatch.setattr(blas, "_gemm", spy)
    rng = np.random.default_rng(m)
    k, n = 300, 700
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)
    got = blas.matmul(a, b, False, True)
    want = a @ b.T
    assert got.shape == (m, n) and got.dtype == dtype and got.flags.c_contiguous
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.sqrt(k))
    swapped = m <= blas._SWAP_MAX_M
    assert calls == ([((n, m), False, True)] if swapped else [((m, n), False, True)])


def test_split_only_beside_another_process(monkeypatch):
    # The split is for a machine another process shares; on a free one OpenBLAS's own
    # threads are faster, and without our control of BLAS's thread count each block
    # would run on all of BLAS's threads.
    monkeypatch.setattr(cpu_budget, "_set_blas_local", lambda n: 1)
    monkeypatch.setattr(cpu_budget, "_blas_now", 1)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    assert not cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)
    monkeypatch.setattr(cpu_budget, "_CORES", 3)  # a core free for the helper
    assert cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_CORES", 2)  # the helper's only core is the busy one
    assert not cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_SPLIT_ON_BUSY_CORES", True)  # (A/B: split there too)
    assert cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_SPLIT_ON_BUSY_CORES", False)
    monkeypatch.setattr(cpu_budget, "_CORES", 3)
    monkeypatch.setattr(cpu_budget, "_side", 1)  # a side lane holds the free core
    assert not cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_side", 0)
    monkeypatch.setattr(cpu_budget, "_blas_now", 2)  # `call` chose BLAS's threads
    assert not cpu_budget.split_allowed()
    monkeypatch.setattr(cpu_budget, "_blas_now", 0)
    monkeypatch.setattr(cpu_budget, "_set_blas_local", None)  # ASYNCFLOW_CPU_BUDGET=0
    assert not cpu_budget.split_allowed()


def _recording_one_thread_gemm(monkeypatch, calls):
    """A one-thread gemm (as MKL's or oneDNN's) that records each call's (m, n, k) and
    computes with OpenBLAS's."""
    real = blas._fns[np.dtype(np.float32)]

    def one(*args):
        calls.append(tuple(args[3:6]))
        real(*args)

    monkeypatch.setattr(blas, "_one_fns", {np.dtype(np.float32): one})
    monkeypatch.setattr(blas, "_ONE_ADDRESSES", {})  # (the ctypes call, not the compiled)


@pytest.mark.parametrize("m, k, n", [(300, 64, 96), (20, 48, 300), (1, 64, 300)])
def test_no_split_where_the_helper_would_take_the_busy_core(two_threads, monkeypatch, m, k, n):
    # Two cores beside one busy process: one call on the caller's core (issue 21).
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    calls = []
    _recording_one_thread_gemm(monkeypatch, calls)
    rng = np.random.default_rng(m * n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
    assert calls == [(m, n, k)]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * np.sqrt(k))


@pytest.mark.parametrize("cores, busy_cores_too", [(3, False), (2, True)])
def test_split_blocks_run_on_the_one_thread_gemm(two_threads, monkeypatch, cores, busy_cores_too):
    monkeypatch.setattr(cpu_budget, "_CORES", cores)
    monkeypatch.setattr(cpu_budget, "_SPLIT_ON_BUSY_CORES", busy_cores_too)
    monkeypatch.setattr(cpu_budget, "_PARTS_ON_BUSY_CORES", busy_cores_too)
    monkeypatch.setattr(blas, "_BLOCKS_ON_ONE", True)
    calls = []
    _recording_one_thread_gemm(monkeypatch, calls)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 67)).astype(np.float32)
    b = rng.standard_normal((40, 259)).astype(np.float32)
    c = rng.standard_normal((67, 259)).astype(np.float32)
    want = 2.0 * (a.T @ b) + 0.5 * c
    blas.gemm_into(c, a, b, True, False, 2.0, 0.5)  # C [67,259]: column blocks (m < n)
    assert len(calls) >= 2 and sum(call[1] for call in calls) == 259
    assert all(call[0] == 67 and call[2] == 40 for call in calls)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
