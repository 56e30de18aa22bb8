"""stacks, stitch/partition, ref-variable scatter, gather, segment reductions, random
and init behaviours, condensed from what TF's kernel tests check; written for the
measurement, graph mode (the families with few cases in the other probe files)."""

import numpy as np
from tensorflow.python.framework import (
    constant_op,
    dtypes,
    errors_impl,
    ops,
    random_seed,
    test_util,
)
from tensorflow.python.ops import (
    array_ops,
    data_flow_ops,
    gen_data_flow_ops,
    gradients_impl,
    init_ops,
    math_ops,
    random_ops,
    state_ops,
    variables,
    while_loop,
)
from tensorflow.python.platform import test


class StackProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testPushPop(self):
        h = gen_data_flow_ops.stack_v2(-1, elem_type=dtypes.float32, stack_name="foo")
        c = gen_data_flow_ops.stack_push_v2(h, [[4.0, 5.0]])
        with ops.control_dependencies([c]):
            c1 = gen_data_flow_ops.stack_pop_v2(h, dtypes.float32)
        self.assertAllClose([[4.0, 5.0]], self.evaluate(c1))

    @test_util.run_deprecated_v1
    def testPushPopOrder(self):
        h = gen_data_flow_ops.stack_v2(-1, elem_type=dtypes.int32, stack_name="s")
        p1 = gen_data_flow_ops.stack_push_v2(h, 1)
        with ops.control_dependencies([p1]):
            p2 = gen_data_flow_ops.stack_push_v2(h, 2)
        with ops.control_dependencies([p2]):
            a = gen_data_flow_ops.stack_pop_v2(h, dtypes.int32)
        with ops.control_dependencies([a]):
            b = gen_data_flow_ops.stack_pop_v2(h, dtypes.int32)
        self.assertEqual([2, 1], self.evaluate([a, b]))

    @test_util.run_deprecated_v1
    def testPopEmptyRaises(self):
        h = gen_data_flow_ops.stack_v2(-1, elem_type=dtypes.float32, stack_name="e")
        pop = gen_data_flow_ops.stack_pop_v2(h, dtypes.float32)
        with self.assertRaises(errors_impl.InvalidArgumentError):
            self.evaluate(pop)

    @test_util.run_deprecated_v1
    def testMaxSize(self):
        h = gen_data_flow_ops.stack_v2(1, elem_type=dtypes.float32, stack_name="m")
        p1 = gen_data_flow_ops.stack_push_v2(h, 1.0)
        with ops.control_dependencies([p1]):
            p2 = gen_data_flow_ops.stack_push_v2(h, 2.0)
        with ops.control_dependencies([p2]):
            top = gen_data_flow_ops.stack_pop_v2(h, dtypes.float32)
        with self.assertRaisesOpError(r"overflowed its max_size \(1\)"):
            self.evaluate([p2, top])

    @test_util.run_deprecated_v1
    def testCloseStack(self):
        h = gen_data_flow_ops.stack_v2(-1, elem_type=dtypes.float32, stack_name="c")
        self.evaluate(gen_data_flow_ops.stack_close_v2(h))

    @test_util.run_deprecated_v1
    def testPushInWhileLoop(self):
        h = gen_data_flow_ops.stack_v2(-1, elem_type=dtypes.float32, stack_name="w")

        def body(i, _):
            p = gen_data_flow_ops.stack_push_v2(h, math_ops.cast(i, dtypes.float32))
            with ops.control_dependencies([p]):
                return i + 1, p

        _, last = self._while(body)
        with ops.control_dependencies([last]):
            top = gen_data_flow_ops.stack_pop_v2(h, dtypes.float32)
        self.assertEqual(4.0, self.evaluate(top))

    def _while(self, body):
        return while_loop.while_loop(
            lambda i, _: i < 5, body, [constant_op.constant(0), constant_op.constant(0.0)]
        )


class StitchPartitionProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testStitchOneDimensional(self):
        t = data_flow_ops.dynamic_stitch([[0, 4, 2], [1, 3]], [[0, 40, 20], [10, 30]])
        self.assertAllEqual([0, 10, 20, 30, 40], self.evaluate(t))
        self.assertEqual([5], t.get_shape().as_list())

    @test_util.run_deprecated_v1
    def testStitchDuplicatesLastWins(self):
        t = data_flow_ops.dynamic_stitch([[0, 1], [1, 2]], [[1, 2], [3, 4]])
        self.assertAllEqual([1, 3, 4], self.evaluate(t))

    @test_util.run_deprecated_v1
    def testStitchHigherRankAndGradient(self):
        indices = [constant_op.constant(3), constant_op.constant([[1, 0], [2, 4]])]
        data = [
            constant_op.constant([7.0, 8.0]),
            constant_op.constant(np.arange(8, dtype=np.float32).reshape(2, 2, 2)),
        ]
        t = data_flow_ops.dynamic_stitch(indices, data)
        self.assertEqual([5, 2], t.get_shape().as_list())  # constant indices: known
        want = [[2, 3], [0, 1], [4, 5], [7, 8], [6, 7]]
        self.assertAllEqual(want, self.evaluate(t))
        grads = gradients_impl.gradients(t, indices + data, 2.0 * t)
        self.assertEqual([None, None], grads[:2])
        self.assertAllEqual([14.0, 16.0], self.evaluate(grads[2]))

    @test_util.run_deprecated_v1
    def testParallelStitch(self):
        t = data_flow_ops.parallel_dynamic_stitch([[0, 2], [1]], [[5, 7], [6]])
        self.assertAllEqual([5, 6, 7], self.evaluate(t))

    @test_util.run_deprecated_v1
    def testStitchDataShapeMismatch(self):
        with self.assertRaises(ValueError):
            data_flow_ops.dynamic_stitch([[0, 1]], [[[1, 2]]])

    @test_util.run_deprecated_v1
    def testStitchMissingIndexZeroFilled(self):
        t = data_flow_ops.dynamic_stitch([[0, 3]], [[1.0, 4.0]])
        self.assertAllEqual([1.0, 0.0, 0.0, 4.0], self.evaluate(t))

    @test_util.run_deprecated_v1
    def testPartitionSimple(self):
        parts = data_flow_ops.dynamic_partition([1, 2, 3, 4, 5], [0, 2, 1, 0, 2], 3)
        self.assertEqual(3, len(parts))
        got = self.evaluate(parts)
        self.assertAllEqual([1, 4], got[0])
        self.assertAllEqual([3], got[1])
        self.assertAllEqual([2, 5], got[2])

    @test_util.run_deprecated_v1
    def testPartitionHigherRankAndEmpty(self):
        data = np.arange(12).reshape(2, 3, 2)
        parts = data_flow_ops.dynamic_partition(data, [[0, 1, 0], [0, 0, 1]], 3)
        got = self.evaluate(parts)
        self.assertAllEqual(data.reshape(6, 2)[[0, 2, 3, 4]], got[0])
        self.assertAllEqual((0, 2), got[2].shape)
        self.assertEqual([None, 2], parts[0].get_shape().as_list())

    @test_util.run_deprecated_v1
    def testPartitionOutOfRange(self):
        parts = data_flow_ops.dynamic_partition([1, 2], [0, 5], 2)
        with self.assertRaises(errors_impl.InvalidArgumentError):
            self.evaluate(parts)

    @test_util.run_deprecated_v1
    def testPartitionGradient(self):
        x = constant_op.constant([1.0, 2.0, 3.0])
        parts = data_flow_ops.dynamic_partition(x, [1, 0, 1], 2)
        g = gradients_impl.gradients(parts[0] * 3.0 + math_ops.reduce_sum(parts[1]), x)[0]
        self.assertAllEqual([1.0, 3.0, 1.0], self.evaluate(g))


class RefScatterProbe(test.TestCase):
    def _var(self, value):
        v = variables.Variable(value)
        self.evaluate(v.initializer)
        return v

    @test_util.run_deprecated_v1
    def testScatterFamily(self):
        base = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
        upd = np.array([[2.0, 2.0], [4.0, 0.5]], np.float32)
        idx = [2, 0]
        for fn, want in [
            (state_ops.scatter_update, lambda b: _set(b, idx, upd)),
            (state_ops.scatter_add, lambda b: _op(b, idx, upd, np.add)),
            (state_ops.scatter_sub, lambda b: _op(b, idx, upd, np.subtract)),
            (state_ops.scatter_mul, lambda b: _op(b, idx, upd, np.multiply)),
            (state_ops.scatter_div, lambda b: _op(b, idx, upd, np.divide)),
            (state_ops.scatter_min, lambda b: _op(b, idx, upd, np.minimum)),
            (state_ops.scatter_max, lambda b: _op(b, idx, upd, np.maximum)),
        ]:
            v = self._var(base)
            self.assertAllClose(want(base.copy()), self.evaluate(fn(v, idx, upd)))

    @test_util.run_deprecated_v1
    def testScatterRepeatedIndicesAdd(self):
        v = self._var(np.zeros(3, np.float32))
        self.assertAllEqual(
            [0.0, 3.0, 0.0], self.evaluate(state_ops.scatter_add(v, [1, 1], [1.0, 2.0]))
        )

    @test_util.run_deprecated_v1
    def testScatterScalarUpdateBroadcast(self):
        v = self._var(np.zeros((3, 2), np.float32))
        out = self.evaluate(state_ops.scatter_update(v, [0, 2], 7.0))
        self.assertAllEqual([[7, 7], [0, 0], [7, 7]], out)

    @test_util.run_deprecated_v1
    def testScatterOutOfRange(self):
        v = self._var(np.zeros(3, np.float32))
        with self.assertRaisesOpError(r"indices\[1\] = 7 is not in \[0, 3\)"):
            self.evaluate(state_ops.scatter_update(v, [0, 7], [1.0, 2.0]))

    @test_util.run_deprecated_v1
    def testScatterBool(self):
        v = self._var(np.array([False, False, True]))
        out = self.evaluate(state_ops.scatter_update(v, [0, 2], [True, False]))
        self.assertAllEqual([True, False, False], out)

    @test_util.run_deprecated_v1
    def testScatterNdRefVariants(self):
        v = self._var(np.zeros((2, 2), np.float32))
        a = state_ops.scatter_nd_update(v, [[0, 1]], [5.0])
        self.assertAllEqual([[0, 5], [0, 0]], self.evaluate(a))
        b = state_ops.scatter_nd_add(v, [[0, 1], [1, 0]], [1.0, 2.0])
        self.assertAllEqual([[0, 6], [2, 0]], self.evaluate(b))
        c = state_ops.scatter_nd_sub(v, [[1]], [[1.0, 1.0]])
        self.assertAllEqual([[0, 6], [1, -1]], self.evaluate(c))

    @test_util.run_deprecated_v1
    def testScatterWrongUpdateShape(self):
        v = variables.Variable(np.zeros((3, 2), np.float32))
        with self.assertRaises(ValueError):
            state_ops.scatter_update(v, [0], [[1.0, 2.0, 3.0]])


def _set(b, idx, upd):
    b[idx] = upd
    return b


def _op(b, idx, upd, fn):
    for i, u in zip(idx, upd):
        b[i] = fn(b[i], u)
    return b


class GatherSegmentProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testGatherNd(self):
        p = np.arange(24).reshape(2, 3, 4)
        self.assertAllEqual(p[1, 2], self.evaluate(array_ops.gather_nd(p, [1, 2])))
        self.assertAllEqual(
            [p[0, 1, 2], p[1, 0, 3]], self.evaluate(array_ops.gather_nd(p, [[0, 1, 2], [1, 0, 3]]))
        )

    @test_util.run_deprecated_v1
    def testGatherNdBadIndex(self):
        with self.assertRaisesOpError(r"does not index into param shape"):
            self.evaluate(array_ops.gather_nd([[0, 1, 2]], [[0, 5]]))

    @test_util.run_deprecated_v1
    def testGatherNdGradient(self):
        p = constant_op.constant([[1.0, 2.0], [3.0, 4.0]])
        g = gradients_impl.gradients(array_ops.gather_nd(p, [[0, 1], [0, 1], [1, 0]]), p)[0]
        self.assertAllEqual([[0, 2], [1, 0]], self.evaluate(g))

    @test_util.run_deprecated_v1
    def testBatchGather(self):
        p = np.arange(12).reshape(2, 6)
        out = array_ops.batch_gather(p, [[0, 5], [1, 1]])
        self.assertAllEqual([[0, 5], [7, 7]], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testSegmentSumAndMean(self):
        data = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
        self.assertAllEqual([[4, 6], [5, 6]], self.evaluate(math_ops.segment_sum(data, [0, 0, 1])))
        self.assertAllEqual(
            [[2, 3], [5, 6]], self.evaluate(math_ops.segment_mean(data, [0, 0, 1]))
        )

    @test_util.run_deprecated_v1
    def testSegmentIdsNotSorted(self):
        with self.assertRaisesOpError("segment ids are not increasing"):
            self.evaluate(math_ops.segment_sum([1.0, 2.0, 3.0], [1, 0, 1]))

    @test_util.run_deprecated_v1
    def testUnsortedSegmentMaxEmptySegment(self):
        out = math_ops.unsorted_segment_max([1.0, 5.0], [0, 2], 3)
        self.assertAllEqual([1.0, np.finfo(np.float32).min, 5.0], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testUnsortedSegmentSumNegativeIdsDropped(self):
        out = math_ops.unsorted_segment_sum([1.0, 2.0, 3.0], [0, -1, 0], 2)
        self.assertAllEqual([4.0, 0.0], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testSparseSegmentSqrtN(self):
        data = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        out = math_ops.sparse_segment_sqrt_n(data, [0, 1, 1], [0, 0, 1])
        self.assertAllClose([[4 / np.sqrt(2), 6 / np.sqrt(2)], [3, 4]], self.evaluate(out))


class RandomInitMoreProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testOpSeedSameGraphDiffers(self):
        random_seed.set_random_seed(3)
        a = random_ops.random_uniform([4])
        b = random_ops.random_uniform([4])
        va, vb = self.evaluate([a, b])
        self.assertFalse(np.array_equal(va, vb))

    @test_util.run_deprecated_v1
    def testSameOpTwoRunsDiffer(self):
        a = random_ops.random_normal([4], seed=5)
        with self.session() as s:
            self.assertFalse(np.array_equal(s.run(a), s.run(a)))

    @test_util.run_deprecated_v1
    def testRandomUniformIntNeedsMaxval(self):
        with self.assertRaises(ValueError):
            random_ops.random_uniform([2], dtype=dtypes.int32)

    @test_util.run_deprecated_v1
    def testRandomUniformIntRange(self):
        v = self.evaluate(random_ops.random_uniform([1000], -2, 3, dtype=dtypes.int64, seed=1))
        self.assertEqual(-2, v.min())
        self.assertEqual(2, v.max())

    @test_util.run_deprecated_v1
    def testMultinomialLogitsZeroProb(self):
        logits = np.log([[1e-30, 1.0, 1e-30]]).astype(np.float32)
        v = self.evaluate(random_ops.multinomial(logits, 50, seed=2))
        self.assertTrue((v == 1).all())

    @test_util.run_deprecated_v1
    def testInitializersShapesAndValues(self):
        for init, check in [
            (init_ops.zeros_initializer(), lambda v: (v == 0).all()),
            (init_ops.ones_initializer(), lambda v: (v == 1).all()),
            (init_ops.constant_initializer(3.0), lambda v: (v == 3).all()),
            (
                init_ops.orthogonal_initializer(seed=1),
                lambda v: np.allclose(v.T @ v, np.eye(3), atol=1e-5),
            ),
        ]:
            v = self.evaluate(init([3, 3], dtype=dtypes.float32))
            self.assertTrue(check(v))

    @test_util.run_deprecated_v1
    def testConstantInitializerShortListRepeatsLast(self):
        v = self.evaluate(init_ops.constant_initializer([1.0, 2.0, 3.0])([2, 2]))
        self.assertAllEqual([[1, 2], [3, 3]], v)

    @test_util.run_deprecated_v1
    def testUniformUnitScaling(self):
        v = self.evaluate(init_ops.uniform_unit_scaling_initializer(seed=1)([100, 10]))
        self.assertLessEqual(np.abs(v).max(), np.sqrt(3.0 / 100) + 1e-6)

    @test_util.run_deprecated_v1
    def testRandomShuffleFirstDim(self):
        x = np.arange(20).reshape(10, 2)
        v = self.evaluate(random_ops.random_shuffle(x, seed=4))
        self.assertAllEqual(sorted(map(tuple, x)), sorted(map(tuple, v)))
        self.assertTrue((v[:, 1] - v[:, 0] == 1).all())

    @test_util.run_deprecated_v1
    def testTruncatedNormalMoments(self):
        v = self.evaluate(random_ops.truncated_normal([20000], seed=7))
        self.assertLess(abs(v.mean()), 0.03)
        self.assertLess(abs(v.std() - 0.8796), 0.02)


if __name__ == "__main__":
    test.main()
