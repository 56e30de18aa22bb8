"""TF's ragged broadcasting against TF 2.21's recorded results
(tests/fixtures/dynamic_ragged_shape_s28_tf.json, recorded by
record_dynamic_ragged_shape_s28_tf.py from dynamic_ragged_shape_s28_cases.py with
tensorflow.compat.v1 in graph mode): tf.broadcast_to and tf.broadcast_dynamic_shape
with a DynamicRaggedShape, tf.ones / tf.zeros of one, element-wise ops between ragged
and dense (or differently ragged) operands, and DynamicRaggedShape.Spec.  Values, and
errors by class and when they came (building or running).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
from dynamic_ragged_shape_s28_cases import CASES, describe  # noqa: E402

TABLE = json.loads((HERE / "dynamic_ragged_shape_s28_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tf(name):
    assert describe(tf, CASES[name]) == TABLE[name]


@pytest.mark.timeout(60)
def test_broadcast_with_splits_known_only_when_running():
    """Partitions fed at run time broadcast as constant ones do (numpy's repeat)."""
    with tf.Graph().as_default():
        splits = tf.placeholder(tf.int64, [None])
        values = tf.placeholder(tf.float32, [None])
        rt = tf.RaggedTensor.from_row_splits(values, splits)
        col = tf.placeholder(tf.float32, [None, 1])
        out = rt * col + tf.constant([1.0])
        with tf.Session() as sess:
            got = sess.run(out, {splits: [0, 3, 3, 4], values: [1, 2, 3, 4],
                                 col: [[2], [5], [10]]})  # fmt: skip
            assert got.to_list() == [[3.0, 5.0, 7.0], [], [41.0]]
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(out, {splits: [0, 3, 3, 4], values: [1, 2, 3, 4],
                               col: [[2], [5]]})  # fmt: skip


def test_spec_of_a_shape():
    drs = tf.experimental.DynamicRaggedShape
    spec = drs.Spec.from_value(drs.from_lengths([2, (2, 1), 3]))
    assert spec.row_partitions[0].nrows == 2
    assert spec.static_inner_shape.as_list() == [3, 3]
    assert spec._to_tensor_shape().as_list() == [2, None, 3]
    joined = spec.most_specific_common_supertype(
        [drs.Spec.from_value(drs.from_lengths([4, (1, 1, 1, 1), 3]))]
    )
    assert joined._to_tensor_shape().as_list() == [None, None, 3]
    assert np.array_equal(spec.static_inner_shape.as_list(), [3, 3])
