"""More `tf.keras.layers`: 1-D convolution and pooling, global pooling, transposed,
depthwise and separable 2-D convolutions, activation layers (ReLU, LeakyReLU, ELU,
Softmax), shape layers (Permute, RepeatVector, ZeroPadding2D, UpSampling2D, Cropping2D),
TimeDistributed, the noise layers (GaussianNoise, GaussianDropout, SpatialDropout1D/2D)
and ActivityRegularization.  Same conventions as layers.py (channels_last by default)."""

from __future__ import annotations

from asyncflow import tensor_shape
from asyncflow.keras import activations, backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import InputSpec, Layer, _takes_mask
from asyncflow.ops import (
    array_ops,
    cast_ops,
    conv_ops,
    nn_ops,
    pooling_ops,
    random_ops,
    reduction_ops,
)

__all__ = [
    "Conv1D",
    "Convolution1D",
    "Conv2DTranspose",
    "MaxPooling1D",
    "MaxPool1D",
    "AveragePooling1D",
    "AvgPool1D",
    "GlobalAveragePooling1D",
    "GlobalMaxPooling1D",
    "GlobalAveragePooling2D",
    "GlobalMaxPooling2D",
    "GlobalAvgPool2D",
    "GlobalMaxPool2D",
    "ReLU",
    "LeakyReLU",
    "ELU",
    "Softmax",
    "Permute",
    "RepeatVector",
    "ZeroPadding2D",
    "UpSampling2D",
    "Cropping2D",
    "ActivityRegularization",
    "TimeDistributed",
    "GaussianNoise",
    "GaussianDropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "DepthwiseConv2D",
    "SeparableConv2D",
]


def _tuple(value, n):
    return (value,) * n if isinstance(value, int) else tuple(value)


def _get(kind, value):
    from asyncflow.keras import constraints, regularizers

    return {"regularizer": regularizers.get, "constraint": constraints.get}[kind](value)


class _ConvBase(Layer):
    """Kernel/bias bookkeeping shared by Conv1D and Conv2DTranspose."""

    def __init__(
        self,
        filters,
        kernel_size,
        rank,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(activity_regularizer=_get("regularizer", activity_regularizer), **kwargs)
        self.filters, self.rank = int(filters), rank
        self.kernel_size = _tuple(kernel_size, rank)
        self.strides = _tuple(strides, rank)
        self.dilation_rate = _tuple(dilation_rate, rank)
        self.padding = padding.lower()
        self.data_format = data_format or backend.image_data_format()
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _get("regularizer", kernel_regularizer)
        self.bias_regularizer = _get("regularizer", bias_regularizer)
        self.kernel_constraint = _get("constraint", kernel_constraint)
        self.bias_constraint = _get("constraint", bias_constraint)
        if self.data_format not in ("channels_first", "channels_last"):
            raise ValueError(
                'The `data_format` argument must be one of "channels_first", '
                f'"channels_last". Received: {data_format}'
            )

    def _channels(self, input_shape):
        shape = tensor_shape.TensorShape(input_shape)
        axis = 1 if self.data_format == "channels_first" else -1
        return tensor_shape.dimension_value(shape[axis])

    def call(self, inputs):
        # A channels_first convolution runs as channels_last between two transposes (TF's
        # CPU kernels compute NCHW convolutions in NHWC too); the values are the same.
        if self.data_format != "channels_first":
            return self._finish(self._conv(inputs))
        n = inputs.shape.ndims
        out = self._conv(array_ops.transpose(inputs, [0, *range(2, n), 1]))
        return self._finish(array_ops.transpose(out, [0, n - 1, *range(1, n - 1)]))

    def _make_weights(self, kernel_shape) -> None:
        self.kernel = self.add_weight(
            "kernel",
            shape=kernel_shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                shape=(self.filters,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.built = True

    def _finish(self, outputs):
        if self.use_bias:
            if self.data_format != "channels_first":
                outputs = nn_ops.bias_add(outputs, self.bias)
            elif self.rank == 1:  # Keras adds a 1-D channels_first bias by broadcasting
                outputs = outputs + array_ops.reshape(self.bias, (1, self.filters, 1))
            else:
                outputs = nn_ops.bias_add(outputs, self.bias, data_format="NCHW")
        return self.activation(outputs)


class Conv1D(_ConvBase):
    """1-D convolution over (batch, steps, channels) (or (batch, channels, steps) with
    data_format='channels_first'; channels_last by default whatever the image data
    format, as Keras); padding 'valid', 'same' or 'causal' (left-padded so step t sees
    only steps <= t)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", **kwargs):  # fmt: skip
        super().__init__(filters, kernel_size, 1, strides=strides, padding=padding,
                         data_format=data_format, **kwargs)  # fmt: skip
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape) -> None:
        channels = self._channels(input_shape)
        self._make_weights(self.kernel_size + (channels, self.filters))

    def _conv(self, inputs):
        padding = self.padding
        if padding == "causal":
            left = self.dilation_rate[0] * (self.kernel_size[0] - 1)
            inputs = array_ops.pad(inputs, [[0, 0], [left, 0], [0, 0]])
            padding = "valid"
        x = array_ops.expand_dims(inputs, 1)
        k = array_ops.expand_dims(self.kernel, 0)
        out = conv_ops.conv2d(
            x,
            k,
            strides=[1, 1, self.strides[0], 1],
            padding=padding.upper(),
            dilations=[1, 1, self.dilation_rate[0], 1],
        )
        return array_ops.squeeze(out, [1])


def _deconv_length(size, kernel, stride, dilation, padding, output_padding=None):
    """Keras' transposed-convolution output length; `size` may be a graph scalar (the
    dynamic length) or None (unknown: None)."""
    if size is None:
        return None
    kernel = kernel + (kernel - 1) * (dilation - 1)
    if output_padding is not None:
        pad = {"same": kernel // 2, "valid": 0, "full": kernel - 1}[padding]
        return (size - 1) * stride + kernel - 2 * pad + output_padding
    if padding == "valid":
        return size * stride + max(kernel - stride, 0)
    if padding == "full":
        return size * stride - (stride + kernel - 2)
    return size * stride


class _TransposeBase(_ConvBase):
    """What the transposed convolutions share: `output_padding` (checked against the
    strides, as TF checks it at construction) and the output shape.

    Raises:
      ValueError (construction): an output padding not below its stride.
    """

    def __init__(self, filters, kernel_size, rank, output_padding=None, **kwargs):
        super().__init__(filters, kernel_size, rank, **kwargs)
        self.output_padding = None
        if output_padding is not None:
            self.output_padding = _tuple(output_padding, rank)
            if any(p >= s for p, s in zip(self.output_padding, self.strides, strict=True)):
                raise ValueError(
                    "Strides must be greater than output padding. Received strides="
                    f"{self.strides}, output_padding={self.output_padding}."
                )

    def _input_channels(self, input_shape) -> int:
        channels = self._channels(input_shape)
        if channels is None:
            axis = 1 if self.data_format == "channels_first" else -1
            raise ValueError(
                f"The channel dimension of the inputs to `{type(self).__name__}` should be "
                f"defined. The input_shape received is {tensor_shape.TensorShape(input_shape)}"
                f", where axis {axis} (0-based) is the channel dimension, which found to be "
                "`None`."
            )
        return channels

    def _out_shape(self, inputs):
        """The output shape as a graph vector, and as far as it is known statically."""
        dyn = array_ops.shape(inputs)
        static = inputs.shape.as_list()
        dims, known = [dyn[0]], [static[0]]
        for i in range(self.rank):
            args = (self.kernel_size[i], self.strides[i], self.dilation_rate[i], self.padding,
                    None if self.output_padding is None else self.output_padding[i])  # fmt: skip
            size = _deconv_length(static[i + 1], *args)
            known.append(size)
            dims.append(size if size is not None else _deconv_length(dyn[i + 1], *args))
        return array_ops.stack([*dims, self.filters]), known + [self.filters]


class Conv2DTranspose(_TransposeBase):
    """Transposed 2-D convolution: kernel (height, width, filters, in_channels); output
    length (in - 1) * stride + dilated kernel - 2 * pad + output_padding, or without
    output_padding in * stride (+ max(kernel - stride, 0) when 'valid')."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", **kwargs):
        super().__init__(filters, kernel_size, 2, strides=strides, padding=padding, **kwargs)
        self.input_spec = InputSpec(ndim=4)

    def build(self, input_shape) -> None:
        channels = self._input_channels(input_shape)
        self._make_weights(self.kernel_size + (self.filters, channels))

    def _conv(self, inputs):
        shape, known = self._out_shape(inputs)
        out = conv_ops.conv2d_transpose(
            inputs,
            self.kernel,
            shape,
            strides=[1, *self.strides, 1],
            padding=self.padding.upper(),
            dilations=[1, *self.dilation_rate, 1],
        )
        out.set_shape(known)
        return out


class _Pooling1D(Layer):
    _op = None

    def __init__(
        self, pool_size=2, strides=None, padding="valid", data_format="channels_last", **kwargs
    ):
        super().__init__(**kwargs)
        self.pool_size = int(pool_size if isinstance(pool_size, int) else pool_size[0])
        strides = self.pool_size if strides is None else strides
        self.strides = int(strides if isinstance(strides, int) else strides[0])
        self.padding = padding.lower()
        self.data_format = data_format
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        if self.data_format == "channels_first":  # (batch, channels, steps): NCHW, H = 1
            out = type(self)._op(
                array_ops.expand_dims(inputs, 2),
                ksize=[1, 1, 1, self.pool_size],
                strides=[1, 1, 1, self.strides],
                padding=self.padding.upper(),
                data_format="NCHW",
            )
            return array_ops.squeeze(out, [2])
        x = array_ops.expand_dims(inputs, 1)
        out = type(self)._op(
            x,
            ksize=[1, 1, self.pool_size, 1],
            strides=[1, 1, self.strides, 1],
            padding=self.padding.upper(),
        )
        return array_ops.squeeze(out, [1])


class MaxPooling1D(_Pooling1D):
    """1-D max pooling over the steps axis."""

    _op = staticmethod(pooling_ops.max_pool)


class AveragePooling1D(_Pooling1D):
    """1-D average pooling over the steps axis."""

    _op = staticmethod(pooling_ops.avg_pool)


class _GlobalPooling(Layer):
    _axes: tuple = ()
    _reduce = None

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format or backend.image_data_format()
        self.keepdims = keepdims

    def call(self, inputs):
        rank = inputs.shape.ndims
        axes = (
            list(range(2, rank))
            if self.data_format == "channels_first"
            else list(range(1, rank - 1))
        )
        return type(self)._reduce(inputs, axis=axes, keepdims=self.keepdims)


class GlobalAveragePooling1D(_GlobalPooling):
    """The mean over the steps axis (over the unmasked steps only, given a mask); its
    output has no mask."""

    _reduce = staticmethod(reduction_ops.reduce_mean)

    def __init__(self, data_format="channels_last", **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return super().call(inputs)
        steps_axis = 1 if self.data_format == "channels_last" else 2
        mask = array_ops.expand_dims(
            cast_ops.cast(mask, inputs.dtype), 2 if steps_axis == 1 else 1
        )
        total = reduction_ops.reduce_sum(inputs * mask, axis=steps_axis, keepdims=self.keepdims)
        return total / reduction_ops.reduce_sum(mask, axis=steps_axis, keepdims=self.keepdims)

    def compute_mask(self, inputs, mask=None):
        return None


class GlobalMaxPooling1D(_GlobalPooling):
    """The maximum over the steps axis (channels_last unless told, as Keras' 1-D
    poolings, whatever the image data format)."""

    _reduce = staticmethod(reduction_ops.reduce_max)

    def __init__(self, data_format="channels_last", **kwargs):
        super().__init__(data_format=data_format, **kwargs)


class GlobalAveragePooling2D(_GlobalPooling):
    """The mean over the spatial axes."""

    _reduce = staticmethod(reduction_ops.reduce_mean)


class GlobalMaxPooling2D(_GlobalPooling):
    """The maximum over the spatial axes."""

    _reduce = staticmethod(reduction_ops.reduce_max)


class ReLU(Layer):
    """max(x, 0) with optional cap, negative slope and threshold."""

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def call(self, inputs):
        return activations.relu(
            inputs, alpha=self.negative_slope, max_value=self.max_value, threshold=self.threshold
        )


class LeakyReLU(Layer):
    """x if x > 0 else alpha * x (alpha 0.3)."""

    def __init__(self, alpha=0.3, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.alpha = alpha

    def call(self, inputs):
        return nn_ops.leaky_relu(inputs, alpha=self.alpha)


class ELU(Layer):
    """Exponential linear unit with scale `alpha`."""

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.alpha = alpha

    def call(self, inputs):
        return activations.elu(inputs, self.alpha)


class Softmax(Layer):
    """Softmax over `axis`."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs):
        return nn_ops.softmax(inputs, axis=self.axis)


class Permute(Layer):
    """Permutes the non-batch axes by `dims` (1-based)."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(
                "Invalid permutation argument `dims` for Permute Layer. The set of indices in "
                f"`dims` must be consecutive and start from 1. Received dims={dims}"
            )

    def call(self, inputs):
        return array_ops.transpose(inputs, perm=(0,) + self.dims)


class RepeatVector(Layer):
    """(batch, features) -> (batch, n, features)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.n = int(n)

    def call(self, inputs):
        return array_ops.tile(array_ops.expand_dims(inputs, 1), [1, self.n, 1])


def _pairs(value):
    if isinstance(value, int):
        return ((value, value), (value, value))
    value = tuple(value)
    if all(isinstance(v, int) for v in value):
        return ((value[0], value[0]), (value[1], value[1]))
    return tuple(tuple(v) for v in value)


class ZeroPadding2D(Layer):
    """Pads rows and columns with zeros: int, (rows, cols) or ((top, bottom), (left,
    right))."""

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.padding = _pairs(padding)
        self.data_format = data_format or backend.image_data_format()

    def call(self, inputs):
        (t, b), (left, right) = self.padding
        if self.data_format == "channels_first":
            return array_ops.pad(inputs, [[0, 0], [0, 0], [t, b], [left, right]])
        return array_ops.pad(inputs, [[0, 0], [t, b], [left, right], [0, 0]])


class Cropping2D(Layer):
    """Crops rows and columns: int, (rows, cols) or ((top, bottom), (left, right))."""

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.cropping = _pairs(cropping)
        self.data_format = data_format or backend.image_data_format()

    def call(self, inputs):
        (t, b), (left, right) = self.cropping
        h_end = -b if b else None
        w_end = -right if right else None
        if self.data_format == "channels_first":
            return inputs[:, :, t:h_end, left:w_end]
        return inputs[:, t:h_end, left:w_end, :]


class UpSampling2D(Layer):
    """Repeats rows and columns `size` times (nearest-neighbour upsampling).

    Raises:
      ValueError: an interpolation other than 'nearest'.
    """

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        if interpolation != "nearest":
            raise ValueError(
                f"UpSampling2D(interpolation={interpolation!r}) is not supported; use 'nearest'"
            )
        self.size = _tuple(size, 2)
        self.data_format = data_format or backend.image_data_format()
        self.interpolation = interpolation

    def call(self, inputs):
        from asyncflow import math_composites_2

        first = self.data_format == "channels_first"
        h_axis = 2 if first else 1
        out = math_composites_2.repeat(inputs, self.size[0], axis=h_axis)
        out = math_composites_2.repeat(out, self.size[1], axis=h_axis + 1)
        shape = inputs.shape.as_list()
        h, w = shape[h_axis], shape[h_axis + 1]
        shape[h_axis] = None if h is None else h * self.size[0]
        shape[h_axis + 1] = None if w is None else w * self.size[1]
        out.set_shape(shape)
        return out


class TimeDistributed(Layer):
    """Applies `layer` to every time step: (batch, time, ...) is reshaped to
    (batch * time, ...) for the layer and back; the layer's weights are made in this
    layer's name scope ("time_distributed/kernel:0")."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.layer = layer

    def build(self, input_shape) -> None:
        input_shape = tensor_shape.TensorShape(input_shape)
        if not self.layer.built:
            self.layer.build(tensor_shape.TensorShape([None]).concatenate(input_shape[2:]))
            self.layer.built = True
        self.built = True

    def call(self, inputs, training=None, mask=None):
        shape = inputs.shape
        steps = tensor_shape.dimension_value(shape[1])
        inner = array_ops.reshape(inputs, [-1] + shape[2:].as_list())
        kwargs = {}
        if mask is not None and _takes_mask(self.layer):
            # The inner layer sees each step's mask as one sample's.
            kwargs["mask"] = array_ops.reshape(mask, [-1] + mask.shape[2:].as_list())
        out = self.layer(inner, **kwargs)
        out_tail = out.shape[1:].as_list()
        if steps is None:
            steps = array_ops.shape(inputs)[1]
        result = (
            array_ops.reshape(out, array_ops.stack([-1, steps] + out_tail))
            if not isinstance(steps, int)
            else array_ops.reshape(out, [-1, steps] + out_tail)
        )
        result.set_shape([shape[0], tensor_shape.dimension_value(shape[1])] + out_tail)
        return result


class ActivityRegularization(Layer):
    """The identity, adding l1 * sum(|x|) + l2 * sum(x**2) of its input to the losses."""

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        from asyncflow.keras import regularizers

        super().__init__(activity_regularizer=regularizers.L1L2(l1=l1, l2=l2), **kwargs)
        self.supports_masking = True
        self.l1, self.l2 = l1, l2

    def call(self, inputs):
        return inputs


Convolution1D = Conv1D
MaxPool1D = MaxPooling1D
AvgPool1D = AveragePooling1D
GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool2D = GlobalMaxPooling2D


class GaussianNoise(Layer):
    """Adds N(0, stddev) noise in training (seeded like any graph op: `seed`, else the
    graph seed's counter); the identity otherwise."""

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.stddev, self.seed = stddev, seed

    def call(self, inputs, training=None):
        def noised():
            noise = random_ops.random_normal(array_ops.shape(inputs), mean=0.0,
                                             stddev=self.stddev, dtype=inputs.dtype,
                                             seed=self.seed)  # fmt: skip
            return inputs + noise

        return backend.in_train_phase(noised, inputs, training=training)


class GaussianDropout(Layer):
    """Multiplies by N(1, sqrt(rate / (1 - rate))) noise in training."""

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.rate, self.seed = rate, seed

    def call(self, inputs, training=None):
        if not 0 < self.rate < 1:
            return inputs

        def noised():
            stddev = (self.rate / (1.0 - self.rate)) ** 0.5
            noise = random_ops.random_normal(array_ops.shape(inputs), mean=1.0, stddev=stddev,
                                             dtype=inputs.dtype, seed=self.seed)  # fmt: skip
            return inputs * noise

        return backend.in_train_phase(noised, inputs, training=training)


class _SpatialDropout(Layer):
    """Dropout of whole feature maps: one keep/drop draw per (sample, channel)."""

    def __init__(self, rate, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.data_format = data_format or backend.image_data_format()

    def call(self, inputs, training=None):
        from asyncflow.ops import nn_impl

        shape = array_ops.shape(inputs)
        rank = inputs.shape.ndims
        ones = [1] * (rank - 2)
        if self.data_format == "channels_first":
            noise_shape = array_ops.stack([shape[0], shape[1]] + ones)
        else:
            noise_shape = array_ops.stack([shape[0]] + ones + [shape[rank - 1]])

        def dropped():
            return nn_impl.dropout(inputs, noise_shape=noise_shape, rate=self.rate)

        return backend.in_train_phase(dropped, lambda: array_ops.identity(inputs),
                                      training=training)  # fmt: skip


class SpatialDropout1D(_SpatialDropout):
    """Drops whole channels of (batch, steps, channels) inputs in training."""

    def __init__(self, rate, **kwargs):
        super().__init__(rate, data_format="channels_last", **kwargs)


class SpatialDropout2D(_SpatialDropout):
    """Drops whole feature maps of 4-D inputs in training."""


class DepthwiseConv2D(_ConvBase):
    """Depthwise 2-D convolution: each input channel convolved with its own
    `depth_multiplier` filters; depthwise_kernel (height, width, in, depth_multiplier)."""

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 depthwise_initializer="glorot_uniform", depthwise_regularizer=None,
                 depthwise_constraint=None, **kwargs):  # fmt: skip
        super().__init__(0, kernel_size, 2, strides=strides, padding=padding, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = _init.get(depthwise_initializer)
        self.depthwise_regularizer = _get("regularizer", depthwise_regularizer)
        self.depthwise_constraint = _get("constraint", depthwise_constraint)
        self.input_spec = InputSpec(ndim=4)

    def build(self, input_shape) -> None:
        channels = self._channels(input_shape)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", shape=self.kernel_size + (channels, self.depth_multiplier),
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )  # fmt: skip
        self.filters = channels * self.depth_multiplier
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=(self.filters,), initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def _conv(self, inputs):
        out = conv_ops.depthwise_conv2d(
            inputs, self.depthwise_kernel, strides=[1, *self.strides, 1],
            padding=self.padding.upper(), dilations=list(self.dilation_rate),
        )  # fmt: skip
        return out


class SeparableConv2D(_ConvBase):
    """Depthwise then pointwise (1x1) 2-D convolution: depthwise_kernel (height, width,
    in, depth_multiplier), pointwise_kernel (1, 1, in * depth_multiplier, filters)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 depth_multiplier=1, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", depthwise_regularizer=None,
                 pointwise_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, **kwargs):  # fmt: skip
        super().__init__(filters, kernel_size, 2, strides=strides, padding=padding, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = _init.get(depthwise_initializer)
        self.pointwise_initializer = _init.get(pointwise_initializer)
        self.depthwise_regularizer = _get("regularizer", depthwise_regularizer)
        self.pointwise_regularizer = _get("regularizer", pointwise_regularizer)
        self.depthwise_constraint = _get("constraint", depthwise_constraint)
        self.pointwise_constraint = _get("constraint", pointwise_constraint)
        self.input_spec = InputSpec(ndim=4)

    def build(self, input_shape) -> None:
        channels = self._channels(input_shape)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", shape=self.kernel_size + (channels, self.depth_multiplier),
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )  # fmt: skip
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", shape=(1, 1, channels * self.depth_multiplier, self.filters),
            initializer=self.pointwise_initializer, regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
        )  # fmt: skip
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=(self.filters,), initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
            )  # fmt: skip
        self.built = True

    def _conv(self, inputs):
        from asyncflow import nn_composites

        out = nn_composites.separable_conv2d(
            inputs, self.depthwise_kernel, self.pointwise_kernel, strides=[1, *self.strides, 1],
            padding=self.padding.upper(), rate=list(self.dilation_rate),
        )  # fmt: skip
        return out
