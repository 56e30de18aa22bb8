"""TF1 initializers (`tf.compat.v1.*_initializer`): callables building initial values.

An initializer is called as `init(shape, dtype=None, partition_info=None)` and returns
a Tensor (ops in the current graph).  Constant initializers build a Const; random
ones call asyncflow.ops.random_ops (imported when called, so this module imports on
its own).  No ops are registered here.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops

__all__ = [
    "Initializer",
    "zeros_initializer",
    "ones_initializer",
    "constant_initializer",
    "random_uniform_initializer",
    "random_normal_initializer",
    "truncated_normal_initializer",
    "uniform_unit_scaling_initializer",
    "variance_scaling_initializer",
    "glorot_uniform_initializer",
    "glorot_normal_initializer",
    "orthogonal_initializer",
    "identity_initializer",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "lecun_uniform",
]


def _static_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, ops.Tensor):
        value = ops.constant_value(shape)
        if value is None:
            raise ValueError(f"Initializer needs a statically known shape, got {shape}")
        return tuple(int(d) for d in value.reshape(-1))
    dims = tensor_shape.as_shape(shape).as_list()
    if any(d is None for d in dims):
        raise ValueError(f"Initializer needs a fully defined shape, got {shape}")
    return tuple(dims)


def _filled(shape, scalar, dtype, name) -> ops.Tensor:
    """A Const of `shape` filled with `scalar`, stored as a 0-stride broadcast (no memory)."""
    dtype = dtypes.as_dtype(dtype)
    one = np.asarray(scalar, dtype=dtype.as_numpy_dtype)
    arr = np.broadcast_to(one, _static_shape(shape))  # read-only view, as Const values are
    return ops.apply_op("Const", [], {"value": arr, "dtype": dtype}, name=name).outputs[0]


def _assert_float_dtype(dtype) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def _compute_fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape: dense [in, out], conv [..., in, out]."""
    if len(shape) < 1:
        fan_in = fan_out = 1
    elif len(shape) == 1:
        fan_in = fan_out = shape[0]
    elif len(shape) == 2:
        fan_in, fan_out = shape
    else:
        receptive_field = 1
        for d in shape[:-2]:
            receptive_field *= d
        fan_in = shape[-2] * receptive_field
        fan_out = shape[-1] * receptive_field
    return int(fan_in), int(fan_out)


def _random_ops():
    from asyncflow.ops import random_ops

    return random_ops


class Initializer:
    """Base class: `__call__(shape, dtype=None, partition_info=None) -> Tensor`."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Zeros(Initializer):
    """Initializer generating tensors of zeros."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _filled(shape, 0, dtype or self.dtype, "zeros")

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """Initializer generating tensors of ones."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _filled(shape, 1, dtype or self.dtype, "ones")

    def get_config(self):
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """Initializer generating tensors of a constant value.

    `value` is a scalar (filled) or a list/array: with fewer elements than the shape,
    the last one repeats (TF1's `constant` rule).

    Raises:
      TypeError: `value` has more elements than the shape, or (verify_shape) a
        different shape.
    """

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        if not np.isscalar(value) and not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(
                f"Invalid type for initial value: {type(value)} (expected Python scalar, list "
                "or tuple of values, or numpy.ndarray)."
            )
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        verify = self._verify_shape if verify_shape is None else verify_shape
        shape = _static_shape(shape)
        arr = dtypes.convert_to_numpy(self.value, dtype)
        if arr.size == 1 and not verify:
            return _filled(shape, arr.reshape(()), dtype, "Const")
        size = int(np.prod(shape))
        if verify and arr.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
        if arr.size > size:
            raise TypeError(
                f"Too many elements provided. Needed at most {size}, but received {arr.size}"
            )
        flat = arr.reshape(-1)
        if arr.size < size:
            flat = np.concatenate([flat, np.repeat(flat[-1:], size - arr.size)])
        from asyncflow.ops import array_ops

        return array_ops.constant(flat.reshape(shape), dtype=dtype)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name}


class RandomUniform(Initializer):
    """Initializer drawing uniformly from [minval, maxval) (maxval None: 1 for floats)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _random_ops().random_uniform(
            shape, self.minval, self.maxval, dtype or self.dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "minval": self.minval,
            "maxval": self.maxval,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class RandomNormal(Initializer):
    """Initializer drawing from a normal distribution."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _random_ops().random_normal(
            shape, self.mean, self.stddev, dtype or self.dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "mean": self.mean,
            "stddev": self.stddev,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class TruncatedNormal(RandomNormal):
    """Initializer drawing from a normal distribution truncated at two stddevs."""

    def __call__(self, shape, dtype=None, partition_info=None):
        return _random_ops().truncated_normal(
            shape, self.mean, self.stddev, dtype or self.dtype, seed=self.seed
        )


class UniformUnitScaling(Initializer):
    """Uniform in [-sqrt(3 / input_size) * factor, ...] (deprecated in TF1, kept)."""

    def __init__(self, factor=1.0, seed=None, dtype=dtypes.float32):
        self.factor, self.seed = factor, seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        scale_shape = partition_info.full_shape if partition_info is not None else shape
        input_size = 1.0
        for d in list(scale_shape)[:-1]:
            input_size *= float(d)
        max_val = math.sqrt(3 / max(input_size, 1.0)) * self.factor
        return _random_ops().random_uniform(
            shape, -max_val, max_val, dtype or self.dtype, seed=self.seed
        )

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


class VarianceScaling(Initializer):
    """Scale-aware random init: stddev (or limit) from scale / fan (in, out or average).

    Raises:
      ValueError: scale <= 0, an unknown mode or distribution, a non-float dtype.
    """

    def __init__(
        self,
        scale=1.0,
        mode="fan_in",
        distribution="truncated_normal",
        seed=None,
        dtype=dtypes.float32,
    ):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError("Invalid `mode` argument:", mode)
        distribution = distribution.lower()
        if distribution not in {"normal", "uniform", "truncated_normal", "untruncated_normal"}:
            raise ValueError("Invalid `distribution` argument:", distribution)
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtype or self.dtype
        scale_shape = partition_info.full_shape if partition_info is not None else shape
        fan_in, fan_out = _compute_fans(list(_static_shape(scale_shape)))
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
        scale = self.scale / max(1.0, fan[self.mode])
        rnd = _random_ops()
        if self.distribution in ("normal", "truncated_normal"):
            # 0.8796...: stddev of a unit normal truncated to [-2, 2] (scipy truncnorm).
            stddev = math.sqrt(scale) / 0.87962566103423978
            return rnd.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return rnd.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return rnd.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class GlorotUniform(VarianceScaling):
    """Glorot (Xavier) uniform: limit sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Glorot (Xavier) normal: truncated normal, stddev sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class Orthogonal(Initializer):
    """Orthogonal matrix init (Saxe et al.), drawn once per call at graph-build time.

    TF draws at run time (random_normal + QR); without a QR op here the matrix is
    drawn with NumPy when the initializer is called and stored as a Const, so each
    run of the variable's initializer gives the same (seed-dependent) value.
    """

    def __init__(self, gain=1.0, seed=None, dtype=dtypes.float32):
        self.gain, self.seed = gain, seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        shape = _static_shape(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        num_rows = int(np.prod(shape[:-1]))
        num_cols = shape[-1]
        flat = (max(num_cols, num_rows), min(num_cols, num_rows))
        # TF1's seed rules (random_seed.get_seed): a graph-level seed alone makes the
        # draw reproducible too; with neither seed it comes from OS entropy.
        from asyncflow import random_seed

        seed, seed2 = random_seed.get_seed(self.seed)
        rng = np.random.default_rng(None if seed is None else [seed, seed2])
        q, r = np.linalg.qr(rng.standard_normal(flat))
        q = q * np.sign(np.diag(r))
        if num_rows < num_cols:
            q = q.T
        from asyncflow.ops import array_ops

        value = (self.gain * q).reshape(shape).astype(dtype.as_numpy_dtype)
        return array_ops.constant(value, dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """gain * the identity matrix (rectangular shapes: ones on the main diagonal)."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _assert_float_dtype(dtype or self.dtype)
        shape = partition_info.full_shape if partition_info is not None else shape
        shape = _static_shape(shape)
        if len(shape) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        from asyncflow.ops import array_ops

        value = (self.gain * np.eye(*shape)).astype(dtype.as_numpy_dtype)
        return array_ops.constant(value, dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


zeros_initializer = Zeros
identity_initializer = Identity
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
uniform_unit_scaling_initializer = UniformUnitScaling
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
orthogonal_initializer = Orthogonal


def lecun_normal(seed=None) -> VarianceScaling:
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None) -> VarianceScaling:
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


def he_normal(seed=None) -> VarianceScaling:
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None) -> VarianceScaling:
    return VarianceScaling(2.0, "fan_in", "uniform", seed)
