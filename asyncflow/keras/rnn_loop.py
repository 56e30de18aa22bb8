"""The time loop behind Keras' recurrent layers (Keras' `backend.rnn`).

`run(step, inputs, states, ...)` runs `step(x_t, states) -> (output, new_states)` over
the time axis (axis 1) of batch-major inputs: unrolled in Python when the number of
steps is known, else in a `while_loop` over TensorArrays.  With a (batch, time) boolean
mask, a masked step keeps the previous states and repeats the previous output (zeros
before the first unmasked step), or outputs zeros when `zero_output_for_mask` is set
(Bidirectional's sequences), as Keras does.  `go_backwards` walks the steps (and the
mask) from the last to the first; the sequence of outputs is in the order walked.
"""

from __future__ import annotations

from asyncflow import dtypes, math_composites, tensor_shape
from asyncflow.ops import array_ops, cast_ops, slicing_ops
from asyncflow.ops.control_flow_ops import while_loop
from asyncflow.ops.tensor_array_ops import TensorArray

__all__ = ["run"]


def _select(mask_t, new, old):
    # mask_t: (batch, 1) bool, broadcast against (batch, units) values.
    return math_composites.where_v2(mask_t, new, old)


def _masked_step(step, x_t, mask_t, states, prev_output, zero_output):
    output, new_states = step(x_t, states)
    if mask_t is None:
        return output, list(new_states)
    fallback = array_ops.zeros_like(output) if zero_output else prev_output
    if fallback is None:
        fallback = array_ops.zeros_like(output)
    output = _select(mask_t, output, fallback)
    new_states = [_select(mask_t, n, s) for n, s in zip(new_states, states, strict=True)]
    return output, new_states


def run(step, inputs, states, mask=None, go_backwards=False, zero_output_for_mask=False,
        return_all_outputs=True, unroll=False):  # fmt: skip
    """(last output, outputs (batch, time, ...) or None, final states).

    Known steps are always unrolled here; `unroll` asks for the results of Keras'
    unrolled loop where they differ from its while_loop's: with zero_output_for_mask,
    that loop repeats the previous output at masked steps and zeroes the outputs at the
    end by the mask in input order, even when the steps ran backwards.

    Raises:
      ValueError: inputs of rank below 3.
    """
    if inputs.shape.ndims is not None and inputs.shape.ndims < 3:
        raise ValueError("Input should be at least 3D.")
    if mask is not None:
        if mask.dtype != dtypes.bool:
            mask = cast_ops.cast(mask, dtypes.bool)
        mask = array_ops.expand_dims(mask, -1)
    steps = tensor_shape.dimension_value(inputs.shape[1])
    if steps is not None:
        if unroll and zero_output_for_mask and mask is not None and return_all_outputs:
            return _unrolled_zeroed_late(step, inputs, list(states), mask, steps, go_backwards)
        return _unrolled(step, inputs, list(states), mask, steps, go_backwards,
                         zero_output_for_mask, return_all_outputs)  # fmt: skip
    return _looped(step, inputs, list(states), mask, go_backwards, zero_output_for_mask)


def _unrolled(step, inputs, states, mask, steps, go_backwards, zero_output, return_all):
    # One Unpack of the inputs (and mask) gives every step, as Keras' unrolled loop does.
    xs = slicing_ops.unstack(inputs, num=steps, axis=1)
    ms = [None] * steps if mask is None else slicing_ops.unstack(mask, num=steps, axis=1)
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    outputs, output = [], None
    for t in order:
        output, states = _masked_step(step, xs[t], ms[t], states, output, zero_output)
        outputs.append(output)
    sequence = array_ops.stack(outputs, axis=1) if return_all else None
    return output, sequence, states


def _unrolled_zeroed_late(step, inputs, states, mask, steps, go_backwards):
    last, sequence, states = _unrolled(step, inputs, states, mask, steps, go_backwards,
                                       False, True)  # fmt: skip
    # Keras' unrolled loop: the sequence (in the order walked) is zeroed by the mask in
    # input order; the last output by the mask of the last step walked.
    last_mask = mask[:, 0] if go_backwards else mask[:, steps - 1]
    last = _select(last_mask, last, array_ops.zeros_like(last))
    sequence = _select(mask, sequence, array_ops.zeros_like(sequence))
    return last, sequence, states


def _looped(step, inputs, states, mask, go_backwards, zero_output):
    time_major = array_ops.transpose(inputs, [1, 0] + list(range(2, inputs.shape.ndims)))
    n = array_ops.shape(time_major)[0]
    if go_backwards:
        time_major = slicing_ops.reverse(time_major, [0])
    input_ta = TensorArray(inputs.dtype, size=n, element_shape=time_major.shape[1:])
    input_ta = input_ta.unstack(time_major)
    mask_ta = None
    if mask is not None:
        mask_tm = array_ops.transpose(mask, [1, 0, 2])
        if go_backwards:
            mask_tm = slicing_ops.reverse(mask_tm, [0])
        mask_ta = TensorArray(dtypes.bool, size=n, element_shape=mask_tm.shape[1:])
        mask_ta = mask_ta.unstack(mask_tm)
    # Step 0 runs outside the loop, as Keras' does: it gives the output's shape and
    # dtype (and makes whatever the step caches, such as dropout masks, once).
    first, first_states = _masked_step(
        step, input_ta.read(0), None if mask_ta is None else mask_ta.read(0), states, None,
        zero_output,
    )  # fmt: skip
    first.set_shape(first.shape)
    output_ta = TensorArray(first.dtype, size=n, element_shape=first.shape)
    output_ta = output_ta.write(0, first)

    def body(t, out_ta, prev, *st):
        x_t = input_ta.read(t)
        x_t.set_shape(time_major.shape[1:])
        mask_t = None if mask_ta is None else mask_ta.read(t)
        output, new_states = _masked_step(step, x_t, mask_t, list(st), prev, zero_output)
        for a, b in zip(new_states, st, strict=True):
            a.set_shape(b.shape)
        output.set_shape(prev.shape)
        return (t + 1, out_ta.write(t, output), output, *new_states)

    time = array_ops.constant(1, dtype=dtypes.int32, name="time")
    result = while_loop(
        lambda t, *_: t < n, body, (time, output_ta, first, *first_states),
        maximum_iterations=n,
    )  # fmt: skip
    out_ta, last, final_states = result[1], result[2], list(result[3:])
    outputs = array_ops.transpose(out_ta.stack(), [1, 0] + list(range(2, first.shape.ndims + 1)))
    return last, outputs, final_states
