"""TF1's `tf.nn.raw_rnn` (an RNN whose every step's input, output and stopping are
decided by a `loop_fn`, run as one while loop) and `tf.nn.static_state_saving_rnn` (a
static RNN whose state comes from and goes back to a state saver), as TF's rnn.py
builds them.
"""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.ops import array_ops, manip_ops, math_ops, reduction_ops
from asyncflow.ops.control_flow_contexts import while_loop
from asyncflow.ops.slicing_ops import where
from asyncflow.ops.tensor_array_ops import TensorArray
from asyncflow.rnn import static_rnn

__all__ = ["raw_rnn", "static_state_saving_rnn"]


def _shape_of(size):
    """A TensorShape for an emit size given as a shape, a list or a 1-D tensor."""
    if isinstance(size, ops.Tensor):
        value = ops.constant_value(size)
        if value is None:
            return tensor_shape.unknown_shape()
        return tensor_shape.TensorShape(value.tolist())
    return tensor_shape.as_shape(size)


def _batch_and(batch, size):
    """[batch, *size] as a shape vector."""
    if isinstance(size, ops.Tensor):
        return manip_ops.concat([array_ops.reshape(batch, [1]), size], 0)
    size = _shape_of(size).as_list()
    if isinstance(batch, int):
        return [batch, *size]
    return manip_ops.stack([batch, *size])


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """`tf.nn.raw_rnn`: returns (emit_ta, final_state, final_loop_state).

    `loop_fn(time, cell_output, cell_state, loop_state)` returns (finished, next_input,
    next_cell_state, emit_output, next_loop_state); at time 0 (cell_output None) it gives
    the first input, the initial state and (optionally) the emit structure.  A batch
    entry that has finished keeps its state and emits zeros.

    Raises:
      TypeError: loop_fn not callable.
      ValueError / TypeError: structures that disagree (nest's errors).
    """
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    parallel_iterations = parallel_iterations or 32
    with vs.variable_scope(scope or "rnn"):
        time = ops.convert_to_tensor(0, dtypes.int32, name="time")
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time=time, cell_output=None, cell_state=None, loop_state=None
        )
        flat_input = [ops.convert_to_tensor(i) for i in nest.flatten(next_input)]
        next_input = nest.pack_sequence_as(next_input, flat_input)
        loop_state = (
            init_loop_state
            if init_loop_state is not None
            else (ops.convert_to_tensor(0, dtypes.int32))
        )
        static_batch = tensor_shape.Dimension(None)
        for t in flat_input:
            if t.shape.ndims:
                static_batch = static_batch.merge_with(t.shape[0])
        const_batch = static_batch.value
        batch = const_batch if const_batch is not None else array_ops.shape(flat_input[0])[0]
        nest.assert_same_structure(initial_state, cell.state_size)
        state = nest.map_structure(ops.convert_to_tensor, initial_state)
        flat_state = nest.flatten(state)
        if emit_structure is not None:
            flat_emit = [ops.convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            flat_size = [
                e.shape if e.shape.is_fully_defined() else array_ops.shape(e) for e in flat_emit
            ]
            flat_dtypes = [e.dtype.base_dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            flat_size = nest.flatten(emit_structure)
            flat_dtypes = [flat_state[0].dtype.base_dtype] * len(flat_size)
        flat_ta = [
            TensorArray(
                dtype=dt,
                size=0,
                dynamic_size=True,
                element_shape=tensor_shape.TensorShape([const_batch]).concatenate(_shape_of(s)),
                name=f"rnn_output_{i}",
            )
            for i, (dt, s) in enumerate(zip(flat_dtypes, flat_size))
        ]
        emit_ta = nest.pack_sequence_as(emit_structure, flat_ta)
        zero_emit = nest.pack_sequence_as(
            emit_structure,
            [array_ops.zeros(_batch_and(batch, s), dt) for s, dt in zip(flat_size, flat_dtypes)],
        )

        def condition(unused_time, elements_finished, *_):
            return math_ops.logical_not(reduction_ops.reduce_all(elements_finished))

        def body(time, elements_finished, current_input, emit_ta, state, loop_state):
            output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state)
            nest.assert_same_structure(cell.output_size, output)
            next_time = time + 1
            next_finished, next_input, next_state, emit, next_loop_state = loop_fn(
                next_time, output, cell_state, loop_state
            )
            nest.assert_same_structure(state, next_state)
            nest.assert_same_structure(current_input, next_input)
            nest.assert_same_structure(emit_ta, emit)
            loop_state = loop_state if next_loop_state is None else next_loop_state

            def copy_through(current, candidate):
                def one(cur, cand):
                    if isinstance(cur, TensorArray) or cur.shape.ndims == 0:
                        return cand
                    return where(elements_finished, cur, cand)

                return nest.map_structure(one, current, candidate)

            emit = copy_through(zero_emit, emit)
            next_state = copy_through(state, next_state)
            emit_ta = nest.map_structure(lambda ta, e: ta.write(time, e), emit_ta, emit)
            elements_finished = math_ops.logical_or(elements_finished, next_finished)
            return next_time, elements_finished, next_input, emit_ta, next_state, loop_state

        returned = while_loop(
            condition,
            body,
            loop_vars=[time, finished, next_input, emit_ta, state, loop_state],
            parallel_iterations=parallel_iterations,
            swap_memory=swap_memory,
        )
        emit_ta, final_state, final_loop_state = returned[-3:]
        if init_loop_state is None:
            final_loop_state = None
        return emit_ta, final_state, final_loop_state


def static_state_saving_rnn(
    cell, inputs, state_saver, state_name, sequence_length=None, scope=None
):
    """`tf.nn.static_state_saving_rnn`: static_rnn starting from
    `state_saver.state(name)` whose final state is saved with
    `state_saver.save_state(name, state)` before the last output and the state are
    returned (they depend on the saves).

    Raises:
      ValueError: state_name not of cell.state_size's structure.
    """
    state_size = cell.state_size
    state_is_tuple = nest.is_nested(state_size)
    if state_is_tuple != nest.is_nested(state_name):
        raise ValueError(
            "state_name should be the same type as cell.state_size.  "
            f"state_name: {state_name!s}, cell.state_size: {state_size!s}"
        )
    if state_is_tuple:
        names = nest.flatten(state_name)
        sizes = nest.flatten(state_size)
        if len(names) != len(sizes):
            raise ValueError(
                f"#elems(state_name) != #elems(state_size): {len(names)} vs. {len(sizes)}"
            )
        initial_state = nest.pack_sequence_as(state_size, [state_saver.state(n) for n in names])
    else:
        initial_state = state_saver.state(state_name)
    outputs, state = static_rnn(
        cell, inputs, initial_state=initial_state, sequence_length=sequence_length, scope=scope
    )
    if state_is_tuple:
        flat_state = nest.flatten(state)
        saves = [
            state_saver.save_state(n, s) for n, s in zip(nest.flatten(state_name), flat_state)
        ]
    else:
        saves = [state_saver.save_state(state_name, state)]
    with ops.control_dependencies(saves):
        last = outputs[-1]
        outputs[-1] = nest.pack_sequence_as(
            last, [array_ops.identity(o) for o in nest.flatten(last)]
        )
        if state_is_tuple:
            state = nest.pack_sequence_as(state, [array_ops.identity(s) for s in flat_state])
        else:
            state = array_ops.identity(state)
    return outputs, state
