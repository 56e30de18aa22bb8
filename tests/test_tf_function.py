"""tf.function in a TF1 graph, wrap_function and variable_creator_scope, against TF 2.21's
recorded results (tests/fixtures/tf_function/, recorded by record_tf_function.py from
tf_function_cases.py):

- the same graph built here gives TF's values, gradients, training steps, trace counts,
  call names and shapes;
- TF's own GraphDef (FunctionDefs called by PartitionedCall / StatefulPartitionedCall,
  TF's forward/backward functions) imports and runs here to the same values; the
  GraphDef asyncflow writes for the graph (ours.pb) ran in TF to the same values when
  the fixture was recorded;
- what tracing does that a recorded value cannot show (variables on the first trace
  only, program order of stateful ops, Python run once per trace, calls inside cond and
  control dependencies).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
import tf_function_cases as cases  # noqa: E402

TABLE = json.loads((HERE / "tf_function" / "values.json").read_text())


def _close(got, want, key=""):
    np.testing.assert_allclose(
        np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-6, err_msg=key
    )


def _run(graph, out, train):
    with tf.Session(graph=graph) as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(out, cases.feeds(graph))
        for _ in range(3):
            sess.run(train, cases.feeds(graph))
        return first, sess.run(out["loss"], cases.feeds(graph))


def test_built_here_matches_tf():
    with tf.Graph().as_default() as g:
        out, facts, train = cases.build(tf)
    first, after = _run(g, out, train)
    assert set(first) == set(TABLE["values"])
    for k, want in TABLE["values"].items():
        _close(first[k], want, k)
    _close(after, TABLE["loss_after_3_steps"])
    assert facts == TABLE["facts"]


def test_names_and_call_ops_as_tf():
    with tf.Graph().as_default() as g:
        out, _, _ = cases.build(tf)
    for k in ("affine_default", "affine_scale3", "scaled", "step", "loop", "rows"):
        assert out[k].name == TABLE["names"][k], k
    types = {o.type for o in g.get_operations()}
    assert "IdentityN" in types  # (the calls' results; their bodies are inlined)


def test_tf_graph_def_imports_and_runs():
    """TF's GraphDef: FunctionDefs, their calls and TF's gradient functions."""
    gd = tf.GraphDef.FromString((HERE / "tf_function" / "graph.pb").read_bytes())
    assert {f.signature.name for f in gd.library.function} == set(TABLE["functions"])
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetches = {
            k: g.get_tensor_by_name(n)
            if isinstance(n, str)
            else [g.get_tensor_by_name(x) for x in n]
            for k, n in TABLE["names"].items()
        }
        init = [
            o
            for o in g.get_operations()
            if o.type == "AssignVariableOp" and o.name.endswith("/Assign")
        ]
        with tf.Session() as sess:
            sess.run(init)
            got = sess.run(fetches, cases.feeds(g))
            for _ in range(3):
                sess.run(g.get_operation_by_name(TABLE["train"]), cases.feeds(g))
            after = sess.run(fetches["loss"], cases.feeds(g))
    for k, want in TABLE["values"].items():
        _close(got[k], want, k)
    _close(after, TABLE["loss_after_3_steps"])


def test_our_graph_def_ran_in_tf_and_round_trips():
    for k, want in TABLE["values"].items():  # (TF ran our GraphDef to these when recorded)
        _close(TABLE["ours_in_tf"]["values"][k], want, k)
    with tf.Graph().as_default() as g:
        out, _, train = cases.build(tf)
    gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        fetches = {
            k: g2.get_tensor_by_name(v.name) if not isinstance(v, list)
            else [g2.get_tensor_by_name(t.name) for t in v]
            for k, v in out.items()
        }  # fmt: skip
        init = [o for o in g2.get_operations() if o.name.endswith("/Assign")]
        with tf.Session() as sess:
            sess.run(init)
            got = sess.run(fetches, cases.feeds(g2))
            for _ in range(3):
                sess.run(g2.get_operation_by_name(train.name), cases.feeds(g2))
            after = sess.run(fetches["loss"], cases.feeds(g2))
    for k, want in TABLE["values"].items():
        _close(got[k], want, k)
    _close(after, TABLE["loss_after_3_steps"])


def test_variable_creators_as_tf():
    with tf.Graph().as_default():
        assert cases.creators(tf) == TABLE["creators"]


def test_variables_on_the_first_trace_only():
    with tf.Graph().as_default():

        @tf.function
        def f(x):
            return x * tf.Variable(2.0, name="v")

        a = f(tf.constant(3.0))
        b = f(tf.constant(4.0))  # same trace: the same variable
        assert len(tf.global_variables()) == 1
        with pytest.raises(ValueError, match="singleton tf.Variables created on the first call"):
            f(tf.constant([1.0, 2.0]))  # a second trace would make another
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run([a, b]) == [6.0, 8.0]


def test_python_runs_once_per_trace_and_side_effect_ops_run():
    runs = []
    with tf.Graph().as_default():
        v = tf.get_variable("v", initializer=0.0, use_resource=True)

        @tf.function
        def bump():
            runs.append(1)
            v.assign_add(1.0)  # no result: the call still runs it

        first = bump()
        second = bump()
        assert len(runs) == 1
        assert isinstance(first, tf.Operation) and first.type == "NoOp"
        with tf.Session() as sess:
            sess.run(v.initializer)
            sess.run(first)
            sess.run(second)
            assert sess.run(v) == 2.0


def test_stateful_ops_run_in_program_order():
    with tf.Graph().as_default():
        v = tf.get_variable("v", initializer=1.0, use_resource=True)

        @tf.function
        def f():
            v.assign(v * 3.0)
            v.assign_add(1.0)
            v.assign(v * 10.0)
            return v.read_value()

        r = f()
        with tf.Session() as sess:
            sess.run(v.initializer)
            for want in (40.0, 1210.0):
                assert sess.run(r) == want


def test_call_in_cond_and_under_control_dependencies():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [])
        v = tf.get_variable("v", initializer=5.0, use_resource=True)

        @tf.function
        def sq(a):
            return a * a + 1.0

        r = tf.cond(x > 0.0, lambda: sq(x), lambda: sq(-x) * 2.0)
        g = tf.gradients(r, x)[0]
        with tf.control_dependencies([v.assign(7.0)]):
            c = sq(tf.constant(1.0))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run([r, g], {x: 3.0}) == [10.0, 6.0]
            assert sess.run([r, g], {x: -2.0}) == [10.0, -8.0]
            assert sess.run(c) == 2.0 and sess.run(v) == 7.0


def test_input_signature_and_errors():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="TensorSpec"):
            tf.function(lambda a: a, input_signature=[1.0])

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
        def f(a):
            return a + 1

        assert f.get_concrete_function().inputs[0].shape.as_list() == [None]
        assert f(tf.constant([1, 2])).shape.as_list() == [2]
        with pytest.raises(TypeError, match="Binding inputs to tf.function"):
            f(tf.constant([1.0]))
        with pytest.raises(TypeError, match="Binding inputs to tf.function"):
            f(1, 2)
        assert f.experimental_get_tracing_count() == 1


def test_method_traces_per_instance():
    class Model:
        def __init__(self, k):
            self.k = k

        @tf.function
        def __call__(self, x):
            return x * self.k

    with tf.Graph().as_default():
        a, b = Model(2.0), Model(5.0)
        ra, rb = a(tf.constant(3.0)), b(tf.constant(3.0))
        with tf.Session() as sess:
            assert sess.run([ra, rb]) == [6.0, 15.0]


def test_wrap_function_structure_and_prune_errors():
    with tf.Graph().as_default():

        def fn(p, q):
            return {"s": p + q, "d": p - q}

        w = tf.wrap_function(fn, [tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float32)])
        assert type(w).__name__ == "WrappedFunction"
        assert [t.name for t in w.inputs] == ["Placeholder:0", "Placeholder_1:0"]
        with pytest.raises(ValueError, match="not fed"):
            w.prune(feeds=[w.inputs[0]], fetches=w.outputs)
        both = w.prune(feeds=w.inputs, fetches={"sum": w.graph.get_tensor_by_name("add:0")})
        full = w(tf.constant(5.0), tf.constant(2.0))
        part = both(tf.constant(1.0), tf.constant(4.0))
        with tf.Session() as sess:
            assert sess.run(full) == {"s": 7.0, "d": 3.0}
            assert sess.run(part) == {"sum": 5.0}


def test_graph_def_holds_tf_calls_where_it_can():
    """A call nothing reads inside is written as TF's call node and FunctionDef; one
    whose insides a gradient reads stays inlined.  Both import back to the same values."""
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None], name="x")
        v = tf.get_variable("v", initializer=2.0, use_resource=True)

        @tf.function
        def f(a):
            return tf.reduce_sum(a * v), a + 1.0

        s, p = f(x)
        s2, _ = f(x * 2.0)
        grad = tf.gradients(s2, x)[0]
        gd = g.as_graph_def()
    calls = {nd.name: nd for nd in gd.node if nd.op.endswith("PartitionedCall")}
    assert list(calls) == ["StatefulPartitionedCall"]
    call = calls["StatefulPartitionedCall"]
    assert [i.split(":")[0] for i in call.input] == ["x", "v"]
    (fdef,) = [f for f in gd.library.function if f.signature.name == call.attr["f"].func.name]
    assert [a.type for a in fdef.signature.input_arg] == list(call.attr["Tin"].list.type)
    assert len(fdef.signature.output_arg) == 2 == len(call.attr["Tout"].list.type)
    names = {nd.name for nd in gd.node}
    assert not any(n.startswith("StatefulPartitionedCall/") for n in names)
    assert any(n.startswith("StatefulPartitionedCall_1/") for n in names)  # (read by grad)
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        fetch = [g2.get_tensor_by_name(t.name) for t in (s, p, s2, grad)]
        with tf.Session() as sess:
            sess.run(g2.get_operation_by_name("v/Assign"))
            got = sess.run(fetch, {g2.get_tensor_by_name("x:0"): [1.0, 2.0]})
    assert [np.asarray(a).tolist() for a in got] == [6.0, [2.0, 3.0], 12.0, [4.0, 4.0]]


def test_our_graph_def_that_tf_ran_holds_calls():
    gd = tf.GraphDef.FromString((HERE / "tf_function" / "ours.pb").read_bytes())
    ops_ = {nd.op for nd in gd.node}
    assert {"PartitionedCall", "StatefulPartitionedCall"} <= ops_
    assert len(gd.library.function) >= 10


def test_python_if_on_a_tensor_says_autograph_is_not_applied():
    with tf.Graph().as_default():

        @tf.function
        def f(a):
            return a if a > 0 else -a

        with pytest.raises(TypeError, match="without AutoGraph"):
            f(tf.constant(1.0))
