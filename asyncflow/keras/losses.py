"""`tf.keras.losses`: Keras' per-sample loss functions (mean over the last axis) and the
Loss classes that reduce them (SUM_OVER_BATCH_SIZE: sum / number of elements).

Cross-entropies on probabilities clip to [epsilon, 1 - epsilon] as Keras' backend does;
on a plain graph tensor made by a Softmax/Sigmoid op (not a Keras layer output) they
use the op's logits instead, which is Keras' graph-mode shortcut.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import math_composites
from asyncflow.keras import backend_config as backend
from asyncflow.keras import backend_math
from asyncflow.keras.losses_more import (
    binary_focal_crossentropy,
    categorical_focal_crossentropy,
    categorical_hinge,
    cosine_similarity,
    huber,
)
from asyncflow.keras.serialization import (
    deserialize_keras_object,
    get_custom_objects,
    serialize_keras_object,
)
from asyncflow.keras.utils import unknown_object
from asyncflow.ops import (
    array_ops,
    cast_ops,
    math_ops,
    nn_ops,
    reduction_ops,
)

__all__ = [
    "mean_squared_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error",
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
    "hinge",
    "squared_hinge",
    "kullback_leibler_divergence",
    "poisson",
    "logcosh",
    "mse",
    "mae",
    "mape",
    "msle",
    "kld",
    "MSE",
    "MAE",
    "MAPE",
    "MSLE",
    "KLD",
    "Loss",
    "MeanSquaredError",
    "MeanAbsoluteError",
    "BinaryCrossentropy",
    "CategoricalCrossentropy",
    "SparseCategoricalCrossentropy",
    "Reduction",
    "kl_divergence",
    "log_cosh",
    "cosine",
    "cosine_proximity",
    "categorical_hinge",
    "cosine_similarity",
    "huber",
    "binary_focal_crossentropy",
    "categorical_focal_crossentropy",
    "CategoricalHinge",
    "CosineSimilarity",
    "Huber",
    "BinaryFocalCrossentropy",
    "CategoricalFocalCrossentropy",
    "Hinge",
    "SquaredHinge",
    "KLDivergence",
    "LogCosh",
    "Poisson",
    "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError",
    "get",
    "serialize",
    "deserialize",
]


def _pair(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = cast_ops.cast(y_true, y_pred.dtype)
    return y_true, y_pred


def _mean(x, axis=-1):
    return reduction_ops.reduce_mean(x, axis=axis)


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return _mean(math_ops.squared_difference(y_pred, y_true))


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return _mean(math_ops.abs(y_pred - y_true))


def mean_absolute_percentage_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    diff = math_ops.abs(
        (y_true - y_pred) / math_ops.maximum(math_ops.abs(y_true), backend.epsilon())
    )
    return 100.0 * _mean(diff)


def mean_squared_logarithmic_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    first = math_ops.log(math_ops.maximum(y_pred, backend.epsilon()) + 1.0)
    second = math_ops.log(math_ops.maximum(y_true, backend.epsilon()) + 1.0)
    return _mean(math_ops.squared_difference(first, second))


backend_binary_crossentropy = backend_math.binary_crossentropy
backend_categorical_crossentropy = backend_math.categorical_crossentropy
backend_sparse_categorical_crossentropy = backend_math.sparse_categorical_crossentropy


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return _mean(backend_binary_crossentropy(y_true, y_pred, from_logits), axis=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        classes = cast_ops.cast(array_ops.shape(y_true)[-1], y_pred.dtype)
        y_true = y_true * (1.0 - label_smoothing) + (label_smoothing / classes)
    return backend_categorical_crossentropy(y_true, y_pred, from_logits, axis=axis)


def _valid_labels(y_true, ignore_class):
    y_true = ops.convert_to_tensor(y_true)
    return math_ops.not_equal(y_true, cast_ops.cast(ignore_class, y_true.dtype))


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1,
                                    ignore_class=None):  # fmt: skip
    """Per-sample crossentropy against integer labels; labels equal to `ignore_class`
    get a loss of 0 (and `SparseCategoricalCrossentropy` leaves them out of its mean)."""
    if ignore_class is None:
        return backend_sparse_categorical_crossentropy(y_true, y_pred, from_logits, axis=axis)
    y_true = ops.convert_to_tensor(y_true)
    valid = _valid_labels(y_true, ignore_class)
    safe = math_composites.where_v2(valid, y_true, array_ops.zeros_like(y_true))
    loss = backend_sparse_categorical_crossentropy(safe, y_pred, from_logits, axis=axis)
    valid = array_ops.reshape(valid, array_ops.shape(loss))
    return math_composites.where_v2(valid, loss, array_ops.zeros_like(loss))


def _signed_labels(y_true):
    # Keras' hinge losses read 0/1 labels as -1/1 (when every label is 0 or 1).
    binary = reduction_ops.reduce_all(
        math_ops.logical_or(math_ops.equal(y_true, 0.0), math_ops.equal(y_true, 1.0))
    )
    return math_composites.where_v2(binary, 2.0 * y_true - 1.0, y_true)


def hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = _signed_labels(y_true)
    return _mean(math_ops.maximum(1.0 - y_true * y_pred, 0.0))


def squared_hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = _signed_labels(y_true)
    return _mean(math_ops.square(math_ops.maximum(1.0 - y_true * y_pred, 0.0)))


def kullback_leibler_divergence(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = _clip_01(y_true)
    y_pred = _clip_01(y_pred)
    return reduction_ops.reduce_sum(y_true * math_ops.log(y_true / y_pred), axis=-1)


def _clip_01(x):
    return math_ops.minimum(math_ops.maximum(x, backend.epsilon()), 1.0)


def poisson(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return _mean(y_pred - y_true * math_ops.log(y_pred + backend.epsilon()))


def logcosh(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    x = y_pred - y_true
    return _mean(x + nn_ops.softplus(-2.0 * x) - math_ops.cast(math_ops.log(2.0), x.dtype))


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kl_divergence = kullback_leibler_divergence
log_cosh = logcosh
# TF 2.21 names these functions (in configs, serialization and compile's metric names).
kullback_leibler_divergence.__name__ = "kl_divergence"
logcosh.__name__ = "log_cosh"
cosine = cosine_proximity = cosine_similarity


class Reduction:
    """How a Loss reduces per-sample losses."""

    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    AUTO = "auto"


def reduce_weighted(losses, sample_weight=None, reduction=Reduction.SUM_OVER_BATCH_SIZE):
    """Keras' weighted reduction: sum(losses * weights), divided by the number of
    elements for SUM_OVER_BATCH_SIZE (and AUTO)."""
    losses = ops.convert_to_tensor(losses)
    if sample_weight is not None:
        sample_weight = cast_ops.cast(sample_weight, losses.dtype)
        # Per-sample weights of per-step losses (a sequence output): one weight a row.
        extra = (losses.shape.ndims or 0) - (sample_weight.shape.ndims or 0)
        if sample_weight.shape.ndims is not None and extra > 0:
            for _ in range(extra):
                sample_weight = array_ops.expand_dims(sample_weight, -1)
        losses = losses * sample_weight
    if reduction == Reduction.NONE:
        return losses
    total = reduction_ops.reduce_sum(losses)
    if reduction == Reduction.SUM:
        return total
    count = cast_ops.cast(array_ops.size(losses), losses.dtype)
    return math_composites.div_no_nan(total, count)


class Loss:
    """Base class: `call(y_true, y_pred)` per sample, reduced by `__call__`."""

    def __init__(self, reduction=Reduction.AUTO, name=None):
        self.reduction, self.name = reduction, name

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        with ops.name_scope(self.name or type(self).__name__.lower()):
            return reduce_weighted(self.call(y_true, y_pred), sample_weight, self.reduction)

    def get_config(self) -> dict:
        return {"reduction": self.reduction, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class LossFunctionWrapper(Loss):
    """A Loss around a per-sample function `fn` (with fixed keyword arguments)."""

    def __init__(self, fn, reduction=Reduction.AUTO, name=None, **kwargs):
        super().__init__(reduction=reduction, name=name)
        self.fn, self._fn_kwargs = fn, kwargs

    def call(self, y_true, y_pred):
        return self.fn(y_true, y_pred, **self._fn_kwargs)

    def get_config(self) -> dict:
        fn_name = self._fn_name or self.fn.__name__
        return {**super().get_config(), "fn": fn_name, **self._fn_kwargs,
                **type(self)._fixed_config}  # fmt: skip

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        fn = get(config.pop("fn", None))
        for key, value in cls._fixed_config.items():
            if config.pop(key, value) != value:
                raise ValueError(f"{cls.__name__}: {key} is not supported")
        if cls is LossFunctionWrapper:
            return cls(fn, **config)
        return cls(**config)

    # Keys TF writes for options asyncflow lacks, at the only value it supports.
    _fixed_config: dict = {}
    # The function's name in TF's config where it differs from asyncflow's function.
    _fn_name = None


def _loss_class(cls_name, fn, default_name, fixed=None, **defaults):
    def __init__(self, reduction=Reduction.AUTO, name=default_name, **kwargs):
        LossFunctionWrapper.__init__(
            self, fn, reduction=reduction, name=name, **{**defaults, **kwargs}
        )

    doc = f"Keras' `{cls_name}` loss (see `{fn.__name__}`)."
    attrs = {"__init__": __init__, "__doc__": doc, "_fixed_config": fixed or {}}
    return type(cls_name, (LossFunctionWrapper,), attrs)


MeanSquaredError = _loss_class("MeanSquaredError", mean_squared_error, "mean_squared_error")
MeanAbsoluteError = _loss_class("MeanAbsoluteError", mean_absolute_error, "mean_absolute_error")
# (label_smoothing and axis at their defaults are passed so that configs show them, as TF's do)
BinaryCrossentropy = _loss_class(
    "BinaryCrossentropy", binary_crossentropy, "binary_crossentropy", from_logits=False,
    label_smoothing=0.0, axis=-1,
)  # fmt: skip
CategoricalCrossentropy = _loss_class(
    "CategoricalCrossentropy", categorical_crossentropy, "categorical_crossentropy",
    from_logits=False, label_smoothing=0.0, axis=-1,
)  # fmt: skip


class SparseCategoricalCrossentropy(LossFunctionWrapper):
    """Keras' `SparseCategoricalCrossentropy` loss; with `ignore_class`, those labels
    count neither in the sum nor in the SUM_OVER_BATCH_SIZE divisor."""

    def __init__(self, from_logits=False, ignore_class=None, reduction=Reduction.AUTO,
                 name="sparse_categorical_crossentropy"):  # fmt: skip
        super().__init__(sparse_categorical_crossentropy, reduction=reduction, name=name,
                         from_logits=from_logits, ignore_class=ignore_class)  # fmt: skip

    def __call__(self, y_true, y_pred, sample_weight=None):
        ignore_class = self._fn_kwargs["ignore_class"]
        if ignore_class is None:
            return super().__call__(y_true, y_pred, sample_weight)
        with ops.name_scope(self.name or type(self).__name__.lower()):
            losses = self.call(y_true, y_pred)
            valid = _valid_labels(y_true, ignore_class)
            valid = cast_ops.cast(array_ops.reshape(valid, array_ops.shape(losses)), losses.dtype)
            weights = valid
            if sample_weight is not None:
                weights = valid * cast_ops.cast(sample_weight, losses.dtype)
            if self.reduction == Reduction.NONE:
                return losses * weights
            total = reduction_ops.reduce_sum(losses * weights)
            if self.reduction == Reduction.SUM:
                return total
            return math_composites.div_no_nan(total, reduction_ops.reduce_sum(valid))


# (the options at their defaults are passed so that configs show them, as TF's do)
CategoricalHinge = _loss_class("CategoricalHinge", categorical_hinge, "categorical_hinge")
CosineSimilarity = _loss_class("CosineSimilarity", cosine_similarity, "cosine_similarity", axis=-1)
Huber = _loss_class("Huber", huber, "huber_loss", delta=1.0)
BinaryFocalCrossentropy = _loss_class(
    "BinaryFocalCrossentropy", binary_focal_crossentropy, "binary_focal_crossentropy",
    apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
    label_smoothing=0.0, axis=-1,
)  # fmt: skip
CategoricalFocalCrossentropy = _loss_class(
    "CategoricalFocalCrossentropy", categorical_focal_crossentropy,
    "categorical_focal_crossentropy", alpha=0.25, gamma=2.0, from_logits=False,
    label_smoothing=0.0, axis=-1,
)  # fmt: skip
Hinge = _loss_class("Hinge", hinge, "hinge")
SquaredHinge = _loss_class("SquaredHinge", squared_hinge, "squared_hinge")
KLDivergence = _loss_class("KLDivergence", kullback_leibler_divergence, "kl_divergence")
KLDivergence._fn_name = "kl_divergence"
LogCosh = _loss_class("LogCosh", logcosh, "log_cosh")
LogCosh._fn_name = "log_cosh"
Poisson = _loss_class("Poisson", poisson, "poisson")
MeanAbsolutePercentageError = _loss_class(
    "MeanAbsolutePercentageError", mean_absolute_percentage_error,
    "mean_absolute_percentage_error",
)  # fmt: skip
MeanSquaredLogarithmicError = _loss_class(
    "MeanSquaredLogarithmicError", mean_squared_logarithmic_error,
    "mean_squared_logarithmic_error",
)  # fmt: skip
_MORE_CLASSES = (CategoricalHinge, CosineSimilarity, Huber, BinaryFocalCrossentropy,
                 CategoricalFocalCrossentropy, Hinge, SquaredHinge, KLDivergence, LogCosh,
                 Poisson, MeanAbsolutePercentageError, MeanSquaredLogarithmicError)  # fmt: skip

_BY_NAME = {
    f.__name__: f
    for f in (
        mean_squared_error,
        mean_absolute_error,
        mean_absolute_percentage_error,
        mean_squared_logarithmic_error,
        binary_crossentropy,
        categorical_crossentropy,
        sparse_categorical_crossentropy,
        hinge,
        squared_hinge,
        kullback_leibler_divergence,
        poisson,
        logcosh,
        categorical_hinge,
        cosine_similarity,
        huber,
        binary_focal_crossentropy,
        categorical_focal_crossentropy,
    )
}
_BY_NAME.update(
    kullback_leibler_divergence=kullback_leibler_divergence,
    logcosh=logcosh,
    mse=mse,
    mae=mae,
    mape=mape,
    msle=msle,
    kld=kld,
    kl_divergence=kld,
    log_cosh=logcosh,
    MSE=mse,
    MAE=mae,
    MAPE=mape,
    MSLE=msle,
    KLD=kld,
)


def get(identifier):
    """A loss function from a name ('mse', 'categorical_crossentropy', ...), a config
    dict, or a callable.

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier in get_custom_objects():
            return get_custom_objects()[identifier]
        if identifier not in _BY_NAME:
            raise unknown_object("loss function", identifier)
        return _BY_NAME[identifier]
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret loss function identifier: {identifier}")


_CLASSES = {
    c.__name__: c
    for c in (Loss, LossFunctionWrapper, MeanSquaredError, MeanAbsoluteError,
              BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy)
}  # fmt: skip
_CLASSES.update((c.__name__, c) for c in _MORE_CLASSES)
_CLASSES.update(_BY_NAME)


def serialize(loss, use_legacy_format=False):
    """A loss function's name, or `{"class_name": ..., "config": ...}` of a Loss."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(loss)


def deserialize(name, custom_objects=None, use_legacy_format=False):
    """The loss a serialized name or config describes.

    Raises:
      ValueError: an unknown name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(name, _CLASSES, custom_objects, "loss function")
