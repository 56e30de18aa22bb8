"""tf.data service job names against TF 2.21's recorded behaviour
(tests/fixtures/data_service_jobs_tf.json, recorded by
tests/fixtures/record_data_service_jobs_tf.py): a job is keyed by its name alone, which
`from_dataset_id` prefixes with the dataset id and `distribute` does not, so a
`distribute` initialized again, or over another dataset, joins the job of its name;
a consumer whose processing mode or target workers differ is refused with TF's
InvalidArgumentError."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf
from asyncflow import errors

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from record_data_service_jobs_tf import MODES, _conflicts, _reinit  # noqa: E402

pytestmark = pytest.mark.timeout(30)

svc = tf.data.experimental.service
TF = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_jobs_tf.json").read_text()
)


@pytest.fixture
def target():
    d = svc.DispatchServer()
    address = d.target.split("://")[1]
    workers = [svc.WorkerServer(svc.WorkerConfig(dispatcher_address=address)) for _ in range(2)]
    yield d.target
    for w in workers:
        w._stop()
    d._stop()


@pytest.mark.parametrize("mode", MODES)
def test_a_distribute_job_name_is_the_key_as_tf(target, mode):
    """An initializable iterator over `distribute(job_name=...)` initialized again (in
    its session or another) joins its ended job: nothing; anonymous, or by
    `from_dataset_id` over the register op (a new id each run), it reads everything
    again; `distribute` of another dataset under the name reads the first one's job."""
    assert _reinit(tf, svc, target, mode) == TF[mode]


def test_a_job_name_with_other_parameters_as_tf(target):
    """Same name (and dataset id, for `from_dataset_id`), another processing mode or
    target workers: InvalidArgumentError with TF's message; another dataset id under
    `from_dataset_id` is another job."""
    assert _conflicts(tf, svc, target) == TF["conflicts"]


def test_an_unknown_target_workers_is_refused(target):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3).apply(
            svc.distribute("parallel_epochs", target, target_workers="nearby")
        )
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with (
            tf.Session() as sess,
            pytest.raises(
                errors.InvalidArgumentError, match="Unrecognized target workers: NEARBY"
            ),
        ):
            sess.run(nxt)
