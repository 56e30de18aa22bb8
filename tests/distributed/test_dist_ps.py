"""Parameter servers across tasks (issue 15 items 5 and 6, over the wire): variables and
partitioned embeddings placed by replica_device_setter on two ps tasks, looked up and
updated from the workers; synchronous replicas, one client per worker (between-graph).
In-process servers on 127.0.0.1; references: TF's recorded rows and NumPy."""

import asyncio
import json
import pathlib

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


async def test_sync_replicas_between_graph_on_two_workers(two_ps_cluster):
    # Each worker's client builds its own graph (between-graph replication); the chief
    # (worker 0) runs the sync op.  Driven step by step: a sync waits in take_grad for
    # both workers' gradients, and a worker's dequeue waits for the sync's tokens.
    cluster, servers = two_ps_cluster
    grads = [np.array([1.0, 2.0], np.float32), np.array([3.0, -4.0], np.float32)]
    lr = 0.25

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
                init = [af.global_variables_initializer(), af.local_variables_initializer()]
                local = af.local_variables_initializer()
            sync = opt.get_chief_queue_runner().enqueue_ops[0]
            tokens = opt.get_init_tokens_op()
        return g, gs, w, opt, train, init if task == 0 else local, sync, tokens

    chief, other = build(0), build(1)
    a = af.Session(servers["worker", 0].target, graph=chief[0])
    b = af.Session(servers["worker", 1].target, graph=other[0])
    try:
        await a.arun(chief[5])
        await a.arun(chief[3].chief_init_op)
        await b.arun(other[5])
        await b.arun(other[3].local_step_init_op)
        await a.arun(chief[7])  # the first step's tokens
        await a.arun(chief[4])
        await b.arun(other[4])
        await a.arun(chief[6])  # step 1: both gradients
        want = -lr * (grads[0] + grads[1]) / 2
        np.testing.assert_allclose(await b.arun(other[2]), want, rtol=1e-6)
        # Their next gradients were tagged with the initial tokens' step 0: both stale.
        await a.arun(chief[4])
        await b.arun(other[4])
        steps = [asyncio.create_task(a.arun(chief[4])), asyncio.create_task(b.arun(other[4]))]
        await asyncio.wait_for(a.arun(chief[6]), 30)  # takes both fresh gradients
        await asyncio.wait_for(asyncio.gather(*steps), 30)  # both got the new tokens
        gs, w = await b.arun([other[1], other[2]])
        assert gs == 2
        np.testing.assert_allclose(w, 2 * want, rtol=1e-6)
    finally:
        a.close()
        b.close()
