"""A tf.data service worker's failure to make an element, as the client raises it,
against TF 2.21's recorded behaviour (tests/fixtures/data_service_worker_error_tf.json,
recorded by tests/fixtures/record_data_service_worker_error_tf.py).

The error keeps its class and reads "Failed to get element from worker W: Failed to get
an element, with a nonretryable error: Failed to get element: <the iterator's error>",
for a plain read and a coordinated one, and every later get_next gives it again.  The
map function's error is worded as TF's ("Error in user-defined function passed to
<op type>:<n> transformation with iterator: <prefix>: ..."), whose count and iterator
prefix are TF's own (tests/test_data_fn_error_words.py): that part is taken out of
both before comparing."""

import json
import pathlib
import re
import sys

import pytest

import asyncflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from record_data_service_worker_error_tf import record  # noqa: E402

pytestmark = pytest.mark.timeout(30)

TF = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_worker_error_tf.json").read_text()
)
_MAP_ERROR = re.compile(
    r"Error in user-defined function passed to \S+ transformation with iterator: \S+: "
)


def _plain(calls: list) -> list:
    return [c if not isinstance(c, list) else [c[0], _MAP_ERROR.sub("", c[1])] for c in calls]


def test_worker_errors_as_tf():
    """A map's failing gather on the worker (plain and coordinated reads) and a
    refused consumer index: TF's class and words, again at every later get_next; an
    unknown cardinality repeated for ever is infinite (the coordinated read's)."""
    got = record(tf, 2000)
    assert {k: _plain(v) for k, v in got.items()} == {k: _plain(v) for k, v in TF.items()}
    assert "passed to MapDataset:" in got["plain"][-1][1]
    assert got["repeat_cardinality"] == [-1, -2]  # (an unknown count repeated for ever)


def test_ignore_errors_over_a_failed_read_ends_with_its_error():
    """ignore_errors directly over a read whose error repeats for ever raises it (the
    read cannot go on) where skipping it would never end."""
    svc = tf.data.experimental.service
    v1 = tf.compat.v1
    d = svc.DispatchServer()
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target.split("://")[1]))
    try:
        with v1.Graph().as_default():
            ds = tf.data.Dataset.range(5).map(lambda x: tf.gather(tf.constant([1, 2]), x))
            ds = ds.apply(svc.distribute("parallel_epochs", d.target)).ignore_errors()
            nxt = v1.data.make_one_shot_iterator(ds).get_next()
            with v1.Session() as sess:
                assert [sess.run(nxt) for _ in range(2)] == [1, 2]
                with pytest.raises(tf.errors.InvalidArgumentError, match="from worker"):
                    sess.run(nxt)
    finally:
        w._stop()
        d._stop()
