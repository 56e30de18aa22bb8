"""Rendezvous: where a step's Send deposits a tensor and its Recv picks it up.

One rendezvous per step (so nothing leaks into later steps), keyed as TF keys it:
"src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id".  `send_nowait`
never blocks; `recv` returns at once when the value is there and otherwise suspends on
a future.  `abort(error)` fails every pending and later `recv` with the step's error.

This is the interface a remote rendezvous (TCP) and a GPU copy implement too:
`send_nowait(key, value)`, `async recv(key)`, `abort(error)`.

Invariant: a key holds either one value waiting for its Recv or one future waiting for
its Send, never both; each key is used once per step.
"""

from __future__ import annotations

import asyncio

from asyncflow import errors

__all__ = ["LocalRendezvous", "create_key"]


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


class LocalRendezvous:
    __slots__ = ("_table", "_error")

    def __init__(self):
        self._table: dict[str, object] = {}
        self._error: BaseException | None = None

    def send_nowait(self, key: str, value) -> None:
        """Deposit `value` under `key`; wakes the Recv waiting for it.  Never blocks."""
        if self._error is not None:
            raise self._error
        waiting = self._table.pop(key, None)
        if waiting is None:
            self._table[key] = _Value(value)
        elif isinstance(waiting, asyncio.Future):
            if not waiting.done():
                waiting.set_result(value)
        else:
            self._table[key] = waiting
            raise errors.InternalError(None, None, f"Duplicated send: {key}")

    def recv_nowait(self, key: str):
        """The value under `key` if it has been sent; raises KeyError otherwise."""
        if self._error is not None:
            raise self._error
        item = self._table.get(key)
        if isinstance(item, _Value):
            del self._table[key]
            return item.value
        raise KeyError(key)

    async def recv(self, key: str):
        """Wait for the value sent under `key`.

        Raises the step's error if the step was aborted (before or while waiting).
        """
        if self._error is not None:
            raise self._error
        item = self._table.pop(key, None)
        if isinstance(item, _Value):
            return item.value
        if item is not None:
            self._table[key] = item
            raise errors.InternalError(None, None, f"Duplicated recv: {key}")
        fut = asyncio.get_running_loop().create_future()
        self._table[key] = fut
        try:
            return await fut
        finally:
            if self._table.get(key) is fut:
                del self._table[key]

    def abort(self, error: BaseException) -> None:
        """Fail every pending Recv (and every later one) with `error`."""
        if self._error is not None:
            return
        self._error = error
        for item in list(self._table.values()):
            if isinstance(item, asyncio.Future) and not item.done():
                item.set_exception(error)
        self._table.clear()

    @property
    def pending(self) -> int:
        return len(self._table)


class _Value:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value
