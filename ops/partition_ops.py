"""Interleaving ops: DynamicStitch, ParallelDynamicStitch, DynamicPartition, and
`boolean_mask` (composed of Reshape, Where and GatherV2, as TF builds it).

DynamicPartition splits `data` by a partition id per leading slice; DynamicStitch is its
inverse, merging slices into the positions its index lists name.  The two gradients are
each other: partitioning the positions of `data` says where each gradient slice goes.

Duplicates in DynamicStitch: the last (in list order, then index order) wins, as TF
documents; ParallelDynamicStitch leaves the winner unspecified (here the same rule).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import ANY, REQUIRED, register_op

__all__ = ["dynamic_stitch", "dynamic_partition", "boolean_mask"]


def _shape_str(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _outs(values):
    values = list(values)
    return values[0] if len(values) == 1 else tuple(values)


# -- DynamicStitch / ParallelDynamicStitch -------------------------------------------------------


def _stitch_shape(op):
    n = op._attr("N")
    indices, data = op.inputs[:n], op.inputs[n:]
    slice_shape = tensor_shape.unknown_shape()
    first_dim = 0
    for ind, d in zip(indices, data, strict=True):
        ind_shape, d_shape = ind.shape, d.shape
        if ind_shape.ndims is not None and d_shape.ndims is not None:
            d_shape.with_rank_at_least(ind_shape.ndims)
            d_shape[: ind_shape.ndims].merge_with(ind_shape)
            slice_shape = slice_shape.merge_with(d_shape[ind_shape.ndims :])
        value = ops.constant_value(ind)
        if value is None or first_dim is None:
            first_dim = None
        elif value.size:
            first_dim = max(first_dim, int(value.max()) + 1)
    return [tensor_shape.TensorShape([first_dim]).concatenate(slice_shape)]


def _on(xp, host_index):
    """A host index array where a kernel on `xp`'s device indexes with it."""
    return host_index if xp is np else xp.asarray(host_index)


def _stitch_value(xp, indices, data):
    """Merge `data` slices into the rows host `indices` name; the later duplicate wins."""
    first = 0
    slice_shape = None
    for i, (ind, d) in enumerate(zip(indices, data, strict=True)):
        if d.shape[: ind.ndim] != ind.shape:
            raise _invalid(
                f"data[{i}].shape = {_shape_str(d.shape)} does not start with indices[{i}]"
                f".shape = {_shape_str(ind.shape)}"
            )
        tail = d.shape[ind.ndim :]
        if slice_shape is None:
            slice_shape = tail
        elif tail != slice_shape:
            raise _invalid(
                f"Need data[0].shape[{indices[0].ndim}:] = data[{i}].shape[{ind.ndim}:], got "
                f"data[0].shape = {_shape_str(data[0].shape)}, data[{i}].shape = "
                f"{_shape_str(d.shape)}, indices[0].shape = {_shape_str(indices[0].shape)}, "
                f"indices[{i}].shape = {_shape_str(ind.shape)}"
            )
        if ind.size:
            if int(ind.min()) < 0:
                raise _invalid(f"indices[{int(np.argmax(ind.reshape(-1) < 0))}] is out of range")
            first = max(first, int(ind.max()) + 1)
    out = xp.zeros((first,) + slice_shape, data[0].dtype)
    for ind, d in zip(indices, data, strict=True):
        out[_on(xp, ind.reshape(-1))] = d.reshape((ind.size,) + slice_shape)
    return out


def _stitch_op(op_type: str):
    op_def = register_op(
        op_type,
        inputs=["indices: N * int32", "data: N * T"],
        outputs=["merged: T"],
        attrs={"N": REQUIRED, "T": ANY},
        shape_fn=_stitch_shape,
    )

    # The indices stay in host memory (TF's HostMemory("indices")): the output's size
    # and the bounds check come from their values.
    @op_def.kernel(host_memory=("indices",))
    async def _kernel(ctx, *args):
        n = ctx.attrs["N"]
        indices = [np.asarray(a) for a in args[:n]]
        data = [ctx.xp.asarray(a) for a in args[n:]]
        return await ctx.device.compute(_stitch_value, ctx.xp, indices, data)

    @op_def.gradient
    def _grad(op, grad):
        """Each data input gets the gradient rows at its indices (a duplicate that lost
        gets the winner's rows too, as TF's gradient does)."""
        n = op._attr("N")
        grad = ops.convert_to_tensor(grad)
        return [None] * n + [_g.apply("GatherV2", grad, ind, _g.constant(0))
                             for ind in op.inputs[:n]]  # fmt: skip

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


DynamicStitch = _stitch_op("DynamicStitch")
ParallelDynamicStitch = _stitch_op("ParallelDynamicStitch")


def _stitch_builder(op_type: str):
    def builder(indices, data, name=None):
        indices, data = list(indices), list(data)
        if len(indices) != len(data):
            raise ValueError(
                f"List argument 'data' to '{op_type}' Op with length {len(data)} must match "
                f"length {len(indices)} of argument 'indices'."
            )
        return ops.apply_op(op_type, [indices, data], name=name).outputs[0]

    builder.__doc__ = f"""Interleave the slices of `data` into one tensor (op {op_type}):
    merged[indices[m][i, ...], ...] = data[m][i, ...].

    Raises:
      ValueError: at build time, data[m]'s shape does not start with indices[m]'s.
      InvalidArgumentError: at run time, a negative index ("indices[1] is out of range")
        or mismatched shapes.
    """
    return builder


dynamic_stitch = _stitch_builder("DynamicStitch")
parallel_dynamic_stitch = _stitch_builder("ParallelDynamicStitch")


# -- DynamicPartition ------------------------------------------------------------------------


def _partition_shape(op):
    data, partitions = op.inputs[0].shape, op.inputs[1].shape
    n = op._attr("num_partitions")
    if partitions.ndims is None or data.ndims is None:
        return [tensor_shape.unknown_shape()] * n
    data = data.with_rank_at_least(partitions.ndims)
    data[: partitions.ndims].merge_with(partitions)
    return [tensor_shape.TensorShape([None]).concatenate(data[partitions.ndims :])] * n


DynamicPartition = register_op(
    "DynamicPartition",
    inputs=["data: T", "partitions: int32"],
    outputs=["outputs: num_partitions * T"],
    attrs={"num_partitions": REQUIRED, "T": ANY},
    shape_fn=_partition_shape,
)


def _partition_value(xp, data, partitions, n):
    if data.shape[: partitions.ndim] != partitions.shape:
        raise _invalid(
            f"data.shape must start with partitions.shape, got data.shape = "
            f"{_shape_str(data.shape)}, partitions.shape = {_shape_str(partitions.shape)}"
        )
    flat = partitions.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= n))
    if bad.size:
        where = ",".join(str(int(k)) for k in np.unravel_index(int(bad[0]), partitions.shape))
        at = f"partitions[{where}]" if partitions.ndim else "partitions"  # TF's wording
        raise _invalid(f"{at} = {flat[bad[0]]} is not in [0, {n})")
    rows = data.reshape((flat.size,) + data.shape[partitions.ndim :])
    return _outs(rows[_on(xp, flat == p)] for p in range(n))


# The partition ids stay in host memory: the outputs' sizes come from their values.
@DynamicPartition.kernel(host_memory=("partitions",))
async def _dynamic_partition(ctx, data, partitions):
    data, partitions = ctx.xp.asarray(data), np.asarray(partitions)
    return await ctx.device.compute(
        _partition_value, ctx.xp, data, partitions, ctx.attrs["num_partitions"]
    )


@DynamicPartition.gradient
def _dynamic_partition_grad(op, *grads):
    data, partitions = op.inputs
    n = op._attr("num_partitions")
    positions = _g.reshape(
        _g.apply("Range", _g.constant(0), _g.apply("Size", partitions), _g.constant(1)),
        _g.shape(partitions),
    )
    parts = ops.apply_op("DynamicPartition", [positions, partitions], {"num_partitions": n})
    grads = [
        _g.zeros_like(o) if g is None else ops.convert_to_tensor(g)
        for g, o in zip(grads, op.outputs, strict=True)
    ]
    stitched = ops.apply_op("DynamicStitch", [list(parts.outputs), grads]).outputs[0]
    return [_g.reshape(stitched, _g.shape(data)), None]


def dynamic_partition(data, partitions, num_partitions, name=None):
    """Split `data` into `num_partitions` tensors by the partition id of each leading slice.

    Raises:
      ValueError: at build time, partitions' shape is not a prefix of data's.
      InvalidArgumentError: at run time, "partitions[1] = 2 is not in [0, 2)".
    """
    if _ragged.is_ragged(data):
        return _ragged.dynamic_partition(data, partitions, num_partitions, name)
    attrs = {"num_partitions": int(num_partitions)}
    return list(ops.apply_op("DynamicPartition", [data, partitions], attrs, name=name).outputs)


# -- boolean_mask ------------------------------------------------------------------------------


@_dispatch.add_dispatch_support
def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The slices of `tensor` (from `axis`) where the K-d `mask` is True, flattened into
    one dimension.

    Raises:
      ValueError: a scalar mask, a mask of unknown rank, or a mask shape incompatible
        with tensor.shape[axis:axis+K].
      InvalidArgumentError: (at run time) mismatched shapes not known at build time.
    """
    from asyncflow.ops import array_ops, reduction_ops, slicing_ops

    with ops.name_scope(name, values=[tensor, mask]):
        tensor = ops.convert_to_tensor(tensor, name="tensor")
        mask = ops.convert_to_tensor(mask, name="mask")
        k = mask.shape.ndims
        if k == 0:
            raise ValueError("mask cannot be scalar.")
        if k is None:
            raise ValueError(
                "Number of mask dimensions must be specified, even if some dimensions are "
                "None.  E.g. shape=[None] is ok, but shape=None is not."
            )
        axis = 0 if axis is None else int(axis)
        shape = tensor.shape
        if shape.ndims is not None and axis < 0:
            axis += shape.ndims
        if shape.ndims is not None:
            shape[axis : axis + k].assert_is_compatible_with(mask.shape)
        dyn = array_ops.shape(tensor)
        leading = reduction_ops.reduce_prod(dyn[axis : axis + k], [0], keepdims=True)
        flat = array_ops.reshape(
            tensor, array_ops.concat([dyn[:axis], leading, dyn[axis + k :]], 0)
        )
        if shape.ndims is not None:
            first = shape[axis : axis + k].num_elements()
            flat.set_shape(shape[:axis].concatenate([first]).concatenate(shape[axis + k :]))
        positions = array_ops.squeeze(slicing_ops.where(array_ops.reshape(mask, [-1])), axis=[1])
        return slicing_ops.gather(flat, positions, axis=axis)
