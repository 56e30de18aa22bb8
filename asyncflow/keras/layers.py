"""`tf.keras.layers` (a core subset) in TF1 graph mode.

Each layer is an engine.Layer: named at construction ("dense", "dense_1", ...), weights
made by `build` as resource variables with Keras' initializer defaults
(kernel 'glorot_uniform', bias 'zeros'), ops under the layer's name scope.  The
computations are the graph ops TF's Keras layers use (MatMul + BiasAdd, Conv2D,
MaxPool, ...); batch normalization reuses tf.layers' fused and moments paths
(layer_functions), keeping their moving-average updates as the layer's `updates`
instead of the UPDATE_OPS collection, as Keras does.

`training=None` means Keras' learning phase (backend.learning_phase()): False unless
`fit`/`train_on_batch` feeds True.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, math_composites, tensor_shape
from asyncflow import graph as ops
from asyncflow import layer_functions as _lf
from asyncflow.graph import GraphKeys
from asyncflow.keras import activations, backend
from asyncflow.keras import initializers as _init
from asyncflow.keras import layers_attention as _layers_attention
from asyncflow.keras import layers_conv3d as _layers_conv3d
from asyncflow.keras import layers_cudnn as _layers_cudnn
from asyncflow.keras import layers_einsum as _layers_einsum
from asyncflow.keras import layers_kernelized as _layers_kernelized
from asyncflow.keras import layers_local as _layers_local
from asyncflow.keras import layers_more as _layers_more
from asyncflow.keras import layers_norm_act as _layers_norm_act
from asyncflow.keras import layers_preprocessing as _layers_preprocessing
from asyncflow.keras import layers_rnn_cells as _layers_rnn_cells
from asyncflow.keras import layers_shape as _layers_shape
from asyncflow.keras import masking as _masking
from asyncflow.keras.engine import (
    Input,
    InputLayer,
    InputSpec,
    Layer,
    disable_v2_dtype_behavior,
    enable_v2_dtype_behavior,
)
from asyncflow.keras.feature_layers import DenseFeatures
from asyncflow.keras.recurrent import (
    GRU,
    LSTM,
    RNN,
    Bidirectional,
    GRUCell,
    LSTMCell,
    SimpleRNN,
    SimpleRNNCell,
    StackedRNNCells,
)
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_cond,
    conv_ops,
    math_ops,
    matmul_ops,
    nn_impl,
    nn_ops,
    pooling_ops,
)

__all__ = [
    "Layer",
    "InputLayer",
    "Input",
    "InputSpec",
    "Dense",
    "Activation",
    "Dropout",
    "Flatten",
    "Reshape",
    "Conv2D",
    "Convolution2D",
    "MaxPooling2D",
    "MaxPool2D",
    "AveragePooling2D",
    "AvgPool2D",
    "BatchNormalization",
    "Embedding",
    "Concatenate",
    "Add",
    "Subtract",
    "Multiply",
    "Average",
    "Maximum",
    "Minimum",
    "concatenate",
    "add",
    "subtract",
    "multiply",
    "average",
    "maximum",
    "minimum",
    "Lambda",
    "RNN",
    "StackedRNNCells",
    "SimpleRNN",
    "SimpleRNNCell",
    "LSTM",
    "LSTMCell",
    "GRU",
    "GRUCell",
    "Bidirectional",
    *_layers_more.__all__,
    *_layers_norm_act.__all__,
    *_layers_attention.__all__,
    *_layers_einsum.__all__,
    *_layers_conv3d.__all__,
    *_layers_shape.__all__,
    *_layers_preprocessing.__all__,
    *_layers_local.__all__,
    *_layers_rnn_cells.__all__,
    *_layers_cudnn.__all__,
    "DenseFeatures",
    "Masking",
    "enable_v2_dtype_behavior",
    "disable_v2_dtype_behavior",
]
# tf.keras.layers also holds the layers_* modules' layers (modules of their own for size).
for _module in (
    _layers_more,
    _layers_norm_act,
    _layers_attention,
    _layers_einsum,
    _layers_conv3d,
    _layers_shape,
    _layers_preprocessing,
    _layers_local,
    _layers_rnn_cells,
    _layers_cudnn,
):
    globals().update({_name: getattr(_module, _name) for _name in _module.__all__})
Masking = _masking.Masking  # (the mask-propagating one)


class _Experimental:
    """`tf.keras.layers.experimental` (the part asyncflow has)."""

    EinsumDense = _layers_einsum.EinsumDense
    RandomFourierFeatures = _layers_kernelized.RandomFourierFeatures
    preprocessing = _layers_preprocessing.preprocessing


experimental = _Experimental()


def smart_cond(pred, true_fn, false_fn):
    """Pick a branch at build time when `pred` is a Python/numpy bool or int, or a
    tensor of known value; otherwise `cond` on it at run time."""
    if isinstance(pred, (bool, int, np.bool_, np.integer)):
        return true_fn() if pred else false_fn()
    value = ops.constant_value(ops.convert_to_tensor(pred))
    if value is not None:
        return true_fn() if bool(value) else false_fn()
    return control_flow_cond.cond(pred, true_fn, false_fn)


def _training(training):
    return backend.learning_phase() if training is None else training


def _constraint(value):
    from asyncflow.keras import constraints

    return constraints.get(value)


def _regularizer(value):
    if value is None or callable(value):
        return value
    from asyncflow.keras import regularizers

    return regularizers.get(value)


class Dense(Layer):
    """activation(inputs @ kernel + bias), contracting the inputs' last axis.

    Raises:
      ValueError: (at the first call) the inputs' last dimension is unknown.
    """

    def __init__(
        self,
        units,
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
        super().__init__(activity_regularizer=_regularizer(activity_regularizer), **kwargs)
        self.supports_masking = True
        self.units = int(units)
        if self.units < 0:
            raise ValueError(
                "Received an invalid value for `units`, expected a positive integer. "
                f"Received: units={units}"
            )
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _regularizer(kernel_regularizer)
        self.bias_regularizer = _regularizer(bias_regularizer)
        self.kernel_constraint = _constraint(kernel_constraint)
        self.bias_constraint = _constraint(bias_constraint)
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape) -> None:
        input_shape = tensor_shape.TensorShape(input_shape)
        last_dim = tensor_shape.dimension_value(input_shape[-1]) if input_shape.ndims else None
        if last_dim is None:
            raise ValueError(
                "The last dimension of the inputs to a Dense layer should be defined. "
                f"Found None. Full input shape received: {input_shape}"
            )
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last_dim})
        self.kernel = self.add_weight(
            "kernel",
            shape=[last_dim, self.units],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
            dtype=self.dtype,
            trainable=True,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                shape=[self.units],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
                dtype=self.dtype,
                trainable=True,
            )
        self.built = True

    def call(self, inputs):
        if inputs.dtype.base_dtype != dtypes.as_dtype(self.dtype):
            inputs = cast_ops.cast(inputs, self.dtype)
        rank = inputs.shape.ndims
        if rank == 2 or rank is None:
            outputs = matmul_ops.matmul(inputs, self.kernel)
        else:
            outputs = math_composites.tensordot(inputs, self.kernel, [[rank - 1], [0]])
            outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias)
        return self.activation(outputs)

    def compute_output_shape(self, input_shape):
        return tensor_shape.TensorShape(input_shape)[:-1].concatenate([self.units])


class Activation(Layer):
    """Applies an activation function (by name or callable)."""

    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)


class Dropout(Layer):
    """Zeroes a fraction `rate` of the inputs (scaling the rest by 1/(1-rate)) in
    training; the identity otherwise.

    Raises:
      ValueError: rate outside [0, 1].
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(rate, (int, float)) and not 0 <= rate <= 1:
            raise ValueError(
                f"Invalid value {rate} received for `rate`, expected a value between 0 and 1."
            )
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed
        self.supports_masking = True

    def _noise_shape(self, inputs):
        # Keras lets None stand for the input's own (possibly dynamic) size there.
        if self.noise_shape is None or None not in tuple(self.noise_shape):
            return self.noise_shape
        dynamic = array_ops.shape(inputs)
        return [dynamic[i] if n is None else n for i, n in enumerate(self.noise_shape)]

    def call(self, inputs, training=None):
        def dropped():
            return nn_impl.dropout(
                inputs, noise_shape=self._noise_shape(inputs), seed=self.seed, rate=self.rate
            )

        return smart_cond(_training(training), dropped, lambda: array_ops.identity(inputs))


class Flatten(Layer):
    """Flattens every axis but the batch axis (channels_first inputs are moved to
    channels_last first)."""

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format or backend.image_data_format()

    def call(self, inputs):
        if self.data_format == "channels_first" and inputs.shape.ndims and inputs.shape.ndims > 2:
            perm = [0] + list(range(2, inputs.shape.ndims)) + [1]
            inputs = array_ops.transpose(inputs, perm)
        return _lf.flatten(inputs, name=_lf.IN_LAYER_SCOPE)


class Reshape(Layer):
    """Reshapes each example to `target_shape` (one entry may be -1).

    Raises:
      ValueError: more than one -1 in target_shape.
    """

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(target_shape)
        if sum(1 for d in self.target_shape if d == -1) > 1:
            raise ValueError(
                "There must be at most one unknown dimension in output_shape. "
                f"Received: output_shape={self.target_shape}."
            )

    def call(self, inputs):
        batch = array_ops.shape(inputs)[:1]
        out = array_ops.reshape(inputs, array_ops.concat([batch, list(self.target_shape)], 0))
        static = inputs.shape
        if static.ndims is not None and static[1:].is_fully_defined() and -1 in self.target_shape:
            known = int(np.prod([d for d in self.target_shape if d != -1]))
            total = int(np.prod(static[1:].as_list()))
            dims = [total // known if d == -1 else d for d in self.target_shape]
        else:
            dims = list(self.target_shape)
        out.set_shape(
            [static[0] if static.ndims else None] + [None if d == -1 else d for d in dims]
        )
        return out


def _tuple(value, n, name):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(
            f"The `{name}` argument must be a tuple of {n} integers. Received: {value}"
        )
    return value


class Conv2D(Layer):
    """2-D convolution (kernel height x width x in x filters) plus bias and activation.

    Raises:
      ValueError: bad strides/kernel_size, filters not divisible by `groups`, or (at the
        first call) unknown channels or channels not divisible by `groups`.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=(1, 1),
        padding="valid",
        data_format=None,
        dilation_rate=(1, 1),
        groups=1,
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
        super().__init__(activity_regularizer=_regularizer(activity_regularizer), **kwargs)
        self.filters = int(filters)
        self.kernel_size = _tuple(kernel_size, 2, "kernel_size")
        self.strides = _tuple(strides, 2, "strides")
        self.padding = padding.lower()
        if self.padding not in ("valid", "same"):
            raise ValueError(
                f"The `padding` argument must be one of 'valid', 'same'. Received: {padding}"
            )
        self.data_format = data_format or backend.image_data_format()
        self.dilation_rate = _tuple(dilation_rate, 2, "dilation_rate")
        self.groups = groups or 1
        if self.filters % self.groups != 0:
            raise ValueError(
                "The number of filters must be evenly divisible by the number of groups. "
                f"Received: groups={self.groups}, filters={self.filters}"
            )
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _regularizer(kernel_regularizer)
        self.bias_regularizer = _regularizer(bias_regularizer)
        self.kernel_constraint = _constraint(kernel_constraint)
        self.bias_constraint = _constraint(bias_constraint)
        self.input_spec = InputSpec(min_ndim=4)

    def _channel_axis(self) -> int:
        return 1 if self.data_format == "channels_first" else -1

    def build(self, input_shape) -> None:
        input_shape = tensor_shape.TensorShape(input_shape)
        channels = tensor_shape.dimension_value(input_shape[self._channel_axis()])
        if channels is None:
            raise ValueError(
                "The channel dimension of the inputs should be defined. The input_shape "
                f"received is {input_shape}, where axis {self._channel_axis()} (0-based) is "
                "the channel dimension, which found to be `None`."
            )
        if channels % self.groups != 0:
            raise ValueError(
                "The number of input channels must be evenly divisible by the number of "
                f"groups. Received groups={self.groups}, but the input has {channels} "
                f"channels (full input shape is {input_shape})."
            )
        self.kernel = self.add_weight(
            "kernel",
            shape=self.kernel_size + (channels // self.groups, self.filters),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
            trainable=True,
            dtype=self.dtype,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                shape=(self.filters,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
                trainable=True,
                dtype=self.dtype,
            )
        self.built = True

    def call(self, inputs):
        fmt = "NCHW" if self.data_format == "channels_first" else "NHWC"
        if self.groups > 1:
            outputs = self._grouped(inputs, fmt)
        else:
            outputs = conv_ops.conv2d(
                inputs,
                self.kernel,
                strides=_strides4(self.strides, fmt),
                padding=self.padding.upper(),
                data_format=fmt,
                dilations=_strides4(self.dilation_rate, fmt),
                name="Conv2D",
            )
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias, data_format=fmt)
        return self.activation(outputs)

    def _grouped(self, inputs, fmt):
        """Group g's filters see only group g's input channels: the Conv2D op does that
        itself when the kernel's input depth divides the input's (as TF's does). One
        input channel per group runs as the depthwise convolution it is (the kernel's
        layout reshaped), which is far faster than one small convolution per group."""
        kh, kw, per_group, filters = self.kernel.shape.as_list()
        strides, dilations = _strides4(self.strides, fmt), _strides4(self.dilation_rate, fmt)
        padding = self.padding.upper()
        if per_group == 1:
            kernel = array_ops.reshape(self.kernel, [kh, kw, self.groups, filters // self.groups])
            return conv_ops.depthwise_conv2d_native(
                inputs, kernel, strides, padding, data_format=fmt, dilations=dilations
            )
        return conv_ops.conv2d(
            inputs, self.kernel, strides, padding, data_format=fmt, dilations=dilations,
            name="Conv2D",
        )  # fmt: skip


def _strides4(pair, fmt) -> list:
    return [1, 1, *pair] if fmt == "NCHW" else [1, *pair, 1]


class _Pooling2D(Layer):
    _op = None

    def __init__(
        self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs
    ):
        super().__init__(**kwargs)
        self.pool_size = _tuple(pool_size, 2, "pool_size")
        self.strides = self.pool_size if strides is None else _tuple(strides, 2, "strides")
        self.padding = padding.lower()
        self.data_format = data_format or backend.image_data_format()
        self.input_spec = InputSpec(ndim=4)

    def call(self, inputs):
        fmt = "NCHW" if self.data_format == "channels_first" else "NHWC"
        return type(self)._op(
            inputs,
            ksize=_strides4(self.pool_size, fmt),
            strides=_strides4(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
        )


class MaxPooling2D(_Pooling2D):
    """2-D max pooling (pool_size (2, 2), strides = pool_size, 'valid')."""

    _op = staticmethod(pooling_ops.max_pool)


class AveragePooling2D(_Pooling2D):
    """2-D average pooling (pool_size (2, 2), strides = pool_size, 'valid')."""

    _op = staticmethod(pooling_ops.avg_pool)


class BatchNormalization(Layer):
    """Normalizes over `axis` with batch statistics in training and moving averages
    otherwise; gamma, beta trainable, moving_mean, moving_variance not.

    Raises:
      ValueError: (at the first call) an axis out of range or of unknown size.
    """

    def __init__(
        self,
        axis=-1,
        momentum=0.99,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        moving_mean_initializer="zeros",
        moving_variance_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        fused=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.axis = axis if isinstance(axis, int) else list(axis)
        self.momentum, self.epsilon = momentum, epsilon
        self.center, self.scale, self.fused = center, scale, fused
        self.beta_initializer = _init.get(beta_initializer)
        self.gamma_initializer = _init.get(gamma_initializer)
        self.moving_mean_initializer = _init.get(moving_mean_initializer)
        self.moving_variance_initializer = _init.get(moving_variance_initializer)
        self.beta_regularizer = _regularizer(beta_regularizer)
        self.gamma_regularizer = _regularizer(gamma_regularizer)
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint

    def build(self, input_shape) -> None:
        input_shape = tensor_shape.TensorShape(input_shape)
        rank = input_shape.ndims
        if rank is None:
            raise ValueError(f"Input has undefined rank. Received: input_shape={input_shape}.")
        ax = self.axis if isinstance(self.axis, int) else self.axis[0]
        if not -rank <= ax < rank:
            raise ValueError(f"Invalid axis: {ax}")
        self._ax = ax % rank
        channels = tensor_shape.dimension_value(input_shape[self._ax])
        if channels is None:
            raise ValueError(
                "Input has undefined `axis` dimension. Received input with shape "
                f"{tuple(input_shape.as_list())} and axis={self.axis}"
            )
        self._use_fused = (
            (rank == 4 and self._ax in (1, 3)) if self.fused is None else bool(self.fused)
        )
        pshape = (channels,)
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self.add_weight(
                "gamma",
                pshape,
                initializer=self.gamma_initializer,
                regularizer=self.gamma_regularizer,
                constraint=self.gamma_constraint,
            )
        if self.center:
            self.beta = self.add_weight(
                "beta",
                pshape,
                initializer=self.beta_initializer,
                regularizer=self.beta_regularizer,
                constraint=self.beta_constraint,
            )
        self.moving_mean = self.add_weight(
            "moving_mean", pshape, trainable=False, initializer=self.moving_mean_initializer
        )
        self.moving_variance = self.add_weight(
            "moving_variance",
            pshape,
            trainable=False,
            initializer=self.moving_variance_initializer,
        )
        self.built = True

    def call(self, inputs, training=None):
        training = _training(training)
        # tf.layers' paths put their updates in UPDATE_OPS; a Keras layer owns them.
        collected = ops.get_collection_ref(GraphKeys.UPDATE_OPS)
        before = len(collected)
        rank = inputs.shape.ndims
        if self._use_fused:
            channels = tensor_shape.dimension_value(inputs.shape[self._ax])
            out = _lf._fused_bn(
                inputs,
                self.gamma,
                self.beta,
                self.moving_mean,
                self.moving_variance,
                self._ax,
                channels,
                self.epsilon,
                self.momentum,
                training,
            )
        else:
            out = _lf._plain_bn(
                inputs,
                self.gamma,
                self.beta,
                self.moving_mean,
                self.moving_variance,
                self._ax,
                rank,
                self.epsilon,
                self.momentum,
                training,
            )
        self.add_update(list(collected[before:]))
        del collected[before:]
        return out


class Embedding(Layer):
    """Looks up rows of an (input_dim, output_dim) matrix (initialized 'uniform')
    for integer indices."""

    def __init__(
        self,
        input_dim,
        output_dim,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        activity_regularizer=None,
        embeddings_constraint=None,
        mask_zero=False,
        input_length=None,
        **kwargs,
    ):
        if input_length is not None and "input_shape" not in kwargs:
            kwargs["input_shape"] = (input_length,)
        super().__init__(activity_regularizer=_regularizer(activity_regularizer), **kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = _init.get(embeddings_initializer)
        self.embeddings_regularizer = _regularizer(embeddings_regularizer)
        self.embeddings_constraint = embeddings_constraint
        self.mask_zero, self.input_length = mask_zero, input_length
        self.supports_masking = mask_zero

    def build(self, input_shape) -> None:
        self.embeddings = self.add_weight(
            "embeddings",
            shape=(self.input_dim, self.output_dim),
            initializer=self.embeddings_initializer,
            regularizer=self.embeddings_regularizer,
            constraint=self.embeddings_constraint,
        )
        self.built = True

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return math_ops.not_equal(inputs, 0)

    def call(self, inputs):
        if inputs.dtype not in (dtypes.int32, dtypes.int64):
            inputs = cast_ops.cast(inputs, dtypes.int32)
        return nn_impl.embedding_lookup(self.embeddings, inputs)


class _Merge(Layer):
    """A layer combining a list of tensors of one shape (its mask: the AND of theirs)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return _masking.merge_mask(inputs, mask)

    def _merge(self, inputs):
        raise NotImplementedError

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError(
                "A merge layer should be called on a list of inputs. "
                f"Received: inputs={inputs} (not a list of tensors)"
            )
        return self._merge(list(inputs))


def _fold(fn):
    def merge(self, inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = fn(out, x)
        return out

    return merge


class Add(_Merge):
    """Sums a list of tensors."""

    _merge = _fold(lambda a, b: a + b)


class Subtract(_Merge):
    """inputs[0] - inputs[1]."""

    def _merge(self, inputs):
        if len(inputs) != 2:
            raise ValueError(
                f"A `Subtract` layer should be called on exactly 2 inputs. "
                f"Received: inputs={inputs}"
            )
        return inputs[0] - inputs[1]


class Multiply(_Merge):
    """Multiplies a list of tensors element-wise."""

    _merge = _fold(lambda a, b: a * b)


class Maximum(_Merge):
    """Element-wise maximum of a list of tensors."""

    _merge = _fold(math_ops.maximum)


class Minimum(_Merge):
    """Element-wise minimum of a list of tensors."""

    _merge = _fold(math_ops.minimum)


class Average(_Merge):
    """Element-wise mean of a list of tensors."""

    def _merge(self, inputs):
        return _fold(lambda a, b: a + b)(self, inputs) / len(inputs)


class Concatenate(_Merge):
    """Concatenates a list of tensors along `axis` (default -1)."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def _merge(self, inputs):
        return array_ops.concat(inputs, axis=self.axis)

    def compute_mask(self, inputs, mask=None):
        return _masking.concat_mask(inputs, mask, self.axis)


def _functional(cls):
    def fn(inputs, **kwargs):
        return cls(**kwargs)(inputs)

    fn.__name__ = cls.__name__.lower()
    fn.__doc__ = f"`{cls.__name__}(**kwargs)(inputs)`."
    return fn


add = _functional(Add)
subtract = _functional(Subtract)
multiply = _functional(Multiply)
maximum = _functional(Maximum)
minimum = _functional(Minimum)
average = _functional(Average)


def concatenate(inputs, axis=-1, **kwargs):
    """`Concatenate(axis=axis, **kwargs)(inputs)`."""
    return Concatenate(axis=axis, **kwargs)(inputs)


class Lambda(Layer):
    """Wraps a function of the inputs (no weights) as a layer."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        self.function = function
        self.arguments = arguments or {}
        self._output_shape = output_shape
        self.mask = mask
        self.supports_masking = mask is not None

    def call(self, inputs, mask=None, training=None):
        kwargs = dict(self.arguments)
        if "mask" in _parameters(self.function):
            kwargs["mask"] = mask
        return self.function(inputs, **kwargs)

    def compute_mask(self, inputs, mask=None):
        """`mask(inputs, mask)` when the layer's mask is a function, else the mask given
        to the constructor."""
        if callable(self.mask):
            return self.mask(inputs, mask)
        return self.mask


def _parameters(fn) -> tuple:
    import inspect

    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


Convolution2D = Conv2D
MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D
