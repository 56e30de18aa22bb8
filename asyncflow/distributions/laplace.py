"""`tf.distributions.Laplace`: the double exponential, from `loc` and `scale`.

Samples invert the CDF on a seeded `random_uniform` draw in (-1, 1), TF's op and seed,
so they agree with TF and are differentiable in both parameters.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Laplace distribution with location `loc` and `scale`.

    Raises:
      InvalidArgumentError: with `validate_args=True`, if `scale <= 0`.
    """

    _PARAM_SHAPE_NAMES = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Laplace"):
        parameters = dict(locals())
        with name_scope(name, values=[loc, scale]) as name:
            deps = [ops.assert_positive(scale)] if validate_args else []
            with control_dependencies(deps):
                self._loc = ops.identity(loc, name="loc")
                self._scale = ops.identity(scale, name="scale")
                ops.assert_same_float_dtype([self._loc, self._scale])
        super().__init__(
            dtype=self._loc.dtype,
            reparameterization_type=FULLY_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._loc, self._scale],
            name=name,
        )

    @property
    def loc(self):
        """Distribution parameter for the location."""
        return self._loc

    @property
    def scale(self):
        """Distribution parameter for scale."""
        return self._scale

    def _batch_shape_tensor(self):
        return ops.broadcast_dynamic_shape(ops.shape(self.loc), ops.shape(self.scale))

    def _batch_shape(self):
        return ops.broadcast_static_shape(self.loc.shape, self.scale.shape)

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

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
