"""TrainSpec, EvalSpec and train_and_evaluate, locally or on a cluster (TF1's rules).

Locally (no cluster in the RunConfig): train until TrainSpec.max_steps while a
CheckpointSaverListener evaluates after checkpoints, at most once per
EvalSpec.throttle_secs and never for the checkpoint a run starts from, and once more at
the end for the last step when it was not evaluated yet. Exporters run after each
evaluation. Returns (last metrics, last export results), as TF's.

On a cluster each task does its part, chosen by RunConfig.task_type, and returns None:
a "ps" starts its server and serves until the process ends; "chief" and "worker" start
theirs and train (a worker first waits (index + 1) * 5 s, at most 60 or
RunConfig.experimental_max_worker_delay_secs, as TF's, so the chief initialises first);
a legacy "master" trains and evaluates after its own checkpoints; the "evaluator",
outside the training cluster, waits start_delay_secs, then evaluates (and exports) each
new checkpoint, at most once per throttle_secs, until one reaches max_steps.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import time

from asyncflow import graph as ops
from asyncflow.estimator.estimator import Estimator
from asyncflow.estimator.std_server import start_std_server
from asyncflow.estimator.tf_config import TaskType
from asyncflow.train import basic_session_run_hooks as hooks_mod

__all__ = ["TrainSpec", "EvalSpec", "Exporter", "train_and_evaluate"]

logger = logging.getLogger("asyncflow.estimator")

_MAX_DELAY_SECS = 60
_DELAY_SECS_PER_WORKER = 5


def _check_input_fn(input_fn) -> None:
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")


def _checked_hooks(hooks) -> tuple:
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, hooks_mod.SessionRunHook):
            raise TypeError(f"All hooks must be `SessionRunHook` instances, given: {hook}")
    return hooks


class Exporter:
    """Base of the exporters an EvalSpec runs after each evaluation (TF1's Exporter)."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        raise NotImplementedError


def _checked_exporters(exporters) -> tuple:
    if exporters is None:
        return ()
    if isinstance(exporters, Exporter):
        return (exporters,)
    try:
        given = tuple(exporters)
    except TypeError:
        given = None
    if given is None or not all(isinstance(e, Exporter) for e in given):
        raise TypeError(
            "`exporters` must be an Exporter, an iterable of Exporter, or `None`, found "
            f"{exporters}."
        )
    exporters = given
    names = [e.name for e in exporters]
    if len(set(names)) != len(names) or None in names:
        raise ValueError(
            "`exporters` must have unique names. Such a name cannot be `None`. All exporter "
            f"names: {names}"
        )
    return exporters


class TrainSpec(collections.namedtuple("TrainSpec", "input_fn max_steps hooks saving_listeners")):
    """What train_and_evaluate trains on and how long.

    Raises:
      TypeError: input_fn not callable; a hook or listener of the wrong kind.
      ValueError: max_steps <= 0.
    """

    def __new__(cls, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        _check_input_fn(input_fn)
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        hooks = _checked_hooks(hooks)
        listeners = tuple(saving_listeners or [])
        for listener in listeners:
            if not isinstance(listener, hooks_mod.CheckpointSaverListener):
                raise TypeError(
                    "All saving_listeners must be `CheckpointSaverListener` instances, "
                    f"given: {listener}"
                )
        return super().__new__(cls, input_fn, max_steps, hooks, listeners)


_EVAL_FIELDS = "input_fn steps name hooks exporters start_delay_secs throttle_secs"


class EvalSpec(collections.namedtuple("EvalSpec", _EVAL_FIELDS)):
    """What train_and_evaluate evaluates on, how often, and what it exports.

    Raises:
      TypeError: input_fn not callable; a non-string name; a bad hook or exporter.
      ValueError: steps <= 0; negative start_delay_secs or throttle_secs.
    """

    def __new__(
        cls,
        input_fn,
        steps=100,
        name=None,
        hooks=None,
        exporters=None,
        start_delay_secs=120,
        throttle_secs=600,
    ):
        _check_input_fn(input_fn)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        hooks = _checked_hooks(hooks)
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        exporters = _checked_exporters(exporters)
        return super().__new__(
            cls, input_fn, steps, name, hooks, exporters, start_delay_secs, throttle_secs
        )


class _Evaluator:
    """Evaluates (and exports) the latest checkpoint when it is a new one."""

    def __init__(self, estimator, eval_spec, max_steps):
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_steps
        self._previous_path = None
        self.eval_result = None
        self.export_results = None

    def evaluate_and_export(self) -> bool:
        """Whether a new checkpoint was evaluated (eval_result holds its metrics)."""
        path = self._estimator.latest_checkpoint()
        if not path or path == self._previous_path:
            return False
        self._previous_path = path
        spec = self._spec
        result = self._estimator.evaluate(
            spec.input_fn, steps=spec.steps, hooks=spec.hooks, checkpoint_path=path, name=spec.name
        )
        final = bool(self._max_steps) and result["global_step"] >= self._max_steps
        self.eval_result = result
        self.export_results = self._export(path, result, final)
        return True

    def _export(self, path, result, final):
        base = os.path.join(self._estimator.model_dir, "export")
        return [
            exporter.export(
                self._estimator, os.path.join(base, exporter.name), path, result, final
            )
            for exporter in self._spec.exporters
        ]


class _EvalAfterSave(hooks_mod.CheckpointSaverListener):
    """Evaluates (and exports) after checkpoints, throttled; once more at the end."""

    def __init__(self, evaluator, throttle_secs):
        self._evaluator = evaluator
        self._throttle_secs = throttle_secs
        self._timer = hooks_mod.SecondOrStepTimer(every_secs=throttle_secs)

    def begin(self):
        self._timer.reset()
        self._first = True

    def after_save(self, session, global_step_value):
        if self._first:  # the checkpoint the run starts from was evaluated before, or is init
            self._first = False
            return False
        if self._timer.should_trigger_for_step(global_step_value):
            self._evaluate(global_step_value)
        else:
            logger.info(
                "Skip the current checkpoint eval due to throttle secs (%s secs).",
                self._throttle_secs,
            )
        return False

    def end(self, session, global_step_value):
        if global_step_value != self._timer.last_triggered_step():
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value):
        self._timer.update_last_triggered_step(global_step_value)
        self._evaluator.evaluate_and_export()


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains `estimator` per train_spec, evaluating per eval_spec, as this task's part.

    Locally: returns (metrics of the last evaluation, export results), (None, None)
    when nothing was trained (max_steps already reached). On a cluster (the
    RunConfig's TF_CONFIG): runs this task's part and returns None; a "ps" serves
    until its process ends.

    Raises:
      TypeError: arguments of the wrong types.
      ValueError: the estimator's RunConfig saves no checkpoints (locally); a cluster
        task type this cannot run ("local", an unknown job); an evaluator other than
        task 0.
      RuntimeError: a cluster task without the cluster details to start its server.
    """
    if not isinstance(estimator, Estimator):
        raise TypeError(
            f"`estimator` must have type `tf.estimator.Estimator`. Got: {type(estimator)}"
        )
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(
            f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: {type(train_spec)}"
        )
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(
            f"`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {type(eval_spec)}"
        )
    config = estimator.config
    if config.task_type == TaskType.EVALUATOR and config.task_id > 0:
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}"
        )
    if not config.cluster_spec and config.task_type != TaskType.EVALUATOR:
        return _run_local(estimator, train_spec, eval_spec)
    if not config.task_type:
        raise ValueError(
            "`estimator.config` must have task_type set. This usually means TF_CONFIG "
            "environment is not set correctly."
        )
    if config.task_type == "local":
        raise ValueError(
            "`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and `task` "
            "properties in TF_CONFIG absent triggers train and evaluate `Estimator` locally "
            "(non-distributed)."
        )
    run = _TASKS.get(config.task_type)
    if run is None:
        raise ValueError(
            f"Task type {config.task_type} is not supported. Supported task types are "
            f"{sorted(_TASKS)}"
        )
    run(estimator, train_spec, eval_spec)
    return None


def _run_local(estimator, train_spec, eval_spec):
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    listener = _EvalAfterSave(evaluator, eval_spec.throttle_secs)
    estimator.train(
        train_spec.input_fn,
        hooks=list(train_spec.hooks),
        max_steps=train_spec.max_steps,
        saving_listeners=[*train_spec.saving_listeners, listener],
    )
    return evaluator.eval_result, evaluator.export_results


def _run_chief(estimator, train_spec, eval_spec):
    _train_distributed(estimator, train_spec, train_spec.saving_listeners)


def _run_worker(estimator, train_spec, eval_spec):
    _train_distributed(estimator, train_spec, ())


def _run_master(estimator, train_spec, eval_spec):
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    listener = _EvalAfterSave(evaluator, eval_spec.throttle_secs)
    _train_distributed(estimator, train_spec, (*train_spec.saving_listeners, listener))


def _run_ps(estimator, train_spec, eval_spec):
    server = start_std_server(estimator.config)
    server.join()


def _run_evaluator(estimator, train_spec, eval_spec):
    if eval_spec.start_delay_secs:
        logger.info("Waiting %f secs before starting eval.", eval_spec.start_delay_secs)
        time.sleep(eval_spec.start_delay_secs)
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    max_steps = train_spec.max_steps
    evaluated = False
    while True:
        # As TF's: the pass that evaluates the final checkpoint still waits out its
        # throttle before the evaluator stops.
        step = evaluator.eval_result.get(ops.GraphKeys.GLOBAL_STEP) if evaluated else None
        if step and max_steps and step >= max_steps:
            logger.info(
                "Exiting evaluation, global_step=%s >= train max_steps=%s", step, max_steps
            )
            return
        start = time.monotonic()
        evaluated = evaluator.evaluate_and_export()
        left = eval_spec.throttle_secs - (time.monotonic() - start)
        if left > 0:
            logger.info("Waiting %f secs before starting next eval run.", left)
            time.sleep(left)


_TASKS = {
    TaskType.CHIEF: _run_chief,
    TaskType.EVALUATOR: _run_evaluator,
    TaskType.MASTER: _run_master,
    TaskType.PS: _run_ps,
    TaskType.WORKER: _run_worker,
}


def _is_google_env() -> bool:
    """TF_CONFIG's "environment" is "google": the platform runs the servers itself."""
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except ValueError:
        return False
    return isinstance(tf_config, dict) and tf_config.get("environment") == "google"


def _train_distributed(estimator, train_spec, saving_listeners):
    config = estimator.config
    # The server starts before the delay below, so the other tasks can reach this one.
    if not _is_google_env():
        start_std_server(config)
    delay = 0
    if config.task_type == TaskType.WORKER:
        max_delay = _MAX_DELAY_SECS
        if config.experimental_max_worker_delay_secs is not None:
            max_delay = int(config.experimental_max_worker_delay_secs)
        delay = min(max_delay, (config.task_id + 1) * _DELAY_SECS_PER_WORKER)
    if delay > 0:
        logger.info("Waiting %d secs before starting training.", delay)
        time.sleep(delay)
    estimator.train(
        input_fn=train_spec.input_fn,
        max_steps=train_spec.max_steps,
        hooks=list(train_spec.hooks),
        saving_listeners=list(saving_listeners),
    )
