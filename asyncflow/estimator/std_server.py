"""Starting a cluster task's standard server for an Estimator (TF's
`estimator.training._start_std_server`): train_and_evaluate's tasks, and an Estimator
training between graphs under a multi-worker strategy.
"""

from __future__ import annotations

import logging

from asyncflow.config import ConfigProto
from asyncflow.distributed.server import Server
from asyncflow.estimator.tf_config import TaskType

__all__ = ["start_std_server"]

logger = logging.getLogger("asyncflow.estimator")

_TRAINER_JOBS = (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)


def start_std_server(config) -> Server | None:
    """Starts this task's server (None for a cluster of one trainer, which needs none).

    Raises:
      RuntimeError: the RunConfig lacks the cluster, the task, or a master.
      UnavailableError: the task's address cannot be bound.
    """
    if not config.cluster_spec or not config.task_type or config.task_id is None:
        raise RuntimeError(
            "Could not start server; be sure to specify cluster_spec, task_type, and task "
            "in RunConfig or set the TF_CONFIG environment variable."
        )
    if not config.master:
        jobs = config.cluster_spec.jobs
        alone = len(jobs) == 1 and len(config.cluster_spec.job_tasks(jobs[0])) == 1
        if alone and config.task_type in _TRAINER_JOBS:
            logger.info("Skip starting server as there is only one node in the cluster.")
            return None
        raise RuntimeError(
            "Could not start server; be sure to specify master in RunConfig or set the "
            "TF_CONFIG environment variable."
        )
    logger.info("Start Tensorflow server.")
    session_config = ConfigProto(log_device_placement=False)
    if config.session_config is not None:
        session_config.gpu_options = config.session_config.gpu_options
    server = Server(
        config.cluster_spec,
        job_name=config.task_type,
        task_index=config.task_id,
        config=session_config,
        start=False,
        protocol=config.protocol,
    )
    server.start()
    return server
