"""TF's FractionalMaxPool / FractionalAvgPool and their Grad ops
(ops/fractional_pool_ops.py) against TF 2.21's recorded results
(tests/fixtures/fractional_pool/, recorded by record_fractional_pool.py from
fractional_pool_cases.py): seeded, deterministic pools give TF's windows (its Philox
draws), values and gradients, built here and from TF's own GraphDef.
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
import fractional_pool_cases as cases  # noqa: E402

FIX = HERE / "fractional_pool"
FETCHES = json.loads((FIX / "fetches.json").read_text())
with np.load(FIX / "values.npz", allow_pickle=False) as _npz:
    VALUES = {k: _npz[k] for k in _npz.files}


def _check(got: dict) -> None:
    assert set(got) == set(VALUES)
    for k, want in VALUES.items():
        g = np.asarray(got[k])
        assert g.dtype == want.dtype and g.shape == want.shape, k
        if want.dtype.kind == "f":
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(g, want, err_msg=k)


def test_built_here_matches_tf():
    with tf.Graph().as_default():
        out = cases.build(tf)
        assert out["max0"].op.type == "FractionalMaxPool"
        with tf.Session() as sess:
            got = sess.run(out)
    _check(got)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((FIX / "graph.pb").read_bytes())
    assert {"FractionalMaxPoolGrad", "FractionalAvgPoolGrad"} <= {n.op for n in gd.node}
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in FETCHES.items()}
        with tf.Session() as sess:
            got = sess.run(fetch)
    _check(got)


def test_unseeded_windows_vary_and_respect_the_bounds():
    """Without seeds each run draws new windows (sizes k or k + 1, covering the input)."""
    x = np.arange(1 * 30 * 30 * 1, dtype=np.float32).reshape(1, 30, 30, 1)
    with tf.Graph().as_default(), tf.Session() as sess:
        _, rows, _ = tf.nn.fractional_max_pool(x, [1.0, 1.7, 1.7, 1.0])
        seen = {tuple(sess.run(rows)) for _ in range(8)}
    assert len(seen) > 1
    for r in seen:
        assert r[0] == 0 and r[-1] == 30 and set(np.diff(r)) <= {1, 2}


def test_errors_as_tf():
    with tf.Graph().as_default():
        x = tf.zeros([1, 4, 4, 1])
        with pytest.raises(ValueError, match="first and last elements of pooling ratio"):
            tf.nn.fractional_max_pool(x, [2.0, 1.5, 1.5, 1.0])
        with tf.Session() as sess:
            with pytest.raises(
                tf.errors.InvalidArgumentError,
                match="Both seed and seed2 should be 0 if deterministic is false",
            ):
                sess.run(tf.nn.fractional_max_pool(x, [1.0, 1.5, 1.5, 1.0], seed=1)[0])
            y = tf.nn.fractional_avg_pool(
                tf.placeholder_with_default(x, None), [1.0, 5.0, 1.0, 1.0]
            )
            with pytest.raises(tf.errors.InvalidArgumentError, match="Pooling ratio is higher"):
                sess.run(y[0])
