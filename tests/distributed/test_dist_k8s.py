"""examples/k8s/tfjob.yaml: a Kubeflow TFJob whose pods need nothing but the TF_CONFIG the
training operator sets.  Checked here: the manifest's shape (what the operator requires),
and its two commands run with the TF_CONFIG the operator would give each pod (on
127.0.0.1 instead of the pods' DNS names): the ps serves its task, a worker finds its
own."""

import argparse
import json
import pathlib
import subprocess
import sys

import pytest
import yaml
from conftest import free_port

pytestmark = pytest.mark.timeout(60)

ROOT = pathlib.Path(__file__).parents[2]
MANIFEST = yaml.safe_load((ROOT / "examples" / "k8s" / "tfjob.yaml").read_text())


def _tf_config(cluster, job, index):
    # As the training operator writes it (lower-case job names, "environment": "cloud").
    return json.dumps({"cluster": cluster, "task": {"type": job, "index": index},
                       "environment": "cloud"})  # fmt: skip


def test_manifest_is_a_tfjob_of_one_ps_and_two_workers():
    assert MANIFEST["apiVersion"] == "kubeflow.org/v1" and MANIFEST["kind"] == "TFJob"
    specs = MANIFEST["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"PS": 1, "Worker": 2}
    for spec in specs.values():
        assert spec["restartPolicy"] == "OnFailure"
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"  # the operator finds the port here
        assert container["ports"][0] == {"name": "tfjob-port", "containerPort": 2222}
        env = {e["name"]: e["value"] for e in container["env"]}
        mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert env["ASYNCFLOW_CLUSTER_SECRET_FILE"].startswith(mount["cluster-secret"])


def _command(role):
    (container,) = MANIFEST["spec"]["tfReplicaSpecs"][role]["template"]["spec"]["containers"]
    cmd = list(container["command"])
    assert cmd[0] == "python"
    cmd[0] = sys.executable
    return [c.replace("/app/examples", str(ROOT / "examples")) for c in cmd]


def test_ps_command_serves_the_task_tf_config_names(tmp_path):
    cluster = {"ps": [f"localhost:{free_port()}"], "worker": ["localhost:1", "localhost:2"]}
    secret = tmp_path / "secret"
    secret.write_text("k8s-secret")
    env = {"TF_CONFIG": _tf_config(cluster, "ps", 0), "ASYNCFLOW_CLUSTER_SECRET_FILE": str(secret),
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    proc = subprocess.Popen(_command("PS"), env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("asyncflow server /job:ps/replica:0/task:0 listening on port ")
        assert line.split()[-1] == cluster["ps"][0].split(":")[1]
        proc.terminate()  # Kubernetes stops a pod with SIGTERM: the task drains, exits 0
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()


def test_worker_command_finds_its_task_in_tf_config(monkeypatch):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import distributed_train
    finally:
        sys.path.remove(str(ROOT / "examples"))
    cmd = _command("Worker")
    assert cmd[1].endswith("examples/distributed_train.py") and "--job_name=worker" in cmd
    cluster = {"ps": ["asyncflow-distributed-train-ps-0.default.svc:2222"],
               "worker": [f"asyncflow-distributed-train-worker-{i}.default.svc:2222"
                          for i in range(2)]}  # fmt: skip
    monkeypatch.setenv("TF_CONFIG", _tf_config(cluster, "worker", 1))
    args = argparse.Namespace(cluster="", task_index=0)
    spec, index = distributed_train.worker_task(args)
    assert index == 1 and spec.as_dict() == cluster
    monkeypatch.setenv("TF_CONFIG", _tf_config(cluster, "ps", 0))
    with pytest.raises(SystemExit, match="no worker task"):
        distributed_train.worker_task(args)
