"""An error raised inside a dataset function as get_next raises it, against TF 2.21's
recorded class and words (tests/fixtures/dataset_fn_error_words_cases.py, recorded by
record_dataset_fn_error_words_tf.py): "Error in user-defined function passed to <op
type>:<n> transformation with iterator: <path>: <cause>" (ops/dataset_pipeline.py's
in_function), the path TF's iterator's from its root after TF's graph rewrites
(ops/dataset_paths.py).  <n> is not compared: it counts the datasets the process made
before, and neither TF's recording nor a test runs in a process of its own."""

import json
import pathlib
import re
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_fn_error_words_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_fn_error_words_tf.json").read_text())
_TF_COUNT = re.compile(r"(passed to \w+):\d+ (transformation with iterator)")


def _comparable(result):
    if result is None:
        return None
    if result and isinstance(result[0], list):  # (a `*_errors` case: every error)
        return [_comparable(r) for r in result]
    cls, message = result
    return [cls, _TF_COUNT.sub(r"\1:<n> \2", message)]


# Not words: what runs differs from TF's
_GAPS: dict[str, str] = {}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(k, marks=pytest.mark.xfail(reason=_GAPS[k], strict=True)) if k in _GAPS else k
        for k in sorted(cases.CASES)
    ],
)
def test_function_error_words_match_tf(key):
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert _comparable(got) == _comparable(RECORDED["cases"][key])


def test_our_words_count_the_datasets():
    with tf.Graph().as_default():
        cls, first = cases.CASES["map"](tf)
    with tf.Graph().as_default():
        _, again = cases.CASES["parallel_map"](tf)
    n = int(re.search(r"MapDataset:(\d+) ", first)[1])
    assert cls == "InvalidArgumentError"
    assert first == (
        f"Error in user-defined function passed to MapDataset:{n} transformation with "
        "iterator: Iterator::Root::ParallelMapV2: indices = 100 is not in [0, 5)"
    )
    m = int(re.search(r"ParallelMapDatasetV2:(\d+) ", again)[1])
    assert m >= n + 2 and "Iterator::Root::ParallelMapV2: " in again  # (range, map)


# Maps Dataset.map fused into one call (and one map alone): a GraphDef of the graph,
# imported into a fresh one, words the error as TF's pipeline (each map its own node).
_FUSED = [
    "map",
    "map_then_map",
    "map_under_fused_map",
    "failing_map_over_map_batch",
    "middle_of_three_maps_batch",
    "parallel_map_under_parallel_map_batch",
    "stateful_map_under_map",
    "dict_to_tuple_map_over_map",
    "selecting_map_over_map",
]


@pytest.mark.parametrize("key", _FUSED)
def test_function_error_words_of_an_imported_graph_match_tf(key, monkeypatch):
    def imported(tf, ds):
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        graph_def = tf.get_default_graph().as_graph_def()
        with tf.Graph().as_default() as g:
            tf.import_graph_def(graph_def, name="copy")
            parts = nxt if isinstance(nxt, tuple) else (nxt,)
            copies = [g.get_tensor_by_name("copy/" + t.name) for t in parts]
            return cases.first_error_of(tf, copies)

    monkeypatch.setattr(cases, "_first_error", imported)
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert _comparable(got) == _comparable(RECORDED["cases"][key])
