"""The newer collective ops (CollectiveAllToAllV2/V3, CollectiveReduceV3 and its
communicator, CollectiveReduceScatterV2, CollectiveAssignGroupV2), the NCCL ops on the
stand-in GPUs, and members that stay in step when an execution gives up.

Outcomes marked "TF 2.21" come from fixtures/collective_s28_tf.json, recorded by
fixtures/record_collective_s28_tf.py running the cases of fixtures/collective_s28_cases.py
(tf.compat.v1 graphs on four CPUs of one session).  Every collective has a timeout: a
member that never meets its group fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import nccl_ops

pytestmark = pytest.mark.timeout(30)

raw = af.raw_ops
CPU2 = af.ConfigProto(device_count={"CPU": 2})


def _reduce(x, timeout=3.0):
    return raw.CollectiveReduce(
        input=x, group_size=2, group_key=1, instance_key=1, merge_op="Add", final_op="Id",
        subdiv_offsets=[0], timeout_seconds=timeout,
    )  # fmt: skip


# -- members stay in step when an execution gives up --------------------------------------


def test_a_step_aborted_before_one_members_collective_leaves_the_next_step_paired():
    # cpu:1's member starts and waits; cpu:0's never starts (its input waits on an empty
    # queue) and the step is aborted by its deadline.  As in TF 2.21 (the step_deadline
    # case of test_collective_abort.py) the session's later collectives fail; a fresh
    # session's executions pair (cpu:1's aborted execution did not happen).
    with af.Graph().as_default():
        with af.device("/cpu:0"):
            q = af.FIFOQueue(2, af.float32, shapes=[[2]])
            a = _reduce(q.dequeue())
            put = q.enqueue(af.constant([1.0, 2.0]))
        with af.device("/cpu:1"):
            b = _reduce(af.constant([10.0, 20.0]))
        with af.Session(config=CPU2) as sess:
            with pytest.raises(af.errors.DeadlineExceededError):
                sess.run([a, b], options=af.RunOptions(timeout_in_ms=300))
            sess.run(put)
            with pytest.raises(af.errors.CancelledError, match="Collective ops is aborted"):
                sess.run([a, b])
        with af.Session(config=CPU2) as sess:
            for _ in range(2):  # and the one after
                sess.run(put)
                for got in sess.run([a, b]):
                    assert got.tolist() == [11.0, 22.0]


def test_a_member_that_timed_out_gives_its_execution_back():
    with af.Graph().as_default():
        with af.device("/cpu:0"):
            a = _reduce(af.constant([1.0, 2.0]))
        with af.device("/cpu:1"):
            b = _reduce(af.constant([10.0, 20.0]), timeout=0.05)
        with af.Session(config=CPU2) as sess:
            with pytest.raises(af.errors.DeadlineExceededError, match="Collective has timed"):
                sess.run(b)  # alone: its group never completes
        with af.Session(config=CPU2) as sess:  # (TF 2.21: that session's are spoiled)
            for got in sess.run([a, b]):
                assert got.tolist() == [11.0, 22.0]


# -- the cases TF 2.21 ran (fixtures/collective_s28_cases.py) ------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "fixtures"))
import collective_s28_cases as cases  # noqa: E402

with open(os.path.join(_HERE, "fixtures", "collective_s28_tf.json")) as _f:
    TF = json.load(_f)


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_case_as_tf(name):
    assert name in TF, "re-record the fixture"
    assert json.loads(json.dumps(cases.run_case(af, name))) == TF[name]


# -- NCCL on the stand-in GPUs ------------------------------------------------------------


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with af.Graph().as_default() as g:
        yield g


def _on_gpus(values, dtype=af.float32):
    out = []
    for i, v in enumerate(values):
        with af.device(f"/gpu:{i}"):
            out.append(af.constant(v, dtype))
    return out


@pytest.mark.parametrize(
    "fn,want",
    [
        (nccl_ops.all_sum, [11.0, -18.0, 33.0]),
        (nccl_ops.all_prod, [10.0, -40.0, 90.0]),
        (nccl_ops.all_min, [1.0, -20.0, 3.0]),
        (nccl_ops.all_max, [10.0, 2.0, 30.0]),
    ],
)
def test_nccl_all_reduce_on_two_gpus(two_gpus, fn, want):
    xs = _on_gpus([[1.0, 2.0, 3.0], [10.0, -20.0, 30.0]])
    outs = fn(xs)
    assert [o.op.type for o in outs] == ["NcclAllReduce"] * 2
    assert [o.device for o in outs] == [x.device for x in xs]
    assert outs[0].op.get_attr("shared_name") == outs[1].op.get_attr("shared_name")
    with af.Session() as sess:
        for _ in range(2):  # each step's nodes meet each other
            for got in sess.run(outs):
                assert got.tolist() == want


def test_nccl_all_sum_ints_and_its_gradient(two_gpus):
    a, b = _on_gpus([[1, 2], [3, 4]], af.int64)
    s0, s1 = nccl_ops.all_sum([a, b])
    x, y = _on_gpus([[1.0, 2.0], [3.0, 4.0]])
    u, v = nccl_ops.all_sum([x, y])
    # each replica's gradient in its device's scope, as TF needs (and a strategy does)
    with af.device("/gpu:0"):
        (gx,) = af.gradients(af.reduce_sum(u * af.constant([1.0, 10.0])), [x])
    with af.device("/gpu:1"):
        (gy,) = af.gradients(af.reduce_sum(v * 3.0), [y])
    assert gx.op.type == "NcclAllReduce"
    assert gx.op.get_attr("shared_name") == u.op.get_attr("shared_name") + b"_grad"
    with af.Session() as sess:
        r0, r1, dx, dy = sess.run([s0, s1, gx, gy])
    assert r0.tolist() == r1.tolist() == [4, 6] and r0.dtype == np.int64
    assert dx.tolist() == dy.tolist() == [4.0, 13.0]  # the two devices' gradients summed


def test_nccl_gradients_of_other_reductions_and_without_devices(two_gpus):
    x, y = _on_gpus([[1.0], [2.0]])
    m0, _ = nccl_ops.all_max([x, y])
    with pytest.raises(LookupError, match='except for reduction="sum"'):
        af.gradients(m0, [x])
    with af.device(None):
        bare = af.constant([1.0])
    with pytest.raises(ValueError, match="Device assignment for tensor=.* required for nccl"):
        nccl_ops.all_sum([bare])
    with pytest.raises(ValueError, match="Must pass >0 tensors to all reduce operations"):
        nccl_ops.all_sum([])


def test_nccl_reduce_and_broadcast_with_their_gradients(two_gpus):
    x, y = _on_gpus([[1.0, 2.0], [3.0, 5.0]])
    with af.device("/gpu:1"):
        total = nccl_ops.reduce_sum([x, y])
    assert total.op.type == "NcclReduce" and total.device.endswith("GPU:1")
    with af.device("/gpu:0"):
        with pytest.raises(ValueError, match="One input tensor must be assigned to current"):
            nccl_ops.reduce_sum([y])
    gx, gy = af.gradients(af.reduce_sum(total * total), [x, y], colocate_gradients_with_ops=True)
    assert gx.op.type == "NcclBroadcast"
    sent = nccl_ops.broadcast(x)
    with af.device("/gpu:1"):
        seen = sent * 2.0
    with af.device("/gpu:0"):
        mine = sent * 3.0
    with af.device("/gpu:0"):
        (gb,) = af.gradients(af.reduce_sum(seen) + af.reduce_sum(mine), [x])
    assert gb.op.type == "NcclReduce"
    with af.Session() as sess:
        t, dx, dy, s, g = sess.run([total, gx, gy, seen, gb])
    assert t.tolist() == [4.0, 7.0]
    assert dx.tolist() == dy.tolist() == [8.0, 14.0]
    assert s.tolist() == [2.0, 4.0]
    assert g.tolist() == [5.0, 5.0]


def test_nccl_step_aborted_midway_leaves_the_next_step_paired(two_gpus):
    x, y = _on_gpus([[1.0], [2.0]])
    with af.device("/cpu:0"):
        q = af.FIFOQueue(2, af.float32, shapes=[[1]])
        late = q.dequeue()
        put = q.enqueue(af.constant([0.5]))
    with af.device("/gpu:0"):
        x = x + late
    outs = nccl_ops.all_sum([x, y])
    with af.Session() as sess:
        with pytest.raises(af.errors.DeadlineExceededError):
            sess.run(outs, options=af.RunOptions(timeout_in_ms=300))
        sess.run(put)
        assert [o.tolist() for o in sess.run(outs)] == [[3.5], [3.5]]


def _scaled(x):
    ctx = af.distribute.get_replica_context()
    return x * af.cast(ctx.replica_id_in_sync_group + 1, af.float32)


def test_mirrored_strategy_with_nccl_all_reduce_on_two_gpus(two_gpus):
    s = af.distribute.MirroredStrategy(cross_device_ops=af.distribute.NcclAllReduce())
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        opt = af.train.GradientDescentOptimizer(0.1)
        train = s.run(
            lambda x: opt.minimize(af.reduce_sum(v * _scaled(x))),
            args=(af.constant([1.0, 3.0]),),
        )
        per_replica = s.run(lambda: _scaled(af.constant([2.0, 4.0])))
    total = s.reduce(af.distribute.ReduceOp.SUM, per_replica, axis=None)
    mean = s.extended.reduce_to(af.distribute.ReduceOp.MEAN, per_replica, v)
    ops = {o.type for o in af.get_default_graph().get_operations()}
    assert "NcclAllReduce" in ops  # the gradients' all-reduce, one node per GPU
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(train)
        for part in sess.run(v.values):  # the two-CPU numbers TF gives
            np.testing.assert_allclose(part, [0.7, 1.0999999])
        assert sess.run(total).tolist() == [6.0, 12.0]  # to the host: reduced on one device
        for part in sess.run(mean.values):
            assert part.tolist() == [3.0, 6.0]


def test_reduce_scatter_and_all_to_all_on_two_gpus(two_gpus):
    # TF 2.21 reduce-scatters with NCCL only (on CPUs: the fixture's InternalError):
    # the reduction's i-th slice of the first dimension goes to the i-th member.
    scattered, exchanged = [], []
    for d, xs in enumerate(
        _on_gpus([[[1.0], [2.0], [3.0], [4.0]], [[10.0], [20.0], [30.0], [40.0]]])
    ):
        with af.device(f"/gpu:{d}"):
            scattered.append(
                raw.CollectiveReduceScatterV2(
                    input=xs, group_size=2, group_key=71, instance_key=1, ordering_token=[],
                    merge_op="Add", final_op="Div", timeout_seconds=5.0,
                )
            )  # fmt: skip
            comm = raw.CollectiveInitializeCommunicator(group_key=72, rank=1 - d, group_size=2)
            exchanged.append(
                raw.CollectiveAllToAllV3(
                    input=xs[:2], communicator=comm, group_assignment=af.zeros([0, 0], af.int32),
                    timeout_seconds=5.0,
                )
            )  # fmt: skip
    assert scattered[0].shape.as_list() == [None, 1]
    with af.Session() as sess:
        s0, s1, e0, e1 = sess.run(scattered + exchanged)
    assert (s0.tolist(), s1.tolist()) == ([[5.5], [11.0]], [[16.5], [22.0]])
    # ranks from the communicators: gpu:1 is rank 0
    assert (e1.tolist(), e0.tolist()) == ([[10.0], [1.0]], [[20.0], [2.0]])


# -- across tasks: a member that gave up withdraws its part from the leader ---------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster3(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "collective-s28")
    spec = af.train.ClusterSpec({"worker": [f"127.0.0.1:{_free_port()}" for _ in range(3)]})
    servers = [af.train.Server(spec, "worker", i) for i in range(3)]
    yield servers
    for s in servers:
        s.stop()


def _task_graph(i):
    with af.device(f"/job:worker/task:{i}/device:CPU:0"):
        x = af.placeholder(af.float32, [2])
        mean = raw.CollectiveReduceV2(
            input=x, group_size=3, group_key=5, instance_key=1, ordering_token=[],
            merge_op="Add", final_op="Div", timeout_seconds=0.3 if i == 1 else 5.0,
        )  # fmt: skip
    return x, mean


def test_a_member_on_another_task_that_gave_up_withdraws_its_part(cluster3):
    # worker:1 runs its member alone (worker:0 leads): it times out, and its part, which
    # went to the leader, is withdrawn.  Before, the leader kept that stale part (100s)
    # for the next group and worker:1's next execution ran one ahead of the others.
    graphs = {}
    for i in range(3):
        with af.Graph().as_default() as g:
            graphs[i] = (g, *_task_graph(i))
    sessions = {i: af.Session(cluster3[i].target, graph=graphs[i][0]) for i in range(3)}
    try:
        _, x1, mean1 = graphs[1]
        with pytest.raises(af.errors.DeadlineExceededError, match="Collective has timed out"):
            sessions[1].run(mean1, {x1: [100.0, 100.0]})

        def task(i):
            _, x, mean = graphs[i]
            return sessions[i].run(mean, {x: [1.0 * (i + 1), 2.0 * (i + 1)]})

        results = _in_threads(3, task)
    finally:
        for s in sessions.values():
            s.close()
    for i in range(3):
        assert results[i].tolist() == [2.0, 4.0]


def _in_threads(n, fn) -> dict:
    results, failures = {}, []

    def target(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - re-raised below
            failures.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "a task did not finish"
    if failures:
        raise failures[0]
    return results


def test_build_time_errors_and_static_shapes_as_tf():
    # TF 2.21's messages and shapes for the same calls
    with af.Graph().as_default():
        x = af.constant([1.0, 2.0])
        with pytest.raises(ValueError, match=re.escape(
            "Attr 'reduction' of 'NcclAllReduce' Op passed string 'avg' not in: "
            '"min", "max", "prod", "sum".'
        )):  # fmt: skip
            raw.NcclAllReduce(input=x, reduction="avg", num_devices=2, shared_name="a")
        comm = raw.CollectiveInitializeCommunicator(group_key=1, rank=0, group_size=1)
        assert (comm.dtype, comm.shape.as_list()) == (af.resource, [])
        with pytest.raises(ValueError, match=re.escape(
            "Attr 'reduction' of 'CollectiveReduceV3' Op passed string 'Sub' not in: "
            '"Min", "Max", "Mul", "Add".'
        )):  # fmt: skip
            raw.CollectiveReduceV3(
                input=x, communicator=comm, group_assignment=af.zeros([0, 0], af.int32),
                reduction="Sub",
            )  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(
            "Attr 'final_op' of 'CollectiveReduceScatterV2' Op passed string 'Mean' not in: "
            '"Id", "Div".'
        )):  # fmt: skip
            raw.CollectiveReduceScatterV2(
                input=x, group_size=1, group_key=1, instance_key=1, ordering_token=[],
                merge_op="Add", final_op="Mean",
            )  # fmt: skip
        assert raw.NcclReduce(input=[x, x], reduction="sum").shape.as_list() == [2]
        p = af.placeholder(af.float32, [None, 3])
        assert raw.NcclBroadcast(input=p, shape=[None, 3]).shape.as_list() == [None, 3]
        # (TF names the parameter 'input' and keeps the op def's order of the types)
        with pytest.raises(TypeError, match="has DataType string not in list of allowed"):
            raw.CollectiveAllToAllV2(
                input=af.constant(["a"]), group_size=1, group_key=1, instance_key=1,
                ordering_token=[],
            )  # fmt: skip
