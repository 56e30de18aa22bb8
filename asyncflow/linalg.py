"""`af.linalg`: TF1's `tf.linalg` names that asyncflow has."""

from asyncflow.ops.linalg_ops import matvec, norm
from asyncflow.ops.matmul_ops import matmul
from asyncflow.ops.reduction_ops import reduce_euclidean_norm

__all__ = ["matmul", "matvec", "norm", "reduce_euclidean_norm"]
