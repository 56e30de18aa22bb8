"""More of tf.data's raw ops of other TF versions (ops/dataset_raw.py has the note):
random access (`GetElementAtIndex`), `GlobalShuffleDataset` (TF's index_shuffle
permutation, seeded from the seed generator), element compression, variant wrapping,
`ParseExampleDataset` / `V2`, and TF's `Experimental*` names of the dataset ops, each
registered as its first-named op with the attrs TF's experimental OpDef has.

Behaviour is TF 2.21's, recorded with `tf.raw_ops` in TF1 graphs and from meta graphs
TF wrote (tests/test_data_raw_ops_s27.py).  Random access walks a pass up to the index;
which stages allow it, and the errors for those that do not, are TF's.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors
from asyncflow.ops import dataset_more as dsm
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops import dataset_raw_iterators as dri
from asyncflow.ops import index_shuffle_ops, parsing_ops, philox_random
from asyncflow.ops.dataset_raw import SparseSlices, WithOptions
from asyncflow.registry import NotDifferentiable, TypeConstraint, get_op_def, register_op

__all__: list[str] = []

_IN = "input_dataset: string"
_closing = dsm._closing


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- random access, compression, variant wrapping ------------------------------------------------

# The stages TF 2.21 can index into (its datasets' RandomIndexingCompatible).
_RANDOM_ACCESS = (
    pl.Range,
    pl.TensorSlices,
    pl.Tensors,
    pl.Map,
    pl.Batch,
    pl.Take,
    pl.Skip,
    pl.Repeat,
    pl.Concatenate,
    pl.Zip,
    pl.Cache,
    pl.Prefetch,
    dsm.Elements,
    SparseSlices,
    WithOptions,
)


def _inputs_of(value) -> list:
    out = []
    for a in ("input", "first", "second"):
        v = getattr(value, a, None)
        if isinstance(v, pl.DatasetValue):
            out.append(v)
    out += [v for v in getattr(value, "inputs", ()) if isinstance(v, pl.DatasetValue)]
    return out


def _check_random_access(value) -> None:
    if not isinstance(value, _RANDOM_ACCESS):
        raise errors.UnimplementedError(
            None,
            None,
            f"Random access is not implemented for dataset "
            f"{type(value).__name__}DatasetOp::Dataset",
        )
    for v in _inputs_of(value):
        _check_random_access(v)


async def _get_element_at_index(ctx, ds, index):
    value, i = dso._ds(ds), int(index)
    _check_random_access(value)
    n = value.cardinality()
    if n == -2:
        raise errors.FailedPreconditionError(
            None,
            None,
            f"Dataset of type {type(value).__name__}DatasetOp::Dataset has unknown "
            "cardinality, which does not support random access.",
        )
    if i < 0 or (n >= 0 and i >= n):
        raise errors.OutOfRangeError(None, None, f"Index out of range [0, {n}):{i}")
    k = 0
    async for elem in _closing(value.iterate(pl.Env(ctx.session))):
        if k == i:
            return dsm._out(elem, ctx.attrs["output_types"])
        k += 1
    raise errors.OutOfRangeError(None, None, f"Index out of range [0, {n}):{i}")


# -- global shuffle -----------------------------------------------------------------------------


def _check_global_shuffle(value) -> None:
    """TF's refusal of a pipeline whose stages cannot be read at any index."""
    if isinstance(value, pl.Batch) and not value.drop:
        why = "BatchDatasetV2 does not support global shuffling with `drop_remainder=False`."
    elif not isinstance(value, _RANDOM_ACCESS):
        why = f"{type(value).__name__}Dataset does not support random access."
    else:
        for v in _inputs_of(value):
            _check_global_shuffle(v)
        return
    raise errors.FailedPreconditionError(
        None,
        None,
        "`global_shuffle` requires all upstream transformations be compatible with random "
        f"access. Got: FAILED_PRECONDITION: {why}",
    )


def _permutation(n: int, key: tuple) -> np.ndarray:
    """TF's index_shuffle of [0, n) with the 3-word `key` and 8 rounds: where position
    i reads from.  For blocks of up to 24 bits the cipher is tabulated once and cycle
    walking follows the table (walks from a small n are long)."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    bits = index_shuffle_ops._block_bits(n - 1)
    if bits > 24:
        seeds = np.tile(np.array(key, np.uint64), (n, 1))
        top = np.full(n, n - 1, np.uint64)
        idx = np.arange(n, dtype=np.uint64)
        return index_shuffle_ops.index_shuffle(idx, seeds, top, 8).astype(np.int64)
    w = bits // 2
    keys = index_shuffle_ops._round_keys(np.array([key], np.uint64), w, 8)
    table = index_shuffle_ops._encrypt(np.arange(1 << bits, dtype=np.uint64), keys, w)
    table = table.astype(np.int64).tolist()
    out = np.empty(n, np.int64)
    for i in range(n):
        v = table[i]
        while v >= n:
            v = table[v]
        out[i] = v
    return out


class GlobalShuffle(pl.DatasetValue):
    """The input's elements in TF's global-shuffle order: each pass takes two seed pairs
    from the seed generator, (a, b) and (c, _), and gives element index_shuffle(i) of
    the pass at position i, with the key (a, b, c)."""

    def __init__(self, input_value, seeds):
        _check_global_shuffle(input_value)
        self.input, self.seeds = input_value, seeds

    def cardinality(self):
        return self.input.cardinality()

    async def iterate(self, env):
        (a, b), (c, _) = self.seeds.next_pair(), self.seeds.next_pair()
        mask = 0xFFFFFFFF
        # (the input, read in order once: its stages read at an index here are a pass)
        elems = [e async for e in _closing(self.input.iterate(env))]
        order = await pl._in_thread(_permutation, len(elems), (a & mask, b & mask, c & mask))
        for i in order.tolist():
            yield pl._own(elems[i])


async def _global_shuffle(ctx, ds, seed, seed2, seed_generator):
    gen = dri.seed_generator_of(seed_generator)
    if gen is None:
        reshuffle = ctx.attrs["reshuffle_each_iteration"]
        gen = philox_random.seed_generator(int(seed), int(seed2), reshuffle)
    return dso._handle(GlobalShuffle(dso._ds(ds), gen))


dso._register(
    "GlobalShuffleDataset",
    [_IN, "seed: int64", "seed2: int64", "seed_generator: resource"],
    {"reshuffle_each_iteration": True, "metadata": ""},
    _global_shuffle,
)


class CompressedElement:
    """An element held by a CompressElement handle (its own copies of the components)."""

    __slots__ = ("components",)

    def __init__(self, components):
        self.components = pl._own(components)


async def _compress(ctx, *components):
    return dso._handle(CompressedElement(components))


async def _uncompress(ctx, compressed):
    elem = dso._unwrap(compressed, CompressedElement, "compressed element")
    want = ctx.attrs["output_types"]
    got = [dtypes.as_dtype(np.asarray(c).dtype) if np.asarray(c).dtype != object
           else dtypes.string for c in elem.components]  # fmt: skip
    if len(got) != len(want) or any(g != w.base_dtype for g, w in zip(got, want)):
        raise _bad(
            f"UncompressElement: expected types {[d.name for d in want]} but the element "
            f"has {[d.name for d in got]}"
        )
    return dsm._out(elem.components, want)


async def _wrap(ctx, handle):
    # TF boxes the dataset variant in another variant; a handle here holds it already.
    return dso._handle(dso._ds(handle))


def _components_op(name, inputs, attrs, kernel, is_async=False):
    register_op(
        name,
        inputs=inputs,
        outputs=["components: output_types"],
        attrs={**dso._OUT, **attrs},
        shape_fn=dsm._components_shapes,
        stateful=True,
        is_async=is_async,
    ).kernel("CPU")(kernel)
    NotDifferentiable(name)


_components_op(
    "GetElementAtIndex", ["dataset: string", "index: int64"], {}, _get_element_at_index, True
)
_components_op("UncompressElement", ["compressed: variant"], {}, _uncompress)
register_op(
    "CompressElement",
    inputs=["components: input_types"],
    outputs=["compressed: variant"],
    attrs={"input_types": dso._LIST},
    shape_fn=dso._handle_shape,
    stateful=True,
).kernel("CPU")(_compress)
NotDifferentiable("CompressElement")
for _name in ("WrapDatasetVariant", "UnwrapDatasetVariant"):
    register_op(
        _name,
        inputs=["input_handle: string"],
        outputs=["output_handle: string"],
        shape_fn=dso._handle_shape,
        stateful=True,
    ).kernel("CPU")(_wrap)
    NotDifferentiable(_name)


# -- parsing Examples -----------------------------------------------------------------------------


class ParseExamples(pl.DatasetValue):
    """Each element (a vector of serialized Examples) parsed as ParseExampleV2 does;
    the features in the order of their sorted keys, a sparse one as its handle."""

    def __init__(self, input_value, attrs: dict, defaults):
        self.input, self.attrs, self.defaults = input_value, attrs, list(defaults)
        keys = attrs["sparse_keys"] + attrs["dense_keys"]
        self.order = sorted(range(len(keys)), key=keys.__getitem__)

    def _parse(self, serialized) -> tuple:
        a = self.attrs
        out = parsing_ops._parse_kernel_sync(a, serialized, self.defaults)
        ns = len(a["sparse_keys"])
        parts = [
            pl._handle_of(pl.SparseValue(out[i], out[i + ns], out[i + 2 * ns])) for i in range(ns)
        ] + list(out[3 * ns :])
        return tuple(parts[i] for i in self.order)

    async def iterate(self, env):
        async for elem in _closing(self.input.iterate(env)):
            (serialized,) = elem
            if np.size(serialized) > 256:  # (as ParseExampleV2's kernel: big on a worker)
                yield await pl._in_thread(self._parse, serialized)
            else:
                yield self._parse(serialized)

    def cardinality(self):
        return self.input.cardinality()


async def _parse_example_dataset(ctx, ds, num_parallel_calls, *defaults):
    a = ctx.attrs
    if a.get("ragged_keys"):
        raise errors.UnimplementedError(
            None, None, f"{ctx.op.type}: RaggedFeature (ragged_keys) is not supported"
        )
    attrs = parsing_ops._kernel_attrs(ctx, a["sparse_keys"], a["dense_keys"], [], True)
    return dso._handle(ParseExamples(dso._ds(ds), attrs, defaults))


_PARSE = {
    "sparse_keys": [],
    "dense_keys": [],
    "sparse_types": TypeConstraint(parsing_ops._PARSE_TYPES, is_list=True),
    "Tdense": TypeConstraint(parsing_ops._PARSE_TYPES, is_list=True),
    "dense_shapes": [],
    "ragged_keys": [],
    "ragged_value_types": TypeConstraint(parsing_ops._PARSE_TYPES, default=(), is_list=True),
    "ragged_split_types": TypeConstraint((dtypes.int32, dtypes.int64), default=(), is_list=True),
}
_PARSE_IN = [_IN, "num_parallel_calls: int64", "dense_defaults: Tdense"]
dso._register("ParseExampleDataset", _PARSE_IN, {**_PARSE, "sloppy": False},
              _parse_example_dataset)  # fmt: skip
dso._register(
    "ParseExampleDatasetV2",
    _PARSE_IN,
    {**_PARSE, "deterministic": "default"},
    _parse_example_dataset,
)


# -- TF's Experimental* names: the same ops under their first names -------------------------------

# TF attrs the experimental OpDefs lack (their kernels take the defaults).
_NOT_IN_EXPERIMENTAL = frozenset(
    {
        "metadata",
        "num_replicas",
        "cardinality_options",
        "stop_on_empty_dataset",
        "drop_remainder",
        "use_default_device",
        "ragged_keys",
        "ragged_split_types",
        "ragged_value_types",
    }
)


def _alias(name: str, base: str) -> None:
    old = get_op_def(base)
    op_def = register_op(
        name,
        attrs={k: v for k, v in old.attrs.items() if k not in _NOT_IN_EXPERIMENTAL},
        shape_fn=old.shape_fn,
        stateful=old.stateful,
        is_async=old.is_async,
    )
    op_def.inputs, op_def.outputs = list(old.inputs), list(old.outputs)
    op_def.kernel_defs = dict(old.kernel_defs)
    NotDifferentiable(name)


for _base in (
    "ParseExampleDataset",
    "AutoShardDataset",
    "BytesProducedStatsDataset",
    "CSVDataset",
    "ChooseFastestDataset",
    "DatasetCardinality",
    "DatasetToTFRecord",
    "DenseToSparseBatchDataset",
    "DirectedInterleaveDataset",
    "GroupByWindowDataset",
    "IgnoreErrorsDataset",
    "LMDBDataset",
    "LatencyStatsDataset",
    "MapAndBatchDataset",
    "MapDataset",
    "MatchingFilesDataset",
    "MaxIntraOpParallelismDataset",
    "NonSerializableDataset",
    "ParallelInterleaveDataset",
    "PrivateThreadPoolDataset",
    "RandomDataset",
    "RebatchDataset",
    "ScanDataset",
    "SetStatsAggregatorDataset",
    "SleepDataset",
    "SlidingWindowDataset",
    "SqlDataset",
    "TakeWhileDataset",
    "ThreadPoolDataset",
    "UnbatchDataset",
    "UniqueDataset",
):
    _alias("Experimental" + _base, _base)
