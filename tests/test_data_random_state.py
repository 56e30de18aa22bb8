"""Seeded random ops inside dataset functions against TF 2.21's results
(tests/fixtures/dataset_random_cases.py, recorded by record_dataset_random_tf.py): their
state lasts one pass (an iterator's initialization, a one-shot iterator, a run of
`reduce`), shared by the inner iterators of that pass, while an op outside datasets
keeps its state for the session (kernel_api.random_state).  The same for the other
seeded ops (shuffle, multinomial, gamma, Poisson, fractional pooling, a learned
candidate sampler's weights) and the seeded dataset ops made inside a function."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_random_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_random_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_random_matches_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_a_prefetched_map_restarts_its_random_op_too():
    # The map runs in the prefetch's Task, as a straight-line program (data/calls.py).
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3).map(
            lambda x: x * 0 + tf.random_uniform([], 0, 1 << 30, dtype=tf.int64, seed=2)
        )
        it = tf.data.make_initializable_iterator(ds.prefetch(2))
        nxt = it.get_next()
        with tf.Session() as sess:
            passes = []
            for _ in range(3):
                sess.run(it.initializer)
                passes.append([int(sess.run(nxt)) for _ in range(3)])
    assert passes == RECORDED["cases"]["reinit"]


def test_a_function_without_random_ops_is_called_directly():
    # (the fast call wraps only a step that may draw: data/calls.py `_per_pass`)
    from asyncflow.data import calls

    with tf.Graph().as_default():
        x = tf.constant(1, tf.int64)
        r = tf.random_uniform([], 0, 9, dtype=tf.int64, seed=2)
        with tf.Session() as sess:
            plain = sess._master.plan([], [x * 2], False)
            drawing = sess._master.plan([], [x + r], False)
            assert not calls._per_pass(plain)
            assert calls._per_pass(drawing)
