"""`tf.keras.backend`'s tensor functions (mean, sum, dot, concatenate, clip, ...) and its
cross-entropies, with Keras' argument names (`axis`, `keepdims`) and dtype defaults
(floatx).  Re-exported by backend.py.

The cross-entropies on probabilities clip to [epsilon, 1 - epsilon]; on a plain graph
tensor made by a Softmax/Sigmoid op (not a Keras layer output) they use the op's
logits instead, Keras' graph-mode shortcut.
"""

from __future__ import annotations

import numpy as np

from asyncflow import clip_ops, dtypes, math_composites, math_composites_2
from asyncflow import graph as ops
from asyncflow.keras.backend_config import epsilon, floatx, keras_history
from asyncflow.ops import (
    array_ops,
    cast_ops,
    gradient_ops,
    math_ops,
    nn_impl,
    nn_ops,
    partition_ops,
    random_ops,
    reduction_ops,
    scatter_nd_ops,
    slicing_ops,
)

__all__ = [
    "int_shape", "shape", "ndim", "dtype", "cast", "count_params", "zeros", "ones", "eye",
    "zeros_like", "ones_like", "random_normal", "random_uniform", "truncated_normal",
    "mean", "sum", "max", "min", "prod", "std", "var", "any", "all", "argmax", "argmin",
    "cumsum", "cumprod", "square", "abs", "sqrt", "exp", "log", "pow", "sign", "round",
    "tanh", "sigmoid", "hard_sigmoid", "softmax", "softplus", "softsign", "relu", "elu",
    "minimum", "maximum", "equal", "not_equal", "greater", "greater_equal", "less",
    "less_equal", "clip", "dot", "batch_dot", "transpose", "permute_dimensions",
    "reshape", "expand_dims", "squeeze", "flatten", "batch_flatten", "concatenate",
    "stack", "tile", "repeat_elements", "gather", "one_hot", "switch", "l2_normalize",
    "stop_gradient", "gradients", "dropout", "update", "update_add", "update_sub",
    "categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy",
]  # fmt: skip


# -- shapes and creation ----------------------------------------------------------------------


def int_shape(x):
    shape = x.shape if hasattr(x, "shape") else x.get_shape()
    if shape.ndims is None:
        return None
    return tuple(shape.as_list())


def shape(x):
    return array_ops.shape(x)


def ndim(x):
    return x.shape.ndims


def dtype(x) -> str:
    return x.dtype.base_dtype.name


def cast(x, dtype):
    return cast_ops.cast(x, dtype)


def count_params(x) -> int:
    return int(np.prod(x.shape.as_list()))


def zeros(shape, dtype=None, name=None):
    return array_ops.zeros(shape, dtype=dtype or floatx(), name=name)


def ones(shape, dtype=None, name=None):
    return array_ops.ones(shape, dtype=dtype or floatx(), name=name)


def eye(size, dtype=None, name=None):
    return math_composites.eye(size, dtype=dtype or floatx(), name=name)


def zeros_like(x, dtype=None, name=None):
    return array_ops.zeros_like(x, dtype=dtype, name=name)


def ones_like(x, dtype=None, name=None):
    return array_ops.ones_like(x, dtype=dtype, name=name)


def _seed(seed):
    # Keras draws a seed from NumPy when none is given, so each call differs.
    return np.random.randint(10e6) if seed is None else seed


def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return random_ops.random_normal(shape, mean=mean, stddev=stddev, dtype=dtype or floatx(),
                                    seed=_seed(seed))  # fmt: skip


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    return random_ops.random_uniform(shape, minval=minval, maxval=maxval,
                                     dtype=dtype or floatx(), seed=_seed(seed))  # fmt: skip


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return random_ops.truncated_normal(shape, mean, stddev, dtype=dtype or floatx(),
                                       seed=_seed(seed))  # fmt: skip


# -- reductions -------------------------------------------------------------------------------


def _bool_to_float(x):
    x = ops.convert_to_tensor(x)
    return cast_ops.cast(x, floatx()) if x.dtype == dtypes.bool else x


def mean(x, axis=None, keepdims=False):
    return reduction_ops.reduce_mean(_bool_to_float(x), axis, keepdims=keepdims)


def sum(x, axis=None, keepdims=False):  # noqa: A001 - Keras' name
    return reduction_ops.reduce_sum(x, axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001 - Keras' name
    return reduction_ops.reduce_max(x, axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001 - Keras' name
    return reduction_ops.reduce_min(x, axis, keepdims=keepdims)


def prod(x, axis=None, keepdims=False):
    return reduction_ops.reduce_prod(x, axis, keepdims=keepdims)


def var(x, axis=None, keepdims=False):
    return math_composites.reduce_variance(_bool_to_float(x), axis=axis, keepdims=keepdims)


def std(x, axis=None, keepdims=False):
    return math_composites.reduce_std(_bool_to_float(x), axis=axis, keepdims=keepdims)


def any(x, axis=None, keepdims=False):  # noqa: A001 - Keras' name
    return reduction_ops.reduce_any(cast_ops.cast(x, dtypes.bool), axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001 - Keras' name
    return reduction_ops.reduce_all(cast_ops.cast(x, dtypes.bool), axis, keepdims=keepdims)


def argmax(x, axis=-1):
    return reduction_ops.argmax(x, axis)


def argmin(x, axis=-1):
    return reduction_ops.argmin(x, axis)


def cumsum(x, axis=0):
    return gradient_ops.cumsum(x, axis=axis)


def cumprod(x, axis=0):
    return gradient_ops.cumprod(x, axis=axis)


# -- element-wise -----------------------------------------------------------------------------


def square(x):
    return math_ops.square(x)


def abs(x):  # noqa: A001 - Keras' name
    return math_ops.abs(x)


def sqrt(x):
    zero = ops.convert_to_tensor(0.0, ops.convert_to_tensor(x).dtype.base_dtype)
    return math_ops.sqrt(math_ops.maximum(x, zero))


def exp(x):
    return math_ops.exp(x)


def log(x):
    return math_ops.log(x)


def pow(x, a):  # noqa: A001 - Keras' name
    return math_ops.pow(x, a)


def sign(x):
    return math_ops.sign(x)


def round(x):  # noqa: A001 - Keras' name
    return math_ops.round(x)


def tanh(x):
    return math_ops.tanh(x)


def sigmoid(x):
    return math_ops.sigmoid(x)


def hard_sigmoid(x):
    x = 0.2 * ops.convert_to_tensor(x) + 0.5
    return clip_ops.clip_by_value(x, 0.0, 1.0)


def softmax(x, axis=-1):
    return nn_ops.softmax(x, axis=axis)


def softplus(x):
    return nn_ops.softplus(x)


def softsign(x):
    return nn_ops.softsign(x)


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    from asyncflow.keras import activations

    return activations.relu(x, alpha=alpha, max_value=max_value, threshold=threshold)


def elu(x, alpha=1.0):
    out = nn_ops.elu(x)
    return out if alpha == 1 else math_composites.where_v2(x > 0, out, alpha * out)


def minimum(x, y):
    return math_ops.minimum(x, y)


def maximum(x, y):
    return math_ops.maximum(x, y)


def equal(x, y):
    return math_ops.equal(x, y)


def not_equal(x, y):
    return math_ops.not_equal(x, y)


def greater(x, y):
    return math_ops.greater(x, y)


def greater_equal(x, y):
    return math_ops.greater_equal(x, y)


def less(x, y):
    return math_ops.less(x, y)


def less_equal(x, y):
    return math_ops.less_equal(x, y)


def clip(x, min_value, max_value):
    if max_value is not None and max_value < min_value:
        max_value = min_value
    if max_value is None:
        max_value = np.inf
    return clip_ops.clip_by_value(x, min_value, max_value)


# -- structure --------------------------------------------------------------------------------


def dot(x, y):
    """x @ y, contracting x's last axis with y's second-to-last (rank > 2 allowed)."""
    x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
    if x.shape.ndims == 2 and y.shape.ndims == 2:
        return math_ops.matmul(x, y)
    return math_composites.tensordot(x, y, [[x.shape.ndims - 1], [y.shape.ndims - 2]])


def batch_dot(x, y, axes=None):
    x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
    if axes is None:
        axes = [x.shape.ndims - 1, y.shape.ndims - 2]
    if isinstance(axes, int):
        axes = [axes, axes]
    return _batch_dot(x, y, axes)


def _batch_dot(x, y, axes):
    x_rank, y_rank = x.shape.ndims, y.shape.ndims
    ax, ay = axes[0] % x_rank, axes[1] % y_rank
    if x_rank == 2 and y_rank == 2:
        return reduction_ops.reduce_sum(x * y, axis=1, keepdims=True) if ax == ay == 1 else \
            reduction_ops.reduce_sum(x * y, axis=0, keepdims=True)  # fmt: skip
    xt = array_ops.transpose(x, [0] + [i for i in range(1, x_rank) if i != ax] + [ax])
    yt = array_ops.transpose(y, [0, ay] + [i for i in range(1, y_rank) if i != ay])
    return math_ops.matmul(xt, yt)


def transpose(x):
    return array_ops.transpose(x)


def permute_dimensions(x, pattern):
    return array_ops.transpose(x, perm=list(pattern))


def reshape(x, shape):
    return array_ops.reshape(x, shape)


def expand_dims(x, axis=-1):
    return array_ops.expand_dims(x, axis)


def squeeze(x, axis):
    return array_ops.squeeze(x, [axis])


def flatten(x):
    return array_ops.reshape(x, [-1])


def batch_flatten(x):
    x = ops.convert_to_tensor(x)
    return array_ops.reshape(x, array_ops.stack([-1, reduction_ops.reduce_prod(
        array_ops.shape(x)[1:])]))  # fmt: skip


def concatenate(tensors, axis=-1):
    if axis < 0:
        rank = ndim(tensors[0])
        axis = axis % rank if rank else 0
    return array_ops.concat([ops.convert_to_tensor(t) for t in tensors], axis)


def stack(x, axis=0):
    return array_ops.stack(x, axis=axis)


def tile(x, n):
    if isinstance(n, int):
        n = [n]
    return array_ops.tile(x, n)


def repeat_elements(x, rep, axis):
    return math_composites_2.repeat(x, rep, axis=axis)


def gather(reference, indices):
    return slicing_ops.gather(reference, indices)


def one_hot(indices, num_classes):
    return slicing_ops.one_hot(indices, depth=num_classes, axis=-1)


def switch(condition, then_expression, else_expression):
    """A Python or tensor boolean picks between two values (or callables)."""
    from asyncflow.ops import control_flow_cond

    then_fn = then_expression if callable(then_expression) else lambda: then_expression
    else_fn = else_expression if callable(else_expression) else lambda: else_expression
    if isinstance(condition, (bool, int, np.bool_)):
        return then_fn() if condition else else_fn()
    condition = ops.convert_to_tensor(condition)
    if condition.dtype != dtypes.bool:
        condition = cast_ops.cast(condition, dtypes.bool)
    return control_flow_cond.cond(condition, then_fn, else_fn)


def l2_normalize(x, axis=None):
    return nn_impl.l2_normalize(x, axis=axis)


def stop_gradient(variables):
    if isinstance(variables, (list, tuple)):
        return [gradient_ops.stop_gradient(v) for v in variables]
    return gradient_ops.stop_gradient(variables)


def gradients(loss, variables):
    from asyncflow.gradients import gradients as _gradients

    return _gradients(loss, variables, colocate_gradients_with_ops=True)


def dropout(x, level, noise_shape=None, seed=None):
    return nn_impl.dropout(x, rate=level, noise_shape=noise_shape, seed=_seed(seed))


def update(x, new_x):
    return x.assign(new_x)


def update_add(x, increment):
    return x.assign_add(increment)


def update_sub(x, decrement):
    return x.assign_sub(decrement)


# -- cross-entropies --------------------------------------------------------------------------


def _logits_of(output, op_type):
    """The logits behind `output`: those a Keras softmax or sigmoid activation made it
    from (whichever crossentropy asks: TF's quirk, so a binary crossentropy of a softmax
    output is a sigmoid crossentropy of its logits), or the input of a plain `op_type`
    op that made it (Keras' shortcut)."""
    if isinstance(output, ops.Tensor) and output._keras_logits is not None:
        return output._keras_logits
    if isinstance(output, ops.Tensor) and output.op.type == op_type:
        if keras_history(output) is None:
            return output.op.inputs[0]
    return None


def _clip_probabilities(output):
    eps = ops.convert_to_tensor(epsilon(), output.dtype.base_dtype)
    return clip_ops.clip_by_value(output, eps, 1.0 - eps)


def binary_crossentropy(target, output, from_logits=False):
    target, output = ops.convert_to_tensor(target), ops.convert_to_tensor(output)
    logits = output if from_logits else _logits_of(output, "Sigmoid")
    if logits is not None:
        return nn_impl.sigmoid_cross_entropy_with_logits(labels=target, logits=logits)
    output = _clip_probabilities(output)
    bce = target * math_ops.log(output + epsilon())
    bce += (1 - target) * math_ops.log(1 - output + epsilon())
    return -bce


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    target, output = ops.convert_to_tensor(target), ops.convert_to_tensor(output)
    target.shape.assert_is_compatible_with(output.shape)
    logits = output if from_logits else _logits_of(output, "Softmax")
    if logits is not None:
        return nn_impl.softmax_cross_entropy_with_logits_v2(labels=target, logits=logits,
                                                            axis=axis)  # fmt: skip
    output = output / reduction_ops.reduce_sum(output, axis, keepdims=True)
    output = _clip_probabilities(output)
    return -reduction_ops.reduce_sum(target * math_ops.log(output), axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1, ignore_class=None):
    """Keras' sparse categorical crossentropy; with `ignore_class`, targets of that class
    give a loss of 0 (the result's `_keras_mask` marks the others), as Keras'."""
    target, output = ops.convert_to_tensor(target), ops.convert_to_tensor(output)
    logits = None if from_logits else _logits_of(output, "Softmax")
    if logits is not None:
        output = logits
    elif not from_logits:
        output = math_ops.log(_clip_probabilities(output))
    rank = output.shape.ndims
    if rank is not None and axis % rank != rank - 1:
        perm = [i for i in range(rank) if i != axis % rank] + [axis % rank]
        output = array_ops.transpose(output, perm)
    out_shape = array_ops.shape(output)
    target_rank = target.shape.ndims
    reshape_ = target_rank is not None and rank is not None and target_rank != rank - 1
    if reshape_:
        target = array_ops.reshape(target, [-1])
        output = array_ops.reshape(output, array_ops.stack([-1, out_shape[-1]]))
    if ignore_class is not None:
        valid = math_ops.not_equal(target, cast_ops.cast(ignore_class, target.dtype))
        target = partition_ops.boolean_mask(target, valid)
        output = partition_ops.boolean_mask(output, valid)
    target = cast_ops.cast(target, dtypes.int64)
    res = nn_impl.sparse_softmax_cross_entropy_with_logits(labels=target, logits=output)
    if ignore_class is not None:
        res_shape = cast_ops.cast(out_shape[:-1], dtypes.int64)
        valid = array_ops.reshape(valid, res_shape)
        res = scatter_nd_ops.scatter_nd(array_ops.where(valid), res, res_shape)
        res._keras_mask = valid
        return res
    if reshape_ and rank >= 3:
        res = array_ops.reshape(res, out_shape[:-1])
    return res
