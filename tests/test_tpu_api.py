"""tf.tpu, tf.tpu.experimental, tf.tpu.experimental.embedding and
tf.distribute.experimental.TPUStrategy against TF 2.21's CPU build.

The cases live in fixtures/tpu_cases.py; their outcomes under TF 2.21 (tf.compat.v1,
v2 behaviour off) were recorded by running that file into fixtures/tpu_tf.json:
signatures and defaults, reprs and attributes, validation errors, the graphs
`replicate`/`shard`/`initialize_system` build (node by node, attrs included), what a
session says when it runs them (TF's "No OpKernel was registered" InvalidArgumentError),
topologies and device assignments (TopologyProto bytes included), and the values of
`serving_embedding_lookup`, which runs on CPU.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.registry import get_op_def

HERE = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(HERE))
import tpu_cases as cases  # noqa: E402

_RECORDED = json.loads((HERE / "tpu_tf.json").read_text())


@pytest.fixture(scope="module")
def outcomes():
    return dict(cases.run(tf))


def test_every_recorded_case_ran(outcomes):
    assert [label for label, _ in _RECORDED] == list(outcomes)


@pytest.mark.parametrize("label,expected", _RECORDED, ids=[c[0] for c in _RECORDED])
def test_case_matches_tf(outcomes, label, expected):
    assert outcomes[label] == expected


def test_tpu_op_gradients_as_in_tf():
    # CrossReplicaSum's gradient sums the replicas' gradients; TPUReplicatedInput is
    # marked not differentiable; TF registers nothing for the other TPU ops.
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        (g,) = tf.gradients(tf.tpu.cross_replica_sum(x * 3.0), x)
        types = [op.type for op in tf.get_default_graph().get_operations()]
        assert types.count("CrossReplicaSum") == 2
        assert g.shape.as_list() == [2]
    assert get_op_def("TPUReplicatedInput").not_differentiable
    for op_type in (
        "TPUReplicatedOutput",
        "TPUReplicateMetadata",
        "TPUCompilationResult",
        "ConfigureDistributedTPU",
        "ShutdownDistributedTPU",
        "ConfigureTPUEmbedding",
    ):
        d = get_op_def(op_type)
        assert d.grad_fn is None and not d.not_differentiable, op_type


def test_first_op_without_kernels_is_reported_in_graph_order():
    # TF's placer names the first op of the step without any kernel, in graph order,
    # whatever the fetch order.
    with tf.Graph().as_default():
        late = tf.tpu.shutdown_system()
        early_value = tf.tpu.cross_replica_sum(tf.constant(1.0), name="first")
        with tf.control_dependencies([late]):
            out = tf.identity(early_value)
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="ShutdownDistributedTPU"):
                sess.run(out)


def test_serving_lookup_matches_numpy_mean():
    emb = tf.tpu.experimental.embedding
    table = emb.TableConfig(vocabulary_size=6, dim=3, name="t")
    features = {"a": emb.FeatureConfig(table=table), "b": emb.FeatureConfig(table=table)}
    rows = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    with tf.Graph().as_default():
        var = tf.Variable(rows)
        sp = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([5, 1, 2], tf.int64), [3, 2])
        out = emb.serving_embedding_lookup(
            {"a": sp, "b": tf.constant([3, 0])}, None, {table: var}, features
        )
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(out)
    np.testing.assert_allclose(
        got["a"], [(rows[5] + rows[1]) / 2, np.zeros(3), rows[2]], rtol=1e-6
    )
    np.testing.assert_allclose(got["b"], rows[[3, 0]])


def test_topology_reads_its_own_bytes_and_builds_an_assignment():
    t = tf.tpu.experimental.Topology(
        mesh_shape=[1, 1, 1, 2], device_coordinates=[[[0, 0, 0, 0], [0, 0, 0, 1]]]
    )
    again = tf.tpu.experimental.Topology(serialized=t.serialized())
    np.testing.assert_array_equal(again.device_coordinates, t.device_coordinates)
    da = tf.tpu.experimental.DeviceAssignment.build(again, num_replicas=2)
    assert [da.tpu_device(r) for r in range(2)] == ["/task:0/device:TPU:0", "/task:0/device:TPU:1"]
