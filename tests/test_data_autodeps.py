"""Side effects inside dataset functions against TF 2.21's automatic control
dependencies (tests/fixtures/dataset_autodeps_cases.py, recorded by
record_dataset_autodeps_tf.py): a stateful op no result depends on runs with each call,
and the stateful ops using one resource run in the order they were made."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_autodeps_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_autodeps_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_autodeps_match_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]
