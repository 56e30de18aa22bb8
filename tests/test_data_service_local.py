"""tf.data service `target_workers` and a named job's `num_consumers` against TF 2.21's
recorded behaviour (tests/fixtures/data_service_local_tf.json, recorded by
tests/fixtures/record_data_service_local_tf.py): "LOCAL" reads only the workers
running in this process and fails without one or when coordinated; "AUTO" and "ANY"
read every worker; a consumer with another `num_consumers` joins the named job and
reads its tasks as they are.

A remote worker is simulated here: a WorkerServer of this process taken out of
`LOCAL_WORKERS`, which is what a consumer asks to tell a local worker from a remote
one (TF's recording runs it in a subprocess)."""

import contextlib
import json
import pathlib
import sys

import pytest

import asyncflow as tf
from asyncflow.data.service import worker as worker_lib

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from record_data_service_local_tf import _num_consumers, _targets  # noqa: E402

pytestmark = pytest.mark.timeout(30)

svc = tf.data.experimental.service
TF = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_local_tf.json").read_text()
)
_HANG_MS = 1000  # (TF's recording waited 5 s; a read that waits here waits for good;
# 300 ms read a slow first element as a hang on a loaded machine)


@pytest.fixture
def no_local_workers():
    """This process's worker registry emptied for the test (workers other tests left
    running would be local ones), and given back after."""
    saved = dict(worker_lib.LOCAL_WORKERS)
    worker_lib.LOCAL_WORKERS.clear()
    yield
    worker_lib.LOCAL_WORKERS.clear()
    worker_lib.LOCAL_WORKERS.update(saved)


@contextlib.contextmanager
def _remote(address: str):
    """A worker of the dispatcher at `address` that consumers take for a remote one."""
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=address))
    try:
        del worker_lib.LOCAL_WORKERS[w._service.address]
        yield
    finally:
        w._stop()


def test_target_workers_as_tf(no_local_workers):
    """Remote workers only: AUTO and ANY read them, LOCAL fails (TF's message, the
    static sharding one for FILE_OR_DATA); with a local worker too, LOCAL reads it
    alone (once for parallel_epochs, every element for distributed_epoch), a
    coordinated LOCAL read fails, and a LOCAL read of a dispatcher without this
    process's worker waits; the local worker stopped, LOCAL fails again."""
    got = _targets(tf, svc, _remote, _HANG_MS)
    assert got == {k: v for k, v in TF.items() if k != "num_consumers"}
    assert not worker_lib.LOCAL_WORKERS  # (each stopped worker left the registry)


def test_a_named_job_with_another_number_of_consumers_as_tf():
    """The job keeps its first consumer's `num_consumers`: a plain read of a
    coordinated job, or one with another number of consumers, asks for round 0, read
    already (FailedPreconditionError, TF's message); a coordinated read of a plain job
    reads on in its stream."""
    assert _num_consumers(tf, svc, _HANG_MS) == TF["num_consumers"]
