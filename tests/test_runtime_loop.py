"""The runtime loop of synchronous sessions: inline steps, and the move to a thread."""

import asyncio
import threading

import numpy as np

import asyncflow as af
from asyncflow import session as session_mod


def test_sync_steps_run_inline_until_background_work_appears(monkeypatch):
    monkeypatch.setattr(session_mod, "_runtime", None)  # a fresh runtime for this test
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [2])
        y = x * 2.0
        q = af.FIFOQueue(10, [af.float32], shapes=[[2]])
        enq = q.enqueue([y])
        deq = q.dequeue()
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [2, 4])
            s.run(enq, {x: [1, 2]})
            np.testing.assert_array_equal(s.run(deq), [2, 4])
            rt = session_mod._runtime
            assert rt.loop is s._loop
            assert rt.thread is None  # every step so far ran on this thread
            # A queue runner needs the loop to keep running between steps.
            coord = af.train.Coordinator()
            qr = af.train.QueueRunner(q, [q.enqueue([af.constant([5.0, 6.0])])])
            threads = qr.create_threads(s, coord=coord, start=True)
            assert rt.thread is not None and rt.thread.is_alive()
            np.testing.assert_array_equal(s.run(deq), [5, 6])
            coord.request_stop()
            s.run(q.close(cancel_pending_enqueues=True))
            coord.join(threads)
    rt.loop.call_soon_threadsafe(rt.loop.stop)


def test_run_from_inside_another_running_loop_is_handed_off():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [])
        y = x + 1.0
        sess = af.Session()

        async def user_code():
            # Blocking run() from a coroutine of some other loop: allowed (as in TF1),
            # it just blocks that loop; the runtime loop must not be driven here.
            return sess.run(y, {x: 1.0})

        assert asyncio.run(user_code()) == 2.0
        assert sess.run(y, {x: 2.0}) == 3.0
        sess.close()


def test_many_threads_while_one_drives_inline():
    g = af.Graph()
    with g.as_default():
        v = af.Variable(0, name="v")
        inc = af.assign_add(v, 1)
        with af.Session() as s:
            s.run(v.initializer)
            errors = []

            def work():
                try:
                    for _ in range(50):
                        s.run(inc.op)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=work) for _ in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not errors
            assert s.run(v) == 300


def test_arun_from_a_user_loop_after_inline_sync_runs(monkeypatch):
    monkeypatch.setattr(session_mod, "_runtime", None)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [])
        y = x * 3.0
        with af.Session() as s:
            assert s.run(y, {x: 1.0}) == 3.0  # binds to the runtime loop, inline
            assert session_mod._runtime.thread is None

            async def service():
                return await s.arun(y, {x: 2.0})  # bridged: the loop needs a thread now

            assert asyncio.run(asyncio.wait_for(service(), 10)) == 6.0
    rt = session_mod._runtime
    rt.loop.call_soon_threadsafe(rt.loop.stop)


def _thread_probe():
    """A test op whose kernel reports the thread its heavy work ran on."""
    from asyncflow.registry import get_op_def, register_op

    try:
        return get_op_def("TestHeavyThreadProbe")
    except (KeyError, LookupError):
        pass
    op_def = register_op(
        "TestHeavyThreadProbe",
        inputs=["x: float32"],
        outputs=["y: int64"],
        shape_fn=lambda op: [af.TensorShape([])],
    )

    @op_def.kernel("CPU")
    async def _probe(ctx, x):
        ident = await ctx.device.compute(threading.get_ident, cost=float(1 << 40))
        return np.array(ident, np.int64)

    return op_def


def test_heavy_work_of_a_lone_device_stays_on_a_caller_driven_thread(monkeypatch):
    from asyncflow import graph as ops

    monkeypatch.setattr(session_mod, "_runtime", None)  # a fresh runtime for this test
    _thread_probe()
    with af.Graph().as_default():
        y = ops.apply_op("TestHeavyThreadProbe", [af.constant(1.0)]).outputs[0]
        with af.Session() as sess:
            assert int(sess.run(y)) == threading.get_ident()  # driven inline: no hop
            assert session_mod._runtime.thread is None

        async def main():
            async with af.Session() as s:  # an async caller: the loop must stay free
                return int(await s.arun(y))

        assert asyncio.run(main()) != threading.get_ident()
