"""`tf.keras.layers.experimental.RandomFourierFeatures`: cos(x @ W / scale + b) with
W drawn N(0, 1) and b uniform in [0, 2 pi) (non-trainable, drawn from the graph seed as
TF draws them) and a learnable (when the layer is trainable) non-negative kernel_scale,
approximating a Gaussian RBF kernel, as TF 2.21's tf_keras builds it."""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow.keras import constraints
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import Layer
from asyncflow.ops import cast_ops, math_ops, matmul_ops, nn_ops

__all__ = ["RandomFourierFeatures"]

_KERNELS = ["gaussian", "laplacian"]


class RandomFourierFeatures(Layer):
    """Random Fourier features of (batch, input_dim) inputs, `output_dim` of them.

    Raises:
      ValueError: output_dim not positive; an unknown kernel name; a non-positive
        scale; (when built) inputs not of rank 2 or of unknown last dimension.
      NotImplementedError: the 'laplacian' kernel (TF draws it from NumPy's global
        generator, which no graph seed reproduces).
    """

    def __init__(self, output_dim, kernel_initializer="gaussian", scale=None, trainable=False,
                 name=None, **kwargs):  # fmt: skip
        if output_dim <= 0:
            raise ValueError(f"`output_dim` should be a positive integer. Received: {output_dim}")
        if isinstance(kernel_initializer, str):
            if kernel_initializer.lower() not in _KERNELS:
                raise ValueError(
                    f"Unsupported `kernel_initializer`: {kernel_initializer} Expected one "
                    f"of: {_KERNELS}"
                )
            if kernel_initializer.lower() == "laplacian":
                raise NotImplementedError(
                    "RandomFourierFeatures(kernel_initializer='laplacian') is not supported "
                    "by asyncflow"
                )
        if scale is not None and scale <= 0.0:
            raise ValueError(
                f"When provided, `scale` should be a positive float. Received: {scale}"
            )
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.output_dim, self.kernel_initializer, self.scale = (
            output_dim,
            kernel_initializer,
            scale,
        )

    def build(self, input_shape) -> None:
        shape = tensor_shape.TensorShape(input_shape)
        if shape.ndims != 2:
            raise ValueError(
                "The rank of the input tensor should be 2. Received input with rank "
                f"{shape.ndims} instead. Full input shape received: {shape}"
            )
        input_dim = tensor_shape.dimension_value(shape[1])
        if input_dim is None:
            raise ValueError(
                "The last dimension of the input tensor should be defined. Found `None`. "
                f"Full input shape received: {shape}"
            )
        init = self.kernel_initializer
        init = _init.RandomNormal(stddev=1.0) if isinstance(init, str) else _init.get(init)
        self.unscaled_kernel = self.add_weight(
            "unscaled_kernel", shape=(input_dim, self.output_dim), dtype=dtypes.float32,
            initializer=init, trainable=False,
        )  # fmt: skip
        self.bias = self.add_weight(
            "bias", shape=(self.output_dim,), dtype=dtypes.float32,
            initializer=_init.RandomUniform(minval=0.0, maxval=2 * np.pi), trainable=False,
        )  # fmt: skip
        if self.scale is None:
            self.scale = float(np.sqrt(input_dim / 2.0))
        self.kernel_scale = self.add_weight(
            "kernel_scale", shape=(1,), dtype=dtypes.float32,
            initializer=_init.Constant(self.scale), trainable=True,
            constraint=constraints.get("NonNeg"),
        )  # fmt: skip
        self.built = True

    def call(self, inputs):
        x = cast_ops.cast(inputs, dtypes.float32)
        kernel = (1.0 / self.kernel_scale) * self.unscaled_kernel
        return math_ops.cos(nn_ops.bias_add(matmul_ops.matmul(x, kernel), self.bias))
