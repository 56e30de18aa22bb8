"""The v2 switches, random_index_shuffle, ragged_fill_empty_rows(_grad), conv,
nondifferentiable_batch_function, check_pinned, the library loaders and LogMessage,
against TF 2.21's recorded behaviour (fixtures/tf_top_odds.json, recorded by
fixtures/record_tf_top_odds.py), NumPy and finite differences.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.resource_variable import ResourceVariable

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import tf_top_odds_cases as rec  # noqa: E402

TABLE = json.loads((HERE / "tf_top_odds.json").read_text())


@pytest.mark.parametrize("case", TABLE["shuffles"], ids=lambda c: f"{c['max']}-{c['rounds']}")
def test_random_index_shuffle_bits_as_tf(case):
    n = len(case["out"])
    dt = case["dtype"]
    idx = np.arange(n, dtype=np.uint64 if dt == "uint64" else np.int64)
    with tf.Graph().as_default(), tf.Session() as s:
        seed = tf.constant(case["seed"], tf.int64)
        r = tf.random_index_shuffle(
            tf.constant(idx, dt), seed, tf.constant(case["max"], dt), rounds=case["rounds"]
        )
        got = s.run(r)
    assert got.dtype == np.dtype(dt)
    assert [int(v) for v in got] == case["out"]
    if case["max"] < 50:  # a permutation of [0, max]
        assert sorted(case["out"]) == list(range(case["max"] + 1))


def test_random_index_shuffle_seed_rows_and_errors():
    want = TABLE["shuffle_seed_matrix"]
    with tf.Graph().as_default(), tf.Session() as s:
        r = tf.random_index_shuffle(
            tf.constant(3, tf.int64), tf.constant([[4, 5, 6]], tf.int32), tf.constant(99, tf.int64)
        )
        assert r.shape.as_list() == want["shape"]
        assert s.run(r).tolist() == want["out"]
        bad = tf.random_index_shuffle(
            tf.constant([1, 2], tf.int64), tf.constant([1, 2], tf.int64), tf.constant(9, tf.int64)
        )
        with pytest.raises(errors.InvalidArgumentError, match="Seed must be"):
            s.run(bad)
        odd = tf.random_index_shuffle(
            tf.constant(1, tf.int64), tf.constant([1, 2, 3], tf.int64), tf.constant(9, tf.int64),
            rounds=5,
        )  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError, match="rounds"):
            s.run(odd)


def test_ragged_fill_empty_rows_and_gradient_as_tf():
    want = TABLE["fill"]
    with tf.Graph().as_default(), tf.Session() as s:
        vals = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0])
        default = tf.constant(-1.0)
        filled = tf.ragged_fill_empty_rows(
            tf.constant([0, 0, 2, 2, 4], tf.int64), vals, tf.constant(6, tf.int64), default
        )
        grads = tf.gradients(tf.reduce_sum(filled[1] * tf.range(1.0, 9.0)), [vals, default])
        unsorted = tf.ragged_fill_empty_rows(
            tf.constant([0, 2, 1], tf.int64), tf.constant([1, 2, 3]), tf.constant(4, tf.int64),
            tf.constant(0),
        )  # fmt: skip
        raw = tf.ragged_fill_empty_rows_grad(
            tf.constant([0, 1, 3, 4, 6], tf.int64), tf.constant([1.0, 2, 3, 4, 5, 6, 7, 8])
        )
        got = s.run({"filled": list(filled), "grads": grads, "unsorted": list(unsorted),
                     "raw_grad": list(raw)})  # fmt: skip
        for k, values in want.items():
            assert [np.asarray(v).tolist() for v in got[k]] == values, k
        out_of_range = tf.ragged_fill_empty_rows(
            tf.constant([0, 5], tf.int64), tf.ones([2]), tf.constant(3, tf.int64), tf.constant(0.0)
        )
        with pytest.raises(errors.InvalidArgumentError, match="is invalid: 5 >= 3"):
            s.run(out_of_range)
    assert TABLE["fill_out_of_range"] == "InvalidArgumentError"


@pytest.mark.parametrize(
    "name", [k for k, v in TABLE["convs"].items() if v["value"] != "UnimplementedError"]
)
def test_conv_as_tf(name):
    kw = rec.CONVS[name]
    with tf.Graph().as_default(), tf.Session() as s:
        y = tf.conv(tf.constant(rec.X), tf.constant(rec.W), **kw)
        assert y.op.type == "Conv"
        attrs = {k: y.op.get_attr(k) for k in TABLE["convs"][name]["attrs"]}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        assert attrs == TABLE["convs"][name]["attrs"]
        assert y.shape.as_list() == TABLE["convs"][name]["shape"]
        np.testing.assert_allclose(s.run(y), TABLE["convs"][name]["value"], rtol=1e-5, atol=1e-5)


def test_nondifferentiable_batch_function_as_tf():
    want = TABLE["batch_function"]
    with tf.Graph().as_default(), tf.Session() as s:

        @tf.nondifferentiable_batch_function(1, 4, 1000)
        def batched(a, b):
            return a * 2.0 + b, tf.reduce_sum(a, axis=1, keepdims=True)

        a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        res = batched(a, tf.constant([[0.5, 0.5], [1.0, 1.0]]))
        assert [t.name for t in res] == want["names"]
        assert [str(t.shape) for t in res] == want["shapes"]
        assert [v.tolist() for v in s.run(list(res))] == want["values"]
        with pytest.raises(LookupError):
            tf.gradients(res[0], a)
    with pytest.raises(ValueError):
        tf.nondifferentiable_batch_function(1, 4, 1000, allowed_batch_sizes=[2, 3])


def test_check_pinned_as_tf():
    with tf.Graph().as_default(), tf.Session() as s:
        y = tf.check_pinned(tf.constant([1.0, 2.0]))
        assert y.shape.as_list() == TABLE["check_pinned"]["shape"]
        with pytest.raises(errors.InvalidArgumentError, match="not pinned"):
            s.run(y)
        with pytest.raises(LookupError):  # (TF registers no gradient)
            tf.gradients(y, tf.get_default_graph().get_tensor_by_name("Const:0"))


def test_loaders_as_tf(tmp_path):
    missing = "/nonexistent/lib.so"
    for name, error in TABLE["loaders"].items():
        with pytest.raises(getattr(errors, error, None) or FileNotFoundError):
            getattr(tf, name)(missing)
    kernel = tmp_path / "kernels.so"
    kernel.write_bytes(b"\x7fELF")
    for name in ("load_library", "load_op_library", "load_file_system_library"):
        with pytest.raises(errors.UnimplementedError, match="cannot load TensorFlow kernel"):
            getattr(tf, name)(str(kernel))


def test_log_message_is_tfs():
    want = TABLE["log_message"]
    msg = tf.LogMessage(level=tf.LogMessage.WARN, message="hi")
    assert list(msg.SerializeToString()) == want["bytes"]
    # (our messages live in package asyncflow.tensorflow)
    assert want["full_name"].endswith("." + tf.LogMessage.DESCRIPTOR.name)
    assert {v.name: v.number for v in tf.LogMessage.DESCRIPTOR.enum_types[0].values} == want[
        "levels"
    ]


def test_resource_variables_switch_as_tf():
    want = TABLE["resource_variables"]
    tf.enable_resource_variables()
    try:
        with tf.Graph().as_default():
            made = [
                tf.Variable(1.0),
                tf.get_variable("g", [1]),
                tf.Variable(1.0, use_resource=False),
            ]
            flag = tf.resource_variables_enabled()
    finally:
        tf.disable_resource_variables()
    assert [isinstance(v, ResourceVariable) for v in made] == [
        k == "ResourceVariable" for k in want["enabled"]
    ]
    assert flag == want["flag"]
    with tf.Graph().as_default():
        after = [tf.Variable(1.0), tf.get_variable("g", [1])]
    assert [isinstance(v, ResourceVariable) for v in after] == [False, False]
    assert tf.resource_variables_enabled() == want["flag_after"]


def test_tensor_equality_switch_as_tf_in_a_graph():
    want = TABLE["tensor_equality"]
    tf.enable_tensor_equality()
    try:
        with tf.Graph().as_default():
            x, y = tf.constant([1, 2]), tf.constant([1, 2])
            got = {
                "eq": x == y,
                "eq_self": x == x,
                "ne": x != y,
                "hashable": isinstance(hash(x), int),
            }
    finally:
        tf.disable_tensor_equality()
    assert got == want


def test_unsupported_switches_raise_and_change_nothing():
    for switch in (tf.enable_eager_execution, tf.enable_v2_behavior, tf.enable_v2_tensorshape):
        with pytest.raises(NotImplementedError):
            switch()
    assert not tf.executing_eagerly() and not tf.resource_variables_enabled()
    tf.enable_control_flow_v2()  # accepted: same values, TF1 graphs
    with tf.Graph().as_default(), tf.Session() as s:
        x = tf.constant(2.0)
        assert s.run(tf.cond(x > 0, lambda: x * 3.0, lambda: -x)) == 6.0
    assert not tf.control_flow_v2_enabled()
