"""tf.data's iterator and helper-resource raw ops of other TF versions than the ones
`tf.data` builds here: v1 `Iterator`, anonymous iterators and their deleters,
`IteratorGetNextSync`, multi-device iterators, memory caches and seed generators
(TF 2.21's OpDefs and behaviour, recorded with `tf.raw_ops` in TF1 graphs).

Resources are handles in 0-d object arrays, as ops/dataset_ops.py's iterators are.  An
anonymous resource (`AnonymousIteratorV3`, `AnonymousSeedGenerator`, ...) is made anew
by every run of its op, as TF's kernel makes one per execution: in a TF1 graph an
anonymous iterator initialized in one `Session.run` is not the one a later run reads.
Deleters are handles too; `Delete*` ops release what the resource holds.

A multi-device iterator hands the pass's elements to its shards in turn (element i to
shard i % len(devices), TF's round robin); each shard reads its own queue, so a shard
asked twice in a row gets its next element, not its neighbour's.

Invariants: iterator handles are the same `IteratorResource` objects the other dataset
ops take (so `MakeIterator` / `IteratorGetNext` work on them); a multi-device
iterator's incarnation id grows by one per `MultiDeviceIteratorInit`, and reading with
an older id is TF's InvalidArgumentError.
"""

from __future__ import annotations

import collections
import itertools

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops import philox_random
from asyncflow.registry import NotDifferentiable, register_op

__all__: list[str] = []

_SCALAR = tensor_shape.TensorShape([])
_ANON = itertools.count(1)


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _scalars(n: int):
    return lambda op: [_SCALAR] * n


def _op(name, inputs=(), outputs=(), attrs=None, shape_fn=None, is_async=False):
    """Register a stateful, non-differentiable op with a CPU kernel (the decorated one)."""
    op_def = register_op(
        name,
        inputs=list(inputs),
        outputs=list(outputs),
        attrs=attrs or {},
        shape_fn=shape_fn or _scalars(len(outputs)),
        stateful=True,
        is_async=is_async,
    )
    NotDifferentiable(name)
    return op_def.kernel("CPU")


def _outputs(ctx, elem) -> tuple | np.ndarray:
    """An element as `output_types` typed outputs (TF's component count checked)."""
    want = ctx.attrs["output_types"]
    if len(elem) != len(want):
        raise _bad(f"Expected {len(want)} components but the element has {len(elem)}")
    out = [dso.component_out(v, dt) for v, dt in zip(elem, want)]
    return out[0] if len(out) == 1 else tuple(out)


# -- iterators ---------------------------------------------------------------------------------


@_op(
    "Iterator",
    outputs=["handle: string"],
    attrs={"shared_name": "", "container": "", "output_types": dso._LIST, "output_shapes": []},
)
async def _iterator_v1(ctx):
    return dso._handle(dso._iterator_resource(ctx)[0])


def _anonymous(ctx) -> dso.IteratorResource:
    a = ctx.attrs
    return dso.IteratorResource(
        f"AnonymousIterator{next(_ANON)}", a["output_types"], a["output_shapes"]
    )


_ANON_ATTRS = {"output_types": dso._LIST, "output_shapes": []}


@_op("AnonymousIterator", outputs=["handle: string"], attrs=_ANON_ATTRS)
async def _anonymous_v1(ctx):
    return dso._handle(_anonymous(ctx))


_op("AnonymousIteratorV3", outputs=["handle: string"], attrs=_ANON_ATTRS)(_anonymous_v1)


@_op("AnonymousIteratorV2", outputs=["handle: string", "deleter: variant"], attrs=_ANON_ATTRS)
async def _anonymous_v2(ctx):
    return dso._handle(_anonymous(ctx)), dso._handle(None)


@_op("DeleteIterator", inputs=["handle: string", "deleter: variant"])
async def _delete_iterator(ctx, handle, deleter):
    it = dso._unwrap(handle, dso.IteratorResource, "iterator")
    stream, it.stream = it.stream, None
    if stream is not None:
        await stream.aclose()


# TF's synchronous GetNext: the same element, the same errors.
_op(
    "IteratorGetNextSync",
    inputs=["iterator: string"],
    outputs=["components: output_types"],
    attrs=dict(dso._OUT),
    shape_fn=dso._get_next_shapes,
    is_async=True,
)(dso._get_next)
_op(
    "IteratorFromStringHandle",
    inputs=["string_handle: string"],
    outputs=["resource_handle: string"],
    attrs={"output_types": [], "output_shapes": []},
)(dso._from_string_handle)


async def _get_device(ctx, resource):
    # An iterator lives on the device of the op that reads it: the host here.
    return np.array(ctx.device.name.encode(), dtype=object)


for _name in ("IteratorGetDevice", "ExperimentalIteratorGetDevice"):
    _op(_name, inputs=["resource: string"], outputs=["device: string"])(_get_device)


# -- multi-device iterators ----------------------------------------------------------------------


class MultiDeviceIteratorResource:
    """One pass over a dataset, its elements dealt to `len(devices)` shards in turn."""

    def __init__(self, name: str, container: str, devices, output_types, output_shapes):
        self.name, self.container = name, container
        self.devices = list(devices)
        self.iterator = dso.IteratorResource(name, output_types, output_shapes, container)
        self.incarnation = 0
        self.queues: list[collections.deque] = [collections.deque() for _ in self.devices]
        self.turn = 0

    async def init(self, value: pl.DatasetValue, env: pl.Env) -> int:
        await self.iterator.start(value, env)
        self.incarnation += 1
        self.queues = [collections.deque() for _ in self.devices]
        self.turn = 0
        return self.incarnation

    async def get_next(self, shard: int, incarnation: int) -> tuple:
        """The next element of shard `shard`.

        Raises:
          InvalidArgumentError: a stale incarnation id or a shard out of range.
          FailedPreconditionError: never initialized.
          OutOfRangeError: the pass has no element left for the shard.
        """
        if incarnation != self.incarnation:
            raise _bad(
                f"Invalid incarnation id. Provided: {incarnation}; Expected: {self.incarnation}"
            )
        if not 0 <= shard < len(self.queues):
            raise _bad(f"Shard number {shard} is out of range [0, {len(self.queues)})")
        queue = self.queues[shard]
        while not queue:
            elem = await self.iterator.get_next()
            self.queues[self.turn].append(elem)
            self.turn = (self.turn + 1) % len(self.queues)
        return queue.popleft()


_MDI_ATTRS = {"devices": [], "output_types": dso._LIST, "output_shapes": []}


@_op(
    "MultiDeviceIterator",
    outputs=["handle: string"],
    attrs={**_MDI_ATTRS, "shared_name": "", "container": ""},
)
async def _multi_device_iterator(ctx):
    a = ctx.attrs
    name = a["shared_name"] or ctx.op.name
    mgr = ctx.resource_mgr(a["container"])
    return dso._handle(
        mgr.lookup_or_create(
            a["container"],
            name,
            lambda: MultiDeviceIteratorResource(
                name, a["container"], a["devices"], a["output_types"], a["output_shapes"]
            ),
        )
    )


def _anonymous_multi(ctx) -> MultiDeviceIteratorResource:
    a = ctx.attrs
    name = f"AnonymousMultiDeviceIterator{next(_ANON)}"
    return MultiDeviceIteratorResource(
        name, "", a["devices"], a["output_types"], a["output_shapes"]
    )


@_op("AnonymousMultiDeviceIteratorV3", outputs=["handle: string"], attrs=_MDI_ATTRS)
async def _anonymous_multi_v3(ctx):
    return dso._handle(_anonymous_multi(ctx))


@_op(
    "AnonymousMultiDeviceIterator",
    outputs=["handle: string", "deleter: variant"],
    attrs=_MDI_ATTRS,
)
async def _anonymous_multi_v1(ctx):
    return dso._handle(_anonymous_multi(ctx)), dso._handle(None)


def _multi(handle) -> MultiDeviceIteratorResource:
    return dso._unwrap(handle, MultiDeviceIteratorResource, "multi-device iterator")


@_op(
    "DeleteMultiDeviceIterator",
    inputs=["multi_device_iterator: string", "iterators: N * string", "deleter: variant"],
    attrs={"N": 0},
)
async def _delete_multi(ctx, handle, *rest):
    mdi = _multi(handle)
    stream, mdi.iterator.stream = mdi.iterator.stream, None
    if stream is not None:
        await stream.aclose()


@_op(
    "MultiDeviceIteratorInit",
    inputs=["dataset: string", "multi_device_iterator: string", "max_buffer_size: int64"],
    outputs=["incarnation_id: int64"],
)
async def _multi_init(ctx, dataset, handle, max_buffer_size):
    n = await _multi(handle).init(dso._ds(dataset), pl.Env(ctx.session))
    return np.array(n, np.int64)


@_op(
    "MultiDeviceIteratorGetNextFromShard",
    inputs=["multi_device_iterator: string", "shard_num: int32", "incarnation_id: int64"],
    outputs=["components: output_types"],
    attrs=dict(dso._OUT),
    shape_fn=dso._get_next_shapes,
    is_async=True,
)
async def _multi_get_next(ctx, handle, shard_num, incarnation_id):
    elem = await _multi(handle).get_next(int(shard_num), int(incarnation_id))
    return _outputs(ctx, elem)


_MDI_PREFIX = b"asyncflow-multi-device-iterator\x00"


@_op(
    "MultiDeviceIteratorToStringHandle",
    inputs=["multi_device_iterator: string"],
    outputs=["string_handle: string"],
)
async def _multi_to_string(ctx, handle):
    mdi = _multi(handle)
    return np.array(
        _MDI_PREFIX + mdi.container.encode() + b"\x00" + mdi.name.encode(), dtype=object
    )


@_op(
    "MultiDeviceIteratorFromStringHandle",
    inputs=["string_handle: string"],
    outputs=["multi_device_iterator: string"],
    attrs={"output_types": [], "output_shapes": []},
)
async def _multi_from_string(ctx, string_handle):
    raw = string_handle[()] if isinstance(string_handle, np.ndarray) else string_handle
    if not isinstance(raw, bytes) or not raw.startswith(_MDI_PREFIX) or raw.count(b"\x00") != 2:
        raise _bad(f"Invalid multi-device iterator string handle {raw!r}")
    container, name = (p.decode() for p in raw[len(_MDI_PREFIX) :].split(b"\x00"))
    mdi = ctx.resource_mgr(container).lookup(container, name)
    types = ctx.attrs["output_types"]
    if types and [d.base_dtype for d in types] != [
        d.base_dtype for d in mdi.iterator.output_types
    ]:
        raise _bad(
            f"MultiDeviceIteratorFromStringHandle: expected types "
            f"{[d.name for d in mdi.iterator.output_types]} but got {[d.name for d in types]}"
        )
    return dso._handle(mdi)


# -- memory caches, seed generators, iteration counters -------------------------------------------


class MemoryCache:
    """The elements a `CacheDatasetV2` keeps in memory: None until a pass completes."""

    __slots__ = ("elements",)

    def __init__(self):
        self.elements: list | None = None


@_op("AnonymousMemoryCache", outputs=["handle: resource", "deleter: variant"])
async def _anonymous_cache(ctx):
    return dso._handle(MemoryCache()), dso._handle(None)


@_op("DummyMemoryCache", outputs=["handle: resource"])
async def _dummy_cache(ctx):
    # TF's placeholder: the cache dataset keeps its own elements.
    return dso._handle(None)


@_op("DeleteMemoryCache", inputs=["handle: resource", "deleter: variant"])
async def _delete_cache(ctx, handle, deleter):
    cache = dso._unwrap(handle, MemoryCache, "memory cache")
    cache.elements = None


@_op(
    "AnonymousSeedGenerator",
    inputs=["seed: int64", "seed2: int64", "reshuffle: bool"],
    outputs=["handle: resource", "deleter: variant"],
)
async def _anonymous_seed_generator(ctx, seed, seed2, reshuffle):
    gen = philox_random.seed_generator(int(seed), int(seed2), bool(reshuffle))
    return dso._handle(gen), dso._handle(None)


@_op(
    "AnonymousRandomSeedGenerator",
    inputs=["seed: int64", "seed2: int64"],
    outputs=["handle: resource", "deleter: variant"],
)
async def _anonymous_random_seed_generator(ctx, seed, seed2):
    gen = philox_random.seed_generator(int(seed), int(seed2), True)
    return dso._handle(gen), dso._handle(None)


def seed_generator_of(handle):
    """The generator a seed-generator handle holds; None for TF's dummy one."""
    v = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if v is None or isinstance(v, philox_random.FixedSeeds | philox_random.RandomSeeds):
        return v
    raise _bad(f"Expected a seed generator handle, got {v!r}")


async def _delete_seed_generator(ctx, handle, deleter):
    seed_generator_of(handle)  # (its seeds die with the handle)


for _name in ("DeleteSeedGenerator", "DeleteRandomSeedGenerator"):
    _op(_name, inputs=["handle: resource", "deleter: variant"])(_delete_seed_generator)


@_op("DummyIterationCounter", outputs=["handle: resource"])
async def _dummy_iteration_counter(ctx):
    # Only tf.data service datasets count iterations; none run here.
    return dso._handle(None)
