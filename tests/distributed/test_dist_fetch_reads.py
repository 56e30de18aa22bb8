"""A variable on another task, fetched beside its update: TF 2.21 sends the value it
read (the global step on a ps task reads 0, 1, 2, 3 over the first four steps, where a
variable in the session's own process reads as the step left it:
tests/test_tf1_fetch_aliasing.py).  Recorded from TF 2.21 with the same cluster."""

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af

pytestmark = pytest.mark.timeout(60)


def test_ps_variable_fetched_beside_its_update_is_the_value_read():
    cluster = cluster_of(ps=1, worker=1)
    ps = af.train.Server(cluster, "ps", 0)
    worker = af.train.Server(cluster, "worker", 0)
    try:
        with af.Graph().as_default():
            setter = af.train.replica_device_setter(
                worker_device="/job:worker/task:0", cluster=cluster
            )
            with af.device(setter):
                w = af.get_variable("w", [3, 1], initializer=af.constant_initializer(0.5))
                gs = af.train.get_or_create_global_step()
                x = af.constant([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
                loss = af.reduce_sum(af.square(af.matmul(x, w) - 1.0))
                train = af.train.AdagradOptimizer(0.1).minimize(loss, global_step=gs)
            assert (w.device, gs.device) == ("/job:ps/task:0", "/job:ps/task:0")
            got = []
            with af.Session(worker.target) as sess:
                sess.run(af.global_variables_initializer())
                for _ in range(4):
                    got.append(sess.run([train, loss, gs])[1:])
        np.testing.assert_allclose(
            [g[0] for g in got], [4.0625, 2.121572, 1.364834, 0.978336], rtol=1e-6
        )
        assert [int(g[1]) for g in got] == [0, 1, 2, 3]
    finally:
        worker.stop()
        ps.stop()
