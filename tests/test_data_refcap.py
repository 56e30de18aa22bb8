"""Dataset functions using values from outside them, against TF 2.21's results
(tests/fixtures/refcap_cases.py, recorded by record_refcap_tf.py with tf.data's default
optimizations off): a variable, ref or resource, is read at each call; a tensor computed
outside the function (`v * 2`, a random op) is evaluated once as the iterator is
initialized and held for the pass."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import refcap_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "refcap_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_capture_matches_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_outer_random_op_drawn_once_per_initialization():
    with tf.Graph().as_default():
        assert cases.random_capture(tf) == RECORDED["random_capture"]


def test_outer_tensor_is_an_input_of_the_dataset_op():
    with tf.Graph().as_default():
        v = tf.get_variable("v", initializer=tf.constant(6, tf.int64), use_resource=False)
        t = v * 2
        ds = tf.data.Dataset.range(2).map(lambda x: x + t + v)
        op = ds._variant.op
        assert [i.name for i in op.inputs[1:]] == [t.name]
        assert op.get_attr("f_captures") == [t.name.encode()]


def test_graph_def_names_the_outer_tensor_as_a_captured_argument():
    # As TF writes it: the function's argument `captured_0`, fed by the op's input; the
    # GraphDef runs with the same values here (TF 2.21 imports it and gives [13, 14, 15]).
    with tf.Graph().as_default() as g:
        v = tf.get_variable("v", initializer=tf.constant(6, tf.int64), use_resource=False)
        p = tf.placeholder(tf.int64, [], name="p")
        t = v * 2 + p
        it = tf.data.make_initializable_iterator(tf.data.Dataset.range(3).map(lambda x: x + t))
        it.get_next(name="nxt")
        gd = g.as_graph_def()
    (fn,) = gd.library.function
    assert [a.name for a in fn.signature.input_arg] == ["args_0", "captured_0"]
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        with tf.Session() as s:
            s.run("v/Assign")
            s.run(g2.get_operation_by_name(it.initializer.name), {"p:0": 1})
            assert [int(s.run("nxt:0")) for _ in range(3)] == [13, 14, 15]
