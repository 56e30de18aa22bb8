"""The host's Philox blocks by the compiled loop (ops/philox_random.py `_fill_loop`) are
the NumPy rounds' words bit for bit, across the 128-bit counter's carries and at every
key, and seeded ops drawing through it still give TF's recorded numbers."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow.ops import fused_updates, philox_random

pytestmark = pytest.mark.skipif(
    fused_updates.numba_module() is None, reason="numba is not installed (the NumPy path runs)"
)

_U64 = (1 << 64) - 1


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    assert philox_random.warm()


def _numpy_words(key, counter, n):
    return philox_random.philox_words_at(np, key, counter, np.arange(n, dtype=np.uint64))


@pytest.mark.parametrize(
    "counter",
    [0, 7, _U64 - 2, (1 << 128) - 3, (5 << 64) + _U64 - 20, (0xFFFFFFFF << 96) | 0x1234],
)
@pytest.mark.parametrize("key", [(0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (12345, 0xABCDEF01)])
def test_compiled_words_are_numpys(counter, key):
    n = philox_random._JIT_MIN_BLOCKS + 37
    got = philox_random.philox_words(np, key, counter, n)
    assert got.shape == (n, 4) and got.dtype == np.uint32
    np.testing.assert_array_equal(got, _numpy_words(key, counter, n))


def test_compiled_words_across_the_carry_match_the_scalar_reference():
    key, start = (5, 6), (3 << 64) + _U64 - 10
    words = philox_random.philox_words(np, key, start, 32)
    for i in (0, 10, 11, 31):  # before, at and after the low word wraps
        assert words[i].tolist() == philox_random._blocks(start + i, key, 1)


def test_large_draws_use_the_compiled_loop_and_keep_the_numbers(monkeypatch):
    """A uniform draw of many blocks goes through the loop (its words as NumPy's); with
    the loop taken away the same draw gives the same floats."""
    key, counter, size = (99, 1), 42 << 64, 4096
    compiled = philox_random.uniform(np, key, counter, size, np.float32)
    monkeypatch.setattr(philox_random, "_JIT_MIN_BLOCKS", 1 << 62)
    np.testing.assert_array_equal(
        compiled, philox_random.uniform(np, key, counter, size, np.float32)
    )


@pytest.mark.parametrize("name", ["uniform_f32_graph_seed", "uniform_f64", "normal_f32", "int64"])
def test_tf_numbers_through_the_compiled_loop(monkeypatch, name):
    """TF's recorded draws (tests/fixtures/random_tf.json) are small; with the loop's
    threshold at one block they run through it and stay TF's numbers."""
    from tests.ops import test_random_tf

    monkeypatch.setattr(philox_random, "_JIT_MIN_BLOCKS", 1)
    test_random_tf.test_matches_tf(name)
