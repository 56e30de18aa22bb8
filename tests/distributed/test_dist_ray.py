"""asyncflow.distributed.ray on a local Ray: a ps and a worker task as actors; a session
on the worker trains a variable on the ps; the worker's process is killed, Ray restarts
it at the same address, and a new session there finds the ps's state; a killed ps comes
back empty (its variables must be restored, as TF's)."""

import os
import signal

import numpy as np
import pytest
import ray

import asyncflow as af
from asyncflow.distributed import ray as af_ray

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    cluster = af_ray.start_cluster(
        {"ps": 1, "worker": 1}, resources={"ps": {"num_cpus": 0}, "worker": {"num_cpus": 0}}
    )
    yield cluster
    cluster.shutdown()
    ray.shutdown()


def _graph():
    g = af.Graph()
    with g.as_default():
        with af.device("/job:ps/task:0"):
            w = af.Variable([1.0, 2.0], name="w")
        step = w.assign_add([0.5, -1.0])
    return g, w, step


def _kill(cluster, job):
    pid = ray.get(cluster.actors[job, 0].pid.remote())
    os.kill(pid, signal.SIGKILL)
    return pid


def test_tasks_serve_and_a_killed_worker_is_restarted(ray_cluster):
    spec = ray_cluster.cluster_spec
    assert spec.jobs == ["ps", "worker"] and spec.num_tasks("worker") == 1
    assert ray_cluster.target("worker").startswith("grpc://")
    g, w, step = _graph()
    with g.as_default(), af.Session(ray_cluster.target("worker")) as sess:
        sess.run(w.initializer)
        sess.run(step)
        np.testing.assert_allclose(sess.run(w), [1.5, 1.0])
    before = _kill(ray_cluster, "worker")
    ray_cluster.wait_ready("worker", 0)
    assert ray.get(ray_cluster.actors["worker", 0].pid.remote()) != before
    assert ray_cluster.cluster_spec.as_dict() == spec.as_dict()  # same address
    with g.as_default(), af.Session(ray_cluster.target("worker")) as sess:
        sess.run(step)
        np.testing.assert_allclose(sess.run(w), [2.0, 0.0])  # the ps kept its state


def test_a_restarted_ps_comes_back_without_its_variables(ray_cluster):
    g, w, step = _graph()
    with g.as_default(), af.Session(ray_cluster.target("worker")) as sess:
        sess.run(w.initializer)
    _kill(ray_cluster, "ps")
    ray_cluster.wait_ready("ps", 0)
    with g.as_default(), af.Session(ray_cluster.target("worker")) as sess:
        with pytest.raises(af.errors.FailedPreconditionError):
            sess.run(w)
        sess.run(w.initializer)
        np.testing.assert_allclose(sess.run(step), [1.5, 1.0])


def test_tasks_over_tls(ray_cluster, tmp_path, monkeypatch):
    trustme = pytest.importorskip("trustme")
    from asyncflow.distributed import wire

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    paths = {k: str(tmp_path / f"{k}.pem") for k in ("cert", "key", "ca")}
    cert.cert_chain_pems[0].write_to_path(paths["cert"])
    cert.private_key_pem.write_to_path(paths["key"])
    ca.cert_pem.write_to_path(paths["ca"])
    tls = wire.TLSConfig(paths["cert"], paths["key"], paths["ca"])
    cluster = af_ray.start_cluster(
        {"ps": 1, "worker": 1},
        resources={"ps": {"num_cpus": 0}, "worker": {"num_cpus": 0}},
        tls=tls,
        host="127.0.0.1",  # (the name the certificate carries)
    )
    try:
        monkeypatch.setenv("ASYNCFLOW_TLS_CA_FILE", paths["ca"])  # the client's side
        g, w, step = _graph()
        with g.as_default(), af.Session(cluster.target("worker")) as sess:
            sess.run(w.initializer)
            np.testing.assert_allclose(sess.run(step), [1.5, 1.0])
        monkeypatch.delenv("ASYNCFLOW_TLS_CA_FILE")  # a plain client is refused
        monkeypatch.setattr(wire, "HANDSHAKE_TIMEOUT", 1.0)
        with pytest.raises(af.errors.UnavailableError):
            af.Session(
                cluster.target("worker"), config=af.ConfigProto(operation_timeout_in_ms=3000)
            )
    finally:
        cluster.shutdown()
