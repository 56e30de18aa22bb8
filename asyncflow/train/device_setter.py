"""`replica_device_setter`: put state on parameter-server tasks, the rest on the worker
(OSDI §4.2), as TF1's `tf.train.replica_device_setter` does.

The setter is a device function (`with af.device(setter): ...`): each op built under it
gets a device from the function.  Ops whose type is in `ps_ops` (variables, accumulators,
hash tables) go to `ps_device`, with a task chosen by `ps_strategy` (round-robin by
default, or `GreedyLoadBalancingStrategy` over the ops' byte sizes); every other op goes
to `worker_device`.  A device the user set inside the scope is merged over the chosen
one (`merge_devices`), so `with af.device("/cpu:0")` still picks the CPU of the task.

Invariant: the strategy is called once per ps op, in creation order; a partitioned
variable's slices therefore land on consecutive tasks.
"""

from __future__ import annotations

import logging

import numpy as np

from asyncflow import tensor_shape
from asyncflow.device_spec import DeviceSpec

__all__ = [
    "replica_device_setter",
    "GreedyLoadBalancingStrategy",
    "RandomStrategy",
    "byte_size_load_fn",
    "STANDARD_PS_OPS",
]

_log = logging.getLogger("asyncflow")

STANDARD_PS_OPS = (
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "ResourceConditionalAccumulator",
    "DecisionTreeResource",
)


class _RoundRobinStrategy:
    """Tasks 0, 1, ..., num_tasks - 1, 0, ... in the order ps ops are created."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op) -> int:
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


def byte_size_load_fn(op) -> int:
    """The byte size of a single-output op's output (TF's `byte_size_load_fn`).

    Raises:
      ValueError: the op has several outputs, or its shape is not fully defined.
    """
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op} must have a single output")
    output = op.outputs[0]
    shape = output.get_shape()
    if not shape.is_fully_defined():
        # A variable's output may not know its shape yet when it is placed; its attr does.
        try:
            shape = tensor_shape.as_shape(op.get_attr("shape"))
        except (ValueError, KeyError):
            pass
    if not shape.is_fully_defined():
        raise ValueError(f"Shape {shape} is not fully defined")
    return shape.num_elements() * output.dtype.base_dtype.size


class GreedyLoadBalancingStrategy:
    """Each ps op goes to the task with the least load so far (ties: the lowest task),
    and adds `load_fn(op)` to it.  With `byte_size_load_fn`, variables are spread so
    every parameter server holds about the same number of bytes."""

    def __init__(self, num_tasks: int, load_fn=byte_size_load_fn):
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


class RandomStrategy:
    """A task drawn uniformly per op, from a seeded generator."""

    def __init__(self, num_ps_replicas: int, seed=None):
        self._num_tasks = num_ps_replicas
        self._rng = np.random.default_rng(seed)

    def __call__(self, op) -> int:
        return int(self._rng.integers(self._num_tasks))


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = set(ps_ops)
        self._ps_strategy = ps_strategy

    def device_function(self, op) -> str:
        if not self._merge_devices and op.device:
            return op.device
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            # The task is chosen only when the op's own job (if any) is the ps job.
            if ps.job and (not current.job or current.job == ps.job):
                ps.task = self._ps_strategy(op)
            return ps.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def _cluster_dict(cluster) -> dict:
    if hasattr(cluster, "as_dict"):
        return cluster.as_dict()
    if not isinstance(cluster, dict):
        raise TypeError(f"cluster must be a dictionary or ClusterSpec, got {cluster!r}")
    return cluster


def replica_device_setter(
    ps_tasks=0,
    ps_device="/job:ps",
    worker_device="/job:worker",
    merge_devices=True,
    cluster=None,
    ps_ops=None,
    ps_strategy=None,
):
    """A device function placing `ps_ops` on parameter servers, the rest on the worker.

    With `cluster` (a ClusterSpec or its dict), the number of ps tasks is the size of
    the ps job named in `ps_device`; without a ps job (or with 0 ps tasks) the result
    is None, so `with af.device(None)` leaves placement alone, as TF.

    Raises:
      TypeError: `ps_strategy` is not callable, or `cluster` is neither a dict nor a
        ClusterSpec.
    """
    if cluster is not None:
        spec = _cluster_dict(cluster)
        ps_job = DeviceSpec.from_string(ps_device).job
        if ps_job not in spec or spec[ps_job] is None:
            return None
        ps_tasks = len(spec[ps_job])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        _log.warning(
            "DEPRECATION NOTE: merge_devices=False in replica_device_setter is deprecated."
        )
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(
        ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy
    )
    return chooser.device_function
