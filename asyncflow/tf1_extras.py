"""TF1 top-level odds built from other ops, as TF's Python layer builds them:
`tf.batch_scatter_update`, `tf.create_partitioned_variables`, `tf.recompute_grad`,
`tf.vectorized_map` and `tf.add_check_numerics_ops`.
"""

from __future__ import annotations

from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.ops import check_ops, functional_ops
from asyncflow.ops.control_flow_ordering import group
from asyncflow.ops.scatter_nd_ops import batch_scatter_update

__all__ = [
    "batch_scatter_update",
    "create_partitioned_variables",
    "recompute_grad",
    "vectorized_map",
    "add_check_numerics_ops",
]


def create_partitioned_variables(
    shape,
    slicing,
    initializer,
    dtype=dtypes.float32,
    trainable=True,
    collections=None,
    name=None,
    reuse=None,
):
    """`tf.create_partitioned_variables`: the slices "<scope>/part_<i>" of one variable
    of shape `shape`, cut as `slicing` says (one dimension sliced).

    Raises:
      ValueError: shape and slicing of different lengths, or empty.
    """
    if len(shape) != len(slicing):
        raise ValueError(
            "The 'shape' and 'slicing' of a partitioned Variable must have the length: "
            f"shape: {shape}, slicing: {slicing}"
        )
    if not shape:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    partitions = list(slicing)
    with vs.variable_scope(name, "PartitionedVariable", reuse=reuse) as scope:
        # (TF's _get_partitioned_variable(name=None): the scope's own name, unprefixed)
        with ops.name_scope(None):
            partitioned = vs._get_default_variable_store().get_variable(
                scope.name,
                shape=list(shape),
                dtype=dtype,
                initializer=initializer,
                trainable=trainable,
                collections=collections,
                partitioner=lambda **_: partitions,
                reuse=scope.reuse,
            )
    return list(partitioned)


def recompute_grad(f):
    """`tf.recompute_grad`: `f` with TF's values and gradients.  (TF recomputes f's
    forward pass in the backward pass to save memory; here the forward pass is kept,
    which gives the same numbers.)"""

    def inner(*args, **kwargs):
        return f(*args, **kwargs)

    inner.__name__ = getattr(f, "__name__", "recompute_grad")
    inner.__doc__ = f.__doc__
    return inner


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """`tf.vectorized_map`: fn applied to each slice of `elems` along its first
    dimension, the results stacked, as TF (which vectorizes fn; here a map_fn loop, TF's
    own fallback, gives the same values)."""
    flat = [ops.convert_to_tensor(e) for e in nest.flatten(elems)]
    elems = nest.pack_sequence_as(elems, flat)
    # fn's output structure and dtypes, from fn on the first slice (ops never run)
    with ops.name_scope("vectorized_map_signature"):
        probe = fn(nest.pack_sequence_as(elems, [e[0] for e in flat]))
    dtype = nest.map_structure(lambda t: ops.convert_to_tensor(t).dtype, probe)
    with ops.name_scope("loop_body"):
        return functional_ops.map_fn(fn, elems, dtype=dtype)


def add_check_numerics_ops():
    """`tf.add_check_numerics_ops`: a CheckNumerics on every half / float / double
    tensor of the default graph, chained by control dependencies; the group of the
    last one.

    Raises:
      ValueError: an op of the graph is inside a cond or while loop (as TF).
    """
    check = []
    for op in ops.get_default_graph().get_operations():
        for output in op.outputs:
            if output.dtype in (dtypes.float16, dtypes.float32, dtypes.float64):
                if op._control_flow_context is not None:
                    raise ValueError(
                        "`tf.add_check_numerics_ops() is not compatible with TensorFlow "
                        "control flow operations such as `tf.cond()` or `tf.while_loop()`."
                    )
                message = f"{op.name}:{output.value_index}"
                with ops.control_dependencies(check):
                    check = [check_ops.check_numerics(output, message=message)]
    return group(*check)
