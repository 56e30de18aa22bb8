"""devices.cpu.share_the_gil: the loop waits at most GIL_SWITCH_S for our threads' GIL."""

from __future__ import annotations

import sys

import pytest

import asyncflow as af
from asyncflow.devices import cpu


@pytest.fixture
def fresh(monkeypatch):
    before = sys.getswitchinterval()
    monkeypatch.setattr(cpu, "_gil_shared", None)
    monkeypatch.delenv("ASYNCFLOW_GIL_SWITCH_INTERVAL", raising=False)
    yield
    sys.setswitchinterval(before)


def test_default_interval_is_lowered_once(fresh):
    sys.setswitchinterval(0.005)  # CPython's default
    assert cpu.share_the_gil() is True
    assert sys.getswitchinterval() == pytest.approx(cpu.GIL_SWITCH_S)
    sys.setswitchinterval(0.005)
    assert cpu.share_the_gil() is True  # once per process: not set again
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_an_interval_the_program_chose_stays(fresh):
    sys.setswitchinterval(0.002)
    assert cpu.share_the_gil() is False
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_environment_opts_out_or_chooses(fresh, monkeypatch):
    sys.setswitchinterval(0.005)
    monkeypatch.setenv("ASYNCFLOW_GIL_SWITCH_INTERVAL", "0")
    assert cpu.share_the_gil() is False
    assert sys.getswitchinterval() == pytest.approx(0.005)
    monkeypatch.setattr(cpu, "_gil_shared", None)
    monkeypatch.setenv("ASYNCFLOW_GIL_SWITCH_INTERVAL", "0.001")
    assert cpu.share_the_gil() is True
    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_a_session_lowers_the_default(fresh):
    sys.setswitchinterval(0.005)
    with af.Session(graph=af.Graph()) as sess:
        assert sess.run([]) == []  # (its devices exist once it runs)
    assert sys.getswitchinterval() == pytest.approx(cpu.GIL_SWITCH_S)
