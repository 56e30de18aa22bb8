"""`tf.data.experimental.service`: a dispatcher and workers that produce a dataset's
elements for its consumers, over asyncflow's authenticated TCP wire.

    d = service.DispatchServer()
    w = service.WorkerServer(service.WorkerConfig(dispatcher_address=d.target[7:]))
    ds = tf.data.Dataset.range(10).apply(service.distribute("distributed_epoch", d.target))

The servers are in server.py, the dispatcher's and workers' state in dispatcher.py and
worker.py, the consumer's side in client.py, the messages in protocol.py.
"""

from __future__ import annotations

from asyncflow.data.service import client as _client
from asyncflow.data.service.api import (
    CrossTrainerCache,
    distribute,
    from_dataset_id,
    register_dataset,
)
from asyncflow.data.service.protocol import ShardingPolicy
from asyncflow.data.service.server import (
    DispatcherConfig,
    DispatchServer,
    WorkerConfig,
    WorkerServer,
)
from asyncflow.ops import dataset_service_ops as _ops

_ops.CLIENT = _client

__all__ = [
    "CrossTrainerCache",
    "DispatchServer",
    "DispatcherConfig",
    "ShardingPolicy",
    "WorkerConfig",
    "WorkerServer",
    "distribute",
    "from_dataset_id",
    "register_dataset",
]
