"""tf.train.ClusterDef / JobDef / ServerDef: TF's messages and field numbers
(bytes TF 2.21 wrote parse here and equal ours), ClusterSpec.as_cluster_def and
ClusterSpec(ClusterDef) as TF (tests/fixtures/sdca_cluster_tf.json, recorded by
record_sdca_cluster_tf.py), and a Server built from a ServerDef."""

import json
import pathlib

import pytest
from google.protobuf import text_format

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

REC = json.loads(
    (
        pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "sdca_cluster_tf.json"
    ).read_text()
)
CLUSTER = {"worker": {1: "w1:2222", 3: "w3:2222"}, "ps": ["ps0:2222", "ps1:2222"]}


def test_as_cluster_def_is_tfs():
    cd = af.train.ClusterSpec(CLUSTER).as_cluster_def()
    assert isinstance(cd, af.train.ClusterDef)
    assert text_format.MessageToString(cd) == REC["cluster_def_text"]
    theirs = af.train.ClusterDef.FromString(bytes.fromhex(REC["cluster_def_hex"]))
    assert theirs == cd


def test_cluster_spec_from_cluster_def():
    cd = af.train.ClusterDef.FromString(bytes.fromhex(REC["cluster_def_hex"]))
    got = af.train.ClusterSpec(cd).as_dict()
    want = {k: (v if isinstance(v, list) else {int(i): a for i, a in v.items()})
            for k, v in REC["cluster_from_def"].items()}  # fmt: skip
    assert got == want
    assert af.train.ClusterSpec(cd) == af.train.ClusterSpec(CLUSTER)


def test_server_def_bytes_from_tf_parse_here():
    sd = af.train.ServerDef.FromString(bytes.fromhex(REC["server_def_hex"]))
    assert (sd.job_name, sd.task_index, sd.protocol, sd.port) == ("worker", 3, "grpc", 7)
    assert af.train.ClusterSpec(sd.cluster) == af.train.ClusterSpec(CLUSTER)
    job = af.train.JobDef(name="x", tasks={0: "localhost:1"})
    assert job.tasks[0] == "localhost:1"
    assert set(REC["names"]) == {"ClusterDef", "JobDef", "ServerDef"}


def test_server_from_server_def_and_its_server_def():
    spec = af.train.ClusterSpec({"local": ["localhost:0"]})
    sd = af.train.ServerDef(cluster=spec.as_cluster_def(), job_name="local", task_index=0)
    server = af.train.Server(sd, start=False)
    got = server.server_def
    assert isinstance(got, af.train.ServerDef)
    assert (got.job_name, got.task_index, got.protocol) == ("local", 0, "grpc")
    assert af.train.ClusterSpec(got.cluster) == spec
    with pytest.raises(ValueError, match="protocol"):
        af.train.Server(af.train.ServerDef(cluster=sd.cluster, protocol="udp"), start=False)
