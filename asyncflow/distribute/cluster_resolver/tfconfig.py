"""TFConfigClusterResolver: the cluster and this task from the TF_CONFIG variable.

TF_CONFIG is JSON, e.g. {"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type":
"worker", "index": 0}, "rpc_layer": "grpc"}.  It is read again on every access (unset
means {}; a value that is not JSON raises json's JSONDecodeError, a ValueError, as TF's
does), so a resolver made before TF_CONFIG is set still sees it.
"""

from __future__ import annotations

import json
import os

from asyncflow.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from asyncflow.distributed.cluster import ClusterSpec

__all__ = ["TFConfigClusterResolver"]


def _tf_config():
    return json.loads(os.environ.get("TF_CONFIG", "{}"))


def _tf_config_value(key: str, default=None):
    config = _tf_config()
    return config[key] if key in config else default


class TFConfigClusterResolver(ClusterResolver):
    """The cluster in TF_CONFIG; arguments given here override TF_CONFIG's task and
    rpc layer."""

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @property
    def task_type(self):
        """The task type given, else TF_CONFIG's task "type" (as a string), else None."""
        if self._task_type is not None:
            return str(self._task_type)
        task = _tf_config_value("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        """The task id given, else TF_CONFIG's task "index" (as an int), else None."""
        if self._task_id is not None:
            return int(self._task_id)
        task = _tf_config_value("task", {})
        return int(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def environment(self):
        return self._environment

    @property
    def rpc_layer(self):
        if self._rpc_layer is not None:
            return self._rpc_layer
        return _tf_config_value("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        return super().num_accelerators(task_type, task_id, config_proto)

    def cluster_spec(self) -> ClusterSpec:
        """TF_CONFIG's "cluster" (an empty ClusterSpec without one)."""
        config = _tf_config()
        return ClusterSpec(config["cluster"]) if "cluster" in config else ClusterSpec({})

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """TF_CONFIG's "session_master" if set; '' for a cluster of at most one task;
        else the address of the given task (this one by default), with the rpc layer.

        Raises:
          ValueError: the cluster has no such job or task (e.g. no task in TF_CONFIG).
        """
        session_master = _tf_config_value("session_master")
        if session_master is not None:
            return session_master
        spec = self.cluster_spec()
        jobs = spec.jobs
        if not jobs or (len(jobs) == 1 and len(spec.job_tasks(jobs[0])) == 1):
            return ""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        rpc_layer = self.rpc_layer if rpc_layer is None else rpc_layer
        return format_master_url(spec.task_address(task_type, task_id), rpc_layer)
