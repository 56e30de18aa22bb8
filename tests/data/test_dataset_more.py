"""More of tf.data (shard, unique, scan, take_while, ignore_errors, Counter,
choose/sample_from_datasets, window, group_by_window, bucket_by_sequence_length, reduce,
get_single_element, cardinality): every pipeline of tests/fixtures/dataset_more_cases.py
against TF 2.21's recorded elements, dtypes, shapes and errors
(tests/fixtures/record_dataset_more_tf.py), and what the fixture cannot show."""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_more_cases as cases  # noqa: E402
from dataset_more_cases import plain  # noqa: E402

TF = json.loads((FIXTURES / "dataset_more_tf.json").read_text())
D = af.data.Dataset
X = af.data.experimental


def drain(sess, ds, limit=100):
    nxt = ds.make_one_shot_iterator().get_next()
    elems, end = [], None
    while len(elems) < limit:
        try:
            elems.append(plain(sess.run(nxt)))
        except errors.OutOfRangeError:
            break
        except errors.OpError as e:
            end = {"error": type(e).__name__, "message": e.message}
            break
    return {"elements": elems, "end": end}


def _same_end(got, want):
    if want is None or got is None:
        assert got == want
        return
    assert got["error"] == want["error"]
    if "Error in user-defined function" in want["message"]:  # TF's wrapping of the cause
        assert "boom" in got["message"] and "Inf" in got["message"]
    else:
        assert want["message"] in got["message"]


@pytest.mark.parametrize("name", sorted(cases.DATASETS))
def test_pipeline_matches_tf(sess, name):
    want = TF["datasets"][name]
    got = drain(sess, cases.DATASETS[name](af))
    if name == "sample_one_weight":  # (draws differ from TF's; one weight: same elements)
        assert got == want
        return
    assert got["elements"] == want["elements"]
    _same_end(got["end"], want["end"])


@pytest.mark.parametrize("name", sorted(cases.CSV_DATASETS))
def test_csv_matches_tf(sess, name, tmp_path):
    cases.write_csv_files(tmp_path)
    want = TF["datasets"][name]
    if "build_error" in want:  # (tf.compat.v1's CsvDataset has no exclude_cols)
        with pytest.raises(getattr(__builtins__, want["build_error"], TypeError)):
            cases.CSV_DATASETS[name](af, str(tmp_path))
        return
    got = drain(sess, cases.CSV_DATASETS[name](af, str(tmp_path)))
    assert got["elements"] == want["elements"]
    if name == "csv_missing_file":  # (the path is the recorder's temporary one)
        assert got["end"]["error"] == "NotFoundError" and "nope.csv" in got["end"]["message"]
        return
    _same_end(got["end"], want["end"])


@pytest.mark.parametrize("name", sorted(cases.TENSORS))
def test_tensor_matches_tf(sess, name):
    want = TF["tensors"][name]
    t = cases.TENSORS[name](af)
    if "error" in want:
        with pytest.raises(getattr(errors, want["error"]), match=want["message"]):
            sess.run(t)
    else:
        assert plain(sess.run(t)) == want["value"]


def test_static_structures(graph):
    ds = D.range(10).scan(np.int64(0), lambda s, x: (s + x, af.cast(x, af.float32)))
    assert ds.output_types == af.float32 and ds.output_shapes.as_list() == []
    red = D.range(3).reduce((np.int64(0), np.float64(0)), lambda s, x: (s[0] + x, s[1]))
    assert [t.dtype for t in red] == [af.int64, af.float64]
    single = D.from_tensors((np.int32(1), [1.0, 2.0])).get_single_element()
    assert [t.shape.as_list() for t in single] == [[], [2]]
    assert D.range(4).cardinality().dtype == af.int64
    w = D.range(4).window(2)
    assert w.output_types == af.string  # (a dataset handle, as TF's variant)


def test_build_errors(graph):
    with pytest.raises(TypeError, match="unique"):
        D.from_tensor_slices(np.zeros(3, np.float32)).unique()
    with pytest.raises(TypeError, match="new state"):
        D.range(3).scan(np.int64(0), lambda s, x: (af.cast(s, af.float32), x))
    with pytest.raises(TypeError, match="pair"):
        D.range(3).scan(np.int64(0), lambda s, x: s + x)
    with pytest.raises(ValueError, match="window_size"):
        D.range(3).group_by_window(lambda x: x, lambda k, w: w, 2, lambda k: k)
    with pytest.raises(ValueError, match="int64 scalar"):
        D.range(3).group_by_window(lambda x: af.cast(x, af.int32), lambda k, w: w, 2)
    with pytest.raises(TypeError, match="choice_dataset"):
        X.choose_from_datasets([D.range(2)], D.range(2).map(lambda x: af.cast(x, af.int32)))
    with pytest.raises(TypeError, match="same types"):
        X.choose_from_datasets([D.range(2), D.from_tensors(1.0)], D.range(2))
    with pytest.raises(ValueError, match="bucket_batch_sizes"):
        X.bucket_by_sequence_length(lambda x: 1, [2, 4], [1, 2])


def test_window_bad_sizes(sess):
    for args, what in (((0,), "size"), ((2, 0), "shift"), ((2, 1, 0), "stride")):
        ds = D.range(5).window(*args).flat_map(lambda w: w.batch(2))
        with pytest.raises(errors.InvalidArgumentError, match=f"Window {what} must be greater"):
            sess.run(ds.make_one_shot_iterator().get_next())


def test_window_of_windows_and_long_shift(sess):
    # A shift past a window reads and drops the elements between (TF: the same).
    ds = D.range(12).window(2, shift=5).flat_map(lambda w: w.batch(2))
    assert [plain(v)["value"] for v in _values(sess, ds)] == [[0, 1], [5, 6], [10, 11]]
    card = af.data.experimental.cardinality(D.range(12).window(2, shift=5))
    assert sess.run(card) == 3


def _values(sess, ds):
    nxt = ds.make_one_shot_iterator().get_next()
    out = []
    while True:
        try:
            out.append(sess.run(nxt))
        except errors.OutOfRangeError:
            return out


def test_sample_from_datasets_frequencies_and_order(sess):
    # Draws are asyncflow's own (seeded); each dataset's elements keep their order and
    # appear with about their weight's share; exhausted inputs drop out.
    a, b = D.range(0, 3000), D.range(10_000, 11_000)

    def draws():  # (batched after the sampling, so that a run takes 500 draws, not one)
        ds = X.sample_from_datasets([a, b], [0.75, 0.25], seed=7).batch(500)
        return list(np.concatenate(_values(sess, ds)))

    got = draws()
    assert len(got) == 4000
    first = [int(v) for v in got if v < 10_000]
    second = [int(v) for v in got if v >= 10_000]
    assert first == list(range(3000)) and second == list(range(10_000, 11_000))
    share = sum(1 for v in got[:2000] if v < 10_000) / 2000
    assert 0.72 < share < 0.78
    assert [int(v) for v in draws()] == [int(v) for v in got]  # same seed: same draws


def test_sample_from_datasets_stop_on_empty(sess):
    ds = D.sample_from_datasets(
        [D.range(2), D.range(100, 200)], seed=1, stop_on_empty_dataset=True
    )
    got = [int(v) for v in _values(sess, ds)]
    assert sorted(v for v in got if v < 100) == [0, 1]
    # The pass ended at the first pick of the exhausted small input, long before the
    # large one ran out.
    assert len(got) < 102 and got.index(1) < len(got)


def test_ignore_errors_parallel_map_and_filter(sess):
    x = np.array([1.0, 0.0, 2.0, 0.0, 4.0, 5.0], np.float32)
    m = D.from_tensor_slices(x).map(lambda v: af.check_numerics(1.0 / v, "inf"), 3)
    assert [float(v) for v in _values(sess, m.ignore_errors())] == [
        1.0,
        0.5,
        0.25,
        np.float32(0.2),
    ]
    f = D.from_tensor_slices(x).filter(lambda v: af.check_numerics(1.0 / v, "inf") > 0.3)
    assert [float(v) for v in _values(sess, f.apply(X.ignore_errors()))] == [1.0, 2.0]


def test_ignore_errors_skips_a_batch_with_a_failed_element(sess):
    # An error below a batch fails that batch (its elements before the error dropped)
    # and the pass goes on: TF 2.21 gives [0.5, 0.25] then the end, with
    # map_and_batch_fusion on or off (dataset_element_error_cases.py records more).
    x = np.array([1.0, 0.0, 2.0, 4.0], np.float32)
    ds = D.from_tensor_slices(x).map(lambda v: af.check_numerics(1.0 / v, "inf")).batch(2)
    nxt = ds.ignore_errors().make_one_shot_iterator().get_next()
    assert sess.run(nxt).tolist() == [0.5, 0.25]
    with pytest.raises(errors.OutOfRangeError):
        sess.run(nxt)


def test_reduce_runs_again_each_step_and_sees_feeds(sess):
    p = af.placeholder(af.int64, [])
    total = D.range(5).reduce(np.int64(0), lambda s, x: s + x * p)
    assert sess.run(total, {p: 1}) == 10
    assert sess.run(total, {p: 3}) == 30


def test_group_by_window_key_must_be_scalar_int64_at_run_time(sess):
    ds = D.from_tensor_slices(np.array([[1, 2]], np.int64)).group_by_window(
        lambda x: x[:1][0] + af.zeros([], af.int64), lambda k, w: w, 2
    )
    assert [v.tolist() for v in _values(sess, ds)] == [[1, 2]]


def test_counter_and_dataset_counter(sess):
    assert [int(v) for v in _values(sess, D.counter(5, 5).take(3))] == [5, 10, 15]


def test_string_slices_keep_their_dtype(sess):
    # A string slice fed to a function's placeholder stays a string (object) array.
    ds = D.from_tensor_slices(["a", "bb"]).map(lambda s: af.reshape(s, [1]))
    assert [v.tolist() for v in _values(sess, ds)] == [[b"a"], [b"bb"]]


def test_make_csv_dataset_shuffled_epochs(sess, tmp_path):
    cases.write_csv_files(tmp_path)
    ds = X.make_csv_dataset(
        str(tmp_path / "infer.csv"), 3, label_name="label", num_epochs=2, shuffle_seed=5
    )
    batches = _values(sess, ds)
    assert [len(b[1]) for b in batches] == [3, 3, 3, 1]  # 10 rows; the last batch kept
    a = sorted(int(x) for f, _ in batches for x in f["a"])
    assert a == sorted([1, 2, 3, 4, 5] * 2)
    forever = X.make_csv_dataset(str(tmp_path / "infer.csv"), 4, shuffle=False)
    nxt = forever.make_one_shot_iterator().get_next()
    got = [sess.run(nxt)["a"].tolist() for _ in range(3)]
    assert got == [[1, 2, 3, 4], [5, 1, 2, 3], [4, 5, 1, 2]]  # repeats, full batches


def test_make_csv_dataset_errors(graph, tmp_path):
    cases.write_csv_files(tmp_path)
    with pytest.raises(ValueError, match="No files match"):
        X.make_csv_dataset(str(tmp_path / "none*.csv"), 2)
    with pytest.raises(ValueError, match="without a header"):
        X.make_csv_dataset(str(tmp_path / "plain.csv"), 2, header=False)
    with pytest.raises(ValueError, match="label_name"):
        X.make_csv_dataset(str(tmp_path / "infer.csv"), 2, label_name="zzz")
    with pytest.raises(ValueError, match="different column names"):
        X.make_csv_dataset([str(tmp_path / "infer.csv"), str(tmp_path / "header.csv")], 2)


@pytest.mark.parametrize("name", sorted(cases.SPARSE_DATASETS))
def test_sparse_elements_match_tf(sess, name):
    assert drain(sess, cases.SPARSE_DATASETS[name](af)) == TF["datasets"][name]


@pytest.mark.parametrize("name", sorted(cases.EXAMPLE_DATASETS))
def test_example_pipelines_match_tf(sess, name, tmp_path):
    path = str(tmp_path / "ex.tfrecord")
    with af.python_io.TFRecordWriter(path) as w:
        for h in TF["examples"]:
            w.write(bytes.fromhex(h))
    assert drain(sess, cases.EXAMPLE_DATASETS[name](af, path)) == TF["datasets"][name]


def test_sparse_structure_and_iterators(sess):
    sp = af.SparseTensor([[0, 1]], [1.0], [2, 3])
    ds = D.from_tensors((sp, 7)).repeat(2)
    assert ds.output_classes == (af.SparseTensor, af.Tensor)
    assert ds.output_types == (af.float32, af.int32)
    it = ds.make_initializable_iterator()
    s, n = it.get_next()
    assert isinstance(s, af.SparseTensor) and s.dtype == af.float32
    sess.run(it.initializer)
    v, k = sess.run((s, n))
    assert v.indices.tolist() == [[0, 1]] and v.dense_shape.tolist() == [2, 3] and k == 7
    dense = D.from_tensors((af.zeros([2, 3]), 7))
    with pytest.raises(TypeError, match="output types"):
        it.make_initializer(dense)  # a Tensor where the iterator has a SparseTensor
    with pytest.raises(TypeError, match="padded sparse"):
        ds.padded_batch(2)
    with pytest.raises(TypeError, match="SparseTensor"):
        D.from_tensor_slices(sp)


def test_tfrecord_writer_writes_tf_bytes(sess, tmp_path):
    path = tmp_path / "w.tfrecord"
    ds = D.from_tensor_slices([b"a", b"bc", b""])
    sess.run(X.TFRecordWriter(str(path)).write(ds))
    assert path.read_bytes().hex() == TF["tfrecord_writer_hex"]
    with pytest.raises(TypeError, match="scalar"):
        X.TFRecordWriter(str(path)).write(D.range(3))


@pytest.mark.parametrize("name", sorted(cases.MORE_DATASETS))
def test_more_pipelines_match_tf(sess, name):
    got = drain(sess, cases.MORE_DATASETS[name](af))
    want = TF["datasets"][name]
    assert got["elements"] == want["elements"]
    _same_end(got["end"], want["end"])


def test_more_tensors_match_tf(sess):
    for name, build in cases.MORE_TENSORS.items():
        assert plain(sess.run(build(af))) == TF["tensors"][name]["value"]


def test_dense_to_sparse_batch_too_long_row(sess):
    ds = D.from_tensors(np.arange(5)).apply(X.dense_to_sparse_batch(2, [4]))
    # TF 2.21's class and words
    larger = r"shape \(\[5\]\) that is larger than the row shape \(\[4\]\)\."
    with pytest.raises(errors.DataLossError, match=larger):
        sess.run(ds.make_one_shot_iterator().get_next())


def test_random_dataset_repeats_its_stream_and_unseeded_differs(sess):
    ds = X.RandomDataset(seed=3).take(3).repeat(2)
    got = [int(v) for v in _values(sess, ds)]
    assert got[:3] == got[3:]  # (fixed seeds: every pass the same draws, as TF)
    a = _values(sess, D.random().take(4))
    b = _values(sess, D.random().take(4))
    assert [int(v) for v in a] != [int(v) for v in b]


def test_options_kept_checked_and_merged(graph):
    o = af.data.Options()
    o.experimental_distribute.auto_shard_policy = X.AutoShardPolicy.DATA
    o.experimental_threading.private_threadpool_size = 8
    ds = D.range(3).with_options(o).map(lambda x: x + 1).batch(2)
    got = ds.options()
    assert got.experimental_distribute.auto_shard_policy == X.AutoShardPolicy.DATA
    assert got.threading.private_threadpool_size == 8
    p = af.data.Options()
    p.experimental_deterministic = False
    merged = ds.with_options(p).options()
    assert (
        merged.experimental_deterministic is False
        and merged.threading.private_threadpool_size == 8
    )
    with pytest.raises(AttributeError):
        o.experimental_threadin = 3
    with pytest.raises(AttributeError):
        o.threading.pool_size = 3


def test_element_spec_rebatch_and_eager_only(sess):
    ds = D.from_tensors((af.SparseTensor([[0]], [1.0], [2]), np.int64(3)))
    sp, t = ds.element_spec
    assert isinstance(sp, af.SparseTensorSpec) and sp.dtype == af.float32
    assert isinstance(t, af.TensorSpec) and t.dtype == af.int64 and t.shape.as_list() == []
    got = _values(sess, D.range(10).batch(4).rebatch(3))
    assert [v.tolist() for v in got] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    with pytest.raises(RuntimeError, match="eager mode"):
        D.range(3).as_numpy_iterator()
    sb = D.from_tensor_slices(np.arange(3)).map(lambda x: af.reshape(x, [1])).sparse_batch(2, [1])
    first = _values(sess, sb)[0]
    assert first.indices.tolist() == [[0, 0], [1, 0]] and first.dense_shape.tolist() == [2, 1]
