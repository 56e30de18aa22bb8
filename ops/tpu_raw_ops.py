"""The TPU/XLA raw ops TF 2.21 registers beyond those of ops/tpu_ops.py: infeed and
outfeed, the TPU embedding ops (Load/Retrieve*Parameters, the Enqueue* batches,
Send/Recv), the SparseCore ops (XlaSparseCore*, XlaSparseDenseMatmul*, the COO/CSR
conversions and minibatching), the partitioning ops (TPUPartitionedInput/Output,
XlaSplitND/XlaConcatND and their variable forms), the collectives AllToAll and
CollectivePermute, and GlobalIterId, WorkerHeartbeat and FileSystemSetConfiguration.

Their OpDefs are TF's, recorded (ops/tpu_raw_ops_table.py); their shape functions give
TF's static shapes.  TF's CPU build registers a kernel for FileSystemSetConfiguration
only: every other op here builds into a graph and fails, when a session runs it, with
TF's "No OpKernel was registered" InvalidArgumentError (tpu_ops.kernel_nowhere).  TF
registers gradients for AllToAll, CollectivePermute and TPUEmbeddingActivations (below)
and none for the rest.
"""

from __future__ import annotations

from asyncflow import dtypes, errors
from asyncflow.graph import apply_op, get_default_graph
from asyncflow.ops.array_ops import zeros
from asyncflow.ops.tpu_ops import kernel_nowhere
from asyncflow.ops.tpu_raw_ops_table import OPDEFS, SHAPE_ATTRS
from asyncflow.registry import get_op_def, register_op
from asyncflow.tensor_shape import TensorShape

__all__: list[str] = []

_SCALAR = TensorShape([])
_VECTOR = TensorShape([None])
_UNKNOWN = TensorShape(None)


def _by_name(op) -> dict:
    """{input name: its tensor, or its list of tensors for a list input}."""
    op_def = get_op_def(op.type)
    out, pos = {}, 0
    for arg in op_def.inputs:
        if arg.number_attr:
            n, is_list = op._attr(arg.number_attr), True
        elif arg.type_attr and op_def.attrs[arg.type_attr].is_list:
            n, is_list = len(op._attr(arg.type_attr)), True
        else:
            n, is_list = 1, False
        part = list(op.inputs[pos : pos + n])
        out[arg.name] = part if is_list else part[0]
        pos += n
    return out


def _dims(shape) -> list | None:
    return None if shape.rank is None else shape.as_list()


def _text(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _merge(shapes, rank=None) -> TensorShape:
    """The shapes merged (TF's Merge, with TF's messages), each of rank `rank` if given.

    Raises:
      ValueError: a rank other than `rank`, or two known sizes that differ.
    """
    merged = None
    for shape in shapes:
        dims = _dims(shape)
        if dims is None:
            continue
        if rank is not None and len(dims) != rank:
            raise ValueError(f"Shape must be rank {rank} but is rank {len(dims)}")
        if merged is None:
            merged = dims
            continue
        if len(dims) != len(merged):
            raise ValueError(f"Shapes must be equal rank, but are {len(merged)} and {len(dims)}")
        for d, (a, b) in enumerate(zip(merged, dims)):
            if a is not None and b is not None and a != b:
                raise ValueError(
                    f"Dimension {d} in both shapes must be equal, but are {a} and {b}. "
                    f"Shapes are {_text(merged)} and {_text(dims)}."
                )
        merged = [b if a is None else a for a, b in zip(merged, dims)]
    if merged is None:
        return TensorShape(None) if rank is None else TensorShape([None] * rank)
    return TensorShape(merged)


def _fixed(*shapes):
    return lambda op: list(shapes)


def _vectors(op):
    return [_VECTOR] * len(op.outputs)


# -- the embedding tables' state: Load/Retrieve*Parameters -------------------------------


def _check_table(op) -> None:
    if (op._attr("table_id") != -1) == (op._attr("table_name") != ""):
        raise ValueError("exactly one of table_id or table_name must be non-default")


def _load_shape(op):
    _check_table(op)
    _merge([t.shape for t in op.inputs], rank=2)
    return []


def _retrieve_shape(op):
    _check_table(op)
    return [TensorShape([None, None])] * len(op.outputs)


# -- the SparseCore ops -----------------------------------------------------------------


def _updated_inputs(op):
    """Each output `updated_<x>` takes the shape of input `<x>` (the optimizers' new
    tables and slots)."""
    given = _by_name(op)
    out = []
    for arg in get_op_def(op.type).outputs:
        value = given[arg.name.removeprefix("updated_")]
        out.extend(t.shape for t in value) if isinstance(value, list) else out.append(value.shape)
    return out


def _activations(op) -> TensorShape:
    """[input_size, the embedding table's width]: the activations of a lookup."""
    table = _dims(_by_name(op)["embedding_table"].shape)
    return TensorShape([op._attr("input_size"), None if table is None else table[1]])


def _csr_shapes(op, num_sc: int, ids: int):
    """The CSR minibatches' shapes: row pointers for each SparseCore's minibatches of
    every physical replica (their count padded to a multiple of 8), `ids` ids."""
    physical = num_sc * op._attr("num_replica")
    rows = num_sc * op._attr("max_minibatches_per_sc") * (-(-physical // 8) * 8)
    ids_shape = TensorShape([ids])
    return [TensorShape([rows]), ids_shape, ids_shape, ids_shape, _SCALAR, _SCALAR, _SCALAR]


def _minibatches_in_csr_shape(op):
    ids = op._attr("sample_count") * op._attr("max_ids_per_chip_per_sample")
    return _csr_shapes(op, op._attr("num_sc_per_chip"), ids)


def _csr_wrapped_coo_shape(op):
    num_sc = op._attr("num_sc_per_chip")
    ids = op._attr("sample_count_per_sc") * num_sc * op._attr("max_ids_per_chip_per_sample")
    return _csr_shapes(op, num_sc, ids)


# -- infeed, outfeed and the partitioning ops -------------------------------------------


def _shape_attr(op):
    return [op._attr("shape")]


def _shapes_attr(op):
    return list(op._attr("shapes"))


def _all_to_all_shape(op):
    dims = _dims(op.inputs[0].shape)
    if dims is None:
        return [_UNKNOWN]
    count = op._attr("split_count")
    concat, split = op._attr("concat_dimension"), op._attr("split_dimension")
    for name, axis in (("concat_dimension", concat), ("split_dimension", split)):
        if not 0 <= axis < len(dims):
            raise ValueError(f"{name} {axis} is out of range of input rank {len(dims)}")
    if None in dims:  # (TF's: an unknown size leaves the whole shape unknown)
        return [_UNKNOWN]
    if dims[split] % count:
        raise ValueError(f"input dimension {dims[split]} not divisible by split_count {count}")
    dims[concat] *= count
    dims[split] //= count
    return [TensorShape(dims)]


def _check_axis(axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        raise ValueError(f"Cannot partition dim {axis} of rank {rank} tensor.")


def _split(size, n: int):
    if size is None:
        return None
    if size % n:
        raise ValueError(
            f"Dimension size must be evenly divisible by {n} but is {size}\n\tNumber of "
            "ways to split should evenly divide the split dimension"
        )
    return size // n


def _partitioned_input_shape(op):
    try:
        merged = _merge(t.shape for t in op.inputs)
    except ValueError as e:
        raise ValueError(f"{e}\n\tFrom merging shape 0 with other shapes.") from None
    axis = op._attr("partition_dim")
    if merged.rank is None or axis == -1:
        return [merged]
    dims = merged.as_list()
    _check_axis(axis, len(dims))
    dims[axis] = None if dims[axis] is None else dims[axis] * len(op.inputs)
    return [TensorShape(dims)]


def _partitioned_input_v2_shape(op):
    # (TF's takes the first partition's shape as every partition's.)
    first = op.inputs[0].shape
    parts = list(op._attr("partition_dims"))
    if first.rank is None or not parts:
        return [first]
    return [TensorShape([None if d is None else d * p for d, p in zip(first.as_list(), parts)])]


def _partitioned_output_shape(op):
    dims = _dims(op.inputs[0].shape)
    n = op._attr("num_splits")
    if dims is not None:
        axis = op._attr("partition_dim")
        _check_axis(axis, len(dims))
        dims[axis] = _split(dims[axis], n)
    return [TensorShape(dims)] * n


def _partitioned_output_v2_shape(op):
    dims = _dims(op.inputs[0].shape)
    parts = list(op._attr("partition_dims"))
    if dims is not None and parts:
        dims = [_split(d, p) for d, p in zip(dims, parts)]
    return [TensorShape(dims)] * op._attr("num_splits")


def _recv_activations_shape(op):
    # TF's shapes come from the TPUEmbeddingConfiguration in `config`; with none, there
    # are no output shapes to give.
    if not op._attr("config"):
        raise ValueError("num outputs != size of output shapes")
    return [TensorShape([None, None])] * len(op.outputs)


_SHAPE_FNS = {
    "AllToAll": _all_to_all_shape,
    "CollectivePermute": lambda op: [op.inputs[0].shape],
    "ConvertToCooTensor": _vectors,
    "ConvertToListOfSparseCoreCooTensors": _vectors,
    "ConvertToSparseCoreCsrWrappedCooTensor": _csr_wrapped_coo_shape,
    "GetMinibatchSplitsWithPhysicalReplica": _fixed(
        _VECTOR, _VECTOR, _VECTOR, _SCALAR, _VECTOR, _SCALAR, _SCALAR
    ),
    "GetMinibatchesInCsrWithPhysicalReplica": _minibatches_in_csr_shape,
    "GetStatsFromListOfSparseCoreCooTensors": _fixed(_SCALAR, _SCALAR),
    "GlobalIterId": _fixed(_SCALAR),
    "InfeedDequeue": _shape_attr,
    "InfeedDequeueTuple": _shapes_attr,
    "IsTPUEmbeddingInitialized": _fixed(_SCALAR),
    "OutfeedDequeue": _shape_attr,
    "OutfeedDequeueTuple": _shapes_attr,
    "OutfeedDequeueTupleV2": _shapes_attr,
    "OutfeedDequeueV2": _shape_attr,
    "Prelinearize": _fixed(_SCALAR),
    "PrelinearizeTuple": _fixed(_SCALAR),
    "RecvTPUEmbeddingActivations": _recv_activations_shape,
    "SortListOfSparseCoreCooTensors": _vectors,
    "TPUAnnotateTensorsWithDynamicShape": lambda op: [t.shape for t in op.inputs],
    "TPUCopyWithDynamicShape": lambda op: [t.shape for t in _by_name(op)["tensors"]],
    "TPUDummyInput": _shape_attr,
    "TPUEmbeddingActivations": lambda op: [_by_name(op)["sliced_activations"].shape],
    "TPUOrdinalSelector": _fixed(_VECTOR),
    "TPUPartitionedInput": _partitioned_input_shape,
    "TPUPartitionedInputV2": _partitioned_input_v2_shape,
    "TPUPartitionedOutput": _partitioned_output_shape,
    "TPUPartitionedOutputV2": _partitioned_output_v2_shape,
    "WorkerHeartbeat": _fixed(_SCALAR),
    "XlaSparseDenseMatmul": lambda op: [_activations(op)] + [_VECTOR] * 4,
    "XlaSparseDenseMatmulWithCsrInput": lambda op: [_activations(op)],
    "XlaSparseDenseMatmulWithStaticBufferSize": lambda op: [_activations(op)],
}
for _name in OPDEFS:
    if _name.startswith("LoadTPUEmbedding"):
        _SHAPE_FNS[_name] = _load_shape
    elif _name.startswith("RetrieveTPUEmbedding"):
        _SHAPE_FNS[_name] = _retrieve_shape
    elif _name.startswith(("XlaSparseCore", "XlaSparseDenseMatmulGrad")):
        _SHAPE_FNS[_name] = _updated_inputs


def _shape_fn(op_type: str):
    """`op_type`'s shape function; ops without one of their own give unknown shapes (TF's
    UnknownShape: XlaSplitND, XlaConcatND, the ops that run a TPU computation)."""
    fn = _SHAPE_FNS.get(op_type, lambda op: [_UNKNOWN] * len(op.outputs))
    shape_attrs = SHAPE_ATTRS.get(op_type, ())
    if not shape_attrs:
        return fn

    def shape_fn(op):
        # Shape attrs given as lists of sizes are TensorShapes in the graph (TF's
        # builder makes a TensorShapeProto of them).
        for name in shape_attrs:
            value = op._attr(name)
            if isinstance(value, list | tuple) and not all(
                isinstance(v, int) or v is None for v in value
            ):
                op._attrs[name] = [TensorShape(s) for s in value]
            elif not isinstance(value, TensorShape | list | tuple) or name == "shape":
                op._attrs[name] = TensorShape(value)
        return fn(op)

    return shape_fn


def _register(name: str, spec) -> None:
    inputs, outputs, attrs, stateful = spec
    op_def = register_op(
        name, inputs, outputs, dict(attrs), shape_fn=_shape_fn(name), stateful=stateful
    )
    if name != "FileSystemSetConfiguration":
        kernel_nowhere(op_def)


for _name, _spec in OPDEFS.items():
    _register(_name, _spec)


# -- the one kernel TF's CPU build has --------------------------------------------------

# The file systems registered here (asyncflow.gfile's schemes): TF's local file system
# implements no options, so setting one is UnimplementedError there as here.
_SCHEMES = ("", "file")


@get_op_def("FileSystemSetConfiguration").kernel("CPU")
async def _file_system_set_configuration(ctx, scheme, key, value):
    name = scheme.item().decode("utf-8", "replace")
    if name not in _SCHEMES:
        raise errors.UnimplementedError(
            None, ctx.op, f"File system scheme '{name}' not found to set configuration"
        )
    raise errors.UnimplementedError(None, ctx.op, "SetOption")


# -- gradients (TF's: the collectives' adjoints, and the embedding activations') --------


@get_op_def("AllToAll").gradient
def _all_to_all_grad(op, grad):
    # Sending the pieces back: the split and concat dimensions trade places.
    attrs = {
        "concat_dimension": op._attr("split_dimension"),
        "split_dimension": op._attr("concat_dimension"),
        "split_count": op._attr("split_count"),
    }
    return [apply_op("AllToAll", [grad, op.inputs[1]], attrs).outputs[0], None]


@get_op_def("CollectivePermute").gradient
def _collective_permute_grad(op, grad):
    # Each (source, target) pair reversed sends the gradient back to where it came from.
    pairs = op.inputs[1]
    reverse = apply_op("ReverseV2", [pairs, [1]]).outputs[0]
    return [apply_op("CollectivePermute", [grad, reverse]).outputs[0], None]


@get_op_def("TPUEmbeddingActivations").gradient
def _embedding_activations_grad(op, grad):
    """The activations' gradient goes into the graph's collection
    "tpu_embedding_gradients_table_<table_id>" at `lookup_id` (where the TPU embedding
    training code made room for it); the inputs get zeros, as TF's.

    Raises:
      RuntimeError: no room was made (not training), `lookup_id` is out of its range,
        or that slot is filled already (a second tf.gradients).
    """
    table_id, lookup_id = op._attr("table_id"), op._attr("lookup_id")
    slots = get_default_graph().get_collection_ref(f"tpu_embedding_gradients_table_{table_id}")
    if not slots:
        raise RuntimeError(
            "Gradients for TPUEmbedding have been generated in non-training mode.This is "
            "not expected. Consider putting your Optimizer.minimize code behind the "
            "training mode condition check\n"
        )
    if not 0 <= lookup_id < len(slots):
        raise RuntimeError(
            f"Gradients (w.r.t. TPUEmbedding activations) generated for table_id "
            f"{table_id} and lookup_id {lookup_id}. The lookup_id attribute is outside the "
            f"expected range [0, {len(slots)})."
        )
    if slots[lookup_id] is not None:
        raise RuntimeError(
            f"Duplicate gradients (w.r.t. TPUEmbedding activations) generated for table_id "
            f"{table_id} and lookup_id {lookup_id}."
        )
    slots[lookup_id] = apply_op("Identity", [grad]).outputs[0]
    return [zeros(t.shape.as_list(), dtypes.float32) for t in op.inputs]
