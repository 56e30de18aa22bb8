"""A map's failed element under other transformations, against TF 2.21's results
(tests/fixtures/dataset_element_error_cases.py, recorded by
record_dataset_element_error_tf.py): the element is that get_next's error and the pass
goes on (ops/dataset_pipeline.py's tolerant passes, `Failed` elements); a map directly
under a batch fails the whole batch, as TF's default map_and_batch_fusion runs them
(tests/test_data_map_batch_fusion.py has more)."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_element_error_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_element_error_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_element_error_matches_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_plain_pipeline_keeps_its_plain_pass():
    # A pipeline with no map or filter has no tolerant pass: the iterator takes `iterate`.
    from asyncflow.ops import dataset_pipeline as pl

    plain = pl.Batch(pl.Prefetch(pl.Range(0, 4, 1, "int64"), 1), 2, False)
    assert plain.iterate_tolerant is None
    zipped = pl.Zip([plain, pl.Take(pl.Range(0, 4, 1, "int64"), 2)])
    assert zipped.iterate_tolerant is None


def test_flat_map_and_interleave_take_the_tolerant_pass_only_for_a_failing_function():
    # Their tolerant pass where the function's datasets have a stage with a function
    # (a map: it may fail), else the plain one (faster; a batch above keeps its chunks).
    D = tf.data.Dataset
    inner = {
        "plain": lambda x: D.from_tensors(x).repeat(2),
        "map": lambda x: D.range(2).map(lambda y: y + x),
    }
    with tf.Graph().as_default():
        made = {
            (how, k): getattr(D.range(3), how)(f, **kw)._variant
            for k, f in inner.items()
            for how, kw in (("flat_map", {}), ("interleave", {"cycle_length": 2}))
        }
        made[("parallel", "map")] = (
            D.range(3).interleave(inner["map"], cycle_length=2, num_parallel_calls=2)._variant
        )
        with tf.Session() as s:
            values = s.run(made)
    for (how, k), value in values.items():
        assert (value.iterate_tolerant is not None) == (k == "map"), (how, k)
    assert values[("parallel", "map")].parallel and not values[("interleave", "map")].parallel


def test_raw_options_dataset_hands_the_tolerant_pass_on():
    from asyncflow.ops import dataset_pipeline as pl
    from asyncflow.ops.dataset_raw import WithOptions

    assert WithOptions(pl.Range(0, 4, 1, "int64"), b"").iterate_tolerant is None
    under = pl.Map(pl.Range(0, 4, 1, "int64"), None)
    assert WithOptions(pl.Prefetch(under, 1), b"").iterate_tolerant is not None


def test_an_input_failing_for_ever_gives_its_error_at_each_call():
    # A tf.data service read gives its error at every later call (a `Failed` for ever):
    # each stage hands it on once per call rather than waiting for an element.
    import asyncio

    import numpy as np

    from asyncflow import errors
    from asyncflow.ops import dataset_more as dm
    from asyncflow.ops import dataset_pipeline as pl
    from asyncflow.ops.dataset_ragged import DenseToRaggedBatch

    class FailsForEver(pl.DatasetValue):
        def __init__(self, first=True):
            self.first = first

        def iterate(self, env):
            raise AssertionError("the tolerant pass is taken")

        async def iterate_tolerant(self, env):
            if self.first:
                yield (np.array(1, np.int64),)
            failed = pl.Failed(errors.UnavailableError(None, None, "gone"))
            while True:
                yield failed

    src = FailsForEver()
    only = FailsForEver(first=False)  # (for stages that would call a function on an element)
    stages = [
        pl.Take(src, 3),
        pl.Skip(src, 2),
        pl.Batch(src, 2, False),
        pl.Shuffle(src, 4, 1, 2, True),
        pl.Zip([src, pl.Range(0, 9, 1, np.int64)]),
        pl.Cache(src),
        pl.Repeat(src, -1),
        pl.Prefetch(src, 2),
        pl.Unbatch(only),
        pl.FlatMap(only, None),
        pl.Interleave(only, None, 2, 1),
        pl.Interleave(only, None, 2, 1, parallel=True),
        dm.Shard(src, 2, 1),
        dm.Unique(src),
        dm.Scan(only, None, (), 0),
        dm.TakeWhile(only, None),
        dm.Window(src, 2, 2, 1, False),
        dm.GroupByWindow(only, None, None, None),
        dm.DirectedInterleave(only, [pl.Range(0, 9, 1, np.int64)], False),
        dm.AssertCardinality(src, 100),
        dm.GroupByReducer(only, None, None, None, None),
        dm.DenseToSparseBatch(src, 2, [1]),
        DenseToRaggedBatch(only, 1, False, [-1], np.int64),
    ]

    async def first(stage, n=5):
        stream = stage.iterate_tolerant(pl.Env(None))
        try:
            return [await stream.__anext__() for _ in range(n)]
        finally:
            await stream.aclose()

    for stage in stages:
        got = asyncio.run(asyncio.wait_for(first(stage), 5))
        assert sum(type(e) is pl.Failed for e in got) >= 4, type(stage).__name__
