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

from asyncflow import dtypes as _dtypes
from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["StagingArea", "MapStagingArea"]

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
        prefix + "UnstageNoKey", ["indices: int32"], ["key: int64", "values: dtypes"], _unknowns
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


# -- TF's data_flow_ops.StagingArea and MapStagingArea -----------------------------------


class _StagingBase:
    """Names, dtypes, shapes and component names shared by both areas."""

    def __init__(self, dtypes, shapes, names, shared_name, capacity, memory_limit, default):
        if shared_name is None:
            self._name = ops.get_default_graph().unique_name(default)
        else:
            self._name = shared_name
        self._dtypes = [_dtypes.as_dtype(d) for d in dtypes]
        self._shapes = (
            [tensor_shape.as_shape(s) for s in shapes]
            if shapes is not None
            else [tensor_shape.unknown_shape() for _ in self._dtypes]
        )
        if len(self._shapes) != len(self._dtypes):
            raise ValueError("StagingArea shapes must be the same length as dtypes")
        if names is not None and len(names) != len(self._dtypes):
            raise ValueError("StagingArea names must be the same length as dtypes")
        self._names = list(names) if names is not None else None
        self._capacity, self._memory_limit = capacity, memory_limit
        self._attrs = {
            "shared_name": self._name,
            "capacity": capacity,
            "memory_limit": memory_limit,
        }

    name = property(lambda self: self._name)
    dtypes = property(lambda self: self._dtypes)
    shapes = property(lambda self: self._shapes)
    names = property(lambda self: self._names)
    capacity = property(lambda self: self._capacity)
    memory_limit = property(lambda self: self._memory_limit)

    def _as_list(self, values, indices=None) -> tuple[list, list[int]]:
        """`values` (a dict by component name, a list, or one tensor) as tensors checked
        against the area's dtypes and shapes, with the component index of each."""
        if isinstance(values, dict):
            if self._names is None:
                raise ValueError("Keys in values dict must match names")
            order = [self._names.index(k) for k in sorted(values, key=self._names.index)]
            values = [values[self._names[i]] for i in order]
            indices = order
        elif not isinstance(values, (list, tuple)):
            values = [values]
        if indices is None:
            indices = list(range(len(values)))
        out = []
        for i, v in zip(indices, values, strict=True):
            t = ops.convert_to_tensor(v, dtype=self._dtypes[i])
            if not t.shape.is_compatible_with(self._shapes[i]):
                raise ValueError(f"Shapes {t.shape} and {self._shapes[i]} are incompatible")
            out.append(t)
        return out, list(indices)

    def _outputs(self, op, indices=None):
        indices = list(range(len(self._dtypes))) if indices is None else indices
        outs = list(op.outputs)
        for t, i in zip(outs, indices, strict=True):
            t.set_shape(self._shapes[i])
        if self._names is None:
            return outs
        return {self._names[i]: t for t, i in zip(outs, indices, strict=True)}

    def _simple(self, op_type, suffix, name, extra=None):
        with ops.name_scope(name, f"{self._name}_{suffix}") as scope:
            attrs = {**self._attrs, "dtypes": self._dtypes, **(extra or {})}
            return ops.apply_op(op_type, [], attrs, name=scope)


class StagingArea(_StagingBase):
    """A FIFO of tuples between steps (TF's data_flow_ops.StagingArea): `put` waits while
    it holds `capacity` tuples or `memory_limit` bytes (0: no limit), `get` until one is
    there.

    Raises: ValueError (build time) for values of another shape or dtype;
    ResourceExhaustedError (run time) for a tuple larger than `memory_limit`.
    """

    def __init__(self, dtypes, shapes=None, names=None, shared_name=None, capacity=0,
                 memory_limit=0):  # fmt: skip
        super().__init__(dtypes, shapes, names, shared_name, capacity, memory_limit,
                         "StagingArea")  # fmt: skip

    def put(self, values, name=None):
        with ops.name_scope(name, f"{self._name}_put") as scope:
            tensors, _ = self._as_list(values)
            return ops.apply_op("Stage", [tensors], dict(self._attrs), name=scope)

    def get(self, name=None):
        return self._outputs(self._simple("Unstage", "get", name))

    def peek(self, index, name=None):
        with ops.name_scope(name, f"{self._name}_peek") as scope:
            index = ops.convert_to_tensor(index, dtype=_dtypes.int32)
            attrs = {**self._attrs, "dtypes": self._dtypes}
            return self._outputs(ops.apply_op("StagePeek", [index], attrs, name=scope))

    def size(self, name=None):
        return self._simple("StageSize", "size", name).outputs[0]

    def clear(self, name=None):
        return self._simple("StageClear", "clear", name)


class MapStagingArea(_StagingBase):
    """Tuples by int64 key between steps (TF's data_flow_ops.MapStagingArea); `ordered`
    gets the smallest key first.  A put may give some components (`indices`); a key is
    got once all are there.

    Raises: ValueError (build time) for a list put without `indices`, or values of
    another shape or dtype; InvalidArgumentError (run time) for a component given twice
    or taken twice.
    """

    def __init__(self, dtypes, shapes=None, names=None, shared_name=None, ordered=False,
                 scope=None, capacity=0, memory_limit=0):  # fmt: skip
        super().__init__(dtypes, shapes, names, shared_name, capacity, memory_limit,
                         "MapStagingArea")  # fmt: skip
        self._prefix = "OrderedMap" if ordered else "Map"

    def put(self, key, vals, indices=None, name=None):
        if isinstance(vals, (list, tuple)) and indices is None:
            raise ValueError("Indices must be supplied when inserting a list of tensors")
        with ops.name_scope(name, f"{self._name}_put") as scope:
            tensors, idx = self._as_list(vals, indices)
            key = ops.convert_to_tensor(key, dtype=_dtypes.int64)
            index_t = ops.convert_to_tensor(idx, dtype=_dtypes.int32)
            attrs = {**self._attrs, "dtypes": self._dtypes}
            return ops.apply_op(self._prefix + "Stage", [key, index_t, tensors], attrs,
                                name=scope)  # fmt: skip

    def _indices(self, indices):
        if indices is None:
            return list(range(len(self._dtypes)))
        if self._names is not None and indices and isinstance(indices[0], str):
            return [self._names.index(n) for n in indices]
        return list(indices)

    def _keyed(self, op_type, suffix, key, indices, name):
        idx = self._indices(indices)
        with ops.name_scope(name, f"{self._name}_{suffix}") as scope:
            inputs = [] if key is None else [ops.convert_to_tensor(key, dtype=_dtypes.int64)]
            attrs = {**self._attrs, "dtypes": [self._dtypes[i] for i in idx]}
            op = ops.apply_op(op_type, [*inputs, ops.convert_to_tensor(idx, _dtypes.int32)],
                              attrs, name=scope)  # fmt: skip
        return inputs, op, idx

    def get(self, key=None, indices=None, name=None):
        """(key, values): the given key's tuple, or (ordered: the smallest) any one."""
        if key is None:
            _, op, idx = self._keyed(self._prefix + "UnstageNoKey", "get_nokey", None,
                                     indices, name)  # fmt: skip
            key_t, *values = op.outputs
            return key_t, self._outputs_of(values, idx)
        inputs, op, idx = self._keyed(self._prefix + "Unstage", "get", key, indices, name)
        return inputs[0], self._outputs_of(list(op.outputs), idx)

    def peek(self, key, indices=None, name=None):
        # (TF names the peek op "<name>_pop")
        _, op, idx = self._keyed(self._prefix + "Peek", "pop", key, indices, name)
        return self._outputs_of(list(op.outputs), idx)

    def _outputs_of(self, outs, idx):
        for t, i in zip(outs, idx, strict=True):
            t.set_shape(self._shapes[i])
        if self._names is None:
            return outs
        return {self._names[i]: t for t, i in zip(outs, idx, strict=True)}

    def size(self, name=None):
        return self._simple(self._prefix + "Size", "size", name).outputs[0]

    def incomplete_size(self, name=None):
        return self._simple(self._prefix + "IncompleteSize", "incomplete_size", name).outputs[0]

    def clear(self, name=None):
        return self._simple(self._prefix + "Clear", "clear", name)
