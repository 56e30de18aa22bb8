"""TrainSpec, EvalSpec and train_and_evaluate, run locally (TF1's estimator training).

Local only (no cluster, TF_CONFIG is not read): train until TrainSpec.max_steps while a
CheckpointSaverListener evaluates after checkpoints, at most once per
EvalSpec.throttle_secs and never for the checkpoint a run starts from, and once more at
the end for the last step when it was not evaluated yet. Exporters run after each
evaluation. Returns (last metrics, last export results), as TF's.
"""

from __future__ import annotations

import collections
import logging
import os

from asyncflow.estimator.estimator import Estimator
from asyncflow.train import basic_session_run_hooks as hooks_mod

__all__ = ["TrainSpec", "EvalSpec", "Exporter", "train_and_evaluate"]

logger = logging.getLogger("asyncflow.estimator")


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


class _EvalAfterSave(hooks_mod.CheckpointSaverListener):
    """Evaluates (and exports) after checkpoints, throttled; once more at the end."""

    def __init__(self, estimator, eval_spec, max_steps):
        self._estimator = estimator
        self._spec = eval_spec
        self._max_steps = max_steps
        self._timer = hooks_mod.SecondOrStepTimer(every_secs=eval_spec.throttle_secs)
        self._previous_path = None
        self.eval_result = None
        self.export_results = None

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
                self._spec.throttle_secs,
            )
        return False

    def end(self, session, global_step_value):
        if global_step_value != self._timer.last_triggered_step():
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value):
        self._timer.update_last_triggered_step(global_step_value)
        path = self._estimator.latest_checkpoint()
        if not path or path == self._previous_path:
            return
        self._previous_path = path
        spec = self._spec
        result = self._estimator.evaluate(
            spec.input_fn, steps=spec.steps, hooks=spec.hooks, checkpoint_path=path, name=spec.name
        )
        final = bool(self._max_steps) and result["global_step"] >= self._max_steps
        self.eval_result = result
        self.export_results = self._export(path, result, final)

    def _export(self, path, result, final):
        results = []
        base = os.path.join(self._estimator.model_dir, "export")
        for exporter in self._spec.exporters:
            results.append(
                exporter.export(
                    self._estimator,
                    os.path.join(base, exporter.name),
                    path,
                    result,
                    final,
                )
            )
        return results


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains `estimator` per train_spec, evaluating per eval_spec; local runs only.

    Returns (metrics of the last evaluation, export results), (None, None) when nothing
    was trained (max_steps already reached).

    Raises:
      TypeError: arguments of the wrong types.
      ValueError: the estimator's RunConfig saves no checkpoints.
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
    listener = _EvalAfterSave(estimator, eval_spec, train_spec.max_steps)
    estimator.train(
        train_spec.input_fn,
        hooks=list(train_spec.hooks),
        max_steps=train_spec.max_steps,
        saving_listeners=[listener, *train_spec.saving_listeners],
    )
    return listener.eval_result, listener.export_results
