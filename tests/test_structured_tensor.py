"""tf.experimental.StructuredTensor against TF 2.21's recorded results
(tests/fixtures/structured_tensor_tf.json, recorded by record_structured_tensor_tf.py
from structured_tensor_cases.py with tensorflow.compat.v1 in graph mode): from_pyval of
nested dicts and lists (ragged ones too) and its errors, from_fields, field access,
with_updates, merge_dims, partition_outer_dimension, promote, indexing, equality, the
Spec, tf.nest and Session.run; and tf.experimental.enable_strict_mode.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
from structured_tensor_cases import ALL, describe  # noqa: E402

TABLE = json.loads((HERE / "structured_tensor_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted([*ALL, "__strict__"])


def _split_shapes(record, shapes):
    """record without its static shapes (collected into `shapes`, in order)."""
    if isinstance(record, dict):
        if "shape" in record:
            shapes.append(record["shape"])
        return {k: _split_shapes(v, shapes) for k, v in record.items() if k != "shape"}
    if isinstance(record, list):
        return [_split_shapes(v, shapes) for v in record]
    return record


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(ALL))
def test_matches_tf(name):
    got_shapes, want_shapes = [], []
    got = _split_shapes(describe(tf, ALL[name]), got_shapes)
    assert got == _split_shapes(TABLE[name], want_shapes)
    # Static shapes never contradict TF's (one side may know a dimension the other
    # leaves unknown).
    for ours, theirs in zip(got_shapes, want_shapes, strict=True):
        ours_s, theirs_s = tf.TensorShape(ours), tf.TensorShape(theirs)
        assert ours_s.is_compatible_with(theirs_s), (ours, theirs)


# -- tf.experimental.enable_strict_mode


@pytest.fixture
def strict_mode():
    """Strict mode on, with no deprecation notice given yet; the process's state back
    afterwards (strict mode is global, and other tests share this process)."""
    from asyncflow import deprecation

    given, strict = set(deprecation._GIVEN), deprecation._STRICT[0]
    deprecation._GIVEN.clear()
    tf.experimental.enable_strict_mode()
    yield
    deprecation._GIVEN.clear()
    deprecation._GIVEN.update(given)
    deprecation._STRICT[0] = strict


@pytest.mark.timeout(60)
def test_strict_mode_raises_where_tf_does(strict_mode):
    from structured_tensor_cases import STRICT, strict_mode_record

    got = {name: strict_mode_record(tf, fn) for name, fn in STRICT.items()}
    assert got == TABLE["__strict__"]


def test_deprecated_endpoint_warns_once_without_strict_mode(caplog):
    from asyncflow import deprecation

    given = set(deprecation._GIVEN)
    deprecation._GIVEN.clear()
    try:
        with tf.Graph().as_default():
            x = tf.constant([1.0, 2.0])
            for _ in range(2):
                tf.to_float(x)
                tf.squeeze(x[None], squeeze_dims=[0])
    finally:
        deprecation._GIVEN.clear()
        deprecation._GIVEN.update(given)
    notes = [r.getMessage() for r in caplog.records if "is deprecated" in r.getMessage()]
    assert len(notes) == 2
    assert "to_float (from asyncflow.ops.cast_ops) is deprecated" in notes[0]
    assert "Use `tf.cast` instead." in notes[0]
    assert "calling squeeze (from asyncflow.ops.array_ops) with squeeze_dims" in notes[1]


@pytest.mark.timeout(60)
def test_cond_carries_a_structured_tensor():
    """tf.cond returns a StructuredTensor from either branch (TF's, graph mode)."""
    st_cls = tf.experimental.StructuredTensor
    with tf.Graph().as_default():
        pick = tf.placeholder(tf.bool, [])
        one = st_cls.from_pyval([{"a": 1, "b": [1, 2]}, {"a": 2, "b": [3]}])
        two = st_cls.from_pyval([{"a": 5, "b": []}, {"a": 6, "b": [7, 8, 9]}])
        out = tf.cond(pick, lambda: one, lambda: two)
        assert isinstance(out, st_cls) and out.shape.as_list() == [2]
        fetch = {"a": out.field_value("a"), "b": out.field_value("b")}
        with tf.Session() as sess:
            got = sess.run(fetch, {pick: False})
            assert got["a"].tolist() == [5, 6] and got["b"].to_list() == [[], [7, 8, 9]]
            got = sess.run(fetch, {pick: True})
            assert got["a"].tolist() == [1, 2] and got["b"].to_list() == [[1, 2], [3]]
