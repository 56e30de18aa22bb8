"""`tf.distributions.Categorical`: one of K classes per batch member.

Samples are TF's `multinomial` draws on the 2-D logits with the caller's seed, so seeded
draws agree with TF.  `cdf(k)` is P(X < k), TF's (strict) definition.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import kullback_leibler, util
from asyncflow.distributions.distribution import NOT_REPARAMETERIZED, Distribution
from asyncflow.graph import convert_to_tensor, name_scope
from asyncflow.tensor_shape import TensorShape

__all__ = ["Categorical"]


def _broadcast_cat_event_and_params(event, params, base_dtype):
    """`event` and `params` broadcast so that `params.shape[:-1] == event.shape`."""
    event = convert_to_tensor(event, name="event")
    if event.dtype.is_integer:
        pass
    elif event.dtype.is_floating:
        event = ops.cast(event, dtype=dtypes.int32)
    else:
        raise TypeError(f"`value` should have integer `dtype` or `self.dtype` ({base_dtype})")
    known = (
        params.shape.ndims is not None
        and params.shape[:-1].is_fully_defined()
        and event.shape.is_fully_defined()
    )
    if not known or params.shape[:-1] != event.shape:
        params *= ops.ones_like(ops.expand_dims(event, -1), dtype=params.dtype)
        params_shape = ops.shape(params)[:-1]
        event *= ops.ones(params_shape, dtype=event.dtype)
        if params.shape.ndims is not None:
            event.set_shape(TensorShape(params.shape[:-1]))
    return event, params


class Categorical(Distribution):
    """Categorical distribution over `0..K-1`, given exactly one of `logits` or `probs`.

    Raises:
      ValueError: if both or neither of `logits` and `probs` are given.
    """

    def __init__(
        self,
        logits=None,
        probs=None,
        dtype=dtypes.int32,
        validate_args=False,
        allow_nan_stats=True,
        name="Categorical",
    ):
        parameters = dict(locals())
        with name_scope(name, values=[logits, probs]) as name:
            self._logits, self._probs = util.get_logits_and_probs(
                logits=logits,
                probs=probs,
                validate_args=validate_args,
                multidimensional=True,
                name=name,
            )
            static = self._logits.shape.with_rank_at_least(1)
            if static.ndims is not None:
                self._batch_rank = convert_to_tensor(
                    static.ndims - 1, dtype=dtypes.int32, name="batch_rank"
                )
            else:
                with name_scope(name="batch_rank"):
                    self._batch_rank = ops.rank(self._logits) - 1
            if static[-1] is not None and _dim(static[-1]) is not None:
                self._event_size = convert_to_tensor(
                    _dim(static[-1]), dtype=dtypes.int32, name="event_size"
                )
            else:
                with name_scope(name="event_size"):
                    self._event_size = ops.shape(self._logits)[-1]
            if static[:-1].is_fully_defined():
                self._batch_shape_val = ops.constant(
                    static[:-1].as_list(), dtype=dtypes.int32, name="batch_shape"
                )
            else:
                with name_scope(name="batch_shape"):
                    self._batch_shape_val = ops.shape(self._logits)[:-1]
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
    def event_size(self):
        """Scalar `int32` tensor: the number of classes."""
        return self._event_size

    @property
    def logits(self):
        """Vector of coordinatewise logits."""
        return self._logits

    @property
    def probs(self):
        """Vector of coordinatewise probabilities."""
        return self._probs

    def _batch_shape_tensor(self):
        return ops.identity(self._batch_shape_val)

    def _batch_shape(self):
        return self.logits.shape[:-1]

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])

    def _sample_n(self, n, seed=None):
        if self.logits.shape.ndims == 2:
            logits_2d = self.logits
        else:
            logits_2d = ops.reshape(self.logits, [-1, self.event_size])
        sample_dtype = dtypes.int64 if self.dtype.size > 4 else dtypes.int32
        draws = ops.multinomial(logits_2d, n, seed=seed, output_dtype=sample_dtype)
        draws = ops.reshape(ops.transpose(draws), ops.concat([[n], self.batch_shape_tensor()], 0))
        return ops.cast(draws, self.dtype)

    def _cdf(self, k):
        k = convert_to_tensor(k, name="k")
        if self.validate_args:
            k = util.embed_check_integer_casting_closed(k, target_dtype=dtypes.int32)
        k, probs = _broadcast_cat_event_and_params(
            event=k, params=self.probs, base_dtype=self.dtype.base_dtype
        )
        # Flattened so that one sequence_mask selects the classes below each k.
        flat_probs = ops.reshape(probs, (-1, self._event_size))
        flat_k = ops.reshape(k, [-1])
        to_sum_over = ops.where_v2(
            ops.sequence_mask(flat_k, self._event_size), flat_probs, ops.zeros_like(flat_probs)
        )
        flat_cdf = ops.reduce_sum(to_sum_over, axis=-1)
        return ops.reshape(flat_cdf, ops.shape(k))

    def _log_prob(self, k):
        k = convert_to_tensor(k, name="k")
        if self.validate_args:
            k = util.embed_check_integer_casting_closed(k, target_dtype=dtypes.int32)
        k, logits = _broadcast_cat_event_and_params(
            k, self.logits, base_dtype=self.dtype.base_dtype
        )
        return -ops.sparse_softmax_cross_entropy_with_logits(labels=k, logits=logits)

    def _entropy(self):
        return -ops.reduce_sum(ops.log_softmax(self.logits) * self.probs, axis=-1)

    def _mode(self):
        ret = ops.argmax(self.logits, axis=self._batch_rank)
        ret = ops.cast(ret, self.dtype)
        ret.set_shape(self.batch_shape)
        return ret


def _dim(d):
    return getattr(d, "value", d)


@kullback_leibler.RegisterKL(Categorical, Categorical)
def _kl_categorical_categorical(a, b, name=None):
    """KL(a || b) summed over the classes."""
    with name_scope(name, "kl_categorical_categorical", values=[a.logits, b.logits]):
        delta_log_probs1 = ops.log_softmax(a.logits) - ops.log_softmax(b.logits)
        return ops.reduce_sum(ops.softmax(a.logits) * delta_log_probs1, axis=-1)
