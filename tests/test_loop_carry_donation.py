"""A compiled loop gives a loop variable's value to its one reader from the second
iteration on (asyncflow/frames.py `_carry_takers`): the kernel may write into the buffer
the iteration before made instead of allocating.  Every program runs compiled and on
the general frame executor, with the same values; what each run's reader was allowed to
take is read from `KernelContext.may_forward`, and values the loop must not touch (a
fed array, a variable, a TensorArray's elements) are checked after the run."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import asyncflow as af
from asyncflow import frames, kernel_api, lowering
from asyncflow.ops import fused_elementwise
from asyncflow.ops.control_flow_ops import while_loop

_N = 4  # iterations


@pytest.fixture
def taken(monkeypatch):
    """{(node name, input position): [whether it might be taken over, per ask]}.

    A fused program whose compiled loop has run asks no more (its loop writes new
    arrays: ops/fused_elementwise.py `_LEAN`); here every call asks, so that what the
    loop would allow is seen in every iteration whether or not numba has compiled it."""
    monkeypatch.setattr(fused_elementwise, "_LEAN", False)
    seen: dict = {}
    real = kernel_api.KernelContext.may_forward

    def spy(self, k, x):
        ok = real(self, k, x)
        seen.setdefault((self.node_name, k), []).append(ok)
        return ok

    monkeypatch.setattr(kernel_api.KernelContext, "may_forward", spy)
    return seen


def _run(build, monkeypatch, compiled: bool):
    monkeypatch.setattr(lowering, "_NO_COMPILED_LOOPS", not compiled)
    with af.Graph().as_default():
        fetches, feed, after = build()
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = s.run(fetches, feed)
            return got, (s.run(after) if after is not None else None)


def _both(build, monkeypatch, taken):
    """(compiled results, reads after the run, what each node's input 0 might give)
    after checking the general executor gives the same."""
    got, after = _run(build, monkeypatch, True)
    seen = dict(taken)
    taken.clear()
    plain, plain_after = _run(build, monkeypatch, False)
    for a, b in zip(af.nest.flatten([got, after]), af.nest.flatten([plain, plain_after])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return got, after, seen


_X = np.random.default_rng(3).standard_normal((64, 48)).astype(np.float32)
_A = np.random.default_rng(4).standard_normal((64, 48)).astype(np.float32)


def _accumulation(start_kind: str, read_twice: bool = False):
    def build():
        x = af.constant(_X)
        a0 = af.placeholder(af.float32, [64, 48])
        feed = {a0: _A.copy()}
        after = None
        if start_kind == "fed":
            start = a0
        elif start_kind == "variable":
            v = af.Variable(_A)
            start, after = v, v
        else:
            start = a0 * 2.0

        def body(i, acc, s):
            step = af.tanh(x * af.cast(i, af.float32))
            if read_twice:
                s = s + af.reduce_sum(acc)
            return i + 1, af.add(acc, step, name="accumulate"), s

        out = while_loop(lambda i, *_: i < _N, body, [0, start, af.constant(0.0)])
        return [out[1], out[2]], feed, after

    return build


def _want(start_kind):
    acc = _A.astype(np.float64) * (2.0 if start_kind == "own" else 1.0)
    for i in range(_N):
        acc = acc + np.tanh(_X.astype(np.float64) * i)
    return acc


@pytest.mark.parametrize("start_kind", ["own", "fed", "variable"])
def test_an_accumulator_is_taken_from_the_second_iteration(monkeypatch, taken, start_kind):
    (acc, _s), after, seen = _both(_accumulation(start_kind), monkeypatch, taken)
    np.testing.assert_allclose(acc, _want(start_kind), rtol=1e-5, atol=1e-5)
    # The Enter's value (a feed's array, a variable's, a value of the step) is never
    # written; each later iteration's is the buffer its predecessor made.
    assert seen["while/accumulate", 0] == [False] + [True] * (_N - 1)
    if start_kind == "variable":
        np.testing.assert_array_equal(after, _A)


def test_an_accumulator_read_twice_in_the_body_is_never_taken(monkeypatch, taken):
    (acc, s), _after, seen = _both(_accumulation("own", read_twice=True), monkeypatch, taken)
    asks = [v for (name, _k), v in seen.items() if name == "while/accumulate"]
    assert asks and not any(any(v) for v in asks)
    want = _A.astype(np.float64) * 2.0
    total = 0.0
    for i in range(_N):
        total += want.sum()
        want = want + np.tanh(_X.astype(np.float64) * i)
    np.testing.assert_allclose(acc, want, rtol=1e-5, atol=1e-5)
    assert s == pytest.approx(total, rel=1e-4)


def test_a_value_handed_out_by_a_tensor_array_is_never_taken(monkeypatch, taken):
    # The loop variable's next value is a TensorArray's stored element: its reader must
    # not write into it, or the array would change under its later reads.
    elems = np.random.default_rng(5).standard_normal((_N, 16)).astype(np.float32)

    def build():
        ta = af.TensorArray(af.float32, size=_N, clear_after_read=False)
        for k in range(_N):  # (arrays of their own, as a kernel's output: not views)
            ta = ta.write(k, af.constant(elems[k]) * 1.0)

        def body(i, v, out):
            doubled = af.multiply(v, 2.0, name="double")
            return i + 1, ta.read(i), out.write(i, doubled)

        out_ta = af.TensorArray(af.float32, size=_N)
        res = while_loop(lambda i, *_: i < _N, body, [0, af.zeros([16]), out_ta])
        return [res[2].stack(), ta.stack()], None, None

    (doubled, stored), _after, seen = _both(build, monkeypatch, taken)
    np.testing.assert_array_equal(stored, elems)
    np.testing.assert_array_equal(doubled[1:], elems[:-1] * 2.0)
    assert not any(any(v) for (name, _k), v in seen.items() if name == "while/double")


async def test_concurrent_steps_of_one_loop_each_keep_their_own_buffers():
    # Many steps of one plan at once, on one loop program: each takes only the buffers
    # its own iterations made.
    with af.Graph().as_default():
        a0 = af.placeholder(af.float32, [8])

        def body(i, acc):
            return i + 1, af.add(acc, af.sqrt(acc + af.cast(i, af.float32)), name="acc")

        out = while_loop(lambda i, *_: i < 50, body, [0, a0 * 1.0])[1]
        starts = [np.full(8, k, np.float32) for k in range(16)]
        with af.Session() as s:
            got = await asyncio.gather(*(s.arun(out, {a0: v}) for v in starts))
    for v, g in zip(starts, got):
        want = v.astype(np.float32)
        for i in range(50):
            want = want + np.sqrt(want + np.float32(i))
        np.testing.assert_allclose(g, want, rtol=1e-5)


def test_the_switch_turns_it_off(monkeypatch, taken):
    monkeypatch.setattr(frames, "_TAKE_CARRIES", False)
    (acc, _s), _after, seen = _both(_accumulation("own"), monkeypatch, taken)
    np.testing.assert_allclose(acc, _want("own"), rtol=1e-5, atol=1e-5)
    assert seen["while/accumulate", 0] == [False] * _N
