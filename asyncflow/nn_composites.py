"""More of TF1's `tf.nn`, built from existing ops (so each differentiates through them):
activations (swish/silu, crelu, relu_layer), statistics
(sufficient_statistics, normalize_moments, weighted_moments, zero_fraction), losses
(log_poisson_loss, compute_average_loss, scale_regularization_loss), depth/space
rearrangements, 1-D pooling and transposed convolution,
atrous and separable convolution, embedding_lookup_sparse and
batch_norm_with_global_normalization.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, math_composites
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    conv_ops,
    manip_ops,
    math_ops,
    nn_impl,
    nn_ops,
    pooling_ops,
    reduction_ops,
    segment_ops,
    slicing_ops,
    space_ops,
    unique_ops,
)

__all__ = [
    "swish",
    "silu",
    "crelu",
    "relu_layer",
    "sufficient_statistics",
    "normalize_moments",
    "weighted_moments",
    "zero_fraction",
    "log_poisson_loss",
    "compute_average_loss",
    "scale_regularization_loss",
    "depth_to_space",
    "space_to_depth",
    "max_pool1d",
    "avg_pool1d",
    "conv1d_transpose",
    "atrous_conv2d",
    "atrous_conv2d_transpose",
    "separable_conv2d",
    "embedding_lookup_sparse",
    "batch_norm_with_global_normalization",
    "conv_transpose",
    "depthwise_conv2d_backprop_input",
    "depthwise_conv2d_backprop_filter",
]

# TF1's tf.nn names for the native depthwise backprops (same arguments).
depthwise_conv2d_backprop_input = conv_ops.depthwise_conv2d_native_backprop_input
depthwise_conv2d_backprop_filter = conv_ops.depthwise_conv2d_native_backprop_filter


@_dispatch.add_dispatch_support
def swish(features, beta=1.0, name=None):
    """x * sigmoid(beta * x)."""
    with ops.name_scope(name, "swish", [features]):
        x = ops.convert_to_tensor(features, name="features")
        return x * math_ops.sigmoid(beta * x)


silu = swish


def crelu(features, name=None, axis=-1):
    """relu of [x, -x] concatenated along `axis`."""
    with ops.name_scope(name, "CRelu", [features]):
        x = ops.convert_to_tensor(features, name="features")
        return nn_ops.relu(manip_ops.concat([x, -x], axis))


def relu_layer(x, weights, biases, name=None):
    """relu(x @ weights + biases)."""
    with ops.name_scope(name, "relu_layer", [x, weights, biases]):
        return nn_ops.relu(nn_impl.xw_plus_b(x, weights, biases))


def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """(count, sum(x - shift), sum((x - shift)^2), shift) over `axes`; shift is None or
    a tensor."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with ops.name_scope(name, "sufficient_statistics", [x, shift]):
        x = ops.convert_to_tensor(x, name="x")
        known = x.shape.as_list() if x.shape.ndims is not None else None
        dims = [known[a] for a in axes] if known is not None else [None]
        if all(d is not None for d in dims):  # a constant, as TF, when the shape is known
            count = ops.convert_to_tensor(np.prod(dims, dtype=np.int64), dtype=x.dtype)
        else:
            shape = array_ops.shape(x)
            count = reduction_ops.reduce_prod(
                cast_ops.cast(slicing_ops.gather(shape, list(axes)), x.dtype), name="count"
            )
        if shift is None:
            xs, sq = x, math_ops.square(x)
        else:  # TF hands back the shift as a tensor, whatever it was given as
            shift = ops.convert_to_tensor(shift, name="shift")
            xs, sq = x - shift, math_ops.squared_difference(x, shift)
        m = reduction_ops.reduce_sum(xs, axes, keepdims=keep, name="mean_ss")
        v = reduction_ops.reduce_sum(sq, axes, keepdims=keep, name="var_ss")
        return count, m, v, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """(mean, variance) from sufficient statistics."""
    with ops.name_scope(name, "normalize", [counts, mean_ss, variance_ss, shift]):
        divisor = math_ops.reciprocal(counts, name="divisor")
        shifted_mean = math_ops.multiply(mean_ss, divisor, name="shifted_mean")
        if shift is None:
            mean = array_ops.identity(shifted_mean, name="mean")
        else:
            mean = math_ops.add(shifted_mean, shift, name="mean")
        variance = math_ops.subtract(
            math_ops.multiply(variance_ss, divisor), math_ops.square(shifted_mean), name="variance"
        )
        return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """Frequency-weighted mean and variance over `axes`; both 0 where the weights sum to
    0 (TF divides with div_no_nan). float16 is computed in float32, as TF does."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with ops.name_scope(name, "weighted_moments", [x, frequency_weights, axes]):
        x = ops.convert_to_tensor(x, name="x")
        out_dtype = x.dtype
        if x.dtype == dtypes.float16:
            x = cast_ops.cast(x, dtypes.float32)
        w = cast_ops.cast(ops.convert_to_tensor(frequency_weights), x.dtype)
        weighted_sum = reduction_ops.reduce_sum(w * x, axes, keepdims=True)
        wsum = reduction_ops.reduce_sum(w + array_ops.zeros_like(x), axes, keepdims=True)
        mean = math_composites.div_no_nan(weighted_sum, wsum)
        distsq = reduction_ops.reduce_sum(
            w * math_ops.squared_difference(x, mean), axes, keepdims=True
        )
        var = math_composites.div_no_nan(distsq, wsum)
        if not keep:
            mean = array_ops.squeeze(mean, list(axes))
            var = array_ops.squeeze(var, list(axes))
        if out_dtype != x.dtype:
            mean, var = cast_ops.cast(mean, out_dtype), cast_ops.cast(var, out_dtype)
        return mean, var


def zero_fraction(value, name=None):
    """The fraction of zeros in `value` (float32)."""
    with ops.name_scope(name, "zero_fraction", [value]):
        value = ops.convert_to_tensor(value, name="value")
        zero = math_ops.equal(value, array_ops.zeros_like(value))
        return reduction_ops.reduce_mean(cast_ops.cast(zero, dtypes.float32))


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """exp(log_input) - log_input * targets (+ Stirling's term with compute_full_loss)."""
    with ops.name_scope(name, "log_poisson_loss", [log_input, targets]):
        log_input = ops.convert_to_tensor(log_input, name="log_input")
        targets = ops.convert_to_tensor(targets, name="targets")
        result = math_ops.exp(log_input) - log_input * targets
        if compute_full_loss:
            t = targets
            stirling = t * math_ops.log(t) - t + 0.5 * math_ops.log(2.0 * np.pi * t)
            keep = math_ops.logical_and(
                math_ops.greater_equal(t, 0.0), math_ops.less_equal(t, 1.0)
            )
            result = result + slicing_ops.where(keep, array_ops.zeros_like(t), stirling)
        return result


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """sum(per_example_loss * sample_weight) / global_batch_size (the batch size when
    None; one replica)."""
    loss = ops.convert_to_tensor(per_example_loss)
    if sample_weight is not None:
        loss = loss * cast_ops.cast(sample_weight, loss.dtype)
    if global_batch_size is None:
        n = cast_ops.cast(array_ops.shape(loss)[0], loss.dtype)
    else:
        n = cast_ops.cast(global_batch_size, loss.dtype)
    return reduction_ops.reduce_sum(loss) / n


def scale_regularization_loss(regularization_loss):
    """The loss itself (divided by the number of replicas, which is one here)."""
    return (
        math_ops.add_n([regularization_loss])
        if isinstance(regularization_loss, (list, tuple))
        else ops.convert_to_tensor(regularization_loss)
    )


def _nhwc(data_format):
    if data_format not in ("NHWC", None):
        raise ValueError(f"Only NHWC data_format is supported here, got {data_format}")


def space_to_depth(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """Move each block_size x block_size spatial block into the depth axis."""
    _nhwc(data_format)
    with ops.name_scope(name, "SpaceToDepth", [input]):
        x = ops.convert_to_tensor(input, name="input")
        b = int(block_size)
        n, h, w, c = (x.shape[i].value for i in range(4))
        if None in (h, w, c):
            raise ValueError("space_to_depth needs known height, width and depth")
        if h % b or w % b:
            raise ValueError(f"Image dimensions {h}x{w} must be divisible by block_size {b}")
        y = array_ops.reshape(x, [-1, h // b, b, w // b, b, c])
        y = array_ops.transpose(y, [0, 1, 3, 2, 4, 5])
        return array_ops.reshape(y, [-1, h // b, w // b, b * b * c])


def depth_to_space(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """The inverse of space_to_depth."""
    _nhwc(data_format)
    with ops.name_scope(name, "DepthToSpace", [input]):
        x = ops.convert_to_tensor(input, name="input")
        b = int(block_size)
        n, h, w, c = (x.shape[i].value for i in range(4))
        if None in (h, w, c):
            raise ValueError("depth_to_space needs known height, width and depth")
        if c % (b * b):
            raise ValueError(f"Depth {c} must be divisible by block_size squared {b * b}")
        y = array_ops.reshape(x, [-1, h, w, b, b, c // (b * b)])
        y = array_ops.transpose(y, [0, 1, 3, 2, 4, 5])
        return array_ops.reshape(y, [-1, h * b, w * b, c // (b * b)])


def _pool1d(fn, input, ksize, strides, padding, data_format, name, default):  # noqa: A002
    if data_format not in ("NWC", None):
        raise ValueError("Only NWC data_format is supported here")

    def one(v):
        v = [v] if isinstance(v, int) else list(v)
        return v[1] if len(v) == 3 else v[0]

    with ops.name_scope(name, default, [input]):
        x = array_ops.expand_dims(ops.convert_to_tensor(input), 1)
        if isinstance(padding, list | tuple):  # explicit pairs: none for the unit height
            padding = [list(padding[0]), [0, 0], *[list(p) for p in padding[1:]]]
        y = fn(x, [1, 1, one(ksize), 1], [1, 1, one(strides), 1], padding)
        return array_ops.squeeze(y, [1])


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    return _pool1d(
        pooling_ops.max_pool, input, ksize, strides, padding, data_format, name, "MaxPool1d"
    )


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    return _pool1d(
        pooling_ops.avg_pool, input, ksize, strides, padding, data_format, name, "AvgPool1D"
    )


def conv1d_transpose(
    input,
    filters,
    output_shape,
    strides,
    padding="SAME",  # noqa: A002
    data_format="NWC",
    dilations=None,
    name=None,
):
    """The transpose of conv1d: filters [k, out_channels, in_channels]."""
    if data_format not in ("NWC", None):
        raise ValueError("Only NWC data_format is supported here")
    s = strides if isinstance(strides, int) else list(strides)[-2 if len(strides) == 3 else 0]
    with ops.name_scope(name, "conv1d_transpose", [input, filters, output_shape]):
        x = array_ops.expand_dims(ops.convert_to_tensor(input), 1)
        f = array_ops.expand_dims(ops.convert_to_tensor(filters), 0)
        shape = ops.convert_to_tensor(output_shape, dtype=dtypes.int32)
        shape4 = manip_ops.concat([shape[:1], [1], shape[1:]], 0)
        y = conv_ops.conv2d_transpose(x, f, shape4, [1, 1, s, 1], padding)
        return array_ops.squeeze(y, [1])


def atrous_conv2d(value, filters, rate, padding, name=None):
    """conv2d with the filter dilated by `rate`."""
    return conv_ops.conv2d(
        value, filters, [1, 1, 1, 1], padding, dilations=[1, rate, rate, 1], name=name
    )


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding, name=None):
    """The transpose of atrous_conv2d."""
    return conv_ops.conv2d_transpose(
        value,
        filters,
        output_shape,
        [1, 1, 1, 1],
        padding,
        dilations=[1, rate, rate, 1],
        name=name,
    )


def separable_conv2d(
    input,  # noqa: A002 - TF's name
    depthwise_filter,
    pointwise_filter,
    strides,
    padding,
    rate=None,
    name=None,
    data_format=None,
    dilations=None,
):
    """A depthwise convolution ("depthwise"), then a 1x1 Conv2D mixing channels, named
    as the scope (`tf.nn.separable_conv2d`); a rate other than 1 goes through
    SpaceToBatchND as in `depthwise_conv2d` (strides are then applied there, as TF's).

    Raises:
      ValueError: both rate and dilations given, a pointwise filter that is not 1x1, a
        bad padding or data_format.
    """
    rate = conv_ops._pick(rate, "rate", dilations, "dilations")  # noqa: SLF001
    scope_inputs = [input, depthwise_filter, pointwise_filter]
    with ops.name_scope(name, "separable_conv2d", scope_inputs) as scope:
        input = ops.convert_to_tensor(input, name="tensor_in")  # noqa: A001
        depthwise_filter = ops.convert_to_tensor(depthwise_filter, name="depthwise_filter")
        pointwise_filter = ops.convert_to_tensor(pointwise_filter, name="pointwise_filter")
        pw_shape = pointwise_filter.shape.with_rank(4)
        pw_shape.dims[0].assert_is_compatible_with(1)
        pw_shape.dims[1].assert_is_compatible_with(1)
        rate = conv_ops.atrous_rate(rate)

        def _native(x, _, pad):
            return conv_ops.depthwise_conv2d_native(
                x, depthwise_filter, strides, pad, data_format, name="depthwise"
            )

        depthwise = space_ops.with_space_to_batch(
            input,
            rate,
            padding,
            _native,
            filter_shape=array_ops.shape(depthwise_filter),
            data_format=data_format,
        )
        return conv_ops.conv2d(
            depthwise,
            pointwise_filter,
            [1, 1, 1, 1],
            "VALID",
            data_format=data_format or "NHWC",
            name=scope,
        )


def embedding_lookup_sparse(
    params,
    sp_ids,
    sp_weights,
    partition_strategy="mod",
    name=None,
    combiner=None,
    max_norm=None,
    allow_fast_lookup=False,
):
    """Per row of the SparseTensor `sp_ids` (indices in row order), the (weighted)
    combination of its ids' embeddings: "sum", "mean" (default) or "sqrtn".

    `params` may be a list of shards or a PartitionedVariable, as in `embedding_lookup`;
    each distinct id is looked up once.  As TF, the result has one row per row up to the
    last one holding an id (not `dense_shape[0]`); rows without ids in between are zeros.

    Raises:
      ValueError: an unknown combiner.
    """
    del allow_fast_lookup  # (TF's speed hint for ids without gaps: the same values)
    combiner = combiner or "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    if hasattr(params, "_get_variable_list"):
        params = list(params)
    if not isinstance(params, list | tuple):
        params = [params]
    with ops.name_scope(name, "embedding_lookup_sparse", [*params, sp_ids]) as scope:
        segment_ids = cast_ops.cast(sp_ids.indices[:, 0], dtypes.int32)
        ids, idx = unique_ops.unique(sp_ids.values)
        emb = nn_impl.embedding_lookup(params, ids, partition_strategy, max_norm=max_norm)
        emb = slicing_ops.gather(emb, idx)
        if sp_weights is None:
            weights = array_ops.ones_like(cast_ops.cast(sp_ids.values, emb.dtype))
        else:
            weights = cast_ops.cast(sp_weights.values, emb.dtype)
        total = segment_ops.segment_sum(
            emb * array_ops.expand_dims(weights, 1), segment_ids,
            name=scope if combiner == "sum" else None,
        )  # fmt: skip
        if combiner == "sum":
            return total
        if combiner == "mean":
            norm = segment_ops.segment_sum(weights, segment_ids)
        else:
            norm = math_ops.sqrt(segment_ops.segment_sum(weights * weights, segment_ids))
        return math_composites.div_no_nan(total, array_ops.expand_dims(norm, 1), name=scope)


def batch_norm_with_global_normalization(
    t=None,
    m=None,
    v=None,
    beta=None,
    gamma=None,
    variance_epsilon=None,
    scale_after_normalization=None,
    name=None,
    input=None,
    mean=None,  # noqa: A002
    variance=None,
):
    """TF1's deprecated batch norm: gamma applied only with scale_after_normalization."""
    t = input if t is None else t
    m = mean if m is None else m
    v = variance if v is None else v
    return nn_impl.batch_normalization(
        t, m, v, beta, gamma if scale_after_normalization else None, variance_epsilon, name=name
    )


def conv_transpose(
    input,
    filters,
    output_shape,
    strides,
    padding="SAME",  # noqa: A002
    data_format=None,
    dilations=None,
    name=None,
):
    """The N-d transposed convolution front end: 1-D and 2-D (by the filters' rank).

    Raises:
      ValueError: filters of another rank (3-D transposed convolution is not here).
    """
    rank = ops.convert_to_tensor(filters).shape.ndims
    if rank == 3:
        return conv1d_transpose(
            input, filters, output_shape, strides, padding, data_format or "NWC", dilations, name
        )
    if rank == 4:
        s = [strides] * 2 if isinstance(strides, int) else list(strides)
        if len(s) == 2:
            s = [1, *s, 1] if (data_format or "NHWC") == "NHWC" else [1, 1, *s]
        return conv_ops.conv2d_transpose(
            input,
            filters,
            output_shape,
            s,
            padding,
            data_format=data_format or "NHWC",
            dilations=dilations,
            name=name,
        )
    raise ValueError(f"conv_transpose supports 1-D and 2-D filters here, got rank {rank}")
