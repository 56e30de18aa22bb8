"""`tf.config` (TF 2.x's process-wide runtime settings, as `tf.compat.v1` has them).

The settings made here are the defaults of every Session created without a
ConfigProto afterwards, as TF's Session takes its eager context's config: the CPU's
logical devices (`set_logical_device_configuration` splits the CPU into several,
`device_count={"CPU": n}`), the visible GPUs (`gpu_options.visible_device_list`), the
thread counts, soft placement, memory growth (`gpu_options.allow_growth`).  A Session
given its own ConfigProto uses that one alone, as TF's.

As TF's, the logical devices are fixed once they are first listed
(`list_logical_devices`): later changes to the virtual devices or the thread counts
raise RuntimeError.
"""

from __future__ import annotations

import collections
import threading as _threading
import types

from asyncflow import errors

__all__ = [
    "LogicalDevice",
    "LogicalDeviceConfiguration",
    "PhysicalDevice",
    "experimental",
    "get_logical_device_configuration",
    "get_soft_device_placement",
    "get_visible_devices",
    "list_logical_devices",
    "list_physical_devices",
    "optimizer",
    "session_config",
    "set_logical_device_configuration",
    "set_soft_device_placement",
    "set_visible_devices",
    "threading",
]

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


class LogicalDeviceConfiguration(
    collections.namedtuple(
        "LogicalDeviceConfiguration",
        ["memory_limit", "experimental_priority", "experimental_device_ordinal"],
    )
):
    """One logical device of a physical one (TF's fields)."""

    def __new__(
        cls, memory_limit=None, experimental_priority=None, experimental_device_ordinal=None
    ):
        return super().__new__(
            cls, memory_limit, experimental_priority, experimental_device_ordinal
        )


VirtualDeviceConfiguration = LogicalDeviceConfiguration  # (TF's experimental name)


class _State:
    def __init__(self):
        self.lock = _threading.Lock()
        self.initialized = False
        self.visible: list[PhysicalDevice] | None = None  # None: all
        self.virtual: dict[PhysicalDevice, list] = {}
        self.memory_growth: dict[PhysicalDevice, bool] = {}
        self.intra = 0
        self.inter = 0
        self.soft_placement = False
        self.jit = False
        self.optimizer_options: dict = {}
        self.tf32 = True
        self.synchronous = True
        self.device_policy = "silent"


_state = _State()


def _gpu_count() -> int:
    from asyncflow.devices import gpu

    b = gpu.backend()
    return 0 if b is None else int(b.xp.cuda.runtime.getDeviceCount())


def list_physical_devices(device_type=None) -> list[PhysicalDevice]:
    """The machine's devices: the CPU, then each GPU."""
    found = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    found += [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(_gpu_count())]
    return [d for d in found if device_type is None or d.device_type == device_type.upper()]


def get_visible_devices(device_type=None) -> list[PhysicalDevice]:
    devices = list_physical_devices() if _state.visible is None else list(_state.visible)
    return [d for d in devices if device_type is None or d.device_type == device_type.upper()]


def set_visible_devices(devices, device_type=None) -> None:
    """Which physical devices (of `device_type`, or all) the runtime uses.

    Raises:
      RuntimeError: the logical devices were already listed.
    """
    if isinstance(devices, PhysicalDevice):
        devices = [devices]
    devices = list(devices)
    with _state.lock:
        if _state.initialized:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        kept = [
            d
            for d in get_visible_devices()
            if device_type is not None and d.device_type != device_type.upper()
        ]
        _state.visible = [d for d in list_physical_devices() if d in kept or d in devices]


def _logical_of(visible) -> list[LogicalDevice]:
    out = []
    for kind in ("CPU", "GPU"):
        n = 0
        for d in visible:
            if d.device_type == kind:
                n += max(1, len(_state.virtual.get(d, [])))
        out += [LogicalDevice(f"/device:{kind}:{i}", kind) for i in range(n)]
    return out


def list_logical_devices(device_type=None) -> list[LogicalDevice]:
    """The devices sessions get (fixing the configuration, as TF's context does).

    Raises:
      NotFoundError: the CPU was made invisible.
    """
    visible = get_visible_devices()
    if not any(d.device_type == "CPU" for d in visible):
        raise errors.NotFoundError(None, None, "No CPU devices are available in this process")
    _state.initialized = True
    devices = _logical_of(visible)
    return [d for d in devices if device_type is None or d.device_type == device_type.upper()]


def get_logical_device_configuration(device):
    """The logical devices set for `device` (None when it is not split)."""
    return _state.virtual.get(device)


def set_logical_device_configuration(device, logical_devices) -> None:
    """Split `device` into logical devices (the CPU into several CPU devices).

    Raises:
      RuntimeError: the logical devices were already listed.
      ValueError: a memory limit for CPU devices (TF refuses it too).
    """
    with _state.lock:
        if _state.initialized:
            raise RuntimeError("Virtual devices cannot be modified after being initialized")
        logical_devices = None if logical_devices is None else list(logical_devices)
        if device.device_type == "CPU" and any(
            c.memory_limit is not None for c in logical_devices or []
        ):
            raise ValueError(
                "Setting memory limit on CPU virtual devices is currently not supported"
            )
        if logical_devices is None:
            _state.virtual.pop(device, None)
        else:
            _state.virtual[device] = logical_devices


def get_soft_device_placement() -> bool:
    return _state.soft_placement


def set_soft_device_placement(enabled) -> None:
    _state.soft_placement = bool(enabled)


def _set_threads(attr: str, what: str, n) -> None:
    with _state.lock:
        if _state.initialized and getattr(_state, attr) != n:
            raise RuntimeError(f"{what} parallelism cannot be modified after initialization.")
        setattr(_state, attr, int(n))


def session_config():
    """The ConfigProto of a Session made without one, from the settings above.

    Raises:
      NotFoundError: the CPU was made invisible.
    """
    from asyncflow.config import ConfigProto

    visible = get_visible_devices()
    if not any(d.device_type == "CPU" for d in visible):
        raise errors.NotFoundError(None, None, "No CPU devices are available in this process")
    config = ConfigProto()
    cpu = list_physical_devices("CPU")[0]
    if cpu in _state.virtual:
        config.device_count = {"CPU": len(_state.virtual[cpu])}
    gpus = list_physical_devices("GPU")
    shown = [int(d.name.rsplit(":", 1)[1]) for d in visible if d.device_type == "GPU"]
    if len(shown) != len(gpus):
        if shown:
            config.gpu_options.visible_device_list = ",".join(map(str, shown))
        else:
            config.device_count = {**config.device_count, "GPU": 0}
    if any(_state.memory_growth.values()):
        config.gpu_options.allow_growth = True
    config.intra_op_parallelism_threads = _state.intra
    config.inter_op_parallelism_threads = _state.inter
    config.allow_soft_placement = _state.soft_placement
    return config


# -- tf.config.threading ---------------------------------------------------------------------


def _threading_module():
    m = types.ModuleType("asyncflow.config.threading", "TF's tf.config.threading.")
    m.get_intra_op_parallelism_threads = lambda: _state.intra
    m.get_inter_op_parallelism_threads = lambda: _state.inter
    m.set_intra_op_parallelism_threads = lambda num_threads: _set_threads(
        "intra", "Intra op", num_threads
    )
    m.set_inter_op_parallelism_threads = lambda num_threads: _set_threads(
        "inter", "Inter op", num_threads
    )
    return m


# -- tf.config.optimizer -----------------------------------------------------------------------


def _set_jit(enabled) -> None:
    # TF 2.21 reads True as "autoclustering"; the string forms are kept as given
    _state.jit = "autoclustering" if enabled is True else enabled


def _get_jit():
    return _state.jit or ""


def _optimizer_module():
    m = types.ModuleType("asyncflow.config.optimizer", "TF's tf.config.optimizer.")
    m.set_jit = _set_jit
    m.get_jit = _get_jit

    def set_experimental_options(options) -> None:
        _state.optimizer_options.update(options)

    def get_experimental_options() -> dict:
        # (once any is set TF lists these two beside them)
        if not _state.optimizer_options:
            return {}
        base = {"disable_model_pruning": False, "disable_meta_optimizer": False}
        return {
            **_state.optimizer_options,
            **{k: v for k, v in base.items() if k not in _state.optimizer_options},
        }

    m.set_experimental_options = set_experimental_options
    m.get_experimental_options = get_experimental_options
    return m


# -- tf.config.experimental --------------------------------------------------------------------


def _parse_device(device: str):
    """'CPU:0' / 'GPU:1' / '/device:GPU:1' -> (type, index).

    Raises:
      ValueError: another spelling.
    """
    text = device.rsplit("device:", 1)[-1].strip("/")
    kind, _, index = text.partition(":")
    if kind.upper() not in ("CPU", "GPU") or not index.isdigit():
        raise ValueError(f"Failed parsing device name: '{device}'")
    return kind.upper(), int(index)


def _memory_info(device) -> dict:
    """{'current': bytes in use, 'peak': the most in use} on a logical device (a CPU's
    are not counted, as TF's are not by default: zeros).

    Raises:
      ValueError: a device name that does not parse, or a device that does not exist.
    """
    kind, index = _parse_device(device)
    logical = list_logical_devices(kind)
    if index >= len(logical):
        raise ValueError(f"Device {device} not found")
    if kind == "CPU":
        return {"current": 0, "peak": 0}
    from asyncflow.devices import gpu

    b = gpu.backend()
    shown = [int(d.name.rsplit(":", 1)[1]) for d in get_visible_devices("GPU")]
    phys = gpu._physical(b, shown[index])
    return {"current": int(phys.used()), "peak": int(phys.peak)}


def _set_memory_growth(device, enable) -> None:
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    if device in _state.virtual:
        raise ValueError("Cannot set memory growth on device when virtual devices configured")
    _state.memory_growth[device] = bool(enable)


def _get_memory_growth(device) -> bool:
    if device not in list_physical_devices():
        raise ValueError(f"Unrecognized device: {device!r}")
    return _state.memory_growth.get(device, False)


def _device_details(device) -> dict:
    """{} for a CPU; a GPU's name and compute capability."""
    if device.device_type != "GPU":
        return {}
    from asyncflow.devices import gpu

    b = gpu.backend()
    index = int(device.name.rsplit(":", 1)[1])
    get_props = getattr(b.xp.cuda.runtime, "getDeviceProperties", None)
    props = get_props(index) if get_props is not None else {"name": b.name}
    name = props.get("name", b"")
    return {
        "device_name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": (int(props.get("major", 0)), int(props.get("minor", 0))),
    }


def _experimental_module():
    m = types.ModuleType("asyncflow.config.experimental", "TF's tf.config.experimental.")
    m.VirtualDeviceConfiguration = VirtualDeviceConfiguration
    m.list_physical_devices = list_physical_devices
    m.list_logical_devices = list_logical_devices
    m.get_visible_devices = get_visible_devices
    m.set_visible_devices = set_visible_devices
    m.get_virtual_device_configuration = get_logical_device_configuration
    m.set_virtual_device_configuration = set_logical_device_configuration
    m.set_memory_growth = _set_memory_growth
    m.get_memory_growth = _get_memory_growth
    m.get_memory_info = _memory_info
    m.get_memory_usage = lambda device: _memory_info(device)["current"]
    m.reset_memory_stats = _reset_memory_stats
    m.get_device_details = _device_details

    def enable_tensor_float_32_execution(enabled) -> None:
        _state.tf32 = bool(enabled)

    m.enable_tensor_float_32_execution = enable_tensor_float_32_execution
    m.tensor_float_32_execution_enabled = lambda: _state.tf32

    def set_synchronous_execution(enable) -> None:
        _state.synchronous = bool(enable)

    m.set_synchronous_execution = set_synchronous_execution
    m.get_synchronous_execution = lambda: _state.synchronous

    def set_device_policy(device_policy) -> None:
        if device_policy not in (None, "silent", "warn", "explicit", "silent_for_int32"):
            raise ValueError(f"Not a valid device policy: {device_policy!r}")
        _state.device_policy = device_policy or "silent"

    m.set_device_policy = set_device_policy
    m.get_device_policy = lambda: _state.device_policy
    return m


def _reset_memory_stats(device) -> None:
    """The peak becomes the bytes in use now (a GPU's pool); a CPU has none to reset."""
    kind, index = _parse_device(device)
    if kind == "GPU":
        from asyncflow.devices import gpu

        shown = [int(d.name.rsplit(":", 1)[1]) for d in get_visible_devices("GPU")]
        phys = gpu._physical(gpu.backend(), shown[index])
        phys.peak = phys.used()
    else:
        list_logical_devices(kind)  # (the device must exist: TF's NotFoundError)


threading = _threading_module()  # TF's name for the namespace
optimizer = _optimizer_module()
experimental = _experimental_module()
