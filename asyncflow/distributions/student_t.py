"""`tf.distributions.StudentT`: Student's t with `df` degrees of freedom, `loc`, `scale`.

Samples are `loc + scale * Z / sqrt(C / df)`: Z from a seeded `random_normal`, C a
chi-square from `random_gamma` seeded as TF derives its second seed.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import util
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t-distribution.

    Raises:
      InvalidArgumentError: with `validate_args=True`, if `df <= 0`; with
        `allow_nan_stats=False`, from `mean()`/`variance()` where `df <= 1`.
    """

    _PARAM_SHAPE_NAMES = ("df", "loc", "scale")

    def __init__(self, df, loc, scale, validate_args=False, allow_nan_stats=True, name="StudentT"):
        parameters = dict(locals())
        with name_scope(name, values=[df, loc, scale]) as name:
            deps = [ops.assert_positive(df)] if validate_args else []
            with control_dependencies(deps):
                self._df = ops.identity(df, name="df")
                self._loc = ops.identity(loc, name="loc")
                self._scale = ops.identity(scale, name="scale")
                ops.assert_same_float_dtype((self._df, self._loc, self._scale))
        super().__init__(
            dtype=self._scale.dtype,
            reparameterization_type=FULLY_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._df, self._loc, self._scale],
            name=name,
        )

    @property
    def df(self):
        """Degrees of freedom in these Student's t distribution(s)."""
        return self._df

    @property
    def loc(self):
        """Locations of these Student's t distribution(s)."""
        return self._loc

    @property
    def scale(self):
        """Scaling factors of these Student's t distribution(s)."""
        return self._scale

    def _batch_shape_tensor(self):
        return ops.broadcast_dynamic_shape(
            ops.shape(self.df),
            ops.broadcast_dynamic_shape(ops.shape(self.loc), ops.shape(self.scale)),
        )

    def _batch_shape(self):
        return ops.broadcast_static_shape(
            self.df.shape, ops.broadcast_static_shape(self.loc.shape, self.scale.shape)
        )

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        shape = ops.concat([[n], self.batch_shape_tensor()], 0)
        normal_sample = ops.random_normal(shape, dtype=self.dtype, seed=seed)
        df = self.df * ops.ones(self.batch_shape_tensor(), dtype=self.dtype)
        gamma_sample = ops.random_gamma(
            [n],
            0.5 * df,
            beta=0.5,
            dtype=self.dtype,
            seed=util.gen_new_seed(seed, salt="student_t"),
        )
        samples = normal_sample * ops.rsqrt(gamma_sample / df)
        return samples * self.scale + self.loc

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _log_unnormalized_prob(self, x):
        y = (x - self.loc) / self.scale
        return -0.5 * (self.df + 1.0) * ops.log1p(ops.square(y) / self.df)

    def _log_normalization(self):
        return (
            ops.log(ops.abs(self.scale))
            + 0.5 * ops.log(self.df)
            + 0.5 * np.log(np.pi)
            + ops.lgamma(0.5 * self.df)
            - ops.lgamma(0.5 * (self.df + 1.0))
        )

    def _cdf(self, x):
        t = (x - self.loc) / self.scale
        x_t = self.df / (ops.square(t) + self.df)
        neg_cdf = 0.5 * ops.betainc(0.5 * self.df, 0.5, x_t)
        return ops.where_v2(ops.less(t, 0.0), neg_cdf, 1.0 - neg_cdf)

    def _entropy(self):
        v = ops.expand_dims(ops.ones(self.batch_shape_tensor(), dtype=self.dtype), -1)
        u = v * ops.expand_dims(self.df, -1)
        beta_arg = ops.concat([u, v], -1) / 2.0
        return (
            ops.log(ops.abs(self.scale))
            + 0.5 * ops.log(self.df)
            + ops.lbeta(beta_arg)
            + 0.5
            * (self.df + 1.0)
            * (ops.digamma(0.5 * (self.df + 1.0)) - ops.digamma(0.5 * self.df))
        )

    def _mean(self):
        mean = self.loc * ops.ones(self.batch_shape_tensor(), dtype=self.dtype)
        if self.allow_nan_stats:
            nan = np.array(np.nan, dtype=self.dtype.as_numpy_dtype)
            return ops.where_v2(
                ops.greater(self.df, ops.ones([], dtype=self.dtype)),
                mean,
                ops.fill(ops.shape(mean), nan, name="nan"),
            )
        check = ops.assert_less(
            ops.ones([], dtype=self.dtype),
            self.df,
            message="mean not defined for components of df <= 1",
        )
        with control_dependencies([check]):
            return ops.identity(mean)

    def _variance(self):
        # The inner where keeps the gradient finite where df <= 2.
        denom = ops.where_v2(ops.greater(self.df, 2.0), self.df - 2.0, ops.ones_like(self.df))
        var = (
            ops.ones(self.batch_shape_tensor(), dtype=self.dtype)
            * ops.square(self.scale)
            * self.df
            / denom
        )
        inf = np.array(np.inf, dtype=self.dtype.as_numpy_dtype)
        result_where_defined = ops.where_v2(
            self.df > ops.fill(ops.shape(self.df), 2.0),
            var,
            ops.fill(self.batch_shape_tensor(), inf, name="inf"),
        )
        if self.allow_nan_stats:
            nan = np.array(np.nan, dtype=self.dtype.as_numpy_dtype)
            return ops.where_v2(
                ops.greater(self.df, ops.ones([], dtype=self.dtype)),
                result_where_defined,
                ops.fill(self.batch_shape_tensor(), nan, name="nan"),
            )
        check = ops.assert_less(
            ops.ones([], dtype=self.dtype),
            self.df,
            message="variance not defined for components of df <= 1",
        )
        with control_dependencies([check]):
            return ops.identity(result_where_defined)

    def _mode(self):
        return ops.identity(self.loc)
