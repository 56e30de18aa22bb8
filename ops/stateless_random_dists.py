"""TF's gamma, Poisson and binomial samplers over its Philox stream, for all outputs at
once (ops/stateless_random_ops.py's kernels call them).

TF gives each output its own stretch of the stream (a PhiloxRandom copy skipped 256
blocks per output index; 42 for binomial inversion) and runs a rejection loop on it,
reading blocks as UniformDistribution<double> (two doubles a block) and
NormalDistribution<double> (a Box-Muller pair a block), each handing out its two
values last first.  `_Streams` keeps that state for every output in arrays, and each
sampler runs its loop in lockstep over the outputs still rejecting, so the cost is a
few array operations per round instead of Python per output.

Invariant: every output draws exactly the values, in exactly the order, TF's kernel
draws for it, and every transcendental function (log, sin, cos, exp, log1p, pow,
lgamma) is the C library's double one (math.*), as TF's are: NumPy's own vectorized
versions may differ in the last bit, which would change an accept decision.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors
from asyncflow.ops import philox_random as pr

__all__ = ["binomial", "check_ends_with", "gamma", "poisson"]

_RESERVED = 256  # blocks per output (TF's kReservedSamplesPerOutput)
_INVERSION_RESERVED = 42  # binomial inversion's blocks per output (TF)
_ONE = np.uint64(1023 << 52)


def _libm(fn, x: np.ndarray) -> np.ndarray:
    """The C library's double `fn` of each value (math.*; see the module note)."""
    return np.fromiter(map(fn, x.tolist()), np.float64, len(x))


def _log(x: np.ndarray) -> np.ndarray:
    """log, -inf at 0 (C's log; math.log refuses 0)."""
    out = np.full(len(x), -np.inf)
    pos = x > 0
    out[pos] = _libm(math.log, x[pos])
    return out


def _u64_to_double(w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """TF's Uint64ToDouble: 20 bits of w0 over the 32 of w1 as a mantissa, [0, 1)."""
    man = ((w0.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | w1.astype(np.uint64)
    return (man | _ONE).view(np.float64) - 1.0


class _Streams:
    """Each output's stretch of the stream, read as uniform and normal doubles."""

    def __init__(self, key, counter: int, n: int, skip: int):
        self.key, self.counter = key, counter
        self.block = np.arange(n, dtype=np.uint64) * np.uint64(skip)
        self.u = np.zeros((n, 2))
        self.u_left = np.zeros(n, np.int8)
        self.nv = np.zeros((n, 2))
        self.n_left = np.zeros(n, np.int8)

    def _words(self, idx: np.ndarray) -> np.ndarray:
        w = pr.philox_words_at(np, self.key, self.counter, self.block[idx])
        self.block[idx] += np.uint64(1)
        return w

    def uniform(self, idx: np.ndarray) -> np.ndarray:
        need = idx[self.u_left[idx] == 0]
        if need.size:
            w = self._words(need)
            self.u[need, 0] = _u64_to_double(w[:, 0], w[:, 1])
            self.u[need, 1] = _u64_to_double(w[:, 2], w[:, 3])
            self.u_left[need] = 2
        self.u_left[idx] -= 1
        return self.u[idx, self.u_left[idx]]

    def normal(self, idx: np.ndarray) -> np.ndarray:
        need = idx[self.n_left[idx] == 0]
        if need.size:
            w = self._words(need)  # TF's BoxMullerDouble
            u1 = np.maximum(_u64_to_double(w[:, 0], w[:, 1]), 1.0e-7)
            v1 = 2.0 * np.pi * _u64_to_double(w[:, 2], w[:, 3])
            r = np.sqrt(-2.0 * _libm(math.log, u1))
            self.nv[need, 0] = _libm(math.sin, v1) * r
            self.nv[need, 1] = _libm(math.cos, v1) * r
            self.n_left[need] = 2
        self.n_left[idx] -= 1
        return self.nv[idx, self.n_left[idx]]


def check_ends_with(shape, tail) -> None:
    tail = tuple(tail)
    if len(shape) < len(tail) or tuple(shape[len(shape) - len(tail) :]) != tail:
        raise errors.InvalidArgumentError(
            None, None, "Shape passed in must end with broadcasted shape."
        )


def _scatter(values: np.ndarray, members: int, per: int) -> np.ndarray:
    """Output i = member * per + sample lands at sample * members + member (TF's layout)."""
    return values.reshape(members, per).T.reshape(-1) if members and per else values


# -- gamma -----------------------------------------------------------------------------


def gamma(key, counter, shape, np_dtype, alpha) -> np.ndarray:
    """Marsaglia and Tsang's method as TF's kernel runs it (an exponential for alpha 1;
    alpha below 1 boosted by a uniform ** (1 / alpha))."""
    alpha = np.asarray(alpha)
    check_ends_with(shape, alpha.shape)
    flat = alpha.astype(np.float64).reshape(-1)
    members, total = flat.size, int(np.prod(shape))
    per = total // members if members else 0
    a = np.repeat(flat, per)  # output i's alpha
    out = np.empty(total)
    st = _Streams(key, counter, total, _RESERVED)
    ones = np.flatnonzero(a == 1.0)
    if ones.size:
        out[ones] = -_libm(math.log1p, -st.uniform(ones))
    idx = np.flatnonzero(a != 1.0)
    below = a < 1
    d = a + np.where(below, 2.0 / 3, -1.0 / 3)
    c = 1.0 / 3 / np.sqrt(d)
    while idx.size:
        x = st.normal(idx)
        v = 1 + c[idx] * x
        ok = v > 0
        retry = idx[~ok]  # (v <= 0: another normal, no uniform drawn)
        idx, x, v = idx[ok], x[ok], v[ok]
        v = v * v * v
        u = st.uniform(idx)
        squeeze = u < 1 - 0.0331 * (x * x) * (x * x)
        rest = ~squeeze
        accept = squeeze.copy()
        accept[rest] = _log(u[rest]) < 0.5 * x[rest] * x[rest] + d[idx[rest]] * (
            1 - v[rest] + _libm(math.log, v[rest])
        )
        done, res = idx[accept], d[idx[accept]] * v[accept]
        boost = below[done]
        if boost.any():
            b = st.uniform(done[boost])
            res[boost] *= np.fromiter(
                map(math.pow, b.tolist(), (1 / a[done[boost]]).tolist()), np.float64, len(b)
            )
        out[done] = res
        idx = np.concatenate([retry, idx[~accept]])
    return _scatter(out, members, per).astype(np_dtype).reshape(shape)


# -- poisson ---------------------------------------------------------------------------


def poisson(key, counter, shape, np_dtype, lam) -> np.ndarray:
    """Knuth's method below rate 10, Hormann's transformed rejection (PTRS) from 10 on,
    as TF's kernel; NaN for a negative or NaN rate, the dtype's largest value for +inf."""
    lam = np.asarray(lam)
    check_ends_with(shape, lam.shape)
    flat = lam.astype(np.float64).reshape(-1)
    members, total = flat.size, int(np.prod(shape))
    per = total // members if members else 0
    rate = np.repeat(flat, per)
    np_dtype = np.dtype(np_dtype)
    highest = float(np.iinfo(np_dtype).max if np_dtype.kind in "iu" else np.finfo(np_dtype).max)
    out = np.full(total, np.nan)
    st = _Streams(key, counter, total, _RESERVED)
    valid = ~(np.isnan(rate) | (rate < 0))
    _knuth(st, rate, np.flatnonzero(valid & (rate < 10)), highest, out)
    inf = valid & np.isinf(rate)
    out[inf] = highest
    _ptrs(st, rate, np.flatnonzero(valid & (rate >= 10) & ~inf), highest, out)
    return _scatter(out, members, per).astype(np_dtype).reshape(shape)


def _knuth(st, rate, idx, highest, out) -> None:
    limit = _libm(math.exp, -rate[idx]) if idx.size else np.empty(0)
    prod = np.ones(idx.size)
    x = np.zeros(idx.size)
    while idx.size:
        prod = prod * st.uniform(idx)
        done = (prod <= limit) & (x <= highest)
        out[idx[done]] = x[done]
        keep = ~done
        idx, prod, x, limit = idx[keep], prod[keep], x[keep] + 1, limit[keep]


def _ptrs(st, rate, idx, highest, out) -> None:
    r = rate[idx]
    log_rate = _libm(math.log, r) if idx.size else r
    b = 0.931 + 2.53 * np.sqrt(r)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    while idx.size:
        u = st.uniform(idx) - 0.5
        v = st.uniform(idx)
        us = 0.5 - np.abs(u)
        k = np.floor((2 * a / us + b) * u + r + 0.43)
        live = ~(k > highest)
        quick = live & (us >= 0.07) & (v <= v_r)
        slow = live & ~quick & ~((k < 0) | ((us < 0.013) & (v > us)))
        accept = quick.copy()
        if slow.any():
            s = _log(v[slow] * inv_alpha[slow] / (a[slow] / (us[slow] * us[slow]) + b[slow]))
            t = -r[slow] + k[slow] * log_rate[slow] - _libm(math.lgamma, k[slow] + 1)
            accept[slow] = s <= t
        out[idx[accept]] = k[accept]
        keep = ~accept
        idx, r, log_rate = idx[keep], r[keep], log_rate[keep]
        b, a, inv_alpha, v_r = b[keep], a[keep], inv_alpha[keep], v_r[keep]


# -- binomial --------------------------------------------------------------------------

_STIRLING_TAIL = np.array([
    0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
    0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
    0.00925546218271273, 0.00833056343336287,
])  # fmt: skip


def _stirling_tail(k: np.ndarray) -> np.ndarray:
    small = k <= 9
    sq = (k + 1) * (k + 1)
    big = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / sq) / sq) / (k + 1)
    return np.where(small, _STIRLING_TAIL[np.clip(k, 0, 9).astype(np.int64)], big)


def binomial(key, counter, shape, np_dtype, counts, probs) -> np.ndarray:
    """TF's binomial kernel: per batch member, inversion (count * p < 10, its stream 42
    blocks per output) or BTRS (256 blocks per output) on min(p, 1 - p), the branch
    tests in the parameters' dtype."""
    counts, probs = np.asarray(counts), np.asarray(probs)
    try:
        batch = np.broadcast_shapes(counts.shape, probs.shape)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, "counts and probs must have compatible batch dimensions: "
            f"{list(counts.shape)} vs. {list(probs.shape)}"
        ) from None  # fmt: skip
    check_ends_with(shape, batch)
    cnt = np.broadcast_to(counts, batch).reshape(-1)
    prb = np.broadcast_to(probs, batch).reshape(-1)
    members, total = cnt.size, int(np.prod(shape))
    per = total // members if members else 0
    c_t, p_t = np.repeat(cnt, per), np.repeat(prb, per)  # (the parameters' own dtype)
    dcount = c_t.astype(np.float64)
    out = np.full(total, np.nan)
    zero = (dcount <= 0.0) | (p_t <= 0)
    out[zero] = 0.0
    full = ~zero & (p_t >= 1)
    out[full] = dcount[full]
    rest = ~zero & ~full & (p_t <= 1)  # (NaN p: NaN)
    flip = rest & (p_t > 0.5)
    q = np.where(flip, p_t.dtype.type(1) - p_t, p_t)
    big = rest & (c_t * q >= q.dtype.type(10))
    k = np.zeros(total)
    k_big = _btrs(key, counter, np.flatnonzero(big), dcount, q.astype(np.float64), total)
    k[big] = k_big
    small = rest & ~big
    k[small] = _inversion(key, counter, np.flatnonzero(small), dcount, q.astype(np.float64),
                          total)  # fmt: skip
    out[rest] = np.where(flip[rest], dcount[rest] - k[rest], k[rest])
    return _scatter(out, members, per).astype(np_dtype).reshape(shape)


def _inversion(key, counter, idx, count, prob, total) -> np.ndarray:
    st = _Streams(key, counter, total, _INVERSION_RESERVED)
    result = np.zeros(idx.size)
    geo = _libm(math.log1p, -prob[idx]) if idx.size else np.empty(0)
    acc, n = np.zeros(idx.size), np.zeros(idx.size)
    live = np.arange(idx.size)
    while live.size:
        u = st.uniform(idx[live])
        acc[live] += np.ceil(_log(u) / geo[live])
        done = acc[live] > count[idx[live]]
        result[live[done]] = n[live[done]]
        n[live[~done]] += 1
        live = live[~done]
    return result


def _btrs(key, counter, idx, count, prob, total) -> np.ndarray:
    st = _Streams(key, counter, total, _RESERVED)
    n, p = count[idx], prob[idx]
    sd = np.sqrt(n * p * (1 - p))
    b = 1.15 + 2.53 * sd
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    r = p / (1 - p)
    alpha = (2.83 + 5.1 / b) * sd
    m = np.floor((n + 1) * p)
    result = np.zeros(idx.size)
    live = np.arange(idx.size)
    while live.size:
        u = st.uniform(idx[live])
        v = st.uniform(idx[live])
        u = u - 0.5
        us = 0.5 - np.abs(u)
        L = live  # noqa: N806 - the live members' positions
        k = np.floor((2 * a[L] / us + b[L]) * u + c[L])
        quick = (us >= 0.07) & (v <= v_r[L])
        slow = ~quick & ~((k < 0) | (k > n[L]))
        accept = quick.copy()
        if slow.any():
            S = L[slow]  # noqa: N806
            ks, ns, ms = k[slow], n[S], m[S]
            lv = _log(v[slow] * alpha[S] / (a[S] / (us[slow] * us[slow]) + b[S]))
            bound = (
                (ms + 0.5) * _log((ms + 1) / (r[S] * (ns - ms + 1)))
                + (ns + 1) * _log((ns - ms + 1) / (ns - ks + 1))
                + (ks + 0.5) * _log(r[S] * (ns - ks + 1) / (ks + 1))
                + _stirling_tail(ms) + _stirling_tail(ns - ms)
                - _stirling_tail(ks) - _stirling_tail(ns - ks)
            )  # fmt: skip
            accept[slow] = lv <= bound
        result[L[accept]] = k[accept]
        live = L[~accept]
    return result


# -- multinomial -----------------------------------------------------------------------


def multinomial(key, counter, logits, n: int, np_dtype):
    """TF's multinomial kernel (stateless and stateful) in one shard: each row's
    cumulative exp(logit - max) over the finite logits, and per sample one double of
    the stream times the total, placed by upper_bound; rows take their doubles one
    after another."""
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
