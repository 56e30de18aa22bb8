"""Between-graph replicated training on a 1-ps 2-worker cluster trains to TF's losses
(issue 15's first target).  The reference is TF 2.21's gRPC runtime running the same
program (tests/fixtures/record_dist_train_tf.py): an MLP under replica_device_setter,
momentum slots on the ps, one client per worker stepping in turn on its own batches."""

import json
import pathlib

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

TF = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "dist_train_tf.json").read_text()
)


def _build(cluster, task):
    d = {k: np.array(v, np.float32) for k, v in TF["inputs"].items() if k not in "xy"}
    g = af.Graph()
    with g.as_default():
        setter = af.train.replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task}"
        )
        with af.device(setter):
            gs = af.train.get_or_create_global_step()
            w1 = af.Variable(d["w1"], name="w1")
            b1 = af.Variable(d["b1"], name="b1")
            w2 = af.Variable(d["w2"], name="w2")
            x = af.placeholder(af.float32, [None, 4], name="x")
            y = af.placeholder(af.float32, [None, 1], name="y")
            h = af.nn.tanh(af.matmul(x, w1) + b1)
            loss = af.reduce_mean(af.square(af.matmul(h, w2) - y))
            train = af.train.MomentumOptimizer(0.1, momentum=0.9).minimize(loss, global_step=gs)
            init = af.global_variables_initializer()
        devices = {v.op.name: v.device for v in af.global_variables()}
    return g, gs, x, y, loss, train, init, [w1, b1, w2], devices


def test_between_graph_training_gives_tfs_losses():
    cluster = cluster_of(ps=1, worker=2)
    servers = [
        af.train.Server(cluster, job, i)
        for job in ("ps", "worker")
        for i in range(cluster.num_tasks(job))
    ]
    try:
        clients = [_build(cluster, t) for t in range(2)]
        assert clients[0][-1] == TF["devices"]  # variables and slots on the ps, as TF
        sessions = [af.Session(servers[1 + t].target, graph=clients[t][0]) for t in range(2)]
        try:
            sessions[0].run(clients[0][6])
            xs = [np.array(a, np.float32) for a in TF["inputs"]["x"]]
            ys = [np.array(a, np.float32) for a in TF["inputs"]["y"]]
            losses = [[], []]
            for r in range(TF["rounds"]):
                for t in range(2):
                    _, _, x, y, loss, train, *_ = clients[t]
                    got, _ = sessions[t].run([loss, train], {x: xs[t][r], y: ys[t][r]})
                    losses[t].append(float(got))
            np.testing.assert_allclose(losses, TF["losses"], rtol=1e-5, atol=1e-6)
            _, gs, *_, variables, _ = clients[1]
            final = sessions[1].run([*variables, gs])  # the other client sees the ps
            for name, got in zip(("w1", "b1", "w2"), final):
                np.testing.assert_allclose(got, TF["final"][name], rtol=1e-5, atol=1e-6)
            assert final[3] == TF["global_step"]
        finally:
            for s in sessions:
                s.close()
    finally:
        for s in servers:
            s.stop()
