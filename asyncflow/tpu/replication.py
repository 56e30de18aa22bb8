"""`tf.tpu.replicate` and its forms (`rewrite`, `shard`, `batch_parallel`) and
`outside_compilation`, building TF1's graph for a replicated TPU computation.

The graph is TF's, node for node: each input position becomes a TPUReplicatedInput
(`input<i>`) over the replicas' values; a cluster (`cluster`, made unique) opens with
a NoOp pivot and a TPUReplicateMetadata; the computation is built once, on identities
of the replicated inputs, its ops marked `_tpu_replicate=<cluster>`; each output
leaves through an Identity on `core(0)`, a TPUReplicatedOutput (`output<i>`) and one
Identity per replica (`output_<i>_shard_<r>`).  The TPU ops have no CPU kernel, so a
session running the result fails with TF's InvalidArgumentError: the graph is for
export, or for a TPU elsewhere.  Inside the computation, `outside_compilation` marks
its ops `_xla_outside_compilation`; outside one it just calls the computation.

Invariant: `_CONTEXTS` holds the replicate calls being built, innermost last; it is
empty between calls.
"""

from __future__ import annotations

import enum
import inspect
from typing import NamedTuple

from asyncflow import graph as ops
from asyncflow import nest, tensor_shape
from asyncflow.ops import (
    array_ops,
    control_flow_ordering,
    manip_ops,
    reduction_ops,
    slicing_ops,
    tpu_ops,
)

__all__ = [
    "PaddingSpec",
    "XLAOptions",
    "batch_parallel",
    "core",
    "number_of_shards",
    "outside_compilation",
    "replicate",
    "rewrite",
    "shard",
]


def core(num: int) -> str:
    """The device name of core `num` of a replicated TPU computation."""
    return f"device:TPU_REPLICATED_CORE:{num}"


class PaddingSpec(enum.IntEnum):
    """How `replicate` pads dynamic shapes: AUTO, or POWER_OF_TWO."""

    AUTO = 0
    POWER_OF_TWO = 1


class XLAOptions(NamedTuple):
    """XLA compilation options of a TPU computation."""

    use_spmd_for_xla_partitioning: bool = True
    enable_xla_dynamic_padder: bool = True
    use_shardy_partitioner: bool = False


class _Replicating:
    def __init__(self, cluster: str, num_replicas: int):
        self.cluster = cluster
        self.num_replicas = num_replicas
        self.outside_compilations = 0


_CONTEXTS: list[_Replicating] = []


def number_of_shards():
    """The replica count of the computation being built, else None."""
    return _CONTEXTS[-1].num_replicas if _CONTEXTS else None


def _argument_count_error(func, supplied: int):
    def needs(how, n):
        return f"{how} {n} argument{'' if n == 1 else 's'}"

    try:
        spec = inspect.getfullargspec(func)
    except TypeError:
        return None
    args = spec.args[1:] if inspect.ismethod(func) else spec.args
    defaults = len(spec.defaults or ())
    least = len(args) - defaults
    if supplied < least:
        if defaults == 0 and spec.varargs is None:
            return needs("exactly", len(args))
        return needs("at least", least)
    if spec.varargs is None and supplied > len(args):
        return needs("exactly" if defaults == 0 else "at most", len(args))
    return None


def _check_inputs(computation, inputs, infeed_queue):
    if not isinstance(inputs, list):
        raise TypeError(
            f"tpu.replicate() inputs must be a list of lists/tuples, received {type(inputs)}"
        )
    if any(not isinstance(inp, (list, tuple)) for inp in inputs):
        raise TypeError(
            "tpu.replicate() inputs must be a list of lists/tuples, "
            f"received types: {[type(inp) for inp in inputs]}"
        )
    if infeed_queue is not None:
        raise TypeError("tpu.replicate(): infeed queues need tpu_feed.InfeedQueue, absent here")
    for replica in inputs[1:]:
        nest.assert_same_structure(inputs[0], replica)
    flat = [
        [ops.convert_to_tensor(0 if x is None else x) for x in nest.flatten(replica)]
        for replica in inputs
    ]
    types = [t.dtype for t in flat[0]]
    arity = len(inputs[0])
    for i, replica in enumerate(inputs):
        if len(replica) != arity:
            raise ValueError(
                "Replicas must have the same number of inputs. Replica 0 had "
                f"{arity} inputs, replica {i} had {len(replica)} inputs."
            )
        theirs = [t.dtype for t in flat[i]]
        if theirs != types:
            raise ValueError(
                "Replicas must have matching input types. Replica 0 had input types "
                f"{types}, replica {i} had input types {theirs}"
            )
    error = _argument_count_error(computation, arity)
    if error is not None:
        raise TypeError(
            "Supplied computation cannot be called with the specified inputs. "
            f"You specified {arity} inputs: {[t.name for t in inputs[0]]}, but the "
            f"computation needs {error}"
        )
    return flat


def _input_shapes(flat, maximum_shapes, padding_spec):
    """`maximum_shapes`' part of `replicate`, as TF's: each input's shape per replica
    (marked `_post_device_rewrite`) and their maximum over the replicas.  Inputs whose
    replicas' static shapes differ would be padded to those maxima, with a
    PaddingMap per padded dimension in the metadata; that is not built here.

    Raises:
      ValueError: `maximum_shapes` is not shaped as one replica's inputs.
      NotImplementedError: an input whose replicas' shapes differ (or are unknown)
        and that has a maximum shape, which TF would pad.
    """
    del padding_spec  # (it only chooses the padded sizes)
    count = len(flat[0])
    known = [t.shape.as_list() if t.shape.rank is not None else None for t in flat[0]]
    need = [False] * count
    for replica in flat[1:]:
        for i, t in enumerate(replica):
            shape = t.shape.as_list() if t.shape.rank is not None else None
            if shape is None or known[i] is None or None in shape or shape != known[i]:
                need[i] = True
    sizes = [[] for _ in range(count)]
    for replica in flat:
        for i, t in enumerate(replica):
            size = array_ops.shape(t)
            size.op._attrs["_post_device_rewrite"] = True
            sizes[i].append(size)
    for per_input in sizes:
        reduction_ops.reduce_max(manip_ops.stack(per_input), axis=0)
    for i, padded in enumerate(maximum_shapes):
        if need[i] and padded is not None:
            raise NotImplementedError(
                "tpu.replicate: padding replicas' inputs of different shapes to "
                f"maximum_shapes (input {i}) is not built here"
            )
    return flat


def _metadata_attrs(num_replicas, device_assignment, xla_options) -> dict:
    attrs = {"num_replicas": num_replicas, "use_tpu": True, "allow_soft_placement": False}
    if device_assignment is not None:
        attrs["topology"] = device_assignment.topology.serialized()
        attrs["device_assignment"] = [int(v) for v in device_assignment.core_assignment.flat]
        attrs["num_cores_per_replica"] = device_assignment.num_cores_per_replica
    attrs["step_marker_location"] = "STEP_MARK_AT_ENTRY"
    attrs["use_spmd_for_xla_partitioning"] = xla_options.use_spmd_for_xla_partitioning
    attrs["use_shardy_partitioner"] = xla_options.use_shardy_partitioner
    return attrs


def _outputs_of(result):
    """The computation's result as (tensors, operations), TF's rules."""
    if result is None:
        result = []
    elif not isinstance(result, (list, tuple)):
        result = [result]
    flat = nest.flatten(list(result))
    flat.append(control_flow_ordering.no_op())
    converted = []
    with ops.device(core(0)):
        for o in flat:
            if o is None or isinstance(o, ops.Operation):
                converted.append(o)
                continue
            try:
                converted.append(ops.convert_to_tensor(o))
            except (TypeError, ValueError) as e:
                raise ValueError(
                    "TPU function return values must all either be Operations or "
                    f"convertible to Tensors. Got error: {e}"
                ) from None
    operations = [o for o in converted if isinstance(o, ops.Operation)]
    tensors = [o for o in converted if not isinstance(o, ops.Operation)]
    if converted != tensors + operations:
        raise ValueError(
            "TPU functions must return zero-or more Tensor values followed by "
            "zero or more Operations."
        )
    identities = []
    for t in tensors:
        if t is None:
            identities.append(None)
            continue
        with ops.device(t.device or core(0)):
            out = array_ops.identity(t)
        out.op._attrs["_tpu_output_identity"] = True
        identities.append(out)
    return identities, operations


def _check_cluster_ops(cluster_ops, pivot) -> None:
    """What TF's replicate context does to each op built in the cluster: an op with
    no inputs at all is ordered after the pivot; one that reads a ref variable
    refuses (NotImplementedError, at the first such op)."""
    for op in cluster_ops:
        if "_tpu_replicate" not in op._attrs:
            continue
        # (a resource variable's update reads it through a _ResourceAsRef view: not a
        # ref variable)
        if any(t._is_ref and t.op.type != "_ResourceAsRef" for t in op.inputs):
            raise NotImplementedError(
                "Non-resource Variables are not supported inside TPU computations "
                f"(operator name: {op.name})"
            )
        if not op.inputs and not op.control_inputs:
            op._add_control_input(pivot)
            op._attrs["_has_manual_control_dependencies"] = True


def _split_compile_and_replicate(computation, inputs, infeed_queue, device_assignment,
                                 xla_options, maximum_shapes=None,
                                 padding_spec=None):  # fmt: skip
    inputs = [[]] if inputs is None else inputs
    xla_options = xla_options or XLAOptions()
    flat = _check_inputs(computation, inputs, infeed_queue)
    if maximum_shapes:
        nest.assert_same_structure(inputs[0], maximum_shapes, check_types=False)
        flat_maximum = [
            None if s is None else tensor_shape.TensorShape(s)
            for s in nest.flatten(maximum_shapes)
        ]
        flat = _input_shapes(flat, flat_maximum, padding_spec)
    graph = ops.get_default_graph()
    num_replicas = len(inputs)
    replicated = [
        tpu_ops.tpu_replicated_input([replica[i] for replica in flat], name=f"input{i}")
        for i in range(len(flat[0]))
    ]
    cluster = graph.unique_name("cluster")
    pivot = control_flow_ordering.no_op(name=f"{cluster}/pivot")
    pivot._attrs["_pivot_for_cluster"] = cluster
    context = _Replicating(cluster, num_replicas)
    _CONTEXTS.append(context)
    first = len(graph.get_operations())
    try:
        with graph._attr_scope({"_tpu_replicate": cluster}):
            with ops.control_dependencies([pivot]):
                metadata = tpu_ops.tpu_replicate_metadata(
                    **_metadata_attrs(num_replicas, device_assignment, xla_options)
                )
            metadata._attrs["_has_manual_control_dependencies"] = True
            with ops.control_dependencies([metadata]):
                computation_inputs = []
                for i, t in enumerate(replicated):
                    ident = array_ops.identity(t, name=f"replicated_input_{i}")
                    ident.op._attrs["_tpu_input_identity"] = True
                    computation_inputs.append(ident)
                args = nest.pack_sequence_as(inputs[0], computation_inputs)
                result = computation(*args)
            tensors, operations = _outputs_of(result)
        _check_cluster_ops(graph.get_operations()[first:], pivot)
    finally:
        _CONTEXTS.pop()
    with ops.control_dependencies([metadata]):
        compile_status = tpu_ops.tpu_compilation_result()
    compile_status.op._attrs["_tpu_compilation_status"] = cluster
    if not tensors:
        # One NoOp per replica, after the computation's operations.
        shards = [
            control_flow_ordering.group(*operations, name=f"shard_{r}")
            for r in range(num_replicas)
        ]
        return compile_status, shards
    per_replica = [[] for _ in range(num_replicas)]
    for i, t in enumerate(tensors):
        if t is None:
            for outs in per_replica:
                outs.append(None)
            continue
        outs = tpu_ops.tpu_replicated_output(t, num_replicas, name=f"output{i}")
        with ops.control_dependencies(operations):
            for r, o in enumerate(outs):
                per_replica[r].append(array_ops.identity(o, name=f"output_{i}_shard_{r}"))
    return compile_status, per_replica


def replicate(computation, inputs=None, infeed_queue=None, device_assignment=None,
              name=None, maximum_shapes=None, padding_spec=None, xla_options=None):  # fmt: skip
    """`computation` over `len(inputs)` replicas of a TPU (inputs[r] are replica r's
    arguments): per replica, the list of its outputs.

    Raises:
      TypeError: inputs that are not a list of lists, or a computation that cannot
        take that many arguments.
      ValueError: replicas with different input counts or types, or results that are
        not tensors followed by operations.
    """
    del name
    return _split_compile_and_replicate(
        computation, inputs, infeed_queue, device_assignment, xla_options, maximum_shapes,
        padding_spec,
    )[1]  # fmt: skip


def rewrite(computation, inputs=None, infeed_queue=None, device_assignment=None, name=None,
            xla_options=None):  # fmt: skip
    """`computation(*inputs)` as a one-replica TPU computation: its outputs."""
    return replicate(computation, None if inputs is None else [inputs], infeed_queue,
                     device_assignment, name, xla_options=xla_options)[0]  # fmt: skip


def shard(computation, inputs=None, num_shards=1, input_shard_axes=None,
          outputs_from_all_shards=True, output_shard_axes=None, infeed_queue=None,
          device_assignment=None, name=None, xla_options=None):  # fmt: skip
    """`computation` over `num_shards` slices of each input (split along
    `input_shard_axes`), the shards' outputs joined along `output_shard_axes`
    (stacked where scalar), or shard 0's where `outputs_from_all_shards` is False.

    Raises:
      ValueError: a non-positive shard count, or axis lists of the wrong lengths.
      TypeError: inputs that are not a list.
    """
    if num_shards <= 0:
        raise ValueError(f"num_shards must be a positive integer. Received {num_shards}")
    inputs = [] if inputs is None else inputs
    if not isinstance(inputs, list):
        raise TypeError(
            f"tpu.shard()'s inputs must be a list of Tensors or None. Received {type(inputs)}"
        )
    inputs = [ops.convert_to_tensor(x) for x in inputs]
    if input_shard_axes is None:
        input_shard_axes = [0] * len(inputs)
    if len(inputs) != len(input_shard_axes):
        raise ValueError(
            "Length of input_shard_axes must be equal to the number of inputs. Received "
            f"{len(inputs)} inputs and {len(input_shard_axes)} input_shard_axes."
        )
    if inputs:
        split = [
            slicing_ops.split(x, num_shards, axis=a) for a, x in zip(input_shard_axes, inputs)
        ]
        per_shard = [list(s) for s in zip(*split)]
    else:
        per_shard = [[] for _ in range(num_shards)]
    _, outputs = _split_compile_and_replicate(
        computation, per_shard, infeed_queue, device_assignment, xla_options
    )
    if outputs[0] and isinstance(outputs[0][0], ops.Operation):
        return [outputs[0][0]]
    count = len(outputs[0])
    if output_shard_axes is None:
        output_shard_axes = [0] * count
    if count != len(output_shard_axes):
        raise ValueError(
            "Length of output_shard_axes must be equal to the number of outputs. Received "
            f"{count} outputs and {len(output_shard_axes)} output_shard_axes."
        )
    if isinstance(outputs_from_all_shards, bool):
        outputs_from_all_shards = [outputs_from_all_shards] * count
    if count != len(outputs_from_all_shards):
        raise ValueError(
            "Length of outputs_from_all_shards must be equal to the number of outputs. "
            f"Received {count} outputs  and {len(outputs_from_all_shards)} "
            "outputs_from_all_shards."
        )
    results = []
    for axis, all_shards, x in zip(output_shard_axes, outputs_from_all_shards, zip(*outputs)):
        if not all_shards:
            results.append(x[0])
        elif x[0].shape.ndims == 0:
            results.append(manip_ops.stack(list(x)))
        else:
            results.append(manip_ops.concat(list(x), axis=axis))
    return results


def batch_parallel(computation, inputs=None, num_shards=1, infeed_queue=None,
                   device_assignment=None, name=None, xla_options=None):  # fmt: skip
    """`shard` along axis 0 of every input and output."""
    return shard(computation, inputs, num_shards=num_shards, infeed_queue=infeed_queue,
                 device_assignment=device_assignment, name=name,
                 xla_options=xla_options)  # fmt: skip


def outside_compilation(computation, *args, **kwargs):
    """Inside a replicated computation, `computation`'s ops marked to run on the host
    (`_xla_outside_compilation`, numbered per cluster); outside one, just
    `computation(*args, **kwargs)`."""
    if not _CONTEXTS:
        return computation(*args, **kwargs)
    context = _CONTEXTS[-1]
    number = str(context.outside_compilations)
    context.outside_compilations += 1
    graph = ops.get_default_graph()
    with graph._attr_scope({"_xla_outside_compilation": number}):
        return computation(*args, **kwargs)
