"""`tf.distributions.Laplace`: the double exponential, from `loc` and `scale`.

Samples invert the CDF on a seeded `random_uniform` draw in (-1, 1), TF's op and seed,
so they agree with TF and are differentiable in both parameters.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow.distributions import _ops as ops
from asyncflow.distributions.loc_scale import LocScale
from asyncflow.graph import convert_to_tensor, name_scope

__all__ = ["Laplace"]


class Laplace(LocScale):
    """Laplace distribution with location `loc` and `scale`.

    Raises:
      InvalidArgumentError: with `validate_args=True`, if `scale <= 0`.
    """

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Laplace"):
        parameters = dict(locals())
        super().__init__(loc, scale, validate_args, allow_nan_stats, name, parameters)

    def _sample_n(self, n, seed=None):
        shape = ops.concat([[n], self.batch_shape_tensor()], 0)
        np_dtype = self.dtype.as_numpy_dtype
        # The open interval (-1, 1): log1p(-|u|) is finite for every draw.
        uniform = ops.random_uniform(
            shape=shape,
            minval=np.nextafter(np_dtype(-1.0), np_dtype(1.0)),
            maxval=1.0,
            dtype=self.dtype,
            seed=seed,
        )
        return self.loc - self.scale * ops.sign(uniform) * ops.log1p(-ops.abs(uniform))

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _prob(self, x):
        return ops.exp(self._log_prob(x))

    def _log_cdf(self, x):
        return _log_cdf_laplace(self._z(x))

    def _log_survival_function(self, x):
        return _log_cdf_laplace(-self._z(x))

    def _cdf(self, x):
        z = self._z(x)
        return 0.5 + 0.5 * ops.sign(z) * (1.0 - ops.exp(-ops.abs(z)))

    def _log_unnormalized_prob(self, x):
        return -ops.abs(self._z(x))

    def _log_normalization(self):
        return math.log(2.0) + ops.log(self.scale)

    def _entropy(self):
        scale = self.scale + ops.zeros_like(self.loc)
        return math.log(2.0) + 1.0 + ops.log(scale)

    def _mean(self):
        return self.loc + ops.zeros_like(self.scale)

    def _stddev(self):
        return math.sqrt(2.0) * self.scale + ops.zeros_like(self.loc)

    def _median(self):
        return self._mean()

    def _mode(self):
        return self._mean()

    def _z(self, x):
        return (x - self.loc) / self.scale


def _log_cdf_laplace(x, name="log_cdf_laplace"):
    # Two branches so each side keeps precision: x itself below 0, log1p above.
    with name_scope(name, values=[x]):
        x = convert_to_tensor(x, name="x")
        lower_solution = -np.log(2.0) + x
        safe_exp_neg_x = ops.exp(-ops.abs(x))
        upper_solution = ops.log1p(-0.5 * safe_exp_neg_x)
        return ops.where_v2(x < 0.0, lower_solution, upper_solution)
