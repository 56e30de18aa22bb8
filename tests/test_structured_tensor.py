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
