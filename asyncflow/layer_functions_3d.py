"""`af.layers`' 3-D functional layers: `conv3d`, `conv3d_transpose`, `max_pooling3d`,
`average_pooling3d` (TF1's `tf.compat.v1.layers`), with TF1's variable names
("conv3d/kernel" [kd, kh, kw, in, filters], "conv3d/bias") and scoping, as the 1-D and
2-D layers in layer_functions.py.
"""

from __future__ import annotations

import numpy as np

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow import var_scope as vs
from asyncflow.layer_functions import (
    _activity,
    _bias,
    _channels,
    _deconv_length,
    _layer_scope,
    _op_scope,
    _padding,
)
from asyncflow.ops import array_ops, conv3d_ops, init_ops

__all__ = ["conv3d", "conv3d_transpose", "max_pooling3d", "average_pooling3d"]


def _triple(value, name: str) -> tuple[int, int, int]:
    if isinstance(value, int | np.integer):
        return (int(value),) * 3
    value = tuple(int(v) for v in value)
    if len(value) != 3:
        raise ValueError(f"The `{name}` argument must be a tuple of 3 integers. Received: {value}")
    return value


def _data_format(data_format: str) -> str:
    if data_format == "channels_last":
        return "NDHWC"
    if data_format == "channels_first":
        return "NCDHW"
    raise ValueError(
        f"The `data_format` argument must be 'channels_last' or 'channels_first'. "
        f"Received: {data_format}"
    )


def _five(fmt: str, vals) -> list[int]:
    return [1, 1, *vals] if fmt == "NCDHW" else [1, *vals, 1]


def _bias_fmt(fmt: str) -> str:
    return "NCHW" if fmt == "NCDHW" else "NHWC"  # bias_add's names for channel axis 1 / -1


def conv3d(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1, 1), activation=None,
           use_bias=True, kernel_initializer=None,
           bias_initializer=init_ops.zeros_initializer(), kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):  # fmt: skip
    """3-D convolution layer: variables "conv3d/kernel" [kd, kh, kw, in, filters] and
    "conv3d/bias".

    Raises:
      ValueError: the channel dimension of inputs is unknown, a bad padding or
        data_format, or a repeated name without reuse=True.
    """
    fmt = _data_format(data_format)
    k = _triple(kernel_size, "kernel_size")
    s = _triple(strides, "strides")
    d = _triple(dilation_rate, "dilation_rate")
    pad = _padding(padding)
    with _layer_scope(name, "conv3d", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 5)
        kernel = vs.get_variable(
            "kernel", [*k, in_ch, int(filters)], dtype=inputs.dtype,
            initializer=kernel_initializer, regularizer=kernel_regularizer,
            constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        outputs = conv3d_ops.conv3d(
            inputs, kernel, _five(fmt, s), pad, data_format=fmt, dilations=_five(fmt, d),
            name="Conv3D",
        )  # fmt: skip
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, _bias_fmt(fmt))  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def conv3d_transpose(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                     data_format="channels_last", activation=None, use_bias=True,
                     kernel_initializer=None, bias_initializer=init_ops.zeros_initializer(),
                     kernel_regularizer=None, bias_regularizer=None,
                     activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                     trainable=True, name=None, reuse=None):  # fmt: skip
    """Transposed 3-D convolution: kernel [kd, kh, kw, filters, in]; each output size is
    in*stride ('same') or in*stride + max(k - stride, 0) ('valid'), as TF.

    Raises:
      ValueError: unknown channels, a bad padding or data_format, a repeated name.
    """
    fmt = _data_format(data_format)
    k = _triple(kernel_size, "kernel_size")
    s = _triple(strides, "strides")
    pad = _padding(padding)
    with _layer_scope(name, "conv3d_transpose", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 5)
        kernel = vs.get_variable(
            "kernel", [*k, int(filters), in_ch], dtype=inputs.dtype,
            initializer=kernel_initializer, regularizer=kernel_regularizer,
            constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        axes = (2, 3, 4) if fmt == "NCDHW" else (1, 2, 3)
        dyn = array_ops.shape(inputs)
        sizes = [
            dyn[a] * si + (0 if pad == "SAME" else max(ki - si, 0))
            for a, si, ki in zip(axes, s, k)
        ]
        f = int(filters)
        parts = [dyn[0], f, *sizes] if fmt == "NCDHW" else [dyn[0], *sizes, f]
        outputs = conv3d_ops.conv3d_transpose(
            inputs, kernel, array_ops.stack(parts), _five(fmt, s), pad, data_format=fmt,
            name="conv3d_transpose",
        )  # fmt: skip
        st = inputs.shape
        static = [
            _deconv_length(tensor_shape.dimension_value(st[a]), si, ki, pad)
            for a, si, ki in zip(axes, s, k)
        ]
        b = tensor_shape.dimension_value(st[0])
        outputs.set_shape([b, f, *static] if fmt == "NCDHW" else [b, *static, f])
        outputs = _bias(outputs, f, inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, _bias_fmt(fmt))  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def _pooling3d(op_fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    fmt = _data_format(data_format)
    k = _triple(pool_size, "pool_size")
    s = _triple(strides, "strides")
    pad = _padding(padding)
    with _op_scope(name, default_name, [inputs]):
        return op_fn(inputs, _five(fmt, k), _five(fmt, s), pad, data_format=fmt)


def max_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):  # fmt: skip
    """3-D max pooling (op "max_pooling3d/MaxPool3D").

    Raises:
      ValueError: a bad pool_size, strides, padding or data_format.
    """
    return _pooling3d(conv3d_ops.max_pool3d, "max_pooling3d", inputs, pool_size, strides,
                      padding, data_format, name)  # fmt: skip


def average_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None):  # fmt: skip
    """3-D average pooling (op "average_pooling3d/AvgPool3D").

    Raises:
      ValueError: a bad pool_size, strides, padding or data_format.
    """
    return _pooling3d(conv3d_ops.avg_pool3d, "average_pooling3d", inputs, pool_size, strides,
                      padding, data_format, name)  # fmt: skip
