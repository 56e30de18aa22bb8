"""Shared fixtures.

ASYNCFLOW_CHECK_KERNELS must be set before asyncflow is imported: the executor reads it
once, and then checks every kernel's outputs (dtype, shape) against the graph.

ASYNCFLOW_BLAS=openblas: the suite's products are NumPy's OpenBLAS's on every path, with
or without the `mkl` extra installed (many tests compare a kernel's bits with a NumPy
product's); tests/test_blas_mkl.py covers MKL's calls for one thread.
"""

import os

os.environ["ASYNCFLOW_CHECK_KERNELS"] = "1"
os.environ.setdefault("ASYNCFLOW_BLAS", "openblas")

import _testing_ops  # noqa: E402  (registers the test-only ops)
import pytest  # noqa: E402

import asyncflow as af  # noqa: E402


@pytest.fixture
def graph():
    """A fresh graph, installed as the default graph for the test."""
    g = af.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def sess(graph):
    """A synchronous Session on `graph` (bound to the runtime loop at its first run)."""
    s = af.Session(graph=graph)
    yield s
    s.close()


class _Probes:
    def __init__(self):
        self.waiters: list[_testing_ops.Waiter] = []
        self.counters: list[_testing_ops.Counter] = []

    def waiter(self, name: str = "w") -> _testing_ops.Waiter:
        w = _testing_ops.new_waiter(name)
        self.waiters.append(w)
        return w

    def counter(self, name: str = "c") -> _testing_ops.Counter:
        c = _testing_ops.new_counter(name)
        self.counters.append(c)
        return c

    def close(self) -> None:
        for w in self.waiters:
            w.release()  # a failed test must not leave a step hanging
            _testing_ops.WAITERS.pop(w.key, None)
        for c in self.counters:
            _testing_ops.COUNTERS.pop(c.key, None)


@pytest.fixture
def probes():
    """Factory for TestWaitOp waiters and TestCountOp counters; all released at teardown."""
    p = _Probes()
    yield p
    p.close()


@pytest.fixture
def keras_session():
    """A fresh graph and Session, installed as Keras' session for the test."""
    with af.Graph().as_default(), af.Session() as s:
        af.keras.backend.set_session(s)
        yield s


@pytest.fixture
def keras_v2_behavior(monkeypatch):
    """TF 2 behaviour on for the test (as the Keras recorders run TF: a model saved to
    a directory is a SavedModel), restored after it."""
    from asyncflow import compat

    monkeypatch.setattr(compat, "_V2_BEHAVIOR", [True])
