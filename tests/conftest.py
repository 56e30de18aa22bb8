"""Shared fixtures.

ASYNCFLOW_CHECK_KERNELS must be set before asyncflow is imported: the executor reads it
once, and then checks every kernel's outputs (dtype, shape) against the graph.

ASYNCFLOW_BLAS=openblas: the suite's products are NumPy's OpenBLAS's on every path, with
or without the `mkl` extra installed (many tests compare a kernel's bits with a NumPy
product's); tests/test_blas_mkl.py covers MKL's calls for one thread.
"""

import gc
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


@pytest.fixture
def placement_log(monkeypatch):
    """`placement_log()`: the placement log's lines ("name: (Type): device\\n") of the
    sessions this test made, as the placer writes them, taken from the placer itself: the
    GPU tests read devices from it, and capsys saw nothing of it in one xdist worker of
    the suite once in two runs (the stderr lines themselves are tested with capfd in
    test_multi_device and test_debugging_ns)."""
    from asyncflow import placement

    lines: list[str] = []
    original = placement.Placer._log

    def log(self, op, dev):
        if self.log:
            lines.append(f"{op.name}: ({op.type}): {dev.name}\n")
        original(self, op, dev)

    monkeypatch.setattr(placement.Placer, "_log", log)
    return lambda: "".join(lines)


# -- the suite's numba compiles, logged where ASYNCFLOW_TEST_COMPILE_LOG names a folder ----
#
# One JSON file a process (each xdist worker, the controller): every numba compile that
# was not loaded from the on-disk cache, with its function, its seconds, its nesting
# depth (an inline function compiled inside a program's compile is depth 1) and the test
# that was running; the subprocesses tests started; the garbage collector's time; each
# test's wall and CPU seconds; the times of the session's phases.
# For measuring the suite's time; off by default.

_COMPILE_LOG = os.environ.get("ASYNCFLOW_TEST_COMPILE_LOG")
_current_test = ["<collection>"]


def pytest_configure(config):
    if not _COMPILE_LOG:
        return
    import subprocess
    import threading
    import time

    from numba.core import event

    log: dict = {"compiles": [], "children": [], "t_configure": time.time()}
    depth = threading.local()

    class _Compiles(event.Listener):
        def on_start(self, ev):
            depth.n = getattr(depth, "n", 0) + 1
            depth.__dict__.setdefault("t", []).append(time.perf_counter())

        def on_end(self, ev):
            depth.n -= 1
            seconds = time.perf_counter() - depth.t.pop()
            fn = ev.data["dispatcher"].py_func
            name = f"{fn.__module__}.{fn.__qualname__}"
            log["compiles"].append([name, round(seconds, 4), depth.n, _current_test[0]])

    event.register("numba:compile", _Compiles())

    log["gc"] = [[0, 0.0], [0, 0.0], [0, 0.0]]  # per generation: collections, seconds
    gc_start = [0.0]

    def gc_timer(phase, info):
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            entry = log["gc"][info["generation"]]
            entry[0] += 1
            entry[1] += time.perf_counter() - gc_start[0]

    gc.callbacks.append(gc_timer)
    original_init = subprocess.Popen.__init__

    def init(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes)) else list(args)
        log["children"].append([_current_test[0], [str(x)[:80] for x in argv[:4]]])
        original_init(self, args, *a, **k)

    subprocess.Popen.__init__ = init
    config._asyncflow_compiles = log


def pytest_collection_finish(session):
    # The ~18,000 collected tests (their items, parameters, the test modules) live until
    # the session ends: frozen, the garbage collector's full collections during the
    # tests no longer walk them all each time (objects made later are collected as ever).
    gc.collect()
    gc.freeze()
    log = getattr(session.config, "_asyncflow_compiles", None)
    if log is not None:
        import time

        log["t_collected"] = time.time()
        log["n_collected"] = len(session.items)


def pytest_runtest_logstart(nodeid, location):
    _current_test[0] = nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    log = getattr(item.config, "_asyncflow_compiles", None)
    if log is None:
        yield
        return
    import resource
    import time

    def now():
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter(), time.process_time(), children[0] + children[1]

    start = now()
    yield
    end = now()
    # wall, this process's CPU, its waited-for children's CPU (all phases)
    wall, cpu, child = (round(b - a, 3) for a, b in zip(start, end))
    log.setdefault("tests", []).append([item.nodeid, wall, cpu, child])


def pytest_unconfigure(config):
    log = getattr(config, "_asyncflow_compiles", None)
    if log is None:
        return
    import json
    import resource
    import time

    log["t_end"] = time.time()
    log["cpu_self"] = time.process_time()
    log["cpu_children"] = resource.getrusage(resource.RUSAGE_CHILDREN)[:2]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    gpu = "gpu" if os.environ.get("ASYNCFLOW_FAKE_GPUS") else "cpu"
    os.makedirs(_COMPILE_LOG, exist_ok=True)
    path = os.path.join(_COMPILE_LOG, f"compiles-{gpu}-{worker}-{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(log, f)
