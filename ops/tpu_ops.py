"""The TPU ops `tf.tpu` builds into a TF1 graph: CrossReplicaSum, the system ops
ConfigureDistributedTPU and ShutdownDistributedTPU, and the replication markers of
`tpu.replicate` (TPUReplicatedInput, TPUReplicateMetadata, TPUCompilationResult,
TPUReplicatedOutput).

TF 2.21's CPU build registers no kernel for any of them: the graph builds (shapes and
attrs as TF's), and a session that runs one fails with InvalidArgumentError ("No OpKernel
was registered to support Op ..."), which is what these CPU kernels raise.  There is no
TPU simulator here.
"""

from __future__ import annotations

from asyncflow import errors
from asyncflow.graph import apply_op, convert_to_tensor
from asyncflow.protos.types_pb2 import DataType
from asyncflow.registry import (
    ANY,
    REQUIRED,
    NotDifferentiable,
    TypeConstraint,
    register_op,
)
from asyncflow.tensor_shape import TensorShape

__all__ = [
    "configure_distributed_tpu",
    "configure_tpu_embedding",
    "cross_replica_sum",
    "kernel_nowhere",
    "shutdown_distributed_tpu",
    "tpu_compilation_result",
    "tpu_replicate_metadata",
    "tpu_replicated_input",
    "tpu_replicated_output",
]


def _attr_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bytes):
        return f'"{value.decode(errors="replace")}"'
    if isinstance(value, TensorShape):  # (TF's shape text: [2,?], or <unknown>)
        if value.rank is None:
            return "<unknown>"
        return "[" + ",".join("?" if d is None else str(d) for d in value.as_list()) + "]"
    if hasattr(value, "as_datatype_enum"):
        return DataType.Name(value.as_datatype_enum)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_attr_text(v) for v in value) + "]"
    return str(value)


def _no_kernel_error(op) -> errors.InvalidArgumentError:
    """TF's error for `op`, whose type has no kernel on any device of TF's CPU build."""
    shown = ", ".join(f"{k}={_attr_text(v)}" for k, v in op.attrs.items() if not k.startswith("_"))
    return errors.InvalidArgumentError(
        None,
        op,
        f"No OpKernel was registered to support Op '{op.type}' used by "
        f"{{{{node {op.name}}}}} with these attrs: [{shown}]\n"
        "Registered devices: [CPU]\nRegistered kernels:\n  <no registered kernels>\n",
    )


async def _refuse(ctx, *inputs):
    # (Placement raises first in a session; this is for callers that run kernels.)
    raise _no_kernel_error(ctx.op)


def kernel_nowhere(op_def) -> None:
    """Registers `op_def` as TF's CPU build has it: no kernel on any device (running it
    raises TF's "No OpKernel was registered" InvalidArgumentError)."""
    op_def.kernel("CPU")(_refuse)
    op_def.no_kernel_error = _no_kernel_error


# -- CrossReplicaSum ------------------------------------------------------------------------

_CRS_TYPES = ("float16", "bfloat16", "float32", "float64", "int32", "uint32")

CrossReplicaSum = register_op(
    "CrossReplicaSum",
    inputs=["input: T", "group_assignment: int32"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint(_CRS_TYPES)},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
)
kernel_nowhere(CrossReplicaSum)


@CrossReplicaSum.gradient
def _cross_replica_sum_grad(op, grad):
    # The sum's gradient is the sum of the replicas' gradients (TF's).
    return [cross_replica_sum(grad, op.inputs[1]), None]


def cross_replica_sum(x, group_assignment=None, name=None):
    """`tf.tpu.cross_replica_sum`: `x` summed over the replicas of a TPU computation
    (`group_assignment`, an int32 [groups, replicas per group] matrix, defaults to
    [[0]]).  It has no CPU kernel: running it raises InvalidArgumentError."""
    if group_assignment is None:
        group_assignment = [[0]]
    x = convert_to_tensor(x)
    if x.dtype.base_dtype.name not in _CRS_TYPES:
        raise TypeError(
            f"Value passed to parameter 'input' has DataType {x.dtype.base_dtype.name} not in "
            "list of allowed values: float16, bfloat16, float32, float64, int32, uint32"
        )
    return apply_op("CrossReplicaSum", [x, group_assignment], name=name).outputs[0]


# -- the system ops -------------------------------------------------------------------------

ConfigureDistributedTPU = register_op(
    "ConfigureDistributedTPU",
    outputs=["topology: string"],
    attrs={
        "embedding_config": "",
        "tpu_embedding_config": "",
        "is_global_init": False,
        "enable_whole_mesh_compilations": False,
        "compilation_failure_closes_chips": True,
        "tpu_cancellation_closes_chips": 0,
    },
    shape_fn=lambda op: [TensorShape([])],
    stateful=True,
)
kernel_nowhere(ConfigureDistributedTPU)

ShutdownDistributedTPU = register_op(
    "ShutdownDistributedTPU", shape_fn=lambda op: [], stateful=True
)
kernel_nowhere(ShutdownDistributedTPU)


def configure_distributed_tpu(name=None, **attrs):
    """The ConfigureDistributedTPU op (its `topology` output, a serialized
    TopologyProto on a TPU system)."""
    return apply_op("ConfigureDistributedTPU", [], attrs, name=name).outputs[0]


def shutdown_distributed_tpu(name=None):
    """The ShutdownDistributedTPU op."""
    return apply_op("ShutdownDistributedTPU", [], name=name)


# -- the markers of a replicated computation ------------------------------------------------


def _shape_text(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _merged_shape(op):
    """The replicas' shapes merged: they must agree where known (TF's messages).

    Raises:
      ValueError: two replicas' ranks or known sizes differ.
    """
    dims = op.inputs[0].shape.as_list() if op.inputs[0].shape.rank is not None else None
    for i, t in enumerate(op.inputs[1:], 1):
        other = t.shape.as_list() if t.shape.rank is not None else None
        if dims is None or other is None:
            dims = dims if other is None else other
            continue
        where = f"\n\tFrom merging shape {i - 1} with other shapes."
        if len(dims) != len(other):
            raise ValueError(
                f"Shapes must be equal rank, but are {len(dims)} and {len(other)}{where}"
            )
        for d, (a, b) in enumerate(zip(dims, other)):
            if a is not None and b is not None and a != b:
                raise ValueError(
                    f"Dimension {d} in both shapes must be equal, but are {a} and {b}. "
                    f"Shapes are {_shape_text(dims)} and {_shape_text(other)}.{where}"
                )
        dims = [b if a is None else a for a, b in zip(dims, other)]
    return TensorShape(dims)


TPUReplicatedInput = register_op(
    "TPUReplicatedInput",
    inputs=["inputs: N * T"],
    outputs=["output: T"],
    attrs={
        "N": REQUIRED,
        "T": ANY,
        "is_mirrored_variable": False,
        "index": -1,
        "is_packed": False,
    },  # fmt: skip
    shape_fn=lambda op: [_merged_shape(op)],
)
kernel_nowhere(TPUReplicatedInput)

TPUReplicatedOutput = register_op(
    "TPUReplicatedOutput",
    inputs=["input: T"],
    outputs=["outputs: num_replicas * T"],
    attrs={"num_replicas": REQUIRED, "T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape] * op._attr("num_replicas"),
)
kernel_nowhere(TPUReplicatedOutput)

TPUReplicateMetadata = register_op(
    "TPUReplicateMetadata",
    attrs={
        "num_replicas": REQUIRED,
        "num_cores_per_replica": 1,
        "topology": "",
        "use_tpu": True,
        "device_assignment": [],
        "computation_shape": [],
        "host_compute_core": [],
        "padding_map": [],
        "step_marker_location": "STEP_MARK_AT_ENTRY",
        "allow_soft_placement": False,
        "use_spmd_for_xla_partitioning": False,
        "use_shardy_partitioner": False,
        "tpu_compile_options_proto": "",
    },
    shape_fn=lambda op: [],
)
kernel_nowhere(TPUReplicateMetadata)

TPUCompilationResult = register_op(
    "TPUCompilationResult", outputs=["output: string"], shape_fn=lambda op: [TensorShape([])]
)
kernel_nowhere(TPUCompilationResult)

ConfigureTPUEmbedding = register_op(
    "ConfigureTPUEmbedding", attrs={"config": REQUIRED}, shape_fn=lambda op: [], stateful=True
)
kernel_nowhere(ConfigureTPUEmbedding)


def configure_tpu_embedding(config, name=None):
    """The ConfigureTPUEmbedding op (`config`: a serialized TPUEmbeddingConfiguration)."""
    return apply_op("ConfigureTPUEmbedding", [], {"config": config}, name=name)


def tpu_replicated_input(inputs, name=None, **attrs):
    """One value of each replica -> the replicated computation's input."""
    return apply_op("TPUReplicatedInput", [list(inputs)], attrs, name=name).outputs[0]


def tpu_replicated_output(input, num_replicas, name=None):  # noqa: A002 - TF's name
    """The replicated computation's output -> one value per replica."""
    op = apply_op("TPUReplicatedOutput", [input], {"num_replicas": num_replicas}, name=name)
    return list(op.outputs)


def tpu_replicate_metadata(name=None, **attrs):
    """The TPUReplicateMetadata op describing a replicated computation."""
    return apply_op("TPUReplicateMetadata", [], attrs, name=name)


def tpu_compilation_result(name=None):
    """The TPUCompilationResult op (a serialized compilation status)."""
    return apply_op("TPUCompilationResult", [], name=name).outputs[0]


# TF registers no gradient for these (TPUReplicatedInput is marked not differentiable).
NotDifferentiable("TPUReplicatedInput")
