"""Traced steps on a cluster (issue 15, with RunOptions.FULL_TRACE): every task of the
step times its kernels and the client's RunMetadata holds each task's devices' stats
side by side, as TF's master merges its workers' StepStats.  In-process servers on
127.0.0.1; the reference is the graph itself (which op ran on which task) and NumPy."""

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af
from asyncflow.protos.step_stats_pb2 import StepStats

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cluster():
    spec = cluster_of(ps=1, worker=1)
    servers = [af.train.Server(spec, job, 0) for job in ("ps", "worker")]
    yield servers
    for s in servers:
        s.stop()


def test_full_trace_merges_the_step_stats_of_every_task(cluster):
    _, worker = cluster
    x_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    with af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            w = af.Variable(np.ones((3, 4), np.float32), name="w")
            scaled = af.multiply(w, 2.0, name="scaled")
        x = af.placeholder(af.float32, [None, 3], name="x")
        with af.device("/job:worker/task:0"):
            y = af.matmul(x, scaled, name="y")
            out = af.nn.relu(y, name="out")
        with af.Session(worker.target) as sess:
            sess.run(w.initializer)
            plain = sess.run(out, {x: x_np})
            md = af.RunMetadata()
            opts = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)
            traced = sess.run(out, {x: x_np}, options=opts, run_metadata=md)
            again = af.RunMetadata()  # a second traced step reuses the traced graphs
            sess.run(out, {x: x_np}, options=opts, run_metadata=again)
            untraced = af.RunMetadata()  # no trace asked: nothing filled
            sess.run(out, {x: x_np}, run_metadata=untraced)
    np.testing.assert_allclose(traced, np.maximum(x_np @ (2 * np.ones((3, 4))), 0))
    np.testing.assert_array_equal(traced, plain)
    assert isinstance(md.step_stats, StepStats)
    by_device = {d.device: {n.node_name for n in d.node_stats} for d in md.step_stats.dev_stats}
    ps = "/job:ps/replica:0/task:0/device:CPU:0"
    wk = "/job:worker/replica:0/task:0/device:CPU:0"
    assert set(by_device) == {ps, wk}
    assert "scaled" in by_device[ps] and "y" in by_device[wk] and "out" in by_device[wk]
    assert any(n.startswith("_send") for n in by_device[ps])
    assert any(n.startswith("_recv") for n in by_device[wk])
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            assert n.all_start_micros > 1_500_000_000_000_000  # epoch microseconds
            assert n.all_end_rel_nanos >= n.op_end_rel_nanos >= 0
    timed = [n.node_name for d in md.step_stats.dev_stats for n in d.node_stats]
    assert [c.name for c in md.cost_graph.node] == timed
    assert [c.id for c in md.cost_graph.node] == list(range(len(timed)))
    assert {d.device for d in again.step_stats.dev_stats} == {ps, wk}
    assert len(untraced.step_stats.dev_stats) == 0
