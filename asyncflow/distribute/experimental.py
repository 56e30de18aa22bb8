"""`tf.distribute.experimental`: the options of cross-worker collectives and the
strategies TF1 still ships as experimental."""

from asyncflow.distribute.collective_util import (
    CollectiveCommunication,
    CollectiveHints,
    CommunicationImplementation,
    CommunicationOptions,
)

__all__ = [
    "CollectiveCommunication",
    "CollectiveHints",
    "CommunicationImplementation",
    "CommunicationOptions",
]
