"""Event files for TensorBoard: `FileWriter`, `FileWriterCache` (TF1's `tf.summary`).

An event file is a TFRecord file of serialized `Event` protos, the first one carrying
`file_version: "brain.Event:2"` and, as TF 2.x writes it, `source_metadata { writer:
"tensorflow.core.util.events_writer" }`; its name is
`events.out.tfevents.<10-digit seconds>.<hostname><filename_suffix>`.

Writing never blocks the caller: `add_event` serializes and frames the event where it
is called (microseconds) and appends the bytes to the writer's pending list under a
lock; a background task writes the pending bytes with async file I/O (aiofiles) when
`max_queue` events are waiting, every `flush_secs` seconds, on `flush()` and on
`close()`.  `flush`/`close` block until the bytes are written; `aflush`/`aclose` are
their async twins.

Which loop the task runs on (one task per writer, never a loop of its own per writer):
- a writer made in async code (a loop running in the calling thread) runs its task on
  that loop, the program's and its sessions' loop: no thread is added.  There, `flush`
  and `close` would wait for the loop they block, so they raise RuntimeError and say to
  await `aflush`/`aclose`, as `Session.run` does on its loop's thread;
- a writer made in synchronous code runs its task on the runtime loop of synchronous
  sessions when that loop already has its own thread (queue runners, background work);
  otherwise on one loop thread shared by all such writers.  Giving the runtime loop its
  thread for the writers' sake would hand every later synchronous step to that thread
  (measured: +0.15 ms a step, 6% of the MLP step of benchmarks/summary_bench.py, more
  than the summaries themselves cost), so the writers do not ask for it.
If the task's loop is gone (an `asyncio.run` that returned), the pending bytes are
appended directly by whoever flushes or closes: no loop is left for them to block.

Events still pending when the interpreter exits are appended by an atexit hook.

Invariants: records reach the file in the order `add_event` was called (one writer
task per file, pending bytes taken whole under the lock); after `close()` returns,
every event added before it is on disk and the file is closed.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import socket
import threading
import time
import weakref

import aiofiles

from asyncflow import graph as ops
from asyncflow.ops import summary_writer_ops
from asyncflow.ops.summary_ops import made_here, summary_event_bytes
from asyncflow.protos.event_pb2 import Event, SessionLog, TaggedRunMetadata
from asyncflow.protos.summary_pb2 import Summary
from asyncflow.python_io import _frame

__all__ = ["EventFileWriter", "FileWriter", "FileWriterCache"]


# -- the writers' loop ----------------------------------------------------------------------

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_open_writers: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _write_pending_at_exit() -> None:
    # The writers' thread is a daemon: events still pending at exit would be lost.  The
    # thread pool async file I/O uses is already shut down by now, so the bytes are
    # appended here, synchronously (the writer task, parked, writes nothing more).
    for writer in list(_open_writers):
        writer._write_pending_now()


def _writer_loop() -> asyncio.AbstractEventLoop:
    """The loop for a writer made in synchronous code (see the module note)."""
    global _loop
    from asyncflow import session  # (client layer; imported late, as graph_io is)

    runtime = session._runtime  # noqa: SLF001 - a look, never a request for its thread
    if runtime is not None and runtime.thread is not None and not runtime.loop.is_closed():
        return runtime.loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="asyncflow-summary-writer", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class EventFileWriter:
    """Writes Event protos to one event file in `logdir` from a background task.

    Raises (constructor): OSError when `logdir` cannot be created.
    """

    def __init__(
        self,
        logdir,
        max_queue=10,
        flush_secs=120,
        filename_suffix=None,
        *,
        source="tensorflow.core.util.events_writer",
    ):
        self._logdir = os.fspath(logdir)
        os.makedirs(self._logdir, exist_ok=True)
        self._max_queue = max(int(max_queue), 1)
        self._flush_secs = float(flush_secs)
        self._suffix = filename_suffix or ""
        # the first event's source_metadata.writer (TF's C++ writer names itself there)
        self._source = source
        self._lock = threading.Lock()
        self._closed = True
        self._open()

    def _open(self) -> None:
        now = time.time()
        self._path = os.path.join(
            self._logdir,
            f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}{self._suffix}",
        )
        self._pending: list[bytes] = []
        self._in_flight = False
        self._error: BaseException | None = None
        self._closed = False
        first = Event(wall_time=now, file_version="brain.Event:2")
        if self._source:
            first.source_metadata.writer = self._source
        self._pending.append(_frame(first.SerializeToString()))
        running = _running_loop()
        if running is not None:  # async code: the task goes on the caller's loop
            self._loop = running
            self._start()
        else:
            self._loop = _writer_loop()
            started = concurrent.futures.Future()

            def start() -> None:
                self._start()
                started.set_result(None)

            self._loop.call_soon_threadsafe(start)
            started.result()  # the task exists (and will create the file) before we return
        _open_writers.add(self)

    def _start(self) -> None:  # on self._loop's thread
        self._wake = asyncio.Event()
        self._flushed: list[concurrent.futures.Future] = []
        self._closing = False
        self._task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        """The background task: write what is pending when woken or every flush_secs."""
        try:
            # Unbuffered: a write is on disk when it returns, so nothing is left in a
            # buffer for a direct append to overtake; appending, so that direct appends
            # (see _direct) and the task's writes land in the order they are made.
            async with aiofiles.open(self._path, "ab", buffering=0) as f:
                while True:
                    try:
                        async with asyncio.timeout(self._flush_secs):
                            await self._wake.wait()
                    except TimeoutError:
                        pass
                    self._wake.clear()
                    with self._lock:
                        batch, self._pending = self._pending, []
                        waiters, self._flushed = self._flushed, []
                        closing = self._closing
                        self._in_flight = bool(batch)
                    data = memoryview(b"".join(batch))
                    while data:  # (a raw write may take less than it is given)
                        data = data[await f.write(data) :]
                    self._in_flight = False
                    for w in waiters:
                        w.set_result(None)
                    if closing:
                        break
        except Exception as exc:  # reported to the next flush/close caller
            self._error = exc
        finally:  # ended, failed or cancelled with its loop: nobody waits for it
            self._in_flight = False
            with self._lock:
                waiters, self._flushed = self._flushed, []
            for w in waiters:
                w.set_result(None)

    def _direct(self) -> bool:
        """Whether flush/close must append the pending bytes themselves: the task's loop
        is gone or not running, or it is the caller's own (blocking for the task there
        would wait forever).

        Raises: RuntimeError when a batch of the task is still being written then (the
        direct append could overtake it).
        """
        if self._task.done() or self._loop.is_closed():
            return True
        if not self._gone() and _running_loop() is not self._loop:
            return False
        if self._in_flight:
            raise RuntimeError(
                "This FileWriter's loop is writing a batch and cannot run while its "
                "caller blocks: use `await writer.aflush()` / `await writer.aclose()` "
                "from async code."
            )
        return True

    def _append_now(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if batch:
            with open(self._path, "ab") as f:
                f.write(b"".join(batch))

    def _request(self, closing: bool) -> concurrent.futures.Future:
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._task.done() or self._loop.is_closed():
                done.set_result(None)
                return done
            self._flushed.append(done)
            self._closing = self._closing or closing
        self._loop.call_soon_threadsafe(self._wake.set)
        return done

    def _gone(self) -> bool:
        """The task will not write again: ended, or its loop closed or not running."""
        return self._task.done() or not self._loop.is_running()

    def _write_pending_now(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing = True  # should the task wake, it only ends
        self._append_now()

    def get_logdir(self) -> str:
        return self._logdir

    @property
    def path(self) -> str:
        """The event file being written."""
        return self._path

    def add_event(self, event: Event) -> None:
        """Queue `event` for the file; returns at once.  Ignored after close()."""
        self.add_event_bytes(event.SerializeToString())

    def add_event_bytes(self, serialized: bytes) -> None:
        """`add_event` of an Event already serialized."""
        record = _frame(serialized)
        with self._lock:
            if self._closed:
                return
            self._pending.append(record)
            wake = len(self._pending) >= self._max_queue
        if wake and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def _raise_error(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise err

    def flush(self) -> None:
        """Block until every event added so far is written.

        Raises: the writer's OSError; RuntimeError (see `_direct`).
        """
        if not self._closed:
            if self._direct():
                self._append_now()
            else:
                self._request(False).result()
        self._raise_error()

    async def aflush(self) -> None:
        if not self._closed:
            if self._gone():  # (a loop of an earlier asyncio.run, say)
                await asyncio.to_thread(self._append_now)
            else:
                await asyncio.wrap_future(self._request(False))
        self._raise_error()

    def close(self) -> None:
        """Write what is pending and close the file.

        Raises: the writer's OSError; RuntimeError (see `_direct`).
        """
        if self._closed:
            return
        direct = self._direct()
        with self._lock:
            self._closed = True
        if direct:
            self._append_now()
            self._request(True)  # the task, if it still runs, closes its file and ends
        else:
            self._request(True).result()
        self._raise_error()

    async def aclose(self) -> None:
        if self._closed:
            return
        gone = self._gone()
        with self._lock:
            self._closed = True
        if gone:
            await asyncio.to_thread(self._append_now)
            self._request(True)
        else:
            await asyncio.wrap_future(self._request(True))
        self._raise_error()

    def reopen(self) -> None:
        """Start a new event file after close(); no-op while open."""
        if self._closed:
            self._open()


class FileWriter:
    """TF1's `tf.summary.FileWriter`: summaries, graphs, run metadata and session logs
    as events of one event file in `logdir`.

    Raises:
      ValueError (add_run_metadata): a tag already used for run metadata.
    """

    def __init__(
        self,
        logdir,
        graph=None,
        max_queue=10,
        flush_secs=120,
        graph_def=None,
        filename_suffix=None,
        session=None,
    ):
        self.event_writer = EventFileWriter(logdir, max_queue, flush_secs, filename_suffix)
        self._seen_summary_tags: set[str] = set()
        self._session_run_tags: set[str] = set()
        if graph is not None or graph_def is not None:
            self.add_graph(graph=graph, graph_def=graph_def)
            from asyncflow import meta_graph

            # As TF1: the meta graph of the graph too (collections from the graph, or
            # from the default graph when only a GraphDef is given).
            if isinstance(graph, ops.Graph):
                meta = meta_graph.export_meta_graph(graph=graph)
            else:
                meta = meta_graph.export_meta_graph(graph_def=graph_def or graph)
            self.add_meta_graph(meta)

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get_logdir(self) -> str:
        return self.event_writer.get_logdir()

    def add_event(self, event: Event) -> None:
        self.event_writer.add_event(event)

    def _add_event(self, event: Event, step) -> None:
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None) -> None:
        """Add a Summary (message or serialized bytes, as a summary op returns).

        A tag's metadata is written with its first value only, as TF1 does.
        """
        raw = summary
        if not isinstance(raw, (bytes, Summary)) and hasattr(raw, "item"):
            raw = raw.item()  # a 0-d object array from session.run
        known = made_here(raw) if isinstance(raw, bytes) else None
        if known is not None and not known[1]:
            # A summary op's own bytes without metadata: the Event is written around
            # them (wall_time 1, step 2, summary 5 in number order, as upb writes it),
            # without parsing and serializing them again.
            step = 0 if global_step is None else int(global_step)
            self.event_writer.add_event_bytes(summary_event_bytes(raw, time.time(), step))
            return
        if isinstance(summary, (bytes, bytearray, memoryview)):
            summ = Summary()
            summ.ParseFromString(bytes(summary))
            summary = summ
        elif not isinstance(summary, Summary):  # a 0-d object array from session.run
            summ = Summary()
            summ.ParseFromString(bytes(summary.item() if hasattr(summary, "item") else summary))
            summary = summ
        for value in summary.value:
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                value.ClearField("metadata")
            else:
                self._seen_summary_tags.add(value.tag)
        self._add_event(Event(summary=summary), global_step)

    def add_scalar(self, tag, value, global_step=None) -> None:
        """One scalar value (asyncflow's shortcut for hooks: no summary op needed)."""
        summary = Summary()
        summary.value.add(tag=tag, simple_value=float(value))
        self._add_event(Event(summary=summary), global_step)

    def add_graph(self, graph=None, global_step=None, graph_def=None) -> None:
        """Add the graph (or a GraphDef) for TensorBoard's graph tab.

        Raises: TypeError when neither is given.
        """
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
        if isinstance(graph, ops.Graph):
            true_graph_def = graph.as_graph_def(add_shapes=True)
        elif graph is not None or graph_def is not None:
            from asyncflow.graph_io import as_graph_def_message

            true_graph_def = as_graph_def_message(graph if graph is not None else graph_def)
        else:
            raise TypeError("graph must be a tf.Graph")
        self._add_event(Event(graph_def=true_graph_def.SerializeToString()), global_step)

    def add_meta_graph(self, meta_graph_def, global_step=None) -> None:
        if not hasattr(meta_graph_def, "SerializeToString"):
            raise TypeError(
                f"meta_graph_def must be type MetaGraphDef, saw type: {type(meta_graph_def)}"
            )
        self._add_event(Event(meta_graph_def=meta_graph_def.SerializeToString()), global_step)

    def add_run_metadata(self, run_metadata, tag, global_step=None) -> None:
        """Add a step's RunMetadata (TensorBoard's per-step compute-time view)."""
        if tag in self._session_run_tags:
            raise ValueError("The provided tag was already used for this event type")
        self._session_run_tags.add(tag)
        tagged = TaggedRunMetadata(tag=tag, run_metadata=_serialize_run_metadata(run_metadata))
        self._add_event(Event(tagged_run_metadata=tagged), global_step)

    def add_session_log(self, session_log: SessionLog, global_step=None) -> None:
        self._add_event(Event(session_log=session_log), global_step)

    def flush(self) -> None:
        self.event_writer.flush()

    async def aflush(self) -> None:
        await self.event_writer.aflush()

    def close(self) -> None:
        self.event_writer.close()

    async def aclose(self) -> None:
        await self.event_writer.aclose()

    def reopen(self) -> None:
        self.event_writer.reopen()


# The graph's summary-writer ops (CreateSummaryFileWriter ...) write through this class.
summary_writer_ops.use_event_file_writer(EventFileWriter)


def _serialize_run_metadata(run_metadata) -> bytes:
    if hasattr(run_metadata, "SerializeToString"):
        return run_metadata.SerializeToString()
    from asyncflow.protos import RunMetadata

    out = RunMetadata()  # asyncflow's RunMetadata object: its step_stats proto
    stats = getattr(run_metadata, "step_stats", None)
    if hasattr(stats, "SerializeToString"):
        out.step_stats.CopyFrom(stats)
    return out.SerializeToString()


class FileWriterCache:
    """One FileWriter per logdir, shared (TF1's `tf.summary.FileWriterCache`)."""

    _cache: dict[str, FileWriter] = {}
    _lock = threading.Lock()

    @staticmethod
    def get(logdir) -> FileWriter:
        """The cached FileWriter for `logdir`, made with the default graph if new."""
        with FileWriterCache._lock:
            writer = FileWriterCache._cache.get(logdir)
            if writer is None:
                writer = FileWriter(logdir, graph=ops.get_default_graph())
                FileWriterCache._cache[logdir] = writer
            return writer

    @staticmethod
    def clear() -> None:
        """Close and forget every cached writer."""
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache = {}
