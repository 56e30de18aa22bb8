"""Seeded random ops give TF's numbers (tests/fixtures/random_tf.json, recorded from TF
2.21 by tests/fixtures/record_random_tf.py): TF's Philox streams, its distributions and
its per-run reservation of 256 counter values per output.  On a GPU device (the
stand-in with ASYNCFLOW_FAKE_GPUS, where TF1 placement puts the ops on GPU:0) the
numbers are the same: uniform, normal and integers are computed on the device's
stream, the truncated normal on the host and copied."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import philox_random

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
_spec = importlib.util.spec_from_file_location(
    "record_random_tf", FIXTURES / "record_random_tf.py"
)
_rec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rec)
RECORDED = json.loads((FIXTURES / "random_tf.json").read_text())


def _runs(name, device=None):
    graph_seed, build = _rec.CASES[name]
    with af.Graph().as_default():
        if graph_seed is not None:
            af.set_random_seed(graph_seed)
        if device is None:
            t = build(af)
        else:
            with af.device(device):
                t = build(af)
        with af.Session() as sess:
            return t, [sess.run(t) for _ in range(2)]


@pytest.mark.parametrize("name", sorted(_rec.CASES))
def test_matches_tf(name):
    want = RECORDED[name]
    t, runs = _runs(name)
    assert t.dtype.name == want["dtype"] and t.shape.as_list() == want["shape"]
    for got, ref in zip(runs, want["runs"]):
        assert got.shape == tuple(want["shape"]) and got.dtype == t.dtype.as_numpy_dtype
        got = got.ravel()
        if got.dtype.kind in "iu" or name.startswith("uniform"):
            np.testing.assert_array_equal(got.astype(np.float64), ref)  # bit for bit
        else:  # sin, cos and log are glibc's in TF, rounded from float64 here
            eps = np.finfo(got.dtype).eps
            np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 * eps, atol=2 * eps)
    assert not np.array_equal(runs[0], runs[1])  # a second run continues the stream


@pytest.mark.parametrize("name", ["uniform_f32_op_seed", "normal_f32", "truncated_f32", "int64"])
def test_same_numbers_on_the_cpu_and_the_default_device(name):
    """With a GPU present the ops run there (TF1 placement); pinned to the CPU they give
    the same numbers, bit for bit (one code path, computed with either array module)."""
    _, default = _runs(name)
    _, cpu = _runs(name, "/cpu:0")
    for a, b in zip(default, cpu):
        np.testing.assert_array_equal(a, b)


def test_counter_carries_into_the_high_word():
    """Counters are 128-bit: a stretch crossing 2**64 carries into seed2's words."""
    key, start = (5, 6), (3 << 64) + (1 << 64) - 2
    words = philox_random.philox_words(np, key, start, 4)
    for i, row in enumerate(words):
        assert row.tolist() == philox_random._blocks(start + i, key, 1)


def test_truncated_normal_fills_groups_left_short():
    """A group whose first blocks give fewer than 4 values within the bound takes more
    (from its own region, in TF's order): with one block per group at first, many are."""
    key, counter, n = (11, 12), 7 << 64, 400
    a = philox_random.truncated_normal(np, key, counter, n, np.float32, blocks=1)
    b = philox_random.truncated_normal(np, key, counter, n, np.float32, blocks=64)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a).max() < 2.0
