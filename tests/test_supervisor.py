"""TF1's older training harness and helpers: SessionManager, Supervisor, LooperThread,
basic_train_loop, GlobalStepWaiterHook, checkpoints_iterator, warm_start/VocabInfo."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(60)


def _model():
    w = af.Variable([1.0, 2.0], name="w")
    step = af.train.get_or_create_global_step()
    train = af.train.GradientDescentOptimizer(0.5).minimize(
        af.reduce_sum(af.square(w)), global_step=step
    )
    return w, step, train


# -- SessionManager --------------------------------------------------------------------------


def test_prepare_session_initialises_then_restores(tmp_path):
    with af.Graph().as_default():
        w, step, train = _model()
        saver = af.train.Saver()
        sm = af.train.SessionManager(ready_op=af.report_uninitialized_variables())
        sess = sm.prepare_session("", init_op=af.global_variables_initializer(), saver=saver,
                                  checkpoint_dir=str(tmp_path))  # fmt: skip
        sess.run(train)
        saved = sess.run(w)
        saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
        sess.close()
        sess = sm.prepare_session("", init_op=af.global_variables_initializer(), saver=saver,
                                  checkpoint_dir=str(tmp_path))  # fmt: skip
        np.testing.assert_array_equal(sess.run(w), saved)
        assert sess.run(step) == 1
        sess.close()
        sess, restored = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
        assert restored and sess.run(step) == 1
        sess.close()


def test_session_manager_errors():
    with af.Graph().as_default():
        _model()
        sm = af.train.SessionManager(ready_op=af.report_uninitialized_variables(),
                                     recovery_wait_secs=1)  # fmt: skip
        with pytest.raises(RuntimeError, match="no init_op"):
            sm.prepare_session("")
        sess, restored = sm.recover_session("")
        assert not restored
        sess.close()
        with pytest.raises(errors.DeadlineExceededError, match="not ready"):
            sm.wait_for_session("", max_wait_secs=0)
        with pytest.raises(ValueError, match="local_init_op"):
            af.train.SessionManager(ready_for_local_init_op=af.constant([""]))


def test_wait_for_session_returns_when_ready():
    with af.Graph().as_default():
        local = af.Variable(3.0, collections=[af.GraphKeys.LOCAL_VARIABLES])
        sm = af.train.SessionManager(local_init_op=af.local_variables_initializer(),
                                     ready_op=af.report_uninitialized_variables())  # fmt: skip
        sess = sm.wait_for_session("", max_wait_secs=0)
        assert sess.run(local) == 3.0
        sess.close()


# -- Supervisor and basic_train_loop ----------------------------------------------------------


def test_supervisor_trains_checkpoints_and_restores(tmp_path):
    with af.Graph().as_default():
        w, step, train = _model()
        sv = af.train.Supervisor(logdir=str(tmp_path), save_model_secs=3600,
                                 save_summaries_secs=0)  # fmt: skip
        assert af.get_default_graph().finalized
        calls = []

        def train_step(sess, n):
            calls.append(sess.run(train))
            if len(calls) == n:
                sv.request_stop()

        af.train.basic_train_loop(sv, train_step, args=(4,))
        assert len(calls) == 4 and sv.should_stop()
    latest = af.train.latest_checkpoint(str(tmp_path))
    assert latest is not None  # the checkpoint thread saves once at start
    saved = af.train.load_variable(latest, "w")
    with af.Graph().as_default():
        w, step, train = _model()
        sv = af.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
        with sv.managed_session() as sess:
            np.testing.assert_array_equal(sess.run(w), saved)


def test_managed_session_stops_cleanly_on_out_of_range_and_reraises_others():
    with af.Graph().as_default():
        _model()
        sv = af.train.Supervisor(logdir=None)
        with sv.managed_session() as sess:
            raise errors.OutOfRangeError(None, None, "input exhausted")
        assert sv.should_stop()
    with af.Graph().as_default():
        _model()
        sv = af.train.Supervisor(logdir=None)
        with pytest.raises(ValueError, match="boom"):
            with sv.managed_session() as sess:
                assert sess.run(af.train.get_global_step()) == 0
                raise ValueError("boom")


def test_non_chief_waits_for_a_ready_model():
    with af.Graph().as_default():
        _model()
        sv = af.train.Supervisor(is_chief=False, logdir=None, recovery_wait_secs=1)
        with pytest.raises(errors.DeadlineExceededError):
            sv.prepare_or_wait_for_session(max_wait_secs=0)
        with pytest.raises(RuntimeError, match="chief"):
            sv.start_standard_services(None)


# -- LooperThread --------------------------------------------------------------------------


def test_looper_thread_runs_target_until_stop():
    coord = af.train.Coordinator()
    count = []

    def target(limit):
        count.append(1)
        if len(count) == limit:
            coord.request_stop()

    looper = af.train.LooperThread.loop(coord, None, target, args=(5,))
    coord.join([looper], stop_grace_period_secs=10)
    assert len(count) == 5 and not looper.is_alive()
    timed = af.train.LooperThread(af.train.Coordinator(), 3600, target, args=(6,))
    timed.start()  # the first call is at once, the next an hour away: stop ends the wait
    coord2 = timed._coord
    coord2.request_stop()
    coord2.join([timed], stop_grace_period_secs=10)
    assert len(count) in (5, 6)
    with pytest.raises(ValueError, match="target"):
        af.train.LooperThread(af.train.Coordinator(), None, args=(1,))


def test_looper_thread_reports_exceptions():
    coord = af.train.Coordinator()

    def bad():
        raise RuntimeError("in looper")

    looper = af.train.LooperThread.loop(coord, None, bad)
    with pytest.raises(RuntimeError, match="in looper"):
        coord.join([looper], stop_grace_period_secs=10)


# -- GlobalStepWaiterHook --------------------------------------------------------------------


class _Steps:
    def __init__(self, values):
        self.values = list(values)

    def run(self, fetch):
        return self.values.pop(0)


class _Ctx:
    def __init__(self, session):
        self.session = session


def test_global_step_waiter_hook_waits_for_the_step():
    with af.Graph().as_default():
        af.train.get_or_create_global_step()
        hook = af.train.GlobalStepWaiterHook(wait_until_step=3)
        hook._poll_secs = 0
        hook.begin()
        steps = _Steps([0, 1, 3])
        assert hook.before_run(_Ctx(steps)) is None
        assert steps.values == []  # polled until 3
        assert hook.before_run(_Ctx(_Steps([]))) is None  # started: no more polling
        now = af.train.GlobalStepWaiterHook(0)
        now.begin()
        assert now.before_run(_Ctx(_Steps([]))) is None
    with af.Graph().as_default():
        with pytest.raises(RuntimeError, match="Global step"):
            af.train.GlobalStepWaiterHook(1).begin()


def test_global_step_waiter_hook_in_a_monitored_session():
    with af.Graph().as_default():
        w, step, train = _model()
        hooks = [af.train.GlobalStepWaiterHook(0), af.train.StopAtStepHook(last_step=2)]
        with af.train.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train)


# -- checkpoints_iterator ----------------------------------------------------------------------


def test_checkpoints_iterator_yields_each_new_checkpoint(tmp_path):
    with af.Graph().as_default():
        w, step, train = _model()
        saver = af.train.Saver()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            first = saver.save(sess, str(tmp_path / "m"), global_step=1)
            more = iter([False, True])

            def timeout_fn():
                keep_waiting = next(more)
                if not keep_waiting:
                    saver.save(sess, str(tmp_path / "m"), global_step=2)
                return keep_waiting

            got = list(af.train.checkpoints_iterator(str(tmp_path), timeout=0,
                                                     timeout_fn=timeout_fn))  # fmt: skip
    assert got == [first, str(tmp_path / "m-2")]
    assert list(af.train.checkpoints_iterator(str(tmp_path / "none"), timeout=0)) == []


# -- warm_start -----------------------------------------------------------------------------


def _save(tmp_path, **values):
    with af.Graph().as_default():
        vs = {k: af.Variable(np.float32(v), name=k) for k, v in values.items()}
        saver = af.train.Saver()
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            return saver.save(s, str(tmp_path / "old")), {k: s.run(v) for k, v in vs.items()}


def test_warm_start_by_regex_and_previous_names(tmp_path):
    ckpt, old = _save(tmp_path, a=[1.0, 2.0], b=[[3.0]], c=[4.0])
    with af.Graph().as_default():
        a = af.Variable(np.zeros(2, np.float32), name="a")
        b = af.Variable(np.zeros((1, 1), np.float32), name="b")
        new_c = af.Variable(np.zeros(1, np.float32), name="new_c")
        af.train.warm_start(ckpt, vars_to_warm_start=["a", "new_c"],
                            var_name_to_prev_var_name={"new_c": "c"})  # fmt: skip
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            np.testing.assert_array_equal(s.run(a), old["a"])
            np.testing.assert_array_equal(s.run(b), [[0.0]])
            np.testing.assert_array_equal(s.run(new_c), old["c"])
        with pytest.raises(ValueError, match="were not used"):
            af.train.warm_start(ckpt, "a", var_name_to_prev_var_name={"zz": "c"})


def test_warm_start_remaps_vocabulary_rows(tmp_path):
    ckpt, old = _save(tmp_path, emb=[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    (tmp_path / "old.txt").write_text("apple\nbanana\ncherry\n")
    (tmp_path / "new.txt").write_text("cherry\ndate\napple\n")
    with af.Graph().as_default():
        emb = af.Variable(np.full((4, 2), 9.0, np.float32), name="emb")
        info = af.train.VocabInfo(str(tmp_path / "new.txt"), 3, 1, str(tmp_path / "old.txt"),
                                  backup_initializer=af.constant_initializer(-1.0))  # fmt: skip
        af.train.warm_start(ckpt, None, var_name_to_vocab_info={"emb": info})
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = s.run(emb)
    np.testing.assert_array_equal(got, [[3, 3], [-1, -1], [1, 1], [-1, -1]])
    with pytest.raises(ValueError, match="axis"):
        af.train.VocabInfo("n", 1, 0, "o", axis=2)


def test_threads_left_running_are_none():
    assert not [t for t in threading.enumerate() if isinstance(t, af.train.LooperThread)]
