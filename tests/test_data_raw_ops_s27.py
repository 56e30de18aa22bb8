"""tf.data raw ops of other TF versions (ops/dataset_raw.py, ops/dataset_raw_iterators.py)
built with `tf.raw_ops` in TF1 graphs, and meta graphs TF 2.21 wrote that use them.

Every expected value and error below was recorded from TF 2.21 (`tensorflow.compat.v1`,
the same raw-op calls in a graph, drained through a named `Iterator`); the meta graphs
and their elements come from tests/fixtures/record_data_raw_ops_s27_tf.py.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos.summary_pb2 import Summary
from asyncflow.registry import get_op_def

pytestmark = pytest.mark.timeout(60)

R = tf.raw_ops
I64 = [tf.int64]
S0 = [tf.TensorShape([])]
V1 = [tf.TensorShape([None])]
END = "OutOfRangeError: End of sequence"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "data_raw_ops_s27"


def _var(ds):
    return tf.data.experimental.to_variant(ds)


def _range(n):
    return _var(tf.data.Dataset.range(n))


def _err(e) -> str:
    """The error's class and message, without TF1's node marker."""
    return f"{type(e).__name__}: {e.message.split(chr(10))[0]}"


def _value(x):
    # (np.asarray of a bytes value would drop its trailing NUL bytes)
    return x if isinstance(x, bytes) else np.asarray(x).tolist()


def _drain(v, types=I64, shapes=S0, runs=1, limit=40):
    """Each pass's elements (lists of components), then END or the error ending it."""
    it = R.Iterator(shared_name="drain", container="", output_types=types, output_shapes=shapes)
    init = R.MakeIterator(dataset=v, iterator=it)
    nxt = R.IteratorGetNext(iterator=it, output_types=types, output_shapes=shapes)
    passes = []
    with tf.Session() as s:
        for _ in range(runs):
            out = []
            try:
                s.run(init)
                for _ in range(limit):
                    out.append([_value(x) for x in s.run(nxt)])
            except tf.errors.OpError as e:
                out.append(_err(e))
            passes.append(out)
    return passes if runs > 1 else passes[0]


def _flat(*values):
    return [[v] for v in values] + [END]


def _seeds(seed, seed2, reshuffle):
    return R.AnonymousSeedGenerator(
        seed=tf.constant(seed, tf.int64), seed2=tf.constant(seed2, tf.int64), reshuffle=reshuffle
    ).handle


# -- batching, shuffles -------------------------------------------------------------------------


def test_batch_and_padded_batch_v1():
    with tf.Graph().as_default():
        v = R.BatchDataset(input_dataset=_range(7), batch_size=3, output_types=I64,
                           output_shapes=V1)  # fmt: skip
        # (TF 2.21 cannot iterate its own BatchDataset in a graph: the kernel serializes
        # itself with V2's inputs, an InternalError; the elements are the op's batches.)
        assert _drain(v, I64, V1) == [[[0, 1, 2]], [[3, 4, 5]], [[6]], END]
        bad = R.BatchDataset(input_dataset=_range(7), batch_size=0, output_types=I64,
                             output_shapes=V1)  # fmt: skip
        assert _drain(bad, I64, V1) == [
            "InvalidArgumentError: Batch size must be greater than zero."
        ]
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x))
        bad = R.PaddedBatchDataset(
            input_dataset=_var(ds), batch_size=2, padded_shapes=[tf.constant(5, tf.int64)],
            padding_values=[tf.constant(-1, tf.int64)], output_shapes=[tf.TensorShape([None, 5])],
        )  # fmt: skip
        assert _drain(bad, I64, [tf.TensorShape([None, 5])]) == [
            "InvalidArgumentError: All padded shapes must be vectors"
        ]


def test_parallel_batch():
    with tf.Graph().as_default():
        v = R.ParallelBatchDataset(
            input_dataset=_range(7), batch_size=3, num_parallel_calls=2, drop_remainder=True,
            output_types=I64, output_shapes=[tf.TensorShape([3])],
        )  # fmt: skip
        assert _drain(v, I64, [tf.TensorShape([3])]) == [[[0, 1, 2]], [[3, 4, 5]], END]


SHUFFLED_7_9 = _flat(2, 1, 4, 5, 3, 8, 9, 0, 6, 7)  # seeds (7, 9) through a reshuffling stream
FIXED_7_9 = _flat(3, 1, 4, 2, 5, 7, 8, 6, 9, 0)  # seeds (7, 9) themselves


@pytest.mark.parametrize(
    "make, want",
    [
        (
            lambda: R.ShuffleDatasetV2(
                input_dataset=_range(10), buffer_size=4, seed_generator=_seeds(7, 9, True),
                output_types=I64, output_shapes=S0,
            ),
            SHUFFLED_7_9,
        ),
        (
            lambda: R.ShuffleDatasetV3(
                input_dataset=_range(10), buffer_size=4, seed=7, seed2=9,
                seed_generator=_seeds(7, 9, False), output_types=I64, output_shapes=S0,
            ),
            FIXED_7_9,
        ),
        (
            lambda: R.ShuffleDatasetV3(
                input_dataset=_range(10), buffer_size=4, seed=7, seed2=9,
                seed_generator=R.DummySeedGenerator(), output_types=I64, output_shapes=S0,
            ),
            SHUFFLED_7_9,
        ),
        (
            lambda: R.ShuffleDatasetV3(
                input_dataset=_range(10), buffer_size=4, seed=7, seed2=9,
                seed_generator=R.DummySeedGenerator(), reshuffle_each_iteration=False,
                output_types=I64, output_shapes=S0,
            ),
            FIXED_7_9,
        ),
    ],
)  # fmt: skip
def test_seed_generator_shuffles(make, want):
    with tf.Graph().as_default():
        # An anonymous seed generator is new at every run: each pass starts the same.
        assert _drain(make(), runs=2) == [want, want]


def test_shuffle_and_repeat():
    with tf.Graph().as_default():
        v = R.ShuffleAndRepeatDataset(
            input_dataset=_range(5), buffer_size=3, seed=1, seed2=2, count=3, output_types=I64,
            output_shapes=S0,
        )  # fmt: skip
        assert _drain(v) == _flat(1, 3, 2, 0, 4, 1, 3, 4, 0, 2, 1, 3, 0, 4, 2)
        v = R.ShuffleAndRepeatDataset(
            input_dataset=_range(5), buffer_size=3, seed=1, seed2=2, count=2,
            reshuffle_each_iteration=False, output_types=I64, output_shapes=S0,
        )  # fmt: skip
        assert _drain(v) == _flat(2, 3, 0, 4, 1, 2, 3, 0, 4, 1)
        v = R.ShuffleAndRepeatDatasetV2(
            input_dataset=_range(5), buffer_size=3, seed=1, seed2=2, count=2,
            seed_generator=_seeds(1, 2, True), output_types=I64, output_shapes=S0,
        )  # fmt: skip
        assert _drain(v) == _flat(1, 3, 2, 0, 4, 1, 3, 4, 0, 2)
        v = R.ShuffleAndRepeatDatasetV2(
            input_dataset=_range(5), buffer_size=3, seed=1, seed2=2, count=2,
            seed_generator=_seeds(1, 2, False), output_types=I64, output_shapes=S0,
        )  # fmt: skip
        assert _drain(v) == _flat(2, 3, 0, 4, 1, 2, 3, 0, 4, 1)
        bad = R.ShuffleAndRepeatDataset(
            input_dataset=_range(5), buffer_size=0, seed=1, seed2=2, count=2, output_types=I64,
            output_shapes=S0,
        )  # fmt: skip
        assert _drain(bad) == [
            "InvalidArgumentError: buffer_size must be greater than zero or UNKNOWN_CARDINALITY"
        ]


def test_sampling():
    with tf.Graph().as_default():
        v = R.SamplingDataset(input_dataset=_range(20), rate=0.5, seed=1, seed2=2,
                              output_types=I64, output_shapes=S0)  # fmt: skip
        assert _drain(v) == _flat(0, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 17)
        v = R.SamplingDataset(input_dataset=_range(12), rate=0.3, seed=5, seed2=0,
                              output_types=I64, output_shapes=S0)  # fmt: skip
        assert _drain(v, runs=2) == [_flat(0, 6, 7, 10, 11)] * 2


# -- stages that pass elements through ----------------------------------------------------------


def test_pass_through_stages():
    with tf.Graph().as_default():
        v = _range(4)
        kw = {"output_types": I64, "output_shapes": S0}
        v = R.OptimizeDataset(input_dataset=v, optimizations=["map_fusion"], **kw)
        v = R.OptimizeDatasetV2(
            input_dataset=v, optimizations_enabled=[], optimizations_disabled=[],
            optimizations_default=["noop_elimination"], **kw,
        )  # fmt: skip
        v = R.ModelDataset(input_dataset=v, **kw)
        v = R.FinalizeDataset(input_dataset=v, **kw)
        v = R.MaxIntraOpParallelismDataset(input_dataset=v, max_intra_op_parallelism=1, **kw)
        v = R.PrivateThreadPoolDataset(input_dataset=v, num_threads=2, **kw)
        v = R.NonSerializableDataset(input_dataset=v, **kw)
        v = R.SleepDataset(input_dataset=v, sleep_microseconds=10, **kw)
        v = R.LatencyStatsDataset(input_dataset=v, tag="t", **kw)
        v = R.BytesProducedStatsDataset(input_dataset=v, tag="t", **kw)
        pool = R.ThreadPoolHandle(num_threads=2, display_name="p")
        v = R.ThreadPoolDataset(input_dataset=v, thread_pool=pool, **kw)
        v = R.OptionsDataset(input_dataset=v, serialized_options=b"", **kw)
        v = R.ExperimentalSleepDataset(input_dataset=v, sleep_microseconds=0, **kw)
        v = R.ChooseFastestDataset(input_datasets=[v, _range(4)], num_experiments=2, **kw)
        assert _drain(v) == _flat(0, 1, 2, 3)
        # TF takes a parallelism of 0; negative pool sizes and pauses are refused
        v = R.MaxIntraOpParallelismDataset(input_dataset=_range(3), max_intra_op_parallelism=0,
                                           **kw)  # fmt: skip
        assert _drain(v) == _flat(0, 1, 2)
        assert _drain(
            R.PrivateThreadPoolDataset(input_dataset=_range(3), num_threads=-1, **kw)
        ) == ["InvalidArgumentError: `num_threads` must be >= 0"]
        assert _drain(R.SleepDataset(input_dataset=_range(3), sleep_microseconds=-1, **kw)) == [
            "InvalidArgumentError: `sleep_microseconds` must be >= 0"
        ]


# -- windows, rebatching, sharding ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, drop, want",
    [
        ((3, 2, 1), True, [[[0, 1, 2]], [[2, 3, 4]], [[4, 5, 6]], END]),
        ((3, 2, 2), False, [[[0, 2, 4]], [[2, 4, 6]], [[4, 6]], [[6]], END]),
        ((0, 2, 2), True, "InvalidArgumentError: Window size must be greater than zero."),
        ((2, 0, 1), True, "InvalidArgumentError: Window shift must be greater than zero."),
        ((2, 1, 0), True, "InvalidArgumentError: window_stride must be greater than zero."),
        ((2, -1, 1), True, "InvalidArgumentError: Window shift must be greater than zero."),
    ],
)
def test_sliding_window(args, drop, want):
    with tf.Graph().as_default():
        v = R.SlidingWindowDataset(
            input_dataset=_range(7), window_size=args[0], window_shift=args[1],
            window_stride=args[2], drop_remainder=drop, output_types=I64, output_shapes=V1,
        )  # fmt: skip
        if isinstance(want, str):
            assert _drain(v, I64, V1) == [want]
        else:
            assert _drain(v, I64, V1) == want


def test_sliding_window_of_tuples_and_experimental_name():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(5).map(lambda x: (x, tf.cast(x, tf.float32) * 0.5))
        types = [tf.int64, tf.float32]
        v = R.SlidingWindowDataset(
            input_dataset=_var(ds), window_size=2, window_shift=3, window_stride=1,
            drop_remainder=False, output_types=types, output_shapes=V1 * 2,
        )  # fmt: skip
        assert _drain(v, types, V1 * 2) == [[[0, 1], [0.0, 0.5]], [[3, 4], [1.5, 2.0]], END]
        v = R.ExperimentalSlidingWindowDataset(
            input_dataset=_range(5), window_size=2, window_shift=2, window_stride=1,
            output_types=I64, output_shapes=V1,
        )  # fmt: skip
        assert _drain(v, I64, V1) == [[[0, 1]], [[2, 3]], END]


@pytest.mark.parametrize(
    "n, batch, replicas, want",
    [
        (10, 4, 2, [[0, 1], [2, 3], [4, 5], [6, 7], [8], [9]]),
        (7, 3, 2, [[0, 1], [2], [3, 4], [5], [6], []]),
        (7, 5, 3, [[0, 1], [2, 3], [4], [5], [6], []]),
    ],
)
def test_rebatch_v1(n, batch, replicas, want):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(n).batch(batch)
        v = R.RebatchDataset(input_dataset=_var(ds), num_replicas=replicas, output_types=I64,
                             output_shapes=V1)  # fmt: skip
        assert _drain(v, I64, V1) == [[b] for b in want] + [END]


@pytest.mark.parametrize(
    "n, batch, sizes, drop, want",
    [
        (10, 4, [2, 1], False, [[0, 1], [2], [3, 4], [5], [6, 7], [8], [9]]),
        (7, 3, [2, 2], True, [[0, 1], [2, 3], [4, 5]]),
        (7, 3, [4, 0], False, [[0, 1, 2, 3], [], [4, 5, 6]]),
    ],
)
def test_rebatch_v2(n, batch, sizes, drop, want):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(n).batch(batch)
        v = R.RebatchDatasetV2(input_dataset=_var(ds), batch_sizes=sizes, drop_remainder=drop,
                               output_types=I64, output_shapes=V1)  # fmt: skip
        assert _drain(v, I64, V1) == [[b] for b in want] + [END]


def _write_shards(tmp_path, files=3, records=2):
    paths = []
    for k in range(files):
        paths.append(str(tmp_path / f"s{k}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for j in range(records):
                w.write(f"f{k}r{j}".encode())
    return paths


def test_auto_shard(tmp_path):
    kw = {"output_types": I64, "output_shapes": S0}
    with tf.Graph().as_default():
        v = R.AutoShardDataset(input_dataset=_range(10), num_workers=3, index=1, **kw)
        assert _drain(v) == _flat(1, 4, 7)  # no files: the elements are sharded
        v = R.ExperimentalAutoShardDataset(input_dataset=_range(10), num_workers=3, index=1,
                                           auto_shard_policy=-1, **kw)  # fmt: skip
        assert _drain(v) == _flat(*range(10))  # OFF
        bad = R.AutoShardDataset(input_dataset=_range(10), num_workers=3, index=3, **kw)
        assert _drain(bad) == ["InvalidArgumentError: index must be between 0 and 2"]
    paths = _write_shards(tmp_path)
    for policy, workers, index, want in [
        (0, 2, 0, [b"f0r0", b"f0r1", b"f2r0", b"f2r1"]),  # AUTO: files 0 and 2
        (2, 2, 0, [b"f0r0", b"f1r0", b"f2r0"]),  # DATA: every other record
        (1, 4, 3, []),  # FILE, more workers than files
    ]:
        with tf.Graph().as_default():
            v = R.AutoShardDataset(
                input_dataset=_var(tf.data.TFRecordDataset(paths)), num_workers=workers,
                index=index, auto_shard_policy=policy, output_types=[tf.string],
                output_shapes=S0,
            )  # fmt: skip
            assert _drain(v, [tf.string]) == _flat(*want)


# -- sources --------------------------------------------------------------------------------------


def test_list_and_sparse_slices():
    with tf.Graph().as_default():
        c = [tf.constant(1, tf.int64), tf.constant(2.0), tf.constant(3, tf.int64),
             tf.constant(4.0)]  # fmt: skip
        types = [tf.int64, tf.float32]
        v = R.ListDataset(tensors=c, output_types=types, output_shapes=S0 * 2)
        assert _drain(v, types, S0 * 2) == [[1, 2.0], [3, 4.0], END]
        v = R.SparseTensorSliceDataset(
            indices=tf.constant([[0, 0], [2, 1], [2, 3]], tf.int64),
            values=tf.constant([1.5, 2.5, 3.5]), dense_shape=tf.constant([4, 5], tf.int64),
        )  # fmt: skip
        types = [tf.int64, tf.float32, tf.int64]
        shapes = [tf.TensorShape([None, 1]), tf.TensorShape([None]), tf.TensorShape([1])]
        assert _drain(v, types, shapes) == [
            [[[0]], [1.5], [5]],
            [[], [], [5]],
            [[[1], [3]], [2.5, 3.5], [5]],
            [[], [], [5]],
            END,
        ]
        bad = R.SparseTensorSliceDataset(
            indices=tf.constant([[2, 0], [0, 1]], tf.int64), values=tf.constant([1.5, 2.5]),
            dense_shape=tf.constant([4, 5], tf.int64),
        )  # fmt: skip
        assert _drain(bad, types, shapes) == [
            "UnimplementedError: The SparseTensor must be ordered in the batch dimension; "
            "handling arbitrarily ordered input is not currently supported."
        ]


def test_v1_file_readers(tmp_path):
    fixed = tmp_path / "a.bin"
    fixed.write_bytes(b"HHabcdefghiF")
    paths = _write_shards(tmp_path, files=1, records=3)
    with tf.Graph().as_default():
        # (TF 2.21 cannot iterate these v1 readers in a graph: their kernels serialize
        # themselves with the V2 inputs, an InternalError; the records are the files'.)
        v = R.FixedLengthRecordDataset(filenames=[str(fixed)], header_bytes=2, record_bytes=3,
                                       footer_bytes=1, buffer_size=0)  # fmt: skip
        assert _drain(v, [tf.string]) == _flat(b"abc", b"def", b"ghi")
        v = R.TFRecordDatasetV2(filenames=paths, compression_type="", buffer_size=0,
                                byte_offsets=tf.constant([], tf.int64))  # fmt: skip
        assert _drain(v, [tf.string]) == _flat(b"f0r0", b"f0r1", b"f0r2")
        # byte offsets: reading starts at a record's first byte (a record here is
        # 16 bytes of length and CRCs plus its 4 bytes)
        v = R.TFRecordDatasetV2(filenames=paths, compression_type="", buffer_size=0,
                                byte_offsets=tf.constant([20], tf.int64))  # fmt: skip
        assert _drain(v, [tf.string]) == _flat(b"f0r1", b"f0r2")


def test_matching_files(tmp_path):
    (tmp_path / "sub").mkdir()
    for n in ["z.txt", "b.txt", "sub/c.txt", "a.bin"]:
        (tmp_path / n).write_text("x")
    d = str(tmp_path)
    with tf.Graph().as_default():
        v = R.MatchingFilesDataset(patterns=[f"{d}/*.txt", f"{d}/*/c.txt", f"{d}/b.txt"])
        want = [f"{d}/b.txt", f"{d}/z.txt", f"{d}/sub/c.txt", f"{d}/b.txt"]
        assert _drain(v, [tf.string]) == _flat(*(p.encode() for p in want))
        v = R.ExperimentalMatchingFilesDataset(patterns=f"{d}/z.*")
        assert _drain(v, [tf.string]) == _flat(f"{d}/z.txt".encode())
        v = R.MatchingFilesDataset(patterns=[f"{d}/*.none"])
        assert _drain(v, [tf.string]) == ["NotFoundError: Don't find any matched files"]
        v = R.MatchingFilesDataset(patterns=[f"{d}/nodir/*.x"])
        assert _drain(v, [tf.string]) == [f"NotFoundError: {d}/nodir; No such file or directory"]


# -- random access, compression, experimental names -----------------------------------------------


def test_get_element_at_index():
    with tf.Graph().as_default():
        at = [
            R.GetElementAtIndex(
                dataset=_range(5),
                index=tf.constant(i, tf.int64),
                output_types=I64,
                output_shapes=S0,
            )  # fmt: skip
            for i in (3, 7, -1)
        ]
        filtered = _var(tf.data.Dataset.range(5).filter(lambda x: x > 1))
        at.append(R.GetElementAtIndex(dataset=filtered, index=tf.constant(1, tf.int64),
                                      output_types=I64, output_shapes=S0))  # fmt: skip
        with tf.Session() as s:
            assert s.run(at[0]) == [3]
            got = []
            for t in at[1:]:
                with pytest.raises(tf.errors.OpError) as e:
                    s.run(t)
                got.append(_err(e.value))
    assert got == [
        "OutOfRangeError: Index out of range [0, 5):7",
        "OutOfRangeError: Index out of range [0, 5):-1",
        "UnimplementedError: Random access is not implemented for dataset "
        "FilterDatasetOp::Dataset",
    ]


def test_compress_and_wrap():
    with tf.Graph().as_default():
        c = R.CompressElement(components=[tf.constant([1, 2], tf.int64), tf.constant("ab")])
        shapes = [tf.TensorShape([2]), tf.TensorShape([])]
        u = R.UncompressElement(compressed=c, output_types=[tf.int64, tf.string],
                                output_shapes=shapes)  # fmt: skip
        with tf.Session() as s:
            a, b = s.run(u)
        assert a.tolist() == [1, 2] and b == b"ab"
        w = R.UnwrapDatasetVariant(input_handle=R.WrapDatasetVariant(input_handle=_range(2)))
        assert _drain(w) == _flat(0, 1)


def test_experimental_names():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(tf.constant([1, 1, 2], tf.int64))
        v = R.ExperimentalUniqueDataset(input_dataset=_var(ds), output_types=I64,
                                        output_shapes=S0)  # fmt: skip
        assert _drain(v) == _flat(1, 2)
        v = R.ExperimentalUnbatchDataset(input_dataset=_var(tf.data.Dataset.range(4).batch(3)),
                                         output_types=I64, output_shapes=S0)  # fmt: skip
        assert _drain(v) == _flat(0, 1, 2, 3)
        with tf.Session() as s:
            assert s.run(R.ExperimentalDatasetCardinality(input_dataset=_range(3))) == 3
    # TF's OpDefs: the same inputs, without the attrs TF added after the rename
    assert [a.name for a in get_op_def("ExperimentalMapDataset").inputs] == [
        "input_dataset",
        "other_arguments",
    ]
    assert "metadata" not in get_op_def("ExperimentalUniqueDataset").attrs
    assert "drop_remainder" not in get_op_def("ExperimentalSlidingWindowDataset").attrs


# -- iterators and resources ----------------------------------------------------------------------


def test_v1_iterator_get_next_sync_string_handles_and_device():
    with tf.Graph().as_default():
        it = R.Iterator(shared_name="it1", container="", output_types=I64, output_shapes=S0)
        init = R.MakeIterator(dataset=_range(3), iterator=it)
        nxt = R.IteratorGetNextSync(iterator=it, output_types=I64, output_shapes=S0)
        sh = R.IteratorToStringHandle(resource_handle=it)
        it2 = R.IteratorFromStringHandle(string_handle=sh, output_types=I64, output_shapes=S0)
        nxt2 = R.IteratorGetNext(iterator=it2, output_types=I64, output_shapes=S0)
        dev = R.IteratorGetDevice(resource=it)
        dev2 = R.ExperimentalIteratorGetDevice(resource=it)
        bad = R.IteratorFromStringHandle(string_handle=sh, output_types=[tf.float32],
                                         output_shapes=S0)  # fmt: skip
        with tf.Session() as s:
            with pytest.raises(tf.errors.FailedPreconditionError, match="GetNext\\(\\) failed"):
                s.run(nxt)
            s.run(init)
            assert (s.run(nxt), s.run(nxt2)) == ([0], [1])
            want = b"/job:localhost/replica:0/task:0/device:CPU:0"
            assert s.run(dev) == want and s.run(dev2) == want
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(bad)


def test_anonymous_iterators_are_new_at_every_run():
    with tf.Graph().as_default():
        h, deleter = R.AnonymousIteratorV2(output_types=I64, output_shapes=S0)
        init = R.MakeIterator(dataset=_range(2), iterator=h)
        nxt = R.IteratorGetNext(iterator=h, output_types=I64, output_shapes=S0)
        h3 = R.AnonymousIteratorV3(output_types=I64, output_shapes=S0)
        with tf.control_dependencies([R.MakeIterator(dataset=_range(2), iterator=h3)]):
            first = R.IteratorGetNext(iterator=h3, output_types=I64, output_shapes=S0)
        with tf.Session() as s:
            s.run(init)
            # TF 2.21: the run after the initializer reads another, new iterator
            with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
                s.run(nxt)
            assert s.run(first) == [0] and s.run(first) == [0]
            with tf.control_dependencies([R.MakeIterator(dataset=_range(2), iterator=h)]):
                got = R.IteratorGetNext(iterator=h, output_types=I64, output_shapes=S0)
            with tf.control_dependencies(got):
                done = R.DeleteIterator(handle=h, deleter=deleter)
            assert s.run([got, done])[0] == [0]


def test_multi_device_iterator():
    with tf.Graph().as_default():
        mdi = R.MultiDeviceIterator(devices=["/cpu:0", "/cpu:0"], shared_name="m", container="",
                                    output_types=I64, output_shapes=S0)  # fmt: skip
        init = R.MultiDeviceIteratorInit(dataset=_range(5), multi_device_iterator=mdi,
                                         max_buffer_size=2)  # fmt: skip
        sh = R.MultiDeviceIteratorToStringHandle(multi_device_iterator=mdi)
        mdi2 = R.MultiDeviceIteratorFromStringHandle(string_handle=sh, output_types=I64,
                                                     output_shapes=S0)  # fmt: skip
        inc = tf.placeholder(tf.int64, [])
        shard = tf.placeholder(tf.int32, [])
        kw = {"shard_num": shard, "incarnation_id": inc, "output_types": I64, "output_shapes": S0}
        nxt = R.MultiDeviceIteratorGetNextFromShard(multi_device_iterator=mdi, **kw)
        nxt2 = R.MultiDeviceIteratorGetNextFromShard(multi_device_iterator=mdi2, **kw)
        with tf.Session() as s:
            i = s.run(init)
            assert i == 1
            out = []
            with pytest.raises(tf.errors.OutOfRangeError):
                for k in range(8):
                    out.append(s.run(nxt2 if k % 3 else nxt, {inc: i, shard: k % 2}))
            assert out == [[0], [1], [2], [3], [4]]
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(nxt, {inc: i + 1, shard: 0})
            assert (
                _err(e.value)
                == "InvalidArgumentError: Invalid incarnation id. Provided: 2; Expected: 1"
            )
            i = s.run(init)
            # element k goes to shard k % 2: shard 0 asked twice gets 0, then 2
            assert (i, s.run(nxt, {inc: i, shard: 0}), s.run(nxt, {inc: i, shard: 0})) == (
                2,
                [0],
                [2],
            )


def test_memory_cache_and_seed_generator_resources():
    with tf.Graph().as_default():
        cache, deleter = R.AnonymousMemoryCache()
        v = R.CacheDatasetV2(input_dataset=_range(3), filename="", cache=cache, output_types=I64,
                             output_shapes=S0)  # fmt: skip
        assert _drain(v, runs=2) == [_flat(0, 1, 2)] * 2
        v = R.CacheDatasetV2(input_dataset=_range(2), filename="", cache=R.DummyMemoryCache(),
                             output_types=I64, output_shapes=S0)  # fmt: skip
        assert _drain(v, runs=2) == [_flat(0, 1)] * 2
        gen, gen_deleter = R.AnonymousRandomSeedGenerator(
            seed=tf.constant(7, tf.int64), seed2=tf.constant(9, tf.int64)
        )
        v = R.ShuffleDatasetV3(input_dataset=_range(10), buffer_size=4, seed=7, seed2=9,
                               seed_generator=gen, output_types=I64, output_shapes=S0)  # fmt: skip
        # (TF 2.21's graph refuses AnonymousRandomSeedGenerator, "Unknown input name:
        # reshuffle"; its generator is TF's reshuffling one, as with reshuffle=True.)
        assert _drain(v) == SHUFFLED_7_9
        with tf.Session() as s:
            ops = [
                R.DeleteMemoryCache(handle=cache, deleter=deleter),
                R.DeleteRandomSeedGenerator(handle=gen, deleter=gen_deleter),
                R.DummyIterationCounter(),
            ]
            s.run(ops[:2])
            s.run(ops[2].op)


# -- meta graphs TF wrote -------------------------------------------------------------------------

REF = json.loads((FIXTURES / "ref.json").read_text())


def _plain(x):
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x.decode() if isinstance(x, bytes) else x


@pytest.mark.parametrize("name", sorted(REF))
def test_tf_meta_graph(name, tmp_path):
    ref = REF[name]
    paths = []  # the files the recorder fed: file k holds f{k}r{j}
    for k in range(3):
        paths.append(str(tmp_path / f"f{k}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for j in range(2):
                w.write(f"f{k}r{j}".encode())
    with tf.Graph().as_default():
        tf.train.import_meta_graph(str(FIXTURES / f"{name}.meta"))
        nxt, init = tf.get_collection("next"), tf.get_collection("init")
        out = []
        with tf.Session() as s:
            if init:
                s.run(init, {"files:0": paths})
            with pytest.raises(tf.errors.OutOfRangeError) as e:
                for _ in range(100):
                    got = [_plain(x) for x in s.run(nxt)]
                    out.append(got[0] if len(got) == 1 else got)
    assert out == ref["elements"]
    assert _err(e.value) == f"{ref['end']['error']}: {ref['end']['message']}"


def _factory():
    @tf.function
    def make():
        return tf.data.experimental.to_variant(tf.data.Dataset.range(3).map(lambda x: x * 10))

    return make.get_concrete_function()


def test_one_shot_iterator_from_a_dataset_factory():
    with tf.Graph().as_default():
        it = R.OneShotIterator(dataset_factory=_factory(), output_types=I64, output_shapes=S0)
        nxt = R.IteratorGetNext(iterator=it, output_types=I64, output_shapes=S0)
        for _ in range(2):  # each session's iterator is its own
            out = []
            with tf.Session() as s, pytest.raises(tf.errors.OutOfRangeError):
                for _ in range(5):
                    out.append(s.run(nxt))
            assert out == [[0], [10], [20]]
        it = R.OneShotIterator(dataset_factory=_factory(), output_types=I64, output_shapes=S0,
                               shared_name="os")  # fmt: skip
        nxt = R.IteratorGetNext(iterator=it, output_types=I64, output_shapes=S0)
        with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(nxt)
        assert _err(e.value) == (
            "InvalidArgumentError: OneShotIteratorOp does not currently support the "
            "'shared_name' attr."
        )


LMDB = FIXTURES.parent / "lmdb"


def _lmdb_value(v: bytes) -> str:
    # (tests/fixtures/lmdb/lmdb.json's form: hex, or a digest for a long value)
    return v.hex() if len(v) <= 32 else f"sha256:{hashlib.sha256(v).hexdigest()}:{len(v)}"


@pytest.mark.parametrize("op", ["LMDBDataset", "ExperimentalLMDBDataset"])
def test_lmdb_dataset(op):
    # TF 2.21 raises UnimplementedError ("LMDB support is removed", lmdb.json's "tf");
    # the records are those liblmdb walks (lmdb.json), as asyncflow's LMDBReader reads.
    ref = json.loads((LMDB / "lmdb.json").read_text())
    types = [tf.string, tf.string]
    for names, want in [
        (["data.mdb"], ref["data.mdb"]),
        (["dups.mdb", "empty.mdb", "tree.mdb"], ref["dups.mdb"] + ref["tree.mdb"]),
    ]:
        with tf.Graph().as_default():
            v = getattr(R, op)(filenames=[str(LMDB / n) for n in names], output_types=types,
                               output_shapes=S0 * 2)  # fmt: skip
            got = _drain(v, types, S0 * 2, limit=1000)
        assert got[-1] == END
        assert [[k.hex(), _lmdb_value(v)] for k, v in got[:-1]] == want
    with tf.Graph().as_default():
        v = getattr(R, op)(filenames=[str(LMDB / "lmdb.json")], output_types=types,
                           output_shapes=S0 * 2)  # fmt: skip
        assert _drain(v, types, S0 * 2) == [
            f"DataLossError: {LMDB / 'lmdb.json'}: MDB_INVALID: File is not an LMDB file"
        ]


def test_anonymous_multi_device_iterators_and_delete():
    with tf.Graph().as_default():
        kw = {"devices": ["/cpu:0", "/cpu:0"], "output_types": I64, "output_shapes": S0}
        h, deleter = R.AnonymousMultiDeviceIterator(**kw)
        h3 = R.AnonymousMultiDeviceIteratorV3(**kw)
        outs = []
        for handle in (h, h3):
            inc = R.MultiDeviceIteratorInit(dataset=_range(4), multi_device_iterator=handle,
                                            max_buffer_size=1)  # fmt: skip
            outs += [
                R.MultiDeviceIteratorGetNextFromShard(
                    multi_device_iterator=handle,
                    shard_num=k,
                    incarnation_id=inc,
                    output_types=I64,
                    output_shapes=S0,
                )  # fmt: skip
                for k in (1, 0)
            ]
        with tf.control_dependencies(outs[0] + outs[1]):
            done = R.DeleteMultiDeviceIterator(multi_device_iterator=h, iterators=[],
                                               deleter=deleter)  # fmt: skip
        with tf.Session() as s:
            # one run makes, initializes and reads each anonymous iterator: shard 1 has
            # element 1, shard 0 element 0
            got = s.run([outs, done])[0]
        assert got == [[1], [0], [1], [0]]


def test_stats_aggregator_stages_pass_elements_through():
    # (TF 2.21: the elements unchanged; the aggregator's summary is not recorded here)
    with tf.Graph().as_default():
        kw = {"output_types": I64, "output_shapes": S0}
        for handle in ("StatsAggregatorHandle", "StatsAggregatorHandleV2",
                       "ExperimentalStatsAggregatorHandle"):  # fmt: skip
            agg = getattr(R, handle)()
            v = R.LatencyStatsDataset(input_dataset=_range(3), tag="lat", **kw)
            v = R.ExperimentalBytesProducedStatsDataset(input_dataset=v, tag="bytes", **kw)
            v = R.SetStatsAggregatorDataset(input_dataset=v, stats_aggregator=agg, tag="t",
                                            counter_prefix="c", **kw)  # fmt: skip
            pool = R.ExperimentalThreadPoolHandle(num_threads=1, display_name="p")
            v = R.ExperimentalThreadPoolDataset(input_dataset=v, thread_pool=pool, **kw)
            assert _drain(v) == _flat(0, 1, 2)


def _stats_summary(handle_op, tag, strings=False):
    """The Summary a stats aggregator gives after one pass of 3 elements."""
    agg = getattr(R, handle_op)()
    if strings:
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(["a", "bcd", ""]))
        ds = ds.map(lambda s: (s, tf.constant([1.0, 2.0])))
        types, shapes = [tf.string, tf.float32], [tf.TensorShape([]), tf.TensorShape([2])]
    else:
        ds, types, shapes = tf.data.Dataset.range(3), I64, S0
    kw = {"output_types": types, "output_shapes": shapes}
    v = R.LatencyStatsDataset(input_dataset=_var(ds), tag="lat", **kw)
    v = R.BytesProducedStatsDataset(input_dataset=v, tag="bytes", **kw)
    v = R.SetStatsAggregatorDataset(input_dataset=v, stats_aggregator=agg, tag=tag,
                                    counter_prefix="c", **kw)  # fmt: skip
    it = R.Iterator(shared_name="stats", container="", **kw)
    init = R.MakeIterator(dataset=v, iterator=it)
    nxt = R.IteratorGetNext(iterator=it, **kw)
    summary = R.StatsAggregatorSummary(iterator=agg)
    with tf.Session() as s:  # (the aggregator is this session's)
        s.run(init)
        for _ in range(3):
            s.run(nxt)
        return Summary.FromString(s.run(summary))


def _histo(v):
    h = v.histo
    return [h.min, h.max, h.num, h.sum, h.sum_squares, list(h.bucket_limit), list(h.bucket)]


LIMITS_8 = [7.466637793298873, 8.213301572628762, 1.7976931348623157e308]


@pytest.mark.parametrize(
    "tag, strings, want_bytes",
    [
        ("t", False, [8.0, 8.0, 3.0, 24.0, 192.0, LIMITS_8, [0.0, 3.0, 0.0]]),
        ("", False, [8.0, 8.0, 3.0, 24.0, 192.0, LIMITS_8, [0.0, 3.0, 0.0]]),
        (
            "t",
            True,  # a string counts its 24-byte tstring and its characters
            [
                32.0,
                35.0,
                3.0,
                100.0,
                3338.0,
                [31.18999905374747, 34.30899895912222, 37.73989885503445, 1.7976931348623157e308],
                [0.0, 2.0, 1.0, 0.0],
            ],
        ),
    ],
)
def test_stats_aggregator_summary(tag, strings, want_bytes):
    # (TF 2.21 also reports its map's thread utilization, as it runs the map as a
    # ParallelMapDatasetV2; the latencies are timings: their count is checked)
    with tf.Graph().as_default():
        summary = _stats_summary("StatsAggregatorHandle", tag, strings)
    prefix = f"{tag}::" if tag else ""
    assert [v.tag for v in summary.value] == [prefix + "bytes", prefix + "lat"]
    assert _histo(summary.value[0]) == want_bytes
    assert summary.value[1].histo.num == 3
    with tf.Graph().as_default():  # V2's statistics go to a summary writer
        assert _stats_summary("StatsAggregatorHandleV2", tag).value == []


@pytest.mark.parametrize(
    "n, seeds, generator, reshuffle, want",
    [
        (10, (1, 2), "dummy", True, [3, 4, 5, 9, 0, 8, 1, 7, 2, 6, 1, 6, 8, 7, 5, 9, 4, 0, 3, 2]),
        (10, (1, 2), "reshuffling", True,
         [3, 4, 5, 9, 0, 8, 1, 7, 2, 6, 1, 6, 8, 7, 5, 9, 4, 0, 3, 2]),
        (10, (1, 2), "fixed", True, [7, 6, 8, 0, 5, 2, 4, 3, 1, 9] * 2),
        (10, (1, 2), "dummy", False, [7, 6, 8, 0, 5, 2, 4, 3, 1, 9] * 2),
        (10, (5, 7), "fixed", True, [7, 3, 8, 6, 4, 2, 0, 5, 9, 1] * 2),
        (7, (5, 0), "dummy", True, [3, 1, 0, 2, 4, 5, 6, 6, 0, 2, 1, 5, 4, 3]),
        (6, (1, 2), "fixed", True, [3, 4, 1, 0, 5, 2] * 2),
    ],
)  # fmt: skip
def test_global_shuffle(n, seeds, generator, reshuffle, want):
    with tf.Graph().as_default():
        if generator == "dummy":
            gen = R.DummySeedGenerator()
        else:
            gen = _seeds(*seeds, generator == "reshuffling")
        v = R.GlobalShuffleDataset(
            input_dataset=_range(n), seed=seeds[0], seed2=seeds[1], seed_generator=gen,
            reshuffle_each_iteration=reshuffle, output_types=I64, output_shapes=S0,
        )  # fmt: skip
        v = R.RepeatDataset(input_dataset=v, count=2, output_types=I64, output_shapes=S0)
        assert _drain(v) == _flat(*want)


def test_global_shuffle_needs_random_access():
    head = (
        "FailedPreconditionError: `global_shuffle` requires all upstream transformations be "
        "compatible with random access. Got: FAILED_PRECONDITION: "
    )
    for make, why in [
        (lambda: tf.data.Dataset.range(5).filter(lambda x: x > 1),
         "FilterDataset does not support random access."),
        (lambda: tf.data.Dataset.range(5).batch(2),
         "BatchDatasetV2 does not support global shuffling with `drop_remainder=False`."),
    ]:  # fmt: skip
        with tf.Graph().as_default():
            v = R.GlobalShuffleDataset(
                input_dataset=_var(make()), seed=1, seed2=2,
                seed_generator=R.DummySeedGenerator(), output_types=I64, output_shapes=S0,
            )  # fmt: skip
            assert _drain(v) == [head + why]
