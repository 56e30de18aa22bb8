"""TF1's pre-MonitoredSession training harness: `SessionManager`, `Supervisor`,
`LooperThread` and `basic_train_loop`.

SessionManager drives the same restore-or-initialise steps as ChiefSessionCreator
(monitored_session's `_prepare_session` / `_worker_ready` generators), so both paths
agree on what "ready" means.  Supervisor adds TF1's defaults (init, ready and local-init
ops, a Saver, merged summaries, the global step) and standard services: threads that
checkpoint every `save_model_secs`, write summaries every `save_summaries_secs` and
count steps per second.  The services are `LooperThread`s timed by
`Coordinator.wait_for_stop`, so `request_stop()` ends them at once.

Waiting for a chief (wait_for_session) or a checkpoint blocks the calling thread, as in
TF; nothing here runs on the runtime's event loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.train.coordinator import Coordinator
from asyncflow.train.monitored_session import (
    _bind_session,
    _drive_sync,
    _prepare_session,
    _worker_ready,
)

__all__ = ["SessionManager", "Supervisor", "LooperThread", "basic_train_loop"]

logger = logging.getLogger("asyncflow")


class _Steps:
    """The fields `_prepare_session` / `_worker_ready` read (a Scaffold's subset)."""

    def __init__(self, init_op, init_feed_dict, init_fn, manager):
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.ready_op = manager._ready_op
        self.ready_for_local_init_op = manager._ready_for_local_init_op
        self.local_init_op = manager._local_init_op
        self.local_init_feed_dict = manager._local_init_feed_dict


class SessionManager:
    """Creates sessions that are restored from a checkpoint, initialised, or (workers)
    made ready by a chief; TF1's `tf.train.SessionManager`.

    Raises (from its methods):
      RuntimeError: the init ops did not make the model ready.
      DeadlineExceededError: wait_for_session ran out of time.
    """

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None,
                 graph=None, recovery_wait_secs=30, local_init_run_options=None,
                 local_init_feed_dict=None):  # fmt: skip
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError(
                "If you pass a ready_for_local_init_op you must also pass a local_init_op , "
                f"ready_for_local_init_op [{ready_for_local_init_op}]"
            )
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else ops.get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict

    def _session(self, master, config):
        from asyncflow.session import Session

        return Session(master, graph=self._graph, config=config)

    def _checkpoint_path(self, checkpoint_dir, wait_for_checkpoint, max_wait_secs):
        from asyncflow.train.saver import latest_checkpoint

        deadline = time.monotonic() + max_wait_secs
        path = latest_checkpoint(checkpoint_dir)
        while path is None and wait_for_checkpoint and time.monotonic() < deadline:
            logger.info("Waiting for checkpoint to be available.")
            time.sleep(min(self._recovery_wait_secs, max(deadline - time.monotonic(), 0)))
            path = latest_checkpoint(checkpoint_dir)
        return path

    def _run_steps(self, sess, gen):
        with self._graph.as_default():
            return _drive_sync(_bind_session(gen, sess), sess)

    def prepare_session(
        self,
        master,
        init_op=None,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        config=None,
        init_feed_dict=None,
        init_fn=None,
    ):
        """A session restored from the latest checkpoint in `checkpoint_dir` (or
        `checkpoint_filename_with_path`), else initialised with init_op / init_fn; then
        local init and the ready check.

        Raises:
          ValueError: both checkpoint_dir and checkpoint_filename_with_path.
          RuntimeError: the model is not ready after initialisation.
        """
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError(
                "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
            )
        if saver is not None and checkpoint_dir:
            path = self._checkpoint_path(checkpoint_dir, wait_for_checkpoint, max_wait_secs)
            checkpoint_dir, checkpoint_filename_with_path = None, path
        sess = self._session(master, config)
        steps = _Steps(init_op, init_feed_dict, init_fn, self)
        gen = _prepare_session(steps, saver, checkpoint_dir, checkpoint_filename_with_path)
        try:
            self._run_steps(sess, gen)
        except BaseException:
            sess.close()
            raise
        return sess

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):  # fmt: skip
        """(session, restored): restored from a checkpoint when there is one; a session
        that is not ready is still returned, with restored False (as TF).

        Raises:
          ValueError: both checkpoint_dir and checkpoint_filename_with_path.
        """
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError(
                "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
            )
        path = checkpoint_filename_with_path
        if saver is not None and checkpoint_dir:
            path = self._checkpoint_path(checkpoint_dir, wait_for_checkpoint, max_wait_secs)
        sess = self._session(master, config)
        if saver is None or not path:
            return sess, False
        with self._graph.as_default():
            saver.restore(sess, path)
        ready, msg = self._run_steps(sess, _worker_ready(_Steps(None, None, None, self)))
        if not ready:
            logger.info("Restoring model from %s did not make model ready: %s", path, msg)
            return sess, False
        return sess, True

    def wait_for_session(self, master, config=None, max_wait_secs=float("inf")):
        """A session once the model is ready (another process, the chief, initialises it).

        Raises:
          DeadlineExceededError: not ready within `max_wait_secs`.
        """
        if max_wait_secs is None:
            max_wait_secs = float("inf")
        deadline = time.monotonic() + max_wait_secs
        while True:
            sess = self._session(master, config)
            ready, msg = self._run_steps(sess, _worker_ready(_Steps(None, None, None, self)))
            if ready:
                return sess
            sess.close()
            if deadline - time.monotonic() - self._recovery_wait_secs < 0:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {max_wait_secs} secs."
                )
            logger.info("Waiting for model to be ready: %s", msg)
            time.sleep(self._recovery_wait_secs)


class LooperThread(threading.Thread):
    """A thread that calls `target(*args, **kwargs)` (or `run_loop()`) every
    `timer_interval_secs` (back to back when None) until the coordinator stops; the
    first call is at once.  Exceptions are reported to the coordinator.
    """

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        super().__init__()
        self.daemon = True
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        if self._target is not None:
            self._args, self._kwargs = args or (), kwargs or {}
        elif args or kwargs:
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        """Start and return a LooperThread calling `target`."""
        looper = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        looper.start()
        return looper

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.monotonic()
                while not self._coord.wait_for_stop(max(next_time - time.monotonic(), 0)):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        """Called once before the first run_loop."""

    def stop_loop(self):
        """Called once after the last run_loop."""

    def run_loop(self):
        if self._target is not None:
            self._target(*self._args, **self._kwargs)


_USE_DEFAULT = 0


class Supervisor:
    """TF1's `tf.train.Supervisor`: prepares a session (restoring from `logdir` or
    initialising), runs checkpoint / summary / step-counter services, and stops them all
    through one Coordinator.  Prefer MonitoredTrainingSession in new code, as TF does.

    Raises:
      RuntimeError: (prepare_or_wait_for_session) the model is not ready after init.
    """

    USE_DEFAULT = _USE_DEFAULT

    def __init__(
        self,
        graph=None,
        ready_op=USE_DEFAULT,
        ready_for_local_init_op=USE_DEFAULT,
        is_chief=True,
        init_op=USE_DEFAULT,
        init_feed_dict=None,
        local_init_op=USE_DEFAULT,
        logdir=None,
        summary_op=USE_DEFAULT,
        saver=USE_DEFAULT,
        global_step=USE_DEFAULT,
        save_summaries_secs=120,
        save_model_secs=600,
        recovery_wait_secs=30,
        stop_grace_secs=120,
        checkpoint_basename="model.ckpt",
        session_manager=None,
        summary_writer=USE_DEFAULT,
        init_fn=None,
        local_init_run_options=None,
    ):
        self._graph = graph if graph is not None else ops.get_default_graph()
        with self._graph.as_default():
            self._init_ready_op(ready_op, ready_for_local_init_op)
            self._init_init_op(init_op, init_feed_dict)
            self._init_local_init_op(local_init_op)
            self._init_saver(saver)
            self._init_summary_op(summary_op)
            self._init_global_step(global_step)
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._logdir = logdir
        self._save_summaries_secs = save_summaries_secs
        self._save_model_secs = save_model_secs
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        self._summary_writer = None
        if is_chief and logdir:
            if summary_writer is _USE_DEFAULT:
                from asyncflow.summary import FileWriter

                summary_writer = FileWriter(logdir)
            self._summary_writer = summary_writer or None
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op,
            ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op,
            graph=self._graph,
            recovery_wait_secs=recovery_wait_secs,
            local_init_run_options=local_init_run_options,
        )
        self._graph.finalize()
        self._started_threads: list[threading.Thread] = []

    # -- defaults, as TF1's Supervisor picks them ------------------------------------------

    @staticmethod
    def _first(key):
        items = ops.get_collection(key)
        return items[0] if items else None

    def _init_ready_op(self, ready_op, ready_for_local_init_op):
        from asyncflow.variables import report_uninitialized_variables

        if ready_op is _USE_DEFAULT:
            ready_op = self._first(ops.GraphKeys.READY_OP)
            if ready_op is None:
                ready_op = report_uninitialized_variables()
                ops.add_to_collection(ops.GraphKeys.READY_OP, ready_op)
        self._ready_op = ready_op
        if ready_for_local_init_op is _USE_DEFAULT:
            ready_for_local_init_op = self._first(ops.GraphKeys.READY_FOR_LOCAL_INIT_OP)
        self._ready_for_local_init_op = ready_for_local_init_op

    def _init_init_op(self, init_op, init_feed_dict):
        from asyncflow.variables import global_variables_initializer

        if init_op is _USE_DEFAULT:
            init_op = self._first(ops.GraphKeys.INIT_OP)
            if init_op is None:
                init_op = global_variables_initializer()
                ops.add_to_collection(ops.GraphKeys.INIT_OP, init_op)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict

    def _init_local_init_op(self, local_init_op):
        from asyncflow.ops.control_flow_ops import group
        from asyncflow.variables import local_variables_initializer

        if local_init_op is _USE_DEFAULT:
            local_init_op = self._first(ops.GraphKeys.LOCAL_INIT_OP)
            if local_init_op is None:
                table_inits = ops.get_collection(ops.GraphKeys.TABLE_INITIALIZERS)
                local_init_op = group(local_variables_initializer(), *table_inits)
                ops.add_to_collection(ops.GraphKeys.LOCAL_INIT_OP, local_init_op)
        self._local_init_op = local_init_op

    def _init_saver(self, saver):
        from asyncflow.train.saver import Saver
        from asyncflow.variables import global_variables

        if saver is _USE_DEFAULT:
            saver = self._first(ops.GraphKeys.SAVERS)
            if saver is None and global_variables():
                saver = Saver()
                ops.add_to_collection(ops.GraphKeys.SAVERS, saver)
        self._saver = saver

    def _init_summary_op(self, summary_op):
        from asyncflow.summary import merge_all

        if summary_op is _USE_DEFAULT:
            summary_op = self._first(ops.GraphKeys.SUMMARY_OP)
            if summary_op is None:
                summary_op = merge_all()
                if summary_op is not None:
                    ops.add_to_collection(ops.GraphKeys.SUMMARY_OP, summary_op)
        self._summary_op = summary_op

    def _init_global_step(self, global_step):
        from asyncflow.train.training_util import get_global_step

        if global_step is _USE_DEFAULT:
            global_step = get_global_step()
        self._global_step = global_step

    # -- properties --------------------------------------------------------------------------

    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # -- sessions and services --------------------------------------------------------------

    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False,
                                    max_wait_secs=7200, start_standard_services=True):  # fmt: skip
        """The chief restores from `logdir` or initialises (and starts the services); a
        worker waits until the chief has made the model ready.  Queue runners start too."""
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
                config=config, init_feed_dict=self._init_feed_dict, init_fn=self._init_fn,
            )  # fmt: skip
            self._write_graph()
            if start_standard_services:
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(
                master, config=config, max_wait_secs=max_wait_secs
            )
        if start_standard_services:
            self.start_queue_runners(sess)
        return sess

    def _write_graph(self):
        if self._is_chief and self._logdir and self._summary_writer is not None:
            self._summary_writer.add_graph(self._graph)

    def start_standard_services(self, sess):
        """Start the checkpoint, summary and step-counter threads the Supervisor's
        settings ask for; returns them.

        Raises:
          RuntimeError: called on a non-chief Supervisor.
        """
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because only "
                               "chief supervisors can write events.")  # fmt: skip
        threads = []
        if self._logdir and self._summary_writer is not None and self._save_summaries_secs:
            if self._summary_op is not None:
                threads.append(self.loop(self._save_summaries_secs, self._write_summaries,
                                         args=(sess,)))  # fmt: skip
            if self._global_step is not None:
                threads.append(_StepCounter(self, sess))
                threads[-1].start()
        if self._logdir and self._saver is not None and self._save_model_secs:
            threads.append(self.loop(self._save_model_secs, self._save_checkpoint, args=(sess,)))
        self._started_threads.extend(threads)
        return threads

    def _write_summaries(self, sess):
        if self._global_step is not None:
            summary, step = sess.run([self._summary_op, self._global_step])
        else:
            summary, step = sess.run(self._summary_op), None
        self._summary_writer.add_summary(summary, step)

    def _save_checkpoint(self, sess):
        logger.info("Saving checkpoint to path %s", self._save_path)
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    def start_queue_runners(self, sess, queue_runners=None):
        """Start the graph's (or the given) queue runners under this coordinator."""
        from asyncflow.train.queue_runner import start_queue_runners

        if queue_runners is None:
            threads = start_queue_runners(sess=sess, coord=self._coord)
        else:
            threads = []
            for qr in queue_runners:
                threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True, start=True))
        self._started_threads.extend(threads or [])
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Start a LooperThread calling `target` every `timer_interval_secs`."""
        looper = LooperThread(self._coord, timer_interval_secs, target, args, kwargs)
        looper.start()
        return looper

    def summary_computed(self, sess, summary, global_step=None):
        """Write `summary` (a serialized Summary) at `global_step` (default: the step now).

        Raises:
          RuntimeError: no summary writer (no logdir, or not the chief).
        """
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    def request_stop(self, ex=None):
        self._coord.request_stop(ex=ex)

    def should_stop(self):
        return self._coord.should_stop()

    def stop_on_exception(self):
        return self._coord.stop_on_exception()

    def wait_for_stop(self):
        self._coord.wait_for_stop()

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        """Stop the services (and `threads`), join them, close the summary writer; the
        first exception reported to the coordinator is raised here."""
        self._coord.request_stop()
        try:
            self._coord.join(
                list(self._started_threads) + list(threads or []),
                stop_grace_period_secs=self._stop_grace_secs,
                ignore_live_threads=ignore_live_threads,
            )
        finally:
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()
            self._started_threads = []

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True,
                        close_summary_writer=True):  # fmt: skip
        """A prepared session for a `with` block: an exception in the block stops the
        services (OutOfRangeError counts as a clean stop, others are re-raised on exit);
        the session is closed at the end."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services
            )
            yield sess
        except Exception as e:  # the coordinator re-raises it from stop() unless clean
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    sess.close()


class _StepCounter(LooperThread):
    """Writes "global_step/sec" every save_summaries_secs (TF's SVStepCounterThread)."""

    def __init__(self, sv: Supervisor, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv, self._sess = sv, sess
        self._last = None

    def run_loop(self):
        from asyncflow.protos import Summary

        now = time.monotonic()
        step = int(self._sess.run(self._sv.global_step))
        if self._last is not None and now > self._last[0]:
            rate = (step - self._last[1]) / (now - self._last[0])
            summary = Summary(value=[Summary.Value(tag="global_step/sec", simple_value=rate)])
            self._sv.summary_writer.add_summary(summary, step)
        self._last = (now, step)


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Call `train_step_fn(session, *args, **kwargs)` in a managed session until the
    supervisor is asked to stop."""
    with supervisor.managed_session(master) as sess:
        while not supervisor.should_stop():
            train_step_fn(sess, *(args or ()), **(kwargs or {}))
