"""A process forked while numba loops compile (ops/jit_fork.py): the child neither waits
for the lost compile nor starts one (numba's compiler lock may be held for good there),
and gets the NumPy path's results; a child forked between compiles compiles."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from asyncflow.ops import fused_elementwise_jit, fused_updates, jit_fork, jit_loops

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork"),
    pytest.mark.skipif(fused_updates.numba_module() is None, reason="numba is not installed"),
]


def _in_child(check) -> None:
    """Run check() in a forked child; fail here with its message if it failed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running the parent's cleanup
        os.close(r)
        try:
            check()
            msg = b"ok"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            msg = repr(exc).encode()[:4000] or b"error"
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 4096):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert b"".join(chunks) == b"ok"


def test_child_forked_mid_compile_neither_waits_nor_compiles():
    entered, release = threading.Event(), threading.Event()

    def build(numba):
        entered.set()
        assert release.wait(30)
        return {"loop": numba.njit(lambda x: x + 1)}

    loops = jit_loops.BackgroundLoops("a test loop", build)
    assert loops.get("loop") is None  # starts the compile
    assert entered.wait(30)

    def child():
        assert not jit_fork.may_start()
        t0 = time.monotonic()
        assert loops.warm(timeout=20) is False  # the lost compile: no wait
        other = jit_loops.BackgroundLoops("another", lambda numba: {"x": None})
        assert other.warm(timeout=20) is False  # nor a new compile
        assert time.monotonic() - t0 < 5
        # A fused program asked for here stays NumPy's, without a compiling thread.
        assert (
            fused_elementwise_jit._loop_for(
                "def loop(a, out):\n    pass\n", np.dtype("f4"), (1, 1, 0)
            )
            is None
        )
        assert not fused_elementwise_jit._compiler

    try:
        _in_child(child)
    finally:
        release.set()
    assert loops.warm(timeout=30)  # the parent's compile ends as usual
    assert jit_fork.may_start()


def test_child_forked_between_compiles_compiles():
    assert jit_fork.may_start()
    loops = jit_loops.BackgroundLoops("a test loop", lambda numba: {"one": numba.njit(lambda: 1)})
    assert loops.warm(timeout=60)

    def child():
        assert jit_fork.may_start()
        assert loops.get("one")() == 1  # compiled before the fork: runs here
        later = jit_loops.BackgroundLoops("later", lambda numba: {"two": numba.njit(lambda: 2)})
        assert later.warm(timeout=60) and later.get("two")() == 2

    _in_child(child)


def test_hooks_release_waiters_of_lost_compiles():
    # The after-fork hooks on their own (as the child runs them): a compile left pending
    # by a thread the child lacks is marked NumPy's and its waiters released.
    key = ("def loop(a, out):\n    pass\n", np.dtype("f8"), False)
    done = threading.Event()
    saved = dict(fused_elementwise_jit._pending), fused_elementwise_jit._loops.get(key, "absent")
    fused_elementwise_jit._pending[key] = done
    try:
        fused_elementwise_jit._in_child(True)
        assert done.is_set() and key not in fused_elementwise_jit._pending
        assert fused_elementwise_jit._loops[key] is None
    finally:
        fused_elementwise_jit._pending.update(saved[0])
        if saved[1] == "absent":
            fused_elementwise_jit._loops.pop(key, None)


def test_compiling_marks_nested_compiles_until_the_outermost_ends():
    with jit_fork.compiling():
        with jit_fork.compiling():
            pass
        assert threading.get_ident() in jit_fork._compiling  # (still inside the outer)
    assert threading.get_ident() not in jit_fork._compiling
