"""TF's MatrixLogarithm (`tf.linalg.logm`): the principal logarithm of a [batch] of
complex square matrices.  Complex inputs only, as in TF (a real one is a TypeError when
the op is built).  The kernel runs SciPy's inverse scaling-and-squaring on the host
(TF runs Eigen's; they agree to rounding), off the event loop.  TF registers no
gradient for MatrixLogarithm, so differentiating through it raises LookupError here too.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops.linalg_matrix_ops import _square_shape
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["logm"]

MatrixLogarithm = register_op(
    "MatrixLogarithm",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={"T": TypeConstraint([dtypes.complex64, dtypes.complex128])},
    shape_fn=_square_shape,
)


def _logm_host(x: np.ndarray) -> np.ndarray:
    import scipy.linalg  # (imported here: at import it cost every program ~0.3 s)

    # (in double precision: SciPy's single-precision path warns of its own inaccuracy)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-2]):
        out[idx] = scipy.linalg.logm(x[idx].astype(np.complex128))
    return out


@MatrixLogarithm.kernel("CPU")
async def _logm(ctx, x):
    x = np.asarray(x)
    if x.ndim < 2:
        raise errors.InvalidArgumentError(
            None, None, f"Input tensor 0 must have rank >= 2, got {x.ndim}"
        )
    if x.shape[-1] != x.shape[-2]:
        raise errors.InvalidArgumentError(None, None, "Input matrix must be square.")
    if x.size == 0:
        return np.empty_like(x)
    cost = float(x.shape[-1]) ** 3 * max(1, x.size // (x.shape[-1] ** 2)) * 30
    return await ctx.compute(_logm_host, x, cost=cost)


def logm(input, name=None):  # noqa: A002 - TF's argument name
    """The matrix logarithm of a [batch] of complex square matrices (TF's MatrixLogarithm).

    Raises:
      TypeError: a real (not complex) input.
      ValueError: statically non-square matrices.
      InvalidArgumentError: (when run) non-square matrices.
    """
    return ops.apply_op("MatrixLogarithm", [input], name=name).outputs[0]
