"""DNNClassifier / DNNRegressor: a feed-forward network over feature columns (TF1's v1).

Layout as TF's, so checkpoints name the same variables: the dense input under
'dnn/input_from_feature_columns', then 'dnn/hiddenlayer_<i>/{kernel,bias}' (ReLU by
default, Glorot-uniform kernels, zero biases) and 'dnn/logits/{kernel,bias}'. The
default optimizer is Adagrad at 0.05, as TF's. With a graph seed the kernels draw the
same numbers as TF's (the n-th unseeded random op gets op seed n in both).
"""

from __future__ import annotations

from asyncflow import feature_column as fc_lib
from asyncflow import layer_functions as layers
from asyncflow import losses, nn_composites
from asyncflow import var_scope as vs
from asyncflow.estimator.canned import head as head_lib
from asyncflow.estimator.canned.optimizers import get_optimizer_instance
from asyncflow.estimator.estimator import Estimator
from asyncflow.ops import init_ops, nn_ops, summary_ops
from asyncflow.partitioned_variables import min_max_variable_partitioner

__all__ = ["DNNClassifier", "DNNRegressor"]

_LEARNING_RATE = 0.05


def dnn_logits(features, units, hidden_units, columns, activation_fn, dropout, training):
    """The network's logits [batch, units] (TF's layout and per-layer summaries)."""
    with vs.variable_scope("input_from_feature_columns"):
        net = fc_lib.input_layer(features, columns)
    for layer_id, num_units in enumerate(hidden_units):
        # dense(name=...) under 'dnn' gives TF's 'dnn/hiddenlayer_<i>/kernel'.
        net = layers.dense(
            net,
            units=num_units,
            activation=activation_fn,
            kernel_initializer=init_ops.glorot_uniform_initializer(),
            name=f"hiddenlayer_{layer_id}",
        )
        if dropout is not None and training:
            net = layers.dropout(net, rate=dropout, training=True)
        layer_summaries(net, f"{vs.get_variable_scope().name}/hiddenlayer_{layer_id}")
    logits = layers.dense(
        net,
        units=units,
        activation=None,
        kernel_initializer=init_ops.glorot_uniform_initializer(),
        name="logits",
    )
    layer_summaries(logits, f"{vs.get_variable_scope().name}/logits")
    return logits


def layer_summaries(value, tag) -> None:
    """TF's per-layer summaries: the fraction of zero activations and a histogram.

    TF tags them with the layer's variable scope name inside the model's name scope,
    hence 'dnn/dnn/hiddenlayer_0/activation'.
    """
    summary_ops.scalar(f"{tag}/fraction_of_zero_values", nn_composites.zero_fraction(value))
    summary_ops.histogram(f"{tag}/activation", value)


class _DNN(Estimator):
    def __init__(
        self,
        head,
        hidden_units,
        feature_columns,
        model_dir,
        optimizer,
        config,
        warm_start_from,
        activation_fn,
        dropout,
        input_layer_partitioner,
    ):
        columns = tuple(feature_columns or [])
        hidden_units = tuple(hidden_units)

        def _model_fn(features, labels, mode, config):
            if not isinstance(features, dict):
                raise ValueError(
                    f"features should be a dictionary of `Tensor`s. Given type: {type(features)}"
                )
            partitioner = input_layer_partitioner or min_max_variable_partitioner(
                max_partitions=max(config.num_ps_replicas, 1), min_slice_size=64 << 20
            )
            opt = get_optimizer_instance(optimizer, _LEARNING_RATE) if mode == "train" else None
            # Partitioned variables and the head inside 'dnn', as TF's: the slots'
            # checkpoint names then come out as TF's ('dnn/.../kernel/t_0/Adagrad').
            with vs.variable_scope(
                "dnn", values=tuple(features.values()), partitioner=partitioner
            ):
                logits = dnn_logits(
                    features,
                    head.logits_dimension,
                    hidden_units,
                    columns,
                    activation_fn,
                    dropout,
                    mode == "train",
                )
                return head.create_estimator_spec(features, mode, logits, labels, opt)

        super().__init__(
            _model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from
        )


class DNNClassifier(_DNN):
    """A DNN classifier (binary for n_classes=2, else softmax) over feature_columns.

    Raises:
      ValueError: n_classes < 2.
    """

    def __init__(
        self,
        hidden_units,
        feature_columns,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Adagrad",
        activation_fn=nn_ops.relu,
        dropout=None,
        input_layer_partitioner=None,
        config=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        batch_norm=False,
    ):
        head = head_lib.classifier_head(n_classes, weight_column, loss_reduction, label_vocabulary)
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            activation_fn,
            dropout,
            input_layer_partitioner,
        )


class DNNRegressor(_DNN):
    """A DNN regressor over feature_columns (squared-error loss)."""

    def __init__(
        self,
        hidden_units,
        feature_columns,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        optimizer="Adagrad",
        activation_fn=nn_ops.relu,
        dropout=None,
        input_layer_partitioner=None,
        config=None,
        warm_start_from=None,
        loss_reduction=losses.Reduction.SUM,
        batch_norm=False,
    ):
        head = head_lib.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            hidden_units,
            feature_columns,
            model_dir,
            optimizer,
            config,
            warm_start_from,
            activation_fn,
            dropout,
            input_layer_partitioner,
        )
