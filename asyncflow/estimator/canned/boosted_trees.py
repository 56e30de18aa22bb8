"""BoostedTreesClassifier / BoostedTreesRegressor / BoostedTreesEstimator (TF1's).

Gradient boosted trees grown layer by layer on the BoostedTrees* ops
(ops/boosted_trees_*.py), as TF's estimator does:

- every training step predicts with the ensemble so far (TrainingPredict), takes the
  loss's gradient and hessian per example (closed form for the plain binary logistic
  loss, else tf.gradients twice: with n_classes > 2, TF's maxent loss and each
  example's full [n, n] hessian), sums them per node and feature bucket
  (AggregateStats) and adds that to one ConditionalAccumulator per bucket size,
  stamped with the ensemble's stamp token;
- once `n_batches_per_layer` batches are in, the chief takes the averaged stats,
  finds each node's best split (CalculateBestFeatureSplitV2) and grows the layer
  (UpdateEnsembleV2), which moves the stamp on, so stats from the old layer are
  dropped as stale;
- with center_bias, the first layers instead centre the root's bias from the mean
  gradient and hessian (CenterBias) until it settles;
- training stops after n_trees finalized trees (or twice the layers that takes).

The ensemble is a resource registered in GraphKeys.RESOURCES (created by the
Scaffold's init op) and checkpointed as TF's "boosted_trees:0_stamp" and
"boosted_trees:0_serialized" (its TreeEnsemble proto).  Columns: bucketized (one
feature of len(boundaries)+1 buckets), indicator (one two-bucket feature per
category), categorical (equality splits) and float columns.

Float (numeric) columns are bucketized by boundaries a quantile sketch learns first
(QuantileAccumulator, 1/quantile_sketch_epsilon buckets): until they are flushed,
training steps only feed the sketch.

Differs from TF: train_in_memory and example ids are not supported.
"""

from __future__ import annotations

import collections
import functools

from asyncflow import dtypes, losses
from asyncflow import feature_column_kinds as fck
from asyncflow import graph as ops
from asyncflow import variables as variables_lib
from asyncflow.estimator.canned import boosted_trees_utils
from asyncflow.estimator.canned import head as head_lib
from asyncflow.estimator.canned.boosted_trees_resources import QuantileAccumulator, TreeEnsemble
from asyncflow.estimator.estimator import Estimator
from asyncflow.estimator.model_fn import ModeKeys
from asyncflow.gradients import gradients as tf_gradients
from asyncflow.ops import (
    accumulator_ops,
    array_ops,
    cast_ops,
    control_flow_cond,
    control_flow_ops,
    manip_ops,
    math_ops,
    reduction_ops,
    slicing_ops,
    sparse_ops,
    state_ops,
    summary_ops,
)
from asyncflow.protos import boosted_trees_pb2
from asyncflow.raw_op_functions import raw_ops
from asyncflow.train import checkpoint_utils, training_util
from asyncflow.train.basic_session_run_hooks import SessionRunArgs, SessionRunHook

__all__ = ["BoostedTreesClassifier", "BoostedTreesRegressor", "BoostedTreesEstimator"]

TreeHParams = collections.namedtuple(
    "TreeHParams",
    [
        "n_trees",
        "max_depth",
        "learning_rate",
        "l1",
        "l2",
        "tree_complexity",
        "min_node_weight",
        "center_bias",
        "pruning_mode",
        "quantile_sketch_epsilon",
    ],
)

_PRUNING_MODES = {"none": 0, "pre": 1, "post": 2}
_DUMMY_NODE_ID = -1
_DEBUG_KEY = "_serialized_debug_outputs_proto"
_INEQUALITY, _EQUALITY = "inequality", "equality"


def _pruning_mode(mode) -> int:
    if mode not in _PRUNING_MODES:
        raise ValueError(
            f"pruning_mode mode must be one of: {', '.join(sorted(_PRUNING_MODES))}. Found: {mode}"
        )
    return _PRUNING_MODES[mode]


def _boundaries_by_column(float_columns, boundaries) -> dict:
    out, i = {}, 0
    for column in float_columns:
        n = _num_floats(column)
        out[column.name] = boundaries[i : i + n]
        i += n
    return out


# -- features -------------------------------------------------------------------------------


def _kind(column) -> str:
    if isinstance(column, fck.IndicatorColumn):
        return "indicator"
    if isinstance(column, fck.BucketizedColumn):
        return "bucketized"
    if isinstance(column, fck.NumericColumn) or getattr(column, "_is_dense", False):
        return "float"
    if getattr(column, "_is_categorical", False):
        return "categorical"
    raise ValueError(f"Encountered unexpected column {column}")


def _float_columns(sorted_columns) -> list:
    return [c for c in sorted_columns if _kind(c) == "float"]


def _num_floats(column) -> int:
    """How many float features a dense column gives (its one dimension)."""
    shape = column._variable_shape
    if shape.ndims is not None and shape.ndims > 1:
        raise ValueError(
            f"For now, we only support Dense column with rank of 1, but column "
            f"`{column.name}` got: {shape}"
        )
    return shape.as_list()[0] if shape.as_list() else 1


def _transformed_features(features, sorted_columns, boundaries=None) -> list:
    """The int32 [batch, 1] (or [batch, dims]) bucketized features, in column order:
    an indicator column gives one feature per category, a float column one per element
    (bucketized by `boundaries`, {column name: one boundaries tensor per element}; its
    raw floats without them)."""
    builder = fck._Builder(features)
    result = []
    for column in sorted_columns:
        kind = _kind(column)
        value = builder.get(column)
        if kind == "float":
            values = slicing_ops.unstack(value, axis=1)
            if boundaries:
                values = raw_ops.BoostedTreesBucketize(
                    float_values=values, bucket_boundaries=boundaries[column.name]
                )
                values = values if isinstance(values, list) else [values]
            result.extend(array_ops.expand_dims(t, axis=1) for t in values)
            continue
        if kind == "bucketized":
            if value.shape.ndims is not None and value.shape.ndims > 2:
                source = column.source_column.name
                raise ValueError(
                    f"For now, only supports features equivalent to rank 2 but column "
                    f"`{source}` got: {features[source].shape}"
                )
            result.append(value)
        elif kind == "indicator":
            value = cast_ops.cast(value, dtypes.int32)
            result.extend(
                array_ops.expand_dims(t, axis=1) for t in slicing_ops.unstack(value, axis=1)
            )
        else:
            ids = column._ids(builder).id_tensor
            dense = sparse_ops.sparse_tensor_to_dense(ids)
            result.append(cast_ops.cast(dense, dtypes.int32))
    return result


def _group_features(sorted_columns, num_quantiles):
    """TF's grouping of feature ids by bucket count: (bucket sizes, feature ids per size,
    split types per size); every bucketized feature shares the largest bucket count,
    every float feature has num_quantiles buckets."""
    groups = collections.OrderedDict()
    groups["bucketized"] = []
    most_buckets, idx = 2, 0
    for column in sorted_columns:
        kind = _kind(column)
        if kind == "indicator":
            for _ in range(column.categorical_column.num_buckets):
                groups.setdefault(2, []).append((idx, _INEQUALITY))
                idx += 1
        elif kind == "bucketized":
            most_buckets = max(most_buckets, len(column.boundaries) + 1)
            groups["bucketized"].append((idx, _INEQUALITY))
            idx += 1
        elif kind == "float":
            for _ in range(_num_floats(column)):
                groups.setdefault(num_quantiles, []).append((idx, _INEQUALITY))
                idx += 1
        else:
            groups.setdefault(column.num_buckets, []).append((idx, _EQUALITY))
            idx += 1
    bucketized = groups.pop("bucketized")
    if most_buckets in groups:
        groups[most_buckets].extend(bucketized)
    elif bucketized:
        groups[most_buckets] = bucketized
    sizes = list(groups)
    ids = [tuple(i for i, _ in groups[s]) for s in sizes]
    types = [tuple(t for _, t in groups[s]) for s in sizes]
    return sizes, ids, types


def _num_features(sorted_columns) -> int:
    n = 0
    for column in sorted_columns:
        kind = _kind(column)
        if kind == "indicator":
            n += column.categorical_column.num_buckets
        else:
            n += _num_floats(column) if kind == "float" else 1
    return n


# -- growing --------------------------------------------------------------------------------


def _variable(initial_value, name):
    return variables_lib.Variable(
        initial_value=initial_value,
        trainable=False,
        validate_shape=False,
        name=name,
        use_resource=True,
    )


def _max_splits(hparams) -> int:
    return (1 << hparams.max_depth) - 1


class _AccumulatorGrower:
    """TF's accumulator-based grower: stats go to accumulators stamped with the
    ensemble's stamp; the chief grows once n_batches_per_layer of them are in."""

    def __init__(
        self,
        ensemble,
        hparams,
        stamp_token,
        n_batches,
        bucket_sizes,
        feature_ids_list,
        logits_dimension,
        is_chief,
    ):
        self._ensemble, self._hparams = ensemble, hparams
        self._stamp, self._n_batches = stamp_token, n_batches
        self._feature_ids_list, self._dim = feature_ids_list, logits_dimension
        self._is_chief = is_chief
        self._pruning = _pruning_mode(hparams.pruning_mode)
        if hparams.tree_complexity > 0:
            if self._pruning == 0:
                raise ValueError("Tree complexity have no effect unless pruning mode is chosen.")
        elif self._pruning != 0:
            raise ValueError("For pruning, tree_complexity must be positive.")
        self._accumulators, self._init_ops = [], []
        for i, (size, feature_ids) in enumerate(zip(bucket_sizes, feature_ids_list, strict=True)):
            acc = accumulator_ops.ConditionalAccumulator(
                dtype=dtypes.float32,
                shape=[
                    len(feature_ids),
                    _max_splits(hparams),
                    1,
                    size + 1,
                    logits_dimension + logits_dimension * logits_dimension,
                ],
                shared_name=f"numeric_stats_summary_accumulator_{i}",
            )
            self._init_ops.append(acc.set_global_step(stamp_token))
            self._accumulators.append(acc)
        if hparams.center_bias:
            self._bias_acc = accumulator_ops.ConditionalAccumulator(
                dtype=dtypes.float32, shape=[2, 1], shared_name="bias_accumulator"
            )
            self._init_ops.append(self._bias_acc.set_global_step(stamp_token))

    def chief_init_op(self):
        return control_flow_ops.group(*self._init_ops)

    def accumulate_quantiles(self, quantiles, float_features, weights, boundaries_ready):
        """Add the batch's sketches; the chief flushes the boundaries once
        n_batches_per_layer batches went in (counted by a stamped accumulator)."""
        summary_op = quantiles.add_summaries(float_features, weights)
        counter = accumulator_ops.ConditionalAccumulator(
            dtype=dtypes.float32, shape={}, shared_name="quantile_summary_accum"
        )
        update = control_flow_ops.group(
            summary_op,
            counter.set_global_step(self._stamp),
            counter.apply_grad(array_ops.constant(0.0), self._stamp),
        )
        if not self._is_chief:
            return update
        with ops.control_dependencies([update]):

            def flush():
                taken = counter.take_grad(1)
                return control_flow_ops.group(
                    quantiles.flush(), taken, boundaries_ready.assign(True).op
                )

            return control_flow_cond.cond(
                math_ops.greater_equal(counter.num_accumulated(), self._n_batches),
                flush,
                control_flow_ops.no_op,
                name="wait_until_quaniles_accumulated",
            )

    def center_bias(self, center_bias_var, gradients, hessians):
        stats = reduction_ops.reduce_mean(manip_ops.stack([gradients, hessians], axis=0), axis=1)
        apply = self._bias_acc.apply_grad(stats, self._stamp)
        with ops.control_dependencies([apply]):
            if not self._is_chief:
                return control_flow_ops.no_op()

            def restamp():
                return control_flow_ops.group(
                    *[a.set_global_step(self._stamp + 1) for a in self._accumulators]
                )

            def center():
                taken = slicing_ops.unstack(self._bias_acc.take_grad(1), axis=0)
                continue_centering = raw_ops.BoostedTreesCenterBias(
                    tree_ensemble_handle=self._ensemble.resource_handle,
                    mean_gradients=array_ops.expand_dims(taken[0], 0),
                    mean_hessians=array_ops.expand_dims(taken[1], 0),
                    l1=self._hparams.l1,
                    l2=self._hparams.l2,
                )
                op = center_bias_var.assign(continue_centering)
                with ops.control_dependencies([op]):
                    return control_flow_cond.cond(center_bias_var, control_flow_ops.no_op, restamp)

            return control_flow_cond.cond(
                math_ops.greater_equal(self._bias_acc.num_accumulated(), self._n_batches),
                center,
                control_flow_ops.no_op,
                name="wait_until_n_batches_for_bias_accumulated",
            )

    def grow_tree(self, stats_summaries_list, nodes_range, split_types_list):
        applied = [
            acc.apply_grad(manip_ops.stack(stats, axis=0), self._stamp)
            for acc, stats in zip(self._accumulators, stats_summaries_list, strict=True)
        ]
        with ops.control_dependencies(applied):
            if not self._is_chief:
                return control_flow_ops.no_op()
            fewest = reduction_ops.reduce_min(
                manip_ops.stack([acc.num_accumulated() for acc in self._accumulators])
            )

            def grow():
                taken = [slicing_ops.unstack(a.take_grad(1), axis=0) for a in self._accumulators]
                return self._grow(taken, nodes_range, split_types_list)

            return control_flow_cond.cond(
                math_ops.greater_equal(fewest, self._n_batches),
                grow,
                control_flow_ops.no_op,
                name="wait_until_n_batches_accumulated",
            )

    def _grow(self, stats_summaries_list, nodes_range, split_types_list):
        h = self._hparams
        outs = [
            raw_ops.BoostedTreesCalculateBestFeatureSplitV2(
                node_id_range=nodes_range,
                stats_summaries_list=stats,
                split_types=list(types),
                candidate_feature_ids=list(ids),
                l1=h.l1,
                l2=h.l2,
                tree_complexity=h.tree_complexity,
                min_node_weight=h.min_node_weight,
                logits_dimension=self._dim,
            )
            for stats, ids, types in zip(
                stats_summaries_list, self._feature_ids_list, split_types_list, strict=True
            )
        ]
        return raw_ops.BoostedTreesUpdateEnsembleV2(
            tree_ensemble_handle=self._ensemble.resource_handle,
            feature_ids=[o.feature_ids for o in outs],
            dimension_ids=[o.feature_dimensions for o in outs],
            node_ids=[o.node_ids for o in outs],
            gains=[o.gains for o in outs],
            thresholds=[o.thresholds for o in outs],
            left_node_contribs=[o.left_node_contribs for o in outs],
            right_node_contribs=[o.right_node_contribs for o in outs],
            split_types=[o.split_with_default_directions for o in outs],
            learning_rate=h.learning_rate,
            max_depth=h.max_depth,
            pruning_mode=self._pruning,
            logits_dimension=self._dim,
        )


class _StopAtAttemptsHook(SessionRunHook):
    """Stops training at n_trees finalized trees, or at twice the layers that takes."""

    def __init__(self, num_finalized_trees, num_attempted_layers, max_trees, max_depth):
        self._tensors = [num_finalized_trees, num_attempted_layers]
        self._max_trees, self._max_depth = max_trees, max_depth

    def before_run(self, run_context):
        return SessionRunArgs(self._tensors)

    def after_run(self, run_context, run_values):
        finalized, attempted = run_values.results
        # The fetched values are from before this step grew: near the limit, read again.
        if (
            finalized >= self._max_trees - 1
            or attempted > 2 * self._max_trees * self._max_depth - 1
        ):
            finalized, attempted = run_context.session.run(self._tensors)
        if finalized >= self._max_trees or attempted > 2 * self._max_trees * self._max_depth:
            run_context.request_stop()


class _GrowerInitializationHook(SessionRunHook):
    def __init__(self, init_op):
        self._init_op = init_op

    def after_create_session(self, session, coord):
        session.run(self._init_op)


def _hessians(logits, gradients, logits_dimension):
    """d gradients / d logits: per example, its [d, d] hessian flattened (TF's "full
    hessian" for several logits)."""
    if logits_dimension == 1:
        return tf_gradients(gradients, logits, name="Hessians")[0]
    rows = [
        tf_gradients(g, logits, name=f"Hessian_{row}")[0]
        for row, g in enumerate(slicing_ops.unstack(gradients, num=logits_dimension, axis=1))
    ]
    return array_ops.reshape(manip_ops.stack(rows, axis=1), (-1, logits_dimension**2))


def _bt_model_fn(
    features,
    labels,
    mode,
    head,
    feature_columns,
    hparams,
    n_batches_per_layer,
    config,
    closed_form=None,
    weight_column=None,
    name="boosted_trees",
    explain=False,
):
    dim = head.logits_dimension
    sorted_columns = sorted(feature_columns, key=lambda c: c.name)
    float_columns = _float_columns(sorted_columns)
    with ops.name_scope(name) as scope:
        global_step = training_util.get_or_create_global_step()
        ensemble = TreeEnsemble(name=scope)
        num_quantiles = int(1.0 / hparams.quantile_sketch_epsilon)
        quantiles, boundaries = None, {}
        if float_columns:
            quantiles = QuantileAccumulator(
                epsilon=hparams.quantile_sketch_epsilon,
                num_streams=sum(_num_floats(c) for c in float_columns),
                num_quantiles=num_quantiles,
                name="QuantileAccumulator",
            )
            boundaries = _boundaries_by_column(float_columns, quantiles.get_bucket_boundaries())
        sizes, feature_ids_list, split_types_list = _group_features(sorted_columns, num_quantiles)
        if mode != ModeKeys.TRAIN:
            logits = raw_ops.BoostedTreesPredict(
                tree_ensemble_handle=ensemble.resource_handle,
                bucketized_features=_transformed_features(features, sorted_columns, boundaries),
                logits_dimension=dim,
            )
            spec = head.create_estimator_spec(
                features, mode, logits, labels, train_op_fn=control_flow_ops.no_op
            )
            if explain:  # each example's path through the trees, for its DFCs
                spec.predictions[_DEBUG_KEY] = raw_ops.BoostedTreesExampleDebugOutputs(
                    tree_ensemble_handle=ensemble.resource_handle,
                    bucketized_features=_transformed_features(
                        features, sorted_columns, boundaries
                    ),
                    logits_dimension=dim,
                )
            return spec
        boundaries_ready = _variable(not float_columns, "are_boundaries_ready")
        input_features = _transformed_features(features, sorted_columns, boundaries)
        batch = array_ops.shape(labels)[0]
        cached_tree_ids = array_ops.zeros([batch], dtype=dtypes.int32)
        cached_node_ids = _DUMMY_NODE_ID * array_ops.ones([batch], dtype=dtypes.int32)
        cached_logits = array_ops.zeros([batch, dim], dtype=dtypes.float32)
        stamp, num_trees, num_finalized, num_attempted, nodes_range = ensemble.get_states()
        partial = raw_ops.BoostedTreesTrainingPredict(
            tree_ensemble_handle=ensemble.resource_handle,
            cached_tree_ids=cached_tree_ids,
            cached_node_ids=cached_node_ids,
            bucketized_features=input_features,
            logits_dimension=dim,
        )
        logits = cached_logits + partial.partial_logits
        grower = _AccumulatorGrower(
            ensemble,
            hparams,
            stamp,
            n_batches_per_layer,
            sizes,
            feature_ids_list,
            dim,
            config.is_chief,
        )
        summary_ops.scalar("ensemble/num_trees", num_trees)
        summary_ops.scalar("ensemble/num_finalized_trees", num_finalized)
        summary_ops.scalar("ensemble/num_attempted_layers", num_attempted)
        center_bias_var = _variable(hparams.center_bias, "center_bias_needed")
        if weight_column is None:
            weights = array_ops.constant(1.0, shape=[1])
        else:
            key = getattr(weight_column, "key", weight_column)
            weights = array_ops.reshape(cast_ops.cast(features[key], dtypes.float32), [-1])

        def _update_quantiles():
            with ops.name_scope("UpdateQuantile"):
                floats = _transformed_features(features, float_columns)
                squeezed = [array_ops.squeeze(f, axis=1) for f in floats]
                return grower.accumulate_quantiles(quantiles, squeezed, weights, boundaries_ready)

        def _train_op_fn(loss):
            if not float_columns:
                return _grow_op(loss)
            return control_flow_cond.cond(
                boundaries_ready, lambda: _grow_op(loss), _update_quantiles
            )

        def _grow_op(loss):
            if dim == 1 and closed_form is not None:
                gradients, hessians = closed_form(logits, labels)
            else:
                gradients = tf_gradients(loss, logits, name="Gradients")[0]
                hessians = _hessians(logits, gradients, dim)
            stats_list = [
                [
                    raw_ops.BoostedTreesAggregateStats(
                        node_ids=partial.node_ids,
                        gradients=gradients,
                        hessians=hessians,
                        feature=input_features[fid],
                        max_splits=_max_splits(hparams),
                        num_buckets=size,
                    )
                    for fid in feature_ids
                ]
                for size, feature_ids in zip(sizes, feature_ids_list, strict=True)
            ]
            grow = functools.partial(grower.grow_tree, stats_list, nodes_range, split_types_list)
            if hparams.center_bias:
                center = functools.partial(
                    grower.center_bias, center_bias_var, gradients, hessians
                )
                update = control_flow_cond.cond(center_bias_var, center, grow)
            else:
                update = grow()
            with ops.control_dependencies([update]):
                step = state_ops.assign_add(global_step, 1).op
            return control_flow_ops.group(update, step, name="grow_op")

    spec = head.create_estimator_spec(features, mode, logits, labels, train_op_fn=_train_op_fn)
    stop = _StopAtAttemptsHook(num_finalized, num_attempted, hparams.n_trees, hparams.max_depth)
    return spec._replace(
        training_hooks=tuple(spec.training_hooks) + (stop,),
        training_chief_hooks=[_GrowerInitializationHook(grower.chief_init_op())]
        + list(spec.training_chief_hooks),
    )


# -- heads ---------------------------------------------------------------------------------


def _logloss_grad_and_hess(head):
    """The binary logistic loss's closed-form gradient and hessian, averaged per example."""

    def fn(logits, labels):
        predictions = math_ops.reciprocal(math_ops.exp(-logits) + 1.0)
        normalizer = math_ops.reciprocal(
            cast_ops.cast(array_ops.size(predictions), dtypes.float32)
        )
        labels = head_lib._labels_2d(cast_ops.cast(labels, dtypes.float32), 1)
        gradients = (predictions - labels) * normalizer
        hessians = predictions * (1.0 - predictions) * normalizer
        return gradients, hessians

    return fn


def per_example_maxent_loss(labels, weights, logits, num_classes, eps=1e-15):
    """TF's twice-differentiable multi-class log loss: -log(softmax(logits)[label]),
    the probability kept within [eps, 1 - eps]; times `weights` when given."""
    labels = cast_ops.cast(labels, dtypes.int64)
    if labels.shape.ndims != 2:
        labels = array_ops.expand_dims(labels, 1)
    one_hot = slicing_ops.one_hot(indices=labels, depth=num_classes)
    labels = cast_ops.cast(reduction_ops.reduce_sum(one_hot, axis=[1]), dtypes.float32)
    unnormalized = math_ops.exp(logits)
    normalizers = reduction_ops.reduce_sum(unnormalized, 1, keepdims=True)
    softmax = math_ops.divide(unnormalized, math_ops.add(normalizers, eps))
    probs = reduction_ops.reduce_sum(labels * softmax, 1)
    zeros = array_ops.zeros_like(probs, dtype=logits.dtype) + eps
    one_minus_eps = array_ops.ones_like(probs, dtype=logits.dtype) - eps
    probs = slicing_ops.where(probs >= eps, probs, zeros)
    probs = slicing_ops.where(probs <= 1 - eps, probs, one_minus_eps)
    loss = array_ops.expand_dims(-math_ops.log(probs), 1)
    return (loss, control_flow_ops.no_op()) if weights is None else (loss * weights, None)


class _MaxentHead(head_lib._MultiClassHead):
    """The multi-class head with TF's maxent loss, whose hessian tf.gradients can take."""

    def _unreduced_loss(self, labels, logits):
        return per_example_maxent_loss(labels, None, logits, self.logits_dimension)[0]


def _validate(hparams) -> None:
    for p in ("n_trees", "max_depth", "learning_rate", "quantile_sketch_epsilon"):
        if getattr(hparams, p) <= 0:
            raise ValueError(f"Expected {p} > 0, received: {getattr(hparams, p)}")
    for p in ("l1", "l2", "tree_complexity", "min_node_weight"):
        if getattr(hparams, p) < 0:
            raise ValueError(f"Expected {p} >= 0, received: {getattr(hparams, p)}")


class _BoostedTreesBase(Estimator):
    def __init__(
        self,
        head,
        feature_columns,
        n_batches_per_layer,
        model_dir,
        config,
        hparams,
        closed_form=None,
        weight_column=None,
    ):
        _validate(hparams)
        columns = list(feature_columns)

        def _model_fn(features, labels, mode, config):
            return _bt_model_fn(
                features,
                labels,
                mode,
                head,
                columns,
                hparams,
                n_batches_per_layer,
                config,
                closed_form,
                weight_column,
            )

        super().__init__(_model_fn, model_dir=model_dir, config=config)
        self._sorted_feature_columns = sorted(columns, key=lambda c: c.name)
        self._head = head
        self._n_features = _num_features(self._sorted_feature_columns)
        self._feature_col_names = _feature_names(self._sorted_feature_columns)
        self._center_bias = hparams.center_bias
        self._hparams = hparams
        self._is_classification = isinstance(head, head_lib._BinaryHead | _MaxentHead)

    def experimental_predict_with_explanations(
        self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None
    ):
        """Predictions with each example's directional feature contributions: 'dfc'
        ({column name: contribution}, largest magnitude first) and 'bias' (the
        prediction of the centred bias), as TF's.

        Raises:
          ValueError: the estimator was built without center_bias, or has several
            logits.
        """
        if not self._center_bias:
            raise ValueError(
                "center_bias must be enabled during estimator instantiation when using "
                "experimental_predict_with_explanations."
            )
        if self._head.logits_dimension > 1:
            raise ValueError(
                "experimental_predict_with_explanations does not yet support multi-class "
                "classification and multi-label regression."
            )

        def explain_fn(features, labels, mode):
            return _bt_model_fn(
                features,
                None,
                ModeKeys.PREDICT,
                self._head,
                self._sorted_feature_columns,
                self._hparams,
                1,
                self.config,
                explain=True,
            )

        est = Estimator(explain_fn, model_dir=self.model_dir, config=self.config)
        if predict_keys is not None:
            predict_keys = set(predict_keys) | {_DEBUG_KEY}
        for pred in est.predict(
            input_fn, predict_keys=predict_keys, hooks=hooks, checkpoint_path=checkpoint_path
        ):
            serialized = pred.pop(_DEBUG_KEY)
            pred["bias"], pred["dfc"] = boosted_trees_utils.explanations(
                serialized, self._feature_col_names, self._is_classification
            )
            yield pred

    def experimental_feature_importances(self, normalize=False):
        """Gain-based importances: {feature column name: importance}, largest first.

        Raises:
          ValueError: no trained ensemble in model_dir.
          AssertionError: normalize on an ensemble without splits or with negative gains.
        """
        reader = checkpoint_utils.load_checkpoint(self._model_dir)
        serialized = reader.get_tensor("boosted_trees:0_serialized")
        if not serialized:
            raise ValueError(
                "Found empty serialized string for TreeEnsemble.You should only call this "
                "method after training."
            )
        ensemble = boosted_trees_pb2.TreeEnsemble.FromString(bytes(serialized))
        n = self._n_features
        importances = boosted_trees_utils.feature_importances(ensemble, n, normalize)
        return boosted_trees_utils.sum_by_name_and_sort(self._feature_col_names, importances)


def _feature_names(sorted_columns) -> list:
    """The column name of each feature id (an indicator column's categories share it)."""
    names = []
    for column in sorted_columns:
        kind = _kind(column)
        if kind == "indicator":
            names += [column.categorical_column.name] * column.categorical_column.num_buckets
        elif kind == "float":
            names += [column.name] * _num_floats(column)
        else:
            names.append(column.name)
    return names


def _hparams(
    n_trees,
    max_depth,
    learning_rate,
    l1,
    l2,
    tree_complexity,
    min_node_weight,
    center_bias,
    pruning_mode,
    quantile_sketch_epsilon,
):
    return TreeHParams(
        n_trees,
        max_depth,
        learning_rate,
        l1,
        l2,
        tree_complexity,
        min_node_weight,
        center_bias,
        pruning_mode,
        quantile_sketch_epsilon,
    )


class BoostedTreesClassifier(_BoostedTreesBase):
    """Gradient boosted trees classifier (TF1's `tf.estimator.BoostedTreesClassifier`).

    Raises:
      ValueError: a bad hyper-parameter (n_trees, max_depth, learning_rate <= 0; l1, l2,
        tree_complexity, min_node_weight < 0; tree_complexity without pruning or
        pruning without it), center_bias with n_classes > 2.
    """

    def __init__(
        self,
        feature_columns,
        n_batches_per_layer,
        model_dir=None,
        n_classes=2,
        weight_column=None,
        label_vocabulary=None,
        n_trees=100,
        max_depth=6,
        learning_rate=0.1,
        l1_regularization=0.0,
        l2_regularization=0.0,
        tree_complexity=0.0,
        min_node_weight=0.0,
        config=None,
        center_bias=False,
        pruning_mode="none",
        quantile_sketch_epsilon=0.01,
        train_in_memory=False,
    ):
        if n_classes > 2 and center_bias:
            raise ValueError("center_bias not yet support with n_classes > 2.")
        if train_in_memory:
            raise ValueError("train_in_memory is not supported by asyncflow's BoostedTrees.")
        if n_classes == 2:
            head = head_lib.classifier_head(
                n_classes, weight_column, losses.Reduction.SUM_OVER_BATCH_SIZE, label_vocabulary
            )
        else:
            if n_classes is None or n_classes < 2:
                raise ValueError(f"n_classes must be > 2: {n_classes}.")
            head = _MaxentHead(
                n_classes,
                weight_column,
                losses.Reduction.SUM_OVER_NONZERO_WEIGHTS,
                label_vocabulary,
            )
        closed = None
        if n_classes == 2 and weight_column is None and label_vocabulary is None:
            closed = _logloss_grad_and_hess(head)
        hp = _hparams(
            n_trees,
            max_depth,
            learning_rate,
            l1_regularization,
            l2_regularization,
            tree_complexity,
            min_node_weight,
            center_bias,
            pruning_mode,
            quantile_sketch_epsilon,
        )
        super().__init__(
            head,
            feature_columns,
            n_batches_per_layer,
            model_dir,
            config,
            hp,
            closed,
            weight_column,
        )


class BoostedTreesRegressor(_BoostedTreesBase):
    """Gradient boosted trees regressor (TF1's `tf.estimator.BoostedTreesRegressor`).

    Raises:
      ValueError: as BoostedTreesClassifier; center_bias with label_dimension > 1.
    """

    def __init__(
        self,
        feature_columns,
        n_batches_per_layer,
        model_dir=None,
        label_dimension=1,
        weight_column=None,
        n_trees=100,
        max_depth=6,
        learning_rate=0.1,
        l1_regularization=0.0,
        l2_regularization=0.0,
        tree_complexity=0.0,
        min_node_weight=0.0,
        config=None,
        center_bias=False,
        pruning_mode="none",
        quantile_sketch_epsilon=0.01,
        train_in_memory=False,
    ):
        if label_dimension > 1 and center_bias:
            raise ValueError("center_bias not yet support with label_dimension > 1.")
        if train_in_memory:
            raise ValueError("train_in_memory is not supported by asyncflow's BoostedTrees.")
        head = head_lib.regression_head(
            label_dimension, weight_column, losses.Reduction.SUM_OVER_BATCH_SIZE
        )
        hp = _hparams(
            n_trees,
            max_depth,
            learning_rate,
            l1_regularization,
            l2_regularization,
            tree_complexity,
            min_node_weight,
            center_bias,
            pruning_mode,
            quantile_sketch_epsilon,
        )
        super().__init__(
            head, feature_columns, n_batches_per_layer, model_dir, config, hp, None, weight_column
        )


class BoostedTreesEstimator(_BoostedTreesBase):
    """Gradient boosted trees over a given head (TF1's `tf.estimator.BoostedTreesEstimator`)."""

    def __init__(
        self,
        feature_columns,
        n_batches_per_layer,
        head,
        model_dir=None,
        weight_column=None,
        n_trees=100,
        max_depth=6,
        learning_rate=0.1,
        l1_regularization=0.0,
        l2_regularization=0.0,
        tree_complexity=0.0,
        min_node_weight=0.0,
        config=None,
        center_bias=False,
        pruning_mode="none",
        quantile_sketch_epsilon=0.01,
    ):
        hp = _hparams(
            n_trees,
            max_depth,
            learning_rate,
            l1_regularization,
            l2_regularization,
            tree_complexity,
            min_node_weight,
            center_bias,
            pruning_mode,
            quantile_sketch_epsilon,
        )
        super().__init__(
            head, feature_columns, n_batches_per_layer, model_dir, config, hp, None, weight_column
        )
