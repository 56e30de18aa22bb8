"""MultiWorkerMirroredStrategy and ParameterServerStrategy as TF1 programs use them:
between-graph, each worker task building its own graph (from the same program, so in
the same order) and running it in a session on its own server.

MultiWorkerMirroredStrategy (TF's CollectiveAllReduceStrategy): every worker keeps a
copy of every variable on each of its local devices; the first worker's initial values
reach the others by a collective broadcast (CollectiveBcastSend on the group leader's
worker, CollectiveBcastRecv elsewhere), and values combined across replicas — the
gradients an optimizer applies, `all_reduce`, `strategy.reduce` — are CollectiveReduce
ops over every device of every worker, so each worker applies the same sums and the
copies stay equal.  Collective instance keys come from a counter per strategy object:
the workers, building the same graph, number their collectives alike.

ParameterServerStrategy: variables live on the ps tasks (round-robin, one variable per
ps task in turn), compute on the worker's local devices; each worker applies its own
gradients to the shared variables, without waiting for the others (TF1's asynchronous
training).

Without a cluster (no TF_CONFIG cluster) both run on this process's devices:
MultiWorkerMirroredStrategy as MirroredStrategy does, ParameterServerStrategy as
CentralStorageStrategy does.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.config import ConfigProto
from asyncflow.distribute import collective_util, distribute_lib
from asyncflow.distribute import values as values_lib
from asyncflow.distribute.central_storage_strategy import _CentralStorageExtended
from asyncflow.distribute.cluster_resolver import TFConfigClusterResolver
from asyncflow.distribute.context import ReduceOp
from asyncflow.distribute.cross_device_ops import _destination_devices
from asyncflow.distribute.mirrored_strategy import _default_devices, _MirroredExtended

__all__ = ["MultiWorkerMirroredStrategy", "ParameterServerStrategy"]

_BROADCAST_GROUP = 1  # the workers' first devices (initial values)
_ALL_REDUCE_GROUP = 2  # every device of every worker


class _Cluster:
    """What a strategy needs of its resolver's cluster and of this task's place in it."""

    def __init__(self, resolver):
        self.spec = resolver.cluster_spec()
        self.jobs = self.spec.jobs
        self.task_type = resolver.task_type
        self.task_id = resolver.task_id
        self.has_cluster = bool(self.jobs)
        self.workers = [
            (job, i)
            for job in ("chief", "worker")
            if job in self.jobs
            for i in self.spec.task_indices(job)
        ]
        if self.has_cluster and (self.task_type is None or self.task_id is None):
            raise ValueError(
                "When `cluster_spec` is given, you must also specify `task_type` and `task_id`."
            )

    @property
    def leader(self) -> tuple:
        return self.workers[0] if self.workers else (self.task_type, self.task_id)

    @property
    def is_chief(self) -> bool:
        if not self.has_cluster:
            return True
        if self.task_type == "chief":
            return True
        return self.task_type == "worker" and self.task_id == 0 and "chief" not in self.jobs

    def local_devices(self) -> tuple:
        local = [d.split("/device:")[-1] for d in _default_devices()]
        if not self.has_cluster:
            return tuple(_default_devices())
        prefix = f"/job:{self.task_type}/replica:0/task:{self.task_id}"
        return tuple(f"{prefix}/device:{d}" for d in local)


# -- MultiWorkerMirroredStrategy -----------------------------------------------------------


class _CollectiveExtended(_MirroredExtended):
    def __init__(self, container_strategy, communication, cluster_resolver):
        self._cluster = _Cluster(cluster_resolver or TFConfigClusterResolver())
        super().__init__(container_strategy, self._cluster.local_devices(), None)
        # The task's own devices, job and task included (MirroredStrategy's names are
        # this process's).
        self._devices = self._cluster.local_devices()
        self._host_device = self._devices[0]
        self._communication = communication
        self._num_workers = max(len(self._cluster.workers), 1)
        me = (self._cluster.task_type, self._cluster.task_id)
        worker_index = self._cluster.workers.index(me) if me in self._cluster.workers else 0
        self._replica_id_offset = worker_index * len(self._devices)
        self._instance_key = 0

    def _next_instance_key(self) -> int:
        self._instance_key += 1
        return self._instance_key

    @property
    def experimental_between_graph(self) -> bool:
        return True

    @property
    def should_checkpoint(self) -> bool:
        return self._cluster.is_chief

    @property
    def should_save_summary(self) -> bool:
        return self._cluster.is_chief

    # -- variables: the leader worker's initial values, broadcast
    def _create_mirrored(self, next_creator, **kwargs):
        if self._num_workers > 1:
            kwargs["initial_value"] = self._broadcast_initial_value(kwargs)
        return super()._create_mirrored(next_creator, **kwargs)

    def _broadcast_initial_value(self, kwargs):
        from asyncflow.ops import collective_ops  # noqa: F401 - registers the ops
        from asyncflow.raw_op_functions import raw_ops

        initial_value, dtype = kwargs["initial_value"], kwargs.get("dtype")
        key = self._next_instance_key()
        sends = (self._cluster.task_type, self._cluster.task_id) == self._cluster.leader

        def broadcast():
            value = initial_value() if callable(initial_value) else initial_value
            value = ops.convert_to_tensor(value, dtype=dtype)
            common = {
                "group_size": self._num_workers,
                "group_key": _BROADCAST_GROUP,
                "instance_key": key,
                "shape": value.shape,
            }
            if sends:
                return raw_ops.CollectiveBcastSend(input=value, **common)
            return raw_ops.CollectiveBcastRecv(T=value.dtype, **common)

        return broadcast

    # -- reductions: CollectiveReduce over every device of every worker
    def reduce_to(self, reduce_op, value, destinations, options=None):
        if self._num_workers == 1:
            return super().reduce_to(reduce_op, value, destinations, options)
        from asyncflow.distribute import context
        from asyncflow.ops import array_ops
        from asyncflow.raw_op_functions import raw_ops

        context.require_cross_replica(self._container_strategy())
        reduce_op = distribute_lib.ReduceOp.as_reduce_op(reduce_op)
        if isinstance(value, values_lib.DistributedValues):
            parts = list(value.values)
        else:
            parts = [value] * len(self._devices)
        key = self._next_instance_key()
        reduced = []
        for device, part in zip(self._devices, parts, strict=True):
            with ops.device(device):
                reduced.append(
                    raw_ops.CollectiveReduce(
                        input=ops.convert_to_tensor(part),
                        group_size=self._num_workers * len(self._devices),
                        group_key=_ALL_REDUCE_GROUP,
                        instance_key=key,
                        merge_op="Add",
                        final_op="Div" if reduce_op is ReduceOp.MEAN else "Id",
                        subdiv_offsets=[0],
                    )
                )
        devices = _destination_devices(destinations)
        if tuple(devices) == tuple(self._devices):
            return values_lib.Mirrored(reduced)
        copies = []
        for d in devices:
            with ops.device(d):
                copies.append(array_ops.identity(reduced[0]))
        return values_lib.Mirrored(copies)

    def batch_reduce_to(self, reduce_op, value_destination_pairs, options=None) -> list:
        return [self.reduce_to(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def _reduce(self, reduce_op, value):
        if self._num_workers == 1:
            return super()._reduce(reduce_op, value)
        # (A worker's one replica gives a plain value: it is still one of several.)
        return self.reduce_to(reduce_op, value, self._host_device).values[0]


class MultiWorkerMirroredStrategy(distribute_lib.Strategy):
    """Synchronous training on every device of every worker (TF's
    CollectiveAllReduceStrategy); the cluster comes from `cluster_resolver` (default:
    TF_CONFIG).

    Raises (at construction):
      ValueError: a cluster without this task's type and id.
    """

    def __init__(
        self,
        communication=collective_util.CommunicationImplementation.AUTO,
        cluster_resolver=None,
    ):
        super().__init__(_CollectiveExtended(self, communication, cluster_resolver))

    @property
    def num_replicas_in_sync(self) -> int:
        return self._extended._num_workers * len(self._extended._devices)

    def make_input_fn_iterator(
        self, input_fn, replication_mode=distribute_lib.InputReplicationMode.PER_WORKER
    ):
        """As Strategy's, the input function told it is one of the workers' pipelines
        (so it can shard its data: `dataset.shard(ctx.num_input_pipelines,
        ctx.input_pipeline_id)`)."""
        from asyncflow.distribute import input_lib

        extended = self._extended
        context = distribute_lib.InputContext(
            extended._num_workers,
            extended._replica_id_offset // len(extended._devices),
            self.num_replicas_in_sync,
        )
        return input_lib.input_fn_dataset(self, input_fn(context)).make_initializable_iterator()

    def update_config_proto(self, config_proto):
        """`config_proto` (a copy) for this worker's session: its device filters and the
        collectives' group leader."""
        config = ConfigProto()
        config.CopyFrom(config_proto)
        cluster = self._extended._cluster
        if cluster.has_cluster:
            del config.device_filters[:]
            config.device_filters.append(f"/job:{cluster.task_type}/task:{cluster.task_id}")
            job, task = cluster.leader
            config.experimental.collective_group_leader = f"/job:{job}/replica:0/task:{task}"
        return config


# -- ParameterServerStrategy -----------------------------------------------------------------


class _ParameterServerExtended(_CentralStorageExtended):
    def __init__(self, container_strategy, cluster_resolver):
        self._cluster = _Cluster(cluster_resolver or TFConfigClusterResolver())
        cluster = self._cluster
        if cluster.has_cluster:
            if "ps" not in cluster.jobs:
                raise ValueError("No `ps` job in the cluster: ParameterServerStrategy needs one.")
            ps_devices = tuple(f"/job:ps/task:{i}" for i in cluster.spec.task_indices("ps"))
        else:
            ps_devices = None
        devices = list(cluster.local_devices())
        parameter_device = None if ps_devices is None else ps_devices[0]
        super().__init__(container_strategy, devices, parameter_device)
        self._devices = tuple(devices)  # (job and task included)
        self._ps_devices = ps_devices
        self._next_ps = 0

    @property
    def worker_devices(self) -> list:
        return list(self._devices)

    @property
    def parameter_devices(self) -> tuple:
        return self._ps_devices or (self._parameter_device,)

    @property
    def experimental_between_graph(self) -> bool:
        return True

    @property
    def experimental_should_init(self) -> bool:
        return self._cluster.is_chief

    @property
    def should_checkpoint(self) -> bool:
        return self._cluster.is_chief

    @property
    def should_save_summary(self) -> bool:
        return self._cluster.is_chief

    def _create_central(self, next_creator, **kwargs):
        if self._ps_devices is not None:
            # Round-robin over the ps tasks, one variable each in turn (TF's placement).
            self._parameter_device = self._ps_devices[self._next_ps % len(self._ps_devices)]
            self._next_ps += 1
        return super()._create_central(next_creator, **kwargs)


class ParameterServerStrategy(distribute_lib.Strategy):
    """Variables on the ps tasks, each worker training on its local devices and
    updating them asynchronously; the cluster comes from `cluster_resolver` (default:
    TF_CONFIG).

    Raises (at construction):
      ValueError: a cluster without a ps job, or without this task's type and id.
    """

    def __init__(self, cluster_resolver=None):
        super().__init__(_ParameterServerExtended(self, cluster_resolver))

    def make_input_fn_iterator(
        self, input_fn, replication_mode=distribute_lib.InputReplicationMode.PER_WORKER
    ):
        """As Strategy's, the input function told it is one of the workers' pipelines."""
        from asyncflow.distribute import input_lib

        cluster = self._extended._cluster
        me = (cluster.task_type, cluster.task_id)
        context = distribute_lib.InputContext(
            max(len(cluster.workers), 1),
            cluster.workers.index(me) if me in cluster.workers else 0,
            self.num_replicas_in_sync,
        )
        return input_lib.input_fn_dataset(self, input_fn(context)).make_initializable_iterator()

    def update_config_proto(self, config_proto):
        """`config_proto` (a copy) filtered to this worker and the ps tasks."""
        config = ConfigProto()
        config.CopyFrom(config_proto)
        cluster = self._extended._cluster
        if cluster.has_cluster:
            del config.device_filters[:]
            config.device_filters.append(f"/job:{cluster.task_type}/task:{cluster.task_id}")
            config.device_filters.append("/job:ps")
        else:
            config.isolate_session_state = True
        return config
