"""asyncflow.straight_line: a prepared callable runs a small pure plan's kernels in one
fixed order, with the interpreter's results and errors; and the fused bias-gemm's
one-call path for products too small to defer."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import matmul_ops

pytestmark = pytest.mark.usefixtures("graph")


def _program(s, fetches, feeds):
    mapper, feed_tensors, _ = s._feeds_and_fetches(fetches, dict(feeds))
    return s._straight_line(s._master.plan(feed_tensors, mapper.elements))


def _mlp(rng):
    w1 = rng.standard_normal((6, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 6], name="x")
    v = [af.Variable(w, name=n) for w, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    h = af.nn.relu(af.matmul(x, v[0]) + v[1])
    probs = af.nn.softmax(af.matmul(h, v[2]) + v[3], name="probs")

    def reference(xv):
        hv = np.maximum(xv.astype(np.float64) @ w1 + b1, 0)
        logits = hv @ w2 + b2
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return x, probs, reference


async def test_a_pure_graph_runs_straight_through_with_the_interpreters_results():
    rng = np.random.default_rng(0)
    x, probs, reference = _mlp(rng)
    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        f = s.make_async_callable({"p": probs, "x": x}, [x])
        for rows in (1, 5):
            xv = rng.standard_normal((rows, 6)).astype(np.float32)
            got = await f(xv)
            assert _program(s, {"p": probs, "x": x}, {x: xv}) is not None
            want = await s.arun({"p": probs, "x": x}, {x: xv})  # the interpreter
            np.testing.assert_array_equal(got["p"], want["p"])
            np.testing.assert_allclose(got["p"], reference(xv), rtol=1e-5, atol=1e-6)
            got["x"][0, 0] = 99.0  # a fetched feed is the caller's copy
            assert xv[0, 0] != 99.0


async def test_outputs_of_a_multi_output_op_and_variables_are_fetched():
    v = af.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
    x = af.placeholder(af.float32, [2, 3])
    parts = af.split(x + v, 3, axis=1)  # one op, three outputs
    fetches = [parts[2], parts[0], v, af.identity(v)]
    async with af.Session() as s:
        await s.arun(v.initializer)
        f = s.make_async_callable(fetches, [x])
        xv = np.ones((2, 3), np.float32)
        got = await f(xv)
        assert _program(s, fetches, {x: xv}) is not None
        want = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(got[0], (want + 1)[:, 2:])
        np.testing.assert_array_equal(got[1], (want + 1)[:, :1])
        np.testing.assert_array_equal(got[2], want)
        np.testing.assert_array_equal(got[3], want)
        await s.arun(v.assign(v * 2))  # a later step reads the variable anew
        np.testing.assert_array_equal((await f(xv))[3], want * 2)


async def test_a_graph_with_an_effect_takes_the_interpreter():
    v = af.Variable(0.0, name="counter")
    x = af.placeholder(af.float32, [])
    bump = af.assign_add(v, x)
    async with af.Session() as s:
        await s.arun(v.initializer)
        f = s.make_async_callable(bump, [x])
        for _ in range(3):
            await f(1.0)
        assert _program(s, bump, {x: 1.0}) is None
        assert await s.arun(v) == 3.0


async def test_a_failing_kernel_raises_what_the_interpreter_raises():
    x = af.placeholder(af.float32, [None, None])
    w = af.constant(np.ones((4, 2), np.float32))
    y = af.matmul(x, w, name="product")
    async with af.Session() as s:
        f = s.make_async_callable(y, [x])
        bad = np.ones((3, 5), np.float32)
        with pytest.raises(errors.InvalidArgumentError) as got:
            await f(bad)
        with pytest.raises(errors.InvalidArgumentError) as want:
            await s.arun(y, {x: bad})
        assert got.value.op is want.value.op and got.value.op.name == "product"
        assert str(got.value) == str(want.value)
        assert _program(s, y, {x: bad}) is not None
        np.testing.assert_array_equal(await f(np.ones((3, 4), np.float32)), np.full((3, 2), 4.0))


async def test_an_uninitialized_variable_fails_as_in_the_interpreter():
    v = af.Variable(np.ones(3, np.float32), name="never_set")
    x = af.placeholder(af.float32, [3])
    y = x * v
    async with af.Session() as s:
        f = s.make_async_callable(y, [x])
        with pytest.raises(errors.FailedPreconditionError, match="never_set"):
            await f(np.ones(3, np.float32))


# -- the fused bias-gemm's small products --------------------------------------------------


@pytest.fixture
def small_calls(monkeypatch):
    calls = [0]
    real = matmul_ops._small_fused

    def counting(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(matmul_ops, "_small_fused", counting)
    return calls


@pytest.mark.parametrize("rows", [1, 3])
def test_small_products_fold_with_their_bias_in_one_call(small_calls, rows):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((rows, 5)).astype(np.float32)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    full = rng.standard_normal((rows, 7)).astype(np.float32)
    with af.device("/cpu:0"):  # (the fusion is the CPU's)
        x = af.placeholder(af.float32, [None, 5])
        wt, bt = af.constant(w), af.constant(b)
        outs = [
            af.matmul(x, wt) + bt,
            bt + af.matmul(x, wt),
            af.nn.bias_add(af.matmul(x, wt), bt),
            af.matmul(x, wt) + af.reshape(bt, [1, 7]),
            af.matmul(x, wt) + af.constant(full),
            af.matmul(af.transpose(wt), x, transpose_b=True) + af.constant(full.T),
            af.nn.relu(af.matmul(x, wt) + bt),
        ]
    with af.Session() as s:
        got = s.run(outs, {x: a})
    assert small_calls[0] == len(outs)
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    want = a64 @ w64 + b
    for g in got[:4]:
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[4], a64 @ w64 + full, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[5], (a64 @ w64 + full).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[6], np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_a_small_product_with_a_bias_that_grows_it_takes_the_plain_kernels(small_calls):
    x = af.placeholder(af.float32, [None, 2])
    w = af.constant(np.ones((2, 1), np.float32))
    b = af.placeholder(af.float32, [None])
    y = af.matmul(x, w) + b  # [3, 1] + [4]: broadcasts to [3, 4]
    with af.Session() as s:
        got = s.run(y, {x: np.ones((3, 2), np.float32), b: np.arange(4, dtype=np.float32)})
        np.testing.assert_array_equal(got, np.tile(np.arange(4, dtype=np.float32) + 2, (3, 1)))
        z = af.matmul(x, af.constant(np.ones((2, 2), np.float32))) + b  # [3, 2] + [3]
        with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
            s.run(z, {x: np.ones((3, 2), np.float32), b: np.ones(3, np.float32)})
    assert small_calls[0] == 0


# -- kernels' inline forms (kernel_api) -----------------------------------------------------


async def test_inline_forms_take_over_once_the_device_settled_their_kinds(monkeypatch):
    """After a kind's first timed runs, the products, softmax and variable lookups run
    through their inline forms (no kernel coroutine); every RETIME_EVERY-th call of a
    kind goes through the kernel and `compute` to be timed; results never change."""
    from asyncflow.devices import cpu

    inline_runs = []
    real = cpu.CPUDevice.run_inline

    def counting(self, fn, args):
        out = real(self, fn, args)
        inline_runs.append(out is not cpu.NOT_INLINE)
        return out

    monkeypatch.setattr(cpu.CPUDevice, "run_inline", counting)
    # (each call through its inline form: no direct form, tested below)
    monkeypatch.setattr(cpu.CPUDevice, "settled_seconds", lambda self, keys: None)
    # (cheap kinds whatever this machine's noise: a timed run past 0.25 ms, a scheduler
    # slice lost on a shared 2-core machine, left a kind unsettled now and then)
    monkeypatch.setattr(cpu, "INLINE_S", 1.0)
    rng = np.random.default_rng(1)
    x, probs, reference = _mlp(rng)
    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        f = s.make_async_callable(probs, [x])
        xv = rng.standard_normal((2, 6)).astype(np.float32)
        want = await s.arun(probs, {x: xv})  # the interpreter
        program = _program(s, probs, {x: xv})
        kinds = {program.plan.nodes[n[0]].type for n in program.nodes if n[10] is not None}
        assert kinds == {"VariableV2", "_FusedMatMul", "Softmax"}
        for _ in range(3 * cpu.RETIME_EVERY):
            np.testing.assert_array_equal(await f(xv), want)
    assert inline_runs.count(True) > 2 * 3 * (cpu.RETIME_EVERY - 2)  # three kinds, most calls
    assert inline_runs.count(False) >= 3 * 2  # first (unmeasured) and re-timed calls


async def test_inline_forms_leave_what_they_do_not_handle_to_the_kernel(monkeypatch):
    from asyncflow.devices import cpu
    from asyncflow.devices.base import NOT_INLINE

    monkeypatch.setattr(cpu, "INLINE_S", 1.0)  # (a settled cheap kind, as above)

    logits = af.placeholder(af.float32, None, name="logits")
    probs = af.nn.softmax(logits)
    async with af.Session() as s:
        f = s.make_async_callable(probs, [logits])
        z = np.array([[1.0, 2.0, 3.0]], np.float32)
        for _ in range(4):  # (settles the kind)
            await f(z)
        (node,) = [n for n in _program(s, probs, {logits: z}).nodes if n[10] is not None]
        inline = node[10]
        e = np.exp(z - z.max())
        np.testing.assert_allclose(inline(z), e / e.sum(), rtol=1e-6)
        assert inline(np.float32(1.0)) is NOT_INLINE  # rank 0: the kernel's error
        assert inline(np.zeros((0, 3), np.float32)) is NOT_INLINE
        assert inline([[1.0, 2.0, 3.0]]) is NOT_INLINE  # not an array
        with pytest.raises(errors.InvalidArgumentError, match="1 dimension"):
            await f(np.float32(1.0))


def _direct_runs(monkeypatch):
    """Counts of the direct form's steps: taken, and left to the Program's path."""
    from asyncflow import straight_line

    runs = {"direct": 0, "program": 0}
    real = straight_line._Direct.run

    def counting(self, feed_values):
        out = real(self, feed_values)
        runs["program" if out is None else "direct"] += 1
        return out

    monkeypatch.setattr(straight_line._Direct, "run", counting)
    return runs


async def test_the_direct_form_runs_the_settled_calls_back_to_back(monkeypatch):
    """Where the device has settled the step's kinds as cheap, a step of the MLP is its
    calls back to back (no kernel, no inline form's run_inline), every RETIME_EVERY-th
    step's calls timed for the device; the results are the interpreter's, per feed shape."""
    from asyncflow.devices import cpu

    asked = []
    monkeypatch.setattr(
        cpu.CPUDevice, "settled_seconds", lambda self, keys: asked.append(keys) or 0.0
    )
    inline_calls = []
    real = cpu.CPUDevice.run_inline
    monkeypatch.setattr(
        cpu.CPUDevice,
        "run_inline",
        lambda self, fn, args: inline_calls.append(fn) or real(self, fn, args),
    )
    observed = []
    monkeypatch.setattr(
        cpu.CPUDevice, "observe_kinds", lambda self, timings: observed.extend(timings)
    )
    runs = _direct_runs(monkeypatch)
    rng = np.random.default_rng(2)
    x, probs, reference = _mlp(rng)
    steps = 2 * cpu.RETIME_EVERY
    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        f = s.make_async_callable({"p": probs, "x": x}, [x])
        for rows in (1, 3):
            xv = rng.standard_normal((rows, 6)).astype(np.float32)
            want = await s.arun(probs, {x: xv})  # the interpreter
            for _ in range(steps):
                got = await f(xv)
                np.testing.assert_array_equal(got["p"], want)
                np.testing.assert_allclose(got["p"], reference(xv), rtol=1e-5, atol=1e-6)
            got["x"][0, 0] = 99.0  # a fetched feed is still the caller's copy
            assert xv[0, 0] != 99.0
    assert runs == {"direct": 2 * steps, "program": 0}
    assert not inline_calls
    keys = asked[0]  # the kinds asked about: the two products and the softmax
    assert len(keys) == 3 and {k[0].__name__ for k in keys} == {"_small_fused", "_quiet"}
    # every RETIME_EVERY-th step of each form timed its three calls for the device
    assert len(observed) == 2 * (steps // cpu.RETIME_EVERY) * 3
    assert {key for key, _ in observed} == {k for ks in asked for k in ks}
    assert all(0 < seconds < 1 for _, seconds in observed)


def test_settled_seconds_is_run_inlines_decision_for_all_the_kinds(monkeypatch):
    from asyncflow.devices import cpu

    monkeypatch.setattr(cpu, "_MEASURED", {})
    device = cpu.CPUDevice.__new__(cpu.CPUDevice)
    device._busy = None
    a = np.zeros((2, 3), np.float32)
    k1, k2 = device.kind_key(np.add, (a, a)), device.kind_key(np.multiply, (a, a))
    assert device.settled_seconds((k1, k2)) is None  # never measured
    cpu._MEASURED[k1] = cpu._MEASURED[k2] = 1e-6
    assert device.settled_seconds((k1, k2)) == pytest.approx(2e-6)
    cpu._MEASURED[k2] = cpu.SETTLED_FRACTION * cpu.INLINE_S  # not settled: run_inline declines
    assert device.settled_seconds((k1, k2)) is None
    cpu._MEASURED[k2] = 1e-6
    device._busy = object()  # its worker busy: nothing inline
    assert device.settled_seconds((k1, k2)) is None


async def test_the_direct_form_reads_variables_as_the_interpreter_does(monkeypatch):
    """A fetched variable read is lent (a later assign leaves it alone); a variable that
    changes shape sends the step to the Program's path and the form is built anew."""
    from asyncflow.devices import cpu

    monkeypatch.setattr(cpu.CPUDevice, "settled_seconds", lambda self, keys: 0.0)
    runs = _direct_runs(monkeypatch)
    w = af.Variable(np.array([[1.0, 2.0, 3.0]], np.float32), name="w", validate_shape=False)
    probs = af.nn.softmax(w)

    def softmax(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    async with af.Session() as s:
        await s.arun(w.initializer)
        f = s.make_async_callable([probs, w])  # (w: its read, fetched)
        for _ in range(3):
            p, r = await f()
        assert runs["direct"] >= 2
        np.testing.assert_allclose(p, softmax(np.array([[1.0, 2.0, 3.0]])), rtol=1e-6)
        await s.arun(w.assign(w * 2.0))
        np.testing.assert_array_equal(r, [[1.0, 2.0, 3.0]])  # the earlier read kept its value
        # w becomes 2x2: the direct form built for 1x3 no longer fits
        w2 = np.array([[0.5, 1.0], [3.0, -1.0]], np.float32)
        await s.arun(af.assign(w, w2, validate_shape=False))
        before = dict(runs)
        for _ in range(3):
            p, r = await f()
            np.testing.assert_allclose(p, softmax(w2), rtol=1e-6)
            np.testing.assert_array_equal(r, w2)
        assert runs["program"] > before["program"]  # the first step after the change
        assert runs["direct"] > before["direct"]  # then built anew for the new shape


async def test_the_direct_form_pins_reads_only_its_calls_consume(monkeypatch):
    """A variable read that only the form's calls consume is the buffer itself, pinned
    (no lease, no array made): an update during the step copies, and once the step is
    done the buffer is exclusive again, so the next update writes it in place."""
    from asyncflow.devices import cpu
    from asyncflow.ops import state_ops

    monkeypatch.setattr(cpu.CPUDevice, "settled_seconds", lambda self, keys: 0.0)
    runs = _direct_runs(monkeypatch)
    reads = []
    real_read = state_ops.VarRef.read
    monkeypatch.setattr(
        state_ops.VarRef, "read", lambda self: reads.append(self) or real_read(self)
    )
    rng = np.random.default_rng(3)
    x, probs, reference = _mlp(rng)
    refs = {}
    exclusive_during = []
    real_fused = matmul_ops._small_fused

    def fused(a, b, bias, relu):  # (the first product's call: its weights pinned)
        exclusive_during.append(refs["w1"]._exclusive())
        return real_fused(a, b, bias, relu)

    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        f = s.make_async_callable(probs, [x])
        xv = rng.standard_normal((2, 6)).astype(np.float32)
        want = await s.arun(probs, {x: xv})  # the interpreter
        for _ in range(3):
            await f(xv)
        w1 = [v for v in af.global_variables() if v.op.name == "w1"][0]
        (program,) = [  # (the callable's own: its last plan's Program)
            c.cell_contents[1]
            for c in f.__closure__
            if type(c.cell_contents) is list and len(c.cell_contents) == 2
        ]
        (direct,) = [d for d in program._direct.values() if d is not None]
        for i, n, fn, *_ in direct.nodes:
            if n == 0 and program.plan.nodes[i].name == "w1":
                refs["w1"] = fn()
        monkeypatch.setattr(matmul_ops, "_small_fused", fused)
        reads.clear()
        before = runs["direct"]
        for _ in range(3):
            np.testing.assert_array_equal(await f(xv), want)
        assert runs["direct"] == before + 3
        assert not reads  # all four reads pinned: no lease
        assert exclusive_during and not any(exclusive_during)
        buf = refs["w1"].value
        assert refs["w1"]._exclusive()  # unpinned after each step
        await s.arun(w1.assign_add(np.ones((6, 8), np.float32)))
        assert refs["w1"].value is buf  # updated in place
        got = await f(xv)
        assert not np.array_equal(got, want)


async def test_the_direct_form_is_quiet_about_overflow(monkeypatch):
    """Its calls run in one ignoring error state, as the interpreter's kernels do (TF
    yields inf silently), and the caller's own error state is left as it was."""
    import warnings

    from asyncflow.devices import cpu

    monkeypatch.setattr(cpu.CPUDevice, "settled_seconds", lambda self, keys: 0.0)
    runs = _direct_runs(monkeypatch)
    x = af.placeholder(af.float32, [None, 2], name="x")
    w = af.Variable(np.full((2, 2), 3e38, np.float32), name="w")
    b = af.Variable(np.full(2, 3e38, np.float32), name="b")
    y = af.nn.relu(af.matmul(x, w) + b)
    async with af.Session() as s:
        await s.arun(af.global_variables_initializer())
        f = s.make_async_callable(y, [x])
        xv = np.ones((1, 2), np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(over="raise"):
                for _ in range(3):
                    np.testing.assert_array_equal(await f(xv), np.full((1, 2), np.inf))
                assert np.geterr()["over"] == "raise"
        assert runs["direct"] >= 2


async def test_a_failing_call_of_the_direct_form_is_worded_for_its_node(monkeypatch):
    from asyncflow.devices import cpu
    from asyncflow.ops import nn_ops

    monkeypatch.setattr(cpu.CPUDevice, "settled_seconds", lambda self, keys: 0.0)
    logits = af.placeholder(af.float32, [None, 3], name="logits")
    probs = af.nn.softmax(logits, name="probs")
    async with af.Session() as s:
        f = s.make_async_callable(probs, [logits])
        z = np.array([[1.0, 2.0, 3.0]], np.float32)
        await f(z)

        def broken(xp, x):
            raise ValueError("boom")

        monkeypatch.setattr(nn_ops, "_quiet", lambda xp, fn, *a: broken(*a))
        with pytest.raises(errors.OpError) as info:
            await f(z)
        assert info.value.op is not None and info.value.op.name == "probs"
