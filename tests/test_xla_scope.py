"""`tf.xla.experimental` (asyncflow/xla.py) and the graph's attr scope, against TF 2.21:
the attrs, scope names and outputs below were recorded from TF 2.21 running the same
code, and TF 2.21 compiled a cluster from a GraphDef written here."""

import numpy as np
import pytest

import asyncflow as tf

jit_scope = tf.xla.experimental.jit_scope


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def _xla(op) -> list:
    return [(k, op.get_attr(k)) for k in sorted(op.node_def.attr) if k.startswith("_Xla")]


def test_jit_scope_marks_ops_as_tf():
    x = tf.constant([1.0, 2.0])
    with jit_scope():
        y = x * 2
        z = tf.sin(y)
    assert _xla(y.op) == [
        ("_XlaCompile", True),
        ("_XlaScope", b"jit_scope_0"),
        ("_XlaSeparateCompiledGradients", False),
    ]
    assert z.op.get_attr("_XlaScope") == b"jit_scope_0"
    with jit_scope(compile_ops=False):
        w = x + 1
    assert w.op.get_attr("_XlaCompile") is False
    with jit_scope(compile_ops=lambda node_def: node_def.op == "Mul"):
        a = x * 3
        b = x + 3
    assert (a.op.get_attr("_XlaCompile"), b.op.get_attr("_XlaCompile")) == (True, False)
    assert a.op.get_attr("_XlaScope") == b"jit_scope_2"
    outside = x - 1
    assert _xla(outside.op) == []
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(z), [0.9092974, -0.7568025], rtol=1e-6)


def test_nested_scope_keeps_the_outer_cluster():
    x = tf.constant(1.0)
    with jit_scope():
        pass
    with jit_scope():
        with jit_scope(separate_compiled_gradients=True):
            n = x + 1
        m = x + 2
    assert n.op.get_attr("_XlaScope") == b"jit_scope_1"
    assert n.op.get_attr("_XlaSeparateCompiledGradients") is True
    assert m.op.get_attr("_XlaSeparateCompiledGradients") is False
    with tf.Graph().as_default():  # counted per graph
        with jit_scope():
            k = tf.constant(1.0) + 1
        assert k.op.get_attr("_XlaScope") == b"jit_scope_0"


def test_gradients_join_the_forward_cluster_or_their_own():
    x = tf.Variable([1.0, 2.0])
    with jit_scope():
        y = tf.reduce_sum(tf.sin(x * 2))
    with jit_scope(separate_compiled_gradients=True):
        y2 = tf.reduce_sum(tf.cos(x * 3))
    tf.gradients(y + y2, x)
    graph = tf.get_default_graph()
    # TF 2.21's scopes for these gradient ops.
    want = {
        "gradients/Sin_grad/Cos": b"jit_scope_0",
        "gradients/mul_grad/Sum": b"jit_scope_0",
        "gradients/mul_grad/Reshape": b"jit_scope_0",
        "gradients/Cos_grad/Neg": b"jit_scope_1_grad_gradients",
        "gradients/Cos_grad/Sin": b"jit_scope_1_grad_gradients",
        "gradients/mul_1_grad/Sum": b"jit_scope_1_grad_gradients",
    }
    for name, scope in want.items():
        op = graph.get_operation_by_name(name)
        assert _xla(op) == [("_XlaCompile", True), ("_XlaScope", scope)], name
    # What the gradients build outside any marked op is unmarked.
    assert _xla(graph.get_operation_by_name("gradients/grad_ys_0")) == []


def test_compile_returns_named_outputs_as_tf():
    x = tf.constant([1.0, 2.0])
    r = tf.xla.experimental.compile(lambda a, b: a + b, [x, x])
    r2 = tf.xla.experimental.compile(lambda a: (a * 2, a * 3), [x])
    r3 = tf.xla.experimental.compile(lambda: tf.constant(1.0))
    assert [t.name for t in r] == ["output_0:0"]
    assert [t.name for t in r2] == ["output_0_1:0", "output_1:0"]
    assert [t.name for t in r3] == ["output_0_2:0"]
    with tf.Session() as s:
        got = s.run([r, r2, r3])
    np.testing.assert_array_equal(got[0][0], [2.0, 4.0])
    np.testing.assert_array_equal(got[1][1], [3.0, 6.0])
    assert got[2] == [1.0]


def test_attrs_round_trip_through_graph_def():
    x = tf.placeholder(tf.float32, [2], name="x")
    with jit_scope():
        tf.sin(x * 2, name="y")
    data = tf.get_default_graph().as_graph_def().SerializeToString()
    with tf.Graph().as_default() as g:
        gd = tf.GraphDef()
        gd.ParseFromString(data)
        tf.import_graph_def(gd, name="")
        assert _xla(g.get_operation_by_name("y")) == [
            ("_XlaCompile", True),
            ("_XlaScope", b"jit_scope_0"),
            ("_XlaSeparateCompiledGradients", False),
        ]
        with tf.Session() as s:
            np.testing.assert_allclose(
                s.run("y:0", {"x:0": [1.0, 2.0]}), [0.9092974, -0.7568025], rtol=1e-6
            )


def test_attr_scope_rejects_non_dict():
    with pytest.raises(TypeError, match="attr_map must be a dictionary"):
        with tf.get_default_graph()._attr_scope([("a", 1)]):
            pass
