"""Candidate samplers and the sampled losses built on them (TF1's `tf.nn.nce_loss`,
`tf.nn.sampled_softmax_loss`, `*_candidate_sampler`, `compute_accidental_hits`).

A sampler op draws `num_sampled` class ids from a fixed distribution over
[0, range_max) and reports each id's expected count in the sample: `p * num_sampled`
when drawing with replacement, and `1 - (1 - p) ** num_tries` when `unique=True`
(drawing until `num_sampled` distinct ids came out after `num_tries` draws), as TF's
`RangeSampler`.  Each sampler op keeps TF's Philox generator seeded from its (seed,
seed2) attrs and draws as TF's samplers do, so a seeded op gives TF's candidates and
expected counts (see "TF's RangeSampler" below).  The generator and the sampler (a
learned unigram's weights) are the op's for the session, or inside a dataset function
the pass's (kernel_api.random_state), as TF makes a function's kernels anew per pass.

The losses follow TF's `_compute_sampled_logits`: the true and sampled classes' rows
of `weights` are gathered in one lookup, each logit has log Q (its expected count)
subtracted, and sampled candidates that equal one of a row's true labels can be
masked with -FLT_MAX.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes, errors, random_seed
from asyncflow import graph as ops
from asyncflow.kernel_api import random_state
from asyncflow.ops import (
    array_ops,
    cast_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    nn_impl,
    philox_random,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops.gradient_ops import stop_gradient
from asyncflow.registry import NotDifferentiable, named_outputs, register_op

__all__ = [
    "uniform_candidate_sampler",
    "log_uniform_candidate_sampler",
    "learned_unigram_candidate_sampler",
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


def _check_true_classes(t, num_true, range_max=None):
    t = np.asarray(t)
    if t.ndim != 2:
        raise errors.InvalidArgumentError(None, None, "true_classes must be a matrix")
    if t.shape[1] != num_true:  # (TF's message names the two the other way round)
        raise errors.InvalidArgumentError(
            None,
            None,
            f"true_classes must have num_true columns, expected: {t.shape[1]} was: {num_true}",
        )
    if range_max is not None and t.size and (t.min() < 0 or t.max() >= range_max):
        bad = int(t.reshape(-1)[(t.reshape(-1) < 0) | (t.reshape(-1) >= range_max)][0])
        raise errors.InvalidArgumentError(
            None, None, f"`true_candidate` out of range [0, {range_max}), received {bad}"
        )
    return t


# -- TF's RangeSampler, draw for draw ------------------------------------------------------
#
# Each sampler op keeps TF's GuardedPhiloxRandom (philox_random.TFGenerator) and reserves
# 2048 * num_sampled 32-bit samples a run, drawn through TF's SimplePhilox
# (philox_random.SimplePhilox); the samplers consume its words exactly as TF's uniform,
# log-uniform, learned-unigram (WeightedPicker) and fixed-unigram (Walker's alias
# table, DistributionSampler) samplers do, so a seeded op gives TF's candidates and
# expected counts run after run.  Float arithmetic is TF's: probabilities are float32;
# an expected count is p * batch_size in float32, or -expm1f(tries * log1pf(-p)) for
# unique draws, with the C library's float functions (ctypes, a few calls a run).


def _libm_float(name: str):
    import ctypes
    import ctypes.util

    path = ctypes.util.find_library("m")
    fn = getattr(ctypes.CDLL(path), name) if path else None
    if fn is None:  # (no C library found: NumPy's float32 functions)
        return getattr(np, {"log1pf": "log1p", "expm1f": "expm1", "powf": "power"}[name])
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float] * (2 if name == "powf" else 1)
    return lambda *a: fn(*(float(v) for v in a))


_LIBM: dict = {}


def _cf(name: str):
    fn = _LIBM.get(name)
    if fn is None:
        fn = _LIBM[name] = _libm_float(name)
    return fn


def _expected_counts(probs, batch_size: int, num_tries: int) -> np.ndarray:
    """TF's ExpectedCountHelper for each float32 probability."""
    p = np.asarray(probs, np.float32)
    if num_tries == batch_size:
        return p * np.float32(batch_size)
    log1pf, expm1f = _cf("log1pf"), _cf("expm1f")
    tries = np.float32(num_tries)
    return np.array(
        [-np.float32(expm1f(tries * np.float32(log1pf(-v)))) for v in p.reshape(-1)],
        np.float32,
    ).reshape(p.shape)


class _Uniform:
    needs_updates = False

    def __init__(self, range_max: int):
        self.range = range_max
        self._p = np.float32(1.0 / range_max)

    def sample(self, rnd) -> int:
        return rnd.uniform64(self.range)

    def probability(self, value: int):
        return self._p


class _LogUniform:
    needs_updates = False

    def __init__(self, range_max: int):
        self.range = range_max
        self._log_range = math.log1p(range_max)  # (math's functions are the C library's)

    def sample(self, rnd) -> int:
        value = int(math.exp(rnd.rand_double() * self._log_range)) - 1
        return value % self.range

    def probability(self, value: int):
        return np.float32(math.log((value + 2.0) / (value + 1.0)) / self._log_range)


class _LearnedUnigram:
    """TF's UnigramSampler: every id starts at weight 1 and gains 1 for each time it is
    a true class (after the run that saw it); a draw picks by weight (TF's
    WeightedPicker: an exact uniform 32-bit integer below the total weight, then the
    id whose cumulative weight passes it)."""

    needs_updates = True

    def __init__(self, range_max: int):
        self.range = range_max
        self._weights = np.ones(range_max, np.int64)
        self._total = range_max
        self._cum = None

    def sample(self, rnd) -> int:
        if self._cum is None:
            self._cum = np.cumsum(self._weights)
        position = rnd.uniform(self._total)
        return int(np.searchsorted(self._cum, position, side="right"))

    def probability(self, value: int):
        return np.float32(self._weights[value]) / np.float32(self._total)

    def update(self, values) -> None:
        values = np.asarray(values, np.int64).reshape(-1)
        values = values[: max(0, min(values.size, _INT32_MAX - self._total))]
        np.add.at(self._weights, values, 1)
        self._total += int(values.size)
        self._cum = None


_INT32_MAX = 2**31 - 1


class _FixedUnigram:
    """TF's FixedUnigramSampler: float32 weights (reserved ids at 0, this shard's
    entries of `unigrams` or of the vocabulary file, each to the power `distortion`),
    drawn through Walker's alias table as TF's DistributionSampler builds it."""

    needs_updates = False

    def __init__(self, range_max, unigrams, vocab_file, distortion, reserved, shards, shard):
        weights: list = []
        for word_id in range(reserved):
            if word_id % shards == shard:
                weights.append(np.float32(0.0))
        total = np.float32(0.0)
        powf = _cf("powf")
        distortion = np.float32(distortion)
        for word_id, w in enumerate(self._unigrams(unigrams, vocab_file), len(weights)):
            if word_id % shards == shard:
                w = np.float32(powf(w, distortion))
                total = np.float32(total + w)
                weights.append(w)
        if range_max != len(weights):
            raise errors.InvalidArgumentError(
                None, None, f"range is {range_max} must be equal to weights size  {len(weights)}"
            )
        self.range = range_max
        self._weights = np.array(weights, np.float32)
        self._total = total
        self._prob, self._alt = _alias_table(self._weights)

    @staticmethod
    def _unigrams(unigrams, vocab_file):
        if not vocab_file:
            return [np.float32(u) for u in unigrams]
        out = []
        try:
            with open(vocab_file, "rb") as f:
                lines = f.read().decode("utf-8", "replace").split("\n")
        except OSError as exc:
            raise errors.NotFoundError(None, None, f"{vocab_file}; {exc.strerror}") from None
        if lines and lines[-1] == "":
            lines.pop()
        for line in lines:
            cols = line.split(",")
            try:
                out.append(np.float32(cols[-1].strip()))
            except ValueError:
                raise errors.InvalidArgumentError(
                    None, None, f"Wrong vocabulary format at line: {line}"
                ) from None
        return out

    def sample(self, rnd) -> int:
        r = rnd.rand_float()
        idx = rnd.uniform(self.range)
        return idx if r < self._prob[idx] else int(self._alt[idx])

    def probability(self, value: int):
        if value < 0 or value >= self.range:
            return np.float32(0.0)
        return self._weights[value] / self._total


def _alias_table(weights: np.ndarray):
    """TF's DistributionSampler tables: (float32 probability, alternative) per bucket."""
    n = len(weights)
    total = 0.0
    for w in weights.tolist():  # (a double sum in order, as TF's)
        total += w
    pr = [float(np.float32(w) * np.float32(n)) / total for w in weights]
    alt = [-1] * n
    low = [i for i in range(n) if pr[i] < 1.0]
    high = [i for i in range(n) if pr[i] >= 1.0]
    while high and low:
        lo, hi = low.pop(), high.pop()
        alt[lo] = hi
        pr[hi] = pr[hi] - (1.0 - pr[lo])
        (low if pr[hi] < 1.0 else high).append(hi)
    prob = np.array(pr, np.float32)
    for idx in high + low:  # (rounding leftovers: themselves, with certainty)
        prob[idx] = 1.0
        alt[idx] = idx
    return prob, np.array(alt, np.int64)


def _sample_batch(sampler, rnd, num_sampled: int, unique: bool):
    """TF's SampleBatchGetExpectedCount: (candidates, tries)."""
    if not unique:
        return [sampler.sample(rnd) for _ in range(num_sampled)], num_sampled
    used: set = set()
    batch: list = []
    tries = 0
    while len(batch) < num_sampled:
        tries += 1
        value = sampler.sample(rnd)
        if value not in used:
            used.add(value)
            batch.append(value)
    return batch, tries


def _run_sampler(ctx, make):
    # The sampler (a learned unigram's weights) is the op's kernel state as its
    # generator is, kept where the generator is (kernel_api.random_state): for the
    # session, or inside a dataset function for the pass.
    state = random_state(ctx)
    sampler = state.get("sampler")
    if sampler is None:
        sampler = state["sampler"] = make(ctx.attrs)
    return sampler, philox_random.tf_generator(ctx)


def _register_sampler(op_type, extra_attrs, make):
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
        if a["range_max"] <= 0:
            raise errors.InvalidArgumentError(None, None, "range_max must be positive")
        sampler, gen = _run_sampler(ctx, make)
        t = _check_true_classes(true_classes, a["num_true"], sampler.range)
        num_sampled, unique = a["num_sampled"], a["unique"]
        if unique and num_sampled > sampler.range:
            raise errors.InvalidArgumentError(None, None, "Sampler's range is too small.")
        counter = gen.reserve_blocks((2048 * num_sampled + 3) // 4)
        rnd = philox_random.SimplePhilox(gen.key, counter)
        sampled, tries = _sample_batch(sampler, rnd, num_sampled, unique)
        p = [sampler.probability(v) for v in sampled]
        true_p = [sampler.probability(int(v)) for v in t.reshape(-1)]
        sampled_exp = _expected_counts(p, num_sampled, tries)
        true_exp = _expected_counts(true_p, num_sampled, tries).reshape(t.shape)
        if sampler.needs_updates:
            sampler.update(t)
        return np.array(sampled, np.int64), true_exp, sampled_exp

    return op_def


def _unigram_range(a) -> int:
    r = int(a["range_max"])
    if r >= _INT32_MAX:
        raise errors.InvalidArgumentError(
            None, None, f"range_max must be less than {_INT32_MAX} for unigram samplers, got {r}"
        )
    return r


_register_sampler("UniformCandidateSampler", {}, lambda a: _Uniform(a["range_max"]))
_register_sampler("LogUniformCandidateSampler", {}, lambda a: _LogUniform(a["range_max"]))
_register_sampler(
    "LearnedUnigramCandidateSampler", {}, lambda a: _LearnedUnigram(_unigram_range(a))
)
_register_sampler(
    "ThreadUnsafeUnigramCandidateSampler", {}, lambda a: _LearnedUnigram(_unigram_range(a))
)


def _fixed_unigram(a):
    unigrams, vocab = list(a.get("unigrams") or []), a.get("vocab_file") or ""
    if isinstance(vocab, bytes):
        vocab = vocab.decode()
    if not vocab and not unigrams:
        raise errors.InvalidArgumentError(
            None, None, "Must provide either vocab_file or unigrams."
        )
    if vocab and unigrams:
        raise errors.InvalidArgumentError(
            None, None, "Must only provide one of vocab_file and unigrams."
        )
    return _FixedUnigram(
        int(a["range_max"]), unigrams, vocab, float(a["distortion"]),
        int(a["num_reserved_ids"]), int(a["num_shards"]), int(a["shard"]),
    )  # fmt: skip


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
    _fixed_unigram,
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
    return named_outputs(ops.apply_op(op_type, [t], attrs, name=name))


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


def learned_unigram_candidate_sampler(
    true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None
):
    """Ids drawn by a unigram distribution learned from the true classes of the runs so
    far (every id starts at count 1): (sampled_candidates, true_expected_count,
    sampled_expected_count)."""
    return _sampler(
        "LearnedUnigramCandidateSampler",
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
    """Ids drawn with probability proportional to `unigrams ** distortion` (or the
    last comma-separated field of each line of `vocab_file`), after
    `num_reserved_ids` ids of probability 0, keeping the ids of this `shard` of
    `num_shards` (id % num_shards == shard)."""
    extra = {
        "unigrams": [float(u) for u in unigrams],
        "distortion": float(distortion),
        "vocab_file": str(vocab_file or ""),
        "num_reserved_ids": int(num_reserved_ids),
        "num_shards": int(num_shards),
        "shard": int(shard),
    }
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
    # One hit per true class found among the candidates, in the true classes' order, at
    # the candidate's last position (TF maps each candidate value to its last index).
    last = {int(c): j for j, c in enumerate(np.asarray(sampled).tolist())}
    pairs = [(i, last[c]) for i, row in enumerate(t.tolist()) for c in row if c in last]
    rows = np.array([i for i, _ in pairs], np.int64)
    cols = np.array([j for _, j in pairs], np.int64)
    lowest = np.float32(-np.finfo(np.float32).max)
    return rows.astype(np.int32), cols.astype(np.int64), np.full(len(rows), lowest, np.float32)


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """(indices, ids, weights): row i, sampled position j and -FLT_MAX for every true
    class of row i among the sampled candidates (a repeated true class hits again; j is
    the candidate's last position)."""
    t = ops.convert_to_tensor(true_classes, dtype=dtypes.int64)
    s = ops.convert_to_tensor(sampled_candidates, dtype=dtypes.int64)
    return named_outputs(
        ops.apply_op("ComputeAccidentalHits", [t, s], {"num_true": int(num_true)}, name=name)
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
            # sampled ids, kept only at an id's last position (where the kernel puts it).
            hit = reduction_ops.reduce_any(
                math_ops.equal(array_ops.expand_dims(labels, 2), sampled), axis=1
            )
            repeated_later = reduction_ops.reduce_any(
                math_ops.logical_and(
                    math_ops.equal(array_ops.expand_dims(sampled, 1), sampled),
                    np.triu(np.ones((num_sampled, num_sampled), bool), 1),
                ),
                axis=1,
            )
            hit = math_ops.logical_and(hit, math_ops.logical_not(repeated_later))
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
