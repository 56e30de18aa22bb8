"""How a strategy combines the replicas' values (`tf.distribute.CrossDeviceOps`).

ReductionToOneDevice sums the parts on one device (an AddN there, the runtime's copies
bringing the parts in) and copies the result to each destination device; it reduces on
the device it is given (or the first destination).  HierarchicalCopyAllReduce keeps
TF's name and arguments and reduces on the first destination's device, which gives the
same numbers.  NcclAllReduce, where the parts lie one per GPU on the destinations'
devices (a mirrored variable's gradients), all-reduces them with NCCL's ops
(ops/nccl_ops.py), each GPU getting its copy of the sum; elsewhere it reduces as the
others (TF's NCCL all-reduce would fail on CPUs).
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.device_spec import DeviceSpec
from asyncflow.distribute import values as values_lib
from asyncflow.distribute.context import ReduceOp

__all__ = [
    "CrossDeviceOps",
    "HierarchicalCopyAllReduce",
    "NcclAllReduce",
    "ReductionToOneDevice",
]


def _destination_devices(destinations) -> tuple:
    if isinstance(destinations, str):
        return (destinations,)
    if isinstance(destinations, values_lib.DistributedVariable):
        return tuple(v.device for v in destinations.values)
    if isinstance(destinations, values_lib.DistributedValues):
        return tuple(v.device for v in destinations.values)
    if isinstance(destinations, (list, tuple)):
        return tuple(destinations)
    return (destinations.device,)


class CrossDeviceOps:
    """Base class: reduce a PerReplica to Mirrored copies on destination devices."""

    def _reduce_device(self, destinations: tuple) -> str:
        return destinations[0]

    def reduce(self, reduce_op, per_replica_value, destinations, options=None):
        """`per_replica_value` reduced, as a Mirrored with one copy per destination."""
        from asyncflow.ops import array_ops, math_ops

        reduce_op = ReduceOp.as_reduce_op(reduce_op)
        parts = list(getattr(per_replica_value, "values", (per_replica_value,)))
        devices = _destination_devices(destinations)
        with ops.device(self._reduce_device(devices)):
            total = parts[0] if len(parts) == 1 else math_ops.add_n(parts)
            if reduce_op is ReduceOp.MEAN and len(parts) > 1:
                total = math_ops.truediv(total, math_ops.cast(len(parts), total.dtype))
        copies = []
        for d in devices:
            with ops.device(d):
                copies.append(array_ops.identity(total))
        return values_lib.Mirrored(copies)

    def batch_reduce(self, reduce_op, value_destination_pairs, options=None) -> list:
        return [self.reduce(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def broadcast(self, tensor, destinations):
        from asyncflow.ops import array_ops

        copies = []
        for d in _destination_devices(destinations):
            with ops.device(d):
                copies.append(array_ops.identity(tensor))
        return values_lib.Mirrored(copies)


class ReductionToOneDevice(CrossDeviceOps):
    """Reduce on `reduce_to_device` (default: the first destination), then copy out."""

    def __init__(self, reduce_to_device=None, accumulation_fn=None):
        self.reduce_to_device = reduce_to_device
        self.accumulation_fn = accumulation_fn

    def _reduce_device(self, destinations: tuple) -> str:
        return self.reduce_to_device or destinations[0]


class _AllReduce(CrossDeviceOps):
    def __init__(self, num_packs=1):
        if num_packs < 0:
            raise ValueError(
                f"NCCL all-reduce requires num_packs >= 0, but {num_packs} is specified"
            )
        self.num_packs = num_packs


class HierarchicalCopyAllReduce(_AllReduce):
    """TF's hierarchical copy all-reduce (for GPUs): the same sums here."""


def _device_key(device: str):
    spec = DeviceSpec.from_string(device)
    return (spec.job, spec.replica or 0, spec.task or 0, spec.device_type, spec.device_index)


# NcclAllReduce's types (ops/nccl_ops.py)
_NCCL_DTYPES = frozenset(["float16", "float32", "float64", "int32", "int64"])


class NcclAllReduce(_AllReduce):
    """TF's NCCL all-reduce: NcclAllReduce ops over the GPUs the parts lie on."""

    def reduce(self, reduce_op, per_replica_value, destinations, options=None):
        parts = list(getattr(per_replica_value, "values", (per_replica_value,)))
        if not self._all_reducible(parts, _destination_devices(destinations)):
            return super().reduce(reduce_op, per_replica_value, destinations, options)
        from asyncflow.ops import math_ops, nccl_ops

        reduce_op = ReduceOp.as_reduce_op(reduce_op)
        sums = nccl_ops.all_sum(parts)
        if reduce_op is ReduceOp.MEAN:
            means = []
            for s in sums:
                with ops.device(s.device):
                    means.append(math_ops.truediv(s, math_ops.cast(len(sums), s.dtype)))
            sums = means
        return values_lib.Mirrored(sums)

    @staticmethod
    def _all_reducible(parts: list, devices: tuple) -> bool:
        """Whether `parts` are dense tensors of NCCL's types, one on each of `devices`,
        which are distinct GPUs (TF's all-reduce when the devices match)."""
        if len(parts) < 2 or len(parts) != len(devices):
            return False
        if not all(isinstance(p, ops.Tensor) and p.dtype.name in _NCCL_DTYPES for p in parts):
            return False
        try:
            have = [_device_key(p.device) for p in parts]
            want = [_device_key(d) for d in devices]
        except (ValueError, TypeError):
            return False
        return have == want and len(set(have)) == len(have) and all(k[3] == "GPU" for k in have)
