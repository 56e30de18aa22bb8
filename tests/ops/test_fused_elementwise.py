"""Elementwise fusion (ops/fused_elementwise.py): the graph pass alone on partitions, the
`_FusedElementwise` kernel against NumPy, and whole graphs with and without the pass.

The kernel tests go through a Session, so `make test-fake-gpu` runs them on the
stand-in GPU too.
"""

from __future__ import annotations

import unittest.mock as mock

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors, graph_passes, partition
from asyncflow.devices.cpu import CPUDevice
from asyncflow.ops import control_flow_prims, fused_elementwise, matmul_ops

pytestmark = pytest.mark.timeout(60)

RNG = np.random.default_rng(5)


def _partition(fetches, feeds=()):
    order = partition.prune(list(feeds), fetches)
    dev = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
    parts, _ = partition.partition(
        order, dict.fromkeys(order, dev), list(feeds), fetches, tf.Graph()
    )
    return parts[0]


def _fuse(p):
    view = graph_passes.PartitionView(p, tf.Graph())
    fused_elementwise.fuse_elementwise(view)
    view.finish()
    assert graph_passes._acyclic(p.nodes)
    return [n.op.type for n in p.nodes]


def _fused_nodes(p):
    return [n for n in p.nodes if n.op.type == "_FusedElementwise"]


@pytest.fixture
def no_fusion(monkeypatch):
    passes = [r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)


def _lstm_cell(x, c):
    i, j, f, o = tf.split(x, 4, 1)
    new_c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
    return new_c, tf.tanh(new_c) * tf.sigmoid(o)


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def _np_lstm_cell(x, c):
    i, j, f, o = np.split(x.astype(np.float64), 4, 1)
    new_c = c * _np_sigmoid(f + 1.0) + _np_sigmoid(i) * np.tanh(j)
    return new_c, np.tanh(new_c) * _np_sigmoid(o)


# -- the pass alone ----------------------------------------------------------------------------


def test_an_lstm_cell_becomes_one_node_with_both_outputs():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 16])
        c = tf.placeholder(tf.float32, [None, 4])
        new_c, h = _lstm_cell(x, c)
        p = _partition([new_c, h], [x, c])
        before = len(p.nodes)
        types = _fuse(p)
        (fused,) = _fused_nodes(p)
        assert set(types) == {"Split", "Const", "_FusedElementwise"}  # Split's axis stays
        assert len(p.nodes) == before - 10  # 11 element-wise nodes and the 1.0: one node
        attrs = fused.op._attrs
        assert attrs["N"] == 5 and attrs["M"] == 2  # the 4 gates and c; new_c and h
        assert sorted(attrs["program"]) == sorted(
            [
                "AddV2",
                "Sigmoid",
                "Mul",
                "Sigmoid",
                "Tanh",
                "Mul",
                "AddV2",
                "Tanh",
                "Sigmoid",
                "Mul",
            ]
        )
        assert [float(v) for v in attrs["literals"]] == [1.0]
        # the fused node keeps the name of the node it replaced; both fetches follow it
        assert fused.op.name == h.op.name
        k = p.nodes.index(fused)
        assert p.fetches == [(k, 1), (k, 0)]


def test_an_lstm_cell_inside_a_while_loop_fuses_with_all_its_outputs():
    # Every value of the body depends on the loop's Switches (one predicate): dead
    # together, so the cell is one node though no output reads every input, and its
    # gradient pass (SumTo instructions in it) one or two more.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [6, 16])
        c0 = tf.placeholder(tf.float32, [6, 4])

        def body(i, c, h):
            new_c, new_h = _lstm_cell(x * tf.tile(h, [1, 4]), c)
            return i + 1, new_c, new_h

        _, c, h = tf.while_loop(lambda i, c, h: i < 3, body, [tf.constant(0), c0, c0])
        grads = tf.gradients(tf.reduce_sum(h * c), [x, c0])
        p = _partition([h, c, *grads], [x, c0])
        _fuse(p)
        fused = _fused_nodes(p)
        forward = [
            n
            for n in fused
            if n.op.name.startswith("while/") and "Sigmoid" in n.op._attrs["program"]
        ]
        (cell,) = forward
        assert cell.op._attrs["M"] >= 2 and cell.op._attrs["program"].count("Sigmoid") == 3
        backward = [n for n in fused if "SigmoidGrad" in n.op._attrs["program"]]
        assert len(backward) <= 2  # unfused: 20 nodes and 3 tuple gates
        assert sum(n.op._attrs["program"].count("SigmoidGrad") for n in backward) == 3


def test_values_dead_at_different_times_stay_apart():
    # z reads only x; y * z also a Switch's output, dead where x is not (a cond's
    # Merge would not be: asyncflow.deadness).  One node giving both would make z dead
    # with the Switch's port.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [8])
        flag = tf.placeholder(tf.bool, [])
        y = tf.tanh(tf.raw_ops.Switch(data=x, pred=flag)[1])
        z = tf.tanh(x) * 2.0
        w = tf.sigmoid(y * z)
        p = _partition([z, w], [x, flag])
        _fuse(p)
        for n in _fused_nodes(p):
            program = n.op._attrs["program"]
            assert not ("Mul" in program and "Sigmoid" in program), program


def test_deadness_sources_of_a_cond_and_a_loop():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [8])
        flag = tf.placeholder(tf.bool, [])
        y = tf.cond(flag, lambda: tf.tanh(x) * 2.0, lambda: tf.sigmoid(x) * 3.0)
        _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 0.5), [0, y])
        p = _partition([acc * 2.0], [x, flag])
        view = graph_passes.PartitionView(p, tf.Graph())
        dead = fused_elementwise._Deadness(view, fused_elementwise._Clusters(view).order)
        by_name = {n.op.name: i for i, n in enumerate(p.nodes)}
        tanh, sigmoid = dead.node[by_name["cond/Tanh"]], dead.node[by_name["cond/Sigmoid"]]
        assert tanh and sigmoid and tanh != sigmoid  # the two ports of one predicate
        merge = dead.node[by_name["cond/Merge"]]
        assert merge not in (tanh, sigmoid)
        body = dead.node[by_name["while/mul"]]
        assert merge < body  # the loop's Merge is as live as its Enter; plus its Switch
        assert dead.node[by_name["while/Exit_1"]] == merge  # the loop ran when y was live
        assert dead.node[by_name["mul"]] == merge


def test_intermediates_others_read_become_outputs():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8])
        s = tf.sigmoid(x * 2.0)
        y = tf.tanh(s) + 1.0
        other = tf.reduce_sum(s)  # not element-wise: reads s from outside the cluster
        p = _partition([y, other], [x])
        _fuse(p)
        (fused,) = _fused_nodes(p)
        assert fused.op._attrs["M"] == 2
        (sum_node,) = [n for n in p.nodes if n.op.type == "Sum"]
        assert sum_node.inputs[0] == (p.nodes.index(fused), 1)
        assert [t.dtype for t in fused.op._outputs] == [tf.float32, tf.float32]


def test_a_path_through_another_node_splits_the_cluster():
    # a -> MatMul -> b with a and b element-wise and b also reading a: fusing a and b
    # would make the fused node wait for itself.
    w = RNG.standard_normal((8, 8)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8])
        a = tf.tanh(x * 3.0)
        b = tf.sigmoid(a) * tf.matmul(a, tf.constant(w))
        p = _partition([b], [x])
        _fuse(p)  # (checks acyclicity)
        (fused,) = _fused_nodes(p)  # tanh(x * 3) and sigmoid(a); the product stays out
        assert fused.op._attrs["program"] == ["Mul", "Tanh", "Sigmoid"]
        assert {"MatMul", "Mul"} <= {n.op.type for n in p.nodes}
        with tf.Session() as s:
            xv = RNG.standard_normal((5, 8)).astype(np.float32)
            got = s.run(b, {x: xv})
    av = np.tanh(xv * 3.0)
    np.testing.assert_allclose(got, _np_sigmoid(av) * (av @ w), rtol=1e-5, atol=1e-6)


def test_two_clusters_that_would_wait_for_each_other_are_not_both_made():
    # {c, b1, b2} and {a1, a2} are each convex, but a1 -> sum -> b1 and b2 -> sum -> a2:
    # contracting both would make each wait for the other.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        y = tf.placeholder(tf.float32, [None])
        a1 = tf.exp(x)
        c = tf.exp(y)
        b1 = c * tf.reduce_sum(a1)
        b2 = tf.tanh(c)
        a2 = a1 * tf.reduce_sum(b2)
        p = _partition([a2, b1], [x, y])
        _fuse(p)  # (checks acyclicity)
        assert _fused_nodes(p)
        with tf.Session() as s:
            xv, yv = np.array([0.1, -0.3], np.float32), np.array([0.2, 0.5], np.float32)
            got_a2, got_b1 = s.run([a2, b1], {x: xv, y: yv})
    np.testing.assert_allclose(got_a2, np.exp(xv) * np.tanh(np.exp(yv)).sum(), rtol=1e-6)
    np.testing.assert_allclose(got_b1, np.exp(yv) * np.exp(xv).sum(), rtol=1e-6)


def test_what_is_not_fused():
    with tf.Graph().as_default():
        xi = tf.placeholder(tf.int32, [None])
        ints = tf.abs(xi * 2) + 1  # integers: TF's checks (division by zero) differ
        v = tf.Variable(np.ones(4, np.float32))
        shared = tf.constant(np.arange(100, dtype=np.float32))  # too big to be a literal
        x = tf.placeholder(tf.float32, [100])
        y = tf.exp(x * shared)
        single = tf.sigmoid(v.read_value())
        p = _partition([ints, y, single], [xi, x])
        types = _fuse(p)
        assert types.count("_FusedElementwise") == 1
        (fused,) = _fused_nodes(p)
        assert fused.op._attrs["program"] == ["Mul", "Exp"]
        assert fused.op._attrs["literals"] == []  # the 100-element constant is an input
        assert {"Abs", "AddV2", "Sigmoid"} <= set(types)


def test_a_fetched_intermediate_and_a_shared_constant():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [3])
        two = tf.constant(2.0, tf.float64)
        a = x * two
        b = tf.exp(a) - two
        z = tf.sqrt(two)  # the constant has a reader outside the cluster
        p = _partition([b, a, z], [x])
        _fuse(p)
        fused = [n for n in _fused_nodes(p) if n.op._attrs["M"] == 2]
        assert len(fused) == 1 and fused[0].op._attrs["literals"] == []
        with tf.Session() as s:
            xv = np.array([0.5, -1.0, 2.0])
            got_b, got_a, got_z = s.run([b, a, z], {x: xv})
    np.testing.assert_allclose(got_a, xv * 2)
    np.testing.assert_allclose(got_b, np.exp(xv * 2) - 2)
    assert got_z == pytest.approx(np.sqrt(2.0))


def test_control_edges_in_and_out_are_kept():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        gate = tf.no_op(name="gate")
        with tf.control_dependencies([gate]):
            a = tf.exp(x)
        y = tf.tanh(a) * 2.0
        with tf.control_dependencies([a.op]):
            after = tf.no_op(name="after")
        p = _partition([y, after], [x])
        _fuse(p)
        (fused,) = _fused_nodes(p)
        assert [p.nodes[c].op.name for c in fused.controls] == ["gate"]
        (after_node,) = [n for n in p.nodes if n.op.name == "after"]
        assert [p.nodes[c].op.name for c in after_node.controls] == ["gate"]


def _gated_products(x, y):
    """tf.tuple's gate between two element-wise values and what reads them."""
    a, b = tf.tuple([x * y, x - y])
    return tf.tanh(a) + tf.exp(b)


def test_a_tuple_gate_between_element_wise_nodes_is_opened():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4, 8])
        y = tf.placeholder(tf.float32, [4, 8])
        out = _gated_products(x, y)
        p = _partition([out], [x, y])
        types = _fuse(p)
        assert types.count("_FusedElementwise") == 1 and "NoOp" not in types
        xv, yv = RNG.standard_normal((2, 4, 8)).astype(np.float32)
        with tf.Session() as sess:
            got = sess.run(out, {x: xv, y: yv})
        np.testing.assert_allclose(got, np.tanh(xv * yv) + np.exp(xv - yv), rtol=1e-5)


def test_a_tuple_gate_after_a_variable_write_is_kept():
    # The gate waits for an update: what its Identities feed may rely on seeing it.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4, 8])
        v = tf.Variable(np.zeros((4, 8), np.float32))
        with tf.control_dependencies([tf.assign_add(v, x)]):
            y = tf.identity(x) * 3.0
        out = _gated_products(x, y)
        p = _partition([out], [x])
        types = _fuse(p)
        assert "NoOp" in types and types.count("_FusedElementwise") == 2


def test_gradients_reduced_to_their_inputs_shapes_join_the_cluster():
    # Unknown batch sizes: the gradient of x * y reduces through BroadcastGradientArgs,
    # Sum and Reshape at run time; each pair becomes a SumTo instruction of the cluster.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 3])
        b = tf.placeholder(tf.float32, [None, 1])
        z = tf.tanh(x * y) + b
        gx, gy, gb = tf.gradients(tf.reduce_sum(z * z), [x, y, b])
        p = _partition([gx, gy, gb], [x, y, b])
        before = [n.op.type for n in p.nodes]
        assert {"BroadcastGradientArgs", "Sum", "Reshape"} <= set(before)
        types = _fuse(p)
        assert "BroadcastGradientArgs" not in types
        assert types.count("Reshape") == before.count("Reshape") - before.count("Sum")
        programs = [op for n in _fused_nodes(p) for op in n.op._attrs["program"]]
        assert programs.count("SumTo") >= 4
        rng = np.random.default_rng(1)
        for rows in (5, 1):  # (1 row: y broadcasts nothing, b's gradient sums nothing)
            xv, yv = (rng.standard_normal((rows, 3)).astype(np.float32) for _ in range(2))
            bv = rng.standard_normal((rows, 1)).astype(np.float32)
            with tf.Session() as s:
                got = s.run([gx, gy, gb], {x: xv, y: yv, b: bv})
            t = np.tanh(xv.astype(np.float64) * yv)
            dz = 2 * (t + bv)
            dt = dz * (1 - t * t)
            for g, want in zip(got, [dt * yv, dt * xv, dz.sum(1, keepdims=True)]):
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_sum_to_targets_read_their_tensors_shapes_instead_of_shape_nodes():
    # The reduced operands are computed (MatMul products), not fed: each SumTo's target
    # is Shape(operand), and the fused node reads the operand's own shape instead, so
    # no Shape node runs (eight per LSTM cell's backward pass); values as before.
    with tf.Graph().as_default():
        xf = tf.placeholder(tf.float32, [None, 2])
        x = tf.matmul(xf, tf.constant([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]]))
        y = tf.matmul(xf, tf.constant([[0.5, 1.0, 2.0], [-1.0, 0.75, 1.0]]))
        b = tf.matmul(xf, tf.constant([[0.3], [-0.7]]))
        z = tf.tanh(x * y) + b
        gx, gy, gb = tf.gradients(tf.reduce_sum(z * z), [x, y, b])
        p = _partition([gx, gy, gb], [xf])
        before = [n.op.type for n in p.nodes]
        types = _fuse(p)
        assert "BroadcastGradientArgs" not in types
        assert types.count("Shape") < before.count("Shape")
        read = {src[0] for n in _fused_nodes(p) for src in n.inputs if src[0] != "feed"}
        assert not [j for j in read if p.nodes[j].op.type == "Shape"]
        flags = [f for n in _fused_nodes(p) for f in n.op._attrs["shape_of"]]
        assert flags and all(flags)
        rng = np.random.default_rng(2)
        for rows in (5, 1):
            fv = rng.standard_normal((rows, 2)).astype(np.float32)
            with tf.Session() as s:
                got = s.run([gx, gy, gb, x, y, b, z.op.inputs[0]], {xf: fv})
            # t: the step's own tanh (TF's float32 function on the CPU is up to ~5 ulps
            # from tanh near 1, where 1 - t * t keeps few of t's bits)
            xv, yv, bv, t = (v.astype(np.float64) for v in got[3:])
            dz = 2 * (t + bv)
            dt = dz * (1 - t * t)
            for g, want in zip(got[:3], [dt * yv, dt * xv, dz.sum(1, keepdims=True)]):
                assert g.shape == want.shape
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_sum_to_a_shape_that_does_not_fit_is_an_error():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        y = tf.placeholder(tf.float32, [None])
        (gx,) = tf.gradients(tf.reduce_sum(tf.exp(x * y)), [x])
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
                s.run(gx, {x: np.zeros(2, np.float32), y: np.zeros(3, np.float32)})


def test_identities_inside_a_cluster_are_aliases():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        a = tf.identity(tf.exp(x))
        y = tf.tanh(a) * 2.0
        p = _partition([y, a], [x])  # a fetched: its value must be an array of its own
        _fuse(p)
        (fused,) = _fused_nodes(p)
        assert fused.op._attrs["program"] == ["Exp", "Identity", "Tanh", "Mul"]
        with tf.Session() as s:
            xv = np.array([0.5, -1.0], np.float32)
            got_y, got_a = s.run([y, a], {x: xv})
    np.testing.assert_allclose(got_a, np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(got_y, np.tanh(np.exp(xv)) * 2, rtol=1e-6)


def test_activation_gradients_inside_a_cluster():
    xv = np.linspace(-3, 3, 11).astype(np.float64)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None])
        loss = tf.reduce_sum(tf.sigmoid(x * 2.0) * tf.tanh(x) + tf.nn.softplus(x) * x)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as s:
            got = s.run(g, {x: xv})
            kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    assert "SigmoidGrad" not in kinds and "TanhGrad" not in kinds
    sg, th = _np_sigmoid(2 * xv), np.tanh(xv)
    sp = np.logaddexp(0, xv)
    want = 2 * sg * (1 - sg) * th + sg * (1 - th * th) + _np_sigmoid(xv) * xv + sp
    np.testing.assert_allclose(got, want, rtol=1e-10)


# -- the kernel against NumPy -------------------------------------------------------------------

_UNARY = {
    "Neg": (tf.negative, np.negative, "any"),
    "Abs": (tf.abs, np.abs, "any"),
    "Square": (tf.square, np.square, "any"),
    "Sqrt": (tf.sqrt, np.sqrt, "pos"),
    "Rsqrt": (tf.rsqrt, lambda x: 1 / np.sqrt(x), "pos"),
    "Exp": (tf.exp, np.exp, "any"),
    "Expm1": (tf.math.expm1, np.expm1, "any"),
    "Log": (tf.log, np.log, "pos"),
    "Log1p": (tf.math.log1p, np.log1p, "pos"),
    "Sin": (tf.sin, np.sin, "any"),
    "Cos": (tf.cos, np.cos, "any"),
    "Tanh": (tf.tanh, np.tanh, "any"),
    "Sigmoid": (tf.sigmoid, _np_sigmoid, "any"),
    "Reciprocal": (tf.reciprocal, np.reciprocal, "pos"),
    "Relu": (tf.nn.relu, lambda x: np.maximum(x, 0), "any"),
    "Sign": (tf.sign, np.sign, "any"),
    "Floor": (tf.floor, np.floor, "any"),
    "Ceil": (tf.ceil, np.ceil, "any"),
}
_BINARY = {
    "AddV2": (tf.add, np.add),
    "Sub": (tf.subtract, np.subtract),
    "Mul": (tf.multiply, np.multiply),
    "RealDiv": (tf.truediv, np.true_divide),
    "Maximum": (tf.maximum, np.maximum),
    "Minimum": (tf.minimum, np.minimum),
    "SquaredDifference": (tf.squared_difference, lambda x, y: (x - y) ** 2),
    "Pow": (tf.pow, np.power),
}
_TOL = {np.float16: 3e-3, np.float32: 2e-6, np.float64: 1e-12}


def _value(shape, dtype, domain):
    v = RNG.uniform(0.2, 2.0, shape) if domain == "pos" else RNG.uniform(-2.0, 2.0, shape)
    return v.astype(dtype)


def _check(got, want, dtype):
    assert got.dtype == dtype
    tol = _TOL[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol * 8, atol=tol * 8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("op_type", sorted(_UNARY))
def test_each_unary_op_inside_a_cluster(op_type, dtype):
    builder, ref, domain = _UNARY[op_type]
    shape = (37, 5)
    xv = _value(shape, dtype, domain)
    with tf.Graph().as_default():
        x = tf.placeholder(dtype, [None, 5])
        y = builder(x * 1.5) * 0.5  # the op between two element-wise neighbours
        with tf.Session() as s:
            got = s.run(y, {x: xv})
            kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    assert "_FusedElementwise" in kinds and op_type not in kinds
    _check(got, ref(xv.astype(np.float64) * 1.5) * 0.5, dtype)


_BROADCASTS = [
    ((4, 6), (4, 6)),
    ((4, 6), (6,)),
    ((4, 1), (1, 6)),
    ((), (3, 2)),
    ((2, 1, 3), (5, 1)),
]


@pytest.mark.parametrize("shapes", _BROADCASTS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("op_type", sorted(_BINARY))
def test_each_binary_op_broadcasting_inside_a_cluster(op_type, dtype, shapes):
    builder, ref = _BINARY[op_type]
    xs, ys = shapes
    xv, yv = _value(xs, dtype, "pos"), _value(ys, dtype, "pos")
    with tf.Graph().as_default():
        x = tf.placeholder(dtype, [None] * len(xs))
        y = tf.placeholder(dtype, [None] * len(ys))
        z = tf.exp(builder(tf.abs(x), y) * 0.25)
        with tf.Session() as s:
            got = s.run(z, {x: xv, y: yv})
    x64, y64 = xv.astype(np.float64), yv.astype(np.float64)
    _check(got, np.exp(ref(np.abs(x64), y64) * 0.25), dtype)


@pytest.mark.parametrize("size", [7, 5000, 70000])  # inline, and handed to the device
def test_random_expression_trees_against_numpy(size):
    rng = np.random.default_rng(size)
    unary = ["Tanh", "Sigmoid", "Neg", "Square", "Abs", "Exp", "Relu"]
    binary = ["AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"]
    for dtype in (np.float32, np.float64):
        leaves_np = [rng.uniform(-1, 1, (size,)).astype(dtype) for _ in range(4)]
        leaves_np.append(rng.uniform(-1, 1, (1,)).astype(dtype))  # broadcasts
        with tf.Graph().as_default():
            leaves = [tf.placeholder(dtype, [None]) for _ in leaves_np]
            vals = list(leaves)
            refs = [v.astype(np.float64) for v in leaves_np]
            for _ in range(14):
                if rng.random() < 0.4:
                    k = rng.integers(len(vals))
                    name = unary[rng.integers(len(unary))]
                    vals.append(_UNARY[name][0](vals[k] * 0.5))
                    refs.append(_UNARY[name][1](refs[k] * 0.5))
                else:
                    a, b = rng.integers(len(vals), size=2)
                    name = binary[rng.integers(len(binary))]
                    vals.append(_BINARY[name][0](vals[a], vals[b]))
                    refs.append(_BINARY[name][1](refs[a], refs[b]))
            fetch = vals[-3:]  # intermediate values fetched as well
            with tf.Session() as s:
                got = s.run(fetch, dict(zip(leaves, leaves_np)))
        for g, want in zip(got, refs[-3:]):
            _check(g, want, dtype)


def test_relu_grad_bias_add_and_add_n():
    xv = RNG.standard_normal((6, 4)).astype(np.float32)
    bv = RNG.standard_normal(4).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        b = tf.placeholder(tf.float32, [4])
        pre = tf.nn.bias_add(x * 2.0, b)
        y = tf.nn.relu(pre)
        (dx,) = tf.gradients(tf.reduce_sum(tf.square(y) + y), [x])
        n = tf.add_n([tf.exp(x), tf.tanh(x), x * x])
        with tf.Session() as s:
            got_y, got_dx, got_n = s.run([y, dx, n], {x: xv, b: bv})
    pre_v = xv * 2 + bv
    np.testing.assert_allclose(got_y, np.maximum(pre_v, 0), rtol=1e-6)
    np.testing.assert_allclose(got_dx, (2 * got_y + 1) * (pre_v > 0) * 2, rtol=1e-5)
    np.testing.assert_allclose(got_n, np.exp(xv) + np.tanh(xv) + xv * xv, rtol=1e-6)


def test_sigmoid_saturates_like_tf():
    xv = np.array([-1000, -88, -30, -1, 0, 1, 30, 1000], np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        y = tf.sigmoid(x + 0.0) * 1.0
        with tf.Session() as s:
            got = s.run(y, {x: xv})
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, _np_sigmoid(xv), rtol=1e-6, atol=1e-37)


def test_incompatible_shapes_at_run_time_name_the_op():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        y = tf.placeholder(tf.float32, [None])
        z = tf.exp(tf.add(tf.tanh(x), y, name="the_add")) * 2.0
        with tf.Session() as s:
            with pytest.raises(
                errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[3\]"
            ):
                s.run(z, {x: np.zeros(2, np.float32), y: np.zeros(3, np.float32)})
            with pytest.raises(errors.InvalidArgumentError, match="the_add"):
                s.run(z, {x: np.zeros(2, np.float32), y: np.zeros(3, np.float32)})
            # the same session still runs good shapes (schedules are per input shapes)
            got = s.run(z, {x: np.zeros(3, np.float32), y: np.ones(3, np.float32)})
    np.testing.assert_allclose(got, np.full(3, 2 * np.e, np.float32), rtol=1e-6)


def test_fused_node_writes_into_a_donated_input():
    # The product is new in the step with one reader: the result may take its buffer.
    seen = []
    real = fused_elementwise._Program.evaluate

    def spy(self, xp, sched, donated, xs):
        out = real(self, xp, sched, donated, xs)
        seen.append((tuple(donated), any(o is x for o in out for x in xs)))
        return out

    with tf.Graph().as_default(), tf.device("/cpu:0"):  # host buffers: NumPy's, donatable
        x = tf.placeholder(tf.float32, [None, 64])
        w = tf.constant(RNG.standard_normal((64, 64)).astype(np.float32))
        y = tf.sigmoid(tf.tanh(tf.matmul(x, w)) * 2.0)
        with mock.patch.object(fused_elementwise._Program, "evaluate", spy), tf.Session() as s:
            s.run(y, {x: RNG.standard_normal((128, 64)).astype(np.float32)})
    assert seen and seen[-1] == ((0,), True)


# -- whole graphs, with and without the pass ------------------------------------------------------


def _train_lstm(dynamic: bool):
    tf.set_random_seed(3)
    rng = np.random.default_rng(3)
    x = tf.placeholder(tf.float32, [None, 5, 3])
    y = tf.placeholder(tf.int64, [None])
    cell = tf.nn.rnn_cell.BasicLSTMCell(8)
    if dynamic:
        outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        last = outputs[:, -1]
    else:
        outputs, _ = tf.nn.static_rnn(cell, tf.unstack(x, 5, 1), dtype=tf.float32)
        last = outputs[-1]
    logits = tf.layers.dense(last, 4)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    feed = {x: rng.random((6, 5, 3)).astype(np.float32), y: rng.integers(0, 4, 6)}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        losses = [s.run([train, loss], feed)[1] for _ in range(4)]
        kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return losses, s.run(tf.trainable_variables()), kinds


def _train_autoencoder():
    tf.set_random_seed(4)
    rng = np.random.default_rng(4)
    x = tf.placeholder(tf.float32, [None, 12])
    h = tf.layers.dense(x, 6, activation=tf.sigmoid)
    out = tf.layers.dense(h, 12, activation=tf.sigmoid)
    loss = tf.reduce_mean(tf.pow(x - out, 2))
    train = tf.train.RMSPropOptimizer(0.05).minimize(loss)
    feed = {x: rng.random((9, 12)).astype(np.float32)}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        losses = [s.run([train, loss], feed)[1] for _ in range(4)]
        kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return losses, s.run(tf.trainable_variables()), kinds


def _cond_and_loop():
    x = tf.placeholder(tf.float32, [None])
    flag = tf.placeholder(tf.bool, [])
    y = tf.cond(flag, lambda: tf.tanh(x * 2.0) + 1.0, lambda: tf.sigmoid(x) * 3.0 - x)

    def body(i, acc):
        return i + 1, tf.tanh(acc * 0.5 + x) * tf.sigmoid(acc)

    _, acc = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), x])
    (g,) = tf.gradients(tf.reduce_sum(acc * y), [x])
    xv = np.linspace(-1, 1, 7).astype(np.float32)
    with tf.Session() as s:
        out = [s.run([y, acc, g], {x: xv, flag: f}) for f in (True, False)]
        kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    return [v for step in out for v in step], None, kinds


@pytest.mark.parametrize(
    "build",
    [lambda: _train_lstm(False), lambda: _train_lstm(True), _train_autoencoder, _cond_and_loop],
    ids=["static_rnn", "dynamic_rnn", "autoencoder", "cond_and_while"],
)
def test_whole_graphs_compute_what_they_computed_unfused(build, monkeypatch):
    with tf.Graph().as_default():
        fused_values, fused_vars, fused_kinds = build()
    passes = [r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    with tf.Graph().as_default():
        plain_values, plain_vars, plain_kinds = build()
    assert "_FusedElementwise" in fused_kinds and "_FusedElementwise" not in plain_kinds
    assert len(fused_kinds) < len(plain_kinds)
    for a, b in zip(fused_values, plain_values):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    for a, b in zip(fused_vars or (), plain_vars or ()):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


# -- inside tf.cond branches, end to end ------------------------------------------------------


def _dropout_in_cond():
    """An MLP layer whose dropout (and a little more) sits in tf.cond: the branch's
    chains have outputs that read different inputs (the scaled value, which the
    gradient's Shape reads too, and the masked one), as in benchmarks/cond_mlp_bench.
    On the CPU: with (fake) GPUs the placer puts part of the branch on the CPU, and a
    value received from another partition is a deadness class of its own."""
    with tf.device("/cpu:0"):
        return _dropout_in_cond_here()


def _dropout_in_cond_here():
    tf.set_random_seed(11)
    rng = np.random.default_rng(11)
    x = tf.placeholder(tf.float32, [None, 6])
    flag = tf.placeholder(tf.bool, [])
    w = tf.Variable(rng.standard_normal((6, 5)).astype(np.float32))
    h = tf.nn.relu(tf.matmul(x, w))

    def taken():
        # dropout as TF1 wrote it (scaled value times a 0/1 mask): products to fuse
        mask = tf.cast(tf.random_uniform(tf.shape(h), seed=3) >= 0.4, tf.float32)
        return h * (1 / 0.6) * mask * 2.0 + tf.tanh(h)

    y = tf.cond(flag, taken, lambda: tf.sigmoid(h) * 3.0 - h)
    loss = tf.reduce_sum(y * y)
    gx, gw = tf.gradients(loss, [x, w])
    xv = rng.standard_normal((4, 6)).astype(np.float32)
    fetches = [y, gx, gw]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        out = [s.run(fetches, {x: xv, flag: f}) for f in (True, False, True)]
        nodes = [op for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    return out, nodes


def _branch_fusions(nodes):
    return [op for op in nodes if op.type == "_FusedElementwise" and "cond/" in op.name]


def test_chains_inside_a_cond_branch_fuse_with_the_same_values_and_gradients(monkeypatch):
    with tf.Graph().as_default():
        fused, fused_nodes = _dropout_in_cond()
    passes = [r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    with tf.Graph().as_default():
        plain, plain_nodes = _dropout_in_cond()
    # the dropout's two products (outputs reading different inputs) are in one node, and
    # so are the branch's gradients with their sums to shape: both need the class check
    programs = [op._attrs["program"] for op in _branch_fusions(fused_nodes)]
    assert any(p[:3] == ["Mul", "Mul", "Mul"] and "Tanh" in p for p in programs)
    programs = [op._attrs["program"] for op in fused_nodes if op.type == "_FusedElementwise"]
    assert any("TanhGrad" in p and "SumTo" in p for p in programs)
    assert not _branch_fusions(plain_nodes)
    assert len(fused_nodes) < len(plain_nodes)
    for step_f, step_p in zip(fused, plain):
        for a, b in zip(step_f, step_p):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_fused_branch_stays_dead_when_not_taken(monkeypatch):
    # Fetching a value of the branch not taken is TF's InvalidArgumentError, fused or
    # not: the fused node is dead exactly when the values it replaced were.  (The
    # branch is built from Switch and Merge: tf.cond's inner values are not fetchable.)
    def run(flag_value):
        with tf.Graph().as_default(), tf.device("/cpu:0"):  # (one partition)
            tf.set_random_seed(2)
            x = tf.placeholder(tf.float32, [None, 4])
            flag = tf.placeholder(tf.bool, [])
            off, on = control_flow_prims.switch(x, flag)
            mask = tf.cast(tf.random_uniform(tf.shape(on), seed=1) >= 0.5, tf.float32)
            d = on * 2.0 * mask  # (TF1's dropout: products to fuse)
            y, _ = control_flow_prims.merge([tf.sigmoid(off) - 1.0, tf.tanh(d) * 2.0])
            with tf.Session() as s:
                feed = {x: np.ones((3, 4), np.float32), flag: flag_value}
                if flag_value:
                    got, inner = s.run([y, d], feed)  # (one draw of the mask for both)
                else:
                    got = s.run(y, feed)
                    try:
                        inner = s.run(d, feed)
                    except errors.InvalidArgumentError:
                        inner = None
                nodes = [op for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return got, inner, nodes

    taken_y, taken_inner, nodes = run(True)
    assert any(
        op.type == "_FusedElementwise" and op._attrs["program"][:2] == ["Mul", "Mul"]
        for op in nodes
    )
    assert taken_inner is not None and set(np.unique(taken_inner)) <= {0.0, 2.0}
    np.testing.assert_allclose(taken_y, np.tanh(taken_inner) * 2.0, rtol=1e-6)
    other_y, other_inner, _ = run(False)
    assert other_inner is None  # dead
    np.testing.assert_allclose(other_y, 1 / (1 + np.exp(-1.0)) - 1.0, rtol=1e-6)
    passes = [r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    assert run(False)[1] is None


# -- a ConcatV2 of one fused node's outputs (fuse_concat_outputs) --------------------------------


def _passes(p):
    graph_passes.run_graph_passes(p, tf.Graph())
    return [n.op.type for n in p.nodes]


def _three_parts(a, b):
    # three clusters with no edge between them (each reads a and b only), as an LSTM
    # cell's gate gradients and its output gate's SigmoidGrad
    return [tf.tanh(a) * b, tf.sigmoid(b) + a * 2.0, (a - b) * (a + b)]


def _np_three_parts(a, b):
    return [np.tanh(a) * b, _np_sigmoid(b) + a * 2.0, (a - b) * (a + b)]


def test_a_join_of_sibling_clusters_becomes_one_fused_node():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 8])
        joined = tf.concat(_three_parts(a, b), 1, name="joined")
        p = _partition([joined], [a, b])
        types = _passes(p)
        assert "ConcatV2" not in types
        (fused,) = _fused_nodes(p)
        assert fused.op.name == "joined" and fused.op._attrs["concat"] == [1, 3]
        assert fused.op._attrs["M"] == 1


def test_a_join_whose_parts_others_read_stays_a_concat():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 8])
        parts = _three_parts(a, b)
        joined = tf.concat(parts, 1)
        for fetches in ([joined, parts[0]], [joined, tf.reduce_sum(parts[1])]):
            p = _partition(fetches, [a, b])
            assert "ConcatV2" in _passes(p), fetches
            assert all(not n.op._attrs.get("concat") for n in _fused_nodes(p))


@pytest.mark.parametrize("axis", [0, 1, -1, 2, -3])
def test_joined_values_and_other_outputs_against_numpy(axis, monkeypatch):
    a_np = RNG.standard_normal((6, 5, 7)).astype(np.float32)
    b_np = RNG.standard_normal((6, 5, 7)).astype(np.float32)

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):  # (the pass is the CPU's)
            a = tf.placeholder(tf.float32, [None, 5, 7])
            b = tf.placeholder(tf.float32, [None, 5, 7])
            parts = _three_parts(a, b)
            h = tf.tanh(parts[0] * 3.0)  # read by a fetch: an output of its own
            with tf.Session() as s:
                out = s.run([tf.concat(parts, axis), h], {a: a_np, b: b_np})
                kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return out, kinds

    (joined, h), kinds = run()
    assert "ConcatV2" not in kinds
    want = np.concatenate(_np_three_parts(a_np, b_np), axis)
    np.testing.assert_allclose(joined, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, np.tanh(np.tanh(a_np) * b_np * 3.0), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(fused_elementwise, "_CONCAT", False)
    (joined0, h0), kinds0 = run()
    assert "ConcatV2" in kinds0
    assert joined.tobytes() == joined0.tobytes() and h.tobytes() == h0.tobytes()


def test_a_join_of_parts_that_do_not_fit_is_concats_error():
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        a = tf.placeholder(tf.float32, None)
        b = tf.placeholder(tf.float32, None)
        second = tf.sigmoid(b) * 2.0  # (one cluster: the first part reads the second)
        joined = tf.concat([tf.tanh(a) + second, second], 0, name="joined")
        with tf.Session() as s:
            a_np = np.zeros((2, 3), np.float32)
            b_np = np.ones(3, np.float32)
            with pytest.raises(
                errors.InvalidArgumentError,
                match=r"ConcatOp : Ranks of all input tensors should match: "
                r"shape\[0\] = \[2,3\] vs. shape\[1\] = \[3\]",
            ) as info:
                s.run(joined, {a: a_np, b: b_np})
            assert "joined" in str(info.value)
            kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
            assert "ConcatV2" not in kinds
            # the same node joins fitting values afterwards
            got = s.run(joined, {a: np.zeros(3, np.float32), b: b_np})
    second = 2 * _np_sigmoid(b_np)
    np.testing.assert_allclose(got, np.concatenate([second, second]), rtol=1e-6)


def test_a_join_inside_a_while_loop_becomes_the_fused_node(monkeypatch):
    x_np = RNG.standard_normal((4, 6)).astype(np.float32)

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):
            x = tf.placeholder(tf.float32, [4, 6])

            def body(i, acc):
                parts = [tf.tanh(acc) * x, tf.sigmoid(acc) - x]
                joined = tf.concat(parts, 1)
                return i + 1, tf.matmul(joined, tf.ones([12, 6])) * 0.1

            _, acc = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), x])
            (g,) = tf.gradients(tf.reduce_sum(acc), [x])
            with tf.Session() as s:
                out = s.run([acc, g], {x: x_np})
                kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return out, kinds

    out, kinds = run()
    monkeypatch.setattr(fused_elementwise, "_CONCAT", False)
    plain, plain_kinds = run()
    assert kinds.count("ConcatV2") < plain_kinds.count("ConcatV2")
    acc = x_np
    for _ in range(3):
        acc = np.concatenate([np.tanh(acc) * x_np, _np_sigmoid(acc) - x_np], 1) @ np.ones((12, 6))
        acc = acc * 0.1
    np.testing.assert_allclose(out[0], acc, rtol=1e-5, atol=1e-6)
    for v, w in zip(out, plain):
        assert v.tobytes() == w.tobytes()


def test_parts_of_two_shapes_stay_in_their_clusters():
    # (merged, their program could not compile: values of one shape only)
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 4])
        joined = tf.concat([tf.tanh(a) * 2.0, tf.sigmoid(b) + 1.0], 1)
        p = _partition([joined], [a, b])
        types = _passes(p)
        assert "ConcatV2" in types and len(_fused_nodes(p)) == 2


def test_two_lstm_cells_joined_stay_two_programs():
    # (one program of both would not vectorize: _MERGED_MAX_INLINE)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 16])
        y = tf.placeholder(tf.float32, [None, 16])
        c = tf.placeholder(tf.float32, [None, 4])
        (_, h1), (_, h2) = _lstm_cell(x, c), _lstm_cell(y, c)
        p = _partition([tf.concat([h1, h2], 1)], [x, y, c])
        types = _passes(p)
        assert "ConcatV2" in types and len(_fused_nodes(p)) == 2


# -- Selects inside the programs (a bool condition: of the value's shape, or per row) ---------


def _masked_cells(x, steps, lengths):
    """static_rnn's sequence_length steps, in small: each step's value kept on the rows
    still running, zeros (_SelectZero) or the last value (Select) elsewhere."""
    h = tf.zeros_like(x)
    outs = []
    for t in range(steps):
        live = t < lengths  # [batch] bool: TF1's batch-vector condition
        new_h = tf.tanh(x * float(t + 1) + h)
        outs.append(tf.where(live, new_h, tf.zeros_like(new_h)))
        h = tf.where(live, new_h, h)
    return outs, h


def _run_masked(monkeypatch, select: bool):
    monkeypatch.setattr(fused_elementwise, "_SELECT", select)
    x_np = np.random.default_rng(12).standard_normal((6, 5)).astype(np.float32)
    x_np[0, 0], x_np[1, 1] = np.nan, -np.inf
    lengths_np = np.array([0, 1, 2, 3, 3, 1], np.int32)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, 5])
        lengths = tf.placeholder(tf.int32, [None])
        outs, h = _masked_cells(x, 3, lengths)
        loss = tf.reduce_sum(tf.add_n(outs) * h)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as s:
            got = s.run([*outs, h, g], {x: x_np, lengths: lengths_np})
            kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    return got, kinds, x_np, lengths_np


def test_selects_with_a_batch_vector_condition_join_the_clusters(monkeypatch):
    got, kinds, x_np, lengths = _run_masked(monkeypatch, True)
    plain, plain_kinds, _, _ = _run_masked(monkeypatch, False)
    selects = ("Select", "_SelectZero")
    assert sum(k in selects for k in kinds) < sum(k in selects for k in plain_kinds)
    assert len(kinds) < len(plain_kinds)
    for a, b in zip(got, plain):  # (nan and -inf rows included)
        assert a.tobytes() == b.tobytes()
    h = np.zeros_like(x_np)
    for t in range(3):
        live = (t < lengths)[:, None]
        with np.errstate(invalid="ignore"):
            new_h = np.tanh(x_np * (t + 1) + h)
        np.testing.assert_allclose(got[t], np.where(live, new_h, 0.0), rtol=1e-6, atol=1e-7)
        h = np.where(live, new_h, h)
    np.testing.assert_allclose(got[3], h, rtol=1e-6)


@pytest.mark.parametrize("cond_shape", [(4, 6), (4,), ()])
def test_a_select_inside_a_program_against_numpy(cond_shape):
    rng = np.random.default_rng(11)
    x_np = rng.standard_normal((4, 6)).astype(np.float32)
    c_np = rng.random(cond_shape) < 0.5
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [4, 6])
        c = tf.placeholder(tf.bool, cond_shape)
        y = tf.where(c, tf.tanh(x) * 2.0, x - 1.0) + 0.5
        (g,) = tf.gradients(tf.reduce_sum(y * y), [x])  # (a _SelectZero each way)
        with tf.Session() as s:
            got_y, got_g = s.run([y, g], {x: x_np, c: c_np})
            kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    assert "Select" not in kinds and "_SelectZero" not in kinds
    cb = c_np.reshape(c_np.shape + (1,)) if c_np.ndim == 1 else c_np
    want_y = np.where(cb, np.tanh(x_np) * 2.0, x_np - 1.0) + 0.5
    want_g = 2 * want_y * np.where(cb, 2.0 * (1 - np.tanh(x_np) ** 2), 1.0)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-5, atol=1e-5)


def test_a_select_whose_shapes_do_not_fit_is_selects_error():
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, 3])
        c = tf.placeholder(tf.bool, [None])
        y = tf.where(c, tf.tanh(x), x * 2.0, name="the_select") + 1.0
        with tf.Session() as s:
            with pytest.raises(
                errors.InvalidArgumentError,
                match=r"Number of batches of 'then' must match size of 'cond', but saw: 2 vs. 3",
            ) as info:
                s.run(y, {x: np.zeros((2, 3), np.float32), c: np.ones(3, bool)})
            assert "the_select" in str(info.value)
            got = s.run(y, {x: np.zeros((2, 3), np.float32), c: np.ones(2, bool)})
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32))


# -- a Split whose pieces one fused node reads (fuse_split_inputs) -------------------------------


def test_an_lstm_cells_split_becomes_part_of_its_program():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 16])
        c = tf.placeholder(tf.float32, [None, 4])
        new_c, h = _lstm_cell(x, c)
        p = _partition([new_c, h], [x, c])
        types = _passes(p)
        assert "Split" not in types and "Const" not in types  # (its axis went with it)
        (fused,) = _fused_nodes(p)
        attrs = fused.op._attrs
        columns = [tuple(attrs["columns"][k : k + 4]) for k in range(0, 16, 4)]
        assert len(attrs["columns"]) == 16 and attrs["N"] == 5
        # each gate's input is x itself (a feed), cut [b:e] of its 16 columns
        assert sorted((b, e, w) for _k, b, e, w in columns) == [
            (0, 4, 16),
            (4, 8, 16),
            (8, 12, 16),
            (12, 16, 16),
        ]
        assert all(fused.inputs[k] == ("feed", 0) for k, *_ in columns)


def _split_cell_np(x, c, sizes):
    if isinstance(sizes, int):
        pieces = np.split(x, sizes, -1)
    else:
        pieces = np.split(x, np.cumsum(sizes)[:-1], -1)
    return _np_lstm_cell(np.concatenate(pieces[:4], 1), c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [1, 3, 128])
@pytest.mark.parametrize("sizes", [4, [5, 5, 5, 5], [5, 5, 5, 5, 3], [5, -1, 5, 5]])
def test_split_pieces_read_by_a_program_against_numpy(dtype, batch, sizes, monkeypatch):
    # Gates of 5 columns (odd), from Split and SplitV (a piece nothing reads, a -1),
    # batch 1 and odd; with a batch-vector Select (the row loop) for the larger batch.
    width = 20 if sizes == 4 else sum(s for s in sizes if s != -1) + 5 * (-1 in sizes)
    rng = np.random.default_rng(11)
    x_np = rng.standard_normal((batch, width)).astype(dtype)
    c_np = rng.standard_normal((batch, 5)).astype(dtype)
    keep_np = rng.random(batch) < 0.5

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):  # (the pass is the CPU's)
            x = tf.placeholder(dtype, [None, width])
            c = tf.placeholder(dtype, [None, 5])
            keep = tf.placeholder(tf.bool, [None])
            i, j, f, o, *_rest = tf.split(x * 1.0, sizes, -1)  # (x * 1.0: its own node)
            new_c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
            h = tf.where(keep, tf.tanh(new_c) * tf.sigmoid(o), tf.zeros_like(new_c))
            with tf.Session() as s:
                out = s.run([new_c, h], {x: x_np, c: c_np, keep: keep_np})
                kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return out, kinds

    (new_c, h), kinds = run()
    assert "Split" not in kinds and "SplitV" not in kinds
    want_c, want_h = _split_cell_np(x_np, c_np, sizes if sizes == 4 else [5, 5, 5, 5, 5])
    want_h = np.where(keep_np[:, None], want_h, 0.0)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(new_c, want_c, rtol=tol, atol=tol)
    np.testing.assert_allclose(h, want_h, rtol=tol, atol=tol)
    assert new_c.dtype == dtype and h.shape == (batch, 5)
    monkeypatch.setattr(fused_elementwise, "_SPLITS", False)
    (new_c0, h0), kinds0 = run()
    assert "Split" in kinds0 or "SplitV" in kinds0
    assert new_c.tobytes() == new_c0.tobytes() and h.tobytes() == h0.tobytes()


def test_splits_that_stay_nodes_of_their_own():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 16])
        free = tf.placeholder(tf.float32, [None, None])

        def first_axis():
            a, b = tf.split(x, 2, 0)
            return [tf.tanh(a) * 2.0 + b]

        def fetched():
            i, j, f, o = tf.split(x, 4, 1)
            return [tf.tanh(i) * tf.sigmoid(j) + f * o, i]

        def two_programs():
            a, b = tf.split(x, 2, 1)
            return [tf.tanh(a) * 2.0, tf.sigmoid(b) - 1.0]

        def a_product():
            i, j, f, o = tf.split(x, 4, 1)
            return [tf.tanh(i) * 2.0 + j - f, tf.matmul(o, tf.ones([4, 4]))]

        def width_unknown():
            a, b = tf.split(free, 2, 1)
            return [tf.tanh(a) * 2.0 + b]

        def dim_fed():
            a, b = tf.split(x, 2, tf.placeholder_with_default(1, []))
            return [tf.tanh(a) * 2.0 + b]

        for build in (first_axis, fetched, two_programs, a_product, width_unknown, dim_fed):
            fetches = build()
            p = _partition(fetches, [x, free])
            types = _passes(p)
            assert "Split" in types, build.__name__
            assert all(not n.op._attrs.get("columns") for n in _fused_nodes(p)), build.__name__


def test_a_split_inside_a_while_loop_becomes_part_of_its_program(monkeypatch):
    # (its Const waits for the loop's pivot, as the program does: dead together)
    x_np = RNG.standard_normal((6, 16)).astype(np.float32)
    c_np = RNG.standard_normal((6, 4)).astype(np.float32)

    def build():
        x = tf.placeholder(tf.float32, [6, 16])
        c0 = tf.placeholder(tf.float32, [6, 4])

        def body(i, c, h):
            new_c, new_h = _lstm_cell(x * tf.tile(h, [1, 4]), c)
            return i + 1, new_c, new_h

        _, c, h = tf.while_loop(lambda i, c, h: i < 3, body, [tf.constant(0), c0, c0])
        return x, c0, [h, c]

    with tf.Graph().as_default():
        x, c0, fetches = build()
        p = _partition(fetches, [x, c0])
        assert "Split" not in _passes(p)
        assert any(n.op._attrs.get("columns") for n in _fused_nodes(p))

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):
            x, c0, fetches = build()
            with tf.Session() as s:
                return s.run(fetches, {x: x_np, c0: c_np}), _folds(_plan_ops(s))

    got, folds = run()
    monkeypatch.setattr(fused_elementwise, "_SPLITS", False)
    kept, kept_folds = run()
    assert "split" in folds and "split" not in kept_folds
    c, h = c_np.astype(np.float64), c_np.astype(np.float64)
    for _ in range(3):
        c, h = _np_lstm_cell(x_np * np.tile(h, [1, 4]), c)
    np.testing.assert_allclose(got[0], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], c, rtol=1e-5, atol=1e-6)
    for v, v0 in zip(got, kept):
        assert v.tobytes() == v0.tobytes()


# -- a BiasAddGrad of a fused node's join (fuse_bias_add_grad) -----------------------------------


def test_a_bias_gradient_of_a_join_becomes_the_fused_nodes_last_output():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 8])
        joined = tf.concat(_three_parts(a, b), 1, name="joined")
        bias = tf.raw_ops.BiasAddGrad(out_backprop=joined, name="bias_grad")
        p = _partition([joined, bias], [a, b])
        types = _passes(p)
        assert "BiasAddGrad" not in types and "ConcatV2" not in types
        (fused,) = _fused_nodes(p)
        attrs = fused.op._attrs
        assert attrs["bias_grad"] == 1 and attrs["M"] == 2 and attrs["concat"] == [1, 3]
        k = p.nodes.index(fused)
        assert p.fetches == [(k, 0), (k, 1)]  # (the bias gradient's fetch follows it)


def test_bias_gradients_that_stay_nodes_of_their_own():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 8])
        free = tf.placeholder(tf.float32, None)
        cases = {
            "not a join": lambda: [tf.raw_ops.BiasAddGrad(out_backprop=tf.tanh(a) * b)],
            "a rank not known": lambda: [
                tf.raw_ops.BiasAddGrad(out_backprop=tf.concat(_three_parts(free, free), -1))
            ],
            "a join of rank 3": lambda: [
                tf.raw_ops.BiasAddGrad(
                    out_backprop=tf.concat(_three_parts(a[:, None], b[:, None]), 2)
                )
            ],
        }
        for why, build in cases.items():
            p = _partition(build(), [a, b, free])
            assert "BiasAddGrad" in _passes(p), why
            assert all(not n.op._attrs.get("bias_grad") for n in _fused_nodes(p)), why
        # two of one join: the first becomes the fused node's, the other stays a node
        joined = tf.concat(_three_parts(a, b), 1)
        twice = [tf.raw_ops.BiasAddGrad(out_backprop=joined) for _ in range(2)]
        p = _partition(twice, [a, b])
        assert _passes(p).count("BiasAddGrad") == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 8), (3, 5), (128, 24), (70, 4)])
def test_a_joins_bias_gradient_against_numpy(dtype, shape, monkeypatch):
    # batch 1 (the kernel copies the one row: -0.0 stays), odd sizes, joins wider and
    # narrower than 32 columns a thread (the loop's sums, the kernel's function)
    rng = np.random.default_rng(12)
    a_np = rng.standard_normal(shape).astype(dtype)
    b_np = rng.standard_normal(shape).astype(dtype)
    a_np.reshape(-1)[:3] = [-0.0, 0.0, -0.0]
    b_np.reshape(-1)[:3] = [-0.0, -0.0, 0.0]

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):  # (the pass is the CPU's)
            a = tf.placeholder(dtype, [None, shape[1]])
            b = tf.placeholder(dtype, [None, shape[1]])
            parts = [a * b, a - b, tf.tanh(a) * 2.0, b * 3.0 + a]
            joined = tf.concat(parts, 1)
            bias = tf.raw_ops.BiasAddGrad(out_backprop=joined)
            with tf.Session() as s:
                out = s.run([joined, bias], {a: a_np, b: b_np})
                kinds = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
        return out, kinds

    (joined, bias), kinds = run()
    assert "BiasAddGrad" not in kinds
    want = np.concatenate(
        [a_np * b_np, a_np - b_np, np.tanh(a_np) * 2.0, b_np * 3.0 + a_np], 1
    ).astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(joined, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(bias, want.sum(0), rtol=tol, atol=tol * shape[0])
    assert bias.dtype == dtype and bias.shape == (4 * shape[1],)
    monkeypatch.setattr(fused_elementwise, "_BIAS_GRADS", False)
    (joined0, bias0), kinds0 = run()
    assert "BiasAddGrad" in kinds0
    assert joined.tobytes() == joined0.tobytes() and bias.tobytes() == bias0.tobytes()


# -- the folds where values may be dead: a while loop's body, a dynamic_rnn, a cond's branch --
#
# fuse_split_inputs, fuse_bias_add_grad and matmul_ops.fuse_concat_matmul, each switched
# off alone against all three on: the same bits, the fold there where it applies.

_FOLDS = {
    "split": (fused_elementwise, "_SPLITS"),
    "bias_grad": (fused_elementwise, "_BIAS_GRADS"),
    "concat": (matmul_ops, "_CONCATS"),
}


def _plan_ops(s):
    return [op for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]


def _folds(ops) -> set:
    kinds = {op.type for op in ops}
    found = set()
    if any(op.type == "_FusedElementwise" and op._attrs.get("columns") for op in ops):
        found.add("split")
    if any(op.type == "_FusedElementwise" and op._attrs.get("bias_grad") for op in ops):
        found.add("bias_grad")
    if "_FusedConcatMatMul" in kinds:
        found.add("concat")
    return found


def _with_and_without(fold, run, monkeypatch):
    """run() with every fold, then with `fold` switched off: (outputs, folds) of each."""
    out, ops = run()
    mod, name = _FOLDS[fold]
    monkeypatch.setattr(mod, name, False)
    off, off_ops = run()
    return (out, _folds(ops)), (off, _folds(off_ops))


def _while_lstm(dtype, batch, feeds_np):
    steps, n_in, units = 4, 3, 5
    with tf.Graph().as_default(), tf.device("/cpu:0"):  # (the passes are the CPU's)
        x = tf.placeholder(dtype, [steps, None, n_in])
        c0 = tf.placeholder(dtype, [None, units])
        w = tf.placeholder(dtype, [n_in + units, 4 * units])
        b = tf.placeholder(dtype, [4 * units])

        def body(t, c, h):
            z = tf.nn.bias_add(tf.matmul(tf.concat([x[t], h], 1), w), b)
            i, j, f, o = tf.split(z, 4, 1)
            new_c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
            return t + 1, new_c, tf.tanh(new_c) * tf.sigmoid(o)

        _, c, h = tf.while_loop(lambda t, c, h: t < steps, body, [tf.constant(0), c0, c0])
        loss = tf.reduce_sum(h * h)
        grads = tf.gradients(loss, [w, b, x, c0], gate_gradients=True)
        with tf.Session() as s:
            out = s.run([c, h, *grads], dict(zip([x, c0, w, b], feeds_np)))
            return out, _plan_ops(s)


def _np_while_lstm(x, c0, w, b):
    x, c, w, b = (v.astype(np.float64) for v in (x, c0, w, b))
    h = c
    for t in range(x.shape[0]):
        c, h = _np_lstm_cell(np.concatenate([x[t], h], 1) @ w + b, c)
    return c, h


@pytest.mark.parametrize("fold", sorted(_FOLDS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [1, 6])
def test_the_folds_inside_a_while_loop_keep_the_bits(fold, dtype, batch, monkeypatch):
    rng = np.random.default_rng(31)
    feeds = [
        rng.standard_normal((4, batch, 3)).astype(dtype),
        rng.standard_normal((batch, 5)).astype(dtype),
        rng.standard_normal((8, 20)).astype(dtype) * 0.5,
        rng.standard_normal(20).astype(dtype),
    ]
    (out, folds), (off, off_folds) = _with_and_without(
        fold, lambda: _while_lstm(dtype, batch, feeds), monkeypatch
    )
    # (every fold applies: the loop's and its gradient's; the Split stays for the loop's
    # push of gate f, whose shape the gradient reads, and the program reads the array)
    assert folds == set(_FOLDS) and off_folds == set(_FOLDS) - {fold}
    want_c, want_h = _np_while_lstm(*feeds)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out[0], want_c, rtol=tol, atol=tol)
    np.testing.assert_allclose(out[1], want_h, rtol=tol, atol=tol)
    for v, v0 in zip(out, off):
        assert v.dtype == dtype and v.tobytes() == v0.tobytes()


@pytest.mark.parametrize("fold", sorted(_FOLDS))
def test_the_folds_inside_a_dynamic_rnn_keep_the_bits(fold, monkeypatch):
    rng = np.random.default_rng(32)
    x_np = rng.standard_normal((3, 5, 7)).astype(np.float32)

    def run():
        with tf.Graph().as_default(), tf.device("/cpu:0"):
            tf.set_random_seed(4)
            x = tf.placeholder(tf.float32, [None, 5, 7])
            cell = tf.nn.rnn_cell.BasicLSTMCell(9)
            outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
            loss = tf.reduce_sum(outputs[:, -1] * 2.0) + tf.reduce_sum(state.c)
            weights = tf.trainable_variables()
            grads = tf.gradients(loss, [*weights, x])
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                out = s.run([outputs, state.c, *weights, *grads], {x: x_np})
                return out, _plan_ops(s)

    (out, folds), (off, off_folds) = _with_and_without(fold, run, monkeypatch)
    assert folds == set(_FOLDS) and off_folds == set(_FOLDS) - {fold}
    for v, v0 in zip(out, off):
        assert v.tobytes() == v0.tobytes()


def _cond_cell(flag_np, feeds_np):
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        a = tf.placeholder(tf.float32, [None, 3])
        c = tf.placeholder(tf.float32, [None, 5])
        w = tf.placeholder(tf.float32, [8, 20])
        b = tf.placeholder(tf.float32, [20])
        flag = tf.placeholder(tf.bool, [])

        def taken():
            z = tf.nn.bias_add(tf.matmul(tf.concat([a, c], 1), w), b)
            return _lstm_cell(z, c)

        new_c, h = tf.cond(flag, taken, lambda: (c * 0.5, tf.tanh(c)))
        loss = tf.reduce_sum(h) + tf.reduce_sum(new_c * new_c)
        grads = tf.gradients(loss, [w, b, a, c], gate_gradients=True)  # (one join: _open_gates)
        with tf.Session() as s:
            out = s.run([new_c, h, *grads], dict(zip([flag, a, c, w, b], [flag_np, *feeds_np])))
            return out, _plan_ops(s)


@pytest.mark.parametrize("fold", sorted(_FOLDS))
@pytest.mark.parametrize("flag", [True, False])
def test_the_folds_inside_a_cond_are_dead_with_their_branch(fold, flag, monkeypatch):
    # Taken or not, the branch's folded nodes give what the nodes they replace gave: the
    # untaken branch's are dead (its values do not reach the Merge), the taken one's live.
    rng = np.random.default_rng(33)
    feeds = [
        rng.standard_normal((6, 3)).astype(np.float32),
        rng.standard_normal((6, 5)).astype(np.float32),
        rng.standard_normal((8, 20)).astype(np.float32) * 0.5,
        rng.standard_normal(20).astype(np.float32),
    ]
    (out, folds), (off, off_folds) = _with_and_without(
        fold, lambda: _cond_cell(flag, feeds), monkeypatch
    )
    assert folds == set(_FOLDS) and off_folds == set(_FOLDS) - {fold}
    if flag:
        want_c, want_h = _np_lstm_cell(
            np.concatenate(feeds[:2], 1) @ feeds[2] + feeds[3], feeds[1]
        )
    else:
        want_c, want_h = feeds[1] * 0.5, np.tanh(feeds[1])
        assert not out[2].any() and not out[3].any()  # (the untaken branch's weights)
    np.testing.assert_allclose(out[0], want_c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], want_h, rtol=1e-5, atol=1e-5)
    for v, v0 in zip(out, off):
        assert v.tobytes() == v0.tobytes()


def _dead_unless(flag):
    """A value live exactly when `flag` is true (an Identity of a Switch's true port)."""
    _f, t = tf.raw_ops.Switch(data=flag, pred=flag)
    return tf.identity(t)


def _dead_edge_cases(a, b, w, dead):
    """{fold: (its fetch, whether it folds)}: each waits for `dead`, through a Const it
    reads (the fold would lose the wait: not folded) or itself (the fused node waits)."""
    with tf.control_dependencies([dead]):
        dim = tf.constant(1)
    i, j, f, o = tf.split(a * 1.0, 4, dim)  # (a * 1.0: its own node)
    split = tf.tanh(i) * tf.sigmoid(j) + f * o
    joined = tf.concat(_three_parts(a, b), 1)
    with tf.control_dependencies([dead]):
        bias_grad = tf.raw_ops.BiasAddGrad(out_backprop=joined)
    with tf.control_dependencies([dead]):
        axis = tf.constant(1)
    product = tf.nn.bias_add(tf.matmul(tf.concat([a, b * 2.0], axis), w), tf.ones([4]))
    with tf.control_dependencies([dead]):
        waits = tf.concat([a, b * 3.0], 1)
    waiting = tf.nn.bias_add(tf.matmul(waits, w), tf.ones([4]))
    return {
        "split": (split, False),
        "bias_grad": (bias_grad, False),
        "concat_axis": (product, False),
        "concat_waits": (waiting, True),
    }


@pytest.mark.parametrize("case", ["split", "bias_grad", "concat_axis", "concat_waits"])
def test_a_fold_that_would_change_when_a_node_is_dead_is_not_made(case):
    rng = np.random.default_rng(34)
    a_np = rng.standard_normal((3, 8)).astype(np.float32)
    b_np = rng.standard_normal((3, 8)).astype(np.float32)
    w_np = rng.standard_normal((16, 4)).astype(np.float32)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        a = tf.placeholder(tf.float32, [None, 8])
        b = tf.placeholder(tf.float32, [None, 8])
        w = tf.placeholder(tf.float32, [16, 4])
        flag = tf.placeholder(tf.bool, [])
        fetch, folds = _dead_edge_cases(a, b, w, _dead_unless(flag))[case]
        with tf.Session() as s:
            feeds = {a: a_np, b: b_np, w: w_np}
            live = s.run(fetch, {flag: True, **feeds})
            with pytest.raises(errors.InvalidArgumentError, match="dead"):
                s.run(fetch, {flag: False, **feeds})
            assert bool(_folds(_plan_ops(s))) == folds
    if case == "split":
        i, j, f, o = np.split(a_np.astype(np.float64), 4, 1)
        want = np.tanh(i) * _np_sigmoid(j) + f * o
    elif case == "bias_grad":
        want = np.concatenate(_np_three_parts(a_np, b_np), 1).sum(0)
    else:
        other = b_np * (2.0 if case == "concat_axis" else 3.0)
        want = np.concatenate([a_np, other], 1).astype(np.float64) @ w_np + 1.0
    np.testing.assert_allclose(live, want, rtol=1e-5, atol=1e-5)
