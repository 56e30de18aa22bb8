"""Compiled loops built on a background thread, used once they are ready.

A kernel never waits for numba: the first kernel that asks for a set of loops starts
their import and compile on a thread of its own (numba's import ~0.3 s, a compile ~1 s,
a cached one ~0.2 s) and runs its NumPy path meanwhile, which gives the same results.
`warm()` compiles and waits (tests, benchmarks, programs that want their first steps
compiled).  Without numba, or with ASYNCFLOW_NO_NUMBA=1, the loops never become ready.

A child process forked while the loops compile: see ops/jit_fork.py.
"""

from __future__ import annotations

import threading
import weakref

from asyncflow import tf_logging
from asyncflow.ops import fused_updates
from asyncflow.ops.jit_fork import at_fork_in_child, compiling, may_start

__all__ = ["BackgroundLoops"]

_instances: weakref.WeakSet = weakref.WeakSet()


class BackgroundLoops:
    """`build(numba)` -> {name: compiled function}, run once on a background thread
    (it also makes the calls that compile each signature it needs)."""

    def __init__(self, what: str, build):
        self._what = what
        self._build = build
        self._loops: dict[str, object] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        _instances.add(self)

    def _compile(self) -> None:
        try:
            with compiling():
                numba = fused_updates.import_numba()
                if numba is not None:
                    self._loops = dict(self._build(numba))
        except Exception as exc:  # a loop that cannot compile leaves NumPy's path in place
            tf_logging.warning("asyncflow: compiling %s with numba failed: %r", self._what, exc)
        finally:
            self._done.set()

    def get(self, name: str):
        """The compiled loop `name`, or None while not ready (the first call starts the
        compile)."""
        loops = self._loops
        if loops:
            return loops.get(name)
        if not self._started and not fused_updates._DISABLED and may_start():
            with self._lock:
                if not self._started:
                    self._started = True
                    threading.Thread(
                        target=self._compile, name="asyncflow-numba", daemon=True
                    ).start()
        return None

    def loops(self) -> dict:
        """{name: compiled loop}: every loop once they are ready, else empty."""
        return self._loops

    def warm(self, timeout: float | None = 120.0) -> bool:
        """Compile now and wait; whether the loops are ready."""
        if fused_updates._DISABLED:
            return False
        self.get("")
        if self._started:  # (not in a child forked mid-compile: see ops/jit_fork.py)
            self._done.wait(timeout)
        return bool(self._loops)


def _instances_in_child(mid_compile: bool) -> None:
    for loops in list(_instances):
        loops._lock = threading.Lock()
        if loops._started and not loops._done.is_set():
            loops._done.set()  # (its compile ended with the parent's thread: never here)


at_fork_in_child(_instances_in_child)
