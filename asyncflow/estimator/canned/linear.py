"""LinearClassifier / LinearRegressor: a linear model over feature columns (TF1's v1).

The logits are `feature_column.linear_model` built under variable scope 'linear' (so
'linear/linear_model/<column>/weights' and '.../bias_weights'), trained by default
with FTRL at min(0.2, 1/sqrt(number of columns)), as TF's. Variables are created
through a one-partition partitioner and the optimizer runs inside the 'linear' scope,
as TF's do, so the slots' checkpoint names match ('.../weights/part_0/Ftrl').
"""

from __future__ import annotations

import math

from asyncflow import dtypes, losses, math_composites
from asyncflow import feature_column as fc_lib
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.estimator.canned import head as head_lib
from asyncflow.estimator.canned.optimizers import get_optimizer_instance
from asyncflow.estimator.estimator import Estimator
from asyncflow.ops import cast_ops, math_ops, summary_ops
from asyncflow.partitioned_variables import min_max_variable_partitioner

__all__ = ["LinearClassifier", "LinearRegressor"]

_LEARNING_RATE = 0.2


def default_learning_rate(feature_columns, cap=_LEARNING_RATE) -> float:
    return min(cap, 1.0 / math.sqrt(len(feature_columns)))


def _linear_model_fn(features, labels, mode, head, columns, optimizer, config, options):
    if not isinstance(features, dict):
        raise ValueError(
            f"features should be a dictionary of `Tensor`s. Given type: {type(features)}"
        )
    partitioner = options["partitioner"] or min_max_variable_partitioner(
        max_partitions=max(config.num_ps_replicas, 1), min_slice_size=64 << 20
    )
    if mode == "train":
        optimizer = get_optimizer_instance(optimizer, default_learning_rate(columns))
    # The head (and so the optimizer's slots) is built inside the model's scope, as TF's
    # is: that is what names the slots 'linear/linear_model/x/weights/part_0/Ftrl'.
    with vs.variable_scope("linear", values=tuple(features.values()), partitioner=partitioner):
        logits = linear_logits(
            features, columns, head.logits_dimension, options["sparse_combiner"]
        )
        return head.create_estimator_spec(features, mode, logits, labels, optimizer)


def linear_logits(features, columns, units, sparse_combiner):
    """The linear model's logits [batch, units], with TF's summaries of its variables."""
    cols_to_vars = {}
    logits = fc_lib.linear_model(
        features, columns, units=units, sparse_combiner=sparse_combiner, cols_to_vars=cols_to_vars
    )
    _linear_summaries(cols_to_vars, units)
    return logits


def _linear_summaries(cols_to_vars, units) -> None:
    """TF's: the bias (a scalar for one unit, else a histogram) and the fraction of
    weights that are zero."""
    # One-partition variables: read each as one tensor.
    (bias,) = cols_to_vars.pop("bias")
    bias = ops.convert_to_tensor(bias)
    if units > 1:
        summary_ops.histogram("bias", bias)
    else:
        summary_ops.scalar("bias", bias[0])
    weights = [ops.convert_to_tensor(v) for variables in cols_to_vars.values() for v in variables]
    nonzero = math_ops.add_n(
        [cast_ops.cast(math_composites.count_nonzero(w), dtypes.float32) for w in weights]
    )
    total = float(sum(w.shape.num_elements() for w in weights))
    summary_ops.scalar("fraction_of_zero_weights", 1.0 - nonzero / total)


class _Linear(Estimator):
    def __init__(
        self, head, feature_columns, model_dir, optimizer, config, warm_start_from, **options
    ):
        columns = tuple(feature_columns or [])

        def _model_fn(features, labels, mode, config):
            return _linear_model_fn(
                features, labels, mode, head, columns, optimizer, config, options
            )

        super().__init__(
            _model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )


class LinearClassifier(_Linear):
    """A linear classifier (binary for n_classes=2, else softmax) over feature_columns.

    Raises:
      ValueError: n_classes < 2.
    """

    def __init__(
        self,
        feature_columns,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Ftrl",
        config=None,
        partitioner=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        sparse_combiner="sum",
    ):
        head = head_lib.classifier_head(n_classes, weight_column, loss_reduction, label_vocabulary)
        super().__init__(
            head,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            partitioner=partitioner,
            sparse_combiner=sparse_combiner,
        )


class LinearRegressor(_Linear):
    """A linear regressor over feature_columns (squared-error loss)."""

    def __init__(
        self,
        feature_columns,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        optimizer="Ftrl",
        config=None,
        partitioner=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        sparse_combiner="sum",
    ):
        head = head_lib.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            partitioner=partitioner,
            sparse_combiner=sparse_combiner,
        )
