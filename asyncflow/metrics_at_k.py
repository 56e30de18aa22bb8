"""TF1's top-k metrics, built as TF 2.21's metrics_impl builds them: precision_at_k,
recall_at_k, precision_at_top_k, recall_at_top_k, average_precision_at_k (and the
deprecated sparse_* names).  Each row's top-k ids are compared with its labels through
TF's set ops (SetSize of a set intersection or difference), optionally restricted to
one `class_id`; counts accumulate in float64 metric variables, as TF's.  Average
precision keeps the precision at each k where the k-th id is relevant, divided by
min(k, number of labels).

Labels are int64 class ids: [D1, ..., DN] or [D1, ..., DN, num_labels] (a negative id
pads a row for average precision), or a SparseTensor of them.  asyncflow.metrics
re-exports these and `metric_variable` (which lives here, below them).
"""

from __future__ import annotations

from asyncflow import dtypes, math_composites, sets
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    control_flow_cond,
    gradient_ops,
    manip_ops,
    math_ops,
    nn_impl,
    reduction_ops,
    slicing_ops,
    sparse_ops,
    state_ops,
)
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue
from asyncflow.variables import Variable, VariableAggregation, VariableSynchronization

__all__ = [
    "average_precision_at_k",
    "metric_variable",
    "precision_at_k",
    "precision_at_top_k",
    "recall_at_k",
    "recall_at_top_k",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
]

_F64 = dtypes.float64


def metric_variable(shape, dtype, validate_shape=True, name=None) -> Variable:
    """A zero-initialised local variable in LOCAL_VARIABLES and METRIC_VARIABLES."""
    dtype = dtypes.as_dtype(dtype)
    return Variable(
        lambda: array_ops.zeros(shape, dtype),
        trainable=False,
        collections=[ops.GraphKeys.LOCAL_VARIABLES, ops.GraphKeys.METRIC_VARIABLES],
        validate_shape=validate_shape,
        name=name,
        dtype=dtype,
        # As TF's: under a tf.distribute strategy, one copy per replica, summed on read.
        synchronization=VariableSynchronization.ON_READ,
        aggregation=VariableAggregation.SUM,
    )


def _collect(tensor, collections):
    if collections:
        ops.add_to_collections(collections, tensor)


def _at_k_name(name, k=None, class_id=None):
    name = f"{name}_at_{k}" if k is not None else f"{name}_at_k"
    return f"{name}_class{class_id}" if class_id is not None else name


def _as_labels(labels):
    if isinstance(labels, SparseTensorValue):
        return SparseTensor.from_value(labels)
    return labels if isinstance(labels, SparseTensor) else ops.convert_to_tensor(labels)


def _maybe_expand_labels(labels, predictions):
    """Labels with the rank of the top-k ids (TF's: a trailing dimension added to
    [D1, ..., DN] class ids)."""
    with ops.name_scope(None, "expand_labels", (labels, predictions)) as scope:
        labels = _as_labels(labels)
        if isinstance(labels, SparseTensor):
            rank = predictions.shape.ndims
            n = labels.dense_shape.shape.dims[0] if labels.dense_shape.shape.ndims else None
            if rank is None or n is None:
                raise ValueError("sparse labels need a static rank in asyncflow")
            if rank != n + 1:
                return labels
            shape = manip_ops.concat((labels.dense_shape, [1]), 0)
            return sparse_ops.sparse_reshape(labels, shape, name=scope)
        lr, pr = labels.shape.ndims, predictions.shape.ndims
        if lr is None or pr is None:
            raise ValueError("labels and predictions need a static rank in asyncflow")
        if pr == lr:
            return labels
        if pr == lr + 1:
            return array_ops.expand_dims(labels, -1, name=scope)
        raise ValueError(
            f"Unexpected labels shape {labels.shape} for predictions shape {predictions.shape}. "
            "Predictions rank should be the same rank as labels rank or labels rank plus one ."
        )


def _expand_and_tile(tensor, multiple, name):
    """`tensor` with a new second-to-last dimension, `multiple` copies along it."""
    with ops.name_scope(name, "expand_and_tile", (tensor,)) as scope:
        if isinstance(tensor, SparseTensor):
            shape = tensor.dense_shape
            expanded_shape = manip_ops.concat(
                (shape[:-1], ops.convert_to_tensor([1], dtypes.int64), shape[-1:]), 0,
                name="expanded_shape",
            )  # fmt: skip
            expanded = sparse_ops.sparse_reshape(tensor, expanded_shape, name="expand")
            if multiple == 1:
                return expanded
            return sparse_ops.sparse_concat(-2, [expanded] * multiple, name=scope)
        expanded = array_ops.expand_dims(tensor, -2, name="expand")
        if multiple == 1:
            return expanded
        ones = array_ops.ones_like(array_ops.shape(tensor))
        multiples = manip_ops.concat((ones[:-1], [multiple], ones[-1:]), 0, name="multiples")
        return manip_ops.tile(expanded, multiples, name=scope)


def _num_relevant(labels, k):
    with ops.name_scope(None, "num_relevant", (labels,)) as scope:
        if isinstance(labels, SparseTensor):
            return math_ops.minimum(sets.set_size(labels), k, name=scope)
        present = slicing_ops.where(
            math_ops.greater_equal(labels, 0), array_ops.ones_like(labels),
            array_ops.zeros_like(labels),
        )  # fmt: skip
        return math_ops.minimum(reduction_ops.reduce_sum(present, axis=-1), k, name=scope)


def _average_precision_per_row(labels, predictions_idx):
    with ops.name_scope(None, "average_precision", (predictions_idx, labels)) as scope:
        predictions_idx = cast_ops.cast(predictions_idx, dtypes.int64, name="predictions_idx")
        if predictions_idx.shape.ndims == 0:
            raise ValueError("The rank of `predictions_idx` must be at least 1.")
        k = predictions_idx.shape.as_list()[-1]
        if k is None:
            raise ValueError(
                "The last dimension of predictions_idx must be set. Currently, it is None."
            )
        labels = _maybe_expand_labels(labels, predictions_idx)
        idx_per_k = array_ops.expand_dims(predictions_idx, -1, name="predictions_idx_per_k")
        labels_per_k = _expand_and_tile(labels, k, name="labels_per_k")
        with ops.name_scope(None, "relevant_per_k"):
            relevant = sets.set_size(sets.set_intersection(idx_per_k, labels_per_k))
            relevant = cast_ops.cast(relevant, _F64)
        tp = gradient_ops.cumsum(relevant, -1, name="tp_per_k")
        retrieved = gradient_ops.cumsum(array_ops.ones_like(relevant), -1, name="retrieved_per_k")
        precision = math_ops.truediv(tp, retrieved, name="precision_per_k")
        relevant_precision = math_ops.multiply(
            precision, relevant, name="relevant_precision_per_k"
        )
        total = reduction_ops.reduce_sum(relevant_precision, axis=(-1,), name="precision_sum")
        num = cast_ops.cast(_num_relevant(labels, k), _F64)
        return math_ops.truediv(total, num, name=scope)


def _clean_out_of_range(labels, predictions):
    """Labels with every class id >= the predictions' class count made -1 (never
    relevant), as TF's average_precision_at_k: a tf.cond on the largest id."""
    labels = _as_labels(labels)
    values = labels.values if isinstance(labels, SparseTensor) else labels
    num_classes = cast_ops.cast(array_ops.shape(predictions)[-1], values.dtype)

    def clean():
        ids = ops.convert_to_tensor(values)
        minus_one = -1 * array_ops.ones_like(ids)
        return math_composites.where_v2(math_ops.greater_equal(ids, num_classes), minus_one, ids)

    largest = reduction_ops.reduce_max(values)
    values = control_flow_cond.cond(
        math_ops.greater_equal(largest, num_classes), clean, lambda: values
    )
    if isinstance(labels, SparseTensor):
        return SparseTensor(labels.indices, values, labels.dense_shape)
    return values


def average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):  # fmt: skip
    """Mean average precision at k of `predictions` [D1, ..., DN, num_classes] scores
    against `labels` (TF1's `tf.metrics.average_precision_at_k`): (value, update_op),
    float64.

    Raises:
      ValueError: k < 1, or labels whose rank is neither the predictions' nor one less.
    """
    if k < 1:
        raise ValueError(f"Invalid k={k}. `k` should be >= 1.")
    at_k = f"average_precision_at_{k}"
    with ops.name_scope(name, at_k, (predictions, labels, weights)) as outer:
        _, idx = nn_impl.top_k(predictions, k)
        labels = _clean_out_of_range(labels, predictions)
        # As TF: the streaming part re-enters this scope (its value is ".../mean", its
        # update the scope's name), and the variables take their scopes' full names.
        with ops.name_scope(outer) as scope:
            ap = _average_precision_per_row(labels, idx)
            if weights is not None:
                weights = cast_ops.cast(weights, _F64) * array_ops.ones_like(ap)
                ap = math_ops.multiply(ap, weights)
            with ops.name_scope(None, "max", (ap,)) as max_scope:
                max_var = metric_variable([], _F64, name=max_scope)
                if weights is None:
                    batch = cast_ops.cast(array_ops.size(ap, name="batch_max"), _F64)
                else:
                    batch = reduction_ops.reduce_sum(weights, name="batch_max")
                max_update = state_ops.assign_add(max_var, batch, name="update")
            with ops.name_scope(None, "total", (ap,)) as total_scope:
                total_var = metric_variable([], _F64, name=total_scope)
                batch = reduction_ops.reduce_sum(ap, name="batch_total")
                total_update = state_ops.assign_add(total_var, batch, name="update")
            value = ops.apply_op("DivNoNan", [total_var, max_var], name="mean").outputs[0]
            update = ops.apply_op(
                "DivNoNan", [total_update, max_update], name=scope[:-1] + "/"
            ).outputs[0]
            _collect(value, metrics_collections)
            _collect(update, updates_collections)
            return value, update


sparse_average_precision_at_k = average_precision_at_k


# -- precision and recall at k ----------------------------------------------------------


def _select_class_id(ids, selected_id):
    """The ids equal to `selected_id` (a SparseTensor of ids' shape), as TF's."""
    ids = _as_labels(ids)
    if isinstance(ids, SparseTensor):
        keep = math_ops.equal(ids.values, ops.convert_to_tensor(selected_id, ids.values.dtype))
        where = array_ops.reshape(slicing_ops.where(keep), [-1])
        return SparseTensor(
            slicing_ops.gather(ids.indices, where), slicing_ops.gather(ids.values, where),
            ids.dense_shape,
        )  # fmt: skip
    shape = array_ops.shape(ids, out_type=dtypes.int64)
    filled_shape = manip_ops.concat([shape[:-1], ops.convert_to_tensor([1], dtypes.int64)], 0)
    filled = ops.apply_op(
        "Fill", [filled_shape, cast_ops.cast(ops.convert_to_tensor(selected_id), ids.dtype)]
    ).outputs[0]
    result = sets.set_intersection(filled, ids)
    return SparseTensor(result.indices, result.values, shape)


def _maybe_select(labels, predictions_idx, class_id):
    if class_id is None:
        return labels, predictions_idx
    return _select_class_id(labels, class_id), _select_class_id(predictions_idx, class_id)


def _count_at_k(kind, labels, predictions_idx, class_id, weights):
    """Per row: |top-k & labels| (tp), |top-k - labels| (fp) or |labels - top-k| (fn)."""
    with ops.name_scope(None, f"{kind}s", (predictions_idx, labels, weights)):
        labels, predictions_idx = _maybe_select(labels, predictions_idx, class_id)
        if kind == "true_positive":
            result = sets.set_intersection(predictions_idx, labels)
        else:
            result = sets.set_difference(predictions_idx, labels, aminusb=kind == "false_positive")
        count = cast_ops.cast(sets.set_size(result), _F64)
        if weights is not None:
            count = math_ops.multiply(count, cast_ops.cast(weights, _F64))
        return count


def _streaming_count(kind, labels, predictions_idx, k, class_id, weights):
    name = _at_k_name(kind, k, class_id=class_id)
    with ops.name_scope(None, name, (predictions_idx, labels, weights)) as scope:
        count = _count_at_k(kind, labels, predictions_idx, class_id, weights)
        total = cast_ops.cast(reduction_ops.reduce_sum(count), _F64)
        # (the scope's full name, as TF's: the variable is precision_at_1/true_positive_at_1)
        var = metric_variable([], _F64, name=scope)
        return var, state_ops.assign_add(var, total, name="update")


def _ratio_at_top_k(kind, labels, predictions_idx, k, class_id, weights,
                    metrics_collections, updates_collections, name):  # fmt: skip
    other = "false_positive" if kind == "precision" else "false_negative"
    with ops.name_scope(name, _at_k_name(kind, k, class_id=class_id),
                        (predictions_idx, labels, weights)) as scope:  # fmt: skip
        predictions_idx = ops.convert_to_tensor(predictions_idx)
        labels = _maybe_expand_labels(labels, predictions_idx)
        idx = cast_ops.cast(predictions_idx, dtypes.int64)
        tp, tp_update = _streaming_count("true_positive", labels, idx, k, class_id, weights)
        ot, ot_update = _streaming_count(other, labels, idx, k, class_id, weights)
        value = math_ops.truediv(tp, tp + ot, name=scope[:-1] + "/")
        update = math_ops.truediv(tp_update, tp_update + ot_update, name="update")
        _collect(value, metrics_collections)
        _collect(update, updates_collections)
        return value, update


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                       metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Of the top-k predicted ids (`predictions_idx`), the fraction among the labels (only
    `class_id`'s when given): (value, update_op), float64, as TF1's."""
    return _ratio_at_top_k("precision", labels, predictions_idx, k, class_id, weights,
                           metrics_collections, updates_collections, name)  # fmt: skip


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                    metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """Of the labels, the fraction among the top-k predicted ids (only `class_id`'s
    when given): (value, update_op), float64, as TF1's."""
    return _ratio_at_top_k("recall", labels, predictions_idx, k, class_id, weights,
                           metrics_collections, updates_collections, name)  # fmt: skip


def precision_at_k(labels, predictions, k, class_id=None, weights=None,
                   metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """precision_at_top_k of the k highest-scoring classes of `predictions`."""
    with ops.name_scope(name, _at_k_name("precision", k, class_id=class_id),
                        (predictions, labels, weights)) as scope:  # fmt: skip
        _, idx = nn_impl.top_k(predictions, k)
        return precision_at_top_k(labels, idx, k, class_id, weights, metrics_collections,
                                  updates_collections, scope)  # fmt: skip


def recall_at_k(labels, predictions, k, class_id=None, weights=None,
                metrics_collections=None, updates_collections=None, name=None):  # fmt: skip
    """recall_at_top_k of the k highest-scoring classes of `predictions`."""
    with ops.name_scope(name, _at_k_name("recall", k, class_id=class_id),
                        (predictions, labels, weights)) as scope:  # fmt: skip
        _, idx = nn_impl.top_k(predictions, k)
        return recall_at_top_k(labels, idx, k, class_id, weights, metrics_collections,
                               updates_collections, scope)  # fmt: skip


sparse_precision_at_k = precision_at_k  # (TF1's deprecated name)
