"""Parsing ops (ParseExample, DecodeCSV) against outputs TensorFlow recorded."""

import json
import pathlib

import numpy as np
import pytest
from test_string_ops import check, decode

import asyncflow as af
from asyncflow import errors
from asyncflow import example_pb as pb
from asyncflow.ops import parsing_ops as P
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

REF = json.loads((pathlib.Path(__file__).parents[1] / "fixtures" / "io_tf.json").read_text())
SERIALIZED = [bytes.fromhex(h) for h in REF["examples"]]


def run_expect(sess, out, want):
    if "error" in want:
        with pytest.raises(getattr(errors, want["error"])) as e:
            sess.run(out)
        if want["message"] != "<undecodable>":
            assert want["message"] in e.value.message
        return
    got = sess.run(out)
    want = want["ok"]
    if isinstance(want, dict) and not want.get("sparse") and "dtype" not in want:
        assert sorted(got) == sorted(want)
        for k in want:
            check(got[k], decode(want[k]))
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check(g, decode(w))
    else:
        check(got, decode(want))


def test_parse_example_matches_tf(sess):
    spec = {
        "x": P.FixedLenFeature([2], af.float32),
        "label": P.FixedLenFeature([], af.int64),
        "name": P.FixedLenFeature([], af.string),
        "tags": P.VarLenFeature(af.string),
        "missing": P.FixedLenFeature([1], af.int64, default_value=[42]),
        "label_var": P.VarLenFeature(af.int64),
    }
    out = P.parse_example(af.constant(SERIALIZED), spec)
    assert isinstance(out["tags"], SparseTensor)
    assert out["x"].shape.as_list() == [3, 2]
    assert out["label"].shape.as_list() == [3]
    run_expect(sess, out, REF["parse_example"])


def test_parse_single_example_matches_tf(sess):
    spec = {"x": P.FixedLenFeature([2], af.float32), "tags": P.VarLenFeature(af.string)}
    out = P.parse_single_example(af.constant(SERIALIZED[0]), spec)
    assert out["x"].shape.as_list() == [2]
    run_expect(sess, out, REF["parse_single_example"])


@pytest.mark.parametrize(
    "case, spec",
    [
        ("parse_missing", {"nope": P.FixedLenFeature([], af.int64)}),
        ("parse_wrong_type", {"x": P.FixedLenFeature([2], af.int64)}),
        ("parse_wrong_size", {"x": P.FixedLenFeature([3], af.float32)}),
    ],
)
def test_parse_example_errors_match_tf(sess, case, spec):
    run_expect(sess, P.parse_example(af.constant(SERIALIZED), spec), REF[case])


@pytest.mark.parametrize("garbage", [b"\xff\xff", b"\x0a\x05ab", b"\x0a\x02\x0a\x09", b"\x08"])
def test_parse_example_garbage_is_invalid_argument(sess, garbage):
    out = P.parse_example(af.constant([garbage]), {"x": P.VarLenFeature(af.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse example"):
        sess.run(out)


def test_parse_fixed_len_sequence_feature_pads(sess):
    exs = [
        pb.Example(
            features=pb.Features(feature={"s": pb.Feature(int64_list=pb.Int64List(value=v))})
        )
        for v in ([1, 2, 3], [4])
    ]
    ser = af.constant([e.SerializeToString() for e in exs] + [pb.Example().SerializeToString()])
    spec = {"s": P.FixedLenSequenceFeature([], af.int64, allow_missing=True, default_value=-1)}
    got = sess.run(P.parse_example(ser, spec))["s"]
    np.testing.assert_array_equal(got, [[1, 2, 3], [4, -1, -1], [-1, -1, -1]])


def test_parse_example_build_errors(graph):
    with pytest.raises(ValueError):
        P.parse_example(af.constant([b""]), {})
    with pytest.raises(ValueError):
        P.parse_example(af.constant([b""]), {"x": P.VarLenFeature(af.int32)})


def test_example_messages_roundtrip_tf_bytes():
    for h, values in zip(REF["examples"], REF["example_values"]):
        ser = bytes.fromhex(h)
        ex = pb.Example.FromString(ser)
        # TF wrote these with sorted map keys: protobuf's deterministic mode does the same
        assert ex.SerializeToString(deterministic=True) == ser
        np.testing.assert_allclose(
            ex.features.feature["x"].float_list.value, values["x"], rtol=1e-6
        )
        assert ex.features.feature["label"].int64_list.value == values["label"]
        assert ex.features.feature["name"].WhichOneof("kind") == "bytes_list"
        built = pb.Example(
            features=pb.Features(
                feature={
                    "x": pb.Feature(float_list=pb.FloatList(value=values["x"])),
                    "label": pb.Feature(int64_list=pb.Int64List(value=values["label"])),
                    "name": pb.Feature(
                        bytes_list=pb.BytesList(value=[bytes.fromhex(v) for v in values["name"]])
                    ),
                    "tags": pb.Feature(
                        bytes_list=pb.BytesList(value=[bytes.fromhex(v) for v in values["tags"]])
                    ),
                }
            )
        )
        assert built.SerializeToString(deterministic=True) == ser
        assert built == ex


def test_example_mutation_api():
    ex = pb.Example()
    assert ex.SerializeToString() == bytes.fromhex(REF["empty_example"])
    ex.features.feature["v"].int64_list.value.extend([1, -1])
    ex.features.feature["f"].float_list.value.append(0.5)
    back = pb.Example()
    n = back.ParseFromString(ex.SerializeToString())
    assert n == len(ex.SerializeToString())
    assert back.features.feature["v"].int64_list.value == [1, -1]
    assert back.features.feature["f"].float_list.value == [0.5]
    assert back.features.feature["v"].WhichOneof("kind") == "int64_list"


def test_sequence_example_roundtrip_tf_bytes():
    ser = bytes.fromhex(REF["sequence_example"])
    seq = pb.SequenceExample.FromString(ser)
    assert seq.context.feature["len"].int64_list.value == [2]
    toks = seq.feature_lists.feature_list["tok"].feature
    assert [f.int64_list.value for f in toks] == [[1, 2], [3]]
    assert seq.SerializeToString(deterministic=True) == ser


@pytest.mark.parametrize("garbage", [b"\x0a", b"\x0a\x10", b"\xff" * 11, b"\x0b"])
def test_example_decode_error(garbage):
    with pytest.raises(pb.DecodeError):
        pb.Example.FromString(garbage)


# -- DecodeCSV ---------------------------------------------------------------------------------

CSV_CASES = {
    "basic": ([b"1,2.5,abc", b"4,5,def"], [[0], [0.0], [""]], {}),
    "defaults": ([b",,", b"7,,x"], [[9], [1.5], ["d"]], {}),
    "quoted": ([b'1,"a,b",3', b'2,"he said ""hi""",4'], [[0], [""], [0]], {}),
    "delim": ([b"1|2", b"3|4"], [[0], [0]], {"field_delim": "|"}),
    "na": ([b"NA,3", b"5,NA"], [[-1], [-2]], {"na_value": "NA"}),
    "no_quote": ([b'"a",b'], [[""], [""]], {"use_quote_delim": False}),
    "int64": ([b"9000000000"], [[np.int32(0)]], {}),
    "required_missing": ([b",1"], "REQUIRED_INT", {}),
    "bad_int": ([b"x,1"], [[0], [0]], {}),
    "too_many": ([b"1,2,3"], [[0], [0]], {}),
    "too_few": ([b"1"], [[0], [0]], {}),
    "float_nan": ([b"nan,inf"], [[0.0], [0.0]], {}),
    "scalar": (b"1,2", [[0], [0]], {}),
}


@pytest.mark.parametrize("case", sorted(CSV_CASES))
def test_decode_csv_matches_tf(sess, case):
    records, defaults, kw = CSV_CASES[case]
    if defaults == "REQUIRED_INT":
        defaults = [af.constant([], af.int32), [0]]
    out = P.decode_csv(records, defaults, **kw)
    run_expect(sess, out, REF["decode_csv"][case])


def test_decode_csv_int64_default_and_select_cols(sess):
    out = P.decode_csv([b"1,9000000000,x"], [[np.int64(0)], [""]], select_cols=[1, 2])
    a, b = sess.run(out)
    assert a.dtype == np.int64 and a[0] == 9000000000 and b[0] == b"x"


def test_decode_csv_bad_quotes(sess):
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(P.decode_csv([b'"abc,1'], [[""], [0]]))
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(P.decode_csv([b'a"b,1'], [[""], [0]]))


def test_sparse_tensor_value_fetch(sess):
    sp = SparseTensor([[0, 1]], [5.0], [2, 3])
    v = sess.run(sp)
    assert isinstance(v, SparseTensorValue)
    np.testing.assert_array_equal(v.dense_shape, [2, 3])
    assert sp.shape.as_list() == [2, 3]
    assert isinstance(sess.run({"a": [sp]})["a"][0], SparseTensorValue)
