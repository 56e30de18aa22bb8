"""More of `tf.keras.backend`'s tensor functions: convolutions and pooling with Keras'
data_format handling, paddings, resizing, the functional loops (map_fn, foldl, foldr),
CTC helpers, batch normalization, random Bernoulli draws and small math.  Re-exported
by backend.py.

'channels_first' inputs are transposed to channels-last around the op, as Keras does on
a CPU (where TF has no NCHW kernels).
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from asyncflow import dtypes, image, sparse_tensor
from asyncflow import graph as ops
from asyncflow.keras import losses_more
from asyncflow.keras.backend_config import epsilon, floatx, image_data_format
from asyncflow.keras.backend_math import (
    _seed,
    batch_dot,
    binary_crossentropy,
    int_shape,
    ndim,
    repeat_elements,
)
from asyncflow.ops import (
    array_ops,
    cast_ops,
    conv3d_ops,
    conv_ops,
    conv_pool_nd,
    ctc_ops,
    functional_ops,
    logging_ops,
    manip_ops,
    math_ops,
    nn_impl,
    nn_ops,
    pooling_ops,
    random_ops,
    reduction_ops,
    scatter_nd_ops,
    sequence_ops,
    slicing_ops,
    sparse_ops,
)

__all__ = [
    "arange",
    "backend",
    "bias_add",
    "cast_to_floatx",
    "cos",
    "sin",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv2d_transpose",
    "depthwise_conv2d",
    "separable_conv2d",
    "pool2d",
    "pool3d",
    "foldl",
    "foldr",
    "map_fn",
    "in_top_k",
    "is_sparse",
    "to_dense",
    "print_tensor",
    "random_bernoulli",
    "random_binomial",
    "repeat",
    "reverse",
    "resize_images",
    "resize_volumes",
    "spatial_2d_padding",
    "spatial_3d_padding",
    "temporal_padding",
    "ctc_label_dense_to_sparse",
    "ctc_batch_cost",
    "ctc_decode",
    "batch_normalization",
    "normalize_batch_in_training",
    "binary_focal_crossentropy",
    "categorical_focal_crossentropy",
    "rnn",
    "local_conv1d",
    "local_conv2d",
]


def _data_format(data_format):
    data_format = data_format or image_data_format()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError("Unknown data_format: " + str(data_format))
    return data_format


def _padding(padding):
    if padding == "same":
        return "SAME"
    if padding == "valid":
        return "VALID"
    raise ValueError("Invalid padding: " + str(padding))


def _to_last(x, data_format, rank):
    if data_format != "channels_first":
        return x
    return array_ops.transpose(x, [0] + list(range(2, rank)) + [1])


def _to_first(x, data_format, rank):
    if data_format != "channels_first":
        return x
    return array_ops.transpose(x, [0, rank - 1] + list(range(1, rank - 1)))


def backend() -> str:
    """The name of the backend: 'tensorflow'."""
    return "tensorflow"


def arange(start, stop=None, step=1, dtype="int32"):
    if stop is None and start < 0:
        start = 0
    result = reduction_ops.range(start, limit=stop, delta=step, name="arange")
    return result if dtype == "int32" else cast_ops.cast(result, dtype)


def cast_to_floatx(x):
    if isinstance(x, (ops.Tensor, sparse_tensor.SparseTensor)):
        return cast_ops.cast(x, dtype=floatx())
    return np.asarray(x, dtype=floatx())


def cos(x):
    return math_ops.cos(x)


def sin(x):
    return math_ops.sin(x)


def bias_add(x, bias, data_format=None):
    """x + bias along the channels axis (bias of rank 1, or of x's rank - 1).

    Raises:
      ValueError: an unknown data_format or a bias of another rank.
    """
    data_format = _data_format(data_format)
    bias_shape = int_shape(bias)
    rank = ndim(x)
    if len(bias_shape) not in (1, rank - 1):
        raise ValueError(
            f"Unexpected bias dimensions {len(bias_shape)}, expect to be 1 or "
            f"{rank - 1} dimensions"
        )
    if len(bias_shape) == 1:
        if data_format == "channels_first":
            if rank == 4:
                return nn_ops.bias_add(x, bias, data_format="NCHW")
            return x + array_ops.reshape(bias, (1, bias_shape[0]) + (1,) * (rank - 2))
        return nn_ops.bias_add(x, bias)
    if data_format == "channels_first":
        return x + array_ops.reshape(bias, (1, bias_shape[-1]) + tuple(bias_shape[:-1]))
    return x + array_ops.reshape(bias, (1,) + tuple(bias_shape))


def conv1d(x, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """1D convolution; 'causal' padding pads the start by dilation * (width - 1)."""
    data_format = _data_format(data_format)
    kernel_shape = int_shape(kernel)
    if padding == "causal":
        left = dilation_rate * (kernel_shape[0] - 1)
        x = temporal_padding(x, (left, 0)) if data_format == "channels_last" else x
        if data_format == "channels_first":
            x = manip_ops.pad(x, [[0, 0], [0, 0], [left, 0]])
        padding = "valid"
    x = _to_last(x, data_format, 3)
    out = conv_pool_nd.convolution(
        x,
        kernel,
        padding=_padding(padding),
        strides=(strides,),
        dilation_rate=(dilation_rate,),
        data_format="NWC",
    )
    return _to_first(out, data_format, 3)


def conv2d(x, kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)):
    data_format = _data_format(data_format)
    x = _to_last(x, data_format, 4)
    out = conv_pool_nd.convolution(
        x,
        kernel,
        padding=_padding(padding),
        strides=strides,
        dilation_rate=dilation_rate,
        data_format="NHWC",
    )
    return _to_first(out, data_format, 4)


def conv3d(
    x, kernel, strides=(1, 1, 1), padding="valid", data_format=None, dilation_rate=(1, 1, 1)
):
    data_format = _data_format(data_format)
    x = _to_last(x, data_format, 5)
    out = conv_pool_nd.convolution(
        x,
        kernel,
        padding=_padding(padding),
        strides=strides,
        dilation_rate=dilation_rate,
        data_format="NDHWC",
    )
    return _to_first(out, data_format, 5)


def conv2d_transpose(
    x,
    kernel,
    output_shape,
    strides=(1, 1),
    padding="valid",
    data_format=None,
    dilation_rate=(1, 1),
):
    """The transpose of conv2d, with `output_shape` in `data_format` (None batch: x's);
    a dilation rate goes through atrous_conv2d_transpose (stride 1).

    Raises:
      ValueError: an unknown data_format or padding, or unequal dilation rates.
    """
    from asyncflow import nn_composites  # noqa: PLC0415 - library module, no cycle

    data_format = _data_format(data_format)
    dilation_rate = tuple(dilation_rate)
    output_shape = tuple(output_shape)
    if data_format == "channels_first":
        output_shape = (output_shape[0], output_shape[2], output_shape[3], output_shape[1])
    x = _to_last(x, data_format, 4)
    if output_shape[0] is None:
        output_shape = (array_ops.shape(x)[0],) + output_shape[1:]
    output_shape = manip_ops.stack(list(output_shape))
    if dilation_rate == (1, 1):
        out = conv_ops.conv2d_transpose(
            x,
            kernel,
            output_shape,
            strides=(1,) + tuple(strides) + (1,),
            padding=_padding(padding),
            data_format="NHWC",
        )
    else:
        if dilation_rate[0] != dilation_rate[1]:
            raise ValueError(
                "Expected the 2 dimensions of the `dilation_rate` argument to be equal to "
                f"each other. Received: dilation_rate={dilation_rate}"
            )
        out = nn_composites.atrous_conv2d_transpose(
            x, kernel, output_shape, rate=dilation_rate[0], padding=_padding(padding)
        )
    return _to_first(out, data_format, 4)


def depthwise_conv2d(
    x, depthwise_kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)
):
    data_format = _data_format(data_format)
    x = _to_last(x, data_format, 4)
    out = conv_ops.depthwise_conv2d(
        x,
        depthwise_kernel,
        strides=(1,) + tuple(strides) + (1,),
        padding=_padding(padding),
        rate=dilation_rate,
        data_format="NHWC",
    )
    return _to_first(out, data_format, 4)


def separable_conv2d(
    x,
    depthwise_kernel,
    pointwise_kernel,
    strides=(1, 1),
    padding="valid",
    data_format=None,
    dilation_rate=(1, 1),
):
    from asyncflow import nn_composites  # noqa: PLC0415 - library module, no cycle

    data_format = _data_format(data_format)
    x = _to_last(x, data_format, 4)
    out = nn_composites.separable_conv2d(
        x,
        depthwise_kernel,
        pointwise_kernel,
        strides=(1,) + tuple(strides) + (1,),
        padding=_padding(padding),
        rate=dilation_rate,
        data_format="NHWC",
    )
    return _to_first(out, data_format, 4)


def _pool(x, pool_size, strides, padding, data_format, pool_mode, rank, max_fn, avg_fn, fmt):
    data_format = _data_format(data_format)
    x = _to_last(x, data_format, rank)
    ksize, stride = (1,) + tuple(pool_size) + (1,), (1,) + tuple(strides) + (1,)
    if pool_mode == "max":
        out = max_fn(x, ksize, stride, padding=_padding(padding), data_format=fmt)
    elif pool_mode == "avg":
        out = avg_fn(x, ksize, stride, padding=_padding(padding), data_format=fmt)
    else:
        raise ValueError("Invalid pooling mode: " + str(pool_mode))
    return _to_first(out, data_format, rank)


def pool2d(x, pool_size, strides=(1, 1), padding="valid", data_format=None, pool_mode="max"):
    return _pool(
        x,
        pool_size,
        strides,
        padding,
        data_format,
        pool_mode,
        4,
        pooling_ops.max_pool,
        pooling_ops.avg_pool,
        "NHWC",
    )


def pool3d(x, pool_size, strides=(1, 1, 1), padding="valid", data_format=None, pool_mode="max"):
    return _pool(
        x,
        pool_size,
        strides,
        padding,
        data_format,
        pool_mode,
        5,
        conv3d_ops.max_pool3d,
        conv3d_ops.avg_pool3d,
        "NDHWC",
    )


def foldl(fn, elems, initializer=None, name=None):
    return functional_ops.foldl(fn, elems, initializer=initializer, name=name)


def foldr(fn, elems, initializer=None, name=None):
    return functional_ops.foldr(fn, elems, initializer=initializer, name=name)


def map_fn(fn, elems, name=None, dtype=None):
    return functional_ops.map_fn(fn, elems, name=name, dtype=dtype)


def in_top_k(predictions, targets, k):
    return nn_impl.in_top_k(predictions, targets, k)


def is_sparse(tensor) -> bool:
    return isinstance(tensor, sparse_tensor.SparseTensor)


def to_dense(tensor):
    return sparse_ops.sparse_tensor_to_dense(tensor) if is_sparse(tensor) else tensor


def print_tensor(x, message="", summarize=3):
    """`x`, printing `message` and its value to stdout each time it is computed."""
    printed = logging_ops.print_v2(message, x, output_stream=sys.stdout, summarize=summarize)
    with ops.control_dependencies([printed]):
        return array_ops.identity(x)


def random_bernoulli(shape, p=0.0, dtype=None, seed=None):
    """1 with probability p, else 0 (a uniform draw <= p)."""
    dtype = dtype or floatx()
    draw = random_ops.random_uniform(shape, dtype=dtype, seed=_seed(seed))
    return slicing_ops.where(
        draw <= p, array_ops.ones(shape, dtype=dtype), array_ops.zeros(shape, dtype=dtype)
    )


random_binomial = random_bernoulli


def repeat(x, n):
    """A (batch, n, dim) tensor repeating the rows of a 2D `x` n times."""
    if ndim(x) != 2:
        raise ValueError(f"repeat expects a 2D input, got rank {ndim(x)}")
    x = array_ops.expand_dims(x, 1)
    return manip_ops.tile(x, manip_ops.stack([1, n, 1]))


def reverse(x, axes):
    if isinstance(axes, int):
        axes = [axes]
    return slicing_ops.reverse(x, axes)


def resize_images(x, height_factor, width_factor, data_format, interpolation="nearest"):
    """Images scaled by integer factors ('nearest' or 'bilinear', TF2's half-pixel
    sampling).

    Raises:
      ValueError: an unknown data_format or interpolation.
    """
    data_format = _data_format(data_format)
    rows, cols = (2, 3) if data_format == "channels_first" else (1, 2)
    original = int_shape(x)
    size = array_ops.shape(x)[rows : cols + 1] * array_ops.constant(
        np.array([height_factor, width_factor], dtype="int32")
    )
    x = _to_last(x, data_format, 4)
    if interpolation == "nearest":
        x = image.resize_nearest_neighbor(x, size, half_pixel_centers=True)
    elif interpolation == "bilinear":
        x = image.resize_bilinear(x, size, half_pixel_centers=True)
    else:
        raise ValueError(
            '`interpolation` argument should be one of: "nearest", "bilinear". '
            f'Received: "{interpolation}".'
        )
    x = _to_first(x, data_format, 4)
    new = list(original)
    new[rows] = None if original[rows] is None else original[rows] * height_factor
    new[cols] = None if original[cols] is None else original[cols] * width_factor
    x.set_shape(new)
    return x


def resize_volumes(x, depth_factor, height_factor, width_factor, data_format):
    data_format = _data_format(data_format)
    first = 2 if data_format == "channels_first" else 1
    x = repeat_elements(x, depth_factor, axis=first)
    x = repeat_elements(x, height_factor, axis=first + 1)
    return repeat_elements(x, width_factor, axis=first + 2)


def temporal_padding(x, padding=(1, 1)):
    return manip_ops.pad(x, [[0, 0], list(padding), [0, 0]])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None):
    data_format = _data_format(data_format)
    inner = [list(padding[0]), list(padding[1])]
    pattern = (
        [[0, 0], [0, 0]] + inner
        if data_format == "channels_first"
        else ([[0, 0]] + inner + [[0, 0]])
    )
    return manip_ops.pad(x, pattern)


def spatial_3d_padding(x, padding=((1, 1), (1, 1), (1, 1)), data_format=None):
    data_format = _data_format(data_format)
    inner = [list(p) for p in padding]
    pattern = (
        [[0, 0], [0, 0]] + inner
        if data_format == "channels_first"
        else ([[0, 0]] + inner + [[0, 0]])
    )
    return manip_ops.pad(x, pattern)


def ctc_label_dense_to_sparse(labels, label_lengths):
    """The first label_lengths[i] labels of each row of `labels`, as a SparseTensor."""
    labels = ops.convert_to_tensor(labels)
    mask = sequence_ops.sequence_mask(label_lengths, maxlen=array_ops.shape(labels)[1])
    indices = slicing_ops.where(mask)
    values = scatter_nd_ops.gather_nd(labels, indices)
    return sparse_tensor.SparseTensor(
        indices, values, cast_ops.cast(array_ops.shape(labels), dtypes.int64)
    )


def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    """Per-sample CTC loss, shape (batch, 1), from softmax outputs y_pred (batch, time,
    classes; the last class the blank)."""
    label_length = cast_ops.cast(array_ops.squeeze(label_length, axis=-1), dtypes.int32)
    input_length = cast_ops.cast(array_ops.squeeze(input_length, axis=-1), dtypes.int32)
    sparse_labels = ctc_label_dense_to_sparse(cast_ops.cast(y_true, dtypes.int32), label_length)
    y_pred = math_ops.log(array_ops.transpose(y_pred, [1, 0, 2]) + epsilon())
    loss = ctc_ops.ctc_loss(labels=sparse_labels, inputs=y_pred, sequence_length=input_length)
    return array_ops.expand_dims(loss, 1)


def ctc_decode(y_pred, input_length, greedy=True, beam_width=100, top_paths=1):
    """([decoded (batch, time) with -1 padding, ...], log probabilities) by greedy or
    beam search decoding of softmax outputs."""
    shape = array_ops.shape(y_pred)
    num_samples, num_steps = shape[0], shape[1]
    y_pred = math_ops.log(array_ops.transpose(y_pred, [1, 0, 2]) + epsilon())
    input_length = cast_ops.cast(input_length, dtypes.int32)
    if greedy:
        decoded, log_prob = ctc_ops.ctc_greedy_decoder(y_pred, input_length)
    else:
        decoded, log_prob = ctc_ops.ctc_beam_search_decoder(
            y_pred, input_length, beam_width=beam_width, top_paths=top_paths
        )
    dense_shape = cast_ops.cast(manip_ops.stack([num_samples, num_steps]), dtypes.int64)
    dense = [
        sparse_ops.sparse_tensor_to_dense(
            sparse_tensor.SparseTensor(st.indices, st.values, dense_shape), default_value=-1
        )
        for st in decoded
    ]
    return dense, log_prob


def batch_normalization(x, mean, var, beta, gamma, axis=-1, epsilon=1e-3):  # noqa: A002
    return nn_impl.batch_normalization(x, mean, var, beta, gamma, epsilon)


def normalize_batch_in_training(x, gamma, beta, reduction_axes, epsilon=1e-3):  # noqa: A002
    """(normalized x, batch mean, batch variance) over `reduction_axes`."""
    mean, variance = nn_impl.moments(x, reduction_axes, keep_dims=False)
    if ndim(x) == 4 and list(reduction_axes) == [0, 1, 2]:
        # Keras takes the fused kernel here, which reports the unbiased variance (the
        # normalization itself uses the biased one); channels-first takes the plain path
        # on a CPU.
        normed = nn_impl.batch_normalization(x, mean, variance, beta, gamma, epsilon)
        count = cast_ops.cast(array_ops.size(x), variance.dtype) / cast_ops.cast(
            array_ops.size(mean), variance.dtype
        )
        return normed, mean, variance * count / math_ops.maximum(count - 1.0, 1.0)
    if sorted(reduction_axes) == list(range(ndim(x)))[:-1]:
        return nn_impl.batch_normalization(x, mean, variance, beta, gamma, epsilon), mean, variance
    # Statistics of other axes: broadcast them back over the reduced axes.
    target = [1] * ndim(x)
    for axis in range(ndim(x)):
        if axis not in reduction_axes:
            target[axis] = array_ops.shape(x)[axis]
    target = manip_ops.stack(target)
    bmean, bvar = array_ops.reshape(mean, target), array_ops.reshape(variance, target)
    bgamma = None if gamma is None else array_ops.reshape(gamma, target)
    bbeta = None if beta is None else array_ops.reshape(beta, target)
    normed = nn_impl.batch_normalization(x, bmean, bvar, bbeta, bgamma, epsilon)
    return normed, mean, variance


def binary_focal_crossentropy(
    target, output, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False
):
    """Element-wise binary focal crossentropy: (1 - p_t) ** gamma times the binary
    crossentropy, weighted by alpha / 1 - alpha with apply_class_balancing."""
    target, output = ops.convert_to_tensor(target), ops.convert_to_tensor(output)
    bce = binary_crossentropy(target, output, from_logits=from_logits)
    if from_logits:
        output = math_ops.sigmoid(output)
    p_t = target * output + (1.0 - target) * (1.0 - output)
    loss = math_ops.pow(1.0 - p_t, gamma) * bce
    if apply_class_balancing:
        loss = (target * alpha + (1.0 - target) * (1.0 - alpha)) * loss
    return loss


def categorical_focal_crossentropy(
    target, output, alpha=0.25, gamma=2.0, from_logits=False, axis=-1
):
    """Categorical focal crossentropy summed over `axis`."""
    return losses_more.categorical_focal_crossentropy(
        target, output, alpha=alpha, gamma=gamma, from_logits=from_logits, axis=axis
    )


def rnn(
    step_function,
    inputs,
    initial_states,
    go_backwards=False,
    mask=None,
    constants=None,
    unroll=False,
    input_length=None,
    time_major=False,
    zero_output_for_mask=False,
    return_all_outputs=True,
):
    """(last output, outputs over time, final states) of `step_function(input_t,
    states [+ constants])` over the time axis, unrolled over the static time steps; a
    (batch, time) `mask` keeps the previous output (or zeros) and states where False.

    Raises:
      ValueError: inputs of rank < 3, or an unknown number of time steps.
    """
    # As in TF1 graph mode (v2 behaviour off), every step's output is returned.
    return_all_outputs = True
    inputs = ops.convert_to_tensor(inputs)
    if inputs.shape.ndims is None or inputs.shape.ndims < 3:
        raise ValueError("Input should be at least 3D.")
    if not time_major:
        perm = [1, 0] + list(range(2, inputs.shape.ndims))
        inputs = array_ops.transpose(inputs, perm)
        if mask is not None:
            mask = array_ops.transpose(ops.convert_to_tensor(mask), [1, 0])
    steps = inputs.shape.as_list()[0]
    if steps is None:
        raise ValueError("rnn: the number of time steps must be known (unrolled here)")
    if mask is not None:
        mask = cast_ops.cast(mask, dtypes.bool)
    order = list(range(steps))[::-1] if go_backwards else list(range(steps))
    states = list(initial_states)
    outputs, last, prev_output = [], None, None
    for t in order:
        output, new_states = step_function(inputs[t], states + list(constants or []))
        new_states = list(new_states) if isinstance(new_states, (list, tuple)) else [new_states]
        if mask is not None:
            keep = mask[t]

            def pick(new, old, keep=keep):
                cond = keep
                for _ in range(new.shape.ndims - 1):
                    cond = array_ops.expand_dims(cond, -1)
                cond = math_ops.logical_and(cond, array_ops.ones_like(new, dtype=dtypes.bool))
                return slicing_ops.where(cond, new, old)

            if prev_output is None:
                prev_output = array_ops.zeros_like(output)
            fallback = array_ops.zeros_like(output) if zero_output_for_mask else prev_output
            output = pick(output, fallback)
            new_states = [pick(n, o) for n, o in zip(new_states, states, strict=True)]
            prev_output = pick(output, prev_output) if not zero_output_for_mask else output
        states = new_states
        outputs.append(output)
        last = output
    if mask is not None and not zero_output_for_mask:
        last = prev_output
    stacked = manip_ops.stack(outputs) if return_all_outputs else array_ops.expand_dims(last, 0)
    if not time_major:
        stacked = array_ops.transpose(stacked, [1, 0] + list(range(2, stacked.shape.ndims)))
    return last, stacked, states


def _local_conv(inputs, kernel, kernel_size, strides, output_shape, data_format):
    """Convolution with a separate kernel per output position: each window flattened
    and multiplied by its own (feature_dim, filters) slice of `kernel`."""
    data_format = _data_format(data_format)
    feature_dim, filters = int_shape(kernel)[1], int_shape(kernel)[-1]
    rank = len(output_shape)
    windows = []
    for position in itertools.product(*(range(n) for n in output_shape)):
        index = [slice(None)] + ([slice(None)] if data_format == "channels_first" else [])
        index += [
            slice(p * s, p * s + k) for p, s, k in zip(position, strides, kernel_size, strict=True)
        ]
        if data_format == "channels_last":
            index.append(slice(None))
        windows.append(array_ops.reshape(inputs[tuple(index)], (1, -1, feature_dim)))
    out = batch_dot(manip_ops.concat(windows, axis=0), kernel)
    out = array_ops.reshape(out, tuple(output_shape) + (-1, filters))
    spatial = list(range(rank))
    if data_format == "channels_first":
        perm = [rank, rank + 1] + spatial
    else:
        perm = [rank] + spatial + [rank + 1]
    return array_ops.transpose(out, perm)


def local_conv1d(inputs, kernel, kernel_size, strides, data_format=None):
    return _local_conv(inputs, kernel, kernel_size, strides, (int_shape(kernel)[0],), data_format)


def local_conv2d(inputs, kernel, kernel_size, strides, output_shape, data_format=None):
    return _local_conv(inputs, kernel, kernel_size, strides, output_shape, data_format)
