"""The device registry: which device types exist in this process, and how to make them.

A device type registers a factory once (`register_device_factory`); a worker asks
`create_devices(config, ...)` for its devices and gets, for every registered type, as
many devices as `ConfigProto.device_count` asks for (or the factory's default: one CPU,
every visible GPU), named as TF names them.  The runtime only ever talks to the Device
protocol (`devices.base.Device`); new kinds of device plug in here, without any runtime
module knowing them.

Invariant: CPU comes first in the returned list (device 0 is where feeds, fetches and
ops without a better place go), then the other types in registration order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from asyncflow import errors
from asyncflow.devices import cpu_budget, gpu
from asyncflow.devices.base import Device
from asyncflow.devices.cpu import CPUDevice

__all__ = [
    "DeviceFactory",
    "create_devices",
    "device_name",
    "register_device_factory",
    "registered_device_types",
    "unavailable_reason",
    "unregister_device_factory",
]


def device_name(device_type: str, index: int, job="localhost", replica=0, task=0) -> str:
    """The full TF name: /job:localhost/replica:0/task:0/device:GPU:1."""
    return f"/job:{job}/replica:{replica}/task:{task}/device:{device_type}:{index}"


class DeviceFactory:
    """Makes the devices of one type.  Subclass, or pass callables to the constructor.

    `default_count(config)`: how many devices when `device_count` does not say (0 is
    allowed: a GPU factory on a machine without GPUs); `create(config, prefix, count)`
    returns `count` devices whose names start with `prefix` (".../device:").
    """

    def __init__(
        self,
        device_type: str,
        create: Callable[[object, str, int], list[Device]],
        default_count: Callable[[object], int] = lambda config: 1,
        unavailable: Callable[[], str | None] = lambda: None,
    ):
        self.device_type = device_type.upper()
        self._create = create
        self._default_count = default_count
        self._unavailable = unavailable

    def unavailable_reason(self) -> str | None:
        """Why this type has no device in this process (a missing library or driver), or
        None; an explicit request for one of its devices fails with this reason."""
        return self._unavailable()

    def default_count(self, config) -> int:
        return self._default_count(config)

    def create(self, config, prefix: str, count: int) -> list[Device]:
        return self._create(config, prefix, count)


_lock = threading.Lock()
_factories: dict[str, DeviceFactory] = {}


def register_device_factory(factory: DeviceFactory) -> None:
    """Make `factory.device_type` available to every session created from now on.

    Raises ValueError when the type is already registered."""
    with _lock:
        if factory.device_type in _factories:
            raise ValueError(f"device type {factory.device_type} is already registered")
        _factories[factory.device_type] = factory


def unregister_device_factory(device_type: str) -> None:
    with _lock:
        _factories.pop(device_type.upper(), None)


def registered_device_types() -> list[str]:
    with _lock:
        return list(_factories)


def unavailable_reason(device_type: str) -> str | None:
    """The registered factory's reason for having no `device_type` devices, if any."""
    with _lock:
        factory = _factories.get(str(device_type).upper())
    return factory.unavailable_reason() if factory is not None else None


def create_devices(config, job="localhost", replica=0, task=0) -> list[Device]:
    """One Device per (registered type, index) that `config` asks for; CPU first.

    Raises InvalidArgumentError for a negative or non-integer count in
    `config.device_count`."""
    counts = dict(getattr(config, "device_count", None) or {})
    with _lock:
        factories = list(_factories.values())
    devices: list[Device] = []
    for factory in factories:
        raw = counts.get(factory.device_type)
        if raw is None:
            n = factory.default_count(config)
        else:
            try:
                n = int(raw)
            except (TypeError, ValueError):
                n = -1
            if n < 0:
                raise errors.InvalidArgumentError(
                    None, None, f"device_count[{factory.device_type!r}] must be >= 0, got {raw!r}"
                )
        if factory.device_type == "CPU":
            n = max(n, 1)  # a process always has its host device, as TF
        prefix = f"/job:{job}/replica:{replica}/task:{task}/device:"
        devices.extend(factory.create(config, prefix, n))
    return devices


def _create_cpus(config, prefix: str, count: int) -> list[Device]:
    # As TF: intra_op_parallelism_threads is the process's CPU budget (threads one kernel
    # and its BLAS may use), inter_op_parallelism_threads the kernels run at once (each
    # device's worker threads).
    cpu_budget.configure(getattr(config, "intra_op_parallelism_threads", 0))
    threads = getattr(config, "inter_op_parallelism_threads", 0)
    if not threads and count > 1:
        threads = max(1, cpu_budget.cores() // count)  # each device its share of the CPUs
    return [CPUDevice(f"{prefix}CPU:{i}", i, threads) for i in range(count)]


register_device_factory(DeviceFactory("CPU", _create_cpus))
# GPUs through CuPy (devices/gpu.py imports CuPy only when asked how many GPUs exist;
# none when it or a driver is missing, or N stand-ins with ASYNCFLOW_FAKE_GPUS=N).
register_device_factory(
    DeviceFactory("GPU", gpu.create_gpus, gpu.default_count, unavailable=gpu.unavailable_reason)
)
