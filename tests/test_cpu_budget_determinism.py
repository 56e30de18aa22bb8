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


@pytest.mark.timeout(60)
def test_the_environment_variable_turns_it_on():
    code = "from asyncflow.devices import cpu_budget; print(cpu_budget.deterministic())"
    for value, expected in (("1", "True"), ("true", "True"), ("0", "False"), ("", "False")):
        env = dict(os.environ, TF_DETERMINISTIC_OPS=value)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected, value
