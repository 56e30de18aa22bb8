"""GEMM with accumulation (C = alpha * op(A) @ op(B) + beta * C), from NumPy's own BLAS.

`np.matmul` always writes a fresh product, so `var -= lr * (a.T @ g)` costs a product
array, a scaled copy and a subtraction pass over memory.  BLAS's gemm does it in one
call, writing into `var`.  NumPy's wheels ship OpenBLAS (as `scipy_openblas64_`, with
64-bit integers); we call that same library, already loaded by NumPy, through ctypes,
so that one thread pool serves both.  When it cannot be found (another NumPy build),
`available()` is False and callers keep their NumPy path.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

__all__ = ["available", "gemm_into"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_fns: dict = {}


def _load() -> None:
    if os.environ.get("ASYNCFLOW_NO_FUSED_GEMM", "") not in ("", "0"):
        return
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "libscipy_openblas64_*.so"))):
        try:
            lib = ctypes.CDLL(path)
            pairs = (
                (np.dtype(np.float32), lib.scipy_cblas_sgemm64_, ctypes.c_float),
                (np.dtype(np.float64), lib.scipy_cblas_dgemm64_, ctypes.c_double),
            )
        except (OSError, AttributeError):
            continue
        i64, ptr, enum = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        for dtype, fn, scalar in pairs:
            fn.restype = None
            fn.argtypes = [enum, enum, enum, i64, i64, i64, scalar, ptr, i64, ptr, i64]
            fn.argtypes += [scalar, ptr, i64]
            _fns[dtype] = fn
        return


_load()


def available(dtype) -> bool:
    """Whether `gemm_into` handles arrays of `dtype`."""
    return np.dtype(dtype) in _fns


def gemm_into(c, a, b, trans_a: bool, trans_b: bool, alpha: float, beta: float) -> None:
    """c = alpha * op(a) @ op(b) + beta * c, in place (op transposes when asked).

    `c` must be a writable C-contiguous 2-D array of a dtype `available`; `a` and `b`
    of the same dtype, 2-D (made contiguous here when they are not) and of matching
    sizes, which the caller has checked.
    """
    fn = _fns[c.dtype]
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if not (m and n and k):  # BLAS rejects zero leading dimensions
        if m and n:
            c *= beta
        return
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    fn(
        _ROW_MAJOR,
        _TRANS if trans_a else _NO_TRANS,
        _TRANS if trans_b else _NO_TRANS,
        m,
        n,
        k,
        alpha,
        a.ctypes.data,
        a.shape[1],
        b.ctypes.data,
        b.shape[1],
        beta,
        c.ctypes.data,
        n,
    )
