"""`tf.keras.layers` Cropping1D/3D, ZeroPadding1D/3D, UpSampling1D/3D and
SpatialDropout3D, with TF 2.21 tf_keras' outputs and configs (channels_first 3-D inputs
are moved to channels_last and back)."""

from __future__ import annotations

from asyncflow import math_composites_2
from asyncflow.keras import backend
from asyncflow.keras.engine import InputSpec, Layer
from asyncflow.keras.layers_more import _SpatialDropout
from asyncflow.ops import array_ops

__all__ = [
    "Cropping1D",
    "Cropping3D",
    "ZeroPadding1D",
    "ZeroPadding3D",
    "UpSampling1D",
    "UpSampling3D",
    "SpatialDropout3D",
]


def _pair(value, what):
    """(before, after) from an int or a pair of ints."""
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received: {value}")
    return value


_ORDINAL = ("1st", "2nd", "3rd")


def _triple_pairs(value, what):
    """((d0, d1), (h0, h1), (w0, w1)) from an int, 3 ints or 3 pairs."""
    if isinstance(value, int):
        return ((value, value),) * 3
    value = tuple(value)
    if len(value) != 3:
        raise ValueError(f"`{what}` should have 3 elements. Received: {value}.")
    return tuple((v, v) if isinstance(v, int) else _pair(v, f"{_ORDINAL[i]} entry of {what}")
                 for i, v in enumerate(value))  # fmt: skip


def _data_format(layer, data_format):
    layer.data_format = data_format or backend.image_data_format()
    if layer.data_format not in ("channels_first", "channels_last"):
        raise ValueError(
            'The `data_format` argument must be one of "channels_first", "channels_last". '
            f"Received: {data_format}"
        )


def _channels_last_call(layer, inputs, fn):
    """`fn` on channels_last 5-D inputs; channels_first ones are moved there and back
    (the same values: these layers only move or repeat spatial positions)."""
    if layer.data_format != "channels_first":
        return fn(inputs)
    out = fn(array_ops.transpose(inputs, [0, 2, 3, 4, 1]))
    return array_ops.transpose(out, [0, 4, 1, 2, 3])


class Cropping1D(Layer):
    """Crops (start, end) steps of (batch, steps, features) inputs."""

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = _pair(cropping, "cropping")
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        start, end = self.cropping
        return inputs[:, start : -end if end else None, :]


class Cropping3D(Layer):
    """Crops ((d0, d1), (h0, h1), (w0, w1)) of 5-D inputs."""

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.cropping = _triple_pairs(cropping, "cropping")
        _data_format(self, data_format)
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        return _channels_last_call(self, inputs, self._crop)

    def _crop(self, inputs):
        (d0, d1), (h0, h1), (w0, w1) = self.cropping
        return inputs[:, d0 : -d1 if d1 else None, h0 : -h1 if h1 else None,
                      w0 : -w1 if w1 else None, :]  # fmt: skip


class ZeroPadding1D(Layer):
    """Pads (start, end) zero steps onto (batch, steps, features) inputs."""

    def __init__(self, padding=1, **kwargs):
        super().__init__(**kwargs)
        self.padding = _pair(padding, "padding")
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        return array_ops.pad(inputs, [[0, 0], list(self.padding), [0, 0]])


class ZeroPadding3D(Layer):
    """Pads ((d0, d1), (h0, h1), (w0, w1)) zeros onto 5-D inputs."""

    def __init__(self, padding=(1, 1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.padding = _triple_pairs(padding, "padding")
        _data_format(self, data_format)
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        pads = [[0, 0], *[list(p) for p in self.padding], [0, 0]]
        return _channels_last_call(self, inputs, lambda x: array_ops.pad(x, pads))


def _repeat(inputs, sizes):
    out = inputs
    dims = inputs.shape.as_list()
    for axis, size in enumerate(sizes, start=1):
        out = math_composites_2.repeat(out, size, axis=axis)
        if dims[axis] is not None:
            dims[axis] *= size
    out.set_shape(dims)
    return out


class UpSampling1D(Layer):
    """Repeats each step `size` times."""

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        self.size = int(size)
        self.input_spec = InputSpec(ndim=3)

    def call(self, inputs):
        return _repeat(inputs, [self.size])


class UpSampling3D(Layer):
    """Repeats depth, rows and columns `size` times (nearest neighbour)."""

    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.size = (size,) * 3 if isinstance(size, int) else tuple(size)
        _data_format(self, data_format)
        self.input_spec = InputSpec(ndim=5)

    def call(self, inputs):
        return _channels_last_call(self, inputs, lambda x: _repeat(x, self.size))


class SpatialDropout3D(_SpatialDropout):
    """Drops whole 3-D feature maps of 5-D inputs in training."""

    def __init__(self, rate, data_format=None, **kwargs):
        super().__init__(rate, data_format=data_format, **kwargs)
        self.input_spec = InputSpec(ndim=5)


