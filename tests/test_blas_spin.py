"""devices/cpu_budget.py gives OpenBLAS's idle threads a short spin (2^14 cycles instead
of 2^28) unless the program chose its own: what OpenBLAS itself reports, and products
still right on its restarted threads."""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from asyncflow.devices import cpu_budget


def _openblas():
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "libscipy_openblas*.so"))):
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_thread_timeout") and hasattr(lib, "blas_thread_shutdown_"):
            return lib
    return None


needs_openblas = pytest.mark.skipif(
    _openblas() is None or cpu_budget._set_blas_local is None,
    reason="NumPy's bundled OpenBLAS not found, or the CPU budget is off",
)

_PROBE = (
    "import ctypes, glob, os, numpy as np\n"
    "import asyncflow\n"
    "d = os.path.join(os.path.dirname(np.__file__), os.pardir, 'numpy.libs')\n"
    "lib = ctypes.CDLL(sorted(glob.glob(os.path.join(d, 'libscipy_openblas*.so')))[0])\n"
    "print(lib.openblas_thread_timeout(), os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
)


def _probe(**env) -> str:
    full = {k: v for k, v in os.environ.items() if "THREAD_TIMEOUT" not in k}
    full.pop("ASYNCFLOW_BLAS_SPIN_LOG2", None)
    full.update(env)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=full, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@needs_openblas
def test_openblas_spins_briefly_and_the_environment_is_left_alone():
    assert _probe() == [str(cpu_budget._SPIN_LOG2), "None"]


@needs_openblas
def test_a_spin_the_program_chose_stays():
    assert _probe(OPENBLAS_THREAD_TIMEOUT="20") == ["20", "20"]
    assert _probe(ASYNCFLOW_BLAS_SPIN_LOG2="0")[0] == "0"  # OpenBLAS's own default


@needs_openblas
def test_products_on_the_restarted_threads_are_right():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((600, 500))
    b = rng.standard_normal((500, 400))
    want = a.astype(np.longdouble) @ b.astype(np.longdouble)
    try:
        cpu_budget._blas_threads(2)  # (on one core OpenBLAS keeps one thread: still right)
        for _ in range(3):
            np.testing.assert_allclose(a @ b, want.astype(np.float64), rtol=1e-12, atol=1e-10)
    finally:
        cpu_budget.restore_blas()
