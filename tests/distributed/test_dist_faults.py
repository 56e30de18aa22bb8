"""Losing a task: steps fail fast with UnavailableError/AbortedError, nothing hangs, the
other tasks keep serving, a restarted task rejoins.  Tasks are subprocesses
(`python -m asyncflow.server`), killed with SIGKILL or frozen with SIGSTOP."""

import asyncio
import os
import signal
import time

import numpy as np
import pytest
from conftest import cluster_of, spawn_server, stop

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

LOST = (af.errors.UnavailableError, af.errors.AbortedError)


def _graph():
    with af.device("/job:ps/task:0"):
        v = af.Variable(np.arange(4, dtype=np.float32), name="v")
        q = af.FIFOQueue(4, af.float32, shapes=[[]], name="q")
    x = af.placeholder(af.float32, [4])
    got = q.dequeue()  # on the ps, with its queue; blocks until something is enqueued
    with af.device("/job:worker/task:0"):
        y = v * x
        waits = got + 1.0
    return v, x, y, waits


async def _sent(sess, step) -> None:
    """Until the step's RUN messages are on their way (pending on the connections)."""
    while not any(
        ch.conn is not None and ch.conn.pending_calls for ch in sess._worker._channels.values()
    ):
        if step.done():
            step.result()  # (an unexpected early end: show it)
            raise AssertionError("the step ended before it was sent")
        await asyncio.sleep(0)


def test_killed_ps_fails_steps_fast_and_a_restarted_ps_rejoins():
    cluster = cluster_of(ps=1, worker=1)
    ps = spawn_server(cluster, "ps", 0)
    worker = spawn_server(cluster, "worker", 0)
    target = f"grpc://{cluster.task_address('worker', 0)}"
    try:
        with af.Graph().as_default():
            v, x, y, waits = _graph()
            sess = af.Session(target)
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(y, {x: np.ones(4)}), [0, 1, 2, 3])

            async def blocked_step_then_kill():
                step = asyncio.ensure_future(sess.arun(waits))
                await _sent(sess, step)
                os.kill(ps.pid, signal.SIGKILL)
                t0 = time.monotonic()
                with pytest.raises(LOST):
                    await step
                return time.monotonic() - t0

            assert asyncio.run(blocked_step_then_kill()) < 10.0
            ps.wait(10)
            t0 = time.monotonic()
            with pytest.raises(LOST):  # the next step, too
                sess.run(y, {x: np.ones(4)})
            assert time.monotonic() - t0 < 10.0

            # The worker keeps serving sessions that do not need the ps.
            only_worker = af.ConfigProto(device_filters=["/job:worker"])
            with af.Session(target, config=only_worker) as s2:
                assert s2.run(af.constant(2.0) * 3.0) == 6.0

            # A restarted ps rejoins: new sessions work; the old one learns that the
            # ps lost its state (AbortedError, as TF), so a MonitoredSession recreates it.
            ps2 = spawn_server(cluster, "ps", 0)
            try:
                with pytest.raises(af.errors.AbortedError, match="restarted"):
                    sess.run(y, {x: np.ones(4)})
                sess.close()
                with af.Session(target) as s3:
                    s3.run(v.initializer)
                    np.testing.assert_array_equal(s3.run(y, {x: 2 * np.ones(4)}), [0, 2, 4, 6])
            finally:
                stop(ps2)
    finally:
        stop(ps)
        stop(worker)


def test_killed_session_task_and_frozen_task_do_not_hang(monkeypatch):
    cluster = cluster_of(ps=1, worker=1)
    ps = spawn_server(cluster, "ps", 0)
    worker = spawn_server(cluster, "worker", 0)
    target = f"grpc://{cluster.task_address('worker', 0)}"
    from asyncflow.distributed import wire

    monkeypatch.setattr(wire.Connection, "dead_after", 1.5)
    monkeypatch.setattr(wire.Connection, "ping_interval", 0.25)
    try:
        with af.Graph().as_default():
            v, x, y, waits = _graph()
            with af.Session(target) as sess:
                sess.run(v.initializer)
                # A frozen ps (SIGSTOP) answers nothing: the keep-alive gives up.
                os.kill(ps.pid, signal.SIGSTOP)
                t0 = time.monotonic()
                with pytest.raises(LOST, match="No response"):
                    sess.run(y, {x: np.ones(4)})
                assert time.monotonic() - t0 < 10.0
                os.kill(ps.pid, signal.SIGCONT)
            with af.Session(target) as sess:
                # The session's own task dies mid-step.
                async def blocked_then_kill_worker():
                    step = asyncio.ensure_future(sess.arun(waits))
                    await _sent(sess, step)
                    os.kill(worker.pid, signal.SIGKILL)
                    with pytest.raises(LOST):
                        await step

                t0 = time.monotonic()
                asyncio.run(blocked_then_kill_worker())
                assert time.monotonic() - t0 < 10.0
            assert ps.poll() is None  # the ps survived its peer's death
    finally:
        stop(ps)
        stop(worker)


def test_sigterm_drains_and_exits_cleanly():
    cluster = cluster_of(worker=1)
    proc = spawn_server(cluster, "worker", 0)
    try:
        with af.Graph().as_default():
            with af.Session(f"grpc://{cluster.task_address('worker', 0)}") as sess:
                assert sess.run(af.constant(1.0) + 1.0) == 2.0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        stop(proc)


def test_monitored_session_recovers_from_a_killed_ps_through_its_checkpoint(tmp_path):
    cluster = cluster_of(ps=1, worker=1)
    ps = spawn_server(cluster, "ps", 0)
    worker = spawn_server(cluster, "worker", 0)
    target = f"grpc://{cluster.task_address('worker', 0)}"
    ps2 = None
    try:
        with af.Graph().as_default():
            with af.device("/job:ps/task:0"):
                step = af.train.get_or_create_global_step()
                v = af.Variable(0.0, name="v")
            with af.device("/job:worker/task:0"):
                delta = af.constant(1.0)
            train = af.group(v.assign_add(delta), step.assign_add(1))
            saver_hook = af.train.CheckpointSaverHook(str(tmp_path), save_steps=2)
            with af.train.MonitoredTrainingSession(
                master=target,
                is_chief=True,
                checkpoint_dir=str(tmp_path),
                chief_only_hooks=[saver_hook],
                save_checkpoint_steps=None,
                save_checkpoint_secs=None,
                save_summaries_steps=None,
                log_step_count_steps=None,
            ) as mon:
                for _ in range(3):  # saves at global step 2 (v 2.0)
                    mon.run(train)
                assert mon.run(v) == 3.0
                saver_hook.wait_for_pending_save(10)
                os.kill(ps.pid, signal.SIGKILL)
                ps.wait(10)
                ps2 = spawn_server(cluster, "ps", 0)  # the restarted ps, its state gone
                t0 = time.monotonic()
                mon.run(train)  # lost ps: new session, restored checkpoint, the step again
                assert time.monotonic() - t0 < 10.0
                assert mon.run(v) == 3.0  # 2.0 restored, plus this step
                assert mon.run(step) == 3
    finally:
        for p in (ps, worker, ps2):
            if p is not None:
                stop(p)
