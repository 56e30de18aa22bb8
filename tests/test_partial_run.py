"""Partial runs: `Session.partial_run_setup` / `partial_run` (asyncflow.partial_run).

The values and messages are TF 2.21's (tf.compat.v1 graph mode), recorded by running the
same snippets there.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(60)


def _abc():
    a = af.placeholder(af.float32, shape=[], name="a")
    b = af.placeholder(af.float32, shape=[], name="b")
    c = af.placeholder(af.float32, shape=[], name="c")
    r1 = af.add(a, b)
    r2 = af.multiply(r1, c)
    return a, b, c, r1, r2


def test_tfs_example_feeds_over_two_calls():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert isinstance(h, str)
        res = sess.partial_run(h, r1, feed_dict={a: 1, b: 2})
        assert res == 3.0 and isinstance(res, np.float32)
        assert sess.partial_run(h, r2, feed_dict={c: res}) == 9.0
        # Every feed fed and every fetch fetched: the handle is gone.
        with pytest.raises(errors.InvalidArgumentError, match="^Must run 'setup' before"):
            sess.partial_run(h, r2, feed_dict={c: 3})


def test_structures_names_and_a_fed_fetch():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h, {"x": r1}, feed_dict={a: 1, b: 2}) == {"x": 3.0}
        assert sess.partial_run(h, [r2], feed_dict={c: 4}) == [12.0]
        h = sess.partial_run_setup(["Add:0"], ["a:0", "b:0"])
        assert sess.partial_run(h, "Add:0", feed_dict={"a:0": 1, "b:0": 2}) == 3.0
        h = sess.partial_run_setup(r1, [a, b])  # one fetch, not a list
        # A fetch fed in the same call is its fed value (TF's Python does this too).
        assert sess.partial_run(h, [a, r1], feed_dict={a: 1, b: 2}) == [1.0, 3.0]
        h = sess.partial_run_setup([r1], [a, b])
        assert sess.partial_run(h, [], feed_dict={a: 1}) == []


@pytest.mark.parametrize(
    "setup, call, message",
    [
        (
            lambda r1, r2, r3: [r1],
            lambda a, b, c, r1, r2, r3: (r3, {a: 1, c: 3}),
            "^The fetch Mul_1:0 was not specified in partial_run_setup.$",
        ),
        (
            lambda r1, r2, r3: [r1, r2],
            lambda a, b, c, r1, r2, r3: (r1, {a: 1, b: 2, r3: 4}),
            "^The feed Mul_1:0 was not specified in partial_run_setup.$",
        ),
        (
            lambda r1, r2, r3: [r1, r2],
            lambda a, b, c, r1, r2, r3: (r2, {a: 1, b: 2}),
            "^Fetch c:0 can't be computed from the feeds that have been fed so far.$",
        ),
    ],
)
def test_tfs_refusals(setup, call, message):
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        r3 = af.multiply(a, c)
        h = sess.partial_run_setup(setup(r1, r2, r3), [a, b, c])
        fetches, feeds = call(a, b, c, r1, r2, r3)
        with pytest.raises(errors.InvalidArgumentError, match=message):
            sess.partial_run(h, fetches, feed_dict=feeds)


def test_a_refused_call_uses_up_nothing():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        with pytest.raises(errors.InvalidArgumentError, match="^Fetch c:0 can't be computed"):
            sess.partial_run(h, r2, feed_dict={a: 1, b: 2})
        # a and b were not fed by the refused call: r2 still needs them (TF's words).
        with pytest.raises(errors.InvalidArgumentError, match="^Fetch a:0 can't be computed"):
            sess.partial_run(h, r2, feed_dict={c: 5})
        assert sess.partial_run(h, r1, feed_dict={a: 1, b: 2}) == 3.0
        with pytest.raises(errors.InvalidArgumentError, match="^The feed a:0 has already been"):
            sess.partial_run(h, r2, feed_dict={a: 1, c: 2})
        with pytest.raises(errors.InvalidArgumentError, match="^The fetch Add:0 has already"):
            sess.partial_run(h, r1)
        assert sess.partial_run(h, r2, feed_dict={c: 2}) == 6.0


def test_setup_and_call_errors():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        with pytest.raises(errors.InvalidArgumentError, match="^a:0 is both fed and fetched.$"):
            sess.partial_run_setup([a, r1], [a, b])
        with pytest.raises(errors.InvalidArgumentError, match="^Must run 'setup' before"):
            sess.partial_run("foo", r1, feed_dict={a: 1, b: 2})
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        with pytest.raises(ValueError, match="Cannot feed value of shape \\(2,\\)"):
            sess.partial_run(h, r1, feed_dict={a: [1, 2], b: 2})
        assert sess.partial_run(h, r1, feed_dict={a: 1, b: 2}) == 3.0
        enqueue = af.FIFOQueue(2, af.float32).enqueue(1.0)
        with pytest.raises(RuntimeError, match="^partial_run\\(\\) requires empty `target_list`"):
            sess.partial_run(h, enqueue)


def test_a_failing_op_fails_the_call_and_drops_the_handle():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        d = af.placeholder(af.float32, shape=None, name="d")
        e = af.reshape(d, [2, 2])
        h = sess.partial_run_setup([e, r1], [d, a, b])
        with pytest.raises(errors.InvalidArgumentError, match="Input to reshape is a tensor"):
            sess.partial_run(h, e, feed_dict={d: [1.0, 2.0, 3.0]})
        with pytest.raises(errors.InvalidArgumentError, match="^Must run 'setup' before"):
            sess.partial_run(h, r1, feed_dict={a: 1, b: 2})


def test_every_op_runs_once_across_the_calls():
    with af.Graph().as_default(), af.Session() as sess:
        a = af.placeholder(af.float32, shape=[2], name="a")
        r = af.random_uniform([2])
        x = a + r
        y = af.reduce_sum(x) + af.reduce_sum(r)
        v = af.Variable(1.0)
        inc = af.assign_add(v, 1.0)
        after = inc * 10.0
        sess.run(v.initializer)
        h = sess.partial_run_setup([r, x, y, inc, after], [a])
        rv = sess.partial_run(h, r)
        xv = sess.partial_run(h, x, feed_dict={a: [1.0, 2.0]})
        np.testing.assert_allclose(xv - rv, [1.0, 2.0], rtol=1e-6)
        np.testing.assert_allclose(sess.partial_run(h, y), xv.sum() + rv.sum(), rtol=1e-6)
        assert sess.partial_run(h, inc) == 2.0
        assert sess.partial_run(h, after) == 20.0
        assert sess.run(v) == 2.0


def test_what_needs_no_feed_runs_at_setup():
    with af.Graph().as_default(), af.Session() as sess:
        a = af.placeholder(af.float32, shape=[], name="a")
        v = af.Variable(1.0)
        inc = af.assign_add(v, 1.0)
        out = a + 1.0
        sess.run(v.initializer)
        h = sess.partial_run_setup([inc, out], [a])
        assert sess.run(v) == 2.0  # before any partial_run
        assert sess.partial_run(h, out, feed_dict={a: 1.0}) == 2.0
        assert sess.partial_run(h, inc) == 2.0


def test_control_flow_and_two_devices():
    cfg = af.ConfigProto(device_count={"CPU": 2})
    with af.Graph().as_default(), af.Session(config=cfg) as sess:
        a = af.placeholder(af.float32, shape=[2], name="a")
        p = af.placeholder(af.bool, shape=[], name="p")
        z = af.cond(p, lambda: a * 2, lambda: a * 3)
        w = af.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + a), [0, af.zeros([2])])[1]
        with af.device("/cpu:1"):
            m = a * 10
        n = m + 1
        h = sess.partial_run_setup([w, z, m, n], [a, p])
        assert sess.partial_run(h, w, feed_dict={a: [1.0, 2.0]}).tolist() == [3.0, 6.0]
        m_v, n_v = sess.partial_run(h, [m, n])
        assert m_v.tolist() == [10.0, 20.0] and n_v.tolist() == [11.0, 21.0]
        assert sess.partial_run(h, z, feed_dict={p: False}).tolist() == [3.0, 6.0]


def test_the_step_waits_in_the_background_for_another_steps_enqueue():
    with af.Graph().as_default(), af.Session() as sess:
        q = af.FIFOQueue(4, af.float32, shapes=[])
        x = af.placeholder(af.float32, shape=[])
        enqueue = q.enqueue(x)
        dequeued = q.dequeue()
        doubled = dequeued * 2.0
        h = sess.partial_run_setup([dequeued, doubled])
        sess.run(enqueue, {x: 5.0})  # the partial run's dequeue has been waiting for this
        assert sess.partial_run(h, [dequeued, doubled]) == [5.0, 10.0]


def test_a_partial_run_past_the_sessions_timeout_fails_and_is_dropped():
    cfg = af.ConfigProto(operation_timeout_in_ms=200)
    with af.Graph().as_default(), af.Session(config=cfg) as sess:
        q = af.FIFOQueue(4, af.float32, shapes=[])
        dequeued = q.dequeue()
        h = sess.partial_run_setup([dequeued])
        with pytest.raises(errors.DeadlineExceededError):
            sess.partial_run(h, dequeued)
        with pytest.raises(errors.InvalidArgumentError, match="^Must run 'setup' before"):
            sess.partial_run(h, dequeued)
        assert sess.run(q.size()) == 0


def test_closing_the_session_ends_its_partial_runs():
    with af.Graph().as_default():
        a, b, c, r1, r2 = _abc()
        sess = af.Session()
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h, r1, feed_dict={a: 1, b: 2}) == 3.0
        sess.close()  # the step still waits for c: it is cancelled, nothing hangs
        with pytest.raises(RuntimeError, match="closed Session"):
            sess.partial_run(h, r2, feed_dict={c: 3})


def test_partial_runs_from_two_threads():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        results = {}

        def work(k):
            h = sess.partial_run_setup([r1, r2], [a, b, c])
            first = sess.partial_run(h, r1, feed_dict={a: k, b: 1})
            results[k] = (first, sess.partial_run(h, r2, feed_dict={c: 2}))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == {k: (k + 1.0, 2.0 * (k + 1)) for k in range(4)}


def test_awaited_partial_runs_share_the_loop():
    async def main():
        with af.Graph().as_default():
            a, b, c, r1, r2 = _abc()
            async with af.Session() as sess:
                h = await sess.apartial_run_setup([r1, r2], [a, b, c])
                ticks = 0

                async def ticker():
                    nonlocal ticks
                    while True:
                        ticks += 1
                        await asyncio.sleep(0)

                t = asyncio.ensure_future(ticker())
                first = await sess.apartial_run(h, r1, feed_dict={a: 1, b: 2})
                await asyncio.sleep(0.01)  # the step waits for c; the loop goes on
                second = await sess.apartial_run(h, r2, feed_dict={c: first})
                t.cancel()
                with pytest.raises(errors.InvalidArgumentError, match="^Must run 'setup'"):
                    await sess.apartial_run(h, r2, feed_dict={c: 1})
                return first, second, ticks

    first, second, ticks = asyncio.run(main())
    assert (first, second) == (3.0, 9.0) and ticks > 1


def test_on_a_stand_in_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with af.Graph().as_default(), af.Session() as sess:
        a = af.placeholder(af.float32, shape=[3], name="a")
        with af.device("/gpu:0"):
            y = af.exp(a) * 2.0
            s = af.reduce_sum(y)
        h = sess.partial_run_setup([y, s], [a])
        got = sess.partial_run(h, y, feed_dict={a: [0.0, 1.0, 2.0]})
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, 2 * np.exp([0.0, 1.0, 2.0]), rtol=1e-6)
        np.testing.assert_allclose(sess.partial_run(h, s), got.sum(), rtol=1e-6)


def test_a_fetch_named_twice_in_one_call():
    with af.Graph().as_default(), af.Session() as sess:
        a, b, c, r1, r2 = _abc()
        h = sess.partial_run_setup([r1, r2], [a, b, c])
        assert sess.partial_run(h, [r1, r1], feed_dict={a: 1, b: 2}) == [3.0, 3.0]
        got = sess.partial_run(h, {"x": r2, "y": [r2]}, feed_dict={c: 2})
        assert got == {"x": 6.0, "y": [6.0]}
