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


def test_parse_single_example_scalar_strings_are_arrays(sess):
    # The kernel's scalar string outputs are 0-d object arrays (ASYNCFLOW_CHECK_KERNELS,
    # which the suite runs with, rejected the bare bytes it returned); fetched, TF 2.21
    # gives b"abc" for the present feature and the default b"zz" for the missing one.
    ex = pb.Example()
    ex.features.feature["s"].bytes_list.value.append(b"abc")
    p = af.placeholder(af.string, [])
    spec = {
        "s": P.FixedLenFeature([], af.string),
        "d": P.FixedLenFeature([], af.string, default_value="zz"),
    }
    out = P.parse_single_example(p, spec)
    got = sess.run(out, {p: ex.SerializeToString()})
    assert got == {"s": b"abc", "d": b"zz"}


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
    with pytest.raises(TypeError):  # as TF's op definition: sparse_types
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


# -- the batch paths (one protobuf parse per batch; raw float view) ---------------------------


def _float_example(values, packed=True, key=b"x"):
    """An Example with one FloatList, packed (as TF writes) or unpacked (valid protobuf)."""
    import struct

    if packed:
        payload = struct.pack(f"<{len(values)}f", *values)
        flist = b"\x0a" + bytes([len(payload)]) + payload
    else:
        flist = b"".join(b"\x0d" + struct.pack("<f", v) for v in values)
    feature = b"\x12" + bytes([len(flist)]) + flist
    entry = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    return b"\x0a" + bytes([len(features)]) + features


def test_unpacked_float_lists_parse_like_packed_ones(sess):
    packed = _float_example([1.5, -2.0])
    unpacked = _float_example([3.0, 4.5], packed=False)
    assert pb.Example.FromString(unpacked).features.feature["x"].float_list.value == [3.0, 4.5]
    dense = P.parse_example(
        af.constant([packed, unpacked]), {"x": P.FixedLenFeature([2], af.float32)}
    )
    sparse = P.parse_example(af.constant([unpacked, packed]), {"x": P.VarLenFeature(af.float32)})
    got, sp = sess.run([dense["x"], sparse["x"]])
    assert got.tolist() == [[1.5, -2.0], [3.0, 4.5]]
    assert sp.values.tolist() == [3.0, 4.5, 1.5, -2.0]
    assert sp.indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_fast_path_defaults_types_and_counts(sess):
    def ex(**features):
        e = pb.Example()
        for k, v in features.items():
            f = e.features.feature[k]
            if isinstance(v[0], float):
                f.float_list.value.extend(v)
            elif isinstance(v[0], int):
                f.int64_list.value.extend(v)
            else:
                f.bytes_list.value.extend(v)
        return e.SerializeToString()

    records = [ex(x=[1.0, 2.0], n=[7]), ex(n=[8]), ex(x=[5.0, 6.0], n=[9], s=[b"a", b"b"])]
    spec = {
        "x": P.FixedLenFeature([2], af.float32, default_value=[-1.0, -1.0]),
        "n": P.FixedLenFeature([], af.int64),
        "s": P.VarLenFeature(af.string),
    }
    out = sess.run(P.parse_example(af.constant(records), spec))
    assert out["x"].tolist() == [[1.0, 2.0], [-1.0, -1.0], [5.0, 6.0]]
    assert out["n"].tolist() == [7, 8, 9] and out["n"].dtype == np.int64
    assert out["s"].values.tolist() == [b"a", b"b"] and out["s"].indices.tolist() == [
        [2, 0],
        [2, 1],
    ]
    assert out["s"].dense_shape.tolist() == [3, 2]
    wrong_type = [ex(x=[1, 2], n=[1])]
    with pytest.raises(errors.InvalidArgumentError, match="Data types don't match"):
        sess.run(P.parse_example(af.constant(wrong_type), spec)["x"])
    wrong_count = [ex(x=[1.0], n=[1])]
    with pytest.raises(errors.InvalidArgumentError, match="Values size: 1"):
        sess.run(P.parse_example(af.constant(wrong_count), spec)["x"])
    with pytest.raises(errors.InvalidArgumentError, match="Data types don't match"):
        sess.run(P.parse_example(af.constant([ex(s=[3])]), {"s": P.VarLenFeature(af.string)}))
    with pytest.raises(errors.InvalidArgumentError, match="is required"):
        sess.run(P.parse_example(af.constant([ex(x=[1.0, 2.0])]), spec)["n"])


def test_long_records_and_a_bad_one_in_a_batch(sess):
    e = pb.Example()
    e.features.feature["x"].float_list.value.extend(range(5000))  # > 16 KiB: long prefix
    long = e.SerializeToString()
    out = P.parse_example(af.constant([long, long]), {"x": P.FixedLenFeature([5000], af.float32)})
    got = sess.run(out["x"])
    assert got.shape == (2, 5000) and got[1, 4999] == 4999.0
    bad = af.constant([long, b"\x0a\x05abc"])
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse example input"):
        sess.run(P.parse_example(bad, {"x": P.VarLenFeature(af.float32)})["x"])


# -- issue 18 item 17: edge inputs, as TF 2.21 parses them --------------------------------------

_CSV_TF = [
    # record -> TF 2.21's [int, int] or its error message (record_defaults [[0], [0]])
    ("1,2", [1, 2]),
    ("1,\n2", [1, 2]),  # CR/LF where a field starts is skipped
    ('"1\n",2', [1, 2]),  # ... and allowed inside a quoted field
    (" 1,2", [1, 2]),
    ("1,2\n", "Unquoted fields cannot have quotes/CRLFs inside"),
    ("1\r,2", "Unquoted fields cannot have quotes/CRLFs inside"),
    ("1,2\r\n", "Unquoted fields cannot have quotes/CRLFs inside"),
    ('"a"b,2', "Quote inside a string has to be escaped by another quote"),
    ('1,"2', "Quoted field has to end with quote followed by delim or end"),
    ("", "Expect 2 fields but have 0 in record 0"),
    ("1,2,3", "Expect 2 fields but have 3 in record 0"),
]


@pytest.mark.parametrize("record,want", _CSV_TF)
def test_decode_csv_edge_records_match_tf(record, want):
    out = P.decode_csv(record, [[0], [0]])
    with af.Session() as sess:
        if isinstance(want, str):
            with pytest.raises(errors.InvalidArgumentError, match=want.replace("(", r"\(")):
                sess.run(out)
        else:
            assert [int(v) for v in sess.run(out)] == want


def test_decode_csv_strings_with_newlines_match_tf():
    # TF 2.21: '"a\nb",c' -> [b"a\nb", b"c"]; "a\nb,c" and "a\rb,c" are rejected.
    with af.Session() as sess:
        assert sess.run(P.decode_csv('"a\nb",c', [[""], [""]])) == [b"a\nb", b"c"]
        for bad in ("a\nb,c", "a\rb,c"):
            with pytest.raises(errors.InvalidArgumentError, match="CRLFs"):
                sess.run(P.decode_csv(bad, [[""], [""]]))


@pytest.mark.parametrize(
    "text,dtype,want",
    [
        ("0x10", af.float32, 16.0),
        ("0x1p3", af.float32, 8.0),
        ("0X1P-2", af.float32, 0.25),
        ("-0x10", af.float32, -16.0),
        ("0x1.8p1", af.float64, 3.0),
        ("infinity", af.float32, np.inf),
        ("0x", af.float32, None),
        ("0b1", af.float32, None),
        ("1_0", af.float32, None),
        ("0x10", af.int32, None),  # strtol base 10: hex is not an int
        ("010", af.int32, 10),
        ("2147483648", af.int32, None),
    ],
)
def test_string_to_number_hex_and_edges_match_tf(text, dtype, want):
    t = P.string_to_number(text, dtype)
    with af.Session() as sess:
        if want is None:
            with pytest.raises(errors.InvalidArgumentError, match="could not correctly convert"):
                sess.run(t)
        else:
            assert sess.run(t) == want


def test_example_with_a_non_utf8_key_parses():
    # TF 2.21: an Example whose features are {b"\xff": [7], b"a": [3]} parses; b"\xff"
    # matches no requested name ("\xff" as a str is b"\xc3\xbf"), so it gets its default.
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            if not n:
                return out + bytes([b])
            out += bytes([b | 0x80])

    def ld(field, payload):
        return bytes([(field << 3) | 2]) + varint(len(payload)) + payload

    def entry(key, v):
        return ld(1, key) + ld(2, ld(3, ld(1, varint(v))))

    ex = ld(1, ld(1, entry(b"\xff", 7)) + ld(1, entry(b"a", 3)))
    spec = {k: P.FixedLenFeature([], af.int64, default_value=-1) for k in ("a", "\xff")}
    with af.Session() as sess:
        got = sess.run(P.parse_single_example(ex, spec))
    assert got == {"a": 3, "\xff": -1}


@pytest.mark.parametrize("seed", range(4))
def test_batch_paths_agree_with_reading_each_example(sess, seed):
    """Random records (negative and 64-bit ints, long and empty strings, empty lists,
    missing features) parsed in one batch equal what each Example message holds."""
    rng = np.random.RandomState(seed)
    records, want_i, want_f, want_s, want_v = [], [], [], [], []
    for r in range(60):
        e = pb.Example()
        f = e.features.feature
        i = int(rng.choice([0, -1, 1 << 62, -(1 << 63), rng.randint(-1000, 1000)]))
        f["i"].int64_list.value.append(i)
        floats = rng.randn(3).astype(np.float32)
        if r % 7 != 3:  # else missing: the default fills in
            f["f"].float_list.value.extend(floats.tolist())
        s = bytes(rng.randint(0, 256, size=rng.choice([0, 5, 200, 20000])).astype(np.uint8))
        f["s"].bytes_list.value.append(s)
        v = rng.randint(-(1 << 40), 1 << 40, size=rng.randint(0, 4)).tolist()
        if r % 5 != 1:  # else missing
            f["v"].int64_list.value.extend(v)
        records.append(e.SerializeToString())
        want_i.append(i)
        want_f.append(floats.tolist() if r % 7 != 3 else [9.0, 9.0, 9.0])
        want_s.append(s)
        want_v.append(v if r % 5 != 1 else [])
    spec = {
        "i": P.FixedLenFeature([], af.int64),
        "f": P.FixedLenFeature([3], af.float32, default_value=[9.0, 9.0, 9.0]),
        "s": P.FixedLenFeature([], af.string),
        "v": P.VarLenFeature(af.int64),
    }
    out = sess.run(P.parse_example(af.constant(records), spec))
    assert out["i"].tolist() == want_i
    np.testing.assert_array_equal(out["f"], np.float32(want_f))
    assert out["s"].tolist() == want_s
    assert out["v"].values.tolist() == [x for v in want_v for x in v]
    rows = [r for r, v in enumerate(want_v) for _ in v]
    assert out["v"].indices[:, 0].tolist() == rows
    assert out["v"].dense_shape.tolist() == [60, max(len(v) for v in want_v)]


@pytest.mark.parametrize(
    "data,dtype,kwargs,want",
    [
        # TF 2.21's tf.io.decode_raw(..., fixed_length=) (op DecodePaddedRaw)
        ([b"\x01\x02", b"\x03"], af.uint8, {}, [[1, 2, 0, 0], [3, 0, 0, 0]]),
        ([b"\x01\x00\x02", b"\x03\x00"], af.int16, {}, [[1, 2], [3, 0]]),
        ([b"\x01\x00"], af.int16, {"little_endian": False}, [[256, 0]]),
        ([b"\x01\x02\x03\x04\x05\x06"], af.uint8, {}, [[1, 2, 3, 4]]),
        (b"\x01\x02", af.uint8, {}, [1, 2, 0, 0]),
    ],
)
def test_decode_raw_fixed_length_matches_tf(data, dtype, kwargs, want):
    t = P.decode_raw(af.constant(data), dtype, fixed_length=4, **kwargs)
    assert t.op.type == "DecodePaddedRaw"
    assert t.shape.as_list() == list(np.shape(want))
    with af.Session() as sess:
        got = sess.run(t)
    assert got.dtype == dtype.as_numpy_dtype and got.tolist() == want


def test_decode_raw_fixed_length_errors_match_tf():
    with pytest.raises(ValueError, match="evenly divisible by 2 but is 3"):
        P.decode_raw(af.constant([b"\x01\x02"]), af.int16, fixed_length=3)
    n = af.placeholder(af.int32, [])
    t = P.decode_raw(af.constant([b"\x01"]), af.uint8, fixed_length=n)
    with af.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match=r"fixed_length \(0\) must be"):
            sess.run(t, {n: 0})


@pytest.mark.parametrize("seed", range(2))
def test_single_example_fast_path_agrees_with_each_message(sess, seed):
    """parse_single_example's one-record path (dense features only) gives what each
    Example message holds: negative and 64-bit ints, long strings, missing features
    with defaults; a wrong kind or count still raises TF's errors."""
    rng = np.random.RandomState(seed)
    rec = af.placeholder(af.string, [])
    spec = {
        "i": P.FixedLenFeature([2], af.int64),
        "f": P.FixedLenFeature([3], af.float32, default_value=[9.0, 9.0, 9.0]),
        "s": P.FixedLenFeature([], af.string),
    }
    out = P.parse_single_example(rec, spec)
    for r in range(20):
        e = pb.Example()
        f = e.features.feature
        ints = [int(rng.choice([0, -1, 1 << 62, -(1 << 63), 1000])) for _ in range(2)]
        f["i"].int64_list.value.extend(ints)
        floats = rng.randn(3).astype(np.float32)
        if r % 3 != 1:
            f["f"].float_list.value.extend(floats.tolist())
        s = bytes(rng.randint(0, 256, size=rng.choice([0, 5, 200, 20000])).astype(np.uint8))
        f["s"].bytes_list.value.append(s)
        got = sess.run(out, {rec: e.SerializeToString()})
        assert got["i"].tolist() == ints and got["i"].dtype == np.int64
        np.testing.assert_array_equal(got["f"], floats if r % 3 != 1 else np.float32([9] * 3))
        assert got["s"] == s
    bad = pb.Example()
    bad.features.feature["i"].float_list.value.extend([1.0, 2.0])
    bad.features.feature["s"].bytes_list.value.append(b"x")
    with pytest.raises(errors.InvalidArgumentError, match="Data types don't match"):
        sess.run(out, {rec: bad.SerializeToString()})
    short = pb.Example()
    short.features.feature["i"].int64_list.value.append(1)
    short.features.feature["s"].bytes_list.value.append(b"x")
    # TF 2.21's ParseSingleExample message for a wrong count (not ParseExample's).
    with pytest.raises(errors.InvalidArgumentError, match="Key: i.  Can't parse serialized"):
        sess.run(out, {rec: short.SerializeToString()})
