"""`device_lib.list_local_devices()`: the devices a session in this process gets."""

from __future__ import annotations

from asyncflow.config import ConfigProto
from asyncflow.devices.cpu import local_cpu_name

__all__ = ["DeviceAttributes", "list_local_devices"]


class DeviceAttributes:
    """TF's DeviceAttributes fields: name, device_type, memory_limit, incarnation."""

    def __init__(
        self,
        name: str,
        device_type: str,
        memory_limit: int,
        incarnation: int,
        physical_device_desc: str = "",
    ):
        self.name = name
        self.device_type = device_type
        self.memory_limit = memory_limit
        self.incarnation = incarnation
        self.physical_device_desc = physical_device_desc

    def __repr__(self) -> str:
        return (
            f'name: "{self.name}"\ndevice_type: "{self.device_type}"\n'
            f"memory_limit: {self.memory_limit}\nincarnation: {self.incarnation}\n"
        )


def list_local_devices(session_config: ConfigProto | None = None) -> list[DeviceAttributes]:
    """One entry per virtual CPU device (`device_count={"CPU": n}`), then one per device
    of the other registered types (GPUs), with its memory limit."""
    from asyncflow.devices.base import available_host_memory
    from asyncflow.devices.registry import create_devices

    config = session_config if session_config is not None else ConfigProto()
    n_cpu = int(config.device_count.get("CPU", 1) or 1)
    mem = available_host_memory()
    out = [
        DeviceAttributes(local_cpu_name(i), "CPU", mem, hash(local_cpu_name(i)) & (2**63 - 1))
        for i in range(n_cpu)
    ]
    # Other device types (GPUs): as a session in this process would get them.
    cpu_only = ConfigProto(device_count={"CPU": 1})
    counts = dict(config.device_count)
    counts["CPU"] = 1
    cpu_only.device_count = counts
    cpu_only.gpu_options = config.gpu_options
    for dev in create_devices(cpu_only):
        if dev.device_type != "CPU":
            out.append(
                DeviceAttributes(
                    dev.name,
                    dev.device_type,
                    int(dev.memory_limit),
                    dev.incarnation,
                    getattr(dev, "physical_device_desc", ""),
                )
            )
        dev.close()
    return out
