"""`tf.distributions.Gamma` (shape `concentration`, inverse scale `rate`) and its special
case `Exponential` (concentration 1).

Gamma samples are TF's `random_gamma` with the caller's seed (its gradient makes them
reparameterized); Exponential samples are `-log(U) / rate`, U uniform on (tiny, 1), as TF.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Exponential", "Gamma"]


class Gamma(Distribution):
    """Gamma distribution with `concentration` (alpha) and `rate` (beta).

    Raises:
      ValueError: if the two parameters have different dtypes.
      InvalidArgumentError: with `validate_args=True`, if a parameter is not positive;
        with `allow_nan_stats=False`, from `mode()` when a concentration is <= 1.
    """

    _PARAM_SHAPE_NAMES = ("concentration", "rate")

    def __init__(
        self, concentration, rate, validate_args=False, allow_nan_stats=True, name="Gamma"
    ):
        parameters = dict(locals())
        with name_scope(name, values=[concentration, rate]) as name:
            deps = (
                [ops.assert_positive(concentration), ops.assert_positive(rate)]
                if validate_args
                else []
            )
            with control_dependencies(deps):
                self._concentration = ops.identity(concentration, name="concentration")
                self._rate = ops.identity(rate, name="rate")
                ops.assert_same_float_dtype([self._concentration, self._rate])
        super().__init__(
            dtype=self._concentration.dtype,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            reparameterization_type=FULLY_REPARAMETERIZED,
            parameters=parameters,
            graph_parents=[self._concentration, self._rate],
            name=name,
        )

    @property
    def concentration(self):
        """Concentration parameter."""
        return self._concentration

    @property
    def rate(self):
        """Rate parameter."""
        return self._rate

    def _batch_shape_tensor(self):
        return ops.broadcast_dynamic_shape(ops.shape(self.concentration), ops.shape(self.rate))

    def _batch_shape(self):
        return ops.broadcast_static_shape(self.concentration.shape, self.rate.shape)

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        return ops.random_gamma(
            shape=[n], alpha=self.concentration, beta=self.rate, dtype=self.dtype, seed=seed
        )

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _cdf(self, x):
        x = self._maybe_assert_valid_sample(x)
        return ops.igamma(self.concentration, self.rate * x)

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return ops.xlogy(self.concentration - 1.0, x) - self.rate * x

    def _log_normalization(self):
        return ops.lgamma(self.concentration) - self.concentration * ops.log(self.rate)

    def _entropy(self):
        c = self.concentration
        return c - ops.log(self.rate) + ops.lgamma(c) + (1.0 - c) * ops.digamma(c)

    def _mean(self):
        return self.concentration / self.rate

    def _variance(self):
        return self.concentration / ops.square(self.rate)

    def _stddev(self):
        return ops.sqrt(self.concentration) / self.rate

    def _mode(self):
        mode = (self.concentration - 1.0) / self.rate
        if self.allow_nan_stats:
            nan = ops.fill(
                self.batch_shape_tensor(), np.array(np.nan, self.dtype.as_numpy_dtype), name="nan"
            )
            return ops.where_v2(self.concentration > 1.0, mode, nan)
        check = ops.assert_less(
            ops.ones([], self.dtype),
            self.concentration,
            message="mode not defined when any concentration <= 1",
        )
        with control_dependencies([check]):
            return ops.identity(mode)

    def _maybe_assert_valid_sample(self, x):
        ops.assert_same_float_dtype(tensors=[x], dtype=self.dtype)
        if not self.validate_args:
            return x
        with control_dependencies([ops.assert_positive(x)]):
            return ops.identity(x)


class Exponential(Gamma):
    """Exponential distribution with `rate`: a Gamma of concentration 1."""

    _PARAM_SHAPE_NAMES = ("rate",)

    def __init__(self, rate, validate_args=False, allow_nan_stats=True, name="Exponential"):
        parameters = dict(locals())
        # The Gamma is built inside this scope so its ops are `Exponential/...`.
        with name_scope(name, values=[rate]) as name:
            self._rate = convert_to_tensor(rate, name="rate")
        super().__init__(
            concentration=ops.ones([], dtype=self._rate.dtype),
            rate=self._rate,
            allow_nan_stats=allow_nan_stats,
            validate_args=validate_args,
            name=name,
        )
        self._parameters = parameters
        self._graph_parents += [self._rate]

    @property
    def rate(self):
        return self._rate

    def _log_survival_function(self, value):
        return self._log_prob(value) - ops.log(self._rate)

    def _sample_n(self, n, seed=None):
        shape = ops.concat([[n], ops.shape(self._rate)], 0)
        # (tiny, 1): a zero draw would give an infinite sample.
        sampled = ops.random_uniform(
            shape,
            minval=np.finfo(self.dtype.as_numpy_dtype).tiny,
            maxval=1.0,
            seed=seed,
            dtype=self.dtype,
        )
        return -ops.log(sampled) / self._rate


@kullback_leibler.RegisterKL(Gamma, Gamma)
def _kl_gamma_gamma(g0, g1, name=None):
    """KL(g0 || g1) in closed form (Exponential pairs use it through the MRO)."""
    with name_scope(
        name, "kl_gamma_gamma", values=[g0.concentration, g0.rate, g1.concentration, g1.rate]
    ):
        return (
            (g0.concentration - g1.concentration) * ops.digamma(g0.concentration)
            + ops.lgamma(g1.concentration)
            - ops.lgamma(g0.concentration)
            + g1.concentration * ops.log(g0.rate)
            - g1.concentration * ops.log(g1.rate)
            + g0.concentration * (g1.rate / g0.rate - 1.0)
        )
