"""The Worker protocol, the master's use of it, and session targets.

The master registers a graph once per (feeds, fetches) and runs steps of the handle; a
worker aborts one step by id, or all of them; `Session(target)` finds its worker by the
target's scheme, and an unknown one is a NotFoundError (TF's) naming the target.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from _testing_ops import settle

import asyncflow as tf
from asyncflow import errors
from asyncflow.devices.registry import create_devices
from asyncflow.master import register_target_scheme
from asyncflow.worker import LocalWorker

pytestmark = pytest.mark.timeout(30)


def test_unknown_target_is_not_found_naming_it():
    with pytest.raises(errors.NotFoundError, match="nosuch://host:1"):
        tf.Session("nosuch://host:1", graph=tf.Graph())


def test_a_registered_scheme_supplies_the_worker():
    made = []

    def factory(target, config):
        w = LocalWorker(create_devices(config))
        made.append((target, w))
        return w

    register_target_scheme("inproc", factory)
    g = tf.Graph()
    with g.as_default():
        y = tf.constant(2.0) * 3.0
    with tf.Session("inproc://a", graph=g) as sess:
        assert sess.sess_str == b"inproc://a"  # (bytes, as TF's)
        assert sess.run(y) == 6.0
        ((target, worker),) = made
        assert target == "inproc://a" and sess._worker is worker
        assert len(sess._plans) == 1 and len(worker._graphs) == 1


def test_plans_register_once_and_steps_get_fresh_ids():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        y = x + 1.0
    with tf.Session(graph=g) as sess:
        seen = []
        run_graph = sess._worker.run_graph

        async def spy(handle, step_id, *args, **kwargs):
            seen.append((handle, step_id))
            return await run_graph(handle, step_id, *args, **kwargs)

        sess._worker.run_graph = spy
        for v in range(3):
            assert sess.run(y, {x: v}) == v + 1
    handles = {h for h, _ in seen}
    ids = [i for _, i in seen]
    assert len(handles) == 1 and len(set(ids)) == 3


async def test_abort_step_fails_only_that_step():
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(4, tf.float32)
        take = q.dequeue()
        put = q.enqueue(5.0)
    async with tf.Session(graph=g) as sess:
        worker = sess._worker
        blocked = asyncio.ensure_future(sess.arun(take))
        await settle()
        assert worker.steps_in_flight == 1
        (step_id,) = worker._step_ids
        worker.abort_step(step_id, errors.AbortedError(None, None, "aborted by the test"))
        with pytest.raises(errors.AbortedError, match="aborted by the test"):
            await blocked
        assert worker.steps_in_flight == 0
        # Nothing was lost: the queue still works, and the next step has its own id.
        await sess.arun(put)
        assert await sess.arun(take) == 5.0


def test_close_aborts_the_steps_of_the_worker_and_closes_its_devices():
    g = tf.Graph()
    with g.as_default():
        v = tf.constant(np.arange(3.0))
    sess = tf.Session(graph=g)
    assert list(sess.run(v)) == [0.0, 1.0, 2.0]
    sess.close()
    assert not sess._plans and not sess._worker._graphs


async def test_step_status_keeps_the_first_failure_and_releases_every_partition():
    # Two devices: the step's second partition waits in a _Recv for a value the first
    # never sends (its producer waits on an empty queue). Aborting the step by id must
    # release both partitions and the rendezvous with that one error.
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            q = tf.FIFOQueue(2, tf.float32)
            x = q.dequeue()
        with tf.device("/cpu:1"):
            y = x * 2.0
    async with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        worker = sess._worker
        pending = asyncio.ensure_future(sess.arun(y))
        await settle()
        (status,) = worker._step_ids.values()
        assert len(status.steps) == 2
        first = errors.AbortedError(None, None, "first")
        worker.abort_step(next(iter(worker._step_ids)), first)
        status.fail(errors.UnavailableError(None, None, "second"))  # ignored: not first
        with pytest.raises(errors.AbortedError, match="first"):
            await pending
        assert status.first_error() is first
        assert all(s.error is first for s in status.steps)
        assert not worker._step_ids and not worker._steps


def test_session_reset_clears_the_containers_of_live_sessions():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(3.0)
        with tf.container("shared"):
            w = tf.Variable(5.0)
    a, b = tf.Session(graph=g), tf.Session(graph=g)
    try:
        a.run([v.initializer, w.initializer])
        b.run(v.initializer)
        assert b.run(w) == 5.0  # a named container is shared by the process's sessions
        tf.Session.reset("", ["shared"])
        assert a.run(v) == 3.0  # the default container was not named: kept
        with pytest.raises(errors.FailedPreconditionError):
            a.run(w)
        tf.Session.reset("")  # every container, of every live session
        for sess in (a, b):
            with pytest.raises(errors.FailedPreconditionError):
                sess.run(v)
        with pytest.raises(errors.NotFoundError, match="nosuch://x"):
            tf.Session.reset("nosuch://x")
    finally:
        a.close()
        b.close()
