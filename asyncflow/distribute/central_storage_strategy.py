"""CentralStorageStrategy: the replicas compute on the local devices (as
MirroredStrategy's), but every variable is one variable on the parameter device (the
CPU when there are several compute devices), not a copy per device.

The replicas read the one variable; their gradients are summed on the parameter device
and applied once (optimizer_apply's merge, unchanged: `update` here writes the single
variable).  With one compute device there is nothing to combine and variables are plain
variables, as TF's are.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.distribute import context, distribute_lib
from asyncflow.distribute import values as values_lib
from asyncflow.distribute.mirrored_strategy import (
    _default_devices,
    _MirroredExtended,
    _ReplicaThread,
    _validate_aggregation,
    canonical_device,
)
from asyncflow.graph import GraphKeys
from asyncflow.variables import VariableSynchronization

__all__ = ["CentralStorageStrategy"]


class _CentralStorageExtended(_MirroredExtended):
    def __init__(self, container_strategy, compute_devices, parameter_device):
        super().__init__(container_strategy, compute_devices or _default_devices(), None)
        if parameter_device is None:
            parameter_device = self._devices[0] if len(self._devices) == 1 else "/device:CPU:0"
        self._parameter_device = parameter_device

    @property
    def worker_devices(self) -> list:
        return list(self._devices)  # (a list, where MirroredStrategy's is a tuple: TF's)

    @property
    def parameter_devices(self) -> tuple:
        return (self._parameter_device,)

    def _variable_creator(self, next_creator, **kwargs):
        thread = _current_replica_thread(self)
        if thread is not None:
            return thread.shared_create(
                lambda **kw: self._create_central(next_creator, **kw), kwargs
            )
        return self._create_central(next_creator, **kwargs)

    def _create_central(self, next_creator, **kwargs):
        kwargs["use_resource"] = True
        kwargs.pop("caching_device", None)
        if len(self._devices) == 1:
            with ops.device(self._parameter_device):
                return next_creator(**kwargs)
        collections = kwargs.pop("collections", None)
        collections = [GraphKeys.GLOBAL_VARIABLES] if collections is None else list(collections)
        aggregation = _validate_aggregation(kwargs.get("aggregation"), kwargs.get("name"))
        kwargs["aggregation"] = aggregation
        kwargs["synchronization"] = kwargs.get("synchronization") or VariableSynchronization.AUTO
        kwargs["collections"] = []
        with ops.device(self._parameter_device):
            variable = next_creator(**kwargs)
        result = values_lib.AggregatingVariable(
            self._container_strategy(), [variable], aggregation
        )
        graph = ops.get_default_graph()
        if variable.trainable:
            trainable = graph.get_collection_ref(GraphKeys.TRAINABLE_VARIABLES)
            trainable[:] = [t for t in trainable if t is not variable]
            if GraphKeys.TRAINABLE_VARIABLES not in collections:
                collections.append(GraphKeys.TRAINABLE_VARIABLES)
        graph.add_to_collections(collections, result)
        return result

    def update(self, var, fn, args=(), kwargs=None, group=True):
        """`fn(var, *args)` once, on the variable's device (each argument's first part)."""
        kwargs = kwargs or {}
        if context.get_replica_context() is not None and context.has_strategy():
            return super().update(var, fn, args, kwargs, group)
        local = var.values[0] if isinstance(var, values_lib.DistributedVariable) else var
        strategy = self._container_strategy()
        with (
            ops.colocate_with(local.op),
            context.push_update_context(strategy, local.device),
        ):
            return fn(
                local,
                *values_lib.select_replica(0, args),
                **values_lib.select_replica(0, kwargs),
            )

    def update_non_slot(self, colocate_with, fn, args=(), kwargs=None, group=True):
        with ops.device(self._parameter_device):
            return fn(*args, **(kwargs or {}))

    def read_var(self, v):
        from asyncflow.ops import array_ops

        return array_ops.identity(v.values[0] if hasattr(v, "values") else v)

    def colocate_vars_with(self, colocate_with_variable):
        """Raises RuntimeError outside the strategy's scope (TF's)."""
        if distribute_lib.get_strategy() is not self._container_strategy():
            raise RuntimeError(
                f'Need to be inside "with strategy.scope()" for {self._container_strategy()}'
            )
        return super().colocate_vars_with(colocate_with_variable)


def _current_replica_thread(extended):
    import threading

    thread = threading.current_thread()
    if isinstance(thread, _ReplicaThread) and thread.run_.extended is extended:
        return thread
    return None


class CentralStorageStrategy(distribute_lib.Strategy):
    """Replicas on `compute_devices` (default: the GPUs, else the CPU), variables on
    `parameter_device` (default: the CPU, or the one compute device).

    Raises (at construction):
      ValueError: a name that is not a device.
    """

    def __init__(self, compute_devices=None, parameter_device=None):
        if compute_devices is not None:
            compute_devices = [canonical_device(d) for d in compute_devices]
        super().__init__(_CentralStorageExtended(self, compute_devices, parameter_device))
