"""Rendezvous: where a step's Send deposits a tensor and its Recv picks it up.

The protocol (`Rendezvous`): `send_nowait(key, value, device)` never blocks;
`async recv(key, device)` returns the value once it has been sent, on the receiving
device (the rendezvous makes the device copy, as TF's same-worker receive does);
`abort(error)` fails every pending and later `recv` with the step's error.  Keys are
TF's: "src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id", where the
incarnation is the sending device's (random per process start) and the frame and
iteration tag a value sent inside a loop.  One rendezvous serves one step, so nothing
leaks into later steps.  `LocalRendezvous` serves the devices of one process; a remote
rendezvous (TCP) implements the same protocol.

Invariant: a key holds either one value waiting for its Recv or one future waiting for
its Send, never both; each key is used once per step.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from asyncflow import errors, kernel_api
from asyncflow.kernel_api import DEAD

__all__ = ["LocalRendezvous", "Rendezvous", "create_key", "parse_key"]


def create_key(
    src_device: str,
    src_incarnation: int,
    dst_device: str,
    tensor_name: str,
    frame_iter: tuple[int, int] = (0, 0),
) -> str:
    return (
        f"{src_device};{src_incarnation:016x};{dst_device};{tensor_name};"
        f"{frame_iter[0]}:{frame_iter[1]}"
    )


def parse_key(key: str) -> tuple[str, int, str, str, str]:
    """(src_device, src_incarnation, dst_device, tensor_name, "frame:iter") of a key.

    Raises InvalidArgumentError for a malformed key (a remote peer's, say)."""
    parts = key.split(";")
    if len(parts) != 5:
        raise errors.InvalidArgumentError(None, None, f"Invalid rendezvous key: {key}")
    try:
        incarnation = int(parts[1], 16)
    except ValueError:
        raise errors.InvalidArgumentError(None, None, f"Invalid rendezvous key: {key}") from None
    return parts[0], incarnation, parts[2], parts[3], parts[4]


class Rendezvous(Protocol):
    """What Send/Recv kernels and the partitioner rely on; local and remote alike."""

    def send_nowait(self, key: str, value: Any, device: Any = None) -> None:
        """Deposit `value` (living on `device`; None: host memory) under `key`."""

    async def recv(self, key: str, device: Any = None) -> Any:
        """The value sent under `key`, on `device` (None: as it was sent)."""

    def abort(self, error: BaseException) -> None:
        """Fail every pending and later `recv` with `error`."""


class LocalRendezvous:
    """The rendezvous of one step among the devices of this process."""

    __slots__ = ("_table", "_error")

    def __init__(self):
        self._table: dict[str, object] = {}
        self._error: BaseException | None = None

    def send_nowait(self, key: str, value, device=None) -> None:
        """Deposit `value` under `key`; wakes the Recv waiting for it.  Never blocks."""
        if self._error is not None:
            raise self._error
        waiting = self._table.pop(key, None)
        if waiting is None:
            self._table[key] = _Value(value, device)
        elif isinstance(waiting, asyncio.Future):
            if not waiting.done():
                waiting.set_result(_Value(value, device))
        else:
            self._table[key] = waiting
            raise errors.InternalError(None, None, f"Duplicated send: {key}")

    def recv_nowait(self, key: str):
        """The value under `key` if it has been sent (as sent, no device copy); raises
        KeyError otherwise."""
        if self._error is not None:
            raise self._error
        item = self._table.get(key)
        if isinstance(item, _Value):
            del self._table[key]
            return item.value
        raise KeyError(key)

    async def recv(self, key: str, device=None):
        """Wait for the value sent under `key`; on `device` when one is given.

        Raises the step's error if the step was aborted (before or while waiting).
        """
        if self._error is not None:
            raise self._error
        item = self._table.pop(key, None)
        if item is None:
            fut = asyncio.get_running_loop().create_future()
            self._table[key] = fut
            try:
                item = await fut
            finally:
                if self._table.get(key) is fut:
                    del self._table[key]
        elif not isinstance(item, _Value):
            self._table[key] = item
            raise errors.InternalError(None, None, f"Duplicated recv: {key}")
        value, src = item.value, item.device
        if device is None or src is None or src is device or value is DEAD:
            return value
        return await device.copy_from_device(value, src)

    def abort(self, error: BaseException) -> None:
        """Fail every pending Recv (and every later one) with `error`."""
        if self._error is not None:
            return
        self._error = error
        for item in list(self._table.values()):
            if isinstance(item, asyncio.Future) and not item.done():
                item.set_exception(error)
                # (its Recv may be dropped before it wakes, with the step: the step
                # reports the error, so asyncio need not log it as never retrieved)
                item.exception()
        self._table.clear()

    @property
    def pending(self) -> int:
        return len(self._table)


class _Value:
    __slots__ = ("value", "device")

    def __init__(self, value, device):
        self.value = value
        self.device = device


kernel_api.LOCAL_RENDEZVOUS.append(LocalRendezvous)  # (steps of one partition: Send / Recv)
