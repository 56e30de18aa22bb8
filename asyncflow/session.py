"""Session: run any subgraph, synchronously (`run`) or awaited on a loop (`arun`).

Loop binding (DESIGN.md "Event loop and sessions"): a session binds to one event loop
at its first step.  `arun` (or `async with`) binds it to the caller's running loop;
`run` from synchronous code binds it to the process's runtime loop (uvloop when
present).  That loop gets its own thread as soon as anything must run between steps
(queue runners, background saves, steps from several threads at once); until then a
synchronous `run` drives its step on the calling thread, which avoids a thread
handoff per step (see `_Runtime`).  Once bound:
- `arun` from the bound loop runs the step in the caller's task;
- `arun` from another loop, bound to the runtime loop, hands the step to it;
- `run` from any other thread hands the step to the bound loop and waits for it;
- `run` on the bound loop's own thread would deadlock, so it raises and says to use
  `arun`.
A loop that closed (`asyncio.run` returned), or that sits idle with no step in flight,
no longer holds the session: the next `arun` rebinds it to the caller's loop, the next
`run` to the runtime loop.  `arun` from one loop while the session's loop runs in
another thread raises RuntimeError (the session's state lives on that loop).

Invariants: plans are cached per (feeds, fetches, targets, graph version) and shared by
concurrent steps; every in-flight step is in `_steps` until it ends, so `close()` can
fail them all with CancelledError.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import operator
import threading

import numpy as np

from asyncflow import dtypes, errors, loop_slices, resources
from asyncflow import graph as ops
from asyncflow.config import ConfigProto
from asyncflow.debug_watch import debug_watches
from asyncflow.devices.cpu import CALLER_DRIVES, favour_loop_thread, release_cores, share_cores
from asyncflow.devices.registry import create_devices
from asyncflow.graph import (  # noqa: F401 - the default session stack lives with the graph
    _default_sessions,
    _eval_with_default,
    _global_default_session,
    get_default_session,
)
from asyncflow.kernel_api import (
    QUIET_STEP,
    end_quiet_step,
    in_quiet_step,
    note_task,
    parks,
    quiet_step,
    start_parked,
)
from asyncflow.loop_slices import (
    _DEADLINES,
    _SLICE_OF,
    _YIELD_TO_LOOP,
    GRACE_FRACTION,
    STEPPED_IN,
    _clock,
    caller_drives,
)
from asyncflow.master import Master, worker_for_target
from asyncflow.partial_run import NO_SETUP, PartialRun
from asyncflow.ragged import is_ragged
from asyncflow.sparse_tensor import SparseTensor
from asyncflow.straight_line import program_for
from asyncflow.worker import LocalWorker, timeout_s, traced

__all__ = [
    "Session",
    "InteractiveSession",
    "get_default_session",
]

_MAX_CACHED_PLANS = 1024

# -- the runtime loop for synchronous callers ------------------------------------------


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is optional on some platforms
        return asyncio.new_event_loop()


_STOPPED_LOOP = (
    "The event loop this Session is bound to stopped while a step was in flight on it, "
    "and the thread that ran it has ended; the step can never finish. Keep that loop "
    "running until its steps end (or close the session first)."
)
# How often a caller blocked on a step handed to a loop in another thread checks that
# the loop can still finish it (only blocked steps pay: a finished step wakes at once).
_WATCH_S = 0.05


def _loop_gone(loop, thread_id) -> bool:
    """Whether `loop` can never run again: closed, or stopped with its thread ended."""
    if loop.is_running():
        return False
    if loop.is_closed():
        return True
    return thread_id is not None and not any(t.ident == thread_id for t in threading.enumerate())


def _watched(wait, loop, thread_id):
    """Call `wait(timeout)` until it returns True, raising RuntimeError if meanwhile
    the loop that must complete the step is gone for good (see `_loop_gone`)."""
    while not wait(_WATCH_S):
        if _loop_gone(loop, thread_id):
            raise RuntimeError(_STOPPED_LOOP)


_IDLE_LOOP = (
    "This Session is bound to an event loop that is not running, with steps still in "
    "flight on it; run that loop to finish them, or close the session."
)


class _Runtime:
    """The process-wide loop of synchronous sessions, and who drives it.

    While nothing runs in the background, the loop has no thread: a synchronous
    `run` takes it and drives its own step on the calling thread (handing a step to
    another thread costs ~100 µs of wake-ups and cold caches on an idle machine, many
    times a small step).  As soon as something must go on between steps (a task still
    pending after a step, a step from another thread arriving meanwhile, a queue
    runner or a background checkpoint asking for the loop), the loop moves to a
    dedicated thread for good, and every later step is handed to it.

    Invariant: at most one thread drives the loop at a time; `owner` is that thread
    while a step is driven inline, `thread` the dedicated one once it exists.
    """

    def __init__(self):
        self.loop = _new_loop()
        # Every Task of the loop, to tell after an inline step whether one is left
        # (asyncio.all_tasks costs ~2.6 us, a fifth of a trivial step).
        self.tasks: set[asyncio.Task] = set()
        self.loop.set_task_factory(self._new_task)
        self.lock = threading.Lock()
        self.owner: int | None = None
        self.thread: threading.Thread | None = None
        self.handoff = False  # a step was queued for the loop while an owner drove it

    def _new_task(self, loop, coro, **kwargs):
        task = asyncio.Task(coro, loop=loop, **kwargs)
        note_task(task)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _tasks_left(self) -> bool:
        # (a done Task whose callback has not run yet, the loop having stopped, is gone;
        # a parked one, kernel_api.parked_task, waits for the next step)
        return any(not t.done() and not parks(t) for t in self.tasks)

    def ensure_thread(self) -> None:
        """Give the loop its dedicated thread (now, or when the inline owner is done)."""
        with self.lock:
            if self.thread is None:
                if self.owner is None:
                    self._start_thread()
                else:
                    self.handoff = True

    def cancel_if_idle(self, fn) -> bool:
        """Call `fn` now if no thread drives the loop (so no step is in flight)."""
        with self.lock:
            if self.thread is None and self.owner is None:
                fn()
                return True
        return False

    def _start_thread(self) -> None:  # with self.lock held, loop not running
        loop = self.loop
        ready = threading.Event()

        def serve():
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self.thread = threading.Thread(target=serve, name="asyncflow-runtime", daemon=True)
        self.thread.start()
        ready.wait()

    def run(self, coro, needs_task: bool):
        """Run a step coroutine for a blocked synchronous caller; return its result."""
        # A thread already running some other loop cannot drive this one.
        foreign = asyncio.events._get_running_loop() is not None
        if foreign:
            self.ensure_thread()
        with self.lock:
            inline = not foreign and self.thread is None and self.owner is None
            if inline:
                self.owner = threading.get_ident()
            elif self.thread is None:
                self.handoff = True  # the owner starts the thread when it is done
        if not inline:
            if needs_task:
                cf = asyncio.run_coroutine_threadsafe(in_quiet_step(coro), self.loop)
                try:
                    return cf.result()
                except KeyboardInterrupt:
                    cf.cancel()
                    raise
            return _SyncCall(self.loop).wait(coro)
        try:
            return self._drive(coro, needs_task)
        finally:
            with self.lock:
                self.owner = None
                if self.handoff or self._tasks_left():
                    self._start_thread()

    def _drive(self, coro, needs_task: bool):
        token = CALLER_DRIVES.set(True)  # a lone device then computes inline too
        caller_drives(self.loop, True)  # the interpreters' slices: long, one per step
        try:
            # TF yields inf/nan silently: one errstate for the whole step instead of one
            # per kernel (executor.QUIET_STEP).
            with quiet_step():
                return self._drive_inline(coro, needs_task)
        finally:
            caller_drives(self.loop, False)
            CALLER_DRIVES.reset(token)

    def _drive_inline(self, coro, needs_task: bool):
        loop = self.loop
        if needs_task:  # asyncio.timeout needs a Task around the whole step
            return _until_complete(loop, coro)
        # Most steps never suspend: drive the coroutine directly (the loop counts as
        # running on this thread meanwhile), and run the loop only if it does.
        asyncio.events._set_running_loop(loop)
        try:
            fut = coro.send(None)
        except StopIteration as stop:
            return stop.value
        finally:
            asyncio.events._set_running_loop(None)
        return _until_complete(loop, _continue(coro, fut))


def _until_complete(loop, aw):
    """`loop.run_until_complete(aw)` for a blocked synchronous caller.  Ctrl-C
    (KeyboardInterrupt) cancels the step and lets it clean up before propagating: a
    dequeue it was waiting in withdraws, so the next element is not lost (issue 18)."""
    task = asyncio.ensure_future(aw, loop=loop)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(task)
        raise


_runtime_lock = threading.Lock()
_runtime: _Runtime | None = None


def _get_runtime() -> _Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime.loop.is_closed():
            _runtime = _Runtime()
        return _runtime


def runtime_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop of synchronous sessions, running on its own thread.

    For background work (queue runners, periodic saves): asking for it moves the loop
    to its dedicated thread.
    """
    rt = _get_runtime()
    rt.ensure_thread()
    return rt.loop


def ensure_loop_running(loop: asyncio.AbstractEventLoop) -> None:
    """Make sure `loop` is being run by some thread before handing it background work.

    A session bound to the runtime loop may have driven its steps inline so far.
    """
    rt = _runtime
    if rt is not None and rt.loop is loop:
        rt.ensure_thread()


# -- fetch structures ------------------------------------------------------------------


class _FetchMapper:
    """Flattens any nesting of lists/tuples/dicts/namedtuples and rebuilds results."""

    __slots__ = ("elements", "rebuild")

    def __init__(self, graph: ops.Graph, fetches):
        elements: list = []
        self.rebuild = self._build(graph, fetches, elements)
        self.elements = elements

    def _build(self, graph, f, elements):
        composite = getattr(f, "_fetch_components", None)  # SparseTensor -> SparseTensorValue
        if composite is not None:
            components, make_value = composite()
            sub = self._build(graph, components, elements)
            return lambda vals: make_value(sub(vals))
        if isinstance(f, (list, tuple)) and not hasattr(f, "_as_graph_element"):
            subs = [self._build(graph, x, elements) for x in f]
            if isinstance(f, tuple) and hasattr(f, "_fields"):
                return lambda vals, t=type(f): t(*(s(vals) for s in subs))
            kind = type(f)
            return lambda vals: kind(s(vals) for s in subs)
        if isinstance(f, collections.abc.Mapping):
            keys = list(f.keys())
            first = len(elements)
            subs = [self._build(graph, f[k], elements) for k in keys]
            kind = type(f)
            if kind is dict and all(_is_leaf(f[k]) for k in keys):
                # (a dict of tensors: its values are these consecutive elements)
                end = len(elements)
                return lambda vals: dict(zip(keys, vals[first:end]))

            def rebuild_map(vals):
                items = [(k, s(vals)) for k, s in zip(keys, subs)]
                try:
                    return kind(items)
                except TypeError:
                    return dict(items)

            return rebuild_map
        if f is None:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}")
        try:
            el = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
        except TypeError as e:
            raise TypeError(
                f"Fetch argument {f!r} has invalid type {type(f)}, must be a string or Tensor. "
                f"({e})"
            ) from None
        except (KeyError, ValueError) as e:
            msg = e.args[0] if e.args else str(e)
            raise ValueError(
                f"Fetch argument {f!r} cannot be interpreted as a Tensor. ({msg})"
            ) from None
        if graph._checked_outputs and el in graph._checked_outputs:
            el = graph._checked_outputs[el]  # (tf.debugging.enable_check_numerics)
        if not graph.is_fetchable(el):
            op = el if isinstance(el, ops.Operation) else el.op
            raise ops.InaccessibleTensorError(
                f"Operation {op.name} has been marked as not fetchable. Typically this happens "
                "when it is defined in another function or code block. Use return values, "
                "explicit Python locals or TensorFlow collections to access it."
            )
        k = len(elements)
        elements.append(el)
        return lambda vals: vals[k]


class _Fetched:
    """A `_FetchMapper` built without it, for the common fetches (`_plain_fetch`)."""

    __slots__ = ("elements", "rebuild")

    def __init__(self, elements: list, rebuild):
        self.elements = elements
        self.rebuild = rebuild


_first = operator.itemgetter(0)


def _plain_fetch(graph, f) -> bool:
    """Whether fetch `f` is a Tensor or Operation of `graph` that `_FetchMapper` would
    take as it is (one element, no checks to fail): the common step's fetches skip its
    walk (~1.3 us of a ~13 us trivial step)."""
    kind = type(f)
    if kind is ops.Tensor:
        op = f.op
    elif kind is ops.Operation:
        op = f
    else:
        return False
    # (a graph with a tf.cond holds unfetchable ops: its other fetches stay plain)
    if graph._checked_outputs:  # (a fetch may read its check: the mapper swaps it)
        return False
    return f.graph is graph and (not graph._unfetchable_ops or op not in graph._unfetchable_ops)


def _is_leaf(f) -> bool:
    """Whether `_FetchMapper._build` takes fetch `f` as one element (a tensor, an
    operation, a name), not a structure or a composite of several."""
    if getattr(f, "_fetch_components", None) is not None:
        return False
    if isinstance(f, (list, tuple)) and not hasattr(f, "_as_graph_element"):
        return False
    return not isinstance(f, collections.abc.Mapping)


def _fetch_values(values, feed_values, fed_fetches=()) -> list:
    """Fetched arrays as TF1 hands them out: numpy scalars for rank 0, and arrays the
    caller owns: a constant's or variable's buffer (read-only, shared) or a feed is
    copied, so writing into a result never changes graph state or the caller's feed.
    A fetched tensor that was fed (`fed_fetches`: (fetch index, feed index)) is the fed
    array, a rank-0 one too, as TF's client hands it back."""
    out = []
    for v in values:
        if isinstance(v, np.ndarray):
            if v.dtype.names is not None:  # quantized (qint8...): TF hands out the integers
                v = v.view(v.dtype.fields[v.dtype.names[0]][0]).copy()
            if v.ndim == 0:
                v = v[()]
            elif not v.flags.writeable:
                v = v.copy()
            else:
                for f in feed_values or ():
                    if v is f:
                        v = v.copy()
                        break
        elif hasattr(v, "_fetch_value"):  # IndexedSlices and other composite values
            v = v._fetch_value()
        out.append(v)
    for k, i in fed_fetches:
        out[k] = np.array(feed_values[i])  # (a copy: the caller's feed stays its own)
    return out


# -- Session ---------------------------------------------------------------------------


class BaseSession:
    def __init__(self, target: str = "", graph: ops.Graph | None = None, config=None):
        """Raises NotFoundError (TF's) for a target no registered scheme serves."""
        if graph is not None and not isinstance(graph, ops.Graph):
            raise TypeError(f"graph must be a tf.Graph, but got {type(graph)}")
        self._graph = graph if graph is not None else ops.get_default_graph()
        if config is None:  # (TF's: the process-wide tf.config settings)
            from asyncflow.device_config import session_config

            config = session_config()
        self._config = config
        self._target = target or ""
        self._closed = False
        self._close_hooks: list = []  # called at close (tf.data's input workers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._worker = worker_for_target(self._target, self._config, _local_worker)
        self._master = Master(self, self._graph, self._config, self._worker)
        n_cpu = sum(d.device_type == "CPU" for d in self._worker.devices)
        self._shares_cores = n_cpu > 1
        if self._shares_cores:
            share_cores(n_cpu)
        self._lock = threading.Lock()
        self._partial_runs: dict[str, PartialRun] = {}  # handle -> (partial_run_setup)

    # -- the runtime below the client (tests and tools look at these)
    @property
    def _devices(self) -> list:
        return self._worker.devices

    @property
    def _plans(self) -> dict:
        return self._master.plans

    @property
    def _placer(self):
        return self._master.placer

    @property
    def _steps(self) -> set:
        return self._worker._steps

    # -- properties
    @property
    def graph(self) -> ops.Graph:
        return self._graph

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> bytes:
        return self._target.encode()  # (bytes, as TF's)

    def list_devices(self):
        return [_DeviceAttributes(d) for d in self._devices]

    # -- loop binding
    def _bind(self, loop: asyncio.AbstractEventLoop, thread_id: int) -> None:
        """Bind to `loop` unless bound to a loop that can still serve the session."""
        with self._lock:
            if self._loop is None or self._loop is not loop and self._stale_loop():
                self._loop = loop
                self._loop_thread = thread_id
        if thread_id == threading.get_ident() and self._loop is loop:
            favour_loop_thread()  # steps share this loop: the OS should wake it promptly

    def _stale_loop(self) -> bool:
        """Whether the bound loop can be left for another: it is closed, or it sits
        idle with no step in flight (as a loop between two `run_until_complete`s).
        The runtime loop of synchronous sessions is never left while it lives."""
        loop = self._loop
        if loop.is_closed():
            return True
        rt = _runtime
        if rt is not None and rt.loop is loop:
            return False
        return not loop.is_running() and not getattr(self._worker, "steps_in_flight", 0)

    def _arun_loop(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """The loop an `arun` from `loop` runs its step on (binding the session)."""
        self._bind(loop, threading.get_ident())
        bound = self._loop
        if bound is loop:
            return loop
        rt = _runtime
        if rt is not None and rt.loop is bound:
            return bound  # the session's own runtime loop serves every caller
        if bound.is_running():
            raise RuntimeError(
                "This Session is bound to an event loop that is running in another thread; "
                "its steps and state (variables, queues) live on that loop. Await "
                "`sess.arun(...)` on that loop (asyncio.run_coroutine_threadsafe), call "
                "the blocking `sess.run(...)` from a thread (e.g. loop.run_in_executor), "
                "or use one Session per event loop."
            )
        raise RuntimeError(_IDLE_LOOP)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    # -- the step
    def _feeds_and_fetches(self, fetches, feed_dict):
        graph = self._graph
        feed_tensors, feed_values = [], []
        if feed_dict:
            pairs = []
            plain = not graph._unfeedable_tensors  # (then a Tensor of graph is its own key)
            for key, value in feed_dict.items():
                if plain and type(key) is ops.Tensor and key.graph is graph:
                    t = key  # (what _feed_tensor returns for it)
                elif isinstance(key, SparseTensor) or is_ragged(key):  # (its components)
                    split = _sparse_feed if isinstance(key, SparseTensor) else _ragged_feed
                    for part, v in split(key, value):
                        t = self._feed_tensor(part)
                        pairs.append((t, _feed_value(t, v)))
                    continue
                else:
                    t = self._feed_tensor(key)
                pairs.append((t, _feed_value(t, value)))
            if len(pairs) > 1:  # one plan for any order of the same feeds
                pairs.sort(key=lambda p: p[0].name)
            feed_tensors = [t for t, _ in pairs]
            feed_values = [v for _, v in pairs]
        # (after the feeds, as TF checks them)
        kind = type(fetches)
        if (kind is ops.Tensor or kind is ops.Operation) and _plain_fetch(graph, fetches):
            mapper = _Fetched([fetches], _first)  # (what _FetchMapper would build)
        elif (kind is list or kind is tuple) and all(_plain_fetch(graph, f) for f in fetches):
            mapper = _Fetched(list(fetches), kind)
        else:
            mapper = _FetchMapper(graph, fetches)
        return mapper, feed_tensors, feed_values

    def _feed_tensor(self, key) -> ops.Tensor:
        try:
            t = self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError, TypeError) as e:
            msg = e.args[0] if e.args else str(e)
            raise TypeError(f"Cannot interpret feed_dict key as Tensor: {msg}") from None
        if not self._graph.is_feedable(t):
            raise ValueError(f"Tensor {t.name} may not be fed.")
        return t

    async def arun(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run one step on the running loop; same arguments and results as `run`.

        Raises: the OpError subclass of the failing op; errors.CancelledError when the
        session is closed meanwhile; DeadlineExceededError after options.timeout_in_ms.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        bound = self._loop if self._loop is loop else self._arun_loop(loop)
        deadline = _DEADLINES.get(loop)  # (loop_slices.slice_spent, inlined)
        if deadline is not None and _clock() > deadline:
            if STEPPED_IN.get() == _SLICE_OF.get(loop):
                await _YIELD_TO_LOOP  # this task had its turn in this slice: let others in
            else:  # its first step in this slice: a little more time, then yield
                _DEADLINES[loop] = _clock() + loop_slices.SLICE_S * GRACE_FRACTION
        if bound is not loop:  # the runtime loop of synchronous callers
            ensure_loop_running(bound)  # it may have had no thread yet
            cf = asyncio.run_coroutine_threadsafe(
                self._arun_bound(fetches, feed_dict, options, run_metadata), bound
            )
            return await asyncio.wrap_future(cf)
        result = await self._arun_bound(fetches, feed_dict, options, run_metadata)
        STEPPED_IN.set(_SLICE_OF.get(loop, 0))
        return result

    async def _arun_bound(self, fetches, feed_dict, options, run_metadata=None):
        mapper, feed_tensors, feed_values = self._feeds_and_fetches(fetches, feed_dict)
        plan = self._master.plan(
            feed_tensors, mapper.elements, traced(options), debug_watches(options)
        )
        master = self._master
        if QUIET_STEP.get():
            values = await master.run_step(plan, feed_values, options, run_metadata)
        else:  # quiet_step, inlined (this coroutine runs in one Task: see quiet_step)
            errstate = np.errstate(all="ignore")
            errstate.__enter__()
            token = QUIET_STEP.set(True)
            try:
                values = await master.run_step(plan, feed_values, options, run_metadata)
            finally:
                end_quiet_step(token, errstate)
        return mapper.rebuild(_fetch_values(values, feed_values, plan.fed_fetches))

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run one step and wait for it (TF1's `Session.run`).

        Raises: the OpError subclass of the failing op (InvalidArgumentError for a
        missing feed, FailedPreconditionError for an uninitialised variable, ...);
        ValueError/TypeError for malformed fetches and feeds; RuntimeError when called
        on the bound event loop's thread (use `await sess.arun(...)` there).
        """
        self._check_open()
        self._bind_sync("run", "arun")
        # Validate fetches and feeds in the caller's thread: errors point at the caller.
        mapper, feed_tensors, feed_values = self._feeds_and_fetches(fetches, feed_dict)
        coro = self._run_prepared(mapper, feed_tensors, feed_values, options, run_metadata)
        needs_task = (
            self._master._config_timeout if options is None else timeout_s(options, self._config)
        ) is not None
        return self._wait_sync(coro, needs_task)

    def _bind_sync(self, name: str, aname: str) -> None:
        """Bind a blocking call's session to a loop it can wait on; RuntimeError on
        the bound loop's own thread (say to await `aname` there)."""
        loop, rt = self._loop, _runtime
        if loop is None or not loop.is_running() and (rt is None or rt.loop is not loop):
            # Unbound, or bound to a user's loop that closed or went idle (the runtime
            # loop, driven inline, is not "running" between steps).
            self._bind(_get_runtime().loop, -1)
            if _runtime.loop is not self._loop:
                raise RuntimeError(_IDLE_LOOP)
        # The runtime loop's own thread counts too (a kernel or callback calling run()).
        if self._loop_thread == threading.get_ident() or _running_loop() is self._loop:
            raise RuntimeError(
                f"Session.{name}() was called on the event loop thread this session is "
                f"bound to; it would block the loop. Use `await sess.{aname}(...)` instead."
            )

    def _wait_sync(self, coro, needs_task: bool):
        """Run `coro` on the bound loop for a blocked caller (after `_bind_sync`)."""
        rt = _runtime
        if rt is not None and rt.loop is self._loop:
            return rt.run(coro, needs_task)
        # Bound to a user's loop running in another thread: hand the step to it.
        loop, thread_id = self._loop, self._loop_thread
        if needs_task:
            cf = asyncio.run_coroutine_threadsafe(in_quiet_step(coro), loop)
            try:
                _watched(lambda t: bool(concurrent.futures.wait([cf], t).done), loop, thread_id)
                return cf.result()
            except KeyboardInterrupt:
                cf.cancel()
                raise
        return _SyncCall(loop, thread_id).wait(coro)

    async def _run_prepared(self, mapper, feed_tensors, feed_values, options, run_metadata=None):
        plan = self._master.plan(
            feed_tensors, mapper.elements, traced(options), debug_watches(options)
        )
        values = await self._master.run_step(plan, feed_values, options, run_metadata)
        return mapper.rebuild(_fetch_values(values, feed_values, plan.fed_fetches))

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A function running `fetches` with positional feeds for `feed_list`."""
        self._check_open()
        _FetchMapper(self._graph, fetches)  # reject bad fetches now, at the caller's line
        feed_tensors = [self._feed_tensor(k) for k in (feed_list or [])]

        def call(*args, **kwargs):
            options = kwargs.pop("options", None) if accept_options else None
            run_metadata = kwargs.pop("run_metadata", None) if accept_options else None
            if kwargs:
                raise TypeError(f"unexpected keyword arguments {list(kwargs)}")
            if len(args) != len(feed_tensors):
                raise TypeError(f"Callable takes {len(feed_tensors)} feed values, got {len(args)}")
            feed_dict = dict(zip(feed_tensors, args))
            return self.run(fetches, feed_dict, options, run_metadata)

        return call

    def make_async_callable(self, fetches, feed_list=None):
        """`make_callable`, awaitable: `await call(*feed_values)` runs `fetches` as
        `await sess.arun(fetches, dict(zip(feed_list, feed_values)))` would.

        The fetch structure and the feeds are resolved here, once; a call converts and
        checks its feed values, takes its turn on the loop as `arun` does (past the
        loop slice's deadline it yields first if its task already stepped in this
        slice), looks its plan up and runs the step: the plan of a small pure graph
        (asyncflow.straight_line: no effect but its results, one partition, no control
        flow) as one fixed sequence of its kernels, any other on the worker's
        interpreter, as `arun` does.  A call from a loop the session is
        not bound to, or on a closed session, takes `arun`'s path (binding, handing the
        step over, the error).

        Raises (at the call): TypeError for a wrong number of feed values, what `arun`
        raises otherwise.
        """
        self._check_open()
        mapper = _FetchMapper(self._graph, fetches)  # bad fetches fail here, at the caller
        feed_tensors = [self._feed_tensor(k) for k in (feed_list or [])]
        # The plan's feeds in `_feeds_and_fetches`'s order (sorted by name): `order[k]`
        # is the position in feed_list of the plan's k-th feed.
        order = sorted(range(len(feed_tensors)), key=lambda k: feed_tensors[k].name)
        plan_feeds = tuple(feed_tensors[k] for k in order)
        elements = tuple(mapper.elements)
        rebuild = mapper.rebuild
        n = len(feed_tensors)
        master = self._master
        line = [None, None]  # the plan last run, its straight-line program (or None)
        # Per plan feed: its position in the call's values, its tensor, the dtype and
        # static dims (None: any rank) of an array fed as it is.  Such an array is the
        # feed value itself, as `_feed_value` would return it (np.asarray of an array of
        # its dtype), without that function's conversions and TensorShape checks: a
        # served predict's feeds come checked and converted already.
        feeds = []
        for k in order:
            t = feed_tensors[k]
            np_dt = None if t.dtype == dtypes.string else np.dtype(t.dtype.as_numpy_dtype)
            feeds.append(
                (k, t, np_dt, None if t.shape.ndims is None else tuple(t.shape.as_list()))
            )

        async def call(*args):
            if len(args) != n:
                raise TypeError(f"Callable takes {n} feed values, got {len(args)}")
            loop = asyncio.get_running_loop()
            if self._closed or self._loop is not loop:
                return await self.arun(fetches, dict(zip(feed_tensors, args)))
            feed_values = []
            for k, t, np_dt, dims in feeds:
                v = args[k]
                if (
                    type(v) is not np.ndarray
                    or v.dtype is not np_dt
                    or not dims_fit(dims, v.shape)
                ):
                    v = _feed_value(t, v)
                feed_values.append(v)
            deadline = _DEADLINES.get(loop)
            if deadline is not None and _clock() > deadline:  # (as in arun)
                if STEPPED_IN.get() == _SLICE_OF.get(loop):
                    await _YIELD_TO_LOOP
                    self._check_open()  # (closed while it waited its turn)
                else:
                    _DEADLINES[loop] = _clock() + loop_slices.SLICE_S * GRACE_FRACTION
            plan = master.plan(plan_feeds, elements)
            if plan is not line[0]:  # (the first call, or the graph changed)
                line[:] = plan, self._straight_line(plan)
            program = line[1]
            if program is None:
                with quiet_step():
                    values = await master.run_step(plan, feed_values, None)
            else:
                master._step_counter += 1
                values = program.run_direct(feed_values)
                if values is None:
                    values = await program.run_kernels(master._step_counter, feed_values)
                    if self._closed:  # (closed while a kernel of it waited)
                        raise errors.CancelledError(None, None, "Session has been closed.")
            STEPPED_IN.set(_SLICE_OF.get(loop, 0))
            return rebuild(_fetch_values(values, feed_values, plan.fed_fetches))

        return call

    def _straight_line(self, plan):
        """The straight-line program of a MasterPlan (asyncflow.straight_line), or None
        where its steps need the worker's interpreter: another worker than this
        process's, several partitions, a step timeout to enforce, an impure graph."""
        worker = self._worker
        if type(worker) is not LocalWorker or self._master._config_timeout is not None:
            return None
        registered = worker._graphs.get(plan.handle)
        if registered is None or len(registered.plans) != 1:
            return None
        if registered.rendezvous_factory is not None:
            return None
        return program_for(registered.plans[0])

    def iterate(self, fetches, feed_dict=None, options=None):
        """`async for value in sess.iterate(fetches)`: run steps until OutOfRangeError.

        For async services consuming a queue (or any input that ends): each iteration
        awaits one step; the end of the data ends the loop cleanly.
        """
        from asyncflow.queues import aiterate

        return aiterate(self, fetches, feed_dict, options)

    # -- partial runs (TF1's experimental partial_run; see asyncflow.partial_run)
    def partial_run_setup(self, fetches, feeds=None):
        """Start a step of `fetches` whose `feeds` arrive over several `partial_run`
        calls (TF1's `Session.partial_run_setup`); its handle, a str.  What needs no
        feed runs at once.

        Raises: InvalidArgumentError for a tensor both fed and fetched; what `run`
        raises for malformed fetches and feeds; UnimplementedError on a remote target.
        """
        self._check_open()
        self._bind_sync("partial_run_setup", "apartial_run_setup")
        elements, feed_tensors = self._partial_setup_args(fetches, feeds)
        return self._wait_sync(self._partial_setup(elements, feed_tensors), False)

    async def apartial_run_setup(self, fetches, feeds=None):
        """`partial_run_setup` on the running loop."""
        self._check_open()
        elements, feed_tensors = self._partial_setup_args(fetches, feeds)
        return await self._on_loop(self._partial_setup, elements, feed_tensors)

    def partial_run(self, handle, fetches, feed_dict=None):
        """Feed `feed_dict` to the partial run `handle` and return `fetches` (TF1's
        `Session.partial_run`), in the structure `run` returns.  Operations are set up
        as fetches of `partial_run_setup`, and run in the step as their inputs arrive.

        Raises: InvalidArgumentError with TF's words for a feed or fetch not set up,
        fed or fetched before, or needing a feed not fed yet (the call then feeds and
        fetches nothing), and for a finished, failed or unknown handle; RuntimeError
        for an Operation among `fetches`, as TF; the failing op's error when the step
        fails (the handle is then dropped).
        """
        self._check_open()
        self._bind_sync("partial_run", "apartial_run")
        mapper, feed_tensors, feed_values = self._feeds_and_fetches(fetches, feed_dict)
        coro = self._partial_run(handle, mapper, feed_tensors, feed_values)
        return self._wait_sync(coro, self._master._config_timeout is not None)

    async def apartial_run(self, handle, fetches, feed_dict=None):
        """`partial_run` on the running loop."""
        self._check_open()
        mapper, feed_tensors, feed_values = self._feeds_and_fetches(fetches, feed_dict)
        return await self._on_loop(self._partial_run, handle, mapper, feed_tensors, feed_values)

    async def _on_loop(self, fn, *args):
        """`await fn(*args)` on the loop the session is bound to (binding it as `arun`)."""
        loop = asyncio.get_running_loop()
        bound = self._loop if self._loop is loop else self._arun_loop(loop)
        if bound is not loop:
            ensure_loop_running(bound)
            cf = asyncio.run_coroutine_threadsafe(fn(*args), bound)
            return await asyncio.wrap_future(cf)
        return await fn(*args)

    def _partial_setup_args(self, fetches, feeds):
        elements = list(dict.fromkeys(_FetchMapper(self._graph, fetches).elements))
        if feeds is None:
            feeds = []
        elif not isinstance(feeds, (list, tuple)):
            feeds = [feeds]
        feed_tensors = list(dict.fromkeys(self._feed_tensor(k) for k in feeds))
        fed = set(feed_tensors)
        for e in elements:
            if e in fed:
                raise errors.InvalidArgumentError(None, None, f"{e.name} is both fed and fetched.")
        return elements, feed_tensors

    async def _partial_setup(self, elements, feed_tensors) -> str:
        master = self._master
        plan = master.partial_plan(feed_tensors, elements)
        rv, step_id, run = master.start_partial(plan)
        # Parked: a synchronous session's loop need not move to a thread while the
        # step waits for feeds; the partial runs drive it (kernel_api.parked_task).
        # Started here: what needs no feed runs now, as in TF, without a turn of the loop.
        task = start_parked(in_quiet_step(run), _continue)
        task.add_done_callback(lambda t: _partial_step_ended(t, rv))
        handle = (
            f"{','.join(t.name for t in feed_tensors)}->"
            f"{','.join(e.name for e in elements)}//{step_id}"
        )
        self._partial_runs[handle] = PartialRun(
            feed_tensors, elements, plan.client_keys, rv, task, step_id
        )
        return handle

    async def _partial_run(self, handle, mapper, feed_tensors, feed_values):
        targets = [e for e in mapper.elements if isinstance(e, ops.Operation)]
        if targets:  # (TF's partial runs take no targets: only setup's run in the step)
            raise RuntimeError(
                "partial_run() requires empty `target_list`. Received: "
                f"target_list={targets} (non-empty)"
            )
        run = self._partial_runs.get(handle) if isinstance(handle, str) else None
        if run is None:
            raise errors.InvalidArgumentError(None, None, NO_SETUP)
        elements = mapper.elements
        run.check(feed_tensors, elements)
        try:
            deadline_s = self._master._config_timeout
            values = await run.run(feed_tensors, feed_values, elements, deadline_s)
        except BaseException as exc:
            del self._partial_runs[handle]
            self._worker.abort_step(run.step_id, _as_op_error(exc))
            raise
        if run.done():
            del self._partial_runs[handle]
        fed = {t: i for i, t in enumerate(feed_tensors)}
        fed_fetches = tuple((k, fed[e]) for k, e in enumerate(elements) if e in fed)
        return mapper.rebuild(_fetch_values(values, feed_values, fed_fetches))

    # -- lifecycle
    def close(self) -> None:
        """Close the session; in-flight steps fail with errors.CancelledError."""
        if self._closed:
            return
        self._closed = True
        self._partial_runs.clear()  # (their steps are cancelled with the others below)
        loop = self._loop

        def cancel_all():
            self._worker.abort_all(
                errors.CancelledError(None, None, "Step was cancelled: the session was closed.")
            )

        rt = _runtime
        if loop is not None and not loop.is_closed():
            if self._loop_thread == threading.get_ident() or _running_loop() is loop:
                cancel_all()
            elif rt is not None and rt.loop is loop:
                # Nobody may be running the runtime loop: then nothing is in flight.
                if not rt.cancel_if_idle(cancel_all):
                    loop.call_soon_threadsafe(cancel_all)
            else:
                loop.call_soon_threadsafe(cancel_all)
        for hook in self._close_hooks:
            hook()
        self._close_hooks.clear()
        self._master.close()
        self._worker.close()  # the session's own (local devices, or connections to tasks)
        if self._shares_cores:
            self._shares_cores = False
            release_cores()

    async def aclose(self) -> None:
        self.close()

    def __enter__(self):
        self._default_ctx = self.as_default()
        self._default_ctx.__enter__()
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._graph_ctx.__exit__(*exc)
        self._default_ctx.__exit__(*exc)
        self.close()

    async def __aenter__(self):
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._bind(loop, threading.get_ident())
        return self.__enter__()

    async def __aexit__(self, *exc):
        self.__exit__(*exc)

    @contextlib.contextmanager
    def as_default(self):
        _default_sessions.stack.append(self)
        try:
            yield self
        finally:
            if _default_sessions.stack and _default_sessions.stack[-1] is self:
                _default_sessions.stack.pop()

    @staticmethod
    def reset(target, containers=None, config=None) -> None:
        """TF's `Session.reset`: clear resource containers (all when `containers` is
        None): the process-wide named ones and, for target "", those of the devices of
        every live session of this process; resources in use by a step in flight stay
        alive until it ends, but nothing finds them again.

        Raises NotFoundError for a target no registered scheme serves."""
        if target:
            worker = worker_for_target(target, config or ConfigProto(), _local_worker)
            try:
                remote_reset = getattr(worker, "reset", None)
                if remote_reset is not None:  # the containers of a cluster's tasks
                    remote_reset(containers)
            finally:
                worker.close()
        resources.reset_containers(containers)
        if not target:
            for worker in list(LocalWorker.live):
                for d in worker.devices:
                    d.resource_mgr.clear(containers)

    def __del__(self):
        with contextlib.suppress(Exception):
            if not self._closed:
                self._worker.close()


def _local_worker(config) -> LocalWorker:
    """The worker of a session with target "": this process's devices, its own."""
    return LocalWorker(create_devices(config))


class Session(BaseSession):
    """TF1's `tf.Session(target='', graph=None, config=None)`."""


class InteractiveSession(BaseSession):
    """A session that installs itself as the default session on construction."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        _global_default_session.append(self)
        self._explicitly_closed = False

    def close(self) -> None:
        super().close()
        if self in _global_default_session:
            _global_default_session.remove(self)


class _DeviceAttributes:
    def __init__(self, device):
        self.name = device.name
        self.device_type = device.device_type
        self.memory_limit_bytes = device.memory_limit
        self.incarnation = device.incarnation

    def __repr__(self) -> str:
        return f"_DeviceAttributes({self.name}, {self.device_type}, {self.memory_limit_bytes})"


class _SyncCall:
    """Runs one step coroutine on the session's loop for a blocked caller thread.

    Cheaper than `run_coroutine_threadsafe` (a Task, a concurrent Future and a loop
    pass before the step starts): the loop's callback drives the coroutine directly,
    and it becomes a Task only if it suspends; the caller blocks on a plain lock.
    """

    __slots__ = ("loop", "lock", "result", "exc", "task", "thread_id")

    def __init__(self, loop, thread_id=None):
        self.loop = loop
        self.thread_id = thread_id  # the loop's thread, for a user's loop (not the runtime's)
        self.lock = threading.Lock()
        self.lock.acquire()
        self.result = self.exc = self.task = None

    def wait(self, coro):
        self.loop.call_soon_threadsafe(self._start, coro)
        try:
            if self.thread_id is None:
                self.lock.acquire()
            else:
                _watched(lambda t: self.lock.acquire(timeout=t), self.loop, self.thread_id)
        except KeyboardInterrupt:
            self.loop.call_soon_threadsafe(self._cancel)
            raise
        if self.exc is not None:
            exc, self.exc = self.exc, None
            raise exc
        return self.result

    def _start(self, coro) -> None:  # on the loop
        with quiet_step():
            try:
                fut = coro.send(None)
            except StopIteration as stop:
                self.result = stop.value
                self.lock.release()
                return
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                self.exc = exc
                self.lock.release()
                return
        self.task = self.loop.create_task(in_quiet_step(_continue(coro, fut)))
        self.task.add_done_callback(self._done)

    def _done(self, task) -> None:
        if task.cancelled():
            self.exc = errors.CancelledError(None, None, "Step was cancelled")
        elif task.exception() is not None:
            self.exc = task.exception()
        else:
            self.result = task.result()
        self.lock.release()

    def _cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


class _Continue:
    """Re-yields the future a coroutine suspended on, then keeps driving it (so a Task
    can take over a coroutine that was started outside any Task)."""

    __slots__ = ("coro", "first")

    def __init__(self, coro, first):
        self.coro, self.first = coro, first

    def __await__(self):
        coro, y = self.coro, self.first
        self.first = None
        while True:
            try:
                sent = yield y
            except BaseException as exc:  # cancellation goes into the step
                try:
                    y = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    y = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _continue(coro, first):
    return await _Continue(coro, first)


def _sparse_feed(key, value) -> list:
    """A SparseTensor's feed as its components' (TF: a SparseTensorValue, or a tuple of
    indices, values and, optionally, dense_shape)."""
    if not isinstance(value, tuple | list) or len(value) not in (2, 3):
        raise TypeError(
            f"Cannot feed {value!r} to SparseTensor {key}: feed a tf.SparseTensorValue or an "
            "(indices, values, dense_shape) tuple."
        )
    return list(zip((key.indices, key.values, key.dense_shape), value))


def _ragged_feed(key, value) -> list:
    """A RaggedTensor's feed as its components' (TF: a RaggedTensorValue of as many
    ragged dimensions): the flat values and each level's row splits."""
    if not is_ragged(value) or value.ragged_rank != key.ragged_rank:
        raise TypeError(
            f"Cannot feed {value!r} to RaggedTensor {key}: feed a tf.ragged.RaggedTensorValue "
            f"with ragged_rank {key.ragged_rank}."
        )
    parts = [(key.flat_values, value.flat_values)]
    return parts + list(zip(key.nested_row_splits, value.nested_row_splits))


def _partial_step_ended(task: asyncio.Task, rendezvous) -> None:
    """A partial run's step ended: a failure reaches every partial run waiting on it
    (a step of one partition does not abort its rendezvous itself)."""
    if task.cancelled():
        rendezvous.abort(errors.CancelledError(None, None, "Step was cancelled"))
    elif task.exception() is not None:
        rendezvous.abort(task.exception())


def _as_op_error(exc: BaseException) -> BaseException:
    if isinstance(exc, errors.OpError):
        return exc
    return errors.CancelledError(None, None, "The partial run was cancelled")


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _shape_accepts(static, shape: tuple) -> bool:
    """Whether a value of `shape` fits the static TensorShape (fast path of
    `is_compatible_with`, which would build a TensorShape per feed; `dims_fit` over
    the shape's own Dimensions, without `as_list`'s list: this runs per feed per step)."""
    dims = static._dims
    if dims is None:
        return True
    if len(dims) != len(shape):
        return False
    for d, n in zip(dims, shape):
        d = d.value
        if d is not None and d != n:
            return False
    return True


def dims_fit(dims, shape: tuple) -> bool:
    """Whether a value of `shape` fits static dims given as a sequence (None: any
    rank; a None dim: any size).  Also the served models' feed check."""
    if dims is None:
        return True
    if len(dims) != len(shape):
        return False
    for d, n in zip(dims, shape):
        if d is not None and d != n:
            return False
    return True


def _feed_value(t: ops.Tensor, value):
    dt = t.dtype
    if type(value) is np.ndarray:  # an array of the tensor's dtype is its own value
        np_dt = value.dtype
        if (
            np_dt.type is dt.as_numpy_dtype
            and np_dt.type is not np.object_  # (strings convert)
            and np_dt.isnative
            and _shape_accepts(t._shape, value.shape)
        ):
            return value  # (as np.asarray(value, dtype=np_dt) below returns it)
    elif isinstance(value, ops.Tensor):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. Acceptable feed values include "
            "Python scalars, strings, lists, numpy ndarrays, or TensorHandles. For reference, "
            f"the tensor object was {value} which was passed to the feed with key {t}."
        )
    if dt == dtypes.string:
        arr = dtypes.convert_to_numpy(value, dt)
    else:
        np_dt = dt.as_numpy_dtype
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                conv = np.dtype(np_dt).type(value)  # TF: numpy_dtype(value) != value
            except OverflowError:  # NumPy 2 refuses out-of-range Python ints
                conv = None
            if conv is None or conv != value:
                raise TypeError(
                    f"Type of feed value {value} with type {type(value)} is not compatible "
                    f"with Tensor type {np.dtype(np_dt).type}. Try explicitly setting the type of "
                    "the feed "
                    "tensor to a larger type (e.g. int64)."
                )
        try:
            arr = np.asarray(value, dtype=np_dt)
        except OverflowError as e:  # e.g. [1, 2**40] for an int32 tensor
            raise TypeError(f"Cannot feed value {value!r} to Tensor '{t.name}': {e}") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"Cannot feed value {value!r} to Tensor '{t.name}': {e}") from None
    if not _shape_accepts(t.shape, arr.shape):
        raise ValueError(
            f"Cannot feed value of shape {arr.shape} for Tensor '{t.name}', which has shape "
            f"'{t.shape}'"
        )
    return arr
