"""Estimator: train / evaluate / predict a model_fn in fresh graphs (TF1's tf.estimator).

Every call builds a new Graph (seeded from RunConfig.tf_random_seed), creates the global
step, calls input_fn then model_fn with the mode, and runs the spec through a monitored
session: training through MonitoredTrainingSession with a CheckpointSaverHook writing
model_dir/model.ckpt-N (so a later call resumes from the latest checkpoint), evaluation
and prediction through a MonitoredSession that restores that checkpoint (or initialises,
when there is none). Evaluation results are also written as summaries under
model_dir/eval[_name], at the restored global step.

On a cluster (RunConfig from TF_CONFIG) training runs in the task's session master,
with variables placed on the parameter servers by a replica_device_setter (unless the
RunConfig gives a device_fn); only the chief initialises, saves checkpoints and writes
summaries, the other workers wait for the chief's model. Evaluation runs against
RunConfig.evaluation_master, prediction against RunConfig.master, as TF's.

Invariant: nothing outlives a call except files in model_dir; the Estimator holds only
its configuration.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import shutil
import tempfile
import time

import numpy as np

from asyncflow import dtypes, errors, random_seed
from asyncflow import graph as ops
from asyncflow import metrics as metrics_lib
from asyncflow import summary as summary_lib
from asyncflow.config import ConfigProto
from asyncflow.data.dataset import Dataset as _Dataset
from asyncflow.estimator import export as export_lib
from asyncflow.estimator import model_fn as model_fn_lib
from asyncflow.estimator import std_server, warm_starting
from asyncflow.estimator.distributed import (
    build_distributed_eval,
    build_distributed_train_spec,
)
from asyncflow.estimator.run_config import RunConfig
from asyncflow.estimator.tf_config import TaskType
from asyncflow.framework_extras import make_tensor_proto
from asyncflow.ops import control_flow_ops
from asyncflow.protos import Summary
from asyncflow.saved_model import builder as saved_model_builder
from asyncflow.saved_model import tag_constants
from asyncflow.session import Session
from asyncflow.train import basic_session_run_hooks as hooks_mod
from asyncflow.train import checkpoint_utils, device_setter, training_util
from asyncflow.train import monitored_session as ms
from asyncflow.train import saver as saver_lib

__all__ = ["Estimator"]

logger = logging.getLogger("asyncflow.estimator")

_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "config"}


def _fn_args(fn) -> tuple:
    if not callable(fn):
        raise TypeError("unsupported callable")
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e:
        raise TypeError("unsupported callable") from e
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in params if p.kind in kinds)


def _verify_model_fn_args(model_fn, params) -> None:
    args = set(_fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, but params "
            f"({params}) is passed to Estimator."
        )
    unexpected = sorted(args - _MODEL_FN_ARGS - {"self"})
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


def _check_hooks_type(hooks) -> list:
    hooks = list(hooks or [])
    for hook in hooks:
        if not isinstance(hook, hooks_mod.SessionRunHook):
            raise TypeError(f"Hooks must be a SessionRunHook, given: {hook}")
    return hooks


def _check_listeners_type(listeners) -> list:
    listeners = list(listeners or [])
    for listener in listeners:
        if not isinstance(listener, hooks_mod.CheckpointSaverListener):
            raise TypeError(
                f"saving_listeners must be a list of CheckpointSaverListener, given: {listener}"
            )
    return listeners


def _parse_input_fn_result(result):
    """(features, labels) from what input_fn returned: a Dataset, a pair, or features."""
    if isinstance(result, _Dataset):
        result = result.make_one_shot_iterator().get_next()
    if isinstance(result, list | tuple):
        if len(result) == 2:
            return result[0], result[1]
        if len(result) == 1:
            return result[0], None
        raise ValueError("input_fn should return (features, labels) as a len 2 tuple.")
    return result, None


def _global_step_in(checkpoint_dir) -> int:
    path = saver_lib.latest_checkpoint(checkpoint_dir)
    if not path:
        return 0
    try:
        return int(checkpoint_utils.load_variable(path, ops.GraphKeys.GLOBAL_STEP))
    except Exception:  # noqa: BLE001 - TF's rule: an unreadable step counts as 0
        return 0


def _extract_keys(predictions, predict_keys):
    if predict_keys is None:
        return predictions
    if not isinstance(predict_keys, list | tuple):
        predict_keys = [predict_keys]
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    existing = predictions.keys()
    chosen = {k: v for k, v in predictions.items() if k in predict_keys}
    if not chosen:
        raise ValueError(
            f"Expected to run at least one output from {existing}, provided {predict_keys}."
        )
    return chosen


def _batch_length(values: dict) -> int:
    length = None
    for key, value in values.items():
        n = np.asarray(value).shape[0] if np.ndim(value) else 1
        if length is not None and n != length:
            raise ValueError(
                f"Batch length of predictions should be same. {key} has different batch "
                "length than others."
            )
        length = n
    return length or 0


def _write_dict_to_summary(output_dir, dictionary, global_step) -> None:
    summary = Summary()
    for key in sorted(dictionary):
        value = dictionary[key]
        if key == ops.GraphKeys.GLOBAL_STEP or value is None:
            continue
        if isinstance(value, np.floating | float | np.integer | int) or (
            isinstance(value, np.ndarray) and value.size == 1
        ):
            summary.value.add(tag=key, simple_value=float(value))
        else:
            logger.warning(
                "Skipping summary for %s, must be a float, np.float32, np.int64, np.int32 or int.",
                key,
            )
    writer = summary_lib.FileWriterCache.get(output_dir)
    writer.add_summary(summary, int(global_step))
    writer.flush()


def _write_checkpoint_path_to_summary(output_dir, checkpoint_path, global_step) -> None:
    """TF's 'checkpoint_path' tensor summary: which checkpoint the metrics are of."""
    summary = Summary()
    tensor = make_tensor_proto(checkpoint_path, dtype=dtypes.string)
    summary.value.add(tag="checkpoint_path", tensor=tensor)
    writer = summary_lib.FileWriterCache.get(output_dir)
    writer.add_summary(summary, int(global_step))
    writer.flush()


def _replica_device_setter(config):
    """TF's default device_fn on a cluster with parameter servers (None without)."""
    if config.num_ps_replicas <= 0:
        return None
    if config.task_type:
        worker_device = f"/job:{config.task_type}/task:{config.task_id}"
    else:
        worker_device = "/job:worker"
    return device_setter.replica_device_setter(
        ps_tasks=config.num_ps_replicas,
        worker_device=worker_device,
        merge_devices=True,
        ps_ops=list(device_setter.STANDARD_PS_OPS),
        cluster=config.cluster_spec,
    )


class _CreationDeadline(ms.SessionCreator):
    """Bounds how long session (re)creation may keep failing because a task is down.

    MonitoredSession retries a creation that fails with UnavailableError or AbortedError
    without end; TF documents RunConfig.session_creation_timeout_secs as the most a
    trainer waits for a session "on initialization or when recovering a session", so
    past it the error becomes a DeadlineExceededError that ends training (a lost ps that
    never returns, instead of a silent stall).
    """

    def __init__(self, creator, max_wait_secs):
        self._creator = creator
        self._max_wait_secs = max_wait_secs
        self._failing_since = None

    def create_session(self):
        start = time.monotonic()
        try:
            sess = self._creator.create_session()
        except (errors.UnavailableError, errors.AbortedError) as e:
            self._failing_since = self._failing_since or start
            if time.monotonic() - self._failing_since >= self._max_wait_secs:
                raise errors.DeadlineExceededError(
                    None,
                    None,
                    f"Could not create a session within {self._max_wait_secs} secs "
                    f"(RunConfig.session_creation_timeout_secs): {e.message}",
                ) from e
            raise
        self._failing_since = None
        return sess


class _StopAfterNEvalsHook(hooks_mod.SessionRunHook):
    """Requests a stop after `num_evals` evaluation steps."""

    def __init__(self, num_evals):
        self._num_evals = num_evals
        self._done = 0

    def after_run(self, run_context, run_values):
        self._done += 1
        if self._done >= self._num_evals:
            run_context.request_stop()


def _between_graph(config, strategy) -> bool:
    """Whether `strategy` trains between graphs on the cluster of `config` (TF's
    distribute coordinator's independent-worker mode)."""
    if not config.cluster_spec or config.task_type is None:
        return False
    return bool(getattr(strategy.extended, "experimental_between_graph", False))


class Estimator:
    """Trains, evaluates and predicts with a model_fn (TF1's `tf.estimator.Estimator`).

    Raises (constructor):
      ValueError: config is not a RunConfig; model_dir differs from config.model_dir;
        model_fn lacks `features`, takes unknown arguments, or lacks `params` while
        params are given.
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ValueError(f"config must be an instance of `RunConfig`, but provided {config}.")
        if model_dir is not None and config.model_dir is not None:
            if model_dir != config.model_dir:
                raise ValueError(
                    "`model_dir` are set both in constructor and `RunConfig`, but with "
                    f"different values. In constructor: '{model_dir}', in `RunConfig`: "
                    f"'{config.model_dir}' "
                )
        model_dir = model_dir or config.model_dir
        if model_dir is None:
            model_dir = tempfile.mkdtemp()
            logger.warning("Using temporary folder as model directory: %s", model_dir)
        self._config = config.replace(model_dir=model_dir)
        self._model_dir = model_dir
        _verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params or {})
        self._warm_start_from = warm_start_from
        self._session_config = config.session_config or ConfigProto(allow_soft_placement=True)
        self._device_fn = self._config.device_fn or _replica_device_setter(self._config)

    model_dir = property(lambda self: self._model_dir)
    config = property(lambda self: copy.deepcopy(self._config))
    params = property(lambda self: copy.deepcopy(self._params))

    @property
    def model_fn(self):
        """The model_fn as `fn(features, labels, mode, config)` returning an EstimatorSpec."""

        def public_model_fn(features, labels, mode, config):
            return self._call_model_fn(features, labels, mode, config)

        return public_model_fn

    def eval_dir(self, name=None) -> str:
        return os.path.join(self._model_dir, "eval_" + name if name else "eval")

    def latest_checkpoint(self):
        return saver_lib.latest_checkpoint(self._model_dir)

    def _checkpoint_or_raise(self):
        path = self.latest_checkpoint()
        if not path:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        return path

    def get_variable_names(self) -> list:
        """Names of the variables in the latest checkpoint.

        Raises:
          ValueError: model_dir holds no checkpoint.
        """
        self._checkpoint_or_raise()
        return [name for name, _ in checkpoint_utils.list_variables(self._model_dir)]

    def get_variable_value(self, name):
        """The value of variable `name` in the latest checkpoint.

        Raises:
          ValueError: model_dir holds no checkpoint.
          NotFoundError: no such variable.
        """
        self._checkpoint_or_raise()
        return checkpoint_utils.load_variable(self._model_dir, name)

    # -- calling the user's functions ------------------------------------------------------

    def _call_input_fn(self, input_fn, mode):
        args = _fn_args(input_fn)
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = self.config
        with ops.device("/cpu:0"):
            return _parse_input_fn_result(input_fn(**kwargs))

    def _call_model_fn(self, features, labels, mode, config):
        args = _fn_args(self._model_fn)
        kwargs = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = config
        spec = self._model_fn(features=features, **kwargs)
        if not isinstance(spec, model_fn_lib.EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec.")
        return spec

    def _build(self, input_fn, mode):
        """In the default graph: seed, global step, input_fn, model_fn -> (spec, step)."""
        random_seed.set_random_seed(self._config.tf_random_seed)
        global_step = training_util.create_global_step()
        features, labels = self._call_input_fn(input_fn, mode)
        if mode == model_fn_lib.ModeKeys.PREDICT:
            labels = None
        spec = self._call_model_fn(features, labels, mode, self.config)
        return spec, global_step

    def _maybe_warm_start(self, checkpoint_path):
        if self._warm_start_from is not None and not checkpoint_path:
            warm_starting.warm_start(self._warm_start_from)

    # -- train -----------------------------------------------------------------------------

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains for `steps` more steps, or until global step `max_steps`; returns self.

        Raises:
          ValueError: both steps and max_steps; a non-positive count; saving listeners
            with no checkpoint saving; a RunConfig for an evaluator or a ps task.
          TypeError: a hook that is not a SessionRunHook.
        """
        if self._config.task_type in (TaskType.EVALUATOR, TaskType.PS):
            raise ValueError(
                "Train has been called wrong configuration. Please use "
                "tf.estimator.train_and_evaluate which calls proper API according to given "
                f"configuration. Current configuration: {self.config}."
            )
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None and max_steps <= _global_step_in(self._model_dir):
            logger.info("Skipping training since max_steps has already saved.")
            return self
        hooks = _check_hooks_type(hooks)
        if steps is not None or max_steps is not None:
            hooks.append(hooks_mod.StopAtStepHook(steps, max_steps))
        listeners = _check_listeners_type(saving_listeners)
        strategy = self._config.train_distribute
        if strategy is not None:  # tf.distribute: one replica of the model per device
            between = _between_graph(self._config, strategy)
            if between:  # each task of the cluster trains its own graph, on its own server
                std_server.start_std_server(self._config)
            self._between_graph_strategy = strategy if between else None
            try:
                with ops.Graph().as_default():
                    spec, global_step, input_hooks = build_distributed_train_spec(
                        self, strategy, input_fn
                    )
                    loss = self._train_with_spec(spec, global_step, hooks + input_hooks, listeners)
            finally:
                self._between_graph_strategy = None
            logger.info("Loss for final step: %s.", loss)
            return self
        with ops.Graph().as_default() as graph, graph.device(self._device_fn):
            spec, global_step = self._build(input_fn, model_fn_lib.ModeKeys.TRAIN)
            loss = self._train_with_spec(spec, global_step, hooks, listeners)
        logger.info("Loss for final step: %s.", loss)
        return self

    def _training_hooks(self, spec, global_step, hooks):
        worker_hooks = list(hooks)
        worker_hooks.append(hooks_mod.NanTensorHook(spec.loss))
        if self._config.log_step_count_steps is not None:
            worker_hooks.append(
                hooks_mod.LoggingTensorHook(
                    {"loss": spec.loss, "step": global_step},
                    every_n_iter=self._config.log_step_count_steps,
                )
            )
        worker_hooks.extend(spec.training_hooks)
        return worker_hooks

    def _chief_hooks(self, spec, worker_hooks, listeners):
        all_hooks = worker_hooks + list(spec.training_chief_hooks)
        saver_hooks = [h for h in all_hooks if isinstance(h, hooks_mod.CheckpointSaverHook)]
        chief_hooks = []
        config = self._config
        if (config.save_checkpoints_secs or config.save_checkpoints_steps) and not saver_hooks:
            chief_hooks.append(
                hooks_mod.CheckpointSaverHook(
                    self._model_dir,
                    save_secs=config.save_checkpoints_secs,
                    save_steps=config.save_checkpoints_steps,
                    scaffold=spec.scaffold,
                    save_graph_def=config.checkpoint_save_graph_def,
                )
            )
            saver_hooks = chief_hooks
        if listeners:
            if not saver_hooks:
                raise ValueError(
                    "There should be a CheckpointSaverHook to use saving_listeners. Please "
                    "set one of the RunConfig.save_checkpoints_steps or "
                    "RunConfig.save_checkpoints_secs."
                )
            known = saver_hooks[0]._listeners
            known.extend(x for x in listeners if x not in known)
        return chief_hooks + list(spec.training_chief_hooks)

    def _train_with_spec(self, spec, global_step, hooks, listeners):
        self._maybe_warm_start(self.latest_checkpoint())
        summaries = ops.get_collection(ops.GraphKeys.SUMMARIES)
        if not any(s.op.name == "loss" for s in summaries):
            summary_lib.scalar("loss", spec.loss)
        ops.add_to_collection(ops.GraphKeys.LOSSES, spec.loss)
        worker_hooks = self._training_hooks(spec, global_step, hooks)
        if not (spec.scaffold.saver or ops.get_collection(ops.GraphKeys.SAVERS)):
            ops.add_to_collection(
                ops.GraphKeys.SAVERS,
                saver_lib.Saver(
                    sharded=True,
                    max_to_keep=self._config.keep_checkpoint_max,
                    keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours,
                    defer_build=True,
                    save_relative_paths=True,
                ),
            )
        chief_hooks = self._chief_hooks(spec, worker_hooks, listeners)
        save_summary_steps, log_step_count_steps = self._summary_cadence(spec, worker_hooks)
        loss = None
        any_step_done = False
        with self._monitored_training_session(
            spec.scaffold, worker_hooks, chief_hooks, save_summary_steps, log_step_count_steps
        ) as mon_sess:
            while not mon_sess.should_stop():
                _, loss = mon_sess.run([spec.train_op, spec.loss])
                any_step_done = True
        if not any_step_done:
            logger.warning(
                "Training with estimator made no steps. Perhaps input is empty or misspecified."
            )
        return loss

    def _monitored_training_session(
        self, scaffold, worker_hooks, chief_hooks, save_summary_steps, log_step_count_steps
    ):
        """MonitoredTrainingSession's session, its creation bounded (_CreationDeadline)."""
        config = self._config
        all_hooks = ms._training_hooks(
            config.is_chief,
            self._model_dir,
            scaffold,
            worker_hooks,
            chief_hooks,
            0,  # save_checkpoint_secs: the CheckpointSaverHook in chief_hooks saves
            save_summary_steps,
            ms.USE_DEFAULT,
            log_step_count_steps,
            ms.USE_DEFAULT,
            None,
            config.checkpoint_save_graph_def,
        )
        init_here, session_config = config.is_chief, self._session_config
        strategy = getattr(self, "_between_graph_strategy", None)
        if strategy is not None:
            # Between-graph (MultiWorkerMirroredStrategy): every worker initializes its own
            # copies (their initial values meet in a collective broadcast), with the
            # strategy's session settings.
            init_here = strategy.extended.experimental_should_init
            session_config = strategy.update_config_proto(session_config)
        creator = ms._training_creator(
            config.master,
            init_here,
            self._model_dir,
            scaffold,
            session_config,
            config.session_creation_timeout_secs,
        )
        deadline = _CreationDeadline(creator, config.session_creation_timeout_secs)
        return ms.MonitoredSession(session_creator=deadline, hooks=all_hooks)

    def _summary_cadence(self, spec, worker_hooks):
        """(save_summary_steps, log_step_count_steps) for the monitored session.

        With a master and workers, the master also evaluates, so TF moves the summaries
        and the step counter to worker 0 (appended to `worker_hooks`) and the master
        writes none.
        """
        config = self._config
        jobs = config.cluster_spec.jobs if config.cluster_spec else []
        if not (TaskType.WORKER in jobs and TaskType.MASTER in jobs):
            return config.save_summary_steps, config.log_step_count_steps
        if config.task_type == TaskType.WORKER and config.task_id == 0:
            if config.save_summary_steps and config.save_summary_steps > 0:
                worker_hooks.append(
                    hooks_mod.SummarySaverHook(
                        save_steps=config.save_summary_steps,
                        output_dir=config.model_dir,
                        scaffold=spec.scaffold,
                    )
                )
            if config.log_step_count_steps and config.log_step_count_steps > 0:
                worker_hooks.append(
                    hooks_mod.StepCounterHook(
                        every_n_steps=config.log_step_count_steps, output_dir=config.model_dir
                    )
                )
        return 0, None

    # -- evaluate --------------------------------------------------------------------------

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates on input_fn's data (all of it, or `steps` batches); returns the metrics.

        The dict holds every eval_metric_ops value plus 'loss' (the mean loss) and
        'global_step' (the restored checkpoint's).

        Raises:
          ValueError: a non-positive steps; a metric named 'loss' or 'global_step'.
          TypeError: a hook that is not a SessionRunHook.
        """
        hooks = _check_hooks_type(hooks)
        if steps is not None:
            if steps <= 0:
                raise ValueError(f"Must specify steps > 0, given: {steps}")
            hooks.append(_StopAfterNEvalsHook(steps))
        if not checkpoint_path:
            checkpoint_path = self.latest_checkpoint()
            if not checkpoint_path:
                logger.info(
                    "Could not find trained model in model_dir: %s, running initialization "
                    "to evaluate.",
                    self._model_dir,
                )
        with ops.Graph().as_default():
            strategy, input_hooks = self._config.eval_distribute, []
            if strategy is not None:  # tf.distribute: one replica of the model per device
                spec, update_op, eval_dict, input_hooks = build_distributed_eval(
                    self, strategy, input_fn
                )
                self._maybe_warm_start(checkpoint_path)
            else:
                spec, global_step = self._build(input_fn, model_fn_lib.ModeKeys.EVAL)
                self._maybe_warm_start(checkpoint_path)
                update_op, eval_dict = self._eval_ops(spec, global_step)
            final_hook = hooks_mod.FinalOpsHook(eval_dict)
            all_hooks = hooks + input_hooks + list(spec.evaluation_hooks) + [final_hook]
            creator = ms.ChiefSessionCreator(
                scaffold=spec.scaffold,
                master=self._config.evaluation_master,
                checkpoint_filename_with_path=checkpoint_path,
                config=self._session_config,
            )
            with ms.MonitoredSession(session_creator=creator, hooks=all_hooks) as session:
                while not session.should_stop():
                    session.run(update_op)
        results = final_hook.final_ops_values
        step = results[ops.GraphKeys.GLOBAL_STEP]
        _write_dict_to_summary(self.eval_dir(name), results, step)
        if checkpoint_path:
            _write_checkpoint_path_to_summary(self.eval_dir(name), checkpoint_path, step)
        return results

    @staticmethod
    def _eval_ops(spec, global_step):
        metric_ops = dict(spec.eval_metric_ops)
        if "loss" in metric_ops:
            raise ValueError(
                'Metric with name "loss" is not allowed, because Estimator already defines '
                "a default metric with the same name."
            )
        metric_ops["loss"] = metrics_lib.mean(spec.loss)
        values = {name: metric_ops[name][0] for name in sorted(metric_ops)}
        updates = [metric_ops[name][1] for name in sorted(metric_ops)]
        if ops.GraphKeys.GLOBAL_STEP in values:
            raise ValueError(
                "Metric with name `global_step` is not allowed, because Estimator already "
                "defines a default metric with the same name."
            )
        values[ops.GraphKeys.GLOBAL_STEP] = global_step
        return control_flow_ops.group(*updates), values

    # -- predict ---------------------------------------------------------------------------

    def predict(
        self,
        input_fn,
        predict_keys=None,
        hooks=None,
        checkpoint_path=None,
        yield_single_examples=True,
    ):
        """Yields predictions for input_fn's features, one example (or batch) at a time.

        Raises (when iterated):
          ValueError: predict_keys with non-dict predictions, or naming none of them;
            predictions of different batch lengths.
          TypeError: a hook that is not a SessionRunHook.
        """
        hooks = _check_hooks_type(hooks)
        if not checkpoint_path:
            checkpoint_path = self.latest_checkpoint()
        if not checkpoint_path:
            logger.info(
                "Could not find trained model in model_dir: %s, running initialization to "
                "predict.",
                self._model_dir,
            )
        with ops.Graph().as_default():
            spec, _ = self._build(input_fn, model_fn_lib.ModeKeys.PREDICT)
            self._maybe_warm_start(checkpoint_path)
            predictions = _extract_keys(spec.predictions, predict_keys)
            creator = ms.ChiefSessionCreator(
                scaffold=spec.scaffold,
                master=self._config.master,
                checkpoint_filename_with_path=checkpoint_path,
                config=self._session_config,
            )
            all_hooks = hooks + list(spec.prediction_hooks)
            with ms.MonitoredSession(session_creator=creator, hooks=all_hooks) as mon_sess:
                while not mon_sess.should_stop():
                    values = mon_sess.run(predictions)
                    if not yield_single_examples:
                        yield values
                    elif not isinstance(predictions, dict):
                        yield from values
                    else:
                        for i in range(_batch_length(values)):
                            yield {key: value[i] for key, value in values.items()}

    # -- export ----------------------------------------------------------------------------

    def export_saved_model(
        self,
        export_dir_base,
        serving_input_receiver_fn,
        assets_extra=None,
        as_text=False,
        checkpoint_path=None,
        experimental_mode=model_fn_lib.ModeKeys.PREDICT,
    ):
        """Writes a SavedModel (tag 'serve') under export_dir_base/<timestamp>; returns
        that directory as bytes.

        The model_fn is called in `experimental_mode` on the receiver's features; each of
        the spec's export_outputs becomes a signature over the receiver tensors; the
        variables are those of the latest (or the given) checkpoint.

        Raises:
          ValueError: no serving_input_receiver_fn; no checkpoint to export.
        """
        if not serving_input_receiver_fn:
            raise ValueError("An input_receiver_fn must be defined.")
        if not checkpoint_path:
            checkpoint_path = self.latest_checkpoint()
        if not checkpoint_path:
            raise ValueError(f"Couldn't find trained model at {self._model_dir}.")
        export_dir = _timestamped_dir(export_dir_base)
        temp_dir = os.path.join(
            os.path.dirname(export_dir), "temp-" + os.path.basename(export_dir)
        )
        builder = saved_model_builder.SavedModelBuilder(temp_dir)
        with ops.Graph().as_default() as graph:
            random_seed.set_random_seed(self._config.tf_random_seed)
            training_util.create_global_step(graph)
            receiver = serving_input_receiver_fn()
            spec = self._call_model_fn(receiver.features, None, experimental_mode, self.config)
            signatures = export_lib.build_all_signature_defs(
                receiver.receiver_tensors,
                spec.export_outputs,
                receiver.receiver_tensors_alternatives,
            )
            with Session(graph=graph, config=self._session_config) as sess:
                saver = spec.scaffold.saver or saver_lib.Saver(sharded=True)
                saver.restore(sess, checkpoint_path)
                local_init_op = spec.scaffold.local_init_op or ms.Scaffold.default_local_init_op()
                builder.add_meta_graph_and_variables(
                    sess,
                    [tag_constants.SERVING],
                    signature_def_map=signatures,
                    assets_collection=ops.get_collection(ops.GraphKeys.ASSET_FILEPATHS),
                    main_op=local_init_op,
                    # TF strips attrs at their default; ours are not always TF's defaults
                    # (ParseExampleV2's num_sparse has none in TF), so keep them all and
                    # the export stays loadable by TF.
                    strip_default_attrs=False,
                    saver=saver,
                )
        builder.save(as_text)
        if assets_extra:
            extra_dir = os.path.join(temp_dir, "assets.extra")
            for dest, source in assets_extra.items():
                target = os.path.join(extra_dir, dest)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(source, target)
        os.rename(temp_dir, export_dir)
        return export_dir.encode("utf-8")

    export_savedmodel = export_saved_model  # TF1's older name


def _timestamped_dir(export_dir_base) -> str:
    """export_dir_base/<seconds since the epoch>, waiting for a free second if needed."""
    base = os.fsdecode(export_dir_base)
    for _ in range(10):
        path = os.path.join(base, str(int(time.time())))
        if not os.path.exists(path) and not os.path.exists(
            os.path.join(base, "temp-" + os.path.basename(path))
        ):
            return path
        time.sleep(1)  # TF's rule: one export per second per base directory
    raise RuntimeError("Failed to obtain a unique export directory name after 10 attempts.")
