"""pooling gradients, image resizing, control flow, TensorArray, parsing and reader
details, condensed from what TF's kernel tests check; written for the measurement,
graph mode (a second batch beside the per-family files)."""

import os
import tempfile

import numpy as np
from tensorflow.python.framework import (
    constant_op,
    dtypes,
    errors_impl,
    ops,
    test_util,
)
from tensorflow.python.ops import (
    array_ops,
    control_flow_case,
    gradients_impl,
    image_ops,
    io_ops,
    math_ops,
    nn_ops,
    parsing_ops,
    tensor_array_ops,
    while_loop,
)
from tensorflow.python.ops import cond as cond_lib
from tensorflow.python.platform import test


class PoolGradProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testAvgPoolGradSame(self):
        x = constant_op.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
        y = nn_ops.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
        g = self.evaluate(gradients_impl.gradients(math_ops.reduce_sum(y), x)[0])
        want = np.zeros((4, 4))
        for r0, r1 in [(0, 3), (2, 4)]:
            for c0, c1 in [(0, 3), (2, 4)]:
                want[r0:r1, c0:c1] += 1.0 / ((r1 - r0) * (c1 - c0))
        self.assertAllClose(want, g[0, :, :, 0])

    @test_util.run_deprecated_v1
    def testMaxPoolGradGrad(self):
        x = constant_op.constant([[[[1.0], [3.0]], [[2.0], [0.0]]]])
        y = nn_ops.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        g = gradients_impl.gradients(y, x)[0]
        gg = gradients_impl.gradients(g, x, grad_ys=array_ops.ones_like(x))[0]
        self.assertAllEqual([[[[0.0], [1.0]], [[0.0], [0.0]]]], self.evaluate(g))
        self.assertAllEqual(np.zeros((1, 2, 2, 1)), self.evaluate(gg))

    @test_util.run_deprecated_v1
    def testAvgPoolInt32Rejected(self):
        with self.assertRaises(TypeError):
            nn_ops.avg_pool(np.ones((1, 2, 2, 1), np.int32), [1, 2, 2, 1], [1, 1, 1, 1], "VALID")

    @test_util.run_deprecated_v1
    def testMaxPoolInt8AndUint8(self):
        for dt in (np.int8, np.uint8, np.int32):
            x = np.array([[[[1], [5]], [[3], [2]]]], dt)
            out = self.evaluate(nn_ops.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID"))
            self.assertEqual(5, out.item())

    @test_util.run_deprecated_v1
    def testPoolKsizeLargerThanInputValid(self):
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(
                nn_ops.max_pool(
                    np.ones((1, 2, 2, 1), np.float32), [1, 3, 3, 1], [1, 1, 1, 1], "VALID"
                )
            )


class ImageProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testResizeBilinearHalfPixel(self):
        x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
        out = image_ops.resize_bilinear(x, [4, 4], half_pixel_centers=True)
        v = self.evaluate(out)[0, :, :, 0]
        self.assertAllClose([0.0, 0.25, 0.75, 1.0], v[0])

    @test_util.run_deprecated_v1
    def testResizeNearestAlignCorners(self):
        x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
        v = self.evaluate(image_ops.resize_nearest_neighbor(x, [2, 2], align_corners=True))
        self.assertAllEqual([[0, 2], [6, 8]], v[0, :, :, 0])

    @test_util.run_deprecated_v1
    def testResizeBicubicShape(self):
        out = image_ops.resize_bicubic(np.zeros((2, 5, 5, 3), np.float32), [7, 3])
        self.assertEqual([2, 7, 3, 3], out.get_shape().as_list())
        self.assertEqual((2, 7, 3, 3), self.evaluate(out).shape)

    @test_util.run_deprecated_v1
    def testResizeBilinearGradient(self):
        x = constant_op.constant(np.random.rand(1, 3, 3, 1).astype(np.float32))
        y = image_ops.resize_bilinear(x, [5, 5])
        g = self.evaluate(gradients_impl.gradients(math_ops.reduce_sum(y), x)[0])
        self.assertAllClose(25.0, g.sum(), rtol=1e-5)

    @test_util.run_deprecated_v1
    def testScaleAndTranslate(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
        out = image_ops.scale_and_translate(
            x, [8, 8], [2.0, 2.0], [0.0, 0.0], kernel_type="triangle", antialias=False
        )
        v = self.evaluate(out)
        self.assertEqual((1, 8, 8, 1), v.shape)
        self.assertAllClose(x[0, 0, 0, 0], v[0, 0, 0, 0])
        self.assertAllClose(x[0, 3, 3, 0], v[0, 7, 7, 0])

    @test_util.run_deprecated_v1
    def testAdjustContrastAndFlip(self):
        x = np.array([[[[1.0], [3.0]]]], np.float32)
        self.assertAllClose([[[[0.0], [4.0]]]], self.evaluate(image_ops.adjust_contrast(x, 2.0)))
        self.assertAllEqual([[[3.0], [1.0]]], self.evaluate(image_ops.flip_left_right(x[0])))


class ControlFlowMoreProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testWhileMaximumIterations(self):
        r = while_loop.while_loop(lambda i: i < 100, lambda i: i + 1, [0], maximum_iterations=7)
        self.assertEqual(7, self.evaluate(r))

    @test_util.run_deprecated_v1
    def testWhileNestedCond(self):
        def body(i, acc):
            acc = cond_lib.cond(math_ops.equal(i % 2, 0), lambda: acc + i, lambda: acc - 1)
            return i + 1, acc

        _, acc = while_loop.while_loop(lambda i, a: i < 6, body, [0, 0])
        self.assertEqual(0 + 2 + 4 - 3, self.evaluate(acc))

    @test_util.run_deprecated_v1
    def testCaseExclusiveRaises(self):
        x = constant_op.constant(3)
        r = control_flow_case.case(
            [(x > 1, lambda: constant_op.constant(1)), (x > 2, lambda: constant_op.constant(2))],
            default=lambda: constant_op.constant(0),
            exclusive=True,
        )
        with self.assertRaisesOpError("exclusive=True"):
            self.evaluate(r)

    @test_util.run_deprecated_v1
    def testWhileGradientOfSquareLoop(self):
        x = constant_op.constant(2.0)
        _, y = while_loop.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * v), [0, x])
        self.assertAllClose(8 * 2.0**7, self.evaluate(gradients_impl.gradients(y, x)[0]))

    @test_util.run_deprecated_v1
    def testCondWrongPredShape(self):
        with self.assertRaises(ValueError):
            cond_lib.cond(constant_op.constant([True, False]), lambda: 1, lambda: 2)

    @test_util.run_deprecated_v1
    def testWhileBackPropFalse(self):
        x = constant_op.constant(1.0)
        r = while_loop.while_loop(lambda v: v < 10, lambda v: v * 2, [x], back_prop=False)
        self.assertEqual([None], gradients_impl.gradients(r, x))


class TensorArrayMoreProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testScatterGatherGrad(self):
        x = constant_op.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3).scatter([2, 0, 1], x)
        g = ta.gather([0, 2])
        self.assertAllEqual([[3, 4], [1, 2]], self.evaluate(g))
        dx = gradients_impl.gradients(g, x, grad_ys=[[[1.0, 1.0], [2.0, 2.0]]])[0]
        self.assertAllEqual([[2, 2], [1, 1], [0, 0]], self.evaluate(dx))

    @test_util.run_deprecated_v1
    def testSizeAfterDynamicWrites(self):
        ta = tensor_array_ops.TensorArray(dtypes.int32, size=0, dynamic_size=True)
        ta = ta.write(0, 1).write(4, 5)
        self.assertEqual(5, self.evaluate(ta.size()))

    @test_util.run_deprecated_v1
    def testReadUnwrittenIsZeros(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        ta = ta.write(0, 1.0)
        self.assertEqual(0.0, self.evaluate(ta.read(1)))  # TF 2.21: zeros

    @test_util.run_deprecated_v1
    def testStackScalarsStaticShape(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2, element_shape=[])
        self.assertEqual([2], ta.write(0, 1.0).write(1, 2.0).stack().get_shape().as_list())


def _csv_file(text):
    fd, path = tempfile.mkstemp(suffix=".txt")
    with os.fdopen(fd, "wb") as f:
        f.write(text)
    return path


class ParseReadMoreProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testDecodeCSVNaValueAndSelect(self):
        a, b = parsing_ops.decode_csv(
            ["1,NA,x", "NA,2,y"], [[0], [7]], na_value="NA", select_cols=[0, 1]
        )
        self.assertAllEqual([1, 0], self.evaluate(a))
        self.assertAllEqual([7, 2], self.evaluate(b))

    @test_util.run_deprecated_v1
    def testDecodeCSVWrongFieldCount(self):
        out = parsing_ops.decode_csv(["1,2,3"], [[0], [0]])
        with self.assertRaisesOpError("Expect 2 fields but have 3 in record 0"):
            self.evaluate(out)

    @test_util.run_deprecated_v1
    def testDecodeCSVBadInt(self):
        out = parsing_ops.decode_csv(["1.5"], [[0]])
        with self.assertRaisesOpError("Field 0 in record 0 is not a valid int32: 1.5"):
            self.evaluate(out)

    @test_util.run_deprecated_v1
    def testTextLineReaderSkipHeader(self):
        path = _csv_file(b"h\na\nb")
        reader = io_ops.TextLineReader(skip_header_lines=1)
        q, fill = _queue([path])
        k, v = reader.read(q)
        with self.session() as s:
            s.run(fill)
            self.assertEqual(b"a", s.run(v))
            self.assertEqual(b"b", s.run(v))
            with self.assertRaises(errors_impl.OutOfRangeError):
                s.run(v)

    @test_util.run_deprecated_v1
    def testWholeFileReaderKeys(self):
        path = _csv_file(b"abc")
        q, fill = _queue([path])
        k, v = io_ops.WholeFileReader().read(q)
        with self.session() as s:
            s.run(fill)
            self.assertEqual([path.encode(), b"abc"], s.run([k, v]))

    @test_util.run_deprecated_v1
    def testParseExampleVarLenEmptyBatch(self):
        out = parsing_ops.parse_example(
            constant_op.constant([], dtypes.string), {"a": parsing_ops.VarLenFeature(dtypes.int64)}
        )["a"]
        idx, val, shape = self.evaluate([out.indices, out.values, out.dense_shape])
        self.assertEqual((0, 2), idx.shape)
        self.assertAllEqual([0, 0], shape)


def _queue(paths):
    from tensorflow.python.ops import data_flow_ops

    q = data_flow_ops.FIFOQueue(10, [dtypes.string], shapes=[[]])
    with ops.control_dependencies([q.enqueue_many([paths])]):
        return q, q.close()


if __name__ == "__main__":
    test.main()
