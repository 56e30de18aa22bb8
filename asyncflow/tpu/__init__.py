"""`tf.tpu` (TF1's `tf.compat.v1.tpu`) as TF 2.21's CPU build has it.

asyncflow has no TPU and simulates none.  What TF computes in Python is here in full:
topologies and device assignments (topology.py), the embedding configuration classes
(embedding_config.py) and the serving lookup (embedding.py), `core`, `XLAOptions`,
`PaddingSpec`, `bfloat16_scope`, `CrossShardOptimizer`.  What needs a TPU builds TF's
graph and fails where TF's fails on a CPU machine: `replicate` and its forms
(replication.py), `cross_replica_sum`, `initialize_system` and `shutdown_system`
build ops that have no CPU kernel (ops/tpu_ops.py: a session running them raises
InvalidArgumentError), and `experimental.initialize_tpu_system` runs one.
"""

from __future__ import annotations

import contextlib
import logging

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.distribute.cluster_resolver import TPUClusterResolver
from asyncflow.ops import cast_ops, tpu_ops
from asyncflow.ops.tpu_ops import cross_replica_sum
from asyncflow.tpu import embedding as _embedding
from asyncflow.tpu import embedding_config as _config
from asyncflow.tpu import feature_column as _feature_column
from asyncflow.tpu import topology as _topology
from asyncflow.tpu.replication import (
    PaddingSpec,
    XLAOptions,
    batch_parallel,
    core,
    number_of_shards,
    outside_compilation,
    replicate,
    rewrite,
    shard,
)
from asyncflow.train.optimizer import Optimizer
from asyncflow.var_scope import variable_scope

__all__ = [
    "CrossShardOptimizer",
    "PaddingSpec",
    "XLAOptions",
    "batch_parallel",
    "bfloat16_scope",
    "core",
    "cross_replica_sum",
    "experimental",
    "initialize_system",
    "outside_compilation",
    "replicate",
    "rewrite",
    "shard",
    "shutdown_system",
]

_log = logging.getLogger("asyncflow")


def _system_device(job) -> str:
    return "/device:TPU_SYSTEM:0" if job is None else f"/job:{job}/device:TPU_SYSTEM:0"


def initialize_system(embedding_config=None, job=None, compilation_failure_closes_chips=True,
                      tpu_cancellation_closes_chips=None):  # fmt: skip
    """The op initializing a TPU system (ConfigureDistributedTPU on TPU_SYSTEM:0 of
    `job`): its output, the system's serialized TopologyProto.  With an
    `embedding_config` (a TPUEmbeddingConfiguration message), the embedding engine's
    ConfigureTPUEmbedding runs after it.  No CPU kernel: running it raises
    InvalidArgumentError."""
    closes = 0 if tpu_cancellation_closes_chips is None else (
        1 if tpu_cancellation_closes_chips else 2)  # fmt: skip
    with ops.device(_system_device(job)):
        topology = tpu_ops.configure_distributed_tpu(
            compilation_failure_closes_chips=compilation_failure_closes_chips,
            tpu_cancellation_closes_chips=closes,
        )
        if embedding_config is None:
            return topology
        with ops.control_dependencies([topology]):
            init = tpu_ops.configure_tpu_embedding(config=embedding_config.SerializeToString())
        with ops.control_dependencies([init]):
            from asyncflow.ops.array_ops import identity

            return identity(topology, name="tpu_init_identity")


def shutdown_system(job=None):
    """The op shutting a TPU system down (ShutdownDistributedTPU); no CPU kernel."""
    with ops.device(_system_device(job)):
        return tpu_ops.shutdown_distributed_tpu()


def _bfloat16_getter(getter, *args, **kwargs):
    # A bfloat16 variable is kept as float32 and read through a Cast.
    wants_bfloat16 = kwargs.get("dtype") == dtypes.bfloat16
    if wants_bfloat16:
        kwargs["dtype"] = dtypes.float32
    var = getter(*args, **kwargs)
    return cast_ops.cast(var, dtypes.bfloat16) if wants_bfloat16 else var


@contextlib.contextmanager
def bfloat16_scope(name=None):
    """A variable scope (`name`, else the current one's) where a variable asked for as
    bfloat16 is made float32 and returned cast to bfloat16."""
    with variable_scope(name or "", custom_getter=_bfloat16_getter) as scope:
        yield scope


class CrossShardOptimizer(Optimizer):
    """Wraps an optimizer so each replica's gradients are summed over the replicas
    (CrossReplicaSum) before they are applied; with `reduction` weighted_mean, the
    loss is divided by the replica count first.

    Raises:
      ValueError: a reduction other than weighted_sum and weighted_mean, or a
        `group_assignment` that is not a list of equal lists over the replicas.
      TypeError: `opt` is not a tf.train Optimizer.
    """

    def __init__(self, opt, reduction="weighted_mean", name="CrossShardOptimizer",
                 group_assignment=None):  # fmt: skip
        accepted = ("weighted_sum", "weighted_mean")
        if reduction not in accepted:
            raise ValueError(
                f"Argument `reduction` should be one of {accepted}. Received: {reduction}"
            )
        if not isinstance(opt, Optimizer):
            raise TypeError(
                "CrossShardOptimizer only works with tf.training.Optimizer and not "
                f"Keras Optimizer. Received: {opt}. If you are using TPUStrategy, "
                "Keras Optimizer will sum gradients across replicas.If you want to average "
                "your gradients, rescale your loss with: `loss /= global_batch_size`"
            )
        super().__init__(False, name)
        self._opt = opt
        self._reduction = reduction
        self._group_assignment = group_assignment

    def _subgroup_size(self, num_shards: int):
        groups = self._group_assignment
        if not groups:
            return None
        if not (isinstance(groups, list) and all(isinstance(g, list) for g in groups)):
            raise ValueError(
                f"Argument `group_assignment` must be a list of lists. Received: {groups}"
            )
        if {i for g in groups for i in g} != set(range(num_shards)):
            raise ValueError(
                "Argument `group_assignment` must be a permutation of "
                f"range({num_shards}). Received: {groups}"
            )
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise ValueError(
                "The size of each subgroup in `group_assignment` must be equal. "
                f"Received: {groups}"
            )
        return sizes.pop()

    def compute_gradients(self, loss, var_list=None, **kwargs):
        """The wrapped optimizer's gradients of `loss` (divided by the replica count,
        or subgroup size, for weighted_mean)."""
        num_shards = number_of_shards()
        if num_shards is None:
            _log.warning(
                "CrossShardOptimizer should be used within a tpu_shard_context, but got "
                "unset number_of_shards. Assuming 1."
            )
            num_shards = 1
        subgroup = self._subgroup_size(num_shards)
        if num_shards > 1 and self._reduction == "weighted_mean":
            loss *= 1.0 / (subgroup if self._group_assignment else num_shards)
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Each gradient summed over the replicas, then the wrapped optimizer's update."""
        summed = []
        for grad, var in grads_and_vars:
            if grad is None:
                summed.append((grad, var))
                continue
            with ops.colocate_with(grad):
                summed.append((cross_replica_sum(grad, self._group_assignment), var))
        return self._opt.apply_gradients(summed, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()


def _resolver(cluster_resolver):
    return TPUClusterResolver("") if cluster_resolver is None else cluster_resolver


def initialize_tpu_system(cluster_resolver=None):
    """Initialize the TPU system of `cluster_resolver` (a TPUClusterResolver; TF names
    one from the environment when None): in a TF1 program, runs `initialize_system`
    in a session on its master.

    Raises:
      ValueError: no resolver and no TPU named in the environment.
      InvalidArgumentError: running the initialization (no TPU kernels here).
    """
    _run_system_op(_resolver(cluster_resolver), initialize_system)


def shutdown_tpu_system(cluster_resolver=None):
    """Shut down the TPU system of `cluster_resolver`, as `initialize_tpu_system`.

    Raises:
      ValueError: no resolver and no TPU named in the environment.
      InvalidArgumentError: running the shutdown (no TPU kernels here).
    """
    _run_system_op(_resolver(cluster_resolver), shutdown_system)


def _run_system_op(resolver, build) -> None:
    from asyncflow.session import Session

    with ops.Graph().as_default():
        fetch = build()
        with Session(resolver.master()) as sess:
            sess.run(fetch)


class _Namespace:
    """A TF namespace object: its names as attributes."""

    def __init__(self, doc: str, **names):
        self.__doc__ = doc
        self.__dict__.update(names)

    def __dir__(self):
        return sorted(k for k in self.__dict__ if not k.startswith("__"))


experimental = _Namespace(
    "`tf.tpu.experimental`.",
    DeviceAssignment=_topology.DeviceAssignment,
    DeviceOrderMode=_topology.DeviceOrderMode,
    HardwareFeature=_topology.HardwareFeature,
    TPUSystemMetadata=_topology.TPUSystemMetadata,
    Topology=_topology.Topology,
    embedding_column=_feature_column.embedding_column,
    shared_embedding_columns=_feature_column.shared_embedding_columns,
    initialize_tpu_system=initialize_tpu_system,
    shutdown_tpu_system=shutdown_tpu_system,
    embedding=_Namespace(
        "`tf.tpu.experimental.embedding`.",
        **{n: getattr(_config, n) for n in _config.__all__},
        **{n: getattr(_embedding, n) for n in _embedding.__all__},
    ),
)


def __dir__():
    # tf.tpu's names only, as dir(tf.compat.v1.tpu) lists them.
    return sorted(__all__)
