"""TF_DETERMINISTIC_OPS=1: every product our budget runs gives one BLAS thread's bits.

OpenBLAS on several threads does not always give one thread's bits, and the CPU budget
chooses one or several threads per kind of call by measured time; with the flag it
always takes one (large products still split into blocks, which give one thread's bits
exactly).  Reference: the same product on one BLAS thread, computed before the calls.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import blas


@pytest.fixture
def deterministic():
    before = cpu_budget.deterministic()
    cpu_budget.set_deterministic(True)
    yield
    cpu_budget.set_deterministic(before)
    cpu_budget.restore_blas()


@pytest.mark.skipif(cpu_budget._set_blas_local is None, reason="no OpenBLAS thread control")
@pytest.mark.timeout(60)
def test_every_call_gives_one_threads_bits(deterministic, monkeypatch):
    # A free machine (no competing process), so the measured choice would try several
    # threads: its first tries run both ways, and it explores again every few calls.
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    monkeypatch.setattr(cpu_budget, "_budget", max(2, cpu_budget._budget))
    monkeypatch.setattr(cpu_budget, "_CORES", max(2, cpu_budget._CORES))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 784)).astype(np.float32)
    b = rng.standard_normal((784, 512)).astype(np.float32)
    cpu_budget._blas_threads(1)
    reference = np.matmul(a, b)  # one BLAS thread
    for _ in range(40):
        out = cpu_budget.call(np.matmul, (a, b))
        assert cpu_budget._blas_now == 1
        np.testing.assert_array_equal(out, reference)
    if blas.available(np.float32):  # the split path: blocks on one thread each
        c = np.empty_like(reference)
        blas._gemm(c, a, b, False, False, 1.0, 0.0)
        np.testing.assert_array_equal(c, reference)


# A step's end gives the program's BLAS thread count back (`restore_blas`), and so does
# a step's driver each time it leaves its quiet step: when it suspends on a kernel
# computing on a device worker (session._SyncCall._start: the session's loop on its own
# thread).  The count is process-wide: the kernel's product, after its `call` chose one
# thread, ran on the program's two, with other bits (the LSTM gradient of
# tests/ops/test_fused_elementwise_jit.py, in one whole-suite run in two).  In a process
# of its own: no other test's thread computes beside it (a call of ours computing keeps
# the count ours, so the program's count set below would not be read back).
_BESIDE_A_CALL = """
import threading
from concurrent.futures import ThreadPoolExecutor
import threadpoolctl
from asyncflow.devices import cpu_budget

def count():  # NumPy's OpenBLAS's, read by threadpoolctl
    for info in threadpoolctl.threadpool_info():
        if info.get("internal_api") == "openblas" and "numpy.libs" in info["filepath"]:
            return info["num_threads"]

cpu_budget.set_deterministic(True)
inside, go_on = threading.Event(), threading.Event()

def kernel():  # a product's call: what its BLAS would run on
    inside.set()
    assert go_on.wait(30)
    return count()

with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):  # the program's
    with ThreadPoolExecutor(1) as worker:  # a device's worker
        computing = worker.submit(cpu_budget.call, kernel, ())
        assert inside.wait(30)
        cpu_budget.restore_blas()  # the driver, on its thread, meanwhile
        go_on.set()
        beside = computing.result()
    cpu_budget.restore_blas()  # no call of ours computing: the step's end
    print(beside, count())
"""


@pytest.mark.skipif(cpu_budget._set_blas_local is None, reason="no OpenBLAS thread control")
@pytest.mark.timeout(60)
def test_a_step_ending_beside_a_call_leaves_its_blas_thread_count():
    pytest.importorskip("threadpoolctl")
    out = subprocess.run(
        [sys.executable, "-c", _BESIDE_A_CALL], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["1", "2"], out.stdout  # (beside the call, after it)


@pytest.mark.timeout(60)
def test_the_environment_variable_turns_it_on():
    code = "from asyncflow.devices import cpu_budget; print(cpu_budget.deterministic())"
    for value, expected in (("1", "True"), ("true", "True"), ("0", "False"), ("", "False")):
        env = dict(os.environ, TF_DETERMINISTIC_OPS=value)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected, value
