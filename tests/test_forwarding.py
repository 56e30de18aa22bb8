"""Input forwarding (`ctx.may_forward`, decided per plan by `donation.decide`): a kernel
writes into an input only when nothing else can see it.  A wrong answer here corrupts a
value another consumer, a fetch, a feed, a variable or a constant still holds, so every
holder is tried."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import asyncflow as af
from asyncflow import donation, graph_passes, kernel_api
from asyncflow import graph as ops
from asyncflow.ops import fused_elementwise, state_ops
from asyncflow.ops.control_flow_ops import while_loop
from asyncflow.registry import ANY, register_op

_Probe = register_op(
    "TestForwardableProbe",
    inputs=["x: T"],
    outputs=["y: bool"],
    attrs={"T": ANY},
    shape_fn=lambda op: [af.TensorShape([])],
)


@_Probe.kernel("CPU")
async def _probe(ctx, x):
    return np.array(ctx.may_forward(0, x))


def _probe_of(t):
    return ops.apply_op("TestForwardableProbe", [t]).outputs[0]


A = np.arange(64 * 80, dtype=np.float32).reshape(64, 80) / 1000.0
B = np.linspace(-1, 1, 80 * 96, dtype=np.float32).reshape(80, 96)


@pytest.fixture(autouse=True)
def _graph():
    with af.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches, feed)


def test_probe_sees_exclusive_and_shared_values():
    z = af.matmul(af.constant(A), af.constant(B))
    assert _run(_probe_of(z))  # a fresh kernel output with one consumer
    assert not _run([_probe_of(z), z])[0]  # also fetched
    probe = _probe_of(z)
    with af.control_dependencies([probe]):  # a second consumer, still waiting
        later = af.reduce_sum(z)
    assert not _run([probe, later])[0]
    assert _run(af.reduce_sum(z)) == pytest.approx(float((A @ B).sum()), rel=1e-5)
    assert not _run(_probe_of(af.constant(A)))  # a constant's value
    v = af.Variable(A)
    assert not _run(_probe_of(v.read_value()))  # a variable's buffer
    x = af.placeholder(af.float32, [64, 80])
    assert not _run(_probe_of(x), {x: A})  # the caller's array
    assert not _run(_probe_of(af.reshape(z, [-1])))  # a view of another array


def test_probe_inside_loops_general_and_compiled():
    def body(i, acc):
        z = af.matmul(af.constant(A), af.constant(B))
        shared = af.matmul(af.constant(A), af.constant(B))
        probe = _probe_of(shared)
        with af.control_dependencies([probe]):  # a second consumer, still waiting
            keep = af.reduce_sum(shared)
        ok = af.logical_and(_probe_of(z), af.logical_not(probe))
        with af.control_dependencies([keep]):
            return i + 1, af.logical_and(acc, ok)

    _, ok = while_loop(lambda i, acc: i < 3, body, [0, True])
    assert _run(ok)


def test_in_place_kernels_leave_other_consumers_alone():
    z = af.matmul(af.constant(A), af.constant(B))  # large: the in-place paths apply
    bias = af.constant(np.linspace(-5, 5, 96, dtype=np.float32))
    outs = _run(
        [
            z,
            af.nn.relu(z),
            z + bias,
            af.nn.bias_add(z, bias),
            z * 2.0,
            af.nn.relu(af.matmul(af.constant(A), af.constant(B))),  # exclusive: in place
            af.matmul(af.constant(A), af.constant(B)) - bias,
        ]
    )
    want = A @ B
    np.testing.assert_allclose(outs[0], want, rtol=1e-6)
    np.testing.assert_allclose(outs[1], np.maximum(want, 0), rtol=1e-6)
    bias_v = np.linspace(-5, 5, 96, dtype=np.float32)
    np.testing.assert_allclose(outs[2], want + bias_v, rtol=1e-6)
    np.testing.assert_allclose(outs[3], want + bias_v, rtol=1e-6)
    np.testing.assert_allclose(outs[4], want * 2, rtol=1e-6)
    np.testing.assert_allclose(outs[5], np.maximum(want, 0), rtol=1e-6)
    np.testing.assert_allclose(outs[6], want - bias_v, rtol=1e-6)


def test_relu_grad_and_gradient_descent_with_the_gradient_fetched():
    w = af.Variable(B)
    x = af.constant(A)
    h = af.nn.relu(af.matmul(x, w))
    loss = af.reduce_sum(h * h)
    (g,) = af.gradients(loss, [w])
    train = af.train.GradientDescentOptimizer(0.01).apply_gradients([(g, w)])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        g_val, _ = s.run([g, train])  # the gradient is fetched: it must not be scaled
        w_after = s.run(w)
    hv = np.maximum(A @ B, 0)
    g_want = A.T @ (2 * hv * (hv > 0))
    np.testing.assert_allclose(g_val, g_want, rtol=1e-4)
    np.testing.assert_allclose(w_after, B - 0.01 * g_val, rtol=1e-5, atol=1e-6)


def test_gradient_descent_scratch_path_matches_the_plain_update():
    w = af.Variable(B)
    g = af.matmul(af.constant(A.T), af.constant(A)) @ af.constant(B) / 100.0  # exclusive
    train = af.train.GradientDescentOptimizer(0.5).apply_gradients([(g, w)])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(train)
        got = s.run(w)
    # Against float64: float32 products differ from it by ~1e-4 here (|g| ~ 7, cancelling
    # against B), and by as much between BLAS thread counts, which the CPU budget picks.
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    g_val = (a64.T @ a64) @ b64 / 100.0
    np.testing.assert_allclose(got, b64 - 0.5 * g_val, rtol=1e-5, atol=2e-4)


def test_bias_add_forwards_an_exclusive_input_and_only_that(monkeypatch):
    seen = []
    real = kernel_api.KernelContext.may_forward

    def recording(ctx, k, x):
        ok = real(ctx, k, x)
        if ctx.op.type in ("BiasAdd", "_FusedBiasAddRelu"):  # (the pair fused by a pass)
            seen.append(ok)
        return ok

    monkeypatch.setattr(kernel_api.KernelContext, "may_forward", recording)
    # BiasAdd's own kernel: the element-wise fusion would take the `* 2.0` and BiasAdd.
    passes = [r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    z = af.matmul(af.constant(A), af.constant(B)) * 2.0
    bias = af.constant(np.linspace(-5, 5, 96, dtype=np.float32))
    fused = af.nn.relu(af.nn.bias_add(af.matmul(af.constant(A), af.constant(B)) * 2.0, bias))
    got = _run([af.nn.bias_add(z, bias), fused])
    assert seen == [True, True]  # both inputs were held by nothing else
    want = 2 * (A @ B) + np.linspace(-5, 5, 96, dtype=np.float32)
    np.testing.assert_allclose(got[0], want, rtol=1e-5)
    np.testing.assert_allclose(got[1], np.maximum(want, 0), rtol=1e-5)
    seen.clear()
    got_z, got_b = _run([z, af.nn.bias_add(z, bias)])  # z is fetched too
    assert seen == [False]
    np.testing.assert_allclose(got_z, 2 * (A @ B), rtol=1e-5)


# -- the plan's decisions, case by case (donation.decide) ----------------------------------
# Each case pairs the probe's answer with what a wrong donation would corrupt: an in-place
# Mul (large enough for its in-place path) writes 2*z into z if it may take z over.


def test_two_consumers_neither_takes_the_value():
    z = af.matmul(af.constant(A), af.constant(B))
    p1, p2 = _probe_of(z), _probe_of(z)
    assert _run([p1, p2]) == [False, False]
    doubled, plus = _run([z * 2.0, z + 1.0])  # each reads z as it was
    np.testing.assert_allclose(doubled, 2 * (A @ B), rtol=1e-6)
    np.testing.assert_allclose(plus, A @ B + 1, rtol=1e-6)


def test_a_consumer_behind_identities_counts():
    z = af.matmul(af.constant(A), af.constant(B))
    assert _run(_probe_of(af.identity(af.identity(z))))  # one consumer, past two Identities
    assert not _run([_probe_of(af.identity(z)), af.identity(z)])[0]
    got, z_val = _run([af.identity(z) * 2.0, af.identity(z)])
    np.testing.assert_allclose(z_val, A @ B, rtol=1e-6)
    np.testing.assert_allclose(got, 2 * (A @ B), rtol=1e-6)


def test_a_fetched_value_is_not_taken_over():
    z = af.matmul(af.constant(A), af.constant(B))
    assert not _run([_probe_of(z), z])[0]
    z_val, doubled = _run([z, z * 2.0])
    np.testing.assert_allclose(z_val, A @ B, rtol=1e-6)
    np.testing.assert_allclose(doubled, 2 * (A @ B), rtol=1e-6)


def test_a_fed_value_is_not_taken_over():
    x = af.placeholder(af.float32, [64, 96])
    fed = (A @ B).astype(np.float32)
    keep = fed.copy()
    assert not _run(_probe_of(af.identity(x)), {x: fed})
    np.testing.assert_allclose(_run(x * 2.0, {x: fed}), 2 * keep, rtol=1e-6)
    np.testing.assert_array_equal(fed, keep)  # the caller's array is untouched


def test_a_variable_read_is_not_taken_over():
    v = af.Variable((A @ B).astype(np.float32))
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        assert not s.run(_probe_of(v.read_value()))
        assert not s.run(_probe_of(af.identity(v)))
        np.testing.assert_allclose(s.run(v * 2.0), 2 * (A @ B), rtol=1e-6)
        np.testing.assert_allclose(s.run(v), A @ B, rtol=1e-6)


def test_an_enqueued_value_is_not_taken_over_when_dequeued():
    # What a queue hands back is an object it stored, never trusted as new in the step
    # (stateful producer); the values enqueued were fetched or fed by the caller too.
    q = af.FIFOQueue(4, [af.float32], shapes=[[64, 96]])
    z = af.matmul(af.constant(A), af.constant(B))
    x = af.placeholder(af.float32, [64, 96])
    fed = (A @ B).astype(np.float32) + 1
    keep = fed.copy()
    with af.Session() as s:
        z_val, _ = s.run([z, q.enqueue([z])])
        s.run(q.enqueue([x]), {x: fed})
        out = q.dequeue()
        assert not s.run(_probe_of(out))
        s.run(q.enqueue([z]))
        first = s.run(out * 2.0)
        second = s.run(out * 2.0)
    np.testing.assert_allclose(z_val, A @ B, rtol=1e-6)
    np.testing.assert_allclose(first, 2 * keep, rtol=1e-6)
    np.testing.assert_array_equal(fed, keep)
    np.testing.assert_allclose(second, 2 * (A @ B), rtol=1e-6)


def test_a_loop_constant_is_not_taken_over_by_an_iteration():
    # z enters the loop as a constant: every iteration reads that same object.
    z = af.matmul(af.constant(A), af.constant(B))

    def body(i, acc):
        return i + 1, acc + af.reduce_sum(z * 2.0)

    _, total = while_loop(lambda i, acc: i < 3, body, [0, 0.0])
    probe_ok = while_loop(
        lambda i, ok: i < 2,
        lambda i, ok: (i + 1, af.logical_and(ok, af.logical_not(_probe_of(z)))),
        [0, True],
    )[1]
    assert _run(probe_ok)
    assert _run(total) == pytest.approx(3 * 2 * float((A @ B).sum()), rel=1e-4)


def test_values_made_inside_a_loop_are_still_taken_over():
    def body(i, acc):
        z = af.matmul(af.constant(A), af.constant(B))
        return i + 1, af.logical_and(acc, _probe_of(z))

    assert _run(while_loop(lambda i, acc: i < 3, body, [0, True])[1])


def test_a_value_used_in_a_cond_and_after_it_is_not_taken_over():
    z = af.matmul(af.constant(A), af.constant(B))
    pred = af.placeholder(af.bool, [])
    out = af.cond(pred, lambda: z * 2.0, lambda: z) + z
    inside = af.cond(pred, lambda: _probe_of(af.matmul(af.constant(A), af.constant(B))),
                     lambda: af.constant(True))  # fmt: skip
    assert not _run(af.cond(pred, lambda: _probe_of(z), lambda: af.constant(False)), {pred: True})
    for p, factor in ((True, 3.0), (False, 2.0)):
        got, ok = _run([out, inside], {pred: p})
        assert ok
        np.testing.assert_allclose(got, factor * (A @ B), rtol=1e-6)


_PassThrough = register_op(
    "TestPassThrough",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@_PassThrough.kernel("CPU")
async def _pass_through(ctx, x):
    return x  # the input object itself: only correct once declared


def test_test_mode_catches_a_kernel_returning_its_input_undeclared(monkeypatch):
    z = af.matmul(af.constant(A), af.constant(B))
    y = ops.apply_op("TestPassThrough", [z]).outputs[0]
    with pytest.raises(af.errors.UnknownError, match="aliases_inputs"):
        _run([z, y * 2.0])
    monkeypatch.setitem(donation._ALIASES, "TestPassThrough", None)
    z_val, doubled = _run([z, y * 2.0])  # declared: y is z, which is fetched
    np.testing.assert_allclose(z_val, A @ B, rtol=1e-6)
    np.testing.assert_allclose(doubled, 2 * (A @ B), rtol=1e-6)


# -- copy-on-write of variables (state_ops.VarRef's leases) --------------------------------


def _copies(monkeypatch):
    copies = []
    real = state_ops.VarRef._exclusive

    def counting(ref):
        ok = real(ref)
        if not ok:
            copies.append(ref.name)
        return ok

    monkeypatch.setattr(state_ops.VarRef, "_exclusive", counting)
    return copies


def test_updates_copy_only_while_a_read_value_is_held(monkeypatch):
    copies = _copies(monkeypatch)
    v = af.Variable(B, name="v")
    inc = af.assign_add(v, np.ones_like(B))
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(inc)
        s.run(inc)
        assert copies == []  # nothing read v: in place
        np.testing.assert_allclose(s.run(v), B + 2, rtol=1e-6)
    ref = state_ops.VarRef(af.float32, name="r")
    ref.assign(B, validate_shape=True)
    row = ref.read()[3]  # a view of a read holds its lease
    ref.apply_ufunc(np.add, np.ones_like(B))
    assert copies == ["r"]
    np.testing.assert_array_equal(row, B[3])
    del row
    ref.apply_ufunc(np.add, np.ones_like(B))
    assert copies == ["r"]  # nothing holds a read any more: in place
    np.testing.assert_allclose(ref.read(), B + 2, rtol=1e-6)


def test_an_enqueued_variable_value_keeps_its_value(monkeypatch):
    v = af.Variable(B)
    q = af.FIFOQueue(2, [af.float32], shapes=[[80, 96]])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(q.enqueue([v.read_value()]))
        s.run(af.assign_add(v, np.ones_like(B)))
        np.testing.assert_allclose(s.run(q.dequeue()), B)
        np.testing.assert_allclose(s.run(v), B + 1)


async def test_a_parked_step_keeps_the_value_it_read_while_another_updates(probes):
    from _testing_ops import wait_op

    w = probes.waiter()
    v = af.Variable(B)
    total = af.reduce_sum(wait_op(v.read_value(), w))
    inc = af.assign_add(v, np.ones_like(B))
    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        task = asyncio.create_task(s.arun(total))
        await w.started()
        await s.arun(inc)  # the parked step holds v's buffer: this update copies
        w.release()
        # B sums to 0 exactly; TF's order of float32 additions leaves ~1e-5 of rounding,
        # far from the 7,680 that B + 1 would sum to
        assert await task == pytest.approx(float(B.astype(np.float64).sum()), abs=1e-3)
        np.testing.assert_allclose(await s.arun(v), B + 1)


def test_training_steps_pay_no_copy(monkeypatch):
    copies = _copies(monkeypatch)
    w1 = af.Variable(B[:, :64] * 0.1, name="w1")
    w2 = af.Variable(np.linspace(-1, 1, 64 * 10, dtype=np.float32).reshape(64, 10), name="w2")
    x = af.placeholder(af.float32, [None, 80])
    logits = af.matmul(af.nn.relu(af.matmul(x, w1)), w2)
    loss = af.reduce_mean(af.square(logits))
    train = af.train.GradientDescentOptimizer(0.01).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        for _ in range(3):
            s.run(train, {x: A})
    assert copies == []


def test_what_a_stateless_py_func_returns_is_not_taken_over():
    kept = (A @ B).astype(np.float32)  # the user's array, handed back by the function
    (y,) = af.py_func(lambda: kept, [], [af.float32], stateful=False)
    y.set_shape([64, 96])
    z = af.matmul(af.constant(A), af.constant(B))
    (same,) = af.py_func(lambda x: x, [z], [af.float32], stateful=False)
    same.set_shape([64, 96])
    first, twice = _run([y * 2.0, same * 2.0])
    np.testing.assert_allclose(first, 2 * (A @ B), rtol=1e-6)
    np.testing.assert_allclose(twice, 2 * (A @ B), rtol=1e-6)
    np.testing.assert_allclose(kept, A @ B, rtol=1e-6)


def test_a_cast_to_its_own_type_passes_its_input_on():
    z = af.matmul(af.constant(A), af.constant(B))
    same = ops.apply_op("Cast", [z], {"SrcT": af.float32, "DstT": af.float32}).outputs[0]
    assert _run(_probe_of(same))  # z's only consumer is the Cast: still new
    z_val, doubled = _run([z, same * 2.0])
    np.testing.assert_allclose(z_val, A @ B, rtol=1e-6)
    np.testing.assert_allclose(doubled, 2 * (A @ B), rtol=1e-6)


def test_random_values_are_new_and_kernels_that_keep_inputs_get_none(monkeypatch):
    r = af.random_uniform([64, 96])
    assert _run(_probe_of(r))  # stateful, but declared fresh_outputs
    monkeypatch.setattr(donation, "_RETAINS", donation._RETAINS | {"TestForwardableProbe"})
    assert not _run(_probe_of(af.matmul(af.constant(A), af.constant(B))))


_Cached = register_op(
    "TestCachedOutput",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)
_CACHE: dict = {}


@_Cached.kernel("CPU")
async def _cached(ctx, x):
    if "v" not in _CACHE:
        _CACHE["v"] = np.array(x, copy=True)  # writable, handed out again each run
    return _CACHE["v"]


def test_test_mode_catches_a_kernel_returning_a_cached_array():
    z = af.matmul(af.constant(A), af.constant(B))
    y = ops.apply_op("TestCachedOutput", [z]).outputs[0]
    with af.Session() as s:
        s.run(y * 2.0)
        with pytest.raises(af.errors.UnknownError, match="returned before"):  # (a new plan)
            s.run(y * 2.0)
    _CACHE.clear()
