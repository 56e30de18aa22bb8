"""tf.data as TF 2.21's `tf.compat.v1` spells it: the `name=`, `deterministic=` and
`num_parallel_calls=` keywords, `zip(*datasets)`, `from_generator(output_signature=)`,
`from_sparse_tensor_slices`, `random(rerandomize_each_iteration=)`, the method
`choose_from_datasets`'s default, interleave's default cycle, dict element order and
`make_csv_dataset(encoding=)`; the file datasets' `num_parallel_reads` and
FixedLengthRecordDataset's length check; iterators' op names. Every expected value was
recorded from TF 2.21."""

import collections

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.data import dataset as dataset_module

D = af.data.Dataset
X = af.data.experimental


def drain(sess, ds, limit=20):
    nxt = ds.make_one_shot_iterator().get_next()
    out = []
    while len(out) < limit:
        try:
            out.append(sess.run(nxt))
        except errors.OutOfRangeError:
            break
    return out


def ints(values):
    return [tuple(int(v) for v in x) if isinstance(x, tuple) else int(x) for x in values]


def test_zip_takes_datasets_as_arguments(sess):
    r = D.range
    assert ints(drain(sess, D.zip(r(2), r(3)))) == [(0, 0), (1, 1)]
    assert ints(drain(sess, D.zip((r(2), r(3))))) == [(0, 0), (1, 1)]
    assert ints(drain(sess, D.zip(datasets=(r(2), r(3))))) == [(0, 0), (1, 1)]
    assert ints(drain(sess, D.zip(r(2)))) == [0, 1]
    with pytest.raises(TypeError, match=r"^Both `\*args` and `datasets` cannot be set\.$"):
        D.zip(r(2), datasets=(r(2), r(3)))
    with pytest.raises(TypeError, match=r"^Must pass at least one dataset to `zip`\.$"):
        D.zip()
    with pytest.raises(TypeError, match="but encountered object of type <class 'int'>"):
        D.zip(r(2), 3)


def test_from_generator_output_signature(sess):
    ds = D.from_generator(
        lambda: iter([[1, 2], [3]]), output_signature=af.TensorSpec([None], af.int32)
    )
    assert ds.output_types == af.int32 and ds.output_shapes.as_list() == [None]
    assert [v.tolist() for v in drain(sess, ds)] == [[1, 2], [3]]
    pairs = D.from_generator(
        lambda: iter([(1, b"a"), (2, b"b")]),
        output_signature=(af.TensorSpec([], af.int64), af.TensorSpec([], af.string)),
    )
    assert [(int(a), b) for a, b in drain(sess, pairs)] == [(1, b"a"), (2, b"b")]


def test_from_generator_argument_errors():
    gen = lambda: iter([1])  # noqa: E731
    with pytest.raises(TypeError, match="can not be used together with the `output_signature`"):
        D.from_generator(gen, output_types=af.int32, output_signature=af.TensorSpec([], af.int32))
    either = "either the `output_signature` argument or the `output_types` argument"
    with pytest.raises(TypeError, match=either):
        D.from_generator(gen)
    with pytest.raises(TypeError, match=either):
        D.from_generator(gen, output_shapes=[])
    with pytest.raises(TypeError, match="found <class 'int'> which is not"):
        D.from_generator(gen, output_signature=3)


def test_from_generator_checks_each_element_shape(sess):
    ds = D.from_generator(lambda: iter([[1, 2]]), output_signature=af.TensorSpec([3], af.int32))
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"`generator` yielded an element of shape \(2,\) where an element of shape "
        r"\(3,\) was expected\.",
    ):
        drain(sess, ds)


def test_transformation_keywords_are_accepted(sess):
    r = D.range
    ds = (
        r(10)
        .filter(lambda x: x > 2, name="f")
        .skip(1, name="s")
        .take(5, name="t")
        .repeat(2, name="rp")
        .prefetch(1, name="p")
        .cache(name="c")
        .unique(name="u")
        .enumerate(name="e")
        .batch(2)
        .unbatch(name="ub")
        .shard(2, 0, name="sh")
        .concatenate(D.from_tensors((af.constant(9, af.int64),) * 2, name="ft"), name="cc")
        .window(2, name="w")
        .flat_map(lambda a, b: D.zip(a, b), name="fm")
    )
    assert ints(drain(sess, ds)) == [(0, 4), (2, 6), (4, 8), (9, 9)]
    batches = r(7).batch(3, num_parallel_calls=2, deterministic=True)
    assert [v.tolist() for v in drain(sess, batches)] == [[0, 1, 2], [3, 4, 5], [6]]
    doubled = r(5).map(lambda x: x * 2, num_parallel_calls=2, deterministic=False, name="m")
    assert ints(drain(sess, doubled)) == [0, 2, 4, 6, 8]
    slices = (
        D.from_tensor_slices([1, 2], name="x")
        .take_while(lambda x: x < 2, name="tw")
        .scan(0, lambda s, x: (s + x, s), name="sc")
        .padded_batch(1, name="pb")
        .rebatch(1, name="rb")
        .ignore_errors(name="ie")
        .with_options(af.data.Options(), name="o")
    )
    assert [v.tolist() for v in drain(sess, slices)] == [[0]]
    total = r(4).reduce(af.constant(0, af.int64), lambda s, x: s + x, name="rd")
    assert sess.run(total) == 6
    windows = r(5).group_by_window(
        lambda x: x % 2, lambda k, d: d.batch(5), window_size=5, name="g"
    )
    assert [v.tolist() for v in drain(sess, windows)] == [[0, 2, 4], [1, 3]]
    buckets = (
        r(5)
        .map(lambda x: af.fill([x + 1], x))
        .bucket_by_sequence_length(lambda x: af.shape(x)[0], [3], [2, 2], name="b")
    )
    assert [v.tolist() for v in drain(sess, buckets)] == [
        [[0, 0], [1, 1]], [[2, 2, 2, 0], [3, 3, 3, 3]], [[4, 4, 4, 4, 4]],
    ]  # fmt: skip
    assert ints(drain(sess, D.counter(3, name="c").take(2))) == [3, 4]
    assert ints(drain(sess, D.range(2, name="rr"))) == [0, 1]
    assert ints(drain(sess, X.from_list([1, 2], name="fl"))) == [1, 2]


def test_choose_from_datasets_method_stops_at_an_empty_dataset(sess):
    choice = D.from_tensor_slices(af.constant([0, 0, 0, 1, 1], af.int64))
    both = [D.range(2), D.range(10, 15)]
    assert ints(drain(sess, D.choose_from_datasets(both, choice))) == [0, 1]
    # tf.data.experimental's function skips the exhausted dataset's picks
    assert ints(drain(sess, X.choose_from_datasets(both, choice))) == [0, 1, 10, 11]


def test_interleave_default_cycle_is_the_schedulable_cpus(sess, monkeypatch):
    monkeypatch.setattr(dataset_module, "_schedulable_cpus", lambda: 2)  # TF's run had 2
    make = lambda x: D.range(x, x + 3)  # noqa: E731
    want = [0, 1, 1, 2, 2, 3, 2, 3, 4]
    assert ints(drain(sess, D.range(3).interleave(make))) == want
    none = D.range(3).interleave(make, cycle_length=None, block_length=None)
    assert ints(drain(sess, none)) == want
    par = D.range(3).interleave(make, cycle_length=2, num_parallel_calls=2, deterministic=True)
    assert ints(drain(sess, par)) == want


def test_from_sparse_tensor_slices(sess):
    st = af.SparseTensor([[0, 1], [2, 0]], [1, 2], [3, 2])
    ds = D.from_sparse_tensor_slices(st)
    assert ds.output_types == (af.int64, af.int32, af.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None, 1], [None], [1]]
    got = [tuple(c.tolist() for c in e) for e in drain(sess, ds)]
    assert got == [([[1]], [1], [2]), ([], [], [2]), ([[0]], [2], [2])]


def _passes(sess, ds, n):
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    runs = []
    for _ in range(2):
        sess.run(it.initializer)
        runs.append([int(sess.run(nxt)) for _ in range(n)])
    return runs


def test_random_rerandomize_each_iteration(sess):
    fixed = [3128586565, 2023892699] * 2
    for flag in (None, False):
        ds = D.random(seed=4, rerandomize_each_iteration=flag).take(2).repeat(2)
        assert _passes(sess, ds, 4) == [fixed, fixed]
    ds = D.random(seed=4, rerandomize_each_iteration=True).take(2).repeat(2)
    again = [1905554911, 4215726141, 1683472663, 2279948892]
    assert _passes(sess, ds, 4) == [again, again]  # a new iterator starts the stream over
    types = {op.type for op in sess.graph.get_operations()}
    assert {"RandomDatasetV2", "DummySeedGenerator"} <= types  # TF's ops for it


def test_sample_from_datasets_rerandomize_each_iteration(sess):
    af.set_random_seed(7)
    sources = [D.range(3).repeat(), D.range(10, 13).repeat()]
    same = D.sample_from_datasets(sources, seed=3).take(4).repeat(2)
    assert _passes(sess, same, 8)[0] == [10, 0, 11, 12, 10, 0, 11, 12]
    new = D.sample_from_datasets(sources, seed=3, rerandomize_each_iteration=True)
    assert _passes(sess, new.take(4).repeat(2), 8)[0] == [10, 11, 0, 12, 0, 1, 2, 0]


def test_dict_elements_keep_their_key_order(sess):
    x = collections.OrderedDict(b=af.constant(1), a=af.constant(2))
    (elem,) = drain(sess, D.from_tensors(x).map(lambda d: d))
    assert type(elem) is collections.OrderedDict and list(elem.items()) == [("b", 1), ("a", 2)]
    packed = af.nest.pack_sequence_as(collections.OrderedDict(b=1, a=2), [5, 6])
    assert list(packed.items()) == [("b", 6), ("a", 5)]
    assert list(af.nest.pack_sequence_as({"b": 1, "a": 2}, [5, 6]).items()) == [("b", 6), ("a", 5)]
    dd = af.nest.map_structure(lambda v: v * 10, collections.defaultdict(int, b=1, a=2))
    assert type(dd) is collections.defaultdict and list(dd.items()) == [("b", 10), ("a", 20)]


def test_make_csv_dataset_encoding(sess, tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"x,y\n1,\xe9\n")
    ds = X.make_csv_dataset(str(path), 1, encoding="latin-1", shuffle=False, num_epochs=1)
    (features,) = drain(sess, ds)
    assert type(features) is collections.OrderedDict
    assert features["x"].tolist() == [1] and features["y"].tolist() == [b"\xe9"]
    np.testing.assert_array_equal(features["x"], np.array([1], np.int32))


def _write_records(path, records):
    with af.python_io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)


def test_num_parallel_reads_takes_a_record_from_each_file_in_turn(sess, tmp_path):
    a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    _write_records(a, [b"a0", b"a1", b"a2"])
    _write_records(b, [b"b0", b"b1"])
    files = [str(a), str(b)]
    assert drain(sess, af.data.TFRecordDataset(files)) == [b"a0", b"a1", b"a2", b"b0", b"b1"]
    both = af.data.TFRecordDataset(files, num_parallel_reads=2)
    assert drain(sess, both) == [b"a0", b"b0", b"a1", b"b1", b"a2"]
    (tmp_path / "a.txt").write_text("x1\nx2\n")
    (tmp_path / "b.txt").write_text("y1\n")
    lines = af.data.TextLineDataset(
        [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], num_parallel_reads=2
    )
    assert drain(sess, lines) == [b"x1", b"y1", b"x2"]


def test_fixed_length_records_need_an_exact_multiple(sess, tmp_path):
    path = tmp_path / "fl.bin"
    path.write_bytes(b"HDR" + bytes(range(20)) + b"FT")
    ds = af.data.FixedLengthRecordDataset(str(path), 4, header_bytes=3, footer_bytes=2)
    assert [r[0] for r in drain(sess, ds)] == [0, 4, 8, 12, 16]
    bad = af.data.FixedLengthRecordDataset(str(path), 6, header_bytes=3, footer_bytes=2)
    want = (
        f'Excluding the header (3 bytes) and footer (2 bytes), input file "{path}" has body '
        "length 20 bytes, which is not an exact multiple of the record length (6 bytes)."
    )
    with pytest.raises(errors.InvalidArgumentError) as e:
        drain(sess, bad)
    assert e.value.message.split("\n")[0] == want


def test_iterator_op_names(graph):
    one = af.data.make_one_shot_iterator(D.range(3))
    init = af.data.make_initializable_iterator(D.range(3))
    free = af.data.Iterator.from_structure(af.int64, [])
    ops = {(o.name, o.type) for o in graph.get_operations() if "Iterator" in o.type}
    assert ops == {
        ("OneShotIterator", "OneShotIterator"),
        ("IteratorToStringHandle", "IteratorToStringHandle"),
        ("IteratorV2", "IteratorV2"),
        ("MakeIterator", "MakeIterator"),
        ("IteratorToStringHandle_1", "IteratorToStringHandle"),
        ("IteratorV2_1", "IteratorV2"),
        ("IteratorToStringHandle_2", "IteratorToStringHandle"),
    }
    assert one.string_handle() is one.string_handle()
    assert one.string_handle().name == "IteratorToStringHandle:0"
    assert init.initializer.name == "MakeIterator"
    assert free.make_initializer(D.range(2)).name == "make_initializer"
    assert free.make_initializer(D.range(2), name="foo").name == "foo"
    assert free.string_handle(name="x").name == "x:0"
    assert free.get_next().name == "IteratorGetNext:0"
