"""`tf.distributions.Uniform`: the continuous uniform on `[low, high)`.

Samples are `low + (high - low) * random_uniform(...)`: TF's seeded draws, and
differentiable in both bounds.
"""

from __future__ import annotations

import math

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Uniform distribution with bounds `low` and `high`.

    Raises:
      InvalidArgumentError: at run time, with `validate_args=True`, if `low >= high`.
    """

    _PARAM_SHAPE_NAMES = ("low", "high")

    def __init__(
        self, low=0.0, high=1.0, validate_args=False, allow_nan_stats=True, name="Uniform"
    ):
        parameters = dict(locals())
        with name_scope(name, values=[low, high]) as name:
            deps = (
                [ops.assert_less(low, high, message="uniform not defined when low >= high.")]
                if validate_args
                else []
            )
            with control_dependencies(deps):
                self._low = ops.identity(low, name="low")
                self._high = ops.identity(high, name="high")
                ops.assert_same_float_dtype([self._low, self._high])
        super().__init__(
            dtype=self._low.dtype,
            reparameterization_type=FULLY_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._low, self._high],
            name=name,
        )

    @property
    def low(self):
        """Lower boundary of the output interval."""
        return self._low

    @property
    def high(self):
        """Upper boundary of the output interval."""
        return self._high

    def range(self, name="range"):
        """`high - low`."""
        with self._name_scope(name):
            return self.high - self.low

    def _batch_shape_tensor(self):
        return ops.broadcast_dynamic_shape(ops.shape(self.low), ops.shape(self.high))

    def _batch_shape(self):
        return ops.broadcast_static_shape(self.low.shape, self.high.shape)

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        shape = ops.concat([[n], self.batch_shape_tensor()], 0)
        samples = ops.random_uniform(shape=shape, dtype=self.dtype, seed=seed)
        return self.low + self.range() * samples

    def _prob(self, x):
        broadcasted_x = x * ops.ones(self.batch_shape_tensor(), dtype=x.dtype)
        return ops.where_v2(
            ops.is_nan(broadcasted_x),
            broadcasted_x,
            ops.where_v2(
                ops.logical_or(broadcasted_x < self.low, broadcasted_x >= self.high),
                ops.zeros_like(broadcasted_x),
                ops.ones_like(broadcasted_x) / self.range(),
            ),
        )

    def _cdf(self, x):
        broadcast_shape = ops.broadcast_dynamic_shape(ops.shape(x), self.batch_shape_tensor())
        zeros = ops.zeros(broadcast_shape, dtype=self.dtype)
        ones = ops.ones(broadcast_shape, dtype=self.dtype)
        broadcasted_x = x * ones
        result_if_not_big = ops.where_v2(
            x < self.low, zeros, (broadcasted_x - self.low) / self.range()
        )
        return ops.where_v2(x >= self.high, ones, result_if_not_big)

    def _entropy(self):
        return ops.log(self.range())

    def _mean(self):
        return (self.low + self.high) / 2.0

    def _variance(self):
        return ops.square(self.range()) / 12.0

    def _stddev(self):
        return self.range() / math.sqrt(12.0)
