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
    if isinstance(shape, ops.Tensor) and ops.constant_value(shape) is None:
        # (a shape known only when run, as TF's zeros(shape): warm_start's remapping)
        value = ops.apply_op("Const", [], {"value": one, "dtype": dtype}).outputs[0]
        return ops.apply_op("Fill", [shape, value], {}, name=name).outputs[0]
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
      TypeError: `value` is not a scalar, list, tuple or array, or (verify_shape) has a
        different shape.
      ValueError: `value` has more elements than the shape.
    """

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        if not np.isscalar(value) and not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(
                f"Invalid type for initial value={value} of type: {type(value).__name__}. "
                "Expected Python scalar, list or tuple of values, or numpy.ndarray."
            )
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        verify = self._verify_shape if verify_shape is None else verify_shape
        arr = dtypes.convert_to_numpy(self.value, dtype)
        if arr.size == 1 and not verify:
            # (a scalar fills a shape known only when run too: warm_start's backup
            # values; TF 2.21's raises NotImplementedError there)
            return _filled(shape, arr.reshape(()), dtype, "Const")
        shape = _static_shape(shape)
        size = int(np.prod(shape))
        if verify and arr.shape != shape:
            raise TypeError(f"Expected Tensor's shape: {shape}, but got {arr.shape}.")
        if arr.size > size:
            raise ValueError(
                f"Too many elements provided. Takes at most {size}, but got {arr.size}."
            )
        flat = arr.reshape(-1)
        if arr.size < size:  # (the last value fills the rest; zeros where there is none)
            fill = flat[-1:] if flat.size else np.zeros(1, flat.dtype)
            flat = np.concatenate([flat, np.repeat(fill, size - arr.size)])
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


class _GainSeeded(Initializer):
    """The (gain, seed, dtype) arguments and config the orthogonal initializers share."""

    def __init__(self, gain=1.0, seed=None, dtype=dtypes.float32):
        self.gain, self.seed = gain, seed
        self.dtype = _assert_float_dtype(dtype)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Orthogonal(_GainSeeded):
    """Orthogonal matrix init (Saxe et al.) as TF builds it, drawn at run time: a
    seeded random_normal [max(rows, cols), min(rows, cols)] (rows: the product of all
    but the last dimension), its QR's Q with columns signed by R's diagonal, transposed
    for a wide matrix, times `gain`.  The normals are TF's bits; the QR is LAPACK's
    where TF's is Eigen's, so values agree with TF's to float32 rounding."""

    def __call__(self, shape, dtype=None, partition_info=None):
        from asyncflow.ops import array_ops, linalg_matrix_ops, math_ops, random_ops

        dtype = dtypes.as_dtype(dtype or self.dtype)
        shape = _static_shape(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        num_rows = int(np.prod(shape[:-1]))
        num_cols = shape[-1]
        flat = (num_cols, num_rows) if num_rows < num_cols else (num_rows, num_cols)
        a = random_ops.random_normal(flat, dtype=dtype, seed=self.seed)
        q, r = linalg_matrix_ops.qr(a, full_matrices=False)
        q = math_ops.multiply(q, math_ops.sign(linalg_matrix_ops.matrix_diag_part(r)))
        if num_rows < num_cols:
            q = array_ops.transpose(q, [1, 0])
        return math_ops.multiply(
            ops.convert_to_tensor(self.gain, dtype=dtype), array_ops.reshape(q, shape)
        )


def _seeded_rng(seed):
    """NumPy generator for one initializer call under TF1's seed rules
    (random_seed.get_seed): a graph seed alone makes the draw reproducible too; with
    neither seed it comes from OS entropy."""
    from asyncflow import random_seed

    seed, seed2 = random_seed.get_seed(seed)
    return np.random.default_rng(None if seed is None else [seed, seed2])


def _orthogonal_matrix(rng, n: int) -> np.ndarray:
    """A random n x n orthogonal matrix, uniform (Haar) by the signs of R's diagonal."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _symmetric_projection(rng, n: int) -> np.ndarray:
    """A random symmetric projection: Q diag(m) Q^T with m a random 0/1 mask."""
    q = _orthogonal_matrix(rng, n) * (rng.standard_normal(n) > 0)
    return q @ q.T


class ConvolutionDeltaOrthogonal(_GainSeeded):
    """TF's `init_ops.ConvolutionDeltaOrthogonal`: a conv kernel [k..., in, out] that is
    zero except at the spatial centre, where it is gain times `in` rows of a random
    orthogonal [out, out] matrix (an isometry, Xiao et al. 2018), built as TF builds it
    (a seeded random_normal, its QR's Q signed by R's diagonal, scattered into place:
    TF's values to float32 rounding, as `Orthogonal`)."""

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        shape = _static_shape(shape)
        if not 3 <= len(shape) <= 5:
            raise ValueError(
                "The tensor to initialize must be at least three-dimensional and at most "
                "five-dimensional"
            )
        if shape[-2] > shape[-1]:
            raise ValueError("In_filters cannot be greater than out_filters.")
        from asyncflow.ops import (
            array_ops,
            linalg_matrix_ops,
            math_ops,
            random_ops,
            scatter_nd_ops,
            slicing_ops,
        )

        a = random_ops.random_normal([shape[-1], shape[-1]], dtype=dtype, seed=self.seed)
        q, r = linalg_matrix_ops.qr(a, full_matrices=False)
        q = math_ops.multiply(q, math_ops.sign(linalg_matrix_ops.matrix_diag_part(r)))
        q = slicing_ops.strided_slice(q, [0, 0], [shape[-2], shape[-1]], [1, 1])
        q = math_ops.multiply(q, ops.convert_to_tensor(self.gain, dtype=dtype))
        centre = [[(k - 1) // 2 for k in shape[:-2]]]
        return scatter_nd_ops.scatter_nd(centre, array_ops.expand_dims(q, 0), shape)


class ConvolutionOrthogonal(_GainSeeded):
    """TF's `init_ops.ConvolutionOrthogonal`: the base of the 1-, 2- and 3-D orthogonal
    conv kernels, which are isometries of the circular convolution: `in` rows of an
    orthogonal matrix times a product (matrix convolution) of k - 1 random blocks
    [P, I - P] per spatial dimension, P symmetric projections (Xiao et al. 2018)."""

    rank = 0

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        shape = _static_shape(shape)
        n = self.rank
        if len(shape) != n + 2:
            raise ValueError(f"The tensor to initialize must be {n + 2}-dimensional")
        if shape[-2] > shape[-1]:
            raise ValueError("In_filters cannot be greater than out_filters.")
        if len(set(shape[:n])) != 1:
            raise ValueError("Kernel sizes must be equal.")
        k, cin, cout = shape[0], shape[-2], shape[-1]
        rng = _seeded_rng(self.seed)
        kernel = np.eye(cout).reshape((1,) * n + (cout, cout))
        for _ in range(k - 1):
            kernel = _matrix_conv(kernel, self._block(rng, cout), n)
        orth = _orthogonal_matrix(rng, cout)[:cin, :]
        value = self.gain * np.einsum("ij,...jk->...ik", orth, kernel)
        from asyncflow.ops import array_ops

        return array_ops.constant(value.astype(dtype.as_numpy_dtype), dtype=dtype)

    def _block(self, rng, c: int) -> np.ndarray:
        """[2]*rank blocks of [c, c] matrices: at each corner the product over the spatial
        dimensions of P_d (index 0) or I - P_d (index 1)."""
        projections = [_symmetric_projection(rng, c) for _ in range(self.rank)]
        block = np.empty((2,) * self.rank + (c, c))
        for idx in np.ndindex(*(2,) * self.rank):
            m = np.eye(c)
            for p, i in zip(projections, idx, strict=True):
                m = m @ (p if i == 0 else np.eye(c) - p)
            block[idx] = m
        return block


def _matrix_conv(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Full n-d convolution of two kernels of matrices ([k..., c, c] each): at each output
    offset the sum of a[i] @ b[j] over i + j = offset."""
    ka, kb = a.shape[:n], b.shape[:n]
    c = a.shape[-1]
    out = np.zeros(tuple(x + y - 1 for x, y in zip(ka, kb, strict=True)) + (c, c))
    for i in np.ndindex(*ka):
        for j in np.ndindex(*kb):
            out[tuple(x + y for x, y in zip(i, j, strict=True))] += a[i] @ b[j]
    return out


class ConvolutionOrthogonal1D(ConvolutionOrthogonal):
    """TF's `init_ops.ConvolutionOrthogonal1D`: an orthogonal [k, in, out] conv kernel."""

    rank = 1


class ConvolutionOrthogonal2D(ConvolutionOrthogonal):
    """TF's `init_ops.ConvolutionOrthogonal2D`: an orthogonal [k, k, in, out] conv kernel."""

    rank = 2


class ConvolutionOrthogonal3D(ConvolutionOrthogonal):
    """TF's `init_ops.ConvolutionOrthogonal3D`: an orthogonal [k, k, k, in, out] kernel."""

    rank = 3


class Identity(Initializer):
    """gain * the identity matrix (rectangular shapes: ones on the main diagonal)."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _assert_float_dtype(dtype or self.dtype)
        part = _static_shape(shape)
        full = _static_shape(partition_info.full_shape) if partition_info is not None else part
        if len(full) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        from asyncflow.ops import array_ops

        value = self.gain * np.eye(*full)
        if partition_info is not None:  # this partition's slice of the full matrix
            offsets = partition_info.var_offset
            value = value[tuple(slice(o, o + n) for o, n in zip(offsets, part, strict=True))]
        return array_ops.constant(value.astype(dtype.as_numpy_dtype), dtype=dtype)

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
# init_ops module names (TF exports them under no tf.compat.v1 namespace).
convolutional_delta_orthogonal = ConvolutionDeltaOrthogonal
convolutional_orthogonal_1d = ConvolutionOrthogonal1D
convolutional_orthogonal_2d = ConvolutionOrthogonal2D
convolutional_orthogonal_3d = ConvolutionOrthogonal3D


def lecun_normal(seed=None) -> VarianceScaling:
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None) -> VarianceScaling:
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


def he_normal(seed=None) -> VarianceScaling:
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None) -> VarianceScaling:
    return VarianceScaling(2.0, "fan_in", "uniform", seed)
