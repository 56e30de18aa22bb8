"""ClusterSpec, Server arguments and TF_CONFIG parsing, against TF1's behaviour."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow.distributed.cluster import parse_tf_config
from asyncflow.server import parse_cluster_spec

pytestmark = pytest.mark.timeout(30)


def test_cluster_spec_dense_and_sparse_jobs():
    c = af.train.ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {1: "ps1:2222"}})
    assert c.jobs == ["ps", "worker"]
    assert c.as_dict() == {"ps": {1: "ps1:2222"}, "worker": ["w0:2222", "w1:2222"]}
    assert c.num_tasks("worker") == 2 and c.num_tasks("ps") == 1
    assert c.task_indices("ps") == [1]
    assert c.task_address("worker", 1) == "w1:2222"
    assert c.job_tasks("ps") == [None, "ps1:2222"]
    assert af.train.ClusterSpec(c) == c and c == c.as_dict()
    assert bool(c) and not af.train.ClusterSpec({})


def test_cluster_spec_errors_match_tf():
    c = af.train.ClusterSpec({"worker": ["w0:2222"]})
    with pytest.raises(ValueError, match="No such job in cluster: 'ps'"):
        c.num_tasks("ps")
    with pytest.raises(ValueError, match="No task with index 3 in job 'worker'"):
        c.task_address("worker", 3)
    with pytest.raises(TypeError):
        af.train.ClusterSpec(["w0:2222"])


def test_server_needs_explicit_job_and_task_where_ambiguous():
    c = af.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "c:1"]})
    with pytest.raises(ValueError, match="Must specify an explicit `job_name`"):
        af.train.Server(c, start=False)
    with pytest.raises(ValueError, match="Must specify an explicit `task_index`"):
        af.train.Server(c, job_name="worker", start=False)
    with pytest.raises(ValueError, match="No task with index 5"):
        af.train.Server(c, job_name="worker", task_index=5, start=False)
    with pytest.raises(ValueError, match="protocol"):
        af.train.Server(c, "ps", 0, protocol="rdma", start=False)
    s = af.train.Server(c, job_name="ps", start=False)  # the only ps task
    assert s.server_def.task_index == 0


def test_tf_config_as_kubeflow_sets_it():
    text = (
        '{"cluster": {"chief": ["job-chief-0.ns.svc:2222"], "ps": ["job-ps-0.ns.svc:2222"],'
        ' "worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]},'
        ' "task": {"type": "worker", "index": 1}}'
    )
    cluster, job, index = parse_tf_config(text)
    assert (job, index) == ("worker", 1)
    assert cluster.task_address("worker", 1) == "job-worker-1.ns.svc:2222"
    assert cluster.jobs == ["chief", "ps", "worker"]
    with pytest.raises(ValueError, match="TF_CONFIG"):
        parse_tf_config("not json")


def test_cluster_spec_flag_forms():
    a = parse_cluster_spec("ps|localhost:1;worker|localhost:2,localhost:3")
    b = parse_cluster_spec('{"ps": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}')
    assert a == b and a.num_tasks("worker") == 2
    with pytest.raises(ValueError):
        parse_cluster_spec("ps=localhost:1")


async def test_a_large_frame_buffer_is_reused_only_once_nothing_holds_it():
    from asyncflow.distributed import wire

    conn = wire.Connection(b"secret", server=True, on_frame=lambda *a: None)
    first = conn._body_buffer(1 << 20)
    tensor = np.frombuffer(memoryview(first)[16:], np.float32)  # as decode_tensors makes
    del first
    second = conn._body_buffer(1 << 20)
    assert not np.shares_memory(second, tensor)  # a decoded tensor still reads the first
    del tensor, second
    third = conn._body_buffer(1 << 19)
    assert third.ctypes.data == conn._spare[0].ctypes.data  # free again: reused
