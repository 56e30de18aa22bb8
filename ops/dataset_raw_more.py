"""The last of tf.data's raw ops (ops/dataset_raw.py has the note): the ops that read a
pipeline's structure (`AssertNextDataset`, `AssertPrevDataset`, `ComputeBatchSize`,
`GetOptions`), weighted and index flat maps, `WindowOp`, `RewriteDataset`, and the ops
TF 2.21 only runs with parts this runtime has not (its grappler rewrites, a data
service, an autotuning model, GPU-only kernels), which give TF's results or TF's errors
on CPU.  A pipeline as TF's GraphDef and back is ops/dataset_graph.py.

A pipeline's structure is read from the ops that made its values
(`dataset_ops.built_by`: each dataset value knows its op and the inputs that run gave
it), so fed batch sizes count as TF's constants do; what follows a stage (AssertNext)
from its op's consumers in the graph.  TF reads the structure after its rewrites (`map`
becomes `ParallelMapV2` under TF2's default options, a `Prefetch` ends a TF2 pipeline,
`batch` gets `parallel_copy`); this runtime has none, so the names and attrs checked
are those of the ops in the graph, as TF1's options leave them for the pipelines
recorded (tests/test_data_raw_ops_s28.py).
"""

from __future__ import annotations

import re

import numpy as np

from asyncflow import dtypes, errors, proto_wire, tensor_shape
from asyncflow.graph_io import node_def
from asyncflow.ops import (
    dataset_graph,  # noqa: F401 - DatasetToGraph and back
    dataset_raw,
    summary_writer_ops,
)
from asyncflow.ops import dataset_more as dsm
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.registry import NotDifferentiable, get_op_def, register_op

__all__: list[str] = []

_IN = "input_dataset: string"
_closing = dsm._closing


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _strings(x) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.ravel(x).tolist()]


# -- the structure of a pipeline -----------------------------------------------------------------

# Ops TF's iterators pass through (no iterator of their own, so no name in its prefix).
_PASS_THROUGH = frozenset(
    {
        "OptionsDataset",
        "ModelDataset",
        "OptimizeDataset",
        "OptimizeDatasetV2",
        "FinalizeDataset",
        "Identity",
    }
)


def _dataset_inputs(op, args) -> list:
    """The dataset values among an op's inputs, in order."""
    out = []
    for a in args:
        v = a[()] if isinstance(a, np.ndarray) and a.shape == () and a.dtype == object else None
        if isinstance(v, pl.DatasetValue):
            out.append(v)
    return out


def _upstream(value) -> list:
    """The (op, inputs) that made `value` and the values it was made from, following
    each op's first dataset input up to the source."""
    out = []
    while value is not None and len(out) < 10_000:
        built = dso.built_by(value)
        if built is None:
            break
        out.append(built)
        ins = _dataset_inputs(*built)
        value = ins[0] if ins else None
    return out


def _token(op_type: str) -> str:
    """TF's name of a dataset op's iterator (`ParallelMapDatasetV2` -> `ParallelMapV2`)."""
    return op_type.replace("Dataset", "", 1)


def _matches_any_version(want: str, got: str) -> bool:
    """TF's MatchesAnyVersion: `got` is `want`, or `want` with a version suffix."""
    return got == want or re.fullmatch(re.escape(want) + r"V\d+", got) is not None


def _downstream(op) -> list[str]:
    """The iterator names after `op`'s in TF's prefix: its consumers' up to `Root`."""
    names: list[str] = []
    seen = set()
    while op.name not in seen and len(names) < 10_000:
        seen.add(op.name)
        out = op.outputs[0].name
        nxt = next(
            (
                c
                for c in op.outputs[0].consumers()
                if c.inputs
                and c.inputs[0].name == out
                and ("Dataset" in c.type or c.type == "Identity")
                and c.outputs
            ),
            None,
        )
        if nxt is None:
            break
        if nxt.type not in _PASS_THROUGH:
            names.append(_token(nxt.type))
        op = nxt
    return [*names, "Root"]


async def _assert_next(ctx, ds, transformations):
    want = _strings(transformations)
    got = _downstream(ctx.op)
    if len(want) > len(got):
        raise _bad(f"Asserted next {len(want)} transformations but encountered only {len(got)}.")
    for i, (w, g) in enumerate(zip(want, got)):
        if not _matches_any_version(w, g):
            raise _bad(
                f"Asserted transformation matching {w} at offset {i} but encountered {g} "
                "transformation instead."
            )
    return ds


def _parse_transformation(text: str):
    from google.protobuf import text_format

    from asyncflow.protos.attr_value_pb2 import NameAttrList

    try:
        return text_format.Parse(text, NameAttrList())
    except text_format.ParseError:
        return None


def _attr_equal(op, name: str, want) -> bool:
    try:
        have = op.get_attr(name)
    except (ValueError, KeyError):
        return False
    kind = want.WhichOneof("value")
    if kind == "s":
        return (have.encode() if isinstance(have, str) else have) == want.s
    if kind == "b":
        return isinstance(have, bool) and have == want.b
    if kind == "i":
        return not isinstance(have, bool) and isinstance(have, int) and have == want.i
    return False


async def _assert_prev(ctx, ds, transformations):
    want = _strings(transformations)
    chain = [op for op, _ in _upstream(dso._ds(ds))]
    for i, text in enumerate(want):
        head = f"Failure checking transformations at offset {i}: "
        proto = _parse_transformation(text)
        if proto is None:
            raise _bad(f"{head}Couldn't parse transformation '{text}'.")
        if i >= len(chain):
            raise _bad(
                f"Asserted previous {len(want)} transformations but encountered only {len(chain)}."
            )
        op = chain[i]
        if not _matches_any_version(proto.name, op.type):
            raise _bad(
                f"{head}Asserted transformation matching '{proto.name}', but found '{op.type}'."
            )
        have = node_def(op).attr
        for key in sorted(proto.attr):
            shown = (
                f"{head}Asserted attribute '{key}' having a value of '{_shown(proto.attr[key])}'"
            )
            if key not in have:
                raise _bad(f"{shown}, but found no such attribute defined.")
            if not _attr_equal(op, key, proto.attr[key]):
                raise _bad(f"{shown}, but found value of '{_shown(have[key])}'.")
    return ds


def _shown(attr) -> str:
    """An AttrValue as TF's message shows it (its debug string, marked as TF marks it)."""
    from google.protobuf import text_format

    return "goo.gle/debugstr   \n" + text_format.MessageToString(attr)


for _name, _kernel in (
    ("AssertNextDataset", _assert_next),
    ("ExperimentalAssertNextDataset", _assert_next),
    ("AssertPrevDataset", _assert_prev),
):
    dso._register(_name, [_IN, "transformations: string"], None, _kernel)


# Ops whose elements are batches of their `batch_size` input.
_BATCHES = frozenset(
    {
        "BatchDataset",
        "BatchDatasetV2",
        "PaddedBatchDataset",
        "PaddedBatchDatasetV2",
        "MapAndBatchDataset",
        "ExperimentalMapAndBatchDataset",
    }
)
# Ops that keep their input's batches as they are.
_KEEP_BATCHES = frozenset(
    {
        "PrefetchDataset",
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "ShuffleAndRepeatDataset",
        "ShuffleAndRepeatDatasetV2",
        "RepeatDataset",
        "TakeDataset",
        "SkipDataset",
        "CacheDataset",
        "CacheDatasetV2",
        "FilterDataset",
        "ShardDataset",
        "ConcatenateDataset",
        "ZipDataset",
        "AssertNextDataset",
        "AssertPrevDataset",
        "ExperimentalAssertNextDataset",
        "MaxIntraOpParallelismDataset",
        "PrivateThreadPoolDataset",
        *_PASS_THROUGH,
    }
)


def _batch_size(value, depth: int = 0) -> int:
    """TF's ComputeBatchSize: the batch size every element has, or -1."""
    built = dso.built_by(value)
    if built is None or depth > 1000:
        return -1
    op, args = built
    if op.type in _BATCHES:
        names = [a.name for a in get_op_def(op.type).inputs]
        return int(np.asarray(args[names.index("batch_size")]))
    if op.type not in _KEEP_BATCHES:
        return -1
    sizes = {_batch_size(v, depth + 1) for v in _dataset_inputs(op, args)}
    return sizes.pop() if len(sizes) == 1 else -1


async def _compute_batch_size(ctx, ds):
    return np.array(_batch_size(dso._ds(ds)), np.int64)


register_op(
    "ComputeBatchSize",
    inputs=[_IN],
    outputs=["batch_size: int64"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
).kernel("CPU")(_compute_batch_size)
NotDifferentiable("ComputeBatchSize")


def _fields(data: bytes) -> list | None:
    """A message's fields as (number, wire type, value), or None if `data` is not one."""
    try:
        return proto_wire.fields(data)
    except ValueError:
        return None


def _merge(messages: list[bytes], depth: int = 0) -> bytes:
    """Serialized messages merged as protobuf's MergeFrom merges them (a later scalar
    wins, sub-messages merge), written in field order as protobuf serializes: TF's
    merged Options without TF's schema (a length-delimited field that parses as a
    message is taken for one)."""
    merged: dict[int, tuple] = {}
    for data in messages:
        for field, wire, value in _fields(data) or []:
            prev = merged.get(field)
            if (
                wire == 2
                and prev is not None
                and prev[0] == 2
                and depth < 32
                and _fields(prev[1]) is not None
                and _fields(value) is not None
            ):
                value = _merge([prev[1], value], depth + 1)
            merged[field] = (wire, value)
    out = bytearray()
    for field in sorted(merged):
        wire, value = merged[field]
        out += proto_wire.varint(field << 3 | wire)
        if wire == 0:
            out += proto_wire.varint(value)
        elif wire == 2:
            out += proto_wire.varint(len(value)) + value
        else:
            out += value
    return bytes(out)


async def _get_options(ctx, ds):
    # The OptionsDatasets' options merged, the upstream ones first, as TF merges them.
    parts = []
    value = dso._ds(ds)
    while value is not None and len(parts) < 10_000:
        if isinstance(value, dataset_raw.WithOptions):
            parts.append(value.serialized)
        built = dso.built_by(value)
        ins = _dataset_inputs(*built) if built is not None else []
        value = ins[0] if ins else None
    out = _merge(list(reversed(parts))) if parts else b""
    return np.array(out, dtype=object)


register_op(
    "GetOptions",
    inputs=[_IN],
    outputs=["serialized_options: string"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
).kernel("CPU")(_get_options)
NotDifferentiable("GetOptions")


async def _rewrite(ctx, ds, rewrite_name):
    # TF's rewrites (grappler's tf.data optimizations) keep the elements; none runs here.
    return ds


dso._register("RewriteDataset", [_IN, "rewrite_name: string"], None, _rewrite)


# (GlobalIterId, which TF 2.21 has no kernel for: ops/tpu_raw_ops.py registers it with the
# other such ops)


async def _window(ctx, *inputs):
    n = len(ctx.attrs["output_types"])
    if n == 0 or len(inputs) % n:
        raise _bad(f"WindowOp: {len(inputs)} inputs do not make elements of {n} components")
    elems = [tuple(inputs[i : i + n]) for i in range(0, len(inputs), n)]
    return dso._handle(dsm.Elements(elems))


dso._register("WindowOp", ["inputs: Tinputs"], {"Tinputs": dso._LIST}, _window)


# -- weighted flat map --------------------------------------------------------------------------


class WeightedFlatMap(pl.DatasetValue):
    """The inputs' first elements in turn, input i giving floor(n * w_i) of them, where
    w are the weights over their sum and n is TF 2.21's total: the smallest input's
    cardinality over the largest share (not each input's over its own share: inputs of
    4 and 6 elements weighted 1:3 give 1 and 4 elements, as TF's do)."""

    def __init__(self, inputs: list, weights: list[float]):
        for i, w in enumerate(weights):
            if not w > 0.0:
                raise _bad(f"`weights` must be greater than 0.0. Input {i} has a weight of {w:g}")
        cards = [v.cardinality() for v in inputs]
        for i, c in enumerate(cards):
            if c < 0:
                what = "UNKNOWN" if c == -2 else "INFINITE"
                raise _bad(
                    f"Cardinalities of the inputs must be known. Input {i} has {what} cardinality."
                )
        total = sum(weights)
        shares = [w / total for w in weights]
        n = min(cards) / max(shares)
        self.inputs = inputs
        self.counts = [int(np.floor(n * s + 1e-9)) for s in shares]

    def cardinality(self):
        return sum(self.counts)

    async def iterate(self, env):
        for value, count in zip(self.inputs, self.counts):
            if count <= 0:
                continue
            k = 0
            async for elem in _closing(value.iterate(env)):
                yield elem
                k += 1
                if k >= count:
                    break


async def _weighted_flat_map(ctx, *rest):
    n = ctx.attrs["N"]
    datasets, weights = rest[:n], rest[n:]
    return dso._handle(
        WeightedFlatMap([dso._ds(d) for d in datasets], [float(w) for w in weights])
    )


dso._register(
    "WeightedFlatMapDataset",
    ["input_datasets: N * string", "weights: M * float64"],
    {"N": 2, "M": 2, "metadata": ""},
    _weighted_flat_map,
)


# -- DistributedSave: a save through a tf.data service dispatcher ---------------------------------


async def _distributed_save(ctx, ds, directory, address):
    dso._ds(ds)
    where = dso._str(address)
    if not where:
        raise _bad("address must be nonempty")
    # TF hands the dataset to the dispatcher at `address` and retries until one answers;
    # asyncflow has no tf.data service, so no dispatcher can take it: an error at once.
    raise errors.UnavailableError(
        None,
        None,
        f"Failed to submit the snapshot of {dso._str(directory)!r} to the tf.data service "
        f"dispatcher at {where}: asyncflow runs no tf.data service",
    )


register_op(
    "DistributedSave",
    inputs=["dataset: string", "directory: string", "address: string"],
    attrs={"metadata": ""},
    shape_fn=lambda op: [],
    stateful=True,
).kernel("CPU")(_distributed_save)
NotDifferentiable("DistributedSave")


# -- iterator models, stats aggregators' summary writers ---------------------------------------


async def _model_proto(ctx, iterator):
    it = dso._unwrap(iterator, dso.IteratorResource, "iterator")
    if it.stream is None:
        raise errors.FailedPreconditionError(
            None,
            None,
            "GetModelProto() failed because the iterator has not been initialized. Ensure "
            "that you have run the initializer operation for this iterator before getting "
            "the next element.",
        )
    # TF's model is its autotuner's (timings of each stage); asyncflow tunes nothing.
    raise errors.UnimplementedError(
        None, None, "GetModelProto(): asyncflow's iterators keep no autotuning model"
    )


register_op(
    "IteratorGetModelProto",
    inputs=["iterator: string"],
    outputs=["model_proto: string"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
).kernel("CPU")(_model_proto)
NotDifferentiable("IteratorGetModelProto")


async def _set_summary_writer(ctx, aggregator, summary):
    v = aggregator
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if not isinstance(v, dataset_raw.StatsAggregator):
        raise _bad(
            "Trying to access a handle's resource using the wrong type: the handle does not "
            "point to a tensorflow::data::StatsAggregatorResource"
        )
    v.writer = summary_writer_ops._name_of(summary).writer(with_resource=False)


register_op(
    "StatsAggregatorSetSummaryWriter",
    inputs=["stats_aggregator: resource", "summary: resource"],
    shape_fn=lambda op: [],
    stateful=True,
).kernel("CPU")(_set_summary_writer)
NotDifferentiable("StatsAggregatorSetSummaryWriter")


# -- index flat map ------------------------------------------------------------------------------


def _tensor_text(a: np.ndarray) -> str:
    """TF's Tensor::DebugString of a small tensor."""
    values = " ".join(str(v) for v in np.ravel(a)[:3].tolist())
    if a.size > 3:
        values += "..."
    shape = ",".join(str(d) for d in a.shape)
    return f"Tensor<type: {dtypes.as_dtype(a.dtype).name} shape: [{shape}] values: {values}>"


class IndexFlatMap(pl.DatasetValue):
    """The rows of `map_fn(element)` for the input's elements in turn, as
    `index_map_fn(i)` places output i: (which element, its row).  A new element index
    takes the input's next element; a row outside that element's rows is TF's error."""

    def __init__(self, input_value, map_fn, index_map_fn):
        self.input, self.map_fn, self.index_map_fn = input_value, map_fn, index_map_fn

    async def iterate(self, env):
        source = self.input.iterate(env)
        try:
            current, rows = None, None
            i = 0
            while True:
                index, offset = (
                    int(np.asarray(v)) for v in await self.index_map_fn(env, (np.int64(i),))
                )
                if rows is None or index != current:
                    try:
                        elem = await source.__anext__()
                    except StopAsyncIteration:
                        return
                    rows = [np.asarray(c) for c in await self.map_fn(env, elem)]
                    current = index
                n = rows[0].shape[0] if rows and rows[0].ndim else 0
                if not 0 <= offset < n:
                    raise _bad(
                        f"`index_flat_map` got invalid `index_map_func` which returns offset "
                        f"{offset}, but the input element has {n} elements: "
                        f"{_tensor_text(rows[0])}"
                    )
                yield tuple(np.array(c[offset]) for c in rows)
                i += 1
        finally:
            await source.aclose()


async def _index_flat_map(ctx, ds, *rest):
    n = len(ctx.attrs["Tmap_func_args"])
    map_args, index_args = rest[:n], rest[n:-1]
    return dso._handle(
        IndexFlatMap(
            dso._ds(ds),
            dsm._fn(ctx, "map", map_args),
            dsm._fn(ctx, "index_map", index_args),
        )
    )


dso._register(
    "IndexFlatMapDataset",
    [
        _IN,
        "map_func_other_args: Tmap_func_args",
        "index_map_func_other_args: Tindex_map_func_args",
        "output_cardinality: int64",
    ],
    {
        **dsm._fn_attrs("map"),
        **dsm._fn_attrs("index_map"),
        "Tmap_func_args": dso._LIST,
        "Tindex_map_func_args": dso._LIST,
        "metadata": "",
    },
    _index_flat_map,
)
