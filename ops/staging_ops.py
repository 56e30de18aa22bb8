"""Staging areas: Stage/Unstage/StagePeek/StageSize/StageClear and the (Ordered)Map*
family, the ops behind TF's data_flow_ops.StagingArea and MapStagingArea.

A staging area is a resource found by `shared_name` (else the op's own name) in the
step's container: a FIFO buffer of tuples (Stage*), or a map from int64 keys to tuples
(Map*, insertion order; OrderedMap*, key order).  Map puts may be partial (`indices`
names the components given): a key's tuple waits in the incomplete map until every
component is there, then moves to the map that gets and peeks read.  A get takes the
components it names and the key goes once all are taken.

Blocking: a put waits while the area is at `capacity` tuples or `memory_limit` bytes
(0: no limit); a get or peek waits until its element (or key) is there.  A waiting
kernel suspends on a future and wakes on every change; a cancelled step cancels it.

Invariant: `nbytes` is the bytes of the tuples in the buffer (the complete map).
"""

from __future__ import annotations

import asyncio
import collections

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []

_TYPES = TypeConstraint(None, is_list=True)
_ATTRS = {"capacity": 0, "memory_limit": 0, "dtypes": _TYPES, "container": "", "shared_name": ""}


def _nbytes(values) -> int:
    return sum(np.asarray(v).nbytes for v in values)


class _Area:
    """The state shared by both kinds: limits, byte count, waiters."""

    def __init__(self, name: str, capacity: int, memory_limit: int):
        self.name = name
        self.capacity, self.memory_limit = capacity, memory_limit
        self.nbytes = 0
        self._waiters: list[asyncio.Future] = []

    async def wait(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def check_fits(self, size: int) -> None:
        if self.memory_limit and size > self.memory_limit:
            raise errors.ResourceExhaustedError(
                None,
                None,
                f"Attempted to insert tensors with combined size of '{size}' bytes into "
                f"Staging Area with a memory limit of '{self.memory_limit}'.",
            )

    def full(self, count: int, size: int) -> bool:
        return bool(
            (self.capacity and count >= self.capacity)
            or (self.memory_limit and self.nbytes + size > self.memory_limit)
        )


class _Buffer(_Area):
    def __init__(self, name, capacity, memory_limit):
        super().__init__(name, capacity, memory_limit)
        self.items: collections.deque = collections.deque()

    async def put(self, values) -> None:
        size = _nbytes(values)
        self.check_fits(size)
        while self.full(len(self.items), size):
            await self.wait()
        self.items.append(values)
        self.nbytes += size
        self.notify()

    async def get(self):
        while not self.items:
            await self.wait()
        values = self.items.popleft()
        self.nbytes -= _nbytes(values)
        self.notify()
        return values

    async def peek(self, index: int):
        while len(self.items) <= index:
            await self.wait()
        return self.items[index]

    def clear(self) -> None:
        self.items.clear()
        self.nbytes = 0
        self.notify()


class _Map(_Area):
    def __init__(self, name, capacity, memory_limit, ordered: bool, size: int):
        super().__init__(name, capacity, memory_limit)
        self.ordered, self.size = ordered, size
        self.complete: dict[int, list] = {}
        self.incomplete: dict[int, list] = {}

    async def put(self, key: int, indices: list[int], values) -> None:
        for i in indices:
            if not 0 <= i < self.size:
                raise errors.InvalidArgumentError(
                    None, None, f"Index '{i}' for key '{key}' was out of bounds '{self.size}'."
                )
        tup = self.incomplete.get(key)
        if tup is None:
            tup = [None] * self.size
        for i, v in zip(indices, values, strict=True):
            if tup[i] is not None:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"The tensor for index '{i}' for key '{key}' was already initialized "
                    f"'{self.size}'.",
                )
            tup[i] = v
        if any(v is None for v in tup):
            self.incomplete[key] = tup
            self.notify()
            return
        self.incomplete.pop(key, None)
        size = _nbytes(tup)
        self.check_fits(size)
        while self.full(len(self.complete), size):
            await self.wait()
        self.complete[key] = tup
        self.nbytes += size
        self.notify()

    def _first_key(self) -> int:
        return min(self.complete) if self.ordered else next(iter(self.complete))

    def _take(self, key: int, indices: list[int], remove: bool) -> list:
        tup = self.complete[key]
        out = []
        for i in indices:
            if not 0 <= i < self.size:
                raise errors.InvalidArgumentError(
                    None, None, f"Index '{i}' for key '{key}' was out of bounds '{self.size}'."
                )
            if tup[i] is None:
                raise errors.InvalidArgumentError(
                    None, None, f"Tensor at index '{i}' for key '{key}' has already been removed."
                )
            out.append(tup[i])
        if remove:
            for i in indices:
                self.nbytes -= _nbytes([tup[i]])
                tup[i] = None
            if all(v is None for v in tup):
                del self.complete[key]
            self.notify()
        return out

    async def get(self, key: int | None, indices: list[int], remove: bool):
        while (not self.complete) if key is None else (key not in self.complete):
            await self.wait()
        if key is None:
            key = self._first_key()
        return key, self._take(key, indices, remove)

    def clear(self) -> None:
        self.complete.clear()
        self.incomplete.clear()
        self.nbytes = 0
        self.notify()


def _area(ctx, make):
    a = ctx.attrs
    container = a["container"]
    name = a["shared_name"] or ctx.op.name
    return ctx.resource_mgr(container).lookup_or_create(container, name, make(name, a))


def _buffer(ctx) -> _Buffer:
    return _area(ctx, lambda n, a: lambda: _Buffer(n, a["capacity"], a["memory_limit"]))


def _map(ctx, ordered: bool) -> _Map:
    return _area(
        ctx,
        lambda n, a: lambda: _Map(n, a["capacity"], a["memory_limit"], ordered, len(a["dtypes"])),
    )


def _one_or_tuple(values):
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def _unknowns(op):
    return [None] * len(op.outputs)


def _scalar(op):
    return [tensor_shape.TensorShape([])]


def _none(op):
    return []


def _reg(name, inputs=(), outputs=(), shape_fn=_none, extra=None):
    op_def = register_op(
        name,
        inputs=list(inputs),
        outputs=list(outputs),
        attrs={**_ATTRS, **(extra or {})},
        shape_fn=shape_fn,
        stateful=True,
        is_async=True,
    )
    return op_def


# -- Stage* ----------------------------------------------------------------------------

Stage = _reg("Stage", ["values: dtypes"])
Unstage = _reg("Unstage", outputs=["values: dtypes"], shape_fn=_unknowns)
StagePeek = _reg("StagePeek", ["index: int32"], ["values: dtypes"], _unknowns)
StageSize = _reg("StageSize", outputs=["size: int32"], shape_fn=_scalar)
StageClear = _reg("StageClear")


@Stage.kernel("CPU")
async def _stage(ctx, *values):
    await _buffer(ctx).put(tuple(values))


@Unstage.kernel("CPU")
async def _unstage(ctx):
    return _one_or_tuple(await _buffer(ctx).get())


@StagePeek.kernel("CPU")
async def _stage_peek(ctx, index):
    return _one_or_tuple(await _buffer(ctx).peek(int(index)))


@StageSize.kernel("CPU")
async def _stage_size(ctx):
    return np.int32(len(_buffer(ctx).items))


@StageClear.kernel("CPU")
async def _stage_clear(ctx):
    _buffer(ctx).clear()


# -- Map* and OrderedMap* ----------------------------------------------------------------


def _indices(indices) -> list[int]:
    return [int(i) for i in np.asarray(indices).reshape(-1)]


def _register_map_family(prefix: str, ordered: bool) -> None:
    put = _reg(
        prefix + "Stage",
        ["key: int64", "indices: int32", "values: fake_dtypes"],
        extra={"fake_dtypes": _TYPES},
    )
    unstage = _reg(
        prefix + "Unstage", ["key: int64", "indices: int32"], ["values: dtypes"], _unknowns
    )
    no_key = _reg(
        prefix + "UnstageNoKey",
        ["indices: int32"],
        ["key: int64", "values: dtypes"],
        lambda op: [tensor_shape.TensorShape([])] + [None] * (len(op.outputs) - 1),
    )
    peek = _reg(prefix + "Peek", ["key: int64", "indices: int32"], ["values: dtypes"], _unknowns)
    size = _reg(prefix + "Size", outputs=["size: int32"], shape_fn=_scalar)
    incomplete = _reg(prefix + "IncompleteSize", outputs=["size: int32"], shape_fn=_scalar)
    clear = _reg(prefix + "Clear")

    @put.kernel("CPU")
    async def _put(ctx, key, indices, *values):
        idx = _indices(indices)
        if len(idx) != len(values):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Number of indices '{len(idx)}' does not match number of values '{len(values)}'.",
            )
        await _map(ctx, ordered).put(int(key), idx, values)

    @unstage.kernel("CPU")
    async def _unstage(ctx, key, indices):
        _, values = await _map(ctx, ordered).get(int(key), _indices(indices), remove=True)
        return _one_or_tuple(values)

    @no_key.kernel("CPU")
    async def _unstage_no_key(ctx, indices):
        key, values = await _map(ctx, ordered).get(None, _indices(indices), remove=True)
        return (np.int64(key), *values)

    @peek.kernel("CPU")
    async def _peek(ctx, key, indices):
        _, values = await _map(ctx, ordered).get(int(key), _indices(indices), remove=False)
        return _one_or_tuple(values)

    @size.kernel("CPU")
    async def _size(ctx):
        return np.int32(len(_map(ctx, ordered).complete))

    @incomplete.kernel("CPU")
    async def _incomplete(ctx):
        return np.int32(len(_map(ctx, ordered).incomplete))

    @clear.kernel("CPU")
    async def _clear(ctx):
        _map(ctx, ordered).clear()


_register_map_family("Map", ordered=False)
_register_map_family("OrderedMap", ordered=True)
