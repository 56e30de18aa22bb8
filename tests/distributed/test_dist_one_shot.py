"""A one-shot iterator on a cluster builds its dataset once per session, as on one
process (tests/test_one_shot_once.py): once a step holding the iterator has succeeded
on the task, the master runs its twin plan feeding the spent dataset input, so later
steps do not run the ops building the dataset (asyncflow/master.py)."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow.distributed import client

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def local_server():
    s = af.train.Server.create_local_server()
    yield s
    s.stop()


def _traced_ops(sess, fetch) -> set:
    md = af.RunMetadata()
    sess.run(fetch, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
    return {n.node_name for d in md.step_stats.dev_stats for n in d.node_stats}


def test_dataset_ops_run_once_per_session(local_server):
    calls = []

    def count(x):
        calls.append(1)
        return x

    building = {"PyFuncStateless", "TensorSliceDataset", "RepeatDataset"}
    with af.Graph().as_default():
        x = af.numpy_function(count, [np.arange(6, dtype=np.float32)], af.float32, stateful=False)
        ds = af.data.Dataset.from_tensor_slices(x + 1).batch(2).repeat()
        nxt = af.data.make_one_shot_iterator(ds).get_next()
        doubled = nxt * 2
        with af.Session(local_server.target) as s:
            first = _traced_ops(s, nxt)
            later = _traced_ops(s, nxt)
            rest = [s.run(nxt) for _ in range(2)]
            both = s.run([nxt, doubled])  # (a new plan: its twin at once)
            assert len(calls) == 1
        with af.Session(local_server.target) as s:  # a new session: its own iterator
            again = [s.run(nxt).tolist() for _ in range(2)]
    assert len(calls) == 2
    assert building <= first
    assert not building & later and {"OneShotIterator", "IteratorGetNext"} <= later
    assert [r.tolist() for r in rest] == [[5, 6], [1, 2]]
    assert both[0].tolist() == [3, 4] and both[1].tolist() == [6, 8]
    assert again == [[1, 2], [3, 4]]


def test_a_failed_step_spends_nothing(local_server):
    # A factory failing as the iterator is made fails each step with its own error (no
    # twin feeding a spent input); a step that succeeds then makes the iterator.
    with af.Graph().as_default():
        shape = af.placeholder_with_default(np.array([3], np.int32), [1])
        x = af.reshape(af.constant([1.0, 2.0]), shape)
        nxt = af.data.make_one_shot_iterator(af.data.Dataset.from_tensors(x)).get_next()
        with af.Session(local_server.target) as s:
            for _ in range(2):
                with pytest.raises(af.errors.InvalidArgumentError, match="reshape"):
                    s.run(nxt)
            assert s.run(nxt, {shape: [2]}).tolist() == [1.0, 2.0]
            with pytest.raises(af.errors.OutOfRangeError):
                s.run(nxt)


def test_a_lost_connection_takes_the_iterator_along(local_server):
    # The task keeps the iterator with the session's connection: after it is lost, the
    # twin plan's spent input finds no iterator, a typed error (not a hang, nor another
    # pass over the data).
    with af.Graph().as_default():
        nxt = af.data.make_one_shot_iterator(af.data.Dataset.range(5)).get_next()
        with af.Session(local_server.target) as s:
            assert [s.run(nxt), s.run(nxt)] == [0, 1]
            for ch in s._worker._channels.values():
                client._shutdown(ch.conn)
            errs = []
            for _ in range(3):
                with pytest.raises(af.errors.OpError) as e:
                    s.run(nxt)
                errs.append(type(e.value))
    assert errs[-1] is af.errors.FailedPreconditionError
    assert set(errs) <= {af.errors.UnavailableError, af.errors.FailedPreconditionError}
