"""TypeSpecs (TypeSpec, TensorSpec, SparseTensorSpec, RaggedTensorSpec, IndexedSlicesSpec,
TensorArraySpec, NoneTensorSpec, tf.data.DatasetSpec), type_spec_from_value and the
tf.compat.v1.data.experimental structure names, against TF 2.21: every case of
fixtures/type_spec_cases.py (reprs, comparisons, joins, errors) reduces to the string
TF gave (fixtures/type_spec.json, recorded by fixtures/record_type_spec.py).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import type_spec_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "type_spec.json").read_text())
GOT = cases.run(tf)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_case_as_tf(name):
    assert GOT[name] == TABLE[name]


def test_every_case_recorded():
    assert set(GOT) == set(TABLE)


def test_typespec_base_and_hash_consistent_with_eq():
    a, b = tf.RaggedTensorSpec([2, None], tf.int32), tf.RaggedTensorSpec([2, None], tf.int32)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert tf.TensorSpec([2]) != tf.TensorSpec([3])
    with pytest.raises(NotImplementedError):
        tf.TypeSpec()._serialize()


def test_dataset_spec_of_nested_structure():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [[1.0], [2.0]]})
        spec = tf.type_spec_from_value(ds)
        assert spec == tf.data.DatasetSpec(ds.element_spec)
        assert spec.is_compatible_with(ds)
        assert not spec.is_compatible_with(tf.data.Dataset.range(2))
