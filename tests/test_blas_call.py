"""ops/blas.py's gemm call compiled by numba: the same cblas function as its ctypes call,
so the same bits, for every operand layout a kernel hands it; layouts its signatures
leave out go through ctypes."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow.ops import blas

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(
    not blas.available(np.float32), reason="NumPy's OpenBLAS not found by ops/blas.py"
)


def _ctypes_gemm(c, a, b, ta, tb, alpha, beta):
    """The uncompiled call (ASYNCFLOW_GEMM_JIT=0's)."""
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    blas._fns[c.dtype](
        blas._ROW_MAJOR, blas._TRANS if ta else blas._NO_TRANS,
        blas._TRANS if tb else blas._NO_TRANS, m, n, k, alpha, a.ctypes.data, a.shape[1],
        b.ctypes.data, b.shape[1], beta, c.ctypes.data, n,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_call_gives_the_ctypes_calls_bits(dtype, monkeypatch):
    assert blas.warm(timeout=120)
    calls = []
    real = blas._JIT.get(blas._NAMES[np.dtype(dtype)])
    monkeypatch.setitem(
        blas._JIT._loops, blas._NAMES[np.dtype(dtype)], lambda *a: calls.append(1) or real(*a)
    )
    rng = np.random.default_rng(3)
    m, n, k = 33, 70, 19
    for ta in (False, True):
        for tb in (False, True):
            for frozen in (False, True):
                a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
                b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
                a.flags.writeable = b.flags.writeable = not frozen  # (variables' reads)
                c0 = rng.standard_normal((m, n)).astype(dtype)
                for alpha, beta in ((1.0, 0.0), (-0.5, 1.0), (2.0, 0.25)):
                    got, want = c0.copy(), c0.copy()
                    blas.gemm_into(got, a, b, ta, tb, alpha, beta)
                    _ctypes_gemm(want, a, b, ta, tb, alpha, beta)
                    np.testing.assert_array_equal(got, want)
                    ref = alpha * ((a.T if ta else a) @ (b.T if tb else b)) + beta * c0
                    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert len(calls) == 2 * 2 * 2 * 3  # (every one compiled)


def test_layouts_without_a_signature_go_through_ctypes():
    assert blas.warm(timeout=120)
    rng = np.random.default_rng(4)
    # an operand NumPy leaves unaligned (a view one byte into a buffer)
    raw = np.zeros(8 * 5 * 4 + 1, np.uint8)
    a = np.ndarray((8, 5), np.float32, buffer=raw[1:], strides=(20, 4))
    a[...] = rng.standard_normal((8, 5))
    assert not a.flags.aligned and a.flags.c_contiguous
    b = rng.standard_normal((5, 6)).astype(np.float32)
    c = np.empty((8, 6), np.float32)
    blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
    np.testing.assert_allclose(c, np.array(a) @ b, rtol=1e-5)
