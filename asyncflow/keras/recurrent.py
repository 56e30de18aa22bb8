"""Keras' recurrent layers as TF1 graph-mode Keras has them: SimpleRNN, LSTM and GRU
(the v1 LSTM/GRU: recurrent activation 'hard_sigmoid', implementation 1, GRU with
reset_after=False), their cells, StackedRNNCells, the generic `RNN` wrapper and
Bidirectional.

A layer owns one cell (named "simple_rnn_cell", "lstm_cell", "gru_cell") whose weights
are made under the layer's and cell's name scopes ("lstm/lstm_cell/kernel:0"); kernel
glorot_uniform, recurrent kernel orthogonal, LSTM's bias with ones for the forget gate.
The time loop is rnn_loop.run: unrolled over a static number of steps, a while_loop
otherwise, step by step the same computation as TF's; a mask keeps the state through
masked steps.  A cell's dropout masks are drawn once per layer call and shared by all
steps.  A stateful layer keeps its final states in variables (`states`) that the next
call starts from; its assignments are the layer's updates (run by predict and evaluate
too, as Keras' state_updates).
"""

from __future__ import annotations

import inspect

import numpy as np

from asyncflow import graph as ops
from asyncflow import nest, tensor_shape
from asyncflow.keras import activations, backend, rnn_loop
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import Layer, keras_history
from asyncflow.ops import array_ops, nn_impl

__all__ = [
    "SimpleRNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
    "StackedRNNCells",
    "SimpleRNN",
    "LSTM",
    "GRU",
    "Bidirectional",
]


def _get_regularizer(value):
    from asyncflow.keras import regularizers

    return regularizers.get(value)


class _Cell(Layer):
    """Shared cell set-up: activations, initializers, regularizers, constraints."""

    def __init__(self, units, activation="tanh", recurrent_activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.units = int(units)
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias = use_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.recurrent_initializer = _init.get(recurrent_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _get_regularizer(kernel_regularizer)
        self.recurrent_regularizer = _get_regularizer(recurrent_regularizer)
        self.bias_regularizer = _get_regularizer(bias_regularizer)
        self.kernel_constraint = kernel_constraint
        self.recurrent_constraint = recurrent_constraint
        self.bias_constraint = bias_constraint
        self.dropout = min(1.0, max(0.0, dropout))
        self.recurrent_dropout = min(1.0, max(0.0, recurrent_dropout))
        self._dp_masks = self._rec_dp_masks = None

    _gates = 1

    def _begin_call(self, step_input, states, training=None, cache=True) -> None:
        """Before a layer's time loop: share weight slices across unrolled steps (when
        `cache`) and draw the call's dropout masks."""
        self._slices = {} if cache else None
        self.make_dropout_masks(step_input, states[0], training)

    def _end_call(self) -> None:
        self._slices = None
        self._dp_masks = self._rec_dp_masks = None

    def make_dropout_masks(self, step_input, h, training=None) -> None:
        """Draw this call's dropout masks (one per gate, shared by every time step, as
        Keras draws them): ones in inference, dropped-out ones in training."""

        def make(ones, rate):
            if not rate:
                return None

            def dropped():
                # No op seed, as Keras' cells draw theirs: the graph seed decides.
                return nn_impl.dropout(ones, rate=rate)

            return [backend.in_train_phase(dropped, ones, training=training)
                    for _ in range(self._gates)]  # fmt: skip

        self._dp_masks = make(array_ops.ones_like(step_input), self.dropout)
        self._rec_dp_masks = make(array_ops.ones_like(h), self.recurrent_dropout)

    def _bias_shape(self, n) -> tuple:
        return (n,)

    def _dropped(self, x, masks, k):
        if masks is None:
            return x
        # Implementation 2 (fused gates) drops one mask on all gates, as Keras' does.
        return x * masks[0 if getattr(self, "implementation", 1) == 2 else k]

    def _build_weights(self, input_dim, bias_initializer=None) -> None:
        n = self._gates * self.units
        self.kernel = self.add_weight(
            "kernel", shape=(input_dim, n), initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
        )  # fmt: skip
        self.recurrent_kernel = self.add_weight(
            "recurrent_kernel", shape=(self.units, n), initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer, constraint=self.recurrent_constraint,
        )  # fmt: skip
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=self._bias_shape(n),
                initializer=bias_initializer or self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def build(self, input_shape) -> None:
        self._build_weights(tensor_shape.dimension_value(input_shape[-1]))

    def _part(self, weight, k):
        key = (id(weight), k)
        cache = getattr(self, "_slices", None)
        if cache is not None and key in cache:
            return cache[key]
        part = weight[:, k * self.units : (k + 1) * self.units]
        if cache is not None:
            cache[key] = part
        return part

    def _bias_part(self, k, row=0):
        # A 2-D bias (GRU with reset_after) holds the input bias in row 0, the
        # recurrent bias in row 1.
        cache = getattr(self, "_slices", None)
        if cache is not None and ("bias", k, row) in cache:
            return cache[("bias", k, row)]
        cols = slice(k * self.units, (k + 1) * self.units)
        part = self.bias[row, cols] if self.bias.shape.ndims == 2 else self.bias[cols]
        if cache is not None:
            cache[("bias", k, row)] = part
        return part

    def _input_part(self, inputs, k):
        inputs = self._dropped(inputs, self._dp_masks, k)
        out = backend.dot(inputs, self._part(self.kernel, k))
        if self.use_bias:
            out = _bias_add(out, self._bias_part(k))
        return out


def _bias_add(x, b):
    from asyncflow.ops import nn_ops

    return nn_ops.bias_add(x, b)


class SimpleRNNCell(_Cell):
    """h = activation(x @ kernel + bias + h_prev @ recurrent_kernel)."""

    def __init__(self, units, activation="tanh", **kwargs):
        super().__init__(units, activation=activation, **kwargs)
        self.state_size = self.units

    def call(self, inputs, states):
        h = backend.dot(self._dropped(inputs, self._dp_masks, 0), self.kernel)
        if self.use_bias:
            h = _bias_add(h, self.bias)
        prev = self._dropped(states[0], self._rec_dp_masks, 0)
        out = self.activation(h + backend.dot(prev, self.recurrent_kernel))
        return out, [out]


class LSTMCell(_Cell):
    """Gates i, f, c, o (in that order along the weights' last axis); implementation 1:
    one matmul per gate."""

    _gates = 4

    def __init__(self, units, activation="tanh", recurrent_activation="hard_sigmoid",
                 unit_forget_bias=True, implementation=1, **kwargs):  # fmt: skip
        super().__init__(units, activation=activation,
                         recurrent_activation=recurrent_activation, **kwargs)  # fmt: skip
        self.unit_forget_bias, self.implementation = unit_forget_bias, implementation
        if self.recurrent_dropout and implementation != 1:
            self.implementation = 1  # Keras runs recurrent dropout with implementation 1
        self.state_size = [self.units, self.units]

    def build(self, input_shape) -> None:
        bias_init = None
        if self.unit_forget_bias:
            units, base = self.units, self.bias_initializer

            def bias_init(shape, dtype=None, partition_info=None):
                return array_ops.concat(
                    [base((units,), dtype=dtype), _init.Ones()((units,), dtype=dtype),
                     base((units * 2,), dtype=dtype)], 0,
                )  # fmt: skip

        self._build_weights(tensor_shape.dimension_value(input_shape[-1]), bias_init)

    def call(self, inputs, states):
        h_tm1, c_tm1 = states
        x_i, x_f, x_c, x_o = (self._input_part(inputs, k) for k in range(4))
        rk, rec = self.recurrent_kernel, self._rec_dp_masks
        h_i, h_f, h_c, h_o = (self._dropped(h_tm1, rec, k) for k in range(4))
        i = self.recurrent_activation(x_i + backend.dot(h_i, self._part(rk, 0)))
        f = self.recurrent_activation(x_f + backend.dot(h_f, self._part(rk, 1)))
        c = f * c_tm1 + i * self.activation(x_c + backend.dot(h_c, self._part(rk, 2)))
        o = self.recurrent_activation(x_o + backend.dot(h_o, self._part(rk, 3)))
        h = o * self.activation(c)
        return h, [h, c]


class GRUCell(_Cell):
    """Gates z, r, h (in that order).  reset_after=False: the reset gate scales the
    previous state before its matmul; reset_after=True: it scales the matmul's result,
    and the bias is (2, 3 * units): input bias, then recurrent bias."""

    _gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="hard_sigmoid",
                 implementation=1, reset_after=False, **kwargs):  # fmt: skip
        super().__init__(units, activation=activation,
                         recurrent_activation=recurrent_activation, **kwargs)  # fmt: skip
        self.implementation, self.reset_after = implementation, reset_after
        if self.recurrent_dropout and implementation != 1:
            self.implementation = 1  # Keras runs recurrent dropout with implementation 1
        self.state_size = self.units

    def call(self, inputs, states):
        h_tm1 = states[0]
        x_z, x_r, x_h = (self._input_part(inputs, k) for k in range(3))
        rk, rec = self.recurrent_kernel, self._rec_dp_masks
        h_z, h_r, h_h = (self._dropped(h_tm1, rec, k) for k in range(3))
        if self.reset_after:
            parts = enumerate((h_z, h_r, h_h))
            rec_z, rec_r, rec_h = (self._recurrent_part(h, k) for k, h in parts)
            z = self.recurrent_activation(x_z + rec_z)
            r = self.recurrent_activation(x_r + rec_r)
            hh = self.activation(x_h + r * rec_h)
        else:
            z = self.recurrent_activation(x_z + backend.dot(h_z, self._part(rk, 0)))
            r = self.recurrent_activation(x_r + backend.dot(h_r, self._part(rk, 1)))
            hh = self.activation(x_h + backend.dot(r * h_h, self._part(rk, 2)))
        h = z * h_tm1 + (1 - z) * hh
        return h, [h]

    def _bias_shape(self, n) -> tuple:
        return (2, n) if self.reset_after else (n,)

    def _recurrent_part(self, h, k):
        out = backend.dot(h, self._part(self.recurrent_kernel, k))
        if self.use_bias:
            out = _bias_add(out, self._bias_part(k, row=1))
        return out


class StackedRNNCells(Layer):
    """Cells run one above the other at each step: each cell's output is the next one's
    input; the states are every cell's states in order, the output the last cell's.
    An RNN's constants reach the cells whose call takes them.  Weights are made under
    "stacked_rnn_cells/<cell name>/"."""

    def __init__(self, cells, **kwargs):
        super().__init__(**kwargs)
        self.cells = list(cells)

    def _sizes(self, cell) -> list:
        return nest.flatten(cell.state_size)

    @property
    def state_size(self) -> tuple:
        # TF's: one entry per cell, as the cell gives it ((3, [2, 2]) for a SimpleRNN
        # and an LSTM cell); RNN runs the states flat, in cell order
        return tuple(cell.state_size for cell in self.cells)

    def _config_dtype(self):
        # As TF's: `RNN` builds the stack but never calls it, so its dtype stays unset.
        return self._dtype

    @property
    def output_size(self):
        last = self.cells[-1]
        return getattr(last, "output_size", self._sizes(last)[0])

    def build(self, input_shape) -> None:
        shape = tensor_shape.TensorShape(input_shape)
        for cell in self.cells:
            if not cell.built:
                with ops.name_scope(cell.name):
                    cell.build(shape)
                cell.built = True
            width = getattr(cell, "output_size", self._sizes(cell)[0])
            shape = shape[:-1].concatenate([width])
        self.built = True

    def _split(self, states) -> list:
        out, i = [], 0
        for cell in self.cells:
            n = len(self._sizes(cell))
            out.append(list(states[i : i + n]))
            i += n
        return out

    def _begin_call(self, step_input, states, training=None, cache=True) -> None:
        # A cell above the first draws its input dropout mask against the output of the
        # cell below, whose shape is that cell's first state's.
        below = step_input
        for cell, st in zip(self.cells, self._split(states), strict=True):
            if hasattr(cell, "_begin_call"):
                cell._begin_call(below, st, training, cache)
            below = st[0]

    def _end_call(self) -> None:
        for cell in self.cells:
            if hasattr(cell, "_end_call"):
                cell._end_call()

    def call(self, inputs, states, constants=None):
        # As Keras: an RNN's constants reach the cells whose call takes them (the
        # others run without, no error).
        new_states = []
        for cell, st in zip(self.cells, self._split(states), strict=True):
            if constants is not None and _takes_constants(cell):
                inputs, new = cell.call(inputs, st, constants=constants)
            else:
                inputs, new = cell.call(inputs, st)
            new_states += list(new) if isinstance(new, (list, tuple)) else [new]
        return inputs, new_states


def _takes_constants(cell) -> bool:
    return "constants" in inspect.signature(cell.call).parameters


def _listed(value) -> list:
    """A call's initial_state or constants as a list ([] for None)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class RNN(Layer):
    """Runs `cell` over the time axis (axis 1) of (batch, time, features) inputs; with a
    mask, masked steps keep the previous state (rnn_loop).  `stateful=True` keeps the
    final states of each batch in variables as the next batch's initial states, until
    `reset_states()`.  `constants` given to a call reach the cell's call at every step
    (`cell.call(inputs, states, constants=...)`).

    Raises:
      ValueError: (at the first call) inputs not of rank 3, `unroll` with an unknown
        number of time steps, `stateful` without a known batch size, or constants for a
        cell whose call does not take them.
    """

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, time_major=False, **kwargs):  # fmt: skip
        zero_output_for_mask = kwargs.pop("zero_output_for_mask", False)
        # (a config's key, as Keras' from_config reads it: set by a call with constants)
        self._num_constants = kwargs.pop("num_constants", None) or 0
        super().__init__(**kwargs)
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        self.cell = cell
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards, self.unroll = go_backwards, unroll
        self.stateful, self.time_major = stateful, time_major
        self.zero_output_for_mask = zero_output_for_mask
        self.supports_masking = True
        self._states = None

    @property
    def states(self) -> list:
        """A stateful layer's state variables; [None] per state otherwise."""
        if self._states is None:
            return [None] * len(self._state_sizes())
        return self._states

    @states.setter
    def states(self, value) -> None:
        self._states = value

    def _sublayers(self) -> list:
        return [self.cell]

    @property
    def trainable_weights(self) -> list:
        return self.cell.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return self.cell.non_trainable_weights if self.trainable else self.cell.weights

    def _state_sizes(self) -> list:
        return nest.flatten(self.cell.state_size)  # (stacked cells' sizes nest)

    def __call__(self, inputs, initial_state=None, constants=None, **kwargs):
        # Initial states and constants that are Keras tensors join the inputs
        # ([inputs, *states, *constants], as Keras writes the call in configs), so the
        # layer graph (and a model's layers and weights) reaches what made them.
        if isinstance(inputs, (list, tuple)) and initial_state is None and constants is None:
            inputs, initial_state, constants = self._split_inputs(inputs)
        states, constants = _listed(initial_state), _listed(constants)
        if constants:
            self._num_constants = len(constants)
        extra = states + constants
        if extra and all(keras_history(t) is not None for t in extra):
            return super().__call__([inputs, *extra], **kwargs)
        if states:
            kwargs["initial_state"] = states
        if constants:
            kwargs["constants"] = constants
        return super().__call__(inputs, **kwargs)

    def _split_inputs(self, inputs):
        """(inputs, initial states or None, constants or None) of a call's input list."""
        inputs = list(inputs)
        constants = None
        if self._num_constants and len(inputs) > self._num_constants:
            constants = inputs[-self._num_constants :]
            inputs = inputs[: -self._num_constants]
        return inputs[0], (inputs[1:] or None), constants

    def build(self, input_shape) -> None:
        if isinstance(input_shape, (list, tuple)) and input_shape and \
                isinstance(input_shape[0], tensor_shape.TensorShape):  # fmt: skip
            input_shape = input_shape[0]
        input_shape = tensor_shape.TensorShape(input_shape)
        if input_shape.ndims != 3:
            raise ValueError(
                f"Input 0 of layer {self.name} is incompatible with the layer: expected "
                f"ndim=3, found ndim={input_shape.ndims}. Full shape received: "
                f"{tuple(input_shape.as_list()) if input_shape.ndims else None}"
            )
        if not self.cell.built:
            with ops.name_scope(self.cell.name):
                step = input_shape[1:2] if self.time_major else input_shape[:1]
                self.cell.build(step.concatenate(input_shape[2:]))
            self.cell.built = True
        if self.stateful:
            self._batch_size = tensor_shape.dimension_value(input_shape[int(self.time_major)])
            self.reset_states()
        self.built = True

    def reset_states(self, states=None) -> None:
        """Set a stateful layer's states to zeros (or to `states`, numpy arrays).

        Raises:
          AttributeError: the layer is not stateful.
          ValueError: an unknown batch size, or states of the wrong number or shape.
        """
        if not self.stateful:
            raise AttributeError("Layer must be stateful.")
        batch = getattr(self, "_batch_size", None)
        if batch is None:
            raise ValueError(
                "If a RNN is stateful, it needs to know its batch size. Specify the batch "
                "size of your input tensors: \n- If using a Sequential model, specify the "
                "batch size by passing a `batch_input_shape` argument to your first layer.\n"
                "- If using the functional API, specify the batch size by passing a "
                "`batch_shape` argument to your Input layer."
            )
        sizes = self._state_sizes()
        if self._states is None:
            self.states = [backend.variable(np.zeros((batch, n), np.float32)) for n in sizes]
            return
        if states is None:
            values = [np.zeros((batch, n), np.float32) for n in sizes]
        else:
            values = [np.asarray(v) for v in (states if isinstance(states, (list, tuple))
                                              else [states])]  # fmt: skip
            if len(values) != len(self.states):
                raise ValueError(
                    f"Layer {self.name} expects {len(self.states)} states, but it received "
                    f"{len(values)} state values. States received: {states}"
                )
            for i, (v, n) in enumerate(zip(values, sizes, strict=True)):
                if v.shape != (batch, n):
                    raise ValueError(
                        f"State {i} is incompatible with layer {self.name}: expected shape="
                        f"{(batch, n)} but found shape={v.shape}"
                    )
        backend.batch_set_value(list(zip(self.states, values, strict=True)))

    def _initial_state(self, inputs):
        if self.stateful:
            return [s.value() for s in self.states]
        batch = array_ops.shape(inputs)[0]
        return [array_ops.zeros(array_ops.stack([batch, size]), dtype=inputs.dtype)
                for size in self._state_sizes()]  # fmt: skip

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, list):
            mask = mask[0]
        output_mask = mask if self.return_sequences else None
        if self.return_state:
            return [output_mask] + [None] * len(self._state_sizes())
        return output_mask

    def call(self, inputs, mask=None, training=None, initial_state=None, constants=None):
        if isinstance(inputs, (list, tuple)):
            inputs, initial_state, constants = self._split_inputs(inputs)
        constants = _listed(constants)
        if constants and not _takes_constants(self.cell):
            raise ValueError(
                f"RNN cell {self.cell} does not support constants. Received: constants={constants}"
            )
        if mask is not None:
            mask = nest.flatten(mask)[0]
        if self.time_major:
            # (time, batch, ...) runs batch-major; a time-major mask is (time, batch).
            inputs = array_ops.transpose(inputs, [1, 0, 2])
            if mask is not None:
                mask = array_ops.transpose(mask, [1, 0])
        steps = tensor_shape.dimension_value(inputs.shape[1])
        if self.unroll and steps is None:
            raise ValueError(
                "Cannot unroll a RNN if the time dimension is undefined. \n- If using a "
                "Sequential model, specify the time dimension by passing an `input_shape` "
                "or `batch_input_shape` argument to your first layer. If your first layer "
                "is an Embedding, you can also use the `input_length` argument.\n- If using "
                "the functional API, specify the time dimension by passing a `shape` or "
                "`batch_shape` argument to your Input layer."
            )
        if initial_state is not None:
            states = list(initial_state) if isinstance(initial_state, (list, tuple)) else \
                [initial_state]  # fmt: skip
        else:
            states = self._initial_state(inputs)
        hooks = hasattr(self.cell, "_begin_call")
        if hooks:
            # The unrolled steps share one read and slice of each weight (TF's loop body
            # reads them once too), which keeps the graph and its gradient small.
            self.cell._begin_call(inputs[:, 0], states, training, cache=steps is not None)

        def step(x_t, st):
            if constants:  # (the same tensors at every step, as Keras passes them)
                out, new = self.cell.call(x_t, st, constants=tuple(constants))
            else:
                out, new = self.cell.call(x_t, st)
            return out, (list(new) if isinstance(new, (list, tuple)) else [new])

        try:
            last, sequence, states = rnn_loop.run(
                step, inputs, states, mask=mask, go_backwards=self.go_backwards,
                zero_output_for_mask=self.zero_output_for_mask,
                return_all_outputs=self.return_sequences, unroll=self.unroll,
            )  # fmt: skip
        finally:
            if hooks:
                self.cell._end_call()
        if self.stateful:
            self.add_update([v.assign(s) for v, s in zip(self.states, states, strict=True)])
        result = sequence if self.return_sequences else last
        if self.return_sequences and self.time_major:
            result = array_ops.transpose(result, [1, 0, 2])
        if self.return_state:
            return [result] + list(states)
        return result


def _rnn_layer(cls_name, cell_cls, cell_name, doc):
    def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, **kwargs):  # fmt: skip
        layer_kwargs = {k: kwargs.pop(k) for k in list(kwargs)
                        if k in ("name", "input_shape", "batch_input_shape", "batch_size",
                                 "input_dim", "trainable", "weights", "dtype",
                                 "activity_regularizer", "time_major",
                                 "zero_output_for_mask")}  # fmt: skip
        # (kept so that Bidirectional can make a forward and a backward copy)
        self._config = dict(units=units, return_sequences=return_sequences,
                            return_state=return_state, go_backwards=go_backwards,
                            stateful=stateful, unroll=unroll, **kwargs)  # fmt: skip
        if layer_kwargs.get("time_major"):
            self._config["time_major"] = True
        cell = cell_cls(units, name=cell_name, **kwargs)
        RNN.__init__(self, cell, return_sequences=return_sequences, return_state=return_state,
                     go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                     **layer_kwargs)  # fmt: skip

    def units(self):
        return self.cell.units

    return type(cls_name, (RNN,), {"__init__": __init__, "__doc__": doc,
                                    "units": property(units)})  # fmt: skip


SimpleRNN = _rnn_layer("SimpleRNN", SimpleRNNCell, "simple_rnn_cell",
                       "A fully-connected RNN (see SimpleRNNCell).")  # fmt: skip
LSTM = _rnn_layer("LSTM", LSTMCell, "lstm_cell", "Keras' v1 LSTM (see LSTMCell).")
GRU = _rnn_layer("GRU", GRUCell, "gru_cell", "Keras' v1 GRU (see GRUCell).")


def _rnn_copy(layer, name, backwards):
    """A new layer like the recurrent `layer`, named `name`, running backwards when
    `backwards` (the other way from `layer`): SimpleRNN/LSTM/GRU from their arguments,
    any other RNN from its config, its cell's class (each stacked cell's) known by name
    (as Keras' Bidirectional makes its copies)."""
    if hasattr(layer, "_config"):
        config = dict(layer._config)
        return type(layer)(**{**config, "name": name,
                              "go_backwards": config["go_backwards"] != backwards})  # fmt: skip
    config = dict(layer.get_config(), name=name, go_backwards=layer.go_backwards != backwards)
    cells = [layer.cell, *getattr(layer.cell, "cells", [])]
    return type(layer).from_config(config, {type(c).__name__: type(c) for c in cells})


class Bidirectional(Layer):
    """Runs a copy of a recurrent layer forwards ("forward_<name>") and one backwards
    ("backward_<name>", its sequence output re-reversed in time) and merges their
    outputs: merge_mode 'concat' (default), 'sum', 'ave', 'mul' or None (a list).
    A call's `initial_state` is the forward layer's states then the backward one's;
    its `constants` reach both layers' cells.

    Raises:
      ValueError: an unknown merge_mode, a layer that is not recurrent (RNN, SimpleRNN,
        LSTM, GRU), at a call an odd number of initial states, Keras tensors mixed with
        others among the states and constants, or constants for a cell that takes none.
    """

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        if merge_mode not in ("sum", "mul", "ave", "concat", None):
            raise ValueError(
                f"Invalid merge mode. Received: {merge_mode}. Merge mode should be one of "
                '{"sum", "mul", "ave", "concat", None}'
            )
        if not isinstance(layer, RNN):
            raise ValueError(f"Bidirectional needs a recurrent layer (an RNN); got {layer}")
        # (a config's key, as Keras' from_config reads it: set by a call with constants)
        self._num_constants = kwargs.pop("num_constants", None) or 0
        super().__init__(**kwargs)
        # (Keras' Wrapper.layer, the layer given; not tracked: its copies hold the weights)
        object.__setattr__(self, "layer", layer)
        self.forward_layer = _rnn_copy(layer, "forward_" + layer.name, backwards=False)
        if backward_layer is None:
            backward_layer = _rnn_copy(layer, "backward_" + layer.name, backwards=True)
        self.backward_layer = backward_layer
        self.merge_mode = merge_mode
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state
        # Masked steps of the returned sequences are zeros, so that the backward
        # sequence, re-reversed, lines up with the forward one.
        for sub in (self.forward_layer, self.backward_layer):
            if getattr(sub, "zero_output_for_mask", None) is not None:
                sub.zero_output_for_mask = sub.return_sequences
        self.supports_masking = True

    def __call__(self, inputs, initial_state=None, constants=None, **kwargs):
        # As Keras: Keras tensors among the states and constants join the inputs
        # ([inputs, *states, *constants], the call written with initial_state=None and
        # constants=None beside them); other tensors stay keyword arguments.
        if isinstance(inputs, (list, tuple)) and initial_state is None and constants is None:
            inputs, initial_state, constants = self._split_inputs(inputs)
        states, constants = _listed(initial_state), _listed(constants)
        if len(states) % 2:
            raise ValueError(
                "When passing `initial_state` to a Bidirectional RNN, the state should be a "
                f"list containing the states of the underlying RNNs. Received: {states}"
            )
        if constants:
            self._num_constants = len(constants)
        extra = states + constants
        keras = {keras_history(t) is not None for t in extra}
        if len(keras) > 1:
            raise ValueError(
                "The initial state of a Bidirectional layer cannot be specified with a mix "
                'of TF-Keras tensors and non-Keras tensors (a "Keras tensor" is a tensor '
                "that was returned by a TF-Keras layer, or by `Input`)"
            )
        if keras == {True}:
            return super().__call__([inputs, *extra], initial_state=None, constants=None, **kwargs)
        if states:
            kwargs["initial_state"] = states
        if constants:
            kwargs["constants"] = constants
        return super().__call__(inputs, **kwargs)

    _split_inputs = RNN._split_inputs  # ([inputs, *states, *constants], as RNN's)

    def build(self, input_shape) -> None:
        """Build the forward and backward layers, each in its name scope (their calls
        then run in "<name>_1", as Keras' graph names them); with initial states or
        constants among the inputs they are built by their first call."""
        nested = isinstance(input_shape, list | tuple) and any(
            isinstance(d, list | tuple | tensor_shape.TensorShape) for d in input_shape
        )
        if input_shape is not None and not nested:
            input_shape = tensor_shape.TensorShape(input_shape)
            for layer in (self.forward_layer, self.backward_layer):
                if not layer.built:
                    with ops.name_scope(layer.name):
                        layer.build(input_shape)
                    layer._build_input_shape = input_shape
                    layer.built = True
        self.built = True

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, list):
            mask = mask[0]
        if self.return_sequences:
            output_mask = mask if self.merge_mode else [mask, mask]
        else:
            output_mask = None if self.merge_mode else [None, None]
        if self.return_state:
            n = len(self.forward_layer._state_sizes())
            head = output_mask if isinstance(output_mask, list) else [output_mask]
            return head + [None] * (2 * n)
        return output_mask

    def call(self, inputs, training=None, mask=None, initial_state=None, constants=None):
        kwargs = {} if mask is None else {"mask": mask}
        if training is not None:
            kwargs["training"] = training
        if isinstance(inputs, (list, tuple)):
            inputs, initial_state, constants = self._split_inputs(inputs)
            if mask is not None:
                kwargs["mask"] = nest.flatten(mask)[0]
        if constants is not None:
            kwargs["constants"] = constants
        half = len(initial_state) // 2 if initial_state else 0
        forward = {"initial_state": initial_state[:half]} if half else {}
        backward = {"initial_state": initial_state[half:]} if half else {}
        y = self.forward_layer(inputs, **kwargs, **forward)
        y_rev = self.backward_layer(inputs, **kwargs, **backward)
        states = []
        if self.return_state:
            y, states = y[0], y[1:] + y_rev[1:]
            y_rev = y_rev[0]
        if self.return_sequences:
            y_rev = array_ops.reverse(y_rev, [0 if self.forward_layer.time_major else 1])
        if self.merge_mode == "concat":
            out = array_ops.concat([y, y_rev], -1)
        elif self.merge_mode == "sum":
            out = y + y_rev
        elif self.merge_mode == "ave":
            out = (y + y_rev) / 2
        elif self.merge_mode == "mul":
            out = y * y_rev
        else:
            out = [y, y_rev]
        if self.return_state:
            return (out if isinstance(out, list) else [out]) + states
        return out
