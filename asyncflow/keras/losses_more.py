"""More of `tf.keras.losses`' per-sample functions: categorical hinge, cosine
similarity, Huber and the binary and categorical focal crossentropies (`losses.py`
makes their Loss classes and names them).
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import math_composites
from asyncflow.keras import backend_config as backend
from asyncflow.ops import array_ops, cast_ops, math_ops, nn_impl, nn_ops, reduction_ops


def _pair(y_true, y_pred):
    y_pred = ops.convert_to_tensor(y_pred)
    return cast_ops.cast(y_true, y_pred.dtype), y_pred


__all__ = [
    "categorical_hinge",
    "cosine_similarity",
    "huber",
    "binary_focal_crossentropy",
    "categorical_focal_crossentropy",
]


def categorical_hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    pos = reduction_ops.reduce_sum(y_true * y_pred, axis=-1)
    neg = reduction_ops.reduce_max((1.0 - y_true) * y_pred, axis=-1)
    return math_ops.maximum(neg - pos + 1.0, 0.0)


def cosine_similarity(y_true, y_pred, axis=-1):
    """The negative cosine similarity along `axis` (-1: same direction, 1: opposite),
    as Keras' loss reports it."""
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = nn_impl.l2_normalize(y_true, axis=axis)
    y_pred = nn_impl.l2_normalize(y_pred, axis=axis)
    return -reduction_ops.reduce_sum(y_true * y_pred, axis=axis)


def huber(y_true, y_pred, delta=1.0):
    y_true, y_pred = _pair(y_true, y_pred)
    delta = cast_ops.cast(delta, y_pred.dtype)
    err = math_ops.abs(y_pred - y_true)
    small = 0.5 * math_ops.square(err)
    large = delta * err - 0.5 * math_ops.square(delta)
    return reduction_ops.reduce_mean(math_composites.where_v2(err <= delta, small, large), axis=-1)


def _binary_focal(y_true, y_pred, gamma, from_logits, alpha=None):
    if from_logits:
        p = math_ops.sigmoid(y_pred)
        bce = nn_impl.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    else:
        p = y_pred
        eps = backend.epsilon()
        clipped = math_ops.minimum(math_ops.maximum(y_pred, eps), 1.0 - eps)
        bce = -(
            y_true * math_ops.log(clipped + eps)
            + (1.0 - y_true) * math_ops.log(1.0 - clipped + eps)
        )
    p_t = y_true * p + (1.0 - y_true) * (1.0 - p)
    loss = math_ops.pow(1.0 - p_t, gamma) * bce
    if alpha is not None:
        loss = (y_true * alpha + (1.0 - y_true) * (1.0 - alpha)) * loss
    return loss


def binary_focal_crossentropy(
    y_true,
    y_pred,
    apply_class_balancing=False,
    alpha=0.25,
    gamma=2.0,
    from_logits=False,
    label_smoothing=0.0,
    axis=-1,
):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    loss = _binary_focal(
        y_true, y_pred, gamma, from_logits, alpha if apply_class_balancing else None
    )
    return reduction_ops.reduce_mean(loss, axis=axis)


def categorical_focal_crossentropy(
    y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1
):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        classes = cast_ops.cast(array_ops.shape(y_true)[-1], y_pred.dtype)
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / classes
    if from_logits:
        y_pred = nn_ops.softmax(y_pred, axis=axis)
    y_pred = y_pred / reduction_ops.reduce_sum(y_pred, axis=axis, keepdims=True)
    eps = backend.epsilon()
    y_pred = math_ops.minimum(math_ops.maximum(y_pred, eps), 1.0 - eps)
    ce = -y_true * math_ops.log(y_pred)
    loss = alpha * math_ops.pow(1.0 - y_pred, gamma) * ce
    return reduction_ops.reduce_sum(loss, axis=axis)
