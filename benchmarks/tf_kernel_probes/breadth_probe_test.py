"""conv variants, element-wise special functions, array manipulation, matmul and
reduction variants, parsing extras, control-flow gradients, initializer statistics:
a third batch condensed from what TF's kernel tests check; written for the
measurement, graph mode."""

import numpy as np
from tensorflow.python.framework import (
    constant_op,
    dtypes,
    test_util,
)
from tensorflow.python.ops import (
    array_ops,
    array_ops_stack,
    gradients_impl,
    init_ops,
    math_ops,
    nn_impl,
    nn_ops,
    parsing_ops,
    tensor_array_ops,
    while_loop,
)
from tensorflow.python.ops import cond as cond_lib
from tensorflow.python.platform import test


class ConvVariantProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConv1D(self):
        x = np.arange(10, dtype=np.float32).reshape(1, 5, 2)
        w = np.ones((2, 2, 1), np.float32)
        out = self.evaluate(nn_ops.conv1d(x, w, 1, "VALID"))
        want = [x[0, i : i + 2].sum() for i in range(4)]
        self.assertAllClose(want, out[0, :, 0])

    @test_util.run_deprecated_v1
    def testSeparableConv2D(self):
        x = np.random.rand(1, 4, 4, 2).astype(np.float32)
        dw = np.random.rand(2, 2, 2, 1).astype(np.float32)
        pw = np.random.rand(1, 1, 2, 3).astype(np.float32)
        a = nn_impl.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "VALID")
        b = nn_ops.conv2d(
            nn_impl.depthwise_conv2d(x, dw, [1, 1, 1, 1], "VALID"), pw, [1, 1, 1, 1], "VALID"
        )
        self.assertAllClose(self.evaluate(b), self.evaluate(a), rtol=1e-5)

    @test_util.run_deprecated_v1
    def testAtrousConv2DMatchesDilation(self):
        x = np.random.rand(1, 7, 7, 1).astype(np.float32)
        w = np.random.rand(3, 3, 1, 2).astype(np.float32)
        a = nn_ops.atrous_conv2d(x, w, 2, "SAME")
        b = nn_ops.conv2d(x, w, [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1])
        self.assertAllClose(self.evaluate(b), self.evaluate(a), rtol=1e-5)

    @test_util.run_deprecated_v1
    def testConv3DTransposeShape(self):
        x = np.ones((1, 2, 2, 2, 3), np.float32)
        w = np.ones((2, 2, 2, 4, 3), np.float32)
        out = nn_ops.conv3d_transpose(x, w, [1, 4, 4, 4, 4], [1, 2, 2, 2, 1], "SAME")
        self.assertEqual((1, 4, 4, 4, 4), self.evaluate(out).shape)

    @test_util.run_deprecated_v1
    def testBiasAddNCHWAndGrad(self):
        x = constant_op.constant(np.zeros((2, 3, 2, 2), np.float32))
        b = constant_op.constant([1.0, 2.0, 3.0])
        y = nn_ops.bias_add(x, b, data_format="NCHW")
        self.assertAllEqual([1.0, 2.0, 3.0], self.evaluate(y)[0, :, 0, 0])
        self.assertAllEqual([8.0, 8.0, 8.0], self.evaluate(gradients_impl.gradients(y, b)[0]))


class SpecialMathProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testFloorModAndTruncateMod(self):
        self.assertAllEqual([1, -1], self.evaluate(math_ops.floormod([-5, 5], [3, -3])))
        self.assertAllEqual([-2, 2], self.evaluate(math_ops.truncatemod([-5, 5], [3, -3])))
        self.assertAllEqual([-1, -1], self.evaluate(math_ops.truncatediv([-5, 5], [3, -3])))

    @test_util.run_deprecated_v1
    def testIgammaAndBetainc(self):
        # closed forms: P(1, x) = 1 - e^-x, P(2, x) = 1 - e^-x (1 + x); I_x(1, b) = 1 -
        # (1 - x)^b, I_x(a, 1) = x^a
        x = np.array([0.3, 1.5, 7.0])
        self.assertAllClose(1 - np.exp(-x), self.evaluate(math_ops.igamma(1.0, x)))
        self.assertAllClose(np.exp(-x) * (1 + x), self.evaluate(math_ops.igammac(2.0, x)))
        u = x / 8
        self.assertAllClose(1 - (1 - u) ** 3, self.evaluate(math_ops.betainc(1.0, 3.0, u)))
        self.assertAllClose(u**2.5, self.evaluate(math_ops.betainc(2.5, 1.0, u)))

    @test_util.run_deprecated_v1
    def testLgammaDigammaErf(self):
        import math

        x = np.array([0.5, 1.0, 3.5, 10.0])
        self.assertAllClose([math.lgamma(v) for v in x], self.evaluate(math_ops.lgamma(x)))
        euler = 0.5772156649015329
        self.assertAllClose(
            [-euler - 2 * math.log(2), -euler], self.evaluate(math_ops.digamma(x[:2]))
        )
        self.assertAllClose([math.erfc(v / 4) for v in x], self.evaluate(math_ops.erfc(x / 4)))

    @test_util.run_deprecated_v1
    def testRoundHalfToEven(self):
        self.assertAllEqual(
            [0.0, 2.0, 2.0, -2.0], self.evaluate(math_ops.round([0.5, 1.5, 2.5, -2.5]))
        )

    @test_util.run_deprecated_v1
    def testSignAndReciprocalInt(self):
        self.assertAllEqual([-1, 0, 1], self.evaluate(math_ops.sign([-3, 0, 7])))
        self.assertAllClose([0.5, -0.25], self.evaluate(math_ops.reciprocal([2.0, -4.0])))

    @test_util.run_deprecated_v1
    def testAtan2Grad(self):
        y, x = constant_op.constant(1.0), constant_op.constant(2.0)
        gy, gx = gradients_impl.gradients(math_ops.atan2(y, x), [y, x])
        self.assertAllClose([0.4, -0.2], self.evaluate([gy, gx]))


class ArrayManipProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testMirrorPadModesAndGrad(self):
        x = constant_op.constant([[1.0, 2.0, 3.0]])
        r = array_ops.pad(x, [[0, 0], [2, 2]], "REFLECT")
        s = array_ops.pad(x, [[0, 0], [2, 2]], "SYMMETRIC")
        self.assertAllEqual([[3, 2, 1, 2, 3, 2, 1]], self.evaluate(r))
        self.assertAllEqual([[2, 1, 1, 2, 3, 3, 2]], self.evaluate(s))
        self.assertAllEqual([[2, 3, 2]], self.evaluate(gradients_impl.gradients(r, x)[0]))

    @test_util.run_deprecated_v1
    def testSplitMinusOneSize(self):
        a, b, c = array_ops.split(np.arange(10), [2, -1, 3])
        self.assertAllEqual([2, 3, 4, 5, 6], self.evaluate(b))
        self.assertEqual([5], b.get_shape().as_list())

    @test_util.run_deprecated_v1
    def testUnstackAxisAndError(self):
        parts = array_ops_stack.unstack(np.arange(6).reshape(2, 3), axis=1)
        self.assertEqual(3, len(parts))
        with self.assertRaises(ValueError):
            array_ops_stack.unstack(array_ops.placeholder(dtypes.float32, [None, 2]))

    @test_util.run_deprecated_v1
    def testTileGradient(self):
        x = constant_op.constant([[1.0, 2.0]])
        g = gradients_impl.gradients(array_ops.tile(x, [3, 2]), x)[0]
        self.assertAllEqual([[6.0, 6.0]], self.evaluate(g))

    @test_util.run_deprecated_v1
    def testReverseSequence(self):
        x = np.arange(8).reshape(2, 4)
        out = array_ops.reverse_sequence(x, [3, 1], seq_axis=1, batch_axis=0)
        self.assertAllEqual([[2, 1, 0, 3], [4, 5, 6, 7]], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testSpaceToDepthAndBack(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
        y = array_ops.space_to_depth(x, 2)
        self.assertEqual([1, 2, 2, 4], y.get_shape().as_list())
        self.assertAllEqual(x, self.evaluate(array_ops.depth_to_space(y, 2)))

    @test_util.run_deprecated_v1
    def testOneHotOffOnAxis(self):
        out = array_ops.one_hot([0, 2, -1], 3, on_value=5, off_value=-1, axis=0)
        self.assertAllEqual([[5, -1, -1], [-1, -1, -1], [-1, 5, -1]], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testMatrixBandPartAndDiag(self):
        x = np.ones((3, 3), np.float32)
        self.assertAllEqual(
            np.tril(x) - np.tril(x, -2), self.evaluate(array_ops.matrix_band_part(x, 1, 0))
        )
        self.assertAllEqual([[1, 0], [0, 2]], self.evaluate(array_ops.matrix_diag([1, 2])))


class MatmulReduceProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testTensordotAxes(self):
        a, b = np.random.rand(2, 3, 4), np.random.rand(4, 3, 5)
        out = math_ops.tensordot(a, b, [[1, 2], [1, 0]])
        self.assertAllClose(np.tensordot(a, b, [[1, 2], [1, 0]]), self.evaluate(out))

    @test_util.run_deprecated_v1
    def testBatchMatmulAdjoint(self):
        a = (np.random.rand(2, 3, 3) + 1j * np.random.rand(2, 3, 3)).astype(np.complex64)
        out = math_ops.matmul(a, a, adjoint_b=True)
        self.assertAllClose(a @ np.conj(a.transpose(0, 2, 1)), self.evaluate(out), rtol=1e-5)

    @test_util.run_deprecated_v1
    def testReduceStdVariance(self):
        x = np.array([[1.0, 2.0], [3.0, 7.0]], np.float32)
        self.assertAllClose(x.std(0), self.evaluate(math_ops.reduce_std(x, 0)))
        self.assertAllClose(x.var(), self.evaluate(math_ops.reduce_variance(x)))

    @test_util.run_deprecated_v1
    def testCumsumExclusiveReverse(self):
        out = math_ops.cumsum([1, 2, 3], exclusive=True, reverse=True)
        self.assertAllEqual([5, 3, 0], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testReduceProdGradientWithZero(self):
        x = constant_op.constant([2.0, 0.0, 3.0])
        g = gradients_impl.gradients(math_ops.reduce_prod(x), x)[0]
        self.assertAllEqual([0.0, 6.0, 0.0], self.evaluate(g))


class ParseAndFlowProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testDecodeBase64AndJSON(self):
        from tensorflow.python.ops import string_ops

        enc = string_ops.encode_base64(["hi?", ""])
        self.assertAllEqual([b"aGk_", b""], self.evaluate(enc))
        self.assertAllEqual([b"hi?", b""], self.evaluate(string_ops.decode_base64(enc)))

    @test_util.run_deprecated_v1
    def testSparseFeature(self):
        from tensorflow.core.example import example_pb2

        ex = example_pb2.Example()
        ex.features.feature["ix"].int64_list.value.extend([3, 0])
        ex.features.feature["v"].float_list.value.extend([1.5, 2.5])
        out = parsing_ops.parse_single_example(
            ex.SerializeToString(),
            {"sp": parsing_ops.SparseFeature("ix", "v", dtypes.float32, 5)},
        )["sp"]
        dense = self.evaluate(out)
        self.assertAllEqual([[0], [3]], dense.indices)
        self.assertAllEqual([2.5, 1.5], dense.values)
        self.assertAllEqual([5], dense.dense_shape)

    @test_util.run_deprecated_v1
    def testCondInWhileGradient(self):
        x = constant_op.constant(3.0)

        def body(i, v):
            v = cond_lib.cond(math_ops.less(i, 2), lambda: v * x, lambda: v + x)
            return i + 1, v

        _, y = while_loop.while_loop(lambda i, v: i < 4, body, [0, constant_op.constant(1.0)])
        # y = x^2 + 2x: dy/dx = 2x + 2
        self.assertAllClose(8.0, self.evaluate(gradients_impl.gradients(y, x)[0]))

    @test_util.run_deprecated_v1
    def testTensorArrayReadTwiceCleared(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2).unstack([1.0, 2.0])
        a = ta.read(0)
        with self.assertRaisesOpError("clear_after_read"):
            self.evaluate(a + ta.read(0))

    @test_util.run_deprecated_v1
    def testTensorArrayInWhileGradient(self):
        x = constant_op.constant([1.0, 2.0, 3.0])
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3, clear_after_read=False)
        ta = ta.unstack(x)

        def body(i, acc):
            return i + 1, acc + ta.read(i) * ta.read(i)

        _, s = while_loop.while_loop(lambda i, a: i < 3, body, [0, 0.0])
        self.assertAllClose([2.0, 4.0, 6.0], self.evaluate(gradients_impl.gradients(s, x)[0]))

    @test_util.run_deprecated_v1
    def testNestedWhileGradient(self):
        x = constant_op.constant(2.0)

        def outer(i, v):
            _, w = while_loop.while_loop(lambda j, u: j < 2, lambda j, u: (j + 1, u * x), [0, v])
            return i + 1, w

        _, y = while_loop.while_loop(lambda i, v: i < 2, outer, [0, constant_op.constant(1.0)])
        self.assertAllClose(4 * 2.0**3, self.evaluate(gradients_impl.gradients(y, x)[0]))


class InitStatsProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testGlorotUniformBound(self):
        v = self.evaluate(init_ops.glorot_uniform_initializer(seed=1)([200, 100]))
        limit = np.sqrt(6.0 / 300)
        self.assertLessEqual(np.abs(v).max(), limit)
        self.assertGreater(np.abs(v).max(), 0.95 * limit)

    @test_util.run_deprecated_v1
    def testVarianceScalingTruncatedStd(self):
        init = init_ops.variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed=2)
        v = self.evaluate(init([400, 300]))
        self.assertLess(abs(v.std() - np.sqrt(2.0 / 400)), 0.003)

    @test_util.run_deprecated_v1
    def testRandomNormalInitializerDtypeError(self):
        with self.assertRaises((ValueError, TypeError)):
            init_ops.random_normal_initializer(dtype=dtypes.int32)([2])

    @test_util.run_deprecated_v1
    def testUnitScalingFactorBad(self):
        with self.assertRaises(ValueError):
            init_ops.variance_scaling_initializer(scale=-1.0)


if __name__ == "__main__":
    test.main()
