"""`af.test`: gradient checking as `tf.compat.v1.test`."""

from asyncflow.test_util import compute_gradient, compute_gradient_error

__all__ = ["compute_gradient", "compute_gradient_error"]
