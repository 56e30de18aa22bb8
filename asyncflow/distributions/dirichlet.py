"""`tf.distributions.Dirichlet`: distributions over the simplex, from `concentration`
(the last axis is the event).

Samples normalize one seeded `random_gamma` draw over the event axis, as TF does.
"""

from __future__ import annotations

import numpy as np

from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope

__all__ = ["Dirichlet"]


class ConcentrationVector(Distribution):
    """What Dirichlet and DirichletMultinomial share: `concentration` of shape
    `batch_shape + [k]` (the last axis is the event), its sum over the event, and the
    shapes they give."""

    @property
    def concentration(self):
        """Concentration parameter; expected counts for that coordinate."""
        return self._concentration

    @property
    def total_concentration(self):
        """Sum of last dim of concentration parameter."""
        return self._total_concentration

    def _batch_shape_tensor(self):
        return ops.shape(self.total_concentration)

    def _batch_shape(self):
        return self.total_concentration.shape

    def _event_shape_tensor(self):
        return ops.shape(self.concentration)[-1:]

    def _event_shape(self):
        return self.concentration.shape.with_rank_at_least(1)[-1:]


class Dirichlet(ConcentrationVector):
    """Dirichlet distribution with `concentration` of shape `batch_shape + [k]`.

    Raises:
      InvalidArgumentError: with `validate_args=True`, for a non-positive concentration,
        a rank-0 one, an event of fewer than 2 classes, or a sample off the simplex.
    """

    def __init__(self, concentration, validate_args=False, allow_nan_stats=True, name="Dirichlet"):
        parameters = dict(locals())
        with name_scope(name, values=[concentration]) as name:
            self._concentration = self._maybe_assert_valid_concentration(
                convert_to_tensor(concentration, name="concentration"), validate_args
            )
            self._total_concentration = ops.reduce_sum(self._concentration, -1)
        super().__init__(
            dtype=self._concentration.dtype,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            reparameterization_type=FULLY_REPARAMETERIZED,
            parameters=parameters,
            graph_parents=[self._concentration, self._total_concentration],
            name=name,
        )

    def _sample_n(self, n, seed=None):
        gamma_sample = ops.random_gamma(
            shape=[n], alpha=self.concentration, dtype=self.dtype, seed=seed
        )
        return gamma_sample / ops.reduce_sum(gamma_sample, -1, keepdims=True)

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _prob(self, x):
        return ops.exp(self._log_prob(x))

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return ops.reduce_sum(ops.xlogy(self.concentration - 1.0, x), -1)

    def _log_normalization(self):
        return ops.lbeta(self.concentration)

    def _entropy(self):
        k = ops.cast(self.event_shape_tensor()[0], self.dtype)
        total = self.total_concentration
        return (
            self._log_normalization()
            + (total - k) * ops.digamma(total)
            - ops.reduce_sum((self.concentration - 1.0) * ops.digamma(self.concentration), axis=-1)
        )

    def _mean(self):
        return self.concentration / ops.expand_dims(self.total_concentration, -1)

    def _covariance(self):
        x = self._variance_scale_term() * self._mean()
        return ops.matrix_set_diag(
            -ops.matmul(ops.expand_dims(x, -1), ops.expand_dims(x, -2)), self._variance()
        )

    def _variance(self):
        scale = self._variance_scale_term()
        x = scale * self._mean()
        return x * (scale - x)

    def _variance_scale_term(self):
        """Helper to `_covariance` and `_variance`, which computes a shared scale."""
        return ops.rsqrt(1.0 + ops.expand_dims(self.total_concentration, -1))

    def _mode(self):
        k = ops.cast(self.event_shape_tensor()[0], self.dtype)
        mode = (self.concentration - 1.0) / (ops.expand_dims(self.total_concentration, -1) - k)
        if self.allow_nan_stats:
            nan = ops.fill(
                ops.shape(mode), np.array(np.nan, dtype=self.dtype.as_numpy_dtype), name="nan"
            )
            return ops.where_v2(ops.reduce_all(self.concentration > 1.0, axis=-1), mode, nan)
        check = ops.assert_less(
            ops.ones([], self.dtype),
            self.concentration,
            message="Mode undefined when any concentration <= 1",
        )
        with control_dependencies([check]):
            return ops.identity(mode)

    def _maybe_assert_valid_concentration(self, concentration, validate_args):
        if not validate_args:
            return concentration
        checks = [
            ops.assert_positive(
                concentration, message="Concentration parameter must be positive."
            ),
            ops.assert_rank_at_least(
                concentration, 1, message="Concentration parameter must have >=1 dimensions."
            ),
            ops.assert_less(
                1,
                ops.shape(concentration)[-1],
                message="Concentration parameter must have event_size >= 2.",
            ),
        ]
        with control_dependencies(checks):
            return ops.identity(concentration)

    def _maybe_assert_valid_sample(self, x):
        if not self.validate_args:
            return x
        checks = [
            ops.assert_positive(x, message="samples must be positive."),
            ops.assert_near(
                ops.ones([], dtype=self.dtype),
                ops.reduce_sum(x, -1),
                message="sample last-dimension must sum to `1`",
            ),
        ]
        with control_dependencies(checks):
            return ops.identity(x)


@kullback_leibler.RegisterKL(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(d1, d2, name=None):
    """KL(d1 || d2) in closed form, summed over the event axis."""
    with name_scope(name, "kl_dirichlet_dirichlet", values=[d1.concentration, d2.concentration]):
        digamma_sum_d1 = ops.digamma(ops.reduce_sum(d1.concentration, axis=-1, keepdims=True))
        digamma_diff = ops.digamma(d1.concentration) - digamma_sum_d1
        concentration_diff = d1.concentration - d2.concentration
        return (
            ops.reduce_sum(concentration_diff * digamma_diff, axis=-1)
            - ops.lbeta(d1.concentration)
            + ops.lbeta(d2.concentration)
        )
