"""`tf.test`: TestCase as TF 2.21's (graph mode) and the module's helpers.

Recorded from TF 2.21 (tf.compat.v1, disable_v2_behavior) running the same tests:
each test starts on an empty default graph with seed 87654321, so
`random_uniform([2], seed=1)` gives [0.23904, 0.92040], `np.random.rand()`
0.18463433217903202 and `random.random()` 0.3499765785632496; the cached session is
one object; every assertion below fails or passes as TF's did; a method named
`test_session` is skipped.
"""

from __future__ import annotations

import random
import unittest

import numpy as np
import pytest

import asyncflow as af


class SeededGraphTest(af.test.TestCase):
    def test_each_test_starts_on_a_seeded_empty_graph(self):
        g = af.get_default_graph()
        self.assertEqual((g.seed, len(g.get_operations())), (87654321, 0))
        x = af.random_uniform([2], seed=1)
        with self.session() as sess:
            self.assertIs(sess, af.get_default_session())
            self.assertIs(sess.graph, g)
            self.assertAllClose(sess.run(x), [0.23904, 0.92040], atol=1e-5)
        self.assertEqual(np.random.rand(), 0.18463433217903202)
        self.assertEqual(random.random(), 0.3499765785632496)

    def test_cached_session_and_evaluate(self):
        with self.cached_session() as a:
            pass
        with self.cached_session() as b:
            self.assertIs(a, b)
        with self.assertRaisesRegex(ValueError, "different than the one"):
            with self.cached_session(graph=af.Graph()):
                pass
        got = self.evaluate({"a": af.constant(1.5), "b": [af.constant(2)]})
        self.assertEqual(got, {"a": np.float32(1.5), "b": [np.int32(2)]})
        with self.session(graph=af.Graph()) as s:
            self.assertIs(s.graph, af.get_default_graph())
        self.assertEqual(self.get_temp_dir(), self.get_temp_dir())
        self.assertTrue(self.get_temp_dir().startswith(af.test.get_temp_dir()))

    def test_assertions_pass_and_fail_as_tfs(self):
        self.assertAllClose([1.0, 2.0], np.array([1.0, 2.0 + 1e-7]))
        self.assertAllClose({"a": [1.0], "b": (2.0, 3.0)}, {"a": np.array([1.0]), "b": (2.0, 3.0)})
        self.assertAllClose(af.constant([1.0, 2.0]), [1.0, 2.0])  # a tensor is run
        self.assertAllCloseAccordingToType([1.0], np.array([1.0005], np.float16))
        self.assertShapeEqual(np.zeros([3, 2]), af.zeros([3, 2]))
        self.assertProtoEquals("dim { size: 3 }", af.TensorShape([3]).as_proto())
        self.assertAllInRange([1, 4], 0, 4)
        self.assertAllInSet([1, 2, 1], [1, 2])
        self.assertDeviceEqual("/cpu:0", "/device:CPU:0")
        failing = [
            ("assertAllClose", ([1.0], [1.1])),
            ("assertAllEqual", ([1, 2], [1, 3])),
            ("assertAllEqual", (np.zeros([2]), np.zeros([3]))),
            ("assertNotAllClose", ([1.0], [1.0])),
            ("assertAllGreater", ([1, 2], 1)),
            ("assertAllLess", ([1, 2], 2)),
            ("assertAllInRange", ([1, 5], 0, 4)),
            ("assertAllInSet", ([1, 5], [1, 2])),
            ("assertNear", (1.0, 1.2, 0.1)),
            ("assertArrayNear", ([1.0], [1.2], 0.1)),
            ("assertShapeEqual", (np.zeros([2, 3]), af.zeros([3, 2]))),
            ("assertDTypeEqual", (np.zeros(2, np.float32), np.float64)),
            ("assertStartsWith", ("abc", "b")),
            ("assertDeviceEqual", ("/cpu:0", "/gpu:0")),
            ("assertItemsEqual", ([1, 2], [2, 2])),
            ("assertLen", ([1], 2)),
            ("assertEmpty", ([1],)),
            ("assertProtoEquals", ("dim { size: 2 }", af.TensorShape([3]).as_proto())),
        ]
        for name, args in failing:
            with self.assertRaises(AssertionError, msg=name):
                getattr(self, name)(*args)

    def test_op_errors_and_predicates(self):
        bad = af.reshape(af.zeros([4]), af.placeholder_with_default([3], [1]))
        with self.assertRaisesOpError("requested shape has 3"):
            self.evaluate(bad)
        with self.assertRaises(AssertionError):
            with self.assertRaisesOpError("no such words"):
                self.evaluate(bad)
        with self.assertRaisesWithPredicateMatch(ValueError, lambda e: "bad" in str(e)):
            raise ValueError("bad thing")

    def test_checked_thread_reports_its_error(self):
        def boom():
            raise RuntimeError("in the thread")

        t = self.checkedThread(boom)
        t.start()
        with self.assertRaisesRegex(AssertionError, "in the thread"):
            t.join()
        ok = self.checkedThread(lambda: None)
        ok.start()
        ok.join()


def test_a_method_named_test_session_is_skipped():
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(SeededGraphTest).run(result)
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.skipped] == ["test_session"]
    assert not result.failures and not result.errors


def _graph(build):
    g = af.Graph()
    with g.as_default():
        build()
    return g.as_graph_def()


def test_assert_equal_graph_def_in_tfs_words():
    a = _graph(lambda: (af.constant(1, name="c"), af.add(af.constant(2), 3, name="d")))
    b = _graph(lambda: (af.constant(1, name="c"), af.constant(5, name="e")))
    c = _graph(lambda: (af.constant(2, name="c"), af.add(af.constant(2), 3, name="d")))
    af.test.assert_equal_graph_def(a, a)
    with pytest.raises(
        AssertionError, match=r"^Did not find expected node '\{\{node e\}\} = Const"
    ):
        af.test.assert_equal_graph_def(a, b)
    with pytest.raises(AssertionError, match=r"^Did not find expected node '\{\{node Const\}\}"):
        af.test.assert_equal_graph_def(b, a)
    with pytest.raises(
        AssertionError,
        match=r"^Node named 'c' has attr 'value' with value: Tensor<type: int32 shape: \[\] "
        r"values: 1> that does not match expected: Tensor<type: int32 shape: \[\] values: 2>$",
    ):
        af.test.assert_equal_graph_def(a, c)
    with pytest.raises(TypeError, match="^Expected tf.GraphDef for actual, got int$"):
        af.test.assert_equal_graph_def(1, a)


def test_create_local_cluster_runs_a_two_job_step():
    workers, ps = af.test.create_local_cluster(2, 1)
    try:
        assert len(workers) == 2 and len(ps) == 1
        with af.Graph().as_default():
            with af.device("/job:ps/task:0"):
                v = af.Variable(3.0)
            with af.device("/job:worker/task:1"):
                y = v * 2
            with af.Session(workers[0].target) as sess:
                sess.run(v.initializer)
                assert sess.run(y) == 6.0
    finally:
        for server in workers + ps:
            server.stop()


def test_module_helpers():
    assert af.test.benchmark_config().graph_options.rewrite_options.dependency_optimization == 2
    assert (af.test.is_built_with_rocm(), af.test.is_built_with_xla()) == (False, False)
    assert af.test.is_built_with_gpu_support() == af.test.is_built_with_cuda()

    class Holder:
        value = 1

    stubs = af.test.StubOutForTesting()
    stubs.Set(Holder, "value", 2)
    assert Holder.value == 2
    stubs.CleanUp()
    assert Holder.value == 1

    class Skipping(unittest.TestCase):
        @af.test.disable_with_predicate(lambda: True, "off here")
        def test_x(self):
            raise AssertionError("ran")

    result = unittest.TestResult()
    Skipping("test_x").run(result)
    assert [why for _, why in result.skipped] == ["off here"]
    assert af.test.with_eager_op_as_function(Skipping) is Skipping


def test_run_op_benchmark_times_the_op():
    with af.Graph().as_default(), af.Session() as sess:
        out = af.test.Benchmark().run_op_benchmark(sess, af.constant(1.0) + 1, min_iters=3)
    assert out["iters"] == 3 and out["wall_time"] > 0
