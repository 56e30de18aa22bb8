"""The normal CDF and its log, built from erf/erfc as TF's `special_math` builds them.

`log_ndtr` switches to an asymptotic series below -10 (float32; -20 for float64) and to
`-ndtr(-x)` above 5 (8), so the tails keep precision where `log(ndtr(x))` would not.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.graph import convert_to_tensor, name_scope

__all__ = ["log_ndtr", "ndtr", "ndtri"]


def ndtr(x, name="ndtr"):
    """The standard normal CDF.

    Raises:
      TypeError: if `x` is not float32 or float64.
    """
    with name_scope(name, values=[x]):
        x = convert_to_tensor(x, name="x")
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(
                f"x.dtype={x.dtype} is not handled, see docstring for supported types."
            )
        return _ndtr(x)


def _ndtr(x):
    half_sqrt_2 = ops.constant(0.5 * math.sqrt(2.0), dtype=x.dtype, name="half_sqrt_2")
    w = x * half_sqrt_2
    z = ops.abs(w)
    y = ops.where_v2(
        ops.less(z, half_sqrt_2),
        1.0 + ops.erf(w),
        ops.where_v2(ops.greater(w, 0.0), 2.0 - ops.erfc(z), ops.erfc(z)),
    )
    return 0.5 * y


def ndtri(p, name="ndtri"):
    """The inverse of the standard normal CDF.

    Raises:
      TypeError: if `p` is not float32 or float64.
    """
    with name_scope(name, values=[p]):
        p = convert_to_tensor(p, name="p")
        if p.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(
                f"p.dtype={p.dtype} is not handled, see docstring for supported types."
            )
        return ops.ndtri(p)


def log_ndtr(x, series_order=3, name="log_ndtr"):
    """log of the standard normal CDF, precise in both tails.

    Raises:
      TypeError: if `series_order` is not an int or `x` is not float32/float64.
      ValueError: if `series_order` is negative or above 30.
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    with name_scope(name, values=[x]):
        x = convert_to_tensor(x, name="x")
        if x.dtype == dtypes.float64:
            lower, upper = -20.0, 8.0
        elif x.dtype == dtypes.float32:
            lower, upper = -10.0, 5.0
        else:
            raise TypeError(f"x.dtype={x.dtype} is not supported.")
        return ops.where_v2(
            ops.greater(x, upper),
            -_ndtr(-x),  # log(1 - e) is -e to working precision here
            ops.where_v2(
                ops.greater(x, lower),
                ops.log(_ndtr(ops.maximum(x, lower))),
                _log_ndtr_lower(ops.minimum(x, lower), series_order),
            ),
        )


def _log_ndtr_lower(x, series_order):
    x_2 = ops.square(x)
    log_scale = -0.5 * x_2 - ops.log(-x) - 0.5 * np.log(2.0 * np.pi)
    return log_scale + ops.log(_log_ndtr_asymptotic_series(x, series_order))


def _log_ndtr_asymptotic_series(x, series_order):
    if series_order <= 0:
        return np.array(1, x.dtype.as_numpy_dtype)
    x_2 = ops.square(x)
    even_sum = ops.zeros_like(x)
    odd_sum = ops.zeros_like(x)
    x_2n = x_2
    for n in range(1, series_order + 1):
        y = np.array(_double_factorial(2 * n - 1), x.dtype.as_numpy_dtype) / x_2n
        if n % 2:
            odd_sum += y
        else:
            even_sum += y
        x_2n *= x_2
    return 1.0 + even_sum - odd_sum


def _double_factorial(n):
    return np.prod(np.arange(n, 1, -2))
