"""TF's Fingerprint, ApproxTopK and ExtractVolumePatches ops and the top-level odds
tf.batch_scatter_update, tf.recompute_grad, tf.vectorized_map (ops/fingerprint_ops.py,
ops/approx_topk_ops.py, ops/volume_patches_ops.py, asyncflow/tf1_extras.py) against TF
2.21's recorded results (tests/fixtures/tf_odds/, recorded by record_tf_odds.py from
tf_odds_cases.py):

- the same graph built by asyncflow gives TF's values (fingerprints and indices bit for
  bit) and gradients;
- TF's own GraphDef (its gradient ops: ScatterNd, SparseTensorDenseMatMul, IdentityN,
  the vectorized map's ops) imports and runs to the same values;
- errors, create_partitioned_variables and add_check_numerics_ops as TF's.
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
import tf_odds_cases as cases  # noqa: E402

FIX = HERE / "tf_odds"
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
        assert out["fp_strings"].op.type == "Fingerprint"
        assert out["topk1_values"].op.type == "ApproxTopK"
        assert out["patches0"].op.type == "ExtractVolumePatches"
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(out)
    _check(got)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((FIX / "graph.pb").read_bytes())
    assert {"Fingerprint", "ApproxTopK", "ExtractVolumePatches"} <= {n.op for n in gd.node}
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in FETCHES.items()}
        inits = [op for op in g.get_operations() if op.type == "Assign"]
        with tf.Session() as sess:
            sess.run(inits)
            got = sess.run(fetch)
    _check(got)


def test_fingerprint_errors_as_tf():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Shape must be at least rank 1 but is rank 0"):
            tf.fingerprint(tf.constant(1.0))
        with pytest.raises(ValueError, match="Unsupported method: md5"):
            tf.fingerprint([1.0], method="md5")
        data = tf.placeholder_with_default(1.0, None)
        method = tf.placeholder_with_default("md5", [])
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="at least one dimension"):
                sess.run(tf.fingerprint(data))
            with pytest.raises(
                tf.errors.InvalidArgumentError, match="Unsupported fingerprint method: md5"
            ):
                sess.run(tf.fingerprint([1.0], method=method))


def test_approx_min_k_and_other_dimensions_are_exact():
    """TF 2.21 has CPU kernels only for max_k along the last dimension; the others
    follow the same exact rule here (sorted, ties by index, NaN the largest)."""
    x = np.float32([[3, 1, np.nan, 1], [0, -2, 5, -2]])
    with tf.Graph().as_default(), tf.Session() as sess:
        v, i = sess.run(tf.math.approx_min_k(x, 2))
        v0, i0 = sess.run(tf.math.approx_max_k(x, 1, reduction_dimension=0))
    np.testing.assert_array_equal(v, [[1, 1], [-2, -2]])
    np.testing.assert_array_equal(i, [[1, 3], [1, 3]])
    np.testing.assert_array_equal(v0, [[3, 1, np.nan, 1]])
    np.testing.assert_array_equal(i0, [[0, 0, 0, 0]])


def test_create_partitioned_variables_as_tf():
    with tf.Graph().as_default():
        parts = tf.create_partitioned_variables(
            [10, 4], [3, 1], tf.constant_initializer(2.0), name="pv"
        )
        assert [p.name for p in parts] == ["pv/part_0:0", "pv/part_1:0", "pv/part_2:0"]
        assert [p.shape.as_list() for p in parts] == [[4, 4], [3, 4], [3, 4]]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert all((sess.run(p) == 2).all() for p in parts)
        with pytest.raises(ValueError, match="must have the length"):  # (TF 2.21's words)
            tf.create_partitioned_variables([10, 4], [3], tf.zeros_initializer())


def test_add_check_numerics_ops_as_tf():
    with tf.Graph().as_default():
        a = tf.constant([1.0, np.inf], name="a")
        tf.multiply(a, tf.constant(2.0, name="two"), name="b")
        tf.constant([1, 2], name="ints")
        check = tf.add_check_numerics_ops()
        assert check.type == "NoOp"
        graph = tf.get_default_graph()
        checks = [op for op in graph.get_operations() if op.type == "CheckNumerics"]
        messages = [op.get_attr("message") for op in checks]
        assert [m.decode() if isinstance(m, bytes) else m for m in messages] == [
            "a:0",
            "two:0",
            "b:0",
        ]  # (as TF names them)
        with tf.Session() as sess:
            with pytest.raises(
                tf.errors.InvalidArgumentError, match="a:0 : Tensor had Inf values"
            ):
                sess.run(check)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        tf.cond(x > 0, lambda: x * 2, lambda: x)
        with pytest.raises(ValueError, match="not compatible with TensorFlow control flow"):
            tf.add_check_numerics_ops()


def test_no_gradient_where_tf_has_none():
    """The fractional pools' Grad ops (and Fingerprint, whose uint8 output no float
    gradient reaches) have no gradient in TF 2.21, nor a NotDifferentiable mark:
    differentiating through them raises LookupError, here too."""
    with tf.Graph().as_default():
        v = tf.constant(np.ones((1, 4, 4, 1), np.float32))
        for pool in (tf.nn.fractional_max_pool, tf.nn.fractional_avg_pool):
            y = pool(v, [1.0, 1.5, 1.5, 1.0], deterministic=True, seed=1, seed2=1)[0]
            (dv,) = tf.gradients(tf.reduce_sum(y * y), [v])
            with pytest.raises(LookupError):
                tf.gradients(tf.reduce_sum(dv), [v])
