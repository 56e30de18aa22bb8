"""A tf.data pipeline as TF's GraphDef and back: `DatasetToGraph`, `DatasetToGraphV2`,
`DatasetFromGraph` and `DatasetFingerprint`, as TF 2.21 writes and reads them.

TF's form (recorded from TF 2.21, tests/test_data_raw_ops_s28.py): the dataset ops that
made the value, sources first, each named `<op type>/_<k>`; each input that is not a
dataset is a `Const/_<k>` holding the value the op was given (a fed value as fed), `k`
counting nodes in the order written (each op after its inputs, in input order); the
functions the ops name in the GraphDef's library; a `_Retval` node `dataset` taking the
last op.  asyncflow's GraphDef export writes the ops and functions in TF's form
(asyncflow/dataset_functions.py), and the values come from the ops' runs
(`dataset_ops.built_by`), so TF's DatasetFromGraph reads what this writes.

`DatasetFromGraph` imports such a GraphDef (TF's or asyncflow's) into a graph of its
own and runs the `_Retval`'s input there, in a session of that graph which then runs
the pipeline's functions: its elements are those of the pipeline the GraphDef holds.
"""

from __future__ import annotations

import hashlib

import numpy as np
from google.protobuf import text_format

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph_io import (
    graph_to_graph_def,
    import_graph_def,
    register_graph_def_exporter,
    tensor_proto,
)
from asyncflow.ops import dataset_more as dsm
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.proto_wire import length_delimited
from asyncflow.protos.graph_pb2 import GraphDef
from asyncflow.registry import NotDifferentiable, register_op

__all__ = ["dataset_graph_def"]

_VARIANT = 21

# The dataset ops whose TF 2.21 OpDef has a `metadata` attr (default ""), which TF's
# DatasetToGraph writes with the dataset's name (tests/fixtures/tf_op_attr_defaults.json,
# checked by tests/data/test_dataset_export.py).
TF_METADATA_OPS = frozenset(
    {
        "BatchDataset",
        "BatchDatasetV2",
        "CacheDataset",
        "CacheDatasetV2",
        "ConcatenateDataset",
        "DatasetToSingleElement",
        "FilterDataset",
        "FixedLengthRecordDataset",
        "FixedLengthRecordDatasetV2",
        "FlatMapDataset",
        "GeneratorDataset",
        "GlobalShuffleDataset",
        "GroupByWindowDataset",
        "IndexFlatMapDataset",
        "InterleaveDataset",
        "LegacyParallelInterleaveDatasetV2",
        "ListDataset",
        "MapAndBatchDataset",
        "MapDataset",
        "OptionsDataset",
        "PaddedBatchDataset",
        "PaddedBatchDatasetV2",
        "ParallelBatchDataset",
        "ParallelFilterDataset",
        "ParallelInterleaveDataset",
        "ParallelInterleaveDatasetV2",
        "ParallelInterleaveDatasetV3",
        "ParallelInterleaveDatasetV4",
        "ParallelMapDataset",
        "ParallelMapDatasetV2",
        "PrefetchDataset",
        "RandomDataset",
        "RandomDatasetV2",
        "RangeDataset",
        "ReduceDataset",
        "RegisterDataset",
        "RegisterDatasetV2",
        "RepeatDataset",
        "ScanDataset",
        "ShardDataset",
        "ShuffleAndRepeatDataset",
        "ShuffleAndRepeatDatasetV2",
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "SkipDataset",
        "SnapshotDatasetV2",
        "TFRecordDataset",
        "TFRecordDatasetV2",
        "TakeDataset",
        "TakeWhileDataset",
        "TensorDataset",
        "TensorSliceDataset",
        "TextLineDataset",
        "UnbatchDataset",
        "UniqueDataset",
        "WeightedFlatMapDataset",
        "WindowDataset",
        "ZipDataset",
    }
)
_MAX_NODES = 100_000

# The other attrs with a default in TF 2.21's OpDefs of the dataset ops (text format),
# which TF's DatasetToGraph writes on each node (tests/fixtures/tf_op_attr_defaults.json,
# checked by tests/data/test_dataset_export.py).
TF_DATASET_DEFAULTS = {
    "AutoShardDataset": {"auto_shard_policy": "i: 0", "num_replicas": "i: 0"},
    "BatchDatasetV2": {"parallel_copy": "b: false"},
    "DataServiceDataset": {
        "cross_trainer_cache_options": 's: ""',
        "data_transfer_protocol": 's: ""',
        "target_workers": 's: "AUTO"',
        "task_refresh_interval_hint_ms": "i: -1",
    },
    "DataServiceDatasetV2": {
        "cross_trainer_cache_options": 's: ""',
        "data_transfer_protocol": 's: ""',
        "target_workers": 's: "AUTO"',
        "task_refresh_interval_hint_ms": "i: -1",
    },
    "DataServiceDatasetV3": {
        "cross_trainer_cache_options": 's: ""',
        "data_transfer_protocol": 's: ""',
        "target_workers": 's: "AUTO"',
        "task_refresh_interval_hint_ms": "i: -1",
        "uncompress": "b: false",
    },
    "DataServiceDatasetV4": {
        "cross_trainer_cache_options": 's: ""',
        "data_transfer_protocol": 's: ""',
        "target_workers": 's: "AUTO"',
        "task_refresh_interval_hint_ms": "i: -1",
        "uncompress": "b: false",
    },
    "DatasetCardinality": {"cardinality_options": 's: ""'},
    "DatasetToGraph": {
        "allow_stateful": "b: false",
        "stateful_whitelist": "list { }",
        "strip_device_assignment": "b: false",
    },
    "DatasetToGraphV2": {"external_state_policy": "i: 0", "strip_device_assignment": "b: false"},
    "DirectedInterleaveDataset": {"stop_on_empty_dataset": "b: false"},
    "ExperimentalAutoShardDataset": {"auto_shard_policy": "i: 0"},
    "ExperimentalIgnoreErrorsDataset": {"log_warning": "b: false"},
    "ExperimentalMapAndBatchDataset": {"preserve_cardinality": "b: false"},
    "ExperimentalMapDataset": {
        "force_synchronous": "b: false",
        "preserve_cardinality": "b: false",
        "use_inter_op_parallelism": "b: true",
    },
    "ExperimentalParseExampleDataset": {"sloppy": "b: false"},
    "ExperimentalRebatchDataset": {"use_fallback": "b: true"},
    "ExperimentalScanDataset": {"preserve_cardinality": "b: false"},
    "FinalizeDataset": {"has_captured_ref": "b: false"},
    "GlobalShuffleDataset": {"reshuffle_each_iteration": "b: true"},
    "IgnoreErrorsDataset": {"log_warning": "b: false"},
    "LegacyParallelInterleaveDatasetV2": {"deterministic": 's: "default"'},
    "LoadDataset": {"compression": 's: ""'},
    "MapAndBatchDataset": {"preserve_cardinality": "b: false"},
    "MapDataset": {
        "force_synchronous": "b: false",
        "preserve_cardinality": "b: false",
        "use_inter_op_parallelism": "b: true",
    },
    "ModelDataset": {"algorithm": "i: 0", "cpu_budget": "i: 0", "ram_budget": "i: 0"},
    "OptimizeDataset": {"optimization_configs": "list { }"},
    "OptimizeDatasetV2": {"optimization_configs": "list { }"},
    "PaddedBatchDatasetV2": {"parallel_copy": "b: false"},
    "ParallelBatchDataset": {"deterministic": 's: "default"', "parallel_copy": "b: false"},
    "ParallelFilterDataset": {"deterministic": 's: "default"'},
    "ParallelInterleaveDatasetV2": {"sloppy": "b: false"},
    "ParallelInterleaveDatasetV3": {"deterministic": 's: "default"'},
    "ParallelInterleaveDatasetV4": {"deterministic": 's: "default"'},
    "ParallelMapDataset": {
        "preserve_cardinality": "b: false",
        "sloppy": "b: false",
        "use_inter_op_parallelism": "b: true",
    },
    "ParallelMapDatasetV2": {
        "deterministic": 's: "default"',
        "preserve_cardinality": "b: false",
        "use_inter_op_parallelism": "b: true",
        "use_unbounded_threadpool": "b: false",
    },
    "ParseExampleDataset": {
        "ragged_keys": "list { }",
        "ragged_split_types": "list { }",
        "ragged_value_types": "list { }",
        "sloppy": "b: false",
    },
    "ParseExampleDatasetV2": {
        "deterministic": 's: "default"',
        "ragged_keys": "list { }",
        "ragged_split_types": "list { }",
        "ragged_value_types": "list { }",
    },
    "PrefetchDataset": {
        "buffer_size_min": "i: 0",
        "legacy_autotune": "b: true",
        "slack_period": "i: 0",
    },
    "RandomDatasetV2": {"rerandomize_each_iteration": "b: false"},
    "RangeDataset": {"replicate_on_split": "b: false"},
    "RebatchDataset": {"use_fallback": "b: true"},
    "ReduceDataset": {"use_inter_op_parallelism": "b: true"},
    "RegisterDataset": {"element_spec": 's: ""'},
    "RegisterDatasetV2": {"element_spec": 's: ""', "requested_dataset_id": 's: ""'},
    "SaveDataset": {"compression": 's: ""', "use_shard_func": "b: true"},
    "SaveDatasetV2": {"compression": 's: ""', "use_shard_func": "b: true"},
    "ScanDataset": {"preserve_cardinality": "b: false", "use_default_device": "b: true"},
    "ShardDataset": {"require_non_empty": "b: false"},
    "ShuffleAndRepeatDataset": {"reshuffle_each_iteration": "b: true"},
    "ShuffleAndRepeatDatasetV2": {"reshuffle_each_iteration": "b: true"},
    "ShuffleDataset": {"reshuffle_each_iteration": "b: true"},
    "ShuffleDatasetV3": {"reshuffle_each_iteration": "b: true"},
    "SlidingWindowDataset": {"drop_remainder": "b: true"},
    "SnapshotChunkDataset": {"compression": 's: ""'},
    "SnapshotDataset": {
        "compression": 's: ""',
        "mode": 's: "auto"',
        "num_reader_threads": "i: 1",
        "num_writer_threads": "i: 1",
        "pending_snapshot_expiry_seconds": "i: 86400",
        "reader_buffer_size": "i: 1",
        "reader_path_prefix": 's: ""',
        "seed": "i: 0",
        "seed2": "i: 0",
        "shard_size_bytes": "i: 10737418240",
        "shuffle_on_read": "b: false",
        "snapshot_name": 's: ""',
        "writer_buffer_size": "i: 1",
        "writer_path_prefix": 's: ""',
    },
    "SnapshotDatasetReader": {"compression": 's: ""'},
    "SnapshotDatasetV2": {
        "compression": 's: ""',
        "hash": "i: 0",
        "hash_valid": "b: false",
        "reader_prefix": 's: ""',
        "writer_prefix": 's: ""',
    },
    "TensorSliceDataset": {"is_files": "b: false", "replicate_on_split": "b: false"},
}
# Attrs of other ops that TF 2.21's OpDefs give a default and this registry does not
# know (tests/fixtures/tf_op_attr_defaults.json)
_TF_OTHER_DEFAULTS = {
    "Equal": {"incompatible_shape_error": "b: true"},
    "NotEqual": {"incompatible_shape_error": "b: true"},
}


def _with_tf_defaults(nd) -> None:
    """TF's default attrs absent from NodeDef `nd`, written in (TF writes every attr
    of a node its Python layer makes, at its default where not given)."""
    if nd.op in TF_METADATA_OPS and "metadata" not in nd.attr:
        nd.attr["metadata"].s = b""
    for key, text in {
        **TF_DATASET_DEFAULTS.get(nd.op, {}),
        **_TF_OTHER_DEFAULTS.get(nd.op, {}),
    }.items():
        if key not in nd.attr:
            text_format.Parse(text, nd.attr[key])


def _function_defaults(graph, gd) -> None:
    """The nodes of the GraphDef's functions (a dataset's map, filter, flat_map...
    functions, a one-shot iterator's factory) with TF's default attrs, as TF writes
    them."""
    for f in gd.library.function:
        for nd in f.node_def:
            _with_tf_defaults(nd)


register_graph_def_exporter(_function_defaults)


def _dataset_of(arg):
    if isinstance(arg, np.ndarray) and arg.shape == () and arg.dtype == object:
        v = arg[()]
        if isinstance(v, pl.DatasetValue):
            return v
    return None


def _graph_def(ctx) -> GraphDef:
    """The op's graph in TF's form, once per size of the graph."""
    g = ctx.op.graph
    n = len(g.get_operations())
    st = ctx.kernel_state
    if st.get("ops") != n:
        st["gd"], st["ops"] = graph_to_graph_def(g), n
    return st["gd"]


def _functions_used(nodes, library) -> list:
    """The library's functions `nodes` name, and the ones those name, in library order."""
    by_name = {f.signature.name: f for f in library.function}
    want: set[str] = set()

    def scan(node_defs):
        for nd in node_defs:
            for a in nd.attr.values():
                names = [a.func.name] if a.HasField("func") else []
                if a.HasField("list"):
                    names += [f.name for f in a.list.func]
                for name in names:
                    if name in by_name and name not in want:
                        want.add(name)
                        scan(by_name[name].node_def)

    scan(nodes)
    return [f for f in library.function if f.signature.name in want]


def dataset_graph_def(ctx, value: pl.DatasetValue, strip_devices: bool) -> GraphDef:
    """`value`'s pipeline as TF's DatasetToGraph writes it: its dataset ops with no
    device whatever `strip_devices` (TF writes them anew) and, where TF's OpDef has
    one, a metadata attr naming each ("<op>:<id>" for one made without a name), and
    their attrs at TF's defaults written out."""
    full = _graph_def(ctx)
    by_name = {nd.name: nd for nd in full.node}
    out = GraphDef()
    written: dict[int, str] = {}

    def write(v) -> str:
        if id(v) in written:
            return written[id(v)]
        built = dso.built_by(v)
        if built is None or built[0].name not in by_name:
            raise errors.UnimplementedError(
                None, None, f"Cannot serialize dataset {type(v).__name__}: no op made it"
            )
        op, args = built
        written[id(v)] = write_op(op, dict(zip(op.inputs, args)), v, True)
        return written[id(v)]

    def write_op(op, values: dict, v, top: bool) -> str:
        """`op`'s node, its inputs' `values` (tensor -> what the kernel took) written
        before it: a dataset's node, another's value a constant.  A map Dataset.map
        fused with the earlier one is written apart from it, as the full GraphDef has
        it (asyncflow/dataset_functions.py's `_export_apart`): the earlier map's node
        from the same values (its input and captures are the fused op's); `top`: `op`
        made `v`."""
        nd_full = by_name[op.name]
        apart = getattr(op, "_fused_after", None)
        inputs = []
        for t in _node_inputs(op, nd_full, apart):
            if apart is not None and t is apart[0].outputs[0]:  # (the earlier map's)
                inputs.append(write_op(t.op, values, v, False))
                continue
            if t not in values:
                raise errors.UnimplementedError(
                    None, None, f"Cannot serialize dataset {type(v).__name__}: no value "
                    f"for {t.name}"
                )  # fmt: skip
            inner = _dataset_of(values[t])
            if inner is not None:
                inputs.append(write(inner))
                continue
            c = out.node.add(name=f"Const/_{len(out.node)}", op="Const")
            arr = np.asarray(values[t])
            c.attr["dtype"].type = t.dtype.base_dtype.as_datatype_enum
            tensor_proto(arr, c.attr["value"].tensor)
            c.attr["value"].tensor.dtype = t.dtype.base_dtype.as_datatype_enum
            inputs.append(c.name)
        if len(out.node) > _MAX_NODES:
            raise errors.ResourceExhaustedError(None, None, "The dataset's graph is too big")
        nd = out.node.add()
        nd.CopyFrom(nd_full)
        nd.name = f"{op.type}/_{len(out.node) - 1}"
        del nd.input[:]
        nd.input.extend(inputs)
        if "_class" in nd.attr:  # (TF writes no colocation here: the names it gives are gone)
            del nd.attr["_class"]
        nd.device = ""  # (TF writes its dataset ops anew, with no device)
        if nd.op in TF_METADATA_OPS and not nd.attr["metadata"].s:
            # (TF: the name its kernel gave a dataset without one, "<op>:<id>")
            name = dso.dataset_name(v, op) if top else f"{op.type}:0"  # (v: the fused map's)
            nd.attr["metadata"].s = length_delimited(1, name.encode())
        for key, text in TF_DATASET_DEFAULTS.get(nd.op, {}).items():
            if key not in nd.attr:  # (TF writes every attr of its dataset ops)
                text_format.Parse(text, nd.attr[key])
        return nd.name

    last = write(value)
    ret = out.node.add(name="dataset", op="_Retval", input=[last])
    ret.attr["index"].i = 0
    ret.attr["T"].type = _VARIANT
    out.library.function.extend(_functions_used(out.node, full.library))
    out.versions.CopyFrom(full.versions)
    return out


def _node_inputs(op, nd, apart) -> list:
    """The tensors `op`'s NodeDef `nd` reads: `op`'s inputs, or where `nd` reads the
    earlier map's dataset (`apart`: `op._fused_after`), that dataset and the inputs
    named after it."""
    if apart is None or not nd.input or nd.input[0] != apart[0].name:
        return list(op.inputs)
    by_name = {t.name: t for t in op.inputs}
    by_name[f"{apart[0].name}:0"] = apart[0].outputs[0]
    data = [n if ":" in n else f"{n}:0" for n in nd.input if not n.startswith("^")]
    return [by_name[n] for n in data]


async def _to_graph(ctx, ds):
    strip = bool(ctx.attrs.get("strip_device_assignment", False))
    gd = dataset_graph_def(ctx, dso._ds(ds), strip)
    return np.array(gd.SerializeToString(), dtype=object)


def _scalar(op):
    return [tensor_shape.TensorShape([])]


_TO_GRAPH = {
    "DatasetToGraph": {"stateful_whitelist": [], "allow_stateful": False},
    "DatasetToGraphV2": {"external_state_policy": 0},
}
for _name, _attrs in _TO_GRAPH.items():
    register_op(
        _name,
        inputs=["input_dataset: string"],
        outputs=["graph: string"],
        attrs={**_attrs, "strip_device_assignment": False},
        shape_fn=_scalar,
        stateful=True,  # (the value's ops and inputs, not the handle's bytes, decide)
    ).kernel("CPU")(_to_graph)
    NotDifferentiable(_name)


# -- fingerprint -------------------------------------------------------------------------------


async def _fingerprint(ctx, ds):
    # A hash of the pipeline's GraphDef without node names: equal pipelines with equal
    # inputs have equal fingerprints (TF hashes its graph likewise; its numbers differ).
    gd = dataset_graph_def(ctx, dso._ds(ds), True)
    for nd in gd.node:
        nd.attr.pop("metadata", None)
    digest = hashlib.sha256(gd.SerializeToString(deterministic=True)).digest()
    return np.array(int.from_bytes(digest[:8], "little"), np.uint64)


register_op(
    "DatasetFingerprint",
    inputs=["input_dataset: string"],
    outputs=["fingerprint: uint64"],
    shape_fn=_scalar,
    stateful=True,
).kernel("CPU")(_fingerprint)
NotDifferentiable("DatasetFingerprint")


# -- from a GraphDef ---------------------------------------------------------------------------


class FromGraph(pl.DatasetValue):
    """The elements of a pipeline imported into a graph of its own, run by its session."""

    def __init__(self, value: pl.DatasetValue, session):
        self.value, self.session = value, session

    def cardinality(self):
        return self.value.cardinality()

    async def iterate(self, env):
        async for elem in _closing(self.value.iterate(pl.Env(self.session))):
            yield elem

    def __del__(self):
        try:
            self.session.close()
        except Exception:  # noqa: BLE001 - (at interpreter exit the session may be gone)
            pass


_closing = dsm._closing


async def _from_graph(ctx, graph_def):
    data = graph_def[()] if isinstance(graph_def, np.ndarray) else graph_def
    gd = GraphDef()
    try:
        gd.ParseFromString(data if isinstance(data, bytes) else str(data).encode())
    except Exception:  # noqa: BLE001 - protobuf's DecodeError
        raise errors.InvalidArgumentError(None, None, "Could not parse GraphDef") from None
    rets = [nd for nd in gd.node if nd.op == "_Retval"]
    if len(rets) != 1 or len(rets[0].input) != 1:
        raise errors.InvalidArgumentError(
            None, None, "Failed to find output node of the dataset graph (a _Retval node)"
        )
    output = rets[0].input[0]
    keep = [nd for nd in gd.node if nd.op != "_Retval"]
    del gd.node[:]
    gd.node.extend(keep)
    g = ops.Graph()
    try:
        with g.as_default():
            (t,) = import_graph_def(gd, return_elements=[output], name="")
    except (ValueError, errors.OpError) as e:
        raise errors.InvalidArgumentError(None, None, f"Invalid dataset graph: {e}") from None
    if isinstance(t, ops.Operation):
        t = t.outputs[0]
    session = type(ctx.session)(graph=g)
    try:
        handle = await session.arun(t)
    except BaseException:
        session.close()
        raise
    return dso._handle(FromGraph(dso._ds(handle), session))


register_op(
    "DatasetFromGraph",
    inputs=["graph_def: string"],
    outputs=["handle: string"],
    shape_fn=dso._handle_shape,
    stateful=True,
).kernel("CPU")(dso._recording(_from_graph))
NotDifferentiable("DatasetFromGraph")
