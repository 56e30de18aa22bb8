"""`tf.keras.layers` ConvLSTM1D/2D/3D (convolutional LSTMs, unrolled over the static
time steps as recurrent.py unrolls its RNNs) and LocallyConnected1D/2D (unshared
convolution weights, Keras' implementation 1), with TF 2.21 tf_keras' weight names,
shapes, initializers, outputs and configs.  channels_first inputs run channels_last
between transposes; a channels_first LocallyConnected patch flattens channel-major, as
TF's kernel reads it.  A stateful ConvLSTM keeps its final [h, c] in two variables
(`states`, in the layer's data format) that the next call starts from."""

from __future__ import annotations

import numpy as np

from asyncflow import tensor_shape
from asyncflow.keras import activations, backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import InputSpec, Layer
from asyncflow.keras.layers_more import _get, _tuple
from asyncflow.ops import (
    array_ops,
    conv3d_ops,
    conv_ops,
    matmul_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
)

__all__ = ["ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "LocallyConnected1D", "LocallyConnected2D"]


def _conv(x, kernel, rank, strides, padding, dilation):
    """An N-D channels_last convolution (1-D through a unit height)."""
    if rank == 1:
        out = conv_ops.conv2d(
            array_ops.expand_dims(x, 1),
            array_ops.expand_dims(kernel, 0),
            strides=[1, 1, strides[0], 1],
            padding=padding.upper(),
            dilations=[1, 1, dilation[0], 1],
        )
        return array_ops.squeeze(out, [1])
    op = conv_ops.conv2d if rank == 2 else conv3d_ops.conv3d
    return op(x, kernel, strides=[1, *strides, 1], padding=padding.upper(),
              dilations=[1, *dilation, 1])  # fmt: skip


def _data_format(data_format) -> str:
    data_format = data_format or "channels_last"
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(
            'The `data_format` argument must be one of "channels_first", "channels_last". '
            f"Received: {data_format}"
        )
    return data_format


class _ConvLSTM(Layer):
    """A convolutional LSTM over (batch, time, *spatial, channels): input and recurrent
    convolutions per gate (i, f, c, o), hard_sigmoid gates by default."""

    _rank = 2

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, activation="tanh", recurrent_activation="hard_sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, return_sequences=False,
                 return_state=False, go_backwards=False, stateful=False, dropout=0.0,
                 recurrent_dropout=0.0, **kwargs):  # fmt: skip
        super().__init__(activity_regularizer=_get("regularizer", activity_regularizer), **kwargs)
        rank = self._rank
        self.filters = int(filters)
        self.kernel_size = _tuple(kernel_size, rank)
        self.strides = _tuple(strides, rank)
        self.dilation_rate = _tuple(dilation_rate, rank)
        self.padding = padding.lower()
        self.data_format = _data_format(data_format)
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias, self.unit_forget_bias = use_bias, unit_forget_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.recurrent_initializer = _init.get(recurrent_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _get("regularizer", kernel_regularizer)
        self.recurrent_regularizer = _get("regularizer", recurrent_regularizer)
        self.bias_regularizer = _get("regularizer", bias_regularizer)
        self.kernel_constraint = _get("constraint", kernel_constraint)
        self.recurrent_constraint = _get("constraint", recurrent_constraint)
        self.bias_constraint = _get("constraint", bias_constraint)
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards, self.stateful, self.unroll = go_backwards, stateful, False
        self.states = []
        self.dropout = min(1.0, max(0.0, dropout))
        self.recurrent_dropout = min(1.0, max(0.0, recurrent_dropout))
        self.input_spec = InputSpec(ndim=rank + 3)

    def build(self, input_shape) -> None:
        axis = 2 if self.data_format == "channels_first" else -1
        channels = tensor_shape.dimension_value(tensor_shape.TensorShape(input_shape)[axis])
        n = 4 * self.filters
        self.kernel = self.add_weight(
            "kernel", shape=self.kernel_size + (channels, n),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )  # fmt: skip
        self.recurrent_kernel = self.add_weight(
            "recurrent_kernel", shape=self.kernel_size + (self.filters, n),
            initializer=self.recurrent_initializer, regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )  # fmt: skip
        self.bias = None
        if self.use_bias:
            init = self.bias_initializer
            if self.unit_forget_bias:
                base, f = self.bias_initializer, self.filters

                def init(shape, dtype=None, partition_info=None):
                    # the forget gate's bias starts at one (Jozefowicz et al.)
                    return array_ops.concat(
                        [base((f,), dtype=dtype), array_ops.ones((f,), dtype=dtype),
                         base((2 * f,), dtype=dtype)], 0,
                    )  # fmt: skip

            self.bias = self.add_weight(
                "bias", shape=(n,), initializer=init, regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )  # fmt: skip
        if self.stateful:
            shape = self._state_shape(input_shape)
            if shape[0] is None:
                # TF fails here too, converting the unknown batch size (a TypeError).
                raise TypeError(
                    f"{type(self).__name__}(stateful=True) needs a known batch size: pass "
                    "batch_input_shape (Sequential) or batch_shape (Input)"
                )
            self._stateful_shape = shape
            self.reset_states()
        self.built = True

    def _gate(self, weight, k):
        return weight[..., k * self.filters : (k + 1) * self.filters]

    def call(self, inputs, initial_state=None, training=None):
        if self.stateful and initial_state is None:
            initial_state = [v.value() for v in self.states]
        result, states = self._outputs(inputs, initial_state, training)
        if self.stateful:
            self.add_update([v.assign(s) for v, s in zip(self.states, states, strict=True)])
        return [result] + states if self.return_state else result

    def _outputs(self, inputs, initial_state, training):
        """(output, [h, c]) in the layer's data format."""
        if self.data_format != "channels_first":
            return self._run(inputs, initial_state, training)
        # channels_first runs channels_last between transposes (the kernels' layout is
        # the same in both formats); states move with the outputs.
        rank = self._rank
        to_last = [0, *range(2, rank + 2), 1]
        to_first = [0, rank + 1, *range(1, rank + 1)]
        if initial_state is not None:
            initial_state = [array_ops.transpose(s, to_last) for s in initial_state]
        moved_in = array_ops.transpose(inputs, [0, 1, *[p + 1 for p in to_last[1:]]])
        result, states = self._run(moved_in, initial_state, training)
        seq = [0, 1, *[p + 1 for p in to_first[1:]]]
        result = array_ops.transpose(result, seq if self.return_sequences else to_first)
        return result, [array_ops.transpose(s, to_first) for s in states]

    def _state_shape(self, input_shape) -> tuple:
        """(batch, *spatial, filters) (channels_last) of the states, from the input's."""
        dims = tensor_shape.TensorShape(input_shape).as_list()
        first = self.data_format == "channels_first"
        spatial = dims[3:] if first else dims[2:-1]
        out = []
        for size, k, st, d in zip(spatial, self.kernel_size, self.strides, self.dilation_rate,
                                  strict=True):  # fmt: skip
            span = k + (k - 1) * (d - 1)
            valid = self.padding == "valid"
            out.append((size - span + st) // st if valid else (size + st - 1) // st)
        if first:
            return (dims[0], self.filters, *out)
        return (dims[0], *out, self.filters)

    def reset_states(self, states=None) -> None:
        """Zero a stateful layer's states (or set them to `states`, numpy arrays).

        Raises:
          AttributeError: the layer is not stateful.
          ValueError: states of the wrong number or shape.
        """
        if not self.stateful:
            raise AttributeError("Layer must be stateful.")
        shape = self._stateful_shape
        values = [np.zeros(shape, np.float32)] * 2 if states is None else list(states)
        if len(values) != 2 or any(np.shape(v) != shape for v in values):
            raise ValueError(
                f"Layer {self.name} expects 2 states of shape {shape}; received {states}"
            )
        if not self.states:
            self.states = [backend.variable(np.asarray(v, np.float32)) for v in values]
            return
        backend.batch_set_value(list(zip(self.states, values, strict=True)))

    def _dropout_masks(self, ones, rate, training):
        """Four masks (one per gate, shared by every step, as Keras draws them): ones in
        inference, dropped-out ones in training."""
        if not rate:
            return [None] * 4
        return [
            backend.in_train_phase(lambda: nn_impl.dropout(ones, rate=rate), ones, training)
            for _ in range(4)
        ]

    def _run(self, inputs, initial_state, training=None):
        steps = tensor_shape.dimension_value(inputs.shape[1])
        if steps is None:
            raise ValueError(
                f"Layer {self.name} needs a known number of time steps (got input shape "
                f"{inputs.shape}); asyncflow unrolls Keras' recurrent loop."
            )
        rank = self._rank
        kernels = [self._gate(self.kernel, k) for k in range(4)]
        recurrents = [self._gate(self.recurrent_kernel, k) for k in range(4)]
        biases = [self.bias[k * self.filters : (k + 1) * self.filters] if self.use_bias
                  else None for k in range(4)]  # fmt: skip

        def input_conv(x, k):
            out = _conv(x, kernels[k], rank, self.strides, self.padding, self.dilation_rate)
            return nn_ops.bias_add(out, biases[k]) if biases[k] is not None else out

        def recurrent_conv(h, k):
            return _conv(h, recurrents[k], rank, (1,) * rank, "same", (1,) * rank)

        if initial_state is None:
            # Keras' zero state: the input convolution's shape with `filters` channels.
            zero = reduction_ops.reduce_sum(array_ops.zeros_like(inputs), axis=1)
            shape = self.kernel_size + (zero.shape.as_list()[-1], self.filters)
            zero_kernel = array_ops.zeros(shape, dtype=inputs.dtype)
            h = _conv(zero, zero_kernel, rank, self.strides, self.padding, self.dilation_rate)
            states = [h, h]
        else:
            states = list(initial_state)
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        x_masks = self._dropout_masks(array_ops.ones_like(inputs[:, 0]), self.dropout, training)
        h_masks = self._dropout_masks(
            array_ops.ones_like(states[0]), self.recurrent_dropout, training
        )

        def gate(x, h, k):
            x = x if x_masks[k] is None else x * x_masks[k]
            h = h if h_masks[k] is None else h * h_masks[k]
            return input_conv(x, k) + recurrent_conv(h, k)

        outputs = []
        for t in order:
            x = inputs[:, t]
            h_prev, c_prev = states
            i = self.recurrent_activation(gate(x, h_prev, 0))
            f = self.recurrent_activation(gate(x, h_prev, 1))
            c = f * c_prev + i * self.activation(gate(x, h_prev, 2))
            o = self.recurrent_activation(gate(x, h_prev, 3))
            h = o * self.activation(c)
            states = [h, c]
            outputs.append(h)
        result = array_ops.stack(outputs, axis=1) if self.return_sequences else outputs[-1]
        return result, states


class ConvLSTM1D(_ConvLSTM):
    """Convolutional LSTM over (batch, time, steps, channels)."""

    _rank = 1


class ConvLSTM2D(_ConvLSTM):
    """Convolutional LSTM over (batch, time, rows, cols, channels)."""

    _rank = 2


class ConvLSTM3D(_ConvLSTM):
    """Convolutional LSTM over (batch, time, depth, rows, cols, channels)."""

    _rank = 3


class _LocallyConnected(Layer):
    """Unshared convolution: one kernel per output position, applied as a batched matmul
    of the gathered patches; kernel (positions, kernel_volume * in, filters), bias
    (*output_size, filters).

    Raises:
      ValueError: padding other than 'valid' (implementation 1), or an implementation
        other than 1.
    """

    _rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 implementation=1, **kwargs):  # fmt: skip
        super().__init__(activity_regularizer=_get("regularizer", activity_regularizer), **kwargs)
        rank = self._rank
        self.filters = int(filters)
        self.kernel_size = _tuple(kernel_size, rank)
        self.strides = _tuple(strides, rank)
        self.padding = padding.lower()
        if self.padding != "valid" and implementation == 1:
            raise ValueError(
                f'Invalid border mode for {type(self).__name__} (only "valid" is '
                f"supported if implementation is 1): {padding}"
            )
        if implementation != 1:
            raise NotImplementedError(
                f"{type(self).__name__}(implementation={implementation}) is not supported"
            )
        self.data_format = _data_format(data_format)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _get("regularizer", kernel_regularizer)
        self.bias_regularizer = _get("regularizer", bias_regularizer)
        self.kernel_constraint = _get("constraint", kernel_constraint)
        self.bias_constraint = _get("constraint", bias_constraint)
        self.implementation = implementation
        self.input_spec = InputSpec(ndim=rank + 2)

    def build(self, input_shape) -> None:
        dims = tensor_shape.TensorShape(input_shape).as_list()
        if self.data_format == "channels_first":
            spatial, channels = dims[2:], dims[1]
        else:
            spatial, channels = dims[1:-1], dims[-1]
        if any(d is None for d in spatial):
            raise ValueError(
                f"The spatial dimensions of the inputs to  a {type(self).__name__} layer "
                f"should be fully-defined, but layer received the inputs shape {tuple(dims)}"
            )
        self.output_size = tuple(
            (d - k) // s + 1 for d, k, s in zip(spatial, self.kernel_size, self.strides)
        )
        positions = int(np.prod(self.output_size))
        volume = int(np.prod(self.kernel_size)) * channels
        self.kernel = self.add_weight(
            "kernel", shape=(positions, volume, self.filters),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )  # fmt: skip
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=self.output_size + (self.filters,),
                initializer=self.bias_initializer, regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def call(self, inputs):
        first = self.data_format == "channels_first"
        channels = inputs.shape.as_list()[1 if first else -1]
        volume = int(np.prod(self.kernel_size)) * channels
        patches = []
        for pos in np.ndindex(*self.output_size):
            # A channels_first patch flattens channel-major, as TF's kernel reads it.
            index = [slice(None)] * (2 if first else 1)
            for p, k, s in zip(pos, self.kernel_size, self.strides):
                index.append(slice(p * s, p * s + k))
            if not first:
                index.append(slice(None))
            patches.append(array_ops.reshape(inputs[tuple(index)], [1, -1, volume]))
        stacked = array_ops.concat(patches, 0)  # (positions, batch, volume)
        out = matmul_ops.matmul(stacked, self.kernel)  # (positions, batch, filters)
        out = array_ops.reshape(out, [*self.output_size, -1, self.filters])
        rank = self._rank
        out = array_ops.transpose(out, [rank, *range(rank), rank + 1])
        if self.use_bias:
            out = out + self.bias  # (rows, cols, filters) in either data format, as TF
        out = self.activation(out)
        return array_ops.transpose(out, [0, rank + 1, *range(1, rank + 1)]) if first else out


class LocallyConnected1D(_LocallyConnected):
    """Unshared 1-D convolution over (batch, steps, channels)."""

    _rank = 1


class LocallyConnected2D(_LocallyConnected):
    """Unshared 2-D convolution over (batch, rows, cols, channels)."""

    _rank = 2
