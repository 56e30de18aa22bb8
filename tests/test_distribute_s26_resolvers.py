"""tf.distribute.cluster_resolver, tf.distribute.experimental's collective options,
tf.distribute.RunOptions and tf.distribute.Server, against TF 2.21.

The cases live in fixtures/distribute_resolvers_cases.py; their outcomes under TF 2.21
were recorded by fixtures/record_distribute_resolvers_tf.py into
fixtures/distribute_resolvers_tf.json (TF_CONFIG parsing, Slurm environments, Kubernetes
and GCE with fake clients, TPU addresses, errors without the cloud client libraries).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(HERE))
import distribute_resolvers_cases as cases  # noqa: E402

_RECORDED = json.loads((HERE / "distribute_resolvers_tf.json").read_text())


@pytest.fixture(scope="module")
def outcomes():
    return dict(cases.run(tf))


def test_every_recorded_case_ran(outcomes):
    assert [label for label, _ in _RECORDED] == list(outcomes)


@pytest.mark.parametrize("label,expected", _RECORDED, ids=[c[0] for c in _RECORDED])
def test_case_matches_tf(outcomes, label, expected):
    assert outcomes[label] == expected


def test_environment_restored_after_cases(outcomes):
    assert "SLURM_PROCID" not in os.environ
    assert "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS" not in os.environ


def test_tf_config_resolver_follows_later_changes(monkeypatch):
    r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:1"]}}))
    assert r.cluster_spec().as_dict() == {"worker": ["a:1", "b:1"]}
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}
        ),
    )
    assert (r.task_type, r.task_id, r.master(rpc_layer="grpc")) == ("worker", 1, "grpc://b:1")


def test_resolver_feeds_a_server_and_session(monkeypatch):
    # A TF_CONFIG cluster of one in-process server: the resolver's spec starts it and its
    # master (grpc://, the server's target) runs a step there.
    from asyncflow.distributed.cluster import split_address

    server = tf.distribute.Server.create_local_server()
    try:
        host, port = split_address(server.target.split("://")[-1])
        address = f"{host}:{port}"
        monkeypatch.setenv(
            "TF_CONFIG",
            json.dumps(
                {
                    "cluster": {"worker": [address], "ps": [address]},
                    "task": {"type": "worker", "index": 0},
                    "rpc_layer": "grpc",
                }
            ),
        )
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        assert resolver.master() == f"grpc://{address}"
        with tf.Graph().as_default():
            total = tf.add(tf.constant(2.0), 3.0)
            with tf.Session(resolver.master()) as sess:
                assert sess.run(total) == 5.0
    finally:
        server.stop()
