"""SyncReplicasOptimizer (OSDI §4.4) in one process: replicas are concurrent `arun`
steps of one session, each with its own SyncReplicasOptimizer (as each worker of a
between-graph program has), sharing the parameter server's accumulators and token queue
by their shared names.  References: the update arithmetic in NumPy."""

import asyncio
import threading

import numpy as np
import pytest
from _testing_ops import settle

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

LR = 0.5
W0 = np.array([1.0, -2.0], np.float32)
GRADS = [np.array([1.0, 2.0], np.float32), np.array([3.0, 0.0], np.float32),
         np.array([-4.0, 8.0], np.float32)]  # fmt: skip


def _build(n_replicas, to_aggregate, grads=GRADS, sparse=False):
    with af.device("/cpu:0"):  # the parameter server
        gs = af.train.get_or_create_global_step()
        if sparse:
            w = af.Variable(np.zeros([4, 2], np.float32), name="emb")
        else:
            w = af.Variable(W0, name="w")
    replicas = []
    for i in range(n_replicas):
        if sparse:
            rows = af.nn.embedding_lookup(w, [i % 4, 3])
            loss = af.reduce_sum(rows * grads[i])
        else:
            loss = af.reduce_sum(w * grads[i])
        opt = af.train.SyncReplicasOptimizer(
            af.train.GradientDescentOptimizer(LR),
            replicas_to_aggregate=to_aggregate,
            total_num_replicas=n_replicas,
        )
        train = opt.minimize(loss, global_step=gs)
        replicas.append((opt, train))
    return gs, w, replicas


async def test_backup_worker_gradient_is_dropped_as_stale(graph):
    gs, w, replicas = _build(3, 2)
    chief = replicas[0][0]
    sync_op = chief.get_chief_queue_runner().enqueue_ops[0]
    num_acc = chief._accumulator_list[0][0].num_accumulated()
    async with af.Session(graph=graph) as s:
        await s.arun([af.global_variables_initializer(), af.local_variables_initializer()])
        await s.arun(chief.chief_init_op)
        await s.arun([opt.local_step_init_op for opt, _ in replicas[1:]])
        await s.arun(chief.get_init_tokens_op())  # 2 tokens: the first step's to_aggregate
        a, b, c = (train for _, train in replicas)
        await s.arun(a)
        await s.arun(b)  # both took a token of step 0
        assert await s.arun(num_acc) == 2
        await s.arun(sync_op)  # mean of A and B applied; step 1; 3 tokens of step 1
        assert await s.arun(gs) == 1
        np.testing.assert_allclose(await s.arun(w), W0 - LR * (GRADS[0] + GRADS[1]) / 2)
        # C, the backup worker, is late: its gradient is for step 0 and is dropped.  So is
        # A's next one: the token A took said step 0.  Each takes a token of step 1.
        await s.arun(c)
        await s.arun(a)
        assert await s.arun(num_acc) == 0
        assert await s.arun([opt._local_step for opt, _ in replicas]) == [1, 0, 1]
        # Step 1: C's and A's gradients count; A's dequeue then waits for the chief (the
        # third token of step 1 went to nobody yet: B still has it to take).
        await s.arun(c)
        waiting = asyncio.create_task(s.arun(a))
        await settle()
        assert not waiting.done() or await s.arun(num_acc) == 2
        assert await s.arun(num_acc) == 2
        await s.arun(sync_op)
        await asyncio.wait_for(waiting, 10)
        assert await s.arun(gs) == 2
        want = W0 - LR * (GRADS[0] + GRADS[1]) / 2 - LR * (GRADS[2] + GRADS[0]) / 2
        np.testing.assert_allclose(await s.arun(w), want)
        # B comes back with a step-0 gradient: dropped, and B moves on.
        await s.arun(b)
        assert await s.arun(num_acc) == 0
        np.testing.assert_allclose(await s.arun(w), want)


async def test_sync_op_waits_for_replicas_to_aggregate(graph):
    gs, w, replicas = _build(2, 2)
    chief = replicas[0][0]
    sync_op = chief.get_chief_queue_runner().enqueue_ops[0]
    async with af.Session(graph=graph) as s:
        await s.arun([af.global_variables_initializer(), af.local_variables_initializer()])
        await s.arun([chief.chief_init_op, replicas[1][0].local_step_init_op])
        await s.arun(chief.get_init_tokens_op())
        await s.arun(replicas[0][1])
        syncing = asyncio.create_task(s.arun(sync_op))
        await settle()
        assert not syncing.done() and await s.arun(gs) == 0  # one gradient of two
        await s.arun(replicas[1][1])
        await asyncio.wait_for(syncing, 10)
        assert await s.arun(gs) == 1
        np.testing.assert_allclose(await s.arun(w), W0 - LR * (GRADS[0] + GRADS[1]) / 2)


async def test_sparse_gradients_aggregate_per_row(graph):
    grads = [np.array([[1.0, 1.0], [2.0, 2.0]], np.float32),
             np.array([[4.0, 0.0], [0.0, 6.0]], np.float32)]  # fmt: skip
    gs, w, replicas = _build(2, 2, grads=grads, sparse=True)
    chief = replicas[0][0]
    sync_op = chief.get_chief_queue_runner().enqueue_ops[0]
    async with af.Session(graph=graph) as s:
        await s.arun([af.global_variables_initializer(), af.local_variables_initializer()])
        await s.arun([chief.chief_init_op, replicas[1][0].local_step_init_op])
        await s.arun(chief.get_init_tokens_op())
        await s.arun([replicas[0][1]])
        await s.arun([replicas[1][1]])
        await s.arun(sync_op)
        # Rows 0 and 1 each had one gradient, row 3 two: the mean is per row.
        want = np.zeros([4, 2], np.float32)
        want[0] -= LR * grads[0][0]
        want[1] -= LR * grads[1][0]
        want[3] -= LR * (grads[0][1] + grads[1][1]) / 2
        np.testing.assert_allclose(await s.arun(w), want)


def test_replica_threads_with_the_session_run_hook(graph):
    # Three replicas, two aggregated per step, run freely on threads (TF1's style) with
    # the chief's queue runner started by make_session_run_hook: every applied step is
    # the same gradient, so the parameters follow the global step exactly.
    same = [GRADS[0]] * 3
    gs, w, replicas = _build(3, 2, grads=same)
    hooks = [opt.make_session_run_hook(is_chief=(i == 0)) for i, (opt, _) in enumerate(replicas)]
    coord = af.train.Coordinator()
    with af.Session(graph=graph) as s:
        s.run([af.global_variables_initializer(), af.local_variables_initializer()])
        for h in hooks:
            h.begin()
        for h in hooks:
            h.after_create_session(s, coord)
        steps = 6
        reached = threading.Event()

        def replica(train):
            try:
                while s.run(gs) < steps:
                    s.run(train)
                reached.set()
            except af.errors.OutOfRangeError:
                pass  # the token queue closed under a waiting replica: the run is over

        threads = [threading.Thread(target=replica, args=(t,)) for _, t in replicas]
        for t in threads:
            t.start()
        assert reached.wait(30)
        # A replica whose token would need a gradient nobody sends any more is released.
        s.run(replicas[0][0]._sync_token_queue.close(cancel_pending_enqueues=True))
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        coord.request_stop()
        done, got = s.run([gs, w])
        assert steps <= done <= steps + 1
        np.testing.assert_allclose(got, W0 - LR * done * GRADS[0], rtol=1e-6)


def test_errors_before_apply_gradients():
    opt = af.train.SyncReplicasOptimizer(af.train.GradientDescentOptimizer(1.0), 2, 3)
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_chief_queue_runner()
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_init_tokens_op()
    with pytest.raises(ValueError, match="Global step is required"):
        opt.apply_gradients([(af.constant(1.0), af.Variable(1.0))])


def test_monitored_training_session_with_the_chief_hook(graph):
    gs, w, [(opt, train)] = _build(1, 1)
    seen = {}

    class Last(af.train.SessionRunHook):
        def end(self, session):
            seen["gs"], seen["w"] = session.run([gs, w])

    hooks = [
        opt.make_session_run_hook(is_chief=True),
        af.train.StopAtStepHook(last_step=5),
        Last(),
    ]
    with af.train.MonitoredTrainingSession(hooks=hooks) as s:
        while not s.should_stop():
            s.run(train)
    assert seen["gs"] >= 5
    np.testing.assert_allclose(seen["w"], W0 - LR * seen["gs"] * GRADS[0], rtol=1e-6)
