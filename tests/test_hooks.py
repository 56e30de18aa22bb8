"""SessionRunHook and the standard hooks, run under MonitoredSession (TF1 semantics)."""

import logging

import numpy as np
import pytest

import asyncflow as af
from asyncflow.train import basic_session_run_hooks as hooks
from asyncflow.train import monitored_session as ms
from asyncflow.train import training_util
from asyncflow.train.optimizers import GradientDescentOptimizer


def _model():
    gs = training_util.get_or_create_global_step()
    x = af.placeholder(af.float32, [None, 2], name="x")
    w = af.get_variable("w", [2, 1], initializer=af.ones_initializer())
    loss = af.reduce_mean(af.square(af.matmul(x, w) - 1.0), name="loss")
    train = GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return x, loss, train, gs


FEED = np.ones((2, 2), np.float32)


def _train(mon, x, train, limit=100):
    n = 0
    while not mon.should_stop() and n < limit:
        mon.run(train, {x: FEED})
        n += 1
    return n


# -- plumbing -----------------------------------------------------------------------------


def test_session_run_args_and_context():
    args = hooks.SessionRunArgs("f")
    assert args == ("f", None, None)
    ctx = hooks.SessionRunContext(args, session="s")
    assert ctx.original_args is args and ctx.session == "s" and not ctx.stop_requested
    ctx.request_stop()
    assert ctx.stop_requested
    assert hooks.SessionRunValues(1, None, None).results == 1


def test_second_or_step_timer():
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        hooks.SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both"):
        hooks.SecondOrStepTimer(every_secs=1, every_steps=1)
    t = hooks.SecondOrStepTimer(every_steps=3)
    assert t.should_trigger_for_step(0)
    assert t.update_last_triggered_step(0) == (None, None)
    assert not t.should_trigger_for_step(0) and not t.should_trigger_for_step(2)
    assert t.should_trigger_for_step(3)
    _, steps = t.update_last_triggered_step(3)
    assert steps == 3 and t.last_triggered_step() == 3
    never = hooks.NeverTriggerTimer()
    assert not never.should_trigger_for_step(0)


def test_hook_order_and_merged_fetches(graph):
    x, loss, train, gs = _model()
    calls = []

    class Recorder(hooks.SessionRunHook):
        def __init__(self, name):
            self.name = name

        def begin(self):
            calls.append((self.name, "begin", graph.finalized))

        def after_create_session(self, session, coord):
            calls.append((self.name, "after_create_session"))

        def before_run(self, run_context):
            calls.append((self.name, "before_run"))
            assert run_context.original_args.fetches is train
            return hooks.SessionRunArgs({"gs": gs, "loss": loss})

        def after_run(self, run_context, run_values):
            calls.append((self.name, "after_run", int(run_values.results["gs"])))

        def end(self, session):
            calls.append((self.name, "end"))

    with ms.MonitoredSession(hooks=[Recorder("a"), Recorder("b")]) as mon:
        assert graph.finalized
        assert mon.run(train, {x: FEED}) is None
    assert not graph.finalized  # was not finalized before: unfinalized on close
    assert calls == [
        ("a", "begin", False),
        ("b", "begin", False),
        ("a", "after_create_session"),
        ("b", "after_create_session"),
        ("a", "before_run"),
        ("b", "before_run"),
        # TF 2.21's: the global step fetched beside the train op is the one the step
        # left (TF's ref variable fetch aliases the buffer the step incremented).
        ("a", "after_run", 1),
        ("b", "after_run", 1),
        ("a", "end"),
        ("b", "end"),
    ]


def test_feed_conflicts(graph):
    x, loss, train, gs = _model()
    feeder = hooks.FeedFnHook(lambda: {x: FEED})
    with ms.MonitoredSession(hooks=[feeder]) as mon:
        mon.run(train)  # the hook feeds x
        with pytest.raises(RuntimeError, match="fed by a SessionRunHook and user"):
            mon.run(train, {x: FEED})
    with pytest.raises(RuntimeError, match="fed by two hooks"):
        with ms.MonitoredSession(hooks=[feeder, hooks.FeedFnHook(lambda: {x: FEED})]) as mon:
            mon.run(train)


# -- StopAtStepHook -----------------------------------------------------------------------


def test_stop_at_step_arguments(graph):
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        hooks.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of"):
        hooks.StopAtStepHook(num_steps=1, last_step=2)
    with pytest.raises(RuntimeError, match="Global step should be created"):
        hooks.StopAtStepHook(num_steps=1).begin()


@pytest.mark.parametrize("kw, steps", [({"num_steps": 4}, 4), ({"last_step": 3}, 3)])
def test_stop_at_step(graph, kw, steps):
    x, loss, train, gs = _model()
    with ms.MonitoredSession(hooks=[hooks.StopAtStepHook(**kw)]) as mon:
        assert _train(mon, x, train) == steps
        assert mon.should_stop()
        with pytest.raises(RuntimeError, match="even after should_stop"):
            mon.run(train, {x: FEED})


# -- NanTensorHook ------------------------------------------------------------------------


def test_nan_tensor_hook_fails(graph):
    x, loss, train, gs = _model()
    nan_loss = loss * float("nan")
    with pytest.raises(hooks.NanLossDuringTrainingError, match="NaN loss during training"):
        with ms.MonitoredSession(hooks=[hooks.NanTensorHook(nan_loss)]) as mon:
            mon.run(train, {x: FEED})


def test_nan_tensor_hook_stops(graph):
    x, loss, train, gs = _model()
    hook = hooks.NanTensorHook(loss * float("nan"), fail_on_nan_loss=False)
    with ms.MonitoredSession(hooks=[hook]) as mon:
        assert _train(mon, x, train) == 1


# -- LoggingTensorHook, StepCounterHook ---------------------------------------------------


def test_logging_tensor_hook_arguments():
    with pytest.raises(ValueError, match="exactly one of every_n_iter"):
        hooks.LoggingTensorHook(["a"])
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        hooks.LoggingTensorHook(["a"], every_n_iter=0)


def test_logging_tensor_hook_logs(graph, caplog):
    x, loss, train, gs = _model()
    hook = hooks.LoggingTensorHook({"step": gs.name, "w": "w"}, every_n_iter=2, at_end=True)
    with caplog.at_level(logging.INFO, logger="asyncflow.train"):
        with ms.MonitoredSession(hooks=[hook, hooks.StopAtStepHook(num_steps=5)]) as mon:
            _train(mon, x, train)
    lines = [r.getMessage() for r in caplog.records if "step = " in r.getMessage()]
    assert len(lines) == 4  # iterations 0, 2, 4 and the end
    assert lines[0].startswith("step = ") and ", w = " in lines[0]  # sorted tags
    assert "(" in lines[1] and "sec)" in lines[1]  # elapsed time after the first
    assert "step = 5" in lines[-1]


def test_logging_tensor_hook_formatter(graph, caplog):
    x, loss, train, gs = _model()
    hook = hooks.LoggingTensorHook([gs], every_n_iter=1, formatter=lambda v: f"fmt {len(v)}")
    with caplog.at_level(logging.INFO, logger="asyncflow.train"):
        with ms.MonitoredSession(hooks=[hook]) as mon:
            mon.run(train, {x: FEED})
    assert "fmt 1" in caplog.text


def test_step_counter_hook(graph):
    with pytest.raises(ValueError, match="exactly one of every_n_steps"):
        hooks.StepCounterHook(every_n_steps=None)
    x, loss, train, gs = _model()
    counter = hooks.StepCounterHook(every_n_steps=2)
    with ms.MonitoredSession(hooks=[counter, hooks.StopAtStepHook(num_steps=5)]) as mon:
        _train(mon, x, train)
    assert counter.last_rate is not None and counter.last_rate > 0


# -- FinalOpsHook, FeedFnHook -------------------------------------------------------------


def test_final_ops_hook(graph):
    x, loss, train, gs = _model()
    final = hooks.FinalOpsHook({"step": gs, "loss": loss}, {x: FEED})
    with ms.MonitoredSession(hooks=[final, hooks.StopAtStepHook(num_steps=3)]) as mon:
        _train(mon, x, train)
    assert final.final_ops_values["step"] == 3
    assert np.isfinite(final.final_ops_values["loss"])


def test_final_ops_hook_not_run_on_error(graph):
    x, loss, train, gs = _model()
    final = hooks.FinalOpsHook(gs)
    with pytest.raises(ZeroDivisionError):
        with ms.MonitoredSession(hooks=[final]):
            1 / 0  # noqa: B018
    assert final.final_ops_values is None


# -- CheckpointSaverHook ------------------------------------------------------------------


class FakeSaver:
    """A Saver stand-in (no asave: the hook saves inline)."""

    def __init__(self):
        self.saves = []

    def save(self, sess, save_path, global_step=None, write_meta_graph=True):
        self.saves.append((save_path, int(global_step)))
        return f"{save_path}-{global_step}"


class Listener(hooks.CheckpointSaverListener):
    def __init__(self, stop_at=None):
        self.events = []
        self.stop_at = stop_at

    def begin(self):
        self.events.append("begin")

    def before_save(self, session, step):
        self.events.append(("before", step))

    def after_save(self, session, step):
        self.events.append(("after", step))
        return self.stop_at is not None and step >= self.stop_at

    def end(self, session, step):
        self.events.append(("end", step))


def test_checkpoint_saver_hook_arguments(graph, tmp_path):
    with pytest.raises(ValueError, match="both saver and scaffold"):
        hooks.CheckpointSaverHook(
            str(tmp_path), save_steps=1, saver=FakeSaver(), scaffold=ms.Scaffold()
        )
    with pytest.raises(ValueError, match="Either every_secs"):
        hooks.CheckpointSaverHook(str(tmp_path))
    with pytest.raises(RuntimeError, match="Global step should be created"):
        hooks.CheckpointSaverHook(str(tmp_path), save_steps=1).begin()


def test_checkpoint_saver_hook_schedule_with_listeners(graph, tmp_path):
    x, loss, train, gs = _model()
    saver, listener = FakeSaver(), Listener()
    hook = hooks.CheckpointSaverHook(
        str(tmp_path), save_steps=2, saver=saver, listeners=[listener]
    )
    with ms.MonitoredSession(hooks=[hook, hooks.StopAtStepHook(num_steps=5)]) as mon:
        _train(mon, x, train)
    prefix = str(tmp_path / "model.ckpt")
    assert saver.saves == [(prefix, 0), (prefix, 2), (prefix, 4), (prefix, 5)]
    assert listener.events == [
        "begin",
        ("before", 0), ("after", 0),
        ("before", 2), ("after", 2),
        ("before", 4), ("after", 4),
        ("before", 5), ("after", 5),
        ("end", 5),
    ]  # fmt: skip


def test_checkpoint_listener_requests_stop(graph, tmp_path):
    x, loss, train, gs = _model()
    hook = hooks.CheckpointSaverHook(
        str(tmp_path), save_steps=1, saver=FakeSaver(), listeners=[Listener(stop_at=3)]
    )
    with ms.MonitoredSession(hooks=[hook]) as mon:
        assert _train(mon, x, train) == 3


def test_checkpoint_saver_hook_needs_a_saver(graph, tmp_path):
    x, loss, train, gs = _model()
    af.add_to_collection(af.GraphKeys.SAVERS, FakeSaver())
    af.add_to_collection(af.GraphKeys.SAVERS, FakeSaver())
    hook = hooks.CheckpointSaverHook(str(tmp_path), save_steps=1)
    with pytest.raises(RuntimeError, match="More than one item in collection"):
        ms.MonitoredSession(
            ms.ChiefSessionCreator(scaffold=ms.Scaffold(saver=FakeSaver())), hooks=[hook]
        )


def test_checkpoint_saver_hook_background_saves(graph, tmp_path):
    from asyncflow.train import saver as saver_mod

    x, loss, train, gs = _model()
    saver = saver_mod.Saver(max_to_keep=10)
    hook = hooks.CheckpointSaverHook(str(tmp_path), save_steps=2, saver=saver)
    with ms.MonitoredSession(hooks=[hook, hooks.StopAtStepHook(num_steps=5)]) as mon:
        _train(mon, x, train)
        w_final = mon._sess.run("w:0")
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in saver.last_checkpoints)
    assert steps == [0, 2, 4, 5]
    assert saver_mod.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-5")
    # Each checkpoint holds the state of the step it is named after.
    with af.Graph().as_default():
        _model()
        restorer = saver_mod.Saver()
        with af.Session() as sess:
            for step in steps:
                restorer.restore(sess, str(tmp_path / f"model.ckpt-{step}"))
                assert sess.run("global_step:0") == step
            np.testing.assert_allclose(sess.run("w:0"), w_final)
