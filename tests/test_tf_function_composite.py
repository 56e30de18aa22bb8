"""tf.function with composite arguments and results (SparseTensor, RaggedTensor,
IndexedSlices, ExtensionType) in a TF1 graph, against TF 2.21's recorded results
(tests/fixtures/tf_function_composite_cases.py -> tf_function_composite_tf.json): the
values of the calls, tracing counts (a trace per TypeSpec: same spec, no retrace),
structured input signatures and outputs, placeholder names, and TF's errors for
arguments an input_signature of composite specs does not take."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import tf_function_composite_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "tf_function_composite_tf.json").read_text())
NAMES = [c.__name__ for c in cases.CASES]
pytestmark = pytest.mark.timeout(60)

# Errors compared by class and the start of TF's message: TF's text past it shows
# TF-internal names ("'SymbolicTensor' object has no attribute 'indices'") or whole
# structures of tensors.
PREFIX_ONLY = {
    ("input_signature_sparse", "dense"),
    ("input_signature_sparse", "ragged"),
    ("input_signature_ragged", "rank3"),
    ("concrete_function_calls", "sparse_to_ragged_trace"),
}
PREFIX = "TypeError: Binding inputs to tf.function failed due to `"


def test_every_case_is_recorded():
    assert sorted(TF) == sorted(NAMES)


@pytest.fixture(scope="module")
def ours():
    return {case.__name__: cases.run_case(tf, case) for case in cases.CASES}


@pytest.mark.parametrize("name", NAMES)
def test_values_match_tf(ours, name):
    got, want = ours[name]["values"], TF[name]["values"]
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


@pytest.mark.parametrize(
    "name,key", [(n, k) for n in NAMES for k in sorted(TF[n]["info"])]
)  # fmt: skip
def test_info_matches_tf(ours, name, key):
    got, want = ours[name]["info"][key], TF[name]["info"][key]
    if (name, key) in PREFIX_ONLY:
        assert want.startswith(PREFIX) and got.startswith(PREFIX), got
    else:
        assert got == want


def test_concrete_function_takes_flat_components():
    with tf.Graph().as_default():
        f = tf.function(lambda x: tf.sparse.to_dense(x))
        cf = f.get_concrete_function(tf.SparseTensorSpec([2, 2], tf.float32))
        sp = tf.SparseTensor([[1, 1]], [3.0], [2, 2])
        dense = cf(sp.indices, sp.values, sp.dense_shape)
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(dense), [[0, 0], [0, 3]])
        with pytest.raises(TypeError):
            cf(tf.ragged.constant([[1.0]]))


def test_composite_specs_in_input_signature_are_accepted():
    spec = [tf.RaggedTensorSpec([None, None], tf.float32), tf.IndexedSlicesSpec([4, 2])]
    f = tf.function(lambda r, s: r, input_signature=spec)
    assert f.input_signature == tuple(spec)


def test_gradient_through_a_sparse_argument():
    with tf.Graph().as_default():
        v = tf.constant([1.0, 2.0])
        f = tf.function(lambda sp: tf.sparse.reduce_sum(sp) * 3.0)
        y = f(tf.SparseTensor([[0], [2]], v, [3]))
        (g,) = tf.gradients(y, [v])
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(g), [3.0, 3.0])


def test_gradient_through_a_ragged_argument():
    with tf.Graph().as_default():
        v = tf.constant([1.0, 2.0, 3.0])
        f = tf.function(lambda rt: tf.reduce_sum(rt * rt))
        y = f(tf.RaggedTensor.from_row_splits(v, tf.constant([0, 2, 3], tf.int64)))
        (g,) = tf.gradients(y, [v])
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(g), [2.0, 4.0, 6.0])


def test_sparse_placeholder_of_unknown_rank_is_fed_through_the_call():
    with tf.Graph().as_default():
        sp = tf.sparse.placeholder(tf.float32)
        f = tf.function(lambda x: tf.sparse.reduce_sum(x))
        y = f(sp)
        cf = f.get_concrete_function(sp)  # (TF 2.21's shapes, checked by running it)
        assert [str(t.shape) for t in cf.inputs] == ["(?, ?)", "(?,)", "(?,)"]
        assert f.experimental_get_tracing_count() == 1
        value = tf.SparseTensorValue([[0, 1, 2], [1, 0, 0]], [2.0, 5.0], [2, 2, 3])
        with tf.Session() as sess:
            assert sess.run(y, {sp: value}) == 7.0
