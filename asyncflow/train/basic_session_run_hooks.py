"""SessionRunHook and TF1's standard hooks (`tf.compat.v1.train.*Hook`).

A hook sees every `MonitoredSession.run`: `begin()` before the graph is finalized,
`after_create_session(session, coord)` once the session is ready (and again after a
recovery), `before_run(run_context)` returning `SessionRunArgs` whose fetches and feeds
are merged into the step, `after_run(run_context, run_values)` with its own fetches'
results, and `end(session)` when the monitored session closes without error.

Async twins: `AsyncMonitoredSession` awaits `abefore_run`/`aafter_run`/... when a hook
defines them (the hooks here do wherever they touch the session, with `await
session.arun`), calls a hook's sync method on the loop when the hook sets
`loop_safe = True` (it never calls `session.run`), and otherwise runs the sync method
on a worker thread, from where `session.run` hands its step to the session's loop.

Periodic checkpoints (CheckpointSaverHook) run as tasks on the session's loop: the save
step reads every variable at its start, in one pass that does not yield, so the
snapshot is one consistent training state, and the file writes that follow overlap the
next training steps.  Saves are chained (one at a time, in order); `end()` waits for
them and then writes the final checkpoint, so a closed session always leaves its last
step on disk.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import time

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops

__all__ = [
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
    "SecondOrStepTimer",
    "NeverTriggerTimer",
    "LoggingTensorHook",
    "StopAtStepHook",
    "CheckpointSaverListener",
    "CheckpointSaverHook",
    "StepCounterHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "FinalOpsHook",
    "FeedFnHook",
    "SummarySaverHook",
    "ProfilerHook",
]

logger = logging.getLogger("asyncflow.train")


# -- the hook interface -------------------------------------------------------------------


class SessionRunHook:
    """Hook to extend calls to MonitoredSession.run() (TF1's `tf.train.SessionRunHook`)."""

    def begin(self) -> None:
        """Called once before the session is created; the graph may still change."""

    def after_create_session(self, session, coord) -> None:
        """Called when a new session is ready (after creation or recovery)."""

    def before_run(self, run_context):
        """Called before each run(); may return SessionRunArgs to add fetches/feeds."""
        return None

    def after_run(self, run_context, run_values) -> None:
        """Called after each successful run() with this hook's fetched values."""

    def end(self, session) -> None:
        """Called at the end of the session (not after an error)."""


class SessionRunArgs(
    collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])
):
    """What a hook adds to a run(): fetches, feed_dict and options."""

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The run() being made: its original arguments, the session, and request_stop()."""

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self):
        return self._original_args

    @property
    def session(self):
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True


class SessionRunValues(
    collections.namedtuple("SessionRunValues", ["results", "options", "run_metadata"])
):
    """The results of run() for one hook's fetches, with options and run_metadata."""


# -- timers -------------------------------------------------------------------------------


class SecondOrStepTimer:
    """Triggers at most once every `every_secs` seconds or every `every_steps` steps.

    Raises:
      ValueError: neither or both of every_secs/every_steps given.
    """

    def __init__(self, every_secs=None, every_steps=None):
        self.reset()
        self._every_secs = every_secs
        self._every_steps = every_steps
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")

    def reset(self) -> None:
        self._last_triggered_step = None
        self._last_triggered_time = None

    def should_trigger_for_step(self, step) -> bool:
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None and time.time() >= (
            self._last_triggered_time + self._every_secs
        ):
            return True
        return self._every_steps is not None and step >= (
            self._last_triggered_step + self._every_steps
        )

    def update_last_triggered_step(self, step):
        """Record a trigger at `step`; returns (elapsed_secs, elapsed_steps) or Nones."""
        now = time.time()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self):
        return self._last_triggered_step


class NeverTriggerTimer:
    """A timer that never triggers."""

    def reset(self) -> None:
        pass

    def should_trigger_for_step(self, step) -> bool:
        return False

    def update_last_triggered_step(self, step):
        return (None, None)

    def last_triggered_step(self):
        return None


def _global_step_read():
    """The global step as a fetchable tensor, or None (TF's `_get_or_create_global_step_read`)."""
    from asyncflow.train import training_util

    step = training_util.get_global_step()
    if step is None:
        return None
    graph = step.graph
    cached = graph.get_collection(_GLOBAL_STEP_READ_KEY)
    if cached:
        return cached[0]
    # A computed copy (TF's `+ 0`): a fetched variable shows its value at the end of the
    # step (as TF's aliased buffer does), and a hook wants the step it ran at.
    with graph.as_default(), graph.name_scope(None), graph.name_scope(step.op.name + "/"):
        read = ops.convert_to_tensor(step) + 0
    graph.add_to_collection(_GLOBAL_STEP_READ_KEY, read)
    return read


_GLOBAL_STEP_READ_KEY = "global_step_read_op_cache"  # TF's collection name


def _as_graph_element(obj):
    graph = ops.get_default_graph()
    if not isinstance(obj, str):
        if not hasattr(obj, "graph") or obj.graph is not graph:
            raise ValueError(
                f"Passed {obj} should have graph attribute that is equal to current graph {graph}."
            )
        return obj
    if ":" in obj:
        return graph.as_graph_element(obj)
    element = graph.as_graph_element(obj + ":0")
    try:
        graph.as_graph_element(obj + ":1")
    except (KeyError, ValueError):
        return element
    raise ValueError(
        f"Name {obj} is ambiguous, as this `Operation` has multiple outputs (at least 2)."
    )


# -- LoggingTensorHook --------------------------------------------------------------------


class LoggingTensorHook(SessionRunHook):
    """Logs the given tensors every N local steps, every N seconds, or at end.

    Raises:
      ValueError: not exactly one of every_n_iter/every_n_secs (unless only at_end),
        or every_n_iter <= 0.
    """

    loop_safe = True

    def __init__(
        self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None
    ):
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs "
                "must be provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter = formatter
        self._timer = (
            NeverTriggerTimer()
            if only_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )
        self._log_at_end = at_end

    def begin(self):
        self._timer.reset()
        self._iter_count = 0
        self._current_tensors = {tag: _as_graph_element(t) for tag, t in self._tensors.items()}

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._current_tensors) if self._should_trigger else None

    def _log_tensors(self, values):
        elapsed, _ = self._timer.update_last_triggered_step(self._iter_count)
        with np.printoptions(suppress=True):
            if self._formatter:
                logger.info(self._formatter(values))
                return
            stats = ", ".join(f"{tag} = {values[tag]}" for tag in self._tag_order)
            if elapsed is not None:
                logger.info("%s (%.3f sec)", stats, elapsed)
            else:
                logger.info("%s", stats)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))

    async def aend(self, session):
        if self._log_at_end:
            self._log_tensors(await session.arun(self._current_tensors))


# -- StopAtStepHook -----------------------------------------------------------------------


class StopAtStepHook(SessionRunHook):
    """Requests stop after `num_steps` steps or once the global step reaches `last_step`.

    Raises:
      ValueError: neither or both of num_steps/last_step.
      RuntimeError (in begin): the graph has no global step.
    """

    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._global_step_tensor)) + self._num_steps

    async def aafter_create_session(self, session, coord):
        if self._last_step is None:
            step = await session.arun(self._global_step_tensor)
            self._last_step = int(step) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    async def abefore_run(self, run_context):
        return self.before_run(run_context)

    def after_run(self, run_context, run_values):
        # The fetched step is the value before this step's update: check the real one.
        if run_values.results + 1 >= self._last_step:
            if run_context.session.run(self._global_step_tensor) >= self._last_step:
                run_context.request_stop()

    async def aafter_run(self, run_context, run_values):
        if run_values.results + 1 >= self._last_step:
            if await run_context.session.arun(self._global_step_tensor) >= self._last_step:
                run_context.request_stop()


# -- CheckpointSaverHook ------------------------------------------------------------------


class CheckpointSaverListener:
    """Callbacks around CheckpointSaverHook's saves; after_save returning True stops."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves checkpoints every N steps or seconds, at session creation and at the end.

    With no listeners, periodic saves run as background tasks on the session's loop
    (see the module note); with listeners they run inline, as in TF1, since listeners
    may call `session.run` and may request a stop.

    Raises:
      ValueError: both saver and scaffold; neither or both of save_secs/save_steps.
      RuntimeError (in begin): no global step; (at the first save) no saver found.
    """

    def __init__(
        self,
        checkpoint_dir,
        save_secs=None,
        save_steps=None,
        saver=None,
        checkpoint_basename="model.ckpt",
        scaffold=None,
        listeners=None,
        save_graph_def=True,
    ):
        logger.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = listeners or []
        self._steps_per_run = 1000000
        self._save_graph_def = save_graph_def
        self._pending = None  # the running background save: a concurrent Future
        self._pending_task = None
        self._save_error = None

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use CheckpointSaverHook.")
        for listener in self._listeners:
            listener.begin()

    # -- sync API (MonitoredSession)
    def after_create_session(self, session, coord):
        self._forget_previous_session()
        global_step = int(session.run(self._global_step_tensor))
        self._write_graph()
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        self._raise_save_error()
        if self._timer.should_trigger_for_step(run_values.results + self._steps_per_run):
            session = run_context.session
            global_step = int(session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._can_save_in_background(session):
                    self.wait_for_pending_save()
                    from asyncflow.session import ensure_loop_running

                    ensure_loop_running(session._loop)
                    asyncio.run_coroutine_threadsafe(
                        self._start_background_save(session, global_step), session._loop
                    ).result()
                elif self._save(session, global_step):
                    run_context.request_stop()

    def end(self, session):
        self.wait_for_pending_save()
        last_step = int(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    # -- async API (AsyncMonitoredSession)
    async def aafter_create_session(self, session, coord):
        self._forget_previous_session()
        global_step = int(await session.arun(self._global_step_tensor))
        self._write_graph()
        await self._asave(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    async def abefore_run(self, run_context):
        return self.before_run(run_context)

    async def aafter_run(self, run_context, run_values):
        self._raise_save_error()
        if self._timer.should_trigger_for_step(run_values.results + self._steps_per_run):
            session = run_context.session
            global_step = int(await session.arun(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._can_save_in_background(session):
                    await self._await_pending_save()
                    await self._start_background_save(session, global_step)
                elif await self._asave(session, global_step):
                    run_context.request_stop()

    async def aend(self, session):
        await self._await_pending_save()
        last_step = int(await session.arun(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            await self._asave(session, last_step)
        for listener in self._listeners:
            await asyncio.to_thread(listener.end, session, last_step)

    # -- saving
    def _forget_previous_session(self):
        # After a recovery, a save still running belongs to the closed session: it
        # fails without leaving a checkpoint behind, and the new session restored
        # from the last complete one.
        if self._save_error is not None:
            logger.warning("Dropping a failed save of the previous session: %s", self._save_error)
        self._pending, self._pending_task, self._save_error = None, None, None

    def _write_graph(self):
        """graph.pbtxt in the checkpoint directory, as TF's hook writes it."""
        if not self._save_graph_def:
            return
        from asyncflow.meta_graph import write_graph

        graph_def = ops.get_default_graph().as_graph_def(add_shapes=True)
        write_graph(graph_def, self._checkpoint_dir, "graph.pbtxt")

    def _save(self, session, step) -> bool:
        """Save synchronously (TF1's order: listeners before, save, listeners after)."""
        for listener in self._listeners:
            listener.before_save(session, step)
        logger.info("Saving checkpoints for %d into %s.", step, self._save_path)
        self._get_saver().save(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                logger.info(
                    "A CheckpointSaverListener requested that training be stopped. listener: %s",
                    listener,
                )
                should_stop = True
        return should_stop

    async def _asave(self, session, step) -> bool:
        saver = self._get_saver()
        if self._listeners or not hasattr(saver, "asave"):
            return await asyncio.to_thread(self._save, session, step)
        logger.info("Saving checkpoints for %d into %s.", step, self._save_path)
        await saver.asave(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        return False

    def _can_save_in_background(self, session) -> bool:
        """In the background only in process: there the save's first loop pass reads
        the variables (see `_start_background_save`).  A cluster session's save reads
        them over the network, and a training step started meanwhile could reach a
        parameter server first: the checkpoint would hold a later step's values."""
        loop = getattr(session, "_loop", None)
        return (
            not self._listeners
            and hasattr(self._get_saver(), "asave")
            and loop is not None
            and not loop.is_closed()
            and not getattr(session, "sess_str", "")
        )

    async def _start_background_save(self, session, step) -> None:
        """Start a save task on the session's loop and let it take its first pass.

        Runs on the session's loop.  The task is created, then this coroutine yields
        once: the loop runs the task's first pass (the save step reading the variables)
        before resuming us, so no training step starts between the step being saved
        and the snapshot; only the file writes overlap later steps.
        """
        done: concurrent.futures.Future = concurrent.futures.Future()

        async def save():
            try:
                await self._asave(session, step)
            except errors.CancelledError as exc:  # the session closed (recovery)
                logger.warning("Checkpoint save for step %d cancelled: %s", step, exc)
            except Exception as exc:  # reported at the next after_run / end
                logger.error("Background checkpoint save for step %d failed: %s", step, exc)
                self._save_error = exc
            finally:
                done.set_result(None)

        self._pending = done
        self._pending_task = asyncio.get_running_loop().create_task(save())
        await asyncio.sleep(0)  # one loop pass: the task's first step runs before we resume

    def wait_for_pending_save(self, timeout=None) -> None:
        """Block until the background save started last is on disk (sync callers).

        Raises: whatever the save raised; TimeoutError after `timeout` seconds.
        """
        pending = self._pending
        if pending is not None:
            try:
                pending.result(timeout)
            except concurrent.futures.TimeoutError:
                raise TimeoutError("checkpoint save still running") from None
            self._pending = None
        self._raise_save_error()

    async def _await_pending_save(self) -> None:
        pending = self._pending
        if pending is not None:
            await asyncio.wrap_future(pending)
            self._pending = None
        self._raise_save_error()

    def _raise_save_error(self):
        err, self._save_error = self._save_error, None
        if err is not None:
            raise err

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = ops.get_collection(ops.GraphKeys.SAVERS)
        if not savers:
            raise RuntimeError(
                f"No items in collection {ops.GraphKeys.SAVERS}. Please add a saver to the "
                "collection or provide a saver or scaffold."
            )
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in collection {ops.GraphKeys.SAVERS}. Please indicate "
                "which one to use by passing it to the constructor."
            )
        self._saver = savers[0]
        return savers[0]


# -- StepCounterHook ----------------------------------------------------------------------


class StepCounterHook(SessionRunHook):
    """Logs (and, with a summary writer, records) global steps per second.

    Raises:
      ValueError: not exactly one of every_n_steps/every_n_secs.
      RuntimeError (in begin): the graph has no global step.
    """

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step = None
        self._steps_per_run = 1
        self.last_rate = None  # the last steps/sec measured (asyncflow addition)

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _summary_writer(self._output_dir)
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StepCounterHook.")
        from asyncflow.train import training_util

        self._summary_tag = training_util.get_global_step().op.name + "/sec"

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    async def abefore_run(self, run_context):
        return self.before_run(run_context)

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
        rate = elapsed_steps / elapsed_time if elapsed_time > 0 else float("inf")
        self.last_rate = rate
        if self._summary_writer is not None:
            add_scalar = getattr(self._summary_writer, "add_scalar", None)
            if add_scalar is not None:
                add_scalar(self._summary_tag, rate, global_step)
        logger.info("%s: %g", self._summary_tag, rate)

    def _after(self, global_step):
        if self._timer.should_trigger_for_step(global_step):
            elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
            if elapsed_time is not None:
                self._log_and_record(elapsed_steps, elapsed_time, global_step)

    def after_run(self, run_context, run_values):
        stale = run_values.results
        if self._timer.should_trigger_for_step(stale + self._steps_per_run):
            self._after(int(run_context.session.run(self._global_step_tensor)))
        self._warn_if_stuck(stale)

    async def aafter_run(self, run_context, run_values):
        stale = run_values.results
        if self._timer.should_trigger_for_step(stale + self._steps_per_run):
            self._after(int(await run_context.session.arun(self._global_step_tensor)))
        self._warn_if_stuck(stale)

    def _warn_if_stuck(self, stale):
        if stale == self._last_global_step:
            logger.debug(
                "It seems that global step (tf.train.get_global_step) has not been "
                "increased. Current value (could be stable): %s vs previous value: %s.",
                stale,
                self._last_global_step,
            )
        self._last_global_step = stale


def _summary_writer(logdir):
    """A summary writer for `logdir` when the summary package exists, else None."""
    try:
        from asyncflow.summary import FileWriterCache
    except ImportError:
        return None
    return FileWriterCache.get(logdir)


# -- NanTensorHook ------------------------------------------------------------------------


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Fails (NanLossDuringTrainingError) or requests stop when the loss is NaN."""

    loop_safe = True

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results):
            message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                logger.error(message)
                raise NanLossDuringTrainingError
            logger.warning(message)
            run_context.request_stop()


# -- FinalOpsHook, FeedFnHook -------------------------------------------------------------


class FinalOpsHook(SessionRunHook):
    """Evaluates `final_ops` when the session ends; values in `final_ops_values`."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        return self._final_ops_values

    def end(self, session):
        if self._final_ops is not None:
            self._final_ops_values = session.run(
                self._final_ops, feed_dict=self._final_ops_feed_dict
            )

    async def aend(self, session):
        if self._final_ops is not None:
            self._final_ops_values = await session.arun(
                self._final_ops, feed_dict=self._final_ops_feed_dict
            )


class FeedFnHook(SessionRunHook):
    """Feeds `feed_fn()` (a dict) into every run."""

    loop_safe = True

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


# -- SummarySaverHook, ProfilerHook -------------------------------------------------------


def _summary_ops(summary_op, scaffold):
    op = summary_op if summary_op is not None else scaffold.summary_op
    if op is None:
        return None
    return op if isinstance(op, list) else [op]


class SummarySaverHook(SessionRunHook):
    """Saves summaries every N steps or seconds (TF1's `tf.train.SummarySaverHook`).

    The summary op (or the scaffold's, by default `merge_all()`) is fetched with the
    step it summarises; the values go to the FileWriter of `output_dir` (cached), whose
    background task writes them, so a summary step waits for no file I/O.  A
    SessionLog START is written at the first step, as TF1 does.

    Raises:
      ValueError: not exactly one of scaffold/summary_op; neither or both of
        save_steps/save_secs.
      RuntimeError (in begin): the graph has no global step.
    """

    def __init__(
        self,
        save_steps=None,
        save_secs=None,
        output_dir=None,
        summary_writer=None,
        scaffold=None,
        summary_op=None,
    ):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _summary_writer(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use SummarySaverHook.")

    def before_run(self, run_context):
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(
            self._next_step
        )
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary:
            ops_ = _summary_ops(self._summary_op, self._scaffold)
            if ops_ is not None:
                requests["summary"] = ops_
        return SessionRunArgs(requests)

    async def abefore_run(self, run_context):
        return self.before_run(run_context)

    def _record(self, run_values, global_step):
        from asyncflow.protos import SessionLog

        if self._next_step is None:
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = run_values.results["global_step"] + 1
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
        self._record(run_values, global_step)

    async def aafter_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = run_values.results["global_step"] + 1
        if self._next_step is None or self._request_summary:
            global_step = int(await run_context.session.arun(self._global_step_tensor))
        self._record(run_values, global_step)

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()

    async def aend(self, session=None):
        if self._summary_writer:
            await self._summary_writer.aflush()


class ProfilerHook(SessionRunHook):
    """Traces a step every N steps or seconds (TF1's `tf.train.ProfilerHook`): writes
    `timeline-<step>.json` (Chrome trace) to `output_dir` and the step's RunMetadata to
    its event file as `step_<step>`.

    Raises:
      ValueError: neither or both of save_steps/save_secs.
      RuntimeError (in begin): the graph has no global step.
    """

    def __init__(
        self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True, show_memory=False
    ):
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._output_dir = output_dir
        self._file_writer = None
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        self._next_step = None
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")
        if self._output_dir:
            self._file_writer = _summary_writer(self._output_dir)

    def before_run(self, run_context):
        self._request_summary = self._next_step is not None and (
            self._timer.should_trigger_for_step(self._next_step)
        )
        requests = {"global_step": self._global_step_tensor}
        opts = None
        if self._request_summary:
            from asyncflow.config import RunOptions

            opts = RunOptions(trace_level=RunOptions.FULL_TRACE)
        return SessionRunArgs(requests, options=opts)

    async def abefore_run(self, run_context):
        return self.before_run(run_context)

    def after_run(self, run_context, run_values):
        stale_global_step = run_values.results["global_step"]
        if self._next_step is None:
            # Update the timer so that it does not activate until N steps or seconds
            # have passed.
            self._timer.update_last_triggered_step(stale_global_step)
        global_step = stale_global_step + 1
        if self._request_summary and run_values.run_metadata is not None:
            self._timer.update_last_triggered_step(global_step)
            self._save(global_step, run_values.run_metadata)
        self._next_step = global_step + 1

    def _save(self, step, run_metadata):
        from asyncflow.client import timeline

        logger.info("Saving timeline for %d into '%s'.", step, self._output_file.format(step))
        trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory
        )
        with open(self._output_file.format(step), "w") as f:
            f.write(trace)
        if self._file_writer is not None:
            self._file_writer.add_run_metadata(run_metadata, f"step_{step}")  # no step, as TF1
