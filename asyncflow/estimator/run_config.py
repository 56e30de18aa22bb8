"""RunConfig: where and how often an Estimator saves, logs and seeds (TF1's RunConfig).

The cluster properties (cluster_spec, task_type, task_id, master, is_chief, ...) come
from the TF_CONFIG environment variable when the RunConfig is made (estimator/tf_config.py
has the rules); without it a run is local, one chief worker. A distributed trainer with
no session_config gets TF's default one, whose device_filters keep it to the ps and
itself. `replace` returns a checked copy with the same cluster properties.
Invariant: at most one of save_checkpoints_steps / _secs is set.
"""

from __future__ import annotations

import copy

from asyncflow.config import ConfigProto
from asyncflow.estimator import tf_config as tf_config_lib

__all__ = ["RunConfig"]

_USE_DEFAULT = object()

_REPLACEABLE = [
    "model_dir",
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "session_config",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
    "train_distribute",
    "device_fn",
    "protocol",
    "eval_distribute",
    "experimental_distribute",
    "experimental_max_worker_delay_secs",
    "session_creation_timeout_secs",
    "checkpoint_save_graph_def",
]


def _checkpoint_schedule(steps, secs):
    if steps is _USE_DEFAULT and secs is _USE_DEFAULT:
        return None, 600
    if steps is _USE_DEFAULT:
        return None, secs
    if secs is _USE_DEFAULT:
        return steps, None
    if steps is not None and secs is not None:
        raise ValueError(
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
        )
    return steps, secs


def _validate(values: dict) -> None:
    if values["model_dir"] == "":
        raise ValueError("model_dir should be non-empty.")
    checks = (
        ("save_summary_steps", "should be >= 0", lambda v: v >= 0),
        ("save_checkpoints_steps", "should be >= 0", lambda v: v >= 0),
        ("save_checkpoints_secs", "should be >= 0", lambda v: v >= 0),
        ("keep_checkpoint_max", "should be >= 0", lambda v: v >= 0),
        ("keep_checkpoint_every_n_hours", "should be > 0", lambda v: v > 0),
        ("log_step_count_steps", "should be > 0", lambda v: v > 0),
    )
    for key, words, ok in checks:
        if values[key] is not None and not ok(values[key]):
            raise ValueError(f"{key} {words}")
    seed = values["tf_random_seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError("tf_random_seed must be integer.")
    if values["session_config"] is not None and not isinstance(
        values["session_config"], ConfigProto
    ):
        raise ValueError("session_config must be instance of ConfigProto")
    if values["device_fn"] is not None and not callable(values["device_fn"]):
        raise ValueError("device_fn must be callable with exactly one argument 'op'.")


class RunConfig:
    """An Estimator's run settings (checkpoint and summary cadence, seed, session config).

    Raises:
      ValueError: both checkpoint cadences set; a negative count; a non-integer seed;
        a session_config that is not a ConfigProto; an empty model_dir, or one that
        differs from TF_CONFIG's; TF_CONFIG that is not JSON or names a task the
        cluster does not have (tf_config.cluster_settings lists the cases); `replace`
        of a property TF does not allow replacing.
      TypeError: TF_CONFIG's "service" is not a dict.
    """

    def __init__(
        self,
        model_dir=None,
        tf_random_seed=None,
        save_summary_steps=100,
        save_checkpoints_steps=_USE_DEFAULT,
        save_checkpoints_secs=_USE_DEFAULT,
        session_config=None,
        keep_checkpoint_max=5,
        keep_checkpoint_every_n_hours=10000,
        log_step_count_steps=100,
        train_distribute=None,
        device_fn=None,
        protocol=None,
        eval_distribute=None,
        experimental_distribute=None,
        experimental_max_worker_delay_secs=None,
        session_creation_timeout_secs=7200,
        checkpoint_save_graph_def=True,
    ):
        steps, secs = _checkpoint_schedule(save_checkpoints_steps, save_checkpoints_secs)
        values = dict(locals())
        del values["self"], values["steps"], values["secs"]
        values["save_checkpoints_steps"], values["save_checkpoints_secs"] = steps, secs
        tf_config = tf_config_lib.read_tf_config()
        values["model_dir"] = tf_config_lib.model_dir_from(tf_config, model_dir)
        self._set(values)
        cluster = tf_config_lib.cluster_settings(tf_config)
        for key, value in cluster.items():
            setattr(self, "_" + key, value)
        if self._session_config is None and self._cluster_spec:
            self._session_config = tf_config_lib.default_session_config(
                self._task_type, self._task_id
            )

    def _set(self, values: dict) -> None:
        _validate(values)
        for key in _REPLACEABLE:
            setattr(self, "_" + key, values[key])

    def replace(self, **kwargs) -> RunConfig:
        """A copy with the given properties replaced (checked as the constructor does).

        Raises:
          ValueError: a property that cannot be replaced; a bad value.
        """
        for key in kwargs:
            if key not in _REPLACEABLE:
                raise ValueError(
                    f"Replacing {key} is not supported. Allowed properties are {_REPLACEABLE}."
                )
        values = {key: getattr(self, "_" + key) for key in _REPLACEABLE}
        # Setting one checkpoint cadence clears the other, as the constructor's default does.
        if kwargs.get("save_checkpoints_steps") is not None:
            values["save_checkpoints_secs"] = None
        if kwargs.get("save_checkpoints_secs") is not None:
            values["save_checkpoints_steps"] = None
        values.update(kwargs)
        new = copy.copy(self)
        new._set(values)
        return new


_CLUSTER_PROPERTIES = [
    "cluster_spec",
    "task_type",
    "task_id",
    "master",
    "evaluation_master",
    "is_chief",
    "num_ps_replicas",
    "num_worker_replicas",
    "global_id_in_cluster",
    "service",
]

for _key in _REPLACEABLE + _CLUSTER_PROPERTIES:
    setattr(RunConfig, _key, property(lambda self, _k="_" + _key: getattr(self, _k)))
del _key
