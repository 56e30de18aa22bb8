"""TF1's ragged API in graph mode against TF 2.21's recorded results
(tests/fixtures/ragged_s26_tf.json, recorded by record_ragged_s26_tf.py from
ragged_s26_cases.py with tensorflow.compat.v1): RaggedTensor's factories (with their
validate=True checks), views, conversions and indexing; the tf.ragged functions; the
dense ops TF dispatches for ragged arguments; the raw ragged ops; gradients through
them; and a GraphDef TF wrote with the ragged ops, imported and run.  Each case
compares the value (or the error's class, when it came and the start of its message).
Gradients of the new kernels are also checked by finite differences in float64.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
from ragged_s26_cases import ALL, describe  # noqa: E402

TABLE = json.loads((HERE / "ragged_s26_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted([*ALL, "__graph__"])


def _split_shapes(record, shapes):
    """record without its static shapes (collected into `shapes`, in order)."""
    if isinstance(record, dict):
        if "shape" in record:
            shapes.append(record["shape"])
        return {k: _split_shapes(v, shapes) for k, v in record.items() if k != "shape"}
    if isinstance(record, list):
        return [_split_shapes(v, shapes) for v in record]
    return record


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(ALL))
def test_matches_tf(name):
    got_shapes, want_shapes = [], []
    got = _split_shapes(describe(tf, ALL[name]), got_shapes)
    assert got == _split_shapes(TABLE[name], want_shapes)
    # Static shapes: never contradicting TF's (a dimension one side leaves unknown may be
    # known on the other; see the report for the cases that differ so).
    for ours, theirs in zip(got_shapes, want_shapes):
        ours_s, theirs_s = tf.TensorShape(ours), tf.TensorShape(theirs)
        assert ours_s.is_compatible_with(theirs_s), (ours, theirs)


@pytest.mark.timeout(60)
def test_graph_def_tf_wrote_imports_and_runs():
    rec = TABLE["__graph__"]
    graph_def = tf.GraphDef()
    graph_def.ParseFromString((HERE / "ragged_s26_graph.pb").read_bytes())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(graph_def, name="")
        assert sorted({op.type for op in g.get_operations()}) == rec["op_types"]
        with tf.Session() as sess:
            got = sess.run({k: g.get_tensor_by_name(v) for k, v in rec["fetches"].items()})
    got = {k: v.tolist() for k, v in got.items()}
    got["cross"] = [repr(x) for x in got["cross"]]
    assert got == rec["values"]


def test_tf_ragged_names():
    want = """RaggedTensorValue boolean_mask constant constant_value cross cross_hashed
        map_flat_values placeholder range row_splits_to_segment_ids segment_ids_to_row_splits
        stack stack_dynamic_partitions""".split()
    for name in want:
        assert callable(getattr(tf.ragged, name)) or name == "RaggedTensorValue"


def test_placeholder_feeds():
    with tf.Graph().as_default():
        p = tf.ragged.placeholder(tf.float32, 2, [3], name="foo")
        assert p.ragged_rank == 2
        assert p.shape.as_list() == [None, None, None, 3]
        names = [op.name for op in tf.get_default_graph().get_operations()]
        assert names == ["foo/flat_values", "foo/row_splits_1", "foo/row_splits_0"]
        total = tf.reduce_sum(p.flat_values)
        with tf.Session() as sess:
            v = sess.run(
                total,
                {
                    p.flat_values: np.ones([2, 3], np.float32),
                    p.row_splits: [0, 1],
                    p.values.row_splits: [0, 2],
                },
            )
    assert v == 6.0


def test_squeeze_of_rows_not_of_length_1_fails_when_run():
    # TF 2.21 raises InvalidArgumentError when the step runs, from one of two Asserts
    # (which one first varies from run to run), so only the class is compared.
    with tf.Graph().as_default():
        out = tf.squeeze(tf.ragged.constant([[[1], [2, 5]], [[3]]]), axis=2)
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(out)


def test_feed_ragged_placeholder_with_a_value():
    # TF 2.21: sess.run(p * 2, {p: tf.ragged.constant_value([[1, 2], [3]])}) is
    # [[2, 4], [6]].
    with tf.Graph().as_default():
        p = tf.ragged.placeholder(tf.int32, 1, [])
        with tf.Session() as sess:
            got = sess.run(p * 2, {p: tf.ragged.constant_value([[1, 2], [3]])})
            assert got.to_list() == [[2, 4], [6]]


# -- gradients by finite differences (float64) -----------------------------------------------


def _check_gradient(build, x0):
    """tf.gradients of sum(build(x) * w) against central differences of it."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [len(x0)])
        out = build(x)
        flat = out.flat_values if hasattr(out, "flat_values") else out
        w = tf.cast(tf.reshape(tf.range(1, tf.size(flat) + 1), tf.shape(flat)), tf.float64)
        y = tf.reduce_sum(flat * w)
        (g,) = tf.gradients(y, [x])
        g = tf.convert_to_tensor(g)
        with tf.Session() as sess:
            analytic = sess.run(g, {x: x0})
            numeric = np.zeros_like(x0)
            for i in range(len(x0)):
                e = np.zeros_like(x0)
                e[i] = 1e-6
                numeric[i] = (sess.run(y, {x: x0 + e}) - sess.run(y, {x: x0 - e})) / 2e-6
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-6)


def _rt(x):
    return tf.RaggedTensor.from_row_splits(x, tf.constant([0, 2, 2, 5], tf.int64))


X0 = np.array([0.3, -1.2, 2.5, 0.7, -0.4])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "build",
    [
        lambda x: _rt(x).to_tensor(default_value=tf.constant(0.0, tf.float64)),
        lambda x: _rt(x).to_tensor(shape=[2, 2]),
        lambda x: _rt(x).to_sparse().values,
        lambda x: tf.gather(_rt(x), [[2, 0], [2, 2]]),
        lambda x: tf.reduce_mean(_rt(x), axis=0),
        lambda x: tf.reduce_sum(_rt(x), axis=0),
        lambda x: tf.ragged.boolean_mask(_rt(x), tf.ragged.constant([[1, 0], [], [0, 1, 1]]) > 0),
        lambda x: _rt(x)[:, -2:] * _rt(x)[:, -2:],
    ],
    ids=["to_tensor", "to_tensor_cut", "to_sparse", "gather", "mean", "sum0", "mask", "slice"],
)
def test_gradient_by_finite_differences(build):
    _check_gradient(build, X0)


def test_row_partitions_from_python_lists_are_int64_as_tfs():
    # TF 2.21 (recorded): a Python list's row partition is int64; an int32 tensor or
    # int32 NumPy array keeps int32.
    import numpy as np

    rt = tf.RaggedTensor
    cases = {
        "splits": (lambda: rt.from_row_splits([1, 2, 3], [0, 2, 3]), "int64"),
        "lengths": (lambda: rt.from_row_lengths([1, 2, 3], [2, 1]), "int64"),
        "starts": (lambda: rt.from_row_starts([1, 2, 3], [0, 2]), "int64"),
        "limits": (lambda: rt.from_row_limits([1, 2, 3], [2, 3]), "int64"),
        "rowids": (lambda: rt.from_value_rowids([1, 2, 3], [0, 0, 1]), "int64"),
        "nested": (lambda: rt.from_nested_row_splits([1, 2, 3], [[0, 1, 2], [0, 2, 3]]), "int64"),
        "i32": (lambda: rt.from_row_splits([1, 2, 3], tf.constant([0, 2, 3], tf.int32)), "int32"),
        "np32": (lambda: rt.from_row_splits([1, 2, 3], np.array([0, 2, 3], np.int32)), "int32"),
    }
    with tf.Graph().as_default():
        got = {k: f().row_splits.dtype.name for k, (f, _) in cases.items()}
    assert got == {k: want for k, (_, want) in cases.items()}
