"""`af.layers`: TF1's functional layers (`tf.compat.v1.layers`), with TF1 variable names.

Each call opens `variable_scope(name, default_name=<layer>)`, so an unnamed layer gets
"dense", "dense_1", ... and its variables are "dense/kernel", "dense/bias" (inside any
enclosing variable scopes), and its ops sit under the same name scope ("dense/MatMul").
Reusing a name without `reuse=True` raises get_variable's ValueError, as in TF1.

batch_normalization keeps gamma, beta (trainable) and moving_mean, moving_variance
(not trainable); in training it adds the moving-average updates to
`GraphKeys.UPDATE_OPS` (run them with the train op, as TF1 programs do).  It uses the
fused kernel for 4-D inputs normalised over the channel axis (TF's `fused=None`), whose
moving variance is updated with the unbiased batch variance; otherwise `moments`
(biased), exactly as TF1.

`training` arguments may be Python bools or boolean tensors; a tensor selects between
both computations at run time.
"""

from __future__ import annotations

import contextlib

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.graph import GraphKeys
from asyncflow.nn_composites import separable_conv2d as _nn_separable_conv2d
from asyncflow.ops import (
    array_ops,
    control_flow_cond,
    conv_ops,
    init_ops,
    math_ops,
    nn_impl,
    nn_ops,
    pooling_ops,
    state_ops,
)

__all__ = [
    "dense",
    "conv2d",
    "max_pooling2d",
    "average_pooling2d",
    "flatten",
    "dropout",
    "batch_normalization",
]


class _InLayerScope:
    """Passed as `name` by a Layer object that has opened its own variable scope."""


IN_LAYER_SCOPE = _InLayerScope()


@contextlib.contextmanager
def _layer_scope(name, default_name, values, reuse):
    if name is IN_LAYER_SCOPE:
        yield None
        return
    with vs.variable_scope(name, default_name=default_name, values=values, reuse=reuse) as s:
        yield s


def _op_scope(name, default_name, values):
    # Inside a layer object's scope the ops go straight in it ("flatten/Reshape"), as
    # TF's layer classes name them; the functional form opens its own.
    if name is IN_LAYER_SCOPE:
        return contextlib.nullcontext()
    return ops.name_scope(name, default_name, values)


def _pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, int | np.integer):
        return int(value), int(value)
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise ValueError(f"The `{name}` argument must be a tuple of 2 integers. Received: {value}")
    return value


def _padding(padding: str) -> str:
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"The `padding` argument must be 'valid' or 'same'. Received: {padding}")
    return p


def _data_format(data_format: str) -> str:
    if data_format == "channels_last":
        return "NHWC"
    if data_format == "channels_first":
        return "NCHW"
    raise ValueError(
        f"The `data_format` argument must be 'channels_last' or 'channels_first'. "
        f"Received: {data_format}"
    )


def _activity(outputs, activation, activity_regularizer):
    if activation is not None:
        outputs = activation(outputs)
    if activity_regularizer is not None:
        with ops.name_scope("ActivityRegularizer"):
            loss = activity_regularizer(outputs)
        if loss is not None:
            ops.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return outputs


def _bias(outputs, units, dtype, use_bias, initializer, regularizer, constraint, trainable, fmt):
    if not use_bias:
        return outputs
    bias = vs.get_variable(
        "bias", [units], dtype=dtype, initializer=initializer, regularizer=regularizer,
        constraint=constraint, trainable=trainable,
    )  # fmt: skip
    return nn_ops.bias_add(outputs, bias, data_format=fmt)


def dense(
    inputs,
    units,
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """activation(inputs @ kernel + bias); inputs of rank > 2 are contracted on the last axis.

    Raises:
      ValueError: the last dimension of inputs is unknown, or a variable exists already
        (a repeated name without reuse=True).
    """
    with _layer_scope(name, "dense", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        if inputs.dtype.is_integer or inputs.dtype == dtypes.bool:
            inputs = math_ops.cast(inputs, dtypes.float32)
        shape = inputs.shape
        in_dim = tensor_shape.dimension_value(shape[-1]) if shape.ndims else None
        if in_dim is None:
            raise ValueError(
                "The last dimension of the inputs to `Dense` should be defined. Found `None`."
            )
        kernel = vs.get_variable(
            "kernel", [in_dim, int(units)], dtype=inputs.dtype, initializer=kernel_initializer,
            regularizer=kernel_regularizer, constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        if shape.ndims == 2:
            outputs = math_ops.matmul(inputs, kernel)
        else:
            flat = array_ops.reshape(inputs, [-1, in_dim])
            outputs = math_ops.matmul(flat, kernel)
            out_shape = array_ops.concat([array_ops.shape(inputs)[:-1], [int(units)]], 0)
            outputs = array_ops.reshape(outputs, out_shape)
            outputs.set_shape(shape[:-1].concatenate([int(units)]))
        outputs = _bias(outputs, int(units), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, None)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def conv2d(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    dilation_rate=(1, 1),
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """2-D convolution layer: variables "conv2d/kernel" [kh, kw, in, filters], "conv2d/bias".

    Raises:
      ValueError: the channel dimension of inputs is unknown, a bad padding or
        data_format, or a repeated name without reuse=True.
    """
    fmt = _data_format(data_format)
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation_rate, "dilation_rate")
    pad = _padding(padding)
    with _layer_scope(name, "conv2d", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        shape = inputs.shape.with_rank(4)
        in_ch = tensor_shape.dimension_value(shape[1] if fmt == "NCHW" else shape[3])
        if in_ch is None:
            raise ValueError(
                "The channel dimension of the inputs should be defined. Found `None`."
            )
        kernel = vs.get_variable(
            "kernel", [kh, kw, in_ch, int(filters)], dtype=inputs.dtype,
            initializer=kernel_initializer, regularizer=kernel_regularizer,
            constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        four = (lambda a, b: [1, 1, a, b]) if fmt == "NCHW" else (lambda a, b: [1, a, b, 1])
        outputs = conv_ops.conv2d(
            inputs, kernel, four(sh, sw), pad, data_format=fmt, dilations=four(dh, dw),
            name="Conv2D",
        )  # fmt: skip
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, fmt)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def _pooling(op_fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    fmt = _data_format(data_format)
    ph, pw = _pair(pool_size, "pool_size")
    sh, sw = _pair(strides, "strides")
    pad = _padding(padding)
    four = (lambda a, b: [1, 1, a, b]) if fmt == "NCHW" else (lambda a, b: [1, a, b, 1])
    with _op_scope(name, default_name, [inputs]):
        return op_fn(inputs, four(ph, pw), four(sh, sw), pad, data_format=fmt)


def max_pooling2d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """2-D max pooling (op "max_pooling2d/MaxPool").

    Raises:
      ValueError: a bad pool_size, strides, padding or data_format.
    """
    return _pooling(pooling_ops.max_pool, "max_pooling2d", inputs, pool_size, strides, padding,
                    data_format, name)  # fmt: skip


def average_pooling2d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """2-D average pooling (op "average_pooling2d/AvgPool").

    Raises:
      ValueError: a bad pool_size, strides, padding or data_format.
    """
    return _pooling(pooling_ops.avg_pool, "average_pooling2d", inputs, pool_size, strides,
                    padding, data_format, name)  # fmt: skip


def flatten(inputs, name=None, data_format="channels_last"):
    """Flattens all but the batch dimension (channels_first is first moved last, as TF).

    Raises:
      ValueError: a bad data_format.
    """
    fmt = _data_format(data_format)
    with _op_scope(name, "flatten", [inputs]):
        inputs = ops.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if fmt == "NCHW" and rank is not None and rank > 2:
            inputs = array_ops.transpose(inputs, [0, *range(2, rank), 1])
        shape = inputs.shape
        if rank is not None and shape[1:].is_fully_defined():
            flat = int(np.prod(shape[1:].as_list())) if rank > 1 else 1
            return array_ops.reshape(inputs, [-1, flat])
        batch = tensor_shape.dimension_value(shape[0]) if rank else None
        return array_ops.reshape(inputs, [batch if batch is not None else -1, -1])


def _smart_cond(training, if_true, if_false):
    """TF's smart_cond: a Python bool or a known tensor picks at build time; a boolean
    tensor picks at run time in a `cond`, so only the branch taken runs (dropout's
    random draw happens on training steps only, and its seeded stream advances as TF's
    does when evaluation steps come between them)."""
    if isinstance(training, bool | np.bool_):
        return if_true() if training else if_false()
    value = ops.constant_value(ops.convert_to_tensor(training))
    if value is not None:
        return if_true() if bool(value) else if_false()
    return control_flow_cond.cond(training, if_true, if_false)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Dropout (rate = fraction dropped) when `training`; the identity otherwise.

    Raises:
      ValueError: rate outside [0, 1).
    """
    with _op_scope(name, "dropout", [inputs]):
        inputs = ops.convert_to_tensor(inputs)
        return _smart_cond(
            training,
            lambda: nn_impl.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed),
            lambda: array_ops.identity(inputs),
        )


def _moving_update(variable, value, momentum, name):
    """variable -= (variable - value) * (1 - momentum), TF's AssignMovingAvg: the
    AssignSub op named by its scope ("batch_normalization/AssignMovingAvg"), as TF's
    layer names it; a Python momentum's decay is the Const "decay", a tensor's a Sub."""
    with ops.name_scope(name) as scope:
        v = ops.convert_to_tensor(variable)
        if isinstance(momentum, ops.Tensor):
            decay = 1.0 - momentum
        else:
            decay = ops.convert_to_tensor(1.0 - momentum, dtype=v.dtype, name="decay")
        update = (v - math_ops.cast(value, v.dtype)) * decay
        return state_ops.assign_sub(variable, update, name=scope)


def batch_normalization(
    inputs,
    axis=-1,
    momentum=0.99,
    epsilon=1e-3,
    center=True,
    scale=True,
    beta_initializer=init_ops.zeros_initializer(),
    gamma_initializer=init_ops.ones_initializer(),
    moving_mean_initializer=init_ops.zeros_initializer(),
    moving_variance_initializer=init_ops.ones_initializer(),
    beta_regularizer=None,
    gamma_regularizer=None,
    beta_constraint=None,
    gamma_constraint=None,
    training=False,
    trainable=True,
    name=None,
    reuse=None,
    renorm=False,
    renorm_clipping=None,
    renorm_momentum=0.99,
    fused=None,
    virtual_batch_size=None,
    adjustment=None,
):
    """Batch normalisation layer; in training, the moving-average updates go to UPDATE_OPS.

    Raises:
      ValueError: an axis out of range or of unknown size, fused=True where the fused
        kernel does not apply, or renorm/virtual_batch_size/adjustment (unsupported).
    """
    if renorm or virtual_batch_size is not None or adjustment is not None:
        raise ValueError("renorm, virtual_batch_size and adjustment are not supported")
    del renorm_clipping, renorm_momentum
    with _layer_scope(name, "batch_normalization", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is None:
            raise ValueError("Input has undefined rank.")
        ax = axis if isinstance(axis, int) else list(axis)
        if not isinstance(ax, int):
            if len(ax) != 1:
                raise ValueError("Only a single normalisation axis is supported")
            ax = ax[0]
        if not -rank <= ax < rank:
            raise ValueError(f"Invalid axis: {axis}")
        ax %= rank
        channels = tensor_shape.dimension_value(inputs.shape[ax])
        if channels is None:
            raise ValueError(f"Input has undefined `axis` dimension. Input shape: {inputs.shape}")
        can_fuse = rank == 4 and ax in (1, 3)
        if fused and not can_fuse:
            raise ValueError("fused=True needs a 4-D input normalised over axis 1 or 3")
        use_fused = can_fuse if fused is None else bool(fused)
        pdtype = dtypes.float32 if inputs.dtype == dtypes.float16 else inputs.dtype

        def var(name, init, reg=None, cons=None, train=trainable):
            return vs.get_variable(name, [channels], dtype=pdtype, initializer=init,
                                   regularizer=reg, constraint=cons, trainable=train)  # fmt: skip

        gamma = var("gamma", gamma_initializer, gamma_regularizer, gamma_constraint) if scale \
            else None  # fmt: skip
        beta = var("beta", beta_initializer, beta_regularizer, beta_constraint) if center \
            else None  # fmt: skip
        moving_mean = var("moving_mean", moving_mean_initializer, train=False)
        moving_var = var("moving_variance", moving_variance_initializer, train=False)
        if not isinstance(training, bool | np.bool_):
            # (TF's smart_cond: a tensor of known value picks at build time)
            value = ops.constant_value(ops.convert_to_tensor(training))
            training = bool(value) if value is not None else training
        if use_fused:
            return _fused_bn(inputs, gamma, beta, moving_mean, moving_var, ax, channels,
                             epsilon, momentum, training)  # fmt: skip
        return _plain_bn(inputs, gamma, beta, moving_mean, moving_var, ax, rank, epsilon,
                         momentum, training)  # fmt: skip


def _add_updates(moving_mean, moving_var, mean, variance, momentum, training=True):
    """The moving averages' updates, into UPDATE_OPS.  With a `training` tensor each
    is TF's cond (the update on training steps, the variable's value on others):
    the collection holds its Merge."""
    updates = []
    for variable, value, name in (
        (moving_mean, mean, "AssignMovingAvg"),
        (moving_var, variance, "AssignMovingAvg_1"),
    ):
        if training is True:
            updates.append(_moving_update(variable, value, momentum, name))
        else:
            updates.append(
                control_flow_cond.cond(
                    training,
                    lambda v=variable, x=value: _moving_update(v, x, momentum, "AssignMovingAvg"),
                    lambda v=variable: v,
                )
            )
    # (TF's layer collects the update operations, not their output tensors)
    for update in updates:
        ops.add_to_collection(GraphKeys.UPDATE_OPS, update.op)


def _fused_bn(inputs, gamma, beta, moving_mean, moving_var, ax, channels, eps, momentum,
              training):  # fmt: skip
    fmt = "NCHW" if ax == 1 else "NHWC"
    gamma = gamma if gamma is not None else np.ones(channels, np.float32)
    beta = beta if beta is not None else np.zeros(channels, np.float32)

    if isinstance(training, bool | np.bool_):
        if not training:
            y, _, _ = nn_impl.fused_batch_norm(
                inputs, gamma, beta, moving_mean, moving_var, epsilon=eps, data_format=fmt,
                is_training=False,
            )  # fmt: skip
            return y
        y, mean, variance = _fused_call(
            inputs, gamma, beta, moving_mean, moving_var, eps, fmt, True
        )
        # (TF's layer takes the momentum as a tensor here: the decay is 1 - momentum
        # in float32, where the plain path's is a constant.)
        momentum = ops.convert_to_tensor(np.float32(momentum))
        _add_updates(moving_mean, moving_var, mean, variance, momentum)
        return y
    # TF's layer on a training tensor: one cond picks the training or the inference
    # kernel (each reads the moving averages), another the momentum (1 on inference
    # steps, so the updates, which run on every step, leave the averages as they are).
    y, mean, variance = control_flow_cond.cond(
        training,
        lambda: _fused_call(inputs, gamma, beta, moving_mean, moving_var, eps, fmt, True),
        lambda: _fused_call(inputs, gamma, beta, moving_mean, moving_var, eps, fmt, False),
    )
    momentum = control_flow_cond.cond(
        training,
        lambda: ops.convert_to_tensor(np.float32(momentum)),
        lambda: ops.convert_to_tensor(np.float32(1.0)),
    )
    _add_updates(moving_mean, moving_var, mean, variance, momentum)
    return y


def _fused_call(inputs, gamma, beta, moving_mean, moving_var, eps, fmt, is_training):
    return nn_impl.fused_batch_norm(
        inputs, gamma, beta, moving_mean, moving_var, epsilon=eps, data_format=fmt,
        is_training=is_training,
    )  # fmt: skip


def _plain_bn(inputs, gamma, beta, moving_mean, moving_var, ax, rank, eps, momentum, training):
    reduce_axes = [i for i in range(rank) if i != ax]
    bshape = [1] * rank
    bshape[ax] = -1

    def bcast(v):
        # (TF reshapes the [channels] vectors only when they do not broadcast as they
        # are: the axis is not the last)
        if v is None:
            return None
        v = math_ops.cast(v, inputs.dtype)
        return v if ax == rank - 1 else array_ops.reshape(v, bshape)

    def normalize(mean, variance):
        return nn_impl.batch_normalization(inputs, bcast(mean), bcast(variance), bcast(beta),
                                           bcast(gamma), eps)  # fmt: skip

    if isinstance(training, bool | np.bool_) and not training:
        return normalize(moving_mean, moving_var)
    mean, variance = nn_impl.moments(inputs, reduce_axes)
    if isinstance(training, bool | np.bool_):
        _add_updates(moving_mean, moving_var, mean, variance, momentum)
        return normalize(mean, variance)
    # TF's layer on a training tensor: conds pick the batch's statistics or the moving
    # averages; the updates, conds too, run on training steps only.
    mean = control_flow_cond.cond(
        training, lambda: mean, lambda: ops.convert_to_tensor(moving_mean)
    )
    variance = control_flow_cond.cond(
        training, lambda: variance, lambda: ops.convert_to_tensor(moving_var)
    )
    _add_updates(moving_mean, moving_var, mean, variance, momentum, training)
    return normalize(mean, variance)


# -- more functional layers ---------------------------------------------------------------


def _one(value, name: str) -> int:
    if isinstance(value, int | np.integer):
        return int(value)
    value = tuple(int(v) for v in value)
    if len(value) != 1:
        raise ValueError(f"The `{name}` argument must be a tuple of 1 integer. Received: {value}")
    return value[0]


def _channels(inputs, fmt, rank):
    shape = inputs.shape.with_rank(rank)
    ch = tensor_shape.dimension_value(shape[1] if fmt.startswith("NC") else shape[-1])
    if ch is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    return ch


def conv1d(
    inputs,
    filters,
    kernel_size,
    strides=1,
    padding="valid",
    data_format="channels_last",
    dilation_rate=1,
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """1-D convolution layer over [batch, width, channels]: "conv1d/kernel" [k, in, filters]."""
    from asyncflow.ops import conv_pool_nd

    fmt = "NCW" if _data_format(data_format) == "NCHW" else "NWC"
    k, st, dil = (
        _one(kernel_size, "kernel_size"),
        _one(strides, "strides"),
        _one(dilation_rate, "dilation_rate"),
    )
    pad = _padding(padding)
    with _layer_scope(name, "conv1d", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 3)
        kernel = vs.get_variable(
            "kernel", [k, in_ch, int(filters)], dtype=inputs.dtype,
            initializer=kernel_initializer, regularizer=kernel_regularizer,
            constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        outputs = conv_pool_nd.conv1d(inputs, kernel, st, pad, data_format=fmt, dilations=dil)
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable,
                        "NCHW" if fmt == "NCW" else None)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def _deconv_length(size, stride, kernel, padding):
    if size is None:
        return None
    return size * stride if padding == "SAME" else size * stride + max(kernel - stride, 0)


def conv2d_transpose(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """Transposed 2-D convolution ("deconvolution"): kernel [kh, kw, filters, in]; output
    height in*stride ('same') or in*stride + max(k - stride, 0) ('valid'), as TF.

    Raises:
      ValueError: unknown channels, a bad padding or data_format, a repeated name.
    """
    fmt = _data_format(data_format)
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(strides, "strides")
    pad = _padding(padding)
    with _layer_scope(name, "conv2d_transpose", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 4)
        kernel = vs.get_variable(
            "kernel", [kh, kw, int(filters), in_ch], dtype=inputs.dtype,
            initializer=kernel_initializer, regularizer=kernel_regularizer,
            constraint=kernel_constraint, trainable=trainable,
        )  # fmt: skip
        hw = (2, 3) if fmt == "NCHW" else (1, 2)
        dyn = array_ops.shape(inputs)
        out_h = dyn[hw[0]] * sh + (0 if pad == "SAME" else max(kh - sh, 0))
        out_w = dyn[hw[1]] * sw + (0 if pad == "SAME" else max(kw - sw, 0))
        parts = (
            [dyn[0], int(filters), out_h, out_w]
            if fmt == "NCHW"
            else [dyn[0], out_h, out_w, int(filters)]
        )
        out_shape = array_ops.stack(parts)
        four = [1, 1, sh, sw] if fmt == "NCHW" else [1, sh, sw, 1]
        outputs = conv_ops.conv2d_transpose(
            inputs, kernel, out_shape, four, pad, data_format=fmt, name="conv2d_transpose"
        )
        st = inputs.shape
        h = _deconv_length(tensor_shape.dimension_value(st[hw[0]]), sh, kh, pad)
        w = _deconv_length(tensor_shape.dimension_value(st[hw[1]]), sw, kw, pad)
        b = tensor_shape.dimension_value(st[0])
        outputs.set_shape([b, int(filters), h, w] if fmt == "NCHW" else [b, h, w, int(filters)])
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, fmt)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def separable_conv2d(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    dilation_rate=(1, 1),
    depth_multiplier=1,
    activation=None,
    use_bias=True,
    depthwise_initializer=None,
    pointwise_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    depthwise_regularizer=None,
    pointwise_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    depthwise_constraint=None,
    pointwise_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """Depthwise then 1x1 pointwise convolution: "depthwise_kernel" [kh, kw, in, dm] and
    "pointwise_kernel" [1, 1, in*dm, filters]."""
    fmt = _data_format(data_format)
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation_rate, "dilation_rate")
    pad = _padding(padding)
    with _layer_scope(name, "separable_conv2d", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 4)
        dm = int(depth_multiplier)
        dk = vs.get_variable(
            "depthwise_kernel",
            [kh, kw, in_ch, dm],
            dtype=inputs.dtype,
            initializer=depthwise_initializer,
            regularizer=depthwise_regularizer,
            constraint=depthwise_constraint,
            trainable=trainable,
        )
        pk = vs.get_variable(
            "pointwise_kernel",
            [1, 1, in_ch * dm, int(filters)],
            dtype=inputs.dtype,
            initializer=pointwise_initializer,
            regularizer=pointwise_regularizer,
            constraint=pointwise_constraint,
            trainable=trainable,
        )
        four = [1, 1, sh, sw] if fmt == "NCHW" else [1, sh, sw, 1]
        outputs = _nn_separable_conv2d(inputs, dk, pk, four, pad, rate=(dh, dw), data_format=fmt)
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable, fmt)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def separable_conv1d(
    inputs,
    filters,
    kernel_size,
    strides=1,
    padding="valid",
    data_format="channels_last",
    dilation_rate=1,
    depth_multiplier=1,
    activation=None,
    use_bias=True,
    depthwise_initializer=None,
    pointwise_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    depthwise_regularizer=None,
    pointwise_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    depthwise_constraint=None,
    pointwise_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """The 1-D separable convolution, as the 2-D one over a unit height."""
    fmt = _data_format(data_format)
    k, st, dil = (
        _one(kernel_size, "kernel_size"),
        _one(strides, "strides"),
        _one(dilation_rate, "dilation_rate"),
    )
    pad = _padding(padding)
    with _layer_scope(name, "separable_conv1d", [inputs], reuse):
        inputs = ops.convert_to_tensor(inputs)
        in_ch = _channels(inputs, fmt, 3)
        dm = int(depth_multiplier)
        dk = vs.get_variable(
            "depthwise_kernel",
            [1, k, in_ch, dm],
            dtype=inputs.dtype,
            initializer=depthwise_initializer,
            regularizer=depthwise_regularizer,
            constraint=depthwise_constraint,
            trainable=trainable,
        )
        pk = vs.get_variable(
            "pointwise_kernel",
            [1, 1, in_ch * dm, int(filters)],
            dtype=inputs.dtype,
            initializer=pointwise_initializer,
            regularizer=pointwise_regularizer,
            constraint=pointwise_constraint,
            trainable=trainable,
        )
        ax = 2 if fmt == "NCHW" else 1
        x = array_ops.expand_dims(inputs, ax)
        four = [1, 1, 1, st] if fmt == "NCHW" else [1, 1, st, 1]
        y = _nn_separable_conv2d(x, dk, pk, four, pad, rate=(1, dil), data_format=fmt)
        outputs = array_ops.squeeze(y, [ax])
        outputs = _bias(outputs, int(filters), inputs.dtype, use_bias, bias_initializer,
                        bias_regularizer, bias_constraint, trainable,
                        "NCHW" if fmt == "NCHW" else None)  # fmt: skip
        return _activity(outputs, activation, activity_regularizer)


def _pooling1d(op_fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    fmt = _data_format(data_format)
    p, st = _one(pool_size, "pool_size"), _one(strides, "strides")
    pad = _padding(padding)
    with _op_scope(name, default_name, [inputs]):
        ax = 2 if fmt == "NCHW" else 1
        x = array_ops.expand_dims(ops.convert_to_tensor(inputs), ax)
        four = (lambda a: [1, 1, 1, a]) if fmt == "NCHW" else (lambda a: [1, 1, a, 1])
        return array_ops.squeeze(op_fn(x, four(p), four(st), pad, data_format=fmt), [ax])


def max_pooling1d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """1-D max pooling over [batch, width, channels]."""
    return _pooling1d(
        pooling_ops.max_pool,
        "max_pooling1d",
        inputs,
        pool_size,
        strides,
        padding,
        data_format,
        name,
    )


def average_pooling1d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """1-D average pooling over [batch, width, channels]."""
    return _pooling1d(
        pooling_ops.avg_pool,
        "average_pooling1d",
        inputs,
        pool_size,
        strides,
        padding,
        data_format,
        name,
    )


__all__ += [
    "conv1d",
    "conv2d_transpose",
    "separable_conv1d",
    "separable_conv2d",
    "max_pooling1d",
    "average_pooling1d",
]
