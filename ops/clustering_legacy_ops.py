"""tf.contrib.factorization's clustering kernels, still TF 2.21 op types (k-means graphs
from TF 1.x hold them): NearestNeighbors and KMC2ChainInitialization; and
BatchCholeskyGrad, CholeskyGrad's spelling before GraphDef version 13.

NearestNeighbors: for each point, the k centres nearest in squared Euclidean distance
(|p|^2 - 2 p.c + |c|^2, float32 as TF's), nearest first, ties by the lower index.
KMC2ChainInitialization: one Markov chain over the candidates' distances, seeded: from
candidate 0, candidate i replaces the current one when its distance exceeds a uniform
[0, 1) draw times the current distance (TF's SimplePhilox over PhiloxRandom(seed)).
TF 2.21 registers no gradient for them; tf.gradients raises LookupError, as here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops import philox_random
from asyncflow.ops.legacy_ops import _alias, _removed_in
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


BatchCholeskyGrad = _alias(
    "BatchCholeskyGrad", "CholeskyGrad", attrs={"T": TypeConstraint(["float32", "float64"])}
)
_removed_in(BatchCholeskyGrad, 13, "Use CholeskyGrad instead.")


# -- NearestNeighbors ---------------------------------------------------------------------------


def _nearest_shape(op):
    points = op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(2)
    op.inputs[2].shape.with_rank(0)
    return [tensor_shape.TensorShape([points[0], None])] * 2


NearestNeighbors = register_op(
    "NearestNeighbors",
    inputs=["points: float32", "centers: float32", "k: int64"],
    outputs=["nearest_center_indices: int64", "nearest_center_distances: float32"],
    shape_fn=_nearest_shape,
)


def _nearest(points, centers, k):
    p2 = (points * points).sum(axis=1, dtype=np.float32)[:, None]
    c2 = (centers * centers).sum(axis=1, dtype=np.float32)[None, :]
    d = (p2 - np.float32(2) * (points @ centers.T) + c2).astype(np.float32)
    order = np.argsort(d, axis=1, kind="stable")[:, :k]
    return order.astype(np.int64), np.take_along_axis(d, order, axis=1)


@NearestNeighbors.kernel("CPU", host_memory=("k",))
async def _nearest_neighbors(ctx, points, centers, k):
    points = np.asarray(points, np.float32)
    centers = np.asarray(centers, np.float32)
    if points.ndim != 2:
        raise _invalid("Input points should be a matrix.")
    if centers.ndim != 2:
        raise _invalid("Input centers should be a matrix.")
    if points.shape[1] != centers.shape[1]:
        raise _invalid(
            f"Expected point_dimensions == center_dimensions: {points.shape[1]} vs "
            f"{centers.shape[1]}."
        )
    k = int(np.asarray(k))
    if k < 0:
        raise _invalid("Input k must be non-negative.")
    k = min(k, centers.shape[0])
    return await ctx.device.compute(_nearest, points, centers, k)


# -- KMC2ChainInitialization ----------------------------------------------------------------


KMC2ChainInitialization = register_op(
    "KMC2ChainInitialization",
    inputs=["distances: float32", "seed: int64"],
    outputs=["index: int64"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)


@KMC2ChainInitialization.kernel("CPU")
async def _kmc2_chain(ctx, distances, seed):
    distances = np.asarray(distances, np.float32)
    if distances.ndim != 1:
        raise _invalid("Input distances should be a vector.")
    if np.ndim(seed) != 0:
        raise _invalid("Input seed should be a scalar.")
    if distances.size == 0:
        raise _invalid("Input distances should be non-empty.")
    s = int(np.asarray(seed)) & ((1 << 64) - 1)
    rng = philox_random.SimplePhilox((s & 0xFFFFFFFF, s >> 32), 0)
    chosen, chosen_d = 0, distances[0]
    for i in range(1, distances.size):
        d = distances[i]
        if d > np.float32(rng.rand_float()) * chosen_d:
            chosen, chosen_d = i, d
    return np.int64(chosen)
