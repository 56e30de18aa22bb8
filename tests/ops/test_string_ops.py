"""String ops against outputs TensorFlow recorded (tests/fixtures/io_tf.json)."""

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import parsing_ops, string_ops
from asyncflow.sparse_tensor import SparseTensorValue

REF = json.loads((pathlib.Path(__file__).parents[1] / "fixtures" / "io_tf.json").read_text())
TF = REF["strings"]


def decode(spec):
    """A fixture value (see record_io_tf.py) as NumPy."""
    if spec.get("sparse"):
        return SparseTensorValue(
            decode(spec["indices"]), decode(spec["values"]), decode(spec["dense_shape"])
        )
    if spec["dtype"] == "string":
        out = np.empty(len(spec["hex"]), dtype=object)
        out[:] = [bytes.fromhex(h) for h in spec["hex"]]
        return out.reshape(spec["shape"])
    return np.array(spec["value"], dtype=spec["dtype"]).reshape(spec["shape"])


def check(got, want):
    if isinstance(want, SparseTensorValue):
        assert isinstance(got, SparseTensorValue)
        for g, w in zip(got, want):
            check(g, w)
        return
    got = np.asarray(got)
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.dtype == object and list(got.ravel()) == list(want.ravel())
    else:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


s = af.constant
CASES = {
    "split": lambda: string_ops.string_split(s([b"a b  c", b"", b"d"])),
    "split_delim": lambda: string_ops.string_split(s([b"a,b,,c", b"x"]), delimiter=","),
    "split_skip_false": lambda: string_ops.string_split(
        s([b"a,b,,c"]), delimiter=",", skip_empty=False
    ),
    "split_multi": lambda: string_ops.string_split(s([b"a,b;c"]), delimiter=",;"),
    "substr": lambda: string_ops.substr(s([b"hello", b"world!"]), 1, 3),
    "substr_vec": lambda: string_ops.substr(s([b"hello", b"world!"]), [0, 2], [2, 10]),
    "substr_oob": lambda: string_ops.substr(s([b"hi"]), 5, 1),
    "join": lambda: string_ops.string_join(
        [s([b"a", b"b"]), s(b"-"), s([b"c", b"d"])], separator="+"
    ),
    "regex": lambda: string_ops.regex_replace(s([b"aaa bbb", b"cab"]), "a+", "X"),
    "regex_first": lambda: string_ops.regex_replace(
        s([b"aaa bab"]), "a", "Y", replace_global=False
    ),
    "regex_group": lambda: string_ops.regex_replace(s([b"john smith"]), r"(\w+) (\w+)", r"\2 \1"),
    "length": lambda: string_ops.string_length(s([b"abc", b"", "h\u00e9".encode()])),
    "to_number": lambda: parsing_ops.string_to_number(s([b"1.5", b"-2e3", b" 7"])),
    "to_number_int": lambda: parsing_ops.string_to_number(s([b"12", b"-3"]), out_type=af.int32),
    "to_number_bad": lambda: parsing_ops.string_to_number(s([b"1.5x"])),
    "to_number_int_bad": lambda: parsing_ops.string_to_number(s([b"1.5"]), out_type=af.int32),
    "as_string": lambda: string_ops.as_string(s([1.5, -2.25], af.float32)),
    "as_string_int": lambda: string_ops.as_string(s([1, -20], af.int64)),
    "decode_raw": lambda: parsing_ops.decode_raw(
        s([b"\x01\x00\x02\x00", b"\xff\xff\x00\x01"]), af.int16
    ),
    "decode_raw_be": lambda: parsing_ops.decode_raw(
        s([b"\x01\x00\x02\x00"]), af.int16, little_endian=False
    ),
    "decode_raw_f32": lambda: parsing_ops.decode_raw(
        s(np.float32([1.5, -2]).tobytes()), af.float32
    ),
    "decode_raw_bad": lambda: parsing_ops.decode_raw(s([b"\x01\x00\x02"]), af.int16),
    "decode_raw_uneven": lambda: parsing_ops.decode_raw(
        s([b"\x01\x00", b"\x01\x00\x02\x00"]), af.int16
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_against_tf(case, sess):
    out = CASES[case]()
    want = TF[case]
    if "error" in want:
        with pytest.raises(getattr(errors, want["error"])) as e:
            sess.run(out)
        assert want["message"] in e.value.message
    else:
        check(sess.run(out), decode(want["ok"]))


def test_string_split_static_shapes(graph):
    sp = string_ops.string_split(af.constant([b"a b"]))
    assert sp.indices.shape.as_list() == [None, 2]
    assert sp.dense_shape.shape.as_list() == [2]
    assert sp.dtype == af.string


def test_string_split_sep_is_the_delimiter_set(sess):
    # TF 2.21's tf.compat.v1.string_split: `sep` is `delimiter`'s newer name (StringSplit,
    # every character a separator), not tf.strings.split's whole-string separator
    sp = string_ops.string_split(af.constant([b"a<>b<><>c", b""]), sep="<>")
    assert sp.indices.op.type == "StringSplit"
    v = sess.run(sp)
    assert list(v.values) == [b"a", b"b", b"c"]
    np.testing.assert_array_equal(v.dense_shape, [2, 3])
    chars = sess.run(string_ops.string_split(af.constant([b"a,b", b"x;y"]), ""))
    assert list(chars.values) == [b"a", b",", b"b", b"x", b";", b"y"]
    with pytest.raises(ValueError, match=r"^Cannot specify both 'delimiter' and 'sep'\.$"):
        string_ops.string_split(af.constant([b"a"]), sep=",", delimiter=";")
    rows = string_ops.string_split(af.constant([b"a b", b"", b"c"]), result_type="RaggedTensor")
    assert rows.row_splits.dtype == af.int64
    assert sess.run(rows).to_list() == [[b"a", b"b"], [], [b"c"]]


def test_string_split_rejects_matrix(sess):
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(string_ops.string_split(af.placeholder(af.string)), {"Placeholder:0": [["a"]]})


def test_regex_bad_pattern_is_invalid_argument(sess):
    with pytest.raises(errors.InvalidArgumentError, match="Invalid pattern"):
        sess.run(string_ops.regex_replace(af.constant([b"x"]), "(", "y"))


def test_substr_utf8_and_negative_pos(sess):
    text = af.constant(["h\u00e9llo".encode()])
    assert sess.run(string_ops.substr(text, 1, 2, unit="UTF8_CHAR"))[0] == "\u00e9l".encode()
    assert sess.run(string_ops.substr(af.constant([b"hello"]), -3, 2))[0] == b"ll"


def test_string_join_shape_mismatch(sess):
    a = af.placeholder(af.string)
    joined = string_ops.string_join([a, af.constant([b"x", b"y", b"z"])])
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(joined, {a: [b"a", b"b"]})


def test_as_string_options(sess):
    x = af.constant([3.14159], af.float32)
    assert sess.run(string_ops.as_string(x, precision=2))[0] == b"3.14"
    assert sess.run(string_ops.as_string(x, scientific=True, precision=1))[0] == b"3.1e+00"
    assert sess.run(string_ops.as_string(af.constant([7]), width=3, fill="0"))[0] == b"007"
