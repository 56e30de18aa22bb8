"""`tf.test.TestCase` and the rest of `tf.test` that TF1 test files use.

A TestCase is a `unittest.TestCase` set up as TF's (tensorflow/python/framework/
test_util.py): before each test the default graph is a new one with the graph seed
87654321, and Python's and NumPy's generators are seeded with the same number, so a
test's random values are TF's.  `session()` / `cached_session()` give a session on the
default graph (made default inside the block), `evaluate()` runs tensors in the default
session, and the `assert*` methods compare nested structures of arrays, tensors (run
first) and protos as TF's do.  The checks absl's TestCase adds and TF1 tests use
(`assertLen`, `assertEmpty`, `assertStartsWith`, ...) are here too; absl itself is not
a dependency.

`main()` runs the tests of `__main__` with unittest; pytest collects TestCases as well.
"""

from __future__ import annotations

import atexit
import collections.abc
import contextlib
import random
import re
import shutil
import socket
import tempfile
import threading
import time
import unittest

import numpy as np

from asyncflow import errors, random_seed
from asyncflow import graph as ops

__all__ = [
    "TestCase",
    "Benchmark",
    "StubOutForTesting",
    "assert_equal_graph_def",
    "benchmark_config",
    "create_local_cluster",
    "disable_with_predicate",
    "get_temp_dir",
    "main",
    "with_eager_op_as_function",
]

DEFAULT_GRAPH_SEED = 87654321  # TF's random_seed.DEFAULT_GRAPH_SEED

_temp_dir: str | None = None


def get_temp_dir() -> str:
    """A directory for this process's tests, removed when the process exits."""
    global _temp_dir
    if _temp_dir is None:
        _temp_dir = tempfile.mkdtemp(prefix="asyncflow_test_")
        atexit.register(shutil.rmtree, _temp_dir, ignore_errors=True)
    return _temp_dir


def main(argv=None):
    """Run the tests of `__main__` (unittest's runner; exits with its status)."""
    return unittest.main(module="__main__", argv=argv)


def _as_array(value, evaluate):
    if isinstance(value, (ops.Tensor, ops.Operation)) or hasattr(value, "_as_graph_element"):
        value = evaluate(value)
    return np.asarray(value)


def _is_structure(x) -> bool:
    return isinstance(x, (collections.abc.Mapping, list, tuple)) and not (
        isinstance(x, (list, tuple)) and _all_numbers(x)
    )


def _all_numbers(seq) -> bool:
    return all(isinstance(v, (int, float, complex, bool, np.generic)) for v in seq)


class CheckedThread:
    """A thread whose exception `join()` raises in the test (TF's checkedThread)."""

    def __init__(self, testcase, target, args=None, kwargs=None):
        self._testcase = testcase
        self._target, self._args, self._kwargs = target, args or (), kwargs or {}
        self._exception = None
        self._thread = threading.Thread(target=self._protected_run, daemon=True)
        self._is_thread_joined = False

    def _protected_run(self):
        try:
            self._target(*self._args, **self._kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the test at join()
            self._exception = e

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        self._is_thread_joined = True
        if self._exception is not None:
            self._testcase.fail(f"Error in checkedThread: {self._exception}")

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def check_termination(self) -> None:
        if self._is_thread_joined:
            if self.is_alive():
                raise RuntimeError("Thread was not joined with main thread, and is still running.")
        else:
            self._testcase.fail("A checked thread was not joined.")


class TestCase(unittest.TestCase):
    """TF's graph-mode test base: a fresh seeded default graph per test, sessions on it,
    `evaluate`, and TF's assertions."""

    def __init__(self, methodName="runTest"):  # noqa: N803 - unittest's name
        super().__init__(methodName)
        self._cached_session = None
        self._tempdir = None
        self._threads: list[CheckedThread] = []
        self._set_default_seed = True

    def setUp(self):
        if self._testMethodName == "test_session":
            # (a runner collects the session helper as a test: TF skips it)
            self.skipTest(
                'Tests that have the name "test_session" are automatically skipped by '
                "TensorFlow test fixture, as the name is reserved for creating sessions "
                "within tests. Please rename your test if you have a test with this name."
            )
        self._ClearCachedSession()
        random.seed(DEFAULT_GRAPH_SEED)
        np.random.seed(DEFAULT_GRAPH_SEED)
        ops.reset_default_graph()
        if self._set_default_seed:
            random_seed.set_random_seed(DEFAULT_GRAPH_SEED)

    def tearDown(self):
        for thread in self._threads:
            thread.check_termination()
        self._ClearCachedSession()

    def _ClearCachedSession(self):  # noqa: N802 - TF's name
        if self._cached_session is not None:
            self._cached_session.close()
            self._cached_session = None

    def get_temp_dir(self) -> str:
        """This test's own directory (under the process's `tf.test.get_temp_dir()`)."""
        if not self._tempdir:
            self._tempdir = tempfile.mkdtemp(dir=get_temp_dir())
        return self._tempdir

    # -- sessions
    @contextlib.contextmanager
    def _constrained(self, sess, use_gpu, force_gpu):
        with sess.graph.as_default(), sess.as_default():
            if force_gpu:
                with sess.graph.device("/device:GPU:0"):
                    yield sess
            elif not use_gpu:
                with sess.graph.device("/device:CPU:0"):
                    yield sess
            else:
                yield sess

    @contextlib.contextmanager
    def session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """A new session on `graph` (the default graph), closed at the end of the block;
        inside it the session and its graph are the defaults."""
        from asyncflow.session import Session

        sess = Session(graph=graph or ops.get_default_graph(), config=config)
        try:
            with self._constrained(sess, use_gpu, force_gpu) as s:
                yield s
        finally:
            sess.close()

    @contextlib.contextmanager
    def cached_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """This test's one session, made on first use and closed after the test.

        Raises:
          ValueError: `graph` is not the graph the cached session was made on.
        """
        from asyncflow.session import Session

        if self._cached_session is None:
            self._cached_session = Session(graph=graph or ops.get_default_graph(), config=config)
        elif graph is not None and self._cached_session.graph is not graph:
            raise ValueError(
                "The graph used to get the cached session is different than the one that "
                "was used to create the session. Maybe create a new session with "
                "self.session()"
            )
        with self._constrained(self._cached_session, use_gpu, force_gpu) as s:
            yield s

    @contextlib.contextmanager
    def test_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """TF1's name: the cached session (a new one for another `graph`)."""
        if graph is None:
            with self.cached_session(None, config, use_gpu, force_gpu) as s:
                yield s
        else:
            with self.session(graph, config, use_gpu, force_gpu) as s:
                yield s

    def evaluate(self, tensors):
        """The values of `tensors` (any nested structure) in the default session, or in
        the cached session when there is none."""
        from asyncflow.session import get_default_session

        sess = get_default_session()
        if sess is None:
            with self.test_session() as sess:
                return sess.run(tensors)
        return sess.run(tensors)

    def checkedThread(self, target, args=None, kwargs=None):  # noqa: N802 - TF's name
        thread = CheckedThread(self, target, args, kwargs)
        self._threads.append(thread)
        return thread

    # -- TF's assertions
    def _array(self, value):
        return _as_array(value, self.evaluate)

    def assertNear(self, f1, f2, err, msg=None):  # noqa: N802
        self.assertTrue(
            f1 == f2 or abs(f1 - f2) <= err,
            f"{f1!r} != {f2!r} +/- {err!r}" + (f" ({msg})" if msg else ""),
        )

    def assertArrayNear(self, farray1, farray2, err, msg=None):  # noqa: N802
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertNDArrayNear(self, ndarray1, ndarray2, err, msg=None):  # noqa: N802
        a, b = self._array(ndarray1), self._array(ndarray2)
        self.assertTrue(bool(np.linalg.norm(a - b) <= err), msg=msg)

    def _close(self, a, b, rtol, atol, msg, path):
        if _is_structure(a) or _is_structure(b):
            where = "/".join(map(str, path)) or "(top)"
            maps = [isinstance(x, collections.abc.Mapping) for x in (a, b)]
            if any(maps):
                if not all(maps):
                    raise AssertionError(f"Mismatched type at {where}: {type(a)} vs {type(b)}")
                self.assertEqual(set(a), set(b), f"mismatched keys at {where}: {msg or ''}")
                for k in a:
                    self._close(a[k], b[k], rtol, atol, msg, [*path, k])
                return
            if len(a) != len(b):
                raise AssertionError(
                    f"Mismatched length: a{where} has {len(a)} items, but b{where} has "
                    f"{len(b)} items. {msg or ''}"
                )
            for i, (x, y) in enumerate(zip(a, b)):
                self._close(x, y, rtol, atol, msg, [*path, i])
            return
        x, y = self._array(a), self._array(b)
        if x.shape != y.shape:
            raise AssertionError(f"Shape mismatch: expected {x.shape}, got {y.shape}. {msg or ''}")
        if x.dtype.kind in "OSUb" or y.dtype.kind in "OSUb":
            np.testing.assert_array_equal(x, y, err_msg=msg or "")
            return
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, err_msg=msg or "", equal_nan=True)

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        """a and b (arrays, tensors, numbers, or nested lists, tuples and dicts of them)
        equal within atol + rtol * |b|, element for element."""
        self._close(a, b, rtol, atol, msg, [])

    def assertAllCloseAccordingToType(  # noqa: N802
        self, a, b, rtol=1e-6, atol=1e-6, float_rtol=1e-6, float_atol=1e-6,
        half_rtol=1e-3, half_atol=1e-3, bfloat16_rtol=1e-2, bfloat16_atol=1e-2, msg=None,
    ):  # fmt: skip
        """assertAllClose with the tolerance widened for the narrowest float dtype of a
        and b (float32, float16, bfloat16), as TF's."""
        x, y = self._array(a), self._array(b)
        names = {x.dtype.name, y.dtype.name}
        if names & {"float32", "complex64"}:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if "float16" in names:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        if "bfloat16" in names:
            rtol, atol = max(rtol, bfloat16_rtol), max(atol, bfloat16_atol)
        self.assertAllClose(x, y, rtol=rtol, atol=atol, msg=msg)

    def assertNotAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        try:
            self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)
        except AssertionError:
            return
        raise AssertionError(msg or "The two values are close at all elements.")

    def assertAllEqual(self, a, b, msg=None):  # noqa: N802
        x, y = self._array(a), self._array(b)
        if x.shape != y.shape and x.size and y.size:
            raise AssertionError(f"Shape mismatch: expected {x.shape}, got {y.shape}. {msg or ''}")
        np.testing.assert_array_equal(x, y, err_msg=msg or "")

    def assertNotAllEqual(self, a, b, msg=None):  # noqa: N802
        try:
            self.assertAllEqual(a, b, msg=msg)
        except AssertionError:
            return
        raise AssertionError(msg or "The two values are equal at all elements.")

    def _all(self, a, test, what, msg):
        x = self._array(a)
        if not bool(np.all(test(x))):
            raise AssertionError(f"{x!r} is not {what}. {msg or ''}")

    def assertAllGreater(self, a, comparison_target):  # noqa: N802
        self._all(a, lambda x: x > comparison_target, f"all > {comparison_target}", None)

    def assertAllLess(self, a, comparison_target):  # noqa: N802
        self._all(a, lambda x: x < comparison_target, f"all < {comparison_target}", None)

    def assertAllGreaterEqual(self, a, comparison_target):  # noqa: N802
        self._all(a, lambda x: x >= comparison_target, f"all >= {comparison_target}", None)

    def assertAllLessEqual(self, a, comparison_target):  # noqa: N802
        self._all(a, lambda x: x <= comparison_target, f"all <= {comparison_target}", None)

    def assertAllInRange(  # noqa: N802
        self, target, lower_bound, upper_bound, open_lower_bound=False, open_upper_bound=False
    ):
        x = self._array(target)
        if not np.issubdtype(x.dtype, np.number):
            raise AssertionError(f"The value of {target!r} does not have an ordered numeric type.")
        low = x > lower_bound if open_lower_bound else x >= lower_bound
        high = x < upper_bound if open_upper_bound else x <= upper_bound
        bad = ~(low & high)
        if bad.any():
            raise AssertionError(
                f"{int(bad.sum())} of the {x.size} element(s) are outside the range "
                f"{'(' if open_lower_bound else '['}{lower_bound}, {upper_bound}"
                f"{')' if open_upper_bound else ']'}."
            )

    def assertAllInSet(self, target, expected_set):  # noqa: N802
        x = self._array(target)
        wanted = set(np.ravel(np.asarray(list(expected_set))).tolist())
        diff = set(np.ravel(x).tolist()) - wanted
        if diff:
            raise AssertionError(f"{target!r} contains values {sorted(diff)!r} not in {wanted!r}.")

    def assertDTypeEqual(self, target, expected_dtype):  # noqa: N802
        want = np.dtype(getattr(expected_dtype, "as_numpy_dtype", expected_dtype))
        for v in target if _is_structure(target) else [target]:
            self.assertEqual(self._array(v).dtype, want)

    def assertShapeEqual(self, input_a, input_b, msg=None):  # noqa: N802
        """An array's shape and a tensor's static shape are the same."""
        if not isinstance(input_a, np.ndarray):
            raise TypeError("input_a must be a Numpy ndarray.")
        if not isinstance(input_b, ops.Tensor):
            raise TypeError("input_b must be a Tensor.")
        self.assertAllEqual(
            input_a.shape, input_b.get_shape().as_list(), msg=f"{msg or ''}\nShape mismatch"
        )

    def assertDeviceEqual(self, device1, device2, msg=None):  # noqa: N802
        from asyncflow.device_spec import DeviceSpec

        def canon(d):
            return DeviceSpec.from_string(d or "").to_string()

        self.assertEqual(canon(device1), canon(device2), msg or "Devices differ")

    def assertProtoEquals(self, expected_message_maybe_ascii, message, msg=None):  # noqa: N802
        """`message` equals the expected proto (a message, or its text format)."""
        from google.protobuf import text_format

        expected = expected_message_maybe_ascii
        if isinstance(expected, (str, bytes)):
            parsed = type(message)()
            text_format.Merge(expected, parsed)
            expected = parsed
        self.assertEqual(
            text_format.MessageToString(expected), text_format.MessageToString(message), msg
        )

    def assertStartsWith(self, actual, expected_start, msg=None):  # noqa: N802
        if not actual.startswith(expected_start):
            raise AssertionError(f"{actual!r} does not start with {expected_start!r} {msg or ''}")

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type, expected_err_re_or_predicate):  # noqa: N802
        """The block raises `exception_type` and the error matches the pattern (searched
        in its message) or satisfies the predicate."""
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:

            def predicate(e):
                text = e.message if isinstance(e, errors.OpError) else str(e)
                return re.search(expected_err_re_or_predicate, text) is not None

        try:
            yield
        except exception_type as e:
            if not predicate(e):
                raise AssertionError(f"Exception of type {type(e)}: {e}") from e
        else:
            self.fail(exception_type.__name__ + " not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):  # noqa: N802
        return self.assertRaisesWithPredicateMatch(errors.OpError, expected_err_re_or_predicate)

    # -- absl's checks that TF1 tests use
    def assertItemsEqual(self, first, second, msg=None):  # noqa: N802
        self.assertCountEqual(first, second, msg)

    def assertLen(self, container, expected_len, msg=None):  # noqa: N802
        if len(container) != expected_len:
            got = len(container)
            self.fail(f"{container!r} has length of {got}, expected {expected_len}. {msg or ''}")

    def assertEmpty(self, container, msg=None):  # noqa: N802
        if len(container):
            self.fail(f"{container!r} has length of {len(container)}. {msg or ''}")

    def assertNotEmpty(self, container, msg=None):  # noqa: N802
        if not len(container):
            self.fail(f"{container!r} has length of 0. {msg or ''}")

    def assertSameElements(self, expected_seq, actual_seq, msg=None):  # noqa: N802
        self.assertEqual(set(expected_seq), set(actual_seq), msg)

    def assertBetween(self, value, minv, maxv, msg=None):  # noqa: N802
        if not minv <= value <= maxv:
            self.fail(f"{value!r} is not in range [{minv!r}, {maxv!r}]. {msg or ''}")

    def assertRaisesRegexp(self, *args, **kwargs):  # noqa: N802 - TF1 tests' spelling
        return self.assertRaisesRegex(*args, **kwargs)


# -- graphs ------------------------------------------------------------------------------


def _attr_text(av) -> str:
    """An AttrValue in the words of TF's node summaries (DT_INT32, Tensor<...>, ...)."""
    from asyncflow.graph_io import tensor_from_proto
    from asyncflow.protos.types_pb2 import DataType

    kind = av.WhichOneof("value")
    if kind == "type":
        return DataType.Name(av.type)
    if kind == "tensor":
        arr = tensor_from_proto(av.tensor)
        values = " ".join(str(v) for v in np.ravel(arr)[:10])
        dims = ",".join(map(str, arr.shape))
        return f"Tensor<type: {arr.dtype.name} shape: [{dims}] values: {values}>"
    if kind == "shape":
        return "[" + ",".join(str(d.size) for d in av.shape.dim) + "]"
    if kind == "s":
        return repr(av.s.decode(errors="replace")).replace("'", '"')
    if kind == "b":
        return "true" if av.b else "false"
    if kind == "list":
        parts = [DataType.Name(t) for t in av.list.type] + [str(v) for v in av.list.i]
        parts += [str(v) for v in av.list.f]
        parts += [repr(v.decode(errors="replace")) for v in av.list.s]
        return "[" + ", ".join(parts) + "]"
    return str(getattr(av, kind)) if kind else ""


def _summary(node) -> str:
    """A NodeDef as TF summarizes one: {{node NAME}} = Op[attrs](inputs)."""
    attrs = ", ".join(f"{k}={_attr_text(node.attr[k])}" for k in sorted(node.attr))
    return f"{{{{node {node.name}}}}} = {node.op}[{attrs}]({', '.join(node.input)})"


def assert_equal_graph_def(actual, expected, checkpoint_v2=False, hash_table_shared_name=False):
    """`actual` and `expected` have the same nodes (by name: op, inputs, device, attrs),
    in any order.

    Raises:
      TypeError: either is not a GraphDef.
      AssertionError: they differ (the first difference, in TF's words).
    """
    from asyncflow.protos.graph_pb2 import GraphDef

    for what, gd in (("actual", actual), ("expected", expected)):
        if not isinstance(gd, GraphDef):
            raise TypeError(f"Expected tf.GraphDef for {what}, got {type(gd).__name__}")
    mine = {n.name: n for n in actual.node}
    theirs = {n.name: n for n in expected.node}
    for name, node in theirs.items():
        if name not in mine:
            raise AssertionError(f"Did not find expected node '{_summary(node)}'")
    for name, node in mine.items():
        if name not in theirs:
            raise AssertionError(f"Found unexpected node '{_summary(node)}'")
    skip = set()
    if checkpoint_v2:
        skip.add("_class")  # (TF ignores the save ops' colocation noise)
    for name, want in theirs.items():
        got = mine[name]
        if got.op != want.op:
            raise AssertionError(
                f"Node named '{name}' has op {got.op} that does not match expected {want.op}"
            )
        if list(got.input) != list(want.input):
            raise AssertionError(
                f"Node named '{name}' has inputs {list(got.input)} that don't match "
                f"expected {list(want.input)}"
            )
        if got.device != want.device:
            raise AssertionError(
                f"Node named '{name}' has device {got.device} that does not match expected "
                f"{want.device}"
            )
        for k in sorted(set(got.attr) | set(want.attr)):
            if k in skip or (hash_table_shared_name and k == "shared_name"):
                continue
            if k not in want.attr:
                raise AssertionError(f"Node named '{name}' has unexpected attr '{k}'")
            if k not in got.attr:
                raise AssertionError(f"Node named '{name}' missing expected attr '{k}'")
            if got.attr[k] != want.attr[k]:
                raise AssertionError(
                    f"Node named '{name}' has attr '{k}' with value: "
                    f"{_attr_text(got.attr[k])} that does not match expected: "
                    f"{_attr_text(want.attr[k])}"
                )


# -- benchmarks, clusters, helpers -----------------------------------------------------------


def benchmark_config():
    """A ConfigProto for benchmarks: TF's (grappler's dependency optimization off)."""
    from asyncflow.config import ConfigProto, RewriterConfig

    config = ConfigProto()
    config.graph_options.rewrite_options.dependency_optimization = RewriterConfig.OFF
    return config


class Benchmark:
    """TF's benchmark base: `run_op_benchmark` times an op's runs; `report_benchmark`
    logs an entry."""

    is_abstract = True

    def report_benchmark(
        self, iters=None, cpu_time=None, wall_time=None, throughput=None, extras=None,
        name=None, metrics=None,
    ):  # fmt: skip
        from asyncflow import tf_logging

        entry = {
            "name": name or type(self).__name__,
            "iters": iters,
            "cpu_time": cpu_time,
            "wall_time": wall_time,
            "throughput": throughput,
            "extras": extras or {},
            "metrics": metrics or [],
        }
        tf_logging.info("Benchmark [%s] %s", entry["name"], entry)
        return entry

    def run_op_benchmark(
        self, sess, op_or_tensor, feed_dict=None, burn_iters=2, min_iters=10,
        store_trace=False, store_memory_usage=True, name=None, extras=None, mbs=0,
    ):  # fmt: skip
        """Run `op_or_tensor` burn_iters times, then time min_iters runs: a dict with
        the median wall time (seconds) as TF reports it."""
        for _ in range(burn_iters):
            sess.run(op_or_tensor, feed_dict=feed_dict)
        deltas = []
        for _ in range(min_iters):
            start = time.perf_counter()
            sess.run(op_or_tensor, feed_dict=feed_dict)
            deltas.append(time.perf_counter() - start)
        wall = float(np.median(deltas))
        extras = dict(extras or {})
        throughput = mbs / wall if mbs else None
        entry = self.report_benchmark(
            iters=min_iters, wall_time=wall, throughput=throughput, extras=extras, name=name
        )
        return {"iters": min_iters, "wall_time": wall, "extras": extras, **entry}

    def evaluate(self, tensors):
        from asyncflow.session import get_default_session

        sess = get_default_session()
        if sess is None:
            raise ValueError("evaluate needs a default session")
        return sess.run(tensors)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def create_local_cluster(num_workers, num_ps, protocol="grpc", worker_config=None, ps_config=None):
    """`num_workers` worker and `num_ps` ps servers in this process, on free localhost
    ports, started: (workers, ps_servers), as TF's."""
    from asyncflow.distributed.cluster import ClusterSpec
    from asyncflow.distributed.server import Server

    cluster = ClusterSpec(
        {
            "worker": [f"localhost:{_free_port()}" for _ in range(num_workers)],
            "ps": [f"localhost:{_free_port()}" for _ in range(num_ps)],
        }
    )
    workers = [
        Server(cluster, job_name="worker", protocol=protocol, task_index=i, config=worker_config,
               start=True)
        for i in range(num_workers)
    ]  # fmt: skip
    ps = [
        Server(cluster, job_name="ps", protocol=protocol, task_index=i, config=ps_config,
               start=True)
        for i in range(num_ps)
    ]  # fmt: skip
    return workers, ps


def disable_with_predicate(pred, skip_message):
    """A test decorator: the test is skipped (with `skip_message`) when `pred()`."""

    def decorator(fn):
        def wrapped(self, *args, **kwargs):
            if pred():
                self.skipTest(skip_message)
            return fn(self, *args, **kwargs)

        wrapped.__name__, wrapped.__doc__ = fn.__name__, fn.__doc__
        return wrapped

    return decorator


def with_eager_op_as_function(cls=None, only_as_function=False):
    """TF's decorator adds eager variants of a class's tests; graph-mode tests (all of
    asyncflow's) run as they are."""
    if cls is None:
        return lambda c: c
    return cls


class StubOutForTesting:
    """Replace attributes for a test and put them back (`UnsetAll` / `CleanUp`)."""

    def __init__(self):
        self.cache = []
        self.stubs = []

    def Set(self, parent, child_name, new_child):  # noqa: N802 - TF's names
        old = getattr(parent, child_name)
        self.cache.append((parent, old, child_name))
        setattr(parent, child_name, new_child)

    def SmartSet(self, obj, attr_name, new_attr):  # noqa: N802
        self.Set(obj, attr_name, new_attr)

    def UnsetAll(self):  # noqa: N802
        for parent, old, name in reversed(self.cache):
            setattr(parent, name, old)
        self.cache = []

    def SmartUnsetAll(self):  # noqa: N802
        self.UnsetAll()

    def CleanUp(self):  # noqa: N802
        self.UnsetAll()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.CleanUp()
