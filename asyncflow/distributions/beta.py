"""`tf.distributions.Beta` on (0, 1), from `concentration1` (alpha) and `concentration0`
(beta).

Samples are G1 / (G1 + G0) from two seeded `random_gamma` draws, the second seeded as TF
derives it, so seeded samples agree with TF.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler, util
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Beta"]


class Beta(Distribution):
    """Beta distribution.

    Raises:
      InvalidArgumentError: with `validate_args=True`, if a concentration is not positive
        or a sample is outside (0, 1).
    """

    _PARAM_SHAPE_NAMES = ("concentration1", "concentration0")

    def __init__(
        self,
        concentration1=None,
        concentration0=None,
        validate_args=False,
        allow_nan_stats=True,
        name="Beta",
    ):
        parameters = dict(locals())
        with name_scope(name, values=[concentration1, concentration0]) as name:
            self._concentration1 = util.positive_concentration(
                convert_to_tensor(concentration1, name="concentration1"), validate_args
            )
            self._concentration0 = util.positive_concentration(
                convert_to_tensor(concentration0, name="concentration0"), validate_args
            )
            ops.assert_same_float_dtype([self._concentration1, self._concentration0])
            self._total_concentration = self._concentration1 + self._concentration0
        super().__init__(
            dtype=self._total_concentration.dtype,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            reparameterization_type=FULLY_REPARAMETERIZED,
            parameters=parameters,
            graph_parents=[self._concentration1, self._concentration0, self._total_concentration],
            name=name,
        )

    @property
    def concentration1(self):
        """Concentration parameter associated with a `1` outcome."""
        return self._concentration1

    @property
    def concentration0(self):
        """Concentration parameter associated with a `0` outcome."""
        return self._concentration0

    @property
    def total_concentration(self):
        """Sum of concentration parameters."""
        return self._total_concentration

    def _batch_shape_tensor(self):
        return ops.shape(self.total_concentration)

    def _batch_shape(self):
        return self.total_concentration.shape

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        ones = ops.ones_like(self.total_concentration, dtype=self.dtype)
        gamma1 = ops.random_gamma(
            shape=[n], alpha=ones * self.concentration1, dtype=self.dtype, seed=seed
        )
        gamma2 = ops.random_gamma(
            shape=[n],
            alpha=ones * self.concentration0,
            dtype=self.dtype,
            seed=util.gen_new_seed(seed, "beta"),
        )
        return gamma1 / (gamma1 + gamma2)

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _prob(self, x):
        return ops.exp(self._log_prob(x))

    def _log_cdf(self, x):
        return ops.log(self._cdf(x))

    def _cdf(self, x):
        return ops.betainc(self.concentration1, self.concentration0, x)

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return ops.xlogy(self.concentration1 - 1.0, x) + (self.concentration0 - 1.0) * ops.log1p(
            -x
        )

    def _log_normalization(self):
        return (
            ops.lgamma(self.concentration1)
            + ops.lgamma(self.concentration0)
            - ops.lgamma(self.total_concentration)
        )

    def _entropy(self):
        c1, c0, total = self.concentration1, self.concentration0, self.total_concentration
        return (
            self._log_normalization()
            - (c1 - 1.0) * ops.digamma(c1)
            - (c0 - 1.0) * ops.digamma(c0)
            + (total - 2.0) * ops.digamma(total)
        )

    def _mean(self):
        return self._concentration1 / self._total_concentration

    def _variance(self):
        return self._mean() * (1.0 - self._mean()) / (1.0 + self.total_concentration)

    def _mode(self):
        mode = (self.concentration1 - 1.0) / (self.total_concentration - 2.0)
        if self.allow_nan_stats:
            nan = ops.fill(
                self.batch_shape_tensor(), np.array(np.nan, self.dtype.as_numpy_dtype), name="nan"
            )
            is_defined = ops.logical_and(self.concentration1 > 1.0, self.concentration0 > 1.0)
            return ops.where_v2(is_defined, mode, nan)
        one = ops.ones([], dtype=self.dtype)
        checks = [
            ops.assert_less(
                one, self.concentration1, message="Mode undefined for concentration1 <= 1."
            ),
            ops.assert_less(
                one, self.concentration0, message="Mode undefined for concentration0 <= 1."
            ),
        ]
        with control_dependencies(checks):
            return ops.identity(mode)

    def _maybe_assert_valid_sample(self, x):
        if not self.validate_args:
            return x
        checks = [
            ops.assert_positive(x, message="sample must be positive"),
            ops.assert_less(x, ops.ones([], self.dtype), message="sample must be less than `1`."),
        ]
        with control_dependencies(checks):
            return ops.identity(x)


@kullback_leibler.RegisterKL(Beta, Beta)
def _kl_beta_beta(d1, d2, name=None):
    """KL(d1 || d2) in closed form."""

    def delta(fn, is_property=True):
        fn1, fn2 = getattr(d1, fn), getattr(d2, fn)
        return (fn2 - fn1) if is_property else (fn2() - fn1())

    with name_scope(name, "kl_beta_beta", values=[
        d1.concentration1, d1.concentration0, d1.total_concentration,
        d2.concentration1, d2.concentration0, d2.total_concentration,
    ]):  # fmt: skip
        return (
            delta("_log_normalization", is_property=False)
            - ops.digamma(d1.concentration1) * delta("concentration1")
            - ops.digamma(d1.concentration0) * delta("concentration0")
            + ops.digamma(d1.total_concentration) * delta("total_concentration")
        )
