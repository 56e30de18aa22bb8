"""tf.metrics' precision_at_k, recall_at_k, precision_at_top_k, recall_at_top_k and
sparse_precision_at_k, built as TF's metrics_impl (set ops, float64 variables), against
TF 2.21's recorded values (tests/fixtures/metrics_at_k_tf.json, recorded by
record_metrics_at_k_tf.py from metrics_at_k_cases.py): dense, 1-D and sparse labels,
class_id, weights; each update op once, then the value.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import metrics_at_k_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "metrics_at_k_tf.json").read_text())


def test_metrics_at_k_match_tf():
    with tf.Graph().as_default():
        out = cases.build(tf)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            updates = sess.run({k: u for k, (_, u) in out.items()})
            values = sess.run({k: v for k, (v, _) in out.items()})
    assert set(out) == set(TABLE)
    for k, rec in TABLE.items():
        assert np.asarray(values[k]).dtype == np.dtype(rec["dtype"]), k
        for got, want in ((updates[k], rec["update"]), (values[k], rec["value"])):
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=k)


def test_metric_variables_are_local_float64():
    with tf.Graph().as_default():
        tf.metrics.recall_at_k(cases.LABELS, cases.SCORES, 2, class_id=1)
        local = tf.local_variables()
    assert len(local) == 2 and all(v.dtype.base_dtype == tf.float64 for v in local)
