"""Side effects inside dataset functions against TF 2.21's automatic control
dependencies (tests/fixtures/dataset_autodeps_cases.py, recorded by
record_dataset_autodeps_tf.py): a stateful op no result depends on runs with each call,
and the stateful ops using one resource run in the order they were made."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_autodeps_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_autodeps_tf.json").read_text())


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_dataset_autodeps_match_tf(key):
    with tf.Graph().as_default():
        assert cases.CASES[key](tf) == RECORDED["cases"][key]


def test_a_function_without_side_effects_is_left_as_traced():
    # No control outputs: no NoOp, the results as traced, nothing more per call.
    with tf.Graph().as_default() as g:
        v = tf.Variable(tf.constant(1, tf.int64), use_resource=True)
        before = len(g.get_operations())
        tf.data.Dataset.range(3).map(lambda x: x * 2 + v.read_value())
        made = g.get_operations()[before:]
        assert not [op for op in made if op.type == "NoOp"]


def test_stateful_ops_on_one_resource_are_ordered_as_made():
    with tf.Graph().as_default():
        table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.int64, -1)
        made = {}

        def fn(x):
            made["insert"] = table.insert(tf.reshape(x, [1]), tf.reshape(x, [1]))
            made["lookup"] = table.lookup(tf.reshape(x, [1]))
            return made["lookup"]

        tf.data.Dataset.range(3).map(fn)
        assert made["insert"] in made["lookup"].op.control_inputs


def test_an_unused_read_is_not_a_control_output():
    with tf.Graph().as_default() as g:
        v = tf.Variable(tf.constant(1, tf.int64), use_resource=True)
        before = len(g.get_operations())

        def fn(x):
            tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=tf.int64)  # (its value unused)
            return x

        tf.data.Dataset.range(3).map(fn)
        assert not [op for op in g.get_operations()[before:] if op.type == "NoOp"]


def _cond_map(graph, fn):
    """The ops `Dataset.range(3).map(fn)` makes in `graph`, its cond's Merge ops."""
    before = len(graph.get_operations())
    tf.data.Dataset.range(3).map(fn)
    made = graph.get_operations()[before:]
    return made, [op for op in made if op.type == "Merge"]


def test_a_cond_without_stateful_ops_is_left_as_traced():
    with tf.Graph().as_default() as g:
        made, merges = _cond_map(g, lambda x: tf.cond(x > 1, lambda: x + 1, lambda: x + 2))
        assert [t.op.type for t in merges[0].inputs] == ["AddV2", "AddV2"]
        assert not [op for op in made if op.type == "NoOp"]


def test_a_branch_whose_result_follows_its_stateful_op_is_left_as_traced():
    with tf.Graph().as_default() as g:
        v = tf.Variable(tf.constant(0, tf.int64), use_resource=True)

        def fn(x):
            one = tf.constant(1, tf.int64)
            return tf.cond(x > 1, lambda: v.assign_add(one), lambda: v.assign_add(one + 1))

        _, merges = _cond_map(g, fn)
        assert not [t for t in merges[0].inputs if t.op.type == "Identity"]


def test_a_branch_result_waits_for_its_unreturned_stateful_op():
    with tf.Graph().as_default() as g:
        v = tf.Variable(tf.constant(0, tf.int64), use_resource=True)
        made = {}

        def fn(x):
            def add():
                made["add"] = v.assign_add(x).op
                return x + 1

            return tf.cond(x > 1, add, lambda: x + 2)

        _, merges = _cond_map(g, fn)
        (merge,) = merges
        waiting = [t.op for t in merge.inputs if made["add"] in t.op.control_inputs]
        assert [op.type for op in waiting] == ["Identity"]


def test_the_two_branches_of_a_cond_are_not_ordered_but_follow_the_op_before():
    with tf.Graph().as_default() as g:
        v = tf.Variable(tf.constant(0, tf.int64), use_resource=True)
        made = {}

        def fn(x):
            made["first"] = v.assign(x, read_value=False)

            def branch(key, n):
                def run():
                    made[key] = v.assign_add(tf.constant(n, tf.int64)).op
                    return x

                return run

            return tf.cond(x > 1, branch("t", 1), branch("f", 2))

        _cond_map(g, fn)
        assert made["t"] not in made["f"].control_inputs
        assert made["first"] in made["t"].control_inputs
        assert made["first"] in made["f"].control_inputs


def _printing_reducer(g):
    """group_by_reducer (key x % 2) of range(4) whose state is () and whose reduce
    function prints 10 x, unreturned: the iterator's initializer and next element."""
    from dataset_state_cases import _MSG

    def reduce(s, x):
        tf.Print(x, [x * 10], _MSG)
        return ()

    reducer = tf.data.experimental.Reducer(lambda k: (), reduce, lambda *s: tf.constant(1))
    ds = tf.data.Dataset.range(4).apply(
        tf.data.experimental.group_by_reducer(lambda x: x % 2, reducer)
    )
    it = tf.data.make_initializable_iterator(ds)
    return it.initializer, it.get_next()


def _printed_lines(init, nxt):
    from dataset_state_cases import _run

    with tf.Session() as sess:
        sess.run(init)
        return _run(sess, nxt)


def test_a_function_without_results_runs_its_control_outputs_after_a_round_trip():
    # TF's FunctionDef: no output, the NoOp its control_ret; imported back, it runs.
    with tf.Graph().as_default() as g:
        init, nxt = _printing_reducer(g)
        lines = ["pass-state:[0]", "pass-state:[10]", "pass-state:[20]", "pass-state:[30]"]
        assert _printed_lines(init, nxt) == [1, lines]
        gd = g.as_graph_def()
    reduce_fns = [f for f in gd.library.function if list(f.control_ret) and not f.ret]
    assert len(reduce_fns) == 1
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        got = _printed_lines(g2.get_operation_by_name(init.name), g2.get_tensor_by_name(nxt.name))
        assert got == [1, lines]
