"""conv, pooling, random and init behaviours, condensed from what TF's kernel tests
check; written for the measurement, graph mode."""

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
    gradients_impl,
    image_ops,
    init_ops,
    math_ops,
    nn_ops,
    random_ops,
    stateless_random_ops,
    variable_scope,
)
from tensorflow.python.platform import test


def _np_conv2d_valid(x, w, stride=1):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, o), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride : i * stride + kh, j * stride : j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


class ConvProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConv2DValid(self):
        x = np.random.randn(1, 5, 5, 2).astype(np.float32)
        w = np.random.randn(3, 3, 2, 4).astype(np.float32)
        self.assertAllClose(
            _np_conv2d_valid(x, w, 2),
            self.evaluate(nn_ops.conv2d(x, w, [1, 2, 2, 1], "VALID")),
            rtol=1e-4,
            atol=1e-4,
        )

    @test_util.run_deprecated_v1
    def testConv2DExplicitPadding(self):
        x = np.random.randn(1, 4, 4, 1).astype(np.float32)
        w = np.random.randn(2, 2, 1, 1).astype(np.float32)
        pads = [[0, 0], [1, 2], [0, 1], [0, 0]]
        xp = np.pad(x, pads)
        self.assertAllClose(
            _np_conv2d_valid(xp, w),
            self.evaluate(nn_ops.conv2d(x, w, [1, 1, 1, 1], pads)),
            rtol=1e-4,
            atol=1e-4,
        )

    @test_util.run_deprecated_v1
    def testConvolutionGeneric(self):
        x = np.random.randn(1, 5, 5, 2).astype(np.float32)
        w = np.random.randn(3, 3, 2, 4).astype(np.float32)
        self.assertAllClose(
            _np_conv2d_valid(x, w),
            self.evaluate(nn_ops.convolution(x, w, "VALID")),
            rtol=1e-4,
            atol=1e-4,
        )

    @test_util.run_deprecated_v1
    def testConv2DBadStrides(self):
        x = np.ones((1, 4, 4, 1), np.float32)
        w = np.ones((2, 2, 1, 1), np.float32)
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(nn_ops.conv2d(x, w, [2, 1, 1, 1], "VALID"))

    @test_util.run_deprecated_v1
    def testConv2DFilterTooLarge(self):
        x = np.ones((1, 2, 2, 1), np.float32)
        w = np.ones((3, 3, 1, 1), np.float32)
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(nn_ops.conv2d(x, w, [1, 1, 1, 1], "VALID"))

    @test_util.run_deprecated_v1
    def testConv2DChannelMismatch(self):
        x = np.ones((1, 4, 4, 3), np.float32)
        w = np.ones((2, 2, 2, 1), np.float32)
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(nn_ops.conv2d(x, w, [1, 1, 1, 1], "VALID"))

    @test_util.run_deprecated_v1
    def testConv2DGroupedChannels(self):
        x = np.random.randn(1, 4, 4, 4).astype(np.float32)
        w = np.random.randn(2, 2, 2, 4).astype(np.float32)
        got = self.evaluate(nn_ops.conv2d(x, w, [1, 1, 1, 1], "VALID"))
        want = np.concatenate(
            [_np_conv2d_valid(x[..., :2], w[..., :2]), _np_conv2d_valid(x[..., 2:], w[..., 2:])],
            -1,
        )
        self.assertAllClose(want, got, rtol=1e-4, atol=1e-4)

    @test_util.run_deprecated_v1
    def testConv2DDilation(self):
        x = np.random.randn(1, 6, 6, 1).astype(np.float32)
        w = np.random.randn(2, 2, 1, 1).astype(np.float32)
        wd = np.zeros((3, 3, 1, 1), np.float32)
        wd[::2, ::2] = w
        self.assertAllClose(
            _np_conv2d_valid(x, wd),
            self.evaluate(nn_ops.conv2d(x, w, [1, 1, 1, 1], "VALID", dilations=[1, 2, 2, 1])),
            rtol=1e-4,
            atol=1e-4,
        )

    @test_util.run_deprecated_v1
    def testConv2DBackpropInputShape(self):
        w = np.random.randn(3, 3, 2, 4).astype(np.float32)
        dy = np.random.randn(1, 3, 3, 4).astype(np.float32)
        dx = nn_ops.conv2d_backprop_input([1, 5, 5, 2], w, dy, [1, 1, 1, 1], "VALID")
        self.assertEqual((1, 5, 5, 2), self.evaluate(dx).shape)

    @test_util.run_deprecated_v1
    def testDepthwise(self):
        x = np.random.randn(1, 3, 3, 2).astype(np.float32)
        w = np.random.randn(2, 2, 2, 1).astype(np.float32)
        got = self.evaluate(nn_ops.depthwise_conv2d_native(x, w, [1, 1, 1, 1], "VALID"))
        want = np.concatenate(
            [_np_conv2d_valid(x[..., c : c + 1], w[:, :, c : c + 1, :]) for c in range(2)], -1
        )
        self.assertAllClose(want, got, rtol=1e-4, atol=1e-4)

    @test_util.run_deprecated_v1
    def testConv3DAndConv1D(self):
        x = np.ones((1, 3, 3, 3, 1), np.float32)
        w = np.ones((2, 2, 2, 1, 1), np.float32)
        self.assertAllEqual(
            np.full((1, 2, 2, 2, 1), 8.0),
            self.evaluate(nn_ops.conv3d(x, w, [1, 1, 1, 1, 1], "VALID")),
        )
        x1 = np.ones((1, 5, 1), np.float32)
        w1 = np.ones((2, 1, 1), np.float32)
        self.assertAllEqual(
            np.full((1, 4, 1), 2.0), self.evaluate(nn_ops.conv1d(x1, w1, 1, "VALID"))
        )


class PoolProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testMaxPoolSame(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
        self.assertAllEqual(
            [[[[5], [7]], [[13], [15]]]],
            self.evaluate(nn_ops.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")),
        )

    @test_util.run_deprecated_v1
    def testAvgPoolSamePartialWindow(self):
        x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
        got = self.evaluate(nn_ops.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME"))
        self.assertAllClose([[[[2.0], [3.5]], [[6.5], [8.0]]]], got)

    @test_util.run_deprecated_v1
    def testPoolV2TensorKsize(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
        k = constant_op.constant([1, 2, 2, 1])
        self.assertAllEqual(
            [[[[5], [7]], [[13], [15]]]],
            self.evaluate(nn_ops.max_pool_v2(x, k, [1, 2, 2, 1], "VALID")),
        )
        self.assertAllEqual(
            [[[[2.5], [4.5]], [[10.5], [12.5]]]],
            self.evaluate(nn_ops.avg_pool_v2(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")),
        )

    @test_util.run_deprecated_v1
    def testInvalidKsize(self):
        x = np.ones((1, 4, 4, 1), np.float32)
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(nn_ops.max_pool(x, [1, 0, 2, 1], [1, 1, 1, 1], "VALID"))
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(nn_ops.max_pool(x, [1, 5, 5, 1], [1, 1, 1, 1], "VALID"))

    @test_util.run_deprecated_v1
    def testPoolDepth(self):
        x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
        self.assertAllEqual(
            [[[[1, 3], [5, 7]]]],
            self.evaluate(nn_ops.max_pool(x, [1, 1, 1, 2], [1, 1, 1, 2], "VALID")),
        )

    @test_util.run_deprecated_v1
    def testMaxPoolWithArgmax(self):
        x = np.array([1.0, 2.0, 3.0, 4.0], np.float32).reshape(1, 2, 2, 1)
        out, argmax = nn_ops.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        o, a = self.evaluate([out, argmax])
        self.assertAllEqual([[[[4.0]]]], o)
        self.assertAllEqual([[[[3]]]], a)

    @test_util.run_deprecated_v1
    def testMaxPoolGradTies(self):
        x = constant_op.constant(np.ones((1, 2, 2, 1), np.float32))
        y = nn_ops.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        g = gradients_impl.gradients(y, x)[0]
        self.assertAllEqual([[[[1.0], [0.0]], [[0.0], [0.0]]]], self.evaluate(g))

    @test_util.run_deprecated_v1
    def testMaxPoolBf16(self):
        x = constant_op.constant(
            np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1), dtype=dtypes.bfloat16
        )
        y = nn_ops.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        self.assertEqual(3.0, float(self.evaluate(math_ops.cast(y, dtypes.float32)).ravel()[0]))

    @test_util.run_deprecated_v1
    def testPool3D(self):
        x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2, 1)
        self.assertAllEqual(
            [[[[[7.0]]]]],
            self.evaluate(nn_ops.max_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")),
        )
        self.assertAllEqual(
            [[[[[3.5]]]]],
            self.evaluate(nn_ops.avg_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")),
        )

    @test_util.run_deprecated_v1
    def testPoolNCHWOnCPU(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
        with self.assertRaises(
            (ValueError, errors_impl.InvalidArgumentError, errors_impl.UnimplementedError)
        ):
            self.evaluate(
                nn_ops.max_pool(x, [1, 1, 2, 2], [1, 1, 2, 2], "VALID", data_format="NCHW")
            )


class RandomInitProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testSeededReproducible(self):
        vals = []
        for _ in range(2):
            with ops.Graph().as_default():
                random_seed.set_random_seed(1)
                t = random_ops.random_uniform([5], seed=2)
                with self.session() as s:
                    vals.append(s.run(t))
        self.assertAllEqual(vals[0], vals[1])

    @test_util.run_deprecated_v1
    def testRangeAndDtype(self):
        x = self.evaluate(
            random_ops.random_uniform([1000], minval=-2, maxval=3, dtype=dtypes.int32, seed=3)
        )
        self.assertTrue(x.min() >= -2 and x.max() < 3)
        with self.assertRaises(ValueError):
            random_ops.random_uniform([2], dtype=dtypes.int32)

    @test_util.run_deprecated_v1
    def testTruncatedNormalBounds(self):
        x = self.evaluate(random_ops.truncated_normal([10000], stddev=2.0, seed=4))
        self.assertLessEqual(np.abs(x).max(), 4.0)

    @test_util.run_deprecated_v1
    def testMultinomialShape(self):
        s = random_ops.multinomial([[0.0, 0.0], [0.0, -1e9]], 50, seed=5)
        v = self.evaluate(s)
        self.assertEqual((2, 50), v.shape)
        self.assertTrue(np.all(v[1] == 0))

    @test_util.run_deprecated_v1
    def testRandomShuffleAndCrop(self):
        x = self.evaluate(random_ops.random_shuffle(np.arange(10), seed=6))
        self.assertEqual(list(range(10)), sorted(x.tolist()))
        c = self.evaluate(random_ops.random_crop(np.ones((5, 5, 3)), [2, 2, 3], seed=7))
        self.assertEqual((2, 2, 3), c.shape)

    @test_util.run_deprecated_v1
    def testRandomGammaPoisson(self):
        g = self.evaluate(random_ops.random_gamma([1000], [2.0], seed=8))
        self.assertEqual((1000, 1), g.shape)
        self.assertTrue(np.all(g > 0))
        self.assertNear(2.0, g.mean(), 0.3)
        p = self.evaluate(random_ops.random_poisson([3.0], [1000], seed=9))
        self.assertNear(3.0, p.mean(), 0.4)

    @test_util.run_deprecated_v1
    def testStateless(self):
        a = self.evaluate(stateless_random_ops.stateless_random_uniform([4], seed=[1, 2]))
        b = self.evaluate(stateless_random_ops.stateless_random_uniform([4], seed=[1, 2]))
        self.assertAllEqual(a, b)

    @test_util.run_deprecated_v1
    def testStaticShapes(self):
        p = array_ops.placeholder(dtypes.int32, [2])
        self.assertEqual([None, None], random_ops.random_normal(p).get_shape().as_list())
        self.assertEqual([3, 4], random_ops.random_normal([3, 4]).get_shape().as_list())

    @test_util.run_deprecated_v1
    def testInitializers(self):
        c = init_ops.constant_initializer([1, 2, 3, 4])([2, 2])
        self.assertAllEqual([[1, 2], [3, 4]], self.evaluate(c))
        with self.assertRaises((ValueError, TypeError)):
            init_ops.constant_initializer([1, 2, 3])([2, 2], verify_shape=True)
        o = self.evaluate(init_ops.orthogonal_initializer(seed=1)([4, 4]))
        self.assertAllClose(np.eye(4), o @ o.T, atol=1e-5)
        i = self.evaluate(init_ops.identity_initializer()([3, 3]))
        self.assertAllEqual(np.eye(3), i)

    @test_util.run_deprecated_v1
    def testVarianceScaling(self):
        x = self.evaluate(
            init_ops.variance_scaling_initializer(
                scale=2.0, mode="fan_in", distribution="uniform", seed=3
            )([1000, 100])
        )
        lim = np.sqrt(3.0 * 2.0 / 1000)
        self.assertLessEqual(np.abs(x).max(), lim)
        with self.assertRaises(ValueError):
            init_ops.variance_scaling_initializer(mode="bad")
        with self.assertRaises(ValueError):
            init_ops.variance_scaling_initializer(scale=-1.0)

    @test_util.run_deprecated_v1
    def testGetVariablePartitionedInit(self):
        with variable_scope.variable_scope("s", initializer=init_ops.ones_initializer()):
            v = variable_scope.get_variable("v", [3])
        self.evaluate(v.initializer)
        self.assertAllEqual([1, 1, 1], self.evaluate(v))

    @test_util.run_deprecated_v1
    def testCropAndResize(self):
        img = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
        out = image_ops.crop_and_resize(img, [[0.0, 0.0, 1.0, 1.0]], [0], [2, 2])
        self.assertAllClose([[[[0.0], [3.0]], [[12.0], [15.0]]]], self.evaluate(out))

    @test_util.run_deprecated_v1
    def testDilation2D(self):
        x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
        k = np.zeros((2, 2, 1), np.float32)
        self.assertAllEqual(
            [[[[3.0]]]],
            self.evaluate(nn_ops.dilation2d(x, k, [1, 1, 1, 1], [1, 1, 1, 1], "VALID")),
        )


if __name__ == "__main__":
    test.main()
