"""TensorFlow's Philox4x32-10 stream, so that seeded tf.data ops give TF's order.

TF's CPU random sources draw from `random::PhiloxRandom(seed, seed2)` (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC'11): a 128-bit counter and a 64-bit
key, ten rounds of multiply / xor per counter value, four 32-bit outputs per round
trip.  `seed` fills the key (low word first), `seed2` the counter's upper 64 bits.
tf.data pulls one output at a time through `SingleSampleAdapter`, which hands out the
four words of a block in order before computing the next.

`PhiloxStream` is that adapter: it computes many blocks at once with NumPy (uint64
lanes holding 32-bit words, so products never overflow; `philox_words`, the counters
made as one array) and hands out Python ints.

Invariant: the n-th value `next()` returns is the n-th value TF's adapter returns for
the same (seed, seed2), whatever block sizes were computed on the way.
"""

from __future__ import annotations

import struct

import numpy as np

from asyncflow.kernel_api import random_state
from asyncflow.ops import jit_loops

__all__ = [
    "FixedSeeds",
    "PhiloxStream",
    "RandomSeeds",
    "SimplePhilox",
    "TFGenerator",
    "normal",
    "philox_words",
    "philox_words_at",
    "prepare",
    "seed_generator",
    "tf_generator",
    "truncated_normal",
    "uniform",
    "uniform_int",
    "warm",
]

_M32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_MUL_A, _MUL_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_KEY_A64, _KEY_B64 = np.uint64(_KEY_A), np.uint64(_KEY_B)
_MASK = np.uint64(_M32)
_SHIFT = np.uint64(32)
# Blocks computed per refill once a stream is drawn from a lot (a shuffle: one draw per
# element): 1024 blocks cost ~0.07 us a draw, 256 ~0.1, a Python counter per block ~0.6.
_MAX_BLOCKS = 1024


def _blocks(counter: int, key: tuple[int, int], n: int) -> list[int]:
    """The 4*n output words of counters counter .. counter+n-1, block by block."""
    ctr = [(counter + i) & ((1 << 128) - 1) for i in range(n)]
    c0, c1, c2, c3 = (np.array([(c >> s) & _M32 for c in ctr], np.uint64) for s in (0, 32, 64, 96))
    k0, k1 = key
    for _ in range(10):
        p0 = _MUL_A * c0
        p1 = _MUL_B * c2
        c0, c1, c2, c3 = (
            (p1 >> _SHIFT) ^ c1 ^ np.uint64(k0),
            p1 & _MASK,
            (p0 >> _SHIFT) ^ c3 ^ np.uint64(k1),
            p0 & _MASK,
        )
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return np.stack([c0, c1, c2, c3], axis=1).ravel().tolist()


class PhiloxStream:
    """uint32 draws in the order of TF's `SingleSampleAdapter<PhiloxRandom>(seed, seed2)`."""

    __slots__ = ("_key", "_counter", "_buf", "_pos", "_grow")

    def __init__(self, seed: int, seed2: int):
        seed, seed2 = int(seed) & _U64, int(seed2) & _U64  # int64 seeds, as TF's uint64
        self._key = (seed & _M32, seed >> 32)
        self._counter = seed2 << 64
        self._buf: list[int] = []
        self._pos = 0
        self._grow = 1  # blocks per refill: small streams (seed pairs) compute little

    @classmethod
    def at(cls, key: tuple[int, int], counter: int) -> PhiloxStream:
        """The stream of a generator whose key and 128-bit counter are given (a
        reservation of `TFGenerator.reserve_blocks`)."""
        stream = cls(0, 0)
        stream._key = key
        stream._counter = int(counter) & ((1 << 128) - 1)
        return stream

    def _refill(self) -> None:
        self._buf = philox_words(np, self._key, self._counter, self._grow).reshape(-1).tolist()
        self._counter = (self._counter + self._grow) & ((1 << 128) - 1)
        self._pos = 0
        self._grow = min(self._grow * 4, _MAX_BLOCKS)

    def take(self, k: int) -> list[int]:
        """The next `k` draws, as `next()` would give them one by one."""
        out: list[int] = []
        while len(out) < k:
            if self._pos == len(self._buf):
                self._refill()
            got = self._buf[self._pos : self._pos + k - len(out)]
            self._pos += len(got)
            out += got
        return out

    def next(self) -> int:
        if self._pos == len(self._buf):
            self._refill()
        v = self._buf[self._pos]
        self._pos += 1
        return v


# -- seed generators (TF's FixedSeedGenerator / RandomSeedGenerator) ----------------------


class FixedSeeds:
    """Every iterator of the dataset gets the dataset's own seeds."""

    __slots__ = ("seeds",)

    def __init__(self, seed: int, seed2: int):
        self.seeds = (seed, seed2)

    def next_pair(self) -> tuple[int, int]:
        return self.seeds


class RandomSeeds:
    """Each iterator of the dataset (each `repeat` epoch) gets the next two draws of
    one stream seeded with the dataset's seeds: a new order per pass, the same
    sequence of orders in every run."""

    __slots__ = ("_stream",)

    def __init__(self, seed: int, seed2: int):
        self._stream = PhiloxStream(seed, seed2)

    def next_pair(self) -> tuple[int, int]:
        s = self._stream
        return s.next(), s.next()


def seed_generator(seed: int, seed2: int, reshuffle: bool) -> FixedSeeds | RandomSeeds:
    """TF's choice for a seeded dataset op: (0, 0) means fresh entropy (two 64-bit
    words from the OS), then a reshuffling or a fixed generator."""
    seed, seed2 = int(seed), int(seed2)
    if seed == 0 and seed2 == 0:
        seed, seed2 = (int(w) for w in np.random.SeedSequence().generate_state(2, np.uint64))
    return RandomSeeds(seed, seed2) if reshuffle else FixedSeeds(seed, seed2)


# -- TF's random-op kernels (RandomUniform, RandomStandardNormal, TruncatedNormal,
# RandomUniformInt), written against an array module `xp` (NumPy or CuPy) -----------------
#
# TF's PhiloxRandomOp keeps one generator per op (`GuardedPhiloxRandom`: (seed, seed2),
# both drawn from the OS when both are 0) and reserves 256 blocks per output element at
# each run (`ReserveRandomOutputs(n, 256)`), so the k-th run of an op starts k * n * 256
# counter values further on.  `FillPhiloxRandom` fills the output by groups of the
# distribution's `kResultElementCount`; group g draws from the generator skipped by g
# blocks (one block per group), or, for the truncated normal (a variable number of
# samples per output), from a `SingleSampleAdapter` over the generator skipped by
# g * group * 256 / 4 blocks.  TF's GPU kernels fill by the same groups, so TF gives the
# same numbers on either device (up to its device's sin/cos/log); so do these, from
# any array module.  The Box-Muller transform's log, sin and cos are the C library's
# (`_LIBM`, below) on the host, as TF's CPU kernels call them.

_RESERVED_PER_OUTPUT = 256  # TF: ReserveRandomOutputs(output_count, 256)


class TFGenerator:
    """TF's `GuardedPhiloxRandom` for one stateful random op: `reserve(n)` gives the
    counter (a 128-bit int) a run drawing n outputs starts from, and moves past it."""

    __slots__ = ("key", "counter")

    def __init__(self, seed: int, seed2: int):
        seed, seed2 = int(seed) & _U64, int(seed2) & _U64
        if seed == 0 and seed2 == 0:
            seed, seed2 = (int(w) for w in np.random.SeedSequence().generate_state(2, np.uint64))
        self.key = (seed & _M32, seed >> 32)
        self.counter = seed2 << 64

    def reserve(self, n: int) -> int:
        start = self.counter
        self.counter = (start + int(n) * _RESERVED_PER_OUTPUT) & ((1 << 128) - 1)
        return start

    def reserve_blocks(self, n: int) -> int:
        """TF's `ReserveSamples128(n)`: the counter of the next `n` blocks, moved past."""
        start = self.counter
        self.counter = (start + int(n)) & ((1 << 128) - 1)
        return start


def tf_generator(ctx) -> TFGenerator:
    """The stateful random op's TF generator (GuardedPhiloxRandom) for its `seed` and
    `seed2` attrs, made on first use in `kernel_api.random_state(ctx)`: the session's
    for the op, or inside a dataset function the pass's."""
    state = random_state(ctx)
    gen = state.get("tf_rng")
    if gen is None:
        gen = state["tf_rng"] = TFGenerator(int(ctx.attrs["seed"]), int(ctx.attrs["seed2"]))
    return gen


class SimplePhilox:
    """TF's `SimplePhilox`: 32/64-bit draws, floats and exact uniform integers, one
    word at a time from a `SingleSampleAdapter` over a generator at (key, counter)."""

    __slots__ = ("_next",)

    def __init__(self, key: tuple[int, int], counter: int):
        self._next = PhiloxStream.at(key, counter).next

    def rand32(self) -> int:
        return self._next()

    def rand64(self) -> int:
        lo = self._next()
        return lo | self._next() << 32

    def rand_float(self) -> float:
        """TF's Uint32ToFloat: [0, 1) with 23 random bits (a float32 value)."""
        bits = (self._next() & 0x7FFFFF) | 0x3F800000
        return struct.unpack("<f", bits.to_bytes(4, "little"))[0] - 1.0

    def rand_double(self) -> float:
        """TF's Uint64ToDouble(x0, x1): 20 bits of x0 over the 32 of x1."""
        x0 = self._next()
        man = (x0 & 0xFFFFF) << 32 | self._next()
        return struct.unpack("<d", (man | 1023 << 52).to_bytes(8, "little"))[0] - 1.0

    def uniform(self, n: int) -> int:
        """TF's `Uniform(n)`: exact, by rejection (ExactUniformInt over 32 bits)."""
        return _exact_uniform(n, self.rand32, _M32)

    def uniform64(self, n: int) -> int:
        """TF's `Uniform64(n)`: exact, by rejection (ExactUniformInt over 64 bits)."""
        return _exact_uniform(n, self.rand64, _U64)


def _exact_uniform(n: int, draw, top: int) -> int:
    """An integer uniform in [0, n) from `draw()` (uniform over [0, top]), as TF's
    ExactUniformInt: a power of two masks; otherwise draws below the remainder of
    (top + 1) / n are rejected so that every result has as many preimages."""
    if n == 0:
        draw()  # (TF consumes one draw and returns 0)
        return 0
    if n & (n - 1) == 0:
        return draw() & (n - 1)
    rem = top % n + 1
    while True:
        r = draw()
        if r >= rem:
            return r % n


def philox_words(xp, key: tuple[int, int], counter: int, n: int):
    """uint32 [n, 4]: the Philox4x32-10 blocks of counters counter .. counter + n - 1
    (128-bit, wrapping), computed with `xp` (uint64 lanes holding 32-bit words); on the
    host by the compiled loop once it is ready (the same words)."""
    if xp is np and n >= _JIT_MIN_BLOCKS:
        fill = _JIT.get("fill")
        if fill is not None:
            out = np.empty(4 * n, np.uint32)
            fill(
                np.uint64(counter & _U64),
                np.uint64((counter >> 64) & _U64),
                np.uint64(key[0]),
                np.uint64(key[1]),
                out,
            )
            return out.reshape(n, 4)
    return philox_words_at(xp, key, counter, xp.arange(n, dtype=xp.uint64))


def philox_words_at(xp, key: tuple[int, int], counter: int, offsets):
    """uint32 [*offsets.shape, 4]: the blocks of counters counter + offsets (uint64).
    On a device the ten rounds are one fused kernel."""
    lo0, hi0 = counter & _U64, (counter >> 64) & _U64
    if xp is np and offsets.size <= _SCALAR_MAX_BLOCKS:
        return _scalar_blocks(lo0, hi0, key, offsets)
    lo = offsets + np.uint64(lo0)  # wraps modulo 2**64
    hi = (lo < np.uint64(lo0)).astype(xp.uint64) + np.uint64(hi0)  # the carry
    rounds = _philox_rounds if xp is np else _fused_rounds(xp)
    words = rounds(lo, hi, np.uint64(key[0]), np.uint64(key[1]))
    return xp.stack(words, axis=-1).astype(xp.uint32)


# A few blocks on the host (a per-element draw in a data pipeline: sample_from_datasets'
# stateless multinomial, each element's seed scrambled) are Python integers: ten rounds
# over NumPy arrays are ~100 ufunc calls, ~0.2 ms whatever the size (~10 us a block here).
_SCALAR_MAX_BLOCKS = 8


def _scalar_blocks(lo0: int, hi0: int, key, offsets):
    """`philox_words_at` on the host for a few blocks: the same rounds as
    `_philox_rounds`, one counter at a time in Python integers (the same words)."""
    k0_start, k1_start = int(key[0]) & _U64, int(key[1]) & _U64
    words = []
    for off in offsets.reshape(-1).tolist():
        lo = (lo0 + off) & _U64
        hi = (hi0 + (lo < lo0)) & _U64  # the carry
        c0, c1, c2, c3 = lo & _M32, lo >> 32, hi & _M32, hi >> 32
        k0, k1 = k0_start, k1_start
        for _ in range(10):
            p0 = (c0 * 0xD2511F53) & _U64  # (uint64 lanes there: wrapping, as here)
            p1 = (c2 * 0xCD9E8D57) & _U64
            c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _M32, (p0 >> 32) ^ c3 ^ k1, p0 & _M32
            k0 = (k0 + _KEY_A) & _M32
            k1 = (k1 + _KEY_B) & _M32
        words += (c0 & _M32, c1, c2 & _M32, c3)  # (astype(uint32) there)
    return np.array(words, np.uint32).reshape(*offsets.shape, 4)


def _philox_rounds(lo, hi, k0, k1):
    """Philox4x32-10 of the counters (lo, hi) under key (k0, k1): four uint64 arrays
    holding the 32-bit output words (only ufuncs: `cupy.fuse` makes it one kernel)."""
    c0, c1 = lo & _MASK, lo >> _SHIFT
    c2, c3 = hi & _MASK, hi >> _SHIFT
    for _ in range(10):
        p0 = c0 * _MUL_A
        p1 = c2 * _MUL_B
        c0, c1, c2, c3 = (
            (p1 >> _SHIFT) ^ c1 ^ k0,
            p1 & _MASK,
            (p0 >> _SHIFT) ^ c3 ^ k1,
            p0 & _MASK,
        )
        k0 = (k0 + _KEY_A64) & _MASK
        k1 = (k1 + _KEY_B64) & _MASK
    return c0, c1, c2, c3


def _fill_loop(lo0, hi0, k0, k1, out):
    """out[4*i : 4*i + 4] = the block of counter (hi0, lo0) + i, for each block of out
    (flat uint32): `_philox_rounds` one counter at a time, compiled (numba), the 128-bit
    carry as there.  The words are uint32 and each product a uint32 widened to uint64
    (numba widens uint32 arithmetic, so every result is narrowed back explicitly): LLVM
    then vectorises the rounds over counters (~3 ns a block on the project machine)."""
    mask = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    mul_a = np.uint64(0xD2511F53)
    mul_b = np.uint64(0xCD9E8D57)
    key_a = np.uint32(0x9E3779B9)
    key_b = np.uint32(0xBB67AE85)
    k0 = np.uint32(k0)
    k1 = np.uint32(k1)
    for i in range(out.size // 4):
        lo = lo0 + np.uint64(i)  # wraps modulo 2**64
        hi = hi0 + np.uint64(1) if lo < lo0 else hi0
        c0 = np.uint32(lo & mask)
        c1 = np.uint32(lo >> shift)
        c2 = np.uint32(hi & mask)
        c3 = np.uint32(hi >> shift)
        a = k0
        b = k1
        for _ in range(10):
            p0 = np.uint64(c0) * mul_a
            p1 = np.uint64(c2) * mul_b
            c0, c1, c2, c3 = (
                np.uint32(np.uint32(p1 >> shift) ^ c1 ^ a),
                np.uint32(p1 & mask),
                np.uint32(np.uint32(p0 >> shift) ^ c3 ^ b),
                np.uint32(p0 & mask),
            )
            a = np.uint32(a + key_a)
            b = np.uint32(b + key_b)
        out[4 * i] = c0
        out[4 * i + 1] = c1
        out[4 * i + 2] = c2
        out[4 * i + 3] = c3


def _build_loops(numba):
    fill = numba.njit(nogil=True, cache=True)(_fill_loop)
    zero = np.uint64(0)
    fill(zero, zero, zero, zero, np.empty(4, np.uint32))  # (its one signature)
    return {"fill": fill}


# The host's blocks by a compiled loop (~3 ns a block instead of ~65 through ten rounds
# of NumPy passes over uint64 lanes: 32,768 blocks, a dropout mask of 128x1024 floats,
# 0.09 ms instead of 2.1 ms).
# Fewer blocks than this stay with NumPy, whose call costs less than the loop's dispatch
# until then (and PhiloxStream's small refills never wait for a compile anyway).
_JIT = jit_loops.BackgroundLoops("the Philox loop", _build_loops)
_JIT_MIN_BLOCKS = 16


def warm(timeout: float | None = 120.0) -> bool:
    """Compile the host's Philox loop now and wait (tests, benchmarks)."""
    return _JIT.warm(timeout)


_FUSED: dict = {}  # array module -> its fused `_philox_rounds`


def _fused_rounds(xp):
    fused = _FUSED.get(xp)
    if fused is None:
        fused = _FUSED[xp] = xp.fuse(kernel_name="asyncflow_philox")(_philox_rounds)
    return fused


def _uint32_to_float(xp, w):
    """TF's Uint32ToFloat: 23 random mantissa bits, [0, 1)."""
    bits = (w & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(xp.float32) - np.float32(1.0)


def _uint64_to_double(xp, w0, w1):
    """TF's Uint64ToDouble(x0, x1): 20 bits of x0 over the 32 of x1, [0, 1)."""
    man = ((w0 & np.uint32(0xFFFFF)).astype(xp.uint64) << _SHIFT) | w1.astype(xp.uint64)
    return (man | np.uint64(1023 << 52)).view(xp.float64) - 1.0


def _half_bits(xp, w, mantissa_bits: int, np_dtype):
    """TF's Uint16ToHalf / Uint16ToGfloat16: the low `mantissa_bits` of each word as a
    mantissa in [1, 2), minus 1 (exact in float32, then cast exactly)."""
    man = w & np.uint32((1 << mantissa_bits) - 1)
    bits = (man << np.uint32(23 - mantissa_bits)) | np.uint32(0x3F800000)
    return (bits.view(xp.float32) - np.float32(1.0)).astype(np_dtype)


# TF's CPU kernels call the C library's logf, sincosf (float32) and log, sincos
# (float64) per pair: on Linux glibc's, which are not correctly rounded (logf is within
# 0.82 ulp), so NumPy's own functions, or float64 ones rounded, give other last bits:
# about 1.5% of float32 normals 1-3 ulps off TF's, 0.16% of float64 ones (a [1000,1000]
# tf.random_normal, TF 2.21 beside us).  On the host the transform runs as a compiled
# loop (numba) calling the very functions of the process's C library through ctypes
# pointers (opaque calls: LLVM neither folds nor vectorizes them into another math
# library's), which gives TF's bits.  sinf and cosf share sincosf's algorithm in glibc
# (the same results; checked against TF's draws in tests/ops/test_random_normal_bits.py).
# Where numba has no vector math library (SVML: `numba.config.USING_SVML`), its own
# np.log/np.sin/np.cos of a scalar are LLVM intrinsics that lower to the same scalar
# C-library calls (logf, sinf, ... bit for bit: 4M draws of each width compared with the
# ctypes loops), and those loops are cached on disk (`cache=True`): a process loads them
# in ~0.2 s instead of compiling them (~1-2 s, which the first normal draw waited for).
# With SVML, which could vectorize the intrinsics into its own math, the ctypes loops
# compile once per process (a pointer-holding function cannot be cached): the first
# draw waits for them, started early on a background thread by the graph builders of
# the normal ops (`prepare`).  Without numba or the C library (ASYNCFLOW_NO_NUMBA=1, or
# no `libm`) the NumPy path below runs, 1-3 ulps off TF's in those cases.


def _bm_f32(u1, v1, s, c):  # TF's BoxMullerFloat, after its clamp of u1 (cacheable form)
    two = np.float32(-2.0)
    for i in range(u1.size):
        u2 = np.sqrt(two * np.log(u1[i]))
        s[i] = np.sin(v1[i]) * u2
        c[i] = np.cos(v1[i]) * u2


def _bm_f64(u1, v1, s, c):  # TF's BoxMullerDouble, after its clamp of u1 (cacheable form)
    for i in range(u1.size):
        u2 = np.sqrt(-2.0 * np.log(u1[i]))
        s[i] = np.sin(v1[i]) * u2
        c[i] = np.cos(v1[i]) * u2


def _libm_functions():
    """(logf, sinf, cosf, log, sin, cos) of the process's C library as ctypes functions,
    or None."""
    import ctypes
    import ctypes.util

    path = ctypes.util.find_library("m")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        fns = []
        for name, ctype in (("logf", ctypes.c_float), ("sinf", ctypes.c_float),
                            ("cosf", ctypes.c_float), ("log", ctypes.c_double),
                            ("sin", ctypes.c_double), ("cos", ctypes.c_double)):  # fmt: skip
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctype, [ctype]
            fns.append(fn)
    except (OSError, AttributeError):
        return None
    return tuple(fns)


def _build_libm_loops(numba):
    fns = _libm_functions()
    if fns is None:
        return {}
    if not getattr(numba.config, "USING_SVML", False):
        box_muller_f32 = numba.njit(nogil=True, cache=True)(_bm_f32)
        box_muller_f64 = numba.njit(nogil=True, cache=True)(_bm_f64)
        for loop, dtype in ((box_muller_f32, np.float32), (box_muller_f64, np.float64)):
            one = np.full(1, 0.5, dtype)
            loop(one, one, one.copy(), one.copy())  # (its one signature)
        return {"f32": box_muller_f32, "f64": box_muller_f64}
    logf, sinf, cosf, log, sin, cos = fns

    @numba.njit(nogil=True)
    def box_muller_f32(u1, v1, s, c):  # TF's BoxMullerFloat, after its clamp of u1
        two = np.float32(-2.0)
        for i in range(u1.size):
            u2 = np.sqrt(two * logf(u1[i]))
            s[i] = sinf(v1[i]) * u2
            c[i] = cosf(v1[i]) * u2

    @numba.njit(nogil=True)
    def box_muller_f64(u1, v1, s, c):  # TF's BoxMullerDouble, after its clamp of u1
        for i in range(u1.size):
            u2 = np.sqrt(-2.0 * log(u1[i]))
            s[i] = sin(v1[i]) * u2
            c[i] = cos(v1[i]) * u2

    for loop, dtype in ((box_muller_f32, np.float32), (box_muller_f64, np.float64)):
        one = np.full(1, 0.5, dtype)
        loop(one, one, one.copy(), one.copy())  # (its one signature)
    return {"f32": box_muller_f32, "f64": box_muller_f64}


_LIBM = jit_loops.BackgroundLoops("the Box-Muller loops", _build_libm_loops)


def prepare() -> None:
    """Start compiling the host's Box-Muller loops on a background thread (a graph
    builder of a normal distribution calls it, so that the first draw rarely waits)."""
    _LIBM.get("")


def _libm_loop(name: str):
    """The compiled loop `name`, waiting for its compile; None without numba/libm."""
    loop = _LIBM.get(name)
    if loop is None and _LIBM.warm():
        loop = _LIBM.get(name)
    return loop


def _box_muller_host(loop, u1, v1):
    u1 = np.ascontiguousarray(u1)
    v1 = np.ascontiguousarray(v1)
    s = np.empty_like(u1)
    c = np.empty_like(u1)
    loop(u1.reshape(-1), v1.reshape(-1), s.reshape(-1), c.reshape(-1))
    return s, c


def _box_muller_float(xp, w0, w1):
    """TF's BoxMullerFloat(x0, x1) -> (sin, cos) parts, float32."""
    u1 = xp.maximum(_uint32_to_float(xp, w0), np.float32(1.0e-7))
    # (2.0f * M_PI is a double: the product is one, rounded to float once)
    v1 = (2.0 * np.pi * _uint32_to_float(xp, w1).astype(xp.float64)).astype(xp.float32)
    loop = _libm_loop("f32") if xp is np else None
    if loop is not None:
        return _box_muller_host(loop, u1, v1)
    u2 = xp.sqrt(np.float32(-2.0) * xp.log(u1.astype(xp.float64)).astype(xp.float32))
    v1 = v1.astype(xp.float64)
    return xp.sin(v1).astype(xp.float32) * u2, xp.cos(v1).astype(xp.float32) * u2


def _box_muller_double(xp, w0, w1, w2, w3):
    """TF's BoxMullerDouble(x0, x1, x2, x3) -> (sin, cos) parts, float64."""
    u1 = xp.maximum(_uint64_to_double(xp, w0, w1), 1.0e-7)
    v1 = 2.0 * np.pi * _uint64_to_double(xp, w2, w3)
    loop = _libm_loop("f64") if xp is np else None
    if loop is not None:
        return _box_muller_host(loop, u1, v1)
    u2 = xp.sqrt(-2.0 * xp.log(u1))
    return xp.sin(v1) * u2, xp.cos(v1) * u2


def _interleave(xp, a, b, size: int):
    return xp.stack([a, b], axis=1).reshape(-1)[:size]


def _blocks_for(xp, gen_key, counter: int, size: int, per_block: int):
    return philox_words(xp, gen_key, counter, -(-size // per_block))


def uniform(xp, key, counter: int, size: int, np_dtype):
    """TF's UniformDistribution for floats: `size` values in [0, 1), flat."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.float64:
        w = _blocks_for(xp, key, counter, size, 2).reshape(-1, 2)
        return _uint64_to_double(xp, w[:, 0], w[:, 1])[:size]
    w = _blocks_for(xp, key, counter, size, 4).reshape(-1)[:size]
    if np_dtype == np.float32:
        return _uint32_to_float(xp, w)
    if np_dtype == np.float16:
        return _half_bits(xp, w, 10, np_dtype)
    return _half_bits(xp, w, 7, np_dtype)  # bfloat16


def normal(xp, key, counter: int, size: int, np_dtype):
    """TF's NormalDistribution (Box-Muller): `size` standard normals, flat."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.float64:
        w = _blocks_for(xp, key, counter, size, 2)
        d0, d1 = _box_muller_double(xp, w[:, 0], w[:, 1], w[:, 2], w[:, 3])
        return _interleave(xp, d0, d1, size)
    w = _blocks_for(xp, key, counter, size, 4).reshape(-1, 2)
    f0, f1 = _box_muller_float(xp, w[:, 0], w[:, 1])
    return _interleave(xp, f0, f1, size).astype(np_dtype, copy=False)


def uniform_int(xp, key, counter: int, size: int, lo: int, hi: int, np_dtype):
    """TF's UniformDistribution for int32 (one word per value) and int64 (two words,
    the first one low): lo + bits % (hi - lo), in unsigned arithmetic, flat."""
    if np.dtype(np_dtype) == np.int32:
        w = _blocks_for(xp, key, counter, size, 4).reshape(-1)[:size]
        rng = np.uint32((hi - lo) & _M32)
        return (np.uint32(lo & _M32) + w % rng).view(xp.int32)
    w = _blocks_for(xp, key, counter, size, 2).reshape(-1, 2)[:size]
    bits = w[:, 0].astype(xp.uint64) | (w[:, 1].astype(xp.uint64) << _SHIFT)
    rng = np.uint64((hi - lo) & _U64)
    return (np.uint64(lo & _U64) + bits % rng).view(xp.int64)


def truncated_normal(xp, key, counter: int, size: int, np_dtype, blocks: int = 4):
    """TF's TruncatedNormalDistribution: standard normals with |x| < 2, flat.  Group g
    of `group` outputs (4; 2 for float64) takes Box-Muller pairs in order from its own
    region of the stream (a SingleSampleAdapter), keeping each value below the bound,
    until it has `group`.  `blocks` blocks per group are computed at first (16
    candidates for 4 outputs: a group is left short about once in 10**15), more for
    the groups they leave short; finding those reads from `xp`'s memory."""
    np_dtype = np.dtype(np_dtype)
    wide = np_dtype == np.float64
    group = 2 if wide else 4
    skip = group * _RESERVED_PER_OUTPUT // 4  # blocks between the groups' regions
    groups = -(-size // group)
    out = xp.empty((groups, group), xp.float64 if wide else xp.float32)
    if groups == 0:
        return out.reshape(-1).astype(np_dtype, copy=False)
    todo = xp.arange(groups, dtype=xp.uint64)  # the groups not filled yet
    while True:
        offsets = todo[:, None] * np.uint64(skip) + xp.arange(blocks, dtype=xp.uint64)
        w = philox_words_at(xp, key, counter, offsets)  # [groups, blocks, 4]
        if wide:  # one block per Box-Muller pair
            c0, c1 = _box_muller_double(xp, w[..., 0], w[..., 1], w[..., 2], w[..., 3])
        else:  # two words per pair
            w = w.reshape(len(todo), -1, 2)
            c0, c1 = _box_muller_float(xp, w[..., 0], w[..., 1])
        cand = xp.stack([c0, c1], axis=2).reshape(len(todo), -1)  # in TF's order
        keep = xp.abs(cand) < 2.0
        rank = xp.cumsum(keep, axis=1) - 1
        take = keep & (rank < group)
        rows, cols = xp.nonzero(take)
        out[todo[rows].astype(xp.int64), rank[rows, cols]] = cand[rows, cols]
        short = xp.flatnonzero(take.sum(axis=1) < group)
        if short.size == 0:
            break
        todo, blocks = todo[short], blocks * 2
    return out.reshape(-1)[:size].astype(np_dtype, copy=False)
