"""DNNLinearCombinedClassifier / Regressor: wide (linear) plus deep (DNN) logits (TF1's).

The logits are the sum of a linear model over `linear_feature_columns` (scope 'linear')
and a DNN over `dnn_feature_columns` (scope 'dnn'), each trained by its own optimizer
on its own variables (defaults as TF's: FTRL at min(0.005, 1/sqrt(n linear columns)),
Adagrad at 0.001); one step of both is one global step. As in TF the head is built
outside both scopes and only the DNN's variables are partitioned, so the slots are
saved as TF saves them ('dnn/.../kernel/Adagrad', 'linear/.../weights/Ftrl').
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import losses
from asyncflow import var_scope as vs
from asyncflow.estimator.canned import head as head_lib
from asyncflow.estimator.canned.dnn import dnn_logits, layer_summaries
from asyncflow.estimator.canned.linear import default_learning_rate, linear_logits
from asyncflow.estimator.canned.optimizers import get_optimizer_instance
from asyncflow.estimator.estimator import Estimator
from asyncflow.ops import control_flow_ops, nn_ops, state_ops
from asyncflow.partitioned_variables import min_max_variable_partitioner
from asyncflow.train import training_util

__all__ = ["DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor"]

_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005


def _combined_model_fn(features, labels, mode, head, config, opts):
    if not isinstance(features, dict):
        raise ValueError(
            f"features should be a dictionary of `Tensor`s. Given type: {type(features)}"
        )
    values = tuple(features.values())
    parts = []  # (logits, optimizer, absolute scope)
    if opts["dnn_feature_columns"]:
        optimizer = get_optimizer_instance(opts["dnn_optimizer"], _DNN_LEARNING_RATE)
        if not opts["dnn_hidden_units"]:
            raise ValueError(
                "dnn_hidden_units must be defined when dnn_feature_columns is specified."
            )
        partitioner = min_max_variable_partitioner(max_partitions=max(config.num_ps_replicas, 1))
        with vs.variable_scope("dnn", values=values, partitioner=partitioner) as scope:
            logits = dnn_logits(
                features,
                head.logits_dimension,
                opts["dnn_hidden_units"],
                opts["dnn_feature_columns"],
                opts["dnn_activation_fn"],
                opts["dnn_dropout"],
                mode == "train",
            )
        parts.append((logits, optimizer, scope.name))
    if opts["linear_feature_columns"]:
        columns = opts["linear_feature_columns"]
        rate = default_learning_rate(columns, cap=_LINEAR_LEARNING_RATE)
        optimizer = get_optimizer_instance(opts["linear_optimizer"], rate)
        partitioner = opts["input_layer_partitioner"]
        with vs.variable_scope("linear", values=values, partitioner=partitioner) as scope:
            logits = linear_logits(
                features, columns, head.logits_dimension, opts["linear_sparse_combiner"]
            )
            layer_summaries(logits, scope.name)
        parts.append((logits, optimizer, scope.name))
    logits = parts[0][0] if len(parts) == 1 else parts[0][0] + parts[1][0]

    def train_op_fn(loss):
        steps = [
            opt.minimize(
                loss, var_list=ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES, scope=name)
            )
            for _, opt, name in parts
        ]
        with ops.control_dependencies([control_flow_ops.group(*steps)]):
            return state_ops.assign_add(training_util.get_global_step(), 1)

    return head.create_estimator_spec(features, mode, logits, labels, train_op_fn=train_op_fn)


def _check_columns(linear_feature_columns, dnn_feature_columns) -> None:
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")


class _Combined(Estimator):
    def __init__(self, head, model_dir, config, warm_start_from, **opts):
        opts["linear_feature_columns"] = tuple(opts["linear_feature_columns"] or [])
        opts["dnn_feature_columns"] = tuple(opts["dnn_feature_columns"] or [])

        def _model_fn(features, labels, mode, config):
            return _combined_model_fn(features, labels, mode, head, config, opts)

        super().__init__(
            _model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )


class DNNLinearCombinedClassifier(_Combined):
    """A wide-and-deep classifier (binary for n_classes=2, else softmax).

    Raises:
      ValueError: neither linear nor DNN columns; n_classes < 2; (when the model is
        built) DNN columns without dnn_hidden_units.
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns=None,
        linear_optimizer="Ftrl",
        dnn_feature_columns=None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units=None,
        dnn_activation_fn=nn_ops.relu,
        dnn_dropout=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        input_layer_partitioner=None,
        config=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        batch_norm=False,
        linear_sparse_combiner="sum",
    ):
        _check_columns(linear_feature_columns, dnn_feature_columns)
        head = head_lib.classifier_head(n_classes, weight_column, loss_reduction, label_vocabulary)
        super().__init__(
            head,
            model_dir,
            config,
            warm_start_from,
            linear_feature_columns=linear_feature_columns,
            linear_optimizer=linear_optimizer,
            dnn_feature_columns=dnn_feature_columns,
            dnn_optimizer=dnn_optimizer,
            dnn_hidden_units=dnn_hidden_units,
            dnn_activation_fn=dnn_activation_fn,
            dnn_dropout=dnn_dropout,
            input_layer_partitioner=input_layer_partitioner,
            linear_sparse_combiner=linear_sparse_combiner,
        )


class DNNLinearCombinedRegressor(_Combined):
    """A wide-and-deep regressor (squared-error loss).

    Raises:
      ValueError: neither linear nor DNN columns; (when the model is built) DNN columns
        without dnn_hidden_units.
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns=None,
        linear_optimizer="Ftrl",
        dnn_feature_columns=None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units=None,
        dnn_activation_fn=nn_ops.relu,
        dnn_dropout=None,
        label_dimension=1,
        weight_column=None,
        input_layer_partitioner=None,
        config=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        batch_norm=False,
        linear_sparse_combiner="sum",
    ):
        _check_columns(linear_feature_columns, dnn_feature_columns)
        head = head_lib.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            model_dir,
            config,
            warm_start_from,
            linear_feature_columns=linear_feature_columns,
            linear_optimizer=linear_optimizer,
            dnn_feature_columns=dnn_feature_columns,
            dnn_optimizer=dnn_optimizer,
            dnn_hidden_units=dnn_hidden_units,
            dnn_activation_fn=dnn_activation_fn,
            dnn_dropout=dnn_dropout,
            input_layer_partitioner=input_layer_partitioner,
            linear_sparse_combiner=linear_sparse_combiner,
        )
