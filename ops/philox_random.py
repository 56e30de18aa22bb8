"""TensorFlow's Philox4x32-10 stream, so that seeded tf.data ops give TF's order.

TF's CPU random sources draw from `random::PhiloxRandom(seed, seed2)` (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC'11): a 128-bit counter and a 64-bit
key, ten rounds of multiply / xor per counter value, four 32-bit outputs per round
trip.  `seed` fills the key (low word first), `seed2` the counter's upper 64 bits.
tf.data pulls one output at a time through `SingleSampleAdapter`, which hands out the
four words of a block in order before computing the next.

`PhiloxStream` is that adapter: it computes many blocks at once with NumPy (uint64
lanes holding 32-bit words, so products never overflow) and hands out Python ints.

Invariant: the n-th value `next()` returns is the n-th value TF's adapter returns for
the same (seed, seed2), whatever block sizes were computed on the way.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PhiloxStream", "FixedSeeds", "RandomSeeds", "seed_generator"]

_M32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_MUL_A, _MUL_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(_M32)
_SHIFT = np.uint64(32)
_MAX_BLOCKS = 256  # blocks computed per refill once a stream is drawn from a lot


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

    def _refill(self) -> None:
        self._buf = _blocks(self._counter, self._key, self._grow)
        self._counter += self._grow
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
