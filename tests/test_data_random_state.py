"""Seeded random ops inside dataset functions against TF 2.21's results
(tests/fixtures/dataset_random_cases.py, recorded by record_dataset_random_tf.py): their
state lasts one pass (an iterator's initialization, a one-shot iterator, a run of
`reduce`), shared by the inner iterators of that pass, while an op outside datasets
keeps its state for the session (kernel_api.random_state)."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_random_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_random_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_random_matches_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]
