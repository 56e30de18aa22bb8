"""Queue and batching op names, and queue runners in meta graphs, as TF 2.21 makes
them: names and QueueRunnerDef bytes below were recorded from TF 2.21 running the same
code."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos import QueueRunnerDef


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def test_queue_ops_are_named_after_the_queues_own_name():
    with tf.name_scope("a"):
        q = tf.FIFOQueue(3, tf.float32)
    e = q.enqueue(1.0)
    with tf.name_scope("b"):
        e2 = q.enqueue_many([[1.0]])
        d = q.dequeue()
    c = q.close()
    sz = q.size()
    assert (q.name, e.name, e2.name, d.name, c.name, sz.name) == (
        "a/fifo_queue",
        "fifo_queue_enqueue",
        "b/fifo_queue_EnqueueMany",
        "b/fifo_queue_Dequeue:0",
        "fifo_queue_Close",
        "fifo_queue_Size:0",
    )


@pytest.mark.parametrize(
    "make, out, queue, enqueues, close",
    [
        (
            lambda x: tf.train.batch([x], 2, num_threads=2),
            "batch:0",
            "batch/fifo_queue",
            ["batch/fifo_queue_enqueue"] * 2,
            "batch/fifo_queue_Close",
        ),
        (
            lambda x: tf.train.shuffle_batch([x], 2, 10, 2, num_threads=3),
            "shuffle_batch:0",
            "shuffle_batch/random_shuffle_queue",
            ["shuffle_batch/random_shuffle_queue_enqueue"] * 3,
            "shuffle_batch/random_shuffle_queue_Close",
        ),
        (
            lambda x: tf.train.batch_join([[x], [x]], 2),
            "batch_join:0",
            "batch_join/fifo_queue",
            ["batch_join/fifo_queue_enqueue", "batch_join/fifo_queue_enqueue_1"],
            "batch_join/fifo_queue_Close",
        ),
        (
            lambda x: tf.train.maybe_batch([x], True, 2),
            "batch:0",
            "batch/fifo_queue",
            ["batch/fifo_queue_enqueue"],
            "batch/fifo_queue_Close",
        ),
        (
            lambda x: tf.train.batch([x], 2, name="mine", allow_smaller_final_batch=True),
            "mine:0",
            "mine/fifo_queue",
            ["mine/fifo_queue_enqueue"],
            "mine/fifo_queue_Close",
        ),
    ],
)
def test_batching_names_as_tf(make, out, queue, enqueues, close):
    b = make(tf.constant([1.0]))
    qr = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[-1]
    assert b.name == out
    assert qr.name == queue
    assert [op.name for op in qr.enqueue_ops] == enqueues
    assert qr.close_op.name == close


def test_shuffle_batch_threads_run_one_enqueue_op():
    x = tf.constant([1.0])
    b = tf.train.shuffle_batch([x], 4, 20, 4, num_threads=3, seed=1)
    with tf.Session() as s:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(s, coord)
        np.testing.assert_array_equal(s.run(b), np.ones((4, 1), np.float32))
        coord.request_stop()
        coord.join(threads)


# TF 2.21's serialized QueueRunnerDefs of this graph's three runners, in order.
_TF_QUEUE_RUNNER_DEFS = [
    "0a0e696e7075745f70726f64756365721229696e7075745f70726f64756365722f696e7075745f7072"
    "6f64756365725f456e71756575654d616e791a23696e7075745f70726f64756365722f696e7075745f"
    "70726f64756365725f436c6f73652225696e7075745f70726f64756365722f696e7075745f70726f64"
    "756365725f436c6f73655f312a010b",
    "0a1062617463682f6669666f5f7175657565121862617463682f6669666f5f71756575655f656e7175"
    "657565121862617463682f6669666f5f71756575655f656e71756575651a1662617463682f6669666f"
    "5f71756575655f436c6f7365221862617463682f6669666f5f71756575655f436c6f73655f312a010b",
    "0a036d7971120265311a096d79715f436c6f7365220b6d79715f436c6f73655f312a020b01",
]


def _three_runners():
    tf.train.string_input_producer(["a", "b"], shuffle=False)
    tf.train.batch([tf.constant([1.0])], batch_size=2, num_threads=2)
    types = (tf.errors.OutOfRangeError, tf.errors.CancelledError)
    queue = tf.FIFOQueue(3, tf.float32, name="myq")
    runner = tf.train.QueueRunner(queue, [tf.no_op(name="e1")], queue_closed_exception_types=types)
    tf.train.add_queue_runner(runner)


def test_meta_graph_keeps_queue_runners_as_tf():
    _three_runners()
    mg = tf.train.export_meta_graph()
    raw = mg.collection_def["queue_runners"].bytes_list.value
    assert [r.hex() for r in raw] == _TF_QUEUE_RUNNER_DEFS
    runners = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    scoped = runners[0].to_proto(export_scope="input_producer")
    assert (scoped.queue_name, list(scoped.enqueue_op_name), scoped.close_op_name) == (
        "input_producer",
        ["input_producer_EnqueueMany"],
        "input_producer_Close",
    )
    assert runners[1].to_proto(export_scope="other") is None
    with tf.Graph().as_default():
        tf.train.import_meta_graph(mg)
        rebuilt = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
        assert [(r.name, [o.name for o in r.enqueue_ops]) for r in rebuilt] == [
            ("input_producer", ["input_producer/input_producer_EnqueueMany"]),
            ("batch/fifo_queue", ["batch/fifo_queue_enqueue"] * 2),
            ("myq", ["e1"]),
        ]
        assert rebuilt[2].queue_closed_exception_types == (
            tf.errors.OutOfRangeError,
            tf.errors.CancelledError,
        )
        with tf.Session() as s:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord, collection="queue_runners")
            np.testing.assert_array_equal(s.run("batch:0"), [[1.0], [1.0]])
            coord.request_stop()
            coord.join(threads)


def test_queue_runner_from_tf_bytes():
    _three_runners()
    proto = QueueRunnerDef.FromString(bytes.fromhex(_TF_QUEUE_RUNNER_DEFS[1]))
    runner = tf.train.QueueRunner.from_proto(proto)
    assert runner.name == "batch/fifo_queue"
    assert runner.cancel_op.name == "batch/fifo_queue_Close_1"
    with pytest.raises(ValueError, match="mutually exclusive"):
        tf.train.QueueRunner(tf.FIFOQueue(1, tf.float32), [tf.no_op()], queue_runner_def=proto)


def test_iterators_collection_and_names_as_tf():
    # TF 2.21: every iterator's resource is in the "iterators" collection, kept by
    # export_meta_graph, and named after its op type.
    ds = tf.data.Dataset.range(3)
    ds.make_one_shot_iterator()
    ds.make_initializable_iterator()
    h = tf.placeholder(tf.string, [])
    tf.data.Iterator.from_string_handle(h, ds.output_types, ds.output_shapes)
    tf.data.Iterator.from_structure(ds.output_types, ds.output_shapes)
    want = [
        "OneShotIterator:0",
        "IteratorV2:0",
        "IteratorFromStringHandleV2:0",
        "IteratorV2_1:0",
    ]
    assert [t.name for t in tf.get_collection("iterators")] == want
    mg = tf.train.export_meta_graph()
    assert list(mg.collection_def["iterators"].node_list.value) == want


def test_runners_from_a_meta_graph_arm_the_unstarted_runner_watchdog():
    from asyncflow import queues

    _three_runners()
    mg = tf.train.export_meta_graph()
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(mg)
        queue_op = g.get_operation_by_name("batch/fifo_queue")
        with tf.Session() as s:
            assert queues.unstarted_runners(s, queue_op)  # rebuilt runners hold the op
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            assert queues.unstarted_runners(s, queue_op) == []
            coord.request_stop()
            coord.join(threads)
