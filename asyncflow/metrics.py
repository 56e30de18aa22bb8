"""`af.metrics`: TF1's streaming metrics (`tf.metrics` / `tf.compat.v1.metrics`).

Each metric makes its accumulators as local variables (collections LOCAL_VARIABLES and
METRIC_VARIABLES, zero-initialised, not trainable) under a variable scope named after
it, and returns `(value, update_op)`: running `update_op` folds a batch into the
accumulators and returns the updated value; `value` reads the accumulators.  Run
`af.local_variables_initializer()` first (and again to reset).  Divisions that would be
0/0 give 0, as TF's `_safe_div`.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, math_composites
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.distribute import context as distribute_context
from asyncflow.metrics_at_k import (  # (TF's top-k metrics, and the metric variables)
    average_precision_at_k,
    metric_variable,
    precision_at_k,
    precision_at_top_k,
    recall_at_k,
    recall_at_top_k,
    sparse_average_precision_at_k,
    sparse_precision_at_k,
)
from asyncflow.ops import (
    array_ops,
    cast_ops,
    check_ops,
    control_flow_ordering,
    math_ops,
    matmul_ops,
    reduction_ops,
    slicing_ops,
    state_ops,
)

__all__ = [
    "accuracy",
    "average_precision_at_k",
    "auc",
    "false_negatives",
    "false_negatives_at_thresholds",
    "false_positives",
    "false_positives_at_thresholds",
    "mean",
    "mean_absolute_error",
    "mean_cosine_distance",
    "mean_iou",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_squared_error",
    "mean_tensor",
    "percentage_below",
    "precision",
    "precision_at_k",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
    "precision_at_thresholds",
    "precision_at_top_k",
    "recall",
    "recall_at_k",
    "recall_at_thresholds",
    "recall_at_top_k",
    "root_mean_squared_error",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives",
    "true_positives_at_thresholds",
    "confusion_matrix",
]

METRIC_VARIABLES = ops.GraphKeys.METRIC_VARIABLES
_F32 = dtypes.float32


def _f32(x):
    x = ops.convert_to_tensor(x)
    return x if x.dtype == _F32 else cast_ops.cast(x, _F32)


def _safe_div(num, den, name=None):
    """num / den, or 0 where den is 0."""
    zero = array_ops.zeros_like(den)
    safe = slicing_ops.where(math_ops.equal(den, zero), array_ops.ones_like(den), den)
    return slicing_ops.where(
        math_ops.equal(den, zero), zero, math_ops.truediv(num, safe), name=name
    )


def _collect(tensor, collections):
    if collections:
        ops.add_to_collections(collections, tensor)


def _squeeze_like(a, b):
    """Drop a trailing size-1 dimension of whichever of a, b has one rank more (TF's
    `remove_squeezable_dimensions`)."""
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra is not None and rb is not None:
        if ra == rb + 1 and a.shape[-1].value in (1, None):
            a = array_ops.squeeze(a, [-1])
        elif rb == ra + 1 and b.shape[-1].value in (1, None):
            b = array_ops.squeeze(b, [-1])
    return a, b


def _weights_like(weights, values):
    w = _f32(weights)
    return math_ops.multiply(w, array_ops.ones_like(values))


def _across_replicas(value_fn, *variables):
    """`value_fn(*variables)`; in a tf.distribute replica, computed once in the
    cross-replica context (through merge_call), where the metric variables read as the
    sum of every replica's copy (TF's `_aggregate_across_replicas`).  Every metric's
    value is made here (or from values made here), so under a strategy it is one tensor
    for all the replicas, as TF's."""
    replica = distribute_context.get_replica_context()
    if replica is None or not distribute_context.has_strategy():
        return value_fn(*variables)
    return replica.merge_call(lambda strategy, *v: value_fn(*v), args=variables)


def _finish(value, update, metrics_collections, updates_collections):
    _collect(value, metrics_collections)
    _collect(update, updates_collections)
    return value, update


# -- means ---------------------------------------------------------------------------------


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen: (mean, update_op).

    Raises:
      ValueError: weights not broadcastable to values (at build time when shapes are known).
    """
    with vs.variable_scope(name, "mean", (values, weights)):
        values = _f32(values)
        total = metric_variable([], _F32, name="total")
        count = metric_variable([], _F32, name="count")
        if weights is None:
            num = _f32(array_ops.size(values))
        else:
            values, weights = _squeeze_like(values, _f32(weights))
            weights = _weights_like(weights, values)
            values = math_ops.multiply(values, weights)
            num = reduction_ops.reduce_sum(weights)
        update_total = state_ops.assign_add(total, reduction_ops.reduce_sum(values))
        # The count waits for the values (as TF's): a step whose input fails (the end of
        # an evaluation's data) must not count values it never produced.
        with ops.control_dependencies([values]):
            update_count = state_ops.assign_add(count, num)
        value = _across_replicas(
            lambda t, c: _safe_div(t, math_ops.maximum(c, 0.0), name="value"), total, count
        )
        update = _safe_div(update_total, math_ops.maximum(update_count, 0.0), name="update_op")
        return _finish(value, update, metrics_collections, updates_collections)


def mean_tensor(
    values, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """The element-wise (weighted) mean of the value tensors seen."""
    with vs.variable_scope(name, "mean", (values, weights)):
        values = _f32(values)
        shape = values.shape
        total = metric_variable(shape, _F32, name="total_tensor")
        count = metric_variable(shape, _F32, name="count_tensor")
        num = array_ops.ones_like(values)
        if weights is not None:
            values, weights = _squeeze_like(values, _f32(weights))
            weights = _weights_like(weights, values)
            values = math_ops.multiply(values, weights)
            num = math_ops.multiply(num, weights)
        update_total = state_ops.assign_add(total, values)
        update_count = state_ops.assign_add(count, num)
        value = _across_replicas(lambda t, c: _safe_div(t, c, name="value"), total, count)
        update = _safe_div(update_total, update_count, name="update_op")
        return _finish(value, update, metrics_collections, updates_collections)


def accuracy(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """How often `predictions` equals `labels`: (accuracy, update_op)."""
    predictions, labels = _squeeze_like(
        ops.convert_to_tensor(predictions), ops.convert_to_tensor(labels)
    )
    if labels.dtype != predictions.dtype:
        predictions = cast_ops.cast(predictions, labels.dtype)
    correct = _f32(math_ops.equal(predictions, labels))
    return mean(correct, weights, metrics_collections, updates_collections, name or "accuracy")


def mean_absolute_error(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    predictions, labels = _squeeze_like(_f32(predictions), _f32(labels))
    err = math_ops.abs(math_ops.subtract(predictions, labels))
    return mean(
        err, weights, metrics_collections, updates_collections, name or "mean_absolute_error"
    )


def mean_squared_error(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    predictions, labels = _squeeze_like(_f32(predictions), _f32(labels))
    err = math_ops.squared_difference(predictions, labels)
    return mean(
        err, weights, metrics_collections, updates_collections, name or "mean_squared_error"
    )


def root_mean_squared_error(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    mse, update = mean_squared_error(
        labels, predictions, weights, None, None, name or "root_mean_squared_error"
    )
    value, update = _across_replicas(math_ops.sqrt, mse), math_ops.sqrt(update)
    return _finish(value, update, metrics_collections, updates_collections)


def mean_relative_error(
    labels,
    predictions,
    normalizer,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Mean of |predictions - labels| / normalizer (0 where the normalizer is 0)."""
    predictions, labels = _squeeze_like(_f32(predictions), _f32(labels))
    normalizer = _f32(normalizer)
    rel = _safe_div(math_ops.abs(labels - predictions), normalizer)
    return mean(
        rel, weights, metrics_collections, updates_collections, name or "mean_relative_error"
    )


def mean_cosine_distance(
    labels,
    predictions,
    dim,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Mean of 1 - sum(labels * predictions, dim) (inputs assumed unit-normalised)."""
    predictions, labels = _squeeze_like(_f32(predictions), _f32(labels))
    prod = reduction_ops.reduce_sum(math_ops.multiply(predictions, labels), dim, keepdims=True)
    mean_d, update = mean(prod, weights, None, None, name or "mean_cosine_distance")
    # (math_ops.subtract, as TF's: the results are Sub and Sub_1, not sub)
    value, update = math_ops.subtract(1.0, mean_d), math_ops.subtract(1.0, update)
    return _finish(value, update, metrics_collections, updates_collections)


def percentage_below(
    values, threshold, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    below = _f32(math_ops.less(values, threshold))
    return mean(
        below,
        weights,
        metrics_collections,
        updates_collections,
        name or "percentage_below_threshold",
    )


# -- counts of a condition -------------------------------------------------------------------


def _bools(labels, predictions):
    predictions, labels = _squeeze_like(
        ops.convert_to_tensor(predictions), ops.convert_to_tensor(labels)
    )
    return cast_ops.cast(labels, dtypes.bool), cast_ops.cast(predictions, dtypes.bool)


def _count(condition, weights, metrics_collections, updates_collections, name, default):
    with vs.variable_scope(name, default, (condition, weights)):
        count = metric_variable([], _F32, name="count")
        cond = _f32(condition)
        if weights is not None:
            cond = math_ops.multiply(cond, _weights_like(weights, cond))
        update = state_ops.assign_add(count, reduction_ops.reduce_sum(cond))
        value = _across_replicas(array_ops.identity, count)
        return _finish(value, update, metrics_collections, updates_collections)


def _condition(kind, labels, predictions):
    lab, pred = _bools(labels, predictions)
    want_l, want_p = {
        "tp": (True, True),
        "fp": (False, True),
        "tn": (False, False),
        "fn": (True, False),
    }[kind]
    lab = lab if want_l else math_ops.logical_not(lab)
    pred = pred if want_p else math_ops.logical_not(pred)
    return math_ops.logical_and(lab, pred)


def true_positives(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _count(
        _condition("tp", labels, predictions),
        weights,
        metrics_collections,
        updates_collections,
        name,
        "true_positives",
    )


def false_positives(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _count(
        _condition("fp", labels, predictions),
        weights,
        metrics_collections,
        updates_collections,
        name,
        "false_positives",
    )


def true_negatives(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _count(
        _condition("tn", labels, predictions),
        weights,
        metrics_collections,
        updates_collections,
        name,
        "true_negatives",
    )


def false_negatives(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _count(
        _condition("fn", labels, predictions),
        weights,
        metrics_collections,
        updates_collections,
        name,
        "false_negatives",
    )


def _ratio(a, b, name):
    """a / (a + b), 0 when a + b is 0 (TF's precision and recall)."""
    s = a + b
    safe = slicing_ops.where(math_ops.greater(s, 0.0), s, array_ops.ones_like(s))
    return slicing_ops.where(
        math_ops.greater(s, 0.0), math_ops.truediv(a, safe), array_ops.zeros_like(s), name=name
    )


def precision(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """tp / (tp + fp) over everything seen."""
    with vs.variable_scope(name, "precision", (predictions, labels, weights)):
        tp, tp_up = true_positives(labels, predictions, weights)
        fp, fp_up = false_positives(labels, predictions, weights)
        value = _across_replicas(lambda a, b: _ratio(a, b, "value"), tp, fp)
        update = _ratio(tp_up, fp_up, "update_op")
        return _finish(value, update, metrics_collections, updates_collections)


def recall(
    labels,
    predictions,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """tp / (tp + fn) over everything seen."""
    with vs.variable_scope(name, "recall", (predictions, labels, weights)):
        tp, tp_up = true_positives(labels, predictions, weights)
        fn, fn_up = false_negatives(labels, predictions, weights)
        value = _across_replicas(lambda a, b: _ratio(a, b, "value"), tp, fn)
        update = _ratio(tp_up, fn_up, "update_op")
        return _finish(value, update, metrics_collections, updates_collections)


# -- at thresholds --------------------------------------------------------------------------


def _confusion_at_thresholds(labels, predictions, thresholds, weights, includes):
    """Variables and update ops {kind: (var [T], update)} of predictions > threshold."""
    predictions, labels = _squeeze_like(_f32(predictions), ops.convert_to_tensor(labels))
    labels = cast_ops.cast(labels, dtypes.bool)
    n = len(thresholds)
    pred = array_ops.reshape(predictions, [-1, 1])
    lab = array_ops.reshape(labels, [-1, 1])
    above = math_ops.greater(pred, array_ops.constant(np.asarray(thresholds, np.float32)))
    below = math_ops.logical_not(above)
    not_lab = math_ops.logical_not(lab)
    w = None
    if weights is not None:
        w = array_ops.reshape(_weights_like(weights, predictions), [-1, 1])
    conds = {
        "tp": math_ops.logical_and(lab, above),
        "fn": math_ops.logical_and(lab, below),
        "tn": math_ops.logical_and(not_lab, below),
        "fp": math_ops.logical_and(not_lab, above),
    }
    names = {
        "tp": "true_positives",
        "fn": "false_negatives",
        "tn": "true_negatives",
        "fp": "false_positives",
    }
    out = {}
    for k in includes:
        var = metric_variable([n], _F32, name=names[k])
        c = _f32(conds[k])
        if w is not None:
            c = math_ops.multiply(c, w)
        out[k] = (var, state_ops.assign_add(var, reduction_ops.reduce_sum(c, 0)))
    return out


def _at_thresholds(
    kind,
    labels,
    predictions,
    thresholds,
    weights,
    metrics_collections,
    updates_collections,
    name,
    default,
):
    with vs.variable_scope(name, default, (predictions, labels, weights)):
        ((var, update),) = _confusion_at_thresholds(
            labels, predictions, thresholds, weights, (kind,)
        ).values()
        value = _across_replicas(array_ops.identity, var)
        return _finish(value, update, metrics_collections, updates_collections)


def true_positives_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _at_thresholds(
        "tp",
        labels,
        predictions,
        thresholds,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "true_positives",
    )


def false_positives_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _at_thresholds(
        "fp",
        labels,
        predictions,
        thresholds,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "false_positives",
    )


def true_negatives_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _at_thresholds(
        "tn",
        labels,
        predictions,
        thresholds,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "true_negatives",
    )


def false_negatives_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    return _at_thresholds(
        "fn",
        labels,
        predictions,
        thresholds,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "false_negatives",
    )


_EPS = 1e-7


def precision_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    with vs.variable_scope(name, "precision_at_thresholds", (predictions, labels, weights)):
        v = _confusion_at_thresholds(labels, predictions, thresholds, weights, ("tp", "fp"))
        value = _across_replicas(
            lambda tp, fp: math_ops.truediv(tp, _EPS + tp + fp, name="precision_value"),
            v["tp"][0],
            v["fp"][0],
        )
        update = math_ops.truediv(
            v["tp"][1], _EPS + v["tp"][1] + v["fp"][1], name="precision_update_op"
        )
        return _finish(value, update, metrics_collections, updates_collections)


def recall_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    with vs.variable_scope(name, "recall_at_thresholds", (predictions, labels, weights)):
        v = _confusion_at_thresholds(labels, predictions, thresholds, weights, ("tp", "fn"))
        value = _across_replicas(
            lambda tp, fn: math_ops.truediv(tp, _EPS + tp + fn, name="recall_value"),
            v["tp"][0],
            v["fn"][0],
        )
        update = math_ops.truediv(
            v["tp"][1], _EPS + v["tp"][1] + v["fn"][1], name="recall_update_op"
        )
        return _finish(value, update, metrics_collections, updates_collections)


def _auc_thresholds(num_thresholds):
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - _EPS, *inner, 1.0 + _EPS]


# The rates' epsilon in `auc` (TF's: 1e-6 there, where the thresholds' is 1e-7).
_AUC_EPS = 1e-6


def _interpolated_pr_auc(tp, fp, fn, n, name):
    """The PR curve's area with precision interpolated between thresholds (Davis &
    Goadrich 2006, TF's closed form): within each interval TP and the predicted
    positives P = TP + FP move linearly, so precision is TP_A + slope (P - P_A) over P,
    whose integral over P is slope * (dTP + intercept * log(P_A / P_B)); divided by
    the positives, summed.  Intervals with no positives predicted at either end take
    a ratio of 1 (no log term)."""
    dtp = tp[: n - 1] - tp[1:]
    p = tp + fp
    slope = math_composites.div_no_nan(dtp, math_ops.maximum(p[: n - 1] - p[1:], 0.0))
    intercept = tp[1:] - slope * p[1:]
    both = math_ops.logical_and(math_ops.greater(p[: n - 1], 0.0), math_ops.greater(p[1:], 0.0))
    ratio = slicing_ops.where(
        both,
        math_composites.div_no_nan(p[: n - 1], math_ops.maximum(p[1:], 0.0)),
        array_ops.ones_like(p[1:]),
    )
    area = math_composites.div_no_nan(
        slope * (dtp + intercept * math_ops.log(ratio)), math_ops.maximum(tp[1:] + fn[1:], 0.0)
    )
    return reduction_ops.reduce_sum(area, name=name)


def _compute_auc(tp, fn, tn, fp, n, curve, summation_method, name):
    if curve == "PR" and summation_method == "careful_interpolation":
        # As TF: value and update are both "interpolate_pr_auc" (the second one _1)
        return _interpolated_pr_auc(tp, fp, fn, n, "interpolate_pr_auc")
    rec = math_ops.truediv(tp + _AUC_EPS, tp + fn + _AUC_EPS)
    if curve == "ROC":
        x = math_ops.truediv(fp, fp + tn + _AUC_EPS)
        y = rec
    else:
        x = rec
        y = math_ops.truediv(tp + _AUC_EPS, tp + fp + _AUC_EPS)
    dx = x[: n - 1] - x[1:]
    if summation_method in ("trapezoidal", "careful_interpolation"):
        heights = (y[: n - 1] + y[1:]) / 2.0
    elif summation_method == "minoring":
        heights = math_ops.minimum(y[: n - 1], y[1:])
    elif summation_method == "majoring":
        heights = math_ops.maximum(y[: n - 1], y[1:])
    else:
        raise ValueError(f"Invalid summation_method: {summation_method}")
    return reduction_ops.reduce_sum(math_ops.multiply(dx, heights), name=name)


def auc(
    labels,
    predictions,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    curve="ROC",
    name=None,
    summation_method="trapezoidal",
    thresholds=None,
):
    """Area under the ROC (or PR) curve by a Riemann sum over `num_thresholds`
    thresholds spread over [0, 1] (predictions are probabilities).

    Raises:
      ValueError: an unknown curve or summation_method.
    """
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    with vs.variable_scope(name, "auc", (labels, predictions, weights)):
        th = (
            _auc_thresholds(num_thresholds)
            if thresholds is None
            else [0.0 - _EPS, *sorted(thresholds), 1.0 + _EPS]
        )
        n = len(th)
        v = _confusion_at_thresholds(labels, predictions, th, weights, ("tp", "fn", "tn", "fp"))
        value = _across_replicas(
            lambda tp, fn, tn, fp: _compute_auc(
                tp, fn, tn, fp, n, curve, summation_method, "value"
            ),
            *(v[k][0] for k in ("tp", "fn", "tn", "fp")),
        )
        update = _compute_auc(
            v["tp"][1], v["fn"][1], v["tn"][1], v["fp"][1], n, curve, summation_method, "update_op"
        )
        return _finish(value, update, metrics_collections, updates_collections)


def _at_rate(
    kind,
    labels,
    predictions,
    target,
    weights,
    num_thresholds,
    metrics_collections,
    updates_collections,
    name,
    default,
):
    if not 0 <= target <= 1:
        raise ValueError(
            f"`{'specificity' if kind == 'sens' else 'sensitivity'}` must be in the range [0, 1]."
        )
    with vs.variable_scope(name, default, (predictions, labels, weights)):
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        th = [0.0 - _EPS, *inner, 1.0 + _EPS]
        v = _confusion_at_thresholds(labels, predictions, th, weights, ("tp", "fn", "tn", "fp"))

        def compute(tp, fn, tn, fp, nm):
            spec = math_ops.truediv(tn, tn + fp + _EPS)
            sens = math_ops.truediv(tp, tp + fn + _EPS)
            have, want = (spec, sens) if kind == "sens" else (sens, spec)
            # The threshold whose rate is closest to the target: the first on ties for
            # sensitivity_at_specificity, the last for specificity_at_sensitivity (TF's
            # argmin and its cumsum-argmax trick).
            dist = math_ops.abs(have - target)
            if kind == "sens":
                idx = reduction_ops.argmin(dist, 0)
            else:
                hits = _f32(math_ops.equal(dist, reduction_ops.reduce_min(dist)))
                rev = reduction_ops.argmax(slicing_ops.reverse(hits, [0]), 0)
                idx = (len(th) - 1) - rev
            return array_ops.identity(slicing_ops.gather(want, idx), name=nm)

        value = _across_replicas(
            lambda *parts: compute(*parts, "value"), *(v[k][0] for k in ("tp", "fn", "tn", "fp"))
        )
        update = compute(v["tp"][1], v["fn"][1], v["tn"][1], v["fp"][1], "update_op")
        return _finish(value, update, metrics_collections, updates_collections)


def sensitivity_at_specificity(
    labels,
    predictions,
    specificity,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The sensitivity at the threshold whose specificity is closest to `specificity`."""
    return _at_rate(
        "sens",
        labels,
        predictions,
        specificity,
        weights,
        num_thresholds,
        metrics_collections,
        updates_collections,
        name,
        "sensitivity_at_specificity",
    )


def specificity_at_sensitivity(
    labels,
    predictions,
    sensitivity,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The specificity at the threshold whose sensitivity is closest to `sensitivity`."""
    return _at_rate(
        "spec",
        labels,
        predictions,
        sensitivity,
        weights,
        num_thresholds,
        metrics_collections,
        updates_collections,
        name,
        "specificity_at_sensitivity",
    )


# -- confusion-matrix metrics ----------------------------------------------------------------


def _checked(x, assertion, message, *bound):
    return control_flow_ordering.with_dependencies([assertion(x, *bound, message=message)], x)


def confusion_matrix(
    labels, predictions, num_classes=None, dtype=dtypes.int32, name=None, weights=None
):
    """`tf.math.confusion_matrix`: cm[i, j] counts (or weighs) label i predicted as j.

    Raises:
      InvalidArgumentError: a negative label or prediction, or one at or above
        `num_classes` (at build time for constants, else when run).
    """
    with ops.name_scope(name, "confusion_matrix", (predictions, labels, num_classes, weights)):
        predictions, labels = _squeeze_like(
            ops.convert_to_tensor(predictions), ops.convert_to_tensor(labels)
        )
        # (Any remaining shape is flattened: each (label, prediction) pair counts once.)
        labels = array_ops.reshape(cast_ops.cast(labels, dtypes.int64), [-1])
        predictions = array_ops.reshape(cast_ops.cast(predictions, dtypes.int64), [-1])
        # TF's checks, in TF's order (constants fail here, at build time).
        labels = _checked(
            labels, check_ops.assert_non_negative, "`labels` contains negative values"
        )
        predictions = _checked(
            predictions, check_ops.assert_non_negative, "`predictions` contains negative values"
        )
        if num_classes is not None:
            num_classes = cast_ops.cast(ops.convert_to_tensor(num_classes), dtypes.int64)
            labels = _checked(labels, check_ops.assert_less, "`labels` out of bound", num_classes)
            predictions = _checked(
                predictions, check_ops.assert_less, "`predictions` out of bound", num_classes
            )
        if num_classes is None:
            num_classes = (
                math_ops.maximum(
                    reduction_ops.reduce_max(labels), reduction_ops.reduce_max(predictions)
                )
                + 1
            )
        depth = cast_ops.cast(num_classes, dtypes.int32)
        lab = slicing_ops.one_hot(labels, depth, dtype=dtypes.float64)
        pred = slicing_ops.one_hot(predictions, depth, dtype=dtypes.float64)
        if weights is not None:
            w = array_ops.reshape(cast_ops.cast(weights, dtypes.float64), [-1])
            lab = math_ops.multiply(lab, array_ops.expand_dims(w, -1))
        cm = matmul_ops.matmul(lab, pred, transpose_a=True)
        return cast_ops.cast(cm, dtype)


def mean_iou(
    labels,
    predictions,
    num_classes,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Mean over classes of intersection / union, from a running confusion matrix (the
    update op returns that matrix, as TF's)."""
    with vs.variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions = array_ops.reshape(ops.convert_to_tensor(predictions), [-1])
        labels = array_ops.reshape(ops.convert_to_tensor(labels), [-1])
        if weights is not None:
            weights = array_ops.reshape(_f32(weights), [-1])
        total_cm = metric_variable(
            [num_classes, num_classes], dtypes.float64, name="total_confusion_matrix"
        )
        cm = confusion_matrix(labels, predictions, num_classes, dtypes.float64, weights=weights)
        update = state_ops.assign_add(total_cm, cm)

        def compute(m):
            rows = _f32(reduction_ops.reduce_sum(m, 0))
            cols = _f32(reduction_ops.reduce_sum(m, 1))
            diag = _f32(reduction_ops.reduce_sum(m * np.eye(num_classes), 1))
            den = rows + cols - diag
            valid = reduction_ops.reduce_sum(_f32(math_ops.not_equal(den, 0.0)))
            den = slicing_ops.where(math_ops.greater(den, 0.0), den, array_ops.ones_like(den))
            iou = math_ops.truediv(diag, den)
            return slicing_ops.where(
                math_ops.greater(valid, 0.0),
                math_ops.truediv(reduction_ops.reduce_sum(iou), valid),
                0.0,
            )  # (unnamed, as TF's: mean_iou/Select_1)

        value = _across_replicas(compute, total_cm)
        # TF's update op is the updated confusion matrix, not the IoU.
        return _finish(value, update, metrics_collections, updates_collections)


def mean_per_class_accuracy(
    labels,
    predictions,
    num_classes,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Mean over classes of each class's accuracy; the update op returns the per-class
    accuracies, as TF's."""
    with vs.variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = array_ops.reshape(ops.convert_to_tensor(labels), [-1])
        predictions = array_ops.reshape(ops.convert_to_tensor(predictions), [-1])
        if predictions.dtype != labels.dtype:
            predictions = cast_ops.cast(predictions, labels.dtype)
        total = metric_variable([num_classes], _F32, name="total")
        count = metric_variable([num_classes], _F32, name="count")
        ones = _f32(array_ops.ones_like(labels))
        correct = _f32(math_ops.equal(predictions, labels))
        if weights is not None:
            w = array_ops.reshape(_f32(weights), [-1])
            ones, correct = ones * w, correct * w
        onehot = slicing_ops.one_hot(labels, num_classes, dtype=_F32)
        per_class = lambda v: reduction_ops.reduce_sum(  # noqa: E731
            onehot * array_ops.expand_dims(v, -1), 0
        )
        update_total = state_ops.assign_add(total, per_class(ones))
        update_count = state_ops.assign_add(count, per_class(correct))
        value = _across_replicas(
            lambda c, t: reduction_ops.reduce_mean(_safe_div(c, t), name="mean_accuracy"),
            count,
            total,
        )
        update = _safe_div(update_count, update_total, name="update_op")
        return _finish(value, update, metrics_collections, updates_collections)
