"""Sessions on a cluster: `Session(server.target)` across in-process tasks on 127.0.0.1.

Results are checked against NumPy; state lives on the tasks (a second session sees it);
errors keep their TF classes across the wire."""

import asyncio

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def local_server():
    s = af.train.Server.create_local_server()
    yield s
    s.stop()


def test_local_server_target_runs_steps(local_server):
    assert local_server.target.startswith("grpc://localhost:")
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 3])
        w = af.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
        y = af.nn.relu(af.matmul(x, w) - 10.0)
        s = af.constant([b"ab", b"", b"\xff"])
        feed = np.random.RandomState(0).randn(5, 3).astype(np.float32)
        with af.Session(local_server.target) as sess:
            names = [d.name for d in sess.list_devices()]
            assert names == ["/job:localhost/replica:0/task:0/device:CPU:0"]
            got_y, got_s = sess.run([y, s], {x: feed})
            np.testing.assert_allclose(got_y, np.maximum(feed @ w_np() - 10.0, 0), rtol=1e-6)
            assert list(got_s) == [b"ab", b"", b"\xff"]
            assert sess.run(af.constant(7, af.int64)) == 7


def w_np():
    return np.arange(12, dtype=np.float32).reshape(3, 4)


def test_state_lives_on_the_task_and_is_shared_by_sessions(local_server):
    with af.Graph().as_default():
        v = af.Variable(np.zeros(4, np.float32), name="shared_v")
        inc = v.assign_add(np.ones(4, np.float32))
        with af.Session(local_server.target) as s1:
            s1.run(v.initializer)
            s1.run(inc)
            s1.run(inc)
        with af.Session(local_server.target) as s2:  # a new session, the same task
            np.testing.assert_array_equal(s2.run(v), [2, 2, 2, 2])
        af.Session.reset(local_server.target)
        with af.Session(local_server.target) as s3:
            with pytest.raises(af.errors.FailedPreconditionError):
                s3.run(v)


def test_errors_keep_their_class_and_message(local_server):
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None])
        y = af.reshape(x, [3])
        with af.Session(local_server.target) as sess:
            with pytest.raises(af.errors.InvalidArgumentError, match="Reshape"):
                sess.run(y, {x: [1.0, 2.0]})
            q = af.FIFOQueue(2, af.float32)
            with pytest.raises(af.errors.DeadlineExceededError):
                sess.run(q.dequeue(), options=af.RunOptions(timeout_in_ms=50))


def test_ps_and_workers_place_and_update_like_numpy(ps_worker_cluster):
    cluster, servers = ps_worker_cluster
    with af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            w = af.Variable(np.ones((3, 2), np.float32), name="w")
        x = af.placeholder(af.float32, [None, 3])
        with af.device("/job:worker/task:1"):
            h = af.matmul(x, w)
        loss = af.reduce_sum(h * h)  # on the session's own task (worker 0)
        grad = af.gradients(loss, w)[0]
        step = w.assign_sub(0.01 * grad)
        feed = np.arange(6, dtype=np.float32).reshape(2, 3)
        with af.Session(servers["worker", 0].target) as sess:
            sess.run(w.initializer)
            ref = np.ones((3, 2), np.float32)
            for _ in range(3):
                got_loss, _ = sess.run([loss, step], {x: feed})
                g = 2 * feed.T @ (feed @ ref)
                np.testing.assert_allclose(got_loss, np.sum((feed @ ref) ** 2), rtol=1e-5)
                ref = ref - 0.01 * g
            np.testing.assert_allclose(sess.run(w), ref, rtol=1e-5)
        # A second client, on the other worker, sees the same PS state.
        with af.Session(servers["worker", 1].target) as other:
            np.testing.assert_allclose(other.run(w), ref, rtol=1e-5)


def test_unconstrained_ops_go_to_the_sessions_task(ps_worker_cluster):
    cluster, servers = ps_worker_cluster
    with af.Graph().as_default():
        a = af.constant(2.0, name="a")
        b = af.identity(a * 3.0, name="b")
        meta = af.RunMetadata()
        with af.Session(servers["worker", 1].target) as sess:
            assert sess.run(b) == 6.0
            placed = {op.name: d.name for op, d in sess._placer.assignment.items()}
            assert placed["b"] == "/job:worker/replica:0/task:1/device:CPU:0"
            assert placed["a"] == "/job:worker/replica:0/task:1/device:CPU:0"
            del meta


def test_device_filters_keep_a_session_off_other_tasks():
    # The ps task is never started: a session filtered to its own worker works.
    cluster = cluster_of(ps=1, worker=1)
    server = af.train.Server(cluster, "worker", 0)
    try:
        config = af.ConfigProto(device_filters=["/job:worker/task:0"])
        with af.Graph().as_default():
            c = af.constant(5.0) + 1.0
            with af.Session(server.target, config=config) as sess:
                assert [d.name for d in sess.list_devices()] == [
                    "/job:worker/replica:0/task:0/device:CPU:0"
                ]
                assert sess.run(c) == 6.0
            with pytest.raises(af.errors.UnavailableError, match="ps/replica:0/task:0"):
                af.Session(server.target, config=af.ConfigProto(operation_timeout_in_ms=300))
    finally:
        server.stop()


def test_cross_task_loop_and_cond(ps_worker_cluster):
    cluster, servers = ps_worker_cluster
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [])
        with af.device("/job:ps/task:0"):
            big = x * 10.0
        r = af.cond(x > 0, lambda: big + 1.0, lambda: big - 1.0)
        with af.device("/job:worker/task:1"):
            step = af.constant(2.0)
        i, acc = af.while_loop(
            lambda i, acc: i < 4, lambda i, acc: (i + 1, acc * step), [af.constant(0), x]
        )
        with af.Session(servers["worker", 0].target) as sess:
            assert sess.run(r, {x: 2.0}) == 21.0
            assert sess.run(r, {x: -2.0}) == -21.0
            assert sess.run(acc, {x: 3.0}) == 48.0


async def test_arun_on_the_callers_loop(local_server):
    with af.Graph().as_default():
        x = af.placeholder(af.int32, [])
        y = x * 2
        async with af.Session(local_server.target) as sess:
            got = await asyncio.gather(*(sess.arun(y, {x: i}) for i in range(20)))
            assert got == [2 * i for i in range(20)]


def test_close_deregisters_the_sessions_graphs(local_server):
    service = local_server._service
    with af.Graph().as_default():
        y = af.constant(1.0) + 2.0
        sess = af.Session(local_server.target)
        sess.run(y)
        before = len(service.worker._graphs)
        sess.close()  # shuts the socket down at once, from this thread
    # The task learns it on its loop, before it can finish the probe's handshake.
    with af.Session(local_server.target) as probe:
        probe.run(af.constant(0.0))  # (another graph: its own registration)
        assert len(service.worker._graphs) == before  # ours was dropped, probe's added


def test_tensors_of_every_kind_cross_tasks(ps_worker_cluster):
    cluster, servers = ps_worker_cluster
    values = np.array([1.0, np.pi, -2.5e-3, 3e38], np.float32)
    with af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            s = af.constant([b"x", b"", b"yz\x00"])
            e = af.zeros([0, 3], af.int64)
            f = af.constant(values)
            b = af.constant([True, False])
        with af.device("/job:worker/task:1"):
            outs = [af.identity(t) for t in (s, e, f, b)]
        with af.Session(servers["worker", 0].target) as sess:
            got = sess.run(outs)
            assert list(got[0]) == [b"x", b"", b"yz\x00"]
            assert got[1].shape == (0, 3) and got[1].dtype == np.int64
            np.testing.assert_array_equal(got[2], values)
            np.testing.assert_array_equal(got[3], [True, False])
        lossy = af.ConfigProto(graph_options=af.GraphOptions(enable_bfloat16_sendrecv=True))
        with af.Session(servers["worker", 0].target, config=lossy) as sess:
            truncated = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
            np.testing.assert_array_equal(sess.run(outs[2]), truncated)  # 16 bits crossed


def test_partial_runs_say_they_are_in_process_only(local_server):
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [])
        with af.Session(local_server.target) as sess:
            with pytest.raises(af.errors.UnimplementedError, match="in-process sessions only"):
                sess.partial_run_setup([a + 1.0], [a])
            assert sess.run(a + 1.0, {a: 1.0}) == 2.0
