"""A few Philox blocks on the host are computed one counter at a time in Python integers
(ops/philox_random.py `_scalar_blocks`: a per-element draw in a data pipeline), and they
are the NumPy rounds' words bit for bit: across the 128-bit counter's carries, at any
key, for any offsets."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow.ops import philox_random

_U64 = (1 << 64) - 1
_SMALL = philox_random._SCALAR_MAX_BLOCKS


def _numpy_path(key, counter, offsets):
    # More offsets than the scalar path takes: the NumPy rounds compute them all.
    flat = offsets.reshape(-1)
    pad = np.arange(_SMALL + 1, dtype=np.uint64)
    words = philox_random.philox_words_at(np, key, counter, np.concatenate([flat, pad]))
    return words[: flat.size].reshape(*offsets.shape, 4)


@pytest.mark.parametrize(
    "counter",
    [0, 7, _U64 - 2, (1 << 128) - 3, (5 << 64) + _U64 - 20, (0xFFFFFFFF << 96) | 0x1234],
)
@pytest.mark.parametrize("key", [(0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (12345, 0xABCDEF01)])
def test_a_few_blocks_are_the_numpy_rounds_words(counter, key):
    for offsets in (
        np.arange(1, dtype=np.uint64),
        np.arange(_SMALL, dtype=np.uint64),
        np.array([[3, 1 << 40], [_U64 - 1, 9]], np.uint64),  # any offsets, 2-D, wrapping
    ):
        got = philox_random.philox_words_at(np, key, counter, offsets)
        assert got.shape == (*offsets.shape, 4) and got.dtype == np.uint32
        np.testing.assert_array_equal(got, _numpy_path(key, counter, offsets))


def test_random_counters_keys_and_offsets():
    rng = np.random.default_rng(0)
    for _ in range(300):
        key = (int(rng.integers(0, 2**32)), int(rng.integers(0, 2**32)))
        counter = int(rng.integers(0, 2**63)) << 65 | int(rng.integers(0, 2**63)) << 1
        offsets = rng.integers(0, 2**63, int(rng.integers(1, _SMALL + 1))).astype(np.uint64)
        np.testing.assert_array_equal(
            philox_random.philox_words_at(np, key, counter, offsets),
            _numpy_path(key, counter, offsets),
        )
