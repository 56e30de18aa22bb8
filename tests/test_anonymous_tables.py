"""Anonymous hash tables (AnonymousHashTable, AnonymousMutableHashTable,
AnonymousMutableHashTableOfTensors, AnonymousMutableDenseHashTable and the table
classes' experimental_is_anonymous=True) against TF 2.21's recorded runs
(tests/fixtures/anonymous_tables_cases.py -> anonymous_tables_tf.json)."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import anonymous_tables_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "anonymous_tables_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TF) == sorted(cases.CASES)


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_case_matches_tf(name):
    runs, built = cases.run_case(tf, name)
    assert built == TF[name]["ops"]
    assert runs == TF[name]["runs"]


def test_op_attrs_are_tfs():
    with tf.Graph().as_default():
        R = tf.raw_ops
        h = R.AnonymousMutableHashTableOfTensors(
            key_dtype=tf.int64, value_dtype=tf.float32, value_shape=[3]
        )
        d = R.AnonymousMutableDenseHashTable(
            empty_key=tf.constant(0, tf.int64), deleted_key=tf.constant(1, tf.int64),
            value_dtype=tf.string,
        )  # fmt: skip
        assert h.dtype == tf.resource and h.shape.as_list() == []
        assert tf.TensorShape(h.op.get_attr("value_shape")).as_list() == [3]
        assert d.op.get_attr("initial_num_buckets") == 131072
        assert d.op.get_attr("max_load_factor") == pytest.approx(0.8)
        assert d.op.get_attr("key_dtype") == tf.int64
        for op in (h.op, d.op):
            assert "shared_name" not in op.node_def.attr
