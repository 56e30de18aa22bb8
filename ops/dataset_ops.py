"""tf.data's graph ops: datasets as values flowing through the graph, iterators as resources.

As in TF, each `Dataset` transformation adds one op (`TensorSliceDataset`, `MapDataset`,
`BatchDatasetV2`, ...) whose output is a dataset handle: a 0-d string-typed tensor
holding a `dataset_pipeline.DatasetValue` (this runtime has no variant dtype, as queue
handles hold their queue).  Dataset ops only describe: their kernels bind input values
(tensors, batch sizes, seeds, filenames) into a value and return at once.  An iterator
is a resource (`IteratorV2`, `OneShotIterator`) in the session's container;
`MakeIterator` starts a pass over a dataset value, and `IteratorGetNext` awaits the
pass's next element, suspending on the loop while a file is read, a traced function
runs or a prefetch buffer is empty.  The end of the data is `OutOfRangeError`.

Traced functions (map, filter, flat_map, interleave) are ops in the same graph, fed
through placeholders: a function op carries the names of its argument placeholders
(`f_inputs`), of its results (`f_outputs`; for a function with no results whose control
outputs must run, a group_by_reducer's of an empty state, the name of the op each call
runs, as TF's FunctionDef `control_ret`) and of the outer placeholders it captures
(`f_captures`, whose values arrive as the op's `other_arguments`, so an initializable
iterator's feeds reach its functions).  A call is a nested step of the session.  TF's
GraphDefs name FunctionDefs instead (`f`, `predicate`, `key_func`, ...): import turns
them into this form and `as_graph_def` writes TF's (asyncflow/dataset_functions.py), so
TF's pipelines import and run here and ours in TF; the op signatures follow TF's.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
from os import cpu_count

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.kernel_api import PASS_RESOURCE_OPS, pass_resource_state
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.ops import philox_random
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__: list[str] = []

_LIST = TypeConstraint(None, is_list=True)
_HANDLE = tensor_shape.TensorShape([])
_OUT = {"output_types": _LIST, "output_shapes": []}
_FN = {"f_inputs": [], "f_outputs": [], "f_captures": [], "Targuments": _LIST}


def _handle_shape(op):
    return [_HANDLE]


def _handle(obj) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = obj
    return out


def _unwrap(value, cls, what):
    v = value[()] if isinstance(value, np.ndarray) and value.shape == () else value
    if not isinstance(v, cls):
        raise errors.InvalidArgumentError(None, None, f"Expected a {what} handle, got {v!r}")
    return v


def _str(value) -> str:
    v = value[()] if isinstance(value, np.ndarray) else value
    return v.decode() if isinstance(v, bytes) else str(v)


def _ds(value) -> pl.DatasetValue:
    return _unwrap(value, pl.DatasetValue, "dataset")


def _register(name, inputs, attrs=None, kernel=None):
    op_def = register_op(
        name,
        inputs=inputs,
        outputs=["handle: string"],
        attrs={**_OUT, **(attrs or {})},
        shape_fn=_handle_shape,
        stateful=True,  # no folding or CSE: a dataset value carries per-pass state
    )
    NotDifferentiable(name)
    op_def.kernel("CPU")(_recording(kernel))
    return op_def


def dataset_name(value: pl.DatasetValue, op) -> str:
    """The name TF's dataset kernels give a dataset without one ("<op type>:<id>", the
    id counting datasets made in this process); DatasetToGraph writes it as metadata."""
    return value.__dict__.get("_dataset_name") or f"{op.type}:0"


def built_by(value: pl.DatasetValue):
    """The (op, input values) whose kernel made `value` first, or None (a value a
    dataset op passes on keeps its maker's).  DatasetToGraph and the ops that read a
    pipeline's structure (ops/dataset_raw_more.py) walk these: the inputs as that run
    fed them, where the graph has placeholders."""
    return value.__dict__.get("_built_by")


# The datasets made in this process, counted as TF counts them in its datasets' names
# ("MapDataset:1"), which its errors from dataset functions give (pl.in_function).
_DATASET_IDS = itertools.count()


def _recording(kernel):
    """`kernel`, noting on each dataset value it returns the op and the inputs."""

    def note(ctx, args, out):
        v = out[()] if isinstance(out, np.ndarray) and out.shape == () else None
        if isinstance(v, pl.DatasetValue):
            n = next(_DATASET_IDS)
            prev = v.__dict__.get("_built_by")
            if prev is None or prev[0] is ctx.op:  # (a pass-through op keeps its input's)
                v.__dict__["_built_by"] = (ctx.op, args)
                v.__dict__["_dataset_name"] = f"{ctx.op.type}:{n}"
                for a in vars(v).values():  # (its functions' errors name it, as TF's)
                    if type(a) is pl.Function and a.label is None:
                        a.label = f"{ctx.op.type}:{n}"
        return out

    async def recorded(ctx, *args):
        return note(ctx, args, await kernel(ctx, *args))

    recorded.__name__ = recorded.__qualname__ = getattr(kernel, "__name__", "kernel")
    return recorded


def function_result(graph, name: str):
    """A name of a function's `<prefix>_outputs`: a tensor (`op:0`), or an op (no `:`),
    the NoOp of the control outputs of a function with no results, which each call
    runs (TF's FunctionDef `control_ret`)."""
    if ":" in name:
        return graph.get_tensor_by_name(name)
    return graph.get_operation_by_name(name)


def make_function(fn: tuple, captured) -> pl.Function:
    """The `pl.Function` of resolved (inputs, outputs, captures) `fn`: a function whose
    outputs are ops (no results) runs them, its result ()."""
    outputs = fn[1]
    cls = pl.Effects if outputs and isinstance(outputs[0], ops.Operation) else pl.Function
    return cls(fn, fn[0], outputs, fn[2], captured)


def _function(ctx, captured) -> pl.Function:
    """The traced function of this op, resolved once per (session, op)."""
    st = ctx.kernel_state
    fn = st.get("fn")
    if fn is None:
        g = ctx.op.graph
        a = ctx.attrs
        get = g.get_tensor_by_name
        fn = (
            [get(n) for n in a["f_inputs"]],
            [function_result(g, n) for n in a["f_outputs"]],
            [get(n) for n in a["f_captures"]],
        )
        # A task plans it now (distributed/task_functions.py): an op of another task's
        # resource fails this op, as in TF the iterator's initialization.
        prepare = getattr(ctx.session, "prepare_function", None)
        if prepare is not None:
            prepare(*fn)
        st["fn"] = fn
    return make_function(fn, captured)


def _datasets_may_fail(ctx, prefix: str = "f") -> bool:
    """Whether the datasets this op's function (attrs `{prefix}_outputs`, ...) makes may
    hold a failed element (a stage with a function of its own, a map say, or a tf.data
    service read in the function's body): then flat_map, interleave and group_by_window
    take their tolerant pass (the plain one is faster).  Looked up once per (session,
    op)."""
    st = ctx.kernel_state
    hit = st.get("may_fail_" + prefix)
    if hit is None:
        get = ctx.op.graph.get_tensor_by_name
        stack = [get(n).op for n in ctx.attrs[f"{prefix}_outputs"]]
        seen: set = set()
        hit = False
        while stack and not hit:
            o = stack.pop()
            if o.name in seen:
                continue
            seen.add(o.name)
            hit = o.type.startswith("DataServiceDataset") or any(
                a.endswith("_outputs") and a[:-8] + "_inputs" in o.attrs for a in o.attrs
            )
            stack.extend(t.op for t in o.inputs)
        st["may_fail_" + prefix] = hit
    return hit


# -- sources ----------------------------------------------------------------------------------


async def _tensor_slices(ctx, *components):
    return _handle(pl.TensorSlices(components))


async def _tensors(ctx, *components):
    return _handle(pl.Tensors(components))


async def _range(ctx, start, stop, step):
    return _handle(pl.Range(start, stop, step, ctx.attrs["output_types"][0].as_numpy_dtype))


async def _tfrecords(ctx, filenames, compression, buffer_size):
    comp = _str(compression)
    return _handle(pl.TFRecords(filenames, comp))


async def _text_lines(ctx, filenames, compression, buffer_size):
    comp = _str(compression)
    return _handle(pl.TextLines(filenames, comp))


async def _fixed_length(ctx, filenames, header, record, footer, buffer_size, compression):
    comp = _str(compression)
    return _handle(pl.FixedLengthRecords(filenames, header, record, footer, comp))


_GENERATORS: dict[str, tuple] = {}  # token -> (factory, flatten): Python objects stay in-process


async def _generator(ctx):
    token = ctx.attrs["token"]
    try:
        factory, flatten = _GENERATORS[token]
    except KeyError:
        raise errors.NotFoundError(
            None, None, f"The generator of {ctx.op.name} is not registered in this process"
        ) from None
    dts = [
        d.as_numpy_dtype if d != dtypes.string else np.dtype(object)
        for d in ctx.attrs["output_types"]
    ]
    shapes = [
        None if s.ndims is None else [d.value for d in s.dims]
        for s in map(tensor_shape.as_shape, ctx.attrs.get("output_shapes") or [])
    ]
    return _handle(pl.Generator(factory, dts, flatten, shapes))


# TF's source ops type their components by `Toutput_types` alone: `output_types` may be
# absent from a GraphDef TF wrote.
_SOURCE = {"Toutput_types": _LIST, "output_types": []}
_register("TensorSliceDataset", ["components: Toutput_types"], _SOURCE, _tensor_slices)
_register("TensorDataset", ["components: Toutput_types"], _SOURCE, _tensors)
# TF's file sources write no `output_types` (their records are strings).
_RECORDS = {"output_types": [dtypes.string]}
_register("RangeDataset", ["start: int64", "stop: int64", "step: int64"], None, _range)
_register(
    "TFRecordDataset",
    ["filenames: string", "compression_type: string", "buffer_size: int64"],
    _RECORDS,
    _tfrecords,
)
_register(
    "TextLineDataset",
    ["filenames: string", "compression_type: string", "buffer_size: int64"],
    _RECORDS,
    _text_lines,
)
_register(
    "FixedLengthRecordDatasetV2",
    [
        "filenames: string",
        "header_bytes: int64",
        "record_bytes: int64",
        "footer_bytes: int64",
        "buffer_size: int64",
        "compression_type: string",
    ],
    _RECORDS,
    _fixed_length,
)
_register("GeneratorDataset", [], {"token": ""}, _generator)


# -- transformations ----------------------------------------------------------------------------


def _map_function(ctx, captured) -> pl.Function:
    """A map's function; for maps Dataset.map fused into one call as it built them, the
    op names of each earlier map's part (`pl.Function.earlier`: their errors are those
    maps', as TF runs them apart)."""
    fn = _function(ctx, captured)
    fn.earlier = getattr(ctx.op, "_fused_maps", ())
    fn.reads = getattr(ctx.op, "_fused_reads", None)  # (what each part reads)
    return fn


def _preserves(ctx) -> bool:
    """A map's preserve_cardinality (absent from TF1's ops and a GraphDef's older ones)."""
    return bool(ctx.attrs.get("preserve_cardinality", False))


async def _map(ctx, ds, *captured):
    fn = _map_function(ctx, captured)
    return _handle(pl.Map(_ds(ds), fn, preserve_cardinality=_preserves(ctx)))


async def _parallel_map(ctx, ds, *rest):
    *captured, n = rest
    fn, parallel = _map_function(ctx, captured), int(n) if n > 0 else 4
    return _handle(pl.Map(_ds(ds), fn, parallel, _preserves(ctx)))


async def _map_and_batch(ctx, ds, *rest):
    *captured, batch_size, n, drop = rest
    fn, parallel = _function(ctx, captured), int(n) if n > 0 else 4
    mapped = pl.Map(_ds(ds), fn, parallel, _preserves(ctx))
    return _handle(pl.Batch(mapped, int(batch_size), bool(drop), fused=True))


def _parallel_interleave(trailing: int):
    """A parallel interleave's kernel: `trailing` int64 inputs after the captures, the
    first two cycle and block length (TF's deterministic order: as InterleaveDataset;
    buffer, prefetch and parallel-call counts only tune TF's threads)."""

    async def kernel(ctx, ds, *rest):
        captured, ints = rest[: len(rest) - trailing], rest[len(rest) - trailing :]
        cycle = int(ints[0])
        if cycle <= 0:  # AUTOTUNE: TF takes the schedulable cores
            cycle = cpu_count()
        fn, fails = _function(ctx, captured), _datasets_may_fail(ctx)
        return _handle(pl.Interleave(_ds(ds), fn, cycle, int(ints[1]), True, fails))

    return kernel


async def _filter(ctx, ds, *captured):
    return _handle(pl.Filter(_ds(ds), _function(ctx, captured)))


async def _flat_map(ctx, ds, *captured):
    return _handle(pl.FlatMap(_ds(ds), _function(ctx, captured), _datasets_may_fail(ctx)))


async def _interleave(ctx, ds, *rest):
    *captured, cycle, block = rest
    fn, fails = _function(ctx, captured), _datasets_may_fail(ctx)
    return _handle(pl.Interleave(_ds(ds), fn, int(cycle), int(block), False, fails))


async def _batch(ctx, ds, batch_size, drop_remainder):
    return _handle(pl.Batch(_ds(ds), int(batch_size), bool(drop_remainder)))


async def _padded_batch(ctx, ds, batch_size, *rest):
    n = len(ctx.attrs["Toutput_types"])
    shapes, values, drop = rest[:n], rest[n : 2 * n], rest[2 * n]
    return _handle(pl.PaddedBatch(_ds(ds), int(batch_size), shapes, values, bool(drop)))


async def _unbatch(ctx, ds):
    return _handle(pl.Unbatch(_ds(ds)))


async def _shuffle(ctx, ds, buffer_size, seed, seed2):
    return _handle(
        pl.Shuffle(_ds(ds), buffer_size, seed, seed2, ctx.attrs["reshuffle_each_iteration"])
    )


async def _repeat(ctx, ds, count):
    return _handle(pl.Repeat(_ds(ds), count))


async def _take(ctx, ds, count):
    return _handle(pl.Take(_ds(ds), count))


async def _skip(ctx, ds, count):
    return _handle(pl.Skip(_ds(ds), count))


async def _zip(ctx, *datasets):
    return _handle(pl.Zip([_ds(d) for d in datasets]))


async def _concatenate(ctx, a, b):
    return _handle(pl.Concatenate(_ds(a), _ds(b)))


async def _cache(ctx, ds, filename):
    return _handle(pl.Cache(_ds(ds)))


async def _prefetch(ctx, ds, buffer_size):
    value = pl.Prefetch(_ds(ds), int(buffer_size))
    if pl.PREFETCH_HOOK is not None:
        value = pl.PREFETCH_HOOK(ctx, value)
    return _handle(value)


_IN = "input_dataset: string"
_register("MapDataset", [_IN, "other_arguments: Targuments"], _FN, _map)
_register(
    "ParallelMapDataset",
    [_IN, "other_arguments: Targuments", "num_parallel_calls: int32"],
    _FN,
    _parallel_map,
)
_register(
    "ParallelMapDatasetV2",
    [_IN, "other_arguments: Targuments", "num_parallel_calls: int64"],
    {
        **_FN,
        "deterministic": "default",
        "use_inter_op_parallelism": True,
        "preserve_cardinality": False,
        "use_unbounded_threadpool": False,
    },
    _parallel_map,
)
_register(
    "MapAndBatchDataset",
    [
        _IN,
        "other_arguments: Targuments",
        "batch_size: int64",
        "num_parallel_calls: int64",
        "drop_remainder: bool",
    ],
    {**_FN, "preserve_cardinality": False},
    _map_and_batch,
)
_register("FilterDataset", [_IN, "other_arguments: Targuments"], _FN, _filter)
_register("FlatMapDataset", [_IN, "other_arguments: Targuments"], _FN, _flat_map)
_register(
    "InterleaveDataset",
    [_IN, "other_arguments: Targuments", "cycle_length: int64", "block_length: int64"],
    _FN,
    _interleave,
)
_CYCLE = [_IN, "other_arguments: Targuments", "cycle_length: int64", "block_length: int64"]
_register(
    "ParallelInterleaveDatasetV2",
    [*_CYCLE, "num_parallel_calls: int64"],
    {**_FN, "sloppy": False},
    _parallel_interleave(3),
)
_register(
    "ParallelInterleaveDatasetV3",
    [*_CYCLE, "num_parallel_calls: int64"],
    {**_FN, "deterministic": "default"},
    _parallel_interleave(3),
)
_register(
    "ParallelInterleaveDatasetV4",
    [
        *_CYCLE,
        "buffer_output_elements: int64",
        "prefetch_input_elements: int64",
        "num_parallel_calls: int64",
    ],
    {**_FN, "deterministic": "default"},
    _parallel_interleave(5),
)
_register(
    "LegacyParallelInterleaveDatasetV2",
    [*_CYCLE, "buffer_output_elements: int64", "prefetch_input_elements: int64"],
    {**_FN, "deterministic": "default"},
    _parallel_interleave(4),
)
_register("BatchDatasetV2", [_IN, "batch_size: int64", "drop_remainder: bool"], None, _batch)
_register(
    "PaddedBatchDatasetV2",
    [
        _IN,
        "batch_size: int64",
        "padded_shapes: N * int64",
        "padding_values: Toutput_types",
        "drop_remainder: bool",
    ],
    {"Toutput_types": _LIST, "N": 1, "output_types": []},  # TF's writes Toutput_types only
    _padded_batch,
)
_register("UnbatchDataset", [_IN], None, _unbatch)
_register(
    "ShuffleDataset",
    [_IN, "buffer_size: int64", "seed: int64", "seed2: int64"],
    {"reshuffle_each_iteration": True},
    _shuffle,
)
_register("RepeatDataset", [_IN, "count: int64"], None, _repeat)
_register("TakeDataset", [_IN, "count: int64"], None, _take)
_register("SkipDataset", [_IN, "count: int64"], None, _skip)
_register("ZipDataset", ["input_datasets: N * string"], {"N": 1}, _zip)
_register("ConcatenateDataset", [_IN, "another_dataset: string"], None, _concatenate)
_register("CacheDataset", [_IN, "filename: string"], None, _cache)
_register("PrefetchDataset", [_IN, "buffer_size: int64"], None, _prefetch)


# -- iterators ------------------------------------------------------------------------------------


class IteratorResource:
    """One pass at a time over a dataset; `get_next` hands out its elements in order.

    Concurrent GetNext calls (steps in flight at once) take elements one after another
    under an asyncio lock, as TF's iterator mutex does."""

    def __init__(self, name: str, output_types, output_shapes, container: str = ""):
        self.name = name
        self.container = container
        self.output_types = list(output_types)
        self.output_shapes = list(output_shapes)
        self.stream = None
        self._lock: asyncio.Lock | None = None
        # The pass's dataset and the elements it has given: what a saved iterator state
        # holds (ops/dataset_iterator_state.py restores it by replaying the pass).
        self.value: pl.DatasetValue | None = None
        self.position = 0
        self.seed_states: list = []

    async def start(self, value: pl.DatasetValue, env: pl.Env) -> None:
        self.seed_states = _seed_states(value)
        env.name_from(value)  # (its functions' errors name their path from here)
        # A map or filter on top runs tolerantly: a failed call is that element's error
        # and the pass goes on (TF's iterator gives the next element on the next call).
        tolerant = getattr(value, "iterate_tolerant", None)
        stream = tolerant(env) if tolerant is not None else value.iterate(env)
        old, self.stream = self.stream, stream
        self.value, self.position = value, 0
        if old is not None:
            await old.aclose()

    async def get_next(self) -> tuple:
        """The next element.

        Raises:
          FailedPreconditionError: the iterator was never initialized.
          OutOfRangeError: the end of the data (again on every later call).
        """
        if self.stream is None:
            raise errors.FailedPreconditionError(
                None,
                None,
                "GetNext() failed because the iterator has not been initialized. Ensure "
                "that you have run the initializer operation for this iterator before "
                "getting the next element.",
            )
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                elem = await self.stream.__anext__()
                self.position += 1
            except StopAsyncIteration:
                raise errors.OutOfRangeError(None, None, "End of sequence") from None
            if type(elem) is pl.Failed:
                raise elem.error
            return elem


def _seed_states(value: pl.DatasetValue) -> list:
    """(generator, copy of its state) for each reshuffling seed generator of `value`'s
    stages, as a pass starts: a restored iterator rewinds them to replay the pass."""
    out, stack, seen = [], [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen or not hasattr(v, "__dict__"):
            continue
        seen.add(id(v))
        for a in vars(v).values():
            if isinstance(a, pl.DatasetValue):
                stack.append(a)
            elif isinstance(a, list | tuple):
                stack.extend(x for x in a if isinstance(x, pl.DatasetValue))
            elif isinstance(a, philox_random.RandomSeeds):
                out.append((a, copy.deepcopy(a._stream)))
    return out


_ITER_ATTRS = {**_OUT, "shared_name": "", "container": ""}


def _iterator_resource(ctx, name=None) -> tuple[IteratorResource, bool]:
    a = ctx.attrs
    name = name or a["shared_name"] or ctx.op.name
    created = []

    def make():
        created.append(1)
        return IteratorResource(name, a["output_types"], a["output_shapes"], a["container"])

    it = ctx.resource_mgr(a["container"]).lookup_or_create(a["container"], name, make)
    return it, bool(created)


IteratorV2 = register_op(
    "IteratorV2",
    outputs=["handle: string"],
    attrs=_ITER_ATTRS,
    shape_fn=_handle_shape,
    stateful=True,
)
NotDifferentiable("IteratorV2")


@IteratorV2.kernel("CPU")
async def _iterator(ctx):
    return _handle(_iterator_resource(ctx)[0])


_one_shot_names = itertools.count(1)
OneShotIterator = register_op(
    "OneShotIterator",
    inputs=["dataset: string"],
    outputs=["handle: string"],
    attrs=_ITER_ATTRS,
    shape_fn=_handle_shape,
    stateful=True,
)
NotDifferentiable("OneShotIterator")
PASS_RESOURCE_OPS.add("OneShotIterator")


@OneShotIterator.kernel("CPU")
async def _one_shot(ctx, dataset):
    """Makes the iterator and starts its pass over `dataset` once; later steps only
    hand out its handle.  Once it is made, the master feeds `dataset` an empty string
    (`kernel_state["inputs_spent"]`: asyncflow/master.py), so the ops building the
    dataset run once, as TF runs the `dataset_factory` once; an iterator made again
    (its container reset) starts over the dataset first made.  The iterator's name is
    its own to this kernel state (the session's: TF's is unique to the kernel), so the
    sessions of a remote task each make theirs; `kernel_state["release"]` deletes it
    (when the session's connection closes: distributed/service.py).  One made inside a
    dataset function is the pass's (kernel_api.pass_resource_state), held by it alone:
    `_one_shot_in_pass`."""
    if ctx.attrs["shared_name"]:
        raise errors.InvalidArgumentError(
            None, None, "OneShotIteratorOp does not currently support the 'shared_name' attr."
        )
    pass_st = pass_resource_state(ctx)
    if pass_st is not None:
        return _handle(await _one_shot_in_pass(ctx, pass_st, dataset))
    st = ctx.kernel_state
    name = st.get("iterator_name")
    if name is None:
        name = st["iterator_name"] = f"_{next(_one_shot_names)}_{ctx.op.name}"
    it, created = _iterator_resource(ctx, name)
    if created:
        mgr = ctx.resource_mgr(it.container)
        st["release"] = functools.partial(mgr.delete, it.container, it.name)
        try:
            value = (
                dataset[()] if isinstance(dataset, np.ndarray) and dataset.shape == () else dataset
            )
            ds = value if isinstance(value, pl.DatasetValue) else st.get("dataset")
            if ds is None and isinstance(value, bytes | str) and not value:
                raise errors.FailedPreconditionError(  # (the master fed the spent input)
                    None,
                    None,
                    "The one-shot iterator's dataset was made by an earlier step and this "
                    "kernel's state is gone (a lost connection to the task): make a new "
                    "session",
                )
            if ds is None:
                ds = _ds(dataset)  # (InvalidArgumentError: not a dataset)
            await it.start(ds, pl.Env(ctx.session))
        except BaseException:
            ctx.resource_mgr(it.container).delete(it.container, it.name)  # (made anew next)
            raise
        st["dataset"] = ds
        st["inputs_spent"] = True
    return _handle(it)


async def _one_shot_in_pass(ctx, st: dict, dataset) -> IteratorResource:
    """The iterator of a OneShotIterator inside a dataset function: the pass's first
    element makes it over `dataset` (the dataset ops run with each call), the next ones
    read on, as TF's kernel, made anew for each pass.  No resource manager holds it."""
    it = st.get("resource")
    if it is None:
        a = ctx.attrs
        name = f"_{next(_one_shot_names)}_{ctx.op.name}"
        it = st["resource"] = IteratorResource(name, a["output_types"], a["output_shapes"], "")
        value = dataset[()] if isinstance(dataset, np.ndarray) and dataset.shape == () else dataset
        try:
            await it.start(value if isinstance(value, pl.DatasetValue) else _ds(dataset),
                           pl.Env(ctx.session))  # fmt: skip
        except BaseException:
            del st["resource"]  # (made anew by the next element)
            raise
    return it


def _check_compatible(ctx, it: IteratorResource, types, what: str):
    if not types and what == "MakeIterator":  # a GraphDef TF wrote: nothing to check
        return
    if [d.base_dtype for d in types] != [d.base_dtype for d in it.output_types]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{what}: expected types {[d.name for d in it.output_types]} but got "
            f"{[d.name for d in types]}",
        )


MakeIterator = register_op(
    "MakeIterator",
    inputs=["dataset: string", "iterator: string"],
    attrs={"output_types": []},  # ours checks the iterator's types; TF's writes none
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("MakeIterator")


@MakeIterator.kernel("CPU")
async def _make_iterator(ctx, dataset, iterator):
    it = _unwrap(iterator, IteratorResource, "iterator")
    _check_compatible(ctx, it, ctx.attrs["output_types"], "MakeIterator")
    await it.start(_ds(dataset), pl.Env(ctx.session))


def _get_next_shapes(op):
    return list(op._attr("output_shapes")) or [None] * len(op.outputs)


IteratorGetNext = register_op(
    "IteratorGetNext",
    inputs=["iterator: string"],
    outputs=["components: output_types"],
    attrs=dict(_OUT),
    shape_fn=_get_next_shapes,
    stateful=True,
    is_async=True,
)
NotDifferentiable("IteratorGetNext")


@IteratorGetNext.kernel("CPU")
async def _get_next(ctx, iterator):
    it = _unwrap(iterator, IteratorResource, "iterator")
    elem = await it.get_next()
    want = ctx.attrs["output_types"]
    if len(elem) != len(want):
        raise errors.InvalidArgumentError(
            None, None, f"Expected {len(want)} components but the element has {len(elem)}"
        )
    out = [component_out(v, dt) for v, dt in zip(elem, want)]
    return out[0] if len(out) == 1 else tuple(out)


def component_out(v, dt) -> np.ndarray:
    """An element's component as an output of type `dt`.  A SparseTensor component
    asked for as a variant (TF's GraphDefs type them so) is TF's serialized form: the
    3-vector of its indices, values and dense shape, which DeserializeSparse reads."""
    v = np.asarray(v)
    if dt == dtypes.variant:
        sp = pl._sparse_of(v)
        if sp is not None:
            out = np.empty(3, dtype=object)
            out[0], out[1], out[2] = sp.indices, sp.values, sp.dense_shape
            return out
    npdt = np.dtype(object) if dt in (dtypes.string, dtypes.variant) else dt.as_numpy_dtype
    return v.astype(npdt) if v.dtype != npdt else v


# -- string handles: feedable iterators ------------------------------------------------

_PREFIX = b"asyncflow-iterator\x00"

IteratorToStringHandle = register_op(
    "IteratorToStringHandle",
    inputs=["resource_handle: string"],
    outputs=["string_handle: string"],
    shape_fn=_handle_shape,
    stateful=True,
)
NotDifferentiable("IteratorToStringHandle")


@IteratorToStringHandle.kernel("CPU")
async def _to_string_handle(ctx, resource_handle):
    it = _unwrap(resource_handle, IteratorResource, "iterator")
    out = np.empty((), object)
    out[()] = _PREFIX + it.container.encode() + b"\x00" + it.name.encode()
    return out


IteratorFromStringHandleV2 = register_op(
    "IteratorFromStringHandleV2",
    inputs=["string_handle: string"],
    outputs=["resource_handle: string"],
    attrs=dict(_OUT),
    shape_fn=_handle_shape,
    stateful=True,
)
NotDifferentiable("IteratorFromStringHandleV2")


@IteratorFromStringHandleV2.kernel("CPU")
async def _from_string_handle(ctx, string_handle):
    raw = string_handle[()] if isinstance(string_handle, np.ndarray) else string_handle
    if not isinstance(raw, bytes) or not raw.startswith(_PREFIX) or raw.count(b"\x00") != 2:
        raise errors.InvalidArgumentError(None, None, f"Invalid iterator string handle {raw!r}")
    container, name = (p.decode() for p in raw[len(_PREFIX) :].split(b"\x00"))
    it = ctx.resource_mgr(container).lookup(container, name)
    _check_compatible(ctx, it, ctx.attrs["output_types"], "IteratorFromStringHandle")
    return _handle(it)


def register_generator(token: str, factory, flatten) -> None:
    """Keep `from_generator`'s Python callable for GeneratorDataset op `token`."""
    _GENERATORS[token] = (factory, flatten)


def function_attrs(inputs, outputs, captures) -> dict:
    """The attrs naming a traced function's placeholders, results and captures."""
    return {
        "f_inputs": [t.name for t in inputs],
        "f_outputs": [t.name for t in outputs],
        "f_captures": [t.name for t in captures],
    }


def external_placeholders(outputs, inputs) -> list:
    """Placeholders outside a traced function that its results depend on (its captures:
    fed by the step, their values reach the function as the op's inputs)."""
    seen, stack, found = set(), [t.op for t in outputs], []
    own = {t.op for t in inputs}
    while stack:
        op = stack.pop()
        if op in seen or op in own:
            continue
        seen.add(op)
        if op.type in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault"):
            found.append(op.outputs[0])
            continue
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return found


_PLACEHOLDERS = ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")


def _by_value(t) -> bool:
    """Whether outer tensor `t` is a capture TF evaluates when the dataset op runs and
    holds for the pass (refcap_tf.json, refcap_more_tf.json): not a variable or its
    `Identity` (a ref variable's buffer is shared with the function, so TF's calls see
    its assignments), a resource handle or a constant.  A result of an op of several
    (`tf.split`, `tf.unstack`, `tf.unique`) is one, each result the function uses its own
    capture, unless one of the op's results is a ref or a handle: the function then
    computes it at each call.  An outer dataset is one: built once, iterated at each
    call (a shuffle of it reshuffles from call to call, as TF's)."""
    op = t.op
    if op.type in _PLACEHOLDERS:
        return True
    if op.type == "Const":
        return False
    if op.type == "Identity" and op.inputs[0].dtype.is_ref_dtype:  # (`v`'s value: shared)
        return False
    return all(_plain_value(o.dtype) for o in op.outputs)


def _plain_value(dt) -> bool:
    return not dt.is_ref_dtype and dt.base_dtype not in (dtypes.resource, dtypes.variant)


def function_captures(outputs, inputs, first_id: int) -> list:
    """The outer tensors a function traced after op id `first_id` uses that TF captures
    by value (`_by_value`): its placeholders, fed by the step, and tensors computed
    outside it (`v * 2`, a random op), evaluated once as the dataset op runs, as TF's
    captures are; their values reach the function as the op's inputs.  Other outer ops
    (variables, constants) are evaluated at each call."""
    seen, found = set(), []
    stack: list = list(outputs)  # tensors used as data, ops used as control inputs
    own = {t.op for t in inputs}
    while stack:
        t = stack.pop()
        op = t if isinstance(t, ops.Operation) else t.op
        if op in own:
            continue
        if op is not t and op._id <= first_id and _by_value(t):
            if t not in found:
                found.append(t)
            continue
        if op in seen:
            continue
        seen.add(op)
        if op.type in _PLACEHOLDERS:  # (an outer placeholder as a control input)
            found.append(op.outputs[0])
            continue
        stack.extend(op.inputs)
        stack.extend(op.control_inputs)
    return found


def dataset_op(op_type: str, inputs, attrs, name=None) -> ops.Tensor:
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs[0]
