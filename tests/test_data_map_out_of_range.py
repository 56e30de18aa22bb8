"""A map function raising OutOfRangeError, against TF 2.21's recorded results
(tests/fixtures/dataset_map_out_of_range_cases.py, recorded by
record_dataset_map_out_of_range_tf.py): a v1 map (preserve_cardinality false) ends
there, a batch above giving its partial batch; TF's MapAndBatchDataset (preserve_cardinality
true) makes it its batch's InvalidArgumentError and goes on (ops/dataset_pipeline.py's
Map)."""

import json
import pathlib
import re
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_map_out_of_range_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_map_out_of_range_tf.json").read_text())
# The queue's name is its runtime's own (TF's a shared name like '_16_fifo_queue').
_QUEUE = re.compile(r"FIFOQueue '[^']*'")


def _comparable(result: list) -> list:
    # an error is [class name, message]; a value a number or a list of numbers
    return [
        [r[0], _QUEUE.sub("FIFOQueue <q>", r[1])]
        if isinstance(r, list) and r and isinstance(r[0], str)
        else r
        for r in result
    ]


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_map_out_of_range_matches_tf(key):
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert _comparable(got) == _comparable(RECORDED["cases"][key])
