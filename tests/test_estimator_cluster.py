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

import numpy as np
import pytest

import asyncflow as af
from asyncflow.estimator import training

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
        "meta_optimizer_iterations": sc.graph_options.rewrite_options.get(
            "meta_optimizer_iterations", 0
        ),
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
