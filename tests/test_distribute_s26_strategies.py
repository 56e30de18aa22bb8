"""CentralStorageStrategy, the collective ops, MultiWorkerMirroredStrategy and
ParameterServerStrategy in TF1 graph mode, and eval metrics across replicas.

Values, op types, shapes and messages marked "TF 2.21" were recorded from TensorFlow
2.21 (`tf.compat.v1`, graph mode, two CPUs from `ConfigProto(device_count={"CPU": 2})`)
running the same program.  The multi-worker runs use an in-process cluster (servers on
127.0.0.1, one thread per task); their expected values are the single-process sums TF
computes for the same replicas (recorded from TF 2.21's MirroredStrategy on as many
local devices).
"""

from __future__ import annotations

import json
import re
import socket
import threading

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

CPU2 = af.ConfigProto(device_count={"CPU": 2})
DEV0 = "/replica:0/task:0/device:CPU:0"
DEV1 = "/replica:0/task:0/device:CPU:1"
raw = af.raw_ops


@pytest.fixture(autouse=True)
def fresh_graph():
    with af.Graph().as_default() as g:
        yield g


@pytest.fixture(autouse=True)
def cpu_workers(monkeypatch):
    """Strategies' default devices are this process's CPU, as on the machine TF's values
    were recorded on (with GPUs, TF's and asyncflow's defaults are every GPU)."""
    from asyncflow.distribute import central_storage_strategy, multi_worker_strategies

    cpu = lambda: (DEV0,)  # noqa: E731
    monkeypatch.setattr(central_storage_strategy, "_default_devices", cpu)
    monkeypatch.setattr(multi_worker_strategies, "_default_devices", cpu)


# -- CentralStorageStrategy -------------------------------------------------------------


def _css_step(strategy, x, v, w):
    def step(xs):
        rid = af.distribute.get_replica_context().replica_id_in_sync_group
        part = xs * af.cast(rid + 1, af.float32)
        loss = af.reduce_sum(af.matmul(part, w)) + af.reduce_sum(v * v)
        return af.train.GradientDescentOptimizer(0.1).minimize(loss), loss

    return strategy.extended.call_for_each_replica(step, args=(x,))


def test_central_storage_trains_one_variable_with_summed_gradients():
    s = af.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    e = s.extended
    # TF 2.21: worker_devices a list, parameter_devices ('/device:CPU:0',)
    assert (s.num_replicas_in_sync, e.worker_devices, e.parameter_devices) == (
        2,
        [DEV0, DEV1],
        ("/device:CPU:0",),
    )
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        w = af.get_variable("w", initializer=af.constant([[0.5], [-1.0]]))
        # TF 2.21: AggregatingVariable v:0 /device:CPU:0 (and w alike)
        assert (type(v).__name__, v.name, v.device) == (
            "AggregatingVariable",
            "v:0",
            "/device:CPU:0",
        )
        assert (type(w).__name__, w.name, w.device) == (
            "AggregatingVariable",
            "w:0",
            "/device:CPU:0",
        )
        assert [x.name for x in af.global_variables()] == ["v:0", "w:0"]
        assert [x.name for x in af.trainable_variables()] == ["v:0", "w:0"]
        x = af.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
        train, loss = _css_step(s, x, v, w)
        assert (type(train).__name__, type(loss).__name__) == ("Operation", "PerReplica")
        total = s.reduce(af.distribute.ReduceOp.SUM, loss, axis=None)
        mean = s.reduce("MEAN", loss, axis=None)
        grp = s.group(train)
        ident = s.run(lambda: af.identity(v))
        assert [t.device for t in s.experimental_local_results(ident)] == [DEV0, DEV1]
    # TF 2.21's three steps
    want = [
        (-26.0, -13.0, [0.6, 1.2], [[-4.3], [-7.0]]),
        (-622.80005, -311.40002, [0.36, 0.72], [[-9.1], [-13.0]]),
        (-1215.504, -607.752, [0.216, 0.432], [[-13.900001], [-19.0]]),
    ]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        for t_want, m_want, v_want, w_want in want:
            _, t, m = sess.run([grp, total, mean])
            np.testing.assert_allclose([t, m], [t_want, m_want], rtol=1e-6)
            np.testing.assert_allclose(sess.run(v), v_want, rtol=1e-6)
            np.testing.assert_allclose(sess.run(w), w_want, rtol=1e-6)
        a, b = sess.run(s.experimental_local_results(ident))
        np.testing.assert_allclose([a, b], [[0.216, 0.432]] * 2, rtol=1e-6)


@pytest.mark.parametrize(
    "aggregation,want", [("SUM", 19.0), ("MEAN", 14.5), ("ONLY_FIRST_REPLICA", 13.0)]
)
def test_central_storage_assign_in_replica_aggregates(aggregation, want):
    # TF 2.21: replicas add 3 and 6 to 10.0
    s = af.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    with s.scope():
        a = af.Variable(10.0, aggregation=getattr(af.VariableAggregation, aggregation))

        def upd():
            rid = af.distribute.get_replica_context().replica_id_in_sync_group
            return a.assign_add(af.cast(rid + 1, af.float32) * 3.0)

        up = s.extended.call_for_each_replica(upd)
    with af.Session(config=CPU2) as sess:
        sess.run(a.initializer)
        assert sess.run(s.experimental_local_results(up)) == (want,)
        assert sess.run(a) == want


def test_central_storage_errors_and_defaults():
    s = af.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    with s.scope():
        a = af.Variable(10.0)
        with pytest.raises(ValueError, match="You must specify an aggregation method to update a"):
            s.extended.call_for_each_replica(lambda: a.assign_add(1.0))
        c = af.Variable(1.0, name="c")
        cross = c.assign(5.0)
    with pytest.raises(RuntimeError, match=r'Need to be inside "with strategy.scope\(\)" for'):
        s.extended.colocate_vars_with(a)
    with af.Session(config=CPU2) as sess:
        sess.run(c.initializer)
        assert sess.run(cross) == 5.0 and sess.run(c) == 5.0
    # TF 2.21: one compute device -> it is the parameter device, and variables are plain
    one = af.distribute.experimental.CentralStorageStrategy()
    assert one.extended.parameter_devices == (DEV0,) and one.num_replicas_in_sync == 1
    pd = af.distribute.experimental.CentralStorageStrategy(["/cpu:0"], parameter_device="/cpu:1")
    assert pd.extended.parameter_devices == ("/cpu:1",)
    with pd.scope():
        v = af.Variable(1.0)
    assert (v.device, type(v).__name__) == ("/device:CPU:1", "ResourceVariable")


# -- collective ops in one session (TF 2.21) ----------------------------------------------


def _two(build):
    outs = []
    for d, val in ((0, [1, 2, 3]), (1, [10, 20, 30])):
        with af.device(f"/cpu:{d}"):
            outs.append(build(af.constant(val, af.float32)))
    return outs


@pytest.mark.parametrize(
    "merge,final,want",
    [
        ("Add", "Id", [11.0, 22.0, 33.0]),
        ("Add", "Div", [5.5, 11.0, 16.5]),
        ("Max", "Id", [10.0, 20.0, 30.0]),
        ("Min", "Id", [1.0, 2.0, 3.0]),
        ("Mul", "Id", [10.0, 40.0, 90.0]),
    ],
)
def test_collective_reduce_in_one_session(merge, final, want):
    outs = _two(
        lambda x: raw.CollectiveReduce(
            input=x, group_size=2, group_key=1, instance_key=5, merge_op=merge,
            final_op=final, subdiv_offsets=[0],
        )
    )  # fmt: skip
    outs_v2 = _two(
        lambda x: raw.CollectiveReduceV2(
            input=x, group_size=2, group_key=1, instance_key=6, ordering_token=[],
            merge_op=merge, final_op=final,
        )
    )  # fmt: skip
    assert [(o.op.type, o.shape.as_list()) for o in outs] == [("CollectiveReduce", [3])] * 2
    with af.Session(config=CPU2) as sess:
        for _ in range(2):  # the second execution pairs with the second
            a, b, c, d = sess.run(outs + outs_v2)
            for got in (a, b, c, d):
                np.testing.assert_array_equal(got, want)


def test_collective_reduce_int_mean_truncates():
    outs = []
    for d, val in ((0, [1, 2, 3]), (1, [10, 20, 30])):
        with af.device(f"/cpu:{d}"):
            x = af.constant(val, af.int32)
            outs.append(
                raw.CollectiveReduce(
                    input=x, group_size=2, group_key=1, instance_key=5, merge_op="Add",
                    final_op="Div", subdiv_offsets=[0],
                )
            )  # fmt: skip
    with af.Session(config=CPU2) as sess:
        a, b = sess.run(outs)
    assert a.tolist() == b.tolist() == [5, 11, 16]  # TF 2.21


def test_collective_gather_and_broadcast_in_one_session():
    gathered, gathered_v2 = [], []
    for d, val in ((0, [[1, 2]]), (1, [[3, 4]])):
        with af.device(f"/cpu:{d}"):
            x = af.constant(val, af.float32)
            gathered.append(
                raw.CollectiveGather(
                    input=x, group_size=2, group_key=2, instance_key=7, shape=[None, 2]
                )
            )
            gathered_v2.append(
                raw.CollectiveGatherV2(
                    input=x, group_size=2, group_key=2, instance_key=8, ordering_token=[]
                )
            )
    with af.device("/cpu:0"):
        x = af.constant([[1.5, 2.5]])
        send = raw.CollectiveBcastSend(
            input=x, group_size=2, group_key=3, instance_key=9, shape=[1, 2]
        )
        send_v2 = raw.CollectiveBcastSendV2(input=x, group_size=2, group_key=3, instance_key=10)
    with af.device("/cpu:1"):
        recv = raw.CollectiveBcastRecv(
            group_size=2, group_key=3, instance_key=9, shape=[1, 2], T=af.float32
        )
        recv_v2 = raw.CollectiveBcastRecvV2(
            group_size=2, group_key=3, instance_key=10, shape=[1, 2], T=af.float32
        )
    # TF 2.21's static shapes
    assert [g.shape.as_list() for g in gathered] == [[2, 2], [2, 2]]
    assert [g.shape.as_list() for g in gathered_v2] == [[None, 2], [None, 2]]
    assert (send.shape.as_list(), recv_v2.shape.as_list()) == ([1, 2], [1, 2])
    with af.Session(config=CPU2) as sess:
        g0, g1, h0, h1, s, r, s2, r2 = sess.run(
            gathered + gathered_v2 + [send, recv, send_v2, recv_v2]
        )
    for g in (g0, g1, h0, h1):
        assert g.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    for b in (s, r, s2, r2):
        assert b.tolist() == [[1.5, 2.5]]


def test_collective_errors():
    x = af.constant([1.0, 2.0])
    bad_merge = re.escape(
        "Attr 'merge_op' of 'CollectiveReduce' Op passed string 'Sub' not in: "
        '"Min", "Max", "Mul", "Add".'
    )
    with pytest.raises(ValueError, match=bad_merge):
        raw.CollectiveReduce(
            input=x, group_size=1, group_key=1, instance_key=1, merge_op="Sub",
            final_op="Id", subdiv_offsets=[0],
        )  # fmt: skip
    with pytest.raises(TypeError, match="has DataType string not in list of allowed values"):
        raw.CollectiveReduce(
            input=af.constant(["a"]), group_size=1, group_key=1, instance_key=1,
            merge_op="Add", final_op="Id", subdiv_offsets=[0],
        )  # fmt: skip
    one = raw.CollectiveReduce(
        input=x, group_size=1, group_key=4, instance_key=1, merge_op="Add", final_op="Div",
        subdiv_offsets=[0],
    )  # fmt: skip
    zero = raw.CollectiveReduceV2(
        input=x, group_size=0, group_key=4, instance_key=1, ordering_token=[],
        merge_op="Add", final_op="Div",
    )  # fmt: skip
    unknown = raw.CollectiveBcastRecv(
        group_size=2, group_key=3, instance_key=1, shape=[None], T=af.float32
    )
    lonely = raw.CollectiveReduce(
        input=x, group_size=2, group_key=9, instance_key=1, merge_op="Add", final_op="Id",
        subdiv_offsets=[0], timeout_seconds=0.05,
    )  # fmt: skip
    with af.Session() as sess:
        assert sess.run(one).tolist() == [1.0, 2.0]  # TF 2.21: a group of one
        with pytest.raises(af.errors.InvalidArgumentError, match="group_size must be positive"):
            sess.run(zero)
        unknown_shape = r"Shape \[\?\] is not fully defined"
        with pytest.raises(af.errors.InvalidArgumentError, match=unknown_shape):
            sess.run(unknown)
        with pytest.raises(af.errors.DeadlineExceededError, match="Collective has timed out"):
            sess.run(lonely)


# -- an in-process cluster ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster3(monkeypatch):
    """Three worker servers on 127.0.0.1 (stopped at the end)."""
    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "distribute-s26")
    spec = af.train.ClusterSpec({"worker": [f"127.0.0.1:{_free_port()}" for _ in range(3)]})
    servers = [af.train.Server(spec, "worker", i) for i in range(3)]
    yield spec, servers
    for s in servers:
        s.stop()


def _in_threads(n, fn) -> dict:
    """fn(i) on n threads at once (the tasks' clients); their results, or the error."""
    results, errors = {}, []

    def target(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a task did not finish"
    if errors:
        raise errors[0]
    return results


def test_collectives_across_tasks_each_in_its_own_session(cluster3):
    _, servers = cluster3

    def task(i):
        with af.Graph().as_default():
            with af.device(f"/job:worker/task:{i}/device:CPU:0"):
                x = af.constant([1.0, 2.0]) * float(i + 1)
                mean = raw.CollectiveReduce(
                    input=x, group_size=3, group_key=1, instance_key=1, merge_op="Add",
                    final_op="Div", subdiv_offsets=[0],
                )  # fmt: skip
                gathered = raw.CollectiveGather(
                    input=af.reshape(x, [1, 2]), group_size=3, group_key=1, instance_key=2,
                    shape=[1, 2],
                )  # fmt: skip
                if i == 1:
                    b = raw.CollectiveBcastSend(
                        input=x, group_size=3, group_key=1, instance_key=3, shape=[2]
                    )
                else:
                    b = raw.CollectiveBcastRecv(
                        group_size=3, group_key=1, instance_key=3, shape=[2], T=af.float32
                    )
            with af.Session(servers[i].target) as sess:
                return [sess.run([mean, gathered, b]) for _ in range(2)]

    results = _in_threads(3, task)
    for i in range(3):
        for mean, gathered, b in results[i]:
            assert mean.tolist() == [2.0, 4.0]
            assert gathered.tolist() == [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]  # by task
            assert b.tolist() == [2.0, 4.0]


def test_a_value_pushed_from_another_task_reaches_a_stand_in_gpu(make_cluster, monkeypatch):
    # The ps's variables sit on its (stand-in) GPU; a gradient computed on the worker's
    # CPU arrives over the wire in host memory and is copied onto that GPU.
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    _, servers = make_cluster({"worker": 1, "ps": 1})
    with af.device("/job:ps/task:0"):
        u = af.Variable(3.0, name="u")
    with af.device("/job:worker/task:0/device:CPU:0"):
        g = af.constant(2.0) * 1.0
    with af.device("/job:ps/task:0"):
        update = af.train.GradientDescentOptimizer(0.1).apply_gradients([(af.identity(g), u)])
    with af.Session(servers[("worker", 0)].target) as sess:
        sess.run(u.initializer)
        sess.run(update)
        np.testing.assert_allclose(sess.run(u), 2.8, rtol=1e-6)


# -- MultiWorkerMirroredStrategy and ParameterServerStrategy ------------------------------


@pytest.fixture
def make_cluster(monkeypatch):
    """make_cluster({"worker": 2, "ps": 1}) -> (ClusterSpec, {(job, i): server})."""
    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "distribute-s26")
    servers: dict = {}

    def make(jobs: dict):
        spec = af.train.ClusterSpec(
            {job: [f"127.0.0.1:{_free_port()}" for _ in range(n)] for job, n in jobs.items()}
        )
        for job, n in jobs.items():
            for i in range(n):
                servers[(job, i)] = af.train.Server(spec, job, i)
        return spec, servers

    yield make
    for s in servers.values():
        s.stop()


def _resolver(spec, i):
    return af.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type="worker", task_id=i
    )


def test_multi_worker_mirrored_trains_as_one_process_would(make_cluster):
    spec, servers = make_cluster({"worker": 2})

    def task(i):
        s = af.distribute.experimental.MultiWorkerMirroredStrategy(
            cluster_resolver=_resolver(spec, i)
        )
        with af.Graph().as_default():
            af.set_random_seed(i)  # each worker draws its own r: worker 0's is broadcast
            with s.scope():
                v = af.Variable([1.0, 2.0], name="v")
                w = af.get_variable("w", initializer=af.constant([[0.5], [-1.0]]))
                r = af.get_variable("r", [3], initializer=af.random_uniform_initializer())
                x = af.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
                train, loss = _css_step(s, x, v, w)  # replica i's part is x * (i + 1)
                total = s.reduce("SUM", loss, axis=None)
            ops = sorted({op.type for op in af.get_default_graph().get_operations()})
            config = s.update_config_proto(af.ConfigProto())
            with af.Session(servers[("worker", i)].target, config=config) as sess:
                sess.run(af.global_variables_initializer())
                steps = []
                for _ in range(3):
                    _, t = sess.run([train, total])
                    steps.append((t, sess.run(v).tolist(), sess.run(w).ravel().tolist()))
                return s, config, ops, sess.run(r), steps

    results = _in_threads(2, task)
    # TF 2.21's MirroredStrategy over two devices computes these sums (the
    # CentralStorageStrategy test's recorded values).
    want = [
        (-26.0, [0.6, 1.2], [-4.3, -7.0]),
        (-622.80005, [0.36, 0.72], [-9.1, -13.0]),
        (-1215.504, [0.216, 0.432], [-13.900001, -19.0]),
    ]
    for i, (s, config, ops, _, steps) in results.items():
        assert s.num_replicas_in_sync == 2
        assert s.extended.worker_devices == (f"/job:worker/replica:0/task:{i}/device:CPU:0",)
        assert s.extended.experimental_between_graph
        assert s.extended.should_checkpoint == (i == 0)
        # TF 2.21's session settings for worker i
        assert list(config.device_filters) == [f"/job:worker/task:{i}"]
        assert config.experimental.collective_group_leader == "/job:worker/replica:0/task:0"
        assert ("CollectiveBcastSend" if i == 0 else "CollectiveBcastRecv") in ops
        assert "CollectiveReduce" in ops
        for (t, v, w), (t_want, v_want, w_want) in zip(steps, want, strict=True):
            np.testing.assert_allclose(t, t_want, rtol=1e-6)
            np.testing.assert_allclose(v, v_want, rtol=1e-6)
            np.testing.assert_allclose(w, w_want, rtol=1e-6)
    np.testing.assert_array_equal(results[0][3], results[1][3])  # broadcast from worker 0


def test_multi_worker_mirrored_all_reduce_and_replica_ids(make_cluster):
    spec, servers = make_cluster({"worker": 3})

    def task(i):
        s = af.distribute.experimental.MultiWorkerMirroredStrategy(
            cluster_resolver=_resolver(spec, i)
        )
        with af.Graph().as_default():
            with s.scope():

                def fn():
                    ctx = af.distribute.get_replica_context()
                    rid = ctx.replica_id_in_sync_group
                    value = af.cast(rid + 1, af.float32) * af.constant([1.0, 10.0])
                    return rid, ctx.all_reduce("sum", value), ctx.all_reduce("mean", value)

                rid, total, mean = s.run(fn)
            with af.Session(servers[("worker", i)].target) as sess:
                return sess.run([rid, total, mean])

    results = _in_threads(3, task)
    for i, (rid, total, mean) in results.items():
        assert rid == i
        assert total.tolist() == [6.0, 60.0] and mean.tolist() == [2.0, 20.0]


def test_multi_worker_mirrored_without_cluster_is_local(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    s = af.distribute.experimental.MultiWorkerMirroredStrategy()
    # TF 2.21 (no GPU): one local replica on the CPU
    assert s.num_replicas_in_sync == 1
    assert s.extended.worker_devices == (DEV0,)
    assert s.extended.experimental_between_graph and s.extended.should_checkpoint
    with s.scope():
        v = af.Variable(1.0, name="v")
        r = s.extended.call_for_each_replica(
            lambda: af.distribute.get_replica_context().all_reduce("sum", af.identity(v) * 2)
        )
    assert type(v).__name__ == "MirroredVariable"
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(s.experimental_local_results(r)) == (2.0,)  # TF 2.21


def test_parameter_server_strategy_asynchronous_updates(make_cluster):
    spec, servers = make_cluster({"worker": 2, "ps": 2})
    initialized = threading.Event()

    def task(i):
        s = af.distribute.experimental.ParameterServerStrategy(cluster_resolver=_resolver(spec, i))
        with af.Graph().as_default():
            with s.scope():
                v = af.Variable([1.0, 2.0], name="v")
                u = af.Variable(3.0, name="u")
                c = af.constant([1.0, 10.0]) * float(i + 1)

                def step():
                    loss = af.reduce_sum(v * c) + u * float(i + 1)
                    return af.train.GradientDescentOptimizer(0.1).minimize(loss)

                train = s.extended.call_for_each_replica(step)
            config = s.update_config_proto(af.ConfigProto())
            with af.Session(servers[("worker", i)].target) as sess:
                if s.extended.experimental_should_init:
                    sess.run(af.global_variables_initializer())
                    initialized.set()
                assert initialized.wait(20)
                for _ in range(3):
                    sess.run(train)
            return s, config, (v.device, u.device, type(v).__name__)

    results = _in_threads(2, task)
    for i, (s, config, placed) in results.items():
        # TF 2.21's properties and placement (variables round-robin over the ps tasks)
        assert s.num_replicas_in_sync == 1
        assert s.extended.worker_devices == [f"/job:worker/replica:0/task:{i}/device:CPU:0"]
        assert s.extended.parameter_devices == ("/job:ps/task:0", "/job:ps/task:1")
        assert placed == ("/job:ps/task:0", "/job:ps/task:1", "ResourceVariable")
        assert s.extended.experimental_should_init == s.extended.should_checkpoint == (i == 0)
        assert list(config.device_filters) == [f"/job:worker/task:{i}", "/job:ps"]
    with af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            v = af.Variable([0.0, 0.0], name="v")
        with af.device("/job:ps/task:1"):
            u = af.Variable(0.0, name="u")
        with af.Session(servers[("worker", 0)].target) as sess:
            v_now, u_now = sess.run([v, u])
    # Every worker's three steps applied once each (in whatever order).
    np.testing.assert_allclose(v_now, [1.0 - 0.9, 2.0 - 9.0], rtol=1e-6)
    np.testing.assert_allclose(u_now, 3.0 - 0.9, rtol=1e-6)


def test_parameter_server_strategy_errors_and_local(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    s = af.distribute.experimental.ParameterServerStrategy()
    # TF 2.21 without a cluster
    assert s.num_replicas_in_sync == 1 and s.extended.worker_devices == [DEV0]
    assert s.extended.parameter_devices == (DEV0,)
    assert s.update_config_proto(af.ConfigProto()).isolate_session_state
    with s.scope():
        v = af.Variable(1.0)
    assert (type(v).__name__, v.device) == ("ResourceVariable", DEV0)
    spec = af.train.ClusterSpec({"worker": ["a:1", "b:1"]})
    with pytest.raises(ValueError, match="No `ps` job"):
        af.distribute.experimental.ParameterServerStrategy(cluster_resolver=_resolver(spec, 0))
    no_task = af.distribute.cluster_resolver.SimpleClusterResolver(spec)
    with pytest.raises(ValueError, match="you must also specify `task_type` and `task_id`"):
        af.distribute.experimental.MultiWorkerMirroredStrategy(cluster_resolver=no_task)


# -- eval metrics across replicas ------------------------------------------------------------

_LABELS = np.array([[1, 0, 1, 1, 0, 0], [0, 1, 1, 0, 0, 1]], np.int64)
_PREDS = np.array([[0.9, 0.2, 0.4, 0.7, 0.6, 0.1], [0.3, 0.8, 0.55, 0.45, 0.2, 0.95]], np.float32)
_CLS_L = np.array([[0, 2, 1, 1], [2, 2, 0, 1]], np.int64)
_CLS_P = np.array([[0, 1, 1, 2], [2, 0, 0, 1]], np.int64)

# TF 2.21, MirroredStrategy over two CPUs, replica i fed row i, two updates: every value
# is one tensor over the replicas' summed metric variables.
_TF_METRICS = {
    "accuracy": 0.83333,
    "auc": 0.91667,
    "auc_careful": 0.90278,
    "auc_pr": 0.9248,
    "fn": 2.0,
    "mae": 0.29583,
    "mean": 0.5125,
    "mean_iou": 0.47222,
    "mean_tensor": [[0.6, 0.5, 0.475], [0.575, 0.4, 0.525]],
    "mpca": 0.66667,
    "mse": 0.12062,
    "pct_below": 0.5,
    "prec_th": [0.75, 0.83333, 1.0],
    "precision": 0.83333,
    "recall": 0.83333,
    "rmse": 0.34731,
    "sens_at_spec": 1.0,
    "spec_at_sens": 1.0,
    "tp": 10.0,
    "tp_th": [12.0, 10.0, 4.0],
}


def _metrics(names, lab, p, cl, cp):
    m = af.metrics
    b, pb = af.cast(lab, af.bool), af.greater(p, 0.5)
    lf = af.cast(lab, af.float32)
    builders = {
        "accuracy": lambda: m.accuracy(lab, af.cast(pb, af.int64)),
        "mean": lambda: m.mean(p),
        "mean_tensor": lambda: m.mean_tensor(af.reshape(p, [2, 3])),
        "precision": lambda: m.precision(b, pb),
        "recall": lambda: m.recall(b, pb),
        "tp": lambda: m.true_positives(b, pb),
        "fn": lambda: m.false_negatives(b, pb),
        "auc": lambda: m.auc(lab, p),
        "auc_pr": lambda: m.auc(lab, p, curve="PR", num_thresholds=20),
        "auc_careful": lambda: m.auc(
            lab, p, summation_method="careful_interpolation", num_thresholds=10
        ),
        "prec_th": lambda: m.precision_at_thresholds(lab, p, [0.3, 0.5, 0.8]),
        "tp_th": lambda: m.true_positives_at_thresholds(lab, p, [0.3, 0.5, 0.8]),
        "sens_at_spec": lambda: m.sensitivity_at_specificity(lab, p, 0.6, num_thresholds=20),
        "spec_at_sens": lambda: m.specificity_at_sensitivity(lab, p, 0.7, num_thresholds=20),
        "mse": lambda: m.mean_squared_error(lf, p),
        "rmse": lambda: m.root_mean_squared_error(lf, p),
        "mae": lambda: m.mean_absolute_error(lf, p),
        "mean_iou": lambda: m.mean_iou(cl, cp, 3),
        "mpca": lambda: m.mean_per_class_accuracy(cl, cp, 3),
        "pct_below": lambda: m.percentage_below(p, 0.5),
    }
    return {name: builders[name]() for name in names}


_GROUPS = [sorted(_TF_METRICS)[i::4] for i in range(4)]  # (four smaller graphs)


@pytest.mark.parametrize("names", _GROUPS, ids=[g[0] for g in _GROUPS])
def test_metrics_in_replicas_sum_their_variables(names):
    s = af.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with s.scope():
        data = [af.constant(x) for x in (_LABELS, _PREDS, _CLS_L, _CLS_P)]

        def replica(*parts):
            rid = af.distribute.get_replica_context().replica_id_in_sync_group
            return _metrics(names, *(af.gather(x, rid) for x in parts))

        out = s.extended.call_for_each_replica(replica, args=tuple(data))
    updates = [s.group(out[k][1]) for k in sorted(out)]
    with af.Session(config=CPU2) as sess:
        sess.run(af.local_variables_initializer())
        sess.run(updates)
        sess.run(updates)
        for name in names:
            value = out[name][0]
            assert len(s.experimental_local_results(value)) == 1, name  # one tensor
            np.testing.assert_allclose(sess.run(value), _TF_METRICS[name], atol=6e-6, err_msg=name)


def _eval_model_fn(features, labels, mode):
    w = af.get_variable("w", [2, 1], initializer=af.constant_initializer(0.3))
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    loss = af.losses.mean_squared_error(labels, pred)
    big, guess = af.greater(labels, 0.9), af.greater(pred, 0.45)
    score = af.sigmoid(pred * 4 - 2)
    m = af.metrics
    metrics = {
        "mae": m.mean_absolute_error(labels, pred),
        "auc": m.auc(af.cast(big, af.int64), score),
        "precision": m.precision(big, guess),
        "recall": m.recall(big, guess),
        "accuracy": m.accuracy(big, guess),
        "rmse": m.root_mean_squared_error(labels, pred),
        "tp": m.true_positives(big, guess),
        "fp_th": m.false_positives_at_thresholds(
            af.cast(big, af.int64), af.sigmoid(pred), [0.55, 0.6, 0.65]
        ),
    }
    return af.estimator.EstimatorSpec(
        mode, loss=loss, eval_metric_ops=metrics, train_op=af.no_op()
    )


def _eval_input_fn():
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 10
    y = (x[:, :1] * 2 - x[:, 1:] + 0.5).astype(np.float32)
    return af.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(2)


def test_estimator_evaluates_any_metric_under_a_strategy(tmp_path):
    config = af.estimator.RunConfig(
        eval_distribute=af.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
        session_config=CPU2,
    )
    est = af.estimator.Estimator(_eval_model_fn, model_dir=str(tmp_path), config=config)
    got = est.evaluate(_eval_input_fn)
    # TF 2.15.1 (tensorflow_estimator), with and without eval_distribute alike
    want = {
        "accuracy": 0.875,
        "auc": 1.0,
        "fp_th": [1.0, 0.0, 0.0],
        "global_step": 0.0,
        "loss": 0.4561,
        "mae": 0.65,
        "precision": 1.0,
        "recall": 0.8,
        "rmse": 0.675352,
        "tp": 4.0,
    }
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)


# -- tf.estimator with MultiWorkerMirroredStrategy on a cluster ---------------------------


def _train_input_fn(input_context):
    x = np.arange(16, dtype=np.float32).reshape(8, 2) / 10
    y = (x[:, :1] * 2 - x[:, 1:] + 0.5).astype(np.float32)
    ds = af.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(2)
    return ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)


def _train_model_fn(features, labels, mode):
    w = af.get_variable("w", [2, 1], initializer=af.zeros_initializer())
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    loss = af.losses.mean_squared_error(labels, pred)
    train_op = af.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=af.train.get_global_step()
    )
    return af.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_estimator_trains_between_graph_with_multi_worker_mirrored(tmp_path, monkeypatch):
    from asyncflow.estimator import std_server

    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "distribute-s26")
    started, lock = [], threading.Lock()
    real = std_server.start_std_server

    def recording(config):  # (each task's estimator starts its server: stopped below)
        server = real(config)
        with lock:
            started.append(server)
        return server

    monkeypatch.setattr(std_server, "start_std_server", recording)
    cluster = {"chief": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
    estimators = {}
    for job in ("chief", "worker"):
        monkeypatch.setenv(
            "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}})
        )
        strategy = af.distribute.experimental.MultiWorkerMirroredStrategy()
        config = af.estimator.RunConfig(train_distribute=strategy)
        estimators[job] = af.estimator.Estimator(
            _train_model_fn, model_dir=str(tmp_path), config=config
        )
    monkeypatch.delenv("TF_CONFIG")
    jobs = sorted(estimators)
    try:
        _in_threads(2, lambda i: estimators[jobs[i]].train(_train_input_fn, steps=3))
    finally:
        for server in started:
            if server is not None:
                server.stop()
    chief = estimators["chief"]
    # TF 2.15.1's MirroredStrategy over two CPUs (tests/test_distribute_estimator.py):
    # the same sums, each worker's batch one replica's.
    np.testing.assert_allclose(chief.get_variable_value("w").ravel(), [0.33716002, 0.37700969])
    np.testing.assert_allclose(chief.get_variable_value("b"), [0.39849657])
    assert chief.get_variable_value("global_step") == 3
    assert sorted(chief.get_variable_names()) == ["b", "global_step", "w"]


def test_estimator_trains_asynchronously_with_parameter_server_strategy(tmp_path, monkeypatch):
    from asyncflow.estimator import std_server
    from asyncflow.train import monitored_session

    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "distribute-s26")
    cluster = {job: [f"127.0.0.1:{_free_port()}"] for job in ("chief", "worker", "ps")}
    started, lock = [af.train.Server(af.train.ClusterSpec(cluster), "ps", 0)], threading.Lock()
    real = std_server.start_std_server

    def recording(config):
        server = real(config)
        with lock:
            started.append(server)
        return server

    monkeypatch.setattr(std_server, "start_std_server", recording)
    # The worker waits for the chief's initialization; it looks again after this long
    # (TF's 30 s would outlast the test).
    monkeypatch.setattr(monitored_session.WorkerSessionCreator, "recovery_wait_secs", 0.05)
    pipelines = {}

    def input_fn(input_context):
        pipelines[input_context.input_pipeline_id] = input_context.num_input_pipelines
        x = np.ones((4, 2), np.float32)
        ds = af.data.Dataset.from_tensor_slices(({"x": x}, np.ones((4, 1), np.float32)))
        return ds.repeat().batch(2)

    def model_fn(features, labels, mode):
        w = af.get_variable("w", [2, 1], initializer=af.zeros_initializer())
        loss = af.reduce_sum(af.matmul(features["x"], w) * af.constant([[1.0], [2.0]]))
        train_op = af.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=af.train.get_global_step()
        )
        return af.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimators = {}
    for job in ("chief", "worker"):
        monkeypatch.setenv(
            "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}})
        )
        config = af.estimator.RunConfig(
            train_distribute=af.distribute.experimental.ParameterServerStrategy()
        )
        estimators[job] = af.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
    monkeypatch.delenv("TF_CONFIG")
    jobs = sorted(estimators)
    try:
        _in_threads(2, lambda i: estimators[jobs[i]].train(input_fn, max_steps=6))
        # Both workers updated the ps's variables, each step once: read them there.
        with af.Graph().as_default():
            with af.device("/job:ps/task:0"):
                w = af.get_variable("w", [2, 1])
                step = af.get_variable("global_step", [], af.int64)
            with af.Session(started[0].target) as sess:
                w_now, step_now = sess.run([w, step])
    finally:
        for server in started:
            if server is not None:
                server.stop()
    assert pipelines == {0: 2, 1: 2}  # each worker its own input pipeline, as TF's
    assert step_now >= 6  # (a worker may take one more step past max_steps, as in TF)
    np.testing.assert_allclose(w_now.ravel(), [-0.3 * step_now] * 2, rtol=1e-5)
    assert sorted(estimators["chief"].get_variable_names()) == ["global_step", "w"]
