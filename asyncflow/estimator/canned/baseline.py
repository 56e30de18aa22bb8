"""BaselineClassifier / BaselineRegressor: one learned bias, whatever the features (TF1's).

The logits are the variable 'baseline/bias' ([logits dimension], zeros at first)
repeated for each example; the batch size is read from the weight column when there
is one, else from the first feature by name. Trained with FTRL at 0.3 by default,
as TF's.
"""

from __future__ import annotations

from asyncflow import losses
from asyncflow import var_scope as vs
from asyncflow.estimator.canned import head as head_lib
from asyncflow.estimator.canned.optimizers import get_optimizer_instance
from asyncflow.estimator.estimator import Estimator
from asyncflow.ops import array_ops, init_ops, math_ops

__all__ = ["BaselineClassifier", "BaselineRegressor"]

_LEARNING_RATE = 0.3


def _baseline_logits(features, units, weight_column):
    key = getattr(weight_column, "key", weight_column) or sorted(features)[0]
    batch_size = array_ops.shape(features[key])[0]
    with vs.variable_scope("baseline", values=tuple(features.values())):
        bias = vs.get_variable("bias", shape=[units], initializer=init_ops.zeros_initializer())
        return math_ops.multiply(bias, array_ops.ones(array_ops.stack([batch_size, units])))


class _Baseline(Estimator):
    def __init__(self, head, model_dir, optimizer, config, weight_column):
        def _model_fn(features, labels, mode, config):
            if not isinstance(features, dict):
                raise ValueError(
                    f"features should be a dictionary of `Tensor`s. Given type: {type(features)}"
                )
            logits = _baseline_logits(features, head.logits_dimension, weight_column)
            opt = get_optimizer_instance(optimizer, _LEARNING_RATE) if mode == "train" else None
            return head.create_estimator_spec(features, mode, logits, labels, opt)

        super().__init__(_model_fn, model_dir=model_dir, config=config)


class BaselineClassifier(_Baseline):
    """Predicts the label distribution it has seen, ignoring the features.

    Raises:
      ValueError: n_classes < 2.
    """

    def __init__(
        self,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Ftrl",
        config=None,
        loss_reduction=losses.Reduction.SUM,
    ):
        head = head_lib.classifier_head(n_classes, weight_column, loss_reduction, label_vocabulary)
        super().__init__(head, model_dir, optimizer, config, weight_column)


class BaselineRegressor(_Baseline):
    """Predicts the mean label it has seen, ignoring the features."""

    def __init__(
        self,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        optimizer="Ftrl",
        config=None,
        loss_reduction=losses.Reduction.SUM,
    ):
        head = head_lib.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, model_dir, optimizer, config, weight_column)
