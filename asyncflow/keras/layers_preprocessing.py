"""`tf.keras.layers` preprocessing layers as TF 2.21's tf_keras runs them in TF1 graph
mode: Rescaling, Resizing, CenterCrop (TF2's half-pixel-centre resizes, Keras'
smart_resize crop), Normalization (non-trainable mean/variance/count state; `adapt` is
TF2-only, as in TF1 graph mode), Discretization, Hashing (FarmHash, or SipHash with a
salt) and CategoryEncoding; plus AlphaDropout."""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, image
from asyncflow.keras import backend
from asyncflow.keras.engine import Layer
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_cond,
    math_ops,
    random_ops,
    reduction_ops,
    slicing_ops,
    string_hash_ops,
    string_ops,
)

__all__ = [
    "PreprocessingLayer",
    "Rescaling",
    "Resizing",
    "CenterCrop",
    "Normalization",
    "Discretization",
    "Hashing",
    "CategoryEncoding",
    "AlphaDropout",
]

_RESIZE = {
    "bilinear": image.resize_bilinear,
    "nearest": image.resize_nearest_neighbor,
    "bicubic": image.resize_bicubic,
}


def _resize(images, size, interpolation):
    """TF2's tf.image.resize (half-pixel centres), cast back to float32."""
    if interpolation == "area":
        out = image.resize_area(images, size)
    else:
        out = _RESIZE[interpolation](images, size, half_pixel_centers=True)
    return cast_ops.cast(out, dtypes.float32)


def _smart_resize(images, size, interpolation="bilinear"):
    """Keras' smart_resize: the largest centred box of the target's aspect ratio, resized."""
    shape = array_ops.shape(images)
    height, width = shape[-3], shape[-2]
    th, tw = size
    f32, i32 = dtypes.float32, dtypes.int32
    crop_h = cast_ops.cast(cast_ops.cast(width * th, f32) / tw, i32)
    crop_w = cast_ops.cast(cast_ops.cast(height * tw, f32) / th, i32)
    crop_h = math_ops.minimum(height, crop_h)
    crop_w = math_ops.minimum(width, crop_w)
    h0 = cast_ops.cast(cast_ops.cast(height - crop_h, f32) / 2, i32)
    w0 = cast_ops.cast(cast_ops.cast(width - crop_w, f32) / 2, i32)
    start = array_ops.stack([0, h0, w0, 0])
    extent = array_ops.stack([-1, crop_h, crop_w, -1])
    return _resize(array_ops.slice(images, start, extent), list(size), interpolation)


def _check_interpolation(interpolation):
    if interpolation not in (*_RESIZE, "area"):
        raise NotImplementedError(
            f"Resizing(interpolation={interpolation!r}) is not supported by asyncflow "
            f"(supported: {', '.join([*_RESIZE, 'area'])})"
        )


class PreprocessingLayer(Layer):
    """Base of the preprocessing layers (no trainable weights; `adapt` is TF2-only)."""

    def adapt(self, data, batch_size=None, steps=None):
        """Raises RuntimeError: as TF1 graph mode, adapt runs in TF2 only."""
        raise RuntimeError("`adapt` is only supported in tensorflow v2.")


class Rescaling(PreprocessingLayer):
    """inputs * scale + offset."""

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.scale, self.offset = scale, offset

    def call(self, inputs):
        dtype = dtypes.as_dtype(self.dtype)
        x = cast_ops.cast(inputs, dtype)
        return x * cast_ops.cast(self.scale, dtype) + cast_ops.cast(self.offset, dtype)


class Resizing(PreprocessingLayer):
    """Resizes images to (height, width); crop_to_aspect_ratio first crops the largest
    centred box of that aspect ratio."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        _check_interpolation(interpolation)
        self.height, self.width = height, width
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = crop_to_aspect_ratio

    def call(self, inputs):
        size = [self.height, self.width]
        if self.crop_to_aspect_ratio:
            out = _smart_resize(inputs, size, self.interpolation)
        else:
            out = _resize(inputs, size, self.interpolation)
        dims = inputs.shape.as_list()
        out.set_shape([*dims[:-3], self.height, self.width, dims[-1]])
        return out


class CenterCrop(PreprocessingLayer):
    """The centred (height, width) crop; images smaller than that are smart-resized."""

    def __init__(self, height, width, **kwargs):
        super().__init__(**kwargs)
        self.height, self.width = height, width

    def call(self, inputs):
        shape = array_ops.shape(inputs)
        h_diff, w_diff = shape[-3] - self.height, shape[-2] - self.width

        def crop():
            h0 = cast_ops.cast(h_diff / 2, dtypes.int32)
            w0 = cast_ops.cast(w_diff / 2, dtypes.int32)
            return image.crop_to_bounding_box(inputs, h0, w0, self.height, self.width)

        def upsize():
            return _smart_resize(inputs, [self.height, self.width])

        fits = math_ops.logical_and(h_diff >= 0, w_diff >= 0)
        out = control_flow_cond.cond(fits, crop, upsize)
        dims = inputs.shape.as_list()
        out.set_shape([*dims[:-3], self.height, self.width, dims[-1]])
        return out


class Normalization(PreprocessingLayer):
    """(x - mean) / sqrt(variance) per feature of `axis` (with invert, the reverse).
    Without mean/variance the statistics are non-trainable weights (mean 0, variance 1,
    count 0) that `adapt` would fill -- in TF2 only.

    Raises:
      ValueError: only one of mean and variance given.
    """

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        if axis is None:
            axis = ()
        elif isinstance(axis, int):
            axis = (axis,)
        self.axis = tuple(axis)
        if (mean is None) != (variance is None):
            raise ValueError(
                "When setting values directly, both `mean` and `variance` must be set. "
                f"Received: mean={mean} and variance={variance}"
            )
        self.input_mean, self.input_variance, self.invert = mean, variance, invert

    def build(self, input_shape) -> None:
        dims = input_shape.as_list() if hasattr(input_shape, "as_list") else list(input_shape)
        ndim = len(dims)
        keep = [a if a >= 0 else a + ndim for a in self.axis]
        self._keep = keep
        shape = [dims[a] for a in keep]
        self._broadcast = [dims[a] if a in keep else 1 for a in range(ndim)]
        if self.input_mean is None:
            self.adapt_mean = self.add_weight("mean", shape=shape, initializer="zeros",
                                              trainable=False)  # fmt: skip
            self.adapt_variance = self.add_weight("variance", shape=shape, initializer="ones",
                                                  trainable=False)  # fmt: skip
            self.count = self.add_weight("count", shape=(), dtype=dtypes.int64,
                                         initializer="zeros", trainable=False)  # fmt: skip
            self.mean = array_ops.reshape(self.adapt_mean, self._broadcast)
            self.variance = array_ops.reshape(self.adapt_variance, self._broadcast)
        else:
            mean = np.broadcast_to(np.asarray(self.input_mean, np.float32), shape)
            var = np.broadcast_to(np.asarray(self.input_variance, np.float32), shape)
            self.mean = array_ops.constant(mean.reshape(self._broadcast))
            self.variance = array_ops.constant(var.reshape(self._broadcast))
        self.built = True

    def call(self, inputs):
        x = cast_ops.cast(inputs, dtypes.float32)
        std = math_ops.maximum(math_ops.sqrt(self.variance), backend.epsilon())
        if self.invert:
            return self.mean + x * std
        return (x - self.mean) / std


def _encode(indices, num_tokens, output_mode, dtype=dtypes.float32, count_weights=None):
    """one_hot / multi_hot / count of integer indices, counted over the last axis (a
    rank-1 input is one sample, one_hot included, as TF 2.21's tf_keras counts it).

    Raises:
      ValueError: an output of rank above 2.
    """
    if output_mode == "int":
        return indices
    original = indices.shape
    if indices.shape.ndims == 0:
        indices = array_ops.expand_dims(indices, -1)
    if output_mode == "one_hot" and indices.shape.ndims > 1 and indices.shape.as_list()[-1] != 1:
        indices = array_ops.expand_dims(indices, -1)
    if indices.shape.ndims > 2:
        raise ValueError(
            "When output_mode is not `'int'`, maximum supported output rank is 2. Received "
            f"output_mode {output_mode} and input shape {original}, which would result in "
            f"output rank {indices.shape.ndims}."
        )
    hot = slicing_ops.one_hot(indices, num_tokens, dtype=dtype)
    if count_weights is not None:
        weights = cast_ops.cast(count_weights, dtype)
        if weights.shape.ndims < hot.shape.ndims:
            weights = array_ops.expand_dims(weights, -1)
        hot = hot * weights
    counts = reduction_ops.reduce_sum(hot, axis=-2)
    if output_mode == "count":
        return counts
    return math_ops.minimum(counts, 1.0)


_MODES = ("int", "one_hot", "multi_hot", "count")


def _check_mode(name, mode, allowed):
    if mode not in allowed:
        raise ValueError(
            f"Unknown arg for {name} `output_mode`: {mode}. Allowed values are: {list(allowed)}"
        )


class Discretization(PreprocessingLayer):
    """The bucket of each value among sorted `bin_boundaries` (int64), or its one-hot /
    multi-hot / count encoding."""

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int",
                 sparse=False, **kwargs):  # fmt: skip
        kwargs.setdefault("dtype", "int64" if output_mode == "int" else None)
        super().__init__(**kwargs)
        _check_mode("Discretization", output_mode, _MODES)
        if sparse:
            raise NotImplementedError("Discretization(sparse=True) is not supported by asyncflow")
        if bin_boundaries is None:
            raise NotImplementedError(
                "Discretization without bin_boundaries needs `adapt`, which runs in TF2 only"
            )
        if num_bins is not None:
            raise ValueError(
                "`num_bins` and `bin_boundaries` should not be set. Received: "
                f"`num_bins={num_bins}` and `bin_boundaries={bin_boundaries}`"
            )
        self.bin_boundaries = list(bin_boundaries)
        self.num_bins, self.epsilon = num_bins, epsilon
        self.output_mode, self.sparse = output_mode, sparse

    def call(self, inputs):
        buckets = cast_ops.cast(
            math_ops._bucketize(inputs, boundaries=self.bin_boundaries), dtypes.int64
        )
        return _encode(buckets, len(self.bin_boundaries) + 1, self.output_mode)


class Hashing(PreprocessingLayer):
    """Hashes strings (integers as their decimal strings) into `num_bins` bins: FarmHash
    Fingerprint64, or SipHash keyed by `salt`; `mask_value` maps to 0 and the rest to
    1..num_bins-1."""

    def __init__(self, num_bins, mask_value=None, salt=None, output_mode="int",
                 sparse=False, **kwargs):  # fmt: skip
        kwargs.setdefault("dtype", "int64" if output_mode == "int" else None)
        super().__init__(**kwargs)
        if num_bins is None or num_bins <= 0:
            raise ValueError(
                f"The `num_bins` for `Hashing` cannot be `None` or non-positive values. "
                f"Received: num_bins={num_bins}."
            )
        _check_mode("Hashing", output_mode, _MODES)
        if sparse:
            raise NotImplementedError("Hashing(sparse=True) is not supported by asyncflow")
        self.num_bins, self.mask_value = num_bins, mask_value
        self.strong_hash = salt is not None
        if isinstance(salt, int):
            salt = [salt, salt]
        self.salt, self.output_mode, self.sparse = salt, output_mode, sparse

    def call(self, inputs):
        if inputs.dtype != dtypes.string:
            inputs = string_ops.as_string(inputs)
        bins = self.num_bins if self.mask_value is None else self.num_bins - 1
        if self.strong_hash:
            hashed = string_hash_ops.string_to_hash_bucket_strong(inputs, bins, self.salt)
        else:
            hashed = string_hash_ops.string_to_hash_bucket_fast(inputs, bins)
        if self.mask_value is not None:
            masked = math_ops.equal(inputs, str(self.mask_value))
            hashed = slicing_ops.where(masked, array_ops.zeros_like(hashed), hashed + 1)
        return _encode(hashed, self.num_bins, self.output_mode)


class CategoryEncoding(PreprocessingLayer):
    """Encodes integer category ids (< num_tokens) as one_hot, multi_hot or count."""

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        _check_mode("CategoryEncoding", output_mode, _MODES[1:])
        if num_tokens is None:
            raise ValueError(
                "num_tokens must be set to use this layer. If the number of tokens is not "
                "known beforehand, use the IntegerLookup layer instead."
            )
        if num_tokens < 1:
            raise ValueError(f"`num_tokens` must be >= 1. Received: num_tokens={num_tokens}.")
        if sparse:
            raise NotImplementedError(
                "CategoryEncoding(sparse=True) is not supported by asyncflow"
            )
        self.num_tokens, self.output_mode, self.sparse = num_tokens, output_mode, sparse

    def call(self, inputs, count_weights=None):
        if count_weights is not None and self.output_mode != "count":
            # (TF 2.21's message, its braces included)
            raise ValueError(
                "`count_weights` is not used when `output_mode` is not `'count'`. "
                "Received `count_weights={count_weights}`."
            )
        indices = cast_ops.cast(inputs, dtypes.int64)
        return _encode(indices, self.num_tokens, self.output_mode, count_weights=count_weights)


class AlphaDropout(Layer):
    """Dropout that keeps the mean and variance of self-normalizing (SELU) inputs: in
    training, dropped units become SELU's negative saturation and the rest are scaled
    and shifted back."""

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed
        self.supports_masking = True

    def call(self, inputs, training=None):
        if not 0 < self.rate < 1:
            return inputs
        shape = self.noise_shape or array_ops.shape(inputs)

        def dropped():
            alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
            alpha_p = -alpha * scale
            keep = math_ops.greater_equal(
                random_ops.random_uniform(shape, seed=self.seed), self.rate
            )
            keep = cast_ops.cast(keep, inputs.dtype)
            a = ((1 - self.rate) * (1 + self.rate * alpha_p**2)) ** -0.5
            b = -a * alpha_p * self.rate
            return a * (inputs * keep + alpha_p * (1 - keep)) + b

        return backend.in_train_phase(dropped, inputs, training=training)


class _PreprocessingNamespace:
    """`tf.keras.layers.experimental.preprocessing`."""

    PreprocessingLayer = PreprocessingLayer
    Rescaling = Rescaling
    Resizing = Resizing
    CenterCrop = CenterCrop
    Normalization = Normalization
    Discretization = Discretization
    Hashing = Hashing
    CategoryEncoding = CategoryEncoding


preprocessing = _PreprocessingNamespace()
