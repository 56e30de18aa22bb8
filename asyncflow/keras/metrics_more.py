"""More of `tf.keras.metrics`: the `Metric` base class, the confusion-matrix metrics
(TruePositives ... AUC, PrecisionAtRecall and kin), the IoU family, `Sum` and
`MeanTensor`, and running-mean metric classes for more per-sample functions.

A metric keeps its state in non-trainable resource variables (in no collection, so
`global_variables_initializer` leaves them alone, as Keras' do); `update_state` returns
the op that folds one batch in, `result` the tensor reading the state.
"""

from __future__ import annotations

import abc

import numpy as np

from asyncflow import dtypes, math_composites
from asyncflow import graph as ops
from asyncflow import metrics as tf_metrics
from asyncflow import resource_variable as _rv
from asyncflow.keras import backend
from asyncflow.keras.engine import _snake_case
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_ordering,
    linalg_matrix_ops,
    math_ops,
    nn_impl,
    partition_ops,
    reduction_ops,
    slicing_ops,
    special_math_ops,
)

_EPSILON = 1e-7


class Metric(abc.ABC):
    """Base of Keras' stateful metrics: subclasses make their state with `add_weight`
    and define `update_state(...)` (returning an op) and `result()`."""

    def __init__(self, name=None, dtype=None, **kwargs):
        if kwargs:
            raise TypeError(f"Keyword argument not understood: {sorted(kwargs)[0]}")
        self.name = name or backend.unique_object_name(_snake_case(type(self).__name__))
        self.dtype = dtypes.as_dtype(dtype or backend.floatx())
        self._variables: list = []

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables

    def add_weight(self, name, shape=(), dtype=None, initializer="zeros"):
        """A zero-filled state variable (Keras metrics only use 'zeros')."""
        if initializer != "zeros":
            raise ValueError(f"Metric.add_weight: unsupported initializer {initializer!r}")
        dtype = dtypes.as_dtype(dtype or self.dtype)
        v = _rv.ResourceVariable(
            np.zeros(tuple(shape), dtype.as_numpy_dtype),
            name=name,
            dtype=dtype,
            trainable=False,
            collections=[],
        )
        backend.track_variable(v)
        self._variables.append(v)
        return v

    @abc.abstractmethod
    def update_state(self, *args, **kwargs):
        """The op accumulating one batch into the state."""

    @abc.abstractmethod
    def result(self):
        """The metric's value from the state."""

    def __call__(self, *args, **kwargs):
        update = self.update_state(*args, **kwargs)
        with ops.control_dependencies([update]):
            return array_ops.identity(self.result())

    def reset_ops(self) -> list:
        return [v.initializer for v in self._variables]

    def reset_state(self) -> None:
        """Zero the state (in Keras' session)."""
        backend.get_session().run(self.reset_ops())

    reset_states = reset_state

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _as_float(x, dtype):
    return cast_ops.cast(ops.convert_to_tensor(x), dtype)


def _flat_weights(sample_weight, like, dtype):
    """`sample_weight` broadcast to `like` and flattened to [N, 1] (None stays None); a
    weight of one rank less than `like` gets a trailing axis first, as Keras aligns them."""
    if sample_weight is None:
        return None
    w = _as_float(sample_weight, dtype)
    if w.shape.ndims is not None and like.shape.ndims is not None:
        if w.shape.ndims == like.shape.ndims - 1:
            w = array_ops.expand_dims(w, -1)
    w = w * array_ops.ones_like(like)
    return array_ops.reshape(w, [-1, 1])


def _filter_top_k(x, k):
    """`x` with all but the `k` largest entries of its last axis set to -inf."""
    _, idx = nn_impl.top_k(x, k, sorted=False)
    depth = x.shape.as_list()[-1]
    mask = reduction_ops.reduce_sum(slicing_ops.one_hot(idx, depth, dtype=x.dtype), axis=-2)
    neg_inf = array_ops.fill(array_ops.shape(x), np.float32(-np.inf))
    return math_composites.where_v2(mask > 0, x, cast_ops.cast(neg_inf, x.dtype))


_KINDS = ("tp", "tn", "fp", "fn")


def _confusion_updates(
    variables,
    y_true,
    y_pred,
    thresholds,
    dtype,
    top_k=None,
    class_id=None,
    sample_weight=None,
    multi_label=False,
    label_weights=None,
):
    """Assign-adds to `variables` ({kind: var}) the weighted counts, per threshold, of
    predictions strictly above it against the boolean labels (per threshold and label,
    the last axis, with multi_label); `label_weights` scale each label's counts."""
    y_pred = _as_float(y_pred, dtype)
    y_true = ops.convert_to_tensor(y_true)
    if top_k is not None:
        y_pred = _filter_top_k(y_pred, top_k)
    if class_id is not None:
        y_pred = y_pred[..., class_id]
        y_true = y_true[..., class_id]
        if sample_weight is not None:
            sw = ops.convert_to_tensor(sample_weight)
            if sw.shape.ndims is not None and sw.shape.ndims > 1:
                sample_weight = sw[..., class_id]
    if multi_label:
        return _multi_label_updates(
            variables, y_true, y_pred, thresholds, dtype, sample_weight, label_weights
        )
    label = array_ops.reshape(cast_ops.cast(y_true, dtypes.bool), [-1, 1])
    pred = array_ops.reshape(y_pred, [-1, 1])
    thr = array_ops.constant(np.asarray(thresholds, dtype.as_numpy_dtype).reshape(1, -1))
    above = math_ops.greater(pred, thr)
    weights = _flat_weights(sample_weight, y_pred, dtype)
    if label_weights is not None:
        lw = array_ops.ones_like(y_pred) * array_ops.constant(
            np.asarray(label_weights, dtype.as_numpy_dtype)
        )
        lw = array_ops.reshape(lw, [-1, 1])
        weights = lw if weights is None else weights * lw
    conds = {
        "tp": (label, above),
        "fp": (math_ops.logical_not(label), above),
        "fn": (label, math_ops.logical_not(above)),
        "tn": (math_ops.logical_not(label), math_ops.logical_not(above)),
    }
    updates = []
    for kind, var in variables.items():
        a, b = conds[kind]
        hits = cast_ops.cast(math_ops.logical_and(a, b), dtype)
        if weights is not None:
            hits = hits * weights
        updates.append(var.assign_add(reduction_ops.reduce_sum(hits, axis=0)))
    return control_flow_ordering.group(*updates) if len(updates) > 1 else updates[0]


def _multi_label_updates(
    variables, y_true, y_pred, thresholds, dtype, sample_weight, label_weights
):
    # Counts of shape (thresholds, labels): samples are every axis but the last.
    num_labels = y_pred.shape.as_list()[-1]
    label = array_ops.reshape(cast_ops.cast(y_true, dtypes.bool), [1, -1, num_labels])
    pred = array_ops.reshape(y_pred, [1, -1, num_labels])
    thr = array_ops.constant(np.asarray(thresholds, dtype.as_numpy_dtype).reshape(-1, 1, 1))
    above = math_ops.greater(pred, thr)
    weights = None
    if sample_weight is not None:
        w = _as_float(sample_weight, dtype)
        if w.shape.ndims is not None and w.shape.ndims == y_pred.shape.ndims - 1:
            w = array_ops.expand_dims(w, -1)
        weights = array_ops.reshape(w * array_ops.ones_like(y_pred), [1, -1, num_labels])
    if label_weights is not None:
        lw = array_ops.constant(np.asarray(label_weights, dtype.as_numpy_dtype))
        weights = lw if weights is None else weights * lw
    not_label, not_above = math_ops.logical_not(label), math_ops.logical_not(above)
    conds = {
        "tp": (label, above),
        "fp": (not_label, above),
        "fn": (label, not_above),
        "tn": (not_label, not_above),
    }
    updates = []
    for kind, var in variables.items():
        a, b = conds[kind]
        hits = cast_ops.cast(math_ops.logical_and(a, b), dtype)
        if weights is not None:
            hits = hits * weights
        updates.append(var.assign_add(reduction_ops.reduce_sum(hits, axis=1)))
    return control_flow_ordering.group(*updates)


def _parse_thresholds(thresholds, default=0.5):
    if thresholds is None:
        return [default]
    if isinstance(thresholds, (list, tuple)):
        values = list(thresholds)
    else:
        values = [thresholds]
    for t in values:
        if t is None or not 0 <= t <= 1:
            raise ValueError(f"Threshold values must be in [0, 1]. Received: {thresholds}")
    return values


def _scalar_if_one(x, thresholds):
    return x[0] if len(thresholds) == 1 else x


class _ConfusionCount(Metric):
    _KIND = "tp"

    def __init__(self, thresholds=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.init_thresholds = thresholds
        self.thresholds = _parse_thresholds(thresholds)
        self.accumulator = self.add_weight("accumulator", shape=(len(self.thresholds),))

    def update_state(self, y_true, y_pred, sample_weight=None):
        return _confusion_updates(
            {self._KIND: self.accumulator},
            y_true,
            y_pred,
            self.thresholds,
            self.dtype,
            sample_weight=sample_weight,
        )

    def result(self):
        return array_ops.identity(_scalar_if_one(self.accumulator.read_value(), self.thresholds))

    def get_config(self) -> dict:
        return {**super().get_config(), "thresholds": self.init_thresholds}


class TruePositives(_ConfusionCount):
    """The (weighted) count of positive labels predicted above the threshold(s)."""

    _KIND = "tp"


class TrueNegatives(_ConfusionCount):
    """The (weighted) count of negative labels predicted at or below the threshold(s)."""

    _KIND = "tn"


class FalsePositives(_ConfusionCount):
    """The (weighted) count of negative labels predicted above the threshold(s)."""

    _KIND = "fp"


class FalseNegatives(_ConfusionCount):
    """The (weighted) count of positive labels predicted at or below the threshold(s)."""

    _KIND = "fn"


class _PrecisionRecall(Metric):
    _OTHER = "fp"

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.init_thresholds, self.top_k, self.class_id = thresholds, top_k, class_id
        # With top_k the default threshold admits every kept entry (TF's -inf filter).
        self.thresholds = _parse_thresholds(thresholds, 0.5 if top_k is None else 0.0)
        n = len(self.thresholds)
        self.true_positives = self.add_weight("true_positives", shape=(n,))
        other = "false_positives" if self._OTHER == "fp" else "false_negatives"
        setattr(self, other, self.add_weight(other, shape=(n,)))
        self._other = getattr(self, other)

    def update_state(self, y_true, y_pred, sample_weight=None):
        return _confusion_updates(
            {"tp": self.true_positives, self._OTHER: self._other},
            y_true,
            y_pred,
            self.thresholds,
            self.dtype,
            self.top_k,
            self.class_id,
            sample_weight,
        )

    def result(self):
        tp = self.true_positives.read_value()
        value = math_composites.div_no_nan(tp, tp + self._other.read_value())
        return _scalar_if_one(value, self.thresholds)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "thresholds": self.init_thresholds,
            "top_k": self.top_k,
            "class_id": self.class_id,
        }


class Precision(_PrecisionRecall):
    """tp / (tp + fp) over predictions above the threshold(s)."""

    _OTHER = "fp"


class Recall(_PrecisionRecall):
    """tp / (tp + fn) over predictions above the threshold(s)."""

    _OTHER = "fn"


class _FourCounts(Metric):
    def _make_counts(self, n, num_labels=None):
        shape = (n,) if num_labels is None else (n, num_labels)
        self.true_positives = self.add_weight("true_positives", shape=shape)
        self.true_negatives = self.add_weight("true_negatives", shape=shape)
        self.false_positives = self.add_weight("false_positives", shape=shape)
        self.false_negatives = self.add_weight("false_negatives", shape=shape)

    def _update(self, y_true, y_pred, sample_weight, class_id=None):
        variables = {
            "tp": self.true_positives,
            "tn": self.true_negatives,
            "fp": self.false_positives,
            "fn": self.false_negatives,
        }
        return _confusion_updates(
            variables,
            y_true,
            y_pred,
            self.thresholds,
            self.dtype,
            class_id=class_id,
            sample_weight=sample_weight,
        )

    def _counts(self):
        return tuple(
            v.read_value()
            for v in (
                self.true_positives,
                self.true_negatives,
                self.false_positives,
                self.false_negatives,
            )
        )


class _AtValue(_FourCounts):
    """Best `dependent` rate over the thresholds where `constrained` >= the value."""

    _VALUE = "value"

    def __init__(self, value, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= value <= 1:
            raise ValueError(
                f"Argument `{self._VALUE}` must be in the range [0, 1]. "
                f"Received: {self._VALUE}={value}"
            )
        if num_thresholds <= 0:
            raise ValueError(
                "Argument `num_thresholds` must be an integer > 0. "
                f"Received: num_thresholds={num_thresholds}"
            )
        super().__init__(name=name, dtype=dtype)
        self.value, self.num_thresholds, self.class_id = value, num_thresholds, class_id
        setattr(self, self._VALUE, value)
        self._make_counts(num_thresholds)
        if num_thresholds == 1:
            self.thresholds = [0.5]
        else:
            inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            self.thresholds = [0.0] + inner + [1.0]

    def update_state(self, y_true, y_pred, sample_weight=None):
        return self._update(y_true, y_pred, sample_weight, self.class_id)

    def _rates(self):
        tp, tn, fp, fn = self._counts()
        return {
            "sensitivity": math_composites.div_no_nan(tp, tp + fn),
            "specificity": math_composites.div_no_nan(tn, tn + fp),
            "precision": math_composites.div_no_nan(tp, tp + fp),
        }

    def result(self):
        rates = self._rates()
        constrained, dependent = rates[self._CONSTRAINED], rates[self._DEPENDENT]
        feasible = math_ops.greater_equal(constrained, cast_ops.cast(self.value, self.dtype))
        masked = math_composites.where_v2(
            feasible, dependent, array_ops.fill(array_ops.shape(dependent), np.float32(-np.inf))
        )
        any_feasible = reduction_ops.reduce_any(feasible)
        return math_composites.where_v2(any_feasible, reduction_ops.reduce_max(masked), 0.0)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            self._VALUE: self.value,
            "class_id": self.class_id,
        }


class SensitivityAtSpecificity(_AtValue):
    """The best sensitivity over thresholds whose specificity is >= `specificity`."""

    _VALUE, _CONSTRAINED, _DEPENDENT = "specificity", "specificity", "sensitivity"

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(specificity, num_thresholds, class_id, name, dtype)


class SpecificityAtSensitivity(_AtValue):
    """The best specificity over thresholds whose sensitivity is >= `sensitivity`."""

    _VALUE, _CONSTRAINED, _DEPENDENT = "sensitivity", "sensitivity", "specificity"

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(sensitivity, num_thresholds, class_id, name, dtype)


class PrecisionAtRecall(_AtValue):
    """The best precision over thresholds whose recall is >= `recall`."""

    _VALUE, _CONSTRAINED, _DEPENDENT = "recall", "sensitivity", "precision"

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(recall, num_thresholds, class_id, name, dtype)


class RecallAtPrecision(_AtValue):
    """The best recall over thresholds whose precision is >= `precision`."""

    _VALUE, _CONSTRAINED, _DEPENDENT = "precision", "precision", "sensitivity"

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(precision, num_thresholds, class_id, name, dtype)


class AUC(_FourCounts):
    """Area under the ROC or PR curve, a Riemann sum over `num_thresholds` thresholds
    (interpolated trapezoids, or the lower/upper rectangles)."""

    def __init__(
        self,
        num_thresholds=200,
        curve="ROC",
        summation_method="interpolation",
        name=None,
        dtype=None,
        thresholds=None,
        multi_label=False,
        num_labels=None,
        label_weights=None,
        from_logits=False,
    ):
        if str(curve).upper() not in ("ROC", "PR"):
            raise ValueError(
                f'Invalid AUC curve value: "{curve}". Expected values are ["PR", "ROC", "PR_GAIN"]'
            )
        if str(summation_method).lower() not in ("interpolation", "minoring", "majoring"):
            raise ValueError(
                f'Invalid AUC summation method value: "{summation_method}". '
                'Expected values are ["interpolation", "majoring", "minoring"]'
            )
        super().__init__(name=name, dtype=dtype)
        self.curve, self.summation_method = str(curve).upper(), str(summation_method).lower()
        self.multi_label, self.num_labels = multi_label, num_labels
        self.label_weights, self._from_logits = label_weights, from_logits
        self._init_from_thresholds = thresholds is not None
        if thresholds is not None:
            inner = sorted(_parse_thresholds(thresholds))
            self.num_thresholds = len(inner) + 2
        else:
            if num_thresholds <= 1:
                raise ValueError(
                    "Argument `num_thresholds` must be an integer > 1. "
                    f"Received: num_thresholds={num_thresholds}"
                )
            self.num_thresholds = num_thresholds
            inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        self.thresholds = [0.0 - _EPSILON] + inner + [1.0 + _EPSILON]
        self._built = False
        if not multi_label or num_labels is not None:
            self._build(num_labels if multi_label else None)

    def _build(self, num_labels):
        # With multi_label the counts are per label: (thresholds, labels), made on the
        # first update when num_labels is not given.
        self._make_counts(self.num_thresholds, num_labels)
        self._built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = _as_float(y_pred, self.dtype)
        if not self._built:
            self._build(y_pred.shape.as_list()[-1])
        if self._from_logits:
            y_pred = math_ops.sigmoid(y_pred)
        variables = {
            "tp": self.true_positives,
            "tn": self.true_negatives,
            "fp": self.false_positives,
            "fn": self.false_negatives,
        }
        return _confusion_updates(
            variables,
            y_true,
            y_pred,
            self.thresholds,
            self.dtype,
            sample_weight=sample_weight,
            multi_label=self.multi_label,
            label_weights=None if self.multi_label else self.label_weights,
        )

    def _average_labels(self, by_label):
        if not self.multi_label:
            return by_label
        if self.label_weights is None:
            return reduction_ops.reduce_mean(by_label)
        lw = array_ops.constant(np.asarray(self.label_weights, self.dtype.as_numpy_dtype))
        return math_composites.div_no_nan(
            reduction_ops.reduce_sum(by_label * lw), reduction_ops.reduce_sum(lw)
        )

    def _pr_interpolation(self, tp, fp, fn):
        # Davis & Goadrich (2006): precision interpolated along each threshold step.
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = math_composites.div_no_nan(dtp, math_ops.maximum(dp, 0.0))
        intercept = tp[1:] - slope * p[1:]
        both = math_ops.logical_and(p[:-1] > 0, p[1:] > 0)
        ratio = math_composites.where_v2(
            both,
            math_composites.div_no_nan(p[:-1], math_ops.maximum(p[1:], 0.0)),
            array_ops.ones_like(p[1:]),
        )
        increments = math_composites.div_no_nan(
            slope * (dtp + intercept * math_ops.log(ratio)),
            math_ops.maximum(tp[1:] + fn[1:], 0.0),
        )
        return self._average_labels(reduction_ops.reduce_sum(increments, axis=0))

    def result(self):
        tp, tn, fp, fn = self._counts()
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._pr_interpolation(tp, fp, fn)
        recall = math_composites.div_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = math_composites.div_no_nan(fp, fp + tn), recall
        else:
            x, y = recall, math_composites.div_no_nan(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = math_ops.minimum(y[:-1], y[1:])
        else:
            heights = math_ops.maximum(y[:-1], y[1:])
        return self._average_labels(reduction_ops.reduce_sum((x[:-1] - x[1:]) * heights, axis=0))

    def get_config(self) -> dict:
        config = {
            **super().get_config(),
            "num_thresholds": self.num_thresholds,
            "curve": self.curve,
            "summation_method": self.summation_method,
            "multi_label": self.multi_label,
            "num_labels": self.num_labels,
            "label_weights": self.label_weights,
            "from_logits": self._from_logits,
        }
        if self._init_from_thresholds:
            config["thresholds"] = self.thresholds[1:-1]
        return config


class IoU(Metric):
    """Intersection over union, averaged over `target_class_ids`, from a running
    confusion matrix (`total_confusion_matrix`, rows: labels, columns: predictions)."""

    def __init__(
        self,
        num_classes,
        target_class_ids,
        name=None,
        dtype=None,
        ignore_class=None,
        sparse_y_true=True,
        sparse_y_pred=True,
        axis=-1,
    ):
        super().__init__(name=name, dtype=dtype)
        if max(target_class_ids) >= num_classes:
            raise ValueError(
                f"Target class id {max(target_class_ids)} is out of range, which is "
                f"[0, {num_classes})."
            )
        self.num_classes, self.target_class_ids = num_classes, list(target_class_ids)
        self.ignore_class, self.axis = ignore_class, axis
        self.sparse_y_true, self.sparse_y_pred = sparse_y_true, sparse_y_pred
        self.total_cm = self.add_weight("total_confusion_matrix", shape=(num_classes, num_classes))

    def _labels(self, y_true, y_pred):
        y_true, y_pred = ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)
        if not self.sparse_y_true:
            y_true = reduction_ops.argmax(y_true, axis=self.axis)
        if not self.sparse_y_pred:
            y_pred = reduction_ops.argmax(y_pred, axis=self.axis)
        return y_true, y_pred

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = self._labels(y_true, y_pred)
        y_true = array_ops.reshape(cast_ops.cast(y_true, self.dtype), [-1])
        y_pred = array_ops.reshape(cast_ops.cast(y_pred, self.dtype), [-1])
        weights = None
        if sample_weight is not None:
            weights = array_ops.reshape(_as_float(sample_weight, self.dtype), [-1])
        if self.ignore_class is not None:
            keep = math_ops.not_equal(y_true, cast_ops.cast(self.ignore_class, self.dtype))
            y_true = partition_ops.boolean_mask(y_true, keep)
            y_pred = partition_ops.boolean_mask(y_pred, keep)
            if weights is not None:
                weights = partition_ops.boolean_mask(weights, keep)
        cm = tf_metrics.confusion_matrix(
            y_true, y_pred, self.num_classes, weights=weights, dtype=self.dtype
        )
        return self.total_cm.assign_add(cm)

    def result(self):
        cm = self.total_cm.read_value()
        rows = reduction_ops.reduce_sum(cm, axis=0)
        cols = reduction_ops.reduce_sum(cm, axis=1)
        tp = linalg_matrix_ops.matrix_diag_part(cm)
        denominator = rows + cols - tp
        tp = slicing_ops.gather(tp, self.target_class_ids)
        denominator = slicing_ops.gather(denominator, self.target_class_ids)
        valid = reduction_ops.reduce_sum(
            cast_ops.cast(math_ops.not_equal(denominator, 0.0), self.dtype)
        )
        iou = math_composites.div_no_nan(tp, denominator)
        return math_composites.div_no_nan(reduction_ops.reduce_sum(iou), valid)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "target_class_ids": self.target_class_ids,
            "ignore_class": self.ignore_class,
            "sparse_y_true": self.sparse_y_true,
            "sparse_y_pred": self.sparse_y_pred,
            "axis": self.axis,
        }


class MeanIoU(IoU):
    """IoU averaged over all `num_classes` classes."""

    def __init__(
        self,
        num_classes,
        name=None,
        dtype=None,
        ignore_class=None,
        sparse_y_true=True,
        sparse_y_pred=True,
        axis=-1,
    ):
        super().__init__(
            num_classes,
            list(range(num_classes)),
            name,
            dtype,
            ignore_class,
            sparse_y_true,
            sparse_y_pred,
            axis,
        )

    def get_config(self) -> dict:
        config = super().get_config()
        del config["target_class_ids"]
        return config


class BinaryIoU(IoU):
    """IoU of the two classes 'above `threshold`' and 'not above' (labels 0/1)."""

    def __init__(self, target_class_ids=(0, 1), threshold=0.5, name=None, dtype=None):
        super().__init__(2, list(target_class_ids), name=name, dtype=dtype)
        self.threshold = threshold

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = _as_float(y_pred, self.dtype)
        y_pred = cast_ops.cast(y_pred >= self.threshold, self.dtype)
        return super().update_state(y_true, y_pred, sample_weight)

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "dtype": self.dtype.name,
            "target_class_ids": self.target_class_ids,
            "threshold": self.threshold,
        }


class OneHotIoU(IoU):
    """IoU with one-hot labels and class scores (argmax along `axis`)."""

    def __init__(
        self,
        num_classes,
        target_class_ids,
        name=None,
        dtype=None,
        ignore_class=None,
        sparse_y_pred=False,
        axis=-1,
    ):
        super().__init__(
            num_classes,
            target_class_ids,
            name,
            dtype,
            ignore_class,
            sparse_y_true=False,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )

    def get_config(self) -> dict:
        config = super().get_config()
        del config["sparse_y_true"]
        return config


class OneHotMeanIoU(MeanIoU):
    """MeanIoU with one-hot labels and class scores (argmax along `axis`)."""

    def __init__(
        self, num_classes, name=None, dtype=None, ignore_class=None, sparse_y_pred=False, axis=-1
    ):
        super().__init__(
            num_classes,
            name,
            dtype,
            ignore_class,
            sparse_y_true=False,
            sparse_y_pred=sparse_y_pred,
            axis=axis,
        )

    def get_config(self) -> dict:
        config = super().get_config()
        del config["sparse_y_true"]
        return config


class Sum(Metric):
    """The running (weighted) sum of the values given to `update_state` (`total`)."""

    def __init__(self, name="sum", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_weight("total")

    def update_state(self, values, sample_weight=None):
        values = _as_float(values, self.dtype)
        if sample_weight is not None:
            values = values * _as_float(sample_weight, self.dtype)
        return self.total.assign_add(reduction_ops.reduce_sum(values))

    def result(self):
        return array_ops.identity(self.total.read_value())


class MeanTensor(Metric):
    """The element-wise running (weighted) mean of same-shaped tensors; its `total` and
    `count` variables take the shape of the first values given."""

    def __init__(self, name="mean_tensor", dtype=None, shape=None):
        super().__init__(name=name, dtype=dtype)
        self._shape = None if shape is None else tuple(shape)
        self.total = self.count = None
        if shape is not None:
            self._build(self._shape)

    def _build(self, shape):
        self._shape = tuple(shape)
        self.total = self.add_weight("total", shape=shape)
        self.count = self.add_weight("count", shape=shape)

    def update_state(self, values, sample_weight=None):
        values = _as_float(values, self.dtype)
        if self.total is None:
            self._build(values.shape.as_list())
        elif tuple(values.shape.as_list()) != self._shape:
            raise ValueError(
                "MeanTensor input values must always have the same shape. Expected shape "
                f"(set during the first call): {self._shape}. "
                f"Got: {tuple(values.shape.as_list())}."
            )
        num = array_ops.ones_like(values)
        if sample_weight is not None:
            num = num * _as_float(sample_weight, self.dtype)
            values = values * num
        update_total = self.total.assign_add(values)
        with ops.control_dependencies([update_total]):
            return self.count.assign_add(num)

    def result(self):
        if self.total is None:
            raise ValueError(
                "MeanTensor does not have any value yet. Please call the MeanTensor "
                "instance or use `.update_state(value)` before retrieving the result."
            )
        return math_composites.div_no_nan(self.total.read_value(), self.count.read_value())


class _Means(Metric):
    """The running weighted mean (`total`, `count`) of per-element values."""

    def __init__(self, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_weight("total")
        self.count = self.add_weight("count")

    def _accumulate(self, values, sample_weight):
        if sample_weight is not None:
            w = _as_float(sample_weight, self.dtype)
            if w.shape.ndims is not None and w.shape.ndims == values.shape.ndims - 1:
                w = array_ops.expand_dims(w, -1)
            w = w * array_ops.ones_like(values)
            values = values * w
            num = reduction_ops.reduce_sum(w)
        else:
            num = cast_ops.cast(array_ops.size(values), self.dtype)
        update_total = self.total.assign_add(reduction_ops.reduce_sum(values))
        with ops.control_dependencies([update_total]):
            return self.count.assign_add(num)

    def result(self):
        return math_composites.div_no_nan(self.total.read_value(), self.count.read_value())


class MeanRelativeError(_Means):
    """The running mean of |y_true - y_pred| / normalizer (0 where normalizer is 0)."""

    def __init__(self, normalizer, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self._normalizer_value = np.asarray(normalizer, self.dtype.as_numpy_dtype)
        self.normalizer = array_ops.constant(self._normalizer_value)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _as_float(y_true, self.dtype), _as_float(y_pred, self.dtype)
        errors = math_composites.div_no_nan(math_ops.abs(y_true - y_pred), self.normalizer)
        return self._accumulate(errors, sample_weight)

    def get_config(self) -> dict:
        return {**super().get_config(), "normalizer": self._normalizer_value}


def _check_2d(cls_name, y_true, y_pred):
    ts, ps = y_true.shape, y_pred.shape
    if ps.ndims != 2 or ts.ndims != 2 or ps.as_list()[-1] is None or ts.as_list()[-1] is None:
        raise ValueError(
            f"{cls_name} expects 2D inputs with shape (batch_size, output_dim), with "
            "output_dim fully defined (not None). Received input shapes: "
            f"y_pred.shape={ps} and y_true.shape={ts}."
        )


class FBetaScore(Metric):
    """F-beta score per class (average=None) or averaged ('micro', 'macro',
    'weighted'); a prediction counts when above `threshold`, or, with threshold None,
    when it is its row's largest (non-zero) value."""

    def __init__(self, average=None, beta=1.0, threshold=None, name="fbeta_score", dtype=None):
        super().__init__(name=name, dtype=dtype)
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError(
                "Invalid `average` argument value. Expected one of: {None, 'micro', "
                f"'macro', 'weighted'}}. Received: average={average}"
            )
        if not isinstance(beta, float):
            raise ValueError(
                "Invalid `beta` argument value. It should be a Python float. "
                f"Received: beta={beta} of type '{type(beta)}'"
            )
        if beta <= 0.0:
            raise ValueError(
                f"Invalid `beta` argument value. It should be > 0. Received: beta={beta}"
            )
        if threshold is not None:
            if not isinstance(threshold, float):
                raise ValueError(
                    "Invalid `threshold` argument value. It should be a Python float. "
                    f"Received: threshold={threshold} of type '{type(threshold)}'"
                )
            if threshold > 1.0 or threshold <= 0.0:
                raise ValueError(
                    "Invalid `threshold` argument value. It should verify 0 < threshold <= 1. "
                    f"Received: threshold={threshold}"
                )
        self.average, self.beta, self.threshold = average, beta, threshold
        self.axis = None if average == "micro" else 0
        self.built = False

    def _build(self, y_true, y_pred):
        _check_2d("FBetaScore", y_true, y_pred)
        shape = () if self.average == "micro" else (y_pred.shape.as_list()[-1],)
        self.true_positives = self.add_weight("true_positives", shape=shape)
        self.false_positives = self.add_weight("false_positives", shape=shape)
        self.false_negatives = self.add_weight("false_negatives", shape=shape)
        self.intermediate_weights = self.add_weight("intermediate_weights", shape=shape)
        self.built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _as_float(y_true, self.dtype), _as_float(y_pred, self.dtype)
        if not self.built:
            self._build(y_true, y_pred)
        if self.threshold is None:
            top = reduction_ops.reduce_max(y_pred, axis=-1, keepdims=True)
            hit = math_ops.logical_and(y_pred >= top, math_ops.abs(y_pred) > 1e-9)
        else:
            hit = y_pred > self.threshold
        y_pred = cast_ops.cast(hit, self.dtype)

        def weighted_sum(val):
            if sample_weight is not None:
                val = val * array_ops.expand_dims(_as_float(sample_weight, self.dtype), 1)
            return reduction_ops.reduce_sum(val, axis=self.axis)

        return control_flow_ordering.group(
            self.true_positives.assign_add(weighted_sum(y_pred * y_true)),
            self.false_positives.assign_add(weighted_sum(y_pred * (1.0 - y_true))),
            self.false_negatives.assign_add(weighted_sum((1.0 - y_pred) * y_true)),
            self.intermediate_weights.assign_add(weighted_sum(y_true)),
        )

    def result(self):
        tp = self.true_positives.read_value()
        precision = math_composites.div_no_nan(tp, tp + self.false_positives.read_value())
        recall = math_composites.div_no_nan(tp, tp + self.false_negatives.read_value())
        beta2 = self.beta * self.beta
        score = math_composites.div_no_nan(precision * recall, beta2 * precision + recall)
        score = score * (1.0 + beta2)
        if self.average == "weighted":
            w = self.intermediate_weights.read_value()
            score = reduction_ops.reduce_sum(
                score * math_composites.div_no_nan(w, reduction_ops.reduce_sum(w))
            )
        elif self.average is not None:
            score = reduction_ops.reduce_mean(score)
        return score

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "average": self.average,
            "beta": self.beta,
            "threshold": self.threshold,
        }


class F1Score(FBetaScore):
    """The F-1 score (FBetaScore with beta 1)."""

    def __init__(self, average=None, threshold=None, name="f1_score", dtype=None):
        super().__init__(average=average, beta=1.0, threshold=threshold, name=name, dtype=dtype)

    def get_config(self) -> dict:
        config = super().get_config()
        del config["beta"]
        return config


class R2Score(Metric):
    """The coefficient of determination per output, aggregated 'uniform_average',
    'variance_weighted_average' or not at all (None)."""

    def __init__(
        self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None
    ):
        super().__init__(name=name, dtype=dtype)
        allowed = (None, "uniform_average", "variance_weighted_average")
        if class_aggregation not in allowed:
            raise ValueError(
                "Invalid value for argument `class_aggregation`. Expected one of "
                f"{allowed}. Received: class_aggregation={class_aggregation}"
            )
        if num_regressors < 0:
            raise ValueError(
                "Invalid value for argument `num_regressors`. Expected a value >= 0. "
                f"Received: num_regressors={num_regressors}"
            )
        self.class_aggregation, self.num_regressors = class_aggregation, num_regressors
        self.num_samples = self.add_weight("num_samples", dtype="int32")
        self.built = False

    def _build(self, y_true, y_pred):
        _check_2d("R2Score", y_true, y_pred)
        n = y_pred.shape.as_list()[-1]
        self.squared_sum = self.add_weight("squared_sum", shape=(n,))
        self.sum = self.add_weight("sum", shape=(n,))
        self.total_mse = self.add_weight("residual", shape=(n,))
        self.count = self.add_weight("count", shape=(n,))
        self.built = True

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _as_float(y_true, self.dtype), _as_float(y_pred, self.dtype)
        if not self.built:
            self._build(y_true, y_pred)
        w = array_ops.ones_like(y_true)
        if sample_weight is not None:
            sw = _as_float(sample_weight, self.dtype)
            if sw.shape.ndims == 1:
                sw = array_ops.expand_dims(sw, 1)
            w = w * sw
        weighted = y_true * w
        return control_flow_ordering.group(
            self.sum.assign_add(reduction_ops.reduce_sum(weighted, axis=0)),
            self.squared_sum.assign_add(reduction_ops.reduce_sum(y_true * weighted, axis=0)),
            self.total_mse.assign_add(
                reduction_ops.reduce_sum(math_ops.square(y_true - y_pred) * w, axis=0)
            ),
            self.count.assign_add(reduction_ops.reduce_sum(w, axis=0)),
            self.num_samples.assign_add(array_ops.size(y_true)),
        )

    def result(self):
        s = self.sum.read_value()
        mean = s / self.count.read_value()
        total = self.squared_sum.read_value() - s * mean
        raw = 1.0 - self.total_mse.read_value() / total
        raw = math_composites.where_v2(
            special_math_ops.is_inf(raw), array_ops.zeros_like(raw), raw
        )
        if self.class_aggregation == "uniform_average":
            score = reduction_ops.reduce_mean(raw)
        elif self.class_aggregation == "variance_weighted_average":
            score = reduction_ops.reduce_sum(total * raw) / reduction_ops.reduce_sum(total)
        else:
            score = raw
        if not self.num_regressors:
            return score
        # The adjusted score, where there are more samples (elements seen) than
        # regressors + 1; otherwise the plain score, as Keras falls back.
        n = cast_ops.cast(self.num_samples.read_value(), self.dtype)
        p = float(self.num_regressors)
        adjusted = 1.0 - (1.0 - score) * (n - 1.0) / math_ops.maximum(n - p - 1.0, 1e-12)
        return math_composites.where_v2(n - 1.0 > p, adjusted, score)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "class_aggregation": self.class_aggregation,
            "num_regressors": self.num_regressors,
        }
