"""matmul, reduction, element-wise, concat/split/slice, gather, scatter_nd behaviours,
condensed from what TF's kernel tests check; written for the measurement, graph mode."""

import numpy as np
from tensorflow.python.framework import (
    constant_op,
    dtypes,
    errors_impl,
    tensor_shape,
    test_util,
)
from tensorflow.python.ops import (
    array_ops,
    gradient_checker,
    gradients_impl,
    math_ops,
    state_ops,
    variables,
)
from tensorflow.python.platform import test


class MatMulProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testTransposes(self):
        a = np.random.randn(3, 4).astype(np.float32)
        b = np.random.randn(5, 4).astype(np.float32)
        self.assertAllClose(
            a @ b.T, self.evaluate(math_ops.matmul(a, b, transpose_b=True)), rtol=1e-5
        )
        self.assertAllClose(
            a.T.T @ b.T,
            self.evaluate(math_ops.matmul(a.T, b, transpose_a=True, transpose_b=True)),
            rtol=1e-5,
        )

    @test_util.run_deprecated_v1
    def testAdjointComplex(self):
        a = (np.random.randn(3, 3) + 1j * np.random.randn(3, 3)).astype(np.complex64)
        self.assertAllClose(
            a.conj().T @ a,
            self.evaluate(math_ops.matmul(a, a, adjoint_a=True)),
            rtol=1e-4,
            atol=1e-4,
        )

    @test_util.run_deprecated_v1
    def testInt32AndHalf(self):
        a = np.arange(6, dtype=np.int32).reshape(2, 3)
        self.assertAllEqual(a @ a.T, self.evaluate(math_ops.matmul(a, a.T)))
        h = np.ones((2, 2), np.float16)
        self.assertAllEqual(h @ h, self.evaluate(math_ops.matmul(h, h)))

    @test_util.run_deprecated_v1
    def testShapeMismatch(self):
        with self.assertRaises(ValueError):
            math_ops.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))

    @test_util.run_deprecated_v1
    def testBatchMatMulBroadcast(self):
        a = np.random.randn(2, 1, 3, 4).astype(np.float32)
        b = np.random.randn(5, 4, 2).astype(np.float32)
        self.assertAllClose(
            np.matmul(a, b), self.evaluate(math_ops.matmul(a, b)), rtol=1e-5, atol=1e-5
        )

    @test_util.run_deprecated_v1
    def testSparseHints(self):
        a = np.random.randn(3, 4).astype(np.float32)
        b = np.random.randn(4, 2).astype(np.float32)
        self.assertAllClose(
            a @ b,
            self.evaluate(math_ops.matmul(a, b, a_is_sparse=True, b_is_sparse=True)),
            rtol=1e-5,
        )

    @test_util.run_deprecated_v1
    def testMatMulGradient(self):
        a = constant_op.constant(np.random.randn(2, 3))
        b = constant_op.constant(np.random.randn(3, 2))
        err = gradient_checker.compute_gradient_error(a, [2, 3], math_ops.matmul(a, b), [2, 2])
        self.assertLess(err, 1e-6)

    @test_util.run_deprecated_v1
    def testEmpty(self):
        self.assertAllEqual(
            np.zeros((2, 3)),
            self.evaluate(
                math_ops.matmul(np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32))
            ),
        )


class ReductionProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testAxesAndKeepdims(self):
        x = np.random.randn(2, 3, 4).astype(np.float32)
        self.assertAllClose(
            x.sum((0, 2), keepdims=True),
            self.evaluate(math_ops.reduce_sum(x, [0, 2], keepdims=True)),
            rtol=1e-5,
        )
        self.assertAllClose(x.mean(-1), self.evaluate(math_ops.reduce_mean(x, -1)), rtol=1e-5)
        self.assertAllClose(x.prod(), self.evaluate(math_ops.reduce_prod(x)), rtol=1e-4)

    @test_util.run_deprecated_v1
    def testKeepDimsV1(self):
        x = np.ones((2, 3), np.float32)
        self.assertEqual((1, 3), self.evaluate(math_ops.reduce_sum(x, 0, keep_dims=True)).shape)

    @test_util.run_deprecated_v1
    def testInvalidAxis(self):
        x = np.ones((2, 3), np.float32)
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            math_ops.reduce_sum(x, 2)
        p = array_ops.placeholder(dtypes.int32)
        with self.cached_session() as s:
            with self.assertRaisesOpError("Invalid reduction dimension"):
                s.run(math_ops.reduce_sum(x, p), {p: 5})

    @test_util.run_deprecated_v1
    def testDuplicateAxis(self):
        x = np.ones((2, 3), np.float32)
        self.assertAllEqual([3.0, 3.0], self.evaluate(math_ops.reduce_sum(x, [1, 1])))

    @test_util.run_deprecated_v1
    def testEmptyReductions(self):
        x = np.zeros((0, 3), np.float32)
        self.assertAllEqual([0, 0, 0], self.evaluate(math_ops.reduce_sum(x, 0)))
        self.assertAllEqual([1, 1, 1], self.evaluate(math_ops.reduce_prod(x, 0)))
        self.assertTrue(np.all(np.isnan(self.evaluate(math_ops.reduce_mean(x, 0)))))
        self.assertAllEqual([-np.inf] * 3, self.evaluate(math_ops.reduce_max(x, 0)))

    @test_util.run_deprecated_v1
    def testAllAny(self):
        x = np.array([[True, False], [True, True]])
        self.assertAllEqual([True, False], self.evaluate(math_ops.reduce_all(x, 0)))
        self.assertAllEqual([True, True], self.evaluate(math_ops.reduce_any(x, 1)))

    @test_util.run_deprecated_v1
    def testLogSumExpAndEuclidean(self):
        x = np.array([[1.0, 2.0], [3.0, 1000.0]], np.float32)
        self.assertAllClose([2.3132617, 1000.0], self.evaluate(math_ops.reduce_logsumexp(x, 1)))
        self.assertAllClose(
            [np.sqrt(10.0), np.sqrt(4.0 + 1e6)],
            self.evaluate(math_ops.reduce_euclidean_norm(x, 0)),
        )

    @test_util.run_deprecated_v1
    def testInt64Axis(self):
        x = np.ones((2, 3), np.float32)
        self.assertAllEqual(
            [2.0, 2.0, 2.0],
            self.evaluate(math_ops.reduce_sum(x, constant_op.constant(0, dtypes.int64))),
        )

    @test_util.run_deprecated_v1
    def testUnknownRankStaticShape(self):
        p = array_ops.placeholder(dtypes.float32)
        self.assertEqual(None, math_ops.reduce_sum(p, 0).get_shape().ndims)
        p2 = array_ops.placeholder(dtypes.float32, [None, 3])
        self.assertEqual([3], math_ops.reduce_sum(p2, 0).get_shape().as_list())

    @test_util.run_deprecated_v1
    def testScalarGradient(self):
        x = constant_op.constant(3.0)
        for f in (math_ops.reduce_sum, math_ops.reduce_mean, math_ops.reduce_prod):
            self.assertEqual(1.0, self.evaluate(gradients_impl.gradients(f(x), x)[0]))

    @test_util.run_deprecated_v1
    def testComplexSum(self):
        x = np.array([1 + 2j, 3 - 1j], np.complex64)
        self.assertAllClose(4 + 1j, self.evaluate(math_ops.reduce_sum(x)))

    @test_util.run_deprecated_v1
    def testArgMinMax(self):
        x = np.array([[1, 5, 3], [9, 0, 2]], np.float32)
        self.assertAllEqual([1, 0], self.evaluate(math_ops.argmax(x, 1)))
        self.assertAllEqual([0, 1, 1], self.evaluate(math_ops.arg_min(x, 0)))


class CwiseProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testDivisions(self):
        x = np.array([-7, 7, -6], np.int32)
        y = np.array([2, -2, 4], np.int32)
        self.assertAllEqual(x // y, self.evaluate(math_ops.floordiv(x, y)))
        self.assertAllEqual(np.fmod(x, y), self.evaluate(math_ops.truncatemod(x, y)))
        self.assertAllEqual(np.mod(x, y), self.evaluate(math_ops.floormod(x, y)))
        self.assertAllEqual(
            np.trunc(x / y).astype(np.int32), self.evaluate(math_ops.truncatediv(x, y))
        )

    @test_util.run_deprecated_v1
    def testIntDivByZero(self):
        with self.assertRaisesOpError("Integer division by zero"):
            self.evaluate(math_ops.floordiv(np.array([1], np.int32), np.array([0], np.int32)))

    @test_util.run_deprecated_v1
    def testDivNoNanXlogy(self):
        self.assertAllEqual([0.0, 2.0], self.evaluate(math_ops.div_no_nan([1.0, 4.0], [0.0, 2.0])))
        self.assertAllClose(
            [0.0, 2 * np.log(3.0)], self.evaluate(math_ops.xlogy([0.0, 2.0], [0.0, 3.0]))
        )

    @test_util.run_deprecated_v1
    def testBroadcastError(self):
        with self.assertRaises(ValueError):
            math_ops.add(np.ones((2, 3)), np.ones((4, 3)))
        p = array_ops.placeholder(dtypes.float32)
        with self.cached_session() as s:
            with self.assertRaisesOpError("Incompatible shapes"):
                s.run(p + np.ones((4, 3), np.float32), {p: np.ones((2, 3))})

    @test_util.run_deprecated_v1
    def testPowIntNegative(self):
        with self.assertRaisesOpError("Integers to negative integer powers are not allowed"):
            self.evaluate(math_ops.pow(np.array([2], np.int32), np.array([-1], np.int32)))

    @test_util.run_deprecated_v1
    def testUnaryFamily(self):
        x = np.array([0.5, 1.5, -2.5], np.float32)
        self.assertAllClose(np.sign(x), self.evaluate(math_ops.sign(x)))
        self.assertAllEqual([0.0, 2.0, -2.0], self.evaluate(math_ops.round(x)))
        self.assertAllEqual([0.0, 2.0, -2.0], self.evaluate(math_ops.rint(x)))
        self.assertAllClose(1.0 / x, self.evaluate(math_ops.reciprocal(x)))
        self.assertAllClose(np.expm1(x), self.evaluate(math_ops.expm1(x)))
        self.assertAllClose(x * x, self.evaluate(math_ops.square(x)))

    @test_util.run_deprecated_v1
    def testComparisonsAndLogical(self):
        x = np.array([1, 2, 3])
        self.assertAllEqual([False, True, False], self.evaluate(math_ops.equal(x, 2)))
        self.assertAllEqual(
            [True, False, True],
            self.evaluate(math_ops.logical_xor([True, False, False], [False, False, True])),
        )
        self.assertAllEqual([True, False], self.evaluate(math_ops.is_finite([1.0, np.inf])))

    @test_util.run_deprecated_v1
    def testSelectAndWhere(self):
        c = np.array([True, False])
        x = np.array([[1, 2], [3, 4]])
        y = np.array([[5, 6], [7, 8]])
        self.assertAllEqual([[1, 2], [7, 8]], self.evaluate(array_ops.where(c, x, y)))
        with self.assertRaises(ValueError):
            array_ops.where(np.array([True, False, True]), x, y)

    @test_util.run_deprecated_v1
    def testPowGradNaN(self):
        x = constant_op.constant([0.0, 2.0])
        y = constant_op.constant([2.0, 3.0])
        gx, gy = gradients_impl.gradients(math_ops.pow(x, y), [x, y])
        self.assertAllClose([0.0, 12.0], self.evaluate(gx))
        self.assertAllClose([0.0, 8.0 * np.log(2.0)], self.evaluate(gy))

    @test_util.run_deprecated_v1
    def testComplexAbsAngle(self):
        z = np.array([3 + 4j], np.complex64)
        self.assertAllClose([5.0], self.evaluate(math_ops.abs(z)))
        self.assertAllClose(np.angle(z), self.evaluate(math_ops.angle(z)))
        self.assertEqual(dtypes.float32, math_ops.abs(z).dtype)

    @test_util.run_deprecated_v1
    def testAddN(self):
        self.assertAllEqual([6, 6], self.evaluate(math_ops.add_n([[1, 1], [2, 2], [3, 3]])))
        with self.assertRaises(ValueError):
            math_ops.add_n([])

    @test_util.run_deprecated_v1
    def testClipByValue(self):
        self.assertAllEqual(
            [2, 2, 3, 4, 4], self.evaluate(math_ops.clip_by_value([1, 2, 3, 4, 5], 2, 4))
        )

    @test_util.run_deprecated_v1
    def testSquaredDifferenceComplex(self):
        x = np.array([1 + 1j], np.complex64)
        y = np.array([0j], np.complex64)
        self.assertAllClose([2.0 + 0j], self.evaluate(math_ops.squared_difference(x, y)))

    @test_util.run_deprecated_v1
    def testBitwiseInvert(self):
        from tensorflow.python.ops import bitwise_ops

        self.assertAllEqual(
            [-1, -2], self.evaluate(bitwise_ops.invert(np.array([0, 1], np.int32)))
        )
        self.assertAllEqual(
            [4],
            self.evaluate(bitwise_ops.left_shift(np.array([1], np.int8), np.array([2], np.int8))),
        )


class ArrayProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConcatNegAxisAndShape(self):
        a = array_ops.placeholder(dtypes.float32, [None, 3])
        b = array_ops.placeholder(dtypes.float32, [2, 3])
        c = array_ops.concat([a, b], -2)
        self.assertEqual([None, 3], c.get_shape().as_list())
        c2 = array_ops.concat([b, b], 1)
        self.assertEqual([2, 6], c2.get_shape().as_list())

    @test_util.run_deprecated_v1
    def testConcatEmptyList(self):
        with self.assertRaises(ValueError):
            array_ops.concat([], 0)

    @test_util.run_deprecated_v1
    def testConcatRankMismatch(self):
        with self.assertRaises(ValueError):
            array_ops.concat([np.ones((2, 3)), np.ones((2,))], 0)

    @test_util.run_deprecated_v1
    def testConcatBadAxisRuntime(self):
        p = array_ops.placeholder(dtypes.int32)
        with self.cached_session() as s:
            with self.assertRaisesOpError(
                "ConcatOp : Expected concatenating dimensions in the range"
            ):
                s.run(array_ops.concat([np.ones((2, 3)), np.ones((2, 3))], p), {p: 3})

    @test_util.run_deprecated_v1
    def testConcatOffset(self):
        off = array_ops.concat_offset(1, [[2, 3, 4], [2, 7, 4], [2, 5, 4]])
        self.assertAllEqual([[0, 0, 0], [0, 3, 0], [0, 10, 0]], self.evaluate(off))

    @test_util.run_deprecated_v1
    def testSplitVariants(self):
        x = np.arange(12).reshape(3, 4)
        a, b = array_ops.split(x, 2, axis=1)
        self.assertAllEqual(x[:, :2], self.evaluate(a))
        parts = array_ops.split(x, [1, -1], axis=0)
        self.assertAllEqual(x[1:], self.evaluate(parts[1]))
        with self.assertRaises(ValueError):
            array_ops.split(x, 5, axis=1)

    @test_util.run_deprecated_v1
    def testSplitUnknownSizeNeedsNum(self):
        with self.assertRaises(ValueError):
            array_ops.split(np.arange(6), array_ops.placeholder(dtypes.int32))

    @test_util.run_deprecated_v1
    def testSliceMinusOne(self):
        x = np.arange(24).reshape(2, 3, 4)
        self.assertAllEqual(
            x[1:, :, 2:], self.evaluate(array_ops.slice(x, [1, 0, 2], [-1, -1, -1]))
        )
        with self.assertRaisesOpError("Expected size"):
            p = array_ops.placeholder(dtypes.int32)
            with self.cached_session() as s:
                s.run(array_ops.slice(x, p, [2, 2, 2]), {p: [1, 0, 0]})

    @test_util.run_deprecated_v1
    def testStridedSlice(self):
        x = np.arange(24).reshape(2, 3, 4)
        t = constant_op.constant(x)
        self.assertAllEqual(x[..., ::-2], self.evaluate(t[..., ::-2]))
        self.assertAllEqual(x[:, np.newaxis, 1], self.evaluate(t[:, array_ops.newaxis, 1]))
        self.assertEqual([2, 1, 4], t[:, array_ops.newaxis, 1].get_shape().as_list())

    @test_util.run_deprecated_v1
    def testReshapeInfer(self):
        x = np.arange(6)
        self.assertEqual([2, 3], array_ops.reshape(x, [-1, 3]).get_shape().as_list())
        with self.assertRaises(ValueError):
            array_ops.reshape(x, [-1, -1])
        with self.assertRaises(ValueError):
            array_ops.reshape(x, [4, -1])

    @test_util.run_deprecated_v1
    def testGatherAxisBatchDims(self):
        params = np.arange(24).reshape(2, 3, 4)
        idx = np.array([[0, 2], [1, 1]])
        self.assertAllEqual(
            np.take(params, [2, 0], axis=2),
            self.evaluate(array_ops.gather(params, [2, 0], axis=2)),
        )
        want = np.stack([params[b][idx[b]] for b in range(2)])
        self.assertAllEqual(want, self.evaluate(array_ops.gather(params, idx, batch_dims=1)))

    @test_util.run_deprecated_v1
    def testGatherOutOfRange(self):
        with self.assertRaisesOpError(r"indices\[1\] = 7 is not in \[0, 3\)"):
            self.evaluate(array_ops.gather([1, 2, 3], [0, 7]))

    @test_util.run_deprecated_v1
    def testGatherGradTensorAxis(self):
        params = constant_op.constant(np.arange(6.0).reshape(2, 3))
        axis = constant_op.constant(1)
        y = array_ops.gather(params, [2, 2], axis=axis)
        g = gradients_impl.gradients(y, params)[0]
        self.assertAllEqual([[0, 0, 2], [0, 0, 2]], self.evaluate(g))

    @test_util.run_deprecated_v1
    def testScatterNdFamily(self):
        idx = [[0], [2]]
        upd = [1.0, 2.0]
        self.assertAllEqual([1, 0, 2, 0], self.evaluate(array_ops.scatter_nd(idx, upd, [4])))
        t = constant_op.constant([5.0, 5.0, 5.0, 5.0])
        self.assertAllEqual(
            [1, 5, 2, 5], self.evaluate(array_ops.tensor_scatter_nd_update(t, idx, upd))
        )
        self.assertAllEqual(
            [6, 5, 7, 5], self.evaluate(array_ops.tensor_scatter_nd_add(t, idx, upd))
        )
        v = variables.Variable([0.0, 0.0, 0.0, 0.0])
        self.evaluate(v.initializer)
        self.evaluate(state_ops.scatter_nd_add(v, idx, upd))
        self.assertAllEqual([1, 0, 2, 0], self.evaluate(v))

    @test_util.run_deprecated_v1
    def testScatterNdDuplicatesAdd(self):
        self.assertAllEqual(
            [3.0, 0.0], self.evaluate(array_ops.scatter_nd([[0], [0]], [1.0, 2.0], [2]))
        )

    @test_util.run_deprecated_v1
    def testScatterNdBadIndex(self):
        with self.assertRaisesOpError("indices"):
            self.evaluate(array_ops.tensor_scatter_nd_update([1, 2], [[5]], [3]))

    @test_util.run_deprecated_v1
    def testBooleanMaskAndSearch(self):
        x = np.arange(6).reshape(3, 2)
        self.assertAllEqual(
            x[[True, False, True]], self.evaluate(array_ops.boolean_mask(x, [True, False, True]))
        )
        self.assertAllEqual(
            [[1, 2]], self.evaluate(array_ops.searchsorted([[1.0, 2.0, 3.0]], [[1.5, 2.5]]))
        )
        self.assertAllClose([0.0, 0.5, 1.0], self.evaluate(math_ops.linspace(0.0, 1.0, 3)))

    @test_util.run_deprecated_v1
    def testShapeOpsOnTensorShape(self):
        s = tensor_shape.TensorShape([2, 3])
        self.assertAllEqual([2, 3], self.evaluate(constant_op.constant(s)))
        self.assertAllEqual(np.zeros((2, 3)), self.evaluate(array_ops.zeros(s)))
        self.assertAllEqual(3, self.evaluate(constant_op.constant(s[1])))


if __name__ == "__main__":
    test.main()
