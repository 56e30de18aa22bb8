"""Ops over variable-length sequences: ReverseSequence (`tf.reverse_sequence`) and
`tf.sequence_mask`, which the bidirectional RNNs build on."""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, cast_ops, math_ops, reduction_ops
from asyncflow.registry import ANY, INDEX, register_op

__all__ = ["reverse_sequence", "sequence_mask"]


def _reverse_sequence_shape(op):
    """TF's shape function: seq_lengths a vector as long as the batch dimension, both
    dims inside the input's rank (ValueError at build time where the shapes are known)."""
    x, lengths = op.inputs
    n = lengths.shape
    if n.ndims is not None and n.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {n.ndims}")
    n = n.with_rank(1)
    rank = x.shape.ndims
    if rank is None:
        return [x.shape]
    seq_dim, batch_dim = op._attr("seq_dim"), op._attr("batch_dim")
    if batch_dim >= rank:
        raise ValueError(f"batch_dim must be < input rank: {batch_dim} vs. {rank}")
    if seq_dim >= rank:
        raise ValueError(f"seq_dim must be < input rank: {seq_dim} vs. {rank}")
    b, m = x.shape.dims[batch_dim].value, n.dims[0].value
    if b is not None and m is not None and b != m:
        raise ValueError(f"Dimensions must be equal, but are {b} and {m}")
    return [x.shape]


ReverseSequence = register_op(
    "ReverseSequence",
    inputs=["input: T", "seq_lengths: Tlen"],
    outputs=["output: T"],
    attrs={"seq_dim": 0, "batch_dim": 0, "T": ANY, "Tlen": INDEX.with_default("int64")},
    shape_fn=_reverse_sequence_shape,
)


@ReverseSequence.kernel(host_memory=("seq_lengths",))
async def _reverse_sequence(ctx, x, lengths):
    xp = ctx.xp
    lengths = np.asarray(lengths)
    seq_dim, batch_dim = ctx.attrs["seq_dim"], ctx.attrs["batch_dim"]
    if seq_dim == batch_dim:
        raise errors.InvalidArgumentError(None, None, f"batch_dim == seq_dim == {seq_dim}")
    if not (0 <= batch_dim < x.ndim and 0 <= seq_dim < x.ndim) or seq_dim == batch_dim:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Invalid seq_dim {seq_dim} / batch_dim {batch_dim} for input of rank {x.ndim}",
        )
    if lengths.shape != (x.shape[batch_dim],):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Length of seq_lengths != input.dims({batch_dim}), "
            f"({lengths.shape[0] if lengths.ndim else lengths} vs. {x.shape[batch_dim]})",
        )
    bad = np.flatnonzero((lengths < 0) | (lengths > x.shape[seq_dim]))
    if bad.size:
        b = int(bad[0])
        msg = f"seq_lens({b}) < 0" if lengths[b] < 0 else f"seq_lens({b}) > input.dims({seq_dim})"
        raise errors.InvalidArgumentError(None, None, msg)
    # One gather along seq_dim: position t of row b reads L_b - 1 - t when t < L_b.
    t = np.arange(x.shape[seq_dim])
    src = np.where(t[None, :] < lengths[:, None], lengths[:, None] - 1 - t[None, :], t[None, :])
    shape = [1] * x.ndim
    shape[batch_dim], shape[seq_dim] = src.shape
    if batch_dim > seq_dim:
        src = src.T
    return xp.take_along_axis(x, xp.asarray(src.reshape(shape)), axis=seq_dim)


@ReverseSequence.gradient
def _reverse_sequence_grad(op, grad):
    return [
        reverse_sequence(grad, op.inputs[1], op._attr("seq_dim"), op._attr("batch_dim")),
        None,
    ]


def reverse_sequence(
    input,
    seq_lengths,
    seq_axis=None,
    batch_axis=None,
    name=None,  # noqa: A002
    seq_dim=None,
    batch_dim=None,
):
    """Reverse the first `seq_lengths[b]` entries along `seq_axis` of each slice `b` along
    `batch_axis`; the rest stay in place.

    Raises:
      InvalidArgumentError (at run time): a length below 0 or beyond the sequence.
    """
    seq_axis = seq_dim if seq_axis is None else seq_axis
    batch_axis = (batch_dim if batch_dim is not None else 0) if batch_axis is None else batch_axis
    if seq_axis is None:
        raise ValueError("reverse_sequence needs seq_axis")
    x = ops.convert_to_tensor(input, name="input")
    rank = x.shape.ndims
    if rank is not None:  # a negative axis counts from the end; too large is refused
        seq_axis = seq_axis + rank if seq_axis < 0 else seq_axis
        batch_axis = batch_axis + rank if batch_axis < 0 else batch_axis
    return ops.apply_op(
        "ReverseSequence",
        [x, seq_lengths],
        {"seq_dim": int(seq_axis), "batch_dim": int(batch_axis)},
        name=name,
    ).outputs[0]


def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool, name=None):
    """`mask[i, ..., j] = j < lengths[i, ...]` over a last axis of `maxlen` (default
    max(lengths))."""
    with ops.name_scope(name, "SequenceMask", [lengths, maxlen]):
        lengths = ops.convert_to_tensor(lengths)
        if maxlen is None:
            maxlen = reduction_ops.reduce_max(lengths, name="maxlen")
        maxlen = ops.convert_to_tensor(maxlen, dtype=lengths.dtype)
        row = reduction_ops.range(
            array_ops.constant(0, lengths.dtype), maxlen, array_ops.constant(1, lengths.dtype)
        )
        mask = math_ops.less(row, array_ops.expand_dims(lengths, -1))
        if dtypes.as_dtype(dtype) == dtypes.bool:
            return mask
        return cast_ops.cast(mask, dtype)
