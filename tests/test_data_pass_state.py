"""The kernels other than random ops whose state changes what they output or print,
inside dataset functions, against TF 2.21's results (tests/fixtures/dataset_state_cases.py,
recorded by record_dataset_state_tf.py): Print's `first_n` count and RecordInput's
reader last one pass (an iterator's initialization, a one-shot iterator, a run of
`reduce`), shared by the inner iterators of that pass, while an op outside datasets
keeps its state for the session (kernel_api.pass_state)."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_state_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_state_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_pass_state_matches_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_a_prefetched_map_counts_print_per_pass_too():
    # The map runs in the prefetch's Task (data/calls.py), the lines printed meanwhile.
    with tf.Graph().as_default():
        ds = cases._printing(tf).prefetch(2)
        it = tf.data.make_initializable_iterator(ds)
        nxt = it.get_next()
        lines, values = [], []
        with tf.Session() as sess, cases._printed(lines):
            for _ in range(2):
                sess.run(it.initializer)
                values.append([int(sess.run(nxt)) for _ in range(3)])
    assert values == [[0, 1, 2]] * 2
    assert lines == ["pass-state:[0]", "pass-state:[10]"] * 2


def test_only_ops_keeping_pass_state_wrap_the_call():
    # (the fast call wraps a step only where an op keeps state: data/calls.py `_per_pass`)
    from asyncflow.data import calls

    with tf.Graph().as_default():
        x = tf.constant(1, tf.int64)
        always = tf.Print(x, [x])
        counted = tf.Print(x, [x], first_n=2)
        reads = tf.raw_ops.RecordInput(file_pattern="/nonexistent*", batch_size=1)
        with tf.Session() as sess:
            plan = sess._master.plan
            assert not calls._per_pass(plan([], [always * 2], False))
            assert calls._per_pass(plan([], [counted * 2], False))
            assert calls._per_pass(plan([], [reads], False))
