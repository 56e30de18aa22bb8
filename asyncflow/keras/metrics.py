"""`tf.keras.metrics`: Keras' per-sample metric functions, the loss functions under
their metric names, and `MeanMetricWrapper` -- the stateful running mean (total and
count variables) that `Model.compile(metrics=...)` keeps for each metric.
"""

from __future__ import annotations

from asyncflow import dtypes, math_composites
from asyncflow import graph as ops
from asyncflow import resource_variable as _rv
from asyncflow.keras import backend
from asyncflow.keras.losses import (
    binary_crossentropy,
    binary_focal_crossentropy,
    categorical_crossentropy,
    categorical_focal_crossentropy,
    categorical_hinge,
    cosine,
    cosine_proximity,
    cosine_similarity,
    hinge,
    kl_divergence,
    kld,
    kullback_leibler_divergence,
    log_cosh,
    logcosh,
    mae,
    mape,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    mean_squared_logarithmic_error,
    mse,
    msle,
    poisson,
    sparse_categorical_crossentropy,
    squared_hinge,
)
from asyncflow.keras.metrics_more import (
    AUC,
    BinaryIoU,
    F1Score,
    FalseNegatives,
    FalsePositives,
    FBetaScore,
    IoU,
    MeanIoU,
    MeanRelativeError,
    MeanTensor,
    Metric,
    OneHotIoU,
    OneHotMeanIoU,
    Precision,
    PrecisionAtRecall,
    R2Score,
    Recall,
    RecallAtPrecision,
    SensitivityAtSpecificity,
    SpecificityAtSensitivity,
    Sum,
    TrueNegatives,
    TruePositives,
)
from asyncflow.keras.serialization import (
    deserialize_keras_object,
    get_custom_objects,
    serialize_keras_object,
)
from asyncflow.keras.utils import unknown_object
from asyncflow.ops import array_ops, cast_ops, math_ops, nn_impl, reduction_ops

__all__ = [
    "accuracy",
    "binary_accuracy",
    "categorical_accuracy",
    "sparse_categorical_accuracy",
    "top_k_categorical_accuracy",
    "sparse_top_k_categorical_accuracy",
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
    "mean_squared_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error",
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
    "MeanMetricWrapper",
    "Mean",
    "Accuracy",
    "BinaryAccuracy",
    "CategoricalAccuracy",
    "SparseCategoricalAccuracy",
    "TopKCategoricalAccuracy",
    "MeanSquaredError",
    "MeanAbsoluteError",
    "BinaryCrossentropy",
    "CategoricalCrossentropy",
    "Metric",
    "Sum",
    "MeanTensor",
    "MeanRelativeError",
    "R2Score",
    "F1Score",
    "FBetaScore",
    "AUC",
    "Precision",
    "Recall",
    "TruePositives",
    "TrueNegatives",
    "FalsePositives",
    "FalseNegatives",
    "PrecisionAtRecall",
    "RecallAtPrecision",
    "SensitivityAtSpecificity",
    "SpecificityAtSensitivity",
    "IoU",
    "MeanIoU",
    "BinaryIoU",
    "OneHotIoU",
    "OneHotMeanIoU",
    "RootMeanSquaredError",
    "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError",
    "CosineSimilarity",
    "LogCoshError",
    "KLDivergence",
    "Poisson",
    "Hinge",
    "SquaredHinge",
    "CategoricalHinge",
    "SparseCategoricalCrossentropy",
    "SparseTopKCategoricalAccuracy",
    "categorical_hinge",
    "cosine_similarity",
    "MSE",
    "MAE",
    "MAPE",
    "MSLE",
    "KLD",
    "binary_focal_crossentropy",
    "categorical_focal_crossentropy",
    "cosine",
    "cosine_proximity",
    "kl_divergence",
    "log_cosh",
    "get",
    "serialize",
    "deserialize",
]


def _floatx(x):
    return cast_ops.cast(x, backend.floatx())


def accuracy(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred)
    if y_true.dtype != y_pred.dtype:
        y_pred = cast_ops.cast(y_pred, y_true.dtype)
    return _floatx(math_ops.equal(y_true, y_pred))


def binary_accuracy(y_true, y_pred, threshold=0.5):
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = cast_ops.cast(y_true, y_pred.dtype)
    y_pred = cast_ops.cast(y_pred > threshold, y_pred.dtype)
    return reduction_ops.reduce_mean(_floatx(math_ops.equal(y_true, y_pred)), axis=-1)


def categorical_accuracy(y_true, y_pred):
    return _floatx(
        math_ops.equal(
            reduction_ops.argmax(y_true, axis=-1), reduction_ops.argmax(y_pred, axis=-1)
        )
    )


def sparse_categorical_accuracy(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = ops.convert_to_tensor(y_true)
    y_true_rank, y_pred_rank = y_true.shape.ndims, y_pred.shape.ndims
    if y_true_rank is not None and y_pred_rank is not None and y_true_rank == y_pred_rank:
        y_true = array_ops.squeeze(y_true, [-1])
    y_pred = reduction_ops.argmax(y_pred, axis=-1)
    if y_pred.dtype != y_true.dtype:
        y_pred = cast_ops.cast(y_pred, y_true.dtype)
    return _floatx(math_ops.equal(y_true, y_pred))


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    return sparse_top_k_categorical_accuracy(reduction_ops.argmax(y_true, axis=-1), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    y_true = ops.convert_to_tensor(y_true)
    if y_true.shape.ndims is not None and y_true.shape.ndims > 1:
        y_true = array_ops.reshape(y_true, [-1])
    return _floatx(nn_impl.in_top_k(y_pred, cast_ops.cast(y_true, dtypes.int32), k))


class MeanMetricWrapper:
    """The running mean of `fn(y_true, y_pred)` over every sample seen since the last
    reset (variables `total` and `count`, not in any collection)."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        self._fn, self._fn_kwargs = fn, kwargs
        self.name = name or fn.__name__
        self.dtype = dtypes.as_dtype(dtype or backend.floatx())
        self.total = _rv.ResourceVariable(
            0.0, name="total", dtype=self.dtype, trainable=False, collections=[]
        )
        self.count = _rv.ResourceVariable(
            0.0, name="count", dtype=self.dtype, trainable=False, collections=[]
        )
        self.variables = [self.total, self.count]
        for v in self.variables:
            backend.track_variable(v)

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = cast_ops.cast(self._fn(y_true, y_pred, **self._fn_kwargs), self.dtype)
        if sample_weight is not None:
            sample_weight = cast_ops.cast(sample_weight, self.dtype)
            values = values * sample_weight
            num = reduction_ops.reduce_sum(sample_weight * array_ops.ones_like(values))
        else:
            num = cast_ops.cast(array_ops.size(values), self.dtype)
        update_total = self.total.assign_add(reduction_ops.reduce_sum(values))
        with ops.control_dependencies([update_total]):
            return self.count.assign_add(num)

    def update_batch_mean(self, value):
        """Add one scalar `value` (one batch) to the running mean; the new mean."""
        update_total = self.total.assign_add(cast_ops.cast(value, self.dtype))
        with ops.control_dependencies([update_total]):
            update = self.count.assign_add(1.0)
        with ops.control_dependencies([update]):
            return array_ops.identity(self.result())

    def result(self):
        return math_composites.div_no_nan(self.total.read_value(), self.count.read_value())

    def __call__(self, y_true, y_pred, sample_weight=None):
        update = self.update_state(y_true, y_pred, sample_weight)
        with ops.control_dependencies([update]):
            return array_ops.identity(self.result())

    def reset_ops(self) -> list:
        return [v.initializer for v in self.variables]

    def reset_states(self) -> None:
        """Zero the running mean (in Keras' session)."""
        backend.get_session().run(self.reset_ops())

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype.name, **self._fn_kwargs}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if cls is MeanMetricWrapper:
            return cls(get(config.pop("fn")), **config)
        return cls(**config)


class Mean(MeanMetricWrapper):
    """The running (weighted) mean of the values given to `update_state`."""

    def __init__(self, name="mean", dtype=None):
        super().__init__(lambda _, values: values, name=name, dtype=dtype)

    def update_state(self, values, sample_weight=None):
        values = cast_ops.cast(values, self.dtype)
        return MeanMetricWrapper.update_state(self, None, values, sample_weight)

    def __call__(self, values, sample_weight=None):
        update = self.update_state(values, sample_weight)
        with ops.control_dependencies([update]):
            return array_ops.identity(self.result())


def _wrapper_class(cls_name, fn, default_name, **defaults):
    def __init__(self, name=default_name, dtype=None, **kwargs):
        MeanMetricWrapper.__init__(self, fn, name=name, dtype=dtype, **{**defaults, **kwargs})

    doc = f"The running mean of `{fn.__name__}` (a stateful metric)."
    return type(cls_name, (MeanMetricWrapper,), {"__init__": __init__, "__doc__": doc})


Accuracy = _wrapper_class("Accuracy", accuracy, "accuracy")
BinaryAccuracy = _wrapper_class("BinaryAccuracy", binary_accuracy, "binary_accuracy",
                                threshold=0.5)  # fmt: skip
CategoricalAccuracy = _wrapper_class("CategoricalAccuracy", categorical_accuracy,
                                     "categorical_accuracy")  # fmt: skip
SparseCategoricalAccuracy = _wrapper_class(
    "SparseCategoricalAccuracy", sparse_categorical_accuracy, "sparse_categorical_accuracy"
)
TopKCategoricalAccuracy = _wrapper_class("TopKCategoricalAccuracy", top_k_categorical_accuracy,
                                         "top_k_categorical_accuracy", k=5)  # fmt: skip
MeanSquaredError = _wrapper_class("MeanSquaredError", mean_squared_error, "mean_squared_error")
MeanAbsoluteError = _wrapper_class("MeanAbsoluteError", mean_absolute_error,
                                   "mean_absolute_error")  # fmt: skip
BinaryCrossentropy = _wrapper_class("BinaryCrossentropy", binary_crossentropy,
                                    "binary_crossentropy")  # fmt: skip
CategoricalCrossentropy = _wrapper_class("CategoricalCrossentropy", categorical_crossentropy,
                                         "categorical_crossentropy")  # fmt: skip


# `Model.compile` takes any Metric; the running-mean metrics predate that base class.
Metric.register(MeanMetricWrapper)


def _cosine(y_true, y_pred, axis=-1):
    # The metric reports the similarity itself; the loss of that name, its negative.
    return -cosine_similarity(y_true, y_pred, axis=axis)


_cosine.__name__ = "cosine_similarity"



class RootMeanSquaredError(MeanMetricWrapper):
    """The square root of the running (weighted) mean squared error."""

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(mean_squared_error, name=name, dtype=dtype)

    def result(self):
        return math_ops.sqrt(super().result())


MeanAbsolutePercentageError = _wrapper_class("MeanAbsolutePercentageError",
    mean_absolute_percentage_error, "mean_absolute_percentage_error")  # fmt: skip
MeanSquaredLogarithmicError = _wrapper_class("MeanSquaredLogarithmicError",
    mean_squared_logarithmic_error, "mean_squared_logarithmic_error")  # fmt: skip
CosineSimilarity = _wrapper_class("CosineSimilarity", _cosine, "cosine_similarity", axis=-1)
LogCoshError = _wrapper_class("LogCoshError", logcosh, "logcosh")
KLDivergence = _wrapper_class("KLDivergence", kullback_leibler_divergence,
                              "kullback_leibler_divergence")  # fmt: skip
Poisson = _wrapper_class("Poisson", poisson, "poisson")
Hinge = _wrapper_class("Hinge", hinge, "hinge")
SquaredHinge = _wrapper_class("SquaredHinge", squared_hinge, "squared_hinge")
CategoricalHinge = _wrapper_class("CategoricalHinge", categorical_hinge, "categorical_hinge")


class SparseCategoricalCrossentropy(MeanMetricWrapper):
    """The running mean crossentropy against integer labels, leaving out the samples
    labelled `ignore_class`."""

    def __init__(self, name="sparse_categorical_crossentropy", dtype=None, from_logits=False,
                 ignore_class=None, axis=-1):  # fmt: skip
        super().__init__(
            sparse_categorical_crossentropy, name=name, dtype=dtype,
            from_logits=from_logits, ignore_class=ignore_class, axis=axis,
        )  # fmt: skip

    def update_state(self, y_true, y_pred, sample_weight=None):
        ignore_class = self._fn_kwargs["ignore_class"]
        if ignore_class is not None:
            y_true = ops.convert_to_tensor(y_true)
            valid = math_ops.not_equal(y_true, cast_ops.cast(ignore_class, y_true.dtype))
            valid = cast_ops.cast(valid, self.dtype)
            if y_true.shape.ndims is not None and y_true.shape.ndims > 1:
                valid = array_ops.squeeze(valid, [-1])
            sample_weight = valid if sample_weight is None else (
                valid * cast_ops.cast(sample_weight, self.dtype))  # fmt: skip
        return super().update_state(y_true, y_pred, sample_weight)

SparseTopKCategoricalAccuracy = _wrapper_class("SparseTopKCategoricalAccuracy",
    sparse_top_k_categorical_accuracy, "sparse_top_k_categorical_accuracy", k=5)  # fmt: skip
MSE, MAE, MAPE, MSLE, KLD = mse, mae, mape, msle, kld


_BY_NAME = {
    f.__name__: f
    for f in (
        accuracy,
        binary_accuracy,
        categorical_accuracy,
        sparse_categorical_accuracy,
        top_k_categorical_accuracy,
        sparse_top_k_categorical_accuracy,
        binary_crossentropy,
        categorical_crossentropy,
        sparse_categorical_crossentropy,
        mean_squared_error,
        mean_absolute_error,
        mean_absolute_percentage_error,
        mean_squared_logarithmic_error,
        hinge,
        squared_hinge,
        kullback_leibler_divergence,
        poisson,
        logcosh,
        categorical_hinge,
    )
}
_BY_NAME.update(kullback_leibler_divergence=kullback_leibler_divergence, logcosh=logcosh,
                cosine_similarity=_cosine, cosine_proximity=_cosine)  # fmt: skip
_BY_NAME.update(acc=accuracy, mse=mse, mae=mae, mape=mape, msle=msle, kld=kld, MSE=mse, MAE=mae,
                MAPE=mape, MSLE=msle, KLD=kld)  # fmt: skip


def class_instance(identifier):
    """A new metric object when `identifier` names one of Keras' metric classes
    ('AUC', 'MeanSquaredError', ...), else None."""
    cls = _CLASSES.get(identifier) if isinstance(identifier, str) else None
    if isinstance(cls, type) and cls not in (Metric, MeanMetricWrapper):
        return cls()
    return None


def get(identifier):
    """A metric function from a name, a config dict, or a callable (a metric class's
    name gives a new instance of it).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier in get_custom_objects():
            return get_custom_objects()[identifier]
        if identifier not in _BY_NAME:
            instance = class_instance(identifier)
            if instance is None:
                raise unknown_object("metric function", identifier)
            return instance
        return _BY_NAME[identifier]
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret metric identifier: {identifier}")


_CLASSES = {
    c.__name__: c
    for c in (MeanMetricWrapper, Mean, Accuracy, BinaryAccuracy, CategoricalAccuracy,
              SparseCategoricalAccuracy, TopKCategoricalAccuracy, MeanSquaredError,
              MeanAbsoluteError, BinaryCrossentropy, CategoricalCrossentropy, Metric, AUC,
              Precision, Recall, TruePositives, TrueNegatives, FalsePositives,
              FalseNegatives, PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity,
              SpecificityAtSensitivity, IoU, MeanIoU, BinaryIoU, OneHotIoU, OneHotMeanIoU,
              RootMeanSquaredError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError,
              CosineSimilarity, LogCoshError, KLDivergence, Poisson, Hinge, SquaredHinge,
              CategoricalHinge, SparseCategoricalCrossentropy, SparseTopKCategoricalAccuracy,
              Sum, MeanTensor, MeanRelativeError, R2Score, F1Score, FBetaScore)
}  # fmt: skip
_CLASSES.update(_BY_NAME)


def serialize(metric, use_legacy_format=False):
    """A metric function's name, or `{"class_name": ..., "config": ...}` of a metric."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(metric)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The metric a serialized name or config describes.

    Raises:
      ValueError: an unknown name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(config, _CLASSES, custom_objects, "metric function")
