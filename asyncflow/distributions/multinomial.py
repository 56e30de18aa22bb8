"""`tf.distributions.Multinomial` and `DirichletMultinomial`: counts of `total_count`
draws over K classes (the last axis is the event).

Multinomial samples run TF's seeded `multinomial` op once per batch member inside a
`map_fn`, as TF does, the members drawn in the order TF's executor mostly draws them;
DirichletMultinomial draws seeded gammas, then one `multinomial` seeded as TF derives
its second seed.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions import util
from asyncflow.distributions.dirichlet import ConcentrationVector
from asyncflow.distributions.distribution import NOT_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope

__all__ = ["DirichletMultinomial", "Multinomial"]


def _log_combinations(n, counts, name="log_combinations"):
    """log of the multinomial coefficient n! / prod(counts!)."""
    with name_scope(name, values=[n, counts]):
        n = convert_to_tensor(n, name="n")
        counts = convert_to_tensor(counts, name="counts")
        total_permutations = ops.lgamma(n + 1)
        counts_factorial = ops.lgamma(counts + 1)
        redundant_permutations = ops.reduce_sum(counts_factorial, axis=[-1])
        return total_permutations - redundant_permutations


def _embed_check_nonnegative_integer_form(x, name="embed_check_nonnegative_integer_form"):
    with name_scope(name, values=[x]):
        x = convert_to_tensor(x, name="x")
        checks = [ops.assert_non_negative(x, message=f"'{x}' must be non-negative.")]
        if not x.dtype.is_integer:
            checks.append(
                ops.assert_equal(
                    x, ops.floor(x), message=f"'{x}' cannot contain fractional components."
                )
            )
        with control_dependencies(checks):
            return ops.identity(x)


_PARALLEL_ITERATIONS = 10  # map_fn's default in a graph


def _tf_draw_order(n):
    """0..n-1 reversed within each window of map_fn's parallel iterations: the order
    TF mostly draws a Multinomial's members in."""
    i = ops.range(n)
    start = (i // _PARALLEL_ITERATIONS) * _PARALLEL_ITERATIONS
    end = ops.minimum(start + _PARALLEL_ITERATIONS, n)
    return start + end - 1 - i


class Multinomial(Distribution):
    """Multinomial distribution over counts, given `total_count` and `logits` or `probs`.

    Raises:
      ValueError: if both or neither of `logits` and `probs` are given.
      InvalidArgumentError: with `validate_args=True`, for counts that are negative,
        fractional, or do not sum to `total_count`.
    """

    def __init__(
        self,
        total_count,
        logits=None,
        probs=None,
        validate_args=False,
        allow_nan_stats=True,
        name="Multinomial",
    ):
        parameters = dict(locals())
        with name_scope(name, values=[total_count, logits, probs]) as name:
            self._total_count = convert_to_tensor(total_count, name="total_count")
            if validate_args:
                self._total_count = _embed_check_nonnegative_integer_form(self._total_count)
            self._logits, self._probs = util.get_logits_and_probs(
                logits=logits,
                probs=probs,
                multidimensional=True,
                validate_args=validate_args,
                name=name,
            )
            self._mean_val = ops.expand_dims(self._total_count, -1) * self._probs
        super().__init__(
            dtype=self._probs.dtype,
            reparameterization_type=NOT_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._total_count, self._logits, self._probs],
            name=name,
        )

    @property
    def total_count(self):
        """Number of trials used to construct a sample."""
        return self._total_count

    @property
    def logits(self):
        """Vector of coordinatewise logits."""
        return self._logits

    @property
    def probs(self):
        """Probability of drawing a `1` in that coordinate."""
        return self._probs

    def _batch_shape_tensor(self):
        return ops.shape(self._mean_val)[:-1]

    def _batch_shape(self):
        return self._mean_val.shape.with_rank_at_least(1)[:-1]

    def _event_shape_tensor(self):
        return ops.shape(self._mean_val)[-1:]

    def _event_shape(self):
        return self._mean_val.shape.with_rank_at_least(1)[-1:]

    def _sample_n(self, n, seed=None):
        n_draws = ops.cast(self.total_count, dtype=dtypes.int32)
        k = self.event_shape_tensor()[0]
        n_draws = ops.ones_like(self.logits[..., 0], dtype=n_draws.dtype) * n_draws
        logits = ops.ones_like(ops.expand_dims(n_draws, -1), dtype=self.logits.dtype) * self.logits
        flat_logits = ops.reshape(logits, [-1, k])
        flat_ndraws = n * ops.reshape(n_draws, [-1])

        def _sample_single(args):
            logits, n_draw = args[0], args[1]
            x = ops.multinomial(ops.expand_dims(logits, 0), n_draw, seed)
            x = ops.reshape(x, shape=[n, -1])
            return ops.reduce_sum(ops.one_hot(x, depth=k), axis=-2)

        # Every member's draw comes from the one seeded Multinomial op, so the member
        # that runs first gets the first random numbers.  TF's executor mostly runs the
        # draws of map_fn's iterations last-first within each window of its 10 parallel
        # iterations (the last ready one inline, the others from Eigen's LIFO worker
        # queue; other orders happen now and then, as thread timing goes); ours runs
        # them in order, so the members go in in TF's order (a permutation that is its
        # own inverse) and come out put back.
        order = _tf_draw_order(ops.shape(flat_ndraws)[0])
        flat_logits = ops.gather(flat_logits, order)
        flat_ndraws = ops.gather(flat_ndraws, order)
        x = ops.map_fn(_sample_single, [flat_logits, flat_ndraws], dtype=self.dtype)
        x = ops.gather(x, order)
        x = ops.transpose(x, perm=[1, 0, 2])
        final_shape = ops.concat([[n], self.batch_shape_tensor(), [k]], 0)
        return ops.reshape(x, final_shape)

    def _log_prob(self, counts):
        return self._log_unnormalized_prob(counts) - self._log_normalization(counts)

    def _log_unnormalized_prob(self, counts):
        counts = self._maybe_assert_valid_sample(counts)
        return ops.reduce_sum(counts * ops.log_softmax(self.logits), -1)

    def _log_normalization(self, counts):
        counts = self._maybe_assert_valid_sample(counts)
        return -_log_combinations(self.total_count, counts)

    def _mean(self):
        return ops.identity(self._mean_val)

    def _covariance(self):
        p = self.probs * ops.expand_dims(ops.ones_like(self.total_count), -1)
        return ops.matrix_set_diag(
            -ops.matmul(ops.expand_dims(self._mean_val, -1), ops.expand_dims(p, -2)),
            self._variance(),
        )

    def _variance(self):
        p = self.probs * ops.expand_dims(ops.ones_like(self.total_count), -1)
        return self._mean_val - self._mean_val * p

    def _maybe_assert_valid_sample(self, counts):
        if not self.validate_args:
            return counts
        counts = _embed_check_nonnegative_integer_form(counts)
        check = ops.assert_equal(
            self.total_count,
            ops.reduce_sum(counts, -1),
            message="counts must sum to `self.total_count`",
        )
        with control_dependencies([check]):
            return ops.identity(counts)


class DirichletMultinomial(ConcentrationVector):
    """Dirichlet-multinomial compound distribution over counts.

    Raises:
      InvalidArgumentError: with `validate_args=True`, for a non-positive concentration or
        counts that are negative, fractional, or do not sum to `total_count`.
    """

    def __init__(
        self,
        total_count,
        concentration,
        validate_args=False,
        allow_nan_stats=True,
        name="DirichletMultinomial",
    ):
        parameters = dict(locals())
        with name_scope(name, values=[total_count, concentration]) as name:
            self._total_count = convert_to_tensor(total_count, name="total_count")
            if validate_args:
                self._total_count = _embed_check_nonnegative_integer_form(self._total_count)
            self._concentration = util.positive_concentration(
                convert_to_tensor(concentration, name="concentration"), validate_args
            )
            self._total_concentration = ops.reduce_sum(self._concentration, -1)
        super().__init__(
            dtype=self._concentration.dtype,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            reparameterization_type=NOT_REPARAMETERIZED,
            parameters=parameters,
            graph_parents=[self._total_count, self._concentration],
            name=name,
        )

    @property
    def total_count(self):
        """Number of trials used to construct a sample."""
        return self._total_count

    def _sample_n(self, n, seed=None):
        n_draws = ops.cast(self.total_count, dtype=dtypes.int32)
        k = self.event_shape_tensor()[0]
        unnormalized_logits = ops.reshape(
            ops.log(
                ops.random_gamma(shape=[n], alpha=self.concentration, dtype=self.dtype, seed=seed)
            ),
            shape=[-1, k],
        )
        draws = ops.multinomial(
            logits=unnormalized_logits,
            num_samples=n_draws,
            seed=util.gen_new_seed(seed, salt="dirichlet_multinomial"),
        )
        x = ops.reduce_sum(ops.one_hot(draws, depth=k), -2)
        final_shape = ops.concat([[n], self.batch_shape_tensor(), [k]], 0)
        x = ops.reshape(x, final_shape)
        return ops.cast(x, self.dtype)

    def _log_prob(self, counts):
        counts = self._maybe_assert_valid_sample(counts)
        ordered_prob = ops.lbeta(self.concentration + counts) - ops.lbeta(self.concentration)
        return ordered_prob + _log_combinations(self.total_count, counts)

    def _prob(self, counts):
        return ops.exp(self._log_prob(counts))

    def _mean(self):
        return self.total_count * (
            self.concentration / ops.expand_dims(self.total_concentration, -1)
        )

    def _covariance(self):
        x = self._variance_scale_term() * self._mean()
        return ops.matrix_set_diag(
            -ops.matmul(ops.expand_dims(x, -1), ops.expand_dims(x, -2)), self._variance()
        )

    def _variance(self):
        scale = self._variance_scale_term()
        x = scale * self._mean()
        return x * (self.total_count * scale - x)

    def _variance_scale_term(self):
        c0 = ops.expand_dims(self.total_concentration, -1)
        return ops.sqrt((1.0 + c0 / ops.expand_dims(self.total_count, -1)) / (1.0 + c0))

    def _maybe_assert_valid_sample(self, counts):
        if not self.validate_args:
            return counts
        counts = _embed_check_nonnegative_integer_form(counts)
        check = ops.assert_equal(
            self.total_count,
            ops.reduce_sum(counts, -1),
            message="counts must sum to `self.total_count`",
        )
        with control_dependencies([check]):
            return ops.identity(counts)
