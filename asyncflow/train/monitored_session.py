"""MonitoredSession and its kin: sessions that initialise, restore, run hooks and recover.

TF1's layering, kept: a session creator makes a raw Session ready (restore the latest
checkpoint, else run the init ops; then the local init op; then check `ready_op`), the
monitored session starts a Coordinator and the graph's queue runners, calls the hooks
(`begin` at construction, `after_create_session`, `before_run` / `after_run` around
every step with their fetches and feeds merged into the caller's, `end` at a clean
close), and, unless singular, recovers from AbortedError / UnavailableError by closing
the session and creating a new one (which restores the latest checkpoint).

The session-manager logic is written once as a generator that yields the I/O it needs
(`_Run`: run fetches; `_Call`: a blocking call such as `Saver.restore`); a sync driver
runs it with `Session.run`, an async driver with `await Session.arun` (blocking calls go
to a worker thread, from which `Session.run` hands its step to the loop).

Async variant: `AsyncMonitoredSession` / `AsyncMonitoredTrainingSession(...)` create
the session on the caller's running loop (`async with ... as mon`), and
`await mon.arun(...)` runs the hooks' async twins (see basic_session_run_hooks).

Invariants: `_sess is None` exactly when no usable session exists (before the first
creation after a recovery, or after close); the graph is finalized while a monitored
session is open and unfinalized on close if it was not finalized before.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session
from asyncflow.train import basic_session_run_hooks as hooks_mod

__all__ = [
    "Scaffold",
    "SessionCreator",
    "ChiefSessionCreator",
    "WorkerSessionCreator",
    "MonitoredSession",
    "SingularMonitoredSession",
    "MonitoredTrainingSession",
    "AsyncMonitoredSession",
    "AsyncMonitoredTrainingSession",
    "StepContext",
    "USE_DEFAULT",
]

logger = logging.getLogger("asyncflow.train")

USE_DEFAULT = object()
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)


# -- Scaffold -----------------------------------------------------------------------------


class Scaffold:
    """The pieces that create or gather what a training graph needs (TF1's Scaffold).

    Raises (finalize):
      RuntimeError: a collection it reads holds more than one item.
    """

    def __init__(
        self,
        init_op=None,
        init_feed_dict=None,
        init_fn=None,
        ready_op=None,
        ready_for_local_init_op=None,
        local_init_op=None,
        summary_op=None,
        saver=None,
        copy_from_scaffold=None,
        local_init_feed_dict=None,
    ):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            c = copy_from_scaffold
            init_op = init_op or c.init_op
            init_feed_dict = init_feed_dict or c.init_feed_dict
            init_fn = init_fn or c._user_init_fn
            ready_op = ready_op or c.ready_op
            ready_for_local_init_op = ready_for_local_init_op or c.ready_for_local_init_op
            local_init_op = local_init_op or c.local_init_op
            local_init_feed_dict = local_init_feed_dict or c.local_init_feed_dict
            summary_op = summary_op or c.summary_op
            saver = saver or c.saver
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self) -> Scaffold:
        """Create the missing pieces from collections or defaults; finalize the graph."""
        from asyncflow import variables

        if self._init_op is None:
            self._init_op = Scaffold.get_or_default(
                "init_op", ops.GraphKeys.INIT_OP, _default_init_op
            )
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op", ops.GraphKeys.READY_OP, variables.report_uninitialized_variables
            )
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op",
                ops.GraphKeys.READY_FOR_LOCAL_INIT_OP,
                lambda: variables.report_uninitialized_variables(variables.global_variables()),
            )
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op", ops.GraphKeys.LOCAL_INIT_OP, Scaffold.default_local_init_op
            )
        if self._summary_op is None:
            self._summary_op = Scaffold.get_or_default(
                "summary_op", ops.GraphKeys.SUMMARY_OP, _merge_all_summaries
            )
        if self._saver is None:
            self._saver = _get_saver_or_default()
        if self._saver is not None and hasattr(self._saver, "build"):
            self._saver.build()
        ops.get_default_graph().finalize()
        logger.info("Graph was finalized.")
        return self

    @property
    def init_fn(self):
        return self._init_fn

    @property
    def init_op(self):
        return self._init_op

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def local_init_feed_dict(self):
        return self._local_init_feed_dict

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def saver(self):
        return self._saver

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @staticmethod
    def get_or_default(arg_name, collection_key, default_constructor):
        """The one item of `collection_key`, or `default_constructor()` added to it."""
        elements = ops.get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". Please '
                    "indicate which one to use by passing it to the tf.Scaffold constructor "
                    f"as:  tf.Scaffold({arg_name}=item to use)"
                )
            return elements[0]
        op = default_constructor()
        if op is not None:
            ops.add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op():
        """Group of the local variables' initializer and the table initializers."""
        from asyncflow import variables
        from asyncflow.ops import control_flow_ops

        return control_flow_ops.group(
            variables.local_variables_initializer(),
            *ops.get_collection(ops.GraphKeys.TABLE_INITIALIZERS),
        )


def _default_init_op():
    """The variables' initializer, and the create ops of the graph's shared resources
    (GraphKeys.RESOURCES: a boosted trees ensemble), as TF's Scaffold."""
    from asyncflow import variables
    from asyncflow.ops import control_flow_ops

    init = variables.global_variables_initializer()
    creates = [r.create for r in ops.get_collection(ops.GraphKeys.RESOURCES)]
    return control_flow_ops.group(init, *creates) if creates else init


def _merge_all_summaries():
    try:
        from asyncflow.summary import merge_all
    except ImportError:
        return None
    return merge_all()


def _get_saver_or_default():
    """The graph's one Saver (SAVERS collection), else a new sharded one; None if no Saver."""
    savers = ops.get_collection(ops.GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in collection {ops.GraphKeys.SAVERS}. Please indicate "
                "which one to use by passing it to the constructor."
            )
        return savers[0]
    try:
        from asyncflow.train.saver import Saver
    except ImportError:  # the Saver is optional until it lands
        return None
    saver = Saver(sharded=True, allow_empty=True)
    ops.add_to_collection(ops.GraphKeys.SAVERS, saver)
    return saver


# -- session manager (one generator, two drivers) -----------------------------------------


class _Run:
    __slots__ = ("fetches", "feed_dict")

    def __init__(self, fetches, feed_dict=None):
        self.fetches, self.feed_dict = fetches, feed_dict


class _Call:
    """A blocking call; `async_name` names an awaitable twin on the call's object."""

    __slots__ = ("fn", "args", "async_fn")

    def __init__(self, fn, *args, async_fn=None):
        self.fn, self.args, self.async_fn = fn, args, async_fn


def _merged_options(options, hook_options, run_metadata):
    """The step's RunOptions with the hooks' (the larger trace level and timeout, as
    TF1's `_HookedSession`), and a RunMetadata for the hooks when a hook asked for
    options and the caller passed none."""
    if hook_options is None:
        return options, run_metadata
    from asyncflow.config import RunMetadata, RunOptions

    merged = RunOptions()
    for opts in (options, hook_options):
        if opts is None:
            continue
        merged.trace_level = max(merged.trace_level, opts.trace_level)
        merged.timeout_in_ms = max(merged.timeout_in_ms, opts.timeout_in_ms)
        merged.output_partition_graphs |= bool(opts.output_partition_graphs)
        merged.inter_op_thread_pool = opts.inter_op_thread_pool
        merged.report_tensor_allocations_upon_oom |= bool(opts.report_tensor_allocations_upon_oom)
    return merged, run_metadata if run_metadata is not None else RunMetadata()


def _drive_sync(gen, sess):
    done, request = _resume(gen)
    while not done:
        try:
            if isinstance(request, _Run):
                result = sess.run(request.fetches, feed_dict=request.feed_dict)
            else:
                result = request.fn(*request.args)
        except Exception as exc:
            done, request = _resume(gen, exc=exc)
        else:
            done, request = _resume(gen, value=result)
    return request


async def _drive_async(gen, sess):
    done, request = _resume(gen)
    while not done:
        try:
            if isinstance(request, _Run):
                result = await sess.arun(request.fetches, feed_dict=request.feed_dict)
            elif request.async_fn is not None:
                result = await request.async_fn(*request.args)
            else:
                result = await asyncio.to_thread(request.fn, *request.args)
        except Exception as exc:
            done, request = _resume(gen, exc=exc)
        else:
            done, request = _resume(gen, value=result)
    return request


def _resume(gen, value=None, exc=None):
    """Advance `gen`: (False, next request) or (True, its return value)."""
    try:
        return False, (gen.throw(exc) if exc is not None else gen.send(value))
    except StopIteration as stop:
        return True, stop.value


def _ready(op, message):
    """Generator: (True, None) when `op` reports nothing uninitialised, else (False, msg)."""
    if op is None:
        return True, None
    try:
        value = yield _Run(op)
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            raise
        return False, str(e)
    value = np.asarray(value) if value is not None else None
    if value is None or value.dtype == np.int32 or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.flat)
    return False, f"{message}: Variables not initialized: {names}"


def _try_local_init(scaffold):
    if scaffold.local_init_op is None:
        return True, None
    ok, msg = yield from _ready(scaffold.ready_for_local_init_op, "Model not ready for local init")
    if not ok:
        return False, msg
    yield _Run(scaffold.local_init_op, scaffold.local_init_feed_dict)
    return True, None


def _prepare_session(scaffold, saver, checkpoint_dir, checkpoint_filename_with_path):
    """Generator (SessionManager.prepare_session): restore or init, local init, check ready.

    Raises:
      ValueError: both checkpoint_dir and checkpoint_filename_with_path.
      RuntimeError: the init ops did not make the model ready.
    """
    if checkpoint_dir and checkpoint_filename_with_path:
        raise ValueError("Can not provide both checkpoint_dir and checkpoint_filename_with_path.")
    restored = False
    if saver is not None and (checkpoint_dir or checkpoint_filename_with_path):
        path = checkpoint_filename_with_path
        all_paths = None
        if not path:
            from asyncflow.train.saver import get_checkpoint_state

            ckpt = get_checkpoint_state(checkpoint_dir)
            if ckpt and ckpt.model_checkpoint_path:
                path = ckpt.model_checkpoint_path
                all_paths = list(ckpt.all_model_checkpoint_paths)
        if path:
            logger.info("Restoring parameters from %s", path)
            yield _Call(saver.restore, _SESSION, path, async_fn=_async_twin(saver, "arestore"))
            if all_paths is not None and hasattr(saver, "recover_last_checkpoints"):
                saver.recover_last_checkpoints(all_paths)
            restored = True
    init_op, init_fn = scaffold.init_op, scaffold.init_fn
    if not restored:
        if init_op is None and not init_fn and scaffold.local_init_op is None:
            raise RuntimeError(
                "Model is not initialized and no init_op or init_fn or local_init_op was given"
            )
        if init_op is not None:
            yield _Run(init_op, scaffold.init_feed_dict)
        if init_fn:
            yield _Call(init_fn, _SESSION)
    ok, msg = yield from _try_local_init(scaffold)
    if not ok:
        raise RuntimeError(
            "Init operations did not make model ready for local_init.  Init op: "
            f"{_maybe_name(init_op)}, init fn: {init_fn}, error: {msg}"
        )
    ok, msg = yield from _ready(scaffold.ready_op, "Model not ready")
    if not ok:
        raise RuntimeError(
            f"Init operations did not make model ready.  Init op: {_maybe_name(init_op)}, "
            f"init fn: {init_fn}, local_init_op: {scaffold.local_init_op}, error: {msg}"
        )
    return restored


def _worker_ready(scaffold):
    """Generator (SessionManager.wait_for_session, one attempt): (ready, message)."""
    ok, msg = yield from _ready(scaffold.ready_for_local_init_op, "Model not ready for local init")
    if ok:
        ok, msg = yield from _try_local_init(scaffold)
        if ok:
            ok, msg = yield from _ready(scaffold.ready_op, "Model not ready")
    return ok, msg


class _SessionPlaceholder:
    """Stands for the session being prepared in a `_Call`'s arguments."""


_SESSION = _SessionPlaceholder()


def _bind_session(gen, sess):
    """Wrap `gen` so that `_SESSION` in `_Call` arguments becomes `sess`."""
    value, exc = None, None
    while True:
        try:
            request = gen.throw(exc) if exc is not None else gen.send(value)
        except StopIteration as stop:
            return stop.value
        if isinstance(request, _Call):
            args = tuple(sess if a is _SESSION else a for a in request.args)
            request = _Call(request.fn, *args, async_fn=request.async_fn)
        try:
            value, exc = (yield request), None
        except Exception as e:
            value, exc = None, e


def _async_twin(obj, name):
    fn = getattr(obj, name, None)
    return fn if fn is not None and inspect.iscoroutinefunction(fn) else None


def _maybe_name(obj):
    if obj is None:
        return None
    return getattr(obj, "name", repr(obj))


# -- session creators ---------------------------------------------------------------------


class SessionCreator:
    """A factory for tf.Session."""

    def create_session(self):
        raise NotImplementedError(f"create_session is not implemented for {self}.")

    async def acreate_session(self):
        """Create the session bound to the running loop (asyncflow addition)."""
        raise NotImplementedError(f"acreate_session is not implemented for {self}.")


class ChiefSessionCreator(SessionCreator):
    """Creates a session that restores the latest checkpoint or runs the init ops."""

    def __init__(
        self,
        scaffold=None,
        master="",
        config=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
    ):
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config

    def _new_session(self):
        self._scaffold.finalize()
        return Session(self._master, graph=ops.get_default_graph(), config=self._config)

    def _steps(self, sess):
        gen = _prepare_session(
            self._scaffold,
            self._scaffold.saver,
            self._checkpoint_dir,
            self._checkpoint_filename_with_path,
        )
        return _bind_session(gen, sess)

    def create_session(self):
        sess = self._new_session()
        try:
            _drive_sync(self._steps(sess), sess)
        except BaseException:
            sess.close()
            raise
        return sess

    async def acreate_session(self):
        sess = self._new_session()
        try:
            await sess.arun([])  # binds the session to the running loop
            await _drive_async(self._steps(sess), sess)
        except BaseException:
            sess.close()
            raise
        return sess


class WorkerSessionCreator(SessionCreator):
    """Creates a session that waits for the chief to make the model ready.

    Raises (create_session):
      DeadlineExceededError: not ready after `max_wait_secs`.
    """

    recovery_wait_secs = 30

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def _timed_out(self, start):
        remaining = self._max_wait_secs - (time.monotonic() - start)
        if remaining < self.recovery_wait_secs:
            raise errors.DeadlineExceededError(
                None, None, f"Session was not ready after waiting {self._max_wait_secs} secs."
            )

    def create_session(self):
        self._scaffold.finalize()
        start = time.monotonic()
        while True:
            sess = Session(self._master, graph=ops.get_default_graph(), config=self._config)
            ok, msg = _drive_sync(_worker_ready(self._scaffold), sess)
            if ok:
                return sess
            sess.close()
            logger.info("Waiting for model to be ready.  Ready_for_local_init_op: %s", msg)
            self._timed_out(start)
            time.sleep(self.recovery_wait_secs)

    async def acreate_session(self):
        self._scaffold.finalize()
        start = time.monotonic()
        while True:
            sess = Session(self._master, graph=ops.get_default_graph(), config=self._config)
            await sess.arun([])
            ok, msg = await _drive_async(_worker_ready(self._scaffold), sess)
            if ok:
                return sess
            sess.close()
            logger.info("Waiting for model to be ready.  Ready_for_local_init_op: %s", msg)
            self._timed_out(start)
            await asyncio.sleep(self.recovery_wait_secs)


# -- coordinator and queue runners --------------------------------------------------------


class _MiniCoordinator:
    """The part of tf.train.Coordinator used here, until coordinator.py exists."""

    def __init__(self, clean_stop_exception_types=None):
        self._stop = False
        self._exc = None

    def request_stop(self, ex=None):
        if isinstance(ex, tuple):  # an exc_info triple
            ex = ex[1]
        if ex is not None and self._exc is None:
            self._exc = ex
        self._stop = True

    def should_stop(self):
        return self._stop

    def clear_stop(self):
        self._stop = False
        self._exc = None

    def raise_requested_exception(self):
        if self._exc is not None:
            raise self._exc

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        self.raise_requested_exception()


def _new_coordinator():
    try:
        from asyncflow.train.coordinator import Coordinator
    except ImportError:
        return _MiniCoordinator()
    return Coordinator(clean_stop_exception_types=[])


def _start_queue_runners(sess, coord):
    if not ops.get_collection(ops.GraphKeys.QUEUE_RUNNERS):
        return
    from asyncflow.train.queue_runner import start_queue_runners

    start_queue_runners(sess=sess, coord=coord)


def _merge_hook_args(hooks, run_context, fetches, user_feed_dict, requests):
    """TF1's _call_hook_before_run merging: hook fetches keyed by hook, feeds united.

    Raises:
      RuntimeError: two hooks, or a hook and the caller, feed the same tensor.
    """
    actual = {"caller": fetches}
    hook_feeds = {}
    options = None
    for hook, request in zip(hooks, requests):
        if request is None:
            continue
        if request.fetches is not None:
            actual[hook] = request.fetches
        if request.feed_dict:
            if set(hook_feeds) & set(request.feed_dict):
                raise RuntimeError("Same tensor is fed by two hooks.")
            hook_feeds.update(request.feed_dict)
        if request.options is not None:
            options = request.options if options is None else options
    if not hook_feeds:
        feed_dict = user_feed_dict
    elif not user_feed_dict:
        feed_dict = hook_feeds
    else:
        if set(hook_feeds) & set(user_feed_dict):
            raise RuntimeError("Same tensor is fed by a SessionRunHook and user.")
        feed_dict = dict(user_feed_dict)
        feed_dict.update(hook_feeds)
    return actual, feed_dict, options


def _overrides(hook, name) -> bool:
    return getattr(type(hook), name, None) is not getattr(hooks_mod.SessionRunHook, name)


class StepContext:
    """What `run_step_fn`'s step_fn receives: the raw session and run_with_hooks."""

    def __init__(self, session, run_with_hooks_fn):
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self):
        return self._session

    def run_with_hooks(self, *args, **kwargs):
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self):
        raise StopIteration("step_fn has requested the iterations to stop.")


# -- MonitoredSession ---------------------------------------------------------------------


class _MonitoredBase:
    def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs):
        self._graph = ops.get_default_graph()
        self._graph_was_finalized = self._graph.finalized
        self._hooks = list(hooks or [])
        for h in self._hooks:
            h.begin()
        self._creator = session_creator or ChiefSessionCreator()
        self._should_recover = should_recover
        self._stop_grace_period_secs = stop_grace_period_secs
        self._sess = None  # the raw Session, once created
        self._coord = None
        self._hooked_should_stop = False
        self._closed = False
        self._before = [h for h in self._hooks if _overrides(h, "before_run")]
        self._after = [h for h in self._hooks if _overrides(h, "after_run")]

    @property
    def graph(self):
        return self._graph

    def should_stop(self) -> bool:
        """True once a hook requested stop, the coordinator stopped, or after close."""
        if self._closed:
            return True
        if self._sess is None:
            return False
        return self._hooked_should_stop or self._coord.should_stop()

    def _check_runnable(self):
        if self._closed:
            raise RuntimeError("Attempted to use a closed MonitoredSession.")
        if self._sess is not None and self._hooked_should_stop:
            raise RuntimeError("Run called even after should_stop requested.")

    def _raise_coordinator_error(self, exc):
        # A non-preemption error may be caused by a preemption error in the coordinator.
        try:
            self._coord.raise_requested_exception()
        except _PREEMPTION_ERRORS as coord_exc:
            raise coord_exc from exc
        except Exception:
            pass

    def _close_session(self):
        sess, coord = self._sess, self._coord
        self._sess = None
        if sess is None:
            return
        try:
            coord.request_stop()
            coord.join(
                stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True
            )
        except _PREEMPTION_ERRORS as e:
            logger.error("An error occurred when attempting to close the session: %s", e)
        finally:
            # A checkpoint being written in the background must land before the
            # session goes: recovery restores the latest one, as TF1's synchronous
            # saves guarantee.
            for h in self._hooks:
                wait = getattr(h, "wait_for_pending_save", None)
                if wait is not None:
                    try:
                        wait()
                    except Exception as e:  # noqa: BLE001 - reported, recovery goes on
                        logger.error("Checkpoint save before recovery failed: %s", e)
            try:
                sess.close()
            except _PREEMPTION_ERRORS as e:
                logger.error("Session closing due to OpError: %s", e)

    def _finish_close(self):
        self._closed = True
        if not self._graph_was_finalized:
            self._graph._unsafe_unfinalize()


class MonitoredSession(_MonitoredBase):
    """Session-like object that handles initialization, recovery and hooks (TF1).

    Raises (run): the step's OpError; RuntimeError after close or once should_stop();
    AbortedError/UnavailableError are recovered from (a new session is created).
    """

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
        super().__init__(session_creator, hooks, True, stop_grace_period_secs)
        self._create()

    def _create(self):
        while True:
            try:
                sess = self._creator.create_session()
                break
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                logger.info("An error was raised while a session was being created: %s", e)
        coord = _new_coordinator()
        try:
            _start_queue_runners(sess, coord)
            for h in self._hooks:
                h.after_create_session(sess, coord)
        except BaseException:
            coord.request_stop()
            sess.close()
            raise
        self._sess, self._coord, self._hooked_should_stop = sess, coord, False

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run one step with the hooks (TF1's MonitoredSession.run)."""
        self._check_runnable()
        while True:
            try:
                if self._sess is None:
                    self._create()
                return self._run_hooked(fetches, feed_dict, options, run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                logger.info(
                    "An error was raised. This may be due to a preemption in a connected "
                    "worker or parameter server. The current session will be closed and a "
                    "new session will be created. Error: %s",
                    e,
                )
                self._close_session()

    def _run_hooked(self, fetches, feed_dict, options, run_metadata):
        sess = self._sess
        ctx = hooks_mod.SessionRunContext(hooks_mod.SessionRunArgs(fetches, feed_dict), sess)
        requests = [h.before_run(ctx) for h in self._before]
        actual, feed, hook_options = _merge_hook_args(
            self._before, ctx, fetches, feed_dict, requests
        )
        options, run_metadata = _merged_options(options, hook_options, run_metadata)
        try:
            outputs = sess.run(actual, feed_dict=feed, options=options, run_metadata=run_metadata)
        except _PREEMPTION_ERRORS:
            raise
        except Exception as exc:
            self._raise_coordinator_error(exc)
            raise
        for h in self._after:
            h.after_run(ctx, hooks_mod.SessionRunValues(outputs.get(h), options, run_metadata))
        self._hooked_should_stop = self._hooked_should_stop or ctx.stop_requested
        return outputs["caller"]

    def run_step_fn(self, step_fn):
        """Run `step_fn(step_context)`; `step_context.request_stop()` ends the loop.

        Raises: ValueError: step_fn does not take exactly `step_context`.
        """
        params = list(inspect.signature(step_fn).parameters)
        if params not in (["step_context"], ["self", "step_context"]):
            raise ValueError(
                "`step_fn` may either have one `step_context` argument, or `self` and "
                f"`step_context` arguments if it's an instance method. Got {tuple(params)} "
                "instead."
            )
        while True:
            self._check_runnable()
            if self._sess is None:
                self._create()
            try:
                return step_fn(StepContext(self._sess, self.run))
            except StopIteration:
                self._hooked_should_stop = True
                return None
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                logger.info("Recovering from %s", e)
                self._close_session()

    def close(self):
        self._close_internal()

    def _close_internal(self, exception_type=None):
        try:
            if not exception_type and self._sess is not None:
                for h in self._hooks:
                    h.end(self._sess)
        finally:
            try:
                if self._closed:
                    raise RuntimeError("Session is already closed.")
                self._close_session()
            finally:
                self._finish_close()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None


class SingularMonitoredSession(MonitoredSession):
    """A MonitoredSession for single-process training that does not recover.

    `raw_session()` gives the underlying Session.
    """

    def __init__(
        self,
        hooks=None,
        scaffold=None,
        master="",
        config=None,
        checkpoint_dir=None,
        stop_grace_period_secs=120,
        checkpoint_filename_with_path=None,
    ):
        creator = ChiefSessionCreator(
            scaffold=scaffold,
            master=master,
            config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
        )
        _MonitoredBase.__init__(self, creator, hooks, False, stop_grace_period_secs)
        self._create()

    def raw_session(self):
        return self._sess


def _training_hooks(
    is_chief,
    checkpoint_dir,
    scaffold,
    hooks,
    chief_only_hooks,
    save_checkpoint_secs,
    save_summaries_steps,
    save_summaries_secs,
    log_step_count_steps,
    save_checkpoint_steps,
    summary_dir,
    save_graph_def,
):
    """TF1's MonitoredTrainingSession defaults (USE_DEFAULT resolution) and hook list."""
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    if not is_chief:
        return list(hooks or [])
    all_hooks = list(chief_only_hooks or [])
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(
                hooks_mod.StepCounterHook(
                    output_dir=summary_dir, every_n_steps=log_step_count_steps
                )
            )
        wants_summaries = (save_summaries_steps and save_summaries_steps > 0) or (
            save_summaries_secs and save_summaries_secs > 0
        )
        summary_hook = getattr(hooks_mod, "SummarySaverHook", None)
        if wants_summaries and summary_hook is not None:
            all_hooks.append(
                summary_hook(
                    scaffold=scaffold,
                    save_steps=save_summaries_steps,
                    save_secs=save_summaries_secs,
                    output_dir=summary_dir,
                )
            )
    if checkpoint_dir and (
        (save_checkpoint_secs and save_checkpoint_secs > 0)
        or (save_checkpoint_steps and save_checkpoint_steps > 0)
    ):
        all_hooks.append(
            hooks_mod.CheckpointSaverHook(
                checkpoint_dir,
                save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs,
                scaffold=scaffold,
                save_graph_def=save_graph_def,
            )
        )
    all_hooks.extend(hooks or [])
    return all_hooks


def _training_creator(master, is_chief, checkpoint_dir, scaffold, config, max_wait_secs):
    if not is_chief:
        return WorkerSessionCreator(
            scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )
    return ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )


def MonitoredTrainingSession(  # noqa: N802 - TF1's name (a function returning a session)
    master="",
    is_chief=True,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps=100,
    max_wait_secs=7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    save_graph_def=True,
):
    """A MonitoredSession for training: restore-or-init, checkpoint/step-counter hooks.

    Defaults as TF1: a checkpoint every 600 s when neither save_checkpoint_secs nor
    save_checkpoint_steps is given; none when checkpoint_dir is None.
    """
    scaffold = scaffold or Scaffold()
    all_hooks = _training_hooks(
        is_chief,
        checkpoint_dir,
        scaffold,
        hooks,
        chief_only_hooks,
        save_checkpoint_secs,
        save_summaries_steps,
        save_summaries_secs,
        log_step_count_steps,
        save_checkpoint_steps,
        summary_dir,
        save_graph_def,
    )
    creator = _training_creator(master, is_chief, checkpoint_dir, scaffold, config, max_wait_secs)
    return MonitoredSession(
        session_creator=creator, hooks=all_hooks, stop_grace_period_secs=stop_grace_period_secs
    )


# -- the async variant --------------------------------------------------------------------


class AsyncMonitoredSession(_MonitoredBase):
    """MonitoredSession for async code: `async with` creates it on the running loop.

        async with AsyncMonitoredSession(creator, hooks) as mon:
            while not mon.should_stop():
                await mon.arun(train_op)

    Hooks' async twins (`abefore_run`, ...) are awaited; a hook with `loop_safe = True`
    is called directly; any other hook's sync method runs on a worker thread.
    Raises as MonitoredSession.run.
    """

    def __init__(
        self, session_creator=None, hooks=None, stop_grace_period_secs=120, should_recover=True
    ):
        super().__init__(session_creator, hooks, should_recover, stop_grace_period_secs)

    async def _call(self, hook, name, *args):
        twin = getattr(hook, "a" + name, None)
        if twin is not None:
            return await twin(*args)
        method = getattr(hook, name)
        if getattr(hook, "loop_safe", False):
            return method(*args)
        return await asyncio.to_thread(method, *args)

    async def _create(self):
        while True:
            try:
                sess = await self._creator.acreate_session()
                break
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                logger.info("An error was raised while a session was being created: %s", e)
        coord = _new_coordinator()
        try:
            _start_queue_runners(sess, coord)
            for h in self._hooks:
                if _overrides(h, "after_create_session") or hasattr(h, "aafter_create_session"):
                    await self._call(h, "after_create_session", sess, coord)
        except BaseException:
            coord.request_stop()
            sess.close()
            raise
        self._sess, self._coord, self._hooked_should_stop = sess, coord, False

    async def __aenter__(self):
        if self._sess is None and not self._closed:
            await self._create()
        return self

    async def __aexit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        await self._aclose_internal(exception_type)
        return exception_type is None

    async def arun(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run one step with the hooks, on the running loop."""
        self._check_runnable()
        while True:
            try:
                if self._sess is None:
                    await self._create()
                return await self._arun_hooked(fetches, feed_dict, options, run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                logger.info("Recovering from %s: creating a new session.", e)
                self._close_session()

    async def _arun_hooked(self, fetches, feed_dict, options, run_metadata):
        sess = self._sess
        ctx = hooks_mod.SessionRunContext(hooks_mod.SessionRunArgs(fetches, feed_dict), sess)
        requests = [await self._call(h, "before_run", ctx) for h in self._before]
        actual, feed, hook_options = _merge_hook_args(
            self._before, ctx, fetches, feed_dict, requests
        )
        options, run_metadata = _merged_options(options, hook_options, run_metadata)
        try:
            outputs = await sess.arun(
                actual, feed_dict=feed, options=options, run_metadata=run_metadata
            )
        except _PREEMPTION_ERRORS:
            raise
        except Exception as exc:
            self._raise_coordinator_error(exc)
            raise
        for h in self._after:
            values = hooks_mod.SessionRunValues(outputs.get(h), options, run_metadata)
            await self._call(h, "after_run", ctx, values)
        self._hooked_should_stop = self._hooked_should_stop or ctx.stop_requested
        return outputs["caller"]

    def raw_session(self):
        return self._sess

    async def aclose(self):
        await self._aclose_internal()

    async def _aclose_internal(self, exception_type=None):
        try:
            if not exception_type and self._sess is not None:
                for h in self._hooks:
                    if _overrides(h, "end") or hasattr(h, "aend"):
                        await self._call(h, "end", self._sess)
        finally:
            try:
                if self._closed:
                    raise RuntimeError("Session is already closed.")
                self._close_session()
            finally:
                self._finish_close()


def AsyncMonitoredTrainingSession(  # noqa: N802 - mirrors MonitoredTrainingSession
    master="",
    is_chief=True,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps=100,
    max_wait_secs=7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    save_graph_def=True,
):
    """MonitoredTrainingSession's arguments and hooks, as an AsyncMonitoredSession.

    async with AsyncMonitoredTrainingSession(checkpoint_dir=d) as mon:
        while not mon.should_stop():
            await mon.arun(train_op)
    """
    scaffold = scaffold or Scaffold()
    all_hooks = _training_hooks(
        is_chief,
        checkpoint_dir,
        scaffold,
        hooks,
        chief_only_hooks,
        save_checkpoint_secs,
        save_summaries_steps,
        save_summaries_secs,
        log_step_count_steps,
        save_checkpoint_steps,
        summary_dir,
        save_graph_def,
    )
    creator = _training_creator(master, is_chief, checkpoint_dir, scaffold, config, max_wait_secs)
    return AsyncMonitoredSession(
        session_creator=creator, hooks=all_hooks, stop_grace_period_secs=stop_grace_period_secs
    )
