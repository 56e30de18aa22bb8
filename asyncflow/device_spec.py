"""TF device names (``tf.DeviceSpec``, v1 flavour) and ``with tf.device(...)`` merging.

A device name is ``/job:<name>/replica:<int>/task:<int>/device:<TYPE>:<int|*>``; every
field is optional. Short forms (``/cpu:0``, ``gpu``, ``CPU:1``) are accepted.

Invariants:
- Unset fields are ``None``; ``'*'`` as an index parses to ``None``.
- ``cpu``/``gpu`` device types are stored upper-case (``CPU``/``GPU``).
- ``to_string`` emits set fields in TF's order: job, replica, task, device.
- Malformed strings raise ``ValueError`` naming the whole string.
"""

from __future__ import annotations

import copy
from typing import Any

_UPPERCASED_TYPES = ("cpu", "gpu")


def _normalize_type(device_type: str | None) -> str | None:
    if device_type is not None and device_type.lower() in _UPPERCASED_TYPES:
        return device_type.upper()
    return device_type


def _parse_index(text: str, spec: str) -> int | None:
    if text == "*":
        return None
    if not text.isdigit():
        raise ValueError(f"Invalid device index '{text}' in device spec '{spec}'")
    return int(text)


class DeviceSpec:
    """A (possibly partial) device specification; mutable, as in TF1.

    ``DeviceSpec(job="ps", task=0).to_string() == "/job:ps/task:0"``.
    """

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index")

    def __init__(
        self,
        job: str | None = None,
        replica: int | None = None,
        task: int | None = None,
        device_type: str | None = None,
        device_index: int | None = None,
    ):
        self.job = job
        self.replica = replica
        self.task = task
        self.device_type = device_type
        self.device_index = device_index

    @property
    def job(self) -> str | None:
        return self._job

    @job.setter
    def job(self, job: str | None) -> None:
        self._job = None if job is None else str(job)

    @property
    def replica(self) -> int | None:
        return self._replica

    @replica.setter
    def replica(self, replica: Any) -> None:
        self._replica = None if replica is None else int(replica)

    @property
    def task(self) -> int | None:
        return self._task

    @task.setter
    def task(self, task: Any) -> None:
        self._task = None if task is None else int(task)

    @property
    def device_type(self) -> str | None:
        return self._device_type

    @device_type.setter
    def device_type(self, device_type: str | None) -> None:
        self._device_type = _normalize_type(device_type)

    @property
    def device_index(self) -> int | None:
        return self._device_index

    @device_index.setter
    def device_index(self, device_index: Any) -> None:
        self._device_index = None if device_index is None else int(device_index)

    def _clear(self) -> None:
        self._job = self._replica = self._task = None
        self._device_type = self._device_index = None

    def parse_from_string(self, spec: str) -> DeviceSpec:
        """Replaces every field with those parsed from ``spec``; returns ``self``.

        Raises:
          ValueError: if ``spec`` is malformed (unknown attribute, empty job, bad index,
            several device types).
        """
        self._clear()
        for part in (spec or "").split("/"):
            if part:
                self._parse_part(part, spec)
        return self

    def _parse_part(self, part: str, spec: str) -> None:
        fields = part.split(":")
        key, n = fields[0], len(fields)
        if n == 2 and key in ("job", "replica", "task"):
            if not fields[1]:
                raise ValueError(f"Empty '{key}' in device spec '{spec}'")
            if key == "job":
                self._job = fields[1]
            elif not fields[1].isdigit():
                raise ValueError(f"Invalid {key} '{fields[1]}' in device spec '{spec}'")
            else:
                setattr(self, "_" + key, int(fields[1]))
            return
        if n in (1, 2) and key.lower() in _UPPERCASED_TYPES:
            device_type, index = key, fields[1] if n == 2 else "*"
        elif n == 3 and key == "device" and fields[1]:
            device_type, index = fields[1], fields[2]
        else:
            raise ValueError(f"Unknown attribute: '{key}' in device spec '{spec}'")
        if self._device_type is not None:
            raise ValueError(f"Cannot specify multiple device types: {spec}")
        self._device_type = _normalize_type(device_type)
        self._device_index = _parse_index(index, spec)

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        """Constructs a ``DeviceSpec`` from a (full or short) device string.

        Raises:
          ValueError: if ``spec`` is malformed.
        """
        return cls().parse_from_string(spec)

    def merge_from(self, dev: DeviceSpec) -> None:
        """Overrides this spec's fields with those set in ``dev`` (in place)."""
        for name in ("job", "replica", "task", "device_type", "device_index"):
            value = getattr(dev, name)
            if value is not None:
                setattr(self, "_" + name, value)

    def make_merged_spec(self, dev: DeviceSpec) -> DeviceSpec:
        """Returns a new spec: a copy of ``self`` merged with ``dev``."""
        result = copy.copy(self)
        result.merge_from(dev)
        return result

    def to_string(self) -> str:
        """The device name of the set fields, e.g. ``/job:ps/device:CPU:0``.

        As in TF, a device index without a device type is not printed.
        """
        out = []
        if self._job is not None:
            out.append(f"/job:{self._job}")
        if self._replica is not None:
            out.append(f"/replica:{self._replica}")
        if self._task is not None:
            out.append(f"/task:{self._task}")
        if self._device_type is not None:
            index = "*" if self._device_index is None else self._device_index
            out.append(f"/device:{self._device_type}:{index}")
        return "".join(out)

    def __copy__(self) -> DeviceSpec:
        return DeviceSpec(
            self._job, self._replica, self._task, self._device_type, self._device_index
        )

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return (
            f"<DeviceSpec(job={self._job!r}, replica={self._replica!r}, task={self._task!r}, "
            f"device_type={self._device_type!r}, device_index={self._device_index!r})>"
        )


def _as_spec(device: str | DeviceSpec | None) -> DeviceSpec:
    if isinstance(device, DeviceSpec):
        return device
    return DeviceSpec.from_string(device or "")


def canonical_name(device: str | DeviceSpec | None) -> str:
    """The normalized full-form name of ``device``'s set fields ('' for None or '').

    ``canonical_name('/gpu:0') == '/device:GPU:0'``.

    Raises:
      ValueError: if ``device`` is a malformed string.
    """
    return _as_spec(device).to_string()


def merge_device(outer: str | DeviceSpec | None, inner: str | DeviceSpec | None) -> str:
    """The device in effect for ``with tf.device(outer): with tf.device(inner):``.

    Fields set by ``inner`` override ``outer``'s; ``inner=None`` clears the device
    (``tf.device(None)``) and ``inner=''`` inherits ``outer`` unchanged.

    Raises:
      ValueError: if either argument is a malformed string.
    """
    if inner is None:
        return ""
    return _as_spec(outer).make_merged_spec(_as_spec(inner)).to_string()
