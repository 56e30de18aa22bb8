"""`tf.user_ops` (TF 2.21 compat.v1): TF's example of a user op, `my_fact`, whose Fact op
gives a scalar string when run."""

from __future__ import annotations

import numpy as np

from asyncflow import graph as ops
from asyncflow import tensor_shape
from asyncflow.registry import NotDifferentiable, register_op

__all__ = ["my_fact"]

Fact = register_op(
    "Fact", outputs=["fact: string"], shape_fn=lambda op: [tensor_shape.unknown_shape()]
)
NotDifferentiable("Fact")


@Fact.kernel("CPU")
async def _fact(ctx):
    return np.array(b"0! == 1", dtype=object)


def my_fact():
    """A Fact op's output (TF's: b'0! == 1'), shape unknown to the graph."""
    return ops.apply_op("Fact", [], name="Fact").outputs[0]
