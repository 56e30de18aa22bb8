"""`dynamic_rnn` and `static_rnn` (TF1's rnn.py).

dynamic_rnn runs the cell in a while_loop over time: inputs are unstacked into a
TensorArray, each iteration reads step t, calls the cell and writes its output; with
`sequence_length`, steps past a sequence's end copy the previous state through and
output zeros (TF's `_rnn_step(skip_conditionals=True)`).  static_rnn unrolls the cell
over a Python list of inputs.  Both open variable scope `scope or "rnn"`.
"""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.ops import array_ops, math_ops, reduction_ops
from asyncflow.ops.control_flow_ops import while_loop
from asyncflow.ops.tensor_array_ops import TensorArray

__all__ = ["dynamic_rnn", "static_rnn"]


def _transpose_batch_time(x):
    x = ops.convert_to_tensor(x)
    ndims = x.shape.ndims
    if ndims is not None and ndims < 2:
        raise ValueError(
            f"Expected input tensor {x} to have rank at least 2, but saw shape: {x.shape}"
        )
    if ndims is None:
        raise ValueError(f"Input {x} must have known rank")
    perm = [1, 0] + list(range(2, ndims))
    out = array_ops.transpose(x, perm)
    s = x.shape.as_list()
    out.set_shape([s[1], s[0]] + s[2:])
    return out


def _best_effort_batch_size(flat_input):
    for x in flat_input:
        if x.shape.ndims is not None and x.shape.ndims >= 2 and x.shape[1].value is not None:
            return x.shape[1].value
    return array_ops.shape(flat_input[0])[1]


def _copy_through(time, sequence_length, flat_zero_output, flat_state, new_output, new_state):
    copy = time >= sequence_length
    outs = [array_ops.where(copy, z, o) for z, o in zip(flat_zero_output, new_output)]
    states = [array_ops.where(copy, s, n) for s, n in zip(flat_state, new_state)]
    for o, z in zip(outs, flat_zero_output):
        o.set_shape(z.shape)
    for s, old in zip(states, flat_state):
        s.set_shape(old.shape)
    return outs, states


def _assert_like_rnncell(name, cell):
    """TypeError (TF's words) unless `cell` looks like an RNNCell."""
    problems = [
        msg
        for ok, msg in (
            (hasattr(cell, "output_size"), "'output_size' property is missing"),
            (hasattr(cell, "state_size"), "'state_size' property is missing"),
            (
                hasattr(cell, "zero_state") or hasattr(cell, "get_initial_state"),
                "either 'zero_state' or 'get_initial_state' method is required",
            ),
            (callable(cell), "is not callable"),
        )
        if not ok
    ]
    if problems:
        raise TypeError(
            f"The argument {name!r} ({cell}) is not an RNNCell: {', '.join(problems)}."
        )


def _assert_has_shape(x, shape):
    from asyncflow.ops.check_ops import Assert

    x_shape = array_ops.shape(x)
    packed = array_ops.stack(shape)
    return Assert(
        reduction_ops.reduce_all(math_ops.equal(x_shape, packed)),
        [f"Expected shape for Tensor {x.name} is ", packed, " but saw shape: ", x_shape],
    )


def _infer_state_dtype(dtype, state):
    if dtype is not None:
        return dtypes.as_dtype(dtype)
    return nest.flatten(state)[0].dtype


def dynamic_rnn(
    cell,
    inputs,
    sequence_length=None,
    initial_state=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """Run `cell` over the time axis of `inputs` in a while_loop.

    Returns (outputs, final_state): outputs [batch, time, output_size] (time-major
    when `time_major`), final_state in the cell's state structure.

    Raises:
      ValueError: no `initial_state` and no `dtype`, a `sequence_length` that is not a
        vector, inputs of rank < 3 or unknown depth.
    """
    _assert_like_rnncell("cell", cell)
    with vs.variable_scope(scope or "rnn"):
        flat_input = [ops.convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        parallel_iterations = parallel_iterations or 32
        if sequence_length is not None:
            sequence_length = math_ops.cast(sequence_length, dtypes.int32)
            if sequence_length.shape.ndims not in (None, 1):
                raise ValueError(
                    "sequence_length must be a vector of length batch_size, but saw shape: "
                    f"{sequence_length.shape}"
                )
            sequence_length = array_ops.identity(sequence_length, name="sequence_length")
        batch_size = _best_effort_batch_size(flat_input)
        if initial_state is not None:
            state = initial_state
        else:
            if not dtype:
                raise ValueError("If there is no initial_state, you must give a dtype.")
            state = cell.zero_state(batch_size, dtype)
        if sequence_length is not None:
            # A fed sequence_length of another length fails here, in TF's words.
            with ops.control_dependencies([_assert_has_shape(sequence_length, [batch_size])]):
                sequence_length = array_ops.identity(sequence_length, name="CheckSeqLen")
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(
            cell, inputs, state, parallel_iterations, swap_memory, sequence_length, dtype
        )
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(
    cell, inputs, state, parallel_iterations, swap_memory, sequence_length, dtype
):
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    time_steps = array_ops.shape(flat_input[0])[0]
    batch_size = _best_effort_batch_size(flat_input)
    got_shapes = [x.shape.with_rank_at_least(3) for x in flat_input]
    const_time, const_batch = got_shapes[0].as_list()[:2]
    for shape in got_shapes:
        if not shape[2:].is_fully_defined():
            raise ValueError(
                "Input size (depth of inputs) must be accessible via shape inference,"
                " but saw value None."
            )
        if shape[0].value != const_time:
            raise ValueError(
                "Time steps is not the same for all the elements in the input in a batch."
            )
        if shape[1].value != const_batch:
            raise ValueError("Batch_size is not the same for all the elements in the input.")
    state_dtype = _infer_state_dtype(dtype, state)

    def zeros(size):
        shape = [batch_size, size]
        if isinstance(batch_size, int):
            return array_ops.zeros(shape, state_dtype)
        return array_ops.zeros(array_ops.stack(shape), state_dtype)

    flat_zero_output = [zeros(s) for s in flat_output_size]
    if sequence_length is not None:
        max_len = reduction_ops.reduce_max(sequence_length)
    else:
        max_len = time_steps
    time = array_ops.constant(0, dtype=dtypes.int32, name="time")
    with ops.name_scope("dynamic_rnn") as base_name:
        pass
    output_ta = tuple(
        TensorArray(
            state_dtype,
            size=time_steps,
            element_shape=tensor_shape.TensorShape([const_batch, s]),
            tensor_array_name=f"{base_name}output_{i}",
        )
        for i, s in enumerate(flat_output_size)
    )
    input_ta = tuple(
        TensorArray(
            x.dtype,
            size=time_steps,
            element_shape=x.shape[1:],
            tensor_array_name=f"{base_name}input_{i}",
        ).unstack(x)
        for i, x in enumerate(flat_input)
    )

    def time_step(t, out_tas, st):
        input_t = [ta.read(t) for ta in input_ta]
        for x, shape in zip(input_t, got_shapes):
            x.set_shape(shape[1:])
        input_t = nest.pack_sequence_as(inputs, input_t)
        output, new_state = cell(input_t, st)
        flat_out = nest.flatten(output)
        if sequence_length is not None:
            flat_out, flat_state = _copy_through(
                t,
                sequence_length,
                flat_zero_output,
                nest.flatten(st),
                flat_out,
                nest.flatten(new_state),
            )
            new_state = nest.pack_sequence_as(st, flat_state)
        out_tas = tuple(ta.write(t, o) for ta, o in zip(out_tas, flat_out))
        return t + 1, out_tas, new_state

    loop_bound = math_ops.minimum(time_steps, math_ops.maximum(1, max_len))
    _, final_tas, final_state = while_loop(
        lambda t, *_: t < loop_bound,
        time_step,
        (time, output_ta, state),
        parallel_iterations=parallel_iterations,
        maximum_iterations=time_steps,
        swap_memory=swap_memory,
    )
    outputs = []
    for ta, size in zip(final_tas, flat_output_size):
        out = ta.stack()
        out.set_shape([const_time, const_batch, size])
        outputs.append(out)
    return nest.pack_sequence_as(cell.output_size, outputs), final_state


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """Unroll `cell` over the list `inputs` (each [batch, depth]).

    Returns (outputs list, final state).

    Raises:
      TypeError: `inputs` is not a list.
      ValueError: empty `inputs`, or no `initial_state` and no `dtype`.
    """
    _assert_like_rnncell("cell", cell)
    if not nest.is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with vs.variable_scope(scope or "rnn") as varscope:
        first = nest.flatten(inputs[0])[0]
        first = ops.convert_to_tensor(first)
        if first.shape.ndims != 1:
            fixed_batch = first.shape.with_rank_at_least(2)[0]
            for x in nest.flatten(inputs):
                shape = ops.convert_to_tensor(x).shape.with_rank_at_least(2)
                fixed_batch.merge_with(shape[0])
                dims = shape[1:].as_list()
                for i, size in enumerate(dims):
                    if size is None:
                        raise ValueError(
                            f"Input size (dimension {i} of inputs) must be accessible via "
                            "shape inference, but saw value None."
                        )
        batch_size = first.shape[0].value
        if batch_size is None:
            batch_size = array_ops.shape(first)[0]
        if initial_state is not None:
            state = initial_state
        else:
            if not dtype:
                raise ValueError("If no initial_state is provided, dtype must be specified")
            state = cell.zero_state(batch_size, dtype)
        if sequence_length is not None:
            sequence_length = ops.convert_to_tensor(sequence_length, name="sequence_length")
            if sequence_length.shape.ndims not in (None, 1):
                raise ValueError("sequence_length must be a vector of length batch_size")
            sequence_length = math_ops.cast(sequence_length, dtypes.int32)
            zero_out = [
                array_ops.zeros([batch_size, s], _infer_state_dtype(dtype, state))
                if isinstance(batch_size, int)
                else array_ops.zeros(
                    array_ops.stack([batch_size, s]), _infer_state_dtype(dtype, state)
                )
                for s in nest.flatten(cell.output_size)
            ]
        for t, x in enumerate(inputs):
            if t > 0:
                # Steps after the first share the first's variables, even a cell's that
                # calls tf.get_variable itself (TF's static_rnn does the same).
                varscope.reuse_variables()
            output, new_state = cell(x, state)
            if sequence_length is not None:
                flat_out, flat_state = _copy_through(
                    t,
                    sequence_length,
                    zero_out,
                    nest.flatten(state),
                    nest.flatten(output),
                    nest.flatten(new_state),
                )
                output = nest.pack_sequence_as(output, flat_out)
                new_state = nest.pack_sequence_as(state, flat_state)
            state = new_state
            outputs.append(output)
        return outputs, state
