"""MKL's gemm for the calls the CPU budget gives one thread (ops/blas.py, "MKL for one
thread"): which calls take it, and its values.

The routing is checked with OpenBLAS's own gemm standing in for MKL's (counted), so it
runs wherever NumPy's OpenBLAS does; the values of MKL's real calls, in a child process
with ASYNCFLOW_BLAS unset, where the `mkl` extra is installed.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import blas

pytestmark = pytest.mark.skipif(
    not blas.available(np.float32), reason="NumPy's OpenBLAS not found by ops/blas.py"
)


@pytest.fixture
def stand_in(monkeypatch):
    """OpenBLAS's ctypes gemm as the one-thread library, every call through ctypes."""
    calls = []
    real = dict(blas._fns)

    def one(dtype):
        def call(*args):
            calls.append(dtype)
            return real[dtype](*args)

        return call

    monkeypatch.setattr(blas, "_one_fns", {d: one(d) for d in real})
    monkeypatch.setattr(blas, "_ONE_ADDRESSES", {})
    monkeypatch.setattr(blas, "_COMPILED_CALL", False)
    monkeypatch.setattr(cpu_budget, "split_allowed", lambda: False)
    monkeypatch.setattr(blas, "_pool", lambda *a, **k: None)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_thread_calls_take_it_others_do_not(stand_in, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 130)).astype(dtype)
    b = rng.standard_normal((130, 140)).astype(dtype)
    want = a.astype(np.float64) @ b
    try:
        cpu_budget.call(blas.gemm_into, (np.empty((96, 140), dtype), a, b, False, False, 1.0, 0.0))
        cpu_budget.blas_single()  # granted one thread
        c = np.empty((96, 140), dtype)
        blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
        assert stand_in[-1:] == [np.dtype(dtype)]
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)
        count = len(stand_in)
        cpu_budget._blas_threads(2)  # granted two: OpenBLAS's threads
        blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
        assert len(stand_in) == count
        cpu_budget.blas_single()
        cpu_budget.set_deterministic(True)  # TF_DETERMINISTIC_OPS=1: OpenBLAS's bits
        try:
            blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
        finally:
            cpu_budget.set_deterministic(False)
        assert len(stand_in) == count
    finally:
        cpu_budget.restore_blas()


def test_pool_calls_take_its_address(monkeypatch):
    pytest.importorskip("numba")
    assert blas.warm(timeout=120)  # (the compiled calls' addresses)
    monkeypatch.setattr(blas, "_ONE_ADDRESSES", {np.dtype(np.float32): 1234})
    assert blas._single_address(np.dtype(np.float32)) == 1234
    cpu_budget.set_deterministic(True)
    try:
        f32 = np.dtype(np.float32)
        assert blas._single_address(f32) == blas._ADDRESSES.get(f32)
    finally:
        cpu_budget.set_deterministic(False)


_CHILD = """
import numpy as np
from asyncflow.devices import cpu_budget
from asyncflow.ops import blas
assert blas.library() == "openblas+mkl", blas.library()
blas.warm()
rng = np.random.default_rng(1)
for dtype in (np.float32, np.float64):
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        a = rng.standard_normal((70, 90) if ta else (90, 70)).astype(dtype)
        b = rng.standard_normal((60, 70) if tb else (70, 60)).astype(dtype)
        want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b)
        c = rng.standard_normal((90, 60)).astype(dtype)
        c0 = c.copy()
        cpu_budget.blas_single()
        blas.gemm_into(c, a, b, ta, tb, 0.5, 2.0)
        np.testing.assert_allclose(c, 0.5 * want + 2.0 * c0, rtol=1e-4, atol=1e-3)
print("ok")
"""


def test_mkl_values():
    if not glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")):
        pytest.skip("the mkl extra is not installed")
    env = {k: v for k, v in os.environ.items() if k != "ASYNCFLOW_BLAS"}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


_ONEDNN_CHILD = """
import numpy as np
from asyncflow.devices import cpu_budget
from asyncflow.ops import blas, jit_threads
assert blas.warm(timeout=120)
assert blas.library() == "openblas+onednn", blas.library()
f32 = np.dtype(np.float32)
assert blas._single_address(f32) == blas._ONE_ADDRESSES[f32] != blas._ADDRESSES[f32]
rng = np.random.default_rng(1)
for dtype in (np.float32, np.float64):  # (float64: OpenBLAS's, oneDNN has no dgemm)
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        a = rng.standard_normal((70, 90) if ta else (90, 70)).astype(dtype)
        b = rng.standard_normal((60, 70) if tb else (70, 60)).astype(dtype)
        want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b)
        c = rng.standard_normal((90, 60)).astype(dtype)
        c0 = c.copy()
        cpu_budget.blas_single()  # granted one thread: the ctypes or compiled call
        blas.gemm_into(c, a, b, ta, tb, 0.5, 2.0)
        np.testing.assert_allclose(c, 0.5 * want + 2.0 * c0, rtol=1e-4, atol=1e-3)
# the pool's blocks, each a one-thread call of it inside a parallel region
a = rng.standard_normal((256, 784)).astype(np.float32)
b = rng.standard_normal((784, 512)).astype(np.float32)
want = a.astype(np.float64) @ b
for _ in range(6):  # (the budget's first tries, both ways)
    c = np.empty((256, 512), np.float32)
    cpu_budget.call(blas.gemm_into, (c, a, b, False, False, 1.0, 0.0))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)
cpu_budget.restore_blas()
print("pool" if jit_threads.usable() else "no pool", "ok")
"""


@pytest.mark.timeout(180)
def test_onednn_sgemm_values():
    """oneDNN's sgemm as the one-thread gemm (ASYNCFLOW_BLAS=onednn; the default where
    the mkl extra is not installed), in a child process: its library, its address on
    the pool's path, and the values of every transpose, alpha and beta."""
    import platform

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("oneDNN's wheel is a dependency on Linux x86-64 only")
    pytest.importorskip("numba")
    env = {**os.environ, "ASYNCFLOW_BLAS": "onednn"}
    out = subprocess.run(
        [sys.executable, "-c", _ONEDNN_CHILD], capture_output=True, text=True, env=env,
        timeout=170,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
