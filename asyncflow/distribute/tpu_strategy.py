"""`tf.distribute.experimental.TPUStrategy` (TF1's) on a machine with no TPU.

TF's constructor asks its cluster resolver for the TPU system's metadata before it
builds anything: with no resolver it makes a TPUClusterResolver, which needs a TPU
name (ValueError); a resolver without `get_tpu_system_metadata` fails on that
attribute; a TPUClusterResolver finds no TPU cores here, and TF then indexes the
first of none (IndexError).  This class raises what TF raises; there is no TPU to
build a strategy over.
"""

from __future__ import annotations

from asyncflow.distribute import distribute_lib
from asyncflow.distribute.cluster_resolver import TPUClusterResolver

__all__ = ["TPUStrategy"]


class TPUStrategy(distribute_lib.Strategy):
    """Synchronous training on a TPU's cores (TF1's TPUStrategy).

    Raises (at construction, here always):
      ValueError: no resolver, and no TPU named in the environment.
      AttributeError: a resolver that cannot report TPU system metadata.
      IndexError: a TPUClusterResolver whose system has no TPU cores (every one here).
    """

    def __init__(self, tpu_cluster_resolver=None, steps_per_run=None, device_assignment=None):
        resolver = tpu_cluster_resolver
        if resolver is None:
            resolver = TPUClusterResolver("")
        if isinstance(resolver, TPUClusterResolver):
            num_cores = 0  # the devices a session on resolver.master() lists: no TPU here
        else:
            num_cores = resolver.get_tpu_system_metadata().num_cores
        if num_cores == 0:
            raise IndexError("index 0 is out of bounds for axis 0 with size 0")
        raise ValueError(f"TPUStrategy: the {num_cores} TPU cores reported are not reachable")
