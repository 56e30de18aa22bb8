"""Boosted trees: the tree ensemble resource and the ops that read and grow it.

TF's BoostedTrees* ensemble ops (kernels in TF's core/kernels/boosted_trees): a handle
op, CreateEnsemble / DeserializeEnsemble / SerializeEnsemble with TF's TreeEnsemble
proto (asyncflow/protos/boosted_trees.proto), GetEnsembleStates, Predict,
TrainingPredict, ExampleDebugOutputs, UpdateEnsemble (V1 and V2) and CenterBias.  The
stats and split ops are in boosted_trees_stats_ops.py, the quantile ops in
boosted_trees_quantile_ops.py.

The ensemble is grown layer by layer, as TF's: each UpdateEnsemble splits the leaves of
the last layer of the last tree, with leaf values that already hold the learning rate
and their parent's value; a tree reaching max_depth is finalized and an empty one
(one zero leaf) is appended to grow next.  A split node keeps the leaf it was
(metadata.original_leaf) so predictions cached from an earlier layer can be corrected
(TrainingPredict) and post-pruning can restore it.

Invariant: all arithmetic on logits, gains and weights is float32, in TF's order, so
leaf values and serialized ensembles carry TF's bits.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops.boosted_trees_stats_ops import (
    dim,
    merge_dims,
    merge_shape,
    min_list,
    weight_and_gain,
)
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.protos import boosted_trees_pb2 as bt_pb2
from asyncflow.registry import REQUIRED, register_op

__all__: list[str] = []

_F = np.float32
_TREE_WEIGHT = 1.0  # layer-by-layer boosting keeps every tree at weight 1
_MIN_CENTER_DELTA = _F(0.01)
_NO_PRUNING, _PRE_PRUNING, _POST_PRUNING = 0, 1, 2
_EQUALITY = "EQUALITY_DEFAULT_RIGHT"
_DEFAULT_RIGHT = "INEQUALITY_DEFAULT_RIGHT"


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


class ResourceSlot:
    """What a resource handle op hands out: the named place a Create* op fills.

    TF's handle ops make a handle only; the resource exists once created, and a lookup
    before that fails (NotFoundError) while the Is*Initialized op says False."""

    __slots__ = ("name", "kind", "resource")

    def __init__(self, name: str, kind: str):
        self.name, self.kind, self.resource = name, kind, None

    def lookup(self):
        if self.resource is None:
            raise errors.NotFoundError(
                None,
                None,
                "Container localhost does not exist. (Could not find resource: "
                f"localhost/{self.name})",
            )
        return self.resource


def slot_of(handle, kind: str) -> ResourceSlot:
    slot = handle_object(handle, ResourceSlot, kind)
    if slot.kind != kind:
        raise _invalid(f"Trying to access resource {slot.name} as a {kind}; it is a {slot.kind}")
    return slot


def handle_op(op_type: str, kind: str):
    """Register `op_type`, TF's REGISTER_RESOURCE_HANDLE_OP for `kind`."""
    op_def = register_op(
        op_type,
        outputs=["resource: resource"],
        attrs={"container": "", "shared_name": ""},
        shape_fn=lambda op: [tensor_shape.TensorShape([])],
        stateful=True,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx):
        container = ctx.attrs["container"]
        name = ctx.attrs["shared_name"] or ctx.op.name
        # Keyed by kind too: TF's resource manager keys by (type, name).
        slot = ctx.resource_mgr(container).lookup_or_create(
            container, f"{name}:{kind}", lambda: ResourceSlot(name, kind)
        )
        return handle_value(slot)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def is_initialized_op(op_type: str, input_name: str, kind: str):
    op_def = register_op(
        op_type,
        inputs=[f"{input_name}: resource"],
        outputs=["is_initialized: bool"],
        shape_fn=_scalar_handle_shape(1, [tensor_shape.TensorShape([])]),
        stateful=True,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, handle):
        return np.bool_(slot_of(handle, kind).resource is not None)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _rank(shape, rank: int) -> None:
    shape = tensor_shape.as_shape(shape)
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {shape.ndims}")


def _scalar_handle_shape(n_scalars: int, outputs):
    """A shape function checking that the first `n_scalars` inputs are scalars."""

    def fn(op):
        for t in op.inputs[:n_scalars]:
            _rank(t.shape, 0)
        return list(outputs)

    return fn


# -- the ensemble ---------------------------------------------------------------------------


class TreeEnsemble:
    """TF's BoostedTreesEnsembleResource: a TreeEnsemble proto and a stamp token."""

    KIND = "BoostedTreesEnsembleResource"

    def __init__(self):
        self.proto = bt_pb2.TreeEnsemble()
        self.stamp = -1
        self.version = 0  # moved on by every change, so compiled trees are rebuilt
        self._compiled: tuple | None = None  # (version, dim, trees)

    def compiled(self, dim: int) -> list:
        """The trees as _CompiledTree arrays, rebuilt when the ensemble changed."""
        key = (self.version, dim)
        if self._compiled is None or self._compiled[:2] != key:
            trees = [
                _CompiledTree(t, m, w, dim)
                for t, m, w in zip(self.proto.trees, self.proto.tree_metadata,
                                   self.proto.tree_weights, strict=False)
            ]  # fmt: skip
            self._compiled = (*key, trees)
        return self._compiled[2]

    def init_from_serialized(self, data: bytes, stamp: int) -> None:
        proto = bt_pb2.TreeEnsemble()
        try:
            proto.ParseFromString(bytes(data))
        except Exception:  # protobuf's DecodeError and friends
            raise _invalid("Unable to parse tree ensemble proto.") from None
        self.proto, self.stamp = proto, int(stamp)
        self.version += 1

    # Reading.

    @property
    def num_trees(self) -> int:
        return len(self.proto.trees)

    def node(self, tree_id: int, node_id: int):
        return self.proto.trees[tree_id].nodes[node_id]

    def is_leaf(self, tree_id: int, node_id: int) -> bool:
        return self.node(tree_id, node_id).WhichOneof("node") == "leaf"

    def node_value(self, tree_id: int, node_id: int) -> list:
        """A leaf's value, or the leaf a split node was (empty when it kept none)."""
        return _value_of(self.node(tree_id, node_id))

    def is_finalized(self, tree_id: int) -> bool:
        return self.proto.tree_metadata[tree_id].is_finalized

    def next_node(self, tree_id: int, node_id: int, features: list, i: int) -> int:
        node = self.node(tree_id, node_id)
        kind = node.WhichOneof("node")
        if kind in ("bucketized_split", "categorical_split"):
            fid = getattr(node, kind).feature_id
            if not 0 <= fid < len(features):
                raise _invalid(
                    f"The ensemble splits on feature {fid}, but only "
                    f"{len(features)} bucketized features were given"
                )
        if kind == "bucketized_split":
            s = node.bucketized_split
            return (
                s.left_id
                if features[s.feature_id][i, s.dimension_id] <= s.threshold
                else s.right_id
            )
        if kind == "categorical_split":
            s = node.categorical_split
            return (
                s.left_id if features[s.feature_id][i, s.dimension_id] == s.value else s.right_id
            )
        raise _invalid(f"Node type {kind} not supported.")

    # Growing.

    def add_tree(self, logits: list) -> int:
        tree_id = self.num_trees
        node = self.proto.trees.add().nodes.add()
        node.leaf.SetInParent()
        if len(logits) == 1:
            node.leaf.scalar = float(logits[0])
        else:
            node.leaf.vector.value.extend(float(v) for v in logits)
        self.proto.tree_weights.append(_TREE_WEIGHT)
        self.proto.tree_metadata.add()
        return tree_id

    def update_growing_metadata(self) -> None:
        gm = self.proto.growing_metadata
        gm.num_layers_attempted += 1
        n = self.num_trees
        # A new tree is attempted when growing the first layer of the empty last tree.
        if n <= 0 or (
            (n == 1 or self.is_finalized(n - 2)) and len(self.proto.trees[n - 1].nodes) == 1
        ):
            gm.num_trees_attempted += 1

    def add_split(self, tree_id: int, node_id: int, cand: dict, logits_dim: int) -> None:
        tree = self.proto.trees[tree_id]
        node = tree.nodes[node_id]
        left_id = len(tree.nodes)
        left, right = tree.nodes.add(), tree.nodes.add()
        has_value = node.WhichOneof("node") == "leaf" and (
            (logits_dim == 1 and node.leaf.scalar != 0) or node.leaf.HasField("vector")
        )
        if node_id != 0 or has_value:
            node.metadata.original_leaf.CopyFrom(node.leaf)
        node.metadata.SetInParent()
        node.metadata.gain = float(cand["gain"])
        lc, rc = cand["left"], cand["right"]
        left.leaf.SetInParent()
        right.leaf.SetInParent()
        if logits_dim == 1:
            prev = _F(node.metadata.original_leaf.scalar)
            left.leaf.scalar = float(prev + lc[0])
            right.leaf.scalar = float(prev + rc[0])
        else:
            orig = node.metadata.original_leaf.vector.value
            for i in range(logits_dim):
                prev = _F(orig[i]) if has_value else _F(0)
                left.leaf.vector.value.append(float(prev + lc[i]))
                right.leaf.vector.value.append(float(prev + rc[i]))
        if cand["split_type"] == _EQUALITY:
            split = node.categorical_split
            split.SetInParent()
            split.value = cand["threshold"]
        else:
            split = node.bucketized_split
            split.SetInParent()
            split.threshold = cand["threshold"]
            split.default_direction = 1 if cand["split_type"] == _DEFAULT_RIGHT else 0
        split.feature_id = cand["feature_id"]
        split.dimension_id = cand["dimension_id"]
        split.left_id, split.right_id = left_id, left_id + 1

    def post_prune(self, tree_id: int, logits_dim: int) -> None:
        """Prune, bottom up, every split of negative gain whose children are leaves; keep
        for each old node id where it went and what a prediction cached there must add."""
        tree = self.proto.trees[tree_id]
        n = len(tree.nodes)
        if n == 0:
            return
        changes = [[i, []] for i in range(n)]  # [parent it was merged into, logit deltas]
        deleted: list[int] = []
        self._prune_below(tree_id, 0, deleted, changes)
        if not deleted:
            return
        deleted_set = set(deleted)
        old_to_new: dict[int, int] = {}
        meta = self.proto.tree_metadata[tree_id].post_pruned_nodes_meta
        new_index = 0
        for i in range(n):
            entry = meta.add()
            if i in deleted_set:
                node_id, delta = i, [_F(0)] * len(changes[i][1])
                while changes[node_id][0] != node_id:
                    delta = [d + c for d, c in zip(delta, changes[node_id][1], strict=True)]
                    node_id = changes[node_id][0]
                entry.new_node_id = old_to_new.setdefault(node_id, 0)
                entry.logit_change.extend(float(delta[j]) for j in range(logits_dim))
            else:
                old_to_new[i] = new_index
                new_index += 1
                entry.new_node_id = old_to_new[i]
                entry.logit_change.extend([0.0] * logits_dim)
        kept = []
        for i, node in enumerate(tree.nodes):
            if i in deleted_set:
                continue
            kept_node = bt_pb2.Node()
            kept_node.CopyFrom(node)
            if kept_node.WhichOneof("node") == "bucketized_split":
                s = kept_node.bucketized_split
                s.left_id = old_to_new.setdefault(s.left_id, 0)
                s.right_id = old_to_new.setdefault(s.right_id, 0)
            kept.append(kept_node)
        del tree.nodes[:]
        tree.nodes.extend(kept)

    def _prune_below(self, tree_id, node_id, deleted, changes) -> None:
        node = self.node(tree_id, node_id)
        if node.WhichOneof("node") == "leaf":
            return
        split = node.bucketized_split
        self._prune_below(tree_id, split.left_id, deleted, changes)
        self._prune_below(tree_id, split.right_id, deleted, changes)
        left_id, right_id = split.left_id, split.right_id
        if (
            node.metadata.gain < 0
            and self.is_leaf(tree_id, left_id)
            and self.is_leaf(tree_id, right_id)
        ):
            deleted += [left_id, right_id]
            had_original = node.metadata.HasField("original_leaf")
            original = bt_pb2.Leaf()
            original.CopyFrom(node.metadata.original_leaf)
            node.leaf.CopyFrom(original)
            changes[left_id][0] = changes[right_id][0] = node_id
            left_v, right_v = self.node_value(tree_id, left_id), self.node_value(tree_id, right_id)
            parent = self.node_value(tree_id, node_id) if had_original else [0.0] * len(left_v)
            for p, lv, rv in zip(parent, left_v, right_v, strict=False):
                changes[left_id][1].append(_F(p) - _F(lv))
                changes[right_id][1].append(_F(p) - _F(rv))
            node.ClearField("metadata")


def _ensemble_slot(handle) -> ResourceSlot:
    return slot_of(handle, TreeEnsemble.KIND)


def _ensemble(handle) -> TreeEnsemble:
    return _ensemble_slot(handle).lookup()


def _scalar_value(x, what: str):
    x = np.asarray(x)
    if x.ndim != 0:
        raise _invalid(f"{what} must be a scalar, got a tensor of shape {list(x.shape)}")
    return x[()]


BoostedTreesEnsembleResourceHandleOp = handle_op(
    "BoostedTreesEnsembleResourceHandleOp", TreeEnsemble.KIND
)
IsBoostedTreesEnsembleInitialized = is_initialized_op(
    "IsBoostedTreesEnsembleInitialized", "tree_ensemble_handle", TreeEnsemble.KIND
)


def _create_like(op_type: str):
    op_def = register_op(
        op_type,
        inputs=[
            "tree_ensemble_handle: resource",
            "stamp_token: int64",
            "tree_ensemble_serialized: string",
        ],
        shape_fn=_scalar_handle_shape(3, []),
        stateful=True,
    )
    return op_def


BoostedTreesCreateEnsemble = _create_like("BoostedTreesCreateEnsemble")
BoostedTreesDeserializeEnsemble = _create_like("BoostedTreesDeserializeEnsemble")


@BoostedTreesCreateEnsemble.kernel("CPU")
async def _create_ensemble(ctx, handle, stamp, serialized):
    ensemble = TreeEnsemble()
    ensemble.init_from_serialized(
        _scalar_value(serialized, "tree_ensemble_serialized"), _scalar_value(stamp, "stamp_token")
    )
    slot = _ensemble_slot(handle)
    if slot.resource is None:  # an existing ensemble is kept, as TF's (AlreadyExists ignored)
        slot.resource = ensemble


@BoostedTreesDeserializeEnsemble.kernel("CPU")
async def _deserialize_ensemble(ctx, handle, stamp, serialized):
    ensemble = _ensemble(handle)
    ensemble.stamp = -1  # TF resets before parsing: a bad proto leaves an empty ensemble
    ensemble.proto = bt_pb2.TreeEnsemble()
    ensemble.version += 1
    ensemble.init_from_serialized(
        _scalar_value(serialized, "tree_ensemble_serialized"), _scalar_value(stamp, "stamp_token")
    )


BoostedTreesGetEnsembleStates = register_op(
    "BoostedTreesGetEnsembleStates",
    inputs=["tree_ensemble_handle: resource"],
    outputs=[
        "stamp_token: int64",
        "num_trees: int32",
        "num_finalized_trees: int32",
        "num_attempted_layers: int32",
        "last_layer_nodes_range: int32",
    ],
    shape_fn=_scalar_handle_shape(1, [tensor_shape.TensorShape([])] * 4 + [[2]]),
    stateful=True,
)


@BoostedTreesGetEnsembleStates.kernel("CPU")
async def _get_ensemble_states(ctx, handle):
    e = _ensemble(handle)
    n = e.num_trees
    finalized = n if n <= 0 or e.is_finalized(n - 1) else n - 1
    gm = e.proto.growing_metadata
    return (
        np.int64(e.stamp),
        np.int32(n),
        np.int32(finalized),
        np.int64(gm.num_layers_attempted).astype(np.int32),
        # an empty ensemble's range is [0, 1): its one (future) root
        np.array([gm.last_layer_node_start, max(1, gm.last_layer_node_end)], np.int32),
    )


BoostedTreesSerializeEnsemble = register_op(
    "BoostedTreesSerializeEnsemble",
    inputs=["tree_ensemble_handle: resource"],
    outputs=["stamp_token: int64", "tree_ensemble_serialized: string"],
    shape_fn=_scalar_handle_shape(1, [tensor_shape.TensorShape([])] * 2),
    stateful=True,
)


@BoostedTreesSerializeEnsemble.kernel("CPU")
async def _serialize_ensemble(ctx, handle):
    e = _ensemble(handle)
    out = np.empty((), dtype=object)
    out[()] = e.proto.SerializeToString(deterministic=True)
    return np.int64(e.stamp), out


class _FeatureTable:
    """The bucketized features side by side, [batch, sum of their dimensions]: a split
    reads column offset[feature_id] + dimension_id."""

    def __init__(self, feats: list):
        self.values = np.concatenate(feats, axis=1) if feats else np.zeros((0, 0), np.int32)
        dims = [f.shape[1] for f in feats]
        self.offsets = np.concatenate([[0], np.cumsum(dims)]).astype(np.int64)
        self.dims = np.array(dims, np.int64)

    def columns(self, feature_ids, dimension_ids) -> np.ndarray:
        bad = feature_ids >= self.dims.size
        if bad.any():
            raise _invalid(
                f"The ensemble splits on feature {int(feature_ids[bad][0])}, but only "
                f"{self.dims.size} bucketized features were given"
            )
        if (dimension_ids >= self.dims[feature_ids]).any():
            raise _invalid("A split's dimension_id is beyond its feature's dimensions")
        return self.offsets[feature_ids] + dimension_ids


class _CompiledTree:
    """One tree as arrays over its node ids, so a batch walks it together: kind (0 leaf,
    1 bucketized <=, 2 categorical ==), feature, dimension, threshold, children, and
    each node's value (a leaf's, or the leaf a split node was; zeros where none)."""

    def __init__(self, tree, meta, weight, dim: int):
        n = len(tree.nodes)
        self.kind = np.zeros(n, np.int8)
        self.feature = np.zeros(n, np.int64)
        self.dimension = np.zeros(n, np.int64)
        self.threshold = np.zeros(n, np.int64)
        self.left = np.zeros(n, np.int64)
        self.right = np.zeros(n, np.int64)
        self.values = np.zeros((n, dim), np.float32)
        self.weight = _F(weight)
        for i, node in enumerate(tree.nodes):
            kind = node.WhichOneof("node")
            if kind in ("bucketized_split", "categorical_split"):
                split = getattr(node, kind)
                self.kind[i] = 1 if kind == "bucketized_split" else 2
                self.feature[i], self.dimension[i] = split.feature_id, split.dimension_id
                self.threshold[i] = split.threshold if self.kind[i] == 1 else split.value
                self.left[i], self.right[i] = split.left_id, split.right_id
            elif kind != "leaf":
                raise _invalid(f"Node type {kind} not supported.")
            value = _value_of(node)
            self.values[i, : min(len(value), dim)] = value[:dim]
        self.pruned = None
        if meta.is_finalized and len(meta.post_pruned_nodes_meta) > 0:
            self.pruned = (
                np.array([m.new_node_id for m in meta.post_pruned_nodes_meta], np.int64),
                np.array([list(m.logit_change)[:dim] + [0.0] * (dim - len(m.logit_change))
                          for m in meta.post_pruned_nodes_meta], np.float32),
            )  # fmt: skip

    def walk(self, table: _FeatureTable, rows: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """The leaf each example of `rows` reaches from its node in `nodes`."""
        nodes = nodes.copy()
        while True:
            inner = np.flatnonzero(self.kind[nodes] != 0)
            if inner.size == 0:
                return nodes
            at = nodes[inner]
            cols = table.columns(self.feature[at], self.dimension[at])
            vals = table.values[rows[inner], cols]
            left = np.where(self.kind[at] == 1, vals <= self.threshold[at],
                            vals == self.threshold[at])  # fmt: skip
            nodes[inner] = np.where(left, self.left[at], self.right[at])

    def post_prune(self, nodes: np.ndarray):
        """(where cached nodes went, the logit change of each) after post-pruning."""
        if self.pruned is None:
            return nodes, np.zeros((nodes.size, self.values.shape[1]), np.float32)
        return self.pruned[0][nodes], self.pruned[1][nodes]


def _value_of(node) -> list:
    if node.WhichOneof("node") == "leaf":
        leaf = node.leaf
        return list(leaf.vector.value) if leaf.HasField("vector") else [leaf.scalar]
    original = node.metadata.original_leaf
    if original.HasField("vector"):
        return list(original.vector.value)
    return [original.scalar] if node.metadata.HasField("original_leaf") else []


# -- prediction -----------------------------------------------------------------------------


def _features(values, n_expected: int) -> list:
    """Each bucketized feature as [batch, dimensions] (a vector is one dimension)."""
    feats = []
    for v in values:
        v = np.asarray(v, dtype=np.int32)
        feats.append(v.reshape(v.shape[0], -1) if v.ndim else v.reshape(1, 1))
    batch = feats[0].shape[0]
    for f in feats:
        if f.shape[0] != batch:
            raise _invalid(
                f"Bucketized features must have the same batch size, got {batch} and {f.shape[0]}"
            )
    return feats


def _batch(op, first: int):
    """The features' batch size (TF: each of rank <= 2, one batch dimension)."""
    n = op.get_attr("num_bucketized_features")
    min_list(op, "bucketized_features", n)
    for t in op.inputs[first : first + n]:
        shape = tensor_shape.as_shape(t.shape)
        if shape.ndims is not None and shape.ndims > 2:
            raise ValueError(f"Shape must be at most rank 2 but is rank {shape.ndims}")
        merge_dims(dim(op.inputs[first], 0), dim(t, 0))
    return dim(op.inputs[first + n - 1], 0)


def _pred_shape(op):
    return [tensor_shape.TensorShape([_batch(op, 1), op.get_attr("logits_dimension")])]


def _pred_op(op_type: str, extra_inputs=(), outputs=("logits: float32",), shape_fn=_pred_shape):
    op_def = register_op(
        op_type,
        inputs=[
            "tree_ensemble_handle: resource",
            *extra_inputs,
            "bucketized_features: num_bucketized_features * int32",
        ],
        outputs=list(outputs),
        attrs={"num_bucketized_features": REQUIRED, "logits_dimension": REQUIRED},
        shape_fn=shape_fn,
        stateful=True,
    )
    return op_def


BoostedTreesPredict = _pred_op("BoostedTreesPredict")


@BoostedTreesPredict.kernel("CPU")
async def _predict(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_predict_value, ctx, *args)


def _predict_value(ctx, handle, *features):
    e = _ensemble(handle)
    dim = ctx.attrs["logits_dimension"]
    feats = _features(features, ctx.attrs["num_bucketized_features"])
    batch = feats[0].shape[0]
    out = np.zeros((batch, dim), np.float32)
    if e.num_trees <= 0:
        return out
    table, everyone = _FeatureTable(feats), np.arange(batch)
    for tree in e.compiled(dim):
        leaves = tree.walk(table, everyone, np.zeros(batch, np.int64))
        out += tree.weight * tree.values[leaves]
    return out


def _training_pred_shape(op):
    b = _batch(op, 3)
    for t in op.inputs[1:3]:
        _rank(t.shape, 1)
    merge_dims(dim(op.inputs[1], 0), dim(op.inputs[2], 0))
    return [[b, op.get_attr("logits_dimension")], [b], [b]]


BoostedTreesTrainingPredict = _pred_op(
    "BoostedTreesTrainingPredict",
    extra_inputs=("cached_tree_ids: int32", "cached_node_ids: int32"),
    outputs=("partial_logits: float32", "tree_ids: int32", "node_ids: int32"),
    shape_fn=_training_pred_shape,
)


@BoostedTreesTrainingPredict.kernel("CPU")
async def _training_predict(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_training_predict_value, ctx, *args)


def _training_predict_value(ctx, handle, cached_tree_ids, cached_node_ids, *features):
    e = _ensemble(handle)
    dim = ctx.attrs["logits_dimension"]
    feats = _features(features, ctx.attrs["num_bucketized_features"])
    batch = feats[0].shape[0]
    tree_ids = np.asarray(cached_tree_ids, np.int32).reshape(-1).astype(np.int64)
    node_ids = np.asarray(cached_node_ids, np.int32).reshape(-1).astype(np.int64)
    logits = np.zeros((batch, dim), np.float32)
    latest = e.num_trees - 1
    if latest < 0:
        return logits, tree_ids.astype(np.int32), np.zeros(batch, np.int32)
    if batch and (tree_ids.min() < 0 or tree_ids.max() > latest):
        raise _invalid(f"cached_tree_ids must be in [0, {latest}]")
    trees, table = e.compiled(dim), _FeatureTable(feats)
    # The cached prediction already holds the cached node's value: each example counts
    # only the change from it (after any post-pruning moved the node), as TF's.
    tree_logit = np.zeros((batch, dim), np.float32)
    for t in np.unique(tree_ids[node_ids >= 0]):
        rows = np.flatnonzero((tree_ids == t) & (node_ids >= 0))
        tree = trees[t]
        moved, change = tree.post_prune(node_ids[rows])
        node_ids[rows], tree_logit[rows] = moved, change
        tree_logit[rows] -= tree.values[moved]
    node_ids[node_ids < 0] = 0
    for t in range(int(tree_ids.min()) if batch else latest, latest + 1):
        rows = np.flatnonzero(tree_ids <= t)  # every example has reached tree t by now
        tree = trees[t]
        fresh = rows[tree_ids[rows] < t]
        node_ids[fresh] = 0
        leaves = tree.walk(table, rows, node_ids[rows])
        node_ids[rows] = leaves
        logits[rows] += tree.weight * (tree_logit[rows] + tree.values[leaves])
        tree_logit[rows] = 0
        tree_ids[rows] = t
    return logits, np.full(batch, latest, np.int32), node_ids.astype(np.int32)


def _first(values: list):
    # a split root that kept no leaf (a zero bias) has no value: TF reads past its end
    return _F(values[0]) if values else _F(0)


BoostedTreesExampleDebugOutputs = _pred_op(
    "BoostedTreesExampleDebugOutputs",
    outputs=("examples_debug_outputs_serialized: string",),
    shape_fn=lambda op: [[_batch(op, 1)]],
)


@BoostedTreesExampleDebugOutputs.kernel("CPU")
async def _example_debug_outputs(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_example_debug_outputs_value, ctx, *args)


def _example_debug_outputs_value(ctx, handle, *features):
    e = _ensemble(handle)
    feats = _features(features, ctx.attrs["num_bucketized_features"])
    batch = feats[0].shape[0]
    out = np.empty(batch, dtype=object)
    last = e.num_trees - 1
    if last < 0:
        raise errors.FailedPreconditionError(
            None, None, "BoostedTreesExampleDebugOutputs needs an ensemble with a tree."
        )
    weights = [_F(w) for w in e.proto.tree_weights]
    for i in range(batch):
        info = bt_pb2.DebugOutput()
        tree_logit = weights[0] * _first(e.node_value(0, 0))
        info.logits_path.append(float(tree_logit))
        tree_id = node_id = 0
        past = _F(0)  # the leaves of the trees already walked
        while tree_id <= last:
            if e.is_leaf(tree_id, node_id):
                if tree_id == 0 or node_id > 0:
                    past = past + tree_logit
                info.leaf_node_ids.append(node_id)
                tree_id, node_id = tree_id + 1, 0
            else:
                info.feature_ids.append(e.node(tree_id, node_id).bucketized_split.feature_id)
                node_id = e.next_node(tree_id, node_id, feats, i)
                tree_logit = weights[tree_id] * _first(e.node_value(tree_id, node_id))
                info.logits_path.append(float(tree_logit + past))
        out[i] = info.SerializeToString(deterministic=True)
    return out


# -- growing --------------------------------------------------------------------------------


def _vector(x, what: str, idx: int) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1:
        raise _invalid(
            f"Each {what} must be a vector, received shape {list(x.shape)} at index {idx}"
        )
    return x


def _matrix(x, what: str, idx: int) -> np.ndarray:
    x = np.asarray(x, np.float32)
    if x.ndim != 2:
        raise _invalid(
            f"Each {what} must be a matrix, received shape {list(x.shape)} at index {idx}"
        )
    return x


def _gain_larger(g1, g2) -> bool:
    with np.errstate(over="ignore"):
        return bool(_F(g1) - _F(g2) >= _F(1e-15))


def _gains_equal(g1, g2) -> bool:
    with np.errstate(over="ignore"):
        return bool(abs(_F(g1) - _F(g2)) < _F(1e-15))


def _consider(best: dict, node_id: int, cand: dict) -> None:
    """TF's reduction of split candidates to one per node: the larger gain; on equal
    gains the smaller feature id."""
    cur = best.get(node_id)
    if cur is not None and _gains_equal(cand["gain"], cur["gain"]):
        if cand["feature_id"] < cur["feature_id"]:
            best[node_id] = cand
    elif cur is None or _gain_larger(cand["gain"], cur["gain"]):
        best[node_id] = cand


def _grow(
    e: TreeEnsemble, best: dict, max_depth, pruning: int, logits_dim: int, new_tree_dim: int
) -> None:
    n = e.num_trees
    current = n - 1
    e.update_growing_metadata()
    if n <= 0:
        current = e.add_tree([0.0] * logits_dim)
    if not best:
        return  # TF logs "Not growing tree ensemble as no good splits were found."
    layers = e.proto.tree_metadata[current].num_layers_grown + 1
    start = len(e.proto.trees[current].nodes)
    split = False
    for node_id in sorted(best):
        cand = best[node_id]
        if pruning == _PRE_PRUNING and cand["gain"] < 0:
            continue
        e.add_split(current, node_id, cand, logits_dim)
        split = True
    end = len(e.proto.trees[current].nodes)
    if not split:
        return
    md = e.proto.tree_metadata[current]
    md.num_layers_grown = layers
    if layers >= max_depth:
        start, end = 0, 1  # the next layer is the root of a new tree
        md.is_finalized = True
        if pruning == _POST_PRUNING:
            e.post_prune(current, logits_dim)
        if e.num_trees > 0:
            e.add_tree([0.0] * new_tree_dim)
    e.proto.growing_metadata.last_layer_node_start = start
    e.proto.growing_metadata.last_layer_node_end = end


def _update_shape(op):
    """TF's checks: node ids, gains and thresholds vectors of one length per feature,
    contribs [that length, logits dimension]; V1's feature_ids one per feature."""
    n = op.get_attr("num_features")
    if op.type == "BoostedTreesUpdateEnsemble":
        _rank(op.inputs[1].shape, 1)
        merge_shape(op.inputs[1], [n])
        first, d, kinds = 2, 1, ((1, 1), (2, 1), (3, 2), (4, 2))
    else:
        first = 1 + op.get_attr("num_groups") + n
        d, kinds = op.get_attr("logits_dimension"), ((1, 1), (2, 1), (3, 2), (4, 2), (5, 1))
    for i in range(n):
        node_ids = op.inputs[first + i]
        _rank(node_ids.shape, 1)
        m = dim(node_ids, 0)
        for k, rank in kinds:
            t = op.inputs[first + k * n + i]
            _rank(t.shape, rank)
            merge_shape(t, [m] if rank == 1 else [m, d])
    return []


BoostedTreesUpdateEnsemble = register_op(
    "BoostedTreesUpdateEnsemble",
    inputs=[
        "tree_ensemble_handle: resource",
        "feature_ids: int32",
        "node_ids: num_features * int32",
        "gains: num_features * float32",
        "thresholds: num_features * int32",
        "left_node_contribs: num_features * float32",
        "right_node_contribs: num_features * float32",
        "max_depth: int32",
        "learning_rate: float32",
    ],
    attrs={"pruning_mode": REQUIRED, "num_features": REQUIRED},
    shape_fn=_update_shape,
    stateful=True,
)


@BoostedTreesUpdateEnsemble.kernel("CPU")
async def _update_ensemble(ctx, handle, feature_ids, *args):
    n = ctx.attrs["num_features"]
    lists = [args[k * n : (k + 1) * n] for k in range(5)]
    max_depth, lr = args[5 * n], args[5 * n + 1]
    e = _ensemble(handle)
    e.stamp += 1
    e.version += 1
    feature_ids = np.asarray(feature_ids)
    if feature_ids.ndim != 1:
        raise _invalid(f"feature_ids must be a vector, received shape {list(feature_ids.shape)}")
    max_depth = int(_scalar_value(max_depth, "max_depth"))
    lr = _F(_scalar_value(lr, "learning_rate"))
    best: dict = {}
    for f in range(n):
        node_ids = _vector(lists[0][f], "node_id in node_ids_list", f)
        gains = _vector(lists[1][f], "gain in gains_list", f)
        thresholds = _vector(lists[2][f], "threshold in thresholds_list", f)
        left = _matrix(lists[3][f], "left_node_contribs in left_node_contribs_list", f)
        right = _matrix(lists[4][f], "right_node_contribs in right_node_contribs_list", f)
        for c in range(node_ids.shape[0]):
            _consider(
                best,
                int(node_ids[c]),
                {
                    "feature_id": int(feature_ids[f]),
                    "gain": _F(gains[c]),
                    "threshold": int(thresholds[c]),
                    "dimension_id": 0,
                    "left": [lr * left[c, 0]],
                    "right": [lr * right[c, 0]],
                    "split_type": "INEQUALITY_DEFAULT_LEFT",
                },
            )
    _grow(e, best, max_depth, ctx.attrs["pruning_mode"], 1, 1)


BoostedTreesUpdateEnsembleV2 = register_op(
    "BoostedTreesUpdateEnsembleV2",
    inputs=[
        "tree_ensemble_handle: resource",
        "feature_ids: num_groups * int32",
        "dimension_ids: num_features * int32",
        "node_ids: num_features * int32",
        "gains: num_features * float32",
        "thresholds: num_features * int32",
        "left_node_contribs: num_features * float32",
        "right_node_contribs: num_features * float32",
        "split_types: num_features * string",
        "max_depth: int32",
        "learning_rate: float32",
        "pruning_mode: int32",
    ],
    attrs={"num_features": REQUIRED, "logits_dimension": 1, "num_groups": 1},
    shape_fn=_update_shape,
    stateful=True,
)


@BoostedTreesUpdateEnsembleV2.kernel("CPU")
async def _update_ensemble_v2(ctx, handle, *args):
    groups, n = ctx.attrs["num_groups"], ctx.attrs["num_features"]
    dim = ctx.attrs["logits_dimension"]
    feature_ids = args[:groups]
    rest = args[groups:]
    lists = [rest[k * n : (k + 1) * n] for k in range(7)]
    max_depth, lr, pruning = rest[7 * n], rest[7 * n + 1], rest[7 * n + 2]
    e = _ensemble(handle)
    e.stamp += 1
    e.version += 1
    max_depth = int(_scalar_value(max_depth, "max_depth"))
    lr = _F(_scalar_value(lr, "learning_rate"))
    pruning = int(_scalar_value(pruning, "pruning_mode"))
    dims_l, nodes_l, gains_l, thr_l, left_l, right_l, types_l = lists
    best: dict = {}
    for g in range(groups):
        node_ids = _vector(nodes_l[g], "node_id in node_ids_list", g)
        gains = _vector(gains_l[g], "gain in gains_list", g)
        fids = _vector(feature_ids[g], "feature_id in feature_ids_lists", g)
        thresholds = _vector(thr_l[g], "threshold in thresholds_list", g)
        dim_ids = _vector(dims_l[g], "dimension_id in dimension_ids_list", g)
        left, right = np.asarray(left_l[g], np.float32), np.asarray(right_l[g], np.float32)
        types = _vector(types_l[g], "split_type in split_types_list", g)
        for c in range(node_ids.shape[0]):
            st = types[c]
            st = st.decode() if isinstance(st, bytes) else str(st)
            _consider(
                best,
                int(node_ids[c]),
                {
                    "feature_id": int(fids[c]),
                    "gain": _F(gains[c]),
                    "threshold": int(thresholds[c]),
                    "dimension_id": int(dim_ids[c]),
                    "left": [lr * left[c, i] for i in range(dim)],
                    "right": [lr * right[c, i] for i in range(dim)],
                    "split_type": st,
                },
            )
    _grow(e, best, max_depth, pruning, dim, dim)


def _center_bias_shape(op):
    g, h = op.inputs[1:3]
    _rank(g.shape, 2), _rank(h.shape, 2)
    if h.shape.ndims is not None:
        merge_shape(g, h.shape.as_list())
    _rank(op.inputs[3].shape, 0), _rank(op.inputs[4].shape, 0)
    return [tensor_shape.TensorShape([])]


BoostedTreesCenterBias = register_op(
    "BoostedTreesCenterBias",
    inputs=[
        "tree_ensemble_handle: resource",
        "mean_gradients: float32",
        "mean_hessians: float32",
        "l1: float32",
        "l2: float32",
    ],
    outputs=["continue_centering: bool"],
    shape_fn=lambda op: _center_bias_shape(op),
    stateful=True,
)


@BoostedTreesCenterBias.kernel("CPU")
async def _center_bias(ctx, handle, mean_gradients, mean_hessians, l1, l2):
    e = _ensemble(handle)
    e.stamp += 1
    e.version += 1
    l1 = _F(_scalar_value(l1, "l1"))
    l2 = _F(_scalar_value(l2, "l2"))
    g = _F(np.asarray(mean_gradients, np.float32).reshape(-1)[0])
    h = _F(np.asarray(mean_hessians, np.float32).reshape(-1)[0])
    logits = weight_and_gain([g], [h], l1, l2)[0][0]
    if e.num_trees == 0:
        e.add_tree([logits])
        return np.bool_(True)
    bias = _F(e.node_value(0, 0)[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        go_on = bool(abs(logits / bias) > _MIN_CENTER_DELTA)
    e.node(0, 0).leaf.scalar = float(bias + logits)
    return np.bool_(go_on)
