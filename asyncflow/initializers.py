"""`af.initializers` (TF1's `tf.compat.v1.initializers`): the init_ops initializers under
their short names, plus `identity` (the one init_ops lacks).

Each name is the class (or factory), as in TF: `af.initializers.zeros()`,
`af.initializers.he_normal(seed=1)`, `af.initializers.variance_scaling(scale=2.0)`.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import init_ops
from asyncflow.ops.init_ops import (
    Constant,
    GlorotNormal,
    GlorotUniform,
    Initializer,
    Ones,
    Orthogonal,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    UniformUnitScaling,
    VarianceScaling,
    Zeros,
    he_normal,
    he_uniform,
    lecun_normal,
    lecun_uniform,
)

__all__ = [
    "Initializer",
    "zeros",
    "ones",
    "constant",
    "random_normal",
    "random_uniform",
    "truncated_normal",
    "uniform_unit_scaling",
    "variance_scaling",
    "glorot_uniform",
    "glorot_normal",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "lecun_uniform",
    "orthogonal",
    "identity",
    "Identity",
    "global_variables",
    "local_variables",
    "variables",
]

zeros = Zeros
ones = Ones
constant = Constant
random_normal = RandomNormal
random_uniform = RandomUniform
truncated_normal = TruncatedNormal
uniform_unit_scaling = UniformUnitScaling
variance_scaling = VarianceScaling
glorot_uniform = GlorotUniform
glorot_normal = GlorotNormal
orthogonal = Orthogonal


class Identity(Initializer):
    """gain * the identity matrix (2-D shapes only), as TF's `initializers.identity`."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = float(gain)
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = init_ops._static_shape(shape)
        if len(dims) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dtype = dtypes.as_dtype(dtype or self.dtype)
        value = np.eye(*dims, dtype=dtype.as_numpy_dtype) * self.gain
        return ops.apply_op("Const", [], {"value": value.astype(dtype.as_numpy_dtype),
                                          "dtype": dtype}).outputs[0]  # fmt: skip

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


identity = Identity


def global_variables():
    """`tf.initializers.global_variables()`: the op initializing every global variable."""
    from asyncflow import variables as _variables

    return _variables.global_variables_initializer()


def local_variables():
    """`tf.initializers.local_variables()`."""
    from asyncflow import variables as _variables

    return _variables.local_variables_initializer()


def variables(var_list, name="init"):
    """`tf.initializers.variables(var_list)`."""
    from asyncflow import variables as _variables

    return _variables.variables_initializer(var_list, name=name)
