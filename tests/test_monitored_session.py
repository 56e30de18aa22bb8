"""MonitoredSession, MonitoredTrainingSession and the async variant (TF1 semantics)."""

import sys
import types

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.train import basic_session_run_hooks as hooks
from asyncflow.train import monitored_session as ms
from asyncflow.train import training_util
from asyncflow.train.optimizers import GradientDescentOptimizer

FEED = np.ones((2, 2), np.float32)


def _model():
    gs = training_util.get_or_create_global_step()
    x = af.placeholder(af.float32, [None, 2], name="x")
    w = af.get_variable("w", [2, 1], initializer=af.ones_initializer())
    loss = af.reduce_mean(af.square(af.matmul(x, w) - 1.0), name="loss")
    train = GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return x, train, gs


def _train(mon, x, train, limit=100):
    n = 0
    while not mon.should_stop() and n < limit:
        mon.run(train, {x: FEED})
        n += 1
    return n


class CountingCreator(ms.SessionCreator):
    def __init__(self, inner):
        self.inner = inner
        self.created = 0

    def create_session(self):
        self.created += 1
        return self.inner.create_session()

    async def acreate_session(self):
        self.created += 1
        return await self.inner.acreate_session()


class AbortOnce(hooks.SessionRunHook):
    """Raises AbortedError from the step's run once (as a lost worker would)."""

    def __init__(self, at_call=2):
        self.calls = 0
        self.at_call = at_call

    def after_run(self, run_context, run_values):
        self.calls += 1
        if self.calls == self.at_call:
            raise errors.AbortedError(None, None, "preempted")


# -- initialisation -----------------------------------------------------------------------


def test_training_session_initialises_and_finalizes(graph):
    x, train, gs = _model()
    with ms.MonitoredTrainingSession() as mon:
        assert graph.finalized
        assert mon.run(gs) == 0
        mon.run(train, {x: FEED})
        assert mon.run(gs) == 1
        assert not mon.should_stop()
    assert not graph.finalized
    assert mon.should_stop()
    with pytest.raises(RuntimeError, match="closed"):
        mon.run(gs)


def test_already_finalized_graph_stays_finalized(graph):
    _model()
    scaffold = ms.Scaffold().finalize()  # builds the default ops, then finalizes
    assert graph.finalized
    with ms.MonitoredTrainingSession(scaffold=scaffold):
        pass
    assert graph.finalized


def test_double_close_raises(graph):
    _model()
    mon = ms.MonitoredSession()
    mon.close()
    with pytest.raises(RuntimeError, match="already closed"):
        mon.close()


def test_exit_suppresses_out_of_range(graph):
    _model()
    with ms.MonitoredSession() as mon:
        raise errors.OutOfRangeError(None, None, "end of input")
    assert mon.should_stop()
    with pytest.raises(errors.InvalidArgumentError):
        with ms.MonitoredSession():
            raise errors.InvalidArgumentError(None, None, "bad")


def test_scaffold_init_fn_and_feed(graph):
    x, train, gs = _model()
    v = af.Variable(0.0, name="v")
    seen = []
    scaffold = ms.Scaffold(init_fn=lambda scaffold, sess: seen.append((scaffold, sess)))
    with ms.MonitoredSession(ms.ChiefSessionCreator(scaffold=scaffold)) as mon:
        assert mon.run(v) == 0.0
    assert seen[0][0] is scaffold


def test_model_not_ready_is_runtime_error(graph):
    _model()
    scaffold = ms.Scaffold(init_op=af.no_op())
    with pytest.raises(RuntimeError, match="Init operations did not make model ready"):
        ms.MonitoredSession(ms.ChiefSessionCreator(scaffold=scaffold))


def test_scaffold_collection_with_two_items(graph):
    _model()
    af.add_to_collection(af.GraphKeys.INIT_OP, af.no_op())
    af.add_to_collection(af.GraphKeys.INIT_OP, af.no_op())
    with pytest.raises(RuntimeError, match='More than one item in the collection "init_op"'):
        ms.Scaffold().finalize()


def test_worker_session_creator_times_out(graph):
    _model()
    creator = ms.WorkerSessionCreator(max_wait_secs=0)
    with pytest.raises(errors.DeadlineExceededError, match="not ready after waiting 0 secs"):
        creator.create_session()


# -- checkpoints: restore on start, recovery ----------------------------------------------


def test_restores_latest_checkpoint(tmp_path):
    ckpt = str(tmp_path)
    with af.Graph().as_default():
        x, train, gs = _model()
        with ms.MonitoredTrainingSession(
            checkpoint_dir=ckpt,
            save_checkpoint_steps=100,
            log_step_count_steps=None,
            hooks=[hooks.StopAtStepHook(num_steps=4)],
        ) as mon:
            _train(mon, x, train)
            w4 = mon._sess.run("w:0")
    with af.Graph().as_default():
        x, train, gs = _model()
        with ms.MonitoredTrainingSession(
            checkpoint_dir=ckpt,
            save_checkpoint_steps=100,
            hooks=[hooks.StopAtStepHook(last_step=6)],
        ) as mon:
            assert mon.run(gs) == 4  # continued, not re-initialised
            np.testing.assert_allclose(mon.run("w:0"), w4)
            assert _train(mon, x, train) == 2
    from asyncflow.train.saver import latest_checkpoint

    assert latest_checkpoint(ckpt).endswith("model.ckpt-6")


def test_default_checkpoint_schedule_is_600_secs(graph, tmp_path):
    _model()
    mon = ms.MonitoredTrainingSession(checkpoint_dir=str(tmp_path))
    savers = [h for h in mon._hooks if isinstance(h, hooks.CheckpointSaverHook)]
    counters = [h for h in mon._hooks if isinstance(h, hooks.StepCounterHook)]
    assert savers[0]._timer._every_secs == 600 and savers[0]._timer._every_steps is None
    assert counters[0]._timer._every_steps == 100
    mon.close()
    mon = ms.MonitoredTrainingSession(checkpoint_dir=None)
    assert not mon._hooks
    mon.close()


def test_chief_only_hooks_and_non_chief(graph):
    _model()
    chief_hook, hook = hooks.FeedFnHook(dict), hooks.FeedFnHook(dict)
    mon = ms.MonitoredTrainingSession(hooks=[hook], chief_only_hooks=[chief_hook])
    assert mon._hooks == [chief_hook, hook]
    mon.close()


def test_recovers_from_aborted_error(tmp_path):
    with af.Graph().as_default():
        x, train, gs = _model()
        scaffold = ms.Scaffold()
        creator = CountingCreator(
            ms.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=str(tmp_path))
        )
        saver_hook = hooks.CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=scaffold)
        abort = AbortOnce(at_call=3)
        with ms.MonitoredSession(creator, hooks=[saver_hook, abort]) as mon:
            for _ in range(4):
                mon.run(train, {x: FEED})
            assert creator.created == 2
            # As TF1 with its synchronous saves: the saver hook (before the aborting
            # hook) checkpointed step 3, recovery waited for that save and restored
            # it, the aborted call was retried (step 4), and one more call ran.
            assert mon.run(gs) == 5


def test_singular_session_does_not_recover(graph):
    x, train, gs = _model()
    with pytest.raises(errors.AbortedError):
        with ms.SingularMonitoredSession(hooks=[AbortOnce(at_call=1)]) as mon:
            assert isinstance(mon.raw_session(), af.Session)
            mon.run(train, {x: FEED})


def test_run_step_fn(graph):
    x, train, gs = _model()

    def step_fn(step_context):
        step_context.run_with_hooks(train, {x: FEED})
        if step_context.session.run(gs) >= 2:
            step_context.request_stop()
        return "ran"

    with ms.MonitoredSession() as mon:
        with pytest.raises(ValueError, match="step_fn"):
            mon.run_step_fn(lambda a, b: None)
        results = []
        while not mon.should_stop():
            results.append(mon.run_step_fn(step_fn))
    assert results == ["ran", None]


def test_queue_runners_start_with_the_session(graph, monkeypatch):
    _model()
    started = []
    fake = types.ModuleType("asyncflow.train.queue_runner")
    fake.start_queue_runners = lambda sess=None, coord=None: started.append((sess, coord))
    monkeypatch.setitem(sys.modules, "asyncflow.train.queue_runner", fake)
    with ms.MonitoredSession() as mon:
        assert started == []  # no QUEUE_RUNNERS: nothing to start
    graph.add_to_collection(af.GraphKeys.QUEUE_RUNNERS, object())
    with ms.MonitoredSession() as mon:
        assert len(started) == 1 and started[0][0] is mon._sess
        assert not started[0][1].should_stop()
    assert started[0][1].should_stop()  # close stops the coordinator


# -- async --------------------------------------------------------------------------------


async def test_async_monitored_training_session(tmp_path):
    ckpt = str(tmp_path)
    with af.Graph().as_default():
        x, train, gs = _model()
        final = hooks.FinalOpsHook(gs)
        async with ms.AsyncMonitoredTrainingSession(
            checkpoint_dir=ckpt,
            save_checkpoint_steps=2,
            hooks=[hooks.StopAtStepHook(num_steps=5), hooks.NanTensorHook("loss:0"), final],
        ) as mon:
            n = 0
            while not mon.should_stop():
                await mon.arun(train, {x: FEED})
                n += 1
        assert n == 5 and final.final_ops_values == 5
    with af.Graph().as_default():
        x, train, gs = _model()
        async with ms.AsyncMonitoredTrainingSession(checkpoint_dir=ckpt) as mon:
            assert await mon.arun(gs) == 5


async def test_async_session_runs_plain_sync_hooks_off_loop(graph):
    x, train, gs = _model()

    class SyncHook(hooks.SessionRunHook):
        def after_create_session(self, session, coord):
            self.start = session.run(gs)  # a blocking call, run on a worker thread

        def after_run(self, run_context, run_values):
            self.step = run_context.session.run(gs)

    hook = SyncHook()
    async with ms.AsyncMonitoredSession(hooks=[hook]) as mon:
        await mon.arun(train, {x: FEED})
    assert hook.start == 0 and hook.step == 1


async def test_async_recovery(graph, tmp_path):
    x, train, gs = _model()
    creator = CountingCreator(ms.ChiefSessionCreator())
    async with ms.AsyncMonitoredSession(creator, hooks=[AbortOnce(at_call=1)]) as mon:
        await mon.arun(train, {x: FEED})
        assert creator.created == 2
        assert await mon.arun(gs) == 1  # re-initialised (no checkpoint dir), one step


def test_the_checkpoint_hook_writes_graph_pbtxt(tmp_path):
    # (TF's CheckpointSaverHook writes the graph beside the checkpoints)
    with af.Graph().as_default():
        step = af.train.get_or_create_global_step()
        inc = af.assign_add(step, 1)
        with af.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
            sess.run(inc)
    text = (tmp_path / "graph.pbtxt").read_text()
    assert 'name: "global_step"' in text and "_output_shapes" in text
