"""Keras' recurrent layers as TF1 graph-mode Keras has them: SimpleRNN, LSTM and GRU
(the v1 LSTM/GRU: recurrent activation 'hard_sigmoid', implementation 1, GRU with
reset_after=False), their cells, and the generic `RNN` wrapper.

A layer owns one cell (named "simple_rnn_cell", "lstm_cell", "gru_cell") whose weights
are made under the layer's and cell's name scopes ("lstm/lstm_cell/kernel:0"); kernel
glorot_uniform, recurrent kernel orthogonal, LSTM's bias with ones for the forget gate.
The time loop is unrolled over the input's static number of steps, step by step the
same computation as TF's while loop.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest, tensor_shape
from asyncflow.keras import activations, backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops

__all__ = [
    "SimpleRNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
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
        if dropout or recurrent_dropout:
            raise NotImplementedError(
                "dropout/recurrent_dropout in Keras recurrent cells are not supported"
            )
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
        self.dropout, self.recurrent_dropout = dropout, recurrent_dropout

    _gates = 1

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
                "bias", shape=(n,), initializer=bias_initializer or self.bias_initializer,
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

    def _bias_part(self, k):
        cache = getattr(self, "_slices", None)
        if cache is not None and ("bias", k) in cache:
            return cache[("bias", k)]
        part = self.bias[k * self.units : (k + 1) * self.units]
        if cache is not None:
            cache[("bias", k)] = part
        return part

    def _input_part(self, inputs, k):
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
        h = backend.dot(inputs, self.kernel)
        if self.use_bias:
            h = _bias_add(h, self.bias)
        out = self.activation(h + backend.dot(states[0], self.recurrent_kernel))
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
        rk = self.recurrent_kernel
        i = self.recurrent_activation(x_i + backend.dot(h_tm1, self._part(rk, 0)))
        f = self.recurrent_activation(x_f + backend.dot(h_tm1, self._part(rk, 1)))
        c = f * c_tm1 + i * self.activation(x_c + backend.dot(h_tm1, self._part(rk, 2)))
        o = self.recurrent_activation(x_o + backend.dot(h_tm1, self._part(rk, 3)))
        h = o * self.activation(c)
        return h, [h, c]


class GRUCell(_Cell):
    """Gates z, r, h (in that order); reset_after=False: the reset gate scales the
    previous state before its matmul."""

    _gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="hard_sigmoid",
                 implementation=1, reset_after=False, **kwargs):  # fmt: skip
        if reset_after:
            raise NotImplementedError("GRU(reset_after=True) is not supported")
        super().__init__(units, activation=activation,
                         recurrent_activation=recurrent_activation, **kwargs)  # fmt: skip
        self.implementation, self.reset_after = implementation, reset_after
        self.state_size = self.units

    def call(self, inputs, states):
        h_tm1 = states[0]
        x_z, x_r, x_h = (self._input_part(inputs, k) for k in range(3))
        rk = self.recurrent_kernel
        z = self.recurrent_activation(x_z + backend.dot(h_tm1, self._part(rk, 0)))
        r = self.recurrent_activation(x_r + backend.dot(h_tm1, self._part(rk, 1)))
        hh = self.activation(x_h + backend.dot(r * h_tm1, self._part(rk, 2)))
        h = z * h_tm1 + (1 - z) * hh
        return h, [h]


class RNN(Layer):
    """Runs `cell` over the time axis (axis 1) of (batch, time, features) inputs.

    Raises:
      ValueError: (at the first call) inputs not of rank 3 or with an unknown number of
        time steps.
    """

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, time_major=False, **kwargs):  # fmt: skip
        if stateful or time_major:
            raise NotImplementedError("stateful and time_major RNNs are not supported")
        super().__init__(**kwargs)
        self.cell = cell
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards, self.unroll = go_backwards, unroll

    def _sublayers(self) -> list:
        return [self.cell]

    @property
    def trainable_weights(self) -> list:
        return self.cell.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return self.cell.non_trainable_weights if self.trainable else self.cell.weights

    def build(self, input_shape) -> None:
        input_shape = tensor_shape.TensorShape(input_shape)
        if input_shape.ndims != 3:
            raise ValueError(
                f"Input 0 of layer {self.name} is incompatible with the layer: expected "
                f"ndim=3, found ndim={input_shape.ndims}. Full shape received: "
                f"{tuple(input_shape.as_list()) if input_shape.ndims else None}"
            )
        if not self.cell.built:
            with ops.name_scope(self.cell.name):
                self.cell.build(input_shape[:1].concatenate(input_shape[2:]))
            self.cell.built = True
        self.built = True

    def _initial_state(self, inputs):
        # (stacked cells have nested sizes; their states travel flat)
        sizes = nest.flatten(self.cell.state_size)
        batch = array_ops.shape(inputs)[0]
        return [array_ops.zeros(array_ops.stack([batch, size]), dtype=inputs.dtype)
                for size in sizes]  # fmt: skip

    def call(self, inputs, initial_state=None, training=None, mask=None):
        steps = tensor_shape.dimension_value(inputs.shape[1])
        if steps is None:
            raise ValueError(
                f"Layer {self.name} needs a known number of time steps (got input shape "
                f"{inputs.shape}); asyncflow unrolls Keras' recurrent loop."
            )
        states = list(initial_state) if initial_state is not None else \
            self._initial_state(inputs)  # fmt: skip
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        outputs = []
        # The unrolled steps share one read and slice of each weight (TF's loop body
        # reads them once too), which keeps the graph and its gradient small.
        self.cell._slices = {}
        try:
            for t in order:
                out, states = self.cell.call(inputs[:, t], states)
                # a user cell may return its one new state bare
                states = list(states) if isinstance(states, (list, tuple)) else [states]
                outputs.append(out)
        finally:
            self.cell._slices = None
        if self.return_sequences:
            result = array_ops.stack(outputs, axis=1)
        else:
            result = outputs[-1]
        if self.return_state:
            return [result] + list(states)
        return result


def _rnn_layer(cls_name, cell_cls, cell_name, doc):
    def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, **kwargs):  # fmt: skip
        layer_kwargs = {k: kwargs.pop(k) for k in list(kwargs)
                        if k in ("name", "input_shape", "batch_input_shape", "batch_size",
                                 "input_dim", "trainable", "weights", "dtype",
                                 "activity_regularizer")}  # fmt: skip
        # (kept so that Bidirectional can make a forward and a backward copy)
        self._config = dict(units=units, return_sequences=return_sequences,
                            return_state=return_state, go_backwards=go_backwards,
                            stateful=stateful, unroll=unroll, **kwargs)  # fmt: skip
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


class Bidirectional(Layer):
    """Runs a copy of a recurrent layer forwards ("forward_<name>") and one backwards
    ("backward_<name>", its sequence output re-reversed in time) and merges their
    outputs: merge_mode 'concat' (default), 'sum', 'ave', 'mul' or None (a list).

    Raises:
      ValueError: an unknown merge_mode, or a layer that is not SimpleRNN/LSTM/GRU.
    """

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        if merge_mode not in ("sum", "mul", "ave", "concat", None):
            raise ValueError(
                f"Invalid merge mode. Received: {merge_mode}. Merge mode should be one of "
                '{"sum", "mul", "ave", "concat", None}'
            )
        if not hasattr(layer, "_config"):
            raise ValueError(f"Bidirectional needs a SimpleRNN, LSTM or GRU layer; got {layer}")
        super().__init__(**kwargs)
        config = dict(layer._config)
        self.forward_layer = type(layer)(**{**config, "name": "forward_" + layer.name})
        if backward_layer is None:
            backward = {**config, "go_backwards": not config["go_backwards"]}
            backward_layer = type(layer)(**{**backward, "name": "backward_" + layer.name})
        self.backward_layer = backward_layer
        self.merge_mode = merge_mode
        self.return_sequences = config["return_sequences"]
        self.return_state = config["return_state"]

    def call(self, inputs, training=None):
        y = self.forward_layer(inputs)
        y_rev = self.backward_layer(inputs)
        states = []
        if self.return_state:
            y, states = y[0], y[1:] + y_rev[1:]
            y_rev = y_rev[0]
        if self.return_sequences:
            y_rev = array_ops.reverse(y_rev, [1])
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
