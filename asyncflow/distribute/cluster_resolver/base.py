"""ClusterResolver (the abstract base), SimpleClusterResolver and UnionResolver.

A cluster resolver answers three questions for a strategy or an Estimator: which tasks
make up the cluster (`cluster_spec()`), which of them this process is (`task_type`,
`task_id`), and which address a session should connect to (`master()`).  The concrete
resolvers differ only in where they read the cluster from (TF_CONFIG, Slurm's
environment, a Kubernetes or GCE API); they are re-read on every call, as TF's are, so
a resolver follows a cluster that changes.
"""

from __future__ import annotations

import abc
import collections

from asyncflow.distributed.cluster import ClusterSpec

__all__ = [
    "ClusterResolver",
    "SimpleClusterResolver",
    "UnionResolver",
    "format_master_url",
]


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """`rpc_layer://master`, or `master` as it is when there is no rpc layer."""
    return f"{rpc_layer}://{master}" if rpc_layer else master


def _count_devices(master: str, task_type, task_id, config_proto) -> collections.defaultdict:
    """Device type -> count of the devices a session on `master` sees (TF1's graph-mode
    count: CPUs included), only `task_type`'s task `task_id` when both are given."""
    from asyncflow import graph as ops
    from asyncflow.session import Session

    with ops.Graph().as_default(), Session(master, config=config_proto) as sess:
        devices = sess.list_devices()
    counts: collections.defaultdict = collections.defaultdict(int)
    for device in devices:
        if task_type is not None and task_id is not None:
            if f"/job:{task_type}" not in device.name or f"/task:{task_id}" not in device.name:
                continue
        counts[device.device_type] += 1
    return counts


class ClusterResolver(abc.ABC):
    """Base of the cluster resolvers: subclasses give `cluster_spec()` and `master()`.

    Raises:
      TypeError: instantiated itself (its two methods are abstract).
    """

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The cluster, read afresh on every call."""
        raise NotImplementedError()

    @abc.abstractmethod
    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The address a session of this task connects to ('' for an in-process one)."""
        raise NotImplementedError()

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        """Device type -> how many a session on `master(task_type, task_id)` sees."""
        return _count_devices(self.master(task_type, task_id), task_type, task_id, config_proto)

    @property
    def environment(self) -> str:
        return ""

    @property
    def task_type(self):
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id


class SimpleClusterResolver(ClusterResolver):
    """A resolver holding a fixed ClusterSpec and the values given to it.

    Raises:
      TypeError: `cluster_spec` is not a `tf.train.ClusterSpec`.
    """

    def __init__(
        self,
        cluster_spec,
        master="",
        task_type=None,
        task_id=None,
        environment="",
        num_accelerators=None,
        rpc_layer=None,
    ):
        if not isinstance(cluster_spec, ClusterSpec):
            raise TypeError("cluster_spec must be a `tf.train.ClusterSpec`.")
        self._cluster_spec = cluster_spec
        if not isinstance(master, str):
            raise TypeError("master must be a string.")
        self._master = master
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = num_accelerators
        self._rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster_spec

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The given task's address, else the `master` given; with the rpc layer.

        Raises:
          ValueError: the cluster has no such job or task.
        """
        if task_type is not None and task_id is not None:
            address = self._cluster_spec.task_address(task_type, task_id)
        else:
            address = self._master
        return format_master_url(address, rpc_layer or self._rpc_layer)

    @property
    def task_type(self):
        return self._task_type

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        return self._task_id

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def environment(self) -> str:
        return self._environment

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        """The `num_accelerators` given ({} when none was)."""
        return {} if self._num_accelerators is None else self._num_accelerators

    @property
    def rpc_layer(self):
        return self._rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer


class UnionResolver(ClusterResolver):
    """The union of several resolvers' clusters; the first resolver answers for the
    task, the environment and the accelerators.

    A job that every resolver lists densely stays a list (the lists concatenated);
    otherwise its tasks are merged by index.

    Raises:
      ValueError: no resolver, or a keyword other than rpc_layer, task_type, task_id.
      TypeError: an argument that is not a ClusterResolver.
    """

    def __init__(self, *args, **kwargs):
        self._rpc_layer = kwargs.pop("rpc_layer", None)
        self._task_type = kwargs.pop("task_type", None)
        self._task_id = kwargs.pop("task_id", None)
        if kwargs:
            raise ValueError(f"Unexpected kwargs provided {kwargs!r}")
        if not args:
            raise ValueError("At least one ClusterResolver is required.")
        if not all(isinstance(r, ClusterResolver) for r in args):
            raise TypeError("All arguments must be a sub-class of `ClusterResolver.`")
        self._cluster_resolvers = args

    def cluster_spec(self) -> ClusterSpec:
        """The merged cluster.

        Raises:
          KeyError: two resolvers give the same index of a job merged by index.
        """
        parts = [r.cluster_spec().as_dict() for r in self._cluster_resolvers]
        dense: dict[str, bool] = {}
        for part in parts:
            for job, tasks in part.items():
                dense[job] = dense.get(job, True) and isinstance(tasks, list)
        merged: dict = {job: [] if is_dense else {} for job, is_dense in dense.items()}
        for part in parts:
            for job, tasks in part.items():
                if dense[job]:
                    merged[job].extend(tasks)
                    continue
                by_index = dict(enumerate(tasks)) if isinstance(tasks, list) else dict(tasks)
                clash = set(by_index) & set(merged[job])
                if clash:
                    raise KeyError(
                        f"Duplicate keys detected when merging two ClusterSpecs: {clash!r}"
                    )
                merged[job].update(by_index)
        return ClusterSpec(merged)

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The given task's address in the merged cluster, else the first resolver's
        master."""
        if task_type is not None and task_id is not None:
            address = self.cluster_spec().task_address(task_type, task_id)
            return format_master_url(address, rpc_layer or self._rpc_layer)
        return self._cluster_resolvers[0].master(rpc_layer=rpc_layer)

    # As TF's: a falsy override (task_id=0) defers to the first resolver.
    @property
    def task_type(self):
        return self._task_type or self._cluster_resolvers[0].task_type

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        return self._task_id or self._cluster_resolvers[0].task_id

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def environment(self):
        return self._cluster_resolvers[0].environment

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        return self._cluster_resolvers[0].num_accelerators(task_type, task_id, config_proto)

    @property
    def rpc_layer(self):
        return self._rpc_layer or self._cluster_resolvers[0].rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer
