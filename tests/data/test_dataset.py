"""tf.data pipelines: element order and values against NumPy / Python references and
values recorded once from TF 2.21 (`tf.compat.v1` graph mode), noted per test."""

import asyncio
import gzip
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, python_io

D = af.data.Dataset


def drain(sess, t, limit=10_000, feed=None):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(t, feed))
        except errors.OutOfRangeError:
            return out
    raise AssertionError("the dataset did not end")


def values(sess, ds):
    return drain(sess, ds.make_one_shot_iterator().get_next())


def test_slices_map_batch_order_and_shapes(sess):
    x = np.arange(10, dtype=np.float32)
    ds = D.from_tensor_slices((x, np.arange(10))).map(lambda a, b: (a * 2, b + 1)).batch(4)
    assert ds.output_types == (af.float32, af.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None], [None]]
    got = values(sess, ds)
    want_a = [x[i : i + 4] * 2 for i in (0, 4, 8)]
    assert len(got) == 3
    for (a, b), wa, i in zip(got, want_a, (0, 4, 8)):
        np.testing.assert_array_equal(a, wa)
        np.testing.assert_array_equal(b, np.arange(10)[i : i + 4] + 1)


def test_dict_elements_and_drop_remainder_static_shape(sess):
    ds = D.from_tensor_slices({"a": np.ones((7, 3), np.float32), "b": np.arange(7)})
    ds = ds.batch(3, drop_remainder=True)
    assert ds.output_shapes["a"].as_list() == [3, 3]
    got = values(sess, ds)
    assert [g["b"].tolist() for g in got] == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("args", [(5,), (2, 7), (10, 0, -3), (3, 3)])
def test_range_like_python(sess, args):
    assert values(sess, D.range(*args)) == list(range(*args))


def test_repeat_take_skip_concatenate_zip_enumerate(sess):
    assert values(sess, D.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert values(sess, D.range(10).skip(3).take(4)) == [3, 4, 5, 6]
    # TF 2.21: skip(-1) skips everything, take(-1) takes everything.
    assert values(sess, D.range(5).skip(-1)) == []
    assert values(sess, D.range(5).take(-1)) == [0, 1, 2, 3, 4]
    assert values(sess, D.range(2).concatenate(D.range(5, 7))) == [0, 1, 5, 6]
    z = values(sess, D.zip((D.range(3), D.range(10, 14))))
    assert [tuple(map(int, p)) for p in z] == [(0, 10), (1, 11), (2, 12)]
    e = values(sess, D.from_tensor_slices(np.array([7, 8], np.int32)).enumerate(3))
    assert [tuple(map(int, p)) for p in e] == [(3, 7), (4, 8)]
    assert values(sess, D.range(4).repeat().take(6)) == [0, 1, 2, 3, 0, 1]


def test_filter_flat_map_interleave_unbatch_recorded_from_tf(sess):
    assert values(sess, D.range(10).filter(lambda v: v % 3 > 0)) == [1, 2, 4, 5, 7, 8]
    assert values(sess, D.range(3).flat_map(lambda v: D.range(v))) == [0, 0, 1]
    inter = D.range(1, 6).interleave(
        lambda v: D.from_tensors(v).repeat(v), cycle_length=2, block_length=2
    )
    # TF 2.21
    assert values(sess, inter) == [1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5, 5]
    ub = D.from_tensor_slices(np.array([[1, 2], [3, 4]], np.int32)).unbatch()
    assert values(sess, ub) == [1, 2, 3, 4]


def test_padded_batch_recorded_from_tf(sess):
    ds = D.range(1, 5).map(lambda v: af.fill([v], v))
    got = values(sess, ds.padded_batch(3, padded_shapes=[None]))
    np.testing.assert_array_equal(got[0], [[1, 0, 0], [2, 2, 0], [3, 3, 3]])
    np.testing.assert_array_equal(got[1], [[4, 4, 4, 4]])
    got = values(sess, ds.padded_batch(2, [5], padding_values=af.constant(-1, af.int64)))
    np.testing.assert_array_equal(got[1], [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]])


def test_batch_of_unequal_shapes_is_invalid_argument(sess):
    ds = D.range(1, 4).prefetch(1).map(lambda v: af.fill([v], v)).prefetch(1).batch(2)
    with pytest.raises(errors.InvalidArgumentError, match="Cannot batch tensors"):
        values(sess, ds)
    # A map directly under the batch: TF's default map_and_batch_fusion's words.
    ds = D.range(1, 4).map(lambda v: af.fill([v], v)).batch(2)
    with pytest.raises(errors.InvalidArgumentError, match="Cannot add tensor to the batch"):
        values(sess, ds)


def test_shuffle_is_a_seeded_permutation_reshuffled_each_epoch(graph):
    ds = D.range(20).shuffle(8, seed=3).repeat(2)
    runs = []
    for _ in range(2):
        with af.Session(graph=graph) as s:
            runs.append(values(s, ds))
    first, second = runs[0][:20], runs[0][20:]
    assert sorted(first) == list(range(20)) and sorted(second) == list(range(20))
    assert first != list(range(20)) and first != second  # reshuffled each epoch
    assert runs[0] == runs[1]  # the same seed gives the same order in a new session
    fixed = D.range(20).shuffle(8, seed=3, reshuffle_each_iteration=False).repeat(2)
    with af.Session(graph=graph) as s:
        got = values(s, fixed)
    assert got[:20] == got[20:]


def test_shuffle_buffer_bounds_displacement(sess):
    # An element can only leave the buffer after it entered: position >= value - size.
    got = values(sess, D.range(100).shuffle(5, seed=1))
    assert sorted(got) == list(range(100))
    assert all(pos >= v - 5 for pos, v in enumerate(got))


def test_initializable_iterator_with_feeds_and_captures(sess):
    n = af.placeholder(af.int64, [])
    scale = af.placeholder(af.int64, [])
    it = D.range(n).map(lambda v: v * scale).make_initializable_iterator()
    nxt = it.get_next()
    with pytest.raises(errors.FailedPreconditionError, match="not been initialized"):
        sess.run(nxt)
    sess.run(it.initializer, {n: 3, scale: 10})
    assert drain(sess, nxt) == [0, 10, 20]
    with pytest.raises(errors.OutOfRangeError):  # again after the end
        sess.run(nxt)
    sess.run(it.initializer, {n: 2, scale: -1})  # re-initializing starts a new pass
    assert drain(sess, nxt) == [0, -1]


def test_reinitializable_iterator_switches_datasets(sess):
    train = D.range(5).batch(2)
    val = D.range(100, 103).batch(2)
    it = af.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    init_train, init_val = it.make_initializer(train), it.make_initializer(val)
    sess.run(init_train)
    assert sess.run(nxt).tolist() == [0, 1]
    sess.run(init_val)
    assert [v.tolist() for v in drain(sess, nxt)] == [[100, 101], [102]]
    with pytest.raises(TypeError):
        it.make_initializer(D.from_tensors(np.float32(1)))


def _write_examples(path, rows):
    from asyncflow import example_pb as pb

    with python_io.TFRecordWriter(str(path)) as w:
        for v, s in rows:
            ex = pb.Example(
                features=pb.Features(
                    feature={
                        "v": pb.Feature(int64_list=pb.Int64List(value=[v])),
                        "s": pb.Feature(bytes_list=pb.BytesList(value=[s])),
                    }
                )
            )
            w.write(ex.SerializeToString())


def test_tfrecord_parse_shuffle_batch_prefetch(sess, tmp_path):
    paths = []
    for f in range(3):
        p = tmp_path / f"part-{f}.tfrecord"
        _write_examples(p, [(f * 10 + i, b"x%d" % (f * 10 + i)) for i in range(10)])
        paths.append(str(p))
    spec = {"v": af.FixedLenFeature([], af.int64), "s": af.FixedLenFeature([], af.string)}
    # TF's performance guide: batch the records, then parse each batch in one op.
    ds = (
        af.data.TFRecordDataset(paths)
        .shuffle(7, seed=5)
        .batch(4)
        .map(lambda r: af.parse_example(r, spec), num_parallel_calls=4)
        .prefetch(2)
    )
    got = values(sess, ds)
    vs = np.concatenate([g["v"] for g in got]).tolist()
    ss = np.concatenate([g["s"] for g in got]).tolist()
    assert sorted(vs) == list(range(30))
    assert ss == [b"x%d" % v for v in vs]
    # Unshuffled, records come file by file in order.
    plain = values(sess, af.data.TFRecordDataset(paths).skip(9).take(2))
    parsed = [af.parse_single_example(r, {"v": spec["v"]})["v"] for r in plain]
    assert sess.run(parsed) == [9, 10]


def test_tfrecord_records_in_file_order(sess, tmp_path):
    p = tmp_path / "r.tfrecord"
    with python_io.TFRecordWriter(str(p)) as w:
        for i in range(600):  # more than one worker-thread hop of records
            w.write(b"rec%d" % i)
    assert values(sess, af.data.TFRecordDataset(str(p))) == [b"rec%d" % i for i in range(600)]


def test_text_line_and_fixed_length_datasets(sess, tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"one\ntwo\r\nthree")
    b = tmp_path / "b.txt"
    b.write_bytes(b"four\n")
    assert values(sess, af.data.TextLineDataset([str(a), str(b)])) == [
        b"one",
        b"two",
        b"three",
        b"four",
    ]
    f = tmp_path / "f.bin"
    f.write_bytes(b"HHabcdefghFF")
    ds = af.data.FixedLengthRecordDataset(str(f), 3, header_bytes=2, footer_bytes=2)
    # TF 2.21: a body that is not whole records fails before the first record; in a
    # compressed file, after the whole ones
    with pytest.raises(errors.InvalidArgumentError, match="not an exact multiple"):
        values(sess, ds)
    z = tmp_path / "f.gz"
    z.write_bytes(gzip.compress(b"HHabcdefghFF"))
    ds = af.data.FixedLengthRecordDataset(
        str(z), 3, header_bytes=2, footer_bytes=2, compression_type="GZIP"
    )
    nxt = ds.make_one_shot_iterator().get_next()
    assert [sess.run(nxt), sess.run(nxt)] == [b"abc", b"def"]
    with pytest.raises(errors.DataLossError, match="body length 8 bytes"):
        sess.run(nxt)


def test_from_generator_runs_off_the_loop(sess):
    def gen():
        for i in range(4):
            yield i, [i] * 2

    ds = D.from_generator(gen, (af.int32, af.float32), (af.TensorShape([]), af.TensorShape([2])))
    got = values(sess, ds)
    assert [int(a) for a, _ in got] == [0, 1, 2, 3]
    assert got[3][1].dtype == np.float32 and got[3][1].tolist() == [3.0, 3.0]


def test_cache_replays_the_first_pass(sess):
    ds = D.range(4).map(lambda v: af.random_uniform([], seed=1) + af.cast(v, af.float32))
    got = values(sess, ds.cache().repeat(2))
    assert got[:4] == got[4:]


def test_parallel_map_keeps_order_and_errors_reach_get_next(sess):
    ds = D.range(50).map(lambda v: v * v, num_parallel_calls=8).prefetch(3)
    assert values(sess, ds) == [v * v for v in range(50)]
    bad = D.from_tensor_slices(np.array([b"1", b"x"], object)).map(
        lambda s: af.string_to_number(s)
    )
    nxt = bad.make_one_shot_iterator().get_next()
    assert sess.run(nxt) == 1.0
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(nxt)


def test_get_next_suspends_without_blocking_the_loop(graph):
    release = threading.Event()

    def gen():
        yield 1
        release.wait(timeout=30)  # blocks its worker thread, never the loop
        yield 2

    nxt = D.from_generator(gen, af.int64).make_one_shot_iterator().get_next()

    async def main():
        async with af.Session(graph=graph) as s:
            assert await s.arun(nxt) == 1
            step = asyncio.ensure_future(s.arun(nxt))
            for _ in range(20):  # the loop keeps running while the step waits
                await asyncio.sleep(0)
            assert not step.done()
            release.set()
            assert await step == 2

    asyncio.run(main())


def test_async_for_over_a_dataset(graph):
    ds = D.range(5).map(lambda v: v * 2)

    async def main():
        async with af.Session(graph=graph) as s:
            return [int(v) async for v in ds.aiterate(s)]

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]


def test_experimental_helpers(sess):
    ds = D.range(7).apply(af.data.experimental.map_and_batch(lambda v: v + 1, 3))
    assert [v.tolist() for v in values(sess, ds)] == [[1, 2, 3], [4, 5, 6], [7]]
    ds = D.range(3).apply(af.data.experimental.shuffle_and_repeat(3, 2, seed=1))
    got = values(sess, ds)
    assert sorted(got[:3]) == [0, 1, 2] and sorted(got[3:]) == [0, 1, 2]


def test_list_files(sess, tmp_path):
    for n in ("b.txt", "a.txt", "c.dat"):
        (tmp_path / n).write_text("x")
    ds = D.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert [p.decode().rsplit("/", 1)[1] for p in values(sess, ds)] == ["a.txt", "b.txt"]


def test_map_of_map_is_one_fused_call(sess):
    scale = af.placeholder(af.int64, [])
    ds = D.range(5).map(lambda v: v + 1).map(lambda v: (v, v * scale)).map(lambda a, b: a + b)
    assert ds._variant.op.type == "MapDataset"
    assert ds._variant.op.inputs[0].op.type == "RangeDataset"  # one map op over the range
    it = ds.make_initializable_iterator()
    sess.run(it.initializer, {scale: 10})
    assert drain(sess, it.get_next()) == [(v + 1) * 11 for v in range(5)]


def test_feedable_iterator_from_string_handle(sess):
    train = D.range(100).repeat()
    val = D.range(1000, 1003)
    handle = af.placeholder(af.string, [])
    it = af.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
    nxt = it.get_next()
    train_it = train.make_one_shot_iterator()
    val_it = val.make_initializable_iterator()
    th, vh = sess.run([train_it.string_handle(), val_it.string_handle()])
    assert [sess.run(nxt, {handle: th}) for _ in range(3)] == [0, 1, 2]
    sess.run(val_it.initializer)
    assert drain(sess, nxt, feed={handle: vh}) == [1000, 1001, 1002]
    assert sess.run(nxt, {handle: th}) == 3  # the training iterator kept its place
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(nxt, {handle: b"nonsense"})


def _write_records(path, records, options=None):
    with python_io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)


def test_tfrecord_chunks_keep_order_across_chunks_and_shuffle_like_range(sess, tmp_path):
    # 1 KB records: the file spans several read chunks, records straddle their edges.
    recs = [b"%05d" % i + bytes(995 + i % 7) for i in range(700)]
    p = tmp_path / "big.tfrecord"
    _write_records(p, recs)
    assert values(sess, af.data.TFRecordDataset(str(p))) == recs
    # Records shuffled and batched in chunks come in the order elements do one by one.
    got = values(sess, af.data.TFRecordDataset(str(p)).shuffle(50, seed=4).batch(64))
    order = values(sess, D.range(700).shuffle(50, seed=4))
    assert [r for b in got for r in b.tolist()] == [recs[i] for i in order]
    assert [len(b) for b in got] == [64] * 10 + [60]
    one = values(sess, af.data.TFRecordDataset(str(p)).shuffle(50, seed=4).take(3))
    assert one == [recs[i] for i in order[:3]]


def test_tfrecord_compressed_missing_and_corrupt(sess, tmp_path):
    recs = [b"r%d" % i for i in range(300)]
    gz = tmp_path / "a.tfrecord.gz"
    _write_records(gz, recs, python_io.TFRecordOptions("GZIP"))
    assert values(sess, af.data.TFRecordDataset(str(gz), compression_type="GZIP")) == recs
    with pytest.raises(errors.NotFoundError):
        values(sess, af.data.TFRecordDataset(str(tmp_path / "nope.tfrecord")))
    bad = tmp_path / "bad.tfrecord"
    _write_records(bad, recs)
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF  # damage one record in the middle
    bad.write_bytes(bytes(data))
    nxt = af.data.TFRecordDataset(str(bad)).make_one_shot_iterator().get_next()
    got = []
    with pytest.raises(errors.DataLossError):
        for _ in range(400):
            got.append(sess.run(nxt))
    assert 100 < len(got) < 300 and got == recs[: len(got)]  # the good records first


@pytest.mark.parametrize("parallel", [None, 3])
def test_prefetched_map_whose_kernel_suspends(sess, tmp_path, parallel):
    """A map function in a prefetch (or parallel-map) Task runs as a straight-line
    program; ReadFile suspends it mid-way (the read goes to a worker thread), and the
    elements still come in order with their values, epoch after epoch."""
    paths = []
    for i in range(7):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * (i + 1))
        paths.append(str(p))
    ds = (
        af.data.Dataset.from_tensor_slices(paths)
        .map(lambda f: af.strings.length(af.read_file(f)) * 2, num_parallel_calls=parallel)
        .prefetch(2)
    )
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    for _ in range(2):
        sess.run(it.initializer)
        assert [int(sess.run(nxt)) for _ in range(7)] == [2 * (i + 1) for i in range(7)]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(nxt)


def test_map_returning_a_list_gives_a_tuple():
    # TF 2.21 (tf.compat.v1): Dataset.range(3).map(lambda x: [x, x * 2]) has output_types
    # (tf.int64, tf.int64) and yields (0, 0), (1, 2), ... -- a list of results is a
    # tuple of them, not one stacked tensor.
    with af.Graph().as_default(), af.Session() as sess:
        ds = af.data.Dataset.range(3).map(lambda x: [x, x * 2])
        assert ds.output_types == (af.int64, af.int64)
        nxt = af.data.make_one_shot_iterator(ds).get_next()
        assert isinstance(nxt, tuple)
        assert [tuple(int(v) for v in sess.run(nxt)) for _ in range(3)] == [(0, 0), (1, 2), (2, 4)]
