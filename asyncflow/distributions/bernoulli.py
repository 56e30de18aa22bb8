"""`tf.distributions.Bernoulli`: 0/1 outcomes with probability `probs` (or `logits`).

Samples compare `random_uniform` draws against `probs`, TF's op and seed, so seeded
draws agree with TF; they are not reparameterized.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler, util
from asyncflow.distributions.distribution import NOT_REPARAMETERIZED, Distribution
from asyncflow.graph import name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """Bernoulli distribution over {0, 1}, given exactly one of `logits` or `probs`.

    Raises:
      ValueError: if both or neither of `logits` and `probs` are given.
    """

    _PARAM_SHAPE_NAMES = ("logits",)

    def __init__(
        self,
        logits=None,
        probs=None,
        dtype=dtypes.int32,
        validate_args=False,
        allow_nan_stats=True,
        name="Bernoulli",
    ):
        parameters = dict(locals())
        with name_scope(name) as name:
            self._logits, self._probs = util.get_logits_and_probs(
                logits=logits, probs=probs, validate_args=validate_args, name=name
            )
        super().__init__(
            dtype=dtypes.as_dtype(dtype),
            reparameterization_type=NOT_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._logits, self._probs],
            name=name,
        )

    @property
    def logits(self):
        """Log-odds of a `1` outcome (vs `0`)."""
        return self._logits

    @property
    def probs(self):
        """Probability of a `1` outcome (vs `0`)."""
        return self._probs

    def _batch_shape_tensor(self):
        return ops.shape(self._logits)

    def _batch_shape(self):
        return self._logits.shape

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        new_shape = ops.concat([[n], self.batch_shape_tensor()], 0)
        uniform = ops.random_uniform(new_shape, seed=seed, dtype=self.probs.dtype)
        sample = ops.less(uniform, self.probs)
        return ops.cast(sample, self.dtype)

    def _log_prob(self, event):
        if self.validate_args:
            event = util.embed_check_integer_casting_closed(event, target_dtype=dtypes.bool)
        event = ops.cast(event, self.logits.dtype)
        logits = self.logits
        if not (
            event.shape.is_fully_defined()
            and logits.shape.is_fully_defined()
            and event.shape == logits.shape
        ):
            logits, event = (ops.ones_like(event) * logits, ops.ones_like(logits) * event)
        return -ops.sigmoid_cross_entropy_with_logits(labels=event, logits=logits)

    def _entropy(self):
        return -self.logits * (ops.sigmoid(self.logits) - 1) + ops.softplus(-self.logits)

    def _mean(self):
        return ops.identity(self.probs)

    def _variance(self):
        return self._mean() * (1.0 - self.probs)

    def _mode(self):
        return ops.cast((self.probs > 0.5), self.dtype)


@kullback_leibler.RegisterKL(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(a, b, name=None):
    """KL(a || b) from the logits, stable for saturated probabilities."""
    with name_scope(name, "kl_bernoulli_bernoulli", values=[a.logits, b.logits]):
        delta_probs0 = ops.softplus(-b.logits) - ops.softplus(-a.logits)
        delta_probs1 = ops.softplus(b.logits) - ops.softplus(a.logits)
        return ops.sigmoid(a.logits) * delta_probs0 + ops.sigmoid(-a.logits) * delta_probs1
