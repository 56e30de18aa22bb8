"""A one-shot iterator builds its dataset once per session, as TF's runs its
`dataset_factory` once when it makes the iterator: later steps do not run the ops that
build the dataset (asyncflow/master.py feeds the spent input).  The graphs of
tests/fixtures/one_shot_once_cases.py give TF 2.21's results (recorded by
record_one_shot_once_tf.py): outputs, factory runs, save/restore, a failing factory."""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import one_shot_once_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "one_shot_once_tf.json").read_text())["cases"]


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_as_tf(name, tmp_path):
    with af.Graph().as_default():
        got = cases.CASES[name](af, str(tmp_path))
    assert json.loads(json.dumps(got)) == TF[name]


def _traced_ops(sess, fetch) -> set:
    md = af.RunMetadata()
    sess.run(fetch, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
    return {n.node_name for d in md.step_stats.dev_stats for n in d.node_stats}


def test_dataset_ops_run_in_the_first_step_only():
    calls = []

    def count(x):
        calls.append(1)
        return x

    with af.Graph().as_default():
        # (stateless: a one-shot iterator refuses a dataset capturing a stateful op, as
        # TF's does, tests/test_one_shot_stateful.py)
        x = af.numpy_function(count, [np.arange(6, dtype=np.float32)], af.float32, stateful=False)
        ds = af.data.Dataset.from_tensor_slices(x).map(lambda v: v + 1).shuffle(4, seed=1)
        nxt = af.data.make_one_shot_iterator(ds.batch(2).repeat()).get_next()
        with af.Session() as s:
            first = _traced_ops(s, nxt)
            later = _traced_ops(s, nxt)
            rest = [s.run(nxt) for _ in range(4)]
    assert len(calls) == 1
    assert {"PyFuncStateless", "TensorSliceDataset", "MapDataset"} <= first
    assert {"ShuffleDataset", "BatchDatasetV2", "RepeatDataset"} <= first
    assert later == {"OneShotIterator", "IteratorGetNext"}
    got = np.sort(np.concatenate(rest[1:]))
    assert got.tolist() == [1, 2, 3, 4, 5, 6]  # (each row once in a pass)


def test_a_fetched_dataset_input_still_runs():
    # The dataset's handle fetched beside the element: the step needs it, so the ops
    # building it run (its iterator still reads on from where it was).
    with af.Graph().as_default():
        ds = af.data.Dataset.range(3)
        nxt = af.data.make_one_shot_iterator(ds).get_next()
        with af.Session() as s:
            got = [s.run(nxt), s.run([nxt, ds._variant])[0], s.run(nxt)]
            with pytest.raises(af.errors.OutOfRangeError):
                s.run(nxt)
    assert got == [0, 1, 2]
