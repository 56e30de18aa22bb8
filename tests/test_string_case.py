"""tf.strings.lower / upper (ops StringLower, StringUpper) as TF 2.21 gives them: ASCII
letters only by default, Unicode's case mapping with encoding="utf-8" (invalid bytes as
U+FFFD), other encodings refused.  Expected values recorded from TF 2.21."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

WORDS = np.array(
    [b"Hello W\xc3\x96RLD \xc3\xa9T\xc3\x89", b"ABC-xyz", b"", b"\xce\xa3\xcf\x83"], object
)
TF = {
    ("lower", ""): [b"hello w\xc3\x96rld \xc3\xa9t\xc3\x89", b"abc-xyz", b"", b"\xce\xa3\xcf\x83"],
    ("upper", ""): [b"HELLO W\xc3\x96RLD \xc3\xa9T\xc3\x89", b"ABC-XYZ", b"", b"\xce\xa3\xcf\x83"],
    ("lower", "utf-8"): [
        b"hello w\xc3\xb6rld \xc3\xa9t\xc3\xa9",
        b"abc-xyz",
        b"",
        b"\xcf\x83\xcf\x83",
    ],
    ("upper", "utf-8"): [
        b"HELLO W\xc3\x96RLD \xc3\x89T\xc3\x89",
        b"ABC-XYZ",
        b"",
        b"\xce\xa3\xce\xa3",
    ],
}


@pytest.mark.parametrize("fn,encoding", list(TF))
def test_case_mapping_matches_tf(fn, encoding):
    with tf.Graph().as_default():
        out = getattr(tf.strings, fn)(WORDS.reshape(2, 2), encoding=encoding)
        assert out.shape.as_list() == [2, 2]
        with tf.Session() as sess:
            got = sess.run(out)
    assert got.reshape(-1).tolist() == TF[fn, encoding]


def test_utf8_special_cases_and_bad_encodings():
    with tf.Graph().as_default():
        upper = tf.strings.upper(
            np.array([b"stra\xc3\x9fe \xef\xac\x81"], object), encoding="utf-8"
        )
        bad = tf.strings.lower(np.array([b"A\xff\xfe"], object), encoding="utf-8")
        latin = tf.strings.lower(np.array([b"x"], object), encoding="latin1")
        with tf.Session() as sess:
            assert sess.run(upper).tolist() == [b"STRASSE FI"]
            assert sess.run(bad).tolist() == [b"a\xef\xbf\xbd\xef\xbf\xbd"]
            with pytest.raises(errors.InvalidArgumentError, match="only utf-8 or '' "):
                sess.run(latin)
