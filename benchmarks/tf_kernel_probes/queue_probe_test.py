"""Queue behaviours (FIFO, padding FIFO, priority, random shuffle), condensed from the
behaviours TF's queue kernel tests check; written for the measurement, graph mode."""

import time

import numpy as np
from tensorflow.python.framework import constant_op, errors_impl, ops, test_util
from tensorflow.python.framework import dtypes as dtypes_lib
from tensorflow.python.ops import array_ops, data_flow_ops
from tensorflow.python.platform import test


class FIFOProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testEnqueueDequeueOrder(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        for x in [1.0, 2.0, 3.0]:
            self.evaluate(q.enqueue((x,)))
        self.assertEqual([1.0, 2.0, 3.0], [self.evaluate(q.dequeue()) for _ in range(3)])

    @test_util.run_deprecated_v1
    def testHalf(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float16)
        self.evaluate(q.enqueue((10.0,)))
        self.assertEqual(10.0, self.evaluate(q.dequeue()))

    @test_util.run_deprecated_v1
    def testEnqueueWithShapeRejectsWrong(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, shapes=(3, 2))
        self.evaluate(q.enqueue(([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],)))
        with self.assertRaises(ValueError):
            q.enqueue(([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],))
        self.assertEqual(1, self.evaluate(q.size()))

    @test_util.run_deprecated_v1
    def testSizeShape(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        self.assertEqual([], q.size().get_shape())
        self.assertEqual(0, self.evaluate(q.size()))

    @test_util.run_deprecated_v1
    def testEnqueueDictWithoutNames(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        with self.assertRaisesRegex(ValueError, "must have names"):
            q.enqueue({"a": 12.0})

    @test_util.run_deprecated_v1
    def testNamedTuples(self):
        q = data_flow_ops.FIFOQueue(
            10, (dtypes_lib.int32, dtypes_lib.float32), names=("i", "f"), shapes=((), ())
        )
        self.evaluate(q.enqueue({"i": 1, "f": 2.0}))
        self.evaluate(q.enqueue_many({"i": [3, 4], "f": [5.0, 6.0]}))
        d = self.evaluate(q.dequeue_many(3))
        self.assertAllEqual([1, 3, 4], d["i"])
        self.assertAllEqual([2.0, 5.0, 6.0], d["f"])

    @test_util.run_deprecated_v1
    def testEmptyEnqueueMany(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        empty_t = constant_op.constant([], dtype=dtypes_lib.float32, shape=[0, 2, 3])
        self.evaluate(q.enqueue_many((empty_t,)))
        self.assertEqual(0, self.evaluate(q.size()))

    @test_util.run_deprecated_v1
    def testEmptyDequeueManyWithShape(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, shapes=())
        self.assertEqual([], self.evaluate(q.dequeue_many(0)).tolist())
        self.assertEqual([], self.evaluate(q.dequeue_up_to(0)).tolist())

    @test_util.run_deprecated_v1
    def testEmptyDequeueManyWithNoShape(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        with self.assertRaisesOpError("specified shapes"):
            self.evaluate(q.dequeue_many(0))

    @test_util.run_deprecated_v1
    def testDequeueManyStaticShape(self):
        q = data_flow_ops.FIFOQueue(10, (dtypes_lib.float32, dtypes_lib.int32), shapes=((), (2,)))
        self.evaluate(q.enqueue_many(([1.0, 2.0, 3.0, 4.0], [[1, 2], [3, 4], [5, 6], [7, 8]])))
        d = q.dequeue_many(2)
        self.assertEqual([2], d[0].get_shape().as_list())
        self.assertEqual([2, 2], d[1].get_shape().as_list())
        u = q.dequeue_up_to(2)
        self.assertEqual([None], u[0].get_shape().as_list())
        self.assertEqual([None, 2], u[1].get_shape().as_list())
        f, i = self.evaluate(d)
        self.assertAllEqual([1.0, 2.0], f)
        f, i = self.evaluate(u)
        self.assertAllEqual([[5, 6], [7, 8]], i)

    @test_util.run_deprecated_v1
    def testEnqueueWrongShapeMany(self):
        q = data_flow_ops.FIFOQueue(10, (dtypes_lib.int32, dtypes_lib.int32), ((), (2,)))
        with self.assertRaises(ValueError):
            q.enqueue(([1, 2], [2, 2]))
        with self.assertRaises(ValueError):
            q.enqueue_many((7, [[1, 2], [3, 4], [5, 6]]))

    @test_util.run_deprecated_v1
    def testEnqueueWrongType(self):
        q = data_flow_ops.FIFOQueue(10, (dtypes_lib.int32, dtypes_lib.float32), ((), ()))
        with self.assertRaises(ValueError):
            q.enqueue(
                (array_ops.placeholder(dtypes_lib.int32), array_ops.placeholder(dtypes_lib.int32))
            )

    @test_util.run_deprecated_v1
    def testEnqueueManyRuntimeShapeMismatch(self):
        q = data_flow_ops.FIFOQueue(10, (dtypes_lib.int32, dtypes_lib.int32), ((2, 2), (2, 2)))
        a = array_ops.placeholder(dtypes_lib.int32)
        b = array_ops.placeholder(dtypes_lib.int32)
        op = q.enqueue_many((a, b))
        with self.cached_session() as sess:
            with self.assertRaisesOpError("must have the same size"):
                sess.run(op, {a: np.zeros((1, 2, 2)), b: np.zeros((2, 2, 2))})

    @test_util.run_deprecated_v1
    def testCloseThenDequeueRaisesOutOfRange(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        self.evaluate(q.enqueue((1.0,)))
        self.evaluate(q.close())
        self.assertEqual(1.0, self.evaluate(q.dequeue()))
        with self.assertRaisesRegex(errors_impl.OutOfRangeError, "is closed and has insufficient"):
            self.evaluate(q.dequeue())

    @test_util.run_deprecated_v1
    def testEnqueueAfterCloseRaises(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        self.evaluate(q.close())
        with self.assertRaisesRegex(errors_impl.CancelledError, "is closed"):
            self.evaluate(q.enqueue((1.0,)))

    @test_util.run_deprecated_v1
    def testCloseCancelPendingEnqueues(self):
        q = data_flow_ops.FIFOQueue(1, dtypes_lib.float32)
        self.evaluate(q.enqueue((1.0,)))
        with self.cached_session() as sess:
            self.evaluate(q.close(cancel_pending_enqueues=True))
            with self.assertRaises(errors_impl.CancelledError):
                sess.run(q.enqueue((2.0,)))
            self.assertEqual(1.0, self.evaluate(q.dequeue()))

    @test_util.run_deprecated_v1
    def testBlockingDequeueUnblockedByEnqueue(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        deq = q.dequeue()
        enq = q.enqueue((7.0,))
        with self.cached_session() as sess:
            out = []
            t = self.checkedThread(target=lambda: out.append(sess.run(deq)))
            t.start()
            time.sleep(0.1)
            sess.run(enq)
            t.join()
            self.assertEqual([7.0], out)

    @test_util.run_deprecated_v1
    def testBlockingDequeueUpToClosedReturnsRemainder(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, ())
        self.evaluate(q.enqueue_many(([1.0, 2.0, 3.0],)))
        self.evaluate(q.close())
        self.assertAllEqual([1.0, 2.0, 3.0], self.evaluate(q.dequeue_up_to(4)))
        with self.assertRaises(errors_impl.OutOfRangeError):
            self.evaluate(q.dequeue_up_to(1))

    @test_util.run_deprecated_v1
    def testDequeueManyClosedInsufficient(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, ())
        self.evaluate(q.enqueue_many(([1.0, 2.0, 3.0],)))
        self.evaluate(q.close())
        with self.assertRaises(errors_impl.OutOfRangeError):
            self.evaluate(q.dequeue_many(4))
        self.assertEqual(3, self.evaluate(q.size()))

    @test_util.run_deprecated_v1
    def testTimeout(self):
        q = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        from tensorflow.core.protobuf import config_pb2

        with self.cached_session() as sess:
            with self.assertRaisesRegex(errors_impl.DeadlineExceededError, "Timed out"):
                sess.run(q.dequeue(), options=config_pb2.RunOptions(timeout_in_ms=10))

    @test_util.run_deprecated_v1
    def testSharedQueueSameSession(self):
        q1 = data_flow_ops.FIFOQueue(1, dtypes_lib.float32, shared_name="shared_queue")
        self.evaluate(q1.enqueue((10.0,)))
        q2 = data_flow_ops.FIFOQueue(1, dtypes_lib.float32, shared_name="shared_queue")
        self.assertEqual(1, self.evaluate(q2.size()))
        self.assertEqual(10.0, self.evaluate(q2.dequeue()))

    @test_util.run_deprecated_v1
    def testIncompatibleSharedQueueErrors(self):
        q_a_1 = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, shared_name="q_a")
        q_a_2 = data_flow_ops.FIFOQueue(15, dtypes_lib.float32, shared_name="q_a")
        q_a_1.queue_ref.op.run()
        with self.assertRaisesOpError("capacity"):
            q_a_2.queue_ref.op.run()
        q_b_1 = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, shared_name="q_b")
        q_b_2 = data_flow_ops.FIFOQueue(10, dtypes_lib.int32, shared_name="q_b")
        q_b_1.queue_ref.op.run()
        with self.assertRaisesOpError("component types"):
            q_b_2.queue_ref.op.run()
        q_c_1 = data_flow_ops.FIFOQueue(10, dtypes_lib.float32, shared_name="q_c")
        q_c_2 = data_flow_ops.FIFOQueue(
            10, dtypes_lib.float32, shapes=[(1, 1, 2, 3)], shared_name="q_c"
        )
        q_c_1.queue_ref.op.run()
        with self.assertRaisesOpError("component shapes"):
            q_c_2.queue_ref.op.run()

    @test_util.run_deprecated_v1
    def testSelectQueue(self):
        qs = [data_flow_ops.FIFOQueue(10, dtypes_lib.float32) for _ in range(3)]
        index = array_ops.placeholder(dtypes_lib.int32)
        q = data_flow_ops.QueueBase.from_list(index, qs)
        with self.cached_session() as sess:
            sess.run(q.enqueue((5.0,)), {index: 1})
            self.assertEqual(1, sess.run(qs[1].size()))
            self.assertEqual(0, sess.run(qs[0].size()))

    @test_util.run_deprecated_v1
    def testSelectQueueOutOfRange(self):
        q1 = data_flow_ops.FIFOQueue(10, dtypes_lib.float32)
        q2 = data_flow_ops.FIFOQueue(15, dtypes_lib.float32)
        enq_q = data_flow_ops.QueueBase.from_list(3, [q1, q2])
        with self.assertRaisesOpError("is not in"):
            self.evaluate(enq_q.dequeue())

    @test_util.run_deprecated_v1
    def testDtypes(self):
        dts = [
            dtypes_lib.float32,
            dtypes_lib.float64,
            dtypes_lib.int32,
            dtypes_lib.uint8,
            dtypes_lib.int16,
            dtypes_lib.int8,
            dtypes_lib.int64,
            dtypes_lib.uint16,
            dtypes_lib.bool,
            dtypes_lib.complex64,
            dtypes_lib.complex128,
        ]
        shape = (32, 4, 128)
        q = data_flow_ops.FIFOQueue(32, dts, shapes=[shape] * len(dts))
        vals = [np.random.randint(0, 2, size=shape).astype(d.as_numpy_dtype) for d in dts]
        self.evaluate(q.enqueue_many(vals))
        got = self.evaluate(q.dequeue_many(32))
        for a, b in zip(vals, got):
            self.assertAllEqual(a, b)

    @test_util.run_deprecated_v1
    def testQueueNameAndDtypesProps(self):
        q = data_flow_ops.FIFOQueue(
            10, [dtypes_lib.int32, dtypes_lib.string], shapes=[(), ()], name="Qn"
        )
        self.assertEqual([dtypes_lib.int32, dtypes_lib.string], q.dtypes)
        self.assertEqual("Qn", q.name)
        self.assertEqual(2, len(q.shapes))
        self.assertEqual(q.queue_ref.op.type, "FIFOQueueV2")
        self.assertEqual(10, q.queue_ref.op.get_attr("capacity"))


class PaddingFIFOProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testConstructorNeedsShapes(self):
        with self.assertRaises(ValueError):
            data_flow_ops.PaddingFIFOQueue(10, dtypes_lib.float32)

    @test_util.run_deprecated_v1
    def testDequeueManyPads(self):
        q = data_flow_ops.PaddingFIFOQueue(
            10, (dtypes_lib.string, dtypes_lib.int32), shapes=((None,), (1, None))
        )
        s = array_ops.placeholder(dtypes_lib.string)
        i = array_ops.placeholder(dtypes_lib.int32)
        enq = q.enqueue((s, i))
        deq = q.dequeue_many(3)
        with self.cached_session() as sess:
            sess.run(enq, {s: ["a"], i: [[1]]})
            sess.run(enq, {s: ["a", "b", "c"], i: [[1, 2]]})
            sess.run(enq, {s: [], i: [[1, 2, 3]]})
            sv, iv = sess.run(deq)
        self.assertAllEqual([[b"a", b"", b""], [b"a", b"b", b"c"], [b"", b"", b""]], sv)
        self.assertAllEqual([[[1, 0, 0]], [[1, 2, 0]], [[1, 2, 3]]], iv)
        self.assertEqual([3, None], deq[0].get_shape().as_list())
        self.assertEqual([3, 1, None], deq[1].get_shape().as_list())

    @test_util.run_deprecated_v1
    def testDequeueUpToPads(self):
        q = data_flow_ops.PaddingFIFOQueue(10, dtypes_lib.float32, shapes=((None,),))
        x = array_ops.placeholder(dtypes_lib.float32)
        enq = q.enqueue((x,))
        with self.cached_session() as sess:
            sess.run(enq, {x: [1.0]})
            sess.run(enq, {x: [1.0, 2.0]})
            sess.run(q.close())
            self.assertAllEqual([[1.0, 0.0], [1.0, 2.0]], sess.run(q.dequeue_up_to(5)))

    @test_util.run_deprecated_v1
    def testEnqueueManyWithUnknownDims(self):
        q = data_flow_ops.PaddingFIFOQueue(10, dtypes_lib.int32, shapes=((None, 2),))
        self.evaluate(q.enqueue_many(([[[1, 2]], [[3, 4]]],)))
        self.assertEqual(2, self.evaluate(q.size()))

    @test_util.run_deprecated_v1
    def testWrongRankRaises(self):
        q = data_flow_ops.PaddingFIFOQueue(10, dtypes_lib.int32, shapes=((None, None),))
        with self.assertRaises(ValueError):
            q.enqueue(([1, 2],))


class PriorityProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testRoundTripOrder(self):
        q = data_flow_ops.PriorityQueue(2000, (dtypes_lib.string, dtypes_lib.string), ((), ()))
        elem = np.random.randint(-5, 5, size=100).astype(np.int64)
        side = np.array([str(i).encode() for i in range(100)])
        self.evaluate(q.enqueue_many((elem, side, side)))
        p, a, b = self.evaluate(q.dequeue_many(100))
        self.assertAllEqual(np.sort(elem), p)
        self.assertAllEqual(a, b)

    @test_util.run_deprecated_v1
    def testScalarPriorityRequired(self):
        q = data_flow_ops.PriorityQueue(10, (dtypes_lib.int64,), ((),))
        with self.assertRaises(ValueError):
            q.enqueue(([1, 2], 3))

    @test_util.run_deprecated_v1
    def testDequeueUpToClosed(self):
        q = data_flow_ops.PriorityQueue(10, (dtypes_lib.int64,), ((),))
        self.evaluate(q.enqueue_many(([3, 1, 2], [30, 10, 20])))
        self.evaluate(q.close())
        p, v = self.evaluate(q.dequeue_up_to(10))
        self.assertAllEqual([1, 2, 3], p)
        self.assertAllEqual([10, 20, 30], v)


class RandomShuffleProbe(test.TestCase):
    def setUp(self):
        super().setUp()
        ops.get_default_graph().switch_to_thread_local()

    @test_util.run_deprecated_v1
    def testEnqueueDequeueAll(self):
        q = data_flow_ops.RandomShuffleQueue(10, 0, dtypes_lib.float32, ((),))
        self.evaluate(q.enqueue_many(([1.0, 2.0, 3.0, 4.0],)))
        got = sorted(self.evaluate(q.dequeue_many(4)).tolist())
        self.assertEqual([1.0, 2.0, 3.0, 4.0], got)

    @test_util.run_deprecated_v1
    def testMinAfterDequeueBlocksUntilClose(self):
        q = data_flow_ops.RandomShuffleQueue(10, 2, dtypes_lib.float32, ((),))
        self.evaluate(q.enqueue_many(([1.0, 2.0, 3.0],)))
        self.assertIn(self.evaluate(q.dequeue()), [1.0, 2.0, 3.0])
        from tensorflow.core.protobuf import config_pb2

        with self.cached_session() as sess:
            with self.assertRaises(errors_impl.DeadlineExceededError):
                sess.run(q.dequeue(), options=config_pb2.RunOptions(timeout_in_ms=20))
        self.evaluate(q.close())
        self.assertEqual(2, len(self.evaluate(q.dequeue_up_to(5))))

    @test_util.run_deprecated_v1
    def testSeededShuffleDeterministic(self):
        outs = []
        for _ in range(2):
            with ops.Graph().as_default():
                q = data_flow_ops.RandomShuffleQueue(
                    100, 0, dtypes_lib.int32, ((),), seed=8, name="q"
                )
                enq = q.enqueue_many((list(range(50)),))
                deq = q.dequeue_many(50)
                with self.session() as sess:
                    sess.run(enq)
                    outs.append(sess.run(deq).tolist())
        self.assertEqual(outs[0], outs[1])
        self.assertEqual(sorted(outs[0]), list(range(50)))
        self.assertNotEqual(outs[0], list(range(50)))

    @test_util.run_deprecated_v1
    def testMinAfterDequeueGreaterThanCapacity(self):
        with self.assertRaises((ValueError, errors_impl.InvalidArgumentError)):
            q = data_flow_ops.RandomShuffleQueue(5, 10, dtypes_lib.float32)
            self.evaluate(q.queue_ref)


if __name__ == "__main__":
    test.main()
