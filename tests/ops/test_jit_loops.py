"""ops/jit_loops.BackgroundLoops: loops compiled once on a background thread, None until
then, and a build that fails leaves them None (the NumPy paths run) with a warning."""

from __future__ import annotations

import threading

import pytest

from asyncflow.ops import fused_updates, jit_loops

pytestmark = pytest.mark.skipif(
    fused_updates.numba_module() is None, reason="numba is not installed (the NumPy path runs)"
)


def test_built_once_on_another_thread_and_none_until_then():
    release, calls = threading.Event(), []

    def build(numba):
        calls.append(threading.current_thread().name)
        release.wait(30)
        return {"double": numba.njit(lambda x: 2 * x)}

    loops = jit_loops.BackgroundLoops("a test loop", build)
    assert loops.get("double") is None  # starts the build, does not wait for it
    assert loops.get("double") is None
    release.set()
    assert loops.warm(30)
    assert loops.get("double")(21) == 42
    assert calls == ["asyncflow-numba"]  # built once, on its own thread
    assert loops.get("missing") is None


def test_a_build_that_fails_leaves_the_numpy_path(caplog):
    def build(numba):
        raise RuntimeError("no compiler here")

    loops = jit_loops.BackgroundLoops("a broken loop", build)
    assert not loops.warm(30)
    assert loops.get("anything") is None
    assert "a broken loop" in caplog.text and "no compiler here" in caplog.text


def test_a_build_under_way_when_the_switch_turns_off_still_builds(monkeypatch):
    """The build thread imports numba whatever the switch says once it started (the
    request paths read the switch): switched off meanwhile, the loops still end built."""

    def build(numba):
        return {"double": numba.njit(lambda x: 2 * x)}

    loops = jit_loops.BackgroundLoops("a switched loop", build)
    monkeypatch.setattr(fused_updates, "_DISABLED", True)
    loops._compile()  # (the build thread's body, here, with the loops switched off)
    monkeypatch.setattr(fused_updates, "_DISABLED", False)
    assert loops.get("double")(21) == 42
