"""`af.nn`: neural-network ops (TF1's `tf.nn`)."""

from asyncflow.ops.math_ops import sigmoid, tanh  # noqa: F401
from asyncflow.ops.nn_ops import *  # noqa: F403
from asyncflow.ops.nn_ops import __all__ as _nn_all

__all__ = list(_nn_all) + ["sigmoid", "tanh"]
