"""`tf.train.ClusterSpec` and the TF_CONFIG environment variable.

A cluster is a dict of job name -> tasks, each task a "host:port" address; a job's
tasks are a list (indices 0..n-1) or a sparse {index: address} dict, as in TF.  TF_CONFIG
(set by Kubeflow's TFJob, or by hand) is JSON: {"cluster": {...}, "task": {"type": ...,
"index": ...}}; its "chief", "master", "evaluator" and lower-case job names are kept as
they are (they are just jobs here).
"""

from __future__ import annotations

import json
import os

from asyncflow.protos.cluster_pb2 import ClusterDef

__all__ = ["ClusterSpec", "parse_tf_config", "split_address"]


class ClusterSpec:
    """Represents a cluster as a set of "tasks", organized into "jobs".

    `ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]})`, or with a
    sparse job `{"worker": {1: "w1:2222"}}`, or from a `tf.train.ClusterDef`.

    Raises:
      TypeError: when `cluster` is not a dict of job names to lists or dicts of
        addresses (or another ClusterSpec).
    """

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._spec = {job: dict(tasks) for job, tasks in cluster._spec.items()}
            return
        if isinstance(cluster, ClusterDef):
            self._spec = {j.name: {int(i): a for i, a in j.tasks.items()} for j in cluster.job}
            return
        if not isinstance(cluster, dict):
            raise TypeError(
                "`cluster` must be a dictionary mapping one or more job names to lists "
                "of network addresses, or a `ClusterSpec`"
            )
        spec: dict[str, dict[int, str]] = {}
        for job, tasks in cluster.items():
            job = job.decode() if isinstance(job, bytes) else job
            if not isinstance(job, str):
                raise TypeError(f"Job name must be a string, got {job!r}")
            if isinstance(tasks, list | tuple):
                spec[job] = {i: _address(a) for i, a in enumerate(tasks)}
            elif isinstance(tasks, dict):
                entries = {}
                for i, a in tasks.items():
                    try:
                        index = int(i)
                    except (TypeError, ValueError):
                        raise TypeError(f"Task index must be an integer, got {i!r}") from None
                    entries[index] = _address(a)
                spec[job] = entries
            else:
                raise TypeError(
                    f"The tasks for job {job!r} must be a list or a dictionary from "
                    "integers to strings."
                )
        self._spec = spec

    def __bool__(self) -> bool:
        return bool(self._spec)

    def __eq__(self, other) -> bool:
        try:
            return self._spec == ClusterSpec(other)._spec
        except TypeError:
            return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # mutable-looking, as TF's

    def __str__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"

    __repr__ = __str__

    def as_dict(self) -> dict:
        """job -> list of addresses (dense indices) or {index: address} (sparse)."""
        out = {}
        for job in self.jobs:
            tasks = self._spec[job]
            indices = sorted(tasks)
            if indices == list(range(len(indices))):
                out[job] = [tasks[i] for i in indices]
            else:
                out[job] = {i: tasks[i] for i in indices}
        return out

    @property
    def jobs(self) -> list[str]:
        return sorted(self._spec)

    def _job(self, job_name: str) -> dict:
        try:
            return self._spec[job_name]
        except KeyError:
            raise ValueError(f"No such job in cluster: {job_name!r}") from None

    def num_tasks(self, job_name: str) -> int:
        """The number of tasks in `job_name`; raises ValueError for an unknown job."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """Raises ValueError for an unknown job or task index."""
        job = self._job(job_name)
        try:
            return job[task_index]
        except KeyError:
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r}") from None

    def job_tasks(self, job_name: str) -> list:
        """The job's addresses by index, None where a sparse job has no task."""
        job = self._job(job_name)
        out = [None] * (max(job) + 1 if job else 0)
        for i, a in job.items():
            out[i] = a
        return out

    def tasks(self):
        """(job, index, address) of every task, jobs sorted, indices ascending."""
        for job in self.jobs:
            for i in sorted(self._spec[job]):
                yield job, i, self._spec[job][i]

    def as_cluster_def(self) -> ClusterDef:
        """The cluster as TF's ClusterDef message (jobs sorted, tasks by index)."""
        out = ClusterDef()
        for job in self.jobs:
            job_def = out.job.add(name=job)
            for i in sorted(self._spec[job]):
                job_def.tasks[i] = self._spec[job][i]
        return out

    def to_json(self) -> dict:
        return {job: {str(i): a for i, a in tasks.items()} for job, tasks in self._spec.items()}


def _address(a) -> str:
    a = a.decode() if isinstance(a, bytes) else a
    if not isinstance(a, str):
        raise TypeError(f"Task address must be a string, got {a!r}")
    return a


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" (also "[::1]:port").

    Raises ValueError for an address without a port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Address {address!r} must be host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "localhost", int(port)


def parse_tf_config(text: str | None = None) -> tuple[ClusterSpec, str | None, int | None]:
    """(cluster, task type, task index) from TF_CONFIG (the environment's by default).

    Raises ValueError for TF_CONFIG that is not JSON with a "cluster" object."""
    text = os.environ.get("TF_CONFIG", "") if text is None else text
    try:
        config = json.loads(text) if text else {}
    except ValueError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster", {}), dict):
        raise ValueError("TF_CONFIG must be a JSON object with a 'cluster' object")
    cluster = ClusterSpec(config.get("cluster", {}))
    task = config.get("task") or {}
    task_type = task.get("type")
    index = task.get("index")
    return cluster, task_type, int(index) if index is not None else None
