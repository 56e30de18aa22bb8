"""`tf.distribute.experimental`: the options of cross-worker collectives and the
strategies TF1 still ships as experimental."""

from asyncflow.distribute.central_storage_strategy import CentralStorageStrategy
from asyncflow.distribute.collective_util import (
    CollectiveCommunication,
    CollectiveHints,
    CommunicationImplementation,
    CommunicationOptions,
)
from asyncflow.distribute.multi_worker_strategies import (
    MultiWorkerMirroredStrategy,
    ParameterServerStrategy,
)
from asyncflow.distribute.tpu_strategy import TPUStrategy

__all__ = [
    "CentralStorageStrategy",
    "CollectiveCommunication",
    "CollectiveHints",
    "CommunicationImplementation",
    "CommunicationOptions",
    "MultiWorkerMirroredStrategy",
    "ParameterServerStrategy",
    "TPUStrategy",
]
