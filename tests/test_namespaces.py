"""TF1's namespaces (tf.math, tf.random, ...) resolve to the same builders as the
top-level names, and benchmarks/api_coverage.py reports coverage per namespace."""

import importlib.util
import pathlib

import numpy as np
import pytest

import asyncflow as af

_ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_namespaces_alias_existing_builders():
    assert af.math.add is af.add and af.math.reduce_sum is af.reduce_sum
    assert af.math.log_softmax is af.nn.log_softmax
    assert af.random.uniform is af.random_uniform and af.random.normal is af.random_normal
    assert af.io.parse_example is af.parse_example
    assert af.io.TFRecordWriter is af.python_io.TFRecordWriter
    assert af.sparse.SparseTensor is af.SparseTensor
    assert af.strings.join is af.string_join and af.strings.length is af.string_length
    assert af.linalg.matmul is af.matmul and af.math.confusion_matrix is af.confusion_matrix


def test_missing_and_foreign_names_raise_attribute_error(monkeypatch):
    # Every TF1 name of these namespaces is implemented now: pretend tf.io had one more.
    monkeypatch.setattr(af.io, "_tf_names", {*af.io._tf_names, "decode_tiff"})
    with pytest.raises(AttributeError, match="not implemented"):
        af.io.decode_tiff  # noqa: B018 - a TF1 name asyncflow lacks
    with pytest.raises(AttributeError):
        af.math.random_uniform  # noqa: B018 - not a tf.math name
    assert not hasattr(af.random, "nonexistent")


def test_namespace_builders_run(sess):
    x = af.constant([1.0, 4.0])
    assert sess.run(af.math.sqrt(x)).tolist() == [1.0, 2.0]
    assert sess.run(af.random.shuffle(af.constant([1, 2, 3]), seed=1)).tolist() != []
    np.testing.assert_allclose(sess.run(af.linalg.matmul([[1.0, 2.0]], [[3.0], [4.0]])), [[11]])


def test_api_coverage_report():
    spec = importlib.util.spec_from_file_location(
        "api_coverage", _ROOT / "benchmarks/api_coverage.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cov = mod.coverage()
    frac = {ns: len(h) / (len(h) + len(m)) for ns, (h, m) in cov.items()}
    assert {"top", "nn", "train", "layers", "image", "data", "metrics"} <= set(frac)
    # Floors that only move up: what this commit reaches.
    assert frac["data"] >= 0.8 and frac["metrics"] >= 0.75 and frac["layers"] >= 0.75
    assert all(n in cov["data"][0] for n in ("Dataset", "TFRecordDataset", "Iterator"))


def test_tf1s_debugging_manip_queue_and_version_namespaces():
    # tf.compat.v1's names there (TF 2.21), over what asyncflow has at the top level.
    assert af.debugging.assert_equal is af.assert_equal
    assert af.debugging.assert_all_finite is af.verify_tensor_all_finite
    assert af.debugging.check_numerics is af.check_numerics
    assert af.manip.roll is af.roll and af.manip.scatter_nd is af.scatter_nd
    assert af.queue.FIFOQueue is af.FIFOQueue
    assert af.queue.RandomShuffleQueue is af.RandomShuffleQueue
    assert af.version.GRAPH_DEF_VERSION == af.GRAPH_DEF_VERSION
    assert af.__version__ == af.version.VERSION == af.VERSION
    with af.Graph().as_default():
        x = af.constant([[1, 2], [3, 4]])
        with af.Session() as sess:
            assert sess.run(af.manip.reverse(x, [1])).tolist() == [[2, 1], [4, 3]]
