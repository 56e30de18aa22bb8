"""The boosted trees resources as graph objects (TF's python/ops/boosted_trees_ops.py):
TreeEnsemble and QuantileAccumulator.

Each makes its handle op named by its scope, registers its create op in
GraphKeys.RESOURCES (run by the Scaffold's default init op, as TF's) and a
SaveableObject in GraphKeys.SAVEABLE_OBJECTS, whose restore re-creates then fills the
resource, so checkpoints hold TF's keys: "<handle>:0_stamp" and "_serialized" for an
ensemble, "<handle>:0_bucket_boundaries_<i>" for a quantile accumulator's streams.
"""

from __future__ import annotations

import collections

from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.raw_op_functions import raw_ops
from asyncflow.train.saver import SaveableObject, SaveSpec

__all__ = ["QuantileAccumulator", "Resource", "TreeEnsemble"]

Resource = collections.namedtuple("_Resource", ["handle", "create", "is_initialized"])


class _EnsembleSaveable(SaveableObject):
    """Saves the ensemble's stamp and serialized proto; restores by deserializing."""

    def __init__(self, handle, create_op, name):
        stamp, serialized = raw_ops.BoostedTreesSerializeEnsemble(tree_ensemble_handle=handle)
        specs = [
            SaveSpec(stamp, "", name + "_stamp"),
            SaveSpec(serialized, "", name + "_serialized"),
        ]
        super().__init__(handle, specs, name)
        self._handle, self._create_op = handle, create_op

    def restore(self, restored_tensors, restored_shapes):
        with ops.control_dependencies([self._create_op]):
            return raw_ops.BoostedTreesDeserializeEnsemble(
                tree_ensemble_handle=self._handle,
                stamp_token=restored_tensors[0],
                tree_ensemble_serialized=restored_tensors[1],
            )


class TreeEnsemble:
    """TF's TreeEnsemble resource: a handle named after the model's scope, created by
    the init op (GraphKeys.RESOURCES) and saved through SAVEABLE_OBJECTS."""

    def __init__(self, name: str, stamp_token: int = 0, serialized_proto: str = ""):
        with ops.name_scope(name, "TreeEnsemble") as scope:
            self._name = scope
            # Named by the scope itself ("boosted_trees"), so the checkpoint holds TF's
            # "boosted_trees:0_stamp" and "boosted_trees:0_serialized".
            self.resource_handle = raw_ops.BoostedTreesEnsembleResourceHandleOp(
                container="", shared_name=scope, name=scope
            )
            self.initializer = raw_ops.BoostedTreesCreateEnsemble(
                tree_ensemble_handle=self.resource_handle,
                stamp_token=stamp_token,
                tree_ensemble_serialized=serialized_proto,
            )
            initialized = raw_ops.IsBoostedTreesEnsembleInitialized(
                tree_ensemble_handle=self.resource_handle
            )
        saveable = _EnsembleSaveable(
            self.resource_handle, self.initializer, self.resource_handle.name
        )
        ops.add_to_collection(ops.GraphKeys.SAVEABLE_OBJECTS, saveable)
        ops.add_to_collection(
            ops.GraphKeys.RESOURCES, Resource(self.resource_handle, self.initializer, initialized)
        )

    def get_states(self):
        states = raw_ops.BoostedTreesGetEnsembleStates(tree_ensemble_handle=self.resource_handle)
        names = ("stamp_token", "num_trees", "num_finalized_trees", "num_attempted_layers")
        named = [array_ops.identity(t, name=n) for t, n in zip(states[:4], names, strict=True)]
        return (*named, array_ops.identity(states[4], name="last_layer_nodes_range"))


class _QuantileSaveable(SaveableObject):
    """Saves each stream's bucket boundaries; restores them with Deserialize."""

    def __init__(self, handle, create_op, num_streams, name):
        bounds = raw_ops.BoostedTreesQuantileStreamResourceGetBucketBoundaries(
            quantile_stream_resource_handle=handle, num_features=num_streams
        )
        bounds = bounds if isinstance(bounds, list) else [bounds]
        specs = [SaveSpec(b, "", f"{name}_bucket_boundaries_{i}") for i, b in enumerate(bounds)]
        super().__init__(handle, specs, name)
        self._handle, self._create_op = handle, create_op

    def restore(self, restored_tensors, restored_shapes):
        with ops.control_dependencies([self._create_op]):
            return raw_ops.BoostedTreesQuantileStreamResourceDeserialize(
                quantile_stream_resource_handle=self._handle,
                bucket_boundaries=list(restored_tensors),
            )


class QuantileAccumulator:
    """TF's QuantileAccumulator: one quantile stream per float feature, whose flushed
    bucket boundaries are checkpointed ("<handle>:0_bucket_boundaries_<i>")."""

    def __init__(self, epsilon, num_streams, num_quantiles, name=None):
        self._eps, self._num_streams, self._num_quantiles = epsilon, num_streams, num_quantiles
        with ops.name_scope(name, "QuantileAccumulator") as scope:
            self.resource_handle = raw_ops.BoostedTreesQuantileStreamResourceHandleOp(
                container="", shared_name=scope, name=scope
            )
            self.initializer = raw_ops.BoostedTreesCreateQuantileStreamResource(
                quantile_stream_resource_handle=self.resource_handle,
                epsilon=epsilon,
                num_streams=num_streams,
            )
            initialized = raw_ops.IsBoostedTreesQuantileStreamResourceInitialized(
                quantile_stream_resource_handle=self.resource_handle
            )
        ops.add_to_collection(
            ops.GraphKeys.RESOURCES, Resource(self.resource_handle, self.initializer, initialized)
        )
        saveable = _QuantileSaveable(
            self.resource_handle, self.initializer, num_streams, self.resource_handle.name
        )
        ops.add_to_collection(ops.GraphKeys.SAVEABLE_OBJECTS, saveable)

    def add_summaries(self, float_columns, example_weights):
        summaries = raw_ops.BoostedTreesMakeQuantileSummaries(
            float_values=float_columns, example_weights=example_weights, epsilon=self._eps
        )
        summaries = summaries if isinstance(summaries, list) else [summaries]
        return raw_ops.BoostedTreesQuantileStreamResourceAddSummaries(
            quantile_stream_resource_handle=self.resource_handle, summaries=summaries
        )

    def flush(self):
        return raw_ops.BoostedTreesQuantileStreamResourceFlush(
            quantile_stream_resource_handle=self.resource_handle, num_buckets=self._num_quantiles
        )

    def get_bucket_boundaries(self) -> list:
        bounds = raw_ops.BoostedTreesQuantileStreamResourceGetBucketBoundaries(
            quantile_stream_resource_handle=self.resource_handle, num_features=self._num_streams
        )
        return bounds if isinstance(bounds, list) else [bounds]
