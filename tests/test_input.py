"""Input producers and batching end to end: queue runners, Coordinator, epochs.

Every pipeline ends the TF1 way: after the last epoch the producer's runner closes its
queue, consumers drain it and then get OutOfRangeError.  The queue-based tests are
skipped until the queue module (ops/data_flow_ops.py) and the queue runners exist.
"""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, python_io
from asyncflow.train import input as inp


def test_count_up_to_and_limit(sess):
    v = af.Variable(np.int64(0), trainable=False)
    c = inp.count_up_to(v, 2)
    sess.run(v.initializer)
    assert [sess.run(c), sess.run(c)] == [0, 1]
    with pytest.raises(errors.OutOfRangeError, match="Reached limit of 2"):
        sess.run(c)


def test_limit_epochs(sess):
    t = inp.limit_epochs(af.constant([1, 2]), num_epochs=2)
    sess.run(af.local_variables_initializer())
    assert sess.run(t).tolist() == [1, 2]
    assert sess.run(t).tolist() == [1, 2]
    with pytest.raises(errors.OutOfRangeError):
        sess.run(t)
    assert inp.limit_epochs(t, None) is t
    with pytest.raises(ValueError):
        inp.limit_epochs(t, 0)


def test_match_filenames_once(sess, tmp_path):
    for n in ("b.rec", "a.rec", "c.txt"):
        (tmp_path / n).write_bytes(b"")
    files = inp.match_filenames_once(str(tmp_path / "*.rec"))
    assert files in af.local_variables()
    sess.run(af.local_variables_initializer())
    assert [f.decode().rsplit("/", 1)[1] for f in sess.run(files)] == ["a.rec", "b.rec"]


def test_string_input_producer_build_errors(graph):
    with pytest.raises(ValueError, match="non-null"):
        inp.string_input_producer([])
    with pytest.raises(ValueError):
        inp.shuffle_batch([af.constant(1.0)], 2, capacity=10, min_after_dequeue=10)


# -- with queues ---------------------------------------------------------------------------


class Runners:
    """start_queue_runners with a Coordinator; stops and joins them at exit."""

    def __init__(self, sess):
        from asyncflow.train import queue_runner
        from asyncflow.train.coordinator import Coordinator

        self.coord = Coordinator()
        self.threads = queue_runner.start_queue_runners(sess=sess, coord=self.coord)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.coord.request_stop()
        self.coord.join(self.threads)


def drain(sess, t, limit=1000):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(t))
        except errors.OutOfRangeError:
            return out
    raise AssertionError("the input did not end")


def test_string_input_producer_epochs_in_order(sess):
    q = inp.string_input_producer(["a", "b", "c"], num_epochs=2, shuffle=False)
    name = q.dequeue()
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        assert drain(sess, name) == [b"a", b"b", b"c"] * 2


def test_string_input_producer_shuffles_each_epoch(sess):
    names = [str(i) for i in range(20)]
    q = inp.string_input_producer(names, num_epochs=3, shuffle=True, seed=5)
    name = q.dequeue()
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        got = drain(sess, name)
    assert len(got) == 60
    epochs = [got[i : i + 20] for i in (0, 20, 40)]
    assert all(sorted(e) == sorted(n.encode() for n in names) for e in epochs)
    assert epochs[0] != [n.encode() for n in names]


def test_slice_input_producer_keeps_rows_together(sess):
    x = np.arange(10, dtype=np.int32)
    y = x * 10
    xs, ys = inp.slice_input_producer([x, y], num_epochs=1, shuffle=True, seed=3)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        pairs = drain(sess, [xs, ys])
    assert sorted(int(a) for a, _ in pairs) == list(range(10))
    assert all(b == a * 10 for a, b in pairs)


@pytest.mark.parametrize("smaller", [True, False])
def test_batch_final_batch(sess, smaller):
    q = inp.range_input_producer(10, num_epochs=1, shuffle=False)
    batch = inp.batch([q.dequeue()], 4, allow_smaller_final_batch=smaller)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        got = [b.tolist() for b in drain(sess, batch)]
    want = [[0, 1, 2, 3], [4, 5, 6, 7]] + ([[8, 9]] if smaller else [])
    assert got == want
    assert batch.shape.as_list() == [None if smaller else 4]  # (one tensor: TF1 returns it)


def test_batch_dict_and_threads_exactly_once(sess):
    q = inp.range_input_producer(100, num_epochs=1, shuffle=False)
    i = q.dequeue()
    out = inp.batch({"i": i, "sq": i * i}, 7, num_threads=4, allow_smaller_final_batch=True)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        batches = drain(sess, out)
    ids = np.concatenate([b["i"] for b in batches])
    assert sorted(ids.tolist()) == list(range(100))
    for b in batches:
        np.testing.assert_array_equal(b["sq"], b["i"] ** 2)


def test_shuffle_batch_every_element_once(sess):
    q = inp.range_input_producer(64, num_epochs=1, shuffle=False)
    b = inp.shuffle_batch(  # (a list of one tensor batches to a tensor, as TF1)
        [q.dequeue()], 8, capacity=32, min_after_dequeue=8, seed=1,
        allow_smaller_final_batch=True,
    )  # fmt: skip
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        got = np.concatenate(drain(sess, b)).tolist()
    assert sorted(got) == list(range(64)) and got != list(range(64))


def test_batch_join_and_enqueue_many(sess):
    a = af.constant([[1, 1], [2, 2]], af.int32)
    b = af.constant([[3, 3], [4, 4]], af.int32)
    q = inp.range_input_producer(3, num_epochs=1, shuffle=False)  # ends the input
    gate = q.dequeue()
    with af.control_dependencies([gate]):
        a1, b1 = af.identity(a), af.identity(b)
    out = inp.batch_join([[a1], [b1]], 4, enqueue_many=True, allow_smaller_final_batch=True)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        rows = np.concatenate(drain(sess, out))
    # The two enqueue loops share the 3 gate elements (as in TF 2.21, which gives e.g.
    # [(1,1),(2,2),(3,3),(3,3),(4,4),(4,4)]): 3 enqueues of 2 whole rows in all.
    got = [tuple(r) for r in rows.tolist()]
    assert len(got) == 6
    assert got.count((1, 1)) == got.count((2, 2))
    assert got.count((3, 3)) == got.count((4, 4))
    assert got.count((1, 1)) + got.count((3, 3)) == 3


def test_batch_dynamic_pad(sess):
    q = inp.range_input_producer(4, num_epochs=1, shuffle=False)
    n = q.dequeue()
    seq = af.range(n + 1)
    out = inp.batch([seq], 4, dynamic_pad=True)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        (got,) = drain(sess, out)
    np.testing.assert_array_equal(got, [[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 1, 2, 3]])


def test_maybe_batch_keeps_selected(sess):
    q = inp.range_input_producer(10, num_epochs=1, shuffle=False)
    i = q.dequeue()
    out = inp.maybe_batch([i], af.equal(i % 2, 0), 5, allow_smaller_final_batch=True)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        got = np.concatenate([b for (b,) in drain(sess, [out])]).tolist()
    assert got == [0, 2, 4, 6, 8]


def test_tfrecord_pipeline_end_to_end(sess, tmp_path):
    from asyncflow import example_pb as pb
    from asyncflow.ops import parsing_ops, reader_ops

    paths = []
    for f in range(3):
        p = str(tmp_path / f"part-{f}.tfrecord")
        with python_io.TFRecordWriter(p) as w:
            for i in range(10):
                v = f * 10 + i
                ex = pb.Example(
                    features=pb.Features(
                        feature={"v": pb.Feature(int64_list=pb.Int64List(value=[v]))}
                    )
                )
                w.write(ex.SerializeToString())
        paths.append(p)
    names = inp.string_input_producer(paths, num_epochs=2, shuffle=True, seed=2)
    _, ser = reader_ops.TFRecordReader().read_up_to(names, 4)
    parsed = parsing_ops.parse_example(ser, {"v": parsing_ops.FixedLenFeature([], af.int64)})
    out = inp.batch([parsed["v"]], 6, enqueue_many=True, allow_smaller_final_batch=True)
    sess.run(af.local_variables_initializer())
    with Runners(sess):
        got = np.concatenate([b for (b,) in drain(sess, [out])]).tolist()
    assert sorted(got) == sorted(list(range(30)) * 2)


def test_queue_pipelines_add_tfs_fill_summaries():
    # Recorded from TF 2.21 (TF1's input.py): each queue's fill fraction is a scalar
    # summary in SUMMARIES, so merge_all logs it.
    cases = [
        (lambda: af.train.string_input_producer(["a", "b"]), "input_producer/fraction_of_32_full"),
        (lambda: af.train.range_input_producer(5), "input_producer/fraction_of_32_full"),
        (
            lambda: af.train.slice_input_producer([af.constant([1, 2])]),
            "input_producer/input_producer/fraction_of_32_full",
        ),
        (
            lambda: af.train.input_producer(af.constant([1, 2]), summary_name="s"),
            "input_producer/s",
        ),
        (lambda: af.train.batch([af.constant(1)], 2, capacity=8), "batch/fraction_of_8_full"),
        (lambda: af.train.batch_join([[af.constant(1)]], 2), "batch_join/fraction_of_32_full"),
        (
            lambda: af.train.maybe_batch([af.constant(1)], af.constant(True), 2),
            "batch/fraction_of_32_full",
        ),
        (
            lambda: af.train.shuffle_batch([af.constant(1)], 2, 30, 20),
            "shuffle_batch/fraction_over_20_of_10_full",
        ),
    ]
    for build, name in cases:
        with af.Graph().as_default():
            build()
            summaries = af.get_collection(af.GraphKeys.SUMMARIES)
            assert [s.op.name for s in summaries] == [name]
    with af.Graph().as_default():
        af.train.batch([af.constant(1)], 2, capacity=8)
        with af.Session() as sess:
            got = sess.run(af.get_collection(af.GraphKeys.SUMMARIES)[0])
        assert got == b"\n\x1f\n\x18batch/fraction_of_8_full\x15\x00\x00\x00\x00"  # TF's bytes


def test_batching_a_tensor_of_unknown_rank_says_tfs_words():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="^Cannot infer Tensor's rank: "):
            af.train.batch([af.placeholder(af.float32)], batch_size=2)
