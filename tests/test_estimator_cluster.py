"""tf.estimator on a cluster: RunConfig from TF_CONFIG, and train_and_evaluate's tasks.

RunConfig's answers for 55 TF_CONFIG cases (tests/fixtures/estimator_tf_config_tf.json)
were recorded from TF 2.15.1 (tensorflow_estimator) by
tests/fixtures/record_estimator_tf_config_tf.py; the other literals below were recorded
from TF 2.15.1 running the same programs with `import tensorflow.compat.v1 as tf`,
including a 1-ps, chief, worker, evaluator cluster as four processes on localhost.
Here the cluster runs in one process: in-process servers, one thread per task.
"""

import json
import os
import pathlib
import socket
import threading
import time

import numpy as np
import pytest

import asyncflow as af
from asyncflow.distributed import client
from asyncflow.estimator import training
from asyncflow.train import monitored_session

E = af.estimator

pytestmark = pytest.mark.timeout(60)

TF_RUN_CONFIG = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "estimator_tf_config_tf.json").read_text()
)

# Where asyncflow differs on purpose: TF's ClusterSpec names a ClusterDef (asyncflow's
# says ClusterSpec), and TF fails on TF_CONFIG "null" by accident (AttributeError).
_DIFFERS = {
    "cluster_list": ("TypeError", "`cluster` must be a dictionary mapping one or more job"),
    "null_json": ("ValueError", "TF_CONFIG must be a JSON object, got None"),
}


def _run_config_answers(rc) -> dict:
    out = {
        key: getattr(rc, key)
        for key in (
            "task_type",
            "task_id",
            "master",
            "evaluation_master",
            "is_chief",
            "num_ps_replicas",
            "num_worker_replicas",
            "global_id_in_cluster",
            "service",
            "model_dir",
        )
    }
    out["cluster_spec"] = {j: rc.cluster_spec.job_tasks(j) for j in rc.cluster_spec.jobs}
    out["cluster_bool"] = bool(rc.cluster_spec)
    sc = rc.session_config
    out["session_config"] = sc and {
        "device_filters": list(sc.device_filters),
        "allow_soft_placement": sc.allow_soft_placement,
        "meta_optimizer_iterations": sc.graph_options.rewrite_options.meta_optimizer_iterations,
    }
    return out


@pytest.mark.parametrize("case", sorted(TF_RUN_CONFIG))
def test_run_config_reads_tf_config_as_tf(case, monkeypatch):
    record = TF_RUN_CONFIG[case]
    if record["tf_config"] is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", record["tf_config"])
    kwargs = dict(record["kwargs"])
    if kwargs.get("session_config"):
        kwargs["session_config"] = af.ConfigProto(log_device_placement=True)
    want = record["want"]
    try:
        rc = E.RunConfig(**kwargs)
    except Exception as e:  # noqa: BLE001 - compared with TF's error below
        if case in _DIFFERS:
            assert (type(e).__name__, str(e)[: len(_DIFFERS[case][1])]) == _DIFFERS[case]
        else:
            assert {"error": type(e).__name__, "message": str(e)} == want
        return
    got = _run_config_answers(rc)
    got["replace_keeps"] = _run_config_answers(rc.replace(save_summary_steps=7)) == got
    assert got == want


def _set_task(monkeypatch, cluster, task_type, index, **extra):
    tf_config = {"cluster": cluster, "task": {"type": task_type, "index": index}, **extra}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))


def _model_fn(features, labels, mode):
    w = af.get_variable("w", [1, 1], initializer=af.zeros_initializer())
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    loss = af.reduce_mean(af.square(pred - labels))
    step = af.train.get_global_step()
    train_op = af.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    mae = af.metrics.mean_absolute_error(labels, pred)
    return E.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={"mae": mae})


def _train_input_fn():
    x = np.linspace(-1, 1, 32).astype(np.float32).reshape(-1, 1)
    return af.data.Dataset.from_tensor_slices(({"x": x}, 2 * x + 1)).repeat().batch(8)


def _eval_input_fn():
    x = np.linspace(-1, 1, 16).astype(np.float32).reshape(-1, 1)
    return af.data.Dataset.from_tensor_slices(({"x": x}, 2 * x + 1)).batch(8)


# Recorded from TF 2.15.1: the default device_fn of a chief and of worker 1 in a cluster
# {chief: 1, ps: 2, worker: 2} (replica_device_setter over the 2 ps, by variable order).
_C = {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"], "worker": ["h3:1", "h4:1"]}
_TF_DEVICES = {
    "Adagrad": "/job:ps/task:0",
    "Adagrad/update_w/ApplyAdagrad": "/job:ps/task:1",
    "global_step": "/job:ps/task:0",
    "global_step/read": "/job:ps/task:0",
    "gradients/y_grad/MatMul": "/job:{job}/task:{task}",
    "gradients/y_grad/MatMul_1": "/job:{job}/task:{task}",
    "gradients/y_grad/tuple/control_dependency": "/job:{job}/task:{task}",
    "gradients/y_grad/tuple/control_dependency_1": "/job:{job}/task:{task}",
    "v": "/job:ps/task:0",
    "v/read": "/job:ps/task:0",
    "w": "/job:ps/task:1",
    "w/Adagrad": "/job:ps/task:1",
    "w/Adagrad/read": "/job:ps/task:1",
    "w/read": "/job:ps/task:1",
    "y": "/job:{job}/task:{task}",
    "z": "/job:{job}/task:{task}/device:CPU:0",
}


@pytest.mark.parametrize("job,task", [("chief", 0), ("worker", 1)])
def test_default_device_fn_puts_variables_on_the_ps_as_tf(job, task, monkeypatch, tmp_path):
    _set_task(monkeypatch, _C, job, task)
    est = E.Estimator(_model_fn, model_dir=str(tmp_path), config=E.RunConfig())
    with af.Graph().as_default() as g, g.device(est._device_fn):
        gs = af.train.get_or_create_global_step()
        w = af.get_variable("w", [2, 2])
        v = af.get_variable("v", [3])
        y = af.matmul(w, w, name="y")
        with af.device("/cpu:0"):
            af.identity(v, name="z")
        af.train.AdagradOptimizer(0.1).minimize(af.reduce_sum(y), global_step=gs)
        kinds = ("VariableV2", "VarHandleOp", "MatMul", "Identity", "AssignAdd", "ApplyAdagrad")
        got = {op.name: op.device for op in g.get_operations() if op.type in kinds}
    want = {k: v.format(job=job, task=task) for k, v in _TF_DEVICES.items()}
    assert got == want


def _specs(max_steps=1):
    return (
        E.TrainSpec(_train_input_fn, max_steps=max_steps),
        E.EvalSpec(_eval_input_fn, start_delay_secs=0, throttle_secs=0),
    )


# Recorded from TF 2.15.1.
_TF_TASK_ERRORS = {
    "evaluator": (
        {"type": "evaluator", "index": 1},
        "For distributed training, there can only be one `evaluator` task (with task id 0).  "
        "Given task id 1",
    ),
    "zeta": (
        {"type": "zeta", "index": 0},
        "Task type zeta is not supported. Supported task types are ['chief', 'evaluator', "
        "'master', 'ps', 'worker']",
    ),
    "local": (
        {"type": "local", "index": 0},
        "`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and `task` properties "
        "in TF_CONFIG absent triggers train and evaluate `Estimator` locally "
        "(non-distributed).",
    ),
}


@pytest.mark.parametrize("case", sorted(_TF_TASK_ERRORS))
def test_train_and_evaluate_refuses_tasks_it_cannot_run_as_tf(case, monkeypatch, tmp_path):
    task, message = _TF_TASK_ERRORS[case]
    cluster = dict(_C, **({task["type"]: ["x:1"]} if task["type"] in ("zeta", "local") else {}))
    _set_task(monkeypatch, cluster, task["type"], task["index"])
    est = E.Estimator(_model_fn, model_dir=str(tmp_path), config=E.RunConfig())
    with pytest.raises(ValueError) as info:
        E.train_and_evaluate(est, *_specs())
    assert str(info.value) == message


@pytest.mark.parametrize("job", ["ps", "evaluator"])
def test_train_on_a_ps_or_evaluator_config_is_refused_as_tf(job, monkeypatch, tmp_path):
    _set_task(monkeypatch, _C, job, 0)
    est = E.Estimator(_model_fn, model_dir=str(tmp_path), config=E.RunConfig())
    with pytest.raises(ValueError) as info:
        est.train(_train_input_fn, max_steps=1)
    assert str(info.value).startswith(
        "Train has been called wrong configuration. Please use "
        "tf.estimator.train_and_evaluate which calls proper API according to given "
        "configuration. Current configuration: "
    )


def test_a_single_chief_cluster_trains_in_process_without_a_server(monkeypatch, tmp_path):
    # TF 2.15.1: master "" (no server), train_and_evaluate returns None, and only the
    # chief's files: checkpoints 0 and 1, graph.pbtxt, events, no eval dir.
    _set_task(monkeypatch, {"chief": ["localhost:1"]}, "chief", 0)
    config = E.RunConfig(save_checkpoints_steps=1, log_step_count_steps=1)
    est = E.Estimator(_model_fn, model_dir=str(tmp_path), config=config)
    assert est.config.master == ""
    assert E.train_and_evaluate(est, *_specs()) is None
    files = sorted(f for f in os.listdir(tmp_path) if not f.startswith("events.out"))
    assert files == [
        "checkpoint",
        "graph.pbtxt",
        "model.ckpt-0.data-00000-of-00001",
        "model.ckpt-0.index",
        "model.ckpt-0.meta",
        "model.ckpt-1.data-00000-of-00001",
        "model.ckpt-1.index",
        "model.ckpt-1.meta",
    ]


def test_start_std_server_needs_the_cluster_and_a_master():
    class Config:
        cluster_spec = af.train.ClusterSpec({})
        task_type, task_id, master = "worker", 0, ""

    with pytest.raises(RuntimeError, match="be sure to specify cluster_spec, task_type, and"):
        training.start_std_server(Config)
    Config.cluster_spec = af.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]})
    with pytest.raises(RuntimeError, match="be sure to specify master in RunConfig"):
        training.start_std_server(Config)


# -- a small cluster in one process --------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def servers(monkeypatch):
    """The servers train_and_evaluate starts (stopped at the end: a ps's join returns)."""
    monkeypatch.setenv("ASYNCFLOW_CLUSTER_SECRET", "estimator-cluster-test")
    # A worker that finds the chief's model not ready yet retries after this long (TF's
    # 30 s would outlast the whole run).
    monkeypatch.setattr(monitored_session.WorkerSessionCreator, "recovery_wait_secs", 0.05)
    started = []
    real = training.start_std_server

    def recording(config):
        server = real(config)
        if server is not None:
            started.append(server)
        return server

    monkeypatch.setattr(training, "start_std_server", recording)
    yield started
    for server in started:
        server.stop()


class _Task(threading.Thread):
    """One task's train_and_evaluate (its RunConfig made under its own TF_CONFIG)."""

    def __init__(self, monkeypatch, cluster, job, index, model_dir, max_steps, hooks=(), **config):
        _set_task(monkeypatch, cluster, job, index)
        config.setdefault("experimental_max_worker_delay_secs", 0)
        run_config = E.RunConfig(model_dir=model_dir, **config)
        self.estimator = E.Estimator(_model_fn, config=run_config)
        self.specs = (
            E.TrainSpec(_train_input_fn, max_steps=max_steps, hooks=hooks),
            E.EvalSpec(_eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0.05),
        )
        self.result = self.error = None
        super().__init__(name=f"estimator-{job}-{index}", daemon=True)

    def run(self):
        try:
            self.result = E.train_and_evaluate(self.estimator, *self.specs)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def _events(path) -> dict:
    """tag -> steps, over the event files directly in `path`."""
    tags = {}
    for name in sorted(os.listdir(path)):
        if name.startswith("events.out.tfevents"):
            for event in af.train.summary_iterator(os.path.join(path, name)):
                for value in event.summary.value:
                    tags.setdefault(value.tag, []).append(event.step)
    return tags


MAX_STEPS = 10


def test_ps_chief_worker_evaluator_cluster_trains_and_evaluates(servers, monkeypatch, tmp_path):
    cluster = {job: [f"localhost:{_free_port()}"] for job in ("chief", "ps", "worker")}
    model_dir = str(tmp_path)
    # (few checkpoints: each costs fsyncs)
    config = dict(save_checkpoints_steps=10, save_summary_steps=5, log_step_count_steps=5)
    tasks = {
        job: _Task(monkeypatch, cluster, job, 0, model_dir, MAX_STEPS, **config)
        for job in ("ps", "chief", "worker", "evaluator")
    }
    for task in tasks.values():
        task.start()
    for job in ("chief", "worker", "evaluator"):
        tasks[job].join(30)
        assert not tasks[job].is_alive(), f"{job} did not finish"
        assert tasks[job].error is None, f"{job}: {tasks[job].error!r}"
        assert tasks[job].result is None  # TF: None from every task of a cluster
    assert tasks["ps"].is_alive()  # a ps serves until its process ends
    assert len(servers) == 3  # ps, chief, worker; the evaluator runs none
    # TF 2.15.1's run of this cluster: checkpoints model.ckpt-N (the last at max_steps),
    # the chief's events and graph.pbtxt in model_dir, the evaluator's in model_dir/eval.
    est = tasks["evaluator"].estimator
    step = int(est.get_variable_value("global_step"))
    # Chief and worker step the ps's global step concurrently, so each may take one step
    # past max_steps before it sees the other's (TF's between-graph training too).
    assert MAX_STEPS <= step <= MAX_STEPS + 2
    assert os.path.basename(est.latest_checkpoint()) == f"model.ckpt-{step}"
    assert sorted(est.get_variable_names()) == ["b", "global_step", "w"]
    files = set(os.listdir(model_dir))
    assert {"checkpoint", "graph.pbtxt", "eval"} <= files
    suffixes = (".data-00000-of-00001", ".index", ".meta")
    assert {f"model.ckpt-{step}{suffix}" for suffix in suffixes} <= files
    eval_tags = _events(os.path.join(model_dir, "eval"))
    assert set(eval_tags) == {"loss", "mae", "checkpoint_path"}  # as TF's
    # The evaluator stops at the first checkpoint at max_steps or beyond, which may come
    # before the chief's final one (a worker's step can land between them).
    assert MAX_STEPS <= eval_tags["loss"][-1] <= step
    assert "loss" in _events(model_dir)  # the chief's summaries


class _RestartPsAt(af.train.SessionRunHook):
    """Kills the ps (its in-process server) after global step `at` and starts a new one
    on the same address, its variables gone."""

    def __init__(self, servers, cluster, at):
        self._servers, self._cluster, self._at = servers, cluster, at
        self.restarted = False
        self.steps_after = []  # the global step after each step run after the restart

    def after_run(self, run_context, run_values):
        step = run_context.session.run(af.train.get_global_step())
        if self.restarted:
            self.steps_after.append(int(step))
        elif step >= self._at:
            self.restarted = True
            ps = next(s for s in self._servers if s.server_def.job_name == "ps")
            ps.stop()
            self._servers.append(af.train.Server(self._cluster, "ps", 0))


def test_chief_recovers_from_a_restarted_ps_through_its_checkpoint(servers, monkeypatch, tmp_path):
    # TF's MonitoredSession recovers from a lost ps: a new session, the latest checkpoint
    # restored, training goes on to max_steps.
    cluster = {job: [f"localhost:{_free_port()}"] for job in ("chief", "ps")}
    hook = _RestartPsAt(servers, af.train.ClusterSpec(cluster), at=6)
    config = dict(save_checkpoints_steps=5, save_summary_steps=None, log_step_count_steps=None)
    ps = _Task(monkeypatch, cluster, "ps", 0, str(tmp_path), MAX_STEPS)
    chief = _Task(monkeypatch, cluster, "chief", 0, str(tmp_path), MAX_STEPS, [hook], **config)
    ps.start()
    chief.start()
    chief.join(30)
    assert not chief.is_alive() and chief.error is None, chief.error
    assert hook.restarted
    assert hook.steps_after == [6, 7, 8, 9, 10]  # resumed from model.ckpt-5
    est = chief.estimator
    assert est.get_variable_value("global_step") == MAX_STEPS
    assert os.path.basename(est.latest_checkpoint()) == f"model.ckpt-{MAX_STEPS}"


def test_worker_without_its_chief_fails_after_session_creation_timeout(
    servers, monkeypatch, tmp_path
):
    # The chief died before initialising the model: the worker waits for it at most
    # RunConfig.session_creation_timeout_secs, then fails with TF's DeadlineExceededError.
    cluster = {job: [f"localhost:{_free_port()}"] for job in ("chief", "ps", "worker")}
    ps = _Task(monkeypatch, cluster, "ps", 0, str(tmp_path), MAX_STEPS)
    worker = _Task(
        monkeypatch,
        cluster,
        "worker",
        0,
        str(tmp_path),
        MAX_STEPS,
        session_creation_timeout_secs=1,
    )
    ps.start()
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    assert isinstance(worker.error, af.errors.DeadlineExceededError)
    assert str(worker.error) == "Session was not ready after waiting 1 secs."


class _Clock:
    """Stands in for training.time: records sleeps, runs `on_sleep` at each one."""

    def __init__(self, on_sleep=None):
        self.sleeps = []
        self._on_sleep = on_sleep

    def sleep(self, secs):
        self.sleeps.append(secs)
        if self._on_sleep is not None:
            self._on_sleep(len(self.sleeps))

    monotonic = staticmethod(time.monotonic)


def test_evaluator_waits_start_delay_then_evaluates_each_new_checkpoint(monkeypatch, tmp_path):
    # TF's evaluator: sleep start_delay_secs; evaluate the latest checkpoint when it is
    # new (skip it otherwise), then sleep out throttle_secs; stop after the pass that
    # evaluated a checkpoint at max_steps.
    monkeypatch.delenv("TF_CONFIG", raising=False)
    local = E.RunConfig(
        save_checkpoints_steps=3, log_step_count_steps=100, checkpoint_save_graph_def=False
    )
    E.Estimator(_model_fn, model_dir=str(tmp_path), config=local).train(
        _train_input_fn, max_steps=6
    )
    # Training "has reached" step 3; the checkpoint at 6 appears during the third sleep.
    ckpt = str(tmp_path / "model.ckpt-")
    af.train.update_checkpoint_state(str(tmp_path), ckpt + "3")
    _set_task(monkeypatch, _C, "evaluator", 0)
    est = E.Estimator(_model_fn, model_dir=str(tmp_path), config=E.RunConfig())

    def train_more(calls):
        if calls == 3:  # a pass found no new checkpoint; now training makes one
            af.train.update_checkpoint_state(str(tmp_path), ckpt + "6")

    clock = _Clock(train_more)
    monkeypatch.setattr(training, "time", clock)
    train_spec = E.TrainSpec(_train_input_fn, max_steps=6)
    eval_spec = E.EvalSpec(_eval_input_fn, steps=None, start_delay_secs=7, throttle_secs=11)
    assert E.train_and_evaluate(est, train_spec, eval_spec) is None
    assert clock.sleeps[0] == 7
    assert len(clock.sleeps) == 4 and all(9 < s <= 11 for s in clock.sleeps[1:])
    assert _events(est.eval_dir())["loss"] == [3, 6]


@pytest.mark.parametrize(
    "job,index,max_delay,want",
    [("chief", 0, None, []), ("worker", 0, None, [5]), ("worker", 1, None, [10]),
     ("worker", 1, 7, [7]), ("worker", 1, 0, [])],
)  # fmt: skip
def test_workers_start_after_tfs_delay(job, index, max_delay, want, servers, monkeypatch):
    # TF: worker i waits min((i + 1) * 5, experimental_max_worker_delay_secs or 60) s.
    cluster = {"chief": ["localhost:0"], "ps": ["localhost:0"], "worker": ["localhost:0"] * 2}
    _set_task(monkeypatch, cluster, job, index)
    config = E.RunConfig(experimental_max_worker_delay_secs=max_delay)
    est = E.Estimator(_model_fn, config=config)
    calls = []
    monkeypatch.setattr(est, "train", lambda *args, **kwargs: calls.append(kwargs))
    clock = _Clock()
    monkeypatch.setattr(training, "time", clock)
    listener = af.train.CheckpointSaverListener()
    train_spec = E.TrainSpec(_train_input_fn, max_steps=4, saving_listeners=[listener])
    assert E.train_and_evaluate(est, train_spec, _specs()[1]) is None
    assert clock.sleeps == want
    assert [s.server_def.job_name for s in servers] == [job]  # its server started first
    assert calls == [
        {
            "input_fn": _train_input_fn,
            "max_steps": 4,
            "hooks": [],
            "saving_listeners": [listener] if job == "chief" else [],
        }
    ]


def test_google_environment_starts_no_server(servers, monkeypatch):
    # TF_CONFIG "environment": "google" means the platform runs the servers.
    cluster = {"chief": ["localhost:0"], "ps": ["localhost:0"]}
    _set_task(monkeypatch, cluster, "chief", 0, environment="google")
    est = E.Estimator(_model_fn, config=E.RunConfig())
    monkeypatch.setattr(est, "train", lambda *args, **kwargs: None)
    assert E.train_and_evaluate(est, *_specs()) is None
    assert servers == []


def test_legacy_master_trains_and_evaluates_after_its_checkpoints(servers, monkeypatch, tmp_path):
    # TF 2.15.1's run of {master, ps, worker}: the master evaluates after each of its
    # checkpoints but the first (model_dir/eval: loss, mae, checkpoint_path at 10, 20,
    # ..., 60), returns None, as does the worker.
    cluster = {job: [f"localhost:{_free_port()}"] for job in ("master", "ps", "worker")}
    config = dict(save_checkpoints_steps=5, save_summary_steps=5, log_step_count_steps=5)
    tasks = {
        job: _Task(monkeypatch, cluster, job, 0, str(tmp_path), MAX_STEPS, **config)
        for job in ("ps", "master", "worker")
    }
    assert tasks["master"].estimator.config.is_chief
    for task in tasks.values():
        task.start()
    for job in ("master", "worker"):
        tasks[job].join(30)
        assert not tasks[job].is_alive(), f"{job} did not finish"
        assert tasks[job].error is None, f"{job}: {tasks[job].error!r}"
        assert tasks[job].result is None
    est = tasks["master"].estimator
    step = int(est.get_variable_value("global_step"))
    assert MAX_STEPS <= step <= MAX_STEPS + 2
    eval_tags = _events(est.eval_dir())
    assert set(eval_tags) == {"loss", "mae", "checkpoint_path"}
    assert 0 not in eval_tags["loss"] and eval_tags["loss"][-1] == step


class _StopPsAt(af.train.SessionRunHook):
    def __init__(self, servers, at):
        self._servers, self._at = servers, at

    def after_run(self, run_context, run_values):
        if run_context.session.run(af.train.get_global_step()) >= self._at:
            for server in self._servers:
                if server.server_def.job_name == "ps":
                    server.stop()


def test_chief_gives_up_on_a_lost_ps_after_session_creation_timeout(
    servers, monkeypatch, tmp_path
):
    # The ps never comes back: TF's MonitoredSession would retry creating a session
    # forever; asyncflow ends it after RunConfig.session_creation_timeout_secs (TF's
    # bound on waiting for a session "when recovering a session") with the cause.
    monkeypatch.setattr(client, "_DISCOVERY_TIMEOUT", 0.2)  # per attempt, instead of 30 s
    cluster = {job: [f"localhost:{_free_port()}"] for job in ("chief", "ps")}
    config = dict(save_checkpoints_steps=100, save_summary_steps=None, log_step_count_steps=None)
    ps = _Task(monkeypatch, cluster, "ps", 0, str(tmp_path), MAX_STEPS)
    chief = _Task(
        monkeypatch,
        cluster,
        "chief",
        0,
        str(tmp_path),
        MAX_STEPS,
        [_StopPsAt(servers, 3)],
        session_creation_timeout_secs=1,
        **config,
    )
    ps.start()
    chief.start()
    chief.join(30)
    assert not chief.is_alive()
    assert isinstance(chief.error, af.errors.DeadlineExceededError)
    message = str(chief.error)
    assert message.startswith(
        "Could not create a session within 1 secs (RunConfig.session_creation_timeout_secs): "
        "Could not reach /job:ps/replica:0/task:0"
    )
