"""devices.cpu.favour_loop_thread: the thread of a loop that `arun` steps on asks the OS
for a short scheduler slice, once, keeping its policy and nice value."""

from __future__ import annotations

import asyncio
import ctypes
import os
import platform
import sys
import threading

import pytest

import asyncflow as af
from asyncflow.devices import cpu

_LINUX = sys.platform == "linux" and platform.machine() in cpu._SCHED_SYSCALLS


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = os.uname().release.split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _attr() -> cpu._SchedAttr:
    attr = cpu._SchedAttr()
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    size = ctypes.sizeof(cpu._SchedAttr)
    assert syscall(cpu._SCHED_SYSCALLS[platform.machine()][1], 0, ctypes.byref(attr), size, 0) == 0
    return attr


def _in_thread(fn):
    """fn() on a new thread (the test's own thread keeps its scheduling); its result."""
    out = {}

    def main():
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised below
            out["error"] = exc

    t = threading.Thread(target=main)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("ASYNCFLOW_LOOP_SLICE_US", raising=False)
    return monkeypatch


@pytest.mark.skipif(not _LINUX, reason="sched_setattr is Linux's (x86_64, aarch64 here)")
def test_a_thread_asks_once_and_keeps_its_policy_and_nice(env):
    def body():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 2)
        before = _attr()
        first, second = cpu.favour_loop_thread(), cpu.favour_loop_thread()
        return before, _attr(), first, second

    before, after, first, second = _in_thread(body)
    assert first is True and second is False  # once per thread
    assert (after.sched_policy, after.sched_nice) == (before.sched_policy, 2)
    if _kernel_at_least(6, 12):  # custom slices: the kernel reports the one asked for
        assert after.sched_runtime == int(cpu.LOOP_SLICE_S * 1e9)


@pytest.mark.skipif(not _LINUX, reason="sched_setattr is Linux's (x86_64, aarch64 here)")
def test_the_environment_opts_out_or_chooses(env):
    env.setenv("ASYNCFLOW_LOOP_SLICE_US", "0")
    before, asked, after = _in_thread(lambda: (_attr(), cpu.favour_loop_thread(), _attr()))
    assert asked is False
    assert after.sched_runtime == before.sched_runtime
    env.setenv("ASYNCFLOW_LOOP_SLICE_US", "250")
    asked, after = _in_thread(lambda: (cpu.favour_loop_thread(), _attr()))
    assert asked is True
    if _kernel_at_least(6, 12):
        assert after.sched_runtime == 250_000


def test_a_session_stepping_on_a_loop_favours_its_thread(env):
    graph = af.Graph()
    with graph.as_default():
        y = af.constant(2.0) * 3.0

    async def steps():
        async with af.Session(graph=graph) as sess:
            assert await sess.arun(y) == 6.0

    def body():
        asyncio.run(steps())
        return cpu._favoured.asked

    assert _in_thread(body) is True
