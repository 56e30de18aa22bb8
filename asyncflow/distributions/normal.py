"""`tf.distributions.Normal`: the univariate normal, parameterized by `loc` and `scale`.

Sampling is `loc + scale * random_normal(...)` with the caller's seed, so seeded draws
are TF's numbers and gradients reach both parameters (fully reparameterized).
"""

from __future__ import annotations

import math

from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler, special_math
from asyncflow.distributions.loc_scale import LocScale
from asyncflow.graph import name_scope

__all__ = ["Normal"]


class Normal(LocScale):
    """Normal distribution with mean `loc` and standard deviation `scale`.

    Raises:
      TypeError: if `loc` and `scale` have different dtypes.
      InvalidArgumentError: at run time, with `validate_args=True`, if `scale <= 0`.
    """

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Normal"):
        parameters = dict(locals())
        super().__init__(loc, scale, validate_args, allow_nan_stats, name, parameters)

    def _sample_n(self, n, seed=None):
        shape = ops.concat([[n], self.batch_shape_tensor()], 0)
        sampled = ops.random_normal(
            shape=shape, mean=0.0, stddev=1.0, dtype=self.loc.dtype, seed=seed
        )
        return sampled * self.scale + self.loc

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _log_cdf(self, x):
        return special_math.log_ndtr(self._z(x))

    def _cdf(self, x):
        return special_math.ndtr(self._z(x))

    def _log_survival_function(self, x):
        return special_math.log_ndtr(-self._z(x))

    def _survival_function(self, x):
        return special_math.ndtr(-self._z(x))

    def _log_unnormalized_prob(self, x):
        return -0.5 * ops.square(self._z(x))

    def _log_normalization(self):
        return 0.5 * math.log(2.0 * math.pi) + ops.log(self.scale)

    def _entropy(self):
        scale = self.scale * ops.ones_like(self.loc)
        return 0.5 * math.log(2.0 * math.pi * math.e) + ops.log(scale)

    def _mean(self):
        return self.loc * ops.ones_like(self.scale)

    def _quantile(self, p):
        return self._inv_z(special_math.ndtri(p))

    def _stddev(self):
        return self.scale * ops.ones_like(self.loc)

    def _mode(self):
        return self._mean()

    def _z(self, x):
        with name_scope("standardize", values=[x]):
            return (x - self.loc) / self.scale

    def _inv_z(self, z):
        with name_scope("reconstruct", values=[z]):
            return z * self.scale + self.loc


@kullback_leibler.RegisterKL(Normal, Normal)
def _kl_normal_normal(n_a, n_b, name=None):
    """KL(n_a || n_b) in closed form."""
    with name_scope(name, "kl_normal_normal", [n_a.loc, n_b.loc]):
        one = ops.constant(1, dtype=n_a.dtype)
        two = ops.constant(2, dtype=n_a.dtype)
        half = ops.constant(0.5, dtype=n_a.dtype)
        s_a_squared = ops.square(n_a.scale)
        s_b_squared = ops.square(n_b.scale)
        ratio = s_a_squared / s_b_squared
        return ops.squared_difference(n_a.loc, n_b.loc) / (two * s_b_squared) + half * (
            ratio - one - ops.log(ratio)
        )
