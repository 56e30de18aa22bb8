"""tf.data's dataset raw ops of other TF versions than the ones `tf.data` builds here, so
that GraphDefs and meta graphs TF 1.x and 2.x wrote import and run: v1 batch and
padded batch, seed-generator shuffles, shuffle-and-repeat, v1 file readers, parallel
batch and filter, sliding windows, rebatching, auto-sharding, sampling, list and
sparse-slice sources, LMDB files, statistics (latency and bytes per element, gathered
by a stats aggregator as TF's histograms), and the stages that only tune TF's runtime
(optimizations, thread pools), which pass their input's elements through
(ops/dataset_raw_extra.py has random access, compression, Example parsing and TF's
Experimental* names).  Behaviour is TF 2.21's, recorded with `tf.raw_ops` in TF1 graphs.

The stages follow ops/dataset_pipeline.py's model: a kernel binds its inputs into a
`DatasetValue`; nothing runs until an iterator asks for an element, and bad arguments
found then are errors of that GetNext, as in TF.

Shuffles with a seed-generator resource take their seeds from it (TF's
`AnonymousSeedGenerator`: a fixed pair, or a reshuffling stream of pairs); with TF's
dummy generator they make their own from `seed`, `seed2` and
`reshuffle_each_iteration`, as `ShuffleDataset` does.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import glob
import os

import numpy as np

from asyncflow import dtypes, errors, proto_wire, tensor_shape
from asyncflow.ops import dataset_more as dsm
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops import dataset_raw_iterators as dri
from asyncflow.ops import lmdb_reader_ops, philox_random, summary_ops
from asyncflow.protos.summary_pb2 import HistogramProto, Summary
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__: list[str] = []

_IN = "input_dataset: string"
_META = {"metadata": ""}
_closing = dsm._closing


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- batching ------------------------------------------------------------------------------------


async def _batch_v1(ctx, ds, batch_size):
    return dso._handle(pl.Batch(dso._ds(ds), int(batch_size), False))


async def _padded_batch_v1(ctx, ds, batch_size, *rest):
    n = len(ctx.attrs["Toutput_types"])
    shapes, values = rest[:n], rest[n : 2 * n]
    if any(np.ndim(s) != 1 for s in shapes):
        raise _bad("All padded shapes must be vectors")
    return dso._handle(pl.PaddedBatch(dso._ds(ds), int(batch_size), shapes, values, False))


async def _parallel_batch(ctx, ds, batch_size, num_parallel_calls, drop_remainder):
    # (TF's map_and_batch_fusion leaves a parallel batch apart from a map beneath)
    batch = pl.Batch(dso._ds(ds), int(batch_size), bool(drop_remainder), fused=False)
    return dso._handle(batch)


dso._register("BatchDataset", [_IN, "batch_size: int64"], _META, _batch_v1)
dso._register(
    "PaddedBatchDataset",
    [
        _IN,
        "batch_size: int64",
        "padded_shapes: N * int64",
        "padding_values: Toutput_types",
    ],
    {"Toutput_types": dso._LIST, "N": 1, "output_types": [], **_META},
    _padded_batch_v1,
)
dso._register(
    "ParallelBatchDataset",
    [_IN, "batch_size: int64", "num_parallel_calls: int64", "drop_remainder: bool"],
    {"parallel_copy": False, "deterministic": "default", **_META},
    _parallel_batch,
)


# -- shuffles ------------------------------------------------------------------------------------


def _shuffle(ds, buffer_size, gen) -> pl.Shuffle:
    if buffer_size <= 0:
        # TF's words for the shuffle-and-repeat and seed-generator shuffles
        raise _bad("buffer_size must be greater than zero or UNKNOWN_CARDINALITY")
    value = pl.Shuffle(dso._ds(ds), buffer_size, 1, 1, False)
    value.seeds = gen
    return value


def _generator(ctx, seed, seed2, seed_generator=None):
    """The seed generator a shuffle uses: the resource's, else one of its own."""
    gen = None if seed_generator is None else dri.seed_generator_of(seed_generator)
    if gen is None:
        reshuffle = ctx.attrs.get("reshuffle_each_iteration", True)
        gen = philox_random.seed_generator(int(seed), int(seed2), reshuffle)
    return gen


async def _shuffle_v2(ctx, ds, buffer_size, seed_generator):
    return dso._handle(_shuffle(ds, buffer_size, _generator(ctx, 0, 0, seed_generator)))


async def _shuffle_v3(ctx, ds, buffer_size, seed, seed2, seed_generator):
    return dso._handle(_shuffle(ds, buffer_size, _generator(ctx, seed, seed2, seed_generator)))


async def _shuffle_and_repeat(ctx, ds, buffer_size, seed, seed2, count, seed_generator=None):
    # Each epoch is one pass of the shuffle, which asks its generator for new seeds
    # (TF's fused op keeps the next epoch's first elements in its buffer, but draws
    # only among the current epoch's: the same order).
    if count == 0 or count < -1:
        raise _bad("count must be greater than zero or equal to -1.")
    shuffled = _shuffle(ds, buffer_size, _generator(ctx, seed, seed2, seed_generator))
    return dso._handle(pl.Repeat(shuffled, count))


_SEEDS = ["seed: int64", "seed2: int64"]
dso._register(
    "ShuffleDatasetV2",
    [_IN, "buffer_size: int64", "seed_generator: resource"],
    _META,
    _shuffle_v2,
)
dso._register(
    "ShuffleDatasetV3",
    [_IN, "buffer_size: int64", *_SEEDS, "seed_generator: resource"],
    {"reshuffle_each_iteration": True, **_META},
    _shuffle_v3,
)
dso._register(
    "ShuffleAndRepeatDataset",
    [_IN, "buffer_size: int64", *_SEEDS, "count: int64"],
    {"reshuffle_each_iteration": True, **_META},
    _shuffle_and_repeat,
)
dso._register(
    "ShuffleAndRepeatDatasetV2",
    [_IN, "buffer_size: int64", *_SEEDS, "count: int64", "seed_generator: resource"],
    {"reshuffle_each_iteration": True, **_META},
    _shuffle_and_repeat,
)


# -- file sources ---------------------------------------------------------------------------------


class _OffsetRecords(pl.TFRecords):
    """TFRecord files read from a byte offset each (TFRecordDatasetV2's byte_offsets)."""

    def __init__(self, filenames, compression, offsets):
        super().__init__(filenames, compression)
        self.offsets = [int(o) for o in np.ravel(offsets)]
        if len(self.offsets) != len(self.paths):
            raise _bad(
                f"The number of byte offsets ({len(self.offsets)}) must match the number "
                f"of filenames ({len(self.paths)})."
            )

    def _offset(self, k: int) -> int:
        return self.offsets[k]


async def _tfrecords_v2(ctx, filenames, compression, buffer_size, byte_offsets):
    comp = dso._str(compression)
    if np.size(byte_offsets) == 0:
        return dso._handle(pl.TFRecords(filenames, comp))
    if comp:
        raise _bad("byte_offsets are only supported for uncompressed TFRecord files")
    return dso._handle(_OffsetRecords(filenames, comp, byte_offsets))


async def _fixed_length_v1(ctx, filenames, header, record, footer, buffer_size):
    return dso._handle(pl.FixedLengthRecords(filenames, header, record, footer, ""))


_RECORDS = {"output_types": [dtypes.string], **_META}
_FILES = ["filenames: string", "compression_type: string", "buffer_size: int64"]
dso._register("TFRecordDatasetV2", [*_FILES, "byte_offsets: int64"], _RECORDS, _tfrecords_v2)
dso._register(
    "FixedLengthRecordDataset",
    [
        "filenames: string",
        "header_bytes: int64",
        "record_bytes: int64",
        "footer_bytes: int64",
        "buffer_size: int64",
    ],
    _RECORDS,
    _fixed_length_v1,
)


class MatchingFiles(pl.DatasetValue):
    """The files each pattern matches, sorted, pattern after pattern."""

    def __init__(self, patterns):
        self.patterns = pl._read_paths(patterns)

    async def iterate(self, env):
        found = await pl._in_thread(_match_all, self.patterns)
        for path in found:
            yield (np.array(path.encode(), dtype=object),)


def _match_all(patterns: list[str]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        fixed = pattern[: min(pattern.find(c) % (len(pattern) + 1) for c in "*?[")]
        parent = os.path.dirname(fixed) or "."
        if not os.path.isdir(parent):
            raise errors.NotFoundError(None, None, f"{parent}; No such file or directory")
        out += sorted(glob.glob(pattern))
    if not out:
        raise errors.NotFoundError(None, None, "Don't find any matched files")
    return out


class LMDBRecords(pl.DatasetValue):
    """The (key, value) records of LMDB files, file after file, each in key order.

    TF 2.21 no longer reads LMDB (its kernel raises UnimplementedError); this reads as
    TF's kernel did before, as asyncflow's LMDBReader does (ops/lmdb_reader_ops.py)."""

    def __init__(self, filenames):
        self.paths = pl._read_paths(filenames)

    async def iterate(self, env):
        for path in self.paths:
            walk = lmdb_reader_ops._Walk(path)
            try:
                ended = False
                while not ended:
                    records, ended, error = await pl._in_thread(walk.batch, 256)
                    for key, value in records:
                        yield (np.array(key, dtype=object), np.array(value, dtype=object))
                    if error is not None:
                        raise error
            finally:
                walk.close()


async def _lmdb(ctx, filenames):
    return dso._handle(LMDBRecords(filenames))


async def _matching_files(ctx, patterns):
    return dso._handle(MatchingFiles(patterns))


dso._register("LMDBDataset", ["filenames: string"], None, _lmdb)
dso._register("MatchingFilesDataset", ["patterns: string"], {"output_types": [dtypes.string]},
              _matching_files)  # fmt: skip


# -- caches and functions ----------------------------------------------------------------------


class _CacheIn(pl.Cache):
    """A cache whose elements live in a memory-cache resource (CacheDatasetV2)."""

    def __init__(self, input_value, store: dri.MemoryCache):
        self.input, self.store = input_value, store

    @property
    def cached(self):
        return self.store.elements

    @cached.setter
    def cached(self, elements):
        self.store.elements = elements


async def _cache_v2(ctx, ds, filename, cache):
    v = cache[()] if isinstance(cache, np.ndarray) and cache.shape == () else cache
    if isinstance(v, dri.MemoryCache):
        return dso._handle(_CacheIn(dso._ds(ds), v))
    return dso._handle(pl.Cache(dso._ds(ds)))


async def _parallel_filter(ctx, ds, *rest):
    *captured, _ = rest  # num_parallel_calls: the predicate calls run in order here
    return dso._handle(pl.Filter(dso._ds(ds), dso._function(ctx, captured)))


dso._register("CacheDatasetV2", [_IN, "filename: string", "cache: resource"], _META, _cache_v2)
dso._register(
    "ParallelFilterDataset",
    [_IN, "other_arguments: Targuments", "num_parallel_calls: int64"],
    {**dso._FN, "deterministic": "default", **_META},
    _parallel_filter,
)
dso._register(
    "ParallelInterleaveDataset",
    [
        _IN,
        "other_arguments: Targuments",
        "cycle_length: int64",
        "block_length: int64",
        "sloppy: bool",
        "buffer_output_elements: int64",
        "prefetch_input_elements: int64",
    ],
    {**dso._FN, **_META},
    dso._parallel_interleave(5),
)


# -- stages that only tune TF's runtime: the input's elements as they are ----------------------


async def _same(ctx, ds, *rest):
    return dso._handle(dso._ds(ds))


async def _private_thread_pool(ctx, ds, num_threads):
    if num_threads < 0:
        raise _bad("`num_threads` must be >= 0")
    return dso._handle(dso._ds(ds))


class Sleep(pl.DatasetValue):
    """Each element after a pause of `seconds` (TF's SleepDataset, on the loop)."""

    def __init__(self, input_value, seconds: float):
        self.input, self.seconds = input_value, seconds

    def cardinality(self):
        return self.input.cardinality()

    async def iterate(self, env):
        async for elem in _closing(self.input.iterate(env)):
            await asyncio.sleep(self.seconds)
            yield elem


async def _sleep(ctx, ds, sleep_microseconds):
    if sleep_microseconds < 0:
        raise _bad("`sleep_microseconds` must be >= 0")
    return dso._handle(Sleep(dso._ds(ds), int(sleep_microseconds) / 1e6))


_PASS_THROUGH = {
    "OptimizeDataset": (["optimizations: string"], {"optimization_configs": []}),
    "OptimizeDatasetV2": (
        [
            "optimizations_enabled: string",
            "optimizations_disabled: string",
            "optimizations_default: string",
        ],
        {"optimization_configs": []},
    ),
    "ModelDataset": ([], {"algorithm": 0, "cpu_budget": 0, "ram_budget": 0}),
    "FinalizeDataset": ([], {"has_captured_ref": False}),
    "MaxIntraOpParallelismDataset": (["max_intra_op_parallelism: int64"], {}),
    "NonSerializableDataset": ([], {}),
    "ThreadPoolDataset": (["thread_pool: resource"], {}),
    "ChooseFastestDataset": (None, {"N": 1, "num_experiments": 0}),
}
for _name, (_inputs, _attrs) in _PASS_THROUGH.items():
    if _inputs is None:  # ChooseFastestDataset: equivalent inputs, the first one's elements
        dso._register(_name, ["input_datasets: N * string"], _attrs, _same)
    else:
        dso._register(_name, [_IN, *_inputs], _attrs, _same)


class WithOptions(pl.DatasetValue):
    """The input's elements, with TF's serialized options for the pipeline (which
    GetOptions reads).  Of them the runtime follows map_and_batch_fusion (for a failed
    element, dataset_pipeline.Batch): the outermost options dataset of a pass says it
    as the pass starts (Env), its settings merged over those of the options datasets
    above it (each OptionsDataset holds only the options its with_options gave, as
    TF 2.21 writes them; TF merges them, the later ones over the earlier)."""

    def __init__(self, input_value, serialized: bytes):
        self.input, self.serialized = input_value, serialized
        own = _fusion_settings(serialized)
        above = _options_above(input_value)
        if above is not None:
            own = tuple(a if a is not None else b for a, b in zip(own, above._settings))
        self._settings = own
        fusion, defaults = own
        self.map_and_batch_fusion = fusion if fusion is not None else defaults is not False

    @property
    def bare_bytes(self):
        return self.input.bare_bytes

    @property
    def iterate_tolerant(self):
        """The input's tolerant pass (dataset_pipeline.tolerant_pass), where it has one."""
        if getattr(self.input, "iterate_tolerant", None) is None:
            return None
        return self._tolerant

    def _tolerant(self, env):
        if env.map_and_batch_fusion is None:
            env.map_and_batch_fusion = self.map_and_batch_fusion
        return self.input.iterate_tolerant(env)

    def cardinality(self):
        return self.input.cardinality()

    def iterate(self, env):
        if env.map_and_batch_fusion is None:
            env.map_and_batch_fusion = self.map_and_batch_fusion
        return self.input.iterate(env)

    def chunks(self, env):
        if env.map_and_batch_fusion is None:
            env.map_and_batch_fusion = self.map_and_batch_fusion
        return self.input.chunks(env)


def _fusion_settings(serialized: bytes) -> tuple[bool | None, bool | None]:
    """The (map_and_batch_fusion, apply_default_optimizations) settings of serialized
    Options (OptimizationOptions fields 9 and 1), None where unset; options that do
    not parse set neither."""
    fusion = defaults = None
    try:
        for number, wire, value in proto_wire.fields(serialized):
            if number == 3 and wire == 2:  # optimization_options (a later one merges)
                for inner, inner_wire, v in proto_wire.fields(value):
                    if inner_wire == 0 and inner in (1, 9):
                        if inner == 9:
                            fusion = bool(v)
                        else:
                            defaults = bool(v)
    except ValueError:
        return None, None
    return fusion, defaults


def _options_above(value) -> WithOptions | None:
    """The nearest options dataset `value` was made from, following each maker's first
    dataset input (dataset_ops.built_by), or None."""
    for _ in range(10_000):
        if value is None or isinstance(value, WithOptions):
            return value
        built = dso.built_by(value)
        if built is None:
            return None
        value = next(
            (
                a[()]
                for a in built[1]
                if isinstance(a, np.ndarray)
                and a.shape == ()
                and a.dtype == object
                and isinstance(a[()], pl.DatasetValue)
            ),
            None,
        )
    return None


async def _options(ctx, ds):
    opts = ctx.attrs["serialized_options"]
    opts = opts if isinstance(opts, bytes) else opts.encode()
    return dso._handle(WithOptions(dso._ds(ds), opts))


dso._register("OptionsDataset", [_IN], {"serialized_options": "", **_META}, _options)
dso._register("PrivateThreadPoolDataset", [_IN, "num_threads: int64"], None, _private_thread_pool)
dso._register("SleepDataset", [_IN, "sleep_microseconds: int64"], None, _sleep)


class ThreadPool:
    """TF's dataset thread pool resource: its settings (the loop runs the work here)."""

    def __init__(self, num_threads: int, max_intra_op_parallelism: int, display_name: str):
        self.num_threads = num_threads
        self.max_intra_op_parallelism = max_intra_op_parallelism
        self.display_name = display_name


# -- statistics: latency and bytes of elements, gathered by a stats aggregator --------------


class StatsAggregator:
    """TF's stats aggregator resource: a histogram per statistic of the stages under a
    SetStatsAggregatorDataset (`"<its tag>::<stage tag>"`), kept as TF's Histogram
    keeps one (count, sum, sum of squares, extremes, bucket counts)."""

    def __init__(self, summarizes: bool = True):
        self.summarizes = summarizes
        self.histograms: dict[str, list] = {}
        self.writer = None  # a summary writer (StatsAggregatorSetSummaryWriter)

    def add(self, tag: str, value: float) -> None:
        h = self.histograms.get(tag)
        if h is None:
            h = self.histograms[tag] = [value, value, 0, 0.0, 0.0, 0]
        h[0], h[1] = min(h[0], value), max(h[1], value)
        h[2] += 1
        h[3] += value
        h[4] += value * value
        h[5] = h[5] + summary_ops.bucket_counts(np.array([value], np.float64))
        if self.writer is not None:  # (each value as a histogram event, its count the step)
            self.writer.write_summary(self._summary({tag: self._one(value)}), h[2])

    @staticmethod
    def _one(value: float) -> list:
        counts = summary_ops.bucket_counts(np.array([value], np.float64))
        return [value, value, 1, value, value * value, counts]

    def summary(self) -> bytes:
        """The serialized Summary of every histogram, tags in order (TF's map)."""
        if not self.summarizes:
            return b""
        return self._summary(self.histograms).SerializeToString()

    @staticmethod
    def _summary(histograms: dict) -> Summary:
        out = Summary()
        for tag in sorted(histograms):
            lo, hi, n, total, squares, counts = histograms[tag]
            filled = counts != 0
            keep = filled.copy()  # TF's EncodeToProto(h, false): runs of empty buckets
            keep[:-1] |= filled[1:]  # collapse into the one before a filled bucket
            keep[-1] = True
            index = np.flatnonzero(keep)
            histo = HistogramProto(min=lo, max=hi, num=n, sum=total, sum_squares=squares)
            histo.bucket_limit.extend(summary_ops._LIMITS[index].tolist())
            histo.bucket.extend(counts[index].astype(np.float64).tolist())
            out.value.add(tag=tag, histo=histo)
        return out


# The aggregator (and its tag) of the SetStatsAggregatorDataset whose pass is asking
# for an element: stages below it record there, as TF's IteratorContext carries it.
_AGGREGATOR: contextvars.ContextVar = contextvars.ContextVar("stats_aggregator", default=None)


def _record(tag: str, value: float) -> None:
    current = _AGGREGATOR.get()
    if current is not None:
        agg, prefix = current
        agg.add(f"{prefix}::{tag}" if prefix else tag, float(value))


def _element_bytes(elem) -> int:
    """TF's Tensor::TotalBytes of an element: a string as its 24-byte tstring plus its
    characters, anything else its buffer."""
    n = 0
    for c in elem:
        a = np.asarray(c)
        if a.dtype == object:
            n += sum(24 + len(x) if isinstance(x, bytes) else 24 for x in a.reshape(-1))
        else:
            n += a.nbytes
    return n


class Stats(pl.DatasetValue):
    """The input's elements, each one's latency (microseconds its GetNext took) or its
    bytes recorded under `tag`."""

    def __init__(self, input_value, tag: str, latency: bool):
        self.input, self.tag, self.latency = input_value, tag, latency

    def cardinality(self):
        return self.input.cardinality()

    async def iterate(self, env):
        loop = asyncio.get_running_loop()
        source = self.input.iterate(env)
        try:
            while True:
                start = loop.time()
                try:
                    elem = await source.__anext__()
                except StopAsyncIteration:
                    return
                if self.latency:
                    _record(self.tag, int((loop.time() - start) * 1e6))
                else:
                    _record(self.tag, _element_bytes(elem))
                yield elem
        finally:
            await source.aclose()


class SetStatsAggregator(pl.DatasetValue):
    """The input's elements, its stages' statistics gathered by `aggregator`."""

    def __init__(self, input_value, aggregator: StatsAggregator, tag: str):
        self.input, self.aggregator, self.tag = input_value, aggregator, tag

    def cardinality(self):
        return self.input.cardinality()

    async def iterate(self, env):
        source = self.input.iterate(env)
        try:
            while True:
                token = _AGGREGATOR.set((self.aggregator, self.tag))
                try:
                    elem = await source.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    _AGGREGATOR.reset(token)
                yield elem
        finally:
            await source.aclose()


async def _latency_stats(ctx, ds, tag):
    return dso._handle(Stats(dso._ds(ds), dso._str(tag), True))


async def _bytes_stats(ctx, ds, tag):
    return dso._handle(Stats(dso._ds(ds), dso._str(tag), False))


async def _set_stats_aggregator(ctx, ds, aggregator, tag, counter_prefix):
    agg = dso._unwrap(aggregator, StatsAggregator, "stats aggregator")
    return dso._handle(SetStatsAggregator(dso._ds(ds), agg, dso._str(tag)))


async def _stats_summary(ctx, aggregator):
    agg = dso._unwrap(aggregator, StatsAggregator, "stats aggregator")
    return np.array(agg.summary(), dtype=object)


dso._register("LatencyStatsDataset", [_IN, "tag: string"], None, _latency_stats)
dso._register("BytesProducedStatsDataset", [_IN, "tag: string"], None, _bytes_stats)
dso._register(
    "SetStatsAggregatorDataset",
    [_IN, "stats_aggregator: resource", "tag: string", "counter_prefix: string"],
    None,
    _set_stats_aggregator,
)
for _name in ("StatsAggregatorSummary", "ExperimentalStatsAggregatorSummary"):
    register_op(
        _name,
        inputs=["iterator: resource"],
        outputs=["summary: string"],
        shape_fn=lambda op: [tensor_shape.TensorShape([])],
        stateful=True,
    ).kernel("CPU")(_stats_summary)
    NotDifferentiable(_name)


def _shared(ctx, make):
    a = ctx.attrs
    name = a["shared_name"] or ctx.op.name
    return ctx.resource_mgr(a["container"]).lookup_or_create(a["container"], name, make)


async def _thread_pool_handle(ctx):
    a = ctx.attrs
    return dso._handle(
        _shared(
            ctx,
            lambda: ThreadPool(a["num_threads"], a["max_intra_op_parallelism"], a["display_name"]),
        )
    )


async def _stats_aggregator_handle(ctx):
    summarizes = ctx.op.type != "StatsAggregatorHandleV2"  # (V2's go to a summary writer)
    return dso._handle(_shared(ctx, lambda: StatsAggregator(summarizes)))


def _resource_op(name, attrs, kernel):
    register_op(
        name,
        outputs=["handle: resource"],
        attrs={**attrs, "container": "", "shared_name": ""},
        shape_fn=lambda op: [tensor_shape.TensorShape([])],
        stateful=True,
    ).kernel("CPU")(kernel)
    NotDifferentiable(name)


_POOL = {"num_threads": 0, "max_intra_op_parallelism": 1, "display_name": ""}
for _name in ("ThreadPoolHandle", "ExperimentalThreadPoolHandle"):
    _resource_op(_name, _POOL, _thread_pool_handle)
for _name in (
    "StatsAggregatorHandle",
    "StatsAggregatorHandleV2",
    "ExperimentalStatsAggregatorHandle",
):
    _resource_op(_name, {}, _stats_aggregator_handle)


# -- windows and rebatching ----------------------------------------------------------------------


class SlidingWindow(pl.DatasetValue):
    """Batches of `size` elements `stride` apart, one starting every `shift` elements;
    with `drop`, full windows only."""

    def __init__(self, input_value, size: int, shift: int, stride: int, drop: bool):
        if size <= 0:
            raise _bad("Window size must be greater than zero.")
        if shift <= 0:
            raise _bad("Window shift must be greater than zero.")
        if stride <= 0:
            raise _bad("window_stride must be greater than zero.")
        self.input, self.size, self.shift, self.stride = input_value, size, shift, stride
        self.drop = drop

    async def iterate(self, env):
        source = self.input.iterate(env)
        async for elems in dsm.windows(source, self.size, self.shift, self.stride, self.drop):
            yield pl._batch(elems)


async def _sliding(ctx, ds, size, shift, stride):
    drop = ctx.attrs.get("drop_remainder", True)
    return dso._handle(SlidingWindow(dso._ds(ds), int(size), int(shift), int(stride), drop))


def _rows(elem: tuple) -> list[tuple]:
    n = len(elem[0]) if elem else 0
    return [tuple(c[i] for c in elem) for i in range(n)]


def _stack(rows: list[tuple], like: tuple) -> tuple:
    if rows:
        return tuple(np.stack([r[k] for r in rows]) for k in range(len(like)))
    return tuple(np.empty((0, *np.shape(c)[1:]), np.asarray(c).dtype) for c in like)


class Rebatch(pl.DatasetValue):
    """TF's RebatchDataset: each input batch split in `n` pieces of ceil(size / n) rows
    (the last ones short or empty)."""

    def __init__(self, input_value, num_replicas: int):
        if num_replicas <= 0:
            raise _bad("num_replicas must be greater than zero.")
        self.input, self.n = input_value, num_replicas

    async def iterate(self, env):
        async for elem in _closing(self.input.iterate(env)):
            size = len(elem[0])
            piece = -(-size // self.n)
            for k in range(self.n):
                yield tuple(np.array(c[k * piece : (k + 1) * piece]) for c in elem)


class RebatchSizes(pl.DatasetValue):
    """TF's RebatchDatasetV2: the input's rows in batches of `sizes[0]`, `sizes[1]`, ...
    in turn (a 0 is an empty batch); the short last one kept unless `drop`."""

    def __init__(self, input_value, sizes, drop: bool):
        self.sizes = [int(s) for s in np.ravel(sizes)]
        if not self.sizes or min(self.sizes) < 0:
            raise _bad("batch_sizes must be non-negative and not empty.")
        self.input, self.drop = input_value, drop

    async def iterate(self, env):
        source = self.input.iterate(env)
        rows: list[tuple] = []
        like: tuple | None = None
        done = False

        async def fill(k: int) -> None:
            nonlocal like, done
            while len(rows) < k and not done:
                try:
                    elem = await source.__anext__()
                except StopAsyncIteration:
                    done = True
                    return
                like = elem
                rows.extend(_rows(elem))

        try:
            turn = 0
            while True:
                size = self.sizes[turn % len(self.sizes)]
                turn += 1
                await fill(max(size, 1))
                if not rows:
                    return
                if len(rows) < size:
                    if not self.drop:
                        yield _stack(rows, like)
                    return
                yield _stack(rows[:size], like)
                del rows[:size]
        finally:
            await source.aclose()


async def _rebatch(ctx, ds, num_replicas):
    return dso._handle(Rebatch(dso._ds(ds), int(num_replicas)))


async def _rebatch_v2(ctx, ds, batch_sizes, drop_remainder):
    return dso._handle(RebatchSizes(dso._ds(ds), batch_sizes, bool(drop_remainder)))


dso._register(
    "SlidingWindowDataset",
    [_IN, "window_size: int64", "window_shift: int64", "window_stride: int64"],
    {"drop_remainder": True},
    _sliding,
)
dso._register("RebatchDataset", [_IN, "num_replicas: int64"], {"use_fallback": True}, _rebatch)
dso._register(
    "RebatchDatasetV2", [_IN, "batch_sizes: int64", "drop_remainder: bool"], None, _rebatch_v2
)


# -- auto-sharding --------------------------------------------------------------------------------

_OFF, _AUTO, _FILE, _DATA = -1, 0, 1, 2


def _with_files_sharded(value, n: int, index: int):
    """`value` with its file source reading every n-th file from `index` on, or None
    when its stages do not lead to one file source (a zip, a generator, ...)."""
    if isinstance(value, pl.TFRecords | pl.TextLines | pl.FixedLengthRecords):
        out = copy.copy(value)
        out.paths = value.paths[index::n]
        return out
    inner = getattr(value, "input", None)
    if not isinstance(inner, pl.DatasetValue):
        return None
    if isinstance(value, pl.FlatMap | pl.Interleave) and isinstance(inner, pl.TensorSlices):
        # TF's TFRecordDataset of several files: a reader mapped over the file names,
        # whose list is what gets sharded
        out = copy.copy(value)
        out.input = dsm.Shard(inner, n, index)
        return out
    sharded = _with_files_sharded(inner, n, index)
    if sharded is None:
        return None
    out = copy.copy(value)
    out.input = sharded
    return out


async def _auto_shard(ctx, ds, num_workers, index):
    n, i = int(num_workers), int(index)
    if not 0 <= i < n:
        raise _bad(f"index must be between 0 and {n - 1}")
    policy = ctx.attrs.get("auto_shard_policy", _AUTO)
    value = dso._ds(ds)
    if policy in (_AUTO, _FILE):
        sharded = _with_files_sharded(value, n, i)
        if sharded is not None:
            return dso._handle(sharded)
        if policy == _FILE:
            raise errors.NotFoundError(
                None, None, "Found an unshardable source dataset: the FILE policy needs one"
            )
    if policy in (_AUTO, _DATA):
        return dso._handle(dsm.Shard(value, n, i))
    return dso._handle(value)  # OFF, or HINT with no shard hints in the pipeline


dso._register(
    "AutoShardDataset",
    [_IN, "num_workers: int64", "index: int64"],
    {"auto_shard_policy": 0, "num_replicas": 0},
    _auto_shard,
)


# -- sampling, sources of lists and sparse tensors, filters ---------------------------------------


def _uniform(bits: int) -> np.float32:
    """A 32-bit draw as TF's Uint32ToFloat: the mantissa's 23 bits, in [0, 1)."""
    return np.uint32((bits & 0x7FFFFF) | 0x3F800000).view(np.float32) - np.float32(1.0)


class Sampling(pl.DatasetValue):
    """Each element kept when its uniform draw is below `rate` (one draw per element)."""

    def __init__(self, input_value, rate: float, seed: int, seed2: int):
        self.input, self.rate = input_value, np.float32(rate)
        self.seeds = philox_random.seed_generator(seed, seed2, False)

    async def iterate(self, env):
        stream = philox_random.PhiloxStream(*self.seeds.next_pair())
        async for elem in _closing(self.input.iterate(env)):
            if _uniform(stream.next()) < self.rate:
                yield elem


async def _sampling(ctx, ds, rate, seed, seed2):
    return dso._handle(Sampling(dso._ds(ds), float(rate), int(seed), int(seed2)))


async def _list(ctx, *tensors):
    n = len(ctx.attrs["output_types"])
    if n == 0 or len(tensors) % n:
        raise _bad(f"ListDataset: {len(tensors)} tensors do not make elements of {n} components")
    elems = [tuple(tensors[i : i + n]) for i in range(0, len(tensors), n)]
    return dso._handle(dsm.Elements(elems))


class SparseSlices(pl.DatasetValue):
    """The rows of a sparse tensor, each (indices, values, dense_shape) without the row."""

    def __init__(self, indices, values, dense_shape):
        indices = np.asarray(indices, np.int64)
        self.values, self.shape = np.asarray(values), np.asarray(dense_shape, np.int64)
        if indices.ndim != 2 or self.shape.ndim != 1 or indices.shape[1] != self.shape.size:
            raise _bad("Input indices should be a matrix with one column per dimension.")
        if indices.shape[0] and np.any(np.diff(indices[:, 0]) < 0):
            raise errors.UnimplementedError(
                None,
                None,
                "The SparseTensor must be ordered in the batch dimension; handling "
                "arbitrarily ordered input is not currently supported.",
            )
        self.indices = indices

    def cardinality(self):
        return int(self.shape[0]) if self.shape.size else 0

    async def iterate(self, env):
        rows = self.indices[:, 0]
        for i in range(self.cardinality()):
            lo, hi = np.searchsorted(rows, i, "left"), np.searchsorted(rows, i, "right")
            yield (
                np.array(self.indices[lo:hi, 1:]),
                np.array(self.values[lo:hi]),
                np.array(self.shape[1:]),
            )


async def _sparse_slices(ctx, indices, values, dense_shape):
    return dso._handle(SparseSlices(indices, values, dense_shape))


class FilterByLastComponent(pl.DatasetValue):
    """The elements whose last component (a bool) is true, without that component."""

    def __init__(self, input_value):
        self.input = input_value

    async def iterate(self, env):
        async for elem in _closing(self.input.iterate(env)):
            if np.all(elem[-1]):
                yield elem[:-1]


async def _filter_by_last(ctx, ds):
    return dso._handle(FilterByLastComponent(dso._ds(ds)))


dso._register("SamplingDataset", [_IN, "rate: float32", *_SEEDS], None, _sampling)
dso._register(
    "ListDataset", ["tensors: Tinput_types"], {"Tinput_types": dso._LIST, **_META}, _list
)
dso._register(
    "SparseTensorSliceDataset",
    ["indices: int64", "values: Tvalues", "dense_shape: int64"],
    {"Tvalues": ANY, "output_types": []},
    _sparse_slices,
)
register_op(
    "FilterByLastComponentDataset",
    inputs=[_IN],
    outputs=["output: string"],  # (TF names this dataset op's output so)
    attrs=dict(dso._OUT),
    shape_fn=dso._handle_shape,
    stateful=True,
).kernel("CPU")(_filter_by_last)
NotDifferentiable("FilterByLastComponentDataset")
