"""Bidirectional RNNs (TF1's `tf.nn.static_bidirectional_rnn`,
`tf.nn.bidirectional_dynamic_rnn`): a forward and a backward pass over the same inputs,
under variable scopes `bidirectional_rnn/fw` and `bidirectional_rnn/bw` as TF names
them.  The backward pass reads each sequence reversed within its length (ReverseSequence)
and its outputs are reversed back, so output t of both directions refers to input t."""

from __future__ import annotations

from asyncflow import nest
from asyncflow import var_scope as vs
from asyncflow.ops import manip_ops, sequence_ops, slicing_ops
from asyncflow.rnn import _assert_like_rnncell, dynamic_rnn, static_rnn

__all__ = ["static_bidirectional_rnn", "bidirectional_dynamic_rnn"]


def _reverse_seq(inputs: list, lengths) -> list:
    """The list of [batch, ...] tensors reversed in time (within each row's length)."""
    if lengths is None:
        return list(reversed(inputs))
    flat = [nest.flatten(x) for x in inputs]
    out = [[None] * len(inputs) for _ in flat[0]]
    for k in range(len(flat[0])):
        stacked = manip_ops.stack([f[k] for f in flat])  # [time, batch, ...]
        rev = sequence_ops.reverse_sequence(stacked, lengths, seq_axis=0, batch_axis=1)
        for t, r in enumerate(slicing_ops.unstack(rev, num=len(inputs))):
            r.set_shape(flat[t][k].shape)
            out[k][t] = r
    return [
        nest.pack_sequence_as(inputs[t], [out[k][t] for k in range(len(out))])
        for t in range(len(inputs))
    ]


def static_bidirectional_rnn(
    cell_fw,
    cell_bw,
    inputs,
    initial_state_fw=None,
    initial_state_bw=None,
    dtype=None,
    sequence_length=None,
    scope=None,
):
    """Returns (outputs, output_state_fw, output_state_bw); output t is the forward and
    backward outputs at t concatenated along depth.

    Raises:
      TypeError: `inputs` is not a list; ValueError: empty inputs.
    """
    _assert_like_rnncell("cell_fw", cell_fw)
    _assert_like_rnncell("cell_bw", cell_bw)
    if not nest.is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = static_rnn(
                cell_fw, inputs, initial_state_fw, dtype, sequence_length, scope=fw_scope
            )
        with vs.variable_scope("bw") as bw_scope:
            rev = _reverse_seq(inputs, sequence_length)
            tmp, state_bw = static_rnn(
                cell_bw, rev, initial_state_bw, dtype, sequence_length, scope=bw_scope
            )
    output_bw = _reverse_seq(tmp, sequence_length)
    flat = [
        manip_ops.concat([f, b], 1)
        for f, b in zip(nest.flatten(output_fw), nest.flatten(output_bw))
    ]
    return nest.pack_sequence_as(output_fw, flat), state_fw, state_bw


def bidirectional_dynamic_rnn(
    cell_fw,
    cell_bw,
    inputs,
    sequence_length=None,
    initial_state_fw=None,
    initial_state_bw=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """Returns ((output_fw, output_bw), (output_state_fw, output_state_bw)).

    Raises:
      TypeError: a cell that is not an RNNCell.
    """
    _assert_like_rnncell("cell_fw", cell_fw)
    _assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse(x):
        if sequence_length is None:
            return slicing_ops.reverse(x, [time_axis])
        return sequence_ops.reverse_sequence(
            x, sequence_length, seq_axis=time_axis, batch_axis=batch_axis
        )

    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw,
                inputs,
                sequence_length,
                initial_state_fw,
                dtype,
                parallel_iterations,
                swap_memory,
                time_major,
                scope=fw_scope,
            )
        with vs.variable_scope("bw") as bw_scope:
            tmp, state_bw = dynamic_rnn(
                cell_bw,
                nest.map_structure(reverse, inputs),
                sequence_length,
                initial_state_bw,
                dtype,
                parallel_iterations,
                swap_memory,
                time_major,
                scope=bw_scope,
            )
    output_bw = nest.map_structure(reverse, tmp)
    return (output_fw, output_bw), (state_fw, state_bw)
