"""Resource-creating ops made inside dataset functions, against TF 2.21's results
(tests/fixtures/dataset_resources_cases.py, recorded by record_dataset_resources_tf.py):
a resource with no shared name lasts one pass (kernel_api.pass_state), one named by its
node lasts the session, and a variable made inside a function is TF's ValueError."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_resources_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_resources_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_resources_match_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]
