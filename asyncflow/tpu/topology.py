"""TPU topologies and device assignments as plain Python, as TF's CPU build has them:
`Topology` (a TPU slice's mesh and where each task's devices sit in it, read from or
written as a serialized `tensorflow.tpu.TopologyProto`), `DeviceAssignment` (replicas'
logical cores -> mesh coordinates, and `DeviceAssignment.build`'s placement),
`DeviceOrderMode`, `HardwareFeature` and `TPUSystemMetadata`.

Nothing here needs a TPU: TF computes these from a topology that a TPU system reports,
and a test can write one by hand.  The TopologyProto message is built from its
descriptor at first use, as experimental_runtime builds device_filters.proto's.
"""

from __future__ import annotations

import collections
import enum
import math

import numpy as np

__all__ = [
    "DeviceAssignment",
    "DeviceOrderMode",
    "HardwareFeature",
    "TPUSystemMetadata",
    "Topology",
    "topology_proto_class",
]

_PROTOS: dict = {}


def topology_proto_class(name: str = "TopologyProto"):
    """TF's `tensorflow.tpu.TopologyProto` (or `TPUHardwareFeature`) message class."""
    if not _PROTOS:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        package = "asyncflow.tensorflow.tpu"
        f = descriptor_pb2.FileDescriptorProto(
            name="asyncflow/protos/tpu_topology.proto", package=package, syntax="proto3"
        )
        fd = descriptor_pb2.FieldDescriptorProto
        feature = f.message_type.add(name="TPUHardwareFeature")
        kinds = feature.enum_type.add(name="EmbeddingFeature")
        for number, value in enumerate(("UNSUPPORTED", "V1", "V2")):
            kinds.value.add(name=value, number=number)
        feature.field.add(name="embedding_feature", number=1, type=fd.TYPE_ENUM,
                          type_name=f".{package}.TPUHardwareFeature.EmbeddingFeature",
                          label=fd.LABEL_OPTIONAL)  # fmt: skip
        feature.field.add(name="num_embedding_devices_per_chip", number=2,
                          type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)  # fmt: skip
        topo = f.message_type.add(name="TopologyProto")
        for number, field in enumerate(
            ("mesh_shape", "num_tasks", "num_tpu_devices_per_task", "device_coordinates"), 1
        ):
            label = fd.LABEL_REPEATED if number in (1, 4) else fd.LABEL_OPTIONAL
            topo.field.add(name=field, number=number, type=fd.TYPE_INT32, label=label)
        topo.field.add(name="tpu_hardware_feature", number=5, type=fd.TYPE_MESSAGE,
                       type_name=f".{package}.TPUHardwareFeature",
                       label=fd.LABEL_OPTIONAL)  # fmt: skip
        pool = descriptor_pool.Default()
        try:
            pool.FindMessageTypeByName(f"{package}.TopologyProto")
        except KeyError:
            pool.Add(f)
        for message in ("TopologyProto", "TPUHardwareFeature"):
            descriptor = pool.FindMessageTypeByName(f"{package}.{message}")
            _PROTOS[message] = message_factory.GetMessageClass(descriptor)
    return _PROTOS[name]


def _tpu_device_name(job, task, device) -> str:
    prefix = "" if job is None else f"/job:{job}"
    return f"{prefix}/task:{task}/device:TPU:{device}"


def _host_device_name(job, task) -> str:
    prefix = "" if job is None else f"/job:{job}"
    return f"{prefix}/task:{task}/device:CPU:0"


class Topology:
    """`tf.tpu.experimental.Topology`: a TPU slice's 4-d mesh (x, y, z, core) and
    `device_coordinates[task, device]`, each device's place in it.

    Raises:
      ValueError: a mesh that is not 4 positive sizes, coordinates that are not a
        [tasks, devices, 4] array, or a serialized proto whose sizes disagree.
      google.protobuf.message.DecodeError: `serialized` is not a TopologyProto.
    """

    def __init__(self, serialized=None, mesh_shape=None, device_coordinates=None):
        self._serialized = serialized
        if serialized:
            self._parse(serialized)
        else:
            self._mesh_shape = np.asarray(mesh_shape, dtype=np.int32)
            self._device_coordinates = np.asarray(device_coordinates, dtype=np.int32)
            if len(self._mesh_shape) != 4 or any(self._mesh_shape < 1):
                raise ValueError(
                    "`mesh_shape` must be a sequence of 4 positive "
                    f"entries; got `mesh_shape={self._mesh_shape}`"
                )
            coords = self._device_coordinates
            if len(coords.shape) != 3 or coords.shape[2] != len(self._mesh_shape):
                # (TF's message, its missing space included)
                raise ValueError(
                    "`device_coordinates` must be a rank 3 int32 array with minor dimension "
                    "equal to the `mesh_shape` rankgot device_coordinates.shape="
                    f"{coords.shape} len(device_coordinates.shape)={len(coords.shape)} "
                    f"device_coordinates.shape[2]={coords.shape[2]} mesh_shape="
                    f"{self._mesh_shape}, len(mesh_shape)={len(self._mesh_shape)}"
                )
        self._tasks, self._devices = self._invert()
        self._missing_devices = np.argwhere(self._tasks < 0)

    def _parse(self, serialized) -> None:
        from google.protobuf.message import DecodeError

        proto = topology_proto_class()()
        try:
            proto.ParseFromString(serialized)
        except DecodeError as e:
            # (named as TF's message, not by the package this copy lives in)
            raise DecodeError(str(e).replace("asyncflow.tensorflow.", "tensorflow.")) from None
        self._mesh_shape = np.array(proto.mesh_shape, dtype=np.int32)
        if len(self._mesh_shape) != 4 or any(self._mesh_shape < 1):
            raise ValueError(
                "`mesh_shape` must be a vector of size 4 with positive "
                f"entries; got {self._mesh_shape}"
            )
        if proto.num_tasks < 0:
            raise ValueError(f"`num_tasks` must be >= 0; got {proto.num_tasks}")
        if proto.num_tpu_devices_per_task < 0:
            raise ValueError(
                f"`num_tpu_devices_per_task` must be >= 0; got {proto.num_tpu_devices_per_task}"
            )
        expected = proto.num_tasks * proto.num_tpu_devices_per_task * len(proto.mesh_shape)
        if len(proto.device_coordinates) != expected:
            raise ValueError(
                f"`device_coordinates` must have shape num_tasks ({proto.num_tasks}) * "
                f"num_tpu_devices_per_task ({proto.num_tpu_devices_per_task}) * "
                f"len(mesh_shape) ({list(proto.mesh_shape)}); got shape "
                f"{len(proto.device_coordinates)}"
            )
        coords = np.array(proto.device_coordinates, dtype=np.int32)
        if any(coords < 0):
            raise ValueError(f"All values in `device_coordinates` must be >= 0, got {coords}")
        self._device_coordinates = coords.reshape(
            (proto.num_tasks, proto.num_tpu_devices_per_task, len(proto.mesh_shape))
        )

    def _invert(self):
        """[x, y, z, core] -> task and -> device ordinal (-1 where no device is)."""
        tasks = np.full(list(self._mesh_shape), -1, dtype=np.int32)
        devices = np.full(list(self._mesh_shape), -1, dtype=np.int32)
        for task, row in enumerate(self._device_coordinates):
            for device, coords in enumerate(row):
                tasks[tuple(coords)] = task
                devices[tuple(coords)] = device
        return tasks, devices

    @property
    def mesh_shape(self):
        """The mesh's shape, an int32 vector (x, y, z, cores per chip)."""
        return self._mesh_shape

    @property
    def mesh_rank(self) -> int:
        return len(self._mesh_shape)

    @property
    def device_coordinates(self):
        """An int32 [tasks, devices, 4] array: each task's devices' coordinates."""
        return self._device_coordinates

    @property
    def missing_devices(self):
        """The coordinates in the mesh that no device occupies."""
        return self._missing_devices

    @property
    def num_tasks(self) -> int:
        return self._device_coordinates.shape[0]

    @property
    def num_tpus_per_task(self) -> int:
        return self._device_coordinates.shape[1]

    def task_ordinal_at_coordinates(self, device_coordinates):
        return self._tasks[tuple(device_coordinates)]

    def tpu_device_ordinal_at_coordinates(self, device_coordinates):
        return self._devices[tuple(device_coordinates)]

    def cpu_device_name_at_coordinates(self, device_coordinates, job=None) -> str:
        """The host CPU device of the task holding the device at these coordinates."""
        return _host_device_name(job, self._tasks[tuple(device_coordinates)])

    def tpu_device_name_at_coordinates(self, device_coordinates, job=None) -> str:
        at = tuple(device_coordinates)
        return _tpu_device_name(job, self._tasks[at], self._devices[at])

    def serialized(self) -> bytes:
        """The topology as a serialized TopologyProto (what it was read from, if so)."""
        if self._serialized is None:
            proto = topology_proto_class()()
            proto.mesh_shape[:] = [int(v) for v in self._mesh_shape]
            proto.num_tasks = self._device_coordinates.shape[0]
            proto.num_tpu_devices_per_task = self._device_coordinates.shape[1]
            proto.device_coordinates.extend(int(v) for v in self._device_coordinates.flat)
            self._serialized = proto.SerializeToString()
        return self._serialized


class DeviceOrderMode(enum.IntEnum):
    """How `DeviceAssignment.build` orders replicas: AUTO (a ring where the whole
    mesh is replicated, else the mesh order), RING, or MESH."""

    AUTO = 0
    RING = 1
    MESH = 2


class DeviceAssignment:
    """`tf.tpu.experimental.DeviceAssignment`: `core_assignment[replica, logical
    core]`, each logical core's coordinates in `topology`'s mesh.

    Raises:
      ValueError: `topology` is not a Topology, or `core_assignment` is not a rank 3
        array whose last axis is the mesh's rank.
    """

    def __init__(self, topology: Topology, core_assignment):
        if not isinstance(topology, Topology):
            raise ValueError(f"topology must be a Topology object, got {type(topology)}")
        core_assignment = np.asarray(core_assignment, dtype=np.int32)
        self._topology = topology
        if core_assignment.ndim != 3:
            raise ValueError(
                f"core_assignment must be a rank 3 numpy array, got shape {core_assignment.shape}"
            )
        self._num_replicas, self._num_cores_per_replica = core_assignment.shape[:2]
        if core_assignment.shape[-1] != topology.mesh_rank:
            raise ValueError(
                "core_assignment.shape[-1] must have size equal to topology "
                f"rank ({topology.mesh_rank}), got core_assignment.shape={core_assignment.shape}"
            )
        self._core_assignment = core_assignment
        # task -> logical core -> the sorted replicas placed there
        by_task: dict = {}
        for replica in range(self._num_replicas):
            for core in range(self._num_cores_per_replica):
                task = topology.task_ordinal_at_coordinates(core_assignment[replica, core])
                by_task.setdefault(task, {}).setdefault(core, set()).add(replica)
        self._replicas_at = {
            t: {c: sorted(r) for c, r in cores.items()} for t, cores in by_task.items()
        }

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def num_cores_per_replica(self) -> int:
        return self._num_cores_per_replica

    @property
    def num_replicas(self) -> int:
        return self._num_replicas

    @property
    def core_assignment(self):
        """An int32 [replicas, cores per replica, mesh rank] array."""
        return self._core_assignment

    def coordinates(self, replica: int, logical_core: int) -> tuple:
        return tuple(self._core_assignment[replica, logical_core, :])

    def lookup_replicas(self, task_id: int, logical_core: int) -> list:
        """The replicas whose `logical_core` sits on task `task_id`.

        Raises:
          ValueError: none does.
        """
        try:
            return self._replicas_at[task_id][logical_core]
        except KeyError:
            raise ValueError(
                f"Can not find any replica in task: {task_id} contains "
                f"logical_core: {logical_core} "
            ) from None

    def tpu_ordinal(self, replica: int = 0, logical_core: int = 0):
        return self._topology.tpu_device_ordinal_at_coordinates(
            self.coordinates(replica, logical_core)
        )

    def host_device(self, replica: int = 0, logical_core: int = 0, job=None) -> str:
        return self._topology.cpu_device_name_at_coordinates(
            self.coordinates(replica, logical_core), job=job
        )

    def tpu_device(self, replica: int = 0, logical_core: int = 0, job=None) -> str:
        return self._topology.tpu_device_name_at_coordinates(
            self.coordinates(replica, logical_core), job=job
        )

    @classmethod
    def build(cls, topology, computation_shape=None, computation_stride=None,
              num_replicas=1, device_order_mode=DeviceOrderMode.AUTO):  # fmt: skip
        """`num_replicas` computations of `computation_shape` cores each (every
        `computation_stride` apart) laid out over `topology`'s mesh.

        Raises:
          ValueError: shapes of the wrong rank or not positive, more replicas than
            fit, or RING where the whole mesh is not replicated in 3-d tiles.
        """
        return _build(topology, computation_shape, computation_stride, num_replicas,
                      device_order_mode)  # fmt: skip


def _ring_2d_open(x_size: int, y_size: int, z: int) -> list:
    """A ring over an x-by-y plane without (0, 0): snake along x in row pairs, then
    back down the y axis at x = 0."""
    out = []
    for pair in range(y_size // 2):
        out.extend((x, 2 * pair, z) for x in range(1, x_size))
        out.extend((x, 2 * pair + 1, z) for x in range(x_size - 1, 0, -1))
    out.extend((0, y, z) for y in range(y_size - 1, 0, -1))
    return out


def _ring_3d(x_size: int, y_size: int, z_size: int) -> list:
    """The mesh positions of an x-by-y-by-z block in ring order."""
    sizes = (x_size, y_size, z_size)
    if sum(s > 1 for s in sizes) <= 1:  # a line (or a point)
        axis = next((i for i, s in enumerate(sizes) if s > 1), 2)
        return [tuple(i if a == axis else 0 for a in range(3)) for i in range(sizes[axis])]
    if any(s > 1 and s % 2 for s in sizes):
        return [(x, y, z) for z in range(z_size) for y in range(y_size) for x in range(x_size)]
    out = [(0, 0, 0)]
    if z_size == 1:
        return out + _ring_2d_open(x_size, y_size, 0)
    if y_size == 1:
        return out + [(x, y, z) for (x, z, y) in _ring_2d_open(x_size, z_size, 0)]
    if x_size == 1:
        return out + [(x, y, z) for (y, z, x) in _ring_2d_open(y_size, z_size, 0)]
    for z in range(z_size):
        plane = _ring_2d_open(x_size, y_size, z)
        out.extend(plane if z % 2 == 0 else reversed(plane))
    out.extend((0, 0, z) for z in range(z_size - 1, 0, -1))
    return out


def _as_shape(value, rank: int, what: str):
    if value is None:
        return np.ones([rank], dtype=np.int32)
    value = np.asarray(value, dtype=np.int32)
    if value.shape != (rank,):
        raise ValueError(f"{what} must have shape [{rank}]; got {value.shape}")
    return value


def _replica_shape(replica_counts, num_replicas: int, rank: int) -> list:
    """How many replicas lie along each axis: the smallest axes (ties: the later
    axis first, the core axis last) take about the remaining count's root."""
    shape = [0] * rank
    remaining, dims_left = num_replicas, rank
    order = sorted((count, (i + 1) % rank) for i, count in enumerate(replica_counts))
    for count, shifted in order:
        axis = (shifted + rank - 1) % rank
        shape[axis] = min(int(math.ceil(remaining ** (1.0 / dims_left))), count)
        remaining = -(-remaining // shape[axis])
        dims_left -= 1
    return shape


def _build(topology, computation_shape, computation_stride, num_replicas, device_order_mode):
    if isinstance(topology, bytes):
        topology = Topology(serialized=topology)
    if not isinstance(topology, Topology):
        raise ValueError(f"`topology` is not a Topology object; got {type(topology)}")
    rank = len(topology.mesh_shape)
    mesh = topology.mesh_shape
    shape = _as_shape(computation_shape, rank, "computation_shape")
    stride = _as_shape(computation_stride, rank, "computation_stride")
    if any(shape < 1):
        raise ValueError(f"computation_shape must be positive; got computation_shape={shape}")
    if any(stride < 1):
        raise ValueError(f"computation_stride must be positive; got computation_stride={stride}")
    footprint = shape * stride
    if any(footprint > mesh):
        raise ValueError(
            f"computation footprint {footprint} does not fit in TPU topology shape {mesh}"
        )
    replica_counts = (mesh // footprint) * stride
    max_replicas = np.prod(replica_counts)
    if num_replicas > max_replicas:
        raise ValueError(
            f"requested {num_replicas} replicas but only {max_replicas} replicas with shape "
            f"{shape} and computation_stride {stride} fit in a TPU mesh of shape {mesh}"
        )
    if topology.missing_devices.size:
        # Devices are missing from the mesh: replicas take the devices in task order.
        per_replica = int(np.prod(shape))
        coords = topology.device_coordinates.reshape(-1, rank)
        assignment = [
            [coords[r * per_replica + i] for i in range(per_replica)] for r in range(num_replicas)
        ]
        return DeviceAssignment(topology, np.asarray(assignment))
    replica_shape = _replica_shape(replica_counts, num_replicas, rank) if num_replicas > 0 else []
    ring = (
        rank == 4
        and shape[-1] == mesh[-1]
        and np.prod(stride) == 1
        and num_replicas == max_replicas
    )
    if device_order_mode != DeviceOrderMode.AUTO:
        if device_order_mode == DeviceOrderMode.RING and not ring:
            raise ValueError(
                "device_order_mode=DeviceOrderMode.RING is not compatible with the "
                "3D tiling current topology.  Try setting "
                "device_order_mode=DeviceOrderMode.AUTO"
            )
        ring = device_order_mode == DeviceOrderMode.RING
    if ring:
        inner = _ring_3d(*shape[:3])
        outer = _ring_3d(*replica_shape[:3])
        assignment = []
        for replica in range(num_replicas):
            ox, oy, oz = outer[replica]
            cores = []
            for index in range(int(np.prod(shape))):
                ix, iy, iz = inner[index // mesh[-1]]
                cores.append([ox * shape[0] + ix, oy * shape[1] + iy, oz * shape[2] + iz,
                              index % mesh[-1]])  # fmt: skip
            assignment.append(cores)
        return DeviceAssignment(topology, np.asarray(assignment))
    # Mesh order: replica r's position counts along the core axis first, then x, y, z.
    offsets = np.full([num_replicas, rank], -1, dtype=np.int32)
    radices = [replica_shape[-1], *replica_shape[:-1]]
    for replica in range(num_replicas):
        digits, t = [], replica
        for radix in radices:
            digits.append(t % radix)
            t //= radix
        position = np.array(digits[1:] + digits[:1])
        offsets[replica] = (position // stride) * footprint + position % stride
    grid = np.meshgrid(*[np.arange(0, shape[i] * stride[i], stride[i]) for i in range(rank)],
                       indexing="ij")  # fmt: skip
    cores = np.stack(grid, axis=-1).reshape(-1, rank)
    return DeviceAssignment(topology, cores + offsets[:, np.newaxis, :])


class HardwareFeature:
    """`tf.tpu.experimental.HardwareFeature`: a TPU system's features, from its
    TPUHardwareFeature proto."""

    class EmbeddingFeature(enum.Enum):
        """The embedding accelerator a TPU has: UNSUPPORTED, V1 (lookups only at the
        start of a computation) or V2 (anywhere)."""

        UNSUPPORTED = "UNSUPPORTED"
        V1 = "V1"
        V2 = "V2"

    def __init__(self, tpu_hardware_feature_proto):
        self.tpu_hardware_feature_proto = tpu_hardware_feature_proto

    @classmethod
    def _embedding_feature_proto_to_string(cls, embedding_feature_proto):
        names = {0: "UNSUPPORTED", 1: "V1", 2: "V2"}
        return cls.EmbeddingFeature(names.get(embedding_feature_proto, "UNSUPPORTED"))

    @property
    def embedding_feature(self):
        """The proto's EmbeddingFeature."""
        return self._embedding_feature_proto_to_string(
            self.tpu_hardware_feature_proto.embedding_feature
        )

    @property
    def num_embedding_devices_per_chip(self) -> int:
        return self.tpu_hardware_feature_proto.num_embedding_devices_per_chip


TPUSystemMetadata = collections.namedtuple(
    "TPUSystemMetadata", ["num_cores", "num_hosts", "num_of_cores_per_host", "topology", "devices"]
)
TPUSystemMetadata.__doc__ = """`tf.tpu.experimental.TPUSystemMetadata`: what
initializing a TPU system found (cores, hosts, cores per host, its Topology, devices)."""
