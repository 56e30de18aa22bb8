"""ParseSequenceExampleV2 beyond the values recorded from TF 2.21 in test_sem18_tf.py
(tests/fixtures/sem18_cases.py: parse_*sequence_example values and errors): the op TF
builds, static shapes, and shapes of empty results the recorder writes as []."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _record(rows):
    se = af.train.SequenceExample()
    se.context.feature["c"].int64_list.value.append(rows)
    fl = se.feature_lists.feature_list["f"]
    for i in range(rows):
        fl.feature.add().float_list.value.extend([i, -i])
    return se.SerializeToString()


FEATURES = (
    {"c": af.FixedLenFeature([], af.int64)},
    {
        "f": af.FixedLenSequenceFeature([2], af.float32, allow_missing=True),
        "s": af.VarLenFeature(af.string),
    },
)


def test_single_builds_tf_op_and_static_shapes():
    ctx, seq = af.io.parse_single_sequence_example(_record(3), *FEATURES)
    types = [op.type for op in ops.get_default_graph().get_operations()]
    assert types.count("ParseSequenceExampleV2") == 1
    assert ctx["c"].shape.as_list() == []
    assert seq["f"].shape.as_list() == [None, 2]
    with af.Session() as s:
        c, f, st = s.run([ctx["c"], seq["f"], seq["s"]])
    assert c == 3 and f.shape == (3, 2) and f.dtype == np.float32
    assert st.indices.shape == (0, 2) and list(st.dense_shape) == [0, 0]


def test_batch_pads_and_reports_lengths():
    ctx, seq, lengths = af.io.parse_sequence_example([_record(2), _record(0)], *FEATURES)
    assert seq["f"].shape.as_list() == [2, None, 2] and ctx["c"].shape.as_list() == [2]
    with af.Session() as s:
        f, n = s.run([seq["f"], lengths["f"]])
    np.testing.assert_array_equal(f, [[[0, 0], [1, -1]], [[0, 0], [0, 0]]])
    np.testing.assert_array_equal(n, [2, 0])


def test_single_needs_a_scalar():
    with pytest.raises(ValueError):
        af.io.parse_single_sequence_example([_record(1)], *FEATURES)
