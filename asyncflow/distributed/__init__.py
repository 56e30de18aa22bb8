"""Distributed execution: clusters, servers, and sessions across tasks (issue 15).

`ClusterSpec` and `Server` are TF1's `tf.train` names; importing this package lets
`Session("grpc://host:port")` run on a cluster (the "grpc" target scheme).
"""

from asyncflow.distributed.cluster import ClusterSpec
from asyncflow.distributed.server import Server
from asyncflow.master import register_target_scheme


def _cluster_worker(target, config):
    from asyncflow.distributed.client import ClusterWorker

    return ClusterWorker(target, config)


register_target_scheme("grpc", _cluster_worker)

__all__ = ["ClusterSpec", "Server"]
