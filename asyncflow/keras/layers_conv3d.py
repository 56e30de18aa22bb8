"""More `tf.keras.layers` convolutions and pooling: Conv3D, Conv3DTranspose,
Conv1DTranspose, SeparableConv1D, DepthwiseConv1D, Max/AveragePooling3D and
GlobalMax/AveragePooling3D, with TF 2.21 tf_keras' weights (names, shapes, order),
outputs and configs; channels_first runs channels_last between transposes, as
layers_more's convolutions do.  The 1-D layers run as their 2-D ops over an added unit
height, as Keras builds them."""

from __future__ import annotations

from asyncflow import nn_composites
from asyncflow.keras import backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import InputSpec, Layer
from asyncflow.keras.layers_more import (
    Conv2DTranspose,
    GlobalAveragePooling1D,
    GlobalMaxPooling1D,
    SeparableConv2D,
    _ConvBase,
    _get,
    _GlobalPooling,
    _TransposeBase,
    _tuple,
)
from asyncflow.ops import array_ops, conv3d_ops, conv_ops, reduction_ops

__all__ = [
    "Conv3D",
    "Convolution3D",
    "Conv3DTranspose",
    "Convolution3DTranspose",
    "Conv1DTranspose",
    "Convolution1DTranspose",
    "SeparableConv1D",
    "SeparableConvolution1D",
    "SeparableConvolution2D",
    "Convolution2DTranspose",
    "DepthwiseConv1D",
    "MaxPooling3D",
    "MaxPool3D",
    "AveragePooling3D",
    "AvgPool3D",
    "GlobalAveragePooling3D",
    "GlobalMaxPooling3D",
    "GlobalAvgPool3D",
    "GlobalMaxPool3D",
    "GlobalAvgPool1D",
    "GlobalMaxPool1D",
]


class Conv3D(_ConvBase):
    """3-D convolution over (batch, depth, height, width, channels); kernel (depth,
    height, width, in_channels, filters)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", **kwargs):
        super().__init__(filters, kernel_size, 3, strides=strides, padding=padding, **kwargs)
        self.input_spec = InputSpec(ndim=5)

    def build(self, input_shape) -> None:
        self._make_weights(self.kernel_size + (self._channels(input_shape), self.filters))

    def _conv(self, inputs):
        out = conv3d_ops.conv3d(
            inputs,
            self.kernel,
            strides=[1, *self.strides, 1],
            padding=self.padding.upper(),
            dilations=[1, *self.dilation_rate, 1],
        )
        return out


class Conv3DTranspose(_TransposeBase):
    """Transposed 3-D convolution: kernel (depth, height, width, filters, in_channels)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", **kwargs):
        super().__init__(filters, kernel_size, 3, strides=strides, padding=padding, **kwargs)
        self.input_spec = InputSpec(ndim=5)

    def build(self, input_shape) -> None:
        self._make_weights(self.kernel_size + (self.filters, self._input_channels(input_shape)))

    def _conv(self, inputs):
        shape, known = self._out_shape(inputs)
        out = conv3d_ops.conv3d_transpose(
            inputs,
            self.kernel,
            shape,
            strides=[1, *self.strides, 1],
            padding=self.padding.upper(),
        )
        out.set_shape(known)
        return out


class Conv1DTranspose(_TransposeBase):
    """Transposed 1-D convolution: kernel (width, filters, in_channels)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", **kwargs):
        super().__init__(filters, kernel_size, 1, strides=strides, padding=padding, **kwargs)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape) -> None:
        self._make_weights(self.kernel_size + (self.filters, self._input_channels(input_shape)))

    def _conv(self, inputs):
        shape, known = self._out_shape(inputs)
        out = conv_ops.conv2d_transpose(
            array_ops.expand_dims(inputs, 1),
            array_ops.expand_dims(self.kernel, 0),
            array_ops.concat([shape[:1], [1], shape[1:]], 0),
            strides=[1, 1, self.strides[0], 1],
            padding=self.padding.upper(),
        )
        out = array_ops.squeeze(out, [1])
        out.set_shape(known)
        return out


class _Depthwise1D(_ConvBase):
    """The depthwise kernel (width, in_channels, depth_multiplier) of the 1-D layers."""

    def _depthwise(self, input_shape, depth_multiplier, initializer, regularizer, constraint):
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel",
            shape=self.kernel_size + (self._channels(input_shape), self.depth_multiplier),
            initializer=initializer,
            regularizer=regularizer,
            constraint=constraint,
        )

    def _bias(self) -> None:
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

    def _padded(self, inputs):
        if self.padding == "causal":
            left = self.dilation_rate[0] * (self.kernel_size[0] - 1)
            return array_ops.pad(inputs, [[0, 0], [left, 0], [0, 0]]), "VALID"
        return inputs, self.padding.upper()


class DepthwiseConv1D(_Depthwise1D):
    """Depthwise 1-D convolution: each channel convolved with its own
    `depth_multiplier` filters."""

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 depthwise_initializer="glorot_uniform", depthwise_regularizer=None,
                 depthwise_constraint=None, **kwargs):  # fmt: skip
        super().__init__(0, kernel_size, 1, strides=strides, padding=padding, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = _init.get(depthwise_initializer)
        self.depthwise_regularizer = _get("regularizer", depthwise_regularizer)
        self.depthwise_constraint = _get("constraint", depthwise_constraint)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape) -> None:
        self._depthwise(input_shape, self.depth_multiplier, self.depthwise_initializer,
                        self.depthwise_regularizer, self.depthwise_constraint)  # fmt: skip
        self.filters = self._channels(input_shape) * self.depth_multiplier
        self._bias()

    def _conv(self, inputs):
        inputs, padding = self._padded(inputs)
        out = conv_ops.depthwise_conv2d(
            array_ops.expand_dims(inputs, 1),
            array_ops.expand_dims(self.depthwise_kernel, 0),
            strides=[1, 1, self.strides[0], 1],
            padding=padding,
            dilations=[1, self.dilation_rate[0]],
        )
        return array_ops.squeeze(out, [1])


class SeparableConv1D(_Depthwise1D):
    """Depthwise then pointwise 1-D convolution: depthwise_kernel (width, in,
    depth_multiplier), pointwise_kernel (1, in * depth_multiplier, filters)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 depthwise_regularizer=None, pointwise_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, **kwargs):  # fmt: skip
        super().__init__(filters, kernel_size, 1, strides=strides, padding=padding, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = _init.get(depthwise_initializer)
        self.pointwise_initializer = _init.get(pointwise_initializer)
        self.depthwise_regularizer = _get("regularizer", depthwise_regularizer)
        self.pointwise_regularizer = _get("regularizer", pointwise_regularizer)
        self.depthwise_constraint = _get("constraint", depthwise_constraint)
        self.pointwise_constraint = _get("constraint", pointwise_constraint)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape) -> None:
        self._depthwise(input_shape, self.depth_multiplier, self.depthwise_initializer,
                        self.depthwise_regularizer, self.depthwise_constraint)  # fmt: skip
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel",
            shape=(1, self._channels(input_shape) * self.depth_multiplier, self.filters),
            initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
        )
        self._bias()

    def _conv(self, inputs):
        inputs, padding = self._padded(inputs)
        out = nn_composites.separable_conv2d(
            array_ops.expand_dims(inputs, 1),
            array_ops.expand_dims(self.depthwise_kernel, 0),
            array_ops.expand_dims(self.pointwise_kernel, 0),
            strides=[1, 1, self.strides[0], 1],
            padding=padding,
            rate=[1, self.dilation_rate[0]],
        )
        return array_ops.squeeze(out, [1])


class _Pooling3D(Layer):
    _op = None

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding="valid", data_format=None,
                 **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.pool_size = _tuple(pool_size, 3)
        self.strides = self.pool_size if strides is None else _tuple(strides, 3)
        self.padding = padding.lower()
        self.data_format = data_format or backend.image_data_format()
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        # channels_first pools channels_last between two transposes (the same values).
        first = self.data_format == "channels_first"
        x = array_ops.transpose(inputs, [0, 2, 3, 4, 1]) if first else inputs
        out = type(self)._op(
            x,
            ksize=[1, *self.pool_size, 1],
            strides=[1, *self.strides, 1],
            padding=self.padding.upper(),
        )
        return array_ops.transpose(out, [0, 4, 1, 2, 3]) if first else out


class MaxPooling3D(_Pooling3D):
    """3-D max pooling over (depth, height, width)."""

    _op = staticmethod(conv3d_ops.max_pool3d)


class AveragePooling3D(_Pooling3D):
    """3-D average pooling over (depth, height, width)."""

    _op = staticmethod(conv3d_ops.avg_pool3d)


class GlobalAveragePooling3D(_GlobalPooling):
    """The mean over the three spatial axes."""

    _reduce = staticmethod(reduction_ops.reduce_mean)


class GlobalMaxPooling3D(_GlobalPooling):
    """The maximum over the three spatial axes."""

    _reduce = staticmethod(reduction_ops.reduce_max)


Convolution3D = Conv3D
Convolution3DTranspose = Conv3DTranspose
Convolution1DTranspose = Conv1DTranspose
SeparableConvolution1D = SeparableConv1D
SeparableConvolution2D = SeparableConv2D
Convolution2DTranspose = Conv2DTranspose
MaxPool3D = MaxPooling3D
AvgPool3D = AveragePooling3D
GlobalAvgPool3D = GlobalAveragePooling3D
GlobalMaxPool3D = GlobalMaxPooling3D
GlobalAvgPool1D = GlobalAveragePooling1D
GlobalMaxPool1D = GlobalMaxPooling1D
