"""`af.train.QueueRunner`: keep a queue filled by running enqueue ops in a loop (TF1's).

TF1 ran each enqueue op in its own Python thread.  Here each is an asyncio task on the
session's event loop (for a synchronous session, the runtime loop on its own thread):
a blocked enqueue is a suspended coroutine, not a parked thread.  `create_threads`
returns thread-like handles (`start`, `join`, `is_alive`, `name`, `daemon`) so TF1
programs and `Coordinator.join` work unchanged.

Invariants (as TF's): `_runs_per_session[sess]` counts this runner's live enqueue loops
in `sess`; the last loop to see the queue closed runs `close_op`; a runner is started
at most once per session until its loops end.  Starting records the runner with
`asyncflow.queues.note_runner_started`, which the dequeue watchdog consults.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from asyncflow import errors, queues
from asyncflow import graph as ops

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]

logger = logging.getLogger("asyncflow")


def _session_loop(sess) -> asyncio.AbstractEventLoop:
    """The loop the session's steps run on, binding it as `run`/`arun` would."""
    # The binding rule lives in Session: a session keeps a loop that can still serve it
    # and leaves one that closed (or sits idle), e.g. after an earlier asyncio.run.
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        sess._bind(running, threading.get_ident())  # noqa: SLF001
    elif sess._loop is None or sess._stale_loop():  # noqa: SLF001
        from asyncflow.session import runtime_loop

        sess._bind(runtime_loop(), -1)  # noqa: SLF001
    from asyncflow.session import ensure_loop_running

    ensure_loop_running(sess._loop)  # noqa: SLF001 - runners need a loop that keeps running
    return sess._loop  # noqa: SLF001


class RunnerTask:
    """A thread-like handle on a coroutine run as a task on a given loop."""

    def __init__(self, loop, coro_fn, args, name: str, loop_thread_id: int | None = None):
        self._loop = loop
        self._coro_fn = coro_fn
        self._args = args
        self.name = name
        self.daemon = False
        self._started = False
        self._done = threading.Event()
        self._callbacks: list = []
        self._lock = threading.Lock()
        self.exception: BaseException | None = None
        # Known for loops bound from async code: join() there fails instead of hanging.
        self._loop_thread_id = loop_thread_id

    def start(self) -> None:
        if self._started:
            raise RuntimeError("threads can only be started once")
        self._started = True
        coro = self._body()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._loop.create_task(coro, name=self.name)
        else:
            asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _body(self) -> None:
        try:
            await self._coro_fn(*self._args)
        except BaseException as e:  # noqa: BLE001 - recorded, as a thread would print it
            self.exception = e
            if not isinstance(e, asyncio.CancelledError):
                logger.error("Exception in %s: %r", self.name, e)
        finally:
            with self._lock:
                self._done.set()
                callbacks, self._callbacks = self._callbacks, []
            for cb in callbacks:
                cb(self)

    def add_done_callback(self, cb) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(cb)
                return
        cb(self)

    def is_alive(self) -> bool:
        return self._started and not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        """Block this thread until the task ends (RuntimeError on the loop's own thread)."""
        if self._loop_thread_id == threading.get_ident():
            raise RuntimeError(f"{self.name}.join() on its own event loop; use `await ajoin()`")
        self._done.wait(timeout)

    async def ajoin(self) -> None:
        await asyncio.to_thread(self._done.wait)

    def __repr__(self) -> str:
        state = "started" if self._started else "initial"
        if self._done.is_set():
            state = "stopped"
        return f"<RunnerTask({self.name}, {state})>"


class QueueRunner:
    """TF1's `tf.train.QueueRunner(queue, enqueue_ops, close_op=None, cancel_op=None,
    queue_closed_exception_types=None)`.

    Each enqueue op is run in a loop by its own task until the queue is closed (one of
    `queue_closed_exception_types`, OutOfRangeError by default, is raised); then the
    last loop runs `close_op`.  With a Coordinator, errors are reported to it and
    `cancel_op` runs once stop is requested.
    """

    def __init__(
        self,
        queue=None,
        enqueue_ops=None,
        close_op=None,
        cancel_op=None,
        queue_closed_exception_types=None,
        queue_runner_def=None,
        import_scope=None,
    ):
        if queue_runner_def is not None:
            if queue or enqueue_ops:
                raise ValueError("queue_runner_def and queue are mutually exclusive.")
            queue, enqueue_ops, close_op, cancel_op, queue_closed_exception_types = _from_def(
                queue_runner_def, import_scope
            )
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        if queue_closed_exception_types is None:
            self._queue_closed_exception_types = (errors.OutOfRangeError,)
        else:
            types = tuple(queue_closed_exception_types)
            if not types or not all(
                isinstance(t, type) and issubclass(t, errors.OpError) for t in types
            ):
                raise TypeError(
                    "queue_closed_exception_types, when provided, must be a tuple of "
                    f"tf.error types, but saw: {queue_closed_exception_types}"
                )
            self._queue_closed_exception_types = types
        self._lock = threading.Lock()
        self._runs_per_session: dict = {}
        self._exceptions_raised: list = []

    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self):
        return self._enqueue_ops

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def queue_closed_exception_types(self):
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self):
        """Exceptions raised but not handled by the runner tasks (no Coordinator)."""
        return self._exceptions_raised

    @property
    def name(self) -> str:
        return self._queue.name

    def to_proto(self, export_scope=None):
        """TF's QueueRunnerDef of this runner, op names relative to `export_scope`
        (None when the queue is outside it): the `queue_runners` collection of a meta
        graph, so TF's import_meta_graph gets the runners back, and ours does."""
        from asyncflow.protos import QueueRunnerDef

        if export_scope and not self._queue.name.startswith(export_scope):
            return None
        prefix = export_scope.rstrip("/") + "/" if export_scope else ""

        def strip(name):  # (TF's: the scope's prefix goes; a name without it stays)
            return name[len(prefix) :] if prefix and name.startswith(prefix) else name

        proto = QueueRunnerDef(queue_name=strip(self._queue.name))
        proto.enqueue_op_name.extend(strip(op.name) for op in self._enqueue_ops)
        proto.close_op_name = strip(self._close_op.name)
        proto.cancel_op_name = strip(self._cancel_op.name)
        proto.queue_closed_exception_types.extend(
            errors.error_code_from_exception_type(t) for t in self._queue_closed_exception_types
        )
        return proto

    @staticmethod
    def from_proto(queue_runner_def, import_scope=None):
        """The runner a QueueRunnerDef describes, over ops of the default graph."""
        return QueueRunner(queue_runner_def=queue_runner_def, import_scope=import_scope)

    async def _run(self, sess, enqueue_op, coord=None) -> None:
        decremented = False
        try:
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    await sess.arun(enqueue_op)
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                    if last:
                        try:
                            await sess.arun(self._close_op)
                        except Exception as e:  # noqa: BLE001 - TF ignores close errors
                            logger.debug("Ignored exception: %s", e)
                    return
                # A step that never suspends would otherwise keep the loop to itself.
                await asyncio.sleep(0)
        except Exception as e:
            if coord is not None:
                coord.request_stop(e)
            else:
                logger.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    async def _close_on_stop(self, sess, cancel_op, coord) -> None:
        await coord.await_for_stop()
        try:
            await sess.arun(cancel_op)
        except Exception as e:  # noqa: BLE001 - TF ignores it too
            logger.debug("Ignored exception: %s", e)

    def create_threads(self, sess, coord=None, daemon=False, start=False):
        """Create (and with start=True, start) one task per enqueue op, plus one that
        runs `cancel_op` when `coord` requests stop.  Returns thread-like handles; an
        empty list if this runner is already running in `sess`."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        loop = _session_loop(sess)
        tid = sess._loop_thread  # noqa: SLF001
        queues.note_runner_started(sess, self)
        handles = [
            RunnerTask(
                loop, self._run, (sess, op, coord), f"QueueRunnerThread-{self.name}-{op.name}", tid
            )
            for op in self._enqueue_ops
        ]
        if coord is not None:
            handles.append(
                RunnerTask(
                    loop,
                    self._close_on_stop,
                    (sess, self._cancel_op, coord),
                    f"QueueRunnerThread-{self.name}-close_on_stop",
                    tid,
                )
            )
        for h in handles:
            if coord is not None:
                coord.register_thread(h)
            h.daemon = bool(daemon)
            if start:
                h.start()
        return handles


def _from_def(proto, import_scope):
    """(queue, enqueue_ops, close_op, cancel_op, exception types) named by `proto`: the
    queue is its op, as in TF (a runner only runs ops)."""
    from asyncflow.meta_graph import _prepend

    graph = ops.get_default_graph()

    def find(name):
        return graph.as_graph_element(_prepend(name, import_scope))

    types = [errors.exception_type_from_error_code(c) for c in proto.queue_closed_exception_types]
    return (
        find(proto.queue_name),
        [find(n) for n in proto.enqueue_op_name],
        find(proto.close_op_name),
        find(proto.cancel_op_name),
        types or None,
    )


def add_queue_runner(qr, collection=ops.GraphKeys.QUEUE_RUNNERS) -> None:
    """Add `qr` to the default graph's `collection` (QUEUE_RUNNERS)."""
    ops.add_to_collection(collection, qr)


def start_queue_runners(
    sess=None, coord=None, daemon=True, start=True, collection=ops.GraphKeys.QUEUE_RUNNERS
):
    """Start every QueueRunner of `collection` in `sess` (default: the default session).

    Returns the list of thread-like handles.
    Raises: ValueError without a session; TypeError if sess is not a Session.
    """
    from asyncflow.session import BaseSession, get_default_session

    if sess is None:
        sess = get_default_session()
        if not sess:
            raise ValueError(
                "Cannot start queue runners: No default session is registered. "
                "Use `with sess.as_default()` or pass an explicit session to "
                "tf.start_queue_runners(sess=sess)"
            )
    if not isinstance(sess, BaseSession):
        raise TypeError(f"sess must be a `tf.Session` object. Given class: {sess.__class__}")
    with sess.graph.as_default():
        threads = []
        for qr in ops.get_collection(collection):
            threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


def _register_meta_graph_functions() -> None:
    from asyncflow import meta_graph
    from asyncflow.protos import QueueRunnerDef

    def to_proto(qr, export_scope=None):
        return qr.to_proto(export_scope=export_scope)

    meta_graph.register_proto_function(
        ops.GraphKeys.QUEUE_RUNNERS, QueueRunnerDef, to_proto, QueueRunner.from_proto
    )


_register_meta_graph_functions()
