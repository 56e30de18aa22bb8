"""`tf.distribute` (as `tf.compat.v1.distribute`): strategies that build one replica of a
model per local device in one graph, in TF1's graph mode.

- distribute_lib: the contexts (default, cross-replica, replica), Strategy's base API,
  the default strategy, ReduceOp, InputContext;
- values: PerReplica, Mirrored, MirroredVariable, SyncOnReadVariable;
- optimizer_apply: TF1 optimizers' apply_gradients in a replica (merged updates);
- cross_device_ops: how values are reduced across devices;
- mirrored_strategy: MirroredStrategy (replica threads, merge_call), OneDeviceStrategy;
- input_lib: datasets split into per-replica batches;
- cluster_resolver: where a task learns its cluster (TF_CONFIG, Slurm, clouds);
- collective_util: the options of cross-worker collectives, RunOptions;
- experimental: `tf.distribute.experimental` (options and the multi-worker strategies).
"""

from asyncflow.distribute import cluster_resolver, experimental
from asyncflow.distribute.collective_util import RunOptions
from asyncflow.distribute.cross_device_ops import (
    CrossDeviceOps,
    HierarchicalCopyAllReduce,
    NcclAllReduce,
    ReductionToOneDevice,
)
from asyncflow.distribute.distribute_lib import (
    InputContext,
    InputReplicationMode,
    ReduceOp,
    ReplicaContext,
    Strategy,
    StrategyExtended,
    experimental_set_strategy,
    get_cross_replica_context,
    get_loss_reduction,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from asyncflow.distribute.mirrored_strategy import MirroredStrategy, OneDeviceStrategy
from asyncflow.distributed.server import Server

__all__ = [
    "CrossDeviceOps",
    "HierarchicalCopyAllReduce",
    "InputContext",
    "InputReplicationMode",
    "MirroredStrategy",
    "NcclAllReduce",
    "OneDeviceStrategy",
    "ReduceOp",
    "ReductionToOneDevice",
    "ReplicaContext",
    "RunOptions",
    "Server",
    "Strategy",
    "StrategyExtended",
    "cluster_resolver",
    "experimental",
    "experimental_set_strategy",
    "get_cross_replica_context",
    "get_loss_reduction",
    "get_replica_context",
    "get_strategy",
    "has_strategy",
    "in_cross_replica_context",
]
