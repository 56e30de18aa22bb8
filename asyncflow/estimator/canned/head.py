"""Heads of the canned estimators: logits -> loss, predictions and eval metrics (TF1's).

The v1 heads the `tf.compat.v1` canned estimators use: binary (sigmoid cross entropy
on one logit), multi-class (sparse softmax cross entropy) and regression (squared
error). The training loss is the per-example loss reduced by `loss_reduction` (v1's
default: SUM over the batch); 'average_loss' is its weighted mean over the evaluation.
Invariant: labels and per-example losses are [batch, 1] (rank-1 labels are expanded).
"""

from __future__ import annotations

from asyncflow import dtypes, lookup, losses
from asyncflow import metrics as metrics_lib
from asyncflow.estimator import export_output
from asyncflow.estimator.model_fn import EstimatorSpec, ModeKeys
from asyncflow.graph import control_dependencies, name_scope
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    manip_ops,
    math_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
    slicing_ops,
    string_ops,
    summary_ops,
)
from asyncflow.train import training_util

__all__ = ["binary_head", "multi_class_head", "regression_head"]


def _labels_2d(labels, label_dimension=1):
    """labels as [batch, label_dimension] (rank-1 labels get a last dimension).

    Raises:
      ValueError: no labels; a last dimension other than label_dimension.
    """
    if labels is None:
        raise ValueError("You must provide a labels Tensor. Given: None.")
    with name_scope(None, "labels", (labels,)) as scope:
        labels = labels if hasattr(labels, "dtype") else array_ops.constant(labels)
        if labels.shape.ndims == 1:
            labels = array_ops.expand_dims(labels, -1)
        last = labels.shape.as_list()[-1] if labels.shape.ndims else None
        _check_label_dimension(last, label_dimension)
        # Named as TF's ('<model>/head/labels'): errors about the labels name it.
        return array_ops.identity(labels, name=scope)


def _check_label_dimension(last, label_dimension) -> None:
    if last is not None and last != label_dimension:
        raise ValueError(
            f"Mismatched label shape. Expected labels dimension={label_dimension}.  Received "
            f"{last}. Suggested Fix:If your classifier expects one-hot encoding label,check "
            "your n_classes argument to the estimator and/or the shape of your label. "
            "Otherwise, check the shape of your label."
        )


def _assert_range(labels, n_classes):
    """labels, failing the step (InvalidArgumentError) when one is outside [0, n)."""
    with name_scope(None, "assert_range", (labels,)):
        upper = array_ops.constant(n_classes - 1, dtype=labels.dtype)
        checks = (
            check_ops.assert_less_equal(labels, upper, message="Labels must <= n_classes - 1"),
            check_ops.assert_non_negative(labels, message="Labels must >= 0"),
        )
        with control_dependencies(checks):
            return array_ops.identity(labels)


def _weights(features, weight_column):
    if weight_column is None:
        return None
    key = getattr(weight_column, "key", weight_column)
    weights = cast_ops.cast(features[key], dtypes.float32)
    return weights if weights.shape.ndims != 1 else array_ops.expand_dims(weights, -1)


class _Head:
    """Common flow: predictions in every mode, loss in TRAIN/EVAL, metrics in EVAL."""

    def __init__(self, n_logits, weight_column, loss_reduction):
        self.logits_dimension = n_logits
        self._weight_column = weight_column
        self._reduction = loss_reduction

    def create_estimator_spec(
        self, features, mode, logits, labels=None, optimizer=None, train_op_fn=None
    ):
        """The EstimatorSpec of `mode` for these logits; in TRAIN the train op is
        `train_op_fn(loss)` when given, else `optimizer.minimize(loss, global_step)`."""
        with name_scope("head"):
            predictions = self._predictions(logits)
            if mode == ModeKeys.PREDICT:
                return EstimatorSpec(
                    mode, predictions=predictions, export_outputs=self._exports(predictions)
                )
            labels = self._labels(labels)
            unreduced = self._unreduced_loss(labels, logits)
            weights = _weights(features, self._weight_column)
            loss = losses.compute_weighted_loss(
                unreduced, 1.0 if weights is None else weights, reduction=self._reduction
            )
            if mode == ModeKeys.EVAL:
                with name_scope(None):
                    metrics = self._metrics(labels, predictions, unreduced, weights)
                return EstimatorSpec(
                    mode, predictions=predictions, loss=loss, eval_metric_ops=metrics
                )
            self._training_summaries(loss, unreduced, weights)
        if train_op_fn is not None:
            train_op = train_op_fn(loss)
        else:
            train_op = optimizer.minimize(loss, global_step=training_util.get_global_step())
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    def _training_summaries(self, loss, unreduced, weights):
        """'loss' and, for a SUM loss, 'average_loss' (per weighted example), as TF's."""
        mean_loss = None
        if self._reduction == losses.Reduction.SUM:
            ones = array_ops.ones_like(unreduced)
            total_weight = reduction_ops.reduce_sum(ones if weights is None else weights * ones)
            mean_loss = loss / total_weight
        with name_scope(""):  # top-level tags; the Estimator then adds no 'loss' of its own
            summary_ops.scalar("loss", loss)
            if mean_loss is not None:
                summary_ops.scalar("average_loss", mean_loss)


def _class_predictions(logits, scores_logits, probabilities, n_classes, vocab, extra):
    class_ids = array_ops.expand_dims(
        reduction_ops.argmax(scores_logits, axis=1, name="class_ids"), axis=-1
    )
    batch = array_ops.shape(logits)[:1]
    all_ids = manip_ops.tile(
        array_ops.expand_dims(reduction_ops.range(n_classes), 0),
        manip_ops.concat([batch, [1]], 0),
    )
    if vocab is None:
        classes = string_ops.as_string(class_ids, name="str_classes")
        all_classes = string_ops.as_string(all_ids)
    else:
        names = array_ops.constant(list(vocab), dtype=dtypes.string)
        classes = slicing_ops.gather(names, class_ids, name="classes")
        all_classes = slicing_ops.gather(names, all_ids)
    return {
        "logits": logits,
        **extra,
        "probabilities": probabilities,
        "class_ids": class_ids,
        "classes": classes,
        "all_class_ids": all_ids,
        "all_classes": all_classes,
    }


def _check_vocabulary(vocab):
    if vocab is not None and not isinstance(vocab, list | tuple):
        raise TypeError(f"label_vocabulary should be a list or tuple. Given type: {type(vocab)}")
    return None if vocab is None else tuple(vocab)


def _vocabulary_ids(labels, vocab):
    """String labels as their index in vocab (-1 when absent).

    Raises:
      TypeError: labels that are not strings.
    """
    if labels.dtype != dtypes.string:
        raise TypeError(
            f"Dtype of argument `keys` must be {dtypes.string}, received: {labels.dtype}"
        )
    table = lookup.StaticHashTable(
        lookup.KeyValueTensorInitializer(
            list(vocab), list(range(len(vocab))), dtypes.string, dtypes.int64
        ),
        -1,
        name="class_id_lookup",
    )
    return table.lookup(labels)


def _class_ids_of(labels, vocab, n_classes):
    """Labels as class ids in [0, n_classes), checked when the step runs.

    Raises:
      TypeError: non-string labels with a vocabulary.
      ValueError: non-integer labels without one.
    """
    if vocab is not None:
        return _assert_range(_vocabulary_ids(labels, vocab), n_classes)
    if not labels.dtype.is_integer:
        raise ValueError(f"Labels dtype should be integer. Instead got {labels.dtype}.")
    return _assert_range(labels, n_classes)


class _BinaryHead(_Head):
    def __init__(self, weight_column, loss_reduction, vocab=None):
        super().__init__(1, weight_column, loss_reduction)
        self._vocab = _check_vocabulary(vocab)

    def _predictions(self, logits):
        logistic = math_ops.sigmoid(logits, name="logistic")
        two_class = manip_ops.concat([array_ops.zeros_like(logits), logits], -1)
        probabilities = nn_ops.softmax(two_class, name="probabilities")
        return _class_predictions(
            logits, two_class, probabilities, 2, self._vocab, {"logistic": logistic}
        )

    def _labels(self, labels):
        labels = _labels_2d(labels)
        if self._vocab is not None:
            labels = _vocabulary_ids(labels, self._vocab)
        # As TF's: the labels are cast to float first, then checked to lie in [0, 1].
        return _assert_range(cast_ops.cast(labels, dtypes.float32), 2)

    def _unreduced_loss(self, labels, logits):
        return nn_impl.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def _exports(self, predictions):
        classification = export_output.ClassificationOutput(
            scores=predictions["probabilities"], classes=predictions["all_classes"]
        )
        return {
            "serving_default": classification,
            "classification": classification,
            "regression": export_output.RegressionOutput(predictions["logistic"]),
            "predict": export_output.PredictOutput(predictions),
        }

    def _metrics(self, labels, predictions, unreduced, w):
        class_ids = predictions["class_ids"]
        logistic = predictions["logistic"]
        label_mean = metrics_lib.mean(labels, w, name="label/mean")
        baseline = math_ops.maximum(label_mean[0], 1.0 - label_mean[0])
        return {
            "average_loss": metrics_lib.mean(unreduced, w, name="average_loss"),
            "accuracy": metrics_lib.accuracy(labels, class_ids, w, name="accuracy"),
            "precision": metrics_lib.precision(labels, class_ids, w, name="precision"),
            "recall": metrics_lib.recall(labels, class_ids, w, name="recall"),
            "prediction/mean": metrics_lib.mean(logistic, w, name="prediction/mean"),
            "label/mean": label_mean,
            "accuracy_baseline": (baseline, label_mean[1]),
            "auc": metrics_lib.auc(labels, logistic, w, curve="ROC", name="auc"),
            "auc_precision_recall": metrics_lib.auc(
                labels, logistic, w, curve="PR", name="auc_precision_recall"
            ),
        }


class _MultiClassHead(_Head):
    def __init__(self, n_classes, weight_column, loss_reduction, vocab=None):
        super().__init__(n_classes, weight_column, loss_reduction)
        self._vocab = _check_vocabulary(vocab)

    def _predictions(self, logits):
        probabilities = nn_ops.softmax(logits, name="probabilities")
        n = self.logits_dimension
        return _class_predictions(logits, logits, probabilities, n, self._vocab, {})

    def _labels(self, labels):
        return _class_ids_of(_labels_2d(labels), self._vocab, self.logits_dimension)

    def _unreduced_loss(self, labels, logits):
        loss = nn_impl.sparse_softmax_cross_entropy_with_logits(
            labels=array_ops.reshape(cast_ops.cast(labels, dtypes.int64), [-1]), logits=logits
        )
        return array_ops.expand_dims(loss, -1)

    def _exports(self, predictions):
        classification = export_output.ClassificationOutput(
            scores=predictions["probabilities"], classes=predictions["all_classes"]
        )
        return {
            "serving_default": classification,
            "classification": classification,
            "predict": export_output.PredictOutput(predictions),
        }

    def _metrics(self, labels, predictions, unreduced, w):
        return {
            "average_loss": metrics_lib.mean(unreduced, w, name="average_loss"),
            "accuracy": metrics_lib.accuracy(labels, predictions["class_ids"], w, name="accuracy"),
        }


class _RegressionHead(_Head):
    def __init__(self, label_dimension, weight_column, loss_reduction):
        super().__init__(label_dimension, weight_column, loss_reduction)

    def _predictions(self, logits):
        return {"predictions": logits}

    def _labels(self, labels):
        return cast_ops.cast(_labels_2d(labels, self.logits_dimension), dtypes.float32)

    def _unreduced_loss(self, labels, logits):
        return math_ops.squared_difference(logits, labels)

    def _exports(self, predictions):
        regression = export_output.RegressionOutput(predictions["predictions"])
        return {
            "serving_default": regression,
            "regression": regression,
            "predict": export_output.PredictOutput(predictions),
        }

    def _metrics(self, labels, predictions, unreduced, w):
        return {
            "average_loss": metrics_lib.mean(unreduced, w, name="average_loss"),
            "prediction/mean": metrics_lib.mean(
                predictions["predictions"], w, name="prediction/mean"
            ),
            "label/mean": metrics_lib.mean(labels, w, name="label/mean"),
        }


def binary_head(weight_column=None, loss_reduction=losses.Reduction.SUM, label_vocabulary=None):
    return _BinaryHead(weight_column, loss_reduction, label_vocabulary)


def multi_class_head(
    n_classes, weight_column=None, loss_reduction=losses.Reduction.SUM, label_vocabulary=None
):
    return _MultiClassHead(n_classes, weight_column, loss_reduction, label_vocabulary)


def regression_head(label_dimension=1, weight_column=None, loss_reduction=losses.Reduction.SUM):
    return _RegressionHead(label_dimension, weight_column, loss_reduction)


def classifier_head(
    n_classes, weight_column=None, loss_reduction=losses.Reduction.SUM, label_vocabulary=None
):
    """The head for `n_classes` (binary for 2).

    Raises:
      ValueError: n_classes < 2.
      TypeError: a label_vocabulary that is not a list or tuple.
    """
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be > 2: {n_classes}.")
    if n_classes == 2:
        return binary_head(weight_column, loss_reduction, label_vocabulary)
    return multi_class_head(n_classes, weight_column, loss_reduction, label_vocabulary)
