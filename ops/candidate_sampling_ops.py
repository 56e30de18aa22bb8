"""Candidate samplers and the sampled losses built on them (TF1's `tf.nn.nce_loss`,
`tf.nn.sampled_softmax_loss`, `*_candidate_sampler`, `compute_accidental_hits`).

A sampler op draws `num_sampled` class ids from a fixed distribution over
[0, range_max) and reports each id's expected count in the sample: `p * num_sampled`
when drawing with replacement, and `1 - (1 - p) ** num_tries` when `unique=True`
(drawing until `num_sampled` distinct ids came out after `num_tries` draws), as TF's
`RangeSampler`.  Like the random ops, each sampler op keeps its own NumPy
`Generator(Philox)` seeded from its (seed, seed2) attrs; TF's exact draws are not
reproduced, only its distributions and seeding rules.

The losses follow TF's `_compute_sampled_logits`: the true and sampled classes' rows
of `weights` are gathered in one lookup, each logit has log Q (its expected count)
subtracted, and sampled candidates that equal one of a row's true labels can be
masked with -FLT_MAX.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, random_seed
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    nn_impl,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops.gradient_ops import stop_gradient
from asyncflow.ops.random_ops import _generator
from asyncflow.registry import NotDifferentiable, register_op

__all__ = [
    "uniform_candidate_sampler",
    "log_uniform_candidate_sampler",
    "fixed_unigram_candidate_sampler",
    "all_candidate_sampler",
    "compute_accidental_hits",
    "nce_loss",
    "sampled_softmax_loss",
]

_SAMPLER_ATTRS = {
    "num_true": 1,
    "num_sampled": 1,
    "unique": True,
    "range_max": 1,
    "seed": 0,
    "seed2": 0,
}


def _sampler_shape(op):
    n = op._attr("num_sampled")
    t = op.inputs[0].shape
    batch = t[0].value if t.ndims else None
    return [[n], [batch, op._attr("num_true")], [n]]


def _check_true_classes(t, num_true):
    t = np.asarray(t)
    if t.ndim != 2 or t.shape[1] != num_true:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"true_classes must be a matrix with num_true={num_true} columns, "
            f"got shape {list(t.shape)}",
        )
    return t


def _expected(p, num_sampled, num_tries, unique):
    p = np.asarray(p, np.float64)
    if unique:
        return (-np.expm1(num_tries * np.log1p(-p))).astype(np.float32)
    return (p * num_sampled).astype(np.float32)


def _sample(rng, draw, num_sampled, unique, range_max):
    """(samples, num_tries): `draw(n)` gives n ids with replacement."""
    if not unique:
        return draw(num_sampled), num_sampled
    if num_sampled > range_max:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Sampler used in unique mode but num_sampled {num_sampled} is larger "
            f"than range_max {range_max}",
        )
    seen: dict[int, None] = {}
    tries = 0
    while len(seen) < num_sampled:
        batch = draw(max(2 * (num_sampled - len(seen)), 16))
        for v in batch.tolist():
            tries += 1
            if v not in seen:
                seen[v] = None
                if len(seen) == num_sampled:
                    break
    return np.fromiter(seen, np.int64, num_sampled), tries


def _register_sampler(op_type, extra_attrs, probs_and_draw):
    op_def = register_op(
        op_type,
        inputs=["true_classes: int64"],
        outputs=[
            "sampled_candidates: int64",
            "true_expected_count: float32",
            "sampled_expected_count: float32",
        ],
        attrs={**_SAMPLER_ATTRS, **extra_attrs},
        shape_fn=_sampler_shape,
        stateful=True,
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, true_classes):
        a = ctx.attrs
        t = _check_true_classes(true_classes, a["num_true"])
        rng = _generator(ctx)
        prob, draw = probs_and_draw(a, rng)
        sampled, tries = _sample(rng, draw, a["num_sampled"], a["unique"], a["range_max"])
        true_exp = _expected(prob(t), a["num_sampled"], tries, a["unique"])
        samp_exp = _expected(prob(sampled), a["num_sampled"], tries, a["unique"])
        return sampled, true_exp, samp_exp

    return op_def


def _uniform(a, rng):
    r = a["range_max"]
    return (lambda ids: np.full(np.shape(ids), 1.0 / r)), (lambda n: rng.integers(0, r, n))


def _log_uniform(a, rng):
    r = a["range_max"]
    log_range = np.log1p(r)

    def prob(ids):
        ids = np.asarray(ids, np.float64)
        return (np.log(ids + 2.0) - np.log(ids + 1.0)) / log_range

    def draw(n):
        v = (np.exp(rng.random(n) * log_range)).astype(np.int64) - 1
        return np.minimum(v, r - 1)

    return prob, draw


def _unigram(a, rng):
    r = a["range_max"]
    counts = np.asarray(a.get("unigrams") or [1.0] * r, np.float64)
    if len(counts) != r:
        raise errors.InvalidArgumentError(
            None, None, f"len(unigrams) = {len(counts)} but range_max = {r}"
        )
    w = counts ** float(a.get("distortion", 1.0))
    w = w / w.sum()
    cdf = np.cumsum(w)

    def prob(ids):
        return w[np.asarray(ids, np.int64)]

    def draw(n):
        return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), r - 1)

    return prob, draw


_register_sampler("UniformCandidateSampler", {}, _uniform)
_register_sampler("LogUniformCandidateSampler", {}, _log_uniform)
_register_sampler(
    "FixedUnigramCandidateSampler",
    {
        "unigrams": [],
        "distortion": 1.0,
        "vocab_file": "",
        "num_reserved_ids": 0,
        "num_shards": 1,
        "shard": 0,
    },
    _unigram,
)


AllCandidateSampler = register_op(
    "AllCandidateSampler",
    inputs=["true_classes: int64"],
    outputs=[
        "sampled_candidates: int64",
        "true_expected_count: float32",
        "sampled_expected_count: float32",
    ],
    attrs={"num_true": 1, "num_sampled": 1, "unique": True, "seed": 0, "seed2": 0},
    shape_fn=_sampler_shape,
    stateful=True,
)
NotDifferentiable("AllCandidateSampler")


@AllCandidateSampler.kernel("CPU")
async def _all_sampler(ctx, true_classes):
    a = ctx.attrs
    t = _check_true_classes(true_classes, a["num_true"])
    n = a["num_sampled"]
    return np.arange(n, dtype=np.int64), np.ones(t.shape, np.float32), np.ones(n, np.float32)


def _sampler(
    op_type, true_classes, num_true, num_sampled, unique, range_max, seed, name, extra=None
):
    s1, s2 = random_seed.get_seed(seed)
    attrs = {
        "num_true": int(num_true),
        "num_sampled": int(num_sampled),
        "unique": bool(unique),
        "seed": s1 or 0,
        "seed2": s2 or 0,
        **(extra or {}),
    }
    if range_max is not None:
        attrs["range_max"] = int(range_max)
    t = ops.convert_to_tensor(true_classes, dtype=dtypes.int64, name="true_classes")
    return tuple(ops.apply_op(op_type, [t], attrs, name=name).outputs)


def uniform_candidate_sampler(
    true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None
):
    """Ids drawn uniformly from [0, range_max): (sampled_candidates,
    true_expected_count, sampled_expected_count)."""
    return _sampler(
        "UniformCandidateSampler",
        true_classes,
        num_true,
        num_sampled,
        unique,
        range_max,
        seed,
        name,
    )


def log_uniform_candidate_sampler(
    true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None
):
    """Ids drawn from the Zipfian P(k) = log((k+2)/(k+1)) / log(range_max+1)."""
    return _sampler(
        "LogUniformCandidateSampler",
        true_classes,
        num_true,
        num_sampled,
        unique,
        range_max,
        seed,
        name,
    )


def fixed_unigram_candidate_sampler(
    true_classes,
    num_true,
    num_sampled,
    unique,
    range_max,
    vocab_file="",
    distortion=1.0,
    num_reserved_ids=0,
    num_shards=1,
    shard=0,
    unigrams=(),
    seed=None,
    name=None,
):
    """Ids drawn with probability proportional to `unigrams ** distortion`."""
    if vocab_file:
        raise ValueError(
            "fixed_unigram_candidate_sampler: vocab_file is not supported; pass unigrams"
        )
    extra = {"unigrams": [float(u) for u in unigrams], "distortion": float(distortion)}
    return _sampler(
        "FixedUnigramCandidateSampler",
        true_classes,
        num_true,
        num_sampled,
        unique,
        range_max,
        seed,
        name,
        extra,
    )


def all_candidate_sampler(true_classes, num_true, num_sampled, unique, seed=None, name=None):
    """Every id in [0, num_sampled), each with expected count 1."""
    return _sampler(
        "AllCandidateSampler", true_classes, num_true, num_sampled, unique, None, seed, name
    )


def _accidental_shape(op):
    return [[None], [None], [None]]


ComputeAccidentalHits = register_op(
    "ComputeAccidentalHits",
    inputs=["true_classes: int64", "sampled_candidates: int64"],
    outputs=["indices: int32", "ids: int64", "weights: float32"],
    attrs={"num_true": 1, "seed": 0, "seed2": 0},
    shape_fn=_accidental_shape,
)
NotDifferentiable("ComputeAccidentalHits")


@ComputeAccidentalHits.kernel("CPU")
async def _accidental_hits(ctx, true_classes, sampled):
    t = _check_true_classes(true_classes, ctx.attrs["num_true"])
    sampled = np.asarray(sampled)
    hit = (t[:, :, None] == sampled[None, None, :]).any(axis=1)  # [batch, num_sampled]
    rows, cols = np.nonzero(hit)
    lowest = np.float32(-np.finfo(np.float32).max)
    return rows.astype(np.int32), cols.astype(np.int64), np.full(len(rows), lowest, np.float32)


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """(indices, ids, weights): row i, sampled position j and -FLT_MAX for every sampled
    candidate j equal to one of row i's true classes."""
    t = ops.convert_to_tensor(true_classes, dtype=dtypes.int64)
    s = ops.convert_to_tensor(sampled_candidates, dtype=dtypes.int64)
    return tuple(
        ops.apply_op(
            "ComputeAccidentalHits", [t, s], {"num_true": int(num_true)}, name=name
        ).outputs
    )


# -- the sampled losses --------------------------------------------------------------------


def _sum_rows(x):
    return reduction_ops.reduce_sum(x, 1)


def _compute_sampled_logits(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true,
    sampled_values,
    subtract_log_q,
    remove_accidental_hits,
    partition_strategy,
    name,
    seed=None,
):
    if not isinstance(weights, (list, tuple)):
        weights = [weights]
    with ops.name_scope(name, "compute_sampled_logits", [*weights, biases, inputs, labels]):
        labels = ops.convert_to_tensor(labels)
        if labels.dtype != dtypes.int64:
            labels = cast_ops.cast(labels, dtypes.int64)
        inputs = ops.convert_to_tensor(inputs)
        labels_flat = array_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                labels, num_true, num_sampled, True, num_classes, seed=seed
            )
        sampled, true_expected, sampled_expected = (stop_gradient(s) for s in sampled_values)
        sampled = cast_ops.cast(sampled, dtypes.int64)
        n_true = array_ops.shape(labels_flat)[0]
        all_ids = manip_ops.concat([labels_flat, sampled], 0)
        all_w = nn_impl.embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
        if all_w.dtype.base_dtype != inputs.dtype.base_dtype:  # as TF: to the inputs' dtype
            all_w = cast_ops.cast(all_w, inputs.dtype.base_dtype)
        true_w = slicing_ops.slice(all_w, manip_ops.stack([0, 0]), manip_ops.stack([n_true, -1]))
        sampled_w = slicing_ops.slice(all_w, manip_ops.stack([n_true, 0]), [-1, -1])
        sampled_logits = matmul_ops.matmul(inputs, sampled_w, transpose_b=True)
        all_b = nn_impl.embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype.base_dtype != inputs.dtype.base_dtype:
            all_b = cast_ops.cast(all_b, inputs.dtype.base_dtype)
        true_b = slicing_ops.slice(all_b, [0], manip_ops.stack([n_true]))
        sampled_b = slicing_ops.slice(all_b, manip_ops.stack([n_true]), [-1])
        dim = array_ops.shape(true_w)[1:2]
        true_w = array_ops.reshape(true_w, manip_ops.concat([[-1, num_true], dim], 0))
        rows = math_ops.multiply(array_ops.expand_dims(inputs, 1), true_w)
        dots = array_ops.reshape(rows, manip_ops.concat([[-1], dim], 0))
        true_logits = array_ops.reshape(_sum_rows(dots), [-1, num_true])
        true_logits = true_logits + array_ops.reshape(true_b, [-1, num_true])
        sampled_logits = sampled_logits + sampled_b
        if remove_accidental_hits:
            # TF scatters -FLT_MAX at ComputeAccidentalHits' (row, position) pairs; the
            # same mask, computed densely: one comparison of each row's labels with the
            # sampled ids.
            hit = reduction_ops.reduce_any(
                math_ops.equal(array_ops.expand_dims(labels, 2), sampled), axis=1
            )
            lowest = np.finfo(sampled_logits.dtype.as_numpy_dtype).min
            sampled_logits = sampled_logits + cast_ops.cast(hit, sampled_logits.dtype) * lowest
        if subtract_log_q:
            true_logits = true_logits - math_ops.log(true_expected)
            sampled_logits = sampled_logits - math_ops.log(sampled_expected)
        out_logits = manip_ops.concat([true_logits, sampled_logits], 1)
        out_labels = manip_ops.concat(
            [array_ops.ones_like(true_logits) / num_true, array_ops.zeros_like(sampled_logits)], 1
        )
        return out_logits, out_labels


def nce_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true=1,
    sampled_values=None,
    remove_accidental_hits=False,
    partition_strategy="mod",
    name="nce_loss",
):
    """Noise-contrastive estimation loss, one value per example ([batch_size]).

    `weights` [num_classes, dim] (or a list of shards), `biases` [num_classes], `labels`
    [batch_size, num_true] int, `inputs` [batch_size, dim]; negatives come from
    `sampled_values` or a log-uniform sampler."""
    logits, labels = _compute_sampled_logits(
        weights,
        biases,
        labels,
        inputs,
        num_sampled,
        num_classes,
        num_true,
        sampled_values,
        True,
        remove_accidental_hits,
        partition_strategy,
        name,
    )
    losses = nn_impl.sigmoid_cross_entropy_with_logits(
        labels=labels, logits=logits, name="sampled_losses"
    )
    return _sum_rows(losses)


def sampled_softmax_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true=1,
    sampled_values=None,
    remove_accidental_hits=True,
    partition_strategy="mod",
    name="sampled_softmax_loss",
    seed=None,
):
    """Softmax cross entropy over the true classes and `num_sampled` sampled ones
    ([batch_size]); sampled candidates equal to a true label are masked by default."""
    logits, labels = _compute_sampled_logits(
        weights,
        biases,
        labels,
        inputs,
        num_sampled,
        num_classes,
        num_true,
        sampled_values,
        True,
        remove_accidental_hits,
        partition_strategy,
        name,
        seed=seed,
    )
    labels = stop_gradient(labels, name="labels_stop_gradient")
    return nn_impl.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
