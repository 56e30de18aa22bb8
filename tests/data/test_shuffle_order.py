"""Seeded tf.data order against TF 2.21: every pipeline of
tests/fixtures/record_data_shuffle_tf.py, built with asyncflow, gives the element order
TF gave (shuffle with and without reshuffle_each_iteration, repeat around it,
shuffle_and_repeat, list_files, seeds from set_random_seed and the op seed), and TF's
Philox stream against the published Philox4x32-10 known-answer vectors."""

import importlib.util
import json
import pathlib

import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import philox_random

_HERE = pathlib.Path(__file__).parent.parent / "fixtures"
_spec = importlib.util.spec_from_file_location(
    "record_data_shuffle_tf", _HERE / "record_data_shuffle_tf.py"
)
rec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rec)
TF = json.loads((_HERE / "data_shuffle_tf.json").read_text())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return rec.make_files(str(tmp_path_factory.mktemp("listing")))


@pytest.mark.parametrize("name", sorted(rec.CASES))
def test_order_matches_tf(name, files):
    assert rec.run_case(af, rec.CASES[name], files) == TF[name]


def test_philox_known_answers():
    # Random123's kat_vectors for philox4x32_10: (counter, key) -> output words.
    def block(counter, key):
        c = sum(w << (32 * i) for i, w in enumerate(counter))
        return philox_random._blocks(c, key, 1)

    assert block((0, 0, 0, 0), (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    ones = 0xFFFFFFFF
    assert block((ones,) * 4, (ones, ones)) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    pi = (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344)
    assert block(pi, (0xA4093822, 0x299F31D0)) == [
        0xD16CFE09,
        0x94FDCCEB,
        0x5001E420,
        0x24126EA1,
    ]


def test_stream_is_block_size_independent():
    s = philox_random.PhiloxStream(12345, 2**40 + 7)
    got = [s.next() for _ in range(4 * 400)]  # crosses several refill sizes
    want = philox_random._blocks((2**40 + 7) << 64, (12345, 0), 400)
    assert got == want


def test_stream_draws_many_blocks_as_the_scalar_reference():
    # Past the largest refill (philox_random._MAX_BLOCKS), across the low counter
    # word's wrap into the high one: the words of one block at a time, in order.
    for seed2 in (3, -1):  # -1: counter 0xFFFF...FFFF << 64, then its 128-bit wrap
        s = philox_random.PhiloxStream(987654321, seed2)
        n = 2 * philox_random._MAX_BLOCKS + 100
        got = s.take(4 * n)
        want = philox_random._blocks((seed2 & (2**64 - 1)) << 64, (987654321, 0), n)
        assert got == want
    s = philox_random.PhiloxStream(1, 2)
    s._counter = (2 << 64) + 2**64 - 5  # (a counter that carries within a refill)
    s._grow = 16
    got = s.take(4 * 16)
    assert got == philox_random._blocks((2 << 64) + 2**64 - 5, (1, 0), 16)


def test_unseeded_shuffle_is_a_permutation_that_varies():
    with af.Graph().as_default():
        it = af.data.Dataset.range(50).shuffle(50).make_initializable_iterator()
        nxt = it.get_next()
        with af.Session() as sess:
            runs = []
            for _ in range(3):
                sess.run(it.initializer)
                got = []
                while True:
                    try:
                        got.append(int(sess.run(nxt)))
                    except errors.OutOfRangeError:
                        break
                runs.append(got)
    assert all(sorted(r) == list(range(50)) for r in runs)
    assert len({tuple(r) for r in runs}) > 1  # fresh entropy per op run
