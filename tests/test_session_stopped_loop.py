"""Issue 18 item 13: a blocked synchronous `run` whose session is bound to an event loop
on another thread, when that loop stops and its thread ends, fails with a clear
RuntimeError instead of waiting forever (with or without `timeout_in_ms`)."""

import asyncio
import threading

import pytest

import asyncflow as af


def _session_on_a_thread_loop():
    """A session bound (by `arun`) to a loop served by its own thread, a FIFO queue
    whose dequeue blocks, and a function that stops the loop once a step is parked."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    q = af.FIFOQueue(4, af.float32, shapes=[])
    sess = af.Session()
    asyncio.run_coroutine_threadsafe(sess.arun(q.size()), loop).result()

    async def stop_once_a_step_parks():
        # Yield until the step the main thread hands over has parked on the dequeue (a
        # condition, not a timed sleep), then stop the loop; its thread then ends.
        for _ in range(10_000_000):
            if sess._worker.steps_in_flight:
                break
            await asyncio.sleep(0)
        loop.stop()

    def arm():
        asyncio.run_coroutine_threadsafe(stop_once_a_step_parks(), loop)

    return sess, q, loop, thread, arm


@pytest.mark.parametrize("timeout_ms", [None, 60_000])
def test_blocked_run_fails_when_its_loop_stops_on_another_thread(timeout_ms):
    with af.Graph().as_default():
        sess, q, loop, thread, arm = _session_on_a_thread_loop()
        options = None if timeout_ms is None else af.RunOptions(timeout_in_ms=timeout_ms)
        arm()
        with pytest.raises(RuntimeError, match="stopped while a step"):
            sess.run(q.dequeue(), options=options)
        thread.join(10)
        assert not thread.is_alive()
        loop.close()
