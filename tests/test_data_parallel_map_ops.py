"""The ops a parallel map and `experimental.map_and_batch` write, against TF 2.21's
recorded ones (tests/fixtures/dataset_parallel_map_ops_cases.py, recorded by
record_dataset_parallel_map_ops_tf.py): ParallelMapDatasetV2 and MapAndBatchDataset,
their attrs, scalar inputs and output shapes, and the ValueError of a bad argument."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_parallel_map_ops_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_parallel_map_ops_tf.json").read_text())


def _comparable(result):
    # TF's convert_to_tensor puts the tensor's name before its dtype error; ours does not.
    if isinstance(result, list) and result[1].startswith("num_parallel_calls: "):
        return [result[0], result[1].removeprefix("num_parallel_calls: ")]
    return result


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_parallel_map_ops_match_tf(key):
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert _comparable(got) == _comparable(RECORDED["cases"][key])
