"""`af.initializers` (TF1's `tf.compat.v1.initializers`): the init_ops initializers under
their short names, plus `identity` (the one init_ops lacks).

Each name is the class (or factory), as in TF: `af.initializers.zeros()`,
`af.initializers.he_normal(seed=1)`, `af.initializers.variance_scaling(scale=2.0)`.
"""

from __future__ import annotations

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
    "tables_initializer",
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


# TF1's init_ops.Identity (`tf.initializers.identity`, init_ops.identity_initializer).
Identity = init_ops.Identity


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


def tables_initializer(name="init_all_tables"):
    """`tf.initializers.tables_initializer`: every table initializer of the graph."""
    from asyncflow.framework_extras import tables_initializer as run_all

    return run_all(name)
