"""`tf.distribute.cluster_resolver`: where a strategy or an Estimator learns the
cluster it runs in and its own task there.

- base: ClusterResolver, SimpleClusterResolver, UnionResolver;
- tfconfig: TFConfigClusterResolver (the TF_CONFIG variable);
- slurm: SlurmClusterResolver (a Slurm job step's environment);
- cloud: GCEClusterResolver, KubernetesClusterResolver, TPUClusterResolver.
"""

from asyncflow.distribute.cluster_resolver.base import (
    ClusterResolver,
    SimpleClusterResolver,
    UnionResolver,
)
from asyncflow.distribute.cluster_resolver.cloud import (
    GCEClusterResolver,
    KubernetesClusterResolver,
    KubernetesExecutableLocation,
    TPUClusterResolver,
)
from asyncflow.distribute.cluster_resolver.slurm import SlurmClusterResolver
from asyncflow.distribute.cluster_resolver.tfconfig import TFConfigClusterResolver

__all__ = [
    "ClusterResolver",
    "GCEClusterResolver",
    "KubernetesClusterResolver",
    "KubernetesExecutableLocation",
    "SimpleClusterResolver",
    "SlurmClusterResolver",
    "TFConfigClusterResolver",
    "TPUClusterResolver",
    "UnionResolver",
]
