"""Loss-level and normalisation functions of `af.nn`: cross-entropies, l2_loss,
l2_normalize, moments, batch_normalization, fused_batch_norm, dropout, embedding_lookup,
top_k and in_top_k.

Fused kernels exist where TF has them (SoftmaxCrossEntropyWithLogits,
SparseSoftmaxCrossEntropyWithLogits, L2Loss, FusedBatchNormV3 and its gradient, TopKV2,
InTopKV2); the rest are compositions of other ops, as in TF's Python layer, so their
gradients come from the ops they are built of.

Invariants:
- The cross-entropy ops take 2-D logits; the builders flatten higher ranks (and move
  `axis` last) and restore the shape of the loss.
- The cross-entropy kernels return their backprop (softmax - labels) as a second output,
  which their gradient reuses, as TF's does.
- FusedBatchNormV3's reserve_space_1/2 hold the mean and (biased) variance that
  normalised x, so the gradient kernel never recomputes them.
"""

from __future__ import annotations

import numbers

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    math_ops,
    nn_ops,
    partition_ops,
    random_ops,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.control_flow_ordering import _take_scope_name
from asyncflow.ops.math_helpers import to_host
from asyncflow.ops.math_ops import _as_dtype, _quiet, _shape_str
from asyncflow.registry import (
    FLOATING,
    INDEX,
    REAL,
    NotDifferentiable,
    TypeConstraint,
    named_outputs,
    register_op,
)

__all__ = [
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits",
    "sigmoid_cross_entropy_with_logits",
    "weighted_cross_entropy_with_logits",
    "l2_loss",
    "l2_normalize",
    "moments",
    "batch_normalization",
    "fused_batch_norm",
    "dropout",
    "embedding_lookup",
    "top_k",
    "in_top_k",
    "xw_plus_b",
]

_HALF_UP = TypeConstraint(["float16", "bfloat16", "float32", "float64"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _apply(op_type, inputs, attrs=None, name=None):
    return ops.apply_op(op_type, inputs, attrs, name=name).outputs


def _stop(t):
    return _apply("StopGradient", [t])[0]


def _log_softmax_np(xp, x):
    shifted = x - xp.max(x, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))


# -- SoftmaxCrossEntropyWithLogits ---------------------------------------------------------


def _xent_broadcast_shape(logits, labels):
    """TF's SoftmaxCrossEntropyWithLogits shape: both rank 2, broadcast to each other."""
    for s in (logits, labels):
        if s.ndims is not None and s.ndims != 2:
            raise ValueError(f"Shape must be broadcasted with rank 2, but is rank {s.ndims}")
    a = logits if logits.ndims is not None else tensor_shape.TensorShape([None, None])
    b = labels if labels.ndims is not None else tensor_shape.TensorShape([None, None])
    dims = []
    for da, db in zip(a.as_list(), b.as_list(), strict=True):
        if da == 1 or db == 1:
            dims.append(db if da == 1 else da)
        elif da is None or db is None:
            dims.append(None)
        elif da != db:
            raise ValueError(f"Dimensions must be equal, but are {da} and {db}")
        else:
            dims.append(da)
    return tensor_shape.TensorShape(dims)


def _xent_shape(op):
    if op.type == "SoftmaxCrossEntropyWithLogits":
        shape = _xent_broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)
        return [tensor_shape.TensorShape([shape[0]]), shape]
    logits = op.inputs[0].shape.with_rank(2)
    labels = op.inputs[1].shape.with_rank(1)
    if not logits[0].is_compatible_with(labels[0]):
        raise ValueError(
            f"logits and labels must have the same first dimension, got logits shape "
            f"{logits} and labels shape {labels}"
        )
    logits = tensor_shape.TensorShape([logits[0].merge_with(labels[0]), logits[1]])
    return [tensor_shape.TensorShape([logits[0]]), logits]


SoftmaxCrossEntropyWithLogits = register_op(
    "SoftmaxCrossEntropyWithLogits",
    inputs=["features: T", "labels: T"],
    outputs=["loss: T", "backprop: T"],
    attrs={"T": _HALF_UP},
    shape_fn=_xent_shape,
)


def _softmax_xent(xp, x, labels, out_dtype):
    if x.shape[-1] == 0:  # no classes: TF 2.21 gives a zero loss and an empty backprop
        return xp.zeros(x.shape[:-1], out_dtype), xp.zeros(x.shape, out_dtype)
    ct = np.float32 if x.dtype.itemsize < 4 else x.dtype
    x, labels = x.astype(ct, copy=False), labels.astype(ct, copy=False)
    logp = _log_softmax_np(xp, x)
    loss = -xp.sum(labels * logp, axis=-1)
    backprop = xp.exp(logp) - labels
    return loss.astype(out_dtype, copy=False), backprop.astype(out_dtype, copy=False)


@SoftmaxCrossEntropyWithLogits.kernel()
async def _softmax_xent_kernel(ctx, x, labels):
    xp = ctx.xp
    x, labels = xp.asarray(x), xp.asarray(labels)
    if x.ndim != 2 or labels.ndim != 2:
        raise _invalid(
            "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
        )
    if x.shape != labels.shape:  # TF broadcasts a batch (or class) dimension of 1
        try:
            shape = np.broadcast_shapes(x.shape, labels.shape)
        except ValueError:
            raise _invalid(
                f"logits and labels must be broadcastable: logits_size={_shape_str(x.shape)} "
                f"labels_size={_shape_str(labels.shape)}"
            ) from None
        x, labels = xp.broadcast_to(x, shape), xp.broadcast_to(labels, shape)
    return await ctx.device.compute(_quiet, xp, _softmax_xent, xp, x, labels, x.dtype)


def _xent_grad_common(op, grad_loss, grad_grad, labels_grad):
    logits = op.inputs[0]
    backprop = op.outputs[1]
    g = array_ops.expand_dims(grad_loss, -1)
    dlogits = g * backprop
    # af.gradients fills an unused backprop output with ZerosLike; its second-order term
    # is then exactly zero, and TF skips it too (`_is_zeros_tensor`), saving six kernels.
    if grad_grad is not None and grad_grad.op.type != "ZerosLike":
        softmax = nn_ops.softmax(logits)
        inner = reduction_ops.reduce_sum(grad_grad * softmax, axis=-1, keepdims=True)
        dlogits = dlogits + (grad_grad - inner) * softmax
    return [dlogits, labels_grad(g)]


@SoftmaxCrossEntropyWithLogits.gradient
def _softmax_xent_grad(op, grad_loss, grad_grad=None):
    logits, labels = op.inputs
    dlogits, dlabels = _xent_grad_common(
        op, grad_loss, grad_grad, lambda g: g * -nn_ops.log_softmax(logits)
    )
    return list(_g.broadcast_reduce(logits, labels, dlogits, dlabels))


SparseSoftmaxCrossEntropyWithLogits = register_op(
    "SparseSoftmaxCrossEntropyWithLogits",
    inputs=["features: T", "labels: Tlabels"],
    outputs=["loss: T", "backprop: T"],
    attrs={"T": _HALF_UP, "Tlabels": TypeConstraint(["int32", "int64"], default="int64")},
    shape_fn=_xent_shape,
)


def _sparse_xent(xp, x, labels, out_dtype):
    # As TF's kernel: shifted = x - max; loss = log(sum(exp(shifted))) - shifted[label];
    # backprop = exp(shifted) / sum - onehot.  One exp pass, in place where it can be.
    if not x.size:  # an empty batch (no rows, or no rows and no classes)
        return xp.zeros(x.shape[:1], out_dtype), xp.zeros(x.shape, out_dtype)
    ct = np.float32 if x.dtype.itemsize < 4 else x.dtype
    if xp is np:  # the ufuncs' reduce directly: np.max/np.sum wrappers cost ~3 us each
        top, add = np.maximum.reduce(x, axis=-1, keepdims=True), np.add.reduce
    else:
        top, add = xp.max(x, axis=-1, keepdims=True), xp.sum
    shifted = xp.subtract(x, top, dtype=ct)
    # Each row's label entry through one flat index, computed once.
    at = xp.arange(0, shifted.size, x.shape[1]) + labels
    flat = shifted.reshape(-1)
    picked = flat[at]
    backprop = xp.exp(shifted, out=shifted)
    total = add(backprop, axis=-1, keepdims=True)
    loss = xp.log(total[:, 0]) - picked
    backprop /= total
    flat[at] -= 1
    return loss.astype(out_dtype, copy=False), backprop.astype(out_dtype, copy=False)


def check_sparse_xent_shapes(x, labels) -> None:
    """TF's shape checks of SparseSoftmaxCrossEntropyWithLogits (InvalidArgumentError)."""
    if x.ndim != 2:
        raise _invalid(f"logits must be 2-D, but got shape {_shape_str(x.shape)}")
    if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
        raise _invalid(
            f"logits and labels must have the same first dimension, got logits shape "
            f"{_shape_str(x.shape)} and labels shape {_shape_str(labels.shape)}"
        )
    if x.shape[0] and not x.shape[1]:
        raise _invalid("Must have at least one class, but got logits shape " + _shape_str(x.shape))


@SparseSoftmaxCrossEntropyWithLogits.kernel()
async def _sparse_xent_kernel(ctx, x, labels):
    xp = ctx.xp
    x, labels = xp.asarray(x), xp.asarray(labels)
    check_sparse_xent_shapes(x, labels)
    n = x.shape[1]
    if labels.size and (int(to_host(xp, labels.min())) < 0 or int(to_host(xp, labels.max())) >= n):
        host = to_host(xp, labels)
        first = int(host[(host < 0) | (host >= n)][0])
        raise _invalid(
            f"Received a label value of {first} which is outside the valid range of "
            f"[0, {n}).  Label values: {' '.join(str(int(v)) for v in host.tolist())}"
        )
    return await ctx.device.compute(_quiet, xp, _sparse_xent, xp, x, labels, x.dtype)


@SparseSoftmaxCrossEntropyWithLogits.gradient
def _sparse_xent_grad(op, grad_loss, grad_grad=None):
    return _xent_grad_common(op, grad_loss, grad_grad, lambda g: None)


def _flatten_outer(t):
    """t as [prod(shape[:-1]), shape[-1]]."""
    last = tensor_shape.dimension_value(t.shape[-1]) if t.shape.ndims else None
    return array_ops.reshape(t, [-1, last if last is not None else array_ops.shape(t)[-1]])


def _move_axis_last(t, axis, rank):
    """t with `axis` last, `rank` being the logits' (labels may be of unknown rank)."""
    axis %= rank
    if axis == rank - 1:
        return t
    perm = [*range(axis), *range(axis + 1, rank), axis]
    return array_ops.transpose(t, perm)


def _softmax_xent_builder(labels, logits, axis, name):
    with ops.name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = ops.convert_to_tensor(logits, name="logits")
        # As TF: labels of another dtype (one-hot float64 from NumPy, ints) are cast to
        # the logits' dtype.
        labels = ops.convert_to_tensor(labels, name="labels")
        if labels.dtype.base_dtype != logits.dtype.base_dtype:
            labels = math_ops.cast(labels, logits.dtype.base_dtype)
        try:
            labels.shape.assert_is_compatible_with(logits.shape)
        except ValueError:
            raise ValueError(
                f"Shapes {labels.shape} and {logits.shape} are incompatible"
            ) from None
        rank = logits.shape.ndims
        if rank is None and axis in (-1, None):
            # TF flattens the outer dims at run time and restores them on the loss.
            out_shape = array_ops.shape(logits)[:-1]
            logits, labels = _flatten_outer(logits), _flatten_outer(labels)
            xent = ops.apply_op("SoftmaxCrossEntropyWithLogits", [logits, labels])
            _take_scope_name(xent, scope)
            return array_ops.reshape(xent.outputs[0], out_shape)
        if rank is None:
            raise ValueError("softmax_cross_entropy_with_logits needs logits of known rank")
        if rank == 0:
            raise ValueError("logits must have rank at least 1")
        logits, labels = _move_axis_last(logits, axis, rank), _move_axis_last(labels, axis, rank)
        # TF's graph, whatever the rank: both flattened to matrices (Reshape, Reshape_1),
        # the op named as the scope, the loss reshaped back (Reshape_2, the result).
        out_shape = (
            logits.shape[:-1].as_list()
            if logits.shape[:-1].is_fully_defined()
            else array_ops.shape(logits)[:-1]
        )
        logits, labels = _flatten_outer(logits), _flatten_outer(labels)
        xent = ops.apply_op("SoftmaxCrossEntropyWithLogits", [logits, labels])
        _take_scope_name(xent, scope)
        loss = array_ops.reshape(xent.outputs[0], out_shape)
    return loss


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name=None, dim=None):
    """Softmax cross-entropy between `logits` and a distribution `labels` over `axis`.

    Gradients flow into both logits and labels.

    Raises:
      ValueError: labels and logits of incompatible shapes, unknown rank, or both axis
        and dim given.
      InvalidArgumentError: at run time, shapes that differ.
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'.")
    axis = -1 if axis is None and dim is None else (axis if axis is not None else dim)
    return _softmax_xent_builder(labels, logits, axis, name)


def softmax_cross_entropy_with_logits(labels=None, logits=None, dim=-1, name=None, axis=None):
    """TF1's (deprecated) softmax cross-entropy: no gradient flows into `labels`.
    Positional arguments are (labels, logits) as in TF 2.21's `tf.compat.v1` (TF 1.x's
    `_sentinel` that rejected them is gone there).

    Raises:
      ValueError: missing labels or logits, bad shapes.
    """
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    axis = dim if axis is None else axis
    with ops.name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as scope:
        labels = _stop(ops.convert_to_tensor(labels, name="labels"))
    return softmax_cross_entropy_with_logits_v2(labels, logits, axis=axis, name=scope)


def sparse_softmax_cross_entropy_with_logits_v2(labels, logits, name=None):
    """TF's `nn_ops.sparse_softmax_cross_entropy_with_logits_v2` (TF2's
    `tf.nn.sparse_softmax_cross_entropy_with_logits`): the TF1 function with positional
    labels and logits.

    Raises: as `sparse_softmax_cross_entropy_with_logits`.
    """
    return sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name=name)


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Softmax cross-entropy of `logits` [..., num_classes] against int class ids `labels`
    (positional arguments are (labels, logits), as in TF 2.21's `tf.compat.v1`).

    Raises:
      ValueError: labels' rank is not logits' rank - 1.
      InvalidArgumentError: at run time, a label outside [0, num_classes).
    """
    with ops.name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]) as scope:
        labels = ops.convert_to_tensor(labels)
        logits = ops.convert_to_tensor(logits)
        if logits.dtype not in (dtypes.float16, dtypes.float32, dtypes.float64):
            raise ValueError(f"Logits must be a floating point type, got {logits.dtype.name}")
        lr, gr = labels.shape.ndims, logits.shape.ndims
        if gr == 0:
            raise ValueError(f"Logits cannot be scalars - received shape {logits.shape}.")
        if lr is not None and gr is not None:
            if lr != gr - 1:
                raise ValueError(
                    f"Rank mismatch: Rank of labels (received {lr}) should equal rank of "
                    f"logits minus 1 (received {gr})."
                )
            if not labels.shape.is_compatible_with(logits.shape[:-1]):
                raise ValueError(
                    f"Shape mismatch: The shape of labels (received {labels.shape}) should "
                    f"equal the shape of logits except for the last dimension (received "
                    f"{logits.shape})."
                )
        if gr == 2:  # TF's op, named in the scope: .../SparseSoftmaxCrossEntropyWithLogits
            return _apply("SparseSoftmaxCrossEntropyWithLogits", [logits, labels])[0]
        # TF's graph: logits then labels flattened, the op named as the scope, the loss
        # reshaped back to the labels' shape (Reshape_2, the result).
        out_shape = array_ops.shape(labels)
        flat_logits = _flatten_outer(logits)
        flat_labels = array_ops.reshape(labels, [-1])
        xent = ops.apply_op("SparseSoftmaxCrossEntropyWithLogits", [flat_logits, flat_labels])
        _take_scope_name(xent, scope)
        loss = array_ops.reshape(xent.outputs[0], out_shape)
        if labels.shape.is_fully_defined():
            loss.set_shape(labels.shape)
    return loss


@_dispatch.add_dispatch_support
def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """max(x, 0) - x * z + log(1 + exp(-|x|)): logistic loss, stable for any x
    (positional arguments are (labels, logits), as in TF 2.21's `tf.compat.v1`).

    Raises:
      ValueError: labels and logits of different shapes.
    """
    with ops.name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = ops.convert_to_tensor(logits, name="logits")
        labels = ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        try:
            labels.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(
                f"logits and labels must have the same shape ({logits.shape} vs {labels.shape})"
            ) from None
        zeros = array_ops.zeros_like(logits)
        cond = math_ops.greater_equal(logits, zeros)
        relu_logits = slicing_ops.where(cond, logits, zeros)
        neg_abs = slicing_ops.where(cond, -logits, logits)
        return math_ops.add(
            relu_logits - logits * labels, math_ops.log1p(math_ops.exp(neg_abs)), name=scope
        )


def weighted_cross_entropy_with_logits(
    labels=None, logits=None, pos_weight=None, name=None, targets=None
):
    """sigmoid cross-entropy with positives weighted by `pos_weight` (TF1 accepts `targets`).

    Raises:
      ValueError: labels and logits of different shapes, or both labels and targets.
    """
    if targets is not None:
        if labels is not None:
            raise ValueError("Cannot specify both 'labels' and 'targets'.")
        labels = targets
    with ops.name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = ops.convert_to_tensor(logits, name="logits")
        labels = ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        try:
            labels.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(
                f"logits and targets must have the same shape ({logits.shape} vs {labels.shape})"
            ) from None
        log_weight = 1 + (pos_weight - 1) * labels
        softplus_neg = math_ops.log1p(math_ops.exp(-math_ops.abs(logits))) + nn_ops.relu(-logits)
        return math_ops.add((1 - labels) * logits, log_weight * softplus_neg, name=scope)


# -- L2Loss, l2_normalize -----------------------------------------------------------------

L2Loss = register_op(
    "L2Loss",
    inputs=["t: T"],
    outputs=["output: T"],
    attrs={"T": FLOATING},
    shape_fn=lambda op: [tensor_shape.scalar()],
)


def _l2(xp, t):
    flat = t.reshape(-1)
    ct = np.float32 if t.dtype.itemsize < 4 else t.dtype
    flat = flat.astype(ct, copy=False)
    return xp.dot(flat, flat) / 2


@L2Loss.kernel()
async def _l2_loss(ctx, t):
    xp = ctx.xp
    out = await ctx.device.compute(_quiet, xp, _l2, xp, xp.asarray(t))
    return _as_dtype(xp, out, ctx.attrs["T"])


@L2Loss.gradient
def _l2_loss_grad(op, grad):
    return op.inputs[0] * grad


def l2_loss(t, name=None):
    """sum(t ** 2) / 2, a scalar."""
    return _apply("L2Loss", [t], name=name)[0]


@_dispatch.add_dispatch_support
def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x ** 2, axis), epsilon)).

    Raises:
      ValueError: both axis and dim given.
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'.")
    axis = axis if axis is not None else dim
    with ops.name_scope(name, "l2_normalize", [x]) as scope:
        x = ops.convert_to_tensor(x, name="x")
        if x.dtype.is_complex:  # (as TF: the norm of the real and imaginary parts)
            from asyncflow.ops import math_special_ops as msp

            re, im = msp.real(x), msp.imag(x)
            square_sum = reduction_ops.reduce_sum(
                math_ops.add(math_ops.square(re), math_ops.square(im)), axis, keepdims=True
            )
            inv = math_ops.rsqrt(
                math_ops.maximum(square_sum, np.asarray(epsilon, re.dtype.as_numpy_dtype))
            )
            return msp.complex(math_ops.multiply(re, inv), math_ops.multiply(im, inv), name=scope)
        square_sum = reduction_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv = math_ops.rsqrt(
            math_ops.maximum(square_sum, np.asarray(epsilon, x.dtype.as_numpy_dtype))
        )
        return math_ops.multiply(x, inv, name=scope)


def xw_plus_b(x, weights, biases, name=None):
    """matmul(x, weights) + biases."""
    with ops.name_scope(name, "xw_plus_b", [x, weights, biases]) as scope:
        return nn_ops.bias_add(math_ops.matmul(x, weights), biases, name=scope)


# -- moments, batch_normalization --------------------------------------------------------


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """Mean and variance of `x` over `axes` (float16 inputs are reduced in float32).

    Raises:
      ValueError: both keep_dims and keepdims given.
    """
    del shift  # unused in TF too
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'.")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with ops.name_scope(name, "moments", [x, axes]):
        x = ops.convert_to_tensor(x)
        y = math_ops.cast(x, dtypes.float32) if x.dtype == dtypes.float16 else x
        axes = list(axes)
        mean = reduction_ops.reduce_mean(y, axes, keepdims=True, name="mean")
        variance = reduction_ops.reduce_mean(
            math_ops.squared_difference(y, _stop(mean)), axes, keepdims=True, name="variance"
        )
        if not keep:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        if x.dtype == dtypes.float16:
            return math_ops.cast(mean, dtypes.float16), math_ops.cast(variance, dtypes.float16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) * scale / sqrt(variance + epsilon) + offset (offset/scale may be None)."""
    with ops.name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
        inv = math_ops.rsqrt(variance + variance_epsilon)
        if scale is not None:
            inv = inv * scale
        # (TF's order, so its names: x * inv is mul_1, the shift's product mul_2, the
        # result add_1.)
        scaled = x * math_ops.cast(inv, x.dtype)
        shift = offset - mean * inv if offset is not None else -mean * inv
        return scaled + math_ops.cast(shift, x.dtype)


# -- FusedBatchNormV3 ----------------------------------------------------------------------

_BN_ATTRS = {
    "T": _HALF_UP,
    "U": TypeConstraint(["float32"], default="float32"),
    "epsilon": 0.0001,
    "exponential_avg_factor": 1.0,
    "data_format": "NHWC",
    "is_training": True,
}


def _channel_dim(shape, fmt):
    return shape[1] if fmt == "NCHW" else shape[-1]


def _bn_shape(op):
    x = op.inputs[0].shape.with_rank(4)
    fmt = op._attr("data_format")
    c = _channel_dim(x, fmt) if x.ndims else tensor_shape.Dimension(None)
    for t in op.inputs[1:3]:
        c = c.merge_with(t.shape.with_rank(1)[0])
    vec = tensor_shape.TensorShape([c])
    return [x, vec, vec, vec, vec, tensor_shape.TensorShape([0])]


FusedBatchNormV3 = register_op(
    "FusedBatchNormV3",
    inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
    outputs=[
        "y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
        "reserve_space_2: U", "reserve_space_3: U",
    ],
    attrs=dict(_BN_ATTRS),
    shape_fn=_bn_shape,
)  # fmt: skip


def _bn_axes(fmt):
    return (0, 2, 3) if fmt == "NCHW" else (0, 1, 2)


def _bn_bcast(v, fmt):
    return v.reshape(1, -1, 1, 1) if fmt == "NCHW" else v


def _fused_bn(xp, x, scale, offset, mean, var, attrs):
    fmt, eps = attrs["data_format"], float(attrs["epsilon"])
    xf = x.astype(np.float32, copy=False)
    axes = _bn_axes(fmt)
    if attrs["is_training"]:
        n = int(np.prod([xf.shape[a] for a in axes]))
        bmean = xf.mean(axis=axes)
        bvar = xf.var(axis=axes)
        factor = float(attrs["exponential_avg_factor"])
        unbiased = bvar * (n / max(n - 1, 1))
        if factor != 1.0 and mean.size:
            run_mean = (1 - factor) * mean + factor * bmean
            run_var = (1 - factor) * var + factor * unbiased
        else:
            run_mean, run_var = bmean, unbiased
        use_mean, use_var = bmean, bvar
    else:
        use_mean, use_var = mean, var
        run_mean, run_var = mean, var
    inv = 1.0 / xp.sqrt(use_var + eps)
    y = (xf - _bn_bcast(use_mean, fmt)) * _bn_bcast(inv * scale, fmt) + _bn_bcast(offset, fmt)
    f32 = np.float32
    return (
        y.astype(x.dtype, copy=False),
        run_mean.astype(f32),
        run_var.astype(f32),
        use_mean.astype(f32),
        use_var.astype(f32),
        xp.zeros((0,), f32),
    )


def _check_bn_inputs(x, vecs, names, attrs, allow_empty=()):
    if x.ndim != 4:
        raise _invalid(f"input must be 4-dimensional{_shape_str(x.shape)}")
    c = _channel_dim(x.shape, attrs["data_format"])
    for v, name in zip(vecs, names):
        if name in allow_empty and v.size == 0:
            continue
        if v.ndim != 1 or v.shape[0] != c:
            raise _invalid(
                f"{name} must have the same number of elements as the channels of x, got "
                f"{v.size} and {c}"
            )


@FusedBatchNormV3.kernel()
async def _fused_bn_kernel(ctx, x, scale, offset, mean, var):
    xp = ctx.xp
    x, scale, offset, mean, var = (xp.asarray(v) for v in (x, scale, offset, mean, var))
    training = ctx.attrs["is_training"]
    empty_ok = ("mean", "variance") if training else ()
    _check_bn_inputs(x, (scale, offset, mean, var), ("scale", "offset", "mean", "variance"),
                     ctx.attrs, empty_ok)  # fmt: skip
    return await ctx.device.compute(_fused_bn, xp, x, scale, offset, mean, var, ctx.attrs)


FusedBatchNormGradV3 = register_op(
    "FusedBatchNormGradV3",
    inputs=[
        "y_backprop: T",
        "x: T",
        "scale: float32",
        "reserve_space_1: U",
        "reserve_space_2: U",
        "reserve_space_3: U",
    ],  # fmt: skip
    outputs=[
        "x_backprop: T",
        "scale_backprop: U",
        "offset_backprop: U",
        "reserve_space_4: U",
        "reserve_space_5: U",
    ],  # fmt: skip
    attrs={k: v for k, v in _BN_ATTRS.items() if k != "exponential_avg_factor"},
    shape_fn=lambda op: [
        op.inputs[1].shape,
        op.inputs[2].shape,
        op.inputs[2].shape,
        tensor_shape.TensorShape([0]),
        tensor_shape.TensorShape([0]),
    ],
)


def _fused_bn_grad(xp, dy, x, scale, mean, var, attrs):
    fmt, eps = attrs["data_format"], float(attrs["epsilon"])
    axes = _bn_axes(fmt)
    dyf, xf = dy.astype(np.float32, copy=False), x.astype(np.float32, copy=False)
    inv = 1.0 / xp.sqrt(var + eps)
    xhat = (xf - _bn_bcast(mean, fmt)) * _bn_bcast(inv, fmt)
    doffset = dyf.sum(axis=axes)
    dscale = (dyf * xhat).sum(axis=axes)
    if attrs["is_training"]:
        n = int(np.prod([xf.shape[a] for a in axes]))
        dx = (dyf - _bn_bcast(doffset / n, fmt) - xhat * _bn_bcast(dscale / n, fmt)) * _bn_bcast(
            scale * inv, fmt
        )
    else:
        dx = dyf * _bn_bcast(scale * inv, fmt)
    empty = xp.zeros((0,), np.float32)
    return dx.astype(dy.dtype, copy=False), dscale, doffset, empty, empty


@FusedBatchNormGradV3.kernel()
async def _fused_bn_grad_kernel(ctx, dy, x, scale, mean, var, _reserve3):
    xp = ctx.xp
    dy, x, scale, mean, var = (xp.asarray(v) for v in (dy, x, scale, mean, var))
    if dy.shape != x.shape:
        raise _invalid(
            f"x and y_backprop must have same shape, but x has shape {_shape_str(x.shape)} "
            f"and y_backprop has shape {_shape_str(dy.shape)}"
        )
    _check_bn_inputs(x, (scale, mean, var), ("scale", "reserve_space_1", "reserve_space_2"),
                     ctx.attrs)  # fmt: skip
    return await ctx.device.compute(_fused_bn_grad, xp, dy, x, scale, mean, var, ctx.attrs)


@FusedBatchNormV3.gradient
def _fused_bn_grad_fn(op, *grads):
    x, scale = op.inputs[0], op.inputs[1]
    attrs = {k: op._attr(k) for k in ("epsilon", "data_format", "is_training")}
    dy = grads[0] if grads[0] is not None else array_ops.zeros_like(op.outputs[0])
    dx, dscale, doffset, _, _ = _apply(
        "FusedBatchNormGradV3",
        [dy, x, scale, op.outputs[3], op.outputs[4], op.outputs[5]],
        attrs,
    )
    return [dx, dscale, doffset, None, None]


def fused_batch_norm(
    x,
    scale,
    offset,
    mean=None,
    variance=None,
    epsilon=0.001,
    data_format="NHWC",
    is_training=True,
    name=None,
    exponential_avg_factor=1.0,
):
    """Batch normalisation of a 4-D `x` in one kernel; returns (y, mean, variance).

    In training the statistics are the batch's (the returned variance is unbiased,
    n / (n - 1), as TF's); in inference `mean` and `variance` are required.

    Raises:
      ValueError: inference without mean/variance, a bad data_format.
      InvalidArgumentError: at run time, vectors that do not match x's channels.
    """
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be NHWC or NCHW, got {data_format!r}")
    if not is_training and (mean is None or variance is None):
        raise ValueError(
            "Both 'mean' and 'variance' must be a 1D tensor when is_training is False."
        )
    with ops.name_scope(name, "FusedBatchNormV3", [x, scale, offset]) as scope:
        x = ops.convert_to_tensor(x, name="input")
        empty = np.zeros((0,), np.float32)
        mean = empty if mean is None else mean
        variance = empty if variance is None else variance
        epsilon = max(float(epsilon), 1.001e-5)  # TF's floor (cuDNN's minimum)
        attrs = {
            "epsilon": epsilon,
            "data_format": data_format,
            "is_training": bool(is_training),
            "exponential_avg_factor": float(exponential_avg_factor),
        }
        outs = _apply(
            "FusedBatchNormV3",
            [x, math_ops.cast(scale, dtypes.float32), math_ops.cast(offset, dtypes.float32),
             mean, variance],
            attrs,
            name=scope,
        )  # fmt: skip
    return outs[0], outs[1], outs[2]


# -- dropout --------------------------------------------------------------------------------


def _noise_shape(x, noise_shape):
    """`noise_shape` with its unknown dimensions taken from x's where x knows them."""
    if noise_shape is None:
        return array_ops.shape(x)
    try:
        given = tensor_shape.as_shape(noise_shape)
    except (TypeError, ValueError):
        return noise_shape
    if x.shape.dims is not None and given.dims is not None and len(x.shape.dims) == len(given):
        return tensor_shape.TensorShape(
            [
                xd if nd is None and xd is not None else nd
                for xd, nd in zip(x.shape.as_list(), given.as_list())
            ]
        )
    return noise_shape


def _dropout(x, rate, noise_shape, uniform_sampler, name, default_name):
    with ops.name_scope(name, default_name, [x]):
        is_number = isinstance(rate, numbers.Real)
        if is_number and not 0 <= rate < 1:
            raise ValueError(
                f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: "
                f"rate={rate}"
            )
        x = ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(
                "`x.dtype` must be a floating point tensor as `x` will be scaled. Received: "
                f"x_dtype={x.dtype}"
            )
        if is_number and rate == 0:
            return x
        if not is_number and callable(getattr(rate, "read_value", None)):
            rate = ops.convert_to_tensor(rate)  # a Variable rate is a tensor, as in TF
        if not isinstance(rate, ops.Tensor):
            if not is_number:
                raise ValueError(
                    f"`rate` must be a scalar or scalar tensor. Received: rate={rate}"
                )
            scale = ops.convert_to_tensor(1 / (1 - rate), dtype=x.dtype)
            kept = math_ops.multiply(x, scale)
        else:
            rate.shape.assert_has_rank(0)
            if rate.dtype != x.dtype:
                if not rate.dtype.is_compatible_with(x.dtype):
                    raise ValueError(
                        "`x.dtype` must be compatible with `rate.dtype`. Received: "
                        f"x.dtype={x.dtype} and rate.dtype={rate.dtype}"
                    )
                rate = math_ops.cast(rate, x.dtype, name="rate")
            one = ops.convert_to_tensor(1, dtype=x.dtype)
            kept = math_ops.realdiv(x, math_ops.subtract(one, rate))
        uniform = uniform_sampler(shape=_noise_shape(x, noise_shape), dtype=x.dtype)
        keep = math_ops.greater_equal(uniform, rate)
        zero = ops.convert_to_tensor(0, dtype=x.dtype)
        out = ops.apply_op("SelectV2", [keep, kept, zero]).outputs[0]
        out.set_shape(x.shape)
        return out


@_dispatch.add_dispatch_support
def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Zero elements of `x` with probability `rate` (= 1 - keep_prob), scaling the kept
    ones by 1 / (1 - rate); TF 2's graph (a uniform draw compared with the rate selects
    between the scaled x and zeros), so the values are TF's to the bit.

    Raises:
      ValueError: both or neither of keep_prob and rate, a rate outside [0, 1), or a
        non-floating x.
    """
    import functools

    from asyncflow import ragged_functions
    from asyncflow.deprecation import deprecated_argument_lookup

    if ragged_functions.is_ragged(x):  # (TF's dispatch: the flat values' dropout)
        return ragged_functions.map_flat_values(
            dropout, x, keep_prob, noise_shape, seed, name, rate
        )

    try:
        rate_from_keep_prob = 1.0 - keep_prob if keep_prob is not None else None
    except TypeError:
        raise ValueError(
            "`keep_prob` must be a floating point number or Tensor. Received: "
            f"keep_prob={keep_prob}"
        ) from None
    rate = deprecated_argument_lookup("rate", rate, "keep_prob", rate_from_keep_prob)
    if rate is None:
        raise ValueError(f"`rate` must be provided. Received: rate={rate}")
    sampler = functools.partial(random_ops.random_uniform, seed=seed)
    return _dropout(x, rate, noise_shape, sampler, name, "dropout")


# -- embedding_lookup ----------------------------------------------------------------------


@_dispatch.add_dispatch_support
def embedding_lookup(
    params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None
):
    """Rows of `params` (a tensor, a list of shards or a PartitionedVariable) picked by
    `ids` (OSDI §4.2).

    With shards, id `i` lives in shard `i % n` at row `i // n` ('mod'), or in contiguous
    blocks, the first `size % n` shards holding one extra row ('div').  As TF builds it:
    DynamicPartition splits the ids (and their positions) by shard, a Gather colocated
    with each shard reads its rows where the shard lives, and ParallelDynamicStitch puts
    the rows back in the ids' order.  The gradient with respect to each shard is sparse
    (IndexedSlices), so an optimizer updates only the rows looked up, on the shard.

    Raises:
      ValueError: an empty params list, or an unknown partition_strategy.
      InvalidArgumentError: at run time, an id out of range.
    """
    del validate_indices
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable: its slices
        params = list(params)
    params = list(params) if isinstance(params, list | tuple) else [params]
    if not params:
        raise ValueError("Need at least one param")
    with ops.name_scope(name, "embedding_lookup", [*params, ids]) as scope:
        params = [ops.convert_to_tensor(p, name="params") for p in params]
        ids = ops.convert_to_tensor(ids, name="ids")
        if len(params) == 1:
            with ops.colocate_with(params[0]):
                out = slicing_ops.gather(params[0], ids, name=None if max_norm else scope)
                out = _clip_rows(out, ids, max_norm, scope) if max_norm else out
            return array_ops.identity(out)
        out = _sharded_lookup(params, ids, partition_strategy, scope)
        return _clip_rows(out, ids, max_norm, None) if max_norm else out


def _div_assignments(params, flat_ids):
    """(shard, row in shard) of each id for the 'div' strategy, as TF computes them."""
    n = len(params)
    dims = [tensor_shape.dimension_value(p.shape[0]) for p in params]
    if all(d is not None for d in dims):
        total = array_ops.constant(sum(dims), flat_ids.dtype)
    else:
        sizes = []
        for p, d in zip(params, dims):
            if d is not None:
                sizes.append(array_ops.constant(d, flat_ids.dtype))
            else:
                with ops.colocate_with(p):
                    sizes.append(math_ops.cast(array_ops.shape(p)[0], flat_ids.dtype))
        total = math_ops.add_n(sizes)
    per = total // n
    extras = total % n
    shard = math_ops.maximum(flat_ids // (per + 1), (flat_ids - extras) // per)
    row = slicing_ops.where(shard < extras, flat_ids % (per + 1), (flat_ids - extras) % per)
    return shard, row


def _sharded_lookup(params, ids, strategy, name):
    n = len(params)
    flat_ids = array_ops.reshape(ids, [-1])
    positions = reduction_ops.range(array_ops.size(flat_ids))
    if strategy == "mod":
        shard, row = flat_ids % n, flat_ids // n
    else:
        shard, row = _div_assignments(params, flat_ids)
    shard = math_ops.cast(shard, dtypes.int32)
    gather_ids = partition_ops.dynamic_partition(row, shard, n)
    gather_positions = partition_ops.dynamic_partition(positions, shard, n)
    rows = []
    for p in range(n):
        with ops.device(None), ops.colocate_with(params[p]):
            rows.append(slicing_ops.gather(params[p], gather_ids[p]))
    ret = partition_ops.parallel_dynamic_stitch(gather_positions, rows, name=name)
    element = params[0].shape[1:]
    for p in params[1:]:
        element = element.merge_with(p.shape[1:])
    if element.is_fully_defined():
        element_d = array_ops.constant(element.as_list(), dtypes.int32)
    else:
        with ops.colocate_with(params[0]):
            element_d = array_ops.shape(params[0])[1:]
    ret = array_ops.reshape(ret, array_ops.concat([array_ops.shape(ids), element_d], 0))
    ret.set_shape(ids.shape.concatenate(element))
    return ret


def _clip_rows(x, ids, max_norm, name):
    """Each embedding (the dims after the ids' dims) with L2 norm above max_norm scaled
    down to it, as TF's clip_by_norm computes it."""
    axes = list(range(ids.shape.ndims, x.shape.ndims))
    sq = reduction_ops.reduce_sum(math_ops.square(x), axes, keepdims=True)
    norm = math_ops.sqrt(math_ops.maximum(sq, 0.0))
    return math_ops.truediv(x * max_norm, math_ops.maximum(norm, max_norm), name=name)


# -- TopKV2, InTopKV2 ---------------------------------------------------------------------


def _top_k_shape(op):
    x = op.inputs[0].shape.with_rank_at_least(1)
    k = ops.constant_value(op.inputs[1])
    if x.ndims is None:
        return [x, x]
    last = x[-1].value
    if k is not None:
        k = int(k)
        if k < 0:
            raise ValueError(f"Need k >= 0, got {k}")
        if last is not None and last < k:
            raise ValueError(f"input must have last dimension >= k = {k} but is {last}")
    out = tensor_shape.TensorShape(x.dims[:-1] + [tensor_shape.Dimension(k)])
    return [out, out]


TopKV2 = register_op(
    "TopKV2",
    inputs=["input: T", "k: Tk"],
    outputs=["values: T", "indices: index_type"],
    attrs={
        "T": REAL,
        "sorted": True,
        "Tk": TypeConstraint([dtypes.int16, dtypes.int32, dtypes.int64], default=dtypes.int32),
        "index_type": TypeConstraint(
            [dtypes.int16, dtypes.int32, dtypes.int64], default=dtypes.int32
        ),
    },
    shape_fn=_top_k_shape,
)


def _top_k(xp, x, k, index_dtype=np.int32):
    # Stable sort of a key that reverses the order keeps equal values in index order
    # (TF's tie rule).  Signed integers use ~x (= -x - 1), which reverses the order
    # without -x's overflow at the type's minimum; unsigned types take a descending
    # argsort through the reverse.
    if x.dtype.kind == "u":
        order = xp.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
        order = x.shape[-1] - 1 - order
    elif x.dtype.kind == "i":
        order = xp.argsort(~x, axis=-1, kind="stable")
    else:
        order = xp.argsort(-x, axis=-1, kind="stable")
    idx = order[..., :k]
    return xp.take_along_axis(x, idx, axis=-1), idx.astype(index_dtype)


@TopKV2.kernel(host_memory=("k",))
async def _top_k_kernel(ctx, x, k):
    xp = ctx.xp
    x = xp.asarray(x)
    k = np.asarray(k)
    if k.ndim != 0:
        raise _invalid(f"k must be 0-D, got shape {_shape_str(k.shape)}")
    k = int(k)
    if k < 0:
        raise _invalid(f"Need k >= 0, got {k}")
    if x.ndim < 1:
        raise _invalid(f"input must be >= 1-D, got shape {_shape_str(x.shape)}")
    if x.shape[-1] < k:
        raise _invalid(f"input must have at least k columns. Had {x.shape[-1]}, needed {k}")
    index_dtype = ctx.attrs["index_type"].as_numpy_dtype
    return await ctx.device.compute(_top_k, xp, x, k, index_dtype)


@TopKV2.gradient
def _top_k_grad(op, grad_values, grad_indices=None):
    """Scatter the values' gradient back to where they came from (via one_hot)."""
    x, indices = op.inputs[0], op.outputs[1]
    depth = array_ops.shape(x)[-1]
    hot = slicing_ops.one_hot(indices, depth, dtype=grad_values.dtype)
    dx = reduction_ops.reduce_sum(hot * array_ops.expand_dims(grad_values, -1), axis=-2)
    return [dx, None]


@_dispatch.add_dispatch_support
def top_k(input, k=1, sorted=True, index_type=dtypes.int32, name=None):  # noqa: A002 - TF's names
    """The k largest entries of the last dimension and their indices (ties: lower index).

    Raises:
      ValueError: k < 0 or larger than the last dimension, when known at build time.
      InvalidArgumentError: the same at run time.
    """
    attrs = {"sorted": bool(sorted), "index_type": dtypes.as_dtype(index_type)}
    return named_outputs(ops.apply_op("TopKV2", [input, k], attrs, name=name))


InTopKV2 = register_op(
    "InTopKV2",
    inputs=["predictions: float32", "targets: T", "k: T"],
    outputs=["precision: bool"],
    attrs={"T": INDEX},
    shape_fn=lambda op: [op.inputs[1].shape.with_rank(1)],
)


NotDifferentiable("InTopKV2")


def _in_top_k(xp, pred, targets, k):
    n, c = pred.shape
    valid = (targets >= 0) & (targets < c)
    safe = xp.where(valid, targets, 0)
    target_vals = pred[xp.arange(n), safe]
    # TF skips (answers False for) a row holding any non-finite prediction.
    finite = xp.isfinite(pred).all(axis=1)
    greater = (pred > target_vals[:, None]).sum(axis=1)
    return valid & finite & (greater < k)


@InTopKV2.kernel(host_memory=("k",))
async def _in_top_k_kernel(ctx, pred, targets, k):
    xp = ctx.xp
    pred, targets = xp.asarray(pred), xp.asarray(targets)
    if pred.ndim != 2:
        raise _invalid(f"predictions must be 2-dimensional, got {_shape_str(pred.shape)}")
    if targets.ndim != 1:
        raise _invalid(f"targets must be 1-dimensional, got {_shape_str(targets.shape)}")
    if targets.shape[0] != pred.shape[0]:
        raise _invalid("First dimension of predictions " + str(pred.shape[0]) +
                       " must match length of targets " + str(targets.shape[0]))  # fmt: skip
    return await ctx.device.compute(_in_top_k, xp, pred, targets, int(np.asarray(k)))


def in_top_k(predictions, targets, k, name=None):
    """Whether each target's prediction is among the k largest of its row (ties count
    as in); a row with a non-finite prediction and an out-of-range target give False."""
    with ops.name_scope(name, "in_top_k") as scope:
        targets = ops.convert_to_tensor(targets, name="targets")
        k = ops.convert_to_tensor(k, dtype=targets.dtype, name="k")
        return _apply("InTopKV2", [predictions, targets, k], name=scope)[0]
