"""String, parsing, loss, schedule and training-helper behaviours checked against values,
error classes and messages recorded from TF 2.21 (tf.compat.v1 graph mode). TF is never
imported here: each expected value is a literal copied from a TF run."""

from __future__ import annotations

import pytest

import asyncflow as tf
from asyncflow import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def _run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


# -- Substr ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pos", "length", "expected"),
    [(1, -1, b"ello"), (-3, -2, b"llo"), (0, -10, b"hello"), (5, -1, b""), (-5, -1, b"hello")],
)
def test_substr_negative_len_in_bytes_runs_to_the_end(pos, length, expected):
    assert _run(tf.strings.substr(["hello"], pos, length)).tolist() == [expected]


def test_substr_negative_len_in_utf8_chars():
    assert _run(tf.strings.substr(["héllo"], 1, -1, unit="UTF8_CHAR")).tolist() == [b""]
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos -2 out of range for string at index 0\n"
    ):
        _run(tf.strings.substr(["héllo"], -2, -5, unit="UTF8_CHAR"))


def test_substr_out_of_range_messages():
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos 6 out of range for string at index 0\n"
    ):
        _run(tf.strings.substr(["héllo"], 6, 1, unit="UTF8_CHAR"))
    with pytest.raises(errors.InvalidArgumentError, match=r"string b'ab' at index \(0, 1\)\n"):
        _run(tf.strings.substr([["hello", "ab"]], [1, 3], [1, 1]))
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos 3 out of range for string at index 1\n"
    ):
        _run(tf.strings.substr([["héllo", "ab"]], [[1], [3]], [[1], [1]], unit="UTF8_CHAR"))
