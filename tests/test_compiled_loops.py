"""Compiled while loops (`frames.LoopProgram`) against the general frame executor.

Every program here runs twice, once with loops compiled and once on the general
machinery (`lowering._NO_COMPILED_LOOPS`), and must give the same values; the tests
also check which loops were compiled, so that the fast path cannot silently fall
back (or be taken where it must not).
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, frames, lowering
from asyncflow.ops.control_flow_ops import while_loop


@pytest.fixture
def runs(monkeypatch):
    """Counts loops run compiled: `runs[0]`."""
    count = [0]
    original = frames.LoopProgram.run

    async def counting(self, step, enter_values):
        count[0] += 1
        return await original(self, step, enter_values)

    monkeypatch.setattr(frames.LoopProgram, "run", counting)
    return count


def _both(build, monkeypatch, feed=None):
    """Results of `build()`'s fetches with compiled loops and without."""
    out = []
    for off in (False, True):
        monkeypatch.setattr(lowering, "_NO_COMPILED_LOOPS", off)
        with af.Graph().as_default():
            af.set_random_seed(7)
            fetches = build()
            with af.Session() as s:
                s.run(af.global_variables_initializer())
                out.append(s.run(fetches, feed))
    return out


def _assert_same(a, b):
    fa, fb = af.nest.flatten(a), af.nest.flatten(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_counter_loop_is_compiled_and_matches(monkeypatch, runs):
    def build():
        return while_loop(lambda i: i < 1000, lambda i: i + 1, [af.constant(0)])

    got = _both(build, monkeypatch)
    assert got == [1000, 1000]
    assert runs[0] == 1  # compiled once, then not at all with compilation off


def test_zero_iterations_and_swapped_loop_vars(monkeypatch, runs):
    def build():
        none = while_loop(lambda i: i < 0, lambda i: i + 1, [af.constant(5)])
        # Fibonacci: the next values swap and combine the loop variables.
        fib = while_loop(
            lambda n, a, b: n < 30, lambda n, a, b: (n + 1, b, a + b), [0, af.constant(0), 1]
        )
        return none, fib

    a, b = _both(build, monkeypatch)
    _assert_same(a, b)
    assert a[0] == 5 and list(a[1]) == [30, 832040, 1346269]
    assert runs[0] == 2


def test_invariants_max_iterations_and_merge_free_body(monkeypatch, runs):
    def build():
        x = af.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        w = af.constant(np.full((3, 3), 0.5, np.float32))
        _, h = while_loop(
            lambda i, h: i < 100,
            lambda i, h: (i + 1, af.tanh(af.matmul(h, w) + x)),
            (0, af.zeros([2, 3])),  # a list would be a TypeError in TF (tuple body)
            maximum_iterations=7,
        )
        return h

    a, b = _both(build, monkeypatch)
    want = np.zeros((2, 3), np.float32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(7):
        want = np.tanh(want @ np.full((3, 3), 0.5, np.float32) + x)
    np.testing.assert_allclose(a, want, rtol=1e-6)
    _assert_same(a, b)
    assert runs[0] == 1


def test_nested_loops_compile_the_inner_one(monkeypatch, runs):
    def build():
        def outer_body(i, acc):
            _, inner = while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), [0, 0])
            return i + 1, acc + inner

        return while_loop(lambda i, acc: i < 6, outer_body, [0, 0])

    a, b = _both(build, monkeypatch)
    assert list(a) == list(b) == [6, sum(j for i in range(6) for j in range(i))]
    assert runs[0] == 6  # the inner loop, once per outer iteration; the outer one is not


def test_gradients_through_compiled_loops_match(monkeypatch, runs):
    def build():
        w = af.Variable(np.linspace(-0.5, 0.5, 9).reshape(3, 3).astype(np.float32))
        x = af.constant(np.linspace(0, 1, 6).reshape(2, 3).astype(np.float32))
        _, h = while_loop(
            lambda i, h: i < 5, lambda i, h: (i + 1, af.tanh(af.matmul(h, w) + x)), [0, x]
        )
        loss = af.reduce_sum(h * h)
        return loss, af.gradients(loss, [w, x])

    a, b = _both(build, monkeypatch)
    _assert_same(a, b)
    assert runs[0] == 2  # the forward loop and the gradient loop


def test_dynamic_rnn_and_tensor_array_loops(monkeypatch, runs):
    def build():
        inputs = af.constant(np.linspace(-1, 1, 2 * 5 * 3).reshape(2, 5, 3).astype(np.float32))
        cell = af.nn.rnn_cell.BasicLSTMCell(4)
        out, state = af.nn.dynamic_rnn(cell, inputs, sequence_length=[5, 3], dtype=af.float32)
        grads = af.gradients(af.reduce_sum(out), af.trainable_variables())
        ta = af.TensorArray(af.float32, size=4)
        _, ta = while_loop(
            lambda i, ta: i < 4,
            lambda i, ta: (i + 1, ta.write(i, af.cast(i, af.float32) * 2.0)),
            [0, ta],
        )
        return out, state, grads, ta.stack()

    a, b = _both(build, monkeypatch)
    _assert_same(a, b)
    np.testing.assert_array_equal(a[3], [0.0, 2.0, 4.0, 6.0])
    assert runs[0] >= 3


def test_stateful_body_runs_once_per_iteration(monkeypatch, runs):
    def build():
        v = af.Variable(0, dtype=af.int32)

        def body(i):
            with af.control_dependencies([af.assign_add(v, i)]):
                return i + 1

        i = while_loop(lambda i: i < 10, body, [0])
        with af.control_dependencies([i]):
            return af.identity(v.read_value())

    assert _both(build, monkeypatch) == [45, 45]
    assert runs[0] == 1


def test_cond_in_body_and_loop_in_untaken_branch(monkeypatch, runs):
    def build():
        x = af.placeholder(af.int32, [])
        odd = while_loop(
            lambda i, n: i < 10,
            lambda i, n: (i + 1, af.cond(i % 2 > 0, lambda: n + 1, lambda: n)),
            [0, 0],
        )[1]
        picked = af.cond(
            x > 0,
            lambda: while_loop(lambda i: i < x, lambda i: i + 2, [0]),
            lambda: af.constant(-1),
        )
        return x, [odd, picked]

    for feed, want in [(3, 4), (-1, -1)]:
        runs[0] = 0
        got = []
        for off in (False, True):
            monkeypatch.setattr(lowering, "_NO_COMPILED_LOOPS", off)
            with af.Graph().as_default():
                x, fetches = build()
                with af.Session() as s:
                    got.append(s.run(fetches, {x: feed}))
        assert got[0] == got[1] == [5, want]
        # The loop with a cond inside stays general; the one inside the cond is
        # compiled, and when its branch is not taken it is dead and never runs.
        assert runs[0] == (1 if feed > 0 else 0)


def test_error_in_compiled_body_names_the_op_and_session_survives(runs):
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [])

        def body(i, s):
            checked = af.check_numerics(af.log(s - 3.0), "bad log", name="the_check")
            with af.control_dependencies([checked]):  # log(0) in the fourth iteration
                return i + 1, s - 1.0

        out = while_loop(lambda i, s: i < 10, body, [0, x])
        with af.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="the_check"):
                sess.run(out, {x: 6.0})
            assert sess.run(out, {x: 100.0})[0] == 10
    assert runs[0] == 2


def test_async_kernels_keep_the_general_executor(runs):
    with af.Graph().as_default():
        q = af.FIFOQueue(10, af.int32, shapes=[[]])
        fill = q.enqueue_many([[1, 2, 3]])
        total = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + q.dequeue()), [0, 0])
        with af.Session() as sess:
            sess.run(fill)
            assert sess.run(total)[1] == 6
    assert runs[0] == 0


def test_long_compiled_loop_holds_one_iteration(runs):
    with af.Graph().as_default():
        i, s = while_loop(
            lambda i, s: i < 100_000, lambda i, s: (i + 1, s + af.ones([64])), [0, af.zeros([64])]
        )
        with af.Session() as sess:
            got = sess.run(s)
    np.testing.assert_array_equal(got, np.full(64, 100_000, np.float32))
    assert runs[0] == 1


@pytest.mark.parametrize("general", [False, True])
def test_endless_loop_meets_its_deadline(monkeypatch, general):
    monkeypatch.setattr(lowering, "_NO_COMPILED_LOOPS", general)
    with af.Graph().as_default():
        i = while_loop(lambda i: i >= 0, lambda i: i + 1, [af.constant(0)])
        with af.Session() as sess:
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(i, options=af.RunOptions(timeout_in_ms=100))
            assert sess.run(af.constant(3)) == 3  # the session still works


def test_endless_loop_in_arun_is_cancellable():
    import asyncio

    async def main():
        with af.Graph().as_default():
            i = while_loop(lambda i: i >= 0, lambda i: i + 1, [af.constant(0)])
            async with af.Session() as sess:
                task = asyncio.ensure_future(sess.arun(i))
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises((asyncio.CancelledError, errors.CancelledError)):
                    await task
                assert await sess.arun(af.constant(4)) == 4

    asyncio.run(main())
