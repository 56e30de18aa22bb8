"""`tf.concat` on RaggedTensors along every axis against TF 2.21's recorded results
(tests/fixtures/ragged_concat_tf.json, recorded by record_ragged_concat_tf.py from
ragged_concat_cases.py): values, ragged rank, static shape, and for bad inputs the
error class and whether it came at build time or when the step ran.  The gradient of
the within-rows join is checked by finite differences.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
from ragged_concat_cases import CASES  # noqa: E402

TABLE = json.loads((HERE / "ragged_concat_tf.json").read_text())


def _ours(fn) -> dict:
    with tf.Graph().as_default():
        try:
            out = fn(tf)
        except Exception as e:  # noqa: BLE001 - the class is compared
            return {"error": type(e).__name__, "when": "build"}
        with tf.Session() as sess:
            try:
                v = sess.run(out)
            except tf.errors.OpError as e:
                return {"error": type(e).__name__, "when": "run", "message": e.message}
        value = v.to_list() if hasattr(v, "to_list") else v.tolist()
        return {"value": value, "ragged_rank": getattr(out, "ragged_rank", 0),
                "shape": out.shape.as_list()}  # fmt: skip


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tf(name):
    got, want = _ours(CASES[name]), TABLE[name]
    got.pop("message", None)
    assert got == want


@pytest.mark.timeout(60)
def test_run_time_errors_name_the_check():
    got = _ours(CASES["nrows_mismatch_run"])
    assert "Input tensors at index 0 (=x) and 1 (=y) have incompatible shapes" in got["message"]
    got = _ours(CASES["splits_mismatch_run"])
    assert "Inputs must have identical ragged splits" in got["message"]


@pytest.mark.timeout(60)
def test_gradient_of_within_rows_join_by_finite_differences():
    a0 = np.array([1.0, 2.0, 3.0])
    b0 = np.array([4.0, 5.0, 6.0])
    w = np.array([0.5, -1.0, 2.0, 3.0, -0.25, 1.5])
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float64, [3])
        b = tf.placeholder(tf.float64, [3])
        rt = tf.concat([
            tf.RaggedTensor.from_row_splits(a, tf.constant([0, 2, 3], tf.int64)),
            tf.RaggedTensor.from_row_splits(b, tf.constant([0, 1, 3], tf.int64)),
        ], axis=1)  # fmt: skip
        loss = tf.reduce_sum(tf.square(rt.flat_values) * w)
        ga, gb = tf.gradients(loss, [a, b])
        with tf.Session() as sess:
            f = lambda x, y: sess.run(loss, {a: x, b: y})  # noqa: E731
            got_a, got_b = sess.run([ga, gb], {a: a0, b: b0})
            eps = 1e-6
            num_a = [(f(a0 + eps * e, b0) - f(a0 - eps * e, b0)) / (2 * eps) for e in np.eye(3)]
            num_b = [(f(a0, b0 + eps * e) - f(a0, b0 - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(got_a, num_a, rtol=1e-6)
    np.testing.assert_allclose(got_b, num_b, rtol=1e-6)
