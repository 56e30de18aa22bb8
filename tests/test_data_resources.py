"""Resource-creating ops made inside dataset functions, against TF 2.21's results
(tests/fixtures/dataset_resources_cases.py, recorded by record_dataset_resources_tf.py):
a resource with no shared name lasts one pass (kernel_api.pass_state), one named by its
node lasts the session, and a variable made inside a function is TF's ValueError."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_resources_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_resources_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_resources_match_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_only_unshared_resources_made_in_a_function_wrap_the_call():
    # data/calls.py `_per_pass`: a step wraps its call in the pass's states only where
    # it may make a resource of the pass (kernel_api.keeps_pass_resource).
    from asyncflow.data import calls

    made = {}

    def fn(x):
        made["private"] = tf.raw_ops.FIFOQueueV2(component_types=[tf.int64], capacity=2)
        made["shared"] = tf.raw_ops.FIFOQueueV2(
            component_types=[tf.int64], capacity=2, shared_name="q"
        )
        made["node_named"] = tf.raw_ops.MutableHashTableV2(
            key_dtype=tf.int64, value_dtype=tf.int64, use_node_name_sharing=True
        )
        made["lifted"] = tf.FIFOQueue(2, tf.int64).queue_ref
        return x

    with tf.Graph().as_default():
        outside = tf.raw_ops.FIFOQueueV2(component_types=[tf.int64], capacity=2)
        tf.data.Dataset.range(2).map(fn)
        with tf.Session() as sess:
            plan = sess._master.plan
            assert calls._per_pass(plan([], [made["private"]], False))
            for key in ("shared", "node_named", "lifted"):
                assert not calls._per_pass(plan([], [made[key]], False)), key
            assert not calls._per_pass(plan([], [outside], False))
