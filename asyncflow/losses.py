"""`af.losses`: TF1's loss functions (`tf.compat.v1.losses`) and the loss collections.

Every loss computes per-element losses, multiplies them by `weights` (broadcast to the
losses' shape) and reduces them by `reduction`; TF1's default SUM_BY_NONZERO_WEIGHTS
divides the weighted sum by the number of elements whose weight is not zero (0 when
there are none).  Losses are computed in float32 (TF's `to_float`) and cast back to the
input dtype, and each is added to `loss_collection` (GraphKeys.LOSSES by default) so
that `get_total_loss()` finds it.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.graph import GraphKeys
from asyncflow.ops import (
    array_ops,
    check_ops,
    math_ops,
    nn_impl,
    nn_ops,
    reduction_ops,
    slicing_ops,
)

__all__ = [
    "Reduction",
    "compute_weighted_loss",
    "absolute_difference",
    "cosine_distance",
    "mean_pairwise_squared_error",
    "mean_squared_error",
    "log_loss",
    "hinge_loss",
    "huber_loss",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
    "add_loss",
    "get_losses",
    "get_regularization_losses",
    "get_regularization_loss",
    "get_total_loss",
]


class Reduction:
    """How a weighted loss is reduced (TF1's `tf.losses.Reduction`)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)  # fmt: skip

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _safe_div(numerator, denominator):
    """numerator / denominator, or 0 where denominator is 0 (TF's `_safe_mean`: a
    DivNoNan named "value"; a negative denominator, from negative weights, divides)."""
    return ops.apply_op("DivNoNan", [numerator, denominator], name="value").outputs[0]


def _num_elements(losses):
    return math_ops.cast(array_ops.size(losses), losses.dtype)


def _num_present(losses, weights):
    if isinstance(weights, float | int) and weights != 0:
        return _num_elements(losses)
    with ops.name_scope(None, "num_present", [losses, weights]) as scope:
        weights = math_ops.cast(weights, dtypes.float32)
        present = slicing_ops.where(math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                                    array_ops.ones_like(weights))  # fmt: skip
        present = present * array_ops.ones_like(losses)
        return reduction_ops.reduce_sum(present, name=scope[:-1] + "/")


def compute_weighted_loss(
    losses,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Weights and reduces `losses`; adds the result to `loss_collection`.

    Raises:
      ValueError: an unknown reduction, or weights that cannot broadcast to losses.
    """
    Reduction.validate(reduction)
    # As TF: under a strategy, an estimator's optimizer scales a loss that is not a SUM.
    ops.get_default_graph()._attached["last_loss_reduction"] = reduction
    with ops.name_scope(scope, "weighted_loss", [losses, weights]):
        losses = ops.convert_to_tensor(losses)
        input_dtype = losses.dtype
        losses = math_ops.cast(losses, dtypes.float32)
        weights = math_ops.cast(weights, dtypes.float32)  # a Python weight: TF's "Cast_1/x"
        weights = _check_weights(losses, weights)
        weighted = math_ops.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = reduction_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _safe_div(
                    loss, reduction_ops.reduce_sum(array_ops.ones_like(losses) * weights)
                )
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _safe_div(loss, _num_present(losses, weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _safe_div(loss, _num_elements(losses))
        loss = math_ops.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _check_weights(losses, weights):
    """TF's assert_broadcastable: weights are a scalar, or of the losses' rank with each
    dimension 1 or the losses' own (numpy's broadcasting of a lower rank is refused).
    Checked at build time where the shapes are known; otherwise `weights` come back
    behind an Assert op that checks them when run.

    Raises:
      ValueError: weights that do not broadcast so.
    """
    ws, ls = weights.shape, losses.shape
    if ws.ndims == 0:
        return weights
    prefix = "weights can not be broadcast to values."
    if ws.ndims is not None and ls.ndims is not None and ws.ndims != ls.ndims:
        raise ValueError(
            f"{prefix} values.rank={ls.ndims}. weights.rank={ws.ndims}. values.shape={ls}. "
            f"weights.shape={ws}."
        )
    if ws.is_fully_defined() and ls.is_fully_defined():
        for dim, (w, v) in enumerate(zip(ws.as_list(), ls.as_list())):
            if w not in (1, v):
                shapes = [" ".join(str(d) for d in s.as_list()) for s in (ls, ws)]
                raise ValueError(
                    f"{prefix} Mismatch at dim {dim}. values.shape=[{shapes[0]}], "
                    f"weights.shape=[{shapes[1]}]."
                )
        return weights
    with ops.name_scope(None, "assert_broadcastable", [weights, losses]) as scope:
        w_shape = array_ops.shape(weights, name="weights/shape")
        v_shape = array_ops.shape(losses, name="values/shape")
        w_rank, v_rank = array_ops.size(w_shape), array_ops.size(v_shape)
        is_scalar = math_ops.equal(0, w_rank, name="is_scalar")
        # Weights' dims padded with 1s (or cut) to the values' rank, so the comparison
        # needs no branch; a rank mismatch fails on its own term.
        padded = array_ops.concat([w_shape, array_ops.ones_like(v_shape)], 0)[:v_rank]
        dims_ok = reduction_ops.reduce_all(
            math_ops.logical_or(math_ops.equal(padded, 1), math_ops.equal(padded, v_shape))
        )
        valid = math_ops.logical_or(
            is_scalar, math_ops.logical_and(math_ops.equal(w_rank, v_rank), dims_ok)
        )
        data = [prefix, "weights.shape=", weights.name, w_shape, "values.shape=", losses.name,
                v_shape, "is_scalar=", is_scalar]  # fmt: skip
        check = check_ops.Assert(valid, data, name=scope)
    with ops.control_dependencies([check]):
        return array_ops.identity(weights)


def _prepare(labels, predictions, label_name="labels", pred_name="predictions"):
    if labels is None:
        raise ValueError(f"Argument `{label_name}` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{pred_name}` must not be None.")
    # cast converts Python values in its scope: TF's "mean_squared_error/Cast/x".
    predictions = math_ops.cast(predictions, dtypes.float32)
    labels = math_ops.cast(labels, dtypes.float32)
    predictions.shape.assert_is_compatible_with(labels.shape)
    return labels, predictions


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted |predictions - labels|.

    Raises:
      ValueError: labels or predictions None, or incompatible shapes.
    """
    with ops.name_scope(scope, "absolute_difference", [predictions, labels, weights]) as s:
        labels, predictions = _prepare(labels, predictions)
        losses = math_ops.abs(math_ops.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted (predictions - labels) ** 2.

    Raises:
      ValueError: labels or predictions None, or incompatible shapes.
    """
    with ops.name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as s:
        labels, predictions = _prepare(labels, predictions)
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted -y log(p + eps) - (1 - y) log(1 - p + eps).

    Raises:
      ValueError: labels or predictions None, or incompatible shapes.
    """
    with ops.name_scope(scope, "log_loss", [predictions, labels, weights]) as s:
        labels, predictions = _prepare(labels, predictions)
        losses = -math_ops.multiply(labels, math_ops.log(predictions + epsilon)) - \
            math_ops.multiply(1 - labels, math_ops.log(1 - predictions + epsilon))  # fmt: skip
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted max(0, 1 - (2 * labels - 1) * logits), labels in {0, 1}.

    Raises:
      ValueError: labels or logits None, or incompatible shapes.
    """
    with ops.name_scope(scope, "hinge_loss", [logits, labels, weights]) as s:
        labels, logits = _prepare(labels, logits, "labels", "logits")
        ones = array_ops.ones_like(labels)
        signed = math_ops.subtract(2 * labels, ones)
        losses = nn_ops.relu(math_ops.subtract(ones, math_ops.multiply(signed, logits)))
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted Huber loss: quadratic for |error| <= delta, linear beyond.

    Raises:
      ValueError: labels or predictions None, or incompatible shapes.
    """
    with ops.name_scope(scope, "huber_loss", [predictions, labels, weights]) as s:
        labels, predictions = _prepare(labels, predictions)
        abs_error = math_ops.abs(math_ops.subtract(predictions, labels))
        quadratic = math_ops.minimum(abs_error, delta)
        linear = math_ops.subtract(abs_error, quadratic)
        losses = math_ops.add(math_ops.multiply(0.5, math_ops.multiply(quadratic, quadratic)),
                              math_ops.multiply(delta, linear))  # fmt: skip
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted sigmoid cross-entropy; labels smoothed towards 1/2 by `label_smoothing`.

    Raises:
      ValueError: labels or logits None, or incompatible shapes.
    """
    if multi_class_labels is None:
        raise ValueError("Argument `multi_class_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with ops.name_scope(scope, "sigmoid_cross_entropy_loss",
                        [logits, multi_class_labels, weights]) as s:  # fmt: skip
        logits = ops.convert_to_tensor(logits)
        labels = math_ops.cast(ops.convert_to_tensor(multi_class_labels), logits.dtype)
        logits.shape.assert_is_compatible_with(labels.shape)
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = nn_impl.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                           name="xentropy")  # fmt: skip
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted softmax cross-entropy against one-hot (or soft) labels [batch, classes].

    No gradient flows into the labels.  `label_smoothing` mixes them with the uniform
    distribution: labels * (1 - s) + s / num_classes.

    Raises:
      ValueError: labels or logits None, or incompatible shapes.
    """
    if onehot_labels is None:
        raise ValueError("Argument `onehot_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with ops.name_scope(scope, "softmax_cross_entropy_loss",
                        [logits, onehot_labels, weights]) as s:  # fmt: skip
        logits = ops.convert_to_tensor(logits)
        labels = math_ops.cast(ops.convert_to_tensor(onehot_labels), logits.dtype)
        logits.shape.assert_is_compatible_with(labels.shape)
        if label_smoothing > 0:
            n = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / n
        labels = ops.apply_op("StopGradient", [labels], name="labels_stop_gradient").outputs[0]
        losses = nn_impl.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits,
                                                              name="xentropy")  # fmt: skip
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):  # fmt: skip
    """Weighted softmax cross-entropy against integer class ids (a trailing size-1
    dimension of labels is squeezed, as TF does).

    Raises:
      ValueError: labels or logits None, or labels' rank not logits' rank - 1.
      InvalidArgumentError: at run time, a label outside [0, num_classes).
    """
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with ops.name_scope(scope, "sparse_softmax_cross_entropy_loss",
                        [logits, labels, weights]) as s:  # fmt: skip
        labels = ops.convert_to_tensor(labels)
        logits = ops.convert_to_tensor(logits)
        lr, gr = labels.shape.ndims, logits.shape.ndims
        if lr is not None and gr is not None and lr == gr and labels.shape[-1].value == 1:
            labels = array_ops.squeeze(labels, [-1])
        weights = ops.convert_to_tensor(weights)
        wr = weights.shape.ndims
        if wr is not None and gr is not None and wr == gr and weights.shape[-1].value == 1:
            weights = array_ops.squeeze(weights, [-1])
        losses = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                                  name="xentropy")  # fmt: skip
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


# -- collections ---------------------------------------------------------------------------


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):  # fmt: skip
    """Weighted 1 - sum(labels * predictions, axis), for unit-normalized inputs (TF1's
    `tf.losses.cosine_distance`; `dim` is its deprecated name for `axis`).

    Raises:
      ValueError: axis not given, labels or predictions None, or incompatible shapes.
    """
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify argument `axis`.")
    with ops.name_scope(scope, "cosine_distance_loss", [predictions, labels, weights]) as s:
        labels, predictions = _prepare(labels, predictions)
        radial = math_ops.multiply(predictions, labels)
        losses = 1 - reduction_ops.reduce_sum(radial, axis=(axis,), keepdims=True)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=GraphKeys.LOSSES):  # fmt: skip
    """TF1's `tf.losses.mean_pairwise_squared_error`: per example, the mean over pairs of
    its elements of ((p_i - p_j) - (l_i - l_j))^2, weighted per example and summed.

    Raises:
      ValueError: labels or predictions None, incompatible shapes, or weights that do
        not broadcast to labels.
    """
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if predictions is None:
        raise ValueError("Argument `predictions` must not be None.")
    with ops.name_scope(scope, "mean_pairwise_squared_error", [predictions, labels, weights]):
        weights = math_ops.cast(ops.convert_to_tensor(weights), dtypes.float32)
        labels = math_ops.cast(ops.convert_to_tensor(labels), dtypes.float32)
        weights = _check_weights(labels, weights)
        predictions = math_ops.cast(ops.convert_to_tensor(predictions), dtypes.float32)
        predictions.shape.assert_is_compatible_with(labels.shape)
        diffs = math_ops.subtract(predictions, labels)
        axis = reduction_ops.range(1, array_ops.rank(diffs))
        sum_squares = reduction_ops.reduce_sum(math_ops.square(diffs), axis=axis, keepdims=True)
        with ops.name_scope(None, "num_present", [diffs, weights]) as ns:
            present = slicing_ops.where(
                math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                array_ops.ones_like(weights),
            )  # fmt: skip
            present = present * array_ops.ones_like(diffs)
            num = reduction_ops.reduce_sum(
                present, axis=reduction_ops.range(1, array_ops.rank(present)), keepdims=True,
                name=ns[:-1] + "/",
            )  # fmt: skip
        term1 = 2.0 * _safe_div(sum_squares, math_ops.maximum(num - 1, 0.0))
        sum_diff = reduction_ops.reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = 2.0 * _safe_div(
            math_ops.square(sum_diff), math_ops.maximum(math_ops.multiply(num, num - 1), 0.0)
        )
        loss = reduction_ops.reduce_sum(math_ops.multiply(term1 - term2, weights))
        mean_loss = slicing_ops.where(
            reduction_ops.reduce_sum(num) > 0, loss, array_ops.zeros_like(loss), name="value"
        )
        add_loss(mean_loss, loss_collection)
        return mean_loss


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    """Adds `loss` to `loss_collection` (nothing when the collection is None)."""
    if loss_collection:
        ops.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    """The losses in `loss_collection` whose names match `scope`."""
    return ops.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The regularization losses (GraphKeys.REGULARIZATION_LOSSES) matching `scope`."""
    return ops.get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses, or a constant 0.0 when there are none."""
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return array_ops.constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the collected losses (and regularization losses).

    Raises:
      ValueError: there are no losses to sum.
    """
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses += get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses found: add_n needs at least one Tensor.")
    return math_ops.add_n(losses, name=name)
