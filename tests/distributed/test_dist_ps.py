"""Parameter servers across tasks (issue 15 items 5 and 6, over the wire): variables and
partitioned embeddings placed by replica_device_setter on two ps tasks, looked up and
updated from the workers; synchronous replicas, one client per worker (between-graph).
In-process servers on 127.0.0.1; references: TF's recorded rows and NumPy."""

import json
import pathlib
import threading

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

TF = json.loads((pathlib.Path(__file__).parents[1] / "fixtures" / "ps_tf.json").read_text())


@pytest.fixture(scope="module")
def two_ps_cluster():
    cluster = cluster_of(ps=2, worker=2)
    servers = {
        (job, i): af.train.Server(cluster, job, i)
        for job in ("ps", "worker")
        for i in range(cluster.num_tasks(job))
    }
    yield cluster, servers
    for s in servers.values():
        s.stop()


def _embedding_graph(cluster, task):
    g = af.Graph()
    with g.as_default():
        setter = af.train.replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task}"
        )
        with af.device(setter):
            full = np.array(TF["embedding"]["full"], np.float32)
            emb = af.get_variable(
                "emb", initializer=af.constant(full), partitioner=af.fixed_size_partitioner(3)
            )
            ids = af.constant(TF["embedding"]["ids"], af.int64)
            rows = af.nn.embedding_lookup(emb, ids, partition_strategy="div")
            coef = np.array(TF["embedding"]["coef"], np.float32)
            train = af.train.GradientDescentOptimizer(0.5).minimize(af.reduce_sum(rows * coef))
    return g, emb, rows, train


def test_div_partitioned_embedding_from_a_worker_gives_tfs_rows(two_ps_cluster):
    cluster, servers = two_ps_cluster
    g, emb, rows, train = _embedding_graph(cluster, 0)
    assert [p.device for p in emb] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    want = TF["embedding"]["div"]
    with g.as_default(), af.Session(servers["worker", 0].target) as sess:
        sess.run(af.global_variables_initializer())
        np.testing.assert_allclose(sess.run(rows), want["rows"], rtol=1e-6)
        sess.run(train)  # sparse updates, applied on the ps tasks
    after = np.concatenate([np.array(s, np.float32) for s in want["after_sgd"]])
    # A second client, on the other worker, sees the updated shards on the ps tasks.
    g1, emb1, _, _ = _embedding_graph(cluster, 1)
    with g1.as_default(), af.Session(servers["worker", 1].target) as other:
        np.testing.assert_allclose(other.run(emb1.as_tensor()), after, rtol=1e-6)


def test_sync_replicas_between_graph_on_two_workers(two_ps_cluster):
    cluster, servers = two_ps_cluster
    grads = [np.array([1.0, 2.0], np.float32), np.array([3.0, -4.0], np.float32)]
    steps, lr = 3, 0.25

    def build(task):
        g = af.Graph()
        with g.as_default():
            setter = af.train.replica_device_setter(
                cluster=cluster, worker_device=f"/job:worker/task:{task}"
            )
            with af.device(setter):
                gs = af.train.get_or_create_global_step()
                w = af.Variable(np.zeros(2, np.float32), name="sync_w")
                opt = af.train.SyncReplicasOptimizer(af.train.GradientDescentOptimizer(lr), 2, 2)
                train = opt.minimize(af.reduce_sum(w * grads[task]), global_step=gs)
        return g, gs, w, opt, train

    chief, other = built = build(0), build(1)
    coord = af.train.Coordinator()
    sessions = [af.Session(servers["worker", t].target, graph=b[0]) for t, b in enumerate(built)]
    try:
        with chief[0].as_default():
            sessions[0].run(af.variables_initializer([chief[1], chief[2]]))
            sessions[0].run(af.local_variables_initializer())
        with other[0].as_default():
            sessions[1].run(af.local_variables_initializer())
        hooks = [b[3].make_session_run_hook(is_chief=(t == 0)) for t, b in enumerate(built)]
        for b, s, h in zip(built, sessions, hooks):
            with b[0].as_default():
                h.begin()
                h.after_create_session(s, coord)
        errors = []

        def replica(s, train):
            try:
                for _ in range(steps):
                    s.run(train)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [
            threading.Thread(target=replica, args=(s, b[4])) for s, b in zip(sessions, built)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and not any(t.is_alive() for t in threads)
        assert sessions[1].run(other[1]) >= steps - 1
        coord.request_stop()
        gs_val, w_val = sessions[1].run([other[1], other[2]])
        np.testing.assert_allclose(w_val, -lr * gs_val * (grads[0] + grads[1]) / 2, rtol=1e-6)
        assert gs_val in (steps - 1, steps)
    finally:
        for s in sessions:
            s.close()
