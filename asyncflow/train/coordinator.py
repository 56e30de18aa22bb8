"""`af.train.Coordinator`: stop a set of threads (or runner tasks) together (TF1's).

Threads and queue-runner tasks call `should_stop()` in their loop and `request_stop(e)`
when they fail; the main program calls `join()`, which waits for them and re-raises
the first exception reported (clean-stop exceptions, OutOfRangeError by default, are
not reported).  It is thread-safe: queue runners are tasks on the session's loop and
the program that joins them may be a plain thread, or another task (`await ajoin()`).

Invariants: the first reported exception wins; `_stop_event` only goes from clear to set
outside `clear_stop()`; waiters registered by `await_for_stop` are woken on their
own loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time

from asyncflow import errors

__all__ = ["Coordinator"]

logger = logging.getLogger("asyncflow")


class Coordinator:
    """TF1's `tf.train.Coordinator(clean_stop_exception_types=None)`."""

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._changed = threading.Condition(self._lock)  # a thread ended or stop requested
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set = set()
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    def _filter_exception(self, ex):
        ex2 = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(ex2, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex=None) -> None:
        """Ask every thread to stop; `ex` (an exception or exc_info triple) is reported
        by `join()` unless it is a clean-stop type or an earlier one was reported.

        Raises: `ex` itself when the coordinator was already joined (nobody would see it).
        """
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined and ex is not None:
                raise ex[1] if isinstance(ex, tuple) else ex
            if not self._stop_event.is_set():
                if ex is not None and self._exc_info_to_raise is None:
                    if isinstance(ex, tuple):
                        info = ex
                    else:
                        info = (type(ex), ex, ex.__traceback__)
                    if len(info) != 3 or not info[0] or not info[1]:
                        try:
                            raise ValueError(
                                "ex must be a tuple or sys.exc_info must return the current "
                                f"exception: {info}"
                            )
                        except ValueError:
                            info = sys.exc_info()
                    logger.info("Error reported to Coordinator: %r", info[1])
                    self._exc_info_to_raise = info
                self._stop_event.set()
                self._changed.notify_all()
                waiters, self._async_waiters = self._async_waiters, []
                for loop, fut in waiters:
                    with contextlib.suppress(RuntimeError):  # loop closed meanwhile
                        loop.call_soon_threadsafe(_resolve, fut)

    def clear_stop(self) -> None:
        """Clear the stop request and the reported exception (reuse after join)."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """`with coord.stop_on_exception(): ...` reports any exception and stops."""
        try:
            yield
        except:  # noqa: E722 - TF reports everything, including KeyboardInterrupt
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Block this thread until stop is requested (or timeout); True if requested."""
        return self._stop_event.wait(timeout)

    async def await_for_stop(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 - TF signature twin
        """The async twin of `wait_for_stop`: suspends, never blocks the loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._stop_event.is_set():
                return True
            fut = loop.create_future()
            self._async_waiters.append((loop, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                with contextlib.suppress(ValueError):
                    self._async_waiters.remove((loop, fut))

    def register_thread(self, thread) -> None:
        """Have `join()` wait for `thread` (a threading.Thread or a runner task handle)."""
        with self._lock:
            self._registered_threads.add(thread)
        add_cb = getattr(thread, "add_done_callback", None)
        if add_cb is not None:
            add_cb(self._notify)

    def _notify(self, *_):
        with self._lock:
            self._changed.notify_all()

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Wait until the threads end, or stop is requested and the grace period passed.

        Raises: the first exception passed to `request_stop`; RuntimeError when threads
        are still running after the grace period (unless ignore_live_threads).
        """
        with self._lock:
            threads = list(self._registered_threads.union(set(threads or ())))
        for t in threads:
            if getattr(t, "_loop_thread_id", None) == threading.get_ident():
                raise RuntimeError(
                    "Coordinator.join() was called on the event loop that runs the queue "
                    "runners; it would block them. Use `await coord.ajoin(...)`."
                )
        self._join(threads, stop_grace_period_secs, ignore_live_threads)

    def _join(self, threads, stop_grace_period_secs, ignore_live_threads):
        # Our runner handles notify `_changed`; plain threads are polled.
        poll = 0.05 if any(not hasattr(t, "add_done_callback") for t in threads) else None
        with self._lock:
            while any(t.is_alive() for t in threads) and not self._stop_event.is_set():
                self._changed.wait(poll)
            deadline = time.monotonic() + stop_grace_period_secs
            while any(t.is_alive() for t in threads):
                left = deadline - time.monotonic()
                if left < 0:
                    break
                self._changed.wait(left if poll is None else min(left, poll))
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise:
                raise self._exc_info_to_raise[1]
            if stragglers:
                if ignore_live_threads:
                    logger.info(
                        "Coordinator stopped with threads still running: %s", " ".join(stragglers)
                    )
                else:
                    raise RuntimeError(
                        "Coordinator stopped with threads still running: " + " ".join(stragglers)
                    )

    async def ajoin(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """The async twin of `join` (usable on the loop that runs the runners)."""
        with self._lock:
            threads = list(self._registered_threads.union(set(threads or ())))
        # The wait runs in a worker thread, so the loop (and its runner tasks) stays free.
        await asyncio.to_thread(self._join, threads, stop_grace_period_secs, ignore_live_threads)

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the exception reported to `request_stop`, if any."""
        with self._lock:
            if self._exc_info_to_raise:
                raise self._exc_info_to_raise[1]


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
