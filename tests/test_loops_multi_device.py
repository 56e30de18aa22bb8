"""Loops whose bodies span devices (issue 5 item 3, whitepaper §4.4).

The loop's primitives stay on its home device; every other device running part of the
body gets control-loop state from the partitioner, and Send/Recv inside the loop meet
per frame and iteration.  Results must equal the single-device run.
"""

import numpy as np
import pytest

import asyncflow as af

CPU2 = af.ConfigProto(device_count={"CPU": 2})
W = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.5], [0.2, 0.1, 0.9]], np.float32)


def _rnn_like(body_device, n=5):
    """h = tanh(h @ W + x) for n steps, its sum and d(sum)/dx."""
    x = af.placeholder(af.float32, [3], name="x")
    w = af.constant(W)

    def body(i, h):
        with af.device(body_device):
            h2 = af.tanh(af.reshape(af.matmul(af.reshape(h, [1, 3]), w), [3]) + x)
        return i + 1, h2

    with af.device("/cpu:0"):
        i, h = af.while_loop(lambda i, h: i < n, body, [af.constant(0), af.zeros([3])])
    loss = af.reduce_sum(h)
    (gx,) = af.gradients(loss, [x])
    return x, [i, h, gx]


def _run(build, *args, feed_value=(0.1, 0.2, 0.3)):
    feed_value = np.asarray(feed_value, np.float32)
    g = af.Graph()
    with g.as_default():
        x, fetches = build(*args)
        md = af.RunMetadata()
        opts = af.RunOptions(output_partition_graphs=True)
        with af.Session(config=CPU2) as s:
            out = s.run(fetches, {x: feed_value}, options=opts, run_metadata=md)
    return out, md.partition_graphs


def _ops(pg, op_type):
    return [n for n in pg["node"] if n["op"] == op_type]


def test_loop_body_on_another_device_matches_one_device():
    (i1, h1, g1), pgs1 = _run(_rnn_like, "/cpu:0")
    (i2, h2, g2), pgs2 = _run(_rnn_like, "/cpu:1")
    assert i1 == i2 == 5
    np.testing.assert_array_equal(h1, h2)
    np.testing.assert_allclose(g1, g2, rtol=1e-6)
    assert len(pgs2) == 2
    # A device running part of a loop without its predicate got control-loop state.
    added = [n["name"] for pg in pgs2 for n in pg["node"] if n["name"].startswith("_loop_")]
    assert any(n.endswith("/Merge") for n in added)
    assert any(n.endswith("/NextIteration") for n in added)


def test_numpy_reference_for_the_split_loop():
    (_, h, _), _ = _run(_rnn_like, "/cpu:1")
    ref = np.zeros(3, np.float32)
    x = np.array([0.1, 0.2, 0.3], np.float32)
    for _ in range(5):
        ref = np.tanh(ref @ W + x)
    np.testing.assert_allclose(h, ref, rtol=1e-6)


def _nested(inner_device):
    x = af.placeholder(af.float32, [], name="x")

    def outer_body(j, acc):
        def inner_body(k, a):
            with af.device(inner_device):
                a2 = a * 1.5 + x
            return k + 1, a2

        _, inner = af.while_loop(lambda k, a: k < 3, inner_body, [af.constant(0), acc])
        return j + 1, inner

    with af.device("/cpu:0"):
        _, out = af.while_loop(lambda j, a: j < 2, outer_body, [af.constant(0), x])
    return x, [out]


def test_nested_loops_with_inner_body_elsewhere():
    (a,), _ = _run(_nested, "/cpu:0", feed_value=0.5)
    (b,), _ = _run(_nested, "/cpu:1", feed_value=0.5)
    ref = 0.5
    for _ in range(6):
        ref = ref * 1.5 + 0.5
    assert a == b == pytest.approx(ref)


def _cond_in_loop(device):
    x = af.placeholder(af.float32, [], name="x")

    def body(i, v):
        with af.device(device):
            v2 = af.cond(af.equal(i % 2, 0), lambda: v + x, lambda: v * 2.0)
        return i + 1, v2

    with af.device("/cpu:0"):
        _, out = af.while_loop(lambda i, v: i < 6, body, [af.constant(0), x])
    return x, [out]


def test_cond_inside_a_split_loop():
    (a,), _ = _run(_cond_in_loop, "/cpu:0", feed_value=1.0)
    (b,), _ = _run(_cond_in_loop, "/cpu:1", feed_value=1.0)
    v = 1.0
    for i in range(6):
        v = v + 1.0 if i % 2 == 0 else v * 2.0
    assert a == b == v


def test_zero_iterations_across_devices():
    def build():
        x = af.placeholder(af.float32, [3], name="x")

        def body(i, h):
            with af.device("/cpu:1"):
                return i + 1, h * 2.0

        with af.device("/cpu:0"):
            _, h = af.while_loop(lambda i, h: i < 0, body, [af.constant(0), x])
        return x, [h]

    (h,), _ = _run(build)
    np.testing.assert_allclose(h, [0.1, 0.2, 0.3])


def test_loop_whose_home_device_receives_its_predicate():
    # The loop reads a variable on /cpu:1 afresh each iteration (a RefEnter, colocated
    # with the variable), which makes /cpu:1 the loop's home while the predicate is
    # computed on /cpu:0. The home's _Recv of the predicate must not wait for the
    # LoopCond it feeds (this step used to hang).
    g = af.Graph()
    with g.as_default():
        with af.device("/cpu:1"):
            v = af.Variable(2.0)
        with af.device("/cpu:0"):
            r = af.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + v), [0, 0.0])
    with af.Session(graph=g, config=af.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(v.initializer)
        i, total = s.run(r, options=af.RunOptions(timeout_in_ms=20_000))
    assert i == 3 and total == 6.0
