"""`af.train`: optimizers, schedules, moving averages (TF1's `tf.train`).

Each submodule lists its public names in `__all__`; they are re-exported here.
"""

from asyncflow import example_pb as _example_pb
from asyncflow import meta_graph as _meta_graph
from asyncflow.train import basic_session_run_hooks as _hooks
from asyncflow.train import checkpoint_object as _checkpoint_object
from asyncflow.train import checkpoint_utils as _checkpoint_utils
from asyncflow.train import coordinator as _coordinator
from asyncflow.train import device_setter as _device_setter
from asyncflow.train import input as _input
from asyncflow.train import learning_rate_decay as _lr
from asyncflow.train import monitored_session as _monitored
from asyncflow.train import moving_averages as _ma
from asyncflow.train import optimizer as _optimizer
from asyncflow.train import optimizers as _optimizers
from asyncflow.train import optimizers_proximal as _optimizers_proximal
from asyncflow.train import quantize_training as _quantize_training
from asyncflow.train import queue_runner
from asyncflow.train import saver as _saver
from asyncflow.train import supervisor as _supervisor
from asyncflow.train import sync_replicas_optimizer as _sync_replicas
from asyncflow.train import training_extras as _training_extras
from asyncflow.train import training_util as _training_util

__all__: list[str] = []
for _m in (
    _optimizer,
    _optimizers,
    _optimizers_proximal,
    _training_util,
    _lr,
    _ma,
    _hooks,
    _monitored,
    _input,
    _example_pb,
    _saver,
    _checkpoint_utils,
    _checkpoint_object,
    queue_runner,
    _coordinator,
    _device_setter,
    _supervisor,
    _training_extras,
    _sync_replicas,
    _quantize_training,
):
    for _name in _m.__all__:
        globals()[_name] = getattr(_m, _name)
        __all__.append(_name)
for _name in ("export_meta_graph", "write_graph"):
    globals()[_name] = getattr(_meta_graph, _name)
    __all__.append(_name)
del _m, _name

from asyncflow.summary.reader import summary_iterator  # noqa: E402,F401 - tf.train.summary_iterator

__all__.append("summary_iterator")

from asyncflow.distributed import ClusterSpec, Server  # noqa: E402 - tf.train.ClusterSpec/Server

__all__ += ["ClusterSpec", "Server"]

from asyncflow.protos.cluster_pb2 import ClusterDef, JobDef  # noqa: E402 - tf.train.ClusterDef
from asyncflow.protos.tensorflow_server_pb2 import ServerDef  # noqa: E402 - tf.train.ServerDef

__all__ += ["ClusterDef", "JobDef", "ServerDef"]

from asyncflow.ops.training_ops import sdca_shrink_l1  # noqa: E402,F401 - tf.train.sdca_shrink_l1

__all__.append("sdca_shrink_l1")

from asyncflow.ops.sdca_ops import sdca_fprint, sdca_optimizer  # noqa: E402,F401 - tf.train

__all__ += ["sdca_fprint", "sdca_optimizer"]

import types as _types  # noqa: E402

from asyncflow import mixed_precision as _mixed_precision  # noqa: E402

# tf.train.experimental: TF1's loss scaling for mixed precision (asyncflow/mixed_precision.py).
experimental = _types.ModuleType("asyncflow.train.experimental", "TF1's tf.train.experimental.")
for _name in _mixed_precision.__all__:
    setattr(experimental, _name, getattr(_mixed_precision, _name))
del _name
# ... and the checkpoint pieces: sharding policies and PythonState.
from asyncflow.trackable import PythonState as _PythonState  # noqa: E402
from asyncflow.train import sharding as _sharding  # noqa: E402

for _name in _sharding.__all__:
    setattr(experimental, _name, getattr(_sharding, _name))
del _name
experimental.PythonState = _PythonState
__all__.append("experimental")
