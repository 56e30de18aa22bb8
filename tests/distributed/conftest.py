"""Fixtures for the distributed tests: a cluster secret, free ports, in-process clusters
and server subprocesses (`python -m asyncflow.server`), all on 127.0.0.1."""

import os
import socket
import subprocess
import sys

import pytest

os.environ.setdefault("ASYNCFLOW_CLUSTER_SECRET", "asyncflow-test-secret")

import asyncflow as af  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_of(**jobs) -> af.train.ClusterSpec:
    """ClusterSpec with `n` fresh localhost ports per job: cluster_of(ps=1, worker=2)."""
    return af.train.ClusterSpec(
        {job: [f"localhost:{free_port()}" for _ in range(n)] for job, n in jobs.items()}
    )


@pytest.fixture(scope="module")
def ps_worker_cluster():
    """In-process servers: ps/0, worker/0, worker/1 (stopped at the module's end)."""
    cluster = cluster_of(ps=1, worker=2)
    servers = {
        (job, i): af.train.Server(cluster, job, i)
        for job in ("ps", "worker")
        for i in range(cluster.num_tasks(job))
    }
    yield cluster, servers
    for s in servers.values():
        s.stop()


def spawn_server(cluster: af.train.ClusterSpec, job: str, task: int, *extra) -> subprocess.Popen:
    """`python -m asyncflow.server` for one task; returns once it listens."""
    spec = ";".join(f"{j}|{','.join(cluster.job_tasks(j))}" for j in cluster.jobs)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "asyncflow.server",
            "--cluster_spec",
            spec,
            "--job_name",
            job,
            "--task_index",
            str(task),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if "listening" not in line:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read()}")
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()
