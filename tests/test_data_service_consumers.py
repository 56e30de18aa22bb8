"""tf.data service coordinated reads at the edges of `num_consumers` and
`consumer_index`, and a named job's later consumer after a LOCAL read ended, against
TF 2.21's recorded behaviour (tests/fixtures/data_service_consumers_tf.json, recorded
by tests/fixtures/record_data_service_consumers_tf.py).

`num_consumers=0` is a coordinated read (whose worker refuses every consumer index);
an index at or above `num_consumers` fails at the worker after its dataset's
infinite-cardinality check; a LOCAL read that ends has its tasks deleted, so a later
consumer of the job fails where elements were left.  Where TF's process aborts (a
coordinated read without a non-negative index) asyncflow raises InvalidArgumentError."""

import json
import pathlib
import sys
import time

import pytest

import asyncflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from record_data_service_consumers_tf import ABORTING, read, record  # noqa: E402

pytestmark = pytest.mark.timeout(30)

svc = tf.data.experimental.service
TF = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_consumers_tf.json").read_text()
)
_HANG_MS = 2000  # (TF's recording waited 5 s; nothing recorded waits)


def test_coordinated_edges_and_reads_after_a_local_read_as_tf():
    """0 consumers: coordinated (every index refused, LOCAL refused, a finite dataset
    refused first); an index at or above num_consumers: TF's FailedPreconditionError;
    an index alone: a plain read; after a LOCAL read's session closed, a later
    consumer of its job fails (elements were left) or reads nothing (it had ended),
    where after an AUTO read it reads on."""
    got = record(tf, _HANG_MS)
    assert got == {k: v for k, v in TF.items() if k != "aborting"}


@pytest.fixture(scope="module")
def service():
    """(the dispatcher's target, its one worker: asyncflow's Worker)."""
    d = svc.DispatchServer()
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target.split("://")[1]))
    yield d.target, w._service
    w._stop()
    d._stop()


@pytest.mark.parametrize("name", sorted(ABORTING))
def test_where_tf_aborts_a_typed_error(service, name):
    """A coordinated read without a non-negative consumer_index ends TF's process
    (recorded); asyncflow's fails with InvalidArgumentError instead."""
    assert TF["aborting"][name] == "aborts"
    got = read(tf, service[0], f"aborting_{name}", ABORTING[name], _HANG_MS)
    assert got[0] == "InvalidArgumentError" and "non-negative consumer_index" in got[1]


def test_a_deleted_task_is_not_given_back_by_the_dispatcher(service):
    """A task a LOCAL read deleted stays deleted when its worker is sent it again (as
    TF's worker skips the deleted tasks a dispatcher sends)."""
    target, worker = service
    case = ("LOCAL", None, {})
    assert read(tf, target, "given_back", case, _HANG_MS) == [0, 1, 2]
    for _ in range(200):  # (deleted on the worker's loop once the read's session closed)
        deleted = [t for t, ended in worker._deleted.items() if not ended]
        if deleted:
            break
        time.sleep(0.01)
    (task,) = deleted
    info = {"task": task, "job": 0, "d": "1000", "mode": 0, "nc": -1}
    worker.loop.call_soon_threadsafe(worker._add_task, info)
    again = read(tf, target, "given_back", case, _HANG_MS)
    assert again[0] == "FailedPreconditionError" and "has been deleted" in again[1]
