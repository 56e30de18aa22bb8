"""ParseExample's same-layout path (ops/parsing_template.py) against protobuf's reading
of each record, and its refusals: every batch it declines goes down the general path,
which must still give the values (or TF's errors) of tests/ops/test_parsing_ops.py."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import example_pb as pb
from asyncflow.ops import parsing_ops as P
from asyncflow.ops import parsing_template as T


def _example(**features) -> bytes:
    e = pb.Example()
    for key, (kind, values) in features.items():
        getattr(e.features.feature[key], kind).value.extend(values)
    return e.SerializeToString()


def _reference(records, key, kind):
    return [
        list(getattr(pb.Example.FromString(r).features.feature[key], kind).value) for r in records
    ]


@pytest.mark.parametrize("seed", range(3))
def test_values_equal_protobufs_reading(seed):
    rng = np.random.RandomState(seed)
    ints = [0, 1, 127, 128, 300, -1, -(1 << 63), (1 << 63) - 1, 1 << 40]
    records = []
    for _ in range(64):
        x = rng.randn(5).astype(np.float32).tolist()
        y = [int(rng.choice(ints)), int(rng.randint(0, 3))]  # several record lengths
        records.append(_example(x=("float_list", x), y=("int64_list", y)))
    got = T.dense_batch(records, ["x", "y"], [2, 3], [[5], [2]])
    assert got is not None
    np.testing.assert_array_equal(got[0], np.float32(_reference(records, "x", "float_list")))
    assert got[1].dtype == np.int64
    assert got[1].tolist() == _reference(records, "y", "int64_list")
    assert got[0].flags.writeable and got[1].flags.writeable


def test_one_byte_varints_and_the_128_boundary():
    # labels 0..127 are one byte each (the one-byte path); 128 takes two bytes
    for labels in ([0, 5, 127, 9], [127, 128, 3, 1]):
        records = [_example(x=("float_list", [1.0]), y=("int64_list", [v])) for v in labels]
        got = T.dense_batch(records, ["x", "y"], [2, 3], [[1], []])
        assert got[1].dtype == np.int64 and got[1].tolist() == labels


def test_shapes_and_one_record():
    rec = _example(m=("float_list", range(6)), k=("int64_list", [7]))
    got = T.dense_batch([rec], ["m", "k"], [2, 3], [[2, 3], []])
    assert got[0].shape == (1, 2, 3) and got[1].shape == (1,)
    assert got[0].tolist() == [[[0, 1, 2], [3, 4, 5]]] and got[1].tolist() == [7]


def _base(i=1, x=(1.0, 2.0)):
    return _example(x=("float_list", x), y=("int64_list", [i]))


def _reordered() -> bytes:
    """_base(1) with its two feature map entries the other way round (protobuf's own
    map order is not fixed, so both orders are built and the other one kept)."""
    x = pb.Features(feature={"x": pb.Feature(float_list=pb.FloatList(value=[1.0, 2.0]))})
    y = pb.Features(feature={"y": pb.Feature(int64_list=pb.Int64List(value=[1]))})
    both = []
    for pair in ((x, y), (y, x)):
        features = b"".join(f.SerializeToString() for f in pair)
        both.append(b"\x0a" + bytes([len(features)]) + features)
    base = _base(1)
    assert base in both
    rec = both[1 - both.index(base)]
    assert len(rec) == len(base) and pb.Example.FromString(rec) == pb.Example.FromString(base)
    return rec


@pytest.mark.parametrize(
    "odd",
    [
        _example(x=("float_list", [1.0, 2.0])),  # y missing
        _example(x=("float_list", [1.0, 2.0]), y=("float_list", [1.0])),  # wrong kind
        _base(x=(1.0, 2.0, 3.0)),  # wrong count
        b"\x0a\x00",  # no features
        b"garbage!",
    ],
    # Named, not by their bytes: a map's serialized order differs between processes
    # (pytest-xdist's workers must collect the same ids).
    ids=["y_missing", "wrong_kind", "wrong_count", "no_features", "garbage"],
)
def test_a_record_of_another_layout_sends_the_batch_to_the_general_path(odd):
    records = [_base(i) for i in range(5)] + [odd]
    assert T.dense_batch(records, ["x", "y"], [2, 3], [[2], []]) is None


def test_another_map_order_is_a_layout_of_its_own():
    records = [_base(i) for i in range(3)] + [_reordered()] + [_base(4)]
    got = T.dense_batch(records, ["x", "y"], [2, 3], [[2], []])
    assert got[0].tolist() == [[1, 2]] * 5
    assert got[1].tolist() == [0, 1, 2, 1, 4]


def test_an_extra_feature_is_a_layout_of_its_own():
    extra = _example(x=("float_list", [3.0, 4.0]), y=("int64_list", [5]), z=("bytes_list", [b"q"]))
    records = [_base(i) for i in range(3)] + [extra]
    got = T.dense_batch(records, ["x", "y"], [2, 3], [[2], []])
    assert got[0].tolist() == [[1, 2]] * 3 + [[3, 4]]
    assert got[1].tolist() == [0, 1, 2, 5]


def test_same_length_other_structure_is_refused():
    # [1, 2] and [300] are both two bytes of varints: the same length, other counts.
    a = _example(y=("int64_list", [1, 2]))
    b = _example(y=("int64_list", [300]))
    assert len(a) == len(b)
    assert T.dense_batch([a, b], ["y"], [3], [[2]]) is None
    # key bytes differ at equal length: "ab" vs "ac"
    broken = b"\x0b" + _base(1)[1:]  # same length, not an Example's canonical form
    assert T.dense_batch([_base(1), broken], ["y"], [3], [[]]) is None
    c = _example(ab=("int64_list", [1]))
    d = _example(ac=("int64_list", [1]))
    assert T.dense_batch([c, d], ["ab"], [3], [[]]) is None


def test_requested_strings_duplicates_and_many_lengths_are_declined():
    recs = [_example(s=("bytes_list", [b"a"]))]
    assert T.dense_batch(recs, ["s"], [1], [[]]) is None
    dup = _base() + _base()[2:]  # a second Features field: protobuf merges, we decline
    assert T.dense_batch([dup], ["x"], [2], [[2]]) is None
    many = [_example(y=("int64_list", [1 << (7 * k)])) for k in range(9)]
    assert T.dense_batch(many, ["y"], [3], [[]]) is None
    assert T.dense_batch(["text"], ["y"], [3], [[]]) is None


def test_parse_example_declined_batches_keep_tf_behaviour(sess):
    spec = {"x": af.FixedLenFeature([2], af.float32), "y": af.FixedLenFeature([], af.int64)}
    ok = [_base(i, (i, -i)) for i in range(4)] + [_reordered()]
    got = sess.run(P.parse_example(af.constant(ok), spec))
    assert got["y"].tolist() == [0, 1, 2, 3, 1]
    assert got["x"].tolist() == [[0, 0], [1, -1], [2, -2], [3, -3], [1, 2]]
    bad = [_base(i) for i in range(4)] + [_base(x=(1.0,))]
    with pytest.raises(errors.InvalidArgumentError, match="Key: x, Index: 4"):
        sess.run(P.parse_example(af.constant(bad), spec))


def test_the_layout_remembered_from_an_earlier_batch():
    """A batch's layout is kept per record length for the next batch (T._CACHE): a
    later batch of the same length but another map order, or another set of requested
    features, still gets each record's own values."""
    T._CACHE.clear()
    first = [_base(i) for i in range(4)]
    assert T.dense_batch(first, ["x", "y"], [2, 3], [[2], []])[1].tolist() == [0, 1, 2, 3]
    assert len(T._CACHE) == 1
    # the same layout: values from the remembered one
    again = [_base(i, x=(float(i), 2.0)) for i in (7, 8)]
    got = T.dense_batch(again, ["x", "y"], [2, 3], [[2], []])
    assert got[0].tolist() == [[7, 2], [8, 2]] and got[1].tolist() == [7, 8]
    # same length, keys in the other order: a layout of its own, then remembered
    other = [_reordered(), _reordered()]
    assert len(other[0]) == len(first[0])
    got = T.dense_batch(other, ["x", "y"], [2, 3], [[2], []])
    assert got[0].tolist() == [[1, 2]] * 2 and got[1].tolist() == [1, 1]
    mixed = [_base(5), _reordered(), _base(6)]
    got = T.dense_batch(mixed, ["x", "y"], [2, 3], [[2], []])
    assert got[1].tolist() == [5, 1, 6]
    # only one of the features asked for: the remembered layout still applies
    assert T.dense_batch(first, ["y"], [3], [[]])[0].tolist() == [0, 1, 2, 3]
