"""tf.math.sobol_sample (SobolSample): points of the unscrambled Sobol sequence with Joe &
Kuo's direction numbers (new-joe-kuo-6.21201), in Gray-code order, 32 bits per
coordinate, the all-zero first point left out (so `skip` counts from the second).

TF's kernel and SciPy's `qmc.Sobol(scramble=False, bits=32)` use the same direction
numbers and order: point i (i >= 1) is SciPy's point i, its integer coordinates times
2^-32 (exact in float64; float32 rounds the integer once, as TF's cast does).  The
kernel draws them with SciPy on a worker thread.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["sobol_sample"]

_MAX_DIM = 21200  # TF's limit (its table's 21201 rows include the first dimension's)
_INT32_MAX = 2**31 - 1


def _shape(op):
    dim = ops.constant_value(op.inputs[0])
    n = ops.constant_value(op.inputs[1])
    return [
        tensor_shape.TensorShape(
            [None if n is None else int(n), None if dim is None else int(dim)]
        )
    ]


SobolSample = register_op(
    "SobolSample",
    inputs=["dim: int32", "num_results: int32", "skip: int32"],
    outputs=["samples: dtype"],
    attrs={"dtype": TypeConstraint(["float32", "float64"], default="float32")},
    shape_fn=_shape,
)
NotDifferentiable("SobolSample")


def _points(dim: int, n: int, skip: int, np_dtype) -> np.ndarray:
    from scipy.stats import qmc

    engine = qmc.Sobol(dim, scramble=False, bits=32)
    engine.fast_forward(skip + 1)
    return engine.random(n).astype(np_dtype)


@SobolSample.kernel("CPU")
async def _sobol(ctx, dim, num_results, skip):
    d, n, s = int(dim), int(num_results), int(skip)
    if d < 1:
        raise errors.InvalidArgumentError(None, None, "dim must be at least one")
    if d > _MAX_DIM:
        raise errors.InvalidArgumentError(None, None, f"dim must be at most {_MAX_DIM}")
    if n < 1:
        raise errors.InvalidArgumentError(None, None, "num_results must be at least one")
    if s < 0:
        raise errors.InvalidArgumentError(None, None, "skip must be non-negative")
    if n >= _INT32_MAX - s:
        raise errors.InvalidArgumentError(
            None, None, f"num_results+skip must be less than {_INT32_MAX}"
        )
    np_dtype = ctx.attrs["dtype"].as_numpy_dtype
    return await ctx.compute(_points, d, n, s, np_dtype, cost=float(d) * n)


def sobol_sample(dim, num_results, skip=0, dtype=dtypes.float32, name=None):
    """`num_results` points of the `dim`-dimensional Sobol sequence after the first
    `skip` (the origin never included), as a [num_results, dim] `dtype` tensor.

    Raises:
      InvalidArgumentError (when run): dim outside 1..21200, num_results < 1, skip < 0.
    """
    with ops.name_scope(name, "sobol_sample"):
        args = [
            ops.convert_to_tensor(v, dtype=dtypes.int32, name=n)
            for v, n in ((dim, "dim"), (num_results, "num_results"), (skip, "skip"))
        ]
        return ops.apply_op("SobolSample", args, {"dtype": dtypes.as_dtype(dtype)}).outputs[0]
