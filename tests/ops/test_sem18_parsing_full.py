"""Issue 18, the rest of TF's parsing_ops_test (the whole file, run by
tools/tf_kernel_tests.py): behaviours asyncflow differed in, each asserted as TF 2.21
gives it in graph mode (v2 behaviour off) -- every message and value here was read from
TF 2.21 running the same program beside these tests."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import parsing_ops
from asyncflow.protos import example_pb2, feature_pb2


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches):
    with af.Session() as s:
        return s.run(fetches)


def _i64(v):
    return feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=v))


def _flt(v):
    return feature_pb2.Feature(float_list=feature_pb2.FloatList(value=v))


def _byt(v):
    return feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=v))


def _example(d):
    return example_pb2.Example(features=feature_pb2.Features(feature=d)).SerializeToString()


def _seq_example(lists=None, context=None):
    return example_pb2.SequenceExample(
        context=feature_pb2.Features(feature=context or {}),
        feature_lists=feature_pb2.FeatureLists(
            feature_list={k: feature_pb2.FeatureList(feature=v) for k, v in (lists or {}).items()}
        ),
    ).SerializeToString()


# -- DecodeJSONExample, decode_raw_v1 --------------------------------------------------------


def test_decode_json_example_gives_each_examples_binary_form_keeping_the_shape():
    text = (
        '{"features":{"feature":{"a":{"floatList":{"value":[1,2]}},'
        '"b":{"bytesList":{"value":["aGk="]}},"c":{"int64List":{"value":["3", 4]}}}}}'
    )
    t = af.io.decode_json_example([[text], ["{}"]])
    assert t.shape.as_list() == [2, 1]  # TF: static (2, 1)
    out = _run(t)
    assert out.shape == (2, 1)
    first = example_pb2.Example.FromString(out[0, 0])
    feats = first.features.feature
    assert list(feats["a"].float_list.value) == [1.0, 2.0]
    assert list(feats["b"].bytes_list.value) == [b"hi"]  # JSON bytes are base64
    assert list(feats["c"].int64_list.value) == [3, 4]  # int64 as a string or a number
    assert example_pb2.Example.FromString(out[1, 0]) == example_pb2.Example()


@pytest.mark.parametrize("bad", ["{]", '{"features": 3}', '{"nope": 1}'])
def test_decode_json_example_of_bad_json_raises_invalid_argument(bad):
    with pytest.raises(errors.InvalidArgumentError, match="Error while parsing JSON"):
        _run(af.io.decode_json_example(bad))


def test_decode_raw_v1_takes_the_deprecated_bytes_argument():
    t = parsing_ops.decode_raw_v1(["ab"], af.uint8)
    assert t.shape.as_list() == [1, None]  # TF: (1, ?)
    assert _run(parsing_ops.decode_raw_v1(bytes=["abcd"], out_type=af.uint16)).tolist() == [
        [25185, 25699]
    ]
    with pytest.raises(errors.InvalidArgumentError):  # strings of two lengths, as TF
        _run(parsing_ops.decode_raw_v1(["string", "longer_string"], af.uint8))


# -- ParseExample / ParseSingleExample messages ----------------------------------------------

_KINDS = [("bytes", _byt([b"x"]), af.string), ("float", _flt([1.0]), af.float32),
          ("int64", _i64([1]), af.int64)]  # fmt: skip


@pytest.mark.parametrize("kind,feat,dt", _KINDS)
def test_parse_example_count_messages_name_the_kind_as_tf(kind, feat, dt):
    rec = [_example({"b": feat})]
    seq = {"b": af.io.FixedLenSequenceFeature((2,), dt, allow_missing=True)}
    with pytest.raises(
        errors.InvalidArgumentError,
        match=rf"^Name: in0, Key: b, Index: 0\.  Number of {kind} values is not a multiple of "
        r"stride length\. Saw 1 values but output shape is: \[\?,2\]",
    ):
        _run(af.io.parse_example(rec, seq, example_names=["in0"]))
    fixed = {"b": af.io.FixedLenFeature((2,), dt)}
    with pytest.raises(
        errors.InvalidArgumentError,
        match=rf"^Name: in0, Key: b, Index: 0\.  Number of {kind} values != expected\.  "
        r"Values size: 1 but output shape: \[2\]",
    ):
        _run(af.io.parse_example(rec, fixed, example_names=["in0"]))


@pytest.mark.parametrize("kind,feat,dt", _KINDS)
def test_parse_single_example_count_messages_are_its_own(kind, feat, dt):
    rec = _example({"b": feat})
    with pytest.raises(
        errors.InvalidArgumentError,
        match=rf"^Key: b\.  Can't parse serialized Example: Some {kind}_list slice was not "
        "parsed.",
    ):
        _run(af.io.parse_single_example(rec, {"b": af.io.FixedLenFeature((2,), dt)}))
    seq = {"b": af.io.FixedLenSequenceFeature((2,), dt, allow_missing=True)}
    with pytest.raises(
        errors.InvalidArgumentError,
        match="^Error while parsing feature with key b: number of elements should be divisible "
        "by 2, found 1 instead",
    ):
        _run(af.io.parse_single_example(rec, seq))


@pytest.mark.parametrize("default,size", [([], 0), ([1.0, 2.0], 2)])
def test_sequence_feature_padding_value_must_be_one_element_when_built(default, size):
    f = af.io.FixedLenSequenceFeature(
        (2, 1), af.float32, allow_missing=True, default_value=default
    )
    with pytest.raises(
        ValueError,
        match=rf"Cannot reshape a tensor with {size} elements to shape \[\] \(1 elements\)",
    ):
        af.io.parse_example(["", ""], {"a": f})
    for ok in (-2.0, [[3.0]]):  # one element in any nesting pads, as TF
        f = af.io.FixedLenSequenceFeature((2, 1), af.float32, allow_missing=True, default_value=ok)
        assert _run(af.io.parse_example(["", ""], {"a": f}))["a"].shape == (2, 0, 2, 1)


# -- ParseSequenceExample messages -----------------------------------------------------------

_SEQ_CASES = {
    # name: (lists, context, message with {name} for the record's name)
    "total count": (
        {"a": [_i64([2, 3]), _i64([2, 3, 4])]},
        None,
        "Feature list 'a' has an unexpected number of values.  Total values size: 5 is not "
        "consistent with output shape: [?,2]",
    ),
    "step count": (
        {"a": [_i64([2]), _i64([2, 3, 4])]},
        None,
        "Name: {name}, Key: a, Index: 0.  Number of values != expected.  values size: 1 but "
        "output shape: [2]",
    ),
    "step type": (
        {"a": [_i64([3, 4]), _i64([1, 2]), _flt([2.0, 3.0])]},
        None,
        "Name: {name}, Feature list: a, Index: 2.  Data types don't match. Expected type: int64",
    ),
    "missing list": (
        {},
        None,
        "Name: {name}, Feature list 'a' is required but could not be found.  Did you mean to "
        "include it in feature_list_dense_missing_assumed_empty or "
        "feature_list_dense_defaults?",
    ),
    "context count": (
        {"a": [_i64([2, 3])]},
        {"c": _i64([1, 2, 3])},
        "Inconsistent max number of elements for feature c: expected 2, but found 3",
    ),
    "context type": (
        {"a": [_i64([2, 3])]},
        {"c": _flt([1.0, 2.0])},
        "Name: {name}, Context feature: c.  Data types don't match. Expected type: int64",
    ),
}


@pytest.mark.parametrize("case", sorted(_SEQ_CASES))
@pytest.mark.parametrize("single", [True, False])
@pytest.mark.parametrize("name", ["in1", None])
def test_sequence_example_messages_name_the_record_as_tf(case, single, name):
    lists, context, message = _SEQ_CASES[case]
    rec = _seq_example(lists, context)
    sf = {"a": af.io.FixedLenSequenceFeature((2,), af.int64)}
    cf = {"c": af.io.FixedLenFeature((2,), af.int64)} if context else None
    if single:
        out = af.io.parse_single_sequence_example(rec, cf, sf, example_name=name)
    else:
        out = af.io.parse_sequence_example([rec], cf, sf, example_names=[name] if name else None)
    with pytest.raises(errors.InvalidArgumentError) as got:
        _run(out)
    assert str(got.value).split("\n")[0] == message.format(name=name or "<unknown>")


# -- RaggedFeature --------------------------------------------------------------------------


def test_ragged_feature_defaults_and_checks():
    f = af.io.RaggedFeature(af.float32)
    assert (f.dtype, f.value_key, f.partitions, f.row_splits_dtype, f.validate) == (
        af.float32, None, (), af.int32, False,
    )  # fmt: skip
    p = [af.io.RaggedFeature.UniformRowLength(2), af.io.RaggedFeature.RowSplits("s")]
    assert af.io.RaggedFeature(af.int64, "v", p).partitions == tuple(p)
    with pytest.raises(ValueError, match="Argument `dtype` must be int64, float32, or bytes; got"):
        af.io.RaggedFeature(af.int32)
    with pytest.raises(
        ValueError, match="Argument `row_splits_dtype` must be int32 or int64; got"
    ):
        af.io.RaggedFeature(af.float32, row_splits_dtype=af.float32)
    with pytest.raises(TypeError, match="Argument `partitions` cannot be cast to any of the"):
        af.io.RaggedFeature(af.float32, "v", ["s"])
    with pytest.raises(TypeError, match="Argument `validate` must be a bool; got 1"):
        af.io.RaggedFeature(af.float32, validate=1)


@pytest.mark.parametrize(
    "feature,message",
    [
        (
            parsing_ops.FixedLenFeature((None, 2, 1), af.float32),
            "First dimension of shape for feature a unknown. Consider using "
            "FixedLenSequenceFeature. Received feature=FixedLenFeature(shape=(None, 2, 1), "
            "dtype=tf.float32, default_value=None).",
        ),
        (
            parsing_ops.FixedLenFeature((1, None), af.int64, default_value=[[1]]),
            "All dimensions of shape for feature a need to be known but received (1, None).",
        ),
        (
            parsing_ops.FixedLenFeature([1, None], af.int64),
            "All dimensions of shape for feature a need to be known but received [1, None].",
        ),
        (
            parsing_ops.FixedLenFeature(None, af.int64),
            "Missing shape for feature a. Received feature=FixedLenFeature(shape=None, "
            "dtype=tf.int64, default_value=None).",
        ),
        (
            parsing_ops.FixedLenSequenceFeature((2,), af.int64),
            "Unsupported: FixedLenSequenceFeature requires allow_missing to be True.",
        ),
    ],
)
def test_parse_example_feature_shape_messages_when_built(feature, message):
    with pytest.raises(ValueError) as got:
        af.io.parse_example(["", ""], {"a": feature})
    assert str(got.value) == message


# -- RaggedFeature results (values, ragged_rank and splits dtype as TF 2.21 gives them) ------

_RT = [[[3.0], [4.0, 5.0, 6.0]], [], [], [[1.0, 2.0, -1.0], [], [8.0, 9.0], [5.0]]]


def _ragged_records():
    return [
        _example({"v": _flt([3, 4, 5, 6]), "s": _i64([0, 1, 4]), "l": _i64([1, 3]),
                  "st": _i64([0, 1]), "li": _i64([1, 4]), "ids": _i64([0, 1, 1, 1]),
                  "w": _byt([b"x"]), "z": _i64([7, 8])}),
        _example({"v": _flt([]), "s": _i64([0])}),
        _example({"v": feature_pb2.Feature(), "s": _i64([0]), "l": feature_pb2.Feature()}),
        _example({"v": _flt([1, 2, -1, 8, 9, 5]), "s": _i64([0, 3, 3, 5, 6]),
                  "l": _i64([3, 0, 2, 1]), "st": _i64([0, 3, 3, 5]), "li": _i64([3, 3, 5, 6]),
                  "ids": _i64([0, 0, 0, 2, 2, 3]), "w": _byt([b"y", b"z"])}),
    ]  # fmt: skip


def _ragged_features():
    R = af.io.RaggedFeature
    return {
        "splits": R(af.float32, "v", [R.RowSplits("s")]),
        "lengths": R(af.float32, "v", [R.RowLengths("l")]),
        "starts": R(af.float32, "v", [R.RowStarts("st")]),
        "limits": R(af.float32, "v", [R.RowLimits("li")]),
        "rowids": R(af.float32, "v", [R.ValueRowIds("ids")]),
        "uniform": R(af.float32, "v", [R.UniformRowLength(2)]),
        "uniform_splits": R(af.float32, "v", [R.UniformRowLength(2), R.RowSplits("s")]),
        "w": R(af.string),
        "z": R(af.int64, row_splits_dtype=af.int64),
    }


def _as_list(v):
    return v.to_list() if hasattr(v, "to_list") else v.tolist()


def _rank_and_splits(v):
    return getattr(v, "ragged_rank", 0), getattr(getattr(v, "row_splits", None), "dtype", None)


def test_parse_example_ragged_features_as_tf():
    out = _run(af.io.parse_example(_ragged_records(), _ragged_features()))
    want = {
        "splits": (_RT, 2, np.int32),
        "lengths": (_RT, 2, np.int32),
        "starts": (_RT, 2, np.int32),
        "limits": (_RT, 2, np.int32),
        "rowids": (_RT, 2, np.int32),
        "uniform": (
            [[[3.0, 4.0], [5.0, 6.0]], [], [], [[1.0, 2.0], [-1.0, 8.0], [9.0, 5.0]]],
            1,
            np.int32,
        ),  # fmt: skip
        "uniform_splits": (
            [[[[3.0], [4.0, 5.0, 6.0]]], [], [], [[[1.0, 2.0, -1.0], []], [[8.0, 9.0], [5.0]]]],
            3,
            np.int32,
        ),
        "w": ([[b"x"], [], [], [b"y", b"z"]], 1, np.int32),
        "z": ([[7, 8], [], [], []], 1, np.int64),
    }
    assert set(out) == set(want)
    for k, (values, rank, split_dtype) in want.items():
        assert _as_list(out[k]) == values, k
        assert _rank_and_splits(out[k]) == (rank, split_dtype), k


def test_parse_single_example_ragged_features_are_row_zero():
    out = _run(af.io.parse_single_example(_ragged_records()[0], _ragged_features()))
    rt0 = [[3.0], [4.0, 5.0, 6.0]]
    want = {
        "splits": (rt0, 1, np.int32),
        "lengths": (rt0, 1, np.int32),
        "starts": (rt0, 1, np.int32),
        "limits": (rt0, 1, np.int32),
        "rowids": (rt0, 1, np.int32),
        "uniform": ([[3.0, 4.0], [5.0, 6.0]], 0, None),  # no ragged dimension: a Tensor
        "uniform_splits": ([[[3.0], [4.0, 5.0, 6.0]]], 2, np.int32),
        "w": ([b"x"], 0, None),
        "z": ([7, 8], 0, None),
    }
    for k, (values, rank, split_dtype) in want.items():
        assert _as_list(out[k]) == values, k
        assert _rank_and_splits(out[k]) == (rank, split_dtype), k


@pytest.mark.parametrize(
    "partition,values",
    [("splits", [1, 2, 3, 4]), ("uniform", [1, 2, 3])],
)
def test_parse_example_ragged_partition_not_fitting_the_values_raises(partition, values):
    R = af.io.RaggedFeature
    p = R.RowSplits("s") if partition == "splits" else R.UniformRowLength(2)
    rec = _example({"v": _flt(values), "s": _i64([0, 5])})
    with pytest.raises(errors.InvalidArgumentError):  # TF: with validate=True
        _run(af.io.parse_example([rec], {"r": R(af.float32, "v", [p], validate=True)}))


def test_parse_example_ragged_key_conflicts_raise_tfs_messages():
    R = af.io.RaggedFeature
    recs = _ragged_records()
    cases = [
        ({"a": R(af.float32, "v"), "b": R(af.float32, "v", row_splits_dtype=af.int64)},
         "Conflicting partition type <dtype: 'int32'> vs <dtype: 'int64'> for feature v."),
        ({"a": R(af.float32, "v"), "b": R(af.int64, "v")},
         "Conflicting type <dtype: 'float32'> vs <dtype: 'int64'> for feature v."),
        ({"a": R(af.float32, "v"), "v": af.io.VarLenFeature(af.float32)},
         "Ragged and sparse keys must not intersect; ragged_keys: ['v'], sparse_keys: ['v'], "
         "intersection: {'v'}"),
        ({"a": R(af.float32, "v"), "b": af.io.SparseFeature("v", "x", af.float32, 3)},
         "Ragged and sparse keys must not intersect; ragged_keys: ['v'], sparse_keys: "
         "['v', 'x'], intersection: {'v'}"),
        ({"a": R(af.float32, "v"), "v": af.io.FixedLenFeature([1], af.float32)},
         str(("Dense and ragged keys must not intersect; dense_keys: ",
              "['v'], ragged_keys: ['v'], intersection: {'v'}"))),
    ]  # fmt: skip
    for features, message in cases:
        with pytest.raises(ValueError) as got:
            af.io.parse_example(recs, features)
        assert str(got.value) == message
    # a partition key read again as another feature's values, of one type: allowed
    ok = {"a": R(af.float32, "v", [R.RowSplits("s")]), "b": R(af.int64, "s")}
    assert _as_list(_run(af.io.parse_example(recs, ok))["b"]) == [
        [0, 1, 4], [0], [0], [0, 3, 3, 5, 6]
    ]  # fmt: skip


def _seq_ragged_records():
    return [
        _seq_example(
            {"b": [_flt([5]), _flt([3])], "c": [_i64([6, 7, 8, 9])]}, {"a": _flt([3, 4])}
        ),
        _seq_example({"b": [], "c": [_i64([]), _i64([1, 2, 3])]}, {"a": _flt([9])}),
        _seq_example({"b": [_flt([1]), _flt([1, 2]), _flt([1, 2, 3])]}),
        _seq_example({"b": [feature_pb2.Feature()], "c": [_i64([3, 3, 3])]},
                     {"a": feature_pb2.Feature()}),
    ]  # fmt: skip


def test_sequence_example_ragged_context_and_feature_lists_as_tf():
    R = af.io.RaggedFeature
    cf = {"a": R(af.float32)}
    sf = {"b": R(af.float32), "c": R(af.int64, row_splits_dtype=af.int64)}
    context, lists, lengths = af.io.parse_sequence_example(_seq_ragged_records(), cf, sf)
    got = _run((context, lists))
    assert lengths == {}
    assert _as_list(got[0]["a"]) == [[3.0, 4.0], [9.0], [], []]
    assert _rank_and_splits(got[0]["a"]) == (1, np.int32)
    # a record's empty step is kept: b of the last record is one empty step
    assert _as_list(got[1]["b"]) == [
        [[5.0], [3.0]],
        [],
        [[1.0], [1.0, 2.0], [1.0, 2.0, 3.0]],
        [[]],
    ]
    assert _rank_and_splits(got[1]["b"]) == (2, np.int32)
    assert _as_list(got[1]["c"]) == [[[6, 7, 8, 9]], [[], [1, 2, 3]], [], [[3, 3, 3]]]
    assert _rank_and_splits(got[1]["c"]) == (2, np.int64)
    single = _run(af.io.parse_single_sequence_example(_seq_ragged_records()[0], cf, sf))
    assert _as_list(single[0]["a"]) == [3.0, 4.0] and _rank_and_splits(single[0]["a"])[0] == 0
    assert _as_list(single[1]["b"]) == [[5.0], [3.0]]
    assert _rank_and_splits(single[1]["c"]) == (1, np.int64)


def test_sequence_example_nested_ragged_partitions_as_tf():
    R = af.io.RaggedFeature
    recs = [
        _seq_example(
            {"b_values": [_flt([1, 2, 3, 4]), _flt([2, 4, 6])],
             "b_splits": [_i64([0, 1, 4]), _i64([0, 2, 3])]},
            {"a_values": _flt([1, 2, 3, 4, 5, 6, 7]), "a_lengths": _i64([1, 2, 0, 1]),
             "a_splits": _i64([0, 1, 3, 4, 7])},
        ),
        _seq_example(),
    ]  # fmt: skip
    cf = {
        "a": R(
            af.float32,
            "a_values",
            [R.UniformRowLength(2), R.RowLengths("a_lengths"), R.RowSplits("a_splits")],
            row_splits_dtype=af.int64,
        )
    }
    sf = {"b": R(af.float32, "b_values", [R.RowSplits("b_splits")]),
          "c": R(af.float32, "b_values", [R.UniformRowLength(1)])}  # fmt: skip
    context, lists, _ = af.io.parse_sequence_example(recs, cf, sf)
    got = _run((context, lists))
    assert _as_list(got[0]["a"]) == [[[[[1.0]], [[2.0, 3.0], [4.0]]], [[], [[5.0, 6.0, 7.0]]]], []]
    assert _rank_and_splits(got[0]["a"]) == (4, np.int64)
    assert _as_list(got[1]["b"]) == [[[[1.0], [2.0, 3.0, 4.0]], [[2.0, 4.0], [6.0]]], []]
    assert _rank_and_splits(got[1]["b"]) == (3, np.int32)
    # UniformRowLength(1) innermost in a feature list: a dense inner dimension per step
    assert _as_list(got[1]["c"]) == [[[[1.0], [2.0], [3.0], [4.0]], [[2.0], [4.0], [6.0]]], []]
    assert _rank_and_splits(got[1]["c"]) == (2, np.int32)


@pytest.mark.parametrize("single", [True, False])
def test_sequence_ragged_values_and_partitions_of_different_step_counts_raise(single):
    R = af.io.RaggedFeature
    rec = _seq_example(
        {"b_values": [_flt([1, 2, 3, 4]), _flt([2, 4, 6])], "b_splits": [_i64([0, 1, 4])]}
    )
    sf = {"b": R(af.float32, "b_values", [R.RowSplits("b_splits")], validate=True)}
    out = (
        af.io.parse_single_sequence_example(rec, None, sf)
        if single
        else af.io.parse_sequence_example([rec], None, sf)
    )
    with pytest.raises(errors.InvalidArgumentError, match="Feature b: values and partitions"):
        _run(out)


# -- RaggedTensor -----------------------------------------------------------------------------


def test_ragged_constant_concat_rows_and_uniform_row_length():
    c = af.ragged.constant([[3.0, 4.0], [], [1.0, 2.0, -1.0]], row_splits_dtype=af.int32)
    assert c.dtype == af.float32 and c.row_splits.dtype == af.int32 and c.ragged_rank == 1
    n = af.ragged.constant([[[1], [2]], [[3]]], ragged_rank=1)  # inner [1] dense, int32
    assert n.dtype == af.int32 and n.ragged_rank == 1 and n.shape.as_list() == [2, None, 1]
    s = af.ragged.constant([[], [b"hi"]])
    u = af.RaggedTensor.from_uniform_row_length(af.ragged.constant([[5], [], [6, 7]]), 1)
    assert u.ragged_rank == 2
    got = _run({"cc": af.ragged.concat([c, c], axis=0), "c2": c[2], "n0": n[0], "s": s, "u": u,
                "u2": u[2]})  # fmt: skip
    assert got["cc"].to_list() == [[3.0, 4.0], [], [1.0, 2.0, -1.0]] * 2
    assert got["c2"].tolist() == [1.0, 2.0, -1.0]
    assert got["n0"].tolist() == [[1], [2]]
    assert got["s"].to_list() == [[], [b"hi"]]
    assert got["u"].to_list() == [[[5]], [[]], [[6, 7]]] and got["u"].ragged_rank == 2
    assert got["u2"].to_list() == [[6, 7]]
    v = af.ragged.constant_value([[1, 2], [3]])
    assert v.to_list() == [[1, 2], [3]] and v.row_splits.tolist() == [0, 2, 3]


def test_strided_slice_of_a_string_vector_to_a_scalar():
    t = ops.convert_to_tensor([b"a", b"b"])
    assert _run(t[1]) == b"b"
