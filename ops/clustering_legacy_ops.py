"""tf.contrib.factorization's clustering kernels, still TF 2.21 op types (k-means graphs
from TF 1.x hold them): NearestNeighbors and KMC2ChainInitialization; and
BatchCholeskyGrad, CholeskyGrad's spelling before GraphDef version 13.

NearestNeighbors: for each point, the k centres nearest in squared Euclidean distance
(|p|^2 - 2 p.c + |c|^2, float32 as TF's), nearest first, ties by the lower index.
KmeansPlusPlusInitialization: k-means++ seeding over the same generator (below).
KMC2ChainInitialization: one Markov chain over the candidates' distances, seeded: from
candidate 0, candidate i replaces the current one when its distance exceeds a uniform
[0, 1) draw times the current distance (TF's SimplePhilox over PhiloxRandom(seed)).
TF 2.21 registers no gradient for them; tf.gradients raises LookupError, as here.
"""

from __future__ import annotations

import math

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


# -- KmeansPlusPlusInitialization ---------------------------------------------------------------


KmeansPlusPlusInitialization = register_op(
    "KmeansPlusPlusInitialization",
    inputs=["points: float32", "num_to_sample: int64", "seed: int64",
            "num_retries_per_sample: int64"],
    outputs=["samples: float32"],
    shape_fn=lambda op: [tensor_shape.unknown_shape()],  # (TF's: unknown)
)  # fmt: skip


def _half_squared_distances(points, half_norms, i: int) -> np.ndarray:
    """Half the squared distance of every point to point i (|x|^2/2 - x.y + |y|^2/2),
    float32 as TF's."""
    return (half_norms - points @ points[i]) + half_norms[i]


def _kmeans_pp(points, num_to_sample: int, seed: int, retries: int) -> np.ndarray:
    n = points.shape[0]
    half_norms = np.float32(0.5) * np.einsum("ij,ij->i", points, points)
    rng = philox_random.SimplePhilox((seed & 0xFFFFFFFF, seed >> 32), 0)
    min_d = np.full(n, np.inf, np.float32)
    cumsum = np.zeros(n, np.float32)
    sampled: set[int] = set()
    out = np.empty((num_to_sample, points.shape[1]), np.float32)

    def draw() -> int:
        if not sampled:
            return rng.uniform64(n)
        while True:
            total = cumsum[-1]
            if not total > 0:
                index = rng.uniform64(n)
            else:
                v = np.float32(np.float32(rng.rand_float()) * total)
                index = min(int(np.searchsorted(cumsum, v, side="right")), n - 1)
            if index not in sampled:
                return index

    for k in range(num_to_sample):
        if k:
            cumsum = np.cumsum(min_d, dtype=np.float32)
        if retries == 0:
            index = draw()
            min_d = np.minimum(min_d, _half_squared_distances(points, half_norms, index))
        else:  # the candidate that lowers the potential (sum of distances) most
            best, best_d, best_potential = 0, min_d, np.float32(np.inf)
            for _ in range(1 + retries):
                cand = draw()
                d = np.minimum(min_d, _half_squared_distances(points, half_norms, cand))
                potential = d.sum(dtype=np.float32)
                if potential < best_potential:
                    best, best_d, best_potential = cand, d, potential
            index, min_d = best, best_d
        index = min(index, n - 1)
        out[k] = points[index]
        sampled.add(index)
    return out


@KmeansPlusPlusInitialization.kernel("CPU")
async def _kmeans_plus_plus(ctx, points, num_to_sample, seed, num_retries_per_sample):
    """TF's k-means++ seeding: the first centre uniform, each next one drawn in proportion
    to the points' half squared distances to the chosen ones (over SimplePhilox on
    PhiloxRandom(seed)), keeping the best of 1 + num_retries_per_sample draws."""
    points = np.asarray(points, np.float32)
    for name, v in (("num_to_sample", num_to_sample), ("seed", seed),
                    ("num_retries_per_sample", num_retries_per_sample)):  # fmt: skip
        if np.ndim(v) != 0:
            raise _invalid(f"Input {name} should be a scalar.")
    if points.ndim != 2:
        raise _invalid("Input points should be a matrix.")
    n, k = points.shape[0], int(np.asarray(num_to_sample))
    retries = int(np.asarray(num_retries_per_sample))
    if retries < 0:
        retries = 2 + int(math.log(k)) if k > 0 else 2
    if n <= 0:
        raise _invalid("Expected points.rows() > 0.")
    if k <= 0:
        raise _invalid("Expected num_to_sample > 0.")
    if k > n:
        raise _invalid(f"Expected num_to_sample <= points.rows(). {k} vs {n}.")
    s = int(np.asarray(seed)) & ((1 << 64) - 1)
    return await ctx.device.compute(
        _kmeans_pp, points, k, s, retries, cost=64 * n * (1 + retries) * k
    )
