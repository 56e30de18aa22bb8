"""Where an Estimator runs in a cluster, read from TF_CONFIG (TF1's RunConfig rules).

TF_CONFIG is JSON: {"cluster": {job: [host:port, ...]}, "task": {"type": ..., "index":
...}, plus the optional "session_master", "eval_session_master", "service", "model_dir"
and "environment" keys}.  `cluster_settings` turns it into the values RunConfig exposes:

* no "cluster": a local run, one chief "worker" task 0 (anything else is a ValueError);
* a cluster with one "chief" job (or, the legacy form, one "master" job and no chief):
  the task must be in the cluster, except an "evaluator", which stands outside the
  training cluster (its cluster_spec is empty, it counts no ps and no workers);
* `master` is "grpc://" + the task's own address, "" when the cluster has a single task,
  TF_CONFIG's "session_master" whenever given;
* `global_id_in_cluster`: the chief first, then the other jobs in name order, the ps
  last, each job's tasks by index.

Errors (ValueError, TypeError for a "service" that is not a dict) carry TF's words, so
a job launcher's logs read the same.
"""

from __future__ import annotations

import json
import os

from asyncflow.config import ConfigProto, GraphOptions, RewriterConfig
from asyncflow.distributed.cluster import ClusterSpec

__all__ = ["TaskType", "cluster_settings", "default_session_config", "read_tf_config"]

_GRPC = "grpc://"


class TaskType:
    """The task types TF's Estimator knows (TF_CONFIG "task"/"type")."""

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


def read_tf_config() -> dict:
    """TF_CONFIG as a dict ({} when unset).

    Raises:
      ValueError: TF_CONFIG is not JSON (json's JSONDecodeError, as TF), or is JSON but
        not an object.
    """
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    if not isinstance(config, dict):  # (TF fails later, an AttributeError for "null")
        raise ValueError(f"TF_CONFIG must be a JSON object, got {config!r}")
    return config


def model_dir_from(tf_config: dict, model_dir):
    """The model_dir given to RunConfig, else TF_CONFIG's.

    Raises:
      ValueError: an empty model_dir on either side; two different ones.
    """
    if model_dir == "":
        raise ValueError("model_dir should be non-empty.")
    from_config = tf_config.get("model_dir")
    if from_config == "":
        raise ValueError("model_dir in TF_CONFIG should be non-empty.")
    if from_config and model_dir and from_config != model_dir:
        raise ValueError(
            "`model_dir` provided in RunConfig construct, if set, must have the same value as "
            f"the model_dir in TF_CONFIG. model_dir: {model_dir}\n"
            f'TF_CONFIG["model_dir"]: {from_config}.\n'
        )
    return model_dir or from_config


def cluster_settings(tf_config: dict) -> dict:
    """RunConfig's cluster properties (the `_`-less names) for a parsed TF_CONFIG.

    Raises:
      ValueError: a task missing from, or not allowed in, the cluster; a cluster with no
        (or several) chief/master tasks; a local run that is not worker 0.
      TypeError: "service" is not a dict; "cluster" is not a dict of job addresses.
    """
    service = tf_config.get("service")
    if service is not None and not isinstance(service, dict):
        raise TypeError(
            f'If "service" is set in TF_CONFIG, it must be a dict. Given {type(service)}'
        )
    cluster = ClusterSpec(tf_config.get("cluster", {}))
    task = tf_config.get("task", {})
    if not cluster:
        out = _local(task, tf_config)
    elif TaskType.MASTER in cluster.jobs:
        out = _with_master(cluster, task, tf_config)
    else:
        out = _with_chief(cluster, task, tf_config)
    out["service"] = service
    return out


def _local(task: dict, tf_config: dict) -> dict:
    task_type = task.get("type", TaskType.WORKER)
    task_id = int(task.get("index", 0))
    if task_type != TaskType.WORKER:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
    if task_id != 0:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
    return {
        "cluster_spec": ClusterSpec({}),
        "task_type": task_type,
        "task_id": task_id,
        "master": tf_config.get("session_master", ""),
        "evaluation_master": tf_config.get("eval_session_master", ""),
        "is_chief": True,
        "num_ps_replicas": 0,
        "num_worker_replicas": 1,
        "global_id_in_cluster": 0,
    }


def _with_chief(cluster: ClusterSpec, task: dict, tf_config: dict) -> dict:
    task_type, task_id = _checked_task(cluster, task, TaskType.CHIEF)
    evaluation_master = _evaluation_master(task_type, tf_config)
    if task_type == TaskType.EVALUATOR:  # outside the training cluster
        return {
            "cluster_spec": ClusterSpec({}),
            "task_type": task_type,
            "task_id": task_id,
            "master": "",
            "evaluation_master": evaluation_master,
            "is_chief": False,
            "num_ps_replicas": 0,
            "num_worker_replicas": 0,
            "global_id_in_cluster": None,
        }
    return _training_task(cluster, task_type, task_id, TaskType.CHIEF, tf_config)


def _with_master(cluster: ClusterSpec, task: dict, tf_config: dict) -> dict:
    # Both a chief and a master would leave it unclear which one leads: TF refuses it.
    if TaskType.CHIEF in cluster.jobs:
        raise ValueError("If `master` node exists in `cluster`, job `chief` is not supported.")
    task_type, task_id = _checked_task(cluster, task, TaskType.MASTER)
    if task_type == TaskType.EVALUATOR:
        raise ValueError(
            "If `master` node exists in `cluster`, task_type `evaluator` is not supported."
        )
    return _training_task(cluster, task_type, task_id, TaskType.MASTER, tf_config)


def _training_task(cluster, task_type, task_id, chief_type, tf_config) -> dict:
    jobs = cluster.as_dict()
    return {
        "cluster_spec": cluster,
        "task_type": task_type,
        "task_id": task_id,
        "master": _master(cluster, task_type, task_id, tf_config),
        "evaluation_master": _evaluation_master(task_type, tf_config),
        "is_chief": task_type == chief_type,
        "num_ps_replicas": len(jobs.get(TaskType.PS, [])),
        "num_worker_replicas": len(jobs.get(TaskType.WORKER, [])) + len(jobs.get(chief_type, [])),
        "global_id_in_cluster": _global_id(cluster, task_type, task_id, chief_type),
    }


def _checked_task(cluster: ClusterSpec, task: dict, chief_type: str) -> tuple[str, int]:
    if chief_type not in cluster.jobs:
        raise ValueError(
            f'If "cluster" is set in TF_CONFIG, it must have one "{chief_type}" node.'
        )
    if len(cluster.job_tasks(chief_type)) > 1:
        raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief_type}" node.')
    task_type, task_id = task.get("type"), task.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number.")
    if task_type == TaskType.EVALUATOR:  # any index: the evaluator is not in the cluster
        return task_type, task_id
    note = "\n\nNote that these values may be coming from the TF_CONFIG environment variable."
    if task_type not in cluster.jobs:
        raise ValueError(
            f"{task_type} is not a valid task_type in the cluster_spec:\n{cluster}{note}"
        )
    if not 0 <= task_id < len(cluster.job_tasks(task_type)):
        raise ValueError(
            f"{task_id} is not a valid task_id for task_type {task_type} in the cluster_spec:\n"
            f"{cluster}{note}"
        )
    return task_type, task_id


def _master(cluster: ClusterSpec, task_type: str, task_id: int, tf_config: dict) -> str:
    if "session_master" in tf_config:
        return tf_config["session_master"]
    jobs = cluster.jobs
    # One task alone talks to itself in process: no server, no RPC.
    if len(jobs) == 1 and len(cluster.job_tasks(jobs[0])) == 1:
        return ""
    return _GRPC + cluster.job_tasks(task_type)[task_id]


def _evaluation_master(task_type: str, tf_config: dict) -> str:
    if task_type == TaskType.EVALUATOR:
        return tf_config.get("eval_session_master", "")
    return ""


def _global_id(cluster: ClusterSpec, task_type: str, task_id: int, chief_type: str) -> int:
    order = [chief_type]
    order += [job for job in cluster.jobs if job not in (chief_type, TaskType.PS)]
    if TaskType.PS in cluster.jobs:
        order.append(TaskType.PS)
    first = 0
    for job in order:
        if job == task_type:
            return first + task_id
        first += len(cluster.job_tasks(job))
    raise ValueError(f"Task type {task_type!r} is not in the cluster {cluster}")


def default_session_config(task_type: str, task_id: int) -> ConfigProto | None:
    """TF's between-graph session config: each trainer sees only the ps and itself.

    None for an evaluator or a task type TF does not know.  The filters matter here
    beyond speed: a session discovers only the tasks they let through, so a chief does
    not wait on an evaluator, which serves nothing.
    """
    filters = {
        TaskType.MASTER: ["/job:ps", "/job:master"],
        TaskType.CHIEF: ["/job:ps", "/job:chief"],
        TaskType.WORKER: ["/job:ps", f"/job:worker/task:{task_id}"],
        TaskType.PS: ["/job:ps", "/job:worker", "/job:chief", "/job:master"],
    }.get(task_type)
    if filters is None:
        return None
    return ConfigProto(
        allow_soft_placement=True,
        graph_options=GraphOptions(
            rewrite_options=RewriterConfig(meta_optimizer_iterations=RewriterConfig.ONE)
        ),
        device_filters=filters,
    )
