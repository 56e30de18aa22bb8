"""`keras.layers.CuDNNGRU` / `CuDNNLSTM`: recurrent layers that run as one CudnnRNNV3
op (ops/cudnn_rnn_ops.py), with TF's weights.

Weights, as TF's: kernel (input, 3u) / (input, 4u) and recurrent_kernel (u, 3u) /
(u, 4u) in Keras' gate order (z, r, h for the GRU; i, f, c, o for the LSTM), and a
double bias (6u) / (8u): the input biases, then the recurrent ones.  The layer slices
them into cuDNN's canonical buffer (GRU gates reordered to r, z, h) each call, as TF's
does.  A graph with these layers builds anywhere; running it needs a GPU (on a CPU the
session raises TF's InvalidArgumentError: no CPU kernel for CudnnRNNV3).
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.keras import constraints as _constraints
from asyncflow.keras import initializers as _init
from asyncflow.keras import regularizers as _regularizers
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops, manip_ops, slicing_ops

__all__ = ["CuDNNGRU", "CuDNNLSTM"]


class _CuDNNRNN(Layer):
    """Shared set-up: flags, weights, the op call; subclasses give the gate order."""

    _gates = 0
    _mode = ""

    def __init__(self, units, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, time_major=False, **kwargs):  # fmt: skip
        if stateful:
            raise NotImplementedError(
                f"{type(self).__name__}(stateful=True) is not supported by asyncflow"
            )
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        self.kernel_initializer = _init.get(kernel_initializer)
        self.recurrent_initializer = _init.get(recurrent_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = _regularizers.get(recurrent_regularizer)
        self.bias_regularizer = _regularizers.get(bias_regularizer)
        self.kernel_constraint = _constraints.get(kernel_constraint)
        self.recurrent_constraint = _constraints.get(recurrent_constraint)
        self.bias_constraint = _constraints.get(bias_constraint)
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards, self.stateful, self.time_major = go_backwards, stateful, time_major
        self.supports_masking = False

    def _bias_initializer(self):
        return self.bias_initializer

    def build(self, input_shape) -> None:
        if isinstance(input_shape, (list, tuple)) and input_shape and \
                isinstance(input_shape[0], tensor_shape.TensorShape):  # fmt: skip
            input_shape = input_shape[0]
        input_shape = tensor_shape.TensorShape(input_shape)
        if input_shape.ndims != 3:
            raise ValueError(
                f"Input 0 of layer {self.name} is incompatible with the layer: expected "
                f"ndim=3, found ndim={input_shape.ndims}."
            )
        size = tensor_shape.dimension_value(input_shape[-1])
        n = self._gates * self.units
        self.kernel = self.add_weight(
            "kernel", shape=(size, n), initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
        )  # fmt: skip
        self.recurrent_kernel = self.add_weight(
            "recurrent_kernel", shape=(self.units, n), initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer, constraint=self.recurrent_constraint,
        )  # fmt: skip
        self.bias = self.add_weight(
            "bias", shape=(2 * n,), initializer=self._bias_initializer(),
            regularizer=self.bias_regularizer, constraint=self.bias_constraint,
        )  # fmt: skip
        self.built = True

    def _cols(self, weight, k):
        return weight[:, k * self.units : (k + 1) * self.units]

    def _params(self):
        w_order, b_order = self._canonical_order()
        weights = [self._cols(self.kernel, k) for k in w_order]
        weights += [self._cols(self.recurrent_kernel, k) for k in w_order]
        flat = [array_ops.reshape(array_ops.transpose(w), [-1]) for w in weights]
        flat += [self.bias[k * self.units : (k + 1) * self.units] for k in b_order]
        return manip_ops.concat(flat, axis=0)

    def call(self, inputs, initial_state=None, training=None):
        if isinstance(inputs, (list, tuple)):
            inputs, initial_state = inputs[0], list(inputs[1:]) or initial_state
        n_states = 2 if self._mode == "lstm" else 1
        if not self.time_major:
            inputs = array_ops.transpose(inputs, perm=(1, 0, 2))
        if self.go_backwards:
            inputs = slicing_ops.reverse(inputs, [0])
        if initial_state is None:
            zeros = array_ops.zeros_like(inputs[0, :, :1])
            h = zeros + array_ops.zeros([self.units], inputs.dtype)
            initial_state = [h] * n_states
        initial_state = list(initial_state)
        if len(initial_state) != n_states:
            raise ValueError(
                f"Layer has {n_states} states but was passed {len(initial_state)} initial states."
            )
        input_h = array_ops.expand_dims(initial_state[0], 0)
        input_c = array_ops.expand_dims(initial_state[1], 0) if n_states == 2 else 0.0
        steps = array_ops.shape(inputs)[0]
        lengths = array_ops.fill([array_ops.shape(inputs)[1]], steps)
        outs = ops.apply_op(
            "CudnnRNNV3",
            [inputs, input_h, input_c, self._params(), lengths],
            {"rnn_mode": self._mode, "is_training": True},
        ).outputs
        outputs, h, c = outs[0], outs[1], outs[2]
        if self.return_sequences:
            output = outputs if self.time_major else array_ops.transpose(outputs, perm=(1, 0, 2))
        else:
            output = outputs[-1]
        if not self.return_state:
            return output
        states = [h[0], c[0]] if n_states == 2 else [h[0]]
        return [output, *states]

    def compute_output_shape(self, input_shape):
        input_shape = tensor_shape.TensorShape(input_shape)
        batch = input_shape[0] if not self.time_major else input_shape[1]
        steps = input_shape[1] if not self.time_major else input_shape[0]
        if self.return_sequences:
            dims = [steps, batch] if self.time_major else [batch, steps]
            out = tensor_shape.TensorShape([*dims, self.units])
        else:
            out = tensor_shape.TensorShape([batch, self.units])
        if not self.return_state:
            return out
        state = tensor_shape.TensorShape([batch, self.units])
        return [out] + [state] * (2 if self._mode == "lstm" else 1)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "go_backwards": self.go_backwards,
            "stateful": self.stateful,
            "time_major": self.time_major,
            "units": self.units,
            "kernel_initializer": _init.serialize(self.kernel_initializer),
            "recurrent_initializer": _init.serialize(self.recurrent_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            **self._extra_config(),
            "kernel_regularizer": _regularizers.serialize(self.kernel_regularizer),
            "recurrent_regularizer": _regularizers.serialize(self.recurrent_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "activity_regularizer": _regularizers.serialize(self.activity_regularizer),
            "kernel_constraint": _constraints.serialize(self.kernel_constraint),
            "recurrent_constraint": _constraints.serialize(self.recurrent_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
        })  # fmt: skip
        return config

    def _extra_config(self) -> dict:
        return {}


class CuDNNGRU(_CuDNNRNN):
    """A GRU run by cuDNN (reset gate after the recurrent product, a bias per side)."""

    _gates = 3
    _mode = "gru"

    def _canonical_order(self):
        # Keras keeps (z, r, h); cuDNN wants (r, z, h).  Biases: input then recurrent.
        return (1, 0, 2), (1, 0, 2, 4, 3, 5)


class CuDNNLSTM(_CuDNNRNN):
    """An LSTM run by cuDNN (a bias per side); `unit_forget_bias` starts the
    recurrent-side forget bias (bias[5u:6u]) at one, as TF's does."""

    _gates = 4
    _mode = "lstm"

    def __init__(self, units, unit_forget_bias=True, **kwargs):
        super().__init__(units, **kwargs)
        self.unit_forget_bias = unit_forget_bias

    def _canonical_order(self):
        return (0, 1, 2, 3), tuple(range(8))

    def _bias_initializer(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, units = self.bias_initializer, self.units

        def forget_bias_one(shape, dtype=None, partition_info=None):
            parts = [base((units * 5,), dtype=dtype), array_ops.ones((units,), dtype=dtype),
                     base((units * 2,), dtype=dtype)]  # fmt: skip
            return manip_ops.concat(parts, axis=0)

        return forget_bias_one

    def _extra_config(self) -> dict:
        return {"unit_forget_bias": self.unit_forget_bias}
