"""`tf.distributions.Distribution`: the base class of TF1's distributions (tf.compat.v1).

A subclass builds its parameters as graph tensors in its constructor (under a name scope
`Name/` that every later method re-enters, so `log_prob` ops are `Name/log_prob/...`) and
implements the private `_log_prob`, `_sample_n`, ... it has.  The public methods give
TF's fallbacks (log_prob from prob, stddev from variance, survival from cdf, ...) and
raise TF's `NotImplementedError("<method> is not implemented: <Class>")` otherwise.
"""

from __future__ import annotations

import contextlib

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.graph import constant_value as _constant_value
from asyncflow.graph import convert_to_tensor, name_scope
from asyncflow.tensor_shape import TensorShape, as_shape

__all__ = [
    "Distribution",
    "FULLY_REPARAMETERIZED",
    "NOT_REPARAMETERIZED",
    "ReparameterizationType",
]


class ReparameterizationType:
    """Whether a distribution's samples are differentiable in its parameters."""

    def __init__(self, rep_type: str):
        self._rep_type = rep_type

    def __repr__(self) -> str:
        return f"<Reparameterization Type: {self._rep_type}>"

    def __eq__(self, other) -> bool:
        # Identity, as TF: the two module constants are the only instances in use.
        return self is other

    __hash__ = object.__hash__


FULLY_REPARAMETERIZED = ReparameterizationType("FULLY_REPARAMETERIZED")
NOT_REPARAMETERIZED = ReparameterizationType("NOT_REPARAMETERIZED")


def _not_implemented(method: str, obj) -> NotImplementedError:
    return NotImplementedError(f"{method} is not implemented: {type(obj).__name__}")


class Distribution:
    """A batch of probability distributions over tensors of one dtype.

    Raises:
      NotImplementedError: from a method the distribution does not define (TF's wording).
    """

    def __init__(
        self,
        dtype,
        reparameterization_type,
        validate_args,
        allow_nan_stats,
        parameters=None,
        graph_parents=None,
        name=None,
    ):
        if not name or name[-1] != "/":
            with name_scope(name or type(self).__name__) as name:
                pass
        self._dtype = dtype
        self._reparameterization_type = reparameterization_type
        self._allow_nan_stats = allow_nan_stats
        self._validate_args = validate_args
        self._parameters = dict(parameters or {})
        self._graph_parents = list(graph_parents or [])
        self._name = name

    # -- properties ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def parameters(self) -> dict:
        return {
            k: v for k, v in self._parameters.items() if not k.startswith("__") and k != "self"
        }

    @property
    def reparameterization_type(self):
        return self._reparameterization_type

    @property
    def allow_nan_stats(self) -> bool:
        return self._allow_nan_stats

    @property
    def validate_args(self) -> bool:
        return self._validate_args

    def copy(self, **override_parameters_kwargs):
        """A new instance of this class with the parameters overridden by the keywords."""
        parameters = dict(self.parameters, **override_parameters_kwargs)
        return type(self)(**parameters)

    # -- shapes ----------------------------------------------------------------------

    # The parameters whose shape is the sample shape (TF's `_param_shapes`); empty where
    # TF does not define it.
    _PARAM_SHAPE_NAMES: tuple = ()

    @classmethod
    def param_shapes(cls, sample_shape, name="DistributionParamShapes"):
        """The parameter shapes (int32 tensors) that make `sample()` of shape `sample_shape`.

        Raises:
          NotImplementedError: for a distribution TF gives no parameter shapes.
        """
        with name_scope(name, values=[sample_shape]):
            if not cls._PARAM_SHAPE_NAMES:
                raise NotImplementedError("_param_shapes not implemented")
            shape = convert_to_tensor(sample_shape, dtype=dtypes.int32)
            return {param: shape for param in cls._PARAM_SHAPE_NAMES}

    @classmethod
    def param_static_shapes(cls, sample_shape):
        """`param_shapes` as `TensorShape`s, for a statically known `sample_shape`.

        Raises:
          ValueError: if `sample_shape` is not fully defined.
        """
        if isinstance(sample_shape, TensorShape):
            if not sample_shape.is_fully_defined():
                raise ValueError("TensorShape sample_shape must be fully defined")
            sample_shape = sample_shape.as_list()
        static_params = {}
        for param, shape in cls.param_shapes(sample_shape).items():
            value = _constant_value(shape)
            if value is None:
                raise ValueError("sample_shape must be a fully-defined TensorShape or list/tuple")
            static_params[param] = TensorShape([int(v) for v in value])
        return static_params

    @property
    def batch_shape(self) -> TensorShape:
        return as_shape(self._batch_shape())

    @property
    def event_shape(self) -> TensorShape:
        return as_shape(self._event_shape())

    def _batch_shape(self):
        return TensorShape(None)

    def _event_shape(self):
        return TensorShape(None)

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        with self._name_scope(name):
            if self.batch_shape.is_fully_defined():
                return convert_to_tensor(
                    self.batch_shape.as_list(), dtype=dtypes.int32, name="batch_shape"
                )
            return self._batch_shape_tensor()

    def event_shape_tensor(self, name="event_shape_tensor"):
        with self._name_scope(name):
            if self.event_shape.is_fully_defined():
                return convert_to_tensor(
                    self.event_shape.as_list(), dtype=dtypes.int32, name="event_shape"
                )
            return self._event_shape_tensor()

    def _batch_shape_tensor(self):
        raise _not_implemented("batch_shape_tensor", self)

    def _event_shape_tensor(self):
        raise _not_implemented("event_shape_tensor", self)

    def is_scalar_event(self, name="is_scalar_event"):
        with self._name_scope(name):
            return convert_to_tensor(self.event_shape.ndims == 0, name="is_scalar_event")

    def is_scalar_batch(self, name="is_scalar_batch"):
        with self._name_scope(name):
            return convert_to_tensor(self.batch_shape.ndims == 0, name="is_scalar_batch")

    # -- sampling --------------------------------------------------------------------

    def sample(self, sample_shape=(), seed=None, name="sample"):
        """Draws `sample_shape + batch_shape + event_shape` samples (TF's seeded draws)."""
        with self._name_scope(name, values=[sample_shape]):
            sample_shape = convert_to_tensor(sample_shape, dtype=dtypes.int32, name="sample_shape")
            sample_shape, n = _expand_sample_shape_to_vector(sample_shape, "sample_shape")
            samples = self._sample_n(n, seed)
            batch_event_shape = ops.shape(samples)[1:]
            final_shape = ops.concat([sample_shape, batch_event_shape], 0)
            samples = ops.reshape(samples, final_shape)
            return self._set_sample_static_shape(samples, sample_shape)

    def _sample_n(self, n, seed=None):
        raise _not_implemented("sample_n", self)

    def _set_sample_static_shape(self, x, sample_shape):
        """Gives `x` what is statically known of sample + batch + event shape."""
        value = _constant_value(sample_shape)
        sample = TensorShape(None if value is None else [int(v) for v in value])
        batch, event = self.batch_shape, self.event_shape
        s_nd, b_nd, e_nd = sample.ndims, batch.ndims, event.ndims
        ndims = x.shape.ndims
        if ndims is None and None not in (s_nd, b_nd, e_nd):
            ndims = s_nd + b_nd + e_nd
            x.set_shape([None] * ndims)
        if ndims is None:
            return x
        # A part of unknown rank is deduced from the other two.
        if b_nd is not None and s_nd is None and e_nd is not None:
            s_nd = ndims - b_nd - e_nd
        if b_nd is not None and e_nd is None and s_nd is not None:
            e_nd = ndims - b_nd - s_nd
        known = TensorShape([None] * ndims)
        if sample.ndims is not None:
            known = known.merge_with(sample.concatenate([None] * (ndims - sample.ndims)))
        if e_nd is not None:
            known = known.merge_with(TensorShape([None] * (ndims - e_nd)).concatenate(event))
        if None not in (s_nd, b_nd, e_nd):
            known = known.merge_with(
                TensorShape([None] * s_nd).concatenate(batch).concatenate([None] * e_nd)
            )
        x.set_shape(x.shape.merge_with(known))
        return x

    # -- densities, with TF's fallbacks ----------------------------------------------

    def _value(self, value):
        # As TF, a Python number or list that an integer dtype holds exactly takes it
        # (Categorical's log_prob(1.) is of class 1); any other value keeps its own dtype.
        if (
            self.dtype is not None
            and self.dtype.is_integer
            and isinstance(value, (int, float, list, tuple))
        ):
            try:
                array = np.asarray(value)
                exact = array.dtype != object and np.array_equal(
                    array.astype(self.dtype.as_numpy_dtype), array
                )
            except (TypeError, ValueError, OverflowError):
                exact = False
            if exact:
                return convert_to_tensor(
                    array.astype(self.dtype.as_numpy_dtype), dtype=self.dtype, name="value"
                )
        return convert_to_tensor(value, name="value", preferred_dtype=self.dtype)

    def log_prob(self, value, name="log_prob"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(lambda: self._log_prob(value), lambda: ops.log(self._prob(value)))

    def prob(self, value, name="prob"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(lambda: self._prob(value), lambda: ops.exp(self._log_prob(value)))

    def log_cdf(self, value, name="log_cdf"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(lambda: self._log_cdf(value), lambda: ops.log(self._cdf(value)))

    def cdf(self, value, name="cdf"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(lambda: self._cdf(value), lambda: ops.exp(self._log_cdf(value)))

    def log_survival_function(self, value, name="log_survival_function"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(
                lambda: self._log_survival_function(value),
                lambda: ops.log1p(-self.cdf(value)),
            )

    def survival_function(self, value, name="survival_function"):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            return _either(lambda: self._survival_function(value), lambda: 1.0 - self.cdf(value))

    def quantile(self, value, name="quantile"):
        with self._name_scope(name, values=[value]):
            return self._quantile(self._value(value))

    def _log_prob(self, value):
        raise _not_implemented("log_prob", self)

    def _prob(self, value):
        raise _not_implemented("prob", self)

    def _log_cdf(self, value):
        raise _not_implemented("log_cdf", self)

    def _cdf(self, value):
        raise _not_implemented("cdf", self)

    def _log_survival_function(self, value):
        raise _not_implemented("log_survival_function", self)

    def _survival_function(self, value):
        raise _not_implemented("survival_function", self)

    def _quantile(self, value):
        raise _not_implemented("quantile", self)

    # -- statistics ------------------------------------------------------------------

    def entropy(self, name="entropy"):
        with self._name_scope(name):
            return self._entropy()

    def mean(self, name="mean"):
        with self._name_scope(name):
            return self._mean()

    def mode(self, name="mode"):
        with self._name_scope(name):
            return self._mode()

    def covariance(self, name="covariance"):
        with self._name_scope(name):
            return self._covariance()

    def variance(self, name="variance"):
        with self._name_scope(name):
            return _either(self._variance, lambda: ops.square(self._stddev()))

    def stddev(self, name="stddev"):
        with self._name_scope(name):
            return _either(self._stddev, lambda: ops.sqrt(self._variance()))

    def _entropy(self):
        raise _not_implemented("entropy", self)

    def _mean(self):
        raise _not_implemented("mean", self)

    def _mode(self):
        raise _not_implemented("mode", self)

    def _covariance(self):
        raise _not_implemented("covariance", self)

    def _variance(self):
        raise _not_implemented("variance", self)

    def _stddev(self):
        raise _not_implemented("stddev", self)

    def cross_entropy(self, other, name="cross_entropy"):
        """Entropy of `self` plus KL(self || other), as TF."""
        from asyncflow.distributions import kullback_leibler

        with self._name_scope(name):
            return kullback_leibler.cross_entropy(self, other, self.allow_nan_stats)

    def kl_divergence(self, other, name="kl_divergence"):
        from asyncflow.distributions import kullback_leibler

        with self._name_scope(name):
            return kullback_leibler.kl_divergence(self, other, self.allow_nan_stats)

    # -- helpers ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _name_scope(self, name=None, values=None):
        with name_scope(self.name):
            with name_scope(name, values=values) as scope:
                yield scope

    def __str__(self) -> str:
        batch = "" if self.batch_shape.ndims is None else f"batch_shape={self.batch_shape}, "
        event = "" if self.event_shape.ndims is None else f"event_shape={self.event_shape}, "
        return (
            f'tfp.distributions.{type(self).__name__}("{self.name}", {batch}{event}'
            f"dtype={self.dtype.name})"
        )

    def __repr__(self) -> str:
        return (
            f"<tfp.distributions.{type(self).__name__} '{self.name}' "
            f"batch_shape={self.batch_shape} event_shape={self.event_shape} "
            f"dtype={self.dtype.name}>"
        )


def _either(primary, fallback):
    """`primary()`, else (not implemented) `fallback()`; when neither is, primary's
    NotImplementedError (TF's fallbacks between log_prob and prob, cdf and log_cdf, ...)."""
    try:
        return primary()
    except NotImplementedError as original:
        try:
            return fallback()
        except NotImplementedError:
            raise original from None


def _expand_sample_shape_to_vector(x, name):
    """`x` as a vector, and the number of samples (a Python int when `x` is static)."""
    value = _constant_value(x)
    if value is None:
        product = ops.reduce_prod(x)
    else:
        product = int(np.prod(value, dtype=np.int32))
    ndims = x.shape.ndims
    if ndims is None:
        x = ops.reshape(x, [-1])
    elif ndims == 0:
        if value is not None:
            x = convert_to_tensor(np.array([value], dtype=np.int32), name=name)
        else:
            x = ops.reshape(x, [1])
    elif ndims != 1:
        raise ValueError("Input is neither scalar nor vector.")
    return x, product
