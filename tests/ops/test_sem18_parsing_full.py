"""Issue 18, the rest of TF's parsing_ops_test (the whole file, run by
tools/tf_kernel_tests.py): behaviours asyncflow differed in, each asserted as TF 2.21
gives it in graph mode (v2 behaviour off) -- every message and value here was read from
TF 2.21 running the same program beside these tests."""

from __future__ import annotations

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
