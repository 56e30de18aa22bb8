"""TF's Unicode string ops (UnicodeDecode[WithOffsets], UnicodeEncode, UnicodeTranscode,
UnicodeScript, StringNGrams, UnsortedSegmentJoin) and their tf.strings builders, against
TF 2.21's recorded results: every case of tests/fixtures/string_unicode_cases.py (value,
or error class and message), and a GraphDef TF wrote with the raw ops, imported and run
to TF's outputs.  Fixtures recorded by tests/fixtures/record_string_unicode_tf.py.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import string_unicode_cases as C  # noqa: E402

TABLE = json.loads((HERE / "string_unicode" / "cases.json").read_text())


def plain(v):
    if hasattr(v, "to_list"):
        v = v.to_list()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    return v


def unhex(v):
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    if isinstance(v, list):
        return [unhex(x) for x in v]
    return v


def tf_message(message: str) -> str:
    """The op's own message in a TF error (the line before TF's node trailer)."""
    lines = [ln for ln in message.split("\n") if ln.strip() and not ln.startswith("\t [[")]
    return lines[-1]


def arg(a):
    if isinstance(a, C.ragged):
        return tf.ragged.constant(a.value, dtype=a.dtype)
    return a


@pytest.mark.parametrize("name,fn,args,kwargs", C.CASES, ids=[c[0] for c in C.CASES])
def test_case_matches_tf(name, fn, args, kwargs):
    want = TABLE[name]
    with tf.Graph().as_default():
        if "build_error" in want:
            with pytest.raises(getattr(__builtins__, want["build_error"], ValueError)) as e:
                getattr(tf.strings, fn)(*[arg(a) for a in args], **kwargs)
            assert want["message"].startswith(str(e.value).split(" for '")[0])
            return
        out = getattr(tf.strings, fn)(*[arg(a) for a in args], **kwargs)
        with tf.Session() as sess:
            if "error" in want:
                with pytest.raises(getattr(tf.errors, want["error"])) as e:
                    sess.run(out)
                assert tf_message(want["message"]) in str(e.value)
                return
            got = sess.run(out)
    assert plain(got) == want["value"]


def test_graphdef_tf_wrote_imports_and_runs():
    table = json.loads((HERE / "string_unicode" / "graph_values.json").read_text())
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "string_unicode" / "graph.pb").read_bytes())
    feeds = {k: unhex(v) for k, v in table["feeds"].items()}
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        types = {op.type for op in g.get_operations()}
        assert {"UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode",
                "UnicodeTranscode", "UnicodeScript", "StringNGrams",
                "UnsortedSegmentJoin"} <= types  # fmt: skip
        with tf.Session() as sess:
            for name, want in table["values"].items():
                f = dict(feeds)
                if name.startswith("enc"):
                    f["splits:0"] = table["encode_splits"]
                got = sess.run(name, {g.get_tensor_by_name(k): v for k, v in f.items()})
                assert plain(got) == want, name


def test_static_shapes_and_build_errors():
    with tf.Graph().as_default():
        s = tf.placeholder(tf.string, [3])
        cps = tf.strings.unicode_decode(s, "UTF-8")
        assert cps.row_splits.shape.as_list() == [4] and cps.dtype == tf.int32
        enc = tf.strings.unicode_encode(tf.placeholder(tf.int32, [4, 5]), "UTF-8")
        assert enc.shape.as_list() == [4]
        j = tf.strings.unsorted_segment_join(
            tf.placeholder(tf.string, [5, 3, 2]), tf.placeholder(tf.int32, [5, 3]), 4
        )
        assert j.shape.as_list() == [4, 2]
        assert tf.strings.unicode_script(tf.placeholder(tf.int32, [5, 3])).shape == [5, 3]
        with pytest.raises(ValueError, match='not in: "UTF-8"'):
            tf.strings.unicode_transcode(["a"], "UTF-8", "UTF-16")
        with pytest.raises(ValueError, match="must be greater than 0"):
            tf.strings.ngrams(["a"], 0)
        with pytest.raises(ValueError, match="padding_width must be greater than 0"):
            tf.strings.ngrams(["a"], 2, pad_values="x", padding_width=0)
        with pytest.raises(ValueError, match="pad_values must be provided"):
            tf.strings.ngrams(["a"], 2, padding_width=1)
        with pytest.raises(ValueError, match="Data must have rank>0"):
            tf.strings.ngrams("a", 2)


def test_kernel_errors_are_tf_s():
    with tf.Graph().as_default():
        bad = [
            (tf.strings.unicode_decode(["ab"], "BOGUS"),
             "Could not create converter for input encoding: BOGUS"),
            (tf.strings.unicode_decode([b"\xff"], "UTF-8", replacement_char=0x110000),
             "replacement_char out of unicode codepoint range"),
            (tf.strings.unsorted_segment_join(
                tf.placeholder_with_default(["a", "b"], [None]),
                tf.placeholder_with_default([0], [None]), 2),
             "Segment dimension is 1 while input dimension is 1 in rank 0"),
        ]  # fmt: skip
        with tf.Session() as sess:
            for t, msg in bad:
                with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
                    sess.run(t)
