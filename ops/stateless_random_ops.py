"""Stateless random ops with TensorFlow's numbers: a (key, counter) of TF's Philox4x32-10
stream (ops/philox_random.py) and TF's distributions over it, so that the same seed gives
the same values as TF 2.21 on CPU.

- A seed [2] becomes a (key, counter) as TF's GenerateKey scrambles it: one Philox block
  of the counter (seed0, seed1) under a fixed key gives the key (its first two words)
  and the counter's upper half (the last two).  `StatelessRandomGetKeyCounter` gives
  that pair as tensors; the V2 ops (`StatelessRandomUniformV2`, ...) take it.
- `RngReadAndSkip` is `tf.random.Generator`'s step: it returns the state variable's
  [counter_lo, counter_hi, key] and moves the counter 256 blocks per requested value,
  as TF does, so a Generator's draws are TF's.
- `StatelessMultinomial` draws as TF's kernel in one shard: row after row, one double
  per sample, from one stream.  (TF splits a large batch over threads at offsets that
  depend on its thread pool; rows of such a batch follow each other here.)

All kernels run on the host ("CPU"): the draws are cheap next to the Python around them.
Float32 normals are TF's Box-Muller over the same words, but TF rounds through glibc's
logf / sincosf where ops/philox_random.py rounds double results: about 1.5% of float32
normals (and what is drawn from them) are one ulp off TF's.
"""

from __future__ import annotations

import enum
import math
import struct

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import philox_random as pr
from asyncflow.ops.data_flow_stack_ops import handle_object
from asyncflow.ops.state_ops import VarRef
from asyncflow.registry import INDEX, NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "Algorithm",
    "create_rng_state",
    "fold_in",
    "key_counter_of_seed",
    "split",
    "stateless_categorical",
    "stateless_multinomial",
    "stateless_random_binomial",
    "stateless_random_gamma",
    "stateless_random_poisson",
]

_U64 = (1 << 64) - 1
_M32 = 0xFFFFFFFF
_SCRAMBLE_KEY = (0x3EC8F720, 0x02461E29)  # TF's GenerateKey
_RESERVED = 256  # counter blocks per output a Generator skips (TF's RngSkip)
_FLOATS = TypeConstraint(["float16", "bfloat16", "float32", "float64"], "float32")
_INTS = TypeConstraint(["int32", "int64"], "int64")
_FULL_INTS = TypeConstraint(["int32", "int64", "uint32", "uint64"], "uint64")
_SEED_T = TypeConstraint(["int32", "int64"], "int64")
_PHILOX, _AUTO = 1, 3


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def make_shape(shape) -> tuple[int, ...]:
    shape = np.asarray(shape)
    if shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"shape must be a vector of {{int32,int64}}, got shape "
            f"{_shape_str(shape.shape)}"
        )  # fmt: skip
    dims = tuple(int(d) for d in shape)
    for d in dims:
        if d < 0:
            raise errors.InvalidArgumentError(None, None, f"Dimension {d} must be >= 0")
    return dims


def key_counter_of_seed(seed) -> tuple[tuple[int, int], int]:
    """TF's GenerateKey: the Philox key (two 32-bit words) and 128-bit counter of a seed.

    Raises:
      InvalidArgumentError: the seed is not of shape [2].
    """
    seed = np.asarray(seed)
    if seed.shape != (2,):
        raise errors.InvalidArgumentError(
            None, None, f"seed must have shape [2], not {_shape_str(seed.shape)}"
        )
    s0, s1 = (int(v) & _U64 for v in seed)
    w = pr.philox_words(np, _SCRAMBLE_KEY, s0 | (s1 << 64), 1)[0]
    return (int(w[0]), int(w[1])), (int(w[2]) << 64) | (int(w[3]) << 96)


def _key_counter_of_tensors(key, counter, alg) -> tuple[tuple[int, int], int]:
    alg = int(np.asarray(alg))
    if alg not in (_PHILOX, _AUTO):
        raise errors.InvalidArgumentError(None, None, f"Unsupported algorithm id: {alg}")
    key, counter = np.asarray(key), np.asarray(counter)
    if key.shape != (1,):
        raise errors.InvalidArgumentError(
            None, None, f"key must have shape [1], not {_shape_str(key.shape)}. (Note that "
            "batched keys are not supported yet.)"
        )  # fmt: skip
    if counter.ndim != 1 or counter.shape[0] < 2:
        raise errors.InvalidArgumentError(
            None, None, f"counter must be a vector of length at least 2, got shape "
            f"{_shape_str(counter.shape)}"
        )  # fmt: skip
    k = int(key[0]) & _U64
    c = (int(counter[0]) & _U64) | ((int(counter[1]) & _U64) << 64)
    return (k & _M32, k >> 32), c


# -- the distributions over a (key, counter) ---------------------------------------------


def _uniform(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.uniform(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _normal(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.normal(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _truncated(key, counter, shape, dtype):
    n = int(np.prod(shape))
    return pr.truncated_normal(np, key, counter, n, dtype.as_numpy_dtype).reshape(shape)


def _full_int(key, counter, shape, dtype):
    n = int(np.prod(shape))
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    if np_dtype.itemsize == 4:
        w = pr.philox_words(np, key, counter, -(-n // 4)).reshape(-1)[:n]
        return w.view(np_dtype).reshape(shape)
    w = pr.philox_words(np, key, counter, -(-n // 2)).reshape(-1, 2)[:n].astype(np.uint64)
    return (w[:, 0] | (w[:, 1] << np.uint64(32))).view(np_dtype).reshape(shape)


def _uniform_int(key, counter, shape, dtype, lo, hi):
    n = int(np.prod(shape))
    if n and lo >= hi:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval, got {lo} >= {hi}")
    np_dtype = dtype.as_numpy_dtype
    return pr.uniform_int(np, key, counter, n, lo, hi, np_dtype).reshape(shape)


# -- seeds to (key, counter) ----------------------------------------------------------------


def _vector_shape(n):
    return lambda op: [tensor_shape.TensorShape([n])]


StatelessRandomGetKeyCounter = register_op(
    "StatelessRandomGetKeyCounter",
    inputs=["seed: Tseed"],
    outputs=["key: uint64", "counter: uint64"],
    attrs={"Tseed": _SEED_T},
    shape_fn=lambda op: [tensor_shape.TensorShape([1]), tensor_shape.TensorShape([2])],
)
NotDifferentiable("StatelessRandomGetKeyCounter")


@StatelessRandomGetKeyCounter.kernel("CPU")
async def _get_key_counter(ctx, seed):
    (k0, k1), c = key_counter_of_seed(seed)
    key = np.array([k0 | (k1 << 32)], np.uint64)
    return key, np.array([c & _U64, c >> 64], np.uint64)


# -- V1 (seed) and V2 (key, counter, alg) ops of each distribution ------------------------


def _shape_of(op):
    op.inputs[0].shape.with_rank(1)
    if op.type.endswith("V2"):
        op.inputs[1].shape.merge_with(tensor_shape.TensorShape([1]))
    else:
        op.inputs[1].shape.merge_with(tensor_shape.TensorShape([2]))
    return [ops.constant_shape(op.inputs[0])]


def _register_pair(name: str, draw, dtype_attr, extra_inputs=()):
    """`Stateless<name>` (shape, seed, ...) and `Stateless<name>V2` (shape, key, counter,
    alg, ...), drawing `draw(key, counter, shape, dtype, *extra)`."""
    v1 = register_op(
        f"Stateless{name}",
        inputs=["shape: T", "seed: Tseed", *extra_inputs],
        outputs=["output: dtype"],
        attrs={"dtype": dtype_attr, "T": INDEX, "Tseed": _SEED_T},
        shape_fn=_shape_of,
    )
    v2 = register_op(
        f"Stateless{name}V2",
        inputs=["shape: Tshape", "key: uint64", "counter: uint64", "alg: int32",
                *extra_inputs],
        outputs=["output: dtype"],
        attrs={"dtype": dtype_attr, "Tshape": INDEX},
        shape_fn=_shape_of,
    )  # fmt: skip
    NotDifferentiable(f"Stateless{name}")
    NotDifferentiable(f"Stateless{name}V2")

    @v1.kernel("CPU")
    async def _v1(ctx, shape, seed, *extra):
        key, counter = key_counter_of_seed(seed)
        return draw(key, counter, make_shape(shape), ctx.attrs["dtype"], *extra)

    @v2.kernel("CPU")
    async def _v2(ctx, shape, key, counter, alg, *extra):
        key, counter = _key_counter_of_tensors(key, counter, alg)
        return draw(key, counter, make_shape(shape), ctx.attrs["dtype"], *extra)

    return v1, v2


def _int_range(key, counter, shape, dtype, minval, maxval):
    lo, hi = np.asarray(minval), np.asarray(maxval)
    if lo.ndim or hi.ndim:
        raise errors.InvalidArgumentError(
            None, None, f"minval must be 0-D, got shape {_shape_str(lo.shape)}"
            if lo.ndim else f"maxval must be 0-D, got shape {_shape_str(hi.shape)}"
        )  # fmt: skip
    return _uniform_int(key, counter, shape, dtype, int(lo), int(hi))


_register_pair("RandomUniformFullInt", _full_int, _FULL_INTS)
_register_pair("RandomUniformInt", _int_range, _INTS, ("minval: dtype", "maxval: dtype"))
_register_pair("RandomUniform", _uniform, _FLOATS)
_register_pair("RandomNormal", _normal, _FLOATS)
# (TF's V1 name is StatelessTruncatedNormal, without "Random")
_register_pair("TruncatedNormal", _truncated, _FLOATS)


# -- per-output streams: gamma, poisson, binomial ------------------------------------------


class _Stream:
    """One output's stretch of the stream (TF: a PhiloxRandom copy skipped to it), read
    as TF's UniformDistribution<double> and NormalDistribution<double> read it: a block
    gives two values, handed out last first."""

    __slots__ = ("key", "counter", "block", "first", "u", "u_left", "n", "n_left")

    def __init__(self, key, counter: int, block: int, first=None):
        self.key, self.counter, self.block, self.first = key, counter, block, first
        self.u_left = self.n_left = 0

    def _words(self):
        if self.first is not None:
            w, self.first = self.first, None
        else:
            block = np.array([self.block], np.uint64)
            w = pr.philox_words_at(np, self.key, self.counter, block)[0]
        self.block += 1
        return w

    def uniform(self) -> float:
        if self.u_left == 0:
            w = self._words()
            self.u = [_u64_to_double(int(w[0]), int(w[1])), _u64_to_double(int(w[2]), int(w[3]))]
            self.u_left = 2
        self.u_left -= 1
        return self.u[self.u_left]

    def normal(self) -> float:
        if self.n_left == 0:
            w = self._words()
            u1 = max(_u64_to_double(int(w[0]), int(w[1])), 1.0e-7)
            v1 = 2.0 * math.pi * _u64_to_double(int(w[2]), int(w[3]))
            r = math.sqrt(-2.0 * math.log(u1))
            self.n = [math.sin(v1) * r, math.cos(v1) * r]
            self.n_left = 2
        self.n_left -= 1
        return self.n[self.n_left]


def _u64_to_double(x0: int, x1: int) -> float:
    """TF's Uint64ToDouble: 20 bits of x0 over the 32 of x1 as a mantissa, [0, 1)."""
    bits = (1023 << 52) | ((x0 & 0xFFFFF) << 32) | x1
    return struct.unpack("<d", struct.pack("<Q", bits))[0] - 1.0


def _streams(key, counter: int, n: int, skip: int):
    """The n outputs' streams, output i at `skip * i` blocks, first blocks made at once."""
    offsets = np.arange(n, dtype=np.uint64) * np.uint64(skip)
    first = pr.philox_words_at(np, key, counter, offsets) if n else np.empty((0, 4))
    return [_Stream(key, counter, skip * i, first[i]) for i in range(n)]


def _gamma_one(alpha: float, st: _Stream) -> float:
    """Marsaglia and Tsang's method as TF's kernel runs it (exponential for alpha 1)."""
    if alpha == 1.0:
        return -math.log1p(-st.uniform())
    below_one = alpha < 1
    d = alpha + (2.0 / 3 if below_one else -1.0 / 3)
    c = 1.0 / 3 / math.sqrt(d)
    while True:
        x = st.normal()
        v = 1 + c * x
        if v <= 0:
            continue
        v = v * v * v
        u = st.uniform()
        if u < 1 - 0.0331 * (x * x) * (x * x) or math.log(u) < 0.5 * x * x + d * (
            1 - v + math.log(v)
        ):
            res = d * v
            if below_one:
                res *= st.uniform() ** (1 / alpha)
            return res


def _gamma(key, counter, shape, dtype, alpha):
    alpha = np.asarray(alpha)
    flat_a = alpha.astype(np.float64).reshape(-1)
    n_alpha, total = flat_a.size, int(np.prod(shape))
    check_ends_with(shape, alpha.shape)
    out = np.empty(total, np.float64)
    per = total // n_alpha if n_alpha else 0
    for i, st in enumerate(_streams(key, counter, total, _RESERVED)):
        a_idx, s_idx = divmod(i, per)
        out[s_idx * n_alpha + a_idx] = _gamma_one(float(flat_a[a_idx]), st)
    return out.astype(dtype.as_numpy_dtype).reshape(shape)


def _poisson_one(rate: float, st: _Stream, highest: float) -> float:
    """Knuth's method below rate 10, Hormann's transformed rejection from 10 on (TF's)."""
    if rate < 10:
        limit, prod, x = math.exp(-rate), 1.0, 0.0
        while True:
            prod *= st.uniform()
            if prod <= limit and x <= highest:
                return x
            x += 1
    if math.isinf(rate) and rate > 0:
        return highest
    log_rate = math.log(rate)
    b = 0.931 + 2.53 * math.sqrt(rate)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    while True:
        u = st.uniform() - 0.5
        v = st.uniform()
        u_shifted = 0.5 - abs(u)
        k = math.floor((2 * a / u_shifted + b) * u + rate + 0.43)
        if k > highest:
            continue
        if u_shifted >= 0.07 and v <= v_r:
            return k
        if k < 0 or (u_shifted < 0.013 and v > u_shifted):
            continue
        s = math.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -rate + k * log_rate - math.lgamma(k + 1)
        if s <= t:
            return k


def _poisson(key, counter, shape, dtype, lam):
    lam = np.asarray(lam)
    flat = lam.astype(np.float64).reshape(-1)
    n_rate, total = flat.size, int(np.prod(shape))
    check_ends_with(shape, lam.shape)
    np_dtype = np.dtype(dtype.as_numpy_dtype)
    highest = float(np.iinfo(np_dtype).max if np_dtype.kind in "iu" else np.finfo(np_dtype).max)
    out = np.empty(total, np.float64)
    per = total // n_rate if n_rate else 0
    for i, st in enumerate(_streams(key, counter, total, _RESERVED)):
        r_idx, s_idx = divmod(i, per)
        rate = float(flat[r_idx])
        out[s_idx * n_rate + r_idx] = math.nan if math.isnan(rate) or rate < 0 else (
            _poisson_one(rate, st, highest))  # fmt: skip
    return out.astype(np_dtype).reshape(shape)


_STIRLING_TAIL = (
    0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
    0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
    0.00925546218271273, 0.00833056343336287,
)  # fmt: skip


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _STIRLING_TAIL[int(k)]
    sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / sq) / sq) / (k + 1)


def _binomial_inversion(count: float, prob: float, st: _Stream) -> float:
    """Geometric waiting times summed until they pass `count` (small count * prob)."""
    total, n = 0.0, 0
    while True:
        total += math.ceil(math.log(st.uniform()) / math.log1p(-prob))
        if total > count:
            return n
        n += 1


def _btrs(count: float, prob: float, st: _Stream) -> float:
    """Hormann's BTRS transformed rejection, with TF's constants."""
    sd = math.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * sd
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * sd
    m = math.floor((count + 1) * prob)
    while True:
        u = st.uniform()
        v = st.uniform()
        u = u - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2 * a / us + b) * u + c)
        if us >= 0.07 and v <= v_r:
            return k
        if k < 0 or k > count:
            continue
        v = math.log(v * alpha / (a / (us * us) + b))
        bound = (
            (m + 0.5) * math.log((m + 1) / (r * (count - m + 1)))
            + (count + 1) * math.log((count - m + 1) / (count - k + 1))
            + (k + 0.5) * math.log(r * (count - k + 1) / (k + 1))
            + _stirling_tail(m) + _stirling_tail(count - m)
            - _stirling_tail(k) - _stirling_tail(count - k)
        )  # fmt: skip
        if v <= bound:
            return k


def _binomial_one(count, prob, key, counter, i: int) -> float:
    """One draw as TF's kernel: in the parameters' own precision for the branch tests,
    BTRS (skip 256 blocks per output) or inversion (skip 42) on min(p, 1 - p)."""
    dcount = float(count)
    if dcount <= 0.0 or prob <= 0:
        return 0.0
    if prob >= 1:
        return dcount
    if not prob <= 1:  # NaN
        return math.nan
    flip = prob > 0.5
    p = (prob.dtype.type(1) - prob) if flip else prob
    if count * p >= p.dtype.type(10):
        k = _btrs(dcount, float(p), _Stream(key, counter, 256 * i))
    else:
        k = _binomial_inversion(dcount, float(p), _Stream(key, counter, 42 * i))
    return dcount - k if flip else k


def _binomial(key, counter, shape, dtype, counts, probs):
    counts, probs = np.asarray(counts), np.asarray(probs)
    try:
        batch = np.broadcast_shapes(counts.shape, probs.shape)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"counts and probs must have compatible batch dimensions: "
            f"{_shape_str(counts.shape)} vs. {_shape_str(probs.shape)}"
        ) from None  # fmt: skip
    check_ends_with(shape, batch)
    counts = np.broadcast_to(counts, batch).reshape(-1)
    probs = np.broadcast_to(probs, batch).reshape(-1)
    n_batch, total = counts.size, int(np.prod(shape))
    per = total // n_batch if n_batch else 0
    out = np.empty(total, np.float64)
    for i in range(total):
        b_idx, s_idx = divmod(i, per)
        out[s_idx * n_batch + b_idx] = _binomial_one(counts[b_idx], probs[b_idx], key, counter, i)
    return out.astype(dtype.as_numpy_dtype).reshape(shape)


def check_ends_with(shape, tail) -> None:
    tail = tuple(tail)
    if len(shape) < len(tail) or tuple(shape[len(shape) - len(tail) :]) != tail:
        raise errors.InvalidArgumentError(
            None, None, "Shape passed in must end with broadcasted shape."
        )


_PARAM_T = TypeConstraint(["float16", "float32", "float64"], "float32")
_RATE_T = TypeConstraint(["float16", "float32", "float64", "int32", "int64"])
_COUNT_OUT = TypeConstraint(["float16", "float32", "float64", "int32", "int64"], "int64")


def _tail_shape(op):
    op.inputs[0].shape.with_rank(1)
    return [ops.constant_shape(op.inputs[0])]


StatelessRandomGammaV3 = register_op(
    "StatelessRandomGammaV3",
    inputs=["shape: shape_dtype", "key: uint64", "counter: uint64", "alg: int32",
            "alpha: dtype"],
    outputs=["output: dtype"],
    attrs={"dtype": _PARAM_T, "shape_dtype": INDEX},
    shape_fn=_tail_shape,
)  # fmt: skip
StatelessRandomGammaV2 = register_op(
    "StatelessRandomGammaV2",
    inputs=["shape: T", "seed: Tseed", "alpha: dtype"],
    outputs=["output: dtype"],
    attrs={"dtype": _PARAM_T, "T": INDEX, "Tseed": _SEED_T},
    shape_fn=_tail_shape,
)
StatelessRandomPoisson = register_op(
    "StatelessRandomPoisson",
    inputs=["shape: T", "seed: Tseed", "lam: Rtype"],
    outputs=["output: dtype"],
    attrs={"Rtype": _RATE_T, "dtype": _COUNT_OUT, "T": INDEX, "Tseed": _SEED_T},
    shape_fn=_tail_shape,
)
StatelessRandomBinomial = register_op(
    "StatelessRandomBinomial",
    inputs=["shape: S", "seed: Tseed", "counts: T", "probs: T"],
    outputs=["output: dtype"],
    attrs={"S": INDEX, "Tseed": _SEED_T, "T": _RATE_T, "dtype": _COUNT_OUT},
    shape_fn=_tail_shape,
)
for _name in ("StatelessRandomGammaV3", "StatelessRandomGammaV2", "StatelessRandomPoisson",
              "StatelessRandomBinomial"):  # fmt: skip
    NotDifferentiable(_name)


async def _off_loop(ctx, fn, n: int):
    """Per-output Python loops run on the device's workers, never holding the loop."""
    return await ctx.device.compute(fn, cost=64 * max(n, 1))


@StatelessRandomGammaV3.kernel("CPU")
async def _gamma_v3(ctx, shape, key, counter, alg, alpha):
    key, counter = _key_counter_of_tensors(key, counter, alg)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: _gamma(key, counter, dims, ctx.attrs["dtype"], alpha),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomGammaV2.kernel("CPU")
async def _gamma_v2(ctx, shape, seed, alpha):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: _gamma(key, counter, dims, ctx.attrs["dtype"], alpha),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomPoisson.kernel("CPU")
async def _poisson_kernel(ctx, shape, seed, lam):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    return await _off_loop(ctx, lambda: _poisson(key, counter, dims, ctx.attrs["dtype"], lam),
                           int(np.prod(dims)))  # fmt: skip


@StatelessRandomBinomial.kernel("CPU")
async def _binomial_kernel(ctx, shape, seed, counts, probs):
    key, counter = key_counter_of_seed(seed)
    dims = make_shape(shape)
    dtype = ctx.attrs["dtype"]
    return await _off_loop(ctx, lambda: _binomial(key, counter, dims, dtype, counts, probs),
                           int(np.prod(dims)))  # fmt: skip


# -- StatelessMultinomial ------------------------------------------------------------------


def _multinomial_shape(op):
    logits = op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(0)
    op.inputs[2].shape.merge_with(tensor_shape.TensorShape([2]))
    n = ops.constant_value(op.inputs[1])
    return [tensor_shape.TensorShape([logits[0], None if n is None else int(n)])]


StatelessMultinomial = register_op(
    "StatelessMultinomial",
    inputs=["logits: T", "num_samples: int32", "seed: Tseed"],
    outputs=["output: output_dtype"],
    attrs={"T": TypeConstraint(["float16", "bfloat16", "float32", "float64"]),
           "Tseed": _SEED_T, "output_dtype": _INTS},
    shape_fn=_multinomial_shape,
)  # fmt: skip
NotDifferentiable("StatelessMultinomial")


def _multinomial(key, counter, logits, n: int, np_dtype):
    """TF's kernel in one shard: each row's cumulative exp(logit - max) over the finite
    logits, and per sample one double of the stream times the total, placed by
    upper_bound; rows take their doubles one after another."""
    rows, classes = logits.shape
    u = pr.uniform(np, key, counter, rows * n, np.float64).reshape(rows, n)
    out = np.empty((rows, n), np_dtype)
    for b in range(rows):
        row = logits[b]
        finite = np.isfinite(row)
        top = row[finite].max() if finite.any() else np.finfo(row.dtype).min
        weights = np.where(finite, np.exp(row.astype(np.float64) - float(top)), 0.0)
        cdf = np.cumsum(weights)
        out[b] = np.searchsorted(cdf, u[b] * cdf[-1], side="right")
    return out


@StatelessMultinomial.kernel("CPU")
async def _stateless_multinomial(ctx, logits, num_samples, seed):
    logits, num_samples = np.asarray(logits), np.asarray(num_samples)
    if logits.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, f"logits should be a matrix, got shape {_shape_str(logits.shape)}"
        )
    if num_samples.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_samples should be a scalar, got shape "
            f"{_shape_str(num_samples.shape)}"
        )  # fmt: skip
    n = int(num_samples)
    if n < 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_samples should be nonnegative, got {n}"
        )
    if logits.shape[1] <= 0 and logits.shape[0] > 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_classes should be positive, got {logits.shape[1]}"
        )
    key, counter = key_counter_of_seed(seed)
    np_dtype = ctx.attrs["output_dtype"].as_numpy_dtype
    return await _off_loop(ctx, lambda: _multinomial(key, counter, logits, n, np_dtype),
                           logits.size + logits.shape[0] * n)  # fmt: skip


# -- RngReadAndSkip: tf.random.Generator's state ------------------------------------------

RngReadAndSkip = register_op(
    "RngReadAndSkip",
    inputs=["resource: resource", "alg: int32", "delta: uint64"],
    outputs=["value: int64"],
    shape_fn=_vector_shape(3),
    stateful=True,
)
NotDifferentiable("RngReadAndSkip")


@RngReadAndSkip.kernel("CPU")
async def _rng_read_and_skip(ctx, handle, alg, delta):
    return _read_and_skip(handle, int(np.asarray(alg)), int(np.asarray(delta)))


def _read_and_skip(handle, alg: int, delta: int) -> np.ndarray:
    """The generator's state before, its counter moved 256 blocks per `delta` (TF's).
    No await between the read and the write: atomic on the loop."""
    var = handle_object(handle, VarRef, "resource variable")
    if alg not in (_PHILOX, _AUTO):
        raise errors.InvalidArgumentError(None, None, f"Unsupported algorithm id: {alg}")
    if var.value is None:
        raise errors.FailedPreconditionError(
            None, None, f"Error while reading resource variable {var.name}. This could mean "
            "that the variable was uninitialized."
        )  # fmt: skip
    state = np.asarray(var.value)
    if state.dtype != np.int64 or state.ndim != 1 or state.size < 3:
        raise errors.InvalidArgumentError(
            None, None, "The RNG state must be an int64 vector of at least 3 elements, got "
            f"{state.dtype} {_shape_str(state.shape)}"
        )  # fmt: skip
    old = state.copy()
    words = old.view(np.uint64)
    c = ((int(words[0]) | (int(words[1]) << 64)) + delta * _RESERVED) & ((1 << 128) - 1)
    new = old.copy()
    new.view(np.uint64)[:2] = [c & _U64, c >> 64]
    var.assign(new, False, np)
    return old


def _key_counter_of_state(state) -> tuple[tuple[int, int], int]:
    words = np.asarray(state).view(np.uint64)
    k = int(words[2])
    return (k & _M32, k >> 32), int(words[0]) | (int(words[1]) << 64)


StatefulRandomBinomial = register_op(
    "StatefulRandomBinomial",
    inputs=["resource: resource", "algorithm: int64", "shape: S", "counts: T", "probs: T"],
    outputs=["output: dtype"],
    attrs={"S": INDEX, "T": TypeConstraint(["float16", "float32", "float64", "int32", "int64"],
                                           "float64"), "dtype": _COUNT_OUT},
    shape_fn=lambda op: [ops.constant_shape(op.inputs[2])],
    stateful=True,
)  # fmt: skip
NotDifferentiable("StatefulRandomBinomial")


@StatefulRandomBinomial.kernel("CPU")
async def _stateful_binomial(ctx, handle, algorithm, shape, counts, probs):
    """Generator.binomial: TF's binomial (as StatelessRandomBinomial) from the state's
    (key, counter), the counter moved past 2 * 100 blocks per 4 samples of each batch
    member (TF's reservation)."""
    dims = make_shape(shape)
    counts, probs = np.asarray(counts), np.asarray(probs)
    try:
        members = int(np.prod(np.broadcast_shapes(counts.shape, probs.shape)))
    except ValueError:
        members = 1  # (_binomial raises TF's error)
    per = int(np.prod(dims)) // members if members else 0
    state = _read_and_skip(handle, int(np.asarray(algorithm)), members * 200 * (per + 3) // 4)
    key, counter = _key_counter_of_state(state)
    dtype = ctx.attrs["dtype"]
    return await _off_loop(ctx, lambda: _binomial(key, counter, dims, dtype, counts, probs),
                           int(np.prod(dims)))  # fmt: skip


StatelessRandomGetKeyCounterAlg = register_op(
    "StatelessRandomGetKeyCounterAlg",
    inputs=["seed: Tseed"],
    outputs=["key: uint64", "counter: uint64", "alg: int32"],
    attrs={"Tseed": _SEED_T},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([1]), tensor_shape.TensorShape([2]), tensor_shape.TensorShape([])
    ],
)  # fmt: skip
NotDifferentiable("StatelessRandomGetKeyCounterAlg")


@StatelessRandomGetKeyCounterAlg.kernel("CPU")
async def _get_key_counter_alg(ctx, seed):
    key, counter = await _get_key_counter(ctx, seed)
    return key, counter, np.array(_PHILOX, np.int32)


# -- builders ------------------------------------------------------------------------------


class Algorithm(enum.Enum):
    """`tf.random.Algorithm`: the counter-based generators (only Philox draws here)."""

    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


def convert_alg_to_int(alg) -> int:
    """An algorithm given as an int, an Algorithm or a name ("philox", "auto_select").

    Raises:
      ValueError: an unknown name.  TypeError: another kind of value.
    """
    if isinstance(alg, Algorithm):
        return alg.value
    if isinstance(alg, int):
        return alg
    if isinstance(alg, ops.Tensor):
        return alg
    if isinstance(alg, str):
        canon = alg.strip().lower().replace("-", "").replace("_", "")
        names = {"philox": 1, "threefry": 2, "autoselect": 3}
        if canon in names:
            return names[canon]
        raise ValueError(_unsupported_alg(alg))
    raise TypeError(f"Can't convert argument `alg` (of value {alg} and type {type(alg)}) to int.")


def _unsupported_alg(alg) -> str:
    return (
        f"Argument `alg` got unsupported value {alg}. Supported values are "
        f"{Algorithm.PHILOX}/'philox' for the Philox algorithm, "
        f"{Algorithm.THREEFRY}/'threefry' for the ThreeFry algorithm, and "
        f"{Algorithm.AUTO_SELECT}/'auto_select' for auto-selection."
    )


def shape_tensor(shape):
    if isinstance(shape, ops.Tensor):
        return shape
    dims = tensor_shape.as_shape(shape).as_list() if isinstance(
        shape, tensor_shape.TensorShape) else list(shape)  # fmt: skip
    return ops.convert_to_tensor(dims, dtype=dtypes.int64 if not dims else None, name="shape")


def _apply(op_type, inputs, attrs, name=None):
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs[0]


def _key_counter_alg(seed):
    seed = ops.convert_to_tensor(seed, name="seed")
    op = ops.apply_op("StatelessRandomGetKeyCounterAlg", [seed], {"Tseed": seed.dtype})
    return op.outputs


def stateless_multinomial(logits, num_samples, seed, output_dtype=dtypes.int64, name=None):
    """`tf.random.stateless_multinomial`: TF's draws for a [2] seed (module note)."""
    with ops.name_scope(name, "stateless_multinomial", [logits, seed]):
        return _multinomial_impl(logits, num_samples, output_dtype, seed)


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None):
    """`tf.random.stateless_categorical`: [batch, num_samples] class indices drawn from
    the rows of `logits` (unnormalized log-probabilities), TF's numbers for a [2] seed.

    Raises:
      ValueError: `dtype` is not int32 or int64.
    """
    with ops.name_scope(name, "stateless_categorical", [logits, seed]):
        return _multinomial_impl(logits, num_samples, dtype, seed)


def _multinomial_impl(logits, num_samples, dtype, seed):
    logits = ops.convert_to_tensor(logits, name="logits")
    dtype = dtypes.as_dtype(dtype) if dtype else dtypes.int64
    accepted = (dtypes.int32, dtypes.int64)
    if dtype not in accepted:
        raise ValueError(
            f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are {accepted}."
        )
    n = ops.convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
    seed = ops.convert_to_tensor(seed, name="seed")
    attrs = {"T": logits.dtype, "Tseed": seed.dtype, "output_dtype": dtype}
    return _apply("StatelessMultinomial", [logits, n, seed], attrs)


def stateless_random_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32, name=None):
    """`tf.random.stateless_gamma`: gamma(alpha) / beta draws, `shape` ending with the
    broadcast shape of alpha and beta; TF's numbers for a [2] seed (at least the
    dtype's smallest normal number, as TF clips them)."""
    from asyncflow.ops import array_ops, framework_ops, manip_ops, math_ops

    with ops.name_scope(name, "stateless_random_gamma", [shape, seed, alpha, beta]):
        shape = shape_tensor(shape)
        alpha = ops.convert_to_tensor(alpha, dtype=dtype, name="alpha")
        beta = ops.convert_to_tensor(1 if beta is None else beta, name="beta", dtype=dtype)
        both = framework_ops.broadcast_dynamic_shape(array_ops.shape(alpha), array_ops.shape(beta))
        alpha_b = manip_ops.broadcast_to(alpha, both)
        key, counter, alg = _key_counter_alg(seed)
        rnd = _apply("StatelessRandomGammaV3", [shape, key, counter, alg, alpha_b],
                     {"dtype": alpha.dtype, "shape_dtype": shape.dtype})  # fmt: skip
        tiny = np.finfo(alpha.dtype.as_numpy_dtype).tiny
        return math_ops.maximum(ops.convert_to_tensor(tiny, dtype=alpha.dtype), rnd / beta)


def stateless_random_poisson(shape, seed, lam, dtype=dtypes.int32, name=None):
    """`tf.random.stateless_poisson`: Poisson(lam) draws, `shape` ending with lam's shape;
    TF's numbers for a [2] seed."""
    with ops.name_scope(name, "stateless_random_poisson", [shape, seed, lam]):
        shape = shape_tensor(shape)
        seed = ops.convert_to_tensor(seed, name="seed")
        lam = ops.convert_to_tensor(lam, name="lam")
        attrs = {"Rtype": lam.dtype, "dtype": dtypes.as_dtype(dtype), "T": shape.dtype,
                 "Tseed": seed.dtype}  # fmt: skip
        return _apply("StatelessRandomPoisson", [shape, seed, lam], attrs)


def stateless_random_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32, name=None):
    """`tf.random.stateless_binomial`: Binomial(counts, probs) draws, `shape` ending with
    their broadcast shape; TF's numbers for a [2] seed."""
    with ops.name_scope(name, "stateless_random_binomial", [shape, seed, counts, probs]):
        shape = shape_tensor(shape)
        seed = ops.convert_to_tensor(seed, name="seed")
        probs = ops.convert_to_tensor(probs, preferred_dtype=dtypes.float32, name="probs")
        counts = ops.convert_to_tensor(counts, preferred_dtype=probs.dtype, name="counts")
        attrs = {"S": shape.dtype, "Tseed": seed.dtype, "T": probs.dtype,
                 "dtype": dtypes.as_dtype(output_dtype)}  # fmt: skip
        return _apply("StatelessRandomBinomial", [shape, seed, counts, probs], attrs)


def stateless_random_uniform_full_int(shape, seed, dtype=dtypes.uint64, name=None):
    """Every value of an integer dtype equally likely (TF's stateless_uniform with
    minval=maxval=None)."""
    with ops.name_scope(name, "stateless_random_uniform", [shape, seed]):
        shape = shape_tensor(shape)
        key, counter, alg = _key_counter_alg(seed)
        return _apply("StatelessRandomUniformFullIntV2", [shape, key, counter, alg],
                      {"dtype": dtypes.as_dtype(dtype), "Tshape": shape.dtype})  # fmt: skip


def split(seed, num=2, alg="auto_select"):
    """`tf.random.split`: `num` new [2] seeds from one, as TF (full-range uniform ints of
    the seed's dtype)."""
    check_alg(alg)
    seed = ops.convert_to_tensor(seed)
    return stateless_random_uniform_full_int([num, 2], seed, dtype=seed.dtype)


def fold_in(seed, data, alg="auto_select"):
    """`tf.random.fold_in`: a new [2] seed from `seed` and an integer `data`, as TF
    ([a full-range draw of data's dtype, data])."""
    from asyncflow.ops import manip_ops

    check_alg(alg)
    data = ops.convert_to_tensor(data)
    seed1 = stateless_random_uniform_full_int([], seed, dtype=data.dtype)
    return manip_ops.stack([seed1, data])


def check_alg(alg) -> None:
    alg = convert_alg_to_int(alg)
    if isinstance(alg, int) and alg not in (Algorithm.PHILOX.value, Algorithm.AUTO_SELECT.value):
        raise ValueError(_unsupported_alg(alg) + " (asyncflow draws Philox only)")


def create_rng_state(seed, alg):
    """`tf.random.create_rng_state`: the int64 [3] state of a Philox generator (counter
    low and high, key) from an integer (cut into 64-bit words, lowest first) or a vector
    (its first 3 values, zeros added on the left).  A NumPy array."""
    alg = convert_alg_to_int(alg)
    size = 3
    if isinstance(seed, int):
        words = []
        for _ in range(size):
            words.append(seed & _U64)
            seed >>= 64
        seed = words
    flat = np.asarray([int(s) & _U64 for s in np.asarray(seed).reshape(-1).tolist()], np.uint64)
    flat = flat.view(np.int64)[:size]
    return np.concatenate([np.zeros(size - flat.size, np.int64), flat])
