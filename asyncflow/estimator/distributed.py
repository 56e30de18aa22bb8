"""Estimator training under a tf.distribute strategy (`RunConfig(train_distribute=...)`).

As TF's estimator: the graph is built in the strategy's scope; the input function's
dataset feeds the replicas one element (batch) each per step, in turn; model_fn runs once
per replica; the step's loss is the replicas' losses combined (their mean when the
optimizer scaled each replica's loss, else their sum); the training op is every
replica's; hooks and the scaffold come from the first replica.  While building, the
strategy asks the optimizers to scale MEAN-reduced losses by the number of replicas.
"""

from __future__ import annotations

import inspect

from asyncflow import graph as ops
from asyncflow import random_seed
from asyncflow.distribute import context as distribute_context
from asyncflow.estimator import model_fn as model_fn_lib
from asyncflow.train import basic_session_run_hooks as hooks_mod
from asyncflow.train import training_util

__all__ = ["build_distributed_train_spec"]


class _IteratorInitializerHook(hooks_mod.SessionRunHook):
    """Starts the distributed input when the session is created."""

    def __init__(self, iterator):
        self._iterator = iterator

    def after_create_session(self, session, coord):
        session.run(self._iterator.initializer)


def build_distributed_train_spec(estimator, strategy, input_fn):
    """In the default graph: the TRAIN EstimatorSpec of every replica combined, the
    global step, and the hooks that start the input."""
    mode = model_fn_lib.ModeKeys.TRAIN
    strategy._scale_loss_for_estimator = True
    try:
        with strategy.scope():
            random_seed.set_random_seed(estimator.config.tf_random_seed)
            iterator = strategy.make_input_fn_iterator(
                lambda context: _call_input_fn(estimator, input_fn, mode, context)
            )
            global_step = training_util.create_global_step()
            features, labels = _features_and_labels(iterator.get_next())
            specs: dict = {}

            def replica_fn(features, labels):
                spec = estimator._call_model_fn(features, labels, mode, estimator.config)
                replica = distribute_context.get_replica_context()
                specs[replica._replica_id] = spec
                return spec.loss, spec.train_op

            loss, train_op = strategy.extended.call_for_each_replica(
                replica_fn, args=(features, labels)
            )
            scaled = ops.get_default_graph()._attached.get("loss_scaled_by_optimizer")
            reduce_op = "mean" if scaled else "sum"
            loss = strategy.reduce(reduce_op, loss, axis=None)
            first = specs[0]
            spec = model_fn_lib.EstimatorSpec(
                mode,
                loss=loss,
                train_op=strategy.group(train_op),
                training_hooks=list(first.training_hooks),
                training_chief_hooks=list(first.training_chief_hooks),
                scaffold=first.scaffold,
            )
    finally:
        strategy._scale_loss_for_estimator = False
    return spec, global_step, [_IteratorInitializerHook(iterator)]


def _call_input_fn(estimator, input_fn, mode, input_context):
    """input_fn's dataset, called with the arguments it names (TF's)."""
    args = inspect.signature(input_fn).parameters
    offered = {
        "mode": mode,
        "params": estimator.params,
        "config": estimator.config,
        "input_context": input_context,
    }
    kwargs = {k: v for k, v in offered.items() if k in args}
    with ops.device("/cpu:0"):
        return input_fn(**kwargs)


def _features_and_labels(element):
    if isinstance(element, tuple) and len(element) == 2:
        return element
    return element, None


def build_distributed_eval(estimator, strategy, input_fn):
    """In the default graph, under `strategy`: (the first replica's EVAL spec, the op
    updating every replica's metrics, {name: value} with 'loss' and the global step,
    the hooks that start the input).  The values are computed across the replicas (every
    tf.metrics value is one tensor over the replicas' summed variables; a value that is
    still per replica is refused, not half counted).

    Raises:
      ValueError: a metric named 'loss' or 'global_step' (TF's).
      NotImplementedError: a metric whose value is not combined across replicas.
    """
    from asyncflow import metrics as metrics_lib

    mode = model_fn_lib.ModeKeys.EVAL
    with strategy.scope():
        random_seed.set_random_seed(estimator.config.tf_random_seed)
        iterator = strategy.make_input_fn_iterator(
            lambda context: _call_input_fn(estimator, input_fn, mode, context)
        )
        global_step = training_util.create_global_step()
        features, labels = _features_and_labels(iterator.get_next())
        specs: dict = {}

        def replica_fn(features, labels):
            spec = estimator._call_model_fn(features, labels, mode, estimator.config)
            specs[distribute_context.get_replica_context()._replica_id] = spec
            metric_ops = dict(spec.eval_metric_ops)
            if "loss" in metric_ops:
                raise ValueError(
                    'Metric with name "loss" is not allowed, because Estimator already '
                    "defines a default metric with the same name."
                )
            metric_ops["loss"] = metrics_lib.mean(spec.loss)
            return {name: tuple(metric_ops[name]) for name in sorted(metric_ops)}

        grouped = strategy.extended.call_for_each_replica(replica_fn, args=(features, labels))
        values, updates = {}, []
        for name in sorted(grouped):
            value, update = grouped[name]
            if len(strategy.experimental_local_results(value)) > 1:
                raise NotImplementedError(
                    f"The eval metric {name!r} is not combined across replicas in asyncflow "
                    "(its value differs per replica: the top-k metrics' do, and TF's fail "
                    "under a strategy): evaluate without eval_distribute."
                )
            values[name] = value
            updates.append(strategy.group(update))
        if ops.GraphKeys.GLOBAL_STEP in values:
            raise ValueError(
                "Metric with name `global_step` is not allowed, because Estimator already "
                "defines a default metric with the same name."
            )
        values[ops.GraphKeys.GLOBAL_STEP] = global_step
        from asyncflow.ops import control_flow_ordering

        update_op = control_flow_ordering.group(*updates)
    return specs[0], update_op, values, [_IteratorInitializerHook(iterator)]
