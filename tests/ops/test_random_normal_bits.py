"""Normal draws bit for bit as TF 2.21's CPU kernels make them (fixtures/
random_normal_bits.npz, recorded by fixtures/record_random_normal_bits.py from
fixtures/random_normal_bits_cases.py): random_normal and truncated_normal in float16,
bfloat16, float32 and float64, their stateless forms, an initializer and a Generator,
first and second runs.  TF's Box-Muller transform calls the C library's logf / sincosf
and log / sincos; ops/philox_random.py calls the same functions from a compiled loop
(numba, in the test extra).  Without numba the NumPy path gives 1-3 ulps off TF's in
about 1.5% of float32 normals: `test_numpy_path_stays_within_ulps` bounds it."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.ops import philox_random
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import random_normal_bits_cases as cases  # noqa: E402

TF = dict(np.load(FIXTURES / "random_normal_bits.npz"))
HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _draw_twice():
    # (on the CPU: TF's GPU kernels take CUDA's log/sin/cos, as ours take the GPU's;
    # the stand-in GPU set runs this file too)
    with ops.Graph().as_default(), af.device("/cpu:0"):
        out = cases.build(af)
        with Session() as sess:
            sess.run(af.global_variables_initializer())
            first = sess.run(out)
            second = sess.run({k: out[k] for k in cases.TWICE})
    return first, second


@pytest.mark.skipif(not HAVE_NUMBA, reason="the exact loops need numba (the test extra)")
def test_same_bits_as_tf():
    assert philox_random._libm_loop("f32") is not None
    first, second = _draw_twice()
    assert len(first) + len(second) == len(TF)
    for key, value in first.items():
        want = TF[f"{key}/0"]
        got = _bits(value)
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert np.array_equal(got, want), (key, int((got != want).sum()))
    for key, value in second.items():
        assert np.array_equal(_bits(value), TF[f"{key}/1"]), key


def test_numpy_path_stays_within_ulps(monkeypatch):
    """The fallback (no numba, no C library): float64-rounded transcendentals, a few
    ulps at most off TF's, in a small share of values."""
    monkeypatch.setattr(philox_random, "_libm_loop", lambda name: None)
    first, _ = _draw_twice()
    for dt in ("float32", "float64"):
        got = first[f"normal_{dt}"]
        want = TF[f"normal_{dt}/0"].view(got.dtype)
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
        assert (got != want).mean() < 0.05


@pytest.mark.skipif(not HAVE_NUMBA, reason="the exact loops need numba (the test extra)")
def test_host_loop_matches_c_library_per_value():
    """The compiled loop against one ctypes call per value (an independent path to the
    same C functions), on the edges of Box-Muller's inputs: the clamp 1e-7, values
    next to 1, and angles near multiples of pi/2."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("m"))
    fns = {}
    for name in ("logf", "sinf", "cosf"):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
        fns[name] = fn
    u1 = np.float32([1e-7, 0.5, 1 - 2**-23, 2**-23, 0.999, 0.25, 0.1, 0.7] * 4)
    v1 = np.float32(np.pi / 2) * np.arange(32, dtype=np.float32) / np.float32(4)
    s, c = philox_random._box_muller_host(philox_random._libm_loop("f32"), u1, v1)
    for i in range(u1.size):
        u2 = np.sqrt(np.float32(-2.0) * np.float32(fns["logf"](float(u1[i]))))
        assert s[i] == np.float32(fns["sinf"](float(v1[i]))) * u2
        assert c[i] == np.float32(fns["cosf"](float(v1[i]))) * u2
