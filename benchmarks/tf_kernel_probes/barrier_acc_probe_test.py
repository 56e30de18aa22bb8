"""Barrier and conditional-accumulator behaviours, condensed from what TF's kernel
tests check; written for the measurement, graph mode."""

import time

from tensorflow.python.framework import (
    dtypes,
    errors_impl,
    tensor_shape,
    test_util,
)
from tensorflow.python.ops import array_ops, data_flow_ops
from tensorflow.python.platform import test


class BarrierProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConstructorAttrs(self):
        b = data_flow_ops.Barrier(
            (dtypes.float32, dtypes.float32), shapes=((1, 2, 3), (8,)), shared_name="B", name="B"
        )
        self.assertEqual(b.barrier_ref.op.type, "Barrier")
        self.assertEqual(
            [dtypes.float32, dtypes.float32], list(b.barrier_ref.op.get_attr("component_types"))
        )
        self.assertEqual(b"B", b.barrier_ref.op.get_attr("shared_name"))

    @test_util.run_deprecated_v1
    def testInsertManyAndSizes(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.float32), shapes=((), ()), name="B")
        size_t = b.ready_size()
        incomplete_t = b.incomplete_size()
        self.assertEqual([], size_t.get_shape())
        keys = [b"a", b"b", b"c"]
        self.evaluate(b.insert_many(0, keys, [10.0, 20.0, 30.0]))
        self.assertEqual(0, self.evaluate(size_t))
        self.assertEqual(3, self.evaluate(incomplete_t))
        self.evaluate(b.insert_many(1, keys, [100.0, 200.0, 300.0]))
        self.assertEqual(3, self.evaluate(size_t))
        self.assertEqual(0, self.evaluate(incomplete_t))

    @test_util.run_deprecated_v1
    def testTakeMany(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.float32), shapes=((), ()))
        keys = [b"a", b"b", b"c"]
        self.evaluate(b.insert_many(0, keys, [10.0, 20.0, 30.0]))
        self.evaluate(b.insert_many(1, keys, [100.0, 200.0, 300.0]))
        idx, k, (v0, v1) = self.evaluate(b.take_many(3))
        self.assertEqual(sorted(k.tolist()), keys)
        d = dict(zip(k.tolist(), zip(v0.tolist(), v1.tolist())))
        self.assertEqual((10.0, 100.0), d[b"a"])
        self.assertEqual(3, len(idx))

    @test_util.run_deprecated_v1
    def testTakeManyStaticShape(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.int32), shapes=((), (2,)))
        idx, k, vals = b.take_many(2)
        self.assertEqual([2], idx.get_shape().as_list())
        self.assertEqual([2], k.get_shape().as_list())
        self.assertEqual([2, 2], vals[1].get_shape().as_list())
        idx, k, vals = b.take_many(2, allow_small_batch=True)
        self.assertEqual([None], k.get_shape().as_list())

    @test_util.run_deprecated_v1
    def testInsertTwiceRaises(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.float32), shapes=((), ()))
        self.evaluate(b.insert_many(0, [b"a"], [1.0]))
        with self.assertRaisesOpError("already has a value"):
            self.evaluate(b.insert_many(0, [b"a"], [2.0]))

    @test_util.run_deprecated_v1
    def testInsertBadIndex(self):
        b = data_flow_ops.Barrier((dtypes.float32,), shapes=((),))
        with self.assertRaisesOpError("Invalid component index"):
            self.evaluate(b.insert_many(3, [b"a"], [1.0]))

    @test_util.run_deprecated_v1
    def testCloseThenInsertNewKeyFails(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.float32), shapes=((), ()))
        self.evaluate(b.insert_many(0, [b"a"], [1.0]))
        self.evaluate(b.close())
        self.evaluate(b.insert_many(1, [b"a"], [2.0]))
        with self.assertRaisesOpError("is closed"):
            self.evaluate(b.insert_many(0, [b"b"], [3.0]))
        _, k, _ = self.evaluate(b.take_many(1))
        self.assertEqual([b"a"], k.tolist())
        with self.assertRaises(errors_impl.OutOfRangeError):
            self.evaluate(b.take_many(1))

    @test_util.run_deprecated_v1
    def testTakeSmallBatchAfterClose(self):
        b = data_flow_ops.Barrier((dtypes.float32,), shapes=((),))
        self.evaluate(b.insert_many(0, [b"a", b"b"], [1.0, 2.0]))
        self.evaluate(b.close())
        _, k, _ = self.evaluate(b.take_many(5, allow_small_batch=True))
        self.assertEqual([b"a", b"b"], sorted(k.tolist()))

    @test_util.run_deprecated_v1
    def testCancelPendingEnqueues(self):
        b = data_flow_ops.Barrier((dtypes.float32, dtypes.float32), shapes=((), ()))
        self.evaluate(b.insert_many(0, [b"a"], [1.0]))
        self.evaluate(b.close(cancel_pending_enqueues=True))
        self.assertEqual(0, self.evaluate(b.incomplete_size()))
        with self.assertRaises(errors_impl.OutOfRangeError):
            self.evaluate(b.take_many(1, allow_small_batch=True))

    @test_util.run_deprecated_v1
    def testWrongShapeInsert(self):
        b = data_flow_ops.Barrier((dtypes.float32,), shapes=((2,),))
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            self.evaluate(b.insert_many(0, [b"a"], [[1.0, 2.0, 3.0]]))


class AccumulatorProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConstructorAttrs(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, name="Q", shape=tensor_shape.TensorShape([1, 5, 2, 8])
        )
        self.assertEqual("ConditionalAccumulator", q.accumulator_ref.op.type)
        self.assertEqual(b"MEAN", q.accumulator_ref.op.get_attr("reduction_type"))
        self.assertEqual(q.dtype, dtypes.float32)

    @test_util.run_deprecated_v1
    def testBadReductionType(self):
        with self.assertRaises(ValueError):
            data_flow_ops.ConditionalAccumulator(
                dtypes.float32, name="Q", reduction_type="Invalid"
            )

    @test_util.run_deprecated_v1
    def testMean(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        for x in [10.0, 20.0, 30.0]:
            self.evaluate(q.apply_grad((x,)))
        self.assertEqual(3, self.evaluate(q.num_accumulated()))
        self.assertAllClose([20.0], self.evaluate(q.take_grad(1)))
        self.assertEqual(0, self.evaluate(q.num_accumulated()))

    @test_util.run_deprecated_v1
    def testSum(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1]), reduction_type="SUM"
        )
        for x in [10.0, 20.0, 30.0]:
            self.evaluate(q.apply_grad((x,)))
        self.assertAllClose([60.0], self.evaluate(q.take_grad(1)))

    @test_util.run_deprecated_v1
    def testStaleGradDropped(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        self.evaluate(q.set_global_step(1))
        self.evaluate(q.apply_grad((10.0,), local_step=0))
        self.assertEqual(0, self.evaluate(q.num_accumulated()))
        self.evaluate(q.apply_grad((20.0,), local_step=1))
        self.assertEqual(1, self.evaluate(q.num_accumulated()))

    @test_util.run_deprecated_v1
    def testWrongShapeApply(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        with self.assertRaises(ValueError):
            q.apply_grad(([1.0, 2.0],))

    @test_util.run_deprecated_v1
    def testRuntimeShapeMismatch(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape(None)
        )
        x = array_ops.placeholder(dtypes.float32)
        op = q.apply_grad(x)
        with self.cached_session() as sess:
            sess.run(op, {x: [1.0, 2.0]})
            with self.assertRaisesOpError("Shape mismatch"):
                sess.run(op, {x: [1.0, 2.0, 3.0]})

    @test_util.run_deprecated_v1
    def testTakeGradBlocksUntilEnough(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        take = q.take_grad(2)
        app = q.apply_grad((5.0,))
        with self.cached_session() as sess:
            out = []
            t = self.checkedThread(target=lambda: out.append(sess.run(take)))
            t.start()
            time.sleep(0.05)
            sess.run(app)
            sess.run(app)
            t.join()
            self.assertAllClose([[5.0]], out)

    @test_util.run_deprecated_v1
    def testInvalidNumRequired(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        with self.assertRaisesOpError("Argument num_required must be positive"):
            self.evaluate(q.take_grad(0))

    @test_util.run_deprecated_v1
    def testTakeGradIncrementsGlobalStep(self):
        q = data_flow_ops.ConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([1])
        )
        self.evaluate(q.apply_grad((1.0,), local_step=0))
        self.evaluate(q.take_grad(1))
        self.evaluate(q.apply_grad((2.0,), local_step=0))
        self.assertEqual(0, self.evaluate(q.num_accumulated()))

    @test_util.run_deprecated_v1
    def testDtypeInt(self):
        with self.assertRaises((TypeError, ValueError)):
            data_flow_ops.ConditionalAccumulator(dtypes.int32)

    @test_util.run_deprecated_v1
    def testSparseAccumulator(self):
        q = data_flow_ops.SparseConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([3, 2])
        )
        self.evaluate(
            q.apply_grad(
                grad_indices=[0, 2], grad_values=[[1.0, 1.0], [2.0, 2.0]], grad_shape=[3, 2]
            )
        )
        self.evaluate(q.apply_grad(grad_indices=[0], grad_values=[[3.0, 3.0]], grad_shape=[3, 2]))
        idx, val, shp = self.evaluate(q.take_grad(2))
        d = {int(i): v.tolist() for i, v in zip(idx, val)}
        self.assertEqual({0: [2.0, 2.0], 2: [2.0, 2.0]}, d)
        self.assertAllEqual([3, 2], shp)

    @test_util.run_deprecated_v1
    def testSparseTakeIndexedSlices(self):
        q = data_flow_ops.SparseConditionalAccumulator(
            dtypes.float32, shape=tensor_shape.TensorShape([3, 2]), reduction_type="SUM"
        )
        self.evaluate(q.apply_grad(grad_indices=[1], grad_values=[[1.0, 2.0]], grad_shape=[3, 2]))
        s = q.take_indexed_slices_grad(1)
        v = self.evaluate(s)
        self.assertAllEqual([1], v.indices)
        self.assertAllClose([[1.0, 2.0]], v.values)


if __name__ == "__main__":
    test.main()
