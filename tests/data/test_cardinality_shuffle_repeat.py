"""assert_cardinality's errors and shuffle_and_repeat against TF 2.21's recorded results
(tests/fixtures/dataset_cardrep_cases.py, recorded by record_dataset_cardrep_tf.py):
a wrong count is an error at every later get_next (too many: one per further element,
then the count found, again and again), whatever stages sit above; shuffle_and_repeat
writes TF's ShuffleAndRepeatDataset node and gives TF's order."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_cardrep_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_cardrep_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_matches_tf(key):
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert json.loads(json.dumps(got)) == RECORDED["cases"][key]


def test_ignore_errors_above_ends_rather_than_spins():
    # TF's ignore_errors would call its input for ever here (the count's error at every
    # call); ours gives the error once it repeats, then the end.
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(5).apply(tf.data.experimental.assert_cardinality(3))
        ds = ds.apply(tf.data.experimental.ignore_errors())
        got = cases._reads(tf, ds, 6)
    only = "Input dataset was expected to contain 3 elements but contained only 5 elements."
    assert got == [[0, 1, 2, ["FailedPreconditionError", only], "end", "end"]]
