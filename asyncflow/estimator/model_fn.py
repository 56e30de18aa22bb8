"""ModeKeys and EstimatorSpec: what a model_fn is told and what it hands back (TF1's).

EstimatorSpec is a namedtuple checked at construction, as TF's: the mode decides which
fields are required (TRAIN: loss and train_op; EVAL: loss; PREDICT: predictions), and
every tensor must come from the default graph (the one the Estimator built for this
call). Invariant: a spec's tensors all live in one graph, and `loss` is a scalar.
"""

from __future__ import annotations

import collections

from asyncflow import graph as ops
from asyncflow.estimator import export_output
from asyncflow.ops import array_ops
from asyncflow.train import basic_session_run_hooks as hooks_mod
from asyncflow.train import monitored_session

__all__ = ["ModeKeys", "EstimatorSpec"]


class ModeKeys:
    """The three modes a model_fn is called in (TF1's `tf.estimator.ModeKeys`)."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


def _check_in_graph(value, name: str, graph) -> None:
    if getattr(value, "graph", graph) is not graph:
        raise ValueError(
            f'{name} with "{value.name}" must be from the default graph. Possible causes'
            f" of this error include: \n\n1) {name} was created outside the context of"
            " the default graph.\n\n2) The object passed through to EstimatorSpec was not"
            ' created in the most recent call to "model_fn".'
        )


def _checked_loss(loss, graph):
    if loss is None:
        return None
    if not isinstance(loss, ops.Tensor):
        raise TypeError(f"loss must be Tensor, given: {loss}")
    _check_in_graph(loss, "loss", graph)
    shape = loss.shape
    if shape.ndims is not None and shape.num_elements() == 1 and shape.ndims > 0:
        # TF accepts a one-element loss and reshapes it to the scalar it needs.
        return array_ops.reshape(loss, [])
    if shape.ndims is not None and shape.ndims != 0:
        raise ValueError(f"Loss must be scalar, given: {loss}")
    return loss


def _checked_predictions(predictions, graph):
    if predictions is None:
        return {}
    if isinstance(predictions, dict):
        for key, value in predictions.items():
            if not isinstance(value, ops.Tensor):
                raise TypeError(f"predictions[{key}] must be Tensor, given: {value}")
            _check_in_graph(value, f"predictions[{key}]", graph)
        return predictions
    if not isinstance(predictions, ops.Tensor):
        raise TypeError(f"predictions must be Tensor, given: {predictions}")
    _check_in_graph(predictions, "predictions", graph)
    return predictions


def _checked_train_op(train_op, graph):
    if train_op is None:
        return None
    if not isinstance(train_op, ops.Tensor | ops.Operation):
        raise TypeError(f"train_op must be Operation or Tensor, given: {train_op}")
    _check_in_graph(train_op, "train_op", graph)
    return train_op


def _checked_metric_ops(eval_metric_ops, graph):
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                "Values of eval_metric_ops must be (metric_value, update_op) tuples, "
                f"given: {value} for key: {key}"
            )
        for item in value:
            _check_in_graph(item, f"eval_metric_ops[{key}]", graph)
    return eval_metric_ops


def _checked_hooks(hooks) -> tuple:
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, hooks_mod.SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return hooks


def _default_export_outputs(mode, predictions):
    if mode != ModeKeys.PREDICT:
        return None
    return {"serving_default": export_output.PredictOutput(predictions)}


_FIELDS = (
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metric_ops",
    "export_outputs",
    "training_chief_hooks",
    "training_hooks",
    "scaffold",
    "evaluation_hooks",
    "prediction_hooks",
)


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """What a model_fn returns: the ops and tensors the Estimator runs in one mode.

    Raises:
      ValueError: a field the mode needs is missing ("Missing loss." ...); a non-scalar
        loss; a tensor from another graph; `_replace` changing the mode.
      TypeError: a field of the wrong kind (loss not a Tensor, a hook that is not a
        SessionRunHook, ...).
    """

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metric_ops=None,
        export_outputs=None,
        training_chief_hooks=None,
        training_hooks=None,
        scaffold=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        graph = ops.get_default_graph()
        if mode == ModeKeys.TRAIN and loss is None:
            raise ValueError("Missing loss.")
        if mode == ModeKeys.TRAIN and train_op is None:
            raise ValueError("Missing train_op.")
        if mode == ModeKeys.EVAL and loss is None:
            raise ValueError("Missing loss.")
        if mode == ModeKeys.PREDICT and predictions is None:
            raise ValueError("Missing predictions.")
        loss = _checked_loss(loss, graph)
        predictions = _checked_predictions(predictions, graph)
        train_op = _checked_train_op(train_op, graph)
        eval_metric_ops = _checked_metric_ops(eval_metric_ops, graph)
        if export_outputs is None:
            export_outputs = _default_export_outputs(mode, predictions)
        hooks = [
            _checked_hooks(h)
            for h in (training_chief_hooks, training_hooks, evaluation_hooks, prediction_hooks)
        ]
        scaffold = scaffold or monitored_session.Scaffold()
        if not isinstance(scaffold, monitored_session.Scaffold):
            raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
        return super().__new__(
            cls,
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=eval_metric_ops,
            export_outputs=export_outputs,
            training_chief_hooks=hooks[0],
            training_hooks=hooks[1],
            scaffold=scaffold,
            evaluation_hooks=hooks[2],
            prediction_hooks=hooks[3],
        )

    def _replace(self, **kwds):
        if "mode" in kwds and self.mode != kwds["mode"]:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        return EstimatorSpec(**{**self._asdict(), **kwds})
